"""Geweke (2004) joint-distribution tests of the partition kernels, and of the harness itself.

The harness's pieces are checked against independent computations first (the data simulators
against the families' exact marginal / predictive laws, the vectorised urn against the exact
prior by enumeration, the batch-means standard error against an AR(1) chain's known variance).
Then each kernel must pass :func:`geweke_test`, and two deliberately broken kernels (the
Escobar–West update with the Gamma rate used as a scale; a Gibbs sweep that never opens more
clusters than it starts with) must be rejected by the same test.
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np
import pytest
from scipy import stats

from pymc_splitmerge.components import (
    BetaBernoulli,
    GridComponent,
    NormalInverseGamma,
    NormalInverseWishart,
)
from pymc_splitmerge.kernels.gibbs import gibbs_sweep
from pymc_splitmerge.kernels.pgsm import pgsm_move
from pymc_splitmerge.kernels.sams import sams_move
from pymc_splitmerge.priors import DirichletProcessPrior, PitmanYorPrior
from pymc_splitmerge.testing import GOF_PVALUE_THRESHOLD, assert_partition_gof, exact_prior
from pymc_splitmerge.testing.geweke import (
    GEWEKE_TEST_FUNCTIONS,
    GewekeResult,
    assert_geweke,
    batch_means_standard_error,
    geweke_test,
    sample_prior_partitions,
    simulate_data,
)

BINARY_FAMILY = BetaBernoulli(np.full(3, 0.8), np.full(3, 1.2))


# ------------------------------------------------------------------ the harness's pieces


def test_beta_bernoulli_simulator_matches_exact_marginal():
    """All 2**(3*2) data sets of 3 points x 2 attributes, labels [0, 0, 1]: χ² vs the family."""
    family = BetaBernoulli(np.array([0.7, 2.0]), np.array([1.5, 0.6]))
    labels = np.array([0, 0, 1])
    rng = np.random.default_rng(11)
    num = 6000
    codes = np.empty(num, dtype=np.int64)
    weights = 2 ** np.arange(6)
    for t in range(num):
        codes[t] = int(simulate_data(family, labels, rng).ravel() @ weights)
    counts = np.bincount(codes, minlength=64)
    probabilities = np.empty(64)
    for code in range(64):
        x = ((code >> np.arange(6)) & 1).astype(float).reshape(3, 2)
        log_probability = family.log_marginal_of(x[:2]) + family.log_marginal_of(x[2:])
        probabilities[code] = math.exp(log_probability)
    assert probabilities.sum() == pytest.approx(1.0, abs=1e-12)
    pvalue = stats.chisquare(counts, num * probabilities).pvalue
    assert pvalue > GOF_PVALUE_THRESHOLD


def _student_t_cdf(value, mu0, kappa0, alpha0, beta0, points):
    """Predictive CDF of the univariate Normal-Inverse-Gamma model (textbook update)."""
    n = len(points)
    mean = float(np.mean(points)) if n else 0.0
    scatter = float(np.sum((np.asarray(points) - mean) ** 2))
    kappa_n, alpha_n = kappa0 + n, alpha0 + n / 2
    mu_n = (kappa0 * mu0 + n * mean) / kappa_n
    beta_n = beta0 + scatter / 2 + kappa0 * n * (mean - mu0) ** 2 / (2 * kappa_n)
    scale = math.sqrt(beta_n * (kappa_n + 1) / (alpha_n * kappa_n))
    return stats.t.cdf(value, 2 * alpha_n, loc=mu_n, scale=scale)


@pytest.mark.parametrize("family", [
    NormalInverseGamma(mu0=0.5, kappa0=0.7, alpha0=1.5, beta0=2.0),
    # the same model written as NIW in dimension 1: nu0 = 2 alpha0, psi0 = 2 beta0
    NormalInverseWishart(mu0=np.array([0.5]), kappa0=0.7, nu0=3.0, psi0=np.array([[4.0]])),
])
def test_normal_simulators_probability_integral_transform(family):
    """(x1, x2) in one cluster: F(x1) and F(x2 | x1) must be i.i.d. Uniform(0, 1)."""
    rng = np.random.default_rng(12)
    uniforms = []
    for _ in range(1500):
        x = simulate_data(family, np.array([0, 0]), rng, data_dim=1)[:, 0]
        uniforms.append(_student_t_cdf(x[0], 0.5, 0.7, 1.5, 2.0, []))
        uniforms.append(_student_t_cdf(x[1], 0.5, 0.7, 1.5, 2.0, [x[0]]))
    assert stats.kstest(uniforms, "uniform").pvalue > GOF_PVALUE_THRESHOLD


def test_normal_inverse_wishart_simulator_marginal_in_two_dimensions():
    """Prior predictive of one point: each coordinate is Student t(nu0 - D + 1)."""
    psi0 = np.array([[2.0, 0.6], [0.6, 1.0]])
    mu0, kappa0, nu0 = np.array([1.0, -1.0]), 2.0, 4.5
    family = NormalInverseWishart(mu0=mu0, kappa0=kappa0, nu0=nu0, psi0=psi0)
    rng = np.random.default_rng(13)
    x = np.array([simulate_data(family, np.array([0]), rng)[0] for _ in range(3000)])
    dof = nu0 - 2 + 1
    shape = psi0 * (kappa0 + 1) / (kappa0 * dof)
    for d in range(2):
        pvalue = stats.kstest(x[:, d], stats.t(dof, loc=mu0[d], scale=math.sqrt(shape[d, d])).cdf)
        assert pvalue.pvalue > GOF_PVALUE_THRESHOLD
    # the family's own predictive density agrees with the textbook multivariate t
    empty = family.empty_stats
    for row in x[:5]:
        expected = stats.multivariate_t(mu0, shape, df=dof).logpdf(row)
        assert family.log_predictive(row, empty) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("prior", [DirichletProcessPrior(0.7), PitmanYorPrior(0.5, 0.3),
                                   PitmanYorPrior(-0.2, 0.4)])
def test_vectorised_urn_matches_exact_prior(prior):
    rng = np.random.default_rng(14)
    if isinstance(prior, PitmanYorPrior):
        def factory(alpha):
            return PitmanYorPrior(alpha, prior.discount)
    else:
        factory = DirichletProcessPrior
    labels = sample_prior_partitions(factory, np.full(20000, prior.alpha), 5, rng)
    assert_partition_gof(labels, exact_prior(prior, 5))


def test_batch_means_standard_error_on_autoregressive_chain():
    """AR(1) with coefficient rho: var(mean) ≈ sigma² (1 + rho) / ((1 - rho) N)."""
    rng = np.random.default_rng(15)
    rho, num = 0.8, 40000
    innovations = rng.standard_normal(num)
    chain = np.empty(num)
    chain[0] = innovations[0] / math.sqrt(1 - rho**2)
    for t in range(1, num):
        chain[t] = rho * chain[t - 1] + innovations[t]
    standard_error, ess, dof = batch_means_standard_error(chain, 200)
    expected = math.sqrt((1 + rho) / ((1 - rho) * num) / (1 - rho**2))
    # the batch-means variance has 199 degrees of freedom: a chi-square interval
    ratio = (standard_error / expected) ** 2 * dof
    assert stats.chi2.ppf(1e-4, dof) < ratio < stats.chi2.ppf(1 - 1e-4, dof)
    assert ess == pytest.approx(num * (1 - rho) / (1 + rho), rel=0.3)
    assert dof == 199


def test_bad_inputs_raise_clear_errors():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="data_dim"):
        simulate_data(BetaBernoulli(1.0, 1.0), np.array([0, 1]), rng)
    with pytest.raises(TypeError, match="register_data_simulator"):
        simulate_data(GridComponent(np.zeros(3)), np.array([0, 1]), rng)
    with pytest.raises(TypeError, match="Generator"):
        geweke_test(gibbs_sweep, DirichletProcessPrior, BINARY_FAMILY, 6, 100, 0)
    with pytest.raises(ValueError, match="n_samples"):
        geweke_test(gibbs_sweep, DirichletProcessPrior, BINARY_FAMILY, 6, 10, rng)
    with pytest.raises(ValueError, match="Dirichlet-process"):
        geweke_test(gibbs_sweep, lambda a: PitmanYorPrior(a, 0.2), BINARY_FAMILY, 6, 100, rng)
    with pytest.raises(ValueError, match="alpha_prior"):
        geweke_test(gibbs_sweep, DirichletProcessPrior, BINARY_FAMILY, 6, 100, rng,
                    alpha_prior=(1.0, -1.0))
    with pytest.raises(TypeError, match="GewekeResult"):
        assert_geweke("not a result")


# ------------------------------------------------------------------ kernels that must pass


def _check_result(result: GewekeResult, random_alpha: bool):
    expected = [g for g in GEWEKE_TEST_FUNCTIONS if random_alpha or g != "alpha"]
    assert list(result.names) == expected
    assert result.per_function_threshold == pytest.approx(GOF_PVALUE_THRESHOLD / len(expected))
    assert np.all(result.effective_sample_size > 100), result.table()  # the chain mixes
    assert_geweke(result)


@pytest.mark.parametrize("n", [8, 10])
def test_gibbs_with_escobar_west_concentration(n):
    result = geweke_test(gibbs_sweep, DirichletProcessPrior, BINARY_FAMILY, n, 3000,
                         np.random.default_rng(100 + n), alpha_prior=(2.0, 2.0))
    _check_result(result, random_alpha=True)


def test_gibbs_with_normal_inverse_wishart_data():
    family = NormalInverseWishart(mu0=np.zeros(2), kappa0=0.5, nu0=4.0, psi0=np.eye(2))
    result = geweke_test(gibbs_sweep, DirichletProcessPrior, family, 8, 2000,
                         np.random.default_rng(200), alpha_prior=(2.0, 2.0))
    _check_result(result, random_alpha=True)


def test_sams_alone():
    result = geweke_test(sams_move, DirichletProcessPrior, BINARY_FAMILY, 8, 3000,
                         np.random.default_rng(300), alpha_prior=None, concentration=1.0)
    _check_result(result, random_alpha=False)


def test_pgsm_alone():
    kernel = partial(pgsm_move, num_particles=10)
    result = geweke_test(kernel, DirichletProcessPrior, BINARY_FAMILY, 8, 3000,
                         np.random.default_rng(400), alpha_prior=None, concentration=1.0)
    _check_result(result, random_alpha=False)


# ------------------------------------------------------------------ negative controls


def _escobar_west_rate_as_scale(alpha, sizes, rng, shape=2.0, rate=2.0):
    """Escobar–West with the posterior Gamma *rate* passed to numpy as the scale (a bug)."""
    n, n_clusters = int(sizes.sum()), int(np.count_nonzero(sizes))
    eta = rng.beta(alpha + 1.0, n)
    posterior_rate = rate - math.log(eta)
    odds = (shape + n_clusters - 1.0) / (n * posterior_rate)
    larger = rng.random() * (1.0 + odds) < odds
    return rng.gamma(shape + n_clusters - (0.0 if larger else 1.0), posterior_rate)


def _gibbs_without_new_clusters(state, log_v_table, log_w_table, rng):
    """Gibbs sweep that never opens more clusters than it starts with (a bug)."""
    capped = log_v_table.copy()
    capped[state.n_clusters + 1:] = -np.inf
    return gibbs_sweep(state, capped, log_w_table, rng)


def test_rejects_escobar_west_with_rate_as_scale():
    result = geweke_test(gibbs_sweep, DirichletProcessPrior, BINARY_FAMILY, 8, 1000,
                         np.random.default_rng(500), alpha_prior=(2.0, 2.0),
                         concentration_update=_escobar_west_rate_as_scale)
    assert not result.passed, result.table()
    alpha_row = result.names.index("alpha")
    assert result.pvalues[alpha_row] < result.per_function_threshold
    with pytest.raises(AssertionError, match="Geweke"):
        assert_geweke(result)


def test_rejects_gibbs_sweep_without_new_cluster_option():
    result = geweke_test(_gibbs_without_new_clusters, DirichletProcessPrior, BINARY_FAMILY, 8,
                         1000, np.random.default_rng(600), alpha_prior=None)
    assert not result.passed, result.table()
    k_row = result.names.index("n_clusters")
    assert result.successive_mean[k_row] < result.marginal_mean[k_row]
    with pytest.raises(AssertionError, match="Geweke"):
        assert_geweke(result)
