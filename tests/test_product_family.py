"""``ProductFamily``: independent conjugate families on column groups (mixed data types).

* numba core (through ``dispatch``) against the sub-families' plain references;
* the pytensor logp of ``ConjugateMixture`` against the numba core, with a random
  hyperparameter inside the product;
* validation of the column groups and of the data;
* exactness through ``pm.sample``: collapsed Gibbs, SAMS, RGSM and PGSM on a product of
  Normal-Inverse-Wishart and Beta-Bernoulli, χ² against the enumerated posterior computed
  from the sub-families alone; negative control: the same samples against the posterior of the
  continuous columns only (the Bernoulli columns ignored) are rejected;
* forward sampling: posterior parameter moments and prior predictive domains.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest
from moment_checks import assert_expectations

import pymc_splitmerge as psm
from pymc_splitmerge.components import (
    beta_bernoulli,
    dirichlet_categorical,
    normal_inverse_wishart,
    normal_known_covariance,
)
from pymc_splitmerge.components.product import reference_log_marginal
from pymc_splitmerge.testing import assert_partition_gof, exact_posterior

FAST = "FAST_COMPILE"


def _mixed_family():
    return psm.ProductFamily([
        (psm.NormalInverseWishart(mu0=0.0, kappa0=0.5, nu0=4.0, psi0=np.eye(2)), [3, 0]),
        (psm.DirichletCategorical(concentration=[[1.0, 2.0, 0.5]], n_categories=3), [1]),
        (psm.BetaBernoulli(a=0.5, b=1.5), [2, 4]),
        (psm.NormalKnownCovariance(mu0=0.0, sigma0=2.0, sigma=0.5), 5),
    ])


def _mixed_data(n, seed=0):
    rng = np.random.default_rng(seed)
    return np.c_[rng.normal(size=n), rng.integers(0, 3, n), rng.integers(0, 2, n),
                 rng.normal(size=n), rng.integers(0, 2, n), rng.normal(size=n)]


def _independent_log_marginal(family, x2d):
    """Sum of the sub-families' plain numpy references (no dispatch involved)."""
    references = {psm.NormalInverseWishart: normal_inverse_wishart.reference_log_marginal,
                  psm.DirichletCategorical: dirichlet_categorical.reference_log_marginal,
                  psm.BetaBernoulli: beta_bernoulli.reference_log_marginal,
                  psm.NormalKnownCovariance: normal_known_covariance.reference_log_marginal}
    return sum(references[type(sub)](sub, x2d[:, columns]) for sub, columns in family.components)


def test_numba_core_matches_sub_family_references():
    family = _mixed_family()
    x = family.prepare_data(_mixed_data(7))
    assert family.stat_dim == sum(sub.stat_dim for sub, _ in family.components)
    stats = family.stats_of(x)
    expected = _independent_log_marginal(family, x)
    assert family.log_marginal(stats) == pytest.approx(expected, rel=1e-10)
    assert reference_log_marginal(family, x) == pytest.approx(expected, rel=1e-10)
    partial = family.stats_of(x[:6])
    assert family.log_predictive(x[6], partial) == pytest.approx(
        expected - _independent_log_marginal(family, x[:6]), rel=1e-9)
    from pymc_splitmerge.components import dispatch

    # the NIW update counter (a history entry) is not part of the cluster's statistics
    cluster = family.cluster_columns
    niw_counter = family.components[0][0].stat_dim - 1
    assert cluster.size == family.stat_dim - 1 and niw_counter not in cluster
    row = stats.copy()
    dispatch.remove_point(family.family_id, family.params, row, x[6])
    np.testing.assert_allclose(row[cluster], partial[cluster], rtol=1e-9, atol=1e-12)
    for i in range(6):
        dispatch.remove_point(family.family_id, family.params, row, x[i])
    np.testing.assert_allclose(row[cluster], family.empty_stats[cluster], atol=1e-9)
    assert family.log_marginal(family.empty_stats) == 0.0
    out = np.empty(2)
    many = np.vstack([partial, stats])
    dispatch.log_predictive_many(family.family_id, family.params, many,
                                 np.array([0, 1]), 2, x[6], out)
    assert out[0] == pytest.approx(family.log_predictive(x[6], partial), rel=1e-12)


def test_partition_state_check_on_a_product_after_moves():
    from pymc_splitmerge.kernels.state import PartitionState

    family = _mixed_family()
    x = family.prepare_data(_mixed_data(9, seed=3))
    state = PartitionState(family, x, np.array([0, 0, 1, 1, 2, 0, 1, 2, 2]))
    rng = np.random.default_rng(0)
    from pymc_splitmerge.kernels.gibbs import gibbs_sweep

    log_v, log_w = psm.priors.DirichletProcessPrior(alpha=1.0).tables(9)
    for _ in range(20):
        gibbs_sweep(state, log_v, log_w, rng)
    state.check()
    state.stats[state.active[0], 0] += 1.0  # negative control: a corrupted statistic
    with pytest.raises(AssertionError):
        state.check()


