"""Post-processing cost of the convergence checks at large n: PyMC's checks vs ``psm.sample``'s.

Each variant runs in its own process (so that peak RSS is its own): it samples a
Dirichlet-process NIW mixture of ``n`` points with ``compute_convergence_checks=False`` and
then times, and measures the peak RSS of,

* ``pymc``: ``pymc.stats.convergence.run_convergence_checks(idata, model)`` — what every
  ``pm.sample`` run does by default (R-hat / ESS of every label);
* ``psm``: what ``psm.sample`` does instead — the ``partition_diagnostics`` group (with the
  log joint), PyMC's checks without the partition variable and the label-invariant checks;
* ``hook``: what a plain ``pm.sample`` runs once ``pymc_splitmerge`` is imported
  (``pymc.sampling.mcmc.run_convergence_checks``, i.e.
  ``psm.sampling.label_invariant_convergence_checks``: the same checks, nothing stored).

Prints seconds and peak RSS after sampling / after post-processing, and the ratios.

    python benchmarks/postprocessing.py --n 20000 --draws 200
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def child(mode: str, n: int, draws: int) -> dict:
    import logging

    import numpy as np
    import pymc as pm

    import pymc_splitmerge as psm
    from pymc_splitmerge.sampling import mcmc as sampling

    logging.getLogger("pymc").setLevel(logging.ERROR)
    y, _ = psm.datasets.gaussian_blobs(n=n, n_components=4, dim=2, seed=1)
    with pm.Model() as model:
        alpha = pm.Gamma("alpha", 1.0, 1.0)
        z = psm.DirichletProcess("z", alpha=alpha, n=n)
        psm.ConjugateMixture("y", partition=z, component=psm.NormalInverseWishart(
            mu0=y.mean(axis=0), kappa0=0.05, nu0=4.0, psi0=np.eye(2)), observed=y)
        start = time.perf_counter()
        idata = pm.sample(draws=draws, tune=20, chains=2, cores=1, random_seed=1,
                          progressbar=False, compute_convergence_checks=False)
        sampling_seconds = time.perf_counter() - start
    rss_after_sampling = _peak_mb()
    start = time.perf_counter()
    if mode == "pymc":
        from pymc.stats.convergence import run_convergence_checks

        warnings = run_convergence_checks(idata, model)
    elif mode == "hook":
        from pymc.sampling import mcmc as pymc_mcmc

        warnings = pymc_mcmc.run_convergence_checks(idata, model)
    else:
        names = sampling.partition_variable_names(model)
        sampling._add_diagnostics_groups(idata, model, names)  # what psm.sample does
        warnings = sampling._pymc_checks_without_partitions(idata, model, names)
        warnings += sampling.partition_convergence_checks(idata, var_names=names)
    seconds = time.perf_counter() - start
    return {"mode": mode, "sampling_seconds": sampling_seconds,
            "postprocessing_seconds": seconds, "rss_after_sampling_mb": rss_after_sampling,
            "rss_peak_mb": _peak_mb(), "warnings": [w.message[:90] for w in warnings]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--child", choices=["pymc", "psm", "hook"])
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.n, args.draws)))
        return 0
    results = {}
    for mode in ("pymc", "psm", "hook"):
        out = subprocess.run([sys.executable, __file__, "--child", mode, "--n", str(args.n),
                              "--draws", str(args.draws)], capture_output=True, text=True,
                             check=True)
        results[mode] = json.loads(out.stdout.strip().splitlines()[-1])
        print(mode, results[mode], flush=True)
    print(f"n = {args.n}, 2 chains x {args.draws} draws")
    for mode, r in results.items():
        print(f"{mode:5s} sampling {r['sampling_seconds']:6.1f} s | post-processing "
              f"{r['postprocessing_seconds']:6.2f} s | peak RSS after sampling "
              f"{r['rss_after_sampling_mb']:7.0f} MB, after post-processing "
              f"{r['rss_peak_mb']:7.0f} MB")
        for message in r["warnings"]:
            print(f"      warning: {message}")
    p = results["pymc"]
    for mode in ("psm", "hook"):
        s = results[mode]
        print(f"ratio pymc / {mode}: post-processing time "
              f"{p['postprocessing_seconds'] / s['postprocessing_seconds']:.1f}x, "
              f"post-processing RSS growth "
              f"{(p['rss_peak_mb'] - p['rss_after_sampling_mb']) / max(s['rss_peak_mb'] - s['rss_after_sampling_mb'], 1.0):.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
