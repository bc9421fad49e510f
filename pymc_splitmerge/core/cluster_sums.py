"""The clusters of a label vector and per-cluster sums of per-point rows, each in one
compiled loop.

:func:`cluster_index` finds the non-empty clusters of integer labels (whether they lie in
range, the cluster sizes in increasing label order, each point's cluster), what
:class:`~pymc_splitmerge.distributions.statistics.ClusterStatistics` needs, in one pass
instead of a NumPy call per step (:func:`cluster_index_reference`).  Then :func:`cluster_sums`, with that index:

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

__all__ = ["cluster_index", "cluster_index_reference", "cluster_sums", "cluster_sums_reference"]


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


@njit(cache=True)
def _cluster_index(labels, n_labels):
    n = labels.shape[0]
    in_range = True
    counts = np.zeros(n_labels, dtype=np.int64)
    safe = np.empty(n, dtype=np.int64)
    for i in range(n):
        label = np.int64(labels[i])
        if label < 0 or label >= n_labels:
            in_range = False
            label = min(max(label, 0), n_labels - 1)
        safe[i] = label
        counts[label] += 1
    compact = np.empty(n_labels, dtype=np.int64)
    n_clusters = 0
    for label in range(n_labels):
        if counts[label] > 0:
            compact[label] = n_clusters
            n_clusters += 1
    sizes = np.empty(n_clusters)
    for label in range(n_labels):
        if counts[label] > 0:
            sizes[compact[label]] = counts[label]
    index = np.empty(n, dtype=np.int64)
    for i in range(n):
        index[i] = compact[safe[i]]
    return in_range, sizes, index


def cluster_index(labels, n_labels: int) -> tuple[bool, np.ndarray, np.ndarray]:
    """The non-empty clusters of integer ``labels`` (shape (n,)) in one compiled pass.

    Returns ``(in_range, sizes, index)``: whether every label lies in ``[0, n_labels)``; the
    sizes (float64, shape (K,)) of the K non-empty clusters in increasing label order, the
    labels clipped to that range; and each point's cluster in ``[0, K)`` (int64, shape (n,)),
    the ``index`` :func:`cluster_sums` takes.
    """
    labels = np.ascontiguousarray(labels)
    if labels.ndim != 1 or labels.dtype.kind not in "iu":
        raise ValueError(f"cluster_index needs integer labels of shape (n,); got "
                         f"{labels.dtype} {labels.shape}")
    if int(n_labels) < 1 and labels.size:
        raise ValueError(f"cluster_index needs n_labels >= 1; got {n_labels}")
    in_range, sizes, index = _cluster_index(labels, int(n_labels))
    return bool(in_range), sizes, index


def cluster_index_reference(labels, n_labels: int) -> tuple[bool, np.ndarray, np.ndarray]:
    """:func:`cluster_index` in NumPy (the plain reference)."""
    labels = np.asarray(labels)
    in_range = bool(np.all((labels >= 0) & (labels < n_labels))) if labels.size else True
    safe = np.clip(labels, 0, n_labels - 1).astype(np.int64)
    counts = np.bincount(safe, minlength=n_labels)
    occupied = np.flatnonzero(counts)
    compact = np.empty(n_labels, dtype=np.int64)
    compact[occupied] = np.arange(occupied.size)
    return in_range, counts[occupied].astype(np.float64), compact[safe]


def cluster_sums_reference(index, rows, n_clusters: int) -> np.ndarray:
    """:func:`cluster_sums` with one ``numpy.bincount`` per column (the plain reference)."""
    index, rows = _checked(index, rows)
    if index.size and (index.min() < 0 or index.max() >= n_clusters):
        raise ValueError("cluster_sums: an index outside [0, n_clusters)")
    out = np.empty((int(n_clusters), rows.shape[1]))
    for column in range(rows.shape[1]):
        out[:, column] = np.bincount(index, weights=rows[:, column], minlength=int(n_clusters))
    return out
