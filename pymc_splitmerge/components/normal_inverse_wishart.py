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
freedom, location ``mu_n`` and scale ``Psi_n (kappa_n + 1) / (kappa_n (nu_n - D + 1))``.
Each row caches it in closed form, with ``W = L^{-1}`` the inverse of the lower Cholesky
factor L of ``Psi_n``::

    log p(x | .) = c_n - e_n log1p(r_n |W (x - mu_n)|^2),
    c_n = lgamma((nu_n+1)/2) - lgamma((nu_n-D+1)/2) - D/2 log(pi) + D/2 log r_n
          + sum_d log W_dd,
    e_n = (nu_n + 1)/2,   r_n = kappa_n / (kappa_n + 1),

so one evaluation is a triangular matrix-vector product (no division) and one ``log1p``
(D = 1, 2 in registers; D = 16 a dense vectorised product over the zero-padded factor).

Layouts
-------
Statistics row (``stat_dim = 5 + 2D + 2D^2``)::

    [n, sum_y (D), sum_yyT (D*D, row-major), mu_n (D), W (D*D, lower inverse Cholesky
     factor of Psi_n, upper triangle zero), c_n, e_n, r_n, updates]

with ``y_i = x_i - mu0``: the raw sums are taken about the prior mean, so that
``Psi_n = psi0 + sum y y^T - S S^T / kappa_n`` (``S = sum y``) loses no digits for data far
from zero with ``mu0`` near them (the log marginal is invariant when the data and ``mu0``
move together); rows must be recomputed when ``mu0`` changes.  ``mu_n`` and W are in the
data's coordinates (the rank-1 updates use ``x - mu_n``, which is coordinate-free).

W is stored row-major (``W_ij`` at ``i D + j``), except for D = ``COLUMN_MAJOR_DIM`` = 16,
where it is column-major (``W_ij`` at ``j D + i``): the predictive is then a dense 16 x 16
product down contiguous columns with constant trip counts, which the compiler vectorises
(about twice as fast as the triangular rows).  Other D keep row-major: at D = 64 a
column-major factor makes the rank-1 update (row by row, strided) 1.4x slower, and short
rows are fastest for small D.  Only ``niw_inverse_factor_update``, ``niw_recompute`` and the
predictive read off-diagonal entries; everything else reads the diagonal.

``add_point``/``remove_point`` refresh the cached form in O(D^2): a rank-1 modification of W
(``niw_inverse_factor_update``) and O(D) for the scalars.  ``updates`` counts the incremental
updates since W and ``mu_n`` were last recomputed from the raw sums; every
``REFRESH_INTERVAL`` updates they are (O(D^3)), which bounds the rounding drift of long
add/remove sequences.  It is the only entry that depends on the history of the row rather
than on the cluster (``NormalInverseWishart.history_entries == 1``).  The empty row holds the
prior predictive's cached form.

Params (``5 + 4D + 2D^2``)::

    [D, kappa0, nu0, log|psi0|, sum_d lgamma((nu0-d)/2), mu0 (D), psi0 (D*D),
     chol(psi0)^{-1} (D*D, in the layout of W), chol(psi0)_dd^2 / 2 (D), scratch (2D)]

The last 2D entries of params are *scratch* written by ``add_point``, ``remove_point`` and
``log_predictive`` (the rank-1 vector and the running sum of the update; the residual
``x - mu_n`` for D >= 32), so
that those calls never allocate.  Consequently one params array must not be used by two
threads at once.

Adding a point is a rank-1 update of the inverse factor, removing one a rank-1 downdate.
Exact arithmetic guarantees ``Psi_{n-1} >= psi0`` (Loewner order), hence every Cholesky
pivot of ``Psi_{n-1}`` is at least the matching pivot of ``psi0``.  When a downdated pivot
falls below half of that bound, or loses more than six digits to cancellation, the downdate
is abandoned and ``mu_n``, W are recomputed from the raw sums (O(D^3), rare).

