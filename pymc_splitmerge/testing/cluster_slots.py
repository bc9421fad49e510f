r"""Exact laws for partitions with cluster parameters (slot form).

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

The plain versions of :mod:`pymc_splitmerge.kernels.cluster_slots` that the kernels are tested
against live with the tests (``tests/kernel_references.py``).
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

    def _cdf_table(self, points) -> np.ndarray:
        points = tuple(points)
        cdf = self._cdfs.get(points)
        if cdf is None:
            log_density = self.log_base(self.grid) + sum(self.log_f(i, self.grid)
                                                         for i in points)
            cdf = np.cumsum(np.exp(log_density - log_density.max()))
            cdf /= cdf[-1]
            self._cdfs[points] = cdf
        return cdf

    def __call__(self, points, rng):
        return float(np.interp(rng.random(), self._cdf_table(points), self.grid))

    def cdf(self, points, theta: float) -> float:
        """The block posterior's CDF at ``theta`` (for probability-integral-transform tests
        of parameter updates)."""
        return float(np.interp(theta, self.grid, self._cdf_table(points)))


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
