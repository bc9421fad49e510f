"""The smaller things a new user runs into: agreement_with_truth on a trace, dimension errors
that name the hyperparameter at fault, a one-line CredibleBall repr, component plots without
the NaN-padded clusters.  Both PyMC / ArviZ lines."""

from __future__ import annotations

import warnings

import matplotlib
import numpy as np
import pymc as pm
import pytest
import xarray as xr

import pymc_splitmerge as psm
from pymc_splitmerge.analysis import _arviz_compat as compat

matplotlib.use("Agg")


def _draws(seed=0, chains=2, draws=30, n=12):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 3, size=(chains, draws, n))


def _container(labels, group="posterior"):
    dataset = xr.Dataset({"z": (("chain", "draw", "z_dim_0"), labels)},
                         coords={"chain": np.arange(labels.shape[0]),
                                 "draw": np.arange(labels.shape[1])})
    return compat.from_groups({group: dataset})


@pytest.mark.parametrize("group", ["posterior", compat.LABELS_GROUP])
def test_agreement_with_truth_takes_what_the_other_analysis_functions_take(group):
    labels = _draws()
    truth = labels[0, 0]
    data = _container(labels, group)
    if group != "posterior":  # a pm.sample trace: the labels in their own group
        data = compat.from_groups({"posterior": xr.Dataset({"alpha": (("chain", "draw"),
                                                                      np.ones(labels.shape[:2]))}),
                                   group: compat.get_group(data, group)})
    from_trace = psm.agreement_with_truth(data, truth)
    from_array = psm.agreement_with_truth(labels, truth)
    for key, value in from_array.items():
        np.testing.assert_allclose(from_trace[key], value)
    assert from_trace["adjusted_rand_index"][0, 0] == pytest.approx(1.0)
    dataset = compat.posterior_with_labels(data)
    np.testing.assert_allclose(psm.agreement_with_truth(dataset, truth)["v_measure"],
                               from_array["v_measure"])


def test_niw_psi0_of_the_wrong_size_is_named_not_the_data():
    family = psm.NormalInverseWishart(mu0=0.0, kappa0=1.0, nu0=6.0, psi0=np.eye(4))
    with pytest.raises(ValueError, match="'psi0'") as raised:
        family.prepare_data(np.zeros((5, 2)))
    assert "data rows must have" not in str(raised.value)
    with pm.Model(), pytest.raises(ValueError, match="'psi0' gives dimension 4"):
        z = psm.DirichletProcess("z", alpha=1.0, n=5)
        psm.ConjugateMixture("y", partition=z, component=family, observed=np.zeros((5, 2)))


def test_mu0_and_psi0_that_disagree_are_both_named():
    with pytest.raises(ValueError, match="'mu0'.*'psi0'"):
        psm.NormalInverseWishart(mu0=np.zeros(2), kappa0=1.0, nu0=6.0, psi0=np.eye(4))


@pytest.mark.parametrize("family, width, names", [
    (psm.NormalKnownCovariance(mu0=np.zeros(3), sigma0=1.0, sigma=1.0), 2, "'mu0'"),
    (psm.BetaBernoulli(a=np.ones(3), b=1.0), 2, "'a'"),
    (psm.DirichletCategorical(concentration=1.0, n_categories=[2, 3, 2]), 2, "'n_categories'"),
])
def test_dimension_errors_name_the_hyperparameter_for_other_families(family, width, names):
    with pytest.raises(ValueError, match=names):
        family.prepare_data(np.zeros((4, width)))


def test_a_family_without_dimension_hyperparameters_still_blames_the_data_shape():
    family = psm.NormalInverseWishart(mu0=0.0, kappa0=1.0, nu0=6.0, psi0=1.0)
    family.prepare_data(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="data rows must have 2 entries, got 3"):
        family.prepare_data(np.zeros((3, 3)))


def test_credible_ball_repr_is_one_short_line():
    labels = _draws(n=40, draws=100)
    ball = psm.credible_ball(labels, labels[0, 0])
    text = repr(ball)
    assert "\n" not in text and len(text) < 250, text
    assert text.startswith("CredibleBall(distance='vi'")
    assert f"draws={labels.shape[0] * labels.shape[1]}" in text


def _components():
    sizes = np.array([[[5, 3, 0], [4, 4, 0]], [[6, 1, 1], [8, 0, 0]]])  # (chain, draw, cluster)
    mean = np.where(sizes[..., None] > 0, 1.0 + np.arange(3)[None, None, :, None], np.nan)
    mean = np.broadcast_to(mean, (2, 2, 3, 2)).copy()
    dataset = xr.Dataset({"mean": (("chain", "draw", "cluster", "mean_dim_0"), mean),
                          "cluster_size": (("chain", "draw", "cluster"), sizes)},
                         coords={"chain": [0, 1], "draw": [0, 1], "cluster": [0, 1, 2]})
    return compat.from_groups({psm.analysis.COMPONENTS_GROUP: dataset})


def test_occupied_components_leave_out_the_nan_padded_clusters():
    data = _components()
    assert np.isnan(compat.get_group(data, psm.analysis.COMPONENTS_GROUP)["mean"].values).any()
    occupied = psm.occupied_components(data)
    assert list(occupied["cluster"].values) == [0]
    assert not np.isnan(occupied["mean"].values).any()


def test_plot_component_parameters_draws_only_occupied_clusters_quietly():
    import matplotlib.pyplot as plt

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compat.quiet_arviz_matplotlib_deprecation()
        psm.plot_component_parameters(_components(), var_names=["mean"])
    assert [str(w.message) for w in caught] == []
    if compat.ARVIZ_MAJOR < 1:  # one row per mean_dim_0 of the one occupied cluster (not 3 x 2)
        labels = [tick.get_text() for ax in plt.gcf().axes for tick in ax.get_yticklabels()
                  if tick.get_text()]
        assert len(labels) == 2, labels
    plt.close("all")
