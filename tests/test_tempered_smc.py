"""Exactness tests of the likelihood-tempered SMC over partitions (kernels/tempered_smc.py).

* one-step invariance of the tempered moves (Gibbs sweeps, SAMS split-merge) for
  pi_beta(c) ∝ p(c) prod_b m(y_b)^beta, exact draws from the enumerated pi_beta, chi^2; negative
  control: the same move at the wrong temperature;
* unbiasedness of Ẑ with a fixed schedule, every prior x 2 families: mean of Ẑ/Z over 1,000
  runs against 1 (|z| at the suite budget), one Gibbs sweep and one split-merge move per
  stage; negative control: the stage increment as the mean of the log weights (Jensen);
* weighted particles resampled only when their ESS falls below ``resample_threshold``: Ẑ
  unbiased with a fixed schedule, every prior x 2 families; negative control: weights not
  carried across a stage that does not resample; the conditional ESS picks the temperature;
  the final law against enumeration;
* adaptive temperatures: the bias of order 1/L shrinks with L;
* the final particle law (one particle per run) against enumeration, chi^2; negative control:
  the moves at a wrong temperature;
* the jackknife standard error of ``pooled_log_evidence`` against the spread of repeated pooled
  estimates (tempered runs on enumerable data; log-normal estimates 1-4 nats wide);
* ``sample_smc(method="tempered")``: layout, evidence, clear errors;
* many runs in one population (``tempered_runs``, which the statistical tests use to stay
  fast): resampling within each run against the reference, each run's own temperatures; the
  adaptive rounds of moves follow the correlation rule and keep Ẑ unbiased on enumerable data.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from conftest import PRIORS, bernoulli_problem, niw_problem
from scipy import stats

from pymc_splitmerge.kernels import tempered_smc as ts
from pymc_splitmerge.kernels.smc import empty_population, particle
from pymc_splitmerge.kernels.state import add
from pymc_splitmerge.testing import (
    GOF_PVALUE_THRESHOLD,
    assert_counts_gof,
    assert_partition_gof,
    exact_posterior,
    exact_prior,
)
from pymc_splitmerge.testing.gof import chisquare_partitions
from pymc_splitmerge.testing.oracle import ExactPosterior

FAMILIES = {"bernoulli": bernoulli_problem, "niw": niw_problem}
SCHEDULE = (0.0, 0.25, 1.0)


def _problem(family_name):
    return FAMILIES[family_name](6 if family_name == "bernoulli" else 5)


def _tempered_exact(prior, family, x, beta, reference_labels=None):
    """The enumerated law pi_beta (prior and posterior enumerations share their order); with
    ``reference_labels`` K the law r_K^(1 - beta) (p m)^beta of the path from the reference."""
    posterior = exact_posterior(prior, family, x)
    prior_law = exact_prior(prior, x.shape[0])
    np.testing.assert_array_equal(posterior.partitions, prior_law.partitions)
    with np.errstate(invalid="ignore"):
        log_likelihood = posterior.log_prob + posterior.log_evidence - prior_law.log_prob
    log_likelihood = np.where(np.isfinite(prior_law.log_prob), log_likelihood, 0.0)
    log_unnormalised = prior_law.log_prob + beta * log_likelihood
    if reference_labels is not None:
        blocks = np.array([np.unique(row).size for row in posterior.partitions])
        log_reference = ts.reference_log_v(reference_labels, x.shape[0])[blocks]
        with np.errstate(invalid="ignore"):
            log_unnormalised = (beta * (prior_law.log_prob + log_likelihood)
                                + (1.0 - beta) * log_reference)
    peak = log_unnormalised[np.isfinite(log_unnormalised)].max()
    log_norm = peak + np.log(np.sum(np.exp(log_unnormalised - peak)))
    return ExactPosterior(posterior.partitions, log_unnormalised - log_norm)


def _population(prepared, labels):
    size, n = labels.shape
    population = empty_population(size, n, prepared.empty_row)
    for p in range(size):
        part = particle(population, prepared.empty_row, p)
        for i in range(n):
            add(prepared.model, part, i, int(labels[p, i]))
    return population


def _one_step(prior, family, x, beta_draws, beta_move, rng, move, num_samples=3000,
              split_merge=None, n_moves=1, reference_labels=None, moves_on_the_path=True):
    """Exact draws from pi_beta_draws (of the path from ``reference_labels`` K labels if given),
    one move at ``beta_move`` on the same path (on the prior path if not ``moves_on_the_path``).
    """
    exact = _tempered_exact(prior, family, x, beta_draws, reference_labels)
    if not moves_on_the_path:
        reference_labels = None
    prepared = ts.prepare_tempered(prior, family, x)
    draws = exact.sample(num_samples, rng)
    population = _population(prepared, draws)
    n = x.shape[0]
    ts.seed_numba_from(rng)
    betas = np.full(num_samples, beta_move)
    moving = np.ones(num_samples, dtype=np.bool_)
    changes = np.zeros(num_samples, dtype=np.int64)
    scales = np.ones(num_samples) if reference_labels is None else np.full(num_samples,
                                                                           beta_move)
    log_v_reference = (np.zeros(n + 2) if reference_labels is None
                       else ts.reference_log_v(reference_labels, n))
    if move == "gibbs":
        ts.tempered_gibbs_sweeps(prepared.model, population, prepared.empty_row, prepared.log_v,
                                 prepared.log_w, betas, scales, log_v_reference, moving, changes,
                                 prepared.log_prior_predictive, 1, np.empty(n + 2), np.arange(n))
    else:
        (split_merge or ts.tempered_split_merge)(
            prepared.model, population, prepared.empty_row, prepared.log_v, prepared.log_w,
            betas, scales, log_v_reference, moving, changes, n_moves,
            np.empty(n, dtype=np.int64), np.empty(n, dtype=np.bool_),
            move == "cluster_split_merge")
    return population.labels.copy(), exact


@pytest.mark.parametrize("move", ["gibbs", "split_merge", "cluster_split_merge"])
@pytest.mark.parametrize("family_name", list(FAMILIES))
@pytest.mark.parametrize("prior_name", list(PRIORS))
def test_tempered_moves_leave_pi_beta_invariant(prior_name, family_name, move):
    family, x = _problem(family_name)
    rng = np.random.default_rng(zlib.crc32(f"{prior_name}-{family_name}-{move}".encode()))
    labels, exact = _one_step(PRIORS[prior_name], family, x, 0.4, 0.4, rng, move)
    assert_partition_gof(labels, exact)


@pytest.mark.parametrize("move", ["gibbs", "split_merge", "cluster_split_merge"])
def test_negative_control_move_at_wrong_temperature_is_rejected(move):
    family, x = _problem("niw")
    rng = np.random.default_rng(5)
    labels, exact = _one_step(PRIORS["dp"], family, x, 0.2, 1.0, rng, move)
    assert chisquare_partitions(labels, exact).pvalue < GOF_PVALUE_THRESHOLD


def test_negative_control_cluster_anchors_without_anchor_law_ratio_is_rejected(monkeypatch):
    """The cluster-anchor SAMS move without the anchor law's log ratio (the plain-Python body
    of the compiled move with that term set to 0) is not invariant: the same test rejects it."""
    family, x = _problem("niw")
    prior = PRIORS["dp"]
    rng = np.random.default_rng(9)
    monkeypatch.setattr(ts, "_cluster_anchor_log_ratio", lambda k, m, size_a, size_b: 0.0)
    labels, exact = _one_step(prior, family, x, 0.4, 0.4, rng, "cluster_split_merge",
                              split_merge=ts.tempered_split_merge.py_func, n_moves=3)
    assert chisquare_partitions(labels, exact).pvalue < GOF_PVALUE_THRESHOLD


# -------------------------------------------------------------------------- unbiasedness
RUNS = 1000


def _evidence_z(prior, family, x, rng, num_particles=4, log_z=None, **options):
    if log_z is None:
        log_z = exact_posterior(prior, family, x).log_evidence
    log_hat = ts.tempered_log_evidence_runs(prior, family, x, num_particles, RUNS, rng,
                                            **options)
    ratio = np.exp(log_hat - log_z)
    return (ratio.mean() - 1.0) / (ratio.std(ddof=1) / np.sqrt(ratio.size)), ratio.mean()


def _two_sided(z):
    return 2 * stats.norm.sf(abs(z))


# ----------------------------------------------- weighted particles, resampling when ESS falls
WEIGHTED_SCHEDULE = (0.0, 0.25, 0.5, 1.0)
# one SAMS move and no Gibbs sweep per stage: the particles keep part of their law between
# stages, so the weights they carry matter (with a Gibbs sweep on 5-6 points they hardly do)
WEIGHTED_OPTIONS = {"temperatures": WEIGHTED_SCHEDULE, "n_gibbs_sweeps": 0,
                    "n_split_merge": 1, "resample_threshold": 0.8}


def _weighted_evidence_z(prior, family, x, rng):
    results = ts.tempered_runs(prior, family, x, 4, RUNS, rng, **WEIGHTED_OPTIONS)
    ratio = np.exp(np.array([r.log_evidence for r in results])
                   - exact_posterior(prior, family, x).log_evidence)
    z = (ratio.mean() - 1.0) / (ratio.std(ddof=1) / np.sqrt(ratio.size))
    resampled = np.array([r.resampled[:-1] for r in results])  # the last stage always does
    return z, ratio.mean(), resampled


@pytest.mark.parametrize("family_name", list(FAMILIES))
@pytest.mark.parametrize("prior_name", list(PRIORS))
def test_adaptive_resampling_fixed_schedule_evidence_is_unbiased(prior_name, family_name):
    """Weighted particles resampled only when the ESS of their weights falls below
    ``resample_threshold`` (moves at every stage, log Ẑ += log Σ W w): Ẑ is unbiased."""
    family, x = _problem(family_name)
    rng = np.random.default_rng(zlib.crc32(f"weighted-{prior_name}-{family_name}".encode()))
    z, mean, resampled = _weighted_evidence_z(PRIORS[prior_name], family, x, rng)
    assert _two_sided(z) >= GOF_PVALUE_THRESHOLD, (mean, z)
    # both branches ran: stages that resampled and stages that carried their weights
    assert 0.02 < resampled.mean() < 0.98, resampled.mean()


def test_negative_control_weights_not_carried_are_rejected(monkeypatch):
    """The same test rejects a stage that neither resamples nor carries its weights."""
    family, x = _problem("bernoulli")
    monkeypatch.setattr(ts, "_carry_weights",
                        lambda log_weights, log_incremental: np.zeros_like(log_weights))
    z, mean, _ = _weighted_evidence_z(PRIORS["dp"], family, x, np.random.default_rng(24))
    assert _two_sided(z) < GOF_PVALUE_THRESHOLD, (mean, z)


def test_every_stage_resamples_by_default_and_the_last_always():
    family, x = _problem("niw")
    rng = np.random.default_rng(25)
    for result in ts.tempered_runs(PRIORS["dp"], family, x, 4, 20, rng):
        assert result.resampled.all()
    weighted = ts.tempered_runs(PRIORS["dp"], family, x, 4, 20, rng, resample_threshold=0.3,
                                max_temperature_step=0.2)
    assert all(r.resampled[-1] for r in weighted)
    assert not all(r.resampled.all() for r in weighted)


def test_conditional_ess_chooses_the_temperature():
    """With carried weights the step keeps the conditional ESS (Σ W w)² / Σ W w² at the
    threshold; equal weights give the ESS criterion's temperature."""
    rng = np.random.default_rng(26)
    rows = rng.normal(-50.0, 10.0, size=(3, 30))
    log_weights = rng.normal(0.0, 1.0, size=(3, 30))
    beta = np.array([0.0, 0.4, 0.8])
    np.testing.assert_allclose(ts.next_temperature(rows, beta, 0.7, 1.0, np.zeros((3, 30))),
                               ts.next_temperature(rows, beta, 0.7, 1.0))
    new = ts.next_temperature(rows, beta, 0.7, 1.0, log_weights)
    weights = np.exp(log_weights) / np.exp(log_weights).sum(axis=1, keepdims=True)
    w = np.exp((new - beta)[:, None] * (rows - rows.max(axis=1, keepdims=True)))
    cess = np.sum(weights * w, axis=1) ** 2 / np.sum(weights * w**2, axis=1)
    np.testing.assert_allclose(cess, 0.7, rtol=1e-6)
    # the plain ESS of the incremental weights would pick another temperature
    assert np.all(np.abs(new - ts.next_temperature(rows, beta, 0.7, 1.0)) > 1e-6)


