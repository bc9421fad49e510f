r"""Restricted Gibbs split-merge kernel (Jain & Neal 2000/2004, Algorithm 2).

One Metropolis–Hastings update (paper §3.3.3):

1. draw two distinct anchors :math:`i, j` uniformly; :math:`S` = the other members of
   their clusters (scanned in increasing index order, a function of :math:`S` only);
2. **launch state**: put :math:`i` in :math:`A`, :math:`j` in :math:`B`, each
   :math:`k \in S` in :math:`A` or :math:`B` with probability 1/2, then perform
   :math:`t` intermediate *restricted Gibbs scans* — each :math:`k \in S` in turn is
   redrawn from

   .. math::

       P(k \to A \mid \cdot) \propto \frac{W(m_{-k,A}+1)}{W(m_{-k,A})}\,
       p(x_k \mid A_{-k}), \qquad
       P(k \to B \mid \cdot) \propto \frac{W(m_{-k,B}+1)}{W(m_{-k,B})}\,
       p(x_k \mid B_{-k})

   (paper eq. 18, where the DP gives :math:`W(m+1)/W(m) = m`);
3. if :math:`c_i = c_j`: one *final* restricted scan from the launch state gives
   :math:`c^{split}`; :math:`q(c^{split} \mid c)` is the product of the final scan's
   conditional probabilities (from the **launch** state, not the intermediate scans);
   log ratio :math:`\log\pi(c^{split}) - \log\pi(c) - \log q(c^{split}\mid c)`;
4. otherwise propose the merge; :math:`q(c \mid c^{merge})` is the probability that one
   restricted scan from the launch state produces the current split (computed by
   forcing each :math:`k` to its current side); log ratio
   :math:`\log\pi(c^{merge}) - \log\pi(c) + \log q(c \mid c^{merge})`.

The move is built once by :func:`build_rgsm_move` and runs on the structures of
``kernels.state``; RGSM(t, m, g) is that move composed with Gibbs sweeps by
``splitmerge_common.build_moves_then_gibbs`` (the one place for "moves then sweeps").

The launch state is a random choice of the proposal independent of the current
partition (paper §3.3.2, Tierney 1994), which is why its (intractable) probability
does not enter the ratio.  A full iteration RGSM(t, m, g) does ``m`` such updates then
``g`` full collapsed Gibbs scans; the paper finds RGSM(5, 1, 1) a good default (§4).

References
----------
.. [1] Jain, S. and Neal, R. M. (2000). A split-merge Markov chain Monte Carlo procedure
   for the Dirichlet process mixture model. Technical Report 2003, University of Toronto,
   §3.3 (Algorithm 2), §3.4 and §4.4; JCGS 13(1) 2004.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from pymc_splitmerge.components import dispatch
from pymc_splitmerge.core.jit import njit
from pymc_splitmerge.kernels.anchors import uniform_anchors
from pymc_splitmerge.kernels.options import non_negative_integer
from pymc_splitmerge.kernels.splitmerge_common import (
    MOVE_MERGE,
    MOVE_SPLIT,
    NO_PROPOSAL,
    ProposeThenAccept,
    SplitMergeInfo,
    SplitMergeProposal,
    anchor_clusters_members,
    anchor_i_side,
    log_split_merge_ratio,
    two_way_log_probabilities,
)
from pymc_splitmerge.kernels.state import Model, Partition, PriorTables, make_model, prior_tables

__all__ = [
    "build_rgsm_move",
    "restricted_scan",
    "rgsm_move",
    "rgsm_proposal_core",
]

@njit(cache=True)
def restricted_scan(family_id, params, x, members, sides, sizes, stats_a, stats_b, forced,
                    target_sides, uniforms, log_w_table):
    """One restricted Gibbs scan over ``members`` between candidate clusters A and B.

    Updates ``sides``, ``sizes`` and the scratch rows in place.

    Parameters
    ----------
    family_id : int
    params : ndarray of float64
    x : ndarray of float64, shape (n, data_dim)
    members : ndarray of int64, shape (|S|,)
        Points of :math:`S`, in scan order.
    sides : ndarray of int64, shape (|S|,)
        Current side of each member (0 = A, 1 = B); updated in place.
    sizes : ndarray of int64, shape (2,)
        Sizes of A and B (anchors included); updated in place.
    stats_a, stats_b : ndarray of float64, shape (stat_dim,)
        Scratch statistics rows; updated in place.
    forced : bool
        If true, every member is set to ``target_sides`` (the scan is only scored).
    target_sides : ndarray of int64, shape (|S|,)
        Used when ``forced``.
    uniforms : ndarray of float64, shape (|S|,)
        Uniform(0, 1) draws used when not ``forced``.
    log_w_table : ndarray of float64, shape (n + 2,)

    Returns
    -------
    float
        Log transition probability of the scan (product of the conditionals).
    """
    log_probability = 0.0
    for t in range(members.shape[0]):
        k = members[t]
        if sides[t] == 0:
            dispatch.remove_point(family_id, params, stats_a, x[k])
            sizes[0] -= 1
        else:
            dispatch.remove_point(family_id, params, stats_b, x[k])
            sizes[1] -= 1
        log_pa, log_pb = two_way_log_probabilities(family_id, params, x[k], stats_a, sizes[0],
                                                   stats_b, sizes[1], log_w_table)
        if forced:
            new_side = target_sides[t]
        else:
            new_side = 0 if uniforms[t] < math.exp(log_pa) else 1
        if new_side == 0:
            log_probability += log_pa
            dispatch.add_point(family_id, params, stats_a, x[k])
            sizes[0] += 1
        else:
            log_probability += log_pb
            dispatch.add_point(family_id, params, stats_b, x[k])
            sizes[1] += 1
        sides[t] = new_side
    return log_probability


@njit(cache=True)
def _launch_state(model, members, anchor_i, anchor_j, n_intermediate_scans, uniforms,
                 log_w_table, empty_row):
    """The launch state of the proposal: the random split of :math:`S` then ``t``
    intermediate restricted scans (steps 1-2 of the module docstring).

    ``uniforms`` as :func:`rgsm_proposal_core` takes them (the first ``t + 1`` blocks of
    ``|S|``).  Returns ``(sides, sizes, stats_a, stats_b, log_path)``: the launch split
    (0: with anchor ``i``), the two blocks' sizes and statistics rows (anchors included),
    and the log probability of the intermediate scans' path, which does not enter the
    acceptance ratio (the tests' negative control adds it: ``tests/broken_kernels.py``).
    """
    family_id, params, x = model
    size_s = members.shape[0]
    sides = np.empty(size_s, dtype=np.int64)
    stats_a = empty_row.copy()
    stats_b = empty_row.copy()
    dispatch.add_point(family_id, params, stats_a, x[anchor_i])
    dispatch.add_point(family_id, params, stats_b, x[anchor_j])
    sizes = np.ones(2, dtype=np.int64)
    for t in range(size_s):
        # random launch split: each member of S to A or B with probability 1/2
        if uniforms[t] < 0.5:
            sides[t] = 0
            dispatch.add_point(family_id, params, stats_a, x[members[t]])
            sizes[0] += 1
        else:
            sides[t] = 1
            dispatch.add_point(family_id, params, stats_b, x[members[t]])
            sizes[1] += 1
    offset = size_s
    log_path = 0.0
    for _ in range(n_intermediate_scans):
        log_path += restricted_scan(family_id, params, x, members, sides, sizes, stats_a,
                                    stats_b, False, sides, uniforms[offset:offset + size_s],
                                    log_w_table)
        offset += size_s
    return sides, sizes, stats_a, stats_b, log_path


@njit(cache=True)
def rgsm_proposal_core(model, partition, tables, anchor_i, anchor_j, n_intermediate_scans,
                       uniforms):
    """The whole restricted-Gibbs split-merge proposal for given anchors, in one call.

    Parameters
    ----------
    model : Model
    partition : Partition
        The current state (read only).
    tables : PriorTables
    anchor_i, anchor_j : int
    n_intermediate_scans : int
        ``t``.
    uniforms : ndarray of float64, shape (>= (t + 2) |S|,)
        ``uniforms[:|S|]`` give the random launch split; the next ``t`` blocks of ``|S|``
        drive the intermediate scans, then one block the final scan.

    Returns
    -------
    move : int
    log_accept_ratio : float
    moving_points : ndarray of int64
    target_slot : int
    """
    family_id, params, x = model
    labels = partition.labels
    empty_row = partition.empty_row
    n_clusters = partition.cluster_count[0]
    log_v_table, log_w_table = tables
    members, current_sides = anchor_clusters_members(labels, anchor_i, anchor_j)
    size_s = members.shape[0]
    sides, sizes, stats_a, stats_b, _ = _launch_state(
        model, members, anchor_i, anchor_j, n_intermediate_scans, uniforms, log_w_table,
        empty_row)
    offset = (n_intermediate_scans + 1) * size_s
    is_split = labels[anchor_i] == labels[anchor_j]
    if is_split:
        log_q = restricted_scan(family_id, params, x, members, sides, sizes, stats_a, stats_b,
                                False, sides, uniforms[offset:offset + size_s], log_w_table)
        log_ratio = log_split_merge_ratio(family_id, params, x, anchor_i, anchor_j, members,
                                          stats_a, sizes[0], stats_b, sizes[1], empty_row,
                                          log_v_table, log_w_table, n_clusters)
        moving = anchor_i_side(anchor_i, members, sides, sizes[0])
        return MOVE_SPLIT, log_ratio - log_q, moving, -1
    # merge: probability that one scan from the launch state gives the current split
    log_q = restricted_scan(family_id, params, x, members, sides, sizes, stats_a, stats_b, True,
                            current_sides, uniforms, log_w_table)
    log_ratio = log_split_merge_ratio(family_id, params, x, anchor_i, anchor_j, members,
                                      stats_a, sizes[0], stats_b, sizes[1], empty_row,
                                      log_v_table, log_w_table, n_clusters - 1)
    moving = anchor_i_side(anchor_i, members, current_sides, sizes[0])
    return MOVE_MERGE, log_q - log_ratio, moving, labels[anchor_j]


@njit(cache=True)
def _rgsm_proposal_fields(family_id, params, x, labels, sizes, stats, empty_row, active, where,
                          cluster_count, log_v, log_w, n_intermediate_scans, uniforms):
    """:func:`rgsm_proposal_core` with the structures' fields as arguments (Python entry).

    numba unboxes named tuples of arrays ~4 us slower than plain arguments, so the Python
    side hands the fields over loose and the structures are rebuilt here; the two anchors are
    drawn here with ``kernels.anchors.uniform_anchors`` from ``uniforms[-2:]`` (what the
    Python side did before, in a numba call of its own).
    """
    anchors = np.empty(2, dtype=np.int64)
    uniform_anchors(x.shape[0], uniforms[uniforms.shape[0] - 2:], anchors)
    return rgsm_proposal_core(
        make_model(family_id, params, x),
        Partition(labels, sizes, stats, empty_row, active, where, cluster_count),
        PriorTables(log_v, log_w), anchors[0], anchors[1], n_intermediate_scans, uniforms)


def _rgsm_proposal(model, partition, tables, rng, n_intermediate_scans):
    n = model.x.shape[0]
    if n < 2:
        return NO_PROPOSAL
    # |S| <= n - 2: launch + t intermediate + final blocks, and 2 for the anchors
    uniforms = rng.random((n_intermediate_scans + 2) * (n - 2) + 2)
    move, log_ratio, moving, target = _rgsm_proposal_fields(
        *model, *partition, *tables, n_intermediate_scans, uniforms)
    return SplitMergeProposal(move, moving, target, log_ratio)


def build_rgsm_move(n_intermediate_scans: int = 5
                    ) -> Callable[[Model, Partition, PriorTables, np.random.Generator],
                                  SplitMergeInfo]:
    """Validate the options once; return ``move(model, partition, tables, rng)``.

    Parameters
    ----------
    n_intermediate_scans : int, default 5
        ``t``, the restricted scans from the random split to the launch state.

    Returns
    -------
    callable
        ``move(model, partition, tables, rng) -> SplitMergeInfo``: one restricted-Gibbs
        split-merge Metropolis–Hastings update (Algorithm 2), applied in place if accepted.
    """
    return ProposeThenAccept(
        _rgsm_proposal, non_negative_integer(n_intermediate_scans, "n_intermediate_scans"))


def rgsm_move(state, log_v_table, log_w_table, rng: np.random.Generator,
              n_intermediate_scans: int = 5) -> SplitMergeInfo:
    """One restricted-Gibbs split-merge Metropolis–Hastings update of ``state`` (in place).

    Convenience form of :func:`build_rgsm_move` on a ``PartitionState``.

    Parameters
    ----------
    state : PartitionState
        Mutated in place only if the proposal is accepted.
    log_v_table, log_w_table : ndarray of float64, shape (n + 2,)
        ``prior.tables(n)``.
    rng : numpy.random.Generator
    n_intermediate_scans : int, default 5

    Returns
    -------
    SplitMergeInfo
    """
    move = build_rgsm_move(n_intermediate_scans)
    tables = prior_tables(state.n, log_v_table, log_w_table)
    return move(state.model, state.partition, tables, rng)
