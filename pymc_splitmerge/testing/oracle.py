r"""Exact posterior over set partitions by enumeration (the test oracle).

For ``n <= 10`` points all set partitions are enumerated
(:func:`pymc_splitmerge.core.enumerate.enumerate_partitions`) and

.. math::

    \log \pi(c \mid y) = \log p(c) + \sum_{b \in c} \log m(y_b) - \log p(y),

with :math:`\log p(c)` the prior EPPF (``prior.log_eppf``, evaluated once per distinct
multiset of block sizes, independently of the kernel tables) and :math:`m(y_b)` the
marginal likelihood of the rows in block :math:`b` (``family.log_marginal_of``, evaluated
once per non-empty subset of points).

With a Gamma(shape, rate) prior on the concentration :math:`\alpha`,

.. math::

    \pi(c \mid y) \propto \prod_b m(y_b) \int_0^\infty p(c \mid \alpha)\,
    \mathrm{Gamma}(\alpha; a, b)\, d\alpha,

where :math:`p(c \mid \alpha)` depends on :math:`c` only through its block sizes; if the
block weights :math:`W` do not depend on :math:`\alpha` (Dirichlet process, Pitman-Yor), only
through the number of blocks :math:`K`, and one integral per ``K`` suffices.  The integrals
are computed with adaptive quadrature (``scipy.integrate.quad``) in :math:`u = \log\alpha`,
split at the mode of the integrand and scaled by its maximum.

References
----------
.. [1] Escobar, M. D. and West, M. (1995). Bayesian density estimation and inference using
   mixtures. JASA 90(430), 577-588 (Gamma prior on the DP concentration).
.. [2] Bouchard-Côté, A., Doucet, A. and Roth, A. (2017). Particle Gibbs split-merge sampling
   for Bayesian inference in mixture models. JMLR 18(28).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy import integrate, optimize
from scipy.special import gammaln, logsumexp

from pymc_splitmerge.core.enumerate import enumerate_partitions
from pymc_splitmerge.core.relabel import partition_index
from pymc_splitmerge.priors.base import GibbsTypePrior

__all__ = [
    "ExactPosterior",
    "ExactPosteriorRandomConcentration",
    "exact_posterior",
    "exact_posterior_random_concentration",
    "exact_prior",
]


@dataclass(frozen=True, eq=False)
class ExactPosterior:
    """Exact law over all set partitions of ``n`` points.

    Attributes
    ----------
    partitions : ndarray of int64, shape (n_partitions, n)
        Canonical labels, one row per set partition (``n_partitions = Bell(n)``).
    log_prob : ndarray of float64, shape (n_partitions,)
        Normalised log probabilities (``-inf`` for impossible partitions).
    log_evidence : float
        Log normalising constant (log marginal likelihood of the data; 0 for a prior).
    """

    partitions: np.ndarray
    log_prob: np.ndarray
    log_evidence: float = 0.0
    prob: np.ndarray = field(init=False, repr=False)
    n_clusters: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "prob", np.exp(self.log_prob))
        n_clusters = (self.partitions.max(axis=1) + 1 if self.partitions.shape[1]
                      else np.zeros(len(self.partitions), dtype=np.int64))
        object.__setattr__(self, "n_clusters", n_clusters)

    @property
    def n_points(self) -> int:
        """Number of points ``n``."""
        return int(self.partitions.shape[1])

    @property
    def n_clusters_pmf(self) -> np.ndarray:
        """Exact pmf of the number of clusters, array of shape (n + 1,) indexed by ``K``."""
        return np.bincount(self.n_clusters, weights=self.prob, minlength=self.n_points + 1)

    @property
    def coclustering(self) -> np.ndarray:
        """Exact co-clustering probabilities ``P(c_i = c_j)``, array of shape (n, n)."""
        same = self.partitions[:, :, None] == self.partitions[:, None, :]
        return np.tensordot(self.prob, same.astype(np.float64), axes=1)

    def probability_of(self, labels) -> np.ndarray:
        """Exact probability of the partition(s) given by label rows of shape (..., n)."""
        return self.prob[partition_index(labels, self.n_points)]

    def sample(self, num_samples: int, rng: np.random.Generator) -> np.ndarray:
        """I.i.d. exact draws, canonical labels of shape (num_samples, n)."""
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
        index = rng.choice(len(self.prob), size=int(num_samples), p=self.prob / self.prob.sum())
        return self.partitions[index].copy()


@dataclass(frozen=True, eq=False)
class ExactPosteriorRandomConcentration(ExactPosterior):
    """Exact partition posterior with a Gamma prior on the concentration.

    Attributes
    ----------
    concentration_mean : float
        Exact posterior mean of the concentration.
    concentration_variance : float
        Exact posterior variance of the concentration.
    """

    concentration_mean: float = math.nan
    concentration_variance: float = math.nan


def _block_size_signatures(partitions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct sorted block-size vectors (rows, zero padded) and the inverse map."""
    num_rows, n = partitions.shape
    if n == 0:
        return np.zeros((1, 0), dtype=np.int64), np.zeros(num_rows, dtype=np.int64)
    sizes = np.zeros((num_rows, n), dtype=np.int64)
    np.add.at(sizes, (np.repeat(np.arange(num_rows), n), partitions.reshape(-1)), 1)
    sizes = -np.sort(-sizes, axis=1)
    unique, inverse = np.unique(sizes, axis=0, return_inverse=True)
    return unique, inverse.reshape(-1)


