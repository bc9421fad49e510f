r"""Sequentially-Allocated Merge-Split (SAMS) kernel (Dahl 2003).

One update:

1. draw two distinct anchors :math:`i, j` (anchor proposal, state-independent);
   let :math:`S` be the other members of their clusters and draw a uniformly random
   order :math:`\sigma` of :math:`S`;
2. if :math:`c_i = c_j`, propose a **split**: seed :math:`A = \{i\}`, :math:`B = \{j\}`
   and allocate the points of :math:`S` one at a time in the order :math:`\sigma`,
   point :math:`k` joining :math:`A` with probability

   .. math::

       P(k \to A) = \frac{\frac{W(m_A+1)}{W(m_A)} p(x_k \mid A)}
                         {\frac{W(m_A+1)}{W(m_A)} p(x_k \mid A)
                          + \frac{W(m_B+1)}{W(m_B)} p(x_k \mid B)},

   (:math:`m_A, m_B` the current sizes; for the DP this is Dahl's
   :math:`m_A\,p(x_k\mid A)`), so the proposal probability
   :math:`q(c^{split} \mid c)` is the product of the chosen allocation probabilities;
   accept with log ratio
   :math:`\log\pi(c^{split}) - \log\pi(c) - \log q(c^{split} \mid c)`;
3. otherwise propose the **merge** of the two clusters; its reverse move is a split
   along the *same* order :math:`\sigma`, whose probability of producing the current
   pair of clusters is computed by **forcing** every allocation to its current side:
   log ratio :math:`\log\pi(c^{merge}) - \log\pi(c) + \log q(c \mid c^{merge})`.

The kernel is built once by :func:`build_sams_move` (options validated there) and runs on
the structures of ``kernels.state``; ``sams_move`` is its convenience form on a
``PartitionState``.

Both directions share the law of :math:`(i, j, \sigma)`, which does not depend on the
state, so for each fixed :math:`(i, j, \sigma)` the pair (split, merge) is an ordinary
Metropolis–Hastings pair (Tierney 1994).  ``build_sams_move(cluster_anchors=True)`` draws
the anchors through the clusters instead (a law that depends on the state, whose
reverse/forward ratio then enters the acceptance ratio; :func:`_sams_updates`).  Sampling a
fresh split instead of forcing the current one for the reverse probability (as the R package
``sams`` does) is *not* invariant — the test suite checks that this variant is rejected.

References
----------
.. [1] Dahl, D. B. (2003). An improved merge-split sampler for conjugate Dirichlet process
   mixture models. Technical Report 1086, University of Wisconsin–Madison.
.. [2] Bouchard-Côté, A., Doucet, A. and Roth, A. (2017). Particle Gibbs split-merge
   sampling for Bayesian inference in mixture models. JMLR 18(28), §1.
.. [3] Jain, S. and Neal, R. M. (2004). A split-merge Markov chain Monte Carlo procedure
   for the Dirichlet process mixture model. JCGS 13(1), eqs. 6–13.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from pymc_splitmerge.components import dispatch
from pymc_splitmerge.core.jit import njit
from pymc_splitmerge.kernels.anchors import AnchorProposal, uniform_anchors
from pymc_splitmerge.kernels.options import positive_integer
from pymc_splitmerge.kernels.rng import numba_seed_from, order_of_uniforms
from pymc_splitmerge.kernels.splitmerge_common import (
    MOVE_MERGE,
    MOVE_NONE,
    MOVE_SPLIT,
    NO_PROPOSAL,
    ProposeThenAccept,
    SplitMergeInfo,
    SplitMergeProposal,
    anchor_clusters_members,
    anchor_i_side,
    apply_proposal_fields,
    log_split_merge_ratio_given_merged,
    metropolis_accepts,
    two_way_log_probabilities,
)
from pymc_splitmerge.kernels.state import Model, Partition, PriorTables, make_model, prior_tables
from pymc_splitmerge.priors.seating import log_split_weight

__all__ = [
    "build_sams_move",
    "merge_surely_rejected",
    "merged_statistics",
    "sams_move",
    "sams_proposal_core",
    "sams_proposal_given_members",
    "sequential_allocation",
]

@njit(cache=True, inline="always")
def sequential_allocation(family_id, params, x, anchor_i, anchor_j, order, forced, sides,
                          uniforms, log_w_table, empty_row):
    """Sequential allocation of ``order`` to the clusters seeded by the two anchors.

    Parameters
    ----------
    family_id : int
    params : ndarray of float64
    x : ndarray of float64, shape (n, data_dim)
    anchor_i, anchor_j : int
        Seeds of cluster A (side 0) and B (side 1).
    order : ndarray of int64, shape (|S|,)
        Points of :math:`S` in allocation order.
    forced : bool
        If true, ``sides`` is read (the allocation to score); otherwise it is written.
    sides : ndarray of int64, shape (|S|,)
        ``sides[t]`` is 0 if ``order[t]`` goes to A, 1 for B.
    uniforms : ndarray of float64, shape (|S|,)
        Uniform(0, 1) draws for the sampled allocation (unused when forced).
    log_w_table : ndarray of float64, shape (n + 2,)
    empty_row : ndarray of float64, shape (stat_dim,)

    Returns
    -------
    log_proposal : float
        Log probability of the allocation ``sides``.
    stats_a, stats_b : ndarray of float64, shape (stat_dim,)
        Scratch statistics rows of A and B.
    size_a, size_b : int
    """
    stats_a = empty_row.copy()
    stats_b = empty_row.copy()
    dispatch.add_point(family_id, params, stats_a, x[anchor_i])
    dispatch.add_point(family_id, params, stats_b, x[anchor_j])
    size_a = 1
    size_b = 1
    log_proposal = 0.0
    for t in range(order.shape[0]):
        k = order[t]
        log_pa, log_pb = two_way_log_probabilities(family_id, params, x[k], stats_a, size_a,
                                                   stats_b, size_b, log_w_table)
        if not forced:
            sides[t] = 0 if uniforms[t] < math.exp(log_pa) else 1
        if sides[t] == 0:
            log_proposal += log_pa
            dispatch.add_point(family_id, params, stats_a, x[k])
            size_a += 1
        else:
            log_proposal += log_pb
            dispatch.add_point(family_id, params, stats_b, x[k])
            size_b += 1
    return log_proposal, stats_a, stats_b, size_a, size_b


@njit(cache=True, inline="always")
def sams_proposal_core(model, partition, tables, anchor_i, anchor_j, uniforms):
    """The whole SAMS proposal for given anchors, in one compiled call.

    The log posterior ratio of split and merged states
    (``splitmerge_common.log_split_merge_ratio_given_merged``) takes the merged cluster's
    statistics as they are for a split (the current cluster's row) and from
    :func:`merged_statistics` for a merge; the two candidate clusters' rows come from the
    sequential allocation.

    Parameters
    ----------
    model : Model
    partition : Partition
        The current state (read only).
    tables : PriorTables
    anchor_i, anchor_j : int
    uniforms : ndarray of float64, shape (>= 2 |S|,)
        ``uniforms[:|S|]`` order :math:`S` (argsort: a uniformly random permutation),
        ``uniforms[|S|:2|S|]`` drive the sampled allocation.

    Returns
    -------
    move : int
    log_accept_ratio : float
    moving_points : ndarray of int64
    target_slot : int
    """
    members, current_sides = anchor_clusters_members(partition.labels, anchor_i, anchor_j)
    return sams_proposal_given_members(
        model, partition, tables, anchor_i, anchor_j, members, current_sides, uniforms,
        _merged_cluster_statistics(model, partition, anchor_i, anchor_j, members,
                                   current_sides))


@njit(cache=True, inline="always")
def sams_proposal_given_members(model, partition, tables, anchor_i, anchor_j, members,
                                current_sides, uniforms, merged):
    """:func:`sams_proposal_core` given the anchors' clusters' other points ``members`` (in
    increasing order) and their ``current_sides`` (0: anchor ``i``'s cluster, 1: anchor
    ``j``'s), as ``splitmerge_common.anchor_clusters_members`` returns them (found here
    from a member index instead of a scan of all labels by the cluster-anchor updates), and
    the merged cluster's statistics ``merged`` (:func:`_merged_cluster_statistics`: the
    current row for a split, :func:`merged_statistics` for a merge, which the cluster-anchor
    updates have from the early rejection)."""
    family_id, params, x = model
    log_v, log_w = tables
    return _sams_proposal_given_members_fields(
        family_id, params, x, partition.labels, partition.empty_row, partition.cluster_count,
        log_v, log_w, anchor_i, anchor_j, members, current_sides, uniforms, merged)


@njit(cache=True, inline="always")
def _sams_proposal_given_members_fields(family_id, params, x, labels, empty_row, cluster_count,
                                        log_v, log_w, anchor_i, anchor_j, members,
                                        current_sides, uniforms, merged):
    """:func:`sams_proposal_given_members` on the structures' fields (the one body; the
    cluster-anchor updates call it with their loose arguments: numba increments and
    decrements the reference count of every array of a tuple at each copy of it, that is,
    at every argument of an inlined function)."""
    n_clusters = cluster_count[0]
    size_s = members.shape[0]
    # the argsort of the uniforms (any exact sort gives the same order of distinct values):
    # a bucket sort, which compiles in a fraction of the time of numba's argsort
    permutation = order_of_uniforms(uniforms, size_s)
    is_split = labels[anchor_i] == labels[anchor_j]
    # one call of the allocation for both directions (``forced`` a run-time flag: one compiled
    # copy of it); a merge's reverse split is FORCED to the current clusters along the same
    # order.  ``members[permutation]`` written out: numba 0.68 (not 0.65) compiles an array index by
    # an array through ``np.broadcast_shapes`` (0.4 s of a first run)
    order = np.empty(size_s, dtype=np.int64)
    sides = np.empty(size_s, dtype=np.int64)
    for t in range(size_s):
        order[t] = members[permutation[t]]
        if not is_split:
            sides[t] = current_sides[permutation[t]]
    allocation_uniforms = uniforms[size_s:2 * size_s] if is_split else uniforms
    log_q, stats_a, stats_b, size_a, size_b = sequential_allocation(
        family_id, params, x, anchor_i, anchor_j, order, not is_split, sides,
        allocation_uniforms, log_w, empty_row)
    n_clusters_merged = n_clusters if is_split else n_clusters - 1
    log_ratio = log_split_merge_ratio_given_merged(
        family_id, params, stats_a, size_a, stats_b, size_b, merged, log_v, log_w,
        n_clusters_merged)
    # one return (each return of an inlined function is an exit where numba releases every
    # array it holds)
    move, log_accept_ratio, target_slot = MOVE_SPLIT, log_ratio - log_q, -1
    if not is_split:
        move, log_accept_ratio, target_slot = MOVE_MERGE, log_q - log_ratio, labels[anchor_j]
    return move, log_accept_ratio, anchor_i_side(anchor_i, order, sides, size_a), target_slot


@njit(cache=True, inline="always")
def merged_statistics(model, partition, anchor_i, anchor_j, members, sides):
    """Statistics row of the union of the anchors' two (different) clusters: a copy of the
    larger cluster's row (anchor ``i``'s on a tie) plus the smaller cluster's points, its
    anchor first, then its ``members`` in order.

    ``members`` and ``sides`` as ``splitmerge_common.anchor_clusters_members`` returns them.
    Costs the smaller cluster's points only (rebuilding from all points cost both); the
    merge proposal and its early rejection (:func:`merge_surely_rejected`) use this one
    function, so both see the same numbers.
    """
    family_id, params, x = model
    return _merged_statistics_fields(family_id, params, x, partition.labels, partition.sizes,
                                     partition.stats, anchor_i, anchor_j, members, sides)


@njit(cache=True, inline="always")
def _merged_statistics_fields(family_id, params, x, labels, sizes, stats, anchor_i, anchor_j,
                              members, sides):
    """:func:`merged_statistics` on the structures' fields (the one body; see
    :func:`_sams_proposal_given_members_fields`)."""
    slot_i = labels[anchor_i]
    slot_j = labels[anchor_j]
    if sizes[slot_j] > sizes[slot_i]:
        kept, added_anchor, added_side = slot_j, anchor_i, 0
    else:
        kept, added_anchor, added_side = slot_i, anchor_j, 1
    merged = stats[kept].copy()
    dispatch.add_point(family_id, params, merged, x[added_anchor])
    for t in range(members.shape[0]):
        if sides[t] == added_side:
            dispatch.add_point(family_id, params, merged, x[members[t]])
    return merged


@njit(cache=True, inline="always")
def _merged_cluster_statistics(model, partition, anchor_i, anchor_j, members, sides):
    """Statistics of the merged cluster of a SAMS proposal: for a split (the anchors in one
    cluster) that cluster's row as it is, for a merge :func:`merged_statistics`."""
    labels = partition.labels
    if labels[anchor_i] == labels[anchor_j]:
        merged = partition.stats[labels[anchor_i]]
    else:
        merged = merged_statistics(model, partition, anchor_i, anchor_j, members, sides)
    return merged


