"""The kernels' argsort (``core.ordering.argsort_prefix``) against its plain reference,
``np.argsort(kind="stable")``."""

from __future__ import annotations

import numpy as np
import pytest

from pymc_splitmerge.core.ordering import argsort_prefix


@pytest.mark.parametrize("count", [0, 1, 2, 3, 7, 8, 9, 31, 64, 300])
def test_argsort_prefix_matches_stable_argsort(count):
    rng = np.random.default_rng(count)
    keys = rng.random(count + 5)  # only the prefix is read
    keys[count:] = -1.0
    np.testing.assert_array_equal(argsort_prefix(keys, count),
                                  np.argsort(keys[:count], kind="stable"))


def test_argsort_prefix_ties_keep_index_order():
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 4, size=50).astype(np.float64)
    result = argsort_prefix(keys, 50)
    np.testing.assert_array_equal(result, np.argsort(keys, kind="stable"))
    assert sorted(result.tolist()) == list(range(50))
