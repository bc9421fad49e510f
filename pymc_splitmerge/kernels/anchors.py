"""Anchor proposals ``h(s)`` shared by the split-merge kernels (PGSM, SAMS, RGSM).

Public API (stable; other kernels build on it)::

    ANCHOR_PROPOSALS = ("uniform", "cluster_informed", "threshold_informed")

    sample_anchors(kind, n_points, rng, n_anchors=2, adaptation=None) -> int64 array (n_anchors,)
        Distinct point indices, in random order (anchor 0 is uniform over the anchors).
        ``adaptation`` is an ``AnchorProposal`` (holding the frozen snapshot the informed
        proposals use) or ``None``; with ``None`` every kind falls back to the uniform law.

    AnchorProposal(kind="uniform", n_anchors=2, threshold=0.01, adaptation="record")
        .sample(n_points, rng) -> anchors             # same as sample_anchors(kind, ..., self)
        .adapt(state, log_w_table) -> bool            # call ONLY during tuning
        .reset()                                      # forget the snapshot (new chain)
        .is_adapted -> bool

The three proposals (Bouchard-Côté, Doucet & Roth 2017, §4.3 and App. F):

* ``uniform``: ``s`` uniform over the ``binom(n, |s|)`` subsets of size ``|s|``.
* ``cluster_informed`` (Algorithm 4, ``|s| = 2`` only): ``i1`` uniform; let ``b̄`` be the
  snapshot cluster of ``i1``; each other snapshot cluster ``b`` gets the score
  ``L(y_{b̄ ∪ b}) / (L(y_b̄) L(y_b))`` and ``b̄`` gets the mean of those scores; a cluster ``b'``
  is drawn proportionally to the scores and ``i2`` uniformly from ``b' \\ {i1}``.
* ``threshold_informed`` (Algorithm 5, ``|s| = 2`` only): ``i1`` uniform; each snapshot
  cluster ``b`` (with ``i1`` removed) gets the Chinese-restaurant attachment probability
  ``p_b ∝ [W(|b|+1)/W(|b|)] L(y_i1 | y_b)``; ``b'`` is uniform over ``{b : p_b >= threshold}``
  and ``i2`` uniform from ``b' \\ {i1}``.

If a set drawn from is empty, two anchors are drawn uniformly (paper, Remark 10).

Why the informed proposals keep the sampler invariant
------------------------------------------------------
The correctness proof of the split-merge decomposition (paper, App. A, eq. 18) augments the
target with the anchors through ``π̃(s, c₋, c) = π(c) h(s) 1[c₋ = c₋(s, c)]``: ``h`` must be a
distribution over anchor sets that does **not** depend on the current partition ``c``.  The
restricted update (Algorithm 1, line 5) then samples from ``π̃(c' | s, c₋)``, which has no
``h`` factor.  If ``h`` depended on the current ``c`` (as Algorithms 4-5 do when read
literally), the correct conditional would be ``∝ π(c') h(s | c')`` and Algorithm 1 would no
longer leave ``π`` invariant.  Therefore the informed proposals here never look at the
current partition: they read a *frozen snapshot* (labels, cluster statistics, the prior's
``log_w_table``) taken by ``adapt``.  Between two adaptations ``h`` is a fixed law over anchor
sets and every transition is exactly ``π``-invariant.  Adaptation itself is diminishing and
provably stops:

* ``adaptation="record"`` (default, paper §4.3): the snapshot is refreshed only when the
  number of clusters breaks its previous record, which can happen at most ``n`` times;
* ``adaptation="window"``: the snapshot is refreshed at every ``adapt`` call;

and in both cases ``adapt`` is called by the step methods **only during tuning**, so after
tuning ``h`` is fixed and the chain is an ordinary ``π``-invariant Markov chain.  Without any
snapshot (e.g. no tuning) the informed kinds use the uniform law.

References
----------
Bouchard-Côté, A., Doucet, A. and Roth, A. (2017). Particle Gibbs split-merge sampling for
Bayesian inference in mixture models. JMLR 18(28). Section 4.3, Appendix A, Appendix F.
"""

from __future__ import annotations

import numpy as np

from pymc_splitmerge.components import dispatch
from pymc_splitmerge.core.jit import njit
from pymc_splitmerge.core.logweights import log_sum_exp, normalise_log_weights, sample_weights
from pymc_splitmerge.kernels.rng import uniform_rank
from pymc_splitmerge.priors.seating import log_join_weight

