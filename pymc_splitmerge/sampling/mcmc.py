"""``psm.sample``: ``pm.sample`` with convergence checks that make sense for a partition.

PyMC ends every ``pm.sample`` run with R-hat / ESS checks (``pymc.stats.convergence.
run_convergence_checks``) over *every* free variable it finds in the posterior.  For a
partition variable these numbers are computed on the raw label vector: they are meaningless
(relabelling the clusters moves them, and a label vector is only identified up to that), they
warn for no reason or stay silent when the chain is stuck, and at large ``n`` they cost most of
the post-processing time (one R-hat and two ESS per observation).  PyMC offers no
hook to exclude a variable from these checks (pymc 5.28 and 6.4:
``run_convergence_checks(idata, model)`` takes every free RV of the model present in the
posterior; step methods cannot declare anything; ``compute_convergence_checks`` is all or
nothing), so :func:`sample` calls ``pm.sample(..., compute_convergence_checks=False)`` and
then:

1. adds the group ``"partition_diagnostics"`` (:func:`~pymc_splitmerge.add_partition_quantities`:
   number of clusters, fractions of the observations in the largest clusters, log joint
   density, co-clustering indicators of the most uncertain pairs) to the returned
   ``InferenceData`` / ``DataTree``;
2. runs PyMC's own checks on every variable *except* the partition variables (same messages,
   same logger);
3. runs the same R-hat (> 1.01) and ESS-per-chain (< 100) checks on the label-invariant
   quantities (number of clusters, log joint, largest-cluster fractions) and logs warnings in
   PyMC's style (:func:`partition_convergence_checks`).

A plain ``pm.sample`` gets steps 2 and 3 too: importing the package replaces the name
``run_convergence_checks`` in ``pymc.sampling.mcmc`` (the module that calls it) by
:func:`label_invariant_convergence_checks`, which hands models without a partition variable to
PyMC's function unchanged (:func:`~pymc_splitmerge.sampling.hooks.install_pymc_hooks`, the one
module of every wrapper of a PyMC name; ``install_pymc_hooks(False)`` restores PyMC's).

References
----------
Vehtari, A., Gelman, A., Simpson, D., Carpenter, B. and Bürkner, P.-C. (2021). Rank-normalization,
folding, and localization: an improved R-hat. Bayesian Analysis 16(2), 667-718.
Jain, S. and Neal, R. M. (2004). J. Comput. Graph. Statist. 13(1), 158-182 (label-invariant
summaries of partition chains).
"""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import xarray as xr
from pymc.model import modelcontext
from pymc.stats import convergence
from pymc.stats.convergence import SamplerWarning, WarningType

from pymc_splitmerge.analysis import _arviz_compat as compat
from pymc_splitmerge.analysis.log_joint import numeric_log_joint
from pymc_splitmerge.analysis.quantities import DIAGNOSTICS_GROUP, partition_quantities
from pymc_splitmerge.distributions.priors import PartitionPriorRV

__all__ = [
    "CHECKED_QUANTITIES",
    "label_invariant_convergence_checks",
    "move_labels_out_of_posterior",
    "numeric_log_joint",
    "partition_convergence_checks",
    "sample",
]

#: label-invariant quantities whose R-hat / ESS are checked after sampling
CHECKED_QUANTITIES = ("n_clusters", "log_joint", "fraction_in_largest_clusters")

#: above this many observations psm.sample tracks no co-clustering pairs by default (choosing
#: the most uncertain pairs costs O(draws * n^2))
MAX_OBSERVATIONS_FOR_PAIRS = 2000

RHAT_THRESHOLD = 1.01  # PyMC's thresholds (pymc.stats.convergence.run_convergence_checks)
ESS_PER_CHAIN_THRESHOLD = 100
_REFERENCE = "See https://arxiv.org/abs/1903.08008 for details"


def partition_variable_names(model) -> list[str]:
    """Names of the partition variables (DirichletProcess, PitmanYor, ...) of ``model``."""
    return [rv.name for rv in model.free_RVs
            if rv.owner is not None and isinstance(rv.owner.op, PartitionPriorRV)]


