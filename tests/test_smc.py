"""Exactness tests of the SMC engine over partitions (kernels/smc.py) against enumeration.

* the numba allocation model and resampling against plain references;
* the one-particle path identity  sum_paths q(path) Ẑ(path) = Z  (every allocation path, and
  every Gibbs rejuvenation choice, enumerated), for every prior x 2 families, with and without
  annealing and rejuvenation (specs/arm_and_smc.md §4 test 1);
* unbiasedness of Ẑ: mean of Ẑ/Z over 3 x 1000 runs with L in {2, 4, 16} (test 2), with
  negative controls (cumulative-weight product, first term dropped, weighting after the move)
  that the same test must reject;
* the weighted partition law: (Ẑ/Z) sum_p W^p 1{c^p = c} is unbiased for pi(c) (test 3),
  Hotelling's T^2 on the most probable cells (weighted particles are not draws, so the
  multinomial chi^2 does not apply; T^2 is its weighted analogue, chi^2-distributed), for
  every prior x 2 families x {standard, annealed, rejuvenated, both}, with a negative
  control.

All statistical tests reject at the suite-wide budget ``GOF_PVALUE_THRESHOLD``.
"""

from __future__ import annotations

import zlib

import broken_kernels
import numpy as np
import pytest
from conftest import PRIORS, bernoulli_problem, niw_problem
from scipy import stats

from pymc_splitmerge.core.logweights import log_sum_exp
from pymc_splitmerge.core.relabel import partition_index
from pymc_splitmerge.kernels import smc
from pymc_splitmerge.kernels.state import Model, Partition, assign_point, unassign_point
from pymc_splitmerge.testing import GOF_PVALUE_THRESHOLD, exact_posterior

FAMILIES = {"bernoulli": bernoulli_problem, "niw": niw_problem}
CONFIGS = {
    "standard": {},
    "annealed": {"anneal": {"start": 3.0, "rate": 0.3}},
    "rejuvenated": {"rejuvenation": 2},
    "annealed_rejuvenated": {"anneal": {"start": 0.4, "rate": 0.2}, "rejuvenation": 2},
}


def _problem(family_name, n):
    family, x = FAMILIES[family_name](n)
    return family, x


def _exact(prior, family, x):
    return exact_posterior(prior, family, x)


# --------------------------------------------------------------------------- references


def test_systematic_resampling_matches_reference():
    rng = np.random.default_rng(1)
    for size in (1, 2, 5, 17):
        weights = rng.dirichlet(np.full(size, 0.5))
        for uniform in (0.0, 0.3, 0.999):
            ancestors = np.empty(size, dtype=np.int64)
            smc.systematic_resample(weights, uniform, ancestors)
            np.testing.assert_array_equal(ancestors,
                                          smc.reference_systematic_resample(weights, uniform))


def test_log_sum_exp_and_reweight_evidence_increment():
    log_weights = np.log(np.array([0.2, 0.3, 0.5]))
    increments = np.array([0.1, -1.0, np.nan])
    expected = np.log(np.sum(np.array([0.2, 0.3, 0.0]) * np.exp([0.1, -1.0, 0.0])))
    work = log_weights.copy()
    weights = np.empty(3)
    ancestors = np.empty(3, dtype=np.int64)
    increment, _, did = smc.reweight_and_resample(work, increments, 0.0, 0, weights, ancestors)
    assert increment == pytest.approx(expected)
    assert not did and np.array_equal(ancestors, np.arange(3))
    assert _lse(np.array([np.nan, 0.0, 0.0])) == pytest.approx(np.log(2))


def _lse(values):
    """``log Σ exp`` of a whole array (``core.logweights.log_sum_exp``)."""
    values = np.ascontiguousarray(values, dtype=np.float64)
    return log_sum_exp(values, values.shape[0])