def _log_prior(prior: GibbsTypePrior, partitions: np.ndarray) -> np.ndarray:
    signatures, inverse = _block_size_signatures(partitions)
    values = np.array([prior.log_eppf(row) for row in signatures])
    return values[inverse]


def _prepare(family, data) -> np.ndarray:
    prepared = np.asarray(family.prepare_data(data), dtype=np.float64)
    if prepared.ndim != 2:
        raise ValueError(f"family.prepare_data must return a 2-D array, got shape {prepared.shape}")
    return prepared


def _log_likelihood(family, prepared: np.ndarray, partitions: np.ndarray) -> np.ndarray:
    n = prepared.shape[0]
    if n == 0:
        return np.zeros(len(partitions))
    bits = np.int64(1) << np.arange(n, dtype=np.int64)
    masks = np.stack([(partitions == j) @ bits for j in range(n)], axis=1)  # (B, n)
    subset_log_marginal = np.zeros(1 << n)
    for mask in np.unique(masks[masks > 0]):
        members = np.flatnonzero((int(mask) >> np.arange(n)) & 1)
        subset_log_marginal[mask] = float(family.log_marginal_of(prepared[members]))
    return subset_log_marginal[masks].sum(axis=1)


def _normalise(log_unnormalised: np.ndarray) -> tuple[np.ndarray, float]:
    log_evidence = float(logsumexp(log_unnormalised))
    if not math.isfinite(log_evidence):
        raise ValueError("every partition has zero probability (log evidence is not finite)")
    return log_unnormalised - log_evidence, log_evidence


def exact_prior(prior: GibbsTypePrior, n: int) -> ExactPosterior:
    """Exact prior law over the set partitions of ``n`` points.

    Parameters
    ----------
    prior : GibbsTypePrior
        Partition prior (uses ``prior.log_eppf``).
    n : int
        Number of points, ``0 <= n <= 10``.

    Returns
    -------
    ExactPosterior
        ``log_prob`` is the log EPPF itself; ``log_evidence`` is the log of its total mass
        (0 up to rounding for a correctly normalised prior).
    """
    partitions = enumerate_partitions(n)
    log_prior = _log_prior(prior, partitions)
    log_prob, log_total = _normalise(log_prior)
    return ExactPosterior(partitions=partitions, log_prob=log_prob, log_evidence=log_total)


