"""The family contract (``docs/contracts.md``, "Adding a family"), for every registered family.

Every class of :data:`pymc_splitmerge.components.registry.FAMILIES` is tested on its own
``examples`` by the same generic tests, so a family added to the registry is covered without
writing a test:

* the registry: ids, names and classes unique, every family class of the package registered,
  the generated numba switch up to date (negative control: a registry with one more family
  generates a different switch), every numba leaf ``@njit(cache=True)`` in the family's module;
* the numba core against the module's plain numpy/scipy references (``reference_log_marginal``,
  ``reference_log_predictive``): log marginal, predictive, the chain rule in two orders,
  add/remove round trips, the batch helpers, the cached predictive form along long random
  add/remove sequences (to 1e-10) and in the empty row;
* the pytensor log marginal (``log_marginal_graph``) against the references, with empty slots;
* validation (NaN, wrong width, unknown hyperparameters, symbolic-data checks that agree with
  ``prepare_data``) and the forward samplers (shapes, domains, ``sample_data``).

A class that is not registered keeps ``family_id = -1`` and is refused by the numba core
(negative control).
"""

from __future__ import annotations

import importlib

import numba
import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest

from pymc_splitmerge.components import ComponentFamily, dispatch, registry
from pymc_splitmerge.components.gamma_poisson import GammaPoisson
from pymc_splitmerge.distributions.mixture import conjugate_mixture_log_likelihood

RTOL = 1e-9
ATOL = 1e-9
TOLERANCE = 1e-10


def _contract_cases():
    """(family, module, prepared data) for every example of every registered family."""
    cases = []
    for entry in registry.FAMILIES:
        rng = np.random.default_rng(20240601 + entry.family_id)
        module = importlib.import_module(entry.family_class.__module__)
        for label, family, raw in entry.family_class.examples(rng):
            cases.append(pytest.param(family, module, family.prepare_data(raw), id=label))
    return cases


CASES = _contract_cases()


# ------------------------------------------------------------------ the registry
def test_registry_ids_names_and_classes():
    ids = [entry.family_id for entry in registry.FAMILIES]
    names = [entry.name for entry in registry.FAMILIES]
    assert len(set(ids)) == len(ids) and len(set(names)) == len(names)
    for entry in registry.FAMILIES:
        assert entry.family_class.family_id == entry.family_id
        assert registry.entry_for(entry.family_class) is entry
        assert entry.is_leaf == (entry.family_class.numba_leaves is not None)
    # every family class defined in the package is registered
    package_classes, todo = [], [ComponentFamily]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__module__.startswith("pymc_splitmerge.components.") and cls is not \
                ComponentFamily:
            package_classes.append(cls)
    registered = {entry.family_class for entry in registry.FAMILIES}
    assert set(package_classes) <= registered, set(package_classes) - registered


def test_every_registered_family_has_examples():
    labels = [case.id for case in CASES]
    assert len(set(labels)) == len(labels)
    for entry in registry.FAMILIES:
        examples = entry.family_class.examples(np.random.default_rng(0))
        assert examples, entry.name
        for _, family, raw in examples:
            assert type(family) is entry.family_class and len(raw) >= 8


def test_generated_leaf_dispatch_is_up_to_date():
    """Fails after a registry change until ``python -m pymc_splitmerge.components`` is run."""
    on_disk = registry.LEAF_DISPATCH_PATH.read_text()
    assert on_disk == registry.leaf_dispatch_source(), (
        "components/_leaf_dispatch.py is out of date: run `python -m pymc_splitmerge.components` "
        "and delete the numba caches (find . -name '*.nb[ic]' -delete)")
    for entry in registry.FAMILIES:
        assert f"{entry.constant} = {entry.family_id}\n" in on_disk
        if entry.is_leaf:
            for function in entry.family_class.numba_leaves:
                if function is not None:
                    assert f"    {function.py_func.__name__}," in on_disk