class _Particle:
    """A partial partition state for the path enumeration (arrays of kernels/state.py)."""

    def __init__(self, family, x):
        n = x.shape[0]
        self.family_id = int(family.family_id)
        self.params = np.ascontiguousarray(family.params, dtype=np.float64)
        self.empty_row = np.ascontiguousarray(family.empty_stats, dtype=np.float64)
        self.x = x
        self.labels = np.zeros(n, dtype=np.int64)
        self.sizes = np.zeros(n + 2, dtype=np.int64)
        self.stats = np.tile(self.empty_row, (n + 2, 1))
        self.active = np.zeros(n + 2, dtype=np.int64)
        self.where = np.full(n + 2, -1, dtype=np.int64)
        self.meta = np.zeros(1, dtype=np.int64)

    @property
    def partition(self):
        return Partition(self.labels, self.sizes, self.stats, self.empty_row, self.active,
                         self.where, self.meta)

    def copy(self):
        other = object.__new__(_Particle)
        other.__dict__.update({key: (value.copy() if isinstance(value, np.ndarray)
                                     and key != "x" else value)
                               for key, value in self.__dict__.items()})
        return other

    def assign(self, i, choice, k):
        slot = int(np.flatnonzero(self.where < 0)[0]) if choice == k else self.active[choice]
        assign_point(self.family_id, self.params, self.x, i, slot, self.labels, self.sizes,
                     self.stats, self.active, self.where, self.meta)

    def unassign(self, i):
        return unassign_point(self.family_id, self.params, self.x, i, self.labels, self.sizes,
                              self.stats, self.empty_row, self.active, self.where, self.meta)

    def allocation(self, i, lpp, lv_now, lw_now, lv_prev, lw_prev):
        k = self.meta[0]
        seating = smc.SeatingStep(lv_now, lv_prev, lw_now, lw_prev, 0, True)
        out = np.full((1, self.sizes.shape[0] + 1), np.nan)
        extra = smc.allocation_log_weights(
            Model(self.family_id, self.params, self.x), seating, self.stats[None],
            self.sizes[None], self.active[None], self.meta.copy(), self.x[i], lpp, True,
            out)
        assert extra == 1 and not np.isnan(out[0, : k + 1]).any()
        return k, out[0, : k + 1].copy()

    def sizes_list(self):
        return self.sizes[self.active[: self.meta[0]]].copy()


def test_copy_particle_keeps_the_state_invariants():
    family, x = _problem("niw", 5)
    rng = np.random.default_rng(4)
    for _ in range(20):
        source, target = _Particle(family, x), _Particle(family, x)
        for particle in (source, target):
            for i in range(x.shape[0]):
                k = particle.meta[0]
                particle.assign(i, int(rng.integers(k + 1)), k)
        smc.copy_particle(np.arange(x.shape[0]), source.partition, target.partition)
        np.testing.assert_array_equal(target.labels, source.labels)
        np.testing.assert_array_equal(target.sizes, source.sizes)
        np.testing.assert_array_equal(target.where >= 0, source.where >= 0)
        np.testing.assert_allclose(target.stats, source.stats)
        k = target.meta[0]
        assert k == source.meta[0]
        assert np.array_equal(target.where[target.active[:k]], np.arange(k))
        assert set(target.active[:k]) == set(source.active[:k])


def _reference_allocation(prior_now, prior_prev, family, x, placed_labels, i):
    """log EPPF_t(Π ⊕ c) - log EPPF_{t-1}(Π) + log f(y_i | y_c) from full EPPFs and marginals."""
    placed = np.flatnonzero(placed_labels >= 0)
    values = np.unique(placed_labels[placed])
    sizes = np.array([np.sum(placed_labels == v) for v in values], dtype=np.int64)
    log_prev = prior_prev.log_eppf(sizes) if sizes.size else 0.0
    out = []
    for j, v in enumerate(list(values) + [None]):
        new_sizes = sizes.copy() if v is not None else np.append(sizes, 1)
        if v is not None:
            new_sizes[j] += 1
            members = placed[placed_labels[placed] == v]
            log_pred = (family.log_marginal_of(x[np.append(members, i)])
                        - family.log_marginal_of(x[members]))
        else:
            log_pred = family.log_marginal_of(x[[i]])
        out.append(prior_now.log_eppf(new_sizes) - log_prev + log_pred)
    return np.array(out)


