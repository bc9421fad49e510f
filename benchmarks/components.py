"""Cost of one ``log_predictive`` call per component family.

For every family this prints nanoseconds per call of

* the family's numba leaf function, timed inside a numba loop;
* ``dispatch.log_predictive`` (the switch on ``family_id`` every kernel uses), timed
  inside a numba loop;
* ``family.log_predictive`` called from Python (numba dispatcher overhead included);
* the plain numpy/scipy reference (``reference_log_predictive``), called from Python;

* one ``add_point`` + ``remove_point`` pair (the cost of refreshing the cached predictive
  form when a point joins or leaves);

and the ratio reference / dispatch, all measured in the same run.  The cluster holds
``CLUSTER_SIZE`` points; the query point cycles through 16 rows so nothing is hoisted out
of the loop.  Normal-Inverse-Wishart is measured at D = 2, 16 and 64.

``--baseline DIR`` also times, in the same run, the leaf functions of an older source tree
``DIR`` (e.g. ``git archive <commit> | tar -x -C DIR``): each family module of
``DIR/pymc_splitmerge/components`` is imported under another name, its rows are built with
its own ``add_point``, and the ratios old / new of the predictive and of the update are
printed (the before/after figures of ``docs/benchmarks.md``).  It also imports the whole
``components`` package of ``DIR`` under another name and times, interleaved in the same run
(best of three), the *dispatch* of both trees: ``dispatch.log_predictive``,
``dispatch.log_predictive_many`` over 8 clusters (the kernels' hot loop) and a
``dispatch.add_point`` + ``dispatch.remove_point`` pair, with ratios old / new (the
before/after of a change to the switch itself).

Last, for every family, a ``dispatch.add_point`` + ``remove_point`` pair on row views
against the slot-index forms ``add_point_at`` + ``remove_point_at``, with the
ratio rows / slots.

Times are CPU time of the thread (``time.thread_time``): on a shared machine the wall
time includes waiting for a core.  Run with ``python benchmarks/components.py [--baseline
DIR]``.  No assertion is made on the timings.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.util
import os
import shutil
import sys
import tempfile
import time
import types

import numpy as np
from numba import njit
from scipy import stats

from pymc_splitmerge.components import (
    BetaBernoulli,
    DirichletCategorical,
    GammaPoisson,
    GridComponent,
    NormalInverseGamma,
    NormalInverseWishart,
    NormalKnownCovariance,
    dispatch,
)
from pymc_splitmerge.components import beta_bernoulli as beta_bernoulli_module
from pymc_splitmerge.components import dirichlet_categorical as dirichlet_categorical_module
from pymc_splitmerge.components import gamma_poisson as gamma_poisson_module
from pymc_splitmerge.components import grid as grid_module
from pymc_splitmerge.components import normal_inverse_gamma as normal_inverse_gamma_module
from pymc_splitmerge.components import normal_inverse_wishart as niw_module
from pymc_splitmerge.components import normal_known_covariance as nkc_module

CLUSTER_SIZE = 50
N_QUERIES = 16
TARGET_SECONDS = 0.2


@njit
def _loop_leaf(function, params, stats_row, queries, repetitions):
    total = 0.0
    n_queries = queries.shape[0]
    for r in range(repetitions):
        total += function(params, stats_row, queries[r % n_queries])
    return total


@njit
def _loop_update(add, remove, params, stats_row, queries, repetitions):
    n_queries = queries.shape[0]
    for r in range(repetitions):
        add(params, stats_row, queries[r % n_queries])
        remove(params, stats_row, queries[r % n_queries])
    return stats_row[0]


@njit
def _loop_dispatch(family_id, params, stats_row, queries, repetitions):
    total = 0.0
    n_queries = queries.shape[0]
    for r in range(repetitions):
        total += dispatch.log_predictive(family_id, params, stats_row, queries[r % n_queries])
    return total


def _time_per_call(run, minimum_repetitions=1):
    """Seconds per call of ``run(repetitions)``, growing repetitions to TARGET_SECONDS."""
    run(minimum_repetitions)  # compile / warm up
    repetitions = minimum_repetitions
    while True:
        start = time.thread_time()
        run(repetitions)
        elapsed = time.thread_time() - start
        if elapsed > TARGET_SECONDS or repetitions > 50_000_000:
            return elapsed / repetitions
        repetitions *= 4 if elapsed < TARGET_SECONDS / 10 else 2


def _spd(rng, dim):
    a = rng.normal(size=(dim, dim))
    return a @ a.T / dim + np.eye(dim)


def _cases(rng):
    n = CLUSTER_SIZE + N_QUERIES
    cases = []
    for dim in (2, 16, 64):
        family = NormalInverseWishart(mu0=np.zeros(dim), kappa0=1.0, nu0=dim + 2.0,
                                      psi0=np.eye(dim))
        cases.append((f"NormalInverseWishart D={dim}", family, niw_module,
                      niw_module.niw_log_predictive, rng.normal(size=(n, dim))))
    family = NormalKnownCovariance(mu0=np.zeros(2), sigma0=_spd(rng, 2), sigma=_spd(rng, 2))
    cases.append(("NormalKnownCovariance D=2", family, nkc_module,
                  nkc_module.normal_known_covariance_log_predictive, rng.normal(size=(n, 2))))
    family = NormalInverseGamma(mu0=0.0, kappa0=1.0, alpha0=2.0, beta0=1.0)
    cases.append(("NormalInverseGamma", family, normal_inverse_gamma_module,
                  normal_inverse_gamma_module.normal_inverse_gamma_log_predictive,
                  rng.normal(size=n)))
    family = BetaBernoulli(a=1.0, b=1.0)
    cases.append(("BetaBernoulli J=50", family, beta_bernoulli_module,
                  beta_bernoulli_module.beta_bernoulli_log_predictive,
                  rng.integers(0, 2, size=(n, 50))))
    family = DirichletCategorical(concentration=0.5, n_categories=4)
    cases.append(("DirichletCategorical J=20 K=4", family, dirichlet_categorical_module,
                  dirichlet_categorical_module.dirichlet_categorical_log_predictive,
                  rng.integers(0, 4, size=(n, 20))))
    family = GammaPoisson(shape=2.0, rate=0.5)
    cases.append(("GammaPoisson J=10", family, gamma_poisson_module,
                  gamma_poisson_module.gamma_poisson_log_predictive,
                  rng.poisson(3.0, size=(n, 10))))
    phi = np.linspace(0.005, 0.995, 100)
    depth = rng.integers(20, 100, size=n)
    reads = rng.binomial(depth, 0.4)
    family = GridComponent(np.zeros(100))
    cases.append(("GridComponent G=100", family, grid_module, grid_module.grid_log_predictive,
                  stats.binom.logpmf(reads[:, None], depth[:, None], phi[None, :])))
    return cases


def _load_baseline(directory):
    """Import the family modules of an older source tree under the names ``baseline_*``."""
    source = os.path.join(directory, "pymc_splitmerge", "components")
    ids = os.path.join(source, "_family_ids.py")  # older trees, before the registry
    if os.path.exists(ids) and "pymc_splitmerge.components._family_ids" not in sys.modules:
        spec = importlib.util.spec_from_file_location("pymc_splitmerge.components._family_ids",
                                                      ids)
        sys.modules[spec.name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[spec.name])
    target = tempfile.mkdtemp(prefix="baseline_components_")
    sys.path.insert(0, target)
    modules = {}
    for name in ("normal_inverse_wishart", "normal_known_covariance", "normal_inverse_gamma",
                 "beta_bernoulli", "dirichlet_categorical", "gamma_poisson", "grid"):
        shutil.copy(os.path.join(source, f"{name}.py"), os.path.join(target, f"baseline_{name}.py"))
        modules[name] = importlib.import_module(f"baseline_{name}")
    return modules


def _leaf_name(leaf, suffix):
    return leaf.__name__.replace("log_predictive", suffix)


def _baseline_times(old_module, family, raw, cluster_size, leaf):
    """(predictive ns, add+remove ns) of the old module's leaves, rows built with its own add."""
    old_family = getattr(old_module, type(family).__name__)(**family.hyperparameters)
    x = old_family.prepare_data(raw)
    cluster, queries = x[:cluster_size], np.ascontiguousarray(x[cluster_size:])
    add = getattr(old_module, _leaf_name(leaf, "add_point"))
    remove = getattr(old_module, _leaf_name(leaf, "remove_point"))
    old_leaf = getattr(old_module, leaf.__name__)
    params, row = old_family.params, old_family.empty_stats
    for point in cluster:
        add(params, row, point)
    predictive = _time_per_call(lambda r: _loop_leaf(old_leaf, params, row, queries, r), 1000)
    update = _time_per_call(
        lambda r: _loop_update(add, remove, params, row, queries, r), 1000)
    return predictive, update


