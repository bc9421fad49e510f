r"""Mixture of finite mixtures (MFM) partition prior and priors on the number of components.

Miller and Harrison (2018) put a prior :math:`p_K` on the number of components :math:`k`,
symmetric Dirichlet(:math:`\gamma`) weights given :math:`k`, and integrate both out.  The
induced law of the set partition with :math:`t` blocks is Gibbs-type (their eq. 3.2-3.3):

.. math::

    V_n(t) = \sum_{k=1}^{\infty} \frac{k_{(t)}}{(\gamma k)^{(n)}}\, p_K(k), \qquad
    W(m) = \gamma^{(m)},

with :math:`k_{(t)} = k (k-1) \cdots (k-t+1)` the falling factorial (zero for
:math:`k < t`) and :math:`x^{(n)} = \Gamma(x+n)/\Gamma(x)` the rising factorial.

Numerical evaluation
--------------------
:math:`\log V_n(t)` for ``t = 0..n+1`` is accumulated in log space (log-sum-exp over
``k``) in chunks of increasing length.  Write :math:`f_t(k) = k_{(t)}/(\gamma k)^{(n)}`.
Because :math:`(k-i)/(\gamma k+i) \le 1/\gamma`, for every :math:`k > k_0`

* if :math:`t \le n`:  :math:`f_t(k) \le \gamma^{-t} \prod_{j=t}^{n-1} (\gamma (k_0+1) + j)^{-1}`,
  so the remaining tail is at most that bound times :math:`P(K > k_0)`;
* if :math:`t = n+1`: :math:`f_t(k) \le \gamma^{-n} k`, so the tail is at most
  :math:`\gamma^{-n} E[K\,1\{K > k_0\}]`.

The sum stops once, for every ``t``, this rigorous tail bound is below ``1e-16`` times the
partial sum (a lower bound of :math:`V_n(t)`), i.e. the relative truncation error is below
``1e-16``.  Each prior on the number of components supplies upper bounds of
:math:`P(K > k_0)` and :math:`E[K\,1\{K>k_0\}]`.  Tables are cached per
``(n, gamma, k_prior)``.

References
----------
.. [1] Miller, J. W. and Harrison, M. T. (2018). Mixture models with a prior on the number of
   components. Journal of the American Statistical Association 113(521), 340-356,
   eqs. 3.2-3.3 (EPPF) and Section 3.2 (computing V_n(t)).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln, logsumexp

from pymc_splitmerge.priors.base import GibbsTypePrior, validate_real

__all__ = [
    "ComponentCountPrior",
    "ExplicitPmf",
    "Geometric",
    "MixtureOfFiniteMixturesPrior",
    "ShiftedPoisson",
    "mixture_of_finite_mixtures_log_v_table",
]

TRUNCATION_RELATIVE_ERROR = 1e-16
_MAX_TERMS = 50_000_000


class ComponentCountPrior:
    """Interface of a prior pmf on the number of components ``k >= 1``.

    Subclasses provide ``log_pmf(k)``, ``log_tail_bound(k0) >= log P(K > k0)``,
    ``log_tail_first_moment_bound(k0) >= log E[K 1{K > k0}]`` and ``support_max``.
    """

    support_max: int | None = None

    def log_pmf(self, k: np.ndarray) -> np.ndarray:  # pragma: no cover - interface
        raise NotImplementedError

    def log_tail_bound(self, k0: int) -> float:  # pragma: no cover - interface
        raise NotImplementedError

    def log_tail_first_moment_bound(self, k0: int) -> float:  # pragma: no cover - interface
        raise NotImplementedError


def _poisson_log_survival_bound(m: int, rate: float) -> float:
    """Upper bound of log P(X >= m) for X ~ Poisson(rate), accurate in the deep tail."""
    from scipy.stats import poisson  # on first use: scipy.stats costs ~0.5 CPU s to import

    if m <= 0:
        return 0.0
    if m + 1 > 2.0 * rate:
        # P(X >= m) = pmf(m) sum_j rate^j m!/(m+j)! <= pmf(m) / (1 - rate/(m+1))
        return float(poisson.logpmf(m, rate) - math.log1p(-rate / (m + 1)))
    return float(poisson.logsf(m - 1, rate))


@dataclass(frozen=True)
class ShiftedPoisson(ComponentCountPrior):
    """``k - 1 ~ Poisson(rate)`` on ``k = 1, 2, ...``.

    Parameters
    ----------
    rate : float
        Poisson rate, ``rate > 0``.
    """

    rate: float

    def __post_init__(self):
        rate = validate_real(self.rate, "rate")
        if rate <= 0:
            raise ValueError(f"rate of the shifted Poisson must be > 0, got {rate}")
        object.__setattr__(self, "rate", rate)

    def log_pmf(self, k: np.ndarray) -> np.ndarray:
        from scipy.stats import poisson  # on first use (see _poisson_log_survival_bound)

        k = np.asarray(k)
        return np.where(k >= 1, poisson.logpmf(k - 1, self.rate), -np.inf)

    def log_tail_bound(self, k0: int) -> float:
        # K > k0  <=>  K - 1 >= k0
        return _poisson_log_survival_bound(k0, self.rate)

    def log_tail_first_moment_bound(self, k0: int) -> float:
        # E[K 1{K>k0}] = P(X >= k0) + E[X 1{X >= k0}] = P(X >= k0) + rate P(X >= k0 - 1)
        return float(
            np.logaddexp(
                _poisson_log_survival_bound(k0, self.rate),
                math.log(self.rate) + _poisson_log_survival_bound(k0 - 1, self.rate),
            )
        )


@dataclass(frozen=True)
class Geometric(ComponentCountPrior):
    """``P(K = k) = p (1 - p)^(k - 1)`` on ``k = 1, 2, ...``.

    Parameters
    ----------
    p : float
        Success probability, ``0 < p <= 1``.
    """

    p: float

    def __post_init__(self):
        p = validate_real(self.p, "p")
        if not 0.0 < p <= 1.0:
            raise ValueError(f"p of the geometric prior must satisfy 0 < p <= 1, got {p}")
        object.__setattr__(self, "p", p)

    @property
    def support_max(self) -> int | None:
        return 1 if self.p == 1.0 else None

    def log_pmf(self, k: np.ndarray) -> np.ndarray:
        k = np.asarray(k)
        if self.p == 1.0:
            return np.where(k == 1, 0.0, -np.inf)
        safe_k = np.maximum(k, 1)
        return np.where(k >= 1, math.log(self.p) + (safe_k - 1) * math.log1p(-self.p), -np.inf)

    def log_tail_bound(self, k0: int) -> float:
        if k0 <= 0:
            return 0.0
        return -np.inf if self.p == 1.0 else k0 * math.log1p(-self.p)

    def log_tail_first_moment_bound(self, k0: int) -> float:
        # memoryless: E[K 1{K>k0}] = P(K > k0) (k0 + 1/p)
        k0 = max(k0, 0)
        return self.log_tail_bound(k0) + math.log(k0 + 1.0 / self.p)


@dataclass(frozen=True)
class ExplicitPmf(ComponentCountPrior):
    """Explicit pmf ``P(K = k) = probabilities[k - 1]`` for ``k = 1..len(probabilities)``.

    Parameters
    ----------
    probabilities : sequence of float
        Non-negative, finite, summing to one (within ``1e-8``; renormalised exactly).
    """

    probabilities: tuple

    def __post_init__(self):
        values = np.asarray(self.probabilities, dtype=np.float64).reshape(-1)
        if values.size == 0:
            raise ValueError("probabilities must be non-empty")
        if not np.all(np.isfinite(values)) or np.any(values < 0):
            raise ValueError(f"probabilities must be finite and >= 0, got {values}")
        total = values.sum()
        if abs(total - 1.0) > 1e-8:
            raise ValueError(f"probabilities must sum to 1, they sum to {total}")
        values = values / total
        object.__setattr__(self, "probabilities", tuple(float(v) for v in values))

    @property
    def support_max(self) -> int:
        return int(np.flatnonzero(np.asarray(self.probabilities) > 0)[-1]) + 1

    def log_pmf(self, k: np.ndarray) -> np.ndarray:
        k = np.asarray(k)
        with np.errstate(divide="ignore"):
            table = np.log(np.concatenate([[0.0], self.probabilities, [0.0]]))
            return np.where((k >= 1) & (k <= len(self.probabilities)),
                            table[np.clip(k, 0, len(self.probabilities) + 1)], -np.inf)

    def log_tail_bound(self, k0: int) -> float:
        tail = float(np.sum(self.probabilities[max(k0, 0):]))
        return math.log(tail) if tail > 0 else -np.inf

    def log_tail_first_moment_bound(self, k0: int) -> float:
        k = np.arange(1, len(self.probabilities) + 1)
        mask = k > k0
        moment = float(np.sum(k[mask] * np.asarray(self.probabilities)[mask]))
        return math.log(moment) if moment > 0 else -np.inf


def _tail_bounds(n: int, gamma: float, k_prior: ComponentCountPrior, k0: int,
                 t: np.ndarray) -> np.ndarray:
    """Upper bound of log sum_{k > k0} f_t(k) p_K(k) for t = 0..n+1 (module docstring)."""
    x = gamma * (k0 + 1)
    bound = np.empty(len(t))
    inner = t <= n
    bound[inner] = (-t[inner] * math.log(gamma) - (gammaln(x + n) - gammaln(x + t[inner]))
                    + k_prior.log_tail_bound(k0))
    bound[~inner] = -n * math.log(gamma) + k_prior.log_tail_first_moment_bound(k0)
    return bound


@functools.lru_cache(maxsize=512)
def _cached_log_v_table(n: int, gamma: float, k_prior: ComponentCountPrior) -> np.ndarray:
    t = np.arange(n + 2)
    partial = np.full(n + 2, -np.inf)
    log_threshold = math.log(TRUNCATION_RELATIVE_ERROR)
    support_max = k_prior.support_max
    k_start, chunk = 1, 64
    while True:
        k_stop = k_start + chunk
        if support_max is not None:
            k_stop = min(k_stop, support_max + 1)
        k = np.arange(k_start, k_stop, dtype=np.float64)
        log_pmf = k_prior.log_pmf(k.astype(np.int64))
        feasible = k[:, None] >= t[None, :]
        log_falling = np.where(
            feasible, gammaln(k + 1.0)[:, None] - gammaln(np.maximum(k[:, None] - t + 1.0, 1.0)),
            -np.inf,
        )
        log_rising = gammaln(gamma * k + n) - gammaln(gamma * k)
        with np.errstate(invalid="ignore"):
            terms = log_falling - log_rising[:, None] + log_pmf[:, None]
        partial = np.logaddexp(partial, logsumexp(terms, axis=0))
        k_last = k_stop - 1
        if support_max is not None and k_last >= support_max:
            break
        if k_prior.log_tail_bound(k_last) == -np.inf:
            break
        bound = _tail_bounds(n, gamma, k_prior, k_last, t)
        if k_last >= n + 1 and np.all(bound < log_threshold + partial):
            break
        if k_last > _MAX_TERMS:
            raise RuntimeError(
                f"MFM V_n(t) did not converge after {k_last} terms (n={n}, gamma={gamma}, "
                f"k_prior={k_prior!r})"
            )
        k_start, chunk = k_stop, min(2 * chunk, 1 << 16)
    partial.setflags(write=False)
    return partial


def mixture_of_finite_mixtures_log_v_table(n: int, gamma: float,
                                           k_prior: ComponentCountPrior) -> np.ndarray:
    """``log V_n(t)`` for ``t = 0..n+1`` (read-only, cached; see module docstring).

    Parameters
    ----------
    n : int
        Number of points, ``n >= 1``.
    gamma : float
        Dirichlet concentration of the component weights, ``gamma > 0``.
    k_prior : ComponentCountPrior
        Prior on the number of components.

    Returns
    -------
    ndarray of float64, shape (n + 2,)
    """
    return _cached_log_v_table(int(n), float(gamma), k_prior)


@dataclass(frozen=True)
class MixtureOfFiniteMixturesPrior(GibbsTypePrior):
    """Mixture of finite mixtures partition prior (Miller & Harrison 2018).

    Parameters
    ----------
    gamma : float
        Symmetric Dirichlet concentration of the weights given ``k``, ``gamma > 0``.
    k_prior : ShiftedPoisson or Geometric or ExplicitPmf
        Prior on the number of components ``k >= 1``.
    """

    gamma: float
    k_prior: ComponentCountPrior
    parameter_names = ("gamma", "k_prior")
    static_parameter_names = ("gamma", "k_prior")

    @classmethod
    def examples(cls):
        return [{"gamma": 1.0, "k_prior": ShiftedPoisson(2.0)},
                {"gamma": 0.4, "k_prior": Geometric(0.3)},
                {"gamma": 1.5, "k_prior": ExplicitPmf([0.1, 0.0, 0.5, 0.4])}]

    @classmethod
    def invalid_examples(cls):
        return [({"gamma": 0.0, "k_prior": Geometric(0.5)}, ValueError, "gamma"),
                ({"gamma": 1.0, "k_prior": 3}, TypeError, "k_prior")]

    def __post_init__(self):
        gamma = validate_real(self.gamma, "gamma")
        if gamma <= 0:
            raise ValueError(f"gamma (Dirichlet concentration of the MFM) must be > 0, got {gamma}")
        if not isinstance(self.k_prior, ComponentCountPrior):
            raise TypeError(
                "k_prior must be a ShiftedPoisson, Geometric or ExplicitPmf instance, "
                f"got {type(self.k_prior).__name__}"
            )
        object.__setattr__(self, "gamma", gamma)

    @property
    def max_clusters(self) -> int | None:
        return self.k_prior.support_max

    def _log_v(self, n: int, k: np.ndarray) -> np.ndarray:
        if np.any(k > n + 1):
            raise ValueError(
                f"the MFM coefficient V(n, K) is only computed for K <= n + 1 = {n + 1}, "
                f"got K = {int(k.max())}"
            )
        return mixture_of_finite_mixtures_log_v_table(n, self.gamma, self.k_prior)[k]

    def _log_w(self, m: np.ndarray) -> np.ndarray:
        return gammaln(self.gamma + m) - gammaln(self.gamma)

    # pytensor graph (see GibbsTypePrior.log_eppf_graph); gamma and k_prior are numeric
    # constants: log V_n(t) is the constant table of the numeric prior
    @classmethod
    def log_v_graph(cls, pt, n, n_clusters, *, gamma, k_prior):
        log_v_table = cls(gamma=gamma, k_prior=k_prior).tables(n)[0]
        return pt.as_tensor_variable(np.asarray(log_v_table, dtype=np.float64))[n_clusters]

    @classmethod
    def log_w_graph(cls, pt, m, *, gamma, k_prior):
        gamma = float(gamma)
        return pt.gammaln(gamma + m) - math.lgamma(gamma)
