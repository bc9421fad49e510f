"""Collapsed Gibbs kernel: exactness against the enumerated posterior.

* the numba full conditional equals the one computed from the complete joint
  (log EPPF + log marginals, ``reference_point_conditional``);
* one-step invariance: i.i.d. exact posterior draws, one sweep each, χ² goodness of fit for
  every prior × family combination (n = 5..6);
* negative controls (stale statistics; Dirichlet-process block weights with a Pitman–Yor
  prior) are rejected by the same test.
"""

from __future__ import annotations

import functools
import zlib

import numpy as np
import pytest
from conftest import PRIORS
from kernel_checks import one_step_invariance_draws
from kernel_references import (
    reference_gibbs_sweep,
    reference_point_conditional,
)

from pymc_splitmerge.components import (
    BetaBernoulli,
    GammaPoisson,
    NormalInverseWishart,
    NormalKnownCovariance,
    dispatch,
)
from pymc_splitmerge.kernels.gibbs import (
    build_gibbs_sweep,
    gibbs_sweep,
    point_conditional,
)
from pymc_splitmerge.kernels.state import PartitionState, PriorTables, assign_point
from pymc_splitmerge.priors import (
    DirichletProcessPrior,
    FiniteDirichletPrior,
    PitmanYorPrior,
)
from pymc_splitmerge.testing import (
    GOF_PVALUE_THRESHOLD,
    assert_partition_gof,
    chisquare_partitions,
    exact_posterior,
)

N_SAMPLES = 3000

def make_family_and_data(name, seed=0):
    rng = np.random.default_rng(seed)
    if name == "beta_bernoulli":
        data = np.array([[1, 1, 0], [1, 1, 1], [0, 0, 1], [0, 0, 0], [1, 0, 1], [0, 1, 0]])
        return BetaBernoulli(a=1.0, b=1.0), data
    if name == "niw":
        data = np.concatenate([rng.normal(-1.5, 0.5, (3, 2)), rng.normal(1.5, 0.5, (2, 2))])
        return NormalInverseWishart(mu0=np.zeros(2), kappa0=0.5, nu0=4.0, psi0=np.eye(2)), data
    if name == "known_covariance":
        data = np.array([-2.1, -1.8, -0.2, 0.3, 2.0, 2.4])
        return NormalKnownCovariance(mu0=0.0, sigma0=2.0, sigma=0.7), data
    if name == "gamma_poisson":
        data = np.array([0, 1, 7, 9, 3, 0])
        return GammaPoisson(shape=1.0, rate=0.3), data
    raise KeyError(name)


FAMILIES = ["beta_bernoulli", "niw", "known_covariance", "gamma_poisson"]


def one_sweep_samples(prior, family, data, rng, scan="random", log_v_table=None,
                      log_w_table=None, sweep=None):
    """Exact i.i.d. posterior draws, each moved by one sweep; returns (exact, after)."""
    if sweep is None:
        sweep = functools.partial(gibbs_sweep, scan=scan)
    after, exact = one_step_invariance_draws(sweep, prior, family, data, N_SAMPLES, rng,
                                             log_v_table=log_v_table, log_w_table=log_w_table)
    return exact, after


@pytest.mark.parametrize("family_name", FAMILIES)
@pytest.mark.parametrize("prior_name", list(PRIORS))
def test_one_sweep_invariance(prior_name, family_name):
    family, data = make_family_and_data(family_name)
    rng = np.random.default_rng(zlib.crc32(f"{prior_name}-{family_name}".encode()))
    exact, after = one_sweep_samples(PRIORS[prior_name], family, data, rng)
    assert_partition_gof(after, exact)


@pytest.mark.parametrize("prior_name", ["dp", "finite"])
def test_one_sweep_invariance_systematic_scan(prior_name):
    family, data = make_family_and_data("known_covariance")
    exact, after = one_sweep_samples(PRIORS[prior_name], family, data,
                                     np.random.default_rng(3), scan="systematic")
    assert_partition_gof(after, exact)


