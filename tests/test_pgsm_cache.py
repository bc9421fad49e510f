"""PGSM's reuse of identical particles' computations changes no move (kernels/pgsm.py).

``csmc_sweep`` computes the option weights of a particle once per *distinct* particle state
(``twin`` roots: copies after resampling, or particles whose decisions coincided), batches
the predictives of all distinct particles' blocks into one dispatch call per generation, and
adds points to the NIW family through its leaf function.  With the reuse switched off
(``deduplicate=False``) every particle is computed on its own; the two must make the same
moves from the same seed: same chosen particle, same labels, same resampling events.  The
sweep-level comparison (same lineage, same weights) is
``tests/test_pgsm.py::test_twin_caching_changes_nothing``; here whole transitions are
chained on larger closures, for the NIW family (leaf ``add_point``) and a family that goes
through ``dispatch.add_point``, and with up to three anchors.
"""

from __future__ import annotations

import numba
import numpy as np
import pytest

from pymc_splitmerge.components import BetaBernoulli, NormalInverseWishart
from pymc_splitmerge.kernels.pgsm import _pgsm_transition_fields
from pymc_splitmerge.kernels.rng import numba_seed_from, seed_numba, seed_numba_from
from pymc_splitmerge.kernels.state import PartitionState
from pymc_splitmerge.priors import DirichletProcessPrior, PitmanYorPrior


def _state(family_name, rng, n=60):
    if family_name == "normal":
        family = NormalInverseWishart(mu0=np.zeros(2), kappa0=0.5, nu0=4.0,
                                      psi0=0.5 * np.eye(2))
        data = np.vstack([rng.normal(size=(n // 2, 2)), rng.normal(size=(n - n // 2, 2)) + 1.0])
    else:
        family = BetaBernoulli(a=1.0, b=1.0)
        data = (rng.random((n, 5)) < np.where(np.arange(n)[:, None] < n // 2, 0.2, 0.7))
        data = data.astype(float)
    x = family.prepare_data(data)
    return PartitionState(family, x, rng.integers(0, 3, size=n))


def _transitions(state, prior, seeds, n_anchors, threshold, deduplicate):
    log_v, log_w = prior.tables(state.model.x.shape[0])
    model, partition = state.model, state.partition
    history = []
    for seed in seeds:
        anchors = np.full(n_anchors, -1, dtype=np.int64)  # drawn inside the kernel
        result = _pgsm_transition_fields(
            numba_seed_from(np.random.default_rng(seed)), model.family_id, model.params, model.x, partition.labels, partition.sizes,
            partition.stats, partition.empty_row, partition.active, partition.where,
            partition.cluster_count, log_v, log_w, anchors, 12, threshold, True, True,
            deduplicate)
        history.append((anchors.copy(), state.labels(), result))
    return history


@pytest.mark.parametrize("family_name", ["normal", "bernoulli"])
@pytest.mark.parametrize("threshold", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("n_anchors", [2, 3])
def test_twin_caching_gives_the_same_moves(family_name, threshold, n_anchors):
    prior = PitmanYorPrior(alpha=0.7, discount=0.2) if n_anchors == 3 else (
        DirichletProcessPrior(alpha=1.0))
    histories = []
    for deduplicate in (True, False):
        state = _state(family_name, np.random.default_rng(4))
        histories.append(_transitions(state, prior, range(40), n_anchors, threshold,
                                      deduplicate))
    moved = 0
    for (anchors, labels, result), (anchors_off, labels_off, result_off) in zip(*histories):
        np.testing.assert_array_equal(anchors, anchors_off)
        np.testing.assert_array_equal(labels, labels_off)
        assert result == result_off  # move, |s̄|, resampling events, final ESS, generations
        moved += result[0] != 0
    assert moved > 0  # the chain is not stuck: the comparison covers changed partitions


def test_twin_caching_comparison_detects_a_different_stream():
    """Negative control: the comparison above is not vacuous (another seed, other moves)."""
    prior = DirichletProcessPrior(alpha=1.0)
    first = _transitions(_state("normal", np.random.default_rng(4)), prior, range(20), 2,
                         0.5, True)
    second = _transitions(_state("normal", np.random.default_rng(4)), prior,
                          range(100, 120), 2, 0.5, True)
    assert any(not np.array_equal(a[1], b[1]) for a, b in zip(first, second))


@numba.njit
def _numba_draws(count):
    return np.random.random(count)


def test_kernel_seed_reproduces_seed_numba_from():
    """The move seeds numba inside its kernel: same stream as ``seed_numba_from``."""
    for seed in (0, 1, 12345, 2**40 + 7):
        seed_numba_from(np.random.default_rng(seed))
        expected = _numba_draws(5)
        seed_numba(numba_seed_from(np.random.default_rng(seed)))
        np.testing.assert_array_equal(_numba_draws(5), expected)
    with pytest.raises(TypeError, match="Generator"):
        numba_seed_from(np.random.RandomState(0))