@pytest.mark.parametrize("prior_name", list(PRIORS))
def test_allocation_weights_match_full_eppf_reference(prior_name):
    import dataclasses

    prior = PRIORS[prior_name]
    family, x = _problem("niw", 5)
    n = x.shape[0]
    name = smc.concentration_name(prior)
    rng = np.random.default_rng(3)
    for anneal in (None, {"start": 2.5, "rate": 0.4}):
        tables = smc.step_tables(prior, n, anneal)
        lv, lw = tables[0], tables[1]
        schedule = (smc.annealing_schedule(n, 2.5, getattr(prior, name), 0.4)
                    if anneal else np.full(n, getattr(prior, name)))
        particle = _Particle(family, x)
        placed = np.full(n, -1)
        for t in range(1, n + 1):
            i = t - 1
            lpp = family.log_marginal_of(x[[i]])
            k, got = particle.allocation(i, lpp, lv[t], lw[min(t, lw.shape[0] - 1)], lv[t - 1],
                                         lw[min(t - 1, lw.shape[0] - 1)])
            now = dataclasses.replace(prior, **{name: float(schedule[t - 1])})
            prev = dataclasses.replace(prior, **{name: float(schedule[max(t - 2, 0)])})
            # the reference labels the placed points by their slots (sorted); map to active
            expected = _reference_allocation(now, prev, family, x, placed, i)
            values = list(np.unique(placed[placed >= 0]))
            mapped = np.array([expected[values.index(slot)] for slot in particle.active[:k]]
                              + [expected[-1]])
            np.testing.assert_allclose(got, mapped, rtol=1e-9, atol=1e-9)
            weights = np.exp(got - got.max())
            choice = rng.choice(k + 1, p=weights / weights.sum())
            particle.assign(i, choice, k)
            placed[i] = particle.labels[i]


# ------------------------------------------------------------------ one-particle path identity


def _path_sum(prior, family, x, anneal, rejuvenation):
    """sum over every path (allocations and Gibbs choices) of q(path) * Ẑ(path), L = 1."""
    from pymc_splitmerge.kernels.gibbs import _join_and_new_log_weights

    n = x.shape[0]
    lv, lw, final_lv, final_lw, reweight = smc.step_tables(prior, n, anneal)
    lpp = np.array([family.log_marginal_of(x[[i]]) for i in range(n)])

    def row(table, t):
        return table[t] if table.shape[0] > 1 else table[0]

    def gibbs(particle, t, cursor, remaining, log_mass):
        """Branch over the Gibbs choices of the rejuvenation block (yields (particle, log q))."""
        if remaining == 0:
            yield particle, log_mass
            return
        i = cursor % (t - 1)
        old = particle.unassign(i)
        was_singleton = particle.sizes[old] == 0
        out = np.empty(particle.sizes.shape[0])
        k = _join_and_new_log_weights(particle.family_id, particle.params, x, i, lv[t],
                                      row(lw, t), particle.sizes, particle.stats, particle.active,
                                      particle.meta, lpp[i], out)
        log_probs = out[: k + 1] - _lse(out[: k + 1])
        for choice in range(k + 1):
            if log_probs[choice] == -np.inf:
                continue
            child = particle.copy()
            if choice == k and was_singleton:
                slot = old
            elif choice == k:
                slot = int(np.flatnonzero(child.where < 0)[0])
            else:
                slot = child.active[choice]
            assign_point(child.family_id, child.params, x, i, slot, child.labels, child.sizes,
                         child.stats, child.active, child.where, child.meta)
            yield from gibbs(child, t, cursor + 1, remaining - 1, log_mass + log_probs[choice])

    def recurse(particle, t, cursor, log_q_z):
        # log_q_z = log q(path so far) + log Ẑ(path so far)
        if t > n:
            if reweight:
                log_q_z += smc.log_prior_ratio(final_lv, final_lw, lv[n], row(lw, n),
                                               particle.partition)
            return [log_q_z]
        i = t - 1
        k, alloc = particle.allocation(i, lpp[i], lv[t], row(lw, t), lv[t - 1], row(lw, t - 1))
        log_v = _lse(alloc)
        results = []
        for choice in range(k + 1):
            if alloc[choice] == -np.inf:
                continue
            child = particle.copy()
            child.assign(i, choice, k)
            log_here = log_q_z + log_v + (alloc[choice] - log_v)
            if rejuvenation and t > 1:
                count = min(rejuvenation, t - 1)
                for moved, log_g in gibbs(child, t, cursor, count, 0.0):
                    results += recurse(moved, t + 1, (cursor + rejuvenation) % (t - 1),
                                       log_here + log_g)
            else:
                results += recurse(child, t + 1, cursor, log_here)
        return results

    return _lse(np.array(recurse(_Particle(family, x), 1, 0, 0.0)))


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("family_name", list(FAMILIES))
@pytest.mark.parametrize("prior_name", list(PRIORS))
def test_one_particle_path_identity(prior_name, family_name, config):
    prior = PRIORS[prior_name]
    n = 4 if CONFIGS[config].get("rejuvenation") else 5
    family, x = _problem(family_name, n)
    kwargs = dict(CONFIGS[config])
    rejuvenation = kwargs.get("rejuvenation", 0)
    if rejuvenation:
        rejuvenation = 1
    log_total = _path_sum(prior, family, x, kwargs.get("anneal"), rejuvenation)
    assert log_total == pytest.approx(_exact(prior, family, x).log_evidence, abs=1e-9)


