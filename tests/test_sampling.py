"""``psm.sample``: PyMC's checks skip the partition, label-invariant checks replace them.

* PyMC's ``run_convergence_checks`` never sees the partition variable (spy), still sees the
  other free variables, and the ``partition_diagnostics`` group is added.
* A well-mixing run logs no R-hat / ESS warning; two chains stuck in different partitions
  (a negative control built from fixed label arrays) get both warnings, naming the partition
  and the quantities.
* Every ``pm.sample`` argument passes through (draws, chains, quiet, return_inferencedata).
"""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pymc as pm
import pytest
import xarray as xr

import pymc_splitmerge as psm
from pymc_splitmerge.analysis import _arviz_compat as compat

DATA = np.array([[1, 1, 0], [1, 1, 1], [0, 0, 1], [0, 0, 0], [1, 0, 1], [0, 1, 0]])


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@pytest.fixture
def convergence_log():
    logger = logging.getLogger("pymc.stats.convergence")
    handler = _Records()
    logger.addHandler(handler)
    yield handler.messages
    logger.removeHandler(handler)


def _model(n_partitions=1):
    model = pm.Model()
    with model:
        alpha = pm.Gamma("alpha", 2.0, 1.0)
        for name in ("z", "x")[:n_partitions]:
            z = psm.DirichletProcess(name, alpha=alpha if name == "z" else 1.0, n=len(DATA))
            psm.ConjugateMixture(name + "_y", partition=z,
                                 component=psm.BetaBernoulli(a=1.0, b=1.0), observed=DATA)
    return model


def _spy_on_pymc_checks(monkeypatch):
    from pymc.stats import convergence

    seen = []
    original = convergence.run_convergence_checks

    def spy(idata, model):
        seen.append(sorted(compat.get_group(idata, "posterior").data_vars))
        return original(idata, model)

    monkeypatch.setattr(convergence, "run_convergence_checks", spy)
    return seen


def test_pymc_checks_skip_partition_and_group_is_added(monkeypatch, convergence_log):
    seen = _spy_on_pymc_checks(monkeypatch)
    with _model():
        idata = psm.sample(draws=400, tune=50, chains=2, cores=1, random_seed=3,
                           progressbar=False)
    assert seen == [["alpha"]]  # PyMC's checks ran once, on alpha only
    group = compat.get_group(idata, "partition_diagnostics")
    assert {"n_clusters", "log_joint", "fraction_in_largest_clusters"} <= set(group.data_vars)
    assert group.sizes["chain"] == 2 and group.sizes["draw"] == 400
    labels = np.asarray(idata["labels"]["z"].values)
    np.testing.assert_array_equal(group["n_clusters"].values, labels.max(axis=-1) + 1)
    # a well-mixing run on a tiny problem: no R-hat / ESS warning at all
    assert not [m for m in convergence_log if "rhat" in m or "effective sample" in m], (
        convergence_log)


def _stuck_data(shift):
    """Two chains x 200 draws; chain 1's partitions are coarser than chain 0's by ``shift``."""
    rng = np.random.default_rng(0)
    n = 12
    chains = []
    for chain in range(2):
        k = 2 + shift * chain
        draws = [np.sort(rng.integers(0, k, size=n)) for _ in range(200)]
        chains.append([np.unique(d, return_inverse=True)[1] for d in draws])
    posterior = xr.Dataset({"z": (("chain", "draw", "z_dim_0"), np.array(chains))})
    if compat.ARVIZ_MAJOR >= 1:
        return xr.DataTree.from_dict({"posterior": posterior})
    import arviz as az

    return az.InferenceData(posterior=posterior)


def test_stuck_chains_warn_negative_control():
    data = _stuck_data(shift=3)  # chain 0: ~2 clusters, chain 1: ~5 clusters
    psm.add_partition_quantities(data, "z")
    warnings = psm.partition_convergence_checks(data, var_names=["z"])
    messages = [w.message for w in warnings]
    assert len(messages) == 2, messages
    assert "rhat statistic is larger than 1.01" in messages[0]
    assert "'z'" in messages[0] and "n_clusters" in messages[0]
    assert "effective sample size per chain is smaller than 100" in messages[1]
    assert warnings[0].level == "info" and warnings[1].level == "error"  # PyMC's levels
    same = _stuck_data(shift=0)  # both chains from the same law: the same check is silent
    psm.add_partition_quantities(same, "z")
    assert not [w for w in psm.partition_convergence_checks(same, var_names=["z"])
                if "rhat" in w.message]