def test_pytensor_logp_matches_numba_core_with_random_hyperparameter():
    data = _mixed_data(6, seed=1)
    with pm.Model() as model:
        mu0 = pm.Normal("mu0", 0.0, 1.0)
        z = psm.DirichletProcess("z", alpha=1.0, n=6)
        family = psm.ProductFamily([
            (psm.NormalInverseWishart(mu0=mu0, kappa0=0.5, nu0=4.0, psi0=np.eye(2)), [3, 0]),
            (psm.DirichletCategorical(concentration=[[1.0, 2.0, 0.5]], n_categories=3), [1]),
            (psm.BetaBernoulli(a=0.5, b=1.5), [2, 4]),
            (psm.NormalKnownCovariance(mu0=0.0, sigma0=2.0, sigma=0.5), 5),
        ])
        psm.ConjugateMixture("y", partition=z, component=family, observed=data)
    terms = model.compile_logp(vars=[model["y"]], mode=FAST)
    for labels, mu0_value in [([0, 0, 1, 1, 2, 0], 0.3), ([0, 1, 2, 3, 4, 5], -1.0)]:
        labels = np.array(labels)
        numeric = family.with_values(f0_mu0=mu0_value)
        x = numeric.prepare_data(data)
        expected = sum(numeric.log_marginal_of(x[labels == k]) for k in np.unique(labels))
        got = terms({"z": labels, "mu0": mu0_value})
        assert got == pytest.approx(expected, rel=1e-9)
        assert expected == pytest.approx(sum(
            _independent_log_marginal(numeric, x[labels == k]) for k in np.unique(labels)),
            rel=1e-9)


@pytest.mark.parametrize(("components", "message"), [
    ([(psm.BetaBernoulli(), [0, 1]), (psm.BetaBernoulli(), [1, 2])], "disjoint"),
    ([(psm.BetaBernoulli(), [0]), (psm.BetaBernoulli(), [2])], "no family models columns"),
    ([(psm.BetaBernoulli(), [-1, 0])], ">= 0"),
    ([(psm.BetaBernoulli(), slice(0, 2))], "list of ints"),
    ([(psm.BetaBernoulli(a=[1.0, 1.0, 1.0]), [0, 1])], "data dimension 3"),
    ([(psm.BetaBernoulli(), [0], "extra")], "pair"),
    ([("not a family", [0])], "must be a family"),
    ([], "at least one"),
])
def test_bad_column_groups_raise_clear_errors(components, message):
    with pytest.raises((TypeError, ValueError), match=message):
        psm.ProductFamily(components)


