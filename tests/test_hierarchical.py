"""Random hyperparameters at O(clusters) per evaluation (ClusterStatistics).

* The mixture's log density for every family equals the numeric core's sum of log marginals
  and its gradient in every continuous hyperparameter equals the core's finite differences.
* The statistics are computed once per label vector (counted), recomputed when the labels
  change (negative control: a cache that never invalidates gives wrong values).
* The per-cluster sums of the statistics' compiled loop equal the bincount reference bit for
  bit (negative control: a wrong index changes them).
* The partition priors' log density is a function of the block sizes computed once.
* Hyperparameters outside their domain give -inf, never NaN.
* Data far from zero relative to their spread (offsets 1e2..1e8) give the log density of the
  centred data to 1e-6 relative.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest

import pymc_splitmerge as psm
from pymc_splitmerge.components import (
    BetaBernoulli,
    NormalInverseGamma,
    NormalInverseWishart,
    NormalKnownCovariance,
)
from pymc_splitmerge.core.cluster_sums import (
    cluster_index,
    cluster_index_reference,
    cluster_sums,
    cluster_sums_reference,
)
from pymc_splitmerge.distributions import statistics
from pymc_splitmerge.distributions.mixture import conjugate_mixture_log_likelihood
from pymc_splitmerge.priors import ShiftedPoisson
from tests.test_family_contract import CASES

MODE = "FAST_COMPILE"
LABELS = np.array([0, 2, 3, 0, 3, 3, 5, 2, 0, 5, 6, 6])


def _labels(n):
    return LABELS[:n] if n <= LABELS.size else np.r_[LABELS, np.zeros(n - LABELS.size, int)]


def _continuous_hyperparameters(family):
    """Name -> float64 array of every hyperparameter that may be random (not the static
    category counts, not ragged vectors)."""
    out = {}
    for name, value in family.hyperparameters.items():
        if name.endswith("n_categories"):
            continue
        try:
            array = np.asarray(value, dtype=np.float64)
        except ValueError:
            continue
        if name.endswith("concentration") and array.ndim == 2:
            continue  # full Dirichlet vectors (a list per attribute): not read as a matrix
        out[name] = array
    return out


def _core_log_likelihood(family, x, labels, values):
    numeric = family.with_values(**values)
    return sum(numeric.log_marginal_of(x[labels == j]) for j in np.unique(labels))


def _symmetric_direction(rng, value):
    direction = rng.normal(size=value.shape)
    return 0.5 * (direction + direction.T) if value.ndim == 2 else direction


@pytest.mark.parametrize(("family", "module", "x"), CASES)
def test_log_density_and_gradient_match_the_numeric_core(family, module, x):
    """Value (1e-10) and the derivative along a random direction of every continuous
    hyperparameter (central finite differences of the numba core, 1e-6 relative)."""
    n, dim = x.shape
    labels = _labels(n)
    values = _continuous_hyperparameters(family)
    inputs = {name: pt.tensor(name, dtype="float64", shape=value.shape)
              for name, value in values.items()}
    hyper = dict(family.hyperparameters)
    hyper.update(inputs)
    data = pt.specify_shape(pt.as_tensor_variable(x), (n, dim))
    label_input = pt.lvector("labels")
    total = conjugate_mixture_log_likelihood(family, hyper, data, label_input, n)
    names = list(inputs)
    grads = pytensor.grad(total, [inputs[name] for name in names])
    function = pytensor.function([label_input, *inputs.values()], [total, *grads], mode=MODE)
    value, *gradient = function(labels, *values.values())
    expected = _core_log_likelihood(family, x, labels, values)
    np.testing.assert_allclose(value, expected, rtol=1e-10, atol=1e-10)
    rng = np.random.default_rng(7)
    for name, grad in zip(names, gradient, strict=True):
        direction = _symmetric_direction(rng, values[name])
        step = 1e-5 * max(1.0, float(np.max(np.abs(values[name]))))
        plus = _core_log_likelihood(family, x, labels, {**values, name: values[name]
                                                         + step * direction})
        minus = _core_log_likelihood(family, x, labels, {**values, name: values[name]
                                                          - step * direction})
        numeric = (plus - minus) / (2 * step)
        analytic = float(np.sum(grad * direction))
        assert analytic == pytest.approx(numeric, rel=1e-5, abs=1e-6), name


@pytest.fixture
def compute_counter(monkeypatch):
    calls = []
    original = statistics.ClusterStatistics._compute

    def counted(self, labels, values):
        calls.append(np.array(labels))
        return original(self, labels, values)

    monkeypatch.setattr(statistics.ClusterStatistics, "_compute", counted)
    return calls


def _niw_model_function(x, n):
    with pm.Model() as model:
        alpha = pm.Gamma("alpha", 2.0, 1.0)
        kappa0 = pm.Gamma("kappa0", 2.0, 2.0)
        scale = pm.HalfNormal("scale", 2.0)
        z = psm.DirichletProcess("z", alpha=alpha, n=n)
        psm.ConjugateMixture("y", partition=z, component=NormalInverseWishart(
            mu0=np.zeros(2), kappa0=kappa0, nu0=4.0, psi0=scale * np.eye(2)), observed=x)
    return model, model.compile_logp(mode=MODE), model.compile_dlogp(mode=MODE)


def _numeric_log_joint(model, point):
    """Independent value: numeric prior EPPF + core marginals + the scalar priors."""
    from pymc_splitmerge.priors import DirichletProcessPrior

    x = model.rvs_to_values[model["y"]].data
    labels = point["z"]
    alpha = np.exp(point["alpha_log__"])
    kappa0 = np.exp(point["kappa0_log__"])
    scale = np.exp(point["scale_log__"])
    family = NormalInverseWishart(mu0=np.zeros(2), kappa0=kappa0, nu0=4.0,
                                  psi0=scale * np.eye(2))
    sizes = np.bincount(labels)
    sizes = sizes[sizes > 0]
    eppf = DirichletProcessPrior(alpha).log_eppf(sizes)
    likelihood = sum(family.log_marginal_of(x[labels == j]) for j in np.unique(labels))
    if not hasattr(model, "_test_scalar_logp"):
        model._test_scalar_logp = model.compile_logp(
            vars=[model["alpha"], model["kappa0"], model["scale"]], mode=MODE)
    return eppf + likelihood + model._test_scalar_logp(point)


def test_statistics_computed_once_per_label_vector(compute_counter):
    rng = np.random.default_rng(3)
    n = 40
    x = np.r_[rng.normal(-3, 1, (20, 2)), rng.normal(3, 1, (20, 2))]
    model, logp, dlogp = _niw_model_function(x, n)
    first = np.repeat([0, 1], 20)
    second = rng.integers(0, 5, n)
    point = model.initial_point()
    per_labels = None
    for step in range(6):  # hyperparameters move, labels fixed
        point = {**point, "z": first, "kappa0_log__": np.array(0.1 * step),
                 "scale_log__": np.array(-0.2 * step), "alpha_log__": np.array(0.05 * step)}
        assert logp(point) == pytest.approx(_numeric_log_joint(model, point), rel=1e-10)
        assert np.all(np.isfinite(dlogp(point)))
        if per_labels is None:  # one computation per statistics node of logp and dlogp
            per_labels = len(compute_counter)
    assert 2 <= per_labels <= 4
    assert len(compute_counter) == per_labels  # none while only hyperparameters move
    assert all(np.array_equal(labels, first) for labels in compute_counter)
    for labels in (second, first, second):
        point = {**point, "z": labels}
        assert logp(point) == pytest.approx(_numeric_log_joint(model, point), rel=1e-10)
        assert np.all(np.isfinite(dlogp(point)))
    assert len(compute_counter) == 4 * per_labels


def test_stale_statistics_are_detected(monkeypatch):
    """Negative control: statistics never recomputed after the labels change are wrong, and
    the comparison with the independent value says so."""
    rng = np.random.default_rng(4)
    n = 30
    x = rng.normal(size=(n, 2)) + np.repeat([[0, 0], [4, 4], [-4, 4]], 10, axis=0)
    model, logp, _ = _niw_model_function(x, n)
    point = {**model.initial_point(), "z": np.repeat([0, 1, 2], 10)}
    logp(point)
    monkeypatch.setattr(statistics, "_same_inputs", lambda previous, inputs: True)
    moved = {**point, "z": rng.integers(0, 3, n)}
    assert abs(logp(moved) - _numeric_log_joint(model, moved)) > 1.0


def test_cluster_sums_compiled_equal_the_reference_bit_for_bit():
    rng = np.random.default_rng(9)
    for n, m, k in ((150, 20, 3), (37, 1, 7), (1, 4, 1), (0, 3, 2)):
        index = rng.integers(0, k, n)
        rows = rng.normal(scale=10.0, size=(n, m)) ** 3  # spread magnitudes: order matters
        compiled = cluster_sums(index, rows, k)
        reference = cluster_sums_reference(index, rows, k)
        assert compiled.shape == (k, m)
        assert compiled.tobytes() == reference.tobytes()
        if n > 1:  # negative control: one point moved to another cluster is seen
            moved = index.copy()
            moved[0] = (moved[0] + 1) % k if k > 1 else moved[0]
            if k > 1:
                assert not np.array_equal(cluster_sums(moved, rows, k), reference)
    for bad in (np.array([0, 3]), np.array([-1, 0])):
        with pytest.raises(ValueError, match="outside"):
            cluster_sums(bad, np.ones((2, 2)), 3)
        with pytest.raises(ValueError, match="outside"):
            cluster_sums_reference(bad, np.ones((2, 2)), 3)
    with pytest.raises(ValueError, match="shape"):
        cluster_sums(np.zeros(3, int), np.ones((2, 2)), 1)


def test_cluster_index_compiled_equals_the_reference():
    rng = np.random.default_rng(10)
    cases = [(rng.integers(0, 9, 150), 9), (rng.integers(-2, 12, 60), 10),  # out of range
             (np.array([5, 5, 5]), 6), (np.zeros(0, dtype=np.int64), 4)]
    for dtype in (np.int8, np.int16, np.int64, np.uint8):
        for labels, n_labels in cases:
            if dtype == np.uint8 and labels.size and labels.min() < 0:
                continue
            labels = labels.astype(dtype)
            compiled, reference = (cluster_index(labels, n_labels),
                                   cluster_index_reference(labels, n_labels))
            assert compiled[0] == reference[0]
            assert compiled[1].dtype == reference[1].dtype == np.float64
            assert compiled[1].tobytes() == reference[1].tobytes()
            assert np.array_equal(compiled[2], reference[2])
    assert not cluster_index(np.array([0, 3]), 3)[0]  # negative control: out of range seen
    assert cluster_index(np.array([0, 2]), 3)[0]
    with pytest.raises(ValueError, match="integer labels"):
        cluster_index(np.array([0.0, 1.0]), 3)


@pytest.mark.parametrize("prior", ["dp", "py", "finite", "mfm"])
def test_partition_prior_on_block_sizes(prior, compute_counter):
    n = 12
    labels = _labels(n)
    with pm.Model() as model:
        alpha = pm.Gamma("alpha", 2.0, 1.0)
        if prior == "dp":
            psm.DirichletProcess("z", alpha=alpha, n=n)
        elif prior == "py":
            discount = pm.Beta("discount", 1.0, 3.0)
            psm.PitmanYor("z", alpha=alpha, discount=discount, n=n)
        elif prior == "finite":
            psm.FiniteDirichlet("z", alpha=alpha, k=8, n=n)
        else:
            psm.MixtureOfFiniteMixtures("z", gamma=1.5, k_prior=ShiftedPoisson(2.0), n=n)
    logp = model.compile_logp(vars=[model["z"]], mode=MODE)
    dlogp = model.compile_dlogp(mode=MODE)
    op = model["z"].owner.op
    point = model.initial_point()
    for step in range(4):
        point = {**point, "z": labels, "alpha_log__": np.array(0.2 * step)}
        numeric = op.numeric_prior(*[_value(v, point, model)
                                     for v in model["z"].owner.inputs[2:-1]])
        sizes = np.bincount(labels)
        assert logp(point) == pytest.approx(numeric.log_eppf(sizes[sizes > 0]), rel=1e-10)
        assert np.all(np.isfinite(dlogp(point)))
    assert 1 <= len(compute_counter) <= 2  # logp and dlogp, at the first point only


def _value(variable, point, model):
    function = model.compile_fn(model.replace_rvs_by_values([variable])[0],
                                inputs=model.value_vars, on_unused_input="ignore",
                                point_fn=True, mode=MODE)
    return function(point)


def _domain_case(name):
    if name == "nu0":
        family = NormalInverseWishart(mu0=0.0, kappa0=1.0, nu0=pt.dscalar("h"), psi0=np.eye(2))
        return family, np.ones((6, 2)), [1.0, 0.5, -3.0]
    if name == "psi0":
        family = NormalInverseWishart(mu0=0.0, kappa0=1.0, nu0=4.0, psi0=pt.dmatrix("h"))
        return family, np.ones((6, 2)), [np.array([[1.0, 2.0], [2.0, 1.0]]), -np.eye(2)]
    if name == "kappa0":
        family = NormalInverseGamma(mu0=0.0, kappa0=pt.dscalar("h"), alpha0=1.0, beta0=1.0)
        return family, np.ones((6, 1)), [0.0, -1.0]
    if name == "sigma":
        family = NormalKnownCovariance(mu0=0.0, sigma0=1.0, sigma=pt.dmatrix("h"))
        return family, np.ones((6, 2)), [np.array([[1.0, 2.0], [2.0, 1.0]])]
    family = BetaBernoulli(a=pt.dscalar("h"), b=1.0)
    return family, np.ones((6, 1)), [0.0, -0.5]


@pytest.mark.parametrize("name", ["nu0", "psi0", "kappa0", "sigma", "a"])
def test_hyperparameter_outside_domain_gives_minus_infinity(name):
    family, x, bad_values = _domain_case(name)
    h = family.hyperparameters[name]
    with pm.Model() as model:
        z = psm.DirichletProcess("z", alpha=1.0, n=x.shape[0])
        hyper = pm.Data("h", np.eye(2) if h.ndim else 1.0)
        component = type(family)(**{**family.hyperparameters, name: hyper})
        psm.ConjugateMixture("y", partition=z, component=component, observed=x)
    logp = model.compile_logp(mode=MODE)
    point = {"z": np.array([0, 0, 1, 1, 1, 2])}
    for value in bad_values:
        hyper.set_value(np.asarray(value, dtype=np.float64))
        result = logp(point)
        assert result == -np.inf, (name, value, result)


# ------------------------------------------------------------------ precision
def _offset_model(kind, x, offset):
    with pm.Model() as model:
        z = psm.DirichletProcess("z", alpha=1.0, n=x.shape[0])
        if kind == "niw":
            component = NormalInverseWishart(mu0=np.full(2, offset), kappa0=0.5, nu0=4.0,
                                             psi0=np.eye(2))
        elif kind == "nig":
            component = NormalInverseGamma(mu0=offset, kappa0=0.5, alpha0=2.0, beta0=1.0)
        else:
            component = NormalKnownCovariance(mu0=np.full(2, offset), sigma0=2.0,
                                              sigma=np.array([[1.0, 0.3], [0.3, 0.5]]))
        psm.ConjugateMixture("y", partition=z, component=component, observed=x + offset)
    return model.compile_logp(mode=MODE)


@pytest.mark.parametrize("kind", ["niw", "nig", "nkc"])
@pytest.mark.parametrize("offset", [1e2, 1e4, 1e6, 1e8])
def test_log_density_of_data_far_from_zero(kind, offset):
    """Shifting data and prior mean together leaves the log density unchanged (< 1e-6
    relative at 1e8 x the spread; the raw-sum graph was off by 0.17 nats at 1e6)."""
    rng = np.random.default_rng(11)
    dim = 1 if kind == "nig" else 2
    x = rng.normal(size=(60, dim)) + np.repeat(np.arange(3)[:, None] * 2.0, 20, axis=0)
    point = {"z": np.repeat([0, 1, 2], 20)}
    centred = _offset_model(kind, x, 0.0)(point)
    shifted = _offset_model(kind, x, offset)(point)
    # the shift itself rounds the data by up to half an ulp of the offset
    assert shifted == pytest.approx(centred, rel=1e-6)


# ------------------------------------------------------------------ starts
@pytest.mark.parametrize(("initvals", "named"), [
    ({"kappa0": -1.0}, "'kappa0'"),
    ({"scale": -2.0}, "'scale'"),
    ([{"kappa0": 1.0}, {"kappa0": 1.0, "scale": 0.0}], r"initvals\[1\]"),
])
def test_start_of_family_hyperparameter_outside_domain_is_refused(initvals, named):
    """A start outside the family's domain is refused before the first draw, naming it (not
    NUTS's "Bad initial energy"); a start inside it samples."""
    x = np.random.default_rng(5).normal(size=(8, 2))
    with pm.Model():
        kappa0 = pm.Gamma("kappa0", 2.0, 2.0)
        scale = pm.HalfNormal("scale", 2.0)
        z = psm.DirichletProcess("z", alpha=1.0, n=8)
        psm.ConjugateMixture("y", partition=z, component=NormalInverseWishart(
            mu0=np.zeros(2), kappa0=kappa0, nu0=4.0, psi0=scale * np.eye(2)), observed=x)
        with pytest.raises(ValueError, match=rf"{named}.*outside its domain"):
            pm.sample(draws=2, tune=2, chains=len(initvals) if isinstance(initvals, list)
                      else 1, cores=1, initvals=initvals, progressbar=False,
                      compute_convergence_checks=False)
        idata = pm.sample(draws=2, tune=2, chains=1, initvals={"kappa0": 0.5, "scale": 2.0},
                          progressbar=False, compute_convergence_checks=False, random_seed=1)
    assert np.all(idata["posterior"]["kappa0"].values > 0)


