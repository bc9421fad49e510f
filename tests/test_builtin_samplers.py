"""PyMC's built-in mixtures (pymc_splitmerge.comparison, benchmarks/builtin_samplers.py) and the
analysis functions on their traces (non-canonical labels of a Categorical variable).

Not timed: the sampling runs are tiny and only check that every contender of the benchmark
still builds, samples and is judged by the package's analysis code."""

from __future__ import annotations

import importlib.util
import os
import types
import warnings

import matplotlib

matplotlib.use("Agg")

import arviz as az
import numpy as np
import pytest
from scipy import stats

import pymc_splitmerge as psm
from pymc_splitmerge import analysis as psa
from pymc_splitmerge import comparison
from pymc_splitmerge.analysis import _arviz_compat as compat
from pymc_splitmerge.core.relabel import canonical_labels_reference

pm = pytest.importorskip("pymc")
pytensor = pytest.importorskip("pytensor")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def make_trace(values: dict):
    if compat.ARVIZ_MAJOR >= 1:
        return az.from_dict({"posterior": values})
    return az.from_dict(posterior=values)


def load_benchmark():
    path = os.path.join(ROOT, "benchmarks", "builtin_samplers.py")
    spec = importlib.util.spec_from_file_location("builtin_samplers_benchmark", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def rng():
    return np.random.default_rng(121212)


@pytest.fixture(autouse=True)
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


# ---------------------------------------------------------------------------------------------
# analysis functions on traces of built-in models


def categorical_style(rng, canonical, dtype, offset):
    """The same partitions with arbitrary component indices (a fresh permutation per draw)."""
    chains, draws, n = canonical.shape
    out = np.empty(canonical.shape, dtype=np.int64)
    for c in range(chains):
        for d in range(draws):
            out[c, d] = rng.permutation(n + 5)[canonical[c, d]] * 3 + offset
    return out.astype(dtype)


@pytest.mark.parametrize("dtype, offset", [(np.int8, 0), (np.uint16, 1000), (np.int32, 7),
                                           (np.uint64, 2**40), (np.int64, 2**40)])
def test_analysis_accepts_categorical_labels(rng, dtype, offset):
    truth = np.repeat([0, 1, 2], 4)
    canonical = np.broadcast_to(truth, (2, 30, truth.size)).copy()
    flips = rng.random(canonical.shape) < 0.25
    canonical[flips] = rng.integers(0, 4, flips.sum())
    canonical = psa.canonicalize(canonical)
    if dtype == np.int8:
        offset = 0  # labels must fit
        raw = categorical_style(rng, canonical, np.int64, 0)
        raw = (raw % 120).astype(np.int8)
        canonical = canonical_labels_reference(raw.reshape(-1, raw.shape[-1])).reshape(raw.shape)
    else:
        raw = categorical_style(rng, canonical, dtype, offset)
    assert not psa._labels.is_canonical(raw)
    if offset:
        assert raw.max() >= raw.shape[-1]  # labels beyond n
    raw_trace = make_trace({"z": raw, "weights": rng.random((2, 30, 4))})
    clean_trace = make_trace({"z": canonical, "weights": rng.random((2, 30, 4))})

    labels, name = psa.partition_draws(raw_trace, "z")
    np.testing.assert_array_equal(labels, canonical)
    assert labels.dtype == np.int64 and name == "z"
    # found without var_name too: the only integer (chain, draw, n) variable
    assert psa.find_partition_variable(compat.get_group(raw_trace)) == "z"

    pairs = [[0, 5], [3, 4]]
    kwargs = {"pairs": pairs, "reference": canonical[0, 0]}
    expected = psm.summary(clean_trace, var_name="z", **kwargs)
    for trace in (raw_trace, raw):
        got = psm.summary(trace, var_name="z" if trace is raw_trace else None, **kwargs)
        np.testing.assert_allclose(got.to_numpy(), expected.to_numpy())
    np.testing.assert_allclose(psm.posterior_similarity_matrix(raw_trace, var_name="z"),
                               psm.posterior_similarity_matrix(canonical))
    assert psm.point_estimate(raw_trace, var_name="z", rng=1).labels.tolist() == \
        psm.point_estimate(canonical, rng=1).labels.tolist()
    np.testing.assert_allclose(psm.distance_diagnostics(raw_trace, var_name="z",
                                                        reference=canonical[0, 0]).to_numpy(),
                               psm.distance_diagnostics(canonical,
                                                        reference=canonical[0, 0]).to_numpy())
    assert psm.adjusted_rand_index(raw[0, 0], canonical[0, 0]) == pytest.approx(1.0)
    figure, _ = psm.plot_block_fractions(raw_trace, var_name="z")
    matplotlib.pyplot.close(figure)
    psm.add_partition_quantities(raw_trace, var_name="z", pairs=pairs)
    assert "partition_diagnostics" in compat.group_names(raw_trace)


def test_ambiguous_integer_variables_still_need_var_name(rng):
    raw = rng.integers(3, 9, size=(2, 10, 12))
    trace = make_trace({"z": raw, "counts": raw + 1})
    with pytest.raises(ValueError, match="found no partition variable"):
        psm.summary(trace)
    assert psm.summary(trace, var_name="z", num_pairs=0, reference=None).shape[0] == 4


def test_canonicalize_matches_core_reference_for_huge_labels(rng):
    small = rng.integers(0, 15, size=(50, 9))
    labels = small.astype(np.uint64) * np.uint64(2**60)  # up to 14 * 2**60 > int64 max
    assert labels.max() > np.iinfo(np.int64).max
    expected = canonical_labels_reference(small)
    np.testing.assert_array_equal(psa.canonicalize(labels), expected)


# ---------------------------------------------------------------------------------------------
# the built-in models


def at_values(expression, values: dict) -> float:
    """Evaluate a graph of random variables at given values of them."""
    replacements = {variable: pytensor.tensor.as_tensor_variable(np.asarray(value)).astype(
        variable.dtype) for variable, value in values.items()}
    return float(pytensor.graph.replace.graph_replace(expression, replacements).eval())


def bernoulli_problem():
    data, truth = psm.datasets.jain_neal_bernoulli(6, n_per_component=3, seed=3)
    return data, truth, psm.BetaBernoulli(a=1.0, b=1.0)


def gaussian_problem():
    data, truth = psm.datasets.gaussian_blobs(n=24, n_components=3, dim=2, separation=5.0,
                                              seed=1)
    return data, truth, psm.NormalKnownCovariance(mu0=data.mean(axis=0), sigma0=25.0,
                                                  sigma=np.eye(2))


def test_model_log_density_matches_numpy():
    """The marginal potential equals sum_i logsumexp_k(log w_k + log F(y_i | theta_k)), and
    the explicit model's likelihood is F(y_i | theta_{z_i}) (hand-written numpy)."""
    for data, _, family in (bernoulli_problem(), gaussian_problem()):
        rng = np.random.default_rng(5)
        k = 4
        weights = rng.dirichlet(np.ones(k))
        if isinstance(family, psm.BetaBernoulli):
            theta = rng.uniform(0.1, 0.9, size=(k, data.shape[1]))
            log_f = data @ np.log(theta).T + (1 - data) @ np.log1p(-theta).T
        else:
            theta = rng.normal(size=(k, 2)) * 3
            log_f = np.stack([stats.multivariate_normal(t, np.eye(2)).logpdf(data)
                              for t in theta], axis=1)
        marginal = comparison.builtin_mixture_model(data, family, k, weights="dirichlet",
                                                    labels="marginal")
        potential = at_values(marginal["y_marginal"],
                              {marginal["weights"]: weights, marginal["theta"]: theta})
        expected = np.logaddexp.reduce(np.log(weights) + log_f, axis=1).sum()
        assert potential == pytest.approx(expected, rel=1e-9)

        explicit = comparison.builtin_mixture_model(data, family, k, weights="dirichlet",
                                                    labels="explicit")
        z = rng.integers(0, k, len(data))
        likelihood = at_values(pm.logp(explicit["y"], data).sum(),
                               {explicit["theta"]: theta, explicit["z"]: z})
        assert likelihood == pytest.approx(log_f[np.arange(len(data)), z].sum(), rel=1e-9)
        np.testing.assert_allclose(
            comparison.log_predictive_draws(
                make_trace({"weights": weights[None, None], "theta": theta[None, None]}),
                family, data)[0, 0],
            np.logaddexp.reduce(np.log(weights) + log_f, axis=1))


def test_stick_breaking_weights_sum_to_one():
    data, _, family = bernoulli_problem()
    model = comparison.builtin_mixture_model(data, family, 6, weights="stick_breaking")
    weights = model.compile_fn(model["weights"], inputs=[model["sticks"]], point_fn=False)
    values = weights(np.array([0.5, 0.2, 0.9, 0.1, 0.3]))
    assert values.sum() == pytest.approx(1.0)
    assert values[:2] == pytest.approx([0.5, 0.1])


def test_labels_from_parameters_follow_the_conditional():
    """Two observations: P(same cluster) = sum_k p_1k p_2k with p_ik ∝ w_k F(y_i | theta_k);
    a binomial test on 4,000 draws (fails if the conditional is not used, e.g. the prior w)."""
    family = psm.BetaBernoulli(a=1.0, b=1.0)
    data = np.array([[1, 1, 0], [1, 0, 0]])
    weights = np.array([0.5, 0.3, 0.2])
    theta = np.array([[0.9, 0.9, 0.1], [0.8, 0.1, 0.2], [0.1, 0.5, 0.5]])
    draws = 4000
    trace = make_trace({"weights": np.broadcast_to(weights, (1, draws, 3)).copy(),
                        "theta": np.broadcast_to(theta, (1, draws, 3, 3)).copy()})
    labels = comparison.labels_from_parameters(trace, data, family, rng=3)
    assert psa._labels.is_canonical(labels)
    log_p = np.log(weights) + data @ np.log(theta).T + (1 - data) @ np.log1p(-theta).T
    p = np.exp(log_p - np.logaddexp.reduce(log_p, axis=1, keepdims=True))
    same = float(p[0] @ p[1])
    hits = int((labels[0, :, 0] == labels[0, :, 1]).sum())
    assert stats.binomtest(hits, draws, same).pvalue > 1e-3
    prior_same = float(weights @ weights)
    assert stats.binomtest(hits, draws, prior_same).pvalue < 1e-3  # the test can tell


def test_bad_input():
    data, _, family = bernoulli_problem()
    with pytest.raises(ValueError, match="weights must be one of"):
        comparison.builtin_mixture_model(data, family, 5, weights="pitman_yor")
    with pytest.raises(ValueError, match="labels must be one of"):
        comparison.builtin_mixture_model(data, family, 5, labels="collapsed")
    with pytest.raises(ValueError, match="n_components must be an integer >= 2"):
        comparison.builtin_mixture_model(data, family, 1)
    with pytest.raises(ValueError, match="0/1"):
        comparison.builtin_mixture_model(data + 1, family, 5)
    with pytest.raises(TypeError, match="BetaBernoulli and NormalKnownCovariance"):
        comparison.builtin_mixture_model(data, psm.GammaPoisson(1.0, 1.0), 5)


def test_sample_builtin_mixture_gives_canonical_labels():
    """Marginalised Gaussian model: labels drawn per draw, canonical, readable by summary."""
    data, _, family = gaussian_problem()
    with pytensor.config.change_flags(mode="FAST_COMPILE"):  # tiny run: skip C compilation
        idata = comparison.sample_builtin_mixture(data, family, 4, weights="stick_breaking",
                                                  labels="marginal", draws=8, tune=8,
                                                  chains=2, random_seed=11)
    posterior = compat.get_group(idata, "posterior")
    assert posterior["z"].shape == (2, 8, len(data))
    assert psa._labels.is_canonical(posterior["z"].values)
    assert posterior.attrs["step_assignment"] == "NUTS: [sticks, theta]"
    table = psm.summary(idata, var_name="z", num_pairs=1)
    assert np.isfinite(table.loc["n_clusters", "mean"])
    raw = posterior["z"].values * 7 + 3  # non-canonical labels are fine too
    figure, axes = comparison.plot_largest_fraction({"built-in": idata, "raw": raw},
                                                    reference=0.5)
    assert axes.shape == (1, 2) and len(axes[0, 0].lines) == 3
    matplotlib.pyplot.close(figure)


# ---------------------------------------------------------------------------------------------
# the benchmark script


def test_benchmark_contenders_run_on_tiny_data():
    bench = load_benchmark()
    problem = bench.make_problem("jn18")
    small = np.r_[0:6, 20:26, 40:46]  # 18 points from three components
    problem.update(data=problem["data"][small], truth=problem["truth"][small],
                   test=problem["test"][:10])
    args = types.SimpleNamespace(chains=1, seed=5, lpd_draws=5, reference_seconds=1.0,
                                 seconds_for=lambda name: 2.0 if "_" in name else 0.8)
    model = bench.package_model(problem)
    reference = bench.reference_run(problem, model, args)
    rows = [bench.run_package(problem, model, name, steps, args, reference)
            for name, steps in bench.package_steps(model).items()]
    assert {"gibbs", "sams+gibbs", "pgsm+gibbs"} <= {row["contender"] for row in rows}
    for name, options in bench.builtin_contenders(problem).items():
        if name != "labels_sb10":  # one explicit-label model is enough here
            options = {**options, "n_components": 4}  # tiny: n * K log densities per draw
            rows.append(bench.run_builtin(problem, name, options, args, reference))
    assigned = {row["contender"]: row.get("assigned") for row in rows}
    assert assigned["labels_sb20"] == "NUTS: [sticks, theta]; CategoricalGibbsMetropolis: [z]"
    assert assigned["marginal_sb20"] == "NUTS: [sticks, theta]"
    for row in rows:
        assert "lpd" in row, row["note"]
        assert np.isfinite(row["lpd"]) and 1 <= row["K"] <= len(problem["data"]), row
    text = bench.markdown_table(rows)
    assert text.count("\n") == len(rows) + 1

    fd = bench.make_problem("jn18_fd10")
    assert set(bench.builtin_contenders(fd)) == {"labels_dir10", "marginal_dir10"}
    assert bench.package_model(fd)["z"].owner.op.name == "finite_dirichlet"

    blobs = bench.make_problem("blobs2k")
    keep = np.r_[0:30]
    blobs.update(data=blobs["data"][keep], truth=blobs["truth"][keep], test=blobs["test"][:20])
    row = bench.run_sklearn(blobs, args, None)
    assert 1 <= row["K"] <= 20 and np.isfinite(row["lpd"])
    model = comparison.builtin_mixture_model(blobs["data"], blobs["family"], 10)
    assert bench.explicit_draw_seconds(model) > 0
