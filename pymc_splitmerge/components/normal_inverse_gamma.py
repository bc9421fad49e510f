r"""Univariate normal with unknown mean and variance, Normal-Inverse-Gamma prior.

Model::

    x_i | mu, s2 ~ N(mu, s2),   mu | s2 ~ N(mu0, s2 / kappa0),   s2 ~ InvGamma(alpha0, beta0)

(``beta0`` is the inverse-gamma *scale*, i.e. the rate of the gamma law of 1/s2).
With ``y_i = x_i - mu0``, ``S = sum y_i``, ``Q = sum y_i^2``::

    kappa_n = kappa0 + n,  alpha_n = alpha0 + n/2,  mu_n = mu0 + S / kappa_n,
    beta_n  = beta0 + (Q - S^2 / kappa_n) / 2.

Log marginal likelihood::

    lgamma(alpha_n) - lgamma(alpha0) + alpha0 log beta0 - alpha_n log beta_n
    + (log kappa0 - log kappa_n)/2 - n/2 log(2 pi)

Predictive: Student-t with ``2 alpha_n`` degrees of freedom, location ``mu_n`` and squared
scale ``beta_n (kappa_n + 1) / (alpha_n kappa_n)``.

Layouts
-------
Statistics row (``stat_dim = 7``): ``[n, sum (x_i - mu0), sum (x_i - mu0)^2, c_n, m_n, k_n,
e_n]`` (sums centred at ``mu0`` to limit cancellation; rows must be recomputed when ``mu0``
changes).  The last four entries cache the predictive in closed form,
``log p(x | .) = c_n - e_n log1p(k_n (x - m_n)^2)`` with ``m_n = mu0 + S / kappa_n``,
``k_n = kappa_n / (2 beta_n (kappa_n + 1))``, ``e_n = alpha_n + 1/2`` and
``c_n = lgamma(alpha_n + 1/2) - lgamma(alpha_n) - log(2 pi beta_n (kappa_n + 1) / kappa_n) / 2``;
``add_point``/``remove_point`` recompute them from the sums (O(1), no drift of their own),
so that a predictive costs one subtraction, three multiplications and a single ``log1p``.
Params: ``[mu0, kappa0, alpha0, beta0, alpha0 log beta0 - lgamma(alpha0)]``.

References
----------
Murphy (2007), "Conjugate Bayesian analysis of the Gaussian distribution", section 3.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from pymc_splitmerge.components.base import (
    ComponentFamily,
    NumbaLeaves,
    _check_fraction,
    _data_moments,
    _require_positive,
)
from pymc_splitmerge.core.jit import njit

__all__ = [
    "NormalInverseGamma",
    "normal_inverse_gamma_add_point",
    "normal_inverse_gamma_log_marginal",
    "normal_inverse_gamma_log_predictive",
    "normal_inverse_gamma_remove_point",
    "reference_log_marginal",
    "reference_log_predictive",
]

_LOG_2PI = math.log(2.0 * math.pi)


@njit(cache=True)
def _refresh_constant(params, stats):
    """Recompute the row's cached Student-t form ``[c_n, m_n, k_n, e_n]`` from the sums."""
    count = stats[0]
    kappa = params[1] + count
    alpha = params[2] + 0.5 * count
    beta = params[3] + 0.5 * (stats[2] - stats[1] * stats[1] / kappa)
    spread = beta * (kappa + 1.0) / kappa
    stats[3] = (
        math.lgamma(alpha + 0.5) - math.lgamma(alpha) - 0.5 * (_LOG_2PI + math.log(spread))
    )
    stats[4] = params[0] + stats[1] / kappa
    stats[5] = 0.5 / spread
    stats[6] = alpha + 0.5


@njit(cache=True)
def normal_inverse_gamma_add_point(params, stats, x):
    """Add one observation ``x`` (shape (1,)) to a statistics row, in place."""
    y = x[0] - params[0]
    stats[0] += 1.0
    stats[1] += y
    stats[2] += y * y
    _refresh_constant(params, stats)


@njit(cache=True)
def normal_inverse_gamma_remove_point(params, stats, x):
    """Remove one observation from a statistics row, in place (exact reset when emptied)."""
    if stats[0] <= 1.0:
        stats[0] = 0.0
        stats[1] = 0.0
        stats[2] = 0.0
    else:
        y = x[0] - params[0]
        stats[0] -= 1.0
        stats[1] -= y
        stats[2] -= y * y
    _refresh_constant(params, stats)


@njit(cache=True)
def normal_inverse_gamma_log_predictive(params, stats, x):
    """Log Student-t predictive of ``x`` (shape (1,)) from the row's cached form."""
    residual = x[0] - stats[4]
    return stats[3] - stats[6] * math.log1p(residual * residual * stats[5])


