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

import numba
import numpy as np
import pytest
from numba import njit, typeof, types

from pymc_splitmerge.components import dispatch, registry
from pymc_splitmerge.components.dispatch import FamilyId
from pymc_splitmerge.components.normal_inverse_wishart import _niw_two_recompute
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
                            dispatch.compiled_leaf(family_id, "log_marginal")(params, stats[1]),
                            dispatch.log_predictive(family_id, params, stats[1], x[0])))
        for specialised, generic in zip(*results, strict=True):
            np.testing.assert_array_equal(specialised, generic)


# ------------------------------------------------------------------ compiled code
def _niw():
    from pymc_splitmerge import NormalInverseWishart

    family = NormalInverseWishart(mu0=np.zeros(2), kappa0=1.0, nu0=4.0, psi0=np.eye(2))
    x = np.ascontiguousarray(family.prepare_data(np.random.default_rng(0).normal(size=(4, 2))))
    return family, x


@njit
def _update_and_marginal(family_id, params, stats, x):
    dispatch.add_point_at(family_id, params, stats, 0, x, 0)
    dispatch.add_point_at(family_id, params, stats, 0, x, 1)
    dispatch.remove_point_at(family_id, params, stats, 0, x, 0)
    return dispatch.log_marginal(family_id, params, stats[0])


@njit
def _marginal(family_id, params, row):
    return dispatch.log_marginal(family_id, params, row)


def _defined_and_called(ir):
    """Names of the functions an LLVM module mentions (defines or declares)."""
    import re

    return set(re.findall(r"@\"?(_ZN[^\"(\s]+)", ir))


def _other_families_modules(family):
    return [entry.family_class.__module__.rsplit(".", 1)[-1] for entry in registry.FAMILIES
            if entry.family_class is not type(family)]


def test_a_kernel_links_its_familys_leaves_directly_and_no_other_family():
    family, x = _niw()
    params, stats = family.params.copy(), np.tile(family.empty_stats, (2, 1))
    value = _update_and_marginal(family.family_id, params, stats, x)
    (ir,) = _update_and_marginal.inspect_llvm().values()
    names = _defined_and_called(ir)
    assert any("normal_inverse_wishart" in name for name in names)
    for module in [*_other_families_modules(family), "_leaf_dispatch"]:
        assert not any(module in name for name in names), module
    # no compiled level between the kernel and the leaves: the dispatch functions inline
    # and the direct calls reach the family's functions themselves
    assert not any("dispatch" in name for name in names)
    # the same numbers as the row functions on views
    params, row = family.params.copy(), family.empty_stats.copy()
    for i in (0, 1):
        dispatch.add_point(family.family_id, params, row, x[i])
    dispatch.remove_point(family.family_id, params, row, x[0])
    assert value == dispatch.log_marginal(family.family_id, params, row)


def test_negative_control_a_plain_int_links_the_switch_over_every_family():
    family, _ = _niw()
    row = family.empty_stats.copy()
    _marginal(family.family_id, family.params, row)
    _marginal(int(family.family_id), family.params, row)
    literal_ir, int_ir = (_marginal.inspect_llvm(signature)
                          for signature in _marginal.signatures)
    assert not any("_leaf_dispatch" in name for name in _defined_and_called(literal_ir))
    assert any("_leaf_dispatch" in name for name in _defined_and_called(int_ir))


def test_the_log_likelihood_from_python_calls_the_leaf_the_kernels_link(monkeypatch):
    """``PartitionState.log_likelihood`` (the start check of every sampler step) calls the
    family's compiled leaf, which the kernels link anyway, not the dispatch function (compiled
    for the family's id in a first run otherwise, 0.2 s); the same number bit for bit."""
    from pymc_splitmerge.components import normal_inverse_wishart as niw_module
    from pymc_splitmerge.kernels.state import PartitionState

    family, _ = _niw()
    x = np.ascontiguousarray(family.prepare_data(
        np.random.default_rng(3).normal(size=(12, 2))))
    state = PartitionState(family, x, np.arange(12) % 3)
    expected = 0.0
    for slot in state.active[:3]:
        expected += dispatch.log_marginal(family.family_id, state.params, state.stats[slot])
    assert dispatch.compiled_leaf(family.family_id, "log_marginal") is niw_module.niw_log_marginal

    def refuse(*args):
        raise AssertionError("dispatch.log_marginal called from Python")

    monkeypatch.setattr(dispatch, "log_marginal", refuse)
    assert state.log_likelihood() == expected
    # negative control: with a plain int (the switch), the dispatch function is called, and
    # the check sees it
    state.family_id = int(family.family_id)
    with pytest.raises(AssertionError, match="called from Python"):
        state.log_likelihood()