def diagnostics_group_name(var_name: str, partition_names) -> str:
    """``"partition_diagnostics"``, or ``"partition_diagnostics_<name>"`` with several partitions."""
    return DIAGNOSTICS_GROUP if len(partition_names) == 1 else f"{DIAGNOSTICS_GROUP}_{var_name}"


def _without_variables(data, names, model):
    """A light container with the posterior's model variables minus ``names`` (and
    sample_stats), no copies (PyMC's checks never see the label-invariant quantities)."""
    posterior = compat.get_group(data, "posterior")
    kept = [name for name in posterior.data_vars if name in model.named_vars and name not in names]
    groups = {"posterior": posterior[kept]}
    if compat.has_group(data, "sample_stats"):
        groups["sample_stats"] = compat.get_group(data, "sample_stats")
    return compat.from_groups(groups, inference_data=compat.is_inference_data(data))


def _quantity_rows(dataset: xr.Dataset):
    for name in CHECKED_QUANTITIES:
        if name not in dataset:
            continue
        variable = dataset[name]
        extra = [dim for dim in variable.dims if dim not in ("chain", "draw")]
        if not extra:
            yield name, np.asarray(variable.values, dtype=np.float64)
            continue
        (dim,) = extra
        for index, coordinate in enumerate(dataset.coords[dim].values):
            yield f"{name}[{coordinate}]", np.asarray(variable.isel({dim: index}).values,
                                                      dtype=np.float64)


def posterior_quantity_name(quantity: str, var_name: str, partition_names, model) -> str:
    """Name of a label-invariant ``quantity`` of ``var_name`` in the posterior group.

    The plain name (``"n_clusters"``) for a model with one partition variable, else (or when the
    model has a variable of that name) ``"<var_name>_<quantity>"``.
    """
    if len(partition_names) == 1 and quantity not in model.named_vars:
        return quantity
    return f"{var_name}_{quantity}"


def move_labels_out_of_posterior(data, model):
    """Put the label draws of ``data`` in group ``"labels"`` and label-invariant quantities in
    the posterior, in place; return ``data``.

    What a ``pm.sample`` run returns once this package is imported (see
    :func:`~pymc_splitmerge.sampling.hooks.install_pymc_hooks`).  The posterior keeps every other variable and
    gains, for each partition variable, ``n_clusters`` (chain, draw),
    ``fraction_in_largest_clusters`` (chain, draw, largest; the m = 1, 2, 3 largest clusters,
    only those m below the largest number of clusters of the trace, as the others are 1 in
    every draw) and ``log_joint`` (chain, draw; left out when the model has no collapsed
    likelihood of the partition), named by
    :func:`posterior_quantity_name`; the labels move to the group
    :data:`~pymc_splitmerge.analysis._arviz_compat.LABELS_GROUP` (``"labels"``, same dims and
    coordinates).  So ``az.summary(idata)`` and ``az.plot_trace(idata)`` show the continuous
    parameters and the label-invariant quantities, not one row or panel per observation, while
    every analysis function of this package, ``psm.sample_components`` and
    ``pm.sample_posterior_predictive`` (through
    :func:`~pymc_splitmerge.sampling.hooks.sample_posterior_predictive`) read the labels from
    their group.  A container whose posterior holds no partition variable is returned unchanged.
    """
    posterior = compat.get_group(data, "posterior")
    partition_names = [name for name in partition_variable_names(model) if name in posterior]
    if not partition_names:
        return data
    quantities = {}
    for var_name in partition_names:
        try:
            log_joint = numeric_log_joint(data, model, var_name)
        except (TypeError, ValueError):  # no collapsed likelihood found: the rest only
            log_joint = None
        dataset = partition_quantities(data, var_name, num_pairs=0, log_joint=log_joint)
        # the m largest clusters hold every observation in every draw once m >= the largest
        # number of clusters: a constant 1 (NaN R-hat, NumPy warnings in az.summary), left out
        informative = int(dataset["n_clusters"].max()) - 1
        values = {quantity: dataset[quantity] for quantity in CHECKED_QUANTITIES
                  if quantity in dataset}
        values["fraction_in_largest_clusters"] = values["fraction_in_largest_clusters"].isel(
            largest=slice(0, informative))
        for quantity, value in values.items():
            if value.size:
                name = posterior_quantity_name(quantity, var_name, partition_names, model)
                if name != quantity and "largest" in value.dims:  # one length per partition
                    value = value.rename(largest=f"{var_name}_largest")
                quantities[name] = value
    labels = posterior[partition_names]
    remaining = posterior.drop_vars(partition_names)
    orphans = [name for name in remaining.coords
               if name not in ("chain", "draw") and name in labels.dims
               and not any(name in variable.dims for variable in remaining.data_vars.values())]
    compat.replace_group(data, "posterior", remaining.drop_vars(orphans).assign(quantities))
    compat.add_group(data, compat.LABELS_GROUP, labels)
    return data


