r"""Particle Gibbs split-merge (PGSM) kernel (Bouchard-Côté, Doucet & Roth 2017).

One PGSM transition (paper, Algorithms 1-3):

1. draw anchors ``s`` (``|s| = m >= 2``) from a proposal ``h`` that does not depend on the
   current partition (``kernels.anchors``; Algorithm 1, line 2);
2. closure ``s̄`` = union of the anchors' clusters; the restricted partition ``c̄`` = those
   clusters; the ``K_other = K - |c̄|`` other clusters stay fixed;
3. permutation ``σ`` of ``s̄``: the anchors first in uniform order, then the other points of
   ``s̄`` in uniform order (Algorithm 2; App. D item 1);
4. conditional SMC over ``n = |s̄|`` generations with ``N`` particles (Algorithm 3); the
   reference path ``(φ^σ)^{-1}(c̄)`` is pinned as particle 0 with ancestor 0 at every
   resampling; conditional multinomial resampling happens only when the relative ESS of the
   previous weights falls below ``β`` (``β = 0``: never; ``β = 1``: always);
5. a particle is drawn from the final normalised weights and ``s̄`` is re-partitioned
   accordingly.  This is an exact particle-Gibbs update of ``c̄`` (no MH step).

Encoding of a particle (Fig. 2 and App. D).  A particle's state after generation ``t`` is
(partition of the anchors seen so far, block joined by ``σ_t``).  Blocks are numbered by first
appearance along ``σ``, so a state is stored as ``(n_blocks, block)``.  For ``m = 2`` the four
states of Fig. 2 are::

    #1 = (1, 0) at t = 1        first anchor alone
    #2 = (1, 0) at t >= 2       merge state (absorbing: one block, every point joins it)
    #3 = (2, 0)                 split state, point joins the block of σ_1
    #4 = (2, 1)                 split state, point joins the block of σ_2

(``particle_state_number`` maps a stored state to this numbering).  Allowed transitions ``S(x)``:
while ``t <= m`` (anchor phase) the anchor ``σ_t`` joins any existing block or opens a new one;
for ``t > m`` the point joins one of the ``n_blocks`` blocks.  Every block therefore contains an
anchor, which is exactly the support of ``π̄`` (eq. 5); ``n_blocks = 1`` after the anchor phase
is the absorbing merge state.

Targets (eq. 7, with the Gibbs-type prior of eq. 3, ``τ1 = V``, ``τ2 = W``)::

    log γ_t(x_t) = log V(n_total, K_other + n_blocks) + Σ_b [log W(|b|) + log L(y_b)]

over the blocks ``b`` of the particle at time ``t`` (``n_total`` = number of data points; the
``V`` term depends on the number of blocks, which matters for Pitman-Yor / finite / MFM).
Fully adapted proposals ``q_t ∝ γ_t`` over ``S(x_{t-1})`` and incremental weights
``w_t = Σ_{x' ∈ S(x_{t-1})} γ_t(x_{t-1}, x') / γ_{t-1}(x_{t-1})`` (eqs. 8-10).  With
``annealing=True`` (§3.4, eqs. 13-16 with the App. D substitutions) the intermediate targets
are ``γ̂_t = 1[γ_t > 0]`` for ``t <= m`` and ``γ̂_t = γ_m^{ζ_t} γ_t / γ_m`` for ``t > m``, with
``ζ_t = (t - m) / (n - m)``, so the incremental weight for ``t > m`` is
``γ_m^{1/(n-m)} Σ_{x'} γ_t(x_{t-1}, x') / γ_{t-1}(x_{t-1})``.  (The indicator also drops anchor
states whose ``V`` is zero, e.g. too many clusters for a finite prior; any such state has
``γ_n = 0`` anyway.)  If ``n = m`` annealing is switched off, since ``γ̂_n`` must equal ``γ_n``
(Assumption 3).

Early stopping: once every particle is in the absorbing merge state all particles coincide
from then on and the result is the merge.

Cost (§3.5): every particle carries the sufficient statistics of at most ``m`` blocks
(rows ``p m .. p m + m - 1`` of one ``(N m, stat_dim)`` pool); a generation costs at most
``O(N m)`` predictive evaluations, independent of the number of clusters, computed once per
*distinct* particle (copies left by resampling, or particles whose decisions coincided,
reuse their root's values) in one batched ``dispatch.log_predictive_many`` call.  The whole
sweep is one ``@njit`` function; the lineage is stored as ``(n, N)`` ancestor/decision
arrays and traced back once at the end.

References
----------
Bouchard-Côté, A., Doucet, A. and Roth, A. (2017). Particle Gibbs split-merge sampling for
Bayesian inference in mixture models. JMLR 18(28). Algorithms 1-3, eqs. (5)-(16), App. B-D.
Andrieu, C., Doucet, A. and Holenstein, R. (2010). Particle Markov chain Monte Carlo methods.
JRSS B 72(3).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from pymc_splitmerge.components import dispatch
from pymc_splitmerge.core.jit import njit
from pymc_splitmerge.core.logweights import exp_shifted, normalise_log_weights
from pymc_splitmerge.core.slots import free_slot, reset_row
from pymc_splitmerge.kernels.rng import numba_seed_from
from pymc_splitmerge.kernels.smc import (
    SeatingStep,
    propose,
    relative_ess,
    resample_if_degenerate,
    sample_index,
)
from pymc_splitmerge.kernels.splitmerge_common import (  # the one set of move codes
    MOVE_MERGE,
    MOVE_NAMES,
    MOVE_NONE,
    MOVE_REALLOCATE,
    MOVE_SPLIT,
)
from pymc_splitmerge.kernels.state import Partition, PriorTables, add, make_model, remove
from pymc_splitmerge.priors.seating import log_join_weight, log_open_weight

__all__ = [
    "MOVE_MERGE",
    "MOVE_NAMES",
    "MOVE_NONE",
    "MOVE_REALLOCATE",
    "MOVE_SPLIT",
    "Lineage",
    "PGSMInfo",
    "PGSMOptions",
    "build_pgsm_move",
    "closure_of",
    "csmc_sweep",
    "particle_state_number",
    "pgsm_move",
    "pgsm_transition",
    "validate_pgsm_options",
]



class PGSMInfo(NamedTuple):
    """What one PGSM transition did.

    Attributes
    ----------
    move : int
        ``MOVE_NONE`` (restricted partition unchanged), ``MOVE_SPLIT`` (more blocks),
        ``MOVE_MERGE`` (fewer blocks) or ``MOVE_REALLOCATE`` (same number of blocks, changed).
    anchors : ndarray of int64, shape (m,)
    closure_size : int
        ``|s̄|``.
    resampling_events : int
        Number of resampling steps performed.
    relative_ess : float
        Relative ESS of the final weights (1.0 when the sweep stopped early in the merge state).
    generations : int
        Number of generations run (``< closure_size`` when stopped early).
    """

    move: int
    anchors: np.ndarray
    closure_size: int
    resampling_events: int
    relative_ess: float
    generations: int


def particle_state_number(t: int, n_blocks: int, block: int) -> int:
    """Number (1-4) of a ``|s| = 2`` particle's state at generation ``t`` (1-based), as the
    paper's Fig. 2 numbers them: 1 first anchor alone, 2 merge, 3 / 4 split with the point in
    the block of the first / second anchor."""
    if t == 1:
        return 1
    if n_blocks == 1:
        return 2
    return 3 + block


# --------------------------------------------------------------------------- structures


class PGSMOptions(NamedTuple):
    """Options of one PGSM transition (numba-typed; validated by :func:`pgsm_move`)."""

    num_particles: int
    """``N >= 2``."""
    resampling_threshold: float
    """``β`` in [0, 1]: resample when the relative ESS falls below it."""
    annealing: bool
    """Annealed intermediate targets of §3.4."""
    conditional: bool
    """Pin the reference path as particle 0 (PGSM's conditional SMC).  ``False`` runs plain
    SMC, which is not an invariant PGSM update: only the tests' negative control sets it
    (``tests/broken_kernels.py``).  The switch is measured free: ``benchmarks/pgsm_cost.py
    --switch-cost`` times this kernel against a copy with it folded to ``True`` (ratio 1.03,
    inside the harness's noise; ``docs/benchmarks.md``)."""
    deduplicate: bool = True
    """Reuse the computations of identical particles (exact: changes no number)."""


class Lineage(NamedTuple):
    """What a conditional SMC sweep records per generation ``t`` and particle ``p`` (n, N)."""

    decisions: np.ndarray
    """int64: block joined by ``σ_t`` in particle ``p``."""
    ancestors: np.ndarray
    """int64: index at generation ``t - 1`` of its parent (row 0: itself)."""
    log_incremental: np.ndarray
    """float64: log incremental weight (shape (1, N): not recorded)."""
    log_proposals: np.ndarray
    """float64: log proposal probability of the chosen decision (shape (1, N): not recorded)."""


@njit(cache=True)
def empty_lineage(n, num_particles, record_weights):
    """A :class:`Lineage` for ``n`` generations of ``num_particles`` particles.

    Without ``record_weights`` the weight arrays have one row (a move only needs the
    decisions and ancestors; the tests record the weights to check them).
    """
    rows = n if record_weights else 1
    return Lineage(np.empty((n, num_particles), dtype=np.int64),
                   np.empty((n, num_particles), dtype=np.int64),
                   np.empty((rows, num_particles)), np.empty((rows, num_particles)))


class BlockParticles(NamedTuple):
    """The PGSM particle population: partitions of the anchors' blocks (stacked arrays).

    Block ``j`` of particle ``p`` (numbered by first appearance along ``σ``) has statistics
    row ``stats[p * m + j]`` and size ``sizes[p, j]``; ``n_blocks[p]`` blocks are open.  The
    rows form one 2-D pool so that a generation's predictives are one batched
    ``dispatch.log_predictive_many`` call over the rows of all distinct particles.
    """

    stats: np.ndarray
    """float64 (N * m, stat_dim): row ``p * m + j`` is block ``j`` of particle ``p``."""
    sizes: np.ndarray
    """int64 (N, m)."""
    n_blocks: np.ndarray
    """int64 (N,)."""
    log_gamma: np.ndarray
    """float64 (N,): ``log γ_t`` of eq. (7)."""
    log_gamma_anchor: np.ndarray
    """float64 (N,): ``log γ_m`` (end of the anchor phase; annealing)."""


@njit(cache=True)
def _block_particles(num_particles, n_anchors, stat_dim):
    return BlockParticles(np.empty((num_particles * n_anchors, stat_dim)),
                          np.zeros((num_particles, n_anchors), dtype=np.int64),
                          np.ones(num_particles, dtype=np.int64), np.empty(num_particles),
                          np.zeros(num_particles))


@njit(cache=True)
def _copy_blocks(source, p_source, target, p_target):
    """Particle ``p_source`` of ``source`` into slot ``p_target`` of ``target``."""
    m = source.sizes.shape[1]
    for j in range(m):
        for k in range(source.stats.shape[1]):
            target.stats[p_target * m + j, k] = source.stats[p_source * m + j, k]
        target.sizes[p_target, j] = source.sizes[p_source, j]
    target.n_blocks[p_target] = source.n_blocks[p_source]
    target.log_gamma[p_target] = source.log_gamma[p_source]
    target.log_gamma_anchor[p_target] = source.log_gamma_anchor[p_source]


# --------------------------------------------------------------------------- numba core

@njit(cache=True)
def csmc_sweep(model, seating, points, n_anchors, reference_blocks, empty_row, options,
               lineage):
    """Run the (conditional) SMC of PGSM Algorithm 3 on the ordered closure ``points``.

    Built on the SMC engine (``kernels/smc.py``): the option weights are the engine's
    allocation model (:func:`~pymc_splitmerge.kernels.smc.allocation_log_weights`) in its
    fixed-``n`` form (tables shifted by ``K_other``, new blocks only in the anchor phase),
    written out with the seating helpers of ``priors/seating.py`` because a call per particle
    costs 10-15 % of a move; the selection is
    :func:`~pymc_splitmerge.kernels.smc.resample_if_degenerate` (conditional multinomial with
    particle 0 pinned), the decisions :func:`~pymc_splitmerge.kernels.smc.propose`; what is
    PGSM's own is the particle encoding (blocks numbered along ``σ``), the
    annealed targets and the reuse of identical particles' computations.

    Parameters
    ----------
    model : Model
    seating : SeatingStep
        ``SeatingStep(log_v, log_v, log_w, log_w, K_other, False)`` from ``prior.tables(n)``
        (``K_other``: clusters outside the closure).
    points : ndarray of int64, shape (n,)
        ``σ``: the closure in SMC order, anchors first.
    n_anchors : int
        ``m = |s|``.
    reference_blocks : ndarray of int64, shape (n,)
        Block (numbered by first appearance along ``σ``) of each point in the current
        restricted partition: the reference path.
    empty_row : ndarray of float64, shape (stat_dim,)
    options : PGSMOptions
    lineage : Lineage
        Filled: decisions and ancestors of shape (n, N); the log weights too if their arrays
        have n rows (a single row: not recorded, which saves their memory traffic).

    Returns
    -------
    chosen : int
        Particle drawn from the final weights (-1 if the sweep stopped in the merge state).
    generations : int
        Generations run.
    resampling_events : int
    final_relative_ess : float
    """
    family_id = model.family_id
    params = model.params
    x = model.x
    log_v_table = seating.log_v_now
    log_w_table = seating.log_w_now
    n_other_clusters = seating.block_offset
    conditional = options.conditional
    deduplicate = options.deduplicate
    resampling_threshold = options.resampling_threshold
    decisions = lineage.decisions
    ancestors = lineage.ancestors
    log_incremental = lineage.log_incremental
    log_proposals = lineage.log_proposals
    n = points.shape[0]
    record = log_incremental.shape[0] == n
    m = n_anchors
    num_particles = options.num_particles
    stat_dim = empty_row.shape[0]
    particles = _block_particles(num_particles, m, stat_dim)
    spare = _block_particles(num_particles, m, stat_dim)
    # the hot loop reads the arrays as locals that are never rebound (no reference counting
    # at every use); resampling copies through ``spare`` and back
    stats = particles.stats
    sizes = particles.sizes
    n_blocks = particles.n_blocks
    log_gamma = particles.log_gamma
    log_gamma_anchor = particles.log_gamma_anchor
    log_weights = np.zeros(num_particles)
    weights = np.empty(num_particles)
    resampled = np.empty(num_particles, dtype=np.int64)
    option_log = np.empty(m + 1)
    use_annealing = options.annealing and n > m
    scheme = 2 if conditional else 1
    delta_zeta = 1.0 / (n - m) if n > m else 0.0

    # generation t = 0 (paper t = 1): the first anchor alone, state #1, weight uniform
    first = x[points[0]]
    log_first = (log_v_table[n_other_clusters + 1] + log_w_table[1]
                 + dispatch.log_predictive(family_id, params, empty_row, first))
    # particle 0's first block gets the anchor's statistics; the others copy that row (the
    # same numbers as adding the point to each: one family call instead of N)
    for j in range(m):
        reset_row(stats, j, empty_row)
    dispatch.add_point(family_id, params, stats[0], first)
    for p in range(num_particles):
        if p > 0:
            for j in range(m):
                reset_row(stats, p * m + j, stats[j])
        sizes[p, 0] = 1
        log_gamma[p] = log_first
        decisions[0, p] = 0
        ancestors[0, p] = p
        log_incremental[0, p] = 0.0
        log_proposals[0, p] = 0.0
    if m == 1:
        for p in range(num_particles):
            log_gamma_anchor[p] = log_gamma[p]
    normalise_log_weights(log_weights, weights)
    resampling_events = 0
    generations = 1
    # Twin caching (exact, changes no number): ``twin[p] = r < p`` means particle p's state is
    # identical to root particle r's (copies after resampling / identical decisions), so the
    # option values of r are reused instead of recomputing p's predictive densities.
    twin = np.zeros(num_particles, dtype=np.int64)
    twin[0] = -1
    if not deduplicate:
        for p in range(num_particles):
            twin[p] = -1
    new_twin = np.empty_like(twin)
    root_choice = np.empty(num_particles, dtype=np.int64)
    diverged = np.empty(num_particles, dtype=np.int64)
    option_cache = np.empty((num_particles, m + 1))
    total_cache = np.empty(num_particles)
    option_weight = np.empty(m + 1)
    # rows of the distinct particles' blocks for the batched predictive, and where each
    # particle's values start in ``predictive``
    rows = np.empty(num_particles * m, dtype=np.int64)
    predictive = np.empty(num_particles * m)
    first_row = np.empty(num_particles, dtype=np.int64)
    weight_cache = np.empty((num_particles, m + 1))
    weight_total_cache = np.empty(num_particles)
    count_cache = np.empty(num_particles, dtype=np.int64)
    for t in range(1, n):
        # adaptive (conditional) resampling on the previous weights (Algorithm 3, line 18):
        # the engine's ESS-triggered selection, conditional multinomial with particle 0
        # pinned (PGSM eq. 6), plain multinomial for the negative control
        if resampling_threshold > 0.0 and resample_if_degenerate(
                weights, log_weights, resampling_threshold, scheme, resampled):
            resampling_events += 1
            for p in range(num_particles):
                a = resampled[p]
                _copy_blocks(particles, a, spare, p)
                ancestors[t, p] = a
                new_twin[p] = -1
                if deduplicate:
                    root = twin[a] if twin[a] >= 0 else a
                    for q in range(p):
                        other = resampled[q]
                        if (twin[other] if twin[other] >= 0 else other) == root:
                            new_twin[p] = q if new_twin[q] < 0 else new_twin[q]
                            break
            for p in range(num_particles):
                _copy_blocks(spare, p, particles, p)
                twin[p] = new_twin[p]
        else:
            for p in range(num_particles):
                ancestors[t, p] = p
        xt = x[points[t]]
        anchor_phase = t < m
        log_new_predictive = -np.inf
        if anchor_phase:
            log_new_predictive = dispatch.log_predictive(family_id, params, empty_row, xt)
        all_merged = True
        n_rows = 0
        for p in range(num_particles):
            diverged[p] = -1
            if twin[p] < 0:
                first_row[p] = n_rows
                for j in range(n_blocks[p]):
                    rows[n_rows] = p * m + j
                    n_rows += 1
        # the predictive of every block of every distinct particle: one dispatch call per
        # generation (a call per particle costs more than two low-dimensional predictives)
        dispatch.log_predictive_many(family_id, params, stats, rows, n_rows, xt, predictive)
        for p in range(num_particles):
            nb = n_blocks[p]
            r = twin[p]
            if r >= 0:
                count = count_cache[r]
                log_total = total_cache[r]
                weight_total = weight_total_cache[r]
                for j in range(count):
                    option_log[j] = option_cache[r, j]
                    option_weight[j] = weight_cache[r, j]
            else:
                # log γ_t / γ_{t-1} of each allowed option (eq. 7): the engine's allocation
                # model (smc.allocation_log_weights) in its fixed-n form, where the
                # V ratio of a join is 1, written out with the seating helpers of
                # priors/seating.py: calling the general function costs ~10-15 % of a move
                # (reference counting of its array arguments per particle and generation).
                # Copies of an identical particle reuse these values.
                start = first_row[p]
                for j in range(nb):
                    option_log[j] = predictive[start + j] + log_join_weight(
                        log_w_table, sizes[p, j], 1)
                count = nb
                if anchor_phase:
                    option_log[nb] = log_open_weight(log_v_table, log_w_table,
                                                     n_other_clusters + nb, 1) + log_new_predictive
                    count = nb + 1
                log_total, weight_total = exp_shifted(option_log, count, option_weight)
                for j in range(count):
                    option_cache[p, j] = option_log[j]
                    weight_cache[p, j] = option_weight[j]
                count_cache[p] = count
                total_cache[p] = log_total
                weight_total_cache[p] = weight_total
            pinned = reference_blocks[t] if (p == 0 and conditional) else -1
            # proposal: q ∝ γ̂_t over the options
            if use_annealing and anchor_phase:
                # γ̂_t = 1[γ_t > 0]: uniform over the feasible options
                feasible = 0
                for j in range(count):
                    if option_log[j] > -np.inf:
                        feasible += 1
                        option_weight[j] = 1.0
                    else:
                        option_weight[j] = 0.0
                choice = propose(option_weight, count, float(feasible), pinned)
                increment = np.log(feasible)
                if record:
                    log_proposals[t, p] = -increment
            else:
                choice = propose(option_weight, count, weight_total, pinned)
                if record:
                    log_proposals[t, p] = option_log[choice] - log_total
                increment = log_total
                if use_annealing:
                    increment += delta_zeta * log_gamma_anchor[p]
            if record:
                log_incremental[t, p] = increment
            decisions[t, p] = choice
            # move the particle (copy the post-state of an identical particle when possible)
            source = -1
            if r >= 0:
                if choice == root_choice[r]:
                    source = r
                elif diverged[r] >= 0 and choice == root_choice[diverged[r]]:
                    source = diverged[r]
                elif diverged[r] < 0:
                    diverged[r] = p
            log_gamma[p] += option_log[choice]
            if choice == nb:
                n_blocks[p] = nb + 1
            row = p * m + choice
            if source >= 0:
                source_row = source * m + choice
                for k in range(stat_dim):
                    stats[row, k] = stats[source_row, k]
                twin[p] = source
            else:
                dispatch.add_point_at(family_id, params, stats, row, x, points[t])
                twin[p] = -1
            sizes[p, choice] += 1
            root_choice[p] = choice
            if t == m - 1:
                log_gamma_anchor[p] = log_gamma[p]
            log_weights[p] += increment
            if n_blocks[p] != 1:
                all_merged = False
        normalise_log_weights(log_weights, weights)
        generations = t + 1
        if all_merged and t >= m - 1:
            return -1, generations, resampling_events, 1.0
    chosen = sample_index(weights)
    return chosen, generations, resampling_events, relative_ess(weights)


@njit(cache=True)
def _trace_back(chosen, generations, lineage, blocks_out):
    """Blocks along the lineage of particle ``chosen`` (all zeros if ``chosen < 0``)."""
    n = blocks_out.shape[0]
    if chosen < 0:
        for t in range(n):
            blocks_out[t] = 0
        return
    p = chosen
    for t in range(generations - 1, -1, -1):
        blocks_out[t] = lineage.decisions[t, p]
        p = lineage.ancestors[t, p]


@njit(cache=True)
def closure_of(anchors, labels, where, closure_out, slot_block_out):
    """Collect the closure ``s̄`` of the anchors.

    Parameters
    ----------
    anchors : ndarray of int64, shape (m,)
    labels : ndarray of int64, shape (n_total,)
        Slot of each point.
    where : ndarray of int64, shape (capacity,)
    closure_out : ndarray of int64, shape (n_total,)
        First ``size`` entries filled with the closure's points (increasing index order).
    slot_block_out : ndarray of int64, shape (capacity,)
        Work array, must be all -1 on entry; left with the anchors' slots marked (caller
        resets them).

    Returns
    -------
    size : int
        ``|s̄|``.
    n_restricted_clusters : int
        ``|c̄|``.
    """
    n_restricted = 0
    for a in range(anchors.shape[0]):
        slot = labels[anchors[a]]
        if slot_block_out[slot] < 0:
            slot_block_out[slot] = n_restricted
            n_restricted += 1
    size = 0
    for i in range(labels.shape[0]):
        if slot_block_out[labels[i]] >= 0:
            closure_out[size] = i
            size += 1
    return size, n_restricted


@njit(cache=True)
def pgsm_transition(model, partition, tables, anchors, options):
    """One PGSM transition of ``partition`` (in place); the numba core of :func:`pgsm_move`.

    Parameters
    ----------
    model : Model
    partition : Partition
    tables : PriorTables
        ``prior.tables(n)``.
    anchors : ndarray of int64, shape (m,)
        The anchors, or all -1 to draw them uniformly here.
    options : PGSMOptions

    Returns
    -------
    move, closure_size, resampling_events, relative_ess, generations
    """
    labels = partition.labels
    where = partition.where
    n_total = labels.shape[0]
    if anchors[0] < 0:  # draw the anchors uniformly here (anchors[0] = -1, length m)
        anchors[:] = np.random.permutation(n_total)[: anchors.shape[0]]
    m = anchors.shape[0]
    capacity = where.shape[0]
    slot_mark = np.full(capacity, -1, dtype=np.int64)
    closure = np.empty(n_total, dtype=np.int64)
    size, n_restricted = closure_of(anchors, labels, where, closure, slot_mark)
    n_other = partition.cluster_count[0] - n_restricted
    # σ: anchors in uniform order, then the rest of the closure in uniform order (Alg. 2)
    anchor_order = np.random.permutation(m)
    is_anchor = np.zeros(n_total, dtype=np.bool_)
    points = np.empty(size, dtype=np.int64)
    for a in range(m):
        points[a] = anchors[anchor_order[a]]
        is_anchor[anchors[a]] = True
    rest = np.empty(size - m, dtype=np.int64)
    r = 0
    for k in range(size):
        if not is_anchor[closure[k]]:
            rest[r] = closure[k]
            r += 1
    rest = rest[np.random.permutation(size - m)]
    for k in range(size - m):
        points[m + k] = rest[k]
    # reference path: blocks numbered by first appearance along σ
    block_of_slot = np.full(capacity, -1, dtype=np.int64)
    slot_of_block = np.empty(m, dtype=np.int64)
    reference = np.empty(size, dtype=np.int64)
    n_reference_blocks = 0
    for t in range(size):
        slot = labels[points[t]]
        if block_of_slot[slot] < 0:
            block_of_slot[slot] = n_reference_blocks
            slot_of_block[n_reference_blocks] = slot
            n_reference_blocks += 1
        reference[t] = block_of_slot[slot]
    lineage = empty_lineage(size, options.num_particles, False)
    seating = SeatingStep(tables.log_v, tables.log_v, tables.log_w, tables.log_w, n_other,
                          False)
    chosen, generations, events, ess = csmc_sweep(model, seating, points, m, reference,
                                                  partition.empty_row, options, lineage)
    blocks = np.empty(size, dtype=np.int64)
    _trace_back(chosen, generations, lineage, blocks)
    n_new_blocks = 0
    changed = 0
    for t in range(size):
        n_new_blocks = max(n_new_blocks, blocks[t] + 1)
        if blocks[t] != reference[t]:
            changed += 1
    if changed == 0:
        return MOVE_NONE, size, events, ess, generations
    # apply, moving only the points whose block changed: new block b < |c̄| keeps the slot of
    # reference block b (both numbered along σ), later blocks get free slots.  Take the
    # changed points out first, then refill the kept slots (reopening emptied ones) before
    # opening new ones, so that a slot emptied here is never handed to two blocks.
    for t in range(size):
        if blocks[t] != reference[t]:
            remove(model, partition, points[t])
    for t in range(size):
        if blocks[t] != reference[t] and blocks[t] < n_reference_blocks:
            add(model, partition, points[t], slot_of_block[blocks[t]])
    for b in range(n_reference_blocks, n_new_blocks):
        slot = free_slot(where)
        for t in range(size):
            if blocks[t] == b:
                add(model, partition, points[t], slot)
    if n_new_blocks > n_reference_blocks:
        move = MOVE_SPLIT
    elif n_new_blocks < n_reference_blocks:
        move = MOVE_MERGE
    else:
        move = MOVE_REALLOCATE
    return move, size, events, ess, generations


@njit(cache=True)
def _pgsm_transition_fields(seed, family_id, params, x, labels, sizes, stats, empty_row,
                            active, where, cluster_count, log_v, log_w, anchors, num_particles,
                            resampling_threshold, annealing, conditional, deduplicate):
    """:func:`pgsm_transition` with the structures' fields as arguments (Python entry).

    ``seed`` (32-bit, from :func:`~pymc_splitmerge.kernels.rng.numba_seed_from`) seeds numba's random state here, which
    saves the separate numba call of ``kernels.rng.seed_numba_from`` (same stream).
    """
    np.random.seed(seed)
    return pgsm_transition(
        make_model(family_id, params, x),
        Partition(labels, sizes, stats, empty_row, active, where, cluster_count),
        PriorTables(log_v, log_w), anchors,
        PGSMOptions(num_particles, resampling_threshold, annealing, conditional, deduplicate))


# --------------------------------------------------------------------------- Python API


def validate_pgsm_options(num_particles, resampling_threshold, n_anchors) -> float:
    """Check the PGSM options; return ``resampling_threshold`` as a float.

    Raises
    ------
    TypeError, ValueError
        ``num_particles < 2``, ``resampling_threshold`` outside [0, 1], ``n_anchors < 2``.
    """
    if isinstance(num_particles, bool) or not isinstance(num_particles, (int, np.integer)):
        raise TypeError(f"num_particles must be an integer >= 2; got {num_particles!r}")
    if num_particles < 2:
        raise ValueError(f"num_particles must be >= 2; got {num_particles}")
    threshold = float(resampling_threshold)
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"resampling_threshold must be in [0, 1]; got {resampling_threshold}")
    if isinstance(n_anchors, bool) or not isinstance(n_anchors, (int, np.integer)):
        raise TypeError(f"n_anchors must be an integer >= 2; got {n_anchors!r}")
    if n_anchors < 2:
        raise ValueError(f"n_anchors must be >= 2; got {n_anchors}")
    return threshold


def pgsm_move(state, log_v_table, log_w_table, rng, *, num_particles=20,
              resampling_threshold=0.5, n_anchors=2, annealing=True, anchors=None,
              anchor_proposal=None):
    """One PGSM transition of ``state`` (mutated in place).

    Parameters
    ----------
    state : PartitionState
    log_v_table, log_w_table : ndarray of float64, shape (n + 2,)
        ``prior.tables(n)`` for the ``n`` data points.
    rng : numpy.random.Generator
    num_particles : int, default 20
        ``N >= 2``.
    resampling_threshold : float, default 0.5
        ``β``: resample when the relative ESS is below ``β`` (0: never, 1: always).
    n_anchors : int, default 2
        ``|s|``.
    annealing : bool, default True
        Annealed intermediate targets of §3.4.
    anchors : array_like of int, optional
        Anchor set to use (distinct indices); drawn otherwise.
    anchor_proposal : AnchorProposal, optional
        Anchor law (with its frozen snapshot; its ``n_anchors`` overrides ``n_anchors``);
        uniform if omitted or not adapted yet.

    Returns
    -------
    PGSMInfo

    References
    ----------
    Bouchard-Côté, Doucet & Roth (2017), Algorithms 1-3.
    """
    log_v_table, log_w_table = state.check_tables(log_v_table, log_w_table)
    if anchor_proposal is None:  # options only: build once per set of options
        move = _cached_pgsm_move(num_particles, resampling_threshold, n_anchors, annealing)
    else:
        move = build_pgsm_move(num_particles=num_particles,
                               resampling_threshold=resampling_threshold, n_anchors=n_anchors,
                               annealing=annealing, anchor_proposal=anchor_proposal)
    return move.run(state.family_id, state.params, state.x, state.slot_labels, state.sizes,
                    state.stats, state.empty_row, state.active, state.where,
                    state.cluster_count, log_v_table, log_w_table, rng, anchors)


@functools.lru_cache(maxsize=64)
def _cached_pgsm_move(num_particles, resampling_threshold, n_anchors, annealing):
    """:func:`build_pgsm_move` for :func:`pgsm_move` (no anchor proposal), built once per
    set of options: validating and building costs more than a small move."""
    return build_pgsm_move(num_particles=num_particles,
                           resampling_threshold=resampling_threshold, n_anchors=n_anchors,
                           annealing=annealing)


def build_pgsm_move(*, num_particles=20, resampling_threshold=0.5, n_anchors=2, annealing=True,
                    anchor_proposal=None):
    """Validate the options once; return ``move(model, partition, tables, rng) -> PGSMInfo``.

    Parameters are those of :func:`pgsm_move`.  The ``anchor_proposal`` is held by reference: the caller adapts it during tuning, and the move
    reads its frozen snapshot (uniform anchors until it is adapted).
    """
    if anchor_proposal is not None:
        n_anchors = anchor_proposal.n_anchors
    threshold = validate_pgsm_options(num_particles, resampling_threshold, n_anchors)
    options = PGSMOptions(int(num_particles), threshold, bool(annealing), True)
    return _PGSMMove(options, int(n_anchors), anchor_proposal)


class _PGSMMove:
    """The transition of :func:`build_pgsm_move` (a class, so that it is copied with its step)."""

    def __init__(self, options, n_anchors, anchor_proposal):
        self.options = options
        self.n_anchors = n_anchors
        self.anchor_proposal = anchor_proposal

    def __call__(self, model, partition, tables, rng, anchors=None):
        return self.run(*model, *partition, *tables, rng, anchors)

    def run(self, family_id, params, x, labels, sizes, stats, empty_row, active, where,
            cluster_count, log_v, log_w, rng, anchors=None):
        """:meth:`__call__` on the structures' fields (what :func:`pgsm_move` has at hand).

        The fields are handed to numba loose: numba unboxes named tuples of arrays several
        microseconds slower than plain arguments (the structures are rebuilt inside), and
        building them here costs another ~0.5 us per move.
        """
        n = x.shape[0]
        n_anchors = self.n_anchors
        if n < n_anchors:
            raise ValueError(f"need at least n_anchors={n_anchors} points; got {n}")
        proposal = self.anchor_proposal
        if anchors is None and proposal is not None and proposal.is_adapted:
            anchors = proposal.sample(n, rng)
        if anchors is None:
            # uniform anchors, drawn inside the numba kernel (same law as uniform_anchors)
            anchors = np.full(n_anchors, -1, dtype=np.int64)
        else:
            anchors = np.array(anchors, dtype=np.int64)
            # checked on a Python list: numpy's reductions cost microseconds on 2 entries
            values = anchors.tolist() if anchors.ndim == 1 else None
            if values is None or len(values) < 2 or len(set(values)) != len(values):
                raise ValueError(f"anchors must be >= 2 distinct point indices; got {anchors}")
            if min(values) < 0 or max(values) >= n:
                raise ValueError(f"anchors must be in [0, {n}); got {anchors}")
        move, size, events, ess, generations = _pgsm_transition_fields(
            numba_seed_from(rng), family_id, params, x, labels, sizes, stats, empty_row, active,
            where, cluster_count, log_v, log_w, anchors, *self.options)
        return PGSMInfo(move, anchors, size, events, ess, generations)
