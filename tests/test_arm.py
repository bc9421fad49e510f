"""ARM (Herlau, Mørup, Schmidt & Teh): path identity, references, exact invariance, controls.

Kernel checks:

* the reverse-path identity: for a fixed start ``z`` and auxiliary variables
  ``(z^a, z^b, i, j, sigma)``, the forced-run probabilities ``T(z* | z)`` of all set
  partitions ``z*`` sum to one (the path to each ``z*`` is unique and the forced rule finds
  it) — every ``(z, z^a, z^b)`` and every disagreeing pair for n = 4, random triples for
  n = 5, 6, 7; dropping eq. (17) breaks it;
* the numba run against the plain-Python reference (forced probabilities, sampled ends);
* one-step invariance: ``z, z^a, z^b`` independent exact posterior draws, one ARM move, χ²
  against enumeration, every prior × {BetaBernoulli, Normal-Inverse-Wishart};
* negative controls rejected by the same test: eq. (17) dropped; ``z^a`` = the current state.
"""

from __future__ import annotations

import numpy as np
import pytest
from broken_kernels import arm_transition_log_probabilities_without_eq17
from conftest import PRIORS, PROBLEMS, bernoulli_problem, thinned_labels
from kernel_references import propose_arm, reference_arm_run

from pymc_splitmerge.core.enumerate import enumerate_partitions
from pymc_splitmerge.core.relabel import partition_index
from pymc_splitmerge.kernels.arm import (
    arm_move,
    arm_transition_log_probabilities,
    build_arm_transition,
)
from pymc_splitmerge.kernels.splitmerge_common import MOVE_MERGE, MOVE_NONE, MOVE_SPLIT
from pymc_splitmerge.kernels.state import PartitionState
from pymc_splitmerge.testing import assert_partition_gof, exact_posterior

SEED = 20261126
N_KERNEL_DRAWS = 3000


def _disagreeing_pairs(labels_a, labels_b):
    n = len(labels_a)
    return [(p, q) for p in range(n) for q in range(p + 1, n)
            if (labels_a[p] == labels_a[q]) != (labels_b[p] == labels_b[q])]


def _path_sums(family, x, prior, triples, rng,
               transition_log_probabilities=arm_transition_log_probabilities):
    n = x.shape[0]
    partitions = enumerate_partitions(n)
    log_v_table, log_w_table = prior.tables(n)
    sums = []
    for z, labels_a, labels_b in triples:
        state = PartitionState(family, x, z)
        for anchor_i, anchor_j in _disagreeing_pairs(labels_a, labels_b):
            rank = rng.permutation(n)
            log_t = transition_log_probabilities(
                state, labels_a, labels_b, anchor_i, anchor_j, rank, partitions, log_v_table,
                log_w_table)
            sums.append(np.exp(log_t).sum())
    return np.array(sums)


# --------------------------------------------------------------------------- path identity


def test_reverse_path_identity_every_triple_n4():
    family, x = bernoulli_problem(4)
    partitions = enumerate_partitions(4)
    triples = [(z, a, b) for z in partitions for a in partitions for b in partitions]
    sums = _path_sums(family, x, PRIORS["py"], triples, np.random.default_rng(SEED))
    assert sums.shape[0] > 5000
    np.testing.assert_allclose(sums, 1.0, rtol=0, atol=1e-9)


@pytest.mark.parametrize(("n", "n_triples", "prior"), [(5, 120, "mfm"), (6, 40, "dp"),
                                                        (7, 12, "finite")])
def test_reverse_path_identity_random_triples(n, n_triples, prior):
    family, x = bernoulli_problem(n)
    rng = np.random.default_rng([SEED, n])
    partitions = enumerate_partitions(n)
    triples = partitions[rng.integers(len(partitions), size=(n_triples, 3))]
    sums = _path_sums(family, x, PRIORS[prior], triples, rng)
    assert sums.shape[0] >= n_triples
    np.testing.assert_allclose(sums, 1.0, rtol=0, atol=1e-9)


