"""The numeric core never imports PyMC, PyTensor or ArviZ (``docs/architecture.md``, "Layers").

Every module of ``core``, ``priors``, ``components`` and ``kernels`` is imported in a fresh
interpreter in which importing ``pymc``, ``pytensor`` or ``arviz`` raises (the package's own
``__init__``, which imports the PyMC layer for users, is replaced by an empty stand-in); a
module that reaches one of them, directly or through another module, fails the test with the
chain of imports in the error.
"""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import pymc_splitmerge

CORE_PACKAGES = ("core", "priors", "components", "kernels")
BLOCKED = ("pymc", "pytensor", "arviz")
PACKAGE_DIR = str(Path(pymc_splitmerge.__file__).parent)

_BLOCKER = """
import importlib.abc, sys

class _Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ImportError(f"numeric core imported {{name!r}}")
        return None

sys.meta_path.insert(0, _Block())
import importlib, types
# The top-level package's __init__ imports the PyMC layer on purpose; stand in for it with an
# empty package so that only the core modules themselves (and what they import) are executed.
_package = types.ModuleType("pymc_splitmerge")
_package.__path__ = [{package_dir!r}]
sys.modules["pymc_splitmerge"] = _package
for module in {modules!r}:
    importlib.import_module(module)
print("imported", len({modules!r}), "modules")
"""


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        check=False,
        text=True,
        cwd=str(Path(PACKAGE_DIR).parent),
        timeout=600,
    )


def _core_modules() -> list[str]:
    root = Path(PACKAGE_DIR)
    modules = []
    for package in CORE_PACKAGES:
        modules.append(f"pymc_splitmerge.{package}")
        for info in pkgutil.walk_packages([str(root / package)], f"pymc_splitmerge.{package}."):
            modules.append(info.name)
    return modules


def test_core_module_list_is_complete():
    modules = _core_modules()
    for package in CORE_PACKAGES:
        assert any(m.startswith(f"pymc_splitmerge.{package}.") for m in modules), package


@pytest.mark.parametrize("package", CORE_PACKAGES)
def test_numeric_core_imports_no_pymc_pytensor_arviz(package):
    modules = [m for m in _core_modules() if m.split(".")[1] == package]
    code = _BLOCKER.format(blocked=set(BLOCKED), modules=modules, package_dir=PACKAGE_DIR)
    result = _run(code)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"imported {len(modules)} modules" in result.stdout


def test_blocker_catches_a_forbidden_import():
    """Negative control: the same harness fails on a module that imports PyMC."""
    code = _BLOCKER.format(
        blocked=set(BLOCKED), modules=["pymc_splitmerge.steps.base"], package_dir=PACKAGE_DIR
    )
    result = _run(code)
    assert result.returncode != 0
    assert "numeric core imported" in result.stderr


_SAMPLING_PATH = """
import sys
import numpy as np
import pymc as pm

before = set(sys.modules)
import pymc_splitmerge as psm

rng = np.random.default_rng(0)
y = np.concatenate([rng.normal(-3.0, 1.0, (30, 2)), rng.normal(3.0, 1.0, (30, 2))])
with pm.Model() as model:
    z = psm.DirichletProcess("z", alpha=1.0, n=len(y))
    psm.ConjugateMixture("y", partition=z, component=psm.NormalInverseWishart(
        mu0=np.zeros(2), kappa0=0.01, nu0=4.0, psi0=np.eye(2)), observed=y)
start = psm.splitmerge_start(model, subsample_size=40, random_seed=0)
{extra}
with model:
    pm.sample(draws=2, tune=0, chains=1, cores=1, step=psm.SAMSStep(z), initvals=start,
              random_seed=0, progressbar=False, compute_convergence_checks=False)
loaded = set(sys.modules) - before
print("LOADED", sorted(name for name in loaded if name.startswith({watched!r})))
"""
# not needed to build a model, start and sample it (loaded on first use: PEP 562 in the
# package's, analysis', steps' and sampling's __init__); scipy ones only if not already loaded
# by PyMC
_LAZY_KERNEL_MODULES = ("pymc_splitmerge.steps.pgsm", "pymc_splitmerge.steps.arm",
                        "pymc_splitmerge.steps.rgsm", "pymc_splitmerge.sampling.smc",
                        "pymc_splitmerge.kernels.pgsm", "pymc_splitmerge.kernels.arm",
                        "pymc_splitmerge.kernels.rgsm", "pymc_splitmerge.kernels.smc")