def test_negative_control_wrong_block_weights_rejected():
    """Pitman–Yor prior but the Dirichlet-process join weights m (instead of m - d)."""
    prior = PitmanYorPrior(alpha=0.5, discount=0.7)
    family, data = make_family_and_data("known_covariance")
    n = data.shape[0]
    _log_v_table, _ = prior.tables(n)
    _, dirichlet_w = DirichletProcessPrior(alpha=1.0).tables(n)
    exact, after = one_sweep_samples(prior, family, data, np.random.default_rng(4),
                                     log_w_table=dirichlet_w)
    assert chisquare_partitions(after, exact).pvalue < GOF_PVALUE_THRESHOLD


def stale_statistics_sweep(state, log_v_table, log_w_table, rng):
    """BROKEN: predictives use the point's own cluster *with* the point still in it."""
    labels, sizes, stats, empty_row, active, where, meta = state.arrays()
    fid, params, x = state.family_id, state.params, state.x
    for i in rng.permutation(state.n):
        old = labels[i]
        k = int(meta[0])
        slots = active[:k].copy()
        log_weights = np.empty(k + 1)
        for j, slot in enumerate(slots):
            m = sizes[slot] - (1 if slot == old else 0)  # prior weight is right ...
            if m == 0:
                log_weights[j] = -np.inf
                continue
            # ... but the statistics still contain x_i
            log_weights[j] = (log_w_table[m + 1] - log_w_table[m]
                              + dispatch.log_predictive(fid, params, stats[slot], x[i]))
        k_without = k - (1 if sizes[old] == 1 else 0)
        log_weights[k] = (log_v_table[k_without + 1] - log_v_table[k_without] + log_w_table[1]
                          + dispatch.log_predictive(fid, params, empty_row, x[i]))
        p = np.exp(log_weights - log_weights.max())
        choice = rng.choice(k + 1, p=p / p.sum())
        from pymc_splitmerge.kernels.state import unassign_point

        unassign_point(fid, params, x, i, labels, sizes, stats, empty_row, active, where, meta)
        if choice == k:
            target = old if sizes[old] == 0 else int(np.flatnonzero(where < 0)[0])
        else:
            target = slots[choice]
        assign_point(fid, params, x, i, target, labels, sizes, stats, active, where, meta)


def test_negative_control_stale_statistics_rejected():
    family, data = make_family_and_data("known_covariance")
    exact, after = one_sweep_samples(PRIORS["dp"], family, data, np.random.default_rng(5),
                                     sweep=stale_statistics_sweep)
    assert chisquare_partitions(after, exact).pvalue < GOF_PVALUE_THRESHOLD


@pytest.mark.parametrize("family_name", FAMILIES)
@pytest.mark.parametrize("prior_name", list(PRIORS))
def test_conditional_matches_joint_reference(prior_name, family_name):
    prior = PRIORS[prior_name]
    family, data = make_family_and_data(family_name)
    x = family.prepare_data(data)
    n = x.shape[0]
    log_v_table, log_w_table = prior.tables(n)
    rng = np.random.default_rng(6)
    for labels in exact_posterior(prior, family, data).sample(4, rng):
        state = PartitionState(family, x, labels)
        for i in range(n):
            slots, probabilities = point_conditional(state, i, log_v_table, log_w_table)
            targets, expected = reference_point_conditional(state.slot_labels, i, x, prior,
                                                            family)
            order = np.argsort(np.where(slots < 0, np.iinfo(np.int64).max, slots))
            np.testing.assert_allclose(probabilities[order], expected, rtol=1e-9, atol=1e-12)
            np.testing.assert_array_equal(np.sort(slots[slots >= 0]), targets[targets >= 0])
        state.check()


def test_reference_sweep_is_invariant():
    prior = PRIORS["py"]
    family, data = make_family_and_data("known_covariance")
    data = data[:5]
    exact = exact_posterior(prior, family, data)
    x = family.prepare_data(data)
    rng = np.random.default_rng(7)
    start = exact.sample(500, rng)
    after = np.array([reference_gibbs_sweep(labels, x, prior, family, rng) for labels in start])
    assert_partition_gof(after, exact)


