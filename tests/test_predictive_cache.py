"""Tests of the cached predictive forms kept in every family's statistics row.

Each family stores its posterior predictive in closed form in the statistics row and refreshes
it in ``add_point`` / ``remove_point`` (``docs/contracts.md`` section 2).  The numpy/scipy
references of the family modules stay the judges: along long random add/remove sequences
every cached ``log_predictive`` and ``log_marginal`` must equal the reference computed from the
raw member rows to 1e-10 (for every registered family in ``tests/test_family_contract.py``;
here for wide Beta-Bernoulli and Dirichlet-categorical rows).  The Normal-Inverse-Wishart inverse factor is also checked through
its loss-of-definiteness fallback and its periodic refresh against drift, and
``PartitionState.check`` must still see a corrupted cache (negative control for the history
entries it skips).
"""

from __future__ import annotations

import numpy as np
import pytest
from test_family_contract import check_random_add_remove_sequence

from pymc_splitmerge.components import (
    BetaBernoulli,
    DirichletCategorical,
    NormalInverseWishart,
)
from pymc_splitmerge.components import beta_bernoulli as beta_bernoulli_module
from pymc_splitmerge.components import dirichlet_categorical as dirichlet_categorical_module
from pymc_splitmerge.components import normal_inverse_wishart as niw_module
from pymc_splitmerge.kernels.state import PartitionState

TOLERANCE = 1e-10


def _wide_cases():
    """Beta-Bernoulli and Dirichlet-categorical with several blocks of 16 attributes:
    ordinary factors (blocked underflow checks) and factors below 1e-9 (tiny
    hyperparameters: checked after every factor)."""
    rng = np.random.default_rng(99)
    data = rng.integers(0, 2, size=(10, 40))
    cases = []
    for name, family in (("blocks", BetaBernoulli(a=rng.uniform(0.5, 2.0, size=40), b=0.7)),
                         ("tiny-factors", BetaBernoulli(a=1e-10, b=1.0))):
        cases.append(pytest.param(family, beta_bernoulli_module, family.prepare_data(data),
                                  id=f"beta-bernoulli-{name}"))
    codes = rng.integers(0, 3, size=(10, 40))
    for name, concentration in (("blocks", 0.8), ("tiny-factors", 1e-10)):
        family = DirichletCategorical(concentration=concentration, n_categories=3)
        cases.append(pytest.param(family, dirichlet_categorical_module,
                                  family.prepare_data(codes), id=f"dirichlet-{name}"))
    return cases


def _close(value, expected):
    return abs(value - expected) <= TOLERANCE * max(1.0, abs(expected))


@pytest.mark.parametrize(("family", "module", "x"), _wide_cases())
def test_random_add_remove_sequences_match_reference(family, module, x):
    """Every cached evaluation equals the reference along a random add/remove sequence."""
    check_random_add_remove_sequence(family, module, x)


def _niw_family(dim, rng):
    a = rng.normal(size=(dim, dim))
    return NormalInverseWishart(mu0=rng.normal(size=dim), kappa0=0.3, nu0=dim + 1.0,
                                psi0=a @ a.T + dim * np.eye(dim))


def _niw_layout_cases():
    """NIW at the dimensions of every predictive path: registers (1, 2), row-major rows
    (3, 15, 17; 32 with the residual in scratch) and the dense column-major D = 16 product."""
    rng = np.random.default_rng(16)
    cases = []
    for dim in (1, 2, 3, 15, 16, 17, 32):
        family = _niw_family(dim, rng)
        x = family.prepare_data(rng.normal(size=(12, dim)) @ np.diag(rng.uniform(0.5, 2.0, dim))
                                + rng.normal(size=dim))
        cases.append(pytest.param(family, x, id=f"niw-{dim}d"))
    return cases


@pytest.mark.parametrize(("family", "x"), _niw_layout_cases())
def test_niw_every_layout_matches_reference(family, x):
    """Every cached NIW evaluation equals the reference along a random add/remove sequence,
    for the row-major (D != 16) and column-major (D = 16) layouts of the inverse factor."""
    check_random_add_remove_sequence(family, niw_module, x)


