r"""This package against PyMC's built-in samplers (and scikit-learn) on the same mixtures.

Run ``python benchmarks/builtin_samplers.py`` (fast default: Jain & Neal d = 18 only, 4 chains
of a few seconds each, a few minutes in all) or ``--full`` (60 s per
chain, every problem below; about two hours per problem set on two cores).

Problems (training data, held-out data, the package's model):

* ``jn15``, ``jn18``: Jain & Neal (2000) binary data, n = 100, d = 15 / 18
  (``datasets.jain_neal_bernoulli(d, seed=0)``, as in ``benchmarks/mixing.py``), 200 held-out rows from the
  same generator; DP(alpha = 1) partition prior, Beta(1, 1) attributes;
* ``jn18_fd10``: the d = 18 data with a finite symmetric Dirichlet(1, ..., 1) mixture of k = 10
  components, which this package (``FiniteDirichlet(alpha=1, k=10)``) and PyMC
  (``Dirichlet`` weights + ``Categorical`` labels) both express *exactly*;
* ``blobs2k``, ``blobs20k``: 2-D Gaussian blobs (6 components on a grid of spacing 5, unit
  covariance; ``datasets.gaussian_blobs``) with n_train = 2,000 / 20,000 and 1,000 held-out
  points; DP(1) prior, ``NormalKnownCovariance(mu0=mean, sigma0=25 I, sigma=I)`` (a model
  PyMC expresses up to the truncation).

Contenders (``--contenders`` selects by name):

* this package: ``gibbs`` (collapsed Gibbs), ``sams+gibbs``, ``pgsm+gibbs`` and ``arm+gibbs``
  (``psm.ARMStep`` with its frozen library);
* PyMC explicit labels (``pymc_splitmerge.comparison.builtin_mixture_model``): ``labels_sb10``,
  ``labels_sb20`` (truncated stick-breaking K = 10, 20), ``labels_dir10`` (Dirichlet weights,
  finite-Dirichlet problem only), sampled with whatever ``pm.sample`` assigns (printed);
* PyMC labels marginalised (logsumexp potential), NUTS: ``marginal_sb20``,
  ``marginal_dir10`` (finite-Dirichlet problem only);
* scikit-learn ``BayesianGaussianMixture`` (Dirichlet-process weights, 20 components, full
  covariances; Gaussian problems only): ``sklearn_bgm``, one variational fit per "chain".

Every MCMC contender runs through ``pm.sample`` (``cores=1``, chains in sequence, the package's
samplers from the all-in-one-cluster start) with the same wall-clock budget per chain
(``comparison.WallClockBudget``; a pilot run compiles the model and sets the draw cap and
``tune = min(1000, a quarter of the draws the budget allows)``).  The partition of each draw is the
sampled labels (canonicalised) or, for marginalised models, labels drawn from
``p(z | weights, theta, y)``; everything below is computed from those with this package's
analysis functions:

* ``K``: posterior mean of the number of clusters; ``TV(K)``: total-variation distance of
  the pooled posterior of K to the reference run's;
* ``largest``: posterior mean of the largest-cluster fraction (reference in the header) and
  ``chain means`` of it;
* ``R-hat`` (rank-normalised split R-hat) of K and of the largest fraction, ``ESS`` (bulk) of
  the largest fraction and ``ESS/s`` (per second of total sampling time, tuning included);
* ``lpd``: held-out log predictive density per point, ``log mean_draws p(y*_j | draw)``
  averaged over j (our samplers: the partition's predictive, ``partition_log_predictive``;
  PyMC: ``sum_k weights_k F(y* | theta_k)``; sklearn: ``score_samples``), and ``t(lpd)``:
  median over chains of the time after which the chain's running lpd stays within 0.01
  nats/point of the reference's (``never`` if it does not by the end of the budget);
* ``ARI``: adjusted Rand index of the SALSO VI point estimate (at most 1,000 draws; at most
  2,000 observations, a fixed random subset, for the large problem) to the generating labels.

The reference is a long SAMS+Gibbs run (``--reference-seconds`` per chain, 4 chains).
Explicit-label PyMC models whose single draw would take longer than half the budget
(``CategoricalGibbsMetropolis`` evaluates the full model log density n * K times per draw)
are reported as not run, with the estimated seconds per draw.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pymc_splitmerge as psm
from pymc_splitmerge import comparison
from pymc_splitmerge.analysis import _arviz_compat as compat

LPD_TOLERANCE = 0.01
LABEL_BYTES_PER_CHAIN = 80e6  # memory cap for the stored labels of one chain
MAX_DRAWS_PER_CHAIN = 20000
MAX_TUNE = 1000


# ---------------------------------------------------------------------------------------------
# problems


def make_problem(name: str, data_seed: int = 0) -> dict:
    """Training data, held-out data, truth and the package's model ingredients of a problem.

    ``data_seed`` seeds the Jain & Neal data (0, as in ``benchmarks/mixing.py``).
    """
    if name in ("jn15", "jn18", "jn18_fd10"):
        d = 15 if name == "jn15" else 18
        data, truth = psm.datasets.jain_neal_bernoulli(n_attributes=d, seed=data_seed)
        test, _ = psm.datasets.jain_neal_bernoulli(n_attributes=d, n_per_component=40,
                                                   seed=1000 + d)
        family = psm.BetaBernoulli(a=1.0, b=1.0)
    elif name in ("blobs2k", "blobs20k"):
        n_train = 2000 if name == "blobs2k" else 20000
        every, labels = psm.datasets.gaussian_blobs(n=n_train + 1000, n_components=6, dim=2,
                                                    separation=5.0, seed=n_train)
        data, truth, test = every[:n_train], labels[:n_train], every[n_train:]
        family = psm.NormalKnownCovariance(mu0=data.mean(axis=0), sigma0=25.0 * np.eye(2),
                                           sigma=np.eye(2))
    else:
        raise SystemExit(f"unknown problem {name!r}; choose from {PROBLEMS}")
    prior = ("finite_dirichlet", 1.0, 10) if name == "jn18_fd10" else ("dirichlet_process", 1.0)
    return {"name": name, "data": data, "test": test, "truth": truth, "family": family,
            "prior": prior, "gaussian": name.startswith("blobs")}


PROBLEMS = ("jn15", "jn18", "jn18_fd10", "blobs2k", "blobs20k")


def package_model(problem: dict):
    """The package's model of a problem (partition variable ``z``)."""
    import pymc as pm

    data = problem["data"]
    with pm.Model() as model:
        if problem["prior"][0] == "finite_dirichlet":
            z = psm.FiniteDirichlet("z", alpha=problem["prior"][1], k=problem["prior"][2],
                                    n=len(data))
        else:
            z = psm.DirichletProcess("z", alpha=problem["prior"][1], n=len(data))
        psm.ConjugateMixture("y", partition=z, component=problem["family"], observed=data)
    return model


