"""Tests of the exact-posterior oracle, enumeration, relabelling and goodness-of-fit helpers."""

import itertools
import math
from collections import Counter

import numpy as np
import pytest
from scipy.special import betaln, gammaln, logsumexp

from pymc_splitmerge.core.enumerate import bell_number, enumerate_partitions
from pymc_splitmerge.core.relabel import (
    canonical_labels,
    canonical_labels_reference,
    check_labels,
    cluster_sizes,
    is_canonical,
    partition_index,
)
from pymc_splitmerge.priors import (
    DirichletProcessPrior,
    FiniteDirichletPrior,
    Geometric,
    MixtureOfFiniteMixturesPrior,
    PitmanYorPrior,
)
from pymc_splitmerge.testing import (
    GOF_PVALUE_THRESHOLD,
    MIN_CELL_VARIANCE,
    N_GOF_TESTS,
    SUITE_FAILURE_RATE,
    assert_partition_gof,
    chisquare_partitions,
    exact_posterior,
    exact_posterior_random_concentration,
    exact_prior,
    total_variation,
)


class FakeBetaBernoulli:
    """Minimal stand-in for a component family: Beta(a, b)-Bernoulli, closed-form marginal."""

    def __init__(self, a=1.0, b=1.0):
        self.a, self.b = a, b

    def prepare_data(self, data):
        x = np.asarray(data, dtype=np.float64)
        if x.ndim == 1:
            x = x[:, None]
        if not np.all((x == 0) | (x == 1)):
            raise ValueError("Bernoulli data must be 0/1")
        return x

    def log_marginal_of(self, x2d):
        successes = float(np.sum(x2d))
        trials = x2d.shape[0] * x2d.shape[1]
        return betaln(self.a + successes, self.b + trials - successes) - betaln(self.a, self.b)


DATA = np.array([1, 1, 0, 1, 0, 0, 1])


def _bell_triangle(n_max):
    bells, row = [1], [1]
    for _ in range(n_max):
        new_row = [row[-1]]
        for value in row:
            new_row.append(new_row[-1] + value)
        row = new_row
        bells.append(row[0])
    return bells


def _is_restricted_growth(row):
    largest = -1
    for value in row:
        if value > largest + 1:
            return False
        largest = max(largest, value)
    return True


def test_bell_numbers_and_enumeration_structure():
    expected = _bell_triangle(9)
    assert [bell_number(n) for n in range(10)] == expected
    for n in range(1, 10):
        partitions = enumerate_partitions(n)
        assert partitions.dtype == np.int64 and partitions.shape == (expected[n], n)
        # restricted growth strings: canonical, all distinct, lexicographically sorted
        tuples = list(map(tuple, partitions.tolist()))
        assert all(_is_restricted_growth(row) for row in tuples)
        assert len(set(tuples)) == expected[n]
        assert sorted(tuples) == tuples
    assert enumerate_partitions(0).shape == (1, 0)
    assert enumerate_partitions(9) is enumerate_partitions(9)
    with pytest.raises(ValueError):
        enumerate_partitions(11)


def test_canonical_labels_cases():
    np.testing.assert_array_equal(canonical_labels([5, 5, 2, 9, 2]), [0, 0, 1, 2, 1])
    np.testing.assert_array_equal(canonical_labels([0, 1, 2]), [0, 1, 2])
    np.testing.assert_array_equal(canonical_labels([7, 7, 7]), [0, 0, 0])
    np.testing.assert_array_equal(canonical_labels([-4, 10**15, -4, 3]), [0, 1, 0, 2])
    np.testing.assert_array_equal(
        canonical_labels([[3, 1, 3], [0, 0, 2], [2, 1, 0]]), [[0, 1, 0], [0, 0, 1], [0, 1, 2]]
    )
    assert canonical_labels(np.zeros(0, dtype=np.int64)).shape == (0,)
    with pytest.raises(TypeError):
        canonical_labels(["a", "b"])
    with pytest.raises(ValueError):
        canonical_labels(np.zeros((2, 2, 2), dtype=int))
    # the one label validator: integer-valued floats and booleans convert, the rest is refused
    np.testing.assert_array_equal(check_labels([1.0, 0.0]), [1, 0])
    np.testing.assert_array_equal(check_labels([True, False]), [1, 0])
    assert check_labels([-1, 2]).dtype == np.int64
    with pytest.raises(TypeError, match="non-integer floats"):
        check_labels([0.5, 1.0])
    with pytest.raises(ValueError, match="negative labels"):
        check_labels([-1, 2], allow_negative=False)
    with pytest.raises(ValueError, match="ragged"):
        check_labels([[0, 1], [0]])


