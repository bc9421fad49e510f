"""Family-specific tests of the conjugate component families (components/).

The generic checks every registered family passes (numba core against the module's
numpy/scipy references, pytensor graph, samplers, validation) are in
``tests/test_family_contract.py``.  Here every log marginal likelihood is compared with a
computation that does not share its algebra: the candidate's (Besag) identity
p(x) = p(x | theta) p(theta) / p(theta | x) with scipy densities, a joint Gaussian density,
or numerical integration; plus the Normal-Inverse-Wishart downdate and the hyperparameter
and data validation of each family.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, special, stats

from pymc_splitmerge.components import (
    BetaBernoulli,
    ComponentFamily,
    DirichletCategorical,
    GammaPoisson,
    GridComponent,
    NormalInverseGamma,
    NormalInverseWishart,
    NormalKnownCovariance,
)
from pymc_splitmerge.components import beta_bernoulli as beta_bernoulli_module
from pymc_splitmerge.components import normal_inverse_wishart as niw_module


def _spd(rng, dim):
    a = rng.normal(size=(dim, dim))
    return a @ a.T + dim * np.eye(dim)


# ------------------------------------------------------------------ independent checks
def _niw_log_density(mu, sigma, mean, kappa, nu, psi):
    return (stats.multivariate_normal(mean, sigma / kappa).logpdf(mu)
            + stats.invwishart(df=nu, scale=psi).logpdf(sigma))


@pytest.mark.parametrize("dim", [1, 2, 4])
def test_niw_candidate_identity(dim):
    """Besag's identity with scipy normal / inverse-Wishart densities (shares no algebra)."""
    rng = np.random.default_rng(dim)
    mu0, kappa0, nu0, psi0 = rng.normal(size=dim), 0.8, dim + 1.2, _spd(rng, dim)
    family = NormalInverseWishart(mu0=mu0, kappa0=kappa0, nu0=nu0, psi0=psi0)
    x = family.prepare_data(rng.normal(size=(7, dim)) * 1.5 + 2.0)
    n = len(x)
    kappa, nu = kappa0 + n, nu0 + n
    mean = (kappa0 * mu0 + x.sum(0)) / kappa
    xbar = x.mean(0)
    psi = psi0 + (x - xbar).T @ (x - xbar) + kappa0 * n / kappa * np.outer(xbar - mu0, xbar - mu0)
    mu_star, sigma_star = rng.normal(size=dim), _spd(rng, dim) / dim
    log_likelihood = stats.multivariate_normal(mu_star, sigma_star).logpdf(x).sum()
    expected = (log_likelihood + _niw_log_density(mu_star, sigma_star, mu0, kappa0, nu0, psi0)
                - _niw_log_density(mu_star, sigma_star, mean, kappa, nu, psi))
    assert np.isclose(family.log_marginal_of(x), expected, rtol=1e-9)


def test_niw_univariate_predictive_is_student_t():
    family = NormalInverseWishart(mu0=0.2, kappa0=2.0, nu0=3.0, psi0=1.5)
    x = family.prepare_data(np.array([0.3, -1.2, 2.2, 0.9]))
    assert x.shape == (4, 1)
    kappa, nu = 2.0 + 4, 3.0 + 4
    mean = (2.0 * 0.2 + x.sum()) / kappa
    psi = 1.5 + np.sum((x - x.mean()) ** 2) + 2.0 * 4 / kappa * (x.mean() - 0.2) ** 2
    scale = np.sqrt(psi * (kappa + 1) / (kappa * nu))
    expected = stats.t(df=nu, loc=mean, scale=scale).logpdf(0.7)
    assert np.isclose(family.log_predictive(np.array([0.7]), family.stats_of(x)), expected,
                      rtol=1e-10)


def test_normal_known_covariance_one_dimensional_integration():
    mu0, sigma0, sigma = 0.4, 1.7, 0.6
    family = NormalKnownCovariance(mu0=mu0, sigma0=sigma0, sigma=sigma)
    x = family.prepare_data([0.1, 1.3, 0.8])

    def integrand(mu):
        return np.exp(stats.norm(mu, np.sqrt(sigma)).logpdf(x[:, 0]).sum()
                      + stats.norm(mu0, np.sqrt(sigma0)).logpdf(mu))

    value, _ = integrate.quad(integrand, -np.inf, np.inf, epsabs=0, epsrel=1e-12)
    assert np.isclose(family.log_marginal_of(x), np.log(value), rtol=1e-8)


