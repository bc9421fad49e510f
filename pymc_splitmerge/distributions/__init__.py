"""PyMC distributions: partition priors, the conjugate mixture likelihood, model discovery.

See :mod:`.priors`, :mod:`.mixture` and :mod:`.discovery`.
"""

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
    quiet_object_mode,
)

quiet_object_mode(ConjugateMixtureRV)  # the priors' RV types register themselves

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
