r"""Pieces shared by the split-merge kernels (SAMS, Jain–Neal RGSM).

A split-merge move picks two distinct *anchor* points :math:`i \ne j`.  Let
:math:`S` be the other members of the anchors' clusters.  If :math:`c_i = c_j` a
*split* of that cluster into :math:`A \ni i` and :math:`B \ni j` is proposed,
otherwise the *merge* :math:`A \cup B` of the two clusters.  Writing the Gibbs-type
prior as :math:`p(c) = V(n, K) \prod_b W(|b|)` (PGSM eq. 3) and :math:`K` for the
number of clusters of the *merged* configuration, the posterior ratio of the split
over the merged configuration is

.. math::

    \log \frac{\pi(c^{split})}{\pi(c^{merge})}
    = \underbrace{\log V(n, K+1) - \log V(n, K) + \log W(a) + \log W(b) - \log W(a+b)}_{
      \texttt{log\_prior\_split\_ratio}}
    + \log m(A) + \log m(B) - \log m(A \cup B),

with :math:`a = |A|, b = |B|` and :math:`m(\cdot)` the family's marginal likelihood
(Jain & Neal 2000, eqs. 8, 9, 12, 13 for the Dirichlet process; the tables make it
prior-generic).  When the prior cannot hold :math:`K+1` clusters (finite Dirichlet
with :math:`K = k`) the table gives :math:`-\infty` and the split is rejected.

Within a split both candidate clusters are never empty (they hold the anchors), so
the number of clusters is fixed and the allocation of a point :math:`k` to
:math:`A` or :math:`B` has probability proportional to

.. math::

    \frac{W(m_A + 1)}{W(m_A)} \, p(x_k \mid A) \quad\text{vs}\quad
    \frac{W(m_B + 1)}{W(m_B)} \, p(x_k \mid B)

(for the DP this is :math:`m_A\, p(x_k \mid A)`, Jain & Neal eq. 18; Dahl 2003).

The candidate clusters' statistics live in *scratch rows* (copies of the family's
empty row) built from the points of :math:`S \cup \{i, j\}` only, so a proposal
costs :math:`O(|S|)` statistics work (finding :math:`S` is one integer scan of the
labels).  The partition state is changed — through ``kernels.state.move_point`` —
only when the proposal is accepted.

Proposals return their candidate together with ``log_accept_ratio``; the single
Metropolis–Hastings decision is :func:`metropolis_accept` (emcee/numpyro pattern).

References
----------
.. [1] Jain, S. and Neal, R. M. (2004). A split-merge Markov chain Monte Carlo procedure
   for the Dirichlet process mixture model. JCGS 13(1) (tech. report 2000), §3.
.. [2] Dahl, D. B. (2003). An improved merge-split sampler for conjugate Dirichlet process
   mixture models. Technical Report 1086, University of Wisconsin–Madison.
.. [3] Bouchard-Côté, A., Doucet, A. and Roth, A. (2017). Particle Gibbs split-merge
   sampling for Bayesian inference in mixture models. JMLR 18(28), eq. 3 and §1.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from pymc_splitmerge.components import dispatch
from pymc_splitmerge.core.jit import njit
from pymc_splitmerge.kernels.gibbs import GibbsInfo, build_gibbs_sweep
from pymc_splitmerge.kernels.options import non_negative_integer
from pymc_splitmerge.kernels.state import Model, Partition, PriorTables, free_slot, move_point
from pymc_splitmerge.priors.seating import log_join_weight, log_split_weight

__all__ = [
    "MOVE_MERGE",
    "MOVE_NAMES",
    "MOVE_NONE",
    "MOVE_REALLOCATE",
    "MOVE_SPLIT",
    "NO_PROPOSAL",
    "MovesThenGibbsInfo",
    "ProposeThenAccept",
    "SplitMergeInfo",
    "SplitMergeProposal",
    "accept_proposal",
    "anchor_clusters_members",
    "anchor_i_side",
    "apply_proposal",
    "apply_proposal_fields",
    "build_moves_then_gibbs",
    "log_split_merge_ratio",
    "log_split_merge_ratio_given_merged",
    "metropolis_accept",
    "metropolis_accepts",
    "two_way_log_probabilities",
]

# The one set of move codes of every split-merge kernel (SAMS, RGSM, PGSM, ARM) and of the
# ``*_move`` sampler stats.
MOVE_NONE = 0
"""Nothing proposed (fewer than 2 points, equal ARM library partitions) or, for PGSM, the
restricted partition unchanged."""
MOVE_SPLIT = 1
"""A split (more blocks; ARM: the anchors share a block)."""
MOVE_MERGE = 2
"""A merge (fewer blocks)."""
MOVE_REALLOCATE = 3
"""PGSM only: same number of blocks, points reallocated."""
MOVE_NAMES = ("none", "split", "merge", "reallocate")
"""``MOVE_NAMES[code]`` is the readable name of a move code."""


class SplitMergeInfo(NamedTuple):
    """What one split-merge Metropolis–Hastings update did.

    Attributes
    ----------
    move : int
        ``MOVE_SPLIT`` (1), ``MOVE_MERGE`` (2) or ``MOVE_NONE`` (0, nothing proposed).
    accepted : bool
        Whether the proposal was accepted (the state changed).
    log_accept_ratio : float
        Log Metropolis–Hastings ratio of the proposal (may be ``-inf``; ``nan`` for
        ``MOVE_NONE``).
    """

    move: int
    accepted: bool
    log_accept_ratio: float


class SplitMergeProposal(NamedTuple):
    """A split or merge candidate, not yet applied to the state.

    Attributes
    ----------
    move : int
        ``MOVE_SPLIT``, ``MOVE_MERGE`` or ``MOVE_NONE``.
    moving_points : ndarray of int64, shape (m,)
        Points that change cluster if the proposal is accepted: for a split the
        members of the new cluster :math:`A` (anchor ``i`` included), for a merge the
        members of the anchor ``i``'s cluster.
    target_slot : int
        Slot the moving points go to: ``-1`` for a split (a free slot is opened),
        the slot of anchor ``j``'s cluster for a merge.
    log_accept_ratio : float
        Log Metropolis–Hastings ratio.
    """

    move: int
    moving_points: np.ndarray
    target_slot: int
    log_accept_ratio: float


NO_PROPOSAL = SplitMergeProposal(MOVE_NONE, np.empty(0, dtype=np.int64), -1, float("nan"))
"""The proposal of a kernel that cannot propose anything (fewer than 2 points)."""


def metropolis_accept(log_accept_ratio: float, rng: np.random.Generator) -> bool:
    """The Metropolis–Hastings decision: accept with probability
    ``min(1, exp(log_accept_ratio))``.

    ``nan`` is treated as ``-inf`` (reject), ``+inf`` accepts.  One uniform is drawn from
    ``rng`` only when ``log_accept_ratio`` is finite and negative.

    Parameters
    ----------
    log_accept_ratio : float
    rng : numpy.random.Generator

    Returns
    -------
    bool
    """
    value = float(log_accept_ratio)
    # the uniform only when it decides (finite and negative; NaN compares False)
    uniform = rng.random() if -math.inf < value < 0.0 else 1.0
    return bool(metropolis_accepts.py_func(value, uniform))


@njit(cache=True, inline="always")
def metropolis_accepts(log_accept_ratio, uniform):
    """The decision of :func:`metropolis_accept` given its uniform (for compiled loops that
    draw their uniforms in advance): ``nan`` and ``-inf`` reject, ``>= 0`` accepts, otherwise
    ``log(uniform) < log_accept_ratio``."""
    if math.isnan(log_accept_ratio) or log_accept_ratio == -math.inf:
        return False
    if log_accept_ratio >= 0.0:
        return True
    return math.log(uniform) < log_accept_ratio


@njit(cache=True)
def anchor_clusters_members(labels, anchor_i, anchor_j):
    """Points of the anchors' clusters other than the anchors, in increasing order.

    Returns
    -------
    members : ndarray of int64, shape (|S|,)
    sides : ndarray of int64, shape (|S|,)
        0 if the point is in anchor ``i``'s cluster, 1 otherwise (anchor ``j``'s).
    """
    slot_i = labels[anchor_i]
    slot_j = labels[anchor_j]
    count = 0
    for k in range(labels.shape[0]):
        if k != anchor_i and k != anchor_j and (labels[k] == slot_i or labels[k] == slot_j):
            count += 1
    members = np.empty(count, dtype=np.int64)
    sides = np.empty(count, dtype=np.int64)
    position = 0
    for k in range(labels.shape[0]):
        if k != anchor_i and k != anchor_j and (labels[k] == slot_i or labels[k] == slot_j):
            members[position] = k
            sides[position] = 0 if labels[k] == slot_i else 1
            position += 1
    return members, sides


@njit(cache=True, inline="always")
def anchor_i_side(anchor_i, points, sides, size):
    """The ``size`` points of anchor ``i``'s side: ``anchor_i``, then ``points[t]`` with
    ``sides[t] == 0`` in order (the points a split or merge proposal moves).

    Parameters
    ----------
    anchor_i : int
    points : ndarray of int64, shape (|S|,)
    sides : ndarray of int64, shape (|S|,)
    size : int
        ``1 + (sides == 0).sum()``.

    Returns
    -------
    ndarray of int64, shape (size,)
    """
    moving = np.empty(size, dtype=np.int64)
    moving[0] = anchor_i
    position = 1
    for t in range(points.shape[0]):
        if sides[t] == 0:
            moving[position] = points[t]
            position += 1
    return moving


@njit(cache=True, inline="always")
def two_way_log_probabilities(family_id, params, x_row, stats_a, size_a, stats_b, size_b,
                              log_w_table):
    """Normalised log probabilities of allocating ``x_row`` to candidate cluster A or B.

    Weights ``W(m+1)/W(m) * p(x | cluster)`` (``m`` the cluster's current size, >= 1;
    ``priors.seating.log_join_weight``).  A two-term log-sum-exp on scalars (no scratch
    array in this innermost loop); both weights ``-inf``/NaN give 1/2 each.

    Returns
    -------
    (log_probability_a, log_probability_b) : tuple of float
    """
    log_a = (log_join_weight(log_w_table, size_a, 1)
             + dispatch.log_predictive(family_id, params, stats_a, x_row))
    log_b = (log_join_weight(log_w_table, size_b, 1)
             + dispatch.log_predictive(family_id, params, stats_b, x_row))
    # max(log_a, log_b) (Python's and numba's rule: the second only if greater) without
    # numba's max(), a function of its own to compile
    largest = log_b if log_b > log_a else log_a  # noqa: FURB136
    if largest == -np.inf or np.isnan(largest):
        return math.log(0.5), math.log(0.5)
    log_total = largest + math.log(math.exp(log_a - largest) + math.exp(log_b - largest))
    return log_a - log_total, log_b - log_total


@njit(cache=True)
def log_split_merge_ratio(family_id, params, x, anchor_i, anchor_j, members, stats_a, size_a,
                          stats_b, size_b, empty_row, log_v_table, log_w_table,
                          n_clusters_merged):
    """``log pi(c_split) - log pi(c_merge)`` for the candidate clusters A (stats_a) and B.

    The prior part is ``priors.seating.log_split_weight`` (``K = n_clusters_merged``, the
    number of clusters of the merged configuration; ``-inf`` when the split is infeasible).
    The merged cluster's statistics are rebuilt from scratch from the anchors and
    ``members`` (so the split and merge directions use identical numbers).
    """
    if log_split_weight(log_v_table, log_w_table, n_clusters_merged, size_a, size_b) == -np.inf:
        return -np.inf
    merged = empty_row.copy()
    dispatch.add_point(family_id, params, merged, x[anchor_i])
    dispatch.add_point(family_id, params, merged, x[anchor_j])
    for t in range(members.shape[0]):
        dispatch.add_point(family_id, params, merged, x[members[t]])
    return log_split_merge_ratio_given_merged(family_id, params, stats_a, size_a, stats_b,
                                              size_b, merged, log_v_table, log_w_table,
                                              n_clusters_merged)


@njit(cache=True, inline="always")
def log_split_merge_ratio_given_merged(family_id, params, stats_a, size_a, stats_b, size_b,
                                       merged, log_v_table, log_w_table, n_clusters_merged):
    """``log pi(c_split) - log pi(c_merge)`` (:func:`log_split_merge_ratio`) given the
    merged cluster's statistics row ``merged`` (read only), however it was obtained."""
    log_prior = log_split_weight(log_v_table, log_w_table, n_clusters_merged, size_a, size_b)
    if log_prior == -np.inf:
        return -np.inf
    return (log_prior + dispatch.log_marginal(family_id, params, stats_a)
            + dispatch.log_marginal(family_id, params, stats_b)
            - dispatch.log_marginal(family_id, params, merged))


