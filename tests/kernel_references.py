"""Plain references of kernel pieces, for the tests.

Each function recomputes a quantity of a numba kernel from complete log EPPFs / log
marginals, sharing no code with the kernel (scikit-learn's "fast code against naive code").
The exceptions are :func:`composed_gibbs_sweeps`, the unfused Gibbs sweep built from the
kernels' own primitives, which judges the fused sweep move for move, and
:func:`composed_cluster_sams_updates`, the cluster-anchor SAMS loop of the split-merge
start written out in Python over the SAMS proposal.
"""

from __future__ import annotations

import numba
import numpy as np
from scipy.special import logsumexp

from pymc_splitmerge.core.logweights import sample_log_weights
from pymc_splitmerge.core.relabel import canonical_labels
from pymc_splitmerge.core.slots import free_slot
from pymc_splitmerge.kernels.gibbs import SCANS, _join_and_new_log_weights, _prior_predictives
from pymc_splitmerge.kernels.state import assign_point, unassign_point
from pymc_splitmerge.testing.cluster_slots import log_placement

__all__ = [
    "composed_cluster_sams_updates",
    "composed_gibbs_sweeps",
    "propose_arm",
    "propose_rgsm",
    "propose_sams",
    "reference_arm_run",
    "reference_gibbs_sweep",
    "reference_incremental_log_weights",
    "reference_log_split_weight",
    "reference_point_conditional",
    "reference_restricted_scan",
    "reference_sequential_allocation",
    "reference_slot_conditional",
    "reference_slot_gibbs_sweep",
    "reference_slot_split_merge",
    "reference_two_way_log_probabilities",
]


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


# ----------------------------------------------------------------------------------------------
# Plain numpy reference (independent maths: full log EPPF + log marginal likelihoods)
# ----------------------------------------------------------------------------------------------


def _reference_log_joint(labels, x, prior, family):
    values, sizes = np.unique(labels, return_counts=True)
    total = float(prior.log_eppf(sizes))
    for value in values:
        total += float(family.log_marginal_of(x[labels == value]))
    return total


def reference_point_conditional(labels, i: int, x, prior, family):
    """Full conditional of point ``i`` from the joint ``p(c) p(x | c)`` (slow reference).

    Each candidate placement is scored by the *complete* log EPPF plus the sum of the
    clusters' log marginal likelihoods, so this shares no code with the kernel's ratio
    formulas.

    Parameters
    ----------
    labels : ndarray of int, shape (n,)
    i : int
    x : ndarray of shape (n, data_dim)
        Prepared data.
    prior : GibbsTypePrior
    family : ComponentFamily
        Numeric family.

    Returns
    -------
    targets : ndarray of int, shape (K + 1,)
        Labels of the clusters of ``c_{-i}`` (sorted), followed by ``-1`` for a new cluster.
    probabilities : ndarray of float, shape (K + 1,)
    """
    labels = np.asarray(labels, dtype=np.int64)
    others = np.delete(np.arange(labels.shape[0]), i)
    targets = np.unique(labels[others])
    fresh = int(labels.max()) + 1
    candidates = np.append(targets, fresh)
    log_joint = np.empty(candidates.shape[0])
    for j, target in enumerate(candidates):
        trial = labels.copy()
        trial[i] = target
        log_joint[j] = _reference_log_joint(trial, x, prior, family)
    probabilities = np.exp(log_joint - np.max(log_joint))
    return np.append(targets, -1), probabilities / probabilities.sum()


