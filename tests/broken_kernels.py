"""Deliberately broken kernels: the negative controls of the exactness tests.

Each variant is composed here from the kernel modules' private pieces (the real proposal,
then a change of its log acceptance ratio, or a subclass overriding one method), so that the
production kernels carry no switch for them and none is reachable through a public
signature of the package.  Every test that uses one asserts that the same check which passes
the real kernel rejects the variant.
"""

from __future__ import annotations

import numba
import numpy as np
from kernel_references import composed_cluster_sams_updates

from pymc_splitmerge.kernels import arm, pgsm, rgsm, sams, smc
from pymc_splitmerge.kernels.anchors import uniform_anchors
from pymc_splitmerge.kernels.pgsm import PGSMOptions
from pymc_splitmerge.kernels.rng import numba_seed_from, seed_numba_from
from pymc_splitmerge.kernels.splitmerge_common import (
    MOVE_MERGE,
    MOVE_NONE,
    MOVE_SPLIT,
    NO_PROPOSAL,
    ProposeThenAccept,
    SplitMergeInfo,
    SplitMergeProposal,
    anchor_clusters_members,
)
from pymc_splitmerge.kernels.state import PriorTables
from pymc_splitmerge.steps.arm import _PopulationARMStep
from pymc_splitmerge.steps.sams import DefaultPartitionStep

__all__ = [
    "ConcentrationFromItsPriorStep",
    "JacobiARMStep",
    "arm_transition_log_probabilities_without_eq17",
    "on_state",
    "pgsm_plain_smc_move",
    "rgsm_path_probability_move",
    "sams_cluster_anchors_without_anchor_law_ratio",
    "sams_sampled_reverse_split_move",
    "smc_cumulative_weights_evidence_runs",
    "smc_drop_first_term_evidence_runs",
    "smc_weight_after_move_evidence_runs",
    "smc_weight_after_move_run",
]


def on_state(move):
    """``kernel(state, log_v_table, log_w_table, rng)`` applying a built ``move`` to a
    ``PartitionState`` (the form the test helpers of ``kernel_checks`` call)."""

    def kernel(state, log_v_table, log_w_table, rng):
        return move(state.model, state.partition, PriorTables(log_v_table, log_w_table), rng)

    return kernel


def _uniform_anchor_pair(n, uniforms):
    """The anchors the kernels draw from ``uniforms[-2:]`` (``kernels.anchors``)."""
    anchors = np.empty(2, dtype=np.int64)
    uniform_anchors(n, uniforms[uniforms.shape[0] - 2:], anchors)
    return int(anchors[0]), int(anchors[1])


def _sams_sampled_reverse_proposal(model, partition, tables, rng):
    """SAMS's proposal (same uniforms as ``kernels.sams._sams_proposal``); a merge's log
    ratio then swaps the forced reverse split's log probability for a sampled split's."""
    n = model.x.shape[0]
    if n < 2:
        return NO_PROPOSAL
    uniforms = rng.random(2 * n)
    anchor_i, anchor_j = _uniform_anchor_pair(n, uniforms)
    move, log_ratio, moving, target = sams.sams_proposal_core(
        model, partition, tables, anchor_i, anchor_j, uniforms)
    if move == MOVE_MERGE:
        family_id, params, x = model
        members, current_sides = anchor_clusters_members(partition.labels, anchor_i, anchor_j)
        size_s = members.shape[0]
        permutation = np.argsort(uniforms[:size_s])
        order = members[permutation]

        def log_allocation(forced, sides, allocation_uniforms):
            return sams.sequential_allocation(
                family_id, params, x, anchor_i, anchor_j, order, forced, sides,
                allocation_uniforms, tables.log_w, partition.empty_row)[0]

        log_forced = log_allocation(True, current_sides[permutation], uniforms)
        log_sampled = log_allocation(False, np.empty(size_s, dtype=np.int64),
                                     uniforms[size_s:2 * size_s])
        log_ratio += log_sampled - log_forced
    return SplitMergeProposal(move, moving, target, log_ratio)


def sams_sampled_reverse_split_move():
    """SAMS whose merge takes its reverse split probability from a freshly *sampled* split
    (the R ``sams`` package's mistake) instead of the forced current allocation."""
    return ProposeThenAccept(_sams_sampled_reverse_proposal)


