"""Jain–Neal restricted Gibbs split-merge (RGSM): references, exact invariance, controls."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from broken_kernels import on_state, rgsm_path_probability_move
from conftest import (
    PRIORS,
    PROBLEMS,
    bernoulli_problem,
    chain_draws,
    niw_problem,
    one_step_draws,
    thinned_labels,
)
from kernel_references import propose_rgsm, reference_restricted_scan

from pymc_splitmerge.components.beta_bernoulli import BetaBernoulli
from pymc_splitmerge.components.normal_inverse_wishart import NormalInverseWishart
from pymc_splitmerge.kernels.rgsm import build_rgsm_move, restricted_scan, rgsm_move
from pymc_splitmerge.kernels.splitmerge_common import (
    MOVE_MERGE,
    MOVE_SPLIT,
    build_moves_then_gibbs,
)
from pymc_splitmerge.kernels.state import PartitionState
from pymc_splitmerge.priors.dirichlet_process import DirichletProcessPrior
from pymc_splitmerge.priors.finite_dirichlet import FiniteDirichletPrior
from pymc_splitmerge.priors.pitman_yor import PitmanYorPrior
from pymc_splitmerge.testing import assert_partition_gof, exact_posterior

SEED = 4211


# --------------------------------------------------------------------------- references


@pytest.mark.parametrize("problem", sorted(PROBLEMS))
def test_restricted_scan_matches_reference(problem):
    rng = np.random.default_rng(SEED)
    family, x = PROBLEMS[problem]()
    n = x.shape[0]
    log_w_table = PRIORS["py"].tables(n)[1]
    for _ in range(10):
        points = rng.permutation(n)
        anchor_i, anchor_j = points[0], points[1]
        members = np.sort(points[2:]).astype(np.int64)
        launch = rng.integers(0, 2, size=members.shape[0]).astype(np.int64)
        stats_a = family.stats_of(x[np.concatenate(([anchor_i], members[launch == 0]))])
        stats_b = family.stats_of(x[np.concatenate(([anchor_j], members[launch == 1]))])
        sizes = np.array([1 + np.sum(launch == 0), 1 + np.sum(launch == 1)], dtype=np.int64)
        sides = launch.copy()
        log_q = restricted_scan(family.family_id, family.params, x, members, sides, sizes,
                                stats_a, stats_b, False, sides, rng.random(members.shape[0]),
                                log_w_table)
        expected = reference_restricted_scan(family, x, anchor_i, anchor_j, members, launch,
                                             sides, log_w_table)
        np.testing.assert_allclose(log_q, expected, rtol=1e-9, atol=1e-9)
        members_a = np.concatenate(([anchor_i], members[sides == 0]))
        cluster = family.cluster_columns  # the update counter is history
        np.testing.assert_allclose(stats_a[cluster], family.stats_of(x[members_a])[cluster],
                                   atol=1e-8)
        assert sizes[0] == members_a.shape[0] and sizes.sum() == n
        # the forced scan from the same launch state gives the same probability
        stats_a = family.stats_of(x[np.concatenate(([anchor_i], members[launch == 0]))])
        stats_b = family.stats_of(x[np.concatenate(([anchor_j], members[launch == 1]))])
        sizes = np.array([1 + np.sum(launch == 0), 1 + np.sum(launch == 1)], dtype=np.int64)
        forced = restricted_scan(family.family_id, family.params, x, members, launch.copy(),
                                 sizes, stats_a, stats_b, True, sides, np.empty(0), log_w_table)
        np.testing.assert_allclose(forced, log_q, rtol=1e-10, atol=1e-10)


def test_finite_dirichlet_never_exceeds_k():
    family, x = bernoulli_problem()
    prior = FiniteDirichletPrior(alpha=1.0, k=2)
    log_v_table, log_w_table = prior.tables(x.shape[0])
    rng = np.random.default_rng(SEED)
    state = PartitionState(family, x, np.array([0, 0, 0, 1, 1, 1]))
    n_blocked = 0
    for _ in range(200):
        proposal = propose_rgsm(state, log_v_table, log_w_table, rng, 2)
        if proposal.move == MOVE_SPLIT and state.n_clusters == 2:
            n_blocked += 1
            assert np.isneginf(proposal.log_accept_ratio)
        rgsm_move(state, log_v_table, log_w_table, rng, 2)
        assert state.n_clusters <= 2
    assert n_blocked > 0
    state.check()


def test_both_moves_are_proposed_and_accepted():
    family, x = niw_problem()
    prior = PRIORS["dp"]
    log_v_table, log_w_table = prior.tables(x.shape[0])
    rng = np.random.default_rng(SEED)
    state = PartitionState(family, x, np.zeros(x.shape[0], dtype=np.int64))
    accepted = {MOVE_SPLIT: 0, MOVE_MERGE: 0}
    for _ in range(300):
        info = rgsm_move(state, log_v_table, log_w_table, rng, 3)
        accepted[info.move] += info.accepted
    assert accepted[MOVE_SPLIT] > 0 and accepted[MOVE_MERGE] > 0
    state.check()


def test_bad_options_raise():
    family, x = niw_problem()
    prior = PRIORS["dp"]
    log_v_table, log_w_table = prior.tables(x.shape[0])
    state = PartitionState(family, x, np.zeros(x.shape[0], dtype=np.int64))
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="n_intermediate_scans"):
        rgsm_move(state, log_v_table, log_w_table, rng, -1)
    with pytest.raises(ValueError, match="n_moves"):
        build_moves_then_gibbs(build_rgsm_move(1), n_moves=1.5, n_gibbs_sweeps=0)
    with pytest.raises(ValueError, match="use prior.tables"):
        rgsm_move(state, log_v_table[:-1], log_w_table, rng)


# --------------------------------------------------------------------------- exact invariance


@pytest.mark.parametrize("problem", sorted(PROBLEMS))
@pytest.mark.parametrize("name", sorted(PRIORS))
def test_one_step_invariance(name, problem):
    rng = np.random.default_rng([SEED, len(name), len(problem)])
    family, x = PROBLEMS[problem]()
    kernel = functools.partial(rgsm_move, n_intermediate_scans=2)
    samples, exact = one_step_draws(kernel, PRIORS[name], family, x, 3000, rng)
    assert_partition_gof(samples, exact)


@pytest.mark.parametrize(("name", "problem", "scans"),
                         [("py", "bernoulli", 0), ("finite", "niw", 5)])
def test_long_chain_matches_exact_posterior(name, problem, scans):
    rng = np.random.default_rng([SEED, 7, scans])
    family, x = PROBLEMS[problem]()
    kernel = functools.partial(rgsm_move, n_intermediate_scans=scans)
    samples, exact = chain_draws(kernel, PRIORS[name], family, x, 3000, rng)
    assert_partition_gof(samples, exact)


def test_full_iteration_with_gibbs_scans_matches_exact_posterior():
    rng = np.random.default_rng([SEED, 11])
    family, x = bernoulli_problem()
    kernel = on_state(build_moves_then_gibbs(build_rgsm_move(5), n_moves=1, n_gibbs_sweeps=1))
    samples, exact = chain_draws(kernel, PRIORS["mfm"], family, x, 3000, rng)
    assert_partition_gof(samples, exact)


def test_negative_control_path_probability_is_rejected():
    """Scoring the intermediate scans' path in the proposal probability is wrong."""
    rng = np.random.default_rng([SEED, 99])
    family, x = niw_problem()
    kernel = on_state(rgsm_path_probability_move(n_intermediate_scans=2))
    samples, exact = chain_draws(kernel, PRIORS["dp"], family, x, 3000, rng)
    with pytest.raises(AssertionError):
        assert_partition_gof(samples, exact)


