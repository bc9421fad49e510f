"""Checks of a user's start of a partition variable (``initval=``, ``pm.sample(initvals=)``).

PyMC casts a start to the variable's integer dtype: ``pm.sample(initvals=...)`` without a
check (``[0.5, 1.7, ...]`` silently becomes ``[0, 1, ...]``, as for ``pm.Categorical``; a label
too large for the compact label dtype wraps around on pymc 6), ``initval=`` / ``model.set_initval``
refusing any wider dtype (an int64 array for an int8 variable: "cannot store a value of dtype
int64 without risking loss of precision").  :func:`check_partition_start` checks the raw value
and returns it in the variable's dtype; :class:`~pymc_splitmerge.distributions.priors.PartitionDistribution`
applies it to ``initval=`` when the model is built, and ``pymc_splitmerge.sampling.hooks`` to
``pm.sample(initvals=...)``.
"""

from __future__ import annotations

import numpy as np
from pymc.exceptions import SamplingError
from pytensor.graph.basic import Constant, Variable

from pymc_splitmerge.distributions.priors import constant_value

__all__ = ["check_partition_start"]


def _label_limit(rv, n: int) -> int | None:
    """Upper end of the prior's label range (``n``; ``k`` for a finite Dirichlet), or None
    when it depends on a parameter that is not fixed at model-build time."""
    op = rv.owner.op
    params = op.dist_params(rv.owner)[:-1]  # the last parameter is n
    values = {name: constant_value(value)
              for name, value in zip(op.parameter_names, params, strict=False)}
    try:
        return int(op.prior_class.label_range(n, **values))
    except Exception:  # noqa: BLE001 -- a symbolic parameter: the step checks the range
        return None


def check_partition_start(rv, value, where: str | None = None):
    """Refuse a start of the partition variable ``rv`` that PyMC would cast to something else.

    Parameters
    ----------
    rv : TensorVariable
        A partition variable (``DirichletProcess``, ``PitmanYor``, ...).
    value : array_like
        The start as the user gave it (before PyMC's cast to the label dtype).  Strings
        (initialisation strategies), None and symbolic values are left to PyMC.
    where : str, optional
        How to name the start in the message (default ``initvals[<name>]``).

    Raises
    ------
    TypeError
        The start is not numeric.
    ValueError
        Its shape is not ``(n,)``, or it holds NaN / inf or non-integer numbers (PyMC would
        truncate ``0.5`` to ``0`` without a word).
    pymc.exceptions.SamplingError
        A label outside the prior's label range (``[0, n)``; ``[0, k)`` for a finite
        Dirichlet): the start is outside the support, as the step's first-draw check says.

    Returns
    -------
    The labels as an array of the variable's (compact) dtype, or ``value`` itself when it is
    left to PyMC.
    """
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, Constant):
        value = value.data
    elif isinstance(value, Variable):
        return value
    name = rv.name
    n = int(rv.type.shape[-1])
    where = where or f"initvals[{name!r}]"
    limit = _label_limit(rv, n)
    advice = (f"Give one integer label per observation, in [0, {limit if limit else n}): "
              f"e.g. np.zeros({n}, dtype=int) (every point in one cluster, the default start) "
              f"or psm.splitmerge_start(model)")
    prefix = f"{where} is not a start of the partition variable {name!r}:"
    try:
        labels = np.asarray(value)
    except (TypeError, ValueError) as error:  # ragged nested lists
        raise TypeError(f"{prefix} it is not an array of labels ({error}). {advice}.") from None
    if labels.dtype.kind not in "biuf":
        raise TypeError(f"{prefix} it holds {labels.dtype} values, not integer labels. {advice}.")
    if labels.shape != (n,):
        raise ValueError(f"{prefix} it has shape {labels.shape}, but {name!r} has one label per "
                         f"observation, shape ({n},). {advice}.")
    if labels.dtype.kind == "f":
        bad = np.flatnonzero(~np.isfinite(labels))
        if bad.size:
            raise ValueError(f"{prefix} it holds {bad.size} non-finite value(s) (first: "
                             f"{labels[bad[0]]} at index {bad[0]}). {advice}.")
        bad = np.flatnonzero(labels != np.round(labels))
        if bad.size:
            raise ValueError(
                f"{prefix} it holds {bad.size} non-integer value(s) (first: {labels[bad[0]]} "
                f"at index {bad[0]}), which PyMC would truncate to integers without a warning. "
                f"Labels are cluster indices, not probabilities or cluster means. {advice}.")
    if limit is not None and labels.size and (labels.min() < 0 or labels.max() >= limit):
        low, high = labels.min(), labels.max()
        n_clusters = np.unique(labels).size
        raise SamplingError(
            f"{where}, the start of partition variable {name!r}, has labels outside [0, {limit}) (the label range of "
            f"{type(rv.owner.op).__name__.removesuffix('RV')} for n = {n}; found "
            f"{low:g}..{high:g}, {n_clusters} clusters), so its log prior is -inf. {advice}.")
    return labels.astype(rv.dtype)
