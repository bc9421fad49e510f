"""The split-merge burn-in start (:func:`pymc_splitmerge.splitmerge_start`).

* it returns canonical labels of the variable's dtype and shape, inside the prior's support,
  for every registered component family and every partition prior;
* the same seed gives the same labels; a different seed a different subsample;
* well-separated blobs end up in their own clusters (subsample smaller than n, so the greedy
  allocation places most points);
* ``pm.sample(initvals=...)`` starts from it;
* the greedy allocation kernel agrees with a plain reference, point by point;
* stage 1 (cluster-anchor SAMS, compiled) agrees with its composed Python twin update by
  update, leaves the exact posterior invariant (enumeration, one step and long chains), and
  the same test rejects it without the anchor-law term (negative control);
* the early rejection of merges never rejects what the full proposal would accept (every
  prior and registered family), and a bound without the prior's split weight is caught;
* bad input fails with a clear error.

Tiny data only: the speed is measured by ``benchmarks/scale.py --vi``.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest
from broken_kernels import on_state, sams_cluster_anchors_without_anchor_law_ratio
from conftest import PRIORS, PROBLEMS, chain_draws, one_step_draws

import pymc_splitmerge as psm
from pymc_splitmerge.components import registry
from pymc_splitmerge.kernels.allocation import allocate_greedily
from pymc_splitmerge.priors import (
    DirichletProcessPrior,
    FiniteDirichletPrior,
    MixtureOfFiniteMixturesPrior,
    PitmanYorPrior,
    ShiftedPoisson,
)
from pymc_splitmerge.testing import assert_partition_gof

NIW = psm.NormalInverseWishart(mu0=np.zeros(2), kappa0=0.1, nu0=4.0, psi0=np.eye(2))


def _blobs(n, seed=0, centres=((-10.0, 0.0), (10.0, 0.0), (0.0, 15.0))):
    rng = np.random.default_rng(seed)
    truth = np.arange(n) % len(centres)
    return np.asarray(centres)[truth] + rng.normal(size=(n, 2)), truth


def _partition(name, prior, n):
    if prior == "dp":
        return psm.DirichletProcess(name, alpha=1.0, n=n)
    if prior == "dp-many":  # many clusters a priori: merges often rejected
        return psm.DirichletProcess(name, alpha=20.0, n=n)
    if prior == "py":
        return psm.PitmanYor(name, alpha=1.0, discount=0.3, n=n)
    if prior == "finite":
        return psm.FiniteDirichlet(name, alpha=1.0, k=6, n=n)
    return psm.MixtureOfFiniteMixtures(name, gamma=1.0, k_prior=ShiftedPoisson(2.0), n=n)


def _model(y, prior="dp", family=NIW):
    with pm.Model() as model:
        z = _partition("z", prior, len(y))
        psm.ConjugateMixture("y", partition=z, component=family, observed=y)
    return model


def _check_valid(labels, model, name="z"):
    rv = model[name]
    assert labels.dtype == np.dtype(rv.dtype)
    assert labels.shape == (model.initial_point()[name].shape[0],)
    k = int(labels.max()) + 1
    assert labels.min() == 0
    # canonical: clusters numbered by first appearance, none empty
    _, first = np.unique(labels, return_index=True)
    np.testing.assert_array_equal(labels[np.sort(first)], np.arange(k))
    # inside the support: the model's log density at the start is finite
    point = {**model.initial_point(), name: labels}
    assert np.isfinite(model.compile_logp()(point))


# ------------------------------------------------------------------ valid labels
def _family_cases():
    cases = []
    for entry in registry.FAMILIES:
        rng = np.random.default_rng(7 + entry.family_id)
        label, family, raw = entry.family_class.examples(rng)[0]
        cases.append(pytest.param(family, raw, id=label))
    return cases


@pytest.mark.parametrize("family, raw", _family_cases())
def test_valid_labels_for_every_registered_family(family, raw):
    model = _model(raw, "dp", family)
    start = psm.splitmerge_start(model, subsample_size=5, split_merge_moves=20,
                                 gibbs_draws=2, random_seed=3)
    assert set(start) == {"z"}
    _check_valid(start["z"], model)


@pytest.mark.parametrize("prior", ["dp", "py", "finite", "mfm"])
def test_valid_labels_for_every_prior(prior):
    y, _ = _blobs(60)
    model = _model(y, prior)
    labels = psm.splitmerge_start(model, subsample_size=20, split_merge_moves=200,
                                  gibbs_draws=3, random_seed=0)["z"]
    _check_valid(labels, model)
    if prior == "finite":
        assert labels.max() < 6  # FiniteDirichlet(k=6): labels in [0, k)


def test_random_hyperparameters_read_from_the_point():
    y, _ = _blobs(40)
    with pm.Model() as model:
        alpha = pm.Gamma("alpha", 2.0, 2.0)
        z = psm.DirichletProcess("z", alpha=alpha, n=len(y))
        psm.ConjugateMixture("y", partition=z, component=NIW, observed=y)
    labels = psm.splitmerge_start(z, model=model, subsample_size=10, random_seed=0)["z"]
    _check_valid(labels, model)


# ------------------------------------------------------------------ seeds, chains, answer
def test_reproducible_with_random_seed():
    y, _ = _blobs(90)
    model = _model(y)
    options = {"subsample_size": 30, "split_merge_moves": 100, "gibbs_draws": 2}
    first = psm.splitmerge_start(model, random_seed=11, **options)["z"]
    again = psm.splitmerge_start(model, random_seed=11, **options)["z"]
    np.testing.assert_array_equal(first, again)
    generator = psm.splitmerge_start(model, random_seed=np.random.default_rng(5), **options)
    generator_again = psm.splitmerge_start(model, random_seed=np.random.default_rng(5),
                                           **options)
    np.testing.assert_array_equal(generator["z"], generator_again["z"])
    # negative control: the subsample and the allocation order depend on the seed (on data
    # without clear clusters: on the three blobs every seed may end on the same partition)
    vague = _model(np.random.default_rng(2).normal(size=(90, 2)))
    chains = psm.splitmerge_start(vague, random_seed=11, chains=3, **options)
    assert len(chains) == 3 and all(set(start) == {"z"} for start in chains)
    assert any(not np.array_equal(start["z"], chains[0]["z"]) for start in chains[1:]) or \
        not np.array_equal(psm.splitmerge_start(vague, random_seed=12, **options)["z"],
                           chains[0]["z"])


@pytest.mark.parametrize("prior", ["dp", "py", "finite", "mfm"])
def test_groups_well_separated_blobs(prior):
    y, truth = _blobs(300, seed=1)
    model = _model(y, prior)
    # a short burn-in on 60 points is a random search: one seed in ~6-12 ends with two
    # blobs merged or a few points misplaced, with the compiled stage 1 as with the Python
    # move it replaced (same law, another stream), so several seeds, most exact
    scores = [psm.adjusted_rand_index(psm.splitmerge_start(
        model, subsample_size=60, split_merge_moves=1000, gibbs_draws=10,
        random_seed=seed)["z"], truth) for seed in range(5)]
    assert sum(score == 1.0 for score in scores) >= 4 and min(scores) > 0.8, scores


def test_several_partition_variables_and_selection_by_name():
    y, truth = _blobs(60)
    with pm.Model() as model:
        first = psm.DirichletProcess("first", alpha=1.0, n=len(y))
        psm.ConjugateMixture("y1", partition=first, component=NIW, observed=y)
        second = psm.PitmanYor("second", alpha=1.0, discount=0.2, n=len(y))
        psm.ConjugateMixture("y2", partition=second, component=NIW, observed=y)
    both = psm.splitmerge_start(model, subsample_size=20, random_seed=0)
    assert set(both) == {"first", "second"}
    only = psm.splitmerge_start("second", model=model, subsample_size=20, random_seed=0)
    assert set(only) == {"second"}
    with model:
        assert set(psm.splitmerge_start([first], subsample_size=20)) == {"first"}
    assert psm.adjusted_rand_index(both["first"], truth) == 1.0


@pytest.mark.filterwarnings("ignore:`return_inferencedata=False` is deprecated:FutureWarning")
def test_pm_sample_starts_from_it():
    y, truth = _blobs(45)
    model = _model(y)
    start = psm.splitmerge_start(model, subsample_size=15, random_seed=4)
    with model:
        trace = pm.sample(draws=3, tune=0, chains=1, cores=1, initvals=start,
                          step=psm.SAMSStep(model["z"], n_gibbs_sweeps=1), random_seed=1,
                          progressbar=False, compute_convergence_checks=False,
                          return_inferencedata=False)
    draws = np.asarray(trace.get_values("z"))
    assert draws.shape == (3, len(y)) and draws.dtype == start["z"].dtype
    assert psm.adjusted_rand_index(draws[0], truth) == 1.0


@pytest.mark.filterwarnings("ignore:`return_inferencedata=False` is deprecated:FutureWarning")
def test_pm_sample_multichain_initvals():
    y, _ = _blobs(30)
    model = _model(y)
    starts = psm.splitmerge_start(model, subsample_size=10, chains=2, random_seed=0)
    with model:
        trace = pm.sample(draws=2, tune=0, chains=2, cores=1, initvals=starts,
                          step=psm.SAMSStep(model["z"]), random_seed=1, progressbar=False,
                          compute_convergence_checks=False, return_inferencedata=False)
    assert np.asarray(trace.get_values("z", combine=False)[1]).shape == (2, len(y))


# ------------------------------------------------------------------ the allocation kernel
def _allocate_reference(family, x, labels, order, prior):
    """Plain Python: every weight from the family's and the prior's own methods."""
    labels = np.array(labels, dtype=np.int64)
    n = x.shape[0]
    for i in order:
        clusters = [c for c in np.unique(labels) if c >= 0]
        k = len(clusters)
        weights = []
        for c in clusters:
            members = x[labels == c]
            size = members.shape[0]
            log_w = prior.log_w(np.array([size, size + 1]))
            weights.append(log_w[1] - log_w[0]
                           + family.log_predictive(x[i], family.stats_of(members)))
        log_v = prior.log_v(n, np.array([k, k + 1]))
        open_weight = (log_v[1] - log_v[0] + prior.log_w(np.array([1]))[0]
                       + family.log_predictive(x[i], family.empty_stats))
        weights.append(open_weight if np.isfinite(log_v[1]) else -np.inf)
        best = int(np.argmax(weights))
        labels[i] = clusters[best] if best < k else labels.max() + 1
    return psm.analysis.canonicalize(labels)


@pytest.mark.parametrize("prior", [DirichletProcessPrior(0.5), PitmanYorPrior(1.0, 0.4),
                                   FiniteDirichletPrior(1.0, 3),
                                   MixtureOfFiniteMixturesPrior(1.0, ShiftedPoisson(1.0))],
                         ids=["dp", "py", "finite", "mfm"])
def test_allocation_matches_plain_reference(prior):
    rng = np.random.default_rng(9)
    x = NIW.prepare_data(rng.normal(scale=4.0, size=(40, 2)))
    labels = np.full(40, -1)
    labels[:8] = [3, 3, 7, 3, 7, 1, 1, 1]
    order = rng.permutation(np.arange(8, 40))
    log_v, log_w = prior.tables(40)
    fast = allocate_greedily(NIW, x, labels, order, log_v, log_w)
    np.testing.assert_array_equal(fast, _allocate_reference(NIW, x, labels, order, prior))
    # negative control: another order gives another partition here, and the test sees it
    other = allocate_greedily(NIW, x, labels, order[::-1], log_v, log_w)
    assert not np.array_equal(other, _allocate_reference(NIW, x, labels, order, prior))


def test_allocation_rejects_a_bad_order():
    x = NIW.prepare_data(np.zeros((4, 2)))
    log_v, log_w = DirichletProcessPrior(1.0).tables(4)
    with pytest.raises(ValueError, match="every unassigned point"):
        allocate_greedily(NIW, x, [0, -1, -1, 0], [1], log_v, log_w)


# ------------------------------------------------------------------ errors
def test_clear_errors():
    y, _ = _blobs(20)
    model = _model(y)
    with pytest.raises(ValueError, match="subsample_size"):
        psm.splitmerge_start(model, subsample_size=0)
    with pytest.raises(ValueError, match="split_merge_moves"):
        psm.splitmerge_start(model, split_merge_moves=-1)
    with pytest.raises(ValueError, match="chains"):
        psm.splitmerge_start(model, chains=0)
    with pytest.raises(TypeError, match="random_seed"):
        psm.splitmerge_start(model, random_seed="seven")
    with pytest.raises(ValueError, match="no variable named"):
        psm.splitmerge_start("w", model=model)
    with pm.Model() as plain:
        mu = pm.Normal("mu")
        pm.Normal("obs", mu=mu, observed=y[:, 0])
    with pytest.raises(ValueError, match="no partition variable"):
        psm.splitmerge_start(plain)
    with pytest.raises(TypeError, match="not a partition variable"):
        psm.splitmerge_start(mu, model=plain)
    with pytest.raises(TypeError, match="needs the model"):
        psm.splitmerge_start()
    # a stage-1 start outside the support: 7 clusters under FiniteDirichlet(k=6)
    finite = _model(y, "finite")
    outside = {**finite.initial_point(), "z": np.arange(20) % 7}
    with pytest.raises(ValueError, match="outside the support"):
        psm.splitmerge_start(finite, point=outside, subsample_size=20)


# ------------------------------------------------------------------ compiled stage 1
def _stage_one_setup(prior, n=60, seed=3, family=NIW, raw=None):
    from pymc_splitmerge.kernels.state import PriorTables

    y = _blobs(n, seed=seed)[0] if raw is None else raw
    model = _model(y, prior, family)
    point = model.initial_point()
    partition_model = psm.distributions.discover(model["z"], model)
    numeric_prior = partition_model.numeric_prior(point)
    numeric_family = partition_model.numeric_family(point)
    tables = PriorTables(*numeric_prior.tables(len(y)))
    return numeric_family, partition_model.data, numeric_prior, tables


@pytest.mark.parametrize("prior", ["dp", "py", "finite", "mfm"])
def test_compiled_stage_one_matches_the_composed_reference(prior):
    """The compiled cluster-anchor loop is its Python twin (same uniforms, same decisions,
    merges settled early included)."""
    from kernel_references import composed_cluster_sams_updates

    from pymc_splitmerge.kernels.sams import _sams_updates
    from pymc_splitmerge.kernels.state import PartitionState

    family, x, numeric_prior, tables = _stage_one_setup(prior)
    start = np.zeros(x.shape[0], dtype=np.int64)
    compiled = PartitionState(family, x, start)
    accepted = _sams_updates(compiled.model, compiled.partition, tables, 300, 11)[0]
    plain = PartitionState(family, x, start)
    accepted_plain = composed_cluster_sams_updates(plain.model, plain.partition, tables, 300, 11)
    assert accepted == accepted_plain > 3
    np.testing.assert_array_equal(compiled.slot_labels, plain.slot_labels)
    np.testing.assert_allclose(compiled.log_joint(numeric_prior), plain.log_joint(numeric_prior))
    compiled.check()


def test_member_index_gives_the_scanned_members():
    """The cluster-anchor updates find anchors and the clusters' points from a member index
    (``kernels.sams._index_members``, ``_indexed_members``); it must give exactly what the
    plain scan of all labels (``splitmerge_common.anchor_clusters_members``) gives, on a
    partition with free slots in between, for anchors in one cluster and in two."""
    from pymc_splitmerge.kernels.sams import _index_members, _indexed_members
    from pymc_splitmerge.kernels.splitmerge_common import anchor_clusters_members

    rng = np.random.default_rng(3)
    labels = rng.choice([0, 2, 3, 7, 8], size=60, p=[0.4, 0.3, 0.2, 0.05, 0.05])
    sizes = np.bincount(labels, minlength=10).astype(np.int64)  # slots 1, 4-6, 9 free
    order, start, cursor = (np.empty(60, dtype=np.int64), np.empty(10, dtype=np.int64),
                            np.empty(10, dtype=np.int64))
    _index_members(labels, sizes, order, start, cursor)
    for slot in range(10):
        np.testing.assert_array_equal(order[start[slot]:start[slot] + sizes[slot]],
                                      np.flatnonzero(labels == slot))
    checked = set()
    for _ in range(300):
        i, j = rng.choice(60, size=2, replace=False)
        members, sides = _indexed_members(labels, sizes, order, start, i, j)
        expected_members, expected_sides = anchor_clusters_members(labels, i, j)
        np.testing.assert_array_equal(members, expected_members)
        np.testing.assert_array_equal(sides, expected_sides)
        checked.add(bool(labels[i] == labels[j]))
    assert checked == {True, False}
    # the index is what a broken one is not (negative control): a stale order fails
    stale = order.copy()
    stale[[0, -1]] = stale[[-1, 0]]
    i, j = np.flatnonzero(labels == 0)[1:3]  # slot 0's run now starts with a slot-8 point
    assert not np.array_equal(_indexed_members(labels, sizes, stale, start, i, j)[0],
                              anchor_clusters_members(labels, i, j)[0])


def _cluster_sams(state, log_v_table, log_w_table, rng):
    from pymc_splitmerge.kernels.rng import numba_seed_from
    from pymc_splitmerge.kernels.sams import _sams_updates
    from pymc_splitmerge.kernels.state import PriorTables

    _sams_updates(state.model, state.partition, PriorTables(log_v_table, log_w_table), 1,
                  numba_seed_from(rng))


@pytest.mark.parametrize("problem", sorted(PROBLEMS))
@pytest.mark.parametrize("name", sorted(PRIORS))
def test_stage_one_one_step_invariance(name, problem):
    """Cluster-anchor SAMS (stage 1) leaves the exact posterior invariant."""
    rng = np.random.default_rng([31, len(name), len(problem)])
    family, x = PROBLEMS[problem]()
    samples, exact = one_step_draws(_cluster_sams, PRIORS[name], family, x, 3000, rng)
    assert_partition_gof(samples, exact)


@pytest.mark.parametrize(("name", "problem"), [("dp", "niw"), ("py", "bernoulli"),
                                               ("mfm", "niw")])
def test_stage_one_long_chain_matches_exact_posterior(name, problem):
    rng = np.random.default_rng([32, len(name), len(problem)])
    family, x = PROBLEMS[problem]()
    samples, exact = chain_draws(_cluster_sams, PRIORS[name], family, x, 3000, rng)
    assert_partition_gof(samples, exact)


def test_stage_one_without_the_anchor_law_term_is_rejected():
    """Negative control: the same chain without the anchor-law ratio is not invariant."""
    rng = np.random.default_rng([33, 1])
    family, x = PROBLEMS["niw"]()
    samples, exact = chain_draws(on_state(sams_cluster_anchors_without_anchor_law_ratio()),
                                 PRIORS["dp"], family, x, 1000, rng)  # plain Python: 1,000 draws reject
    with pytest.raises(AssertionError):
        assert_partition_gof(samples, exact)


def _wrong_early_rejections(surely_rejected, prior, family=NIW, raw=None, trials=1500):
    """Over random partitions, anchor pairs in different clusters, orders and uniforms:
    (times ``surely_rejected`` said the merge is rejected, times the full SAMS proposal then
    accepted it with the same uniform)."""
    from pymc_splitmerge.kernels.sams import sams_proposal_core
    from pymc_splitmerge.kernels.splitmerge_common import metropolis_accepts
    from pymc_splitmerge.kernels.state import PartitionState

    numeric_family, x, numeric_prior, tables = _stage_one_setup(prior, n=12, seed=5,
                                                                family=family, raw=raw)
    n = x.shape[0]
    rng = np.random.default_rng(0)
    said, wrong = 0, 0
    for _ in range(trials):
        labels = rng.integers(0, rng.integers(2, 5), size=n)
        anchor_i, anchor_j = rng.choice(n, size=2, replace=False)
        if labels[anchor_i] == labels[anchor_j]:
            continue
        state = PartitionState(numeric_family, x, labels)
        if not np.isfinite(state.log_joint(numeric_prior)):
            continue
        # uniforms near 1 as well as spread out, to probe the bound's edge; an anchor-law
        # log ratio added to the acceptance ratio half of the time
        uniform = rng.random() ** rng.choice([1.0, 0.05, 0.001])
        log_offset = rng.uniform(-3.0, 3.0) if rng.random() < 0.5 else 0.0
        if not surely_rejected(state.model, state.partition, tables, anchor_i, anchor_j,
                               log_offset, uniform):
            continue
        said += 1
        _, log_ratio, _, _ = sams_proposal_core(state.model, state.partition, tables,
                                                anchor_i, anchor_j, rng.random(2 * n))
        wrong += bool(metropolis_accepts.py_func(log_ratio + log_offset, uniform))
    return said, wrong


@pytest.mark.parametrize("prior", ["dp", "py", "finite", "mfm"])
def test_early_merge_rejection_never_rejects_what_the_full_proposal_accepts(prior):
    from pymc_splitmerge.kernels.sams import merge_surely_rejected

    said, wrong = _wrong_early_rejections(merge_surely_rejected, prior)
    assert said > 50
    assert wrong == 0


@pytest.mark.parametrize("family, raw", _family_cases())
def test_early_merge_rejection_for_every_registered_family(family, raw):
    from pymc_splitmerge.kernels.sams import merge_surely_rejected

    if type(family).__name__ == "GammaPoisson":
        # its example rows share one rate per column, so every merge wins: add rows with the
        # columns' rates reversed, so that some merges lose
        raw = np.vstack([raw, raw[:, ::-1]])
    said, wrong = _wrong_early_rejections(merge_surely_rejected, "dp-many", family, raw,
                                          trials=600)
    assert said > 50
    assert wrong == 0


def test_early_merge_rejection_negative_control():
    """A bound that leaves out the prior's split weight (a plausible slip) is caught."""
    from pymc_splitmerge.components import dispatch

    def without_prior(model, partition, tables, anchor_i, anchor_j, log_offset, uniform):
        family_id, params, x = model
        labels, stats = partition.labels, partition.stats
        slot_i, slot_j = labels[anchor_i], labels[anchor_j]
        merged = partition.empty_row.copy()
        for k in np.flatnonzero((labels == slot_i) | (labels == slot_j)):
            dispatch.add_point(family_id, params, merged, x[k])
        bound = (dispatch.log_marginal(family_id, params, merged)
                 - dispatch.log_marginal(family_id, params, stats[slot_i])
                 - dispatch.log_marginal(family_id, params, stats[slot_j]) + log_offset)
        return bool(np.log(uniform) > bound)

    said, wrong = _wrong_early_rejections(without_prior, "dp")
    assert said > 100
    assert wrong > 0
