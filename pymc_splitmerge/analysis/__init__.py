"""Analysis of partition draws: label-invariant diagnostics, co-clustering, point estimates,
credible balls, agreement scores and plots.  Works on label arrays and on ArviZ data
(``InferenceData`` with ArviZ 0.x, ``xarray.DataTree`` with ArviZ 1.x)."""

from pymc_splitmerge.analysis._labels import canonicalize, find_partition_variable, partition_draws
from pymc_splitmerge.analysis.components import COMPONENTS_GROUP, sample_components
from pymc_splitmerge.analysis.log_joint import log_joint_draws
from pymc_splitmerge.analysis.metrics import (
    adjusted_rand_index,
    agreement_with_truth,
    binder_distance,
    contingency_table,
    distances_to_reference,
    rand_index,
    v_measure,
    variation_of_information,
)
from pymc_splitmerge.analysis.plots import (
    plot_block_fractions,
    plot_n_clusters,
    plot_similarity_matrix,
)
from pymc_splitmerge.analysis.point_estimate import (
    CredibleBall,
    PointEstimate,
    credible_ball,
    expected_loss,
    least_squares_draw,
    point_estimate,
)
from pymc_splitmerge.analysis.predictive import (
    heldout_log_predictive_density,
    partition_log_predictive,
)
from pymc_splitmerge.analysis.quantities import (
    DIAGNOSTICS_GROUP,
    add_partition_quantities,
    block_fractions,
    distance_diagnostics,
    partition_quantities,
    summary,
)
from pymc_splitmerge.analysis.similarity import (
    iter_similarity_blocks,
    most_uncertain_pairs,
    posterior_similarity_matrix,
)
from pymc_splitmerge.analysis.zarr_trace import iter_zarr_draws, zarr_posterior

__all__ = [
    "COMPONENTS_GROUP",
    "DIAGNOSTICS_GROUP",
    "CredibleBall",
    "PointEstimate",
    "add_partition_quantities",
    "adjusted_rand_index",
    "agreement_with_truth",
    "binder_distance",
    "block_fractions",
    "canonicalize",
    "contingency_table",
    "credible_ball",
    "distance_diagnostics",
    "distances_to_reference",
    "expected_loss",
    "find_partition_variable",
    "heldout_log_predictive_density",
    "iter_similarity_blocks",
    "iter_zarr_draws",
    "least_squares_draw",
    "log_joint_draws",
    "most_uncertain_pairs",
    "partition_draws",
    "partition_log_predictive",
    "partition_quantities",
    "plot_block_fractions",
    "plot_n_clusters",
    "plot_similarity_matrix",
    "point_estimate",
    "posterior_similarity_matrix",
    "rand_index",
    "sample_components",
    "summary",
    "v_measure",
    "variation_of_information",
    "zarr_posterior",
]
