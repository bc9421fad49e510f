"""Small dense linear algebra in numba: stacks of tiny matrices without BLAS / LAPACK calls.

A stack of K small (D x D, D of a few units) symmetric positive-definite matrices is
factorised in one compiled loop: no per-matrix Python or LAPACK call and no multi-threaded
BLAS (whose threads, on a small busy machine, can turn a 4 x 4 factorisation into
milliseconds).  ``numpy.linalg.cholesky`` and ``numpy.linalg.inv`` are the references the
tests compare with.
"""

from __future__ import annotations

import math

import numpy as np

from pymc_splitmerge.core.jit import njit

__all__ = ["inverse_stack", "inverse_stack_compiled", "log_det_spd_stack",
           "log_det_spd_stack_compiled"]


@njit(cache=True)
def _log_det_spd_stack(matrices, out):
    n_matrices, dim = matrices.shape[0], matrices.shape[1]
    factor = np.empty((dim, dim))
    for m in range(n_matrices):
        log_det = 0.0
        for j in range(dim):
            total = matrices[m, j, j]
            for k in range(j):
                total -= factor[j, k] * factor[j, k]
            if not total > 0.0:  # not positive definite (or NaN)
                log_det = np.nan
                break
            diag = math.sqrt(total)
            factor[j, j] = diag
            log_det += 2.0 * math.log(diag)
            for i in range(j + 1, dim):
                total = matrices[m, i, j]
                for k in range(j):
                    total -= factor[i, k] * factor[j, k]
                factor[i, j] = total / diag
        out[m] = log_det


def log_det_spd_stack(matrices) -> np.ndarray:
    """``log|A_k|`` of a stack of shape (K, D, D) of symmetric positive-definite matrices.

    Only the lower triangle is read (as ``numpy.linalg.cholesky`` does); NaN where a matrix is
    not positive definite.  Returns an array of shape (K,).
    """
    matrices = np.ascontiguousarray(matrices, dtype=np.float64)
    if matrices.ndim != 3 or matrices.shape[1] != matrices.shape[2]:
        raise ValueError(f"log_det_spd_stack needs square matrices (K, D, D); got shape "
                         f"{matrices.shape}")
    out = np.empty(matrices.shape[0])
    _log_det_spd_stack(matrices, out)
    return out


@njit(cache=True)
def log_det_spd_stack_compiled(matrices):
    """:func:`log_det_spd_stack` as a numba function (callable from other compiled code, e.g.
    PyTensor's numba backend): a new array of shape (K,), NaN where not positive definite."""
    if matrices.shape[1] != matrices.shape[2]:
        raise ValueError("log_det_spd_stack needs square matrices")
    out = np.empty(matrices.shape[0])
    _log_det_spd_stack(matrices, out)
    return out


@njit(cache=True)
def _inverse_stack(matrices, out):
    """Gauss-Jordan elimination with partial pivoting, matrix by matrix; returns False (and
    leaves ``out`` partly written) when a pivot is zero or NaN (a singular matrix)."""
    n_matrices, dim = matrices.shape[0], matrices.shape[1]
    work = np.empty((dim, dim))
    for m in range(n_matrices):
        for i in range(dim):
            for j in range(dim):
                work[i, j] = matrices[m, i, j]
                out[m, i, j] = 1.0 if i == j else 0.0
        for col in range(dim):
            pivot_row = col
            best = abs(work[col, col])
            for row in range(col + 1, dim):
                if abs(work[row, col]) > best:
                    best = abs(work[row, col])
                    pivot_row = row
            if not best > 0.0:  # singular (or NaN)
                return False
            if pivot_row != col:
                for j in range(dim):
                    work[col, j], work[pivot_row, j] = work[pivot_row, j], work[col, j]
                    out[m, col, j], out[m, pivot_row, j] = out[m, pivot_row, j], out[m, col, j]
            pivot = work[col, col]
            for j in range(dim):
                work[col, j] /= pivot
                out[m, col, j] /= pivot
            for row in range(dim):
                if row != col:
                    factor = work[row, col]
                    if factor != 0.0:
                        for j in range(dim):
                            work[row, j] -= factor * work[col, j]
                            out[m, row, j] -= factor * out[m, col, j]
    return True


def inverse_stack(matrices) -> np.ndarray:
    """Inverses of a stack of shape (K, D, D) of square matrices.

    Every entry is NaN when one matrix of the stack is singular (a zero or NaN pivot), as
    ``numpy.linalg.inv`` raising for the stack gives in ``BatchedInverse.perform``.  Returns
    a new array of shape (K, D, D).
    """
    matrices = np.asarray(matrices, dtype=np.float64)
    if matrices.ndim != 3 or matrices.shape[1] != matrices.shape[2]:
        raise ValueError(f"inverse_stack needs square matrices (K, D, D); got shape "
                         f"{matrices.shape}")
    return inverse_stack_compiled(matrices)


@njit(cache=True)
def inverse_stack_compiled(matrices):
    """:func:`inverse_stack` as a numba function (callable from other compiled code, e.g.
    PyTensor's numba backend): a new array of shape (K, D, D), all NaN if one is singular."""
    if matrices.shape[1] != matrices.shape[2]:
        raise ValueError("inverse_stack needs square matrices")
    out = np.empty(matrices.shape)
    if not _inverse_stack(matrices, out):
        out[:] = np.nan
    return out