def reference_gibbs_sweep(labels, x, prior, family, rng, scan: str = "random"):
    """One collapsed Gibbs sweep in plain numpy (reference for tests and benchmarks).

    Parameters
    ----------
    labels : ndarray of int, shape (n,)
        Current labels (not modified).
    x : ndarray of shape (n, data_dim)
    prior : GibbsTypePrior
    family : ComponentFamily
    rng : numpy.random.Generator
    scan : {"random", "systematic"}

    Returns
    -------
    ndarray of int, shape (n,)
        New labels (not canonical).
    """
    if scan not in SCANS:
        raise ValueError(f"scan must be one of {SCANS}; got {scan!r}")
    labels = np.asarray(labels, dtype=np.int64).copy()
    n = labels.shape[0]
    order = rng.permutation(n) if scan == "random" else np.arange(n)
    for i in order:
        targets, probabilities = reference_point_conditional(labels, i, x, prior, family)
        choice = rng.choice(targets.shape[0], p=probabilities)
        labels[i] = int(labels.max()) + 1 if targets[choice] < 0 else targets[choice]
    return labels


def reference_two_way_log_probabilities(family, x_row, points_a, points_b, x, log_w_table):
    """Plain reference of :func:`two_way_log_probabilities` from log marginals.

    The predictive is ``log m(cluster + x_row) - log m(cluster)`` through
    ``family.log_marginal_of`` (independent of the incremental statistics).
    """
    x_row = np.asarray(x_row, dtype=np.float64)[None, :]
    values = []
    for points in (points_a, points_b):
        rows = x[np.asarray(points, dtype=np.int64)]
        log_predictive = (family.log_marginal_of(np.vstack([rows, x_row]))
                          - family.log_marginal_of(rows))
        m = len(points)
        values.append(log_w_table[m + 1] - log_w_table[m] + log_predictive)
    values = np.array(values)
    return tuple(values - np.logaddexp(values[0], values[1]))


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


def reference_restricted_scan(family, x, anchor_i, anchor_j, members, launch_sides,
                              final_sides, log_w_table) -> float:
    """Plain reference: log probability that one restricted scan from ``launch_sides``
    ends at ``final_sides`` (log marginals only, no incremental statistics)."""
    sides = [int(s) for s in launch_sides]
    log_probability = 0.0
    for t, k in enumerate(members):
        others = [(int(m), sides[u]) for u, m in enumerate(members) if u != t]
        points_a = [int(anchor_i)] + [m for m, s in others if s == 0]
        points_b = [int(anchor_j)] + [m for m, s in others if s == 1]
        log_pa, log_pb = reference_two_way_log_probabilities(family, x[k], points_a, points_b,
                                                             x, log_w_table)
        sides[t] = int(final_sides[t])
        log_probability += log_pa if sides[t] == 0 else log_pb
    return float(log_probability)


# --------------------------------------------------------------------------- ARM


