r"""Mixing of every partition sampler on overlapping data, per CPU second.

Data sets (``--datasets``; Dirichlet process, alpha = 1, in every model):

* ``iris``: scikit-learn's Iris, each column standardised (n = 150, 4-D),
  ``NormalInverseWishart(mu0=0, kappa0=0.05, nu0=6, psi0=0.3 I)`` (optional dependency:
  ``pip install pymc-splitmerge[test]``);
* ``blobs``: ``datasets.gaussian_blobs(n=300, n_components=4, dim=2, separation=2)``, four
  unit Gaussians on a 2 x 2 grid with neighbours 2 sd apart, centred,
  ``NormalInverseWishart(mu0=0, kappa0=0.05, nu0=4, psi0=I)``;
* ``jn15``, ``jn18``: the Jain & Neal (2000) Bernoulli data with d = 15 and 18 attributes
  (``datasets.jain_neal_bernoulli(d, seed=0)``, n = 100), ``BetaBernoulli(1, 1)``.

Samplers (one *draw* = one iteration; ``--samplers`` picks a subset by name):

* ``Gibbs``: one random-scan collapsed Gibbs sweep (Neal 2000, Algorithm 3);
* ``SAMS+Gibbs``: one SAMS update (Dahl 2003), uniform anchors, + one Gibbs sweep;
* ``SAMS(cluster)+Gibbs``: SAMS with cluster anchors (``SAMSStep(anchor_proposal="cluster")``);
* ``RGSM(5,1,1)``: Jain & Neal's restricted-Gibbs split-merge, 5 intermediate scans, + one
  Gibbs sweep;
* ``PGSM(20)+Gibbs``: one particle-Gibbs split-merge move (20 particles) + one Gibbs sweep;
* ``ARM ens+Gibbs``: ``ARMStep(library="ensemble")``, the exact red/black ensemble of the
  four chains (at draw t chain c makes an ARM move when c + t is even, its library the other
  half's current states), + one Gibbs sweep;
* ``ARM frozen+Gibbs``: ``ARMStep(library="frozen")``: each chain's own states of the first
  quarter of the draws (tuning) form its library, frozen afterwards;
* ``ARM ens+SAMS+Gibbs``, ``ARM frozen+SAMS+Gibbs``: the same with one SAMS update in every
  draw before the ARM move (``ARMStep(..., n_sams_updates=1)``): SAMS moves the chains away
  from the start and seeds the libraries with split-merge states;
* ``default pm.sample``: whatever step plain ``pm.sample()`` assigns to the partition,
  through ``pm.sample(tune=0, chains=4, cores=1)`` (PyMC's per-draw overhead included).

Every sampler runs 4 chains from the one-cluster start (``pm.sample``'s initial point), the
kernels driven directly in lockstep (CPU: ``time.process_time`` around the kernel calls).
Recorded per draw: the number of clusters K and the largest cluster's fraction.  Reported:

* ``us/draw``: CPU microseconds per draw and chain;
* ``ESS/s K``, ``ESS/s frac``: ArviZ's bulk ESS over the second half of the draws of the 4
  chains, divided by the CPU seconds spent on that half (all chains);
* ``R-hat``: rank-normalised split R-hat of K and of the fraction over the second half (the
  larger of the two);
* ``CPU s to 1.01``: CPU seconds (all 4 chains, from the start) until the R-hat of both, over
  draws t/2..t, is first <= 1.01 (checked at 20 evenly spaced t; ``>`` the run's CPU when never);
* ``E[K]``, ``TV(K)``: posterior mean of K over the second halves and the total-variation
  distance of the distribution of K from that of a long reference run (4 chains, each
  iteration one SAMS, one RGSM(5,1,1), one PGSM(20) move and one Gibbs sweep, so that no single
  benchmarked sampler defines the reference; first 20 % dropped).  Rows whose TV(K) exceeds
  0.1 or whose R-hat exceeds 1.1 are not ranked (their ESS is shown in brackets): chains stuck
  in one mode can have a large ESS and, all stuck alike, a small R-hat.

Run::

    python benchmarks/mixing.py                      # full: 20,000 draws, reference 20,000
    python benchmarks/mixing.py --draws 2000 --reference-draws 2000      # ~3 min
    python benchmarks/mixing.py --datasets jn18 --samplers "SAMS+Gibbs,ARM ens+SAMS+Gibbs"
    python benchmarks/mixing.py --switch-cost 300 --datasets blobs,jn15      # ~2 min

``--switch-cost REPEATS`` only times ARM's proposal (``kernels.arm._arm_proposal``: a sampled
forward run and the forced reverse run) in two temporary copies of ``kernels/arm.py``, as it
is and with the tests' negative-control switch (``enforce_eq17``) folded to ``True``,
alternately from the same seeds on random 4-block states and libraries; a ratio of 1 within
the noise shows that the switch costs nothing in the production kernel.

References
----------
Jain, S. and Neal, R. M. (2000).  A split-merge Markov chain Monte Carlo procedure for the
Dirichlet process mixture model.  Dahl, D. B. (2003).  An improved merge-split sampler for
conjugate Dirichlet process mixture models.  Bouchard-Côté, A., Doucet, A. and Roth, A.
(2017).  Particle Gibbs split-merge sampling.  JMLR 18(28).  Herlau, T., Mørup, M.,
Schmidt, M. N. and Teh, Y. W.  Adaptive reconfiguration moves for Dirichlet mixtures.
Vehtari, A. et al. (2021).  Rank-normalization, folding, and localization: an improved R-hat.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import limit_blas_threads, load_temporary_module

limit_blas_threads()  # before numpy loads: idle BLAS threads spin into process_time

import argparse
import logging
import time
import warnings
from dataclasses import dataclass

import numpy as np

from pymc_splitmerge.analysis import _arviz_compat as arviz_compat
from pymc_splitmerge.components import BetaBernoulli, NormalInverseWishart
from pymc_splitmerge.datasets import gaussian_blobs, jain_neal_bernoulli
from pymc_splitmerge.kernels.arm import build_arm_move, distinct_rows
from pymc_splitmerge.kernels.gibbs import build_gibbs_sweep
from pymc_splitmerge.kernels.pgsm import build_pgsm_move
from pymc_splitmerge.kernels.rgsm import build_rgsm_move
from pymc_splitmerge.kernels.sams import build_sams_move
from pymc_splitmerge.kernels.splitmerge_common import build_moves_then_gibbs
from pymc_splitmerge.kernels.state import PartitionState, prior_tables
from pymc_splitmerge.priors import DirichletProcessPrior

CHAINS = 4
ALPHA = 1.0
RHAT_TARGET = 1.01
CHECKPOINTS = 20
AGREEMENT_TV = 0.1
AGREEMENT_RHAT = 1.1


# --------------------------------------------------------------------------- data sets
@dataclass
class Problem:
    name: str
    data: np.ndarray
    family: object
    x: np.ndarray

    @property
    def n(self) -> int:
        return self.x.shape[0]

    def tables(self):
        return prior_tables(self.n, *DirichletProcessPrior(alpha=ALPHA).tables(self.n))

    def start(self) -> PartitionState:
        return PartitionState(self.family, self.x, np.zeros(self.n, dtype=np.int64))


def _iris():
    try:
        from sklearn.datasets import load_iris
    except ImportError as error:  # pragma: no cover
        raise SystemExit("the iris data set needs scikit-learn (pip install "
                         "pymc-splitmerge[test]) or --datasets without iris") from error
    data = load_iris().data
    data = (data - data.mean(0)) / data.std(0)
    return data, NormalInverseWishart(mu0=np.zeros(4), kappa0=0.05, nu0=6.0,
                                      psi0=0.3 * np.eye(4))


def _blobs():
    data, _ = gaussian_blobs(n=300, n_components=4, dim=2, separation=2.0, seed=0)
    return data - data.mean(0), NormalInverseWishart(mu0=np.zeros(2), kappa0=0.05, nu0=4.0,
                                                     psi0=np.eye(2))


def _jain_neal(d):
    def build():
        data, _ = jain_neal_bernoulli(d, seed=0)
        return data, BetaBernoulli(a=1.0, b=1.0)
    return build


DATASETS = {"iris": _iris, "blobs": _blobs, "jn15": _jain_neal(15), "jn18": _jain_neal(18)}


def make_problem(name: str) -> Problem:
    data, family = DATASETS[name]()
    return Problem(name, data, family, family.prepare_data(data))


# --------------------------------------------------------------------------- samplers
class Independent:
    """The same transition applied to each chain independently."""

    def __init__(self, name, transition):
        self.name = name
        self.transition = transition

    def reset(self, draws):
        pass

    def draw(self, states, tables, rng, t):
        for state in states:
            self.transition(state.model, state.partition, tables, rng)


def _moves_then_gibbs(move, gibbs=1):
    return build_moves_then_gibbs(move, n_moves=1, n_gibbs_sweeps=gibbs)


class ARMPopulation:
    """ARM + Gibbs (optionally after one SAMS update) on the 4 chains in lockstep, with the
    libraries of ``ARMStep``: red/black halves of the population (``"ensemble"``), or each
    chain's own states of the window floor(t/2)..t-1 during the first quarter of the draws
    (tuning), frozen afterwards (``"frozen"``)."""

    def __init__(self, name, library, n_sams_updates):
        self.name = name
        self.library = library
        self.sams = build_sams_move() if n_sams_updates else None
        self.gibbs = build_gibbs_sweep("random", 1)
        self.arm = build_arm_move(lambda partition: self.pair)

    def reset(self, draws):
        self.tune = draws // 4 if self.library == "frozen" else 0
        self.history = [[] for _ in range(CHAINS)]
        self.frozen = [None] * CHAINS

    def _pair(self, candidates, rng):
        distinct = distinct_rows(candidates)
        if distinct.shape[0] < 2:
            return None
        first, second = rng.choice(distinct.shape[0], size=2, replace=False)
        return distinct[first], distinct[second]

    def draw(self, states, tables, rng, t):
        population = [state.labels() for state in states]  # PyMC: the previous draw's states
        for c, state in enumerate(states):
            if self.library == "ensemble":
                self.pair = (self._pair([population[s] for s in range(CHAINS)
                                         if (s + t) % 2 == 1], rng)
                             if (c + t) % 2 == 0 else None)
            elif t < self.tune:
                history = self.history[c]
                del history[:len(history) - (t - t // 2)]
                self.pair = self._pair(history, rng)
                history.append(population[c])
            else:
                if self.frozen[c] is None:
                    self.frozen[c] = distinct_rows(self.history[c])
                self.pair = self._pair(self.frozen[c], rng)
            if self.sams is not None:
                self.sams(state.model, state.partition, tables, rng)
            self.arm(state.model, state.partition, tables, rng)
            self.gibbs(state.model, state.partition, tables, rng)


def make_samplers():
    return [
        Independent("Gibbs", build_gibbs_sweep("random", 1)),
        Independent("SAMS+Gibbs", _moves_then_gibbs(build_sams_move())),
        Independent("SAMS(cluster)+Gibbs", _moves_then_gibbs(build_sams_move(cluster_anchors=True))),
        Independent("RGSM(5,1,1)", _moves_then_gibbs(build_rgsm_move(5))),
        Independent("PGSM(20)+Gibbs", _moves_then_gibbs(build_pgsm_move(num_particles=20))),
        ARMPopulation("ARM ens+Gibbs", "ensemble", 0),
        ARMPopulation("ARM frozen+Gibbs", "frozen", 0),
        ARMPopulation("ARM ens+SAMS+Gibbs", "ensemble", 1),
        ARMPopulation("ARM frozen+SAMS+Gibbs", "frozen", 1),
    ]


DEFAULT_SAMPLER = "default pm.sample"


def run_kernel_sampler(sampler, problem, draws, seed):
    """``(K, frac, cpu)``: arrays (chain, draw) and the cumulative CPU seconds per draw."""
    rng = np.random.default_rng([seed, sum(map(ord, problem.name + sampler.name))])
    tables = problem.tables()
    states = [problem.start() for _ in range(CHAINS)]
    sampler.reset(draws)
    clusters = np.empty((CHAINS, draws))
    largest = np.empty((CHAINS, draws))
    cpu = np.empty(draws)
    total = 0.0
    for t in range(draws):
        start = time.process_time()
        sampler.draw(states, tables, rng, t)
        total += time.process_time() - start
        cpu[t] = total
        for c, state in enumerate(states):
            clusters[c, t] = state.n_clusters
            largest[c, t] = state.sizes.max() / problem.n
    return clusters, largest, cpu


def run_default_step(problem, draws, seed):
    """The default ``pm.sample()`` step: 4 chains, ``cores=1``, no tuning."""
    import pymc as pm

    import pymc_splitmerge as psm

    logging.getLogger("pymc").setLevel(logging.ERROR)
    with pm.Model() as model:
        z = psm.DirichletProcess("z", alpha=ALPHA, n=problem.n)
        psm.ConjugateMixture("y", partition=z, component=problem.family, observed=problem.data)
    options = {"tune": 0, "chains": CHAINS, "cores": 1, "progressbar": False,
               "compute_convergence_checks": False, "return_inferencedata": False}
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pm.sample(draws=5, random_seed=seed, **options)  # compilation outside the timer
        start = time.process_time()
        trace = pm.sample(draws=draws, random_seed=seed, **options)
        elapsed = time.process_time() - start
    labels = np.stack(trace.get_values("z", combine=False))  # (chain, draw, n)
    clusters = np.array([[np.unique(row).size for row in chain] for chain in labels], float)
    largest = np.array([[np.bincount(row).max() / problem.n for row in chain]
                        for chain in labels])
    return clusters, largest, elapsed * np.arange(1, draws + 1) / draws


def reference_run(problem, draws, seed):
    """Distribution of K (dict K -> probability), E[K], E[frac] of the pooled reference."""
    sams = build_sams_move()
    rgsm = _moves_then_gibbs(build_rgsm_move(5), gibbs=0)
    pgsm = _moves_then_gibbs(build_pgsm_move(num_particles=20), gibbs=1)

    class Reference:
        name = "reference"

        def reset(self, draws):
            pass

        def draw(self, states, tables, rng, t):
            for state in states:
                for move in (sams, rgsm, pgsm):
                    move(state.model, state.partition, tables, rng)

    clusters, largest, _ = run_kernel_sampler(Reference(), problem, draws, seed)
    kept = clusters[:, draws // 5:].ravel()
    values, counts = np.unique(kept, return_counts=True)
    return {"pk": dict(zip(values.tolist(), (counts / kept.size).tolist(), strict=True)),
            "mean_k": float(kept.mean()),
            "mean_frac": float(largest[:, draws // 5:].mean())}


# --------------------------------------------------------------------------- metrics
def _rhat(values) -> float:
    if np.ptp(values) == 0:
        return float("nan")
    return arviz_compat.rhat(values)


def _ess(values) -> float:
    if np.ptp(values) == 0:
        return float("nan")
    return arviz_compat.ess(values, "bulk")


def summarise(clusters, largest, cpu, reference):
    draws = clusters.shape[1]
    half = draws // 2
    window_cpu = cpu[-1] - cpu[half - 1]
    to_target = float("inf")
    for t in np.linspace(draws / CHECKPOINTS, draws, CHECKPOINTS).astype(int):
        window = slice(t // 2, t)
        rhats = [_rhat(clusters[:, window]), _rhat(largest[:, window])]
        if all(np.isfinite(r) and r <= RHAT_TARGET for r in rhats):
            to_target = float(cpu[t - 1])
            break
    kept = clusters[:, half:].ravel()
    values, counts = np.unique(kept, return_counts=True)
    pk = dict(zip(values.tolist(), (counts / kept.size).tolist(), strict=True))
    support = set(pk) | set(reference["pk"])
    tv = 0.5 * sum(abs(pk.get(k, 0.0) - reference["pk"].get(k, 0.0)) for k in support)
    return {
        "us_per_draw": 1e6 * cpu[-1] / (CHAINS * draws),
        "ess_k": _ess(clusters[:, half:]) / window_cpu,
        "ess_frac": _ess(largest[:, half:]) / window_cpu,
        "rhat": np.nanmax([_rhat(clusters[:, half:]), _rhat(largest[:, half:]), np.nan])
        if np.ptp(clusters[:, half:]) or np.ptp(largest[:, half:]) else float("nan"),
        "to_target": to_target,
        "total_cpu": float(cpu[-1]),
        "mean_k": float(kept.mean()),
        "tv": tv,
    }


def _fmt(value, digits=0):
    return "-" if not np.isfinite(value) else f"{value:.{digits}f}"


def agrees(row) -> bool:
    """The chains found the reference's posterior of K: TV(K) and final R-hat within bounds."""
    return row["tv"] <= AGREEMENT_TV and np.isfinite(row["rhat"]) and row["rhat"] <= AGREEMENT_RHAT