def test_weighted_final_particles_follow_the_posterior():
    family, x = _problem("niw")
    prior = PRIORS["mfm"]
    labels = _final_particles(prior, family, x, np.random.default_rng(27), n_split_merge=2,
                              max_temperature_step=0.4, resample_threshold=0.5)
    assert_partition_gof(labels, exact_posterior(prior, family, x))


def test_resample_threshold_clear_errors():
    family, x = _problem("niw")
    rng = np.random.default_rng(0)
    for value in (0.0, 1.5):
        with pytest.raises(ValueError, match="resample_threshold must be in"):
            ts.tempered_runs(PRIORS["dp"], family, x, 4, 1, rng, resample_threshold=value)
    with pytest.raises(ValueError, match="resample_threshold=1"):
        ts.tempered_runs(PRIORS["dp"], family, x, 4, 1, rng, chain_length=2,
                         resample_threshold=0.5)


@pytest.mark.parametrize("family_name", list(FAMILIES))
@pytest.mark.parametrize("prior_name", list(PRIORS))
def test_fixed_schedule_evidence_is_unbiased(prior_name, family_name):
    family, x = _problem(family_name)
    rng = np.random.default_rng(zlib.crc32(f"{prior_name}-{family_name}".encode()))
    z, mean = _evidence_z(PRIORS[prior_name], family, x, rng, temperatures=SCHEDULE,
                          n_gibbs_sweeps=1, n_split_merge=1)
    assert _two_sided(z) >= GOF_PVALUE_THRESHOLD, (mean, z)


