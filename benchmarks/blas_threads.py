"""BLAS/OpenMP threads of the benchmarks that measure CPU time (``time.process_time``).

The idle worker threads of a multi-threaded OpenBLAS spin after each call, and that spinning
counts as CPU time of the process: it tripled sklearn's fit time in ``scale.py --vi`` and
inflated whatever we timed after a BLAS call (``docs/benchmarks.md``, "BLAS threads").  This module imports nothing heavy, so a script can call
:func:`limit_blas_threads` before numpy loads.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def limit_blas_threads(env: MutableMapping[str, str] = os.environ, threads: int = 1, *,
                       override: bool = False) -> None:
    """Set the thread variables of ``env`` to ``threads`` (only where unset, unless
    ``override``): ``os.environ`` before numpy loads, or a subprocess's environment."""
    for name in BLAS_THREAD_VARIABLES:
        if override:
            env[name] = str(threads)
        else:
            env.setdefault(name, str(threads))
