r"""Posterior similarity (co-clustering) matrix.

.. math:: P_{ij} = \frac1S \sum_{s=1}^S 1\{c^{(s)}_i = c^{(s)}_j\}
   = \frac1S \sum_s (Z^{(s)} Z^{(s)\top})_{ij},

with :math:`Z^{(s)}` the one-hot (n x K_s) membership matrix of draw ``s``.  The matrix is
computed in blocks of rows without materialising anything of size draws x n x n: for every row
``i`` and draw ``s`` the members of ``i``'s cluster are added to an int32 count row (an index
sorted by cluster gives them contiguously).  When ``i``'s cluster holds more than half of the
observations, a per-row offset is incremented instead and its complement is subtracted, so the
work per draw is :math:`\sum_k n_k \min(n_k, n - n_k) \le n^2 / 2`.  Rows are processed in
tiles of 32 so the count rows stay in cache while all draws stream past.  The full matrix is
computed on and above the diagonal only and mirrored (half the work).

References
----------
Wade, S. and Ghahramani, Z. (2018). Bayesian cluster analysis: point estimation and credible
balls. Bayesian Analysis 13(2), 559-626 (posterior similarity matrix, Section 2).
Fritsch, A. and Ickstadt, K. (2009). Improved criteria for clustering based on the posterior
similarity matrix. Bayesian Analysis 4(2), 367-391.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import xarray as xr

from pymc_splitmerge.analysis import _arviz_compat as compat
from pymc_splitmerge.analysis._labels import find_partition_variable, partition_draws
from pymc_splitmerge.core.jit import njit

__all__ = [
    "SIMILARITY_MAX_BYTES",
    "iter_similarity_blocks",
    "most_uncertain_pairs",
    "posterior_similarity_matrix",
    "reference_posterior_similarity_matrix",
]

_TILE = 32

#: Largest dense similarity matrix :func:`posterior_similarity_matrix` allocates by default
#: (2 GiB: n = 23,170 in float32, n = 16,383 in float64).  Above it the function refuses and
#: names the streaming alternatives; pass ``max_bytes=None`` to allocate anyway.
SIMILARITY_MAX_BYTES = 2 * 2**30

_STREAMING_ALTERNATIVES = (
    "Streaming alternatives that never hold an n x n matrix: "
    "iter_similarity_blocks(data, block_size=...) yields row blocks P[start:stop, :] "
    "(reduce each block, then drop it); point_estimate(data) (SALSO on contingency tables, "
    "memory O(K x draws x K)) and least_squares_draw(data) give the co-clustering point "
    "estimate; expected_loss(data, candidate), credible_ball(data) and "
    "most_uncertain_pairs(data) work from the draws directly; thin the draws first "
    "(e.g. data[:, ::10]) to cut their O(n x draws) cost."
)


@njit(cache=True)
def _cluster_index(flat):  # pragma: no cover
    """Per draw: observations sorted by cluster (stable), each observation's position in that
    order, and cluster start offsets."""
    n_draws, n = flat.shape
    max_label = 0
    for s in range(n_draws):
        for i in range(n):
            max_label = max(max_label, flat[s, i])
    order = np.empty((n_draws, n), dtype=np.int32)
    rank = np.empty((n_draws, n), dtype=np.int32)
    offsets = np.zeros((n_draws, max_label + 2), dtype=np.int32)
    cursor = np.empty(max_label + 2, dtype=np.int32)
    for s in range(n_draws):
        for i in range(n):
            offsets[s, flat[s, i] + 1] += 1
        for k in range(max_label + 1):
            offsets[s, k + 1] += offsets[s, k]
        for k in range(max_label + 1):
            cursor[k] = offsets[s, k]
        for i in range(n):
            k = flat[s, i]
            order[s, cursor[k]] = i
            rank[s, i] = cursor[k]
            cursor[k] += 1
    return order, rank, offsets


@njit(cache=True)
def _similarity_counts(labels_by_observation, order, rank, offsets, start, stop, counts,
                       upper_only):  # pragma: no cover
    """Add co-clustering counts of rows ``start:stop`` into ``counts`` (int32, (stop-start, n)).

    With ``upper_only`` only the entries ``j >= i`` are guaranteed (about half the work)."""
    n, n_draws = labels_by_observation.shape
    offset_rows = np.zeros(stop - start, dtype=np.int32)
    for tile_start in range(start, stop, 32):
        tile_stop = min(tile_start + 32, stop)
        for s in range(n_draws):
            for i in range(tile_start, tile_stop):
                row = i - start
                k = labels_by_observation[i, s]
                first = offsets[s, k]
                last = offsets[s, k + 1]
                if 2 * (last - first) <= n:
                    if upper_only:
                        first = rank[s, i]
                    for t in range(first, last):
                        counts[row, order[s, t]] += 1
                else:
                    offset_rows[row] += 1
                    for t in range(first):
                        counts[row, order[s, t]] -= 1
                    for t in range(last, n):
                        counts[row, order[s, t]] -= 1
    for row in range(stop - start):
        for j in range(n):
            counts[row, j] += offset_rows[row]


def reference_posterior_similarity_matrix(labels) -> np.ndarray:
    """Naive reference: mean over draws of ``labels[:, :, None] == labels[:, None, :]``.

    Memory draws x n x n booleans per chunk of draws; for tests on small inputs only.
    """
    draws, _ = partition_draws(labels)
    flat = draws.reshape(-1, draws.shape[-1])
    total = np.zeros((flat.shape[1], flat.shape[1]))
    for row in flat:
        total += row[:, None] == row[None, :]
    return total / flat.shape[0]


def _number_of_observations(data, var_name) -> int:
    """n of the draws without loading them (the last axis of the partition variable)."""
    if isinstance(data, xr.Dataset) or compat.is_datatree(data) or compat.is_inference_data(data):
        posterior = data if isinstance(data, xr.Dataset) else compat.posterior_with_labels(data)
        name = var_name if var_name is not None else find_partition_variable(posterior)
        if name in posterior.data_vars:
            return int(posterior[name].shape[-1])
    try:
        shape = np.shape(data.values if isinstance(data, xr.DataArray) else data)
    except ValueError:  # ragged: partition_draws reports it
        return 0
    return int(shape[-1]) if shape else 0


class _SimilarityIndex:
    def __init__(self, data, var_name):
        draws, _ = partition_draws(data, var_name)
        flat = draws.reshape(-1, draws.shape[-1])
        self.n_draws, self.n = flat.shape
        if self.n_draws >= 2**31:
            raise ValueError("too many draws for int32 co-clustering counts")
        self.order, self.rank, self.offsets = _cluster_index(flat)
        self.labels_by_observation = np.ascontiguousarray(flat.T)

    def counts(self, start: int, stop: int, upper_only: bool = False) -> np.ndarray:
        counts = np.zeros((stop - start, self.n), dtype=np.int32)
        _similarity_counts(self.labels_by_observation, self.order, self.rank, self.offsets,
                           start, stop, counts, upper_only)
        return counts

    def block(self, start: int, stop: int, dtype, upper_only: bool = False) -> np.ndarray:
        out = self.counts(start, stop, upper_only).astype(dtype)
        out /= dtype(self.n_draws)
        return out


def _default_block_size(n: int) -> int:
    # about 64 MB of int32 counts per block
    return int(max(_TILE, min(n, (16 * 2**20) // max(n, 1))))


def _check_block_arguments(block_size, dtype):
    dtype = np.dtype(dtype)
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"dtype must be float32 or float64, got {dtype}")
    if block_size is not None and (int(block_size) != block_size or block_size < 1):
        raise ValueError(f"block_size must be a positive integer, got {block_size!r}")
    return block_size, dtype.type


def iter_similarity_blocks(
    data, var_name: str | None = None, *, block_size: int | None = None, dtype=np.float32
) -> Iterator[tuple[int, int, np.ndarray]]:
    """Iterate over row blocks of the posterior similarity matrix.

    Parameters
    ----------
    data : InferenceData, DataTree, Dataset or array_like of shape (chain, draw, n) or (draw, n)
    var_name : str, optional
        Partition variable (found automatically when omitted).
    block_size : int, optional
        Rows per block (default: about 64 MB of counts per block).
    dtype : {numpy.float32, numpy.float64}

    Yields
    ------
    start, stop : int
        The block holds rows ``start:stop``.
    block : ndarray of shape (stop - start, n)
        ``P[start:stop, :]``.
    """
    block_size, dtype = _check_block_arguments(block_size, dtype)
    index = _SimilarityIndex(data, var_name)
    size = block_size or _default_block_size(index.n)
    for start in range(0, index.n, size):
        stop = min(start + size, index.n)
        yield start, stop, index.block(start, stop, dtype)


def _check_dense_size(n: int, dtype, max_bytes) -> None:
    if max_bytes is None:
        return
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int | np.integer) or \
            max_bytes < 1:
        raise ValueError(f"max_bytes must be a positive integer or None, got {max_bytes!r}")
    needed = n * n * np.dtype(dtype).itemsize
    if needed > max_bytes:
        raise MemoryError(
            f"posterior_similarity_matrix refuses to allocate a dense {n} x {n} "
            f"{np.dtype(dtype).name} matrix ({needed / 2**30:.1f} GiB > max_bytes = "
            f"{max_bytes / 2**30:.2f} GiB). {_STREAMING_ALTERNATIVES} "
            "Pass max_bytes=None (or a larger limit) to allocate it anyway."
        )


def posterior_similarity_matrix(
    data, var_name: str | None = None, *, block_size: int | None = None, dtype=np.float32,
    max_bytes: int | None = SIMILARITY_MAX_BYTES,
) -> np.ndarray:
    """Posterior similarity (co-clustering) matrix ``P[i, j] = Pr(c_i = c_j | data)``.

    Parameters
    ----------
    data : InferenceData, DataTree, Dataset or array_like of shape (chain, draw, n) or (draw, n)
    var_name : str, optional
    block_size : int, optional
        Rows computed at a time (bounds the temporary int32 count memory).
    dtype : {numpy.float32, numpy.float64}
        float32 halves memory: n = 20,000 needs 1.6 GB.
    max_bytes : int or None
        Refuse (``MemoryError``, before reading the draws) when the dense matrix would take
        more than this many bytes; default :data:`SIMILARITY_MAX_BYTES` (2 GiB, i.e.
        n > 23,170 in float32).  None: no limit.

    Returns
    -------
    ndarray of shape (n, n), symmetric with unit diagonal.

    Raises
    ------
    MemoryError
        Above ``max_bytes``; the message names the streaming alternatives
        (:func:`iter_similarity_blocks`, :func:`~pymc_splitmerge.analysis.point_estimate`,
        :func:`~pymc_splitmerge.analysis.least_squares_draw`,
        :func:`~pymc_splitmerge.analysis.expected_loss`,
        :func:`~pymc_splitmerge.analysis.credible_ball`, :func:`most_uncertain_pairs`).
    """
    block_size, dtype = _check_block_arguments(block_size, dtype)
    _check_dense_size(_number_of_observations(data, var_name), dtype, max_bytes)
    index = _SimilarityIndex(data, var_name)
    size = block_size or _default_block_size(index.n)
    out = np.empty((index.n, index.n), dtype=dtype)
    for start in range(0, index.n, size):
        stop = min(start + size, index.n)
        # entries j >= i are computed; the rest is mirrored from rows already finished
        out[start:stop, start:] = index.block(start, stop, dtype, upper_only=True)[:, start:]
        out[start:stop, :start] = out[:start, start:stop].T
        square = out[start:stop, start:stop]
        for row in range(1, stop - start):
            square[row, :row] = square[:row, row]
    return out


def most_uncertain_pairs(
    data, num_pairs: int = 3, var_name: str | None = None, *, block_size: int | None = None,
    max_observations: int | None = 2000,
) -> tuple[np.ndarray, np.ndarray]:
    """Pairs of observations whose co-clustering probability is closest to 1/2.

    Pairs are chosen greedily by ``|P_ij - 1/2|`` among ``i < j``, skipping pairs that share an
    observation with an already chosen pair (so the indicators are not trivially dependent),
    falling back to overlapping pairs when needed.

    Parameters
    ----------
    max_observations : int or None, default 2000
        With more observations, the pairs are searched among ``max_observations`` evenly
        spaced observations only (the search over all pairs costs up to ``draws x n^2 / 2``:
        hours at n = 10^6).  None: all observations.

    Returns
    -------
    pairs : int64 array of shape (num_pairs, 2)
        Indices into all ``n`` observations.
    probabilities : float64 array of shape (num_pairs,)
    """
    if int(num_pairs) != num_pairs or num_pairs < 0:
        raise ValueError(f"num_pairs must be a non-negative integer, got {num_pairs!r}")
    if max_observations is not None:
        if int(max_observations) != max_observations or max_observations < 2:
            raise ValueError(
                f"max_observations must be an integer >= 2 or None, got {max_observations!r}")
        n_all = _number_of_observations(data, var_name)
        if n_all > max_observations:
            draws, _ = partition_draws(data, var_name)
            subset = np.unique(np.linspace(0, n_all - 1, int(max_observations)).astype(np.int64))
            pairs, probabilities = most_uncertain_pairs(
                draws[..., subset], num_pairs, block_size=block_size, max_observations=None)
            return subset[pairs], probabilities
    keep = max(64, 20 * num_pairs)
    candidate_scores = np.empty(0)
    candidate_pairs = np.empty((0, 2), dtype=np.int64)
    candidate_probabilities = np.empty(0, dtype=np.float32)
    n = None
    for start, stop, block in iter_similarity_blocks(
        data, var_name, block_size=block_size, dtype=np.float32
    ):
        n = block.shape[1]
        scores = np.abs(block - 0.5)
        columns = np.arange(n)[None, :]
        scores[columns <= np.arange(start, stop)[:, None]] = np.inf
        flat_scores = scores.ravel()
        finite = int(np.count_nonzero(np.isfinite(flat_scores)))
        take = min(keep, finite)
        if take == 0:
            continue
        best = np.argpartition(flat_scores, take - 1)[:take]
        rows, cols = np.divmod(best, n)
        candidate_scores = np.concatenate([candidate_scores, flat_scores[best]])
        candidate_probabilities = np.concatenate([candidate_probabilities, block[rows, cols]])
        candidate_pairs = np.concatenate(
            [candidate_pairs, np.stack([rows + start, cols], axis=1).astype(np.int64)]
        )
    order = np.lexsort((candidate_pairs[:, 1], candidate_pairs[:, 0], candidate_scores))
    chosen: list[int] = []
    used: set[int] = set()
    for index in order:
        i, j = candidate_pairs[index]
        if i not in used and j not in used:
            chosen.append(index)
            used.update((int(i), int(j)))
        if len(chosen) == num_pairs:
            break
    for index in order:
        if len(chosen) >= num_pairs:
            break
        if index not in chosen:
            chosen.append(index)
    if n is not None and len(chosen) < num_pairs:
        raise ValueError(f"cannot choose {num_pairs} pairs among {n} observations")
    chosen_array = np.asarray(chosen, dtype=np.int64)
    return candidate_pairs[chosen_array].astype(np.int64), candidate_probabilities[chosen_array].astype(np.float64)
