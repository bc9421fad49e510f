r"""Greedy sequential allocation of unassigned points (the last stage of a split-merge start).

Given a partial partition (some points in clusters, the others unassigned) the points not yet
assigned are visited in a given order and each joins the cluster with the largest
prior-weighted posterior predictive weight given the points already placed, or opens a new
cluster if that weight is largest:

.. math::

    \text{join } b:\quad \frac{W(m_b + 1)}{W(m_b)}\, p(x_i \mid x_b), \qquad
    \text{new}:\quad \frac{V(n, K + 1)}{V(n, K)}\, W(1)\, p(x_i)

the weights of a collapsed Gibbs update (``kernels.gibbs``; Neal 2000, eq. 3.7 for the DP,
PGSM eq. 3 for Gibbs-type priors) read from the tables ``prior.tables(n)``
(``priors.seating``), with the family's posterior predictive (``dispatch.log_predictive``).
The rule is the same for every registered family and prior: it never looks at means or
distances.  The statistics of the chosen cluster are updated before the next point
(``kernels.state.assign_point``), so a point far from every cluster opens a new one that
later points may join.

This is an *optimisation* (the argmax, not a draw): its output is a start for a Markov chain,
not a sample, and plays no part in the chain's invariant law.
"""

from __future__ import annotations

import numpy as np

from pymc_splitmerge.components import dispatch
from pymc_splitmerge.core.jit import njit
from pymc_splitmerge.core.relabel import canonical_labels
from pymc_splitmerge.core.slots import free_slot
from pymc_splitmerge.kernels.state import assign_point, prior_tables
from pymc_splitmerge.priors.seating import log_join_weight, log_open_weight

__all__ = ["allocate_greedily"]


@njit(cache=True)
def _allocate(family_id, params, x, assigned, assigned_slots, order, labels, sizes, stats,
              empty_row, active, where, cluster_count, log_v_table, log_w_table, log_weights):
    """Put the points ``assigned`` into their slots ``assigned_slots``, then allocate the
    points ``order`` in turn (loose arrays); return -1, or the first point that no cluster can
    take (every weight ``-inf`` or NaN).

    One compiled function for both stages: a second kernel for the first (it was
    ``_assign_all``) cost a cached-kernel load of its own (~0.013 s in a fresh process, for a
    copy of the ``assign_point`` code this one holds anyway)."""
    for t in range(assigned.shape[0]):
        assign_point(family_id, params, x, assigned[t], assigned_slots[t], labels, sizes, stats,
                     active, where, cluster_count)
    for t in range(order.shape[0]):
        i = order[t]
        k = cluster_count[0]
        dispatch.log_predictive_many(family_id, params, stats, active, k, x[i], log_weights)
        best = -1
        best_value = -np.inf
        for j in range(k):
            value = log_join_weight(log_w_table, sizes[active[j]], 1) + log_weights[j]
            if value > best_value:  # NaN compares false: never chosen
                best = j
                best_value = value
        open_value = log_open_weight(log_v_table, log_w_table, k, 1)
        if open_value > -np.inf:
            open_value += dispatch.log_predictive(family_id, params, empty_row, x[i])
        if open_value > best_value:
            slot = free_slot(where)
        elif best >= 0:
            slot = active[best]
        else:
            return i
        assign_point(family_id, params, x, i, slot, labels, sizes, stats, active, where,
                     cluster_count)
    return -1


def allocate_greedily(family, x, labels, order, log_v_table, log_w_table) -> np.ndarray:
    """Complete a partial partition by greedy sequential allocation (see the module docstring).

    Parameters
    ----------
    family : ComponentFamily
        A numeric component family.
    x : ndarray of shape (n, data_dim)
        Data prepared by ``family.prepare_data``.
    labels : array_like of int, shape (n,)
        Cluster labels of the assigned points (any non-negative integers), ``-1`` for the
        points to allocate.
    order : array_like of int, shape (n_unassigned,)
        The unassigned points (each once), in the order of allocation.
    log_v_table, log_w_table : ndarray of float64, shape (n + 2,)
        ``prior.tables(n)`` of the prior on all ``n`` points.

    Returns
    -------
    ndarray of int64, shape (n,)
        Canonical labels (order of first appearance, ``0..K-1``) of every point.

    Raises
    ------
    ValueError
        If ``order`` is not exactly the unassigned points, or if a point can join no cluster
        (every weight ``-inf``: e.g. a finite prior already at its number of clusters and data
        the existing clusters rule out).
    """
    x = np.ascontiguousarray(x, dtype=np.float64)
    n = x.shape[0]
    labels = np.asarray(labels, dtype=np.int64)
    order = np.ascontiguousarray(order, dtype=np.int64)
    if labels.shape != (n,):
        raise ValueError(f"labels must have shape ({n},) to match the data; got {labels.shape}")
    unassigned = np.flatnonzero(labels < 0)
    if order.ndim != 1 or not np.array_equal(np.sort(order), unassigned):
        raise ValueError("order must list every unassigned point (label -1) exactly once")
    tables = prior_tables(n, log_v_table, log_w_table)
    params = np.ascontiguousarray(family.params, dtype=np.float64)
    empty_row = np.ascontiguousarray(family.empty_stats, dtype=np.float64)
    capacity = n + 2
    slot_labels = np.full(n, -1, dtype=np.int64)
    sizes = np.zeros(capacity, dtype=np.int64)
    stats = np.empty((capacity, empty_row.shape[0]), dtype=np.float64)
    stats[:] = empty_row
    active = np.zeros(capacity, dtype=np.int64)
    where = np.full(capacity, -1, dtype=np.int64)
    cluster_count = np.zeros(1, dtype=np.int64)
    assigned = np.flatnonzero(labels >= 0)
    # the assigned points first, into slots 0..K0-1, through the state's primitive
    _, slots = np.unique(labels[assigned], return_inverse=True)
    log_weights = np.empty(capacity, dtype=np.float64)
    failed = _allocate(family.family_id, params, x, assigned.astype(np.int64),
                       slots.astype(np.int64).reshape(-1), order, slot_labels, sizes, stats,
                       empty_row, active, where, cluster_count, tables.log_v, tables.log_w,
                       log_weights)
    if failed >= 0:
        raise ValueError(
            f"point {failed} can join no cluster: every allocation weight is -inf (the prior "
            "allows no new cluster and the data rule out the existing ones)")
    return canonical_labels(slot_labels)

