"""pymc_splitmerge: sample the partition of Bayesian mixture models in PyMC.

Partition priors (:class:`DirichletProcess`, :class:`PitmanYor`, :class:`FiniteDirichlet`,
:class:`MixtureOfFiniteMixtures`), a collapsed conjugate likelihood
(:class:`ConjugateMixture` with the families of :mod:`pymc_splitmerge.components`), step
methods (:class:`CollapsedGibbsStep`, :class:`SAMSStep`, :class:`RGSMStep`,
:class:`PGSMStep`, :class:`ARMStep`, :class:`ConcentrationGibbs`,
:class:`PartitionPriorSlice`), :func:`sample` (``pm.sample`` with label-invariant convergence
checks), sequential Monte Carlo with model evidence (:func:`sample_smc`,
:func:`compare_evidence`) and the analysis of the resulting traces (:func:`summary`,
:func:`point_estimate`, :func:`sample_components`, ...).

Importing the package registers step methods with PyMC so that a plain ``pm.sample()``
samples partition variables with SAMS + one Gibbs sweep (``steps.DefaultPartitionStep``), a
Dirichlet-process concentration with a Gamma prior with :class:`ConcentrationGibbs` and the
other partition-prior parameters with :class:`PartitionPriorSlice` (where exact).
"""

from pymc_splitmerge import datasets, priors, testing
from pymc_splitmerge.analysis import (
    DIAGNOSTICS_GROUP,
    CredibleBall,
    PointEstimate,
    add_partition_quantities,
    adjusted_rand_index,
    agreement_with_truth,
    binder_distance,
    block_fractions,
    credible_ball,
    distance_diagnostics,
    expected_loss,
    heldout_log_predictive_density,
    least_squares_draw,
    log_joint_draws,
    partition_quantities,
    plot_block_fractions,
    plot_n_clusters,
    plot_similarity_matrix,
    point_estimate,
    posterior_similarity_matrix,
    sample_components,
    summary,
    v_measure,
    variation_of_information,
)
from pymc_splitmerge.components import (
    BetaBernoulli,
    ComponentFamily,
    DirichletCategorical,
    GammaPoisson,
    GridComponent,
    NormalInverseGamma,
    NormalInverseWishart,
    NormalKnownCovariance,
    ProductFamily,
)
from pymc_splitmerge.distributions import (
    ConjugateMixture,
    DirichletProcess,
    FiniteDirichlet,
    MixtureOfFiniteMixtures,
    PitmanYor,
    discover,
)
from pymc_splitmerge.priors import ExplicitPmf, Geometric, ShiftedPoisson
from pymc_splitmerge.sampling import (
    compare_evidence,
    partition_convergence_checks,
    sample,
    sample_smc,
)
from pymc_splitmerge.steps import (
    ARMStep,
    CollapsedGibbsStep,
    ConcentrationGibbs,
    PartitionPriorSlice,
    PGSMStep,
    RGSMStep,
    SAMSStep,
)

__version__ = "0.1.0.dev0"

__all__ = [
    # partition priors and likelihood (PyMC distributions)
    "DirichletProcess",
    "PitmanYor",
    "FiniteDirichlet",
    "MixtureOfFiniteMixtures",
    "ShiftedPoisson",
    "Geometric",
    "ExplicitPmf",
    "ConjugateMixture",
    "discover",
    # component families
    "ComponentFamily",
    "NormalInverseWishart",
    "NormalKnownCovariance",
    "NormalInverseGamma",
    "BetaBernoulli",
    "DirichletCategorical",
    "GammaPoisson",
    "GridComponent",
    "ProductFamily",
    # step methods
    "CollapsedGibbsStep",
    "SAMSStep",
    "RGSMStep",
    "PGSMStep",
    "ARMStep",
    "ConcentrationGibbs",
    "PartitionPriorSlice",
    # sampling with label-invariant convergence checks
    "sample",
    "partition_convergence_checks",
    # sequential Monte Carlo with model evidence
    "sample_smc",
    "compare_evidence",
    # analysis
    "summary",
    "partition_quantities",
    "add_partition_quantities",
    "distance_diagnostics",
    "block_fractions",
    "posterior_similarity_matrix",
    "point_estimate",
    "PointEstimate",
    "least_squares_draw",
    "log_joint_draws",
    "expected_loss",
    "heldout_log_predictive_density",
    "sample_components",
    "credible_ball",
    "CredibleBall",
    "adjusted_rand_index",
    "variation_of_information",
    "binder_distance",
    "v_measure",
    "agreement_with_truth",
    "plot_block_fractions",
    "plot_n_clusters",
    "plot_similarity_matrix",
    "DIAGNOSTICS_GROUP",
    # modules
    "datasets",
    "priors",
    "testing",
]