def test_normal_inverse_gamma_candidate_identity():
    rng = np.random.default_rng(3)
    mu0, kappa0, alpha0, beta0 = 1.0, 0.4, 2.0, 1.5
    family = NormalInverseGamma(mu0=mu0, kappa0=kappa0, alpha0=alpha0, beta0=beta0)
    x = family.prepare_data(rng.normal(3.0, 2.0, size=8))[:, 0]
    n = len(x)
    kappa, alpha = kappa0 + n, alpha0 + n / 2
    mean = (kappa0 * mu0 + x.sum()) / kappa
    beta = beta0 + 0.5 * np.sum((x - x.mean()) ** 2) + kappa0 * n * (x.mean() - mu0) ** 2 / (
        2 * kappa)
    mu_star, variance_star = 2.1, 3.3

    def log_prior(m, k, a, b):
        return (stats.norm(m, np.sqrt(variance_star / k)).logpdf(mu_star)
                + stats.invgamma(a, scale=b).logpdf(variance_star))

    expected = (stats.norm(mu_star, np.sqrt(variance_star)).logpdf(x).sum()
                + log_prior(mu0, kappa0, alpha0, beta0) - log_prior(mean, kappa, alpha, beta))
    assert np.isclose(family.log_marginal_of(x[:, None]), expected, rtol=1e-10)


def test_beta_bernoulli_numerical_integration():
    family = BetaBernoulli(a=[0.7, 2.0], b=[1.3, 0.5])
    x = family.prepare_data(np.array([[1, 0], [1, 1], [0, 1], [1, 1]], dtype=bool))
    expected = 0.0
    for j, (a, b) in enumerate(zip([0.7, 2.0], [1.3, 0.5])):
        ones, prior = x[:, j].sum(), stats.beta(a, b)

        def integrand(t, ones=ones, prior=prior):
            return t ** ones * (1 - t) ** (len(x) - ones) * prior.pdf(t)

        value, _ = integrate.quad(integrand, 0, 1, epsabs=0, epsrel=1e-12, limit=200)
        expected += np.log(value)
    assert np.isclose(family.log_marginal_of(x), expected, rtol=1e-8)


def test_dirichlet_categorical_candidate_identity():
    rng = np.random.default_rng(5)
    alphas = [np.array([0.5, 1.5, 2.0]), np.array([1.0, 0.3])]
    family = DirichletCategorical([list(a) for a in alphas], [3, 2])
    x = family.prepare_data(np.column_stack([rng.integers(0, 3, 12), rng.integers(0, 2, 12)]))
    expected = 0.0
    for j, alpha in enumerate(alphas):
        counts = np.bincount(x[:, j].astype(int), minlength=len(alpha))
        p_star = rng.dirichlet(np.ones(len(alpha)))
        expected += (np.sum(counts * np.log(p_star)) + stats.dirichlet(alpha).logpdf(p_star)
                     - stats.dirichlet(alpha + counts).logpdf(p_star))
    assert np.isclose(family.log_marginal_of(x), expected, rtol=1e-10)


def test_gamma_poisson_numerical_integration_and_rate_convention():
    shape, rate = 2.5, 4.0
    family = GammaPoisson(shape=shape, rate=rate)
    x = family.prepare_data(np.array([0, 3, 1, 2, 0]))

    def integrand(lam):
        return np.exp(stats.poisson(lam).logpmf(x[:, 0]).sum()
                      + stats.gamma(shape, scale=1.0 / rate).logpdf(lam))

    value, _ = integrate.quad(integrand, 0, np.inf, epsabs=0, epsrel=1e-12, limit=200)
    assert np.isclose(family.log_marginal_of(x), np.log(value), rtol=1e-8)
    predictive = stats.nbinom(shape + x.sum(), (rate + 5) / (rate + 6)).logpmf(4)
    assert np.isclose(family.log_predictive([4.0], family.stats_of(x)), predictive, rtol=1e-10)


