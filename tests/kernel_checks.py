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
* :func:`exactness_tests`: the two tests every partition move gets, one-step invariance for
  every prior and problem and its negative control, made for a test module to bind.
"""

from __future__ import annotations

import numpy as np
import pytest

from pymc_splitmerge.kernels.state import PartitionState
from pymc_splitmerge.testing import assert_partition_gof, exact_posterior

__all__ = ["exactness_tests", "kernel_chain_draws", "one_step_invariance_draws"]


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


def exactness_tests(kernel, broken_kernel, priors, problems, seed, *, num_samples=3000,
                    control=("dp", "niw"), control_samples=1000):
    """The two χ² tests of a partition kernel, for a test module to bind to ``test_*`` names.

    Parameters
    ----------
    kernel, broken_kernel : callable
        ``kernel(state, log_v_table, log_w_table, rng)`` (``broken_kernels.on_state`` makes
        one of a built move); ``broken_kernel`` is the negative control, a deliberately
        non-invariant variant.
    priors, problems : dict
        Name -> numeric prior, and name -> ``problem() -> (family, x)`` (the ``PRIORS`` and
        ``PROBLEMS`` of ``conftest``).
    seed : int or sequence of int
        Entropy of the tests' generators (with the prior's and problem's names).
    num_samples : int, default 3000
        Exact draws per one-step invariance test.
    control : (str, str), default ("dp", "niw")
        Prior and problem of the negative control.
    control_samples : int, default 1000
        Thinned draws of the negative control's chain (:func:`kernel_chain_draws`).

    Returns
    -------
    one_step_invariance : function
        ``(name, problem)``, parametrised over every prior and problem: exact posterior draws
        moved by one transition of ``kernel`` pass the χ² test.
    negative_control_is_rejected : function
        A chain of ``broken_kernel`` fails the same test.
    """
    seed = list(np.atleast_1d(seed))

    @pytest.mark.parametrize("problem", sorted(problems))
    @pytest.mark.parametrize("name", sorted(priors))
    def one_step_invariance(name, problem):
        rng = np.random.default_rng([*seed, 1, len(name), len(problem)])
        family, x = problems[problem]()
        samples, exact = one_step_invariance_draws(kernel, priors[name], family, x,
                                                   num_samples, rng)
        assert_partition_gof(samples, exact)

    def negative_control_is_rejected():
        prior_name, problem = control
        rng = np.random.default_rng([*seed, 2])
        family, x = problems[problem]()
        samples, exact = kernel_chain_draws(broken_kernel, priors[prior_name], family, x,
                                            control_samples, rng)
        with pytest.raises(AssertionError):
            assert_partition_gof(samples, exact)

    return one_step_invariance, negative_control_is_rejected
