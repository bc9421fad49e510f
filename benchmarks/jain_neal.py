r"""Mixing of the partition samplers on the Jain & Neal (2000) Bernoulli examples.

Setting (Jain & Neal 2000, §4.2-4.3): n = 100 binary vectors from five equally likely
components (``pymc_splitmerge.datasets.jain_neal_bernoulli``, Tables 1-3; d = 6, 15 and 18
attributes; one data set per d, ``--data-seed``), Dirichlet process prior with alpha = 1,
Beta(1, 1) priors on every attribute probability, all points in **one cluster** at the start.

Samplers (one *draw* = one iteration of the sampler):

* ``Gibbs``: one random-scan collapsed Gibbs sweep (Neal 2000, Algorithm 3);
* ``SAMS`` / ``SAMS+Gibbs``: one SAMS split-merge update (Dahl 2003), optionally followed by
  one Gibbs sweep;
* ``RGSM(t,m,g)``: Jain & Neal's restricted-Gibbs split-merge with the paper's settings
  (0,1,0), (0,1,1), (5,1,0), (5,1,1): ``m`` updates with ``t`` intermediate restricted scans,
  then ``g`` Gibbs sweeps;
* ``PGSM`` / ``PGSM+Gibbs``: one Particle-Gibbs split-merge move (Bouchard-Côté et al. 2017,
  20 particles, 2 uniform anchors, annealing, resampling at relative ESS < 0.5), optionally
  followed by one Gibbs sweep;
* ``ARM+Gibbs(S=8)``: the exact red/black ensemble of ``ARMStep(library="ensemble")``
  (:func:`run_arm_ensemble`): 8 chains in lockstep, one row per chain (not per seed), CPU
  per chain and draw.

The kernels are driven directly (a plain loop over ``kernels.state.PartitionState``), CPU
time is ``time.process_time`` around the kernel calls only.  Reported per sampler and d,
as mean ± standard deviation (ddof = 1) across ``--seeds`` independent chains:

* ``accept``: accepted / proposed split-merge updates (SAMS, RGSM); for PGSM the fraction of
  moves that changed the partition of the anchors' clusters (PGSM has no accept step);
* ``us/draw``: CPU microseconds per draw;
* ``burn-in``: draws until the largest-cluster fraction first drops below 0.5 (from the
  all-in-one start), and the same in CPU milliseconds; ``[k never]`` counts the chains that
  never got there;
* ``IAT frac`` / ``IAT pair``: integrated autocorrelation time of the largest-cluster
  fraction (the paper's "trace 1") and of the co-clustering indicator of one pair of points
  (the paper's :math:`I_{13,42}`), after discarding ``max(burn-in, draws/10)`` draws (or the
  first half when the chain never burned in: such numbers describe a stuck chain, see the
  second table).  Estimator: Geyer's (1992) *initial positive sequence*,
  :math:`\hat\tau = -1 + 2\sum_{k=0}^{K}(\hat\rho_{2k} + \hat\rho_{2k+1})` with K the last
  index before the first non-positive pair sum, :math:`\hat\rho` from the FFT of the
  biased autocovariance; ``inf`` when the quantity never moved.  A footer compares it with
  ArviZ's ``ess(method="mean")`` (Geyer's initial *monotone* sequence) on the same windows;
* ``IATxCPU``: IAT × CPU seconds per draw = CPU milliseconds per effective draw.

The pair is the one whose posterior co-clustering probability is closest to 1/2
(``analysis.most_uncertain_pairs``) in a **pooled reference run**: ``--reference-chains``
chains, each iteration one SAMS update, one RGSM(5,1,1) iteration and one PGSM move (so
no single benchmarked sampler defines the reference), first 20 % discarded.  A second
table compares each sampler's posterior means with that reference and gives the
rank-normalised split R-hat across seeds of the largest-cluster fraction.

Finally one configuration, RGSM(5,1,1) on d = 15, is timed through ``pm.sample``
(``psm.RGSMStep``, one chain, no tuning) against the same kernel in a plain loop, to report
the per-draw PyMC overhead (the difference between two ``pm.sample`` lengths removes the
fixed setup cost).

Run::

    python benchmarks/jain_neal.py            # full run (~3.5 CPU min; 6 min wall when shared)
    python benchmarks/jain_neal.py --quick    # smoke test (< 1 minute)
    python benchmarks/jain_neal.py --draws 20000 --seeds 5

References
----------
Jain, S. and Neal, R. M. (2000). A split-merge Markov chain Monte Carlo procedure for the
Dirichlet process mixture model. Technical Report 2003, University of Toronto, §4 (Tables
1-5).  Dahl, D. B. (2003). An improved merge-split sampler for conjugate Dirichlet process
mixture models.  Bouchard-Côté, A., Doucet, A. and Roth, A. (2017). Particle Gibbs
split-merge sampling for Bayesian inference in mixture models. JMLR 18(28).  Geyer, C. J.
(1992). Practical Markov chain Monte Carlo. Statistical Science 7(4), §3.3.
"""

