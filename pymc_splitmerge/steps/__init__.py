"""PyMC step methods for partition variables and the partition prior's parameters.

Importing this package registers, first in ``pymc.step_methods.STEP_METHODS`` (so that they
win PyMC's competence ties, e.g. over ``CategoricalGibbsMetropolis`` and NUTS):

* :class:`DefaultPartitionStep` (``SAMSStep(z, anchor_proposal="cluster",
  n_split_merge_updates=50, n_gibbs_sweeps=1)``) for every partition variable with a
  ``ConjugateMixture``;
* :class:`SlotGibbsStep` for every partition variable with cluster parameters
  (``ClusterParameter``);
* :class:`ConcentrationGibbs` for a Dirichlet-process ``alpha`` with a ``pm.Gamma`` prior
  (``pm.sample`` then hands an alpha whose Gamma parameters are constants to the partition's
  :class:`DefaultPartitionStep`, which integrates it out of its moves and draws it given the
  number of clusters: :func:`~pymc_splitmerge.steps.sams.integrate_concentration_out`);
* :class:`PartitionPriorSlice` for any other ``alpha`` / ``discount`` of a Dirichlet process,
  Pitman–Yor or finite-Dirichlet prior,
* :class:`HyperparameterSlice` for the continuous hyperparameters that feed only a
  ``ConjugateMixture``'s component family (one block, slice moves on the cluster statistics;
  ``pm.sample`` alternates it with the partition step, two rounds per draw on small data:
  :class:`AlternatingStep`),

the concentration steps only when the parameter is used directly as that input and influences nothing
else in the model (then their updates are exact).  Plain ``pm.sample()`` then picks these
steps; everything else gets PyMC's usual choice.
"""

from pymc.step_methods import STEP_METHODS

from pymc_splitmerge._lazy import lazy_names
from pymc_splitmerge.steps.alternation import AlternatingStep
from pymc_splitmerge.steps.base import PartitionStep
from pymc_splitmerge.steps.cluster_slots import SlotGibbsStep
from pymc_splitmerge.steps.concentration import ConcentrationGibbs, PartitionPriorSlice
from pymc_splitmerge.steps.gibbs import CollapsedGibbsStep
from pymc_splitmerge.steps.hyperparameters import HyperparameterSlice
from pymc_splitmerge.steps.sams import DefaultPartitionStep, SAMSStep

# Loaded on first use (PEP 562): the steps PyMC never assigns automatically (they are not in
# AUTOMATIC_STEP_METHODS below, so PyMC's step assignment never looks for them) and whose
# modules define numba kernels the default sampler does not use (kernels.pgsm / smc / arm /
# rgsm: ~45 cached dispatchers, ~0.01-0.02 CPU s of every cold ``import pymc_splitmerge``).
# ``psm.PGSMStep``, ``from pymc_splitmerge.steps import PGSMStep`` work as before.
_LAZY_STEPS = {"ARMStep": "arm", "PGSMStep": "pgsm", "RGSMStep": "rgsm"}

__all__ = [
    "ARMStep",
    "AlternatingStep",
    "CollapsedGibbsStep",
    "ConcentrationGibbs",
    "DefaultPartitionStep",
    "HyperparameterSlice",
    "PGSMStep",
    "PartitionPriorSlice",
    "PartitionStep",
    "RGSMStep",
    "SAMSStep",
    "SlotGibbsStep",
    "register_step_methods",
]


AUTOMATIC_STEP_METHODS = (DefaultPartitionStep, SlotGibbsStep, ConcentrationGibbs,
                          PartitionPriorSlice, HyperparameterSlice)


def register_step_methods() -> None:
    """Put our steps first in PyMC's automatic step-method registry (idempotent).

    PyMC picks, for each free variable, the registered class of highest ``competence`` (the
    first one on ties) and instantiates it with all the variables it won.
    """
    for step_class in reversed(AUTOMATIC_STEP_METHODS):
        if step_class in STEP_METHODS:
            STEP_METHODS.remove(step_class)
        STEP_METHODS.insert(0, step_class)


register_step_methods()


__getattr__, __dir__ = lazy_names(__name__, globals(), _LAZY_STEPS)
