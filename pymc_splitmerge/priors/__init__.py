"""Numeric Gibbs-type partition priors (no PyMC / PyTensor).

See :mod:`pymc_splitmerge.priors.base` for the interface shared by all priors.  Every prior
class of :data:`PRIOR_REGISTRY` (``priors/registry.py``, one line per prior) is exported here
under its class name, read from the registry (``docs/contracts.md``, "Adding a prior").
"""

from pymc_splitmerge.priors.base import GibbsTypePrior, sample_partitions
from pymc_splitmerge.priors.dirichlet_process import (
    GammaMixedDirichletProcessPrior,
    dirichlet_process_expected_n_clusters,
)
from pymc_splitmerge.priors.mixture_of_finite_mixtures import (
    ComponentCountPrior,
    ExplicitPmf,
    Geometric,
    ShiftedPoisson,
    mixture_of_finite_mixtures_log_v_table,
)
from pymc_splitmerge.priors.registry import PRIOR_REGISTRY, register_prior

PRIOR_CLASSES = {prior_class.__name__: prior_class for prior_class in PRIOR_REGISTRY.values()}
"""Every registered prior class by class name (what this package exports)."""

globals().update(PRIOR_CLASSES)

__all__ = [
    "PRIOR_CLASSES",
    "PRIOR_REGISTRY",
    "ComponentCountPrior",
    "ExplicitPmf",
    "GammaMixedDirichletProcessPrior",
    "Geometric",
    "GibbsTypePrior",
    "ShiftedPoisson",
    "dirichlet_process_expected_n_clusters",
    "mixture_of_finite_mixtures_log_v_table",
    "register_prior",
    "sample_partitions",
]
__all__ += list(PRIOR_CLASSES)
