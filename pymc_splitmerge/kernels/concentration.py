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

from pymc_splitmerge.core.jit import njit
from pymc_splitmerge.priors import DirichletProcessPrior, FiniteDirichletPrior, PitmanYorPrior
from pymc_splitmerge.priors.dirichlet_process import dirichlet_process_log_eppf_numba
from pymc_splitmerge.priors.finite_dirichlet import finite_dirichlet_log_eppf_numba
from pymc_splitmerge.priors.pitman_yor import pitman_yor_log_eppf_numba

__all__ = [
    "EscobarWestInfo",
    "SliceInfo",
    "build_parameter_slice",
    "dirichlet_process_concentration_slice_update",
    "eppf_slice_update",
    "escobar_west_update",
    "finite_dirichlet_concentration_update",
    "log_prior_density",
    "pitman_yor_concentration_update",
    "pitman_yor_discount_update",
    "prior_parameter_update",
    "slice_sample",
    "slice_sample_reference",
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
                 max_steps_out: int = 64, max_shrinks: int = 200,
                 log_value: float | None = None) -> SliceInfo:
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
    log_value : float, optional
        ``log_density(value)`` when the caller has it (not evaluated again).

    Returns
    -------
    SliceInfo

    References
    ----------
    Neal (2003), Figs. 3 (stepping out) and 5 (shrinkage).
    """
    _check_rng(rng)
    return slice_sample_reference(value, log_density, rng.random, lower=lower, upper=upper,
                                  width=width, max_steps_out=max_steps_out,
                                  max_shrinks=max_shrinks, log_value=log_value)


def slice_sample_reference(value: float, log_density: Callable[[float], float],
                           uniform: Callable[[], float], lower: float = -np.inf,
                           upper: float = np.inf, width: float = 1.0, max_steps_out: int = 64,
                           max_shrinks: int = 200, log_value: float | None = None
                           ) -> SliceInfo:
    """Plain-Python slice sampler of :func:`slice_sample` with an explicit uniform source.

    The numba kernel :func:`prior_parameter_slice_update` is tested against it: given the
    same uniforms (drawn in the order: slice level, interval placement and step split when
    stepping out, then one per shrinkage proposal) both return the same draw.

    Parameters
    ----------
    uniform : callable () -> float
        Source of U(0, 1) draws (e.g. ``rng.random``).

    See :func:`slice_sample` for the other parameters.
    """
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
        return -np.inf if math.isnan(result) else result

    current = evaluate(value) if log_value is None else float(log_value)
    if current == -np.inf:
        raise ValueError(f"the current value {value} has zero density; cannot slice-sample")
    log_level = current + math.log(1.0 - uniform())  # log y, y ~ U(0, f(x0))
    if math.isfinite(lower) and math.isfinite(upper):
        left, right = lower, upper
    else:
        if not width > 0:
            raise ValueError(f"width must be positive; got {width}")
        left = value - width * uniform()
        right = left + width
        steps_left = math.floor(max_steps_out * uniform())
        steps_right = max_steps_out - 1 - steps_left
        while steps_left > 0 and left > lower and evaluate(left) > log_level:
            left -= width
            steps_left -= 1
        while steps_right > 0 and right < upper and evaluate(right) > log_level:
            right += width
            steps_right -= 1
        left, right = max(left, lower), min(right, upper)
    for _ in range(max_shrinks):
        proposal = left + uniform() * (right - left)
        log_proposal = evaluate(proposal)
        if log_proposal > log_level:
            return SliceInfo(float(proposal), float(log_proposal), n_evaluations)
        if proposal < value:
            left = proposal
        else:
            right = proposal
    raise RuntimeError("slice sampler shrinkage did not terminate; check the log density")


def _lower_bounded_update(value, lower, log_target, uniform, width):
    """Slice on ``u = log(value - lower)`` (Jacobian ``+u``); returns a natural-scale SliceInfo."""
    if not value > lower:
        raise ValueError(f"current value {value} must exceed the lower bound {lower}")

    def log_density_u(u):
        return log_target(lower + math.exp(u)) + u

    info = slice_sample_reference(math.log(value - lower), log_density_u, uniform, width=width)
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
    rng : numpy.random.Generator or callable () -> float
        Generator, or a source of uniforms (the plain reference of the numba kernel).
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

    uniform = rng.random if isinstance(rng, np.random.Generator) else rng
    if not callable(uniform):
        raise TypeError("rng must be a numpy.random.Generator (or a uniform source); got "
                        f"{type(rng).__name__}")
    if math.isfinite(lower) and math.isfinite(upper):
        return slice_sample_reference(value, log_target, uniform, lower=lower, upper=upper)
    if math.isfinite(lower):
        return _lower_bounded_update(value, lower, log_target, uniform, width)
    return slice_sample_reference(value, log_target, uniform, lower=lower, upper=upper,
                                  width=width)


def prior_parameter_update(prior, name: str, sizes, log_prior_density, rng,
                           width: float = 1.0) -> SliceInfo:
    """Plain slice update of hyperparameter ``name`` of a numeric prior given the partition.

    The support comes from the prior class (``parameter_bounds``); the conditional is
    ∝ own prior × EPPF (:func:`eppf_slice_update`).  Reference of the numba kernel built by
    :func:`build_parameter_slice`.

    Parameters
    ----------
    prior : GibbsTypePrior
        Current prior (``DirichletProcessPrior``, ``PitmanYorPrior``, ``FiniteDirichletPrior``).
    name : str
        ``"alpha"`` or ``"discount"``.
    sizes : array of int
        Block sizes of the partition (zeros are ignored).
    log_prior_density : callable, object with ``logpdf``, or None
    rng : numpy.random.Generator or callable () -> float
    width : float
        Stepping-out width (on the ``log(value - lower)`` scale for lower-bounded parameters).

    Returns
    -------
    SliceInfo
    """
    prior_class = type(prior)
    values = {key: getattr(prior, key) for key in prior_class.parameter_names}
    if name not in values:
        raise ValueError(f"{prior_class.__name__} has no parameter {name!r}; "
                         f"it has {prior_class.parameter_names}")
    lower, upper = prior_class.parameter_bounds(name, values)

    def make_prior(theta):
        return prior_class(**dict(values, **{name: theta}))

    return eppf_slice_update(float(values[name]), make_prior, sizes, log_prior_density, rng,
                             lower=lower, upper=upper, width=width)


def dirichlet_process_concentration_slice_update(alpha, sizes, log_prior_density, rng,
                                                 width: float = 1.0) -> SliceInfo:
    """Slice update of the DP concentration α > 0 (any prior density).

    See :func:`prior_parameter_update`; use :func:`escobar_west_update` for a Gamma prior.
    """
    return prior_parameter_update(DirichletProcessPrior(alpha=alpha), "alpha", sizes,
                                  log_prior_density, rng, width=width)


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
    return prior_parameter_update(PitmanYorPrior(alpha=alpha, discount=discount), "alpha",
                                  sizes, log_prior_density, rng, width=width)


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
    return prior_parameter_update(PitmanYorPrior(alpha=alpha, discount=discount), "discount",
                                  sizes, log_prior_density, rng)


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
    return prior_parameter_update(FiniteDirichletPrior(alpha=alpha, k=k), "alpha", sizes,
                                  log_prior_density, rng, width=width)


# ----------------------------------------------------------------------------- numba kernel
# Log prior densities of the updated parameter, up to a constant (natural scale); ``params``
# holds the distribution's constants in the order given.
DENSITY_FLAT = 0          # ()
DENSITY_GAMMA = 1         # (shape, scale)
DENSITY_EXPONENTIAL = 2   # (scale,)
DENSITY_UNIFORM = 3       # (lower, upper)
DENSITY_BETA = 4          # (a, b)
DENSITY_HALF_NORMAL = 5   # (loc, scale)
DENSITY_LOG_NORMAL = 6    # (mu, sigma)
DENSITY_NAMES = ("flat", "gamma", "exponential", "uniform", "beta", "half_normal", "log_normal")

# priors whose hyperparameters the numba kernel updates (index = code of _log_eppf)
NUMBA_PRIORS = (DirichletProcessPrior, PitmanYorPrior, FiniteDirichletPrior)

_NEED_UNIFORMS = 1
_ZERO_DENSITY = 2
_NO_TERMINATION = 3
_UNIFORM_BLOCK = 16


@njit(cache=True)
def log_prior_density(code, params, x):
    """Log density (up to a constant) of the parameter's own prior at ``x`` (numba)."""
    if code == DENSITY_FLAT:
        return 0.0
    if code == DENSITY_GAMMA:
        if x <= 0.0:
            return -math.inf
        return (params[0] - 1.0) * math.log(x) - x / params[1]
    if code == DENSITY_EXPONENTIAL:
        if x < 0.0:
            return -math.inf
        return -x / params[0]
    if code == DENSITY_UNIFORM:
        if x < params[0] or x > params[1]:
            return -math.inf
        return 0.0
    if code == DENSITY_BETA:
        if x <= 0.0 or x >= 1.0:
            return -math.inf
        return (params[0] - 1.0) * math.log(x) + (params[1] - 1.0) * math.log1p(-x)
    if code == DENSITY_HALF_NORMAL:
        if x < params[0]:
            return -math.inf
        z = (x - params[0]) / params[1]
        return -0.5 * z * z
    if code == DENSITY_LOG_NORMAL:
        if x <= 0.0:
            return -math.inf
        z = (math.log(x) - params[0]) / params[1]
        return -math.log(x) - 0.5 * z * z
    return math.nan


