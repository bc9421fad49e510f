"""PGSM + Gibbs against SAMS + Gibbs on one Jain & Neal (2000) example, by particle count.

Same setting, estimators and reference pair as ``benchmarks/jain_neal.py`` (n = 100 binary
vectors, DP(1), Beta(1, 1), all points in one cluster at the start, IAT: Geyer's initial
positive sequence, IAT x CPU = CPU milliseconds per effective draw); only SAMS + Gibbs and
PGSM(N) + Gibbs for several particle counts N, the samplers interleaved seed by seed (so
that the machine's load drifts affect them alike).  Any N >= 2 gives an exact PGSM move;
this measures which one mixes the most per CPU second.  Prints mean ± sd and the standard
error over the seeds.

Run::

    python benchmarks/pgsm_particles.py                      # d = 18, 12 seeds, N = 10,15,20,30,40
    python benchmarks/pgsm_particles.py --d 15 --seeds 6 --particles 10,20
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import numpy as np
from jain_neal import Sampler, make_problem, reference_run, run_chain, warm_up

from pymc_splitmerge.kernels.gibbs import gibbs_sweep
from pymc_splitmerge.kernels.pgsm import pgsm_move


@dataclass(frozen=True)
class PGSMGibbs:
    """One PGSM(N) move, then one random-scan Gibbs sweep (as ``jain_neal.py``'s row)."""

    name: str
    num_particles: int

    def step(self, state, log_v_table, log_w_table, rng):
        pgsm_move(state, log_v_table, log_w_table, rng, num_particles=self.num_particles)
        gibbs_sweep(state, log_v_table, log_w_table, rng)
        return 1, 0


def summary(values, scale=1.0) -> str:
    v = np.asarray(values, dtype=np.float64) * scale
    se = v.std(ddof=1) / np.sqrt(v.size) if v.size > 1 else float("nan")
    return f"{v.mean():.3f}±{v.std(ddof=1) if v.size > 1 else 0.0:.3f} (se {se:.3f}, median {np.median(v):.3f})"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--d", type=int, default=18, choices=(6, 15, 18))
    parser.add_argument("--seeds", type=int, default=12)
    parser.add_argument("--draws", type=int, default=10_000)
    parser.add_argument("--particles", default="10,15,20,30,40")
    parser.add_argument("--data-seed", type=int, default=0)
    args = parser.parse_args(argv)
    problem = make_problem(args.d, args.data_seed)
    warm_up(problem)
    reference = reference_run(problem, 4, 4000, seed=10_000)  # as jain_neal.py's default
    pair = reference["pair"]
    print(f"d = {args.d}: pair {pair}, P(co-clustered) = {reference['pair_probability']:.3f}")
    samplers = [Sampler("SAMS+Gibbs", "sams", n_gibbs_scans=1)] + [
        PGSMGibbs(f"PGSM({n})+Gibbs", n) for n in (int(v) for v in args.particles.split(","))]
    tables = (problem.log_v_table, problem.log_w_table)
    for sampler in samplers[1:]:  # compile every particle count outside the timers
        sampler.step(problem.initial_state(), *tables, np.random.default_rng(0))
    results = {sampler.name: [] for sampler in samplers}
    for seed in range(args.seeds):
        for sampler in samplers:  # a chain's stream depends on (seed, d, N) only
            rng = np.random.default_rng([seed, args.d, 100 + getattr(sampler, "num_particles", 0)])
            results[sampler.name].append(run_chain(sampler, problem, pair, args.draws, rng))
        print(f"seed {seed}: IATxCPU pair ms " + ", ".join(
            f"{name} {rows[-1]['iat_cpu_pair'] * 1e3:.3f}" for name, rows in results.items()),
            flush=True)
    print(f"\nd = {args.d}, {args.seeds} seeds x {args.draws} draws: mean±sd (se, median)")
    for name, rows in results.items():
        print(f"{name:<16} us/draw {summary([r['cpu_per_draw'] for r in rows], 1e6)}\n"
              f"{'':<16} IAT pair {summary([r['iat_pair'] for r in rows])}  "
              f"IAT frac {summary([r['iat_fraction'] for r in rows])}\n"
              f"{'':<16} IATxCPU pair ms {summary([r['iat_cpu_pair'] for r in rows], 1e3)}  "
              f"frac ms {summary([r['iat_cpu_fraction'] for r in rows], 1e3)}")


if __name__ == "__main__":
    main()