__all__ = [
    "ADAPTATION_RULES",
    "ANCHOR_PROPOSALS",
    "AnchorProposal",
    "sample_anchors",
    "sample_uniform_anchors",
    "uniform_anchors",
    "validate_anchor_options",
]

ANCHOR_PROPOSALS = ("uniform", "cluster_informed", "threshold_informed")
ADAPTATION_RULES = ("record", "window")


def validate_anchor_options(kind, n_anchors: int) -> None:
    """Raise a clear error for an unknown proposal kind or an incompatible ``n_anchors``."""
    if kind not in ANCHOR_PROPOSALS:
        raise ValueError(
            f"unknown anchor proposal {kind!r}; choose one of {', '.join(ANCHOR_PROPOSALS)}"
        )
    if isinstance(n_anchors, bool) or not isinstance(n_anchors, (int, np.integer)):
        raise TypeError(f"n_anchors must be an integer >= 2; got {n_anchors!r}")
    if n_anchors < 2:
        raise ValueError(f"n_anchors must be >= 2; got {n_anchors}")
    if kind != "uniform" and n_anchors != 2:
        raise ValueError(
            f"the {kind!r} anchor proposal is defined for n_anchors=2 only (paper, App. F); "
            f"use anchor_proposal='uniform' with n_anchors={n_anchors}"
        )


@njit(cache=True)
def uniform_anchors(n_points, uniforms, out):
    """The one uniform anchor draw: ``out.shape[0]`` distinct points, uniformly over ordered
    tuples, from as many Uniform(0, 1) draws ``uniforms`` (numba; callable from kernels).

    Sequential sampling without replacement: anchor ``t`` is the ``floor(u_t (n - t))``-th
    point (in increasing order) not drawn yet.  For two anchors this is
    ``i = floor(u_0 n)``, ``j = floor(u_1 (n - 1))`` shifted past ``i``.  Cost
    ``O(m^2)`` for ``m`` anchors (no ``O(n)`` permutation).

    Parameters
    ----------
    n_points : int
        ``n >= m``.
    uniforms : ndarray of float64, shape (>= m,)
    out : ndarray of int64, shape (m,)
        Receives the anchors, in the order drawn.
    """
    for t in range(out.shape[0]):
        rank = uniform_rank(uniforms[t], n_points - t)
        # the rank-th point not drawn yet: shift past the drawn ones in increasing order
        point = rank
        changed = True
        while changed:
            changed = False
            below = 0
            for s in range(t):
                if out[s] <= point:
                    below += 1
            if rank + below != point:
                point = rank + below
                changed = True
        out[t] = point
    return out


def sample_uniform_anchors(n_points: int, rng: np.random.Generator, n_anchors: int = 2):
    """Draw ``n_anchors`` distinct point indices uniformly (random order).

    :func:`uniform_anchors` driven by ``n_anchors`` uniforms of ``rng``.

    Returns
    -------
    ndarray of int64, shape (n_anchors,)
    """
    if n_points < n_anchors:
        raise ValueError(
            f"need at least n_anchors={n_anchors} points to draw anchors; got {n_points}"
        )
    return uniform_anchors(n_points, rng.random(n_anchors), np.empty(n_anchors, dtype=np.int64))


# --------------------------------------------------------------------------- snapshot maths


@njit(cache=True)
def _cluster_informed_log_scores(family_id, params, x, order, offsets, stats):
    """Matrix ``log_scores[a, b]`` of Algorithm 4 (row ``a`` = cluster of the first anchor).

    ``order[offsets[k]:offsets[k+1]]`` are the points of snapshot cluster ``k`` and
    ``stats[k]`` its statistics row.  Cost O(K * n).
    """
    n_clusters = offsets.shape[0] - 1
    log_marginals = np.empty(n_clusters)
    for k in range(n_clusters):
        log_marginals[k] = dispatch.log_marginal(family_id, params, stats[k])
    log_scores = np.empty((n_clusters, n_clusters))
    work = np.empty(stats.shape[1])
    other_scores = np.empty(max(n_clusters - 1, 1))
    for a in range(n_clusters):
        for b in range(n_clusters):
            if a == b:
                continue
            work[:] = stats[a]
            for position in range(offsets[b], offsets[b + 1]):
                dispatch.add_point(family_id, params, work, x[order[position]])
            log_scores[a, b] = (dispatch.log_marginal(family_id, params, work)
                                - log_marginals[a] - log_marginals[b])
        if n_clusters == 1:
            log_scores[a, a] = 0.0
        else:
            # s_b̄ = mean of the other scores, in log space
            count = 0
            for b in range(n_clusters):
                if b != a:
                    other_scores[count] = log_scores[a, b]
                    count += 1
            log_scores[a, a] = log_sum_exp(other_scores, count) - np.log(n_clusters - 1.0)
    return log_scores


