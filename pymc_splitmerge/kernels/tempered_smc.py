r"""Likelihood-tempered SMC over partitions: an evidence estimator whose error is small.

The sequence of targets

.. math::

    \pi_\beta(c) \propto p(c) \prod_{b \in c} m(y_b)^{\beta}, \qquad 0 = \beta_0 < \beta_1 <
    \dots < \beta_T = 1,

runs from the partition prior (drawn exactly by sequential seating) to the posterior.  With
:math:`\ell(c) = \sum_b \log m(y_b)` the collapsed log likelihood of a particle, stage
:math:`t` does, as :func:`pymc.sample_smc` does for continuous models (Del Moral, Doucet &
Jasra 2006; Chopin & Papaspiliopoulos 2020, ch. 17):

1. **temperature**: :math:`\beta_t` by bisection so that the relative effective sample size
   of the incremental weights :math:`w^p = \exp\{(\beta_t - \beta_{t-1})\,\ell(c^p)\}` equals
   ``ess_threshold`` (or 1 if that is reached), each step at most ``max_temperature_step``,
   unless a fixed schedule is given;
2. **evidence**: :math:`\log\hat Z \mathrel{+}= \log \frac1L\sum_p w^p` (the particles are
   equally weighted after every resampling, so the increment is the mean incremental weight);
3. **resampling**: systematic, to equal weights;
4. **move**: ``n_gibbs_sweeps`` collapsed Gibbs sweeps (random scan) invariant for
   :math:`\pi_{\beta_t}`: point :math:`i` joins block :math:`b` with weight
   :math:`W(m_b+1)/W(m_b)\; f(y_i \mid y_b)^{\beta_t}` and opens a block with weight
   :math:`V(n,K+1)/V(n,K)\,W(1)\, f(y_i)^{\beta_t}` (the Gibbs conditional of the package's
   ``kernels/gibbs.py`` with the predictive raised to :math:`\beta_t`, since
   :math:`m(y_{b\cup i})/m(y_b) = f(y_i\mid y_b)`), optionally followed by
   ``n_split_merge`` sequentially allocated split-merge moves (SAMS, Dahl 2005) at the same
   temperature.

With a fixed schedule :math:`\hat Z = \prod_t \frac1L \sum_p w_t^p` is unbiased for
:math:`p(y)` (Del Moral 2004); adaptive temperatures make it consistent, with a bias of order
:math:`1/L` that the tests and the benchmark measure.  The particles after the last stage are
equally weighted draws whose law tends to the posterior.

References
----------
Del Moral, P., Doucet, A. and Jasra, A. (2006). Sequential Monte Carlo samplers. JRSS B 68(3),
411-436.
Dahl, D. B. (2005). Sequentially-allocated merge-split sampler for conjugate and nonconjugate
Dirichlet process mixture models.  Technical report, Texas A&M University.
Chopin, N. and Papaspiliopoulos, O. (2020). An Introduction to Sequential Monte Carlo.
Springer, ch. 17 (tempering, adaptive temperatures by bisection on the ESS).
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from pymc_splitmerge.components import dispatch
from pymc_splitmerge.core.logweights import sample_log_weights
from pymc_splitmerge.core.relabel import canonical_labels
from pymc_splitmerge.core.slots import free_slot
from pymc_splitmerge.kernels.rng import seed_numba_from
from pymc_splitmerge.kernels.smc import (
    _resample_population,
    empty_population,
    particle,
    reference_systematic_resample,
)
from pymc_splitmerge.kernels.state import Model, add, remove
from pymc_splitmerge.priors.seating import log_join_weight, log_open_weight

__all__ = [
    "TemperedPrepared",
    "TemperedSMCResult",
    "next_temperature",
    "population_log_likelihoods",
    "prepare_tempered",
    "prior_draws",
    "run_tempered_smc",
    "stage_log_increment",
    "tempered_gibbs_sweeps",
    "tempered_split_merge",
]


# ============================================================================ numba leaves
@numba.njit(cache=True)
def prior_draws(model, population, empty_row, log_v_steps, log_w, scratch):
    """Draw every particle from the partition prior by sequential seating (exact).

    Point ``i`` (``t = i + 1`` points after it) joins a block of size ``m`` with probability
    ``∝ V(t, K) W(m + 1) / (V(t - 1, K) W(m))`` and opens one ``∝ V(t, K + 1) W(1) / V(t - 1,
    K)`` (the EPPF ratio; ``log_v_steps[t] = log V(t, ·)``).
    """
    n = model.x.shape[0]
    for p in range(population.labels.shape[0]):
        part = particle(population, empty_row, p)
        for i in range(n):
            t = i + 1
            k = part.cluster_count[0]
            previous = log_v_steps[t - 1, k]
            join = log_v_steps[t, k] - previous
            for j in range(k):
                scratch[j] = join + log_join_weight(log_w, part.sizes[part.active[j]], 1)
            scratch[k] = log_v_steps[t, k + 1] - previous + log_w[1]
            choice = sample_log_weights(scratch, k + 1, np.random.random())
            slot = free_slot(part.where) if choice == k else part.active[choice]
            add(model, part, i, slot)


@numba.njit(cache=True)
def population_log_likelihoods(model, population, out):
    """``out[p] = sum_b log m(y_b)`` of every particle (the collapsed log likelihood)."""
    for p in range(population.labels.shape[0]):
        total = 0.0
        for j in range(population.cluster_count[p, 0]):
            slot = population.active[p, j]
            total += dispatch.log_marginal(model.family_id, model.params,
                                           population.stats[p, slot])
        out[p] = total


@numba.njit(cache=True)
def tempered_gibbs_sweeps(model, population, empty_row, log_v, log_w, beta,
                          log_prior_predictive, n_sweeps, scratch, order):
    """``n_sweeps`` random-scan Gibbs sweeps of every particle, invariant for ``π_β``.

    Returns the number of point updates that changed a point's block.
    """
    n = model.x.shape[0]
    changed = 0
    for p in range(population.labels.shape[0]):
        part = particle(population, empty_row, p)
        for _ in range(n_sweeps):
            np.random.shuffle(order)
            for r in range(n):
                i = order[r]
                old = remove(model, part, i)
                was_singleton = part.sizes[old] == 0
                k = part.cluster_count[0]
                dispatch.log_predictive_many(model.family_id, model.params, part.stats,
                                             part.active, k, model.x[i], scratch)
                for j in range(k):
                    value = (log_join_weight(log_w, part.sizes[part.active[j]], 1)
                             + beta * scratch[j])
                    scratch[j] = -np.inf if np.isnan(value) else value
                value = log_open_weight(log_v, log_w, k, 1) + beta * log_prior_predictive[i]
                scratch[k] = -np.inf if np.isnan(value) else value
                choice = sample_log_weights(scratch, k + 1, np.random.random())
                if choice == k:
                    slot = old if was_singleton else free_slot(part.where)
                else:
                    slot = part.active[choice]
                if not (slot == old or (was_singleton and choice == k)):
                    changed += 1
                add(model, part, i, slot)
    return changed


@numba.njit(cache=True)
def _block_log_likelihood(model, part, slot):
    return dispatch.log_marginal(model.family_id, model.params, part.stats[slot])


@numba.njit(cache=True)
def _sams_allocate(model, part, members, count, slot_a, slot_b, beta, log_w, forced_a):
    """Sequential allocation of ``members[:count]`` (random order) to ``slot_a`` / ``slot_b``.

    The anchors are already placed.  With ``forced_a`` of length > 0 the allocation is forced
    (``forced_a[r]`` says whether member ``r`` goes to ``a``): the probability of the given
    split is returned instead of drawing one.  Returns the log proposal probability.
    """
    log_q = 0.0
    x = model.x
    for r in range(count):
        i = members[r]
        size_a = part.sizes[slot_a]
        size_b = part.sizes[slot_b]
        pa = (log_join_weight(log_w, size_a, 1) + beta * dispatch.log_predictive(
            model.family_id, model.params, part.stats[slot_a], x[i]))
        pb = (log_join_weight(log_w, size_b, 1) + beta * dispatch.log_predictive(
            model.family_id, model.params, part.stats[slot_b], x[i]))
        peak = max(pa, pb)
        log_norm = peak + np.log(np.exp(pa - peak) + np.exp(pb - peak))
        if forced_a.shape[0] > 0:
            to_a = forced_a[r]
        else:
            to_a = np.random.random() < np.exp(pa - log_norm)
        if to_a:
            log_q += pa - log_norm
            add(model, part, i, slot_a)
        else:
            log_q += pb - log_norm
            add(model, part, i, slot_b)
    return log_q


@numba.njit(cache=True)
def tempered_split_merge(model, population, empty_row, log_v, log_w, beta, n_moves,
                         members, forced):
    """``n_moves`` SAMS split-merge moves (Dahl 2005) per particle, invariant for ``π_β``.

    Two distinct points ``i, j`` uniformly at random.  Same block: split it, the other members
    allocated in a random order to the block of ``i`` or of ``j`` with probability ``∝
    W(m+1)/W(m) f(y | block)^β`` (log probability ``log q``); different blocks: merge, with
    ``log q`` of the forced reverse allocation.  Metropolis–Hastings with
    ``log π_β(c*) - log π_β(c) ∓ log q``.  Returns the number of accepted moves.
    """
    n = model.x.shape[0]
    accepted = 0
    no_force = np.zeros(0, dtype=np.bool_)
    if n < 2:
        return 0
    for p in range(population.labels.shape[0]):
        part = particle(population, empty_row, p)
        for _ in range(n_moves):
            i = np.random.randint(n)
            j = np.random.randint(n - 1)
            if j >= i:
                j += 1
            slot_i = part.labels[i]
            slot_j = part.labels[j]
            k = part.cluster_count[0]
            if slot_i == slot_j:
                # split proposal: members of the block other than i, j, random order
                count = 0
                for h in range(n):
                    if part.labels[h] == slot_i and h != i and h != j:
                        members[count] = h
                        count += 1
                np.random.shuffle(members[:count])
                size = part.sizes[slot_i]
                log_before = (log_v[k] + log_w[size]
                              + beta * _block_log_likelihood(model, part, slot_i))
                for r in range(count):
                    remove(model, part, members[r])
                remove(model, part, j)
                slot_j_new = free_slot(part.where)
                add(model, part, j, slot_j_new)
                log_q = _sams_allocate(model, part, members, count, slot_i, slot_j_new, beta,
                                       log_w, no_force)
                log_after = (log_v[k + 1] + log_w[part.sizes[slot_i]]
                             + log_w[part.sizes[slot_j_new]]
                             + beta * (_block_log_likelihood(model, part, slot_i)
                                       + _block_log_likelihood(model, part, slot_j_new)))
                log_ratio = log_after - log_before - log_q
                if np.log(np.random.random()) < log_ratio:
                    accepted += 1
                else:  # undo: everything back into slot_i
                    for r in range(count):
                        if part.labels[members[r]] == slot_j_new:
                            remove(model, part, members[r])
                            add(model, part, members[r], slot_i)
                    remove(model, part, j)
                    add(model, part, j, slot_i)
            else:
                # merge proposal; log q of the reverse split by forced allocation
                count = 0
                for h in range(n):
                    if (part.labels[h] == slot_i or part.labels[h] == slot_j) and h != i \
                            and h != j:
                        members[count] = h
                        count += 1
                np.random.shuffle(members[:count])
                for r in range(count):
                    forced[r] = part.labels[members[r]] == slot_i
                size_i = part.sizes[slot_i]
                size_j = part.sizes[slot_j]
                log_before = (log_v[k] + log_w[size_i] + log_w[size_j]
                              + beta * (_block_log_likelihood(model, part, slot_i)
                                        + _block_log_likelihood(model, part, slot_j)))
                # the forced reverse split: rebuild the two blocks from the anchors
                for r in range(count):
                    remove(model, part, members[r])
                log_q = _sams_allocate(model, part, members, count, slot_i, slot_j, beta, log_w,
                                       forced[:count])
                # merge all into slot_i
                for r in range(count):
                    if part.labels[members[r]] == slot_j:
                        remove(model, part, members[r])
                        add(model, part, members[r], slot_i)
                remove(model, part, j)
                add(model, part, j, slot_i)
                log_after = (log_v[k - 1] + log_w[size_i + size_j]
                             + beta * _block_log_likelihood(model, part, slot_i))
                log_ratio = log_after - log_before + log_q
                if np.log(np.random.random()) < log_ratio:
                    accepted += 1
                else:  # undo: j and its former members back into a block of their own
                    remove(model, part, j)
                    slot_back = free_slot(part.where)
                    add(model, part, j, slot_back)
                    for r in range(count):
                        if not forced[r]:
                            remove(model, part, members[r])
                            add(model, part, members[r], slot_back)
    return accepted


# ============================================================================ Python driver
def stage_log_increment(log_incremental_weights) -> float:
    """``log (1/L) sum_p w^p`` of equally weighted particles: one stage's evidence factor."""
    values = np.asarray(log_incremental_weights, dtype=float)
    peak = values.max()
    if not np.isfinite(peak):
        return -np.inf
    return float(peak + np.log(np.mean(np.exp(values - peak))))


