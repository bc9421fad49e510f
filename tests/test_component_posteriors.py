"""Posterior (and prior) parameter samplers of every family, and posterior predictive draws.

Each family's ``sample_parameters(rng, x)`` is checked against the closed-form moments of the
conjugate posterior given the cluster's rows ``x``; the negative control draws from the prior
(``x`` omitted) and must fail the same check.  Then ``pm.sample_posterior_predictive`` on a
``ConjugateMixture`` model must give replicates with the exact posterior predictive moments of
each cluster (given the draw's partition and hyperparameters), and
``pm.sample_prior_predictive`` the prior ones.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest
import xarray as xr
from moment_checks import assert_expectations
from scipy import special

import pymc_splitmerge as psm
from pymc_splitmerge.distributions.mixture import sample_clusters

NUM_DRAWS = 4000


def _normal_inverse_wishart():
    family = psm.NormalInverseWishart(mu0=[0.0, 1.0], kappa0=0.5, nu0=5.0,
                                      psi0=[[1.0, 0.3], [0.3, 2.0]])
    x = np.array([[2.0, 3.0], [2.5, 2.0], [1.5, 3.5], [3.0, 2.5], [2.2, 2.9]])
    n, dim = x.shape
    kappa, nu = 0.5 + n, 5.0 + n
    mu_n = (0.5 * np.array([0.0, 1.0]) + x.sum(0)) / kappa
    xbar = x.mean(0)
    psi_n = (np.array([[1.0, 0.3], [0.3, 2.0]]) + (x - xbar).T @ (x - xbar)
             + 0.5 * n / kappa * np.outer(xbar - [0.0, 1.0], xbar - [0.0, 1.0]))
    mean_sigma = psi_n / (nu - dim - 1.0)

    def statistics(p):
        d = p["mean"] - mu_n
        return np.r_[p["mean"], d**2, p["covariance"].ravel()]

    exact = np.r_[mu_n, np.diag(mean_sigma) / kappa, mean_sigma.ravel()]
    return family, x, statistics, exact


def _normal_known_covariance():
    sigma, sigma0, mu0 = np.array([[1.0, 0.2], [0.2, 0.5]]), 4.0 * np.eye(2), np.zeros(2)
    family = psm.NormalKnownCovariance(mu0=mu0, sigma0=sigma0, sigma=sigma)
    x = np.array([[2.0, 3.0], [2.5, 2.0], [1.5, 3.5]])
    precision = np.linalg.inv(sigma0) + x.shape[0] * np.linalg.inv(sigma)
    covariance = np.linalg.inv(precision)
    mean = covariance @ (np.linalg.inv(sigma) @ x.sum(0))

    def statistics(p):
        d = p["mean"] - mean
        return np.r_[p["mean"], np.outer(d, d).ravel()]

    return family, x, statistics, np.r_[mean, covariance.ravel()]


def _normal_inverse_gamma():
    family = psm.NormalInverseGamma(mu0=0.0, kappa0=2.0, alpha0=3.0, beta0=2.0)
    x = np.array([[4.0], [5.0], [3.5], [4.5]])
    n = 4
    kappa, alpha = 2.0 + n, 3.0 + n / 2
    mu_n = x.sum() / kappa
    beta = 2.0 + 0.5 * np.sum((x - x.mean()) ** 2) + 2.0 * n * x.mean() ** 2 / (2 * kappa)
    mean_variance = beta / (alpha - 1.0)

    def statistics(p):
        return np.r_[p["mean"], (p["mean"] - mu_n) ** 2, p["variance"]]

    return family, x, statistics, np.r_[mu_n, mean_variance / kappa, mean_variance]


def _beta_bernoulli():
    a, b = np.array([1.0, 2.0, 0.5]), np.array([1.0, 1.0, 3.0])
    family = psm.BetaBernoulli(a=a, b=b)
    x = np.array([[1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 1, 0]], dtype=float)
    n = x.shape[0]
    mean = (a + x.sum(0)) / (a + b + n)
    variance = mean * (1 - mean) / (a + b + n + 1)

    def statistics(p):
        return np.r_[p["probability"], (p["probability"] - mean) ** 2]

    return family, x, statistics, np.r_[mean, variance]


def _dirichlet_categorical():
    family = psm.DirichletCategorical(concentration=[[1.0, 2.0, 0.5], [1.0, 1.0]],
                                      n_categories=[3, 2])
    x = np.array([[0, 1], [2, 1], [2, 1], [2, 0]], dtype=float)
    counts = [np.bincount(x[:, 0].astype(int), minlength=3),
              np.bincount(x[:, 1].astype(int), minlength=2)]
    alphas = [np.array([1.0, 2.0, 0.5]), np.array([1.0, 1.0])]
    means = [(a + c) / (a.sum() + 4) for a, c in zip(alphas, counts)]

    def statistics(p):
        probabilities = p["probabilities"]
        assert np.isnan(probabilities[1, 2])
        return np.r_[probabilities[0], probabilities[1, :2]]

    return family, x, statistics, np.concatenate(means)


def _gamma_poisson():
    shape, rate = np.array([2.0, 0.5]), np.array([1.0, 3.0])
    family = psm.GammaPoisson(shape=shape, rate=rate)
    x = np.array([[3, 0], [5, 1], [4, 0]], dtype=float)
    mean = (shape + x.sum(0)) / (rate + 3)
    variance = (shape + x.sum(0)) / (rate + 3) ** 2

    def statistics(p):
        return np.r_[p["rate"], (p["rate"] - mean) ** 2]

    return family, x, statistics, np.r_[mean, variance]


def _grid():
    log_prior = np.log([0.5, 0.3, 0.2])
    family = psm.GridComponent(log_prior_grid=log_prior)
    x = np.array([[-1.0, -2.0, -0.5], [-0.2, -3.0, -0.1]])
    log_weights = log_prior + x.sum(0)
    weights = np.exp(log_weights - special.logsumexp(log_weights))

    def statistics(p):
        return (np.arange(3) == p["grid_index"]).astype(float)

    return family, x, statistics, weights


FAMILIES = {
    "NormalInverseWishart": _normal_inverse_wishart,
    "NormalKnownCovariance": _normal_known_covariance,
    "NormalInverseGamma": _normal_inverse_gamma,
    "BetaBernoulli": _beta_bernoulli,
    "DirichletCategorical": _dirichlet_categorical,
    "GammaPoisson": _gamma_poisson,
    "GridComponent": _grid,
}


@pytest.mark.parametrize("name", list(FAMILIES))
def test_posterior_parameter_moments(name):
    family, x, statistics, exact = FAMILIES[name]()
    x = family.prepare_data(x)
    rng = np.random.default_rng(2024)
    draws = np.array([statistics(family.sample_parameters(rng, x)) for _ in range(NUM_DRAWS)])
    assert_expectations(draws, exact, name)
    shapes = family.parameter_shapes()
    for key, value in family.sample_parameters(rng, x).items():
        assert np.shape(value) == shapes[key]


@pytest.mark.parametrize("name", list(FAMILIES))
def test_prior_parameters_fail_the_posterior_check(name):
    """Negative control: prior draws (the old posterior predictive) are rejected."""
    family, x, statistics, exact = FAMILIES[name]()
    family.prepare_data(x)
    rng = np.random.default_rng(2025)
    draws = np.array([statistics(family.sample_parameters(rng)) for _ in range(NUM_DRAWS)])
    with pytest.raises(AssertionError, match="differ from the exact"):
        assert_expectations(draws, exact, name)


def test_grid_component_has_no_observation_sampler():
    family = psm.GridComponent(log_prior_grid=np.zeros(3))
    parameters = family.sample_parameters(np.random.default_rng(0))
    with pytest.raises(NotImplementedError, match="not available for GridComponent"):
        family.sample_observations(np.random.default_rng(0), parameters, 2)


# ----------------------------------------------------------------- through PyMC
Y = np.array([3.1, 2.8, 3.3, 2.9, -3.0, -2.7, -3.2, -1.0])
LABELS = np.array([0, 0, 0, 0, 1, 1, 1, 2])
SIGMA0, SIGMA = 4.0, 1.0
NUM_PREDICTIVE = 1500


def _model():
    with pm.Model() as model:
        mu0 = pm.Normal("mu0", 0.0, 1.0)
        z = psm.DirichletProcess("z", alpha=1.0, n=Y.shape[0])
        psm.ConjugateMixture("y", partition=z, observed=Y,
                             component=psm.NormalKnownCovariance(mu0=mu0, sigma0=SIGMA0,
                                                                 sigma=SIGMA))
    return model


def _standardised_cluster_means(replicates, mu0_values, use_data=True):
    """Per draw and cluster: (replicate cluster mean - exact mean) / exact sd, exact posterior
    predictive of the cluster mean given the draw's mu0 (or the prior's when not use_data)."""
    out = []
    for label in np.unique(LABELS):
        rows = LABELS == label
        m = rows.sum()
        count, total = (m, Y[rows].sum()) if use_data else (0, 0.0)
        variance = 1.0 / (1.0 / SIGMA0 + count / SIGMA)
        mean = variance * (mu0_values / SIGMA0 + total / SIGMA)
        residual = (replicates[:, rows].mean(axis=1) - mean) / np.sqrt(variance + SIGMA / m)
        out.append(np.c_[residual, residual**2])
    return np.hstack(out)


def _posterior_dataset():
    mu0 = np.where(np.arange(NUM_PREDICTIVE) % 2 == 0, -1.0, 2.0)  # that draw's hyperparameter
    labels = np.broadcast_to(LABELS, (1, NUM_PREDICTIVE, LABELS.shape[0])).copy()
    return xr.Dataset({"z": (("chain", "draw", "z_dim_0"), labels),
                       "mu0": (("chain", "draw"), mu0[None])}), mu0


def test_pm_sample_posterior_predictive_draws_cluster_parameters_from_posterior():
    model = _model()
    posterior, mu0 = _posterior_dataset()
    with model:
        result = pm.sample_posterior_predictive(posterior, progressbar=False, random_seed=3)
    replicates = np.asarray(result["posterior_predictive"]["y"]).reshape(NUM_PREDICTIVE, -1)
    exact = np.tile([0.0, 1.0], 3)
    assert_expectations(_standardised_cluster_means(replicates, mu0), exact, "posterior")
    # negative control: replicates from the prior parameters (the former behaviour)
    rng = np.random.default_rng(4)
    family = psm.NormalKnownCovariance(mu0=0.0, sigma0=SIGMA0, sigma=SIGMA)
    family.prepare_data(Y)
    prior_draws = np.array([sample_clusters(family.with_values(mu0=value), LABELS, rng)[:, 0]
                            for value in mu0])
    with pytest.raises(AssertionError, match="differ from the exact"):
        assert_expectations(_standardised_cluster_means(prior_draws, mu0), exact, "control")


def test_pm_sample_prior_predictive_stays_prior():
    with pm.Model() as model:
        z = psm.FiniteDirichlet("z", alpha=1.0, k=1, n=Y.shape[0])  # one cluster
        psm.ConjugateMixture("y", partition=z, observed=Y,
                             component=psm.NormalKnownCovariance(mu0=0.5, sigma0=SIGMA0,
                                                                 sigma=SIGMA))
    with model:
        result = pm.sample_prior_predictive(NUM_PREDICTIVE, random_seed=5)
    replicates = np.asarray(result["prior_predictive"]["y"]).reshape(NUM_PREDICTIVE, -1)
    means = replicates.mean(axis=1)
    residual = (means - 0.5) / np.sqrt(SIGMA0 + SIGMA / Y.shape[0])
    assert_expectations(np.c_[residual, residual**2], [0.0, 1.0], "prior")
    # the same replicates are not posterior replicates given one cluster
    variance = 1.0 / (1.0 / SIGMA0 + Y.shape[0] / SIGMA)
    mean = variance * (0.5 / SIGMA0 + Y.sum() / SIGMA)
    residual = (means - mean) / np.sqrt(variance + SIGMA / Y.shape[0])
    with pytest.raises(AssertionError):
        assert_expectations(np.c_[residual, residual**2], [0.0, 1.0], "control")


def test_partition_model_found_after_posterior_predictive_of_a_trace():
    """pymc 5.28's ``sample_posterior_predictive`` of an ``InferenceData`` with observed data
    lists the observed variable twice in ``model.observed_RVs`` afterwards (its
    ``observed_vars += ...`` extends the model's own list; pymc 6 copies it).  The partition's
    discovery must still see one ``ConjugateMixture``, not refuse with "2 ConjugateMixture
    variables use the partition"."""
    rng = np.random.default_rng(0)
    data = rng.integers(0, 2, size=(12, 3))
    with pm.Model() as model:
        z = psm.DirichletProcess("z", alpha=1.0, n=len(data))
        psm.ConjugateMixture("y", partition=z, component=psm.BetaBernoulli(a=1.0, b=1.0),
                             observed=data)
        idata = pm.sample(draws=20, tune=5, chains=1, random_seed=1, progressbar=False,
                          quiet=True, compute_convergence_checks=False)
        pm.sample_posterior_predictive(idata, progressbar=False, random_seed=2)
        start = psm.splitmerge_start(model, random_seed=1)
        step = psm.SAMSStep(z)
    assert start["z"].shape == (len(data),)
    assert step.partition_model.data.shape[0] == len(data)
