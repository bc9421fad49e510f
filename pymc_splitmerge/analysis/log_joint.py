"""Log joint density of each draw: partition prior + collapsed likelihood, from the model.

The log joint ``log p(c | theta) + log p(x | c, phi)`` (with ``theta`` the partition prior's
parameters and ``phi`` the component family's hyperparameters, at their sampled values) is a
label-invariant scalar that shows whether chains reached the same region of the posterior.
It is evaluated with the model's own pytensor logp terms so that it is the exact quantity
the samplers target.
"""

from __future__ import annotations

import numpy as np
from pymc.model.transform.conditioning import remove_value_transforms

from pymc_splitmerge.analysis import _arviz_compat as compat
from pymc_splitmerge.analysis._labels import find_partition_variable
from pymc_splitmerge.distributions import discover

try:
    from pytensor.graph.traversal import graph_inputs
except ImportError:  # pytensor < 2.31
    from pytensor.graph.basic import graph_inputs

__all__ = ["log_joint_draws"]


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
    posterior = compat.get_group(data, "posterior")
    if var_name is None:
        var_name = find_partition_variable(posterior)
    if var_name not in model.named_vars:
        raise ValueError(f"the model has no variable named {var_name!r}")
    plain = remove_value_transforms(model)  # evaluate at the stored (untransformed) values
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