def test_grid_brute_force_and_normalisation():
    phi = np.linspace(0.05, 0.95, 10)
    log_prior_unnormalised = np.log(np.arange(1, 11.0)) + 3.0
    log_prior_unnormalised[2] = -np.inf
    family = GridComponent(log_prior_unnormalised)
    reads, depth = np.array([3, 5, 1]), np.array([10, 12, 9])
    likelihood = stats.binom.pmf(reads[:, None], depth[:, None], phi[None, :])
    x = family.prepare_data(np.log(likelihood))
    prior = np.exp(log_prior_unnormalised)
    prior /= prior.sum()
    expected = np.log(np.sum(prior * np.prod(likelihood, axis=0)))
    assert np.isclose(family.log_marginal_of(x), expected, rtol=1e-12)
    assert np.isclose(special.logsumexp(family.params[1:]), 0.0, atol=1e-14)


# ------------------------------------------------------------------ NIW downdate
@pytest.mark.parametrize("dim", [4, 16, 17])
def test_niw_inverse_factor_update_matches_numpy(dim):
    """Rank-1 update and downdate of the inverse factor, in its row-major (D != 16) and
    column-major (D = 16) layouts."""
    rng = np.random.default_rng(0)
    column_major = dim == niw_module.COLUMN_MAJOR_DIM

    def pack(matrix):
        return (matrix.T if column_major else matrix).ravel().copy()

    def unpack(flat):
        return flat.reshape(dim, dim).T if column_major else flat.reshape(dim, dim)

    psi0 = _spd(rng, dim)
    bound = 0.5 * np.diag(np.linalg.cholesky(psi0)) ** 2
    scratch = np.empty(dim)
    matrix = psi0 + 5 * np.outer(*(2 * [rng.normal(size=dim)]))
    vector = rng.normal(size=dim)
    inverse = pack(np.linalg.inv(np.linalg.cholesky(matrix)))
    assert niw_module.niw_inverse_factor_update(inverse, vector, dim, 1.0, bound, scratch)
    expected = np.linalg.inv(np.linalg.cholesky(matrix + np.outer(vector, vector)))
    np.testing.assert_allclose(unpack(inverse), expected, rtol=1e-10, atol=1e-12)
    # and back down (downdate)
    assert niw_module.niw_inverse_factor_update(inverse, vector, dim, -1.0, bound, scratch)
    expected = np.linalg.inv(np.linalg.cholesky(matrix))
    np.testing.assert_allclose(unpack(inverse), expected, rtol=1e-10, atol=1e-12)
    # a downdate that would go below psi0 is refused
    chol0 = np.linalg.cholesky(psi0)
    inverse = pack(np.linalg.inv(chol0))
    assert not niw_module.niw_inverse_factor_update(inverse, 2 * chol0[:, 0].copy(), dim, -1.0,
                                                    bound, scratch)


def test_niw_remove_falls_back_on_nearly_degenerate_cluster():
    """Points close to a line plus a far outlier across it: removing the outlier is a
    downdate that cancels ~all digits of the second pivot, so the factor is recomputed."""
    rng = np.random.default_rng(1)
    family = NormalInverseWishart(mu0=[0.0, 0.0], kappa0=1e-3, nu0=2.0, psi0=1e-9 * np.eye(2))
    t = rng.normal(size=10)
    raw = np.column_stack([t, 2.0 * t + 1e-1 * rng.normal(size=10)])
    raw = np.vstack([raw, [[0.0, 1e3]]])
    x = family.prepare_data(raw)
    row = family.stats_of(x)
    factor_offset = 1 + 2 + 4 + 2  # [n, sum_x, sum_xxT, mu_n, W, c_n, e_n, r_n, updates]
    used_fallback = []
    for keep in range(len(x) - 1, 2, -1):
        used_fallback.append(niw_module.niw_remove_point(family.params, row, x[keep]))
        _, _, _, mean, psi = niw_module._posterior(family, x[:keep])
        inverse = row[factor_offset:factor_offset + 4].reshape(2, 2)
        np.testing.assert_allclose(row[factor_offset - 2:factor_offset], mean, rtol=1e-8,
                                   atol=1e-10)
        assert np.all(np.diag(inverse) > 0) and inverse[0, 1] == 0.0
        chol = np.linalg.inv(inverse)
        np.testing.assert_allclose(chol @ chol.T, psi, rtol=1e-7, atol=1e-9)
        assert np.isclose(family.log_marginal(row),
                          niw_module.reference_log_marginal(family, x[:keep]), rtol=1e-6)
        assert np.isclose(family.log_predictive(x[0], row),
                          niw_module.reference_log_predictive(family, x[0], x[:keep]), rtol=1e-6)
    assert used_fallback[0]  # the outlier's removal
    assert not all(used_fallback)  # ordinary removals keep the O(D^2) downdate