def test_bad_data_names_the_sub_family():
    family = psm.ProductFamily([(psm.BetaBernoulli(), [0]), (psm.GammaPoisson(), [1])])
    with pytest.raises(ValueError, match="BetaBernoulli"):
        family.prepare_data(np.array([[0.0, 1.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match="2 entries"):
        family.prepare_data(np.zeros((3, 3)))
    with pytest.raises(TypeError, match="nested"):
        psm.ProductFamily([(family, [0, 1])])


def test_two_likelihoods_on_one_partition_name_the_product_family():
    with pm.Model():
        z = psm.DirichletProcess("z", alpha=1.0, n=3)
        psm.ConjugateMixture("a", partition=z, component=psm.BetaBernoulli(),
                             observed=np.array([0, 1, 1]))
        psm.ConjugateMixture("b", partition=z, component=psm.GammaPoisson(),
                             observed=np.array([0, 3, 1]))
        with pytest.raises(ValueError, match=r"psm\.ProductFamily\(\[\(psm\."):
            psm.discover(z)
    assert isinstance(psm.ProductFamily([(psm.BetaBernoulli(), 0)]), psm.ComponentFamily)


# ----------------------------------------------------------------- exactness through pm.sample
SMALL_DATA = np.array([[-1.0, -0.8, 1, 0], [-1.3, -0.6, 1, 0], [-0.6, -1.2, 0, 1],
                       [0.9, 1.1, 0, 1], [1.2, 0.7, 1, 1], [0.1, -0.2, 0, 1]])


def _small_family():
    return psm.ProductFamily([
        (psm.NormalInverseWishart(mu0=np.zeros(2), kappa0=0.5, nu0=4.0, psi0=np.eye(2)),
         [0, 1]),
        (psm.BetaBernoulli(a=0.3, b=0.3), [2, 3]),
    ])


class _SumOfSubFamilies:
    """Exact-posterior family built from the sub-families only (independent of the product)."""

    def __init__(self, family, keep=None):
        self.family, self.keep = family, keep

    def prepare_data(self, data):
        return np.asarray(data, dtype=np.float64)

    def log_marginal_of(self, x2d):
        parts = self.family.components if self.keep is None else [
            self.family.components[i] for i in self.keep]
        return sum(sub.log_marginal_of(x2d[:, columns]) for sub, columns in parts)


STEPS = {"gibbs": (lambda z: psm.CollapsedGibbsStep(z), 2000, 4),
         "sams": (lambda z: psm.SAMSStep(z), 4800, 12),
         "rgsm": (lambda z: psm.RGSMStep(z, n_gibbs_sweeps=0), 4800, 12),
         "pgsm": (lambda z: psm.PGSMStep(z), 4800, 12)}
SEEDS = {"gibbs": 11, "sams": 13, "rgsm": 15, "pgsm": 17}


@pytest.mark.parametrize("step_name", list(STEPS))
def test_partition_steps_are_exact_on_a_product(step_name):
    make_step, draws, thin = STEPS[step_name]
    with pm.Model():
        z = psm.DirichletProcess("z", alpha=1.0, n=SMALL_DATA.shape[0])
        psm.ConjugateMixture("y", partition=z, component=_small_family(), observed=SMALL_DATA)
        idata = pm.sample(draws=draws, tune=200, step=[make_step(z)], chains=2, cores=1,
                          progressbar=False, compute_convergence_checks=False,
                          random_seed=SEEDS[step_name])
    labels = np.asarray(idata["labels"]["z"].values)[:, ::thin].reshape(-1, 6)
    prior = psm.priors.DirichletProcessPrior(alpha=1.0)
    family = _small_family()
    assert_partition_gof(labels, exact_posterior(prior, _SumOfSubFamilies(family),
                                                 SMALL_DATA))
    # negative control: the posterior of the continuous columns only
    with pytest.raises(AssertionError, match="goodness-of-fit failed"):
        assert_partition_gof(labels, exact_posterior(prior, _SumOfSubFamilies(family, [0]),
                                                     SMALL_DATA))


# ----------------------------------------------------------------- forward sampling
def test_product_parameter_posterior_and_prior_predictive():
    family = _small_family()
    x = family.prepare_data(SMALL_DATA[:4])
    rng = np.random.default_rng(5)
    draws = np.array([family.sample_parameters(rng, x)["f1_probability"]
                      for _ in range(3000)])
    ones = SMALL_DATA[:4, 2:].sum(0)
    assert_expectations(draws, (0.3 + ones) / (0.6 + 4), "product Beta posterior")
    with pm.Model():
        z = psm.DirichletProcess("z", alpha=1.0, n=6)
        psm.ConjugateMixture("y", partition=z, component=_small_family(), observed=SMALL_DATA)
        prior = pm.sample_prior_predictive(20, random_seed=6)
    y = np.asarray(prior["prior_predictive"]["y"].values)
    assert y.shape[-2:] == (6, 4)
    assert set(np.unique(y[..., 2:])) <= {0.0, 1.0}


def test_sample_components_on_a_product_with_a_random_hyperparameter():
    import arviz as az
    import xarray as xr

    with pm.Model() as model:
        mu0 = pm.Normal("mu0", 0.0, 1.0)
        z = psm.DirichletProcess("z", alpha=1.0, n=6)
        psm.ConjugateMixture("y", partition=z, observed=SMALL_DATA, component=psm.ProductFamily([
            (psm.NormalKnownCovariance(mu0=mu0, sigma0=0.01, sigma=1.0), [0, 1]),
            (psm.BetaBernoulli(a=0.3, b=0.3), [2, 3])]))
    found = psm.discover(z, model).numeric_family({"mu0": 5.0, "z": np.zeros(6, int)})
    assert isinstance(found, psm.ProductFamily)
    assert float(found.hyperparameters["f0_mu0"]) == 5.0
    posterior = xr.Dataset({"z": (("chain", "draw", "z_dim_0"), np.zeros((1, 2, 6), int)),
                            "mu0": (("chain", "draw"), np.array([[5.0, -5.0]]))})
    if int(az.__version__.split(".")[0]) >= 1:
        data = xr.DataTree.from_dict({"posterior": posterior})
    else:
        data = az.InferenceData(posterior=posterior)
    group = psm.sample_components(data, model=model, random_seed=2)["component_parameters"]
    assert set(group.data_vars) == {"f0_mean", "f1_probability", "cluster_size"}
    means = np.asarray(group["f0_mean"].values)[0, :, 0]  # tight prior: means near each mu0
    assert np.all(means[0] > 4.0) and np.all(means[1] < -4.0)
    assert group["f1_probability"].shape == (1, 2, 1, 2)
