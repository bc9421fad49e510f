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
  NUTS.  The wrapped ``assign_step_methods`` runs PyMC's inside ``with model:``.

Importing ``pymc_splitmerge`` installs both (:func:`install_pymc_sample_hooks`;
``install_pymc_sample_hooks(False)`` restores PyMC's names).
"""

from __future__ import annotations

from pymc_splitmerge.distributions.priors import PartitionPriorRV
from pymc_splitmerge.distributions.starts import check_partition_start

__all__ = ["check_partition_initvals", "check_partition_start", "install_pymc_sample_hooks"]


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


def _pymc_functions():
    """PyMC's own functions behind the wrapped names (never the wrappers)."""
    from pymc.initial_point import make_initial_point_fns_per_chain
    from pymc.sampling.mcmc import assign_step_methods

    return make_initial_point_fns_per_chain, getattr(assign_step_methods, "__wrapped__",
                                                     assign_step_methods)


def make_initial_point_fns_per_chain(*args, **kwargs):
    """PyMC's ``make_initial_point_fns_per_chain`` after :func:`check_partition_initvals`."""
    model = kwargs.get("model")
    if model is not None:
        check_partition_initvals(model, kwargs.get("overrides"))
    return _pymc_functions()[0](*args, **kwargs)


def _with_model_context(assign):
    def assign_step_methods(model, *args, **kwargs):
        """PyMC's ``assign_step_methods`` inside ``with model:`` (see the module doc)."""
        with model:
            return assign(model, *args, **kwargs)

    assign_step_methods.__wrapped__ = assign
    return assign_step_methods


def install_pymc_sample_hooks(install: bool = True) -> None:
    """Make ``pm.sample`` check partition starts and see the model in step assignment (or not).

    Replaces the names ``make_initial_point_fns_per_chain`` and ``assign_step_methods`` in
    ``pymc.sampling.mcmc`` (the module that calls them) by wrappers around PyMC's functions;
    ``False`` puts PyMC's back.  Idempotent.
    """
    from pymc.sampling import mcmc as pymc_mcmc

    initial_points, assign = _pymc_functions()
    if hasattr(pymc_mcmc, "make_initial_point_fns_per_chain"):
        pymc_mcmc.make_initial_point_fns_per_chain = (make_initial_point_fns_per_chain
                                                      if install else initial_points)
    if hasattr(pymc_mcmc, "assign_step_methods"):
        pymc_mcmc.assign_step_methods = _with_model_context(assign) if install else assign
