"""A user's start of a partition variable is checked before PyMC casts it; ``pm.sample(model=)``
assigns the same steps as ``pm.sample()`` inside ``with model:``; ``initval=`` takes int64 labels.

PyMC casts ``initvals`` to the variable's integer dtype without a check (as for
``pm.Categorical``): ``0.5`` becomes ``0``; on pymc 6 a label too large for the compact label
dtype wraps around (``256`` is ``0`` in int8) and NaN becomes another integer.  Each of these
was a silent wrong start; ``pymc_splitmerge.sampling.hooks`` refuses them with an error naming the
variable and what to give (``install_pymc_hooks``).
"""

from __future__ import annotations

import re

import numpy as np
import pymc as pm
import pytest
from pymc.exceptions import SamplingError

import pymc_splitmerge as psm
from pymc_splitmerge.sampling import hooks

DATA = np.array([[1, 1, 0, 0], [1, 1, 0, 1], [1, 0, 0, 0], [0, 0, 1, 1], [0, 1, 1, 1],
                 [0, 1, 1, 0], [1, 0, 1, 0]])
N = len(DATA)
GOOD = np.array([0, 0, 0, 1, 1, 1, 0])

PRIORS = {
    "dp": lambda: psm.DirichletProcess("z", alpha=pm.Gamma("alpha", 2.0, 1.0), n=N),
    "py": lambda: psm.PitmanYor("z", alpha=1.0, discount=0.3, n=N),
    "finite": lambda: psm.FiniteDirichlet("z", alpha=1.0, k=3, n=N),
    "mfm": lambda: psm.MixtureOfFiniteMixtures("z", gamma=1.0, k_prior=psm.ShiftedPoisson(1.0),
                                               n=N),
}


def _model(prior="dp"):
    with pm.Model() as model:
        z = PRIORS[prior]()
        psm.ConjugateMixture("y", partition=z, component=psm.BetaBernoulli(a=1.0, b=1.0),
                             observed=DATA)
    return model


def _sample(model, initvals, chains=1, **kwargs):
    with model:
        return pm.sample(draws=4, tune=2, chains=chains, cores=1, initvals=initvals,
                         random_seed=3, progressbar=False, compute_convergence_checks=False,
                         **kwargs)


@pytest.mark.parametrize("prior", sorted(PRIORS))
def test_float_start_is_refused_not_truncated(prior):
    start = GOOD + np.array([0.5, 0.2, 0.7, 0.1, 0.9, 0.4, 0.6])  # PyMC would cast to GOOD
    with pytest.raises(ValueError, match=r"initvals\['z'\].*7 non-integer value\(s\) \(first: "
                                         r"0\.5 at index 0\).*truncate.*integer label"):
        _sample(_model(prior), {"z": start})


def test_integer_valued_float_start_is_the_integer_start():
    model = _model()
    as_float = _sample(model, {"z": GOOD.astype(float)})
    as_int = _sample(model, {"z": GOOD})
    np.testing.assert_array_equal(as_float["labels"]["z"].values,
                                  as_int["labels"]["z"].values)


@pytest.mark.parametrize("start", [GOOD[:-1], np.r_[GOOD, 0], GOOD[:, None]],
                         ids=["short", "long", "column"])
def test_wrong_shape_is_refused(start):
    expected = re.escape(f"shape {start.shape}") + r".*one label per observation, shape \(7,\)"
    with pytest.raises(ValueError, match=expected):
        _sample(_model(), {"z": start})


def test_non_finite_and_non_numeric_starts_are_refused():
    with pytest.raises(ValueError, match=r"1 non-finite value\(s\) \(first: nan at index 6\)"):
        _sample(_model(), {"z": np.r_[GOOD[:-1].astype(float), np.nan]})
    with pytest.raises(TypeError, match=r"not integer labels"):
        _sample(_model(), {"z": np.array(list("abcdefg"))})


@pytest.mark.parametrize(("prior", "label", "limit"),
                         [("dp", -1, 7), ("dp", 7, 7), ("py", 9, 7), ("mfm", -2, 7),
                          ("finite", 3, 3),
                          ("dp", 256, 7)],  # 256 would wrap to 0 in the int8 label dtype
                         ids=["dp-negative", "dp-n", "py-large", "mfm-negative", "finite-k",
                              "dp-int8-wrap"])
def test_labels_outside_the_range_are_refused_before_sampling(prior, label, limit):
    start = np.r_[GOOD[:-1], label]
    with pytest.raises(SamplingError, match=rf"initvals\['z'\].*'z'.*labels outside "
                                            rf"\[0, {limit}\)"):
        _sample(_model(prior), {"z": start}, chains=2)


def test_start_keyed_by_the_variable_is_checked():
    model = _model()
    with pytest.raises(ValueError, match=r"initvals\['z'\].*non-integer"):
        _sample(model, {model["z"]: GOOD + 0.5})


def test_per_chain_starts_name_the_chain():
    with pytest.raises(ValueError, match=r"initvals\[1\]\['z'\].*non-integer"):
        _sample(_model(), [{"z": GOOD}, {"z": GOOD + 0.5}], chains=2)
    idata = _sample(_model(), [{"z": GOOD}, {"z": np.zeros(N, dtype=int)}], chains=2)
    assert idata["labels"]["z"].shape == (2, 4, N)


