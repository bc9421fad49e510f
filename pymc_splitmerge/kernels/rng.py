"""Seeding numba's internal random state from an explicit ``np.random.Generator``.

numba-compiled code draws from its own (per-thread) Mersenne-Twister state, separate from
NumPy's global state.  Kernels keep the contract "explicit Generator everywhere" by drawing a
fresh seed from the caller's Generator at every kernel call and seeding numba's state with it
*inside* an ``@njit`` function, which touches numba's state only (never NumPy's global one).
The same Generator therefore gives the same kernel output.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["seed_numba", "seed_numba_from"]


@numba.njit(cache=True)
def seed_numba(seed):
    """Seed numba's internal random state (``np.random.*`` inside njit code).

    Parameters
    ----------
    seed : int
        Seed in ``[0, 2**32)`` (numba's Mersenne Twister takes a 32-bit seed).
    """
    np.random.seed(seed)


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
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator; got {type(rng).__name__}")
    seed = int(rng.integers(2**63))
    # numba's np.random.seed takes an unsigned 32-bit integer: fold the 63-bit draw.
    seed_numba((seed ^ (seed >> 32)) & 0xFFFFFFFF)
    return seed
