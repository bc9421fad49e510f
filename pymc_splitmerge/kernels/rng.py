"""Seeding numba's internal random state from an explicit ``np.random.Generator``.

numba-compiled code draws from its own (per-thread) Mersenne-Twister state, separate from
NumPy's global state.  Kernels keep the contract "explicit Generator everywhere" by drawing a
fresh seed from the caller's Generator at every kernel call and seeding numba's state with it
*inside* an ``@njit`` function, which touches numba's state only (never NumPy's global one).
The same Generator therefore gives the same kernel output.
"""

from __future__ import annotations

import numpy as np

from pymc_splitmerge.core.jit import compiled_only, njit

__all__ = ["numba_seed_from", "order_of_uniforms", "seed_numba", "seed_numba_from",
           "uniform_rank"]

# Bit generators whose ``random_raw()`` is the 64-bit word ``Generator.integers`` consumes.
# For them ``Generator.integers(2**63)`` is ``random_raw() >> 1`` (Lemire's bounded draw with
# the range 2**63 never rejects and keeps the high 63 bits of the 64-bit word), which costs
# ~0.3 us instead of ~1.3-2.5 us (tested against ``integers`` for each of them).
_RAW_64_BIT = (np.random.PCG64, np.random.PCG64DXSM, np.random.SFC64, np.random.Philox)


@njit(cache=True)
def seed_numba(seed):
    """Seed numba's internal random state (``np.random.*`` inside njit code).

    Parameters
    ----------
    seed : int
        Seed in ``[0, 2**32)`` (numba's Mersenne Twister takes a 32-bit seed).
    """
    np.random.seed(seed)


def _draw_seed(rng: np.random.Generator) -> tuple[int, int]:
    """``int(rng.integers(2**63))`` (through ``random_raw`` where that is the same draw) and
    its fold to the unsigned 32-bit integer numba's ``np.random.seed`` takes."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator; got {type(rng).__name__}")
    bit_generator = rng.bit_generator
    if type(bit_generator) in _RAW_64_BIT:
        seed = bit_generator.random_raw() >> 1
    else:
        seed = int(rng.integers(2**63))
    return seed, (seed ^ (seed >> 32)) & 0xFFFFFFFF


def numba_seed_from(rng: np.random.Generator) -> int:
    """The 32-bit seed :func:`seed_numba_from` would give numba, without seeding it.

    For kernels that seed numba inside their own ``@njit`` entry (``np.random.seed(seed)``
    there), which saves the separate numba call of :func:`seed_numba_from` with the same
    stream.  Advances ``rng`` by one draw exactly as :func:`seed_numba_from` does.
    """
    return _draw_seed(rng)[1]


def seed_numba_from(rng: np.random.Generator) -> int:
    """Draw a seed from ``rng`` and seed numba's internal random state with it.

    Parameters
    ----------
    rng : numpy.random.Generator
        The caller's explicit generator (advanced by one draw).

    Returns
    -------
    int
        The seed used (for logging / reproducibility checks).
    """
    seed, folded = _draw_seed(rng)
    seed_numba(folded)
    return seed


@njit(cache=True, inline="always")
def uniform_rank(uniform, count):
    """``min(int(uniform * count), count - 1)``: the bin of a draw in ``[0, 1)`` among
    ``count >= 1`` equal bins (``uniform * count`` may round up to ``count``).

    Written with a cast and a comparison: numba compiles its ``int()`` and ``min()``
    implementations as functions of their own (two more functions in a first run)."""
    rank = np.int64(uniform * count)
    return rank if rank < count - 1 else count - 1  # noqa: FURB136 (no min(): see above)


@compiled_only(cache=True)
def order_of_uniforms(uniforms, size):
    """``np.argsort(uniforms[:size], kind="stable")`` for values in ``[0, 1)``: the indices
    in increasing order of their values (equal values in index order).

    Of i.i.d. uniforms this is a uniformly random permutation (the allocation orders of the
    split-merge kernels).  A bucket sort: each value goes to bucket ``floor(value * size)``
    (a non-decreasing map, clamped to the last bucket), the buckets are laid out by a
    counting sort that keeps index order, then an insertion sort orders each bucket (about
    one value per bucket: O(size) expected).  The same indices as any stable sort, and a
    few loops for numba to compile where its ``argsort`` compiles a generic merge sort
    (about 0.8 s of a first run).

    Parameters
    ----------
    uniforms : ndarray of float64, shape (>= size,)
        Values in ``[0, 1)``.
    size : int

    Returns
    -------
    ndarray of int64, shape (size,)
    """
    permutation = np.empty(size, dtype=np.int64)
    starts = np.empty(size + 1, dtype=np.int64)  # zeroed here: np.zeros compiles 3 functions
    for bucket in range(size + 1):
        starts[bucket] = 0
    for t in range(size):
        starts[uniform_rank(uniforms[t], size) + 1] += 1
    for bucket in range(size):
        starts[bucket + 1] += starts[bucket]
    for t in range(size):
        bucket = uniform_rank(uniforms[t], size)
        permutation[starts[bucket]] = t
        starts[bucket] += 1
    for t in range(1, size):
        index = permutation[t]
        value = uniforms[index]
        position = t
        while position > 0 and uniforms[permutation[position - 1]] > value:
            permutation[position] = permutation[position - 1]
            position -= 1
        permutation[position] = index
    return permutation
