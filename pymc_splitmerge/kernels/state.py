"""Partition state with incremental sufficient statistics (see ``core.slots``).

The kernels take the state as three structures (numba types named tuples natively):
:class:`Model` (family id, hyperparameters, data; read-only), :class:`Partition` (labels,
sizes, statistics rows, active-slot bookkeeping, mutated in place) and :class:`PriorTables`
(``log V`` / ``log W``).  :class:`PartitionState` owns the arrays and hands out the
structures (``state.model``, ``state.partition``, :func:`prior_tables`).

All point moves of every kernel go through ``assign_point`` / ``unassign_point`` /
``move_point`` here (or ``add`` / ``remove`` / ``move`` on the structures), which keep sizes,
the active-slot list and the family's statistics rows consistent.  The loose-array forms are
the leaf primitives of the hot loops: a compiled kernel unpacks the structures once at its
top (``labels, sizes, ... = partition``), because reading a named tuple's fields inside a hot
loop is up to 1.5x slower in numba than reading local arrays.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np
from numba.core import types
from numba.core.imputils import impl_ret_borrowed
from numba.extending import intrinsic, typeof_impl

from pymc_splitmerge.components import dispatch
from pymc_splitmerge.core.jit import njit
from pymc_splitmerge.core.slots import close_slot, free_slot, open_slot, reset_row

__all__ = [
    "Model",
    "Partition",
    "PartitionState",
    "PriorTables",
    "add",
    "assign_point",
    "free_slot",
    "log_target",
    "make_model",
    "move",
    "move_point",
    "prior_tables",
    "remove",
    "unassign_point",
]


class Model(NamedTuple):
    """What a kernel needs to know about the data and the component family (read-only).

    Passed to ``@njit`` kernels as one argument (numba types named tuples natively).
    """

    family_id: int
    """Family id (``components.registry``) selecting the dispatch branch."""
    params: np.ndarray
    """float64 (p,): the family's hyperparameters, flattened (``family.params``)."""
    x: np.ndarray
    """float64 (n, d): the data prepared by ``family.prepare_data``."""


@typeof_impl.register(Model)
def _typeof_model(model, context):
    # numba types a named tuple's int fields as int64, which would compile the kernels given
    # a Model from Python for every family; keep the FamilyId's literal type instead
    return types.NamedTuple(tuple(numba.typeof(field) for field in model), Model)


@intrinsic(prefer_literal=True)
def make_model(typingctx, family_id, params, x):
    """``Model(family_id, params, x)`` inside a numba function, keeping a literal family id.

    numba types ``Model(...)`` with the literal type of a
    :class:`~pymc_splitmerge.components.dispatch.FamilyId` widened to ``int64``, which makes
    the kernels below it compile the switch over every family; this keeps the field's type
    (the kernel stays specialised to its family).  Same value.
    """
    model_type = types.NamedTuple((family_id, params, x), Model)

    def codegen(context, builder, signature, args):
        model = context.make_tuple(builder, signature.return_type, args)
        # the arrays are borrowed from the arguments: the tuple returned holds new references
        return impl_ret_borrowed(context, builder, signature.return_type, model)

    return model_type(family_id, params, x), codegen


class PriorTables(NamedTuple):
    """``log V(n, K)`` and ``log W(m)`` of a Gibbs-type prior (``prior.tables(n)``)."""

    log_v: np.ndarray
    """float64 (n + 2,): ``log_v[K] = log V(n, K)``."""
    log_w: np.ndarray
    """float64 (n + 2,): ``log_w[m] = log W(m)``, ``log_w[0] = 0``."""


class Partition(NamedTuple):
    """The mutable partition state every kernel moves (layout in ``core.slots``).

    One structure instead of loose positional arrays: kernels take ``(model, partition, ...)``
    and mutate the arrays in place.
    """

    labels: np.ndarray
    """int64 (n,): slot of each point."""
    sizes: np.ndarray
    """int64 (capacity,): cluster size per slot, 0 for free slots."""
    stats: np.ndarray
    """float64 (capacity, s): sufficient-statistics row per slot (free: ``empty_row``)."""
    empty_row: np.ndarray
    """float64 (s,): the statistics of an empty cluster."""
    active: np.ndarray
    """int64 (capacity,): ``active[:cluster_count[0]]`` are the slots in use."""
    where: np.ndarray
    """int64 (capacity,): position of a slot in ``active``, -1 if free."""
    cluster_count: np.ndarray
    """int64 (1,): ``cluster_count[0]`` is the number of clusters K."""