@njit(cache=True)
def _sams_proposal_fields(family_id, params, x, labels, sizes, stats, empty_row, active, where,
                          cluster_count, log_v, log_w, anchors, uniforms):
    """:func:`sams_proposal_core` with the structures' fields as arguments (Python entry).

    numba unboxes named tuples of arrays ~4 us slower than plain arguments, so the Python
    side hands the fields over loose and the structures are rebuilt here.  ``anchors[0] < 0``
    draws the two anchors here with ``kernels.anchors.uniform_anchors`` from
    ``uniforms[-2:]`` (what the Python side did before, in a numba call of its own).
    """
    if anchors[0] < 0:
        uniform_anchors(x.shape[0], uniforms[uniforms.shape[0] - 2:], anchors)
    return sams_proposal_core(
        make_model(family_id, params, x),
        Partition(labels, sizes, stats, empty_row, active, where, cluster_count),
        PriorTables(log_v, log_w), anchors[0], anchors[1], uniforms)


def _sams_proposal(model, partition, tables, rng, anchor_proposal):
    n = model.x.shape[0]
    if n < 2:
        return NO_PROPOSAL
    uniforms = rng.random(2 * n)
    if anchor_proposal is None or anchor_proposal.kind == "uniform":
        anchors = np.full(2, -1, dtype=np.int64)  # uniform_anchors(uniforms[-2:]) in the kernel
    else:
        anchors = np.array(anchor_proposal.sample(n, rng), dtype=np.int64)
    move, log_ratio, moving, target = _sams_proposal_fields(
        *model, *partition, *tables, anchors, uniforms)
    return SplitMergeProposal(move, moving, target, log_ratio)