def test_path_identity_negative_control_missing_eppf_ratio():
    """The same identity rejects Lomeli's printed join weight (no (n_c - σ) factor)."""
    prior = PRIORS["py"]
    family, x = _problem("bernoulli", 5)
    n = x.shape[0]
    lv, lw, *_ = smc.step_tables(prior, n, None)
    flat = np.zeros_like(lw)  # W(m+1)/W(m) = 1: the slides' join weight
    flat[0, 0] = 0.0
    particle = _Particle(family, x)
    lpp = np.array([family.log_marginal_of(x[[i]]) for i in range(n)])

    def recurse(particle, t, acc):
        if t > n:
            return [acc]
        k, alloc = particle.allocation(t - 1, lpp[t - 1], lv[t], flat[0], lv[t - 1], flat[0])
        alloc[k] += lw[0, 1]
        log_v = _lse(alloc)
        out = []
        for choice in range(k + 1):
            child = particle.copy()
            child.assign(t - 1, choice, k)
            out += recurse(child, t + 1, acc + alloc[choice])
        del log_v
        return out

    log_total = _lse(np.array(recurse(particle, 1, 0.0)))
    assert abs(log_total - _exact(prior, family, x).log_evidence) > 1e-3


# -------------------------------------------------------------------------- unbiasedness

PARTICLES = (2, 4, 16)
RUNS_PER_SIZE = 1000


def _unbiasedness_statistic(prior, family, x, rng, evidence_runs=smc.log_evidence_runs,
                            **kwargs):
    """Sum over L in PARTICLES of z_L^2, z_L = (mean(Ẑ/Z) - 1) / SE  (chi^2 with 3 dof)."""
    log_z = _exact(prior, family, x).log_evidence
    total = 0.0
    details = []
    for num_particles in PARTICLES:
        log_hat = evidence_runs(prior, family, x, num_particles, RUNS_PER_SIZE, rng, **kwargs)
        ratio = np.exp(log_hat - log_z)
        z = (ratio.mean() - 1.0) / (ratio.std(ddof=1) / np.sqrt(ratio.size))
        total += z * z
        details.append((num_particles, ratio.mean(), z))
    return total, stats.chi2.sf(total, len(PARTICLES)), details


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("family_name", list(FAMILIES))
@pytest.mark.parametrize("prior_name", list(PRIORS))
def test_evidence_is_unbiased(prior_name, family_name, config):
    prior = PRIORS[prior_name]
    family, x = _problem(family_name, 6 if family_name == "bernoulli" else 5)
    seed = zlib.crc32(f"{prior_name}-{family_name}-{config}".encode())
    _, pvalue, details = _unbiasedness_statistic(prior, family, x, np.random.default_rng(seed),
                                                 **CONFIGS[config])
    # One test per case: sum over L of z_L^2 ~ chi^2_3 at the suite budget (a separate
    # |z_L| < 4 per L would spend 3 x 6e-5 per case, more than the budget allows).
    assert pvalue >= GOF_PVALUE_THRESHOLD, details


