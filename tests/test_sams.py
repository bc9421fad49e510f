"""SAMS kernel (Dahl 2003) and SAMSStep: references, exact invariance, negative control.

Cluster anchors (``build_sams_move(cluster_anchors=True)``, ``SAMSStep(z,
anchor_proposal="cluster")``): the built move is the stage-1 update of ``splitmerge_start``
(``_sams_updates``, tested in tests/test_start.py) seeded per call; one-step invariance for
every prior and problem, a ``pm.sample`` χ² check, reproducibility, and the negative control
without the anchor-law ratio.
"""

from __future__ import annotations

import numpy as np
import pytest
from broken_kernels import (
    on_state,
    sams_cluster_anchors_without_anchor_law_ratio,
    sams_sampled_reverse_split_move,
)
from conftest import (
    PRIORS,
    PROBLEMS,
    bernoulli_problem,
    chain_draws,
    niw_problem,
    one_step_draws,
    thinned_labels,
)
from kernel_checks import exactness_tests
from kernel_references import (
    propose_sams,
    reference_log_split_weight,
    reference_sequential_allocation,
    reference_two_way_log_probabilities,
)

from pymc_splitmerge.components.beta_bernoulli import BetaBernoulli
from pymc_splitmerge.components.normal_inverse_wishart import NormalInverseWishart
from pymc_splitmerge.kernels.anchors import AnchorProposal
from pymc_splitmerge.kernels.gibbs import gibbs_sweep
from pymc_splitmerge.kernels.rng import numba_seed_from
from pymc_splitmerge.kernels.sams import (
    _sams_updates,
    build_sams_move,
    sams_move,
    sequential_allocation,
)
from pymc_splitmerge.kernels.splitmerge_common import (
    MOVE_MERGE,
    MOVE_SPLIT,
    build_moves_then_gibbs,
    metropolis_accept,
    two_way_log_probabilities,
)
from pymc_splitmerge.kernels.state import PartitionState, PriorTables
from pymc_splitmerge.priors.dirichlet_process import DirichletProcessPrior
from pymc_splitmerge.priors.finite_dirichlet import FiniteDirichletPrior
from pymc_splitmerge.priors.pitman_yor import PitmanYorPrior
from pymc_splitmerge.priors.seating import log_split_weight
from pymc_splitmerge.testing import assert_partition_gof, exact_posterior

SEED = 20240611


# --------------------------------------------------------------------------- references


@pytest.mark.parametrize("problem", sorted(PROBLEMS))
def test_sequential_allocation_matches_reference(problem):
    rng = np.random.default_rng(SEED)
    family, x = PROBLEMS[problem]()
    n = x.shape[0]
    log_w_table = PRIORS["py"].tables(n)[1]
    for _ in range(10):
        points = rng.permutation(n)
        anchor_i, anchor_j, order = points[0], points[1], points[2:].astype(np.int64)
        sides = np.empty(order.shape[0], dtype=np.int64)
        log_q, stats_a, _stats_b, size_a, size_b = sequential_allocation(
            family.family_id, family.params, x, anchor_i, anchor_j, order, False, sides,
            rng.random(order.shape[0]), log_w_table, family.empty_stats)
        expected = reference_sequential_allocation(family, x, anchor_i, anchor_j, order, sides,
                                                   log_w_table)
        np.testing.assert_allclose(log_q, expected, rtol=1e-9, atol=1e-9)
        forced = sequential_allocation(family.family_id, family.params, x, anchor_i, anchor_j,
                                       order, True, sides.copy(), np.empty(0), log_w_table,
                                       family.empty_stats)
        np.testing.assert_allclose(forced[0], log_q, rtol=1e-12, atol=1e-12)
        members_a = np.concatenate(([anchor_i], order[sides == 0]))
        cluster = family.cluster_columns  # the update counter is history
        np.testing.assert_allclose(stats_a[cluster], family.stats_of(x[members_a])[cluster],
                                   atol=1e-9)
        assert size_a == members_a.shape[0] and size_a + size_b == n