def test_gradients_of_the_statistics_ops_raise_no_deprecation_warning():
    """The three Ops' derivatives go through the hook the running PyTensor calls
    (``pullback`` on the pymc 6 line, where ``L_op`` warns with a FutureWarning that users
    of NUTS on a hierarchical model would see)."""
    import warnings

    labels = pt.as_tensor_variable(np.array([0, 1, 1, 0]))
    values = pt.dmatrix("values")
    matrices = pt.tensor3("matrices")
    sizes_and_sums = statistics.cluster_statistics(labels, 2, values)
    objective = (sizes_and_sums[2] ** 2).sum() + statistics.batched_log_det(matrices).sum() \
        + statistics.batched_inverse(matrices).sum()
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        gradients = pytensor.grad(objective, [values, matrices])
    stack = np.stack([np.eye(2) * 2.0, np.array([[2.0, 0.5], [0.5, 1.0]])])
    value = np.arange(8.0).reshape(4, 2)
    got = pytensor.function([values, matrices], gradients, mode=MODE)(value, stack)
    sums = np.array([value[[0, 3]].sum(0), value[[1, 2]].sum(0)])
    np.testing.assert_allclose(got[0], 2 * sums[[0, 1, 1, 0]])
    inverse = np.linalg.inv(stack)
    expected = np.transpose(inverse, (0, 2, 1)) - np.einsum(
        "kji,kil,klm->kjm", np.transpose(inverse, (0, 2, 1)), np.ones((2, 2, 2)),
        np.transpose(inverse, (0, 2, 1)))
    np.testing.assert_allclose(got[1], expected, rtol=1e-10)


