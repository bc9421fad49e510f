r"""Clusterwise linear regression: Normal likelihood, Normal-inverse-Gamma prior.

Model for the points of one cluster (``x_i`` the covariates of point i, length P)::

    y_i | beta, s2 ~ N(x_i' beta, s2),   beta | s2 ~ N(beta0, s2 V0),   s2 ~ InvGamma(a0, b0)

(``b0`` is the inverse-gamma *scale*, i.e. the rate of the gamma law of 1/s2), with the
coefficients ``beta`` and the noise variance ``s2`` integrated out.  A prepared data row is
``[y, x_1, ..., x_P]``: the response first, then the covariates (include a column of ones for
an intercept).  With the residuals from the prior mean ``r_i = y_i - x_i' beta0``,
``Lambda0 = V0^{-1}`` and the sums ``X'X``, ``X'r``, ``r'r`` over the n points::

    Lambda_n = Lambda0 + X'X,   m_n = Lambda_n^{-1} X'r    (posterior mean beta0 + m_n)
    a_n = a0 + n/2,             b_n = b0 + (r'r - (X'r)' m_n) / 2.

Log marginal likelihood::

    lgamma(a_n) - lgamma(a0) + a0 log b0 - a_n log b_n
    + (log det Lambda0 - log det Lambda_n) / 2 - n/2 log(2 pi)

Predictive of a new point ``(y, x)``: Student-t with ``2 a_n`` degrees of freedom, location
``x' (beta0 + m_n)`` and squared scale ``b_n (1 + x' V_n x) / a_n``, ``V_n = Lambda_n^{-1}``.

Layouts
-------
Statistics row (``stat_dim = 2 P^2 + 2 P + 7``): ``[n, X'r (P), r'r, X'X (P*P, row-major)]``
followed by the cached predictive ``[m_n (P), V_n (P*P), c_n, 1 / (2 b_n), a_n + 1/2,
log det Lambda_n, b_n]`` with ``c_n = lgamma(a_n + 1/2) - lgamma(a_n) - log(2 pi b_n) / 2``,
so that::

    log p(y | x, .) = c_n - log1p(q) / 2 - (a_n + 1/2) log1p(e^2 / (2 b_n (1 + q)))

with ``q = x' V_n x`` and ``e = r - x' m_n``.  ``add_point``/``remove_point`` update the sums
and recompute the cache from them (a P x P Cholesky factorisation: O(P^3), no drift of its
own); a predictive costs O(P^2).  The sums are centred at the prior mean (residuals ``r``),
so rows must be recomputed when ``beta0`` changes.
Params (``P^2 + P + 5``): ``[P, beta0 (P), Lambda0 (P*P), a0, b0, a0 log b0 - lgamma(a0),
log det Lambda0]``.

References
----------
O'Hagan and Forster (2004), Kendall's Advanced Theory of Statistics 2B, section 11.
Murphy (2012), Machine Learning: a Probabilistic Perspective, section 7.6.3.
DeSarbo and Cron (1988), "A maximum likelihood methodology for clusterwise linear
regression", Journal of Classification 5, 249-282.
"""

from __future__ import annotations

import math

import numpy as np

from pymc_splitmerge.components.base import (
    ComponentFamily,
    NumbaLeaves,
    _check_fraction,
    _require_positive,
    _require_scale_matrix,
    _require_vector,
)
from pymc_splitmerge.core.jit import njit

__all__ = [
    "NormalLinearRegression",
    "normal_linear_regression_add_point",
    "normal_linear_regression_log_marginal",
    "normal_linear_regression_log_predictive",
    "normal_linear_regression_remove_point",
    "reference_log_marginal",
    "reference_log_predictive",
]

_LOG_2PI = math.log(2.0 * math.pi)