def print_table(problem, reference, rows, draws):
    print(f"\n{problem.name} (n = {problem.n}): {CHAINS} chains x {draws} draws from one "
          f"cluster; reference E[K] = {reference['mean_k']:.2f}, E[frac] = "
          f"{reference['mean_frac']:.3f}")
    print("| sampler | us/draw | ESS/s K | ESS/s frac | R-hat | CPU s to 1.01 | E[K] | TV(K) |")
    print("|---|---|---|---|---|---|---|---|")
    ranked = [r for r in rows.values() if agrees(r)]
    best = {key: max((r[key] for r in ranked if np.isfinite(r[key])), default=np.nan)
            for key in ("ess_k", "ess_frac")}
    for name, r in rows.items():
        cells = []
        for key in ("ess_k", "ess_frac"):
            text = _fmt(r[key])
            if not agrees(r):
                text = f"({text})"
            elif np.isfinite(r[key]) and r[key] == best[key]:
                text = f"**{text}**"
            cells.append(text)
        target = (f"{r['to_target']:.2f}" if np.isfinite(r["to_target"])
                  else f"> {r['total_cpu']:.1f}")
        print(f"| {name} | {r['us_per_draw']:.0f} | {cells[0]} | {cells[1]} | "
              f"{_fmt(r['rhat'], 3)} | {target} | {r['mean_k']:.2f} | {r['tv']:.3f} |")
    ratios = ", ".join(
        f"{name} {best['ess_k'] / r['ess_k']:.2f} / {best['ess_frac'] / r['ess_frac']:.2f}"
        for name, r in rows.items() if agrees(r) and r["ess_k"] > 0 and r["ess_frac"] > 0)
    print(f"best ESS/s over each sampler's (K / frac): {ratios}")
    print(f"(ESS/s): not ranked, the chains disagree with the reference (TV(K) > {AGREEMENT_TV} "
          f"or R-hat > {AGREEMENT_RHAT}): a stuck chain's ESS describes the mode it is stuck in")
    sys.stdout.flush()


