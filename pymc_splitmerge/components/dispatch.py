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

Every function handles :class:`~pymc_splitmerge.components.product.ProductFamily`
(``FAMILY_PRODUCT``) by looping over its sub-families and calling the *leaf* switches
(``leaf_add_point``, ``leaf_remove_point``, ``leaf_log_predictive``, ``leaf_log_marginal``),
which know the elementary families only: numba does not reliably compile a function that
calls itself through a type-dependent branch, so the two levels are separate functions.

Product params layout (float64)::

    [n_sub, data_dim, scratch_offset,
     n_sub entries of 7: (family_id, sub_dim, stat_offset, stat_dim, param_offset,
                          param_length, column_offset),
     column indices of each sub-family (sub_dim each, at column_offset),
     the sub-families' params (at param_offset), scratch (max sub_dim)]

and its statistics row is the concatenation of the sub-families' rows (at stat_offset).  The
scratch tail receives the gathered columns of an observation for one sub-family, so a
product's params must not be shared between threads either.

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
    FAMILY_PRODUCT,
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
    "FAMILY_PRODUCT",
    "PRODUCT_HEADER",
    "PRODUCT_ENTRY",
    "leaf_add_point",
    "leaf_remove_point",
    "leaf_log_predictive",
    "leaf_log_marginal",
    "add_point",
    "remove_point",
    "log_predictive",
    "log_marginal",
    "log_predictive_many",
    "stats_from_rows",
]


@njit(cache=True)
def leaf_add_point(family_id, params, stats_row, x_row):
    """Add ``x_row`` to ``stats_row`` (in place), for an elementary (non-product) family."""
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
def leaf_remove_point(family_id, params, stats_row, x_row):
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
def leaf_log_predictive(family_id, params, stats_row, x_row):
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
def leaf_log_marginal(family_id, params, stats_row):
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
    elif family_id == FAMILY_PRODUCT:
        for j in range(n_slots):
            out[j] = _product_log_predictive(params, stats[slots[j]], x_row)
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


# ------------------------------------------------------------------ product and top level
PRODUCT_HEADER = 3
"""Entries before the per-sub-family table of a product's params."""

PRODUCT_ENTRY = 7
"""Entries per sub-family in a product's params table."""


@njit(cache=True)
def _product_gather(params, entry, x_row):
    """Columns of sub-family ``entry`` of ``x_row``, copied to the scratch tail of params."""
    sub_dim = int(params[entry + 1])
    columns = int(params[entry + 6])
    scratch = int(params[2])
    for j in range(sub_dim):
        params[scratch + j] = x_row[int(params[columns + j])]
    return params[scratch:scratch + sub_dim]


@njit(cache=True)
def _product_add_point(params, stats_row, x_row):
    for i in range(int(params[0])):
        entry = PRODUCT_HEADER + PRODUCT_ENTRY * i
        stat_offset = int(params[entry + 2])
        param_offset = int(params[entry + 4])
        leaf_add_point(int(params[entry]),
                       params[param_offset:param_offset + int(params[entry + 5])],
                       stats_row[stat_offset:stat_offset + int(params[entry + 3])],
                       _product_gather(params, entry, x_row))


@njit(cache=True)
def _product_remove_point(params, stats_row, x_row):
    for i in range(int(params[0])):
        entry = PRODUCT_HEADER + PRODUCT_ENTRY * i
        stat_offset = int(params[entry + 2])
        param_offset = int(params[entry + 4])
        leaf_remove_point(int(params[entry]),
                          params[param_offset:param_offset + int(params[entry + 5])],
                          stats_row[stat_offset:stat_offset + int(params[entry + 3])],
                          _product_gather(params, entry, x_row))


@njit(cache=True)
def _product_log_predictive(params, stats_row, x_row):
    total = 0.0
    for i in range(int(params[0])):
        entry = PRODUCT_HEADER + PRODUCT_ENTRY * i
        stat_offset = int(params[entry + 2])
        param_offset = int(params[entry + 4])
        total += leaf_log_predictive(
            int(params[entry]), params[param_offset:param_offset + int(params[entry + 5])],
            stats_row[stat_offset:stat_offset + int(params[entry + 3])],
            _product_gather(params, entry, x_row))
    return total


@njit(cache=True)
def _product_log_marginal(params, stats_row):
    total = 0.0
    for i in range(int(params[0])):
        entry = PRODUCT_HEADER + PRODUCT_ENTRY * i
        stat_offset = int(params[entry + 2])
        param_offset = int(params[entry + 4])
        total += leaf_log_marginal(
            int(params[entry]), params[param_offset:param_offset + int(params[entry + 5])],
            stats_row[stat_offset:stat_offset + int(params[entry + 3])])
    return total


@njit(cache=True)
def add_point(family_id, params, stats_row, x_row):
    """Add the observation ``x_row`` to the statistics row ``stats_row`` (in place)."""
    if family_id == FAMILY_PRODUCT:
        _product_add_point(params, stats_row, x_row)
    else:
        leaf_add_point(family_id, params, stats_row, x_row)


@njit(cache=True)
def remove_point(family_id, params, stats_row, x_row):
    """Remove the observation ``x_row`` from ``stats_row`` (in place).

    Removing the last point restores the empty row exactly; the Normal-Inverse-Wishart
    family recomputes its Cholesky factor from the raw sums when a downdate loses
    definiteness.
    """
    if family_id == FAMILY_PRODUCT:
        _product_remove_point(params, stats_row, x_row)
    else:
        leaf_remove_point(family_id, params, stats_row, x_row)


@njit(cache=True)
def log_predictive(family_id, params, stats_row, x_row):
    """Log posterior predictive of ``x_row`` given a cluster's statistics row."""
    if family_id == FAMILY_PRODUCT:
        return _product_log_predictive(params, stats_row, x_row)
    return leaf_log_predictive(family_id, params, stats_row, x_row)


@njit(cache=True)
def log_marginal(family_id, params, stats_row):
    """Log marginal likelihood of a cluster from its statistics row (0.0 when empty)."""
    if family_id == FAMILY_PRODUCT:
        return _product_log_marginal(params, stats_row)
    return leaf_log_marginal(family_id, params, stats_row)
