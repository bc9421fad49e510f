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
2. **evidence**: :math:`\log\hat Z \mathrel{+}= \log \sum_p W^p w^p` with :math:`W^p` the
   particles' normalised weights (:math:`1/L` after a resampling: the mean incremental
   weight);
3. **resampling**: systematic, to equal weights; at every stage (``resample_threshold = 1``,
   the default) or, with ``resample_threshold`` :math:`\rho < 1`, only when the relative ESS of
   the accumulated weights :math:`W^p w^p` falls below :math:`\rho` (and at the last stage,
   so that the final particles are equally weighted); otherwise the particles keep
   :math:`W^p \propto W^p w^p` and are moved all the same (the moves leave
   :math:`\pi_{\beta_t}` invariant, so they are valid for weighted particles; Del Moral,
   Doucet & Jasra 2006).  The temperature of step 1 then keeps the conditional ESS
   :math:`(\sum_p W^p w^p)^2 / \sum_p W^p (w^p)^2` of Zhou, Johansen & Aston (2016) at
   ``ess_threshold``, which is the ESS of step 1 when the particles are equally weighted;
4. **move**: ``n_gibbs_sweeps`` collapsed Gibbs sweeps (random scan) invariant for
   :math:`\pi_{\beta_t}`: point :math:`i` joins block :math:`b` with weight
   :math:`W(m_b+1)/W(m_b)\; f(y_i \mid y_b)^{\beta_t}` and opens a block with weight
   :math:`V(n,K+1)/V(n,K)\,W(1)\, f(y_i)^{\beta_t}` (the Gibbs conditional of the package's
   ``kernels/gibbs.py`` with the predictive raised to :math:`\beta_t`, since
   :math:`m(y_{b\cup i})/m(y_b) = f(y_i\mid y_b)`), optionally followed by
   ``n_split_merge`` sequentially allocated split-merge moves (SAMS, Dahl 2005) at the same
   temperature, with two uniform anchors or (``cluster_anchors``) the cluster-anchor law of
   the package's default step; this round of moves is repeated, up to ``max_move_rounds`` times, until the
   correlation across particles between the log likelihoods before the moves and now is at
   most ``correlation_threshold`` (the stopping rule of :func:`pymc.sample_smc`'s kernels,
   applied to the partition's log likelihood), so that the moves follow the temperature
   where the target changes most.

**The path from a uniform-label reference** (``reference_labels = K``).  On overlapping data
the path above has a first-order transition: the likelihood is scaled by :math:`\beta` but the
prior's penalty on splitting a large block (:math:`\prod_b W(m_b)`) is not, so for small
:math:`\beta` every particle sits in one large block and the blocks appear abruptly near
:math:`\beta \approx 0.8` (``docs/benchmarks.md``).  The path

.. math::

    \gamma_\beta(c) = r_K(c)^{1-\beta}\,\bigl\{p(c) \textstyle\prod_b m(y_b)\bigr\}^{\beta},
    \qquad r_K(c) = \frac{K!}{(K-k)!\,K^n}\ (k \le K \text{ blocks}),

scales prior and likelihood together and starts from :math:`r_K`, the partition of ``n``
points that each take one of ``K`` labels uniformly (drawn exactly, normalised).  It is a
Gibbs-type target with :math:`\log V_\beta(k) = \beta \log V(n, k) + (1-\beta) \log r_K(k)`,
:math:`\log W_\beta = \beta \log W` and the likelihood raised to :math:`\beta`, so the same
moves serve it (prior terms scaled by ``prior_scales[p]`` :math:`= \beta`, the reference's
:math:`\log r_K(k)` in ``log_v_reference``); the tempered quantity of step 1–2 becomes
:math:`\ell(c) + \log p(c) - \log r_K(c)`.  :math:`\hat Z` estimates
:math:`\sum_{c:\,k \le K} p(c)\,m(y \mid c) = p(y,\ k \le K)`: exactly :math:`p(y)` when ``K``
is at least the prior's largest number of blocks (``n`` for a DP), and otherwise short by
the posterior mass of partitions with more than ``K`` blocks.

**The path from an informed reference** (``reference_probabilities = q``, shape ``(n, K)``).
Uniform labels leave the particles to build the clusters along the path.  A reference close to
the posterior, :math:`r(z) = \prod_i q_i(z_i)` with label probabilities fitted to a pilot
partition (:func:`pilot_partition`, :func:`informed_reference`), is not exchangeable in the
labels, so this path runs on labelled vectors :math:`z \in \{0..K-1\}^n` (label ``l`` is slot
``l`` of the particle's partition :math:`c(z)`, with :math:`k` blocks):

.. math::

    \gamma_\beta(z) = r(z)^{1-\beta}\,\Bigl\{\frac{p(c(z))\,m(y \mid c(z))}{(K)_k}\Bigr\}^{\beta},
    \qquad (K)_k = \frac{K!}{(K-k)!}.

The :math:`(K)_k` labellings of a :math:`k`-block partition share its weight at
:math:`\beta = 1`, so :math:`\sum_z \gamma_1(z) = p(y, k \le K)` and :math:`\hat Z` estimates
what the uniform-label path estimates (which is this path with :math:`q_i` uniform:
:math:`(K)_k\,r(z) = r_K(c)`); :math:`r` is normalised and drawn exactly
(:func:`labelled_reference_draws`), and :math:`\hat Z` is unbiased for a fixed schedule
whatever ``q`` is, since ``q`` is fixed before the run.  The tempered quantity of steps 1–2 is
:math:`\ell(c) + \log p(c) - \log (K)_k - \log r(z)`.  The moves, invariant for
:math:`\gamma_\beta`: labelled Gibbs sweeps (:func:`labelled_gibbs_sweeps`: point :math:`i`
takes label :math:`l` with weight :math:`q_i(l)^{1-\beta}` times the Gibbs weight of step 4
raised to :math:`\beta`, a free label sharing the new block's weight with the other
:math:`K - k` free labels) and label exchanges (:func:`label_exchanges`: a block moves to the
label proposed by the reference weights, the block there taking its old label; near
:math:`\beta = 1`, where :math:`\gamma_\beta` comes to weigh every labelling of a partition
equally, they carry the particles across the labellings that single-point updates cannot
reach).  Split-merge moves and waste-free chains are not used on this path.

With ``chain_length = P > 1`` steps 3–4 are those of waste-free SMC (Dau & Chopin 2022): only
``L / P`` particles are resampled, and a chain of ``P - 1`` rounds of moves runs from each,
every state (the start included) becoming one of the ``L`` particles of the next stage.

With perfectly mixing moves, resampling adds nothing to the variance of :math:`\log\hat Z`
(about :math:`\sum_t (1/\mathrm{ESS}_t - 1)/L`, the error of estimating each stage's ratio
from :math:`L` particles), and carried weights make each ratio's estimate worse by the
factor :math:`1/\mathrm{ESS}(W)`; carrying weights pays only when the moves mix poorly
between stages.  Waste-free chains resample at every stage.  :func:`tempered_runs` runs many
independent runs in one population (each with its own temperatures, resampling and rounds).

With a fixed schedule and one round of moves per stage :math:`\hat Z = \prod_t
\sum_p W_t^p w_t^p` is unbiased for :math:`p(y)` (Del Moral 2004); adaptive temperatures and rounds
make it consistent, with a bias of order :math:`1/L` that the tests and the benchmark measure.
The particles after the last stage are equally weighted draws whose law tends to the
posterior.

References
----------
Del Moral, P., Doucet, A. and Jasra, A. (2006). Sequential Monte Carlo samplers. JRSS B 68(3),
411-436.
Dahl, D. B. (2005). Sequentially-allocated merge-split sampler for conjugate and nonconjugate
Dirichlet process mixture models.  Technical report, Texas A&M University.
Chopin, N. and Papaspiliopoulos, O. (2020). An Introduction to Sequential Monte Carlo.
Springer, ch. 17 (tempering, adaptive temperatures by bisection on the ESS).
Dau, H.-D. and Chopin, N. (2022). Waste-free sequential Monte Carlo. JRSS B 84(1), 114-148.
Zhou, Y., Johansen, A. M. and Aston, J. A. D. (2016). Toward automatic model comparison: an
adaptive sequential Monte Carlo approach. JCGS 25(3), 701-726.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from pymc_splitmerge.components import dispatch
from pymc_splitmerge.core.jit import njit
from pymc_splitmerge.core.logweights import sample_log_weights
from pymc_splitmerge.core.relabel import canonical_labels
from pymc_splitmerge.core.slots import free_slot
from pymc_splitmerge.kernels.rng import seed_numba_from
from pymc_splitmerge.kernels.smc import (
    _resample_population,
    copy_particle,
    empty_population,
    particle,
)
from pymc_splitmerge.kernels.state import Model, add, remove
from pymc_splitmerge.priors.seating import log_join_weight, log_open_weight

__all__ = [
    "TemperedPrepared",
    "TemperedSMCResult",
    "default_reference_labels",
    "informed_reference",
    "label_exchanges",
    "labelled_gibbs_sweeps",
    "labelled_reference_draws",
    "next_temperature",
    "pilot_partition",
    "population_log_likelihoods",
    "population_log_prior_ratios",
    "population_log_reference",
    "prepare_tempered",
    "prior_draws",
    "reference_draws",
    "reference_log_v",
    "run_tempered_smc",
    "stage_log_increment",
    "tempered_gibbs_sweeps",
    "tempered_runs",
    "tempered_split_merge",
]


# ============================================================================ numba leaves
@njit(cache=True)
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


@njit(cache=True)
def population_log_likelihoods(model, population, out):
    """``out[p] = sum_b log m(y_b)`` of every particle (the collapsed log likelihood)."""
    for p in range(population.labels.shape[0]):
        total = 0.0
        for j in range(population.cluster_count[p, 0]):
            slot = population.active[p, j]
            total += dispatch.log_marginal(model.family_id, model.params,
                                           population.stats[p, slot])
        out[p] = total


@njit(cache=True)
def reference_draws(model, population, empty_row, num_labels, label_slots):
    """Draw every particle from the reference ``r_K``: each point's label uniformly among
    ``num_labels`` (``K``) labels, independently (exact; the partition is the labels' blocks)."""
    n = model.x.shape[0]
    for p in range(population.labels.shape[0]):
        part = particle(population, empty_row, p)
        label_slots[:] = -1
        for i in range(n):
            label = np.random.randint(num_labels)
            if label_slots[label] < 0:
                label_slots[label] = free_slot(part.where)
            add(model, part, i, label_slots[label])


@njit(cache=True)
def population_log_prior_ratios(population, log_v, log_w, log_v_reference, out):
    """``out[p] = log p(c) - log r_K(c)`` of every particle: ``log V(n, k) + sum_b log W(m_b)
    - log_v_reference[k]``."""
    for p in range(population.labels.shape[0]):
        k = population.cluster_count[p, 0]
        total = log_v[k] - log_v_reference[k]
        for j in range(k):
            total += log_w[population.sizes[p, population.active[p, j]]]
        out[p] = total


# ------------------------------------------------------- the path from an informed reference
@njit(cache=True)
def labelled_reference_draws(model, population, empty_row, cumulative):
    """Draw every particle from ``r(z) = prod_i q_i(z_i)``: point ``i`` takes label ``l`` (slot
    ``l``) with probability ``q_i(l)`` (``cumulative[i]``: the running sums of ``q_i``, last 1)."""
    n, num_labels = cumulative.shape
    for p in range(population.labels.shape[0]):
        part = particle(population, empty_row, p)
        for i in range(n):
            uniform = np.random.random()
            label = 0
            while label < num_labels - 1 and cumulative[i, label] <= uniform:
                label += 1
            add(model, part, i, label)


@njit(cache=True)
def population_log_reference(population, log_q, out):
    """``out[p] = log r(z^p) = sum_i log q_i(z^p_i)`` of every particle (labels are slots)."""
    n = log_q.shape[0]
    for p in range(population.labels.shape[0]):
        total = 0.0
        for i in range(n):
            total += log_q[i, population.labels[p, i]]
        out[p] = total


@njit(cache=True)
def labelled_gibbs_sweeps(model, population, empty_row, log_v, log_w, log_q, betas, moving,
                          changes, log_prior_predictive, n_sweeps, scratch, label_weights,
                          order):
    """``n_sweeps`` random-scan Gibbs sweeps over the labels ``z`` of particle ``p``, invariant
    for ``γ_β(z) = r(z)^(1-β) {p(c) m(y | c) / (K)_k}^β`` with ``β = betas[p]``, for every
    ``p`` with ``moving[p]`` (module docstring).

    Point ``i`` (removed; ``k`` blocks among the others) takes label ``l`` with weight
    ``q_i(l)^(1-β)`` times, to the power ``β``: ``W(m_l + 1)/W(m_l) f(y_i | y_l)`` when label
    ``l`` holds ``m_l > 0`` other points, ``V(n, k+1)/V(n, k) W(1) f(y_i) / (K - k)`` when it
    is free (``(K)_(k+1) / (K)_k = K - k``: the ``K - k`` free labels share the new block's
    weight).  ``changes[p]`` is increased by the number of point updates that changed the
    point's label; returns their total.
    """
    n = model.x.shape[0]
    num_labels = log_q.shape[1]
    changed = 0
    for p in range(population.labels.shape[0]):
        if not moving[p]:
            continue
        beta = betas[p]
        part = particle(population, empty_row, p)
        for _ in range(n_sweeps):
            np.random.shuffle(order)
            for r in range(n):
                i = order[r]
                old = remove(model, part, i)
                k = part.cluster_count[0]
                free = -np.inf
                if k < num_labels:
                    free = (log_open_weight(log_v, log_w, k, 1) - np.log(num_labels - k)
                            + log_prior_predictive[i])
                for label in range(num_labels):
                    label_weights[label] = free
                dispatch.log_predictive_many(model.family_id, model.params, part.stats,
                                             part.active, k, model.x[i], scratch)
                for j in range(k):
                    slot = part.active[j]
                    label_weights[slot] = (log_join_weight(log_w, part.sizes[slot], 1)
                                           + scratch[j])
                for label in range(num_labels):
                    value = (1.0 - beta) * log_q[i, label]
                    if beta > 0.0:
                        value += beta * label_weights[label]
                    label_weights[label] = -np.inf if np.isnan(value) else value
                choice = sample_log_weights(label_weights, num_labels, np.random.random())
                if choice < 0:
                    choice = old
                if choice != old:
                    changed += 1
                    changes[p] += 1
                add(model, part, i, choice)
    return changed


@njit(cache=True)
def _swap_labels(part, a, b):
    """Exchange labels (slots) ``a`` and ``b`` of a partition: their points, sizes, statistics
    rows and places in the active list (either may be free)."""
    labels = part.labels
    for i in range(labels.shape[0]):
        if labels[i] == a:
            labels[i] = b
        elif labels[i] == b:
            labels[i] = a
    for column in range(part.stats.shape[1]):
        value = part.stats[a, column]
        part.stats[a, column] = part.stats[b, column]
        part.stats[b, column] = value
    size = part.sizes[a]
    part.sizes[a] = part.sizes[b]
    part.sizes[b] = size
    position = part.where[a]
    part.where[a] = part.where[b]
    part.where[b] = position
    if part.where[a] >= 0:
        part.active[part.where[a]] = a
    if part.where[b] >= 0:
        part.active[part.where[b]] = b


@njit(cache=True)
def _exchange_log_weights(block_sums, a, scale, out):
    """``out[m] = scale · (log r(τ_am z) - log r(z))`` for every label ``m`` (``τ_am``: labels
    ``a`` and ``m`` exchange their points; ``out[a] = 0``), from ``block_sums[l, m] = Σ_{i:
    z_i = l} log q_i(m)`` (zero rows for free labels).  Returns the log-sum-exp of ``out``."""
    num_labels = block_sums.shape[0]
    peak = -np.inf
    for m in range(num_labels):
        value = 0.0
        if m != a:
            value = scale * (block_sums[a, m] - block_sums[a, a] + block_sums[m, a]
                             - block_sums[m, m])
        out[m] = value
        if value > peak:
            peak = value
    total = 0.0
    for m in range(num_labels):
        total += np.exp(out[m] - peak)
    return peak + np.log(total)


@njit(cache=True)
def label_exchanges(population, empty_row, log_q, betas, moving, changes, n_moves,
                    block_sums, weights):
    """``n_moves`` Metropolis–Hastings label exchanges of particle ``p``, invariant for
    ``γ_β`` (``β = betas[p] < 1``), for every ``p`` with ``moving[p]``.

    A block is chosen uniformly among the ``k`` occupied labels (label ``a``); a label ``m``
    is proposed with probability ``∝ γ_β(τ_am z)`` (``τ_am``: labels ``a`` and ``m`` exchange
    their points, ``m = a`` included; the partition, hence ``p(c) m(y | c) / (K)_k``, is
    unchanged, so ``γ_β(τ_am z) ∝ r(τ_am z)^(1-β)``), and accepted with probability
    ``min(1, N(z) / N(τ_am z))``, ``N`` the proposal's normaliser at each state (the reverse
    move chooses the same block, now at label ``m``, and proposes ``a``).  A large block can so
    move to its best label in one step; near ``β = 1`` these moves spread the particles over
    the labellings of one partition that ``γ_β`` comes to weigh equally.
    ``block_sums`` (K, K) and ``weights`` (K,) are scratch.  ``changes[p]`` is increased by
    the accepted exchanges; returns their total.
    """
    n, num_labels = log_q.shape
    accepted = 0
    if num_labels < 2:
        return 0
    for p in range(population.labels.shape[0]):
        beta = betas[p]
        if not moving[p] or beta >= 1.0:
            continue
        part = particle(population, empty_row, p)
        block_sums[:, :] = 0.0
        for i in range(n):
            label = part.labels[i]
            for m in range(num_labels):
                block_sums[label, m] += log_q[i, m]
        scale = 1.0 - beta
        for _ in range(n_moves):
            a = part.active[np.random.randint(part.cluster_count[0])]
            log_norm = _exchange_log_weights(block_sums, a, scale, weights)
            m = sample_log_weights(weights, num_labels, np.random.random())
            if m == a or m < 0:
                continue
            # log N(z) / N(τ_am z), the normalisers taken relative to each state's own r^(1-β)
            log_ratio = log_norm - scale * (block_sums[a, m] - block_sums[a, a]
                                            + block_sums[m, a] - block_sums[m, m])
            for column in range(num_labels):  # rows a and m exchange: the sums at τ_am z
                value = block_sums[a, column]
                block_sums[a, column] = block_sums[m, column]
                block_sums[m, column] = value
            log_norm_reverse = _exchange_log_weights(block_sums, m, scale, weights)
            if np.log(np.random.random()) < log_ratio - log_norm_reverse:
                _swap_labels(part, a, m)
                accepted += 1
                changes[p] += 1
            else:
                for column in range(num_labels):
                    value = block_sums[a, column]
                    block_sums[a, column] = block_sums[m, column]
                    block_sums[m, column] = value
    return accepted


@njit(cache=True, inline="always")
def _log_path_prior(log_v, log_w_sum, k, scale, log_v_reference):
    """The prior part of ``log γ_β``: ``s (log V(n, k) + Σ log W) + (1 - s) log r_K(k)``."""
    value = scale * (log_v[k] + log_w_sum)
    if scale < 1.0:
        value += (1.0 - scale) * log_v_reference[k]
    return value


@njit(cache=True)
def tempered_gibbs_sweeps(model, population, empty_row, log_v, log_w, betas, prior_scales,
                          log_v_reference, moving, changes, log_prior_predictive, n_sweeps,
                          scratch, order):
    """``n_sweeps`` random-scan Gibbs sweeps of particle ``p``, invariant for ``π_{betas[p]}``,
    for every ``p`` with ``moving[p]``.

    The prior's terms are multiplied by ``prior_scales[p]`` ``s`` and, when ``s < 1``, the
    reference's ``(1 - s) log_v_reference[k]`` is added (the path from ``r_K``, module
    docstring); ``s = 1`` is the path from the prior.  ``changes[p]`` is increased by the number of point updates that changed a block; returns
    their total.
    """
    n = model.x.shape[0]
    changed = 0
    for p in range(population.labels.shape[0]):
        if not moving[p]:
            continue
        beta = betas[p]
        scale = prior_scales[p]
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
                    value = (scale * log_join_weight(log_w, part.sizes[part.active[j]], 1)
                             + beta * scratch[j])
                    scratch[j] = -np.inf if np.isnan(value) else value
                value = (scale * log_open_weight(log_v, log_w, k, 1)
                         + beta * log_prior_predictive[i])
                if scale < 1.0:
                    value += (1.0 - scale) * (log_v_reference[k + 1] - log_v_reference[k])
                scratch[k] = -np.inf if np.isnan(value) else value
                choice = sample_log_weights(scratch, k + 1, np.random.random())
                if choice == k:
                    slot = old if was_singleton else free_slot(part.where)
                else:
                    slot = part.active[choice]
                if not (slot == old or (was_singleton and choice == k)):
                    changed += 1
                    changes[p] += 1
                add(model, part, i, slot)
    return changed


@njit(cache=True)
def _block_log_likelihood(model, part, slot):
    return dispatch.log_marginal(model.family_id, model.params, part.stats[slot])


@njit(cache=True)
def _sams_allocate(model, part, members, count, slot_a, slot_b, beta, scale, log_w, forced_a):
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
        pa = (scale * log_join_weight(log_w, size_a, 1) + beta * dispatch.log_predictive(
            model.family_id, model.params, part.stats[slot_a], x[i]))
        pb = (scale * log_join_weight(log_w, size_b, 1) + beta * dispatch.log_predictive(
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


@njit(cache=True)
def _point_of_block(labels, slot, rank):
    """The ``rank``-th point (increasing index, from 0) of block ``slot`` (a scan of the labels,
    as the move's own scan of the members)."""
    seen = 0
    for h in range(labels.shape[0]):
        if labels[h] == slot:
            if seen == rank:
                return h
            seen += 1
    return -1


@njit(cache=True)
def _cluster_anchor_pair(part):
    """Two anchors by the cluster-anchor law of ``kernels.sams._sams_updates``.

    Split-type (probability 1/2, or 1 from one block): a block uniformly among the ``K``, then
    an ordered pair of its points uniformly; merge-type: an ordered pair of blocks uniformly,
    one point uniformly in each.  Returns ``(i, j)``, ``(-1, -1)`` when the drawn block has
    one point (no move).
    """
    k = part.cluster_count[0]
    if k == 1 or np.random.random() < 0.5:
        slot = part.active[np.random.randint(k)]
        m = part.sizes[slot]
        if m < 2:
            return -1, -1
        first = np.random.randint(m)
        second = np.random.randint(m - 1)
        if second >= first:
            second += 1
        return (_point_of_block(part.labels, slot, first),
                _point_of_block(part.labels, slot, second))
    a = np.random.randint(k)
    b = np.random.randint(k - 1)
    if b >= a:
        b += 1
    slot_a, slot_b = part.active[a], part.active[b]
    return (_point_of_block(part.labels, slot_a, np.random.randint(part.sizes[slot_a])),
            _point_of_block(part.labels, slot_b, np.random.randint(part.sizes[slot_b])))


@njit(cache=True)
def _cluster_anchor_log_ratio(k, m, size_a, size_b):
    """Log ratio of the cluster-anchor law's probability of the anchors of the reverse merge to
    that of the anchors of a split of a block of ``m`` points into ``size_a + size_b`` from
    ``k`` blocks (the split's term; a merge to ``k - 1`` blocks has its negative with ``k -
    1``): ``log t_m(k+1) - log t_s(k) + log m(m-1) - log (k+1) - log size_a size_b``, the
    term of ``kernels.sams._sams_updates``."""
    log_split_type = 0.0 if k == 1 else -np.log(2.0)
    return (-np.log(2.0) - log_split_type + np.log(m) + np.log(m - 1) - np.log(k + 1)
            - np.log(size_a) - np.log(size_b))


@njit(cache=True)
def tempered_split_merge(model, population, empty_row, log_v, log_w, betas, prior_scales,
                         log_v_reference, moving, changes, n_moves, members, forced,
                         cluster_anchors=False):
    """``n_moves`` SAMS split-merge moves (Dahl 2005) of particle ``p``, invariant for
    ``π_{betas[p]}``, for every ``p`` with ``moving[p]`` (prior terms as in
    :func:`tempered_gibbs_sweeps`: scaled by ``prior_scales[p]``, plus the reference's).

    Two distinct points ``i, j`` uniformly at random, or with ``cluster_anchors`` by the
    cluster-anchor law of the package's default step (``kernels.sams._sams_updates``:
    :func:`_cluster_anchor_pair`, whose reverse-to-forward log ratio
    :func:`_cluster_anchor_log_ratio` enters the acceptance ratio).  Same block: split it,
    the other members allocated in a random order to the block of ``i`` or of ``j`` with
    probability ``∝ W(m+1)/W(m) f(y | block)^β`` (log probability ``log q``); different
    blocks: merge, with ``log q`` of the forced reverse allocation.  Metropolis–Hastings with
    ``log π_β(c*) - log π_β(c) ∓ log q``.  ``changes[p]`` is increased by the accepted
    moves of particle ``p``; returns their total.
    """
    n = model.x.shape[0]
    accepted = 0
    no_force = np.zeros(0, dtype=np.bool_)
    if n < 2:
        return 0
    for p in range(population.labels.shape[0]):
        if not moving[p]:
            continue
        beta = betas[p]
        scale = prior_scales[p]
        part = particle(population, empty_row, p)
        for _ in range(n_moves):
            if cluster_anchors:
                i, j = _cluster_anchor_pair(part)
                if i < 0:
                    continue
            else:
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
                log_before = (_log_path_prior(log_v, log_w[size], k, scale, log_v_reference)
                              + beta * _block_log_likelihood(model, part, slot_i))
                for r in range(count):
                    remove(model, part, members[r])
                remove(model, part, j)
                slot_j_new = free_slot(part.where)
                add(model, part, j, slot_j_new)
                log_q = _sams_allocate(model, part, members, count, slot_i, slot_j_new, beta,
                                       scale, log_w, no_force)
                log_after = (_log_path_prior(log_v, log_w[part.sizes[slot_i]]
                                             + log_w[part.sizes[slot_j_new]], k + 1, scale,
                                             log_v_reference)
                             + beta * (_block_log_likelihood(model, part, slot_i)
                                       + _block_log_likelihood(model, part, slot_j_new)))
                log_ratio = log_after - log_before - log_q
                if cluster_anchors:
                    log_ratio += _cluster_anchor_log_ratio(
                        k, size, part.sizes[slot_i], part.sizes[slot_j_new])
                if np.log(np.random.random()) < log_ratio:
                    accepted += 1
                    changes[p] += 1
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
                log_before = (_log_path_prior(log_v, log_w[size_i] + log_w[size_j], k, scale,
                                              log_v_reference)
                              + beta * (_block_log_likelihood(model, part, slot_i)
                                        + _block_log_likelihood(model, part, slot_j)))
                # the forced reverse split: rebuild the two blocks from the anchors
                for r in range(count):
                    remove(model, part, members[r])
                log_q = _sams_allocate(model, part, members, count, slot_i, slot_j, beta, scale,
                                       log_w, forced[:count])
                # merge all into slot_i
                for r in range(count):
                    if part.labels[members[r]] == slot_j:
                        remove(model, part, members[r])
                        add(model, part, members[r], slot_i)
                remove(model, part, j)
                add(model, part, j, slot_i)
                log_after = (_log_path_prior(log_v, log_w[size_i + size_j], k - 1, scale,
                                             log_v_reference)
                             + beta * _block_log_likelihood(model, part, slot_i))
                log_ratio = log_after - log_before + log_q
                if cluster_anchors:
                    log_ratio -= _cluster_anchor_log_ratio(k - 1, size_i + size_j, size_i,
                                                           size_j)
                if np.log(np.random.random()) < log_ratio:
                    accepted += 1
                    changes[p] += 1
                else:  # undo: j and its former members back into a block of their own
                    remove(model, part, j)
                    slot_back = free_slot(part.where)
                    add(model, part, j, slot_back)
                    for r in range(count):
                        if not forced[r]:
                            remove(model, part, members[r])
                            add(model, part, members[r], slot_back)
    return accepted


@njit(cache=True)
def _copy_particles(placed, population, empty_row, sources, targets):
    """``population[targets[q]] = population[sources[q]]`` in place (sources and targets
    disjoint): one step of the waste-free chains."""
    for q in range(sources.shape[0]):
        copy_particle(placed, particle(population, empty_row, sources[q]),
                      particle(population, empty_row, targets[q]))


# ============================================================================ Python driver
def stage_log_increment(log_incremental_weights) -> float:
    """``log (1/L) sum_p w^p`` of equally weighted particles: one stage's evidence factor.

    Weighted particles (normalised weights ``W``) pass ``log w^p + log (L W^p)``, whose value
    is ``log sum_p W^p w^p``.
    """
    values = np.asarray(log_incremental_weights, dtype=float)
    peak = values.max()
    if not np.isfinite(peak):
        return -np.inf
    return float(peak + np.log(np.mean(np.exp(values - peak))))


def _log_sum_exp_rows(values):
    """``log sum_p exp(values[g, p])`` of every row (G, L)."""
    peak = values.max(axis=1)
    return peak + np.log(np.sum(np.exp(values - peak[:, None]), axis=1))


def _log_mean_exp_rows(values):
    """``log (1/L) sum_p exp(values[g, p])`` of every row (G, L)."""
    return _log_sum_exp_rows(values) - np.log(values.shape[1])


def _carry_weights(log_weights, log_incremental):
    """The particles' log weights after a stage: the carried ones times the incremental ones
    (rows (G, L)); resampling resets them to 0."""
    return log_weights + log_incremental


def _relative_ess_rows(log_weights):
    """Relative ESS ``(sum w)^2 / (L sum w^2)`` of every row of ``log_weights`` (G, L)."""
    values = log_weights - log_weights.max(axis=1, keepdims=True)
    weights = np.exp(values)
    return weights.sum(axis=1) ** 2 / (weights.shape[1] * np.sum(weights**2, axis=1))


def next_temperature(log_likelihoods, beta, ess_threshold: float, max_step: float = 1.0,
                     log_weights=None):
    """The next inverse temperature: relative ESS of ``exp(Δβ ℓ)`` equal to ``ess_threshold``.

    With the particles' carried ``log_weights`` (same shape as ``log_likelihoods``; ``None``:
    equally weighted) the criterion is the conditional ESS of Zhou, Johansen & Aston (2016),
    ``(Σ W w)² / Σ W w²`` with ``W`` the normalised weights and ``w = exp(Δβ ℓ)``: how much
    the stage itself degrades the weights, whatever they were before (it equals the relative
    ESS of ``w`` when the particles are equally weighted).

    Bisection on ``Δβ`` in ``(0, min(1 - β, max_step)]`` as :func:`pymc.sample_smc`; the
    largest step when its ESS stays above the threshold.  ``max_step`` guards against the ESS
    criterion's blind spot: particles that all sit in the same (wrong) region of the partition
    space have nearly equal likelihoods, so the ESS allows a jump to β = 1 that leaves the
    moves no stages to reach the clusters the colder targets need.  With ``log_likelihoods``
    of shape (G, L) and ``beta`` of shape (G,) the G independent runs are stepped at once
    (an array is returned); with one run (shape (L,)) a float.
    """
    single = np.ndim(log_likelihoods) == 1
    rows = np.atleast_2d(np.asarray(log_likelihoods, dtype=float))
    beta = np.atleast_1d(np.asarray(beta, dtype=float))
    if log_weights is None:
        criterion = _relative_ess_rows
    else:
        carried = np.atleast_2d(np.asarray(log_weights, dtype=float))

        def criterion(log_incremental):  # (Σ W w)² / Σ W w², W ∝ exp(carried)
            return np.exp(2.0 * _log_sum_exp_rows(carried + log_incremental)
                          - _log_sum_exp_rows(carried + 2.0 * log_incremental)
                          - _log_sum_exp_rows(carried))

    largest = np.minimum(1.0 - beta, float(max_step))
    to_end = largest >= 1.0 - beta
    accept_largest = criterion(largest[:, None] * rows) >= ess_threshold
    low, high = np.zeros_like(largest), largest.copy()
    for _ in range(40):  # relative precision 1e-12 of the step
        middle = 0.5 * (low + high)
        good = criterion(middle[:, None] * rows) >= ess_threshold
        low = np.where(good, middle, low)
        high = np.where(good, high, middle)
    step = np.where(low > 0.0, low, high)
    new = np.where(accept_largest, np.where(to_end, 1.0, beta + largest),
                   np.minimum(1.0, beta + step))
    return float(new[0]) if single else new


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
    family_id = family.family_id
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
    move_rounds : ndarray of int, shape (stages,)
        Rounds of moves (``n_gibbs_sweeps`` sweeps + ``n_split_merge`` SAMS moves) per stage.
    resampled : ndarray of bool, shape (stages,)
        Whether the stage resampled (every stage with ``resample_threshold = 1``; the last
        stage always).
    """

    labels: np.ndarray
    log_evidence: float
    temperatures: np.ndarray
    log_evidence_increments: np.ndarray
    acceptance: np.ndarray
    move_rounds: np.ndarray
    resampled: np.ndarray


def _check_tempered_arguments(num_particles, n_gibbs_sweeps, n_split_merge, ess_threshold,
                              temperatures, max_temperature_step=1.0, max_move_rounds=1,
                              correlation_threshold=0.1):
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
    if int(max_move_rounds) != max_move_rounds or max_move_rounds < 1:
        raise ValueError(
            f"max_move_rounds must be a positive integer; got {max_move_rounds!r}")
    if not -1.0 <= float(correlation_threshold) <= 1.0:
        raise ValueError(
            f"correlation_threshold must be in [-1, 1]; got {correlation_threshold!r}")
    if temperatures is not None:
        values = np.asarray(temperatures, dtype=float)
        if (values.ndim != 1 or values.size < 2 or values[0] != 0.0 or values[-1] != 1.0
                or np.any(np.diff(values) <= 0)):
            raise ValueError("temperatures must increase strictly from 0 to 1; got "
                             f"{temperatures!r}")


def _check_chain_length(chain_length, num_particles, max_move_rounds):
    if int(chain_length) != chain_length or chain_length < 1:
        raise ValueError(f"chain_length must be a positive integer; got {chain_length!r}")
    if num_particles % int(chain_length):
        raise ValueError(f"num_particles ({num_particles}) must be a multiple of chain_length "
                         f"({chain_length}): L / P chains of P states each")
    if chain_length > 1 and max_move_rounds != 1:
        raise ValueError("chain_length > 1 (waste-free chains) runs one round of moves per "
                         f"stage; set max_move_rounds=1 (got {max_move_rounds!r})")


def _check_resample_threshold(resample_threshold, chain_length):
    if not 0.0 < float(resample_threshold) <= 1.0:
        raise ValueError(
            f"resample_threshold must be in (0, 1]; got {resample_threshold!r}")
    if chain_length > 1 and float(resample_threshold) < 1.0:
        raise ValueError("chain_length > 1 (waste-free chains) resamples the chains' starts "
                         "at every stage; set resample_threshold=1 (got "
                         f"{resample_threshold!r})")


def _waste_free_chains(model, prepared, population, placed, moving_runs, betas, prior_scales,
                       log_v_reference, changes, sweeps, moves, cluster_anchors, length,
                       scratch, order, members, forced):
    """The waste-free chains of one stage (Dau & Chopin 2022): state ``j`` of every chain of
    every moving run becomes state ``j - 1`` moved by one round of moves, ``j = 1 .. P - 1``
    (all states start as the chain's ancestor)."""
    runs = moving_runs.size
    total = population.labels.shape[0]
    states = np.arange(total).reshape(runs, -1, length)[moving_runs]
    empty_row = prepared.empty_row
    for j in range(1, length):
        if j > 1:
            _copy_particles(placed, population, empty_row, states[:, :, j - 1].ravel(),
                            states[:, :, j].ravel())
        moving = np.zeros(total, dtype=np.bool_)
        moving[states[:, :, j].ravel()] = True
        if sweeps:
            tempered_gibbs_sweeps(model, population, empty_row, prepared.log_v, prepared.log_w,
                                  betas, prior_scales, log_v_reference, moving, changes,
                                  prepared.log_prior_predictive, sweeps, scratch, order)
        if moves:
            tempered_split_merge(model, population, empty_row, prepared.log_v, prepared.log_w,
                                 betas, prior_scales, log_v_reference, moving, changes, moves,
                                 members, forced, bool(cluster_anchors))


def _row_correlations(start, now):
    """Pearson correlation of every row pair; 0 where a row is constant (nothing to explain)."""
    a = start - start.mean(axis=1, keepdims=True)
    b = now - now.mean(axis=1, keepdims=True)
    denominator = np.sqrt(np.sum(a * a, axis=1) * np.sum(b * b, axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        values = np.sum(a * b, axis=1) / denominator
    return np.where(denominator > 0, values, 0.0)


def _grouped_systematic_ancestors(log_incremental, rng, count=None):
    """Systematic resampling of ``count`` (default L) ancestors within every row of
    ``log_incremental`` (G, L): flat ancestors, shape (G, count)."""
    groups, size = log_incremental.shape
    count = size if count is None else int(count)
    weights = np.exp(log_incremental - log_incremental.max(axis=1, keepdims=True))
    cumulative = np.cumsum(weights / weights.sum(axis=1, keepdims=True), axis=1)
    cumulative[:, -1] = 1.0
    positions = (rng.random(groups)[:, None] + np.arange(count)) / count
    offsets = np.arange(groups)[:, None]
    flat = np.searchsorted((cumulative + offsets).ravel(), (positions + offsets).ravel(),
                           side="right").reshape(groups, count)
    return np.minimum(flat, (offsets + 1) * size - 1)


def reference_log_v(num_labels: int, n: int) -> np.ndarray:
    """``log r_K(k)`` for ``k = 0 .. n + 1``: the probability of any one partition with ``k``
    blocks when each of ``n`` points takes one of ``K`` labels uniformly,
    ``K! / (K - k)! / K^n`` (``-inf`` for ``k > K``)."""
    from scipy.special import gammaln

    if int(num_labels) != num_labels or num_labels < 1:
        raise ValueError(f"reference_labels must be a positive integer; got {num_labels!r}")
    k = np.arange(n + 2, dtype=float)
    values = np.full(n + 2, -np.inf)
    feasible = k <= num_labels
    values[feasible] = (gammaln(num_labels + 1.0) - gammaln(num_labels - k[feasible] + 1.0)
                        - n * np.log(num_labels))
    return values


def pilot_partition(prior, family, x, rng: np.random.Generator, n_rounds: int = 20,
                    n_split_merge: int = 100) -> np.ndarray:
    """A partition of ``x`` near the posterior's bulk: greedy allocation in a random order
    (``kernels.allocation``), then ``n_rounds`` rounds of a collapsed Gibbs sweep and
    ``n_split_merge`` cluster-anchor SAMS moves (the default step's moves).  A point estimate
    for :func:`informed_reference` (any partition serves: the reference it builds is fixed
    before the tempered run, so ``Ẑ`` stays unbiased whatever it is).

    Returns
    -------
    ndarray of int64, shape (n,)
        Canonical labels.
    """
    from pymc_splitmerge.kernels.allocation import allocate_greedily
    from pymc_splitmerge.kernels.gibbs import build_gibbs_sweep
    from pymc_splitmerge.kernels.sams import build_sams_move
    from pymc_splitmerge.kernels.state import PartitionState

    x = np.ascontiguousarray(x, dtype=np.float64)
    n = x.shape[0]
    log_v, log_w = prior.tables(n)
    labels = allocate_greedily(family, x, np.full(n, -1), rng.permutation(n), log_v, log_w)
    state = PartitionState(family, x, labels)
    tables = state.tables(log_v, log_w)
    sweep = build_gibbs_sweep("random", 1)
    moves = (build_sams_move(cluster_anchors=True, n_updates=int(n_split_merge))
             if n_split_merge > 0 else None)
    for _ in range(int(n_rounds)):
        sweep(state.model, state.partition, tables, rng)
        if moves is not None:
            moves(state.model, state.partition, tables, rng)
    return state.labels()


def informed_reference(prior, family, x, labels, num_labels: int,
                       floor: float = 0.05) -> np.ndarray:
    """The label probabilities ``q`` of the informed reference ``r(z) = prod_i q_i(z_i)``.

    For the ``K̂`` blocks of ``labels`` (a point estimate, e.g. :func:`pilot_partition`),
    ``q̃_i(l)`` for ``l < K̂`` is the collapsed Gibbs weight of point ``i`` joining block ``l``
    without itself, ``W(m_l + 1)/W(m_l) f(y_i | y_{l - i})`` (``kernels.gibbs.
    point_conditional``), normalised over the blocks, and ``0`` for ``l >= K̂``; then
    ``q_i = (1 - floor) q̃_i + floor / K`` so that ``r`` has full support on ``{0..K-1}^n``.

    Parameters
    ----------
    prior : GibbsTypePrior
    family : ComponentFamily
    x : ndarray, shape (n, data_dim)
        Prepared data.
    labels : array of int, shape (n,)
    num_labels : int
        ``K``, at least the number of blocks of ``labels``.
    floor : float
        In ``(0, 1]``: the probability spread uniformly over all ``K`` labels.

    Returns
    -------
    ndarray of float64, shape (n, K)
        Rows summing to 1.
    """
    from pymc_splitmerge.kernels.gibbs import point_conditional
    from pymc_splitmerge.kernels.state import PartitionState

    if not 0.0 < float(floor) <= 1.0:
        raise ValueError(f"floor must be in (0, 1]; got {floor!r}")
    x = np.ascontiguousarray(x, dtype=np.float64)
    n = x.shape[0]
    labels = canonical_labels(np.asarray(labels, dtype=np.int64))
    blocks = int(labels.max()) + 1
    if int(num_labels) != num_labels or num_labels < blocks:
        raise ValueError(f"reference_labels ({num_labels!r}) must be an integer at least the "
                         f"number of blocks of the pilot partition ({blocks})")
    log_v, log_w = prior.tables(n)
    state = PartitionState(family, x, labels)
    slot_label = np.full(state.sizes.shape[0], -1, dtype=np.int64)
    slot_label[state.slot_labels] = labels
    q = np.zeros((n, int(num_labels)))
    for i in range(n):
        slots, probabilities = point_conditional(state, i, log_v, log_w)
        joins = slots >= 0
        q[i, slot_label[slots[joins]]] = probabilities[joins]
        total = q[i].sum()
        if total > 0:
            q[i] /= total
        else:  # no other block to join (every join weight 0): its own label
            q[i, labels[i]] = 1.0
    return (1.0 - float(floor)) * q + float(floor) / int(num_labels)


def _largest_block_count(log_v, n: int) -> int:
    """The prior's largest number of blocks of ``n`` points: the last ``k <= n`` with
    ``log V(n, k)`` finite (``log_v`` of length ``n + 2``)."""
    return int(np.flatnonzero(np.isfinite(np.asarray(log_v)[: n + 1]))[-1])


def default_reference_labels(pilot_blocks: int, log_v) -> int:
    """``K`` of the informed reference when the user gives none: ``max(2 K̂, K̂ + 10)`` labels
    for a pilot of ``K̂`` blocks (room for the posterior's small blocks: ``Ẑ`` estimates
    ``p(y, k <= K)``), at most the prior's largest number of blocks and the number of points
    (``log_v = log V(n, ·)``, length ``n + 2``)."""
    n = len(log_v) - 2
    most_blocks = _largest_block_count(log_v, n)
    return int(min(max(2 * pilot_blocks, pilot_blocks + 10), most_blocks, n))


def _check_reference_probabilities(probabilities, n, most_blocks, reference_labels,
                                   chain_length, n_split_merge):
    q = np.ascontiguousarray(probabilities, dtype=np.float64)
    if q.ndim != 2 or q.shape[0] != n or not 1 <= q.shape[1] <= n:
        raise ValueError("reference_probabilities must have shape (n, K) with 1 <= K <= n "
                         f"= {n}; got {np.shape(probabilities)}")
    if not np.all(np.isfinite(q)) or np.any(q <= 0.0) or np.any(
            np.abs(q.sum(axis=1) - 1.0) > 1e-8):
        raise ValueError("reference_probabilities must be positive with rows summing to 1 "
                         "(the reference must give every labelling positive probability)")
    if reference_labels is not None:
        raise ValueError("reference_probabilities and reference_labels are two references: "
                         "give one")
    if chain_length > 1 or n_split_merge > 0:
        raise ValueError("the informed reference's moves are labelled Gibbs sweeps and label "
                         "exchanges: set chain_length=1 and n_split_merge=0")
    if most_blocks < n and q.shape[1] > most_blocks:
        raise ValueError(f"K = {q.shape[1]} labels is more than the prior's largest number of "
                         f"blocks ({most_blocks}): use K <= {most_blocks}")
    return q


def tempered_runs(prior, family, x, num_particles: int, num_runs: int,
                  rng: np.random.Generator, *, n_gibbs_sweeps: int = 2, n_split_merge: int = 0,
                  ess_threshold: float = 0.5, max_temperature_step: float = 0.05,
                  temperatures=None, max_move_rounds: int = 1,
                  correlation_threshold: float = 0.1, cluster_anchors: bool = False,
                  chain_length: int = 1, reference_labels: int | None = None,
                  resample_threshold: float = 1.0, reference_probabilities=None,
                  prepared=None, max_stages: int = 10_000) -> list[TemperedSMCResult]:
    """``num_runs`` independent likelihood-tempered SMC runs over the partitions of ``x``.

    The runs share one population (run ``r`` owns particles ``r L .. (r + 1) L - 1``) so that
    many small runs cost one numba call per stage; each run has its own temperatures,
    resampling and move rounds, exactly as if it ran alone (module docstring).

    Parameters
    ----------
    prior : GibbsTypePrior
    family : ComponentFamily
    x : ndarray, shape (n, data_dim)
        Data prepared by ``family.prepare_data``.
    num_particles : int
        Particles ``L`` per run.
    num_runs : int
    rng : numpy.random.Generator
    n_gibbs_sweeps : int
        Tempered Gibbs sweeps per particle and round of moves.
    n_split_merge : int
        Tempered SAMS split-merge moves per particle and round (after the sweeps).
    ess_threshold : float
        Target relative ESS of each stage's incremental weights (adaptive temperatures).
    max_temperature_step : float
        Largest step of the adaptive schedule (at least ``1 / max_temperature_step`` stages;
        :func:`next_temperature`).
    temperatures : array of float, optional
        A fixed schedule from 0 to 1 instead of the adaptive one (with ``max_move_rounds =
        1``, ``Ẑ`` is then exactly unbiased).
    max_move_rounds : int
        Rounds of moves per stage at most.  After each round the correlation across the
        run's particles between their log likelihoods before the moves and now is computed;
        the run stops moving at this stage once it is at most ``correlation_threshold`` (the
        rule of :func:`pymc.sample_smc`'s kernels, on the partition's log likelihood).
    correlation_threshold : float
    cluster_anchors : bool
        Draw the SAMS moves' anchors by the cluster-anchor law of the package's default step
        (:func:`tempered_split_merge`) instead of two uniformly random points.
    chain_length : int
        ``P``: waste-free SMC (Dau & Chopin 2022) when ``P > 1``.  Each stage resamples only
        ``M = L / P`` starting particles and runs a chain of ``P - 1`` rounds of moves from
        each, keeping every state of every chain (the start included) as the ``L``
        particles of the next stage: the same number of moves as ``L`` particles moved once,
        spent on longer chains.  ``L`` must be a multiple of ``P``; one round of moves per
        stage (``max_move_rounds = 1``).
    reference_labels : int, optional
        ``K``: start from the uniform-label reference ``r_K`` and temper prior and likelihood
        together (module docstring); ``None`` (default): start from the prior and temper the
        likelihood.  ``Ẑ`` then estimates ``p(y, k <= K)``, which is ``p(y)`` when ``K`` is
        at least the prior's largest number of blocks and otherwise leaves out the
        posterior mass of partitions with more than ``K`` blocks.  A prior with fewer blocks
        than points (``FiniteDirichletPrior(k)``) needs ``K <= k`` (``ValueError``).
    resample_threshold : float
        In ``(0, 1]``.  ``1`` (default): every stage resamples.  Below 1: the particles carry
        their weights, a stage resamples only when the relative ESS of the accumulated
        weights falls below it (and the last stage always), the temperatures keep the
        conditional ESS at ``ess_threshold`` (module docstring).  Not with ``chain_length >
        1`` (``ValueError``).
    reference_probabilities : ndarray of float, shape (n, K), optional
        ``q``: start from the informed reference ``r(z) = prod_i q_i(z_i)`` on labelled
        vectors and temper along ``γ_β(z) = r(z)^(1-β) {p(c) m(y | c) / (K)_k}^β`` in
        labelled space (module docstring; :func:`informed_reference` builds ``q`` from a
        pilot partition).  Rows positive, summing to 1.  ``Ẑ`` estimates ``p(y, k <= K)``.
        The moves are ``n_gibbs_sweeps`` labelled Gibbs sweeps and ``K`` label exchanges
        (:func:`label_exchanges`) per round: not with ``reference_labels``, ``n_split_merge > 0`` or ``chain_length > 1``
        (``ValueError``).
    prepared : TemperedPrepared, optional
        :func:`prepare_tempered` computed once for many runs.
    max_stages : int
        Error if the adaptive schedule needs more stages.

    Returns
    -------
    list of TemperedSMCResult
    """
    _check_tempered_arguments(num_particles, n_gibbs_sweeps, n_split_merge, ess_threshold,
                              temperatures, max_temperature_step, max_move_rounds,
                              correlation_threshold)
    if int(num_runs) != num_runs or num_runs < 1:
        raise ValueError(f"num_runs must be a positive integer; got {num_runs!r}")
    _check_chain_length(chain_length, num_particles, max_move_rounds)
    _check_resample_threshold(resample_threshold, chain_length)
    if prepared is None:
        prepared = prepare_tempered(prior, family, x)
    model, empty_row = prepared.model, prepared.empty_row
    n = model.x.shape[0]
    labelled = reference_probabilities is not None
    if labelled:
        most_blocks = _largest_block_count(prepared.log_v, n)
        log_q = np.log(_check_reference_probabilities(
            reference_probabilities, n, most_blocks, reference_labels, chain_length,
            n_split_merge))
        num_labels = log_q.shape[1]
        label_weights = np.empty(num_labels)
        block_sums = np.empty((num_labels, num_labels))
    runs, size = int(num_runs), int(num_particles)
    total = runs * size
    seed_numba_from(rng)
    population = empty_population(total, n, empty_row)
    spare = empty_population(total, n, empty_row)
    scratch = np.empty(n + 2)
    particle_scales = np.ones(total)
    if labelled:
        # log (K)_k: the labellings of a k-block partition by K labels
        log_v_reference = reference_log_v(num_labels, n) + n * np.log(num_labels)
        cumulative = np.cumsum(np.exp(log_q), axis=1)
        cumulative[:, -1] = 1.0
        labelled_reference_draws(model, population, empty_row, cumulative)
    elif reference_labels is None:
        log_v_reference = np.zeros(n + 2)
        prior_draws(model, population, empty_row, prepared.log_v_steps, prepared.log_w, scratch)
    else:
        log_v_reference = reference_log_v(int(reference_labels), n)
        most_blocks = _largest_block_count(prepared.log_v, n)
        if most_blocks < n and reference_labels > most_blocks:
            raise ValueError(
                f"reference_labels ({reference_labels}) is more than the prior's largest "
                f"number of blocks ({most_blocks}): particles with more blocks than that have "
                f"weight 0; use reference_labels <= {most_blocks}")
        particle_scales[:] = 0.0
        reference_draws(model, population, empty_row, int(reference_labels),
                        np.empty(int(reference_labels), dtype=np.int64))
    log_prior_ratios = np.zeros(total)
    log_likelihood_buffer = np.empty(total)
    log_reference_buffer = np.empty(total)

    def log_targets():
        """``log γ_1 - log γ_0`` of every particle (the tempered part of the target): ``ℓ(c)``,
        plus ``log p(c) - log r_K(c)`` on the path from the reference, ``log p(c) - log (K)_k
        - log r(z)`` on the path from the informed reference."""
        population_log_likelihoods(model, population, log_likelihood_buffer)
        if labelled:
            population_log_prior_ratios(population, prepared.log_v, prepared.log_w,
                                        log_v_reference, log_prior_ratios)
            population_log_reference(population, log_q, log_reference_buffer)
            return log_likelihood_buffer + log_prior_ratios - log_reference_buffer
        if reference_labels is not None:
            population_log_prior_ratios(population, prepared.log_v, prepared.log_w,
                                        log_v_reference, log_prior_ratios)
        return log_likelihood_buffer + log_prior_ratios

    log_likelihoods = log_targets()
    placed = np.arange(n, dtype=np.int64)
    order = np.arange(n, dtype=np.int64)
    members = np.empty(max(n, 1), dtype=np.int64)
    forced = np.empty(max(n, 1), dtype=np.bool_)
    schedule = None if temperatures is None else np.asarray(temperatures, dtype=float)
    beta = np.zeros(runs)
    particle_betas = np.zeros(total)
    betas = [[0.0] for _ in range(runs)]
    increments = [[] for _ in range(runs)]
    acceptance = [[] for _ in range(runs)]
    rounds_used = [[] for _ in range(runs)]
    resampled = [[] for _ in range(runs)]
    log_weights = np.zeros(total)  # carried log weights (0: equally weighted)
    threshold = float(resample_threshold)
    sweeps, moves = int(n_gibbs_sweeps), int(n_split_merge)
    length = int(chain_length)
    if labelled:
        moves = 0  # the label exchanges: one per label per round
        swaps = num_labels
    else:
        swaps = 0
    updates_per_round = (size - size // length if length > 1 else size) * (
        n * sweeps + moves + swaps)
    stage = 0
    while np.any(beta < 1.0):
        if stage >= max_stages:
            raise RuntimeError(f"tempered SMC needed more than {max_stages} stages")
        active = np.flatnonzero(beta < 1.0)
        rows = log_likelihoods.reshape(runs, size)[active]
        new = (next_temperature(rows, beta[active], ess_threshold, max_temperature_step,
                                None if threshold >= 1.0 else
                                log_weights.reshape(runs, size)[active])
               if schedule is None else np.full(active.size, float(schedule[stage + 1])))
        log_incremental = (new - beta[active])[:, None] * rows
        # normalised log weights W (log L W = 0 when equally weighted): log Σ W w per run
        log_carried = log_weights.reshape(runs, size)[active]
        log_carried = log_carried - _log_mean_exp_rows(log_carried)[:, None]
        for g, run in enumerate(active):
            increments[run].append(stage_log_increment(log_incremental[g] + log_carried[g]))
        log_accumulated = _carry_weights(log_carried, log_incremental)
        resample = ((new >= 1.0) | (threshold >= 1.0)
                    | (_relative_ess_rows(log_accumulated) < threshold))
        log_weights.reshape(runs, size)[active] = np.where(resample[:, None], 0.0,
                                                           log_accumulated)
        ancestors = np.arange(total)
        if resample.any():
            chosen = _grouped_systematic_ancestors(log_accumulated[resample], rng,
                                                   size // length) + (
                active[resample] * size - np.arange(resample.sum()) * size)[:, None]
            # waste-free: every state of chain m (particles m P .. m P + P - 1) starts from its
            # ancestor; the moves below turn state j into one more round of moves from state
            # j - 1
            ancestors.reshape(runs, size)[active[resample]] = np.repeat(chosen, length, axis=1)
            _resample_population(placed, ancestors, population, spare, empty_row)
            population, spare = spare, population
            log_likelihoods = log_likelihoods[ancestors]
        particle_betas.reshape(runs, size)[active] = new[:, None]
        if reference_labels is not None:
            particle_scales.reshape(runs, size)[active] = new[:, None]
        moving_runs = np.zeros(runs, dtype=np.bool_)
        moving_runs[active] = sweeps + moves + swaps > 0
        start = log_likelihoods.reshape(runs, size).copy()
        changes = np.zeros(total, dtype=np.int64)
        count = np.zeros(runs, dtype=np.int64)
        for round_ in range(int(max_move_rounds)):
            if not moving_runs.any():
                break
            if length > 1:
                _waste_free_chains(model, prepared, population, placed, moving_runs,
                                   particle_betas, particle_scales, log_v_reference, changes,
                                   sweeps, moves, cluster_anchors, length, scratch, order,
                                   members, forced)
                count += moving_runs
                log_likelihoods = log_targets()
                break
            moving = np.repeat(moving_runs, size)
            if labelled:
                if sweeps:
                    labelled_gibbs_sweeps(model, population, empty_row, prepared.log_v,
                                          prepared.log_w, log_q, particle_betas, moving,
                                          changes, prepared.log_prior_predictive, sweeps,
                                          scratch, label_weights, order)
                label_exchanges(population, empty_row, log_q, particle_betas, moving, changes,
                                swaps, block_sums, label_weights)
            if sweeps and not labelled:
                tempered_gibbs_sweeps(model, population, empty_row, prepared.log_v,
                                      prepared.log_w, particle_betas, particle_scales,
                                      log_v_reference, moving, changes,
                                      prepared.log_prior_predictive, sweeps, scratch, order)
            if moves:
                tempered_split_merge(model, population, empty_row, prepared.log_v,
                                     prepared.log_w, particle_betas, particle_scales,
                                     log_v_reference, moving, changes, moves, members, forced,
                                     bool(cluster_anchors))
            count += moving_runs
            log_likelihoods = log_targets()
            if round_ + 1 < int(max_move_rounds):
                correlation = _row_correlations(start, log_likelihoods.reshape(runs, size))
                moving_runs &= correlation > float(correlation_threshold)
        changed = changes.reshape(runs, size).sum(axis=1)
        for g, run in enumerate(active):
            updates = updates_per_round * count[run]
            acceptance[run].append(changed[run] / updates if updates else 0.0)
            rounds_used[run].append(int(count[run]))
            betas[run].append(float(new[g]))
            resampled[run].append(bool(resample[g]))
        beta[active] = new
        stage += 1
    results = []
    for run in range(runs):
        labels = population.labels[run * size:(run + 1) * size]
        results.append(TemperedSMCResult(
            canonical_labels(labels), float(np.sum(increments[run])), np.array(betas[run]),
            np.array(increments[run]), np.array(acceptance[run]),
            np.array(rounds_used[run], dtype=np.int64), np.array(resampled[run], dtype=bool)))
    return results


def run_tempered_smc(prior, family, x, num_particles: int, rng: np.random.Generator,
                     **options) -> TemperedSMCResult:
    """One likelihood-tempered SMC run over the partitions of ``x`` (module docstring).

    The keyword ``options`` are those of :func:`tempered_runs` (``n_gibbs_sweeps``,
    ``n_split_merge``, ``ess_threshold``, ``max_temperature_step``, ``temperatures``,
    ``max_move_rounds``, ``correlation_threshold``, ``cluster_anchors``, ``chain_length``,
    ``reference_labels``, ``resample_threshold``, ``reference_probabilities``, ``prepared``,
    ``max_stages``).

    Returns
    -------
    TemperedSMCResult
    """
    return tempered_runs(prior, family, x, num_particles, 1, rng, **options)[0]


def tempered_log_evidence_runs(prior, family, x, num_particles: int, num_runs: int,
                               rng: np.random.Generator, **options) -> np.ndarray:
    """Log evidence estimates of ``num_runs`` independent tempered runs (one population)."""
    return np.array([result.log_evidence for result in
                     tempered_runs(prior, family, x, num_particles, num_runs, rng, **options)])
