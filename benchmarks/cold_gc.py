"""How much of a fresh process's CPU time to the first draw is Python's cyclic garbage collector.

The cold path of ``cold_phases.py`` (``import pymc``, ``import pymc_splitmerge``,
``scale.build_model``, ``psm.splitmerge_start``, ``pm.sample`` to the first draw; SAMS+Gibbs,
2-D NIW, n = 20,000) in fresh processes, with ``gc.callbacks`` timing every collection, per
generation, and noting the phase each full (generation 2) collection falls in.  The imports
leave a heap of a few hundred thousand container objects (PyMC, PyTensor, pandas, xarray,
numba, scipy); every full collection walks all of it, and one falls wherever the heap has
grown by a quarter since the last one, so a phase's CPU time moves by 0.04-0.13 s between two
trees when a full collection crosses a phase boundary (``cold_phases.py`` per-phase numbers).

``--variants plain freeze``: ``freeze`` calls ``gc.freeze()`` right after ``import
pymc_splitmerge`` (the objects alive then are never walked again), to show what the collector
costs after the imports; the library does NOT do this (it would be a process-wide side effect:
cyclic garbage among the frozen objects is never freed).  Runs alternate between variants;
every run must reach the same labels at the first draw.

``point``: ``psm.splitmerge_start(..., point={"z": zeros})``, the model's initial point given
(as a start that skipped ``model.initial_point()`` would have it), to show what PyTensor's
compile of the initial point costs there: the start no longer pays PyTensor's first
compilation, ``pm.sample``'s set-up (which compiles its own functions) pays it instead.  BLAS single-threaded as ``scale.py
--vi`` (``blas_threads.limit_blas_threads``)::

    PYTHONPATH=$PWD python benchmarks/cold_gc.py --repeats 6 --variants plain freeze
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PHASES = ("imports", "model", "start", "setup+draw 1")


def child(variant: str, n: int) -> dict:
    import gc

    sys.path.insert(0, HERE)
    import scale

    collections = {"time": [0.0, 0.0, 0.0], "count": [0, 0, 0], "full": []}
    began = [0.0]
    marks = []

    def callback(phase, info):
        now = time.process_time()
        if phase == "start":
            began[0] = now
            return
        generation = info["generation"]
        collections["time"][generation] += now - began[0]
        collections["count"][generation] += 1
        if generation == 2:
            collections["full"].append((len(marks), now - began[0]))

    gc.callbacks.append(callback)
    tic = time.process_time()
    y, _, _ = scale.make_data(n, 2, seed=0)
    clock0 = time.process_time() - tic  # the data are not counted (as in scale.py)
    import pymc as pm

    import pymc_splitmerge as psm

    if variant == "freeze":
        gc.freeze()
    marks.append(time.process_time())
    model = scale.build_model(y)
    marks.append(time.process_time())
    point = None
    if variant == "point":  # what a start without PyTensor's initial-point compile would see
        import numpy as np

        point = {"z": np.zeros(n, dtype=model["z"].dtype)}
    start = psm.splitmerge_start(model, subsample_size=2000, random_seed=0, point=point)
    marks.append(time.process_time())
    step = psm.SAMSStep(model["z"], n_gibbs_sweeps=1, model=model)
    import warnings

    warnings.simplefilter("ignore")
    with model:
        trace = pm.sample(draws=1, tune=0, chains=1, cores=1, step=step, initvals=start,
                          random_seed=0, progressbar=False, compute_convergence_checks=False,
                          return_inferencedata=False)
    marks.append(time.process_time())
    bounds = [clock0, *marks]
    labels = trace["z"][-1]
    return {
        "phases": [b - a for a, b in itertools.pairwise(bounds)],
        "to draw 1": marks[-1] - clock0,
        "gc": collections,
        "labels": hashlib.sha256(labels.tobytes()).hexdigest()[:16],
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--variants", nargs="+", default=["plain", "freeze"],
                        choices=["plain", "freeze", "point"])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.n)))
        return
    sys.path.insert(0, HERE)
    from blas_threads import limit_blas_threads

    env = dict(os.environ)
    limit_blas_threads(env, 1, override=True)
    rows = {variant: [] for variant in args.variants}
    hashes = set()
    for _ in range(args.repeats):
        for variant in args.variants:
            out = subprocess.run([sys.executable, __file__, "--child", variant, "--n",
                                  str(args.n)], env=env, capture_output=True, text=True,
                                 check=True)
            result = json.loads(out.stdout.strip().splitlines()[-1])
            rows[variant].append(result)
            hashes.add(result["labels"])
    print(f"n = {args.n}, {args.repeats} fresh processes per variant, alternating; "
          "median CPU s\n")
    print("| | " + " | ".join(args.variants) + " |")
    print("|---|" + "---|" * len(args.variants))

    def line(name, get):
        cells = [f"{statistics.median(get(r) for r in rows[v]):.3f}" for v in args.variants]
        print(f"| {name} | " + " | ".join(cells) + " |")

    for i, phase in enumerate(PHASES):
        line(f"cold {phase}", lambda r, i=i: r["phases"][i])
    line("cold to draw 1", lambda r: r["to draw 1"])
    for generation in range(3):
        line(f"gc generation {generation}: CPU s",
             lambda r, g=generation: r["gc"]["time"][g])
        line(f"gc generation {generation}: collections",
             lambda r, g=generation: r["gc"]["count"][g])
    line("gc all generations: CPU s", lambda r: sum(r["gc"]["time"]))
    for variant in args.variants:
        example = rows[variant][0]["gc"]["full"]
        where = ", ".join(f"{PHASES[k]} {t:.3f}"
                          for k, t in example)
        print(f"\nfull collections, first {variant} run (phase, CPU s): {where}")
    print(f"\nsame labels at the first draw in every run: {len(hashes) == 1}")


if __name__ == "__main__":
    main()