# ------------------------------------------------------------------ leaves for one dimension
_ANY_D_CODE = ("niw_inverse_factor_update", "_niw_quadratic_rows", "_niw_quadratic_16",
               "_cholesky_in_place", "_niw_add_point_general", "niw_recompute")


def test_a_two_dimensional_family_carries_its_dimension_in_the_literal():
    from pymc_splitmerge import NormalInverseWishart
    from pymc_splitmerge.components import normal_inverse_wishart as niw_module

    family, _ = _niw()
    assert family.family_id == type(family).family_id == 0
    assert family.family_id.dimension == 2 and type(family).family_id.dimension == 0
    literal = typeof(family.family_id)
    assert isinstance(literal, dispatch.FamilyLiteral) and literal.literal_value == 0
    assert literal != types.literal(0) and typeof(FamilyId(0, 2)) is literal
    assert dispatch._leaves_of(literal) is NormalInverseWishart.numba_leaves_by_dimension[2]
    assert dispatch._leaves_of(literal).add_point is niw_module.niw2_add_point
    assert pickle.loads(pickle.dumps(family.family_id)).dimension == 2
    assert pickle.loads(pickle.dumps(family)).family_id.dimension == 2
    # a dimension without leaves of its own keeps the class's id (the any-D leaves)
    three = NormalInverseWishart(mu0=np.zeros(3), kappa0=1.0, nu0=4.0, psi0=np.eye(3))
    assert three.family_id.dimension == 0
    assert typeof(three.family_id) == types.literal(0)


def test_a_two_dimensional_kernel_compiles_no_any_dimension_code():
    """Given a D = 2 family's id, a kernel links the D = 2 leaves alone: none of the any-D
    code (the rank-1 update loops, the row and D = 16 predictives, the Cholesky
    factorisation), most of what the any-D leaves cost to compile."""
    family, x = _niw()
    values = []
    for family_id, any_d_expected in ((family.family_id, False),
                                      (type(family).family_id, True)):  # negative control
        params, stats = family.params.copy(), np.tile(family.empty_stats, (2, 1))
        values.append(_update_and_marginal(family_id, params, stats, x))
        signature = next(sig for sig in _update_and_marginal.signatures
                         if sig[0] == typeof(family_id))
        names = _defined_and_called(_update_and_marginal.inspect_llvm(signature))
        leaf = "niw_add_point_at" if any_d_expected else "niw2_add_point_at"
        assert any(leaf in name for name in names), leaf
        linked = {code for code in _ANY_D_CODE if any(code in name for name in names)}
        if any_d_expected:
            assert "niw_inverse_factor_update" in linked and "niw_recompute" in linked, linked
        else:
            assert not linked, linked
    assert values[0] == values[1]  # the any-D leaves call the D = 2 ones for D = 2


@njit
def _two_recompute(params, stats):
    # called from compiled code, as the D = 2 leaves call it (compiled for numba callers only)
    _niw_two_recompute(params, stats)