@pytest.mark.parametrize("prior_name, family_name", [("dp", "niw"), ("mfm", "bernoulli"),
                                                      ("py", "niw")])
def test_waste_free_fixed_schedule_evidence_is_unbiased(prior_name, family_name):
    """Waste-free chains (chain_length P: L / P resampled starts, P - 1 rounds of moves each,
    every state kept), with cluster-anchor SAMS moves: Ẑ is unbiased on enumerable data."""
    family, x = _problem(family_name)
    rng = np.random.default_rng(zlib.crc32(f"waste-free-{prior_name}-{family_name}".encode()))
    z, mean = _evidence_z(PRIORS[prior_name], family, x, rng, temperatures=SCHEDULE,
                          n_gibbs_sweeps=1, n_split_merge=1, chain_length=2,
                          cluster_anchors=True)
    assert _two_sided(z) >= GOF_PVALUE_THRESHOLD, (mean, z)


def test_negative_control_waste_free_log_mean_increment_is_rejected(monkeypatch):
    """The same test has power with waste-free chains: the geometric-mean stage factor is
    rejected."""
    family, x = _problem("bernoulli")
    monkeypatch.setattr(ts, "stage_log_increment", lambda values: float(np.mean(values)))
    z, mean = _evidence_z(PRIORS["dp"], family, x, np.random.default_rng(22),
                          temperatures=SCHEDULE, n_gibbs_sweeps=1, chain_length=2)
    assert _two_sided(z) < GOF_PVALUE_THRESHOLD, (mean, z)


def test_waste_free_chains_continue_each_other():
    """State j of a chain is state j - 1 moved once: with moves that change nothing every
    state equals its chain's start, and a chain's states are copies, not the same memory."""
    family, x = _problem("niw")
    results = ts.tempered_runs(PRIORS["dp"], family, x, 6, 2, np.random.default_rng(3),
                               n_gibbs_sweeps=0, n_split_merge=0, chain_length=3,
                               max_temperature_step=0.5)
    for result in results:
        np.testing.assert_array_equal(result.labels[0::3], result.labels[1::3])
        np.testing.assert_array_equal(result.labels[0::3], result.labels[2::3])
    moved = ts.tempered_runs(PRIORS["dp"], family, x, 6, 20, np.random.default_rng(4),
                             n_gibbs_sweeps=1, chain_length=3, max_temperature_step=0.5)
    assert any(np.any(r.labels[0::3] != r.labels[2::3]) for r in moved)


def test_waste_free_clear_errors():
    family, x = _problem("niw")
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="multiple of chain_length"):
        ts.tempered_runs(PRIORS["dp"], family, x, 5, 1, rng, chain_length=2)
    with pytest.raises(ValueError, match="max_move_rounds=1"):
        ts.tempered_runs(PRIORS["dp"], family, x, 4, 1, rng, chain_length=2,
                         max_move_rounds=3)
    with pytest.raises(ValueError, match="chain_length must be"):
        ts.tempered_runs(PRIORS["dp"], family, x, 4, 1, rng, chain_length=0)


def test_negative_control_log_mean_increment_is_rejected(monkeypatch):
    """The stage factor as exp(mean log w) (geometric mean) is biased: the test rejects it."""
    family, x = _problem("bernoulli")
    prior = PRIORS["dp"]

    def geometric_mean_increment(log_incremental_weights):
        return float(np.mean(log_incremental_weights))

    rng = np.random.default_rng(21)
    z, mean = _evidence_z(prior, family, x, rng, temperatures=SCHEDULE, n_gibbs_sweeps=1)
    assert _two_sided(z) >= GOF_PVALUE_THRESHOLD, (mean, z)
    monkeypatch.setattr(ts, "stage_log_increment", geometric_mean_increment)
    z, mean = _evidence_z(prior, family, x, rng, temperatures=SCHEDULE, n_gibbs_sweeps=1)
    assert _two_sided(z) < GOF_PVALUE_THRESHOLD, (mean, z)


# --------------------------------------------------- the path from the uniform-label reference
def _largest_block_count(prior, n):
    """The prior's largest number of blocks of ``n`` points: the reference then has the
    prior's support (``FiniteDirichletPrior(k=3)``: 3, the others: ``n``)."""
    log_v, _ = prior.tables(n)
    return int(np.flatnonzero(np.isfinite(log_v[: n + 1]))[-1])


def _restricted_log_evidence(prior, family, x, num_labels):
    """``log p(y, k <= K)``: the evidence restricted to partitions of at most ``K`` blocks."""
    posterior = exact_posterior(prior, family, x)
    blocks = np.array([np.unique(row).size for row in posterior.partitions])
    kept = posterior.log_prob[blocks <= num_labels]
    peak = kept.max()
    return posterior.log_evidence + peak + np.log(np.sum(np.exp(kept - peak)))


@pytest.mark.parametrize("move", ["gibbs", "split_merge", "cluster_split_merge"])
@pytest.mark.parametrize("prior_name, family_name", [("dp", "niw"), ("mfm", "bernoulli"),
                                                      ("py", "bernoulli")])
def test_reference_path_moves_leave_its_target_invariant(prior_name, family_name, move):
    """The moves at stage β of the path r_K^(1 - β) (p m)^β (K = 4 labels, fewer than the
    points: the target's support is the partitions of at most 4 blocks)."""
    family, x = _problem(family_name)
    rng = np.random.default_rng(zlib.crc32(f"reference-{prior_name}-{family_name}-{move}"
                                           .encode()))
    labels, exact = _one_step(PRIORS[prior_name], family, x, 0.4, 0.4, rng, move,
                              reference_labels=4)
    assert_partition_gof(labels, exact)


@pytest.mark.parametrize("move", ["gibbs", "split_merge"])
def test_negative_control_moves_of_the_prior_path_on_the_reference_path_are_rejected(move):
    """The moves of the prior path (prior unscaled, no reference term) at the same β are not
    invariant for the reference path's target: the same test rejects them."""
    family, x = _problem("niw")
    rng = np.random.default_rng(12)
    labels, exact = _one_step(PRIORS["dp"], family, x, 0.4, 0.4, rng, move, reference_labels=4,
                              moves_on_the_path=False)
    assert chisquare_partitions(labels, exact).pvalue < GOF_PVALUE_THRESHOLD


