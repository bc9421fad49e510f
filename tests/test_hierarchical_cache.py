"""The cached cluster statistics are never reused after the labels (or the data) change.

:class:`~pymc_splitmerge.distributions.statistics.ClusterStatistics` recognises the read-only
label array a partition step writes in O(1) (identity of a recorded array) and compares any
other array with its private copy of the labels.  Every route by which the labels or the data
can change between two evaluations of the same compiled function is exercised, and every
value is compared with an independent one (the numeric prior's EPPF, the numeric core's log
marginals, the scalar priors' compiled log density):

* a user's point with other labels (a fresh array);
* a user's array changed in place (PyMC's shared-memory point of a parallel chain is
  overwritten in place at every draw);
* an array a step wrote, made writable again and changed in place;
* labels written by a partition step (``CollapsedGibbsStep.step``), hyperparameters moved
  between steps as NUTS moves them;
* the observed data changed by ``pm.set_data`` while the labels stay the same array;
* ``pm.sample`` from a user-supplied start: the log density NUTS reports at every draw.

Negative controls: a check that trusts the identity of any array (not only recorded,
read-only ones) misses the in-place change; a check that never invalidates misses the others.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest
from conftest import thinned_labels

import pymc_splitmerge as psm
from pymc_splitmerge.components import NormalInverseWishart
from pymc_splitmerge.distributions import statistics
from pymc_splitmerge.priors import DirichletProcessPrior

MODE = "FAST_COMPILE"
N = 24
ALPHA = 1.0
BLOBS = np.repeat([[0.0, 0.0], [5.0, 5.0], [-5.0, 5.0]], N // 3, axis=0)


def _data(seed):
    return BLOBS + np.random.default_rng(seed).normal(size=BLOBS.shape)


def _model(x, shared):
    with pm.Model() as model:
        kappa0 = pm.Gamma("kappa0", 2.0, 2.0)
        scale = pm.HalfNormal("scale", 2.0)
        z = psm.DirichletProcess("z", alpha=ALPHA, n=N)
        observed = pm.Data("x", x) if shared else x
        psm.ConjugateMixture("y", partition=z, component=NormalInverseWishart(
            mu0=np.zeros(2), kappa0=kappa0, nu0=4.0, psi0=scale * np.eye(2)),
            observed=observed)
    model._scalar_logp = model.compile_logp(vars=[kappa0, scale], mode=MODE)
    return model


def _independent(model, point, x):
    """DP EPPF + the numeric core's log marginals + the scalar priors (with Jacobians)."""
    labels = np.asarray(point["z"])
    family = NormalInverseWishart(mu0=np.zeros(2), kappa0=np.exp(point["kappa0_log__"]),
                                  nu0=4.0, psi0=np.exp(point["scale_log__"]) * np.eye(2))
    sizes = np.bincount(labels)
    eppf = DirichletProcessPrior(ALPHA).log_eppf(sizes[sizes > 0])
    likelihood = sum(family.log_marginal_of(x[labels == j]) for j in np.unique(labels))
    return eppf + likelihood + model._scalar_logp(point)


def _hyper(point, step):
    return {**point, "kappa0_log__": np.array(0.1 * step - 0.2),
            "scale_log__": np.array(0.3 - 0.15 * step)}


# ------------------------------------------------------------------ the routes
# each returns [(value of the compiled function, independent value)] along its evaluations

def _user_points(rng):
    x = _data(0)
    model = _model(x, shared=False)
    logp = model.compile_logp(mode=MODE)
    pairs = []
    for step in range(4):
        point = _hyper({**model.initial_point(), "z": rng.integers(0, 4, N)}, step)
        pairs.append((logp(point), _independent(model, point, x)))
    return pairs


