r"""Vectors of binary attributes with independent Beta priors (Beta-Bernoulli).

Model (Jain & Neal 2000, section 4; PGSM App. E.2)::

    x_ij | theta_j ~ Bernoulli(theta_j),   theta_j ~ Beta(a_j, b_j),   j = 1..J

With ``c_j = sum_i x_ij`` over the n points of a cluster::

    log p(x_1..n) = sum_j [log B(a_j + c_j, b_j + n - c_j) - log B(a_j, b_j)]       (eq. 34)
    p(x | cluster) = prod_j ((a_j + c_j)^x_j (b_j + n - c_j)^(1 - x_j)) / (a_j + b_j + n)  (eq. 35)

Each row caches the predictive's factors: with ``p1_j = (a_j + c_j) / (a_j + b_j + n)`` and
``p0_j = (b_j + n - c_j) / (a_j + b_j + n)``, ``p(x | cluster) = prod_j (x_j ? p1_j : p0_j)``,
so a predictive is J selected multiplications (four independent chains) and one
logarithm, with no division; ``add_point``/``remove_point`` recompute the factors from the
(exact, integer) counts in O(J) without logarithms.  Underflow is checked once per 16 attributes
for rows whose factors are all at least 1e-9 (flag), after every factor for the others.

Layouts
-------
Statistics row (``stat_dim = 3J + 2``): ``[n, c_1..c_J, p1 (J), p0 (J), flag]``.
Params (``3J + 1``): ``[J, a (J), b (J), a + b (J)]``.

References
----------
Jain & Neal (2000), "A split-merge Markov chain Monte Carlo procedure for the Dirichlet
process mixture model", section 4.
Bouchard-Cote, Doucet & Roth (2017), JMLR 18, App. E.2, eqs. 33-35.
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
    "BetaBernoulli",
    "beta_bernoulli_add_point",
    "beta_bernoulli_log_marginal",
    "beta_bernoulli_log_predictive",
    "beta_bernoulli_remove_point",
    "reference_log_marginal",
    "reference_log_predictive",
]


_BLOCK = 16
_SAFE_PROBABILITY = 1e-9  # a block of 16 such factors stays above 1e-144: no underflow


@njit(cache=True)
def _refresh_cache(params, stats):
    """Recompute the row's cached probabilities from the (exact, integer) counts (O(J)).

    ``p1_j = (a_j + c_j) / (a_j + b_j + n)``, ``p0_j = (b_j + n - c_j) / (a_j + b_j + n)``
    and a flag, 1.0 when every cached probability is at least 1e-9 (the blocked product of
    the predictive cannot underflow), 0.0 otherwise.
    """
    n_attributes = int(params[0])
    count = stats[0]
    offset_one = 1 + n_attributes
    offset_zero = offset_one + n_attributes
    safe = 1.0
    for j in range(n_attributes):
        ones = stats[1 + j]
        inverse_total = 1.0 / (params[1 + 2 * n_attributes + j] + count)
        one = (params[1 + j] + ones) * inverse_total
        zero = (params[1 + n_attributes + j] + count - ones) * inverse_total
        stats[offset_one + j] = one
        stats[offset_zero + j] = zero
        if one < _SAFE_PROBABILITY or zero < _SAFE_PROBABILITY:
            safe = 0.0
    stats[offset_zero + n_attributes] = safe


@njit(cache=True)
def beta_bernoulli_add_point(params, stats, x):
    """Add one binary row ``x`` (shape (J,)) to a statistics row, in place (O(J))."""
    n_attributes = int(params[0])
    stats[0] += 1.0
    for j in range(n_attributes):
        stats[1 + j] += x[j]
    _refresh_cache(params, stats)


@njit(cache=True)
def beta_bernoulli_remove_point(params, stats, x):
    """Remove one binary row from a statistics row, in place (O(J))."""
    n_attributes = int(params[0])
    stats[0] -= 1.0
    for j in range(n_attributes):
        stats[1 + j] -= x[j]
    _refresh_cache(params, stats)


@njit(cache=True)
def beta_bernoulli_log_predictive(params, stats, x):
    """Log predictive mass of a binary row ``x`` (eq. 35) from the cached factors.

    Four interleaved partial products (independent multiplication chains), each flushed
    into a log below 1e-30 once per block of 16 attributes when the row's flag says every
    factor is at least 1e-9 (so a partial stays above 1e-66 and the four multiply to at
    least 1e-264), and one logarithm.  Rows with tiny factors flush after every factor.
    """
    n_attributes = int(params[0])
    offset_one = 1 + n_attributes
    offset_zero = offset_one + n_attributes
    log_total = 0.0
    if stats[offset_zero + n_attributes] > 0.5:
        first = 1.0
        second = 1.0
        third = 1.0
        fourth = 1.0
        body = n_attributes - n_attributes % 4
        for j in range(0, body, 4):
            first *= stats[offset_one + j] if x[j] > 0.5 else stats[offset_zero + j]
            second *= stats[offset_one + j + 1] if x[j + 1] > 0.5 else stats[offset_zero + j + 1]
            third *= stats[offset_one + j + 2] if x[j + 2] > 0.5 else stats[offset_zero + j + 2]
            fourth *= stats[offset_one + j + 3] if x[j + 3] > 0.5 else stats[offset_zero + j + 3]
            if (j + 4) % _BLOCK == 0 and min(min(first, second), min(third, fourth)) < 1e-30:
                log_total += math.log(first * second) + math.log(third * fourth)
                first = second = third = fourth = 1.0
        for j in range(body, n_attributes):
            first *= stats[offset_one + j] if x[j] > 0.5 else stats[offset_zero + j]
        return log_total + math.log((first * second) * (third * fourth))
    product = 1.0
    for j in range(n_attributes):
        product *= stats[offset_one + j] if x[j] > 0.5 else stats[offset_zero + j]
        if product < 1e-150:
            log_total += math.log(product)
            product = 1.0
    return log_total + math.log(product)


@njit(cache=True)
def beta_bernoulli_log_marginal(params, stats):
    """Log marginal likelihood (eq. 34) of a statistics row; 0.0 for an empty row."""
    count = stats[0]
    if count == 0.0:
        return 0.0
    n_attributes = int(params[0])
    total = 0.0
    for j in range(n_attributes):
        a = params[1 + j]
        b = params[1 + n_attributes + j]
        ab = params[1 + 2 * n_attributes + j]
        ones = stats[1 + j]
        total += (
            math.lgamma(a + ones) + math.lgamma(b + count - ones) - math.lgamma(ab + count)
            - math.lgamma(a) - math.lgamma(b) + math.lgamma(ab)
        )
    return total


class BetaBernoulli(ComponentFamily):
    """Vectors of J binary attributes, each with its own Beta(a_j, b_j) prior.

    Parameters
    ----------
    a, b : float or array_like of shape (J,)
        Beta prior parameters, > 0 (scalars broadcast to the number of attributes).

    Notes
    -----
    Data: 0/1 (or boolean) array of shape (n, J).  Statistics row ``[n, counts of ones]``
    followed by the cached factors of the predictive (module docstring).

    References
    ----------
    Jain & Neal (2000), section 4; Bouchard-Cote, Doucet & Roth (2017), App. E.2.
    """

    hyperparameter_names = ("a", "b")
    numba_leaves = NumbaLeaves(
        add_point=beta_bernoulli_add_point, remove_point=beta_bernoulli_remove_point,
        log_predictive=beta_bernoulli_log_predictive, log_marginal=beta_bernoulli_log_marginal,
    )

    def __init__(self, a=1.0, b=1.0):
        super().__init__(a=a, b=b)

    def log_marginal_graph(self, graph, hyperparameters, x2d):
        """``sum_j log B(a_j + c_j, b_j + n - c_j) - log B(a_j, b_j)`` per slot in pytensor."""
        pt, counts = graph.pt, graph.counts
        a = graph.vector(hyperparameters["a"])
        b = graph.vector(hyperparameters["b"])

        def betaln(first, second):
            return pt.gammaln(first) + pt.gammaln(second) - pt.gammaln(first + second)

        ones = graph.segment_sum(x2d)  # (K, J)
        per_slot = pt.sum(betaln(a[None] + ones, b[None] + counts[:, None] - ones)
                          - betaln(a, b)[None], axis=1)
        return per_slot, [pt.all(pt.gt(a, 0)), pt.all(pt.gt(b, 0))]

    @classmethod
    def examples(cls, rng):
        return [("beta-bernoulli", cls(a=rng.uniform(0.5, 2.0, size=6), b=0.8),
                 rng.integers(0, 2, size=(10, 6)))]

    def _parameter_shapes(self):
        return {"probability": (self._data_dim,)}

    def _sample_parameters(self, rng, x2d):
        """``theta_j ~ Beta(a_j + c_j, b_j + n - c_j)`` per attribute."""
        ones = x2d.sum(axis=0)
        return {"probability": rng.beta(self._full["a"] + ones,
                                        self._full["b"] + x2d.shape[0] - ones)}

    def _sample_observations(self, rng, parameters, size):
        return rng.random((size, self._data_dim)) < parameters["probability"]

    def _validate(self, values):
        name = type(self).__name__
        out = {}
        for key in ("a", "b"):
            out[key] = _require_vector(name, key, values[key])
            _require_positive(name, key, out[key])
        if out["a"].ndim == 1 and out["b"].ndim == 1 and out["a"].shape != out["b"].shape:
            raise ValueError(
                f"{name}: 'a' and 'b' have different lengths {out['a'].shape[0]} and "
                f"{out['b'].shape[0]}"
            )
        return out

    def _data_dim_from_hyperparameters(self, canonical):
        for key in ("a", "b"):
            if canonical[key].ndim == 1:
                return canonical[key].shape[0]
        return None

    def _finalize(self, canonical, data_dim):
        name = type(self).__name__
        return {key: _broadcast_vector(name, key, canonical[key], data_dim) for key in ("a", "b")}

    def _pack_params(self, full):
        a, b = full["a"], full["b"]
        return np.concatenate([[a.shape[0]], a, b, a + b])

    def _pack_empty_stats(self, full, params):
        # the numba refresh writes the prior predictive's cached form
        row = np.zeros(3 * full["a"].shape[0] + 2)
        _refresh_cache(params, row)
        return row

    def _check_data_domain(self, x2d):
        bad = (x2d != 0.0) & (x2d != 1.0)
        if np.any(bad):
            row, column = np.argwhere(bad)[0]
            raise ValueError(
                f"{type(self).__name__}: data must be binary (0/1 or bool), found "
                f"{x2d[row, column]} at row {row}, column {column}"
            )


def reference_log_marginal(family: BetaBernoulli, x2d) -> float:
    """Product of Beta-function ratios (eq. 34) with scipy, from the raw rows (n, J)."""
    a, b = family._full["a"], family._full["b"]
    x2d = np.asarray(x2d, dtype=np.float64).reshape(-1, a.shape[0])
    n = x2d.shape[0]
    ones = x2d.sum(axis=0)
    return float(np.sum(special.betaln(a + ones, b + n - ones) - special.betaln(a, b)))


def reference_log_predictive(family: BetaBernoulli, x_row, x2d) -> float:
    """Posterior-mean Bernoulli product (eq. 35) from the raw rows."""
    a, b = family._full["a"], family._full["b"]
    x2d = np.asarray(x2d, dtype=np.float64).reshape(-1, a.shape[0])
    n = x2d.shape[0]
    probability = (a + x2d.sum(axis=0)) / (a + b + n)
    x_row = np.reshape(x_row, -1)
    return float(np.sum(np.where(x_row > 0.5, np.log(probability), np.log1p(-probability))))
