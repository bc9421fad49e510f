r"""Label-invariant summaries of partition draws and their MCMC diagnostics.

Cluster labels are not identified, so R-hat and ESS are computed on label-invariant projections
of each draw (Jain & Neal 2004, Figs 1-3; Duttweiler et al. 2025):

* ``n_clusters``: number of clusters;
* ``fraction_in_largest_clusters[m]``: fraction of observations in the ``m`` largest clusters;
* ``co_clustering[i, j]``: indicator that observations ``i`` and ``j`` share a cluster, for the
  pairs whose co-clustering probability is closest to 1/2 (or pairs given by the user);
* ``distance_to_reference_vi`` / ``distance_to_reference_binder``: variation of information
  (log base 2) and Binder distance (unit-cost count of discordant pairs) of each draw to a
  reference partition (Duttweiler et al. 2025);
* ``log_joint``: the log joint density, when supplied.

The integrated autocorrelation time reported is ``chain * draw / ESS`` with ArviZ's ``"mean"``
ESS (no rank normalisation).

References
----------
Jain, S. and Neal, R. M. (2004). A split-merge Markov chain Monte Carlo procedure for the
Dirichlet process mixture model. J. Comput. Graph. Statist. 13(1), 158-182.
Duttweiler, L., Thurston, S. W. and Almudevar, A. (2025). The traceplot thickens: MCMC
diagnostics for non-Euclidean spaces. Stat.
Vehtari, A., Gelman, A., Simpson, D., Carpenter, B. and Bürkner, P.-C. (2021). Rank-normalization,
folding, and localization: an improved R-hat. Bayesian Analysis 16(2), 667-718.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import xarray as xr

from pymc_splitmerge.analysis import _arviz_compat as compat
from pymc_splitmerge.analysis._labels import as_labels, partition_draws
from pymc_splitmerge.analysis.log_joint import numeric_log_joint
from pymc_splitmerge.analysis.metrics import distances_to_reference
from pymc_splitmerge.analysis.point_estimate import PointEstimate, point_estimate
from pymc_splitmerge.analysis.similarity import most_uncertain_pairs

__all__ = [
    "DIAGNOSTICS_GROUP",
    "add_partition_quantities",
    "block_fractions",
    "distance_diagnostics",
    "partition_quantities",
    "summary",
]

DIAGNOSTICS_GROUP = "partition_diagnostics"


def block_fractions(draws, num_largest: int = 3) -> np.ndarray:
    """Fraction of observations in the ``m`` largest clusters, ``m = 1..num_largest``.

    Parameters
    ----------
    draws : array_like of int, shape (chain, draw, n) (canonical labels)
    num_largest : int

    Returns
    -------
    float64 array of shape (chain, draw, num_largest)
    """
    labels, _ = partition_draws(draws)
    if int(num_largest) != num_largest or num_largest < 1:
        raise ValueError(f"num_largest must be a positive integer, got {num_largest!r}")
    chains, n_draws, n = labels.shape
    flat = labels.reshape(-1, n)
    width = int(flat.max()) + 1
    offsets = (np.arange(flat.shape[0]) * width)[:, None]
    sizes = np.bincount((flat + offsets).ravel(), minlength=flat.shape[0] * width)
    sizes = np.sort(sizes.reshape(flat.shape[0], width), axis=1)[:, ::-1]
    if width < num_largest:
        sizes = np.pad(sizes, ((0, 0), (0, num_largest - width)))
    fractions = np.cumsum(sizes[:, :num_largest], axis=1) / n
    return fractions.reshape(chains, n_draws, num_largest)


def _check_pairs(pairs, n: int) -> np.ndarray:
    array = np.asarray(pairs)
    if array.ndim != 2 or array.shape[1] != 2 or not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"pairs must be an integer array of shape (num_pairs, 2), got {array!r}")
    if array.size and (array.min() < 0 or array.max() >= n):
        raise ValueError(f"pairs index observations outside 0..{n - 1}")
    if np.any(array[:, 0] == array[:, 1]):
        raise ValueError("pairs must join two different observations")
    return array.astype(np.int64)


def _log_joint_array(log_joint, labels) -> np.ndarray:
    chains, n_draws, _ = labels.shape
    if callable(log_joint):
        values = np.array([[float(log_joint(labels[c, d])) for d in range(n_draws)]
                           for c in range(chains)])
    else:
        values = np.asarray(log_joint.values if isinstance(log_joint, xr.DataArray) else log_joint,
                            dtype=np.float64)
        if values.ndim == 1 and chains == 1:
            values = values[None]
    if values.shape != (chains, n_draws):
        raise ValueError(
            f"log_joint has shape {values.shape}; it must have shape (chain, draw) = "
            f"{(chains, n_draws)}"
        )
    return values


def _reference_labels(reference, labels, rng) -> np.ndarray | None:
    if reference is None:
        return None
    if isinstance(reference, PointEstimate):
        return as_labels(reference.labels, "reference", n=labels.shape[-1])
    if isinstance(reference, str):
        if reference != "point_estimate":
            raise ValueError(
                f"reference must be 'point_estimate', a PointEstimate or labels, got {reference!r}"
            )
        return point_estimate(labels, loss="vi", num_runs=2, rng=rng).labels
    return as_labels(reference, "reference", n=labels.shape[-1])


def _is_zarr_trace(data) -> bool:
    """A ``pymc.backends.zarr.ZarrTrace`` or its zarr root group (read by ``zarr_posterior``)."""
    if (isinstance(data, xr.Dataset | xr.DataArray | np.ndarray) or compat.is_datatree(data)
            or compat.is_inference_data(data)):
        return False
    root = getattr(data, "root", data)
    return hasattr(root, "group_keys") and hasattr(root, "array_keys")


def partition_quantities(
    data,
    var_name: str | None = None,
    *,
    num_largest: int = 3,
    pairs=None,
    num_pairs: int = 3,
    log_joint: np.ndarray | Callable | None = None,
    model=None,
    reference=None,
    rng: np.random.Generator | int | None = None,
    max_pair_draws: int = 500,
) -> xr.Dataset:
    """Label-invariant quantities of every draw, as an :class:`xarray.Dataset`.

    Parameters
    ----------
    data : InferenceData, DataTree, Dataset, ZarrTrace or array_like of shape (chain, draw, n)
        A ``pymc.backends.zarr.ZarrTrace`` (or its store's root group) is read with
        :func:`~pymc_splitmerge.analysis.zarr_trace.zarr_posterior`: its completed draws only.
    var_name : str, optional
        Partition variable (found automatically when omitted).
    num_largest : int
        Number of cumulative block fractions (largest, two largest, ...).
    pairs : array_like of int of shape (num_pairs, 2), optional
        Pairs of observations whose co-clustering indicators are tracked; by default the
        ``num_pairs`` pairs with co-clustering probability closest to 1/2 (probabilities
        estimated from at most ``max_pair_draws`` evenly spaced draws).
    num_pairs : int
        At most this many pairs (fewer when ``n`` has fewer pairs).
    log_joint : array of shape (chain, draw) or callable(labels) -> float, optional
    model : pymc.Model, optional
        The model that produced ``data``: the log joint (partition prior + collapsed
        likelihood, the quantity of :func:`~pymc_splitmerge.analysis.log_joint.log_joint_draws`)
        is evaluated from it with the numba kernels
        (:func:`~pymc_splitmerge.analysis.log_joint.numeric_log_joint`, O(n) a draw).  Give either
        ``model`` or ``log_joint``.
    reference : "point_estimate", PointEstimate or labels of shape (n,), optional
        Reference partition for the distance projections (none when omitted).
    rng : numpy.random.Generator or int, optional
        For the point-estimate search of ``reference="point_estimate"``.

    Returns
    -------
    xarray.Dataset
        Variables with dims (chain, draw[, ...]): ``n_clusters``, ``fraction_in_largest_clusters``
        (dim ``largest``), ``co_clustering`` (dim ``pair``), and ``log_joint``,
        ``distance_to_reference_vi``, ``distance_to_reference_binder`` when requested.
    """
    if _is_zarr_trace(data):  # a ZarrTrace: its completed draws (loaded on first use)
        from pymc_splitmerge.analysis.zarr_trace import zarr_posterior

        data = zarr_posterior(data, var_name)
    labels, var_name = partition_draws(data, var_name)
    chains, n_draws, n = labels.shape
    if model is not None:
        if log_joint is not None:
            raise ValueError("give either log_joint or model, not both")
        if not (compat.is_datatree(data) or compat.is_inference_data(data)):
            raise ValueError("model= needs the trace returned by pm.sample (InferenceData or "
                             "DataTree), which holds the sampled hyperparameters")
        # the numba evaluation of the same quantity (O(n) a draw; log_joint_draws evaluates the
        # model's pytensor terms, O(n * number of labels): 45 s instead of 1-2 s for 400 draws
        # at n = 20,000 on pymc 5)
        log_joint = numeric_log_joint(data, model, var_name)
    coords = {"chain": np.arange(chains), "draw": np.arange(n_draws)}
    if compat.is_datatree(data) or compat.is_inference_data(data) or isinstance(data, xr.Dataset):
        posterior = compat.posterior_with_labels(data)
        for dim in ("chain", "draw"):
            if dim in posterior.coords:
                coords[dim] = posterior.coords[dim].values
    variables = {
        "n_clusters": (("chain", "draw"), labels.max(axis=-1) + 1),
        "fraction_in_largest_clusters": (
            ("chain", "draw", "largest"), block_fractions(labels, num_largest)
        ),
    }
    coords["largest"] = np.arange(1, int(num_largest) + 1)
    if pairs is None:
        # at most the n (n - 1) / 2 pairs there are (n = 2 has one)
        num_pairs = min(num_pairs, n * (n - 1) // 2) if num_pairs > 0 else num_pairs
        if n >= 2 and num_pairs > 0:
            flat = labels.reshape(-1, n)
            step = max(1, int(np.ceil(flat.shape[0] / max(int(max_pair_draws), 1))))
            pairs, _ = most_uncertain_pairs(flat[::step], num_pairs)
        else:
            pairs = np.empty((0, 2), dtype=np.int64)
    pairs = _check_pairs(pairs, n)
    if len(pairs):
        indicators = (labels[..., pairs[:, 0]] == labels[..., pairs[:, 1]]).astype(np.int64)
        variables["co_clustering"] = (("chain", "draw", "pair"), indicators)
        coords["pair"] = [f"{i},{j}" for i, j in pairs]
        # (no auxiliary pair_first / pair_second coordinates: ArviZ 1.x's summary cannot
        # stack non-index coordinates of one dimension only)
    if log_joint is not None:
        variables["log_joint"] = (("chain", "draw"), _log_joint_array(log_joint, labels))
    reference_labels = _reference_labels(reference, labels, rng)
    if reference_labels is not None:
        distances = distances_to_reference(labels, reference_labels)
        variables["distance_to_reference_vi"] = (
            ("chain", "draw"), distances["variation_of_information"]
        )
        variables["distance_to_reference_binder"] = (
            ("chain", "draw"), distances["binder_distance"]
        )
    dataset = xr.Dataset(variables, coords=coords)
    dataset.attrs["partition_variable"] = var_name or ""
    dataset.attrs["n_observations"] = n
    if reference_labels is not None:
        dataset.attrs["reference_n_clusters"] = int(reference_labels.max()) + 1
    return dataset


def add_partition_quantities(data, var_name: str | None = None, *, overwrite: bool = True,
                             **kwargs):
    """Compute :func:`partition_quantities` and attach them as group ``"partition_diagnostics"``.

    Afterwards ``az.rhat(data, group="partition_diagnostics")`` (ArviZ 1.x),
    ``az.rhat(data.partition_diagnostics)`` (ArviZ 0.x), ``az.ess`` and ``az.plot_trace`` work on
    them directly.  ``data`` is modified in place and returned.

    Parameters
    ----------
    data : InferenceData or DataTree
    var_name : str, optional
    overwrite : bool
        Replace an existing group.
    **kwargs
        Passed to :func:`partition_quantities`.
    """
    if not (compat.is_datatree(data) or compat.is_inference_data(data)):
        raise TypeError(
            "add_partition_quantities needs an arviz.InferenceData or xarray.DataTree (the result "
            f"of pm.sample), got {type(data).__name__}; use partition_quantities for arrays"
        )
    dataset = partition_quantities(data, var_name, **kwargs)
    return compat.add_group(data, DIAGNOSTICS_GROUP, dataset, overwrite=overwrite)


def _rows(dataset: xr.Dataset):
    for name, variable in dataset.data_vars.items():
        extra = [d for d in variable.dims if d not in ("chain", "draw")]
        if not extra:
            yield str(name), variable.values
            continue
        (dim,) = extra
        for index, coordinate in enumerate(dataset.coords[dim].values):
            yield f"{name}[{coordinate}]", variable.isel({dim: index}).values


def _table(dataset: xr.Dataset, hdi_probability: float) -> pd.DataFrame:
    low = f"hdi_{100 * (1 - hdi_probability) / 2:g}%"
    high = f"hdi_{100 * (1 + hdi_probability) / 2:g}%"
    records = {}
    for name, values in _rows(dataset):
        values = np.asarray(values, dtype=np.float64)
        interval = compat.hdi(values, hdi_probability)
        ess_mean = compat.ess(values, "mean")
        records[name] = {
            "mean": values.mean(),
            "sd": values.std(ddof=1) if values.size > 1 else np.nan,
            low: interval[0],
            high: interval[1],
            "ess_bulk": compat.ess(values, "bulk"),
            "ess_tail": compat.ess(values, "tail"),
            "r_hat": compat.rhat(values),
            "iat": values.size / ess_mean if ess_mean and np.isfinite(ess_mean) else np.nan,
        }
    return pd.DataFrame.from_dict(records, orient="index")


def summary(
    data,
    var_name: str | None = None,
    *,
    num_largest: int = 3,
    pairs=None,
    num_pairs: int = 3,
    log_joint=None,
    model=None,
    reference="point_estimate",
    hdi_probability: float = 0.94,
    round_to: int | None = None,
    rng: np.random.Generator | int | None = None,
) -> pd.DataFrame:
    """ArviZ-style table of label-invariant partition quantities.

    Columns: ``mean``, ``sd``, HDI bounds, ``ess_bulk``, ``ess_tail``, ``r_hat`` and ``iat``
    (integrated autocorrelation time, ``chain * draw / ESS_mean``).  Rows: the variables of
    :func:`partition_quantities` (one row per pair / block fraction).

    Parameters
    ----------
    data : InferenceData, DataTree, Dataset, ZarrTrace or array_like of shape (chain, draw, n)
    reference : "point_estimate", PointEstimate, labels or None
        Reference partition of the distance rows (None: no distance rows).
    hdi_probability : float
    round_to : int, optional
        Round the table.

    Other parameters are those of :func:`partition_quantities`.

    Returns
    -------
    pandas.DataFrame
    """
    if not 0 < hdi_probability < 1:
        raise ValueError(f"hdi_probability must be in (0, 1), got {hdi_probability!r}")
    dataset = partition_quantities(
        data, var_name, num_largest=num_largest, pairs=pairs, num_pairs=num_pairs,
        log_joint=log_joint, model=model, reference=reference, rng=rng,
    )
    table = _table(dataset, hdi_probability)
    return table.round(round_to) if round_to is not None else table


def distance_diagnostics(
    data,
    var_name: str | None = None,
    *,
    reference="point_estimate",
    rng: np.random.Generator | int | None = None,
) -> pd.DataFrame:
    """R-hat and ESS of the distances of each draw to a reference partition.

    Each draw is projected to a real number, its variation of information and its Binder
    distance to ``reference`` (default: the VI point estimate), and the usual diagnostics are
    computed on the projections (Duttweiler et al. 2025).

    Returns
    -------
    pandas.DataFrame
        Rows ``distance_to_reference_vi`` and ``distance_to_reference_binder``; columns as in
        :func:`summary`.
    """
    if reference is None:
        raise ValueError("distance_diagnostics needs a reference partition")
    labels, _ = partition_draws(data, var_name)
    reference_labels = _reference_labels(reference, labels, rng)
    distances = distances_to_reference(labels, reference_labels)
    dataset = xr.Dataset({
        "distance_to_reference_vi": (("chain", "draw"), distances["variation_of_information"]),
        "distance_to_reference_binder": (("chain", "draw"), distances["binder_distance"]),
    })
    return _table(dataset, 0.94)
