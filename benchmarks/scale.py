"""Scale benchmark: a million points, compact traces, time to answer vs VI.

Data: ``n`` points from 20 Gaussians (unit covariance) with centres 20 apart on a circle
(2-D) or at random in a 10-D box, plus 1,000 held-out points.  Model:
``DirichletProcess(alpha=1)`` + ``NormalInverseWishart(mu0=0, kappa0=0.01, nu0=D+2, psi0=I)``.

Samplers, each through ``pm.sample`` (one chain, ``cores=1``, ``tune=0``, from the default
all-in-one-cluster start, or from the subsample start below):

* ``sams+gibbs``: ``SAMSStep(z, n_gibbs_sweeps=1)`` (the default partition step);
* ``pgsm+gibbs``: ``PGSMStep(z, num_particles=20, n_gibbs_sweeps=1)``.

(One step object holding both moves: two separate step objects would rebuild the
sufficient statistics from the labels at every draw, an O(n log n) sort.)

Each configuration runs in its own subprocess, which reports

* ``s/draw``: CPU seconds per draw (median over the recorded draws after the first);
* ``peak MB``: the subprocess's peak resident memory (``ru_maxrss``), with the in-memory
  (NDArray) trace or with PyMC's on-disk ``ZarrTrace`` (``--zarr``, 10 draws per chunk);
  the 1,000-draw figure is extrapolated: NDArray adds ``n`` labels of the compact dtype per
  draw, ZarrTrace holds one chunk only;
* ``t(lpd)``: CPU seconds (``pm.sample`` setup and any start included) until the held-out
  log predictive density per point estimated from the draws so far, first half discarded as
  burn-in, ``mean_j log mean_{t/2 < s <= t} p(y*_j | c_s, y)``, stays within 0.01 nats/point
  of the reference: the same quantity from a long SAMS+Gibbs run (second half of its draws).

``--vi``: the same ``t(lpd)`` against scikit-learn's ``BayesianGaussianMixture``
(Dirichlet-process weights, 20 components, full covariances, the model's NIW prior,
``n_init = 1`` and ``5``; its
``t(lpd)`` is the CPU time of the fit when its ``score_samples`` held-out density is within
0.01 of the reference, ``never`` otherwise) at n = 2,000, 20,000, 200,000, 2-D; and the
``subsample`` start: ``psm.splitmerge_start`` (on 2,000 random points 2,000 pure SAMS
updates and 10 SAMS+Gibbs updates, every other point
placed greedily by its prior-weighted posterior predictive), then the full sampler (the start's CPU time is included in
``t(lpd)``).  The reference is the mean of two long SAMS+Gibbs runs from that start with two
other seeds (second half of each); the table prints both and their difference.  Every
contender, sklearn included, runs in its own fresh process with two clocks: *cold*, CPU time from the start of the process (imports, numba's cache loads,
PyTensor's and sklearn's first calls included; making the data excluded), and *warm*, the same
fit again in that process; the table gives ours / sklearn ratios for both.  Default contender:
the ``splitmerge_start`` run (``--vi-contenders`` adds the runs from one cluster).  Every
spawned process runs BLAS/OpenMP single-threaded (``--blas-threads 1``, the default): idle
OpenBLAS threads spin, and the spinning counts as CPU time (it triples sklearn's).

``--start-cost N1,N2,..``: cost, K and adjusted Rand index of ``psm.splitmerge_start``;
``--first-draw N``: CPU time from the model build to the first draw from the start, in a
fresh process and again in the same (warm) process.

``--analysis N``: time of every analysis function on a ZarrTrace of N points, read back
thinned (summary, VI point estimate, credible ball, held-out density, streamed n_clusters).
``--analysis-synthetic N``: the same functions on synthetic draws of N points (wall time and
tracemalloc peak; the posterior similarity matrix at a size where it fits).

``--start-quality``: CPU time of ``psm.splitmerge_start`` and the held-out density of its
labels against the true labels', for seeds ``--quality-first-seed ..`` on three data sets of
``--quality-n`` points (equal: ``make_data(n, 2)``; unequal: ``unequal_data(n)``, 15 clusters
of 26 % down to 0.5 % of the points; 10-D: ``make_data(n, 10)``); ``--subsample-size``,
``--split-merge-moves``, ``--gibbs-draws`` set the start's schedule, ``--then-draws K`` scores
the labels after K SAMS + Gibbs sweep updates of all points.

``--checks N``: post-processing time and memory of the convergence checks after sampling N
points (PyMC's checks of the raw labels, ``psm.sample``'s, plain ``pm.sample``'s once the
package is imported), each in its own process.

Run: ``python benchmarks/scale.py`` (fast: n <= 10^5, a few draws);
``python benchmarks/scale.py --full`` (adds n = 10^6); ``--vi`` for the VI comparison;
``--skip-scale`` runs only the other tables asked for.  The data, the model and the held-out
density are in ``benchmarks/_common.py``.
PyMC's ZarrTrace needs zarr 2 (``pip install 'pymc-splitmerge[zarr]'``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import (  # noqa: F401  (before numpy; N_TEST, unequal_data: read as scale.<name>)
    N_TEST,
    TOLERANCE,
    build_model,
    heldout_running_lpd,
    make_data,
    peak_rss_mb,
    subprocess_environment,
    unequal_data,
)

# isort: split
import numpy as np  # after _common, which makes BLAS single-threaded first


# ------------------------------------------------------------------ problem
def make_step(sampler, model):
    import pymc_splitmerge as psm

    z = model["z"]
    if sampler == "sams+gibbs":
        return psm.SAMSStep(z, n_gibbs_sweeps=1, model=model)
    if sampler == "pgsm+gibbs":
        return psm.PGSMStep(z, num_particles=20, n_gibbs_sweeps=1, model=model)
    raise ValueError(sampler)


def subsample_start(model, seed, size=2000):
    """The split-merge burn-in start (``psm.splitmerge_start``, the library function):
    SAMS then SAMS+Gibbs on ``size`` random points, the rest placed greedily."""
    import pymc_splitmerge as psm

    return psm.splitmerge_start(model, subsample_size=size, random_seed=seed)["z"]


# ------------------------------------------------------------------ one configuration
def run_one(config):
    """Run one configuration (in a fresh process); returns a dict.

    ``config["cold_warm"]``: the time-to-answer protocol of ``--vi``: the CPU clock of the
    first (cold) fit counts from the start of the process (interpreter, ``import pymc``,
    ``import pymc_splitmerge``, numba's cache loads, PyTensor's first compilations), less the
    CPU time of making the data; then the same fit again in the same process (warm), its clock
    from the start of that fit.  Results ``{"cold": ..., "warm": ...}``."""
    n, dim = config["n"], config["dim"]
    tic = time.process_time()
    # the data (and held-out set) never depend on the sampler's seed: every run of one n
    # sees the same points, the reference runs (other seeds) included
    y, y_test, _ = make_data(n, dim, seed=config.get("data_seed", 0))
    data_cpu = time.process_time() - tic
    if not config.get("cold_warm"):
        import pymc  # (outside the clock)

        return _fit_once(config, y, y_test, time.process_time())
    import pymc  # noqa: F401  (inside the clock: counted from the process start)

    import pymc_splitmerge  # noqa: F401

    imports_cpu = time.process_time() - data_cpu
    cold = _fit_once(config, y, y_test, data_cpu)  # clock from the process start
    cold["imports_cpu"] = imports_cpu
    warm = _fit_once(config, y, y_test, time.process_time())
    return {**config, "cold": cold, "warm": warm}


def _fit_once(config, y, y_test, cpu0):
    """Build the model, start, sample; CPU times relative to ``cpu0``."""
    import pymc as pm

    warnings.simplefilter("ignore")
    sampler, draws = config["sampler"], config["draws"]
    initvals = None
    model = build_model(y)
    model_cpu = time.process_time() - cpu0
    start_cpu = 0.0
    if config.get("start") == "subsample":  # on the model pm.sample runs, as a user would
        tic = time.process_time()
        initvals = {"z": subsample_start(model, config.get("seed", 0))}
        start_cpu = time.process_time() - tic
    step = make_step(sampler, model)
    times, labels_list = [], []
    record_every = int(config.get("record_every", 1))

    def callback(trace, draw):
        times.append(time.process_time())
        if draw.draw_idx % record_every == 0 or draw.is_last:
            labels_list.append(np.array(draw.point["z"]))

    trace_backend = None
    if config.get("zarr"):
        import zarr
        from pymc.backends.zarr import ZarrTrace

        trace_backend = ZarrTrace(store=zarr.DirectoryStore(config["zarr"]), draws_per_chunk=10)
    kwargs = {"trace": trace_backend} if trace_backend is not None else {}
    profiler = None
    if config.get("profile"):
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    with model:
        pm.sample(draws=draws, tune=0, chains=1, cores=1, step=step, initvals=initvals,
                  random_seed=config.get("seed", 0), progressbar=False, callback=callback,
                  compute_convergence_checks=False, return_inferencedata=False, **kwargs)
    if profiler is not None:
        import io
        import pstats

        profiler.disable()
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(15)
        print(out.getvalue(), file=sys.stderr)
    peak_mb = peak_rss_mb()
    per_draw = np.diff(times)
    result = {**config, "s_per_draw": float(np.median(per_draw)) if per_draw.size else None,
              "setup_cpu": float(times[0] - cpu0 - (np.median(per_draw) if per_draw.size else 0)),
              "peak_mb": peak_mb, "label_dtype": str(labels_list[0].dtype), "start_cpu": start_cpu,
              "model_cpu": model_cpu, "first_draw_cpu": float(times[0] - cpu0),
              "n_clusters_first": int(labels_list[0].max()) + 1,
              "n_clusters_last": int(labels_list[-1].max()) + 1}
    if config.get("lpd", True):
        running, result["half_lpd"] = heldout_running_lpd(y, y_test, labels_list)
        recorded = [i for i in range(len(times)) if i % record_every == 0 or i == len(times) - 1]
        result["running_lpd"] = running.tolist()
        result["cpu_at_record"] = [float(times[i] - cpu0) for i in recorded]
    return result


# Threads of the BLAS/OpenMP libraries in the spawned processes (``--blas-threads``; None:
# the environment's).  1 by default: the idle worker threads
# of a multi-threaded OpenBLAS spin after each call, and that spinning counts in
# ``time.process_time``: it made sklearn's fit cost ~3x its single-threaded CPU time (0.36-0.45
# against 0.13-0.15 s at n = 20,000), and inflated our warm start after the cold run's
# held-out density (BLAS) by ~0.1 s.
BLAS_THREADS: int | None = 1


def spawn(config, extra_path=None):
    """Run ``config`` in a subprocess (own peak memory); returns its dict."""
    env = subprocess_environment(BLAS_THREADS)
    if extra_path:
        env["PYTHONPATH"] = env.get("PYTHONPATH", "") + os.pathsep + extra_path
    env.setdefault("NUMCODECS_ALLOW_UNSAFE_PICKLE_DECODE", "1")  # ZarrTrace's own state
    out = subprocess.run([sys.executable, __file__, "--one", json.dumps(config)], env=env,
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        return {**config, "error": out.stderr.strip().splitlines()[-1:]}
    if config.get("profile"):
        print(out.stderr, file=sys.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------ reporting
def time_to_reference(result, reference):
    running = np.asarray(result.get("running_lpd", []))
    if reference is None or running.size == 0:
        return np.nan
    close = np.abs(running - reference) <= TOLERANCE
    if not close[-1]:
        return np.inf
    far = np.flatnonzero(~close)
    first = 0 if far.size == 0 else far[-1] + 1
    return result["cpu_at_record"][first]


def fmt(value, digits=2):
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "–"
    if isinstance(value, float) and np.isinf(value):
        return "never"
    return f"{value:.{digits}f}"


def scale_table(sizes, dims, samplers, draws, zarr_path, start=None, profile=False):
    print("\n## Time per draw and peak memory (one chain, CPU time)\n")
    print(f"start: {start or 'all in one cluster'}\n")
    print("| D | n | sampler | K (first->last) | label dtype | s/draw | peak MB (NDArray) | "
          "peak MB (ZarrTrace) | est. MB for 1,000 draws NDArray / Zarr |")
    print("|---|---|---|---|---|---|---|---|---|")
    rows = []
    for dim in dims:
        for n in sizes:
            for sampler in samplers:
                config = {"n": n, "dim": dim, "sampler": sampler, "draws": draws(n),
                          "lpd": False, "start": start, "profile": profile}
                memory = spawn(config)
                zarr_result = {}
                if zarr_path:
                    store = os.path.join("/tmp", f"scale_{os.getpid()}_{dim}_{n}.zarr")
                    zarr_result = spawn({**config, "zarr": store}, zarr_path)
                    shutil.rmtree(store, ignore_errors=True)
                if "error" in memory:
                    print(f"| {dim} | {n:,} | {sampler} | error: {memory['error']} |")
                    continue
                itemsize = np.dtype(memory["label_dtype"]).itemsize
                extrapolated = memory["peak_mb"] + (1000 - config["draws"]) * n * itemsize / 2**20
                zarr_mb = zarr_result.get("peak_mb", np.nan)
                print(f"| {dim} | {n:,} | {sampler} | {memory['n_clusters_first']}->"
                      f"{memory['n_clusters_last']} | "
                      f"{memory['label_dtype']} | {fmt(memory['s_per_draw'], 3)} | "
                      f"{fmt(memory['peak_mb'], 0)} | {fmt(zarr_mb, 0)} | "
                      f"{fmt(extrapolated, 0)} / {fmt(zarr_mb, 0)} |")
                print(f"    start {memory['start_cpu']:.2f} CPU s; pm.sample setup (start "
                      f"included) {memory['setup_cpu']:.2f} CPU s")
                sys.stdout.flush()
                rows.append(memory)
    return rows


def run_sklearn(config):
    """``BayesianGaussianMixture`` with the model's prior, cold then warm (in a fresh process,
    the same clocks as ``run_one``'s ``cold_warm``: cold from the process start, ``import
    sklearn`` included, less making the data; warm: a second fit in the same process)."""
    tic = time.process_time()
    y, y_test, _ = make_data(config["n"], 2, seed=config.get("data_seed", 0))
    data_cpu = time.process_time() - tic
    from sklearn.mixture import BayesianGaussianMixture

    result = {**config}
    for phase in ("cold", "warm"):
        cpu0 = data_cpu if phase == "cold" else time.process_time()
        model = BayesianGaussianMixture(
            n_components=20, weight_concentration_prior_type="dirichlet_process",
            weight_concentration_prior=1.0, covariance_type="full", max_iter=1000,
            # the same prior as the model: NIW(mu0 = 0, kappa0 = 0.01, nu0 = D + 2, I)
            mean_prior=np.zeros(2), mean_precision_prior=0.01,
            degrees_of_freedom_prior=4.0, covariance_prior=np.eye(2),
            n_init=config["n_init"], random_state=config.get("seed", 0))
        fit_tic = time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(y)
        done = time.process_time()
        result[phase] = {"cpu": done - cpu0, "fit_cpu": done - fit_tic,
                         "lpd": float(model.score_samples(y_test).mean()),
                         "n_iter": int(model.n_iter_)}
    return result


def _ratio(ours, theirs):
    if np.isinf(ours) and np.isinf(theirs):
        return "both never"
    if np.isinf(theirs):
        return "sklearn never"
    if np.isinf(ours):
        return "ours never"
    return f"{ours / theirs:.2f}"


def vi_table(sizes, seed, reference_draws, contenders, repeats=1):
    print("\n## Time to answer vs variational inference (2-D, CPU seconds)\n")
    print("t = CPU s until the held-out lpd is within 0.01 nats/point of the reference (mean "
          f"of two long SAMS+Gibbs runs from the split-merge start, seeds {seed + 1}, "
          f"{seed + 2}, second half of each).  Every contender in its own fresh process: "
          "cold = clock from the process start (imports, numba cache loads, PyTensor and "
          "sklearn first calls included; making the data excluded), warm = a second fit in "
          "the same process.  Cells: t (CPU s of the whole run or fit) / final lpd minus "
          "reference.  Ratio = ours / sklearn (< 1: this package is faster).\n")
    labels = {("sams+gibbs", None): "SAMS+Gibbs", ("sams+gibbs", "subsample"):
              "SAMS+Gibbs, splitmerge_start", ("pgsm+gibbs", None): "PGSM+Gibbs"}
    print("| n | clock | run | reference lpd | " + " | ".join(labels[c] for c in contenders)
          + " | sklearn n_init=1 | sklearn n_init=5 | ratio ours/n_init=1 | "
          "ratio ours/n_init=5 |")
    print("|---|---|---|---|" + "---|" * (len(contenders) + 4))
    for n in sizes:
        long_draws, run_draws, record = reference_draws(n)
        references = [spawn({"n": n, "dim": 2, "sampler": "sams+gibbs", "draws": long_draws,
                             "record_every": record, "seed": seed + offset,
                             "start": "subsample"})
                      for offset in (1, 2)]
        failed = [r["error"] for r in references if "error" in r]
        if failed:
            print(f"| {n:,} | reference failed: {failed} |")
            continue
        halves = [r["half_lpd"] for r in references]  # second half of each long run
        ref_value = float(np.mean(halves))
        details = {"n": n, "reference": halves, "ours": []}
        for repeat in range(repeats):
            ours_cells = {"cold": [], "warm": []}
            ours_t = {"cold": np.nan, "warm": np.nan}
            for sampler, start in contenders:
                result = spawn({"n": n, "dim": 2, "sampler": sampler, "draws": run_draws,
                                "record_every": record, "seed": seed, "start": start,
                                "cold_warm": True})
                for phase in ("cold", "warm"):
                    if "error" in result:
                        ours_cells[phase].append(f"error {result['error']}")
                        continue
                    run = result[phase]
                    t = time_to_reference(run, ref_value)
                    if start == "subsample":
                        ours_t[phase] = t
                    ours_cells[phase].append(
                        f"{fmt(t)} ({run['cpu_at_record'][-1]:.1f} s) / "
                        f"{run['running_lpd'][-1] - ref_value:+.3f}")
                if "error" not in result and start == "subsample":
                    details["ours"].append({
                        phase: {key: round(result[phase][key], 3) for key in
                                ("imports_cpu", "model_cpu", "start_cpu", "first_draw_cpu",
                                 "s_per_draw") if key in result[phase]}
                        for phase in ("cold", "warm")})
            sk = {k: spawn({"n": n, "seed": seed, "n_init": k, "sklearn": True})
                  for k in (1, 5)}
            for phase in ("cold", "warm"):
                cells, sk_t = [], {}
                for k in (1, 5):
                    if "error" in sk[k]:
                        cells.append(f"error {sk[k]['error']}")
                        sk_t[k] = np.nan
                        continue
                    fit = sk[k][phase]
                    gap = fit["lpd"] - ref_value
                    sk_t[k] = fit["cpu"] if abs(gap) <= TOLERANCE else np.inf
                    cells.append(f"{fmt(sk_t[k])} ({fit['cpu']:.2f} s) / {gap:+.3f}")
                ratios = [_ratio(ours_t[phase], sk_t[k]) for k in (1, 5)]
                print(f"| {n:,} | {phase} | {repeat + 1} | {ref_value:.4f} | "
                      + " | ".join(ours_cells[phase] + cells + ratios) + " |")
                sys.stdout.flush()
        print("    details:", json.dumps(details))
        sys.stdout.flush()


def start_cost_table(sizes, dim):
    """CPU time, K and adjusted Rand index of ``psm.splitmerge_start`` (seeds 0, 1, 2; one
    process, so the first call also loads the numba kernels from the disk cache)."""
    import pymc_splitmerge as psm

    print(f"\n## Cost and quality of psm.splitmerge_start ({dim}-D, CPU s)\n")
    print("| n | first call in the process | later calls (median) | K (3 seeds) | min ARI |")
    print("|---|---|---|---|---|")
    for n in sizes:
        y, _, truth = make_data(n, dim)
        model = build_model(y)
        rows = []
        for seed in (0, 1, 2):
            tic = time.process_time()
            labels = psm.splitmerge_start(model, random_seed=seed)["z"]
            rows.append((time.process_time() - tic, int(labels.max()) + 1,
                         psm.adjusted_rand_index(labels, truth)))
        print(f"| {n:,} | {rows[0][0]:.2f} | {np.median([r[0] for r in rows[1:]]):.2f} | "
              f"{', '.join(str(r[1]) for r in rows)} | {min(r[2] for r in rows):.4f} |")
        sys.stdout.flush()


def first_draw_times(n):
    """CPU s from the model build to the first draw from the start, cold then warm (a second
    fit in the same process: numba kernels and PyMC helpers already loaded)."""
    import pymc as pm

    import pymc_splitmerge as psm

    y, _, _ = make_data(n, 2)
    print(f"\n## Time to the first draw from psm.splitmerge_start (n = {n:,}, CPU s)\n")
    for label in ("cold", "warm"):
        tic = time.process_time()
        model = build_model(y)
        start = psm.splitmerge_start(model, random_seed=0)
        started = time.process_time()
        times = []
        with warnings.catch_warnings(), model:
            warnings.simplefilter("ignore")
            pm.sample(draws=2, tune=0, chains=1, cores=1, step=make_step("sams+gibbs", model),
                      initvals=start, random_seed=0, progressbar=False,
                      callback=lambda trace, draw, times=times: times.append(time.process_time()),
                      compute_convergence_checks=False, return_inferencedata=False)
        print(f"{label}: model build + start {started - tic:.2f}, pm.sample to its first draw "
              f"{times[0] - started:.2f}, total {times[0] - tic:.2f}")


def analysis_table(n, draws, zarr_path):
    config = {"n": n, "dim": 2, "sampler": "sams+gibbs", "draws": draws, "analysis": True,
              "lpd": False, "zarr": os.path.join("/tmp", f"scale_analysis_{os.getpid()}.zarr")}
    result = spawn(config, zarr_path)
    shutil.rmtree(config["zarr"], ignore_errors=True)
    print(f"\n## Analysis functions at n = {n:,} ({draws} draws on a ZarrTrace; CPU s)\n")
    if "error" in result:
        print("error:", result["error"])
        return
    print("| function | CPU s | peak MB after |")
    print("|---|---|---|")
    for name, seconds, peak in result["analysis"]:
        print(f"| {name} | {seconds:.1f} | {peak:.0f} |")


def run_analysis(config):
    """Sample onto a ZarrTrace, then time the analysis functions on it (same process)."""
    import pymc_splitmerge.analysis as psa

    result = run_one(config)
    n = config["n"]
    y, y_test, _ = make_data(n, 2, seed=0)
    model = build_model(y)
    timings = []

    def timed(name, function):
        tic = time.process_time()
        value = function()
        timings.append((name, time.process_time() - tic,
                        peak_rss_mb()))
        return value

    n_clusters = timed("n_clusters streamed (iter_zarr_draws)", lambda: [
        int(block.max(axis=-1).max()) + 1 for _, _, block in psa.iter_zarr_draws(
            config["zarr"], "z")])
    del n_clusters
    posterior = timed("zarr_posterior (every draw)", lambda: psa.zarr_posterior(config["zarr"]))
    # summary's default reference partition is a 2-run SALSO point estimate: timed apart
    timed("summary (reference=None)", lambda: psa.summary(posterior, reference=None, rng=0))
    estimate = timed("point_estimate (VI, SALSO, num_runs=1)",
                     lambda: psa.point_estimate(posterior, num_runs=1, rng=0))
    timed("least_squares_draw (binder)", lambda: psa.least_squares_draw(posterior))
    timed("credible_ball (VI)", lambda: psa.credible_ball(posterior, center=estimate))
    timed("heldout_log_predictive_density", lambda: psa.heldout_log_predictive_density(
        posterior, model, y_test))
    try:
        psa.posterior_similarity_matrix(posterior)
    except MemoryError:
        timings.append(("posterior_similarity_matrix (refuses: MemoryError)", 0.0,
                        peak_rss_mb()))
    result["analysis"] = timings
    return result


# ------------------------------------------------------------------ the start's quality
def start_quality_datasets(n):
    """The three data sets of ``--start-quality``: equal, unequal and 10-D clusters."""
    return {"equal": lambda: make_data(n, 2), "unequal": lambda: unequal_data(n),
            "10-D": lambda: make_data(n, 10)}


def _draws_from(model, labels, draws, seed):
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


def start_quality_table(n, seeds, data, options, then_draws=0):
    """CPU time of ``psm.splitmerge_start`` (after one warm-up call) and the held-out lpd of
    its labels minus that of the true labels, per data set over ``seeds``; with
    ``then_draws``, of the labels after that many SAMS + Gibbs sweep updates of all points
    (what ``pm.sample``'s first draws do; their CPU time counts)."""
    import pymc_splitmerge as psm

    print(f"\n## Quality of psm.splitmerge_start (n = {n:,}, seeds {seeds[0]}..{seeds[-1]}, "
          f"options {options or 'default'}, then {then_draws} SAMS + Gibbs draws)\n")
    print("| data | start CPU s (median) | start lpd - truth lpd: worst | within 0.01 | "
          "clusters K |")
    print("|---|---|---|---|---|")
    for name, make in start_quality_datasets(n).items():
        if name not in data:
            continue
        y, y_test, truth = make()
        model = build_model(y)
        truth_lpd = heldout_running_lpd(y, y_test, [truth])[0][-1]
        psm.splitmerge_start(model, random_seed=seeds[-1] + 1, **options)  # warm-up
        times, gaps, ks = [], [], []
        for seed in seeds:
            tic = time.process_time()
            labels = psm.splitmerge_start(model, random_seed=seed, **options)["z"]
            if then_draws:
                labels = _draws_from(model, labels, then_draws, seed)
            times.append(time.process_time() - tic)
            gaps.append(heldout_running_lpd(y, y_test, [labels])[0][-1] - truth_lpd)
            ks.append(int(labels.max()) + 1)
        within = sum(abs(g) <= TOLERANCE for g in gaps)
        print(f"| {name} | {np.median(times):.3f} | {min(gaps):+.3f} | {within}/{len(seeds)} | "
              f"{min(ks)}-{max(ks)} (true {int(truth.max()) + 1}) |")
        sys.stdout.flush()


# ------------------------------------------------------------------ checks after pm.sample
CHECK_MODES = ("pymc", "psm", "hook")


def run_checks(config):
    """Sample a DP + NIW mixture of ``config["n"]`` points (2 chains, no checks), then time
    one way of checking convergence (in its own process: the peak RSS is its own):

    * ``pymc``: ``pymc.stats.convergence.run_convergence_checks`` (R-hat / ESS of every label);
    * ``psm``: what ``psm.sample`` does (the ``partition_diagnostics`` group with the log
      joint, PyMC's checks without the partitions, the label-invariant checks);
    * ``hook``: what a plain ``pm.sample`` runs once ``pymc_splitmerge`` is imported."""
    import logging

    import pymc as pm

    import pymc_splitmerge as psm
    from pymc_splitmerge.sampling import mcmc as sampling

    mode, n, draws = config["checks"], config["n"], config["draws"]
    logging.getLogger("pymc").setLevel(logging.ERROR)
    y, _ = psm.datasets.gaussian_blobs(n=n, n_components=4, dim=2, seed=1)
    with pm.Model() as model:
        alpha = pm.Gamma("alpha", 1.0, 1.0)
        z = psm.DirichletProcess("z", alpha=alpha, n=n)
        psm.ConjugateMixture("y", partition=z, component=psm.NormalInverseWishart(
            mu0=y.mean(axis=0), kappa0=0.05, nu0=4.0, psi0=np.eye(2)), observed=y)
        tic = time.perf_counter()
        idata = pm.sample(draws=draws, tune=20, chains=2, cores=1, random_seed=1,
                          progressbar=False, compute_convergence_checks=False)
        sampling_seconds = time.perf_counter() - tic
    rss_after_sampling = peak_rss_mb()
    tic = time.perf_counter()
    if mode == "pymc":
        from pymc.stats.convergence import run_convergence_checks

        found = run_convergence_checks(idata, model)
    elif mode == "hook":
        from pymc.sampling import mcmc as pymc_mcmc

        found = pymc_mcmc.run_convergence_checks(idata, model)
    else:
        names = sampling.partition_variable_names(model)
        sampling._add_diagnostics_groups(idata, model, names)  # what psm.sample does
        found = sampling._pymc_checks_without_partitions(idata, model, names)
        found += sampling.partition_convergence_checks(idata, var_names=names)
    return {"mode": mode, "sampling_seconds": sampling_seconds,
            "postprocessing_seconds": time.perf_counter() - tic,
            "rss_after_sampling_mb": rss_after_sampling, "rss_peak_mb": peak_rss_mb(),
            "warnings": [w.message[:90] for w in found]}


def checks_table(n, draws):
    print(f"\n## Convergence checks after pm.sample (n = {n:,}, 2 chains x {draws} draws)\n")
    print("| variant | post-processing s | peak RSS growth MB | sampling s |")
    print("|---|---|---|---|")
    results = {}
    for mode in CHECK_MODES:
        result = spawn({"checks": mode, "n": n, "draws": draws})
        if "error" in result:
            print(f"| {mode} | error: {result['error']} | | |")
            continue
        results[mode] = result
        growth = result["rss_peak_mb"] - result["rss_after_sampling_mb"]
        print(f"| {mode} | {result['postprocessing_seconds']:.2f} | {growth:+.0f} | "
              f"{result['sampling_seconds']:.1f} |")
        sys.stdout.flush()
    if "pymc" in results:
        for mode in ("psm", "hook"):
            if mode in results:
                ratio = (results["pymc"]["postprocessing_seconds"]
                         / results[mode]["postprocessing_seconds"])
                print(f"post-processing time pymc / {mode}: {ratio:.1f}x")


# ------------------------------------------------------------------ analysis, synthetic draws
def synthetic_analysis(n, n_draws, runs):
    """Wall time and peak memory (tracemalloc: Python/numpy allocations) of the analysis
    functions on ``n_draws`` synthetic draws (2 chains) of ``n`` observations: noisy copies of
    a 10-cluster truth (each label resampled with probability 0.1 among 12 labels)."""
    import tracemalloc

    from pymc_splitmerge import analysis as psa

    rng = np.random.default_rng(0)
    truth = rng.integers(0, 10, n)
    draws = np.tile(truth, (n_draws, 1))
    mask = rng.random(draws.shape) < 0.1
    draws[mask] = rng.integers(0, 12, mask.sum())
    draws = psa.canonicalize(draws.reshape(2, n_draws // 2, n))

    def measure(label, function):
        tracemalloc.start()
        tic = time.perf_counter()
        value = function()
        elapsed = time.perf_counter() - tic
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(f"| {label} | {elapsed:.2f} | {peak / 2**20:.1f} |")
        return value, elapsed

    small = draws[:, :5, :50]  # compile the numba kernels first (cached on disk afterwards)
    psa.posterior_similarity_matrix(small)
    psa.point_estimate(small, num_runs=1)
    psa.least_squares_draw(small)
    print(f"\n## Analysis functions on synthetic draws (n = {n:,}, {n_draws:,} draws)\n")
    print("| function | wall s | peak MiB (tracemalloc) |")
    print("|---|---|---|")
    _, t_similarity = measure("posterior similarity matrix (float32)",
                              lambda: psa.posterior_similarity_matrix(draws))
    estimate, t_estimate = measure(
        f"point estimate, VI (SALSO, {runs} runs)",
        lambda: psa.point_estimate(draws, loss="vi", num_runs=runs, rng=1))
    measure(f"point estimate, Binder (SALSO, {runs} runs)",
            lambda: psa.point_estimate(draws, loss="binder", num_runs=runs, rng=1))
    measure("least-squares draw (Dahl)", lambda: psa.least_squares_draw(draws))
    measure("summary (distance to the estimate)", lambda: psa.summary(draws, reference=estimate))
    print(f"\nVI estimate: {estimate.n_clusters} clusters, ARI vs truth "
          f"{psa.adjusted_rand_index(truth, estimate.labels):.4f}; similarity matrix + VI "
          f"estimate {t_similarity + t_estimate:.2f} s; process peak RSS {peak_rss_mb():.0f} MB")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--full", action="store_true", help="add n = 10^6")
    parser.add_argument("--vi", action="store_true", help="time to answer vs sklearn")
    parser.add_argument("--vi-sizes", default="2000,20000,200000")
    parser.add_argument("--vi-contenders", default="sams+gibbs:subsample",
                        help="sampler[:subsample] list (subsample: from psm.splitmerge_start; "
                             "the ratios use it); e.g. sams+gibbs,sams+gibbs:subsample,"
                             "pgsm+gibbs adds the runs from one cluster (never reach it)")
    parser.add_argument("--vi-repeats", type=int, default=1,
                        help="repeat every contender (fresh processes) this many times")
    parser.add_argument("--sizes", default=None, help="comma-separated n (overrides)")
    parser.add_argument("--dims", default="2,10")
    parser.add_argument("--samplers", default="sams+gibbs,pgsm+gibbs")
    parser.add_argument("--draws", type=int, default=None, help="draws per timing run")
    parser.add_argument("--analysis", type=int, default=0, help="n of the analysis timing")
    parser.add_argument("--zarr-path", default=os.environ.get("SCALE_ZARR_PATH"),
                        help="extra sys.path entry holding zarr 2 (for ZarrTrace)")
    parser.add_argument("--skip-scale", action="store_true")
    parser.add_argument("--start-cost", default="",
                        help="comma-separated n: cost and quality of psm.splitmerge_start "
                             "(first of --dims)")
    parser.add_argument("--first-draw", type=int, default=0,
                        help="n: CPU s to the first draw from the start, cold and warm")
    parser.add_argument("--profile", action="store_true",
                        help="cProfile the pm.sample call of each timing run (to stderr)")
    parser.add_argument("--start", choices=["subsample"], default=None,
                        help="time-per-draw runs from psm.splitmerge_start (K near 20)")
    parser.add_argument("--start-quality", action="store_true",
                        help="quality and cost of psm.splitmerge_start on equal, unequal and "
                             "10-D clusters (--quality-*, --subsample-size, ...)")
    parser.add_argument("--quality-n", type=int, default=20000)
    parser.add_argument("--quality-seeds", type=int, default=10)
    parser.add_argument("--quality-first-seed", type=int, default=0)
    parser.add_argument("--quality-data", default="equal,unequal,10-D")
    parser.add_argument("--subsample-size", type=int, default=None)
    parser.add_argument("--split-merge-moves", type=int, default=None)
    parser.add_argument("--gibbs-draws", type=int, default=None)
    parser.add_argument("--then-draws", type=int, default=0,
                        help="--start-quality: also score the labels after this many SAMS + "
                             "Gibbs sweep updates of all points (what pm.sample's first "
                             "draws do), CPU time included")
    parser.add_argument("--checks", type=int, default=0,
                        help="n: cost of the convergence checks after pm.sample (PyMC's, "
                             "psm.sample's, plain pm.sample's); --draws (default 200)")
    parser.add_argument("--analysis-synthetic", type=int, default=0,
                        help="n: analysis functions on synthetic draws (--analysis-draws, "
                             "--salso-runs)")
    parser.add_argument("--analysis-draws", type=int, default=2000)
    parser.add_argument("--salso-runs", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--blas-threads", type=int, default=1,
                        help="OPENBLAS/OMP/MKL_NUM_THREADS of the spawned processes (0: keep "
                             "the environment's; >1 lets idle BLAS threads spin into the CPU "
                             "times)")
    args = parser.parse_args()
    global BLAS_THREADS
    BLAS_THREADS = args.blas_threads or None
    if args.one:
        config = json.loads(args.one)
        if config.get("sklearn"):
            result = run_sklearn(config)
        elif config.get("analysis"):
            result = run_analysis(config)
        elif config.get("checks"):
            result = run_checks(config)
        else:
            result = run_one(config)
        print(json.dumps(result))
        return
    zarr_path = args.zarr_path
    try:
        import zarr  # noqa: F401

        zarr_path = zarr_path or ""
    except ImportError:
        if not zarr_path:
            print("zarr 2 not importable: ZarrTrace columns are skipped "
                  "(pip install 'pymc-splitmerge[zarr]' or --zarr-path DIR)")
    if args.sizes:
        sizes = [int(s) for s in args.sizes.split(",")]
    else:
        sizes = [10_000, 100_000] + ([1_000_000] if args.full else [])
    print(f"# benchmarks/scale.py  (python {sys.version.split()[0]}, "
          f"{os.cpu_count()} cores, shared machine)")
    if not args.skip_scale:
        scale_table(sizes, [int(d) for d in args.dims.split(",")], args.samplers.split(","),
                    lambda n: args.draws or (10 if n >= 10**6 else 20), zarr_path,
                    start=args.start, profile=args.profile)
    if args.start_cost:
        start_cost_table([int(v) for v in args.start_cost.split(",")], int(args.dims.split(",")[0]))
    if args.first_draw:
        first_draw_times(args.first_draw)
    if args.start_quality:
        options = {key: value for key, value in (("subsample_size", args.subsample_size),
                                                 ("split_merge_moves", args.split_merge_moves),
                                                 ("gibbs_draws", args.gibbs_draws))
                   if value is not None}
        first = args.quality_first_seed
        start_quality_table(args.quality_n, range(first, first + args.quality_seeds),
                            args.quality_data.split(","), options, args.then_draws)
    if args.checks:
        checks_table(args.checks, args.draws or 200)
    if args.analysis_synthetic:
        synthetic_analysis(args.analysis_synthetic, args.analysis_draws, args.salso_runs)
    if args.analysis:
        analysis_table(args.analysis, args.draws or 20, zarr_path)
    if args.vi:
        def reference_draws(n):  # (reference draws, draws per contender run, record every)
            return (600, 300, 1) if n <= 20_000 else (200, 60, 1)

        contenders = [(name, start or None) for name, _, start in
                      (item.partition(":") for item in args.vi_contenders.split(","))]
        vi_table([int(s) for s in args.vi_sizes.split(",")], args.seed, reference_draws,
                 contenders, repeats=args.vi_repeats)


if __name__ == "__main__":
    main()
