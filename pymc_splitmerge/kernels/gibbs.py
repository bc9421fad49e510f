r"""Collapsed Gibbs sampler for the partition (Neal 2000, Algorithm 3; MacEachern 1994).

The component parameters are integrated out; each point ``i`` in turn is removed from its
cluster and put back according to its full conditional given the other labels
``c_{-i}``.  For a Gibbs-type prior ``p(c) = V(n, K) \prod_b W(|b|)`` (PGSM eq. 3 with
``tau1 = V`` and ``tau2 = W``) and conjugate components,

.. math::

    p(c_i = b \mid c_{-i}, x) \propto
        \frac{W(m_b + 1)}{W(m_b)}\; p(x_i \mid x_b)          \quad\text{(existing cluster b of size m_b)}

    p(c_i = \text{new} \mid c_{-i}, x) \propto
        \frac{V(n, K + 1)}{V(n, K)}\, W(1)\; p(x_i)           \quad\text{(K clusters without i)}

where ``p(x_i | x_b)`` is the posterior predictive of the family (``dispatch.log_predictive``)
and ``p(x_i)`` the prior predictive (predictive under the empty statistics row).  The common
factor ``V(n, K)`` of the joins cancels.  For the Dirichlet process ``W(m) = Γ(m)`` and
``V(n, K+1)/V(n, K) = α`` give the Chinese-restaurant weights ``m_b`` and ``α`` (Neal 2000,
eq. 3.7); for Pitman–Yor ``m_b - d`` and ``α + K d``; for a finite Dirichlet with ``k``
components ``m_b + α/k`` and ``α/k (k - K)`` (zero once ``K = k``, which the table encodes as
``-inf``).

The weights are read from the two tables of ``prior.tables(n)`` (``docs/contracts.md`` §1), so
the inner loop never touches the prior object; the seating weights are
``priors.seating.log_join_weight`` / ``log_open_weight`` and the draw
``core.logweights.sample_log_weights``.  :func:`build_gibbs_sweep` validates the options once
and returns the transition ``sweep(model, partition, tables, rng)`` on the structures of
``kernels.state``; the partition is updated in place with the arithmetic of
``unassign_point`` / ``assign_point`` (fused into the sweep, whose Python entry takes the
structures' fields loose; ``composed_gibbs_sweeps`` of ``tests/kernel_references.py`` is the plain
composition it is tested against, move for move).

References
----------
.. [1] Neal, R. M. (2000). Markov chain sampling methods for Dirichlet process mixture models.
   Journal of Computational and Graphical Statistics 9(2), 249-265.  Algorithm 3, eq. (3.7).
.. [2] MacEachern, S. N. (1994). Estimating normal means with a conjugate style Dirichlet
   process prior.  Communications in Statistics - Simulation and Computation 23(3), 727-741.
.. [3] Bouchard-Côté, A., Doucet, A. and Roth, A. (2017). Particle Gibbs split-merge sampling
   for Bayesian inference in mixture models.  JMLR 18.  Eq. (3) (Gibbs-type priors).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from pymc_splitmerge.components import dispatch
from pymc_splitmerge.core.jit import compiled_only, njit
from pymc_splitmerge.core.logweights import exp_shifted_from_peak, sample_weights
from pymc_splitmerge.core.slots import close_slot, free_slot, open_slot
from pymc_splitmerge.kernels.options import positive_integer
from pymc_splitmerge.kernels.rng import seed_numba_from
from pymc_splitmerge.kernels.state import (
    Model,
    Partition,
    PriorTables,
    assign_point,
    prior_tables,
    unassign_point,
)
from pymc_splitmerge.priors.seating import log_join_weight, log_open_weight

__all__ = [
    "SCANS",
    "GibbsInfo",
    "build_gibbs_sweep",
    "gibbs_sweep",
    "point_conditional",
    "point_log_weights",
]

SCANS = ("random", "systematic")
"""Visiting orders of a sweep: a fresh random permutation per sweep, or ``0, 1, ..., n-1``."""


class GibbsInfo(NamedTuple):
    """What one call of a Gibbs sweep transition did.

    Attributes
    ----------
    n_changed : int
        Number of point updates (summed over the sweeps) that moved a point to a different
        cluster of the partition (re-opening a singleton as a new cluster is not a change).
    n_clusters : int
        Number of clusters after the last sweep.
    n_predictive_evaluations : int
        Number of point-cluster log predictive evaluations (existing clusters only; the prior
        predictive of each point is evaluated once per call).
    """

    n_changed: int
    n_clusters: int
    n_predictive_evaluations: int


@njit(cache=True)
def _join_and_new_log_weights(family_id, params, x, i, log_v_table, log_w_table, sizes, stats,
                              active, cluster_count, log_prior_predictive_i, log_weights):
    """Fill ``log_weights[0:K+1]`` for point ``i`` (already removed from the state).

    Leaf loop on loose arrays (the sweep unpacks the structures once: field access of a
    named tuple inside a hot loop costs numba up to 1.5x).  ``log_weights[j]`` for ``j < K``
    is the log weight of joining slot ``active[j]``; ``log_weights[K]`` the log weight of a
    new cluster.  NaN becomes ``-inf``.  Returns ``K``.
    """
    k = cluster_count[0]
    dispatch.log_predictive_many(family_id, params, stats, active, k, x[i], log_weights)
    for j in range(k):
        value = log_join_weight(log_w_table, sizes[active[j]], 1) + log_weights[j]
        log_weights[j] = -np.inf if np.isnan(value) else value
    value = log_open_weight(log_v_table, log_w_table, k, 1) + log_prior_predictive_i
    log_weights[k] = -np.inf if np.isnan(value) else value
    return k


@njit(cache=True)
def point_log_weights(model, partition, tables, i, log_prior_predictive_i, log_weights):
    """:func:`_join_and_new_log_weights` on the structures (point ``i`` already removed).

    Parameters
    ----------
    model : Model
    partition : Partition
        The state without point ``i``.
    tables : PriorTables
    i : int
    log_prior_predictive_i : float
        ``log p(x_i)`` under the empty statistics row.
    log_weights : ndarray of float64, shape (>= K + 1,)
        Output: joins of ``active[:K]`` then the new cluster.

    Returns
    -------
    int
        ``K``, the number of clusters without point ``i``.
    """
    return _join_and_new_log_weights(
        model.family_id, model.params, model.x, i, tables.log_v, tables.log_w, partition.sizes,
        partition.stats, partition.active, partition.cluster_count, log_prior_predictive_i,
        log_weights)


@compiled_only(cache=True)
def _prior_predictives(family_id, params, x, empty_row, out):
    for i in range(x.shape[0]):
        out[i] = dispatch.log_predictive(family_id, params, empty_row, x[i])


@njit(cache=True)
def _gibbs_sweeps_fields(family_id, params, x, labels, sizes, stats, empty_row, active, where,
                         cluster_count, log_v_table, log_w_table, n_gibbs_sweeps, random_scan):
    """``n_gibbs_sweeps`` sweeps over all points; returns ``(n_changed, n_evaluations)``.

    The structures' fields as loose arrays: this is also the Python entry of the transition,
    because numba unboxes a named tuple of arrays several microseconds slower than the same
    arrays passed loose (once per call; see ``kernels/pgsm.py::_pgsm_transition_fields``).

    Same arithmetic and random stream as ``unassign_point``, :func:`_join_and_new_log_weights`,
    ``sample_log_weights`` and ``assign_point`` called in turn (the plain composition that
    ``tests/test_gibbs_kernel.py`` checks it against), fused to save passes over the weights
    and row views per point: the data row is viewed once per point, the weights loop also
    finds their peak (``core.logweights._peak``), and the shifted exponentials and their sum
    (``exp_shifted_from_peak``) feed ``sample_weights`` directly.
    """
    n = x.shape[0]
    # dtypes given (the signature of np.empty the SAMS kernel compiles: compiled once)
    log_prior_predictive = np.empty(n, dtype=np.float64)
    _prior_predictives(family_id, params, x, empty_row, log_prior_predictive)
    log_weights = np.empty(sizes.shape[0], dtype=np.float64)
    order = np.empty(n, dtype=np.int64)
    for position in range(n):
        order[position] = position
    n_changed = 0
    n_evaluations = 0
    for _ in range(n_gibbs_sweeps):
        if random_scan:
            # np.random.permutation(n) written out (numba's: a Fisher-Yates shuffle of
            # 0..n-1 by np.random.randint, the same draws), without compiling it, its
            # shuffle and np.arange as functions of their own
            for position in range(n):
                order[position] = position
            last = n - 1
            while last > 0:
                swap = np.random.randint(last + 1)
                order[last], order[swap] = order[swap], order[last]
                last -= 1
        for position in range(n):
            i = order[position]
            x_row = x[i]
            # unassign_point
            old = labels[i]
            sizes[old] -= 1
            was_singleton = sizes[old] == 0
            if was_singleton:
                close_slot(old, stats, empty_row, active, where, cluster_count)
            else:
                dispatch.remove_point_at(family_id, params, stats, old, x, i)
            # _join_and_new_log_weights, with the peak of the weights
            k = cluster_count[0]
            dispatch.log_predictive_many(family_id, params, stats, active, k, x_row,
                                         log_weights)
            peak = -np.inf
            for j in range(k):
                value = log_join_weight(log_w_table, sizes[active[j]], 1) + log_weights[j]
                if np.isnan(value):
                    value = -np.inf
                log_weights[j] = value
                if value > peak:
                    peak = value
            value = log_open_weight(log_v_table, log_w_table, k, 1) + log_prior_predictive[i]
            if np.isnan(value):
                value = -np.inf
            log_weights[k] = value
            if value > peak:
                peak = value
            n_evaluations += k
            # sample_log_weights = exp_shifted + sample_weights
            uniform = np.random.random()
            total = exp_shifted_from_peak(log_weights, k + 1, peak, log_weights)
            choice = sample_weights(log_weights, k + 1, total, uniform)
            if choice < 0:
                # Every placement has probability zero (infeasible state): put it back.
                slot = old
            elif choice == k:
                slot = old if was_singleton else free_slot(where)
            else:
                slot = active[choice]
            if slot != old and not (was_singleton and choice == k):
                n_changed += 1
            # assign_point
            if where[slot] < 0:
                open_slot(slot, active, where, cluster_count)
            dispatch.add_point_at(family_id, params, stats, slot, x, i)
            sizes[slot] += 1
            labels[i] = slot
    return n_changed, n_evaluations


def build_gibbs_sweep(scan: str = "random", n_gibbs_sweeps: int = 1
                      ) -> Callable[[Model, Partition, PriorTables, np.random.Generator],
                                    GibbsInfo]:
    """Validate the options once; return the transition ``sweep(model, partition, tables, rng)``.

    Parameters
    ----------
    scan : {"random", "systematic"}
        ``"random"``: a fresh uniformly random visiting order each sweep (the kernel is then
        reversible); ``"systematic"``: points ``0, 1, ..., n-1`` in order.
    n_gibbs_sweeps : int
        Number of sweeps per call (each sweep updates every point once).

    Returns
    -------
    callable
        ``sweep(model, partition, tables, rng) -> GibbsInfo`` applying the sweeps to
        ``partition`` in place (``Model``, ``Partition``, ``PriorTables`` of
        ``kernels.state``; one draw of the Generator ``rng`` seeds numba's state).

    References
    ----------
    Neal (2000), Algorithm 3; MacEachern (1994).
    """
    if scan not in SCANS:
        raise ValueError(f"scan must be one of {SCANS}; got {scan!r}")
    return _GibbsSweep(scan == "random", positive_integer(n_gibbs_sweeps, "n_gibbs_sweeps"))


class _GibbsSweep:
    """The transition of :func:`build_gibbs_sweep` (a class, not a closure, so that copies of
    a step method (``copy.deepcopy``, pickling) copy it with the rest of the step)."""

    def __init__(self, random_scan: bool, n_gibbs_sweeps: int):
        self.random_scan = random_scan
        self.n_gibbs_sweeps = n_gibbs_sweeps

    def __call__(self, model: Model, partition: Partition, tables: PriorTables,
                 rng: np.random.Generator) -> GibbsInfo:
        seed_numba_from(rng)
        # loose fields: numba unboxes named tuples of arrays slowly (see _gibbs_sweeps_fields)
        n_changed, n_evaluations = _gibbs_sweeps_fields(
            *model, *partition, *tables, self.n_gibbs_sweeps, self.random_scan)
        return GibbsInfo(int(n_changed), int(partition.cluster_count[0]), int(n_evaluations))


def gibbs_sweep(state, log_v_table, log_w_table, rng, scan: str = "random",
                n_gibbs_sweeps: int = 1) -> GibbsInfo:
    """Apply ``n_gibbs_sweeps`` collapsed Gibbs sweeps to ``state`` (in place).

    Convenience form of :func:`build_gibbs_sweep` on a ``PartitionState``.

    Parameters
    ----------
    state : PartitionState
        Partition state of ``n`` points (``kernels.state``); mutated in place.
    log_v_table, log_w_table : ndarray of shape (n + 2,)
        The prior's tables ``prior.tables(n)`` (``docs/contracts.md`` §1).
    rng : numpy.random.Generator
        Source of randomness (one draw seeds numba's internal state).
    scan : {"random", "systematic"}
    n_gibbs_sweeps : int, default 1
        Number of sweeps (each sweep updates every point once).

    Returns
    -------
    GibbsInfo
    """
    sweep = build_gibbs_sweep(scan, n_gibbs_sweeps)
    tables = prior_tables(state.n, log_v_table, log_w_table)
    return sweep(state.model, state.partition, tables, rng)


def point_conditional(state, i: int, log_v_table, log_w_table):
    """Full conditional of point ``i`` computed by the numba kernel (state left unchanged).

    Parameters
    ----------
    state : PartitionState
    i : int
        Point index.
    log_v_table, log_w_table : ndarray of shape (n + 2,)

    Returns
    -------
    slots : ndarray of int, shape (K + 1,)
        Slots of the clusters of ``c_{-i}``, followed by ``-1`` for a new cluster.
    probabilities : ndarray of float, shape (K + 1,)
    """
    tables = prior_tables(state.n, log_v_table, log_w_table)
    model, partition = state.model, state.partition
    old = unassign_point(*model, i, *partition)
    try:
        log_weights = np.empty(partition.sizes.shape[0])
        log_prior_predictive = dispatch.log_predictive(model.family_id, model.params,
                                                       partition.empty_row, model.x[i])
        k = point_log_weights(model, partition, tables, i, log_prior_predictive, log_weights)
        slots = np.append(partition.active[:k].copy(), -1)
        log_weights = log_weights[: k + 1]
    finally:
        assign_point(*model, i, old, partition.labels, partition.sizes, partition.stats,
                     partition.active, partition.where, partition.cluster_count)
    probabilities = np.exp(log_weights - np.max(log_weights))
    return slots, probabilities / probabilities.sum()


