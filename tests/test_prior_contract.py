"""The "adding a prior" contract (docs/contracts.md), checked on every registered prior.

Each prior class in :data:`pymc_splitmerge.priors.PRIOR_REGISTRY` must pass the same checks:

* its numpy EPPF sums to one over all set partitions of ``n = 1..7`` points (enumeration);
* ``tables(n)`` agree with ``log_v`` / ``log_w`` and their ratios are EPPF conditionals;
* its pytensor graph (``log_eppf_graph``) and the PyMC distribution's logp equal the numpy
  EPPF on random label vectors (and are ``-inf`` outside the label range);
* its numba log EPPF (if it has updatable hyperparameters) equals the numpy one and its
  ``parameter_bounds`` contain the current values;
* its urn weights (closed form or from the tables) are the conditionals of the EPPF, and
  urn draws follow the enumerated EPPF (χ², suite-wide threshold);
* bad hyperparameters raise ``ValueError`` / ``TypeError`` naming the parameter.

Negative controls: deliberately broken priors (a wrong ``log_w``, a graph or a numba EPPF that
differs from the numpy EPPF, an urn with a wrong new-cluster weight) fail the same checks.
"""

from __future__ import annotations

import math

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from scipy.special import gammaln, logsumexp

import pymc_splitmerge
from pymc_splitmerge import priors as priors_package
from pymc_splitmerge.core.enumerate import enumerate_partitions
from pymc_splitmerge.distributions.priors import (
    PARTITION_PRIOR_DISTRIBUTIONS,
    PARTITION_PRIOR_RV_TYPES,
    partition_prior_distribution,
)
from pymc_splitmerge.priors import (
    PRIOR_REGISTRY,
    DirichletProcessPrior,
    FiniteDirichletPrior,
    GibbsTypePrior,
    PitmanYorPrior,
    register_prior,
    sample_partitions,
)
from pymc_splitmerge.testing import assert_partition_gof, exact_prior

# Hyperparameters of each registered prior come from the class (``examples()``: valid ones, the
# first also gets the urn χ² test; ``invalid_examples()``: with the error type and a word the
# message must contain), so adding a prior adds no line here.
EXAMPLES = {name: prior_class.examples() for name, prior_class in PRIOR_REGISTRY.items()}
INVALID = {name: prior_class.invalid_examples() for name, prior_class in PRIOR_REGISTRY.items()}
URN_DRAWS, URN_N = 20000, 5
FAST = "FAST_COMPILE"  # the graphs are tiny: skip the C compilation


def _examples():
    return [pytest.param(name, params, id=f"{name}-{i}")
            for name in PRIOR_REGISTRY for i, params in enumerate(EXAMPLES.get(name, []))]


def _build(name, params):
    return PRIOR_REGISTRY[name](**params)


# ------------------------------------------------------------------------- the checks
def check_eppf_normalised(prior, n_max=7):
    """The EPPF summed over all set partitions (grouped by block-size multiset) is one."""
    for n in range(1, n_max + 1):
        multiplicity = {}
        for row in enumerate_partitions(n):
            signature = tuple(sorted(np.bincount(row).tolist()))
            multiplicity[signature] = multiplicity.get(signature, 0) + 1
        total = logsumexp([math.log(count) + prior.log_eppf(np.array(signature))
                           for signature, count in multiplicity.items()])
        assert abs(total) < 1e-10, f"{prior!r}: EPPF of n={n} sums to exp({total})"


def check_tables(prior):
    for n in (0, 1, 4, 7):
        log_v_table, log_w_table = prior.tables(n)
        assert log_v_table.shape == log_w_table.shape == (n + 2,)
        assert log_w_table[0] == 0.0 and log_v_table[0] == (0.0 if n == 0 else -np.inf)
        log_v = np.array([prior.log_v(n, k) for k in range(n + 2)])
        finite = np.isfinite(log_v)
        np.testing.assert_array_equal(np.isfinite(log_v_table), finite)
        np.testing.assert_allclose(log_v_table[finite], log_v[finite], rtol=0, atol=1e-13)
        np.testing.assert_allclose(log_w_table[1:], prior.log_w(np.arange(1, n + 2)),
                                   rtol=0, atol=1e-13)
    rng = np.random.default_rng(7)
    for _ in range(10):  # join / new weights from tables(N) are ratios of the EPPF
        sizes = np.bincount(prior.sample(int(rng.integers(1, 8)), rng))
        log_v_table, log_w_table = prior.tables(int(sizes.sum()) + 1)
        k = sizes.size
        log_new = log_v_table[k + 1] - log_v_table[k] + log_w_table[1]
        eppf_new = prior.log_eppf(np.append(sizes, 1))
        for j, m in enumerate(sizes):
            joined = sizes.copy()
            joined[j] += 1
            log_join = log_w_table[m + 1] - log_w_table[m]
            if eppf_new == -np.inf:
                assert log_new == -np.inf
            else:
                assert log_join - log_new == pytest.approx(
                    prior.log_eppf(joined) - eppf_new, abs=1e-10)