def reference_arm_run(family, x, labels, labels_a, labels_b, anchor_i, anchor_j, rank,
                      log_v_table, log_w_table, *, target=None, rng=None, enforce_eq17=True):
    """Plain-Python Algorithm 3 over lists of point sets (slow reference for the tests).

    Every weight is a difference of complete log marginals (``family.log_marginal_of``) and
    table entries, so this shares no statistics code with :func:`arm_run`.

    Parameters
    ----------
    family : ComponentFamily
        Numeric family.
    x : ndarray of shape (n, data_dim)
        Prepared data.
    labels : array of int, shape (n,)
        Start partition.
    labels_a, labels_b : array of int, shape (n,)
        Library partitions, oriented (``labels_a`` joins the anchors, ``labels_b`` not).
    anchor_i, anchor_j : int
    rank : array of int, shape (n,)
    log_v_table, log_w_table : ndarray of shape (n + 2,)
    target : array of int, shape (n,), optional
        Forced run to this partition; otherwise a sampled run with ``rng``.
    rng : numpy.random.Generator, optional
    enforce_eq17 : bool

    Returns
    -------
    labels : ndarray of int64, shape (n,)
        End partition (canonical), or ``None`` if a forced run cannot reach ``target``.
    log_probability : float
    """
    n = len(labels)
    labels = [int(v) for v in labels]
    la = [int(v) for v in labels_a]
    lb = [int(v) for v in labels_b]
    forced = target is not None
    i, j = int(anchor_i), int(anchor_j)
    order = sorted(range(n), key=lambda p: rank[p])
    is_split = labels[i] == labels[j]
    inside = {p for p in range(n) if labels[p] in (labels[i], labels[j])}

    def log_m(points):
        return float(family.log_marginal_of(x[sorted(points)])) if points else 0.0

    blocks: list[set] = []  # current blocks (lists of point sets)
    original_block = {}
    for value in sorted({labels[p] for p in range(n) if p not in inside}):
        block = {p for p in range(n) if labels[p] == value}
        blocks.append(block)
        for p in block:
            original_block[p] = frozenset(block)
    groups: dict = {}
    for p in order:
        if p in inside:
            groups.setdefault((la[p], lb[p], labels[p]), []).append(p)
    group_list = list(groups.values())
    group_i = next(g for g in group_list if i in g)
    group_j = next(g for g in group_list if j in g)
    if is_split:
        blocks.append(set(group_i))
        blocks.append(set(group_j))
    else:
        blocks.append(set(group_i) | set(group_j))
    others = [g for g in group_list if g is not group_i and g is not group_j]
    others.sort(key=lambda g: (-len(g), rank[g[0]]))
    earmarks = {g[0] for g in others}
    settled = {i, j}
    if forced:
        settled |= {p for p in range(n) if p not in inside
                    and target[p] != target[i] and target[p] != target[j]}

    def block_of(p):
        return next((b for b in blocks if p in b), None)

    def choose(log_weights, forced_block, options):
        log_weights = np.asarray(log_weights, dtype=float)
        top = np.max(log_weights)
        if top == -np.inf:
            return None, -np.inf
        log_total = top + np.log(np.sum(np.exp(log_weights - top)))
        if forced:
            index = next((k for k, b in enumerate(options) if b is forced_block), None)
            if index is None or log_weights[index] == -np.inf:
                return None, -np.inf
        else:
            probabilities = np.exp(log_weights - log_total)
            index = int(rng.choice(len(options), p=probabilities / probabilities.sum()))
        return index, float(log_weights[index] - log_total)

    def forced_block_for(point):
        if target[point] == target[i]:
            return block_of(i)
        if target[point] == target[j]:
            return block_of(j)
        found = {id(block_of(p)): block_of(p) for p in settled
                 if p != point and target[p] == target[point] and block_of(p) is not None}
        if len(found) > 1:
            return "impossible"
        return next(iter(found.values())) if found else None  # None: a new block

    def new_log_weight(points, n_blocks):
        if log_v_table[n_blocks + 1] == -np.inf:
            return -np.inf
        return (log_v_table[n_blocks + 1] - log_v_table[n_blocks] + log_w_table[len(points)]
                + log_m(points))

    def join_log_weight(block, points):
        return (log_w_table[len(block) + len(points)] - log_w_table[len(block)]
                + log_m(block | set(points)) - log_m(block))

    log_t = 0.0

    def place(points, options, log_weights, forced_block):
        nonlocal log_t
        index, log_p = choose(log_weights, forced_block, options)
        if index is None:
            return False
        log_t += log_p
        if options[index] is None:
            blocks.append(set(points))
        else:
            options[index].update(points)
        return True

    for group in others:
        options = [*blocks, None]
        log_weights = [join_log_weight(b, group) for b in blocks]
        log_weights.append(new_log_weight(group, len(blocks)))
        forced_block = forced_block_for(group[0]) if forced else None
        if forced_block == "impossible" or not place(group, options, log_weights, forced_block):
            return None, -np.inf
        settled.add(group[0])
    for h in order:
        if h in (i, j) or h in earmarks:
            continue
        home = block_of(h)
        if h not in inside:
            gained = len(home) >= 2 and len(home & original_block[h]) == 1
            if enforce_eq17 and gained:
                if forced and target[h] in (target[i], target[j]):
                    return None, -np.inf
                settled.add(h)
                continue
        home.discard(h)
        if not home:
            blocks.remove(home)
        forced_block = None
        if h in inside:
            options = [*blocks, None]
            log_weights = [join_log_weight(b, [h]) for b in blocks]
            log_weights.append(new_log_weight([h], len(blocks)))
            forced_block = forced_block_for(h) if forced else None
        else:
            options = [block_of(i)] + ([block_of(j)] if is_split else [])
            log_weights = [join_log_weight(b, [h]) for b in options]
            if home:
                options.append(home)
                log_weights.append(join_log_weight(home, [h]))
            else:
                options.append(None)
                log_weights.append(new_log_weight([h], len(blocks)))
            if forced:
                if target[h] == target[i]:
                    forced_block = options[0]
                elif target[h] == target[j]:
                    forced_block = options[1] if is_split else options[0]
                else:
                    forced_block = options[-1]
        if forced_block == "impossible":
            return None, -np.inf
        if not place([h], options, log_weights, forced_block):
            return None, -np.inf
        settled.add(h)
    end = np.empty(n, dtype=np.int64)
    for label, block in enumerate(blocks):
        for p in block:
            end[p] = label
    end = canonical_labels(end)
    if forced and not np.array_equal(end, canonical_labels(np.asarray(target))):
        return None, -np.inf
    return end, float(log_t)