class _Unregistered(GammaPoisson):
    """A family class missing from the registry (negative controls)."""

    family_id = -1


def test_unregistered_family_changes_the_switch_and_is_refused():
    extended = (*registry.FAMILIES, registry.FamilyEntry(99, "unregistered", _Unregistered))
    assert registry.leaf_dispatch_source(extended) != registry.LEAF_DISPATCH_PATH.read_text()
    family = _Unregistered(shape=1.0, rate=1.0)
    x = family.prepare_data(np.array([[1.0, 2.0]]))
    with pytest.raises(ValueError, match="unknown family_id"):
        dispatch.log_predictive(family.family_id, family.params, family.empty_stats, x[0])
    with pytest.raises(KeyError, match="not registered"):
        registry.entry_for(ComponentFamily)


@pytest.mark.parametrize("entry", [e for e in registry.FAMILIES if e.is_leaf],
                         ids=lambda e: e.name)
def test_numba_leaves_are_cached_njit_functions_of_the_family_module(entry):
    leaves = entry.family_class.numba_leaves
    for field, function in zip(leaves._fields, leaves, strict=True):
        if function is None:
            assert field == "log_predictive_many"
            continue
        assert isinstance(function, numba.core.registry.CPUDispatcher), field
        assert function._cache.__class__.__name__ != "NullCache", f"{field} not cache=True"
        assert function.py_func.__module__ == entry.family_class.__module__, field