def test_niw_column_major_layout():
    """At D = COLUMN_MAJOR_DIM the inverse factor is stored column-major, otherwise
    row-major (upper triangle zero in both)."""
    rng = np.random.default_rng(7)
    for dim in (niw_module.COLUMN_MAJOR_DIM - 1, niw_module.COLUMN_MAJOR_DIM, 17):
        family = _niw_family(dim, rng)
        x = family.prepare_data(rng.normal(size=(30, dim)))
        row = family.stats_of(x)
        offset = 1 + 2 * dim + dim * dim
        stored = row[offset:offset + dim * dim].reshape(dim, dim)
        factor = stored.T if dim == niw_module.COLUMN_MAJOR_DIM else stored
        _, _, _, _, psi = niw_module._posterior(family, x)
        np.testing.assert_allclose(factor, np.linalg.inv(np.linalg.cholesky(psi)),
                                   rtol=1e-9, atol=1e-12)
        assert np.all(np.triu(factor, 1) == 0.0)


@pytest.mark.parametrize("dim", [1, 2, 3, 5, 16])
def test_niw_periodic_refresh_against_drift(dim):
    """The update counter triggers a recomputation from the raw sums every REFRESH_INTERVAL
    incremental updates, and the refreshed row is the recomputed one exactly."""
    rng = np.random.default_rng(dim)
    family = _niw_family(dim, rng)
    params = family.params
    x = family.prepare_data(rng.normal(size=(50, dim)) * 1.5)
    interval = niw_module.REFRESH_INTERVAL
    row = family.empty_stats
    members: list[int] = []
    for update in range(1, interval):
        if members and update % 3 == 0:
            niw_module.niw_remove_point(params, row, x[members.pop(0)])
        else:
            members.append(update % 50)
            niw_module.niw_add_point(params, row, x[update % 50])
        assert row[-1] == update  # one count per incremental update
    incremental = row.copy()
    incremental[-1] = 0.0
    niw_module.niw_add_point(params, incremental, x[7])  # the same update, no refresh due
    niw_module.niw_add_point(params, row, x[7])  # the interval-th update: refresh
    members.append(7)
    assert row[-1] == 0.0 and incremental[-1] == 1.0
    expected = incremental.copy()
    niw_module.niw_recompute(params, expected)
    np.testing.assert_array_equal(row, expected)
    cluster = family.stat_dim - 1
    np.testing.assert_allclose(row[:cluster], incremental[:cluster], rtol=1e-9, atol=1e-12)
    for query in x[:3]:
        assert _close(family.log_predictive(query, row),
                      niw_module.reference_log_predictive(family, query, x[members]))


@pytest.mark.parametrize("dim", [2, 3, 16, 17])
def test_niw_downdate_fallback_recomputes_from_the_sums(dim):
    """Points close to a hyperplane plus a far outlier across it: removing the outlier
    cancels nearly all digits of a pivot, the downdate is abandoned and the inverse factor
    recomputed; the cached form then matches the reference, and ordinary removals keep the
    O(D^2) downdate."""
    rng = np.random.default_rng(3)
    family = NormalInverseWishart(mu0=np.zeros(dim), kappa0=1e-3, nu0=dim,
                                  psi0=1e-9 * np.eye(dim))
    n_base = max(12, 2 * dim)
    base = rng.normal(size=(n_base, dim - 1))
    last = base.sum(axis=1) + 1e-1 * rng.normal(size=n_base)
    raw = np.vstack([np.column_stack([base, last]), np.r_[np.zeros(dim - 1), 1e3]])
    x = family.prepare_data(raw)
    row = family.stats_of(x)
    fallbacks = []
    for keep in range(len(x) - 1, dim + 1, -1):
        fallbacks.append(niw_module.niw_remove_point(family.params, row, x[keep]))
        assert row[-1] >= 0.0
        assert np.isclose(family.log_marginal(row),
                          niw_module.reference_log_marginal(family, x[:keep]), rtol=1e-6)
        assert np.isclose(family.log_predictive(x[0], row),
                          niw_module.reference_log_predictive(family, x[0], x[:keep]),
                          rtol=1e-6)
    assert fallbacks[0] and row[-1] < len(fallbacks)  # the outlier: recomputed, counter reset
    assert not all(fallbacks)


def test_state_check_sees_a_corrupted_cache():
    """Negative control: ``PartitionState.check`` skips only the update counter."""
    rng = np.random.default_rng(5)
    family = _niw_family(2, rng)
    x = family.prepare_data(rng.normal(size=(12, 2)))
    state = PartitionState(family, x, np.arange(12) % 3)
    state.check()
    slot = state.active[0]
    state.stats[slot, -1] += 7.0  # the counter: history, ignored
    state.check()
    state.stats[slot, -4] += 1e-3  # the cached log-normaliser c_n
    with pytest.raises(AssertionError):
        state.check()