@njit(cache=True)
def _log_eppf(prior_code, sizes, n, theta):
    if prior_code == 0:
        return dirichlet_process_log_eppf_numba(sizes, n, theta)
    if prior_code == 1:
        return pitman_yor_log_eppf_numba(sizes, n, theta)
    return finite_dirichlet_log_eppf_numba(sizes, n, theta)


@njit(cache=True)
def _log_target(prior_code, sizes, n, theta, index, density_code, density_params, lower,
                log_scale, point):
    """Log conditional at ``point`` (on the log(value - lower) scale with its Jacobian)."""
    x = point
    jacobian = 0.0
    if log_scale:
        x = lower + math.exp(point)
        if not x > lower:
            return -math.inf
        jacobian = point
    log_p = log_prior_density(density_code, density_params, x)
    if log_p == -math.inf:
        return -math.inf
    saved = theta[index]
    theta[index] = x
    result = _log_eppf(prior_code, sizes, n, theta) + log_p + jacobian
    theta[index] = saved
    if math.isnan(result):
        return -math.inf
    return result


@njit(cache=True)
def _slice_kernel(sizes, theta, config, density_params, uniforms, state):
    """Slice update (Neal 2003, Figs. 3 and 5) in numba over O(K) block sizes.

    ``config`` (float64, 6): [prior_code, index, density_code, width, max_steps_out,
    max_shrinks].  ``state`` (float64, 10): [stage, x0, log_level, left, right,
    n_evaluations, shrinks, result, lower, upper].  Stage 0 starts; the function returns
    ``_NEED_UNIFORMS`` (stage 1) when the uniforms run out during shrinkage and is called
    again with fresh ones.  (Few arguments: each costs dispatch time.)
    """
    prior_code, index, density_code = int(config[0]), int(config[1]), int(config[2])
    width, max_steps_out, max_shrinks = config[3], int(config[4]), config[5]
    lower, upper = state[8], state[9]
    n = 0
    for m in sizes:
        n += m
    log_scale = math.isfinite(lower) and not math.isfinite(upper)
    lo, hi = -math.inf, math.inf
    if not log_scale:
        lo, hi = lower, upper
    used = 0
    if state[0] == 0.0:
        x0 = theta[index]
        if log_scale:
            x0 = math.log(x0 - lower)
        state[5] = 1.0
        current = -math.inf
        if lo <= x0 < hi:
            current = _log_target(prior_code, sizes, n, theta, index, density_code,
                                  density_params, lower, log_scale, x0)
        if current == -math.inf:
            return _ZERO_DENSITY
        log_level = current + math.log(1.0 - uniforms[used])
        used += 1
        if math.isfinite(lo) and math.isfinite(hi):
            left, right = lo, hi
        else:
            left = x0 - width * uniforms[used]
            right = left + width
            steps_left = math.floor(max_steps_out * uniforms[used + 1])
            used += 2
            steps_right = max_steps_out - 1 - steps_left
            while steps_left > 0 and left > lo:
                state[5] += 1.0
                if not _log_target(prior_code, sizes, n, theta, index, density_code,
                                   density_params, lower, log_scale, left) > log_level:
                    break
                left -= width
                steps_left -= 1
            while steps_right > 0 and right < hi:
                state[5] += 1.0
                if not _log_target(prior_code, sizes, n, theta, index, density_code,
                                   density_params, lower, log_scale, right) > log_level:
                    break
                right += width
                steps_right -= 1
            left, right = max(left, lo), min(right, hi)
        state[0], state[1], state[2], state[3], state[4] = 1.0, x0, log_level, left, right
    x0, log_level, left, right = state[1], state[2], state[3], state[4]
    while used < uniforms.shape[0]:
        if state[6] >= max_shrinks:
            return _NO_TERMINATION
        state[6] += 1.0
        proposal = left + uniforms[used] * (right - left)
        used += 1
        state[5] += 1.0
        log_proposal = -math.inf
        if lo <= proposal < hi:
            log_proposal = _log_target(prior_code, sizes, n, theta, index, density_code,
                                       density_params, lower, log_scale, proposal)
        if log_proposal > log_level:
            value = proposal
            if log_scale:
                value = lower + math.exp(proposal)
                if not value > lower:  # exp underflow: keep the current value
                    value = theta[index]
            theta[index] = value
            state[0] = 2.0
            state[7] = log_proposal - (proposal if log_scale else 0.0)
            return 0
        if proposal < x0:
            left = proposal
        else:
            right = proposal
        state[3], state[4] = left, right
    return _NEED_UNIFORMS