def _check_options(anchor_proposal) -> None:
    if anchor_proposal is not None and not isinstance(anchor_proposal, AnchorProposal):
        raise TypeError("anchor_proposal must be a kernels.anchors.AnchorProposal or None; got "
                        f"{type(anchor_proposal).__name__}")
    if anchor_proposal is not None and anchor_proposal.n_anchors != 2:
        raise ValueError(f"SAMS needs n_anchors=2; the anchor proposal has "
                         f"{anchor_proposal.n_anchors}")


def build_sams_move(anchor_proposal: AnchorProposal | None = None, *,
                    cluster_anchors: bool = False, n_updates: int = 1
                    ) -> Callable[[Model, Partition, PriorTables, np.random.Generator],
                                  SplitMergeInfo]:
    """Validate the options once; return ``move(model, partition, tables, rng)``.

    Parameters
    ----------
    anchor_proposal : AnchorProposal, optional
        ``kernels.anchors.AnchorProposal`` with ``n_anchors=2`` (its law never depends on
        the current partition, so it does not enter the ratio; the caller adapts it during
        tuning only).  Default (or a ``"uniform"`` proposal): two distinct points drawn
        uniformly (``kernels.anchors.uniform_anchors``).
    cluster_anchors : bool, default False
        Draw the anchors through the clusters instead (the law of :func:`_sams_updates`,
        stage 1 of ``splitmerge_start``): a split-type update (probability 1/2, or 1 from
        one cluster) picks a cluster uniformly and two of its points, a merge-type one two
        clusters uniformly and one point in each; this law depends on the partition, so
        the log ratio of the reverse to the forward anchor probability enters the
        acceptance ratio, and merges sure to be rejected are settled early
        (:func:`merge_surely_rejected`; their reported ratio is ``nan``).  Not with
        ``anchor_proposal``.  Each call seeds numba's generator by one draw of ``rng``
        (``kernels.rng.numba_seed_from``).
    n_updates : int, default 1
        With ``cluster_anchors`` only: updates per call, all in one compiled call (the
        updates of :func:`_sams_updates` from the call's seed), so the Python-to-numba cost
        of a call (tens of microseconds) is paid once.

    Returns
    -------
    callable
        ``move(model, partition, tables, rng) -> SplitMergeInfo``: one SAMS
        Metropolis–Hastings update (``n_updates`` with cluster anchors; the info is the
        last one's), applied to ``partition`` in place if accepted.
    """
    n_updates = positive_integer(n_updates, "n_updates")
    if cluster_anchors:
        if anchor_proposal is not None:
            raise ValueError("cluster_anchors=True draws its own anchors; anchor_proposal "
                             "must be None")
        return _ClusterSAMSMove(n_updates=n_updates)
    if n_updates != 1:
        raise ValueError("n_updates > 1 needs cluster_anchors=True (compose uniform-anchor "
                         "moves with splitmerge_common.build_moves_then_gibbs(n_moves=...))")
    _check_options(anchor_proposal)
    return ProposeThenAccept(_sams_proposal, anchor_proposal)