@njit(cache=True)
def normal_inverse_gamma_log_marginal(params, stats):
    """Log marginal likelihood of a statistics row; 0.0 for an empty row."""
    count = stats[0]
    if count == 0.0:
        return 0.0
    kappa0 = params[1]
    kappa = kappa0 + count
    alpha = params[2] + 0.5 * count
    beta = params[3] + 0.5 * (stats[2] - stats[1] * stats[1] / kappa)
    return (
        math.lgamma(alpha) - alpha * math.log(beta) + params[4]
        + 0.5 * (math.log(kappa0) - math.log(kappa)) - 0.5 * count * _LOG_2PI
    )


class NormalInverseGamma(ComponentFamily):
    """Univariate normal with unknown mean and variance (Normal-Inverse-Gamma prior).

    Parameters
    ----------
    mu0 : float
        Prior mean of the component means.
    kappa0 : float
        Prior pseudo-count of the mean, > 0.
    alpha0 : float
        Inverse-gamma shape of the variance, > 0.
    beta0 : float
        Inverse-gamma scale of the variance, > 0.

    Notes
    -----
    Data: shape (n,) or (n, 1).  Statistics row ``[n, sum (x-mu0), sum (x-mu0)^2]`` followed
    by the cached predictive form (module docstring).

    References
    ----------
    Murphy (2007), "Conjugate Bayesian analysis of the Gaussian distribution", section 3.
    """

    hyperparameter_names = ("mu0", "kappa0", "alpha0", "beta0")
    numba_leaves = NumbaLeaves(
        add_point=normal_inverse_gamma_add_point,
        remove_point=normal_inverse_gamma_remove_point,
        log_predictive=normal_inverse_gamma_log_predictive,
        log_marginal=normal_inverse_gamma_log_marginal,
    )

    def __init__(self, mu0=0.0, kappa0=1.0, alpha0=1.0, beta0=1.0):
        super().__init__(mu0=mu0, kappa0=kappa0, alpha0=alpha0, beta0=beta0)

    def log_marginal_graph(self, graph, hyperparameters, x2d):
        """Murphy (2007) eq. 95 per label slot in pytensor."""
        pt, counts = graph.pt, graph.counts
        mu0, kappa0, alpha0, beta0 = (pt.as_tensor_variable(hyperparameters[k]).astype("float64")
                                      for k in ("mu0", "kappa0", "alpha0", "beta0"))
        # sums of y = x - reference (graph.centred); with ybar the cluster mean of y,
        # q - s^2 / kappa_n of the sums centred at mu0 is
        # sum (y - ybar)^2 + kappa0 n / kappa_n (ybar - (mu0 - reference))^2
        y = graph.centred(x2d)[:, 0]
        s, q = graph.cluster_sums(y, y**2)
        mean = s / counts
        kappa_n = kappa0 + counts
        alpha_n = alpha0 + 0.5 * counts
        deviation = mean - (mu0 - graph.reference[0])
        beta_n = beta0 + 0.5 * ((q - s * mean) + kappa0 * counts / kappa_n * deviation**2)
        per_slot = (
            pt.gammaln(alpha_n) - pt.gammaln(alpha0)
            + alpha0 * pt.log(beta0) - alpha_n * pt.log(beta_n)
            + 0.5 * (pt.log(kappa0) - pt.log(kappa_n))
            - 0.5 * counts * _LOG_2PI
        )
        return per_slot, [pt.gt(kappa0, 0), pt.gt(alpha0, 0), pt.gt(beta0, 0)]

    @classmethod
    def from_data(cls, data, variance_fraction=0.1):
        """A prior scaled to the data: the clustering does not depend on its units or location.

        With ``m`` and ``s2`` the mean and variance of the data::

            mu0 = m,   kappa0 = variance_fraction,   alpha0 = 3 / 2,
            beta0 = variance_fraction * s2 / 2

        so that a cluster's variance has prior mean ``beta0 / (alpha0 - 1) =
        variance_fraction * s2`` (the heaviest-tailed choice of the form ``(D + 2) / 2`` with a
        finite mean) and a cluster's mean prior variance ``E[variance] / kappa0 = s2``.  The
        same choice as :meth:`NormalInverseWishart.from_data` for D = 1.

        Parameters
        ----------
        data : array_like of shape (n,) or (n, 1)
        variance_fraction : float, default 0.1
            Prior mean of a cluster's variance relative to the data's variance; compare values
            with the evidence (user guide, "Choosing hyperparameters").

        Returns
        -------
        NormalInverseGamma
        """
        name = f"{cls.__name__}.from_data"
        fraction = _check_fraction(name, variance_fraction)
        mean, covariance = _data_moments(name, data)
        if mean.shape[0] != 1:
            raise ValueError(f"{name}: the family is univariate; data must have shape (n,) "
                             f"or (n, 1), got {mean.shape[0]} columns")
        return cls(mu0=float(mean[0]), kappa0=fraction, alpha0=1.5,
                   beta0=0.5 * fraction * float(covariance[0, 0]))

    @classmethod
    def examples(cls, rng):
        return [("nig", cls(mu0=1.0, kappa0=0.4, alpha0=2.0, beta0=1.5),
                 rng.normal(3.0, 2.0, size=9))]

    def _check_data_domain(self, x2d):
        if x2d.shape[1] != 1:
            raise ValueError(f"{type(self).__name__} is univariate: data must have shape (n,) "
                             f"or (n, 1), got {x2d.shape}")

    def _parameter_shapes(self):
        return {"mean": (), "variance": ()}

    def _sample_parameters(self, rng, x2d):
        """``s2 ~ InvGamma(alpha_n, beta_n)``, ``mu | s2 ~ N(mu_n, s2 / kappa_n)``."""
        _, kappa, mean, alpha, beta = _posterior(self, x2d)
        variance = 1.0 / rng.gamma(alpha, 1.0 / beta)
        return {"mean": np.asarray(rng.normal(mean, np.sqrt(variance / kappa))),
                "variance": np.asarray(variance)}

    def _sample_observations(self, rng, parameters, size):
        return rng.normal(float(parameters["mean"]), np.sqrt(float(parameters["variance"])),
                          size=(size, 1))

    def _validate(self, values):
        name = type(self).__name__
        for key in self.hyperparameter_names:
            if isinstance(values[key], list) or values[key].ndim != 0:
                raise ValueError(f"{name}: hyperparameter {key!r} must be a scalar")
        for key in ("kappa0", "alpha0", "beta0"):
            _require_positive(name, key, values[key])
        return {key: float(value) for key, value in values.items()}

    def _data_dim_from_hyperparameters(self, canonical):
        return 1

    def _finalize(self, canonical, data_dim):
        if data_dim != 1:
            raise ValueError(
                f"{type(self).__name__} is univariate: data must have shape (n,) or (n, 1), "
                f"got {data_dim} columns"
            )
        return dict(canonical)

    def _pack_params(self, full):
        constant = full["alpha0"] * math.log(full["beta0"]) - math.lgamma(full["alpha0"])
        return np.array(
            [full["mu0"], full["kappa0"], full["alpha0"], full["beta0"], constant]
        )

    def _pack_empty_stats(self, full, params):
        # the numba refresh writes the prior predictive's cached form (same arithmetic as
        # a row emptied by remove_point)
        row = np.zeros(7)
        _refresh_constant(params, row)
        return row


