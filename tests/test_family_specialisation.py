"""A kernel given a registered family's ``family_id`` is compiled for that family alone.

Registered families carry a :class:`~pymc_splitmerge.components.dispatch.FamilyId`, which numba
types as a literal, so the dispatch functions select the family's numba leaves when they
are compiled instead of compiling the switch over every family (the first run's compile
time).  Checked here: the ids, the specialisation itself (in a fresh process: no switch is
compiled), with a plain ``int`` as negative control (the switch is compiled), and that both
routes give the same numbers bit for bit on every registered family's examples.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
from numba import typeof, types

from pymc_splitmerge.components import dispatch, registry
from pymc_splitmerge.components.dispatch import FamilyId

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROBE = r"""
import json, sys
import numpy as np
from pymc_splitmerge.components import NormalInverseGamma, _leaf_dispatch, dispatch
family = NormalInverseGamma(mu0=0.0, kappa0=1.0, alpha0=2.0, beta0=1.0)
family_id = family.family_id if sys.argv[1] == "family_id" else int(family.family_id)
row = family.empty_stats.copy()
dispatch.add_point(family_id, family.params, row, np.array([0.5]))
value = dispatch.log_marginal(family_id, family.params, row)
print(json.dumps({"value": value,
                  "switch": [str(s) for s in _leaf_dispatch.leaf_log_marginal.signatures
                             + _leaf_dispatch.leaf_add_point.signatures],
                  "dispatch": [str(s) for s in dispatch.log_marginal.signatures]}))
"""


def _probe(route):
    # a fresh process (the switch may have been compiled by other tests in this one); the
    # worktree's numba cache makes it quick after the first run
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", PROBE, route], env=env, cwd=ROOT,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_registered_ids_are_family_ids_typed_as_literals():
    for entry in registry.FAMILIES:
        family_id = entry.family_class.family_id
        assert type(family_id) is FamilyId and family_id == entry.family_id
        assert typeof(family_id) == types.literal(entry.family_id)
        assert pickle.loads(pickle.dumps(family_id)) == family_id
        assert type(pickle.loads(pickle.dumps(family_id))) is FamilyId
    assert typeof(int(registry.FAMILIES[0].family_class.family_id)) == types.int64


def test_a_family_id_compiles_that_family_only_and_a_plain_int_the_switch():
    specialised = _probe("family_id")
    assert specialised["switch"] == []
    assert any("Literal[int]" in signature for signature in specialised["dispatch"])
    # negative control: the same calls with a plain int compile the switch over every family
    generic = _probe("int")
    assert generic["switch"] != []
    assert not any("Literal[int]" in signature for signature in generic["dispatch"])
    assert specialised["value"] == generic["value"]


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
