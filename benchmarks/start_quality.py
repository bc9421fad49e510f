"""Quality and cost of ``psm.splitmerge_start`` on equal and unequal clusters.

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

Options: ``--subsample-size``, ``--split-merge-moves``, ``--gibbs-draws`` (the start's
schedule; default: the function's defaults), ``--first-seed``, ``--data`` (a comma list of
``equal,unequal,10-D``), ``--then-draws K`` (score the labels after K updates of SAMS + one
Gibbs sweep of all points from the start, what ``pm.sample``'s first draws of the default step
do; their CPU time counts, with one ``model.initial_point()`` compilation).

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


def _draws(model, labels, draws, seed):
    """``draws`` SAMS + one Gibbs sweep updates of all points from ``labels`` (the kernel
    ``SAMSStep(z, n_gibbs_sweeps=1)`` runs), with the model's prior and family."""
    from pymc_splitmerge.distributions import discover
    from pymc_splitmerge.kernels.sams import build_sams_move
    from pymc_splitmerge.kernels.splitmerge_common import build_moves_then_gibbs
    from pymc_splitmerge.kernels.state import PartitionState, PriorTables

    partition_model = discover(model["z"], model)
    point = model.initial_point()
    prior = partition_model.numeric_prior(point)
    state = PartitionState(partition_model.numeric_family(point), partition_model.data,
                           labels.astype(np.int64))
    tables = PriorTables(*prior.tables(len(labels)))
    update = build_moves_then_gibbs(build_sams_move(), n_moves=1, n_gibbs_sweeps=1)
    rng = np.random.default_rng(seed)
    for _ in range(draws):
        update(state.model, state.partition, tables, rng)
    return state.slot_labels


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--subsample-size", type=int, default=None)
    parser.add_argument("--split-merge-moves", type=int, default=None)
    parser.add_argument("--gibbs-draws", type=int, default=None)
    parser.add_argument("--data", default="equal,unequal,10-D")
    parser.add_argument("--then-draws", type=int, default=0,
                        help="also score the labels after this many SAMS + Gibbs sweep "
                             "updates of all points from the start (what pm.sample's first "
                             "draws do), CPU time included")
    args = parser.parse_args()
    import pymc_splitmerge as psm

    options = {key: value for key, value in (("subsample_size", args.subsample_size),
                                             ("split_merge_moves", args.split_merge_moves),
                                             ("gibbs_draws", args.gibbs_draws))
               if value is not None}
    seeds = range(args.first_seed, args.first_seed + args.seeds)

    print(f"# {os.path.dirname(psm.__file__)}  (n = {args.n:,}, seeds {seeds[0]}..{seeds[-1]}, "
          f"options {options or 'default'}, then {args.then_draws} SAMS + Gibbs draws)\n")
    print("| data | start CPU s (median) | start lpd - truth lpd: worst | within 0.01 | "
          "clusters K |")
    print("|---|---|---|---|---|")
    wanted = args.data.split(",")
    for name, make in datasets(args.n).items():
        if name not in wanted:
            continue
        y, y_test, truth = make()
        model = scale.build_model(y)
        truth_lpd = scale.heldout_running_lpd(y, y_test, [truth])[0][-1]
        psm.splitmerge_start(model, random_seed=seeds[-1] + 1, **options)  # warm-up (numba cache)
        times, gaps, ks = [], [], []
        for seed in seeds:
            tic = time.process_time()
            labels = psm.splitmerge_start(model, random_seed=seed, **options)["z"]
            if args.then_draws:
                labels = _draws(model, labels, args.then_draws, seed)
            times.append(time.process_time() - tic)
            gaps.append(scale.heldout_running_lpd(y, y_test, [labels])[0][-1] - truth_lpd)
            ks.append(int(labels.max()) + 1)
        within = sum(abs(g) <= scale.TOLERANCE for g in gaps)
        print(f"| {name} | {np.median(times):.3f} | {min(gaps):+.3f} | {within}/{len(seeds)} | "
              f"{min(ks)}-{max(ks)} (true {int(truth.max()) + 1}) |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
