r"""SMC over partitions: evidence precision, Bayes factors, Ülker's experiment, PyMC's SMC.

Usage::

    python benchmarks/smc.py            # reduced default (a few minutes on one core)
    python benchmarks/smc.py --full     # the full sizes (20 runs, n up to 1,000, ...)

Sections (CPU time is ``time.process_time`` of this process, the numba compilation is warmed
up before timing):

1. **Precision vs particles.** sd of log Ẑ across independent runs and CPU seconds per run
   against the number of particles L, standard SMC (Lomeli), on the Jain–Neal d = 6 Bernoulli
   data (n = 100, DP α = 1, Beta(1, 1)) and a 2-D Gaussian mixture (n = 1,000, four
   overlapping components, Normal-Inverse-Wishart, DP α = 1).
2. **Bayes factors.** log evidence of DP(α=1), PY(α=1, d=0.25) and MFM(γ=1, K-1 ~ Poisson(3))
   on the same data, pooled over the runs of the largest L (``psm.compare_evidence``'s
   estimator), with Monte Carlo standard errors.
3. **Ülker et al. in spirit.** Overlapping three-component 1-D mixture (means −2, 0, 2.5, sd 1,
   weights 0.3/0.4/0.3), Normal-Inverse-Gamma(0, 0.1, 2, 2); weighted mean number of clusters
   at n = 200, 500, 1,000 for the particle filter (PF: Q = 0, 1,000 particles), SMC with Gibbs
   moves (SMC-G: Q = 9, α ≡ κ) and annealed SMC (SMC-A: Q = 9, α from 1 to κ = 0.05 at rate
   0.01), 100 particles for the SMC samplers; mean ± sd over the runs.
5. **Tempered against sequential SMC.** Likelihood-tempered SMC (``method="tempered"``:
   adaptive temperatures at relative ESS ``--ess`` with steps at most ``--max-step``,
   ``--sweeps`` tempered Gibbs sweeps and
   ``--split-merge`` tempered SAMS moves per particle and round of moves, up to ``--rounds``
   rounds per stage until the correlation of the particles' log likelihoods before and after
   the moves is at most ``--correlation``) beside the sequential SMC
   with Gibbs rejuvenation (``--sequential-rejuvenation`` Q, default 20) on the 2-D mixture (``--n`` points, default 1,000): mean and
   sd of log Ẑ over ``--runs`` runs, CPU seconds per run, DP(1) against MFM(1, Poisson(3)):
   the per-run log Bayes factor (run r of each prior) and how often its sign agrees with the
   pooled one; and Neal's (2000) nine points (DP(1), N(θ, 0.1²), θ ~ N(0, 1)) against
   enumeration.
   ``--reference-labels K``: the tempered SMC starts from K uniform labels and tempers prior
   and likelihood together (``reference_labels``); ``--skip-sequential``: tempered runs only;
   ``--fixed-schedule``: a pilot run's adaptive temperatures, then every tempered run on them;
   ``--resample-threshold R``: weighted particles, resampled only when the ESS of their weights
   falls below R (temperatures by the conditional ESS; default 1: every stage resamples);
   ``--pool P``: the runs also pooled in consecutive groups of P, as ``compare_evidence``
   pools the chains of one ``sample_smc(chains=P)`` call (sd over groups, sign per group).
   ``--configurations`` (section 5c only): tempered configurations (particles, moves,
   cluster anchors, waste-free chains, ESS) at similar CPU on that mixture, DP(1), with the
   sd over runs of log Ẑ accumulated up to β = 0.5, 0.8, ..., 1 (where the spread arises).
   ``--frontier L,Q ...`` (section 5d only): the sequential SMC's particles L against Gibbs
   rejuvenation Q on that mixture, DP(1) and MFM, with the paired DP − MFM log Bayes factors.
   ``--standard-error CHAINS REPEATS L Q`` (section 5e only): REPEATS independent pools of
   CHAINS sequential runs; the sd of the pooled log Ẑ over pools against the mean standard
   error ``compare_evidence`` reports (jackknife) and the delta method's.
4. **Against pm.sample_smc.** Finite mixture of k = 3 univariate normals with known sd 1,
   component means ~ N(0, 3²), weights ~ Dirichlet(1, 1, 1), n = 60: psm.sample_smc with
   ``FiniteDirichlet(alpha=1, k=3)`` + ``NormalKnownCovariance`` against pm.sample_smc on the
   explicit model (weights and means sampled, ``NormalMixture`` likelihood).  Both estimate the
   same p(y); mean ± sd of log p(y) over the chains and CPU seconds.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from pymc_splitmerge.components import BetaBernoulli, NormalInverseGamma, NormalInverseWishart
from pymc_splitmerge.datasets import jain_neal_bernoulli
from pymc_splitmerge.kernels import smc
from pymc_splitmerge.priors import (
    DirichletProcessPrior,
    MixtureOfFiniteMixturesPrior,
    PitmanYorPrior,
    ShiftedPoisson,
)


def _pooled_log_evidence(values):
    values = np.asarray(values)
    peak = values.max()
    relative = np.exp(values - peak)
    mean = relative.mean()
    return peak + np.log(mean), relative.std(ddof=1) / mean / np.sqrt(values.size)


def gaussian_mixture_2d(n=1000, seed=0):
    rng = np.random.default_rng(seed)
    means = np.array([[0.0, 0.0], [3.0, 0.0], [0.0, 3.0], [3.0, 3.0]])
    labels = rng.integers(4, size=n)
    return means[labels] + rng.standard_normal((n, 2)), labels


def datasets():
    bernoulli, _ = jain_neal_bernoulli(6, n_per_component=20, seed=0)
    bernoulli_family = BetaBernoulli(a=1.0, b=1.0)
    gaussian, _ = gaussian_mixture_2d()
    niw = NormalInverseWishart(mu0=np.full(2, 1.5), kappa0=0.1, nu0=4.0, psi0=np.eye(2))
    return {
        "Jain-Neal d=6 (n=100)": (bernoulli_family, bernoulli_family.prepare_data(bernoulli)),
        "2-D Gaussian mixture (n=1000)": (niw, niw.prepare_data(gaussian)),
    }


PRIORS = {
    "DP(1)": DirichletProcessPrior(alpha=1.0),
    "PY(1, 0.25)": PitmanYorPrior(alpha=1.0, discount=0.25),
    "MFM(1, Poisson(3))": MixtureOfFiniteMixturesPrior(gamma=1.0,
                                                       k_prior=ShiftedPoisson(rate=3.0)),
}


def precision_and_bayes_factors(particles, runs, rng):
    print("\n## 1. sd of log Z-hat and CPU time against the number of particles "
          f"(standard SMC, {runs} runs each)\n")
    pooled = {}
    for data_name, (family, x) in datasets().items():
        print(f"### {data_name}\n")
        print("| prior | L | mean log Z | sd log Z | CPU s / run |")
        print("|---|---|---|---|---|")
        for prior_name, prior in PRIORS.items():
            prepared = smc._prepare_run(prior, family, x, None, None)
            smc.run_smc(prior, family, x, 2, rng, prepared=prepared)  # warm-up
            for num_particles in particles:
                values = []
                start = time.process_time()
                for _ in range(runs):
                    values.append(smc.run_smc(prior, family, x, num_particles, rng,
                                              prepared=prepared).log_evidence)
                seconds = (time.process_time() - start) / runs
                values = np.array(values)
                print(f"| {prior_name} | {num_particles} | {values.mean():.2f} | "
                      f"{values.std(ddof=1):.3f} | {seconds:.3f} |")
                pooled[(data_name, prior_name)] = values
            # L = 100, points in random order / with Gibbs rejuvenation (Q = 5)
            for label, kwargs in (("random order", {"order": "random"}),
                                  ("Q = 5", {"rejuvenation": 5})):
                values = []
                start = time.process_time()
                for _ in range(runs):
                    run_prepared = prepared
                    if "order" in kwargs:  # same tables, points in a fresh random order
                        run_prepared = prepared._replace(order=rng.permutation(x.shape[0]))
                    values.append(smc.run_smc(
                        prior, family, x, 100, rng, prepared=run_prepared,
                        rejuvenation=kwargs.get("rejuvenation", 0)).log_evidence)
                seconds = (time.process_time() - start) / runs
                values = np.array(values)
                print(f"| {prior_name} | 100, {label} | {values.mean():.2f} | "
                      f"{values.std(ddof=1):.3f} | {seconds:.3f} |")
        print()
    print(f"## 2. log Bayes factors (pooled over the {runs} runs with L = {particles[-1]})\n")
    print("| data | prior | log p(y) | MCSE | log BF vs best |")
    print("|---|---|---|---|---|")
    for data_name in datasets():
        rows = {p: _pooled_log_evidence(pooled[(data_name, p)]) for p in PRIORS}
        best = max(value for value, _ in rows.values())
        for prior_name, (value, mcse) in rows.items():
            print(f"| {data_name} | {prior_name} | {value:.2f} | {mcse:.3f} | "
                  f"{value - best:.2f} |")
    print()


def ulker_data(n, seed):
    rng = np.random.default_rng(seed)
    labels = rng.choice(3, size=n, p=[0.3, 0.4, 0.3])
    return np.array([-2.0, 0.0, 2.5])[labels] + rng.standard_normal(n)


def ulker_experiment(sizes, runs, pf_particles, smc_particles, rng):
    print(f"## 3. Ülker et al. in spirit: weighted mean number of clusters ({runs} runs, "
          f"PF {pf_particles} particles, SMC-G/SMC-A {smc_particles}, Q = 9, κ = 0.05)\n")
    family = NormalInverseGamma(mu0=0.0, kappa0=0.1, alpha0=2.0, beta0=2.0)
    prior = DirichletProcessPrior(alpha=0.05)
    methods = {
        "PF": {"num_particles": pf_particles},
        "SMC-G": {"num_particles": smc_particles, "rejuvenation": 9},
        "SMC-A": {"num_particles": smc_particles, "rejuvenation": 9,
                  "anneal": {"start": 1.0, "rate": 0.01}},
    }
    print("| method | " + " | ".join(f"n = {n}" for n in sizes) + " | CPU s / run (largest n) |")
    print("|---|" + "---|" * (len(sizes) + 1))
    for method, kwargs in methods.items():
        cells = []
        for n in sizes:
            clusters = []
            start = time.process_time()
            for run in range(runs):
                x = family.prepare_data(ulker_data(n, seed=run))
                result = smc.run_smc(prior, family, x, rng=rng, **kwargs)
                weights = np.exp(result.log_weights)
                clusters.append(np.sum(weights * (result.labels.max(axis=1) + 1)))
            seconds = (time.process_time() - start) / runs
            cells.append(f"{np.mean(clusters):.2f} ± {np.std(clusters, ddof=1):.2f}")
        print(f"| {method} | " + " | ".join(cells) + f" | {seconds:.2f} |")
    print()


def against_pymc(chains, draws, n, seed):
    import pymc as pm

    import pymc_splitmerge as psm

    rng = np.random.default_rng(seed)
    k = 3
    y = np.array([-3.0, 0.0, 3.0])[rng.integers(k, size=n)] + rng.standard_normal(n)
    print(f"## 4. Against pm.sample_smc: finite mixture k = {k}, n = {n}, {chains} chains "
          f"x {draws} particles\n")
    with pm.Model() as partition_model:
        z = psm.FiniteDirichlet("z", alpha=1.0, k=k, n=n)
        psm.ConjugateMixture("y", partition=z,
                             component=psm.NormalKnownCovariance(mu0=0.0, sigma0=9.0, sigma=1.0),
                             observed=y)
    psm.sample_smc(draws=10, chains=1, model=partition_model, progressbar=False)  # warm-up
    start = time.process_time()
    ours = psm.sample_smc(draws=draws, chains=chains, model=partition_model, random_seed=seed,
                          progressbar=False)
    our_seconds = time.process_time() - start
    from pymc_splitmerge.analysis._arviz_compat import get_group

    our_values = np.asarray(get_group(ours, "sample_stats")["log_marginal_likelihood"])
    with pm.Model():
        weights = pm.Dirichlet("w", a=np.ones(k))
        means = pm.Normal("mu", 0.0, 3.0, shape=k)
        pm.NormalMixture("y", w=weights, mu=means, sigma=1.0, observed=y)
        start = time.process_time()
        theirs = pm.sample_smc(draws=draws, chains=chains, cores=1, random_seed=seed,
                               progressbar=False, compute_convergence_checks=False)
        their_seconds = time.process_time() - start
    # pymc stores one value per SMC stage (chain, stage), object dtype; the last is log p(y)
    raw = np.asarray(get_group(theirs, "sample_stats")["log_marginal_likelihood"].values,
                     dtype=object).reshape(chains, -1)
    their_values = np.array([float(np.asarray(row[-1], dtype=float).reshape(-1)[-1])
                             for row in raw])
    print("| sampler | log p(y) mean | sd over chains | CPU s (all chains) |")
    print("|---|---|---|---|")
    print(f"| psm.sample_smc (partition, collapsed) | {our_values.mean():.3f} | "
          f"{our_values.std(ddof=1):.3f} | {our_seconds:.2f} |")
    print(f"| pm.sample_smc (explicit weights and means) | {their_values.mean():.3f} | "
          f"{their_values.std(ddof=1):.3f} | {their_seconds:.2f} |")
    print()


NEAL_2000 = np.array([-1.48, -1.40, -1.16, -1.08, -1.02, 0.14, 0.51, 0.53, 0.78])


def _runs(function, runs):
    values, start = [], time.process_time()
    for _ in range(runs):
        values.append(function())
    return np.array(values), (time.process_time() - start) / runs


def _tempered_result(prior, family, x, particles, rng, prepared, options):
    """One tempered run; with ``options["reference"] == "informed"`` its pilot first (as
    ``psm.sample_smc(reference="informed")`` does, in the run's CPU time)."""
    from pymc_splitmerge.kernels import tempered_smc

    options = dict(options)
    reference, floor = options.pop("reference", "uniform"), options.pop("reference_floor", 0.05)
    if reference == "informed":
        pilot = tempered_smc.pilot_partition(prior, family, x, rng)
        num_labels = options.pop("reference_labels") or tempered_smc.default_reference_labels(
            int(pilot.max()) + 1, prepared.log_v)
        options["reference_probabilities"] = tempered_smc.informed_reference(
            prior, family, x, pilot, num_labels, floor)
        options["cluster_anchors"] = False
    return tempered_smc.run_tempered_smc(prior, family, x, particles, rng, prepared=prepared,
                                         **options)


def tempered_against_sequential(n, runs, particles, sequential_particles, options, rng,
                                sequential_rejuvenation=20, sequential=True,
                                fixed_schedule=False, pool=1):
    from pymc_splitmerge.kernels import tempered_smc
    from pymc_splitmerge.sampling.smc import pooled_log_evidence

    family, x = _mixture_2d(n)
    print(f"## 5. Tempered against sequential SMC: 2-D mixture n = {n}, {runs} runs; tempered "
          f"L = {particles}, {_options_text(options)}; sequential L = {sequential_particles}, "
          f"Q = {sequential_rejuvenation}\n")
    print("| method | prior | mean log Z | sd log Z | pooled log Z (jackknife SE) | "
          "stages (rounds, resampling stages) | CPU s / run |")
    print("|---|---|---|---|---|---|---|")
    results = {}
    for prior_name in ("DP(1)", "MFM(1, Poisson(3))"):
        prior = PRIORS[prior_name]
        prepared = tempered_smc.prepare_tempered(prior, family, x)
        _tempered_result(prior, family, x[:10], 2, rng,
                         tempered_smc.prepare_tempered(prior, family, x[:10]),
                         options)  # warm-up
        stages, move_rounds, resampled = [], [], []
        prior_options = dict(options)
        if fixed_schedule:  # a pilot run's temperatures, then every run on them (unbiased Ẑ)
            start = time.process_time()
            pilot = _tempered_result(prior, family, x, particles, rng, prepared, options)
            prior_options["temperatures"] = pilot.temperatures
            print(f"| pilot (adaptive) | {prior_name} | {pilot.log_evidence:.2f} | | | "
                  f"{pilot.temperatures.size - 1} | {time.process_time() - start:.1f} |")

        def tempered_run(prior=prior, prepared=prepared, stages=stages, move_rounds=move_rounds,
                         resampled=resampled, prior_options=prior_options):
            result = _tempered_result(prior, family, x, particles, rng, prepared,
                                      prior_options)
            stages.append(result.log_evidence_increments.size)
            move_rounds.append(result.move_rounds.sum())
            resampled.append(result.resampled.sum())
            return result.log_evidence

        sequential_prepared = smc._prepare_run(prior, family, x, None, None)
        smc.run_smc(prior, family, x, 2, rng, prepared=sequential_prepared)  # warm-up
        methods = (("tempered", tempered_run),
                   ("sequential", lambda prior=prior, prepared=sequential_prepared: smc.run_smc(
                       prior, family, x, sequential_particles, rng, prepared=prepared,
                       rejuvenation=sequential_rejuvenation).log_evidence))
        for method, function in methods[:2 if sequential else 1]:
            values, seconds = _runs(function, runs)
            results[(method, prior_name)] = values
            pooled, se = pooled_log_evidence(values)
            stage_text = (f"{np.mean(stages):.0f} ({np.mean(move_rounds):.0f}, "
                          f"{np.mean(resampled):.0f})"
                          if method == "tempered" else "n")
            print(f"| {method} | {prior_name} | {values.mean():.2f} | "
                  f"{values.std(ddof=1):.3f} | {pooled:.2f} ({se:.3f}) | {stage_text} | "
                  f"{seconds:.2f} |")
    print("\n| method | log BF DP − MFM per run | same sign as pooled | pooled (SE) |")
    print("|---|---|---|---|")
    for method in ("tempered", "sequential")[:2 if sequential else 1]:
        dp, mfm = results[(method, "DP(1)")], results[(method, "MFM(1, Poisson(3))")]
        (dp_pooled, dp_se), (mfm_pooled, mfm_se) = (pooled_log_evidence(dp),
                                                    pooled_log_evidence(mfm))
        pooled = dp_pooled - mfm_pooled
        per_run = dp - mfm
        agree = int(np.sum(np.sign(per_run) == np.sign(pooled)))
        print(f"| {method} | {', '.join(f'{v:.2f}' for v in per_run)} | {agree}/{runs} | "
              f"{pooled:.2f} ({np.hypot(dp_se, mfm_se):.2f}) |")
    print()
    if pool > 1:
        _pooled_runs(results, pool, ("tempered", "sequential")[:2 if sequential else 1])


def _pooled_runs(results, pool, methods):
    """``--pool P``: consecutive runs pooled in groups of P (``compare_evidence``'s log mean
    exp over P chains), as if one estimate came from ``sample_smc(chains=P)``: the sd over
    groups and the paired DP − MFM sign per group."""
    from pymc_splitmerge.sampling.smc import pooled_log_evidence

    print(f"Runs pooled in groups of {pool} (one estimate per group):\n")
    print("| method | prior | groups | mean of pooled log Z | sd over groups | "
          "mean jackknife SE |")
    print("|---|---|---|---|---|---|")
    grouped = {}
    for (method, prior_name), values in results.items():
        if method not in methods:
            continue
        groups = values[: values.size // pool * pool].reshape(-1, pool)
        pooled = np.array([pooled_log_evidence(group) for group in groups])
        grouped[(method, prior_name)] = pooled[:, 0]
        print(f"| {method} | {prior_name} | {len(groups)} | {pooled[:, 0].mean():.2f} | "
              f"{pooled[:, 0].std(ddof=1):.3f} | {pooled[:, 1].mean():.3f} |")
    print("\n| method | log BF DP − MFM per group | same sign as all runs pooled |")
    print("|---|---|---|")
    for method in methods:
        dp, mfm = (results[(method, name)] for name in ("DP(1)", "MFM(1, Poisson(3))"))
        overall = pooled_log_evidence(dp)[0] - pooled_log_evidence(mfm)[0]
        per_group = grouped[(method, "DP(1)")] - grouped[(method, "MFM(1, Poisson(3))")]
        agree = int(np.sum(np.sign(per_group) == np.sign(overall)))
        print(f"| {method} | {', '.join(f'{v:.2f}' for v in per_group)} | "
              f"{agree}/{per_group.size} |")
    print()


PROFILE_BETAS = (0.5, 0.8, 0.85, 0.9, 0.95, 1.0)
# (particles, Gibbs sweeps, SAMS moves, cluster anchors, chain length, ESS) per configuration
CONFIGURATIONS = ((20, 1, 30, False, 1, 0.9), (20, 1, 50, True, 1, 0.9),
                  (40, 1, 15, False, 1, 0.9), (40, 1, 15, True, 1, 0.9),
                  (60, 1, 15, False, 1, 0.5), (100, 1, 3, True, 1, 0.9),
                  (100, 1, 15, True, 5, 0.5))


def _partial_log_evidence(results, betas=PROFILE_BETAS):
    """log Ẑ up to each β of ``betas`` (interpolated between stages), one row per run."""
    return np.array([np.interp(betas, result.temperatures,
                               np.concatenate([[0.0], np.cumsum(result.log_evidence_increments)]))
                     for result in results])


def tempered_configurations(n, runs, rng):
    """Section 5c: tempered SMC configurations on the 2-D mixture, DP(1): where the spread of
    log Ẑ arises (sd over runs of log Ẑ up to β) and how particles, moves, anchors and
    waste-free chains trade at similar CPU."""
    from pymc_splitmerge.kernels import tempered_smc

    family, x = _mixture_2d(n)
    prior = PRIORS["DP(1)"]
    prepared = tempered_smc.prepare_tempered(prior, family, x)
    print(f"## 5c. Tempered SMC configurations: 2-D mixture n = {n}, DP(1), {runs} runs each "
          "(one population), steps ≤ 0.05\n")
    print("| L | sweeps + SAMS (anchors) | chain length | ESS | mean log Z | sd log Z | "
          "sd of log Z up to β = " + ", ".join(f"{b:g}" for b in PROFILE_BETAS)
          + " | stages | CPU s / run |")
    print("|---|---|---|---|---|---|---|---|---|")
    for particles, sweeps, moves, cluster, length, ess in CONFIGURATIONS:
        options = {"n_gibbs_sweeps": sweeps, "n_split_merge": moves, "ess_threshold": ess,
                   "max_temperature_step": 0.05, "cluster_anchors": cluster,
                   "chain_length": length}
        tempered_smc.run_tempered_smc(prior, family, x[:10], 10, rng, **options)  # warm-up
        start = time.process_time()
        results = tempered_smc.tempered_runs(prior, family, x, particles, runs, rng,
                                             prepared=prepared, **options)
        seconds = (time.process_time() - start) / runs
        partial = _partial_log_evidence(results)
        values = partial[:, -1]
        print(f"| {particles} | {sweeps} + {moves} ({'cluster' if cluster else 'uniform'}) | "
              f"{length} | {ess} | {values.mean():.1f} | {values.std(ddof=1):.2f} | "
              + ", ".join(f"{v:.2f}" for v in partial.std(axis=0, ddof=1))
              + f" | {np.mean([r.log_evidence_increments.size for r in results]):.0f} | "
              f"{seconds:.1f} |")
    print()


def _mixture_2d(n):
    gaussian, _ = gaussian_mixture_2d(n)
    family = NormalInverseWishart(mu0=np.full(2, 1.5), kappa0=0.1, nu0=4.0, psi0=np.eye(2))
    return family, family.prepare_data(gaussian)


def sequential_frontier(n, runs, pairs, prior_names, rng):
    """Section 5d: the sequential SMC's particles L against Gibbs rejuvenation Q at similar
    CPU on the 2-D mixture: mean and sd of log Ẑ over independent runs, CPU s per run."""
    family, x = _mixture_2d(n)
    print(f"## 5d. Sequential SMC, particles against rejuvenation: 2-D mixture n = {n}, "
          f"{runs} runs each\n")
    print("| prior | L | Q | mean log Z | sd log Z | CPU s / run |")
    print("|---|---|---|---|---|---|")
    results = {}
    for prior_name in prior_names:
        prior = PRIORS[prior_name]
        smc.log_evidence_runs(prior, family, x[:10], 2, 1, rng, rejuvenation=1)  # warm-up
        for particles, rejuvenation in pairs:
            start = time.process_time()
            values = smc.log_evidence_runs(prior, family, x, particles, runs, rng,
                                           rejuvenation=rejuvenation)
            seconds = (time.process_time() - start) / runs
            results[(prior_name, particles, rejuvenation)] = values
            print(f"| {prior_name} | {particles} | {rejuvenation} | {values.mean():.2f} | "
                  f"{values.std(ddof=1):.3f} | {seconds:.1f} |", flush=True)
    print("\nlog Z per run (to pool runs of several seeds):")
    for (prior_name, particles, rejuvenation), values in results.items():
        print(f"- {prior_name}, L = {particles}, Q = {rejuvenation}: "
              + ", ".join(f"{v:.2f}" for v in values))
    if len(prior_names) == 2:
        from pymc_splitmerge.sampling.smc import pooled_log_evidence

        print(f"\n| L | Q | log BF {prior_names[0]} − {prior_names[1]} per run "
              "(run r of each) | same sign as pooled | pooled (SE) |")
        print("|---|---|---|---|---|")
        for particles, rejuvenation in pairs:
            first, second = (results[(name, particles, rejuvenation)] for name in prior_names)
            (a, a_se), (b, b_se) = pooled_log_evidence(first), pooled_log_evidence(second)
            per_run = first - second
            agree = int(np.sum(np.sign(per_run) == np.sign(a - b)))
            print(f"| {particles} | {rejuvenation} | "
                  f"{', '.join(f'{v:.2f}' for v in per_run)} | {agree}/{runs} | "
                  f"{a - b:.2f} ({np.hypot(a_se, b_se):.2f}) |")
    print()


def standard_error_check(n, chains, repeats, particles, rejuvenation, rng):
    """Section 5e: does ``compare_evidence``'s standard error match the spread between
    independent calls?  ``repeats`` independent pools of ``chains`` sequential runs each (DP(1),
    2-D mixture): the sd over pools of the pooled log Ẑ against the mean reported standard
    error (jackknife, as ``compare_evidence``) and the delta method's."""
    from pymc_splitmerge.sampling.smc import pooled_log_evidence

    family, x = _mixture_2d(n)
    prior = PRIORS["DP(1)"]
    smc.log_evidence_runs(prior, family, x[:10], 2, 1, rng, rejuvenation=1)  # warm-up
    start = time.process_time()
    values = smc.log_evidence_runs(prior, family, x, particles, chains * repeats, rng,
                                   rejuvenation=rejuvenation).reshape(repeats, chains)
    seconds = (time.process_time() - start) / values.size
    pooled, jackknife, delta = [], [], []
    for row in values:
        estimate, se = pooled_log_evidence(row)
        relative = np.exp(row - row.max())
        pooled.append(estimate)
        jackknife.append(se)
        delta.append(relative.std(ddof=1) / relative.mean() / np.sqrt(chains))
    pooled = np.array(pooled)
    print(f"## 5e. Reported standard error against the spread: 2-D mixture n = {n}, DP(1), "
          f"{repeats} pools of {chains} chains, L = {particles}, Q = {rejuvenation} "
          f"({seconds:.1f} CPU s per chain)\n")
    print("| sd of log Z per chain | sd of pooled log Z over pools | mean jackknife SE | "
          "mean delta-method SE |")
    print("|---|---|---|---|")
    print(f"| {values.std(ddof=1):.3f} | {pooled.std(ddof=1):.3f} | "
          f"{np.mean(jackknife):.3f} | {np.mean(delta):.3f} |")
    print()


def _options_text(options):
    return (f"ESS {options['ess_threshold']}, steps ≤ {options['max_temperature_step']}, "
            f"{options['n_gibbs_sweeps']} Gibbs sweeps + {options['n_split_merge']} SAMS moves "
            f"({'cluster' if options['cluster_anchors'] else 'uniform'} anchors) per round, "
            f"≤ {options['max_move_rounds']} rounds per stage (correlation ≤ "
            f"{options['correlation_threshold']}), waste-free chains of "
            f"{options['chain_length']}"
            + ("" if options.get("reference_labels") is None
               or options.get("reference", "uniform") == "informed" else
               f", from {options['reference_labels']} uniform labels (prior tempered too)")
            + ("" if options.get("reference", "uniform") != "informed" else
               f", from an informed reference (pilot, floor {options['reference_floor']}, "
               f"{options.get('reference_labels') or 'max(2 K̂, K̂ + 10)'} labels; labelled "
               "Gibbs sweeps and label exchanges)")
            + ("" if options.get("resample_threshold", 1.0) >= 1.0 else
               f", weighted particles resampled at ESS < {options['resample_threshold']} "
               "(conditional-ESS temperatures)"))


def neal_2000(runs, particles, options, rng):
    from pymc_splitmerge.components import NormalKnownCovariance
    from pymc_splitmerge.kernels import tempered_smc
    from pymc_splitmerge.sampling.smc import pooled_log_evidence
    from pymc_splitmerge.testing import exact_posterior

    family = NormalKnownCovariance(mu0=0.0, sigma0=1.0, sigma=0.01)
    prior = DirichletProcessPrior(alpha=1.0)
    x = family.prepare_data(NEAL_2000[:, None])
    exact = exact_posterior(prior, family, NEAL_2000[:, None]).log_evidence
    print(f"## 5b. Neal (2000) data (n = 9, DP(1), N(θ, 0.1²), θ ~ N(0, 1)): enumerated "
          f"log p(y) = {exact:.4f}; {runs} runs\n")
    print("| method | L | mean log Z − exact | sd log Z | pooled − exact (SE) | CPU s / run |")
    print("|---|---|---|---|---|---|")
    prepared = tempered_smc.prepare_tempered(prior, family, x)
    _tempered_result(prior, family, x, 2, rng, prepared, options)  # warm-up
    smc.run_smc(prior, family, x, 2, rng, rejuvenation=5)
    for method, function in (
            ("tempered", lambda: _tempered_result(prior, family, x, particles, rng, prepared,
                                                  options).log_evidence),
            ("sequential", lambda: smc.run_smc(prior, family, x, particles, rng,
                                               rejuvenation=5).log_evidence)):
        values, seconds = _runs(function, runs)
        pooled, se = pooled_log_evidence(values)
        print(f"| {method} | {particles} | {values.mean() - exact:+.4f} | "
              f"{values.std(ddof=1):.4f} | {pooled - exact:+.4f} ({se:.4f}) | {seconds:.3f} |")
    print()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--full", action="store_true", help="the full sizes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip", nargs="*", default=(), choices=("1", "3", "4", "5"),
                        help="sections to skip (1 covers sections 1 and 2)")
    parser.add_argument("--configurations", action="store_true",
                        help="section 5c only: tempered SMC configurations at similar CPU")
    parser.add_argument("--n", type=int, default=1000,
                        help="points of the 2-D mixture in section 5")
    parser.add_argument("--runs", type=int, default=None,
                        help="runs per row of section 5 (default 10 with --full, else 3)")
    parser.add_argument("--particles", type=int, default=20,
                        help="tempered SMC particles in section 5")
    parser.add_argument("--sequential-particles", type=int, default=1000,
                        help="sequential SMC particles in section 5")
    parser.add_argument("--sequential-rejuvenation", type=int, default=20,
                        help="Gibbs rejuvenation Q of the sequential SMC in section 5")
    parser.add_argument("--frontier", nargs="*", default=None, metavar="L,Q",
                        help="section 5d only: sequential SMC (particles, rejuvenation) pairs "
                             "(default: 3000,5 1000,20 300,100), DP(1) and MFM")
    parser.add_argument("--standard-error", nargs=4, type=int, default=None,
                        metavar=("CHAINS", "REPEATS", "L", "Q"),
                        help="section 5e only: REPEATS pools of CHAINS sequential runs (L "
                             "particles, rejuvenation Q): reported SE against the spread")
    parser.add_argument("--sweeps", type=int, default=2,
                        help="tempered Gibbs sweeps per particle and stage")
    parser.add_argument("--split-merge", type=int, default=30,
                        help="tempered SAMS moves per particle and stage")
    parser.add_argument("--ess", type=float, default=0.5,
                        help="relative ESS of each tempering stage")
    parser.add_argument("--max-step", type=float, default=0.05,
                        help="largest temperature step of the tempered SMC")
    parser.add_argument("--rounds", type=int, default=1,
                        help="rounds of moves per stage at most (tempered SMC)")
    parser.add_argument("--correlation", type=float, default=0.1,
                        help="stop moving at a stage once the log likelihoods' correlation "
                             "with the stage's start is at most this")
    parser.add_argument("--cluster-anchors", action="store_true",
                        help="tempered SAMS moves with the default step's cluster anchors")
    parser.add_argument("--chain-length", type=int, default=1,
                        help="waste-free chains of this length (tempered SMC; 1: standard)")
    parser.add_argument("--reference-labels", type=int, default=None, metavar="K",
                        help="tempered SMC from K uniform labels, prior and likelihood "
                             "tempered together (default: from the prior, likelihood only)")
    parser.add_argument("--fixed-schedule", action="store_true",
                        help="section 5: one adaptive pilot run per prior, then the tempered "
                             "runs on its temperatures (Ẑ exactly unbiased)")
    parser.add_argument("--resample-threshold", type=float, default=1.0,
                        help="tempered SMC: weighted particles, resampled only when the ESS "
                             "of their weights falls below this (1: every stage)")
    parser.add_argument("--reference", choices=("uniform", "informed"), default="uniform",
                        help="tempered SMC: 'informed' tempers in labelled space from label "
                             "probabilities fitted to a pilot partition (--split-merge 0; "
                             "--reference-labels K, default max(2 K̂, K̂ + 10))")
    parser.add_argument("--reference-floor", type=float, default=0.05,
                        help="the informed reference's probability spread over all labels")
    parser.add_argument("--pool", type=int, default=1, metavar="P",
                        help="section 5: also pool consecutive runs in groups of P (one "
                             "estimate per sample_smc(chains=P)): sd over groups, DP − MFM "
                             "sign per group")
    parser.add_argument("--skip-sequential", action="store_true",
                        help="section 5: tempered SMC only (no sequential runs beside it)")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    if args.full:
        particles, runs = (10, 30, 100, 300, 1000), 10
        sizes, ulker_runs, pf_particles = (200, 500, 1000), 20, 1000
        chains, draws, n_pymc = 8, 2000, 100
    else:
        particles, runs = (10, 30, 100, 300), 5
        sizes, ulker_runs, pf_particles = (200, 500), 5, 300
        chains, draws, n_pymc = 4, 1000, 60
    if args.configurations:
        tempered_configurations(args.n, args.runs or 4, rng)
        return
    if args.frontier is not None:
        pairs = [tuple(int(v) for v in pair.split(","))
                 for pair in (args.frontier or ("3000,5", "1000,20", "300,100"))]
        sequential_frontier(args.n, args.runs or 5, pairs, ("DP(1)", "MFM(1, Poisson(3))"), rng)
        return
    if args.standard_error is not None:
        standard_error_check(args.n, *args.standard_error, rng)
        return
    print(f"# benchmarks/smc.py ({'full' if args.full else 'reduced default'})")
    if "1" not in args.skip:
        precision_and_bayes_factors(particles, runs, rng)
    if "3" not in args.skip:
        ulker_experiment(sizes, ulker_runs, pf_particles, 100, rng)
    if "4" not in args.skip:
        against_pymc(chains, draws, n_pymc, args.seed)
    if "5" not in args.skip:
        runs = args.runs or (10 if args.full else 3)
        options = {"n_gibbs_sweeps": args.sweeps, "n_split_merge": args.split_merge,
                   "ess_threshold": args.ess, "max_temperature_step": args.max_step,
                   "max_move_rounds": args.rounds, "correlation_threshold": args.correlation,
                   "cluster_anchors": args.cluster_anchors, "chain_length": args.chain_length,
                   "reference_labels": args.reference_labels,
                   "resample_threshold": args.resample_threshold,
                   "reference": args.reference, "reference_floor": args.reference_floor}
        neal_2000(max(runs, 10), 100, options, rng)
        tempered_against_sequential(args.n, runs, args.particles, args.sequential_particles,
                                    options, rng, args.sequential_rejuvenation,
                                    sequential=not args.skip_sequential,
                                    fixed_schedule=args.fixed_schedule, pool=args.pool)


if __name__ == "__main__":
    main()