def test_the_two_dimensional_recomputation_is_the_any_dimension_one_bit_for_bit():
    """The written-out 2 x 2 recomputation (refresh, downdate fallback) and reset of the D = 2
    leaves give the any-D ``niw_recompute``'s and ``_niw_reset``'s rows exactly, on rows of
    every scale; so does the prior's inverse factor packed without compiling."""
    from pymc_splitmerge import NormalInverseWishart
    from pymc_splitmerge.components import normal_inverse_wishart as niw_module

    rng = np.random.default_rng(5)
    for trial in range(200):
        a = rng.normal(size=(2, 2))
        family = NormalInverseWishart(mu0=rng.normal(size=2), kappa0=rng.uniform(0.01, 3.0),
                                      nu0=rng.uniform(1.5, 9.0), psi0=a @ a.T + 0.1 * np.eye(2))
        scale = 10.0 ** rng.uniform(-3, 3)
        x = family.prepare_data(rng.normal(size=(int(rng.integers(1, 40)), 2)) * scale)
        row = family.stats_of(x)
        row[-1] = float(trial)  # an update count, reset by both
        expected, got = row.copy(), row.copy()
        niw_module.niw_recompute(family.params, expected)
        _two_recompute(family.params, got)
        np.testing.assert_array_equal(got, expected)
        niw_module._niw_reset(family.params, expected)
        niw_module._niw_two_reset(family.params, got)
        np.testing.assert_array_equal(got, expected)
        np.testing.assert_array_equal(family.empty_stats, expected)
        # the prior's inverse factor in params: the Python body of the compiled inversion
        inverse = np.linalg.cholesky(family._full["psi0"]).reshape(-1)
        niw_module._invert_lower_in_place(inverse, 2)
        np.testing.assert_array_equal(family.params[11:15], inverse)


# ------------------------------------------------------------------ compiled levels
def _compiled_callees(dispatcher):
    """Names of the numba functions a compiled kernel calls as compiled functions of their
    own (from its typed IR, kept in the cache too); an inlined function is not one."""
    import re

    names = set()
    for result in dispatcher.overloads.values():
        annotation = str(result.type_annotation)
        globals_ = dict(re.findall(r"#\s+(\S+) = global\((\w+): \w*Dispatcher", annotation))
        names |= {globals_[var] for var in re.findall(r"= call (\S+)\(", annotation)
                  if var in globals_}
    return names


def _sams_state():
    """A 2-D Normal-inverse-Wishart partition state of 12 points in 3 clusters and the prior
    tables, for compiling the SAMS kernel."""
    from pymc_splitmerge.kernels.state import PartitionState, prior_tables

    family, _ = _niw()
    x = np.ascontiguousarray(family.prepare_data(
        np.random.default_rng(1).normal(size=(12, 2))))
    return (PartitionState(family, x, np.arange(12) % 3),
            prior_tables(12, np.zeros(14), np.zeros(14)))


def _typed_ir(function, *args):
    """The typed IR of ``function`` compiled for ``args`` by a fresh uncached dispatcher (so
    it holds the inlined code too): ``(blocks, typemap)``."""
    dispatcher = numba.njit(no_cfunc_wrapper=True)(function)
    dispatcher.compile(tuple(typeof(arg) for arg in args))
    (result,) = dispatcher.overloads.values()
    return result.type_annotation.blocks, result.type_annotation.typemap


def test_the_cluster_sams_update_is_one_compiled_level():
    """The default step's split-merge kernel compiles the family's code once: the update is
    written in the entry point and its internal levels (the proposal, the sequential
    allocation, the early merge rejection, the merged statistics) are inlined there, none is
    a compiled function of its own (each would re-optimise and re-emit the family's code
    linked below it)."""
    from pymc_splitmerge.kernels import sams

    state, tables = _sams_state()
    sams.build_sams_move(cluster_anchors=True, n_updates=5)(
        state.model, state.partition, tables, np.random.default_rng(2))
    state.check()
    callees = _compiled_callees(sams._cluster_sams_move_fields)
    internal = {name for name in callees if hasattr(sams, name)
                and getattr(sams, name).py_func.__module__ == sams.__name__}
    assert not internal, internal
    assert "sequential_allocation" not in callees
    # negative control: the detector sees a compiled callee (``merge_surely_rejected`` calls
    # ``splitmerge_common.anchor_clusters_members``, not inlined) and not an inlined one
    sams.merge_surely_rejected(state.model, state.partition, tables, 0, 1, 0.0, 0.5)
    assert _compiled_callees(sams.merge_surely_rejected) == {"anchor_clusters_members"}


