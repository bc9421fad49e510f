"""Refined cluster-anchor SAMS (``kernels.sams_refined``, ``SAMSStep(z, anchor_proposal="cluster",
n_restricted_scans=...)``): exact invariance by enumeration, a negative control, the
restricted Gibbs scan against a plain reference, and a ``pm.sample`` χ² check."""

from __future__ import annotations

import math

import numpy as np
import pytest
from broken_kernels import on_state, sams_refined_launched_from_current_split
from conftest import PRIORS, PROBLEMS, niw_problem, thinned_labels
from kernel_checks import exactness_tests

from pymc_splitmerge.components import dispatch
from pymc_splitmerge.kernels.sams_refined import build_refined_sams_move, restricted_gibbs_scan
from pymc_splitmerge.kernels.splitmerge_common import MOVE_MERGE, MOVE_SPLIT
from pymc_splitmerge.kernels.state import PartitionState, PriorTables
from pymc_splitmerge.priors.pitman_yor import PitmanYorPrior
from pymc_splitmerge.testing import assert_partition_gof, exact_posterior

SEED = 20261128

(test_refined_move_one_step_invariance,
 test_negative_control_refined_launched_from_current_split_is_rejected) = exactness_tests(
    on_state(build_refined_sams_move()), on_state(sams_refined_launched_from_current_split()),
    PRIORS, PROBLEMS, [SEED, 1])

(test_refined_move_two_scans_one_step_invariance,
 test_negative_control_refined_two_scans_launched_from_current_split_is_rejected) = \
    exactness_tests(on_state(build_refined_sams_move(n_updates=3, n_scans=2)),
                    on_state(sams_refined_launched_from_current_split(2)),
                    {"py": PRIORS["py"]}, {"niw": PROBLEMS["niw"]}, [SEED, 2],
                    control=("py", "niw"))


def _reference_scan(family, x, order, sides, forced, target, uniforms, anchors, log_w):
    """Plain restricted Gibbs scan: rebuild each side's statistics from its points."""
    sides = sides.copy()
    log_q = 0.0
    for t, k in enumerate(order):
        rest = [anchors[s] for s in (0, 1)]
        weights = []
        for side in (0, 1):
            points = [rest[side]] + [order[u] for u in range(len(order))
                                     if u != t and sides[u] == side]
            row = family.empty_stats()
            for point in points:
                dispatch.add_point(family.family_id, family.params, row, x[point])
            weights.append(log_w[len(points) + 1] - log_w[len(points)]
                           + dispatch.log_predictive(family.family_id, family.params, row, x[k]))
        total = np.logaddexp(*weights)
        probability_a = math.exp(weights[0] - total)
        side = target[t] if forced else (0 if uniforms[t] < probability_a else 1)
        sides[t] = side
        log_q += weights[side] - total
    return log_q, sides


@pytest.mark.parametrize("forced", [False, True])
def test_restricted_gibbs_scan_matches_reference(forced):
    family, x = niw_problem(6)
    rng = np.random.default_rng([SEED, 3, forced])
    log_w = PRIORS["py"].tables(x.shape[0])[1]
    anchors = (0, 3)
    order = np.array([5, 1, 4, 2], dtype=np.int64)
    sides = np.array([1, 0, 0, 1], dtype=np.int64)
    target = np.array([0, 0, 1, 1], dtype=np.int64)
    uniforms = rng.random(4)
    stats_a, stats_b = family.empty_stats(), family.empty_stats()
    for point, side in zip([anchors[0], anchors[1], *order], [0, 1, *sides], strict=True):
        dispatch.add_point(family.family_id, family.params, (stats_a, stats_b)[side], x[point])
    sizes_ab = np.array([1 + (sides == 0).sum(), 1 + (sides == 1).sum()], dtype=np.int64)
    expected_log_q, expected_sides = _reference_scan(family, x, order, sides, forced, target,
                                                     uniforms, anchors, log_w)
    scanned = sides.copy()
    log_q = restricted_gibbs_scan(family.family_id, family.params, x, order, scanned, forced,
                                  target, uniforms, stats_a, stats_b, sizes_ab, log_w)
    np.testing.assert_allclose(log_q, expected_log_q, rtol=1e-10)
    np.testing.assert_array_equal(scanned, expected_sides)
    assert sizes_ab.tolist() == [1 + (scanned == 0).sum(), 1 + (scanned == 1).sum()]


def test_refined_move_makes_both_moves_and_keeps_the_state_consistent():
    family, x = niw_problem(6)
    state = PartitionState(family, x, np.zeros(x.shape[0], dtype=np.int64))
    tables = PriorTables(*PRIORS["dp"].tables(x.shape[0]))
    move = build_refined_sams_move(n_scans=2)
    rng = np.random.default_rng([SEED, 4])
    infos = [move(state.model, state.partition, tables, rng) for _ in range(300)]
    state.check()
    assert {MOVE_SPLIT, MOVE_MERGE} <= {info.move for info in infos}
    assert 0 < np.mean([info.accepted for info in infos]) < 1


def test_refined_move_bad_options_raise():
    with pytest.raises(ValueError, match="n_scans"):
        build_refined_sams_move(n_scans=0)
    with pytest.raises(ValueError, match="n_updates"):
        build_refined_sams_move(n_updates=0)


PM_NIW_DATA = np.array([[-1.5, -1.2], [-1.9, -1.4], [-1.1, -2.0], [1.4, 1.6], [1.8, 1.1]])


def test_sams_step_with_restricted_scans_matches_exact():
    import pymc as pm

    from pymc_splitmerge.components.normal_inverse_wishart import NormalInverseWishart
    from pymc_splitmerge.distributions import ConjugateMixture, PitmanYor
    from pymc_splitmerge.steps.sams import SAMSStep

    family = NormalInverseWishart(mu0=np.zeros(2), kappa0=0.5, nu0=4.0, psi0=np.eye(2))
    with pm.Model():
        z = PitmanYor("z", alpha=0.8, discount=0.3, n=len(PM_NIW_DATA))
        ConjugateMixture("y", partition=z, component=family, observed=PM_NIW_DATA)
        step = SAMSStep(z, anchor_proposal="cluster", n_restricted_scans=1)
        idata = pm.sample(draws=6000, step=step, random_seed=31, tune=200, chains=2, cores=1,
                          progressbar=False, compute_convergence_checks=False)
    exact = exact_posterior(PitmanYorPrior(alpha=0.8, discount=0.3), family, PM_NIW_DATA)
    assert_partition_gof(thinned_labels(idata, 10), exact)
    accepted = np.asarray(idata["sample_stats"]["sams_accepted"].values)
    assert 0 < accepted.mean() < 1


def test_sams_step_restricted_scans_need_cluster_anchors():
    import pymc as pm

    from pymc_splitmerge.components.normal_inverse_wishart import NormalInverseWishart
    from pymc_splitmerge.distributions import ConjugateMixture, DirichletProcess
    from pymc_splitmerge.steps.sams import SAMSStep

    family = NormalInverseWishart(mu0=np.zeros(2), kappa0=0.5, nu0=4.0, psi0=np.eye(2))
    with pm.Model():
        z = DirichletProcess("z", alpha=1.0, n=len(PM_NIW_DATA))
        ConjugateMixture("y", partition=z, component=family, observed=PM_NIW_DATA)
        with pytest.raises(ValueError, match="n_restricted_scans"):
            SAMSStep(z, n_restricted_scans=1)
        with pytest.raises(ValueError, match="n_restricted_scans"):
            SAMSStep(z, anchor_proposal="cluster", n_restricted_scans=-1)