from __future__ import annotations

import argparse
import logging
import time
import warnings
from dataclasses import dataclass

import numpy as np

from pymc_splitmerge.analysis import _arviz_compat as arviz_compat
from pymc_splitmerge.analysis import most_uncertain_pairs
from pymc_splitmerge.components import BetaBernoulli
from pymc_splitmerge.datasets import jain_neal_bernoulli
from pymc_splitmerge.kernels.gibbs import gibbs_sweep
from pymc_splitmerge.kernels.pgsm import MOVE_NONE as PGSM_MOVE_NONE
from pymc_splitmerge.kernels.pgsm import pgsm_move
from pymc_splitmerge.kernels.rgsm import build_rgsm_move
from pymc_splitmerge.kernels.sams import sams_move
from pymc_splitmerge.kernels.splitmerge_common import MOVE_NONE, build_moves_then_gibbs
from pymc_splitmerge.kernels.state import PartitionState, PriorTables
from pymc_splitmerge.priors import DirichletProcessPrior

N_ATTRIBUTES = (6, 15, 18)
BURN_IN_THRESHOLD = 0.5
NUM_PARTICLES = 20
ALPHA = 1.0


def rgsm_update(state, log_v_table, log_w_table, rng, n_intermediate_scans, n_moves,
                n_gibbs_sweeps):
    """RGSM(t, m, g) on ``state`` in place: ``m`` restricted-Gibbs split-merge moves with ``t``
    intermediate scans, then ``g`` Gibbs sweeps; returns the transition's info."""
    transition = build_moves_then_gibbs(build_rgsm_move(n_intermediate_scans), n_moves=n_moves,
                                        n_gibbs_sweeps=n_gibbs_sweeps)
    return transition(state.model, state.partition, PriorTables(log_v_table, log_w_table), rng)


# --------------------------------------------------------------------------- samplers


@dataclass(frozen=True)
class Sampler:
    """One benchmarked sampler: ``kind`` in {gibbs, sams, rgsm, pgsm}."""

    name: str
    kind: str
    n_intermediate_scans: int = 0
    n_gibbs_scans: int = 0

    def step(self, state, log_v_table, log_w_table, rng) -> tuple[int, int]:
        """One draw (in place); returns (split-merge proposals made, accepted/changed)."""
        if self.kind == "gibbs":
            gibbs_sweep(state, log_v_table, log_w_table, rng)
            return 0, 0
        if self.kind == "rgsm":
            info = rgsm_update(state, log_v_table, log_w_table, rng, self.n_intermediate_scans,
                               1, self.n_gibbs_scans)
            proposed = sum(int(move.move != MOVE_NONE) for move in info.moves)
            return proposed, sum(int(move.accepted) for move in info.moves)
        if self.kind == "sams":
            info = sams_move(state, log_v_table, log_w_table, rng)
            proposed, accepted = int(info.move != MOVE_NONE), int(info.accepted)
        else:  # pgsm
            info = pgsm_move(state, log_v_table, log_w_table, rng, num_particles=NUM_PARTICLES)
            proposed, accepted = 1, int(info.move != PGSM_MOVE_NONE)
        if self.n_gibbs_scans:
            gibbs_sweep(state, log_v_table, log_w_table, rng, n_gibbs_sweeps=self.n_gibbs_scans)
        return proposed, accepted