def _arrays_indexed_by_arrays(function, *args):
    """``value[index]`` with an array ``index`` in the typed IR of ``function`` compiled for
    ``args`` (a fresh uncached dispatcher, so the IR holds the inlined code too): numba 0.68
    compiles ``np.broadcast_shapes`` for each (0.4 s of a first run in the SAMS kernel)."""
    from numba.core import ir

    blocks, typemap = _typed_ir(function, *args)
    return [f"{statement.value.value.name}[{statement.value.index.name}]"
            for block in blocks.values()
            for statement in block.find_insts(ir.Assign)
            if isinstance(statement.value, ir.Expr) and statement.value.op == "getitem"
            and isinstance(typemap[statement.value.index.name], types.Array)]


def test_the_sams_kernel_indexes_no_array_by_an_array():
    """The SAMS kernel of a first run gathers by loops, never ``array[index_array]`` (its
    typed IR, inlined levels included)."""
    from pymc_splitmerge.kernels import sams

    state, tables = _sams_state()
    arguments = (*state.model, *state.partition, *tables, 7, 5)
    assert _arrays_indexed_by_arrays(sams._cluster_sams_move_fields.py_func, *arguments) == []

    # negative control: the detector sees a gather by an index array (and not a scalar index)
    def gather(values, index):
        return values[index][0] + values[index[1]]

    assert _arrays_indexed_by_arrays(gather, np.arange(5.0), np.arange(3)) == ["values[index]"]


def _raises_in_typed_ir(function, *args):
    """The ``raise`` statements in the typed IR of ``function`` compiled for ``args`` (a fresh
    uncached dispatcher: inlined levels included).  Each is an exit of the compiled function
    where numba releases every array it holds at that point."""
    from numba.core import ir

    blocks, _ = _typed_ir(function, *args)
    return [str(statement) for block in blocks.values()
            for statement in block.body
            if isinstance(statement, (ir.Raise, ir.StaticRaise, ir.DynamicRaise))]


def test_the_sams_kernel_inlines_no_raise():
    """No ``raise`` is inlined into the SAMS kernel of a first run: a check that can fail is
    a compiled call (``core.slots.check_row_width``), whose error path releases nothing,
    where an inlined ``raise`` made numba release the kernel's ~40 arrays there."""
    from pymc_splitmerge.core import slots
    from pymc_splitmerge.kernels import sams

    state, tables = _sams_state()
    arguments = (*state.model, *state.partition, *tables, 7, 5)
    assert _raises_in_typed_ir(sams._cluster_sams_move_fields.py_func, *arguments) == []

    # negative control: the same check written inline is seen
    def reset_with_inline_check(stats, slot, empty_row):
        if empty_row.shape[0] != stats.shape[1]:
            raise ValueError("empty_row must have one entry per column of stats")
        slots.reset_row(stats, slot, empty_row)

    stats = np.zeros((3, 2))
    assert len(_raises_in_typed_ir(reset_with_inline_check, stats, 0, stats[1])) == 1
    assert _raises_in_typed_ir(slots.reset_row.py_func, stats, 0, stats[1]) == []


def _builtins_called(function, *args):
    """Python builtins (``int``, ``min``, ...) called in the typed IR of ``function`` compiled
    for ``args`` (inlined levels included): numba compiles each one's implementation as a
    function of its own in a first run."""
    import builtins

    from numba.core import ir

    blocks, typemap = _typed_ir(function, *args)
    names = set()
    for block in blocks.values():
        for statement in block.body:
            if (isinstance(statement, ir.Assign) and isinstance(statement.value, ir.Global)
                    and getattr(builtins, statement.value.name, None) is statement.value.value
                    and isinstance(typemap.get(statement.target.name), types.Function)):
                names.add(statement.value.name)
    return names


