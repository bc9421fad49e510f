"""Per-cluster sums of per-point rows in one compiled loop.

``out[k] = sum over the points i with index[i] == k of rows[i]``, the points added in their
order (the order ``numpy.bincount`` adds its weights in, so the compiled loop and the
reference, one ``bincount`` per column, give the same floating-point sums).  One call
replaces a NumPy call per column: the cluster statistics of a label vector
(:class:`~pymc_splitmerge.distributions.statistics.ClusterStatistics`) are recomputed after
every partition move that a hyperparameter step follows.
"""

from __future__ import annotations

import numpy as np

from pymc_splitmerge.core.jit import njit

__all__ = ["cluster_sums", "cluster_sums_reference"]


@njit(cache=True)
def _cluster_sums(index, rows, n_clusters):
    out = np.zeros((n_clusters, rows.shape[1]))
    for i in range(rows.shape[0]):
        k = index[i]
        if k < 0 or k >= n_clusters:
            raise ValueError("cluster_sums: an index outside [0, n_clusters)")
        for column in range(rows.shape[1]):
            out[k, column] += rows[i, column]
    return out


def _checked(index, rows):
    index = np.ascontiguousarray(index, dtype=np.int64)
    rows = np.ascontiguousarray(rows, dtype=np.float64)
    if rows.ndim != 2 or index.ndim != 1 or rows.shape[0] != index.shape[0]:
        raise ValueError(f"cluster_sums needs an index of shape (n,) and rows of shape (n, m); "
                         f"got {index.shape} and {rows.shape}")
    return index, rows


def cluster_sums(index, rows, n_clusters: int) -> np.ndarray:
    """Sums of ``rows`` (shape (n, m)) by cluster ``index`` (shape (n,), in
    ``[0, n_clusters)``, else ``ValueError``): an array of shape (n_clusters, m), in one
    compiled loop."""
    index, rows = _checked(index, rows)
    return _cluster_sums(index, rows, int(n_clusters))


def cluster_sums_reference(index, rows, n_clusters: int) -> np.ndarray:
    """:func:`cluster_sums` with one ``numpy.bincount`` per column (the plain reference)."""
    index, rows = _checked(index, rows)
    if index.size and (index.min() < 0 or index.max() >= n_clusters):
        raise ValueError("cluster_sums: an index outside [0, n_clusters)")
    out = np.empty((int(n_clusters), rows.shape[1]))
    for column in range(rows.shape[1]):
        out[:, column] = np.bincount(index, weights=rows[:, column], minlength=int(n_clusters))
    return out
