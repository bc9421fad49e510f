"""Main job: sample the Jain & Neal (2000) Bernoulli examples and summarise the chains.

Run with ``python -m pymc_splitmerge.demo`` (add ``--help`` for options).  For each of the
paper's three datasets (d = 6, 15, 18 binary attributes, n = 100, five components of 20)
it fits the paper's model (DP with alpha = 1, Beta(1, 1) attributes) from the
all-in-one-cluster start with several step methods, prints an ArviZ summary (R-hat, ESS)
of label-invariant quantities, the agreement with the generating partition, and saves
the diagnostic plots.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from collections.abc import Callable
from typing import NamedTuple

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pymc as pm

import pymc_splitmerge as psm
from pymc_splitmerge.analysis._arviz_compat import get_group
from pymc_splitmerge.comparison import plot_largest_fraction, sample_builtin_mixture

__all__ = ["SAMPLERS", "DemoSampler", "main"]


class DemoSampler(NamedTuple):
    """One row of the demo's comparison.

    ``name`` is used on the command line (``--samplers``) and in plot file names (letters,
    digits, ``_`` and ``-`` only); ``label`` is shown in the tables; ``make_steps(psm, z)``
    returns the ``step=`` list for ``pm.sample`` (it may return steps of PyMC itself).
    """

    name: str
    label: str
    make_steps: Callable


#: The samplers the demo compares, in order.  Append a ``DemoSampler`` to add a row.
SAMPLERS: list[DemoSampler] = [
    DemoSampler("gibbs", "collapsed Gibbs", lambda psm, z: [psm.CollapsedGibbsStep(z)]),
    DemoSampler("sams_gibbs", "SAMS + Gibbs",
                lambda psm, z: [psm.SAMSStep(z, n_gibbs_sweeps=1)]),
    DemoSampler("rgsm_5_1_1", "RGSM(5,1,1)", lambda psm, z: [psm.RGSMStep(z)]),
    DemoSampler("pgsm_gibbs", "PGSM + Gibbs",
                lambda psm, z: [psm.PGSMStep(z, n_gibbs_sweeps=1)]),
    # the "frozen" library (each chain's own tuning history) runs with any number of chains;
    # library="ensemble" is exact from the first draw but needs >= 4 chains in lockstep.  One
    # SAMS update per draw moves the chains out of the one-cluster start, so that the library
    # holds partitions that disagree (without it ARM stays as stuck as Gibbs at d = 18)
    DemoSampler("arm_sams_gibbs", "ARM(frozen library) + SAMS + Gibbs",
                lambda psm, z: [psm.ARMStep(z, library="frozen", n_sams_updates=1,
                                            n_gibbs_sweeps=1)]),
]

#: the data set on which the demo also runs PyMC's built-in samplers (issue: what they get
#: wrong); a truncated stick-breaking mixture with explicit labels, as a PyMC user writes it
BUILTIN_ATTRIBUTES = 18

#: one line per row and column of the tables the demo prints
SUMMARY_LEGEND = """\
How to read the summary tables (one per data set and sampler; label-invariant quantities of
every draw, pooled over chains):
  rows  n_clusters: number of clusters; log_joint: log prior of the partition + log collapsed
        likelihood; fraction_in_largest_clusters[m]: fraction of the 100 points in the m
        largest clusters; co_clustering[i,j]: 1 when points i and j share a cluster (the three
        pairs with co-clustering probability nearest 1/2); distance_to_reference_vi /
        _binder: variation of information / Binder distance of the draw to the point estimate
  cols  mean, sd: over the draws; hdi_3% / hdi_97%: 94% highest-density interval; ess_bulk /
        ess_tail: effective sample sizes (ArviZ); r_hat: rank-normalised split R-hat (near 1
        when the chains agree); iat: integrated autocorrelation time in draws (chain x draw /
        ESS of the mean: the draws one independent draw is worth)"""

COMPARISON_LEGEND = """\
How to read the comparison: one row per data set (d attributes) and sampler.
  seconds: wall time of the sampling run (tuning + draws, all chains, one core); for this
           package's samplers the kernels were compiled (or loaded from the cache) before the
           clock started; for PyMC's built-in samplers it is the whole pm.sample wall time,
           PyTensor's compilation included, run for a fixed time per chain
  r_hat(log_joint), ess_bulk(log_joint): convergence of the log joint (not computed for the
           built-in model, whose log joint is a different function)
  r_hat(largest): R-hat of the fraction of points in the largest cluster
  mean K: posterior mean number of clusters (the data have 5 components)
  ARI(point estimate, truth): adjusted Rand index of the SALSO point estimate against the
           generating partition (1: identical)
