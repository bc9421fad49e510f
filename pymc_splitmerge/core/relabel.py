"""Canonical relabelling of cluster labels and related helpers.

Canonical labels number clusters by order of first appearance, ``0..K-1``; two label vectors
describe the same set partition if and only if their canonical forms are equal.

The fast path is a numba loop (:func:`_canonical_rows_numba`); :func:`canonical_labels_reference`
is a plain numpy implementation the tests compare it against.
"""

from __future__ import annotations

import numba
import numpy as np

from pymc_splitmerge.core.enumerate import enumerate_partitions

__all__ = [
    "canonical_labels",
    "canonical_labels_reference",
    "partition_index",
    "cluster_sizes",
]


def _as_label_array(labels) -> np.ndarray:
    array = np.asarray(labels)
    if array.dtype.kind not in "iu":
        if array.dtype.kind == "f" and np.all(np.isfinite(array)) and np.all(
            array == np.round(array)
        ):
            array = array.astype(np.int64)
        elif array.size == 0:
            array = array.astype(np.int64)
        else:
            raise TypeError(f"labels must be integers, got dtype {array.dtype}")
    if array.ndim not in (1, 2):
        raise ValueError(
            f"labels must be 1-D (n,) or 2-D (num_samples, n), got shape {array.shape}"
        )
    return array.astype(np.int64, copy=False)


@numba.njit(cache=True)
def _canonical_rows_numba(dense: np.ndarray, num_values: int) -> np.ndarray:
    num_rows, n = dense.shape
    out = np.empty((num_rows, n), dtype=np.int64)
    mapping = np.full(num_values, -1, dtype=np.int64)
    for r in range(num_rows):
        next_label = 0
        for i in range(n):
            value = dense[r, i]
            if mapping[value] < 0:
                mapping[value] = next_label
                next_label += 1
            out[r, i] = mapping[value]
        for i in range(n):  # reset only the touched entries
            mapping[dense[r, i]] = -1
    return out


def canonical_labels(labels) -> np.ndarray:
    """Relabel clusters by order of first appearance (``0..K-1``).

    Parameters
    ----------
    labels : array of int, shape (n,) or (num_samples, n)
        Arbitrary integer labels (row-wise for 2-D input).

    Returns
    -------
    ndarray of int64, same shape as ``labels``
    """
    array = _as_label_array(labels)
    if array.size == 0:
        return array.copy()
    low, high = array.min(), array.max()
    if low >= 0 and high < 4 * array.shape[-1] + 64:
        dense, num_values = array, int(high) + 1
    else:
        values, inverse = np.unique(array, return_inverse=True)
        dense, num_values = inverse.reshape(array.shape).astype(np.int64), len(values)
    out = _canonical_rows_numba(np.ascontiguousarray(dense.reshape(-1, array.shape[-1])),
                                num_values)
    return out.reshape(array.shape)


def canonical_labels_reference(labels) -> np.ndarray:
    """Plain numpy reference of :func:`canonical_labels` (row by row)."""
    array = _as_label_array(labels)
    rows = array.reshape(-1, array.shape[-1]) if array.size else array.reshape(0, 0)
    out = np.empty_like(rows)
    for r, row in enumerate(rows):
        _, first_index, inverse = np.unique(row, return_index=True, return_inverse=True)
        rank = np.empty(len(first_index), dtype=np.int64)
        rank[np.argsort(first_index)] = np.arange(len(first_index))
        out[r] = rank[inverse.reshape(-1)]
    return out.reshape(array.shape)


def _codes(canonical: np.ndarray, n: int) -> np.ndarray:
    base = max(n, 2)
    weights = base ** np.arange(n - 1, -1, -1, dtype=np.int64)
    return canonical @ weights


def partition_index(labels2d, n: int | None = None) -> np.ndarray:
    """Row index of each partition in :func:`enumerate_partitions` ``(n)``.

    Parameters
    ----------
    labels2d : array of int, shape (num_samples, n) or (n,)
        Label rows; they are canonicalised first, so any labelling is accepted.
    n : int, optional
        Number of points (checked against the number of columns).

    Returns
    -------
    ndarray of int64, shape (num_samples,) (or a scalar array for 1-D input)
    """
    array = _as_label_array(labels2d)
    columns = array.shape[-1]
    if n is not None and n != columns:
        raise ValueError(f"labels have {columns} columns but n = {n}")
    canonical = canonical_labels(array).reshape(-1, columns)
    partitions = enumerate_partitions(columns)
    index = np.searchsorted(_codes(partitions, columns), _codes(canonical, columns))
    return index.reshape(array.shape[:-1])


def cluster_sizes(labels) -> np.ndarray:
    """Cluster sizes in canonical order (order of first appearance).

    Parameters
    ----------
    labels : array of int, shape (n,) or (num_samples, n)

    Returns
    -------
    ndarray of int64
        Shape (K,) for 1-D input; shape (num_samples, n) for 2-D input, row ``r`` holding the
        sizes of its clusters followed by zeros.
    """
    array = _as_label_array(labels)
    canonical = canonical_labels(array)
    if array.ndim == 1:
        return np.bincount(canonical, minlength=0).astype(np.int64)
    num_rows, n = canonical.shape
    sizes = np.zeros((num_rows, max(n, 1)), dtype=np.int64)
    np.add.at(sizes, (np.repeat(np.arange(num_rows), n), canonical.reshape(-1)), 1)
    return sizes[:, :n] if n else sizes[:, :0]