def test_reverse_path_identity_fails_without_eq17():
    """Negative control: without eq. (17) paths are not unique, the identity breaks."""
    family, x = bernoulli_problem(6)
    rng = np.random.default_rng([SEED, 17])
    partitions = enumerate_partitions(6)
    triples = partitions[rng.integers(len(partitions), size=(20, 3))]
    sums = _path_sums(family, x, PRIORS["dp"], triples, rng,
                      arm_transition_log_probabilities_without_eq17)
    assert np.mean(np.abs(sums - 1.0) > 1e-6) > 0.3


# --------------------------------------------------------------------------- reference


@pytest.mark.parametrize("problem", sorted(PROBLEMS))
def test_numba_run_matches_reference(problem):
    family, x = PROBLEMS[problem]()
    n = x.shape[0]
    prior = PRIORS["mfm"]
    log_v_table, log_w_table = prior.tables(n)
    partitions = enumerate_partitions(n)
    rng = np.random.default_rng([SEED, n])
    checked = 0
    while checked < 25:
        z, labels_a, labels_b = partitions[rng.integers(len(partitions), size=3)]
        pairs = _disagreeing_pairs(labels_a, labels_b)
        if not pairs:
            continue
        anchor_i, anchor_j = pairs[rng.integers(len(pairs))]
        if labels_a[anchor_i] != labels_a[anchor_j]:
            labels_a, labels_b = labels_b, labels_a
        rank = rng.permutation(n)
        state = PartitionState(family, x, z)
        log_t = arm_transition_log_probabilities(state, labels_a, labels_b, anchor_i, anchor_j,
                                                 rank, partitions, log_v_table, log_w_table)
        # a sampled reference run ends where the numba forced run gives the same probability
        end, log_p = reference_arm_run(family, x, z, labels_a, labels_b, anchor_i, anchor_j,
                                       rank, log_v_table, log_w_table, rng=rng)
        np.testing.assert_allclose(log_p, log_t[partition_index(end, n)], rtol=1e-9, atol=1e-9)
        # forced reference runs agree on reachable and unreachable targets
        for row in [*np.flatnonzero(np.isfinite(log_t))[:3], int(rng.integers(len(partitions)))]:
            _, log_forced = reference_arm_run(family, x, z, labels_a, labels_b, anchor_i,
                                              anchor_j, rank, log_v_table, log_w_table,
                                              target=partitions[row])
            if np.isneginf(log_t[row]):
                assert np.isneginf(log_forced)
            else:
                np.testing.assert_allclose(log_forced, log_t[row], rtol=1e-9, atol=1e-9)
        checked += 1


def test_proposal_probabilities_are_consistent():
    """The sampled forward run's log T equals the forced run to the candidate; the state is
    untouched by a proposal; the reverse of a split is reachable."""
    family, x = bernoulli_problem(6)
    prior = PRIORS["py"]
    log_v_table, log_w_table = prior.tables(6)
    partitions = enumerate_partitions(6)
    rng = np.random.default_rng([SEED, 3])
    moves = set()
    for _ in range(60):
        z, labels_a, labels_b = partitions[rng.integers(len(partitions), size=3)]
        state = PartitionState(family, x, z)
        before = state.slot_labels.copy()
        proposal = propose_arm(state, log_v_table, log_w_table, rng, labels_a, labels_b)
        np.testing.assert_array_equal(state.slot_labels, before)
        moves.add(proposal.move)
        if proposal.move == MOVE_NONE:
            assert np.array_equal(labels_a, labels_b)
            continue
        assert np.isfinite(proposal.log_forward) and np.isfinite(proposal.log_reverse)
    assert {MOVE_SPLIT, MOVE_MERGE} <= moves


