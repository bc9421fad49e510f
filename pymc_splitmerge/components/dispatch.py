"""Numba dispatch over the conjugate component families.

Every function here is ``@njit(cache=True)`` and switches on the integer ``family_id``
(the ``FAMILY_*`` constants below, also the ``family_id`` class attribute of each
:class:`~pymc_splitmerge.components.base.ComponentFamily`), so a kernel that calls them is
compiled once and serves every family.  ``params`` is the family's packed constants
(``family.params``), a statistics row is a float64 array of shape (stat_dim,) and an
observation ``x_row`` a prepared data row of shape (data_dim,).

Some families (Normal-Inverse-Wishart) use a scratch tail of ``params``: calls that share
one params array must not run concurrently in several threads.

Functions
---------
add_point(family_id, params, stats_row, x_row)        in place
remove_point(family_id, params, stats_row, x_row)     in place; handles loss of definiteness
log_predictive(family_id, params, stats_row, x_row)   -> float
log_marginal(family_id, params, stats_row)            -> float, 0.0 for an empty row
log_predictive_many(family_id, params, stats, slots, n_slots, x_row, out)
stats_from_rows(family_id, params, empty_row, x2d, index) -> new statistics row

Note on numba caching: a cached function is only invalidated when *its own* source file
changes; after editing a family module, clear ``__pycache__`` (``*.nbi``/``*.nbc``) of this
package and of the kernels.
"""

from __future__ import annotations

from numba import njit

from pymc_splitmerge.components._family_ids import (
    FAMILY_BETA_BERNOULLI,
    FAMILY_DIRICHLET_CATEGORICAL,
    FAMILY_GAMMA_POISSON,
    FAMILY_GRID,
    FAMILY_NORMAL_INVERSE_GAMMA,
    FAMILY_NORMAL_INVERSE_WISHART,
    FAMILY_NORMAL_KNOWN_COVARIANCE,
)
from pymc_splitmerge.components.beta_bernoulli import (
    beta_bernoulli_add_point,
    beta_bernoulli_log_marginal,
    beta_bernoulli_log_predictive,
    beta_bernoulli_remove_point,
)
from pymc_splitmerge.components.dirichlet_categorical import (
    dirichlet_categorical_add_point,
    dirichlet_categorical_log_marginal,
    dirichlet_categorical_log_predictive,
    dirichlet_categorical_remove_point,
)
from pymc_splitmerge.components.gamma_poisson import (
    gamma_poisson_add_point,
    gamma_poisson_log_marginal,
    gamma_poisson_log_predictive,
    gamma_poisson_remove_point,
)
from pymc_splitmerge.components.grid import (
    grid_add_point,
    grid_log_marginal,
    grid_log_predictive,
    grid_remove_point,
)
from pymc_splitmerge.components.normal_inverse_gamma import (
    normal_inverse_gamma_add_point,
    normal_inverse_gamma_log_marginal,
    normal_inverse_gamma_log_predictive,
    normal_inverse_gamma_remove_point,
)
from pymc_splitmerge.components.normal_inverse_wishart import (
    niw_add_point,
    niw_log_marginal,
    niw_log_predictive,
    niw_log_predictive_many,
    niw_remove_point,
)
from pymc_splitmerge.components.normal_known_covariance import (
    normal_known_covariance_add_point,
    normal_known_covariance_log_marginal,
    normal_known_covariance_log_predictive,
    normal_known_covariance_remove_point,
)

__all__ = [
    "FAMILY_NORMAL_INVERSE_WISHART",
    "FAMILY_NORMAL_KNOWN_COVARIANCE",
    "FAMILY_NORMAL_INVERSE_GAMMA",
    "FAMILY_BETA_BERNOULLI",
    "FAMILY_DIRICHLET_CATEGORICAL",
    "FAMILY_GAMMA_POISSON",
    "FAMILY_GRID",
    "add_point",
    "remove_point",
    "log_predictive",
    "log_marginal",
    "log_predictive_many",
    "stats_from_rows",
]


@njit(cache=True)
def add_point(family_id, params, stats_row, x_row):
    """Add the observation ``x_row`` to the statistics row ``stats_row`` (in place)."""
    if family_id == FAMILY_NORMAL_INVERSE_WISHART:
        niw_add_point(params, stats_row, x_row)
    elif family_id == FAMILY_NORMAL_KNOWN_COVARIANCE:
        normal_known_covariance_add_point(params, stats_row, x_row)
    elif family_id == FAMILY_NORMAL_INVERSE_GAMMA:
        normal_inverse_gamma_add_point(params, stats_row, x_row)
    elif family_id == FAMILY_BETA_BERNOULLI:
        beta_bernoulli_add_point(params, stats_row, x_row)
    elif family_id == FAMILY_DIRICHLET_CATEGORICAL:
        dirichlet_categorical_add_point(params, stats_row, x_row)
    elif family_id == FAMILY_GAMMA_POISSON:
        gamma_poisson_add_point(params, stats_row, x_row)
    elif family_id == FAMILY_GRID:
        grid_add_point(params, stats_row, x_row)
    else:
        raise ValueError("unknown family_id")


