"""One line says so when the package's numba kernels compile (not when they load from the
cache), and the compile seconds are counted."""

from __future__ import annotations

import gc
import importlib.util
import logging

import numba
import numpy as np
import pytest

from pymc_splitmerge import _compile_notice

KERNELS = '''
import numba


@numba.njit(cache=True)
def inner(x):
    return x * 2.0


@numba.njit(cache=True)
def outer(x):
    return inner(x) + 1.0
'''


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def fresh_state():
    saved = dict(_compile_notice._state)
    _compile_notice._state.update(announced=False, depth=0, seconds=0.0, count=0, kernels=[])
    yield
    _compile_notice._state.update(saved)


def test_one_line_on_first_compile_none_on_cache_load_and_foreign_code_ignored(
        tmp_path, caplog, fresh_state):
    path = tmp_path / "fake_kernels.py"
    path.write_text(KERNELS)

    @numba.njit  # not this package's: no line, not counted
    def foreign(x):
        return x + 1

    with caplog.at_level(logging.INFO, logger="pymc_splitmerge"):
        foreign(1)
        assert caplog.records == [] and _compile_notice.compile_seconds()[1] == 0
        first = _load(path, "pymc_splitmerge.fake_kernels")
        first.outer(np.float64(1.0))
        first.outer(np.int64(1))
        messages = [record.getMessage() for record in caplog.records]
        assert len(messages) == 1 and "compiling numba kernels" in messages[0], messages
        assert "cached" in messages[0]
        seconds, count = _compile_notice.compile_seconds()
        assert count == 2 and seconds > 0  # outer twice; inner inside outer is not counted
        kernels = _compile_notice.compiled_kernels()
        assert [name for name, _ in kernels] == ["pymc_splitmerge.fake_kernels.outer"] * 2
        # a new process would load them from the cache: a fresh module, same file
        _compile_notice._state.update(announced=False)
        again = _load(path, "pymc_splitmerge.fake_kernels_again")
        assert again.outer(np.float64(1.0)) == 3.0
        assert _compile_notice.compile_seconds()[1] == 2  # nothing compiled
        assert len(caplog.records) == 1


def test_the_collector_is_paused_while_a_kernel_of_the_package_compiles(tmp_path, fresh_state):
    """Python's cyclic garbage collector is off during the package's compilations (their
    outermost start to end, the kernels they compile inside included) and on again after;
    left as it was when it was off already, and untouched by other code's compilations."""
    from numba.core import event

    seen = []

    class Probe(event.Listener):  # registered after the package's listener: sees its effect
        def on_start(self, ev):
            function = getattr(ev.data.get("dispatcher"), "py_func", None)
            seen.append((getattr(function, "__name__", "?"), gc.isenabled()))

        def on_end(self, ev):
            pass

    path = tmp_path / "fake_kernels.py"
    path.write_text(KERNELS)
    probe = Probe()
    event.register("numba:compile", probe)
    try:
        assert gc.isenabled()
        module = _load(path, "pymc_splitmerge.fake_kernels_gc")
        assert module.outer(np.float64(1.0)) == 3.0
        assert seen == [("outer", False), ("inner", False)] and gc.isenabled()

        # negative control: another package's compilation leaves the collector on
        @numba.njit
        def foreign(x):
            return x + 1

        seen.clear()
        foreign(1)
        assert seen == [("foreign", True)] and gc.isenabled()

        # a collector switched off by the user stays off
        gc.disable()
        try:
            seen.clear()
            module.outer(np.int64(1))
            assert seen == [("outer", False), ("inner", False)] and not gc.isenabled()
        finally:
            gc.enable()

        # a compilation that fails restores it too
        with pytest.raises(numba.core.errors.TypingError):
            module.outer("text")
        assert gc.isenabled()
    finally:
        event.unregister("numba:compile", probe)