@numba.njit(cache=True)
def composed_gibbs_sweeps(model, partition, tables, n_gibbs_sweeps, random_scan):
    """Plain composition of the shared primitives: the judge of ``kernels.gibbs._gibbs_sweeps_fields``.

    ``unassign_point``, ``_join_and_new_log_weights``, ``sample_log_weights`` and
    ``assign_point`` in turn (the sweep before it was fused); for the same numba seed it must
    make exactly the same moves.
    """
    family_id, params, x = model
    labels, sizes, stats, empty_row, active, where, cluster_count = partition
    log_v_table, log_w_table = tables
    n = x.shape[0]
    log_prior_predictive = np.empty(n)
    _prior_predictives(family_id, params, x, empty_row, log_prior_predictive)
    log_weights = np.empty(sizes.shape[0])
    order = np.arange(n)
    n_changed = 0
    n_evaluations = 0
    for _ in range(n_gibbs_sweeps):
        if random_scan:
            order = np.random.permutation(n)
        for position in range(n):
            i = order[position]
            old = unassign_point(family_id, params, x, i, labels, sizes, stats, empty_row,
                                 active, where, cluster_count)
            was_singleton = sizes[old] == 0
            k = _join_and_new_log_weights(family_id, params, x, i, log_v_table, log_w_table,
                                          sizes, stats, active, cluster_count,
                                          log_prior_predictive[i], log_weights)
            n_evaluations += k
            choice = sample_log_weights(log_weights, k + 1, np.random.random())
            if choice < 0:
                slot = old
            elif choice == k:
                slot = old if was_singleton else free_slot(where)
            else:
                slot = active[choice]
            if slot != old and not (was_singleton and choice == k):
                n_changed += 1
            assign_point(family_id, params, x, i, slot, labels, sizes, stats, active, where,
                         cluster_count)
    return n_changed, n_evaluations