# --------------------------------------------------------------------------- PyMC adapter

PM_THIN = 10
PM_SAMPLE_KWARGS = {"tune": 200, "chains": 2, "cores": 1, "progressbar": False,
                        "compute_convergence_checks": False}
PM_BERNOULLI_DATA = np.array([[1, 1, 0], [1, 1, 1], [0, 0, 1], [0, 0, 0], [1, 0, 1], [0, 1, 0]])
PM_NIW_DATA = np.array([[-1.5, -1.2], [-1.9, -1.4], [-1.1, -2.0], [1.4, 1.6], [1.8, 1.1]])


def test_rgsm_step_dirichlet_process_beta_bernoulli_matches_exact():
    import pymc as pm

    from pymc_splitmerge.distributions import ConjugateMixture, DirichletProcess
    from pymc_splitmerge.steps.rgsm import RGSMStep

    family = BetaBernoulli(a=1.0, b=1.0)
    with pm.Model():
        z = DirichletProcess("z", alpha=1.0, n=len(PM_BERNOULLI_DATA))
        ConjugateMixture("y", partition=z, component=family, observed=PM_BERNOULLI_DATA)
        idata = pm.sample(draws=6000, step=RGSMStep(z, n_gibbs_sweeps=0), random_seed=31,
                          **PM_SAMPLE_KWARGS)
    exact = exact_posterior(DirichletProcessPrior(alpha=1.0), family, PM_BERNOULLI_DATA)
    assert_partition_gof(thinned_labels(idata, PM_THIN), exact)
    stats = idata["sample_stats"]
    splits = np.asarray(stats["rgsm_n_split_proposals"].values)
    merges = np.asarray(stats["rgsm_n_merge_proposals"].values)
    np.testing.assert_array_equal(splits + merges, 1)
    rate = np.asarray(stats["rgsm_accept_rate"].values)
    assert 0 < rate.mean() < 1
    np.testing.assert_array_equal(rate, np.asarray(stats["rgsm_n_accepted"].values))


