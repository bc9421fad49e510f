"""The package's numba decorator: ``numba.njit`` without the C-callable wrapper.

numba compiles, for every function it compiles, a C-callable wrapper (``cfunc``: the entry
of first-class function values and ``cfunc`` callers) besides the Python-callable one.  The
package calls its compiled functions from Python or from other compiled functions only, never
through that wrapper, so :func:`njit` leaves it out (``no_cfunc_wrapper=True``): a first run
compiles up to half a second less (``docs/benchmarks.md``, cold start).  Everything else is
``numba.njit``'s: the options given (``cache=True`` everywhere in the package) are passed on,
and a function is called from Python exactly as before.
"""

from __future__ import annotations

import numba

__all__ = ["njit"]


def njit(*args, **options):
    """``numba.njit(*args, no_cfunc_wrapper=True, **options)``: as a decorator, bare
    (``@njit``) or with options (``@njit(cache=True, inline="always")``)."""
    options.setdefault("no_cfunc_wrapper", True)
    return numba.njit(*args, **options)
