r"""Exactness of a partition step combined with a step on a random hyperparameter of the family.

Beta–Bernoulli data (5 points, 4 attributes), ``z ~ DirichletProcess(alpha=1)`` and the
Beta prior's ``a ~ Gamma(2, 1)`` (``b = 0.5`` fixed).  ``a`` is updated by NUTS (given
explicitly) or by :class:`~pymc_splitmerge.HyperparameterSlice`, which plain ``pm.sample()``
assigns by itself; both evaluate the mixture through the cached per-cluster statistics
(:class:`~pymc_splitmerge.distributions.statistics.ClusterStatistics`).

The exact joint law of (partition, ``a`` in one of three bins) is

.. math::

    P(c, a \in B) \propto p(c) \int_B \prod_{b \in c} m(y_b \mid a)\,
    \mathrm{Gamma}(a; 2, 1)\, da,

computed by enumerating the 52 set partitions and Simpson's rule in ``u = log a`` on each bin
(``m`` in closed form, vectorised over the nodes, checked against the numeric core's
``log_marginal_of``). The thinned draws are compared with it by Pearson's χ² (cells with
``n p (1 - p) >= 1``, the rest lumped) at the suite's per-test threshold.

Plain ``pm.sample()`` alternates the slice step with the default partition step, two rounds per
draw (:class:`~pymc_splitmerge.steps.alternation.AlternatingStep`); an explicit one with three
rounds is tested too.

Negative controls: statistics that are never recomputed after the labels change (the op's cache
check monkeypatched to "unchanged") make NUTS or the slice step sample ``a`` given the first
partition; a slice step whose log density omits the Jacobian of ``a``'s log transform samples
the wrong law; a partition step that keeps its family after the hyperparameter changed moves
the labels given a stale value; the same test rejects each.
"""

from __future__ import annotations

import itertools

import numpy as np
import pymc as pm
import pytest
from conftest import thinned_labels
from scipy import integrate, stats
from scipy.special import betaln, logsumexp

import pymc_splitmerge as psm
from pymc_splitmerge.components import BetaBernoulli
from pymc_splitmerge.core.enumerate import enumerate_partitions
from pymc_splitmerge.core.relabel import partition_index
from pymc_splitmerge.distributions import statistics
from pymc_splitmerge.priors import DirichletProcessPrior
from pymc_splitmerge.steps import base
from pymc_splitmerge.steps.alternation import AlternatingStep
from pymc_splitmerge.testing import GOF_PVALUE_THRESHOLD, MIN_CELL_VARIANCE

DATA = np.array([[1, 1, 0, 0], [1, 1, 0, 1], [1, 0, 0, 0], [0, 0, 1, 1], [0, 1, 1, 1]])
B = 0.5
A_PRIOR = (2.0, 1.0)  # shape, rate
ALPHA = 1.0
BIN_EDGES = (0.0, 0.6, 1.4, np.inf)  # bins of a
U_RANGE = (np.log(1e-5), np.log(40.0))  # the quadrature in u = log a; mass outside < 1e-9
NODES_PER_BIN = 401
CHAINS = 2
DRAWS = 1600  # per chain
TUNE = 300
THIN = 4
STEPS = {
    "gibbs": lambda z: psm.CollapsedGibbsStep(z),
    "sams": lambda z: psm.SAMSStep(z),
    "rgsm": lambda z: psm.RGSMStep(z, n_gibbs_sweeps=0),
}


def _members(mask, n):
    return np.flatnonzero((int(mask) >> np.arange(n)) & 1)


def _log_marginal(rows, a):
    """Beta–Bernoulli marginal of ``rows`` for every value in ``a`` (closed form)."""
    ones = rows.sum(axis=0)[:, None]
    zeros = rows.shape[0] - ones
    return np.sum(betaln(a + ones, B + zeros) - betaln(a, B), axis=0)


def _enumeration():
    """(partitions, masks, subsets, log_prior): the set partitions of the data's points, each
    block as a bit mask of its points, the distinct blocks, and the DP log prior."""
    n = DATA.shape[0]
    partitions = enumerate_partitions(n)
    bits = np.int64(1) << np.arange(n, dtype=np.int64)
    masks = np.stack([(partitions == j) @ bits for j in range(n)], axis=1)
    subsets = np.unique(masks[masks > 0])
    sizes = np.array([np.bincount(row, minlength=n) for row in partitions])
    log_prior = np.array([DirichletProcessPrior(ALPHA).log_eppf(s[s > 0]) for s in sizes])
    return partitions, masks, subsets, log_prior


def _log_bounds(edges):
    """The quadrature's bounds in the log of a hyperparameter for bins with ``edges``."""
    inner = np.clip(np.log(np.asarray(edges[1:-1])), *U_RANGE)
    return np.r_[U_RANGE[0], inner, U_RANGE[1]]


