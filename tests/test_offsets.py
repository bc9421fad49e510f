"""Data far from zero relative to their spread, in the numeric kernels.

The continuous families take their sufficient statistics about the prior mean (``x - mu0``;
the residuals ``y - x' beta0`` for the regression), so that with ``mu0`` near the data an
offset of 1e6 x the spread costs no digits: the cached statistics after long add/remove
sequences and Gibbs sweeps equal a fresh rebuild, the log marginals do not change when the
data and ``mu0`` move together, a seeded chain gives the same labels as on the centred
data, and the parameters drawn for a cluster are the centred ones plus the offset.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import PRIORS

from pymc_splitmerge.components import (
    NormalInverseGamma,
    NormalInverseWishart,
    NormalKnownCovariance,
    NormalLinearRegression,
    dispatch,
)
from pymc_splitmerge.kernels.gibbs import gibbs_sweep
from pymc_splitmerge.kernels.state import PartitionState

OFFSETS = [1e2, 1e4, 1e6, 1e8]
N = 45


def _centred_data(name):
    rng = np.random.default_rng(11)
    centres = np.repeat([-2.0, 0.0, 2.5], N // 3)
    if name == "nig":
        return rng.normal(centres, 1.0)[:, None]
    if name == "regression":
        covariate = rng.normal(size=N)
        response = centres + 0.7 * covariate + rng.normal(scale=0.5, size=N)
        return np.column_stack([response, np.ones(N), covariate])
    dim = {"niw2": 2, "niw3": 3, "nkc": 2}[name]
    return centres[:, None] + rng.normal(size=(N, dim))


def _family(name, offset):
    """The family with its location hyperparameter moved by ``offset``."""
    if name == "nig":
        return NormalInverseGamma(mu0=offset, kappa0=0.5, alpha0=2.0, beta0=1.0)
    if name == "niw2":
        return NormalInverseWishart(mu0=np.full(2, offset), kappa0=0.5, nu0=4.0, psi0=np.eye(2))
    if name == "niw3":
        return NormalInverseWishart(mu0=np.full(3, offset), kappa0=0.5, nu0=5.0, psi0=np.eye(3))
    if name == "nkc":
        return NormalKnownCovariance(mu0=np.full(2, offset), sigma0=4.0, sigma=1.0)
    return NormalLinearRegression(beta0=np.array([offset, 0.0]), V0=4.0, a0=2.0, b0=1.0)


def _offset_data(name, offset):
    x = _centred_data(name).copy()
    x[:, 0 if name == "regression" else slice(None)] += offset
    return x


def _setup(name, offset):
    family = _family(name, offset)
    return family, family.prepare_data(_offset_data(name, offset))


FAMILIES = ["nig", "niw2", "niw3", "nkc", "regression"]


def _fresh_log_marginals(family, x, labels):
    return np.array([family.log_marginal(family.stats_of(x[labels == k]))
                     for k in np.unique(labels)])


def _tolerance(offset):
    # rounding of the data themselves: x + offset is stored to offset * 2^-53
    return 1e-8 if offset <= 1e6 else 1e-6


@pytest.mark.parametrize("offset", OFFSETS)
@pytest.mark.parametrize("name", FAMILIES)
def test_cached_statistics_match_rebuild_after_many_moves(name, offset):
    """20,000 single-point moves through add/remove: cached rows equal a fresh rebuild."""
    family, x = _setup(name, offset)
    rng = np.random.default_rng(3)
    labels = rng.integers(3, size=N)
    stats = np.tile(family.empty_stats, (3, 1))
    for i in range(N):
        dispatch.add_point(family.family_id, family.params, stats[labels[i]], x[i])
    for _ in range(20_000):
        i = rng.integers(N)
        dispatch.remove_point(family.family_id, family.params, stats[labels[i]], x[i])
        labels[i] = rng.integers(3)
        dispatch.add_point(family.family_id, family.params, stats[labels[i]], x[i])
    fresh = _fresh_log_marginals(family, x, labels)
    cached = np.array([family.log_marginal(stats[k]) for k in range(3)])
    np.testing.assert_allclose(cached, fresh, rtol=_tolerance(offset), atol=0)
    for k in range(3):
        fresh_row = family.stats_of(x[labels == k])
        np.testing.assert_allclose(
            family.log_predictive(x[0], stats[k]), family.log_predictive(x[0], fresh_row),
            rtol=_tolerance(offset), atol=0)


@pytest.mark.parametrize("offset", OFFSETS)
@pytest.mark.parametrize("name", FAMILIES)
def test_log_densities_invariant_when_data_and_prior_mean_move_together(name, offset):
    centred_family, centred = _setup(name, 0.0)
    family, x = _setup(name, offset)
    labels = np.arange(N) % 4
    np.testing.assert_allclose(_fresh_log_marginals(family, x, labels),
                               _fresh_log_marginals(centred_family, centred, labels),
                               rtol=1e-6, atol=0)
    for k in range(4):
        np.testing.assert_allclose(
            family.log_predictive(x[5], family.stats_of(x[labels == k])),
            centred_family.log_predictive(centred[5], centred_family.stats_of(centred[labels == k])),
            rtol=1e-6, atol=0)


@pytest.mark.parametrize("offset", [1e2, 1e4, 1e6])
@pytest.mark.parametrize("name", FAMILIES)
def test_seeded_gibbs_chain_is_offset_invariant(name, offset):
    """Same seed, same labels on offset and centred data; the kernel's cached rows after
    300 sweeps equal a fresh rebuild."""
    tables = PRIORS["dp"].tables(N)
    chains = []
    for shift in (0.0, offset):
        family, x = _setup(name, shift)
        state = PartitionState(family, x, np.zeros(N, dtype=int))
        rng = np.random.default_rng(17)
        history = []
        for _ in range(300):
            gibbs_sweep(state, *tables, rng)
            history.append(np.array(state.labels()))
        chains.append(np.array(history))
        for slot in np.flatnonzero(state.sizes > 0):
            fresh = family.log_marginal(family.stats_of(x[state.slot_labels == slot]))
            np.testing.assert_allclose(family.log_marginal(state.stats[slot]), fresh,
                                       rtol=_tolerance(offset), atol=0)
    np.testing.assert_array_equal(chains[0], chains[1])


@pytest.mark.parametrize("offset", [1e4, 1e6])
@pytest.mark.parametrize("name", ["nig", "niw2", "nkc", "regression"])
def test_sampled_cluster_parameters_move_with_the_offset(name, offset):
    """``sample_parameters`` (what ``psm.sample_components`` draws) reports the cluster mean
    in the data's coordinates: the seeded draw on offset data is the centred draw plus the
    offset; the other parameters are unchanged."""
    centred_family, centred = _setup(name, 0.0)
    family, x = _setup(name, offset)
    rows = slice(0, N // 3)
    base = centred_family.sample_parameters(np.random.default_rng(5), centred[rows])
    moved = family.sample_parameters(np.random.default_rng(5), x[rows])
    location = {"nig": "mean", "niw2": "mean", "nkc": "mean", "regression": "coefficients"}[name]
    shift = np.zeros_like(np.asarray(base[location]))
    if name == "regression":
        shift[0] = offset
    else:
        shift[...] = offset
    for key, value in base.items():
        expected = np.asarray(value) + (shift if key == location else 0.0)
        np.testing.assert_allclose(moved[key], expected, rtol=1e-7, atol=1e-7 * offset * 1e-3)
