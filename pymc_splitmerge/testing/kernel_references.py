"""Plain references of kernel pieces, used only by the tests (moved out of ``kernels/``).

Each function recomputes a quantity of a numba kernel from complete log EPPFs / log
marginals, sharing no code with the kernel (scikit-learn's "fast code against naive code").
"""

from __future__ import annotations

import numpy as np

__all__ = ["reference_log_split_weight"]


def reference_log_split_weight(prior, n: int, n_clusters_merged: int, size_a: int,
                               size_b: int) -> float:
    """Plain reference of ``priors.seating.log_split_weight`` through ``prior.log_eppf``.

    ``log p(c_split) - log p(c_merge)`` for a block of ``size_a + size_b`` split in two, with
    ``n_clusters_merged`` blocks before the split.  The other blocks hold the remaining
    points (their factors cancel).
    """
    others = [1] * (n_clusters_merged - 1)
    rest = n - size_a - size_b - (n_clusters_merged - 1)
    if n_clusters_merged > 1:
        others[0] += rest
    merged = np.array([size_a + size_b, *others], dtype=np.int64)
    split = np.array([size_a, size_b, *others], dtype=np.int64)
    return float(prior.log_eppf(split) - prior.log_eppf(merged))