def _exact_joint():
    """(partitions, prob) with prob of shape (n_partitions, n_bins), summing to 1."""
    n = DATA.shape[0]
    partitions, masks, subsets, log_prior = _enumeration()
    shape, rate = A_PRIOR
    log_bins = []
    for lo, hi in itertools.pairwise(_log_bounds(BIN_EDGES)):
        u = np.linspace(lo, hi, NODES_PER_BIN)
        a = np.exp(u)
        log_subset = np.zeros((1 << n, u.size))
        for mask in subsets:
            log_subset[mask] = _log_marginal(DATA[_members(mask, n)], a)
        log_likelihood = log_subset[masks].sum(axis=1)  # (n_partitions, nodes)
        log_density = stats.gamma.logpdf(a, shape, scale=1 / rate) + u  # Jacobian of u
        log_f = log_prior[:, None] + log_likelihood + log_density[None, :]
        top = log_f.max()
        log_bins.append(np.log(integrate.simpson(np.exp(log_f - top), x=u, axis=1)) + top)
    log_joint = np.stack(log_bins, axis=1)
    return partitions, np.exp(log_joint - logsumexp(log_joint))


EXACT = None


def _exact():
    global EXACT
    if EXACT is None:
        EXACT = _exact_joint()
    return EXACT


def _joint_chisquare(labels, a_draws):
    """Pearson χ² p-value of the sampled (partition, bin of a) cells against the exact law."""
    _, prob = _exact()
    cell = partition_index(labels, DATA.shape[0]) * prob.shape[1] + np.digitize(
        a_draws, BIN_EDGES[1:-1])
    return _pearson_pvalue(cell, prob)


def _pearson_pvalue(cell, prob):
    """Pearson χ² p-value of the sampled cell indices against the exact law ``prob``
    (flattened in the same order): cells with ``n p (1 - p) >= 1``, the rest lumped."""
    counts = np.bincount(cell, minlength=prob.size).astype(float)
    p = prob.reshape(-1)
    expected = counts.sum() * p
    keep = expected * (1 - p) >= MIN_CELL_VARIANCE
    observed = np.r_[counts[keep], counts[~keep].sum()]
    expected = np.r_[expected[keep], expected[~keep].sum()]
    assert keep.sum() >= 10  # the joint law is actually tested
    return stats.chisquare(observed, expected).pvalue


def _sample(step_name, seed, initvals=None, hyperparameter_step="nuts"):
    """Labels and draws of ``a``: ``step_name`` a key of STEPS, or "default" (plain
    ``pm.sample()``); ``hyperparameter_step`` "nuts" (given explicitly) or "slice" (assigned
    by PyMC: HyperparameterSlice)."""
    with pm.Model():
        a = pm.Gamma("a", alpha=A_PRIOR[0], beta=A_PRIOR[1])
        z = psm.DirichletProcess("z", alpha=ALPHA, n=DATA.shape[0])
        psm.ConjugateMixture("y", partition=z, component=BetaBernoulli(a=a, b=B),
                             observed=DATA)
        steps = [] if step_name == "default" else [STEPS[step_name](z)]
        if hyperparameter_step == "nuts":
            steps.append(pm.NUTS([a]))
        elif hyperparameter_step == "alternating":  # three rounds of the two per draw
            steps = [AlternatingStep([psm.HyperparameterSlice([a]), *steps], n_rounds=3)]
        idata = pm.sample(draws=DRAWS, tune=TUNE, step=steps or None, chains=CHAINS, cores=1,
                          random_seed=seed, initvals=initvals, progressbar=False,
                          compute_convergence_checks=False)
    stats = idata["sample_stats"]
    if hyperparameter_step == "nuts":
        assert "diverging" in stats and "hyperslice_evaluations" not in stats
    else:  # PyMC assigned the slice step to a
        assert "hyperslice_evaluations" in stats and "diverging" not in stats
    labels = thinned_labels(idata, THIN, chains=CHAINS)
    a_draws = np.asarray(idata["posterior"]["a"].values)[:, ::THIN].reshape(-1)
    return labels, a_draws


def test_closed_form_marginal_matches_the_numeric_core():
    for value in (0.05, 0.7, 3.0):
        family = BetaBernoulli(a=value, b=B)
        prepared = np.asarray(family.prepare_data(DATA), dtype=np.float64)
        for mask in (1, 6, 13, 31):
            members = _members(mask, DATA.shape[0])
            assert _log_marginal(DATA[members], np.array([value]))[0] == pytest.approx(
                family.log_marginal_of(prepared[members]), rel=1e-12)