@pytest.mark.parametrize("variant, kwargs", [
    ("cumulative_weights", {"ess_threshold": 0.5}),
    ("drop_first_term", {}),
    ("weight_after_move", {"rejuvenation": 2}),
])
def test_evidence_negative_controls_are_rejected(variant, kwargs):
    prior = PRIORS["dp"]
    family, x = _problem("bernoulli", 6)
    rng = np.random.default_rng(11)
    broken = getattr(broken_kernels, f"smc_{variant}_evidence_runs")
    _, pvalue, details = _unbiasedness_statistic(prior, family, x, rng, evidence_runs=broken,
                                                 **kwargs)
    assert pvalue < GOF_PVALUE_THRESHOLD, details
    # the correct variant with the same settings passes
    _, pvalue, details = _unbiasedness_statistic(prior, family, x, rng, **kwargs)
    assert pvalue >= GOF_PVALUE_THRESHOLD, details


@pytest.mark.parametrize("family_name", list(FAMILIES))
def test_evidence_is_unbiased_with_rejuvenation_beyond_the_points_seen(family_name):
    """Q = 20 > n (the order of Q docs/benchmarks.md recommends for evidence at n = 1,000): every
    step Gibbs-updates all the past labels once, the rotating block wrapping around; Ẑ stays
    unbiased, and weighting after the move (negative control) is rejected by the same test."""
    prior = PRIORS["dp"]
    family, x = _problem(family_name, 5)
    rng = np.random.default_rng(zlib.crc32(f"rejuvenation-20-{family_name}".encode()))
    _, pvalue, details = _unbiasedness_statistic(prior, family, x, rng, rejuvenation=20)
    assert pvalue >= GOF_PVALUE_THRESHOLD, details
    broken = broken_kernels.smc_weight_after_move_evidence_runs
    _, pvalue, details = _unbiasedness_statistic(prior, family, x, rng, evidence_runs=broken,
                                                 rejuvenation=20)
    assert pvalue < GOF_PVALUE_THRESHOLD, details


# ------------------------------------------------------------------ weighted partition law


def _weighted_law_statistic(prior, family, x, rng, num_runs, num_particles, run=smc.run_smc,
                            use_evidence=True, **kwargs):
    exact = _exact(prior, family, x)
    n = x.shape[0]
    cells = np.flatnonzero(exact.prob >= 0.03)
    cells = cells[np.argsort(exact.prob[cells])[::-1][:10]]
    column = {int(c): j for j, c in enumerate(cells)}
    values = np.zeros((num_runs, cells.size))
    tables = smc._prepare_run(prior, family, x, None, kwargs.get("anneal"))
    for r in range(num_runs):
        result = run(prior, family, x, num_particles, rng, prepared=tables, **kwargs)
        scale = np.exp(result.log_evidence - exact.log_evidence) if use_evidence else 1.0
        index = partition_index(result.labels, n)
        weights = np.exp(result.log_weights)
        for p, cell in enumerate(index):
            j = column.get(int(cell))
            if j is not None:
                values[r, j] += scale * weights[p]
    difference = values.mean(axis=0) - exact.prob[cells]
    covariance = np.cov(values, rowvar=False) / num_runs
    statistic = float(difference @ np.linalg.solve(covariance, difference))
    return statistic, stats.chi2.sf(statistic, cells.size)


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("family_name", ["niw", "bernoulli"])
@pytest.mark.parametrize("prior_name", list(PRIORS))
def test_weighted_partition_law_matches_exact_posterior(prior_name, family_name, config):
    prior = PRIORS[prior_name]
    family, x = _problem(family_name, 5)
    rng = np.random.default_rng(
        zlib.crc32(f"{prior_name}-{family_name}-{config}-law".encode()))
    statistic, pvalue = _weighted_law_statistic(prior, family, x, rng, 3000, 4,
                                                **CONFIGS[config])
    assert pvalue >= GOF_PVALUE_THRESHOLD, statistic


