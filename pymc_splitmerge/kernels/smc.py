r"""The package's sequential Monte Carlo engine: generic (conditional) SMC steps and the
SMC sampler over partitions (Lomeli 2017; Ülker, Günsel & Cemgil 2010).

Generic part (any particle system):

* ``reweight_and_resample``: ``log w += log v``, the evidence increment
  ``log sum_p W_{t-1}^p v_t^p`` and :func:`resample_if_degenerate`, the ESS-triggered selection
  (systematic, multinomial or conditional multinomial with particle 0 pinned), which PGSM's
  conditional SMC (``kernels/pgsm.py``) also uses.

Allocation model (partition particles in the ``kernels/state.py`` layout):

* ``allocation_log_weights`` / ``allocation_log_weights_at``: log of
  ``EPPF_t(Π ⊕ c) / EPPF_{t-1}(Π) · f(y_t | y_c)`` for every block ``c`` and a new block, from
  per-step prior tables (annealed concentration allowed) — the corrected weights of
  ``specs/arm_and_smc.md`` §2-3; ``log_prior_ratio`` for the final annealing reweight.
* ``smc_partition_run``: the loop (weight, resample, propagate, optional Gibbs rejuvenation of a
  rotating block of past labels); ``run_smc`` / ``log_evidence_runs`` are the Python entry
  points, ``step_tables`` builds the tables, ``VARIANTS`` holds the negative controls used by
  the tests.  Evidence: ``log Ẑ = sum_t log sum_p W_{t-1}^p v_t^p`` (+ the final reweight),
  whose first term is ``log f(y_1)``.

Helpers below the engine:

* ``normalise_log_weights``: log weights -> normalised weights; the NaN policy is explicit:
  a NaN log weight is treated as ``-inf`` (the particle gets weight 0), as in ``particles``
  (N. Chopin).  If every weight is ``-inf`` the result is uniform (degenerate but defined).
* ``relative_ess``: ``1 / (N * sum(w**2))`` in ``[1/N, 1]`` (Liu & Chen 1995; PGSM Algorithm 3,
  line 18).
* ``conditional_multinomial_resample``: ancestors of a conditional SMC generation, with the
  reference path pinned as particle 0 and its ancestor 0 (Andrieu, Doucet & Holenstein 2010;
  PGSM eq. 6): ``a_0 = 0`` and ``a_p ~ Categorical(w)`` i.i.d. for ``p >= 1``.
* ``multinomial_resample``: plain (unconditional) multinomial resampling (SMC sampler option and
  PGSM's negative-control variant); ``systematic_resample`` (Kitagawa 1996).

The ``@njit`` versions draw from numba's internal random state (seed it first with
``kernels.rng.seed_numba_from``); each has a plain NumPy reference (``reference_*``) taking an
explicit ``np.random.Generator``, which the tests compare against.

References
----------
Andrieu, C., Doucet, A. and Holenstein, R. (2010). Particle Markov chain Monte Carlo methods.
JRSS B 72(3), 269-342.
Bouchard-Côté, A., Doucet, A. and Roth, A. (2017). Particle Gibbs split-merge sampling for
Bayesian inference in mixture models. JMLR 18(28). Algorithm 3, eq. (6).
Liu, J. S. and Chen, R. (1995). Blind deconvolution via sequential imputations. JASA 90.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from pymc_splitmerge.components import dispatch
from pymc_splitmerge.core.slots import free_slot
from pymc_splitmerge.kernels.gibbs import _join_and_new_log_weights as gibbs_join_and_new
from pymc_splitmerge.kernels.rng import seed_numba_from
from pymc_splitmerge.kernels.state import assign_point, log_target, unassign_point

__all__ = [
    "conditional_multinomial_resample",
    "multinomial_resample",
    "normalise_log_weights",
    "reference_conditional_multinomial_resample",
    "reference_normalise_log_weights",
    "reference_relative_ess",
    "relative_ess",
    "sample_index",
]


@numba.njit(cache=True)
def normalise_log_weights(log_weights, weights_out):
    """Normalise ``log_weights`` into ``weights_out``; return the log of their sum.

    Parameters
    ----------
    log_weights : ndarray of float64, shape (N,)
        Unnormalised log weights; NaN is treated as ``-inf``.
    weights_out : ndarray of float64, shape (N,)
        Filled with the normalised weights (uniform if every weight is ``-inf``).

    Returns
    -------
    float
        ``log(sum(exp(log_weights)))`` (``-inf`` if every weight is ``-inf``).
    """
    n = log_weights.shape[0]
    peak = -np.inf
    for p in range(n):
        value = log_weights[p]
        if value == value and value > peak:  # value == value is False for NaN
            peak = value
    if peak == -np.inf:
        for p in range(n):
            weights_out[p] = 1.0 / n
        return -np.inf
    total = 0.0
    for p in range(n):
        value = log_weights[p]
        if value == value:
            weights_out[p] = np.exp(value - peak)
        else:
            weights_out[p] = 0.0
        total += weights_out[p]
    for p in range(n):
        weights_out[p] /= total
    return peak + np.log(total)


@numba.njit(cache=True)
def relative_ess(weights):
    """Relative effective sample size ``1 / (N * sum(w**2))`` of normalised ``weights``."""
    total = 0.0
    for p in range(weights.shape[0]):
        total += weights[p] * weights[p]
    return 1.0 / (weights.shape[0] * total)


@numba.njit(cache=True)
def sample_index(weights):
    """One draw from ``Categorical(weights)`` (normalised) with numba's random state."""
    u = np.random.random()
    cumulative = 0.0
    last = 0
    for p in range(weights.shape[0]):
        if weights[p] > 0.0:
            last = p
            cumulative += weights[p]
            if u < cumulative:
                return p
    return last  # round-off: u >= cumulative sum


