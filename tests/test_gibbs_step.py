"""PyMC adapters: CollapsedGibbsStep, ConcentrationGibbs, PartitionPriorSlice.

Draws from ``pm.sample`` are compared with the enumerated exact posterior (χ² on thinned
draws, suite-wide threshold), plus the adapter contract: automatic assignment, canonical
stored labels, no in-place mutation of the point, cores=2 == cores=1 for a fixed seed.
"""

from __future__ import annotations

import math

import numpy as np
import pymc as pm
import pytest
from conftest import thinned_labels

from pymc_splitmerge import steps
from pymc_splitmerge.analysis._arviz_compat import posterior_with_labels
from pymc_splitmerge.components import BetaBernoulli, GammaPoisson, NormalInverseWishart
from pymc_splitmerge.core.relabel import canonical_labels
from pymc_splitmerge.distributions.mixture import ConjugateMixture
from pymc_splitmerge.distributions.priors import DirichletProcess, FiniteDirichlet, PitmanYor
from pymc_splitmerge.priors import DirichletProcessPrior, FiniteDirichletPrior, PitmanYorPrior
from pymc_splitmerge.testing import (
    assert_partition_gof,
    exact_posterior,
    exact_posterior_random_concentration,
)

THIN = 4
SAMPLE_KWARGS = {"tune": 50, "chains": 2, "cores": 1, "progressbar": False,
                     "compute_convergence_checks": False}

BERNOULLI_DATA = np.array([[1, 1, 0], [1, 1, 1], [0, 0, 1], [0, 0, 0], [1, 0, 1], [0, 1, 0]])
NIW_DATA = np.array([[-1.5, -1.2], [-1.9, -1.4], [-1.1, -2.0], [1.4, 1.6], [1.8, 1.1]])
POISSON_DATA = np.array([0, 1, 7, 9, 3, 0])


def posterior_values(idata, name):
    values = np.asarray(posterior_with_labels(idata)[name].values)
    return values.reshape(-1, *values.shape[2:]) if values.ndim > 2 else values.reshape(-1)


def test_dirichlet_process_beta_bernoulli_matches_exact():
    family = BetaBernoulli(a=1.0, b=1.0)
    with pm.Model():
        z = DirichletProcess("z", alpha=1.0, n=len(BERNOULLI_DATA))
        ConjugateMixture("y", partition=z, component=family, observed=BERNOULLI_DATA)
        idata = pm.sample(draws=2400, step=steps.CollapsedGibbsStep(z), random_seed=11,
                          **SAMPLE_KWARGS)
    labels = thinned_labels(idata, THIN)
    exact = exact_posterior(DirichletProcessPrior(alpha=1.0), family, BERNOULLI_DATA)
    assert_partition_gof(labels, exact)
    all_labels = posterior_values(idata, "z")
    np.testing.assert_array_equal(all_labels, canonical_labels(all_labels))


def test_pitman_yor_niw_matches_exact():
    family = NormalInverseWishart(mu0=np.zeros(2), kappa0=0.5, nu0=4.0, psi0=np.eye(2))
    with pm.Model():
        z = PitmanYor("z", alpha=0.8, discount=0.3, n=len(NIW_DATA))
        ConjugateMixture("y", partition=z, component=family, observed=NIW_DATA)
        idata = pm.sample(draws=2400, step=steps.CollapsedGibbsStep(z, scan="systematic"),
                          random_seed=12, **SAMPLE_KWARGS)
    exact = exact_posterior(PitmanYorPrior(alpha=0.8, discount=0.3), family, NIW_DATA)
    assert_partition_gof(thinned_labels(idata, THIN), exact)


def test_finite_gamma_poisson_matches_exact():
    family = GammaPoisson(shape=1.0, rate=0.3)
    with pm.Model():
        z = FiniteDirichlet("z", alpha=1.5, k=3, n=len(POISSON_DATA))
        ConjugateMixture("y", partition=z, component=family, observed=POISSON_DATA)
        idata = pm.sample(draws=2400, step=steps.CollapsedGibbsStep(z, n_gibbs_sweeps=2),
                          random_seed=13, **SAMPLE_KWARGS)
    exact = exact_posterior(FiniteDirichletPrior(alpha=1.5, k=3), family, POISSON_DATA)
    assert_partition_gof(thinned_labels(idata, THIN), exact)


