r"""Exact laws and plain references for partitions with cluster parameters (slot form).

* :func:`exact_posterior_by_quadrature` -- the exact partition law of a mixture with any
  one-dimensional cluster parameter :math:`\theta \sim G_0` and likelihood
  :math:`f(y \mid \theta)`, by enumeration of the set partitions and one quadrature per block,

  .. math:: \pi(c) \propto \mathrm{EPPF}(c) \prod_{b \in c} \int \prod_{i \in b}
     f(y_i \mid \theta)\, G_0(\theta)\, d\theta,

  restricted to at most ``capacity`` blocks (the slot target's law; exact when the capacity
  is the prior's largest number of clusters).
* :class:`BlockParameterSampler` -- draws of a block's :math:`\theta` from its conditional
  posterior on a fine grid (inverse CDF), to start the one-step invariance tests from exact
  draws of :math:`(z, \theta)`.
* :func:`slot_state_draws` -- exact draws of the slot state: a partition from an exact law,
  its blocks placed in ``capacity`` slots uniformly, occupied slots' parameters from their
  posterior and empty slots' from :math:`G_0`.
* :func:`reference_slot_conditional` / :func:`reference_slot_gibbs_sweep` /
  :func:`reference_slot_split_merge` -- plain versions of
  :mod:`pymc_splitmerge.kernels.cluster_slots` written from the definition of the slot target
  (``prior.log_eppf`` and :math:`\log((C-K)!/C!)`); ``log_placement=None`` drops the
  placement factor (the ``1/E`` of Algorithm 8 in slot form), the negative control.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import combinations

import numpy as np
from scipy import integrate
from scipy.special import gammaln, logsumexp

from pymc_splitmerge.core.enumerate import enumerate_partitions
from pymc_splitmerge.testing.oracle import ExactPosterior

__all__ = [
    "BlockParameterSampler",
    "exact_posterior_by_quadrature",
    "log_placement",
    "reference_slot_conditional",
    "reference_slot_gibbs_sweep",
    "reference_slot_split_merge",
    "slot_state_draws",
]


def log_placement(n_clusters: int, capacity: int) -> float:
    """``log((C - K)! / C!)``: ``K`` blocks placed in ``C`` slots uniformly."""
    if n_clusters > capacity:
        return -np.inf
    return float(gammaln(capacity - n_clusters + 1) - gammaln(capacity + 1))


def _block_log_marginal(points, log_f, log_base, bounds, grid_size: int = 40001):
    """``log int prod_{i in points} f(y_i | theta) G0(theta) dtheta`` (Simpson's rule on a
    fine grid of ``bounds``, the integrand scaled by its maximum)."""
    grid = np.linspace(*bounds, grid_size)
    values = log_base(grid) + sum(log_f(i, grid) for i in points)
    peak = values.max()
    return peak + np.log(integrate.simpson(np.exp(values - peak), x=grid))


def exact_posterior_by_quadrature(prior, log_f: Callable, log_base: Callable, n: int,
                                  bounds: tuple[float, float], capacity: int | None = None
                                  ) -> ExactPosterior:
    """Exact partition law with a scalar cluster parameter, by enumeration and quadrature.

    Parameters
    ----------
    prior : GibbsTypePrior
    log_f : callable
        ``log_f(i, theta)``: log density of observation ``i`` given the parameter (vectorised
        over an array ``theta``).
    log_base : callable
        ``log_base(theta)``: log density of the base distribution (vectorised).
    n : int
        Number of points (``n <= 8``).
    bounds : (float, float)
        Integration range holding all the mass of every block's integrand.
    capacity : int, optional
        Keep only partitions of at most ``capacity`` blocks.
    """
    partitions = enumerate_partitions(n)
    subsets = {}
    for size in range(1, n + 1):
        for points in combinations(range(n), size):
            subsets[points] = _block_log_marginal(points, log_f, log_base, bounds)
    log_unnormalised = np.empty(len(partitions))
    for row, labels in enumerate(partitions):
        blocks = [tuple(np.flatnonzero(labels == b)) for b in range(labels.max() + 1)]
        sizes = np.array([len(b) for b in blocks])
        value = prior.log_eppf(sizes) + sum(subsets[b] for b in blocks)
        if capacity is not None and len(blocks) > capacity:
            value = -np.inf
        log_unnormalised[row] = value
    log_evidence = logsumexp(log_unnormalised)
    return ExactPosterior(partitions, log_unnormalised - log_evidence, float(log_evidence))


class BlockParameterSampler:
    """Draws of a block's parameter from its posterior (inverse CDF on a fine grid).

    ``sampler(points, rng)`` draws the parameter of the block ``points`` (a tuple of
    observation indices) from ``G0(theta) prod_{i in points} f(y_i | theta)`` normalised on
    ``bounds``; the grid CDF of each block is computed once.
    """

    def __init__(self, log_f: Callable, log_base: Callable, bounds, grid_size: int = 20001):
        self.log_f, self.log_base = log_f, log_base
        self.grid = np.linspace(*bounds, grid_size)
        self._cdfs: dict = {}

    def __call__(self, points, rng):
        points = tuple(points)
        cdf = self._cdfs.get(points)
        if cdf is None:
            log_density = self.log_base(self.grid) + sum(self.log_f(i, self.grid)
                                                         for i in points)
            cdf = np.cumsum(np.exp(log_density - log_density.max()))
            cdf /= cdf[-1]
            self._cdfs[points] = cdf
        return float(np.interp(rng.random(), cdf, self.grid))


def slot_state_draws(exact: ExactPosterior, capacity: int, draw_parameter: Callable,
                     num_samples: int, rng: np.random.Generator):
    """Exact draws of the slot state ``(labels, theta)`` (i.i.d.).

    ``draw_parameter(points, rng)`` draws one block's parameter given its points (an empty
    tuple: from the base distribution).  Yields ``(labels int64 (n,), theta (capacity,))``.
    """
    for row in exact.sample(num_samples, rng):
        n_clusters = int(row.max()) + 1
        placement = rng.permutation(capacity)[:n_clusters]
        labels = placement[row].astype(np.int64)
        theta = np.array([draw_parameter(tuple(np.flatnonzero(labels == s)), rng)
                          for s in range(capacity)])
        yield labels, theta


def _log_slot_target(labels, log_likelihood, prior, placement: bool) -> float:
    capacity = log_likelihood.shape[1]
    sizes = np.bincount(labels, minlength=capacity)
    value = prior.log_eppf(sizes) + log_likelihood[np.arange(labels.size), labels].sum()
    if placement:
        value += log_placement(int(np.count_nonzero(sizes)), capacity)
    return value


def reference_slot_conditional(log_likelihood, labels, i: int, prior,
                               placement: bool = True) -> np.ndarray:
    """Full conditional of ``labels[i]`` over the ``C`` slots, from the slot target itself."""
    capacity = log_likelihood.shape[1]
    values = np.empty(capacity)
    for slot in range(capacity):
        proposal = labels.copy()
        proposal[i] = slot
        values[slot] = _log_slot_target(proposal, log_likelihood, prior, placement)
    return np.exp(values - logsumexp(values))


def reference_slot_gibbs_sweep(log_likelihood, labels, prior, rng, placement: bool = True):
    """One random-scan sweep of :func:`reference_slot_conditional` updates (a new array)."""
    labels = labels.copy()
    for i in rng.permutation(labels.size):
        probabilities = reference_slot_conditional(log_likelihood, labels, i, prior, placement)
        labels[i] = rng.choice(probabilities.size, p=probabilities)
    return labels


def _two_way(log_a, log_b, size_a, size_b):
    weights = np.array([np.log(size_a) + log_a, np.log(size_b) + log_b])
    return weights - logsumexp(weights)


def reference_slot_split_merge(log_likelihood, labels, prior, rng, placement: bool = True):
    """One split-merge update as :func:`kernels.cluster_slots.slot_split_merge`, with the
    target ratio from the slot target itself (a new label array)."""
    n, capacity = log_likelihood.shape
    i, j = rng.choice(n, size=2, replace=False)
    sizes = np.bincount(labels, minlength=capacity)
    k = labels[i]
    proposal = labels.copy()

    def log_slot_choice(chosen, empty):
        weights = log_likelihood[j, empty]
        return log_likelihood[j, chosen] - logsumexp(weights)

    if labels[j] == k:
        empty = np.flatnonzero(sizes == 0)
        if empty.size == 0:
            return labels.copy()
        weights = np.exp(log_likelihood[j, empty] - log_likelihood[j, empty].max())
        new = empty[rng.choice(empty.size, p=weights / weights.sum())]
        log_proposal = log_slot_choice(new, empty)
        proposal[j] = new
        size_a = size_b = 1
        for point in rng.permutation(np.flatnonzero(labels == k)):
            if point in (i, j):
                continue
            log_p = _two_way(log_likelihood[point, k], log_likelihood[point, new], size_a,
                             size_b)
            if rng.random() < np.exp(log_p[1]):
                proposal[point] = new
                size_b += 1
                log_proposal += log_p[1]
            else:
                size_a += 1
                log_proposal += log_p[0]
        log_ratio = (_log_slot_target(proposal, log_likelihood, prior, placement)
                     - _log_slot_target(labels, log_likelihood, prior, placement) - log_proposal)
    else:
        other = labels[j]
        proposal[labels == other] = k
        empty_after = np.flatnonzero((sizes == 0) | (np.arange(capacity) == other))
        log_proposal = log_slot_choice(other, empty_after)
        size_a = size_b = 1
        for point in rng.permutation(np.flatnonzero((labels == k) | (labels == other))):
            if point in (i, j):
                continue
            log_p = _two_way(log_likelihood[point, k], log_likelihood[point, other], size_a,
                             size_b)
            if labels[point] == other:
                size_b += 1
                log_proposal += log_p[1]
            else:
                size_a += 1
                log_proposal += log_p[0]
        log_ratio = (_log_slot_target(proposal, log_likelihood, prior, placement)
                     - _log_slot_target(labels, log_likelihood, prior, placement) + log_proposal)
    if np.log(rng.random()) < log_ratio:
        return proposal
    return labels.copy()