def _relative_ess(log_weights) -> float:
    values = log_weights - log_weights.max()
    weights = np.exp(values)
    return float(weights.sum() ** 2 / (weights.size * np.sum(weights**2)))


def next_temperature(log_likelihoods, beta: float, ess_threshold: float,
                     max_step: float = 1.0) -> float:
    """The next inverse temperature: relative ESS of ``exp(Δβ ℓ)`` equal to ``ess_threshold``.

    Bisection on ``Δβ`` in ``(0, min(1 - β, max_step)]`` as :func:`pymc.sample_smc`; the
    largest step when its ESS stays above the threshold.  ``max_step`` guards against the ESS
    criterion's blind spot: particles that all sit in the same (wrong) region of the partition
    space have nearly equal likelihoods, so the ESS allows a jump to β = 1 that leaves the
    moves no stages to reach the clusters the colder targets need.
    """
    log_likelihoods = np.asarray(log_likelihoods, dtype=float)
    largest = min(1.0 - beta, float(max_step))
    if _relative_ess(largest * log_likelihoods) >= ess_threshold:
        return 1.0 if largest >= 1.0 - beta else beta + largest
    low, high = 0.0, largest
    for _ in range(40):  # relative precision 1e-12 of the step
        middle = 0.5 * (low + high)
        if _relative_ess(middle * log_likelihoods) >= ess_threshold:
            low = middle
        else:
            high = middle
    step = low if low > 0.0 else high
    return min(1.0, beta + step)