# ------------------------------------------------------------------ rebuild per draw
def test_rebuilt_family_equals_a_fresh_one_and_bad_values_still_error():
    """The partition step rebuilds the numeric family at every new hyperparameter value
    (``with_values``, params packed once per binding): the result is bitwise the family
    built from scratch, and a value outside the domain still raises naming the parameter."""
    rng = np.random.default_rng(3)
    symbolic = NormalInverseWishart(mu0=pt.dvector("m"), kappa0=pt.dscalar("k"), nu0=6.0,
                                    psi0=pt.dmatrix("p"))
    symbolic.prepare_data(np.zeros((0, 4)))
    for _ in range(3):
        a = rng.normal(size=(4, 4))
        values = {"mu0": rng.normal(size=4), "kappa0": rng.gamma(2.0),
                  "psi0": a @ a.T + np.eye(4)}
        rebuilt = symbolic.with_values(**values)
        fresh = NormalInverseWishart(nu0=6.0, **values)
        np.testing.assert_array_equal(rebuilt.params, fresh.params)
        np.testing.assert_array_equal(rebuilt.empty_stats, fresh.empty_stats)
    good = {"mu0": np.zeros(4), "kappa0": 1.0}
    skew = np.eye(4)
    skew[0, 1] = 1e-9  # above the symmetry tolerance (1e-10 of the largest entry)
    with pytest.raises(ValueError, match="'psi0' must be symmetric"):
        symbolic.with_values(psi0=skew, **good)
    skew[0, 1] = 1e-11  # rounding: accepted and symmetrised
    assert symbolic.with_values(psi0=skew, **good).params is not None
    with pytest.raises(ValueError, match="'psi0' must be positive definite"):
        symbolic.with_values(psi0=np.diag([1.0, 1.0, -1.0, 1.0]), **good)
    with pytest.raises(ValueError, match="'kappa0' must be > 0"):
        symbolic.with_values(psi0=np.eye(4), mu0=np.zeros(4), kappa0=0.0)
