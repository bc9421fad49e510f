"""Benchmark: random hyperparameters of the component family at O(clusters) per evaluation.

A DP mixture of Normal-Inverse-Wishart components (D = 4, 10 well-separated clusters) whose
``mu0``, ``kappa0`` and the scale ``s`` of ``psi0 = s I`` are random.  With the labels fixed
(the state NUTS or a slice step sees between two partition moves), it measures, in one run:

* the gradient of the model's log density with respect to the hyperparameters
  (``model.compile_dlogp``) at the smallest and the largest ``--sizes`` (goal: within 1.5x,
  flat in n), the statistics computed once before timing, the labels in the read-only array
  a partition step writes (recognised in O(1)); also the same labels in an ordinary array
  (compared with the cached labels element by element, O(n));
* at ``--gibbs-n`` points: the same gradient against one collapsed Gibbs sweep of the
  fixed-hyperparameter twin (``CollapsedGibbsStep.step``; goal: at most 0.2x);
* the cost of a gradient when the labels change at every call (statistics recomputed), for
  reference.

Times are the best of ``--repeats`` blocks of CPU time of the thread (``time.thread_time``):
on a shared machine wall time includes waiting for a core.

Run: ``python benchmarks/hierarchical.py [--sizes 1000 100000] [--gibbs-n 10000]
[--repeats 5] [--calls 50]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pymc as pm

import pymc_splitmerge as psm
from pymc_splitmerge.components import NormalInverseWishart
from pymc_splitmerge.distributions.statistics import mark_written_labels

DIM = 4
CLUSTERS = 10


def make_data(n, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=8.0, size=(CLUSTERS, DIM))
    truth = rng.integers(CLUSTERS, size=n)
    return centres[truth] + rng.normal(size=(n, DIM)), truth


def hierarchical_model(x):
    with pm.Model() as model:
        mu0 = pm.Normal("mu0", 0.0, 5.0, shape=DIM)
        kappa0 = pm.Gamma("kappa0", 2.0, 2.0)
        scale = pm.HalfNormal("scale", 2.0)
        z = psm.DirichletProcess("z", alpha=1.0, n=x.shape[0])
        psm.ConjugateMixture("y", partition=z, component=NormalInverseWishart(
            mu0=mu0, kappa0=kappa0, nu0=DIM + 2.0, psi0=scale * np.eye(DIM)), observed=x)
    return model


def best_time(function, calls, repeats):
    best = np.inf
    for _ in range(repeats):
        start = time.thread_time()
        for _ in range(calls):
            function()
        best = min(best, (time.thread_time() - start) / calls)
    return best


def gradient_functions(n, calls):
    """Calls of the gradient: labels fixed and written by a step, fixed in a user's array,
    changed at every call (each warmed up once)."""
    x, truth = make_data(n)
    model = hierarchical_model(x)
    # one compiled function per kind: each keeps its own cached statistics
    dlogp_written, dlogp_user, dlogp = (model.compile_dlogp() for _ in range(3))
    dtype = model["z"].dtype
    # labels as a partition step writes them (a new read-only array, recognised in O(1))
    point = {**model.initial_point(), "z": mark_written_labels(truth.astype(dtype))}
    # the same labels in an ordinary array (a user's point): compared element by element
    user = {**point, "z": truth.astype(dtype)}
    rng = np.random.default_rng(1)
    moved = [truth.copy() for _ in range(calls)]
    for labels in moved:
        labels[rng.integers(n)] = rng.integers(CLUSTERS)
    moved = [labels.astype(dtype) for labels in moved]
    state = {"i": 0}

    def changing():
        state["i"] = (state["i"] + 1) % len(moved)
        dlogp({**point, "z": moved[state["i"]]})

    functions = {"written": lambda: dlogp_written(point), "user": lambda: dlogp_user(user),
                 "changed": changing}
    for function in functions.values():
        function()  # statistics of the fixed labels computed before timing
    return functions


def gradient_costs(sizes, calls, repeats):
    """{n: {kind: seconds}}, the blocks of every size and kind interleaved (a shared
    machine's load falls on all of them alike)."""
    functions = {n: gradient_functions(n, calls) for n in sizes}
    costs = {n: dict.fromkeys(functions[n], np.inf) for n in sizes}
    for _ in range(repeats):
        for n in sizes:
            for kind, function in functions[n].items():
                costs[n][kind] = min(costs[n][kind], best_time(function, calls, 1))
    return costs


def gibbs_sweep_cost(n, repeats):
    x, truth = make_data(n)
    with pm.Model() as model:
        z = psm.DirichletProcess("z", alpha=1.0, n=n)
        psm.ConjugateMixture("y", partition=z, component=NormalInverseWishart(
            mu0=np.zeros(DIM), kappa0=1.0, nu0=DIM + 2.0, psi0=np.eye(DIM)), observed=x)
        step = psm.CollapsedGibbsStep(z)
    if hasattr(step, "set_rng"):
        step.set_rng(np.random.default_rng(0))
    point = {"z": truth.astype(model["z"].dtype)}
    point, _ = step.step(point)

    def sweep():
        nonlocal point
        point, _ = step.step(point)

    return best_time(sweep, 3, repeats)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs=2, default=[1_000, 100_000])
    parser.add_argument("--gibbs-n", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args()
    small, large = args.sizes
    print(f"NIW D={DIM}, {CLUSTERS} clusters; random mu0, kappa0, psi0 scale; CPU time, best "
          f"of {args.repeats}")
    costs = gradient_costs(sorted({small, large, args.gibbs_n}), args.calls, args.repeats)
    for n, cost in costs.items():
        print(f"n = {n:>7,}: gradient {cost['written'] * 1e3:8.3f} ms (labels fixed, written "
              f"by a step), {cost['user'] * 1e3:8.3f} ms (fixed, a user's array), "
              f"{cost['changed'] * 1e3:8.3f} ms (changed every call)")
    sweep = gibbs_sweep_cost(args.gibbs_n, args.repeats)
    print(f"n = {args.gibbs_n:>7,}: one collapsed Gibbs sweep {sweep * 1e3:8.3f} ms")
    print(f"ratio gradient n={large:,} / n={small:,}: "
          f"{costs[large]['written'] / costs[small]['written']:.2f} (goal <= 1.5); "
          f"labels in a user's array {costs[large]['user'] / costs[small]['user']:.2f}")
    print(f"ratio gradient / Gibbs sweep at n={args.gibbs_n:,}: "
          f"{costs[args.gibbs_n]['written'] / sweep:.3f} (goal <= 0.2)")


if __name__ == "__main__":
    main()