@numba.njit(cache=True)
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


@numba.njit(cache=True)
def multinomial_resample(weights, ancestors_out):
    """Unconditional multinomial resampling (negative-control use only)."""
    for p in range(weights.shape[0]):
        ancestors_out[p] = sample_index(weights)


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


@numba.njit(cache=True)
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


def reference_systematic_resample(weights, uniform):
    """Plain NumPy reference of ``systematic_resample``."""
    weights = np.asarray(weights, float)
    n = weights.size
    positions = (np.arange(n) + uniform) / n
    ancestors = np.searchsorted(np.cumsum(weights), positions, side="right")
    return np.minimum(ancestors, n - 1).astype(np.int64)


# ============================================================================ generic SMC step
# Resampling schemes (integer codes used inside numba).
RESAMPLING_SCHEMES = {"systematic": 0, "multinomial": 1, "conditional_multinomial": 2}


@numba.njit(cache=True)
def log_sum_exp(values):
    """``log(sum(exp(values)))`` with NaN treated as ``-inf``."""
    peak = -np.inf
    for value in values:
        if not np.isnan(value) and value > peak:
            peak = value
    if peak == -np.inf:
        return -np.inf
    total = 0.0
    for value in values:
        if not np.isnan(value):
            total += np.exp(value - peak)
    return peak + np.log(total)


@numba.njit(cache=True)
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


@numba.njit(cache=True)
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
    before = log_sum_exp(log_weights)
    for p in range(log_weights.shape[0]):
        value = log_weights[p] + log_increments[p]
        log_weights[p] = -np.inf if np.isnan(value) else value
    after = normalise_log_weights(log_weights, weights)
    increment = after - before
    ess = relative_ess(weights)
    if after > -np.inf and resample_if_degenerate(weights, log_weights, ess_threshold, scheme,
                                                  ancestors):
        return increment, ess, True
    for p in range(log_weights.shape[0]):
        ancestors[p] = p
    return increment, ess, False


