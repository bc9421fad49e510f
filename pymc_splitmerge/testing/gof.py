r"""Goodness-of-fit of sampled partitions against an exact law, with a suite-wide budget.

Samples (label rows) are canonically relabelled and counted per set partition.  As loom's
``test_posterior_enum`` does (with 1 where this module uses 5), only cells whose count has
variance :math:`N p (1-p) \ge 5` under the exact law are kept; the remaining partitions are lumped into
one "other" cell (kept if it passes the same criterion, otherwise merged into the kept cell of
smallest expected count, so the cells always cover the whole space).  Pearson's :math:`\chi^2`
then has ``n_cells - 1`` degrees of freedom.  A sample on a partition of exact probability zero
makes the test fail outright (statistic ``inf``, p-value 0).

Failure budget: the suite declares at most :data:`N_GOF_TESTS` goodness-of-fit tests and accepts
a false-alarm rate of :data:`SUITE_FAILURE_RATE` for all of them together, so each test rejects
at ``GOF_PVALUE_THRESHOLD = SUITE_FAILURE_RATE / N_GOF_TESTS`` (Bonferroni).  The samples must
be (close to) independent: thin MCMC output or test one-step transitions from exact draws.

References
----------
.. [1] loom, ``loom/test/test_posterior_enum.py`` (cells with n p (1-p) >= 1).
.. [2] numpyro, ``numpyro/contrib/.../gof.py`` (one failure-rate budget for the suite).
.. [3] Cochran, W. G. (1954). Some methods for strengthening the common χ² tests.
   Biometrics 10(4), 417-451 (expected counts of at least 5).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from pymc_splitmerge.core.relabel import partition_index
from pymc_splitmerge.testing.oracle import ExactPosterior

__all__ = [
    "GOF_PVALUE_THRESHOLD",
    "MIN_CELL_VARIANCE",
    "N_GOF_TESTS",
    "SUITE_FAILURE_RATE",
    "PartitionChiSquareResult",
    "assert_counts_gof",
    "assert_partition_gof",
    "chisquare_partitions",
    "total_variation",
]

SUITE_FAILURE_RATE = 1e-3
"""Accepted probability that any goodness-of-fit test of the suite fails by chance."""

N_GOF_TESTS = 400
"""Declared upper bound on the number of goodness-of-fit tests in the suite.

Raised from 200 when ARM (about 28), the SMC samplers (about 52) and the component-posterior,
product-family and default-step checks were added: the suite runs roughly 300 such tests."""

GOF_PVALUE_THRESHOLD = SUITE_FAILURE_RATE / N_GOF_TESTS
"""Per-test rejection threshold on the p-value (2.5e-6)."""

MIN_CELL_VARIANCE = 5.0
"""A partition is its own cell when ``num_samples * p * (1 - p)`` reaches this value.

