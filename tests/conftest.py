"""Shared test data and helpers: the one set of partition priors, the small problems the kernel
tests enumerate, the one-step / chain drawers and trace thinning.

pytest puts this directory on ``sys.path`` (no ``__init__.py``, default ``prepend`` import
mode), so test modules import these names with ``from conftest import ...``; module-level
constants are needed because they parametrise tests at collection time.
"""

from __future__ import annotations

import os
import sys

# One BLAS thread per process. The models here are tiny (2x2 solves in NUTS' gradient), and a
# multithreaded OpenBLAS spins its threads against the other test process's on a two-core
# machine: one such test took 570 s with the default threads and 51 s with one. Set before
# numpy is imported, and inherited by the worker processes of ``cores=2`` sampling.
for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")
if "numpy" in sys.modules:  # a plugin imported numpy first: limit its loaded BLAS at run time
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=int(os.environ["OPENBLAS_NUM_THREADS"]), user_api="blas")

import numpy as np
import pytest
from kernel_checks import kernel_chain_draws, one_step_invariance_draws

from pymc_splitmerge.components.beta_bernoulli import BetaBernoulli
from pymc_splitmerge.components.normal_inverse_wishart import NormalInverseWishart
from pymc_splitmerge.priors.dirichlet_process import DirichletProcessPrior
from pymc_splitmerge.priors.finite_dirichlet import FiniteDirichletPrior
from pymc_splitmerge.priors.mixture_of_finite_mixtures import (
    MixtureOfFiniteMixturesPrior,
    ShiftedPoisson,
)
from pymc_splitmerge.priors.pitman_yor import PitmanYorPrior


def pytest_configure(config):
    """pytest drops the warning filters a package adds while pytest imports it (collection):
    re-add the package's object-mode filters (``distributions.priors.quiet_object_mode``)."""
    from pymc_splitmerge.distributions.priors import OBJECT_MODE_PATTERNS

    for pattern in OBJECT_MODE_PATTERNS:
        config.addinivalue_line("filterwarnings", f"ignore:{pattern}:UserWarning")


#: One prior of each kind (priors are immutable, so the objects are shared by all tests).
#: Hyperparameters are away from the special cases (alpha = 1, discount = 0) so that a kernel
#: that confuses two priors, or the DP with Pitman-Yor, gives a different law.
PRIORS = {
    "dp": DirichletProcessPrior(alpha=1.3),
    "py": PitmanYorPrior(alpha=0.8, discount=0.35),
    "finite": FiniteDirichletPrior(alpha=0.9, k=3),
    "mfm": MixtureOfFiniteMixturesPrior(gamma=1.1, k_prior=ShiftedPoisson(rate=1.5)),
}


def bernoulli_problem(n=6):
    """Beta-Bernoulli family with attribute-specific hyperparameters and ``n <= 7`` rows."""
    family = BetaBernoulli(a=np.array([0.6, 0.7, 0.5]), b=np.array([0.6, 0.5, 0.7]))
    data = np.array([[1, 1, 0], [1, 1, 0], [1, 0, 0], [0, 0, 1], [0, 1, 1], [0, 0, 1],
                     [1, 1, 1]], dtype=float)[:n]
    return family, family.prepare_data(data)


def niw_problem(n=5):
    """Normal-inverse-Wishart family in two dimensions with ``n <= 6`` rows."""
    family = NormalInverseWishart(mu0=np.zeros(2), kappa0=0.5, nu0=4.0, psi0=np.eye(2))
    data = np.array([[-1.2, -0.8], [-1.0, -1.3], [1.1, 0.9], [1.4, 1.2], [0.1, -0.2],
                     [0.9, 1.5]])[:n]
    return family, family.prepare_data(data)


PROBLEMS = {"bernoulli": bernoulli_problem, "niw": niw_problem}


def one_step_draws(kernel, prior, family, x, n_draws, rng):
    """Draw c ~ pi exactly, apply one kernel transition each."""
    return one_step_invariance_draws(kernel, prior, family, x, n_draws, rng)


def chain_draws(kernel, prior, family, x, n_draws, rng, thin=10, burn_in=200):
    """A single chain of the kernel alone from one cluster, thinned (near-independent draws)."""
    return kernel_chain_draws(kernel, prior, family, x, n_draws, rng, thin=thin,
                              burn_in=burn_in)


def thinned_labels(trace, thin, name="z", *, chains=None):
    """Every ``thin``-th draw of the partition variable ``name`` of a trace, chains stacked.

    ``chains``, if given, is the number of chains the trace must hold.  Returns an array of
    shape (chain * ceil(draw / thin), n).
    """
    from pymc_splitmerge.analysis._arviz_compat import posterior_with_labels

    values = np.asarray(posterior_with_labels(trace)[name].values)  # (chain, draw, n)
    if chains is not None:
        assert values.shape[0] == chains, (values.shape, chains)
    return values[:, ::thin].reshape(-1, values.shape[-1])


@pytest.fixture
def zarr_trace(monkeypatch):
    """``(zarr, pymc.backends.zarr.ZarrTrace)``, skipping without zarr 2 (what ZarrTrace is
    written for); the sampling state ZarrTrace writes can be read back."""
    zarr = pytest.importorskip("zarr")
    from pymc.backends import zarr as pymc_zarr

    if not pymc_zarr._zarr_available or int(zarr.__version__.split(".")[0]) >= 3:
        pytest.skip("PyMC's ZarrTrace needs zarr 2 (pip install 'pymc-splitmerge[zarr]')")
    import numcodecs.pickles

    # numcodecs >= 0.15.2 refuses to unpickle the sampling state ZarrTrace itself writes
    monkeypatch.setattr(numcodecs.pickles, "ALLOW_UNSAFE_PICKLE_DECODE", True, raising=False)
    return zarr, pymc_zarr.ZarrTrace