@pytest.mark.parametrize("problem", sorted(PROBLEMS))
def test_two_way_probabilities_match_reference(problem):
    family, x = PROBLEMS[problem]()
    log_w_table = PRIORS["mfm"].tables(x.shape[0])[1]
    points_a, points_b = [0, 2], [3]
    stats_a, stats_b = family.stats_of(x[points_a]), family.stats_of(x[points_b])
    got = two_way_log_probabilities(family.family_id, family.params, x[4], stats_a, 2, stats_b,
                                    1, log_w_table)
    expected = reference_two_way_log_probabilities(family, x[4], points_a, points_b, x,
                                                   log_w_table)
    np.testing.assert_allclose(got, expected, rtol=1e-9)
    np.testing.assert_allclose(np.logaddexp(*got), 0.0, atol=1e-12)


@pytest.mark.parametrize("name", sorted(PRIORS))
def test_log_prior_split_ratio_matches_eppf(name):
    prior = PRIORS[name]
    n = 7
    log_v_table, log_w_table = prior.tables(n)
    for n_clusters_merged, size_a, size_b in [(1, 3, 4), (2, 2, 3), (3, 1, 1), (2, 1, 5)]:
        got = log_split_weight(log_v_table, log_w_table, n_clusters_merged, size_a, size_b)
        expected = reference_log_split_weight(prior, n, n_clusters_merged, size_a, size_b)
        if np.isneginf(expected):
            assert np.isneginf(got)
        else:
            np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9)


def test_metropolis_accept_edge_cases():
    rng = np.random.default_rng(SEED)
    assert not metropolis_accept(float("nan"), rng)
    assert not metropolis_accept(-np.inf, rng)
    assert metropolis_accept(0.0, rng) and metropolis_accept(np.inf, rng)
    frequency = np.mean([metropolis_accept(np.log(0.3), rng) for _ in range(4000)])
    assert abs(frequency - 0.3) < 4 * np.sqrt(0.3 * 0.7 / 4000)


def test_finite_dirichlet_never_exceeds_k():
    family, x = bernoulli_problem()
    prior = FiniteDirichletPrior(alpha=1.0, k=2)
    log_v_table, log_w_table = prior.tables(x.shape[0])
    rng = np.random.default_rng(SEED)
    state = PartitionState(family, x, np.array([0, 0, 0, 1, 1, 1]))
    n_blocked = 0
    for _ in range(300):
        proposal = propose_sams(state, log_v_table, log_w_table, rng)
        if proposal.move == MOVE_SPLIT and state.n_clusters == 2:
            n_blocked += 1
            assert np.isneginf(proposal.log_accept_ratio)
        sams_move(state, log_v_table, log_w_table, rng)
        assert state.n_clusters <= 2
    assert n_blocked > 0
    state.check()


def test_split_and_merge_ratios_are_reciprocal():
    """log r(split c -> c') = -log r(merge c' -> c) for the same anchors and order."""
    family, x = niw_problem()
    prior = PRIORS["py"]
    log_v_table, log_w_table = prior.tables(x.shape[0])
    merged = PartitionState(family, x, np.array([0, 0, 0, 0, 1]))
    for seed in range(20):
        proposal = propose_sams(merged, log_v_table, log_w_table, np.random.default_rng(seed))
        if proposal.move != MOVE_SPLIT:
            continue
        labels = merged.slot_labels.copy()
        labels[proposal.moving_points] = 7
        split = PartitionState(family, x, labels)
        reverse = propose_sams(split, log_v_table, log_w_table, np.random.default_rng(seed))
        assert reverse.move == MOVE_MERGE
        np.testing.assert_allclose(reverse.log_accept_ratio, -proposal.log_accept_ratio,
                                   rtol=1e-9, atol=1e-9)


# --------------------------------------------------------------------------- exact invariance


@pytest.mark.parametrize("problem", sorted(PROBLEMS))
@pytest.mark.parametrize("name", sorted(PRIORS))
def test_one_step_invariance(name, problem):
    rng = np.random.default_rng([SEED, len(name), len(problem)])
    family, x = PROBLEMS[problem]()
    samples, exact = one_step_draws(sams_move, PRIORS[name], family, x, 3000, rng)
    assert_partition_gof(samples, exact)