def test_the_sams_kernel_and_the_bucket_sort_call_no_int_min_or_max():
    """The SAMS kernel, the bucket sort and the uniform anchor draw index with a cast and a
    comparison (``kernels.rng.uniform_rank``), and the allocation's two-way log-sum-exp
    compares, instead of numba's ``int()``, ``min()`` and ``max()`` (three functions less to
    compile in a first run)."""
    from pymc_splitmerge.kernels import anchors, rng, sams

    state, tables = _sams_state()
    uniforms = np.random.default_rng(3).random(6)
    for function, arguments in (
            (sams._cluster_sams_move_fields.py_func, (*state.model, *state.partition, *tables,
                                                      7, 5)),
            (rng.order_of_uniforms.py_func, (uniforms, 6)),
            (anchors.uniform_anchors.py_func, (6, uniforms, np.empty(2, dtype=np.int64)))):
        assert not _builtins_called(function, *arguments) & {"int", "min", "max"}, function

    # negative control: the same index written with the builtins is seen
    def bin_of(uniform, count):
        return min(int(uniform * count), max(count - 1, 0))

    assert _builtins_called(bin_of, 0.5, 4) == {"int", "min", "max"}
    assert rng.uniform_rank.py_func(0.5, 4) == bin_of(0.5, 4) == 2
    assert rng.uniform_rank.py_func(np.nextafter(1.0, 0.0), 3) == 2


