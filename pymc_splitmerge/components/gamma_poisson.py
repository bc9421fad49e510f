r"""Vectors of counts with independent Gamma priors on Poisson rates (Gamma-Poisson).

Model::

    x_ij | lambda_j ~ Poisson(lambda_j),   lambda_j ~ Gamma(shape_j, rate_j)   (RATE, not scale)

With ``S_j = sum_i x_ij`` over the n points of a cluster::

    log p(x_1..n) = sum_j [lgamma(a_j + S_j) - lgamma(a_j) + a_j log b_j
                           - (a_j + S_j) log(b_j + n)] - sum_ij log(x_ij!)

The predictive of one row is a product of negative binomials,
``NB(x_j; a_j + S_j, p = (b_j + n) / (b_j + n + 1))``::

    log p(x | cluster) = sum_j [log Gamma(a_j+S_j+x_j) - log Gamma(a_j+S_j) - log x_j!
                                + (a_j+S_j) log((b_j+n)/(b_j+n+1)) - x_j log(b_j+n+1)]

For counts below 32 the Gamma-function ratio ``Gamma(a+S+x) / (Gamma(a+S) x!)`` is a short
running product (flushed into a logarithm outside [1e-150, 1e150]).  The terms that depend
on the cluster only are cached in the row: ``C = sum_j (a_j + S_j) log((b_j + n) /
(b_j + n + 1))`` and ``log(b_j + n + 1)``, refreshed by ``add_point``/``remove_point`` (two
logarithms when all rates are equal, 2J otherwise), so a predictive needs no logarithm of
its own beyond the product's.

Layouts
-------
Statistics row (``stat_dim = 2J + 3``): ``[n, S (J), sum_ij log(x_ij!), C, log(b + n + 1)
(J)]`` (the ``log(x!)`` sum is needed for the log marginal likelihood only).
Params (``2 + 2J``): ``[J, 1.0 if all rates are equal else 0.0, shape (J), rate (J)]``.

References
----------
Gelman et al. (2013), Bayesian Data Analysis, 3rd ed., section 2.6 (Poisson model).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from pymc_splitmerge.components.base import (
    ComponentFamily,
    NumbaLeaves,
    _broadcast_vector,
    _require_positive,
    _require_vector,
)
from pymc_splitmerge.core.jit import njit

__all__ = [
    "GammaPoisson",
    "gamma_poisson_add_point",
    "gamma_poisson_log_marginal",
    "gamma_poisson_log_predictive",
    "gamma_poisson_remove_point",
    "reference_log_marginal",
    "reference_log_predictive",
]


@njit(cache=True)
def _refresh_cache(params, stats):
    """Recompute the row's cached ``C`` and ``log(b_j + n + 1)`` from the sums.

    ``C = sum_j (a_j + S_j) log((b_j + n) / (b_j + n + 1))``; two logarithms when all rates
    are equal, 2J otherwise.
    """
    n_attributes = int(params[0])
    count = stats[0]
    offset_rate = 2 + n_attributes
    offset_cache = 2 + n_attributes
    equal_rates = params[1] > 0.5
    log_next = 0.0
    log_ratio = 0.0
    if equal_rates:
        rate = params[offset_rate] + count
        log_next = math.log(rate + 1.0)
        log_ratio = math.log(rate) - log_next
    constant = 0.0
    for j in range(n_attributes):
        if not equal_rates:
            rate = params[offset_rate + j] + count
            log_next = math.log(rate + 1.0)
            log_ratio = math.log(rate) - log_next
        constant += (params[2 + j] + stats[1 + j]) * log_ratio
        stats[offset_cache + 1 + j] = log_next
    stats[offset_cache] = constant


@njit(cache=True)
def gamma_poisson_add_point(params, stats, x):
    """Add one row of counts ``x`` (shape (J,)) to a statistics row, in place."""
    n_attributes = int(params[0])
    stats[0] += 1.0
    log_factorials = 0.0
    for j in range(n_attributes):
        stats[1 + j] += x[j]
        if x[j] > 1.0:
            log_factorials += math.lgamma(x[j] + 1.0)
    stats[1 + n_attributes] += log_factorials
    _refresh_cache(params, stats)


@njit(cache=True)
def gamma_poisson_remove_point(params, stats, x):
    """Remove one row of counts from a statistics row, in place (exact reset when emptied)."""
    n_attributes = int(params[0])
    if stats[0] <= 1.0:
        for j in range(n_attributes + 2):
            stats[j] = 0.0
    else:
        stats[0] -= 1.0
        log_factorials = 0.0
        for j in range(n_attributes):
            stats[1 + j] -= x[j]
            if x[j] > 1.0:
                log_factorials += math.lgamma(x[j] + 1.0)
        stats[1 + n_attributes] -= log_factorials
    _refresh_cache(params, stats)


@njit(cache=True)
def gamma_poisson_log_predictive(params, stats, x):
    """Log negative-binomial predictive of a row of counts from the cached form, O(J).

    ``C - sum_j x_j log(b_j + n + 1) + sum_j log[Gamma(a_j + S_j + x_j) / (Gamma(a_j + S_j)
    x_j!)]``, the last term a short running product for counts below 32.
    """
    n_attributes = int(params[0])
    offset_cache = 2 + n_attributes
    log_total = stats[offset_cache]
    product = 1.0
    for j in range(n_attributes):
        xj = x[j]
        log_total -= xj * stats[offset_cache + 1 + j]
        if xj == 0.0:
            continue
        a_post = params[2 + j] + stats[1 + j]
        if xj < 32.0:
            for k in range(int(xj)):
                product *= (a_post + k) / (k + 1.0)
                if product < 1e-150 or product > 1e150:
                    log_total += math.log(product)
                    product = 1.0
        else:
            log_total += math.lgamma(a_post + xj) - math.lgamma(a_post) - math.lgamma(xj + 1.0)
    return log_total + math.log(product)


@njit(cache=True)
def gamma_poisson_log_marginal(params, stats):
    """Log marginal likelihood of a statistics row; 0.0 for an empty row."""
    count = stats[0]
    if count == 0.0:
        return 0.0
    n_attributes = int(params[0])
    total = -stats[1 + n_attributes]
    for j in range(n_attributes):
        a = params[2 + j]
        b = params[2 + n_attributes + j]
        total_counts = stats[1 + j]
        total += (
            math.lgamma(a + total_counts) - math.lgamma(a) + a * math.log(b)
            - (a + total_counts) * math.log(b + count)
        )
    return total


class GammaPoisson(ComponentFamily):
    """Vectors of J non-negative integer counts, Poisson rates with Gamma(shape, rate) priors.

    Parameters
    ----------
    shape : float or array_like of shape (J,)
        Gamma shape, > 0 (scalars broadcast to the number of attributes).
    rate : float or array_like of shape (J,)
        Gamma RATE (inverse scale), > 0.

    Notes
    -----
    Data: non-negative integer counts, shape (n, J) (or (n,) for J = 1).
    """

    hyperparameter_names = ("shape", "rate")
    numba_leaves = NumbaLeaves(
        add_point=gamma_poisson_add_point, remove_point=gamma_poisson_remove_point,
        log_predictive=gamma_poisson_log_predictive, log_marginal=gamma_poisson_log_marginal,
    )

    def __init__(self, shape=1.0, rate=1.0):
        super().__init__(shape=shape, rate=rate)

    def log_marginal_graph(self, graph, hyperparameters, x2d):
        """Negative-binomial marginal per attribute and label slot in pytensor."""
        pt, counts = graph.pt, graph.counts
        shape = graph.vector(hyperparameters["shape"])
        rate = graph.vector(hyperparameters["rate"])
        totals, log_factorials = graph.cluster_sums(  # (K, J), (K,)
            x2d, pt.sum(pt.gammaln(x2d + 1.0), axis=1))
        per_slot = pt.sum(
            pt.gammaln(shape[None] + totals) - pt.gammaln(shape)[None]
            + (shape * pt.log(rate))[None]
            - (shape[None] + totals) * pt.log(rate[None] + counts[:, None]),
            axis=1,
        ) - log_factorials
        return per_slot, [pt.all(pt.gt(shape, 0)), pt.all(pt.gt(rate, 0))]

    @classmethod
    def from_data(cls, data):
        """A prior scaled to the data: each rate's prior mean is its column's mean count.

        ``shape = 1`` (an exponential prior on each rate, as wide as its mean) and
        ``rate = 1 / max(mean_j, 1 / n)`` per column j (a column of zeros gets the prior mean
        ``1 / n``, one count in the whole data).

        Parameters
        ----------
        data : array_like of shape (n, J) or (n,)
            Non-negative integer counts.

        Returns
        -------
        GammaPoisson
        """
        name = f"{cls.__name__}.from_data"
        array = np.asarray(data)
        if array.dtype.kind not in "biuf":
            raise TypeError(f"{name}: data must be numeric (got dtype {array.dtype})")
        counts = np.asarray(array, dtype=np.float64)
        counts = counts.reshape(-1, 1) if counts.ndim == 1 else counts
        if counts.ndim != 2 or counts.shape[0] < 1:
            raise ValueError(f"{name}: data must have shape (n, J), got {array.shape}")
        if not np.all(np.isfinite(counts)) or np.any(counts < 0):
            raise ValueError(f"{name}: data must be finite non-negative counts")
        mean = np.maximum(counts.mean(axis=0), 1.0 / counts.shape[0])
        return cls(shape=1.0, rate=1.0 / mean)

    @classmethod
    def examples(cls, rng):
        """Equal rates (two logarithms per refresh) and per-attribute rates; counts >= 32."""
        return [("gamma-poisson-equal-rates", cls(shape=[0.5, 2.0, 3.0], rate=0.7),
                 rng.poisson([1.0, 4.0, 45.0], size=(9, 3))),
                ("gamma-poisson-rates", cls(shape=1.5, rate=[0.2, 1.0, 3.0]),
                 rng.poisson([0.5, 8.0, 60.0], size=(9, 3)))]

    def _parameter_shapes(self):
        return {"rate": (self._data_dim,)}

    def _sample_parameters(self, rng, x2d):
        """``lambda_j ~ Gamma(shape_j + S_j, rate_j + n)`` (rate parametrisation)."""
        return {"rate": rng.gamma(self._full["shape"] + x2d.sum(axis=0),
                                  1.0 / (self._full["rate"] + x2d.shape[0]))}

    def _sample_observations(self, rng, parameters, size):
        return rng.poisson(parameters["rate"], size=(size, self._data_dim))

    def _validate(self, values):
        name = type(self).__name__
        out = {}
        for key in ("shape", "rate"):
            out[key] = _require_vector(name, key, values[key])
            _require_positive(name, key, out[key])
        if (out["shape"].ndim == 1 and out["rate"].ndim == 1
                and out["shape"].shape != out["rate"].shape):
            raise ValueError(f"{name}: 'shape' and 'rate' have different lengths")
        return out

    def _data_dim_from_hyperparameters(self, canonical):
        for key in ("shape", "rate"):
            if canonical[key].ndim == 1:
                return canonical[key].shape[0]
        return None

    def _finalize(self, canonical, data_dim):
        name = type(self).__name__
        return {
            key: _broadcast_vector(name, key, canonical[key], data_dim) for key in ("shape", "rate")
        }

    def _pack_params(self, full):
        rate = full["rate"]
        equal = 1.0 if np.all(rate == rate[0]) else 0.0
        return np.concatenate([[rate.shape[0], equal], full["shape"], rate])

    def _pack_empty_stats(self, full, params):
        # the numba refresh writes the prior predictive's cached form
        row = np.zeros(2 * full["shape"].shape[0] + 3)
        _refresh_cache(params, row)
        return row

    def _check_data_domain(self, x2d):
        bad = (x2d < 0) | (x2d != np.round(x2d))
        if np.any(bad):
            row, column = np.argwhere(bad)[0]
            raise ValueError(
                f"{type(self).__name__}: data must be non-negative integer counts, found "
                f"{x2d[row, column]} at row {row}, column {column}"
            )


def reference_log_marginal(family: GammaPoisson, x2d) -> float:
    """Closed form with scipy, from the raw counts (n, J)."""
    a, b = family._full["shape"], family._full["rate"]
    x2d = np.asarray(x2d, dtype=np.float64).reshape(-1, a.shape[0])
    n = x2d.shape[0]
    if n == 0:
        return 0.0
    total_counts = x2d.sum(axis=0)
    return float(
        np.sum(
            special.gammaln(a + total_counts) - special.gammaln(a) + a * np.log(b)
            - (a + total_counts) * np.log(b + n)
        )
        - np.sum(special.gammaln(x2d + 1.0))
    )


def reference_log_predictive(family: GammaPoisson, x_row, x2d) -> float:
    """scipy negative-binomial predictive from the raw counts."""
    from scipy import stats  # on first use: scipy.stats costs ~0.5 CPU s to import
    a, b = family._full["shape"], family._full["rate"]
    x2d = np.asarray(x2d, dtype=np.float64).reshape(-1, a.shape[0])
    n = x2d.shape[0]
    probability = (b + n) / (b + n + 1.0)
    return float(
        np.sum(stats.nbinom(a + x2d.sum(axis=0), probability).logpmf(np.reshape(x_row, -1)))
    )
