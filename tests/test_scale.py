"""Traces that fit: compact label dtype, PyMC's on-disk ZarrTrace, and the dense
similarity matrix refusing above its documented size.

* ``label_dtype`` is the smallest signed integer dtype holding ``n`` (and ``k`` for the finite
  Dirichlet prior); prior draws, the initial point and the sampled trace keep it; the analysis
  functions give the same answers on compact labels as on int64 copies (negative control: a
  label dtype too small to hold ``n`` would wrap labels, and the same comparison catches it).
* ``pm.sample(trace=ZarrTrace(...))`` with this package's steps writes the same draws as the
  in-memory trace (same seed), in the compact dtype, and :func:`zarr_posterior` /
  :func:`iter_zarr_draws` read them back for the analysis functions (skipped without zarr 2).
* ``posterior_similarity_matrix`` raises ``MemoryError`` naming the streaming alternatives
  above ``max_bytes``, before reading any draw.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest

import pymc_splitmerge as psm
import pymc_splitmerge.analysis as psa
from pymc_splitmerge.analysis import _arviz_compat as compat
from pymc_splitmerge.distributions.priors import label_dtype

FAST = "FAST_COMPILE"


def _data(n, seed=0):
    rng = np.random.default_rng(seed)
    half = n // 2
    return np.concatenate([rng.normal(-3.0, 1.0, (half, 2)), rng.normal(3.0, 1.0, (n - half, 2))])


def _model(y, prior="dp"):
    with pm.Model() as model:
        alpha = pm.Gamma("alpha", 2.0, 2.0)
        if prior == "dp":
            z = psm.DirichletProcess("z", alpha=alpha, n=len(y))
        else:
            z = psm.FiniteDirichlet("z", alpha=alpha, k=300, n=len(y))
        psm.ConjugateMixture("y", partition=z, component=psm.NormalInverseWishart(
            mu0=np.zeros(2), kappa0=1.0, nu0=4.0, psi0=np.eye(2)), observed=y)
    return model


def _steps(model):
    z, alpha = model["z"], model["alpha"]
    return [psm.SAMSStep(z, model=model), psm.CollapsedGibbsStep(z, model=model),
            psm.ConcentrationGibbs(alpha, model=model)]


# ------------------------------------------------------------------ compact label dtype
@pytest.mark.parametrize("n, expected", [(1, "int8"), (127, "int8"), (128, "int16"),
                                         (32767, "int16"), (32768, "int32"),
                                         (2**31 - 1, "int32"), (2**31, "int64")])
def test_label_dtype_is_smallest_signed_type_holding_n(n, expected):
    assert label_dtype(n) == expected
    assert np.iinfo(expected).max >= n


def test_label_dtype_keeps_every_partition_and_a_smaller_one_does_not():
    singletons = np.arange(300)  # the partition with the most clusters of n = 300
    kept = singletons.astype(label_dtype(300))
    np.testing.assert_array_equal(psa.canonicalize(kept), singletons)
    # negative control: one byte wraps label 256 onto 0 and merges clusters
    wrapped = singletons.astype(np.uint8)
    assert not np.array_equal(psa.canonicalize(wrapped), singletons)


def test_prior_value_dtype_draws_and_initial_point():
    y = _data(200)
    for prior, expected in (("dp", "int16"), ("finite", "int16")):
        model = _model(y, prior)
        assert model["z"].dtype == expected
        assert model.initial_point()["z"].dtype == np.dtype(expected)
        draws = pm.draw(model["z"], draws=3, random_seed=1, mode=FAST)
        assert draws.dtype == np.dtype(expected)
    with pm.Model():
        # labels of a finite Dirichlet prior lie in [0, k): k = 300 > 127 needs int16
        z = psm.FiniteDirichlet("z", alpha=1.0, k=300, n=10)
        assert z.dtype == "int16"
        assert psm.DirichletProcess("w", alpha=1.0, n=10).dtype == "int8"


def test_sampled_trace_keeps_compact_dtype_and_analysis_matches_int64():
    y = _data(60)
    model = _model(y)
    with model:
        idata = pm.sample(draws=40, tune=10, chains=2, cores=1, step=_steps(model),
                          random_seed=3, progressbar=False, compute_convergence_checks=False)
    labels = compat.get_group(idata, "labels")["z"]
    assert labels.dtype == np.int8
    wide = labels.values.astype(np.int64)
    compact_result = psa.partition_quantities(labels.values, rng=0)
    wide_result = psa.partition_quantities(wide, rng=0)
    for key in compact_result.data_vars:
        np.testing.assert_array_equal(compact_result[key].values, wide_result[key].values)
    estimate = psa.point_estimate(idata, rng=0)
    np.testing.assert_array_equal(estimate.labels, psa.point_estimate(wide, rng=0).labels)
    ball = psa.credible_ball(idata, center=estimate)
    np.testing.assert_allclose(ball.distances, psa.credible_ball(wide, center=estimate).distances)
    density = psa.heldout_log_predictive_density(idata, model, _data(10, seed=9))
    assert density.shape == (10,) and np.all(np.isfinite(density))


# ------------------------------------------------------------------ dense similarity refusal
def test_similarity_matrix_refuses_above_max_bytes_and_names_alternatives():
    draws = np.zeros((1, 2, 30_000), dtype=np.int16)  # 30,000^2 float32 = 3.4 GiB
    with pytest.raises(MemoryError, match="iter_similarity_blocks") as info:
        psa.posterior_similarity_matrix(draws)
    for name in ("point_estimate", "least_squares_draw", "credible_ball", "max_bytes=None"):
        assert name in str(info.value)
    small = np.array([[0, 0, 1], [0, 1, 1]])
    assert psa.posterior_similarity_matrix(small, max_bytes=36).shape == (3, 3)  # 3*3*4 bytes
    with pytest.raises(MemoryError):
        psa.posterior_similarity_matrix(small, max_bytes=35)
    with pytest.raises(MemoryError):
        psa.posterior_similarity_matrix(small, dtype=np.float64, max_bytes=71)
    with pytest.raises(ValueError, match="max_bytes"):
        psa.posterior_similarity_matrix(small, max_bytes=0)


# ------------------------------------------------------------------ ZarrTrace
# ZarrTrace's InferenceData conversion fails upstream (docs/user_guide.md), so the trace is
# returned as is; PyMC 6 deprecates that flag.
@pytest.mark.filterwarnings("ignore:`return_inferencedata=False` is deprecated:FutureWarning")
def test_zarr_trace_matches_memory_trace_and_feeds_analysis(tmp_path, zarr_trace):
    zarr, ZarrTrace = zarr_trace
    y = _data(150)
    model = _model(y)
    kwargs = {"draws": 24, "tune": 6, "chains": 2, "cores": 1, "random_seed": 5,
              "progressbar": False, "compute_convergence_checks": False}
    with model:
        memory = pm.sample(step=_steps(model), **kwargs)
        store = zarr.DirectoryStore(str(tmp_path / "trace.zarr"))
        trace = pm.sample(step=_steps(model), trace=ZarrTrace(store=store, draws_per_chunk=5),
                          return_inferencedata=False, **kwargs)
    expected = compat.posterior_with_labels(memory)
    on_disk = trace.posterior["z"]
    assert on_disk.dtype == np.int16 and on_disk.chunks == (1, 5, 150)
    posterior = psa.zarr_posterior(trace)
    assert posterior["z"].dtype == np.int16 and posterior["z"].dims[:2] == ("chain", "draw")
    np.testing.assert_array_equal(posterior["z"].values, expected["z"].values)
    np.testing.assert_allclose(posterior["alpha"].values, expected["alpha"].values)
    # reopened from the directory alone, thinned: only every third draw
    thinned = psa.zarr_posterior(str(tmp_path / "trace.zarr"), "z", draws=slice(None, None, 3))
    np.testing.assert_array_equal(thinned["z"].values, expected["z"].values[:, ::3])
    np.testing.assert_array_equal(thinned["draw"].values, np.arange(24)[::3])
    blocks = list(psa.iter_zarr_draws(trace, "z"))
    assert len(blocks) == 2 * 5 and all(b.shape[0] <= 5 for _, _, b in blocks)
    rebuilt = np.stack([np.concatenate([b for c, _, b in blocks if c == chain])
                        for chain in range(2)])
    np.testing.assert_array_equal(rebuilt, expected["z"].values)
    stats = psa.zarr_posterior(trace, group="sample_stats")
    assert stats.sizes["draw"] == 24
    # every analysis function takes the dataset and agrees with the in-memory trace
    estimate = psa.point_estimate(posterior, rng=0)
    np.testing.assert_array_equal(estimate.labels, psa.point_estimate(memory, rng=0).labels)
    summary = psa.summary(posterior, rng=0)
    np.testing.assert_allclose(summary["mean"].values, psa.summary(memory, rng=0)["mean"].values)
    ball = psa.credible_ball(posterior, center=estimate)
    assert 0 <= ball.radius and ball.distances.shape == (2, 24)
    density = psa.heldout_log_predictive_density(posterior, model, _data(8, seed=4))
    np.testing.assert_allclose(
        density, psa.heldout_log_predictive_density(memory, model, _data(8, seed=4)))
    with pytest.raises(ValueError, match="no variables"):
        psa.zarr_posterior(trace, "nope")


def test_most_uncertain_pairs_searches_a_subset_of_observations_at_large_n():
    rng = np.random.default_rng(2)
    draws = rng.integers(0, 3, size=(2, 15, 60))
    similarity = psa.posterior_similarity_matrix(draws)
    pairs, probabilities = psa.most_uncertain_pairs(draws, 3, max_observations=12)
    subset = np.unique(np.linspace(0, 59, 12).astype(np.int64))
    assert np.all(np.isin(pairs, subset)) and np.all(pairs[:, 0] < pairs[:, 1])
    np.testing.assert_allclose(probabilities, similarity[pairs[:, 0], pairs[:, 1]], rtol=1e-6)
    # the subset's best pairs are the best pairs of the subset's own similarity matrix
    best = np.abs(similarity[np.ix_(subset, subset)] - 0.5)[np.triu_indices(subset.size, 1)]
    assert np.abs(probabilities[0] - 0.5) == pytest.approx(best.min(), abs=1e-6)
    full_pairs, _ = psa.most_uncertain_pairs(draws, 3, max_observations=None)
    assert not np.all(np.isin(full_pairs, subset))  # the full search looks at every point