def _package_dispatchers():
    """Every numba dispatcher defined in a module of the package (imported here)."""
    import importlib
    import pkgutil

    from numba.core.registry import CPUDispatcher

    import pymc_splitmerge

    found = {}
    for info in pkgutil.walk_packages(pymc_splitmerge.__path__, "pymc_splitmerge."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (isinstance(value, CPUDispatcher)
                    and value.py_func.__module__ == module.__name__):
                found[f"{module.__name__}.{name}"] = value
    return found


def _with_cfunc_wrapper(dispatchers):
    return sorted(name for name, dispatcher in dispatchers.items()
                  if not dispatcher.targetoptions.get("no_cfunc_wrapper"))


def test_no_compiled_function_of_the_package_builds_a_c_callable_wrapper():
    """Every numba function of the package is compiled without the C-callable (``cfunc``)
    wrapper numba builds by default, which nothing here calls (``core.jit.njit``; half a
    second of a first run), and with ``cache=True``."""
    from numba.core.caching import NullCache

    dispatchers = _package_dispatchers()
    assert len(dispatchers) > 150  # the walk found the package's kernels
    assert _with_cfunc_wrapper(dispatchers) == []
    assert not [name for name, d in dispatchers.items() if isinstance(d._cache, NullCache)]
    # negative control: numba's own decorator keeps the wrapper, which the check reports
    plain = numba.njit(cache=True)(dispatchers["pymc_splitmerge.kernels.rng.seed_numba"].py_func)
    assert _with_cfunc_wrapper({"plain": plain}) == ["plain"]


# numba's own flag alone: a call from Python jumps to the missing wrapper
_PYTHON_CALL_WITHOUT_ENTRY = """
import numba

@numba.njit(no_cpython_wrapper=True)
def double(x):
    return 2.0 * x

double(1.0)
print("returned")
"""


def test_functions_only_compiled_code_calls_have_no_python_entry():
    """The D = 2 Normal-inverse-Wishart leaves that the kernels link (all but the log
    marginal, which the start check calls from Python), their register cores and the
    kernels' helpers are compiled without the Python-callable wrapper
    (``core.jit.compiled_only``: one function less to compile each in a first run); every
    such function refuses a call from Python with a ``TypeError``, the kernels call them as
    before, and ``dispatch.compiled_leaf`` hands Python the dispatch function instead (same
    numbers)."""
    import subprocess
    import sys

    from pymc_splitmerge.components import normal_inverse_wishart as niw_module
    from pymc_splitmerge.core.jit import CompiledOnlyDispatcher

    dispatchers = _package_dispatchers()
    without_entry = {name for name, dispatcher in dispatchers.items()
                     if dispatcher.targetoptions.get("no_cpython_wrapper")}
    assert {name for name, dispatcher in dispatchers.items()
            if isinstance(dispatcher, CompiledOnlyDispatcher)} == without_entry
    leaves = niw_module.NormalInverseWishart.numba_leaves_by_dimension[2]
    linked = {f"{niw_module.__name__}.{leaf.py_func.__name__}" for leaf in leaves
              if leaf is not niw_module.niw_log_marginal}
    helpers = {f"{niw_module.__name__}.{name}" for name in (
        "_niw_two_add", "_niw_two_downdate", "_niw_two_recompute", "_niw_two_refresh")} | {
        "pymc_splitmerge.kernels.rng.order_of_uniforms",
        "pymc_splitmerge.core.slots.check_row_width",
        "pymc_splitmerge.kernels.gibbs._prior_predictives"}
    assert linked | helpers <= without_entry
    family, x = _niw()
    row = family.stats_of(x[:3])
    with pytest.raises(TypeError, match="compiled for numba callers only"):
        niw_module.niw2_log_predictive(family.params, row, x[3])
    # the kernels' route and Python's agree bit for bit
    from_python = dispatch.compiled_leaf(family.family_id, "log_predictive")
    assert not isinstance(from_python, CompiledOnlyDispatcher)

    @njit
    def linked_leaf(params, stats, x_row):
        return niw_module.niw2_log_predictive(params, stats, x_row)

    assert from_python(family.params, row, x[3]) == linked_leaf(family.params, row, x[3])
    # negative control: numba's flag without the dispatcher's refusal crashes the interpreter
    crashed = subprocess.run([sys.executable, "-c", _PYTHON_CALL_WITHOUT_ENTRY],
                             capture_output=True, text=True, check=False)
    assert crashed.returncode != 0 and "returned" not in crashed.stdout


# ------------------------------------------------------------------ the cache
CACHED_KERNELS = '''
import numba

from pymc_splitmerge.components import dispatch
from pymc_splitmerge.kernels.state import make_model


@numba.njit(cache=True)
def marginal(model, row):
    return dispatch.log_marginal(model.family_id, model.params, row)


@numba.njit(cache=True)
def marginal_fields(family_id, params, x, row):
    return marginal(make_model(family_id, params, x), row)
'''


def _load_fresh(path, name):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run_kernels(module, family_id, family, x, read_only=False):
    row = family.empty_stats.copy()
    dispatch.add_point(family_id, family.params, row, x[0])
    row.setflags(write=not read_only)
    model = Model(family_id, family.params, x)
    values = (module.marginal(model, row),
              module.marginal_fields(family_id, family.params, x, row))
    compiled = (module.marginal.stats.cache_misses, module.marginal_fields.stats.cache_misses)
    return values, sum(sum(misses.values()) for misses in compiled)


def test_a_later_process_loads_the_specialised_kernels_from_the_cache(tmp_path):
    """What a warm process does: a new dispatcher over the same cached source finds every
    signature compiled with a literal family id (from Python: a FamilyId, a Model holding
    one; inside numba: make_model) in the index and compiles nothing."""
    family, x = _niw()
    path = tmp_path / "specialised_kernels.py"
    path.write_text(CACHED_KERNELS)
    first, compiled_first = _run_kernels(_load_fresh(path, "specialised_kernels"),
                                         family.family_id, family, x)
    assert compiled_first == 2  # a cold start: both kernels compiled (and cached)
    second, compiled_second = _run_kernels(_load_fresh(path, "specialised_kernels"),
                                           family.family_id, family, x)
    assert compiled_second == 0 and second == first
    # negative control: the check sees a compilation when a type differs (a read-only row
    # is another numba array type)
    third, compiled_read_only = _run_kernels(_load_fresh(path, "specialised_kernels"),
                                             family.family_id, family, x, read_only=True)
    assert compiled_read_only == 2 and third == first


def test_two_families_in_one_process_keep_their_own_literal():
    """numba's dispatcher caches argument types by a fingerprint of the value; an ``int``
    subclass inside a named tuple must not take the type of an earlier call's id."""

    @njit
    def family_of(model):
        return model.family_id + 0

    params, x = np.zeros(1), np.zeros((1, 1))
    ids = [entry.family_class.family_id for entry in registry.FAMILIES[:3]]
    assert [family_of(Model(family_id, params, x)) for family_id in ids] == ids
    assert [family_of(Model(family_id, params, x)) for family_id in reversed(ids)] == ids[::-1]
    assert len(family_of.signatures) == 3
