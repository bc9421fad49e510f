"""The default partition step of plain ``pm.sample()`` on overlapping data: R-hat per CPU second.

Data: Iris (``sklearn.datasets.load_iris``, 150 points, 4 columns, each standardised).  Model:
``alpha ~ Gamma(1, 1)``, ``DirichletProcess("z", alpha)``, ``ConjugateMixture`` of
``NormalInverseWishart(mu0=0, kappa0=0.05, nu0=6, psi0=0.3 I)``.  Each candidate runs
``pm.sample(draws, tune=0, chains=4, cores=1)`` from PyMC's initial point (every point in one
cluster), the partition prior's alpha getting what PyMC assigns (``ConcentrationGibbs``);
"default" is plain ``pm.sample()`` with no ``step=``.  The candidates alternate within a seed
(who runs first rotates with the seed), so they share the machine's load.

CPU time is ``time.process_time`` between consecutive draws of a chain (a ``callback``), summed
over the four chains: compilation, chain set-up and the trace conversion are excluded.  At a
budget of B CPU seconds the chains have run the largest common number of draws t whose
summed CPU time is at most B; the first half is discarded as burn-in and the rank-normalised
split R-hat of the number of clusters (the label-invariant ``n_clusters`` of the posterior)
is computed over draws t/2..t of the four chains.  "ESS / CPU s" is the bulk ESS of the
number of clusters over the second half of the whole run divided by the CPU seconds of
those draws.

Run: ``python benchmarks/default_step.py [--cpu 8] [--seeds 4] [--budgets 1 2 4]
[--candidates default ...]``
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import limit_blas_threads

limit_blas_threads()  # before numpy loads: idle BLAS threads spin into process_time

import argparse
import time
import warnings

import numpy as np

GOAL_RHAT = 1.01
GOAL_CPU = 2.0


def iris():
    """Standardised Iris: (150, 4), each column mean 0 and standard deviation 1."""
    from sklearn.datasets import load_iris

    x = load_iris().data.astype(np.float64)
    return (x - x.mean(0)) / x.std(0)


def build_model(y):
    """Gamma(1, 1) concentration, DP partition, NIW(mu0=0, kappa0=0.05, nu0=6, psi0=0.3 I)."""
    import pymc as pm

    import pymc_splitmerge as psm

    dim = y.shape[1]
    with pm.Model() as model:
        alpha = pm.Gamma("alpha", 1.0, 1.0)
        z = psm.DirichletProcess("z", alpha=alpha, n=len(y))
        psm.ConjugateMixture("y", partition=z, component=psm.NormalInverseWishart(
            mu0=np.zeros(dim), kappa0=0.05, nu0=dim + 2.0, psi0=0.3 * np.eye(dim)), observed=y)
    return model


def _sams(**options):
    def make(model):
        import pymc_splitmerge as psm

        return [psm.SAMSStep(model["z"], **options)]
    return make


#: name -> None (plain ``pm.sample()``) or ``make(model) -> list of steps`` for ``step=``
CANDIDATES = {
    "default": None,
    "sams_uniform_g1": _sams(n_gibbs_sweeps=1),
    "sams_cluster_g1": _sams(anchor_proposal="cluster", n_gibbs_sweeps=1),
    **{f"sams_uniform_m{m}_g1": _sams(n_split_merge_updates=m, n_gibbs_sweeps=1)
       for m in (5, 20)},
    **{f"sams_cluster_m{m}_g{g}": _sams(anchor_proposal="cluster", n_split_merge_updates=m,
                                        n_gibbs_sweeps=g)
       for m in (5, 10, 20, 50, 100, 200) for g in (0, 1, 2)},
}


def run(model, make_steps, draws, seed):
    """Four chains of ``draws`` draws; returns (n_clusters (4, draws), cpu (4, draws))."""
    import pymc as pm

    times = {}

    def callback(trace, draw):
        times.setdefault(draw.chain, []).append(time.process_time())

    with model:
        kwargs = {} if make_steps is None else {"step": make_steps(model)}
        idata = pm.sample(draws=draws, tune=0, chains=4, cores=1, random_seed=seed,
                          progressbar=False, callback=callback,
                          compute_convergence_checks=False, **kwargs)
    n_clusters = np.asarray(idata["posterior"]["n_clusters"].values)
    cpu = np.zeros(n_clusters.shape)
    for chain, stamps in times.items():
        gaps = np.diff(np.asarray(stamps))
        # the first draw of a chain has no predecessor: charge it the median gap
        cpu[chain] = np.cumsum(np.concatenate([[np.median(gaps)], gaps]))
    return n_clusters, cpu


def rhat(draws):
    import arviz as az

    value = az.rhat(np.asarray(draws, dtype=np.float64))
    return float(np.asarray(getattr(value, "values", value)))


def ess(draws):
    import arviz as az

    value = az.ess(np.asarray(draws, dtype=np.float64))
    return float(np.asarray(getattr(value, "values", value)))


def at_budget(n_clusters, cpu, budget):
    """R-hat over draws t/2..t, t the most draws whose CPU summed over chains <= budget."""
    total = cpu.sum(0)
    t = int(np.searchsorted(total, budget, side="right"))
    if t < 20:
        return float("nan")
    if t > n_clusters.shape[1] - 1 and total[-1] < budget:
        return float("nan")  # the run was too short for this budget
    return rhat(n_clusters[:, t // 2:t])


def summarise(n_clusters, cpu, budgets):
    half = n_clusters.shape[1] // 2
    tail_cpu = cpu[:, -1].sum() - cpu[:, half - 1].sum()
    return {
        "rhat": [at_budget(n_clusters, cpu, b) for b in budgets],
        "ess_per_cpu": ess(n_clusters[:, half:]) / tail_cpu,
        "ms_per_draw": 1e3 * cpu[:, -1].sum() / cpu.size,
        "mean_k": float(n_clusters[:, half:].mean()),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", type=float, default=8.0,
                        help="CPU seconds per run (4 chains), which sets each step's draws")
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--budgets", type=float, nargs="+", default=[1.0, 2.0, 4.0],
                        help="CPU seconds, summed over the 4 chains")
    parser.add_argument("--candidates", nargs="+", default=list(CANDIDATES),
                        choices=list(CANDIDATES))
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    import logging

    logging.getLogger("pymc").setLevel(logging.ERROR)
    model = build_model(iris())
    draws = {}
    for name in args.candidates:  # warm-up (numba caches, PyTensor), then the cost of a draw
        run(model, CANDIDATES[name], 5, 0)
        cpu = run(model, CANDIDATES[name], 100, 0)[1]
        draws[name] = int(np.ceil(args.cpu / cpu[:, -1].sum() * 100))
    results = {name: [] for name in args.candidates}
    for seed in range(args.seeds):
        shift = seed % len(args.candidates)
        for name in args.candidates[shift:] + args.candidates[:shift]:
            results[name].append(summarise(*run(model, CANDIDATES[name], draws[name], seed),
                                           args.budgets))
    print(f"# standardised Iris, DP(alpha ~ Gamma(1, 1)) + NIW(kappa0=0.05, nu0=6, psi0=0.3 I); "
          f"4 chains from one cluster, about {args.cpu:g} CPU s a run, seeds 0..{args.seeds - 1}\n")
    header = " | ".join(f"R-hat at {b:g} CPU s" for b in args.budgets)
    print(f"| step | ms / draw | {header} | runs with R-hat <= {GOAL_RHAT} at "
          f"{GOAL_CPU:g} s | ESS / CPU s | mean K |")
    print("|---|---|" + "---|" * len(args.budgets) + "---|---|---|")
    for name, rows in results.items():
        rhats = np.array([row["rhat"] for row in rows])
        cells = " | ".join(f"{np.nanmedian(rhats[:, i]):.3f} (max {np.nanmax(rhats[:, i]):.3f})"
                           if np.isfinite(rhats[:, i]).any() else "n/a"
                           for i in range(len(args.budgets)))
        at_goal = [row["rhat"][args.budgets.index(GOAL_CPU)] for row in rows] \
            if GOAL_CPU in args.budgets else []
        met = f"{sum(r <= GOAL_RHAT for r in at_goal)}/{len(rows)}" if at_goal else "n/a"
        print(f"| {name} | {np.median([r['ms_per_draw'] for r in rows]):.3f} | {cells} | {met} "
              f"| {np.median([r['ess_per_cpu'] for r in rows]):.0f} "
              f"| {np.mean([r['mean_k'] for r in rows]):.2f} |")


if __name__ == "__main__":
    main()
