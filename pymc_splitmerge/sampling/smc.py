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

``method="tempered"`` runs the likelihood-tempered SMC of
:mod:`pymc_splitmerge.kernels.tempered_smc` per chain instead (per-stage statistics ``beta``,
``log_evidence_increment``, ``acceptance`` on the ``smc_stage`` dimension).

:func:`compare_evidence` turns several such results into a table of log evidences with Monte
Carlo standard errors across chains (jackknife, :func:`pooled_log_evidence`) and log Bayes
factors against the best model.

References
----------
Lomeli, M. (2017). Sequential Monte Carlo for Gibbs-type mixtures (slides).
Ülker, Y., Günsel, B. and Cemgil, A. T. (2010). Sequential Monte Carlo samplers for Dirichlet
process mixtures.  AISTATS.
"""

from __future__ import annotations

import inspect
import multiprocessing
import os
import time
import warnings
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
from pymc_splitmerge.kernels import tempered_smc as tempered_kernel

__all__ = ["compare_evidence", "pooled_log_evidence", "sample_smc"]


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
               progressbar: bool = True, previous=None, method: str = "sequential",
               n_gibbs_sweeps: int = 2, n_split_merge: int | None = None, temperatures=None,
               max_temperature_step: float = 0.05, max_move_rounds: int = 1,
               correlation_threshold: float = 0.1, cluster_anchors: bool = False,
               chain_length: int = 1, reference_labels: int | None = None,
               resample_threshold: float = 1.0, reference: str = "uniform",
               reference_floor: float | None = None):
    r"""Sequential Monte Carlo over the partition, with an estimate of the model evidence.

    Each chain is one independent SMC run with ``draws`` particles that adds the points one
    at a time (Lomeli 2017, "StandardSMC", with the corrected weights of
    ``specs/arm_and_smc.md`` §2).  With ``rejuvenation = Q > 0`` every step also Gibbs-updates
    a rotating block of ``Q`` past labels (Ülker et al.'s resample-move SMC-G); with
    ``anneal`` the prior's concentration is annealed from ``anneal["start"]`` to its model
    value, :math:`\alpha_t = \alpha + (\alpha_1 - \alpha)(1 - c)^{t-1}` (SMC-A), and the
    population is reweighted to the true target at the end, so the evidence stays unbiased.

    With ``method="tempered"`` each chain is instead a likelihood-tempered SMC
    (:mod:`pymc_splitmerge.kernels.tempered_smc`): the particles start from the partition
    prior and move through :math:`\pi_\beta(c) \propto p(c)\prod_b m(y_b)^\beta`,
    :math:`\beta` from 0 to 1 chosen adaptively so that the relative ESS of every stage's
    incremental weights is ``ess_threshold`` (as :func:`pymc.sample_smc`), resampling at every
    stage (or, with ``resample_threshold < 1``, only when the weights' ESS falls below it) and
    moving each particle by ``n_gibbs_sweeps`` tempered Gibbs sweeps and ``n_split_merge``
    tempered SAMS split-merge moves; :math:`\log\hat Z` is the sum of the logs of the stages'
    weighted mean incremental weights.  It does not depend on the order of the
    points; on overlapping clusters start it from an informed reference
    (``reference="informed"``) or from uniform labels (``reference_labels``); the sequential
    method with ``rejuvenation`` is still more precise (``docs/benchmarks.md``: at n = 1,000,
    ``draws=2000, rejuvenation=30`` spreads by 0.3–0.4 nats between chains at about 32 CPU s;
    the tempered method from an informed reference by 0.9–1.4 nats at 12–14 CPU s, from 30
    uniform labels by 0.65–1.0 nats at about 40 CPU s, both 0.6–1.8 nats lower), and it is the
    one for adding data (``previous``).

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
        Sequential method only.
    method : {"sequential", "tempered"}
        Data-arrival SMC (Lomeli; Ülker et al.) or likelihood-tempered SMC (above).
        ``order``, ``rejuvenation``, ``anneal``, ``resampling`` and ``previous`` belong to the
        sequential method, ``n_gibbs_sweeps``, ``n_split_merge``, ``temperatures`` and the
        arguments below marked ``method="tempered"`` to the tempered one; an argument of the
        other method given a value other than its default is refused (``ValueError``), not
        ignored.
    n_gibbs_sweeps : int
        Tempered Gibbs sweeps per particle and stage (``method="tempered"``).
    n_split_merge : int, optional
        Tempered SAMS split-merge moves per particle and stage (``method="tempered"``);
        default 30, and 0 (the only value allowed) with ``reference="informed"``.
    temperatures : array of float, optional
        A fixed schedule ``0 = β_0 < ... < β_T = 1`` instead of the adaptive one
        (``method="tempered"``); with a fixed schedule :math:`\hat Z` is exactly unbiased,
        with the adaptive one its bias is of order ``1 / draws``.
    max_temperature_step : float
        Largest step of the adaptive schedule (``method="tempered"``): the ESS criterion alone
        jumps to β = 1 as soon as the particles agree, even when they agree on too few
        clusters.
    max_move_rounds : int
        Rounds of moves (``n_gibbs_sweeps`` sweeps + ``n_split_merge`` SAMS moves) per stage
        at most (``method="tempered"``): after each round the correlation across particles
        between their log likelihoods before the moves and now is computed, and the chain
        moves on to the next temperature once it is at most ``correlation_threshold`` (the
        rule of :func:`pymc.sample_smc`'s kernels).
    correlation_threshold : float
        See ``max_move_rounds``.
    cluster_anchors : bool
        Draw the tempered SAMS moves' anchors by the cluster-anchor law of the default step
        (``SAMSStep(anchor_proposal="cluster")``: a block and two of its points, or two blocks
        and a point in each) instead of two uniformly random points (``method="tempered"``).
    chain_length : int
        ``P > 1``: waste-free SMC (Dau & Chopin 2022; ``method="tempered"``): each stage
        resamples ``draws / P`` particles and runs a chain of ``P - 1`` rounds of moves from
        each, all states kept as the next particles (``draws`` a multiple of ``P``,
        ``max_move_rounds = 1``).
    reference_labels : int, optional
        ``K`` (``method="tempered"``): start the particles from partitions in which every point
        takes one of ``K`` labels uniformly and temper prior and likelihood together,
        :math:`\pi_\beta \propto r_K^{1-\beta}\{p(c)\prod_b m(y_b)\}^\beta`, instead of
        starting from the prior and tempering the likelihood alone.  On overlapping clusters
        this avoids the abrupt split of one large block that the likelihood-only path goes
        through near :math:`\beta \approx 0.8` (``docs/benchmarks.md``).  The estimate is of
        :math:`p(y, k \le K)`: choose ``K`` well above the number of clusters the posterior
        supports (it is :math:`p(y)` exactly when ``K`` is at least the prior's largest number
        of blocks; ``sample_smc`` warns when a final particle has ``K`` or more blocks).
    resample_threshold : float
        In ``(0, 1]`` (``method="tempered"``): with ``1`` (default) every stage resamples;
        below 1 the particles keep their weights from stage to stage (still moved at every
        stage), a stage resamples only when the relative ESS of the accumulated weights falls
        below ``resample_threshold`` (and the last stage always), the temperatures follow the
        conditional ESS of Zhou, Johansen & Aston (2016) and :math:`\log\hat Z` adds
        :math:`\log\sum_p W^p w^p` per stage.  Not with ``chain_length > 1``.
    reference : {"uniform", "informed"}
        ``method="tempered"``.  ``"uniform"`` (default): the path of ``reference_labels``
        above (from the prior when it is ``None``).  ``"informed"``: each chain first runs a
        short pilot (greedy allocation, then 20 rounds of a Gibbs sweep and 100 SAMS moves;
        its CPU time counts in ``sampling_time``), whose partition of ``K̂`` blocks gives each
        point label probabilities :math:`q_i` (its collapsed Gibbs weights of joining each
        block, mixed with ``reference_floor`` spread over all ``K`` labels), and tempers in
        labelled space from :math:`r(z)=\prod_i q_i(z_i)` along
        :math:`r(z)^{1-\beta}\{p(c)m(y\mid c)/(K)_k\}^\beta`
        (:mod:`pymc_splitmerge.kernels.tempered_smc`), moving the particles by
        ``n_gibbs_sweeps`` labelled Gibbs sweeps and ``K`` label exchanges per stage (no
        split-merge moves, no waste-free chains, no cluster anchors).  ``K`` is
        ``reference_labels`` or, when that is ``None``, :math:`\max(2\hat K, \hat K + 10)`
        (the labels used are the ``reference_labels`` statistic per chain).  The estimate is
        of :math:`p(y, k \le K)`, as with uniform labels.
    reference_floor : float, optional
        In ``(0, 1]``: the probability of the informed reference spread uniformly over all
        ``K`` labels (``reference="informed"`` only; default 0.05).

    Returns
    -------
    InferenceData (pymc 5) or DataTree (pymc 6)
        ``posterior`` (the partition, canonical labels), ``sample_stats``
        (``log_marginal_likelihood`` per chain; per-step ``ess``, ``resampled``,
        ``log_evidence_increment``) and ``observed_data``.  With ``method="tempered"`` the
        per-stage statistics (dimension ``smc_stage``, NaN after a chain's last stage) are
        ``beta``, ``log_evidence_increment``, ``acceptance``, ``move_rounds`` and
        ``resampled``, with ``stages`` per chain.

    Examples
    --------
    >>> with pm.Model() as model:                                         # doctest: +SKIP
    ...     z = psm.DirichletProcess("z", alpha=1.0, n=len(y))
    ...     psm.ConjugateMixture("y", partition=z, component=family, observed=y)
    ...     idata = psm.sample_smc(draws=500, chains=4)
    >>> idata.sample_stats["log_marginal_likelihood"]                      # doctest: +SKIP
    """
    model = pm.modelcontext(model)
    if method not in ("sequential", "tempered"):
        raise ValueError(f"method must be 'sequential' or 'tempered'; got {method!r}")
    _refuse_other_methods_arguments(method, locals())
    if method == "tempered":
        return _sample_tempered(draws, chains, model, ess_threshold, random_seed, cores,
                                progressbar, n_gibbs_sweeps, n_split_merge, temperatures,
                                max_temperature_step, max_move_rounds, correlation_threshold,
                                cluster_anchors, chain_length, reference_labels,
                                resample_threshold, reference, reference_floor)
    _check_arguments(draws, chains, order, anneal, rejuvenation, ess_threshold, resampling)
    partition, described, prior, family, observed_array, x = _model_data(model)
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

    cores = _check_cores(cores, chains)
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
    outputs = _run_tasks(_run_chain, tasks, cores)

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
    return from_groups({"posterior": posterior, "sample_stats": sample_stats,
                        "observed_data": _observed_data(described, observed_array)})


def _model_data(model):
    """The partition variable, its description, numeric prior and family, data, prepared."""
    partition = _partition_variable(model)
    described = discover(partition, model)
    point = model.initial_point()
    prior = described.numeric_prior(point)
    family = described.numeric_family(point)
    observed = model.rvs_to_values[described.observed_var]
    observed_array = np.asarray(observed_value(observed))
    x = np.ascontiguousarray(family.prepare_data(observed_array), dtype=np.float64)
    return partition, described, prior, family, observed_array, x


def _observed_data(described, observed_array):
    observed_name = described.observed_var.name
    return xr.Dataset({observed_name: (
        tuple(f"{observed_name}_dim_{d}" for d in range(observed_array.ndim)), observed_array)})


def _check_cores(cores, chains):
    if cores is None:
        cores = min(chains, os.cpu_count() or 1)
    if int(cores) != cores or cores < 1:
        raise ValueError(f"cores must be a positive integer or None; got {cores!r}")
    return int(cores)


def _run_tasks(function, tasks, cores):
    """``[function(task) for task in tasks]``, in ``cores`` worker processes if > 1."""
    workers = min(int(cores), len(tasks))
    if workers <= 1:
        return [function(task) for task in tasks]
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as executor:
        return list(executor.map(function, tasks, chunksize=max(1, -(-len(tasks) // workers))))


#: ``reference_floor`` of ``reference="informed"`` when none is given
DEFAULT_REFERENCE_FLOOR = 0.05

#: the arguments of :func:`sample_smc` that only one method reads
_METHOD_ARGUMENTS = {
    "sequential": ("order", "rejuvenation", "anneal", "resampling", "previous"),
    "tempered": ("n_gibbs_sweeps", "n_split_merge", "temperatures", "max_temperature_step",
                 "max_move_rounds", "correlation_threshold", "cluster_anchors", "chain_length",
                 "reference_labels", "resample_threshold", "reference", "reference_floor"),
}


def _refuse_other_methods_arguments(method: str, given: dict) -> None:
    """``ValueError`` naming every argument of the other method that is not at its default
    (it would be ignored silently)."""
    other = "tempered" if method == "sequential" else "sequential"
    parameters = inspect.signature(sample_smc).parameters
    changed = []
    for name in _METHOD_ARGUMENTS[other]:
        value, default = given[name], parameters[name].default
        unchanged = value is default or (
            default is not None and np.ndim(value) == 0 and value == default)
        if not unchanged:
            changed.append(name)
    if changed:
        verb = "belongs" if len(changed) == 1 else "belong"
        raise ValueError(f"{', '.join(changed)} {verb} to method={other!r} and would be "
                         f"ignored by method={method!r}: leave them out, or pass "
                         f"method={other!r}")


def _check_reference(reference, reference_floor, n_split_merge, cluster_anchors,
                     chain_length) -> bool:
    """Validate ``reference`` and the options it excludes; ``True`` for ``"informed"``."""
    if reference not in ("uniform", "informed"):
        raise ValueError(f"reference must be 'uniform' or 'informed'; got {reference!r}")
    if reference == "uniform":
        if reference_floor is not None:
            raise ValueError("reference_floor belongs to reference='informed'")
        return False
    if reference_floor is not None and not 0.0 < float(reference_floor) <= 1.0:
        raise ValueError(f"reference_floor must be in (0, 1]; got {reference_floor!r}")
    excluded = [name for name, given in (("n_split_merge", n_split_merge not in (None, 0)),
                                         ("cluster_anchors", bool(cluster_anchors)),
                                         ("chain_length", chain_length != 1)) if given]
    if excluded:
        raise ValueError(f"{', '.join(excluded)}: reference='informed' moves the labels by "
                         "Gibbs sweeps and label exchanges (no split-merge moves, no "
                         "waste-free chains); leave them at their defaults")
    return True


def _sample_tempered(draws, chains, model, ess_threshold, random_seed, cores, progressbar,
                     n_gibbs_sweeps, n_split_merge, temperatures, max_temperature_step,
                     max_move_rounds, correlation_threshold, cluster_anchors, chain_length,
                     reference_labels, resample_threshold, reference, reference_floor):
    """``sample_smc(method="tempered")``: independent likelihood-tempered SMC runs."""
    for name, value in (("draws", draws), ("chains", chains)):
        if int(value) != value or value < 1:
            raise ValueError(f"{name} must be a positive integer; got {value!r}")
    informed = _check_reference(reference, reference_floor, n_split_merge, cluster_anchors,
                                chain_length)
    if n_split_merge is None:
        n_split_merge = 0 if informed else 30
    tempered_kernel._check_tempered_arguments(draws, n_gibbs_sweeps, n_split_merge,
                                              ess_threshold, temperatures, max_temperature_step,
                                              max_move_rounds, correlation_threshold)
    tempered_kernel._check_chain_length(chain_length, draws, max_move_rounds)
    tempered_kernel._check_resample_threshold(resample_threshold, chain_length)
    partition, described, prior, family, observed_array, x = _model_data(model)
    n = x.shape[0]
    if reference_labels is not None:
        tempered_kernel.reference_log_v(reference_labels, n)  # the clear error, early
        if informed and reference_labels > n:
            raise ValueError(f"reference_labels ({reference_labels}) must be at most the "
                             f"number of points ({n}) with reference='informed'")
    rng = random_seed if isinstance(random_seed, np.random.Generator) else \
        np.random.default_rng(random_seed)
    cores = _check_cores(cores, chains)
    prepared = tempered_kernel.prepare_tempered(prior, family, x)
    chain_seeds = rng.integers(0, 2**63 - 1, size=chains)
    options = {"n_gibbs_sweeps": int(n_gibbs_sweeps), "n_split_merge": int(n_split_merge),
               "ess_threshold": float(ess_threshold), "temperatures": temperatures,
               "max_temperature_step": float(max_temperature_step),
               "max_move_rounds": int(max_move_rounds),
               "correlation_threshold": float(correlation_threshold),
               "cluster_anchors": bool(cluster_anchors), "chain_length": int(chain_length),
               "reference_labels": None if reference_labels is None else int(reference_labels),
               "resample_threshold": float(resample_threshold)}
    pilot = None
    if informed:
        if reference_floor is None:
            reference_floor = DEFAULT_REFERENCE_FLOOR
        pilot = {"num_labels": options.pop("reference_labels"),
                 "floor": float(reference_floor)}
    tasks = [_TemperedTask(prior, family, x, int(draws), int(seed), prepared, options, pilot)
             for seed in chain_seeds]
    outputs = _run_tasks(_run_tempered_chain, tasks, cores)
    stages = max(len(output.log_evidence_increments) for output, *_ in outputs)
    labels = np.empty((chains, draws, n), dtype=partition.dtype)
    log_evidence = np.empty(chains)
    beta = np.full((chains, stages), np.nan)
    increments = np.full((chains, stages), np.nan)
    acceptance = np.full((chains, stages), np.nan)
    rounds = np.full((chains, stages), np.nan)
    resampled = np.zeros((chains, stages), dtype=bool)
    counts = np.empty(chains, dtype=np.int64)
    seconds = np.empty(chains)
    num_labels = np.empty(chains, dtype=np.int64)
    for chain, (output, elapsed, labels_used) in enumerate(outputs):
        num_labels[chain] = -1 if labels_used is None else labels_used
        count = len(output.log_evidence_increments)
        labels[chain] = output.labels
        log_evidence[chain] = output.log_evidence
        beta[chain, :count] = output.temperatures[1:]
        increments[chain, :count] = output.log_evidence_increments
        acceptance[chain, :count] = output.acceptance
        rounds[chain, :count] = output.move_rounds
        resampled[chain, :count] = output.resampled
        counts[chain] = count
        seconds[chain] = elapsed
        if progressbar:
            print(f"sample_smc (tempered): chain {chain + 1}/{chains}: log p(y) = "
                  f"{log_evidence[chain]:.3f}, {count} stages, {elapsed:.2f} s")
    most_blocks = labels.max(axis=(1, 2), initial=0) + 1  # canonical labels 0 .. k - 1
    limits = num_labels if informed else np.full(chains, -1 if reference_labels is None
                                                 else int(reference_labels))
    reached = (limits > 0) & (limits < n) & (most_blocks >= limits)
    if reached.any():
        chain = int(np.flatnonzero(reached)[0])
        warnings.warn(
            f"a final particle has {most_blocks[chain]} blocks, at least the reference's "
            f"{limits[chain]} labels: log_marginal_likelihood estimates p(y, k <= "
            f"{limits[chain]}), which may then fall short of p(y); increase "
            "reference_labels", UserWarning, stacklevel=3)
    name = partition.name
    posterior = xr.Dataset(
        {name: (("chain", "draw", f"{name}_dim_0"), labels)},
        coords={"chain": np.arange(chains), "draw": np.arange(draws), f"{name}_dim_0":
                np.arange(n)},
        attrs={"inference_library": "pymc_splitmerge", "sampler": "sample_smc"})
    sample_stats = xr.Dataset(
        {
            "log_marginal_likelihood": (("chain",), log_evidence),
            "beta": (("chain", "smc_stage"), beta),
            "log_evidence_increment": (("chain", "smc_stage"), increments),
            "acceptance": (("chain", "smc_stage"), acceptance),
            "move_rounds": (("chain", "smc_stage"), rounds),
            "resampled": (("chain", "smc_stage"), resampled),
            "stages": (("chain",), counts),
            "sampling_time": (("chain",), seconds),
            **({"reference_labels": (("chain",), num_labels)} if informed else {}),
        },
        coords={"chain": np.arange(chains), "smc_stage": np.arange(stages)},
        attrs={"method": "tempered", "num_particles": int(draws),
               "n_gibbs_sweeps": int(n_gibbs_sweeps), "n_split_merge": int(n_split_merge),
               "ess_threshold": float(ess_threshold),
               "max_temperature_step": float(max_temperature_step),
               "max_move_rounds": int(max_move_rounds),
               "correlation_threshold": float(correlation_threshold),
               "cluster_anchors": int(bool(cluster_anchors)),
               "chain_length": int(chain_length),
               "resample_threshold": float(resample_threshold),
               "reference_labels": "none" if reference_labels is None else int(reference_labels),
               "reference": str(reference),
               "reference_floor": "none" if reference_floor is None else float(reference_floor),
               "temperatures": "adaptive" if temperatures is None else repr(temperatures),
               "prior": repr(prior)})
    return from_groups({"posterior": posterior, "sample_stats": sample_stats,
                        "observed_data": _observed_data(described, observed_array)})


class _TemperedTask(NamedTuple):
    prior: object
    family: object
    x: np.ndarray
    draws: int
    seed: int
    prepared: object
    options: dict
    pilot: dict | None = None


def _run_tempered_chain(task: _TemperedTask):
    """One tempered run; with an informed reference its pilot first (in the run's CPU time).
    Returns the result, the CPU seconds and the number of labels of the informed reference
    (``None`` otherwise)."""
    clock = time.process_time()
    rng = np.random.default_rng(task.seed)
    options = dict(task.options)
    num_labels = None
    if task.pilot is not None:
        pilot = tempered_kernel.pilot_partition(task.prior, task.family, task.x, rng)
        num_labels = task.pilot["num_labels"]
        if num_labels is None:
            num_labels = tempered_kernel.default_reference_labels(
                int(pilot.max()) + 1, task.prepared.log_v)
        options["reference_probabilities"] = tempered_kernel.informed_reference(
            task.prior, task.family, task.x, pilot, num_labels, task.pilot["floor"])
    result = tempered_kernel.run_tempered_smc(
        task.prior, task.family, task.x, task.draws, rng, prepared=task.prepared, **options)
    return result, time.process_time() - clock, num_labels


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


def pooled_log_evidence(values) -> tuple[float, float]:
    r"""Pool independent log evidence estimates: ``(log mean exp, jackknife standard error)``.

    :math:`\log\hat Z = \log\frac1C\sum_c \hat Z_c`; its standard error is the jackknife
    :math:`\sqrt{\frac{C-1}{C}\sum_c (\theta_{(c)} - \bar\theta)^2}` over the leave-one-out
    estimates :math:`\theta_{(c)} = \log\frac1{C-1}\sum_{c'\ne c}\hat Z_{c'}` (NaN for one
    chain).  For nearly equal :math:`\hat Z_c` it equals the delta method
    :math:`\mathrm{sd}(\hat Z_c/\hat Z)/\sqrt C`; for log-normal :math:`\hat Z_c` with a
    log-scale spread of 1-4 nats it stays closer to the spread between pools than the delta
    method, which is 1.3-3 times too small there (``tests/test_tempered_smc.py``).

    Parameters
    ----------
    values : array_like of float, shape (C,)
        ``log Ẑ_c`` of independent runs.

    Returns
    -------
    log_evidence : float
    mcse : float
    """
    values = np.asarray(values, dtype=float).reshape(-1)
    count = values.size
    peak = values.max()
    relative = np.exp(values - peak)
    estimate = float(peak + np.log(relative.mean()))
    if count < 2:
        return estimate, float("nan")
    leave_one_out = np.log((relative.sum() - relative) / (count - 1)) + peak
    spread = np.sum((leave_one_out - leave_one_out.mean()) ** 2)
    return estimate, float(np.sqrt((count - 1) / count * spread))


def compare_evidence(results: dict) -> pd.DataFrame:
    r"""Table of log evidences and log Bayes factors from :func:`sample_smc` results.

    Each chain's :math:`\hat Z_c` is unbiased for :math:`p(y)`, so the chains are pooled as
    :math:`\hat Z = \frac1C\sum_c \hat Z_c` (``log_evidence``); its Monte Carlo standard error
    on the log scale (``mcse``) is the jackknife over chains (:func:`pooled_log_evidence`).
    It matches the spread between repeated calls when the chains' :math:`\log\hat Z_c` agree
    to about a nat (on the 2-D mixture of ``benchmarks/smc.py``, four chains 0.5 nats apart:
    mean standard error 0.23 against a spread of 0.22 between calls); with four chains
    differing by about 1.5 nats it was about 0.7 of that spread (``docs/benchmarks.md``), so
    use settings whose chains agree (for the sequential method, ``rejuvenation``) or more
    chains.
    ``log_bayes_factor`` is against the model of largest evidence, with the
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
        estimate, mcse = pooled_log_evidence(values)
        chains = values.size
        rows[name] = {"log_evidence": estimate, "mcse": mcse,
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
