"""The clusterwise-regression family (``NormalLinearRegression``) against exact answers.

The generic family contract (``tests/test_family_contract.py``) runs on the family's
``examples``; collapsed Gibbs through ``pm.sample`` for the four priors is in the matrix of
``tests/test_sampler_matrix.py``.  Here:

* the log marginal likelihood against numerical integration over the coefficients and the
  variance (2-D quadrature, P = 1) and over the variance of the Gaussian marginal (1-D, P = 2),
  none of which shares algebra with the family's posterior update; the incremental statistics
  row against a rebuild from the rows;
* the pytensor logp of ``ConjugateMixture`` (numeric and random hyperparameters) against the
  numeric log marginal;
* every kernel (collapsed Gibbs, SAMS, RGSM, PGSM, ARM) one-step invariant for the exact
  posterior (enumeration, four priors); SAMS, RGSM, PGSM, ARM alone through ``pm.sample`` and
  SMC (evidence unbiased, ``psm.sample_smc``) against enumeration; negative controls: the
  exact posteriors of the model that ignores the covariates (Normal-inverse-Gamma on ``y``)
  and of a model with the coefficients' prior covariance doubled, both rejected by the same
  test on draws that pass against the right one;
* the posterior parameter sampler's moments, posterior predictive replicates through PyMC and
  ``psm.sample_components``.
"""

from __future__ import annotations

import functools
import zlib

import numpy as np
import pymc as pm
import pytest
from conftest import PRIORS, thinned_labels
from kernel_checks import one_step_invariance_draws
from moment_checks import assert_expectations
from scipy import integrate, special, stats

import pymc_splitmerge as psm
from pymc_splitmerge.components import normal_linear_regression as module
from pymc_splitmerge.kernels.arm import arm_move
from pymc_splitmerge.kernels.gibbs import gibbs_sweep
from pymc_splitmerge.kernels.pgsm import pgsm_move
from pymc_splitmerge.kernels.rgsm import rgsm_move
from pymc_splitmerge.kernels.sams import sams_move
from pymc_splitmerge.kernels.state import PartitionState
from pymc_splitmerge.testing import (
    GOF_PVALUE_THRESHOLD,
    assert_partition_gof,
    exact_posterior,
)

# Six points on two crossing lines (intercept and slope): a posterior spread over tens of
# partitions (largest probability 0.13 under the DP with alpha = 1).
COVARIATE = np.array([-1.0, -0.6, -0.2, 0.3, 0.7, 1.0])
RESPONSE = np.array([-1.1, 1.4, -0.3, 0.4, 1.6, -1.8])
DATA = np.column_stack([RESPONSE, np.ones(6), COVARIATE])


def make_family():
    return psm.NormalLinearRegression(beta0=0.0, V0=[[1.0, 0.0], [0.0, 3.0]], a0=2.0, b0=0.2)


def _seed(*parts):
    return zlib.crc32("/".join(map(str, ("regression", *parts))).encode())


# ------------------------------------------------------------------ log marginal identities
def test_log_marginal_two_dimensional_quadrature():
    """P = 1: integrate likelihood x N(beta | beta0, s2 V0) x InvGamma(s2 | a0, b0) over both."""
    family = psm.NormalLinearRegression(beta0=0.4, V0=1.5, a0=2.5, b0=0.7)
    rows = family.prepare_data(np.column_stack([[0.8, 1.9, 0.1, 1.2], [0.5, 1.4, -0.3, 1.0]]))
    y, design = rows[:, 0], rows[:, 1:]
    log_marginal = family.log_marginal_of(rows)

    # plain math (no scipy.stats in the integrand, which dblquad calls ~10^5 times)
    log_constant = 2.5 * np.log(0.7) - special.gammaln(2.5) - log_marginal

    def integrand(beta, variance):
        squares = np.sum((y - design[:, 0] * beta) ** 2) + (beta - 0.4) ** 2 / 1.5
        return np.exp(log_constant - 0.5 * (len(y) + 1) * np.log(2.0 * np.pi * variance)
                      - 0.5 * np.log(1.5) - 0.5 * squares / variance
                      - 3.5 * np.log(variance) - 0.7 / variance)

    value, _ = integrate.dblquad(integrand, 0.0, np.inf, -np.inf, np.inf, epsabs=1e-11,
                                 epsrel=1e-10)
    assert value == pytest.approx(1.0, abs=1e-7)
    # the same integral of another family's marginal is not 1 (the check has power)
    other = psm.NormalLinearRegression(beta0=0.4, V0=1.5, a0=2.5, b0=0.9)
    other = other.log_marginal_of(other.prepare_data(rows))
    assert abs(np.exp(log_marginal - other) - 1.0) > 1e-3