SAMPLERS = (
    Sampler("Gibbs", "gibbs"),
    Sampler("SAMS", "sams"),
    Sampler("SAMS+Gibbs", "sams", n_gibbs_scans=1),
    Sampler("RGSM(0,1,0)", "rgsm", 0, 0),
    Sampler("RGSM(0,1,1)", "rgsm", 0, 1),
    Sampler("RGSM(5,1,0)", "rgsm", 5, 0),
    Sampler("RGSM(5,1,1)", "rgsm", 5, 1),
    Sampler(f"PGSM(N={NUM_PARTICLES})", "pgsm"),
    Sampler(f"PGSM(N={NUM_PARTICLES})+Gibbs", "pgsm", n_gibbs_scans=1),
)


@dataclass
class Problem:
    n_attributes: int
    data: np.ndarray
    family: BetaBernoulli
    x: np.ndarray
    truth: np.ndarray
    log_v_table: np.ndarray
    log_w_table: np.ndarray

    def initial_state(self) -> PartitionState:
        return PartitionState(self.family, self.x, np.zeros(self.x.shape[0], dtype=np.int64))


def make_problem(n_attributes: int, data_seed: int) -> Problem:
    data, truth = jain_neal_bernoulli(n_attributes, seed=data_seed)
    family = BetaBernoulli(a=1.0, b=1.0)
    x = family.prepare_data(data)
    log_v_table, log_w_table = DirichletProcessPrior(alpha=ALPHA).tables(x.shape[0])
    return Problem(n_attributes, data, family, x, truth, log_v_table, log_w_table)


# --------------------------------------------------------------------------- estimators


def integrated_autocorrelation_time(series) -> float:
    """Geyer's initial-positive-sequence IAT of a 1-D series (``inf`` if it never moves)."""
    x = np.asarray(series, dtype=np.float64)
    n = x.size
    x = x - x.mean()
    if n < 4 or not np.any(np.abs(x) > 1e-12):
        return float("inf")
    spectrum = np.fft.rfft(x, 2 * n)
    autocovariance = np.fft.irfft(spectrum * np.conj(spectrum), 2 * n)[:n] / n
    rho = autocovariance / autocovariance[0]
    n_pairs = n // 2
    pair_sums = rho[0 : 2 * n_pairs : 2] + rho[1 : 2 * n_pairs : 2]
    non_positive = np.flatnonzero(pair_sums <= 0.0)
    stop = non_positive[0] if non_positive.size else n_pairs
    return float(-1.0 + 2.0 * pair_sums[:stop].sum())


def arviz_integrated_autocorrelation_time(series) -> float:
    """``len / ess(method="mean")`` of ArviZ on one chain (cross-check)."""
    x = np.asarray(series, dtype=np.float64)
    if not np.any(np.abs(x - x.mean()) > 1e-12):
        return float("inf")
    return x.size / arviz_compat.ess(x[None, :], method="mean")


def burn_in_draws(largest_fraction: np.ndarray) -> int | None:
    """1-based draw at which the largest-cluster fraction first drops below the threshold."""
    below = np.flatnonzero(largest_fraction < BURN_IN_THRESHOLD)
    return int(below[0]) + 1 if below.size else None


