"""What ``pm.sample`` does with a model's partition variables before the first draw.

Two gaps in PyMC 5.28 / 6.4 that a partition variable runs into, closed by wrapping two names
that ``pymc.sampling.mcmc`` calls (PyMC's own functions are untouched, as for
:func:`~pymc_splitmerge.sampling.mcmc.install_pymc_convergence_checks`):

* **Starts.** PyMC casts a ``pm.sample(initvals={"z": ...})`` start to the variable's integer
  dtype without a check: ``[0.5, 1.7, ...]`` silently becomes ``[0, 1, ...]`` (the same for
  ``pm.Categorical``); NaN and a label too large for the compact label dtype (256 in int8)
  silently become other labels on pymc 6 and fail inside pytensor's constant folding on
  pymc 5 (logged tracebacks, then ``cannot convert float NaN to integer`` / ``OverflowError``);
  a start of the wrong length fails inside pytensor (``The type of the replacement ... must
  be compatible``); a negative label reached ``np.bincount`` (``'list' argument must have no
  negative elements``) or NUTS's "Bad initial energy".  :func:`check_partition_initvals`
  runs on the raw values before that cast and raises an error that names the variable and
  what to give instead.
* **Automatic step assignment.** The ``competence`` of :class:`~pymc_splitmerge.ConcentrationGibbs`
  and :class:`~pymc_splitmerge.PartitionPriorSlice` needs the model (is the parameter used
  only by its own prior and the partition prior?), but PyMC hands ``competence`` the variable
  alone; ``pm.sample(model=model)`` outside ``with model:`` therefore gave the concentration
  NUTS.  The wrapped ``assign_step_methods`` runs PyMC's inside ``with model:``; when every
  variable left to PyMC is discrete (none has a gradient to look for) it makes PyMC's choice
  itself, without the model's joint logp graph PyMC builds for that look (a cold-start cost).

* **Where the labels go.** The raw label vector in the posterior group gives ``az.summary``
  one row per observation (and NumPy warnings for labels that never move) and ``az.plot_trace``
  one panel per observation (ArviZ 1.x refuses above 40).  The wrapped ``_sample_return``
  (the last step of ``pm.sample``, which turns the traces into an ``InferenceData`` /
  ``DataTree`` and runs the convergence checks) moves each partition variable to the group
  ``"labels"`` and puts its label-invariant quantities (number of clusters, largest-cluster
  fractions, log joint) in the posterior
  (:func:`~pymc_splitmerge.sampling.mcmc.move_labels_out_of_posterior`), then runs the
  label-invariant checks on them.  Because PyMC's ``sample_posterior_predictive`` reads
  conditioning values from the posterior group only (a partition missing there would be drawn
  from its prior: a silent wrong answer), ``pm.sample_posterior_predictive`` is wrapped too
  (:func:`sample_posterior_predictive`): it hands PyMC a view whose posterior includes the
  labels, and adds PyMC's new groups to the caller's object.

Importing ``pymc_splitmerge`` installs all of them (:func:`install_pymc_sample_hooks`;
``install_pymc_sample_hooks(False)`` restores PyMC's names).
"""

from __future__ import annotations

import inspect

from pymc_splitmerge.analysis import _arviz_compat as compat
from pymc_splitmerge.distributions.priors import PartitionPriorRV
from pymc_splitmerge.distributions.starts import check_partition_start

__all__ = [
    "check_partition_initvals",
    "check_partition_start",
    "install_pymc_sample_hooks",
    "sample_posterior_predictive",
]


def _partition_rvs(model) -> list:
    return [rv for rv in model.free_RVs
            if rv.owner is not None and isinstance(rv.owner.op, PartitionPriorRV)]


def check_partition_initvals(model, initvals=None) -> None:
    """Check the user starts of every partition variable of ``model`` (see the module doc).

    ``initvals`` is what ``pm.sample`` takes: None, a dict, or one dict (or None) per chain,
    keyed by variable, value variable or their names.  The initial values set on the model
    (``initval=`` of the distribution, ``model.set_initval``) are checked too.
    """
    rvs = _partition_rvs(model)
    if not rvs:
        return
    per_chain = [initvals] if initvals is None or isinstance(initvals, dict) else list(initvals)
    for rv in rvs:
        value_var = model.rvs_to_values[rv]
        names = {rv.name, value_var.name}
        check_partition_start(rv, model.rvs_to_initial_values.get(rv),
                              f"the initval of {rv.name!r}")
        for chain, overrides in enumerate(per_chain):
            for key, value in (overrides or {}).items():
                if key is rv or key is value_var or (isinstance(key, str) and key in names):
                    where = (f"initvals[{rv.name!r}]" if len(per_chain) == 1
                             else f"initvals[{chain}][{rv.name!r}]")
                    check_partition_start(rv, value, where)