ARM(frozen library) + SAMS: the library of the adaptive reconfiguration move is the chain's own
  partitions during tuning, frozen when tuning ends (exact, any number of chains); one SAMS
  update per draw (n_sams_updates=1) moves the chain out of the one-cluster start and puts
  split-merge states in the library: without it a chain that stayed in one mode during tuning
  proposes nothing new and at d = 15 and 18 is as stuck as plain Gibbs.  An ARM move costs
  several Gibbs sweeps: use ARM where chains disagree on large groups of points (see
  docs/benchmarks.md, "Mixing on overlapping data"); otherwise SAMS + Gibbs is cheaper per
  effective draw.  library="ensemble" (the other chains' current states) needs >= 4 chains."""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pymc_splitmerge.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--attributes", type=int, nargs="+", default=[6, 15, 18],
                        help="numbers of binary attributes (the paper's examples: 6 15 18)")
    parser.add_argument("--draws", type=int, default=500)
    # 300: from the all-in-one start at d = 15, 100 tuning draws left ARM's frozen library
    # with a single partition on 2 of 3 chains (no ARM moves, and a warning); 200 suffice
    parser.add_argument("--tune", type=int, default=300)
    parser.add_argument("--chains", type=int, default=3)
    parser.add_argument("--seed", type=int, default=2000)
    parser.add_argument("--samplers", nargs="*", default=None,
                        help="subset of samplers to run (default: all): "
                             + ", ".join(sampler.name for sampler in SAMPLERS))
    parser.add_argument("--builtin-seconds", type=float, default=30.0,
                        help=f"wall-clock seconds per chain for PyMC's built-in samplers on the "
                             f"d = {BUILTIN_ATTRIBUTES} data (0: skip them)")
    parser.add_argument("--output", default="demo_output",
                        help="folder where the plots are saved")
    args = parser.parse_args(argv)

    matplotlib.use("Agg")  # the demo saves its plots to files; never open a window
    warnings.filterwarnings("ignore", category=FutureWarning)
    os.makedirs(args.output, exist_ok=True)
    started = time.perf_counter()
    rows = []
    written: list[tuple[str, str]] = []
    warmed_up: set[str] = set()
    for n_attributes in args.attributes:
        data, truth = psm.datasets.jain_neal_bernoulli(n_attributes=n_attributes, seed=n_attributes)
        with pm.Model() as model:
            z = psm.DirichletProcess("z", alpha=1.0, n=len(data))
            psm.ConjugateMixture("y", partition=z, component=psm.BetaBernoulli(a=1.0, b=1.0),
                                 observed=data)
        samplers = {sampler.name: sampler for sampler in SAMPLERS}
        chosen = args.samplers or list(samplers)
        traces = {}
        for name in chosen:
            if name not in samplers:
                raise SystemExit(f"unknown sampler {name!r}; available: {list(samplers)}")
            sampler = samplers[name]
            if name not in warmed_up:
                # the first use of a kernel compiles it (numba, cached on disk): a two-draw
                # run here keeps that out of the timings below
                print(f"compiling / loading the kernels of {sampler.label} ...", flush=True)
                with model, warnings.catch_warnings():
                    # (a two-draw run has nothing to say: e.g. ARM's frozen library is empty)
                    warnings.simplefilter("ignore")
                    pm.sample(step=sampler.make_steps(psm, z), draws=2, tune=2, chains=1,
                              cores=1, random_seed=args.seed, progressbar=False,
                              compute_convergence_checks=False, quiet=True)
                warmed_up.add(name)
            tic = time.perf_counter()
            with model:
                idata = pm.sample(
                    step=sampler.make_steps(psm, z), draws=args.draws, tune=args.tune,
                    chains=args.chains, cores=1, random_seed=args.seed,
                    initvals={"z": np.zeros(len(data), int)}, progressbar=False,
                    compute_convergence_checks=False, quiet=True,
                )
            seconds = time.perf_counter() - tic
            traces[sampler.label] = idata
            if not rows:
                print("\n" + SUMMARY_LEGEND)
            print(f"\n=== Jain & Neal example, d = {n_attributes}, sampler {sampler.label}: "
                  f"{args.chains} chains x ({args.tune} tuning + {args.draws}) draws in "
                  f"{seconds:.1f} s (wall, kernels compiled before)")
            table = psm.summary(idata, model=model, var_name="z")
            print(table.to_string(max_rows=12))
            estimate = psm.point_estimate(idata, var_name="z", loss="vi", rng=args.seed)
            print(f"point estimate (SALSO, VI loss): {estimate.n_clusters} clusters, expected "
                  f"loss {estimate.expected_loss:.3f}, adjusted Rand index vs the generating "
                  f"partition {psm.adjusted_rand_index(estimate.labels, truth):.3f}")
            plots = {
                "block_fractions": psm.plot_block_fractions(idata, var_name="z", num_largest=5),
                "n_clusters": psm.plot_n_clusters(idata, var_name="z"),
                "coclustering": psm.plot_similarity_matrix(idata, var_name="z",
                                                           order_by=estimate),
            }
            for kind, (figure, _) in plots.items():
                path = os.path.join(args.output, f"{kind}_d{n_attributes}_{name}.png")
                title = f"Jain & Neal Bernoulli data, d = {n_attributes}; {sampler.label}"
                figure.suptitle(f"{title}\n{PLOT_DESCRIPTIONS[kind]}", fontsize=9)
                figure.savefig(path, dpi=80, bbox_inches="tight")
                plt.close(figure)
                written.append((path, f"{title}: {PLOT_DESCRIPTIONS[kind]}"))
            print(f"saved {len(plots)} plots to {args.output}/*_d{n_attributes}_{name}.png")
            rows.append({
                "d": n_attributes, "sampler": sampler.label, "seconds": round(seconds, 1),
                "r_hat(log_joint)": table.loc["log_joint", "r_hat"],
                "ess_bulk(log_joint)": table.loc["log_joint", "ess_bulk"],
                "r_hat(largest)": table.loc["fraction_in_largest_clusters[1]", "r_hat"],
                "mean K": table.loc["n_clusters", "mean"],
                "ARI(point estimate, truth)": psm.adjusted_rand_index(estimate.labels, truth),
            })
        if n_attributes == BUILTIN_ATTRIBUTES and args.builtin_seconds > 0:
            rows.append(_builtin_row(args, data, truth, traces, written))
    print("\n=== comparison (R-hat near 1 and large ESS mean the chains agree)")
    print(COMPARISON_LEGEND)
    print(pd.DataFrame(rows).round(3).to_string(index=False))
    index = write_index(args.output, written)
    print(f"\n{len(written)} figures in {args.output}/, listed in {index}")
    print(f"total {time.perf_counter() - started:.1f} s")
    return 0


