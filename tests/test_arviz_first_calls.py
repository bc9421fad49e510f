"""A new user's first ArviZ calls on a plain ``pm.sample()`` trace are meaningful and quiet.

``pm.sample`` keeps the label draws in the group ``"labels"`` and puts the label-invariant
quantities (number of clusters, largest-cluster fractions, log joint) in the posterior, so
``az.summary`` / ``az.plot_trace`` show them and the continuous parameters, not one row or panel
per observation; ``pm.sample_posterior_predictive``, ``psm.sample_components`` and the
analysis functions read the labels from their group.  Both ArviZ lines.
"""

from __future__ import annotations

import logging
import warnings

import arviz as az
import matplotlib
import numpy as np
import pymc as pm
import pytest
import xarray as xr

import pymc_splitmerge as psm
from pymc_splitmerge.analysis import _arviz_compat as compat

matplotlib.use("Agg")

N = 24


def _model():
    """A fresh model each time: on pymc 5.28, pm.sample on a model that went through
    pm.sample_posterior_predictive fails inside PyMC (see the user guide)."""
    y, _ = psm.datasets.gaussian_blobs(n=N, n_components=2, dim=2, seed=3)
    with pm.Model() as model:
        alpha = pm.Gamma("alpha", 1.0, 1.0)
        z = psm.DirichletProcess("z", alpha=alpha, n=len(y))
        psm.ConjugateMixture("y", partition=z, component=psm.NormalInverseWishart(
            mu0=y.mean(axis=0), kappa0=0.05, nu0=4.0, psi0=np.eye(2)), observed=y)
    return model, y


@pytest.fixture(scope="module")
def fitted():
    model, y = _model()
    with model:
        idata = pm.sample(draws=60, tune=20, chains=2, cores=1, random_seed=5, progressbar=False)
    return model, y, idata


