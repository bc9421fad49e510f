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

from pymc_splitmerge.core.enumerate import enumerate_partitions
from pymc_splitmerge.core.relabel import partition_index
from pymc_splitmerge.kernels.arm import (
    arm_step,
    arm_transition_log_probabilities,
    propose_arm,
    reference_arm_run,
)
from pymc_splitmerge.kernels.splitmerge_common import MOVE_MERGE, MOVE_NONE, MOVE_SPLIT
from pymc_splitmerge.kernels.state import PartitionState
from pymc_splitmerge.testing import assert_partition_gof, exact_posterior
from splitmerge_problems import PRIORS, PROBLEMS, bernoulli_problem

SEED = 20261126
N_KERNEL_DRAWS = 3000


def _disagreeing_pairs(labels_a, labels_b):
    n = len(labels_a)
    return [(p, q) for p in range(n) for q in range(p + 1, n)
            if (labels_a[p] == labels_a[q]) != (labels_b[p] == labels_b[q])]


def _path_sums(family, x, prior, triples, rng, enforce_eq17=True):
    n = x.shape[0]
    partitions = enumerate_partitions(n)
    log_v_table, log_w_table = prior.tables(n)
    sums = []
    for z, labels_a, labels_b in triples:
        state = PartitionState(family, x, z)
        for anchor_i, anchor_j in _disagreeing_pairs(labels_a, labels_b):
            rank = rng.permutation(n)
            log_t = arm_transition_log_probabilities(
                state, labels_a, labels_b, anchor_i, anchor_j, rank, partitions, log_v_table,
                log_w_table, enforce_eq17=enforce_eq17)
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
    sums = _path_sums(family, x, PRIORS["dp"], triples, rng, enforce_eq17=False)
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
        before = state.labels_slots.copy()
        proposal = propose_arm(state, log_v_table, log_w_table, rng, labels_a, labels_b)
        np.testing.assert_array_equal(state.labels_slots, before)
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
        info = arm_step(state, log_v_table, log_w_table, rng, labels_a, labels_b)
        accepted += info.accepted
        assert info.n_clusters == state.n_clusters <= 3
        assert (info.n_moved > 0) <= info.accepted
    state.check()
    assert accepted > 0
    with pytest.raises(ValueError, match="labels_a must be labels of shape"):
        arm_step(state, log_v_table, log_w_table, rng, np.zeros(6), np.zeros(7))
    info = arm_step(state, log_v_table, log_w_table, rng, np.zeros(7), np.zeros(7))
    assert info.move == MOVE_NONE and not info.accepted


# --------------------------------------------------------------------------- invariance


def _arm_one_step_draws(prior, family, x, rng, *, own_state=False, negative_control=None,
                        num_samples=N_KERNEL_DRAWS):
    """z, z^a, z^b independent exact draws; one ARM move of z."""
    exact = exact_posterior(prior, family, x)
    log_v_table, log_w_table = prior.tables(x.shape[0])
    starts = exact.sample(num_samples, rng)
    library = exact.sample(2 * num_samples, rng)
    out = np.empty_like(starts)
    for row in range(num_samples):
        state = PartitionState(family, x, starts[row])
        labels_a = starts[row] if own_state else library[2 * row]
        arm_step(state, log_v_table, log_w_table, rng, labels_a, library[2 * row + 1],
                 _negative_control=negative_control)
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
