r"""Point estimates of the partition and credible balls (Wade & Ghahramani 2018; Dahl et al. 2022).

Expected loss from the draws
----------------------------
For a candidate :math:`\hat c` with cluster sizes :math:`m_k` and draws :math:`c^{(s)}` with
contingency tables :math:`n^{(s)}_{kl}`, both losses used here have the form

.. math:: \bar L(\hat c) = w_1 \sum_k f(m_k) + \text{const}
          - \frac{w_2}{S} \sum_s \sum_{k,l} f(n^{(s)}_{kl})

* variation of information: :math:`f(x) = x \log x`, :math:`w_1 = 1/n`, :math:`w_2 = 2/n`
  (Wade & Ghahramani 2018, eq. 7, averaged over draws: the *exact* posterior expected VI, not
  the lower bound of their eq. 11);
* Binder's loss with costs :math:`a` (pair together in the draw, apart in the estimate) and
  :math:`b` (apart in the draw, together in the estimate): :math:`f(x) = x(x-1)/2`,
  :math:`w_1 = b`, :math:`w_2 = a + b` (Binder 1978; Wade & Ghahramani 2018, eq. 4).

Moving one observation changes one :math:`m_k` and one cell per draw, so the change of expected
loss of placing observation :math:`i` in cluster :math:`k` costs :math:`O(S)` with the counts
``counts[k, s, l]`` kept up to date.

Search (SALSO; Dahl, Johnson & Müller 2022)
-------------------------------------------
Each run: (1) sequential allocation of the observations in a random order, each to the cluster
(or a new one) that minimises the expected loss of the allocated observations; (2) sweetening:
sweeps reassigning each observation to its best cluster until a sweep changes nothing;
(3) zealous updates: for each cluster in random order, remove all its observations and
reallocate them sequentially; keep the result only if the expected loss decreased (a final
sweetening follows any accepted update).  The best
of ``num_runs`` independent runs is returned.

References
----------
Wade, S. and Ghahramani, Z. (2018). Bayesian cluster analysis: point estimation and credible
balls. Bayesian Analysis 13(2), 559-626.
Dahl, D. B., Johnson, D. J. and Müller, P. (2022). Search algorithms and loss functions for
Bayesian clustering. J. Comput. Graph. Statist. 31(4), 1189-1201.
Dahl, D. B. (2006). Model-based clustering for expression data via a Dirichlet process mixture
model. In Bayesian Inference for Gene Expression and Proteomics (least-squares draw).
Binder, D. A. (1978). Bayesian cluster analysis. Biometrika 65(1), 31-38.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from pymc_splitmerge.analysis._labels import as_labels, canonicalize, partition_draws
from pymc_splitmerge.analysis.metrics import _distances_to_reference
from pymc_splitmerge.analysis.similarity import iter_similarity_blocks
from pymc_splitmerge.core.jit import njit

__all__ = [
    "CredibleBall",
    "PointEstimate",
    "credible_ball",
    "expected_loss",
    "least_squares_draw",
    "point_estimate",
]

_LOSSES = ("vi", "binder")


class PointEstimate(NamedTuple):
    """A point estimate of the partition.

    Attributes
    ----------
    labels : int64 array of shape (n,)
        Canonical labels.
    expected_loss : float
        Posterior expected loss (estimated from the draws) of ``labels``.
    loss : str
        ``"vi"`` (log base 2) or ``"binder"``.
    method : str
        ``"salso"`` or ``"least_squares_draw"``.
    n_clusters : int
    """

    labels: np.ndarray
    expected_loss: float
    loss: str
    method: str
    n_clusters: int


class CredibleBall(NamedTuple):
    """Credible ball around a point estimate (Wade & Ghahramani 2018, Section 3.2).

    Attributes
    ----------
    center : int64 array of shape (n,)
    radius : float
        Smallest epsilon such that the draws within distance epsilon of ``center`` carry
        posterior mass at least ``1 - alpha``.
    probability : float
        Fraction of draws inside the ball (>= 1 - alpha).
    distance : str
        ``"vi"`` or ``"binder"``.
    horizontal_bound : int64 array of shape (m, n)
        Distinct partitions in the ball at the largest distance from ``center``.
    vertical_upper_bound : int64 array of shape (m, n)
        Distinct partitions in the ball with the fewest clusters, farthest from ``center``.
    vertical_lower_bound : int64 array of shape (m, n)
        Distinct partitions in the ball with the most clusters, farthest from ``center``.
    distances : float64 array of shape (chain, draw)
        Distance of every draw to ``center``.
    """

    center: np.ndarray
    radius: float
    probability: float
    distance: str
    horizontal_bound: np.ndarray
    vertical_upper_bound: np.ndarray
    vertical_lower_bound: np.ndarray
    distances: np.ndarray

    def __repr__(self) -> str:
        """One line: the distance, radius, probability and sizes (not the partitions)."""
        def count(bound) -> int:
            return int(np.shape(bound)[0]) if np.ndim(bound) == 2 else 0

        center = np.asarray(self.center)
        n_clusters = int(center.max()) + 1 if center.size else 0
        return (f"CredibleBall(distance={self.distance!r}, radius={float(self.radius):.4g}, "
                f"probability={float(self.probability):.3f}, n={center.size}, "
                f"center_clusters={n_clusters}, horizontal_bound={count(self.horizontal_bound)}, "
                f"vertical_upper_bound={count(self.vertical_upper_bound)}, "
                f"vertical_lower_bound={count(self.vertical_lower_bound)} partitions, "
                f"draws={int(np.size(self.distances))})")


# ----------------------------------------------------------------------------------------------
# loss tables


def _loss_setup(loss: str, n: int, binder_costs) -> tuple[np.ndarray, float, float]:
    if loss not in _LOSSES:
        raise ValueError(f"loss must be one of {_LOSSES}, got {loss!r}")
    x = np.arange(n + 2, dtype=np.float64)
    if loss == "vi":
        table = np.where(x > 0, x * np.log(np.maximum(x, 1.0)), 0.0)
        return table, 1.0 / n, 2.0 / n
    cost_together, cost_apart = _check_costs(binder_costs)
    return x * (x - 1) / 2, cost_apart, cost_together + cost_apart


def _check_costs(binder_costs) -> tuple[float, float]:
    costs = np.asarray(binder_costs, dtype=np.float64)
    if costs.shape != (2,) or not np.all(np.isfinite(costs)) or np.any(costs <= 0):
        raise ValueError(
            f"binder_costs must be two positive numbers (a, b), got {binder_costs!r}"
        )
    return float(costs[0]), float(costs[1])


# ----------------------------------------------------------------------------------------------
# numba search


@njit(cache=True)
def _place_cost(counts, sizes, draws, i, k, table, weight_candidate, weight_cross):  # pragma: no cover
    # draws is (n, S): the labels of observation i over the draws are contiguous
    n_draws = draws.shape[1]
    row = draws[i]
    cross = 0.0
    for s in range(n_draws):
        c = counts[k, s, row[s]]
        cross += table[c + 1] - table[c]
    m = sizes[k]
    return weight_candidate * (table[m + 1] - table[m]) - weight_cross * cross / n_draws


@njit(cache=True)
def _add(counts, sizes, labels, draws, i, k):  # pragma: no cover
    row = draws[i]
    for s in range(draws.shape[1]):
        counts[k, s, row[s]] += 1
    sizes[k] += 1
    labels[i] = k


@njit(cache=True)
def _remove(counts, sizes, labels, draws, i):  # pragma: no cover
    k = labels[i]
    row = draws[i]
    for s in range(draws.shape[1]):
        counts[k, s, row[s]] -= 1
    sizes[k] -= 1
    labels[i] = -1


@njit(cache=True)
def _best_cluster(counts, sizes, draws, i, table, weight_candidate, weight_cross, current):  # pragma: no cover
    """Best slot for observation i (currently unallocated); ties keep ``current``."""
    capacity = sizes.shape[0]
    best = -1
    best_cost = np.inf
    empty_seen = False
    if current >= 0:
        best = current
        best_cost = _place_cost(counts, sizes, draws, i, current, table, weight_candidate, weight_cross)
        if sizes[current] == 0:
            empty_seen = True
    for k in range(capacity):
        if k == current:
            continue
        if sizes[k] == 0:
            if empty_seen:
                continue
            empty_seen = True
        cost = _place_cost(counts, sizes, draws, i, k, table, weight_candidate, weight_cross)
        if cost < best_cost - 1e-12:
            best_cost = cost
            best = k
    return best


@njit(cache=True)
def _total_loss(counts, sizes, table, weight_candidate, weight_cross):  # pragma: no cover
    """Expected loss up to the constant that depends on the draws only."""
    capacity, n_draws, n_labels = counts.shape
    candidate = 0.0
    cross = 0.0
    for k in range(capacity):
        if sizes[k] == 0:
            continue
        candidate += table[sizes[k]]
        for s in range(n_draws):
            for l in range(n_labels):
                cross += table[counts[k, s, l]]
    return weight_candidate * candidate - weight_cross * cross / n_draws


@njit(cache=True)
def _sweeten(counts, sizes, labels, draws, table, weight_candidate, weight_cross, max_sweeps):  # pragma: no cover
    n = labels.shape[0]
    for sweep in range(max_sweeps):
        changed = False
        for i in np.random.permutation(n):
            current = labels[i]
            _remove(counts, sizes, labels, draws, i)
            k = _best_cluster(counts, sizes, draws, i, table, weight_candidate, weight_cross, current)
            _add(counts, sizes, labels, draws, i, k)
            if k != current:
                changed = True
        if not changed:
            break


@njit(cache=True)
def _salso_run(draws, n_labels, capacity, table, weight_candidate, weight_cross, seed,
               max_sweeps, max_zealous):  # pragma: no cover
    np.random.seed(seed)
    n, n_draws = draws.shape
    counts = np.zeros((capacity, n_draws, n_labels), dtype=np.int32)
    sizes = np.zeros(capacity, dtype=np.int64)
    labels = -np.ones(n, dtype=np.int64)
    for i in np.random.permutation(n):
        k = _best_cluster(counts, sizes, draws, i, table, weight_candidate, weight_cross, -1)
        _add(counts, sizes, labels, draws, i, k)
    _sweeten(counts, sizes, labels, draws, table, weight_candidate, weight_cross, max_sweeps)
    loss = _total_loss(counts, sizes, table, weight_candidate, weight_cross)
    n_zealous = 0
    improved = False
    for target in np.random.permutation(capacity):
        if n_zealous >= max_zealous:
            break
        if sizes[target] == 0:
            continue
        n_zealous += 1
        saved_labels = labels.copy()
        saved_counts = counts.copy()
        saved_sizes = sizes.copy()
        members = np.nonzero(labels == target)[0]
        for i in members:
            _remove(counts, sizes, labels, draws, i)
        for i in members[np.random.permutation(members.size)]:
            k = _best_cluster(counts, sizes, draws, i, table, weight_candidate, weight_cross, -1)
            _add(counts, sizes, labels, draws, i, k)
        new_loss = _total_loss(counts, sizes, table, weight_candidate, weight_cross)
        if new_loss < loss - 1e-12:
            loss = new_loss
            improved = True
        else:
            labels[:] = saved_labels
            counts[:] = saved_counts
            sizes[:] = saved_sizes
    if improved:
        _sweeten(counts, sizes, labels, draws, table, weight_candidate, weight_cross, max_sweeps)
        loss = _total_loss(counts, sizes, table, weight_candidate, weight_cross)
    return labels, loss


# ----------------------------------------------------------------------------------------------
# public API


def _flat_draws(data, var_name):
    draws, _ = partition_draws(data, var_name)
    return draws, np.ascontiguousarray(draws.reshape(-1, draws.shape[-1]))


def _expected_loss_flat(flat, candidate, loss, binder_costs) -> float:
    vi, together_draw, together_both, together_candidate = _distances_to_reference(
        flat, candidate, int(candidate.max()) + 1
    )
    if loss == "vi":
        return float(np.mean(vi) / np.log(2.0))
    cost_together, cost_apart = _check_costs(binder_costs)
    values = cost_together * (together_draw - together_both) + cost_apart * (
        together_candidate - together_both
    )
    return float(np.mean(values))


def expected_loss(
    data, candidate, loss: str = "vi", var_name: str | None = None, *, binder_costs=(1.0, 1.0),
    similarity_matrix=None,
) -> float:
    """Posterior expected loss of a candidate partition, averaged over the draws.

    Parameters
    ----------
    data : trace or array_like of shape (draw, n) or (chain, draw, n)
    candidate : array_like of int, shape (n,)
    loss : {"vi", "binder", "vi_lower_bound"}
        ``"vi"``: exact mean variation of information (log base 2) over the draws;
        ``"binder"``: mean Binder loss with costs ``binder_costs = (a, b)`` (a: pair together in
        the draw but apart in the candidate, b: the reverse), counted over pairs ``i < j``;
        ``"vi_lower_bound"``: Wade & Ghahramani's (2018, eq. 11) Jensen lower bound of the
        expected VI, from the posterior similarity matrix.
    similarity_matrix : ndarray of shape (n, n), optional
        Used by ``"vi_lower_bound"`` (computed when omitted).

    Returns
    -------
    float
    """
    draws, flat = _flat_draws(data, var_name)
    labels = as_labels(candidate, "candidate", n=flat.shape[1])
    if loss == "vi_lower_bound":
        n = flat.shape[1]
        if similarity_matrix is None:
            row_sums = np.zeros(n)
            within = np.zeros(n)
            for start, stop, block in iter_similarity_blocks(draws, dtype=np.float64):
                row_sums[start:stop] = block.sum(1)
                same = labels[start:stop, None] == labels[None, :]
                within[start:stop] = np.where(same, block, 0.0).sum(1)
        else:
            matrix = np.asarray(similarity_matrix, dtype=np.float64)
            if matrix.shape != (n, n):
                raise ValueError(
                    f"similarity_matrix has shape {matrix.shape}, expected ({n}, {n})"
                )
            row_sums = matrix.sum(1)
            within = np.where(labels[:, None] == labels[None, :], matrix, 0.0).sum(1)
        sizes = np.bincount(labels)[labels]
        value = np.mean(np.log2(sizes) + np.log2(row_sums) - 2 * np.log2(within))
        return float(value)
    if loss not in _LOSSES:
        raise ValueError(f"loss must be one of ('vi', 'binder', 'vi_lower_bound'), got {loss!r}")
    return _expected_loss_flat(flat, labels, loss, binder_costs)


def point_estimate(
    data,
    var_name: str | None = None,
    *,
    loss: str = "vi",
    num_runs: int = 8,
    max_clusters: int | None = None,
    max_sweeps: int = 50,
    max_zealous_updates: int = 10,
    binder_costs=(1.0, 1.0),
    rng: np.random.Generator | int | None = None,
) -> PointEstimate:
    """Partition minimising the posterior expected VI or Binder loss (SALSO search).

    Parameters
    ----------
    data : trace or array_like of shape (draw, n) or (chain, draw, n)
    var_name : str, optional
    loss : {"vi", "binder"}
    num_runs : int
        Independent randomised runs; the best is returned.
    max_clusters : int, optional
        Largest number of clusters of the estimate (default ``min(n, 2 K_max + 10)`` with
        ``K_max`` the largest number of clusters among the draws).
    max_sweeps : int
        Sweetening sweeps per run at most.
    max_zealous_updates : int
        Zealous updates per run at most (0 disables them).
    binder_costs : (float, float)
        Costs (a, b) of Binder's loss.
    rng : numpy.random.Generator or int, optional

    Returns
    -------
    PointEstimate
    """
    _, flat = _flat_draws(data, var_name)
    n = flat.shape[1]
    if int(num_runs) != num_runs or num_runs < 1:
        raise ValueError(f"num_runs must be a positive integer, got {num_runs!r}")
    table, weight_candidate, weight_cross = _loss_setup(loss, n, binder_costs)
    n_labels = int(flat.max()) + 1
    if max_clusters is None:
        capacity = min(n, 2 * n_labels + 10)
    else:
        if int(max_clusters) != max_clusters or max_clusters < 1:
            raise ValueError(f"max_clusters must be a positive integer, got {max_clusters!r}")
        capacity = min(n, int(max_clusters))
    # "capacity" empty slots are needed only when below the cap; keep one free slot when possible
    rng = np.random.default_rng(rng)
    draws_by_observation = np.ascontiguousarray(flat.T)
    best_labels = None
    best_loss = np.inf
    for _ in range(int(num_runs)):
        seed = int(rng.integers(2**63 - 1))
        labels, loss_value = _salso_run(
            draws_by_observation, n_labels, capacity, table, weight_candidate, weight_cross, seed,
            int(max_sweeps), int(max_zealous_updates),
        )
        if loss_value < best_loss:
            best_loss = loss_value
            best_labels = labels
    labels = canonicalize(best_labels)
    value = _expected_loss_flat(flat, labels, loss, binder_costs)
    return PointEstimate(labels, value, loss, "salso", int(labels.max()) + 1)


def least_squares_draw(
    data, var_name: str | None = None, *, loss: str = "binder", max_candidates: int | None = 200
) -> PointEstimate:
    """Dahl's (2006) least-squares draw: the draw minimising ``sum_ij (1{c_i = c_j} - P_ij)^2``.

    Since ``sum_ij (A_ij - P_ij)^2 = sum_ij A_ij (1 - 2 P_ij) + const`` for a 0/1 matrix ``A``,
    it is the draw with the least posterior expected Binder loss (unit costs); that loss is
    computed exactly from contingency tables with all draws (``O(S n)`` per candidate) and
    reported.  ``loss="vi"`` returns the draw with the least expected VI instead.

    Parameters
    ----------
    data : trace or array_like of shape (draw, n) or (chain, draw, n)
    loss : {"binder", "vi"}
    max_candidates : int or None
        When there are more draws, only ``max_candidates`` evenly spaced draws are candidates
        (the expected loss still averages over all draws); None: every draw.

    Returns
    -------
    PointEstimate
        ``method`` is ``"least_squares_draw"``.
    """
    if loss not in _LOSSES:
        raise ValueError(f"loss must be one of {_LOSSES}, got {loss!r}")
    _, flat = _flat_draws(data, var_name)
    n_draws = flat.shape[0]
    if max_candidates is None or n_draws <= max_candidates:
        candidates = np.arange(n_draws)
    else:
        if int(max_candidates) != max_candidates or max_candidates < 1:
            raise ValueError(f"max_candidates must be a positive integer, got {max_candidates!r}")
        candidates = np.unique(np.linspace(0, n_draws - 1, int(max_candidates)).round().astype(int))
    seen: dict[bytes, float] = {}
    best_index, best_value = -1, np.inf
    for index in candidates:
        key = flat[index].tobytes()
        if key not in seen:
            seen[key] = _expected_loss_flat(flat, flat[index], loss, (1.0, 1.0))
        if seen[key] < best_value:
            best_index, best_value = int(index), seen[key]
    labels = flat[best_index].copy()
    return PointEstimate(labels, best_value, loss, "least_squares_draw", int(labels.max()) + 1)


def _distinct_rows(rows: np.ndarray) -> np.ndarray:
    """``np.unique(rows, axis=0)``: the distinct rows in lexicographic order.

    NumPy compares rows through a structured view with one field per column, about 1 s per
    row of 10^6 labels; here rows are deduplicated by their bytes (one hash each) and only
    the distinct ones are sorted, each comparison a vectorised search for the first
    differing column.
    """
    if rows.shape[0] == 0:
        return rows
    seen = {}
    for row in rows:
        seen.setdefault(row.tobytes(), row)
    unique = list(seen.values())

    def compare(a, b):
        differ = np.flatnonzero(a != b)
        return 0 if differ.size == 0 else (-1 if a[differ[0]] < b[differ[0]] else 1)

    unique.sort(key=functools.cmp_to_key(compare))
    return np.array(unique, dtype=rows.dtype).reshape(len(unique), rows.shape[1])


def credible_ball(
    data,
    center=None,
    var_name: str | None = None,
    *,
    alpha: float = 0.05,
    distance: str = "vi",
    rng: np.random.Generator | int | None = None,
) -> CredibleBall:
    """Credible ball of posterior mass ``>= 1 - alpha`` around a point estimate.

    Parameters
    ----------
    data : trace or array_like of shape (draw, n) or (chain, draw, n)
    center : array_like of int of shape (n,) or PointEstimate, optional
        Default: the VI point estimate (:func:`point_estimate`).
    alpha : float in (0, 1)
    distance : {"vi", "binder"}
        VI in log base 2; Binder as the unit-cost count of discordant pairs.

    Returns
    -------
    CredibleBall

    References
    ----------
    Wade & Ghahramani (2018), Section 3.2 (credible ball, horizontal and vertical bounds).
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    if distance not in _LOSSES:
        raise ValueError(f"distance must be 'vi' or 'binder', got {distance!r}")
    draws, flat = _flat_draws(data, var_name)
    if center is None:
        center = point_estimate(draws, loss=distance, rng=rng).labels
    elif isinstance(center, PointEstimate):
        center = center.labels
    center = as_labels(center, "center", n=flat.shape[1])
    vi, together_draw, together_both, together_center = _distances_to_reference(
        flat, center, int(center.max()) + 1
    )
    if distance == "vi":
        distances = vi / np.log(2.0)
    else:
        distances = together_draw + together_center - 2.0 * together_both
    sorted_distances = np.sort(distances)
    needed = int(np.ceil((1.0 - alpha) * distances.size - 1e-9))
    radius = float(sorted_distances[max(needed, 1) - 1])
    inside = distances <= radius + 1e-12
    n_clusters = flat.max(axis=1) + 1

    def distinct(mask):
        return _distinct_rows(flat[mask])

    max_distance = distances[inside].max()
    horizontal = distinct(inside & (distances >= max_distance - 1e-12))
    fewest = n_clusters[inside].min()
    mask = inside & (n_clusters == fewest)
    upper = distinct(mask & (distances >= distances[mask].max() - 1e-12))
    most = n_clusters[inside].max()
    mask = inside & (n_clusters == most)
    lower = distinct(mask & (distances >= distances[mask].max() - 1e-12))
    return CredibleBall(
        center, radius, float(inside.mean()), distance, horizontal, upper, lower,
        distances.reshape(draws.shape[:2]),
    )