def test_canonical_labels_numba_matches_reference():
    rng = np.random.default_rng(11)
    for high in (3, 12, 10**9):
        labels = rng.integers(-high if high > 100 else 0, high, size=(500, 9))
        np.testing.assert_array_equal(canonical_labels(labels), canonical_labels_reference(labels))
        np.testing.assert_array_equal(canonical_labels(labels[0]),
                                      canonical_labels_reference(labels[0]))
        # is_canonical holds exactly on the image of the relabelling
        rows_canonical = np.array([is_canonical(row) for row in labels])
        np.testing.assert_array_equal(
            rows_canonical, np.all(canonical_labels(labels) == labels, axis=1))
        assert is_canonical(canonical_labels(labels))


def test_partition_index_and_cluster_sizes():
    rng = np.random.default_rng(5)
    partitions = enumerate_partitions(7)
    # relabel each partition with a random injective map: the index must be recovered
    relabelled = rng.permutation(50)[partitions] * 3 + 11
    np.testing.assert_array_equal(partition_index(relabelled, 7), np.arange(len(partitions)))
    assert int(partition_index([4, 4, 1], 3)) == 1  # [0, 0, 1]
    with pytest.raises(ValueError):
        partition_index(relabelled, 6)
    np.testing.assert_array_equal(cluster_sizes([5, 5, 2, 9, 2]), [2, 2, 1])
    np.testing.assert_array_equal(cluster_sizes([[1, 1, 0], [2, 1, 0]]), [[2, 1, 0], [1, 1, 1]])


def _brute_force_posterior(prior_log_eppf, family, data):
    x = family.prepare_data(data)
    n = len(x)
    rows, log_joint = [], []
    # independent enumeration: all label vectors in range(n)^n, deduplicated by canonical form
    for labels in itertools.product(range(n), repeat=n):
        if not _is_restricted_growth(labels):
            continue
        canonical = np.array(labels)
        blocks = [np.flatnonzero(canonical == j) for j in range(canonical.max() + 1)]
        log_joint.append(prior_log_eppf([len(b) for b in blocks])
                         + sum(family.log_marginal_of(x[b]) for b in blocks))
        rows.append(canonical)
    log_joint = np.array(log_joint)
    return np.array(rows), np.exp(log_joint - logsumexp(log_joint)), logsumexp(log_joint)


def _dp_log_eppf(alpha):
    def log_eppf(sizes):
        n, k = sum(sizes), len(sizes)
        return (k * math.log(alpha) + math.lgamma(alpha) - math.lgamma(alpha + n)
                + sum(math.lgamma(s) for s in sizes))
    return log_eppf


def test_exact_posterior_matches_brute_force():
    family = FakeBetaBernoulli(0.5, 1.5)
    data = DATA[:6]
    exact = exact_posterior(DirichletProcessPrior(1.3), family, data)
    rows, prob, log_evidence = _brute_force_posterior(_dp_log_eppf(1.3), family, data)
    np.testing.assert_allclose(exact.probability_of(rows), prob, rtol=1e-10)
    assert exact.log_evidence == pytest.approx(log_evidence, abs=1e-10)
    assert exact.prob.sum() == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(exact.prob, np.exp(exact.log_prob))
    # number of clusters and co-clustering, computed directly from the brute-force law
    n_clusters = rows.max(axis=1) + 1
    pmf = np.array([prob[n_clusters == k].sum() for k in range(7)])
    np.testing.assert_allclose(exact.n_clusters_pmf, pmf, atol=1e-12)
    coclustering = np.zeros((6, 6))
    for row, p in zip(rows, prob):
        coclustering += p * (row[:, None] == row[None, :])
    np.testing.assert_allclose(exact.coclustering, coclustering, atol=1e-12)
    np.testing.assert_allclose(np.diag(exact.coclustering), 1.0)