def test_arm_step_keeps_state_consistent_and_rejects_bad_library():
    family, x = bernoulli_problem(7)
    prior = PRIORS["finite"]
    log_v_table, log_w_table = prior.tables(7)
    rng = np.random.default_rng([SEED, 4])
    state = PartitionState(family, x, np.zeros(7, dtype=np.int64))
    accepted = 0
    for _ in range(200):
        labels_a, labels_b = prior.sample(7, rng), prior.sample(7, rng)
        info = arm_move(state, log_v_table, log_w_table, rng, labels_a, labels_b)
        accepted += info.accepted
        assert info.n_clusters == state.n_clusters <= 3
        assert (info.n_moved > 0) <= info.accepted
    state.check()
    assert accepted > 0
    with pytest.raises(ValueError, match="labels_a must be labels of shape"):
        arm_move(state, log_v_table, log_w_table, rng, np.zeros(6, int), np.zeros(7, int))
    info = arm_move(state, log_v_table, log_w_table, rng, np.zeros(7, int), np.zeros(7, int))
    assert info.move == MOVE_NONE and not info.accepted


# --------------------------------------------------------------------------- invariance


def _arm_one_step_draws(prior, family, x, rng, *, own_state=False, num_samples=N_KERNEL_DRAWS,
                        n_sams_updates=0):
    """z, z^a, z^b independent exact draws; ``n_sams_updates`` SAMS updates, then one ARM move
    of z (``build_arm_transition(..., n_gibbs_sweeps=0)``).  ``own_state``: z^a is the state
    the ARM move starts from, the negative control."""
    exact = exact_posterior(prior, family, x)
    tables = prior.tables(x.shape[0])
    starts = exact.sample(num_samples, rng)
    library = exact.sample(2 * num_samples, rng)
    row = 0

    def pair(partition):
        labels_a = partition.labels.copy() if own_state else library[2 * row]
        return labels_a, library[2 * row + 1]

    transition = build_arm_transition(pair, n_sams_updates=n_sams_updates, n_gibbs_sweeps=0)
    out = np.empty_like(starts)
    for row in range(num_samples):
        state = PartitionState(family, x, starts[row])
        info = transition(state.model, state.partition, state.tables(*tables), rng)
        assert (info.sams is None) == (n_sams_updates == 0) and info.gibbs is None
        out[row] = state.labels()
    return out, exact


@pytest.mark.parametrize("problem", sorted(PROBLEMS))
@pytest.mark.parametrize("name", sorted(PRIORS))
def test_one_step_invariance(name, problem):
    rng = np.random.default_rng([SEED, len(name), len(problem)])
    family, x = PROBLEMS[problem]()
    samples, exact = _arm_one_step_draws(PRIORS[name], family, x, rng)
    assert_partition_gof(samples, exact)


def test_negative_control_own_state_as_library_is_rejected():
    """z^a = the current state makes the auxiliary variables depend on z: not invariant."""
    rng = np.random.default_rng([SEED, 98])
    family, x = PROBLEMS["niw"]()
    samples, exact = _arm_one_step_draws(PRIORS["dp"], family, x, rng, own_state=True,
                                         num_samples=6000)
    with pytest.raises(AssertionError):
        assert_partition_gof(samples, exact)


@pytest.mark.parametrize(("name", "problem"), [("dp", "niw"), ("py", "bernoulli")])
def test_sams_then_arm_one_step_invariance(name, problem):
    rng = np.random.default_rng([SEED, 97, len(name)])
    family, x = PROBLEMS[problem]()
    samples, exact = _arm_one_step_draws(PRIORS[name], family, x, rng, n_sams_updates=1)
    assert_partition_gof(samples, exact)


def test_negative_control_sams_then_arm_own_state_is_rejected():
    rng = np.random.default_rng([SEED, 96])
    family, x = PROBLEMS["niw"]()
    samples, exact = _arm_one_step_draws(PRIORS["dp"], family, x, rng, own_state=True,
                                         num_samples=6000, n_sams_updates=1)
    with pytest.raises(AssertionError):
        assert_partition_gof(samples, exact)


