"""PyMC step method: collapsed Gibbs sampling of the partition (Neal 2000, Algorithm 3)."""

from __future__ import annotations

import numpy as np

from pymc_splitmerge.kernels.gibbs import gibbs_sweep
from pymc_splitmerge.steps.base import PartitionStep

__all__ = ["CollapsedGibbsStep"]


class CollapsedGibbsStep(PartitionStep):
    """Collapsed Gibbs sampler for a partition variable (component parameters integrated out).

    Each draw applies ``n_sweeps`` sweeps of single-point updates from the full conditionals
    (:func:`pymc_splitmerge.kernels.gibbs.gibbs_sweep`).  Assigned automatically by
    ``pm.sample()`` to partition variables (``competence`` is IDEAL).

    Parameters
    ----------
    vars : TensorVariable or list of one TensorVariable
        The partition variable (e.g. created with ``DirichletProcess``).
    n_sweeps : int
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

    def __init__(self, vars, n_sweeps: int = 1, scan: str = "random", model=None, rng=None,
                 **kwargs):
        if scan not in ("random", "systematic"):
            raise ValueError(f"scan must be 'random' or 'systematic'; got {scan!r}")
        if int(n_sweeps) != n_sweeps or n_sweeps < 1:
            raise ValueError(f"n_sweeps must be a positive integer; got {n_sweeps!r}")
        self.n_sweeps = int(n_sweeps)
        self.scan = scan
        super().__init__(vars, model=model, rng=rng, **kwargs)

    def kernel_step(self, state, prior, tables):
        log_v_table, log_w_table = tables
        info = gibbs_sweep(state, log_v_table, log_w_table, self.rng, scan=self.scan,
                           n_sweeps=self.n_sweeps)
        return {"gibbs_changed": info.n_changed}
