"""What ``pm.sample()`` assigns to a model with a random component family: the hyperparameter
step and the partition step alternated in rounds (``steps.alternation``).

Exactness of the alternation against enumeration and quadrature, with its negative control,
is in ``tests/test_hierarchical_exact.py``.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest

import pymc_splitmerge as psm
from pymc_splitmerge.components import BetaBernoulli
from pymc_splitmerge.steps import DefaultPartitionStep
from pymc_splitmerge.steps.alternation import AlternatingStep

DATA = np.array([[1, 1, 0, 0], [1, 1, 0, 1], [1, 0, 0, 0], [0, 0, 1, 1], [0, 1, 1, 1]])


def _model(random_family=True):
    with pm.Model() as model:
        a = pm.Gamma("a", 2.0, 1.0) if random_family else 1.0
        z = psm.DirichletProcess("z", alpha=1.0, n=DATA.shape[0])
        psm.ConjugateMixture("y", partition=z, component=BetaBernoulli(a=a, b=0.5),
                             observed=DATA)
    return model


@pytest.fixture
def built(monkeypatch):
    """The steps pm.sample builds: {"alternating": [...], "partition": [...]}, each a list of
    the instances created during the test."""
    seen = {"alternating": [], "partition": []}
    for key, cls in (("alternating", AlternatingStep), ("partition", DefaultPartitionStep)):
        original = cls.__init__

        def spy(self, *args, _original=original, _key=key, **kwargs):
            _original(self, *args, **kwargs)
            seen[_key].append(self)

        monkeypatch.setattr(cls, "__init__", spy)
    return seen


def _sample(model, **kwargs):
    with model:
        return pm.sample(draws=3, tune=3, chains=1, cores=1, random_seed=1, progressbar=False,
                         compute_convergence_checks=False, **kwargs)


def test_random_family_gets_two_rounds_of_slice_and_partition_steps(built):
    idata = _sample(_model())
    (alternating,) = built["alternating"]
    assert alternating.n_rounds == DefaultPartitionStep.random_family_rounds == 2
    hyper, partition = alternating.methods
    assert isinstance(hyper, psm.HyperparameterSlice) and hyper.n_updates == 3  # max(ceil(1/2), 3)
    updates = DefaultPartitionStep.random_family_round_split_merge_updates
    assert partition.n_split_merge_updates == partition.transition.move.n_updates == updates
    stats = idata["sample_stats"]
    assert "hyperslice_evaluations" in stats and "sams_accepted" in stats


def test_alternation_runs_every_round(monkeypatch):
    calls = []
    original = psm.HyperparameterSlice.step

    def counted(self, point):
        calls.append(1)
        return original(self, point)

    monkeypatch.setattr(psm.HyperparameterSlice, "step", counted)
    _sample(_model())
    assert len(calls) == 2 * 6  # two rounds in each of 3 tuning + 3 kept draws


@pytest.mark.parametrize("options, rounds", [
    ({"sams": {"n_rounds": 1}}, 1),
    ({"sams": {"n_split_merge_updates": 40}}, 1),  # the user's own count: one round
    ({"sams": {"n_split_merge_updates": 40, "n_rounds": 3}}, 3),
])
def test_options_of_the_partition_step(built, options, rounds):
    _sample(_model(), **options)
    (partition,) = built["partition"]
    assert partition.n_rounds == rounds
    assert [a.n_rounds for a in built["alternating"]] == ([rounds] if rounds > 1 else [])


def test_the_slice_steps_own_number_of_moves_is_kept(built):
    _sample(_model(), hyperslice={"n_updates": 5})
    (alternating,) = built["alternating"]
    assert alternating.methods[0].n_updates == 5


def test_no_alternation_for_fixed_families_or_steps_given_by_the_user(built):
    _sample(_model(random_family=False))
    model = _model()
    with model:
        steps = [psm.HyperparameterSlice([model["a"]]), DefaultPartitionStep([model["z"]])]
    _sample(model, step=steps)
    assert built["alternating"] == []
    assert [p.n_rounds for p in built["partition"]] == [1, 2]  # the given one: not alternated
    # not alternated: the random family's updates in one round
    assert built["partition"][1].n_split_merge_updates == (
        DefaultPartitionStep.random_family_split_merge_updates)


def test_a_hyperparameter_step_given_by_the_user_leaves_the_partition_step_one_round(built):
    model = _model()
    with model:
        _sample(model, step=[pm.NUTS([model["a"]])])
    (partition,) = built["partition"]
    assert built["alternating"] == []
    assert partition.n_split_merge_updates == DefaultPartitionStep.random_family_split_merge_updates


@pytest.mark.parametrize("n_rounds", [0, -1, 1.5])
def test_bad_number_of_rounds_is_refused(n_rounds):
    with pytest.raises((TypeError, ValueError), match="n_rounds"):
        AlternatingStep([], n_rounds=n_rounds)
    with _model() as model, pytest.raises((TypeError, ValueError), match="n_rounds"):
        DefaultPartitionStep([model["z"]], n_rounds=n_rounds)


def test_the_alternation_gives_the_same_draws_on_two_cores():
    from pymc_splitmerge.analysis._arviz_compat import posterior_with_labels

    results = []
    for cores in (1, 2):
        with _model():
            results.append(pm.sample(draws=15, tune=15, chains=2, cores=cores, random_seed=11,
                                     progressbar=False, compute_convergence_checks=False))
    sequential, parallel = results
    for name in ("z", "a"):
        np.testing.assert_array_equal(posterior_with_labels(sequential)[name].values,
                                      posterior_with_labels(parallel)[name].values)
    assert not np.array_equal(sequential.posterior["a"].values[0],
                              sequential.posterior["a"].values[1])