# ------------------------------------------------------------ the eq. (17) switch of ARM
ARM_SWITCH = "if enforce_eq17 and remaining_original[home] == 1"


def arm_switch_cost(name: str, repeats: int, seed: int) -> None:
    """CPU-median ms of one ARM proposal (a sampled forward run and the forced reverse run of
    ``kernels.arm``) with the kernel's eq. (17) switch as it is and folded to ``True``, in two
    temporary copies of ``kernels/arm.py`` timed alternately from the same seeds."""
    from pymc_splitmerge.kernels import arm

    with open(arm.__file__) as handle:
        source = handle.read()
    if source.count(ARM_SWITCH) != 1:
        raise SystemExit("kernels/arm.py no longer tests enforce_eq17 in one line")
    modules = (load_temporary_module(source, "_arm_with_switch"),
               load_temporary_module(source.replace(ARM_SWITCH,
                                                    "if remaining_original[home] == 1"),
                                     "_arm_switch_folded"))
    problem = make_problem(name)
    tables = problem.tables()
    rng = np.random.default_rng(seed)
    cpu = ([], [])
    for repeat in range(repeats + 1):  # the first repeat compiles / warms up
        labels, labels_a, labels_b = rng.integers(4, size=(3, problem.n))
        state = PartitionState(problem.family, problem.x, labels)
        draw_seed = int(rng.integers(2**63))
        for module, times in zip(modules, cpu):
            start = time.thread_time()
            module._arm_proposal(state.model, state.partition, tables,
                                 np.random.default_rng(draw_seed), labels_a, labels_b)
            if repeat:
                times.append(time.thread_time() - start)
    with_switch, folded = (float(np.median(times)) * 1e3 for times in cpu)
    print(f"ARM proposal on {name} (n = {problem.n}, 4-block random start and library), "
          f"CPU median of {repeats}: with the eq. (17) switch {with_switch:.3f} ms, folded "
          f"{folded:.3f} ms, ratio {with_switch / folded:.3f}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=20_000, help="draws per chain")
    parser.add_argument("--reference-draws", type=int, default=20_000,
                        help="iterations per reference chain")
    parser.add_argument("--datasets", default=",".join(DATASETS),
                        help=f"comma-separated subset of {', '.join(DATASETS)}")
    parser.add_argument("--samplers", default=None,
                        help="comma-separated sampler names (default: all, and the default "
                             f"step: '{DEFAULT_SAMPLER}')")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--switch-cost", type=int, default=0, metavar="REPEATS",
                        help="only time ARM's negative-control switch (eq. 17) against a "
                             "copy with it folded to a constant, REPEATS proposals per data "
                             "set")
    args = parser.parse_args(argv)
    if args.switch_cost:
        for name in args.datasets.split(","):
            arm_switch_cost(name.strip(), args.switch_cost, args.seed)
        return
    if args.draws < 40 or args.reference_draws < 10:
        raise SystemExit("need --draws >= 40 and --reference-draws >= 10")
    samplers = make_samplers()
    names = [s.name for s in samplers] + [DEFAULT_SAMPLER]
    chosen = names if args.samplers is None else [v.strip() for v in args.samplers.split(",")]
    unknown = set(chosen) - set(names)
    if unknown:
        raise SystemExit(f"unknown samplers {sorted(unknown)}; choose from {names}")
    datasets = [v.strip() for v in args.datasets.split(",")]
    if set(datasets) - set(DATASETS):
        raise SystemExit(f"unknown data sets; choose from {list(DATASETS)}")
    wall = time.perf_counter()
    for name in datasets:
        problem = make_problem(name)
        for sampler in samplers:  # compile / load the kernels outside the timers
            run_kernel_sampler(sampler, problem, 8, seed=99)
        reference = reference_run(problem, args.reference_draws, seed=10_000 + args.seed)
        rows = {}
        for sampler in samplers:
            if sampler.name in chosen:
                rows[sampler.name] = summarise(
                    *run_kernel_sampler(sampler, problem, args.draws, args.seed), reference)
        if DEFAULT_SAMPLER in chosen:
            rows[DEFAULT_SAMPLER] = summarise(
                *run_default_step(problem, args.draws, args.seed), reference)
        print_table(problem, reference, rows, args.draws)
    print(f"\ntotal wall time {time.perf_counter() - wall:.0f} s")


if __name__ == "__main__":
    main()