def batch_mean_error(draws, n_batches=40):
    batches = np.asarray(draws).reshape(n_batches, -1).mean(axis=1)
    return batches.std(ddof=1) / math.sqrt(n_batches)


@pytest.mark.parametrize("update", ["gibbs", "slice"])
def test_random_concentration_matches_quadrature(update):
    shape, rate = 2.0, 1.0
    family = BetaBernoulli(a=1.0, b=1.0)
    with pm.Model():
        alpha = pm.Gamma("alpha", alpha=shape, beta=rate)
        z = DirichletProcess("z", alpha=alpha, n=len(BERNOULLI_DATA))
        ConjugateMixture("y", partition=z, component=family, observed=BERNOULLI_DATA)
        alpha_step = (steps.ConcentrationGibbs(alpha) if update == "gibbs"
                      else steps.PartitionPriorSlice(alpha))
        idata = pm.sample(draws=2400, step=[steps.CollapsedGibbsStep(z), alpha_step],
                          random_seed=14, **SAMPLE_KWARGS)
    exact = exact_posterior_random_concentration(DirichletProcessPrior, (shape, rate), family,
                                                 BERNOULLI_DATA)
    assert_partition_gof(thinned_labels(idata, THIN), exact)
    alpha_draws = np.asarray(idata["posterior"]["alpha"].values)
    error = math.sqrt(sum(batch_mean_error(chain) ** 2 for chain in alpha_draws)) / 2
    assert abs(alpha_draws.mean() - exact.concentration_mean) < 4 * error


def test_pitman_yor_concentration_slice_matches_quadrature():
    shape, rate, discount = 2.0, 1.0, 0.3
    family = GammaPoisson(shape=1.0, rate=0.3)
    with pm.Model():
        alpha = pm.Gamma("alpha", alpha=shape, beta=rate)
        z = PitmanYor("z", alpha=alpha, discount=discount, n=len(POISSON_DATA))
        ConjugateMixture("y", partition=z, component=family, observed=POISSON_DATA)
        idata = pm.sample(draws=2400, step=[steps.CollapsedGibbsStep(z),
                                            steps.PartitionPriorSlice(alpha)],
                          random_seed=15, **SAMPLE_KWARGS)
    exact = exact_posterior_random_concentration(
        lambda a: PitmanYorPrior(alpha=a, discount=discount), (shape, rate), family,
        POISSON_DATA)
    assert_partition_gof(thinned_labels(idata, THIN), exact)
    alpha_draws = np.asarray(idata["posterior"]["alpha"].values)
    error = math.sqrt(sum(batch_mean_error(chain) ** 2 for chain in alpha_draws)) / 2
    assert abs(alpha_draws.mean() - exact.concentration_mean) < 4 * error


def small_model(alpha_prior="gamma"):
    model = pm.Model()
    with model:
        if alpha_prior == "gamma":
            alpha = pm.Gamma("alpha", alpha=2.0, beta=1.0)
        else:
            alpha = pm.LogNormal("alpha", 0.0, 1.0)
        z = DirichletProcess("z", alpha=alpha, n=len(POISSON_DATA))
        ConjugateMixture("y", partition=z, component=GammaPoisson(shape=1.0, rate=0.3),
                         observed=POISSON_DATA)
    return model, z, alpha


def test_plain_pm_sample_assigns_default_partition_step():
    model, _z, _alpha = small_model()
    with model:
        idata = pm.sample(draws=30, tune=10, chains=1, cores=1, progressbar=False,
                          compute_convergence_checks=False, random_seed=1)
    stats = idata["sample_stats"]
    assert "sams_move" in stats and "gibbs_changed" not in stats  # SAMS + Gibbs sweep
    labels = posterior_values(idata, "z")
    np.testing.assert_array_equal(labels, canonical_labels(labels))


