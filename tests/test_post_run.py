"""What happens after the draws: the post-run computations never lose a trace.

* A model with ``initval=`` (the user guide's ``psm.DirichletProcess(..., initval=labels)``)
  gets its diagnostics and log joint: ``psm.sample``, plain ``pm.sample``, ``psm.summary``,
  ``psm.log_joint_draws`` and ``psm.sample_components`` used to fail with PyMC's "Cannot
  convert models with non-default initial_values"; the model's initial values are kept.
* ``var_names`` without the partition, n = 2 (one pair of observations) and n = 1 (one
  possible partition, with the automatically assigned step) sample and return the trace.
* Whatever fails in the post-run checks becomes a ``RuntimeWarning`` and the trace is
  returned (a failure injected into the label-invariant quantities, for ``psm.sample`` and
  for the hook a plain ``pm.sample`` runs).
"""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import pytest

import pymc_splitmerge as psm
from pymc_splitmerge.analysis import _arviz_compat as compat
from pymc_splitmerge.sampling import mcmc

KWARGS = {"draws": 30, "tune": 10, "chains": 2, "cores": 1, "random_seed": 4,
          "progressbar": False}
FAILED = "after sampling failed"


def _model(n, initval=None):
    data = np.random.default_rng(n).integers(0, 2, size=(n, 3))
    with pm.Model() as model:
        alpha = pm.Gamma("alpha", 2.0, 1.0)
        z = psm.DirichletProcess("z", alpha=alpha, n=n, initval=initval)
        psm.ConjugateMixture("y", partition=z, component=psm.BetaBernoulli(a=1.0, b=1.0),
                             observed=data)
    return model


def _post_run_failures(caught):
    return [str(w.message) for w in caught if FAILED in str(w.message)]


def test_initval_model_gets_its_diagnostics_and_log_joint():
    labels = np.array([0, 0, 1, 1, 2, 2])
    model = _model(6, initval=labels)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        idata = psm.sample(model=model, **KWARGS)
        plain = pm.sample(model=model, **KWARGS)
    assert not _post_run_failures(caught)
    diagnostics = compat.get_group(idata, "partition_diagnostics")
    expected = psm.log_joint_draws(idata, model)  # the model's pytensor terms
    np.testing.assert_allclose(diagnostics["log_joint"].values, expected, rtol=1e-9)
    table = psm.summary(plain, model=model, reference=None)
    assert np.isfinite(table.loc["log_joint", "mean"])
    components = psm.sample_components(idata, model, random_seed=1)
    assert components is not None
    # the initial values are still the model's (set aside only for PyMC's conversion)
    assert np.array_equal(model.rvs_to_initial_values[model["z"]], labels)
    np.testing.assert_array_equal(model.initial_point()["z"], labels)


def test_var_names_without_the_partition():
    model = _model(6)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        idata = psm.sample(model=model, var_names=["alpha"], **KWARGS)
        plain = pm.sample(model=model, var_names=["alpha"], **KWARGS)
    assert not _post_run_failures(caught)
    for data in (idata, plain):
        posterior = compat.get_group(data, "posterior")
        assert "z" not in posterior and posterior["alpha"].shape == (2, 30)
    assert not compat.has_group(idata, "partition_diagnostics")


def test_two_observations():
    model = _model(2)
    idata = psm.sample(model=model, **KWARGS)
    diagnostics = compat.get_group(idata, "partition_diagnostics")
    assert list(diagnostics.coords["pair"].values) == ["0,1"]  # the one pair there is
    labels = compat.get_group(idata, "labels")["z"].values
    both = {tuple(draw) for draw in labels.reshape(-1, 2)}
    assert both == {(0, 0), (0, 1)}  # both partitions of two points are visited
    table = psm.summary(idata)
    assert "co_clustering[0,1]" in table.index


def test_one_observation_with_the_automatic_step():
    model = _model(1)
    idata = psm.sample(model=model, **KWARGS)
    labels = compat.get_group(idata, "labels")["z"].values
    assert labels.shape == (2, 30, 1) and not labels.any()
    stats = compat.get_group(idata, "sample_stats")
    assert not stats["sams_accepted"].values.any()
    # an explicitly chosen split-merge step still says what it needs
    with pytest.raises(ValueError, match="SAMSStep needs a partition of at least 2 points"):
        psm.SAMSStep(model["z"], model=model)


def _failing_quantities(*args, **kwargs):
    raise RuntimeError("injected failure")


def test_psm_sample_returns_the_trace_when_a_post_run_check_fails(monkeypatch):
    monkeypatch.setattr(mcmc, "partition_quantities", _failing_quantities)
    with pytest.warns(RuntimeWarning, match="label-invariant quantities of 'z'.*injected"):
        idata = psm.sample(model=_model(6), **KWARGS)
    # the labels could not be moved to their group: they stay in the posterior
    assert compat.get_group(idata, "posterior")["z"].shape == (2, 30, 6)
    assert not compat.has_group(idata, "labels")
    assert not compat.has_group(idata, "partition_diagnostics")


def test_plain_pm_sample_returns_the_trace_when_the_hook_fails(monkeypatch):
    monkeypatch.setattr(mcmc, "partition_quantities", _failing_quantities)
    with pytest.warns(RuntimeWarning, match="convergence checks of 'z'.*injected"):
        idata = pm.sample(model=_model(6), **KWARGS)
    assert compat.get_group(idata, "posterior")["z"].shape == (2, 30, 6)
    assert not compat.has_group(idata, "labels")