def exact_posterior(prior: GibbsTypePrior, family, data) -> ExactPosterior:
    """Exact posterior over the set partitions of the rows of ``data``.

    Parameters
    ----------
    prior : GibbsTypePrior
        Partition prior.
    family : ComponentFamily
        Conjugate component family with numeric hyperparameters; only
        ``family.prepare_data(data)`` and ``family.log_marginal_of(x2d)`` are used.
    data : array_like, shape (n, ...) with ``n <= 10``
        Observations.

    Returns
    -------
    ExactPosterior
        Posterior law; ``log_evidence`` is the log marginal likelihood ``log p(data)``.
    """
    prepared = _prepare(family, data)
    partitions = enumerate_partitions(prepared.shape[0])
    log_joint = _log_prior(prior, partitions) + _log_likelihood(family, prepared, partitions)
    log_prob, log_evidence = _normalise(log_joint)
    return ExactPosterior(partitions=partitions, log_prob=log_prob, log_evidence=log_evidence)


def _validate_gamma_prior(alpha_prior) -> tuple[float, float]:
    try:
        shape, rate = (float(v) for v in alpha_prior)
    except (TypeError, ValueError):
        raise TypeError(f"alpha_prior must be a pair (shape, rate), got {alpha_prior!r}") from None
    if not (math.isfinite(shape) and math.isfinite(rate) and shape > 0 and rate > 0):
        raise ValueError(
            f"alpha_prior (shape, rate) must both be finite and > 0, got {alpha_prior}"
        )
    return shape, rate


_LOG_ALPHA_LIMIT = 600.0


def _guard(log_f):
    def guarded(u: float) -> float:
        value = log_f(u)
        return -np.inf if math.isnan(value) else value

    return guarded


def _memoize(log_f):
    cache: dict[float, float] = {}

    def memoized(u: float) -> float:
        value = cache.get(u)
        if value is None:
            value = cache[u] = log_f(u)
        return value

    return memoized


def _log_moments(log_f: Callable[[float], float]) -> list[float]:
    """log of the integrals over u in R of exp(log_f(u) + power * u), power = 0, 1, 2."""
    log_f = _memoize(_guard(log_f))
    return [_log_integral(log_f, power) for power in (0, 1, 2)]


def _log_integral(log_f: Callable[[float], float], power: int) -> float:
    """log of the integral over u in R of exp(log_f(u) + power * u)."""

    def log_integrand(u: float) -> float:
        if not -_LOG_ALPHA_LIMIT < u < _LOG_ALPHA_LIMIT:
            return -np.inf
        return log_f(u) + power * u

    grid = np.linspace(-30.0, 30.0, 41)
    grid_values = np.array([log_integrand(u) for u in grid])
    if not np.any(np.isfinite(grid_values)):
        return -np.inf  # e.g. more clusters than a finite prior allows: zero for every alpha
    start = float(grid[np.argmax(grid_values)])
    result = optimize.minimize_scalar(lambda u: -log_integrand(u),
                                      bracket=(start - 0.5, start + 0.5))
    mode = float(result.x) if log_integrand(float(result.x)) >= grid_values.max() else start
    log_peak = log_integrand(mode)
    if not math.isfinite(log_peak):
        raise FloatingPointError("the concentration integrand has no finite maximum")

    def scaled(u: float) -> float:
        return math.exp(log_integrand(u) - log_peak)

    options = {"epsabs": 0.0, "epsrel": 1e-11, "limit": 500}
    left, _ = integrate.quad(scaled, -np.inf, mode, **options)
    right, _ = integrate.quad(scaled, mode, np.inf, **options)
    return log_peak + math.log(left + right)


def _w_depends_on_concentration(prior_factory, n: int) -> bool:
    if n == 0:
        return False
    m = np.arange(1, n + 1)
    first = prior_factory(0.7).log_w(m)
    second = prior_factory(2.3).log_w(m)
    first = first - first[0]
    second = second - second[0]
    return not np.allclose(first, second, rtol=0.0, atol=1e-13)


