"""One line says so when the package's numba kernels compile (not when they load from the
cache), and the compile seconds are counted."""

from __future__ import annotations

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
