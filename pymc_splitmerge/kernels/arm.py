r"""Adaptive Reconfiguration Move (ARM) of Herlau, Mørup, Schmidt & Teh: one move.

Notation: :math:`q(z) = p(z)\,\prod_b m(y_b)` is the unnormalised posterior of a partition
(paper eq. 4, with the Gibbs-type prior :math:`p(z) = V(n, K) \prod_b W(|b|)`).  A move is a
Metropolis–Hastings proposal indexed by auxiliary variables
:math:`\phi = (z^a, z^b, i, j, \sigma)` whose law does **not** depend on the current state
:math:`z`:

* :math:`z^a \ne z^b` are two partitions supplied by the caller (the *library*; the step
  method in ``steps/arm.py`` draws them from other chains or from a frozen library);
* :math:`\{i, j\}` is uniform over the pairs on which :math:`z^a` and :math:`z^b` disagree,
  oriented so that :math:`z^a_i = z^a_j` and :math:`z^b_i \ne z^b_j` (§2.4);
* :math:`\sigma` is a uniformly random order of the points (the paper relabels the points
  at random every move; "index order" below is the order :math:`\sigma`).

One run of Algorithm 3 from a start state :math:`s` (paper §2.2):

1. :math:`c = z^a \vee z^b \vee s`, the coarsest common refinement; :math:`c_i \ne c_j`.
2. Remove :math:`s_i \cup s_j`.  Split (:math:`s_i = s_j`): add the blocks :math:`c_i`,
   :math:`c_j`; merge: add :math:`c_i \cup c_j`.
3. The other :math:`c`-blocks inside :math:`s_i \cup s_j` (the set :math:`g'`), largest first,
   ties broken by the earliest point in :math:`\sigma`, are each placed *as a group* into one
   of the current blocks or a new block with probability :math:`\pi_k \propto q(z^{(k)})`
   (eqs. 5–7).  A group's first point (its *earmark*) never moves again.
4. Every other point :math:`h` (not :math:`i, j`, not an earmark), in the order
   :math:`\sigma`: if :math:`h \in s_i \cup s_j`, an unrestricted Gibbs move; otherwise, if
   :math:`h` is the last original member of a block that has gained points
   (:math:`s_h \cap z^*_h = \{h\}`, :math:`|z^*_h| \ge 2`, eq. 17) it stays; otherwise it
   chooses between staying and the block(s) of :math:`i, j`.

The forward probability :math:`T(z^* \mid z)` is the product of the chosen
:math:`\pi_k`.  The paper does not say how to compute the reverse probability
:math:`T(z \mid z^*)`; here it is a *forced* run of the same algorithm from :math:`z^*`
(with :math:`c^* = z^a \vee z^b \vee z^*`) whose every choice is dictated by the target
:math:`z` (``../shared/specs/arm_and_smc.md`` §1): a point (or a group's earmark) whose
target block contains :math:`i` (:math:`j`) goes to the block of :math:`i` (:math:`j`);
otherwise it goes to the unique current block holding an already *settled* member of its
target block (``i``, ``j``, earmarks, points visited in step 4, and not yet visited
outside points whose target block contains neither ``i`` nor ``j``), or to a new block if
there is none; two such blocks, or a final partition different from the target, give
:math:`T = 0`.  The tests check :math:`\sum_{z^*} T(z^* \mid z) = 1` by enumeration
(uniqueness of the path, paper §2.3).  The move is accepted with probability (eq. 8)

.. math::

    a = \min\Bigl\{1, \frac{T(z \mid z^*)\, q(z^*)}{T(z^* \mid z)\, q(z)}\Bigr\}.

Prior weights.  Every placement is scored with the ``n``-point tables of the prior
(``prior.tables(n)``): joining block :math:`B` with the group :math:`C` has log weight
:math:`\log W(m_B + m_C) - \log W(m_B) + \log m(y_{B\cup C}) - \log m(y_B)`, a new block
:math:`\log V(n, K+1) - \log V(n, K) + \log W(m_C) + \log m(y_C)`.  For the Dirichlet
process, Pitman–Yor and finite Dirichlet priors :math:`V(N, K+1)/V(N, K)` does not depend on
:math:`N`, so this is the paper's :math:`q` over the points placed so far; for the MFM it is a
(valid) proposal choice.  Exactness never depends on it: both directions use the same rule.

All point moves go through ``kernels.state`` (``assign_point`` / ``unassign_point``); a
candidate block's statistics with a group added are a *copy* of its row to which the group's
points are added with ``dispatch.add_point``.

References
----------
.. [1] Herlau, T., Mørup, M., Schmidt, M. N. and Teh, Y. W. Adaptive reconfiguration moves
   for Dirichlet mixtures.  Algorithms 2 and 3, eqs. (4)–(8), (17), §2.3–2.4.
.. [2] Tierney, L. (1994). Markov chains for exploring posterior distributions.  Ann. Statist.
   22(4) (mixtures of MH kernels indexed by state-independent auxiliary variables).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from pymc_splitmerge.components import dispatch
from pymc_splitmerge.core.jit import njit
from pymc_splitmerge.core.logweights import exp_shifted, sample_weights
from pymc_splitmerge.kernels.gibbs import _join_and_new_log_weights
from pymc_splitmerge.kernels.options import non_negative_integer
from pymc_splitmerge.kernels.sams import build_sams_move
from pymc_splitmerge.kernels.splitmerge_common import (
    MOVE_MERGE,
    MOVE_NONE,
    MOVE_SPLIT,
    MovesThenGibbsInfo,
    build_moves_then_gibbs,
    metropolis_accept,
)
from pymc_splitmerge.kernels.state import (
    Model,
    Partition,
    PriorTables,
    assign_point,
    free_slot,
    log_target,
    prior_tables,
    unassign_point,
)
from pymc_splitmerge.priors.seating import log_join_weight, log_open_weight

__all__ = [
    "ARMInfo",
    "ARMProposal",
    "ARMTransitionInfo",
    "arm_move",
    "arm_run",
    "arm_transition_log_probabilities",
    "build_arm_move",
    "build_arm_transition",
    "disagreement_pair",
    "distinct_rows",
]

class ARMInfo(NamedTuple):
    """What one ARM Metropolis–Hastings update did.

    Attributes
    ----------
    move : int
        ``MOVE_SPLIT`` (1; ``z_i = z_j``), ``MOVE_MERGE`` (2) or ``MOVE_NONE`` (0: the two
        library partitions are equal, nothing proposed).
    accepted : bool
    log_accept_ratio : float
        Log of the ratio of eq. (8) (``-inf`` when the reverse path is impossible; ``nan``
        for ``MOVE_NONE``).
    n_moved : int
        Points whose block (as a set of points) changed (0 when rejected).
    n_clusters : int
        Number of clusters after the update.
    """

    move: int
    accepted: bool
    log_accept_ratio: float
    n_moved: int
    n_clusters: int


class ARMProposal(NamedTuple):
    """An ARM candidate, not yet applied.

    Attributes
    ----------
    move : int
    candidate : Partition or None
        The candidate state (copies of the current arrays moved by Algorithm 3).
    log_accept_ratio : float
    log_forward, log_reverse : float
        ``log T(z* | z)`` and ``log T(z | z*)``.
    """

    move: int
    candidate: Partition | None
    log_accept_ratio: float
    log_forward: float
    log_reverse: float


# ----------------------------------------------------------------------------- numba core


@njit(cache=True)
def _choose(log_weights, weights, count, forced, forced_index, uniform):
    """Pick an option among ``count``; return ``(index, log probability)``.

    ``forced``: the option is ``forced_index`` (``-1``: impossible, log probability -inf).
    """
    log_total, total = exp_shifted(log_weights, count, weights)
    if forced:
        if forced_index < 0 or log_total == -np.inf:
            return -1, -np.inf
        value = log_weights[forced_index]
        if value == -np.inf:
            return -1, -np.inf
        return forced_index, value - log_total
    if log_total == -np.inf:
        return -1, -np.inf
    choice = sample_weights(weights, count, total, uniform)
    return choice, math.log(weights[choice]) - math.log(total)


@njit(cache=True)
def _forced_option(point, target, labels, placed, settled, anchor_i, anchor_j, option_slots,
                   count):
    """Index of the option the forced run must take for ``point`` (or -1 if none)."""
    wanted_target = target[point]
    if wanted_target == target[anchor_i]:
        want = labels[anchor_i]
    elif wanted_target == target[anchor_j]:
        want = labels[anchor_j]
    else:
        want = -1  # a new block unless a settled member of the target block is placed
        for p in range(target.shape[0]):
            if p != point and settled[p] and placed[p] and target[p] == wanted_target:
                if want == -1:
                    want = labels[p]
                elif want != labels[p]:
                    return -1
    for q in range(count):
        if option_slots[q] == want:
            return q
    return -1


@njit(cache=True)
def _point_join_log_weight(family_id, params, x_row, slot, sizes, stats, log_w_table):
    value = (log_join_weight(log_w_table, sizes[slot], 1)
             + dispatch.log_predictive(family_id, params, stats[slot], x_row))
    return -np.inf if np.isnan(value) else value


@njit(cache=True)
def _add_group(family_id, params, x, group_of, g, row, value):
    """``value`` plus ``log m(y_{B u C}) - log m(y_B)`` for the points of group ``g`` added to
    the statistics ``row`` of ``B`` (a product of sequential predictives; ``row`` is
    updated)."""
    for p in range(x.shape[0]):
        if group_of[p] == g:
            value += dispatch.log_predictive(family_id, params, row, x[p])
            dispatch.add_point(family_id, params, row, x[p])
    return value


@njit(cache=True)
def _choose_slot(log_weights, weights, option_slots, count, forced, forced_index, uniform,
                 where):
    """The one placement decision of both loops of Algorithm 3 (groups and single points).

    Picks an option (:func:`_choose`) and turns it into a slot (``-1`` in ``option_slots``:
    a fresh free slot).  Returns ``(slot, log probability)``, ``(-1, -inf)`` if impossible.
    """
    choice, log_p = _choose(log_weights, weights, count, forced, forced_index, uniform)
    if choice < 0:
        return -1, -np.inf
    slot = option_slots[choice]
    if slot < 0:
        slot = free_slot(where)
    return slot, log_p


@njit(cache=True)
def arm_run(model, partition, tables, labels_a, labels_b, anchor_i, anchor_j, rank, forced,
            target, uniforms, enforce_eq17):
    """One run of Algorithm 3 from ``partition`` (mutated in place).

    Parameters
    ----------
    model : Model
        The component family and prepared data.
    partition : Partition
        Start state :math:`s`; on return the state reached.
    tables : PriorTables
    labels_a, labels_b : ndarray of int64, shape (n,)
        The library partitions, canonical labels, oriented so that
        ``labels_a[anchor_i] == labels_a[anchor_j]`` and
        ``labels_b[anchor_i] != labels_b[anchor_j]``.
    anchor_i, anchor_j : int
    rank : ndarray of int64, shape (n,)
        ``rank[p]`` is the position of point ``p`` in the order :math:`\\sigma`.
    forced : bool
        Score the path to ``target`` instead of sampling.
    target : ndarray of int64, shape (n,)
        Labels of the target partition (read when ``forced``).
    uniforms : ndarray of float64, shape (>= n,)
        Uniform(0, 1) draws, one per sampled decision (unused when ``forced``).
    enforce_eq17 : bool
        ``True`` in every production call; ``False`` drops eq. (17) (the negative control of
        ``tests/test_arm.py``, through ``tests/broken_kernels.py``).  The switch is one test per
        settled point, measured free against a copy with it folded to ``True``
        (``benchmarks/mixing.py --switch-cost``).

    Returns
    -------
    float
        ``log T(end | start)`` (``-inf`` when a forced run cannot reach ``target``).
    """
    family_id, params, x = model
    labels, sizes, stats, empty_row, active, where, cluster_count = partition
    log_v_table, log_w_table = tables
    n = x.shape[0]
    capacity = sizes.shape[0]
    original = labels.copy()
    slot_i0 = original[anchor_i]
    slot_j0 = original[anchor_j]
    is_split = slot_i0 == slot_j0
    inside = np.zeros(n, dtype=np.bool_)
    remaining_original = np.zeros(capacity, dtype=np.int64)
    for p in range(n):
        inside[p] = original[p] == slot_i0 or original[p] == slot_j0
        if not inside[p]:
            remaining_original[original[p]] += 1
    order = np.argsort(rank)
    # ---- groups: blocks of c = z^a v z^b v s inside s_i U s_j, in the order sigma
    group_of = np.full(n, -1, dtype=np.int64)
    group_key_a = np.empty(n, dtype=np.int64)
    group_key_b = np.empty(n, dtype=np.int64)
    group_key_s = np.empty(n, dtype=np.int64)
    group_first = np.empty(n, dtype=np.int64)
    group_size = np.zeros(n, dtype=np.int64)
    n_groups = 0
    for t in range(n):
        p = order[t]
        if not inside[p]:
            continue
        g = -1
        for h in range(n_groups):
            if (group_key_a[h] == labels_a[p] and group_key_b[h] == labels_b[p]
                    and group_key_s[h] == original[p]):
                g = h
                break
        if g < 0:
            g = n_groups
            group_key_a[g] = labels_a[p]
            group_key_b[g] = labels_b[p]
            group_key_s[g] = original[p]
            group_first[g] = p
            n_groups += 1
        group_of[p] = g
        group_size[g] += 1
    group_i = group_of[anchor_i]
    group_j = group_of[anchor_j]
    # ---- remove s_i U s_j and put back c_i, c_j (split) or c_i U c_j (merge)
    for p in range(n):
        if inside[p]:
            unassign_point(family_id, params, x, p, labels, sizes, stats, empty_row, active,
                           where, cluster_count)
    placed = ~inside
    settled = np.zeros(n, dtype=np.bool_)
    settled[anchor_i] = True
    settled[anchor_j] = True
    if forced:
        for p in range(n):
            if (not inside[p] and target[p] != target[anchor_i]
                    and target[p] != target[anchor_j]):
                settled[p] = True
    slot_i = free_slot(where)
    for p in range(n):
        if group_of[p] == group_i:
            assign_point(family_id, params, x, p, slot_i, labels, sizes, stats, active, where,
                         cluster_count)
            placed[p] = True
    slot_j = slot_i if not is_split else free_slot(where)
    for p in range(n):
        if group_of[p] == group_j:
            assign_point(family_id, params, x, p, slot_j, labels, sizes, stats, active, where,
                         cluster_count)
            placed[p] = True
    # ---- step 3: group moves of g', largest first, ties by the earliest point in sigma
    others = np.empty(n_groups, dtype=np.int64)
    keys = np.empty(n_groups, dtype=np.int64)
    n_others = 0
    for g in range(n_groups):
        if g != group_i and g != group_j:
            others[n_others] = g
            keys[n_others] = (n - group_size[g]) * n + rank[group_first[g]]
            n_others += 1
    group_order = others[:n_others][np.argsort(keys[:n_others])]
    log_weights = np.empty(capacity + 1)
    weights = np.empty(capacity + 1)
    option_slots = np.empty(capacity + 1, dtype=np.int64)
    row = empty_row.copy()
    log_t = 0.0
    decision = 0
    for position in range(n_others):
        g = group_order[position]
        size_g = group_size[g]
        k = cluster_count[0]
        for q in range(k):
            slot = active[q]
            row[:] = stats[slot]
            value = log_join_weight(log_w_table, sizes[slot], size_g)
            value = _add_group(family_id, params, x, group_of, g, row, value)
            log_weights[q] = -np.inf if np.isnan(value) else value
            option_slots[q] = slot
        value = log_open_weight(log_v_table, log_w_table, k, size_g)
        if value == -np.inf:
            log_weights[k] = -np.inf
        else:
            row[:] = empty_row
            value = _add_group(family_id, params, x, group_of, g, row, value)
            log_weights[k] = -np.inf if np.isnan(value) else value
        option_slots[k] = -1
        earmark = group_first[g]
        forced_index = -1
        if forced:
            forced_index = _forced_option(earmark, target, labels, placed, settled, anchor_i,
                                          anchor_j, option_slots, k + 1)
        slot, log_p = _choose_slot(log_weights, weights, option_slots, k + 1, forced,
                                   forced_index, uniforms[decision] if not forced else 0.0,
                                   where)
        decision += 1
        if slot < 0:
            return -np.inf
        log_t += log_p
        for p in range(n):
            if group_of[p] == g:
                assign_point(family_id, params, x, p, slot, labels, sizes, stats, active,
                             where, cluster_count)
                placed[p] = True
        settled[earmark] = True
    # ---- step 4: every other point in the order sigma
    for t in range(n):
        h = order[t]
        if h == anchor_i or h == anchor_j:
            continue
        if inside[h]:
            g = group_of[h]
            if g != group_i and g != group_j and group_first[g] == h:
                continue  # an earmark
            unassign_point(family_id, params, x, h, labels, sizes, stats, empty_row, active,
                           where, cluster_count)
            placed[h] = False
            log_prior_predictive = dispatch.log_predictive(family_id, params, empty_row, x[h])
            k = _join_and_new_log_weights(family_id, params, x, h, log_v_table, log_w_table,
                                          sizes, stats, active, cluster_count, log_prior_predictive,
                                          log_weights)
            for q in range(k):
                option_slots[q] = active[q]
            option_slots[k] = -1
            count = k + 1
        else:
            home = labels[h]
            if enforce_eq17 and remaining_original[home] == 1 and sizes[home] >= 2:
                # eq. (17): the last original member of a block that gained points stays
                if forced and (target[h] == target[anchor_i] or target[h] == target[anchor_j]):
                    return -np.inf
                settled[h] = True
                continue
            unassign_point(family_id, params, x, h, labels, sizes, stats, empty_row, active,
                           where, cluster_count)
            placed[h] = False
            count = 0
            log_weights[count] = _point_join_log_weight(family_id, params, x[h], slot_i, sizes,
                                                        stats, log_w_table)
            option_slots[count] = slot_i
            count += 1
            if is_split:
                log_weights[count] = _point_join_log_weight(family_id, params, x[h], slot_j,
                                                            sizes, stats, log_w_table)
                option_slots[count] = slot_j
                count += 1
            if sizes[home] > 0:
                log_weights[count] = _point_join_log_weight(family_id, params, x[h], home,
                                                            sizes, stats, log_w_table)
            else:
                value = log_open_weight(log_v_table, log_w_table, cluster_count[0], 1)
                if value > -np.inf:
                    row[:] = empty_row
                    dispatch.add_point(family_id, params, row, x[h])
                    value += dispatch.log_marginal(family_id, params, row)
                log_weights[count] = -np.inf if np.isnan(value) else value
            option_slots[count] = home
            count += 1
        forced_index = -1
        if forced:
            if inside[h]:
                forced_index = _forced_option(h, target, labels, placed, settled, anchor_i,
                                              anchor_j, option_slots, count)
            elif target[h] == target[anchor_i]:
                forced_index = 0
            elif target[h] == target[anchor_j]:
                forced_index = 1 if is_split else 0
            else:
                forced_index = count - 1
        slot, log_p = _choose_slot(log_weights, weights, option_slots, count, forced,
                                   forced_index, uniforms[decision] if not forced else 0.0,
                                   where)
        decision += 1
        if slot < 0:
            return -np.inf
        log_t += log_p
        assign_point(family_id, params, x, h, slot, labels, sizes, stats, active, where, cluster_count)
        placed[h] = True
        settled[h] = True
        if not inside[h] and slot != original[h]:
            remaining_original[original[h]] -= 1
    if forced:  # the end state must be the target partition
        forward_map = np.full(capacity, -1, dtype=np.int64)
        backward_map = np.full(n, -1, dtype=np.int64)
        for p in range(n):
            a = labels[p]
            b = target[p]
            if forward_map[a] == -1 and backward_map[b] == -1:
                forward_map[a] = b
                backward_map[b] = a
            elif forward_map[a] != b or backward_map[b] != a:
                return -np.inf
    return log_t


@njit(cache=True)
def disagreement_pair(labels_a, labels_b, uniform):
    """The pair ``(p, q)``, ``p < q``, of rank ``floor(uniform * count)`` among the pairs on
    which the two partitions disagree (``labels_a[p] == labels_a[q]`` differs from
    ``labels_b[p] == labels_b[q]``); ``(-1, -1)`` when they are the same partition.

    Returns
    -------
    p, q, count : int
    """
    n = labels_a.shape[0]
    count = 0
    for p in range(n):
        for q in range(p + 1, n):
            if (labels_a[p] == labels_a[q]) != (labels_b[p] == labels_b[q]):
                count += 1
    if count == 0:
        return -1, -1, 0
    wanted = min(int(uniform * count), count - 1)
    seen = 0
    for p in range(n):
        for q in range(p + 1, n):
            if (labels_a[p] == labels_a[q]) != (labels_b[p] == labels_b[q]):
                if seen == wanted:
                    return p, q, count
                seen += 1
    return -1, -1, count


@njit(cache=True)
def _forced_log_probabilities(model, partition, tables, labels_a, labels_b, anchor_i, anchor_j,
                              rank, targets, enforce_eq17, out):
    uniforms = np.zeros(1)
    for r in range(targets.shape[0]):
        start = Partition(partition.labels.copy(), partition.sizes.copy(),
                          partition.stats.copy(), partition.empty_row, partition.active.copy(),
                          partition.where.copy(), partition.cluster_count.copy())
        out[r] = arm_run(model, start, tables, labels_a, labels_b, anchor_i, anchor_j, rank,
                         True, targets[r], uniforms, enforce_eq17)


# ----------------------------------------------------------------------------- Python API


def _oriented(labels_a, labels_b, anchor_i, anchor_j):
    if labels_a[anchor_i] != labels_a[anchor_j]:
        labels_a, labels_b = labels_b, labels_a
    return labels_a, labels_b


def _library_labels(labels, n, name):
    labels = np.asarray(labels)
    if labels.shape != (n,):
        raise ValueError(f"{name} must be labels of shape ({n},); got shape {labels.shape}")
    if labels.dtype.kind not in "iu":
        raise ValueError(f"{name} must be integer labels; got dtype {labels.dtype}")
    return np.ascontiguousarray(labels, dtype=np.int64)  # any labelling (equality only)


def arm_transition_log_probabilities(state, labels_a, labels_b, anchor_i, anchor_j, rank,
                                     targets, log_v_table, log_w_table):
    """``log T(target | z)`` of a forced run from ``state`` to each target partition.

    ``state`` is not modified.  With the path unique, these sum to 1 over all partitions
    (the identity the tests check by enumeration).

    Parameters
    ----------
    state : PartitionState
    labels_a, labels_b : array of int, shape (n,)
        Library partitions (oriented here so that ``labels_a`` joins the anchors).
    anchor_i, anchor_j : int
        A pair on which ``labels_a`` and ``labels_b`` disagree.
    rank : array of int, shape (n,)
        Position of each point in the order :math:`\\sigma`.
    targets : array of int, shape (num_targets, n)
    log_v_table, log_w_table : ndarray of shape (n + 2,)

    Returns
    -------
    ndarray of float64, shape (num_targets,)
    """
    return _transition_log_probabilities(state, labels_a, labels_b, anchor_i, anchor_j, rank,
                                         targets, log_v_table, log_w_table, True)


def _transition_log_probabilities(state, labels_a, labels_b, anchor_i, anchor_j, rank,
                                  targets, log_v_table, log_w_table, enforce_eq17):
    tables = prior_tables(state.n, log_v_table, log_w_table)
    n = state.n
    labels_a = _library_labels(labels_a, n, "labels_a")
    labels_b = _library_labels(labels_b, n, "labels_b")
    if (labels_a[anchor_i] == labels_a[anchor_j]) == (labels_b[anchor_i] == labels_b[anchor_j]):
        raise ValueError("the library partitions must disagree on the anchor pair")
    labels_a, labels_b = _oriented(labels_a, labels_b, anchor_i, anchor_j)
    targets = np.ascontiguousarray(np.atleast_2d(targets), dtype=np.int64)
    out = np.empty(targets.shape[0])
    _forced_log_probabilities(state.model, state.partition, tables, labels_a, labels_b,
                              int(anchor_i), int(anchor_j),
                              np.ascontiguousarray(rank, dtype=np.int64), targets,
                              bool(enforce_eq17), out)
    return out


def _copy_partition(partition: Partition) -> Partition:
    """A copy of the mutable arrays (``empty_row`` shared: it is never written)."""
    return Partition(partition.labels.copy(), partition.sizes.copy(), partition.stats.copy(),
                     partition.empty_row, partition.active.copy(), partition.where.copy(),
                     partition.cluster_count.copy())


def _n_moved(old_labels, new_labels, capacity) -> int:
    """Points whose block, as a set of points, differs between the two labellings."""
    codes = old_labels * capacity + new_labels
    _, inverse, pair_counts = np.unique(codes, return_inverse=True, return_counts=True)
    old_counts = np.bincount(old_labels, minlength=capacity)
    new_counts = np.bincount(new_labels, minlength=capacity)
    pair = pair_counts[inverse.reshape(-1)]
    unchanged = (pair == old_counts[old_labels]) & (pair == new_counts[new_labels])
    return int(np.count_nonzero(~unchanged))


def _arm_proposal(model: Model, partition: Partition, tables: PriorTables, rng, labels_a,
                  labels_b) -> ARMProposal:
    n = model.x.shape[0]
    labels_a = _library_labels(labels_a, n, "labels_a")
    labels_b = _library_labels(labels_b, n, "labels_b")
    draws = rng.random(2 * n + 1)
    anchor_i, anchor_j, count = disagreement_pair(labels_a, labels_b, draws[0])
    if count == 0:
        return ARMProposal(MOVE_NONE, None, float("nan"), float("nan"), float("nan"))
    labels_a, labels_b = _oriented(labels_a, labels_b, anchor_i, anchor_j)
    rank = np.empty(n, dtype=np.int64)
    rank[np.argsort(draws[1:n + 1])] = np.arange(n)
    uniforms = draws[n + 1:]
    current = partition.labels
    move = MOVE_SPLIT if current[anchor_i] == current[anchor_j] else MOVE_MERGE
    candidate = _copy_partition(partition)
    log_forward = arm_run(model, candidate, tables, labels_a, labels_b, anchor_i, anchor_j,
                          rank, False, current, uniforms, True)
    reverse = _copy_partition(candidate)
    log_reverse = arm_run(model, reverse, tables, labels_a, labels_b, anchor_i, anchor_j, rank,
                          True, current, uniforms, True)
    log_ratio = (log_reverse + _log_target(model, candidate, tables) - log_forward
                 - _log_target(model, partition, tables))
    if math.isnan(log_ratio):
        log_ratio = -math.inf
    return ARMProposal(int(move), candidate, float(log_ratio), float(log_forward),
                       float(log_reverse))


def _log_target(model: Model, partition: Partition, tables: PriorTables) -> float:
    return log_target(model.family_id, model.params, tables.log_v, tables.log_w,
                      partition.sizes, partition.stats, partition.active,
                      partition.cluster_count)


def distinct_rows(rows) -> np.ndarray:
    """The distinct rows of ``rows`` (label arrays; canonical labels, so equal partitions are
    equal rows), in order of first appearance, as an int64 array (shape ``(0, 0)`` if none)."""
    distinct = {}
    for row in rows:
        row = np.asarray(row, dtype=np.int64)
        distinct.setdefault(row.tobytes(), row)
    if not distinct:
        return np.empty((0, 0), dtype=np.int64)
    return np.stack(list(distinct.values()))


LibrarySource = Callable[[Partition], "tuple[np.ndarray, np.ndarray] | None"]


def build_arm_move(library: LibrarySource
                   ) -> Callable[[Model, Partition, PriorTables, np.random.Generator], ARMInfo]:
    """Validate the options once; return ``move(model, partition, tables, rng) -> ARMInfo``.

    Parameters
    ----------
    library : callable
        ``library(partition) -> (labels_a, labels_b)`` or ``None``: the two library
        partitions :math:`z^a, z^b` of this move (``None``: no ARM move this time).  For an
        exact kernel their law must not depend on ``partition`` (the step adapter draws them
        from other chains or a frozen library; it may read ``partition`` to record history).

    Returns
    -------
    callable
        One ARM Metropolis–Hastings update, applied to ``partition`` in place if accepted.

    References
    ----------
    Herlau, Mørup, Schmidt & Teh, Algorithm 3 and eq. (8).
    """
    if not callable(library):
        raise TypeError("library must be a callable partition -> (labels_a, labels_b) or None")
    return _ARMMove(library)


class _ARMMove:
    """The transition of :func:`build_arm_move` (a class: copied with its step, whose bound
    method is usually the ``library``)."""

    def __init__(self, library: LibrarySource):
        self.library = library

    def __call__(self, model: Model, partition: Partition, tables: PriorTables,
                 rng: np.random.Generator) -> ARMInfo:
        pair = self.library(partition)
        proposal = None
        if pair is not None:
            proposal = _arm_proposal(model, partition, tables, rng, pair[0], pair[1])
        if proposal is None or proposal.move == MOVE_NONE:
            return ARMInfo(MOVE_NONE, False, float("nan"), 0,
                           int(partition.cluster_count[0]))
        accepted = metropolis_accept(proposal.log_accept_ratio, rng)
        n_moved = 0
        if accepted:
            candidate = proposal.candidate
            n_moved = _n_moved(partition.labels, candidate.labels, partition.sizes.shape[0])
            for name in ("labels", "sizes", "stats", "active", "where", "cluster_count"):
                getattr(partition, name)[:] = getattr(candidate, name)
        return ARMInfo(int(proposal.move), bool(accepted), float(proposal.log_accept_ratio),
                       n_moved, int(partition.cluster_count[0]))


class ARMTransitionInfo(NamedTuple):
    """What one draw of :func:`build_arm_transition` did.

    Attributes
    ----------
    sams : MovesThenGibbsInfo or None
        The SAMS updates before the ARM move (``None`` without them).
    arm : ARMInfo
        The ARM move.
    gibbs : GibbsInfo or None
        The Gibbs sweeps after it (``None`` without them).
    """

    sams: MovesThenGibbsInfo | None
    arm: ARMInfo
    gibbs: object


def build_arm_transition(library: LibrarySource, n_sams_updates: int = 0,
                         n_gibbs_sweeps: int = 1
                         ) -> Callable[[Model, Partition, PriorTables, np.random.Generator],
                                       ARMTransitionInfo]:
    """One draw of ``ARMStep``: ``n_sams_updates`` SAMS updates, one ARM move, Gibbs sweeps.

    Each part leaves the posterior invariant (the ARM move whenever the law of ``library``'s
    pair does not depend on the current partition), so does the composition (Tierney 1994).
    The SAMS updates (uniform anchors, ``kernels.sams.build_sams_move``) move the chain
    where the library partitions agree (e.g. all chains still in the one-cluster start) and,
    in a library collected from the chains' states, put split-merge states in it.

    Parameters
    ----------
    library : callable
        As for :func:`build_arm_move`.
    n_sams_updates : int, default 0
    n_gibbs_sweeps : int, default 1

    Returns
    -------
    callable
        ``transition(model, partition, tables, rng) -> ARMTransitionInfo`` (in place).
    """
    n_sams_updates = non_negative_integer(n_sams_updates, "n_sams_updates")
    sams = (build_moves_then_gibbs(build_sams_move(), n_moves=n_sams_updates)
            if n_sams_updates else None)
    return _ARMTransition(sams, build_moves_then_gibbs(build_arm_move(library), n_moves=1,
                                                       n_gibbs_sweeps=n_gibbs_sweeps))


class _ARMTransition:
    """The transition of :func:`build_arm_transition` (a class: copied with its step)."""

    def __init__(self, sams, arm_then_gibbs):
        self.sams = sams
        self.arm_then_gibbs = arm_then_gibbs

    def __call__(self, model: Model, partition: Partition, tables: PriorTables,
                 rng: np.random.Generator) -> ARMTransitionInfo:
        sams = self.sams(model, partition, tables, rng) if self.sams is not None else None
        (arm,), gibbs = self.arm_then_gibbs(model, partition, tables, rng)
        return ARMTransitionInfo(sams, arm, gibbs)


def arm_move(state, log_v_table, log_w_table, rng: np.random.Generator, labels_a, labels_b
             ) -> ARMInfo:
    """One ARM Metropolis–Hastings update of ``state`` (in place when accepted).

    Convenience form of :func:`build_arm_move` on a ``PartitionState`` with a fixed pair.

    Parameters
    ----------
    state : PartitionState
    log_v_table, log_w_table : ndarray of float64, shape (n + 2,)
        ``prior.tables(n)``.
    rng : numpy.random.Generator
    labels_a, labels_b : array of int, shape (n,)
        Library partitions :math:`z^a, z^b`, drawn independently of ``state`` for an exact
        kernel.  Equal partitions propose nothing (``MOVE_NONE``).

    Returns
    -------
    ARMInfo
    """
    move = build_arm_move(lambda partition: (labels_a, labels_b))
    tables = prior_tables(state.n, log_v_table, log_w_table)
    return move(state.model, state.partition, tables, rng)