@njit(cache=True)
def _refresh(params, stats):
    """Recompute the cached predictive form of a row from its sums (module docstring)."""
    p = int(params[0])
    lambda0 = 1 + p
    shape0 = 1 + p + p * p
    xr = 1
    xx = 2 + p
    mean = xx + p * p
    cov = mean + p
    cache = cov + p * p
    # Cholesky factor of Lambda_n = Lambda0 + X'X
    chol = np.zeros((p, p))
    for i in range(p):
        for j in range(i + 1):
            total = params[lambda0 + i * p + j] + stats[xx + i * p + j]
            for k in range(j):
                total -= chol[i, k] * chol[j, k]
            if i == j:
                chol[i, i] = math.sqrt(total)
            else:
                chol[i, j] = total / chol[j, j]
    log_det = 0.0
    for i in range(p):
        log_det += 2.0 * math.log(chol[i, i])
    # inverse of the factor (lower triangular), then V_n = inv' inv
    inverse = np.zeros((p, p))
    for i in range(p):
        inverse[i, i] = 1.0 / chol[i, i]
        for j in range(i):
            total = 0.0
            for k in range(j, i):
                total -= chol[i, k] * inverse[k, j]
            inverse[i, j] = total / chol[i, i]
    for i in range(p):
        for j in range(p):
            total = 0.0
            for k in range(max(i, j), p):
                total += inverse[k, i] * inverse[k, j]
            stats[cov + i * p + j] = total
    quadratic = 0.0
    for i in range(p):
        total = 0.0
        for j in range(p):
            total += stats[cov + i * p + j] * stats[xr + j]
        stats[mean + i] = total
        quadratic += total * stats[xr + i]
    shape = params[shape0] + 0.5 * stats[0]
    scale = params[shape0 + 1] + 0.5 * (stats[1 + p] - quadratic)
    stats[cache] = math.lgamma(shape + 0.5) - math.lgamma(shape) - 0.5 * (
        _LOG_2PI + math.log(scale))
    stats[cache + 1] = 0.5 / scale
    stats[cache + 2] = shape + 0.5
    stats[cache + 3] = log_det
    stats[cache + 4] = scale


@njit(cache=True)
def _update(params, stats, x, sign):
    p = int(params[0])
    residual = x[0]
    for j in range(p):
        residual -= x[1 + j] * params[1 + j]
    stats[0] += sign
    for j in range(p):
        stats[1 + j] += sign * x[1 + j] * residual
    stats[1 + p] += sign * residual * residual
    xx = 2 + p
    for i in range(p):
        for j in range(p):
            stats[xx + i * p + j] += sign * x[1 + i] * x[1 + j]


@njit(cache=True)
def normal_linear_regression_add_point(params, stats, x):
    """Add one row ``x = [y, covariates]`` to a statistics row, in place."""
    _update(params, stats, x, 1.0)
    _refresh(params, stats)


@njit(cache=True)
def normal_linear_regression_remove_point(params, stats, x):
    """Remove one row from a statistics row, in place (exact reset when emptied)."""
    if stats[0] <= 1.0:
        p = int(params[0])
        for j in range(2 + p + p * p):
            stats[j] = 0.0
    else:
        _update(params, stats, x, -1.0)
    _refresh(params, stats)


@njit(cache=True)
def normal_linear_regression_log_predictive(params, stats, x):
    """Log Student-t predictive of ``x = [y, covariates]`` from the row's cached form."""
    p = int(params[0])
    mean = 2 + p + p * p
    cov = mean + p
    cache = cov + p * p
    error = x[0]
    quadratic = 0.0
    for i in range(p):
        xi = x[1 + i]
        error -= xi * (params[1 + i] + stats[mean + i])
        total = 0.0
        for j in range(p):
            total += stats[cov + i * p + j] * x[1 + j]
        quadratic += xi * total
    return (stats[cache] - 0.5 * math.log1p(quadratic)
            - stats[cache + 2] * math.log1p(error * error * stats[cache + 1]
                                             / (1.0 + quadratic)))


