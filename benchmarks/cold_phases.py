"""Where a fresh process's CPU time to the first draw goes, per phase, tree against tree.

Runs ``benchmarks/scale.py --one`` with the ``cold_warm`` protocol of ``--vi`` (SAMS+Gibbs
through ``pm.sample`` from ``psm.splitmerge_start``, 2-D NIW, n = 20,000 by default) in fresh
processes, alternating between the given source trees (each run imports the package and
``scale.py`` of its own tree: ``PYTHONPATH=<tree>``, working directory ``<tree>``), and prints
per phase the median CPU seconds of each tree and their ratio to the first tree's:

* cold (clock from the process start): ``imports`` (``import pymc``, ``import
  pymc_splitmerge``), ``model`` (``scale.build_model``: the first numba kernel load of the
  process falls here), ``start`` (``psm.splitmerge_start``), ``setup+draw 1`` (``pm.sample``'s
  set-up and the first draw), ``to draw 1`` and ``to draw 20`` (totals);
* warm (the same fit again in the same process): ``model``, ``setup+draw 1``, ``to draw 1``.

It also checks that every run ended at the same held-out density (same draws).  The runs have
single-threaded BLAS, as ``scale.py``'s (``--blas-threads``; before 2026-11-27, third session,
they had the environment's: on py312, 2 cores, ~0.2 s more to the first draw, 0.12 s of it in
the imports and 0.08 s in the model phase, idle OpenBLAS threads spinning).  Full garbage collections (0.05-0.13 s each,
``cold_gc.py``) land in whichever phase the heap crosses the collector's threshold, so a phase
can move by that much between trees with no change of work in it: compare totals.  Byte-compile
every tree first and warm the numba cache with one run per tree (the sandbox sets
``PYTHONDONTWRITEBYTECODE=1``)::

    env -u PYTHONDONTWRITEBYTECODE python -m compileall -q pymc_splitmerge benchmarks
    env -u PYTHONDONTWRITEBYTECODE python benchmarks/cold_phases.py --trees OLD NEW --repeats 6

(``NUMBA_CACHE_DIR`` is passed on; one directory serves both trees, the cache index is per
source path.)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from blas_threads import limit_blas_threads

CONFIG = {"n": 20000, "dim": 2, "sampler": "sams+gibbs", "draws": 20, "record_every": 1,
          "seed": 0, "start": "subsample", "cold_warm": True}


def run(tree, config, blas_threads=1):
    env = dict(os.environ, PYTHONPATH=tree)
    if blas_threads:  # as scale.py's spawned processes (--vi), which this breaks down
        limit_blas_threads(env, blas_threads, override=True)
    out = subprocess.run([sys.executable, os.path.join(tree, "benchmarks", "scale.py"), "--one",
                          json.dumps(config)], cwd=tree, env=env, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def phases(result):
    cold, warm = result["cold"], result["warm"]
    return {
        "cold imports": cold["imports_cpu"],
        "cold model": cold["model_cpu"] - cold["imports_cpu"],
        "cold start": cold["start_cpu"],
        "cold setup+draw 1": cold["first_draw_cpu"] - cold["model_cpu"] - cold["start_cpu"],
        "cold to draw 1": cold["first_draw_cpu"],
        "cold to last draw": cold["cpu_at_record"][-1],
        "warm model": warm["model_cpu"],
        "warm setup+draw 1": warm["first_draw_cpu"] - warm["model_cpu"] - warm["start_cpu"],
        "warm to draw 1": warm["first_draw_cpu"],
    }, (cold["running_lpd"][-1], warm["running_lpd"][-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", nargs="+", required=True)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--n", type=int, default=CONFIG["n"])
    parser.add_argument("--no-warmup", action="store_true",
                        help="skip the first (numba cache warming) run of each tree")
    parser.add_argument("--blas-threads", type=int, default=1,
                        help="OPENBLAS/OMP/MKL_NUM_THREADS of the runs, as scale.py's (0: keep "
                             "the environment's; until 2026-11-27 (third session) the "
                             "environment's, with idle BLAS threads spinning into the CPU "
                             "times: ~0.2 s of the cold path on py312)")
    args = parser.parse_args()
    config = {**CONFIG, "n": args.n}
    trees = [os.path.abspath(tree) for tree in args.trees]
    if not args.no_warmup:
        for tree in trees:
            run(tree, config, args.blas_threads)
    rows = {tree: [] for tree in trees}
    ends = set()
    for _ in range(args.repeats):
        for tree in trees:
            values, end = phases(run(tree, config, args.blas_threads))
            rows[tree].append(values)
            ends.add(end)
    names = list(rows[trees[0]][0])
    medians = {tree: {name: statistics.median(r[name] for r in rows[tree]) for name in names}
               for tree in trees}
    print(f"n = {args.n}, {args.repeats} fresh processes per tree, alternating; "
          "median CPU s (ratio to the first tree)\n")
    print("| phase | " + " | ".join(trees) + " |")
    print("|---|" + "---|" * len(trees))
    for name in names:
        base = medians[trees[0]][name]
        cells = [f"{medians[tree][name]:.3f}" + ("" if tree == trees[0]
                                                 else f" ({medians[tree][name] / base:.2f})")
                 for tree in trees]
        print(f"| {name} | " + " | ".join(cells) + " |")
    print(f"\nsame held-out density at the end of every run: {len(ends) == 1} {sorted(ends)}")


if __name__ == "__main__":
    main()
