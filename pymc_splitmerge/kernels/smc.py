r"""The package's sequential Monte Carlo engine: a generic (conditional) SMC layer, the
allocation model of partition particles, and the SMC sampler over partitions (Lomeli 2017;
Ülker, Günsel & Cemgil 2010).  PGSM's conditional SMC (``kernels/pgsm.py``) runs on the same
layers.

1. **Generic (conditional) SMC** (any particle system, particles indexed ``0..N-1``):

   * :func:`resample_if_degenerate`: the ESS-triggered selection (systematic, multinomial or
     conditional multinomial with particle 0 pinned to the reference path, PGSM eq. 6);
   * :func:`reweight_and_resample`: ``log w += log v``, the evidence increment
     ``log sum_p W_{t-1}^p v_t^p`` and the selection;
   * :func:`propose`: the fully adapted proposal of one particle, ``q ∝ exp(option log
     weights)``, with the conditional path's decision imposed on the reference particle;
   * normalisation and categorical draws come from ``core/logweights.py`` (one copy).

2. **Allocation model** (:func:`allocation_log_weights`): the log weights of adding one point
   to each block of a particle or to a new block,
   ``EPPF_t(Π ⊕ c) / EPPF_{t-1}(Π) · f(y_t | y_c)``, from the prior tables of the step
   (:class:`SeatingStep`; seating ratios of ``priors/seating.py``, optionally an annealed
   concentration) and the family's predictive.  The SMC sampler uses it with the step-``t``
   tables.  PGSM uses its fixed-``n`` form (tables shifted by the clusters outside the
   closure, the new-block option only in the anchor phase; PGSM eq. 7), written out in its
   own particle loop with the same seating helpers, since a numba call per particle and
   generation (named tuples of arrays as arguments) would cost 10-15 % of a PGSM move.

3. **The SMC sampler over partitions**: :func:`smc_partition_run` (weight, resample,
   propagate, optional Gibbs rejuvenation of a rotating block of past labels) on a
   :class:`Population` of :class:`~pymc_splitmerge.kernels.state.Partition` particles;
   ``run_smc`` / ``log_evidence_runs`` are the Python entry points, ``step_tables`` builds the
   tables.  Evidence:
   ``log Ẑ = sum_t log sum_p W_{t-1}^p v_t^p`` (+ the final reweight), whose first term is
   ``log f(y_1)`` (the corrected weights of ``specs/arm_and_smc.md`` §2-3).

Selection helpers: ``relative_ess`` ``1 / (N sum w^2)`` (Liu & Chen 1995; PGSM Algorithm 3,
line 18); ``conditional_multinomial_resample`` (``a_0 = 0``, ``a_p ~ Categorical(w)``,
Andrieu, Doucet & Holenstein 2010); ``multinomial_resample``; ``systematic_resample``
(Kitagawa 1996).  NaN log weights count as ``-inf`` (weight 0), as in ``particles``
(N. Chopin); if every weight is ``-inf`` the normalised weights are uniform.

The ``@njit`` versions draw from numba's internal random state (seed it first with
``kernels.rng.seed_numba_from``); each has a plain NumPy reference (``reference_*``) taking an
explicit ``np.random.Generator``, which the tests compare against.

References
----------
Andrieu, C., Doucet, A. and Holenstein, R. (2010). Particle Markov chain Monte Carlo methods.
JRSS B 72(3), 269-342.
Bouchard-Côté, A., Doucet, A. and Roth, A. (2017). Particle Gibbs split-merge sampling for
Bayesian inference in mixture models. JMLR 18(28). Algorithm 3, eqs. (6)-(10).
Liu, J. S. and Chen, R. (1995). Blind deconvolution via sequential imputations. JASA 90.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from pymc_splitmerge.components import dispatch
from pymc_splitmerge.core.jit import njit
from pymc_splitmerge.core.logweights import (
    exp_shifted,
    log_sum_exp,
    normalise_log_weights,
    sample_log_weights,
    sample_weights,
)
from pymc_splitmerge.core.relabel import canonical_labels
from pymc_splitmerge.core.slots import free_slot, reset_row
from pymc_splitmerge.kernels.gibbs import _join_and_new_log_weights as gibbs_join_and_new
from pymc_splitmerge.kernels.rng import seed_numba_from
from pymc_splitmerge.kernels.state import Model, Partition, add, log_target, remove
from pymc_splitmerge.priors.seating import log_join_weight

__all__ = [
    "Population",
    "SeatingStep",
    "StepTables",
    "allocation_log_weights",
    "conditional_multinomial_resample",
    "multinomial_resample",
    "normalise_log_weights",
    "propose",
    "reference_conditional_multinomial_resample",
    "reference_normalise_log_weights",
    "reference_relative_ess",
    "relative_ess",
    "resample_if_degenerate",
    "reweight_and_resample",
    "sample_index",
    "smc_partition_run",
    "systematic_resample",
]


# ============================================================================ generic SMC layer
@njit(cache=True)
def relative_ess(weights):
    """Relative effective sample size ``1 / (N * sum(w**2))`` of normalised ``weights``."""
    total = 0.0
    for p in range(weights.shape[0]):
        total += weights[p] * weights[p]
    return 1.0 / (weights.shape[0] * total)


@njit(cache=True)
def sample_index(weights):
    """One draw from ``Categorical(weights)`` (normalised) with numba's random state."""
    return sample_weights(weights, weights.shape[0], 1.0, np.random.random())