_NOT_ON_SAMPLING_PATH = ("pymc_splitmerge.testing", "pymc_splitmerge.analysis.plots",
                         "pymc_splitmerge.analysis.predictive", "pymc_splitmerge.analysis.cluster_parameters",
                         "pymc_splitmerge.analysis.zarr_trace", *_LAZY_KERNEL_MODULES,
                         "scipy.stats", "scipy.integrate", "scipy.optimize", "matplotlib",
                         "sklearn")


def test_sampling_path_imports_no_analysis_or_testing_extras():
    """``import pymc_splitmerge``, a model, ``splitmerge_start`` and ``pm.sample`` do not load
    the testing utilities, the plots, the PGSM / ARM / RGSM / SMC steps and kernels, or
    scipy.stats / integrate / optimize (cold-start cost)."""
    result = _run(_SAMPLING_PATH.format(watched=_NOT_ON_SAMPLING_PATH, extra=""))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "LOADED []" in result.stdout, result.stdout


def test_sampling_path_check_sees_a_lazy_module_load():
    """Negative control: the same script, touching ``psm.PGSMStep``, ``psm.ARMStep``,
    ``psm.RGSMStep`` and ``psm.sample_smc`` on the way, reports their modules as loaded."""
    extra = "psm.PGSMStep, psm.ARMStep, psm.RGSMStep, psm.sample_smc"
    result = _run(_SAMPLING_PATH.format(watched=_NOT_ON_SAMPLING_PATH, extra=extra))
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"LOADED {sorted(_LAZY_KERNEL_MODULES)!r}" in result.stdout, result.stdout


def test_lazy_steps_are_not_automatic():
    """A lazily loaded step class is never one PyMC could assign automatically: loading every
    lazy module leaves ``pymc.step_methods.STEP_METHODS`` as ``import pymc_splitmerge`` left
    it, and none of the lazy classes is in it (PyMC only considers registered classes)."""
    import importlib

    from pymc.step_methods import STEP_METHODS

    import pymc_splitmerge as psm
    from pymc_splitmerge import steps

    registered = list(STEP_METHODS)
    for module in _LAZY_KERNEL_MODULES:
        importlib.import_module(module)
    assert list(STEP_METHODS) == registered
    for name in ("ARMStep", "PGSMStep", "RGSMStep"):
        assert getattr(psm, name) not in STEP_METHODS
    assert all(step_class in STEP_METHODS for step_class in steps.AUTOMATIC_STEP_METHODS)


def test_lazy_public_names():
    """The lazily loaded names are listed by ``dir`` and resolve to the same objects."""
    import pymc_splitmerge as psm
    from pymc_splitmerge import analysis
    from pymc_splitmerge.analysis.point_estimate import point_estimate
    from pymc_splitmerge.analysis.quantities import summary

    for name in psm.__all__:
        assert name in dir(psm)
        assert getattr(psm, name) is not None
    for name in analysis.__all__:
        assert name in dir(analysis)
        assert getattr(analysis, name) is not None
    assert psm.summary is summary and analysis.summary is summary
    assert psm.point_estimate is point_estimate and analysis.point_estimate is point_estimate
    assert psm.testing.exact_posterior is not None
    from pymc_splitmerge import sampling, steps
    from pymc_splitmerge.sampling.smc import compare_evidence, sample_smc
    from pymc_splitmerge.steps.arm import ARMStep
    from pymc_splitmerge.steps.pgsm import PGSMStep
    from pymc_splitmerge.steps.rgsm import RGSMStep

    for package in (steps, sampling):
        for name in package.__all__:
            assert name in dir(package)
            assert getattr(package, name) is not None
    assert psm.PGSMStep is PGSMStep and steps.PGSMStep is PGSMStep
    assert psm.ARMStep is ARMStep and psm.RGSMStep is RGSMStep
    assert psm.sample_smc is sample_smc and sampling.sample_smc is sample_smc
    assert psm.compare_evidence is compare_evidence
    with pytest.raises(AttributeError):
        psm.no_such_name  # noqa: B018
    with pytest.raises(AttributeError):
        analysis.no_such_name  # noqa: B018
    with pytest.raises(AttributeError):
        steps.no_such_name  # noqa: B018
    with pytest.raises(AttributeError):
        sampling.no_such_name  # noqa: B018