@pytest.mark.parametrize("family_name", list(FAMILIES))
@pytest.mark.parametrize("prior_name", list(PRIORS))
def test_reference_path_fixed_schedule_evidence_is_unbiased(prior_name, family_name):
    """Particles from the uniform-label reference with K = the prior's largest number of
    blocks: Ẑ is unbiased for p(y)."""
    family, x = _problem(family_name)
    prior = PRIORS[prior_name]
    rng = np.random.default_rng(zlib.crc32(f"reference-z-{prior_name}-{family_name}".encode()))
    z, mean = _evidence_z(prior, family, x, rng, temperatures=SCHEDULE, n_gibbs_sweeps=1,
                          n_split_merge=1,
                          reference_labels=_largest_block_count(prior, x.shape[0]))
    assert _two_sided(z) >= GOF_PVALUE_THRESHOLD, (mean, z)


def test_reference_path_with_fewer_labels_estimates_the_restricted_evidence():
    """K = 3 labels for 5 points: Ẑ is unbiased for p(y, k <= 3), not for p(y)."""
    family, x = _problem("niw")
    prior = PRIORS["dp"]
    rng = np.random.default_rng(41)
    restricted = _restricted_log_evidence(prior, family, x, 3)
    z, mean = _evidence_z(prior, family, x, rng, log_z=restricted, temperatures=SCHEDULE,
                          n_gibbs_sweeps=1, n_split_merge=1, reference_labels=3)
    assert _two_sided(z) >= GOF_PVALUE_THRESHOLD, (mean, z)
    assert restricted < exact_posterior(prior, family, x).log_evidence - 0.05


def test_negative_control_reference_path_without_the_reference_term_is_rejected(monkeypatch):
    """Stage weights with log p(c) but without -log r_K(c) (the reference's own law left out
    of the incremental weights) are biased: the same test rejects them."""
    family, x = _problem("bernoulli")
    prior = PRIORS["dp"]
    options = {"temperatures": SCHEDULE, "n_gibbs_sweeps": 1, "n_split_merge": 1,
               "reference_labels": x.shape[0]}
    original = ts.population_log_prior_ratios

    def without_reference(population, log_v, log_w, log_v_reference, out):
        original(population, log_v, log_w, np.zeros_like(log_v_reference), out)

    monkeypatch.setattr(ts, "population_log_prior_ratios", without_reference)
    z, mean = _evidence_z(prior, family, x, np.random.default_rng(23), **options)
    assert _two_sided(z) < GOF_PVALUE_THRESHOLD, (mean, z)


def test_reference_path_final_particles_follow_the_posterior():
    family, x = _problem("niw")
    prior = PRIORS["dp"]
    labels = _final_particles(prior, family, x, np.random.default_rng(43), n_split_merge=2,
                              max_temperature_step=0.4, reference_labels=x.shape[0])
    assert_partition_gof(labels, exact_posterior(prior, family, x))


def test_reference_labels_clear_errors():
    family, x = _problem("niw")
    with pytest.raises(ValueError, match="reference_labels must be a positive integer"):
        ts.tempered_runs(PRIORS["dp"], family, x, 4, 1, np.random.default_rng(0),
                         reference_labels=0)
    with pytest.raises(ValueError, match="largest number of blocks"):
        ts.tempered_runs(PRIORS["finite"], family, x, 4, 1, np.random.default_rng(0),
                         reference_labels=4)


# ------------------------------------------------ the path from an informed reference (labels)
LABELLED_N, LABELLED_K = 4, 3  # 3^4 = 81 labelled states: every one a chi^2 cell


def _random_reference(rng, n, num_labels, floor=0.2):
    """A non-uniform label law q (rows summing to 1, every label positive)."""
    return (1.0 - floor) * rng.dirichlet(np.full(num_labels, 0.5), size=n) + floor / num_labels


def _labelled_exact(prior, family, x, q, beta, drop_falling_factorial=False):
    """Every labelled vector z in {0..K-1}^n with its probability under the informed path's
    γ_β(z) ∝ r(z)^(1 - β) {p(c) m(y | c) / (K)_k}^β (enumerated; ``drop_falling_factorial``:
    without the 1/(K)_k)."""
    from itertools import product

    from scipy.special import gammaln

    n, num_labels = q.shape
    posterior = exact_posterior(prior, family, x)
    index = {tuple(row): j for j, row in enumerate(posterior.partitions)}
    log_joint = posterior.log_prob + posterior.log_evidence
    states = np.array(list(product(range(num_labels), repeat=n)), dtype=np.int64)
    canonical = ts.canonical_labels(states)
    log_gamma = np.empty(len(states))
    for s, (z, c) in enumerate(zip(states, canonical, strict=True)):
        k = np.unique(z).size
        log_falling = 0.0 if drop_falling_factorial else (gammaln(num_labels + 1.0)
                                                         - gammaln(num_labels - k + 1.0))
        log_reference = np.sum(np.log(q[np.arange(n), z]))
        log_gamma[s] = ((1.0 - beta) * log_reference
                        + beta * (log_joint[index[tuple(c)]] - log_falling))
    probabilities = np.exp(log_gamma - log_gamma.max())
    return states, probabilities / probabilities.sum()


def assert_counts_rejected(counts, probabilities):
    """The χ² test of :func:`assert_counts_gof` rejects ``counts`` (a negative control)."""
    with pytest.raises(AssertionError, match="goodness-of-fit failed"):
        assert_counts_gof(counts, probabilities)


def _state_counts(labels, num_labels):
    """Counts of the labelled vectors (rows of ``labels``) in the order of ``product``."""
    n = labels.shape[1]
    codes = labels @ (num_labels ** np.arange(n - 1, -1, -1))
    return np.bincount(codes, minlength=num_labels**n).astype(float)


def _labelled_one_step(move, beta=0.4, seed=0, move_log_q=None, num_samples=6000):
    """Exact draws from γ_β of the informed path (n = 4, K = 3, DP, NIW), one move each:
    ``move`` "gibbs" (a labelled Gibbs sweep) or "exchanges" (K label exchanges); ``move_log_q``
    replaces the move's log q (a negative control)."""
    family, x = niw_problem(LABELLED_N)
    prior = PRIORS["dp"]
    rng = np.random.default_rng(seed)
    q = _random_reference(rng, LABELLED_N, LABELLED_K)
    states, probabilities = _labelled_exact(prior, family, x, q, beta)
    draws = states[rng.choice(len(states), size=num_samples, p=probabilities)]
    prepared = ts.prepare_tempered(prior, family, x)
    population = _population(prepared, draws)
    ts.seed_numba_from(rng)
    log_q = np.log(q) if move_log_q is None else move_log_q
    betas = np.full(num_samples, beta)
    moving = np.ones(num_samples, dtype=np.bool_)
    changes = np.zeros(num_samples, dtype=np.int64)
    if move == "gibbs":
        ts.labelled_gibbs_sweeps(prepared.model, population, prepared.empty_row, prepared.log_v,
                                 prepared.log_w, log_q, betas, moving, changes,
                                 prepared.log_prior_predictive, 1, np.empty(LABELLED_N + 2),
                                 np.empty(LABELLED_K), np.arange(LABELLED_N))
    else:
        ts.label_exchanges(population, prepared.empty_row, log_q, betas, moving, changes,
                           LABELLED_K, np.empty((LABELLED_K, LABELLED_K)),
                           np.empty(LABELLED_K))
    assert changes.sum() > 0.05 * num_samples  # the move does move
    return _state_counts(population.labels, LABELLED_K), probabilities