def _posterior_quantity_checks(data, model, partition_names) -> list:
    """The label-invariant R-hat / ESS checks on the quantities stored in the posterior."""
    posterior = compat.get_group(data, "posterior")
    warnings = []
    for var_name in partition_names:
        names = {quantity: posterior_quantity_name(quantity, var_name, partition_names, model)
                 for quantity in CHECKED_QUANTITIES}
        dataset = xr.Dataset({quantity: posterior[name] for quantity, name in names.items()
                              if name in posterior})
        warnings += _quantity_checks(dataset, var_name)
    return warnings


def _format(values: dict[str, float], digits: int) -> str:
    return ", ".join(f"{name}: {value:.{digits}f}" for name, value in values.items())


def partition_convergence_checks(data, model=None, *, var_names=None):
    """PyMC-style R-hat / ESS checks of the label-invariant quantities of each partition.

    Parameters
    ----------
    data : InferenceData or DataTree
        With the group(s) added by :func:`sample` (or by
        :func:`~pymc_splitmerge.add_partition_quantities`, group ``"partition_diagnostics"``).
    model : pymc.Model, optional
        Used to find the partition variables when ``var_names`` is not given.
    var_names : list of str, optional
        Partition variables to check.

    Returns
    -------
    list of pymc.stats.convergence.SamplerWarning
        One ``CONVERGENCE`` warning (level ``"info"``, like PyMC's) when an R-hat exceeds 1.01
        and one (level ``"error"``) when the bulk ESS per chain is below 100, naming the
        quantities; empty when there are fewer than 100 draws or a single chain (PyMC's own
        checks already say so).
    """
    if var_names is None:
        var_names = partition_variable_names(modelcontext(model))
    warnings = []
    for var_name in var_names:
        group = diagnostics_group_name(var_name, var_names)
        if not compat.has_group(data, group):
            raise ValueError(f"the data has no group {group!r}: run psm.sample or "
                             "psm.add_partition_quantities first")
        warnings += _quantity_checks(compat.get_group(data, group), var_name)
    return warnings


def _quantity_checks(dataset: xr.Dataset, var_name: str) -> list:
    """The R-hat / ESS-per-chain checks of one partition's label-invariant quantities."""
    n_chains, n_draws = dataset.sizes["chain"], dataset.sizes["draw"]
    if n_draws < 100 or n_chains < 2:
        return []
    rhats, ess_per_chain = {}, {}
    for name, values in _quantity_rows(dataset):
        rhat = compat.rhat(values)
        ess = compat.ess(values, "bulk") / n_chains
        if np.isfinite(rhat) and rhat > RHAT_THRESHOLD:
            rhats[name] = rhat
        if np.isfinite(ess) and ess < ESS_PER_CHAIN_THRESHOLD:
            ess_per_chain[name] = ess
    subject = f"the label-invariant quantities of the partition {var_name!r}"
    warnings = []
    if rhats:
        warnings.append(SamplerWarning(
            WarningType.CONVERGENCE,
            f"The rhat statistic is larger than {RHAT_THRESHOLD} for some of {subject} "
            f"({_format(rhats, 3)}). This indicates problems during sampling. {_REFERENCE}",
            "info", extra=rhats))
    if ess_per_chain:
        warnings.append(SamplerWarning(
            WarningType.CONVERGENCE,
            f"The effective sample size per chain is smaller than "
            f"{ESS_PER_CHAIN_THRESHOLD} for some of {subject} ({_format(ess_per_chain, 0)}). "
            f"A higher number is needed for reliable rhat and ess computation. {_REFERENCE}",
            "error", extra=ess_per_chain))
    return warnings