class _ClusterSAMSWithoutAnchorLawRatio:
    """One cluster-anchor SAMS update without the anchor law's log ratio (the plain-Python
    twin of ``kernels.sams._sams_updates``, seeded per call as the real move is)."""

    def __call__(self, model, partition, tables, rng):
        if model.x.shape[0] < 2:
            return SplitMergeInfo(MOVE_NONE, False, float("nan"))
        accepted = composed_cluster_sams_updates(model, partition, tables, 1,
                                                 numba_seed_from(rng), anchor_law_ratio=False)
        return SplitMergeInfo(MOVE_NONE, bool(accepted), float("nan"))


def sams_cluster_anchors_without_anchor_law_ratio():
    """SAMS with cluster anchors whose acceptance ratio drops the anchor law's ratio."""
    return _ClusterSAMSWithoutAnchorLawRatio()


def _rgsm_path_probability_proposal(model, partition, tables, rng, n_intermediate_scans):
    """RGSM's proposal (``kernels.rgsm._rgsm_proposal``, same uniforms); its proposal
    probability then also scores the intermediate scans' path of the launch state."""
    n = model.x.shape[0]
    if n < 2:
        return NO_PROPOSAL
    uniforms = rng.random((n_intermediate_scans + 2) * (n - 2) + 2)
    anchor_i, anchor_j = _uniform_anchor_pair(n, uniforms)
    move, log_ratio, moving, target = rgsm.rgsm_proposal_core(
        model, partition, tables, anchor_i, anchor_j, n_intermediate_scans, uniforms)
    members, _ = anchor_clusters_members(partition.labels, anchor_i, anchor_j)
    log_path = rgsm._launch_state(model, members, anchor_i, anchor_j, n_intermediate_scans,
                                  uniforms, tables.log_w, partition.empty_row)[4]
    # the path multiplies q(split | current) for a split, q(current | merge) for a merge
    if move == MOVE_SPLIT:
        log_ratio -= log_path
    elif move == MOVE_MERGE:
        log_ratio += log_path
    return SplitMergeProposal(move, moving, target, log_ratio)


def rgsm_path_probability_move(n_intermediate_scans: int = 5):
    """RGSM that scores the intermediate scans' path in the proposal probability (the
    reverse move does not retrace it)."""
    return ProposeThenAccept(_rgsm_path_probability_proposal, int(n_intermediate_scans))


def pgsm_plain_smc_move(*, num_particles=20, resampling_threshold=0.5, n_anchors=2,
                        annealing=True):
    """PGSM with plain SMC: no reference path pinned as particle 0."""
    options = PGSMOptions(int(num_particles), float(resampling_threshold), bool(annealing),
                          False)
    return pgsm._PGSMMove(options, int(n_anchors), None)


def arm_transition_log_probabilities_without_eq17(state, labels_a, labels_b, anchor_i, anchor_j,
                                                  rank, targets, log_v_table, log_w_table):
    """``arm.arm_transition_log_probabilities`` with the kernel's eq. (17) switch off: the last
    original member of a block that gained points may leave, so paths are not unique."""
    return arm._transition_log_probabilities(state, labels_a, labels_b, anchor_i, anchor_j,
                                             rank, targets, log_v_table, log_w_table, False)


class JacobiARMStep(_PopulationARMStep):
    """ARM ensemble in which every chain moves every draw, its library drawn from all other
    chains' previous states (a "Jacobi" update): not invariant for the product target."""

    def _library_pair(self, current_labels):
        if self.population is None or self.library != "ensemble":
            return super()._library_pair(current_labels)
        return self._pair_from([self._chain_labels(c) for c in self.other_chains])


# --------------------------------------------------------------------- SMC over partitions
def _smc_correct_runs(prior, family, x, num_particles, num_runs, rng, **kwargs):
    """The real ``smc_partition_run`` ``num_runs`` times after one seeding (the random
    stream of ``smc.log_evidence_runs``): each run's evidence increments and resampling
    flags."""
    prepared = smc._prepare_run(prior, family, x, None, None)
    options = smc._options(num_particles, **kwargs)
    seed_numba_from(rng)
    for _ in range(int(num_runs)):
        result = smc.smc_partition_run(*prepared, options, 0, np.zeros((1, 1), dtype=np.int64))
        yield result[5], result[4]


def smc_cumulative_weights_evidence_runs(prior, family, x, num_particles, num_runs, rng,
                                         **kwargs):
    """Log evidences whose step term is ``log mean_p w_cum`` (the weights accumulated since
    the last resampling) instead of ``log sum_p W_{t-1}^p v_t^p``, from the increments and
    resampling flags of the real runs (the particles do not depend on the evidence)."""
    out = np.empty(int(num_runs))
    for r, (increments, resampled) in enumerate(
            _smc_correct_runs(prior, family, x, num_particles, num_runs, rng, **kwargs)):
        since_resampling = 0.0  # log mean_p w_cum before the step's weighting
        total = 0.0
        for t in range(resampled.shape[0]):
            total += since_resampling + increments[t]
            since_resampling = 0.0 if resampled[t] else since_resampling + increments[t]
        out[r] = total + increments[-1]
    return out


