"""Uniform vs cluster anchors for ``SAMSStep`` (SAMS + one Gibbs sweep) on unequal clusters.

Data: ``_common.unequal_data(n)`` (15 unit Gaussians on a spiral, weights proportional
to 0.75^k), DP(alpha = 1) + NIW as in ``benchmarks/scale.py``.  From the model's initial point
(every point in one cluster), ``pm.sample(draws, tune=0, chains=1)`` with
``SAMSStep(z, anchor_proposal=..., n_gibbs_sweeps=1)``, uniform and cluster anchors alternating
in one process with the same seed for both.  Reported per seed: the held-out lpd per point
(``scale.heldout_running_lpd``: pooled over the second half of the draws so far) minus that
of the true labels at a few draw counts, the number of clusters at the end, and the median
CPU seconds per draw (``time.process_time`` between draws).

Run: ``python benchmarks/cluster_anchors.py [--n 2000] [--draws 1000] [--seeds 5]``
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
import scale
from _common import unequal_data

ANCHORS = ("uniform", "cluster")


def run(model, anchors, draws, seed, record_every):
    import pymc as pm

    import pymc_splitmerge as psm

    times, labels = [], []

    def callback(trace, draw):
        times.append(time.process_time())
        if (draw.draw_idx + 1) % record_every == 0:
            labels.append(np.array(draw.point["z"]))

    with model:
        step = psm.SAMSStep(model["z"], anchor_proposal=anchors, n_gibbs_sweeps=1)
        pm.sample(draws=draws, tune=0, chains=1, cores=1, step=step, random_seed=seed,
                  progressbar=False, callback=callback, compute_convergence_checks=False,
                  return_inferencedata=False)
    return float(np.median(np.diff(times))), labels


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--record-every", type=int, default=10)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    y, y_test, truth = unequal_data(args.n)
    model = scale.build_model(y)
    truth_lpd = scale.heldout_running_lpd(y, y_test, [truth])[0][-1]
    run(model, "uniform", 5, 0, 1)  # warm-up (numba cache loads, PyTensor)
    run(model, "cluster", 5, 0, 1)
    checkpoints = [c for c in (100, 200, 500, 1000, 2000, 5000) if c <= args.draws]
    print(f"# n = {args.n:,}, {args.draws} draws from one cluster, seeds 0..{args.seeds - 1}, "
          f"true K = {int(truth.max()) + 1}; lpd - truth lpd (nats/point) after t draws\n")
    print("| seed | anchors | " + " | ".join(f"t = {c}" for c in checkpoints)
          + " | K at end | CPU ms/draw |")
    print("|---|---|" + "---|" * len(checkpoints) + "---|---|")
    summary = {a: {"gaps": [], "cpu": []} for a in ANCHORS}
    for seed in range(args.seeds):
        order = ANCHORS if seed % 2 == 0 else ANCHORS[::-1]  # alternate who runs first
        rows = {}
        for anchors in order:
            cpu, labels = run(model, anchors, args.draws, seed, args.record_every)
            running, _ = scale.heldout_running_lpd(y, y_test, labels)
            gaps = [running[c // args.record_every - 1] - truth_lpd for c in checkpoints]
            summary[anchors]["gaps"].append(gaps)
            summary[anchors]["cpu"].append(cpu)
            rows[anchors] = (gaps, int(np.unique(labels[-1]).size), cpu)
        for anchors in ANCHORS:
            gaps, k, cpu = rows[anchors]
            print(f"| {seed} | {anchors} | " + " | ".join(f"{g:+.4f}" for g in gaps)
                  + f" | {k} | {1000 * cpu:.2f} |")
        sys.stdout.flush()
    print()
    print("| anchors | median gap per t | worst gap per t | median CPU ms/draw |")
    print("|---|---|---|---|")
    for anchors in ANCHORS:
        gaps = np.array(summary[anchors]["gaps"])
        print(f"| {anchors} | " + ", ".join(f"{g:+.4f}" for g in np.median(gaps, 0)) + " | "
              + ", ".join(f"{g:+.4f}" for g in gaps.min(0)) + " | "
              + f"{1000 * np.median(summary[anchors]['cpu']):.2f} |")
    ratio = np.array(summary["cluster"]["cpu"]) / np.array(summary["uniform"]["cpu"])
    print(f"\nCPU per draw, cluster / uniform (paired by seed): median {np.median(ratio):.3f}, "
          f"range {ratio.min():.3f}-{ratio.max():.3f}")


if __name__ == "__main__":
    main()
