r"""Herlau, Mørup, Schmidt & Teh, Table 2: ARM against Gibbs and split-merge.

Setting (paper §3.1): the Jain–Neal Bernoulli examples 1–3 (``datasets.jain_neal_bernoulli``
with d = 6, 8, 10 attributes, n = 100, one data set per seed), Dirichlet process alpha = 1,
Beta(1, 1) on every attribute probability.  For each data set, S = 8 chains start from
independent prior draws and make 50 collapsed Gibbs sweeps (the paper's shared
initialisation), then T iterations of each sampler:

* ``Gibbs``: one random-scan collapsed Gibbs sweep;
* ``SAMS+Gibbs``: one SAMS split-merge update (Dahl 2003) + one Gibbs sweep;
* ``RGSM+Gibbs``: Jain & Neal's split-merge with 5 intermediate restricted scans + one Gibbs
  sweep, RGSM(5,1,1) (the paper's "SM", L = 5, interlaced with Gibbs);
* ``ARM+Gibbs (ensemble)``: the exact red/black ensemble of ``ARMStep(library="ensemble")``:
  at iteration t chain c makes one ARM move + one Gibbs sweep when c + t is even (library: the
  current states of the other half), a Gibbs sweep otherwise;
* ``ARM+Gibbs (adaptive)``: the paper's scheme, ``library="adaptive"``: every chain, every
  iteration, one ARM move (z^a from its own past states, z^b from all chains' past states in
  the window floor(t/2)..t-1) + one Gibbs sweep; adaptive, not exactly invariant.

Reported, averaged over data sets × chains (standard deviation in brackets, as the paper):
the integrated autocorrelation time (IAT) of the largest-block fraction ("trace") and the
maximum over the 105 pairs of 15 points (3 drawn from each planted block) of the IAT of the
co-clustering indicator ("indicator"; constant indicators are skipped); the CPU time per
iteration (per chain), its ratio to a Gibbs sweep (the paper's "normalized iterations" =
T × ratio), and IAT × CPU (milliseconds per effective draw).  IAT: Geyer's initial positive
sequence (``benchmarks/jain_neal.py``).  The kernels are driven directly; CPU time is
``time.process_time`` around the kernel calls.

Run::

    python benchmarks/arm.py            # reduced: 3 data sets, T = 600 (a few minutes)
    python benchmarks/arm.py --full     # the paper's size: 20 data sets, T = 2000 (hours)
    python benchmarks/arm.py --datasets 5 --iterations 1000

References
----------
Herlau, T., Mørup, M., Schmidt, M. N. and Teh, Y. W. Adaptive reconfiguration moves for
Dirichlet mixtures, §3.1, Table 2.  Jain, S. and Neal, R. M. (2000), Tables 1–3.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from jain_neal import integrated_autocorrelation_time, rgsm_update

from pymc_splitmerge.components import BetaBernoulli
from pymc_splitmerge.datasets import jain_neal_bernoulli
from pymc_splitmerge.kernels.arm import arm_move
from pymc_splitmerge.kernels.gibbs import gibbs_sweep
from pymc_splitmerge.kernels.sams import sams_move
from pymc_splitmerge.kernels.state import PartitionState
from pymc_splitmerge.priors import DirichletProcessPrior

EXAMPLES = {1: 6, 2: 8, 3: 10}  # example -> d
N_CHAINS = 8
WARM_UP_SWEEPS = 50
ALPHA = 1.0
SAMPLER_NAMES = ("Gibbs", "SAMS+Gibbs", "RGSM+Gibbs", "ARM+Gibbs (ensemble)",
                 "ARM+Gibbs (adaptive)")
# Table 2 of the paper: (trace IAT, indicator IAT, normalized iterations) for Gibbs/SM/ARM.
PAPER = {
    1: {"Gibbs": (116.5, 91.6, 2000), "RGSM+Gibbs": (27.8, 23.2, 6741),
        "ARM+Gibbs (adaptive)": (14.9, 13.6, 6712)},
    2: {"Gibbs": (165.4, 131.3, 2000), "RGSM+Gibbs": (27.9, 26.4, 6855),
        "ARM+Gibbs (adaptive)": (8.5, 9.2, 6731)},
    3: {"Gibbs": (88.9, 99.3, 2000), "RGSM+Gibbs": (19.3, 30.4, 7503),
        "ARM+Gibbs (adaptive)": (10.8, 14.7, 6705)},
}


def _distinct_pair(rows, rng):
    distinct = {}
    for row in rows:
        distinct.setdefault(row.tobytes(), row)
    if len(distinct) < 2:
        return None
    values = list(distinct.values())
    first, second = rng.choice(len(values), size=2, replace=False)
    return values[first], values[second]


class ARMEnsemble:
    """ARM + Gibbs over a population of chains, red/black (exact) or adaptive (paper)."""

    def __init__(self, library: str):
        if library not in ("ensemble", "adaptive"):
            raise ValueError(f"library must be 'ensemble' or 'adaptive'; got {library!r}")
        self.library = library
        self.history: collections.deque = collections.deque()

    def iterate(self, states, tables, t, rng):
        """One iteration of every chain (in place); returns (moves made, accepted)."""
        labels = [state.labels() for state in states]
        n_chains = len(states)
        made = accepted = 0
        if self.library == "adaptive":
            keep = t - t // 2
            while len(self.history) > keep:
                self.history.popleft()
            window = list(self.history)
            self.history.append(np.stack(labels))
        for c, state in enumerate(states):
            pair = None
            if self.library == "ensemble":
                if (c + t) % 2 == 0:
                    pair = _distinct_pair([labels[s] for s in range(n_chains)
                                           if (s + t) % 2 == 1], rng)
            elif window:  # z^a from the own past, z^b from every chain's past (distinct)
                labels_a = window[rng.integers(len(window))][c]
                for _ in range(20):
                    labels_b = window[rng.integers(len(window))][rng.integers(n_chains)]
                    if not np.array_equal(labels_a, labels_b):
                        pair = labels_a, labels_b
                        break
            if pair is not None:
                info = arm_move(state, *tables, rng, pair[0], pair[1])
                made += 1
                accepted += int(info.accepted)
            gibbs_sweep(state, *tables, rng)
        return made, accepted


def _single_chain_step(name):
    if name == "Gibbs":
        return lambda state, tables, rng: gibbs_sweep(state, *tables, rng)

    if name == "SAMS+Gibbs":
        def step(state, tables, rng):
            sams_move(state, *tables, rng)
            gibbs_sweep(state, *tables, rng)
        return step

    return lambda state, tables, rng: rgsm_update(state, *tables, rng, 5, 1, 1)


def run_dataset(example: int, data_seed: int, iterations: int, samplers, seed: int) -> dict:
    """All samplers on one data set; returns {sampler: list of per-chain dicts}."""
    d = EXAMPLES[example]
    data, truth = jain_neal_bernoulli(d, seed=data_seed)
    family = BetaBernoulli(a=1.0, b=1.0)
    x = family.prepare_data(data)
    n = x.shape[0]
    prior = DirichletProcessPrior(alpha=ALPHA)
    tables = prior.tables(n)
    rng = np.random.default_rng([seed, example, data_seed])
    chosen = np.concatenate([rng.choice(np.flatnonzero(truth == k), 3, replace=False)
                             for k in range(5)])
    pairs = [(a, b) for index, a in enumerate(chosen) for b in chosen[index + 1:]]
    starts = []
    for _ in range(N_CHAINS):  # the paper's shared initialisation: 50 Gibbs sweeps
        state = PartitionState(family, x, prior.sample(n, rng))
        gibbs_sweep(state, *tables, rng, n_gibbs_sweeps=WARM_UP_SWEEPS)
        starts.append(state.labels())
    out = {}
    for index, name in enumerate(samplers):
        run_rng = np.random.default_rng([seed, example, data_seed, index])
        states = [PartitionState(family, x, start) for start in starts]
        largest = np.empty((N_CHAINS, iterations))
        together = np.empty((N_CHAINS, iterations, len(pairs)), dtype=np.int8)
        pair_a = np.array([p[0] for p in pairs])
        pair_b = np.array([p[1] for p in pairs])
        ensemble = None
        if name.startswith("ARM"):
            ensemble = ARMEnsemble("ensemble" if "ensemble" in name else "adaptive")
        else:
            step = _single_chain_step(name)
        cpu = 0.0
        made = accepted = 0
        for t in range(iterations):
            start = time.process_time()
            if ensemble is not None:
                moves, taken = ensemble.iterate(states, tables, t, run_rng)
                made += moves
                accepted += taken
            else:
                for state in states:
                    step(state, tables, run_rng)
            cpu += time.process_time() - start
            for c, state in enumerate(states):
                labels = state.slot_labels
                largest[c, t] = state.sizes.max() / n
                together[c, t] = labels[pair_a] == labels[pair_b]
        rows = []
        for c in range(N_CHAINS):
            iat_pairs = [integrated_autocorrelation_time(together[c, :, k])
                         for k in range(len(pairs))]
            finite = [v for v in iat_pairs if np.isfinite(v)]
            rows.append({
                "iat_trace": integrated_autocorrelation_time(largest[c]),
                "iat_indicator": max(finite) if finite else float("nan"),
                "cpu_per_iteration": cpu / (N_CHAINS * iterations),
                "accept": accepted / made if made else float("nan"),
            })
        out[name] = rows
    return out


def _mean_sd(values, digits=1):
    values = np.asarray(values, dtype=float)
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return "-"
    text = f"{finite.mean():.{digits}f}({finite.std(ddof=1) if finite.size > 1 else 0:.0f})"
    if finite.size < values.size:
        text += f"[{values.size - finite.size} inf]"
    return text


def print_table(results, iterations, n_datasets, samplers) -> None:
    header = (f"{'Ex':>2} {'d':>3} {'sampler':<22} {'IAT trace':>14} {'IAT indicator':>14} "
              f"{'accept':>7} {'us/it':>7} {'xGibbs':>7} {'norm. its':>9} "
              f"{'IATxCPU tr ms':>13} {'IATxCPU ind ms':>14} {'paper tr/ind/norm':>20}")
    print(f"\nTable 2 (Herlau et al.) reproduced: {n_datasets} data sets x {N_CHAINS} chains, "
          f"T = {iterations} iterations after {WARM_UP_SWEEPS} Gibbs warm-up sweeps; "
          "mean(sd) over data sets x chains.")
    print(header)
    print("-" * len(header))
    for example, rows_by in sorted(results.items()):
        gibbs_cpu = np.mean([r["cpu_per_iteration"] for r in rows_by["Gibbs"]])
        for name in samplers:
            rows = rows_by[name]
            cpu = np.mean([r["cpu_per_iteration"] for r in rows])
            iat_tr = np.array([r["iat_trace"] for r in rows])
            iat_ind = np.array([r["iat_indicator"] for r in rows])
            accept = np.nanmean([r["accept"] for r in rows]) if name.startswith("ARM") else None
            paper = PAPER[example].get(name)
            paper_text = f"{paper[0]}/{paper[1]}/{paper[2]}" if paper else ""
            finite_tr = iat_tr[np.isfinite(iat_tr)]
            finite_ind = iat_ind[np.isfinite(iat_ind)]
            print(f"{example:>2} {EXAMPLES[example]:>3} {name:<22} {_mean_sd(iat_tr):>14} "
                  f"{_mean_sd(iat_ind):>14} "
                  f"{'' if accept is None else f'{accept:.3f}':>7} {cpu * 1e6:>7.0f} "
                  f"{cpu / gibbs_cpu:>7.2f} {iterations * cpu / gibbs_cpu:>9.0f} "
                  f"{finite_tr.mean() * cpu * 1e3 if finite_tr.size else np.nan:>13.2f} "
                  f"{finite_ind.mean() * cpu * 1e3 if finite_ind.size else np.nan:>14.2f} "
                  f"{paper_text:>20}")
        print()
    print("paper: Table 2 of Herlau et al. (SM = RGSM with L = 5 interlaced with Gibbs, ARM = "
          "their adaptive scheme; normalized iterations = T x cost in Gibbs sweeps, T = 2000).")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true",
                        help="the paper's size: 20 data sets, T = 2000")
    parser.add_argument("--datasets", type=int, default=None, help="data sets per example")
    parser.add_argument("--iterations", type=int, default=None, help="T per chain")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    n_datasets = args.datasets or (20 if args.full else 3)
    iterations = args.iterations or (2000 if args.full else 600)
    if n_datasets < 1 or iterations < 20:
        raise ValueError("need --datasets >= 1 and --iterations >= 20")
    total = time.perf_counter()
    run_dataset(1, 0, 3, SAMPLER_NAMES, seed=99)  # compile / load the kernels outside timers
    results = {}
    for example, n_attributes in EXAMPLES.items():
        start = time.perf_counter()
        merged = {name: [] for name in SAMPLER_NAMES}
        for data_seed in range(n_datasets):
            for name, rows in run_dataset(example, data_seed, iterations, SAMPLER_NAMES,
                                          args.seed).items():
                merged[name].extend(rows)
        results[example] = merged
        print(f"example {example} (d = {n_attributes}): {time.perf_counter() - start:.0f} s",
              flush=True)
    print_table(results, iterations, n_datasets, SAMPLER_NAMES)
    print(f"total wall time {time.perf_counter() - total:.0f} s")


if __name__ == "__main__":
    main()
