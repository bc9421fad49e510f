"""The Dirichlet process with its Gamma concentration integrated out, and the default step that
owns alpha.

* ``GammaMixedDirichletProcessPrior``: its partition law equals the oracle's (partitions
  enumerated, alpha integrated by adaptive quadrature, independently of the prior's grid);
  its draws of alpha given ``K`` follow ``p(alpha | K, n)`` (Kolmogorov–Smirnov against an
  independent fine-grid CDF), draws from the prior are rejected by the same test.
* The default transition (cluster-anchor SAMS updates, then a Gibbs sweep) under its tables:
  one-step invariance by enumeration for both problems (``tests/kernel_checks.py``), with a
  negative control (the Gamma rate read as a scale: another mixture) rejected.
* Plain ``pm.sample()`` assigns ``DefaultPartitionStep(z, concentration=alpha)`` when alpha is
  a ``pm.Gamma`` with constant parameters that feeds only the partition, and today's steps
  otherwise; the joint law of (partition, binned alpha) of its draws passes the χ² test
  against the exact joint, and the same step with alpha drawn from its prior fails it.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pymc as pm
import pytest
from broken_kernels import ConcentrationFromItsPriorStep, on_state
from conftest import PROBLEMS
from kernel_checks import exactness_tests
from scipy import integrate, special, stats
from test_concentration import P_THRESHOLD, dp_alpha_posterior

import pymc_splitmerge as psm
from pymc_splitmerge.core.relabel import partition_index
from pymc_splitmerge.kernels.sams import build_sams_move
from pymc_splitmerge.kernels.splitmerge_common import build_moves_then_gibbs
from pymc_splitmerge.priors import DirichletProcessPrior, GammaMixedDirichletProcessPrior
from pymc_splitmerge.testing import (
    assert_counts_gof,
    exact_posterior_random_concentration,
    exact_prior,
)

SEED = 20261129
SHAPE, RATE = 2.0, 0.5  # away from Gamma(1, 1), so that a rate read as a scale changes the law


@pytest.mark.parametrize("shape,rate", [(1.0, 1.0), (2.0, 0.5), (0.3, 2.0), (5.0, 0.1)])
def test_partition_law_matches_the_oracle(shape, rate):
    mixed = exact_prior(GammaMixedDirichletProcessPrior(shape=shape, rate=rate), 7)
    oracle = exact_posterior_random_concentration(DirichletProcessPrior, (shape, rate), n=7)
    np.testing.assert_allclose(mixed.log_prob, oracle.log_prob, rtol=0, atol=1e-10)


def test_validation():
    for bad in ({"shape": 0.0, "rate": 1.0}, {"shape": 1.0, "rate": -2.0},
                {"shape": float("nan"), "rate": 1.0}):
        with pytest.raises(ValueError, match="shape|rate"):
            GammaMixedDirichletProcessPrior(**bad)


@pytest.mark.parametrize("n_clusters,n,shape,rate", [(3, 150, 1.0, 1.0), (1, 6, 2.0, 0.5),
                                                      (6, 7, 0.5, 2.0)])
def test_draw_concentration_is_p_alpha_given_k(n_clusters, n, shape, rate):
    prior = GammaMixedDirichletProcessPrior(shape=shape, rate=rate)
    rng = np.random.default_rng([SEED, n_clusters, n])
    draws = np.array([prior.draw_concentration(n, n_clusters, rng) for _ in range(4000)])
    exact = dp_alpha_posterior(n_clusters, n, shape, rate)
    assert stats.kstest(draws, exact.cdf).pvalue > P_THRESHOLD
    from_prior = rng.gamma(shape, 1.0 / rate, size=4000)  # negative control
    assert stats.kstest(from_prior, exact.cdf).pvalue < P_THRESHOLD


_TRANSITION = build_moves_then_gibbs(build_sams_move(cluster_anchors=True, n_updates=4),
                                     n_moves=1, n_gibbs_sweeps=1)
_MIXED = {"dp_gamma": GammaMixedDirichletProcessPrior(shape=SHAPE, rate=RATE)}
_RATE_AS_SCALE = GammaMixedDirichletProcessPrior(shape=SHAPE, rate=1.0 / RATE)


def _with_rate_as_scale(state, log_v_table, log_w_table, rng):
    """The negative control: the tables of the mixture with the Gamma rate read as a scale."""
    tables = _RATE_AS_SCALE.tables(len(log_w_table) - 2)
    return on_state(_TRANSITION)(state, *tables, rng)


(test_default_transition_one_step_invariance_alpha_integrated_out,
 test_negative_control_rate_as_scale_is_rejected) = exactness_tests(
    on_state(_TRANSITION), _with_rate_as_scale, _MIXED, PROBLEMS, SEED,
    control=("dp_gamma", "niw"))


# --------------------------------------------------------------------- through pm.sample
DATA = np.array([[1, 1, 0], [1, 1, 1], [0, 0, 1], [0, 0, 0], [1, 0, 1], [0, 1, 0]])
DRAWS, TUNE, THIN = 2000, 50, 2
ALPHA_EDGES = (0.0, 0.5, 1.0, 2.0, math.inf)  # alpha ~ Gamma(2, 1): about 9/17/33/41 %


def _model(*, random_shape=False, extra=False):
    """alpha ~ Gamma(2, 1) (its shape ~ Exponential(1) with ``random_shape``), a DP partition of
    DATA with a Beta-Bernoulli mixture; ``extra``: alpha also drives another term."""
    with pm.Model() as model:
        shape = pm.Exponential("shape", 1.0) if random_shape else 2.0
        alpha = pm.Gamma("alpha", alpha=shape, beta=1.0)
        z = psm.DirichletProcess("z", alpha=alpha, n=len(DATA))
        psm.ConjugateMixture("y", partition=z, component=psm.BetaBernoulli(a=0.5, b=0.5),
                             observed=DATA)
        if extra:
            pm.Normal("w", mu=alpha, sigma=1.0, observed=0.3)
    return model


def _steps(model, **kwargs):
    """The steps ``pm.sample`` runs, by class name and variables."""
    from pymc.sampling.mcmc import assign_step_methods, instantiate_steppers

    with model:
        selected = assign_step_methods(model, **kwargs)[1]
        steps = instantiate_steppers(model, [], selected, initial_point=model.initial_point())
    steps = steps if isinstance(steps, list) else [steps]
    return {type(step).__name__: sorted(v.name for v in step.vars) for step in steps}


def test_pm_sample_gives_alpha_to_the_partition_step(monkeypatch):
    assert _steps(_model()) == {"DefaultPartitionStep": ["alpha_log__", "z"]}
    today = {"ConcentrationGibbs": ["alpha_log__"], "DefaultPartitionStep": ["z"]}
    assert _steps(_model(random_shape=True)) == {**today, "NUTS": ["shape_log__"]}
    assert "ConcentrationGibbs" not in _steps(_model(extra=True))  # alpha feeds another term
    monkeypatch.setattr(psm.steps.DefaultPartitionStep, "concentration_max_points",
                        len(DATA) - 1)
    assert _steps(_model()) == today  # too many points for the table of V(n, K)


def test_explicit_steps_are_never_changed_and_bad_requests_are_refused():
    model = _model()
    with model:
        idata = pm.sample(draws=3, tune=0, chains=1, random_seed=1, progressbar=False,
                          compute_convergence_checks=False,
                          step=[psm.steps.DefaultPartitionStep(model["z"]),
                                psm.ConcentrationGibbs(model["alpha"])])
        assert "concentration_eta" in idata["sample_stats"]
        with pytest.raises(ValueError, match="not the alpha"):
            psm.steps.DefaultPartitionStep(model["z"], concentration=model["z"])
    model = _model(random_shape=True)
    with model, pytest.raises(ValueError, match="not constants"):
        psm.steps.DefaultPartitionStep(model["z"], concentration=model["alpha"])
    model = _model(extra=True)
    with model, pytest.raises(ValueError, match="also influences"):
        psm.steps.DefaultPartitionStep(model["z"], concentration=model["alpha"])


def _exact_joint(shape, rate):
    """Exact probabilities of (partition index, alpha bin), independently of the step's grid:
    the oracle's partition law, and p(alpha in bin | K) by adaptive quadrature."""
    family = psm.BetaBernoulli(a=0.5, b=0.5)
    exact = exact_posterior_random_concentration(DirichletProcessPrior, (shape, rate),
                                                 family, DATA)
    n = len(DATA)

    def density(alpha, k):
        return math.exp(stats.gamma.logpdf(alpha, shape, scale=1.0 / rate) + k * math.log(alpha)
                        + special.gammaln(alpha) - special.gammaln(alpha + n))

    bins = np.empty((n + 1, len(ALPHA_EDGES) - 1))
    for k in range(1, n + 1):
        masses = [integrate.quad(density, low, high, args=(k,), epsabs=0, epsrel=1e-10)[0]
                  for low, high in itertools.pairwise(ALPHA_EDGES)]
        bins[k] = np.array(masses) / np.sum(masses)
    return (exact.prob[:, None] * bins[exact.n_clusters]).reshape(-1)


