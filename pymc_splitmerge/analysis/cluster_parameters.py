r"""Cluster parameters drawn from their conditional posterior, for every draw of a trace.

The samplers integrate the component parameters out (collapsed), so a trace holds
partitions and hyperparameters only.  For a draw :math:`(c, \phi)` (partition and
hyperparameters) and observed data :math:`x`, the parameters of the clusters are
conditionally independent given :math:`(c, \phi, x)`,

.. math:: \theta_b \mid c, \phi, x \;\sim\; p(\theta \mid \phi, x_{\{i: c_i = b\}}),

the conjugate posterior of each family (e.g. Normal-Inverse-Wishart: PGSM paper App. E.1,
eq. 29).  Drawing one :math:`\theta_b` per cluster and draw gives exact draws of the joint
posterior of :math:`(c, \theta, \phi)`, so cluster means, covariances, probabilities or rates
can be summarised and plotted with ArviZ like any other posterior variable (within one draw;
across draws a cluster index is only meaningful up to relabelling).

References
----------
.. [1] Bouchard-Côté, A., Doucet, A. and Roth, A. (2017). Particle Gibbs split-merge sampling
   for Bayesian inference in mixture models. JMLR 18(28), Appendix E.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import xarray as xr

from pymc_splitmerge.analysis import _arviz_compat as compat
from pymc_splitmerge.analysis._labels import canonicalize, find_partition_variable
from pymc_splitmerge.analysis.log_joint import untransformed_model
from pymc_splitmerge.distributions import PartitionPriorRV, discover
from pymc_splitmerge.distributions.cluster_parameters import (
    has_cluster_parameters,
    slot_partition,
)

__all__ = ["COMPONENTS_GROUP", "occupied_components", "plot_component_parameters",
           "sample_components"]

COMPONENTS_GROUP = "component_parameters"
"""Name of the group added by :func:`sample_components`."""


def _gathered_cluster_parameters(posterior, var_name, spec) -> xr.Dataset:
    """The ``component_parameters`` group of a partition with cluster parameters: cluster
    ``k`` of a draw (k-th by first appearance) takes the values of its slot."""
    slots = np.asarray(posterior[var_name].values).astype(np.int64)
    n_chains, n_draws, _ = slots.shape
    canonical = canonicalize(slots)
    max_clusters = int(canonical.max()) + 1
    cluster_slot = np.full((n_chains, n_draws, max_clusters), -1)
    sizes = np.zeros((n_chains, n_draws, max_clusters), dtype=np.int64)
    for chain in range(n_chains):
        for draw in range(n_draws):
            row = canonical[chain, draw]
            cluster_slot[chain, draw, row] = slots[chain, draw]
            sizes[chain, draw] = np.bincount(row, minlength=max_clusters)
    variables = {}
    for parameter in spec.parameters:
        values = np.asarray(posterior[parameter.name].values, dtype=np.float64)
        gathered = np.take_along_axis(
            values, np.maximum(cluster_slot, 0).reshape(
                *cluster_slot.shape, *([1] * (values.ndim - 3))), axis=2)
        gathered[cluster_slot < 0] = np.nan
        variables[parameter.name] = (("chain", "draw", "cluster", *(
            f"{parameter.name}_dim_{i}" for i in range(gathered.ndim - 3))), gathered)
    variables["cluster_size"] = (("chain", "draw", "cluster"), sizes)
    coords = {"chain": posterior["chain"].values, "draw": posterior["draw"].values,
              "cluster": np.arange(max_clusters)}
    dataset = xr.Dataset(variables, coords=coords)
    dataset.attrs["partition_variable"] = var_name
    return dataset


def sample_components(data, model=None, random_seed=None, *, var_name: str | None = None,
                      group: str = COMPONENTS_GROUP):
    """Add, per draw, each cluster's parameters drawn from their conditional posterior.

    Parameters
    ----------
    data : InferenceData or DataTree
        The output of ``pm.sample`` for ``model`` (its posterior holds the partition and every
        random hyperparameter).
    model : pymc.Model, optional
        The model; defaults to the model on the context stack.
    random_seed : int, numpy.random.Generator or None
        Seed of the parameter draws.
    var_name : str, optional
        Partition variable (found automatically when omitted).
    group : str, default ``"component_parameters"``
        Name of the new group (replaced if present).

    Returns
    -------
    InferenceData or DataTree
        ``data``, with the new group added in place.  Its variables have dims
        ``(chain, draw, cluster, ...)``:

        * one variable per parameter of the family: ``mean`` (shape (D,)) and ``covariance``
          ((D, D)) for ``NormalInverseWishart``; ``mean`` for ``NormalKnownCovariance``;
          ``mean`` and ``variance`` (scalars) for ``NormalInverseGamma``; ``probability``
          ((J,)) for ``BetaBernoulli``; ``probabilities`` ((J, max K_j), NaN past K_j) for
          ``DirichletCategorical``; ``rate`` ((J,)) for ``GammaPoisson``; ``grid_index`` for
          ``GridComponent``; for ``ProductFamily``, the sub-families' parameters prefixed
          ``f{i}_`` (sub-family i);
        * ``cluster_size``: the number of points of the cluster.

        Cluster ``k`` of a draw is the k-th cluster by order of first appearance, i.e. the
        points with ``psm.canonicalize(labels) == k`` (the stored label itself when the
        stored partition is canonical, as the package's step methods store it).  Draws with
        fewer clusters than the largest number over the trace are padded: NaN parameters and
        ``cluster_size`` 0 (parameters are float64; ``grid_index`` too, for the padding).

    Notes
    -----
    Exact given each draw: the parameters are drawn from the family's conjugate posterior
    given the draw's partition, its hyperparameter values and the observed data
    (:meth:`~pymc_splitmerge.components.ComponentFamily.sample_parameters`).  For a partition
    with cluster parameters (``psm.ClusterParameter``) they are in the trace already: each
    cluster's values are read from its slot (one variable per cluster parameter, same dims;
    ``random_seed`` is not used).
    """
    model = pm.modelcontext(model)
    rng = np.random.default_rng(random_seed)
    posterior = compat.posterior_with_labels(data)
    if var_name is None:
        found = [rv.name for rv in model.free_RVs
                 if isinstance(rv.owner.op, PartitionPriorRV) and rv.name in posterior]
        var_name = found[0] if len(found) == 1 else find_partition_variable(posterior)
    if var_name not in model.named_vars:
        raise ValueError(f"the model has no variable named {var_name!r}")
    if var_name not in posterior:
        raise ValueError(f"the posterior has no variable {var_name!r}")
    if has_cluster_parameters(model[var_name]):
        return compat.add_group(data, group, _gathered_cluster_parameters(
            posterior, var_name, slot_partition(model[var_name], model)))
    plain = untransformed_model(model)  # points in the stored (untransformed) values
    partition_model = discover(plain[var_name], plain)
    x = partition_model.data
    labels = canonicalize(np.asarray(posterior[var_name].values))
    if labels.ndim != 3 or labels.shape[-1] != x.shape[0]:
        raise ValueError(f"{var_name!r} must have shape (chain, draw, {x.shape[0]}), "
                         f"got {labels.shape}")
    n_chains, n_draws = labels.shape[:2]
    names = [v.name for v in plain.value_vars if v.name in posterior]
    values = {name: np.asarray(posterior[name].values) for name in names}
    max_clusters = int(labels.max()) + 1
    sizes = np.zeros((n_chains, n_draws, max_clusters), dtype=np.int64)
    arrays: dict[str, np.ndarray] = {}
    for chain in range(n_chains):
        for draw in range(n_draws):
            point = {name: value[chain, draw] for name, value in values.items()}
            family = partition_model.numeric_family(point)
            if not arrays:
                arrays = {name: np.full((n_chains, n_draws, max_clusters, *shape), np.nan)
                          for name, shape in family.parameter_shapes().items()}
            row = labels[chain, draw]
            for cluster in range(int(row.max()) + 1):
                members = np.flatnonzero(row == cluster)
                sizes[chain, draw, cluster] = members.shape[0]
                for name, value in family.sample_parameters(rng, x[members]).items():
                    arrays[name][chain, draw, cluster] = value
    coords = {"chain": posterior["chain"].values, "draw": posterior["draw"].values,
              "cluster": np.arange(max_clusters)}
    variables = {name: (("chain", "draw", "cluster",
                         *(f"{name}_dim_{i}" for i in range(array.ndim - 3))), array)
                 for name, array in arrays.items()}
    variables["cluster_size"] = (("chain", "draw", "cluster"), sizes)
    dataset = xr.Dataset(variables, coords=coords)
    dataset.attrs["partition_variable"] = var_name
    return compat.add_group(data, group, dataset)


def occupied_components(data, group: str = COMPONENTS_GROUP) -> xr.Dataset:
    """The component parameters of the clusters occupied in every draw (no NaN padding).

    ``sample_components`` pads the draws with fewer clusters than the largest number over the
    trace with NaN; a summary or forest plot over draws of such a cluster is NaN (ArviZ 0.x
    draws an empty row).  This keeps the clusters whose ``cluster_size`` is positive in every
    draw.

    Parameters
    ----------
    data : InferenceData, DataTree or Dataset
        With the group added by :func:`sample_components` (or that group itself).
    group : str, default ``"component_parameters"``

    Returns
    -------
    xarray.Dataset
        The group restricted to those clusters (``cluster`` coordinate kept).

    Raises
    ------
    ValueError
        When no cluster is occupied in every draw.
    """
    dataset = compat.get_group(data, group)
    occupied = (dataset["cluster_size"] > 0).all(("chain", "draw")).values
    if not occupied.any():
        raise ValueError("no cluster is occupied in every draw; summarise the draws with a fixed "
                         "partition (e.g. those equal to a point estimate) instead")
    return dataset.isel(cluster=np.flatnonzero(occupied))


def plot_component_parameters(data, var_names=None, *, group: str = COMPONENTS_GROUP,
                              **kwargs):
    """``az.plot_forest`` of the component parameters of the clusters occupied in every draw.

    Same call on both ArviZ lines; the NaN-padded clusters (:func:`occupied_components`) are
    left out, and so is ``cluster_size``.

    Parameters
    ----------
    data : InferenceData, DataTree or Dataset
        With the group added by :func:`sample_components`.
    var_names : list of str, optional
        Parameters to plot (default: all but ``cluster_size``).
    group : str, default ``"component_parameters"``
    **kwargs
        Passed to ``az.plot_forest``.

    Returns
    -------
    What ``az.plot_forest`` returns (matplotlib axes on ArviZ 0.x, a ``PlotCollection`` on
    ArviZ 1.x).
    """
    import arviz as az

    dataset = occupied_components(data, group)
    names = list(var_names) if var_names is not None else [
        str(name) for name in dataset.data_vars if name != "cluster_size"]
    if compat.ARVIZ_MAJOR >= 1:
        return az.plot_forest(xr.DataTree.from_dict({"posterior": dataset}), var_names=names,
                              **kwargs)
    return az.plot_forest(dataset, var_names=names, **kwargs)
