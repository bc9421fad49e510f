"""Slot bookkeeping of the partition state (family-agnostic).

The state itself, with the sufficient-statistics updates, is in
``pymc_splitmerge.kernels.state``; this module holds the parts that know nothing
about component families.

Partition state shared by every kernel.

A partition of ``n`` points is stored in *slots*: a slot is a cluster id in
``[0, capacity)`` with ``capacity = n + 2`` (at most ``n`` clusters, plus room for
the temporary clusters a split proposal needs).  Per slot the state keeps the
cluster size and the component family's sufficient-statistics row, updated
incrementally when a point moves (``components.dispatch.add_point`` /
``remove_point``).  The active slots are kept in a dense list ``active[0:K]``
with back-pointers ``where`` so that opening and closing a cluster, and looping
over the existing clusters, are O(1) per cluster.

All mutation goes through the ``@njit`` functions of this module; kernels never
re-implement the add/remove of a point.  The state is mutated in place (for
speed) and documented as such.

Array layout (see ``docs/contracts.md`` section 3)::

    labels  int64 (n,)          slot of each point
    sizes   int64 (cap,)        0 for free slots
    stats   float64 (cap, s)    sufficient statistics; free slots hold ``empty_row``
    active  int64 (cap,)        active[0:meta[0]] are the slots in use
    where   int64 (cap,)        position of a slot in ``active`` or -1
    meta    int64 (1,)          meta[0] = number of clusters K
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["free_slot", "open_slot", "close_slot"]


@numba.njit(cache=True)
def free_slot(where):
    """Return the lowest-numbered free slot (``where[slot] == -1``).

    O(capacity) in the worst case but, since a free slot is found early in practice
    (closing a cluster frees its slot), this is cheap compared with a sweep.
    """
    for slot in range(where.shape[0]):
        if where[slot] < 0:
            return slot
    return -1


@numba.njit(cache=True)
def open_slot(slot, active, where, meta):
    """Mark the free ``slot`` as an active, empty cluster."""
    k = meta[0]
    active[k] = slot
    where[slot] = k
    meta[0] = k + 1


@numba.njit(cache=True)
def close_slot(slot, stats, empty_row, active, where, meta):
    """Remove the (now empty) cluster ``slot`` from the active list and reset its row."""
    position = where[slot]
    last = meta[0] - 1
    moved = active[last]
    active[position] = moved
    where[moved] = position
    where[slot] = -1
    meta[0] = last
    stats[slot, :] = empty_row