@njit(cache=True)
def remove_point(family_id, params, stats_row, x_row):
    """Remove the observation ``x_row`` from ``stats_row`` (in place).

    Removing the last point restores the empty row exactly; the Normal-Inverse-Wishart
    family recomputes its Cholesky factor from the raw sums when a downdate loses
    definiteness.
    """
    if family_id == FAMILY_NORMAL_INVERSE_WISHART:
        niw_remove_point(params, stats_row, x_row)
    elif family_id == FAMILY_NORMAL_KNOWN_COVARIANCE:
        normal_known_covariance_remove_point(params, stats_row, x_row)
    elif family_id == FAMILY_NORMAL_INVERSE_GAMMA:
        normal_inverse_gamma_remove_point(params, stats_row, x_row)
    elif family_id == FAMILY_BETA_BERNOULLI:
        beta_bernoulli_remove_point(params, stats_row, x_row)
    elif family_id == FAMILY_DIRICHLET_CATEGORICAL:
        dirichlet_categorical_remove_point(params, stats_row, x_row)
    elif family_id == FAMILY_GAMMA_POISSON:
        gamma_poisson_remove_point(params, stats_row, x_row)
    elif family_id == FAMILY_GRID:
        grid_remove_point(params, stats_row, x_row)
    else:
        raise ValueError("unknown family_id")


@njit(cache=True)
def log_predictive(family_id, params, stats_row, x_row):
    """Log posterior predictive of ``x_row`` given a cluster's statistics row."""
    if family_id == FAMILY_NORMAL_INVERSE_WISHART:
        return niw_log_predictive(params, stats_row, x_row)
    elif family_id == FAMILY_NORMAL_KNOWN_COVARIANCE:
        return normal_known_covariance_log_predictive(params, stats_row, x_row)
    elif family_id == FAMILY_NORMAL_INVERSE_GAMMA:
        return normal_inverse_gamma_log_predictive(params, stats_row, x_row)
    elif family_id == FAMILY_BETA_BERNOULLI:
        return beta_bernoulli_log_predictive(params, stats_row, x_row)
    elif family_id == FAMILY_DIRICHLET_CATEGORICAL:
        return dirichlet_categorical_log_predictive(params, stats_row, x_row)
    elif family_id == FAMILY_GAMMA_POISSON:
        return gamma_poisson_log_predictive(params, stats_row, x_row)
    elif family_id == FAMILY_GRID:
        return grid_log_predictive(params, stats_row, x_row)
    else:
        raise ValueError("unknown family_id")


@njit(cache=True)
def log_marginal(family_id, params, stats_row):
    """Log marginal likelihood of a cluster from its statistics row (0.0 when empty)."""
    if family_id == FAMILY_NORMAL_INVERSE_WISHART:
        return niw_log_marginal(params, stats_row)
    elif family_id == FAMILY_NORMAL_KNOWN_COVARIANCE:
        return normal_known_covariance_log_marginal(params, stats_row)
    elif family_id == FAMILY_NORMAL_INVERSE_GAMMA:
        return normal_inverse_gamma_log_marginal(params, stats_row)
    elif family_id == FAMILY_BETA_BERNOULLI:
        return beta_bernoulli_log_marginal(params, stats_row)
    elif family_id == FAMILY_DIRICHLET_CATEGORICAL:
        return dirichlet_categorical_log_marginal(params, stats_row)
    elif family_id == FAMILY_GAMMA_POISSON:
        return gamma_poisson_log_marginal(params, stats_row)
    elif family_id == FAMILY_GRID:
        return grid_log_marginal(params, stats_row)
    else:
        raise ValueError("unknown family_id")


@njit(cache=True)
def log_predictive_many(family_id, params, stats, slots, n_slots, x_row, out):
    """Predictive of one observation for several clusters.

    The kernels' hot loop: prefer it to ``n_slots`` calls of :func:`log_predictive`, which
    each create a row view (two atomic reference-count updates, more than a cached
    low-dimensional predictive costs); families with a view-free batch leaf use it.

    Parameters
    ----------
    family_id : int
    params : ndarray of float64, shape (n_params,)
    stats : ndarray of float64, shape (capacity, stat_dim)
    slots : ndarray of int64, shape (>= n_slots,)
        Cluster slots (rows of ``stats``).
    n_slots : int
    x_row : ndarray of float64, shape (data_dim,)
    out : ndarray of float64, shape (>= n_slots,)
        Receives ``out[j] = log p(x_row | cluster slots[j])`` for ``j < n_slots``.
    """
    if family_id == FAMILY_NORMAL_INVERSE_WISHART:
        niw_log_predictive_many(params, stats, slots, n_slots, x_row, out)
    elif family_id == FAMILY_NORMAL_KNOWN_COVARIANCE:
        for j in range(n_slots):
            out[j] = normal_known_covariance_log_predictive(params, stats[slots[j]], x_row)
    elif family_id == FAMILY_NORMAL_INVERSE_GAMMA:
        for j in range(n_slots):
            out[j] = normal_inverse_gamma_log_predictive(params, stats[slots[j]], x_row)
    elif family_id == FAMILY_BETA_BERNOULLI:
        for j in range(n_slots):
            out[j] = beta_bernoulli_log_predictive(params, stats[slots[j]], x_row)
    elif family_id == FAMILY_DIRICHLET_CATEGORICAL:
        for j in range(n_slots):
            out[j] = dirichlet_categorical_log_predictive(params, stats[slots[j]], x_row)
    elif family_id == FAMILY_GAMMA_POISSON:
        for j in range(n_slots):
            out[j] = gamma_poisson_log_predictive(params, stats[slots[j]], x_row)
    elif family_id == FAMILY_GRID:
        for j in range(n_slots):
            out[j] = grid_log_predictive(params, stats[slots[j]], x_row)
    else:
        raise ValueError("unknown family_id")


@njit(cache=True)
def stats_from_rows(family_id, params, empty_row, x2d, index):
    """Statistics row of the observations ``x2d[index]`` (a new array).

    Parameters
    ----------
    empty_row : ndarray of float64, shape (stat_dim,)
        ``family.empty_stats``.
    x2d : ndarray of float64, shape (n, data_dim)
    index : ndarray of int64, shape (m,)
    """
    row = empty_row.copy()
    for i in index:
        add_point(family_id, params, row, x2d[i])
    return row
