"""Log-sum-exp and categorical draws from log weights: the one copy every kernel uses.

All kernels (Gibbs sweeps, split-merge restricted scans, PGSM/SMC particle weights, ARM
placements, anchor scores) end a step with the same two operations on a short vector of
unnormalised log weights: take ``log Σ exp`` and draw an index with probability proportional
to ``exp``.  They are written once here, in numba, each with a plain NumPy reference that the
tests compare them against (``tests/test_logweights.py``).

Conventions shared by every function:

* only the first ``count`` entries are read (kernels reuse one scratch buffer);
* ``NaN`` is treated as ``-inf`` (weight zero), so that a bad evaluation can never be chosen;
* the maximum is subtracted before exponentiating, and the peak entry's weight is exactly 1
  (no ``exp`` call), so overflow cannot happen and ties are exact.
"""

from __future__ import annotations

import numpy as np

from pymc_splitmerge.core.jit import njit

__all__ = [
    "exp_shifted",
    "exp_shifted_from_peak",
    "log_sum_exp",
    "normalise_log_weights",
    "reference_log_sum_exp",
    "reference_sample_log_weights",
    "sample_log_weights",
    "sample_weights",
]


@njit(cache=True)
def _peak(values, count):
    """Largest non-NaN value among ``values[:count]`` (``-inf`` if none)."""
    peak = -np.inf
    for j in range(count):
        value = values[j]
        if value > peak:  # False for NaN
            peak = value
    return peak


@njit(cache=True)
def log_sum_exp(values, count):
    """``log Σ_{j < count} exp(values[j])``; ``-inf`` when every value is ``-inf``/NaN.

    Parameters
    ----------
    values : ndarray of float64
        Log weights (only ``values[:count]`` is read).
    count : int
        Number of entries.

    Returns
    -------
    float
    """
    peak = _peak(values, count)
    if peak == -np.inf or peak == np.inf:
        return peak
    total = 0.0
    for j in range(count):
        value = values[j]
        if value == peak:
            total += 1.0
        elif value > -np.inf:  # False for NaN and -inf
            total += np.exp(value - peak)
    return peak + np.log(total)


@njit(cache=True)
def exp_shifted(values, count, weights_out):
    """``weights_out[j] = exp(values[j] - peak)`` for ``j < count``; returns ``(log Σ, Σ)``.

    The peak entry gets weight 1.0 (no ``exp`` call), NaN and ``-inf`` get 0.0.  The second
    return value is ``Σ_j weights_out[j]``, so that :func:`sample_weights` needs no further
    ``exp``.  When every value is ``-inf``/NaN every weight is 0 and ``(-inf, 0.0)`` is
    returned.
    """
    peak = _peak(values, count)
    total = exp_shifted_from_peak(values, count, peak, weights_out)
    if peak == -np.inf:
        return -np.inf, 0.0
    return peak + np.log(total), total


@njit(cache=True, inline="always")
def exp_shifted_from_peak(values, count, peak, weights_out):
    """The weights of :func:`exp_shifted` given ``peak``, the maximum of ``values[:count]``
    (``-inf`` when there is none), for a caller that found it while filling the values;
    returns their sum.  ``weights_out`` may be ``values``."""
    total = 0.0
    if peak == -np.inf:
        for j in range(count):
            weights_out[j] = 0.0
        return total
    for j in range(count):
        value = values[j]
        if value == peak:
            weight = 1.0
        elif value > -np.inf:
            weight = np.exp(value - peak)
        else:
            weight = 0.0
        weights_out[j] = weight
        total += weight
    return total


@njit(cache=True)
def normalise_log_weights(log_weights, weights_out):
    """Normalise all of ``log_weights`` into ``weights_out``; return ``log Σ exp``.

    Uniform weights (and ``-inf``) when every weight is ``-inf``/NaN: degenerate but defined,
    as resampling needs (N. Chopin and O. Papaspiliopoulos, *An Introduction to Sequential
    Monte Carlo*, 2020, ch. 9).
    """
    n = log_weights.shape[0]
    log_total, total = exp_shifted(log_weights, n, weights_out)
    if total == 0.0:
        for p in range(n):
            weights_out[p] = 1.0 / n
        return -np.inf
    for p in range(n):
        weights_out[p] /= total
    return log_total


@njit(cache=True)
def sample_weights(weights, count, total, uniform):
    """Index ``j < count`` drawn with probability ``weights[j] / total`` by inverse CDF.

    ``uniform`` is one Uniform(0, 1) draw.  Entries of weight zero are never returned, even
    when round-off puts ``uniform * total`` at or above the computed cumulative sum (then the
    last index of positive weight is returned).  Returns -1 when ``total`` is not positive.
    """
    if not total > 0.0:
        return -1
    threshold = uniform * total
    cumulative = 0.0
    last = -1
    for j in range(count):
        weight = weights[j]
        if weight > 0.0:
            cumulative += weight
            last = j
            if threshold < cumulative:
                return j
    return last


@njit(cache=True)
def sample_log_weights(log_weights, count, uniform):
    """Index ``j < count`` drawn with probability ∝ ``exp(log_weights[j])`` (inverse CDF).

    Overwrites ``log_weights[:count]`` with the unnormalised weights ``exp(value - peak)``.
    Returns -1 when every weight is zero (every value ``-inf``/NaN).
    """
    _, total = exp_shifted(log_weights, count, log_weights)
    return sample_weights(log_weights, count, total, uniform)


# --------------------------------------------------------------------------- references


def reference_log_sum_exp(values) -> float:
    """Plain reference of :func:`log_sum_exp` (NaN treated as ``-inf``)."""
    values = np.where(np.isnan(values), -np.inf, np.asarray(values, dtype=float))
    if values.size == 0 or np.all(values == -np.inf):
        return -np.inf
    peak = values.max()
    if peak == np.inf:
        return np.inf
    return float(peak + np.log(np.sum(np.exp(values - peak))))


def reference_sample_log_weights(log_weights, uniform: float) -> int:
    """Plain reference of :func:`sample_log_weights` (does not modify its input)."""
    values = np.where(np.isnan(log_weights), -np.inf, np.asarray(log_weights, dtype=float))
    if values.size == 0 or np.all(values == -np.inf):
        return -1
    weights = np.exp(values - values.max())
    cumulative = np.cumsum(weights)
    index = int(np.searchsorted(cumulative, uniform * cumulative[-1], side="right"))
    positive = np.flatnonzero(weights > 0)
    return int(min(index, positive[-1]))
