"""Tests of the numeric Gibbs-type partition priors (pymc_splitmerge.priors)."""

import itertools
import math

import numpy as np
import pytest
from scipy.special import gammaln, logsumexp

from pymc_splitmerge.core.enumerate import enumerate_partitions
from pymc_splitmerge.priors import (
    DirichletProcessPrior,
    ExplicitPmf,
    FiniteDirichletPrior,
    Geometric,
    MixtureOfFiniteMixturesPrior,
    PitmanYorPrior,
    ShiftedPoisson,
    dirichlet_process_expected_n_clusters,
    mixture_of_finite_mixtures_log_v_table,
)
from pymc_splitmerge.testing import assert_partition_gof, exact_prior

PRIORS = {
    "dp-0.3": DirichletProcessPrior(0.3),
    "dp-2.5": DirichletProcessPrior(2.5),
    "py-negative-alpha": PitmanYorPrior(-0.4, 0.6),
    "py-1-0.25": PitmanYorPrior(1.0, 0.25),
    "py-zero-discount": PitmanYorPrior(1.3, 0.0),
    "finite-k3": FiniteDirichletPrior(0.7, 3),
    "finite-k1": FiniteDirichletPrior(2.0, 1),
    "finite-k10": FiniteDirichletPrior(0.2, 10),
    "mfm-poisson": MixtureOfFiniteMixturesPrior(1.0, ShiftedPoisson(2.0)),
    "mfm-geometric": MixtureOfFiniteMixturesPrior(0.4, Geometric(0.3)),
    "mfm-explicit": MixtureOfFiniteMixturesPrior(1.5, ExplicitPmf([0.1, 0.0, 0.5, 0.4])),
}


def sizes_of(row):
    return np.bincount(row)


def log_total_mass(prior, n):
    """log of the EPPF summed over all set partitions (grouped by block-size multiset)."""
    partitions = enumerate_partitions(n)
    signatures = [tuple(sorted(sizes_of(row).tolist())) for row in partitions]
    multiplicity = {}
    for signature in signatures:
        multiplicity[signature] = multiplicity.get(signature, 0) + 1
    return logsumexp([math.log(count) + prior.log_eppf(np.array(signature))
                      for signature, count in multiplicity.items()])


@pytest.mark.parametrize("name", list(PRIORS))
def test_eppf_sums_to_one(name):
    prior = PRIORS[name]
    for n in range(1, 9):
        assert abs(log_total_mass(prior, n)) < 1e-10, (name, n)


def test_eppf_infeasible_partitions_have_zero_mass():
    prior = FiniteDirichletPrior(0.7, 3)
    assert prior.log_eppf([1, 1, 1, 1]) == -np.inf
    assert np.isfinite(prior.log_eppf([2, 1, 1]))
    explicit = MixtureOfFiniteMixturesPrior(1.0, ExplicitPmf([0.5, 0.5]))
    assert explicit.max_clusters == 2
    assert explicit.log_eppf([1, 1, 1]) == -np.inf


class _FiniteDirichletAsInPublicCode(FiniteDirichletPrior):
    """Negative control: drops k!/(k-K)! and Gamma(alpha)^-K like the PGSM reference code."""

    def _log_v(self, n, k):
        return gammaln(self.k * self.alpha) - gammaln(self.k * self.alpha + n) + 0.0 * k


def test_eppf_sum_detects_dropped_finite_dirichlet_factors():
    wrong = _FiniteDirichletAsInPublicCode(0.7, 3)
    assert abs(log_total_mass(wrong, 5)) > 0.1


def test_eppf_matches_explicit_formulas():
    sizes = np.array([3, 1, 2])
    n, k = 6, 3
    alpha = 1.7
    expected_dp = k * math.log(alpha) + math.lgamma(alpha) - math.lgamma(alpha + n) + sum(
        math.lgamma(s) for s in sizes)
    assert DirichletProcessPrior(alpha).log_eppf(sizes) == pytest.approx(expected_dp, abs=1e-12)
    # Pitman-Yor, direct products
    a, d = -0.2, 0.5
    numerator = math.prod(a + i * d for i in range(1, k))
    denominator = math.prod(a + 1 + j for j in range(n - 1))
    weights = math.prod(math.prod(1 - d + j for j in range(s - 1)) for s in sizes)
    assert PitmanYorPrior(a, d).log_eppf(sizes) == pytest.approx(
        math.log(numerator * weights / denominator), abs=1e-12)
    # finite Dirichlet: k!/(k-K)! Gamma(k a)/Gamma(k a + n) prod Gamma(n_j + a)/Gamma(a)
    components, a = 5, 0.8
    expected = (math.log(math.perm(components, k)) + math.lgamma(components * a)
                - math.lgamma(components * a + n)
                + sum(math.lgamma(s + a) - math.lgamma(a) for s in sizes))
    assert FiniteDirichletPrior(a, components).log_eppf(sizes) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("name", list(PRIORS))