def composed_cluster_sams_updates(model, partition, tables, n_updates: int, seed: int, *,
                                  anchor_law_ratio: bool = True) -> int:
    """Plain-Python twin of ``kernels.sams._sams_updates`` (cluster anchors): the anchor law
    and its log ratio written out here, the proposal from ``sams_proposal_core`` and
    ``merge_surely_rejected`` (each tested on its own), the uniforms in the same order from
    ``np.random.RandomState(seed)`` (numba's generator: the same Mersenne Twister and
    seeding).  Updates ``partition`` in place; returns the number accepted.

    ``anchor_law_ratio=False`` drops the anchor law's log ratio from the acceptance ratio
    (and from the early merge rejection): not invariant, the negative control of
    ``tests/broken_kernels.py``."""
    import math

    from pymc_splitmerge.kernels.anchors import uniform_anchors
    from pymc_splitmerge.kernels.sams import merge_surely_rejected, sams_proposal_core
    from pymc_splitmerge.kernels.splitmerge_common import apply_proposal, metropolis_accepts

    stream = np.random.RandomState(seed)
    labels, active = partition.labels, partition.active
    pair = np.empty(2, dtype=np.int64)
    accepted = 0
    for _ in range(n_updates):
        k = int(partition.cluster_count[0])
        split_type = k == 1 or stream.random_sample() < 0.5
        if split_type:
            slot = active[int(stream.random_sample() * k)]
            members = np.flatnonzero(labels == slot)
            first_two = stream.random_sample(2)
            if members.size < 2:
                continue
            uniform_anchors.py_func(members.size, first_two, pair)
            anchor_i, anchor_j = members[pair[0]], members[pair[1]]
            m = members.size
        else:
            uniform_anchors.py_func(k, stream.random_sample(2), pair)
            block_a = np.flatnonzero(labels == active[pair[0]])
            block_b = np.flatnonzero(labels == active[pair[1]])
            anchor_i = block_a[int(stream.random_sample() * block_a.size)]
            anchor_j = block_b[int(stream.random_sample() * block_b.size)]
            m = block_a.size + block_b.size
        uniform = stream.random_sample()
        # log P(anchors | proposed state) - log P(anchors | current state)
        if split_type:
            log_forward = math.log(1.0 if k == 1 else 0.5) - math.log(k) - math.log(m * (m - 1))
        else:
            log_forward = (math.log(0.5) - math.log(k * (k - 1))
                           - math.log(block_a.size * block_b.size))
            log_reverse = (math.log(1.0 if k - 1 == 1 else 0.5) - math.log(k - 1)
                           - math.log(m * (m - 1)))
            log_offset = log_reverse - log_forward if anchor_law_ratio else 0.0
            if merge_surely_rejected.py_func(model, partition, tables, anchor_i, anchor_j,
                                             log_offset, uniform):
                continue
        proposal_uniforms = np.zeros(2 * labels.shape[0])
        proposal_uniforms[:2 * (m - 2)] = stream.random_sample(2 * (m - 2))
        _, log_ratio, moving, target = sams_proposal_core(
            model, partition, tables, anchor_i, anchor_j, proposal_uniforms)
        if split_type:
            size_a, size_b = moving.shape[0], m - moving.shape[0]
            log_reverse = math.log(0.5) - math.log((k + 1) * k) - math.log(size_a * size_b)
        if anchor_law_ratio:
            log_ratio += log_reverse - log_forward
        if metropolis_accepts.py_func(log_ratio, uniform):
            apply_proposal(model, partition, moving, target)
            accepted += 1
    return accepted