def _load_baseline_package(directory):
    """The ``components`` package of an older tree, imported as ``baseline_pymc_splitmerge``."""
    alias = "baseline_pymc_splitmerge"
    root = tempfile.mkdtemp(prefix="baseline_package_")
    destination = os.path.join(root, alias, "components")
    shutil.copytree(os.path.join(directory, "pymc_splitmerge", "components"), destination,
                    ignore=shutil.ignore_patterns("__pycache__"))
    for file_name in os.listdir(destination):
        if file_name.endswith(".py"):
            path = os.path.join(destination, file_name)
            with open(path) as handle:
                text = handle.read()
            with open(path, "w") as handle:
                handle.write(text.replace("pymc_splitmerge.", f"{alias}."))
    package = types.ModuleType(alias)  # without the old top-level __init__ (PyMC layer)
    package.__path__ = [os.path.join(root, alias)]
    sys.modules[alias] = package
    return importlib.import_module(f"{alias}.components")


def _dispatch_loops(dispatch_module):
    """numba loops over one tree's dispatch functions (predictive, batch, add + remove)."""
    log_predictive = dispatch_module.log_predictive
    log_predictive_many = dispatch_module.log_predictive_many
    add_point = dispatch_module.add_point
    remove_point = dispatch_module.remove_point

    @njit
    def predictive(family_id, params, stats_row, queries, repetitions):
        total = 0.0
        for r in range(repetitions):
            total += log_predictive(family_id, params, stats_row, queries[r % queries.shape[0]])
        return total

    @njit
    def many(family_id, params, stats, slots, queries, out, repetitions):
        total = 0.0
        for r in range(repetitions):
            log_predictive_many(family_id, params, stats, slots, slots.shape[0],
                                queries[r % queries.shape[0]], out)
            total += out[0]
        return total

    @njit
    def update(family_id, params, stats_row, queries, repetitions):
        for r in range(repetitions):
            add_point(family_id, params, stats_row, queries[r % queries.shape[0]])
            remove_point(family_id, params, stats_row, queries[r % queries.shape[0]])
        return stats_row[0]

    return predictive, many, update


