"""A kernel given a registered family's ``family_id`` is compiled for that family alone.

Registered families carry a :class:`~pymc_splitmerge.components.dispatch.FamilyId`, which numba
types as a literal, so the dispatch functions select the family's numba leaves when they
are compiled instead of compiling the switch over every family (the first run's compile
time; ``benchmarks/cold_start.py`` reports any switch a first run compiles).  Checked here:
the ids, the compile-time selection, with a plain ``int`` as negative control (the switch),
``make_model`` against numba's own ``Model(...)`` (which loses the literal), and that both
routes give the same numbers bit for bit on every registered family's examples.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from numba import njit, typeof, types

from pymc_splitmerge.components import dispatch, registry
from pymc_splitmerge.components.dispatch import FamilyId
from pymc_splitmerge.kernels.state import Model, make_model


def test_registered_ids_are_family_ids_typed_as_literals():
    for entry in registry.FAMILIES:
        family_id = entry.family_class.family_id
        assert type(family_id) is FamilyId and family_id == entry.family_id
        assert typeof(family_id) == types.literal(entry.family_id)
        assert pickle.loads(pickle.dumps(family_id)) == family_id
        assert type(pickle.loads(pickle.dumps(family_id))) is FamilyId
    assert typeof(int(registry.FAMILIES[0].family_class.family_id)) == types.int64


def test_a_literal_id_selects_that_familys_leaves_and_a_plain_int_the_switch():
    for entry in registry.FAMILIES:
        leaves = dispatch._leaves_of(typeof(entry.family_class.family_id))
        if entry.is_leaf:
            assert leaves is entry.family_class.numba_leaves
        else:
            assert leaves.log_marginal is dispatch.product_log_marginal
    # negative control: an int64 (a plain int, or an id known at run time) takes the switch
    assert dispatch._leaves_of(typeof(int(registry.FAMILIES[0].family_id))) is None
    with pytest.raises(Exception, match="unknown family_id 99"):
        dispatch._leaves_of(types.literal(99))


def _model_field_type(build):
    @njit
    def kernel(family_id, params, x):
        return build(family_id, params, x)

    kernel(registry.FAMILIES[0].family_class.family_id, np.zeros(1), np.zeros((1, 1)))
    (signature,) = kernel.nopython_signatures
    return signature.return_type[0]


def test_a_model_from_python_keeps_the_literal():
    family = registry.FAMILIES[0].family_class
    model = Model(family.family_id, np.zeros(1), np.zeros((1, 1)))
    assert typeof(model)[0] == types.literal(0)
    # negative control: a plain int is an int64 field
    assert typeof(Model(int(family.family_id), np.zeros(1), np.zeros((1, 1))))[0] == types.int64

    @njit
    def first_param(model):
        return model.params[0]

    first_param(model)
    assert first_param.nopython_signatures[0].args[0][0] == types.literal(0)


def test_make_model_keeps_the_literal_where_numbas_model_widens_it():
    assert _model_field_type(make_model) == types.literal(0)
    # negative control: numba's own namedtuple constructor widens the id to int64
    assert _model_field_type(Model) == types.int64


@pytest.mark.parametrize("entry", registry.FAMILIES, ids=lambda entry: entry.name)
def test_specialised_and_switch_routes_agree_bit_for_bit(entry):
    rng = np.random.default_rng(0)
    for _label, family, raw in entry.family_class.examples(rng):
        x = np.ascontiguousarray(family.prepare_data(raw), dtype=np.float64)
        results = []
        for family_id in (family.family_id, int(family.family_id)):
            params = family.params.copy()
            stats = np.tile(family.empty_stats, (3, 1))
            for i in range(x.shape[0]):
                dispatch.add_point_at(family_id, params, stats, i % 2, x, i)
            dispatch.remove_point_at(family_id, params, stats, 0, x, 0)
            out = np.empty(3)
            dispatch.log_predictive_many(family_id, params, stats, np.arange(3), 3, x[-1], out)
            row = dispatch.stats_from_rows(family_id, params, family.empty_stats, x,
                                           np.arange(x.shape[0]))
            results.append((stats, out, row,
                            dispatch.log_marginal(family_id, params, stats[1]),
                            dispatch.log_predictive(family_id, params, stats[1], x[0])))
        for specialised, generic in zip(*results, strict=True):
            np.testing.assert_array_equal(specialised, generic)