@njit(cache=True)
def conditional_multinomial_resample(weights, ancestors_out):
    """Conditional multinomial resampling: ``a_0 = 0``, ``a_p ~ Categorical(weights)``, p >= 1.

    Parameters
    ----------
    weights : ndarray of float64, shape (N,)
        Normalised weights.
    ancestors_out : ndarray of int64, shape (N,)
        Filled with the ancestor indices.
    """
    ancestors_out[0] = 0
    for p in range(1, weights.shape[0]):
        ancestors_out[p] = sample_index(weights)


@njit(cache=True)
def multinomial_resample(weights, ancestors_out):
    """Unconditional multinomial resampling (SMC sampler option; PGSM's negative control)."""
    for p in range(weights.shape[0]):
        ancestors_out[p] = sample_index(weights)


@njit(cache=True)
def systematic_resample(weights, uniform, ancestors_out):
    """Systematic resampling with one uniform ``uniform`` in [0, 1) (Kitagawa 1996).

    ``ancestors_out[p]`` is the first index ``j`` with ``cumsum(weights)[j] > (p + uniform) / N``.
    """
    n = weights.shape[0]
    cumulative = weights[0]
    j = 0
    for p in range(n):
        threshold = (p + uniform) / n
        while cumulative <= threshold and j < n - 1:
            j += 1
            cumulative += weights[j]
        ancestors_out[p] = j


# Resampling schemes (integer codes used inside numba).
RESAMPLING_SCHEMES = {"systematic": 0, "multinomial": 1, "conditional_multinomial": 2}


@njit(cache=True)
def resample_if_degenerate(weights, log_weights, ess_threshold, scheme, ancestors):
    """ESS-triggered selection step shared by every SMC of the package (in place).

    If the relative ESS of the normalised ``weights`` is below ``ess_threshold``, fill
    ``ancestors`` by the resampling ``scheme`` (0: systematic, 1: multinomial, 2: conditional
    multinomial with particle 0 pinned to the reference path, PGSM eq. 6), reset ``log_weights``
    to 0 and return True; otherwise leave both unchanged and return False (the caller keeps
    its particles in place: ancestors = identity).
    """
    if not relative_ess(weights) < ess_threshold:
        return False
    if scheme == 0:
        systematic_resample(weights, np.random.random(), ancestors)
    elif scheme == 1:
        multinomial_resample(weights, ancestors)
    else:
        conditional_multinomial_resample(weights, ancestors)
    for p in range(log_weights.shape[0]):
        log_weights[p] = 0.0
    return True


@njit(cache=True)
def reweight_and_resample(log_weights, log_increments, ess_threshold, scheme, weights,
                          ancestors):
    """One generic SMC weighting/selection step (in place).

    ``log_weights += log_increments``; the evidence increment
    ``log sum_p W_{t-1}^p v_t^p`` is returned, with ``W_{t-1}`` the normalised weights before
    the update (spec §2: ``log Z = sum_t log sum_p W_{t-1}^p v_t^p``).  Then
    :func:`resample_if_degenerate` on the updated weights; ``ancestors`` is the identity when
    it does not resample.

    Returns
    -------
    log_evidence_increment : float
    relative_ess : float
        Relative ESS of the updated weights (before resampling).
    resampled : bool
    """
    count = log_weights.shape[0]
    before = log_sum_exp(log_weights, count)
    for p in range(count):
        value = log_weights[p] + log_increments[p]
        log_weights[p] = -np.inf if np.isnan(value) else value
    after = normalise_log_weights(log_weights, weights)
    increment = after - before
    ess = relative_ess(weights)
    if after > -np.inf and resample_if_degenerate(weights, log_weights, ess_threshold, scheme,
                                                  ancestors):
        return increment, ess, True
    for p in range(count):
        ancestors[p] = p
    return increment, ess, False


@njit(cache=True)
def propose(option_weights, count, total, pinned):
    """Decision of one particle under the fully adapted proposal ``q ∝ option_weights``.

    ``option_weights[:count]`` are the shifted weights of :func:`exp_shifted` (sum ``total``);
    ``pinned >= 0`` imposes the decision of the reference path (the conditional particle of a
    conditional SMC, Andrieu et al. 2010), otherwise one categorical draw.
    """
    if pinned >= 0:
        return pinned
    return sample_weights(option_weights, count, total, np.random.random())