# ===================================================================== partition particles
@numba.njit(cache=True)
def copy_particle(placed, src_labels, src_sizes, src_stats, src_active, src_where, src_meta,
                  dst_labels, dst_sizes, dst_stats, dst_active, dst_where, dst_meta, empty_row):
    """Copy one particle's partition (of the points ``placed``) into another particle's arrays.

    Free slots keep the empty statistics row, size 0 and ``where = -1`` (the invariants every
    state function relies on): the destination's old clusters are reset first, then the
    source's are copied, so the cost is O(K + number of placed points), not O(capacity).
    """
    for j in range(dst_meta[0]):
        slot = dst_active[j]
        dst_stats[slot, :] = empty_row
        dst_sizes[slot] = 0
        dst_where[slot] = -1
    for j in range(src_meta[0]):
        slot = src_active[j]
        dst_stats[slot, :] = src_stats[slot, :]
        dst_sizes[slot] = src_sizes[slot]
        dst_where[slot] = j
        dst_active[j] = slot
    dst_meta[0] = src_meta[0]
    for position in range(placed.shape[0]):
        i = placed[position]
        dst_labels[i] = src_labels[i]


# ========================================================================= allocation model
@numba.njit(cache=True)
def allocation_log_weights_at(family_id, params, x_row, log_prior_predictive, log_v_now,
                              log_w_now, log_v_prev, log_w_prev, weights_change, sizes, stats,
                              active, p, k, out):
    """:func:`allocation_log_weights` for particle ``p`` of stacked arrays (no array views).

    ``sizes``/``active`` of shape (N, capacity), ``stats`` (N, capacity, stat_dim), ``k`` the
    particle's number of blocks.  ``weights_change=False`` asserts ``log_w_now`` and
    ``log_w_prev`` are equal tables (no annealing of W), which skips the O(K) product of the
    untouched blocks' W ratios (it is 1).  With ``active[p, j] = j`` and the fixed-n tables
    shifted by the clusters outside the closure it gives PGSM's option weights (PGSM keeps
    that special case inline: the call cost ~15 % of a move in ``benchmarks/pgsm_cost.py``).
    """
    common = 0.0
    if weights_change:
        for j in range(k):
            m = sizes[p, active[p, j]]
            common += log_w_now[m] - log_w_prev[m]
    if k > 0:
        base = log_v_now[k] - log_v_prev[k] + common
        for j in range(k):
            slot = active[p, j]
            m = sizes[p, slot]
            value = (base + log_w_now[m + 1] - log_w_now[m]
                     + dispatch.log_predictive(family_id, params, stats[p, slot], x_row))
            out[j] = -np.inf if np.isnan(value) else value
    if k + 1 < log_v_now.shape[0] and log_v_now[k + 1] > -np.inf:
        value = (log_v_now[k + 1] - log_v_prev[k] + common + log_w_now[1]
                 + log_prior_predictive)
        out[k] = -np.inf if np.isnan(value) else value
    else:
        out[k] = -np.inf
    return k


@numba.njit(cache=True)
def allocation_log_weights(family_id, params, x_row, log_prior_predictive, log_v_now,
                           log_w_now, log_v_prev, log_w_prev, sizes, stats, active, meta, out):
    r"""Log weights of adding one point to each cluster or a new one (corrected Lomeli/Ülker).

    For a particle holding the partition :math:`\Pi` of :math:`t-1` points (:math:`K` blocks of
    sizes :math:`m_b`), ``out[j]`` (``j < K``, cluster ``active[j]``) and ``out[K]`` (new
    cluster) are the logs of

    .. math::

        \frac{\mathrm{EPPF}_t(\Pi \oplus c)}{\mathrm{EPPF}_{t-1}(\Pi)}\, f(y \mid y_c),

    with :math:`\mathrm{EPPF}_t = V_t(t, K)\prod_b W_t(m_b)` read from the tables of the step
    (``log_v_now``/``log_w_now``: prior for ``t`` points, possibly under an annealed parameter
    :math:`\alpha_t`; ``*_prev``: step ``t - 1``).  Without annealing the :math:`W` factors of
    the untouched blocks cancel and this is Lomeli's StandardSMC weight with the corrections
    of spec §2 (factor :math:`n_c - \sigma = W(m+1)/W(m)`, :math:`V(t, \cdot)/V(t-1, K)`);
    with annealing it is Ülker et al.'s resample-move weight :math:`v'_n` (spec §3).
    ``log_sum_exp(out[:K+1])`` is the incremental weight :math:`v_t = p(y_t \mid \Pi, y)`.
    NaN becomes ``-inf``.  Returns ``K``.

    This per-particle form takes the particle's 1-D arrays (``kernels/state.py`` layout); the
    loops call :func:`allocation_log_weights_at` on the population's stacked arrays.
    """
    capacity = sizes.shape[0]
    return allocation_log_weights_at(
        family_id, params, x_row, log_prior_predictive, log_v_now, log_w_now, log_v_prev,
        log_w_prev, True, sizes.reshape((1, capacity)),
        stats.reshape((1, capacity, stats.shape[1])), active.reshape((1, capacity)), 0,
        meta[0], out)


