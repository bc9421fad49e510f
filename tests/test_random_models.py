"""Property-based test: random small models either sample right or fail before sampling.

``hypothesis`` builds small models from every supported partition prior (Dirichlet process,
Pitman-Yor, finite Dirichlet, mixture of finite mixtures; fixed or Gamma-distributed
concentration), the conjugate component families (each family's own ``examples`` give valid
hyperparameters and data), starts and data transforms (offsets, scales, float32 / integer
dtypes, pandas DataFrames), including invalid ones (a concentration, discount or ``k``
outside its domain, a NaN hyperparameter, NaN data, a start outside the labels), and checks
that each model either

* samples (``psm.sample``, a few draws, one chain) with a finite log joint at every draw equal
  to an independent computation: the prior's EPPF at the draw's block sizes plus the family's
  log marginal of each block's rows (the quantities of the ``psm.testing`` oracle, evaluated
  in numpy at the draw's labels and concentration; the negative control also checks the
  model's own pytensor terms, ``psm.log_joint_draws``); or
* fails before the first draw (at model build, or in ``pm.sample`` before a draw is
  recorded) with an error whose message names the argument at fault.

Masked observations and a random concentration whose prior reaches outside its domain are
among the faults that must be refused before sampling.  A subnormal Pitman-Yor discount is
kept out of the random search and checked by ``test_pitman_yor_subnormal_discount``.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd
import pymc as pm
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pymc.exceptions import SamplingError

import pymc_splitmerge as psm
from pymc_splitmerge import components, priors
from pymc_splitmerge.analysis import _arviz_compat as compat

FAMILIES = ("NormalInverseWishart", "NormalKnownCovariance", "NormalInverseGamma",
            "BetaBernoulli", "DirichletCategorical", "GammaPoisson")
CONTINUOUS = {"NormalInverseWishart", "NormalKnownCovariance", "NormalInverseGamma"}
PRIORS = ("dp", "py", "finite", "mfm")
BAD_CONCENTRATIONS = (0.0, -1.0, float("nan"), float("inf"))
DRAWS = 3


def _examples(family_name):
    cls = components.FAMILY_CLASSES[family_name]
    return cls.examples(np.random.default_rng(0))


@st.composite
def specs(draw):
    """A model description and the argument at fault (None: a valid model)."""
    prior = draw(st.sampled_from(PRIORS))
    family_name = draw(st.sampled_from(FAMILIES))
    examples = _examples(family_name)
    _, family, data = examples[draw(st.integers(0, len(examples) - 1))]
    n = draw(st.integers(1, 6))
    spec = {"prior": prior, "family": family, "family_name": family_name,
            "data": np.asarray(data)[:n], "n": n,
            "random_concentration": draw(st.booleans()),
            "concentration": draw(st.floats(0.3, 3.0)),
            # (subnormal discounts: test_pitman_yor_subnormal_discount below)
            "discount": draw(st.floats(0.0, 0.7, allow_subnormal=False)),
            "k": draw(st.integers(2, 4)),
            "k_prior": draw(st.sampled_from(["poisson", "geometric"])),
            "hyperparameters": dict(family.hyperparameters), "initval": None,
            "mask": False, "fault": None}
    # data transforms (all valid): offset and scale (continuous data), dtype, container
    if family_name in CONTINUOUS:
        offset = draw(st.sampled_from([0.0, -3.5, 100.0, 1e3]))
        scale = draw(st.sampled_from([1.0, 0.1, 20.0]))
        data = spec["data"] * scale + offset
        dtype = draw(st.sampled_from(["float64", "float32", "int64"]))
        spec["data"] = np.round(data) if dtype == "int64" else data
        spec["data"] = spec["data"].astype(dtype)
    else:
        spec["data"] = spec["data"].astype(draw(st.sampled_from(["int64", "int32"])))
    spec["container"] = draw(st.sampled_from(["array", "dataframe"]))
    spec["mask"] = draw(st.sampled_from([False] * 7 + [True]))
    # the start: none, valid labels, or labels outside the support
    start = draw(st.sampled_from(["none"] * 3 + ["valid", "too large", "negative", "fraction"]))
    if start != "none":
        labels = np.asarray(draw(st.lists(st.integers(0, n - 1), min_size=n, max_size=n)))
        if prior == "finite":
            labels = np.minimum(labels, spec["k"] - 1)
        if start == "too large":
            labels[0] = n + spec["k"]
        elif start == "negative":
            labels[0] = -1
        if start == "fraction":
            labels = labels + 0.5
        spec["initval"] = labels
        if start != "valid":
            spec["fault"] = r"initval"
    if prior == "mfm":
        spec["random_concentration"] = False  # (a random MFM gamma is one of the faults)
    if spec["fault"] is None:  # at most one fault per model, so the error is attributable
        fault = draw(st.sampled_from(["none"] * 6 + ["concentration", "discount", "k",
                                                     "hyperparameter", "data"]))
        if fault == "concentration" and prior == "mfm" and draw(st.booleans()):
            spec["random_concentration"] = True
            spec["fault"] = "gamma"  # refused: MFM's V_n table needs a constant gamma
        elif fault == "concentration":
            spec["random_concentration"] = False
            spec["concentration"] = draw(st.sampled_from(BAD_CONCENTRATIONS))
            spec["fault"] = "gamma" if prior == "mfm" else "alpha"
        elif fault == "discount" and prior == "py":
            spec["discount"] = draw(st.sampled_from([1.0, -0.2, float("nan")]))
            spec["fault"] = "discount"
        elif fault == "k" and prior == "finite":
            spec["k"] = draw(st.sampled_from([0, -2]))
            spec["fault"] = r"\bk\b"
        elif fault == "hyperparameter":
            names = [name for name, value in spec["hyperparameters"].items()
                     if np.asarray(value).dtype.kind == "f"]
            name = draw(st.sampled_from(names))
            value = np.asarray(spec["hyperparameters"][name], dtype=np.float64)
            spec["hyperparameters"][name] = np.full_like(value, np.nan)
            spec["fault"] = name
        elif fault == "data":
            data = spec["data"].astype(np.float64)
            data.flat[0] = np.nan
            spec["data"] = data
            spec["fault"] = r"nan|finite"
    if spec["mask"]:  # a masked entry is itself a fault: keep one fault per model
        if spec["fault"] is None:
            spec["fault"] = r"mask"
        else:
            spec["mask"] = False
    return spec


def _numeric_prior(spec, concentration):
    prior = spec["prior"]
    if prior == "dp":
        return priors.DirichletProcessPrior(concentration)
    if prior == "py":
        return priors.PitmanYorPrior(concentration, spec["discount"])
    if prior == "finite":
        return priors.FiniteDirichletPrior(concentration, spec["k"])
    return priors.MixtureOfFiniteMixturesPrior(concentration, _k_prior(spec))


def _k_prior(spec):
    return psm.ShiftedPoisson(1.5) if spec["k_prior"] == "poisson" else psm.Geometric(0.4)


def _observed(spec):
    data = spec["data"]
    if spec["mask"]:
        mask = np.zeros(data.shape, dtype=bool)
        mask.flat[0] = True
        data = np.ma.masked_array(data, mask=mask)
    elif spec["container"] == "dataframe":
        data = pd.DataFrame(data.reshape(len(data), -1))
        if spec["data"].ndim == 1:
            data = data[0]  # a Series for one-column data
    return data


def _build(spec):
    n = spec["n"]
    with pm.Model() as model:
        if spec["random_concentration"]:
            concentration = pm.Gamma("c", 2.0, 1.0)
        else:
            concentration = spec["concentration"]
        kwargs = {"n": n, "initval": spec["initval"]}
        if spec["prior"] == "dp":
            z = psm.DirichletProcess("z", alpha=concentration, **kwargs)
        elif spec["prior"] == "py":
            z = psm.PitmanYor("z", alpha=concentration, discount=spec["discount"], **kwargs)
        elif spec["prior"] == "finite":
            z = psm.FiniteDirichlet("z", alpha=concentration, k=spec["k"], **kwargs)
        else:
            z = psm.MixtureOfFiniteMixtures("z", gamma=concentration, k_prior=_k_prior(spec),
                                            **kwargs)
        family = type(spec["family"])(**spec["hyperparameters"])
        psm.ConjugateMixture("y", partition=z, component=family, observed=_observed(spec))
    return model


def _independent_log_joint(spec, labels, concentration):
    """log EPPF(block sizes) + sum over blocks of the family's log marginal, in numpy."""
    family = type(spec["family"])(**spec["hyperparameters"])
    prepared = np.asarray(family.prepare_data(np.asarray(spec["data"])), dtype=np.float64)
    prior = _numeric_prior(spec, concentration)
    blocks = [np.flatnonzero(labels == label) for label in np.unique(labels)]
    sizes = np.zeros(len(labels), dtype=np.int64)
    sizes[:len(blocks)] = sorted((len(block) for block in blocks), reverse=True)
    return float(prior.log_eppf(sizes)) + sum(float(family.log_marginal_of(prepared[block]))
                                              for block in blocks)