@njit(cache=True)
def _threshold_informed_log_scores(family_id, params, x, i, cluster_of, sizes, stats, empty_row,
                                   log_w_table):
    """Log CRP attachment scores of Algorithm 5 for first anchor ``i`` (``-inf``: empty)."""
    n_clusters = sizes.shape[0]
    log_scores = np.empty(n_clusters)
    work = np.empty(stats.shape[1])
    own = cluster_of[i]
    for k in range(n_clusters):
        size = sizes[k]
        if k == own:
            size -= 1
            if size == 0:
                log_scores[k] = -np.inf
                continue
            work[:] = stats[k]
            dispatch.remove_point(family_id, params, work, x[i])
            log_scores[k] = (log_join_weight(log_w_table, size, 1)
                             + dispatch.log_predictive(family_id, params, work, x[i]))
        else:
            log_scores[k] = (log_join_weight(log_w_table, size, 1)
                             + dispatch.log_predictive(family_id, params, stats[k], x[i]))
    return log_scores


def _normalise(log_scores):
    """Probabilities ∝ ``exp(log_scores)`` (``core.logweights``), ``None`` if all are zero."""
    weights = np.empty(log_scores.shape[0])
    log_total = normalise_log_weights(np.ascontiguousarray(log_scores, dtype=np.float64),
                                      weights)
    return None if log_total == -np.inf else weights