def _best_interleaved(timers, rounds=3):
    """Best (minimum) of ``rounds`` calls of each timer in ``timers`` (name -> no-argument
    callable returning seconds, a float or an array of them), called in turn each round so
    that the timers share the machine's slow and fast phases."""
    best = {name: np.inf for name in timers}
    for _ in range(rounds):
        for name, timer in timers.items():
            best[name] = np.minimum(best[name], timer())
    return best


def _print_header(header: str, blank_line: bool = False) -> None:
    """A table's header line and its rule (after a blank line between tables)."""
    if blank_line:
        print()
    print(header)
    print("-" * len(header))


def _eight_clusters(family, x):
    """Statistics of 8 clusters of 6 consecutive prepared rows each (rows 0-47 of ``x``)."""
    return np.stack([family.stats_of(x[6 * k:6 * k + 6]) for k in range(8)])


def _dispatch_times(loops, family, raw):
    """(predictive, batch of 8, add + remove) seconds per call through one tree's dispatch."""
    predictive, many, update = loops
    x = family.prepare_data(raw)
    queries = np.ascontiguousarray(x[CLUSTER_SIZE:])
    params, family_id = family.params, int(family.family_id)
    stats = _eight_clusters(family, x)
    slots = np.arange(8, dtype=np.int64)
    out = np.empty(8)
    row = family.stats_of(x[:CLUSTER_SIZE])
    return (_time_per_call(lambda r: predictive(family_id, params, row, queries, r), 1000),
            _time_per_call(lambda r: many(family_id, params, stats, slots, queries, out, r),
                           1000),
            _time_per_call(lambda r: update(family_id, params, row.copy(), queries, r), 1000))


def compare_dispatch(directory) -> None:
    """Old / new dispatch times, interleaved, best of three (see the module docstring)."""
    old_components = _load_baseline_package(directory)
    loops = {"new": _dispatch_loops(dispatch), "old": _dispatch_loops(old_components.dispatch)}
    header = (f"{'dispatch, old tree vs this tree':32s} {'pred new':>8s} {'old/new':>7s} "
              f"{'many8 new':>9s} {'old/new':>7s} {'add+rm new':>10s} {'old/new':>7s}")
    _print_header(header, blank_line=True)
    for name, family, _, _, raw in _cases(np.random.default_rng(0)):
        old_family = getattr(old_components, type(family).__name__)(**family.hyperparameters)
        best = _best_interleaved({
            tree: functools.partial(_dispatch_times, loops[tree], member, raw)
            for tree, member in (("new", family), ("old", old_family))})
        ratio = best["old"] / best["new"]
        print(f"{name:32s} {best['new'][0] * 1e9:8.1f} {ratio[0]:7.2f} "
              f"{best['new'][1] * 1e9:9.1f} {ratio[1]:7.2f} {best['new'][2] * 1e9:10.1f} "
              f"{ratio[2]:7.2f}", flush=True)