# ============================================================================ allocation model
class SeatingStep(NamedTuple):
    r"""The prior tables of one step of an SMC over partitions (numba-typed).

    The allocation weights are ratios ``EPPF_now(Π ⊕ c) / EPPF_prev(Π)`` with
    ``EPPF(Π) = V(K_offset + K) ∏_b W(|b|)`` (``K`` blocks of the particle).
    """

    log_v_now: np.ndarray
    """``log V`` of the step's target (indexed by the total number of blocks)."""
    log_v_prev: np.ndarray
    """``log V`` of the previous step's target."""
    log_w_now: np.ndarray
    """``log W`` of the step's target."""
    log_w_prev: np.ndarray
    """``log W`` of the previous step's target."""
    block_offset: int
    """Blocks counted in ``V`` besides the particle's (PGSM: clusters outside the closure)."""
    weights_change: bool
    """False asserts ``log_w_now`` equals ``log_w_prev`` (no annealing of ``W``), which skips
    the O(K) product of the untouched blocks' ``W`` ratios (it is 1)."""


@njit(cache=True)
def allocation_log_weights(model, seating, stats, sizes, slots, counts, x_row,
                           log_new_predictive, allow_new, out):
    r"""Log weights of adding one point to each block of every particle or to a new block.

    For particle ``p`` holding the partition :math:`\Pi` of the points seen
    so far (:math:`K = k_p` blocks in the rows ``slots[p, :k_p]`` of ``stats[p]``),
    ``out[p, j]`` (``j < k_p``) and ``out[p, k_p]`` (new block, only if ``allow_new``) are the
    logs of

    .. math::

        \frac{\mathrm{EPPF}_{now}(\Pi \oplus c)}{\mathrm{EPPF}_{prev}(\Pi)}\, f(y \mid y_c),
        \qquad \mathrm{EPPF}(\Pi) = V(K_0 + K) \prod_b W(m_b),

    read from ``seating`` (:class:`SeatingStep`; ``K_0`` its ``block_offset``) with the
    seating ratios of ``priors/seating.py``, and ``f`` the family's predictive
    (``log_new_predictive``: the predictive under the empty block).  For the SMC sampler this
    is Lomeli's StandardSMC weight with the corrections of spec §2 (factor
    :math:`n_c - \sigma = W(m+1)/W(m)`, :math:`V(t, \cdot)/V(t-1, K)`), and with an annealed
    concentration Ülker et al.'s :math:`v'_n` (spec §3); for PGSM (fixed-``n`` tables,
    ``K_0 = K_{other}``) it is :math:`\gamma_t / \gamma_{t-1}` of eq. (7).
    ``log_sum_exp(out[p, :count])`` is the incremental weight of a fully adapted proposal.
    The new-block weight is ``-inf`` (never NaN) when ``V(K_0 + K + 1) = 0``.

    One call per generation for the whole population: the structures are handed over once,
    not once per particle (passing arrays costs reference counting per call).

    Parameters
    ----------
    model : Model
    seating : SeatingStep
    stats : ndarray of float64, shape (N, rows, stat_dim)
        Stacked statistics rows of the population.
    sizes : ndarray of int64, shape (N, rows)
    slots : ndarray of int64, shape (N, rows)
        Rows of each particle's blocks (``active``).
    counts : ndarray of int64, shape (N,)
        Number of blocks ``k_p`` of each particle.
    x_row : ndarray of float64, shape (data_dim,)
    log_new_predictive : float
    allow_new : bool
    out : ndarray of float64, shape (N, >= rows + 1)

    Returns
    -------
    extra : int
        1 if the new-block option was written (``allow_new``), else 0: particle ``p`` has
        ``counts[p] + extra`` options.
    """
    offset = seating.block_offset
    log_w_now = seating.log_w_now
    log_w_prev = seating.log_w_prev
    log_v_now = seating.log_v_now
    log_v_prev = seating.log_v_prev
    weights_change = seating.weights_change
    family_id = model.family_id
    params = model.params
    # no array views in the loop beyond stats[p] and slots[p] (each view costs reference
    # counting): the predictives go to a scratch row, the block rows are read as slots[p, j]
    scratch = np.empty(out.shape[1])
    for p in range(stats.shape[0]):
        k = counts[p]
        common = 0.0
        if weights_change:
            for j in range(k):
                m = sizes[p, slots[p, j]]
                common += log_w_now[m] - log_w_prev[m]
        log_v_prev_k = log_v_prev[offset + k]
        if k > 0:
            dispatch.log_predictive_many(family_id, params, stats[p], slots[p], k, x_row,
                                         scratch)
            base = log_v_now[offset + k] - log_v_prev_k + common
            for j in range(k):
                out[p, j] = scratch[j] + (
                    base + log_join_weight(log_w_now, sizes[p, slots[p, j]], 1))
        if allow_new:
            position = offset + k + 1
            value = -np.inf
            if position < log_v_now.shape[0] and log_v_now[position] > -np.inf:
                value = (log_v_now[position] - log_v_prev_k + common + log_w_now[1]
                         + log_new_predictive)
            out[p, k] = -np.inf if np.isnan(value) else value
    return 1 if allow_new else 0