def _graph_params(prior):
    """Symbolic scalars for the prior's real inputs, Python values for the static ones."""
    cls = type(prior)
    inputs, params, values = [], {}, []
    for name in cls.parameter_names:
        if name in cls.static_parameter_names:
            params[name] = getattr(prior, name)
        else:
            variable = pt.dscalar(name)
            inputs.append(variable)
            params[name] = variable
            values.append(getattr(prior, name))
    return inputs, params, values


def check_graph_matches_numpy(prior, n=7):
    """``log_eppf_graph`` (block sizes) equals ``log_eppf`` on random partitions."""
    cls = type(prior)
    inputs, params, values = _graph_params(prior)
    sizes = pt.lvector("sizes")
    function = pytensor.function([sizes, *inputs], cls.log_eppf_graph(pt, sizes, n, **params),
                               mode=FAST)
    rng = np.random.default_rng(11)
    n_labels = cls.label_range(n, **{k: getattr(prior, k) for k in cls.parameter_names})
    for _ in range(20):
        labels = rng.integers(0, min(n_labels, int(rng.integers(1, n + 1))), size=n)
        counts = np.bincount(labels, minlength=n_labels)
        expected = prior.log_eppf(counts)
        got = float(function(counts, *values))
        if expected == -np.inf:
            assert got == -np.inf, (prior, counts, got)
        else:
            assert got == pytest.approx(expected, abs=1e-10), (prior, counts)


def check_numba_eppf(prior):
    """The numba log EPPF (hyperparameter updates) equals the numpy one, where provided."""
    cls = type(prior)
    if cls.numba_log_eppf is None:
        with pytest.raises(ValueError, match="no hyperparameter"):
            cls.parameter_bounds(cls.parameter_names[0], {})
        return
    theta = np.array([float(getattr(prior, name)) for name in cls.parameter_names])
    rng = np.random.default_rng(14)
    for _ in range(20):
        n = int(rng.integers(1, 12))
        sizes = np.bincount(rng.integers(0, int(rng.integers(1, n + 1)), size=n), minlength=n)
        expected = prior.log_eppf(sizes)
        got = cls.numba_log_eppf(sizes, n, theta)
        assert got == pytest.approx(expected, abs=1e-10) or got == expected == -np.inf, (
            prior, sizes)
    values = {name: getattr(prior, name) for name in cls.parameter_names}
    for name in cls.parameter_names:
        if name in cls.static_parameter_names:
            continue
        lower, upper = cls.parameter_bounds(name, values)
        assert lower <= values[name] < upper, (prior, name, lower, upper)


def check_distribution_logp(name, prior, n=6, distribution=None):
    """The PyMC distribution's logp (labels) is the numpy EPPF; out-of-range labels: -inf."""
    distribution = distribution or PARTITION_PRIOR_DISTRIBUTIONS[name]
    variable = distribution.dist(**{k: getattr(prior, k) for k in type(prior).parameter_names},
                                 n=n)
    value = pt.lvector("z")
    logp = pytensor.function([value], pm.logp(variable, value), mode=FAST)
    rng = np.random.default_rng(12)
    n_labels = type(prior).label_range(n, **{k: getattr(prior, k)
                                             for k in type(prior).parameter_names})
    for _ in range(10):
        labels = rng.integers(0, n_labels, size=n)
        expected = prior.log_eppf(np.bincount(labels))
        got = float(logp(labels))
        assert got == pytest.approx(expected, abs=1e-10) or got == expected == -np.inf
    outside = np.zeros(n, dtype=np.int64)
    outside[0] = n_labels
    assert float(logp(outside)) == -np.inf


