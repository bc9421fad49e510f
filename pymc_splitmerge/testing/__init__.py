"""Public testing utilities: exact partition laws by enumeration and goodness-of-fit tests.

Kernel tests call :func:`exact_posterior` (or :func:`exact_prior`) for a small data set and
:func:`assert_partition_gof` on (independent or thinned) sampled labels.
"""

from pymc_splitmerge.testing.gof import (
    GOF_PVALUE_THRESHOLD,
    MIN_CELL_VARIANCE,
    N_GOF_TESTS,
    SUITE_FAILURE_RATE,
    PartitionChiSquareResult,
    assert_partition_gof,
    chisquare_partitions,
    total_variation,
)
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
from pymc_splitmerge.testing.kernel_checks import kernel_chain_draws, one_step_invariance_draws
from pymc_splitmerge.testing.oracle import (
    ExactPosterior,
    ExactPosteriorRandomConcentration,
    exact_posterior,
    exact_posterior_random_concentration,
    exact_prior,
)

__all__ = [
    "kernel_chain_draws",
    "one_step_invariance_draws",
    "GEWEKE_TEST_FUNCTIONS",
    "GewekeResult",
    "assert_geweke",
    "batch_means_standard_error",
    "geweke_test",
    "register_data_simulator",
    "sample_prior_partitions",
    "simulate_data",
    "ExactPosterior",
    "ExactPosteriorRandomConcentration",
    "exact_prior",
    "exact_posterior",
    "exact_posterior_random_concentration",
    "PartitionChiSquareResult",
    "chisquare_partitions",
    "total_variation",
    "assert_partition_gof",
    "SUITE_FAILURE_RATE",
    "N_GOF_TESTS",
    "GOF_PVALUE_THRESHOLD",
    "MIN_CELL_VARIANCE",
]