def test_weighted_partition_law_negative_control():
    """Weighting after the move biases the weighted law; the same test rejects it."""
    prior = PRIORS["dp"]
    family, x = _problem("niw", 5)
    rng = np.random.default_rng(5)
    statistic, pvalue = _weighted_law_statistic(prior, family, x, rng, 3000, 4,
                                                run=broken_kernels.smc_weight_after_move_run,
                                                rejuvenation=2)
    assert pvalue < GOF_PVALUE_THRESHOLD, statistic


# ------------------------------------------------------------------------------ sample_smc

SMC_DATA = np.array([[1, 1, 0], [1, 1, 1], [0, 0, 1], [0, 0, 0], [1, 0, 1], [0, 1, 0]])


def _pymc_model(prior_name, alpha=None):
    import pymc as pm

    import pymc_splitmerge as psm

    n = len(SMC_DATA)
    prior = PRIORS[prior_name]
    with pm.Model() as model:
        if prior_name == "dp":
            value = prior.alpha if alpha is None else alpha
            z = psm.DirichletProcess("z", alpha=value, n=n)
        elif prior_name == "py":
            z = psm.PitmanYor("z", alpha=prior.alpha, discount=prior.discount, n=n)
        elif prior_name == "finite":
            z = psm.FiniteDirichlet("z", alpha=prior.alpha, k=prior.k, n=n)
        else:
            z = psm.MixtureOfFiniteMixtures("z", gamma=prior.gamma, k_prior=prior.k_prior, n=n)
        psm.ConjugateMixture("y", partition=z, component=psm.BetaBernoulli(a=1.0, b=1.0),
                             observed=SMC_DATA)
    return model


@pytest.mark.parametrize("prior_name", list(PRIORS))
def test_sample_smc_evidence_and_layout(prior_name):
    import pymc_splitmerge as psm
    from pymc_splitmerge.analysis._arviz_compat import get_group
    from pymc_splitmerge.components import BetaBernoulli

    model = _pymc_model(prior_name)
    chains, draws = 600, 4
    idata = psm.sample_smc(draws=draws, chains=chains, model=model, random_seed=7,
                           rejuvenation=1, progressbar=False)
    posterior = get_group(idata, "posterior")
    stats_group = get_group(idata, "sample_stats")
    labels = np.asarray(posterior["z"])
    assert labels.shape == (chains, draws, len(SMC_DATA))
    flat = labels.reshape(-1, len(SMC_DATA))
    from pymc_splitmerge.core.relabel import canonical_labels

    np.testing.assert_array_equal(flat, canonical_labels(flat))
    log_hat = np.asarray(stats_group["log_marginal_likelihood"])
    assert log_hat.shape == (chains,)
    assert np.asarray(stats_group["ess"]).shape == (chains, len(SMC_DATA) + 1)
    exact = exact_posterior(PRIORS[prior_name], BetaBernoulli(a=1.0, b=1.0), SMC_DATA)
    ratio = np.exp(log_hat - exact.log_evidence)
    z = (ratio.mean() - 1.0) / (ratio.std(ddof=1) / np.sqrt(chains))
    assert stats.norm.sf(abs(z)) * 2 >= GOF_PVALUE_THRESHOLD, (ratio.mean(), z)
    # every draw is a partition of positive posterior probability
    assert np.all(exact.probability_of(flat) > 0)


