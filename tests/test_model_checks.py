"""Models the partition samplers cannot sample exactly are refused before the first draw,
with an error naming the term or variable at fault (never a silently wrong posterior or an
exception from inside a step).

* terms reading the labels besides the partition's prior and its ``ConjugateMixture``
  (``label_reading_terms``): a potential, another random variable, a mixture input;
* masked observations;
* random hyperparameters whose prior reaches outside their domain
  (``check_hyperparameter_supports``), ``alpha = inf``;
* labels written by another step outside the partition's labels (``check_labels``);
* the message of a lost positive definiteness in the normal-inverse-Wishart statistics.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from pymc.step_methods.compound import BlockedStep

import pymc_splitmerge as psm
from pymc_splitmerge.analysis import _arviz_compat as compat
from pymc_splitmerge.components.normal_inverse_wishart import niw_recompute
from pymc_splitmerge.distributions.discovery import label_reading_terms

Y = np.array([-3.1, -2.9, -3.0, 0.1, -0.1, 3.0, 2.9, 3.1])
N = Y.size
SAMPLE = {"draws": 4, "tune": 0, "chains": 1, "progressbar": False,
          "compute_convergence_checks": False, "random_seed": 1}


def family(**overrides):
    values = {"mu0": 0.0, "kappa0": 0.1, "alpha0": 2.0, "beta0": 1.0, **overrides}
    return psm.NormalInverseGamma(**values)


def mixture_model(extra=None, alpha=1.0, component=None, observed=Y):
    with pm.Model() as model:
        z = psm.DirichletProcess("z", alpha=alpha, n=N)
        psm.ConjugateMixture("y", partition=z, component=component or family(),
                             observed=observed)
        if extra is not None:
            extra(z)
    return model


# --------------------------------------------------------------------------- label readers
READERS = {
    "potential": (lambda z: pm.Potential("one_cluster", pt.switch(pt.eq(pt.max(z), 0), 0.0,
                                                                      -1e10)),
                  r"the potential 'one_cluster'"),
    "observed variable": (lambda z: pm.Normal("w", mu=pt.cast(z, "float64"), sigma=1.0,
                                               observed=np.zeros(N)),
                          r"the observed variable 'w'"),
    "free variable": (lambda z: pm.Normal("v", mu=pt.max(z), sigma=1.0),
                      r"the random variable 'v'"),
}


@pytest.mark.parametrize("kind", sorted(READERS))
def test_a_term_reading_the_labels_is_refused_naming_it(kind):
    extra, named = READERS[kind]
    model = mixture_model(extra)
    with model:
        with pytest.raises(ValueError, match=named + r".*read.*labels of the partition 'z'"):
            psm.SAMSStep(model["z"])
        with pytest.raises(ValueError, match=named):
            pm.sample(**SAMPLE)  # automatic assignment
        with pytest.raises(ValueError, match=named):
            psm.splitmerge_start(random_seed=1)


def test_a_mixture_hyperparameter_computed_from_the_labels_is_refused():
    with pm.Model() as model:
        z = psm.DirichletProcess("z", alpha=1.0, n=N)
        centre = pm.Deterministic("centre", pt.mean(pt.cast(z, "float64")))
        psm.ConjugateMixture("y", partition=z, component=family(mu0=centre), observed=Y)
    with model, pytest.raises(ValueError, match=r"an input \(hyperparameter or data\) of 'y'"):
        psm.CollapsedGibbsStep(z)


def test_terms_that_do_not_read_the_labels_are_accepted():
    def extra(z):
        pm.Deterministic("n_clusters", pt.max(z) + 1)  # recorded, not in the log density
        pm.Potential("unrelated", pt.constant(0.0))

    model = mixture_model(extra)
    observed = model["y"]
    assert label_reading_terms(model["z"], observed, model) == []
    with model:
        idata = pm.sample(**SAMPLE)
    posterior = compat.get_group(idata, "posterior")
    labels = compat.get_group(idata, "labels")["z"].values
    np.testing.assert_array_equal(posterior["n_clusters"].values, labels.max(axis=-1) + 1)


# --------------------------------------------------------------------------- masked data
def test_masked_observations_are_refused():
    masked = np.ma.masked_array(np.r_[Y[:-1], -999.0], mask=[False] * (N - 1) + [True])
    with pytest.raises(ValueError, match=r"'y': observed is a masked array with 1 masked "
                                         r"\(missing\) entries, in rows \[7\]"):
        mixture_model(observed=masked)


def test_an_empty_mask_is_the_plain_data():
    with mixture_model(observed=np.ma.masked_array(Y, mask=np.zeros(N, dtype=bool))):
        masked = compat.get_group(pm.sample(**SAMPLE), "labels")["z"].values
    with mixture_model():
        plain = compat.get_group(pm.sample(**SAMPLE), "labels")["z"].values
    np.testing.assert_array_equal(masked, plain)


# --------------------------------------------------------------------------- hyperparameters
OUTSIDE = {
    "alpha ~ Normal": (lambda: {"alpha": pm.Normal("a", 0.0, 1.0)}, "dp",
                       r"'a' ~ Normal\(0, 1\).*alpha \(DP concentration\) must be > 0"),
    "discount ~ Uniform(0, 2)": (lambda: {"discount": pm.Uniform("d", 0.0, 2.0)}, "py",
                                 r"'d' ~ Uniform\(0, 2\).*0 <= discount < 1"),
    "kappa0 ~ Normal": (lambda: {"kappa0": pm.Normal("k", 1.0, 1.0)}, "dp",
                        r"'k' ~ Normal\(1, 1\).*'kappa0' must be > 0"),
}
INSIDE = {
    "alpha ~ Gamma": (lambda: {"alpha": pm.Gamma("a", 2.0, 1.0)}, "dp"),
    "discount ~ Beta": (lambda: {"discount": pm.Beta("d", 1.0, 2.0)}, "py"),
    "kappa0 ~ HalfNormal": (lambda: {"kappa0": pm.HalfNormal("k", 1.0)}, "dp"),
    "mu0 ~ Normal": (lambda: {"mu0": pm.Normal("m", 0.0, 1.0)}, "dp"),
}


def hyperparameter_model(make, prior):
    with pm.Model() as model:
        random = make()
        if prior == "py":
            z = psm.PitmanYor("z", alpha=1.0, discount=random.pop("discount", 0.3), n=N)
        else:
            z = psm.DirichletProcess("z", alpha=random.pop("alpha", 1.0), n=N)
        psm.ConjugateMixture("y", partition=z, component=family(**random), observed=Y)
    return model


@pytest.mark.parametrize("case", sorted(OUTSIDE))
def test_a_hyperparameter_prior_outside_the_domain_is_refused_before_sampling(case):
    make, prior, message = OUTSIDE[case]
    model = hyperparameter_model(make, prior)
    with model:
        with pytest.raises(ValueError, match=r"random hyperparameter " + message):
            pm.sample(**SAMPLE)
        with pytest.raises(ValueError, match=message):
            psm.splitmerge_start(random_seed=1)


@pytest.mark.parametrize("case", sorted(INSIDE))
def test_a_hyperparameter_prior_inside_the_domain_samples(case):
    make, prior = INSIDE[case]
    with hyperparameter_model(make, prior):
        idata = pm.sample(**SAMPLE)
    assert compat.get_group(idata, "labels")["z"].shape == (1, 4, N)


@pytest.mark.parametrize("prior", ["dp", "py"])
def test_an_infinite_concentration_is_told_to_be_finite(prior):
    with pm.Model(), pytest.raises(ValueError, match=r"alpha.*must be finite.*got inf"):
        if prior == "dp":
            psm.DirichletProcess("z", alpha=np.inf, n=N)
        else:
            psm.PitmanYor("z", alpha=np.inf, discount=0.5, n=N)


# --------------------------------------------------------------------------- corrupted labels
class _WriteLabels(BlockedStep):
    """A step of another package that writes ``labels`` into the partition."""

    def __init__(self, var, labels):
        self.vars = [var]
        self.labels = labels if labels.dtype.kind == "f" else labels.astype(var.dtype)

    def step(self, point):
        return {**point, self.vars[0].name: self.labels}, []


CORRUPT = {
    "negative": np.r_[-1, np.zeros(N - 1, dtype=np.int64)],
    "out of range": np.r_[N, np.zeros(N - 1, dtype=np.int64)],
    "float": np.linspace(0.0, 1.0, N),
}


@pytest.mark.parametrize(("victim", "corruption"), [
    ("partition step", "negative"), ("partition step", "out of range"),
    ("concentration step", "negative"), ("concentration step", "float"),
])
def test_labels_corrupted_by_another_step_name_the_variable(corruption, victim):
    # the victim runs right after the corrupting step, before any pytensor function sees the
    # labels (PyMC's own functions refuse float labels written last in a draw); the
    # partition step's first draw checks the start, so it runs first.  Labels out of range
    # leave the cluster sizes, all a concentration step reads, unchanged.
    with pm.Model() as model:
        alpha = pm.Gamma("alpha", 2.0, 1.0) if victim == "concentration step" else 1.0
        z = psm.DirichletProcess("z", alpha=alpha, n=N)
        psm.ConjugateMixture("y", partition=z, component=family(), observed=Y)
        writer = _WriteLabels(model.rvs_to_values[z], CORRUPT[corruption])
        if victim == "partition step":
            steps = [psm.CollapsedGibbsStep(z), writer]
        else:
            steps = [writer, psm.ConcentrationGibbs(alpha)]
        with pytest.raises(ValueError, match=r"the labels of the partition 'z'"):
            pm.sample(step=steps, **SAMPLE)


# --------------------------------------------------------------------------- NIW message
def test_lost_definiteness_says_to_put_mu0_near_the_data():
    niw = psm.NormalInverseWishart(mu0=np.zeros(2), kappa0=1.0, nu0=4.0, psi0=np.eye(2))
    stats = niw.stats_of(niw.prepare_data(np.array([[1.0, 2.0]]))).copy()
    stats[3:7] = -10.0 * np.eye(2).ravel()  # sum of x x' made indefinite
    with pytest.raises(ValueError, match=r"rounding error.*give mu0 a value near the data"):
        niw_recompute(niw.params, stats)
