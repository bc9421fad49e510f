"""PyMC distributions: partition priors, the conjugate mixture likelihood, model discovery.

See :mod:`.priors`, :mod:`.mixture` and :mod:`.discovery`.
"""

import warnings as _warnings

from pymc_splitmerge.distributions.discovery import PartitionModel, discover
from pymc_splitmerge.distributions.mixture import ConjugateMixture, ConjugateMixtureRV
from pymc_splitmerge.distributions.priors import (
    PARTITION_PRIOR_RV_TYPES,
    DirichletProcess,
    DirichletProcessRV,
    FiniteDirichlet,
    FiniteDirichletRV,
    MixtureOfFiniteMixtures,
    MixtureOfFiniteMixturesRV,
    PartitionPriorRV,
    PitmanYor,
    PitmanYorRV,
)

# Our random variables draw with NumPy (the numeric urn / prior predictive); under pytensor's
# numba backend they run in object mode by design, which is not worth a warning per compile.
_warnings.filterwarnings(
    "ignore",
    message=r"Numba will use object mode to run (dirichlet_process_rv|pitman_yor_rv|"
    r"finite_dirichlet_rv|MixtureOfFiniteMixturesRV|ConjugateMixtureRV)",
    category=UserWarning,
)

__all__ = [
    "PARTITION_PRIOR_RV_TYPES",
    "ConjugateMixture",
    "ConjugateMixtureRV",
    "DirichletProcess",
    "DirichletProcessRV",
    "FiniteDirichlet",
    "FiniteDirichletRV",
    "MixtureOfFiniteMixtures",
    "MixtureOfFiniteMixturesRV",
    "PartitionModel",
    "PartitionPriorRV",
    "PitmanYor",
    "PitmanYorRV",
    "discover",
]
