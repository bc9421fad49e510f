r"""Multivariate normal with unknown mean and covariance, Normal-Inverse-Wishart prior.

Model (PGSM paper App. E.1, eq. 28; ``r = kappa0``, ``u = mu0``, ``S = psi0``)::

    x_i | mu, Sigma ~ N_D(mu, Sigma)
    mu | Sigma      ~ N_D(mu0, Sigma / kappa0)
    Sigma           ~ InverseWishart(nu0, psi0)

Posterior after n points (eq. 29), updated one point at a time with eq. 30::

    kappa_n = kappa0 + n,   nu_n = nu0 + n,
    mu_n    = (kappa0 mu0 + sum x_i) / kappa_n,
    Psi_n   = psi0 + sum x_i x_i^T + kappa0 mu0 mu0^T - kappa_n mu_n mu_n^T
            = Psi_{n-1} + (kappa_{n-1} / kappa_n) (x_n - mu_{n-1})(x_n - mu_{n-1})^T.

Log marginal likelihood (eq. 31)::

    log p(x_1..n) = -nD/2 log(pi) + D/2 log(kappa0/kappa_n) + nu0/2 log|psi0|
                    - nu_n/2 log|Psi_n| + log Gamma_D(nu_n/2) - log Gamma_D(nu0/2)

Posterior predictive (eq. 32): multivariate Student-t with ``nu_n - D + 1`` degrees of
freedom, location ``mu_n`` and scale ``Psi_n (kappa_n + 1) / (kappa_n (nu_n - D + 1))``,
evaluated in O(D^2) from the Cholesky factor L of Psi_n::

    log p(x | .) = lgamma((nu_n+1)/2) - lgamma((nu_n-D+1)/2) - D/2 log(pi)
                   - D/2 log((kappa_n+1)/kappa_n) - sum_d log L_dd
                   - (nu_n+1)/2 log(1 + kappa_n/(kappa_n+1) |L^{-1}(x - mu_n)|^2)

Layouts
-------
Statistics row (``stat_dim = 2 + 2D + 2D^2``)::

    [n, sum_x (D), sum_xxT (D*D, row-major), mu_n (D), L (D*D, row-major lower Cholesky
     factor of Psi_n, upper triangle zero), c_n]

where the last entry caches the part of the predictive that depends on the cluster only,
``c_n = lgamma((nu_n+1)/2) - lgamma((nu_n-D+1)/2) - D/2 log(pi (kappa_n+1)/kappa_n)
- sum_d log L_dd``, refreshed by ``add_point``/``remove_point`` (O(D)), so that a predictive
costs one triangular solve and a single ``log1p``.

Params (``5 + 2D + 2D^2``)::

    [D, kappa0, nu0, log|psi0|, sum_d lgamma((nu0+1-d)/2), mu0 (D), psi0 (D*D),
     chol(psi0) (D*D), scratch (D)]

The last D entries of params are *scratch* written by ``add_point``, ``remove_point`` and
``log_predictive`` (the triangular solve and the rank-1 vector), so that those calls never
allocate.  Consequently one params array must not be used by two threads at once.

Adding a point is a rank-1 Cholesky update.  Removing one is a rank-1 downdate; exact
arithmetic guarantees ``Psi_{n-1} >= psi0`` (Loewner order), hence every Cholesky pivot of
``Psi_{n-1}`` is at least the matching pivot of ``psi0``.  When a downdated pivot falls
below half of that bound, or loses more than six digits to cancellation, the downdate is
abandoned and ``mu_n``, ``Psi_n`` are recomputed from the raw sums and re-factorised
(O(D^3), rare).

References
----------
Bouchard-Cote, Doucet & Roth (2017), "Particle Gibbs split-merge sampling for Bayesian
inference in mixture models", JMLR 18, Appendix E.1, eqs. 28-32.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from scipy import special, stats

from pymc_splitmerge.components._family_ids import FAMILY_NORMAL_INVERSE_WISHART
from pymc_splitmerge.components.base import (
    ComponentFamily,
    _require_positive,
    _require_scale_matrix,
)

__all__ = [
    "NormalInverseWishart",
    "niw_add_point",
    "niw_remove_point",
    "niw_log_predictive",
    "niw_log_marginal",
    "niw_cholesky_update",
    "niw_cholesky_downdate",
    "niw_recompute",
    "reference_log_marginal",
    "reference_log_predictive",
]

_HEADER = 5
_LOG_PI = math.log(math.pi)


# ------------------------------------------------------------------ numba leaves
@njit(cache=True)
def niw_cholesky_update(chol, vector, dim):
    """In-place rank-1 update ``L L^T + v v^T`` of a row-major lower factor; ``v`` destroyed."""
    for k in range(dim):
        diag = chol[k * dim + k]
        radius = math.sqrt(diag * diag + vector[k] * vector[k])
        cosine = radius / diag
        sine = vector[k] / diag
        chol[k * dim + k] = radius
        for i in range(k + 1, dim):
            value = (chol[i * dim + k] + sine * vector[i]) / cosine
            chol[i * dim + k] = value
            vector[i] = cosine * vector[i] - sine * value


@njit(cache=True)
def niw_cholesky_downdate(chol, vector, dim, chol0):
    """In-place rank-1 downdate ``L L^T - v v^T``; returns False if precision is lost.

    ``chol0`` is the factor of psi0, whose pivots bound those of the exact result from
    below.  On False the factor is left partially modified (the caller recomputes it).
    """
    for k in range(dim):
        diag = chol[k * dim + k]
        squared = diag * diag - vector[k] * vector[k]
        bound = chol0[k * dim + k] * chol0[k * dim + k]
        if squared < 0.5 * bound or squared < 1e-6 * diag * diag:
            return False
        radius = math.sqrt(squared)
        cosine = radius / diag
        sine = vector[k] / diag
        chol[k * dim + k] = radius
        for i in range(k + 1, dim):
            value = (chol[i * dim + k] - sine * vector[i]) / cosine
            chol[i * dim + k] = value
            vector[i] = cosine * vector[i] - sine * value
    return True


@njit(cache=True)
def _cholesky_in_place(matrix, dim):
    """Row-major in-place Cholesky (lower); upper triangle zeroed. False if not PD."""
    for j in range(dim):
        total = matrix[j * dim + j]
        for k in range(j):
            total -= matrix[j * dim + k] * matrix[j * dim + k]
        if not total > 0.0:
            return False
        diag = math.sqrt(total)
        matrix[j * dim + j] = diag
        for i in range(j + 1, dim):
            total = matrix[i * dim + j]
            for k in range(j):
                total -= matrix[i * dim + k] * matrix[j * dim + k]
            matrix[i * dim + j] = total / diag
    for i in range(dim):
        for j in range(i + 1, dim):
            matrix[i * dim + j] = 0.0
    return True


@njit(cache=True)
def niw_recompute(params, stats):
    """Recompute ``mu_n`` and the Cholesky factor of ``Psi_n`` from the raw sums (O(D^3))."""
    dim = int(params[0])
    kappa0 = params[1]
    mu0 = params[_HEADER:_HEADER + dim]
    psi0 = params[_HEADER + dim:_HEADER + dim + dim * dim]
    count = stats[0]
    kappa = kappa0 + count
    sum_x = stats[1:1 + dim]
    sum_xx = stats[1 + dim:1 + dim + dim * dim]
    mu = stats[1 + dim + dim * dim:1 + 2 * dim + dim * dim]
    chol = stats[1 + 2 * dim + dim * dim:1 + 2 * dim + 2 * dim * dim]
    for i in range(dim):
        mu[i] = (kappa0 * mu0[i] + sum_x[i]) / kappa
    for i in range(dim):
        for j in range(dim):
            chol[i * dim + j] = (
                psi0[i * dim + j] + sum_xx[i * dim + j] + kappa0 * mu0[i] * mu0[j]
                - kappa * mu[i] * mu[j]
            )
    if not _cholesky_in_place(chol, dim):
        raise ValueError(
            "NormalInverseWishart: the posterior scale matrix lost positive definiteness "
            "(data too badly scaled); standardise the data"
        )
    _niw_refresh_constant(params, stats)


@njit(cache=True)
def _niw_refresh_constant(params, stats):
    """Recompute the cached predictive constant ``c_n`` (last entry of the row).

    ``lgamma(a + D/2) - lgamma(a)`` with ``a = (nu_n - D + 1)/2`` is a sum of ``log(a + k)``
    for even D (one ``lgamma`` pair remains for odd D); the terms are grouped two dimensions
    per logarithm, ``log((a + k) r / (L_jj L_j'j'))`` with ``r = kappa_n / (kappa_n + 1)``,
    so that D = 2 costs a single ``log`` (the factors stay O(1/variance): no overflow).
    """
    dim = int(params[0])
    count = stats[0]
    kappa = params[1] + count
    nu = params[2] + count
    offset_chol = 1 + 2 * dim + dim * dim
    shrink = kappa / (kappa + 1.0)
    a = 0.5 * (nu - dim + 1.0)
    constant = -0.5 * dim * _LOG_PI
    if dim % 2 == 1:
        last = offset_chol + (dim - 1) * (dim + 1)
        constant += (math.lgamma(a + 0.5) - math.lgamma(a)
                     - math.log(stats[last] / math.sqrt(shrink)))
        a += 0.5
    for k in range(dim // 2):
        first = offset_chol + 2 * k * (dim + 1)
        second = first + dim + 1
        constant += math.log((a + k) * shrink / (stats[first] * stats[second]))
    stats[offset_chol + dim * dim] = constant


@njit(cache=True)
def _niw_add_point_general(params, stats, x, dim, kappa_new, scale):
    """Any-D body of ``niw_add_point`` (everything but the constant refresh).

    Kept out of ``niw_add_point`` so that the D = 2 path stays small enough to inline.
    """
    offset_xx = 1 + dim
    offset_mu = 1 + dim + dim * dim
    offset_chol = 1 + 2 * dim + dim * dim
    # niw_cholesky_update written on offsets: no array views (see niw_log_predictive)
    scratch = _HEADER + dim + 2 * dim * dim
    for i in range(dim):
        xi = x[i]
        difference = xi - stats[offset_mu + i]
        stats[offset_mu + i] += difference / kappa_new
        params[scratch + i] = scale * difference
        stats[1 + i] += xi
        for j in range(dim):
            stats[offset_xx + i * dim + j] += xi * x[j]
    stats[0] += 1.0
    for k in range(dim):
        position = offset_chol + k * dim + k
        diag = stats[position]
        vector_k = params[scratch + k]
        radius = math.sqrt(diag * diag + vector_k * vector_k)
        cosine = radius / diag
        sine = vector_k / diag
        stats[position] = radius
        for i in range(k + 1, dim):
            position = offset_chol + i * dim + k
            value = (stats[position] + sine * params[scratch + i]) / cosine
            stats[position] = value
            params[scratch + i] = cosine * params[scratch + i] - sine * value


@njit(cache=True)
def niw_add_point(params, stats, x):
    """Add one row ``x`` (shape (D,)) to a statistics row, in place (O(D^2)).

    The rank-1 Cholesky update is ``niw_cholesky_update`` written on offsets (D = 2 in
    registers, same arithmetic).
    """
    dim = int(params[0])
    kappa_old = params[1] + stats[0]
    kappa_new = kappa_old + 1.0
    offset_xx = 1 + dim
    offset_mu = 1 + dim + dim * dim
    offset_chol = 1 + 2 * dim + dim * dim
    scale = math.sqrt(kappa_old / kappa_new)
    if dim == 2:
        first = x[0]
        second = x[1]
        difference_first = first - stats[offset_mu]
        difference_second = second - stats[offset_mu + 1]
        stats[offset_mu] += difference_first / kappa_new
        stats[offset_mu + 1] += difference_second / kappa_new
        vector_first = scale * difference_first
        vector_second = scale * difference_second
        stats[1] += first
        stats[2] += second
        cross = first * second
        stats[offset_xx] += first * first
        stats[offset_xx + 1] += cross
        stats[offset_xx + 2] += cross
        stats[offset_xx + 3] += second * second
        stats[0] += 1.0
        # niw_cholesky_update, k = 0 then k = 1
        diag = stats[offset_chol]
        radius = math.sqrt(diag * diag + vector_first * vector_first)
        cosine = radius / diag
        sine = vector_first / diag
        stats[offset_chol] = radius
        value = (stats[offset_chol + 2] + sine * vector_second) / cosine
        stats[offset_chol + 2] = value
        vector_second = cosine * vector_second - sine * value
        diag = stats[offset_chol + 3]
        stats[offset_chol + 3] = math.sqrt(diag * diag + vector_second * vector_second)
        # _niw_refresh_constant for D = 2 (same arithmetic)
        nu = params[2] + stats[0]
        stats[offset_chol + 4] = -_LOG_PI + math.log(
            0.5 * (nu - 1.0) * (kappa_new / (kappa_new + 1.0))
            / (stats[offset_chol] * stats[offset_chol + 3]))
    else:
        _niw_add_point_general(params, stats, x, dim, kappa_new, scale)
        _niw_refresh_constant(params, stats)


@njit(cache=True)
def _niw_reset(params, stats):
    dim = int(params[0])
    stats[0] = 0.0
    for i in range(dim + dim * dim):
        stats[1 + i] = 0.0
    offset_mu = 1 + dim + dim * dim
    for i in range(dim):
        stats[offset_mu + i] = params[_HEADER + i]
    chol0 = _HEADER + dim + dim * dim
    for i in range(dim * dim):
        stats[offset_mu + dim + i] = params[chol0 + i]
    _niw_refresh_constant(params, stats)


@njit(cache=True)
def niw_remove_point(params, stats, x):
    """Remove one row ``x`` from a statistics row, in place.

    Returns True when the rank-1 downdate was abandoned and the factor recomputed from the
    raw sums (the fallback), False otherwise.
    """
    dim = int(params[0])
    count = stats[0]
    if count <= 1.0:
        _niw_reset(params, stats)
        return False
    kappa_new = params[1] + count
    kappa_old = kappa_new - 1.0
    scratch = params[_HEADER + dim + 2 * dim * dim:_HEADER + 2 * dim + 2 * dim * dim]
    offset_xx = 1 + dim
    offset_mu = 1 + dim + dim * dim
    offset_chol = 1 + 2 * dim + dim * dim
    scale = math.sqrt(kappa_new / kappa_old)
    for i in range(dim):
        xi = x[i]
        difference = xi - stats[offset_mu + i]
        stats[offset_mu + i] -= difference / kappa_old
        scratch[i] = scale * difference
        stats[1 + i] -= xi
        for j in range(dim):
            stats[offset_xx + i * dim + j] -= xi * x[j]
    stats[0] = count - 1.0
    chol0 = params[_HEADER + dim + dim * dim:_HEADER + dim + 2 * dim * dim]
    if niw_cholesky_downdate(stats[offset_chol:offset_chol + dim * dim], scratch, dim, chol0):
        _niw_refresh_constant(params, stats)
        return False
    niw_recompute(params, stats)
    return True


@njit(cache=True)
def _niw_quadratic_general(params, stats, x, dim, offset_mu, offset_chol):
    """``|L^{-1}(x - mu_n)|^2`` for any D (triangular solve in the scratch tail of params).

    Kept out of ``niw_log_predictive`` so that the small D = 1, 2 paths stay small enough
    for LLVM to inline the predictive into its callers.
    """
    # no array views here: a view costs two atomic reference-count updates per call
    scratch = _HEADER + dim + 2 * dim * dim
    quadratic = 0.0
    for i in range(dim):
        total = x[i] - stats[offset_mu + i]
        row = offset_chol + i * dim
        for j in range(i):
            total -= stats[row + j] * params[scratch + j]
        value = total / stats[row + i]
        params[scratch + i] = value
        quadratic += value * value
    return quadratic


@njit(cache=True)
def niw_log_predictive(params, stats, x):
    """Log multivariate Student-t predictive of ``x`` given a statistics row (O(D^2)).

    D = 1 and D = 2 solve the triangular system in registers; larger D use the scratch tail
    of ``params``.  The arithmetic is the same in every branch.
    """
    dim = int(params[0])
    count = stats[0]
    kappa = params[1] + count
    nu = params[2] + count
    offset_mu = 1 + dim + dim * dim
    offset_chol = offset_mu + dim
    if dim == 2:
        first = (x[0] - stats[offset_mu]) / stats[offset_chol]
        second = (x[1] - stats[offset_mu + 1] - stats[offset_chol + 2] * first) / stats[
            offset_chol + 3]
        quadratic = first * first + second * second
    elif dim == 1:
        first = (x[0] - stats[offset_mu]) / stats[offset_chol]
        quadratic = first * first
    else:
        quadratic = _niw_quadratic_general(params, stats, x, dim, offset_mu, offset_chol)
    return stats[offset_chol + dim * dim] - 0.5 * (nu + 1.0) * math.log1p(
        quadratic * kappa / (kappa + 1.0)
    )


@njit(cache=True)
def niw_log_marginal(params, stats):
    """Log marginal likelihood (eq. 31) of a statistics row; 0.0 for an empty row."""
    count = stats[0]
    if count == 0.0:
        return 0.0
    dim = int(params[0])
    kappa0 = params[1]
    nu0 = params[2]
    kappa = kappa0 + count
    nu = nu0 + count
    offset_chol = 1 + 2 * dim + dim * dim
    log_det_half = 0.0
    sum_lgamma = 0.0
    for d in range(dim):
        log_det_half += math.log(stats[offset_chol + d * dim + d])
        sum_lgamma += math.lgamma(0.5 * (nu - d))
    return (
        -0.5 * count * dim * _LOG_PI + 0.5 * dim * (math.log(kappa0) - math.log(kappa))
        + 0.5 * nu0 * params[3] - nu * log_det_half + sum_lgamma - params[4]
    )


# ------------------------------------------------------------------ Python class
class NormalInverseWishart(ComponentFamily):
    """Multivariate normal with unknown mean and covariance (Normal-Inverse-Wishart prior).

    Parameters
    ----------
    mu0 : float or array_like of shape (D,)
        Prior mean of the component means (a scalar broadcasts).
    kappa0 : float
        Prior pseudo-count of the mean, > 0.
    nu0 : float
        Inverse-Wishart degrees of freedom, > D - 1.
    psi0 : float or array_like of shape (D, D)
        Inverse-Wishart scale matrix, symmetric positive definite (a scalar ``s`` means
        ``s * I``).

    Notes
    -----
    The data dimension D is taken from ``psi0`` or ``mu0`` when they are arrays, otherwise
    from the data (see :class:`ComponentFamily`).  Univariate data of shape (n,) are
    accepted when D = 1.  Layouts of the statistics row and params: module docstring.

    References
    ----------
    Bouchard-Cote, Doucet & Roth (2017), JMLR 18, App. E.1, eqs. 28-32.
    """

    hyperparameter_names = ("mu0", "kappa0", "nu0", "psi0")
    family_id = FAMILY_NORMAL_INVERSE_WISHART

    def __init__(self, mu0=0.0, kappa0=1.0, nu0=3.0, psi0=1.0):
        super().__init__(mu0=mu0, kappa0=kappa0, nu0=nu0, psi0=psi0)

    def _parameter_shapes(self):
        dim = self._data_dim
        return {"mean": (dim,), "covariance": (dim, dim)}

    def _sample_parameters(self, rng, x2d):
        """``Sigma ~ InvWishart(nu_n, Psi_n)``, ``mu | Sigma ~ N(mu_n, Sigma / kappa_n)`` (eq. 29)."""
        _, kappa, nu, mu, psi = _posterior(self, x2d)
        covariance = np.atleast_2d(stats.invwishart(df=nu, scale=psi).rvs(random_state=rng))
        mean = rng.multivariate_normal(mu, covariance / kappa)
        return {"mean": mean, "covariance": covariance}

    def _sample_observations(self, rng, parameters, size):
        return rng.multivariate_normal(parameters["mean"], parameters["covariance"], size=size)

    def _validate(self, values):
        name = type(self).__name__
        for key in ("kappa0", "nu0"):
            if isinstance(values[key], list) or values[key].ndim != 0:
                raise ValueError(f"{name}: hyperparameter {key!r} must be a scalar")
        _require_positive(name, "kappa0", values["kappa0"])
        mu0 = values["mu0"]
        if isinstance(mu0, list) or mu0.ndim > 1:
            raise ValueError(f"{name}: hyperparameter 'mu0' must be a scalar or a 1-D array")
        psi0 = _require_scale_matrix(name, "psi0", values["psi0"])
        if mu0.ndim == 1 and psi0.ndim == 2 and mu0.shape[0] != psi0.shape[0]:
            raise ValueError(
                f"{name}: 'mu0' has length {mu0.shape[0]} but 'psi0' is {psi0.shape}"
            )
        return dict(values)

    def _data_dim_from_hyperparameters(self, canonical):
        if canonical["psi0"].ndim == 2:
            return canonical["psi0"].shape[0]
        if canonical["mu0"].ndim == 1:
            return canonical["mu0"].shape[0]
        return None

    def _finalize(self, canonical, data_dim):
        name = type(self).__name__
        mu0 = canonical["mu0"]
        if mu0.ndim == 0:
            mu0 = np.full(data_dim, float(mu0))
        elif mu0.shape[0] != data_dim:
            raise ValueError(f"{name}: 'mu0' has length {mu0.shape[0]}, data have {data_dim}")
        psi0 = canonical["psi0"]
        if psi0.ndim == 0:
            psi0 = float(psi0) * np.eye(data_dim)
        elif psi0.shape[0] != data_dim:
            raise ValueError(f"{name}: 'psi0' is {psi0.shape}, data have dimension {data_dim}")
        nu0 = float(canonical["nu0"])
        if not nu0 > data_dim - 1:
            raise ValueError(
                f"{name}: hyperparameter 'nu0' must be > D - 1 = {data_dim - 1}, got {nu0}"
            )
        psi0 = 0.5 * (psi0 + psi0.T)
        return {
            "mu0": mu0.astype(np.float64),
            "kappa0": float(canonical["kappa0"]),
            "nu0": nu0,
            "psi0": psi0,
            "chol0": np.linalg.cholesky(psi0),
        }

    def _pack_params(self, full):
        dim = full["mu0"].shape[0]
        log_det = 2.0 * np.sum(np.log(np.diag(full["chol0"])))
        sum_lgamma0 = float(np.sum(special.gammaln(0.5 * (full["nu0"] - np.arange(dim)))))
        return np.concatenate(
            [
                [dim, full["kappa0"], full["nu0"], log_det, sum_lgamma0],
                full["mu0"],
                full["psi0"].ravel(),
                full["chol0"].ravel(),
                np.zeros(dim),
            ]
        )

    def _pack_empty_stats(self, full):
        dim = full["mu0"].shape[0]
        nu0, kappa0 = full["nu0"], full["kappa0"]
        constant = (
            special.gammaln(0.5 * (nu0 + 1.0)) - special.gammaln(0.5 * (nu0 - dim + 1.0))
            - 0.5 * dim * (np.log(np.pi) + np.log((kappa0 + 1.0) / kappa0))
            - np.sum(np.log(np.diag(full["chol0"])))
        )
        return np.concatenate(
            [[0.0], np.zeros(dim + dim * dim), full["mu0"], full["chol0"].ravel(), [constant]]
        )


# ------------------------------------------------------------------ references
def _posterior(family, x2d):
    full = family._full
    x2d = np.asarray(x2d, dtype=np.float64).reshape(-1, full["mu0"].shape[0])
    n = x2d.shape[0]
    kappa = full["kappa0"] + n
    nu = full["nu0"] + n
    mu = (full["kappa0"] * full["mu0"] + x2d.sum(axis=0)) / kappa
    # centred form of eq. 29 (no cancellation between the raw sums)
    xbar = x2d.mean(axis=0) if n else full["mu0"]
    centred = x2d - xbar
    shift = xbar - full["mu0"]
    psi = full["psi0"] + centred.T @ centred + full["kappa0"] * n / kappa * np.outer(shift, shift)
    return n, kappa, nu, mu, psi


def reference_log_marginal(family: NormalInverseWishart, x2d: np.ndarray) -> float:
    """Plain numpy eq. 31 from the raw rows (shape (n, D)); the numba core is tested on it."""
    full = family._full
    dim = full["mu0"].shape[0]
    n, kappa, nu, _, psi = _posterior(family, x2d)
    if n == 0:
        return 0.0
    return float(
        -0.5 * n * dim * np.log(np.pi)
        + 0.5 * dim * (np.log(full["kappa0"]) - np.log(kappa))
        + 0.5 * full["nu0"] * np.linalg.slogdet(full["psi0"])[1]
        - 0.5 * nu * np.linalg.slogdet(psi)[1]
        + special.multigammaln(0.5 * nu, dim) - special.multigammaln(0.5 * full["nu0"], dim)
    )


def reference_log_predictive(
    family: NormalInverseWishart, x_row: np.ndarray, x2d: np.ndarray
) -> float:
    """scipy multivariate Student-t predictive of ``x_row`` given rows ``x2d`` (shape (n, D))."""
    dim = family._full["mu0"].shape[0]
    _, kappa, nu, mu, psi = _posterior(family, x2d)
    df = nu - dim + 1.0
    shape = psi * (kappa + 1.0) / (kappa * df)
    return float(stats.multivariate_t(loc=mu, shape=shape, df=df).logpdf(np.reshape(x_row, dim)))
