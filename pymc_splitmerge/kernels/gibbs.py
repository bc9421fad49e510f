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
the inner loop never touches the prior object.  The state is updated in place through
``kernels.state.unassign_point`` / ``assign_point``.

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

from typing import NamedTuple

import numba
import numpy as np

from pymc_splitmerge.components import dispatch
from pymc_splitmerge.core.slots import free_slot
from pymc_splitmerge.kernels.rng import seed_numba_from
from pymc_splitmerge.kernels.state import assign_point, unassign_point

__all__ = [
    "GibbsInfo",
    "gibbs_sweep",
    "point_conditional",
    "reference_point_conditional",
    "reference_gibbs_sweep",
]

_SCANS = ("random", "systematic")


class GibbsInfo(NamedTuple):
    """What one call of :func:`gibbs_sweep` did.

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


@numba.njit(cache=True)
def _join_and_new_log_weights(family_id, params, x, i, log_v_table, log_w_table, sizes, stats,
                              active, meta, log_prior_predictive_i, log_weights):
    """Fill ``log_weights[0:K+1]`` for point ``i`` (already removed from the state).

    ``log_weights[j]`` for ``j < K`` is the log weight of joining slot ``active[j]``;
    ``log_weights[K]`` is the log weight of a new cluster.  NaN becomes ``-inf``.
    """
    k = meta[0]
    dispatch.log_predictive_many(family_id, params, stats, active, k, x[i], log_weights)
    for j in range(k):
        m = sizes[active[j]]
        value = log_w_table[m + 1] - log_w_table[m] + log_weights[j]
        log_weights[j] = value if value == value else -np.inf
    log_v_next = log_v_table[k + 1]
    if log_v_next == -np.inf:
        log_weights[k] = -np.inf
    else:
        value = log_v_next - log_v_table[k] + log_w_table[1] + log_prior_predictive_i
        log_weights[k] = value if value == value else -np.inf
    return k


@numba.njit(cache=True)
def _sample_log_weights(log_weights, count, uniform):
    """Index in ``[0, count)`` drawn with probabilities ∝ ``exp(log_weights)`` (inverse CDF).

    Overwrites ``log_weights[0:count]`` with the cumulative unnormalised weights.  Returns -1
    when every weight is zero.
    """
    top = -np.inf
    for j in range(count):
        if log_weights[j] > top:
            top = log_weights[j]
    if top == -np.inf:
        return -1
    cumulative = 0.0
    for j in range(count):
        cumulative += np.exp(log_weights[j] - top)
        log_weights[j] = cumulative
    threshold = uniform * cumulative
    for j in range(count):
        if threshold < log_weights[j] and (j == 0 or log_weights[j] > log_weights[j - 1]):
            return j
    # uniform * total rounded up to total: the last index with positive weight
    for j in range(count - 1, -1, -1):
        if j == 0 or log_weights[j] > log_weights[j - 1]:
            return j
    return 0


@numba.njit(cache=True)
def _prior_predictives(family_id, params, x, empty_row, out):
    for i in range(x.shape[0]):
        out[i] = dispatch.log_predictive(family_id, params, empty_row, x[i])


@numba.njit(cache=True)
def _gibbs_sweeps(family_id, params, x, log_v_table, log_w_table, n_sweeps, random_scan,
                  labels, sizes, stats, empty_row, active, where, meta):
    n = x.shape[0]
    log_prior_predictive = np.empty(n)
    _prior_predictives(family_id, params, x, empty_row, log_prior_predictive)
    log_weights = np.empty(sizes.shape[0])
    order = np.arange(n)
    n_changed = 0
    n_evaluations = 0
    for _ in range(n_sweeps):
        if random_scan:
            order = np.random.permutation(n)
        for position in range(n):
            i = order[position]
            old = unassign_point(family_id, params, x, i, labels, sizes, stats, empty_row,
                                 active, where, meta)
            was_singleton = sizes[old] == 0
            k = _join_and_new_log_weights(family_id, params, x, i, log_v_table, log_w_table,
                                          sizes, stats, active, meta, log_prior_predictive[i],
                                          log_weights)
            n_evaluations += k
            choice = _sample_log_weights(log_weights, k + 1, np.random.random())
            if choice < 0:
                # Every placement has probability zero (infeasible state): put it back.
                slot = old
            elif choice == k:
                slot = old if was_singleton else free_slot(where)
            else:
                slot = active[choice]
            if slot != old and not (was_singleton and choice == k):
                n_changed += 1
            assign_point(family_id, params, x, i, slot, labels, sizes, stats, active, where, meta)
    return n_changed, n_evaluations


def gibbs_sweep(state, log_v_table, log_w_table, rng, scan: str = "random",
                n_sweeps: int = 1) -> GibbsInfo:
    """Apply ``n_sweeps`` collapsed Gibbs sweeps to ``state`` (in place).

    Parameters
    ----------
    state : PartitionState
        Partition state of ``n`` points (``kernels.state``); mutated in place.
    log_v_table, log_w_table : ndarray of shape (n + 2,)
        The prior's tables ``prior.tables(n)`` (``docs/contracts.md`` §1).
    rng : numpy.random.Generator
        Source of randomness (one draw seeds numba's internal state).
    scan : {"random", "systematic"}
        ``"random"``: a fresh uniformly random visiting order each sweep (the kernel is then
        reversible); ``"systematic"``: points ``0, 1, ..., n-1`` in order.
    n_sweeps : int
        Number of sweeps (each sweep updates every point once).

    Returns
    -------
    GibbsInfo

    References
    ----------
    Neal (2000), Algorithm 3; MacEachern (1994).
    """
    if scan not in _SCANS:
        raise ValueError(f"scan must be one of {_SCANS}; got {scan!r}")
    if int(n_sweeps) != n_sweeps or n_sweeps < 1:
        raise ValueError(f"n_sweeps must be a positive integer; got {n_sweeps!r}")
    log_v_table, log_w_table = state.check_tables(log_v_table, log_w_table)
    seed_numba_from(rng)
    labels, sizes, stats, empty_row, active, where, meta = state.arrays()
    n_changed, n_evaluations = _gibbs_sweeps(
        state.family_id, state.params, state.x, log_v_table, log_w_table, int(n_sweeps),
        scan == "random", labels, sizes, stats, empty_row, active, where, meta)
    return GibbsInfo(int(n_changed), state.n_clusters, int(n_evaluations))


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
    log_v_table, log_w_table = state.check_tables(log_v_table, log_w_table)
    labels, sizes, stats, empty_row, active, where, meta = state.arrays()
    fid, params, x = state.family_id, state.params, state.x
    old = unassign_point(fid, params, x, i, labels, sizes, stats, empty_row, active, where, meta)
    try:
        log_weights = np.empty(sizes.shape[0])
        log_prior_predictive = dispatch.log_predictive(fid, params, empty_row, x[i])
        k = _join_and_new_log_weights(fid, params, x, i, log_v_table, log_w_table, sizes, stats,
                                      active, meta, log_prior_predictive, log_weights)
        slots = np.append(active[:k].copy(), -1)
        log_weights = log_weights[: k + 1]
    finally:
        assign_point(fid, params, x, i, old, labels, sizes, stats, active, where, meta)
    probabilities = np.exp(log_weights - np.max(log_weights))
    return slots, probabilities / probabilities.sum()


# ----------------------------------------------------------------------------------------------
# Plain numpy reference (independent maths: full log EPPF + log marginal likelihoods)
# ----------------------------------------------------------------------------------------------


def _reference_log_joint(labels, x, prior, family):
    values, sizes = np.unique(labels, return_counts=True)
    total = float(prior.log_eppf(sizes))
    for value in values:
        total += float(family.log_marginal_of(x[labels == value]))
    return total


def reference_point_conditional(labels, i: int, x, prior, family):
    """Full conditional of point ``i`` from the joint ``p(c) p(x | c)`` (slow reference).

    Each candidate placement is scored by the *complete* log EPPF plus the sum of the
    clusters' log marginal likelihoods, so this shares no code with the kernel's ratio
    formulas.

    Parameters
    ----------
    labels : ndarray of int, shape (n,)
    i : int
    x : ndarray of shape (n, data_dim)
        Prepared data.
    prior : GibbsTypePrior
    family : ComponentFamily
        Numeric family.

    Returns
    -------
    targets : ndarray of int, shape (K + 1,)
        Labels of the clusters of ``c_{-i}`` (sorted), followed by ``-1`` for a new cluster.
    probabilities : ndarray of float, shape (K + 1,)
    """
    labels = np.asarray(labels, dtype=np.int64)
    others = np.delete(np.arange(labels.shape[0]), i)
    targets = np.unique(labels[others])
    fresh = int(labels.max()) + 1
    candidates = np.append(targets, fresh)
    log_joint = np.empty(candidates.shape[0])
    for j, target in enumerate(candidates):
        trial = labels.copy()
        trial[i] = target
        log_joint[j] = _reference_log_joint(trial, x, prior, family)
    probabilities = np.exp(log_joint - np.max(log_joint))
    return np.append(targets, -1), probabilities / probabilities.sum()


def reference_gibbs_sweep(labels, x, prior, family, rng, scan: str = "random"):
    """One collapsed Gibbs sweep in plain numpy (reference for tests and benchmarks).

    Parameters
    ----------
    labels : ndarray of int, shape (n,)
        Current labels (not modified).
    x : ndarray of shape (n, data_dim)
    prior : GibbsTypePrior
    family : ComponentFamily
    rng : numpy.random.Generator
    scan : {"random", "systematic"}

    Returns
    -------
    ndarray of int, shape (n,)
        New labels (not canonical).
    """
    if scan not in _SCANS:
        raise ValueError(f"scan must be one of {_SCANS}; got {scan!r}")
    labels = np.asarray(labels, dtype=np.int64).copy()
    n = labels.shape[0]
    order = rng.permutation(n) if scan == "random" else np.arange(n)
    for i in order:
        targets, probabilities = reference_point_conditional(labels, i, x, prior, family)
        choice = rng.choice(targets.shape[0], p=probabilities)
        labels[i] = int(labels.max()) + 1 if targets[choice] < 0 else targets[choice]
    return labels
