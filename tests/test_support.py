"""Starts outside the prior's support are refused; no kernel leaves the support.

* A start whose model log density is ``-inf`` or NaN (a finite-Dirichlet start with more
  than ``k`` clusters, labels outside the prior's label range) raises a ``SamplingError`` that
  names the variable and the reason: ``pm.sample(initvals=...)`` before sampling
  (``sampling.hooks``, ``tests/test_initvals.py``), and any step at the first step of a chain,
  before anything is drawn (checked here on the step itself).
* Every kernel, started inside the support of a finite-Dirichlet prior with ``k = 2``, keeps
  ``K <= k`` for every transition (a split would need ``log V(n, k + 1) = -inf``).
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest
from pymc.exceptions import SamplingError

import pymc_splitmerge as psm
from pymc_splitmerge.kernels.gibbs import gibbs_sweep
from pymc_splitmerge.kernels.pgsm import pgsm_move
from pymc_splitmerge.kernels.rgsm import build_rgsm_move
from pymc_splitmerge.kernels.sams import sams_move
from pymc_splitmerge.kernels.splitmerge_common import build_moves_then_gibbs
from pymc_splitmerge.kernels.state import PartitionState, PriorTables
from pymc_splitmerge.priors.finite_dirichlet import FiniteDirichletPrior

DATA = np.array([[1, 1, 0, 0], [1, 1, 0, 1], [1, 0, 0, 0], [0, 0, 1, 1], [0, 1, 1, 1],
                 [0, 1, 1, 0], [1, 0, 1, 0]])
N = len(DATA)

STEPS = {
    "gibbs": lambda z: psm.CollapsedGibbsStep(z),
    "sams": lambda z: psm.SAMSStep(z),
    "rgsm": lambda z: psm.RGSMStep(z),
    "pgsm": lambda z: psm.PGSMStep(z, num_particles=4),
}


def _sample(step_name, initvals, k=2, **kwargs):
    with pm.Model():
        z = psm.FiniteDirichlet("z", alpha=1.0, k=k, n=N)
        psm.ConjugateMixture("y", partition=z, component=psm.BetaBernoulli(a=1.0, b=1.0),
                             observed=DATA)
        return pm.sample(draws=5, tune=0, chains=1, cores=1, step=STEPS[step_name](z),
                         initvals=initvals, random_seed=1, progressbar=False,
                         compute_convergence_checks=False, **kwargs)


def _first_step(step_name, labels, k=2):
    """The step's own first-step check (a start that did not come through pm.sample's hook)."""
    with pm.Model():
        z = psm.FiniteDirichlet("z", alpha=1.0, k=k, n=N)
        psm.ConjugateMixture("y", partition=z, component=psm.BetaBernoulli(a=1.0, b=1.0),
                             observed=DATA)
        step = STEPS[step_name](z)
    return step.step({"z": np.asarray(labels, dtype=z.dtype)})


@pytest.mark.parametrize("step_name", sorted(STEPS))
def test_start_with_too_many_clusters_is_refused(step_name):
    start = {"z": np.array([0, 1, 0, 1, 0, 1, 0])}
    bad = {"z": np.array([0, 1, 2, 3, 4, 0, 1])}  # labels 0..4: 5 clusters, k = 2
    with pytest.raises(SamplingError, match=r"'z'.*5 clusters.*FiniteDirichletPrior allows at most 2"):
        _first_step(step_name, bad["z"])
    with pytest.raises(SamplingError, match=r"'z'.*outside \[0, 2\).*5 clusters"):
        _sample(step_name, bad)  # refused by pm.sample before the first step
    idata = _sample(step_name, start)  # a start inside the support samples normally
    assert np.asarray(idata["labels"]["z"].values).max() < 2


def test_start_with_labels_out_of_range_is_refused():
    # two clusters, but labelled 0 and 7: the finite prior's labels must lie in [0, k)
    bad = {"z": np.array([0, 7, 0, 7, 0, 7, 0])}
    with pytest.raises(SamplingError, match=r"'z'.*labels.*\[0, 2\)"):
        _first_step("gibbs", bad["z"])
    with pytest.raises(SamplingError, match=r"'z'.*labels.*\[0, 2\)"):
        _sample("gibbs", bad)


KERNELS = {
    "gibbs": lambda state, tables, rng: gibbs_sweep(state, *tables, rng),
    "sams": lambda state, tables, rng: sams_move(state, *tables, rng),
    "rgsm": lambda state, tables, rng: build_moves_then_gibbs(build_rgsm_move(5), n_moves=1,
                                                              n_gibbs_sweeps=1)(
        state.model, state.partition, PriorTables(*tables), rng),
    "pgsm_two_anchors": lambda state, tables, rng: pgsm_move(state, *tables, rng,
                                                             num_particles=4),
    "pgsm_three_anchors": lambda state, tables, rng: pgsm_move(state, *tables, rng,
                                                               num_particles=4, n_anchors=3),
}


@pytest.mark.parametrize("kernel_name", sorted(KERNELS))
@pytest.mark.parametrize("start", [[0] * N, [0, 1, 0, 1, 0, 1, 0]])
def test_kernel_never_leaves_finite_support(kernel_name, start):
    k = 2
    family = psm.BetaBernoulli(a=0.5, b=0.5)
    x = family.prepare_data(DATA)
    tables = FiniteDirichletPrior(alpha=3.0, k=k).tables(N)  # large alpha favours many clusters
    state = PartitionState(family, x, np.array(start))
    rng = np.random.default_rng(5)
    seen = set()
    for _ in range(300):
        KERNELS[kernel_name](state, tables, rng)
        assert state.n_clusters <= k
        seen.add(state.n_clusters)
    assert seen == {1, 2}  # the chain does move between the two feasible sizes
    state.check()