class TemperedPrepared(NamedTuple):
    """What :func:`run_tempered_smc` computes once per data set (:func:`prepare_tempered`)."""

    model: Model
    empty_row: np.ndarray
    log_prior_predictive: np.ndarray
    log_v_steps: np.ndarray
    """float64 (n + 1, n + 2): ``log V(t, ·)`` for ``t = 0..n`` (prior draws)."""
    log_v: np.ndarray
    """float64 (n + 2,): ``log V(n, ·)``."""
    log_w: np.ndarray
    """float64 (n + 2,): ``log W``."""


def prepare_tempered(prior, family, x) -> TemperedPrepared:
    """Tables and predictives of :func:`run_tempered_smc` for ``x`` (prepared data)."""
    from pymc_splitmerge.kernels.smc import step_tables

    x = np.ascontiguousarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"x must be prepared data of shape (n, data_dim); got {x.shape}")
    n = x.shape[0]
    tables = step_tables(prior, n)
    family_id = int(family.family_id)
    params = np.ascontiguousarray(family.params, dtype=np.float64)
    empty_row = np.ascontiguousarray(family.empty_stats, dtype=np.float64)
    log_prior_predictive = np.array(
        [dispatch.log_predictive(family_id, params, empty_row, x[i]) for i in range(n)])
    log_v, log_w = (np.ascontiguousarray(table, dtype=np.float64) for table in prior.tables(n))
    return TemperedPrepared(Model(family_id, params, x), empty_row, log_prior_predictive,
                            np.ascontiguousarray(tables.log_v_steps), log_v, log_w)


