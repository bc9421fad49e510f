"""Public testing utilities: exact partition laws by enumeration and goodness-of-fit tests.

Kernel tests call :func:`exact_posterior` (or :func:`exact_prior`) for a small data set and
:func:`assert_partition_gof` on (independent or thinned) sampled labels.
"""

from pymc_splitmerge.testing.geweke import (
    GEWEKE_TEST_FUNCTIONS,
    GewekeResult,
    assert_geweke,
    batch_means_standard_error,
    geweke_test,
    register_data_simulator,
    sample_prior_partitions,
    simulate_data,
)
from pymc_splitmerge.testing.gof import (
    GOF_PVALUE_THRESHOLD,
    MIN_CELL_VARIANCE,
    N_GOF_TESTS,
    SUITE_FAILURE_RATE,
    PartitionChiSquareResult,
    assert_counts_gof,
    assert_partition_gof,
    chisquare_partitions,
    total_variation,
)
from pymc_splitmerge.testing.oracle import (
    ExactPosterior,
    ExactPosteriorRandomConcentration,
    exact_posterior,
    exact_posterior_random_concentration,
    exact_prior,
)

__all__ = [
    "GEWEKE_TEST_FUNCTIONS",
    "GOF_PVALUE_THRESHOLD",
    "MIN_CELL_VARIANCE",
    "N_GOF_TESTS",
    "SUITE_FAILURE_RATE",
    "ExactPosterior",
    "ExactPosteriorRandomConcentration",
    "GewekeResult",
    "PartitionChiSquareResult",
    "assert_counts_gof",
    "assert_geweke",
    "assert_partition_gof",
    "batch_means_standard_error",
    "chisquare_partitions",
    "exact_posterior",
    "exact_posterior_random_concentration",
    "exact_prior",
    "geweke_test",
    "register_data_simulator",
    "sample_prior_partitions",
    "simulate_data",
    "total_variation",
]