def test_log_marginal_quadrature_over_the_variance():
    """P = 2: y | s2 ~ N(X beta0, s2 (I + X V0 X')), integrated over s2 ~ InvGamma(a0, b0)."""
    _, family, raw = module.NormalLinearRegression.examples(np.random.default_rng(4))[1]
    rows = family.prepare_data(raw)
    full = family._full
    y, design = rows[:, 0], rows[:, 1:]
    shape = np.eye(len(y)) + design @ full["V0"] @ design.T
    log_marginal = family.log_marginal_of(rows)

    def integrand(variance):
        return np.exp(stats.multivariate_normal(design @ full["beta0"], variance * shape)
                      .logpdf(y) + stats.invgamma.logpdf(variance, full["a0"], scale=full["b0"])
                      - log_marginal)

    value, _ = integrate.quad(integrand, 0.0, np.inf, epsabs=1e-12, epsrel=1e-11, limit=400)
    assert value == pytest.approx(1.0, abs=1e-8)


def test_incremental_statistics_equal_a_rebuild():
    """600 random adds/removes: the row equals ``stats_of`` of its rows (sums and cache)."""
    for _, family, raw in module.NormalLinearRegression.examples(np.random.default_rng(5)):
        rows = family.prepare_data(raw)
        rng = np.random.default_rng(6)
        row = family.empty_stats
        members: list[int] = []
        for _ in range(600):
            if members and rng.random() < 0.45:
                index = members.pop(int(rng.integers(len(members))))
                psm.components.dispatch.remove_point(family.family_id, family.params, row,
                                                     rows[index])
            else:
                index = int(rng.integers(rows.shape[0]))
                members.append(index)
                psm.components.dispatch.add_point(family.family_id, family.params, row,
                                                  rows[index])
            rebuilt = family.stats_of(rows[members])
            np.testing.assert_allclose(row, rebuilt, rtol=1e-9, atol=1e-9)


def test_bad_input_is_refused_with_a_message():
    with pytest.raises(ValueError, match="'beta0' has 3 coefficients but 'V0' is 2 x 2"):
        psm.NormalLinearRegression(beta0=[0.0, 0.0, 0.0], V0=np.eye(2))
    with pytest.raises(ValueError, match="'V0' must be positive definite"):
        psm.NormalLinearRegression(V0=[[1.0, 2.0], [2.0, 1.0]])
    with pytest.raises(ValueError, match="'a0' must be > 0"):
        psm.NormalLinearRegression(a0=0.0)
    with pytest.raises(ValueError, match="at least one covariate"):
        psm.NormalLinearRegression().prepare_data(np.ones((4, 1)))
    with pytest.raises(ValueError, match="3 entries"):
        make_family().prepare_data(np.ones((4, 2)))


# ------------------------------------------------------------------ through PyMC: logp
@pytest.mark.parametrize("random_hyperparameter", [False, True])
def test_pymc_logp_equals_the_numeric_log_marginal(random_hyperparameter):
    with pm.Model() as model:
        z = psm.DirichletProcess("z", alpha=1.0, n=len(DATA))
        b0 = pm.Gamma("b0", 2.0, 4.0) if random_hyperparameter else 0.2
        family = psm.NormalLinearRegression(beta0=0.0, V0=[[1.0, 0.0], [0.0, 3.0]], a0=2.0,
                                            b0=b0)
        psm.ConjugateMixture("y", partition=z, component=family, observed=DATA)
    logp = model.compile_fn(model.logp(vars=[model["y"]], sum=True), inputs=model.value_vars,
                            on_unused_input="ignore")
    point = model.initial_point()
    for labels in ([0, 0, 0, 0, 0, 0], [0, 1, 0, 1, 2, 2], [0, 1, 2, 3, 4, 5], [1, 1, 0, 0, 3, 1]):
        labels = np.asarray(labels)
        point["z"] = labels
        if random_hyperparameter:
            point["b0_log__"] = np.log(0.35)
        numeric = make_family().with_values(b0=0.35 if random_hyperparameter else 0.2)
        expected = sum(numeric.log_marginal_of(DATA[labels == j]) for j in np.unique(labels))
        assert float(logp(point)) == pytest.approx(expected, rel=1e-11, abs=1e-11)


