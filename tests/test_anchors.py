"""Tests of the anchor proposals (kernels/anchors.py) shared by PGSM and SAMS."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from pymc_splitmerge.components import BetaBernoulli, NormalInverseWishart
from pymc_splitmerge.kernels.anchors import (
    AnchorProposal,
    sample_anchors,
    sample_uniform_anchors,
    uniform_anchors,
)
from pymc_splitmerge.kernels.pgsm import pgsm_move
from pymc_splitmerge.kernels.state import PartitionState
from pymc_splitmerge.priors import DirichletProcessPrior
from pymc_splitmerge.testing import GOF_PVALUE_THRESHOLD, assert_partition_gof, exact_posterior

DATA = np.array([[0.0, 0.1], [0.4, -0.3], [2.5, 2.0], [2.2, 2.6], [1.2, 1.0], [-0.5, 0.2]])
SNAPSHOT = np.array([0, 0, 1, 1, 2, 0])


def family():
    return NormalInverseWishart(mu0=np.zeros(2), kappa0=0.5, nu0=4.0, psi0=0.5 * np.eye(2))


def pair_frequencies(draw, n, repeats):
    pairs = {pair: k for k, pair in enumerate(combinations(range(n), 2))}
    counts = np.zeros(len(pairs))
    for _ in range(repeats):
        anchors = draw()
        assert len(set(anchors.tolist())) == len(anchors)
        counts[pairs[tuple(sorted(anchors.tolist()))]] += 1
    return counts, pairs


def chi2_pvalue(counts, probabilities):
    expected = probabilities * counts.sum()
    keep = expected > 0
    assert counts[~keep].sum() == 0
    statistic = np.sum((counts[keep] - expected[keep]) ** 2 / expected[keep])
    return stats.chi2.sf(statistic, keep.sum() - 1)


def test_uniform_anchors_are_uniform_over_pairs():
    rng = np.random.default_rng(0)
    counts, pairs = pair_frequencies(lambda: sample_uniform_anchors(5, rng), 5, 5000)
    assert chi2_pvalue(counts, np.full(len(pairs), 1 / len(pairs))) > GOF_PVALUE_THRESHOLD
    assert sample_anchors("uniform", 7, rng, n_anchors=3).shape == (3,)


def test_uniform_anchor_draw_is_uniform_over_ordered_triples():
    """``uniform_anchors`` (the one uniform draw) for 3 anchors: every ordered triple of
    distinct points equally likely (exact cell probabilities, chi-square)."""
    rng = np.random.default_rng(1)
    n, draws = 5, 12000
    triples = [(a, b, c) for a in range(n) for b in range(n) for c in range(n)
               if len({a, b, c}) == 3]
    index = {triple: k for k, triple in enumerate(triples)}
    counts = np.zeros(len(triples))
    out = np.empty(3, dtype=np.int64)
    for _ in range(draws):
        counts[index[tuple(uniform_anchors(n, rng.random(3), out))]] += 1
    assert chi2_pvalue(counts, np.full(len(triples), 1 / len(triples))) > GOF_PVALUE_THRESHOLD
    # deterministic: u -> 1 picks the last free points, u = 0 the first
    assert list(uniform_anchors(4, np.array([0.0, 0.0, 0.0]), out)) == [0, 1, 2]
    assert list(uniform_anchors(4, np.array([0.999, 0.999, 0.999]), out)) == [3, 2, 1]
    assert list(uniform_anchors(4, np.array([0.3, 0.0, 0.999]), out)) == [1, 0, 3]


def test_bad_options_raise():
    with pytest.raises(ValueError, match="unknown anchor proposal"):
        AnchorProposal("nearest")
    with pytest.raises(ValueError, match="n_anchors=2 only"):
        AnchorProposal("cluster_informed", n_anchors=3)
    with pytest.raises(ValueError, match=">= 2"):
        sample_anchors("uniform", 5, np.random.default_rng(0), n_anchors=1)
    with pytest.raises(ValueError, match="adaptation"):
        AnchorProposal("cluster_informed", adaptation="always")
    with pytest.raises(ValueError, match="at least"):
        sample_uniform_anchors(1, np.random.default_rng(0))


def reference_pair_law(kind, fam, x, labels, log_w_table, threshold=0.01):
    """Plain-Python law of the unordered anchor pair (Algorithms 4-5 and Remark 10)."""
    n = x.shape[0]
    clusters = [np.flatnonzero(labels == k) for k in np.unique(labels)]
    cluster_of = np.unique(labels, return_inverse=True)[1]
    pairs = {pair: k for k, pair in enumerate(combinations(range(n), 2))}
    law = np.zeros(len(pairs))
    uniform = np.full(len(pairs), 1 / len(pairs))
    for first in range(n):
        own = cluster_of[first]
        if kind == "cluster_informed":
            log_s = np.empty(len(clusters))
            for k, members in enumerate(clusters):
                if k != own:
                    log_s[k] = (fam.log_marginal_of(x[np.r_[clusters[own], members]])
                                - fam.log_marginal_of(x[clusters[own]])
                                - fam.log_marginal_of(x[members]))
            others = [k for k in range(len(clusters)) if k != own]
            log_s[own] = (logsumexp(log_s[others]) - np.log(len(others))) if others else 0.0
            p_cluster = np.exp(log_s - logsumexp(log_s))
        else:
            log_s = np.full(len(clusters), -np.inf)
            for k, members in enumerate(clusters):
                rest = members[members != first]
                if rest.size:
                    log_s[k] = (log_w_table[rest.size + 1] - log_w_table[rest.size]
                                + fam.log_marginal_of(x[np.r_[rest, first]])
                                - fam.log_marginal_of(x[rest]))
            p = np.exp(log_s - logsumexp(log_s))
            eligible = p >= threshold
            p_cluster = eligible / eligible.sum()
        for k, probability in enumerate(p_cluster):
            candidates = [i for i in clusters[k] if i != first]
            if not candidates:
                law += probability * uniform / n
                continue
            for second in candidates:
                law[pairs[tuple(sorted((first, second)))]] += probability / len(candidates) / n
    return law


@pytest.mark.parametrize("kind", ["cluster_informed", "threshold_informed"])
def test_informed_proposals_match_plain_reference_law(kind):
    rng = np.random.default_rng(4)
    fam = family()
    x = fam.prepare_data(DATA)
    labels = np.array([0, 0, 1, 1, 2, 3])  # includes a singleton cluster (Remark 10 path)
    _, log_w_table = DirichletProcessPrior(alpha=1.0).tables(6)
    proposal = AnchorProposal(kind)
    proposal.set_snapshot(fam, x, labels, log_w_table)
    law = reference_pair_law(kind, fam, x, labels, log_w_table)
    np.testing.assert_allclose(law.sum(), 1.0)
    counts, _ = pair_frequencies(lambda: proposal.sample(6, rng), 6, 6000)
    assert chi2_pvalue(counts, law) > GOF_PVALUE_THRESHOLD


def test_adaptation_record_rule_and_reset():
    fam = BetaBernoulli(a=1.0, b=1.0)
    x = fam.prepare_data(np.array([[1, 0], [1, 1], [0, 0], [0, 1]]))
    _, log_w_table = DirichletProcessPrior(alpha=1.0).tables(4)
    proposal = AnchorProposal("cluster_informed")
    assert not proposal.is_adapted
    assert proposal.adapt(PartitionState(fam, x, [0, 0, 1, 1]), log_w_table)
    assert not proposal.adapt(PartitionState(fam, x, [0, 1, 0, 1]), log_w_table)  # K = 2 again
    assert proposal.adapt(PartitionState(fam, x, [0, 1, 2, 2]), log_w_table)  # record 3
    assert proposal.record_n_clusters == 3
    window = AnchorProposal("threshold_informed", adaptation="window")
    assert window.adapt(PartitionState(fam, x, [0, 0, 1, 1]), log_w_table)
    assert window.adapt(PartitionState(fam, x, [0, 0, 1, 1]), log_w_table)
    assert not AnchorProposal("uniform").adapt(PartitionState(fam, x, [0, 0, 1, 1]),
                                               log_w_table)
    proposal.reset()
    assert not proposal.is_adapted and proposal.record_n_clusters == 0


@pytest.mark.parametrize("kind", ["cluster_informed", "threshold_informed"])
def test_pgsm_with_frozen_informed_anchors_is_invariant(kind):
    """With a frozen snapshot h does not depend on the current partition: exact invariance."""
    rng = np.random.default_rng(sum(map(ord, kind)))
    fam = family()
    x = fam.prepare_data(DATA[:5])
    prior = DirichletProcessPrior(alpha=1.0)
    log_v_table, log_w_table = prior.tables(5)
    proposal = AnchorProposal(kind)
    proposal.set_snapshot(fam, x, SNAPSHOT[:5], log_w_table)
    exact = exact_posterior(prior, fam, DATA[:5])
    draws = exact.sample(2000, rng)
    out = np.empty_like(draws)
    for r in range(draws.shape[0]):
        state = PartitionState(fam, x, draws[r])
        for _ in range(2):
            pgsm_move(state, log_v_table, log_w_table, rng, anchor_proposal=proposal)
        out[r] = state.labels()
    assert_partition_gof(out, exact)