@pytest.mark.parametrize(("name", "problem"), [("dp", "bernoulli"), ("mfm", "niw")])
def test_long_chain_matches_exact_posterior(name, problem):
    rng = np.random.default_rng([SEED, 7, len(name)])
    family, x = PROBLEMS[problem]()
    samples, exact = chain_draws(sams_move, PRIORS[name], family, x, 3000, rng)
    assert_partition_gof(samples, exact)


_sampled_reverse = on_state(sams_sampled_reverse_split_move())


def test_negative_control_sampled_reverse_split_is_rejected():
    rng = np.random.default_rng([SEED, 99])
    family, x = niw_problem()
    samples, exact = chain_draws(_sampled_reverse, PRIORS["dp"], family, x, 3000, rng)
    with pytest.raises(AssertionError):
        assert_partition_gof(samples, exact)


# --------------------------------------------------------------------------- cluster anchors

_CLUSTER_MOVE = build_sams_move(cluster_anchors=True)
_CLUSTER_MOVE_WITHOUT_ANCHOR_RATIO = sams_cluster_anchors_without_anchor_law_ratio()


def _cluster_anchor_move(state, log_v_table, log_w_table, rng, move=_CLUSTER_MOVE):
    return move(state.model, state.partition, PriorTables(log_v_table, log_w_table), rng)


def test_cluster_anchor_move_is_the_stage_one_update_seeded_per_call():
    """One implementation of the law: the built move = one ``_sams_updates`` update from a
    seed drawn the same way, and reports the move it made."""
    family, x = niw_problem(6)
    tables = PriorTables(*PRIORS["py"].tables(x.shape[0]))
    built = PartitionState(family, x, np.zeros(x.shape[0], dtype=np.int64))
    looped = PartitionState(family, x, np.zeros(x.shape[0], dtype=np.int64))
    rng_built, rng_looped = np.random.default_rng(SEED), np.random.default_rng(SEED)
    infos = []
    for _ in range(300):
        before = looped.labels()
        infos.append(_CLUSTER_MOVE(built.model, built.partition, tables, rng_built))
        n_accepted, move, accepted, log_ratio = _sams_updates(
            looped.model, looped.partition, tables, 1, numba_seed_from(rng_looped))
        np.testing.assert_array_equal(built.labels(), looped.labels())
        assert infos[-1].accepted == accepted == bool(n_accepted)
        assert infos[-1].move == move
        np.testing.assert_equal(infos[-1].log_accept_ratio, log_ratio)
        assert infos[-1].accepted == (not np.array_equal(before, looped.labels()))
    built.check()
    moves = {info.move for info in infos}
    assert {MOVE_SPLIT, MOVE_MERGE} <= moves
    assert all(np.isfinite(info.log_accept_ratio) for info in infos if info.accepted)


(test_cluster_anchor_move_one_step_invariance,
 test_negative_control_cluster_anchors_without_the_anchor_law_ratio_is_rejected) = \
    exactness_tests(on_state(_CLUSTER_MOVE), on_state(_CLUSTER_MOVE_WITHOUT_ANCHOR_RATIO),
                    PRIORS, PROBLEMS, [SEED, 41])


def test_cluster_anchor_bad_options_raise():
    with pytest.raises(ValueError, match="anchor_proposal must be None"):
        build_sams_move(AnchorProposal("uniform", n_anchors=2), cluster_anchors=True)
    with pytest.raises(TypeError, match="_negative_control"):  # not a public option
        build_sams_move(cluster_anchors=True, _negative_control="sampled_reverse_split")
    family, x = niw_problem(1)
    state = PartitionState(family, x, np.zeros(1, dtype=np.int64))
    info = _cluster_anchor_move(state, *PRIORS["dp"].tables(1), np.random.default_rng(0))
    assert info.move == 0 and not info.accepted


# --------------------------------------------------------------------------- PyMC adapter

PM_THIN = 10
PM_SAMPLE_KWARGS = {"tune": 200, "chains": 2, "cores": 1, "progressbar": False,
                        "compute_convergence_checks": False}
PM_BERNOULLI_DATA = np.array([[1, 1, 0], [1, 1, 1], [0, 0, 1], [0, 0, 0], [1, 0, 1], [0, 1, 0]])
PM_NIW_DATA = np.array([[-1.5, -1.2], [-1.9, -1.4], [-1.1, -2.0], [1.4, 1.6], [1.8, 1.1]])