def test_rgsm_step_pitman_yor_niw_matches_exact():
    import pymc as pm

    from pymc_splitmerge.distributions import ConjugateMixture, PitmanYor
    from pymc_splitmerge.steps.rgsm import RGSMStep

    family = NormalInverseWishart(mu0=np.zeros(2), kappa0=0.5, nu0=4.0, psi0=np.eye(2))
    with pm.Model():
        z = PitmanYor("z", alpha=0.8, discount=0.3, n=len(PM_NIW_DATA))
        ConjugateMixture("y", partition=z, component=family, observed=PM_NIW_DATA)
        step = RGSMStep(z, n_intermediate_scans=3, n_split_merge_updates=2, n_gibbs_sweeps=0)
        idata = pm.sample(draws=4000, step=step, random_seed=32, **PM_SAMPLE_KWARGS)
    exact = exact_posterior(PitmanYorPrior(alpha=0.8, discount=0.3), family, PM_NIW_DATA)
    assert_partition_gof(thinned_labels(idata, PM_THIN), exact)


def test_rgsm_step_with_random_concentration_matches_quadrature():
    import pymc as pm

    from pymc_splitmerge.distributions import ConjugateMixture, DirichletProcess
    from pymc_splitmerge.steps.concentration import ConcentrationGibbs
    from pymc_splitmerge.steps.rgsm import RGSMStep
    from pymc_splitmerge.testing import exact_posterior_random_concentration

    shape, rate = 2.0, 1.0
    family = BetaBernoulli(a=1.0, b=1.0)
    with pm.Model():
        alpha = pm.Gamma("alpha", alpha=shape, beta=rate)
        z = DirichletProcess("z", alpha=alpha, n=len(PM_BERNOULLI_DATA))
        ConjugateMixture("y", partition=z, component=family, observed=PM_BERNOULLI_DATA)
        idata = pm.sample(draws=3000, step=[RGSMStep(z), ConcentrationGibbs(alpha)],
                          random_seed=33, **PM_SAMPLE_KWARGS)
    exact = exact_posterior_random_concentration(DirichletProcessPrior, (shape, rate), family,
                                                 PM_BERNOULLI_DATA)
    assert_partition_gof(thinned_labels(idata, PM_THIN), exact)


def test_rgsm_step_bad_options_raise():
    import pymc as pm

    from pymc_splitmerge.distributions import ConjugateMixture, DirichletProcess
    from pymc_splitmerge.steps.rgsm import RGSMStep

    with pm.Model():
        z = DirichletProcess("z", alpha=1.0, n=len(PM_BERNOULLI_DATA))
        ConjugateMixture("y", partition=z, component=BetaBernoulli(), observed=PM_BERNOULLI_DATA)
        with pytest.raises(ValueError, match="n_intermediate_scans"):
            RGSMStep(z, n_intermediate_scans=-2)
        with pytest.raises(ValueError, match="n_split_merge_updates"):
            RGSMStep(z, n_split_merge_updates=0)
        with pytest.raises(TypeError, match="n_gibbs_sweeps"):
            RGSMStep(z, n_gibbs_sweeps="1")
        step = RGSMStep(z)
        assert (step.n_intermediate_scans, step.n_split_merge_updates, step.n_gibbs_sweeps) == (
            5, 1, 1)
        assert RGSMStep(z, n_gibbs_sweeps=0).n_gibbs_sweeps == 0
        with pytest.raises(TypeError, match="n_gibbs_scans"):  # one name per option
            RGSMStep(z, n_gibbs_scans=0)
