"""An argsort for the kernels' random orders, written as plain loops.

``np.argsort`` inside an ``@njit`` kernel compiles numba's quicksort (its recursive driver,
partition and insertion-sort pieces, a second or more of a first run's compilation per
kernel that uses it).  The kernels sort only uniform draws, to turn them into a uniformly
random order: a bottom-up merge sort of indices is a few dozen lines of loops, compiles in a
fraction of that, and gives the same permutation as ``np.argsort`` whenever the keys are
distinct (the one permutation that sorts them; tied keys keep their index order, as
``np.argsort(kind="stable")``).  Its plain reference is ``np.argsort(keys[:count],
kind="stable")`` (``tests/test_ordering.py``).
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["argsort_prefix"]


@numba.njit(cache=True)
def argsort_prefix(keys, count):
    """Indices that sort ``keys[:count]`` in increasing order (stable).

    Bottom-up merge sort: O(count log count) comparisons, two index arrays.

    Parameters
    ----------
    keys : ndarray of float64, shape (>= count,)
        No NaN (the kernels pass uniform draws).
    count : int

    Returns
    -------
    ndarray of int64, shape (count,)
        A permutation ``p`` of ``0 .. count - 1`` with ``keys[p]`` non-decreasing and ties
        in increasing index order.
    """
    order = np.empty(count, dtype=np.int64)
    merged = np.empty(count, dtype=np.int64)
    for t in range(count):
        order[t] = t
    width = 1
    while width < count:
        start = 0
        while start < count:
            middle = min(start + width, count)
            end = min(start + 2 * width, count)
            a = start
            b = middle
            out = start
            while a < middle and b < end:
                if keys[order[b]] < keys[order[a]]:
                    merged[out] = order[b]
                    b += 1
                else:
                    merged[out] = order[a]
                    a += 1
                out += 1
            while a < middle:
                merged[out] = order[a]
                a += 1
                out += 1
            while b < end:
                merged[out] = order[b]
                b += 1
                out += 1
            start = end
        order, merged = merged, order
        width *= 2
    return order