#: what each figure file shows (its title says the data set and the sampler)
PLOT_DESCRIPTIONS = {
    "block_fractions": "fraction of the points in the 1..5 largest clusters per draw, one "
                       "panel per chain",
    "n_clusters": "number of clusters per draw, per chain",
    "coclustering": "posterior co-clustering probabilities, points ordered by the point "
                    "estimate",
    "largest_fraction": "fraction in the largest cluster per chain, every sampler side by "
                        "side (PyMC's built-in samplers included)",
}


def write_index(folder: str, written) -> str:
    """Write ``INDEX.md`` in ``folder``: one line per figure file written, what it shows."""
    path = os.path.join(folder, "INDEX.md")
    with open(path, "w") as index:
        index.write("# Figures written by `python -m pymc_splitmerge.demo`\n\n")
        index.write("File names: `<plot>_d<attributes>_<sampler>.png`.\n\n")
        index.writelines(f"- `{os.path.basename(figure_path)}`: {description}\n"
                         for figure_path, description in written)
    return path


def _builtin_row(args, data, truth, traces, written) -> dict:
    """Run PyMC's own samplers on a truncated stick-breaking mixture of the same data.

    Prints its summary, saves the largest-cluster fraction per chain beside this package's
    samplers, and returns the comparison row.  Judged by the same analysis code: the labels
    PyMC samples are canonicalised.
    """
    label = "PyMC built-in (K=20)"
    print(f"\n=== d = {BUILTIN_ATTRIBUTES}: PyMC's built-in samplers on a truncated "
          f"stick-breaking mixture (K = 20, explicit labels), {args.builtin_seconds:g} s per "
          "chain ...", flush=True)
    tic = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        builtin = sample_builtin_mixture(
            data, psm.BetaBernoulli(a=1.0, b=1.0), n_components=20, alpha=1.0,
            weights="stick_breaking", labels="explicit", draws=args.draws,
            tune=min(args.tune, 25),  # CategoricalGibbsMetropolis is slow: keep draws for us
            chains=args.chains, random_seed=args.seed, seconds_per_chain=args.builtin_seconds,
            quiet=True)
    seconds = time.perf_counter() - tic
    assignment = get_group(builtin, "posterior").attrs.get("step_assignment", "")
    print(f"pm.sample assigned: {assignment}; {seconds:.1f} s (wall, PyTensor's compilation "
          "included)")
    table = psm.summary(builtin, var_name="z")
    print(table.to_string(max_rows=12))
    estimate = psm.point_estimate(builtin, var_name="z", loss="vi", rng=args.seed)
    figure, _ = plot_largest_fraction({**traces, label: builtin})
    path = os.path.join(args.output, f"largest_fraction_d{BUILTIN_ATTRIBUTES}_builtin.png")
    title = (f"Jain & Neal Bernoulli data, d = {BUILTIN_ATTRIBUTES}; every sampler and "
             f"{label}")
    figure.suptitle(f"{title}\n{PLOT_DESCRIPTIONS['largest_fraction']}", fontsize=9)
    figure.savefig(path, dpi=80, bbox_inches="tight")
    plt.close(figure)
    written.append((path, f"{title}: {PLOT_DESCRIPTIONS['largest_fraction']}"))
    print(f"saved {path}")
    return {
        "d": BUILTIN_ATTRIBUTES, "sampler": label, "seconds": round(seconds, 1),
        "r_hat(log_joint)": float("nan"), "ess_bulk(log_joint)": float("nan"),
        "r_hat(largest)": table.loc["fraction_in_largest_clusters[1]", "r_hat"],
        "mean K": table.loc["n_clusters", "mean"],
        "ARI(point estimate, truth)": psm.adjusted_rand_index(estimate.labels, truth),
    }


if __name__ == "__main__":
    raise SystemExit(main())