def sams_move(state, log_v_table, log_w_table, rng: np.random.Generator,
              anchor_proposal: AnchorProposal | None = None) -> SplitMergeInfo:
    """One SAMS Metropolis–Hastings update of ``state`` (in place).

    Convenience form of :func:`build_sams_move` on a ``PartitionState``.

    Parameters
    ----------
    state : PartitionState
        Mutated in place only if the proposal is accepted.
    log_v_table, log_w_table : ndarray of float64, shape (n + 2,)
        ``prior.tables(n)``.
    rng : numpy.random.Generator
    anchor_proposal : AnchorProposal, optional
        Default: uniform pair.

    Returns
    -------
    SplitMergeInfo
    """
    move = build_sams_move(anchor_proposal)
    tables = prior_tables(state.n, log_v_table, log_w_table)
    return move(state.model, state.partition, tables, rng)


# Margin of the early merge rejection, relative to the size of the terms of the bound: the
# bound reads the two clusters' incrementally kept statistics where the full proposal
# rebuilds them point by point along its forced allocation (the two differ by rounding only;
# the merged row is the same in both, ``merged_statistics``), and a forced log proposal
# probability can exceed 0 by rounding only.
_EARLY_REJECTION_MARGIN = 1e-8


@njit(cache=True)
def merge_surely_rejected(model, partition, tables, anchor_i, anchor_j, log_offset, uniform):
    """Whether the SAMS merge of the anchors' (different) clusters is rejected whatever the
    order of its reverse split (early rejection).

    The merge's log acceptance ratio is ``log q(c | c_merge) + log pi(c_merge) - log pi(c)
    + log_offset`` (``log_offset``: the log ratio of the anchor laws, 0 for uniform anchors)
    with ``log q <= 0`` (a probability), so the rest bounds it from above.  When
    ``log(uniform)`` exceeds the bound (plus a margin for rounding), the full proposal would
    reject with the same uniform: the decision is the same, and the forced sequential
    allocation (two predictive densities per point) is skipped.  Costs the merged
    statistics (:func:`merged_statistics`: the smaller cluster's points added to a copy of
    the larger's row).

    Parameters
    ----------
    model : Model
    partition : Partition
    tables : PriorTables
    anchor_i, anchor_j : int
        Anchors in different clusters.
    log_offset : float
        Added to the log acceptance ratio by the caller (anchor-law ratio).
    uniform : float
        The Metropolis uniform of the update.

    Returns
    -------
    bool
    """
    members, sides = anchor_clusters_members(partition.labels, anchor_i, anchor_j)
    merged = merged_statistics(model, partition, anchor_i, anchor_j, members, sides)
    return _merge_surely_rejected_given_merged(model, partition, tables, anchor_i, anchor_j,
                                               merged, log_offset, uniform)


