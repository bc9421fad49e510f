"""Quality and cost of ``psm.splitmerge_start`` on equal and unequal clusters (issue 13 item 3).

Data (n = 20,000 by default, 1,000 held-out points, DP(alpha = 1) + NIW as in
``benchmarks/scale.py``):

* ``equal``: ``scale.make_data(n, 2)``, 20 unit Gaussians 20 apart on a circle, weights 1..2;
* ``unequal``: 15 unit Gaussians on a widening spiral (neighbours >= ~5 apart), weights
  proportional to 0.75^k (26 % down to 0.5 % of the points);
* ``10-D``: ``scale.make_data(n, 10)``, 20 unit Gaussians at random in a 10-D box.

For seeds 0..9: CPU seconds of ``psm.splitmerge_start(model, random_seed=seed)`` (after one
warm-up call) and the held-out log predictive density per point of its labels minus that of
the true labels (``scale.heldout_running_lpd`` of one partition; the true partition stands in
for the posterior here: a long SAMS+Gibbs run from a good start agrees with it to 0.0001 on
``unequal``).  "within 0.01": seeds whose start is within 0.01 nats/point of the truth, the
tolerance of the time-to-answer table.

Run: ``python benchmarks/start_quality.py`` (this tree), and for a before/after comparison
the same script with ``PYTHONPATH`` pointing at another tree (e.g. ``git archive`` of an
older commit): the script only calls ``psm.splitmerge_start``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from blas_threads import limit_blas_threads

# BLAS single-threaded before numpy loads (as benchmarks/scale.py's spawned processes): idle
# OpenBLAS threads spin after the held-out densities and that spinning would count in the
# next start's CPU time
limit_blas_threads()

import numpy as np
import scale


def unequal_data(n, seed=5, n_components=15):
    """15 unit Gaussians on a widening spiral, weights proportional to 0.75^k."""
    rng = np.random.default_rng(seed)
    weights = 0.75 ** np.arange(n_components)
    weights /= weights.sum()
    angles = np.linspace(0, 2 * np.pi, n_components, endpoint=False)
    radii = 12.0 * np.linspace(1.0, 2.5, n_components)
    centres = radii[:, None] * np.stack([np.cos(angles), np.sin(angles)], axis=1)
    truth = rng.choice(n_components, size=n + scale.N_TEST, p=weights)
    points = centres[truth] + rng.normal(size=(n + scale.N_TEST, 2))
    return points[:n], points[n:], truth[:n]


def datasets(n):
    return {"equal": lambda: scale.make_data(n, 2), "unequal": lambda: unequal_data(n),
            "10-D": lambda: scale.make_data(n, 10)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args()
    import pymc_splitmerge as psm

    print(f"# {os.path.dirname(psm.__file__)}  (n = {args.n:,}, seeds 0..{args.seeds - 1})\n")
    print("| data | start CPU s (median) | start lpd - truth lpd: worst | within 0.01 | "
          "clusters K |")
    print("|---|---|---|---|---|")
    for name, make in datasets(args.n).items():
        y, y_test, truth = make()
        model = scale.build_model(y)
        truth_lpd = scale.heldout_running_lpd(y, y_test, [truth])[0][-1]
        psm.splitmerge_start(model, random_seed=args.seeds)  # warm-up (numba cache loads)
        times, gaps, ks = [], [], []
        for seed in range(args.seeds):
            tic = time.process_time()
            labels = psm.splitmerge_start(model, random_seed=seed)["z"]
            times.append(time.process_time() - tic)
            gaps.append(scale.heldout_running_lpd(y, y_test, [labels])[0][-1] - truth_lpd)
            ks.append(int(labels.max()) + 1)
        within = sum(abs(g) <= scale.TOLERANCE for g in gaps)
        print(f"| {name} | {np.median(times):.3f} | {min(gaps):+.3f} | {within}/{args.seeds} | "
              f"{min(ks)}-{max(ks)} (true {int(truth.max()) + 1}) |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