# ------------------------------------------------------------------ kernels: one step
KERNELS = {
    "gibbs": gibbs_sweep,
    "sams": sams_move,
    "rgsm": functools.partial(rgsm_move, n_intermediate_scans=2),
    "pgsm": pgsm_move,
}


@pytest.mark.parametrize("prior_name", sorted(PRIORS))
@pytest.mark.parametrize("kernel_name", sorted(KERNELS))
def test_kernel_one_step_invariance(kernel_name, prior_name):
    rng = np.random.default_rng(_seed("one-step", kernel_name, prior_name))
    samples, exact = one_step_invariance_draws(KERNELS[kernel_name], PRIORS[prior_name],
                                               make_family(), DATA, 3000, rng)
    assert_partition_gof(samples, exact)


@pytest.mark.parametrize("prior_name", sorted(PRIORS))
def test_arm_one_step_invariance(prior_name):
    """z, z^a, z^b independent exact draws; one ARM move of z (``tests/test_arm.py``)."""
    rng = np.random.default_rng(_seed("arm", prior_name))
    family = make_family()
    x = family.prepare_data(DATA)
    prior = PRIORS[prior_name]
    exact = exact_posterior(prior, family, x)
    tables = prior.tables(x.shape[0])
    starts = exact.sample(3000, rng)
    library = exact.sample(6000, rng)
    out = np.empty_like(starts)
    for row, start in enumerate(starts):
        state = PartitionState(family, x, start)
        arm_move(state, *tables, rng, library[2 * row], library[2 * row + 1])
        out[row] = state.labels()
    assert_partition_gof(out, exact)


# ------------------------------------------------------------------ through pm.sample
def _sample(step_factory, *, draws, tune, seed, prior_name="dirichlet_process", chains=2):
    from test_sampler_matrix import FIXED_ALPHA, model_prior

    with pm.Model():
        z = model_prior(prior_name, len(DATA), FIXED_ALPHA.get(prior_name),
                        "normal_linear_regression")
        psm.ConjugateMixture("y", partition=z, component=make_family(), observed=DATA)
        idata = pm.sample(draws=draws, tune=tune, chains=chains, cores=1, step=step_factory(z),
                          random_seed=seed, progressbar=False, compute_convergence_checks=False)
    return idata


def _exact(prior_name="dirichlet_process", family=None, data=None):
    """Exact posterior of the test model, or of ``family`` on ``data`` (default: ``y``)."""
    from test_sampler_matrix import FIXED_ALPHA, numeric_prior_factory

    prior = numeric_prior_factory(prior_name, "normal_linear_regression")(
        FIXED_ALPHA.get(prior_name))
    if family is None:
        return exact_posterior(prior, make_family(), DATA)
    return exact_posterior(prior, family, RESPONSE if data is None else data)


@pytest.mark.parametrize("step_name", ["sams", "rgsm", "pgsm"])
def test_split_merge_step_alone_matches_exact(step_name):
    from test_sampler_matrix import STEP_FACTORIES, schedule

    draws, tune, thin = schedule(step_name)
    idata = _sample(STEP_FACTORIES[step_name], draws=draws, tune=tune,
                    seed=_seed("pm", step_name))
    assert f"{step_name}_n_clusters" in idata["sample_stats"]
    assert "gibbs_changed" not in idata["sample_stats"]
    assert_partition_gof(thinned_labels(idata, thin, chains=2), _exact())


def test_arm_step_matches_exact():
    from test_arm import ARM_THIN

    idata = _sample(lambda z: psm.ARMStep(z, library="ensemble"), draws=1200, tune=200,
                    seed=_seed("pm", "arm"), chains=4)
    assert np.asarray(idata["sample_stats"]["arm_accepted"].values).mean() > 0
    assert_partition_gof(thinned_labels(idata, ARM_THIN), _exact())


def test_negative_controls_are_rejected():
    """Gibbs draws that pass against the exact law are rejected, by the same χ² test, against
    the exact law of the model that ignores the covariates (Normal-inverse-Gamma on ``y``) and
    of the model with the coefficients' prior covariance doubled (total variation 0.14)."""
    from test_sampler_matrix import schedule

    draws, tune, thin = schedule("gibbs")
    idata = _sample(lambda z: psm.CollapsedGibbsStep(z), draws=draws, tune=tune,
                    seed=_seed("pm", "gibbs-control"))
    samples = thinned_labels(idata, thin, chains=2)
    assert_partition_gof(samples, _exact())
    covariates_ignored = psm.NormalInverseGamma(mu0=0.0, kappa0=1.0, alpha0=2.0, beta0=0.2)
    with pytest.raises(AssertionError):
        assert_partition_gof(samples, _exact(family=covariates_ignored))
    doubled = psm.NormalLinearRegression(beta0=0.0, V0=[[2.0, 0.0], [0.0, 6.0]], a0=2.0, b0=0.2)
    with pytest.raises(AssertionError):
        assert_partition_gof(samples, _exact(family=doubled, data=DATA))


