"""The fused Gibbs sweep makes exactly the moves of the plain composition of the primitives.

``kernels.gibbs._gibbs_sweeps_fields`` (the transition's entry) fuses ``unassign_point``, the
seating weights, ``sample_log_weights`` and ``assign_point`` to save passes and row views per
point; ``kernel_references.composed_gibbs_sweeps`` calls those primitives in turn.  From the same
state and numba seed both must leave bit-identical labels, sizes, statistics and slot
bookkeeping, for families with and without a batch predictive leaf, priors with an infeasible
new cluster (finite Dirichlet at ``K = k``), both scans, and long enough for the NIW rows to
pass their periodic refresh.  A negative control (a sweep with one different uniform) is told
apart by the same comparison.
"""

from __future__ import annotations

import numpy as np
import pytest
from kernel_references import composed_gibbs_sweeps

from pymc_splitmerge.components import (
    BetaBernoulli,
    GammaPoisson,
    NormalInverseWishart,
    NormalKnownCovariance,
)
from pymc_splitmerge.core.relabel import canonical_labels
from pymc_splitmerge.kernels.gibbs import _gibbs_sweeps_fields
from pymc_splitmerge.kernels.rng import seed_numba
from pymc_splitmerge.kernels.state import PartitionState, PriorTables
from pymc_splitmerge.priors import DirichletProcessPrior, FiniteDirichletPrior, PitmanYorPrior


def _problem(name, rng):
    if name == "niw2":
        x = np.concatenate([rng.normal(-2, 0.5, (30, 2)), rng.normal(2, 0.5, (30, 2))])
        return NormalInverseWishart(mu0=np.zeros(2), kappa0=0.1, nu0=4.0, psi0=np.eye(2)), x
    if name == "niw3":
        x = rng.normal(0, 1.0, (40, 3)) + 3.0 * rng.integers(2, size=(40, 1))
        return NormalInverseWishart(mu0=np.zeros(3), kappa0=0.1, nu0=5.0, psi0=np.eye(3)), x
    if name == "bernoulli":
        return BetaBernoulli(a=1.0, b=1.0), rng.integers(2, size=(40, 5))
    if name == "known_covariance":
        return NormalKnownCovariance(mu0=0.0, sigma0=2.0, sigma=0.7), rng.normal(0, 2, 40)
    if name == "poisson":
        return GammaPoisson(shape=1.0, rate=0.3), rng.poisson(4.0, 40)
    raise KeyError(name)


PRIORS = {
    "dp": DirichletProcessPrior(alpha=1.0),
    "py": PitmanYorPrior(alpha=0.5, discount=0.3),
    "finite": FiniteDirichletPrior(alpha=1.0, k=2),
}


def _run(sweeps, family, x, labels, prior, n_sweeps, random_scan, seed):
    state = PartitionState(family, family.prepare_data(x), labels)
    tables = PriorTables(*prior.tables(state.n))
    seed_numba(seed)
    result = sweeps(state, tables, n_sweeps, random_scan)
    return state, result


def _fused(state, tables, n_sweeps, random_scan):
    model, p = state.model, state.partition
    return _gibbs_sweeps_fields(model.family_id, model.params, model.x, p.labels, p.sizes,
                                p.stats, p.empty_row, p.active, p.where, p.cluster_count,
                                tables.log_v, tables.log_w, n_sweeps, random_scan)


def _composed(state, tables, n_sweeps, random_scan):
    return composed_gibbs_sweeps(state.model, state.partition, tables, n_sweeps, random_scan)


def _assert_identical(first, second):
    (state_a, result_a), (state_b, result_b) = first, second
    assert tuple(result_a) == tuple(result_b)
    for a, b in zip(state_a.arrays(), state_b.arrays(), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("prior_name", list(PRIORS))
@pytest.mark.parametrize("family_name", ["niw2", "niw3", "bernoulli", "known_covariance",
                                         "poisson"])
def test_fused_sweep_equals_composed_primitives(family_name, prior_name):
    rng = np.random.default_rng(7)
    family, x = _problem(family_name, rng)
    prior = PRIORS[prior_name]
    labels = rng.integers(2, size=x.shape[0])
    # 30 sweeps: ~3,600 updates of a handful of NIW rows, past REFRESH_INTERVAL (1024)
    for random_scan, n_sweeps in ((True, 30), (False, 3)):
        fused = _run(_fused, family, x, labels, prior, n_sweeps, random_scan, 11)
        composed = _run(_composed, family, x, labels, prior, n_sweeps, random_scan, 11)
        _assert_identical(fused, composed)
        fused[0].check()


def test_negative_control_other_seed_is_told_apart():
    rng = np.random.default_rng(7)
    family, x = _problem("niw2", rng)
    labels = rng.integers(2, size=x.shape[0])
    prior = PRIORS["dp"]
    fused = _run(_fused, family, x, labels, prior, 3, True, 11)
    other = _run(_composed, family, x, labels, prior, 3, True, 12)
    with pytest.raises(AssertionError):
        _assert_identical(fused, other)


def test_state_labels_equal_the_canonical_labels_reference():
    rng = np.random.default_rng(3)
    family, x = _problem("bernoulli", rng)
    for _ in range(20):
        labels = rng.integers(0, rng.integers(1, 12), size=x.shape[0]) * 7
        state = PartitionState(family, family.prepare_data(x), labels)
        np.testing.assert_array_equal(state.labels(), canonical_labels(labels))
        # arbitrary slot numbers in arbitrary order (a state after many moves)
        state.slot_labels[:] = rng.permutation(state.slot_labels) * 3 % state.sizes.shape[0]
        got = state.labels()
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, canonical_labels(state.slot_labels))