def _unwrapped(function):
    return getattr(function, "__wrapped__", function)


def _pymc_functions():
    """PyMC's own functions behind the wrapped names (never the wrappers)."""
    from pymc.initial_point import make_initial_point_fns_per_chain
    from pymc.sampling.mcmc import assign_step_methods

    return make_initial_point_fns_per_chain, _unwrapped(assign_step_methods)


def _pymc_sample_return():
    from pymc.sampling import mcmc as pymc_mcmc

    return _unwrapped(pymc_mcmc._sample_return)


def _pymc_sample_posterior_predictive():
    from pymc.sampling import forward

    return _unwrapped(forward.sample_posterior_predictive)


def _sample_return(*, compute_convergence_checks, return_inferencedata, model, quiet=False,
                   **kwargs):
    """PyMC's ``_sample_return``, then the labels to their own group (see the module doc)."""
    from pymc.sampling import mcmc as pymc_mcmc
    from pymc.stats.convergence import log_warnings

    from pymc_splitmerge.sampling import mcmc

    pymc_function = _pymc_sample_return()
    partition_names = [rv.name for rv in _partition_rvs(model)]
    if not (return_inferencedata and partition_names):
        return pymc_function(compute_convergence_checks=compute_convergence_checks,
                             return_inferencedata=return_inferencedata, model=model,
                             quiet=quiet, **kwargs)
    result = pymc_function(compute_convergence_checks=False, return_inferencedata=True,
                           model=model, quiet=quiet, **kwargs)
    if not (compat.is_inference_data(result) or compat.is_datatree(result)):
        return result
    checks = pymc_mcmc.run_convergence_checks
    ours = checks is mcmc.label_invariant_convergence_checks
    warnings = []
    if compute_convergence_checks and not ours:  # PyMC's own (uninstalled): on the raw labels
        warnings = checks(result, model)
    mcmc.move_labels_out_of_posterior(result, model)
    if compute_convergence_checks and ours:  # the quantities just stored, not recomputed
        warnings = (mcmc._pymc_checks_without_partitions(result, model, partition_names)
                    + mcmc._posterior_quantity_checks(result, model, partition_names))
    if compute_convergence_checks and not quiet:
        log_warnings(warnings)
    return result



def _group_objects(data) -> dict:
    if compat.is_inference_data(data):
        return {name: getattr(data, name) for name in data.groups()}
    return dict(data.children)


def sample_posterior_predictive(trace, *args, **kwargs):
    """PyMC's ``sample_posterior_predictive``, conditioning on the labels of group ``"labels"``.

    Same arguments and result as ``pm.sample_posterior_predictive``.  For a trace that holds
    the group ``"labels"`` (what ``pm.sample`` returns for a model with a partition variable
    once this package is imported), PyMC is given a view of the trace whose posterior includes
    the label draws (no copies), so the partition is read from the trace, not drawn from its
    prior; with ``extend_inferencedata=True`` the groups PyMC adds to the view are added to
    ``trace`` (and ``trace`` is returned).  Any other trace goes to PyMC's function unchanged.
    """
    pymc_function = _pymc_sample_posterior_predictive()
    if not ((compat.is_inference_data(trace) or compat.is_datatree(trace))
            and compat.has_group(trace, compat.LABELS_GROUP)):
        return pymc_function(trace, *args, **kwargs)
    groups = {name: compat.get_group(trace, name) for name in compat.group_names(trace)
              if name != compat.LABELS_GROUP}
    groups["posterior"] = compat.posterior_with_labels(trace)
    view = compat.from_groups(groups, inference_data=compat.is_inference_data(trace))
    before = _group_objects(view)
    result = pymc_function(view, *args, **kwargs)
    bound = inspect.signature(pymc_function).bind(trace, *args, **kwargs)
    if not bound.arguments.get("extend_inferencedata", False) or result is not view:
        return result
    for name, group in _group_objects(view).items():
        if name != "posterior" and before.get(name) is not group:
            compat.add_group(trace, name, compat.get_group(view, name))
    return trace