def test_sams_step_dirichlet_process_beta_bernoulli_matches_exact():
    import pymc as pm

    from pymc_splitmerge.distributions import ConjugateMixture, DirichletProcess
    from pymc_splitmerge.steps.sams import SAMSStep

    family = BetaBernoulli(a=1.0, b=1.0)
    with pm.Model():
        z = DirichletProcess("z", alpha=1.0, n=len(PM_BERNOULLI_DATA))
        ConjugateMixture("y", partition=z, component=family, observed=PM_BERNOULLI_DATA)
        idata = pm.sample(draws=6000, step=SAMSStep(z), random_seed=21, **PM_SAMPLE_KWARGS)
    exact = exact_posterior(DirichletProcessPrior(alpha=1.0), family, PM_BERNOULLI_DATA)
    assert_partition_gof(thinned_labels(idata, PM_THIN), exact)
    stats = idata["sample_stats"]
    moves = np.asarray(stats["sams_move"].values)
    accepted = np.asarray(stats["sams_accepted"].values)
    assert set(np.unique(moves)) == {MOVE_SPLIT, MOVE_MERGE}
    assert 0 < accepted.mean() < 1
    assert "sams_log_accept_ratio" in stats


def test_sams_step_pitman_yor_niw_with_informed_anchors_matches_exact():
    import pymc as pm

    from pymc_splitmerge.distributions import ConjugateMixture, PitmanYor
    from pymc_splitmerge.steps.sams import SAMSStep

    family = NormalInverseWishart(mu0=np.zeros(2), kappa0=0.5, nu0=4.0, psi0=np.eye(2))
    with pm.Model():
        z = PitmanYor("z", alpha=0.8, discount=0.3, n=len(PM_NIW_DATA))
        ConjugateMixture("y", partition=z, component=family, observed=PM_NIW_DATA)
        step = SAMSStep(z, anchor_proposal="cluster_informed")
        idata = pm.sample(draws=6000, step=step, random_seed=22, **PM_SAMPLE_KWARGS)
    exact = exact_posterior(PitmanYorPrior(alpha=0.8, discount=0.3), family, PM_NIW_DATA)
    assert_partition_gof(thinned_labels(idata, PM_THIN), exact)


def _pitman_yor_niw_cluster_anchor_sample(draws, random_seed, **kwargs):
    import pymc as pm

    from pymc_splitmerge.distributions import ConjugateMixture, PitmanYor
    from pymc_splitmerge.steps.sams import SAMSStep

    family = NormalInverseWishart(mu0=np.zeros(2), kappa0=0.5, nu0=4.0, psi0=np.eye(2))
    with pm.Model():
        z = PitmanYor("z", alpha=0.8, discount=0.3, n=len(PM_NIW_DATA))
        ConjugateMixture("y", partition=z, component=family, observed=PM_NIW_DATA)
        step = SAMSStep(z, anchor_proposal="cluster")
        idata = pm.sample(draws=draws, step=step, random_seed=random_seed,
                          **{**PM_SAMPLE_KWARGS, **kwargs})
    return family, idata


def test_sams_step_pitman_yor_niw_with_cluster_anchors_matches_exact():
    family, idata = _pitman_yor_niw_cluster_anchor_sample(6000, 24)
    exact = exact_posterior(PitmanYorPrior(alpha=0.8, discount=0.3), family, PM_NIW_DATA)
    assert_partition_gof(thinned_labels(idata, PM_THIN), exact)
    stats = idata["sample_stats"]
    moves = np.asarray(stats["sams_move"].values)
    accepted = np.asarray(stats["sams_accepted"].values)
    assert {MOVE_SPLIT, MOVE_MERGE} <= set(np.unique(moves))
    assert 0 < accepted.mean() < 1


def test_sams_step_with_cluster_anchors_is_reproducible():
    _, first = _pitman_yor_niw_cluster_anchor_sample(100, 25, tune=20)
    _, again = _pitman_yor_niw_cluster_anchor_sample(100, 25, tune=20)
    _, other = _pitman_yor_niw_cluster_anchor_sample(100, 26, tune=20)
    labels = np.asarray(first.labels["z"].values)
    np.testing.assert_array_equal(labels, np.asarray(again.labels["z"].values))
    np.testing.assert_array_equal(first.sample_stats["sams_accepted"].values,
                                  again.sample_stats["sams_accepted"].values)
    assert not np.array_equal(labels, np.asarray(other.labels["z"].values))


