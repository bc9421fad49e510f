"""PyMC-facing samplers that are not step methods.

* :func:`sample`: ``pm.sample`` with label-invariant convergence checks of the partition
  variables (:mod:`pymc_splitmerge.sampling.mcmc`);
* :func:`install_pymc_hooks`: ``pm.sample`` checks partitions with label-invariant
  quantities at the end of a run, checks the user's start of a partition variable before PyMC
  casts it, sees the model when it assigns steps automatically, puts the label draws in the
  group ``"labels"`` (label-invariant quantities in the posterior) and makes
  ``pm.sample_posterior_predictive`` condition on them
  (:mod:`pymc_splitmerge.sampling.hooks`, the one module of every wrapper of a PyMC name);
* :func:`splitmerge_start`: start labels for ``pm.sample(initvals=...)`` from a split-merge
  burn-in on a subsample (:mod:`pymc_splitmerge.sampling.start`);
* :func:`sample_smc`, :func:`compare_evidence`: sequential Monte Carlo over partitions with
  model evidence (:mod:`pymc_splitmerge.sampling.smc`).
"""

from pymc_splitmerge._lazy import lazy_names
from pymc_splitmerge.sampling.hooks import (
    check_partition_initvals,
    check_partition_start,
    install_pymc_hooks,
)
from pymc_splitmerge.sampling.mcmc import (
    CHECKED_QUANTITIES,
    label_invariant_convergence_checks,
    move_labels_out_of_posterior,
    numeric_log_joint,
    partition_convergence_checks,
    sample,
)
from pymc_splitmerge.sampling.start import splitmerge_start

# Loaded on first use (PEP 562): sequential Monte Carlo (:mod:`.smc`, with the numba kernels
# of ``kernels.smc``) is not needed to build a model and ``pm.sample`` it.
_LAZY_SMC = {"compare_evidence": "smc", "sample_smc": "smc"}


__getattr__, __dir__ = lazy_names(__name__, globals(), _LAZY_SMC)


__all__ = [
    "CHECKED_QUANTITIES",
    "check_partition_initvals",
    "check_partition_start",
    "compare_evidence",
    "install_pymc_hooks",
    "label_invariant_convergence_checks",
    "move_labels_out_of_posterior",
    "numeric_log_joint",
    "partition_convergence_checks",
    "sample",
    "sample_smc",
    "splitmerge_start",
]
