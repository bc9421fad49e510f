r"""Multivariate normal with known covariance and a normal prior on the mean.

Model::

    x_i | mu ~ N_D(mu, sigma),      mu ~ N_D(mu0, sigma0)

Posterior after n points: ``Sigma_n = (sigma0^{-1} + n sigma^{-1})^{-1}``,
``mu_n = Sigma_n (sigma0^{-1} mu0 + sigma^{-1} sum x_i)``; predictive
``N(mu_n, Sigma_n + sigma)``.

Computation.  With ``sigma = C C^T`` (Cholesky) and the eigen-decomposition
``C^{-1} sigma0 C^{-T} = U diag(lambda) U^T``, the whitened coordinates
``z = T x`` with ``T = U^T C^{-1}`` satisfy ``z | theta ~ N(theta, I)``,
``theta ~ N(m, diag(lambda))`` with ``m = T mu0``: the problem splits into D independent
univariate normal-normal problems, and ``log p(x) = log p(z) - log|C|``.  Hence the
predictive costs O(D^2) (the product ``T x``) with no allocation, and no D x D solve
per call.  For coordinate d with n points and whitened sum ``s_d``::

    P_d = n + 1/lambda_d,  predictive z_d ~ N((m_d/lambda_d + s_d)/P_d, 1 + 1/P_d)
    log p(z_{1..n, d}) = -n/2 log(2 pi) - 1/2 log(1 + n lambda_d) - 1/2 sum_i z_id^2
                         - m_d^2/(2 lambda_d) + (m_d/lambda_d + s_d)^2 / (2 P_d)

Layouts
-------
Statistics row (``stat_dim = 3D + 3``)::

    [n, sum_y (D), sum_i y_i^T sigma^{-1} y_i, mean (D), 1 / variance (D), constant]

with ``y_i = x_i - mu0``: the sums are taken about the prior mean, so data far from zero
(with ``mu0`` near them) lose no digits to cancellation in ``sum y^T sigma^{-1} y`` and
add/remove sequences do not drift (the log marginal is invariant when the data and ``mu0``
move together; rows must be recomputed when ``mu0`` changes).  In these coordinates the
prior mean is ``m = 0``; the cached predictive mean is relative to ``T mu0``.

The third entry is needed for the log marginal likelihood (it is not used by the
predictive; it cancels in ratios of marginals over the same points).  The last 2D + 1
entries cache the predictive in whitened coordinates, refreshed by ``add_point`` /
``remove_point`` from ``sum_y`` (O(D^2), no drift of their own)::

    log p(x | .) = constant - sum_d ((T x)_d - mean_d)^2 / (2 variance_d)

so a predictive costs the product ``T x`` and D multiply-adds, with no division or log.

Params (``2 + D*D + 4D``)::

    [D, log|C|, T (D*D row-major), m / lambda (D), 1 / lambda (D), m^2 / lambda (D), mu0 (D)]

(``m = 0``, the prior mean in the centred coordinates; the m entries are kept so that the
formulas read in any coordinates.)
"""

from __future__ import annotations

import math

import numpy as np

from pymc_splitmerge.components.base import (
    ComponentFamily,
    NumbaLeaves,
    _check_fraction,
    _data_moments,
    _require_scale_matrix,
)
from pymc_splitmerge.core.jit import njit

__all__ = [
    "NormalKnownCovariance",
    "normal_known_covariance_add_point",
    "normal_known_covariance_log_marginal",
    "normal_known_covariance_log_predictive",
    "normal_known_covariance_remove_point",
    "reference_log_marginal",
    "reference_log_predictive",
]

_LOG_2PI = math.log(2.0 * math.pi)


@njit(cache=True)
def _whitened_square(params, x, dim):
    """``|T (x - mu0)|^2``."""
    centre = 2 + dim * dim + 3 * dim
    total = 0.0
    for d in range(dim):
        z = 0.0
        for j in range(dim):
            z += params[2 + d * dim + j] * (x[j] - params[centre + j])
        total += z * z
    return total


@njit(cache=True)
def _refresh_cache(params, stats):
    """Recompute the row's cached predictive ``[mean (D), 1/variance (D), constant]`` (O(D^2)).

    In whitened coordinates coordinate d has predictive mean ``(m_d/lambda_d + s_d) / P_d``
    and variance ``1 + 1/P_d`` with ``s = T sum_y``; the constant is
    ``-(D log(2 pi) + sum_d log variance_d)/2 - log|C|`` (one logarithm per ~150 orders of
    magnitude of the variances' product).
    """
    dim = int(params[0])
    count = stats[0]
    offset_mean = 2 + dim * dim
    offset_precision = offset_mean + dim
    offset_cache = 2 + dim
    log_variance = 0.0
    product = 1.0
    for d in range(dim):
        s = 0.0
        row = 2 + d * dim
        for j in range(dim):
            s += params[row + j] * stats[1 + j]
        precision = count + params[offset_precision + d]
        variance = 1.0 + 1.0 / precision
        stats[offset_cache + d] = (params[offset_mean + d] + s) / precision
        stats[offset_cache + dim + d] = 1.0 / variance
        product *= variance
        if product > 1e150:
            log_variance += math.log(product)
            product = 1.0
    log_variance += math.log(product)
    stats[offset_cache + 2 * dim] = -0.5 * (dim * _LOG_2PI + log_variance) - params[1]