@njit(cache=True)
def log_prior_ratio(log_v_num, log_w_num, log_v_den, log_w_den, partition):
    """``log EPPF_num(Π) - log EPPF_den(Π)`` for the particle's partition (annealing reweight)."""
    k = partition.cluster_count[0]
    total = log_v_num[k] - log_v_den[k]
    for j in range(k):
        m = partition.sizes[partition.active[j]]
        total += log_w_num[m] - log_w_den[m]
    return total


# ===================================================================== partition particles
class Population(NamedTuple):
    """``N`` partition particles as stacked arrays (particle ``p`` = row ``p`` of each).

    :func:`particle` gives particle ``p`` as a :class:`~pymc_splitmerge.kernels.state.Partition`
    (views), so that the state functions of ``kernels/state.py`` move it.
    """

    labels: np.ndarray
    """int64 (N, n)."""
    sizes: np.ndarray
    """int64 (N, capacity)."""
    stats: np.ndarray
    """float64 (N, capacity, stat_dim)."""
    active: np.ndarray
    """int64 (N, capacity)."""
    where: np.ndarray
    """int64 (N, capacity)."""
    cluster_count: np.ndarray
    """int64 (N, 1)."""


@njit(cache=True)
def empty_population(num_particles, n, empty_row):
    """A :class:`Population` of ``num_particles`` empty partitions of ``n`` points."""
    capacity = n + 2
    stats = np.empty((num_particles, capacity, empty_row.shape[0]))
    for p in range(num_particles):
        for slot in range(capacity):
            reset_row(stats[p], slot, empty_row)
    return Population(np.zeros((num_particles, n), dtype=np.int64),
                      np.zeros((num_particles, capacity), dtype=np.int64), stats,
                      np.zeros((num_particles, capacity), dtype=np.int64),
                      np.full((num_particles, capacity), -1, dtype=np.int64),
                      np.zeros((num_particles, 1), dtype=np.int64))


@njit(cache=True)
def particle(population, empty_row, p):
    """Particle ``p`` of ``population`` as a :class:`Partition` (views of its rows)."""
    return Partition(population.labels[p], population.sizes[p], population.stats[p], empty_row,
                     population.active[p], population.where[p], population.cluster_count[p])


@njit(cache=True)
def copy_particle(placed, source, target):
    """Copy partition ``source`` (of the points ``placed``) into ``target`` (:class:`Partition`).

    Free slots keep the empty statistics row, size 0 and ``where = -1`` (the invariants every
    state function relies on): the target's old clusters are reset first, then the source's
    are copied, so the cost is O(K + number of placed points), not O(capacity).
    """
    empty_row = target.empty_row
    for j in range(target.cluster_count[0]):
        slot = target.active[j]
        reset_row(target.stats, slot, empty_row)
        target.sizes[slot] = 0
        target.where[slot] = -1
    for j in range(source.cluster_count[0]):
        slot = source.active[j]
        reset_row(target.stats, slot, source.stats[slot])
        target.sizes[slot] = source.sizes[slot]
        target.where[slot] = j
        target.active[j] = slot
    target.cluster_count[0] = source.cluster_count[0]
    for position in range(placed.shape[0]):
        i = placed[position]
        target.labels[i] = source.labels[i]


@njit(cache=True)
def _resample_population(placed, ancestors, population, spare, empty_row):
    """``spare[p] = population[ancestors[p]]`` for every particle (caller swaps the two)."""
    for p in range(ancestors.shape[0]):
        copy_particle(placed, particle(population, empty_row, ancestors[p]),
                      particle(spare, empty_row, p))


@njit(cache=True)
def _draw_option(log_weights, count, scratch):
    """Index drawn ∝ ``exp(log_weights[:count])`` without modifying ``log_weights``."""
    _, total = exp_shifted(log_weights, count, scratch)
    return sample_weights(scratch, count, total, np.random.random())


@njit(cache=True)
def _place(model, partition, i, choice, k):
    """Put point ``i`` into block ``choice`` of the partition (``choice == k``: a new block)."""
    slot = free_slot(partition.where) if choice == k else partition.active[choice]
    add(model, partition, i, slot)


@njit(cache=True)
def _rejuvenate(model, partition, order, n_placed, cursor, block, log_prior_predictive,
                log_v_table, log_w_table, scratch):
    """Gibbs-update ``block`` of the first ``n_placed - 1`` placed points from ``cursor``."""
    pool = n_placed - 1
    count = min(pool, block)
    for r in range(count):
        i = order[(cursor + r) % pool]
        old = remove(model, partition, i)
        was_singleton = partition.sizes[old] == 0
        k = gibbs_join_and_new(model.family_id, model.params, model.x, i, log_v_table,
                               log_w_table, partition.sizes, partition.stats, partition.active,
                               partition.cluster_count, log_prior_predictive[i], scratch)
        choice = sample_log_weights(scratch, k + 1, np.random.random())
        if choice == k:
            slot = old if was_singleton else free_slot(partition.where)
        else:
            slot = partition.active[choice]
        add(model, partition, i, slot)


