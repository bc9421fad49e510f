"""What the benchmark scripts share: the BLAS-threads setting, peak memory, the scale problem.

A script imports this module by name (``from _common import ...``), before numpy: importing
it makes the process's BLAS single-threaded (:func:`limit_blas_threads`, where the environment
does not set the thread variables) before it loads numpy itself.

* :func:`limit_blas_threads`: the idle worker threads of a multi-threaded OpenBLAS spin after
  each call, and the spinning counts as CPU time of the process (``time.process_time``): it
  tripled sklearn's fit time and inflated whatever was timed after a BLAS call
  (``docs/benchmarks.md``, "BLAS threads").  Call it before numpy loads, or on the
  environment of a subprocess.
* :func:`peak_rss_mb`: the process's peak resident memory.
* :func:`load_temporary_module`: a module executed from a source text (a kernel module with a
  switch folded, or a git ref's copy), for side-by-side timings in one process.
* The scale problem (``docs/benchmarks.md``, "Scale"): :func:`make_data` (20 unit Gaussians),
  :func:`unequal_data` (15 unit Gaussians of geometric weights), the model
  (:func:`build_model`, DP(1) + :func:`family`), and the held-out log predictive density of
  partitions (:func:`heldout_running_lpd`) with the tolerance :data:`TOLERANCE` of the
  time-to-answer tables.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import resource
import sys
import tempfile
from collections.abc import MutableMapping

__all__ = [
    "BLAS_THREAD_VARIABLES",
    "N_TEST",
    "TOLERANCE",
    "build_model",
    "family",
    "heldout_running_lpd",
    "limit_blas_threads",
    "load_temporary_module",
    "make_data",
    "peak_rss_mb",
    "subprocess_environment",
    "unequal_data",
]

BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")

TOLERANCE = 0.01
"""Held-out log predictive density per point: "at the reference" within this many nats."""

N_TEST = 1000
"""Held-out points drawn with every data set of the scale problem."""


def limit_blas_threads(env: MutableMapping[str, str] = os.environ, threads: int = 1, *,
                       override: bool = False) -> None:
    """Set the thread variables of ``env`` to ``threads`` (only where unset, unless
    ``override``): ``os.environ`` before numpy loads, or a subprocess's environment."""
    for name in BLAS_THREAD_VARIABLES:
        if override:
            env[name] = str(threads)
        else:
            env.setdefault(name, str(threads))


def subprocess_environment(threads: int | None = 1) -> dict[str, str]:
    """This process's environment for a child, with ``threads`` BLAS threads (``None``: the
    thread variables as the environment gave them, before this module set them)."""
    env = dict(os.environ)
    if threads is not None:
        limit_blas_threads(env, threads, override=True)
        return env
    for name, value in _GIVEN_BLAS_THREADS.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


_GIVEN_BLAS_THREADS = {name: os.environ.get(name) for name in BLAS_THREAD_VARIABLES}

# this process: before numpy (hence OpenBLAS) loads, so that idle BLAS threads never spin into
# the CPU times that the scripts measure
limit_blas_threads()

import numpy as np


def peak_rss_mb() -> float:
    """Peak resident memory of this process, MB (``ru_maxrss``, Linux: kB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# ------------------------------------------------------------------ the scale problem
def make_data(n, dim, seed=0, n_components=20):
    """``n`` points (and :data:`N_TEST` held-out ones) from 20 unit Gaussians: centres 20
    apart on a circle (2-D) or at random in a 10-D box, weights 1..2; returns
    ``(y, y_test, true_labels)``.  The centres never depend on ``seed``."""
    rng = np.random.default_rng(1000 + dim)
    if dim == 2:
        angles = np.linspace(0, 2 * np.pi, n_components, endpoint=False)
        radius = 20.0 / (2 * np.sin(np.pi / n_components))  # neighbouring centres 20 apart
        centres = radius * np.stack([np.cos(angles), np.sin(angles)], axis=1)
    else:
        centres = rng.uniform(-15.0, 15.0, size=(n_components, dim))
    weights = np.linspace(1.0, 2.0, n_components)
    weights /= weights.sum()
    data_rng = np.random.default_rng(seed)
    truth = data_rng.choice(n_components, size=n + N_TEST, p=weights)
    points = centres[truth] + data_rng.normal(size=(n + N_TEST, dim))
    return points[:n], points[n:], truth[:n]


def unequal_data(n, seed=5, n_components=15):
    """15 unit Gaussians on a widening spiral (neighbours >= ~5 apart), weights proportional
    to 0.75^k (26 % down to 0.5 % of the points); returns ``(y, y_test, true_labels)``."""
    rng = np.random.default_rng(seed)
    weights = 0.75 ** np.arange(n_components)
    weights /= weights.sum()
    angles = np.linspace(0, 2 * np.pi, n_components, endpoint=False)
    radii = 12.0 * np.linspace(1.0, 2.5, n_components)
    centres = radii[:, None] * np.stack([np.cos(angles), np.sin(angles)], axis=1)
    truth = rng.choice(n_components, size=n + N_TEST, p=weights)
    points = centres[truth] + rng.normal(size=(n + N_TEST, 2))
    return points[:n], points[n:], truth[:n]


def family(dim):
    """``NormalInverseWishart(mu0=0, kappa0=0.01, nu0=dim + 2, psi0=I)``."""
    import pymc_splitmerge as psm

    return psm.NormalInverseWishart(mu0=np.zeros(dim), kappa0=0.01, nu0=dim + 2.0,
                                    psi0=np.eye(dim))


def build_model(y):
    """``DirichletProcess("z", alpha=1)`` + ``ConjugateMixture`` of :func:`family`."""
    import pymc as pm

    import pymc_splitmerge as psm

    with pm.Model() as model:
        z = psm.DirichletProcess("z", alpha=1.0, n=len(y))
        psm.ConjugateMixture("y", partition=z, component=family(y.shape[1]), observed=y)
    return model


def heldout_running_lpd(y, y_test, labels_list):
    """Per recorded draw t: held-out lpd per point from the draws in the second half so far,
    ``mean_j log mean_{t/2 < s <= t} p(y*_j | c_s, y)`` (the first half is burn-in), and the
    value pooled over the second half of the whole run."""
    from pymc_splitmerge.analysis import partition_log_predictive
    from pymc_splitmerge.priors import DirichletProcessPrior

    prior = DirichletProcessPrior(1.0)
    fam = family(y.shape[1])
    rows = np.stack([partition_log_predictive(prior, fam, y, labels, y_test)
                     for labels in labels_list])
    running = np.array([_pooled_lpd(rows[t // 2:t + 1]) for t in range(len(rows))])
    return running, _pooled_lpd(rows[len(rows) // 2:])


def _pooled_lpd(rows):
    peak = rows.max(0)
    return float(np.mean(peak + np.log(np.exp(rows - peak).mean(0))))


def load_temporary_module(source: str, name: str):
    """Module ``name`` executed from ``source``, a file in the temporary directory named
    after the source's hash (written once, so that numba's cache of it serves later runs)."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    directory = os.path.join(tempfile.gettempdir(), f"benchmark_module_{digest}")
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{name}.py")
    if not os.path.exists(path):
        partial = f"{path}.{os.getpid()}.tmp"
        with open(partial, "w") as handle:
            handle.write(source)
        os.replace(partial, path)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
