r"""Exact updates of the partition prior's hyperparameters given the partition.

Given the partition (only its block sizes matter), the hyperparameters of a Gibbs-type prior
have the conditional density

.. math::

    p(\theta \mid c) \propto p(\theta)\; \mathrm{EPPF}(|b_1|, \dots, |b_K|;\ \theta),

which involves the EPPF and the parameter's own prior only (the data enter through ``c``).

Dirichlet process, Gamma(a, rate b) prior on α (Escobar & West 1995, section 6)
    With :math:`p(c \mid α) \propto α^K Γ(α)/Γ(α+n)` and the auxiliary variable
    :math:`η \mid α, K \sim \mathrm{Beta}(α + 1, n)`, the conditional of α is the two-component
    mixture

    .. math::

        α \mid η, K \sim π\, \mathrm{Gamma}(a + K,\ b - \log η)
                       + (1 - π)\, \mathrm{Gamma}(a + K - 1,\ b - \log η),
        \qquad \frac{π}{1 - π} = \frac{a + K - 1}{n (b - \log η)}

    (second parameters are *rates*; numpy's ``gamma`` takes the scale ``1/rate``).  Exactly
    one of the two Gamma draws is made (a mixture draw, not an average).

Pitman–Yor (α, d) and finite Dirichlet α (any prior density)
    Univariate slice sampling (Neal 2003) on each exact conditional: stepping out
    (Neal 2003, Fig. 3) plus shrinkage (Fig. 5).  Parameters bounded on one side
    (α > -d; α > 0) are sampled on the log scale ``u = log(θ - lower)`` with the Jacobian
    ``+u`` added to the log density; a parameter bounded on both sides (0 <= d < 1 and
    d > -α) is sampled directly with the whole support as the initial interval (no stepping
    out needed).

References
----------
.. [1] Escobar, M. D. and West, M. (1995). Bayesian density estimation and inference using
   mixtures. JASA 90(430), 577-588.  Section 6, eq. (13)-(14).
.. [2] Neal, R. M. (2003). Slice sampling. Annals of Statistics 31(3), 705-767.  Figs. 3, 5.
.. [3] Pitman, J. and Yor, M. (1997). The two-parameter Poisson-Dirichlet distribution
   derived from a stable subordinator. Annals of Probability 25(2), 855-900.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

__all__ = [
    "EscobarWestInfo",
    "SliceInfo",
    "escobar_west_update",
    "slice_sample",
    "eppf_slice_update",
    "dirichlet_process_concentration_slice_update",
    "pitman_yor_concentration_update",
    "pitman_yor_discount_update",
    "finite_dirichlet_concentration_update",
]


class EscobarWestInfo(NamedTuple):
    """Result of :func:`escobar_west_update`.

    Attributes
    ----------
    alpha : float
        New concentration.
    eta : float
        The auxiliary Beta(α + 1, n) variable.
    used_larger_shape : bool
        Whether the Gamma(a + K, ·) component was drawn (else Gamma(a + K - 1, ·)).
    """

    alpha: float
    eta: float
    used_larger_shape: bool


class SliceInfo(NamedTuple):
    """Result of :func:`slice_sample` and the parameter updates built on it.

    Attributes
    ----------
    value : float
        New value of the parameter.
    log_density : float
        Log target density (up to a constant, on the parameter's own scale) at ``value``.
    n_evaluations : int
        Number of log-density evaluations.
    """

    value: float
    log_density: float
    n_evaluations: int


def _check_rng(rng):
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator; got {type(rng).__name__}")


def escobar_west_update(alpha: float, n_clusters: int, n: int, prior_shape: float,
                        prior_rate: float, rng: np.random.Generator) -> EscobarWestInfo:
    """Escobar–West auxiliary-variable Gibbs update of the DP concentration.

    Parameters
    ----------
    alpha : float
        Current concentration, ``> 0``.
    n_clusters : int
        Number of clusters ``K`` of the current partition, ``1 <= K <= n``.
    n : int
        Number of points, ``>= 1``.
    prior_shape, prior_rate : float
        Shape ``a > 0`` and *rate* ``b > 0`` of the Gamma prior on α
        (``pm.Gamma("alpha", alpha=a, beta=b)``).
    rng : numpy.random.Generator

    Returns
    -------
    EscobarWestInfo

    References
    ----------
    Escobar & West (1995), section 6, eqs. (13)-(14).
    """
    _check_rng(rng)
    alpha = float(alpha)
    if not (alpha > 0 and math.isfinite(alpha)):
        raise ValueError(f"alpha must be a finite positive number; got {alpha}")
    n, n_clusters = int(n), int(n_clusters)
    if n < 1 or not 1 <= n_clusters <= n:
        raise ValueError(f"need n >= 1 and 1 <= n_clusters <= n; got n={n}, n_clusters={n_clusters}")
    if not (prior_shape > 0 and prior_rate > 0):
        raise ValueError(
            f"Gamma prior shape and rate must be positive; got {prior_shape}, {prior_rate}"
        )
    eta = rng.beta(alpha + 1.0, n)
    rate = prior_rate - math.log(eta)
    odds = (prior_shape + n_clusters - 1.0) / (n * rate)
    larger = bool(rng.random() * (1.0 + odds) < odds)
    shape = prior_shape + n_clusters - (0.0 if larger else 1.0)
    new_alpha = rng.gamma(shape, 1.0 / rate)
    # Gamma draws can underflow to 0 for tiny shapes; keep the concentration positive.
    new_alpha = max(new_alpha, np.finfo(float).tiny)
    return EscobarWestInfo(float(new_alpha), float(eta), larger)


def _as_log_density(log_prior_density):
    """Accept a callable ``f(value) -> float`` or an object with ``logpdf`` (scipy frozen)."""
    if log_prior_density is None:
        return lambda value: 0.0
    if hasattr(log_prior_density, "logpdf"):
        return lambda value: float(log_prior_density.logpdf(value))
    if callable(log_prior_density):
        return log_prior_density
    raise TypeError(
        "log_prior_density must be a callable value -> log density, an object with a "
        f"logpdf method (e.g. a frozen scipy distribution) or None; got {type(log_prior_density)}"
    )


def slice_sample(value: float, log_density: Callable[[float], float], rng: np.random.Generator,
                 lower: float = -np.inf, upper: float = np.inf, width: float = 1.0,
                 max_steps_out: int = 64, max_shrinks: int = 200) -> SliceInfo:
    """One univariate slice-sampling update with stepping out and shrinkage.

    Parameters
    ----------
    value : float
        Current point, with ``log_density(value) > -inf`` and ``lower <= value < upper``.
    log_density : callable float -> float
        Log target density up to a constant; may return ``-inf`` (or raise ``ValueError``,
        treated as ``-inf``) outside the support.
    rng : numpy.random.Generator
    lower, upper : float
        Known bounds of the support; when both are finite the initial interval is the
        whole support and no stepping out is done.
    width : float
        Initial interval width for stepping out.
    max_steps_out : int
        Maximum number of stepping-out steps (``m`` of Neal 2003, Fig. 3).
    max_shrinks : int
        Safety cap on the shrinkage loop (``RuntimeError`` beyond it).

    Returns
    -------
    SliceInfo

    References
    ----------
    Neal (2003), Figs. 3 (stepping out) and 5 (shrinkage).
    """
    _check_rng(rng)

    n_evaluations = 0

    def evaluate(point):
        nonlocal n_evaluations
        n_evaluations += 1
        if not (lower <= point < upper):
            return -np.inf
        try:
            result = float(log_density(point))
        except (ValueError, ZeroDivisionError, OverflowError):
            return -np.inf
        return result if result == result else -np.inf

    current = evaluate(value)
    if current == -np.inf:
        raise ValueError(f"the current value {value} has zero density; cannot slice-sample")
    log_level = current + math.log(1.0 - rng.random())  # log y, y ~ U(0, f(x0))
    if math.isfinite(lower) and math.isfinite(upper):
        left, right = lower, upper
    else:
        if not width > 0:
            raise ValueError(f"width must be positive; got {width}")
        left = value - width * rng.random()
        right = left + width
        steps_left = int(math.floor(max_steps_out * rng.random()))
        steps_right = max_steps_out - 1 - steps_left
        while steps_left > 0 and left > lower and evaluate(left) > log_level:
            left -= width
            steps_left -= 1
        while steps_right > 0 and right < upper and evaluate(right) > log_level:
            right += width
            steps_right -= 1
        left, right = max(left, lower), min(right, upper)
    for _ in range(max_shrinks):
        proposal = left + rng.random() * (right - left)
        log_proposal = evaluate(proposal)
        if log_proposal > log_level:
            return SliceInfo(float(proposal), float(log_proposal), n_evaluations)
        if proposal < value:
            left = proposal
        else:
            right = proposal
    raise RuntimeError("slice sampler shrinkage did not terminate; check the log density")


def _lower_bounded_update(value, lower, log_target, rng, width):
    """Slice on ``u = log(value - lower)`` (Jacobian ``+u``); returns a natural-scale SliceInfo."""
    if not value > lower:
        raise ValueError(f"current value {value} must exceed the lower bound {lower}")

    def log_density_u(u):
        return log_target(lower + math.exp(u)) + u

    info = slice_sample(math.log(value - lower), log_density_u, rng, width=width)
    new_value = lower + math.exp(info.value)
    if not new_value > lower:  # exp underflow
        new_value = value
        return SliceInfo(float(value), float(log_target(value)), info.n_evaluations + 1)
    return SliceInfo(float(new_value), float(info.log_density - info.value), info.n_evaluations)


def eppf_slice_update(value: float, make_prior: Callable[[float], object], sizes,
                      log_prior_density, rng: np.random.Generator, lower: float = -np.inf,
                      upper: float = np.inf, width: float = 1.0) -> SliceInfo:
    """Slice update of one prior hyperparameter with conditional ∝ prior × EPPF.

    Parameters
    ----------
    value : float
        Current value of the parameter.
    make_prior : callable float -> GibbsTypePrior
        Numeric prior with the parameter set to the argument (others held fixed); a
        ``ValueError``/``TypeError`` from it means "outside the support".
    sizes : array of int, shape (K,)
        Block sizes of the current partition.
    log_prior_density : callable, object with ``logpdf``, or None
        Log prior density of the parameter (None: flat).
    rng : numpy.random.Generator
    lower, upper : float
        Support bounds.  Lower-bounded only: sampled on ``log(value - lower)``; both
        finite: sampled directly, starting from the whole support.
    width : float
        Stepping-out width (on the log scale for lower-bounded parameters).

    Returns
    -------
    SliceInfo
        ``log_density`` is the log conditional on the natural scale (up to a constant).
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    log_prior = _as_log_density(log_prior_density)

    def log_target(theta):
        try:
            prior = make_prior(theta)
        except (ValueError, TypeError):
            return -np.inf
        log_p = float(log_prior(theta))
        if log_p == -np.inf:
            return -np.inf
        return float(prior.log_eppf(sizes)) + log_p

    if math.isfinite(lower) and math.isfinite(upper):
        return slice_sample(value, log_target, rng, lower=lower, upper=upper)
    if math.isfinite(lower):
        return _lower_bounded_update(value, lower, log_target, rng, width)
    return slice_sample(value, log_target, rng, lower=lower, upper=upper, width=width)


def dirichlet_process_concentration_slice_update(alpha, sizes, log_prior_density, rng,
                                                 width: float = 1.0) -> SliceInfo:
    """Slice update of the DP concentration α > 0 (any prior density).

    See :func:`eppf_slice_update`; use :func:`escobar_west_update` for a Gamma prior.
    """
    from pymc_splitmerge.priors import DirichletProcessPrior

    return eppf_slice_update(alpha, lambda a: DirichletProcessPrior(alpha=a), sizes,
                             log_prior_density, rng, lower=0.0, width=width)


def pitman_yor_concentration_update(alpha, discount, sizes, log_prior_density, rng,
                                    width: float = 1.0) -> SliceInfo:
    """Slice update of the Pitman–Yor concentration α > -d given the discount d.

    Parameters
    ----------
    alpha, discount : float
        Current values (``0 <= discount < 1``, ``alpha > -discount``).
    sizes : array of int, shape (K,)
    log_prior_density : callable, object with ``logpdf``, or None
        Log prior density of α.
    rng : numpy.random.Generator
    width : float
        Stepping-out width on the ``log(α + d)`` scale.

    Returns
    -------
    SliceInfo
    """
    from pymc_splitmerge.priors import PitmanYorPrior

    discount = float(discount)
    return eppf_slice_update(alpha, lambda a: PitmanYorPrior(alpha=a, discount=discount), sizes,
                             log_prior_density, rng, lower=-discount, width=width)


def pitman_yor_discount_update(alpha, discount, sizes, log_prior_density, rng) -> SliceInfo:
    """Slice update of the Pitman–Yor discount d in ``[max(0, -α), 1)`` given α.

    Parameters
    ----------
    alpha, discount : float
        Current values.
    sizes : array of int, shape (K,)
    log_prior_density : callable, object with ``logpdf``, or None
        Log prior density of d.
    rng : numpy.random.Generator

    Returns
    -------
    SliceInfo
    """
    from pymc_splitmerge.priors import PitmanYorPrior

    alpha = float(alpha)
    lower = max(0.0, -alpha)
    # Strict constraint alpha > -d: nudge the open lower end for negative alpha.
    if alpha < 0:
        lower = np.nextafter(lower, np.inf)
    return eppf_slice_update(discount, lambda d: PitmanYorPrior(alpha=alpha, discount=d), sizes,
                             log_prior_density, rng, lower=lower, upper=1.0)


def finite_dirichlet_concentration_update(alpha, k, sizes, log_prior_density, rng,
                                          width: float = 1.0) -> SliceInfo:
    """Slice update of the finite-Dirichlet concentration α > 0 (``k`` components).

    Parameters
    ----------
    alpha : float
    k : int
        Number of components of the finite Dirichlet prior.
    sizes : array of int, shape (K,)
    log_prior_density : callable, object with ``logpdf``, or None
    rng : numpy.random.Generator
    width : float
        Stepping-out width on the ``log α`` scale.

    Returns
    -------
    SliceInfo
    """
    from pymc_splitmerge.priors import FiniteDirichletPrior

    k = int(k)
    return eppf_slice_update(alpha, lambda a: FiniteDirichletPrior(alpha=a, k=k), sizes,
                             log_prior_density, rng, lower=0.0, width=width)