def prior_tables(n: int, log_v_table, log_w_table) -> PriorTables:
    """The prior tables of ``n`` points as a :class:`PriorTables` of contiguous float64 arrays.

    Every kernel takes ``prior.tables(n)`` (``docs/contracts.md`` section 1), two arrays of
    length ``n + 2``; anything else is a caller error, reported here.
    """
    log_v_table = np.ascontiguousarray(log_v_table, dtype=np.float64)
    log_w_table = np.ascontiguousarray(log_w_table, dtype=np.float64)
    expected = n + 2
    if log_v_table.shape != (expected,) or log_w_table.shape != (expected,):
        raise ValueError(
            f"log_v_table and log_w_table must have shape ({expected},) = (n + 2,) for "
            f"n = {n} points (use prior.tables(n)); got {log_v_table.shape} and "
            f"{log_w_table.shape}"
        )
    return PriorTables(log_v_table, log_w_table)


@njit(cache=True, inline="always")
def unassign_point(family_id, params, x, i, labels, sizes, stats, empty_row, active, where,
                   cluster_count):
    """Take point ``i`` out of its cluster; close the cluster if it becomes empty.

    Returns the slot the point was in.  ``labels[i]`` is left unchanged.
    """
    slot = labels[i]
    sizes[slot] -= 1
    if sizes[slot] == 0:
        close_slot(slot, stats, empty_row, active, where, cluster_count)
    else:
        dispatch.remove_point_at(family_id, params, stats, slot, x, i)
    return slot


@njit(cache=True, inline="always")
def assign_point(family_id, params, x, i, slot, labels, sizes, stats, active, where,
                 cluster_count):
    """Put point ``i`` into ``slot`` (opening it if it is free)."""
    if where[slot] < 0:
        open_slot(slot, active, where, cluster_count)
    dispatch.add_point_at(family_id, params, stats, slot, x, i)
    sizes[slot] += 1
    labels[i] = slot


@njit(cache=True, inline="always")
def move_point(family_id, params, x, i, slot, labels, sizes, stats, empty_row, active, where,
               cluster_count):
    """Move point ``i`` from its cluster to ``slot`` (no-op if already there)."""
    if labels[i] == slot:
        return
    unassign_point(family_id, params, x, i, labels, sizes, stats, empty_row, active, where,
                   cluster_count)
    assign_point(family_id, params, x, i, slot, labels, sizes, stats, active, where,
                 cluster_count)


@njit(cache=True, inline="always")
def remove(model, partition, i):
    """:func:`unassign_point` on the structures: take point ``i`` out of its cluster."""
    p = partition
    return unassign_point(model.family_id, model.params, model.x, i, p.labels, p.sizes,
                          p.stats, p.empty_row, p.active, p.where, p.cluster_count)


@njit(cache=True, inline="always")
def add(model, partition, i, slot):
    """:func:`assign_point` on the structures: put point ``i`` into ``slot``."""
    p = partition
    assign_point(model.family_id, model.params, model.x, i, slot, p.labels, p.sizes, p.stats,
                 p.active, p.where, p.cluster_count)


@njit(cache=True, inline="always")
def move(model, partition, i, slot):
    """:func:`move_point` on the structures: move point ``i`` to ``slot``."""
    if partition.labels[i] == slot:
        return
    remove(model, partition, i)
    add(model, partition, i, slot)


@njit(cache=True)
def log_target(family_id, params, log_v_table, log_w_table, sizes, stats, active, cluster_count):
    """``log EPPF(z) + sum_b log m(y_b)``: the collapsed log joint of a state (ARM eq. 4's q)."""
    k = cluster_count[0]
    total = log_v_table[k]
    for j in range(k):
        slot = active[j]
        total += log_w_table[sizes[slot]] + dispatch.log_marginal(family_id, params, stats[slot])
    return total


@njit(cache=True)
def _build(family_id, params, x, canonical, sizes, stats, empty_row, active, where,
           cluster_count, labels):
    for slot in range(stats.shape[0]):
        reset_row(stats, slot, empty_row)
    for i in range(canonical.shape[0]):
        assign_point(family_id, params, x, i, canonical[i], labels, sizes, stats, active, where,
                     cluster_count)


@njit(cache=True)
def _canonical_slot_labels(slot_labels, capacity):
    """Slot labels (int64 in ``[0, capacity)``) relabelled by order of first appearance."""
    out = np.empty(slot_labels.shape[0], dtype=np.int64)
    mapping = np.empty(capacity, dtype=np.int64)  # filled here: np.full compiles 2 functions
    for slot in range(capacity):
        mapping[slot] = -1
    next_label = 0
    for i in range(slot_labels.shape[0]):
        slot = slot_labels[i]
        if mapping[slot] < 0:
            mapping[slot] = next_label
            next_label += 1
        out[i] = mapping[slot]
    return out