def _pymc_checks_without_partitions(data, model, partition_names):
    """PyMC's convergence checks on every variable except the partition variables."""
    posterior = compat.posterior_with_labels(data)
    others = [rv.name for rv in model.free_RVs
              if rv.name in posterior and rv.name not in partition_names]
    if others:
        return convergence.run_convergence_checks(_without_variables(data, partition_names, model),
                                                 model)
    # nothing left for PyMC's R-hat / ESS: its other messages, same wording
    warnings = convergence.warn_divergences(data) + convergence.warn_treedepth(data)
    if posterior.sizes["draw"] < 100:
        message = "The number of samples is too small to check convergence reliably."
    elif posterior.sizes["chain"] == 1:
        message = ("Only one chain was sampled, this makes it impossible to run some "
                   "convergence checks")
    elif posterior.sizes["chain"] < 4:
        message = ("We recommend running at least 4 chains for robust computation of "
                   "convergence diagnostics")
    else:
        return warnings
    return [*warnings, SamplerWarning(WarningType.BAD_PARAMS, message, "info")]


def _add_diagnostics_groups(result, model, partition_names, diagnostics_kwargs=None) -> list:
    """Add each partition's label-invariant quantities to ``result`` (what :func:`sample` adds).

    Returns the names of the partitions whose group was added: a partition left out of the
    trace (``var_names``) has none, and one whose quantities fail to compute gets a warning
    instead (the trace is never lost to a post-run computation).
    """
    options = dict(diagnostics_kwargs or {})
    posterior = compat.posterior_with_labels(result)
    added = []
    for var_name in partition_names:
        if var_name not in posterior:
            continue
        n = posterior[var_name].shape[-1]
        defaults = {"num_pairs": 3 if n <= MAX_OBSERVATIONS_FOR_PAIRS else 0}
        stored = posterior_quantity_name("log_joint", var_name, partition_names, model)
        if "model" not in options and "log_joint" not in options:
            if stored in posterior and compat.has_group(result, compat.LABELS_GROUP):
                defaults["log_joint"] = posterior[stored].values  # computed by pm.sample
            else:
                defaults["model"] = model  # the log joint, with the numba kernels
        try:
            dataset = partition_quantities(result, var_name, **{**defaults, **options})
        except Exception as error:  # noqa: BLE001 - reported, the trace is returned
            _warn_post_run_failure(f"the label-invariant quantities of {var_name!r}", error)
            continue
        compat.add_group(result, diagnostics_group_name(var_name, partition_names), dataset)
        added.append(var_name)
    return added


def _warn_post_run_failure(what: str, error: Exception) -> None:
    """Report a post-run computation that failed; sampling's result is still returned."""
    warnings.warn(
        f"computing {what} after sampling failed ({type(error).__name__}: {error}); the trace "
        "is returned without them", RuntimeWarning, stacklevel=3)