@pytest.mark.parametrize("broken", [False, True], ids=["default", "alpha_from_its_prior"])
def test_joint_law_of_partition_and_alpha_through_pm_sample(broken):
    model = _model()
    kwargs = {}
    if broken:
        with model:
            kwargs["step"] = [ConcentrationFromItsPriorStep(model["z"],
                                                            concentration=model["alpha"])]
    with model:
        idata = pm.sample(draws=DRAWS, tune=TUNE, chains=2, cores=1, progressbar=False,
                          compute_convergence_checks=False, random_seed=SEED + broken,
                          **kwargs)
    assert "concentration_eta" not in idata["sample_stats"]
    labels = np.asarray(idata["labels"]["z"].values)[:, ::THIN].reshape(-1, len(DATA))
    alpha = np.asarray(idata["posterior"]["alpha"].values)[:, ::THIN].reshape(-1)
    joint = _exact_joint(2.0, 1.0)
    cell = (partition_index(labels, len(DATA)) * (len(ALPHA_EDGES) - 1)
            + np.searchsorted(ALPHA_EDGES, alpha, side="right") - 1)
    counts = np.bincount(cell, minlength=joint.size)
    if broken:
        with pytest.raises(AssertionError):
            assert_counts_gof(counts, joint)
    else:
        assert_counts_gof(counts, joint)