def test_tables_match_log_v_log_w(name):
    prior = PRIORS[name]
    for n in (0, 1, 4, 7):
        log_v_table, log_w_table = prior.tables(n)
        assert log_v_table.shape == (n + 2,) and log_w_table.shape == (n + 2,)
        assert log_v_table.dtype == np.float64 and log_w_table.dtype == np.float64
        assert log_w_table[0] == 0.0
        assert log_v_table[0] == (0.0 if n == 0 else -np.inf)
        for k in range(n + 2):
            assert log_v_table[k] == pytest.approx(prior.log_v(n, k), abs=1e-13) or (
                log_v_table[k] == prior.log_v(n, k) == -np.inf)
        for m in range(1, n + 2):
            assert log_w_table[m] == pytest.approx(prior.log_w(m), abs=1e-13)


@pytest.mark.parametrize("name", list(PRIORS))
def test_kernel_ratios_are_eppf_conditionals(name):
    """The join/new weights from tables(N) equal ratios of the EPPF of the extended partition."""
    prior = PRIORS[name]
    rng = np.random.default_rng(7)
    for _ in range(10):
        n_before = int(rng.integers(1, 8))
        labels = prior.sample(n_before, rng)
        sizes = np.bincount(labels)
        n_clusters = len(sizes)
        log_v_table, log_w_table = prior.tables(n_before + 1)
        log_new = log_v_table[n_clusters + 1] - log_v_table[n_clusters] + log_w_table[1]
        eppf_new = prior.log_eppf(np.append(sizes, 1))
        for j, m in enumerate(sizes):
            log_join = log_w_table[m + 1] - log_w_table[m]
            joined = sizes.copy()
            joined[j] += 1
            eppf_join = prior.log_eppf(joined)
            if eppf_new == -np.inf:
                assert log_new == -np.inf
            else:
                assert log_join - log_new == pytest.approx(eppf_join - eppf_new, abs=1e-10)


@pytest.mark.parametrize("alpha", [0.3, 1.0, 4.0])
def test_dirichlet_process_expected_n_clusters(alpha):
    prior = DirichletProcessPrior(alpha)
    for n in range(1, 9):
        exact = exact_prior(prior, n)
        enumerated = float(exact.prob @ exact.n_clusters)
        assert enumerated == pytest.approx(prior.expected_n_clusters(n), rel=1e-12)
        assert enumerated == pytest.approx(dirichlet_process_expected_n_clusters(alpha, n),
                                           rel=1e-12)


@pytest.mark.parametrize("name", list(PRIORS))
def test_urn_samples_match_eppf(name):
    prior = PRIORS[name]
    rng = np.random.default_rng(20240611)
    samples = prior.sample(6, rng, size=20000)
    assert samples.shape == (20000, 6)
    assert_partition_gof(samples, exact_prior(prior, 6))


def test_urn_sampler_detects_wrong_prior():
    rng = np.random.default_rng(3)
    samples = DirichletProcessPrior(1.0).sample(6, rng, size=20000)
    with pytest.raises(AssertionError, match="goodness-of-fit failed"):
        assert_partition_gof(samples, exact_prior(PitmanYorPrior(1.0, 0.2), 6))


def test_single_sample_is_canonical():
    rng = np.random.default_rng(0)
    labels = DirichletProcessPrior(3.0).sample(30, rng)
    assert labels.shape == (30,) and labels.dtype == np.int64
    first_seen = [int(v) for v in dict.fromkeys(labels.tolist())]
    assert first_seen == list(range(labels.max() + 1))
    assert DirichletProcessPrior(1.0).sample(0, rng).shape == (0,)


def _brute_force_log_v(n, gamma, log_pmf, k_max):
    """Direct sum over k = 1..k_max with exact log falling/rising factorials."""
    out = []
    for t in range(n + 2):
        terms = []
        for k in range(max(t, 1), k_max + 1):
            log_falling = math.lgamma(k + 1) - math.lgamma(k - t + 1)
            log_rising = math.lgamma(gamma * k + n) - math.lgamma(gamma * k)
            terms.append(log_falling - log_rising + log_pmf(k))
        out.append(logsumexp(terms) if terms else -np.inf)
    return np.array(out)