def _posterior(family, x2d):
    full = family._full
    x = np.asarray(x2d, dtype=np.float64).reshape(-1)
    n = x.shape[0]
    kappa = full["kappa0"] + n
    mean = (full["kappa0"] * full["mu0"] + x.sum()) / kappa
    alpha = full["alpha0"] + 0.5 * n
    xbar = x.mean() if n else 0.0
    beta = (
        full["beta0"] + 0.5 * np.sum((x - xbar) ** 2)
        + full["kappa0"] * n * (xbar - full["mu0"]) ** 2 / (2.0 * kappa)
    )
    return n, kappa, mean, alpha, beta


def reference_log_marginal(family: NormalInverseGamma, x2d: np.ndarray) -> float:
    """Textbook closed form (Murphy 2007 eq. 95) from the raw observations."""
    full = family._full
    n, kappa, _, alpha, beta = _posterior(family, x2d)
    if n == 0:
        return 0.0
    return float(
        special.gammaln(alpha) - special.gammaln(full["alpha0"])
        + full["alpha0"] * np.log(full["beta0"]) - alpha * np.log(beta)
        + 0.5 * (np.log(full["kappa0"]) - np.log(kappa)) - 0.5 * n * np.log(2.0 * np.pi)
    )


def reference_log_predictive(family: NormalInverseGamma, x_row, x2d) -> float:
    """scipy Student-t predictive of ``x_row`` given the observations ``x2d``."""
    from scipy import stats  # on first use: scipy.stats costs ~0.5 CPU s to import
    _, kappa, mean, alpha, beta = _posterior(family, x2d)
    scale = np.sqrt(beta * (kappa + 1.0) / (alpha * kappa))
    return float(stats.t(df=2.0 * alpha, loc=mean, scale=scale).logpdf(np.reshape(x_row, -1)[0]))
