"""``kernels.rng``: the seed drawn for numba is ``integers(2**63)`` of the caller's Generator."""

import numba
import numpy as np
import pytest

from pymc_splitmerge.kernels.rng import numba_seed_from, order_of_uniforms, seed_numba_from

BIT_GENERATORS = (np.random.PCG64, np.random.PCG64DXSM, np.random.SFC64, np.random.Philox,
                  np.random.MT19937)


def _reference_seed(rng):
    """The definition: one ``integers(2**63)`` draw (what the kernels used before)."""
    return int(rng.integers(2**63))


@pytest.mark.parametrize("bit_generator", BIT_GENERATORS, ids=lambda b: b.__name__)
def test_seed_draw_is_integers_2_63(bit_generator):
    """Same seeds and same Generator state as ``integers(2**63)``, also between other draws
    (32-bit draws buffer half a word in some bit generators; doubles; bounded integers)."""
    fast = np.random.Generator(bit_generator(2026))
    slow = np.random.Generator(bit_generator(2026))
    for k in range(400):
        seed = seed_numba_from(fast)
        assert seed == _reference_seed(slow)
        folded = numba_seed_from(fast)
        expected = _reference_seed(slow)
        assert folded == (expected ^ (expected >> 32)) & 0xFFFFFFFF
        assert 0 <= folded < 2**32
        # other draws in between, as the kernels make them
        if k % 3 == 0:
            assert fast.integers(10, dtype=np.int32) == slow.integers(10, dtype=np.int32)
        if k % 4 == 1:
            np.testing.assert_array_equal(fast.random(3), slow.random(3))
        if k % 5 == 2:
            np.testing.assert_array_equal(fast.integers(7, size=3), slow.integers(7, size=3))
    assert repr(fast.bit_generator.state) == repr(slow.bit_generator.state)
    assert fast.random() == slow.random()


def test_seed_rejects_non_generator():
    for function in (numba_seed_from, seed_numba_from):
        with pytest.raises(TypeError, match="Generator"):
            function(np.random.RandomState(0))


def _uniform_cases():
    """Uniform draws of many sizes, with ties (equal values: index order) and values at the
    ends of [0, 1) (the last bucket's clamp: ``value * size`` may round up to ``size``)."""
    rng = np.random.default_rng(11)
    cases = [rng.random(size) for size in (0, 1, 2, 3, 7, 64, 301)]
    cases.append(np.round(rng.random(200), 2))  # many ties
    top = np.nextafter(1.0, 0.0)
    cases.append(np.array([top, 0.0, top, 0.5, 0.0, top]))
    cases.append(np.full(5, top))
    return cases


def _check_is_stable_argsort(order):
    for values in _uniform_cases():
        padded = np.concatenate([values, np.random.default_rng(0).random(3)])  # read [:size]
        expected = np.argsort(values, kind="stable")
        if not np.array_equal(order(padded, values.size), expected):
            return False
    return True


@numba.njit
def _compiled_order_of_uniforms(uniforms, size):
    # the kernels' compiled order (``order_of_uniforms`` is compiled for numba callers only)
    return order_of_uniforms(uniforms, size)


def test_order_of_uniforms_is_the_stable_argsort():
    assert _check_is_stable_argsort(_compiled_order_of_uniforms)
    assert _check_is_stable_argsort(order_of_uniforms.py_func)  # the same Python body


def test_negative_control_the_buckets_alone_are_not_sorted():
    """The check rejects the bucket order without its insertion sort."""
    def buckets_only(uniforms, size):
        buckets = np.minimum((uniforms[:size] * size).astype(np.int64), max(size - 1, 0))
        return np.argsort(buckets, kind="stable")

    assert not _check_is_stable_argsort(buckets_only)