def make_initial_point_fns_per_chain(*args, **kwargs):
    """PyMC's ``make_initial_point_fns_per_chain`` after :func:`check_partition_initvals`."""
    model = kwargs.get("model")
    if model is not None:
        check_partition_initvals(model, kwargs.get("overrides"))
    return _pymc_functions()[0](*args, **kwargs)


def _assign_without_model_logp(model, step, methods):
    """PyMC's ``assign_step_methods`` result without building the model's joint logp graph,
    or None when that graph is needed (or the steps are invalid: PyMC's function raises).

    PyMC builds ``model.logp()`` only to ask, for each value variable left to it, whether the
    logp has a gradient with respect to it, and asks only for continuous ones; when every
    variable left is discrete (e.g. all are covered by the given steps, or the model's only
    free variable is a partition) the graph is not used, and building it (the partition
    prior's and the conjugate mixture's logp) was ~0.03-0.07 s of a cold ``pm.sample``.
    Same selection as PyMC's (``max`` of ``_competence(var, False)`` over ``methods``).
    """
    from pymc.step_methods import STEP_METHODS, CompoundStep
    from pymc.step_methods.arraystep import BlockedStep
    from pymc.vartypes import discrete_types

    if step is None:
        provided = []
    elif isinstance(step, BlockedStep | CompoundStep):
        provided = [step]
    elif isinstance(step, list | tuple):
        provided = list(step)
    else:
        return None
    value_vars = model.value_vars
    assigned = set()
    for item in provided:
        if not isinstance(item, BlockedStep | CompoundStep):
            return None
        for var in item.vars:
            if var not in value_vars:
                return None
        assigned.update(item.vars)
    left = [var for var in value_vars if var not in assigned]
    if any(var.dtype not in discrete_types for var in left):
        return None
    methods_list = list(methods or STEP_METHODS)
    selected = {}
    for var in left:
        rv_var = model.values_to_rvs[var]
        best = max(methods_list, key=lambda method, rv=rv_var: method._competence(rv, False))
        selected.setdefault(best, []).append(var)
    return provided, selected


def _with_model_context(assign):
    def assign_step_methods(model, step=None, methods=None):
        """PyMC's ``assign_step_methods`` inside ``with model:``, without PyMC's joint logp
        graph when no variable needs it (see the module doc)."""
        with model:
            shortcut = _assign_without_model_logp(model, step, methods)
            if shortcut is not None:
                return shortcut
            return assign(model, step, methods)

    assign_step_methods.__wrapped__ = assign
    return assign_step_methods


def install_pymc_sample_hooks(install: bool = True) -> None:
    """Make ``pm.sample`` check partition starts and see the model in step assignment (or not).

    Replaces the names ``make_initial_point_fns_per_chain``, ``assign_step_methods`` and
    ``_sample_return`` in ``pymc.sampling.mcmc`` (the module that calls them) and
    ``sample_posterior_predictive`` in ``pymc``, ``pymc.sampling`` and
    ``pymc.sampling.forward`` by wrappers around PyMC's functions; ``False`` puts PyMC's back.
    Idempotent.
    """
    import pymc
    from pymc import sampling as pymc_sampling
    from pymc.sampling import forward as pymc_forward
    from pymc.sampling import mcmc as pymc_mcmc

    initial_points, assign = _pymc_functions()
    if hasattr(pymc_mcmc, "make_initial_point_fns_per_chain"):
        pymc_mcmc.make_initial_point_fns_per_chain = (make_initial_point_fns_per_chain
                                                      if install else initial_points)
    if hasattr(pymc_mcmc, "assign_step_methods"):
        pymc_mcmc.assign_step_methods = _with_model_context(assign) if install else assign
    if hasattr(pymc_mcmc, "_sample_return"):
        pymc_sample_return = _pymc_sample_return()
        _sample_return.__wrapped__ = pymc_sample_return
        pymc_mcmc._sample_return = _sample_return if install else pymc_sample_return
    pymc_predictive = _pymc_sample_posterior_predictive()
    sample_posterior_predictive.__wrapped__ = pymc_predictive
    for module in (pymc, pymc_sampling, pymc_forward):
        if getattr(module, "sample_posterior_predictive", None) is not None:
            module.sample_posterior_predictive = (sample_posterior_predictive if install
                                                  else pymc_predictive)
