"""Numba switch over the elementary component families.  GENERATED FILE: do not edit.

Written by ``python -m pymc_splitmerge.components`` from the table of
:mod:`pymc_splitmerge.components.registry` and each family's ``numba_leaves``;
``tests/test_family_contract.py`` fails while this file differs from the generated text.

Every function is ``@njit(cache=True)`` and switches on the integer ``family_id`` (the
``FAMILY_*`` constants below), at run time: compiling one compiles every family.  They serve
ids known only at run time (``ProductFamily``'s sub-families, a plain ``int``);
:mod:`pymc_splitmerge.components.dispatch` compiles a kernel given a registered family's
``FamilyId`` for that family alone, and adds ``ProductFamily`` on top.
"""

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
    niw_add_point_at,
    niw_log_marginal,
    niw_log_predictive,
    niw_log_predictive_many,
    niw_remove_point,
    niw_remove_point_at,
)
from pymc_splitmerge.components.normal_known_covariance import (
    normal_known_covariance_add_point,
    normal_known_covariance_log_marginal,
    normal_known_covariance_log_predictive,
    normal_known_covariance_remove_point,
)
from pymc_splitmerge.components.normal_linear_regression import (
    normal_linear_regression_add_point,
    normal_linear_regression_log_marginal,
    normal_linear_regression_log_predictive,
    normal_linear_regression_remove_point,
)
from pymc_splitmerge.core.jit import njit

__all__ = [
    "FAMILY_BETA_BERNOULLI",
    "FAMILY_DIRICHLET_CATEGORICAL",
    "FAMILY_GAMMA_POISSON",
    "FAMILY_GRID",
    "FAMILY_NORMAL_INVERSE_GAMMA",
    "FAMILY_NORMAL_INVERSE_WISHART",
    "FAMILY_NORMAL_KNOWN_COVARIANCE",
    "FAMILY_NORMAL_LINEAR_REGRESSION",
    "FAMILY_PRODUCT",
    "leaf_add_point",
    "leaf_add_point_at",
    "leaf_log_marginal",
    "leaf_log_predictive",
    "leaf_log_predictive_many",
    "leaf_remove_point",
    "leaf_remove_point_at",
]

FAMILY_NORMAL_INVERSE_WISHART = 0
FAMILY_NORMAL_KNOWN_COVARIANCE = 1
FAMILY_NORMAL_INVERSE_GAMMA = 2
FAMILY_BETA_BERNOULLI = 3
FAMILY_DIRICHLET_CATEGORICAL = 4
FAMILY_GAMMA_POISSON = 5
FAMILY_GRID = 6
FAMILY_PRODUCT = 7
FAMILY_NORMAL_LINEAR_REGRESSION = 8


@njit(cache=True)
def leaf_add_point(family_id, params, stats_row, x_row):
    """Add ``x_row`` to ``stats_row`` (in place)."""
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
    elif family_id == FAMILY_NORMAL_LINEAR_REGRESSION:
        normal_linear_regression_add_point(params, stats_row, x_row)
    else:
        raise ValueError("unknown family_id")


@njit(cache=True)
def leaf_remove_point(family_id, params, stats_row, x_row):
    """Remove ``x_row`` from ``stats_row`` (in place; exact reset when emptied)."""
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
    elif family_id == FAMILY_NORMAL_LINEAR_REGRESSION:
        normal_linear_regression_remove_point(params, stats_row, x_row)
    else:
        raise ValueError("unknown family_id")


@njit(cache=True, inline="always")
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
    elif family_id == FAMILY_NORMAL_LINEAR_REGRESSION:
        return normal_linear_regression_log_predictive(params, stats_row, x_row)
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
    elif family_id == FAMILY_NORMAL_LINEAR_REGRESSION:
        return normal_linear_regression_log_marginal(params, stats_row)
    else:
        raise ValueError("unknown family_id")


@njit(cache=True, inline="always")
def leaf_log_predictive_many(family_id, params, stats, slots, n_slots, x_row, out):
    """Predictive of ``x_row`` for the clusters ``slots[:n_slots]`` (into ``out``).

    A family's own ``log_predictive_many`` leaf when it has one (view-free), else a
    loop over its ``log_predictive``.  Inlined (numba IR) into its caller
    ``dispatch.log_predictive_many``, the kernels' hot loop.
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
    elif family_id == FAMILY_NORMAL_LINEAR_REGRESSION:
        for j in range(n_slots):
            out[j] = normal_linear_regression_log_predictive(params, stats[slots[j]], x_row)
    else:
        raise ValueError("unknown family_id")


@njit(cache=True, inline="always")
def leaf_add_point_at(family_id, params, stats, slot, x, i):
    """``leaf_add_point(family_id, params, stats[slot], x[i])`` without the row views.

    Families with an ``add_point_at`` leaf run it here (inlined, numba IR, into
    ``dispatch.add_point_at``); the others go through ``leaf_add_point`` on views, which
    for them is faster than an inlined call of their row leaf.
    """
    if family_id == FAMILY_NORMAL_INVERSE_WISHART:
        niw_add_point_at(params, stats, slot, x, i)
    else:
        leaf_add_point(family_id, params, stats[slot], x[i])


@njit(cache=True, inline="always")
def leaf_remove_point_at(family_id, params, stats, slot, x, i):
    """``leaf_remove_point(family_id, params, stats[slot], x[i])`` without the row views.

    Families with a ``remove_point_at`` leaf run it here (inlined, numba IR, into
    ``dispatch.remove_point_at``); the others go through ``leaf_remove_point`` on views.
    """
    if family_id == FAMILY_NORMAL_INVERSE_WISHART:
        niw_remove_point_at(params, stats, slot, x, i)
    else:
        leaf_remove_point(family_id, params, stats[slot], x[i])