@numba.njit(cache=True)
def log_prior_ratio(log_v_num, log_w_num, log_v_den, log_w_den, sizes, active, meta):
    """``log EPPF_num(Π) - log EPPF_den(Π)`` for the particle's partition (annealing reweight)."""
    k = meta[0]
    total = log_v_num[k] - log_v_den[k]
    for j in range(k):
        m = sizes[active[j]]
        total += log_w_num[m] - log_w_den[m]
    return total


@numba.njit(cache=True)
def _draw_from_log_weights(log_weights, count):
    peak = -np.inf
    for j in range(count):
        peak = max(peak, log_weights[j])
    total = 0.0
    for j in range(count):
        total += np.exp(log_weights[j] - peak)
    u = np.random.random() * total
    cumulative = 0.0
    last = 0
    for j in range(count):
        w = np.exp(log_weights[j] - peak)
        if w > 0.0:
            last = j
            cumulative += w
            if u < cumulative:
                return j
    return last


@numba.njit(cache=True)
def _place(family_id, params, x, i, choice, k, labels, sizes, stats, active, where, meta):
    if choice == k:
        slot = free_slot(where)
    else:
        slot = active[choice]
    assign_point(family_id, params, x, i, slot, labels, sizes, stats, active, where, meta)


@numba.njit(cache=True)
def _rejuvenate(family_id, params, x, order, n_placed, cursor, block, log_prior_predictive,
                log_v_table, log_w_table, labels, sizes, stats, empty_row, active, where, meta,
                scratch):
    """Gibbs-update ``block`` of the first ``n_placed - 1`` placed points from ``cursor``."""
    pool = n_placed - 1
    count = min(pool, block)
    for r in range(count):
        i = order[(cursor + r) % pool]
        old = unassign_point(family_id, params, x, i, labels, sizes, stats, empty_row, active,
                             where, meta)
        was_singleton = sizes[old] == 0
        k = gibbs_join_and_new(family_id, params, x, i, log_v_table, log_w_table, sizes, stats,
                               active, meta, log_prior_predictive[i], scratch)
        choice = _draw_from_log_weights(scratch, k + 1)
        if choice == k:
            slot = old if was_singleton else free_slot(where)
        else:
            slot = active[choice]
        assign_point(family_id, params, x, i, slot, labels, sizes, stats, active, where, meta)


# ============================================================================ the SMC loop
VARIANTS = {"correct": 0, "cumulative_weights": 1, "drop_first_term": 2,
            "weight_after_move": 3}


@numba.njit(cache=True)
def _row(table, t):
    return table[t] if table.shape[0] > 1 else table[0]