def test_log_evidence_matches_sequential_predictive_for_single_cluster_prior():
    # finite Dirichlet with k = 1: a single cluster, evidence = marginal of all the data
    family = FakeBetaBernoulli(2.0, 3.0)
    exact = exact_posterior(FiniteDirichletPrior(1.0, 1), family, DATA)
    assert exact.n_clusters_pmf[1] == pytest.approx(1.0)
    assert exact.log_evidence == pytest.approx(family.log_marginal_of(DATA[:, None]), abs=1e-12)


@pytest.mark.parametrize("alpha", [0.5, 2.0])
def test_exact_prior_n_clusters_matches_stirling_numbers(alpha):
    n = 8
    # unsigned Stirling numbers of the first kind by recursion
    stirling = np.zeros((n + 1, n + 1))
    stirling[0, 0] = 1
    for i in range(1, n + 1):
        for k in range(1, i + 1):
            stirling[i, k] = stirling[i - 1, k - 1] + (i - 1) * stirling[i - 1, k]
    k = np.arange(n + 1)
    with np.errstate(divide="ignore"):
        log_pmf = np.log(stirling[n]) + k * math.log(alpha) + gammaln(alpha) - gammaln(alpha + n)
    exact = exact_prior(DirichletProcessPrior(alpha), n)
    np.testing.assert_allclose(exact.n_clusters_pmf, np.exp(log_pmf), atol=1e-13)
    assert abs(exact.log_evidence) < 1e-12


def test_impossible_partitions_have_zero_probability():
    exact = exact_posterior(FiniteDirichletPrior(0.5, 2), FakeBetaBernoulli(), DATA[:5])
    assert np.all(exact.prob[exact.n_clusters > 2] == 0)
    assert exact.n_clusters_pmf[3:].sum() == 0


