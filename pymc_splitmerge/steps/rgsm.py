"""PyMC step method: Jain–Neal restricted Gibbs split-merge, RGSM(t, m, g)."""

from __future__ import annotations

import numpy as np

from pymc_splitmerge.kernels.options import non_negative_integer
from pymc_splitmerge.kernels.rgsm import build_rgsm_move
from pymc_splitmerge.kernels.splitmerge_common import (
    MOVE_MERGE,
    MOVE_SPLIT,
    build_moves_then_gibbs,
)
from pymc_splitmerge.steps.base import PartitionStep

__all__ = ["RGSMStep"]


class RGSMStep(PartitionStep):
    """Restricted Gibbs split-merge sampler RGSM(t, m, g) of Jain & Neal for a partition.

    Each draw performs ``m = n_split_merge_updates`` split-merge Metropolis–Hastings
    updates, each built from a random launch state refined by ``t = n_intermediate_scans``
    restricted Gibbs scans (paper Algorithm 2, :func:`pymc_splitmerge.kernels.rgsm.
    build_rgsm_move`), then ``g = n_gibbs_sweeps`` full collapsed Gibbs sweeps
    (``kernels.splitmerge_common.build_moves_then_gibbs``).  The defaults are the paper's
    recommended RGSM(5, 1, 1).

    Parameters
    ----------
    vars : TensorVariable or list of one TensorVariable
        The partition variable.
    n_intermediate_scans : int, default 5
        ``t`` (>= 0).
    n_split_merge_updates : int, default 1
        ``m`` (>= 1).
    n_gibbs_sweeps : int, default 1
        ``g`` (>= 0).
    model : pymc.Model, optional
    rng : int or numpy.random.Generator, optional
        Used only if PyMC does not hand a generator to the step.

    Notes
    -----
    Sampler stats: ``rgsm_n_split_proposals``, ``rgsm_n_merge_proposals``,
    ``rgsm_n_accepted`` (int64), ``rgsm_accept_rate`` (float64) and ``rgsm_n_clusters``.

    References
    ----------
    Jain, S. and Neal, R. M. (2004). A split-merge Markov chain Monte Carlo procedure for the
    Dirichlet process mixture model. JCGS 13(1); tech. report (2000) §3.3–3.4 and §4.
    """

    name = "rgsm"
    stats_dtypes_shapes = {
        "rgsm_n_split_proposals": (np.int64, []),
        "rgsm_n_merge_proposals": (np.int64, []),
        "rgsm_n_accepted": (np.int64, []),
        "rgsm_accept_rate": (np.float64, []),
        "rgsm_n_clusters": (np.int64, []),
    }

    def __init__(self, vars, n_intermediate_scans: int = 5, n_split_merge_updates: int = 1,
                 n_gibbs_sweeps: int = 1, model=None, rng=None, **kwargs):
        self.n_intermediate_scans = non_negative_integer(n_intermediate_scans,
                                                         "n_intermediate_scans")
        self.n_split_merge_updates = non_negative_integer(n_split_merge_updates,
                                                          "n_split_merge_updates")
        if self.n_split_merge_updates < 1:
            raise ValueError("n_split_merge_updates must be >= 1 (it is m in RGSM(t, m, g))")
        self.n_gibbs_sweeps = non_negative_integer(n_gibbs_sweeps, "n_gibbs_sweeps")
        self.transition = self.build_transition()
        super().__init__(vars, model=model, rng=rng, **kwargs)
        if self.n_points < 2:
            raise ValueError(
                f"RGSMStep needs a partition of at least 2 points; got {self.n_points}")

    def build_transition(self):
        return build_moves_then_gibbs(build_rgsm_move(self.n_intermediate_scans),
                                      n_moves=self.n_split_merge_updates,
                                      n_gibbs_sweeps=self.n_gibbs_sweeps)

    def kernel_step(self, state, prior, tables):
        updates = self.run_transition(state, tables).moves
        n_accepted = sum(int(update.accepted) for update in updates)
        return {
            "rgsm_n_split_proposals": sum(update.move == MOVE_SPLIT for update in updates),
            "rgsm_n_merge_proposals": sum(update.move == MOVE_MERGE for update in updates),
            "rgsm_n_accepted": n_accepted,
            "rgsm_accept_rate": n_accepted / len(updates) if updates else float("nan"),
        }