@njit
def _loop_update_rows(family_id, params, stats, x, repetitions):
    n, capacity = x.shape[0], stats.shape[0]
    for r in range(repetitions):
        i, slot = r % n, r % capacity
        dispatch.add_point(family_id, params, stats[slot], x[i])
        dispatch.remove_point(family_id, params, stats[slot], x[i])
    return stats[0, 0]


@njit
def _loop_update_slots(family_id, params, stats, x, repetitions):
    n, capacity = x.shape[0], stats.shape[0]
    for r in range(repetitions):
        i, slot = r % n, r % capacity
        dispatch.add_point_at(family_id, params, stats, slot, x, i)
        dispatch.remove_point_at(family_id, params, stats, slot, x, i)
    return stats[0, 0]


def compare_slot_forms() -> None:
    """``dispatch.add_point`` + ``remove_point`` on row views vs the slot-index forms
    ``add_point_at`` + ``remove_point_at`` (8 clusters, best of three, interleaved)."""
    header = (f"{'add+remove: row views vs slot index':36s} {'rows ns':>8s} {'slots ns':>8s} "
              f"{'rows/slots':>10s}")
    _print_header(header, blank_line=True)
    for name, family, _, _, raw in _cases(np.random.default_rng(0)):
        x = np.ascontiguousarray(family.prepare_data(raw))
        stats = _eight_clusters(family, x)
        params, family_id = family.params, int(family.family_id)
        best = _best_interleaved({
            form: functools.partial(_time_per_call, functools.partial(
                loop, family_id, params, stats, x), 1000)
            for form, loop in (("rows", _loop_update_rows), ("slots", _loop_update_slots))})
        print(f"{name:36s} {best['rows'] * 1e9:8.1f} {best['slots'] * 1e9:8.1f} "
              f"{best['rows'] / best['slots']:10.2f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default=None,
                        help="source tree of an older version to time in the same run")
    args = parser.parse_args()
    baseline = _load_baseline(args.baseline) if args.baseline else None
    rng = np.random.default_rng(0)
    header = (f"{'family':32s} {'leaf ns':>8s} {'dispatch ns':>11s} {'python ns':>9s} "
              f"{'reference ns':>12s} {'ref/dispatch':>12s} {'add+remove ns':>13s}")
    if baseline:
        header += (f" {'old leaf ns':>11s} {'old/new':>7s} {'old add+remove ns':>17s} "
                   f"{'old/new':>7s}")
    _print_header(header)
    for name, family, module, leaf, raw in _cases(rng):
        x = family.prepare_data(raw)
        cluster, queries = x[:CLUSTER_SIZE], np.ascontiguousarray(x[CLUSTER_SIZE:])
        row = family.stats_of(cluster)
        params, family_id = family.params, family.family_id
        leaf_time = _time_per_call(
            lambda r: _loop_leaf(leaf, params, row, queries, r), 1000)
        dispatch_time = _time_per_call(
            lambda r: _loop_dispatch(family_id, params, row, queries, r), 1000)
        add = getattr(module, _leaf_name(leaf, "add_point"))
        remove = getattr(module, _leaf_name(leaf, "remove_point"))
        update_row = row.copy()
        update_time = _time_per_call(
            lambda r: _loop_update(add, remove, params, update_row, queries, r), 1000)

        def python_calls(repetitions):
            for r in range(repetitions):
                family.log_predictive(queries[r % N_QUERIES], row)

        def reference_calls(repetitions):
            for r in range(repetitions):
                module.reference_log_predictive(family, queries[r % N_QUERIES], cluster)

        python_time = _time_per_call(python_calls, 10)
        reference_time = _time_per_call(reference_calls, 4)
        line = (f"{name:32s} {leaf_time * 1e9:8.1f} {dispatch_time * 1e9:11.1f} "
                f"{python_time * 1e9:9.0f} {reference_time * 1e9:12.0f} "
                f"{reference_time / dispatch_time:12.0f} {update_time * 1e9:13.1f}")
        if baseline:
            old_leaf, old_update = _baseline_times(
                baseline[module.__name__.rsplit(".", 1)[1]], family, raw, CLUSTER_SIZE, leaf)
            line += (f" {old_leaf * 1e9:11.1f} {old_leaf / leaf_time:7.2f} "
                     f"{old_update * 1e9:17.1f} {old_update / update_time:7.2f}")
        print(line, flush=True)
    if args.baseline:
        compare_dispatch(args.baseline)
    compare_slot_forms()


if __name__ == "__main__":
    main()