def reference_incremental_log_weights(family, x, points, n_anchors, n_other_clusters,
                                      log_v_table, log_w_table, decisions, ancestors,
                                      annealing, generations=None):
    """Plain-Python recomputation of the incremental log weights of a CSMC sweep.

    Given the lineage (``decisions``, ``ancestors`` of shape (n, N), as filled by
    ``csmc_sweep``), every particle's partition of ``σ_1..σ_{t-1}`` is rebuilt explicitly and
    ``γ_t`` of every allowed option is computed from scratch with eq. (7)
    (``log V(n_total, K_other + #blocks) + Σ_b log W(|b|) + log L(y_b)``, the latter by
    ``family.log_marginal_of``), independently of the incremental numba code.

    Returns
    -------
    log_incremental, log_proposals : ndarray of float64, shape (generations, N)
    """
    points = np.asarray(points)
    n = points.shape[0]
    m = n_anchors
    generations = n if generations is None else generations
    big_n = decisions.shape[1]
    use_annealing = annealing and n > m

    def log_gamma(blocks_of_points, upto):
        members = {}
        for t in range(upto):
            members.setdefault(int(blocks_of_points[t]), []).append(points[t])
        value = float(log_v_table[n_other_clusters + len(members)])
        for idx in members.values():
            value += float(log_w_table[len(idx)]) + float(family.log_marginal_of(x[idx]))
        return value, len(members)

    def path(t, p):  # decisions of particle p at generation t, generations 0..t
        out = np.empty(t + 1, dtype=np.int64)
        for u in range(t, -1, -1):
            out[u] = decisions[u, p]
            p = ancestors[u, p]
        return out

    log_incremental = np.zeros((generations, big_n))
    log_proposals = np.zeros((generations, big_n))
    for t in range(1, generations):
        for p in range(big_n):
            full = path(t, p)
            parent = full[:t]
            log_previous, n_blocks = log_gamma(parent, t)
            options = list(range(n_blocks)) + ([n_blocks] if t < m else [])
            log_options = []
            for j in options:
                value, _ = log_gamma(np.append(parent, j), t + 1)
                log_options.append(value - log_previous)
            log_options = np.array(log_options)
            finite = np.isfinite(log_options)
            log_total = np.logaddexp.reduce(log_options[finite])
            choice = full[t]
            if use_annealing and t < m:
                log_incremental[t, p] = np.log(finite.sum())
                log_proposals[t, p] = -np.log(finite.sum())
            else:
                log_incremental[t, p] = log_total
                log_proposals[t, p] = log_options[choice] - log_total
                if use_annealing:
                    anchor_blocks = parent[:m]
                    log_anchor, _ = log_gamma(anchor_blocks, m)
                    log_incremental[t, p] += log_anchor / (n - m)
    return log_incremental, log_proposals


# --------------------------------------------------------------------------- proposals alone


def propose_sams(state, log_v_table, log_w_table, rng, anchor_proposal=None):
    """A SAMS split or merge proposed from ``state`` (a ``PartitionState``), not applied."""
    from pymc_splitmerge.kernels.sams import _sams_proposal
    from pymc_splitmerge.kernels.state import prior_tables

    tables = prior_tables(state.n, log_v_table, log_w_table)
    return _sams_proposal(state.model, state.partition, tables, rng, anchor_proposal)


def propose_rgsm(state, log_v_table, log_w_table, rng, n_intermediate_scans=5):
    """A restricted-Gibbs split or merge (Algorithm 2) proposed from ``state``, not applied."""
    from pymc_splitmerge.kernels.rgsm import _rgsm_proposal
    from pymc_splitmerge.kernels.state import prior_tables

    tables = prior_tables(state.n, log_v_table, log_w_table)
    return _rgsm_proposal(state.model, state.partition, tables, rng, n_intermediate_scans)


def propose_arm(state, log_v_table, log_w_table, rng, labels_a, labels_b):
    """An ARM candidate built from ``state`` and the library pair, not applied."""
    from pymc_splitmerge.kernels.arm import _arm_proposal
    from pymc_splitmerge.kernels.state import prior_tables

    tables = prior_tables(state.n, log_v_table, log_w_table)
    return _arm_proposal(state.model, state.partition, tables, rng, labels_a, labels_b)


# ---------------------------------------------------- cluster slots (kernels.cluster_slots)
def _log_slot_target(labels, log_likelihood, prior, placement: bool) -> float:
    capacity = log_likelihood.shape[1]
    sizes = np.bincount(labels, minlength=capacity)
    value = prior.log_eppf(sizes) + log_likelihood[np.arange(labels.size), labels].sum()
    if placement:
        value += log_placement(int(np.count_nonzero(sizes)), capacity)
    return value


def reference_slot_conditional(log_likelihood, labels, i: int, prior,
                               placement: bool = True) -> np.ndarray:
    """Full conditional of ``labels[i]`` over the ``C`` slots, from the slot target itself."""
    capacity = log_likelihood.shape[1]
    values = np.empty(capacity)
    for slot in range(capacity):
        proposal = labels.copy()
        proposal[i] = slot
        values[slot] = _log_slot_target(proposal, log_likelihood, prior, placement)
    return np.exp(values - logsumexp(values))