class AnchorProposal:
    """Anchor proposal ``h(s)`` with a frozen, adaptively refreshed snapshot.

    Parameters
    ----------
    kind : {"uniform", "cluster_informed", "threshold_informed"}
    n_anchors : int, default 2
        ``|s|``; the informed kinds need ``n_anchors == 2``.
    threshold : float, default 0.01
        Attachment-probability threshold of the threshold-informed proposal.
    adaptation : {"record", "window"}, default "record"
        When ``adapt`` refreshes the snapshot (see the module docstring): only when the number
        of clusters breaks its record, or at every call.

    Notes
    -----
    ``adapt`` must only be called during tuning: the anchor law must not depend on the
    current partition for the split-merge update to be exactly invariant (module docstring).
    """

    def __init__(self, kind="uniform", n_anchors=2, threshold=0.01, adaptation="record"):
        validate_anchor_options(kind, n_anchors)
        if adaptation not in ADAPTATION_RULES:
            raise ValueError(
                f"unknown adaptation rule {adaptation!r}; choose one of "
                f"{', '.join(ADAPTATION_RULES)}"
            )
        threshold = float(threshold)
        if not 0.0 <= threshold < 1.0:
            raise ValueError(f"threshold must be in [0, 1); got {threshold}")
        self.kind = kind
        self.n_anchors = int(n_anchors)
        self.threshold = threshold
        self.adaptation = adaptation
        self.reset()

    def reset(self) -> None:
        """Forget the snapshot and the cluster-count record (call at the start of a chain)."""
        self._snapshot = None
        self.record_n_clusters = 0

    @property
    def is_adapted(self) -> bool:
        return self._snapshot is not None

    def adapt(self, state, log_w_table) -> bool:
        """Refresh the snapshot from ``state`` according to the adaptation rule (tuning only).

        Parameters
        ----------
        state : PartitionState
        log_w_table : ndarray of shape (n + 2,)
            The prior's ``log W`` table (used by the threshold-informed proposal).

        Returns
        -------
        bool
            Whether the snapshot was refreshed.
        """
        if self.kind == "uniform":
            return False
        n_clusters = state.n_clusters
        if self.adaptation == "record":
            if n_clusters <= self.record_n_clusters:
                return False
            self.record_n_clusters = n_clusters
        self.set_snapshot(state.family, state.x, state.labels(), log_w_table)
        return True

    def set_snapshot(self, family, x, labels, log_w_table=None) -> None:
        """Freeze the snapshot used by the informed proposals (labels of any form).

        Parameters
        ----------
        family : ComponentFamily
            Numeric family.
        x : ndarray of shape (n, data_dim)
            Prepared data.
        labels : array_like of int, shape (n,)
        log_w_table : ndarray of shape (>= n + 2,), optional
            Needed by the threshold-informed proposal.
        """
        x = np.ascontiguousarray(x, dtype=np.float64)
        _, cluster_of = np.unique(np.asarray(labels), return_inverse=True)
        cluster_of = cluster_of.astype(np.int64)
        n_clusters = int(cluster_of.max()) + 1
        order = np.argsort(cluster_of, kind="stable").astype(np.int64)
        sizes = np.bincount(cluster_of, minlength=n_clusters).astype(np.int64)
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        stats = np.stack([family.stats_of(x[order[offsets[k]:offsets[k + 1]]])
                          for k in range(n_clusters)]).astype(np.float64)
        params = np.ascontiguousarray(family.params, dtype=np.float64)
        snapshot = {
            "family_id": family.family_id, "params": params, "x": x,
            "cluster_of": cluster_of, "order": order, "offsets": offsets, "sizes": sizes,
            "stats": np.ascontiguousarray(stats),
            "empty_row": np.ascontiguousarray(family.empty_stats, dtype=np.float64),
            # position of each point inside its cluster's block of ``order``
            "position": np.empty(x.shape[0], dtype=np.int64),
        }
        snapshot["position"][order] = np.arange(x.shape[0]) - offsets[cluster_of[order]]
        if self.kind == "cluster_informed":
            log_scores = _cluster_informed_log_scores(
                snapshot["family_id"], params, x, order, offsets, snapshot["stats"])
            snapshot["probabilities"] = np.stack([_normalise(row) for row in log_scores])
        elif self.kind == "threshold_informed":
            if log_w_table is None:
                raise ValueError("the threshold-informed proposal needs the prior's log_w_table")
            snapshot["log_w_table"] = np.ascontiguousarray(log_w_table, dtype=np.float64)
        self._snapshot = snapshot

    def sample(self, n_points: int, rng: np.random.Generator):
        """Draw an anchor set; see ``sample_anchors``."""
        snapshot = self._snapshot
        if self.kind == "uniform" or snapshot is None:
            return sample_uniform_anchors(n_points, rng, self.n_anchors)
        if snapshot["x"].shape[0] != n_points:
            raise ValueError(
                f"the anchor snapshot has {snapshot['x'].shape[0]} points, not {n_points}"
            )
        first = int(rng.integers(n_points))
        own = snapshot["cluster_of"][first]
        if self.kind == "cluster_informed":
            probabilities = snapshot["probabilities"][own]
            chosen = int(sample_weights(probabilities, probabilities.shape[0], 1.0,
                                        rng.random()))
        else:
            log_scores = _threshold_informed_log_scores(
                snapshot["family_id"], snapshot["params"], snapshot["x"], first,
                snapshot["cluster_of"], snapshot["sizes"], snapshot["stats"],
                snapshot["empty_row"], snapshot["log_w_table"])
            probabilities = _normalise(log_scores)
            eligible = (np.flatnonzero(probabilities >= self.threshold)
                        if probabilities is not None else np.empty(0, dtype=np.int64))
            if eligible.size == 0:
                return sample_uniform_anchors(n_points, rng, 2)
            chosen = int(eligible[rng.integers(eligible.size)])
        start = snapshot["offsets"][chosen]
        size = snapshot["sizes"][chosen]
        if chosen == own:
            if size < 2:  # b' \ {i1} is empty: Remark 10
                return sample_uniform_anchors(n_points, rng, 2)
            offset = int(rng.integers(size - 1))
            if offset >= snapshot["position"][first]:
                offset += 1
        else:
            offset = int(rng.integers(size))
        second = int(snapshot["order"][start + offset])
        return np.array([first, second], dtype=np.int64)


def sample_anchors(kind, n_points, rng, n_anchors=2, adaptation=None):
    """Draw an anchor set ``s`` (function-level entry point shared by PGSM and SAMS).

    Parameters
    ----------
    kind : {"uniform", "cluster_informed", "threshold_informed"}
    n_points : int
        Number of data points ``n``.
    rng : numpy.random.Generator
    n_anchors : int, default 2
        ``|s|``; the informed kinds need 2.
    adaptation : AnchorProposal or None
        Holder of the frozen snapshot the informed kinds read; ``None`` gives the uniform law.

    Returns
    -------
    ndarray of int64, shape (n_anchors,)
        Distinct point indices; the order is random (Algorithm 2 orders them uniformly anyway).
    """
    validate_anchor_options(kind, n_anchors)
    if adaptation is None or kind == "uniform":
        return sample_uniform_anchors(n_points, rng, n_anchors)
    if adaptation.kind != kind:
        raise ValueError(f"adaptation holds a {adaptation.kind!r} proposal, not {kind!r}")
    return adaptation.sample(n_points, rng)
