"""PyMC step method: particle Gibbs split-merge (Bouchard-Côté, Doucet & Roth 2017)."""

from __future__ import annotations

import numpy as np

from pymc_splitmerge.kernels import pgsm as pgsm_kernels
from pymc_splitmerge.kernels.anchors import AnchorProposal, validate_anchor_options
from pymc_splitmerge.kernels.options import non_negative_integer
from pymc_splitmerge.kernels.splitmerge_common import MOVE_NAMES, build_moves_then_gibbs
from pymc_splitmerge.steps.base import PartitionStep

__all__ = ["PGSMStep"]


class PGSMStep(PartitionStep):
    """Particle Gibbs split-merge sampler for a partition variable.

    Each draw applies one PGSM transition
    (:mod:`pymc_splitmerge.kernels.pgsm`): anchors, closure, conditional SMC
    with the current restricted partition pinned as the reference particle, and an exact
    particle-Gibbs update of the restricted partition (no accept/reject step); then
    ``n_gibbs_sweeps`` collapsed Gibbs sweeps
    (``kernels.splitmerge_common.build_moves_then_gibbs``).

    Parameters
    ----------
    vars : TensorVariable or list of one TensorVariable
        The partition variable (e.g. created with ``DirichletProcess``).
    num_particles : int, default 20
        Number of particles ``N >= 2``.
    resampling_threshold : float, default 0.5
        Resample when the relative ESS falls below this value (0: never, 1: always).
    n_anchors : int, default 2
        ``|s| >= 2``; 3 lets a finite-prior chain split and merge at once (paper, App. D).
    anchor_proposal : {"uniform", "cluster_informed", "threshold_informed"}
        Anchor law (``kernels.anchors``); the informed ones need ``n_anchors == 2`` and are
        adapted (record-breaking number of clusters) during tuning only, then frozen.
    annealing : bool, default True
        Annealed intermediate targets (paper §3.4).
    n_gibbs_sweeps : int, default 0
        Collapsed Gibbs sweeps after each PGSM move.
    model : pymc.Model, optional
    rng : int or numpy.random.Generator, optional
        Used only if PyMC does not hand a generator to the step.

    Notes
    -----
    Sampler stats: ``pgsm_move`` (int64: index into ``PGSMStep.move_names`` =
    ``("none", "split", "merge", "reallocate")``), ``pgsm_resampling_events`` (int64),
    ``pgsm_relative_ess`` (float64, relative ESS of the final weights) and
    ``pgsm_n_clusters`` (progress bar).

    References
    ----------
    Bouchard-Côté, A., Doucet, A. and Roth, A. (2017). Particle Gibbs split-merge sampling
    for Bayesian inference in mixture models. JMLR 18(28).
    """

    name = "pgsm"
    move_names = MOVE_NAMES
    stats_dtypes_shapes = {
        "pgsm_move": (np.int64, []),
        "pgsm_resampling_events": (np.int64, []),
        "pgsm_relative_ess": (np.float64, []),
        "pgsm_n_clusters": (np.int64, []),
    }

    def __init__(self, vars, num_particles: int = 20, resampling_threshold: float = 0.5,
                 n_anchors: int = 2, anchor_proposal: str = "uniform", annealing: bool = True,
                 n_gibbs_sweeps: int = 0, model=None, rng=None, **kwargs):
        self.resampling_threshold = pgsm_kernels.validate_pgsm_options(
            num_particles, resampling_threshold, n_anchors)
        validate_anchor_options(anchor_proposal, n_anchors)
        self.n_gibbs_sweeps = non_negative_integer(n_gibbs_sweeps, "n_gibbs_sweeps")
        if not isinstance(annealing, bool | np.bool_):
            raise TypeError(f"annealing must be True or False; got {annealing!r}")
        self.num_particles = int(num_particles)
        self.n_anchors = int(n_anchors)
        self.annealing = bool(annealing)
        self.anchor_proposal = AnchorProposal(anchor_proposal, n_anchors=self.n_anchors)
        self.transition = self.build_transition()
        super().__init__(vars, model=model, rng=rng, **kwargs)
        if self.n_points < self.n_anchors:
            raise ValueError(
                f"n_anchors={self.n_anchors} exceeds the number of data points {self.n_points}"
            )

    def reset_chain(self) -> None:
        super().reset_chain()  # sets tune=True until PyMC's stop_tuning()
        if hasattr(self, "anchor_proposal"):
            self.anchor_proposal.reset()

    def build_transition(self):
        return build_moves_then_gibbs(self._build_move(), n_moves=1,
                                      n_gibbs_sweeps=self.n_gibbs_sweeps)

    def _build_move(self):
        """The PGSM move ``move(model, partition, tables, rng) -> PGSMInfo``, built once."""
        return pgsm_kernels.build_pgsm_move(
            num_particles=self.num_particles, resampling_threshold=self.resampling_threshold,
            annealing=self.annealing, anchor_proposal=self.anchor_proposal)

    def kernel_step(self, state, prior, tables):
        if self.tune:
            self.anchor_proposal.adapt(state, tables[1])
        (info,) = self.run_transition(state, tables).moves
        return {
            "pgsm_move": info.move,
            "pgsm_resampling_events": info.resampling_events,
            "pgsm_relative_ess": info.relative_ess,
        }
