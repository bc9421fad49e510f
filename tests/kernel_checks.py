"""Draws for testing a partition kernel against the exact posterior (test helpers).

A *kernel* here is any callable ``kernel(state, log_v_table, log_w_table, rng)`` that
updates a :class:`~pymc_splitmerge.kernels.state.PartitionState` in place: the collapsed Gibbs
sweep and the SAMS, RGSM and PGSM transitions of :mod:`pymc_splitmerge.kernels`, with their
options bound by ``functools.partial``.

* :func:`one_step_invariance_draws`: i.i.d. exact posterior draws, each moved by the kernel;
  if the kernel leaves the posterior invariant the results are again i.i.d. posterior draws,
  so :func:`~pymc_splitmerge.testing.assert_partition_gof` applies without thinning issues.
* :func:`kernel_chain_draws`: one long chain of the kernel alone, thinned, which also tests
  irreducibility (convergence to the posterior from a single-cluster start).
"""

from __future__ import annotations

import numpy as np

from pymc_splitmerge.kernels.state import PartitionState
from pymc_splitmerge.testing import exact_posterior

__all__ = ["kernel_chain_draws", "one_step_invariance_draws"]


def _setup(prior, family, data, log_v_table, log_w_table):
    exact = exact_posterior(prior, family, data)
    x = family.prepare_data(data)
    default_v, default_w = prior.tables(x.shape[0])
    log_v_table = default_v if log_v_table is None else log_v_table
    log_w_table = default_w if log_w_table is None else log_w_table
    return exact, x, log_v_table, log_w_table


def one_step_invariance_draws(kernel, prior, family, data, num_samples, rng, *, transitions=1,
                              log_v_table=None, log_w_table=None):
    """Exact posterior draws moved by ``transitions`` kernel transitions each.

    Parameters
    ----------
    kernel : callable
        ``kernel(state, log_v_table, log_w_table, rng)``, updating ``state`` in place.
    prior : GibbsTypePrior
    family : ComponentFamily
        Numeric family.
    data : array_like
        Raw data (``family.prepare_data`` is applied).
    num_samples : int
    rng : numpy.random.Generator
    transitions : int, default 1
    log_v_table, log_w_table : ndarray, optional
        Tables handed to the kernel instead of ``prior.tables(n)`` (to build negative
        controls that use the wrong prior).

    Returns
    -------
    labels : ndarray of shape (num_samples, n)
        Canonical labels after the transitions.
    exact : ExactPosterior
        The exact posterior the draws started from.
    """
    exact, x, log_v_table, log_w_table = _setup(prior, family, data, log_v_table, log_w_table)
    starts = exact.sample(num_samples, rng)
    out = np.empty_like(starts)
    for row, start in enumerate(starts):
        state = PartitionState(family, x, start)
        for _ in range(transitions):
            kernel(state, log_v_table, log_w_table, rng)
        out[row] = state.labels()
    return out, exact


def kernel_chain_draws(kernel, prior, family, data, num_samples, rng, *, thin=10, burn_in=200,
                       log_v_table=None, log_w_table=None):
    """A single chain of ``kernel`` from the one-cluster partition, thinned by ``thin``.

    Returns ``(labels, exact)`` as :func:`one_step_invariance_draws`; the chain's state is
    checked against a fresh recomputation of its statistics at the end.
    """
    exact, x, log_v_table, log_w_table = _setup(prior, family, data, log_v_table, log_w_table)
    state = PartitionState(family, x, np.zeros(x.shape[0], dtype=np.int64))
    for _ in range(burn_in):
        kernel(state, log_v_table, log_w_table, rng)
    out = np.empty((num_samples, x.shape[0]), dtype=np.int64)
    for row in range(num_samples):
        for _ in range(thin):
            kernel(state, log_v_table, log_w_table, rng)
        out[row] = state.labels()
    state.check()
    return out, exact
