"""First run against later runs: the README's minimal model with an empty numba cache (cold)
and with the cache that run left (warm), each in a fresh process.

Every repetition makes a new temporary directory, points ``NUMBA_CACHE_DIR`` at it (so the
package's kernels must be compiled: the state of a first use after installation) and runs, in
a fresh process, what the README's minimal model does: import pymc and pymc_splitmerge, build
the model (2-D Normal-inverse-Wishart, Dirichlet process with a Gamma concentration, Gaussian
blobs), ``pm.sample`` it.  Then the same in another fresh process with the cache now full
(warm).  Printed per phase, median over repetitions, seconds (wall unless said):

* ``imports``: ``import pymc, pymc_splitmerge`` (from the process start);
* ``model``: building the model;
* ``pm.sample``: the whole call (set-up, the first-draw kernel loads or compiles, the draws,
  the conversion to InferenceData / DataTree and the checks);
* ``process``: the child's wall time seen from the parent (interpreter start to exit,
  sampler worker processes included);
* ``process CPU``: the CPU seconds (user + system) of the child and its sampler worker
  processes, seen from the parent: less sensitive than wall times to other processes on a
  shared machine (compilation runs on one core per process);
* ``numba compile``: seconds inside numba compilations of the package's kernels in the main
  process (``pymc_splitmerge._compile_notice.compile_seconds``; a kernel compiled inside
  another's compilation counted once; worker processes of ``cores > 1`` not included),
  with the number of such compilations;
* ``notice``: whether the one-line "compiling numba kernels" message was printed;
* the compiled functions with the most seconds of their own in the cold run (a function's
  compilation less the compilations of its callees it started; an inlined function is part
  of its caller's);
* the run-time switches over every family (``components._leaf_dispatch``) the cold run
  compiled: none when every kernel was specialised to the model's family.

``--first-calls`` measures instead, in fresh processes with empty caches, the CPU seconds of
the compiled calls a first draw of the README model makes (the partition state of its data,
5 cluster-anchor SAMS updates, one Gibbs sweep; numba's own first use done before the
timing), without PyMC: the compilation of the package's kernels with less of a loaded
machine's noise, to compare two versions of the package in interleaved runs.

It also checks that cold and warm runs reached the same draws (same seed, same number of
clusters in every draw) and prints a hash of those numbers, to compare two versions of the
package.  The README's settings are ``--n 300 --draws 2000 --tune 500
--chains 4`` with PyMC's default cores; the defaults below are smaller (a shared machine)::

    PYTHONPATH=$PWD python benchmarks/cold_start.py --repeats 1
    PYTHONPATH=$PWD python benchmarks/cold_start.py --n 300 --draws 2000 --tune 500 --chains 4 --cores 2
    PYTHONPATH=$PWD python benchmarks/cold_start.py --first-calls --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import json, sys, time
start = time.perf_counter()
import numpy as np
import pymc as pm
import pymc_splitmerge as psm
from pymc_splitmerge import _compile_notice
from numba.core import event
levels, stack = {}, []
class Levels(event.Listener):  # every compiled function's own seconds (callees' excluded)
    def on_start(self, ev):
        function = getattr(ev.data.get("dispatcher"), "py_func", None)
        name = f"{function.__module__}.{function.__qualname__}" if function else "?"
        stack.append([name, time.perf_counter(), 0.0])
    def on_end(self, ev):
        name, began, inner = stack.pop()
        seconds = time.perf_counter() - began
        levels[name] = levels.get(name, 0.0) + seconds - inner
        if stack:
            stack[-1][2] += seconds
event.register("numba:compile", Levels())
config = json.loads(sys.argv[1])
imported = time.perf_counter()
y, _ = psm.datasets.gaussian_blobs(n=config["n"], n_components=4, dim=2, seed=1)
with pm.Model() as model:
    alpha = pm.Gamma("alpha", 1.0, 1.0)
    z = psm.DirichletProcess("z", alpha=alpha, n=len(y))
    psm.ConjugateMixture("y", partition=z, component=psm.NormalInverseWishart(
        mu0=y.mean(axis=0), kappa0=0.05, nu0=4.0, psi0=np.eye(2)), observed=y)
built = time.perf_counter()
with model:
    idata = pm.sample(draws=config["draws"], tune=config["tune"], chains=config["chains"],
                      cores=config["cores"], random_seed=1, progressbar=False)
sampled = time.perf_counter()
seconds, count = _compile_notice.compile_seconds()
from pymc_splitmerge.components import _leaf_dispatch
switches = sorted(name for name in _leaf_dispatch.__all__
                  if name.startswith("leaf_") and getattr(_leaf_dispatch, name).signatures)
n_clusters = np.asarray(idata["posterior"]["n_clusters"].values)
print(json.dumps({"imports": imported - start, "model": built - imported,
                  "pm.sample": sampled - built, "numba compile": seconds, "compilations": count,
                  "kernels": _compile_notice.compiled_kernels(), "switches": switches,
                  "levels": sorted(levels.items(), key=lambda item: -item[1])[:12],
                  "draws_hash": int(n_clusters.sum() * 1000003 + n_clusters[..., ::7].sum())}))
"""