# ------------------------------------------------------------------ SMC
@pytest.mark.parametrize("prior_name", sorted(PRIORS))
def test_smc_evidence_is_unbiased(prior_name):
    from test_smc import _unbiasedness_statistic

    family = make_family()
    rng = np.random.default_rng(_seed("smc", prior_name))
    _, pvalue, details = _unbiasedness_statistic(PRIORS[prior_name], family,
                                                 family.prepare_data(DATA[:5]), rng)
    assert pvalue >= GOF_PVALUE_THRESHOLD, details


def test_sample_smc_posterior_and_evidence():
    from pymc_splitmerge.analysis._arviz_compat import get_group

    with pm.Model():
        z = psm.DirichletProcess("z", alpha=1.0, n=len(DATA))
        psm.ConjugateMixture("y", partition=z, component=make_family(), observed=DATA)
        idata = psm.sample_smc(draws=400, chains=4, rejuvenation=2, random_seed=3,
                               progressbar=False, cores=1)
    exact = _exact()
    log_z = np.asarray(get_group(idata, "sample_stats")["log_marginal_likelihood"])
    table = psm.compare_evidence({"dp": idata})
    assert abs(table.loc["dp", "log_evidence"] - exact.log_evidence) < max(
        5 * table.loc["dp", "mcse"], 0.05), (log_z, exact.log_evidence)
    labels = np.asarray(get_group(idata, "posterior")["z"]).reshape(-1, len(DATA))
    assert_partition_gof(labels[::4], exact)


# ------------------------------------------------------------------ parameters, predictive
def test_posterior_parameter_moments():
    family = make_family()
    rows = family.prepare_data(DATA[:4])
    mean, precision, shape, scale = module._posterior(family, rows)
    covariance = np.linalg.inv(precision) * scale / (shape - 1.0)  # E[s2] V_n
    rng = np.random.default_rng(8)
    draws = []
    for _ in range(4000):
        parameters = family.sample_parameters(rng, rows)
        beta = parameters["coefficients"]
        draws.append(np.r_[beta, (beta - mean) ** 2, parameters["variance"]])
    exact = np.r_[mean, np.diag(covariance), scale / (shape - 1.0)]
    assert_expectations(np.array(draws), exact, "NormalLinearRegression")
    prior_draws = []
    for _ in range(4000):
        parameters = family.sample_parameters(rng)
        beta = parameters["coefficients"]
        prior_draws.append(np.r_[beta, (beta - mean) ** 2, parameters["variance"]])
    with pytest.raises(AssertionError, match="differ from the exact"):
        assert_expectations(np.array(prior_draws), exact, "prior draws")


def test_posterior_predictive_and_sample_components():
    with pm.Model() as model:
        z = psm.DirichletProcess("z", alpha=1.0, n=len(DATA))
        psm.ConjugateMixture("y", partition=z, component=make_family(), observed=DATA)
        idata = pm.sample(draws=50, tune=20, chains=2, cores=1, random_seed=2,
                          progressbar=False, compute_convergence_checks=False)
        predictive = pm.sample_posterior_predictive(idata, random_seed=3, progressbar=False)
        with pytest.raises(NotImplementedError, match="covariates"):
            pm.sample_prior_predictive(draws=5, random_seed=1)
    replicates = np.asarray(predictive["posterior_predictive"]["y"].values)
    assert replicates.shape == (2, 50, len(DATA), 3)
    np.testing.assert_array_equal(replicates[..., 1:],
                                  np.broadcast_to(DATA[:, 1:], replicates[..., 1:].shape))
    assert np.all(np.isfinite(replicates[..., 0]))
    assert not np.allclose(replicates[..., 0], DATA[:, 0])
    psm.sample_components(idata, model=model, random_seed=1)
    parameters = idata["component_parameters"]
    coefficients = np.asarray(parameters["coefficients"].values)
    assert coefficients.shape[:2] == (2, 50) and coefficients.shape[-1] == 2
    variance = np.asarray(parameters["variance"].values)
    sizes = np.asarray(parameters["cluster_size"].values)
    assert np.all((variance > 0) == (sizes > 0))