def package_steps(model) -> dict:
    """The package's contenders: name -> function returning the step list."""
    z = model["z"]
    steps = {
        "gibbs": lambda: [psm.CollapsedGibbsStep(z)],
        "sams+gibbs": lambda: [psm.SAMSStep(z, n_gibbs_sweeps=1)],
        "pgsm+gibbs": lambda: [psm.PGSMStep(z, n_gibbs_sweeps=1)],
    }
    # ARM: every chain here is its own pm.sample(chains=1) call (sample_with_budget), so the
    # population ("ensemble") library cannot run; the frozen library (each chain's own tuning
    # history) is exact after tuning
    steps["arm+gibbs"] = lambda: [psm.ARMStep(z, library="frozen", n_gibbs_sweeps=1)]
    return steps


def builtin_contenders(problem: dict) -> dict:
    """PyMC built-in contenders of a problem: name -> keyword arguments of the model."""
    if problem["prior"][0] == "finite_dirichlet":
        k = problem["prior"][2]
        return {
            f"labels_dir{k}": {"n_components": k, "weights": "dirichlet", "labels": "explicit"},
            f"marginal_dir{k}": {"n_components": k, "weights": "dirichlet",
                                 "labels": "marginal"},
        }
    return {
        "labels_sb10": {"n_components": 10, "weights": "stick_breaking", "labels": "explicit"},
        "labels_sb20": {"n_components": 20, "weights": "stick_breaking", "labels": "explicit"},
        "marginal_sb20": {"n_components": 20, "weights": "stick_breaking",
                          "labels": "marginal"},
    }