@pytest.mark.parametrize("move", ["gibbs", "exchanges"])
def test_labelled_moves_leave_the_informed_path_invariant(move):
    """One labelled Gibbs sweep, or K label exchanges, from exact draws of γ_β (β = 0.4, a
    non-uniform q): the labelled vectors (81 cells) still follow γ_β."""
    counts, probabilities = _labelled_one_step(move, seed=zlib.crc32(move.encode()))
    assert_counts_gof(counts, probabilities)


@pytest.mark.parametrize("move", ["gibbs", "exchanges"])
def test_negative_control_labelled_moves_without_the_reference_factor_are_rejected(move):
    """The same moves with the factor q^(1 - β) left out (log q = 0) are not invariant."""
    counts, probabilities = _labelled_one_step(
        move, seed=5, move_log_q=np.zeros((LABELLED_N, LABELLED_K)))
    assert_counts_rejected(counts, probabilities)


def test_negative_control_labelled_law_without_the_falling_factorial_differs():
    """The enumerated γ_β depends on the 1/(K)_k (the Gibbs test above can tell, β = 0.9):
    the correct Gibbs sweep's draws are rejected against the law without it."""
    family, x = niw_problem(LABELLED_N)
    rng = np.random.default_rng(9)
    q = _random_reference(rng, LABELLED_N, LABELLED_K)
    counts, law = _labelled_one_step("gibbs", beta=0.9, seed=9)
    assert_counts_gof(counts, law)
    _, without = _labelled_exact(PRIORS["dp"], family, x, q, 0.9, drop_falling_factorial=True)
    assert_counts_rejected(counts, without)


def test_labelled_reference_draws_follow_the_reference():
    """The particles at β = 0 are exact draws of r(z) = prod_i q_i(z_i)."""
    family, x = niw_problem(LABELLED_N)
    rng = np.random.default_rng(17)
    q = _random_reference(rng, LABELLED_N, LABELLED_K)
    prepared = ts.prepare_tempered(PRIORS["dp"], family, x)
    population = empty_population(4000, LABELLED_N, prepared.empty_row)
    cumulative = np.cumsum(q, axis=1)
    cumulative[:, -1] = 1.0
    ts.seed_numba_from(rng)
    ts.labelled_reference_draws(prepared.model, population, prepared.empty_row, cumulative)
    _, reference = _labelled_exact(PRIORS["dp"], family, x, q, 0.0)
    assert_counts_gof(_state_counts(population.labels, LABELLED_K), reference)
    out = np.empty(4000)
    ts.population_log_reference(population, np.log(q), out)
    np.testing.assert_allclose(
        out, np.log(q[np.arange(LABELLED_N), population.labels]).sum(axis=1))


def _informed_options(prior, family, x, rng, num_labels=None, **options):
    n = x.shape[0]
    num_labels = _largest_block_count(prior, n) if num_labels is None else num_labels
    return {"temperatures": SCHEDULE, "n_gibbs_sweeps": 1, "n_split_merge": 0,
            "reference_probabilities": _random_reference(rng, n, num_labels), **options}


@pytest.mark.parametrize("family_name", list(FAMILIES))
@pytest.mark.parametrize("prior_name", list(PRIORS))
def test_informed_path_fixed_schedule_evidence_is_unbiased(prior_name, family_name):
    """Particles from a non-uniform labelled reference with K = the prior's largest number of
    blocks: Ẑ is unbiased for p(y)."""
    family, x = _problem(family_name)
    prior = PRIORS[prior_name]
    rng = np.random.default_rng(zlib.crc32(f"informed-z-{prior_name}-{family_name}".encode()))
    z, mean = _evidence_z(prior, family, x, rng, **_informed_options(prior, family, x, rng))
    assert _two_sided(z) >= GOF_PVALUE_THRESHOLD, (mean, z)


def test_informed_path_with_fewer_labels_estimates_the_restricted_evidence():
    """K = 3 labels for 5 points: Ẑ is unbiased for p(y, k <= 3)."""
    family, x = _problem("niw")
    prior = PRIORS["dp"]
    rng = np.random.default_rng(44)
    restricted = _restricted_log_evidence(prior, family, x, 3)
    z, mean = _evidence_z(prior, family, x, rng, log_z=restricted,
                          **_informed_options(prior, family, x, rng, num_labels=3))
    assert _two_sided(z) >= GOF_PVALUE_THRESHOLD, (mean, z)


def test_negative_control_informed_path_without_the_falling_factorial_is_rejected(
        monkeypatch):
    """Stage weights without the -log (K)_k of γ_1 (labelled target p m instead of p m /
    (K)_k) are biased: the same test rejects them."""
    family, x = _problem("bernoulli")
    prior = PRIORS["dp"]
    rng = np.random.default_rng(27)
    options = _informed_options(prior, family, x, rng)
    monkeypatch.setattr(ts, "reference_log_v",
                        lambda num_labels, n: np.full(n + 2, -n * np.log(num_labels)))
    z, mean = _evidence_z(prior, family, x, rng, **options)
    assert _two_sided(z) < GOF_PVALUE_THRESHOLD, (mean, z)


def test_informed_path_final_particles_follow_the_posterior():
    family, x = _problem("niw")
    prior = PRIORS["dp"]
    rng = np.random.default_rng(47)
    q = _random_reference(rng, x.shape[0], x.shape[0])
    labels = _final_particles(prior, family, x, rng, n_split_merge=0,
                              max_temperature_step=0.4, reference_probabilities=q)
    assert_partition_gof(labels, exact_posterior(prior, family, x))


def test_negative_control_informed_path_final_particles_at_wrong_temperature(monkeypatch):
    """Labelled Gibbs sweeps at 0.3 β: the final law is rejected by the same test."""
    family, x = _problem("niw")
    prior = PRIORS["dp"]
    rng = np.random.default_rng(48)
    q = _random_reference(rng, x.shape[0], x.shape[0])
    original = ts.labelled_gibbs_sweeps

    def colder(model, population, empty_row, log_v, log_w, log_q, betas, *rest):
        return original(model, population, empty_row, log_v, log_w, log_q, 0.3 * betas, *rest)

    monkeypatch.setattr(ts, "labelled_gibbs_sweeps", colder)
    labels = _final_particles(prior, family, x, rng, n_split_merge=0,
                              max_temperature_step=0.4, reference_probabilities=q)
    assert chisquare_partitions(labels, exact_posterior(prior, family, x)).pvalue \
        < GOF_PVALUE_THRESHOLD