@njit(cache=True)
def _log_target(partition, log_v_table, log_w_table, model):
    p = partition
    return log_target(model.family_id, model.params, log_v_table, log_w_table, p.sizes, p.stats,
                      p.active, p.cluster_count)


# ============================================================================ the SMC sampler
class StepTables(NamedTuple):
    """Per-step prior tables of :func:`smc_partition_run` (built by :func:`step_tables`)."""

    log_v_steps: np.ndarray
    """float64 (n + 1, n + 2): ``log_v_steps[t, K] = log V_t(t, K)`` under the step-``t``
    prior parameter."""
    log_w_steps: np.ndarray
    """float64 (n + 1, n + 2) or (1, n + 2): ``log W_t(m)`` per step (one row when the weights
    do not depend on ``t``)."""
    final_log_v: np.ndarray
    """float64 (n + 2,): the target prior's ``log V(n, ·)``."""
    final_log_w: np.ndarray
    """float64 (n + 2,): the target prior's ``log W``."""
    reweight_final: bool
    """Reweight by ``EPPF_final / EPPF_{α_n}`` at the end (annealing)."""


class SMCOptions(NamedTuple):
    """Options of :func:`smc_partition_run`."""

    num_particles: int
    rejuvenation: int
    """Past labels Gibbs-updated per step (Ülker's Q; 0 = Lomeli's StandardSMC)."""
    ess_threshold: float
    scheme: int
    """``RESAMPLING_SCHEMES`` code."""


@njit(cache=True)
def _row(table, t):
    return table[t] if table.shape[0] > 1 else table[0]


@njit(cache=True)
def _seating(tables, t):
    return SeatingStep(tables.log_v_steps[t], tables.log_v_steps[t - 1],
                       _row(tables.log_w_steps, t), _row(tables.log_w_steps, t - 1), 0,
                       tables.log_w_steps.shape[0] > 1)


@njit(cache=True)
def _allocation_step(model, tables, population, t, i, log_prior_predictive, counts, alloc,
                     increments):
    """Step ``t`` (adding point ``i``): each particle's allocation log weights into ``alloc``,
    its block count into ``counts`` and its incremental log weight (their log-sum) into
    ``increments``; returns the step's :class:`SeatingStep`."""
    seating = _seating(tables, t)
    for p in range(counts.shape[0]):
        counts[p] = population.cluster_count[p, 0]
    allocation_log_weights(model, seating, population.stats, population.sizes,
                           population.active, counts, model.x[i], log_prior_predictive[i],
                           True, alloc)
    for p in range(counts.shape[0]):
        increments[p] = log_sum_exp(alloc[p], counts[p] + 1)
    return seating