# ---------------------------------------------------------------------------------------------
# running one MCMC contender


def run_mcmc(model, steps, *, seconds, chains, seed, initvals=None):
    """Pilot (compiles, times a draw), then ``chains`` chains of ``seconds`` each.

    Returns a dict with the trace, per-chain draw times, tune, total seconds, or ``error``.
    """
    import pymc as pm

    n = sum(int(np.prod(v.type.shape)) for v in model.free_RVs
            if v.type.dtype.startswith("int"))
    pilot = comparison.WallClockBudget(max(0.25 * seconds, 0.5))
    try:
        with model:
            pm.sample(draws=15, tune=15, chains=1, cores=1, step=steps() if steps else None,
                      random_seed=seed + 7919, initvals=initvals, progressbar=False,
                      compute_convergence_checks=False, callback=pilot)
    except ValueError:  # stopped while tuning: the times are what the pilot is for
        pass
    times = pilot.chain_times()[0]
    per_draw = max(float(times[-1]) / times.size, 1e-6)
    possible = seconds / per_draw
    memory_cap = int(LABEL_BYTES_PER_CHAIN / (8 * max(n, 1))) if n else MAX_DRAWS_PER_CHAIN
    tune = int(min(MAX_TUNE, max(10, 0.25 * possible)))
    draws = int(max(10, min(MAX_DRAWS_PER_CHAIN, memory_cap, 2 * possible + 20)))
    tic = time.perf_counter()
    while True:
        idata, times, failed = comparison.sample_with_budget(
            model, seconds=seconds, chains=chains, draws=draws, tune=tune, step=steps,
            random_seed=seed, initvals=initvals)
        if idata is not None or tune <= 10 or steps is None:
            break
        tune = max(10, tune // 10)  # the pilot was optimistic (a busy machine): burn in less
    # sampling seconds: the chains' own clocks (pm.sample's set-up and compilation excluded)
    sampling = float(sum(t[-1] for t in times if t.size)) + float(np.nansum(failed))
    if idata is None:
        return {"error": f"no draw after {tune} tuning iterations within the budget",
                "tune": tune, "seconds": sampling}
    return {"idata": idata, "times": dict(enumerate(times)), "tune": tune,
            "draw_cap": draws, "seconds": sampling, "failed_chains": len(failed),
            "wall_seconds": time.perf_counter() - tic, "per_draw_pilot": per_draw}


def explicit_draw_seconds(model) -> float:
    """Estimated seconds of one CategoricalGibbsMetropolis sweep: n * K model log densities."""
    logp = model.compile_logp()
    point = model.initial_point()
    logp(point)
    tic = time.perf_counter()
    for _ in range(5):
        logp(point)
    once = (time.perf_counter() - tic) / 5
    z = model["z"]
    n = int(z.type.shape[0])
    k = int(model["weights"].type.shape[0])
    return once * n * k


# ---------------------------------------------------------------------------------------------
# metrics


def _chain_draw_indices(n_draws: int, count: int) -> np.ndarray:
    return np.unique(np.linspace(0, n_draws - 1, min(count, n_draws)).astype(np.int64))


def package_log_predictive_draws(idata, model, test, rows):
    """log p(y*_j | c, y) for the draws ``rows`` of every chain: shape (chain, rows, m)."""
    from pymc_splitmerge.analysis.predictive import partition_log_predictive
    from pymc_splitmerge.distributions import discover

    labels = np.asarray(compat.posterior_with_labels(idata)["z"].transpose(
        "chain", "draw", ...).values)
    partition_model = discover(model["z"], model)
    family = partition_model.numeric_family({})
    prior = partition_model.numeric_prior({})
    x = partition_model.data
    x_new = family.prepare_data(np.asarray(test))
    out = np.empty((labels.shape[0], rows.size, x_new.shape[0]))
    for c in range(labels.shape[0]):
        for r, d in enumerate(rows):
            out[c, r] = partition_log_predictive(prior, family, x, labels[c, d], x_new)
    return out


def _log_mean_exp(values, axis):
    top = values.max(axis=axis, keepdims=True)
    return np.squeeze(top, axis) + np.log(np.mean(np.exp(values - top), axis=axis))


def lpd_metrics(log_pred, rows, times, tune, reference_lpd):
    """Pooled lpd per point and the median time to stay within tolerance of the reference."""
    pooled = float(_log_mean_exp(log_pred.reshape(-1, log_pred.shape[-1]), 0).mean())
    if reference_lpd is None:
        return pooled, np.nan
    reach = []
    for c in range(log_pred.shape[0]):
        running = np.array([_log_mean_exp(log_pred[c, :i + 1], 0).mean()
                            for i in range(rows.size)])
        close = np.abs(running - reference_lpd) <= LPD_TOLERANCE
        if not close[-1]:
            reach.append(np.inf)
            continue
        last_far = np.flatnonzero(~close)
        first = 0 if last_far.size == 0 else last_far[-1] + 1
        chain_times = times.get(c, times[min(times)])
        reach.append(float(chain_times[min(tune + rows[first], chain_times.size - 1)]))
    return pooled, float(np.median(reach))


def partition_metrics(labels, truth, reference, rng, seconds):
    """Label-invariant metrics of canonical labels (chain, draw, n), with this package's code."""
    table = psm.summary(labels, num_largest=1, num_pairs=0, reference=None)
    k = labels.max(axis=-1) + 1
    largest = psm.analysis.block_fractions(labels, 1)[..., 0]
    row = {
        "K": k.mean(),
        "largest": largest.mean(),
        "chain means": " ".join(f"{m:.3f}" for m in largest.mean(axis=1)),
        "R-hat K": table.loc["n_clusters", "r_hat"],
        "R-hat largest": table.loc["fraction_in_largest_clusters[1]", "r_hat"],
        "ESS largest": table.loc["fraction_in_largest_clusters[1]", "ess_bulk"],
    }
    row["ESS/s"] = row["ESS largest"] / seconds
    if reference is not None:
        values = np.arange(max(k.max(), reference["k_values"].max()) + 1)
        mine = np.bincount(k.ravel(), minlength=values.size) / k.size
        theirs = np.bincount(reference["k_values"].ravel(), minlength=values.size)
        row["TV(K)"] = 0.5 * np.abs(mine - theirs / theirs.sum()).sum()
    flat = labels.reshape(-1, labels.shape[-1])
    flat = flat[_chain_draw_indices(flat.shape[0], 1000)]
    columns = np.arange(flat.shape[1])
    if flat.shape[1] > 2000:
        columns = np.sort(rng.choice(flat.shape[1], 2000, replace=False))
    estimate = psm.point_estimate(flat[:, columns], loss="vi", rng=rng)
    row["ARI"] = psm.adjusted_rand_index(estimate.labels, np.asarray(truth)[columns])
    return row


# ---------------------------------------------------------------------------------------------
# contenders


def run_package(problem, model, name, make_steps, args, reference=None):
    n = len(problem["data"])
    result = run_mcmc(model, make_steps, seconds=args.seconds_for(name), chains=args.chains,
                      seed=args.seed, initvals={"z": np.zeros(n, dtype=np.int64)})
    return finish_mcmc(problem, name, result, args, reference,
                       lambda idata, rows: package_log_predictive_draws(
                           idata, model, problem["test"], rows))


def run_builtin(problem, name, options, args, reference):
    model = comparison.builtin_mixture_model(problem["data"], problem["family"],
                                             alpha=problem["prior"][1], **options)
    assignment = "; ".join(comparison.describe_step_assignment(model))
    print(f"  {name}: pm.sample assigns {assignment}", flush=True)
    seconds = args.seconds_for(name)
    if options["labels"] == "explicit":
        per_draw = explicit_draw_seconds(model)
        if per_draw > 0.5 * seconds:
            return {"contender": name, "assigned": assignment,
                    "note": f"not run: one draw ~{per_draw:.0f} s "
                    f"(n*K model log densities) vs budget {seconds:.0f} s"}
    result = run_mcmc(model, None, seconds=seconds, chains=args.chains, seed=args.seed)
    if "idata" in result:
        idata = result["idata"]
        if options["labels"] == "marginal":
            comparison.replace_labels(idata, comparison.labels_from_parameters(
                idata, problem["data"], problem["family"], rng=args.seed))
        # explicit labels: the raw Categorical component indices are read as they are (the
        # analysis functions canonicalise them)
    row = finish_mcmc(problem, name, result, args, reference,
                      lambda idata, rows: comparison.log_predictive_draws(
                          idata, problem["family"], problem["test"])[:, rows])
    row["assigned"] = assignment
    return row


def finish_mcmc(problem, name, result, args, reference, log_pred_of):
    row = {"contender": name, "seconds": result["seconds"] / args.chains}
    if result.get("failed_chains"):
        row["note"] = f"{result['failed_chains']} chain(s) still tuning at the end of the budget"
    if "error" in result:
        row["note"] = result["error"]
        return row
    idata = result["idata"]
    from pymc_splitmerge.analysis._labels import partition_draws

    labels, _ = partition_draws(idata, "z")
    row["chains"] = labels.shape[0]
    row["draws"] = labels.shape[1]
    row["tune"] = result["tune"]
    rng = np.random.default_rng(args.seed)
    row.update(partition_metrics(labels, problem["truth"], reference, rng, result["seconds"]))
    rows = _chain_draw_indices(labels.shape[1], args.lpd_draws)
    log_pred = log_pred_of(idata, rows)
    row["lpd"], row["t(lpd)"] = lpd_metrics(
        log_pred, rows, result["times"], result["tune"],
        None if reference is None else reference["lpd"])
    row["_labels"] = labels
    row["_times"] = [result["times"].get(c, result["times"][min(result["times"])])
                     [result["tune"]:result["tune"] + labels.shape[1]]
                     for c in range(labels.shape[0])]
    return row


def run_sklearn(problem, args, reference):
    from sklearn.mixture import BayesianGaussianMixture

    fits, seconds = [], []
    for chain in range(args.chains):
        model = BayesianGaussianMixture(
            n_components=20, weight_concentration_prior_type="dirichlet_process",
            weight_concentration_prior=problem["prior"][1], covariance_type="full",
            max_iter=1000, random_state=args.seed + chain)
        tic = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(problem["data"])
        seconds.append(time.perf_counter() - tic)
        fits.append(model)
    labels = np.stack([psm.analysis.canonicalize(m.predict(problem["data"])) for m in fits])
    k = labels.max(axis=-1) + 1
    largest = psm.analysis.block_fractions(labels[:, None], 1)[:, 0, 0]
    lpds = np.array([m.score_samples(problem["test"]).mean() for m in fits])
    row = {"contender": "sklearn_bgm", "seconds": float(np.mean(seconds)),
           "chains": args.chains, "draws": 1,
           "K": k.mean(), "largest": largest.mean(),
           "chain means": " ".join(f"{v:.3f}" for v in largest),
           "ARI": float(np.mean([psm.adjusted_rand_index(lab, problem["truth"])
                                 for lab in labels])),
           "lpd": float(lpds.mean()), "note": "variational point fit, one per chain"}
    if reference is not None:
        close = np.abs(lpds - reference["lpd"]) <= LPD_TOLERANCE
        row["t(lpd)"] = float(np.median(np.where(close, seconds, np.inf)))
    return row


def reference_run(problem, model, args):
    steps = package_steps(model)["sams+gibbs"]
    result = run_mcmc(model, steps, seconds=args.reference_seconds, chains=args.chains,
                      seed=args.seed + 1, initvals={"z": np.zeros(len(problem["data"]),
                                                                 dtype=np.int64)})
    if "idata" not in result:
        raise RuntimeError(f"the reference run failed: {result['error']}; raise "
                           "--reference-seconds")
    labels, _ = psm.analysis.partition_draws(result["idata"], "z")
    rows = _chain_draw_indices(labels.shape[1], 4 * args.lpd_draws)
    log_pred = package_log_predictive_draws(result["idata"], model, problem["test"], rows)
    lpd = float(_log_mean_exp(log_pred.reshape(-1, log_pred.shape[-1]), 0).mean())
    k = labels.max(axis=-1) + 1
    largest = psm.analysis.block_fractions(labels, 1)[..., 0]
    return {"k_values": k, "largest": float(largest.mean()), "lpd": lpd,
            "draws": labels.shape[1], "seconds": result["seconds"] / args.chains,
            "k_mean": float(k.mean())}


# ---------------------------------------------------------------------------------------------
# output

COLUMNS = ["contender", "seconds", "chains", "draws", "K", "TV(K)", "largest", "chain means", "R-hat K",
           "R-hat largest", "ESS largest", "ESS/s", "lpd", "t(lpd)", "ARI", "note"]


def _format(value):
    if isinstance(value, str):
        return value
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "–"
    if isinstance(value, float) and np.isinf(value):
        return "never"
    if isinstance(value, (int, np.integer)):
        return f"{value:,}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"


def markdown_table(rows) -> str:
    present = [c for c in COLUMNS if any(c in r for r in rows)]
    lines = ["| " + " | ".join(present) + " |", "|" + "---|" * len(present)]
    for row in rows:
        lines.append("| " + " | ".join(_format(row.get(c, "")) if c in row else ""
                                      for c in present) + " |")
    return "\n".join(lines)


def plot_largest_fraction(rows, reference, path, title):
    """Largest-cluster fraction per chain for every MCMC contender, one panel each."""
    import matplotlib.pyplot as plt

    panels = [r for r in rows if "_labels" in r]
    columns = min(3, len(panels))
    lines = int(np.ceil(len(panels) / columns))
    figure, axes = plt.subplots(lines, columns, figsize=(4.2 * columns, 2.6 * lines),
                                sharey=True, squeeze=False)
    for axis, row in zip(axes.ravel(), panels):
        largest = psm.analysis.block_fractions(row["_labels"], 1)[..., 0]
        for chain, values in enumerate(largest):
            seconds = np.asarray(row["_times"][chain])
            axis.plot(seconds[:values.size], values[:seconds.size], lw=0.7, alpha=0.8,
                      drawstyle="steps-post", label=f"chain {chain}")
        axis.axhline(reference["largest"], color="k", ls="--", lw=1,
                     label=f"reference {reference['largest']:.3f}")
        axis.set_title(f"{row['contender']} (R-hat {row['R-hat largest']:.2f})", fontsize=9)
        axis.set_xlabel("seconds since the chain started (draws after tuning)", fontsize=8)
        axis.tick_params(labelsize=7)
    for axis in axes.ravel()[len(panels):]:
        axis.set_visible(False)
    axes[0, 0].set_ylabel("largest-cluster fraction", fontsize=8)
    axes[0, 0].legend(fontsize=6, loc="upper right")
    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)