def test_exact_joint_law_is_normalised_and_not_degenerate():
    _, prob = _exact()
    assert prob.sum() == pytest.approx(1.0, abs=1e-12)
    bin_mass = prob.sum(axis=0)
    assert np.all(bin_mass > 0.15), bin_mass  # each bin of a carries mass
    # the partition law depends on a: its conditional differs across bins
    conditional = prob / bin_mass
    assert np.abs(conditional[:, 0] - conditional[:, -1]).sum() > 0.05


@pytest.mark.parametrize("step_name", sorted(STEPS))
def test_partition_step_with_nuts_on_family_hyperparameter_matches_quadrature(step_name):
    labels, a_draws = _sample(step_name, seed=2400 + len(step_name))
    pvalue = _joint_chisquare(labels, a_draws)
    assert pvalue >= GOF_PVALUE_THRESHOLD, pvalue


def test_hyperparameter_slice_assigned_by_pymc_matches_quadrature():
    """Plain pm.sample(): DefaultPartitionStep on z, HyperparameterSlice on a."""
    labels, a_draws = _sample("default", seed=2417, hyperparameter_step="slice")
    pvalue = _joint_chisquare(labels, a_draws)
    assert pvalue >= GOF_PVALUE_THRESHOLD, pvalue


def test_alternating_step_matches_quadrature():
    """Three rounds per draw of HyperparameterSlice and a SAMS step (AlternatingStep)."""
    labels, a_draws = _sample("sams", seed=2419, hyperparameter_step="alternating")
    pvalue = _joint_chisquare(labels, a_draws)
    assert pvalue >= GOF_PVALUE_THRESHOLD, pvalue


def test_partition_state_kept_after_a_hyperparameter_change_is_rejected(monkeypatch):
    """Negative control of the partition step between the rounds of plain pm.sample(): a
    step that never sees the hyperparameter change (its comparison of the family's values
    always "unchanged") moves the labels given the value of a at the chain's first draw (a
    start in the tail, a = 20, where the partition law differs most from the marginal)."""
    monkeypatch.setattr(base, "_same_array", lambda first, second: True)
    labels, a_draws = _sample("default", seed=2417, initvals={"a": 20.0},
                              hyperparameter_step="slice")
    assert _joint_chisquare(labels, a_draws) < GOF_PVALUE_THRESHOLD


@pytest.mark.parametrize("hyperparameter_step", ["nuts", "slice"])
def test_stale_statistics_are_rejected(monkeypatch, hyperparameter_step):
    """Negative control: the op's cache never invalidates, so NUTS (or the slice step) moves
    a given the partition of the first evaluation (one cluster, whose law of a differs most
    from the marginal) while the partition step moves the labels."""
    monkeypatch.setattr(statistics, "_same_inputs", lambda previous, inputs: True)
    labels, a_draws = _sample("gibbs", seed=2405, initvals={"z": np.zeros(5, dtype=np.int64)},
                              hyperparameter_step=hyperparameter_step)
    assert _joint_chisquare(labels, a_draws) < GOF_PVALUE_THRESHOLD


def test_slice_without_the_jacobian_is_rejected(monkeypatch):
    """Negative control of the slice step's own density: without the Jacobian of the log
    transform of a it samples a with density proportional to p(a | ...) / a."""
    monkeypatch.setattr(psm.HyperparameterSlice, "_build_log_density",
                        _patched_build(_logp_without_jacobian))
    labels, a_draws = _sample("gibbs", seed=2407, hyperparameter_step="slice")
    assert _joint_chisquare(labels, a_draws) < GOF_PVALUE_THRESHOLD


_MODEL_LOGP = pm.Model.logp


def _logp_without_jacobian(self, *args, **kwargs):
    kwargs["jacobian"] = False
    return _MODEL_LOGP(self, *args, **kwargs)


def _patched_build(logp):
    build = psm.HyperparameterSlice._build_log_density

    def patched(self, model, value_vars):
        model.logp = logp.__get__(model)
        try:
            build(self, model, value_vars)
        finally:
            del model.logp

    return patched


# ------------------------------------------------------------------ a 2-D block: a and b
B_PRIOR = (2.0, 2.0)  # shape, rate of b in the 2-D block
B_BIN_EDGES = (0.0, 0.8, np.inf)
A_BIN_EDGES_2D = (0.0, 1.0, np.inf)
NODES_PER_BIN_2D = 101
EXACT_2D = None


def _log_marginal_ab(rows, a, b):
    """Beta–Bernoulli marginal of ``rows`` on a grid: ``a`` of shape (m, 1), ``b`` (1, m)."""
    ones = rows.sum(axis=0)
    zeros = rows.shape[0] - ones
    return sum(betaln(a + one, b + zero) - betaln(a, b)
               for one, zero in zip(ones, zeros, strict=True))


