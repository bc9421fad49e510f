"""Monte Carlo check of expectations against exact values, within the suite's failure budget."""

from __future__ import annotations

import numpy as np
from scipy import stats

from pymc_splitmerge.testing.gof import GOF_PVALUE_THRESHOLD


def assert_expectations(samples, exact, label: str = "") -> None:
    """Assert ``E[samples[:, k]] = exact[k]`` for every column (z-tests, CLT standard errors).

    Parameters
    ----------
    samples : array of shape (num_samples, k) (or (num_samples,))
        Independent draws of k statistics (e.g. a parameter and its squared deviation from the
        exact mean, whose expectation is the exact variance).
    exact : array of shape (k,)
    label : str
        Shown in the failure message.

    The k tests share the per-test threshold ``GOF_PVALUE_THRESHOLD`` (Bonferroni).
    """
    samples = np.asarray(samples, dtype=np.float64)
    samples = samples.reshape(samples.shape[0], -1)
    exact = np.asarray(exact, dtype=np.float64).reshape(-1)
    assert samples.shape[1] == exact.shape[0]
    mean = samples.mean(axis=0)
    error = samples.std(axis=0, ddof=1) / np.sqrt(samples.shape[0])
    z = (mean - exact) / error
    pvalues = 2.0 * stats.norm.sf(np.abs(z))
    threshold = GOF_PVALUE_THRESHOLD / exact.shape[0]
    if np.any(pvalues < threshold):
        raise AssertionError(
            f"{label}: Monte Carlo means {mean} differ from the exact expectations {exact} "
            f"(z = {z}, p = {pvalues}, threshold {threshold:.2g})")