def test_arguments_pass_through(convergence_log):
    with _model(n_partitions=2):
        idata = psm.sample(draws=20, tune=5, chains=1, cores=1, random_seed=1,
                           progressbar=False, quiet=True)
        with warnings.catch_warnings():  # pymc 6 deprecates return_inferencedata=False
            warnings.simplefilter("ignore", FutureWarning)
            trace = psm.sample(draws=7, tune=5, chains=1, cores=1, random_seed=1,
                               progressbar=False, return_inferencedata=False, quiet=True)
    assert convergence_log == []  # quiet=True: nothing logged
    assert idata["posterior"].sizes["draw"] == 20
    for name in ("z", "x"):  # several partitions: one group each
        assert compat.has_group(idata, f"partition_diagnostics_{name}")
    assert isinstance(trace, pm.backends.base.MultiTrace) and len(trace) == 7


def test_user_guide_trace_plot_block_runs(tmp_path):
    """The user guide's ArviZ block (trace plot + summary) runs on this line."""
    import pathlib
    import re

    import matplotlib

    matplotlib.use("Agg")
    guide = pathlib.Path(__file__).parents[1] / "docs" / "user_guide.md"
    blocks = re.findall(r"```python\n(.*?)```", guide.read_text(), flags=re.DOTALL)
    (block,) = [b for b in blocks if "az.plot_trace(idata)" in b]
    with _model():
        idata = psm.sample(draws=100, tune=10, chains=2, cores=1, random_seed=2,
                           progressbar=False, quiet=True)
    namespace = {"idata": idata}
    exec(block, namespace)  # noqa: S102 (the documented code block itself)
    table = namespace["table"]
    assert any("n_clusters" in str(row) for row in table.index)
    assert not any(str(row).startswith("z[") for row in table.index)
    import matplotlib.pyplot as plt

    plt.savefig(tmp_path / "trace.png")
    plt.close("all")


def test_numeric_log_joint_equals_model_log_joint():
    """psm.sample's O(n) numba log joint is the model's pytensor log joint, draw by draw."""
    from pymc_splitmerge.sampling.mcmc import numeric_log_joint

    with pm.Model() as model:
        alpha = pm.Gamma("alpha", 2.0, 1.0)
        a = pm.Gamma("a", 2.0, 2.0)  # a random family hyperparameter too
        z = psm.PitmanYor("z", alpha=alpha, discount=0.3, n=len(DATA))
        psm.ConjugateMixture("y", partition=z, component=psm.BetaBernoulli(a=a, b=1.0),
                             observed=DATA)
        idata = pm.sample(draws=30, tune=5, chains=2, cores=1, random_seed=4,
                          progressbar=False, compute_convergence_checks=False)
    expected = psm.log_joint_draws(idata, model, "z")
    np.testing.assert_allclose(numeric_log_joint(idata, model, "z"), expected, rtol=1e-9)
    assert np.unique(expected).size > 5  # the draws differ
    # psm.summary / partition_quantities with model= use the numba evaluation: same numbers
    quantities = psm.partition_quantities(idata, "z", model=model, num_pairs=0)
    np.testing.assert_allclose(quantities["log_joint"].values, expected, rtol=1e-9)
    table = psm.summary(idata, model=model, reference=None)
    assert table.loc["log_joint", "mean"] == pytest.approx(expected.mean(), rel=1e-9)


@pytest.mark.parametrize("random", ["prior", "family"])
def test_numeric_log_joint_rebuilds_only_what_changed(monkeypatch, random):
    """The numeric log joint rebuilds the prior only when the prior's values change and the
    family only when the family's do (counted), with the model's values draw by draw;
    negative control: a comparison that always says "unchanged" gives wrong values."""
    from pymc_splitmerge.analysis import log_joint
    from pymc_splitmerge.distributions.discovery import PartitionModel
    from pymc_splitmerge.sampling.mcmc import numeric_log_joint

    with pm.Model() as model:
        alpha = pm.Gamma("alpha", 2.0, 1.0) if random == "prior" else 1.0
        a = pm.Gamma("a", 2.0, 2.0) if random == "family" else 1.0
        z = psm.DirichletProcess("z", alpha=alpha, n=len(DATA))
        psm.ConjugateMixture("y", partition=z, component=psm.BetaBernoulli(a=a, b=1.0),
                             observed=DATA)
        idata = pm.sample(draws=20, tune=5, chains=2, cores=1, random_seed=5,
                          progressbar=False, compute_convergence_checks=False)
    expected = psm.log_joint_draws(idata, model, "z")
    counts = {"numeric_prior": 0, "numeric_family": 0}
    for name in counts:
        original = getattr(PartitionModel, name)

        def counted(self, point, evaluated=None, _original=original, _name=name):
            counts[_name] += evaluated is not None  # the loop's calls, not discover's checks
            return _original(self, point, evaluated)

        monkeypatch.setattr(PartitionModel, name, counted)
    np.testing.assert_allclose(numeric_log_joint(idata, model, "z"), expected, rtol=1e-9)
    fixed = "numeric_family" if random == "prior" else "numeric_prior"
    assert counts[fixed] == 1 and counts[({*counts} - {fixed}).pop()] > 10
    monkeypatch.setattr(log_joint, "_same_values", lambda first, second: True)
    assert not np.allclose(numeric_log_joint(idata, model, "z"), expected, rtol=1e-9)


