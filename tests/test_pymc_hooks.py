"""The PyMC names this package wraps (``pymc_splitmerge.sampling.hooks``) keep their shape.

Each wrapper replaces a name of ``pymc.sampling.mcmc`` (``sample_posterior_predictive``: its
public names in ``pymc``, ``pymc.sampling`` and ``pymc.sampling.forward``) and calls PyMC's own function with the
parameters listed in ``hooks.PYMC_PARAMETERS``.  Run on both PyMC lines (5.28 and 6.4), these
tests fail when PyMC renames, reorders, adds or drops a parameter of a wrapped function, or
stops calling it from ``pm.sample`` (the wrapper would then silently do nothing): the
signal to revisit the wrapper.  Installing and removing the wrappers is reversible.
"""

from __future__ import annotations

import inspect

import pymc as pm
import pytest

import pymc_splitmerge as psm
from pymc_splitmerge.sampling import hooks

NAMES = sorted(hooks.PYMC_PARAMETERS)
#: the names ``pm.sample`` calls (``sample_posterior_predictive`` is called by users)
SAMPLE_NAMES = [name for name in NAMES if name not in hooks.PYMC_MODULES]


def _parameters(function) -> tuple[str, ...]:
    return tuple(inspect.signature(function).parameters)


def _check_shape(function, expected) -> None:
    found = _parameters(function)
    if found != tuple(expected):
        raise AssertionError(
            f"PyMC's {function.__module__}.{function.__name__} takes {found}, the wrapper in "
            f"pymc_splitmerge.sampling.hooks was written for {tuple(expected)}: revisit it")


@pytest.mark.parametrize("name", NAMES)
def test_pymc_function_has_the_parameters_the_wrapper_relies_on(name):
    function = hooks.pymc_function(name)
    assert not function.__module__.startswith("pymc_splitmerge")  # PyMC's own function
    _check_shape(function, hooks.PYMC_PARAMETERS[name])


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_pm_sample_still_calls_the_wrapped_name(name):
    from pymc.sampling import mcmc as pymc_mcmc

    source = inspect.getsource(pymc_mcmc.sample) + inspect.getsource(
        hooks.pymc_function("_sample_return"))
    assert f"{name}(" in source
    if name == "make_initial_point_fns_per_chain":  # the wrapper reads model= and overrides=
        call = source[source.index(f"{name}("):]
        call = call[:call.index(")")]
        assert "model=" in call and "overrides=" in call


def test_public_names_of_sample_posterior_predictive_are_pymcs_function():
    import importlib

    function = hooks.pymc_function("sample_posterior_predictive")
    modules = hooks.PYMC_MODULES["sample_posterior_predictive"]
    assert function.__module__ == modules[0]
    try:
        psm.install_pymc_hooks(False)
        for module in modules:  # the same function under each name PyMC exports
            assert importlib.import_module(module).sample_posterior_predictive is function
    finally:
        psm.install_pymc_hooks()


def test_shape_check_rejects_a_changed_signature_negative_control():
    def changed(idata, model, *, extra=None):
        return []

    def renamed(model, steps=None, methods=None):
        return None

    with pytest.raises(AssertionError, match="revisit"):
        _check_shape(changed, hooks.PYMC_PARAMETERS["run_convergence_checks"])
    with pytest.raises(AssertionError, match="revisit"):
        _check_shape(renamed, hooks.PYMC_PARAMETERS["assign_step_methods"])

    def other_line(trace, model=None, var_names=None, sample_dims=None):
        return None

    with pytest.raises(AssertionError, match="revisit"):
        _check_shape(other_line, hooks.PYMC_PARAMETERS["sample_posterior_predictive"])


def test_drop_in_wrappers_take_pymcs_parameters():
    _check_shape(psm.sampling.label_invariant_convergence_checks,
                 hooks.PYMC_PARAMETERS["run_convergence_checks"])
    _check_shape(hooks.assign_step_methods, hooks.PYMC_PARAMETERS["assign_step_methods"])


def _modules(name):
    import importlib

    return [importlib.import_module(module)
            for module in hooks.PYMC_MODULES.get(name, ("pymc.sampling.mcmc",))]


def test_install_and_uninstall_every_wrapper():
    wrappers = {"run_convergence_checks": psm.sampling.label_invariant_convergence_checks,
                "make_initial_point_fns_per_chain": hooks.make_initial_point_fns_per_chain,
                "assign_step_methods": hooks.assign_step_methods,
                "instantiate_steppers": hooks.instantiate_steppers,
                "_sample_return": hooks.sample_return,
                "sample_posterior_predictive": hooks.sample_posterior_predictive}
    assert set(wrappers) == set(NAMES)
    for name, wrapper in wrappers.items():
        for module in _modules(name):  # installed by `import pymc_splitmerge`
            assert getattr(module, name) is wrapper
    try:
        psm.install_pymc_hooks(False)
        for name in NAMES:
            for module in _modules(name):
                original = getattr(module, name)
                assert original is hooks.pymc_function(name)
                assert not original.__module__.startswith("pymc_splitmerge")
        from pymc.sampling import mcmc as pymc_mcmc

        assert pymc_mcmc.run_convergence_checks is pm.stats.convergence.run_convergence_checks
        psm.install_pymc_hooks(False)  # idempotent
    finally:
        psm.install_pymc_hooks()
        psm.install_pymc_hooks()
    for name, wrapper in wrappers.items():
        for module in _modules(name):
            assert getattr(module, name) is wrapper
        assert hooks.pymc_function(name) is not wrapper
