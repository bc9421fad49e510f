"""``psm.sample_components``: per-draw cluster parameters from their conditional posterior.

Exact check: with a trace of known partitions and per-draw hyperparameters, the sampled
cluster means must follow the closed-form conjugate posterior of each draw (standardised
residuals with mean 0 and second moment 1).  Negative controls: the same residuals computed
with the wrong cluster order, or with one fixed hyperparameter value instead of each
draw's, are rejected.
"""

from __future__ import annotations

import arviz as az
import numpy as np
import pymc as pm
import pytest
import xarray as xr
from moment_checks import assert_expectations

import pymc_splitmerge as psm

Y = np.array([2.9, 3.2, 2.7, -3.0, -2.6, 0.4])
# two partitions (the second stored with non-canonical labels) alternate over the draws
PARTITIONS = [np.array([0, 0, 0, 1, 1, 1]), np.array([2, 2, 2, 0, 0, 1])]
SIGMA0, SIGMA = 1.0, 1.0
NUM_DRAWS = 1200


def _as_container(posterior: dict):
    if int(az.__version__.split(".")[0]) >= 1:
        return xr.DataTree.from_dict({"posterior": xr.Dataset(posterior)})
    return az.InferenceData(posterior=xr.Dataset(posterior))


def _trace():
    mu0 = np.where(np.arange(NUM_DRAWS) % 3 == 0, -2.0, 1.5)
    labels = np.array([PARTITIONS[d % 2] for d in range(NUM_DRAWS)])
    posterior = {"z": (("chain", "draw", "z_dim_0"), labels.reshape(2, -1, Y.shape[0])),
                 "mu0": (("chain", "draw"), mu0.reshape(2, -1))}
    return _as_container(posterior), mu0.reshape(2, -1), labels.reshape(2, -1, Y.shape[0])


def _model():
    with pm.Model() as model:
        mu0 = pm.Normal("mu0", 0.0, 1.0)
        z = psm.DirichletProcess("z", alpha=1.0, n=Y.shape[0])
        psm.ConjugateMixture("y", partition=z, observed=Y,
                             component=psm.NormalKnownCovariance(mu0=mu0, sigma0=SIGMA0,
                                                                 sigma=SIGMA))
    return model


def _residuals(means, labels, mu0):
    """Standardised residuals of the sampled means against each draw's exact posterior."""
    out = []
    for chain in range(labels.shape[0]):
        for draw in range(labels.shape[1]):
            canonical = psm.analysis.canonicalize(labels[chain, draw])
            for k in range(int(canonical.max()) + 1):
                rows = canonical == k
                variance = 1.0 / (1.0 / SIGMA0 + rows.sum() / SIGMA)
                mean = variance * (mu0[chain, draw] / SIGMA0 + Y[rows].sum() / SIGMA)
                residual = (means[chain, draw, k] - mean) / np.sqrt(variance)
                out.append([residual, residual**2])
    return np.array(out)


def test_cluster_means_follow_each_draws_conjugate_posterior():
    data, mu0, labels = _trace()
    result = psm.sample_components(data, model=_model(), random_seed=7)
    group = result["component_parameters"]
    means = np.asarray(group["mean"].values)[..., 0]  # (chain, draw, cluster)
    assert means.shape == (2, NUM_DRAWS // 2, 3)
    sizes = np.asarray(group["cluster_size"].values)
    assert np.array_equal(sizes[0, 0], [3, 3, 0]) and np.array_equal(sizes[0, 1], [3, 2, 1])
    assert np.isnan(means[0, 0, 2]) and not np.isnan(means[0, 1, 2])
    assert_expectations(_residuals(means, labels, mu0), [0.0, 1.0], "sample_components")
    # negative control 1: clusters in the stored (non-canonical) label order
    swapped = means.copy()
    swapped[:, 1::2] = means[:, 1::2][..., [2, 1, 0]]
    with pytest.raises(AssertionError, match="differ from the exact"):
        assert_expectations(_residuals(swapped, labels, mu0), [0.0, 1.0], "wrong order")
    # negative control 2: one fixed hyperparameter value instead of each draw's
    with pytest.raises(AssertionError, match="differ from the exact"):
        assert_expectations(_residuals(means, labels, np.zeros_like(mu0)), [0.0, 1.0],
                            "fixed mu0")


def test_normal_inverse_wishart_group_has_means_and_covariances():
    x = np.array([[0.1, 0.2], [0.0, -0.1], [5.0, 5.2], [4.9, 5.1]])
    with pm.Model() as model:
        z = psm.DirichletProcess("z", alpha=1.0, n=4)
        psm.ConjugateMixture("y", partition=z, observed=x,
                             component=psm.NormalInverseWishart(mu0=0.0, kappa0=1.0, nu0=4.0,
                                                                psi0=np.eye(2)))
    labels = np.array([[[0, 0, 1, 1], [0, 0, 0, 0]]])
    data = _as_container({"z": (("chain", "draw", "z_dim_0"), labels)})
    with model:
        group = psm.sample_components(data, random_seed=1)["component_parameters"]
    assert group["mean"].dims == ("chain", "draw", "cluster", "mean_dim_0")
    assert group["covariance"].shape == (1, 2, 2, 2, 2)
    covariance = np.asarray(group["covariance"].values)
    assert np.all(np.linalg.eigvalsh(covariance[0, 0]) > 0)
    assert np.all(np.isnan(covariance[0, 1, 1]))


def test_missing_partition_variable_is_reported():
    data = _as_container({"mu0": (("chain", "draw"), np.zeros((1, 2)))})
    with pytest.raises(ValueError, match="has no variable 'z'"):
        psm.sample_components(data, model=_model(), var_name="z")
