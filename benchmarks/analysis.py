"""Benchmark of the partition-analysis layer.

n = 5,000 observations, 2,000 synthetic draws (2 chains x 1,000): noisy perturbations of a
10-cluster truth (each label resampled with probability 0.1 among 12 labels).  Prints the wall
time and the peak memory (tracemalloc: Python/numpy allocations) of the posterior similarity
matrix (float32), the SALSO point estimate (VI and Binder), Dahl's least-squares draw and the
summary table, plus the process maximum resident set size.

Run: python benchmarks/analysis.py [--n 5000] [--draws 2000] [--runs 4]
"""

from __future__ import annotations

import argparse
import resource
import time
import tracemalloc

import numpy as np

from pymc_splitmerge import analysis as psa


def synthetic_draws(n: int, n_draws: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    truth = rng.integers(0, 10, n)
    draws = np.tile(truth, (n_draws, 1))
    mask = rng.random(draws.shape) < 0.1
    draws[mask] = rng.integers(0, 12, mask.sum())
    return psa.canonicalize(draws.reshape(2, n_draws // 2, n)), truth


def measure(label: str, function):
    tracemalloc.start()
    start = time.perf_counter()
    result = function()
    elapsed = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"{label:<42s} {elapsed:8.2f} s   peak {peak / 2**20:8.1f} MiB")
    return result, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=4, help="SALSO runs")
    arguments = parser.parse_args()
    rng = np.random.default_rng(0)
    draws, truth = synthetic_draws(arguments.n, arguments.draws, rng)

    # compile the numba kernels on a tiny problem first (cached on disk afterwards)
    small = draws[:, :5, :50]
    psa.posterior_similarity_matrix(small)
    psa.point_estimate(small, num_runs=1)
    psa.least_squares_draw(small)

    print(f"n = {arguments.n}, draws = {arguments.draws}")
    _, t_similarity = measure(
        "posterior similarity matrix (float32)", lambda: psa.posterior_similarity_matrix(draws)
    )
    estimate, t_estimate = measure(
        f"point estimate, VI (SALSO, {arguments.runs} runs)",
        lambda: psa.point_estimate(draws, loss="vi", num_runs=arguments.runs, rng=1),
    )
    print(f"    -> {estimate.n_clusters} clusters, expected VI {estimate.expected_loss:.4f}, "
          f"ARI vs truth {psa.adjusted_rand_index(truth, estimate.labels):.4f}")
    binder, _ = measure(
        f"point estimate, Binder (SALSO, {arguments.runs} runs)",
        lambda: psa.point_estimate(draws, loss="binder", num_runs=arguments.runs, rng=1),
    )
    print(f"    -> {binder.n_clusters} clusters, expected Binder {binder.expected_loss:.1f}")
    least_squares, _ = measure("least-squares draw (Dahl)", lambda: psa.least_squares_draw(draws))
    print(f"    -> {least_squares.n_clusters} clusters, expected Binder "
          f"{least_squares.expected_loss:.1f}")
    measure("summary (3 uncertain pairs, distance to estimate)",
            lambda: psa.summary(draws, reference=estimate))
    print(f"similarity matrix + VI point estimate: {t_similarity + t_estimate:.2f} s")
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"process max resident set size: {maxrss:.0f} MiB")


if __name__ == "__main__":
    main()