def test_informed_reference_from_a_pilot_partition():
    """q from a pilot partition: rows sum to 1, at least floor / K everywhere, each point's
    most probable label its pilot block on separated data; clear errors."""
    family, x = _problem("niw")
    prior = PRIORS["dp"]
    pilot = ts.pilot_partition(prior, family, x, np.random.default_rng(3), n_rounds=3,
                               n_split_merge=5)
    blocks = int(pilot.max()) + 1
    q = ts.informed_reference(prior, family, x, pilot, blocks + 2, floor=0.1)
    assert q.shape == (x.shape[0], blocks + 2)
    np.testing.assert_allclose(q.sum(axis=1), 1.0)
    assert q.min() >= 0.1 / (blocks + 2) - 1e-12
    np.testing.assert_allclose(q[:, blocks:], 0.1 / (blocks + 2))
    labels = np.array([0, 0, 1, 1, 0])
    q = ts.informed_reference(prior, family, x, labels, 3, floor=0.05)
    assert np.array_equal(q[:4].argmax(axis=1), labels[:4])
    with pytest.raises(ValueError, match="at least the number of blocks"):
        ts.informed_reference(prior, family, x, labels, 1)
    with pytest.raises(ValueError, match="floor must be in"):
        ts.informed_reference(prior, family, x, labels, 3, floor=0.0)


def test_reference_probabilities_clear_errors():
    family, x = _problem("niw")
    n = x.shape[0]
    q = np.full((n, 3), 1 / 3)

    def run(prior_name="dp", **options):
        ts.tempered_runs(PRIORS[prior_name], family, x, 4, 1, np.random.default_rng(0),
                         **{"n_split_merge": 0, "reference_probabilities": q, **options})

    with pytest.raises(ValueError, match="shape"):
        run(reference_probabilities=np.full((n - 1, 3), 1 / 3))
    with pytest.raises(ValueError, match="rows summing to 1"):
        run(reference_probabilities=np.full((n, 3), 0.3))
    with pytest.raises(ValueError, match="give one"):
        run(reference_labels=3)
    with pytest.raises(ValueError, match="n_split_merge=0"):
        run(n_split_merge=1)
    with pytest.raises(ValueError, match="largest number of blocks"):
        run("finite", reference_probabilities=np.full((n, 4), 0.25))


def test_temperature_steps_are_capped():
    log_likelihoods = np.array([-10.0, -10.0, -10.0])  # particles that agree: ESS stays 1
    assert ts.next_temperature(log_likelihoods, 0.0, 0.5) == 1.0
    assert ts.next_temperature(log_likelihoods, 0.3, 0.5, max_step=0.05) == pytest.approx(0.35)
    assert ts.next_temperature(log_likelihoods, 0.97, 0.5, max_step=0.05) == 1.0
    spread = np.array([0.0, -50.0, -100.0])
    step = ts.next_temperature(spread, 0.0, 0.5)
    weights = np.exp(step * (spread - spread.max()))
    assert weights.sum() ** 2 / (3 * np.sum(weights**2)) == pytest.approx(0.5, abs=1e-6)


def test_adaptive_temperatures_bias_shrinks_with_particles():
    family, x = _problem("niw")
    prior = PRIORS["dp"]
    log_z = exact_posterior(prior, family, x).log_evidence
    rng = np.random.default_rng(3)
    means = {}
    for num_particles, runs in ((4, 1000), (64, 200)):
        log_hat = ts.tempered_log_evidence_runs(prior, family, x, num_particles, runs, rng,
                                                max_temperature_step=1.0)
        means[num_particles] = np.log(np.mean(np.exp(log_hat - log_z)))
    # the adaptive schedule's bias is of order 1/L: clearly visible at L = 4, small at L = 64
    assert abs(means[64]) < 0.1 and abs(means[64]) < abs(means[4]), means


# ------------------------------------------------------------------- final particle law


def _final_particles(prior, family, x, rng, runs=1000, num_particles=16, **options):
    return np.array([result.labels[0] for result in
                     ts.tempered_runs(prior, family, x, num_particles, runs, rng, **options)])


@pytest.mark.parametrize("prior_name, family_name", [("dp", "niw"), ("mfm", "bernoulli")])
def test_final_particles_follow_the_posterior(prior_name, family_name):
    family, x = _problem(family_name)
    prior = PRIORS[prior_name]
    rng = np.random.default_rng(zlib.crc32(f"law-{prior_name}-{family_name}".encode()))
    labels = _final_particles(prior, family, x, rng, n_split_merge=2, max_temperature_step=0.4)
    assert_partition_gof(labels, exact_posterior(prior, family, x))


def test_waste_free_final_particles_follow_the_posterior():
    """The last state of the last waste-free chain (cluster-anchor moves) of every run."""
    family, x = _problem("niw")
    prior = PRIORS["dp"]
    labels = np.array([result.labels[-1] for result in ts.tempered_runs(
        prior, family, x, 16, 1000, np.random.default_rng(31), n_split_merge=2,
        max_temperature_step=0.4, chain_length=4, cluster_anchors=True)])
    assert_partition_gof(labels, exact_posterior(prior, family, x))


def test_negative_control_moves_at_wrong_temperature_change_the_law(monkeypatch):
    family, x = _problem("niw")
    prior = PRIORS["dp"]
    original = ts.tempered_gibbs_sweeps

    def half_temperature(model, population, empty_row, log_v, log_w, betas, *rest):
        return original(model, population, empty_row, log_v, log_w, 0.3 * betas, *rest)

    monkeypatch.setattr(ts, "tempered_gibbs_sweeps", half_temperature)
    labels = _final_particles(prior, family, x, np.random.default_rng(8), n_split_merge=2,
                              max_temperature_step=0.4)
    assert chisquare_partitions(labels, exact_posterior(prior, family, x)).pvalue \
        < GOF_PVALUE_THRESHOLD


# ------------------------------------------------------------------ pooled standard error


def test_jackknife_standard_error_matches_the_spread_of_pooled_estimates():
    from pymc_splitmerge.sampling.smc import pooled_log_evidence

    # tempered runs on enumerable data, pooled 8 at a time
    family, x = _problem("niw")
    prior = PRIORS["py"]
    rng = np.random.default_rng(17)
    chains, repeats = 8, 150
    log_hat = ts.tempered_log_evidence_runs(prior, family, x, 4, chains * repeats, rng,
                                            temperatures=SCHEDULE, n_gibbs_sweeps=1)
    pooled = np.array([pooled_log_evidence(row) for row in log_hat.reshape(repeats, chains)])
    ratio = np.sqrt(np.mean(pooled[:, 1] ** 2)) / pooled[:, 0].std(ddof=1)
    assert 0.75 < ratio < 1.3, ratio
    # heavy-tailed estimates (log-normal, 1-4 nats wide), where the delta method fails
    for sd in (1.0, 2.0, 4.0):
        values = rng.normal(-sd * sd / 2, sd, size=(1000, 4))
        pooled = np.array([pooled_log_evidence(row) for row in values])
        ratio = np.sqrt(np.mean(pooled[:, 1] ** 2)) / pooled[:, 0].std(ddof=1)
        assert 0.8 < ratio < 1.25, (sd, ratio)
    estimate, mcse = pooled_log_evidence([1.0])
    assert estimate == 1.0 and np.isnan(mcse)


