"""Numeric Gibbs-type partition priors (no PyMC / PyTensor).

See :mod:`pymc_splitmerge.priors.base` for the interface shared by all priors.
"""

from pymc_splitmerge.priors.base import GibbsTypePrior
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

__all__ = [
    "GibbsTypePrior",
    "DirichletProcessPrior",
    "PitmanYorPrior",
    "FiniteDirichletPrior",
    "MixtureOfFiniteMixturesPrior",
    "ComponentCountPrior",
    "ShiftedPoisson",
    "Geometric",
    "ExplicitPmf",
    "dirichlet_process_expected_n_clusters",
    "mixture_of_finite_mixtures_log_v_table",
]
