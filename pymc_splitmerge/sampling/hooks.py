"""Every PyMC name this package wraps, in one module.

A step method registered in ``pymc.step_methods.STEP_METHODS`` (``pymc_splitmerge.steps``) is
how PyMC expects to be extended; for the things a partition variable needs, PyMC 5.28 / 6.4
offer no extension point, so ``pm.sample`` is reached through the names
``pymc.sampling.mcmc`` calls (and ``pm.sample_posterior_predictive`` through its public
name).  Each wrapper below does its own small part and then calls PyMC's own function (never a copy of its logic); PyMC's functions themselves are untouched:

=====================================  ==================================================  ======================================================
name in ``pymc.sampling.mcmc``         PyMC's function                                     the wrapper
=====================================  ==================================================  ======================================================
``run_convergence_checks``             ``pymc.stats.convergence.run_convergence_checks``   :func:`~pymc_splitmerge.sampling.mcmc.label_invariant_convergence_checks`
``make_initial_point_fns_per_chain``   ``pymc.initial_point.make_initial_point_fns_per_chain``  :func:`make_initial_point_fns_per_chain`
``assign_step_methods``                ``pymc.sampling.mcmc.assign_step_methods``          :func:`assign_step_methods`
``instantiate_steppers``               ``pymc.sampling.mcmc.instantiate_steppers``         :func:`instantiate_steppers`
``_sample_return``                     ``pymc.sampling.mcmc._sample_return``               :func:`sample_return`
``sample_posterior_predictive`` [*]_   ``pymc.sampling.forward.sample_posterior_predictive``  :func:`sample_posterior_predictive`
=====================================  ==================================================  ======================================================

.. [*] the name in ``pymc``, ``pymc.sampling`` and ``pymc.sampling.forward`` (what users call),
   not in ``pymc.sampling.mcmc``.

* **End-of-run checks.** PyMC's R-hat / ESS of a raw label vector mean nothing (relabelling
  the clusters moves them); the wrapper runs PyMC's checks on every other variable and the same
  checks on each partition's label-invariant quantities (see
  :mod:`pymc_splitmerge.sampling.mcmc`).  Models without a partition get PyMC's function.
* **Starts.** PyMC casts a ``pm.sample(initvals={"z": ...})`` start to the variable's integer
  dtype without a check: ``[0.5, 1.7, ...]`` silently becomes ``[0, 1, ...]`` (the same for
  ``pm.Categorical``); NaN and a label too large for the compact label dtype (256 in int8)
  silently become other labels on pymc 6 and fail inside pytensor's constant folding on
  pymc 5; a start of the wrong length fails inside pytensor; a negative label reached
  ``np.bincount`` or NUTS's "Bad initial energy".  The wrapper calls :func:`before_first_draw`
  (which runs :func:`check_partition_initvals` on the raw values, before that cast, and
  raises an error that names the variable and what to give instead), then PyMC's function.
* **Automatic step assignment.** The ``competence`` of
  :class:`~pymc_splitmerge.ConcentrationGibbs` and :class:`~pymc_splitmerge.PartitionPriorSlice`
  needs the model (is the parameter used only by its own prior and the partition prior?), but
  PyMC hands ``competence`` the variable alone; ``pm.sample(model=model)`` outside
  ``with model:`` therefore gave the concentration NUTS.  The wrapper calls PyMC's
  ``assign_step_methods`` inside ``with model:``.  The wrapper of ``instantiate_steppers``
  gives the ``pm.Gamma`` alpha of a Dirichlet process that PyMC assigned to
  :class:`~pymc_splitmerge.ConcentrationGibbs` to the partition's
  :class:`~pymc_splitmerge.steps.DefaultPartitionStep` instead, which integrates it out of its
  moves and draws it given the number of clusters
  (:func:`~pymc_splitmerge.steps.sams.integrate_concentration_out`).  For a model whose component family has
  random hyperparameters, the wrapper of ``instantiate_steppers`` puts the
  :class:`~pymc_splitmerge.HyperparameterSlice` and the partition step PyMC assigned into one
  :class:`~pymc_splitmerge.steps.alternation.AlternatingStep` (several rounds of the two per
  draw: :func:`~pymc_splitmerge.steps.alternation.alternate_family_hyperparameters`).
* **Where the labels go.** The raw label vector in the posterior group gives ``az.summary``
  one row per observation (and NumPy warnings for labels that never move) and ``az.plot_trace``
  one panel per observation (ArviZ 1.x refuses above 40).  The wrapper of ``_sample_return``
  (:func:`sample_return`; the last step of ``pm.sample``, which turns the traces into an ``InferenceData`` /
  ``DataTree`` and runs the convergence checks) moves each partition variable to the group
  ``"labels"`` and puts its label-invariant quantities (number of clusters, largest-cluster
  fractions, log joint) in the posterior
  (:func:`~pymc_splitmerge.sampling.mcmc.move_labels_out_of_posterior`), then runs the
  label-invariant checks on them.  Because PyMC's ``sample_posterior_predictive`` reads
  conditioning values from the posterior group only (a partition missing there would be drawn
  from its prior: a silent wrong answer), ``pm.sample_posterior_predictive`` is wrapped too
  (:func:`sample_posterior_predictive`): it hands PyMC a view whose posterior includes the
  labels, and adds PyMC's new groups to the caller's object.

Importing ``pymc_splitmerge`` installs every wrapper (:func:`install_pymc_hooks`);
``install_pymc_hooks(False)`` puts PyMC's functions back.  :data:`PYMC_PARAMETERS` lists the
parameters each wrapper relies on; ``tests/test_pymc_hooks.py`` fails on either PyMC line when
one of PyMC's functions no longer has them.
"""

