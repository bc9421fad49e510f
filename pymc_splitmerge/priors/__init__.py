"""Numeric Gibbs-type partition priors (no PyMC / PyTensor).

See :mod:`pymc_splitmerge.priors.base` for the interface shared by all priors.
"""

from pymc_splitmerge.priors.base import GibbsTypePrior, sample_partitions
from pymc_splitmerge.priors.dirichlet_process import (
    DirichletProcessPrior,
    dirichlet_process_expected_n_clusters,
)
from pymc_splitmerge.priors.finite_dirichlet import FiniteDirichletPrior
from pymc_splitmerge.priors.mixture_of_finite_mixtures import (
    ComponentCountPrior,
    ExplicitPmf,
    Geometric,
    MixtureOfFiniteMixturesPrior,
    ShiftedPoisson,
    mixture_of_finite_mixtures_log_v_table,
)
from pymc_splitmerge.priors.pitman_yor import PitmanYorPrior
from pymc_splitmerge.priors.registry import PRIOR_REGISTRY, register_prior

__all__ = [
    "PRIOR_REGISTRY",
    "ComponentCountPrior",
    "DirichletProcessPrior",
    "ExplicitPmf",
    "FiniteDirichletPrior",
    "Geometric",
    "GibbsTypePrior",
    "MixtureOfFiniteMixturesPrior",
    "PitmanYorPrior",
    "ShiftedPoisson",
    "dirichlet_process_expected_n_clusters",
    "mixture_of_finite_mixtures_log_v_table",
    "register_prior",
    "sample_partitions",
]