def test_initval_set_on_the_model_is_checked():
    model = _model()
    with pytest.raises(TypeError, match="loss of precision"):  # PyMC's own check of floats
        model.set_initval(model["z"], GOOD + 0.5)
    model.set_initval(model["z"], np.r_[GOOD[:-1], 9].astype(model["z"].dtype))
    with pytest.raises(SamplingError, match=r"the initval of 'z'.*labels outside \[0, 7\)"):
        _sample(model, None)


def test_initval_keyword_is_checked_and_stored_in_the_label_dtype():
    with pm.Model() as model:
        z = psm.DirichletProcess("z", alpha=1.0, n=N, initval=GOOD)  # int64: PyMC refused it
        assert z.dtype == "int8"
        with pytest.raises(ValueError, match=r"initval of 'w'.*non-integer"):
            psm.DirichletProcess("w", alpha=1.0, n=N, initval=GOOD + 0.5)
        with pytest.raises(SamplingError, match=r"initval of 'v'.*labels outside \[0, 3\)"):
            psm.FiniteDirichlet("v", alpha=1.0, k=3, n=N, initval=np.r_[GOOD[:-1], 3])
        u = psm.PitmanYor("u", alpha=1.0, discount=0.2, n=N, initval="prior")  # strategies pass
    assert model.rvs_to_initial_values[u] == "prior"
    np.testing.assert_array_equal(model.initial_point()["z"], GOOD)
    assert model.initial_point()["z"].dtype == np.int8


def test_models_without_partition_variables_are_untouched():
    with pm.Model() as model:
        pm.Normal("x", 0.0, 1.0)
    hooks.check_partition_initvals(model, {"x": 0.5})
    idata = _sample(model, {"x": 0.5})
    assert idata["posterior"]["x"].shape == (1, 4)


def test_pm_sample_with_model_keyword_assigns_the_package_steps():
    # outside `with model:` PyMC's competence check must still see the model (else alpha gets NUTS)
    idata = pm.sample(draws=4, tune=2, chains=1, model=_model(), random_seed=3,
                      progressbar=False, compute_convergence_checks=False)
    stats = idata["sample_stats"]
    assert "step_size" not in stats  # alpha is the partition step's (it integrates alpha out)
    assert np.unique(np.asarray(idata["posterior"]["alpha"].values)).size > 1


def test_hooks_can_be_removed_and_reinstalled():
    from pymc.sampling import mcmc as pymc_mcmc

    try:
        psm.install_pymc_hooks(False)
        assert pymc_mcmc.make_initial_point_fns_per_chain is (
            pm.initial_point.make_initial_point_fns_per_chain)
        assert pymc_mcmc.assign_step_methods is hooks.pymc_function("assign_step_methods")
        assert pymc_mcmc.assign_step_methods.__module__ == "pymc.sampling.mcmc"
        # without the hooks, PyMC casts a fractional start silently (the gap they close)
        _sample(_model("py"), {"z": GOOD + 0.25})
    finally:
        psm.install_pymc_hooks()
        psm.install_pymc_hooks()  # idempotent
    assert pymc_mcmc.make_initial_point_fns_per_chain is hooks.make_initial_point_fns_per_chain
    assert pymc_mcmc.assign_step_methods is hooks.assign_step_methods
    with pytest.raises(ValueError, match="non-integer"):
        _sample(_model("py"), {"z": GOOD + 0.25})


@pytest.mark.parametrize("case", ["fixed alpha, no step", "gamma alpha, SAMS step",
                                  "gamma alpha, both steps", "continuous only, no step"])
def test_step_assignment_is_pymcs(case):
    # the wrapped assign_step_methods is PyMC's own choice, made inside the model's context
    from pymc.sampling import mcmc as pymc_mcmc

    if case.startswith("fixed"):
        model = _model("py")
    elif case.startswith("gamma"):
        model = _model("dp")
    else:
        with pm.Model() as model:
            pm.Normal("x", 0.0, 1.0)
    with model:
        if "both steps" in case:
            step = [psm.SAMSStep(model["z"]), psm.ConcentrationGibbs(model["alpha"])]
        elif "SAMS step" in case:
            step = psm.SAMSStep(model["z"])
        else:
            step = None
    with model:  # (the package's competences need the model context, see the module doc)
        pymc_provided, pymc_selected = hooks.pymc_function("assign_step_methods")(model, step)
    provided, selected = pymc_mcmc.assign_step_methods(model, step)  # outside the context
    assert provided == pymc_provided
    assert selected == pymc_selected


def test_invalid_steps_still_get_pymcs_errors():
    model = _model("py")
    with model:
        step = psm.SAMSStep(model["z"])
    with pytest.raises(ValueError, match="not initialized"):
        _sample(model, None, step=[psm.SAMSStep])
    with pytest.raises(ValueError, match="Step should be a Step"):
        _sample(model, None, step=step.step)
    other = _model("finite")
    with pytest.raises(ValueError, match="not a value variable in the model"):
        _sample(other, None, step=step)