Two-dimensional data have leaves of their own (``niw2_*``, in registers, with a written-out
2 x 2 recomputation): a family bound to D = 2 data has a ``family_id`` carrying the dimension
(``NormalInverseWishart.numba_leaves_by_dimension``), so the kernels given it compile these
alone and none of the any-D code (a third of a first run's compilation).  The any-D leaves
call them for D = 2 (the run-time switch of ``ProductFamily``): same numbers bit for bit.

References
----------
Bouchard-Cote, Doucet & Roth (2017), "Particle Gibbs split-merge sampling for Bayesian
inference in mixture models", JMLR 18, Appendix E.1, eqs. 28-32.
Gill, Golub, Murray & Saunders (1974), "Methods for modifying matrix factorizations",
Mathematics of Computation 28(126), 505-535 (method C1, rank-1 modification of a factor).
"""

from __future__ import annotations

import math

import numpy as np
from numba import uint64
from scipy import special

from pymc_splitmerge.components.base import (
    ComponentFamily,
    NumbaLeaves,
    _check_fraction,
    _data_moments,
    _require_positive,
    _require_scale_matrix,
)
from pymc_splitmerge.core.jit import compiled_only, njit

__all__ = [
    "COLUMN_MAJOR_DIM",
    "REFRESH_INTERVAL",
    "NormalInverseWishart",
    "niw2_add_point",
    "niw2_add_point_at",
    "niw2_log_predictive",
    "niw2_log_predictive_many",
    "niw2_remove_point",
    "niw2_remove_point_at",
    "niw_add_point",
    "niw_add_point_at",
    "niw_inverse_factor_update",
    "niw_log_marginal",
    "niw_log_predictive",
    "niw_log_predictive_many",
    "niw_recompute",
    "niw_remove_point",
    "niw_remove_point_at",
    "reference_log_marginal",
    "reference_log_predictive",
]

_HEADER = 5
_LOG_PI = math.log(math.pi)
#: Incremental updates of a row between two recomputations of its factor from the raw sums
#: (the periodic refresh that bounds rounding drift).
REFRESH_INTERVAL = 1024
#: The dimension whose inverse factor W is stored column-major (``W_ij`` at ``j D + i``), so
#: that the predictive is a dense product with constant trip counts down contiguous columns,
#: which the compiler vectorises (``_niw_quadratic_16``); every other D is row-major.
COLUMN_MAJOR_DIM = 16
_FASTMATH = {"reassoc", "contract"}
_LOST_DEFINITENESS = (
    "NormalInverseWishart: the posterior scale matrix lost positive definiteness to rounding "
    "error: the data lie far from mu0 compared with psi0 and their own spread, so psi0 + "
    "sum y y' - S S' / kappa (y = x - mu0, S = sum y) cancels; give mu0 a value near the data"
)


# ------------------------------------------------------------------ numba leaves
@njit(cache=True)
def niw_inverse_factor_update(factor, vector, dim, sign, pivot_bound, scratch):
    r"""In-place rank-1 modification of an inverse Cholesky factor (O(D^2)).

    ``factor`` is ``W = L^{-1}`` (lower triangular, ``Psi = L L^T``, stored column-major when
    ``dim == COLUMN_MAJOR_DIM``, row-major otherwise); on return it
    is the inverse factor of ``Psi + sign v v^T`` (``sign`` is +1.0 or -1.0).  With
    ``p = W v``, ``Psi + sign v v^T = L M M^T L^T`` where ``M`` is the Cholesky factor of
    ``I + sign p p^T``, which has the rank-1 structure ``M_jj = d_j``, ``M_ij = p_i b_j``
    (``i > j``) with ``s_0 = sign``, ``d_j^2 = 1 + s_j p_j^2``, ``b_j = s_j p_j / d_j``,
    ``s_{j+1} = s_j / d_j^2`` (Gill, Golub, Murray & Saunders 1974, method C1).  The new
    factor ``M^{-1} W`` is then formed row by row by forward substitution, carrying the
    running vector ``sum_{j<i} b_j W'_j`` in ``scratch`` (length D, overwritten).

    ``vector`` (length D) is read only.  ``pivot_bound`` (length D) holds lower bounds of
    the squared pivots ``L'_ii^2`` of the result (for a downdate: those of psi0, halved
    by the caller's convention); a downdate whose pivot falls below its bound, or loses more
    than six digits (``d_i^2 < 1e-6``), returns False with the factor partially modified
    (the caller recomputes it).  Returns True on success.
    """
    # two instances of the loop, each with constant unit stride where it has one (a
    # runtime stride would keep LLVM from vectorising the row-major loops)
    if dim == COLUMN_MAJOR_DIM:
        return _inverse_factor_update_strided(factor, vector, dim, sign, pivot_bound, scratch,
                                              1, dim)
    return _inverse_factor_update_strided(factor, vector, dim, sign, pivot_bound, scratch,
                                          dim, 1)


@njit(cache=True, inline="always")
def _inverse_factor_update_strided(factor, vector, dim, sign, pivot_bound, scratch,
                                   row_stride, column_stride):
    """Body of ``niw_inverse_factor_update`` for W_ij at ``i row_stride + j column_stride``."""
    for j in range(dim):
        scratch[j] = 0.0
    running = sign
    for i in range(dim):
        row = i * row_stride
        projection = 0.0
        for j in range(i + 1):
            projection += factor[row + j * column_stride] * vector[j]
        squared = 1.0 + running * projection * projection
        diagonal = factor[row + i * column_stride]
        if sign < 0.0 and not (
                squared >= 1e-6 and squared >= pivot_bound[i] * diagonal * diagonal):
            return False
        scale = math.sqrt(squared)
        inverse_scale = 1.0 / scale
        weight = running * projection * inverse_scale
        for j in range(i + 1):
            index = row + j * column_stride
            value = (factor[index] - projection * scratch[j]) * inverse_scale
            factor[index] = value
            scratch[j] += weight * value
        running /= squared
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
def _invert_lower_in_place(matrix, dim):
    """Row-major in-place inverse of a lower-triangular matrix (O(D^3)), column by column."""
    for j in range(dim):
        matrix[j * dim + j] = 1.0 / matrix[j * dim + j]
        for i in range(j + 1, dim):
            total = 0.0
            for k in range(j, i):
                total -= matrix[i * dim + k] * matrix[k * dim + j]
            matrix[i * dim + j] = total / matrix[i * dim + i]
    return True


@njit(cache=True)
def niw_recompute(params, stats):
    """Recompute ``mu_n`` and the inverse factor from the raw sums (O(D^3)); refresh the cache.

    Used when a downdate loses definiteness and every ``REFRESH_INTERVAL`` incremental
    updates (drift refresh); resets the update counter.
    """
    dim = int(params[0])
    kappa0 = params[1]
    mu0 = params[_HEADER:_HEADER + dim]
    psi0 = params[_HEADER + dim:_HEADER + dim + dim * dim]
    count = stats[0]
    kappa = kappa0 + count
    offset_xx = 1 + dim
    offset_mu = 1 + dim + dim * dim
    offset_factor = offset_mu + dim
    # the sums are of y = x - mu0: Psi_n = psi0 + sum y y' - S S' / kappa_n with S = sum y
    for i in range(dim):
        stats[offset_mu + i] = mu0[i] + stats[1 + i] / kappa
    for i in range(dim):
        for j in range(dim):
            stats[offset_factor + i * dim + j] = (
                psi0[i * dim + j] + stats[offset_xx + i * dim + j]
                - stats[1 + i] * stats[1 + j] / kappa
            )
    factor = stats[offset_factor:offset_factor + dim * dim]
    if not _cholesky_in_place(factor, dim):
        raise ValueError(_LOST_DEFINITENESS)
    _invert_lower_in_place(factor, dim)
    if dim == COLUMN_MAJOR_DIM:  # the row's layout (the upper triangle is zero)
        for i in range(dim):
            for j in range(i):
                factor[j * dim + i] = factor[i * dim + j]
                factor[i * dim + j] = 0.0
    stats[offset_factor + dim * dim + 3] = 0.0
    _niw_refresh_constant(params, stats)


@njit(cache=True)
def _niw_refresh_constant(params, stats):
    """Recompute the cached scalars ``c_n``, ``e_n``, ``r_n`` of the row (O(D)).

    ``c_n = lgamma(a + D/2) - lgamma(a) - D/2 log(pi) + D/2 log r_n + sum_d log W_dd`` with
    ``a = (nu_n - D + 1)/2`` and ``r_n = kappa_n / (kappa_n + 1)``.  The lgamma difference is
    a sum of ``log(a + k)`` for even D (one ``lgamma`` pair remains for odd D); the terms are
    grouped two dimensions per logarithm, ``log((a + k) r W_jj W_j'j')``, so that D = 2
    costs a single ``log`` (the factors stay O(1/variance): no overflow).
    """
    dim = int(params[0])
    count = stats[0]
    kappa = params[1] + count
    nu = params[2] + count
    offset_factor = 1 + 2 * dim + dim * dim
    shrink = kappa / (kappa + 1.0)
    a = 0.5 * (nu - dim + 1.0)
    constant = -0.5 * dim * _LOG_PI
    if dim % 2 == 1:
        last = offset_factor + (dim - 1) * (dim + 1)
        constant += (math.lgamma(a + 0.5) - math.lgamma(a)
                     + math.log(stats[last] * math.sqrt(shrink)))
        a += 0.5
    for k in range(dim // 2):
        first = offset_factor + 2 * k * (dim + 1)
        second = first + dim + 1
        constant += math.log((a + k) * shrink * (stats[first] * stats[second]))
    tail = offset_factor + dim * dim
    stats[tail] = constant
    stats[tail + 1] = 0.5 * (nu + 1.0)
    stats[tail + 2] = shrink


@njit(cache=True, inline="always")
def _niw_after_update(params, stats, tail):
    """Count one incremental update; refresh from the raw sums every REFRESH_INTERVAL."""
    updates = stats[tail + 3] + 1.0
    if updates >= REFRESH_INTERVAL:
        niw_recompute(params, stats)
    else:
        stats[tail + 3] = updates
        _niw_refresh_constant(params, stats)


@njit(cache=True)
def _niw_add_point_general(params, stats, x, dim, kappa_new, scale):
    """Any-D body of ``niw_add_point`` (everything but the cache refresh).

    Kept out of ``niw_add_point`` so that its D = 2 call stays small enough to inline.
    """
    offset_xx = 1 + dim
    offset_mu = 1 + dim + dim * dim
    offset_factor = offset_mu + dim
    scratch = _HEADER + 2 * dim + 2 * dim * dim
    vector = params[scratch:scratch + dim]
    for i in range(dim):
        xi = x[i]
        difference = xi - stats[offset_mu + i]
        stats[offset_mu + i] += difference / kappa_new
        vector[i] = scale * difference
        yi = xi - params[_HEADER + i]
        stats[1 + i] += yi
        for j in range(dim):
            stats[offset_xx + i * dim + j] += yi * (x[j] - params[_HEADER + j])
    stats[0] += 1.0
    niw_inverse_factor_update(
        stats[offset_factor:offset_factor + dim * dim], vector, dim, 1.0,
        params[scratch - dim:scratch], params[scratch + dim:scratch + 2 * dim])


@njit(cache=True)
def niw_add_point(params, stats, x):
    """Add one row ``x`` (shape (D,)) to a statistics row, in place (O(D^2)).

    The rank-1 update of the inverse factor is ``niw_inverse_factor_update`` (D = 2 in
    registers, same arithmetic); the cached scalars are refreshed.
    """
    dim = int(params[0])
    if dim == 2:
        niw2_add_point(params, stats, x)
        return
    kappa_old = params[1] + stats[0]
    kappa_new = kappa_old + 1.0
    _niw_add_point_general(params, stats, x, dim, kappa_new, math.sqrt(kappa_old / kappa_new))
    _niw_after_update(params, stats, 1 + 2 * dim + 2 * dim * dim)


@njit(cache=True)
def _niw_reset(params, stats):
    """Exact empty row (the prior's cached predictive form)."""
    dim = int(params[0])
    stats[0] = 0.0
    for i in range(dim + dim * dim):
        stats[1 + i] = 0.0
    offset_mu = 1 + dim + dim * dim
    for i in range(dim):
        stats[offset_mu + i] = params[_HEADER + i]
    factor0 = _HEADER + dim + dim * dim
    for i in range(dim * dim):
        stats[offset_mu + dim + i] = params[factor0 + i]
    stats[offset_mu + dim + dim * dim + 3] = 0.0
    _niw_refresh_constant(params, stats)


@njit(cache=True)
def niw_remove_point(params, stats, x):
    """Remove one row ``x`` from a statistics row, in place.

    Returns True when the rank-1 downdate was abandoned and the factor recomputed from the
    raw sums (the fallback), False otherwise.
    """
    dim = int(params[0])
    if dim == 2:
        return niw2_remove_point(params, stats, x)
    count = stats[0]
    if count <= 1.0:
        _niw_reset(params, stats)
        return False
    offset_xx = 1 + dim
    offset_mu = 1 + dim + dim * dim
    offset_factor = offset_mu + dim
    tail = offset_factor + dim * dim
    kappa_new = params[1] + count
    kappa_old = kappa_new - 1.0
    scale = math.sqrt(kappa_new / kappa_old)
    scratch = _HEADER + 2 * dim + 2 * dim * dim
    for i in range(dim):
        xi = x[i]
        difference = xi - stats[offset_mu + i]
        stats[offset_mu + i] -= difference / kappa_old
        params[scratch + i] = scale * difference
        yi = xi - params[_HEADER + i]
        stats[1 + i] -= yi
        for j in range(dim):
            stats[offset_xx + i * dim + j] -= yi * (x[j] - params[_HEADER + j])
    stats[0] = count - 1.0
    if niw_inverse_factor_update(
            stats[offset_factor:offset_factor + dim * dim], params[scratch:scratch + dim],
            dim, -1.0,
            params[scratch - dim:scratch], params[scratch + dim:scratch + 2 * dim]):
        _niw_after_update(params, stats, tail)
        return False
    niw_recompute(params, stats)
    return True


# The D = 2 register cores below are compiled once each and called by the D = 2 leaves (the
# row forms ``niw2_add_point``, ``niw2_remove_point`` and the slot-index forms
# ``niw2_add_point_at``, ``niw2_remove_point_at``), which write their loads and stores out
# (straight-line code: a shared body inlined by numba, or indexed through a helper, compiles
# several times slower).


@compiled_only(cache=True)
def _niw_two_refresh(kappa, nu, new00, new11):
    """The cached predictive scalars of a D = 2 row (``_niw_refresh_constant``, same
    arithmetic): (constant, half, shrink)."""
    shrink = kappa / (kappa + 1.0)
    return (-_LOG_PI + math.log(0.5 * (nu - 1.0) * shrink * (new00 * new11)),
            0.5 * (nu + 1.0), shrink)


@compiled_only(cache=True)
def _niw_two_add(kappa0, nu0, count, first, second, mean_first, mean_second, w00, w10, w11):
    """Register core of adding ``(first, second)`` to a D = 2 row of ``count`` points.

    Takes the row's mean and inverse-factor entries ``w00, w10, w11`` and returns the new
    ``(mean_first, mean_second, w00, w10, w11, constant, half, shrink)``: the rank-1 update
    is ``niw_inverse_factor_update`` with sign +1 and the scalars ``_niw_refresh_constant``
    (same arithmetic).  The one D = 2 add of the row form ``niw_add_point`` and the
    slot-index form ``niw_add_point_at``.
    """
    kappa_old = kappa0 + count
    kappa_new = kappa_old + 1.0
    scale = math.sqrt(kappa_old / kappa_new)
    difference_first = first - mean_first
    difference_second = second - mean_second
    mean_first = mean_first + difference_first / kappa_new
    mean_second = mean_second + difference_second / kappa_new
    vector_first = scale * difference_first
    vector_second = scale * difference_second
    projection_first = w00 * vector_first
    projection_second = w10 * vector_first + w11 * vector_second
    squared = 1.0 + projection_first * projection_first
    inverse_scale = 1.0 / math.sqrt(squared)
    new00 = w00 * inverse_scale
    carried = projection_first * inverse_scale * new00
    running = 1.0 / squared
    inverse_scale = 1.0 / math.sqrt(1.0 + running * projection_second * projection_second)
    new11 = w11 * inverse_scale
    new10 = (w10 - projection_second * carried) * inverse_scale
    constant, half, shrink = _niw_two_refresh(kappa_new, nu0 + (count + 1.0), new00, new11)
    return mean_first, mean_second, new00, new10, new11, constant, half, shrink


@compiled_only(cache=True)
def _niw_two_downdate(w00, w10, w11, vector_first, vector_second, bound_first, bound_second,
                      kappa, nu):
    """Register core of the D = 2 downdate: ``niw_inverse_factor_update`` with sign -1 of the
    factor entries ``w00, w10, w11`` by ``vector`` (pivot bounds ``bound_first``,
    ``bound_second``), then the scalars of ``_niw_refresh_constant`` at the new ``kappa``,
    ``nu`` (same arithmetic).  Returns ``(kept, w00, w10, w11, constant, half, shrink)``;
    ``kept`` is False when the downdate loses definiteness (the caller then recomputes the
    factor from the raw sums).  The one D = 2 downdate of the row form ``niw_remove_point``
    and the slot-index form ``niw_remove_point_at``; the mean, the raw sums and the stores
    are the callers'.
    """
    projection_first = w00 * vector_first
    projection_second = w10 * vector_first + w11 * vector_second
    squared = 1.0 - projection_first * projection_first
    if not (squared >= 1e-6 and squared >= bound_first * w00 * w00):
        return False, w00, w10, w11, 0.0, 0.0, 0.0
    inverse_scale = 1.0 / math.sqrt(squared)
    new00 = w00 * inverse_scale
    carried = -projection_first * inverse_scale * new00
    running = -1.0 / squared
    squared = 1.0 + running * projection_second * projection_second
    if not (squared >= 1e-6 and squared >= bound_second * w11 * w11):
        return False, w00, w10, w11, 0.0, 0.0, 0.0
    inverse_scale = 1.0 / math.sqrt(squared)
    new11 = w11 * inverse_scale
    new10 = (w10 - projection_second * carried) * inverse_scale
    constant, half, shrink = _niw_two_refresh(kappa, nu, new00, new11)
    return True, new00, new10, new11, constant, half, shrink


# ------------------------------------------------------------------ D = 2 leaves
# The family's leaves for two-dimensional data (``NormalInverseWishart.numba_leaves_by_dimension``):
# a kernel given the family id of a D = 2 family compiles these alone, none of the any-D code
# (the rank-1 update loops, the row and D = 16 predictives, the Cholesky factorisation),
# which is most of what the general leaves cost to compile.  The general leaves inline them
# for D = 2 (``inline="always"``: numba IR, no call level on the run-time switch's path);
# the kernels call them as compiled functions (``components.dispatch``'s direct calls
# are not inlined), so both give the same numbers bit for bit.  Entries of a
# D = 2 statistics row: n 0, sum_y 1-2, sum_yyT 3-6, mu_n 7-8, W 9-12 (W_01 = 0 at 10),
# c_n 13, e_n 14, r_n 15, updates 16; params: D 0, kappa0 1, nu0 2, mu0 5-6, psi0 7-10,
# the pivot bounds 15-16.


@compiled_only(cache=True)
def _niw_two_recompute(params, stats):
    """``niw_recompute`` of a D = 2 row (same arithmetic: the raw sums, a 2 x 2 Cholesky
    factor and its inverse written out)."""
    kappa = params[1] + stats[0]
    sum_first = stats[1]
    sum_second = stats[2]
    stats[7] = params[_HEADER] + sum_first / kappa
    stats[8] = params[_HEADER + 1] + sum_second / kappa
    scale00 = params[_HEADER + 2] + stats[3] - sum_first * sum_first / kappa
    scale10 = params[_HEADER + 4] + stats[5] - sum_second * sum_first / kappa
    scale11 = params[_HEADER + 5] + stats[6] - sum_second * sum_second / kappa
    if not scale00 > 0.0:
        raise ValueError(_LOST_DEFINITENESS)
    factor00 = math.sqrt(scale00)
    factor10 = scale10 / factor00
    scale11 = scale11 - factor10 * factor10
    if not scale11 > 0.0:
        raise ValueError(_LOST_DEFINITENESS)
    factor11 = math.sqrt(scale11)
    inverse00 = 1.0 / factor00
    stats[9] = inverse00
    stats[10] = 0.0
    stats[11] = (0.0 - factor10 * inverse00) / factor11
    stats[12] = 1.0 / factor11
    stats[13], stats[14], stats[15] = _niw_two_refresh(kappa, params[2] + stats[0], inverse00,
                                                       stats[12])
    stats[16] = 0.0


@njit(cache=True)
def _niw_two_reset(params, stats):
    """``_niw_reset`` of a D = 2 row: the prior's cached predictive form (same arithmetic)."""
    for entry in range(7):
        stats[entry] = 0.0
    stats[7] = params[_HEADER]
    stats[8] = params[_HEADER + 1]
    for entry in range(4):
        stats[9 + entry] = params[_HEADER + 6 + entry]
    stats[13], stats[14], stats[15] = _niw_two_refresh(params[1], params[2], stats[9],
                                                       stats[12])
    stats[16] = 0.0


@compiled_only(cache=True, inline="always")
def niw2_add_point(params, stats, x):
    """``niw_add_point`` of a D = 2 row (the register core ``_niw_two_add``)."""
    first = x[0]
    second = x[1]
    count = stats[0]
    refresh = not stats[16] + 1.0 < REFRESH_INTERVAL
    if not refresh:
        (mean_first, mean_second, new00, new10, new11, constant, half,
         shrink) = _niw_two_add(params[1], params[2], count, first, second, stats[7],
                                stats[8], stats[9], stats[11], stats[12])
        stats[7] = mean_first
        stats[8] = mean_second
        stats[9] = new00
        stats[11] = new10
        stats[12] = new11
        stats[13] = constant
        stats[14] = half
        stats[15] = shrink
        stats[16] += 1.0
    first = first - params[_HEADER]
    second = second - params[_HEADER + 1]
    cross = first * second
    stats[1] += first
    stats[2] += second
    stats[3] += first * first
    stats[4] += cross
    stats[5] += cross
    stats[6] += second * second
    stats[0] = count + 1.0
    if refresh:
        _niw_two_recompute(params, stats)


@compiled_only(cache=True, inline="always")
def niw2_remove_point(params, stats, x):
    """``niw_remove_point`` of a D = 2 row (the register core ``_niw_two_downdate``)."""
    count = stats[0]
    if count <= 1.0:
        _niw_two_reset(params, stats)
        return False
    kappa_new = params[1] + count
    kappa_old = kappa_new - 1.0
    scale = math.sqrt(kappa_new / kappa_old)
    first = x[0]
    second = x[1]
    difference_first = first - stats[7]
    difference_second = second - stats[8]
    stats[7] -= difference_first / kappa_old
    stats[8] -= difference_second / kappa_old
    centred_first = first - params[_HEADER]
    centred_second = second - params[_HEADER + 1]
    cross = centred_first * centred_second
    stats[1] -= centred_first
    stats[2] -= centred_second
    stats[3] -= centred_first * centred_first
    stats[4] -= cross
    stats[5] -= cross
    stats[6] -= centred_second * centred_second
    remaining = count - 1.0
    stats[0] = remaining
    kept, new00, new10, new11, constant, half, shrink = _niw_two_downdate(
        stats[9], stats[11], stats[12], scale * difference_first, scale * difference_second,
        params[_HEADER + 10], params[_HEADER + 11], params[1] + remaining,
        params[2] + remaining)
    if not kept or not stats[16] + 1.0 < REFRESH_INTERVAL:
        _niw_two_recompute(params, stats)
        return not kept
    stats[9] = new00
    stats[11] = new10
    stats[12] = new11
    stats[13] = constant
    stats[14] = half
    stats[15] = shrink
    stats[16] += 1.0
    return False


@compiled_only(cache=True, inline="always")
def niw2_log_predictive(params, stats, x):
    """``niw_log_predictive`` of a D = 2 row, in registers."""
    residual = x[0] - stats[7]
    first = stats[9] * residual
    second = stats[11] * residual + stats[12] * (x[1] - stats[8])
    return stats[13] - stats[14] * math.log1p((first * first + second * second) * stats[15])


@compiled_only(cache=True, inline="always")
def niw2_log_predictive_many(params, stats, slots, n_slots, x, out):
    """``niw_log_predictive_many`` of D = 2 rows: the cached forms read straight from the
    2-D array (no row views; same arithmetic as ``niw2_log_predictive``)."""
    first_coordinate = x[0]
    second_coordinate = x[1]
    for j in range(n_slots):
        slot = slots[j]
        residual = first_coordinate - stats[slot, 7]
        first = stats[slot, 9] * residual
        second = (stats[slot, 11] * residual
                  + stats[slot, 12] * (second_coordinate - stats[slot, 8]))
        out[j] = stats[slot, 13] - stats[slot, 14] * math.log1p(
            (first * first + second * second) * stats[slot, 15])


@compiled_only(cache=True, inline="always")
def niw2_add_point_at(params, stats, slot, x, i):
    """``niw2_add_point(params, stats[slot], x[i])`` without row views (loads and stores
    written out: straight-line code compiles in a fraction of the time of a shared body)."""
    count = stats[slot, 0]
    refresh = not stats[slot, 16] + 1.0 < REFRESH_INTERVAL
    slot = uint64(slot)  # unsigned: no negative-index wraparound tests
    i = uint64(i)
    first = x[i, 0]
    second = x[i, 1]
    if not refresh:
        (mean_first, mean_second, new00, new10, new11, constant, half,
         shrink) = _niw_two_add(params[1], params[2], count, first, second, stats[slot, 7],
                                stats[slot, 8], stats[slot, 9], stats[slot, 11],
                                stats[slot, 12])
        stats[slot, 7] = mean_first
        stats[slot, 8] = mean_second
        stats[slot, 9] = new00
        stats[slot, 11] = new10
        stats[slot, 12] = new11
        stats[slot, 13] = constant
        stats[slot, 14] = half
        stats[slot, 15] = shrink
        stats[slot, 16] += 1.0
    first = first - params[_HEADER]
    second = second - params[_HEADER + 1]
    cross = first * second
    stats[slot, 1] += first
    stats[slot, 2] += second
    stats[slot, 3] += first * first
    stats[slot, 4] += cross
    stats[slot, 5] += cross
    stats[slot, 6] += second * second
    stats[slot, 0] = count + 1.0
    if refresh:
        _niw_two_recompute(params, stats[slot])


@compiled_only(cache=True, inline="always")
def niw2_remove_point_at(params, stats, slot, x, i):
    """``niw2_remove_point(params, stats[slot], x[i])`` without row views.

    Returns True when the downdate was abandoned and the factor recomputed (the fallback).
    """
    count = stats[slot, 0]
    if count <= 1.0:
        _niw_two_reset(params, stats[slot])
        return False
    slot = uint64(slot)  # unsigned: no negative-index wraparound tests
    i = uint64(i)
    kappa_new = params[1] + count
    kappa_old = kappa_new - 1.0
    scale = math.sqrt(kappa_new / kappa_old)
    first = x[i, 0]
    second = x[i, 1]
    difference_first = first - stats[slot, 7]
    difference_second = second - stats[slot, 8]
    stats[slot, 7] -= difference_first / kappa_old
    stats[slot, 8] -= difference_second / kappa_old
    centred_first = first - params[_HEADER]
    centred_second = second - params[_HEADER + 1]
    cross = centred_first * centred_second
    stats[slot, 1] -= centred_first
    stats[slot, 2] -= centred_second
    stats[slot, 3] -= centred_first * centred_first
    stats[slot, 4] -= cross
    stats[slot, 5] -= cross
    stats[slot, 6] -= centred_second * centred_second
    remaining = count - 1.0
    stats[slot, 0] = remaining
    kept, new00, new10, new11, constant, half, shrink = _niw_two_downdate(
        stats[slot, 9], stats[slot, 11], stats[slot, 12], scale * difference_first,
        scale * difference_second, params[_HEADER + 10], params[_HEADER + 11],
        params[1] + remaining, params[2] + remaining)
    if not kept or not stats[slot, 16] + 1.0 < REFRESH_INTERVAL:
        _niw_two_recompute(params, stats[slot])
        return not kept
    stats[slot, 9] = new00
    stats[slot, 11] = new10
    stats[slot, 12] = new11
    stats[slot, 13] = constant
    stats[slot, 14] = half
    stats[slot, 15] = shrink
    stats[slot, 16] += 1.0
    return False


@njit(cache=True, fastmath=_FASTMATH)
def _niw_quadratic_rows(params, stats, x, dim, offset_mu, offset_factor):
    """``|W (x - mu_n)|^2`` for D > 2, D != 16 (row-major W): row dot products.

    The dot products may be reassociated (``fastmath`` reassoc/contract only: no NaN/inf
    assumptions) so that long rows vectorise.  Below D = 32 the residual is recomputed in
    each row (two loads, no store: a stored residual read back costs more than it saves on
    short rows); from D = 32 it goes to the scratch tail of ``params`` once.  Kept out of
    ``niw_log_predictive`` so that the D = 1, 2 paths stay small enough for LLVM to inline
    the predictive into its callers.
    """
    # No array views (a view costs two atomic reference-count updates per call), and
    # unsigned indices: numba skips the negative-index wraparound test, which would
    # otherwise keep LLVM from vectorising the dot products.
    mu = uint64(offset_mu)
    quadratic = 0.0
    if dim < 32:
        for i in range(uint64(dim)):
            row = uint64(offset_factor) + i * uint64(dim)
            total = 0.0
            for j in range(i + uint64(1)):
                total += stats[row + j] * (x[j] - stats[mu + j])
            quadratic += total * total
        return quadratic
    scratch = uint64(_HEADER + 2 * dim + 2 * dim * dim)
    for i in range(uint64(dim)):
        params[scratch + i] = x[i] - stats[mu + i]
    for i in range(uint64(dim)):
        row = uint64(offset_factor) + i * uint64(dim)
        total = 0.0
        for j in range(i + uint64(1)):
            total += stats[row + j] * params[scratch + j]
        quadratic += total * total
    return quadratic


@njit(cache=True, fastmath=_FASTMATH)
def _niw_quadratic_16(stats, x, offset_mu, offset_factor):
    """``|W (x - mu_n)|^2`` for D = 16 (column-major W, its zero upper triangle included).

    Constant trip counts: LLVM unrolls the inner loop and vectorises the outer one over the
    rows ``i`` (contiguous down each column), a dense 16 x 16 product in a few dozen vector
    multiply-adds, about twice as fast as the triangular row loops.
    """
    mu = uint64(offset_mu)
    factor = uint64(offset_factor)
    quadratic = 0.0
    for i in range(uint64(16)):
        total = 0.0
        for j in range(uint64(16)):
            total += stats[factor + j * uint64(16) + i] * (x[j] - stats[mu + j])
        quadratic += total * total
    return quadratic


@njit(cache=True)
def niw_log_predictive(params, stats, x):
    """Log multivariate Student-t predictive of ``x`` from the row's cached form (O(D^2)).

    ``c_n - e_n log1p(r_n |W (x - mu_n)|^2)``: a triangular matrix-vector product, no
    division, one ``log1p``.  D = 1 and D = 2 work in registers.  For D > 2 the logarithm
    is ``log(1 + z)``, ~7 ns cheaper than ``log1p`` here: its absolute error, at most about
    ``e_n`` ulp of 1, stays far below the 1e-10 to which the predictive is tested (the
    quadratic form is not small for a point of the data's scale).
    """
    dim = int(params[0])
    offset_mu = 1 + dim + dim * dim
    offset_factor = offset_mu + dim
    tail = offset_factor + dim * dim
    if dim == 2:
        return niw2_log_predictive(params, stats, x)
    if dim == 1:
        first = stats[offset_factor] * (x[0] - stats[offset_mu])
        quadratic = first * first
    else:
        if dim == COLUMN_MAJOR_DIM:
            quadratic = _niw_quadratic_16(stats, x, offset_mu, offset_factor)
        else:
            quadratic = _niw_quadratic_rows(params, stats, x, dim, offset_mu, offset_factor)
        return stats[tail] - stats[tail + 1] * math.log(1.0 + quadratic * stats[tail + 2])
    return stats[tail] - stats[tail + 1] * math.log1p(quadratic * stats[tail + 2])


@njit(cache=True)
def _niw_log_predictive_rows(params, stats, slots, n_slots, x, out):
    # Separate from niw_log_predictive_many: the row views made here would cost reference
    # counting on every call of it, even on its view-free D <= 2 path.
    for j in range(n_slots):
        out[j] = niw_log_predictive(params, stats[slots[j]], x)


@njit(cache=True)
def niw_log_predictive_many(params, stats, slots, n_slots, x, out):
    """``out[j] = niw_log_predictive(params, stats[slots[j]], x)`` for ``j < n_slots``.

    ``stats`` has shape (capacity, stat_dim).  D = 1 and D = 2 read the cached forms
    straight from the 2-D array (same arithmetic as ``niw_log_predictive``, no row views:
    a view costs two atomic reference-count updates, more than the predictive itself);
    larger D, where the O(D^2) product dominates, go through ``niw_log_predictive``.
    """
    dim = int(params[0])
    offset_mu = 1 + dim + dim * dim
    offset_factor = offset_mu + dim
    tail = offset_factor + dim * dim
    if dim == 2:
        niw2_log_predictive_many(params, stats, slots, n_slots, x, out)
    elif dim == 1:
        coordinate = x[0]
        for j in range(n_slots):
            slot = slots[j]
            first = stats[slot, offset_factor] * (coordinate - stats[slot, offset_mu])
            out[j] = stats[slot, tail] - stats[slot, tail + 1] * math.log1p(
                first * first * stats[slot, tail + 2])
    else:
        _niw_log_predictive_rows(params, stats, slots, n_slots, x, out)


# ------------------------------------------------------------------ slot-index forms
# ``f_at(params, stats, slot, x, i)`` is ``f(params, stats[slot], x[i])`` on the 2-D arrays,
# without the two row views (each costs two atomic reference-count updates, more than a
# D = 2 update itself).  D = 2 runs the D = 2 leaves' slot-index forms (bit-identical
# results, tested); every other D calls the row functions through views.


@njit(cache=True)
def niw_add_point_at(params, stats, slot, x, i):
    """``niw_add_point(params, stats[slot], x[i])`` without row views (D = 2 in registers)."""
    if int(params[0]) == 2:
        niw2_add_point_at(params, stats, slot, x, i)
    else:
        niw_add_point(params, stats[slot], x[i])


@njit(cache=True)
def niw_remove_point_at(params, stats, slot, x, i):
    """``niw_remove_point(params, stats[slot], x[i])`` without row views (D = 2 in registers).

    Returns True when the downdate was abandoned and the factor recomputed (the fallback).
    """
    if int(params[0]) == 2:
        return niw2_remove_point_at(params, stats, slot, x, i)
    return niw_remove_point(params, stats[slot], x[i])


@njit(cache=True)
def niw_log_marginal(params, stats):
    """Log marginal likelihood (eq. 31) of a statistics row; 0.0 for an empty row."""
    count = stats[0]
    if count == 0.0:
        return 0.0
    dim = np.int64(params[0])  # a cast: numba's int() is a function of its own to compile
    kappa0 = params[1]
    nu0 = params[2]
    kappa = kappa0 + count
    nu = nu0 + count
    offset_factor = 1 + 2 * dim + dim * dim
    log_det_half = 0.0
    sum_lgamma = 0.0
    for d in range(dim):
        log_det_half -= math.log(stats[offset_factor + d * dim + d])
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
    numba_leaves = NumbaLeaves(
        add_point=niw_add_point, remove_point=niw_remove_point,
        log_predictive=niw_log_predictive, log_marginal=niw_log_marginal,
        log_predictive_many=niw_log_predictive_many,
        add_point_at=niw_add_point_at, remove_point_at=niw_remove_point_at,
    )
    #: D = 2 data: leaves without the any-D code (a kernel compiles about half as much).
    numba_leaves_by_dimension = {2: NumbaLeaves(
        add_point=niw2_add_point, remove_point=niw2_remove_point,
        log_predictive=niw2_log_predictive, log_marginal=niw_log_marginal,
        log_predictive_many=niw2_log_predictive_many,
        add_point_at=niw2_add_point_at, remove_point_at=niw2_remove_point_at,
    )}
    history_entries = 1

    def __init__(self, mu0=0.0, kappa0=1.0, nu0=3.0, psi0=1.0):
        super().__init__(mu0=mu0, kappa0=kappa0, nu0=nu0, psi0=psi0)

    def log_marginal_graph(self, graph, hyperparameters, x2d):
        """Eq. 31 per label slot in pytensor (see :meth:`ComponentFamily.log_marginal_graph`)."""
        pt, counts, dim = graph.pt, graph.counts, graph.dim
        mu0 = graph.vector(hyperparameters["mu0"])
        kappa0 = pt.as_tensor_variable(hyperparameters["kappa0"]).astype("float64")
        nu0 = pt.as_tensor_variable(hyperparameters["nu0"]).astype("float64")
        psi0 = graph.matrix(hyperparameters["psi0"])
        # sums of y = x - reference (a fixed point near the data, graph.centred): no
        # cancellation for data far from zero; mu0 is moved by the same reference
        y = graph.centred(x2d)
        sums, outer = graph.cluster_sums(y, y[:, :, None] * y[:, None, :])  # (K, D), (K, D, D)
        kappa_n = kappa0 + counts
        nu_n = nu0 + counts
        mean = sums / counts[:, None]
        scatter = outer - sums[:, :, None] * sums[:, None, :] / counts[:, None, None]
        deviation = mean - (mu0 - graph.reference)[None, :]
        psi_n = (psi0[None] + scatter
                 + (kappa0 * counts / kappa_n)[:, None, None]
                 * deviation[:, :, None] * deviation[:, None, :])
        log_det0 = graph.log_det_stack(psi0[None])[0]
        log_det_n = graph.log_det_stack(psi_n)
        d_index = pt.arange(dim, dtype="float64")
        log_gamma_ratio = pt.sum(
            pt.gammaln(0.5 * (nu_n[:, None] - d_index[None, :]))
            - pt.gammaln(0.5 * (nu0 - d_index))[None, :],
            axis=1,
        )
        per_slot = (
            -0.5 * counts * dim * _LOG_PI
            + 0.5 * dim * (pt.log(kappa0) - pt.log(kappa_n))
            + 0.5 * nu0 * log_det0
            - 0.5 * nu_n * log_det_n
            + log_gamma_ratio
        )
        conditions = [pt.gt(kappa0, 0), pt.gt(nu0, dim - 1), graph.is_finite(log_det0),
                      pt.all(pt.eq(psi0, psi0.T))]
        return per_slot, conditions

    @classmethod
    def from_data(cls, data, variance_fraction=0.1):
        """A prior scaled to the data: the clustering does not depend on the units or location
        of each column.

        With ``m`` the mean of the data (D columns) and ``V`` the diagonal matrix of their
        variances::

            mu0 = m,   nu0 = D + 2,   psi0 = variance_fraction * V,   kappa0 = variance_fraction

        ``nu0 = D + 2`` is the smallest integer degree of freedom with a finite prior mean of
        a cluster's covariance, which is then ``psi0 / (nu0 - D - 1) = variance_fraction * V``
        (Fraley and Raftery 2007 use the same ``nu0``); with ``kappa0 = variance_fraction`` a
        cluster mean has prior covariance ``E[Sigma] / kappa0 = V``, the spread of the data.
        The variances, not the full covariance: the data's correlations come mostly from the
        differences between clusters, and a prior that expects every cluster to be elongated
        along them merges clusters (on standardised Iris, ``psi0`` proportional to the full
        covariance finds two species, the diagonal three).  Unlike scikit-learn's
        ``BayesianGaussianMixture`` defaults (``covariance_prior`` the data's covariance,
        ``kappa0 = 1``), a cluster is expected to cover a fraction of the data, not all of it.
        With D = 1 this is :meth:`NormalInverseGamma.from_data` (``alpha0 = nu0 / 2``,
        ``beta0 = psi0 / 2``).

        Parameters
        ----------
        data : array_like of shape (n, D)
        variance_fraction : float, default 0.1
            Prior mean of a cluster's variance along each column relative to the data's
            variance.  The evidence (``psm.sample_smc`` and ``psm.compare_evidence``) chooses
            between values; see the user guide, "Choosing hyperparameters".

        Returns
        -------
        NormalInverseWishart

        References
        ----------
        Fraley and Raftery (2007), "Bayesian regularization for normal mixture estimation and
        model-based clustering", Journal of Classification 24, 155-181.
        """
        name = f"{cls.__name__}.from_data"
        fraction = _check_fraction(name, variance_fraction)
        mean, covariance = _data_moments(name, data)
        dim = mean.shape[0]
        return cls(mu0=mean, kappa0=fraction, nu0=dim + 2.0,
                   psi0=fraction * np.diag(np.diag(covariance)))

    @classmethod
    def examples(cls, rng):
        """D = 1 (scalar hyperparameters), 2, 3 and 4 (full ones)."""
        out = [("niw-1d", cls(mu0=0.5, kappa0=0.7, nu0=2.5, psi0=1.3),
                rng.normal(1.0, 2.0, size=9))]
        for dim, kappa0, extra in ((2, 0.4, 1.5), (3, 0.5, 1.5), (4, 0.9, 2.0)):
            a = rng.normal(size=(dim, dim))
            psi0 = a @ a.T + dim * np.eye(dim)
            out.append((f"niw-{dim}d", cls(mu0=rng.normal(size=dim), kappa0=kappa0,
                                           nu0=dim + extra, psi0=psi0),
                        rng.normal(size=(9, dim)) @ psi0))
        return out

    def _parameter_shapes(self):
        dim = self._data_dim
        return {"mean": (dim,), "covariance": (dim, dim)}

    def _sample_parameters(self, rng, x2d):
        """``Sigma ~ InvWishart(nu_n, Psi_n)``, ``mu | Sigma ~ N(mu_n, Sigma / kappa_n)`` (eq. 29)."""
        from scipy import stats  # on first use: scipy.stats costs ~0.5 CPU s to import

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
        diagonal = full["chol0"].diagonal()
        log_det = 2.0 * float(np.log(diagonal).sum())
        sum_lgamma0 = float(special.gammaln(0.5 * (full["nu0"] - np.arange(dim))).sum())
        # inverse of the lower factor in numba: a LAPACK call here ran multi-threaded BLAS on
        # a 4 x 4 matrix, milliseconds on a busy machine (at every hyperparameter change);
        # NumPy's Cholesky factor is exactly lower triangular, and so is its inverse.  For
        # D = 2, whose kernels never call the compiled function, its Python body (the same
        # arithmetic, three operations): nothing to compile
        inverse0 = np.array(full["chol0"], dtype=np.float64).reshape(-1)
        (_invert_lower_in_place.py_func if dim == 2 else _invert_lower_in_place)(inverse0, dim)
        inverse0 = inverse0.reshape(dim, dim)
        return np.concatenate(
            [
                [dim, full["kappa0"], full["nu0"], log_det, sum_lgamma0],
                full["mu0"],
                full["psi0"].ravel(),
                (inverse0.T if dim == COLUMN_MAJOR_DIM else inverse0).ravel(),
                0.5 * diagonal ** 2,
                np.zeros(2 * dim),
            ]
        )

    def _pack_empty_stats(self, full, params):
        # the numba reset writes the prior's cached predictive form (same arithmetic as
        # every row emptied by remove_point)
        dim = full["mu0"].shape[0]
        row = np.zeros(5 + 2 * dim + 2 * dim * dim)
        (_niw_two_reset if dim == 2 else _niw_reset)(params, row)
        return row


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
    from scipy import stats  # on first use (see _sample_parameters)

    dim = family._full["mu0"].shape[0]
    _, kappa, nu, mu, psi = _posterior(family, x2d)
    df = nu - dim + 1.0
    shape = psi * (kappa + 1.0) / (kappa * df)
    return float(stats.multivariate_t(loc=mu, shape=shape, df=df).logpdf(np.reshape(x_row, dim)))