def _quietly(function, *args, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compat.quiet_arviz_matplotlib_deprecation()  # the package's one filter (ArviZ 0.x)
        result = function(*args, **kwargs)
    return result, [f"{w.category.__name__}: {w.message}" for w in caught]


def test_labels_have_their_own_group_and_the_posterior_the_invariant_quantities(fitted):
    _, _, idata = fitted
    posterior = compat.get_group(idata, "posterior")
    assert "z" not in posterior
    assert {"alpha", "n_clusters", "fraction_in_largest_clusters", "log_joint"} == set(
        posterior.data_vars)
    labels = compat.get_group(idata, compat.LABELS_GROUP)["z"]
    assert labels.dims[:2] == ("chain", "draw") and labels.shape == (2, 60, N)
    np.testing.assert_array_equal(posterior["n_clusters"].values, labels.values.max(axis=-1) + 1)
    np.testing.assert_allclose(posterior["log_joint"].values,
                               psm.sampling.numeric_log_joint(idata, fitted[0], "z"))


def test_az_summary_has_no_label_rows_and_no_warnings(fitted):
    _, _, idata = fitted
    table, caught = _quietly(az.summary, idata)
    assert caught == []
    rows = [str(row) for row in table.index]
    assert not any(row.startswith("z") for row in rows)
    # alpha, n_clusters, log_joint and the largest-cluster fractions (m = 1..3, m < max K)
    max_clusters = int(compat.get_group(idata, "posterior")["n_clusters"].max())
    assert max_clusters >= 4
    assert len(rows) == 6, rows
    assert {"alpha", "n_clusters", "log_joint"} <= set(rows)


def test_fractions_that_are_one_in_every_draw_are_left_out():
    """With at most two clusters, the two largest hold everything: only m = 1 is kept, and
    az.summary stays quiet (a constant column gives NaN R-hat and NumPy warnings)."""
    model, _ = _model()
    rng = np.random.default_rng(0)
    labels = np.zeros((2, 50, N), dtype=np.int8)
    labels[..., N // 2:] = rng.integers(0, 2, size=(2, 50, 1))
    alpha = rng.gamma(1.0, 1.0, size=(2, 50))
    posterior = xr.Dataset({"alpha": (("chain", "draw"), alpha),
                            "z": (("chain", "draw", "z_dim_0"), labels)},
                           coords={"chain": [0, 1], "draw": np.arange(50)})
    data = compat.from_groups({"posterior": posterior})
    psm.sampling.move_labels_out_of_posterior(data, model)
    moved = compat.get_group(data, "posterior")
    assert list(moved["fraction_in_largest_clusters"].coords["largest"].values) == [1]
    assert "z_dim_0" not in moved.coords
    table, caught = _quietly(az.summary, data)
    assert caught == [] and len(table) == 4, (caught, list(table.index))


def test_az_plot_trace_draws_the_quantities_without_warnings(fitted):
    import matplotlib.pyplot as plt

    _, _, idata = fitted
    _, caught = _quietly(az.plot_trace, idata)
    assert caught == []
    figure = plt.gcf()
    # one row of panels per variable: alpha, n_clusters, fractions, log_joint
    assert len([ax for ax in figure.axes if ax.has_data()]) <= 8
    plt.close("all")


def test_posterior_predictive_conditions_on_the_stored_labels(fitted, caplog):
    model, _, idata = fitted
    with model, caplog.at_level(logging.INFO, logger="pymc"):
        result = pm.sample_posterior_predictive(idata, random_seed=2, progressbar=False)
    sampled = [record.getMessage() for record in caplog.records
               if record.getMessage().startswith("Sampling:")]
    assert sampled and all("z" not in message for message in sampled), sampled
    predictive = compat.get_group(result, "posterior_predictive")["y"]
    assert predictive.shape == (2, 60, N, 2)
    assert not compat.has_group(idata, "posterior_predictive")


def test_posterior_predictive_extends_the_users_object(fitted):
    model, _, idata = fitted
    copy = idata.copy()
    with model:
        returned = pm.sample_posterior_predictive(copy, extend_inferencedata=True,
                                                  random_seed=2, progressbar=False)
    assert returned is copy
    assert compat.has_group(copy, "posterior_predictive")
    assert "z" not in compat.get_group(copy, "posterior")
    assert compat.has_group(copy, compat.LABELS_GROUP)


def test_analysis_functions_and_sample_components_read_the_labels_group(fitted):
    model, y, idata = fitted
    copy = idata.copy()
    assert len(psm.summary(copy, model=model)) > 0
    estimate = psm.point_estimate(copy)
    assert estimate.labels.shape == (N,)
    psm.credible_ball(copy, estimate)
    assert psm.posterior_similarity_matrix(copy).shape == (N, N)
    psm.distance_diagnostics(copy)
    psm.add_partition_quantities(copy)
    assert psm.heldout_log_predictive_density(copy, model, y[:3]).shape == (3,)
    psm.sample_components(copy, model=model, random_seed=1)
    assert compat.get_group(copy, "component_parameters")["mean"].shape[:2] == (2, 60)


def test_psm_sample_adds_the_diagnostics_group_from_the_stored_log_joint():
    model, _ = _model()
    with model:
        idata = psm.sample(draws=30, tune=10, chains=2, cores=1, random_seed=5,
                           progressbar=False, compute_convergence_checks=False)
    diagnostics = compat.get_group(idata, psm.DIAGNOSTICS_GROUP)
    posterior = compat.get_group(idata, "posterior")
    np.testing.assert_array_equal(diagnostics["log_joint"].values, posterior["log_joint"].values)
    assert "z" not in posterior


def test_uninstalled_hooks_leave_the_labels_in_the_posterior():
    model, _ = _model()
    psm.install_pymc_hooks(False)
    try:
        with model:
            idata = pm.sample(draws=5, tune=5, chains=1, cores=1, random_seed=5,
                              progressbar=False, compute_convergence_checks=False)
    finally:
        psm.install_pymc_hooks()
    assert "z" in compat.get_group(idata, "posterior")
    assert pm.sample_posterior_predictive is psm.sampling.hooks.sample_posterior_predictive
