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

Both directions share the law of :math:`(i, j, \sigma)`, which does not depend on the
state, so for each fixed :math:`(i, j, \sigma)` the pair (split, merge) is an ordinary
Metropolis–Hastings pair (Tierney 1994).  Sampling a fresh split instead of forcing
the current one for the reverse probability (as the R package ``sams`` does) is
*not* invariant — the test suite checks that this variant is rejected.

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
import numba
import numpy as np

from pymc_splitmerge.components import dispatch
from pymc_splitmerge.kernels.anchors import AnchorProposal
from pymc_splitmerge.kernels.splitmerge_common import (
    MOVE_MERGE,
    MOVE_NONE,
    MOVE_SPLIT,
    SplitMergeInfo,
    SplitMergeProposal,
    accept_proposal,
    anchor_clusters_members,
    log_split_merge_ratio,
    reference_two_way_log_probabilities,
    two_way_log_probabilities,
    uniform_anchor_pair,
)

__all__ = [
    "sequential_allocation",
    "reference_sequential_allocation",
    "sams_proposal_core",
    "propose_sams",
    "sams_step",
]

_NEGATIVE_CONTROLS = (None, "sampled_reverse_split")


@numba.njit(cache=True)
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


def reference_sequential_allocation(family, x, anchor_i, anchor_j, order, sides,
                                    log_w_table) -> float:
    """Plain reference: log probability of the allocation ``sides`` along ``order``.

    Uses ``family.log_marginal_of`` for every predictive (no incremental statistics).
    """
    points_a = [int(anchor_i)]
    points_b = [int(anchor_j)]
    log_proposal = 0.0
    for k, side in zip(order, sides, strict=True):
        log_pa, log_pb = reference_two_way_log_probabilities(family, x[k], points_a, points_b,
                                                             x, log_w_table)
        if side == 0:
            log_proposal += log_pa
            points_a.append(int(k))
        else:
            log_proposal += log_pb
            points_b.append(int(k))
    return float(log_proposal)


@numba.njit(cache=True)
def sams_proposal_core(family_id, params, x, labels, n_clusters, anchor_i, anchor_j, uniforms,
                       log_v_table, log_w_table, empty_row, sampled_reverse):
    """The whole SAMS proposal for given anchors, in one compiled call.

    Parameters
    ----------
    labels : ndarray of int64, shape (n,)
        Slot labels of the current state (read only).
    n_clusters : int
        Current number of clusters.
    uniforms : ndarray of float64, shape (>= 2 |S|,)
        ``uniforms[:|S|]`` order :math:`S` (argsort: a uniformly random permutation),
        ``uniforms[|S|:2|S|]`` drive the sampled allocation.
    sampled_reverse : bool
        Negative control only: score a merge with a freshly sampled split.

    Returns
    -------
    move : int
    log_accept_ratio : float
    moving_points : ndarray of int64
    target_slot : int
    """
    members, current_sides = anchor_clusters_members(labels, anchor_i, anchor_j)
    size_s = members.shape[0]
    permutation = np.argsort(uniforms[:size_s])
    order = members[permutation]
    allocation_uniforms = uniforms[size_s:2 * size_s]
    is_split = labels[anchor_i] == labels[anchor_j]
    sides = np.empty(size_s, dtype=np.int64)
    log_q = 0.0
    if is_split or sampled_reverse:
        log_q, stats_a, stats_b, size_a, size_b = sequential_allocation(
            family_id, params, x, anchor_i, anchor_j, order, False, sides, allocation_uniforms,
            log_w_table, empty_row)
    if is_split:
        log_ratio = log_split_merge_ratio(family_id, params, x, anchor_i, anchor_j, members,
                                          stats_a, size_a, stats_b, size_b, empty_row,
                                          log_v_table, log_w_table, n_clusters)
        moving = np.empty(size_a, dtype=np.int64)
        moving[0] = anchor_i
        position = 1
        for t in range(size_s):
            if sides[t] == 0:
                moving[position] = order[t]
                position += 1
        return MOVE_SPLIT, log_ratio - log_q, moving, -1
    # merge: the reverse split is FORCED to the current clusters along the same order
    sides_current = current_sides[permutation]
    log_q_forced, stats_a, stats_b, size_a, size_b = sequential_allocation(
        family_id, params, x, anchor_i, anchor_j, order, True, sides_current, uniforms,
        log_w_table, empty_row)
    log_q_reverse = log_q if sampled_reverse else log_q_forced
    log_ratio = log_split_merge_ratio(family_id, params, x, anchor_i, anchor_j, members,
                                      stats_a, size_a, stats_b, size_b, empty_row,
                                      log_v_table, log_w_table, n_clusters - 1)
    moving = np.empty(size_a, dtype=np.int64)
    moving[0] = anchor_i
    position = 1
    for t in range(size_s):
        if sides_current[t] == 0:
            moving[position] = order[t]
            position += 1
    return MOVE_MERGE, log_q_reverse - log_ratio, moving, labels[anchor_j]


def propose_sams(state, log_v_table, log_w_table, rng: np.random.Generator,
                 anchor_proposal: AnchorProposal | None = None, *,
                 _negative_control: str | None = None) -> SplitMergeProposal:
    """Propose a SAMS split or merge without changing ``state``.

    Parameters
    ----------
    state : PartitionState
    log_v_table, log_w_table : ndarray of float64, shape (n + 2,)
        ``prior.tables(n)``.
    rng : numpy.random.Generator
    anchor_proposal : AnchorProposal, optional
        ``kernels.anchors.AnchorProposal`` with ``n_anchors=2`` (its law never depends on
        the current partition, so it does not enter the ratio).  Default (or a
        ``"uniform"`` proposal): two distinct points drawn uniformly.
    _negative_control : {None, "sampled_reverse_split"}
        Testing only.  ``"sampled_reverse_split"`` computes the merge's reverse
        probability from a freshly *sampled* split (the R ``sams`` package's mistake).

    Returns
    -------
    SplitMergeProposal
    """
    if _negative_control not in _NEGATIVE_CONTROLS:
        raise ValueError(f"_negative_control must be one of {_NEGATIVE_CONTROLS}")
    log_v_table, log_w_table = state.check_tables(log_v_table, log_w_table)
    n = state.n
    if n < 2:
        return SplitMergeProposal(MOVE_NONE, np.empty(0, dtype=np.int64), -1, float("nan"))
    uniforms = rng.random(2 * n)
    if anchor_proposal is None or anchor_proposal.kind == "uniform":
        anchor_i, anchor_j = uniform_anchor_pair(n, uniforms[-2], uniforms[-1])
    else:
        anchors = anchor_proposal.sample(n, rng)
        anchor_i, anchor_j = int(anchors[0]), int(anchors[1])
    move, log_ratio, moving, target = sams_proposal_core(
        state.family_id, state.params, state.x, state.labels_slots, state.n_clusters, anchor_i,
        anchor_j, uniforms, log_v_table, log_w_table, state.empty_row,
        _negative_control == "sampled_reverse_split")
    return SplitMergeProposal(int(move), moving, int(target), float(log_ratio))


def sams_step(state, log_v_table, log_w_table, rng: np.random.Generator,
              anchor_proposal: AnchorProposal | None = None, *,
              _negative_control: str | None = None) -> SplitMergeInfo:
    """One SAMS Metropolis–Hastings update of ``state`` (in place).

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
    proposal = propose_sams(state, log_v_table, log_w_table, rng, anchor_proposal,
                            _negative_control=_negative_control)
    return accept_proposal(state, proposal, rng)
