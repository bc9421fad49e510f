"""``pm.set_data`` between runs: every entry point uses the data and ``pm.Data``
hyperparameters the model holds now, never those of an earlier run.

Each test builds a model on ``pm.Data``, runs an entry point on the old values (so that
whatever it caches is filled), sets new values, runs the entry point again and compares the
result with the same entry point, same seed, on a model built directly on the new values:
they must be identical.  With a stale cache (the model's description kept from the first
run) the first result is computed from the old data and differs.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest

import pymc_splitmerge as psm
from pymc_splitmerge.analysis import _arviz_compat as compat

N = 12
OLD = np.linspace(-1.0, 1.0, N)  # one tight group
NEW = np.repeat([-30.0, 0.0, 30.0], N // 3) + np.tile(np.linspace(-0.5, 0.5, N // 3), 3)
SAMPLE = {"draws": 6, "tune": 0, "chains": 1, "progressbar": False,
          "compute_convergence_checks": False, "random_seed": 3}


def build(values, mu0=0.0):
    with pm.Model() as model:
        data = pm.Data("data", values)
        centre = pm.Data("mu0", mu0)
        z = psm.DirichletProcess("z", alpha=1.0, n=N)
        psm.ConjugateMixture(
            "y", partition=z, observed=data,
            component=psm.NormalInverseGamma(mu0=centre, kappa0=0.1, alpha0=2.0, beta0=1.0))
    return model


def labels_of(idata):
    # group "labels" of pm.sample, the posterior of psm.sample_smc
    return np.asarray(compat.posterior_with_labels(idata)["z"].values)


def stale_then_new(run, mu0=0.0):
    """``run(model)`` after a first run on OLD and ``pm.set_data`` to NEW (and ``mu0``)."""
    model = build(OLD)
    run(model)
    with model:
        pm.set_data({"data": NEW, "mu0": mu0})
    return run(model)


def test_automatic_steps_use_the_new_data():
    def run(model):
        with model:
            return labels_of(pm.sample(**SAMPLE))

    np.testing.assert_array_equal(stale_then_new(run), run(build(NEW)))


@pytest.mark.parametrize("mu0", [0.0, 5.0], ids=["data", "data-and-hyperparameter"])
def test_a_reused_step_uses_the_new_data(mu0):
    model = build(OLD)
    with model:
        step = psm.CollapsedGibbsStep(model["z"])
        pm.sample(step=step, **SAMPLE)
        pm.set_data({"data": NEW, "mu0": mu0})
        reused = labels_of(pm.sample(step=step, **SAMPLE))
    fresh_model = build(NEW, mu0)
    with fresh_model:
        fresh = labels_of(pm.sample(step=psm.CollapsedGibbsStep(fresh_model["z"]), **SAMPLE))
    np.testing.assert_array_equal(reused, fresh)


def test_splitmerge_start_uses_the_new_data():
    def run(model):
        return psm.splitmerge_start(model=model, random_seed=5)["z"]

    np.testing.assert_array_equal(stale_then_new(run), run(build(NEW)))


def test_sample_smc_uses_the_new_data():
    def run(model):
        with model:
            return labels_of(psm.sample_smc(draws=8, chains=1, cores=1, random_seed=2))

    np.testing.assert_array_equal(stale_then_new(run), run(build(NEW)))


@pytest.fixture(scope="module")
def trace_on_new_data():
    model = build(NEW)
    with model:
        return pm.sample(**SAMPLE)


def test_analysis_uses_the_new_data(trace_on_new_data):
    def run(model):
        components = psm.sample_components(trace_on_new_data.copy(), model, random_seed=1)
        means = np.asarray(compat.get_group(components, "component_parameters")["mean"])
        return np.concatenate([
            psm.log_joint_draws(trace_on_new_data, model).ravel(),
            psm.heldout_log_predictive_density(trace_on_new_data, model, [0.0, 29.0]),
            np.nan_to_num(means.ravel(), nan=1e300),
        ])

    np.testing.assert_array_equal(stale_then_new(run), run(build(NEW)))


def test_posterior_predictive_uses_the_new_data(trace_on_new_data):
    def run(model):
        with model:
            predictive = pm.sample_posterior_predictive(trace_on_new_data, random_seed=4,
                                                        progressbar=False)
        return np.asarray(compat.get_group(predictive, "posterior_predictive")["y"])

    np.testing.assert_array_equal(stale_then_new(run), run(build(NEW)))


def test_new_length_says_that_n_is_fixed():
    model = build(OLD)
    with model:
        pm.sample(**SAMPLE)
        pm.set_data({"data": np.zeros(N + 3)})
        with pytest.raises(ValueError, match=r"n = 12 points, fixed when the model was built"):
            pm.sample(**SAMPLE)


def test_a_step_of_another_model_is_refused():
    with build(OLD) as old_model:
        step = psm.CollapsedGibbsStep(old_model["z"])
    with build(NEW), pytest.raises(ValueError, match="not a value variable in the model"):
        pm.sample(step=step, **SAMPLE)  # never samples the new model with the old model's data