# ------------------------------------------------------------------- PyMC-facing sampler
SMC_DATA = np.array([[1, 1, 0], [1, 1, 0], [1, 0, 0], [0, 0, 1], [0, 1, 1], [0, 0, 1]])


def _model(alpha):
    import pymc as pm

    import pymc_splitmerge as psm

    with pm.Model() as model:
        z = psm.DirichletProcess("z", alpha=alpha, n=len(SMC_DATA))
        psm.ConjugateMixture("y", partition=z, component=psm.BetaBernoulli(a=1.0, b=1.0),
                             observed=SMC_DATA)
    return model


def test_sample_smc_tempered_layout_evidence_and_cores():
    import pymc_splitmerge as psm
    from pymc_splitmerge.analysis._arviz_compat import get_group
    from pymc_splitmerge.components import BetaBernoulli
    from pymc_splitmerge.core.relabel import canonical_labels
    from pymc_splitmerge.priors import DirichletProcessPrior

    model = _model(1.0)
    results = [psm.sample_smc(draws=50, chains=4, model=model, method="tempered",
                              random_seed=2, cores=cores, progressbar=False)
               for cores in (1, 2)]
    posterior = get_group(results[0], "posterior")
    sample_stats = get_group(results[0], "sample_stats")
    labels = np.asarray(posterior["z"])
    assert labels.shape == (4, 50, len(SMC_DATA))
    flat = labels.reshape(-1, len(SMC_DATA))
    np.testing.assert_array_equal(flat, canonical_labels(flat))
    np.testing.assert_array_equal(labels, np.asarray(get_group(results[1], "posterior")["z"]))
    stages = np.asarray(sample_stats["stages"])
    beta = np.asarray(sample_stats["beta"])
    assert np.all(beta[np.arange(4), stages - 1] == 1.0)
    log_hat = np.asarray(sample_stats["log_marginal_likelihood"])
    np.testing.assert_allclose(
        log_hat, np.nansum(np.asarray(sample_stats["log_evidence_increment"]), axis=1))
    exact = exact_posterior(DirichletProcessPrior(alpha=1.0), BetaBernoulli(a=1.0, b=1.0),
                            SMC_DATA)
    table = psm.compare_evidence({"tempered": results[0]})
    row = table.loc["tempered"]
    assert abs(row["log_evidence"] - exact.log_evidence) < 5 * row["mcse"] + 0.05


def test_sample_smc_tempered_clear_errors():
    import pymc_splitmerge as psm

    model = _model(1.0)
    with pytest.raises(ValueError, match="method must be"):
        psm.sample_smc(draws=8, chains=2, model=model, method="annealed", progressbar=False)
    with pytest.raises(ValueError, match="rejuvenation"):
        psm.sample_smc(draws=8, chains=2, model=model, method="tempered", rejuvenation=2,
                       progressbar=False)
    with pytest.raises(ValueError, match="temperatures"):
        psm.sample_smc(draws=8, chains=2, model=model, method="tempered",
                       temperatures=[0.0, 0.5], progressbar=False)
    with pytest.raises(ValueError, match="max_temperature_step"):
        psm.sample_smc(draws=8, chains=2, model=model, method="tempered",
                       max_temperature_step=0.0, progressbar=False)
    with pytest.raises(ValueError, match="ess_threshold"):
        psm.sample_smc(draws=8, chains=2, model=model, method="tempered", ess_threshold=1.0,
                       progressbar=False)
    with pytest.raises(ValueError, match="multiple of chain_length"):
        psm.sample_smc(draws=9, chains=2, model=model, method="tempered", chain_length=2,
                       progressbar=False)
    with pytest.raises(ValueError, match="resample_threshold must be in"):
        psm.sample_smc(draws=8, chains=2, model=model, method="tempered",
                       resample_threshold=0.0, progressbar=False)
    with pytest.raises(ValueError, match="resample_threshold=1"):
        psm.sample_smc(draws=8, chains=2, model=model, method="tempered", chain_length=2,
                       resample_threshold=0.5, progressbar=False)
    # an argument of the other method would be ignored: refused, every one named
    with pytest.raises(ValueError, match="^resample_threshold belongs to method='tempered'"):
        psm.sample_smc(draws=8, chains=2, model=model, resample_threshold=0.5,
                       progressbar=False)
    with pytest.raises(ValueError,
                       match="^n_gibbs_sweeps, temperatures, cluster_anchors belong to "
                             "method='tempered' and would be ignored by method='sequential'"):
        psm.sample_smc(draws=8, chains=2, model=model, n_gibbs_sweeps=5,
                       temperatures=np.array([0.0, 0.5, 1.0]), cluster_anchors=True,
                       progressbar=False)
    # control: the defaults written out are not "given"
    psm.sample_smc(draws=8, chains=2, model=model, n_gibbs_sweeps=2, n_split_merge=None,
                   temperatures=None, resample_threshold=1.0, progressbar=False, cores=1)


def test_sample_smc_tempered_weighted_particles_stats_and_cores():
    import pymc_splitmerge as psm
    from pymc_splitmerge.analysis._arviz_compat import get_group

    model = _model(1.0)
    results = [psm.sample_smc(draws=20, chains=3, model=model, method="tempered",
                              resample_threshold=0.5, max_temperature_step=0.2, random_seed=5,
                              cores=cores, progressbar=False) for cores in (1, 2)]
    stats_1, stats_2 = (get_group(result, "sample_stats") for result in results)
    np.testing.assert_array_equal(np.asarray(stats_1["log_marginal_likelihood"]),
                                  np.asarray(stats_2["log_marginal_likelihood"]))
    resampled = np.asarray(stats_1["resampled"])
    stages = np.asarray(stats_1["stages"])
    assert np.all(resampled[np.arange(3), stages - 1])  # the last stage always resamples
    assert resampled.sum() < stages.sum()  # and not every stage
    assert stats_1.attrs["resample_threshold"] == 0.5