#: PyMC's functions that run the chains: an error raised inside them came during sampling
_SAMPLING_FRAMES = {"_iter_sample", "_sample", "_mp_sample", "_sample_population",
                    "_iter_population"}


def _raised_while_sampling(error) -> bool:
    frames, tb = set(), error.__traceback__
    while tb is not None:
        frames.add(tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    return bool(frames & _SAMPLING_FRAMES)


def _check(spec):
    try:
        model = _build(spec)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            idata = psm.sample(model=model, draws=DRAWS, tune=1, chains=1, cores=1,
                               random_seed=1, progressbar=False, quiet=True,
                               compute_convergence_checks=False)
    except (ValueError, TypeError, SamplingError) as error:
        assert spec["fault"] is not None, f"a valid model failed: {error!r}\n{spec}"
        assert not _raised_while_sampling(error), f"failed while sampling: {error!r}"
        assert re.search(spec["fault"], str(error), re.IGNORECASE), (
            f"the error does not name {spec['fault']!r}: {error!r}")
        return
    assert spec["fault"] is None, f"sampled a model whose {spec['fault']!r} is invalid\n{spec}"
    posterior = compat.get_group(idata, "posterior")
    labels = compat.get_group(idata, "labels")["z"].values[0]
    log_joint = compat.get_group(idata, "partition_diagnostics")["log_joint"].values[0]
    assert np.all(np.isfinite(log_joint)), log_joint
    concentrations = (posterior["c"].values[0] if spec["random_concentration"]
                      else np.full(DRAWS, spec["concentration"]))
    expected = [_independent_log_joint(spec, labels[d], concentrations[d]) for d in range(DRAWS)]
    np.testing.assert_allclose(log_joint, expected, rtol=1e-7, atol=1e-7)
    return idata, model, expected


@settings(max_examples=15, deadline=None, derandomize=True, phases=[Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(specs())
def test_random_model_samples_right_or_fails_before_sampling(spec):
    _check(spec)


def _valid_spec(**changes):
    _, family, data = _examples("NormalInverseGamma")[0]
    spec = {"prior": "dp", "family": family, "family_name": "NormalInverseGamma",
            "data": np.asarray(data)[:5], "n": 5, "random_concentration": False,
            "concentration": 1.0, "discount": 0.0, "k": 3, "k_prior": "poisson",
            "hyperparameters": dict(family.hyperparameters), "initval": None, "mask": False,
            "container": "array", "fault": None}
    return {**spec, **changes}


def test_the_property_check_accepts_a_valid_model_and_rejects_a_wrong_oracle():
    """Negative control: the same check fails when the independent computation is off."""
    idata, model, expected = _check(_valid_spec(random_concentration=True))
    # the model's own pytensor terms give the same numbers
    np.testing.assert_allclose(psm.log_joint_draws(idata, model)[0], expected, rtol=1e-7,
                               atol=1e-7)
    wrong = _valid_spec(random_concentration=True, discount=0.3, prior="py")
    wrong_family = {**wrong["hyperparameters"], "kappa0": 2.0}
    model = _build(wrong)
    idata = psm.sample(model=model, draws=DRAWS, tune=1, chains=1, random_seed=1,
                       progressbar=False, quiet=True, compute_convergence_checks=False)
    labels = compat.get_group(idata, "labels")["z"].values[0]
    alphas = compat.get_group(idata, "posterior")["c"].values[0]
    log_joint = compat.get_group(idata, "partition_diagnostics")["log_joint"].values[0]
    off = [_independent_log_joint({**wrong, "hyperparameters": wrong_family}, labels[d],
                                  alphas[d]) for d in range(DRAWS)]
    assert not np.allclose(log_joint, off, rtol=1e-7, atol=1e-7)
    # and a fault that is not raised is reported
    with pytest.raises(AssertionError, match="sampled a model whose"):
        _check({**_valid_spec(), "fault": "alpha"})


def test_masked_observations_are_refused():
    _check(_valid_spec(mask=True, fault=r"mask"))


def test_concentration_prior_outside_its_domain_is_refused_before_sampling():
    with pm.Model() as model:
        alpha = pm.Normal("alpha", 0.0, 1.0)
        z = psm.DirichletProcess("z", alpha=alpha, n=5)
        psm.ConjugateMixture("y", partition=z, component=psm.NormalInverseGamma(),
                             observed=np.arange(5.0))
    with pytest.raises((ValueError, SamplingError)) as info:
        pm.sample(model=model, draws=3, tune=0, chains=1, progressbar=False,
                  compute_convergence_checks=False, random_seed=0)
    assert not _raised_while_sampling(info.value) and "alpha" in str(info.value)


def test_pitman_yor_subnormal_discount():
    _check(_valid_spec(prior="py", discount=2.2e-309))