# ------------------------------------------------------------------ hyperparameters
class _Symbol:
    """Stands for a symbolic (e.g. pytensor) hyperparameter."""

    def __repr__(self):
        return "alpha_symbol"


def test_symbolic_hyperparameters_and_with_values():
    family = BetaBernoulli(a=_Symbol(), b=2.0)
    assert not family.is_numeric
    assert "alpha_symbol" in repr(family)
    with pytest.raises(ValueError, match="symbolic"):
        _ = family.params
    x = family.prepare_data(np.array([[0, 1, 1], [1, 1, 0]]))
    assert family.data_dim == 3
    numeric = family.with_values(a=0.5)
    assert numeric.is_numeric and isinstance(numeric, BetaBernoulli)
    assert numeric.params.shape == (10,) and numeric.stat_dim == 11
    assert np.isclose(numeric.log_marginal_of(x),
                      beta_bernoulli_module.reference_log_marginal(numeric, x), rtol=1e-12)
    with pytest.raises(ValueError, match="'a'"):
        family.with_values(a=-1.0)
    with pytest.raises(ValueError, match="numeric"):
        family.with_values(b=3.0)
    with pytest.raises(TypeError, match="unknown"):
        family.with_values(c=1.0)
    assert family.hyperparameter_names == ("a", "b")
    assert isinstance(family, ComponentFamily)


def test_data_dimension_binding():
    family = GammaPoisson(shape=1.0, rate=1.0)
    assert family.data_dim is None
    with pytest.raises(ValueError, match="prepare_data"):
        _ = family.empty_stats
    family.prepare_data(np.zeros((3, 4)))
    assert family.stat_dim == 11
    with pytest.raises(ValueError, match="4 entries"):
        family.prepare_data(np.zeros((3, 5)))
    assert family.with_values(rate=2.0).data_dim == 4
    assert "shape=1.0" in repr(family)


@pytest.mark.parametrize(
    ("factory", "name"),
    [
        (lambda: NormalInverseWishart(kappa0=0.0), "kappa0"),
        (lambda: NormalInverseWishart(nu0=1.0, psi0=np.eye(3)), "nu0"),
        (lambda: NormalInverseWishart(psi0=np.array([[1.0, 2.0], [2.0, 1.0]])), "psi0"),
        (lambda: NormalInverseWishart(psi0=np.array([[1.0, 0.5], [0.0, 1.0]])), "psi0"),
        (lambda: NormalInverseWishart(psi0=-1.0), "psi0"),
        (lambda: NormalInverseWishart(mu0=np.zeros(3), psi0=np.eye(2)), "mu0"),
        (lambda: NormalInverseWishart(kappa0=np.nan), "kappa0"),
        (lambda: NormalKnownCovariance(sigma=np.array([[1.0, 3.0], [3.0, 1.0]])), "sigma"),
        (lambda: NormalKnownCovariance(sigma0=0.0), "sigma0"),
        (lambda: NormalKnownCovariance(mu0=np.zeros(2), sigma=np.eye(3)), "mismatched"),
        (lambda: NormalInverseGamma(kappa0=-1.0), "kappa0"),
        (lambda: NormalInverseGamma(alpha0=0.0), "alpha0"),
        (lambda: NormalInverseGamma(beta0=-2.0), "beta0"),
        (lambda: NormalInverseGamma(mu0=[0.0, 1.0]), "mu0"),
        (lambda: BetaBernoulli(a=0.0), "'a'"),
        (lambda: BetaBernoulli(b=[1.0, -1.0]), "'b'"),
        (lambda: BetaBernoulli(a=[1.0, 2.0], b=[1.0, 2.0, 3.0]), "lengths"),
        (lambda: DirichletCategorical(concentration=0.0, n_categories=3), "concentration"),
        (lambda: DirichletCategorical(concentration=1.0, n_categories=0), "n_categories"),
        (lambda: DirichletCategorical(concentration=1.0, n_categories=2.5), "n_categories"),
        (lambda: DirichletCategorical(concentration=[[1.0, 1.0]], n_categories=3),
         "n_categories"),
        (lambda: DirichletCategorical(concentration=[1.0, 2.0], n_categories=[2, 2, 2]),
         "n_categories"),
        (lambda: GammaPoisson(shape=0.0), "shape"),
        (lambda: GammaPoisson(rate=-1.0), "rate"),
        (lambda: GridComponent(np.zeros((2, 2))), "log_prior_grid"),
        (lambda: GridComponent([0.0, np.nan]), "log_prior_grid"),
        (lambda: GridComponent([-np.inf, -np.inf]), "log_prior_grid"),
    ],
)
def test_bad_hyperparameters(factory, name):
    with pytest.raises(ValueError, match=name):
        factory()


