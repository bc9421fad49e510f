r"""``sample_smc``: sequential Monte Carlo over partitions with model evidence, PyMC-facing.

The look and feel of :func:`pymc.sample_smc`: *chains* are independent SMC runs and *draws*
are their particles (equally weighted after a final systematic resampling).  The numeric
core is :mod:`pymc_splitmerge.kernels.smc`; this module reads the model (only the partition
may be free), runs the chains and packs an ``InferenceData`` (pymc 5) / ``DataTree`` (pymc 6):

* ``posterior.z`` of shape (chain, draw, n): canonical labels;
* ``sample_stats.log_marginal_likelihood`` (chain): the log of each run's unbiased evidence
  estimate :math:`\hat Z` (spec ``arm_and_smc.md`` §2: :math:`\log\hat Z = \log f(y_1) +
  \sum_{t\ge2}\log\sum_p W^p_{t-1} v^p_t`, plus the annealing reweight of §3);
* ``sample_stats.ess`` (chain, step), ``resampled`` (chain, step) and
  ``log_evidence_increment`` (chain, step): the history of each run.

:func:`compare_evidence` turns several such results into a table of log evidences with Monte
Carlo standard errors across chains and log Bayes factors against the best model.

References
----------
Lomeli, M. (2017). Sequential Monte Carlo for Gibbs-type mixtures (slides).
Ülker, Y., Günsel, B. and Cemgil, A. T. (2010). Sequential Monte Carlo samplers for Dirichlet
process mixtures.  AISTATS.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor
from typing import NamedTuple

import numpy as np
import pandas as pd
import pymc as pm
import xarray as xr

from pymc_splitmerge.analysis._arviz_compat import from_groups, get_group
from pymc_splitmerge.distributions.discovery import discover
from pymc_splitmerge.distributions.mixture import observed_value
from pymc_splitmerge.distributions.priors import PartitionPriorRV
from pymc_splitmerge.kernels import smc as smc_kernel

__all__ = ["compare_evidence", "sample_smc"]


def _partition_variable(model):
    partitions = [rv for rv in model.free_RVs if isinstance(rv.owner.op, PartitionPriorRV)]
    if not partitions:
        raise ValueError(
            "sample_smc needs a partition variable (psm.DirichletProcess, psm.PitmanYor, "
            "psm.FiniteDirichlet or psm.MixtureOfFiniteMixtures) in the model")
    if len(partitions) > 1:
        raise ValueError(
            f"sample_smc supports one partition variable; the model has {len(partitions)}: "
            f"{[rv.name for rv in partitions]}")
    [partition] = partitions
    others = [rv.name for rv in model.free_RVs if rv is not partition]
    if others:
        raise ValueError(
            f"sample_smc needs every hyperparameter fixed, but {others} "
            f"{'is a free random variable' if len(others) == 1 else 'are free random variables'}"
            " of the model; replace it by a constant or pm.Data (SMC over partitions estimates "
            "p(y) for fixed hyperparameters; compare values with psm.compare_evidence)")
    return partition


def _check_arguments(draws, chains, order, anneal, rejuvenation, ess_threshold, resampling):
    for name, value in (("draws", draws), ("chains", chains)):
        if int(value) != value or value < 1:
            raise ValueError(f"{name} must be a positive integer; got {value!r}")
    if not (order is None or (isinstance(order, str) and order == "random")
            or np.ndim(order) == 1):
        raise ValueError(
            f"order must be None (data order), 'random' or a permutation of the points; "
            f"got {order!r}")
    smc_kernel._check_run_arguments(draws, rejuvenation, ess_threshold, resampling, anneal)


def sample_smc(draws: int = 1000, chains: int = 4, model=None, order=None,
               rejuvenation: int = 0, anneal: dict | None = None, ess_threshold: float = 0.5,
               resampling: str = "systematic", random_seed=None, cores=None,
               progressbar: bool = True, previous=None):
    r"""Sequential Monte Carlo over the partition, with an estimate of the model evidence.

    Each chain is one independent SMC run with ``draws`` particles that adds the points one
    at a time (Lomeli 2017, "StandardSMC", with the corrected weights of
    ``specs/arm_and_smc.md`` §2).  With ``rejuvenation = Q > 0`` every step also Gibbs-updates
    a rotating block of ``Q`` past labels (Ülker et al.'s resample-move SMC-G); with
    ``anneal`` the prior's concentration is annealed from ``anneal["start"]`` to its model
    value, :math:`\alpha_t = \alpha + (\alpha_1 - \alpha)(1 - c)^{t-1}` (SMC-A), and the
    population is reweighted to the true target at the end, so the evidence stays unbiased.

    Parameters
    ----------
    draws : int
        Particles per chain (the draws of ``posterior``).
    chains : int
        Independent runs (their spread gives the Monte Carlo error of the evidence).
    model : pm.Model, optional
        The model: one partition prior, one ``ConjugateMixture`` and nothing else free
        (hyperparameters must be constants or ``pm.Data``).
    order : None, "random" or array of int
        Order in which points are added: data order (default), a fresh random permutation
        per chain, or the given permutation.
    rejuvenation : int
        Number of past labels Gibbs-updated per step (Ülker's Q; 0: Lomeli's StandardSMC).
    anneal : dict, optional
        ``{"start": 1.0, "rate": 0.01}`` (Ülker's :math:`\alpha_1` and :math:`c_\alpha`).
    ess_threshold : float
        Resample when the relative effective sample size falls below this.
    resampling : {"systematic", "multinomial"}
    random_seed : int or numpy.random.Generator, optional
    cores : int, optional
        Number of processes running chains in parallel (default: as many as chains and CPU
        cores allow, like :func:`pymc.sample_smc`); ``cores=1`` runs them one after another in
        this process.  Every chain draws from its own generator spawned from ``random_seed``,
        so the result does not depend on ``cores``.
    progressbar : bool
        Print one line per finished chain.
    previous : InferenceData or DataTree, optional
        A ``sample_smc`` result on the first ``n_old`` observations of this model's data (the
        new observations appended at the end, e.g. a model rebuilt with the longer data):
        each chain continues from that chain's particles (equally weighted) and adds only the
        new points, and ``log_marginal_likelihood`` is the previous chain's estimate plus the
        new increments, an unbiased estimate of p(y) for all the data (Ülker et al.'s online
        setting).  ``chains`` and ``draws`` must match the previous result, as must the prior.

    Returns
    -------
    InferenceData (pymc 5) or DataTree (pymc 6)
        ``posterior`` (the partition, canonical labels), ``sample_stats``
        (``log_marginal_likelihood`` per chain; per-step ``ess``, ``resampled``,
        ``log_evidence_increment``) and ``observed_data``.

    Examples
    --------
    >>> with pm.Model() as model:                                         # doctest: +SKIP
    ...     z = psm.DirichletProcess("z", alpha=1.0, n=len(y))
    ...     psm.ConjugateMixture("y", partition=z, component=family, observed=y)
    ...     idata = psm.sample_smc(draws=500, chains=4)
    >>> idata.sample_stats["log_marginal_likelihood"]                      # doctest: +SKIP
    """
    model = pm.modelcontext(model)
    _check_arguments(draws, chains, order, anneal, rejuvenation, ess_threshold, resampling)
    partition = _partition_variable(model)
    described = discover(partition, model)
    point = model.initial_point()
    prior = described.numeric_prior(point)
    family = described.numeric_family(point)
    observed = model.rvs_to_values[described.observed_var]
    observed_array = np.asarray(observed_value(observed))
    x = np.ascontiguousarray(family.prepare_data(observed_array), dtype=np.float64)
    n = x.shape[0]
    if anneal is not None:
        smc_kernel.concentration_name(prior)  # clear error for priors without one
    rng = random_seed if isinstance(random_seed, np.random.Generator) else \
        np.random.default_rng(random_seed)
    start, initial, previous_log_evidence = 0, None, np.zeros(chains)
    if previous is not None:
        start, initial, previous_log_evidence = _previous_population(
            previous, partition.name, described.observed_var.name, observed_array, chains,
            draws, prior)
    fixed_order = None
    if order is not None and not isinstance(order, str):
        fixed_order = np.asarray(order, dtype=np.int64)
        if start and not np.array_equal(np.sort(fixed_order[:start]), np.arange(start)):
            raise ValueError(f"with previous=, order must start with the {start} old points")
    prepared = None
    if order is None or fixed_order is not None:
        prepared = smc_kernel._prepare_run(prior, family, x, fixed_order, anneal, start)

    if cores is None:
        cores = min(chains, os.cpu_count() or 1)
    if int(cores) != cores or cores < 1:
        raise ValueError(f"cores must be a positive integer or None; got {cores!r}")
    # one independent generator per chain, so that the chains do not depend on how they are
    # scheduled (cores = 1 and cores > 1 give identical results for the same random_seed)
    chain_seeds = rng.integers(0, 2**63 - 1, size=chains)
    tasks = []
    for chain in range(chains):
        initial_labels = None
        if start:
            initial_labels = np.zeros((draws, n), dtype=np.int64)
            initial_labels[:, :start] = initial[chain]
        tasks.append(_ChainTask(prior, family, x, int(draws), int(chain_seeds[chain]),
                                rejuvenation, anneal, ess_threshold, resampling, prepared,
                                start, initial_labels))
    workers = min(int(cores), chains)
    if workers > 1:
        methods = multiprocessing.get_all_start_methods()
        context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as executor:
            outputs = list(executor.map(_run_chain, tasks,
                                        chunksize=max(1, -(-chains // workers))))
    else:
        outputs = [_run_chain(task) for task in tasks]

    # the partition variable's own (compact) integer dtype, as pm.sample stores it
    labels = np.empty((chains, draws, n), dtype=partition.dtype)
    log_evidence = np.empty(chains)
    ess = np.empty((chains, n + 1))
    resampled = np.empty((chains, n), dtype=bool)
    increments = np.empty((chains, n + 1))
    final_ess = np.empty(chains)
    seconds = np.empty(chains)
    for chain, output in enumerate(outputs):
        labels[chain] = output["labels"]
        log_evidence[chain] = previous_log_evidence[chain] + output["log_evidence"]
        ess[chain] = output["ess"]
        resampled[chain] = output["resampled"]
        increments[chain] = output["increments"]
        final_ess[chain] = output["final_ess"]
        seconds[chain] = output["seconds"]
        if progressbar:
            print(f"sample_smc: chain {chain + 1}/{chains}: log p(y) = "
                  f"{log_evidence[chain]:.3f}, {int(resampled[chain].sum())} resamplings, "
                  f"{seconds[chain]:.2f} s")

    name = partition.name
    coords = {"chain": np.arange(chains), "draw": np.arange(draws)}
    posterior = xr.Dataset(
        {name: (("chain", "draw", f"{name}_dim_0"), labels)},
        coords={**coords, f"{name}_dim_0": np.arange(n)},
        attrs={"inference_library": "pymc_splitmerge", "sampler": "sample_smc"})
    steps = np.arange(n + 1)
    sample_stats = xr.Dataset(
        {
            "log_marginal_likelihood": (("chain",), log_evidence),
            "ess": (("chain", "smc_step"), ess),
            "resampled": (("chain", "smc_step"), np.c_[resampled, np.zeros((chains, 1), bool)]),
            "log_evidence_increment": (("chain", "smc_step"), increments),
            "final_ess": (("chain",), final_ess),
            "sampling_time": (("chain",), seconds),
        },
        coords={"chain": np.arange(chains), "smc_step": steps},
        attrs={"num_particles": int(draws), "rejuvenation": int(rejuvenation),
               "anneal": repr(anneal), "ess_threshold": float(ess_threshold),
               "resampling": resampling, "order": "data" if order is None else repr(order),
               "prior": repr(prior), "previous_points": int(start)})
    observed_name = described.observed_var.name
    observed_data = xr.Dataset({observed_name: (
        tuple(f"{observed_name}_dim_{d}" for d in range(observed_array.ndim)), observed_array)})
    return from_groups({"posterior": posterior, "sample_stats": sample_stats,
                        "observed_data": observed_data})


class _ChainTask(NamedTuple):
    """Everything one chain needs (picklable: sent to a worker process when cores > 1)."""

    prior: object
    family: object
    x: np.ndarray
    draws: int
    seed: int
    rejuvenation: int
    anneal: dict | None
    ess_threshold: float
    resampling: str
    prepared: object
    start: int
    initial_labels: np.ndarray | None


def _run_chain(task: _ChainTask) -> dict:
    """One SMC chain: the run, then a final systematic resampling to equal weights."""
    clock = time.process_time()
    rng = np.random.default_rng(task.seed)
    prepared = task.prepared
    n = task.x.shape[0]
    if prepared is None:  # order="random": a fresh permutation of the new points per chain
        permutation = np.r_[np.arange(task.start),
                            task.start + rng.permutation(n - task.start)]
        prepared = smc_kernel._prepare_run(task.prior, task.family, task.x, permutation,
                                           task.anneal, task.start)
    result = smc_kernel.run_smc(
        task.prior, task.family, task.x, task.draws, rng, rejuvenation=task.rejuvenation,
        anneal=task.anneal, ess_threshold=task.ess_threshold, resampling=task.resampling,
        prepared=prepared, start=task.start, initial_labels=task.initial_labels)
    weights = np.exp(result.log_weights)
    weights /= weights.sum()
    ancestors = smc_kernel.reference_systematic_resample(weights, rng.random())
    return {"labels": result.labels[ancestors], "log_evidence": result.log_evidence,
            "ess": result.ess, "resampled": result.resampled,
            "increments": result.log_evidence_increments,
            "final_ess": 1.0 / (task.draws * np.sum(weights**2)),
            "seconds": time.process_time() - clock}


def _previous_population(previous, name, observed_name, observed_array, chains, draws, prior):
    """Check a previous ``sample_smc`` result and return (n_old, labels, log evidence)."""
    try:
        old_labels = np.asarray(get_group(previous, "posterior")[name], dtype=np.int64)
        old_stats = get_group(previous, "sample_stats")
        old_log_evidence = np.asarray(old_stats["log_marginal_likelihood"], dtype=float)
        old_observed = np.asarray(get_group(previous, "observed_data")[observed_name])
    except (KeyError, ValueError, TypeError) as error:
        raise ValueError(
            f"previous must be a psm.sample_smc result with posterior.{name}, "
            f"sample_stats.log_marginal_likelihood and observed_data.{observed_name}"
        ) from error
    if old_labels.shape[:2] != (chains, draws):
        raise ValueError(
            f"previous has {old_labels.shape[0]} chains x {old_labels.shape[1]} draws; pass "
            f"chains={old_labels.shape[0]}, draws={old_labels.shape[1]} to continue it")
    start = old_labels.shape[2]
    if start >= observed_array.shape[0]:
        raise ValueError(
            f"previous already covers {start} observations and the model has "
            f"{observed_array.shape[0]}; append the new observations to the data")
    if old_observed.shape[1:] != observed_array.shape[1:] or not np.array_equal(
            old_observed, observed_array[:start]):
        raise ValueError(
            f"the first {start} observations of the model differ from previous's "
            "observed_data; new observations must be appended at the end")
    old_prior = old_stats.attrs.get("prior")
    if old_prior is not None and old_prior != repr(prior):
        raise ValueError(f"previous was run with {old_prior}, this model has {prior!r}")
    return start, old_labels, old_log_evidence


def compare_evidence(results: dict) -> pd.DataFrame:
    r"""Table of log evidences and log Bayes factors from :func:`sample_smc` results.

    Each chain's :math:`\hat Z_c` is unbiased for :math:`p(y)`, so the chains are pooled as
    :math:`\hat Z = \frac1C\sum_c \hat Z_c` (``log_evidence``); its Monte Carlo standard error
    on the log scale is the delta-method :math:`\mathrm{sd}_c(\hat Z_c/\hat Z)/\sqrt{C}`
    (``mcse``).  ``log_bayes_factor`` is against the model of largest evidence, with the
    standard error of the difference of two independent estimates (``bayes_factor_mcse``).

    Parameters
    ----------
    results : dict of str -> InferenceData or DataTree
        ``sample_smc`` results by model name.

    Returns
    -------
    pandas.DataFrame
        Rows by decreasing evidence; columns ``log_evidence``, ``mcse``,
        ``log_evidence_mean_of_chains``, ``log_evidence_sd_of_chains``, ``chains``,
        ``log_bayes_factor``, ``bayes_factor_mcse``.
    """
    if not isinstance(results, dict) or not results:
        raise ValueError("compare_evidence needs a non-empty dict {name: sample_smc result}")
    rows = {}
    for name, data in results.items():
        try:
            values = np.asarray(get_group(data, "sample_stats")["log_marginal_likelihood"],
                                dtype=float).reshape(-1)
        except (KeyError, ValueError, TypeError) as error:
            raise ValueError(
                f"results[{name!r}] has no sample_stats.log_marginal_likelihood; pass the "
                "result of psm.sample_smc") from error
        peak = values.max()
        relative = np.exp(values - peak)
        mean = relative.mean()
        chains = values.size
        mcse = (relative.std(ddof=1) / mean / np.sqrt(chains)) if chains > 1 else np.nan
        rows[name] = {"log_evidence": float(peak + np.log(mean)), "mcse": float(mcse),
                      "log_evidence_mean_of_chains": float(values.mean()),
                      "log_evidence_sd_of_chains": float(values.std(ddof=1))
                      if chains > 1 else np.nan,
                      "chains": int(chains)}
    table = pd.DataFrame.from_dict(rows, orient="index")
    table = table.sort_values("log_evidence", ascending=False)
    best = table.iloc[0]
    table["log_bayes_factor"] = table["log_evidence"] - best["log_evidence"]
    table["bayes_factor_mcse"] = np.sqrt(table["mcse"] ** 2 + best["mcse"] ** 2)
    table.loc[table.index[0], "bayes_factor_mcse"] = 0.0
    return table