# ---------------------------------------------------------------------------------------------


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true",
                        help="every problem, 60 s per chain, 300 s "
                        "reference chains")
    parser.add_argument("--problems", nargs="+", default=None, choices=PROBLEMS)
    parser.add_argument("--contenders", nargs="+", default=None,
                        help="subset of contender names (default: all that apply)")
    parser.add_argument("--seconds", type=float, default=None,
                        help="wall-clock budget per chain (default 4, --full 60)")
    parser.add_argument("--reference-seconds", type=float, default=None,
                        help="per chain of the reference run (default 10, --full 300)")
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--lpd-draws", type=int, default=60,
                        help="draws per chain at which the held-out density is evaluated")
    parser.add_argument("--seed", type=int, default=2000)
    parser.add_argument("--data-seed", type=int, default=0,
                        help="seed of the Jain & Neal data (0 as in benchmarks/mixing.py)")
    parser.add_argument("--plot-dir", default="docs",
                        help="folder of the per-chain largest-fraction plots ('' for none)")
    args = parser.parse_args(argv)
    problems = args.problems or (list(PROBLEMS) if args.full else ["jn18"])
    seconds = args.seconds or (60.0 if args.full else 4.0)
    args.reference_seconds = args.reference_seconds or (300.0 if args.full else 10.0)
    args.seconds_for = lambda name: seconds

    import logging

    import matplotlib

    matplotlib.use("Agg")
    logging.getLogger("pymc").setLevel(logging.ERROR)
    logging.getLogger("arviz").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")
    started = time.perf_counter()
    print(f"budget {seconds:g} s per chain, {args.chains} chains; reference SAMS+Gibbs "
          f"{args.reference_seconds:g} s per chain", flush=True)
    for problem_name in problems:
        problem = make_problem(problem_name, args.data_seed)
        model = package_model(problem)
        print(f"\n=== {problem_name}: n = {len(problem['data'])}, held-out "
              f"{len(problem['test'])}, prior {problem['prior']}, "
              f"{type(problem['family']).__name__}", flush=True)
        reference = reference_run(problem, model, args)
        print(f"reference: {reference['draws']} draws per chain, mean K "
              f"{reference['k_mean']:.3f}, largest fraction {reference['largest']:.3f}, lpd "
              f"{reference['lpd']:.4f} nats/point", flush=True)
        rows = []
        wanted = (lambda name: args.contenders is None or name in args.contenders)
        for name, steps in package_steps(model).items():
            if wanted(name):
                rows.append(run_package(problem, model, name, steps, args, reference))
                print(f"  {name}: done ({rows[-1]['seconds']:.1f} s per chain)", flush=True)
        for name, options in builtin_contenders(problem).items():
            if wanted(name):
                rows.append(run_builtin(problem, name, options, args, reference))
                print(f"  {name}: done", flush=True)
        if problem["gaussian"] and wanted("sklearn_bgm"):
            rows.append(run_sklearn(problem, args, reference))
        print(f"\nreference (SAMS+Gibbs, {args.chains} x {reference['draws']} draws): mean K "
              f"{reference['k_mean']:.3f}, largest {reference['largest']:.3f}, lpd "
              f"{reference['lpd']:.4f}")
        print(markdown_table(rows), flush=True)
        assigned = {r["contender"]: r["assigned"] for r in rows if "assigned" in r}
        for name, text in assigned.items():
            print(f"  pm.sample assignment, {name}: {text}")
        if args.plot_dir and any("_labels" in r for r in rows):
            path = os.path.join(args.plot_dir, f"builtin_samplers_{problem_name}.png")
            plot_largest_fraction(rows, reference, path,
                                  f"{problem_name}: largest-cluster fraction per chain, "
                                  f"{seconds:g} s per chain")
            print(f"  plot: {path}")
    print(f"\ntotal {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