@njit(cache=True)
def normal_linear_regression_log_marginal(params, stats):
    """Log marginal likelihood of a statistics row; 0.0 for an empty row."""
    count = stats[0]
    if count == 0.0:
        return 0.0
    p = int(params[0])
    shape0 = 1 + p + p * p
    cache = 2 + 2 * p + 2 * p * p
    shape = params[shape0] + 0.5 * count
    return (math.lgamma(shape) - shape * math.log(stats[cache + 4]) + params[shape0 + 2]
            + 0.5 * (params[shape0 + 3] - stats[cache + 3]) - 0.5 * count * _LOG_2PI)


class NormalLinearRegression(ComponentFamily):
    """Clusterwise linear regression: per-cluster coefficients and noise variance integrated out.

    ``y_i = x_i' beta + noise``, ``noise ~ N(0, s2)`` within a cluster, with the conjugate
    Normal-inverse-Gamma prior ``beta | s2 ~ N(beta0, s2 V0)``, ``s2 ~ InvGamma(a0, b0)``.

    Parameters
    ----------
    beta0 : float or array of shape (P,)
        Prior mean of the coefficients (a scalar broadcasts to every coefficient).
    V0 : float or array of shape (P, P)
        Prior covariance of the coefficients *per unit noise variance* (``s2 V0`` is their
        covariance); a scalar means ``V0 * I``.  Symmetric positive definite.
    a0 : float
        Inverse-gamma shape of the noise variance, > 0.
    b0 : float
        Inverse-gamma scale of the noise variance, > 0 (the prior mean of ``s2`` is
        ``b0 / (a0 - 1)`` for ``a0 > 1``).

    Notes
    -----
    Data: shape (n, 1 + P), each row ``[y, x_1, ..., x_P]`` — the response in the first column,
    the covariates after it; add a column of ones for an intercept, e.g.
    ``observed=np.column_stack([y, np.ones(n), x])``.  Covariates are data, not modelled:
    forward simulation draws responses given the observed covariates
    (``pm.sample_posterior_predictive`` returns the covariate columns unchanged), and there is
    no prior predictive of a whole row.  Statistics row and cached predictive: module
    docstring.

    References
    ----------
    O'Hagan and Forster (2004), Kendall's Advanced Theory of Statistics 2B, section 11.
    Murphy (2012), Machine Learning: a Probabilistic Perspective, section 7.6.3.
    """

    hyperparameter_names = ("beta0", "V0", "a0", "b0")
    numba_leaves = NumbaLeaves(
        add_point=normal_linear_regression_add_point,
        remove_point=normal_linear_regression_remove_point,
        log_predictive=normal_linear_regression_log_predictive,
        log_marginal=normal_linear_regression_log_marginal,
    )

    def __init__(self, beta0=0.0, V0=1.0, a0=1.0, b0=1.0):
        super().__init__(beta0=beta0, V0=V0, a0=a0, b0=b0)

    # ------------------------------------------------------------------ validation
    def _validate(self, values):
        name = type(self).__name__
        beta0 = _require_vector(name, "beta0", values["beta0"])
        v0 = _require_scale_matrix(name, "V0", values["V0"])
        for key in ("a0", "b0"):
            if isinstance(values[key], list) or values[key].ndim != 0:
                raise ValueError(f"{name}: hyperparameter {key!r} must be a scalar")
            _require_positive(name, key, values[key])
        if beta0.ndim == 1 and v0.ndim == 2 and beta0.shape[0] != v0.shape[0]:
            raise ValueError(
                f"{name}: hyperparameter 'beta0' has {beta0.shape[0]} coefficients but 'V0' is "
                f"{v0.shape[0]} x {v0.shape[0]}; give both for the same covariates")
        return {"beta0": beta0, "V0": v0, "a0": float(values["a0"]),
                "b0": float(values["b0"])}

    def _data_dim_from_hyperparameters(self, canonical):
        if canonical["beta0"].ndim == 1:
            return 1 + canonical["beta0"].shape[0]
        if canonical["V0"].ndim == 2:
            return 1 + canonical["V0"].shape[0]
        return None

    def _finalize(self, canonical, data_dim):
        name = type(self).__name__
        p = data_dim - 1
        if p < 1:
            raise ValueError(
                f"{name}: data rows must be [y, x_1, ..., x_P] with at least one covariate "
                "column (a column of ones for an intercept), got one column")
        beta0, v0 = canonical["beta0"], canonical["V0"]
        beta0 = np.full(p, float(beta0)) if beta0.ndim == 0 else beta0.astype(np.float64)
        v0 = float(v0) * np.eye(p) if v0.ndim == 0 else v0.astype(np.float64)
        return {"beta0": beta0, "V0": v0, "a0": canonical["a0"], "b0": canonical["b0"]}

    def _check_data_domain(self, x2d):
        if x2d.shape[1] < 2:
            raise ValueError(
                f"{type(self).__name__}: data rows must be [y, x_1, ..., x_P] (the response, "
                "then at least one covariate; add a column of ones for an intercept), got "
                f"shape {x2d.shape}")

    # ------------------------------------------------------------------ packing
    def _pack_params(self, full):
        p = full["beta0"].shape[0]
        precision = np.linalg.inv(full["V0"])
        precision = 0.5 * (precision + precision.T)
        log_det = -np.linalg.slogdet(full["V0"])[1]
        constant = full["a0"] * math.log(full["b0"]) - math.lgamma(full["a0"])
        return np.concatenate([[float(p)], full["beta0"], precision.reshape(-1),
                               [full["a0"], full["b0"], constant, log_det]])

    def _pack_empty_stats(self, full, params):
        p = full["beta0"].shape[0]
        row = np.zeros(2 * p * p + 2 * p + 7)
        _refresh(params, row)
        return row

    # ------------------------------------------------------------------ pytensor
    def log_marginal_graph(self, graph, hyperparameters, x2d):
        """The module's log marginal per label slot in pytensor."""
        pt, counts = graph.pt, graph.counts
        sub = graph.restrict(graph.dim - 1)
        beta0 = sub.vector(hyperparameters["beta0"])
        v0 = sub.matrix(hyperparameters["V0"])
        a0, b0 = (pt.as_tensor_variable(hyperparameters[k]).astype("float64")
                  for k in ("a0", "b0"))
        covariates = x2d[:, 1:]
        residual = x2d[:, 0] - pt.dot(covariates, beta0)
        xr = graph.segment_sum(covariates * residual[:, None])  # (L, P)
        rr = graph.segment_sum(residual**2)
        xx = graph.segment_sum(covariates[:, :, None] * covariates[:, None, :])  # (L, P, P)
        log_det_v0, _ = graph.log_det_cholesky(v0)
        precision0 = pt.linalg.solve(v0, pt.eye(sub.dim))
        precision_n = 0.5 * (precision0 + precision0.T)[None] + xx
        log_det_n, _ = graph.log_det_cholesky(precision_n)
        mean = pt.linalg.solve(precision_n, xr[:, :, None])[:, :, 0]
        shape_n = a0 + 0.5 * counts
        scale_n = b0 + 0.5 * (rr - pt.sum(xr * mean, axis=1))
        per_slot = (
            pt.gammaln(shape_n) - pt.gammaln(a0) + a0 * pt.log(b0) - shape_n * pt.log(scale_n)
            - 0.5 * (log_det_v0 + log_det_n) - 0.5 * counts * _LOG_2PI
        )
        return per_slot, [pt.gt(a0, 0), pt.gt(b0, 0), graph.is_finite(log_det_v0),
                          pt.all(pt.eq(v0, v0.T))]

    # ------------------------------------------------------------------ samplers
    def _parameter_shapes(self):
        return {"coefficients": (self._data_dim - 1,), "variance": ()}

    def _sample_parameters(self, rng, x2d):
        """``s2 ~ InvGamma(a_n, b_n)``, ``beta | s2 ~ N(beta0 + m_n, s2 V_n)``."""
        mean, precision, shape, scale = _posterior(self, x2d)
        variance = 1.0 / rng.gamma(shape, 1.0 / scale)
        chol = np.linalg.cholesky(precision)
        # beta = mean + sqrt(s2) L^{-T} e has covariance s2 (L L')^{-1} = s2 V_n
        noise = np.linalg.solve(chol.T, rng.standard_normal(mean.shape[0]))
        return {"coefficients": mean + np.sqrt(variance) * noise,
                "variance": np.asarray(variance)}

    def sample_data(self, rng, labels, observed=None):
        """Responses given a partition and the observed covariates.

        Parameters
        ----------
        rng : numpy.random.Generator
        labels : array_like of int, shape (n,)
        observed : ndarray of shape (n, 1 + P)
            Prepared observed rows.  Each cluster's coefficients and variance are drawn from
            their posterior given its observed rows, then new responses given its covariates.

        Returns
        -------
        ndarray of float64, shape (n, 1 + P)
            New responses in the first column; the covariate columns of ``observed``.

        Raises
        ------
        NotImplementedError
            Without ``observed``: the family does not model the covariates, so there is no
            forward sampling of whole rows (no prior predictive).
        """
        if observed is None:
            raise NotImplementedError(
                "forward sampling of observations is not available for "
                f"{type(self).__name__} without observed covariates (the covariates are not "
                "modelled); pm.sample_posterior_predictive draws responses given them")
        self._require_ready()
        labels = np.asarray(labels)
        observed = self._as_rows(observed)
        out = observed.copy()
        for label in np.unique(labels):
            rows = np.flatnonzero(labels == label)
            parameters = self.sample_parameters(rng, observed[rows])
            covariates = observed[rows, 1:]
            out[rows, 0] = covariates @ parameters["coefficients"] + np.sqrt(
                float(parameters["variance"])) * rng.standard_normal(rows.shape[0])
        return out

    @classmethod
    def from_data(cls, data, variance_fraction=0.1):
        """A prior scaled to the data: the clustering does not depend on the units or location
        of the response, nor on an invertible linear recoding of the covariates.

        With ``b`` the least-squares coefficients of all the data, ``s2`` the mean squared
        residual of that fit and ``X`` the (n, P) covariates::

            beta0 = b,   V0 = n (X'X)^{-1} / variance_fraction,   a0 = 3 / 2,
            b0 = variance_fraction * s2 / 2

        A cluster's noise variance has prior mean ``b0 / (a0 - 1) = variance_fraction * s2``
        and its coefficients the prior covariance ``E[s2] V0 = s2 n (X'X)^{-1}``, Zellner's
        g-prior with ``g = n`` (unit information) of the pooled fit.  With only an intercept
        (``X`` a column of ones) this is :meth:`NormalInverseGamma.from_data` of ``y``.

        Parameters
        ----------
        data : array_like of shape (n, 1 + P)
            Rows ``[y, x_1, ..., x_P]``, as observed by the mixture; the covariates must have
            full column rank.
        variance_fraction : float, default 0.1
            Prior mean of a cluster's noise variance relative to the pooled fit's residual
            variance; compare values with the evidence (user guide, "Choosing
            hyperparameters").

        Returns
        -------
        NormalLinearRegression

        References
        ----------
        Zellner (1986), "On assessing prior distributions and Bayesian regression analysis
        with g-prior distributions".
        """
        name = f"{cls.__name__}.from_data"
        fraction = _check_fraction(name, variance_fraction)
        rows = cls().check_data_symbolic(data)
        y, design = rows[:, 0], rows[:, 1:]
        n, p = design.shape
        gram = design.T @ design
        if n <= p or np.linalg.matrix_rank(gram) < p:
            raise ValueError(f"{name}: the covariates (columns 1..{p}) must have full column "
                             f"rank with more rows than columns (got {n} rows); drop "
                             "collinear or constant columns (keep one intercept column)")
        coefficients = np.linalg.solve(gram, design.T @ y)
        residual_variance = float(np.mean((y - design @ coefficients) ** 2))
        if not residual_variance > 0:
            raise ValueError(f"{name}: the covariates fit the response exactly; give the "
                             "hyperparameters yourself")
        v0 = n * np.linalg.inv(gram) / fraction
        return cls(beta0=coefficients, V0=0.5 * (v0 + v0.T), a0=1.5,
                   b0=0.5 * fraction * residual_variance)

    # ------------------------------------------------------------------ examples
    @classmethod
    def examples(cls, rng):
        """P = 1 (scalar hyperparameters, bound by the data), 2 (intercept and slope) and 3."""
        out = []
        x = rng.normal(size=9)
        out.append(("nlr-1", cls(beta0=0.3, V0=2.0, a0=1.5, b0=0.8),
                    np.column_stack([1.5 * x + rng.normal(0.0, 0.5, 9), x])))
        x = rng.normal(2.0, 1.5, size=10)
        out.append(("nlr-2", cls(beta0=[1.0, -0.5], V0=[[2.0, 0.3], [0.3, 0.5]], a0=2.0,
                                 b0=1.0),
                    np.column_stack([1.0 - x + rng.normal(0.0, 0.7, 10), np.ones(10), x])))
        a = rng.normal(size=(3, 3))
        design = np.column_stack([np.ones(11), rng.normal(size=(11, 2))])
        out.append(("nlr-3", cls(beta0=rng.normal(size=3), V0=a @ a.T + np.eye(3), a0=3.0,
                                 b0=2.0),
                    np.column_stack([design @ [0.5, 2.0, -1.0] + rng.normal(0.0, 0.4, 11),
                                     design])))
        return out