def sample(*args, partition_diagnostics: bool = True, diagnostics_kwargs=None, **kwargs):
    """``pm.sample`` with label-invariant convergence checks and partition diagnostics.

    Takes every argument of ``pm.sample`` (passed through unchanged, except
    ``compute_convergence_checks``, handled here).  After sampling:

    * the group ``"partition_diagnostics"`` (``"partition_diagnostics_<name>"`` for each
      partition when the model has several) holds the label-invariant quantities of every
      draw (:func:`~pymc_splitmerge.partition_quantities` with the model's log joint; the
      co-clustering indicators of the three most uncertain pairs only up to
      ``MAX_OBSERVATIONS_FOR_PAIRS = 2000`` observations, as choosing them costs
      O(draws n²));
    * if ``compute_convergence_checks`` (default True): PyMC's R-hat / ESS checks run on every
      variable except the partition variables, and the same checks run on the number of
      clusters, the log joint and the largest-cluster fractions
      (:func:`partition_convergence_checks`); warnings are logged like PyMC's (unless
      ``quiet=True``);
    * a partition left out by ``var_names`` gets no group; a post-run computation that fails
      gives a ``RuntimeWarning`` naming it, and the trace is returned all the same.

    Parameters
    ----------
    *args, **kwargs
        Arguments of ``pm.sample`` (``draws``, ``tune``, ``step``, ``chains``, ``cores``,
        ``random_seed``, ``initvals``, ``model``, ``idata_kwargs``, ``quiet``, ...).
    partition_diagnostics : bool, default True
        Add the diagnostics group(s).  Needed for the partition checks; with False only
        PyMC's checks on the other variables run.
    diagnostics_kwargs : dict, optional
        Passed to :func:`~pymc_splitmerge.partition_quantities` (e.g. ``num_largest``,
        ``num_pairs``, ``reference``).

    Returns
    -------
    InferenceData (pymc 5) or DataTree (pymc 6), or what ``pm.sample`` returns when
    ``return_inferencedata=False`` (then no diagnostics group and no checks).

    Notes
    -----
    As for a plain ``pm.sample``, the label draws are in the group ``"labels"`` and the
    posterior holds the label-invariant quantities (:func:`move_labels_out_of_posterior`), so
    ``az.summary(idata)`` gives no row per observation.
    """
    model = modelcontext(kwargs.get("model"))
    kwargs["model"] = model
    checks = bool(kwargs.pop("compute_convergence_checks", True))
    quiet = bool(kwargs.get("quiet", False))
    result = pm.sample(*args, compute_convergence_checks=False, **kwargs)
    if not (compat.is_inference_data(result) or compat.is_datatree(result)):
        return result
    partition_names = partition_variable_names(model)
    checked = []
    if partition_diagnostics:
        checked = _add_diagnostics_groups(result, model, partition_names, diagnostics_kwargs)
    if checks:
        try:
            found = _pymc_checks_without_partitions(result, model, partition_names)
            if checked:
                found += [warning for var_name in checked for warning in _quantity_checks(
                    compat.get_group(result, diagnostics_group_name(var_name, partition_names)),
                    var_name)]
        except Exception as error:  # noqa: BLE001 - reported, the trace is returned
            _warn_post_run_failure("the convergence checks", error)
        else:
            if not quiet:
                convergence.log_warnings(found)
    return result


def label_invariant_convergence_checks(idata, model) -> list:
    """What a plain ``pm.sample`` checks at the end of a run once this package is imported.

    A drop-in for ``pymc.stats.convergence.run_convergence_checks(idata, model)``: models
    without a partition variable get PyMC's function itself.  For a model with partition
    variables, PyMC's checks run on every *other* variable (the R-hat / ESS of a raw label
    vector mean nothing; see the module docstring) and the same R-hat > 1.01 / ESS-per-chain
    < 100 checks run on each partition's label-invariant quantities (number of clusters, log
    joint, largest-cluster fractions), computed here and not stored: :func:`sample` stores
    them as the group ``"partition_diagnostics"``.
    """
    partition_names = partition_variable_names(model)
    if not partition_names:
        return convergence.run_convergence_checks(idata, model)
    found = _pymc_checks_without_partitions(idata, model, partition_names)
    posterior = compat.posterior_with_labels(idata)
    for var_name in partition_names:
        if var_name not in posterior:
            continue
        try:
            try:
                log_joint = numeric_log_joint(idata, model, var_name)
            except (TypeError, ValueError):  # no collapsed likelihood found: check the rest
                log_joint = None
            dataset = partition_quantities(idata, var_name, num_pairs=0, log_joint=log_joint)
            found += _quantity_checks(dataset, var_name)
        except Exception as error:  # noqa: BLE001 - reported, pm.sample returns its trace
            _warn_post_run_failure(
                f"the label-invariant convergence checks of {var_name!r}", error)
    return found
