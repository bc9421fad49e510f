"""The package's numba decorators: ``numba.njit`` without the wrappers nothing here calls.

numba compiles, for every function it compiles, a C-callable wrapper (``cfunc``: the entry
of first-class function values and ``cfunc`` callers) and a Python-callable one (the
CPython wrapper: unboxing of the arguments, boxing of the result) besides the function
itself.  The package calls its compiled functions from Python or from other compiled
functions only, never through the C-callable wrapper, so :func:`njit` leaves it out
(``no_cfunc_wrapper=True``).  A function that only compiled code calls (a family's leaf
that the kernels link, a register core of a leaf, a helper of a kernel) does not need the
Python-callable wrapper either: :func:`compiled_only` leaves out both, and its dispatcher
refuses a call from Python with a ``TypeError`` (numba would otherwise jump to the missing
wrapper and crash the interpreter).  Each wrapper left out is one function less to lower,
optimise and emit in a first run (``docs/benchmarks.md``, cold start).  Everything else is
``numba.njit``'s: the options given (``cache=True`` everywhere in the package) are passed
on, and a function is called from compiled code exactly as before.
"""

from __future__ import annotations

import numba
from numba.core.registry import CPUDispatcher

__all__ = ["CompiledOnlyDispatcher", "compiled_only", "njit"]


def njit(*args, **options):
    """``numba.njit(*args, no_cfunc_wrapper=True, **options)``: as a decorator, bare
    (``@njit``) or with options (``@njit(cache=True, inline="always")``)."""
    options.setdefault("no_cfunc_wrapper", True)
    return numba.njit(*args, **options)


class CompiledOnlyDispatcher(CPUDispatcher):
    """The dispatcher of a :func:`compiled_only` function: numba code calls it as any
    numba function (typing, compilation, cache and linking are ``CPUDispatcher``'s); a
    call from Python raises ``TypeError`` (there is no Python-callable entry to run).
    ``py_func`` is the plain Python body."""

    def __call__(self, *args, **kwargs):
        function = self.py_func
        raise TypeError(
            f"{function.__module__}.{function.__qualname__} is compiled for numba callers "
            "only (no Python entry: pymc_splitmerge.core.jit.compiled_only); call it from a "
            "numba function, or call its py_func")


def compiled_only(*args, **options):
    """:func:`njit` without the Python-callable wrapper either (``no_cpython_wrapper=True``),
    for a function only compiled code calls; bare or with options like :func:`njit`.  A call
    from Python raises ``TypeError`` (:class:`CompiledOnlyDispatcher`)."""
    options["no_cpython_wrapper"] = True

    def finish(dispatcher):
        if type(dispatcher) is CPUDispatcher:  # not with NUMBA_DISABLE_JIT (a plain function)
            dispatcher.__class__ = CompiledOnlyDispatcher
        return dispatcher

    if args and callable(args[0]):
        return finish(njit(*args, **options))
    decorate = njit(*args, **options)
    return lambda function: finish(decorate(function))