def test_gof_accepts_correct_samples():
    exact = exact_posterior(PitmanYorPrior(0.5, 0.3), FakeBetaBernoulli(), DATA[:6])
    rng = np.random.default_rng(123)
    samples = exact.sample(20000, rng)
    # arbitrary relabelling must not matter
    samples = samples * 7 + 100
    result = assert_partition_gof(samples, exact)
    assert result.dof >= 10 and result.pvalue > GOF_PVALUE_THRESHOLD
    assert result.observed.sum() == 20000
    assert result.expected.sum() == pytest.approx(20000)
    # total variation against a direct count of label tuples
    counts = Counter(tuple(row) for row in ((samples - 100) // 7).tolist())
    direct = 0.5 * sum(abs(counts.get(tuple(row), 0) / 20000 - p)
                       for row, p in zip(exact.partitions.tolist(), exact.prob))
    assert total_variation(samples, exact) == pytest.approx(direct, abs=1e-12)


def test_gof_rejects_samples_from_wrong_law():
    """Negative control: DP(alpha=1) samples tested against the DP(alpha=2) posterior."""
    family = FakeBetaBernoulli()
    data = DATA[:5]
    truth = exact_posterior(DirichletProcessPrior(1.0), family, data)
    wrong = exact_posterior(DirichletProcessPrior(2.0), family, data)
    samples = truth.sample(20000, np.random.default_rng(9))
    assert_partition_gof(samples, truth)
    with pytest.raises(AssertionError, match="partition goodness-of-fit failed") as info:
        assert_partition_gof(samples, wrong)
    assert "observed" in str(info.value) and "residual" in str(info.value)
    assert total_variation(samples, wrong) > 2 * total_variation(samples, truth)


def test_gof_fails_on_impossible_partitions():
    exact = exact_prior(FiniteDirichletPrior(1.0, 2), 4)
    samples = exact.sample(1000, np.random.default_rng(1))
    samples[0] = [0, 1, 2, 3]
    result = chisquare_partitions(samples, exact)
    assert result.pvalue == 0.0 and result.impossible_count == 1
    with pytest.raises(AssertionError):
        assert_partition_gof(samples, exact)


def test_gof_cells_and_lumping():
    exact = exact_prior(DirichletProcessPrior(1.0), 5)
    samples = exact.sample(300, np.random.default_rng(2))
    result = chisquare_partitions(samples, exact)
    expected_all = 300 * exact.prob
    kept = int(np.sum(expected_all * (1 - exact.prob) >= MIN_CELL_VARIANCE))
    assert len(result.expected) in (kept, kept + 1)
    assert result.expected.sum() == pytest.approx(300)
    assert result.observed.sum() == 300
    assert np.sum([cell is None for cell in result.cell_partitions]) <= 1
    with pytest.raises(ValueError):
        chisquare_partitions(samples[:, :4], exact)


def test_failure_budget_constants():
    assert GOF_PVALUE_THRESHOLD == pytest.approx(SUITE_FAILURE_RATE / N_GOF_TESTS)


def _grid_posterior_random_concentration(prior_factory, shape, rate, family, data):
    """Brute force: dense trapezoid grid over log(alpha), exact partition law at each alpha."""
    x = family.prepare_data(data)
    n = len(data)
    # trapezoid rule in u = log(alpha): exponentially accurate for smooth integrands that
    # vanish at both ends (mass below exp(-30) is < exp(-30 * shape))
    u = np.linspace(-30.0, 6.0, 481)
    alpha = np.exp(u)
    log_gamma_density = shape * math.log(rate) - gammaln(shape) + (shape - 1) * u - rate * alpha
    log_weights = log_gamma_density + u + math.log(u[1] - u[0])
    log_weights[[0, -1]] -= math.log(2.0)
    log_priors = np.array([exact_prior(prior_factory(a), n).log_prob for a in alpha])  # (G, B)
    log_marginal_prior = logsumexp(log_priors + log_weights[:, None], axis=0)
    partitions = enumerate_partitions(n)
    log_likelihood = np.array([
        sum(family.log_marginal_of(x[row == j]) for j in range(row.max() + 1))
        for row in partitions
    ])
    log_post = log_marginal_prior + log_likelihood
    log_post -= logsumexp(log_post)
    # E[alpha | y] = sum_c p(c|y) E[alpha | c]
    possible = np.isfinite(log_marginal_prior)
    log_conditional = (log_priors[:, possible] + log_weights[:, None]
                       - log_marginal_prior[None, possible])
    conditional_mean = np.zeros(len(possible))
    conditional_mean[possible] = np.exp(logsumexp(log_conditional + u[:, None], axis=0))
    return np.exp(log_post), float(np.exp(log_post) @ conditional_mean)


@pytest.mark.parametrize(
    ("prior_factory", "shape", "rate"),
    [
        (DirichletProcessPrior, 2.0, 1.5),
        (lambda a: PitmanYorPrior(a, 0.3), 1.0, 0.5),
        (lambda a: FiniteDirichletPrior(a, 3), 3.0, 2.0),  # W depends on alpha: generic path
    ],
)
def test_random_concentration_quadrature_against_grid(prior_factory, shape, rate):
    family = FakeBetaBernoulli(0.5, 0.5)
    data = DATA[:5]
    result = exact_posterior_random_concentration(prior_factory, (shape, rate), family, data)
    grid_prob, grid_mean = _grid_posterior_random_concentration(prior_factory, shape, rate,
                                                                family, data)
    np.testing.assert_allclose(result.prob, grid_prob, rtol=1e-6, atol=1e-12)
    assert result.concentration_mean == pytest.approx(grid_mean, rel=1e-6)
    assert result.prob.sum() == pytest.approx(1.0)
    assert result.concentration_variance > 0


def test_random_concentration_without_data_returns_prior_moments():
    result = exact_posterior_random_concentration(DirichletProcessPrior, (3.0, 2.0), n=6)
    assert result.concentration_mean == pytest.approx(1.5, rel=1e-9)
    assert result.concentration_variance == pytest.approx(3.0 / 4.0, rel=1e-8)
    with pytest.raises(ValueError):
        exact_posterior_random_concentration(DirichletProcessPrior, (0.0, 1.0), n=3)
    with pytest.raises(ValueError):
        exact_posterior_random_concentration(DirichletProcessPrior, (1.0, 1.0))


def test_mfm_exact_prior_and_posterior_are_normalised():
    prior = MixtureOfFiniteMixturesPrior(1.0, Geometric(0.4))
    assert abs(exact_prior(prior, 7).log_evidence) < 1e-10
    exact = exact_posterior(prior, FakeBetaBernoulli(), DATA)
    assert exact.prob.sum() == pytest.approx(1.0)
    assert exact.partitions.shape == (877, 7)
