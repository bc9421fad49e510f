"""The shared numeric primitives: log-sum-exp / categorical draws and prior seating weights.

Each numba function is compared with a plain reference: ``core.logweights`` with NumPy, and
``priors.seating`` with differences of the prior's EPPF (``GibbsTypePrior.log_eppf``), which
is what the seating weights are ratios of.
"""

from __future__ import annotations

import numpy as np
import pytest

from pymc_splitmerge.core import logweights as lw
from pymc_splitmerge.priors import (
    DirichletProcessPrior,
    FiniteDirichletPrior,
    MixtureOfFiniteMixturesPrior,
    PitmanYorPrior,
    ShiftedPoisson,
    seating,
)

VECTORS = [
    np.array([0.0]),
    np.array([-1.0, 2.0, 0.5, -3.0]),
    np.array([-np.inf, -np.inf, -np.inf]),
    np.array([np.nan, -1.0, np.nan, 3.0]),
    np.array([1000.0, 999.0, -1000.0]),
    np.array([-np.inf, 5.0, -np.inf]),
    np.array([2.0, 2.0, 2.0, np.nan]),
]


@pytest.mark.parametrize("values", VECTORS)
def test_log_sum_exp_matches_reference(values):
    padded = np.concatenate([values, [7.0, np.nan]])  # entries past count are never read
    expected = lw.reference_log_sum_exp(values)
    got = lw.log_sum_exp(padded, values.size)
    if np.isinf(expected):
        assert got == expected
    else:
        assert got == pytest.approx(expected, rel=1e-13, abs=1e-13)
    weights = np.empty(values.size)
    log_total, total = lw.exp_shifted(values, values.size, weights)
    if np.isinf(expected):
        assert log_total == -np.inf and total == 0.0 and np.all(weights == 0.0)
    else:
        assert log_total == pytest.approx(expected, rel=1e-13, abs=1e-13)
        assert total == pytest.approx(weights.sum())
        assert np.all(weights[np.isnan(values)] == 0.0)


@pytest.mark.parametrize("values", VECTORS)
def test_normalise_log_weights(values):
    out = np.empty(values.size)
    log_total = lw.normalise_log_weights(values, out)
    assert out.sum() == pytest.approx(1.0)
    if np.isinf(lw.reference_log_sum_exp(values)):
        assert log_total == -np.inf and np.allclose(out, 1.0 / values.size)
    else:
        clean = np.where(np.isnan(values), -np.inf, values)
        assert np.allclose(out, np.exp(clean - lw.reference_log_sum_exp(values)))


@pytest.mark.parametrize("values", VECTORS)
def test_sample_log_weights_matches_reference_on_a_grid_of_uniforms(values):
    for uniform in np.concatenate([np.linspace(0.0, 1.0, 201)[:-1], [1 - 1e-16]]):
        expected = lw.reference_sample_log_weights(values, uniform)
        got = lw.sample_log_weights(values.copy(), values.size, uniform)
        assert got == expected, (values, uniform)
        if got >= 0:
            assert not np.isnan(values[got]) and values[got] > -np.inf


def test_sample_log_weights_law():
    """The draw frequencies match the normalised weights (χ², fixed seed)."""
    from scipy import stats

    values = np.array([0.3, -np.inf, 1.2, -0.5, np.nan, 0.0])
    rng = np.random.default_rng(5)
    uniforms = rng.random(20000)
    draws = np.array([lw.sample_log_weights(values.copy(), values.size, u) for u in uniforms])
    probabilities = np.exp(np.where(np.isnan(values), -np.inf, values))
    probabilities /= probabilities.sum()
    observed = np.bincount(draws, minlength=values.size)
    support = probabilities > 0
    assert observed[~support].sum() == 0
    p_value = stats.chisquare(observed[support], 20000 * probabilities[support]).pvalue
    assert p_value > 1e-4


PRIORS = {
    "dp": DirichletProcessPrior(1.3),
    "py": PitmanYorPrior(0.7, 0.4),
    "py-negative-alpha": PitmanYorPrior(-0.2, 0.5),
    "finite-k3": FiniteDirichletPrior(0.8, 3),
    "mfm": MixtureOfFiniteMixturesPrior(1.0, ShiftedPoisson(2.0)),
}


def _log_eppf_without_v(tables, sizes):
    log_v_table, log_w_table = tables
    return log_v_table[len(sizes)] + sum(log_w_table[s] for s in sizes)


@pytest.mark.parametrize("name", list(PRIORS))
def test_seating_weights_are_eppf_ratios(name):
    """Each seating weight equals ``log p(after) - log p(before)`` both under ``tables(n)``."""
    prior = PRIORS[name]
    rng = np.random.default_rng(0)
    for _ in range(30):
        sizes = list(rng.integers(1, 4, size=rng.integers(1, 4)))
        n = sum(sizes) + 2
        tables = prior.tables(n)
        log_v_table, log_w_table = tables
        before = _log_eppf_without_v(tables, sizes)
        j = int(rng.integers(len(sizes)))
        for added in (1, 2):
            after = sizes.copy()
            after[j] += added
            expected = _log_eppf_without_v(tables, after) - before
            got = seating.log_join_weight(log_w_table, sizes[j], added)
            assert got == pytest.approx(expected, abs=1e-12)
        for size in (1, 2):
            expected = _log_eppf_without_v(tables, sizes + [size]) - before
            got = seating.log_open_weight(log_v_table, log_w_table, len(sizes), size)
            if expected == -np.inf:
                assert got == -np.inf
            else:
                assert got == pytest.approx(expected, abs=1e-12)
        a, b = 1 + int(rng.integers(2)), 1 + int(rng.integers(2))
        merged = sizes + [a + b]
        if log_v_table[len(merged)] == -np.inf:  # the merged state itself is impossible
            continue
        expected = (_log_eppf_without_v(tables, sizes + [a, b])
                    - _log_eppf_without_v(tables, merged))
        got = seating.log_split_weight(log_v_table, log_w_table, len(merged), a, b)
        if expected == -np.inf:
            assert got == -np.inf
        else:
            assert got == pytest.approx(expected, abs=1e-12)
        # and the full EPPF agrees with the tables (so the ratios are those of log_eppf)
        assert prior.log_eppf(np.array(sizes + [1, 1])) == pytest.approx(
            _log_eppf_without_v(tables, sizes + [1, 1]), abs=1e-10)


def test_open_weight_is_minus_inf_not_nan_when_full():
    prior = FiniteDirichletPrior(0.8, 2)
    log_v_table, log_w_table = prior.tables(5)
    assert seating.log_open_weight(log_v_table, log_w_table, 2, 1) == -np.inf
    assert seating.log_split_weight(log_v_table, log_w_table, 2, 1, 2) == -np.inf
