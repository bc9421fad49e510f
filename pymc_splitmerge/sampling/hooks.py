"""Every PyMC name this package wraps, in one module.

A step method registered in ``pymc.step_methods.STEP_METHODS`` (``pymc_splitmerge.steps``) is
how PyMC expects to be extended; for three things a partition variable needs, PyMC 5.28 / 6.4
offer no extension point, so ``pm.sample`` is reached through the names
``pymc.sampling.mcmc`` calls.  Each wrapper below does its own small part and then calls
PyMC's own function (never a copy of its logic); PyMC's functions themselves are untouched:

=====================================  ==================================================  ======================================================
name in ``pymc.sampling.mcmc``         PyMC's function                                     the wrapper
=====================================  ==================================================  ======================================================
``run_convergence_checks``             ``pymc.stats.convergence.run_convergence_checks``   :func:`~pymc_splitmerge.sampling.mcmc.label_invariant_convergence_checks`
``make_initial_point_fns_per_chain``   ``pymc.initial_point.make_initial_point_fns_per_chain``  :func:`make_initial_point_fns_per_chain`
``assign_step_methods``                ``pymc.sampling.mcmc.assign_step_methods``          :func:`assign_step_methods`
=====================================  ==================================================  ======================================================

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
  ``assign_step_methods`` inside ``with model:``.

Importing ``pymc_splitmerge`` installs the three wrappers (:func:`install_pymc_hooks`);
``install_pymc_hooks(False)`` puts PyMC's functions back.  :data:`PYMC_PARAMETERS` lists the
parameters each wrapper relies on; ``tests/test_pymc_hooks.py`` fails on either PyMC line when
one of PyMC's functions no longer has them.
"""

from __future__ import annotations

import inspect

import numpy as np

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
    "make_initial_point_fns_per_chain",
    "pymc_function",
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


#: the parameters of each wrapped PyMC function, in order, that its wrapper relies on
#: (the same on pymc 5.28 and 6.4); tests/test_pymc_hooks.py checks them with ``inspect``
PYMC_PARAMETERS = {
    "run_convergence_checks": ("idata", "model"),
    "make_initial_point_fns_per_chain": ("model", "overrides", "jitter_rvs", "chains"),
    "assign_step_methods": ("model", "step", "methods"),
}

#: PyMC's own function behind each wrapped name, recorded before the first install
_PYMC_FUNCTIONS: dict = {}


def pymc_function(name: str):
    """PyMC's own function behind the name ``name`` of ``pymc.sampling.mcmc`` (never a
    wrapper of this module, installed or not)."""
    if name not in _PYMC_FUNCTIONS:
        from pymc.sampling import mcmc as pymc_mcmc

        function = getattr(pymc_mcmc, name)
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


def _wrappers() -> dict:
    from pymc_splitmerge.sampling.mcmc import label_invariant_convergence_checks

    return {"run_convergence_checks": label_invariant_convergence_checks,
            "make_initial_point_fns_per_chain": make_initial_point_fns_per_chain,
            "assign_step_methods": assign_step_methods}


def install_pymc_hooks(install: bool = True) -> None:
    """Put this module's wrappers in ``pymc.sampling.mcmc`` (or, with False, PyMC's functions
    back).  Idempotent; importing ``pymc_splitmerge`` installs them.

    A PyMC without one of the names gets no wrapper for it.
    """
    from pymc.sampling import mcmc as pymc_mcmc

    for name, wrapper in _wrappers().items():
        if not hasattr(pymc_mcmc, name):
            continue
        original = pymc_function(name)  # recorded before the wrapper is first installed
        wrapper.pymc_function = original
        setattr(pymc_mcmc, name, wrapper if install else original)