class PartitionState:
    """Labels, cluster sizes and per-cluster sufficient statistics of one partition.

    Parameters
    ----------
    family : ComponentFamily
        A numeric component family (``family.is_numeric``).
    x : ndarray of shape (n, data_dim)
        Data prepared by ``family.prepare_data``.
    labels : array_like of int, shape (n,)
        Any labelling of the partition (values need not be contiguous).

    Notes
    -----
    The arrays are mutated in place by the kernels.  ``labels()`` returns the
    canonical labelling (order of first appearance) for storage in a trace.
    """

    def __init__(self, family, x, labels):
        x = np.ascontiguousarray(x, dtype=np.float64)
        labels = np.asarray(labels)
        if labels.ndim != 1 or labels.shape[0] != x.shape[0]:
            raise ValueError(
                f"labels must have shape ({x.shape[0]},) to match the data; got {labels.shape}"
            )
        self.family = family
        self.family_id = family.family_id
        self.params = np.ascontiguousarray(family.params, dtype=np.float64)
        self.empty_row = np.ascontiguousarray(family.empty_stats, dtype=np.float64)
        self.x = x
        n = x.shape[0]
        self.n = n
        capacity = n + 2
        self.slot_labels = np.empty(n, dtype=np.int64)
        self.sizes = np.zeros(capacity, dtype=np.int64)
        self.stats = np.empty((capacity, self.empty_row.shape[0]), dtype=np.float64)
        self.active = np.zeros(capacity, dtype=np.int64)
        self.where = np.full(capacity, -1, dtype=np.int64)
        self.cluster_count = np.zeros(1, dtype=np.int64)
        _, canonical = np.unique(labels, return_inverse=True)
        _build(self.family_id, self.params, self.x, canonical.astype(np.int64), self.sizes,
               self.stats, self.empty_row, self.active, self.where, self.cluster_count,
               self.slot_labels)

    @property
    def n_clusters(self) -> int:
        return int(self.cluster_count[0])

    @property
    def model(self) -> Model:
        """The read-only :class:`Model` (family id, hyperparameters, data) kernels take."""
        return Model(self.family_id, self.params, self.x)

    @property
    def partition(self) -> Partition:
        """The mutable :class:`Partition` structure (views of this state's arrays)."""
        return Partition(self.slot_labels, self.sizes, self.stats, self.empty_row,
                         self.active, self.where, self.cluster_count)

    def tables(self, log_v_table, log_w_table) -> PriorTables:
        """:meth:`check_tables` as a :class:`PriorTables`."""
        return PriorTables(*self.check_tables(log_v_table, log_w_table))

    def arrays(self):
        """The tuple of arrays kernels take, in contract order."""
        return (self.slot_labels, self.sizes, self.stats, self.empty_row, self.active,
                self.where, self.cluster_count)

    def check_tables(self, log_v_table, log_w_table) -> tuple[np.ndarray, np.ndarray]:
        """Return the prior tables as contiguous float64 arrays, checking their length."""
        return tuple(prior_tables(self.n, log_v_table, log_w_table))

    def labels(self) -> np.ndarray:
        """Canonical labels (order of first appearance, 0..K-1), int64 array of shape (n,).

        ``core.relabel.canonical_labels`` of the slot labels (its plain reference), without
        its input checks: slot labels are int64 in ``[0, capacity)`` by construction.
        """
        return _canonical_slot_labels(self.slot_labels, self.sizes.shape[0])

    def cluster_sizes(self) -> np.ndarray:
        """Sizes of the active clusters (in slot order of ``active``)."""
        return self.sizes[self.active[: self.n_clusters]].copy()

    def log_likelihood(self) -> float:
        """Sum of the family's log marginal likelihood over the clusters."""
        # the family's compiled leaf, which the kernels link anyway (nothing compiled here)
        log_marginal = dispatch.compiled_leaf(self.family_id, "log_marginal")
        total = 0.0
        for slot in self.active[: self.n_clusters]:
            total += log_marginal(self.params, self.stats[slot])
        return float(total)

    def log_joint(self, prior) -> float:
        """log p(c) + log p(x | c) for a numeric prior."""
        return float(prior.log_eppf(self.cluster_sizes())) + self.log_likelihood()

    def check(self, atol: float = 1e-6) -> None:
        """Recompute everything from the labels and raise ``AssertionError`` on mismatch."""
        fresh = PartitionState(self.family, self.x, self.slot_labels)
        k = self.n_clusters
        assert k == fresh.n_clusters, (k, fresh.n_clusters)
        assert np.array_equal(np.bincount(self.slot_labels, minlength=self.sizes.shape[0]),
                              self.sizes)
        active = set(self.active[:k].tolist())
        assert active == set(np.unique(self.slot_labels).tolist())
        # history entries of a row (update counters) depend on its history, not the cluster
        cluster = self.family.cluster_columns
        for slot in active:
            members = np.flatnonzero(self.slot_labels == slot)
            expected = self.family.stats_of(self.x[members])
            np.testing.assert_allclose(self.stats[slot, cluster], expected[cluster], atol=atol,
                                       rtol=1e-8)