def smc_drop_first_term_evidence_runs(prior, family, x, num_particles, num_runs, rng,
                                      **kwargs):
    """Log evidences without the first point's term ``log f(y_1)``."""
    return np.array([increments.sum() - increments[0] for increments, _ in
                     _smc_correct_runs(prior, family, x, num_particles, num_runs, rng,
                                       **kwargs)])


@numba.njit(cache=True)
def _weight_after_move_run(model, empty_row, order, log_prior_predictive, tables, options):
    """``smc.smc_partition_run`` (fresh run, no annealing) that proposes and moves each
    particle first and then weights it with the moved state,
    ``target(after) / (target(before) q)``, composed from the kernel's private pieces."""
    n = model.x.shape[0]
    L = options.num_particles
    population = smc.empty_population(L, n, empty_row)
    spare = smc.empty_population(L, n, empty_row)
    log_weights = np.zeros(L)
    weights = np.empty(L)
    increments = np.empty(L)
    ancestors = np.arange(L)
    alloc = np.empty((L, n + 2))
    counts = np.zeros(L, dtype=np.int64)
    scratch = np.empty(n + 2)
    log_evidence = 0.0
    cursor = 0
    for t in range(1, n + 1):
        seating = smc._allocation_step(model, tables, population, t, order[t - 1],
                                       log_prior_predictive, counts, alloc, increments)
        for p in range(L):
            part = smc.particle(population, empty_row, p)
            choice = smc._draw_option(alloc[p], counts[p] + 1, scratch)
            log_q = alloc[p, choice] - increments[p]
            before = smc._log_target(part, seating.log_v_prev, seating.log_w_prev, model)
            smc._place(model, part, order[t - 1], choice, counts[p])
            if options.rejuvenation > 0 and t > 1:
                smc._rejuvenate(model, part, order, t, cursor, options.rejuvenation,
                                log_prior_predictive, seating.log_v_now, seating.log_w_now,
                                scratch)
            after = smc._log_target(part, seating.log_v_now, seating.log_w_now, model)
            increments[p] = after - before - log_q
        increment, _, did = smc.reweight_and_resample(log_weights, increments,
                                                      options.ess_threshold, options.scheme,
                                                      weights, ancestors)
        if did:
            smc._resample_population(order[:t], ancestors, population, spare, empty_row)
            population, spare = spare, population
        if options.rejuvenation > 0 and t > 1:
            cursor = (cursor + options.rejuvenation) % (t - 1)
        log_evidence += increment
    return population.labels, log_weights, log_evidence


def smc_weight_after_move_run(prior, family, x, num_particles, rng, *, rejuvenation=0,
                              ess_threshold=0.5, resampling="systematic", prepared=None):
    """One SMC run weighting after the move: ``(canonical labels, normalised log weights,
    log evidence)`` as the fields of ``smc.run_smc``'s result."""
    if prepared is None:
        prepared = smc._prepare_run(prior, family, x, None, None)
    options = smc._options(num_particles, rejuvenation, ess_threshold, resampling)
    seed_numba_from(rng)
    labels, log_weights, log_evidence = _weight_after_move_run(*prepared, options)
    normalised, _ = smc.reference_normalise_log_weights(log_weights)
    return smc.SMCResult(smc.canonical_labels(labels), np.log(normalised), float(log_evidence),
                         None, None, None)


def smc_weight_after_move_evidence_runs(prior, family, x, num_particles, num_runs, rng,
                                        **kwargs):
    """Log evidences of ``num_runs`` runs weighting after the move (one seeding, as
    ``smc.log_evidence_runs``)."""
    prepared = smc._prepare_run(prior, family, x, None, None)
    options = smc._options(num_particles, **kwargs)
    seed_numba_from(rng)
    return np.array([_weight_after_move_run(*prepared, options)[2]
                     for _ in range(int(num_runs))])


class ConcentrationFromItsPriorStep(DefaultPartitionStep):
    """The default step owning alpha, with alpha drawn from its Gamma prior instead of
    ``p(alpha | K, n)``: the partition's law is still right (alpha is integrated out of
    its moves), the joint law of the partition and alpha is not."""

    def draw_concentration(self, n_clusters):
        prior = self.fixed_prior[0]
        return float(self.rng.gamma(prior.shape, 1.0 / prior.rate))