def test_sweep_keeps_state_consistent_and_reports():
    family, data = make_family_and_data("niw")
    x = family.prepare_data(data)
    prior = PRIORS["dp"]
    state = PartitionState(family, x, np.zeros(x.shape[0], dtype=int))
    rng = np.random.default_rng(8)
    total_changed = 0
    for _ in range(20):
        before = state.labels()
        info = gibbs_sweep(state, *prior.tables(x.shape[0]), rng, n_gibbs_sweeps=1)
        state.check()
        assert info.n_clusters == state.n_clusters == np.unique(state.labels()).size
        assert info.n_predictive_evaluations >= x.shape[0] - 1
        if info.n_changed == 0:
            np.testing.assert_array_equal(before, state.labels())
        total_changed += info.n_changed
    assert total_changed > 0


def test_same_generator_same_result():
    family, data = make_family_and_data("gamma_poisson")
    x = family.prepare_data(data)
    tables = PRIORS["dp"].tables(x.shape[0])
    results = []
    for _ in range(2):
        state = PartitionState(family, x, np.zeros(x.shape[0], dtype=int))
        gibbs_sweep(state, *tables, np.random.default_rng(9), n_gibbs_sweeps=5)
        results.append(state.labels())
    np.testing.assert_array_equal(results[0], results[1])


def test_finite_prior_never_exceeds_k():
    family, data = make_family_and_data("known_covariance")
    x = family.prepare_data(data)
    prior = FiniteDirichletPrior(alpha=5.0, k=2)
    state = PartitionState(family, x, np.zeros(x.shape[0], dtype=int))
    rng = np.random.default_rng(10)
    for _ in range(50):
        gibbs_sweep(state, *prior.tables(x.shape[0]), rng)
        assert state.n_clusters <= 2


def test_bad_arguments():
    family, data = make_family_and_data("known_covariance")
    x = family.prepare_data(data)
    state = PartitionState(family, x, np.zeros(x.shape[0], dtype=int))
    tables = PRIORS["dp"].tables(x.shape[0])
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="scan"):
        gibbs_sweep(state, *tables, rng, scan="sideways")
    with pytest.raises(ValueError, match="n_gibbs_sweeps"):
        gibbs_sweep(state, *tables, rng, n_gibbs_sweeps=0)
    with pytest.raises(TypeError, match="n_gibbs_sweeps"):
        gibbs_sweep(state, *tables, rng, n_gibbs_sweeps=1.5)
    with pytest.raises(ValueError, match="tables"):
        gibbs_sweep(state, *PRIORS["dp"].tables(3), rng)
    with pytest.raises(TypeError, match="Generator"):
        gibbs_sweep(state, *tables, 42)


def test_sweeps_keyword_has_one_name():
    family, data = make_family_and_data("gamma_poisson")
    x = family.prepare_data(data)
    tables = PRIORS["dp"].tables(x.shape[0])
    state = PartitionState(family, x, np.zeros(x.shape[0], dtype=int))
    gibbs_sweep(state, *tables, np.random.default_rng(9), n_gibbs_sweeps=3)
    state.check()
    with pytest.raises(TypeError, match="n_sweeps"):
        gibbs_sweep(state, *tables, np.random.default_rng(9), n_sweeps=3)


def test_built_sweep_on_the_structures_equals_the_state_form():
    """``build_gibbs_sweep(...)(model, partition, tables, rng)`` is the same transition."""
    family, data = make_family_and_data("niw")
    x = family.prepare_data(data)
    tables = PRIORS["py"].tables(x.shape[0])
    sweep = build_gibbs_sweep("systematic", 2)
    first = PartitionState(family, x, np.zeros(x.shape[0], dtype=int))
    second = PartitionState(family, x, np.zeros(x.shape[0], dtype=int))
    info = sweep(first.model, first.partition, PriorTables(*tables), np.random.default_rng(5))
    expected = gibbs_sweep(second, *tables, np.random.default_rng(5), "systematic", 2)
    assert info == expected
    np.testing.assert_array_equal(first.labels(), second.labels())
    first.check()
