r"""Cluster-anchor SAMS whose split is refined by restricted Gibbs scans (Jain & Neal 2004).

A SAMS split (Dahl 2003; :mod:`pymc_splitmerge.kernels.sams`) allocates the points of the
anchors' cluster one at a time, the first ones against clusters that hold only an anchor:
on overlapping clusters the early allocations are nearly coin flips and the proposed split
is often poor.  Here the sequential allocation is only the *launch state* of a restricted
Gibbs sampler (Jain & Neal 2004, §3 and §4, with Dahl's allocation as the launch):

1. anchors :math:`i, j` are drawn through the clusters exactly as
   ``build_sams_move(cluster_anchors=True)`` draws them (same kind, cluster and anchor
   probabilities, same anchor-law ratio in the acceptance ratio); :math:`S` are the other
   points of their clusters, :math:`\sigma` a uniformly random order of :math:`S`;
2. the launch :math:`L`: a *sampled* sequential allocation of :math:`S` along
   :math:`\sigma` to the clusters seeded by :math:`i` and :math:`j` — sampled for a merge
   too, so its law depends on :math:`(i, j, S, \sigma)` only, which a split state and its
   merged state share; then ``n_scans - 1`` restricted Gibbs scans of :math:`S` (each
   point, in the order :math:`\sigma`, taken out of its side and put back with probability
   :math:`\propto \frac{W(m+1)}{W(m)} p(x_k \mid \text{side})`, Jain & Neal eq. 18 for the
   DP); these are not scored;
3. the final restricted Gibbs scan :math:`T(\cdot \mid L)`: for a **split** it is sampled,
   its probability :math:`T(c^{split} \mid L)` the product of the chosen conditionals, and the
   log acceptance ratio is :math:`\log\pi(c^{split}) - \log\pi(c) - \log T(c^{split}\mid L)`
   (Jain & Neal eq. 13 with eq. 15); for a **merge** the scan is *forced* to the current
   split, giving :math:`T(c \mid L)`, and the ratio is
   :math:`\log\pi(c^{merge}) - \log\pi(c) + \log T(c \mid L)` (eq. 14 with eq. 16).

Given :math:`(i, j, \sigma)` and the launch (an auxiliary variable with the same law in
both directions) the split and the merge form a Metropolis–Hastings pair, so the update
leaves the posterior invariant (tested by enumeration; the negative control launches a
merge from the current split, a state-dependent launch, and is rejected).  A proposal costs
about ``1 + 1.5 n_scans`` times a SAMS proposal (one removal, two predictive densities and one
addition per point and scan).  Merges are settled early where
``kernels.sams.merge_surely_rejected`` can (its bound needs only :math:`T \le 1`).

References
----------
.. [1] Jain, S. and Neal, R. M. (2004). A split-merge Markov chain Monte Carlo procedure
   for the Dirichlet process mixture model. JCGS 13(1), 158-182, §3-4, eqs. 13-18.
.. [2] Dahl, D. B. (2003). An improved merge-split sampler for conjugate Dirichlet process
   mixture models. Technical Report 1086, University of Wisconsin–Madison.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from pymc_splitmerge.components import dispatch
from pymc_splitmerge.kernels.anchors import uniform_anchors
from pymc_splitmerge.kernels.options import positive_integer
from pymc_splitmerge.kernels.rng import numba_seed_from
from pymc_splitmerge.kernels.sams import (
    _index_members,
    _indexed_members,
    _log_split_type_probability,
    _merge_surely_rejected_members,
    merged_statistics,
    sequential_allocation,
)
from pymc_splitmerge.kernels.splitmerge_common import (
    MOVE_MERGE,
    MOVE_NONE,
    MOVE_SPLIT,
    SplitMergeInfo,
    anchor_i_side,
    apply_proposal,
    log_split_merge_ratio_given_merged,
    metropolis_accepts,
    two_way_log_probabilities,
)
from pymc_splitmerge.kernels.state import Model, Partition, PriorTables, make_model

__all__ = ["build_refined_sams_move", "restricted_gibbs_scan"]


@numba.njit(cache=True, inline="always")
def restricted_gibbs_scan(family_id, params, x, order, sides, forced, target, uniforms,
                          stats_a, stats_b, sizes_ab, log_w_table):
    """One restricted Gibbs scan of ``order`` between the two anchors' sides, in place.

    Each point ``order[t]`` (now on side ``sides[t]``) is taken out of its side's scratch
    statistics and put on side 0 (A) or 1 (B) with the probabilities of
    ``splitmerge_common.two_way_log_probabilities`` given all the other points (the anchors
    stay: no side empties).  Sampled from ``uniforms`` unless ``forced``, then put on
    ``target[t]``.  Updates ``sides``, ``stats_a``, ``stats_b`` and ``sizes_ab`` (the two
    sides' sizes); returns the log probability of the scan's result given its start.
    """
    log_q = 0.0
    for t in range(order.shape[0]):
        k = order[t]
        if sides[t] == 0:
            dispatch.remove_point(family_id, params, stats_a, x[k])
            sizes_ab[0] -= 1
        else:
            dispatch.remove_point(family_id, params, stats_b, x[k])
            sizes_ab[1] -= 1
        log_pa, log_pb = two_way_log_probabilities(family_id, params, x[k], stats_a,
                                                   sizes_ab[0], stats_b, sizes_ab[1],
                                                   log_w_table)
        if forced:
            side = target[t]
        else:
            side = 0 if uniforms[t] < math.exp(log_pa) else 1
        sides[t] = side
        if side == 0:
            log_q += log_pa
            dispatch.add_point(family_id, params, stats_a, x[k])
            sizes_ab[0] += 1
        else:
            log_q += log_pb
            dispatch.add_point(family_id, params, stats_b, x[k])
            sizes_ab[1] += 1
    return log_q


@numba.njit(cache=True, inline="always")
def _refined_proposal_given_members(model, partition, tables, anchor_i, anchor_j, members,
                                    current_sides, uniforms, n_scans, launch_from_current):
    """The refined split / merge proposal for given anchors (module docstring).

    ``uniforms`` (``>= (2 + n_scans) |S|``): the order, the launch allocation, then one
    block per scan (the last unused by a merge).  ``launch_from_current`` (the negative
    control only) launches a merge from the current split instead of a sampled allocation.
    Returns ``(move, log_accept_ratio without the anchor-law ratio, moving_points,
    target_slot)`` as ``kernels.sams.sams_proposal_given_members``.
    """
    family_id, params, x = model
    labels = partition.labels
    empty_row = partition.empty_row
    n_clusters = partition.cluster_count[0]
    log_v_table, log_w_table = tables
    size_s = members.shape[0]
    permutation = np.argsort(uniforms[:size_s])
    order = members[permutation]
    target = current_sides[permutation]
    is_split = labels[anchor_i] == labels[anchor_j]
    sides = np.empty(size_s, dtype=np.int64)
    forced_launch = launch_from_current and not is_split
    if forced_launch:
        sides[:] = target
    _, stats_a, stats_b, size_a, size_b = sequential_allocation(
        family_id, params, x, anchor_i, anchor_j, order, forced_launch, sides,
        uniforms[size_s:2 * size_s], log_w_table, empty_row)
    sizes_ab = np.empty(2, dtype=np.int64)
    sizes_ab[0] = size_a
    sizes_ab[1] = size_b
    log_q = 0.0
    for scan in range(n_scans):
        last = scan == n_scans - 1
        block = uniforms[(2 + scan) * size_s:(3 + scan) * size_s]
        log_q = restricted_gibbs_scan(family_id, params, x, order, sides,
                                      last and not is_split, target, block, stats_a, stats_b,
                                      sizes_ab, log_w_table)
    if is_split:  # the merged cluster is the current one: its statistics row as it is
        merged = partition.stats[labels[anchor_i]]
        n_clusters_merged = n_clusters
    else:
        merged = merged_statistics(model, partition, anchor_i, anchor_j, members, current_sides)
        n_clusters_merged = n_clusters - 1
    log_ratio = log_split_merge_ratio_given_merged(
        family_id, params, stats_a, sizes_ab[0], stats_b, sizes_ab[1], merged, log_v_table,
        log_w_table, n_clusters_merged)
    moving = anchor_i_side(anchor_i, order, sides, sizes_ab[0])
    if is_split:
        return MOVE_SPLIT, log_ratio - log_q, moving, -1
    return MOVE_MERGE, log_q - log_ratio, moving, labels[anchor_j]


@numba.njit(cache=True, inline="always")
def _refined_cluster_update(model, partition, tables, uniforms, pair, index, n_scans,
                            launch_from_current):
    """One cluster-anchor update with the refined proposal; the anchor law, its ratio, the
    early merge rejection and the order of the uniforms are those of
    ``kernels.sams._cluster_sams_update`` (then ``(2 + n_scans) |S|`` proposal uniforms)."""
    labels, sizes, active = partition.labels, partition.sizes, partition.active
    order, start, cursor = index
    k = partition.cluster_count[0]
    split_type = k == 1 or np.random.random() < 0.5
    if split_type:
        slot = active[int(np.random.random() * k)]
        m = sizes[slot]
        uniforms[0] = np.random.random()
        uniforms[1] = np.random.random()
        if m < 2:
            return MOVE_NONE, False, np.nan
        uniform_anchors(m, uniforms[:2], pair)
        anchor_i = order[start[slot] + pair[0]]
        anchor_j = order[start[slot] + pair[1]]
        size_a = 0
        size_b = 0
    else:
        uniforms[0] = np.random.random()
        uniforms[1] = np.random.random()
        uniform_anchors(k, uniforms[:2], pair)
        slot_a = active[pair[0]]
        slot_b = active[pair[1]]
        size_a = sizes[slot_a]
        size_b = sizes[slot_b]
        anchor_i = order[start[slot_a] + int(np.random.random() * size_a)]
        anchor_j = order[start[slot_b] + int(np.random.random() * size_b)]
        m = size_a + size_b
    metropolis_uniform = np.random.random()
    members, current_sides = _indexed_members(labels, sizes, order, start, anchor_i, anchor_j)
    log_offset = 0.0
    if not split_type:
        log_offset = (_log_split_type_probability(k - 1) + math.log(2.0)
                      + math.log(k) + math.log(size_a) + math.log(size_b)
                      - math.log(m) - math.log(m - 1))
        if _merge_surely_rejected_members(model, partition, tables, anchor_i, anchor_j,
                                          members, current_sides, log_offset,
                                          metropolis_uniform):
            return MOVE_MERGE, False, np.nan
    size_s = m - 2
    for t in range((2 + n_scans) * size_s):
        uniforms[t] = np.random.random()
    move, log_ratio, moving, target = _refined_proposal_given_members(
        model, partition, tables, anchor_i, anchor_j, members, current_sides, uniforms,
        n_scans, launch_from_current)
    if split_type:
        size_a = moving.shape[0]
        size_b = m - size_a
        log_offset = (-math.log(2.0) - _log_split_type_probability(k)
                      + math.log(m) + math.log(m - 1) - math.log(k + 1)
                      - math.log(size_a) - math.log(size_b))
    log_ratio += log_offset
    if not metropolis_accepts(log_ratio, metropolis_uniform):
        return move, False, log_ratio
    apply_proposal(model, partition, moving, target)
    _index_members(labels, sizes, order, start, cursor)
    return move, True, log_ratio


@numba.njit(cache=True)
def _refined_cluster_move_fields(family_id, params, x, labels, sizes, stats, empty_row, active,
                                 where, cluster_count, log_v, log_w, seed, n_updates, n_scans,
                                 launch_from_current):
    """``n_updates`` refined cluster-anchor updates in one compiled call from loose fields
    (as ``kernels.sams._cluster_sams_move_fields``), numba's generator seeded with ``seed``.
    Returns ``(n_accepted, move, accepted, log_accept_ratio)`` (the last update's)."""
    model = make_model(family_id, params, x)
    partition = Partition(labels, sizes, stats, empty_row, active, where, cluster_count)
    tables = PriorTables(log_v, log_w)
    np.random.seed(seed)
    n = labels.shape[0]
    capacity = sizes.shape[0]
    index = (np.empty(n, dtype=np.int64), np.empty(capacity, dtype=np.int64),
             np.empty(capacity, dtype=np.int64))
    _index_members(labels, sizes, index[0], index[1], index[2])
    uniforms = np.empty((2 + n_scans) * n + 2, dtype=np.float64)
    pair = np.empty(2, dtype=np.int64)
    n_accepted = 0
    move, accepted, log_ratio = MOVE_NONE, False, np.nan
    for _ in range(n_updates):
        move, accepted, log_ratio = _refined_cluster_update(
            model, partition, tables, uniforms, pair, index, n_scans, launch_from_current)
        if accepted:
            n_accepted += 1
    return n_accepted, move, accepted, log_ratio


class _RefinedClusterSAMSMove:
    """The built move (a class: copied with its step)."""

    def __init__(self, n_updates: int, n_scans: int, launch_from_current: bool = False):
        self.n_updates = n_updates
        self.n_scans = n_scans
        self.launch_from_current = launch_from_current

    def __call__(self, model: Model, partition: Partition, tables: PriorTables,
                 rng: np.random.Generator) -> SplitMergeInfo:
        if model.x.shape[0] < 2:
            return SplitMergeInfo(MOVE_NONE, False, float("nan"))
        _, move, accepted, log_ratio = _refined_cluster_move_fields(
            *model, *partition, *tables, numba_seed_from(rng), self.n_updates, self.n_scans,
            self.launch_from_current)
        return SplitMergeInfo(int(move), bool(accepted), float(log_ratio))


def build_refined_sams_move(n_updates: int = 1, n_scans: int = 1):
    """Validate the options once; return the refined cluster-anchor SAMS move.

    Parameters
    ----------
    n_updates : int, default 1
        Updates per call, all in one compiled call.
    n_scans : int, default 1
        Restricted Gibbs scans after the sequential-allocation launch; the last is scored.

    Returns
    -------
    callable
        ``move(model, partition, tables, rng) -> SplitMergeInfo`` (of the last update),
        numba's generator seeded from ``rng`` by one draw per call.
    """
    return _RefinedClusterSAMSMove(positive_integer(n_updates, "n_updates"),
                                   positive_integer(n_scans, "n_scans"))
