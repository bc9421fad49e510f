"""``ConcentrationGibbs`` reads alpha and its Gamma parameters without a compiled call when
it can (alpha through its value transform, constant Gamma parameters): the same update as the
compiled path, draw for draw; with a random Gamma parameter it keeps the compiled path."""

from __future__ import annotations

import numpy as np
import pymc as pm

import pymc_splitmerge as psm
from pymc_splitmerge.steps import concentration

DATA = np.array([[1, 1, 0], [1, 1, 1], [0, 0, 1], [0, 0, 0], [1, 0, 1], [0, 1, 0]])


def _model(random_rate=False):
    with pm.Model() as model:
        rate = pm.Gamma("rate", 2.0, 2.0) if random_rate else 1.5
        alpha = pm.Gamma("alpha", alpha=2.0, beta=rate)
        z = psm.DirichletProcess("z", alpha=alpha, n=len(DATA))
        psm.ConjugateMixture("y", partition=z, component=psm.BetaBernoulli(), observed=DATA)
    return model


def test_fast_path_is_the_compiled_update(monkeypatch):
    model = _model()
    with model:
        fast = psm.ConcentrationGibbs(model["alpha"])
        monkeypatch.setattr(concentration, "_fast_reader", lambda param, model: None)
        compiled = psm.ConcentrationGibbs(model["alpha"])
    assert fast.access is None and compiled.access is not None  # each path is taken
    point = model.initial_point()
    labels = np.array([0, 0, 1, 1, 2, 0])
    for draw in range(20):
        point = {**point, "z": labels}
        fast.set_rng(np.random.default_rng(draw))
        compiled.set_rng(np.random.default_rng(draw))
        new_fast, (stats_fast,) = fast.step(point)
        new_compiled, (stats_compiled,) = compiled.step(point)
        np.testing.assert_allclose(new_fast["alpha_log__"], new_compiled["alpha_log__"],
                                   rtol=1e-12)
        assert stats_fast == stats_compiled
        assert new_fast["alpha_log__"] != point["alpha_log__"]
        point = new_fast


def test_random_gamma_rate_keeps_the_compiled_path():
    model = _model(random_rate=True)
    with model:
        step = psm.ConcentrationGibbs(model["alpha"])
    assert step.access is not None
    point = {**model.initial_point(), "z": np.array([0, 0, 1, 1, 2, 0])}
    new_point, _ = step.step(point)
    assert np.isfinite(new_point["alpha_log__"]) and new_point["rate_log__"] == point["rate_log__"]
