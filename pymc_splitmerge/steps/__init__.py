"""PyMC step methods for partition variables and the partition prior's parameters.

Importing this package registers :class:`CollapsedGibbsStep` in
``pymc.step_methods.STEP_METHODS`` (first, so that it wins over
``CategoricalGibbsMetropolis`` for our partition variables): plain ``pm.sample()`` then
samples partitions with collapsed Gibbs.
"""

from pymc_splitmerge.steps.arm import ARMStep
from pymc_splitmerge.steps.base import PartitionStep
from pymc_splitmerge.steps.concentration import ConcentrationGibbs, PartitionPriorSlice
from pymc_splitmerge.steps.gibbs import CollapsedGibbsStep
from pymc_splitmerge.steps.pgsm import PGSMStep
from pymc_splitmerge.steps.rgsm import RGSMStep
from pymc_splitmerge.steps.sams import SAMSStep

__all__ = [
    "ARMStep",
    "CollapsedGibbsStep",
    "ConcentrationGibbs",
    "PGSMStep",
    "PartitionPriorSlice",
    "PartitionStep",
    "RGSMStep",
    "SAMSStep",
    "register_step_methods",
]


def register_step_methods() -> None:
    """Put our partition step first in PyMC's automatic step-method registry (idempotent)."""
    from pymc.step_methods import STEP_METHODS

    if CollapsedGibbsStep not in STEP_METHODS:
        STEP_METHODS.insert(0, CollapsedGibbsStep)


register_step_methods()