def check_urn_weights(prior):
    """The urn's weights (closed form or default) equal the tables' EPPF conditionals."""
    cls = type(prior)
    rng = np.random.default_rng(13)
    rows = [prior.sample(int(rng.integers(1, 9)), rng) for _ in range(12)]
    for labels in rows:
        n_points = labels.size + 1
        sizes = np.zeros((1, n_points + 1), dtype=np.int64)
        counts = np.bincount(labels)
        sizes[0, :counts.size] = counts
        k = np.array([counts.size])
        log_join, log_new = cls.urn_log_weights(cls.urn_parameters([prior]), n_points, sizes, k)
        log_v_table, log_w_table = prior.tables(n_points)
        expected_join = log_w_table[counts + 1] - log_w_table[counts]
        with np.errstate(invalid="ignore"):  # -inf - -inf when a broken urn overfills
            expected_new = log_v_table[k[0] + 1] - log_v_table[k[0]] + log_w_table[1]
        got = np.append(log_join[0, :counts.size], log_new[0])
        expected = np.append(expected_join, expected_new)
        np.testing.assert_array_equal(np.isfinite(got), np.isfinite(expected))
        finite = np.isfinite(expected)
        shift = got[0] - expected[0]  # any per-row constant is allowed
        np.testing.assert_allclose(got[finite] - shift, expected[finite], rtol=0, atol=1e-10)


def check_urn_law(prior, seed):
    samples = prior.sample(URN_N, np.random.default_rng(seed), size=URN_DRAWS)
    assert samples.shape == (URN_DRAWS, URN_N)
    assert_partition_gof(samples, exact_prior(prior, URN_N))


# ------------------------------------------------------------------------- the tests
def test_every_registered_prior_is_covered():
    """Adding a prior: its module (with ``examples``) and one registry line are enough."""
    rv_names = {rv_type.name: rv_type for rv_type in PARTITION_PRIOR_RV_TYPES}
    for name, prior_class in PRIOR_REGISTRY.items():
        assert issubclass(prior_class, GibbsTypePrior)
        assert EXAMPLES.get(name) and INVALID.get(name), (
            f"give {prior_class.__name__} examples() and invalid_examples()")
        assert rv_names[name].prior_class is prior_class
        assert PARTITION_PRIOR_DISTRIBUTIONS[name].rv_type is rv_names[name]
        assert set(prior_class.static_parameter_names) <= set(prior_class.parameter_names)


def test_every_registered_prior_is_exported():
    """The registries, not hand-kept lists, give the exports (``priors/__init__.py`` and
    ``pymc_splitmerge/__init__.py``)."""
    for name, prior_class in PRIOR_REGISTRY.items():
        assert prior_class.__name__ in priors_package.__all__
        assert getattr(priors_package, prior_class.__name__) is prior_class
        distribution = PARTITION_PRIOR_DISTRIBUTIONS[name]
        assert distribution.__name__ in pymc_splitmerge.__all__
        assert getattr(pymc_splitmerge, distribution.__name__) is distribution
    assert all(hasattr(priors_package, name) for name in priors_package.__all__)


def test_register_prior_rejects_bad_input():
    with pytest.raises(TypeError, match="GibbsTypePrior"):
        register_prior("dirichlet_process_copy", dict)
    with pytest.raises(ValueError, match="already registered"):
        register_prior("dirichlet_process", PitmanYorPrior)
    assert register_prior("dirichlet_process", DirichletProcessPrior) is DirichletProcessPrior


@pytest.mark.parametrize(("name", "params"), _examples())
def test_numpy_eppf_and_tables(name, params):
    prior = _build(name, params)
    check_eppf_normalised(prior)
    check_tables(prior)
    check_urn_weights(prior)
    check_numba_eppf(prior)


@pytest.mark.parametrize(("name", "params"), _examples())
def test_parameters_are_attributes_and_label_range_holds_samples(name, params):
    """The step's start check reads ``getattr(prior, name)`` for every ``parameter_names``
    entry and ``label_range`` for the labels' bound: both must agree with the urn's draws."""
    prior = _build(name, params)
    values = {key: getattr(prior, key) for key in type(prior).parameter_names}
    limit = type(prior).label_range(6, **values)
    draws = prior.sample(6, np.random.default_rng(1), size=200)
    assert draws.min() >= 0 and draws.max() < limit


@pytest.mark.parametrize(("name", "params"), _examples())
def test_pytensor_graph_matches_numpy(name, params):
    prior = _build(name, params)
    check_graph_matches_numpy(prior)
    check_distribution_logp(name, prior)