class TemperedSMCResult(NamedTuple):
    """One likelihood-tempered SMC run over partitions.

    Attributes
    ----------
    labels : ndarray of int64, shape (num_particles, n)
        Canonical labels of the equally weighted final particles.
    log_evidence : float
        ``log Ẑ``, the log of the product of the stages' mean incremental weights.
    temperatures : ndarray, shape (stages + 1,)
        ``β_0 = 0, ..., β_T = 1``.
    log_evidence_increments : ndarray, shape (stages,)
    acceptance : ndarray, shape (stages,)
        Fraction of Gibbs point updates that changed a block at each stage (plus accepted
        split-merge moves, counted per move).
    """

    labels: np.ndarray
    log_evidence: float
    temperatures: np.ndarray
    log_evidence_increments: np.ndarray
    acceptance: np.ndarray


def _check_tempered_arguments(num_particles, n_gibbs_sweeps, n_split_merge, ess_threshold,
                              temperatures, max_temperature_step=1.0):
    if int(num_particles) != num_particles or num_particles < 1:
        raise ValueError(f"num_particles must be a positive integer; got {num_particles!r}")
    if int(n_gibbs_sweeps) != n_gibbs_sweeps or n_gibbs_sweeps < 0:
        raise ValueError(
            f"n_gibbs_sweeps must be a non-negative integer; got {n_gibbs_sweeps!r}")
    if int(n_split_merge) != n_split_merge or n_split_merge < 0:
        raise ValueError(f"n_split_merge must be a non-negative integer; got {n_split_merge!r}")
    if not 0.0 < float(ess_threshold) < 1.0:
        raise ValueError(f"ess_threshold must be in (0, 1) for tempering; got {ess_threshold!r}")
    if not 0.0 < float(max_temperature_step) <= 1.0:
        raise ValueError(
            f"max_temperature_step must be in (0, 1]; got {max_temperature_step!r}")
    if temperatures is not None:
        values = np.asarray(temperatures, dtype=float)
        if (values.ndim != 1 or values.size < 2 or values[0] != 0.0 or values[-1] != 1.0
                or np.any(np.diff(values) <= 0)):
            raise ValueError("temperatures must increase strictly from 0 to 1; got "
                             f"{temperatures!r}")


