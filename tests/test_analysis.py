"""Tests of pymc_splitmerge.analysis: every fast routine against a slow naive one, metrics
against scikit-learn, diagnostics against ArviZ, point estimates against brute force."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import arviz as az
import numpy as np
import pytest
import xarray as xr

from pymc_splitmerge import analysis as psa
from pymc_splitmerge.analysis import _arviz_compat as compat
from pymc_splitmerge.analysis.similarity import reference_posterior_similarity_matrix
from pymc_splitmerge.core.relabel import canonical_labels_reference, is_canonical

sklearn_metrics = pytest.importorskip("sklearn.metrics")


# ---------------------------------------------------------------------------------------------
# helpers


def local_set_partitions(n: int) -> np.ndarray:
    """All set partitions of n points as canonical label rows (restricted growth strings)."""
    rows = []

    def grow(prefix, largest):
        if len(prefix) == n:
            rows.append(list(prefix))
            return
        for label in range(largest + 2):
            grow(prefix + [label], max(largest, label))

    grow([0], 0)
    return np.array(rows, dtype=np.int64)


def noisy_draws(rng, truth, shape, flip=0.2, n_labels=None):
    n_labels = n_labels or int(truth.max()) + 2
    draws = np.broadcast_to(truth, (*shape, truth.size)).copy()
    mask = rng.random(draws.shape) < flip
    draws[mask] = rng.integers(0, n_labels, mask.sum())
    return psa.canonicalize(draws)


def pair_indicator(labels):
    return labels[:, None] == labels[None, :]


def naive_binder(a, b, cost_together=1.0, cost_apart=1.0):
    """Binder loss summed over pairs i < j; a = 'truth' (draw), b = estimate."""
    together_a = pair_indicator(a)
    together_b = pair_indicator(b)
    upper = np.triu(np.ones(together_a.shape, dtype=bool), 1)
    return float(
        cost_together * np.sum(together_a & ~together_b & upper)
        + cost_apart * np.sum(~together_a & together_b & upper)
    )


def naive_vi(a, b):
    mutual = sklearn_metrics.mutual_info_score(a, b)

    def entropy(x):
        p = np.bincount(x) / x.size
        p = p[p > 0]
        return -np.sum(p * np.log(p))

    return (entropy(a) + entropy(b) - 2 * mutual) / np.log(2)


def make_trace(values: dict):
    """An InferenceData (ArviZ 0.x) or DataTree (ArviZ 1.x) holding ``values`` as posterior."""
    if compat.ARVIZ_MAJOR >= 1:
        return az.from_dict({"posterior": values})
    return az.from_dict(posterior=values)


@pytest.fixture(scope="module")
def rng():
    return np.random.default_rng(20250101)


# ---------------------------------------------------------------------------------------------
# labels


def test_canonicalize_matches_reference(rng):
    labels = rng.integers(0, 7, size=(40, 15)) * 3
    np.testing.assert_array_equal(psa.canonicalize(labels), canonical_labels_reference(labels))
    assert is_canonical(psa.canonicalize(labels))
    assert not is_canonical(np.array([1, 0, 0]))


def test_find_partition_variable_and_errors(rng):
    z = noisy_draws(rng, np.repeat([0, 1, 2], 4), (2, 10))
    trace = make_trace({"z": z, "alpha": rng.random((2, 10)),
                        "counts": rng.integers(3, 9, size=(2, 10, 12))})
    assert psa.find_partition_variable(compat.get_group(trace)) == "z"
    labels, name = psa.partition_draws(trace)
    assert name == "z"
    np.testing.assert_array_equal(labels, z)

    with pytest.raises(ValueError, match="found no partition variable"):
        psa.partition_quantities(make_trace({"alpha": rng.random((2, 10))}))
    with pytest.raises(ValueError, match="several variables look like partitions"):
        psa.partition_quantities(make_trace({"z": z, "w": z.copy()}))
    with pytest.raises(ValueError, match="no variable 'nope'"):
        psa.partition_quantities(trace, "nope")
    with pytest.raises(ValueError, match="ragged"):
        psa.posterior_similarity_matrix([[0, 1, 1], [0, 0]])
    with pytest.raises(TypeError, match="integer cluster labels"):
        psa.posterior_similarity_matrix(np.array([[0.0, 0.5]]))
    with pytest.raises(ValueError, match="negative labels"):
        psa.posterior_similarity_matrix(np.array([[0, -1]]))
    with pytest.raises(ValueError, match="different numbers of observations"):
        psa.adjusted_rand_index([0, 1, 1], [0, 1])
    with pytest.raises(ValueError, match="truth labels 3 observations"):
        psa.agreement_with_truth(z, [0, 1, 1])
    with pytest.raises(ValueError, match=r"log_joint has shape \(3,\)"):
        psa.partition_quantities(z, log_joint=np.zeros(3))
    with pytest.raises(ValueError, match="pairs index observations"):
        psa.partition_quantities(z, pairs=[[0, 99]])
    with pytest.raises(TypeError, match="add_partition_quantities needs"):
        psa.add_partition_quantities(z)


# ---------------------------------------------------------------------------------------------
# similarity


@pytest.mark.parametrize("block_size", [None, 1, 7])
def test_similarity_matrix_equals_naive(rng, block_size):
    truth = np.repeat([0, 1, 2, 3], [9, 5, 3, 2])
    draws = noisy_draws(rng, truth, (3, 40), flip=0.3)
    # a few draws with one dominant cluster exercise the complement branch
    draws[0, :5] = 0
    draws = psa.canonicalize(draws)
    expected = reference_posterior_similarity_matrix(draws)
    got = psa.posterior_similarity_matrix(draws, block_size=block_size, dtype=np.float64)
    np.testing.assert_allclose(got, expected, atol=1e-12)
    got32 = psa.posterior_similarity_matrix(draws, block_size=block_size)
    assert got32.dtype == np.float32
    np.testing.assert_allclose(got32, expected, atol=1e-6)
    stacked = np.concatenate(
        [block for _, _, block in psa.iter_similarity_blocks(draws, block_size=block_size or 5)]
    )
    np.testing.assert_allclose(stacked, expected, atol=1e-6)


def test_most_uncertain_pairs_against_naive(rng):
    draws = noisy_draws(rng, np.repeat([0, 1], 6), (2, 50), flip=0.35)
    matrix = reference_posterior_similarity_matrix(draws)
    pairs, probabilities = psa.most_uncertain_pairs(draws, 3, block_size=4)
    np.testing.assert_allclose(probabilities, matrix[pairs[:, 0], pairs[:, 1]], atol=1e-6)
    assert len(set(pairs.ravel())) == 6  # disjoint pairs
    upper = np.triu_indices(12, 1)
    best = np.min(np.abs(matrix[upper] - 0.5))
    assert np.isclose(np.abs(probabilities[0] - 0.5), best, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# metrics


def test_metrics_match_scikit_learn(rng):
    for _ in range(20):
        n = int(rng.integers(2, 30))
        a = rng.integers(0, rng.integers(1, 6), n)
        b = rng.integers(0, rng.integers(1, 6), n)
        assert np.isclose(psa.adjusted_rand_index(a, b), sklearn_metrics.adjusted_rand_score(a, b))
        assert np.isclose(psa.rand_index(a, b), sklearn_metrics.rand_score(a, b))
        scores = psa.v_measure(a, b)
        expected = sklearn_metrics.homogeneity_completeness_v_measure(a, b)
        np.testing.assert_allclose(
            [scores["homogeneity"], scores["completeness"], scores["v_measure"]], expected,
            atol=1e-10,
        )
        assert np.isclose(psa.variation_of_information(a, b), naive_vi(a, b), atol=1e-10)
        assert np.isclose(psa.binder_distance(a, b), naive_binder(a, b))


def test_distances_and_agreement_against_per_draw_metrics(rng):
    truth = np.repeat([0, 1, 2], [6, 4, 3])
    draws = noisy_draws(rng, truth, (2, 15))
    reference = rng.integers(0, 3, truth.size)
    distances = psa.distances_to_reference(draws, reference)
    flat = draws.reshape(-1, truth.size)
    np.testing.assert_allclose(
        distances["variation_of_information"].ravel(), [naive_vi(d, reference) for d in flat],
        atol=1e-10,
    )
    np.testing.assert_allclose(
        distances["binder_distance"].ravel(), [naive_binder(d, reference) for d in flat]
    )
    agreement = psa.agreement_with_truth(draws, truth)
    np.testing.assert_allclose(
        agreement["adjusted_rand_index"].ravel(),
        [sklearn_metrics.adjusted_rand_score(truth, d) for d in flat],
    )
    single = psa.agreement_with_truth(flat[0], truth)
    assert np.isclose(single["v_measure"], sklearn_metrics.v_measure_score(truth, flat[0]))


# ---------------------------------------------------------------------------------------------
# point estimates


def brute_force_losses(draws, loss, costs=(1.0, 1.0)):
    flat = draws.reshape(-1, draws.shape[-1])
    candidates = local_set_partitions(flat.shape[1])
    if loss == "vi":  # variation_of_information is checked against scikit-learn above
        values = [np.mean([psa.variation_of_information(d, c) for d in flat]) for c in candidates]
    else:
        values = [np.mean([naive_binder(d, c, *costs) for d in flat]) for c in candidates]
    return candidates, np.array(values)


@pytest.mark.parametrize(
    ("loss", "costs", "seed"),
    [("vi", (1.0, 1.0), 1), ("vi", (1.0, 1.0), 2), ("binder", (1.0, 1.0), 3),
     ("binder", (1.0, 3.0), 4), ("binder", (2.0, 1.0), 5)],
)
def test_point_estimate_is_exact_minimiser(loss, costs, seed):
    rng = np.random.default_rng(seed)
    n = 6
    truth = rng.integers(0, 3, n)
    draws = noisy_draws(rng, truth, (2, 12), flip=0.4, n_labels=4)
    candidates, values = brute_force_losses(draws, loss, costs)
    estimate = psa.point_estimate(draws, loss=loss, binder_costs=costs, num_runs=4, rng=seed)
    assert np.isclose(estimate.expected_loss, values.min(), atol=1e-9)
    index = np.flatnonzero(np.all(candidates == estimate.labels, axis=1))[0]
    assert np.isclose(values[index], estimate.expected_loss, atol=1e-9)
    assert np.isclose(
        psa.expected_loss(draws, estimate.labels, loss, binder_costs=costs), values[index]
    )


def test_least_squares_draw_against_naive(rng):
    draws = noisy_draws(rng, np.repeat([0, 1, 2], [5, 4, 3]), (2, 20), flip=0.3)
    flat = draws.reshape(-1, 12)
    matrix = reference_posterior_similarity_matrix(draws)
    criterion = [np.sum((pair_indicator(d) - matrix) ** 2) for d in flat]
    estimate = psa.least_squares_draw(draws, max_candidates=None)
    assert np.isclose(np.sum((pair_indicator(estimate.labels) - matrix) ** 2), min(criterion))
    assert np.isclose(
        estimate.expected_loss, np.mean([naive_binder(d, estimate.labels) for d in flat])
    )
    thinned = psa.least_squares_draw(draws, max_candidates=5)
    candidates = flat[np.linspace(0, 39, 5).round().astype(int)]
    assert any(np.array_equal(thinned.labels, c) for c in candidates)
    assert thinned.expected_loss >= estimate.expected_loss - 1e-12


def test_vi_lower_bound(rng):
    draws = noisy_draws(rng, np.repeat([0, 1], 5), (1, 30), flip=0.3)
    candidate = np.repeat([0, 1], 5)
    matrix = reference_posterior_similarity_matrix(draws)
    same = pair_indicator(candidate)
    naive = np.mean(
        np.log2(same.sum(1)) + np.log2(matrix.sum(1)) - 2 * np.log2((same * matrix).sum(1))
    )
    bound = psa.expected_loss(draws, candidate, "vi_lower_bound")
    assert np.isclose(bound, naive)
    assert np.isclose(
        psa.expected_loss(draws, candidate, "vi_lower_bound", similarity_matrix=matrix), naive
    )
    assert bound <= psa.expected_loss(draws, candidate, "vi") + 1e-12


def test_credible_ball(rng):
    draws = noisy_draws(rng, np.repeat([0, 1, 2], 4), (2, 50), flip=0.2)
    center = psa.point_estimate(draws, rng=0)
    ball = psa.credible_ball(draws, center, alpha=0.1)
    flat = draws.reshape(-1, 12)
    distances = np.array([naive_vi(d, center.labels) for d in flat])
    np.testing.assert_allclose(ball.distances.ravel(), distances, atol=1e-10)
    # smallest radius holding >= 90 % of the draws
    inside = distances <= ball.radius + 1e-9
    assert inside.mean() >= 0.9
    assert np.mean(distances < ball.radius - 1e-9) < 0.9
    for bound in ball.horizontal_bound:
        assert np.isclose(naive_vi(bound, center.labels), distances[inside].max())
    k_inside = flat[inside].max(1) + 1
    assert all(b.max() + 1 == k_inside.min() for b in ball.vertical_upper_bound)
    assert all(b.max() + 1 == k_inside.max() for b in ball.vertical_lower_bound)
    # the bounds are the distinct rows in np.unique's order
    max_distance = distances[inside].max()
    expected = np.unique(flat[inside & (distances >= max_distance - 1e-12)], axis=0)
    np.testing.assert_array_equal(ball.horizontal_bound, expected)


def test_distinct_rows_is_numpy_unique(rng):
    from pymc_splitmerge.analysis.point_estimate import _distinct_rows

    for _ in range(200):
        rows = rng.integers(0, 3, size=(rng.integers(0, 12), rng.integers(1, 6)))
        rows = rows.astype(rng.choice([np.int8, np.int32, np.int64]))
        got, expected = _distinct_rows(rows), np.unique(rows, axis=0)
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)


# ---------------------------------------------------------------------------------------------
# quantities, ArviZ glue, summary


def test_partition_quantities_and_arviz_agreement(rng):
    truth = np.repeat([0, 1, 2], [7, 5, 3])
    z = noisy_draws(rng, truth, (3, 80), flip=0.15)
    log_joint = rng.normal(size=(3, 80))
    trace = make_trace({"z": z, "alpha": rng.random((3, 80))})
    pairs = np.array([[0, 1], [0, 14]])
    quantities = psa.partition_quantities(trace, pairs=pairs, log_joint=log_joint,
                                          reference=truth)
    np.testing.assert_array_equal(quantities["n_clusters"].values, z.max(-1) + 1)
    sizes = np.sort(np.apply_along_axis(np.bincount, -1, z, minlength=16), axis=-1)[..., ::-1]
    np.testing.assert_allclose(
        quantities["fraction_in_largest_clusters"].values, np.cumsum(sizes[..., :3], -1) / 15
    )
    np.testing.assert_array_equal(
        quantities["co_clustering"].values[..., 1], z[..., 0] == z[..., 14]
    )

    psa.add_partition_quantities(trace, pairs=pairs, log_joint=log_joint, reference=truth)
    group = compat.get_group(trace, psa.DIAGNOSTICS_GROUP)
    xr.testing.assert_allclose(group["n_clusters"], quantities["n_clusters"])
    # ArviZ works directly on the new group
    rhat = az.rhat(group)
    ess_bulk = az.ess(group, method="bulk")
    table = psa.summary(trace, pairs=pairs, log_joint=log_joint, reference=truth)
    assert np.isclose(table.loc["n_clusters", "r_hat"], float(rhat["n_clusters"]))
    assert np.isclose(table.loc["log_joint", "ess_bulk"], float(ess_bulk["log_joint"]))
    assert np.isclose(
        table.loc["fraction_in_largest_clusters[2]", "r_hat"],
        float(rhat["fraction_in_largest_clusters"].sel(largest=2)),
    )
    ess_tail = az.ess(group["log_joint"].values, method="tail", prob=(0.05, 0.95)) \
        if compat.ARVIZ_MAJOR >= 1 else az.ess(group["log_joint"].values, method="tail")
    assert np.isclose(table.loc["log_joint", "ess_tail"], float(ess_tail))
    ess_mean = float(az.ess(group, method="mean")["log_joint"])
    assert np.isclose(table.loc["log_joint", "iat"], 240 / ess_mean)
    if compat.ARVIZ_MAJOR >= 1:
        hdi = az.hdi(group["log_joint"], prob=0.94).values
    else:
        hdi = az.hdi(group["log_joint"].values.ravel(), hdi_prob=0.94)
    np.testing.assert_allclose(table.loc["log_joint", ["hdi_3%", "hdi_97%"]].values, hdi)
    assert np.isclose(table.loc["log_joint", "mean"], log_joint.mean())
    assert "distance_to_reference_vi" in table.index
    assert "co_clustering[0,14]" in table.index

    # overwriting keeps one group
    psa.add_partition_quantities(trace, pairs=pairs)
    assert compat.group_names(trace).count(psa.DIAGNOSTICS_GROUP) == 1
    assert "log_joint" not in compat.get_group(trace, psa.DIAGNOSTICS_GROUP)


def test_summary_defaults_and_distance_diagnostics(rng):
    z = noisy_draws(rng, np.repeat([0, 1, 2], 6), (2, 60), flip=0.25)
    table = psa.summary(z, rng=1)
    assert {"n_clusters", "distance_to_reference_vi", "distance_to_reference_binder"} <= set(
        table.index
    )
    assert sum(name.startswith("co_clustering") for name in table.index) == 3
    diagnostics = psa.distance_diagnostics(z, reference=np.repeat([0, 1, 2], 6))
    distances = psa.distances_to_reference(z, np.repeat([0, 1, 2], 6))
    assert np.isclose(
        diagnostics.loc["distance_to_reference_binder", "r_hat"],
        compat.rhat(distances["binder_distance"]),
    )
    # log joint from a callable
    quantities = psa.partition_quantities(z, log_joint=lambda labels: float(labels.max()))
    np.testing.assert_allclose(quantities["log_joint"].values, z.max(-1))


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_stuck_chains_are_flagged(rng):
    truth = np.repeat([0, 1], 10)
    good = noisy_draws(rng, truth, (1, 200), flip=0.1)
    stuck = noisy_draws(rng, np.zeros(20, dtype=np.int64), (1, 200), flip=0.1)
    table = psa.summary(np.concatenate([good, stuck]), reference=truth, num_pairs=1)
    assert table.loc["n_clusters", "r_hat"] > 1.1
    assert table.loc["distance_to_reference_vi", "r_hat"] > 1.1


# ---------------------------------------------------------------------------------------------
# plots


def test_plots(rng):
    import matplotlib.pyplot as plt

    z = noisy_draws(rng, np.repeat([0, 1, 2], 5), (2, 30), flip=0.2)
    figure, axes = psa.plot_block_fractions(z, num_largest=2)
    assert len(axes) == 2 and len(axes[0].lines) == 2
    figure2, ax = psa.plot_n_clusters(z)
    assert len(ax.patches) > 0
    figure3, ax3 = psa.plot_similarity_matrix(z, order_by=np.repeat([0, 1, 2], 5))
    assert ax3.images[0].get_array().shape == (15, 15)
    for f in (figure, figure2, figure3):
        plt.close(f)