# --------------------------------------------------------------------------- through pm.sample
#
# Problems, priors and exact posteriors are shared with test_sampler_matrix.  ARM moves are
# followed by one Gibbs sweep (the paper's iteration); the integrated autocorrelation time of
# the number of clusters on these problems is below 2, draws are thinned by ARM_THIN = 4.

ARM_THIN = 4
ENSEMBLE_CHAINS = 4
ENSEMBLE_DRAWS = 1200  # per chain: 4 x 300 thinned samples
FROZEN_CHAINS = 2
FROZEN_DRAWS = 2400  # per chain: 2 x 600 thinned samples
ARM_TUNE = 200


def _arm_sample(prior_name, family_name, library, *, chains, draws, seed, random_alpha=None,
                cores=1, n_gibbs_sweeps=1, step_class=None, initvals=None, tune=ARM_TUNE,
                n_sams_updates=0):
    import pymc as pm
    from test_sampler_matrix import ALPHA_GAMMA_PRIOR, FAMILIES, FIXED_ALPHA, model_prior

    import pymc_splitmerge as psm

    make_family, data = FAMILIES[family_name]
    with pm.Model():
        if random_alpha:
            alpha = pm.Gamma("alpha", alpha=ALPHA_GAMMA_PRIOR[0], beta=ALPHA_GAMMA_PRIOR[1])
        else:
            alpha = FIXED_ALPHA.get(prior_name)
        z = model_prior(prior_name, len(data), alpha, family_name)
        psm.ConjugateMixture("y", partition=z, component=make_family(), observed=data)
        step = (step_class or psm.ARMStep)(z, library=library, n_gibbs_sweeps=n_gibbs_sweeps,
                                           n_sams_updates=n_sams_updates)
        steps = [step, psm.ConcentrationGibbs(alpha)] if random_alpha else step
        idata = pm.sample(draws=draws, tune=tune, chains=chains, cores=cores, step=steps,
                          random_seed=seed, progressbar=False, compute_convergence_checks=False,
                          initvals=initvals)
    return idata, step


def _seed(*parts):
    from test_sampler_matrix import case_seed

    return case_seed("arm", *parts)


PM_PRIORS = ("dirichlet_process", "pitman_yor", "finite_dirichlet", "mixture_of_finite_mixtures")
PM_FAMILIES = ("beta_bernoulli", "normal_inverse_wishart")


@pytest.mark.parametrize("family_name", PM_FAMILIES)
@pytest.mark.parametrize("prior_name", PM_PRIORS)
def test_ensemble_library_matches_exact(prior_name, family_name):
    from test_sampler_matrix import exact_fixed

    idata, _ = _arm_sample(prior_name, family_name, "ensemble", chains=ENSEMBLE_CHAINS,
                           draws=ENSEMBLE_DRAWS, seed=_seed("ensemble", prior_name, family_name))
    stats = idata["sample_stats"]
    moves = np.asarray(stats["arm_move"].values)
    accepted = np.asarray(stats["arm_accepted"].values)
    # red/black: every chain makes an ARM move every other draw, never two draws in a row
    made = moves != MOVE_NONE
    assert not np.any(made[:, 1:] & made[:, :-1])
    assert 0.3 < made.mean() <= 0.5
    assert 0 < accepted.mean() < 0.5
    assert_partition_gof(thinned_labels(idata, ARM_THIN), exact_fixed(prior_name, family_name))


@pytest.mark.parametrize("family_name", PM_FAMILIES)
@pytest.mark.parametrize("prior_name", PM_PRIORS)
def test_frozen_library_matches_exact(prior_name, family_name):
    from test_sampler_matrix import exact_fixed

    idata, step = _arm_sample(prior_name, family_name, "frozen", chains=FROZEN_CHAINS,
                              draws=FROZEN_DRAWS, seed=_seed("frozen", prior_name, family_name))
    assert step._frozen_library is not None and step._frozen_library.shape[0] >= 2
    assert np.asarray(idata["sample_stats"]["arm_accepted"].values).mean() > 0
    assert_partition_gof(thinned_labels(idata, ARM_THIN), exact_fixed(prior_name, family_name))