@njit(cache=True)
def normal_known_covariance_add_point(params, stats, x):
    """Add one row ``x`` (shape (D,)) to a statistics row, in place (O(D^2))."""
    dim = int(params[0])
    centre = 2 + dim * dim + 3 * dim
    stats[0] += 1.0
    for j in range(dim):
        stats[1 + j] += x[j] - params[centre + j]
    stats[1 + dim] += _whitened_square(params, x, dim)
    _refresh_cache(params, stats)


@njit(cache=True)
def normal_known_covariance_remove_point(params, stats, x):
    """Remove one row ``x`` from a statistics row, in place (exact reset when emptied)."""
    dim = int(params[0])
    if stats[0] <= 1.0:
        for j in range(dim + 2):
            stats[j] = 0.0
    else:
        centre = 2 + dim * dim + 3 * dim
        stats[0] -= 1.0
        for j in range(dim):
            stats[1 + j] -= x[j] - params[centre + j]
        stats[1 + dim] -= _whitened_square(params, x, dim)
    _refresh_cache(params, stats)


@njit(cache=True)
def normal_known_covariance_log_predictive(params, stats, x):
    """Log normal predictive ``N(x | mu_n, Sigma_n + sigma)`` from the cached form.

    ``constant - sum_d ((T x)_d - mean_d)^2 / (2 variance_d)``: O(D^2) for ``T x``, no
    division, no logarithm.
    """
    dim = int(params[0])
    offset_cache = 2 + dim
    centre = 2 + dim * dim + 3 * dim
    quadratic = 0.0
    for d in range(dim):
        z = 0.0
        row = 2 + d * dim
        for j in range(dim):
            z += params[row + j] * (x[j] - params[centre + j])
        residual = z - stats[offset_cache + d]
        quadratic += residual * residual * stats[offset_cache + dim + d]
    return stats[offset_cache + 2 * dim] - 0.5 * quadratic


@njit(cache=True)
def normal_known_covariance_log_marginal(params, stats):
    """Log marginal likelihood of a statistics row; 0.0 for an empty row."""
    count = stats[0]
    if count == 0.0:
        return 0.0
    dim = int(params[0])
    offset_mean = 2 + dim * dim
    offset_precision = offset_mean + dim
    offset_square = offset_precision + dim
    total = -0.5 * count * dim * _LOG_2PI - count * params[1] - 0.5 * stats[1 + dim]
    for d in range(dim):
        s = 0.0
        for j in range(dim):
            s += params[2 + d * dim + j] * stats[1 + j]
        inverse_lambda = params[offset_precision + d]
        precision = count + inverse_lambda
        b = params[offset_mean + d] + s
        total += (
            -0.5 * math.log1p(count / inverse_lambda) - 0.5 * params[offset_square + d]
            + 0.5 * b * b / precision
        )
    return total