@pytest.mark.parametrize(
    ("gamma", "k_prior", "log_pmf", "k_max"),
    [
        (1.0, ShiftedPoisson(3.0), lambda k: -3.0 + (k - 1) * math.log(3.0) - math.lgamma(k), 400),
        (0.3, Geometric(0.1), lambda k: math.log(0.1) + (k - 1) * math.log(0.9), 3000),
        (2.0, Geometric(0.7), lambda k: math.log(0.7) + (k - 1) * math.log(0.3), 300),
    ],
)
@pytest.mark.parametrize("n", [1, 5, 12])
def test_mfm_log_v_against_brute_force(gamma, k_prior, log_pmf, k_max, n):
    table = mixture_of_finite_mixtures_log_v_table(n, gamma, k_prior)
    brute = _brute_force_log_v(n, gamma, log_pmf, k_max)
    np.testing.assert_allclose(table, brute, rtol=0, atol=1e-11)  # log scale: relative error of V


def test_mfm_log_v_large_n_against_brute_force():
    n, gamma = 60, 0.2
    k_prior = Geometric(0.05)
    table = mixture_of_finite_mixtures_log_v_table(n, gamma, k_prior)
    brute = _brute_force_log_v(n, gamma, lambda k: math.log(0.05) + (k - 1) * math.log(0.95),
                               4000)
    np.testing.assert_allclose(table, brute, rtol=0, atol=1e-10)


def test_mfm_is_a_mixture_of_finite_dirichlet_priors():
    """p_MFM(c) = sum_k p_K(k) p_FiniteDirichlet(gamma, k)(c): an independent construction."""
    probabilities = [0.1, 0.2, 0.0, 0.3, 0.4]
    gamma = 0.8
    mfm = MixtureOfFiniteMixturesPrior(gamma, ExplicitPmf(probabilities))
    poisson_mfm = MixtureOfFiniteMixturesPrior(gamma, ShiftedPoisson(1.5))
    for sizes in ([1], [2, 1], [3, 1, 1], [2, 2, 1, 1], [1, 1, 1, 1, 1]):
        mixture = logsumexp([
            math.log(p) + FiniteDirichletPrior(gamma, k).log_eppf(sizes)
            for k, p in enumerate(probabilities, start=1) if p > 0
        ])
        assert mfm.log_eppf(sizes) == pytest.approx(mixture, abs=1e-12)
        poisson_mixture = logsumexp([
            -1.5 + (k - 1) * math.log(1.5) - math.lgamma(k)
            + FiniteDirichletPrior(gamma, k).log_eppf(sizes) for k in range(1, 120)
        ])
        assert poisson_mfm.log_eppf(sizes) == pytest.approx(poisson_mixture, abs=1e-12)


def test_mfm_log_v_is_cached_and_read_only():
    first = mixture_of_finite_mixtures_log_v_table(9, 1.0, ShiftedPoisson(2.0))
    second = mixture_of_finite_mixtures_log_v_table(9, 1.0, ShiftedPoisson(2.0))
    assert first is second
    assert not first.flags.writeable
    log_v_table, _ = MixtureOfFiniteMixturesPrior(1.0, ShiftedPoisson(2.0)).tables(9)
    log_v_table[1] = 0.0  # tables() returns a private copy
    assert first[1] != 0.0


def test_mfm_rejects_too_many_clusters():
    with pytest.raises(ValueError, match="K <= n \\+ 1"):
        MixtureOfFiniteMixturesPrior(1.0, Geometric(0.5)).log_v(3, 7)


def test_pitman_yor_with_zero_discount_is_dirichlet_process():
    for n in (1, 3, 6):
        np.testing.assert_allclose(PitmanYorPrior(1.3, 0.0).tables(n)[0][1:],
                                   DirichletProcessPrior(1.3).tables(n)[0][1:], atol=1e-13)