def build_parameter_slice(prior_class, name: str, density_code: int = DENSITY_FLAT,
                          density_params=(), width: float = 1.0, max_steps_out: int = 64,
                          max_shrinks: int = 200):
    """Build the numba slice update of one hyperparameter (validated once).

    Parameters
    ----------
    prior_class : type
        ``DirichletProcessPrior``, ``PitmanYorPrior`` or ``FiniteDirichletPrior``.
    name : str
        The parameter (``"alpha"`` or ``"discount"``).
    density_code : int
        ``DENSITY_*`` code of the parameter's own prior; ``density_params`` its constants.
    width, max_steps_out, max_shrinks
        As in :func:`slice_sample`.

    Returns
    -------
    update : callable ``(theta, sizes, rng) -> SliceInfo``
        ``theta``: float64 array of the prior's parameters (``prior_class.parameter_names``),
        updated in place at the parameter's index; ``sizes``: int64 block sizes (zeros
        ignored); ``rng``: a Generator or a callable ``(count) -> uniforms``.  The support
        comes from ``prior_class.parameter_bounds``; uniforms are drawn from ``rng`` in
        blocks of 16, in the order of :func:`slice_sample_reference`.
    """
    if prior_class not in NUMBA_PRIORS:
        raise ValueError(f"no numba EPPF for {getattr(prior_class, '__name__', prior_class)}; "
                         f"supported: {[cls.__name__ for cls in NUMBA_PRIORS]}")
    if name not in prior_class.parameter_names or name in prior_class.static_parameter_names:
        raise ValueError(f"{prior_class.__name__} has no updatable parameter {name!r}")
    if density_code not in range(len(DENSITY_NAMES)):
        raise ValueError(f"unknown density_code {density_code}; use one of DENSITY_*")
    if not width > 0:
        raise ValueError(f"width must be positive; got {width}")
    index = prior_class.parameter_names.index(name)
    names = prior_class.parameter_names
    params = np.asarray(density_params, dtype=np.float64).reshape(-1)
    config = np.array([NUMBA_PRIORS.index(prior_class), index, density_code, float(width),
                       int(max_steps_out), int(max_shrinks)], dtype=np.float64)
    bounds = prior_class.parameter_bounds

    def update(theta, sizes, rng) -> SliceInfo:
        uniform_block = rng.random if isinstance(rng, np.random.Generator) else rng
        state = np.zeros(10)
        state[8], state[9] = bounds(name, dict(zip(names, theta)))
        while True:
            status = _slice_kernel(sizes, theta, config, params,
                                   uniform_block(_UNIFORM_BLOCK), state)
            if status != _NEED_UNIFORMS:
                break
        if status == _ZERO_DENSITY:
            raise ValueError(f"the current value {theta[index]} of {name} has zero density; "
                             "cannot slice-sample")
        if status == _NO_TERMINATION:
            raise RuntimeError("slice sampler shrinkage did not terminate; check the log density")
        return SliceInfo(float(theta[index]), float(state[7]), int(state[5]))

    return update
