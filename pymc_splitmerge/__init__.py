"""pymc_splitmerge: sample the partition of Bayesian mixture models in PyMC.

Partition priors (:class:`DirichletProcess`, :class:`PitmanYor`, :class:`FiniteDirichlet`,
:class:`MixtureOfFiniteMixtures`), a collapsed conjugate likelihood
(:class:`ConjugateMixture` with the families of :mod:`pymc_splitmerge.components`), step
methods (:class:`CollapsedGibbsStep`, :class:`SAMSStep`, :class:`RGSMStep`,
:class:`PGSMStep`, :class:`ARMStep`, :class:`ConcentrationGibbs`,
:class:`PartitionPriorSlice`, :class:`HyperparameterSlice`), :func:`sample` (``pm.sample`` with label-invariant convergence
checks), :func:`splitmerge_start` (start labels from a split-merge burn-in on a subsample),
sequential Monte Carlo with model evidence (:func:`sample_smc`, :func:`compare_evidence`) and the analysis of the resulting traces (:func:`summary`,
:func:`point_estimate`, :func:`sample_components`, ...).

Importing the package registers step methods with PyMC so that a plain ``pm.sample()``
samples partition variables with SAMS updates + one Gibbs sweep (``steps.DefaultPartitionStep``), a
Dirichlet-process concentration with a Gamma prior with :class:`ConcentrationGibbs` and the
other partition-prior parameters with :class:`PartitionPriorSlice` (where exact), and makes
``pm.sample``'s end-of-run R-hat / ESS checks skip the raw label vectors of partition
variables and check their label-invariant quantities instead, refuse a start of a partition
variable that PyMC would silently cast (float, NaN, out-of-range or wrong-length labels) with an
error saying what to give, and run its automatic step assignment inside the model's context, so
that ``pm.sample(model=model)`` picks the same steps as ``pm.sample()`` inside ``with model:``;
``pm.sample`` returns the label draws in the group ``"labels"`` (their label-invariant
quantities in the posterior) and ``pm.sample_posterior_predictive`` conditions on them
(:func:`install_pymc_hooks`, wrappers that call PyMC's own functions, all in
:mod:`pymc_splitmerge.sampling.hooks`; ``install_pymc_hooks(False)`` restores PyMC's).
"""

from pymc_splitmerge._compile_notice import install_compile_notice

install_compile_notice()  # before any kernel is loaded: one line if the first use compiles

from pymc_splitmerge import analysis, components, datasets, priors
from pymc_splitmerge._lazy import lazy_names
from pymc_splitmerge.components import ComponentFamily
from pymc_splitmerge.distributions import ConjugateMixture, discover
from pymc_splitmerge.distributions.cluster_parameters import ClusterParameter
from pymc_splitmerge.distributions.priors import PARTITION_PRIOR_DISTRIBUTIONS
from pymc_splitmerge.priors import ExplicitPmf, Geometric, ShiftedPoisson
from pymc_splitmerge.sampling import (
    install_pymc_hooks,
    partition_convergence_checks,
    sample,
    splitmerge_start,
)
from pymc_splitmerge.steps import (
    CollapsedGibbsStep,
    ConcentrationGibbs,
    HyperparameterSlice,
    PartitionPriorSlice,
    SAMSStep,
    SlotGibbsStep,
)

__version__ = "0.1.0.dev0"

install_pymc_hooks()

# every registered component family (components.registry.FAMILIES) and the PyMC distribution
# of every registered partition prior (priors.PRIOR_REGISTRY), each under its class name:
# read from the registries, so adding a family or a prior does not touch this file
_REGISTERED = {
    **components.FAMILY_CLASSES,
    **{distribution.__name__: distribution
       for distribution in PARTITION_PRIOR_DISTRIBUTIONS.values()},
}
globals().update(_REGISTERED)

# Loaded on first use (PEP 562): the analysis of traces and the testing utilities are not
# needed to build a model and sample it, and importing them (numba-compiled analysis kernels,
# plots, scipy.integrate / scipy.optimize for the oracle) would add ~0.3 CPU s to every
# ``import pymc_splitmerge``.  ``psm.summary``, ``psm.testing`` etc. work as before.  The
# ``analysis`` package itself is cheap (its own submodules load on first use, see its
# ``__init__``); the analysis names of ``__all__`` below are looked up there when first used.
# Likewise the split-merge steps that PyMC never assigns automatically (PGSM, ARM, RGSM) and
# sequential Monte Carlo, with their numba kernels (``kernels.pgsm`` / ``smc`` / ``arm`` /
# ``rgsm``), which the default sampler does not use: looked up in ``steps`` and ``sampling``
# (PEP 562 there too) when first used.
_LAZY_ELSEWHERE = {"testing": "testing", "ARMStep": "steps", "PGSMStep": "steps",
                   "RGSMStep": "steps", "compare_evidence": "sampling", "sample_smc": "sampling"}


__all__ = [
    "DIAGNOSTICS_GROUP",
    "ARMStep",
    # step methods
    "ClusterParameter",
    "CollapsedGibbsStep",
    # component families
    "ComponentFamily",
    "ConcentrationGibbs",
    "ConjugateMixture",
    "CredibleBall",
    "ExplicitPmf",
    "Geometric",
    "HyperparameterSlice",
    "PGSMStep",
    "PartitionPriorSlice",
    "PointEstimate",
    "RGSMStep",
    "SAMSStep",
    "ShiftedPoisson",
    "SlotGibbsStep",
    "add_partition_quantities",
    "adjusted_rand_index",
    "agreement_with_truth",
    "binder_distance",
    "block_fractions",
    "compare_evidence",
    "credible_ball",
    # modules
    "datasets",
    "discover",
    "distance_diagnostics",
    "expected_loss",
    "heldout_log_predictive_density",
    "install_pymc_hooks",
    "least_squares_draw",
    "log_joint_draws",
    "occupied_components",
    "partition_convergence_checks",
    "partition_quantities",
    "plot_block_fractions",
    "plot_component_parameters",
    "plot_n_clusters",
    "plot_similarity_matrix",
    "point_estimate",
    "posterior_similarity_matrix",
    "priors",
    # sampling with label-invariant convergence checks
    "sample",
    "sample_components",
    # sequential Monte Carlo with model evidence
    "sample_smc",
    # start labels from a split-merge burn-in on a subsample
    "splitmerge_start",
    # analysis
    "summary",
    "testing",
    "v_measure",
    "variation_of_information",
]
# component families and partition priors (PyMC distributions), from the registries
__all__ += list(_REGISTERED)
# the public names that come from the analysis package (loaded on first use, __getattr__)
_LAZY_ANALYSIS = frozenset(__all__).intersection(analysis.__all__)
__getattr__, __dir__ = lazy_names(
    __name__, globals(), {**dict.fromkeys(_LAZY_ANALYSIS, "analysis"), **_LAZY_ELSEWHERE})