Cochran's rule of five expected counts a cell.  With cells down to a variance of 1 the χ²
approximation's tail is too light for the per-test threshold: for 3,000 exact draws of a
five-point posterior (``tests/test_cluster_slots.py``'s normal problem, DP) the p-value fell
below 1e-3 and 1e-4 2.5 and 3 times as often as it should; with 5, 1.25 and 1.5 times."""


class PartitionChiSquareResult(NamedTuple):
    """Result of :func:`chisquare_partitions`.

    Attributes
    ----------
    statistic, dof, pvalue
        Pearson statistic, degrees of freedom, p-value.
    num_samples : int
    cell_partitions : list of ndarray or None
        Canonical labels of each cell (``None`` for the lumped "other" cell).
    observed, expected : ndarray of float64, shape (n_cells,)
    impossible_count : int
        Samples on partitions of exact probability zero.
    """

    statistic: float
    dof: int
    pvalue: float
    num_samples: int
    cell_partitions: list
    observed: np.ndarray
    expected: np.ndarray
    impossible_count: int


def _counts(samples_labels, exact: ExactPosterior) -> np.ndarray:
    samples = np.asarray(samples_labels)
    if samples.ndim != 2 or samples.shape[1] != exact.n_points:
        raise ValueError(
            f"samples_labels must have shape (num_samples, {exact.n_points}), got {samples.shape}"
        )
    if samples.shape[0] == 0:
        raise ValueError("samples_labels is empty")
    index = partition_index(samples, exact.n_points)
    return np.bincount(index, minlength=len(exact.prob)).astype(np.float64)


def chisquare_partitions(samples_labels, exact: ExactPosterior,
                         min_cell_variance: float = MIN_CELL_VARIANCE) -> PartitionChiSquareResult:
    """Pearson χ² test of sampled partitions against an exact law.

    Parameters
    ----------
    samples_labels : array of int, shape (num_samples, n)
        Sampled labels (any labelling; canonically relabelled here).
    exact : ExactPosterior
        Exact law, e.g. from :func:`exact_posterior` or :func:`exact_prior`.
    min_cell_variance : float, default 5.0
        Keep a partition as its own cell when ``num_samples p (1-p) >= min_cell_variance``.

    Returns
    -------
    PartitionChiSquareResult
    """
    counts = _counts(samples_labels, exact)
    observed, expected, cells, statistic, dof, pvalue, impossible = _pearson(
        counts, exact.prob, min_cell_variance)
    return PartitionChiSquareResult(
        statistic=statistic,
        dof=dof,
        pvalue=pvalue,
        num_samples=int(counts.sum()),
        cell_partitions=[None if i is None else exact.partitions[i] for i in cells],
        observed=observed,
        expected=expected,
        impossible_count=impossible,
    )


def _pearson(counts, prob, min_cell_variance):
    """Pearson's χ² of ``counts`` against ``prob`` over the cells of the module doc.

    Returns ``(observed, expected, cells, statistic, dof, pvalue, impossible_count)``;
    ``cells`` holds the index of each kept cell's outcome, None for the lumped remainder.
    """
    from scipy import stats  # on first use: scipy.stats costs ~0.5 CPU s to import

    num_samples = int(counts.sum())
    prob = prob / prob.sum()
    impossible = int(counts[prob == 0].sum())
    expected_all = num_samples * prob
    keep = expected_all * (1.0 - prob) >= min_cell_variance
    cells: list = [int(i) for i in np.flatnonzero(keep)]
    observed = list(counts[keep])
    expected = list(expected_all[keep])
    other_expected = num_samples - float(np.sum(expected))
    other_observed = num_samples - float(np.sum(observed))
    other_prob = max(other_expected / num_samples, 0.0)
    if (~keep).any():
        if other_expected * (1.0 - other_prob) >= min_cell_variance or not cells:
            observed.append(other_observed)
            expected.append(other_expected)
            cells.append(None)
        else:  # merge the small remainder into the smallest kept cell
            smallest = int(np.argmin(expected))
            observed[smallest] += other_observed
            expected[smallest] += other_expected
            cells[smallest] = None
    observed_array = np.asarray(observed, dtype=np.float64)
    expected_array = np.asarray(expected, dtype=np.float64)
    dof = len(observed_array) - 1
    if impossible > 0:
        statistic, pvalue = np.inf, 0.0
    elif dof < 1:
        statistic, pvalue = 0.0, 1.0
    else:
        statistic = float(np.sum((observed_array - expected_array) ** 2 / expected_array))
        pvalue = float(stats.chi2.sf(statistic, dof))
    return (observed_array, expected_array, cells, float(statistic), int(max(dof, 0)),
            float(pvalue), impossible)


def assert_counts_gof(counts, prob, threshold: float = GOF_PVALUE_THRESHOLD,
                      min_cell_variance: float = MIN_CELL_VARIANCE) -> float:
    """Assert that counts over any finite set of outcomes follow ``prob`` (the χ² test and
    cells of :func:`assert_partition_gof`, e.g. for joint laws of a partition and a binned
    parameter).

    Parameters
    ----------
    counts : array of float, shape (n_outcomes,)
        Independent (or well thinned) draws counted per outcome.
    prob : array of float, shape (n_outcomes,)
        Exact probabilities (normalised here).

    Returns
    -------
    float
        The p-value, when the test passes.

    Raises
    ------
    AssertionError
        When the p-value is below ``threshold``.
    """
    counts = np.asarray(counts, dtype=np.float64)
    prob = np.asarray(prob, dtype=np.float64)
    if counts.shape != prob.shape or counts.ndim != 1 or counts.sum() <= 0:
        raise ValueError(f"counts and prob must be 1-d of one shape with draws; got "
                         f"{counts.shape} and {prob.shape}")
    observed, expected, _, statistic, dof, pvalue, impossible = _pearson(
        counts, prob, min_cell_variance)
    if pvalue < threshold:
        worst = np.argsort(-np.abs(observed - expected) / np.sqrt(expected))[:10]
        raise AssertionError(
            f"goodness-of-fit failed: chi2 = {statistic:.2f}, dof = {dof}, p = {pvalue:.3g} < "
            f"threshold {threshold:.3g} ({int(counts.sum())} draws, {impossible} on impossible "
            f"outcomes); worst cells (observed, expected): "
            + ", ".join(f"({observed[i]:.0f}, {expected[i]:.1f})" for i in worst))
    return pvalue


def total_variation(samples_labels, exact: ExactPosterior) -> float:
    """Total-variation distance between the empirical law of the samples and ``exact``.

    Parameters
    ----------
    samples_labels : array of int, shape (num_samples, n)
    exact : ExactPosterior

    Returns
    -------
    float
        ``0.5 * sum |frequency - probability|`` over all partitions.
    """
    counts = _counts(samples_labels, exact)
    prob = exact.prob / exact.prob.sum()
    return float(0.5 * np.abs(counts / counts.sum() - prob).sum())


def _format_table(result: PartitionChiSquareResult, num_rows: int) -> str:
    residual = (result.observed - result.expected) / np.sqrt(np.maximum(result.expected, 1e-300))
    order = np.argsort(-np.abs(residual))[:num_rows]
    header = f"{'partition (canonical labels)':<32}{'observed':>10}{'expected':>12}"
    lines = [header + f"{'residual':>10}"]
    for i in order:
        cell = result.cell_partitions[i]
        name = "other (lumped)" if cell is None else " ".join(str(v) for v in cell)
        lines.append(
            f"{name:<32}{result.observed[i]:>10.0f}{result.expected[i]:>12.1f}{residual[i]:>10.2f}"
        )
    return "\n".join(lines)


def assert_partition_gof(samples_labels, exact: ExactPosterior,
                         threshold: float = GOF_PVALUE_THRESHOLD, num_rows: int = 10,
                         min_cell_variance: float = MIN_CELL_VARIANCE) -> PartitionChiSquareResult:
    """Assert that sampled partitions follow ``exact`` (χ² test with the suite budget).

    Parameters
    ----------
    samples_labels : array of int, shape (num_samples, n)
        Independent (or well thinned) sampled labels.
    exact : ExactPosterior
        Exact target law.
    threshold : float, default GOF_PVALUE_THRESHOLD
        Reject when the p-value is below this.
    num_rows : int, default 10
        Number of worst cells shown in the failure message.

    Returns
    -------
    PartitionChiSquareResult
        When the test passes.

    Raises
    ------
    AssertionError
        With a table of the cells with the largest standardised residuals.
    """
    result = chisquare_partitions(samples_labels, exact, min_cell_variance=min_cell_variance)
    if result.pvalue < threshold:
        message = (
            f"partition goodness-of-fit failed: chi2 = {result.statistic:.2f}, dof = {result.dof}, "
            f"p = {result.pvalue:.3g} < threshold {threshold:.3g} "
            f"({result.num_samples} samples, {result.impossible_count} on impossible partitions, "
            f"total variation = {total_variation(samples_labels, exact):.4f})\n"
            + _format_table(result, num_rows)
        )
        raise AssertionError(message)
    return result
