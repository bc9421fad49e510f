"""Cost of one PartitionPriorSlice update against one SAMS + Gibbs partition step (n = 100).

Goal: the exact update of the partition prior's parameters should cost at most 5 %
of a partition step.  One model (2-D Normal-inverse-Wishart mixture of three clusters,
n = 100, Pitman-Yor prior with ``alpha ~ Gamma(2, 1)`` and ``discount ~ Uniform(0, 0.9)``);
timed side by side in one process, interleaved in blocks (the machine is shared):

* ``partition``: ``DefaultPartitionStep(z).step(point)`` (SAMS + one Gibbs sweep);
* ``slice numba``: ``PartitionPriorSlice([alpha, discount]).step(point)`` (numba kernel over
  the cluster sizes) and the same for ``alpha`` alone;
* ``slice plain``: the same steps forced onto the plain path (numpy EPPF + the parameter's
  compiled PyMC logp per evaluation);

and, with ``--baseline PATH`` (a checkout of an older commit, e.g.
``git worktree add /tmp/pri-base a075fa5``), the same measurements of that checkout in a
subprocess, printed beside.  ``--profile`` adds a cProfile breakdown of ``pm.sample``'s
per-draw overhead (everything but the step methods' own ``step``).

Usage::

    PYTHONPATH=$PWD python benchmarks/concentration.py [--repeats 400] [--baseline DIR]
        [--profile]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

N_POINTS = 100


def _model():
    import pymc as pm

    import pymc_splitmerge as psm

    rng = np.random.default_rng(0)
    centres = np.array([[-4.0, 0.0], [0.0, 4.0], [4.0, 0.0]])
    data = centres[rng.integers(0, 3, N_POINTS)] + rng.normal(size=(N_POINTS, 2))
    family = psm.NormalInverseWishart(mu0=np.zeros(2), kappa0=0.1, nu0=4.0, psi0=np.eye(2))
    with pm.Model() as model:
        alpha = pm.Gamma("alpha", 2.0, 1.0)
        discount = pm.Uniform("discount", 0.0, 0.9)
        z = psm.PitmanYor("z", alpha=alpha, discount=discount, n=N_POINTS)
        psm.ConjugateMixture("y", partition=z, component=family, observed=data)
    return model, z, alpha, discount


def _time_blocks(functions: dict, repeats: int, blocks: int = 5) -> dict:
    """Best-of-blocks time per call (µs) of each function, interleaved block by block."""
    best = {name: np.inf for name in functions}
    per_block = max(repeats // blocks, 1)
    for _ in range(blocks):
        for name, function in functions.items():
            start = time.perf_counter()
            for _ in range(per_block):
                function()
            best[name] = min(best[name], (time.perf_counter() - start) / per_block * 1e6)
    return best


def measure(repeats: int) -> dict:
    """Times (µs per call) of the partition step and the prior-parameter steps."""
    import pymc_splitmerge as psm

    model, z, alpha, discount = _model()
    with model:
        partition = psm.steps.DefaultPartitionStep(z, rng=1)
        both = psm.PartitionPriorSlice([alpha, discount], rng=2)
        alpha_only = psm.PartitionPriorSlice(alpha, rng=3)
        steps = {"partition": partition, "slice alpha+discount": both,
                 "slice alpha": alpha_only}
        has_fast = hasattr(both, "updates") and hasattr(both.updates[0], "fast")
        if has_fast:
            steps["slice plain alpha+discount"] = psm.PartitionPriorSlice(
                [alpha, discount], rng=2, use_numba=False)
            steps["slice plain alpha"] = psm.PartitionPriorSlice(alpha, rng=3, use_numba=False)
        point = model.initial_point()
        point["z"] = np.zeros(N_POINTS, dtype=point["z"].dtype)
        for _ in range(50):  # burn in (and compile)
            point, _ = partition.step(point)
            for name, step in steps.items():
                if name != "partition":
                    point, _ = step.step(point)
        state = {"point": point}

        def runner(step):
            def run():
                state["point"], _ = step.step(state["point"])
            return run

        times = _time_blocks({name: runner(step) for name, step in steps.items()}, repeats)
    times["n_clusters"] = int(np.unique(state["point"]["z"]).size)
    times["numba"] = has_fast
    return times


def profile_sample(draws: int = 600) -> None:
    """cProfile of ``pm.sample`` (partition step only, constant alpha): where a draw goes."""
    import cProfile
    import pstats

    import pymc as pm

    import pymc_splitmerge as psm

    rng = np.random.default_rng(0)
    data = np.array([[-4.0, 0.0], [4.0, 0.0]])[rng.integers(0, 2, N_POINTS)]
    data = data + rng.normal(size=(N_POINTS, 2))
    family = psm.NormalInverseWishart(mu0=np.zeros(2), kappa0=0.1, nu0=4.0, psi0=np.eye(2))
    with pm.Model():
        z = psm.DirichletProcess("z", alpha=1.0, n=N_POINTS)
        psm.ConjugateMixture("y", partition=z, component=family, observed=data)
        step = psm.steps.DefaultPartitionStep(z, rng=1)
        kwargs = {"tune": 0, "chains": 1, "cores": 1, "step": step, "progressbar": False,
                  "compute_convergence_checks": False, "random_seed": 1}
        pm.sample(draws=50, **kwargs)  # compile
        timings = {}
        for count in (draws // 4, draws):  # marginal cost per draw: setup cancels
            start = time.perf_counter()
            pm.sample(draws=count, **kwargs)
            timings[count] = time.perf_counter() - start
        per_draw = (timings[draws] - timings[draws // 4]) / (draws - draws // 4)
        point = {"z": np.zeros(N_POINTS, dtype=np.int64)}
        for _ in range(50):
            point, _ = step.step(point)
        start = time.perf_counter()
        for _ in range(draws):
            point, _ = step.step(point)
        step_only = (time.perf_counter() - start) / draws
        # the adapter's parts (steps/base.py PartitionStep.step), timed alone.  As in
        # pm.sample, each step gets the point the previous one returned (the cached state
        # is reused); current_state is timed on the point the step wrote last (a cache hit).
        chain = {"point": point}

        def chained_step():
            chain["point"], _ = step.step(chain["point"])

        state, prior, tables = step.current_state(point)
        blocks = {
            "step.step (whole adapter + kernels)": chained_step,
            "kernel_step (SAMS + Gibbs kernels)": lambda: step.kernel_step(state, prior, tables),
            "current_state (cache hit)": lambda: step.current_state(chain["point"]),
            "state.labels() (canonical relabel)": state.labels,
        }
        # current_state evaluates the model's hyperparameter function only when some
        # hyperparameter is random or pm.Data (constants are read once per chain): time it
        # only when it is on the path, so the table adds up.
        if step.partition_model.random_hyperparameters:
            blocks["  compiled hyperparameter function"] = (
                lambda: step.partition_model._evaluate(point))
        parts = _time_blocks(blocks, draws)
        profiler = cProfile.Profile()
        profiler.enable()
        pm.sample(draws=draws, **kwargs)
        profiler.disable()
    print(f"\npm.sample: {per_draw * 1e6:.0f} µs per draw (marginal), step.step alone "
          f"{step_only * 1e6:.0f} µs, pm.sample's own share {(per_draw - step_only) * 1e6:.0f} "
          f"µs per draw")
    for name, value in parts.items():
        print(f"  {name:40s} {value:8.1f} µs")
    stats = pstats.Stats(profiler)
    stats.sort_stats("tottime").print_stats(15)


def _print(columns: dict) -> None:
    names = [k for k in next(iter(columns.values())) if k not in ("n_clusters", "numba")]
    print(f"n = {N_POINTS}, K at the end: "
          + ", ".join(f"{label}: {c['n_clusters']}" for label, c in columns.items()))
    header = f"{'step':30s}" + "".join(f"{label:>26s}" for label in columns)
    print(header)
    for name in names:
        row = f"{name:30s}"
        for column in columns.values():
            if name in column:
                ratio = column[name] / column["partition"]
                row += f"{column[name]:12.1f} µs {100 * ratio:7.1f} %  "
            else:
                row += f"{'-':>26s}"
        print(row)
    print("(% = time of one call relative to one partition step measured in the same process)")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=400)
    parser.add_argument("--baseline", default=None, help="checkout of an older commit")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(measure(args.repeats)))
        return
    columns = {"this tree": measure(args.repeats)}
    if args.baseline:
        env = dict(os.environ, PYTHONPATH=os.path.abspath(args.baseline))
        result = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker",
                                 "--repeats", str(args.repeats)], env=env, check=True,
                                capture_output=True, text=True)
        columns["baseline"] = json.loads(result.stdout.strip().splitlines()[-1])
    _print(columns)
    if args.profile:
        profile_sample()


if __name__ == "__main__":
    main()