@njit(cache=True)
def smc_partition_run(model, empty_row, order, log_prior_predictive, tables, options, start,
                      initial_labels):
    """Sequential Monte Carlo over partitions (Lomeli's StandardSMC, Ülker's SMC-G/SMC-A).

    Step ``t = 1..n`` adds point ``order[t-1]``: incremental weights from
    :func:`allocation_log_weights` (they do not depend on the new label), weighting and
    ESS-triggered resampling (:func:`reweight_and_resample`), then each particle draws the
    label from its allocation weights and, if ``rejuvenation > 0``, one Gibbs update of the next
    ``rejuvenation`` past labels (rotating, without overlap) under the step's target.  With
    ``tables.reweight_final`` the particles are reweighted by ``EPPF_final / EPPF_{α_n}`` at
    the end (annealing, spec §3 step 5).

    Parameters
    ----------
    model : Model
    empty_row : ndarray of float64, shape (stat_dim,)
    order : ndarray of int64, shape (n,)
    log_prior_predictive : ndarray of float64, shape (n,)
    tables : StepTables
    options : SMCOptions
    start : int
        Number of points already placed (0: a fresh run).  With ``start > 0`` particle ``p``
        starts from the equally weighted partition ``initial_labels[p]`` of the points
        ``order[:start]`` (labels < n + 2), which must target the step-``start`` tables, and
        the returned evidence covers the points ``order[start:]`` only.
    initial_labels : ndarray of int64, shape (num_particles, n) (ignored when ``start == 0``)

    Returns
    -------
    labels : ndarray of int64, shape (num_particles, n)
        Slot labels (not canonical).
    log_weights : ndarray, shape (num_particles,)
        Final unnormalised log weights.
    log_evidence : float
    ess : ndarray, shape (n + 1,)
        Relative ESS after each weighting (entry ``n``: final annealing reweight, else 1).
    resampled : ndarray of bool, shape (n,)
    log_evidence_increments : ndarray, shape (n + 1,)
    """
    n = model.x.shape[0]
    L = options.num_particles
    rejuvenation = options.rejuvenation
    cap = n + 2
    population = empty_population(L, n, empty_row)
    spare = empty_population(L, n, empty_row)
    log_weights = np.zeros(L)
    weights = np.empty(L)
    increments = np.empty(L)
    ancestors = np.arange(L)
    alloc = np.empty((L, cap))
    counts = np.zeros(L, dtype=np.int64)
    scratch = np.empty(cap)
    ess_history = np.ones(n + 1)
    resampled = np.zeros(n, dtype=np.bool_)
    log_increments = np.zeros(n + 1)
    log_evidence = 0.0
    cursor = 0
    for p in range(L):
        part = particle(population, empty_row, p)
        for position in range(start):
            i = order[position]
            add(model, part, i, initial_labels[p, i])
    for t in range(start + 1, n + 1):
        seating = _allocation_step(model, tables, population, t, order[t - 1],
                                   log_prior_predictive, counts, alloc, increments)
        increment, ess, did = reweight_and_resample(log_weights, increments,
                                                    options.ess_threshold, options.scheme,
                                                    weights, ancestors)
        if did:
            _resample_population(order[: t - 1], ancestors, population, spare, empty_row)
            population, spare = spare, population
        for p in range(L):
            a = ancestors[p]
            part = particle(population, empty_row, p)
            _place(model, part, order[t - 1], _draw_option(alloc[a], counts[a] + 1, scratch),
                   counts[a])
            if rejuvenation > 0 and t > 1:
                _rejuvenate(model, part, order, t, cursor, rejuvenation, log_prior_predictive,
                            seating.log_v_now, seating.log_w_now, scratch)
        if rejuvenation > 0 and t > 1:
            cursor = (cursor + rejuvenation) % (t - 1)
        log_evidence += increment
        log_increments[t - 1] = increment
        ess_history[t - 1] = ess
        resampled[t - 1] = did
    if tables.reweight_final:
        last_w = _row(tables.log_w_steps, n)
        for p in range(L):
            increments[p] = log_prior_ratio(tables.final_log_v, tables.final_log_w,
                                            tables.log_v_steps[n], last_w,
                                            particle(population, empty_row, p))
        before = log_sum_exp(log_weights, L)
        for p in range(L):
            log_weights[p] += increments[p]
        after = normalise_log_weights(log_weights, weights)
        log_increments[n] = after - before
        log_evidence += after - before
        ess_history[n] = relative_ess(weights)
    return (population.labels, log_weights, log_evidence, ess_history, resampled,
            log_increments)


@njit(cache=True)
def smc_partition_log_evidence_runs(num_runs, model, empty_row, order, log_prior_predictive,
                                    tables, options):
    """``num_runs`` independent runs of :func:`smc_partition_run`; their log evidences."""
    out = np.empty(num_runs)
    for r in range(num_runs):
        result = smc_partition_run(model, empty_row, order, log_prior_predictive, tables,
                                   options, 0, np.zeros((1, 1), dtype=np.int64))
        out[r] = result[2]
    return out


# --------------------------------------------------------------------------- references
def reference_normalise_log_weights(log_weights):
    """Plain NumPy reference of ``normalise_log_weights``: returns ``(weights, log_sum)``."""
    log_weights = np.where(np.isnan(log_weights), -np.inf, np.asarray(log_weights, float))
    if np.all(log_weights == -np.inf):
        return np.full(log_weights.shape, 1.0 / log_weights.size), -np.inf
    peak = log_weights.max()
    weights = np.exp(log_weights - peak)
    total = weights.sum()
    return weights / total, float(peak + np.log(total))


def reference_relative_ess(weights):
    """Plain NumPy reference of ``relative_ess``."""
    weights = np.asarray(weights, float)
    return float(1.0 / (weights.size * np.sum(weights**2)))


def reference_conditional_multinomial_resample(weights, rng: np.random.Generator):
    """Plain NumPy reference of ``conditional_multinomial_resample`` (explicit Generator)."""
    weights = np.asarray(weights, float)
    ancestors = np.empty(weights.size, dtype=np.int64)
    ancestors[0] = 0
    ancestors[1:] = rng.choice(weights.size, size=weights.size - 1, p=weights / weights.sum())
    return ancestors


def reference_systematic_resample(weights, uniform):
    """Plain NumPy reference of ``systematic_resample``."""
    weights = np.asarray(weights, float)
    n = weights.size
    positions = (np.arange(n) + uniform) / n
    ancestors = np.searchsorted(np.cumsum(weights), positions, side="right")
    return np.minimum(ancestors, n - 1).astype(np.int64)


