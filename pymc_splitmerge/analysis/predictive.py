"""Posterior predictive density of held-out observations, averaged over the trace.

For a draw ``(c, theta, phi)`` of the partition, the prior's parameters and the family's
hyperparameters, a new observation ``x*`` joins cluster ``b`` (size ``m_b``) or opens a new
one with the Gibbs-type prior's predictive probabilities (PGSM paper eq. 3)

    P(join b)  = V(n+1, K)   / V(n, K) * W(m_b + 1) / W(m_b)
    P(new)     = V(n+1, K+1) / V(n, K) * W(1)

which sum to one, so

    p(x* | c, x, theta, phi) = sum_b P(join b) p(x* | x_b) + P(new) p(x* | empty).

The held-out predictive density is the average of this over the draws (the PGSM paper's
held-out predictive likelihood, section 5), computed for each held-out observation
separately, in log space.
"""

from __future__ import annotations

import numpy as np

from pymc_splitmerge.analysis import _arviz_compat as compat
from pymc_splitmerge.analysis._labels import find_partition_variable
from pymc_splitmerge.analysis.log_joint import untransformed_model
from pymc_splitmerge.components import dispatch
from pymc_splitmerge.core.jit import njit
from pymc_splitmerge.core.logweights import log_sum_exp
from pymc_splitmerge.distributions import discover
from pymc_splitmerge.kernels.state import PartitionState

__all__ = ["heldout_log_predictive_density", "partition_log_predictive"]


@njit(cache=True)
def _log_predictive_rows(family_id, params, stats, active, n_clusters, empty_row, log_join,
                         log_new, x_new, out):
    """out[j] = log sum_b exp(log_join[b] + log p(x_j | b)) (+ new cluster), per new row j."""
    weights = np.empty(n_clusters + 1)
    for j in range(x_new.shape[0]):
        for b in range(n_clusters):
            weights[b] = log_join[b] + dispatch.log_predictive(family_id, params,
                                                               stats[active[b]], x_new[j])
        weights[n_clusters] = log_new + dispatch.log_predictive(family_id, params, empty_row,
                                                                x_new[j])
        out[j] = log_sum_exp(weights, n_clusters + 1)


def partition_log_predictive(prior, family, x, labels, x_new) -> np.ndarray:
    """``log p(x*_j | c, x)`` for every new row, for one partition and numeric hyperparameters.

    Parameters
    ----------
    prior : GibbsTypePrior
    family : ComponentFamily
        Numeric family.
    x : ndarray of shape (n, data_dim)
        Prepared training data.
    labels : array_like of int, shape (n,)
    x_new : ndarray of shape (m, data_dim)
        Prepared held-out data.

    Returns
    -------
    ndarray of shape (m,)
    """
    state = PartitionState(family, x, labels)
    n, k = state.n, state.n_clusters
    sizes = state.sizes[state.active[:k]]
    log_v_n = prior.log_v(n, np.array([k]))[0]
    if not np.isfinite(log_v_n):
        raise ValueError(f"the partition has {k} clusters, which has prior probability zero "
                         f"under {prior!r}")
    log_v_next = prior.log_v(n + 1, np.array([k, k + 1]))
    log_w = prior.log_w(np.concatenate([[1], sizes, sizes + 1]).astype(np.int64))
    log_join = log_v_next[0] - log_v_n + log_w[1 + k:] - log_w[1:1 + k]
    log_new = log_v_next[1] - log_v_n + log_w[0]
    out = np.empty(x_new.shape[0])
    _log_predictive_rows(state.family_id, state.params, state.stats, state.active, k,
                         state.empty_row, np.ascontiguousarray(log_join, dtype=np.float64),
                         float(log_new), np.ascontiguousarray(x_new, dtype=np.float64), out)
    return out


def heldout_log_predictive_density(data, model, new_data, var_name: str | None = None, *,
                                   max_draws: int | None = 1000):
    """Log posterior predictive density of held-out observations, averaged over the trace.

    Parameters
    ----------
    data : InferenceData or DataTree
        The output of ``pm.sample`` for ``model``.
    model : pymc.Model
        The model; its ``ConjugateMixture`` likelihood of the partition gives the family and
        the training data.
    new_data : array_like
        Held-out observations, in the same format as the observed data.
    var_name : str, optional
        Partition variable (found automatically when omitted).
    max_draws : int or None, default 1000
        Use at most this many draws, evenly spaced over the pooled chains (None: all).

    Returns
    -------
    ndarray of shape (m,)
        ``log( mean over draws of p(x*_j | c, x, hyperparameters) )`` for every held-out
        observation; their sum is the held-out log predictive likelihood.
    """
    posterior = compat.posterior_with_labels(data)
    if var_name is None:
        var_name = find_partition_variable(posterior)
    if var_name not in model.named_vars:
        raise ValueError(f"the model has no variable named {var_name!r}")
    plain = untransformed_model(model)  # points in the stored (untransformed) values
    partition_model = discover(plain[var_name], plain)
    names = [v.name for v in plain.value_vars if v.name in posterior]
    labels = np.asarray(posterior[var_name].values)
    flat = labels.reshape(-1, labels.shape[-1])
    values = {name: np.asarray(posterior[name].values).reshape(flat.shape[0], *posterior[
        name].shape[2:]) for name in names}
    rows = np.arange(flat.shape[0])
    if max_draws is not None and flat.shape[0] > max_draws:
        rows = np.unique(np.linspace(0, flat.shape[0] - 1, int(max_draws)).astype(np.int64))
    x = partition_model.data
    log_densities = None
    for row in rows:
        point = {name: value[row] for name, value in values.items()}
        family = partition_model.numeric_family(point)
        if log_densities is None:
            x_new = family.prepare_data(np.asarray(new_data))
            if x_new.shape[1:] != x.shape[1:]:
                raise ValueError(f"new_data rows have shape {x_new.shape[1:]}; the observed "
                                 f"data rows have shape {x.shape[1:]}")
            log_densities = np.empty((rows.size, x_new.shape[0]))
        prior = partition_model.numeric_prior(point)
        log_densities[np.searchsorted(rows, row)] = partition_log_predictive(
            prior, family, x, flat[row], x_new)
    top = log_densities.max(axis=0)
    return top + np.log(np.mean(np.exp(log_densities - top), axis=0))
