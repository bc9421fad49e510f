r"""Seating weights of a Gibbs-type prior from its ``log V`` / ``log W`` tables (numba).

For a Gibbs-type prior :math:`p(c) = V(n, K) \prod_j W(|b_j|)` (PGSM eq. 3) every kernel moves
points or groups of points between blocks using ratios of the two tables returned by
:meth:`~pymc_splitmerge.priors.base.GibbsTypePrior.tables` (``log_v_table[K] = log V(n, K)``,
``log_w_table[m] = log W(m)``, ``log_w_table[0] = 0``).  The ratios are written once here:

* joining a block of size ``m`` with ``added`` points: ``log W(m + added) - log W(m)``;
* opening a new block of size ``size`` next to ``K`` blocks:
  ``log V(n, K + 1) - log V(n, K) + log W(size)``, ``-inf`` when ``V(n, K + 1) = 0`` (a finite
  Dirichlet prior with ``K = k``), never ``NaN``;
* splitting one block of size ``a + b`` into two (``K`` blocks before the split):
  ``log V(n, K + 1) - log V(n, K) + log W(a) + log W(b) - log W(a + b)``.

For ``added = 1`` / ``size = 1`` these are the Chinese-restaurant / Pitman–Yor urn weights
(Neal 2000, eq. 3.7 for the DP).
"""

from __future__ import annotations

import numpy as np

from pymc_splitmerge.core.jit import njit

__all__ = ["log_join_weight", "log_open_weight", "log_split_weight"]


@njit(cache=True, inline="always")
def log_join_weight(log_w_table, size, added):
    """``log W(size + added) - log W(size)``: ``added`` points join a block of ``size``."""
    return log_w_table[size + added] - log_w_table[size]


@njit(cache=True, inline="always")
def log_open_weight(log_v_table, log_w_table, n_blocks, size):
    """``log V(K + 1) - log V(K) + log W(size)`` with ``K = n_blocks``; ``-inf`` if infeasible."""
    log_v_next = log_v_table[n_blocks + 1]
    if log_v_next == -np.inf:
        return -np.inf
    return log_v_next - log_v_table[n_blocks] + log_w_table[size]


@njit(cache=True, inline="always")
def log_split_weight(log_v_table, log_w_table, n_blocks, size_a, size_b):
    """Log prior ratio of splitting a block of ``size_a + size_b`` (``n_blocks`` before)."""
    log_v_next = log_v_table[n_blocks + 1]
    if log_v_next == -np.inf:
        return -np.inf
    return (log_v_next - log_v_table[n_blocks] + log_w_table[size_a] + log_w_table[size_b]
            - log_w_table[size_a + size_b])