# ============================================================================ Python wrapper
class SMCResult(NamedTuple):
    """One SMC run over partitions.

    Attributes
    ----------
    labels : ndarray of int64, shape (num_particles, n)
        Canonical labels of each particle (data order).
    log_weights : ndarray, shape (num_particles,)
        Final log weights (normalised: ``logsumexp = 0``).
    log_evidence : float
        Estimate of ``log p(y)`` (log of an unbiased estimator of ``p(y)``).
    ess : ndarray, shape (n + 1,)
        Relative ESS after each step's weighting (last entry: final annealing reweight).
    resampled : ndarray of bool, shape (n,)
    log_evidence_increments : ndarray, shape (n + 1,)
    """

    labels: np.ndarray
    log_weights: np.ndarray
    log_evidence: float
    ess: np.ndarray
    resampled: np.ndarray
    log_evidence_increments: np.ndarray


_CONCENTRATION = {"DirichletProcessPrior": "alpha", "PitmanYorPrior": "alpha",
                  "FiniteDirichletPrior": "alpha", "MixtureOfFiniteMixturesPrior": "gamma"}


def concentration_name(prior) -> str:
    """Name of the prior's concentration parameter (the one annealing acts on)."""
    try:
        return _CONCENTRATION[type(prior).__name__]
    except KeyError:
        raise TypeError(f"annealing is not defined for {type(prior).__name__}") from None


def annealing_schedule(n: int, start: float, target: float, rate: float) -> np.ndarray:
    """``α_t = κ + (start - κ)(1 - rate)^{t-1}``, ``t = 1..n`` (Ülker et al. §III, spec §3)."""
    if not 0.0 < rate <= 1.0:
        raise ValueError(f"anneal rate must be in (0, 1]; got {rate}")
    t = np.arange(1, n + 1)
    return target + (start - target) * (1.0 - rate) ** (t - 1)


def step_tables(prior, n: int, anneal: dict | None = None, start: int = 0):
    """Per-step prior tables for :func:`smc_partition_run`.

    Parameters
    ----------
    prior : GibbsTypePrior
        The target prior.
    n : int
    anneal : dict, optional
        ``{"start": α_1, "rate": c_α}``: the concentration is annealed from ``start`` to the
        prior's value and the population reweighted to the true target at the end.

    Returns
    -------
    StepTables

    With ``start > 0`` (continuing a population that targets the true prior for ``start``
    points), row ``start`` holds the target prior's tables.
    """
    cols = n + 2
    log_v_steps = np.full((n + 1, cols), -np.inf)
    log_v_steps[0, 0] = 0.0
    final_log_v, final_log_w = prior.tables(n)
    if anneal is None:
        for t in range(1, n + 1):
            log_v_steps[t, : t + 2] = prior.tables(t)[0]
        return StepTables(log_v_steps, final_log_w[None, :].copy(), final_log_v, final_log_w,
                          False)
    name = concentration_name(prior)
    target = float(getattr(prior, name))
    schedule = annealing_schedule(n, float(anneal["start"]), target, float(anneal["rate"]))
    log_w_steps = np.empty((n + 1, cols))
    log_w_steps[0] = dataclasses.replace(prior, **{name: float(schedule[0])}).tables(n)[1]
    for t in range(1, n + 1):
        annealed = dataclasses.replace(prior, **{name: float(schedule[t - 1])})
        log_v_steps[t, : t + 2] = annealed.tables(t)[0]
        log_w_steps[t] = annealed.tables(n)[1]
    if start > 0:
        log_v_steps[start] = -np.inf
        log_v_steps[start, : start + 2] = prior.tables(start)[0]
        log_w_steps[start] = final_log_w
    return StepTables(log_v_steps, log_w_steps, final_log_v, final_log_w, True)


def _options(num_particles, rejuvenation=0, ess_threshold=0.5, resampling="systematic"
             ) -> SMCOptions:
    return SMCOptions(int(num_particles), int(rejuvenation), float(ess_threshold),
                      RESAMPLING_SCHEMES[resampling])


def _check_run_arguments(num_particles, rejuvenation, ess_threshold, resampling, anneal):
    if int(num_particles) != num_particles or num_particles < 1:
        raise ValueError(f"num_particles must be a positive integer; got {num_particles!r}")
    if int(rejuvenation) != rejuvenation or rejuvenation < 0:
        raise ValueError(f"rejuvenation must be a non-negative integer; got {rejuvenation!r}")
    if not 0.0 <= float(ess_threshold) <= 1.0:
        raise ValueError(f"ess_threshold must be in [0, 1]; got {ess_threshold!r}")
    if resampling not in ("systematic", "multinomial"):
        raise ValueError(
            f"resampling must be 'systematic' or 'multinomial'; got {resampling!r}")
    if anneal is not None and (not isinstance(anneal, dict) or set(anneal) - {"start", "rate"}
                               or "start" not in anneal):
        raise ValueError(
            "anneal must be None or a dict {'start': float, 'rate': float}; "
            f"got {anneal!r}")


class PreparedRun(NamedTuple):
    """What :func:`run_smc` computes once per data set / order (``_prepare_run``)."""

    model: Model
    empty_row: np.ndarray
    order: np.ndarray
    log_prior_predictive: np.ndarray
    tables: StepTables