def test_nu0_checked_when_dimension_bound_by_data():
    family = NormalInverseWishart(nu0=1.5)
    with pytest.raises(ValueError, match="nu0"):
        family.prepare_data(np.zeros((2, 3)))
    assert family.data_dim is None  # a failed binding leaves the family unbound
    assert family.prepare_data(np.zeros(2)).shape == (2, 1)


@pytest.mark.parametrize(
    ("family", "data", "error", "match"),
    [
        (NormalInverseWishart(psi0=np.eye(2)), [[0.0, np.nan]], ValueError, "NaN"),
        (NormalInverseWishart(psi0=np.eye(2)), [[0.0, np.inf]], ValueError, "infinite"),
        (NormalInverseWishart(psi0=np.eye(2)), np.zeros((3, 3)), ValueError,
         "hyperparameter 'psi0' gives dimension 2"),
        (NormalInverseWishart(psi0=np.eye(2)), np.zeros(3), ValueError, "shape"),
        (NormalInverseWishart(psi0=np.eye(2)), np.zeros((2, 2, 2)), ValueError, "2-D"),
        (NormalInverseWishart(psi0=np.eye(2)), np.array([["a", "b"]]), TypeError, "numeric"),
        (NormalKnownCovariance(), np.zeros((2, 2), dtype=complex), TypeError, "numeric"),
        (NormalInverseGamma(), np.zeros((4, 2)), ValueError, "must have 1 entries"),
        (BetaBernoulli(a=[1.0, 1.0]), [[0, 2]], ValueError, "binary"),
        (BetaBernoulli(a=[1.0, 1.0]), [[0, 0.5]], ValueError, "binary"),
        (DirichletCategorical(1.0, [2, 3]), [[0, 3]], ValueError, "< 3"),
        (DirichletCategorical(1.0, [2, 3]), [[-1, 0]], ValueError, "category codes"),
        (DirichletCategorical(1.0, [2, 3]), [[0.5, 0]], ValueError, "category codes"),
        (GammaPoisson(shape=[1.0]), [[-1.0]], ValueError, "non-negative integer"),
        (GammaPoisson(shape=[1.0]), [[1.5]], ValueError, "non-negative integer"),
        (GridComponent(np.zeros(3)), [[0.0, -np.inf, 0.0]], ValueError, "infinite"),
        (GridComponent(np.zeros(3)), [[0.0, 0.0]], ValueError,
         "hyperparameter 'log_prior_grid' gives dimension 3"),
    ],
)
def test_bad_data(family, data, error, match):
    with pytest.raises(error, match=match):
        family.prepare_data(np.asarray(data))


def test_boolean_binary_data_accepted():
    family = BetaBernoulli()
    x = family.prepare_data(np.array([[True, False], [True, True]]))
    assert x.dtype == np.float64 and family.data_dim == 2


def test_string_hyperparameter_rejected():
    with pytest.raises(TypeError, match="kappa0"):
        NormalInverseWishart(kappa0="1")


def test_positive_hyperparameter_message_shows_the_number():
    # the message prints the number, not the NumPy repr ("got array(-1.)")
    with pytest.raises(ValueError, match=r"'a' must be > 0, got -1\.0$"):
        BetaBernoulli(a=-1.0, b=1.0)
    with pytest.raises(ValueError, match=r"'b' must be > 0, got \[1\.0, -2\.0\]$"):
        BetaBernoulli(a=1.0, b=np.array([1.0, -2.0]))