@njit(cache=True, inline="always")
def _merge_surely_rejected_given_merged(model, partition, tables, anchor_i, anchor_j, merged,
                                        log_offset, uniform):
    """:func:`merge_surely_rejected` given the merged cluster's statistics ``merged`` (from
    :func:`merged_statistics`, the same row the full proposal then uses)."""
    family_id, params, _ = model
    log_v, log_w = tables
    return _merge_surely_rejected_fields(family_id, params, partition.labels, partition.sizes,
                                         partition.stats, partition.cluster_count, log_v,
                                         log_w, anchor_i, anchor_j, merged, log_offset,
                                         uniform)


@njit(cache=True, inline="always")
def _merge_surely_rejected_fields(family_id, params, labels, sizes, stats, cluster_count,
                                  log_v, log_w, anchor_i, anchor_j, merged, log_offset,
                                  uniform):
    """:func:`_merge_surely_rejected_given_merged` on the structures' fields (the one body;
    see :func:`_sams_proposal_given_members_fields`)."""
    slot_i = labels[anchor_i]
    slot_j = labels[anchor_j]
    log_prior = log_split_weight(log_v, log_w, cluster_count[0] - 1, sizes[slot_i],
                                 sizes[slot_j])
    rejected = False  # one return: see sams_proposal_given_members
    # log_prior = -inf: the split is impossible from the merged state, the merge accepts
    if log_prior != -np.inf:
        log_merged = dispatch.log_marginal(family_id, params, merged)
        log_a = dispatch.log_marginal(family_id, params, stats[slot_i])
        log_b = dispatch.log_marginal(family_id, params, stats[slot_j])
        bound = log_merged - log_prior - log_a - log_b + log_offset
        if bound < 0.0:  # (not for nan: leave it to the full proposal)
            margin = _EARLY_REJECTION_MARGIN * (1.0 + abs(log_merged) + abs(log_prior)
                                                + abs(log_a) + abs(log_b) + abs(log_offset))
            rejected = math.log(uniform) > bound + margin
    return rejected