@njit(cache=True, inline="always")
def apply_proposal(model, partition, moving_points, target_slot):
    """Move ``moving_points`` to ``target_slot`` (a fresh free slot when ``-1``), in place."""
    family_id, params, x = model
    labels, sizes, stats, empty_row, active, where, cluster_count = partition
    return apply_proposal_fields(family_id, params, x, labels, sizes, stats, empty_row, active,
                                 where, cluster_count, moving_points, target_slot)


@njit(cache=True, inline="always")
def apply_proposal_fields(family_id, params, x, labels, sizes, stats, empty_row, active, where,
                          cluster_count, moving_points, target_slot):
    """:func:`apply_proposal` on the structures' fields (the one body; a kernel holding them
    loose calls it: numba increments and decrements the reference count of every array of a
    tuple at each copy of it, that is, at every argument of an inlined function)."""
    if target_slot < 0:
        target_slot = free_slot(where)
    for t in range(moving_points.shape[0]):
        move_point(family_id, params, x, moving_points[t], target_slot, labels, sizes, stats,
                   empty_row, active, where, cluster_count)
    return target_slot


def accept_proposal(model: Model, partition: Partition, proposal: SplitMergeProposal,
                    rng: np.random.Generator) -> SplitMergeInfo:
    """The one Metropolis–Hastings decision of every split-merge kernel.

    Applies ``proposal`` to ``partition`` (in place) if accepted.

    Parameters
    ----------
    model : Model
    partition : Partition
    proposal : SplitMergeProposal
    rng : numpy.random.Generator

    Returns
    -------
    SplitMergeInfo
    """
    if proposal.move == MOVE_NONE:
        return SplitMergeInfo(MOVE_NONE, False, float("nan"))
    accepted = metropolis_accept(proposal.log_accept_ratio, rng)
    if accepted:
        apply_proposal(model, partition, proposal.moving_points, proposal.target_slot)
    return SplitMergeInfo(int(proposal.move), bool(accepted), float(proposal.log_accept_ratio))


