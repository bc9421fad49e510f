"""Deliberately broken kernels: the negative controls of the exactness tests.

Each variant is built here from the kernel modules' private pieces, so that none of them is
reachable through a public signature of the package.  Every test that uses one asserts that
the same check which passes the real kernel rejects the variant.
"""

from __future__ import annotations

from pymc_splitmerge.kernels import pgsm, rgsm, sams
from pymc_splitmerge.kernels.pgsm import PGSMOptions
from pymc_splitmerge.kernels.splitmerge_common import ProposeThenAccept
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


def sams_sampled_reverse_split_move(anchor_proposal=None):
    """SAMS whose merge takes its reverse split probability from a freshly *sampled* split
    (the R ``sams`` package's mistake) instead of the forced current allocation."""
    return ProposeThenAccept(sams._sams_proposal, anchor_proposal, True)


def sams_cluster_anchors_without_anchor_law_ratio():
    """SAMS with cluster anchors whose acceptance ratio drops the anchor law's ratio."""
    return sams._ClusterSAMSMove(anchor_correction=False)


def rgsm_path_probability_move(n_intermediate_scans: int = 5):
    """RGSM that scores the intermediate scans' path in the proposal probability (the
    reverse move does not retrace it)."""
    return ProposeThenAccept(rgsm._rgsm_proposal, n_intermediate_scans, 1)


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
