"""Canonical relabelling of cluster labels and related helpers.

Canonical labels number clusters by order of first appearance, ``0..K-1``; two label vectors
describe the same set partition if and only if their canonical forms are equal.

The fast path is a numba loop (:func:`_canonical_rows_numba`); :func:`canonical_labels_reference`
is a plain numpy implementation the tests compare it against.
"""

from __future__ import annotations

import numpy as np

from pymc_splitmerge.core.enumerate import enumerate_partitions
from pymc_splitmerge.core.jit import njit

__all__ = [
    "canonical_labels",
    "canonical_labels_reference",
    "check_labels",
    "cluster_sizes",
    "is_canonical",
    "partition_index",
]


def check_labels(labels, what: str = "labels", *, allow_negative: bool = True) -> np.ndarray:
    """Validate integer cluster labels; the one label validator of the package.

    Parameters
    ----------
    labels : array_like of int, any shape
        Cluster labels; integer-valued floats and booleans are converted.  An
        ``xarray.DataArray`` is accepted (its values are used).
    what : str, default "labels"
        Name used in error messages.
    allow_negative : bool, default True
        Whether negative labels are allowed (they are for relabelling; the analysis functions,
        which read traces, reject them).

    Returns
    -------
    ndarray of int64, same shape as ``labels``
        The labels themselves, except unsigned labels beyond the int64 range, which are
        replaced by their ranks among the distinct values (the same partition).

    Raises
    ------
    ValueError
        If ``labels`` is ragged, or holds negative labels while ``allow_negative`` is False.
    TypeError
        If ``labels`` is not integer-valued.
    """
    try:
        array = np.asarray(labels)
    except ValueError as error:  # ragged nested lists on recent numpy
        raise ValueError(
            f"{what} is ragged (rows of different lengths); every partition must label the "
            "same n observations"
        ) from error
    if array.dtype == object:
        raise ValueError(
            f"{what} is ragged or not numeric (object array); pass a rectangular integer array"
        )
    kind = array.dtype.kind
    if kind == "f":
        if not np.all(np.isfinite(array)) or np.any(array != np.round(array)):
            raise TypeError(f"{what} must hold integer cluster labels, got non-integer floats")
    elif kind not in "iub" and array.size:
        raise TypeError(f"{what} must hold integer cluster labels, got dtype {array.dtype}")
    if not allow_negative and array.size and array.min() < 0:
        raise ValueError(f"{what} holds negative labels; cluster labels must be >= 0")
    if kind == "u" and array.size and array.max() > np.iinfo(np.int64).max:
        # unsigned labels beyond the int64 range: replace each distinct value by its rank,
        # which keeps which observations share a label (all that a partition is)
        _, inverse = np.unique(array, return_inverse=True)
        return inverse.reshape(array.shape).astype(np.int64)
    return array.astype(np.int64, copy=False)


def _as_label_rows(labels) -> np.ndarray:
    array = check_labels(labels)
    if array.ndim not in (1, 2):
        raise ValueError(
            f"labels must be 1-D (n,) or 2-D (num_samples, n), got shape {array.shape}"
        )
    return array


@njit(cache=True)
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
    array = _as_label_rows(labels)
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
    array = _as_label_rows(labels)
    rows = array.reshape(-1, array.shape[-1]) if array.size else array.reshape(0, 0)
    out = np.empty_like(rows)
    for r, row in enumerate(rows):
        _, first_index, inverse = np.unique(row, return_index=True, return_inverse=True)
        rank = np.empty(len(first_index), dtype=np.int64)
        rank[np.argsort(first_index)] = np.arange(len(first_index))
        out[r] = rank[inverse.reshape(-1)]
    return out.reshape(array.shape)


def is_canonical(labels) -> bool:
    """Whether every row (last axis) of ``labels`` is canonical.

    A row is canonical when its first label is 0 and each label is at most one more than the
    largest label before it (the image of :func:`canonical_labels`).  Non-integer arrays and
    empty rows are not canonical.
    """
    array = np.asarray(labels)
    if array.ndim == 0 or array.shape[-1] == 0:
        return False
    if not np.issubdtype(array.dtype, np.integer):
        return False
    if np.any(array[..., 0] != 0):
        return False
    running_max = np.maximum.accumulate(array, axis=-1)
    return bool(np.all(array[..., 1:] <= running_max[..., :-1] + 1))


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
    array = _as_label_rows(labels2d)
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
    array = _as_label_rows(labels)
    canonical = canonical_labels(array)
    if array.ndim == 1:
        return np.bincount(canonical, minlength=0).astype(np.int64)
    num_rows, n = canonical.shape
    sizes = np.zeros((num_rows, max(n, 1)), dtype=np.int64)
    np.add.at(sizes, (np.repeat(np.arange(num_rows), n), canonical.reshape(-1)), 1)
    return sizes[:, :n] if n else sizes[:, :0]