# the distribution generated from a prior class alone (what a newly registered prior gets);
# MFM is left out: its static inputs (k_prior) are objects, kept as Op properties by hand
_GENERATED = [case for case in _examples() if case.values[0] != "mixture_of_finite_mixtures"]


@pytest.mark.parametrize(("name", "params"), _GENERATED)
def test_generated_distribution_matches_numpy(name, params):
    prior = _build(name, params)
    generated = partition_prior_distribution(f"{name}_generated", type(prior))
    assert generated is not PARTITION_PRIOR_DISTRIBUTIONS[name]
    assert generated.rv_type.prior_class is type(prior)
    check_distribution_logp(name, prior, distribution=generated)
    n = 7
    variable = generated.dist(**params, n=n)
    assert variable.dtype == PARTITION_PRIOR_DISTRIBUTIONS[name].dist(**params, n=n).dtype
    draws = pm.draw(variable, draws=200, random_seed=3)
    assert draws.shape == (200, n)
    assert draws.min() >= 0 and draws.max() < type(prior).label_range(n, **params)
    for bad, error, word in INVALID[name]:
        with pytest.raises(error, match=word):
            generated.dist(**bad, n=n)


def test_generated_distribution_negative_control():
    """The generated distribution uses the class's own graph: a wrong graph is caught."""
    generated = partition_prior_distribution("graph_differs", _GraphDiffers)
    with pytest.raises(AssertionError):
        check_distribution_logp("pitman_yor", _GraphDiffers(1.0, 0.4), distribution=generated)


@pytest.mark.parametrize("name", list(PRIOR_REGISTRY))
def test_urn_law_matches_enumerated_eppf(name):
    check_urn_law(_build(name, EXAMPLES[name][0]), seed=sum(map(ord, name)))


def test_urn_batch_with_different_hyperparameters():
    """Rows of one batch use their own prior (the Geweke marginal simulator relies on it)."""
    priors = [PitmanYorPrior(0.5, 0.3), PitmanYorPrior(3.0, 0.1)] * (URN_DRAWS // 2)
    labels = sample_partitions(priors, URN_N, np.random.default_rng(21))
    assert_partition_gof(labels[1::2], exact_prior(priors[1], URN_N))


@pytest.mark.parametrize("name", list(PRIOR_REGISTRY))
def test_invalid_hyperparameters_are_rejected_with_the_name(name):
    for params, error, word in INVALID[name]:
        with pytest.raises(error, match=word):
            _build(name, params)


# ------------------------------------------------------------------------- negative controls
class _WrongBlockWeight(DirichletProcessPrior):
    """Broken: W(m) = Gamma(m + 1) instead of Gamma(m) (numpy and graph agree)."""

    def _log_w(self, m):
        return gammaln(m + 1.0)

    @classmethod
    def log_w_graph(cls, pt, m, *, alpha):
        return pt.gammaln(m + 1.0)


class _GraphDiffers(PitmanYorPrior):
    """Broken: the graph's W drops the 1/Gamma(1 - d) normaliser."""

    @classmethod
    def log_w_graph(cls, pt, m, *, alpha, discount):
        return pt.gammaln(m - discount)


class _WrongUrn(FiniteDirichletPrior):
    """Broken: the urn forgets that at most k clusters exist (new weight alpha)."""

    @classmethod
    def urn_parameters(cls, priors):
        return np.array([prior.alpha for prior in priors])

    @classmethod
    def urn_log_weights(cls, parameters, n_points, sizes, n_clusters):
        with np.errstate(divide="ignore"):
            return np.log(sizes + parameters[:, None]), np.log(parameters)


class _NumbaIgnoresDiscount(PitmanYorPrior):
    """Broken: the numba EPPF is the Dirichlet process's (drops the discount)."""

    numba_log_eppf = staticmethod(DirichletProcessPrior.numba_log_eppf)


def test_negative_controls_fail_the_same_checks():
    with pytest.raises(AssertionError, match="sums to"):
        check_eppf_normalised(_WrongBlockWeight(1.0))
    with pytest.raises(AssertionError):
        check_graph_matches_numpy(_GraphDiffers(1.0, 0.4))
    with pytest.raises(AssertionError):
        check_numba_eppf(_NumbaIgnoresDiscount(1.0, 0.4))
    broken_urn = _WrongUrn(0.7, 2)
    with pytest.raises(AssertionError):
        check_urn_weights(broken_urn)
    with pytest.raises(AssertionError, match="goodness-of-fit failed"):
        check_urn_law(broken_urn, seed=5)