@njit(cache=True, inline="always")
def _index_members(labels, sizes, order, start, cursor):
    """(Re)build the member index of a partition: the points of slot ``s`` are
    ``order[start[s]:start[s] + sizes[s]]``, in increasing order (a counting sort,
    O(n + capacity)).  ``order`` has shape ``(n,)``; ``start`` and ``cursor`` (scratch)
    ``(capacity,)``."""
    total = 0
    for slot in range(sizes.shape[0]):
        start[slot] = total
        cursor[slot] = total
        total += sizes[slot]
    for k in range(labels.shape[0]):
        slot = labels[k]
        order[cursor[slot]] = k
        cursor[slot] += 1


@njit(cache=True, inline="always")
def _indexed_members(labels, sizes, order, start, anchor_i, anchor_j):
    """``splitmerge_common.anchor_clusters_members`` from the member index: the same arrays
    (the points of the anchors' clusters other than the anchors, in increasing order, and
    their sides), in O(m_i + m_j) instead of a scan of all ``n`` labels."""
    slot_i = labels[anchor_i]
    slot_j = labels[anchor_j]
    size_i = sizes[slot_i]
    size_j = 0 if slot_j == slot_i else sizes[slot_j]
    members = np.empty(size_i + size_j - 2, dtype=np.int64)
    sides = np.empty(size_i + size_j - 2, dtype=np.int64)  # every entry is written below
    a, a_end = start[slot_i], start[slot_i] + size_i
    b, b_end = start[slot_j], start[slot_j] + size_j
    position = 0
    while a < a_end or b < b_end:  # merge the two increasing runs
        if b >= b_end or (a < a_end and order[a] < order[b]):
            k = order[a]
            side = 0
            a += 1
        else:
            k = order[b]
            side = 1
            b += 1
        if k != anchor_i and k != anchor_j:
            members[position] = k
            sides[position] = side
            position += 1
    return members, sides


@njit(cache=True, inline="always")
def _log_split_type_probability(n_clusters):
    """Log probability that a cluster-anchor update is split-type from ``n_clusters``
    clusters: 1/2, or 1 from a single cluster (no pair of clusters to merge)."""
    return 0.0 if n_clusters == 1 else -math.log(2.0)


