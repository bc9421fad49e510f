"""Tests of the PyMC layer: partition priors, ConjugateMixture and discover().

The pytensor log-probabilities are compared with the numeric core (``priors/`` EPPF and
``components/`` log marginals), which is itself tested against plain numpy references.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest

import pymc_splitmerge.distributions as psd
from pymc_splitmerge import components as comp
from pymc_splitmerge import priors as numeric_priors
from pymc_splitmerge.distributions.priors import label_dtype

N_POINTS = 7
FINITE_K = 3
ALPHA = 1.3
DISCOUNT = 0.3
GAMMA = 0.8
K_PRIOR = numeric_priors.ShiftedPoisson(2.0)
# Most graphs are compiled in FAST_COMPILE mode to keep the file fast (cold numba/C caches);
# the default mode is exercised by discover(), the bounds and the prior-predictive tests.
FAST = "FAST_COMPILE"


def _family_cases():
    rng = np.random.default_rng(12345)
    n = N_POINTS
    return {
        "normal_inverse_wishart": (
            lambda: comp.NormalInverseWishart(
                mu0=np.array([0.1, -0.2]), kappa0=0.5, nu0=4.0,
                psi0=np.array([[1.0, 0.3], [0.3, 2.0]])),
            rng.normal(size=(n, 2))),
        "normal_known_covariance": (
            lambda: comp.NormalKnownCovariance(
                mu0=np.array([0.1, -0.2]), sigma0=np.array([[2.0, 0.3], [0.3, 1.0]]),
                sigma=np.array([[1.0, 0.2], [0.2, 0.5]])),
            rng.normal(size=(n, 2))),
        "normal_inverse_gamma": (
            lambda: comp.NormalInverseGamma(mu0=0.3, kappa0=0.7, alpha0=2.0, beta0=1.5),
            rng.normal(size=n)),
        "beta_bernoulli": (
            lambda: comp.BetaBernoulli(a=np.array([0.5, 1.0, 2.0]), b=1.5),
            rng.integers(0, 2, size=(n, 3))),
        "dirichlet_categorical_full": (
            lambda: comp.DirichletCategorical(concentration=[[1.0, 2.0, 3.0], [0.5, 0.5]],
                                              n_categories=[3, 2]),
            np.stack([rng.integers(0, 3, n), rng.integers(0, 2, n)], axis=1)),
        "dirichlet_categorical_symmetric": (
            lambda: comp.DirichletCategorical(concentration=0.7, n_categories=4),
            rng.integers(0, 4, size=(n, 2))),
        "gamma_poisson": (
            lambda: comp.GammaPoisson(shape=2.0, rate=np.array([1.0, 0.5])),
            rng.poisson(2.0, size=(n, 2))),
        "grid": (
            lambda: comp.GridComponent(log_prior_grid=np.log([0.2, 0.3, 0.5])),
            rng.normal(size=(n, 3))),
    }


FAMILY_CASES = _family_cases()

NUMERIC_PRIORS = {
    "z_dp": numeric_priors.DirichletProcessPrior(ALPHA),
    "z_py": numeric_priors.PitmanYorPrior(ALPHA, DISCOUNT),
    "z_fd": numeric_priors.FiniteDirichletPrior(ALPHA, FINITE_K),
    "z_mfm": numeric_priors.MixtureOfFiniteMixturesPrior(GAMMA, K_PRIOR),
}


def _all_priors(n=N_POINTS):
    return {
        "z_dp": psd.DirichletProcess("z_dp", alpha=ALPHA, n=n),
        "z_py": psd.PitmanYor("z_py", alpha=ALPHA, discount=DISCOUNT, n=n),
        "z_fd": psd.FiniteDirichlet("z_fd", alpha=ALPHA, k=FINITE_K, n=n),
        "z_mfm": psd.MixtureOfFiniteMixtures("z_mfm", gamma=GAMMA, k_prior=K_PRIOR, n=n),
    }


def _numeric_log_joint(prior, family, x2d, labels):
    sizes = np.bincount(labels, minlength=len(labels))
    log_likelihood = sum(family.log_marginal_of(x2d[labels == j]) for j in np.unique(labels))
    return prior.log_eppf(sizes) + log_likelihood


@pytest.mark.parametrize("family_name", list(FAMILY_CASES))
def test_logp_matches_numeric_core_for_every_prior(family_name):
    """compile_logp terms of (z, y) equal log EPPF + sum of log marginals, every prior."""
    make_family, data = FAMILY_CASES[family_name]
    family = make_family()
    with pm.Model() as model:
        partitions = _all_priors()
        for name, z in partitions.items():
            # one family object per mixture: each binds its own data dimension
            psd.ConjugateMixture(f"y_{name}", partition=z, component=make_family(),
                                 observed=data)
    x2d = family.prepare_data(data)
    terms = model.compile_logp(sum=False, mode=FAST)
    names = [rv.name for rv in model.free_RVs] + [rv.name for rv in model.observed_RVs]
    rng = np.random.default_rng(7)
    for _ in range(3):
        point = {name: rng.integers(0, FINITE_K, size=N_POINTS) for name in partitions}
        values = dict(zip(names, terms(point), strict=True))
        for name, labels in point.items():
            expected = _numeric_log_joint(NUMERIC_PRIORS[name], family, x2d, labels)
            got = values[name] + values[f"y_{name}"]
            np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10)


def test_logp_invariant_to_relabelling_and_minus_inf_outside_range():
    _, data = FAMILY_CASES["normal_inverse_gamma"]
    with pm.Model() as model:
        partitions = _all_priors()
        for name, z in partitions.items():
            psd.ConjugateMixture(f"y_{name}", partition=z,
                                 component=comp.NormalInverseGamma(), observed=data)
    logp = model.compile_logp(mode=FAST)
    rng = np.random.default_rng(3)
    base = {name: rng.integers(0, FINITE_K, size=N_POINTS) for name in partitions}
    reference = logp(base)
    assert np.isfinite(reference)
    for _ in range(3):
        # a bijection of the label values (within [0, k) so the finite prior stays in range)
        permutation = rng.permutation(FINITE_K)
        relabelled = {name: permutation[labels] for name, labels in base.items()}
        np.testing.assert_allclose(logp(relabelled), reference, rtol=1e-12)
    term_logp = model.compile_logp(sum=False, mode=FAST)
    for bad_label in (-1, N_POINTS):
        point = {name: labels.copy() for name, labels in base.items()}
        for labels in point.values():
            labels[2] = bad_label
        values = term_logp(point)
        assert all(value == -np.inf for value in values)
    # the finite Dirichlet prior only has labels 0..k-1
    point = {name: labels.copy() for name, labels in base.items()}
    point["z_fd"][0] = FINITE_K
    values = dict(zip([rv.name for rv in model.free_RVs + model.observed_RVs],
                      term_logp(point), strict=True))
    assert values["z_fd"] == -np.inf
    assert np.isfinite(values["z_dp"])


def test_finite_dirichlet_with_more_components_than_points():
    """With k > n, labels in [n, k) are valid for both the prior and the mixture."""
    data = np.array([0.1, -0.5, 2.0])
    with pm.Model() as model:
        z = psd.FiniteDirichlet("z", alpha=0.5, k=6, n=3)
        psd.ConjugateMixture("y", partition=z, component=comp.NormalInverseGamma(),
                             observed=data)
    logp = model.compile_logp(mode=FAST)
    np.testing.assert_allclose(logp({"z": np.array([5, 0, 5])}),
                               logp({"z": np.array([0, 1, 0])}), rtol=1e-12)


def test_draws_are_canonical_labels_and_initial_point_is_one_cluster():
    with pm.Model() as model:
        partitions = _all_priors()
    initial = model.initial_point()
    for name in partitions:
        np.testing.assert_array_equal(initial[name], np.zeros(N_POINTS, dtype=np.int64))
    for name, z in partitions.items():
        draws = pm.draw(z, draws=50, random_seed=11, mode=FAST)
        # compact labels: the smallest signed integer dtype holding n
        assert draws.shape == (50, N_POINTS) and draws.dtype == np.dtype(label_dtype(N_POINTS))
        for labels in draws:
            # canonical: order of first appearance 0, 1, ..., K-1
            _, first = np.unique(labels, return_index=True)
            np.testing.assert_array_equal(labels[np.sort(first)], np.arange(len(first)))
        if name == "z_fd":
            assert draws.max() < FINITE_K


def test_dirichlet_process_draws_mean_number_of_clusters():
    alpha, n, draws = 1.7, 8, 1000
    with pm.Model():
        z = psd.DirichletProcess("z", alpha=alpha, n=n)
    samples = pm.draw(z, draws=draws, random_seed=2024, mode=FAST)
    n_clusters = samples.max(axis=1) + 1
    i = np.arange(n)
    expected = np.sum(alpha / (alpha + i))
    variance = np.sum(alpha * i / (alpha + i) ** 2)
    standard_error = np.sqrt(variance / draws)
    assert abs(n_clusters.mean() - expected) < 4.0 * standard_error


def test_sample_prior_predictive_samples_partition_and_data():
    _, data = FAMILY_CASES["normal_inverse_wishart"]
    with pm.Model() as model:
        alpha = pm.Gamma("alpha", 2.0, 1.0)
        z = psd.DirichletProcess("z", alpha=alpha, n=N_POINTS)
        psd.ConjugateMixture("y", partition=z, component=comp.NormalInverseWishart(
            mu0=0.0, kappa0=1.0, nu0=4.0, psi0=np.eye(2)), observed=data)
        result = pm.sample_prior_predictive(draws=5, random_seed=3)
    z_draws = np.asarray(result["prior"]["z"]).reshape(5, N_POINTS)
    y_draws = np.asarray(result["prior_predictive"]["y"]).reshape(5, N_POINTS, 2)
    assert z_draws.min() >= 0 and z_draws.max() < N_POINTS
    assert np.all(np.isfinite(y_draws))
    assert model.compile_logp(mode=FAST)(model.initial_point()) > -np.inf


def test_random_hyperparameters_in_logp_and_discovery():
    _, data = FAMILY_CASES["normal_inverse_wishart"]
    with pm.Model() as model:
        alpha = pm.Gamma("alpha", 2.0, 1.0)
        discount = pm.Beta("discount", 1.0, 3.0)
        mu0 = pm.Data("mu0", np.array([0.5, -0.5]))
        kappa0 = pm.HalfNormal("kappa0", 1.0)
        z = psd.PitmanYor("z", alpha=alpha, discount=discount, n=N_POINTS)
        psd.ConjugateMixture("y", partition=z, component=comp.NormalInverseWishart(
            mu0=mu0, kappa0=kappa0, nu0=4.0, psi0=np.eye(2)), observed=data)
    found = psd.discover(z, model=model)
    assert found.random_hyperparameters
    assert found.concentration_var is alpha and found.discount_var is discount
    assert found.prior_class is numeric_priors.PitmanYorPrior
    assert found.observed_var is model["y"] and found.value_var is model.rvs_to_values[z]
    np.testing.assert_allclose(found.data, data)
    assert psd.discover(z, model=model) is found  # cached

    point = model.initial_point()
    point["alpha_log__"] = np.log(2.5)
    point["kappa0_log__"] = np.log(0.4)
    point["discount_logodds__"] = np.log(0.2 / 0.8)
    point["z"] = np.array([0, 1, 1, 0, 2, 2, 0])
    prior = found.numeric_prior(point)
    family = found.numeric_family(point)
    assert prior.alpha == pytest.approx(2.5) and prior.discount == pytest.approx(0.2)
    np.testing.assert_allclose(family.hyperparameters["kappa0"], 0.4)
    np.testing.assert_allclose(family.hyperparameters["mu0"], [0.5, -0.5])
    values = found.hyperparameter_values(point)
    assert values["alpha"] == pytest.approx(2.5)
    assert values["family"]["nu0"] == 4.0

    logp_terms = model.compile_logp(vars=[z, model["y"]], mode=FAST)
    expected = _numeric_log_joint(prior, family, family.prepare_data(data), point["z"])
    np.testing.assert_allclose(logp_terms(point), expected, rtol=1e-10)

    with model:
        pm.set_data({"mu0": np.array([1.0, 2.0])})
    np.testing.assert_allclose(found.numeric_family(point).hyperparameters["mu0"], [1.0, 2.0])
    family = found.numeric_family(point)
    expected = _numeric_log_joint(prior, family, family.prepare_data(data), point["z"])
    np.testing.assert_allclose(logp_terms(point), expected, rtol=1e-10)


def test_random_scalar_hyperparameter_of_broadcasting_family():
    """A family whose data dimension comes only from the data (scalar symbolic a)."""
    data = np.array([[0, 1, 1], [1, 1, 0], [0, 0, 0], [1, 0, 1]])
    with pm.Model() as model:
        a = pm.Gamma("a", 2.0, 2.0)
        z = psd.DirichletProcess("z", alpha=1.0, n=4)
        psd.ConjugateMixture("y", partition=z, component=comp.BetaBernoulli(a=a, b=2.0),
                             observed=data)
    found = psd.discover(z, model=model)
    assert found.concentration_var is None and found.random_hyperparameters
    point = {"a_log__": np.log(0.7), "z": np.array([0, 0, 1, 0])}
    family = found.numeric_family(point)
    assert family.data_dim == 3
    expected = _numeric_log_joint(found.numeric_prior(point), family,
                                  family.prepare_data(data), point["z"])
    np.testing.assert_allclose(model.compile_logp(vars=[z, model["y"]], mode=FAST)(point),
                               expected,
                               rtol=1e-10)


def test_invalid_random_concentration_gives_minus_inf():
    with pm.Model() as model:
        alpha = pm.Data("alpha", -1.0)
        psd.DirichletProcess("z", alpha=alpha, n=4)
    assert model.compile_logp()({"z": np.zeros(4, dtype=np.int64)}) == -np.inf


_DEFAULTS = {
    "dp": {"alpha": 1.0},
    "py": {"alpha": 1.0, "discount": 0.2},
    "fd": {"alpha": 1.0, "k": 3},
    "mfm": {"gamma": 1.0, "k_prior": K_PRIOR},
}
_DISTRIBUTIONS = {
    "dp": psd.DirichletProcess,
    "py": psd.PitmanYor,
    "fd": psd.FiniteDirichlet,
    "mfm": psd.MixtureOfFiniteMixtures,
}


def _build(kind="dp", prior_kwargs=None, family=None, data=None):
    kwargs = {"n": 4} | _DEFAULTS[kind] | (prior_kwargs or {})
    with pm.Model():
        z = _DISTRIBUTIONS[kind]("z", **kwargs)
        if family is not None:
            psd.ConjugateMixture("y", partition=z, component=family, observed=data)


@pytest.mark.parametrize(
    "kind, prior_kwargs, error, match",
    [
        ("dp", {"alpha": 0.0}, ValueError, "alpha"),
        ("dp", {"alpha": -2.0}, ValueError, "alpha"),
        ("py", {"discount": 1.0}, ValueError, "discount"),
        ("py", {"discount": -0.1}, ValueError, "discount"),
        ("py", {"alpha": -0.5, "discount": 0.3}, ValueError, "-discount"),
        ("fd", {"alpha": 0.0}, ValueError, "alpha"),
        ("fd", {"k": 0}, ValueError, "k"),
        ("fd", {"k": 2.5}, TypeError, "k"),
        ("dp", {"n": 0}, ValueError, "n"),
        ("dp", {"n": 2.5}, TypeError, "n"),
        ("mfm", {"gamma": -1.0}, ValueError, "gamma"),
        ("mfm", {"k_prior": 3}, TypeError, "k_prior"),
    ],
)
def test_bad_prior_parameters(kind, prior_kwargs, error, match):
    with pytest.raises(error, match=match):
        _build(kind, prior_kwargs)


def test_random_gamma_for_mixture_of_finite_mixtures_is_rejected():
    with pytest.raises(TypeError, match="gamma"), pm.Model():
        gamma = pm.Gamma("gamma", 1.0, 1.0)
        psd.MixtureOfFiniteMixtures("z", gamma=gamma, k_prior=K_PRIOR, n=4)


@pytest.mark.parametrize(
    "family, data, match",
    [
        (comp.NormalInverseGamma(), np.zeros(5), "n=4"),
        (comp.NormalInverseGamma(), np.array([0.0, np.nan, 1.0, 2.0]), "NaN"),
        (comp.BetaBernoulli(), np.array([[0, 1], [1, 2], [0, 0], [1, 1]]), "binary"),
        (comp.GammaPoisson(), np.array([1, -1, 2, 0]), "non-negative"),
    ],
)
def test_bad_data(family, data, match):
    with pytest.raises(ValueError, match=match):
        _build(family=family, data=data)


def test_bad_data_with_symbolic_hyperparameters():
    with pytest.raises(ValueError, match="NaN"), pm.Model():
        z = psd.DirichletProcess("z", alpha=1.0, n=3)
        b = pm.Gamma("b", 1.0, 1.0)
        psd.ConjugateMixture("y", partition=z, component=comp.NormalInverseGamma(beta0=b),
                             observed=np.array([0.0, np.inf, 1.0]))
    with pytest.raises(ValueError, match="binary"), pm.Model():
        z = psd.DirichletProcess("z", alpha=1.0, n=3)
        a = pm.Gamma("a", 1.0, 1.0)
        psd.ConjugateMixture("y", partition=z, component=comp.BetaBernoulli(a=a),
                             observed=np.array([0, 1, 3]))


def test_non_positive_definite_psi0_is_rejected():
    with pytest.raises(ValueError, match="psi0"):
        _build(family=comp.NormalInverseWishart(
            mu0=0.0, kappa0=1.0, nu0=4.0, psi0=np.array([[1.0, 2.0], [2.0, 1.0]])),
            data=np.zeros((4, 2)))


def test_discover_errors():
    with pm.Model() as model:
        z = psd.DirichletProcess("z", alpha=1.0, n=3)
        other = pm.Normal("other")
    with pytest.raises(ValueError, match="no ConjugateMixture"):
        psd.discover(z, model=model)
    with pytest.raises(TypeError, match="partition variable"):
        psd.discover(other, model=model)
    with pytest.raises(TypeError, match="model"):
        psd.discover(z)

    data = np.array([0.0, 1.0, 2.0])
    with pm.Model() as model:
        z = psd.DirichletProcess("z", alpha=1.0, n=3)
        psd.ConjugateMixture("y1", partition=z, component=comp.NormalInverseGamma(),
                             observed=data)
        psd.ConjugateMixture("y2", partition=z, component=comp.NormalInverseGamma(),
                             observed=data)
    with pytest.raises(ValueError, match="only one is supported"):
        psd.discover(z, model=model)

    with pm.Model() as model:
        z = psd.DirichletProcess("z", alpha=1.0, n=3)
        psd.ConjugateMixture("y", partition=z, component=comp.NormalInverseGamma(),
                             observed=data)
        pm.Normal("w", mu=z.astype("float64"), observed=data)
    with pytest.raises(ValueError, match="the observed variable .w. of the model reads the labels"):
        psd.discover(z, model=model)



_OBJECT_MODE_SCRIPT = """
import warnings
import numpy as np, pymc as pm
import pymc_splitmerge.distributions as psd
from pymc_splitmerge import components as comp
from pymc_splitmerge.distributions.priors import partition_prior_distribution
from pymc_splitmerge.priors import DirichletProcessPrior, ShiftedPoisson

