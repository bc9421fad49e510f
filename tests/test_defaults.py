"""What plain ``pm.sample()`` assigns, and that the assigned combination is exact.

Importing ``pymc_splitmerge`` registers ``DefaultPartitionStep`` (SAMS + one Gibbs sweep) for
partition variables, ``ConcentrationGibbs`` for a Dirichlet-process alpha with a Gamma prior
(which ``pm.sample`` then gives to the partition step when the Gamma's parameters are
constants: tests/test_concentration_integrated.py) and ``PartitionPriorSlice`` for the other
prior parameters it updates exactly.  Exactness is
checked through plain ``pm.sample()`` (no ``step=``) against the enumerated posterior with a
random concentration (partition χ², suite-wide threshold; posterior mean of alpha within
4.5 batch-means standard errors), as in ``test_sampler_matrix.py``.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest
from pymc.sampling.mcmc import assign_step_methods
from pymc.step_methods import STEP_METHODS
from test_sampler_matrix import (
    ALPHA_GAMMA_PRIOR,
    CONCENTRATION_BATCHES,
    CONCENTRATION_SIGMAS,
    FAMILIES,
    case_seed,
    model_prior,
    numeric_prior_factory,
)

import pymc_splitmerge as psm
from pymc_splitmerge.testing import (
    assert_partition_gof,
    batch_means_standard_error,
    exact_posterior_random_concentration,
)

DATA = np.array([[1, 1, 0], [1, 1, 1], [0, 0, 1], [0, 0, 0], [1, 0, 1], [0, 1, 0]])


def _assigned(build):
    with pm.Model() as model:
        build()
        _, selected = assign_step_methods(model)
    return {cls.__name__: sorted(v.name for v in values) for cls, values in selected.items()}


def _mixture(z):
    psm.ConjugateMixture(z.name + "_y", partition=z,
                         component=psm.BetaBernoulli(a=1.0, b=1.0), observed=DATA)


def test_registered_first():
    assert STEP_METHODS[:4] == [psm.steps.DefaultPartitionStep, psm.SlotGibbsStep,
                                psm.ConcentrationGibbs, psm.PartitionPriorSlice]
    psm.steps.register_step_methods()  # idempotent
    assert STEP_METHODS.count(psm.steps.DefaultPartitionStep) == 1


def test_dirichlet_process_gamma_alpha_gets_concentration_gibbs():
    def build():
        _mixture(psm.DirichletProcess("z", alpha=pm.Gamma("a", 2.0, 1.0), n=len(DATA)))
    assert _assigned(build) == {"ConcentrationGibbs": ["a_log__"],
                                "DefaultPartitionStep": ["z"]}


@pytest.mark.parametrize("prior", ["dp_exponential", "pitman_yor", "finite_dirichlet"])
def test_other_exact_parameters_get_prior_slice(prior):
    def build():
        if prior == "dp_exponential":
            z = psm.DirichletProcess("z", alpha=pm.Exponential("a", 1.0), n=len(DATA))
        elif prior == "pitman_yor":
            z = psm.PitmanYor("z", alpha=pm.Gamma("a", 2.0, 1.0),
                              discount=pm.Uniform("d", 0.0, 0.9), n=len(DATA))
        else:
            z = psm.FiniteDirichlet("z", alpha=pm.Gamma("a", 2.0, 1.0), k=3, n=len(DATA))
        _mixture(z)
    expected = ["a_log__", "d_interval__"] if prior == "pitman_yor" else ["a_log__"]
    assert _assigned(build) == {"PartitionPriorSlice": expected,
                                "DefaultPartitionStep": ["z"]}


def test_parameters_that_are_not_exact_for_us_keep_pymc_choice():
    def build():
        a = pm.Gamma("a", 2.0, 1.0)
        _mixture(psm.DirichletProcess("z", alpha=a, n=len(DATA)))
        pm.Normal("w", mu=a, sigma=1.0, observed=0.3)  # alpha also drives another term
        b = pm.Gamma("b", 2.0, 1.0)
        _mixture(psm.DirichletProcess("x", alpha=2.0 * b, n=len(DATA)))  # not used directly
    assigned = _assigned(build)
    assert assigned.pop("DefaultPartitionStep") == ["x", "z"]
    assert assigned == {"NUTS": ["a_log__", "b_log__"]}


def test_two_partition_variables_get_one_step_each():
    with pm.Model():
        for name in ("z", "x"):
            _mixture(psm.DirichletProcess(name, alpha=1.0, n=len(DATA)))
        idata = pm.sample(draws=3, tune=2, chains=1, progressbar=False, random_seed=1,
                          compute_convergence_checks=False)
    assert {"z", "x"} <= set(idata["labels"].data_vars)
    assert {"z_n_clusters", "x_n_clusters"} <= set(idata["posterior"].data_vars)
    # one SAMS step per variable: its stats get an extra dimension of length 2
    assert np.asarray(idata["sample_stats"]["sams_n_clusters"].values).shape[-1] == 2


PLAIN_CASES = {
    # prior -> (family, stat of the step the alpha must get; None: the partition step owns
    # alpha, tests/test_concentration_integrated.py)
    "dirichlet_process": ("beta_bernoulli", None),
    "pitman_yor": ("beta_bernoulli", "prior_slice_evaluations"),
    "finite_dirichlet": ("normal_inverse_wishart", "prior_slice_evaluations"),
}
PLAIN_DRAWS, PLAIN_TUNE, PLAIN_THIN = 2400, 100, 8


@pytest.mark.parametrize("prior_name", sorted(PLAIN_CASES))
def test_plain_pm_sample_is_exact_with_random_concentration(prior_name):
    family_name, alpha_stat = PLAIN_CASES[prior_name]
    make_family, data = FAMILIES[family_name]
    shape, rate = ALPHA_GAMMA_PRIOR
    with pm.Model():
        alpha = pm.Gamma("alpha", alpha=shape, beta=rate)
        z = model_prior(prior_name, len(data), alpha, family_name)
        psm.ConjugateMixture("y", partition=z, component=make_family(), observed=data)
        idata = pm.sample(draws=PLAIN_DRAWS, tune=PLAIN_TUNE, chains=2, cores=1,
                          progressbar=False, compute_convergence_checks=False,
                          random_seed=case_seed("plain", prior_name))
    stats = idata["sample_stats"]
    assert {"sams_move", alpha_stat or "sams_move"} <= set(stats.data_vars)
    assert (alpha_stat is None) == ("concentration_eta" not in stats
                                    and "prior_slice_evaluations" not in stats)
    assert "diverging" not in stats and "gibbs_changed" not in stats  # no NUTS, no extra Gibbs
    labels = np.asarray(idata["labels"]["z"].values)[:, ::PLAIN_THIN]
    exact = exact_posterior_random_concentration(
        numeric_prior_factory(prior_name, family_name), ALPHA_GAMMA_PRIOR, make_family(), data)
    assert_partition_gof(labels.reshape(-1, labels.shape[-1]), exact)
    alpha_draws = np.asarray(idata["posterior"]["alpha"].values)
    errors = [batch_means_standard_error(chain, CONCENTRATION_BATCHES)[0]
              for chain in alpha_draws]
    error = np.sqrt(np.sum(np.square(errors))) / len(errors)
    assert abs(alpha_draws.mean() - exact.concentration_mean) < CONCENTRATION_SIGMAS * error