def _posterior(family, x2d):
    """``(beta0 + m_n, Lambda_n, a_n, b_n)`` from the raw rows.

    In the residuals ``r = y - X beta0`` (the prior mean moved to zero, as in the numba
    statistics): ``m_n = Lambda_n^{-1} X' r`` and ``b_n = b0 + (r' r - m_n' Lambda_n m_n) / 2``,
    the textbook form without its cancellation for responses far from zero.
    """
    full = family._full
    x2d = np.asarray(x2d, dtype=np.float64).reshape(-1, family.data_dim)
    y, design = x2d[:, 0], x2d[:, 1:]
    residual = y - design @ full["beta0"]
    precision = np.linalg.inv(full["V0"]) + design.T @ design
    shift = np.linalg.solve(precision, design.T @ residual)
    shape = full["a0"] + 0.5 * y.shape[0]
    scale = full["b0"] + 0.5 * (residual @ residual - shift @ precision @ shift)
    return full["beta0"] + shift, precision, shape, scale


def reference_log_marginal(family: NormalLinearRegression, x2d: np.ndarray) -> float:
    """Multivariate Student-t density of the responses (no posterior update involved).

    ``y ~ t_{2 a0}(X beta0, (b0 / a0) (I + X V0 X'))``.
    """
    from scipy import stats  # on first use: scipy.stats costs ~0.5 CPU s to import

    full = family._full
    x2d = np.asarray(x2d, dtype=np.float64).reshape(-1, family.data_dim)
    n = x2d.shape[0]
    if n == 0:
        return 0.0
    design = x2d[:, 1:]
    shape = full["b0"] / full["a0"] * (np.eye(n) + design @ full["V0"] @ design.T)
    return float(stats.multivariate_t(loc=design @ full["beta0"], shape=shape,
                                      df=2.0 * full["a0"]).logpdf(x2d[:, 0]))


def reference_log_predictive(family: NormalLinearRegression, x_row, x2d) -> float:
    """scipy Student-t predictive of ``x_row = [y, covariates]`` given the rows ``x2d``."""
    from scipy import stats

    x_row = np.asarray(x_row, dtype=np.float64).reshape(-1)
    mean, precision, shape, scale = _posterior(family, x2d)
    covariates = x_row[1:]
    spread = scale / shape * (1.0 + covariates @ np.linalg.solve(precision, covariates))
    return float(stats.t(df=2.0 * shape, loc=covariates @ mean,
                         scale=np.sqrt(spread)).logpdf(x_row[0]))

