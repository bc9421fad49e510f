"""Several SAMS updates per draw, as the default partition step makes them.

``build_sams_move(cluster_anchors=True, n_updates=m)`` runs ``m`` cluster-anchor updates in
one compiled call: it is ``_sams_updates`` (the stage-1 update of ``splitmerge_start``,
tested against its plain-Python twin in tests/test_start.py) from the call's seed; one-step
invariance by enumeration for every prior and problem, and the negative control (the same
batch without the anchor law's ratio) rejected by the same χ² test.  ``SAMSStep(z,
n_split_merge_updates=m)`` composes the updates then the sweeps; ``DefaultPartitionStep`` is
checked to be what ``pm.sample()`` assigns and exact through plain ``pm.sample()`` in
tests/test_defaults.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from broken_kernels import on_state, sams_cluster_anchors_without_anchor_law_ratio
from conftest import PRIORS, PROBLEMS, niw_problem
from kernel_checks import exactness_tests

from pymc_splitmerge.kernels.rng import numba_seed_from
from pymc_splitmerge.kernels.sams import _sams_updates, build_sams_move
from pymc_splitmerge.kernels.splitmerge_common import MOVE_MERGE, MOVE_SPLIT
from pymc_splitmerge.kernels.state import PartitionState, PriorTables

SEED = 20261127
N_UPDATES = 4
_BATCH = build_sams_move(cluster_anchors=True, n_updates=N_UPDATES)
_BROKEN_UPDATE = sams_cluster_anchors_without_anchor_law_ratio()


def _batch_without_anchor_ratio(model, partition, tables, rng):
    """The negative control: ``N_UPDATES`` cluster-anchor updates without the anchor law's
    ratio (``broken_kernels``), one after the other."""
    for _ in range(N_UPDATES):
        info = _BROKEN_UPDATE(model, partition, tables, rng)
    return info


(test_batched_cluster_anchor_updates_one_step_invariance,
 test_negative_control_batch_without_the_anchor_law_ratio_is_rejected) = exactness_tests(
    on_state(_BATCH), on_state(_batch_without_anchor_ratio), PRIORS, PROBLEMS, SEED)


def test_batched_cluster_anchor_updates_are_the_stage_one_updates():
    """m updates in one call = ``_sams_updates(m)`` from the seed the call draws."""
    family, x = niw_problem(6)
    tables = PriorTables(*PRIORS["py"].tables(x.shape[0]))
    built = PartitionState(family, x, np.zeros(x.shape[0], dtype=np.int64))
    looped = PartitionState(family, x, np.zeros(x.shape[0], dtype=np.int64))
    rng_built, rng_looped = np.random.default_rng(SEED), np.random.default_rng(SEED)
    moves, changed = set(), 0
    for _ in range(100):
        before = looped.labels()
        info = _BATCH(built.model, built.partition, tables, rng_built)
        _sams_updates(looped.model, looped.partition, tables, N_UPDATES,
                      numba_seed_from(rng_looped))
        np.testing.assert_array_equal(built.labels(), looped.labels())
        moves.add(info.move)
        changed += not np.array_equal(before, looped.labels())
    built.check()
    assert {MOVE_SPLIT, MOVE_MERGE} <= moves
    assert 0 < changed < 100


def test_bad_update_counts_raise():
    with pytest.raises(ValueError, match="n_updates"):
        build_sams_move(cluster_anchors=True, n_updates=0)
    with pytest.raises(TypeError, match="n_updates"):
        build_sams_move(cluster_anchors=True, n_updates=2.5)
    with pytest.raises(ValueError, match="needs cluster_anchors"):
        build_sams_move(n_updates=3)


def _bernoulli_model():
    import pymc as pm

    import pymc_splitmerge as psm

    data = np.array([[1, 1, 0], [1, 1, 1], [0, 0, 1], [0, 0, 0], [1, 0, 1], [0, 1, 0]])
    with pm.Model() as model:
        z = psm.DirichletProcess("z", alpha=1.0, n=len(data))
        psm.ConjugateMixture("y", partition=z, component=psm.BetaBernoulli(), observed=data)
    return model


@pytest.mark.parametrize("anchor_proposal", ["uniform", "cluster"])
def test_sams_step_makes_n_split_merge_updates_per_draw(anchor_proposal):
    """The step's transition: the updates (one batch with cluster anchors), then the sweeps;
    the stats report the last update."""
    import pymc_splitmerge as psm

    model = _bernoulli_model()
    with model:
        step = psm.SAMSStep(model["z"], anchor_proposal=anchor_proposal, n_gibbs_sweeps=2,
                            n_split_merge_updates=3)
        for bad, error in ((0, ValueError), (1.5, TypeError)):
            with pytest.raises(error, match="n_split_merge_updates"):
                psm.SAMSStep(model["z"], n_split_merge_updates=bad)
    transition = step.transition
    assert transition.sweep is not None
    if anchor_proposal == "cluster":
        assert (transition.n_moves, transition.move.n_updates) == (1, 3)
    else:
        assert transition.n_moves == 3
    point = model.initial_point()
    for _ in range(20):
        point, (stats,) = step.step(point)
        assert stats["sams_move"] in (0, MOVE_SPLIT, MOVE_MERGE)
        assert stats["sams_n_clusters"] == len(np.unique(point["z"]))


def test_default_partition_step_is_fifty_cluster_anchor_updates_and_a_sweep():
    """What plain ``pm.sample()`` runs (chosen by ``benchmarks/default_step.py``); options
    still pass through (``pm.sample(sams={...})``)."""
    import pymc_splitmerge as psm

    model = _bernoulli_model()
    with model:
        default = psm.steps.DefaultPartitionStep(model["z"])
        custom = psm.steps.DefaultPartitionStep(model["z"], anchor_proposal="uniform",
                                                n_split_merge_updates=2, n_gibbs_sweeps=0)
    assert default.cluster_anchors and default.anchor_proposal is None
    assert (default.transition.n_moves, default.transition.move.n_updates) == (1, 50)
    assert default.n_gibbs_sweeps == 1 and default.transition.sweep is not None
    assert not custom.cluster_anchors and custom.transition.n_moves == 2
    assert custom.transition.sweep is None


def test_default_partition_step_alternates_in_rounds_when_the_family_is_random(monkeypatch):
    """A component family with a free random hyperparameter gets
    ``random_family_split_merge_updates`` updates per draw and ``random_family_rounds`` rounds
    (when pm.sample alternates it with a hyperparameter step) on small data (a constant or
    ``pm.Data`` one keeps 50, so do more than ``random_family_max_points`` points); an
    explicit ``n_split_merge_updates`` wins."""
    import pymc as pm

    import pymc_splitmerge as psm
    from pymc_splitmerge.steps import DefaultPartitionStep

    data = np.array([[1, 1, 0], [1, 1, 1], [0, 0, 1], [0, 0, 0], [1, 0, 1], [0, 1, 0]])
    with pm.Model() as model:
        a = pm.Gamma("a", 2.0, 2.0)
        fixed_b = pm.Data("b", 1.5)
        z = psm.DirichletProcess("z", alpha=1.0, n=len(data))
        psm.ConjugateMixture("y", partition=z, component=psm.BetaBernoulli(a=a, b=fixed_b),
                             observed=data)
        random = DefaultPartitionStep(z)
        explicit = DefaultPartitionStep(z, n_split_merge_updates=7)
    with pm.Model():
        b = pm.Data("b", 1.5)
        z = psm.DirichletProcess("z", alpha=1.0, n=len(data))
        psm.ConjugateMixture("y", partition=z, component=psm.BetaBernoulli(a=1.0, b=b),
                             observed=data)
        constant = DefaultPartitionStep(z)
    updates = DefaultPartitionStep.random_family_split_merge_updates
    rounds = DefaultPartitionStep.random_family_rounds
    per_round = DefaultPartitionStep.random_family_round_split_merge_updates
    assert updates > 50 and per_round * rounds > 50 and rounds > 1  # (per round: alternated)
    assert len(data) <= DefaultPartitionStep.random_family_max_points
    assert random.transition.move.n_updates == random.n_split_merge_updates == updates
    assert random.n_rounds == rounds
    assert explicit.transition.move.n_updates == 7 and explicit.n_rounds == 1
    assert constant.transition.move.n_updates == 50 and constant.n_rounds == 1
    monkeypatch.setattr(DefaultPartitionStep, "random_family_max_points", len(data) - 1)
    with model:
        large = DefaultPartitionStep(model["z"])
    assert large.transition.move.n_updates == 50 and large.n_rounds == 1