FIRST_CALLS = r"""
import json, sys, time
import numpy as np
import numba
numba.njit(lambda a: a[0] + 1.0)(np.zeros(2))  # numba's own first use, outside the timing
import pymc_splitmerge as psm
from pymc_splitmerge.kernels.gibbs import build_gibbs_sweep
from pymc_splitmerge.kernels.sams import build_sams_move
from pymc_splitmerge.kernels.state import PartitionState
from pymc_splitmerge.priors.dirichlet_process import DirichletProcessPrior
config = json.loads(sys.argv[1])
y, labels = psm.datasets.gaussian_blobs(n=config["n"], n_components=4, dim=2, seed=1)
started = time.process_time()
family = psm.NormalInverseWishart(mu0=y.mean(axis=0), kappa0=0.05, nu0=4.0, psi0=np.eye(2))
state = PartitionState(family, np.ascontiguousarray(family.prepare_data(y)), np.asarray(labels))
built = time.process_time()
tables = state.tables(*DirichletProcessPrior(1.0).tables(config["n"]))
rng = np.random.default_rng(3)
build_sams_move(cluster_anchors=True, n_updates=5)(state.model, state.partition, tables, rng)
split_merged = time.process_time()
build_gibbs_sweep()(state.model, state.partition, tables, rng)
swept = time.process_time()
print(json.dumps({"state build": built - started, "SAMS updates": split_merged - built,
                  "Gibbs sweep": swept - split_merged, "total": swept - started}))
"""


def first_calls(config, repeats):
    """CPU seconds of the README path's first compiled calls, each repetition in a fresh
    process with an empty cache: median and every value per phase."""
    runs = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="psm-numba-cache-") as cache_dir:
            runs.append(_run_child(FIRST_CALLS, config, cache_dir)[0])
    print(f"python {sys.version.split()[0]}, n={config['n']}, {repeats} fresh process(es) with "
          f"an empty cache, load {os.getloadavg()[0]:.1f}; CPU seconds of the first calls")
    for phase in runs[0]:
        values = [r[phase] for r in runs]
        print(f"  {phase:<16}{statistics.median(values):>7.2f}   "
              f"({', '.join(f'{value:.2f}' for value in values)})")


def _run_child(script, config, cache_dir):
    """``script`` run in a fresh interpreter with ``NUMBA_CACHE_DIR=cache_dir``: the JSON of
    its last line of output, and its standard error."""
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", script, json.dumps(config)], env=env, cwd=ROOT,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


def run(config, cache_dir):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result, stderr = _run_child(CHILD, config, cache_dir)
    result["process"] = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    result["process CPU"] = (after.ru_utime - before.ru_utime
                             + after.ru_stime - before.ru_stime)
    result["notice"] = "compiling numba kernels" in stderr
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--tune", type=int, default=200)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--cores", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--first-calls", action="store_true",
                        help="time the README path's first compiled calls alone (no PyMC)")
    args = parser.parse_args(argv)
    config = {key: getattr(args, key) for key in ("n", "draws", "tune", "chains", "cores")}
    if args.first_calls:
        first_calls(config, args.repeats)
        return
    runs = {"cold": [], "warm": []}
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory(prefix="psm-numba-cache-") as cache_dir:
            runs["cold"].append(run(config, cache_dir))
            runs["warm"].append(run(config, cache_dir))
    hashes = {r["draws_hash"] for rs in runs.values() for r in rs}
    import numba
    import pymc

    print(f"python {sys.version.split()[0]}, pymc {pymc.__version__}, numba {numba.__version__},"
          f" {os.cpu_count()} CPUs; config {config}; {args.repeats} repeat(s); "
          f"same draws cold and warm: {len(hashes) == 1} (hash of the numbers of clusters: "
          f"{', '.join(str(value) for value in sorted(hashes))})")
    print(f"{'phase (s, median)':<24}{'cold':>10}{'warm':>10}{'cold/warm':>11}")
    for phase in ("imports", "model", "pm.sample", "process", "process CPU", "numba compile"):
        cold = statistics.median(r[phase] for r in runs["cold"])
        warm = statistics.median(r[phase] for r in runs["warm"])
        ratio = f"{cold / warm:.2f}" if warm > 0 else "-"
        print(f"{phase:<24}{cold:>10.2f}{warm:>10.2f}{ratio:>11}")
    print(f"{'compilations':<24}{statistics.median(r['compilations'] for r in runs['cold']):>10.0f}"
          f"{statistics.median(r['compilations'] for r in runs['warm']):>10.0f}")
    print("cold run's outermost compilations (kernel: seconds):")
    for kernel, seconds in runs["cold"][0]["kernels"]:
        print(f"  {kernel}: {seconds:.1f}")
    print("cold run's compiled functions with the most seconds of their own (callees "
          "excluded; a function inlined into its caller is not one):")
    for function, seconds in runs["cold"][0]["levels"]:
        print(f"  {function}: {seconds:.1f}")
    print("run-time family switches compiled in the cold run (none when every kernel is "
          f"specialised to the model's family): {runs['cold'][0]['switches'] or 'none'}")
    print(f"{'notice printed':<24}{all(r['notice'] for r in runs['cold'])!s:>10}"
          f"{any(r['notice'] for r in runs['warm'])!s:>10}")


if __name__ == "__main__":
    main()