generated = partition_prior_distribution("dp_generated_for_test", DirichletProcessPrior)
with pm.Model() as model:
    z = generated("z", alpha=1.0, n=5)
    psd.ConjugateMixture("y", partition=z, component=comp.BetaBernoulli(1.0, 1.0),
                         observed=np.zeros((5, 2)))
    written = [psd.DirichletProcess("a", alpha=1.0, n=5),
               psd.PitmanYor("b", alpha=1.0, discount=0.2, n=5),
               psd.FiniteDirichlet("c", alpha=1.0, k=3, n=5),
               psd.MixtureOfFiniteMixtures("d", gamma=1.0, k_prior=ShiftedPoisson(1.0), n=5)]
ops = [z.owner.op, model["y"].owner.op, *(rv.owner.op for rv in written)]
assert {type(op) for op in ops[2:]} == set(psd.PARTITION_PRIOR_RV_TYPES)
ops.append(pm.Normal.dist().owner.op)  # negative control: must still warn
with warnings.catch_warnings(record=True) as record:
    for op in ops:
        warnings.warn(f"Numba will use object mode to run {op}'s perform method. Set "
                      "`pytensor.config.compiler_verbose = True` to see more details.",
                      UserWarning)
print([str(w.message).split("{")[0] for w in record])
"""


def test_object_mode_warning_is_silenced_for_our_ops_only():
    """PyMC 6 runs our NumPy-drawing ops in numba's object mode, warning once per compiled
    function; the filters registered at import (and by ``partition_prior_distribution``)
    silence exactly our ops.  In a subprocess: pytest discards filters added while
    collecting."""
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", _OBJECT_MODE_SCRIPT], capture_output=True,
                            text=True, timeout=300, check=True)
    assert result.stdout.strip().splitlines()[-1] == (
        "['Numba will use object mode to run normal_rv']")
