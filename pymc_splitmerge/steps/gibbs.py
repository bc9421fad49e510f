"""PyMC step method: collapsed Gibbs sampling of the partition (Neal 2000, Algorithm 3)."""

from __future__ import annotations

import numpy as np

from pymc_splitmerge.kernels.gibbs import build_gibbs_sweep
from pymc_splitmerge.steps.base import PartitionStep

__all__ = ["CollapsedGibbsStep"]


class CollapsedGibbsStep(PartitionStep):
    """Collapsed Gibbs sampler for a partition variable (component parameters integrated out).

    Each draw applies ``n_gibbs_sweeps`` sweeps of single-point updates from the full
    conditionals (:func:`pymc_splitmerge.kernels.gibbs.build_gibbs_sweep`).  Assigned
    automatically by ``pm.sample()`` to partition variables (``competence`` is IDEAL).

    Parameters
    ----------
    vars : TensorVariable or list of one TensorVariable
        The partition variable (e.g. created with ``DirichletProcess``).
    n_gibbs_sweeps : int, default 1
        Sweeps per draw.
    scan : {"random", "systematic"}
        Visiting order: a fresh random permutation per sweep, or ``0..n-1``.
    model : pymc.Model, optional
    rng : int or numpy.random.Generator, optional
        Used only if PyMC does not hand a generator to the step.

    Notes
    -----
    Sampler stats: ``gibbs_changed`` (number of point updates that moved a point to another
    cluster, int64) and ``gibbs_n_clusters`` (for the progress bar).

    References
    ----------
    Neal, R. M. (2000). Markov chain sampling methods for Dirichlet process mixture models.
    JCGS 9(2), 249-265, Algorithm 3.  MacEachern (1994).
    """

    name = "gibbs"
    stats_dtypes_shapes = {
        "gibbs_changed": (np.int64, []),
        "gibbs_n_clusters": (np.int64, []),
    }

    def __init__(self, vars, n_gibbs_sweeps: int = 1, scan: str = "random",
                 model=None, rng=None, **kwargs):
        build_gibbs_sweep(scan, n_gibbs_sweeps)  # validates the options
        self.n_gibbs_sweeps = int(n_gibbs_sweeps)
        self.scan = scan
        self.transition = self.build_transition()
        super().__init__(vars, model=model, rng=rng, **kwargs)

    def build_transition(self):
        return build_gibbs_sweep(self.scan, self.n_gibbs_sweeps)

    def kernel_step(self, state, prior, tables):
        info = self.run_transition(state, tables)
        return {"gibbs_changed": info.n_changed}
