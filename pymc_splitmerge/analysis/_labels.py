"""Finding, validating and canonicalising partition draws (label arrays).

A partition of ``n`` observations is stored as an integer label vector; it is *canonical* when
labels are ``0..K-1`` numbered by order of first appearance.  Traces hold the partition variable
as an integer array of shape (chain, draw, n).  This package's steps store canonical labels;
traces of mixtures written with PyMC's built-in distributions (``z ~ pm.Categorical``) hold
arbitrary component indices of any integer dtype, which every analysis function canonicalises
on the fly (:func:`canonicalize`), so users never relabel by hand.

Relabelling and label validation are implemented once, in :mod:`pymc_splitmerge.core.relabel`
(numba kernel plus plain reference); this module adds what reading traces needs on top of it
(finding the partition variable, the (chain, draw, n) layout, rejecting negative labels).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from pymc_splitmerge.analysis import _arviz_compat as compat
from pymc_splitmerge.core.relabel import canonical_labels, check_labels, is_canonical

__all__ = [
    "as_label_draws",
    "as_labels",
    "canonicalize",
    "find_partition_variable",
    "is_canonical",
    "partition_draws",
]


def canonicalize(labels) -> np.ndarray:
    """Relabel partitions canonically (0..K-1 by order of first appearance).

    Any non-negative integer labels are accepted (any integer dtype, labels need not be below
    ``n``; e.g. the component indices of a ``pm.Categorical`` variable); the work is done by
    :func:`pymc_splitmerge.core.relabel.canonical_labels`.

    Parameters
    ----------
    labels : array_like of int, shape (..., n)
        Non-negative integer labels; the last axis indexes observations.

    Returns
    -------
    ndarray of int64, shape (..., n)
    """
    array = _check_integer_array(labels, "labels")
    if array.size == 0:
        return array.astype(np.int64)
    shape = array.shape
    return canonical_labels(array.reshape(-1, shape[-1])).reshape(shape)


def _check_integer_array(labels, what: str) -> np.ndarray:
    if isinstance(labels, xr.DataArray):
        labels = labels.values
    return check_labels(labels, what, allow_negative=False)


def as_labels(labels, what: str = "labels", n: int | None = None) -> np.ndarray:
    """Validate one partition: canonical int64 array of shape (n,)."""
    array = _check_integer_array(labels, what)
    if array.ndim != 1:
        raise ValueError(f"{what} must be a 1-D label vector of shape (n,), got shape {array.shape}")
    if array.size == 0:
        raise ValueError(f"{what} is empty")
    if n is not None and array.size != n:
        raise ValueError(f"{what} labels {array.size} observations but the draws label {n}")
    return canonicalize(array)


def as_label_draws(labels, what: str = "draws") -> np.ndarray:
    """Validate draws: returns canonical int64 array of shape (chain, draw, n).

    Accepts shape (draw, n) (one chain) or (chain, draw, n).
    """
    array = _check_integer_array(labels, what)
    if array.ndim == 2:
        array = array[None]
    if array.ndim != 3:
        raise ValueError(
            f"{what} must have shape (draw, n) or (chain, draw, n), got shape {array.shape}"
        )
    if 0 in array.shape:
        raise ValueError(f"{what} is empty (shape {array.shape})")
    if not is_canonical(array):
        array = canonicalize(array)
    return array


def find_partition_variable(posterior: xr.Dataset) -> str:
    """Name of the partition variable of a posterior dataset.

    The partition variable is the only integer variable with dims (chain, draw, obs) whose values
    are canonical labels (what this package's steps store).  When there is none, the only
    integer variable with such dims (e.g. the ``z ~ pm.Categorical`` component indices of a
    mixture written with PyMC's built-in distributions) is taken; its labels are canonicalised
    by :func:`partition_draws`.

    Raises
    ------
    ValueError
        If there is no such variable, or more than one (then pass ``var_name``).
    """
    candidates = []
    integer_variables = []
    rejected = []
    for name, variable in posterior.data_vars.items():
        dims = variable.dims
        if len(dims) != 3 or dims[0] != "chain" or dims[1] != "draw":
            rejected.append(f"{name} (dims {dims})")
            continue
        if not np.issubdtype(variable.dtype, np.integer):
            rejected.append(f"{name} (dtype {variable.dtype})")
            continue
        if not is_canonical(variable.values):
            integer_variables.append(str(name))
            rejected.append(f"{name} (values are not canonical labels 0..K-1)")
            continue
        candidates.append(str(name))
    if not candidates and len(integer_variables) == 1:
        candidates = integer_variables
    if not candidates:
        raise ValueError(
            "found no partition variable: expected an integer variable of dims "
            "(chain, draw, n) holding cluster labels. "
            f"Variables looked at: {rejected or 'none'}. Pass var_name= or an array of labels."
        )
    if len(candidates) > 1:
        raise ValueError(
            f"several variables look like partitions: {candidates}; pass var_name= to choose"
        )
    return candidates[0]


def partition_draws(data, var_name: str | None = None) -> tuple[np.ndarray, str | None]:
    """Extract partition draws from a trace or an array.

    Parameters
    ----------
    data : InferenceData, DataTree, Dataset, DataArray or array_like
        An array is of shape (draw, n) or (chain, draw, n).
    var_name : str, optional
        Name of the partition variable; found automatically when omitted.

    Returns
    -------
    labels : ndarray of int64, shape (chain, draw, n)
        Canonical labels.
    var_name : str or None
        Name of the variable (None for array input).
    """
    if isinstance(data, xr.DataArray):
        if data.ndim == 3 and data.dims[:2] != ("chain", "draw"):
            raise ValueError(f"a DataArray of partitions needs dims (chain, draw, n), got {data.dims}")
        return as_label_draws(data.values), (str(data.name) if data.name is not None else None)
    if isinstance(data, xr.Dataset) or compat.is_datatree(data) or compat.is_inference_data(data):
        posterior = compat.posterior_with_labels(data)
        if var_name is None:
            var_name = find_partition_variable(posterior)
        elif var_name not in posterior.data_vars:
            raise ValueError(
                f"the posterior has no variable {var_name!r}; its variables are "
                f"{list(posterior.data_vars)}"
            )
        variable = posterior[var_name]
        if variable.ndim != 3:
            raise ValueError(
                f"variable {var_name!r} has dims {variable.dims}; a partition variable has dims "
                "(chain, draw, n)"
            )
        return as_label_draws(variable.transpose("chain", "draw", ...).values, var_name), var_name
    return as_label_draws(data), None