def _in_place(rng):
    x = _data(1)
    model = _model(x, shared=False)
    logp = model.compile_logp(mode=MODE)
    labels = np.repeat([0, 1, 2], N // 3).astype(model["z"].dtype)  # passed as it is
    point = {**model.initial_point(), "z": labels}
    pairs = []
    for step in range(4):
        point = _hyper(point, step)
        pairs.append((logp(point), _independent(model, point, x)))
        labels[:] = rng.integers(0, 4, N)  # the same array object, other labels
    return pairs


def _written_made_writable(rng):
    x = _data(2)
    model = _model(x, shared=False)
    logp = model.compile_logp(mode=MODE)
    labels = statistics.mark_written_labels(
        np.repeat([0, 1, 2], N // 3).astype(model["z"].dtype))
    point = {**model.initial_point(), "z": labels}
    pairs = [(logp(point), _independent(model, point, x))]
    with pytest.raises(ValueError, match="read-only"):
        labels[0] = 3  # a step's labels cannot be changed in place by accident
    labels.flags.writeable = True  # ... only deliberately
    for step in range(3):
        labels[:] = rng.integers(0, 4, N)
        point = _hyper(point, step)
        pairs.append((logp(point), _independent(model, point, x)))
    return pairs


def _partition_step(rng):
    x = _data(3)
    model = _model(x, shared=False)
    logp = model.compile_logp(mode=MODE)
    with model:
        step = psm.CollapsedGibbsStep(model["z"])
    if hasattr(step, "set_rng"):
        step.set_rng(np.random.default_rng(int(rng.integers(1 << 30))))
    else:
        step.setup_chain(np.random.default_rng(int(rng.integers(1 << 30))), tune=False,
                         draws=10)
    point = {**model.initial_point(), "z": np.zeros(N, dtype=model["z"].dtype)}
    pairs, seen = [], set()
    for draw in range(6):
        point, _ = step.step(point)
        seen.add(tuple(point["z"]))
        for move in range(3):  # hyperparameters moved with the labels fixed (NUTS)
            point = _hyper(point, draw + move)
            pairs.append((logp(point), _independent(model, point, x)))
    assert len(seen) > 1  # the step did change the labels
    return pairs


def _set_data(rng):
    model = _model(_data(4), shared=True)
    logp = model.compile_logp(mode=MODE)
    labels = statistics.mark_written_labels(
        np.repeat([0, 1, 2], N // 3).astype(model["z"].dtype))
    point = _hyper({**model.initial_point(), "z": labels}, 1)
    pairs = []
    for seed in (4, 5, 6):
        x = _data(seed)
        with model:
            pm.set_data({"x": x})
        pairs.append((logp(point), _independent(model, point, x)))
    return pairs


def _sample(rng):
    x = _data(7)
    model = _model(x, shared=False)
    start = rng.integers(0, 3, N)
    with model:
        # NUTS (given: pm.sample would assign HyperparameterSlice) reports the model's log
        # density through the cached statistics at every draw ("lp")
        idata = pm.sample(draws=12, tune=8, chains=1, cores=1, step=[psm.CollapsedGibbsStep(
            model["z"]), pm.NUTS([model["kappa0"], model["scale"]])], initvals={"z": start},
            random_seed=int(rng.integers(1 << 30)),
            progressbar=False, compute_convergence_checks=False)
    posterior, stats = idata["posterior"], idata["sample_stats"]
    lp = np.asarray(stats["lp"].values).reshape(-1)
    labels = thinned_labels(idata, 1, chains=1)
    kappa0 = np.asarray(posterior["kappa0"].values).reshape(-1)
    scale = np.asarray(posterior["scale"].values).reshape(-1)
    pairs = []
    for i in range(lp.size):
        point = {"z": labels[i], "kappa0_log__": np.log(kappa0[i]),
                 "scale_log__": np.log(scale[i])}
        pairs.append((lp[i], _independent(model, point, x)))
    assert len({tuple(row) for row in labels}) > 1  # the labels moved during the run
    return pairs


ROUTES = {"user_points": _user_points, "in_place": _in_place,
          "written_made_writable": _written_made_writable, "partition_step": _partition_step,
          "set_data": _set_data, "sample": _sample}


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_cache_is_never_reused_after_a_change(route):
    pairs = ROUTES[route](np.random.default_rng(24))
    assert len(pairs) >= 3
    for value, independent in pairs:
        assert value == pytest.approx(independent, rel=1e-9, abs=1e-9), route


def test_written_labels_are_recognised_without_comparison(monkeypatch):
    """The O(1) path is taken: with the element-by-element comparison disabled (always
    "different"), the labels a step wrote are still recognised, an ordinary array is not."""
    x = _data(8)
    model = _model(x, shared=False)
    logp = model.compile_logp(mode=MODE)
    computed = []
    original = statistics.ClusterStatistics._compute

    def counted(self, labels, values):
        computed.append(1)
        return original(self, labels, values)

    monkeypatch.setattr(statistics.ClusterStatistics, "_compute", counted)
    monkeypatch.setattr(statistics, "_same_inputs",
                        lambda previous, inputs: not previous and not inputs)
    written = statistics.mark_written_labels(
        np.repeat([0, 1, 2], N // 3).astype(model["z"].dtype))
    for step in range(4):
        point = _hyper({**model.initial_point(), "z": written}, step)
        assert logp(point) == pytest.approx(_independent(model, point, x), rel=1e-9)
    first = len(computed)
    assert 1 <= first <= 2  # the prior's and the mixture's statistics, once
    ordinary = np.array(written)
    for step in range(2):
        logp(_hyper({**model.initial_point(), "z": ordinary}, step))
    assert len(computed) == 3 * first


@pytest.mark.parametrize(("broken", "routes"), [
    ("identity_trusted", ["in_place", "written_made_writable"]),
    ("never_invalidated", ["user_points", "partition_step", "set_data", "sample"]),
])
def test_negative_control_stale_statistics_are_caught(monkeypatch, broken, routes):
    """The same comparisons reject a cache check that trusts any array's identity, or one
    that never invalidates."""
    monkeypatch.setattr(statistics, "_is_written", lambda labels: True)
    if broken == "never_invalidated":
        monkeypatch.setattr(statistics, "_same_inputs", lambda previous, inputs: True)
    for route in routes:
        pairs = ROUTES[route](np.random.default_rng(24))
        assert max(abs(value - independent) for value, independent in pairs) > 1e-3, route