@numba.njit(cache=True)
def smc_partition_run(family_id, params, x, empty_row, order, log_prior_predictive, log_v_steps,
                      log_w_steps, final_log_v, final_log_w, reweight_final, num_particles,
                      rejuvenation, ess_threshold, scheme, variant, start, initial_labels):
    """Sequential Monte Carlo over partitions (Lomeli's StandardSMC, Ülker's SMC-G/SMC-A).

    Step ``t = 1..n`` adds point ``order[t-1]``: incremental weights from
    :func:`allocation_log_weights` (they do not depend on the new label), weighting and
    ESS-triggered resampling (:func:`reweight_and_resample`), then each particle draws the
    label from its allocation weights and, if ``rejuvenation > 0``, one Gibbs update of the next
    ``rejuvenation`` past labels (rotating, without overlap) under the step's target.  With
    ``reweight_final`` the particles are reweighted by ``EPPF_final / EPPF_{α_n}`` at the end
    (annealing, spec §3 step 5).

    Parameters
    ----------
    log_v_steps : ndarray, shape (n + 1, n_cols)
        ``log_v_steps[t, K] = log V_t(t, K)`` under the step-``t`` prior parameter.
    log_w_steps : ndarray, shape (n + 1, n_cols) or (1, n_cols)
        ``log W_t(m)`` per step (one row when the weights do not depend on ``t``).
    variant : int
        0 correct; negative controls: 1 evidence from the cumulative weights
        (``log mean_p w_cum``), 2 the first point's term dropped, 3 weighting after the move.
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
    n = x.shape[0]
    L = num_particles
    cap = n + 2
    s = empty_row.shape[0]
    labels = np.zeros((L, n), dtype=np.int64)
    sizes = np.zeros((L, cap), dtype=np.int64)
    stats = np.empty((L, cap, s))
    active = np.zeros((L, cap), dtype=np.int64)
    where = np.full((L, cap), -1, dtype=np.int64)
    meta = np.zeros((L, 1), dtype=np.int64)
    labels2 = np.zeros((L, n), dtype=np.int64)
    sizes2 = np.zeros((L, cap), dtype=np.int64)
    stats2 = np.empty((L, cap, s))
    active2 = np.zeros((L, cap), dtype=np.int64)
    where2 = np.full((L, cap), -1, dtype=np.int64)
    meta2 = np.zeros((L, 1), dtype=np.int64)
    for p in range(L):
        for slot in range(cap):
            stats[p, slot, :] = empty_row
            stats2[p, slot, :] = empty_row
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
    weights_change = log_w_steps.shape[0] > 1
    for p in range(L):
        for position in range(start):
            i = order[position]
            assign_point(family_id, params, x, i, initial_labels[p, i], labels[p], sizes[p],
                         stats[p], active[p], where[p], meta[p])
    for t in range(start + 1, n + 1):
        i = order[t - 1]
        lv_now = log_v_steps[t]
        lv_prev = log_v_steps[t - 1]
        lw_now = _row(log_w_steps, t)
        lw_prev = _row(log_w_steps, t - 1)
        for p in range(L):
            k = allocation_log_weights_at(family_id, params, x[i], log_prior_predictive[i],
                                          lv_now, lw_now, lv_prev, lw_prev, weights_change,
                                          sizes, stats, active, p, meta[p, 0], alloc[p])
            counts[p] = k
            increments[p] = log_sum_exp(alloc[p, : k + 1])
        placed = order[: t - 1]
        if variant == 3:
            # Negative control: propose, move, then weight with the moved state.
            for p in range(L):
                k = counts[p]
                choice = _draw_from_log_weights(alloc[p], k + 1)
                log_q = alloc[p, choice] - increments[p]
                before = log_target(family_id, params, lv_prev, lw_prev, sizes[p], stats[p],
                                    active[p], meta[p])
                _place(family_id, params, x, i, choice, k, labels[p], sizes[p], stats[p],
                       active[p], where[p], meta[p])
                if rejuvenation > 0 and t > 1:
                    _rejuvenate(family_id, params, x, order, t, cursor, rejuvenation,
                                log_prior_predictive, lv_now, lw_now, labels[p], sizes[p],
                                stats[p], empty_row, active[p], where[p], meta[p], scratch)
                after = log_target(family_id, params, lv_now, lw_now, sizes[p], stats[p],
                                   active[p], meta[p])
                increments[p] = after - before - log_q
            increment, ess, did = reweight_and_resample(log_weights, increments,
                                                        ess_threshold, scheme, weights,
                                                        ancestors)
            if did:
                placed_now = order[:t]
                for p in range(L):
                    a = ancestors[p]
                    copy_particle(placed_now, labels[a], sizes[a], stats[a], active[a],
                                  where[a], meta[a], labels2[p], sizes2[p], stats2[p],
                                  active2[p], where2[p], meta2[p], empty_row)
                labels, labels2 = labels2, labels
                sizes, sizes2 = sizes2, sizes
                stats, stats2 = stats2, stats
                active, active2 = active2, active
                where, where2 = where2, where
                meta, meta2 = meta2, meta
        else:
            before_all = log_sum_exp(log_weights)
            increment, ess, did = reweight_and_resample(log_weights, increments,
                                                        ess_threshold, scheme, weights,
                                                        ancestors)
            if variant == 1:
                # Negative control: log of the mean cumulative weight since the last resampling.
                increment = before_all + increment - np.log(L)
            if did:
                for p in range(L):
                    a = ancestors[p]
                    copy_particle(placed, labels[a], sizes[a], stats[a], active[a], where[a],
                                  meta[a], labels2[p], sizes2[p], stats2[p], active2[p],
                                  where2[p], meta2[p], empty_row)
                labels, labels2 = labels2, labels
                sizes, sizes2 = sizes2, sizes
                stats, stats2 = stats2, stats
                active, active2 = active2, active
                where, where2 = where2, where
                meta, meta2 = meta2, meta
            for p in range(L):
                a = ancestors[p]
                k = counts[a]
                choice = _draw_from_log_weights(alloc[a], k + 1)
                _place(family_id, params, x, i, choice, k, labels[p], sizes[p], stats[p],
                       active[p], where[p], meta[p])
                if rejuvenation > 0 and t > 1:
                    _rejuvenate(family_id, params, x, order, t, cursor, rejuvenation,
                                log_prior_predictive, lv_now, lw_now, labels[p], sizes[p],
                                stats[p], empty_row, active[p], where[p], meta[p], scratch)
        if rejuvenation > 0 and t > 1:
            cursor = (cursor + rejuvenation) % (t - 1)
        if not (variant == 2 and t == 1):
            log_evidence += increment
        log_increments[t - 1] = increment
        ess_history[t - 1] = ess
        resampled[t - 1] = did
    if reweight_final:
        for p in range(L):
            increments[p] = log_prior_ratio(final_log_v, final_log_w, log_v_steps[n],
                                            _row(log_w_steps, n), sizes[p], active[p], meta[p])
        before = log_sum_exp(log_weights)
        for p in range(L):
            log_weights[p] += increments[p]
        after = normalise_log_weights(log_weights, weights)
        log_increments[n] = after - before
        log_evidence += after - before
        ess_history[n] = relative_ess(weights)
    return labels, log_weights, log_evidence, ess_history, resampled, log_increments


@numba.njit(cache=True)
def smc_partition_log_evidence_runs(num_runs, family_id, params, x, empty_row, order,
                                    log_prior_predictive, log_v_steps, log_w_steps, final_log_v,
                                    final_log_w, reweight_final, num_particles, rejuvenation,
                                    ess_threshold, scheme, variant):
    """``num_runs`` independent runs of :func:`smc_partition_run`; their log evidences."""
    out = np.empty(num_runs)
    for r in range(num_runs):
        result = smc_partition_run(family_id, params, x, empty_row, order, log_prior_predictive,
                                   log_v_steps, log_w_steps, final_log_v, final_log_w,
                                   reweight_final, num_particles, rejuvenation, ess_threshold,
                                   scheme, variant, 0, np.zeros((1, 1), dtype=np.int64))
        out[r] = result[2]
    return out


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
    log_v_steps : ndarray, shape (n + 1, n + 2)
    log_w_steps : ndarray, shape (n + 1, n + 2) (annealed) or (1, n + 2)
    final_log_v, final_log_w : ndarray, shape (n + 2,)
        The target prior's tables for ``n`` points.
    reweight_final : bool

    With ``start > 0`` (continuing a population that targets the true prior for ``start``
    points), row ``start`` holds the target prior's tables.
    """
    import dataclasses

    cols = n + 2
    log_v_steps = np.full((n + 1, cols), -np.inf)
    log_v_steps[0, 0] = 0.0
    final_log_v, final_log_w = prior.tables(n)
    if anneal is None:
        for t in range(1, n + 1):
            log_v_steps[t, : t + 2] = prior.tables(t)[0]
        return log_v_steps, final_log_w[None, :].copy(), final_log_v, final_log_w, False
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
    return log_v_steps, log_w_steps, final_log_v, final_log_w, True


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


