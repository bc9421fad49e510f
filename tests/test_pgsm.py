"""Tests of the PGSM kernel (kernels/pgsm.py) and the SMC helpers (kernels/smc.py).

Exactness is checked by one-step invariance: exact i.i.d. draws from the enumerated posterior,
PGSM transitions applied to each, chi-square against the same posterior.  The negative
control (plain SMC without the pinned reference path) must fail the same test.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from broken_kernels import on_state, pgsm_plain_smc_move
from conftest import PRIORS, thinned_labels
from kernel_checks import one_step_invariance_draws
from kernel_references import reference_incremental_log_weights

from pymc_splitmerge.components import BetaBernoulli, NormalInverseWishart
from pymc_splitmerge.kernels import smc
from pymc_splitmerge.kernels.pgsm import (
    MOVE_NONE,
    Lineage,
    PGSMOptions,
    csmc_sweep,
    particle_state_number,
    pgsm_move,
)
from pymc_splitmerge.kernels.rng import seed_numba_from
from pymc_splitmerge.kernels.state import Model, PartitionState
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

BERNOULLI_DATA = np.array(
    [[1, 1, 0, 1], [1, 1, 0, 0], [0, 0, 1, 1], [0, 1, 1, 1], [1, 1, 1, 0], [0, 0, 1, 0]]
)
NORMAL_DATA = np.array(
    [[0.0, 0.1], [0.4, -0.3], [2.5, 2.0], [2.2, 2.6], [1.2, 1.0], [-0.5, 0.2]]
)


def bernoulli():
    return BetaBernoulli(a=1.0, b=1.0)


def normal():
    return NormalInverseWishart(mu0=np.zeros(2), kappa0=0.5, nu0=4.0, psi0=0.5 * np.eye(2))


def one_step_labels(prior, family, data, rng, num_samples=2000, transitions=2, **options):
    """Exact draws, ``transitions`` PGSM transitions each; returns (labels, exact)."""
    kernel = functools.partial(pgsm_move, **options)
    return one_step_invariance_draws(kernel, prior, family, data, num_samples, rng,
                                     transitions=transitions)


# --------------------------------------------------------------------------- smc helpers


def test_normalise_log_weights_matches_reference_and_nan_policy():
    log_weights = np.array([-1.0, np.nan, 2.0, -np.inf, 0.5])
    weights = np.empty(5)
    log_sum = smc.normalise_log_weights(log_weights, weights)
    expected, expected_log_sum = smc.reference_normalise_log_weights(log_weights)
    np.testing.assert_allclose(weights, expected)
    assert weights[1] == 0.0 and weights[3] == 0.0
    np.testing.assert_allclose(log_sum, np.log(np.exp(-1) + np.exp(2) + np.exp(0.5)))
    np.testing.assert_allclose(log_sum, expected_log_sum)
    degenerate = np.empty(3)
    assert smc.normalise_log_weights(np.full(3, -np.inf), degenerate) == -np.inf
    np.testing.assert_allclose(degenerate, 1 / 3)
    np.testing.assert_allclose(smc.relative_ess(weights), smc.reference_relative_ess(weights))
    assert smc.relative_ess(np.full(4, 0.25)) == pytest.approx(1.0)


def test_conditional_resampling_pins_particle_zero_and_follows_weights():
    rng = np.random.default_rng(11)
    weights = np.array([0.1, 0.5, 0.0, 0.4])
    seed_numba_from(rng)
    counts = np.zeros(4)
    ancestors = np.empty(4, dtype=np.int64)
    repeats = 4000
    for _ in range(repeats):
        smc.conditional_multinomial_resample(weights, ancestors)
        assert ancestors[0] == 0
        counts += np.bincount(ancestors[1:], minlength=4)
    reference = np.zeros(4)
    for _ in range(repeats):
        reference += np.bincount(
            smc.reference_conditional_multinomial_resample(weights, rng)[1:], minlength=4)
    from scipy import stats

    expected = weights * 3 * repeats
    keep = expected > 0
    assert counts[~keep].sum() == 0 and reference[~keep].sum() == 0
    for observed in (counts, reference):
        statistic = np.sum((observed[keep] - expected[keep]) ** 2 / expected[keep])
        assert stats.chi2.sf(statistic, keep.sum() - 1) > GOF_PVALUE_THRESHOLD


# --------------------------------------------------------------------------- numba vs reference


def _sweep(family, x, points, m, reference, prior, n_other, num_particles, threshold,
           annealing, rng, deduplicate=True):
    log_v_table, log_w_table = prior.tables(x.shape[0])
    n = len(points)
    decisions = np.empty((n, num_particles), dtype=np.int64)
    ancestors = np.empty((n, num_particles), dtype=np.int64)
    log_incremental = np.empty((n, num_particles))
    log_proposals = np.empty((n, num_particles))
    seed_numba_from(rng)
    model = Model(int(family.family_id), np.ascontiguousarray(family.params), x)
    seating = smc.SeatingStep(log_v_table, log_v_table, log_w_table, log_w_table, n_other,
                              False)
    options = PGSMOptions(num_particles, float(threshold), annealing, True, deduplicate)
    lineage = Lineage(decisions, ancestors, log_incremental, log_proposals)
    result = csmc_sweep(model, seating, np.asarray(points, dtype=np.int64), m,
                        np.asarray(reference, dtype=np.int64),
                        np.ascontiguousarray(family.empty_stats), options, lineage)
    return result, decisions, ancestors, log_incremental, log_proposals


@pytest.mark.parametrize("annealing", [True, False])
@pytest.mark.parametrize("m", [2, 3])
@pytest.mark.parametrize("threshold", [0.5, 1.0])
def test_numba_sweep_matches_plain_python_reference(annealing, m, threshold):
    rng = np.random.default_rng(5 + m)
    family = normal()
    data = np.vstack([NORMAL_DATA, NORMAL_DATA[::-1] + 0.3])
    x = family.prepare_data(data)
    prior = PitmanYorPrior(alpha=0.7, discount=0.3)  # V(n, K) depends on K
    points = rng.permutation(x.shape[0])[:9]
    reference = np.r_[np.arange(m), rng.integers(0, m, size=9 - m)]
    n_other = 2
    (chosen, generations, _, _), decisions, ancestors, log_inc, log_prop = _sweep(
        family, x, points, m, reference, prior, n_other, 6, threshold, annealing, rng)
    assert generations == 9 and chosen >= 0
    log_v_table, log_w_table = prior.tables(x.shape[0])
    expected_inc, expected_prop = reference_incremental_log_weights(
        family, x, points, m, n_other, log_v_table, log_w_table, decisions, ancestors, annealing)
    np.testing.assert_allclose(log_inc, expected_inc, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(log_prop, expected_prop, rtol=1e-9, atol=1e-9)
    # the reference path is pinned: particle 0's lineage reproduces it
    p, path = 0, np.empty(9, dtype=np.int64)
    for t in range(8, -1, -1):
        path[t] = decisions[t, p]
        p = ancestors[t, p]
    np.testing.assert_array_equal(path, reference)
    assert np.all(ancestors[1:, 0] == 0)


@pytest.mark.parametrize("threshold", [0.0, 0.5, 1.0])
def test_twin_caching_changes_nothing(threshold):
    family = normal()
    data = np.vstack([NORMAL_DATA, NORMAL_DATA + 0.2, NORMAL_DATA - 0.1])
    x = family.prepare_data(data)
    prior = DirichletProcessPrior(alpha=0.5)
    points = np.random.default_rng(0).permutation(18)
    reference = np.r_[0, 1, (points[2:] % 2)]
    results = [_sweep(family, x, points, 2, reference, prior, 1, 12, threshold, True,
                      np.random.default_rng(99), deduplicate=flag) for flag in (True, False)]
    assert results[0][0] == results[1][0]
    for first, second in zip(results[0][1:], results[1][1:]):
        np.testing.assert_array_equal(first, second)


@pytest.mark.parametrize("prior_name", ["finite", "py", "mfm"])
def test_final_target_is_full_posterior_including_v_of_k(prior_name):
    """log γ_n differences between particles = log π differences of the full partitions.

    The sum of (log incremental weight + log proposal) along a lineage is
    log γ_n - log γ_1 (non-annealed targets), so it checks that the target of a particle
    uses log V(n, K_other + #blocks).
    """
    rng = np.random.default_rng(3)
    prior = {"finite": FiniteDirichletPrior(alpha=0.8, k=4), "py": PRIORS["py"],
             "mfm": PRIORS["mfm"]}[prior_name]
    family = bernoulli()
    data = np.vstack([BERNOULLI_DATA, 1 - BERNOULLI_DATA[:3]])
    x = family.prepare_data(data)
    other = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2])  # current partition; anchors in clusters 1, 2
    closure = np.flatnonzero(other > 0)
    points = np.r_[3, 6, rng.permutation([4, 5, 7, 8])]
    reference = np.array([0, 1] + [0 if p in (4, 5) else 1 for p in points[2:]])
    m, num_particles = 2, 8
    (_, generations, _, _), decisions, ancestors, log_inc, log_prop = _sweep(
        family, x, points, m, reference, prior, 1, num_particles, 0.5, False, rng)
    assert generations == len(closure)
    log_paths, log_targets = [], []
    for q in range(num_particles):
        p, total, blocks = q, 0.0, np.empty(len(points), dtype=np.int64)
        for t in range(len(points) - 1, -1, -1):
            total += log_inc[t, p] + log_prop[t, p]
            blocks[t] = decisions[t, p]
            p = ancestors[t, p]
        labels = other.copy()
        labels[points] = 10 + blocks
        state = PartitionState(family, x, labels)
        log_paths.append(total)
        log_targets.append(state.log_joint(prior))
    np.testing.assert_allclose(np.diff(log_paths), np.diff(log_targets), rtol=1e-9, atol=1e-8)


def test_figure2_encoding():
    assert particle_state_number(1, 1, 0) == 1
    assert particle_state_number(2, 1, 0) == 2
    assert particle_state_number(3, 2, 0) == 3
    assert particle_state_number(3, 2, 1) == 4


# --------------------------------------------------------------------------- invariance


@pytest.mark.parametrize("prior_name", ["dp", "py", "finite", "mfm"])
@pytest.mark.parametrize("family_name", ["bernoulli", "normal"])
def test_one_step_invariance(prior_name, family_name):
    rng = np.random.default_rng(sum(map(ord, prior_name + family_name)))
    family = {"bernoulli": bernoulli, "normal": normal}[family_name]()
    data = {"bernoulli": BERNOULLI_DATA, "normal": NORMAL_DATA}[family_name][:5]
    out, exact = one_step_labels(PRIORS[prior_name], family, data, rng)
    assert_partition_gof(out, exact)


@pytest.mark.parametrize(
    "options",
    [
        {"n_anchors": 3},
        {"n_anchors": 3, "annealing": False, "resampling_threshold": 1.0},
        {"annealing": False},
        {"resampling_threshold": 0.0},
        {"resampling_threshold": 1.0, "num_particles": 3},
        {"num_particles": 2},
    ],
    ids=["three-anchors", "three-anchors-plain-beta1", "no-annealing", "beta0", "beta1", "N2"],
)
def test_one_step_invariance_options(options):
    rng = np.random.default_rng(sum(map(ord, str(options))))
    prior = FiniteDirichletPrior(alpha=1.0, k=3) if options.get("n_anchors") == 3 else (
        DirichletProcessPrior(alpha=0.7))
    out, exact = one_step_labels(prior, bernoulli(), BERNOULLI_DATA, rng, num_samples=2000,
                                 **options)
    assert_partition_gof(out, exact)


def test_negative_control_plain_smc_is_rejected():
    rng = np.random.default_rng(2024)
    kernel = on_state(pgsm_plain_smc_move(num_particles=2))
    out, exact = one_step_invariance_draws(kernel, DirichletProcessPrior(alpha=1.0), normal(),
                                           NORMAL_DATA[:5], 2000, rng, transitions=2)
    result = chisquare_partitions(out, exact)
    assert result.pvalue < GOF_PVALUE_THRESHOLD


# --------------------------------------------------------------------------- bookkeeping


def test_state_stays_consistent_and_moves_happen():
    rng = np.random.default_rng(8)
    family = normal()
    data = np.vstack([rng.normal(size=(20, 2)), rng.normal(size=(20, 2)) + 5.0])
    x = family.prepare_data(data)
    prior = DirichletProcessPrior(alpha=1.0)
    log_v_table, log_w_table = prior.tables(40)
    state = PartitionState(family, x, np.zeros(40, dtype=np.int64))
    moves = []
    for k in range(300):
        info = pgsm_move(state, log_v_table, log_w_table, rng, n_anchors=2 + k % 2)
        moves.append(info.move)
        assert info.closure_size >= 2 and 0 < info.relative_ess <= 1.0 + 1e-12
    state.check()
    assert len(set(moves) - {MOVE_NONE}) >= 2
    labels = state.labels()
    # the two well separated groups are never mixed at the end
    assert set(labels[:20]).isdisjoint(set(labels[20:]))


def test_bad_options_raise():
    family = bernoulli()
    x = family.prepare_data(BERNOULLI_DATA)
    state = PartitionState(family, x, np.zeros(6, dtype=np.int64))
    tables = DirichletProcessPrior(alpha=1.0).tables(6)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="num_particles"):
        pgsm_move(state, *tables, rng, num_particles=1)
    with pytest.raises(ValueError, match="resampling_threshold"):
        pgsm_move(state, *tables, rng, resampling_threshold=1.5)
    with pytest.raises(ValueError, match="n_anchors"):
        pgsm_move(state, *tables, rng, n_anchors=1)
    with pytest.raises(ValueError, match="distinct"):
        pgsm_move(state, *tables, rng, anchors=[1, 1])
    with pytest.raises(ValueError, match="use prior.tables"):
        pgsm_move(state, tables[0][:3], tables[1], rng)


# --------------------------------------------------------------------------- PyMC step


PM_THIN = 5
SAMPLE_KWARGS = {"tune": 50, "chains": 2, "cores": 1, "progressbar": False,
                     "compute_convergence_checks": False}


def test_pgsm_step_dirichlet_process_bernoulli_matches_exact():
    import pymc as pm

    from pymc_splitmerge.distributions import ConjugateMixture, DirichletProcess
    from pymc_splitmerge.steps.pgsm import PGSMStep

    family = bernoulli()
    with pm.Model():
        z = DirichletProcess("z", alpha=1.0, n=len(BERNOULLI_DATA))
        ConjugateMixture("y", partition=z, component=family, observed=BERNOULLI_DATA)
        step = PGSMStep(z, num_particles=10)
        idata = pm.sample(draws=3000, step=step, random_seed=21, **SAMPLE_KWARGS)
    exact = exact_posterior(DirichletProcessPrior(alpha=1.0), family, BERNOULLI_DATA)
    assert_partition_gof(thinned_labels(idata, PM_THIN), exact)
    stats = idata["sample_stats"]
    moves = np.asarray(stats["pgsm_move"].values)
    assert set(np.unique(moves)) <= {0, 1, 2, 3} and (moves == 1).any() and (moves == 2).any()
    ess = np.asarray(stats["pgsm_relative_ess"].values)
    assert np.all((ess > 0) & (ess <= 1 + 1e-12))
    assert np.asarray(stats["pgsm_resampling_events"].values).min() >= 0


def test_pgsm_step_finite_normal_informed_anchors_matches_exact():
    import pymc as pm

    from pymc_splitmerge.distributions import ConjugateMixture, FiniteDirichlet
    from pymc_splitmerge.steps.pgsm import PGSMStep

    family = normal()
    data = NORMAL_DATA[:5]
    with pm.Model():
        z = FiniteDirichlet("z", alpha=1.0, k=3, n=len(data))
        ConjugateMixture("y", partition=z, component=family, observed=data)
        step = PGSMStep(z, num_particles=10, anchor_proposal="cluster_informed")
        idata = pm.sample(draws=3000, step=step, random_seed=22, **SAMPLE_KWARGS)
    assert step.anchor_proposal.is_adapted and not step.tune  # adapted in tuning, then frozen
    exact = exact_posterior(FiniteDirichletPrior(alpha=1.0, k=3), family, data)
    assert_partition_gof(thinned_labels(idata, PM_THIN), exact)


def test_pgsm_step_finite_three_anchors_matches_exact():
    import pymc as pm

    from pymc_splitmerge.distributions import ConjugateMixture, FiniteDirichlet
    from pymc_splitmerge.steps.pgsm import PGSMStep

    family = normal()
    data = NORMAL_DATA
    with pm.Model():
        z = FiniteDirichlet("z", alpha=1.0, k=2, n=len(data))
        ConjugateMixture("y", partition=z, component=family, observed=data)
        idata = pm.sample(draws=3000, step=PGSMStep(z, n_anchors=3, n_gibbs_sweeps=1),
                          random_seed=23, **SAMPLE_KWARGS)
    exact = exact_posterior(FiniteDirichletPrior(alpha=1.0, k=2), family, data)
    assert_partition_gof(thinned_labels(idata, PM_THIN), exact)


@pytest.mark.parametrize(
    "options, match",
    [
        ({"num_particles": 1}, "num_particles"),
        ({"resampling_threshold": -0.1}, "resampling_threshold"),
        ({"n_anchors": 1}, "n_anchors"),
        ({"anchor_proposal": "nearest"}, "unknown anchor proposal"),
        ({"n_anchors": 3, "anchor_proposal": "threshold_informed"}, "n_anchors=2 only"),
        ({"n_gibbs_sweeps": -1}, "n_gibbs_sweeps"),
    ],
)
def test_pgsm_step_bad_options(options, match):
    import pymc as pm

    from pymc_splitmerge.distributions import ConjugateMixture, DirichletProcess
    from pymc_splitmerge.steps.pgsm import PGSMStep

    with pm.Model():
        z = DirichletProcess("z", alpha=1.0, n=len(BERNOULLI_DATA))
        ConjugateMixture("y", partition=z, component=bernoulli(), observed=BERNOULLI_DATA)
        with pytest.raises(ValueError, match=match):
            PGSMStep(z, **options)