class NormalKnownCovariance(ComponentFamily):
    """Multivariate normal with known covariance ``sigma`` and a normal prior on the mean.

    Parameters
    ----------
    mu0 : float or array_like of shape (D,)
        Prior mean of the component means.
    sigma0 : float or array_like of shape (D, D)
        Prior covariance of the component means (scalar ``s`` means ``s * I``), SPD.
    sigma : float or array_like of shape (D, D)
        Known within-component covariance (scalar ``s`` means ``s * I``), SPD.

    Notes
    -----
    Statistics row ``[n, sum_y (D), sum_i y_i^T sigma^{-1} y_i]`` (``y = x - mu0``) followed by the cached
    predictive form; see the module docstring.
    """

    hyperparameter_names = ("mu0", "sigma0", "sigma")
    numba_leaves = NumbaLeaves(
        add_point=normal_known_covariance_add_point,
        remove_point=normal_known_covariance_remove_point,
        log_predictive=normal_known_covariance_log_predictive,
        log_marginal=normal_known_covariance_log_marginal,
    )

    def __init__(self, mu0=0.0, sigma0=1.0, sigma=1.0):
        super().__init__(mu0=mu0, sigma0=sigma0, sigma=sigma)

    def log_marginal_graph(self, graph, hyperparameters, x2d):
        """Gaussian integral per cluster in pytensor, in centred form.

        With ``xbar`` the cluster mean and ``S`` its scatter matrix about ``xbar``::

            log m = -n D/2 log(2 pi) - (n - 1)/2 log|Sigma| - D/2 log(n) - tr(Sigma^-1 S)/2
                    + log N(xbar; mu0, Sigma0 + Sigma / n) + D/2 log(2 pi)

        (the likelihood factorises into the scatter and ``N(xbar; mu, Sigma / n)``, whose
        integral against the prior of ``mu`` is the last normal density).  The sums are of
        ``x - reference`` (``graph.centred``), so data far from zero lose no precision.
        """
        pt, counts, dim = graph.pt, graph.counts, graph.dim
        mu0 = graph.vector(hyperparameters["mu0"])
        sigma0 = graph.matrix(hyperparameters["sigma0"])
        sigma = graph.matrix(hyperparameters["sigma"])
        sigma_inverse = pt.linalg.inv(sigma)
        log_det_sigma, _ = graph.log_det_cholesky(sigma)
        log_det_sigma0, _ = graph.log_det_cholesky(sigma0)
        y = graph.centred(x2d)
        sums, outer = graph.cluster_sums(y, y[:, :, None] * y[:, None, :])  # (K, D), (K, D, D)
        mean = sums / counts[:, None]
        scatter = outer - sums[:, :, None] * mean[:, None, :]
        deviation = mean - (mu0 - graph.reference)[None, :]
        covariance_n = sigma0[None] + sigma[None] / counts[:, None, None]
        log_det_n = graph.log_det_stack(covariance_n)
        solved = pt.sum(graph.inverse_stack(covariance_n) * deviation[:, None, :], axis=2)
        per_slot = (
            -0.5 * counts * dim * _LOG_2PI
            - 0.5 * (counts - 1.0) * log_det_sigma
            - 0.5 * dim * pt.log(counts)
            - 0.5 * pt.sum(scatter * sigma_inverse[None], axis=(1, 2))
            - 0.5 * log_det_n
            - 0.5 * pt.sum(deviation * solved, axis=1)
        )
        return per_slot, [graph.is_finite(log_det_sigma), graph.is_finite(log_det_sigma0)]

    @classmethod
    def from_data(cls, data, variance_fraction=0.1):
        """A prior scaled to the data: the clustering does not depend on the units or location
        of each column (as :meth:`NormalInverseWishart.from_data`).

        With ``m`` the mean of the data and ``V`` the diagonal matrix of their variances::

            mu0 = m,   sigma0 = V,   sigma = variance_fraction * V

        The known within-cluster covariance is a fraction of the data's variances, and the
        cluster means are spread like the data.  Give ``sigma`` yourself when it is known.

        Parameters
        ----------
        data : array_like of shape (n, D)
        variance_fraction : float, default 0.1
            Within-cluster variance along each column relative to the data's; compare values
            with the evidence (user guide, "Choosing hyperparameters").

        Returns
        -------
        NormalKnownCovariance
        """
        name = f"{cls.__name__}.from_data"
        fraction = _check_fraction(name, variance_fraction)
        mean, covariance = _data_moments(name, data)
        variances = np.diag(np.diag(covariance))
        return cls(mu0=mean, sigma0=variances, sigma=fraction * variances)

    @classmethod
    def examples(cls, rng):
        """D = 1 (scalars) and D = 3 (full covariance matrices)."""
        dim = 3

        def spd():
            a = rng.normal(size=(dim, dim))
            return a @ a.T + dim * np.eye(dim)

        return [("nkc-1d", cls(mu0=0.3, sigma0=2.0, sigma=0.5), rng.normal(1.0, 1.0, size=8)),
                ("nkc-3d", cls(mu0=rng.normal(size=dim), sigma0=spd(), sigma=spd()),
                 rng.normal(size=(8, dim)) * 2.0)]

    def _parameter_shapes(self):
        return {"mean": (self._data_dim,)}

    def _sample_parameters(self, rng, x2d):
        """``mu ~ N(mu_n, Sigma_n)`` (module docstring)."""
        mean, covariance = _posterior(self, x2d)
        return {"mean": rng.multivariate_normal(mean, covariance)}

    def _sample_observations(self, rng, parameters, size):
        return rng.multivariate_normal(parameters["mean"], self._full["sigma"], size=size)

    def _validate(self, values):
        name = type(self).__name__
        mu0 = values["mu0"]
        if isinstance(mu0, list) or mu0.ndim > 1:
            raise ValueError(f"{name}: hyperparameter 'mu0' must be a scalar or a 1-D array")
        sigma0 = _require_scale_matrix(name, "sigma0", values["sigma0"])
        sigma = _require_scale_matrix(name, "sigma", values["sigma"])
        dims = {}
        if mu0.ndim == 1:
            dims["mu0"] = mu0.shape[0]
        for key, value in (("sigma0", sigma0), ("sigma", sigma)):
            if value.ndim == 2:
                dims[key] = value.shape[0]
        if len(set(dims.values())) > 1:
            raise ValueError(f"{name}: mismatched dimensions of hyperparameters {dims}")
        return {"mu0": mu0, "sigma0": sigma0, "sigma": sigma}

    def _data_dim_from_hyperparameters(self, canonical):
        for key in ("sigma", "sigma0"):
            if canonical[key].ndim == 2:
                return canonical[key].shape[0]
        if canonical["mu0"].ndim == 1:
            return canonical["mu0"].shape[0]
        return None

    def _finalize(self, canonical, data_dim):
        name = type(self).__name__
        full = {}
        mu0 = canonical["mu0"]
        if mu0.ndim == 0:
            mu0 = np.full(data_dim, float(mu0))
        elif mu0.shape[0] != data_dim:
            raise ValueError(f"{name}: 'mu0' has length {mu0.shape[0]}, data have {data_dim}")
        full["mu0"] = mu0.astype(np.float64)
        for key in ("sigma0", "sigma"):
            value = canonical[key]
            if value.ndim == 0:
                value = float(value) * np.eye(data_dim)
            elif value.shape[0] != data_dim:
                raise ValueError(
                    f"{name}: {key!r} is {value.shape}, data have dimension {data_dim}"
                )
            full[key] = 0.5 * (value + value.T)
        chol = np.linalg.cholesky(full["sigma"])
        chol_inverse = np.linalg.solve(chol, np.eye(data_dim))
        whitened_prior = chol_inverse @ full["sigma0"] @ chol_inverse.T
        eigenvalues, eigenvectors = np.linalg.eigh(0.5 * (whitened_prior + whitened_prior.T))
        if not np.all(eigenvalues > 0):
            raise ValueError(f"{name}: hyperparameter 'sigma0' is numerically singular")
        full["transform"] = eigenvectors.T @ chol_inverse
        full["lambda"] = eigenvalues
        full["log_det_chol"] = float(np.sum(np.log(np.diag(chol))))
        return full

    def _pack_params(self, full):
        dim = full["mu0"].shape[0]
        # the statistics are sums of x - mu0, in which the prior mean is m = T (mu0 - mu0) = 0
        m = np.zeros(dim)
        lam = full["lambda"]
        return np.concatenate(
            [
                [dim, full["log_det_chol"]],
                full["transform"].ravel(),
                m / lam,
                1.0 / lam,
                m * m / lam,
                full["mu0"],
            ]
        )

    def _pack_empty_stats(self, full, params):
        # the numba refresh writes the prior predictive's cached form
        row = np.zeros(3 * full["mu0"].shape[0] + 3)
        _refresh_cache(params, row)
        return row


