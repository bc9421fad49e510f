"""Small dense linear algebra in numba: stacks of tiny matrices without BLAS / LAPACK calls.

A stack of K small (D x D, D of a few units) symmetric positive-definite matrices is
factorised in one compiled loop: no per-matrix Python or LAPACK call and no multi-threaded
BLAS (whose threads, on a small busy machine, can turn a 4 x 4 factorisation into
milliseconds).  ``numpy.linalg.cholesky`` is the reference the tests compare with.
"""

from __future__ import annotations

import math

import numpy as np

from pymc_splitmerge.core.jit import njit

__all__ = ["log_det_spd_stack", "log_det_spd_stack_compiled"]


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
