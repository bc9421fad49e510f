"""PyMC-facing samplers that are not step methods.

* :func:`sample`: ``pm.sample`` with label-invariant convergence checks of the partition
  variables (:mod:`pymc_splitmerge.sampling.mcmc`);
* :func:`splitmerge_start`: start labels for ``pm.sample(initvals=...)`` from a split-merge
  burn-in on a subsample (:mod:`pymc_splitmerge.sampling.start`);
* :func:`sample_smc`, :func:`compare_evidence`: sequential Monte Carlo over partitions with
  model evidence (:mod:`pymc_splitmerge.sampling.smc`).
"""

from pymc_splitmerge.sampling.mcmc import (
    CHECKED_QUANTITIES,
    install_pymc_convergence_checks,
    label_invariant_convergence_checks,
    numeric_log_joint,
    partition_convergence_checks,
    sample,
)
from pymc_splitmerge.sampling.smc import compare_evidence, sample_smc
from pymc_splitmerge.sampling.start import splitmerge_start

__all__ = [
    "CHECKED_QUANTITIES",
    "compare_evidence",
    "install_pymc_convergence_checks",
    "label_invariant_convergence_checks",
    "numeric_log_joint",
    "partition_convergence_checks",
    "sample",
    "sample_smc",
    "splitmerge_start",
]
