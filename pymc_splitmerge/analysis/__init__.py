"""Analysis of partition draws: label-invariant diagnostics, co-clustering, point estimates,
credible balls, agreement scores and plots.  Works on label arrays and on ArviZ data
(``InferenceData`` with ArviZ 0.x, ``xarray.DataTree`` with ArviZ 1.x).

Every public name is loaded from its submodule on first use (PEP 562), so that importing the
package and sampling (which need only :mod:`._arviz_compat`, and :mod:`.quantities` for the
end-of-run checks) do not load the quantities, the plots, the predictive densities or the
Zarr reader.  ``from pymc_splitmerge.analysis import summary`` and ``psm.analysis.summary``
work as before."""

from pymc_splitmerge._lazy import lazy_names

# Imported eagerly (cheap): the function ``point_estimate`` has the name of its submodule, and
# binding it here, after the submodule is first imported, keeps ``analysis.point_estimate`` the
# function whichever module later imports the submodule.
from pymc_splitmerge.analysis.point_estimate import (
    CredibleBall,
    PointEstimate,
    credible_ball,
    expected_loss,
    least_squares_draw,
    point_estimate,
)

# public name -> submodule that defines it
_SUBMODULE_NAMES = {
    "_labels": ("canonicalize", "find_partition_variable", "partition_draws"),
    "cluster_parameters": (
        "COMPONENTS_GROUP", "occupied_components", "plot_component_parameters",
        "sample_components",
    ),
    "log_joint": ("log_joint_draws",),
    "metrics": (
        "adjusted_rand_index", "agreement_with_truth", "binder_distance", "contingency_table",
        "distances_to_reference", "rand_index", "v_measure", "variation_of_information",
    ),
    "plots": ("plot_block_fractions", "plot_n_clusters", "plot_similarity_matrix"),
    "predictive": ("heldout_log_predictive_density", "partition_log_predictive"),
    "quantities": (
        "DIAGNOSTICS_GROUP", "add_partition_quantities", "block_fractions",
        "distance_diagnostics", "partition_quantities", "summary",
    ),
    "similarity": (
        "iter_similarity_blocks", "most_uncertain_pairs", "posterior_similarity_matrix",
    ),
    "zarr_trace": ("completed_draws", "iter_zarr_draws", "zarr_posterior"),
}
_SUBMODULE_OF = {name: module for module, names in _SUBMODULE_NAMES.items() for name in names}


__getattr__, __dir__ = lazy_names(__name__, globals(), _SUBMODULE_OF)


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
    "completed_draws",
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
    "occupied_components",
    "partition_draws",
    "partition_log_predictive",
    "partition_quantities",
    "plot_block_fractions",
    "plot_component_parameters",
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
