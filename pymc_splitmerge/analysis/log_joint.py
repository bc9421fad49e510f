"""Log joint density of each draw: partition prior + collapsed likelihood, from the model.

The log joint ``log p(c | theta) + log p(x | c, phi)`` (with ``theta`` the partition prior's
parameters and ``phi`` the component family's hyperparameters, at their sampled values) is a
label-invariant scalar that shows whether chains reached the same region of the posterior.
:func:`log_joint_draws` evaluates it with the model's own pytensor logp terms (the exact
quantity the samplers target); :func:`numeric_log_joint` computes the same numbers with the
numba kernels, O(n) a draw (what :func:`~pymc_splitmerge.sample` and
``partition_quantities(model=...)`` use).
"""

from __future__ import annotations

import numpy as np
from pymc.model.transform.conditioning import remove_value_transforms

from pymc_splitmerge.analysis import _arviz_compat as compat
from pymc_splitmerge.analysis._labels import find_partition_variable
from pymc_splitmerge.distributions import discover
from pymc_splitmerge.kernels.state import PartitionState

try:
    from pytensor.graph.traversal import graph_inputs
except ImportError:  # pytensor < 2.31
    from pytensor.graph.basic import graph_inputs

__all__ = ["log_joint_draws", "numeric_log_joint", "untransformed_model"]


def untransformed_model(model):
    """PyMC's ``remove_value_transforms(model)``, also for a model with ``initval=`` settings.

    The returned model's value variables are the natural (stored) values, so a trace's draws
    can be fed to it directly.  PyMC's model-to-graph conversion refuses a model with initial
    values ("Cannot convert models with non-default initial_values", e.g. after
    ``psm.DirichletProcess(..., initval=labels)``) although they play no part in a log
    density: they are set aside for the conversion and put back, so ``model`` is unchanged
    on return.
    """
    initial_values = model.rvs_to_initial_values
    saved = {rv: value for rv, value in initial_values.items() if value is not None}
    for rv in saved:
        initial_values[rv] = None
    try:
        return remove_value_transforms(model)
    finally:
        for rv, value in saved.items():
            initial_values[rv] = value


def _same_values(first, second) -> bool:
    """Exact equality of (nested) hyperparameter values: dicts, arrays, numbers."""
    if isinstance(first, dict) or isinstance(second, dict):
        if not (isinstance(first, dict) and isinstance(second, dict)):
            return False
        if first.keys() != second.keys():
            return False
        return all(_same_values(first[key], second[key]) for key in first)
    try:
        return bool(np.array_equal(np.asarray(first), np.asarray(second)))
    except (TypeError, ValueError):
        return first == second


def log_joint_draws(data, model, var_name: str | None = None) -> np.ndarray:
    """Log joint density (partition prior + collapsed likelihood) of every draw.

    Parameters
    ----------
    data : InferenceData or DataTree
        The output of ``pm.sample``; its posterior holds the partition variable and every
        free random variable the two terms depend on (e.g. the concentration).
    model : pymc.Model
        The model that produced ``data``.
    var_name : str, optional
        Name of the partition variable (found automatically when omitted).

    Returns
    -------
    ndarray of shape (chain, draw)
        ``log p(z) + sum of log p(y | z)`` over the ``ConjugateMixture`` likelihoods of ``z``;
        the priors of the hyperparameters themselves are not included.
    """
    posterior = compat.posterior_with_labels(data)
    if var_name is None:
        var_name = find_partition_variable(posterior)
    if var_name not in model.named_vars:
        raise ValueError(f"the model has no variable named {var_name!r}")
    plain = untransformed_model(model)  # evaluate at the stored (untransformed) values
    partition = plain[var_name]
    observed = discover(partition, plain).observed_var
    terms = plain.logp(vars=[partition, observed], jacobian=False, sum=True)
    needed = [v for v in plain.value_vars if v in _inputs_of(terms)]
    function = plain.compile_fn(terms, inputs=needed, on_unused_input="ignore", point_fn=False)
    missing = [v.name for v in needed if v.name not in posterior]
    if missing:
        raise ValueError(f"the posterior lacks the variables {missing} needed for the log joint")
    arrays = [np.asarray(posterior[v.name].values) for v in needed]
    n_chains, n_draws = arrays[0].shape[:2]
    out = np.empty((n_chains, n_draws))
    for chain in range(n_chains):
        for draw in range(n_draws):
            out[chain, draw] = function(*[array[chain, draw] for array in arrays])
    return out


def _inputs_of(expression):
    return set(graph_inputs([expression]))


def numeric_log_joint(data, model, var_name: str) -> np.ndarray:
    """Log joint (partition prior + collapsed likelihood) of every draw, with the numba kernels.

    The same quantity as :func:`~pymc_splitmerge.log_joint_draws` (which evaluates the model's
    pytensor terms, O(n * number of labels) per draw: about 0.3 s a draw at n = 20,000),
    computed from the numeric prior and family at each draw's hyperparameter values and the
    cluster statistics of :class:`~pymc_splitmerge.kernels.state.PartitionState` (O(n)).

    Returns
    -------
    ndarray of shape (chain, draw)
    """
    posterior = compat.posterior_with_labels(data)
    plain = untransformed_model(model)  # value variables = the stored natural values
    partition_model = discover(plain[var_name], plain)
    names = [v.name for v in plain.value_vars]
    missing = [name for name in names if name not in posterior]
    if missing:
        raise ValueError(f"the posterior lacks the variables {missing} needed for the log joint")
    arrays = {name: np.asarray(posterior[name].values) for name in names}
    n_chains, n_draws = arrays[var_name].shape[:2]
    out = np.empty((n_chains, n_draws))
    prior_values = family_values = prior = family = None
    for chain in range(n_chains):
        for draw in range(n_draws):
            point = {name: array[chain, draw] for name, array in arrays.items()}
            # the random hyperparameters evaluated once a draw; the prior and the family each
            # rebuilt only when their own values changed
            evaluated = partition_model._evaluate(point)
            values = partition_model.hyperparameter_values(point, evaluated)
            new_family_values = values.pop("family")
            if prior_values is None or not _same_values(values, prior_values):
                prior = partition_model.numeric_prior(point, evaluated)
                prior_values = values
            if family_values is None or not _same_values(new_family_values, family_values):
                family = partition_model.numeric_family(point, evaluated)
                family_values = new_family_values
            state = PartitionState(family, partition_model.data, point[var_name])
            out[chain, draw] = state.log_joint(prior)
    return out