def test_ensemble_with_random_concentration_matches_quadrature():
    from test_sampler_matrix import ALPHA_GAMMA_PRIOR, FAMILIES

    import pymc_splitmerge as psm
    from pymc_splitmerge.testing import exact_posterior_random_concentration

    idata, _ = _arm_sample("dirichlet_process", "beta_bernoulli", "ensemble",
                           chains=ENSEMBLE_CHAINS, draws=800, random_alpha=True,
                           seed=_seed("alpha"))
    make_family, data = FAMILIES["beta_bernoulli"]
    exact = exact_posterior_random_concentration(
        lambda alpha: psm.priors.DirichletProcessPrior(alpha=alpha), ALPHA_GAMMA_PRIOR,
        make_family(), data)
    assert_partition_gof(thinned_labels(idata, ARM_THIN), exact)


@pytest.mark.parametrize("library", ["ensemble", "frozen"])
def test_arm_with_sams_updates_matches_exact(library):
    """``ARMStep(n_sams_updates=1)``: every chain one SAMS update, then ARM + Gibbs."""
    from test_sampler_matrix import exact_fixed

    chains = ENSEMBLE_CHAINS if library == "ensemble" else FROZEN_CHAINS
    idata, _ = _arm_sample("dirichlet_process", "normal_inverse_wishart", library,
                           chains=chains, draws=2400 // chains, n_sams_updates=1,
                           seed=_seed("sams", library))
    stats = idata["sample_stats"]
    assert np.asarray(stats["arm_sams_accepted"].values).sum() > 0
    assert np.asarray(stats["arm_accepted"].values).mean() > 0
    assert_partition_gof(thinned_labels(idata, ARM_THIN),
                         exact_fixed("dirichlet_process", "normal_inverse_wishart"))


# Pure ARM (no Gibbs sweeps) from four different starting partitions: the exact red/black
# update against the simultaneous ("Jacobi") update of PyMC's population sampler, in which
# every chain moves towards the others' previous states; the chains are pulled together
# until they coincide (then no library pair is left), so the pooled draws miss the posterior.
PURE_ARM_STARTS = ([0, 0, 0, 0, 0], [0, 1, 2, 3, 4], [0, 0, 1, 1, 2], [0, 1, 0, 1, 0])
PURE_ARM_DRAWS = 3000
PURE_ARM_THIN = 10


def _pure_arm(step_class=None):
    initvals = [{"z": np.array(start)} for start in PURE_ARM_STARTS]
    label = "None" if step_class is None else "jacobi"  # the seeds of the two runs
    return _arm_sample("dirichlet_process", "beta_bernoulli", "ensemble", chains=4,
                       draws=PURE_ARM_DRAWS, seed=_seed("pure", label),
                       n_gibbs_sweeps=0, step_class=step_class, initvals=initvals)[0]


def test_pure_arm_red_black_matches_exact():
    from test_sampler_matrix import exact_fixed

    idata = _pure_arm()
    assert "gibbs_changed" not in idata["sample_stats"]
    assert_partition_gof(thinned_labels(idata, PURE_ARM_THIN),
                         exact_fixed("dirichlet_process", "beta_bernoulli"))


def test_negative_control_jacobi_population_update_is_rejected():
    from broken_kernels import JacobiARMStep
    from test_sampler_matrix import exact_fixed

    idata = _pure_arm(JacobiARMStep)
    with pytest.raises(AssertionError, match="goodness-of-fit failed"):
        assert_partition_gof(thinned_labels(idata, PURE_ARM_THIN),
                             exact_fixed("dirichlet_process", "beta_bernoulli"))