def test_cores_two_equals_cores_one():
    model, z, alpha = small_model()
    results = []
    for cores in (1, 2):
        with model:
            idata = pm.sample(draws=40, tune=10, chains=2, cores=cores, progressbar=False,
                              compute_convergence_checks=False, random_seed=5,
                              step=[steps.CollapsedGibbsStep(z), steps.ConcentrationGibbs(alpha)])
        results.append((posterior_values(idata, "z"), posterior_values(idata, "alpha")))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])


def test_step_does_not_mutate_point_and_writes_canonical_labels():
    model, z, _alpha = small_model()
    with model:
        step = steps.CollapsedGibbsStep(z, rng=3)  # neither set_rng nor setup_chain called
        point = model.initial_point()
        point["z"] = np.array([5, 5, 2, 2, 4, 5], dtype=point["z"].dtype)
        frozen = {key: np.array(value, copy=True) for key, value in point.items()}
        for key in point:
            if isinstance(point[key], np.ndarray):
                point[key].setflags(write=False)
        new_point, stats = step.step(point)
    assert set(new_point) == set(point)
    for key, value in frozen.items():
        np.testing.assert_array_equal(point[key], value)
    np.testing.assert_array_equal(new_point["z"], canonical_labels(new_point["z"]))
    assert new_point["z"] is not point["z"]
    assert stats[0]["gibbs_n_clusters"] == np.unique(new_point["z"]).size
    # state is cached between draws and rebuilt when another step changes the labels
    again, _ = step.step(new_point)
    changed = dict(again)
    changed["z"] = np.zeros_like(again["z"])
    step.step(changed)
    step._state.check()


def test_competence_and_registration():
    from pymc.step_methods import STEP_METHODS
    from pymc.step_methods.compound import Competence

    _model, z, alpha = small_model()
    assert STEP_METHODS[0] is steps.DefaultPartitionStep
    assert steps.CollapsedGibbsStep.competence(z, False) == Competence.IDEAL
    assert steps.CollapsedGibbsStep.competence(alpha, True) == Competence.INCOMPATIBLE


def test_clear_errors():
    model, z, alpha = small_model(alpha_prior="lognormal")
    with model:
        with pytest.raises(ValueError, match="pm.Gamma"):
            steps.ConcentrationGibbs(alpha)
        with pytest.raises(TypeError, match="not a partition variable"):
            steps.CollapsedGibbsStep(alpha)
        with pytest.raises(ValueError, match="scan"):
            steps.CollapsedGibbsStep(z, scan="sideways")
        steps.PartitionPriorSlice(alpha)  # any prior is fine for the slice update
    with pm.Model():
        a = pm.Gamma("a", 2.0, 1.0)
        z2 = PitmanYor("z2", alpha=a, discount=0.2, n=len(POISSON_DATA))
        ConjugateMixture("y", partition=z2, component=GammaPoisson(), observed=POISSON_DATA)
        with pytest.raises(ValueError, match="DirichletProcess"):
            steps.ConcentrationGibbs(a)
    with pm.Model():
        a = pm.Gamma("a", 2.0, 1.0)
        z3 = DirichletProcess("z3", alpha=a, n=len(POISSON_DATA))
        ConjugateMixture("y", partition=z3, component=GammaPoisson(), observed=POISSON_DATA)
        pm.Normal("other", mu=a, sigma=1.0)
        with pytest.raises(ValueError, match="also influences"):
            steps.ConcentrationGibbs(a)


def test_sweeps_keyword_has_one_name():
    model, z, _ = small_model(alpha_prior="lognormal")
    with model:
        assert steps.CollapsedGibbsStep(z, n_gibbs_sweeps=2).n_gibbs_sweeps == 2
        with pytest.raises(TypeError, match="n_sweeps"):
            steps.CollapsedGibbsStep(z, n_sweeps=3)
        with pytest.raises(ValueError, match="n_gibbs_sweeps"):
            steps.CollapsedGibbsStep(z, n_gibbs_sweeps=0)