def _posterior(family, x2d):
    full = family._full
    dim = full["mu0"].shape[0]
    x2d = np.asarray(x2d, dtype=np.float64).reshape(-1, dim)
    sigma_inverse = np.linalg.inv(full["sigma"])
    sigma0_inverse = np.linalg.inv(full["sigma0"])
    covariance = np.linalg.inv(sigma0_inverse + x2d.shape[0] * sigma_inverse)
    mean = covariance @ (sigma0_inverse @ full["mu0"] + sigma_inverse @ x2d.sum(axis=0))
    return mean, covariance


def reference_log_marginal(family: NormalKnownCovariance, x2d: np.ndarray) -> float:
    """Joint Gaussian density of all rows (shape (n, D)): covariance I (x) sigma + J (x) sigma0."""
    from scipy import stats  # on first use: scipy.stats costs ~0.5 CPU s to import
    full = family._full
    dim = full["mu0"].shape[0]
    x2d = np.asarray(x2d, dtype=np.float64).reshape(-1, dim)
    n = x2d.shape[0]
    if n == 0:
        return 0.0
    covariance = np.kron(np.eye(n), full["sigma"]) + np.kron(np.ones((n, n)), full["sigma0"])
    return float(
        stats.multivariate_normal(mean=np.tile(full["mu0"], n), cov=covariance).logpdf(
            x2d.ravel()
        )
    )


def reference_log_predictive(
    family: NormalKnownCovariance, x_row: np.ndarray, x2d: np.ndarray
) -> float:
    """scipy normal predictive ``N(x_row | mu_n, Sigma_n + sigma)`` given rows ``x2d``."""
    from scipy import stats  # on first use: scipy.stats costs ~0.5 CPU s to import
    mean, covariance = _posterior(family, x2d)
    return float(
        stats.multivariate_normal(mean=mean, cov=covariance + family._full["sigma"]).logpdf(
            np.reshape(x_row, -1)
        )
    )