# --------------------------------------------------------------------------- adapter


def _small_model():
    import pymc as pm
    from test_sampler_matrix import FAMILIES

    import pymc_splitmerge as psm

    make_family, data = FAMILIES["beta_bernoulli"]
    model = pm.Model()
    with model:
        z = psm.DirichletProcess("z", alpha=1.0, n=len(data))
        psm.ConjugateMixture("y", partition=z, component=make_family(), observed=data)
    return model, z


def test_arm_step_construction_errors_and_competence():
    import pymc as pm
    from pymc.step_methods.compound import Competence

    import pymc_splitmerge as psm

    model, z = _small_model()
    with model:
        with pytest.raises(ValueError, match="unknown library"):
            psm.ARMStep(z, library="history")
        with pytest.raises(ValueError, match="n_gibbs_sweeps"):
            psm.ARMStep(z, n_gibbs_sweeps=-1)
        with pytest.raises(TypeError, match="n_gibbs_sweeps"):
            psm.ARMStep(z, n_gibbs_sweeps=0.5)
        with pytest.raises(ValueError, match="n_sams_updates"):
            psm.ARMStep(z, n_sams_updates=-1)
        with pytest.warns(UserWarning, match="not exactly invariant"):
            adaptive = psm.ARMStep(z, library="adaptive")
        from pymc.step_methods.arraystep import PopulationArrayStepShared

        assert isinstance(adaptive, psm.ARMStep)
        assert isinstance(adaptive, PopulationArrayStepShared)
        frozen = psm.ARMStep(z, library="frozen")
        assert not isinstance(frozen, PopulationArrayStepShared)
        assert psm.ARMStep.competence(z) == Competence.COMPATIBLE
        # pm.sample's automatic choice is unaffected (collapsed Gibbs stays the default)
        from pymc.sampling.mcmc import assign_step_methods
        from pymc.step_methods import STEP_METHODS

        _, selected = assign_step_methods(model, None, methods=STEP_METHODS)
        assert psm.steps.DefaultPartitionStep in selected and psm.ARMStep not in selected
        with pytest.raises(ValueError, match=r"chains >= 4"):
            pm.sample(draws=5, tune=5, chains=3, cores=1, step=psm.ARMStep(z),
                      progressbar=False, compute_convergence_checks=False, random_seed=1)
        with pytest.raises(RuntimeError, match="pm.sample with chains >= 4"):
            psm.ARMStep(z).step(model.initial_point())


def test_frozen_library_without_tuning_warns_and_only_sweeps():
    with pytest.warns(UserWarning, match="fewer than 2 distinct partitions"):
        idata, _ = _arm_sample("dirichlet_process", "beta_bernoulli", "frozen", chains=1,
                               draws=30, seed=_seed("untuned"), tune=0)
    assert np.all(np.asarray(idata["sample_stats"]["arm_move"].values) == MOVE_NONE)


def test_adaptive_library_runs_and_moves():
    with pytest.warns(UserWarning, match="not exactly invariant"):
        idata, _ = _arm_sample("pitman_yor", "normal_inverse_wishart", "adaptive", chains=4,
                               draws=100, seed=_seed("adaptive"), tune=20)
    stats = idata["sample_stats"]
    assert np.asarray(stats["arm_accepted"].values).mean() > 0
    assert "arm_n_clusters" in stats and "arm_log_accept_ratio" in stats


@pytest.mark.parametrize("library", ["ensemble", "frozen"])
def test_multiprocess_sampling_reproduces_single_process(library):
    chains = 4 if library == "ensemble" else 2
    draws = {}
    for cores in (1, 2):
        idata, _ = _arm_sample("pitman_yor", "beta_bernoulli", library, chains=chains,
                               draws=60, tune=20, cores=cores, seed=_seed("cores", library))
        draws[cores] = np.asarray(idata["labels"]["z"].values)
    np.testing.assert_array_equal(draws[1], draws[2])