# ------------------------------------------------------------------ slot-index forms
def _slot_form_cases():
    from test_family_contract import CASES

    cases = [pytest.param(*case.values, id=f"{case.id}") for case in CASES]
    # NIW D = 2 in registers: the loss-of-definiteness fallback (points near a line and a far
    # outlier), and the column-major D = 16
    rng = np.random.default_rng(11)
    family = NormalInverseWishart(mu0=[0.0, 0.0], kappa0=1e-3, nu0=2.0, psi0=1e-9 * np.eye(2))
    t = rng.normal(size=10)
    raw = np.vstack([np.column_stack([t, 2.0 * t + 1e-1 * rng.normal(size=10)]), [[0.0, 1e3]]])
    cases.append(pytest.param(family, niw_module, family.prepare_data(raw), id="niw-2d-fallback"))
    family = _niw_family(16, rng)
    cases.append(pytest.param(family, niw_module, family.prepare_data(rng.normal(size=(9, 16))),
                              id="niw-16d"))
    return cases


@pytest.mark.parametrize(("family", "module", "x"), _slot_form_cases())
def test_slot_index_forms_equal_row_forms(family, module, x):
    """``dispatch.add_point_at`` / ``remove_point_at`` leave exactly (bit for bit) the
    statistics that ``add_point`` / ``remove_point`` on row views leave, along a random
    sequence over several slots (joins, leaves, emptying, refills)."""
    from pymc_splitmerge.components import dispatch

    rng = np.random.default_rng(3)
    params_rows, params_slots = family.params, family.params.copy()
    family_id = family.family_id
    rows = np.tile(family.empty_stats, (3, 1))
    slots = rows.copy()
    members: list[list[int]] = [[], [], []]
    for step in range(400):
        slot = int(rng.integers(3))
        if members[slot] and (rng.random() < 0.45 or len(members[slot]) >= 10):
            i = members[slot].pop(int(rng.integers(len(members[slot]))))
            dispatch.remove_point(family_id, params_rows, rows[slot], x[i])
            dispatch.remove_point_at(family_id, params_slots, slots, slot, x, i)
        else:
            i = int(rng.integers(len(x)))
            members[slot].append(i)
            dispatch.add_point(family_id, params_rows, rows[slot], x[i])
            dispatch.add_point_at(family_id, params_slots, slots, slot, x, i)
        np.testing.assert_array_equal(slots, rows, err_msg=f"step {step}")


def test_niw_slot_forms_cross_the_refresh_interval():
    """The D = 2 slot-index forms hand over to the row functions for the periodic refresh
    and count updates exactly like them."""
    from pymc_splitmerge.components import dispatch

    rng = np.random.default_rng(4)
    family = _niw_family(2, rng)
    x = family.prepare_data(rng.normal(size=(40, 2)))
    params = family.params
    rows = np.tile(family.empty_stats, (2, 1))
    slots = rows.copy()
    members: list[int] = []
    for update in range(2 * niw_module.REFRESH_INTERVAL + 10):
        if members and update % 3 == 0:
            i = members.pop(0)
            dispatch.remove_point(family.family_id, params, rows[1], x[i])
            dispatch.remove_point_at(family.family_id, params, slots, 1, x, i)
        else:
            i = update % 40
            members.append(i)
            dispatch.add_point(family.family_id, params, rows[1], x[i])
            dispatch.add_point_at(family.family_id, params, slots, 1, x, i)
        assert np.array_equal(slots, rows), update
    assert rows[1, -1] < niw_module.REFRESH_INTERVAL


def test_niw_slot_remove_takes_the_fallback_like_the_row_form():
    """Removing the far outlier across a near-line cluster abandons the D = 2 downdate in
    both forms (recomputed from the sums), with the same row."""
    rng = np.random.default_rng(1)
    family = NormalInverseWishart(mu0=[0.0, 0.0], kappa0=1e-3, nu0=2.0, psi0=1e-9 * np.eye(2))
    t = rng.normal(size=10)
    raw = np.vstack([np.column_stack([t, 2.0 * t + 1e-1 * rng.normal(size=10)]), [[0.0, 1e3]]])
    x = family.prepare_data(raw)
    slots = family.stats_of(x)[None].copy()
    row = slots[0].copy()
    assert niw_module.niw_remove_point_at(family.params, slots, 0, x, 10)
    assert niw_module.niw_remove_point(family.params, row, x[10])
    np.testing.assert_array_equal(slots[0], row)