def exact_posterior_random_concentration(
    prior_factory: Callable[[float], GibbsTypePrior],
    alpha_prior: tuple[float, float],
    family=None,
    data=None,
    *,
    n: int | None = None,
) -> ExactPosteriorRandomConcentration:
    """Exact partition posterior with a Gamma prior on the concentration, by quadrature.

    Parameters
    ----------
    prior_factory : callable
        ``prior_factory(alpha) -> GibbsTypePrior``, e.g. ``DirichletProcessPrior`` or
        ``lambda a: PitmanYorPrior(a, 0.3)``.
    alpha_prior : (float, float)
        Shape and *rate* of the Gamma prior on ``alpha``.
    family : ComponentFamily, optional
        Component family; ``None`` gives the marginal prior over partitions (then pass ``n``).
    data : array_like, shape (n, ...), optional
        Observations (required with ``family``).
    n : int, optional
        Number of points when ``family`` is ``None``.

    Returns
    -------
    ExactPosteriorRandomConcentration
        Partition law plus the exact posterior mean and variance of ``alpha``.
    """
    shape, rate = _validate_gamma_prior(alpha_prior)
    if family is None:
        if n is None:
            raise ValueError("pass n (number of points) when no family/data is given")
        partitions = enumerate_partitions(n)
        log_likelihood = np.zeros(len(partitions))
    else:
        if data is None:
            raise ValueError("data is required when a family is given")
        prepared = _prepare(family, data)
        partitions = enumerate_partitions(prepared.shape[0])
        log_likelihood = _log_likelihood(family, prepared, partitions)
    n_points = partitions.shape[1]
    log_gamma_constant = shape * math.log(rate) - gammaln(shape)

    signatures, inverse = _block_size_signatures(partitions)
    if _w_depends_on_concentration(prior_factory, n_points):
        # integrate the whole EPPF, once per block-size multiset
        def make_log_f(row):
            def log_f(u):
                alpha = math.exp(u)
                return (prior_factory(alpha).log_eppf(row) + log_gamma_constant
                        + shape * u - rate * alpha)
            return log_f

        groups = signatures
        group_of_partition = inverse
        log_constant_part = np.zeros(len(partitions))
    else:
        # p(c | alpha) = V_alpha(n, K) prod W(n_j) with W free of alpha: one integral per K
        n_clusters_of_signature = (signatures > 0).sum(axis=1)
        groups, group_of_signature = np.unique(n_clusters_of_signature, return_inverse=True)
        group_of_partition = group_of_signature.reshape(-1)[inverse]
        # a common factor W(1)^K of the block weights is moved into V
        reference = prior_factory(1.0)
        reference_log_w1 = reference.log_w(1)
        log_w_part = np.array([np.sum(reference.log_w(row[row > 0]) - reference_log_w1)
                               if n_points else 0.0 for row in signatures])
        log_constant_part = log_w_part[inverse]

        def make_log_f(k):
            def log_f(u):
                alpha = math.exp(u)
                prior = prior_factory(alpha)
                return (prior.log_v(n_points, int(k)) + int(k) * prior.log_w(1)
                        + log_gamma_constant + shape * u - rate * alpha)
            return log_f

    log_moments = np.array([_log_moments(make_log_f(g)) for g in groups])  # (n_groups, 3)
    log_joint = log_likelihood + log_constant_part + log_moments[group_of_partition, 0]
    log_prob, log_evidence = _normalise(log_joint)
    prob = np.exp(log_prob)
    possible = np.isfinite(log_moments[:, 0])
    conditional = np.zeros((len(groups), 2))
    conditional[possible] = np.exp(log_moments[possible, 1:] - log_moments[possible, :1])
    conditional_mean = conditional[group_of_partition, 0]
    conditional_second = conditional[group_of_partition, 1]
    mean = float(prob @ conditional_mean)
    variance = float(prob @ conditional_second - mean**2)
    return ExactPosteriorRandomConcentration(
        partitions=partitions,
        log_prob=log_prob,
        log_evidence=log_evidence,
        concentration_mean=mean,
        concentration_variance=variance,
    )