# ------------------------------------------------------------------ numba core vs references
@pytest.mark.parametrize(("family", "module", "x"), CASES)
def test_log_marginal_matches_reference(family, module, x):
    for n in (1, 2, len(x)):
        numba_value = family.log_marginal_of(x[:n])
        assert np.isclose(numba_value, module.reference_log_marginal(family, x[:n]),
                          rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize(("family", "module", "x"), CASES)
def test_log_predictive_matches_reference(family, module, x):
    for n in (0, 1, 4, len(x) - 1):
        row = family.stats_of(x[:n])
        for new in (x[-1], x[0]):
            assert np.isclose(family.log_predictive(new, row),
                              module.reference_log_predictive(family, new, x[:n]),
                              rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize(("family", "module", "x"), CASES)
def test_chain_rule_in_two_orders(family, module, x):
    rng = np.random.default_rng(7)
    expected = module.reference_log_marginal(family, x)
    for _ in range(2):
        order = rng.permutation(len(x))
        row = family.empty_stats
        total = 0.0
        for i in order:
            total += dispatch.log_predictive(family.family_id, family.params, row, x[i])
            dispatch.add_point(family.family_id, family.params, row, x[i])
        assert np.isclose(total, expected, rtol=RTOL, atol=ATOL)
        assert np.isclose(dispatch.log_marginal(family.family_id, family.params, row), expected,
                          rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize(("family", "module", "x"), CASES)
def test_add_remove_round_trip(family, module, x):
    rng = np.random.default_rng(11)
    params, family_id = family.params, family.family_id
    empty = family.empty_stats
    assert dispatch.log_marginal(family_id, params, empty) == 0.0
    assert family.log_marginal_of(x[:0]) == 0.0
    # all points in, all points out (random order): the empty row exactly or to 1e-10
    row = family.empty_stats
    for i in rng.permutation(len(x)):
        dispatch.add_point(family_id, params, row, x[i])
    for i in rng.permutation(len(x)):
        dispatch.remove_point(family_id, params, row, x[i])
    np.testing.assert_allclose(row, empty, rtol=0, atol=1e-10)
    # a base cluster plus some points, then removal of those points: the base statistics
    base = family.stats_of(x[:4])
    row = base.copy()
    for i in range(4, len(x)):
        dispatch.add_point(family_id, params, row, x[i])
    assert np.allclose(row, family.stats_of(x), rtol=1e-10, atol=1e-10)
    for i in rng.permutation(np.arange(4, len(x))):
        dispatch.remove_point(family_id, params, row, x[i])
    # the trailing history entries (update counters) legitimately differ
    cluster = family.cluster_columns
    np.testing.assert_allclose(row[cluster], base[cluster], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize(("family", "module", "x"), CASES)
def test_batch_helpers_match_single_calls(family, module, x):
    params, family_id = family.params, family.family_id
    stats_table = np.stack([family.stats_of(x[:n]) for n in range(4)])
    slots = np.array([3, 0, 2, 1, 3], dtype=np.int64)
    out = np.full(6, 123.0)
    dispatch.log_predictive_many(family_id, params, stats_table, slots, 4, x[-1], out)
    expected = [family.log_predictive(x[-1], stats_table[s]) for s in slots[:4]]
    np.testing.assert_allclose(out[:4], expected, rtol=1e-12, atol=1e-12)
    assert np.all(out[4:] == 123.0)
    index = np.array([5, 1, 3], dtype=np.int64)
    row = dispatch.stats_from_rows(family_id, params, family.empty_stats, x, index)
    assert np.allclose(row, family.stats_of(x[[1, 3, 5]]), rtol=1e-10, atol=1e-10)


def _close(value, expected):
    return abs(value - expected) <= TOLERANCE * max(1.0, abs(expected))


def check_random_add_remove_sequence(family, module, x):
    """Every cached evaluation equals the reference along a random add/remove sequence."""
    rng = np.random.default_rng(2024)
    params, family_id = family.params, family.family_id
    row = family.empty_stats
    members: list[int] = []
    n_checks = 0
    for step in range(600):
        remove = members and (rng.random() < 0.45 or len(members) >= 14)
        if remove:
            i = members.pop(int(rng.integers(len(members))))
            dispatch.remove_point(family_id, params, row, x[i])
        else:  # a point may join several times: the statistics are those of a multiset
            i = int(rng.integers(len(x)))
            members.append(i)
            dispatch.add_point(family_id, params, row, x[i])
        if step % 15 == 0 or not members:
            cluster = x[members]
            for query in (x[int(rng.integers(len(x)))], x[0]):
                value = dispatch.log_predictive(family_id, params, row, query)
                expected = module.reference_log_predictive(family, query, cluster)
                assert _close(value, expected), (step, value, expected)
            value = dispatch.log_marginal(family_id, params, row)
            assert _close(value, module.reference_log_marginal(family, cluster)), step
            n_checks += 1
    assert n_checks >= 40
    # the same points in a fresh row give the same cluster part (history entries aside)
    cluster_part = family.cluster_columns
    np.testing.assert_allclose(row[cluster_part], family.stats_of(x[members])[cluster_part],
                               rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize(("family", "module", "x"), CASES)
def test_random_add_remove_sequences_match_reference(family, module, x):
    """The cached predictive form stays equal to the reference (``docs/contracts.md`` 2)."""
    check_random_add_remove_sequence(family, module, x)


@pytest.mark.parametrize(("family", "module", "x"), CASES)
def test_empty_row_holds_the_prior_predictive(family, module, x):
    """``empty_stats`` carries the prior predictive's cached form, and emptying restores it."""
    row = family.empty_stats
    for query in x[:3]:
        assert _close(family.log_predictive(query, row),
                      module.reference_log_predictive(family, query, x[:0]))
    dispatch.add_point(family.family_id, family.params, row, x[1])
    dispatch.remove_point(family.family_id, family.params, row, x[1])
    np.testing.assert_array_equal(row, family.empty_stats)


# ------------------------------------------------------------------ pytensor graph
def _constant_hyperparameters(family):
    hyper = {}
    for name, value in family.hyperparameters.items():
        try:
            hyper[name] = pt.as_tensor_variable(np.asarray(value, dtype=np.float64))
        except ValueError:  # ragged full Dirichlet concentration vectors
            hyper[name] = [np.asarray(v, dtype=np.float64) for v in value]
    return hyper


@pytest.mark.parametrize(("family", "module", "x"), CASES)
def test_log_marginal_graph_matches_reference(family, module, x):
    """Sum over clusters of the pytensor graph = sum of reference log marginals; empty slots
    (labels 0..3 of 7 slots, slot 1 unused) contribute nothing."""
    n, dim = x.shape
    labels = np.array([0, 2, 3, 0, 3, 3, 5, 2, 0, 5][:n] + [0] * max(0, n - 10))
    n_slots = 7
    data = pt.specify_shape(pt.as_tensor_variable(x), (n, dim))
    total = conjugate_mixture_log_likelihood(family, _constant_hyperparameters(family), data,
                                             pt.as_tensor_variable(labels), n_slots)
    value = pytensor.function([], total, mode="FAST_COMPILE")()
    expected = sum(module.reference_log_marginal(family, x[labels == j])
                   for j in np.unique(labels))
    np.testing.assert_allclose(value, expected, rtol=1e-10, atol=1e-10)
    assert np.isclose(value, sum(family.log_marginal_of(x[labels == j])
                                 for j in np.unique(labels)), rtol=1e-10, atol=1e-10)


# ------------------------------------------------------------------ validation
@pytest.mark.parametrize(("family", "module", "x"), CASES)
def test_validation_errors(family, module, x):
    name = type(family).__name__
    bad = x.copy()
    bad[1, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        family.prepare_data(bad)
    with pytest.raises(ValueError, match="NaN"):
        family.check_data_symbolic(bad)
    with pytest.raises(ValueError, match=f"{family.data_dim} entries"):
        family.prepare_data(np.zeros((2, family.data_dim + 1)))
    with pytest.raises(TypeError, match=name):
        family.prepare_data(np.array([["a"] * family.data_dim]))
    with pytest.raises(TypeError, match="unknown"):
        family.with_values(not_a_hyperparameter=1.0)
    # the symbolic path accepts what prepare_data accepts, with the same values
    np.testing.assert_array_equal(family.check_data_symbolic(x), x)
    copy = family.with_values()  # params may hold a scratch tail: compare what they give
    np.testing.assert_array_equal(copy.empty_stats, family.empty_stats)
    assert copy.log_marginal_of(x) == family.log_marginal_of(x)
    assert repr(copy) == repr(family)


# ------------------------------------------------------------------ forward samplers
def _assert_shapes(family, parameters):
    shapes = family.parameter_shapes()
    assert set(parameters) == set(shapes)
    for key, value in parameters.items():
        assert np.shape(value) == shapes[key], key
        # ragged parameters (Dirichlet-categorical) are NaN-padded; nothing is infinite
        assert np.any(np.isfinite(value)) and not np.any(np.isinf(value)), key


@pytest.mark.parametrize(("family", "module", "x"), CASES)
def test_samplers(family, module, x):
    rng = np.random.default_rng(3)
    _assert_shapes(family, family.sample_parameters(rng))
    _assert_shapes(family, family.sample_parameters(rng, x))
    with pytest.raises(TypeError, match="Generator"):
        family.sample_parameters(np.random.RandomState(0))
    labels = np.array([0, 1, 1, 0, 2])
    if not family.has_observation_sampler():
        with pytest.raises(NotImplementedError, match="forward sampling"):
            family.sample_data(rng, labels)
        return
    observations = family.sample_observations(rng, family.sample_parameters(rng), 6)
    assert observations.shape == (6, family.data_dim)
    np.testing.assert_array_equal(family.prepare_data(observations), observations)  # domain
    data = family.sample_data(rng, labels)
    assert data.shape == (5, family.data_dim)
    family.prepare_data(data)
    replicate = family.sample_data(rng, labels, observed=x[:5])
    assert replicate.shape == (5, family.data_dim)
    # the same generator state gives the same draws (no global random state)
    first = family.sample_data(np.random.default_rng(9), labels)
    np.testing.assert_array_equal(first, family.sample_data(np.random.default_rng(9), labels))