@njit(cache=True)
def _sams_updates(model, partition, tables, n_updates, seed):
    r"""``n_updates`` SAMS Metropolis–Hastings updates with **cluster anchors** (no Gibbs
    sweep), in one compiled call, from numba's generator seeded here with ``seed``.

    Uniform anchors (Dahl 2003) propose to split a cluster of ``m`` of the ``n`` points only
    ``(m / n)^2`` of the time: a small cluster merged with another, or a small pair split
    apart, can wait thousands of updates.  Here each update first picks its kind:

    * split-type (probability 1/2, or 1 from a single cluster): a cluster uniformly among the
      ``K``, then an ordered pair of distinct anchors uniformly among its ``m`` points
      (clusters of one point: no move);
    * merge-type (probability 1/2): an ordered pair of distinct clusters uniformly, then one
      anchor uniformly in each.

    Given the anchors, the proposal is SAMS's (:func:`sams_proposal_core`: sequential
    allocation in a uniform order, the forced reverse split for a merge).  This anchor law
    depends on the partition, so the log acceptance ratio gains the log ratio of the
    reverse to the forward anchor probability: for a split of a cluster of ``m`` into
    ``m_A + m_B`` from ``K`` clusters

    .. math::

        \log\frac{t_m(K+1)}{t_s(K)} + \log\frac{m (m - 1)}{(K + 1)\, m_A m_B},

    and its negative (with ``K`` the merged count plus one) for the merge, ``t_s, t_m`` the
    kind probabilities.  So the chain leaves the posterior invariant, as uniform-anchor SAMS
    does (tested by enumeration; the tests' negative control drops the term).  Merges are
    settled early where :func:`merge_surely_rejected` can.

    The updates are those of :func:`_cluster_sams_move_fields` (the one implementation of the
    law).  This loop serves both stage 1 of ``splitmerge_start`` (which reads the count) and the move
    ``build_sams_move(cluster_anchors=True, n_updates=...)`` of ``SAMSStep(z,
    anchor_proposal="cluster")`` (which reports the last update, through
    :func:`_cluster_sams_move_fields`).  Uniforms, in order, per update: the kind; for a
    split-type the cluster, then two for the anchors (``kernels.anchors.uniform_anchors``
    over its points); for a merge-type two for the clusters (``uniform_anchors`` over the
    ``K``), then one per anchor; the Metropolis uniform; then, unless the update ended
    early, the ``2 |S|`` uniforms of the proposal (order, then allocation).

    Returns
    -------
    n_accepted : int
        Number of accepted updates.
    move, accepted, log_accept_ratio : int, bool, float
        The last update's (``MOVE_NONE``, False, ``nan`` if ``n_updates`` is 0).
    """
    return _cluster_sams_move_fields(
        model.family_id, model.params, model.x, partition.labels, partition.sizes,
        partition.stats, partition.empty_row, partition.active, partition.where,
        partition.cluster_count, tables.log_v, tables.log_w, seed, n_updates)


