"""The default partition step of plain ``pm.sample()`` on overlapping data: R-hat per CPU second.

Data: Iris (``sklearn.datasets.load_iris``, 150 points, 4 columns, each standardised).  Model:
``alpha ~ Gamma(1, 1)``, ``DirichletProcess("z", alpha)``, ``ConjugateMixture`` of
``NormalInverseWishart(mu0=0, kappa0=0.05, nu0=6, psi0=0.3 I)``.  Each candidate runs
``pm.sample(draws, tune=0, chains=4, cores=1)`` from PyMC's initial point (every point in one
cluster).  "default" is plain ``pm.sample()`` with no ``step=``: the ``DefaultPartitionStep``
owning alpha (moves with alpha integrated out, then alpha drawn given the number of
clusters); "escobar_west" the same partition step with ``ConcentrationGibbs(alpha)`` in turn
(what ``pm.sample`` assigns when the Gamma's parameters are random); "default_m<m>" the
default step owning alpha with ``m`` split-merge updates per draw instead of 50; the ``sams_*``
candidates get ``ConcentrationGibbs`` from PyMC.  The candidates alternate within a seed (who
runs first rotates with the seed), so they share the machine's load.

CPU time is ``time.process_time`` between consecutive draws of a chain (a ``callback``), summed
over the four chains: compilation, chain set-up and the trace conversion are excluded.  At a
budget of B CPU seconds the chains have run the largest common number of draws t whose
summed CPU time is at most B; the first half is discarded as burn-in and the rank-normalised
split R-hat of the number of clusters (the label-invariant ``n_clusters`` of the posterior)
is computed over draws t/2..t of the four chains.  "ESS / CPU s" is the bulk ESS of the
number of clusters over the second half of the whole run divided by the CPU seconds of
those draws.  "IAT" is the integrated autocorrelation time of the number of clusters over
the second half (draws per independent draw: draws / bulk ESS); "leaves 1" the last chain's
first draw with more than one cluster, "reaches median K" the last chain's first draw with
at least the median number of clusters of the second half (the burn-in from the one-cluster
start).  Then, per seed, the run a user makes: ``pm.sample(tune=T, draws=D, chains=4,
cores=1)`` with ``T = --user-tune`` and ``T + D`` draws per chain costing ``--user-cpu`` CPU
seconds over the four chains (from the cost of a draw measured first); its R-hat is
``az.rhat`` of the number of clusters over the ``D`` kept draws.

``--profile`` runs the default step under cProfile (4 chains, ``--profile-draws`` draws) and
prints where a draw's CPU time goes: the compiled split-merge updates, the compiled Gibbs
sweep, the draw of alpha given K, the partition step's per-draw work (current state, tables,
labels), and the rest (PyMC's loop and trace).  cProfile inflates Python-level costs.

``--kernel-only`` runs the same transition as the default step (50 cluster-anchor SAMS updates,
one Gibbs sweep) as a plain loop over a ``PartitionState`` (no PyMC), with alpha treated as
``--concentration`` says, side by side within a seed: ``fixed`` at ``--alpha``; ``gibbs``, one
Escobar–West update of alpha ~ Gamma(1, 1) and new prior tables before each draw (the
transition ``pm.sample`` makes, without PyMC); ``collapsed``, alpha integrated out (the
partition's prior is then the Gibbs-type prior with ``V(n, K) = E[alpha^K Gamma(alpha) /
Gamma(alpha + n)]`` under the Gamma prior, by quadrature: the tables of
``GammaMixedDirichletProcessPrior``, which the default step uses).
With ``--draws-needed T ...`` it instead reports the R-hat of the number of clusters over draws
T/2..T of the transition's 4 chains (alpha as the first ``--concentration`` mode), median
over ``--seeds`` runs: the draws per chain the goal needs, whatever the machine's load.

Run: ``python benchmarks/default_step.py [--cpu 8] [--seeds 4] [--budgets 1 2 4]
[--candidates default ...] [--profile [--profile-draws 500]]
[--user-tune 50] [--user-cpu 2] [--kernel-only [--alpha 0.7]
[--concentration fixed gibbs collapsed] [--kernel-draws 1000] [--draws-needed 250 500 1000]]``
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


def _escobar_west(model):
    """The default partition step and an Escobar–West update of alpha in turn (what
    ``pm.sample`` assigns when alpha's Gamma parameters are random)."""
    import pymc_splitmerge as psm

    return [psm.steps.DefaultPartitionStep(model["z"]), psm.ConcentrationGibbs(model["alpha"])]


def _owning_alpha(n_split_merge_updates):
    """The default step owning alpha with another number of split-merge updates per draw."""
    def make(model):
        import pymc_splitmerge as psm

        return [psm.steps.DefaultPartitionStep(model["z"], concentration=model["alpha"],
                                               n_split_merge_updates=n_split_merge_updates)]
    return make


#: name -> None (plain ``pm.sample()``) or ``make(model) -> list of steps`` for ``step=``
CANDIDATES = {
    "default": None,
    "escobar_west": _escobar_west,
    **{f"default_m{m}": _owning_alpha(m) for m in (25, 100)},
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


def user_run(model, make_steps, tune, draws, seed):
    """``pm.sample(tune=tune, draws=draws, chains=4, cores=1)`` as a user runs it: the R-hat
    (``az.rhat``) of the number of clusters over the ``draws`` kept draws, and the CPU
    seconds of all ``tune + draws`` draws of the four chains (as :func:`run` counts them)."""
    import pymc as pm

    times = {}

    def callback(trace, draw):
        times.setdefault(draw.chain, []).append(time.process_time())

    with model:
        kwargs = {} if make_steps is None else {"step": make_steps(model)}
        idata = pm.sample(draws=draws, tune=tune, chains=4, cores=1, random_seed=seed,
                          progressbar=False, callback=callback,
                          compute_convergence_checks=False, **kwargs)
    cpu = 0.0
    for stamps in times.values():
        gaps = np.diff(np.asarray(stamps))
        cpu += gaps.sum() + np.median(gaps)  # the first draw: the median gap (as run)
    return rhat(idata["posterior"]["n_clusters"].values), cpu


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
    tail_ess = ess(n_clusters[:, half:])
    left_one = [int(np.argmax(chain > 1)) if (chain > 1).any() else chain.size
                for chain in n_clusters]
    # burn-in: the first draw at which each chain reaches the median K of the second half
    median_k = np.median(n_clusters[:, half:])
    reached = [int(np.argmax(chain >= median_k)) if (chain >= median_k).any() else chain.size
               for chain in n_clusters]
    return {
        "rhat": [at_budget(n_clusters, cpu, b) for b in budgets],
        "ess_per_cpu": tail_ess / tail_cpu,
        "iat": n_clusters[:, half:].size / tail_ess,
        "leaves_one": max(left_one),
        "burn_in": max(reached),
        "ms_per_draw": 1e3 * cpu[:, -1].sum() / cpu.size,
        "mean_k": float(n_clusters[:, half:].mean()),
    }


#: cProfile entries (file suffix, function name) -> the part of a draw they measure
PROFILE_PARTS = {
    # the built moves' calls around their compiled loops (Python 3.12's cProfile does not
    # see numba dispatchers)
    "split-merge updates (one compiled call)": ("kernels/sams.py", "__call__"),
    "Gibbs sweep (one compiled call)": ("kernels/gibbs.py", "__call__"),
    "alpha drawn given K (DefaultPartitionStep.draw_concentration)": ("steps/sams.py",
                                                                      "draw_concentration"),
    "partition step: current state and tables": ("steps/base.py", "current_state"),
    "partition step: whole step, alpha included": ("steps/sams.py", "step"),
    "PyMC chain (_sample: draw loop and trace)": ("sampling/mcmc.py", "_sample"),
}


def profile(model, draws):
    """Cumulative CPU time per draw of the parts of a default-step draw (cProfile)."""
    import cProfile
    import pstats

    profiler = cProfile.Profile(time.process_time)  # CPU time: the machine is shared
    profiler.enable()
    run(model, None, draws, 1)
    profiler.disable()
    stats = pstats.Stats(profiler).stats
    n_draws = 4 * draws
    print(f"# cProfile of the default step, 4 chains x {draws} draws: microseconds per draw\n")
    print("| part | us / draw |")
    print("|---|---|")
    parts = {}
    for label, (suffix, function) in PROFILE_PARTS.items():
        parts[label] = 1e6 / n_draws * sum(
            cumulative for (path, _, name), (_, _, _, cumulative, _) in stats.items()
            if path.endswith(suffix) and name == function)
        print(f"| {label} | {parts[label]:.0f} |")
    labels = list(PROFILE_PARTS)
    rest = parts[labels[5]] - parts[labels[4]]
    print(f"| PyMC's own per-draw work (loop minus the step) | {rest:.0f} |")


#: ``--kernel-only --concentration`` modes: how the transition treats alpha ~ Gamma(1, 1)
CONCENTRATION_MODES = ("fixed", "gibbs", "collapsed")


def _kernel_setup(y, alpha):
    """Prepared Iris data, the default transition and the fixed and collapsed tables."""
    from pymc_splitmerge.components.normal_inverse_wishart import NormalInverseWishart
    from pymc_splitmerge.kernels.sams import build_sams_move
    from pymc_splitmerge.kernels.splitmerge_common import build_moves_then_gibbs
    from pymc_splitmerge.kernels.state import PriorTables
    from pymc_splitmerge.priors.dirichlet_process import (
        DirichletProcessPrior,
        GammaMixedDirichletProcessPrior,
    )

    dim = y.shape[1]
    family = NormalInverseWishart(mu0=np.zeros(dim), kappa0=0.05, nu0=dim + 2.0,
                                  psi0=0.3 * np.eye(dim))
    x = family.prepare_data(y)
    n = x.shape[0]
    fixed = PriorTables(*DirichletProcessPrior(alpha=alpha).tables(n))
    collapsed = PriorTables(*GammaMixedDirichletProcessPrior(shape=1.0, rate=1.0).tables(n))
    transition = build_moves_then_gibbs(build_sams_move(cluster_anchors=True, n_updates=50),
                                        n_moves=1, n_gibbs_sweeps=1)
    return family, x, transition, fixed, collapsed


def _kernel_chains(setup, mode, draws, rng):
    """Four chains of the default transition from one cluster; ``n_clusters`` (4, draws)."""
    from pymc_splitmerge.kernels.concentration import escobar_west_update
    from pymc_splitmerge.kernels.state import PartitionState, PriorTables
    from pymc_splitmerge.priors.dirichlet_process import DirichletProcessPrior

    family, x, transition, fixed, collapsed = setup
    n = x.shape[0]
    n_clusters = np.empty((4, draws))
    for chain in range(4):
        state = PartitionState(family, x, np.zeros(n, dtype=np.int64))
        concentration = 1.0
        tables = collapsed if mode == "collapsed" else fixed
        for draw in range(draws):
            if mode == "gibbs":
                concentration = escobar_west_update(concentration, state.n_clusters, n,
                                                    1.0, 1.0, rng).alpha
                tables = PriorTables(*DirichletProcessPrior(alpha=concentration).tables(n))
            transition(state.model, state.partition, tables, rng)
            n_clusters[chain, draw] = state.n_clusters
    return n_clusters


def kernel_only(y, draws, seeds, alpha, modes=("fixed",)):
    """The default step's transition alone, 4 chains per seed, side by side per mode.

    Modes: ``fixed`` (alpha = ``alpha``), ``gibbs`` (one Escobar–West update of alpha ~
    Gamma(1, 1) before each draw, the tables rebuilt: what ``pm.sample`` does) and
    ``collapsed`` (alpha integrated out: the tables of ``GammaMixedDirichletProcessPrior``).
    Returns ``{mode: (ms / draw, IAT, ESS / CPU s, mean K)}``, medians over seeds.
    """
    setup = _kernel_setup(y, alpha)
    rows = {mode: [] for mode in modes}
    for seed in range(-1, seeds):  # seed -1: warm-up
        for mode in modes:
            start = time.process_time()
            n_clusters = _kernel_chains(setup, mode, draws, np.random.default_rng(seed + 1))
            cpu = time.process_time() - start
            half = n_clusters[:, draws // 2:]
            if seed >= 0:
                rows[mode].append((1e3 * cpu / n_clusters.size, half.size / ess(half),
                                   ess(half) / (cpu / 2), half.mean()))
    return {mode: np.median(np.array(rows[mode]), axis=0) for mode in modes}


def draws_needed(y, seeds, lengths, mode="gibbs"):
    """R-hat of the number of clusters over draws t/2..t of the kernel's 4 chains, per t.

    Draws, not CPU seconds: what the transition needs whatever the machine's load (the
    CPU seconds are then t times the cost of a draw).  Returns ``{t: (median R-hat, runs
    with R-hat <= GOAL_RHAT)}`` over ``seeds`` runs of ``max(lengths)`` draws per chain.
    """
    setup = _kernel_setup(y, 0.7)
    lengths = sorted(lengths)
    values = np.array([[rhat(n_clusters[:, t // 2:t]) for t in lengths]
                       for n_clusters in (_kernel_chains(setup, mode, lengths[-1],
                                                         np.random.default_rng(100 + seed))
                                          for seed in range(seeds))])
    return {t: (float(np.median(values[:, i])), int((values[:, i] <= GOAL_RHAT).sum()))
            for i, t in enumerate(lengths)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", type=float, default=8.0,
                        help="CPU seconds per run (4 chains), which sets each step's draws")
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--budgets", type=float, nargs="+", default=[1.0, 2.0, 4.0],
                        help="CPU seconds, summed over the 4 chains")
    parser.add_argument("--candidates", nargs="+", default=list(CANDIDATES),
                        choices=list(CANDIDATES))
    parser.add_argument("--profile", action="store_true",
                        help="profile the default step instead of comparing candidates")
    parser.add_argument("--profile-draws", type=int, default=500)
    parser.add_argument("--kernel-only", action="store_true",
                        help="the default step's transition alone (no PyMC), alpha fixed")
    parser.add_argument("--alpha", type=float, default=0.7)
    parser.add_argument("--concentration", nargs="+", default=["fixed"],
                        choices=CONCENTRATION_MODES,
                        help="--kernel-only: alpha fixed at --alpha, updated by Escobar-West "
                             "before each draw, or integrated out (alpha ~ Gamma(1, 1))")
    parser.add_argument("--kernel-draws", type=int, default=1000)
    parser.add_argument("--user-tune", type=int, default=50,
                        help="tuning draws T of the user's run pm.sample(tune=T, draws=D), "
                             "T + D draws per chain costing --user-cpu CPU s in all")
    parser.add_argument("--user-cpu", type=float, default=GOAL_CPU)
    parser.add_argument("--draws-needed", type=int, nargs="+", metavar="T",
                        help="--kernel-only: R-hat over draws T/2..T per chain for each T "
                             "(alpha by --concentration's first mode), over --seeds runs")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    import logging

    logging.getLogger("pymc").setLevel(logging.ERROR)
    model = build_model(iris())
    if args.profile:
        run(model, None, 5, 0)  # warm-up
        profile(model, args.profile_draws)
        return
    if args.kernel_only and args.draws_needed:
        mode = args.concentration[0]
        print(f"# the default transition alone (alpha: {mode}), R-hat of the number of "
              f"clusters over draws t/2..t of 4 chains, {args.seeds} runs\n")
        print(f"| draws per chain t | median R-hat | runs with R-hat <= {GOAL_RHAT} |")
        print("|---|---|---|")
        for t, (median, met) in draws_needed(iris(), args.seeds, args.draws_needed,
                                            mode).items():
            print(f"| {t} | {median:.4f} | {met}/{args.seeds} |")
        return
    if args.kernel_only:
        results = kernel_only(iris(), args.kernel_draws, args.seeds, args.alpha,
                              args.concentration)
        print(f"# the default transition alone, 4 chains x {args.kernel_draws} draws, medians "
              f"over {args.seeds} seeds (modes side by side within a seed)\n")
        print("| alpha | ms / draw | IAT (draws) | ESS / CPU s | mean K |")
        print("|---|---|---|---|---|")
        for mode, (ms, iat, per_cpu, mean_k) in results.items():
            label = f"fixed at {args.alpha:g}" if mode == "fixed" else mode
            print(f"| {label} | {ms:.2f} | {iat:.2f} | {per_cpu:.0f} | {mean_k:.2f} |")
        return
    draws = {}
    for name in args.candidates:  # warm-up (numba caches, PyTensor), then the cost of a draw
        run(model, CANDIDATES[name], 5, 0)
        cpu = run(model, CANDIDATES[name], 100, 0)[1]
        draws[name] = int(np.ceil(args.cpu / cpu[:, -1].sum() * 100))
    results = {name: [] for name in args.candidates}
    users = {name: [] for name in args.candidates}
    for seed in range(args.seeds):
        shift = seed % len(args.candidates)
        for name in args.candidates[shift:] + args.candidates[:shift]:
            results[name].append(summarise(*run(model, CANDIDATES[name], draws[name], seed),
                                           args.budgets))
            # the user's run: T + D draws per chain costing --user-cpu CPU s over the 4
            # chains at the cost of a draw just measured
            total = int(args.user_cpu / (4e-3 * results[name][-1]["ms_per_draw"]))
            user_draws = max(total - args.user_tune, 20)
            users[name].append((*user_run(model, CANDIDATES[name], args.user_tune, user_draws,
                                          1000 + seed), user_draws))
    print(f"# standardised Iris, DP(alpha ~ Gamma(1, 1)) + NIW(kappa0=0.05, nu0=6, psi0=0.3 I); "
          f"4 chains from one cluster, about {args.cpu:g} CPU s a run, seeds 0..{args.seeds - 1}\n")
    header = " | ".join(f"R-hat at {b:g} CPU s" for b in args.budgets)
    print(f"| step | ms / draw | {header} | runs with R-hat <= {GOAL_RHAT} at "
          f"{GOAL_CPU:g} s | ESS / CPU s | IAT (draws) | leaves 1 (draw) | reaches median K "
          f"(draw) | mean K |")
    print("|---|---|" + "---|" * len(args.budgets) + "---|---|---|---|---|---|")
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
              f"| {np.median([r['iat'] for r in rows]):.1f} "
              f"| {max(r['leaves_one'] for r in rows)} "
              f"| {max(r['burn_in'] for r in rows)} "
              f"| {np.mean([r['mean_k'] for r in rows]):.2f} |")
    print(f"\n# what a user gets: pm.sample(tune={args.user_tune}, draws=D, chains=4, cores=1), "
          f"T + D draws per chain costing about {args.user_cpu:g} CPU s in all; az.rhat of "
          f"n_clusters over the D kept draws, seeds 1000..{999 + args.seeds}\n")
    print(f"| step | tune T | draws D (median) | CPU s (median, max) | R-hat median (max) "
          f"| runs with R-hat <= {GOAL_RHAT} |")
    print("|---|---|---|---|---|---|")
    for name, rows in users.items():
        values = np.array([value for value, _, _ in rows])
        cpus = [cpu for _, cpu, _ in rows]
        print(f"| {name} | {args.user_tune} | {np.median([d for _, _, d in rows]):.0f} "
              f"| {np.median(cpus):.2f}, {np.max(cpus):.2f} "
              f"| {np.median(values):.3f} (max {values.max():.3f}) "
              f"| {int((values <= GOAL_RHAT).sum())}/{len(rows)} |")


if __name__ == "__main__":
    main()