class ProposeThenAccept:
    """A built split-merge move: validated options, a proposal, then :func:`accept_proposal`.

    Returned by ``build_sams_move`` and ``build_rgsm_move``.  A class, not a closure: a step
    method is deep-copied with its move (one per chain), and an option the step also holds
    (SAMS's ``AnchorProposal``, adapted by the step during tuning) must stay shared.

    Parameters
    ----------
    propose : callable
        ``propose(model, partition, tables, rng, *options) -> SplitMergeProposal``.
    *options
        The validated options, passed to ``propose`` after ``rng``.
    """

    def __init__(self, propose: Callable[..., SplitMergeProposal], *options):
        self.propose = propose
        self.options = options

    def __call__(self, model: Model, partition: Partition, tables: PriorTables,
                 rng: np.random.Generator) -> SplitMergeInfo:
        proposal = self.propose(model, partition, tables, rng, *self.options)
        return accept_proposal(model, partition, proposal, rng)


class MovesThenGibbsInfo(NamedTuple):
    """What one "split-merge moves, then Gibbs sweeps" transition did.

    Attributes
    ----------
    moves : tuple
        The infos of the ``n_moves`` moves, in order (``SplitMergeInfo``, ``PGSMInfo``,
        ``ARMInfo``, ...).
    gibbs : GibbsInfo or None
        Info of the Gibbs sweeps (``None`` when ``n_gibbs_sweeps == 0``).
    """

    moves: tuple
    gibbs: GibbsInfo | None