def _exact_joint_2d():
    """prob of shape (n_partitions, 2 bins of a, 2 bins of b): Simpson's rule in
    (log a, log b) on each pair of bins."""
    global EXACT_2D
    if EXACT_2D is not None:
        return EXACT_2D
    n = DATA.shape[0]
    partitions, masks, subsets, log_prior = _enumeration()

    out = np.zeros((partitions.shape[0], len(A_BIN_EDGES_2D) - 1, len(B_BIN_EDGES) - 1))
    for i, (a_lo, a_hi) in enumerate(itertools.pairwise(_log_bounds(A_BIN_EDGES_2D))):
        u = np.linspace(a_lo, a_hi, NODES_PER_BIN_2D)
        for j, (b_lo, b_hi) in enumerate(itertools.pairwise(_log_bounds(B_BIN_EDGES))):
            v = np.linspace(b_lo, b_hi, NODES_PER_BIN_2D)
            a, b = np.exp(u)[:, None], np.exp(v)[None, :]
            log_subset = {mask: _log_marginal_ab(DATA[_members(mask, n)], a, b)
                          for mask in subsets}
            log_density = (stats.gamma.logpdf(a, A_PRIOR[0], scale=1 / A_PRIOR[1]) + u[:, None]
                           + stats.gamma.logpdf(b, B_PRIOR[0], scale=1 / B_PRIOR[1])
                           + v[None, :])  # Jacobians of the log transforms
            for k, row in enumerate(masks):
                log_f = log_prior[k] + log_density + sum(log_subset[m] for m in row if m)
                top = log_f.max()
                inner = integrate.simpson(np.exp(log_f - top), x=v, axis=1)
                out[k, i, j] = np.log(integrate.simpson(inner, x=u)) + top
    EXACT_2D = np.exp(out - logsumexp(out))
    return EXACT_2D


def _sample_2d(seed):
    """Plain pm.sample(): DefaultPartitionStep on z, HyperparameterSlice on the block (a, b)
    (hit-and-run moves in two dimensions)."""
    with pm.Model():
        a = pm.Gamma("a", alpha=A_PRIOR[0], beta=A_PRIOR[1])
        b = pm.Gamma("b", alpha=B_PRIOR[0], beta=B_PRIOR[1])
        z = psm.DirichletProcess("z", alpha=ALPHA, n=DATA.shape[0])
        psm.ConjugateMixture("y", partition=z, component=BetaBernoulli(a=a, b=b),
                             observed=DATA)
        idata = pm.sample(draws=DRAWS, tune=TUNE, chains=CHAINS, cores=1, random_seed=seed,
                          progressbar=False, compute_convergence_checks=False)
    assert idata["sample_stats"]["hyperslice_evaluations"].ndim == 2  # one slice step: (a, b)
    labels = thinned_labels(idata, THIN, chains=CHAINS)
    draws = {name: np.asarray(idata["posterior"][name].values)[:, ::THIN].reshape(-1)
             for name in ("a", "b")}
    return labels, draws


def _joint_chisquare_2d(labels, draws):
    prob = _exact_joint_2d()
    n_a, n_b = prob.shape[1:]
    cell = ((partition_index(labels, DATA.shape[0]) * n_a
             + np.digitize(draws["a"], A_BIN_EDGES_2D[1:-1])) * n_b
            + np.digitize(draws["b"], B_BIN_EDGES[1:-1]))
    return _pearson_pvalue(cell, prob)


def test_exact_2d_joint_law_depends_on_both_hyperparameters():
    prob = _exact_joint_2d()
    assert prob.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.all(prob.sum(axis=(0, 2)) > 0.15) and np.all(prob.sum(axis=(0, 1)) > 0.15)
    # the partition law differs across the bins of each hyperparameter
    for axis in (1, 2):
        conditional = prob.sum(axis=3 - axis) / prob.sum(axis=(0, 3 - axis))
        assert np.abs(conditional[:, 0] - conditional[:, -1]).sum() > 0.05


def test_hyperparameter_slice_on_a_2d_block_matches_quadrature():
    labels, draws = _sample_2d(seed=2431)
    pvalue = _joint_chisquare_2d(labels, draws)
    assert pvalue >= GOF_PVALUE_THRESHOLD, pvalue


def test_2d_block_without_the_jacobians_is_rejected(monkeypatch):
    """Negative control: the 2-D slice step's density without the Jacobians of the log
    transforms of a and b."""
    monkeypatch.setattr(psm.HyperparameterSlice, "_build_log_density",
                        _patched_build(_logp_without_jacobian))
    labels, draws = _sample_2d(seed=2433)
    assert _joint_chisquare_2d(labels, draws) < GOF_PVALUE_THRESHOLD