def analysis_window_start(burn_in: int | None, draws: int) -> int:
    if burn_in is None or burn_in > draws // 2:
        return draws // 2
    return max(burn_in, draws // 10)


# --------------------------------------------------------------------------- runs


def run_chain(sampler: Sampler, problem: Problem, pair, draws: int, rng) -> dict:
    state = problem.initial_state()
    n = problem.x.shape[0]
    i, j = pair
    largest = np.empty(draws)
    indicator = np.empty(draws)
    n_clusters = np.empty(draws, dtype=np.int64)
    cpu = 0.0
    proposed = accepted = 0
    labels, sizes = state.slot_labels, state.sizes
    tables = (problem.log_v_table, problem.log_w_table)
    for t in range(draws):
        start = time.process_time()
        made, taken = sampler.step(state, *tables, rng)
        cpu += time.process_time() - start
        proposed += made
        accepted += taken
        largest[t] = sizes.max() / n
        indicator[t] = labels[i] == labels[j]
        n_clusters[t] = state.n_clusters
    accept = accepted / proposed if proposed else float("nan")
    return chain_summary(largest, indicator, n_clusters, draws, cpu / draws, accept)


def chain_summary(largest, indicator, n_clusters, draws: int, cpu_per_draw: float,
                  accept: float) -> dict:
    """Burn-in, IATs (Geyer's and ArviZ's), IAT x CPU and window means of one chain's
    largest-cluster fraction, pair indicator and number of clusters."""
    burn_in = burn_in_draws(largest)
    window = slice(analysis_window_start(burn_in, draws), draws)
    iat_fraction = integrated_autocorrelation_time(largest[window])
    iat_pair = integrated_autocorrelation_time(indicator[window])
    return {
        "accept": accept,
        "cpu_per_draw": cpu_per_draw,
        "burn_in": burn_in,
        "burn_in_cpu": None if burn_in is None else burn_in * cpu_per_draw,
        "iat_fraction": iat_fraction,
        "iat_pair": iat_pair,
        "iat_cpu_fraction": iat_fraction * cpu_per_draw,
        "iat_cpu_pair": iat_pair * cpu_per_draw,
        "arviz_iat_fraction": arviz_integrated_autocorrelation_time(largest[window]),
        "arviz_iat_pair": arviz_integrated_autocorrelation_time(indicator[window]),
        "mean_fraction": float(largest[window].mean()),
        "mean_pair": float(indicator[window].mean()),
        "mean_clusters": float(n_clusters[window].mean()),
        "fraction_window": largest[window],
    }


def reference_run(problem: Problem, chains: int, draws: int, seed: int) -> dict:
    """Pooled long run mixing SAMS, RGSM(5,1,1) and PGSM; picks the pair nearest 1/2."""
    tables = (problem.log_v_table, problem.log_w_table)
    start = draws // 5
    thin = 2
    kept = []
    largest = []
    n_clusters = []
    for chain in range(chains):
        rng = np.random.default_rng([seed, problem.n_attributes, chain])
        state = problem.initial_state()
        for t in range(draws):
            sams_move(state, *tables, rng)
            rgsm_update(state, *tables, rng, 5, 1, 1)
            pgsm_move(state, *tables, rng, num_particles=NUM_PARTICLES)
            if t >= start:
                largest.append(state.sizes.max() / state.n)
                n_clusters.append(state.n_clusters)
                if (t - start) % thin == 0:
                    kept.append(state.labels())
    draws_kept = np.array(kept).reshape(chains, -1, problem.x.shape[0])
    pairs, probabilities = most_uncertain_pairs(draws_kept, num_pairs=1)
    return {
        "pair": tuple(int(v) for v in pairs[0]),
        "pair_probability": float(probabilities[0]),
        "mean_fraction": float(np.mean(largest)),
        "mean_clusters": float(np.mean(n_clusters)),
        "chains": chains,
        "draws": draws,
        "discarded": start,
    }


def warm_up(problem: Problem) -> None:
    """Compile / load every numba kernel outside the timers."""
    rng = np.random.default_rng(0)
    for sampler in SAMPLERS:
        state = problem.initial_state()
        for _ in range(3):
            sampler.step(state, problem.log_v_table, problem.log_w_table, rng)


# --------------------------------------------------------------------------- PyMC overhead


def pymc_overhead(problem: Problem, draws: int, seed: int) -> str:
    """Per-draw cost of RGSM(5,1,1) through ``pm.sample`` against the plain kernel loop."""
    try:
        import pymc as pm

        import pymc_splitmerge as psm
    except ImportError as error:  # pragma: no cover
        return f"pm.sample overhead: skipped ({error})"
    logging.getLogger("pymc").setLevel(logging.ERROR)  # no per-call "Sequential sampling" chatter
    sampler = next(s for s in SAMPLERS if s.name == "RGSM(5,1,1)")
    rng = np.random.default_rng(seed)
    state = problem.initial_state()
    tables = (problem.log_v_table, problem.log_w_table)
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(4 * draws):
        sampler.step(state, *tables, rng)
    kernel_wall = (time.perf_counter() - wall) / (4 * draws)
    kernel_cpu = (time.process_time() - cpu) / (4 * draws)

    data = problem.data
    with warnings.catch_warnings(), pm.Model():
        warnings.simplefilter("ignore")  # "only N samples per chain" on the short runs
        z = psm.DirichletProcess("z", alpha=ALPHA, n=data.shape[0])
        psm.ConjugateMixture("y", partition=z, component=psm.BetaBernoulli(a=1.0, b=1.0),
                             observed=data)
        step = psm.RGSMStep(z, n_intermediate_scans=5, n_split_merge_updates=1,
                            n_gibbs_scans=1)
        options = {"tune": 0, "chains": 1, "cores": 1, "step": step, "progressbar": False,
                       "compute_convergence_checks": False, "random_seed": seed}
        pm.sample(draws=20, **options)  # warm-up: compilation of the model functions
        timings = {draws: [], 5 * draws: []}
        for _ in range(3):  # best of three of each length: the machine is shared
            for n_draws, runs in timings.items():
                wall, cpu = time.perf_counter(), time.process_time()
                pm.sample(draws=n_draws, **options)
                runs.append((time.perf_counter() - wall, time.process_time() - cpu))
    short = np.min(timings[draws], axis=0)
    long = np.min(timings[5 * draws], axis=0)
    sample_wall, sample_cpu = (long - short) / (4 * draws)
    return (
        f"pm.sample overhead (pymc {pm.__version__}), RGSM(5,1,1), d = {problem.n_attributes}, "
        f"per draw from the difference of {draws} and {5 * draws} draws (best of 3):\n"
        f"  plain kernel loop: {kernel_cpu * 1e6:7.1f} us CPU, {kernel_wall * 1e6:7.1f} us wall\n"
        f"  pm.sample:         {sample_cpu * 1e6:7.1f} us CPU, {sample_wall * 1e6:7.1f} us wall\n"
        f"  overhead:          {(sample_cpu - kernel_cpu) * 1e6:7.1f} us CPU "
        f"({sample_cpu / kernel_cpu:.2f}x), {(sample_wall - kernel_wall) * 1e6:7.1f} us wall "
        f"({sample_wall / kernel_wall:.2f}x)"
    )


# --------------------------------------------------------------------------- formatting


def format_spread(values, scale: float = 1.0, digits: int = 1) -> str:
    """``mean±sd`` over the finite values, with a note on the infinite/undefined ones."""
    values = np.array([np.nan if v is None else v for v in values], dtype=np.float64)
    finite = values[np.isfinite(values)] * scale
    n_inf = int(np.count_nonzero(np.isinf(values)))
    if finite.size == 0:
        return "inf" if n_inf else "-"
    text = f"{finite.mean():.{digits}f}"
    if finite.size > 1:
        text += f"±{finite.std(ddof=1):.{digits}f}"
    if n_inf:
        text += f" [{n_inf} inf]"
    return text


def format_burn_in(values, draws: int, scale: float = 1.0, digits: int = 0) -> str:
    reached = [v for v in values if v is not None]
    never = len(values) - len(reached)
    if not reached:
        return f">{draws}" if scale == 1.0 else "never"
    text = format_spread(reached, scale, digits)
    return text + (f" [{never} never]" if never else "")


def rhat_across_seeds(results) -> float:
    """Split R-hat of the largest-cluster fraction, seeds as chains (``inf``: a chain is stuck)."""
    windows = [r["fraction_window"] for r in results]
    if len(windows) < 2:
        return float("nan")
    length = min(w.size for w in windows)
    stacked = np.stack([w[-length:] for w in windows])
    halves = stacked[:, : length // 2], stacked[:, length - length // 2 :]
    if all(np.ptp(half, axis=1).max() == 0 for half in halves):
        # no (split) chain moved: R-hat's within-chain variance is 0
        return float("nan") if np.ptp(stacked) == 0 else float("inf")
    return arviz_compat.rhat(stacked)


def print_tables(problems, references, results, samplers, draws, seeds) -> None:
    header = (f"{'d':>3} {'sampler':<18} {'accept':>11} {'us/draw':>10} {'burn-in':>16} "
              f"{'burn-in ms':>14} {'IAT frac':>13} {'IAT pair':>13} "
              f"{'IATxCPU frac ms':>16} {'IATxCPU pair ms':>16}")
    print(f"\nTable 1. Mixing from the all-in-one start: mean±sd over {seeds} seeds, "
          f"{draws} draws each (IAT: Geyer initial positive sequence).")
    print(header)
    print("-" * len(header))
    for problem in problems:
        for sampler in samplers:
            rows = results[problem.n_attributes, sampler.name]
            print(f"{problem.n_attributes:>3} {sampler.name:<18} "
                  f"{format_spread([r['accept'] for r in rows], 1.0, 3):>11} "
                  f"{format_spread([r['cpu_per_draw'] for r in rows], 1e6, 0):>10} "
                  f"{format_burn_in([r['burn_in'] for r in rows], draws):>16} "
                  f"{format_burn_in([r['burn_in_cpu'] for r in rows], draws, 1e3, 1):>14} "
                  f"{format_spread([r['iat_fraction'] for r in rows]):>13} "
                  f"{format_spread([r['iat_pair'] for r in rows]):>13} "
                  f"{format_spread([r['iat_cpu_fraction'] for r in rows], 1e3, 2):>16} "
                  f"{format_spread([r['iat_cpu_pair'] for r in rows], 1e3, 2):>16}")
        print()
    print(f"burn-in: draws until the largest-cluster fraction < {BURN_IN_THRESHOLD} "
          f"(\">N\"/[k never]: not reached); a chain that never burned in is analysed on its "
          "second half, so its IAT describes a stuck chain (check Table 2).  accept: PGSM rows "
          "give the fraction of moves that changed the anchors' clusters.  inf: the quantity "
          "never changed in the window.\n")

    header = (f"{'d':>3} {'sampler':<18} {'E[frac]':>13} {'P(pair)':>13} {'E[K]':>11} "
              f"{'R-hat frac':>10}")
    print("Table 2. Posterior means over the analysis windows (mean±sd over seeds) against the "
          "pooled reference run; R-hat: rank-normalised split R-hat of the largest-cluster "
          "fraction with the seeds as chains.")
    print(header)
    print("-" * len(header))
    for problem in problems:
        reference = references[problem.n_attributes]
        i, j = reference["pair"]
        print(f"{problem.n_attributes:>3} {'reference':<18} {reference['mean_fraction']:>13.3f} "
              f"{reference['pair_probability']:>13.3f} {reference['mean_clusters']:>11.2f} "
              f"{'':>10}   pair ({i}, {j}), true components "
              f"({problem.truth[i]}, {problem.truth[j]}); {reference['chains']} chains x "
              f"{reference['draws']} its, first {reference['discarded']} dropped")
        for sampler in samplers:
            rows = results[problem.n_attributes, sampler.name]
            print(f"{problem.n_attributes:>3} {sampler.name:<18} "
                  f"{format_spread([r['mean_fraction'] for r in rows], 1.0, 3):>13} "
                  f"{format_spread([r['mean_pair'] for r in rows], 1.0, 3):>13} "
                  f"{format_spread([r['mean_clusters'] for r in rows], 1.0, 2):>11} "
                  f"{rhat_across_seeds(rows):>10.3f}")
        print()


def print_estimator_check(results) -> None:
    ratios = []
    for rows in results.values():
        for r in rows:
            for ours, theirs in ((r["iat_fraction"], r["arviz_iat_fraction"]),
                                 (r["iat_pair"], r["arviz_iat_pair"])):
                if np.isfinite(ours) and np.isfinite(theirs) and theirs > 0:
                    ratios.append(ours / theirs)
    if ratios:
        q = np.quantile(ratios, [0.1, 0.5, 0.9])
        print(f"IAT estimator check: initial-positive-sequence IAT / ArviZ (len / ess mean) over "
              f"{len(ratios)} series: 10%/50%/90% quantiles {q[0]:.2f} / {q[1]:.2f} / {q[2]:.2f}")


# --------------------------------------------------------------------------- ARM

ARM_CHAINS = 8
ARM_SAMPLER = Sampler(f"ARM+Gibbs(S={ARM_CHAINS})", "arm")


def run_arm_ensemble(problem: Problem, pair, draws: int, seed: int) -> list[dict]:
    """ARM + Gibbs as the exact red/black ensemble of ``ARMStep(library="ensemble")``.

    ``ARM_CHAINS`` chains from the all-in-one start run in lockstep (``benchmarks/arm.py``
    ``ARMEnsemble``): at draw t chain c makes one ARM move (library: the current states of
    the chains with c' + t odd) and one Gibbs sweep when c + t is even, a Gibbs sweep
    otherwise.  One row per chain with :func:`run_chain`'s keys; CPU time is the ensemble's
    per chain and draw.
    """
    from arm import ARMEnsemble

    rng = np.random.default_rng([seed, problem.n_attributes, 99])
    states = [problem.initial_state() for _ in range(ARM_CHAINS)]
    ensemble = ARMEnsemble("ensemble")
    n = problem.x.shape[0]
    i, j = pair
    largest = np.empty((ARM_CHAINS, draws))
    indicator = np.empty((ARM_CHAINS, draws))
    n_clusters = np.empty((ARM_CHAINS, draws))
    tables = (problem.log_v_table, problem.log_w_table)
    cpu = 0.0
    proposed = accepted = 0
    for t in range(draws):
        start = time.process_time()
        made, taken = ensemble.iterate(states, tables, t, rng)
        cpu += time.process_time() - start
        proposed += made
        accepted += taken
        for c, state in enumerate(states):
            largest[c, t] = state.sizes.max() / n
            indicator[c, t] = state.slot_labels[i] == state.slot_labels[j]
            n_clusters[c, t] = state.n_clusters
    cpu_per_draw = cpu / (ARM_CHAINS * draws)
    accept = accepted / proposed if proposed else float("nan")
    return [chain_summary(largest[c], indicator[c], n_clusters[c], draws, cpu_per_draw, accept)
            for c in range(ARM_CHAINS)]


# --------------------------------------------------------------------------- main


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=None,
                        help="draws per chain (default 10000; 1500 with --quick)")
    parser.add_argument("--seeds", type=int, default=None,
                        help="independent chains per sampler (default 3; 2 with --quick)")
    parser.add_argument("--reference-chains", type=int, default=4)
    parser.add_argument("--reference-draws", type=int, default=None,
                        help="iterations per reference chain (default 4000; 300 with --quick)")
    parser.add_argument("--data-seed", type=int, default=0)
    parser.add_argument("--skip-pymc", action="store_true", help="skip the pm.sample timing")
    parser.add_argument("--quick", action="store_true", help="small smoke-test run (< 1 min)")
    args = parser.parse_args(argv)
    draws = args.draws or (1500 if args.quick else 10_000)
    seeds = args.seeds or (2 if args.quick else 3)
    reference_draws = args.reference_draws or (300 if args.quick else 4000)
    reference_chains = 2 if args.quick and args.reference_chains == 4 else args.reference_chains
    if draws < 20 or seeds < 1 or reference_draws < 10 or reference_chains < 1:
        raise ValueError("need --draws >= 20, --seeds >= 1, --reference-draws >= 10, "
                         "--reference-chains >= 1")

    total_start = time.perf_counter()
    problems = [make_problem(d, args.data_seed) for d in N_ATTRIBUTES]
    warm_up(problems[0])
    run_arm_ensemble(problems[0], (0, 1), 4, seed=0)  # compile the ARM kernel outside timers
    references = {}
    for problem in problems:
        start = time.perf_counter()
        references[problem.n_attributes] = reference_run(problem, reference_chains,
                                                         reference_draws, seed=10_000)
        reference = references[problem.n_attributes]
        print(f"d = {problem.n_attributes:2d}: reference run {time.perf_counter() - start:5.1f} s, "
              f"pair {reference['pair']} with P(co-clustered) = "
              f"{reference['pair_probability']:.3f}", flush=True)

    results = {}
    for problem in problems:
        start = time.perf_counter()
        for index, sampler in enumerate(SAMPLERS):
            results[problem.n_attributes, sampler.name] = [
                run_chain(sampler, problem, references[problem.n_attributes]["pair"], draws,
                          np.random.default_rng([seed, problem.n_attributes, index]))
                for seed in range(seeds)
            ]
        results[problem.n_attributes, ARM_SAMPLER.name] = run_arm_ensemble(
            problem, references[problem.n_attributes]["pair"], draws, seed=0)
        print(f"d = {problem.n_attributes:2d}: {len(SAMPLERS)} samplers x {seeds} seeds in "
              f"{time.perf_counter() - start:5.1f} s", flush=True)

    print_tables(problems, references, results, (*SAMPLERS, ARM_SAMPLER), draws, seeds)
    print_estimator_check(results)
    if not args.skip_pymc:
        print(pymc_overhead(problems[1], 60 if args.quick else 400, seed=1))
    print(f"total wall time {time.perf_counter() - total_start:.0f} s")


if __name__ == "__main__":
    main()