@pytest.mark.parametrize("order", [None, "random"])
def test_sample_smc_cores_give_the_same_result(order):
    """Chains in parallel processes reproduce the sequential run for the same seed."""
    import pymc_splitmerge as psm
    from pymc_splitmerge.analysis._arviz_compat import get_group

    model = _pymc_model("py")
    results = [psm.sample_smc(draws=8, chains=3, model=model, random_seed=11, order=order,
                              rejuvenation=1, cores=cores, progressbar=False)
               for cores in (1, 2)]
    first, second = (get_group(result, "posterior")["z"].values for result in results)
    assert first.shape == (3, 8, len(SMC_DATA))
    np.testing.assert_array_equal(first, second)
    first, second = (get_group(result, "sample_stats")["log_marginal_likelihood"].values
                     for result in results)
    np.testing.assert_array_equal(first, second)
    assert len(set(first.tolist())) == 3  # the chains are independent runs
    with pytest.raises(ValueError, match="cores"):
        psm.sample_smc(draws=8, chains=2, model=model, cores=0, progressbar=False)


def test_sample_smc_accepts_pm_data_and_random_order_and_compare_evidence():
    import pymc as pm

    import pymc_splitmerge as psm
    from pymc_splitmerge.components import BetaBernoulli

    results = {}
    for name, alpha in (("dp_small", 0.3), ("dp_large", 3.0)):
        with pm.Model():
            value = pm.Data("alpha", alpha)
            z = psm.DirichletProcess("z", alpha=value, n=len(SMC_DATA))
            psm.ConjugateMixture("y", partition=z, component=psm.BetaBernoulli(a=1.0, b=1.0),
                                 observed=SMC_DATA)
            results[name] = psm.sample_smc(draws=64, chains=8, order="random", random_seed=3,
                                           anneal={"start": 1.0, "rate": 0.3},
                                           progressbar=False)
    table = psm.compare_evidence(results)
    assert list(table.columns[:2]) == ["log_evidence", "mcse"]
    assert table["log_bayes_factor"].iloc[0] == 0.0
    assert np.all(np.diff(table["log_evidence"]) <= 0)
    for name, alpha in (("dp_small", 0.3), ("dp_large", 3.0)):
        exact = exact_posterior(PRIORS["dp"].__class__(alpha=alpha), BetaBernoulli(a=1.0, b=1.0),
                                SMC_DATA)
        row = table.loc[name]
        assert abs(row["log_evidence"] - exact.log_evidence) < 5 * row["mcse"] + 0.02


def test_sample_smc_clear_errors():
    import pymc as pm

    import pymc_splitmerge as psm

    with pm.Model() as model:
        alpha = pm.Gamma("concentration", 1.0, 1.0)
        z = psm.DirichletProcess("z", alpha=alpha, n=len(SMC_DATA))
        psm.ConjugateMixture("y", partition=z, component=psm.BetaBernoulli(a=1.0, b=1.0),
                             observed=SMC_DATA)
    with pytest.raises(ValueError, match="'concentration'.*free random variable"):
        psm.sample_smc(model=model, progressbar=False)
    model = _pymc_model("dp")
    with pytest.raises(ValueError, match="anneal"):
        psm.sample_smc(model=model, anneal={"begin": 1.0}, progressbar=False)
    with pytest.raises(ValueError, match="order"):
        psm.sample_smc(model=model, order="reversed", progressbar=False)
    with pytest.raises(ValueError, match="resampling"):
        psm.sample_smc(model=model, resampling="stratified", progressbar=False)
    with pytest.raises(ValueError, match="compare_evidence needs"):
        psm.compare_evidence({})


# ------------------------------------------------------------------- incremental (previous=)


def _continued_log_evidence(prior, family, x, n_old, num_particles, num_runs, rng, **kwargs):
    """log Ẑ(y[:n_old]) from a run on the first points, then the continued run's increments."""
    n = x.shape[0]
    first = smc._prepare_run(prior, family, x[:n_old], None, kwargs.get("anneal"))
    rest = smc._prepare_run(prior, family, x, None, kwargs.get("anneal"), n_old)
    out = np.empty(num_runs)
    for r in range(num_runs):
        old = smc.run_smc(prior, family, x[:n_old], num_particles, rng, prepared=first,
                          **kwargs)
        ancestors = smc.reference_systematic_resample(np.exp(old.log_weights), rng.random())
        initial = np.zeros((num_particles, n), dtype=np.int64)
        initial[:, :n_old] = old.labels[ancestors]
        new = smc.run_smc(prior, family, x, num_particles, rng, prepared=rest, start=n_old,
                          initial_labels=initial, **kwargs)
        out[r] = old.log_evidence + new.log_evidence
    return out


