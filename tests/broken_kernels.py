"""Deliberately broken kernels: the negative controls of the exactness tests.

Each variant is composed here from the kernel modules' private pieces (the real proposal,
then a change of its log acceptance ratio, or a subclass overriding one method), so that the
production kernels carry no switch for them and none is reachable through a public
signature of the package.  Every test that uses one asserts that the same check which passes
the real kernel rejects the variant.
"""

from __future__ import annotations

import numpy as np
from kernel_references import composed_cluster_sams_updates

from pymc_splitmerge.kernels import pgsm, rgsm, sams
from pymc_splitmerge.kernels.anchors import uniform_anchors
from pymc_splitmerge.kernels.pgsm import PGSMOptions
from pymc_splitmerge.kernels.rng import numba_seed_from
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

__all__ = [
    "JacobiARMStep",
    "on_state",
    "pgsm_plain_smc_move",
    "rgsm_path_probability_move",
    "sams_cluster_anchors_without_anchor_law_ratio",
    "sams_sampled_reverse_split_move",
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


class JacobiARMStep(_PopulationARMStep):
    """ARM ensemble in which every chain moves every draw, its library drawn from all other
    chains' previous states (a "Jacobi" update): not invariant for the product target."""

    def _library_pair(self, current_labels):
        if self.population is None or self.library != "ensemble":
            return super()._library_pair(current_labels)
        return self._pair_from([self._chain_labels(c) for c in self.other_chains])