def test_sample_smc_tempered_waste_free_with_cluster_anchors():
    import pymc_splitmerge as psm
    from pymc_splitmerge.analysis._arviz_compat import get_group
    from pymc_splitmerge.components import BetaBernoulli
    from pymc_splitmerge.priors import DirichletProcessPrior

    idata = psm.sample_smc(draws=40, chains=4, model=_model(1.0), method="tempered",
                           random_seed=3, chain_length=4, cluster_anchors=True,
                           n_split_merge=5, progressbar=False)
    sample_stats = get_group(idata, "sample_stats")
    assert sample_stats.attrs["chain_length"] == 4 and sample_stats.attrs["cluster_anchors"] == 1
    assert np.asarray(get_group(idata, "posterior")["z"]).shape == (4, 40, len(SMC_DATA))
    exact = exact_posterior(DirichletProcessPrior(alpha=1.0), BetaBernoulli(a=1.0, b=1.0),
                            SMC_DATA)
    row = psm.compare_evidence({"waste-free": idata}).loc["waste-free"]
    assert abs(row["log_evidence"] - exact.log_evidence) < 5 * row["mcse"] + 0.05


def test_sample_smc_tempered_from_the_reference_evidence_and_warning():
    """``reference_labels``: the evidence against enumeration (K = n: p(y) exactly), the
    attribute, the clear error, and the warning when final particles reach K blocks."""
    import pymc_splitmerge as psm
    from pymc_splitmerge.analysis._arviz_compat import get_group
    from pymc_splitmerge.components import BetaBernoulli
    from pymc_splitmerge.priors import DirichletProcessPrior

    idata = psm.sample_smc(draws=40, chains=4, model=_model(1.0), method="tempered",
                           random_seed=5, reference_labels=len(SMC_DATA), n_split_merge=5,
                           progressbar=False)
    assert get_group(idata, "sample_stats").attrs["reference_labels"] == len(SMC_DATA)
    exact = exact_posterior(DirichletProcessPrior(alpha=1.0), BetaBernoulli(a=1.0, b=1.0),
                            SMC_DATA)
    row = psm.compare_evidence({"reference": idata}).loc["reference"]
    assert abs(row["log_evidence"] - exact.log_evidence) < 5 * row["mcse"] + 0.05
    with pytest.raises(ValueError, match="reference_labels must be a positive integer"):
        psm.sample_smc(draws=8, chains=2, model=_model(1.0), method="tempered",
                       reference_labels=0, progressbar=False)
    with pytest.warns(UserWarning, match="increase reference_labels"):
        psm.sample_smc(draws=8, chains=2, model=_model(1.0), method="tempered",
                       reference_labels=1, random_seed=1, progressbar=False)



def test_sample_smc_tempered_from_an_informed_reference():
    """``reference="informed"``: a pilot per chain, the evidence against enumeration (K = n:
    p(y) exactly), the labels used per chain, identical for cores=1 and 2, clear errors, and
    refused with the sequential method."""
    import pymc_splitmerge as psm
    from pymc_splitmerge.analysis._arviz_compat import get_group
    from pymc_splitmerge.components import BetaBernoulli
    from pymc_splitmerge.priors import DirichletProcessPrior

    n = len(SMC_DATA)
    options = {"draws": 40, "chains": 4, "method": "tempered", "reference": "informed",
               "reference_labels": n, "random_seed": 6, "progressbar": False}
    idata = psm.sample_smc(model=_model(1.0), cores=1, **options)
    stats = get_group(idata, "sample_stats")
    assert stats.attrs["reference"] == "informed" and stats.attrs["n_split_merge"] == 0
    assert np.all(stats["reference_labels"].values == n)
    exact = exact_posterior(DirichletProcessPrior(alpha=1.0), BetaBernoulli(a=1.0, b=1.0),
                            SMC_DATA)
    row = psm.compare_evidence({"informed": idata}).loc["informed"]
    assert abs(row["log_evidence"] - exact.log_evidence) < 5 * row["mcse"] + 0.05
    again = psm.sample_smc(model=_model(1.0), cores=2, **options)
    np.testing.assert_array_equal(stats["log_marginal_likelihood"].values,
                                  get_group(again, "sample_stats")["log_marginal_likelihood"]
                                  .values)
    automatic = psm.sample_smc(draws=8, chains=2, model=_model(1.0), method="tempered",
                               reference="informed", random_seed=1, progressbar=False)
    assert np.all(get_group(automatic, "sample_stats")["reference_labels"].values >= 1)
    for bad, match in (({"reference": "pilot"}, "reference must be"),
                       ({"reference_floor": 0.0}, "reference_floor must be in"),
                       ({"n_split_merge": 5}, "n_split_merge: reference='informed'"),
                       ({"cluster_anchors": True}, "cluster_anchors: reference='informed'"),
                       ({"reference": "uniform", "reference_floor": 0.1},
                        "reference_floor belongs")):
        with pytest.raises(ValueError, match=match):
            psm.sample_smc(draws=8, chains=2, model=_model(1.0), method="tempered",
                           progressbar=False, **{"reference": "informed", **bad})
    with pytest.raises(ValueError, match="reference belongs to method='tempered'"):
        psm.sample_smc(draws=8, chains=2, model=_model(1.0), reference="informed",
                       progressbar=False)

# ----------------------------------------------------- batched runs, adaptive move rounds


def test_grouped_systematic_resampling_matches_the_reference_row_by_row():
    from pymc_splitmerge.kernels.smc import reference_systematic_resample

    rng = np.random.default_rng(4)
    log_weights = rng.normal(0.0, 3.0, size=(7, 9))
    log_weights[2, 3:] = -np.inf  # a row with zero weights
    flat = ts._grouped_systematic_ancestors(log_weights, np.random.default_rng(11))
    uniforms = np.random.default_rng(11).random(7)
    for row in range(7):
        weights = np.exp(log_weights[row] - log_weights[row].max())
        expected = reference_systematic_resample(weights / weights.sum(), uniforms[row])
        np.testing.assert_array_equal(flat[row], expected + row * 9)


def test_next_temperature_steps_runs_independently():
    rng = np.random.default_rng(2)
    rows = rng.normal(-50.0, 10.0, size=(4, 20))
    beta = np.array([0.0, 0.3, 0.9, 0.99])
    together = ts.next_temperature(rows, beta, 0.5, 0.05)
    alone = [ts.next_temperature(rows[g], beta[g], 0.5, 0.05) for g in range(4)]
    np.testing.assert_allclose(together, alone)


def test_move_rounds_follow_the_correlation_rule_and_keep_the_evidence_unbiased():
    family, x = _problem("niw")
    prior = PRIORS["mfm"]
    rng = np.random.default_rng(23)
    options = {"temperatures": SCHEDULE, "n_gibbs_sweeps": 1, "max_move_rounds": 3}
    # threshold 1: every run stops after one round; -1: every run uses all rounds
    for threshold, expected in ((1.0, 1), (-1.0, 3)):
        results = ts.tempered_runs(prior, family, x, 4, 5, rng,
                                   correlation_threshold=threshold, **options)
        assert all(np.all(r.move_rounds == expected) for r in results)
    z, mean = _evidence_z(prior, family, x, rng, correlation_threshold=0.1, **options)
    assert _two_sided(z) >= GOF_PVALUE_THRESHOLD, (mean, z)
