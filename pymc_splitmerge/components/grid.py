r"""A one-dimensional component parameter on a finite grid (PyClone-style discretisation).

The component parameter ``phi`` takes one of G grid values ``phi_1..phi_G`` with prior
log-probabilities ``log_prior_g`` (normalised here: ``logsumexp(log_prior) = 0``).  Each
observation is summarised by its log-likelihood vector over the grid,
``ell_ig = log p(y_i | phi_g)`` (data shape (n, G)); any non-conjugate likelihood becomes
conjugate this way (PGSM App. E.3).  With ``s_g = sum_i ell_ig``::

    log p(y_1..n)        = logsumexp_g(log_prior_g + s_g)
    log p(y | cluster)   = logsumexp_g(log_prior_g + s_g + ell_g) - logsumexp_g(log_prior_g + s_g)

Layouts
-------
Statistics row (``stat_dim = 2G + 2``): ``[n, s (G), logsumexp(log_prior + s), w (G)]``.
The third entry caches the cluster's log marginal likelihood and the last G the posterior log
weights ``w_g = log_prior_g + s_g - logsumexp(log_prior + s)`` (both recomputed by
``add_point`` / ``remove_point``, O(G)), so that a predictive is one logsumexp,
``log p(y | cluster) = logsumexp_g(w_g + ell_g)``.
Params (``G + 1``): ``[G, log_prior (G, normalised)]``.

Log-likelihood entries must be finite (use a large negative finite number such as -1e6
for "impossible"); prior entries may be ``-inf`` (zero prior mass) but not all of them.

References
----------
Bouchard-Cote, Doucet & Roth (2017), JMLR 18, App. E.3.
Roth et al. (2014), "PyClone: statistical inference of clonal population structure in
cancer", Nature Methods 11.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from pymc_splitmerge.components.base import ComponentFamily, NumbaLeaves
from pymc_splitmerge.core.jit import njit

__all__ = [
    "GridComponent",
    "grid_add_point",
    "grid_log_marginal",
    "grid_log_predictive",
    "grid_remove_point",
    "reference_log_marginal",
    "reference_log_predictive",
]


@njit(cache=True)
def _log_normaliser(params, stats, size):
    maximum = -np.inf
    for g in range(size):
        value = params[1 + g] + stats[1 + g]
        if value > maximum:
            maximum = value
    total = 0.0
    for g in range(size):
        total += math.exp(params[1 + g] + stats[1 + g] - maximum)
    return maximum + math.log(total)


@njit(cache=True)
def _refresh_cache(params, stats, size):
    """Recompute ``logsumexp(log_prior + s)`` and the cached posterior log weights (O(G))."""
    normaliser = _log_normaliser(params, stats, size)
    stats[1 + size] = normaliser
    for g in range(size):
        stats[2 + size + g] = params[1 + g] + stats[1 + g] - normaliser


@njit(cache=True)
def grid_add_point(params, stats, x):
    """Add one log-likelihood vector ``x`` (shape (G,)) to a statistics row, in place (O(G))."""
    size = int(params[0])
    stats[0] += 1.0
    for g in range(size):
        stats[1 + g] += x[g]
    _refresh_cache(params, stats, size)


@njit(cache=True)
def grid_remove_point(params, stats, x):
    """Remove one log-likelihood vector from a statistics row, in place (exact reset at 0)."""
    size = int(params[0])
    if stats[0] <= 1.0:
        for g in range(size + 2):
            stats[g] = 0.0
    else:
        stats[0] -= 1.0
        for g in range(size):
            stats[1 + g] -= x[g]
    _refresh_cache(params, stats, size)


@njit(cache=True)
def grid_log_predictive(params, stats, x):
    """Log predictive ``logsumexp_g(w_g + x_g)`` from the cached posterior log weights (O(G))."""
    size = int(params[0])
    offset = 2 + size
    maximum = -np.inf
    for g in range(size):
        value = stats[offset + g] + x[g]
        if value > maximum:
            maximum = value
    total = 0.0
    for g in range(size):
        total += math.exp(stats[offset + g] + x[g] - maximum)
    return maximum + math.log(total)


@njit(cache=True)
def grid_log_marginal(params, stats):
    """Log marginal likelihood of a statistics row; 0.0 for an empty row."""
    if stats[0] == 0.0:
        return 0.0
    return stats[1 + int(params[0])]


class GridComponent(ComponentFamily):
    """A scalar component parameter on a grid of G values; data are log-likelihood vectors.

    Parameters
    ----------
    log_prior_grid : array_like of shape (G,)
        Log prior weights of the grid values, possibly unnormalised (normalised here);
        ``-inf`` entries are allowed (not all).

    Notes
    -----
    Data: shape (n, G), row i holding ``log p(y_i | phi_g)`` for every grid value.

    References
    ----------
    Bouchard-Cote, Doucet & Roth (2017), JMLR 18, App. E.3.
    """

    hyperparameter_names = ("log_prior_grid",)
    numba_leaves = NumbaLeaves(
        add_point=grid_add_point, remove_point=grid_remove_point,
        log_predictive=grid_log_predictive, log_marginal=grid_log_marginal,
    )

    def __init__(self, log_prior_grid):
        super().__init__(log_prior_grid=log_prior_grid)

    def log_marginal_graph(self, graph, hyperparameters, x2d):
        """``logsumexp_g(log_prior_g + s_g)`` per label slot in pytensor."""
        pt = graph.pt
        log_prior = pt.as_tensor_variable(hyperparameters["log_prior_grid"]).astype("float64")
        log_prior = log_prior - pt.logsumexp(log_prior)
        sums = graph.segment_sum(x2d)  # (K, G)
        return pt.logsumexp(log_prior[None] + sums, axis=1), []

    @classmethod
    def examples(cls, rng):
        """Binomial read counts on a grid of 25 frequencies (PyClone-style)."""
        phi = np.linspace(0.01, 0.99, 25)
        depth = rng.integers(5, 40, size=9)
        reads = rng.binomial(depth, 0.3)
        data = reads[:, None] * np.log(phi) + (depth - reads)[:, None] * np.log1p(-phi)
        return [("grid", cls(rng.normal(size=25) - 7.0), data)]

    def _parameter_shapes(self):
        return {"grid_index": ()}

    def _sample_parameters(self, rng, x2d):
        """Grid index ``g`` with probability proportional to ``prior_g exp(s_g)``."""
        log_weights = self._full["log_prior_grid"] + x2d.sum(axis=0)
        weights = np.exp(log_weights - np.max(log_weights))
        return {"grid_index": np.asarray(rng.choice(weights.shape[0], p=weights / weights.sum()))}

    def _to_array(self, name, value):
        # -inf prior entries are legitimate: convert without the finiteness check
        array = np.asarray(value)
        if array.dtype.kind not in "biuf":
            raise ValueError(f"{type(self).__name__}: {name!r} must be a real array")
        return array.astype(np.float64)

    def _validate(self, values):
        name = type(self).__name__
        grid = values["log_prior_grid"]
        if grid.ndim != 1 or grid.shape[0] < 1:
            raise ValueError(
                f"{name}: 'log_prior_grid' must be a non-empty 1-D array, got shape {grid.shape}"
            )
        if np.any(np.isnan(grid)) or np.any(grid == np.inf):
            raise ValueError(f"{name}: 'log_prior_grid' must not contain NaN or +inf")
        if not np.any(np.isfinite(grid)):
            raise ValueError(f"{name}: 'log_prior_grid' needs at least one finite entry")
        return {"log_prior_grid": grid - special.logsumexp(grid)}

    def _data_dim_from_hyperparameters(self, canonical):
        return canonical["log_prior_grid"].shape[0]

    def _finalize(self, canonical, data_dim):
        size = canonical["log_prior_grid"].shape[0]
        if data_dim != size:
            raise ValueError(
                f"{type(self).__name__}: data rows must have one log-likelihood per grid "
                f"value ({size}), got {data_dim}"
            )
        return dict(canonical)

    def _pack_params(self, full):
        grid = full["log_prior_grid"]
        return np.concatenate([[grid.shape[0]], grid])

    def _pack_empty_stats(self, full, params):
        # the numba refresh writes the prior predictive's cached form (the prior log weights)
        size = full["log_prior_grid"].shape[0]
        row = np.zeros(2 * size + 2)
        _refresh_cache(params, row, size)
        return row


def reference_log_marginal(family: GridComponent, x2d) -> float:
    """``logsumexp(log_prior + sum of rows)`` with scipy (0.0 for no rows)."""
    grid = family._full["log_prior_grid"]
    x2d = np.asarray(x2d, dtype=np.float64).reshape(-1, grid.shape[0])
    if x2d.shape[0] == 0:
        return 0.0
    return float(special.logsumexp(grid + x2d.sum(axis=0)))


def reference_log_predictive(family: GridComponent, x_row, x2d) -> float:
    """Ratio of two grid sums with scipy."""
    grid = family._full["log_prior_grid"]
    x2d = np.asarray(x2d, dtype=np.float64).reshape(-1, grid.shape[0])
    summed = grid + x2d.sum(axis=0)
    return float(special.logsumexp(summed + np.reshape(x_row, -1)) - special.logsumexp(summed))
