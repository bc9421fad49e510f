"""Several rounds of a hyperparameter step and a partition step in one draw.

A model whose component family has random hyperparameters mixes slowly in the number of
clusters because the labels and those hyperparameters move each other: each step moves its
block given the other, and the chain of one alternation per draw carries over much of the
previous draw.  :class:`AlternatingStep` applies its steps in sequence ``n_rounds`` times per
draw (each round with a share of the moves), which, at the same number of moves, alternates
the two blocks more often.  Each step leaves the joint posterior invariant, so their
composition in any number of rounds does too.

``pm.sample()`` builds one by itself (:func:`alternate_family_hyperparameters`, called by the
wrapper of PyMC's ``instantiate_steppers``) from the :class:`HyperparameterSlice` and the
:class:`DefaultPartitionStep` it assigned to a model with a random component family, with
that partition step's ``n_rounds``.
"""

from __future__ import annotations

from pymc.step_methods.compound import CompoundStep

try:  # pytensor >= 2.31
    from pytensor.graph.traversal import ancestors
except ImportError:  # pragma: no cover - older pytensor
    from pytensor.graph.basic import ancestors

from pymc_splitmerge.kernels.options import positive_integer
from pymc_splitmerge.steps.hyperparameters import HyperparameterSlice
from pymc_splitmerge.steps.sams import DefaultPartitionStep

__all__ = ["AlternatingStep", "alternate_family_hyperparameters"]


class AlternatingStep(CompoundStep):
    """Steps applied in sequence, ``n_rounds`` times per draw.

    Parameters
    ----------
    methods : list of step methods
        E.g. ``[psm.HyperparameterSlice([mu0, kappa0]), psm.DefaultPartitionStep(z)]``; each
        round applies them in this order, with the moves each is configured with (give each
        step its share of a draw's moves: ``n_updates``, ``n_split_merge_updates``).
    n_rounds : int, default 2

    Notes
    -----
    The sampler stats are those of the last round (``hyperslice_evaluations`` counts the
    evaluations of one round).
    """

    def __init__(self, methods, n_rounds: int = 2):
        self.n_rounds = positive_integer(n_rounds, "n_rounds")
        super().__init__(methods)

    def step(self, point):
        for _ in range(self.n_rounds):
            stats = []
            for method in self.methods:
                point, method_stats = method.step(point)
                stats.extend(method_stats)
        for method_stats in stats[:-1]:  # as CompoundStep: model_logp only in the last stats
            method_stats.pop("model_logp", None)
        return point, stats


def _feeds_family(value_var, partition_step) -> bool:
    """Whether the variable of ``value_var`` is an input of the component family of the
    mixture ``partition_step`` samples."""
    model = partition_step.model
    rv = model.values_to_rvs.get(value_var)
    observed = partition_step.partition_model.observed_var
    family_inputs = list(observed.owner.op.dist_params(observed.owner))[1:]
    return rv is not None and rv in set(ancestors(family_inputs))


def alternate_family_hyperparameters(steps: list, provided=()) -> list:
    """``steps`` (the list of steps PyMC's ``instantiate_steppers`` returned) with the assigned
    :class:`HyperparameterSlice` and :class:`DefaultPartitionStep` of one mixture replaced by
    an :class:`AlternatingStep` of the two, when the partition step's ``n_rounds`` is above 1.

    Only steps PyMC assigned (not in ``provided``), only when there is exactly one of each
    and every variable of the slice step feeds the partition's component family.  The slice
    step, unless given ``n_updates``, gets ``max(ceil(d / n_rounds), 3)`` moves per round for
    a block of dimension ``d``, the partition step, unless given ``n_split_merge_updates``,
    ``random_family_round_split_merge_updates`` per round.  Returns a list.
    """
    chosen = [step for step in steps if not any(step is other for other in provided)]
    slices = [step for step in chosen if type(step) is HyperparameterSlice]
    partitions = [step for step in chosen if type(step) is DefaultPartitionStep]
    if len(slices) != 1 or len(partitions) != 1:
        return steps
    (hyper,), (partition,) = slices, partitions
    if partition.n_rounds < 2 or not all(_feeds_family(v, partition) for v in hyper.vars):
        return steps
    if hyper.default_n_updates:
        hyper.n_updates = max(-(-hyper.dimension // partition.n_rounds), 3)
    if partition.default_n_split_merge_updates:
        partition.n_split_merge_updates = partition.random_family_round_split_merge_updates
        partition.transition = partition.build_transition()
    alternating = AlternatingStep([hyper, partition], n_rounds=partition.n_rounds)
    return [alternating if step is hyper else step for step in steps if step is not partition]
