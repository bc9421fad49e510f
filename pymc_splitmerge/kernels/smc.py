"""Generic (conditional) sequential Monte Carlo helpers.

* ``normalise_log_weights``: log weights -> normalised weights; the NaN policy is explicit:
  a NaN log weight is treated as ``-inf`` (the particle gets weight 0), as in ``particles``
  (N. Chopin).  If every weight is ``-inf`` the result is uniform (degenerate but defined).
* ``relative_ess``: ``1 / (N * sum(w**2))`` in ``[1/N, 1]`` (Liu & Chen 1995; PGSM Algorithm 3,
  line 18).
* ``conditional_multinomial_resample``: ancestors of a conditional SMC generation, with the
  reference path pinned as particle 0 and its ancestor 0 (Andrieu, Doucet & Holenstein 2010;
  PGSM eq. 6): ``a_0 = 0`` and ``a_p ~ Categorical(w)`` i.i.d. for ``p >= 1``.
* ``multinomial_resample``: plain (unconditional) multinomial resampling, used only by the
  negative-control variant of the PGSM kernel.

The ``@njit`` versions draw from numba's internal random state (seed it first with
``kernels.rng.seed_numba_from``); each has a plain NumPy reference (``reference_*``) taking an
explicit ``np.random.Generator``, which the tests compare against.

References
----------
Andrieu, C., Doucet, A. and Holenstein, R. (2010). Particle Markov chain Monte Carlo methods.
JRSS B 72(3), 269-342.
Bouchard-Côté, A., Doucet, A. and Roth, A. (2017). Particle Gibbs split-merge sampling for
Bayesian inference in mixture models. JMLR 18(28). Algorithm 3, eq. (6).
Liu, J. S. and Chen, R. (1995). Blind deconvolution via sequential imputations. JASA 90.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = [
    "normalise_log_weights",
    "relative_ess",
    "conditional_multinomial_resample",
    "multinomial_resample",
    "sample_index",
    "reference_normalise_log_weights",
    "reference_relative_ess",
    "reference_conditional_multinomial_resample",
]


@numba.njit(cache=True)
def normalise_log_weights(log_weights, weights_out):
    """Normalise ``log_weights`` into ``weights_out``; return the log of their sum.

    Parameters
    ----------
    log_weights : ndarray of float64, shape (N,)
        Unnormalised log weights; NaN is treated as ``-inf``.
    weights_out : ndarray of float64, shape (N,)
        Filled with the normalised weights (uniform if every weight is ``-inf``).

    Returns
    -------
    float
        ``log(sum(exp(log_weights)))`` (``-inf`` if every weight is ``-inf``).
    """
    n = log_weights.shape[0]
    peak = -np.inf
    for p in range(n):
        value = log_weights[p]
        if value == value and value > peak:  # value == value is False for NaN
            peak = value
    if peak == -np.inf:
        for p in range(n):
            weights_out[p] = 1.0 / n
        return -np.inf
    total = 0.0
    for p in range(n):
        value = log_weights[p]
        if value == value:
            weights_out[p] = np.exp(value - peak)
        else:
            weights_out[p] = 0.0
        total += weights_out[p]
    for p in range(n):
        weights_out[p] /= total
    return peak + np.log(total)


@numba.njit(cache=True)
def relative_ess(weights):
    """Relative effective sample size ``1 / (N * sum(w**2))`` of normalised ``weights``."""
    total = 0.0
    for p in range(weights.shape[0]):
        total += weights[p] * weights[p]
    return 1.0 / (weights.shape[0] * total)


@numba.njit(cache=True)
def sample_index(weights):
    """One draw from ``Categorical(weights)`` (normalised) with numba's random state."""
    u = np.random.random()
    cumulative = 0.0
    last = 0
    for p in range(weights.shape[0]):
        if weights[p] > 0.0:
            last = p
            cumulative += weights[p]
            if u < cumulative:
                return p
    return last  # round-off: u >= cumulative sum


@numba.njit(cache=True)
def conditional_multinomial_resample(weights, ancestors_out):
    """Conditional multinomial resampling: ``a_0 = 0``, ``a_p ~ Categorical(weights)``, p >= 1.

    Parameters
    ----------
    weights : ndarray of float64, shape (N,)
        Normalised weights.
    ancestors_out : ndarray of int64, shape (N,)
        Filled with the ancestor indices.
    """
    ancestors_out[0] = 0
    for p in range(1, weights.shape[0]):
        ancestors_out[p] = sample_index(weights)


@numba.njit(cache=True)
def multinomial_resample(weights, ancestors_out):
    """Unconditional multinomial resampling (negative-control use only)."""
    for p in range(weights.shape[0]):
        ancestors_out[p] = sample_index(weights)


# --------------------------------------------------------------------------- references


def reference_normalise_log_weights(log_weights):
    """Plain NumPy reference of ``normalise_log_weights``: returns ``(weights, log_sum)``."""
    log_weights = np.where(np.isnan(log_weights), -np.inf, np.asarray(log_weights, float))
    if np.all(log_weights == -np.inf):
        return np.full(log_weights.shape, 1.0 / log_weights.size), -np.inf
    peak = log_weights.max()
    weights = np.exp(log_weights - peak)
    total = weights.sum()
    return weights / total, float(peak + np.log(total))


def reference_relative_ess(weights):
    """Plain NumPy reference of ``relative_ess``."""
    weights = np.asarray(weights, float)
    return float(1.0 / (weights.size * np.sum(weights**2)))


def reference_conditional_multinomial_resample(weights, rng: np.random.Generator):
    """Plain NumPy reference of ``conditional_multinomial_resample`` (explicit Generator)."""
    weights = np.asarray(weights, float)
    ancestors = np.empty(weights.size, dtype=np.int64)
    ancestors[0] = 0
    ancestors[1:] = rng.choice(weights.size, size=weights.size - 1, p=weights / weights.sum())
    return ancestors
