"""Slot bookkeeping of the partition state: which cluster slots are in use (family-agnostic).

A partition of ``n`` points is stored in *slots*: a slot is a cluster id in ``[0, capacity)``
with ``capacity = n + 2`` (at most ``n`` clusters, plus room for the temporary clusters a
split proposal needs).  The slots in use are kept in a dense list ``active[0:K]`` with
back-pointers ``where``, so that opening and closing a cluster is O(1) and a loop over the
existing clusters touches only those.

This module holds the three operations on that list, which know nothing about component
families.  The rest of the state (labels, cluster sizes, the family's sufficient-statistics
rows) and the moves of a point (``assign_point``, ``unassign_point``, ``move_point``, which
call the functions here when a cluster opens or empties) are in
:mod:`pymc_splitmerge.kernels.state`; ``docs/contracts.md`` section 3 documents the whole
layout.  The arrays read here are::

    active         int64 (capacity,)   active[0:cluster_count[0]] are the slots in use
    where          int64 (capacity,)   position of a slot in ``active``, -1 for a free slot
    cluster_count  int64 (1,)          cluster_count[0] = number of clusters K (an array so
                                       that numba functions update it in place)
    stats          float64 (capacity, s)  sufficient statistics; free slots hold ``empty_row``

Every function mutates its array arguments in place (for speed).
"""

from __future__ import annotations

from pymc_splitmerge.core.jit import compiled_only, njit

__all__ = ["close_slot", "free_slot", "open_slot", "reset_row"]


@njit(cache=True, inline="always")
def free_slot(where):
    """Return the lowest-numbered free slot (``where[slot] == -1``), or -1 if none is free.

    O(capacity) in the worst case but, since a free slot is found early in practice
    (closing a cluster frees its slot), this is cheap compared with a sweep.
    """
    for slot in range(where.shape[0]):
        if where[slot] < 0:
            return slot
    return -1


@njit(cache=True, inline="always")
def open_slot(slot, active, where, cluster_count):
    """Append the free ``slot`` to the active list (an empty cluster; in place)."""
    k = cluster_count[0]
    active[k] = slot
    where[slot] = k
    cluster_count[0] = k + 1


@njit(cache=True, inline="always")
def close_slot(slot, stats, empty_row, active, where, cluster_count):
    """Remove the (now empty) cluster ``slot`` from the active list and reset its statistics
    row to ``empty_row`` (in place).  The last active slot takes its position in ``active``,
    so the order of ``active`` is not preserved."""
    position = where[slot]
    last = cluster_count[0] - 1
    moved = active[last]
    active[position] = moved
    where[moved] = position
    where[slot] = -1
    cluster_count[0] = last
    reset_row(stats, slot, empty_row)


@compiled_only(cache=True)
def check_row_width(stats, row):
    """Raise ``ValueError`` unless ``row`` has one entry per column of ``stats``.

    A compiled function of its own, called by the inlined :func:`reset_row`: a ``raise``
    written in an inlined function is an exit of the kernel it is inlined into, where numba
    releases every array the kernel holds (about 40 in the SAMS kernel), code that a call's
    error path does not need.
    """
    if row.shape[0] != stats.shape[1]:
        raise ValueError("empty_row must have one entry per column of stats")


@njit(cache=True, inline="always")
def reset_row(stats, slot, empty_row):
    """``stats[slot, :] = empty_row`` as a loop (in place).

    Numba's slice assignment compiles a shape-mismatch message built with its string
    machinery (f-strings, ``str``, ``join``): seconds of compilation in every kernel that
    contains one, for a message this loop replaces with a fixed one
    (:func:`check_row_width`).
    """
    check_row_width(stats, empty_row)
    for j in range(empty_row.shape[0]):
        stats[slot, j] = empty_row[j]


