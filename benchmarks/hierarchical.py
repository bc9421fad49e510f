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

Sampling parts (``pm.sample``, the partition step assigned by PyMC):

* ``steps``: hierarchical Iris with ``psm.HyperparameterSlice`` (what ``pm.sample()``
  assigns), NUTS, ``pm.Slice`` or ``pm.Metropolis`` on the hyperparameters: ESS per CPU second
  of the number of clusters and of each hyperparameter, R-hat;
* ``iris``: hierarchical Iris (``mu0``, ``kappa0``, ``s`` random) against its twin with fixed
  hyperparameters, default ``pm.sample()``, the two runs of each seed one after the other
  (goals: time at most 3x, R-hat of the number of clusters at most 1.01);
* ``large``: n = ``--large-n`` (2-D, 8 clusters) random against fixed hyperparameters, draws
  per second (goal: at least 0.5x);
* ``evaluation`` (not in the default parts): the cost of one evaluation of
  ``HyperparameterSlice``'s log density on hierarchical Iris and of one draw of the step,
  with the labels held at the three species;
* ``breakdown`` (not in the default parts): where a draw of the default step on hierarchical
  Iris goes (CPU time of each part of the slice step and of the partition step, one chain);
* ``coupling`` (not in the default parts): what limits the number of clusters' ESS on
  hierarchical Iris.  First the slice step alone with the labels held at the three species
  (``--chains`` chains, ``--tune`` + ``--draws`` draws): the ESS of each hyperparameter when
  only the hyperparameters move.  Then, for each ``--rounds R`` and each of ``--seeds``, a
  ``pm.sample`` whose step alternates ``R`` times per draw between the slice step
  (``--hyperslice-updates`` moves, default the block's dimension divided by ``R``) and the
  default partition step (``--sams-updates`` split-merge updates, default ``100 / R``):
  CPU s, ESS and R-hat of the number of clusters, ESS of each hyperparameter.

Times are the best of ``--repeats`` blocks of CPU time of the thread (``time.thread_time``):
on a shared machine wall time includes waiting for a core.

Set ``OPENBLAS_NUM_THREADS=1`` on a small or busy machine (NUTS's gradient of the fixed
twin's competitors calls BLAS on tiny matrices); the package's own per-draw work for random
hyperparameters (the numeric family's inverse factor, the batched log-determinants) runs in
numba, without BLAS threads.

Run (full sizes are the defaults): ``OPENBLAS_NUM_THREADS=1 python benchmarks/hierarchical.py
[--parts gradient steps iris large] [--sizes 1000 100000] [--gibbs-n 10000] [--repeats 5]
[--calls 50] [--chains 4 --draws 1000 --tune 1000] [--seeds 24 25 26] [--sams-updates N]
[--gibbs-sweeps G] [--sams-rounds R] [--hyperslice-updates M]
[--large-n 20000 --large-draws 200] [--parts coupling --rounds 1 2] [--parts evaluation]
[--parts breakdown]``;
quick check: ``--chains 2 --draws 150 --tune 150 --large-draws 30``.
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


# ------------------------------------------------------------------ sampling
def iris_data():
    """Standardised Iris (150 x 4), bundled with scikit-learn."""
    from sklearn.datasets import load_iris

    x = load_iris().data
    return (x - x.mean(axis=0)) / x.std(axis=0)


def blob_data(n, dim=2, clusters=8, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=6.0, size=(clusters, dim))
    return centres[rng.integers(clusters, size=n)] + rng.normal(size=(n, dim))


def niw_model(x, random):
    """DP(alpha = 1) mixture of NIW components, nu0 = D + 2; ``random``: mu0 ~ Normal(0, 1),
    kappa0 ~ Gamma(2, 2), psi0 = s I with s ~ HalfNormal(2); else mu0 = 0, kappa0 = 1, s = 1."""
    dim = x.shape[1]
    with pm.Model() as model:
        if random:
            mu0 = pm.Normal("mu0", 0.0, 1.0, shape=dim)
            kappa0 = pm.Gamma("kappa0", 2.0, 2.0)
            scale = pm.HalfNormal("scale", 2.0)
        else:
            mu0, kappa0, scale = np.zeros(dim), 1.0, 1.0
        z = psm.DirichletProcess("z", alpha=1.0, n=x.shape[0])
        psm.ConjugateMixture("y", partition=z, component=NormalInverseWishart(
            mu0=mu0, kappa0=kappa0, nu0=dim + 2.0, psi0=scale * np.eye(dim)), observed=x)
    return model


HYPERPARAMETER_STEPS = {
    "default": None,  # what pm.sample() assigns by itself (psm.HyperparameterSlice)
    "hyperslice": psm.HyperparameterSlice,
    "nuts": pm.NUTS,
    "slice": pm.Slice,
    "metropolis": pm.Metropolis,
}


def run(model, hyper_step, draws, tune, chains, cores, seed, sams=None, hyperslice=None):
    """(seconds of pm.sample, trace) with the hyperparameters given ``hyper_step`` (a key of
    HYPERPARAMETER_STEPS) and the partition left to PyMC's assignment.  With ``cores=1`` the
    seconds are this process's CPU time (``time.process_time``: on a shared machine wall time
    includes waiting for a core), else wall time."""
    with model:
        step = None
        if HYPERPARAMETER_STEPS.get(hyper_step) is not None:
            hyper = [v for v in model.free_RVs if v.name != "z"]
            step = [HYPERPARAMETER_STEPS[hyper_step](hyper)]
        clock = time.process_time if cores == 1 else time.perf_counter
        start = clock()
        options = {key: value for key, value in (("sams", sams), ("hyperslice", hyperslice))
                   if value is not None}  # options of the assigned steps
        idata = pm.sample(draws=draws, tune=tune, chains=chains, cores=cores, step=step,
                          random_seed=seed, progressbar=False,
                          compute_convergence_checks=False, **options)
        return clock() - start, idata


def mixing(idata, names):
    """{quantity: (min bulk ESS, max R-hat)} for n_clusters and each named variable (over its
    components)."""
    from pymc_splitmerge.analysis._arviz_compat import ess, posterior_with_labels, rhat

    labels = np.asarray(posterior_with_labels(idata)["z"].values)
    n_clusters = np.apply_along_axis(lambda row: np.unique(row).size, -1, labels)
    out = {"n_clusters": (ess(n_clusters), rhat(n_clusters))}
    for name in names:
        values = np.asarray(idata["posterior"][name].values)
        values = values.reshape(values.shape[0], values.shape[1], -1)
        out[name] = (min(ess(values[..., j]) for j in range(values.shape[2])),
                     max(rhat(values[..., j]) for j in range(values.shape[2])))
    return out


def step_comparison(args):
    x = iris_data()
    names = ["mu0", "kappa0", "scale"]
    print(f"hyperparameter step on hierarchical Iris (n=150, D=4): {args.chains} chains x "
          f"{args.draws} draws (tune {args.tune}), cores={args.cores}")
    print(f"{'step':>11} {'CPU s':>7} {'ESS/s n_clusters':>17} "
          + " ".join(f"{'ESS/s ' + n:>13}" for n in names) + f" {'max R-hat':>9}")
    for key in args.steps:
        wall, idata = run(niw_model(x, True), key, args.draws, args.tune, args.chains,
                          args.cores, seed=24)
        quality = mixing(idata, names)
        worst = max(r for _, r in quality.values())
        print(f"{key:>11} {wall:7.1f} {quality['n_clusters'][0] / wall:17.1f} "
              + " ".join(f"{quality[n][0] / wall:13.1f}" for n in names) + f" {worst:9.3f}")


def sampled(model, draws, tune, chains, cores, seed=24, sams=None, hyperslice=None):
    """(seconds of the run, seconds of a set-up run, trace, (what, mean per draw) of the
    hyperparameter step's NUTS leapfrog steps or slice evaluations, or None).  The set-up run (1 chain, 1 draw, on the same model, first) pays the
    compilation of the model's functions and numba's first calls; the timed run after it
    reuses most of them, so it measures sampling.  A user's single cold ``pm.sample`` costs
    about the sum of the two."""
    setup, _ = run(model, "default", 1, 1, 1, 1, seed=23, sams=sams, hyperslice=hyperslice)
    total, idata = run(model, "default", draws, tune, chains, cores, seed=seed, sams=sams,
                       hyperslice=hyperslice)
    stats = idata["sample_stats"]
    steps = None
    if "n_steps" in stats:
        steps = ("NUTS leapfrog steps", float(np.mean(stats["n_steps"].values)))
    elif "hyperslice_evaluations" in stats:
        steps = ("HyperparameterSlice evaluations",
                 float(np.mean(stats["hyperslice_evaluations"].values)))
    return total, setup, idata, steps


def _describe(label, total, setup, steps):
    leapfrog = f", {steps[1]:.1f} {steps[0]} per draw" if steps is not None else ""
    return f"{label}: {total:.1f} s (set-up run before it {setup:.1f} s){leapfrog}"


def iris_goal(args):
    """For each of ``--seeds``: the fixed twin, then the random model, both with that seed
    (interleaved: a shared machine's load falls on both alike); the time ratio of each pair
    and their mean.  ``--sams-updates N`` gives the random model's partition step
    ``pm.sample(sams={"n_split_merge_updates": N})`` (``--gibbs-sweeps G``: and
    ``"n_gibbs_sweeps": G``; ``--sams-rounds R``: and ``"n_rounds": R``, the rounds of
    slice step and partition step per draw, 1 when N is given without R),
    ``--hyperslice-updates M`` its
    hyperparameter step ``pm.sample(hyperslice={"n_updates": M})``."""
    import os

    x = iris_data()
    sams = {key: value for key, value in (("n_split_merge_updates", args.sams_updates),
                                          ("n_gibbs_sweeps", args.gibbs_sweeps),
                                          ("n_rounds", args.sams_rounds))
            if value is not None} or None
    hyperslice = (None if args.hyperslice_updates is None
                  else {"n_updates": args.hyperslice_updates})
    ratios, cold_ratios = [], []
    for seed in args.seeds:
        times = {}
        for random in (False, True):
            total, setup, idata, steps = sampled(niw_model(x, random), args.draws, args.tune,
                                                 args.chains, args.cores, seed,
                                                 sams if random else None,
                                                 hyperslice if random else None)
            times[random] = (total, setup)
            quality = mixing(idata, ["mu0", "kappa0", "scale"] if random else [])
            others = [q for k, q in quality.items() if k != "n_clusters"]
            print(_describe(f"Iris, {'random' if random else 'fixed'} hyperparameters"
                            f"{'' if not random or sams is None else f', sams={sams}'}"
                            f"{'' if not random or hyperslice is None else f', {hyperslice}'}"
                            ", seed "
                            f"{seed} ({args.chains} chains x {args.draws} draws, tune "
                            f"{args.tune})", total, setup, steps)
                  + f"; n_clusters ESS {quality['n_clusters'][0]:.0f}, R-hat "
                  f"{quality['n_clusters'][1]:.3f}"
                  + (f"; hyperparameters min ESS {min(q[0] for q in others):.0f}, max R-hat "
                     f"{max(q[1] for q in others):.3f}" if others else "")
                  + f" (load average {os.getloadavg()[0]:.1f})")
        ratios.append(times[True][0] / times[False][0])
        cold_ratios.append(sum(times[True]) / sum(times[False]))
        print(f"  seed {seed}: time ratio random / fixed {ratios[-1]:.2f}")
    print(f"ratio time random / fixed: {np.mean(ratios):.2f} (per seed "
          + " ".join(f"{r:.2f}" for r in ratios) + f"; goal <= 3); with the set-up runs "
          f"{np.mean(cold_ratios):.2f}; goal R-hat of n_clusters <= 1.01 at every seed")


def large_goal(args):
    x = blob_data(args.large_n)
    rates = {}
    for random in (False, True):
        total, setup, _, steps = sampled(niw_model(x, random), args.large_draws,
                                         args.large_draws, 1, 1)
        rates[random] = (2 * args.large_draws / total,  # tune + draws
                         2 * args.large_draws / (total + setup))
        print(_describe(f"n = {args.large_n:,}, 2-D, 8 clusters, "
                        f"{'random' if random else 'fixed'} hyperparameters, 1 chain x "
                        f"{args.large_draws} draws (tune {args.large_draws})", total, setup,
                        steps) + f": {rates[random][0]:.1f} draws/s")
    print(f"ratio draws/s random / fixed: {rates[True][0] / rates[False][0]:.2f} (goal >= 0.5); "
          f"with the set-up runs {rates[True][1] / rates[False][1]:.2f}")


def gradient_part(args):
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


def coupling(args):
    """The slice step with the labels fixed, then ``--rounds`` alternations per draw."""
    from sklearn.datasets import load_iris

    from pymc_splitmerge.analysis._arviz_compat import ess
    from pymc_splitmerge.steps.sams import DefaultPartitionStep

    x = iris_data()
    names = ["mu0", "kappa0", "scale"]
    model = niw_model(x, True)
    with model:
        hyper = [v for v in model.free_RVs if v.name != "z"]
        chains = []
        for chain in range(args.chains):
            step = psm.HyperparameterSlice(hyper, rng=chain)
            point = model.initial_point()
            point["z"] = load_iris().target
            kept = []
            for draw in range(args.tune + args.draws):
                if draw == args.tune:
                    step.stop_tuning()
                point, _ = step.step(point)
                if draw >= args.tune:
                    kept.append(np.concatenate([np.ravel(point[v.name]) for v in step.vars]))
            chains.append(kept)
    values = np.asarray(chains)
    print(f"labels fixed at the species, HyperparameterSlice alone ({args.chains} chains x "
          f"{args.draws} draws, tune {args.tune}): ESS "
          + ", ".join(f"{v.name} {ess(values[..., j]):.0f}"
                      for j, v in enumerate(_flat_names(step.vars, model))))
    for rounds in args.rounds:
        sams = args.sams_updates or 100 // rounds
        for seed in args.seeds:
            model = niw_model(x, True)
            with model:
                hyper = [v for v in model.free_RVs if v.name != "z"]
                steps = []
                for _ in range(rounds):
                    slice_step = psm.HyperparameterSlice(hyper, n_updates=args.hyperslice_updates)
                    if args.hyperslice_updates is None:
                        slice_step.n_updates = max(slice_step.dimension // rounds, 3)
                    steps += [slice_step,
                              DefaultPartitionStep([model["z"]], n_split_merge_updates=sams)]
                start = time.process_time()
                idata = pm.sample(args.draws, tune=args.tune, chains=args.chains, cores=1,
                                  step=steps, random_seed=seed, progressbar=False,
                                  compute_convergence_checks=False)
                seconds = time.process_time() - start
            quality = mixing(idata, names)
            print(f"{rounds} round(s) per draw of {steps[0].n_updates} slice moves + {sams} "
                  f"split-merge updates, seed {seed}: {seconds:.1f} CPU s; n_clusters ESS "
                  f"{quality['n_clusters'][0]:.0f}, R-hat {quality['n_clusters'][1]:.3f}; "
                  + ", ".join(f"{name} ESS {quality[name][0]:.0f}" for name in names))


def evaluation(args):
    """One evaluation of ``HyperparameterSlice``'s log density on hierarchical Iris (labels
    at the three species, statistics computed once) and one draw of the step, best of
    ``--repeats`` blocks of CPU time."""
    import os

    import pytensor
    from sklearn.datasets import load_iris

    model = niw_model(iris_data(), True)
    with model:
        step = psm.HyperparameterSlice([v for v in model.free_RVs if v.name != "z"], rng=0)
    point = model.initial_point()
    point["z"] = load_iris().target.astype(model["z"].dtype)
    for _ in range(200):  # tuning: the metric
        point, _ = step.step(point)
    step.stop_tuning()
    fixed, flat = step._fixed_inputs(point), step._flatten(point)
    per_call = best_time(lambda: step._density(flat, *fixed), 20 * args.calls, args.repeats)
    evaluations = []

    def draw():
        nonlocal point
        point, stats = step.step(point)
        evaluations.append(stats[0]["hyperslice_evaluations"])

    per_draw = best_time(draw, args.calls, args.repeats)
    print(f"HyperparameterSlice on hierarchical Iris (block of 6, labels fixed; PyTensor "
          f"{pytensor.__version__}, linker {type(step._density.maker.linker).__name__}): one "
          f"evaluation {per_call * 1e6:.1f} us, one draw {per_draw * 1e6:.0f} us with "
          f"{np.mean(evaluations):.1f} evaluations (load average {os.getloadavg()[0]:.1f})")


def breakdown(args):
    """Where a draw of the default step goes on hierarchical Iris: one chain of the step
    ``pm.sample()`` builds (the :class:`HyperparameterSlice` and the partition step alternated
    by :func:`~pymc_splitmerge.steps.alternation.alternate_family_hyperparameters`), ``--tune``
    draws of tuning, then ``--draws`` timed draws; CPU time of the thread (``time.thread_time``)
    around each part, per draw (the timers add about a microsecond per call)."""
    import collections
    import os

    from pymc_splitmerge.distributions import discovery
    from pymc_splitmerge.steps import base
    from pymc_splitmerge.steps.alternation import alternate_family_hyperparameters
    from pymc_splitmerge.steps.sams import DefaultPartitionStep

    model = niw_model(iris_data(), True)
    with model:
        hyper = psm.HyperparameterSlice([v for v in model.free_RVs if v.name != "z"])
        partition = DefaultPartitionStep([model["z"]])
        (step,) = alternate_family_hyperparameters([hyper, partition])
    for method in step.methods:
        method.set_rng(np.random.default_rng(1))
    seconds, calls = collections.defaultdict(float), collections.defaultdict(int)

    def timed(owner, name, key):
        function = getattr(owner, name)

        def wrapper(*arguments, **keywords):
            start = time.thread_time()
            try:
                return function(*arguments, **keywords)
            finally:
                seconds[key] += time.thread_time() - start
                calls[key] += 1

        setattr(owner, name, wrapper)

    parts = [  # (owner, attribute, label); the patches of classes are undone below
        (hyper, "step", "slice step"),
        (hyper, "_density", "  its density evaluations"),
        (hyper, "_fixed_inputs", "  the cluster statistics of the labels"),
        (hyper, "_next_directions", "  the directions"),
        (partition, "step", "partition step"),
        (partition, "kernel_step", "  split-merge updates and Gibbs sweep"),
        (discovery.PartitionModel, "_evaluate", "  hyperparameter values of the point"),
        (discovery.PartitionModel, "numeric_family", "  family rebuilt"),
        (base, "PartitionState", "  partition state rebuilt"),
    ]
    saved = [(owner, name, owner.__dict__[name]) for owner, name, _ in parts
             if isinstance(owner, type) or owner is base]
    for owner, name, label in parts:
        timed(owner, name, label)
    try:
        point = model.initial_point()
        for _ in range(args.tune):
            point, _ = step.step(point)
        step.stop_tuning()
        seconds.clear()
        calls.clear()
        start = time.thread_time()
        for _ in range(args.draws):
            point, _ = step.step(point)
        total = time.thread_time() - start
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)
    print(f"a draw of the default step on hierarchical Iris ({step.n_rounds} rounds; 1 chain, "
          f"{args.draws} draws after {args.tune} of tuning; load average "
          f"{os.getloadavg()[0]:.1f}): {total / args.draws * 1e6:.0f} us of CPU time")
    for _, _, label in parts:
        print(f"{label:<42} {seconds[label] / args.draws * 1e6:7.0f} us per draw "
              f"({calls[label] / args.draws:.1f} calls)")


class _Named:
    def __init__(self, name):
        self.name = name


def _flat_names(value_vars, model):
    """One name per component of the slice step's block (``mu0[0]`` ..., ``kappa0_log__``)."""
    out = []
    for var in value_vars:
        size = int(np.size(model.initial_point()[var.name]))
        out += ([_Named(var.name)] if size == 1
                else [_Named(f"{var.name}[{j}]") for j in range(size)])
    return out


PARTS = {"gradient": gradient_part, "steps": step_comparison, "iris": iris_goal,
         "large": large_goal, "coupling": coupling, "evaluation": evaluation,
         "breakdown": breakdown}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="+", choices=sorted(PARTS),
                        default=["gradient", "steps", "iris", "large"])
    parser.add_argument("--sizes", type=int, nargs=2, default=[1_000, 100_000])
    parser.add_argument("--gibbs-n", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--steps", nargs="+", choices=sorted(HYPERPARAMETER_STEPS),
                        default=["hyperslice", "nuts", "slice", "metropolis"])
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--draws", type=int, default=1_000)
    parser.add_argument("--tune", type=int, default=1_000)
    parser.add_argument("--cores", type=int, default=1)
    parser.add_argument("--seeds", type=int, nargs="+", default=[24])
    parser.add_argument("--sams-updates", type=int, default=None)
    parser.add_argument("--hyperslice-updates", type=int, default=None)
    parser.add_argument("--gibbs-sweeps", type=int, default=None)
    parser.add_argument("--sams-rounds", type=int, default=None)
    parser.add_argument("--large-n", type=int, default=20_000)
    parser.add_argument("--large-draws", type=int, default=200)
    parser.add_argument("--rounds", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    for part in args.parts:
        PARTS[part](args)


if __name__ == "__main__":
    main()