Transition = Callable[[Model, Partition, PriorTables, np.random.Generator], object]


def build_moves_then_gibbs(move: Transition, n_moves: int = 1, n_gibbs_sweeps: int = 0,
                           scan: str = "random"
                           ) -> Callable[[Model, Partition, PriorTables, np.random.Generator],
                                         MovesThenGibbsInfo]:
    """The one composition "``n_moves`` split-merge moves, then ``n_gibbs_sweeps`` sweeps".

    Used by SAMS, RGSM(t, m, g), PGSM and ARM (and their step adapters).  Each part leaves
    the posterior invariant, so does the composition (Tierney 1994); the Gibbs sweeps move
    single points, which split-merge moves do poorly (Jain & Neal 2004 §4.4; Bouchard-Côté
    et al. 2017 §4.3 "mixed" kernel).

    Parameters
    ----------
    move : callable
        ``move(model, partition, tables, rng) -> info``, a built split-merge transition
        (``build_sams_move``, ``build_rgsm_move``, a PGSM or ARM move).
    n_moves : int, default 1
        Moves per call (``m`` of RGSM(t, m, g)).
    n_gibbs_sweeps : int, default 0
        Collapsed Gibbs sweeps after the moves (``g``).
    scan : {"random", "systematic"}
        Visiting order of the sweeps.

    Returns
    -------
    callable
        ``transition(model, partition, tables, rng) -> MovesThenGibbsInfo``.
    """
    if not callable(move):
        raise TypeError("move must be a built transition move(model, partition, tables, rng)")
    n_moves = non_negative_integer(n_moves, "n_moves")
    n_gibbs_sweeps = non_negative_integer(n_gibbs_sweeps, "n_gibbs_sweeps")
    sweep = build_gibbs_sweep(scan, n_gibbs_sweeps) if n_gibbs_sweeps > 0 else None
    return _MovesThenGibbs(move, n_moves, sweep)


class _MovesThenGibbs:
    """The transition of :func:`build_moves_then_gibbs` (a class: copied with its step)."""

    def __init__(self, move, n_moves: int, sweep):
        self.move = move
        self.n_moves = n_moves
        self.sweep = sweep

    def __call__(self, model: Model, partition: Partition, tables: PriorTables,
                 rng: np.random.Generator) -> MovesThenGibbsInfo:
        infos = tuple(self.move(model, partition, tables, rng) for _ in range(self.n_moves))
        gibbs = (self.sweep(model, partition, tables, rng) if self.sweep is not None
                 else None)
        return MovesThenGibbsInfo(infos, gibbs)
