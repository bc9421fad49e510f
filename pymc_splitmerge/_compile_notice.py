"""One line before the first numba compilation of this package's kernels in a process.

The kernels are compiled with ``cache=True``: the first use on a machine (or after a change of
the sources or of numba) compiles them, which takes from seconds to minutes, and later
processes load them from the cache.  Without a word, that first run looks hung.  A numba event
listener (``numba:compile`` fires only on a real compilation, never on a cache load) logs one
INFO line on the ``pymc_splitmerge`` logger, the first time a kernel of this package is
compiled, saying so and where the cache is; it also counts the seconds spent in those
compilations (:func:`compile_seconds`, used by ``benchmarks/cold_start.py``).  Nothing is
written anywhere by installing it.

While one of the package's kernels compiles (its outermost compilation, from start to end,
errors included), the listener also pauses Python's cyclic garbage collector and restores it
afterwards (unless it was already off).  numba's compiler allocates millions of short-lived
objects, which trigger full collections that scan every object of the process (a PyMC
process holds several hundred thousand): about 15 % of the CPU time of a first run's
compilation, for some 30 MB more memory at its peak (``docs/benchmarks.md``, cold start).  The
compiled code is the same; nothing is skipped or deferred.
"""

from __future__ import annotations

import gc
import logging
import os
import time

__all__ = ["compile_seconds", "compiled_kernels", "install_compile_notice"]

_log = logging.getLogger("pymc_splitmerge")
_PACKAGE = __name__.split(".")[0]
_state = {"announced": False, "depth": 0, "started": 0.0, "seconds": 0.0, "count": 0,
          "kernel": "", "kernels": [], "paused_gc": False}


def _cache_location() -> str:
    from numba.core import config

    if config.CACHE_DIR:
        return f"NUMBA_CACHE_DIR={config.CACHE_DIR}"
    return f"__pycache__ under {os.path.dirname(os.path.abspath(__file__))}"


def _ours(event) -> bool:
    dispatcher = (event.data or {}).get("dispatcher")
    module = getattr(getattr(dispatcher, "py_func", None), "__module__", "") or ""
    return module.split(".")[0] == _PACKAGE


def compiled_kernels() -> list[tuple[str, float]]:
    """(module.qualname, seconds) of every outermost compilation so far, in order."""
    return list(_state["kernels"])


def compile_seconds() -> tuple[float, int]:
    """Seconds spent so far in this process compiling the package's numba kernels (outermost
    compilations only: a kernel compiled inside another's compilation is counted once), and
    the number of those compilations."""
    return _state["seconds"], _state["count"]


def _listener_class():
    from numba.core import event

    class CompileNotice(event.Listener):
        def on_start(self, event):
            if not _ours(event):
                return
            if not _state["announced"]:
                _state["announced"] = True
                _log.info("pymc_splitmerge: compiling numba kernels for their first use (a few "
                          "seconds to minutes, once: they are cached in %s)", _cache_location())
            if _state["depth"] == 0:
                _state["started"] = time.perf_counter()
                function = event.data["dispatcher"].py_func
                _state["kernel"] = f"{function.__module__}.{function.__qualname__}"
                # the collector paused for the compilation (restored in on_end, which numba
                # calls when the compilation fails too)
                _state["paused_gc"] = gc.isenabled()
                if _state["paused_gc"]:
                    gc.disable()
            _state["depth"] += 1

        def on_end(self, event):
            if not _ours(event) or _state["depth"] == 0:
                return
            _state["depth"] -= 1
            if _state["depth"] == 0:
                seconds = time.perf_counter() - _state["started"]
                _state["seconds"] += seconds
                _state["count"] += 1
                _state["kernels"].append((_state["kernel"], seconds))
                if _state["paused_gc"]:
                    _state["paused_gc"] = False
                    gc.enable()

    return CompileNotice


_installed = []


def install_compile_notice() -> None:
    """Register the listener (idempotent) and give the ``pymc_splitmerge`` logger a handler at
    INFO when logging is not configured, as PyMC does for its ``pymc`` logger."""
    if _installed:
        return
    from numba.core import event

    listener = _listener_class()()
    event.register("numba:compile", listener)
    _installed.append(listener)
    if not logging.root.handlers:
        if _log.level == logging.NOTSET:
            _log.setLevel(logging.INFO)
        if not _log.handlers:
            _log.addHandler(logging.StreamHandler())