def _prepare_run(prior, family, x, order, anneal, start=0):
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
    family_id = int(family.family_id)
    params = np.ascontiguousarray(family.params, dtype=np.float64)
    empty_row = np.ascontiguousarray(family.empty_stats, dtype=np.float64)
    log_prior_predictive = np.array(
        [dispatch.log_predictive(family_id, params, empty_row, x[i]) for i in range(n)])
    return family_id, params, x, empty_row, order, log_prior_predictive, tables


def run_smc(prior, family, x, num_particles: int, rng: np.random.Generator, *, order=None,
            rejuvenation: int = 0, anneal: dict | None = None, ess_threshold: float = 0.5,
            resampling: str = "systematic", variant: str = "correct",
            prepared=None, start: int = 0, initial_labels=None) -> SMCResult:
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
    variant : str
        ``"correct"`` or a negative control (``VARIANTS``), for tests only.
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
    family_id, params, x, empty_row, order, log_prior_predictive, tables = prepared
    if start:
        initial_labels = np.ascontiguousarray(initial_labels, dtype=np.int64)
        if initial_labels.shape != (num_particles, x.shape[0]):
            raise ValueError(f"initial_labels must have shape ({num_particles}, {x.shape[0]})")
    else:
        initial_labels = np.zeros((1, 1), dtype=np.int64)
    log_v_steps, log_w_steps, final_log_v, final_log_w, reweight_final = tables
    seed_numba_from(rng)
    labels, log_weights, log_evidence, ess, resampled, increments = smc_partition_run(
        family_id, params, x, empty_row, order, log_prior_predictive, log_v_steps, log_w_steps,
        final_log_v, final_log_w, reweight_final, int(num_particles), int(rejuvenation),
        float(ess_threshold), RESAMPLING_SCHEMES[resampling], VARIANTS[variant], int(start),
        initial_labels)
    from pymc_splitmerge.core.relabel import canonical_labels

    normalised, _ = reference_normalise_log_weights(log_weights)
    return SMCResult(canonical_labels(labels), np.log(normalised), float(log_evidence), ess,
                     resampled, increments)


def log_evidence_runs(prior, family, x, num_particles: int, num_runs: int,
                      rng: np.random.Generator, *, order=None, rejuvenation: int = 0,
                      anneal: dict | None = None, ess_threshold: float = 0.5,
                      resampling: str = "systematic", variant: str = "correct") -> np.ndarray:
    """Log evidence estimates of ``num_runs`` independent runs (one numba call)."""
    _check_run_arguments(num_particles, rejuvenation, ess_threshold, resampling, anneal)
    family_id, params, x, empty_row, order, log_prior_predictive, tables = _prepare_run(
        prior, family, x, order, anneal)
    log_v_steps, log_w_steps, final_log_v, final_log_w, reweight_final = tables
    seed_numba_from(rng)
    return smc_partition_log_evidence_runs(
        int(num_runs), family_id, params, x, empty_row, order, log_prior_predictive,
        log_v_steps, log_w_steps, final_log_v, final_log_w, reweight_final, int(num_particles),
        int(rejuvenation), float(ess_threshold), RESAMPLING_SCHEMES[resampling],
        VARIANTS[variant])