# ----------------------------------------------------------------- plain pm.sample (the hook)


def test_plain_pm_sample_checks_skip_labels(monkeypatch, convergence_log):
    from pymc.sampling import mcmc as pymc_mcmc

    assert pymc_mcmc.run_convergence_checks is psm.sampling.label_invariant_convergence_checks
    seen = _spy_on_pymc_checks(monkeypatch)
    with _model(), warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no divide warning from label R-hats
        idata = pm.sample(draws=400, tune=50, chains=2, cores=1, random_seed=3,
                          progressbar=False)
    assert seen == [["alpha"]]  # PyMC's R-hat / ESS never saw the label vector
    assert not compat.has_group(idata, "partition_diagnostics")  # pm.sample's output unchanged
    assert not [m for m in convergence_log if "rhat" in m or "effective sample" in m], (
        convergence_log)


def test_plain_pm_sample_without_hook_checks_labels_negative_control():
    from pymc.sampling import mcmc as pymc_mcmc
    from pymc.stats import convergence

    seen = []

    def spy(idata, model):
        seen.append(sorted(compat.get_group(idata, "posterior").data_vars))
        return convergence.run_convergence_checks(idata, model)

    psm.install_pymc_hooks(False)
    try:
        assert pymc_mcmc.run_convergence_checks is convergence.run_convergence_checks
        pymc_mcmc.run_convergence_checks = spy  # PyMC's own function, observed
        with _model(), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            pm.sample(draws=100, tune=20, chains=2, cores=1, random_seed=3, progressbar=False,
                      quiet=True)
    finally:
        psm.install_pymc_hooks()
    assert pymc_mcmc.run_convergence_checks is psm.sampling.label_invariant_convergence_checks
    assert seen == [["alpha", "z"]]  # PyMC's own function takes the labels


def test_hook_passes_models_without_partition_to_pymc(monkeypatch):
    seen = _spy_on_pymc_checks(monkeypatch)
    with pm.Model() as model:
        pm.Normal("mu", 0.0, 1.0)
    posterior = xr.Dataset({"mu": (("chain", "draw"),
                                   np.random.default_rng(0).normal(size=(2, 150)))})
    data = (xr.DataTree.from_dict({"posterior": posterior}) if compat.ARVIZ_MAJOR >= 1
            else __import__("arviz").InferenceData(posterior=posterior))
    psm.sampling.label_invariant_convergence_checks(data, model)
    assert seen == [["mu"]]


def _stuck_model():
    rng = np.random.default_rng(1)
    with pm.Model() as model:
        z = psm.DirichletProcess("z", alpha=1.0, n=12)
        psm.ConjugateMixture("y", partition=z, component=psm.BetaBernoulli(a=1.0, b=1.0),
                             observed=rng.integers(0, 2, size=(12, 3)))
    return model


def test_hook_warns_for_stuck_chains_negative_control(monkeypatch):
    seen = _spy_on_pymc_checks(monkeypatch)
    model = _stuck_model()
    warns = psm.sampling.label_invariant_convergence_checks(_stuck_data(shift=3), model)
    messages = [w.message for w in warns]
    assert seen == []  # nothing but the partition: PyMC's R-hat has nothing to check
    rhat = [m for m in messages if "rhat statistic is larger than 1.01" in m]
    assert len(rhat) == 1 and "'z'" in rhat[0] and "n_clusters" in rhat[0] and "log_joint" in rhat[0]
    assert any("effective sample size per chain is smaller than 100" in m for m in messages)
    same = psm.sampling.label_invariant_convergence_checks(_stuck_data(shift=0), model)
    assert not [w for w in same if "rhat" in w.message]
