"""Held-out posterior predictive density (analysis.predictive).

Exact identity: for any Gibbs-type prior and family,
    sum_c p(c | x) p(x* | c, x) = p(x, x*) / p(x),
where both evidences come from enumerating all set partitions (the oracle).  The per-partition
predictive is computed from the family's log predictive and the prior's V/W ratios, the
evidences from log marginals and the EPPF: two independent paths.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest
from conftest import PRIORS

import pymc_splitmerge as psm
from pymc_splitmerge.analysis.predictive import (
    heldout_log_predictive_density,
    partition_log_predictive,
)
from pymc_splitmerge.priors import (
    DirichletProcessPrior,
    FiniteDirichletPrior,
)
from pymc_splitmerge.testing import exact_posterior

BERNOULLI = (psm.BetaBernoulli(a=0.7, b=1.1),
             np.array([[1, 1, 0], [1, 0, 0], [0, 0, 1], [0, 1, 1], [1, 1, 1]]),
             np.array([[1, 1, 0], [0, 0, 0]]))
NIW = (psm.NormalInverseWishart(mu0=np.zeros(2), kappa0=0.5, nu0=4.0, psi0=np.eye(2)),
       np.array([[-1.2, -0.8], [-1.0, -1.3], [1.1, 0.9], [1.4, 1.2], [0.1, -0.2]]),
       np.array([[1.0, 1.0], [-3.0, 0.5]]))
POISSON = (psm.GammaPoisson(shape=1.0, rate=0.3), np.array([0, 1, 7, 9, 3]), np.array([8, 0]))
REGRESSION = (psm.NormalLinearRegression(beta0=0.0, V0=2.0, a0=2.0, b0=0.5),
              np.array([[1.1, 1.0, 0.5], [2.0, 1.0, 1.1], [-0.9, 1.0, -0.7], [0.4, 1.0, 1.2],
                        [-1.5, 1.0, 0.3]]),
              np.array([[0.8, 1.0, 0.4], [-1.0, 1.0, 1.0]]))  # rows [y, 1, x]
FAMILIES = {"bernoulli": BERNOULLI, "niw": NIW, "poisson": POISSON, "regression": REGRESSION}


def exact_log_predictive(prior, family, data, new):
    """log p(x* | x) from the two evidences, one held-out row at a time."""
    log_evidence = exact_posterior(prior, family, data).log_evidence
    return np.array([
        exact_posterior(prior, family, np.concatenate([data, row[None]])).log_evidence
        - log_evidence
        for row in np.asarray(new)
    ])


@pytest.mark.parametrize("family_name", sorted(FAMILIES))
@pytest.mark.parametrize("prior_name", sorted(PRIORS))
def test_average_over_exact_posterior_equals_evidence_ratio(prior_name, family_name):
    prior = PRIORS[prior_name]
    family, data, new = FAMILIES[family_name]
    exact = exact_posterior(prior, family, data)
    x = family.prepare_data(data)
    x_new = family.prepare_data(new)
    keep = exact.prob > 0
    per_partition = np.array([partition_log_predictive(prior, family, x, labels, x_new)
                              for labels in exact.partitions[keep]])
    log_average = np.log(exact.prob[keep] @ np.exp(per_partition))
    np.testing.assert_allclose(log_average, exact_log_predictive(prior, family, data, new),
                               rtol=0, atol=1e-10)


def test_wrong_prior_weights_are_detected():
    """Negative control: the same identity fails when the predictive uses another prior."""
    family, data, new = BERNOULLI
    exact = exact_posterior(PRIORS["py"], family, data)
    x, x_new = family.prepare_data(data), family.prepare_data(new)
    per_partition = np.array([partition_log_predictive(PRIORS["dp"], family, x, labels, x_new)
                              for labels in exact.partitions])
    log_average = np.log(exact.prob @ np.exp(per_partition))
    assert np.max(np.abs(log_average - exact_log_predictive(PRIORS["py"], family, data, new))) \
        > 1e-3


def test_trace_average_matches_exact_predictive():
    family, data, new = BERNOULLI
    with pm.Model() as model:
        z = psm.DirichletProcess("z", alpha=1.3, n=len(data))
        psm.ConjugateMixture("y", partition=z, component=family, observed=data)
        idata = pm.sample(draws=1500, tune=100, chains=2, cores=1, random_seed=5,
                          step=psm.CollapsedGibbsStep(z), progressbar=False,
                          compute_convergence_checks=False)
    estimate = heldout_log_predictive_density(idata, model, new, max_draws=None)
    expected = exact_log_predictive(PRIORS["dp"], family, data, new)
    assert estimate.shape == (2,)
    # Monte Carlo error of a mean of bounded densities over ~3000 correlated draws: ~1e-2
    np.testing.assert_allclose(estimate, expected, atol=0.05)


def test_random_concentration_is_read_from_the_trace():
    family, data, new = POISSON
    with pm.Model() as model:
        alpha = pm.Gamma("alpha", 2.0, 1.0)
        z = psm.DirichletProcess("z", alpha=alpha, n=len(data))
        psm.ConjugateMixture("y", partition=z, component=family, observed=data)
        idata = pm.sample(draws=300, tune=50, chains=1, cores=1, random_seed=6,
                          step=[psm.CollapsedGibbsStep(z), psm.ConcentrationGibbs(alpha)],
                          progressbar=False, compute_convergence_checks=False)
    estimate = heldout_log_predictive_density(idata, model, new, max_draws=50)
    labels = np.asarray(idata.labels["z"].values)[0]
    alphas = np.asarray(idata.posterior["alpha"].values)[0]
    rows = np.unique(np.linspace(0, labels.shape[0] - 1, 50).astype(np.int64))
    x, x_new = family.prepare_data(data), family.prepare_data(new)
    by_hand = np.array([partition_log_predictive(DirichletProcessPrior(alpha=alphas[r]), family,
                                                 x, labels[r], x_new) for r in rows])
    np.testing.assert_allclose(estimate, np.log(np.mean(np.exp(by_hand), axis=0)), rtol=1e-10)


def test_partition_impossible_under_the_prior_is_rejected():
    family, data, new = BERNOULLI
    x, x_new = family.prepare_data(data), family.prepare_data(new)
    with pytest.raises(ValueError, match="prior probability zero"):
        partition_log_predictive(FiniteDirichletPrior(alpha=1.0, k=2), family, x,
                                 np.array([0, 1, 2, 2, 2]), x_new)


def test_bad_new_data_is_rejected():
    family, data, _ = NIW
    with pm.Model() as model:
        z = psm.DirichletProcess("z", alpha=1.0, n=len(data))
        psm.ConjugateMixture("y", partition=z, component=family, observed=data)
        idata = pm.sample(draws=5, tune=0, chains=1, cores=1, random_seed=1,
                          step=psm.CollapsedGibbsStep(z), progressbar=False,
                          compute_convergence_checks=False)
    with pytest.raises(ValueError):
        heldout_log_predictive_density(idata, model, np.ones((2, 3)))
    with pytest.raises(ValueError):
        heldout_log_predictive_density(idata, model, np.array([[np.nan, 1.0]]))
