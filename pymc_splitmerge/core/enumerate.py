"""Enumeration of all set partitions of a small number of points.

A set partition of ``n`` points is stored as its *restricted-growth string*: canonical labels
``c[0] = 0`` and ``c[i] <= 1 + max(c[:i])`` (labels in order of first appearance).  The
partitions of ``n`` points are built from those of ``n - 1`` by appending every admissible
label; rows come out in lexicographic order, so the base-``n`` code of a row
(:func:`pymc_splitmerge.core.relabel.partition_index`) is increasing along the enumeration.

The number of rows is the Bell number: 1, 1, 2, 5, 15, 52, 203, 877, 4140, 21147, 115975.

References
----------
.. [1] Knuth, D. E. (2011). The Art of Computer Programming, Vol. 4A, Section 7.2.1.5
   (restricted growth strings).
"""

from __future__ import annotations

import functools
import numbers

import numpy as np

__all__ = ["MAX_ENUMERATION_POINTS", "bell_number", "enumerate_partitions"]

MAX_ENUMERATION_POINTS = 10


def _validate_n(n) -> int:
    if isinstance(n, bool | np.bool_) or not isinstance(n, numbers.Integral):
        raise TypeError(f"n (number of points) must be an integer, got {type(n).__name__}")
    n = int(n)
    if not 0 <= n <= MAX_ENUMERATION_POINTS:
        raise ValueError(
            f"n (number of points) must be between 0 and {MAX_ENUMERATION_POINTS} for "
            f"enumeration (Bell({MAX_ENUMERATION_POINTS}) = 115975 partitions), got {n}"
        )
    return n


@functools.cache
def _enumerate(n: int) -> np.ndarray:
    if n == 0:
        result = np.zeros((1, 0), dtype=np.int64)
    else:
        rows = np.zeros((1, 1), dtype=np.int64)
        maxima = np.zeros(1, dtype=np.int64)
        for _ in range(1, n):
            choices = maxima + 2  # labels 0..max+1
            parent = np.repeat(np.arange(len(rows)), choices)
            offsets = np.arange(len(parent)) - np.repeat(np.cumsum(choices) - choices, choices)
            rows = np.concatenate([rows[parent], offsets[:, None]], axis=1)
            maxima = np.maximum(maxima[parent], offsets)
        result = rows
    result.setflags(write=False)
    return result


def enumerate_partitions(n: int) -> np.ndarray:
    """All set partitions of ``n`` points as canonical label rows.

    Parameters
    ----------
    n : int
        Number of points, ``0 <= n <= 10``.

    Returns
    -------
    ndarray of int64, shape (bell_number(n), n)
        Restricted-growth strings in lexicographic order (read-only, cached).
    """
    return _enumerate(_validate_n(n))


def bell_number(n: int) -> int:
    """Number of set partitions of ``n`` points (``n <= 10``), via the enumeration."""
    return int(enumerate_partitions(n).shape[0])
