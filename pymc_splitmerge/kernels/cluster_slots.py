r"""Partition moves with explicit cluster parameters held in slots (no conjugacy needed).

The state is a label vector ``labels`` with values in ``[0, C)`` (``C`` = capacity, the
number of *slots*) and one parameter value :math:`\theta_s` per slot, held by the caller.
The kernels here never see :math:`\theta`: they take the matrix

.. math:: L_{i s} = \log f(y_i \mid \theta_s), \qquad i < n,\ s < C,

(``log_likelihood``, float64 of shape (n, C)) computed by the caller for the current
parameters, and move the labels with :math:`\theta` fixed.  The target is

.. math::

    p(z, \theta \mid y) \propto p_{\mathrm{slot}}(z) \prod_{s<C} G_0(\theta_s)
    \prod_i f(y_i \mid \theta_{z_i}), \qquad
    p_{\mathrm{slot}}(z) = \mathrm{EPPF}(z)\, \frac{(C-K)!}{C!},

(``K`` occupied slots): the ``K`` blocks placed in the ``C`` slots uniformly.  Given
:math:`\theta` the labels' conditional law is :math:`p_{\mathrm{slot}}(z) \prod_i
L_{i z_i}`, and both moves below leave it invariant; an empty slot's :math:`\theta` is
i.i.d. :math:`G_0` given everything else, and redrawing it (the caller's "refresh") is an
exact Gibbs update of its own.

* :func:`slot_gibbs_sweeps` -- Neal (2000), Algorithm 8, in slot form: point ``i``, removed
  (``K^-`` occupied slots, ``E = C - K^-`` empty), goes to an occupied slot ``k`` with weight
  :math:`W(n_k^-+1)/W(n_k^-)\, e^{L_{ik}}` and to each empty slot ``s`` with weight
  :math:`\frac{V(n, K^-+1)}{V(n, K^-)} W(1) \frac{1}{E} e^{L_{is}}` (the ``1/E`` is
  :math:`(C-K^--1)!/(C-K^-)!`).  This is the exact full conditional of :math:`z_i` under the
  target above; the empty slots' parameters play Algorithm 8's ``m = E`` auxiliaries.
* :func:`slot_split_merge` -- a Metropolis-Hastings split-merge of the labels given
  :math:`\theta` (sequential allocation as SAMS, Dahl 2003).  Two distinct points ``i, j``
  (ordered, uniform).  Same slot ``k``: propose a split; an empty slot ``s`` receives ``j``
  with probability :math:`\propto e^{L_{js}}` over the empty slots (the empty slots hold
  fresh :math:`G_0` draws: this picks the one that fits ``j``), the other members of ``k``
  are allocated in a uniformly random order to ``k`` (``i``'s side) or ``s`` with
  probabilities :math:`\propto m_a e^{L_{lk}}` and :math:`m_b e^{L_{ls}}` (``m`` the sizes so
  far).  Different slots: propose moving all of ``j``'s slot into ``i``'s; the reverse split's
  probability (slot choice among the empty slots *after* the merge, and the forced
  allocation) enters the ratio.  Log target ratio of a split from ``K`` occupied slots:
  :math:`\log\frac{V(n,K+1)W(m_a)W(m_b)}{V(n,K)W(m_a+m_b)} - \log(C-K) +
  \sum_{l \to s} (L_{ls} - L_{lk})`.

Both kernels are numba-compiled leaf loops (``cache=True``) seeded from the caller's
Generator (``kernels.rng``); ``tests/kernel_references.py`` holds the plain versions they are
tested against.

References
----------
Neal, R. M. (2000). Markov chain sampling methods for Dirichlet process mixture models.
JCGS 9(2), 249-265, Algorithm 8.
Dahl, D. B. (2003). An improved merge-split sampler for conjugate Dirichlet process mixture
models. Technical Report 1086, University of Wisconsin-Madison.
Jain, S. and Neal, R. M. (2007). Splitting and merging components of a nonconjugate
Dirichlet process mixture model. Bayesian Analysis 2(3), 445-472.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from pymc_splitmerge.kernels.rng import numba_seed_from
from pymc_splitmerge.priors.seating import log_join_weight, log_open_weight, log_split_weight

__all__ = [
    "SlotGibbsInfo",
    "SlotSplitMergeInfo",
    "slot_gibbs_sweeps",
    "slot_sizes",
    "slot_split_merge",
]


class SlotGibbsInfo(NamedTuple):
    """What :func:`slot_gibbs_sweeps` did."""

    n_changed: int
    """Point updates that moved a point to another slot."""


class SlotSplitMergeInfo(NamedTuple):
    """What :func:`slot_split_merge` did."""

    move: int
    """0 nothing proposed (no empty slot for a split), 1 split, 2 merge."""
    accepted: bool
    log_accept_ratio: float
    """``nan`` when nothing was proposed."""


def slot_sizes(labels: np.ndarray, capacity: int) -> np.ndarray:
    """Number of points per slot, int64 array of shape (capacity,)."""
    return np.bincount(np.asarray(labels, dtype=np.int64), minlength=capacity).astype(np.int64)


def _check(log_likelihood, labels, log_v_table):
    log_likelihood = np.ascontiguousarray(log_likelihood, dtype=np.float64)
    n, capacity = log_likelihood.shape
    if labels.shape != (n,) or labels.dtype != np.int64:
        raise ValueError(f"labels must be int64 of shape ({n},); got {labels.dtype} "
                         f"{labels.shape}")
    if n and (labels.min() < 0 or labels.max() >= capacity):
        raise ValueError(f"labels must lie in [0, {capacity}) (the capacity)")
    if log_v_table.shape[0] != n + 2:
        raise ValueError(f"the prior tables must be built for n = {n} points")
    return log_likelihood


@numba.njit(cache=True)
def _sample_log(log_weights, count, uniform):
    peak = -np.inf
    for s in range(count):
        if log_weights[s] > peak:
            peak = log_weights[s]
    if peak == -np.inf:
        return -1
    total = 0.0
    for s in range(count):
        log_weights[s] = np.exp(log_weights[s] - peak)
        total += log_weights[s]
    target = uniform * total
    cumulative = 0.0
    last = -1
    for s in range(count):
        if log_weights[s] > 0.0:
            last = s
            cumulative += log_weights[s]
            if target < cumulative:
                return s
    return last


@numba.njit(cache=True)
def _slot_gibbs_sweeps(log_likelihood, labels, sizes, log_v_table, log_w_table, n_sweeps,
                       seed):
    np.random.seed(seed)
    n, capacity = log_likelihood.shape
    n_occupied = 0
    for s in range(capacity):
        if sizes[s] > 0:
            n_occupied += 1
    log_weights = np.empty(capacity)
    n_changed = 0
    for _ in range(n_sweeps):
        order = np.random.permutation(n)
        for position in range(n):
            i = order[position]
            old = labels[i]
            sizes[old] -= 1
            if sizes[old] == 0:
                n_occupied -= 1
            n_empty = capacity - n_occupied
            log_new = log_open_weight(log_v_table, log_w_table, n_occupied, 1) - np.log(n_empty)
            for s in range(capacity):
                if sizes[s] > 0:
                    value = log_join_weight(log_w_table, sizes[s], 1) + log_likelihood[i, s]
                else:
                    value = log_new + log_likelihood[i, s]
                log_weights[s] = -np.inf if np.isnan(value) else value
            slot = _sample_log(log_weights, capacity, np.random.random())
            if slot < 0:  # every placement has probability zero: put the point back
                slot = old
            if slot != old:
                n_changed += 1
            if sizes[slot] == 0:
                n_occupied += 1
            sizes[slot] += 1
            labels[i] = slot
    return n_changed


def slot_gibbs_sweeps(log_likelihood, labels, sizes, log_v_table, log_w_table, rng,
                      n_sweeps: int = 1) -> SlotGibbsInfo:
    """Algorithm 8 in slot form: ``n_sweeps`` random-scan sweeps of every label (in place).

    Parameters
    ----------
    log_likelihood : ndarray of float64, shape (n, C)
        ``log f(y_i | theta_s)`` for every point and slot (fixed during the sweeps).
    labels : ndarray of int64, shape (n,)
        Slot of every point, in ``[0, C)``; updated in place.
    sizes : ndarray of int64, shape (C,)
        Points per slot (:func:`slot_sizes`); updated in place.
    log_v_table, log_w_table : ndarray of float64, shape (n + 2,)
        The prior's tables (``GibbsTypePrior.tables(n)``).
    rng : numpy.random.Generator
    n_sweeps : int, default 1

    Returns
    -------
    SlotGibbsInfo
    """
    log_likelihood = _check(log_likelihood, labels, log_v_table)
    n_changed = _slot_gibbs_sweeps(log_likelihood, labels, sizes, log_v_table, log_w_table,
                                   int(n_sweeps), numba_seed_from(rng))
    return SlotGibbsInfo(int(n_changed))


@numba.njit(cache=True)
def _log_two_way(log_a, log_b, size_a, size_b):
    """``(log P(side a), log P(side b))`` for weights ``size * exp(log)``."""
    wa = np.log(size_a) + log_a
    wb = np.log(size_b) + log_b
    peak = max(wa, wb)
    if peak == -np.inf:
        return np.log(0.5), np.log(0.5)
    log_total = peak + np.log(np.exp(wa - peak) + np.exp(wb - peak))
    return wa - log_total, wb - log_total


@numba.njit(cache=True)
def _log_slot_choice(log_likelihood, j, sizes, chosen, freed):
    """Log probability of choosing the empty slot ``chosen`` for ``j`` (``freed``: a slot
    counted as empty although ``sizes`` says occupied, -1 for none)."""
    peak = -np.inf
    capacity = sizes.shape[0]
    for s in range(capacity):
        if (sizes[s] == 0 or s == freed) and log_likelihood[j, s] > peak:
            peak = log_likelihood[j, s]
    if peak == -np.inf:
        return -np.inf
    total = 0.0
    for s in range(capacity):
        if sizes[s] == 0 or s == freed:
            total += np.exp(log_likelihood[j, s] - peak)
    return log_likelihood[j, chosen] - peak - np.log(total)


@numba.njit(cache=True)
def _slot_split_merge(log_likelihood, labels, sizes, log_v_table, log_w_table, seed):
    np.random.seed(seed)
    n, capacity = log_likelihood.shape
    if n < 2:
        return 0, False, np.nan
    i = np.random.randint(n)
    j = np.random.randint(n - 1)
    if j >= i:
        j += 1
    n_occupied = 0
    for s in range(capacity):
        if sizes[s] > 0:
            n_occupied += 1
    k = labels[i]
    if labels[j] == k:  # ------------------------------------------------ split
        n_empty = capacity - n_occupied
        if n_empty == 0:
            return 0, False, np.nan
        log_weights = np.empty(capacity)
        for s in range(capacity):
            log_weights[s] = log_likelihood[j, s] if sizes[s] == 0 else -np.inf
        new = _sample_log(log_weights, capacity, np.random.random())
        if new < 0:
            return 0, False, np.nan
        log_proposal = _log_slot_choice(log_likelihood, j, sizes, new, -1)
        members = np.flatnonzero(labels == k)
        order = np.random.permutation(members)
        side_b = np.zeros(n, dtype=np.bool_)
        side_b[j] = True
        size_a = 1
        size_b = 1
        log_likelihood_change = log_likelihood[j, new] - log_likelihood[j, k]
        for position in range(order.shape[0]):
            point = order[position]
            if point == i or point == j:
                continue
            log_pa, log_pb = _log_two_way(log_likelihood[point, k], log_likelihood[point, new],
                                          size_a, size_b)
            if np.log(np.random.random()) < log_pb:
                side_b[point] = True
                size_b += 1
                log_proposal += log_pb
                log_likelihood_change += log_likelihood[point, new] - log_likelihood[point, k]
            else:
                size_a += 1
                log_proposal += log_pa
        log_ratio = (log_split_weight(log_v_table, log_w_table, n_occupied, size_a, size_b)
                     - np.log(n_empty) + log_likelihood_change - log_proposal)
        if np.isnan(log_ratio):
            log_ratio = -np.inf
        accepted = np.log(np.random.random()) < log_ratio
        if accepted:
            for point in range(n):
                if side_b[point]:
                    labels[point] = new
            sizes[k] = size_a
            sizes[new] = size_b
        return 1, accepted, log_ratio
    # ------------------------------------------------------------------------- merge
    other = labels[j]
    size_a = 1
    size_b = 1
    members = np.flatnonzero((labels == k) | (labels == other))
    order = np.random.permutation(members)
    log_proposal = _log_slot_choice(log_likelihood, j, sizes, other, other)
    log_likelihood_change = 0.0
    for position in range(order.shape[0]):
        point = order[position]
        if point == i or point == j:
            continue
        log_pa, log_pb = _log_two_way(log_likelihood[point, k], log_likelihood[point, other],
                                      size_a, size_b)
        if labels[point] == other:
            size_b += 1
            log_proposal += log_pb
        else:
            size_a += 1
            log_proposal += log_pa
    for point in range(n):
        if labels[point] == other:
            log_likelihood_change += log_likelihood[point, k] - log_likelihood[point, other]
    n_empty_after = capacity - (n_occupied - 1)
    log_ratio = (-log_split_weight(log_v_table, log_w_table, n_occupied - 1, size_a, size_b)
                 + np.log(n_empty_after) + log_likelihood_change + log_proposal)
    if np.isnan(log_ratio):
        log_ratio = -np.inf
    accepted = np.log(np.random.random()) < log_ratio
    if accepted:
        for point in range(n):
            if labels[point] == other:
                labels[point] = k
        sizes[k] = size_a + size_b
        sizes[other] = 0
    return 2, accepted, log_ratio


def slot_split_merge(log_likelihood, labels, sizes, log_v_table, log_w_table, rng
                     ) -> SlotSplitMergeInfo:
    """One split-merge Metropolis-Hastings update of the labels given the slots' parameters.

    Parameters are those of :func:`slot_gibbs_sweeps` (``labels`` and ``sizes`` are updated
    in place when the proposal is accepted).

    Returns
    -------
    SlotSplitMergeInfo
    """
    log_likelihood = _check(log_likelihood, labels, log_v_table)
    move, accepted, log_ratio = _slot_split_merge(log_likelihood, labels, sizes, log_v_table,
                                                  log_w_table, numba_seed_from(rng))
    return SlotSplitMergeInfo(int(move), bool(accepted), float(log_ratio))
