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
  allocation) enters the ratio.  With ``anchors="cluster_point"`` ``j`` is drawn in a uniform
  occupied slot instead (small clusters are proposed merged away ``1/K`` of the time), and
  the ratio of the anchors' reverse to forward probability enters the ratio too.  Log
  target ratio of a split from ``K`` occupied slots:
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

import numpy as np

from pymc_splitmerge.core.jit import njit
from pymc_splitmerge.kernels.rng import numba_seed_from
from pymc_splitmerge.priors.seating import log_join_weight, log_open_weight, log_split_weight

__all__ = [
    "LaplaceProposal",
    "ParameterSplitMergeInfo",
    "ParameterUpdateInfo",
    "SlotGibbsInfo",
    "SlotSplitMergeInfo",
    "laplace_parameter_update",
    "laplace_proposals",
    "parameter_split_merge",
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
    """``nan`` when nothing was proposed; for a merge rejected before its reverse allocation
    was computed (the bound without it already rejected it), that upper bound."""


def slot_sizes(labels: np.ndarray, capacity: int) -> np.ndarray:
    """Number of points per slot, int64 array of shape (capacity,)."""
    return np.bincount(np.asarray(labels, dtype=np.int64), minlength=capacity).astype(np.int64)


@njit(cache=True)
def _labels_in_range(labels, capacity):
    """Whether every label lies in ``[0, capacity)`` (one pass; NumPy's ``min`` and ``max``
    took two, ~6 us at n = 2,000, for each of a draw's hundred label split-merges)."""
    for label in labels:
        if label < 0 or label >= capacity:
            return False
    return True


def _check(log_likelihood, labels, log_v_table):
    log_likelihood = np.ascontiguousarray(log_likelihood, dtype=np.float64)
    n, capacity = log_likelihood.shape
    if labels.shape != (n,) or labels.dtype != np.int64:
        raise ValueError(f"labels must be int64 of shape ({n},); got {labels.dtype} "
                         f"{labels.shape}")
    if not _labels_in_range(labels, capacity):
        raise ValueError(f"labels must lie in [0, {capacity}) (the capacity)")
    if log_v_table.shape[0] != n + 2:
        raise ValueError(f"the prior tables must be built for n = {n} points")
    return log_likelihood


@njit(cache=True)
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


@njit(cache=True)
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


@njit(cache=True)
def _log_two_way(log_a, log_b, size_a, size_b):
    """``(log P(side a), log P(side b))`` for weights ``size * exp(log)``."""
    wa = np.log(size_a) + log_a
    wb = np.log(size_b) + log_b
    peak = max(wa, wb)
    if peak == -np.inf:
        return np.log(0.5), np.log(0.5)
    log_total = peak + np.log(np.exp(wa - peak) + np.exp(wb - peak))
    return wa - log_total, wb - log_total


@njit(cache=True)
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


@njit(cache=True)
def _cluster_point_anchors(labels, sizes, n_occupied):
    """``anchors="cluster_point"``: ``j`` uniform in a uniformly chosen occupied slot, ``i``
    uniform among the other points (probability ``1 / (K n_{z_j} (n - 1))``)."""
    n = labels.shape[0]
    rank = np.random.randint(n_occupied)
    slot = -1
    for s in range(sizes.shape[0]):
        if sizes[s] > 0:
            if rank == 0:
                slot = s
                break
            rank -= 1
    position = np.random.randint(sizes[slot])
    j = -1
    for point in range(n):
        if labels[point] == slot:
            if position == 0:
                j = point
                break
            position -= 1
    i = np.random.randint(n - 1)
    if i >= j:
        i += 1
    return i, j


@njit(cache=True)
def _slot_split_merge(log_likelihood, labels, sizes, log_v_table, log_w_table, seed,
                      cluster_point=False, drop_anchor_ratio=False, early_rejection=True):
    np.random.seed(seed)
    n, capacity = log_likelihood.shape
    if n < 2:
        return 0, False, np.nan
    n_occupied = 0
    for s in range(capacity):
        if sizes[s] > 0:
            n_occupied += 1
    if cluster_point:
        i, j = _cluster_point_anchors(labels, sizes, n_occupied)
    else:
        i = np.random.randint(n)
        j = np.random.randint(n - 1)
        if j >= i:
            j += 1
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
        if cluster_point and not drop_anchor_ratio:  # P(reverse anchors) / P(anchors)
            log_ratio += (np.log(n_occupied) + np.log(sizes[k])
                          - np.log(n_occupied + 1) - np.log(size_b))
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
    for point in range(n):
        if labels[point] == other:
            log_likelihood_change += log_likelihood[point, k] - log_likelihood[point, other]
    n_empty_after = capacity - (n_occupied - 1)
    # the reverse allocation's log probability (a sum of log probabilities, <= 0, the
    # O(|members|) part) is left out of this bound of the log ratio; the acceptance uniform
    # is the merge's last draw either way, so a merge the bound already rejects is rejected
    # without the allocation, with the same draws and outcome as with it
    log_bound = (-log_split_weight(log_v_table, log_w_table, n_occupied - 1,
                                   sizes[k], sizes[other])
                 + np.log(n_empty_after) + log_likelihood_change + log_proposal)
    if cluster_point and not drop_anchor_ratio:
        log_bound += (np.log(n_occupied) + np.log(sizes[other])
                      - np.log(n_occupied - 1) - np.log(sizes[k] + sizes[other]))
    log_uniform = np.log(np.random.random())
    if early_rejection and not np.isnan(log_bound) and log_uniform >= log_bound:
        return 2, False, log_bound
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
    log_ratio = (-log_split_weight(log_v_table, log_w_table, n_occupied - 1, size_a, size_b)
                 + np.log(n_empty_after) + log_likelihood_change + log_proposal)
    if cluster_point and not drop_anchor_ratio:  # P(reverse anchors) / P(anchors)
        log_ratio += (np.log(n_occupied) + np.log(size_b)
                      - np.log(n_occupied - 1) - np.log(size_a + size_b))
    if np.isnan(log_ratio):
        log_ratio = -np.inf
    accepted = log_uniform < log_ratio
    if accepted:
        for point in range(n):
            if labels[point] == other:
                labels[point] = k
        sizes[k] = size_a + size_b
        sizes[other] = 0
    return 2, accepted, log_ratio


def slot_split_merge(log_likelihood, labels, sizes, log_v_table, log_w_table, rng,
                     anchors: str = "uniform", _drop: str | None = None
                     ) -> SlotSplitMergeInfo:
    r"""One split-merge Metropolis-Hastings update of the labels given the slots' parameters.

    Parameters are those of :func:`slot_gibbs_sweeps` (``labels`` and ``sizes`` are updated
    in place when the proposal is accepted), and

    anchors : {"uniform", "cluster_point"}, default "uniform"
        Law of the anchors.  ``"uniform"``: an ordered pair of distinct points, uniform (a
        cluster of ``m`` points is an anchor's cluster with probability about ``2 m / n``).
        ``"cluster_point"``: ``j`` uniform in a *uniformly chosen occupied slot*, ``i``
        uniform among the other points, probability :math:`1 / (K\, n_{z_j} (n-1))`; this
        law depends on the labels, so the ratio of the reverse pair's probability to it enters
        the acceptance ratio (a split of a block of ``n_k`` points from ``K`` occupied slots
        into ``m_a + m_b``, ``j`` on the ``m_b`` side: :math:`K n_k / ((K+1) m_b)`; a merge
        its inverse).  Each cluster, however small, is then ``j``'s with probability ``1/K``
        and is proposed merged into ``i``'s cluster (drawn by size: mostly a large one, whose
        parameters it adopts).  Not the law of ``SAMSStep(anchor_proposal="cluster")``
        (half the updates a split of a uniform cluster, half a merge of two uniform
        clusters), which mixed the number of clusters worse here (``docs/benchmarks.md``).

    Returns
    -------
    SlotSplitMergeInfo
    """
    if anchors not in ("uniform", "cluster_point"):
        raise ValueError(f"anchors must be 'uniform' or 'cluster_point', got {anchors!r}")
    log_likelihood = _check(log_likelihood, labels, log_v_table)
    move, accepted, log_ratio = _slot_split_merge(
        log_likelihood, labels, sizes, log_v_table, log_w_table, numba_seed_from(rng),
        anchors == "cluster_point", _drop == "anchor_ratio")  # negative control of the tests
    return SlotSplitMergeInfo(int(move), bool(accepted), float(log_ratio))


# ----------------------------------------------------------------------------------------
# Split-merge with proposed cluster parameters (Laplace proposals, MH on the joint)
# ----------------------------------------------------------------------------------------
class ParameterSplitMergeInfo(NamedTuple):
    """What :func:`parameter_split_merge` did."""

    move: int
    """0 nothing proposed (no empty slot for a split), 1 split, 2 merge."""
    accepted: bool
    log_accept_ratio: float
    """``nan`` when nothing was proposed."""


class LaplaceProposal(NamedTuple):
    """A Gaussian ``N(mean, precision^-1)`` on the slot's (transformed) parameter vector."""

    mean: np.ndarray
    """float64 (d,)."""
    cholesky: np.ndarray
    """float64 (d, d): lower Cholesky factor of the precision."""

    def sample(self, rng: np.random.Generator) -> np.ndarray:
        noise = rng.standard_normal(self.mean.shape[0])
        return self.mean + np.linalg.solve(self.cholesky.T, noise)

    def log_density(self, value: np.ndarray) -> float:
        whitened = self.cholesky.T @ (np.asarray(value, dtype=np.float64) - self.mean)
        return float(np.log(np.diag(self.cholesky)).sum() - 0.5 * whitened @ whitened
                     - 0.5 * self.mean.shape[0] * np.log(2 * np.pi))


def _positive_precision(negative_hessian: np.ndarray, floor: float) -> np.ndarray:
    """Symmetrised ``-H`` per slot with its eigenvalues replaced by their absolute values,
    raised to at least ``floor``.

    Where the objective is convex along a direction (a Student-t point beyond the inflection
    of its term), the absolute value keeps the curvature's scale: raising such an eigenvalue
    to ``floor`` instead gives a Newton step of length ~ gradient / floor (thousands of
    units), which the backtracking then halves back over many evaluations.
    """
    symmetric = 0.5 * (negative_hessian + np.swapaxes(negative_hessian, -1, -2))
    symmetric = np.where(np.isfinite(symmetric), symmetric, 0.0)
    if symmetric.shape[-1] == 1:
        return np.maximum(np.abs(symmetric), floor)
    eigenvalues, vectors = np.linalg.eigh(symmetric)
    eigenvalues = np.maximum(np.abs(eigenvalues), floor)
    return np.einsum("...ij,...j,...kj->...ik", vectors, eigenvalues, vectors)


def laplace_proposals(model, weights: np.ndarray, n_newton: int = 12, floor: float = 1e-4,
                      scale: float = 1.0, start: np.ndarray | None = None
                      ) -> list[LaplaceProposal]:
    r"""Laplace approximations of weighted block posteriors, one per column of ``weights``.

    Column ``m`` defines :math:`h_m(\theta) = \log G_0(\theta) + \sum_i w_{im}
    \log f(y_i \mid \theta)` on the transformed scale; its mode is found by damped Newton
    steps from :math:`\theta = 0` (a fixed start: the result is a deterministic function of
    the weights, which the exactness of :func:`parameter_split_merge` needs) and the
    proposal is :math:`N(\hat\theta, \mathrm{scale}^2 (-\nabla^2 h)^{-1})` with the
    precision's eigenvalues raised to ``floor`` (non-concave ``h``).  The columns are fitted
    ``model.fit_width`` (default ``C``) at a time (``model.fit_terms``).
    """
    weights = np.asarray(weights, dtype=np.float64)
    n, m = weights.shape
    capacity, dimension = getattr(model, "fit_width", model.capacity), model.dimension
    proposals = []
    for first in range(0, m, capacity):
        width = min(capacity, m - first)
        block = np.zeros((n, capacity))
        block[:, :width] = weights[:, first:first + width]
        x = np.zeros((capacity, dimension))
        if start is not None:
            x[:width] = start[first:first + width]
        x, hessian = _newton(lambda values, block=block: model.fit_terms(values, block), x,
                             n_newton, floor)
        proposals.extend(_laplace(x, hessian, floor, scale)[:width])
    return proposals


def _laplace(x, hessian, floor, scale=1.0):
    """One :class:`LaplaceProposal` per row of ``x`` (the mode) and ``hessian``."""
    precision = _positive_precision(-hessian, floor) / scale**2
    cholesky = np.linalg.cholesky(precision)  # positive definite: eigenvalues >= floor
    return [LaplaceProposal(x[s].copy(), cholesky[s].copy()) for s in range(x.shape[0])]


def _newton(terms, x, n_newton, floor):
    """Damped Newton ascent of ``W`` independent objectives at once: ``terms(x)`` gives the
    objectives (W,), gradients (W, d) and Hessians (W, d, d) at ``x`` (W, d); at most
    ``n_newton`` steps, each with at most 25 halvings per row.  Returns the last ``x`` and
    its Hessians."""
    dimension = x.shape[1]
    objective, gradient, hessian = terms(x)
    for _ in range(n_newton):
        precision = _positive_precision(-hessian, floor)
        if dimension == 1:
            step = gradient / precision[:, :, 0]
        else:
            step = np.linalg.solve(precision, gradient[..., None])[..., 0]
        step = np.where(np.isfinite(step), step, 0.0)
        if np.max(np.abs(step)) < 1e-7:
            break
        length = np.ones(x.shape[0])
        pending = np.ones(x.shape[0], dtype=bool)
        for _ in range(25):  # backtracking, per row
            candidate = np.where(pending[:, None], x + length[:, None] * step, x)
            new_objective, new_gradient, new_hessian = terms(candidate)
            improved = pending & (new_objective >= objective - 1e-12)
            x = np.where(improved[:, None], candidate, x)
            objective = np.where(improved, new_objective, objective)
            gradient = np.where(improved[:, None], new_gradient, gradient)
            hessian = np.where(improved[:, None, None], new_hessian, hessian)
            pending &= ~improved
            if not pending.any():
                break
            length = np.where(pending, 0.5 * length, length)
    return x, hessian


@njit(cache=True)
def _sequential_allocation(log_a, log_b, order, side_b, forced, uniforms):
    """SAMS allocation of ``order`` to side a / b (sizes start at 1: the anchors), weights
    ``size * exp(log)``.  ``forced``: compute the probability of the sides in ``side_b``."""
    size_a = 1
    size_b = 1
    log_prob = 0.0
    for position in range(order.shape[0]):
        point = order[position]
        log_pa, log_pb = _log_two_way(log_a[point], log_b[point], size_a, size_b)
        if forced:
            goes_b = side_b[point]
        else:
            goes_b = np.log(uniforms[position]) < log_pb
            side_b[point] = goes_b
        if goes_b:
            size_b += 1
            log_prob += log_pb
        else:
            size_a += 1
            log_prob += log_pa
    return size_a, size_b, log_prob


def _split_proposals(model, members, i, j, n_newton, soft=True):
    """``(q_a, q_b, q_merged)`` for the block ``members`` with anchors ``i`` (side a) and
    ``j`` (side b): a deterministic function of the block and the anchors; ``None`` when a fit
    fails (non-finite terms, a linear-algebra error), which the split and the merge of the
    same block and anchors then share."""
    try:
        proposals = (_fit_split_proposals(model, members, i, j, n_newton) if soft else
                     _fit_hard_split_proposals(model, members, i, j, n_newton))
    except (np.linalg.LinAlgError, FloatingPointError, ValueError, OverflowError):
        return None
    if not all(np.isfinite(q.mean).all() and np.isfinite(q.cholesky).all() for q in proposals):
        return None
    return proposals


#: EM iterations (each ``SPLIT_EM_NEWTON`` warm-started Newton steps) of the two-component
#: fit behind a split's parameter proposals.
SPLIT_EM_ITERATIONS = 8
SPLIT_EM_NEWTON = 3
#: Standard deviations of the split proposals ``q_a, q_b`` relative to their Laplace fits.
SPLIT_PROPOSAL_SCALE = 1.5
#: Probability that a parameter split-merge uses the soft two-component fit (else the hard
#: preliminary split by the anchors' one-point fits).
SOFT_SPLIT_PROBABILITY = 0.5


def _fit_log_likelihood(model, values):
    """``log f(y_i | theta_w)`` (n, W) for ``W <= model.fit_width`` vectors ``values``."""
    fit = getattr(model, "fit_log_likelihood", None)
    if fit is not None:
        return fit(values)
    padded = np.zeros((model.capacity, model.dimension))
    padded[:values.shape[0]] = values
    return model.log_likelihood(padded)[:, :values.shape[0]]


def _fit_hard_split_proposals(model, members, i, j, n_newton):
    """``(q_a, q_b, q_merged)`` fitted to a hard preliminary split of the block: each member
    to the anchor whose one-point fit gives it the larger likelihood (sharp for well-separated
    groups; overlapping halves of one cluster land tens of standard deviations away), the
    fits of the two sides started at the anchors' one-point fits."""
    theta, weights = _anchor_fits(model, members, i, j, n_newton)
    log_likelihood = _fit_log_likelihood(model, theta[:2])
    closer_to_b = log_likelihood[members, 1] > log_likelihood[members, 0]
    weights[members, 0] = ~closer_to_b
    weights[members, 1] = closer_to_b
    weights[i, 0], weights[i, 1] = 1.0, 0.0
    weights[j, 0], weights[j, 1] = 0.0, 1.0
    return laplace_proposals(model, weights, n_newton, start=theta)


def _anchor_fits(model, members, i, j, n_newton):
    """Starts of the split proposals' fits, a deterministic function of the block and the
    anchors: ``theta`` (3, d) with the one-point fits of the anchors ``i`` and ``j`` (they
    only start the two sides' fits and may have no mode -- a one-point block with a scale
    parameter -- so a few Newton steps) and, in the third row, the first Newton steps of the
    whole block from the fixed start, computed in the same evaluations (the fits are
    ``fit_width`` = 3 wide); ``weights`` (n, 3) with the anchors in the first two columns and
    the block in the third."""
    weights = np.zeros((model.n_points, 3))
    weights[i, 0] = weights[j, 1] = 1.0
    weights[members, 2] = 1.0
    fits = laplace_proposals(model, weights, min(n_newton, 4))
    return np.array([q.mean for q in fits]), weights


def _fit_split_proposals(model, members, i, j, n_newton):
    r"""``(q_a, q_b, q_merged)``: a deterministic function of the block and the anchors.

    ``q_a, q_b`` come from a two-component fit of the block: from the anchors' one-point fits,
    ``SPLIT_EM_ITERATIONS`` EM iterations (responsibilities :math:`r_l \propto \pi_a
    f(y_l \mid \theta_a)` against :math:`\pi_b f(y_l \mid \theta_b)`, the anchors held on
    their sides; then a few warm-started Newton steps of each side's weighted block posterior),
    then the Laplace approximations at the last responsibilities with their standard deviations
    scaled by ``SPLIT_PROPOSAL_SCALE``.  Soft responsibilities make the fit land where the
    split states of the chain are (two overlapping halves of one cluster included), so the
    reverse of a merge can propose the current halves' parameters; a hard preliminary split
    (each member to the nearer anchor) put them tens of standard deviations away, and no
    merge of two overlapping halves was accepted.  ``q_merged`` is the Laplace fit of the
    whole block from the fixed start, its Newton steps taken in the third column of the same
    evaluations as the anchors' and the EM's fits (no evaluations of its own).
    """
    theta, weights = _anchor_fits(model, members, i, j, n_newton)
    log_mix = np.log([0.5, 0.5])
    for iteration in range(SPLIT_EM_ITERATIONS + 1):
        terms = _fit_log_likelihood(model, theta[:2])[members] + log_mix
        difference = np.clip(terms[:, 0] - terms[:, 1], -700.0, 700.0)
        side_b = 1.0 / (1.0 + np.exp(np.where(np.isfinite(difference), difference, 0.0)))
        weights[members, 0], weights[members, 1] = 1.0 - side_b, side_b
        weights[i, 0], weights[i, 1] = 1.0, 0.0
        weights[j, 0], weights[j, 1] = 0.0, 1.0
        if iteration == SPLIT_EM_ITERATIONS:
            break
        # the merged block (third column) continues its fit in the same evaluations
        fits = laplace_proposals(model, weights, SPLIT_EM_NEWTON, start=theta)
        previous, theta = theta, np.array([q.mean for q in fits])
        sizes = weights[members, :2].sum(axis=0)
        previous_mix, log_mix = log_mix, np.log(sizes / sizes.sum())
        if (np.max(np.abs(theta[:2] - previous[:2])) < 1e-6
                and np.max(np.abs(log_mix - previous_mix)) < 1e-6):
            break  # a fixed point: these responsibilities are final
    q_a, q_b, q_merged = laplace_proposals(model, weights, n_newton, start=theta)
    return (LaplaceProposal(q_a.mean, q_a.cholesky / SPLIT_PROPOSAL_SCALE),
            LaplaceProposal(q_b.mean, q_b.cholesky / SPLIT_PROPOSAL_SCALE), q_merged)


def parameter_split_merge(model, values, labels, sizes, log_v_table, log_w_table, rng,
                          log_likelihood=None, n_newton: int = 12,
                          _drop: str | None = None) -> ParameterSplitMergeInfo:
    r"""Split-merge of a partition *and* its cluster parameters: MH on the joint target.

    Two distinct points ``i, j`` (ordered, uniform).

    * Same slot ``k`` (block ``S``): **split**.  An empty slot ``s`` is chosen uniformly;
      Laplace proposals :math:`q_a, q_b` are fitted to a deterministic two-component fit of
      ``S`` from the anchors ``i`` and ``j``: with probability ``SOFT_SPLIT_PROBABILITY``
      (drawn first, independent of the state: a mixture of two exact kernels) EM with soft
      responsibilities (:func:`_fit_split_proposals`, which lets a merge of two overlapping
      halves of one cluster propose the reverse split), otherwise a hard preliminary split
      (each member to the anchor whose one-point fit gives it the larger likelihood: sharp for
      well-separated groups), :math:`\theta_k' \sim q_a`, :math:`\theta_s' \sim q_b`,
      then the members other than ``i, j`` are allocated in a random order to ``k`` or ``s``
      with probabilities :math:`\propto m_a f(y \mid \theta_k')` and :math:`m_b f(y \mid
      \theta_s')` (SAMS).
    * Different slots ``k`` (of ``i``) and ``o``: **merge** ``o`` into ``k``,
      :math:`\theta_k' \sim q_m` (the Laplace fit of the union) and the emptied slot's
      parameter drawn from :math:`G_0`.

    Every fit is bounded (``n_newton`` Newton steps of at most 25 halvings each); a fit
    that fails (non-finite terms, a linear-algebra error) rejects the proposal, in both
    directions alike (the fits depend only on the block and the anchors).

    The ratio of a split from ``K`` occupied slots (a merge uses its inverse) is

    .. math::

        \frac{p_\mathrm{slot}(z')}{p_\mathrm{slot}(z)} (C-K)\,
        \frac{G_0(\theta_k') G_0(\theta_s') \prod_{l \in A} f(y_l \mid \theta_k')
        \prod_{l \in B} f(y_l \mid \theta_s')}{G_0(\theta_k) \prod_{l \in S}
        f(y_l \mid \theta_k)}\,
        \frac{q_m(\theta_k)}{q_a(\theta_k')\, q_b(\theta_s')\, P_\mathrm{alloc}(A, B)},

    (the old empty value's :math:`G_0(\theta_s)` cancels against the merge's draw of it);
    :math:`q_a, q_b, q_m` depend only on ``S``, ``i`` and ``j``, which split and merge share,
    so the move is an exact Metropolis-Hastings update of :math:`(z, \theta)`.

    Parameters
    ----------
    model
        The slot model: attributes ``capacity``, ``dimension`` (parameter length per slot),
        ``n_points`` and methods ``log_likelihood(values) -> (n, C)``,
        ``log_prior(values) -> (C,)`` (:math:`\log G_0` per slot, on the scale of
        ``values``), ``draw_prior(rng) -> (C, d)`` and ``fit_terms(values, weights) ->
        (objective (W,), gradient (W, d), hessian (W, d, d))`` of
        :math:`\log G_0(\theta_s) + \sum_i w_{is} \log f(y_i \mid \theta_s)` for ``W``
        vectors ``values`` (W, d) and weight columns (n, W), ``W = model.fit_width``
        (attribute optional, default ``C``).
    values : ndarray of float64, shape (C, d)
        The slots' parameters; updated in place when accepted.
    labels, sizes : ndarray of int64
        As in :func:`slot_gibbs_sweeps`; updated in place when accepted.
    log_v_table, log_w_table : ndarray
    rng : numpy.random.Generator
    log_likelihood : ndarray of float64, shape (n, C), optional
        ``model.log_likelihood(values)`` if already computed; its two changed columns are
        updated in place when accepted (the proposal evaluates only those two columns, through
        ``model.fit_log_likelihood(values (W, d)) -> (n, W)`` if the model has it).
    n_newton : int, default 12
        Newton iterations of the Laplace fits.

    Returns
    -------
    ParameterSplitMergeInfo
    """
    n, capacity = labels.shape[0], model.capacity
    if n < 2:
        return ParameterSplitMergeInfo(0, False, np.nan)
    i = int(rng.integers(n))
    j = int(rng.integers(n - 1))
    j += j >= i
    # the kind of the parameter proposals, independent of the state: a random mixture of two
    # exact kernels
    soft = bool(rng.random() < SOFT_SPLIT_PROBABILITY)
    n_occupied = int(np.count_nonzero(sizes))
    k = int(labels[i])
    if log_likelihood is None:
        log_likelihood = model.log_likelihood(values)
    old_prior = model.log_prior(values)
    new_values = values.copy()
    if labels[j] == k:  # --------------------------------------------------------- split
        n_empty = capacity - n_occupied
        if n_empty == 0:
            return ParameterSplitMergeInfo(0, False, np.nan)
        other = int(rng.choice(np.flatnonzero(sizes == 0)))
        members = np.flatnonzero(labels == k)
        proposals = _split_proposals(model, members, i, j, n_newton, soft)
        if proposals is None:
            return ParameterSplitMergeInfo(1, False, -np.inf)
        q_a, q_b, q_merged = proposals
        new_values[k], new_values[other] = q_a.sample(rng), q_b.sample(rng)
    else:  # ------------------------------------------------------------------------ merge
        other = int(labels[j])
        members = np.flatnonzero((labels == k) | (labels == other))
        proposals = _split_proposals(model, members, i, j, n_newton, soft)
        if proposals is None:
            return ParameterSplitMergeInfo(2, False, -np.inf)
        q_a, q_b, q_merged = proposals
        new_values[k] = q_merged.sample(rng)
        new_values[other] = model.draw_prior(rng)[other]
    order = rng.permutation(members[(members != i) & (members != j)])
    uniforms = rng.random(order.shape[0])
    # only slots k and other change: their two columns, O(n) whatever the capacity
    new_columns = _fit_log_likelihood(model, new_values[[k, other]])
    new_prior = model.log_prior(new_values)
    split = labels[j] == k
    # the split state's parameters and allocation
    split_values = new_values if split else values
    split_a, split_b = ((new_columns[:, 0], new_columns[:, 1]) if split
                        else (log_likelihood[:, k], log_likelihood[:, other]))
    side_b = np.zeros(n, dtype=np.bool_)
    if not split:
        side_b[members] = labels[members] == other
    side_b[j] = True
    size_a, size_b, log_allocation = _sequential_allocation(
        np.ascontiguousarray(split_a), np.ascontiguousarray(split_b), order, side_b,
        not split, uniforms)
    in_b = members[side_b[members]]
    in_a = members[~side_b[members]]
    merged_theta = values[k] if split else new_values[k]
    merged_column = log_likelihood[:, k] if split else new_columns[:, 0]
    merged_prior = old_prior if split else new_prior
    split_prior = new_prior if split else old_prior
    log_split = (
        log_split_weight(log_v_table, log_w_table, n_occupied - (0 if split else 1),
                         size_a, size_b)
        + split_a[in_a].sum() + split_b[in_b].sum()
        - merged_column[members].sum()
        + split_prior[k] + split_prior[other] - merged_prior[k]
        + q_merged.log_density(merged_theta)
        - q_a.log_density(split_values[k]) - q_b.log_density(split_values[other])
        - log_allocation)
    if _drop == "placement":  # negative control of the tests: (C-K)!/C! left out
        log_split += np.log(capacity - n_occupied + (0 if split else 1))
    if _drop == "soft_split_proposal" and soft:  # negative control: q_a q_b left out
        log_split += q_a.log_density(split_values[k]) + q_b.log_density(split_values[other])
    log_ratio = float(log_split if split else -log_split)
    if np.isnan(log_ratio):
        log_ratio = -np.inf
    accepted = bool(np.log(rng.random()) < log_ratio)
    if accepted:
        values[k], values[other] = new_values[k], new_values[other]
        log_likelihood[:, k], log_likelihood[:, other] = new_columns[:, 0], new_columns[:, 1]
        if split:
            labels[in_b] = other
            sizes[k], sizes[other] = size_a, size_b
        else:
            labels[members] = k
            sizes[k], sizes[other] = size_a + size_b, 0
    return ParameterSplitMergeInfo(1 if split else 2, accepted, log_ratio)


# ----------------------------------------------------------------------------------------
# The occupied slots' parameters given the labels (Laplace independence proposals)
# ----------------------------------------------------------------------------------------
class ParameterUpdateInfo(NamedTuple):
    """What :func:`laplace_parameter_update` did."""

    n_proposed: int
    """Occupied slots whose parameters were proposed (a slot whose fit failed is not)."""
    n_accepted: int
    log_likelihood: np.ndarray
    """``log f(y_i | theta_s)`` (n, C) for the parameters after the update."""


def _block_proposals(model, labels, occupied, n_newton, floor=1e-4):
    """Laplace proposals of the occupied slots' block posteriors given the labels (from the
    fixed start): with ``model.label_fit_terms(values (C, d), labels)`` (every slot's terms
    from one O(n) pass over the points, each point at its own label) all blocks at once,
    otherwise by weight columns, ``fit_width`` blocks per evaluation."""
    label_terms = getattr(model, "label_fit_terms", None)
    if label_terms is None:
        weights = np.zeros((labels.shape[0], occupied.size))
        weights[np.arange(labels.shape[0]), np.searchsorted(occupied, labels)] = 1.0
        return laplace_proposals(model, weights, n_newton, floor)
    x = np.zeros((model.capacity, model.dimension))

    def terms(values):
        objective, gradient, hessian = label_terms(values, labels)
        return objective[occupied], gradient[occupied], hessian[occupied]

    def padded_terms(rows):
        full = np.zeros((model.capacity, model.dimension))
        full[occupied] = rows
        return terms(full)

    rows, hessian = _newton(padded_terms, x[occupied], n_newton, floor)
    return _laplace(rows, hessian, floor)


def laplace_parameter_update(model, values, labels, sizes, rng, log_likelihood=None,
                             n_newton: int = 12, _drop: str | None = None
                             ) -> ParameterUpdateInfo:
    r"""Independence Metropolis-Hastings updates of every occupied slot's parameters given
    the labels, all slots at once.

    Given the labels the slots' parameters are independent, slot ``s`` (block ``S``) with
    the conditional :math:`\pi_s(\theta) \propto G_0(\theta) \prod_{i \in S}
    f(y_i \mid \theta)`.  Its proposal :math:`q_s` is the Laplace approximation of
    :math:`\pi_s` (:func:`laplace_proposals`, Newton from a fixed start: a deterministic
    function of ``S``, not of the current value), :math:`\theta_s' \sim q_s`, accepted with
    probability

    .. math:: \min\Big(1, \frac{\pi_s(\theta_s')\, q_s(\theta_s)}
       {\pi_s(\theta_s)\, q_s(\theta_s')}\Big),

    independently per slot (a product of exact kernels on a product of conditionals).  A
    slot whose fit fails keeps its value.  Where the block posterior is close to Gaussian
    (a cluster of more than a handful of points) the acceptance is high and the draws are
    nearly independent: one such update replaces many NUTS trajectories over all slots.
    Empty slots are left alone (the caller refreshes them from :math:`G_0`).

    Parameters
    ----------
    model
        The slot model of :func:`parameter_split_merge` (``capacity``, ``dimension``,
        ``n_points``, ``log_likelihood``, ``log_prior``, ``fit_terms``); optionally
        ``label_fit_terms(values, labels)`` (the fits, every slot from one pass over the
        points) and ``label_log_density(values, labels) -> (C,)`` (its objective alone: the
        acceptance ratios then need no (n, C) matrix, and the update computes just the one it
        returns).
    values : ndarray of float64, shape (C, d)
        The slots' parameters (transformed scale); updated in place.
    labels, sizes : ndarray of int64
        As in :func:`slot_gibbs_sweeps` (not changed).
    rng : numpy.random.Generator
    log_likelihood : ndarray (n, C), optional
        ``model.log_likelihood(values)`` if already computed (not used with
        ``label_log_density``).
    n_newton : int, default 12
        Newton iterations of the Laplace fits.

    Returns
    -------
    ParameterUpdateInfo
    """
    n = labels.shape[0]
    # with the model's ``label_log_density(values, labels)`` (every block's log posterior
    # density from one O(n) pass) the update needs no (n, C) matrix but the one it returns
    label_log_density = getattr(model, "label_log_density", None)
    if log_likelihood is None and label_log_density is None:
        log_likelihood = model.log_likelihood(values)
    occupied = np.flatnonzero(sizes > 0)
    try:
        proposals = _block_proposals(model, labels, occupied, n_newton)
    except (np.linalg.LinAlgError, FloatingPointError, ValueError, OverflowError):
        return ParameterUpdateInfo(0, 0, (model.log_likelihood(values) if log_likelihood is None
                                          else log_likelihood))
    fitted = np.array([np.isfinite(q.mean).all() and np.isfinite(q.cholesky).all()
                       for q in proposals], dtype=bool)
    proposed = values.copy()
    for m in np.flatnonzero(fitted):
        proposed[occupied[m]] = proposals[m].sample(rng)
    if label_log_density is not None:
        old_block, new_block = label_log_density(values, labels), label_log_density(proposed,
                                                                                    labels)
    else:
        new_likelihood = model.log_likelihood(proposed)
        points = np.arange(n)
        old_block = model.log_prior(values) + np.bincount(
            labels, weights=log_likelihood[points, labels], minlength=model.capacity)
        new_block = model.log_prior(proposed) + np.bincount(
            labels, weights=new_likelihood[points, labels], minlength=model.capacity)
    uniforms = rng.random(occupied.size)
    accepted = []
    for m in np.flatnonzero(fitted):
        s = occupied[m]
        log_ratio = new_block[s] - old_block[s]
        if _drop != "proposal":  # negative control of the tests: q treated as symmetric
            log_ratio += proposals[m].log_density(values[s]) - proposals[m].log_density(
                proposed[s])
        if np.log(uniforms[m]) < log_ratio:  # nan (non-finite terms) rejects
            values[s] = proposed[s]
            accepted.append(s)
    if label_log_density is not None:
        log_likelihood = model.log_likelihood(values)
    else:
        log_likelihood = log_likelihood.copy()
        log_likelihood[:, accepted] = new_likelihood[:, accepted]
    return ParameterUpdateInfo(int(fitted.sum()), len(accepted), log_likelihood)