@pytest.mark.parametrize("config", ["standard", "annealed_rejuvenated"])
@pytest.mark.parametrize("prior_name", ["py", "mfm"])
def test_continued_population_evidence_is_unbiased(prior_name, config):
    prior = PRIORS[prior_name]
    family, x = _problem("bernoulli", 6)
    rng = np.random.default_rng(zlib.crc32(f"{prior_name}-{config}-continued".encode()))
    log_hat = _continued_log_evidence(prior, family, x, 3, 4, 3000, rng, **CONFIGS[config])
    ratio = np.exp(log_hat - _exact(prior, family, x).log_evidence)
    z = (ratio.mean() - 1.0) / (ratio.std(ddof=1) / np.sqrt(ratio.size))
    assert 2 * stats.norm.sf(abs(z)) >= GOF_PVALUE_THRESHOLD, (ratio.mean(), z)


def test_continued_population_negative_control_restarting_the_evidence():
    """Forgetting the first run's evidence (restarting log Ẑ at 0) is rejected."""
    prior = PRIORS["dp"]
    family, x = _problem("bernoulli", 6)
    rng = np.random.default_rng(8)
    first = smc._prepare_run(prior, family, x[:3], None, None)
    log_first = np.array([smc.run_smc(prior, family, x[:3], 4, rng, prepared=first).log_evidence
                          for _ in range(3000)])
    log_hat = _continued_log_evidence(prior, family, x, 3, 4, 3000, rng) - log_first
    ratio = np.exp(log_hat - _exact(prior, family, x).log_evidence)
    z = (ratio.mean() - 1.0) / (ratio.std(ddof=1) / np.sqrt(ratio.size))
    assert 2 * stats.norm.sf(abs(z)) < GOF_PVALUE_THRESHOLD, (ratio.mean(), z)


def test_sample_smc_previous_continues_the_population():
    import pymc as pm

    import pymc_splitmerge as psm
    from pymc_splitmerge.analysis._arviz_compat import get_group
    from pymc_splitmerge.components import BetaBernoulli

    def model_for(data):
        with pm.Model() as model:
            z = psm.PitmanYor("z", alpha=0.8, discount=0.35, n=len(data))
            psm.ConjugateMixture("y", partition=z, component=psm.BetaBernoulli(a=1.0, b=1.0),
                                 observed=data)
        return model

    chains, draws = 600, 4
    old = psm.sample_smc(draws=draws, chains=chains, model=model_for(SMC_DATA[:3]),
                         random_seed=1, progressbar=False)
    new = psm.sample_smc(draws=draws, chains=chains, model=model_for(SMC_DATA), random_seed=2,
                         previous=old, rejuvenation=1, order="random", progressbar=False)
    labels = np.asarray(get_group(new, "posterior")["z"])
    assert labels.shape == (chains, draws, len(SMC_DATA))
    log_hat = np.asarray(get_group(new, "sample_stats")["log_marginal_likelihood"])
    exact = exact_posterior(PRIORS["py"], BetaBernoulli(a=1.0, b=1.0), SMC_DATA)
    ratio = np.exp(log_hat - exact.log_evidence)
    z = (ratio.mean() - 1.0) / (ratio.std(ddof=1) / np.sqrt(chains))
    assert 2 * stats.norm.sf(abs(z)) >= GOF_PVALUE_THRESHOLD, (ratio.mean(), z)
    changed = SMC_DATA.copy()
    changed[0] = 1 - changed[0]
    with pytest.raises(ValueError, match="appended at the end"):
        psm.sample_smc(draws=draws, chains=chains, model=model_for(changed), previous=old,
                       progressbar=False)
    with pytest.raises(ValueError, match="chains="):
        psm.sample_smc(draws=draws, chains=3, model=model_for(SMC_DATA), previous=old,
                       progressbar=False)