@njit(cache=True)
def _cluster_sams_move_fields(family_id, params, x, labels, sizes, stats, empty_row, active,
                              where, cluster_count, log_v, log_w, seed, n_updates):
    """:func:`_sams_updates` from loose fields (numba unboxes named tuples of arrays more
    slowly: cf. :func:`_sams_proposal_fields`); returns its result.

    The one compiled level of the cluster-anchor SAMS updates: the update is written in the
    loop here and everything it calls is inlined (``inline="always"``), the family's leaves
    are linked in.  The update is not a function of its own inlined here, nor is the loop
    inlined from :func:`_sams_updates`: numba copies an inlined function's whole IR, twice,
    at every level it is inlined through, and the copy of the complete update cost about
    1.5 s of a first run's compilation (``docs/benchmarks.md``, cold start).

    Each update draws from numba's generator (seeded here); ``partition`` changes in place
    when it is accepted.  ``uniforms`` (shape ``(2 n,)``) and ``pair`` (shape ``(2,)``) are
    scratch buffers; ``(order, start, cursor)`` is the partition's member index
    (:func:`_index_members`, rebuilt after an accepted update), so the anchors and the
    clusters' points are found without scanning all ``n`` labels.  An update ends early with
    ``(MOVE_NONE, False, nan)`` when the drawn cluster has one point, and a merge settled by
    :func:`merge_surely_rejected` is rejected with ``nan`` (its ratio is not computed, only
    shown to be below the log of its Metropolis uniform).
    """
    np.random.seed(seed)
    # scratch buffers allocated here (not returned from a helper as a tuple: numba releases
    # every array of a tuple each time a copy of it ends)
    n = labels.shape[0]
    uniforms = np.empty(2 * n, dtype=np.float64)
    pair = np.empty(2, dtype=np.int64)
    order = np.empty(n, dtype=np.int64)
    start = np.empty(sizes.shape[0], dtype=np.int64)
    cursor = np.empty(sizes.shape[0], dtype=np.int64)
    n_accepted = 0
    move, accepted, log_ratio = MOVE_NONE, False, np.nan
    index_current = False  # the member index is (re)built where an update first needs it
    for _ in range(n_updates):
        # one update (the law of :func:`_sams_updates`); ``continue`` ends it early
        if not index_current:  # one inlined copy of the index build (not two)
            _index_members(labels, sizes, order, start, cursor)
            index_current = True
        k = cluster_count[0]
        split_type = k == 1 or np.random.random() < 0.5
        if split_type:
            slot = active[np.int64(np.random.random() * k)]
            m = sizes[slot]
            uniforms[0] = np.random.random()
            uniforms[1] = np.random.random()
            if m < 2:  # a cluster of one point: no move
                move, accepted, log_ratio = MOVE_NONE, False, np.nan
                continue
            uniform_anchors(m, uniforms[:2], pair)
            anchor_i = order[start[slot] + pair[0]]  # the pair[0]-th point of the cluster
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
            anchor_i = order[start[slot_a] + np.int64(np.random.random() * size_a)]
            anchor_j = order[start[slot_b] + np.int64(np.random.random() * size_b)]
            m = size_a + size_b
        metropolis_uniform = np.random.random()
        members, current_sides = _indexed_members(labels, sizes, order, start, anchor_i,
                                                  anchor_j)
        log_offset = 0.0
        # the merged cluster's statistics (:func:`_merged_cluster_statistics`, its two cases
        # here, where the kind of update tells them apart)
        if split_type:
            merged = stats[labels[anchor_i]]
        else:
            merged = _merged_statistics_fields(family_id, params, x, labels, sizes, stats,
                                               anchor_i, anchor_j, members, current_sides)
            log_offset = (_log_split_type_probability(k - 1) + math.log(2.0)
                          + math.log(k) + math.log(size_a) + math.log(size_b)
                          - math.log(m) - math.log(m - 1))
            if _merge_surely_rejected_fields(family_id, params, labels, sizes, stats,
                                             cluster_count, log_v, log_w, anchor_i, anchor_j,
                                             merged, log_offset, metropolis_uniform):
                move, accepted, log_ratio = MOVE_MERGE, False, np.nan
                continue
        size_s = m - 2
        for t in range(2 * size_s):
            uniforms[t] = np.random.random()
        move, log_ratio, moving, target = _sams_proposal_given_members_fields(
            family_id, params, x, labels, empty_row, cluster_count, log_v, log_w, anchor_i,
            anchor_j, members, current_sides, uniforms, merged)
        if split_type:
            size_a = moving.shape[0]
            size_b = m - size_a
            log_offset = (-math.log(2.0) - _log_split_type_probability(k)
                          + math.log(m) + math.log(m - 1) - math.log(k + 1)
                          - math.log(size_a) - math.log(size_b))
        log_ratio += log_offset
        accepted = metropolis_accepts(log_ratio, metropolis_uniform)
        if accepted:
            apply_proposal_fields(family_id, params, x, labels, sizes, stats, empty_row,
                                  active, where, cluster_count, moving, target)
            index_current = False
            n_accepted += 1
    return n_accepted, move, accepted, log_ratio


class _ClusterSAMSMove:
    """The built cluster-anchor SAMS move (a class, as ``ProposeThenAccept``: copied with
    its step)."""

    def __init__(self, n_updates: int = 1):
        self.n_updates = n_updates

    def __call__(self, model: Model, partition: Partition, tables: PriorTables,
                 rng: np.random.Generator) -> SplitMergeInfo:
        if model.x.shape[0] < 2:
            return SplitMergeInfo(MOVE_NONE, False, float("nan"))
        _, move, accepted, log_ratio = _cluster_sams_move_fields(
            *model, *partition, *tables, numba_seed_from(rng), self.n_updates)
        return SplitMergeInfo(int(move), bool(accepted), float(log_ratio))

    def run_updates(self, model: Model, partition: Partition, tables: PriorTables,
                    n_updates: int, rng: np.random.Generator) -> int:
        """``n_updates`` of these updates in one compiled call (no infos; stage 1 of
        ``splitmerge_start``), numba's generator seeded from ``rng`` by one draw
        (``kernels.rng.numba_seed_from``); returns the number accepted.  Needs ``n >= 2``."""
        if model.x.shape[0] < 2:
            raise ValueError("SAMS updates need at least 2 points")
        return int(_cluster_sams_move_fields(*model, *partition, *tables,
                                             numba_seed_from(rng), int(n_updates))[0])