@pytest.mark.parametrize(
    "build",
    [
        lambda: DirichletProcessPrior(0.0),
        lambda: DirichletProcessPrior(-1.0),
        lambda: DirichletProcessPrior(float("nan")),
        lambda: DirichletProcessPrior(np.inf),
        lambda: PitmanYorPrior(1.0, 1.0),
        lambda: PitmanYorPrior(1.0, -0.1),
        lambda: PitmanYorPrior(-0.5, 0.5),
        lambda: PitmanYorPrior(0.0, 0.0),
        lambda: FiniteDirichletPrior(1.0, 0),
        lambda: FiniteDirichletPrior(1.0, 2.5),
        lambda: FiniteDirichletPrior(0.0, 3),
        lambda: MixtureOfFiniteMixturesPrior(0.0, Geometric(0.5)),
        lambda: ShiftedPoisson(0.0),
        lambda: ShiftedPoisson(-1.0),
        lambda: Geometric(0.0),
        lambda: Geometric(1.5),
        lambda: ExplicitPmf([]),
        lambda: ExplicitPmf([0.5, 0.6]),
        lambda: ExplicitPmf([1.2, -0.2]),
    ],
)
def test_invalid_hyperparameters_raise_value_error(build):
    with pytest.raises(ValueError):
        build()


@pytest.mark.parametrize(
    "build",
    [
        lambda: DirichletProcessPrior("1.0"),
        lambda: DirichletProcessPrior(np.ones(2)),
        lambda: FiniteDirichletPrior(1.0, True),
        lambda: MixtureOfFiniteMixturesPrior(1.0, 3),
    ],
)
def test_wrong_types_raise_type_error(build):
    with pytest.raises(TypeError):
        build()


def test_numpy_scalars_values_repr_eq_hash():
    prior = DirichletProcessPrior(np.float32(2.0))
    assert type(prior.alpha) is float and prior.alpha == 2.0
    assert prior == DirichletProcessPrior(2)
    assert hash(prior) == hash(DirichletProcessPrior(2.0))
    assert repr(prior) == "DirichletProcessPrior(alpha=2.0)"
    finite = FiniteDirichletPrior(np.float64(0.5), np.int64(4))
    assert type(finite.k) is int and finite.max_clusters == 4
    assert FiniteDirichletPrior(0.5, 4.0) == finite
    assert PitmanYorPrior(np.array(0.5), 0.1).alpha == 0.5
    mfm = MixtureOfFiniteMixturesPrior(1, ExplicitPmf(np.array([0.25, 0.75])))
    assert mfm == MixtureOfFiniteMixturesPrior(1.0, ExplicitPmf((0.25, 0.75)))
    assert len({mfm, MixtureOfFiniteMixturesPrior(1.0, ExplicitPmf([0.25, 0.75]))}) == 1
    assert DirichletProcessPrior(1.0).max_clusters is None


def test_log_v_log_w_vectorised_and_input_checks():
    prior = PitmanYorPrior(0.5, 0.3)
    k = np.arange(1, 5)
    np.testing.assert_allclose(prior.log_v(6, k), [prior.log_v(6, int(v)) for v in k])
    np.testing.assert_allclose(prior.log_w(k), [prior.log_w(int(v)) for v in k])
    with pytest.raises(ValueError):
        prior.log_w(0)
    with pytest.raises(ValueError):
        prior.log_v(3, -1)
    with pytest.raises(ValueError):
        prior.log_eppf([2, -1])
    assert prior.log_eppf([2, 0, 1]) == pytest.approx(prior.log_eppf([2, 1]))
    assert prior.log_eppf([]) == 0.0


def test_all_size_multisets_consistent_between_priors_and_itertools():
    # every EPPF is symmetric in the block sizes
    for prior in PRIORS.values():
        for perm in itertools.permutations([3, 1, 2]):
            assert prior.log_eppf(perm) == pytest.approx(prior.log_eppf([1, 2, 3]), abs=1e-13) \
                or prior.log_eppf(perm) == prior.log_eppf([1, 2, 3]) == -np.inf


@pytest.mark.parametrize("discount", [2.2e-309, 1e-12, 1e-5, 0.3])
def test_pitman_yor_log_v_for_small_discounts(discount):
    """log V(n, K) equals the direct sum of log(alpha + i d) for every discount, a subnormal one
    included (the gamma-function form gives inf - inf there)."""
    alpha, n = 1.3, 40
    prior = PitmanYorPrior(alpha=alpha, discount=discount)
    k = np.arange(1, n + 1)
    direct = np.array([np.sum(np.log(alpha + np.arange(1, kk) * discount)) for kk in k])
    direct -= gammaln(alpha + n) - gammaln(alpha + 1.0)
    np.testing.assert_allclose(prior.log_v(n, k), direct, rtol=1e-12, atol=1e-12)