from __future__ import annotations

import inspect
import warnings
from importlib import import_module, metadata

import numpy as np

from pymc_splitmerge.analysis import _arviz_compat as compat
from pymc_splitmerge.distributions.cluster_parameters import is_slot_placement
from pymc_splitmerge.distributions.priors import PartitionPriorRV
from pymc_splitmerge.distributions.starts import check_partition_start

__all__ = [
    "PYMC_PARAMETERS",
    "assign_step_methods",
    "before_first_draw",
    "check_hyperparameter_initvals",
    "check_partition_initvals",
    "check_partition_start",
    "install_pymc_hooks",
    "instantiate_steppers",
    "make_initial_point_fns_per_chain",
    "pymc_function",
    "sample_posterior_predictive",
    "sample_return",
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


def check_hyperparameter_initvals(model, initvals=None) -> None:
    """A user start of a random hyperparameter of a partition model must lie in the domain
    of the partition prior and the component family (``kappa0 > 0``, ``nu0 > D - 1``, ``psi0``
    positive definite, ``a > 0``...), or the error names it (instead of NUTS's "Bad initial
    energy" or a failing step).  Checked for each chain whose ``initvals`` set a variable other
    than a partition; the start is PyMC's initial point without jitter.
    """
    rvs = _partition_rvs(model)
    if not rvs or initvals is None:
        return
    from pymc.initial_point import make_initial_point_fn

    from pymc_splitmerge.distributions.discovery import discover

    partition_names = {name for rv in rvs for name in (rv.name, model.rvs_to_values[rv].name)}
    per_chain = [initvals] if isinstance(initvals, dict) else list(initvals)
    for chain, overrides in enumerate(per_chain):
        given = {getattr(key, "name", key): value for key, value in (overrides or {}).items()}
        given = {key: value for key, value in given.items() if key not in partition_names}
        if not given:
            continue
        point = make_initial_point_fn(model=model, overrides=overrides, jitter_rvs=set(),
                                      return_transformed=True)(0)
        for rv in rvs:
            try:
                partition_model = discover(rv, model)
            except (TypeError, ValueError):  # not a complete partition model: the steps say so
                continue
            try:
                partition_model.numeric_prior(point)
                partition_model.numeric_family(point)
            except (ValueError, FloatingPointError, np.linalg.LinAlgError) as error:
                where = "initvals" if len(per_chain) == 1 else f"initvals[{chain}]"
                shown = ", ".join(f"{key!r}: {np.asarray(value).tolist()!r}"
                                  for key, value in given.items())
                raise ValueError(
                    f"{where} ({shown}) starts a hyperparameter of the partition model "
                    f"{rv.name!r} outside its domain: {error}. Give a start inside the "
                    f"domain, or leave it out (PyMC then starts from the prior's centre)"
                ) from None


_PYMC_MAJOR = int(metadata.version("pymc").split(".")[0])

#: the parameters of each wrapped PyMC function, in order, that its wrapper relies on (the
#: same on pymc 5.28 and 6.4 except ``sample_posterior_predictive``, which gained parameters
#: in pymc 6: its wrapper forwards them all and reads ``extend_inferencedata`` by name);
#: tests/test_pymc_hooks.py checks them with ``inspect``
PYMC_PARAMETERS = {
    "run_convergence_checks": ("idata", "model"),
    "make_initial_point_fns_per_chain": ("model", "overrides", "jitter_rvs", "chains"),
    "assign_step_methods": ("model", "step", "methods"),
    "instantiate_steppers": ("model", "steps", "selected_steps", "step_kwargs", "initial_point",
                             "compile_kwargs"),
    "_sample_return": ("run", "traces", "tune", "t_sampling", "discard_tuned_samples",
                       "compute_convergence_checks", "return_inferencedata", "keep_warning_stat",
                       "idata_kwargs", "model", "quiet"),
    "sample_posterior_predictive": (
        ("trace", "model", "var_names", "sample_dims", "random_seed", "progressbar",
         "progressbar_theme", "return_inferencedata", "extend_inferencedata", "predictions",
         "idata_kwargs", "compile_kwargs") if _PYMC_MAJOR < 6 else
        ("trace", "model", "var_names", "sample_vars", "freeze_vars", "sample_dims",
         "random_seed", "progressbar", "progressbar_theme", "return_inferencedata",
         "extend_inferencedata", "predictions", "idata_kwargs", "backend", "compile_kwargs")),
}

#: the modules whose name is replaced, when not ``pymc.sampling.mcmc`` (the first one holds
#: PyMC's function)
PYMC_MODULES = {
    "sample_posterior_predictive": ("pymc.sampling.forward", "pymc.sampling", "pymc"),
}

#: PyMC's own function behind each wrapped name, recorded before the first install
_PYMC_FUNCTIONS: dict = {}


def pymc_function(name: str):
    """PyMC's own function behind the name ``name`` of ``pymc.sampling.mcmc`` (or of the
    modules :data:`PYMC_MODULES` lists), never a wrapper of this module, installed or not."""
    if name not in _PYMC_FUNCTIONS:
        module = import_module(PYMC_MODULES.get(name, ("pymc.sampling.mcmc",))[0])
        function = getattr(module, name)
        _PYMC_FUNCTIONS[name] = getattr(function, "pymc_function", function)
    return _PYMC_FUNCTIONS[name]


def before_first_draw(model, initvals=None) -> None:
    """What ``pm.sample`` checks before PyMC builds the chains' starts (and the first draw).

    Called by the wrapped ``make_initial_point_fns_per_chain`` with the model and the
    ``initvals`` given to ``pm.sample``; raises an error naming the variable at fault.
    """
    check_partition_initvals(model, initvals)
    check_hyperparameter_initvals(model, initvals)


def make_initial_point_fns_per_chain(*args, **kwargs):
    """PyMC's ``make_initial_point_fns_per_chain`` after :func:`before_first_draw`."""
    function = pymc_function("make_initial_point_fns_per_chain")
    arguments = inspect.signature(function).bind(*args, **kwargs).arguments
    if arguments.get("model") is not None:
        before_first_draw(arguments["model"], arguments.get("overrides"))
    return function(*args, **kwargs)


def assign_step_methods(model, step=None, methods=None):
    """PyMC's ``assign_step_methods`` inside ``with model:`` (see the module doc)."""
    with model:
        return pymc_function("assign_step_methods")(model, step, methods)


def instantiate_steppers(*args, **kwargs):
    """PyMC's ``instantiate_steppers``, then the hyperparameter step of a random component
    family and its partition step alternated (see the module doc)."""
    from pymc_splitmerge.steps.alternation import alternate_family_hyperparameters
    from pymc_splitmerge.steps.sams import integrate_concentration_out

    function = pymc_function("instantiate_steppers")
    arguments = inspect.signature(function).bind(*args, **kwargs).arguments
    provided = list(arguments.get("steps") or ())  # PyMC appends its steps to that list
    steps = function(*args, **kwargs)  # a list, or the single step when there is one
    steps = list(steps) if isinstance(steps, list | tuple) else [steps]
    steps = alternate_family_hyperparameters(integrate_concentration_out(steps, provided),
                                             provided)
    return steps[0] if len(steps) == 1 else steps


def sample_return(*, compute_convergence_checks, return_inferencedata, model, quiet=False,
                  **kwargs):
    """PyMC's ``_sample_return``, then the labels to their own group (see the module doc).

    PyMC's function converts the traces (also a ``ZarrTrace``'s, to an in-memory container)
    without its checks; the labels then move (:func:`~pymc_splitmerge.sampling.mcmc.
    move_labels_out_of_posterior`) and the checks run on the result.  A run that returns no
    ``InferenceData`` / ``DataTree`` (``return_inferencedata=False``: a ``MultiTrace`` or the
    ``ZarrTrace`` itself, whose store keeps the labels in its posterior) or a model without
    a partition variable goes through PyMC's function unchanged.  A post-run computation that
    fails gives a ``RuntimeWarning`` and the trace is returned all the same.
    """
    from pymc.sampling import mcmc as pymc_mcmc
    from pymc.stats.convergence import log_warnings

    from pymc_splitmerge.sampling import mcmc

    function = pymc_function("_sample_return")
    partition_names = [rv.name for rv in _partition_rvs(model)]
    if not (return_inferencedata and partition_names):
        return function(compute_convergence_checks=compute_convergence_checks,
                        return_inferencedata=return_inferencedata, model=model, quiet=quiet,
                        **kwargs)
    result = function(compute_convergence_checks=False, return_inferencedata=True, model=model,
                      quiet=quiet, **kwargs)
    if not (compat.is_inference_data(result) or compat.is_datatree(result)):
        return result
    checks = pymc_mcmc.run_convergence_checks
    ours = checks is mcmc.label_invariant_convergence_checks
    stored = [name for name in partition_names  # not those left out by var_names
              if name in compat.get_group(result, "posterior")]
    found = []
    try:
        if compute_convergence_checks and not ours:  # PyMC's own (uninstalled): raw labels
            found = checks(result, model)
        mcmc.move_labels_out_of_posterior(result, model)
        if compute_convergence_checks and ours:  # the quantities just stored, not recomputed
            found = (mcmc._pymc_checks_without_partitions(result, model, partition_names)
                     + mcmc._posterior_quantity_checks(result, model, stored))
    except Exception as error:  # noqa: BLE001 - reported, pm.sample returns its trace
        mcmc._warn_post_run_failure(
            f"the labels group and the label-invariant convergence checks of "
            f"{', '.join(map(repr, partition_names))}", error)
        return result
    if compute_convergence_checks and not quiet:
        log_warnings(found)
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
    function = pymc_function("sample_posterior_predictive")
    if not ((compat.is_inference_data(trace) or compat.is_datatree(trace))
            and compat.has_group(trace, compat.LABELS_GROUP)):
        return function(trace, *args, **kwargs)
    groups = {name: compat.get_group(trace, name) for name in compat.group_names(trace)
              if name != compat.LABELS_GROUP}
    groups["posterior"] = compat.posterior_with_labels(trace)
    view = compat.from_groups(groups, inference_data=compat.is_inference_data(trace))
    before = _group_objects(view)
    bound = inspect.signature(function).bind(trace, *args, **kwargs)
    with warnings.catch_warnings():
        if _only_slot_placement_potentials(bound.arguments.get("model")):
            # PyMC warns that Potentials do not act in predictive draws; the slot placement
            # is a prior term of the labels and slots, which the draws take from the trace
            warnings.filterwarnings("ignore", category=UserWarning,
                                    message="The effect of Potentials on other parameters")
        result = function(view, *args, **kwargs)
    if not bound.arguments.get("extend_inferencedata", False) or result is not view:
        return result
    for name, group in _group_objects(view).items():
        if name != "posterior" and before.get(name) is not group:
            compat.add_group(trace, name, compat.get_group(view, name))
    return trace


def _only_slot_placement_potentials(model) -> bool:
    """Whether the model's Potentials (if any) are all slot-placement terms of this package."""
    import pymc as pm

    try:
        model = pm.modelcontext(model)
    except TypeError:
        return False
    return bool(model.potentials) and all(is_slot_placement(p) for p in model.potentials)


def _wrappers() -> dict:
    from pymc_splitmerge.sampling.mcmc import label_invariant_convergence_checks

    return {"run_convergence_checks": label_invariant_convergence_checks,
            "make_initial_point_fns_per_chain": make_initial_point_fns_per_chain,
            "assign_step_methods": assign_step_methods,
            "instantiate_steppers": instantiate_steppers,
            "_sample_return": sample_return,
            "sample_posterior_predictive": sample_posterior_predictive}


def install_pymc_hooks(install: bool = True) -> None:
    """Put this module's wrappers in ``pymc.sampling.mcmc`` (``sample_posterior_predictive``
    in the modules :data:`PYMC_MODULES` lists), or, with False, PyMC's functions back.
    Idempotent; importing ``pymc_splitmerge`` installs them.

    A PyMC without one of the names gets no wrapper for it.
    """
    for name, wrapper in _wrappers().items():
        modules = [import_module(module)
                   for module in PYMC_MODULES.get(name, ("pymc.sampling.mcmc",))]
        if not hasattr(modules[0], name):
            continue
        original = pymc_function(name)  # recorded before the wrapper is first installed
        wrapper.pymc_function = original
        for module in modules:
            if hasattr(module, name):
                setattr(module, name, wrapper if install else original)