def run_tempered_smc(prior, family, x, num_particles: int, rng: np.random.Generator, *,
                     n_gibbs_sweeps: int = 2, n_split_merge: int = 0,
                     ess_threshold: float = 0.5, max_temperature_step: float = 0.05,
                     temperatures=None, prepared=None,
                     max_stages: int = 10_000) -> TemperedSMCResult:
    """One likelihood-tempered SMC run over the partitions of ``x`` (module docstring).

    Parameters
    ----------
    prior : GibbsTypePrior
    family : ComponentFamily
    x : ndarray, shape (n, data_dim)
        Data prepared by ``family.prepare_data``.
    num_particles : int
    rng : numpy.random.Generator
    n_gibbs_sweeps : int
        Tempered Gibbs sweeps per particle and stage.
    n_split_merge : int
        Tempered SAMS split-merge moves per particle and stage (after the sweeps).
    ess_threshold : float
        Target relative ESS of each stage's incremental weights (adaptive temperatures).
    max_temperature_step : float
        Largest step of the adaptive schedule (at least ``1 / max_temperature_step`` stages;
        :func:`next_temperature`).
    temperatures : array of float, optional
        A fixed schedule from 0 to 1 instead of the adaptive one (then ``Ẑ`` is exactly
        unbiased).
    prepared : TemperedPrepared, optional
        :func:`prepare_tempered` computed once for many runs.
    max_stages : int
        Error if the adaptive schedule needs more stages.

    Returns
    -------
    TemperedSMCResult
    """
    _check_tempered_arguments(num_particles, n_gibbs_sweeps, n_split_merge, ess_threshold,
                              temperatures, max_temperature_step)
    if prepared is None:
        prepared = prepare_tempered(prior, family, x)
    model, empty_row = prepared.model, prepared.empty_row
    n = model.x.shape[0]
    size = int(num_particles)
    seed_numba_from(rng)
    population = empty_population(size, n, empty_row)
    spare = empty_population(size, n, empty_row)
    scratch = np.empty(n + 2)
    prior_draws(model, population, empty_row, prepared.log_v_steps, prepared.log_w, scratch)
    log_likelihoods = np.empty(size)
    population_log_likelihoods(model, population, log_likelihoods)
    placed = np.arange(n, dtype=np.int64)
    order = np.arange(n, dtype=np.int64)
    members = np.empty(max(n, 1), dtype=np.int64)
    forced = np.empty(max(n, 1), dtype=np.bool_)
    schedule = None if temperatures is None else np.asarray(temperatures, dtype=float)
    beta = 0.0
    betas, increments, acceptance = [0.0], [], []
    while beta < 1.0:
        stage = len(increments)
        if stage >= max_stages:
            raise RuntimeError(f"tempered SMC needed more than {max_stages} stages")
        new = (next_temperature(log_likelihoods, beta, ess_threshold, max_temperature_step)
               if schedule is None else float(schedule[stage + 1]))
        log_incremental = (new - beta) * log_likelihoods
        increments.append(stage_log_increment(log_incremental))
        weights = np.exp(log_incremental - log_incremental.max())
        weights /= weights.sum()
        ancestors = reference_systematic_resample(weights, rng.random())
        _resample_population(placed, ancestors, population, spare, empty_row)
        population, spare = spare, population
        changed = 0
        if n_gibbs_sweeps:
            changed += tempered_gibbs_sweeps(model, population, empty_row, prepared.log_v,
                                             prepared.log_w, new, prepared.log_prior_predictive,
                                             int(n_gibbs_sweeps), scratch, order)
        if n_split_merge:
            changed += tempered_split_merge(model, population, empty_row, prepared.log_v,
                                            prepared.log_w, new, int(n_split_merge), members,
                                            forced)
        updates = size * (n * int(n_gibbs_sweeps) + int(n_split_merge))
        acceptance.append(changed / updates if updates else 0.0)
        population_log_likelihoods(model, population, log_likelihoods)
        beta = new
        betas.append(beta)
    return TemperedSMCResult(canonical_labels(population.labels), float(np.sum(increments)),
                             np.array(betas), np.array(increments), np.array(acceptance))


def tempered_log_evidence_runs(prior, family, x, num_particles: int, num_runs: int,
                               rng: np.random.Generator, **options) -> np.ndarray:
    """Log evidence estimates of ``num_runs`` independent tempered runs."""
    prepared = prepare_tempered(prior, family, x)
    return np.array([run_tempered_smc(prior, family, x, num_particles, rng, prepared=prepared,
                                      **options).log_evidence for _ in range(int(num_runs))])