def _prepare_run(prior, family, x, order, anneal, start=0) -> PreparedRun:
    x = np.ascontiguousarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"x must be prepared data of shape (n, data_dim); got {x.shape}")
    n = x.shape[0]
    if order is None:
        order = np.arange(n, dtype=np.int64)
    else:
        order = np.asarray(order, dtype=np.int64)
        if order.shape != (n,) or not np.array_equal(np.sort(order), np.arange(n)):
            raise ValueError(f"order must be a permutation of 0..{n - 1}")
    if anneal is not None:
        anneal = {"start": anneal["start"], "rate": anneal.get("rate", 0.01)}
    tables = step_tables(prior, n, anneal, start)
    family_id = family.family_id
    params = np.ascontiguousarray(family.params, dtype=np.float64)
    empty_row = np.ascontiguousarray(family.empty_stats, dtype=np.float64)
    log_prior_predictive = np.array(
        [dispatch.log_predictive(family_id, params, empty_row, x[i]) for i in range(n)])
    return PreparedRun(Model(family_id, params, x), empty_row, order, log_prior_predictive,
                       tables)


def run_smc(prior, family, x, num_particles: int, rng: np.random.Generator, *, order=None,
            rejuvenation: int = 0, anneal: dict | None = None, ess_threshold: float = 0.5,
            resampling: str = "systematic", prepared=None, start: int = 0, initial_labels=None) -> SMCResult:
    """One SMC run over the partitions of ``x`` (Lomeli 2017; Ülker, Günsel & Cemgil 2010).

    Parameters
    ----------
    prior : GibbsTypePrior
    family : ComponentFamily
        Numeric conjugate family.
    x : ndarray, shape (n, data_dim)
        Data prepared by ``family.prepare_data``.
    num_particles : int
    rng : numpy.random.Generator
    order : array of int, shape (n,), optional
        Order in which the points are added (default: data order).
    rejuvenation : int
        Number of past labels Gibbs-updated per step (Ülker's Q; 0 = Lomeli's StandardSMC).
    anneal : dict, optional
        ``{"start": α_1, "rate": c_α}`` (Ülker's SMC-A), reweighted to the target at the end.
    ess_threshold : float
        Resample when the relative ESS falls below this (1: every step, 0: never).
    resampling : {"systematic", "multinomial"}
    prepared : tuple, optional
        ``_prepare_run(prior, family, x, order, anneal, start)`` computed once for many runs.
    start : int
        Points ``order[:start]`` already placed (incremental use); ``initial_labels`` of shape
        (num_particles, n) then holds each particle's labels of those points (the population
        must be equally weighted and target the true prior), and the evidence returned is that
        of the remaining points given the first ``start``.

    Returns
    -------
    SMCResult

    References
    ----------
    Lomeli, M. (2017). SMC for Gibbs-type mixtures (slides), StandardSMC, corrected in
    ``specs/arm_and_smc.md`` §2.  Ülker, Y., Günsel, B. and Cemgil, A. T. (2010). Sequential
    Monte Carlo samplers for Dirichlet process mixtures.  AISTATS, eqs. (7), (10), corrected
    in §3.
    """
    _check_run_arguments(num_particles, rejuvenation, ess_threshold, resampling, anneal)
    if prepared is None:
        prepared = _prepare_run(prior, family, x, order, anneal, start)
    x = prepared.model.x
    if start:
        initial_labels = np.ascontiguousarray(initial_labels, dtype=np.int64)
        if initial_labels.shape != (num_particles, x.shape[0]):
            raise ValueError(f"initial_labels must have shape ({num_particles}, {x.shape[0]})")
    else:
        initial_labels = np.zeros((1, 1), dtype=np.int64)
    options = _options(num_particles, rejuvenation, ess_threshold, resampling)
    seed_numba_from(rng)
    labels, log_weights, log_evidence, ess, resampled, increments = smc_partition_run(
        prepared.model, prepared.empty_row, prepared.order, prepared.log_prior_predictive,
        prepared.tables, options, int(start), initial_labels)
    normalised, _ = reference_normalise_log_weights(log_weights)
    return SMCResult(canonical_labels(labels), np.log(normalised), float(log_evidence), ess,
                     resampled, increments)


def log_evidence_runs(prior, family, x, num_particles: int, num_runs: int,
                      rng: np.random.Generator, *, order=None, rejuvenation: int = 0,
                      anneal: dict | None = None, ess_threshold: float = 0.5,
                      resampling: str = "systematic") -> np.ndarray:
    """Log evidence estimates of ``num_runs`` independent runs (one numba call)."""
    _check_run_arguments(num_particles, rejuvenation, ess_threshold, resampling, anneal)
    prepared = _prepare_run(prior, family, x, order, anneal)
    options = _options(num_particles, rejuvenation, ess_threshold, resampling)
    seed_numba_from(rng)
    return smc_partition_log_evidence_runs(
        int(num_runs), prepared.model, prepared.empty_row, prepared.order,
        prepared.log_prior_predictive, prepared.tables, options)