def reference_slot_gibbs_sweep(log_likelihood, labels, prior, rng, placement: bool = True):
    """One random-scan sweep of :func:`reference_slot_conditional` updates (a new array)."""
    labels = labels.copy()
    for i in rng.permutation(labels.size):
        probabilities = reference_slot_conditional(log_likelihood, labels, i, prior, placement)
        labels[i] = rng.choice(probabilities.size, p=probabilities)
    return labels


def _two_way(log_a, log_b, size_a, size_b):
    weights = np.array([np.log(size_a) + log_a, np.log(size_b) + log_b])
    return weights - logsumexp(weights)


def _log_cluster_point_anchor_probability(labels, i, j) -> float:
    """``log P(i, j)`` of cluster-point anchors: ``j`` uniform in a uniform occupied cluster,
    ``i`` uniform among the other points."""
    sizes = np.bincount(labels)
    return -(np.log(np.count_nonzero(sizes)) + np.log(sizes[labels[j]])
             + np.log(labels.size - 1))


def reference_slot_split_merge(log_likelihood, labels, prior, rng, placement: bool = True,
                               cluster_point: bool = False):
    """One split-merge update as :func:`kernels.cluster_slots.slot_split_merge`, with the
    target ratio from the slot target itself (a new label array); ``cluster_point``: the
    anchors' probability ratio from the two label arrays themselves."""
    n, capacity = log_likelihood.shape
    sizes = np.bincount(labels, minlength=capacity)
    if cluster_point:
        j = rng.choice(np.flatnonzero(labels == rng.choice(np.flatnonzero(sizes))))
        i = rng.choice(np.delete(np.arange(n), j))
    else:
        i, j = rng.choice(n, size=2, replace=False)
    k = labels[i]
    proposal = labels.copy()

    def log_slot_choice(chosen, empty):
        weights = log_likelihood[j, empty]
        return log_likelihood[j, chosen] - logsumexp(weights)

    if labels[j] == k:
        empty = np.flatnonzero(sizes == 0)
        if empty.size == 0:
            return labels.copy()
        weights = np.exp(log_likelihood[j, empty] - log_likelihood[j, empty].max())
        new = empty[rng.choice(empty.size, p=weights / weights.sum())]
        log_proposal = log_slot_choice(new, empty)
        proposal[j] = new
        size_a = size_b = 1
        for point in rng.permutation(np.flatnonzero(labels == k)):
            if point in (i, j):
                continue
            log_p = _two_way(log_likelihood[point, k], log_likelihood[point, new], size_a,
                             size_b)
            if rng.random() < np.exp(log_p[1]):
                proposal[point] = new
                size_b += 1
                log_proposal += log_p[1]
            else:
                size_a += 1
                log_proposal += log_p[0]
        log_ratio = (_log_slot_target(proposal, log_likelihood, prior, placement)
                     - _log_slot_target(labels, log_likelihood, prior, placement) - log_proposal)
    else:
        other = labels[j]
        proposal[labels == other] = k
        empty_after = np.flatnonzero((sizes == 0) | (np.arange(capacity) == other))
        log_proposal = log_slot_choice(other, empty_after)
        size_a = size_b = 1
        for point in rng.permutation(np.flatnonzero((labels == k) | (labels == other))):
            if point in (i, j):
                continue
            log_p = _two_way(log_likelihood[point, k], log_likelihood[point, other], size_a,
                             size_b)
            if labels[point] == other:
                size_b += 1
                log_proposal += log_p[1]
            else:
                size_a += 1
                log_proposal += log_p[0]
        log_ratio = (_log_slot_target(proposal, log_likelihood, prior, placement)
                     - _log_slot_target(labels, log_likelihood, prior, placement) + log_proposal)
    if cluster_point:
        log_ratio += (_log_cluster_point_anchor_probability(proposal, i, j)
                      - _log_cluster_point_anchor_probability(labels, i, j))
    if np.log(rng.random()) < log_ratio:
        return proposal
    return labels.copy()