def test_sams_step_with_random_concentration_matches_quadrature():
    import pymc as pm

    from pymc_splitmerge.distributions import ConjugateMixture, DirichletProcess
    from pymc_splitmerge.steps.concentration import ConcentrationGibbs
    from pymc_splitmerge.steps.sams import SAMSStep
    from pymc_splitmerge.testing import exact_posterior_random_concentration

    shape, rate = 2.0, 1.0
    family = BetaBernoulli(a=1.0, b=1.0)
    with pm.Model():
        alpha = pm.Gamma("alpha", alpha=shape, beta=rate)
        z = DirichletProcess("z", alpha=alpha, n=len(PM_BERNOULLI_DATA))
        ConjugateMixture("y", partition=z, component=family, observed=PM_BERNOULLI_DATA)
        idata = pm.sample(draws=4000, step=[SAMSStep(z), ConcentrationGibbs(alpha)],
                          random_seed=23, **PM_SAMPLE_KWARGS)
    exact = exact_posterior_random_concentration(DirichletProcessPrior, (shape, rate), family,
                                                 PM_BERNOULLI_DATA)
    assert_partition_gof(thinned_labels(idata, PM_THIN), exact)


def test_sams_step_bad_options_raise():
    import pymc as pm

    from pymc_splitmerge.distributions import ConjugateMixture, DirichletProcess
    from pymc_splitmerge.steps.sams import SAMSStep

    with pm.Model():
        z = DirichletProcess("z", alpha=1.0, n=len(PM_BERNOULLI_DATA))
        ConjugateMixture("y", partition=z, component=BetaBernoulli(), observed=PM_BERNOULLI_DATA)
        with pytest.raises(ValueError, match="anchor_proposal.*'cluster'"):
            SAMSStep(z, anchor_proposal="nearest")
        assert SAMSStep(z, anchor_proposal="cluster").anchor_proposal is None
        with pytest.raises(ValueError, match="n_gibbs_sweeps"):
            SAMSStep(z, n_gibbs_sweeps=-1)
        with pytest.raises(TypeError, match="n_gibbs_sweeps"):
            SAMSStep(z, n_gibbs_sweeps=1.5)
        step = SAMSStep(z, n_gibbs_sweeps=1)
        assert step.competence(z) > 0


# --------------------------------------------------------------------------- built kernels


def test_moves_then_gibbs_is_the_moves_followed_by_the_sweeps():
    """``build_moves_then_gibbs`` = the moves, then the sweeps, with the same randomness."""
    family, x = niw_problem()
    tables = PriorTables(*PRIORS["py"].tables(x.shape[0]))
    composed = PartitionState(family, x, np.zeros(x.shape[0], dtype=np.int64))
    by_hand = PartitionState(family, x, np.zeros(x.shape[0], dtype=np.int64))
    transition = build_moves_then_gibbs(build_sams_move(), n_moves=2, n_gibbs_sweeps=2)
    rng_composed, rng_by_hand = np.random.default_rng(SEED), np.random.default_rng(SEED)
    for _ in range(20):
        info = transition(composed.model, composed.partition, tables, rng_composed)
        moves = tuple(sams_move(by_hand, *tables, rng_by_hand) for _ in range(2))
        gibbs = gibbs_sweep(by_hand, *tables, rng_by_hand, n_gibbs_sweeps=2)
        assert info.moves == moves and info.gibbs == gibbs
        np.testing.assert_array_equal(composed.labels(), by_hand.labels())
    composed.check()
    with pytest.raises(ValueError, match="n_gibbs_sweeps"):
        build_moves_then_gibbs(build_sams_move(), n_gibbs_sweeps=-1)


def test_one_entry_point_name_per_kernel():
    from pymc_splitmerge.kernels import arm, pgsm, rgsm, sams

    for module, name in ((sams, "sams"), (rgsm, "rgsm"), (pgsm, "pgsm"), (arm, "arm")):
        assert hasattr(module, f"{name}_move") and hasattr(module, f"build_{name}_move")
        assert not hasattr(module, f"{name}_step"), name
