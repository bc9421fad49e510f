"""Exactness of the concentration / discount updates by one-step invariance.

Each test draws i.i.d. values of the parameter from its *exact* conditional given a fixed
partition (inverse CDF on a fine quadrature grid), applies the update to every draw, and
tests the results against the exact CDF with a Kolmogorov–Smirnov test.  Negative controls
(Gamma rate used as scale; the two mixture draws averaged; slice without the log-scale
Jacobian) must be rejected by the same test.
"""

from __future__ import annotations

import math

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from scipy import special, stats

import pymc_splitmerge as psm
from pymc_splitmerge.kernels import concentration as conc
from pymc_splitmerge.priors import DirichletProcessPrior, FiniteDirichletPrior, PitmanYorPrior

P_THRESHOLD = 1e-3  # per-test false-rejection rate of the valid kernels
N_DRAWS = 2000


class GridPosterior:
    """Exact 1-D density on a grid (trapezoid CDF), with inverse-CDF sampling."""

    def __init__(self, grid, log_density):
        grid = np.asarray(grid, dtype=float)
        log_density = np.asarray(log_density, dtype=float)
        density = np.exp(log_density - np.max(log_density))
        cdf = np.concatenate([[0.0], np.cumsum(0.5 * (density[1:] + density[:-1]) * np.diff(grid))])
        self.grid, self.cdf_values = grid, cdf / cdf[-1]
        self.mean = np.trapezoid(grid * density, grid) / np.trapezoid(density, grid)

    def cdf(self, values):
        return np.interp(values, self.grid, self.cdf_values)

    def sample(self, size, rng):
        return np.interp(rng.random(size), self.cdf_values, self.grid)


def dp_alpha_posterior(n_clusters, n, shape, rate):
    """p(alpha | K) ∝ Gamma(alpha; shape, rate) alpha^K Γ(alpha)/Γ(alpha + n)."""
    grid = np.exp(np.linspace(math.log(1e-6), math.log(200.0), 40001))
    log_density = (stats.gamma.logpdf(grid, shape, scale=1.0 / rate) + n_clusters * np.log(grid)
                   + special.gammaln(grid) - special.gammaln(grid + n))
    return GridPosterior(grid, log_density)


def eppf_posterior(grid, make_prior, sizes, log_prior):
    log_density = np.array([make_prior(v).log_eppf(sizes) + log_prior(v) for v in grid])
    return GridPosterior(grid, log_density)


def one_step_pvalue(posterior, update, seed, n_steps=1):
    rng = np.random.default_rng(seed)
    values = posterior.sample(N_DRAWS, rng)
    for _ in range(n_steps):
        values = np.array([update(v, rng) for v in values])
    return stats.kstest(values, posterior.cdf).pvalue


# ------------------------------------------------------------------------- Escobar & West
def broken_rate_as_scale(alpha, n_clusters, n, shape, rate, rng):
    eta = rng.beta(alpha + 1.0, n)
    b = rate - math.log(eta)
    odds = (shape + n_clusters - 1.0) / (n * b)
    larger = rng.random() * (1.0 + odds) < odds
    return rng.gamma(shape + n_clusters - (0 if larger else 1), b)  # BUG: rate used as scale


def broken_average(alpha, n_clusters, n, shape, rate, rng):
    eta = rng.beta(alpha + 1.0, n)
    b = rate - math.log(eta)
    odds = (shape + n_clusters - 1.0) / (n * b)
    weight = odds / (1.0 + odds)
    # BUG: averages the two components' draws instead of drawing one of them
    return (weight * rng.gamma(shape + n_clusters, 1.0 / b)
            + (1 - weight) * rng.gamma(shape + n_clusters - 1, 1.0 / b))


@pytest.mark.parametrize("n_clusters,n,shape,rate", [(3, 8, 2.0, 0.5), (1, 6, 1.0, 1.0),
                                                      (6, 7, 3.0, 2.0)])
def test_escobar_west_exact(n_clusters, n, shape, rate):
    posterior = dp_alpha_posterior(n_clusters, n, shape, rate)

    def update(alpha, rng):
        return conc.escobar_west_update(alpha, n_clusters, n, shape, rate, rng).alpha

    assert one_step_pvalue(posterior, update, seed=1) > P_THRESHOLD


@pytest.mark.parametrize("broken", [broken_rate_as_scale, broken_average])
def test_escobar_west_negative_controls_rejected(broken):
    n_clusters, n, shape, rate = 3, 8, 2.0, 0.5
    posterior = dp_alpha_posterior(n_clusters, n, shape, rate)

    def update(alpha, rng):
        return broken(alpha, n_clusters, n, shape, rate, rng)

    assert one_step_pvalue(posterior, update, seed=1, n_steps=2) < P_THRESHOLD


def test_escobar_west_chain_mean_matches_exact():
    """Long chain: posterior mean within 4 Monte Carlo standard errors (batch means)."""
    n_clusters, n, shape, rate = 4, 8, 2.0, 1.0
    posterior = dp_alpha_posterior(n_clusters, n, shape, rate)
    rng = np.random.default_rng(7)
    alpha, draws = 1.0, np.empty(20000)
    for t in range(draws.size):
        alpha = conc.escobar_west_update(alpha, n_clusters, n, shape, rate, rng).alpha
        draws[t] = alpha
    batches = draws.reshape(100, -1).mean(axis=1)
    standard_error = batches.std(ddof=1) / math.sqrt(batches.size)
    assert abs(draws.mean() - posterior.mean) < 4 * standard_error


def test_escobar_west_validates():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="alpha"):
        conc.escobar_west_update(-1.0, 2, 5, 1.0, 1.0, rng)
    with pytest.raises(ValueError, match="n_clusters"):
        conc.escobar_west_update(1.0, 6, 5, 1.0, 1.0, rng)
    with pytest.raises(TypeError, match="Generator"):
        conc.escobar_west_update(1.0, 2, 5, 1.0, 1.0, 3)


# ------------------------------------------------------------------------- slice updates
SIZES = np.array([4, 2, 1, 1])
GAMMA_PRIOR = stats.gamma(2.0, scale=1.0)  # frozen scipy object (logpdf)
BETA_PRIOR = stats.beta(1.5, 3.0)


def test_dirichlet_process_slice_exact():
    grid = np.exp(np.linspace(math.log(1e-5), math.log(60.0), 2001))
    posterior = eppf_posterior(grid, lambda a: DirichletProcessPrior(alpha=a), SIZES,
                               GAMMA_PRIOR.logpdf)

    def update(alpha, rng):
        return conc.dirichlet_process_concentration_slice_update(alpha, SIZES, GAMMA_PRIOR,
                                                                 rng).value

    assert one_step_pvalue(posterior, update, seed=2) > P_THRESHOLD


def test_pitman_yor_concentration_slice_exact():
    discount = 0.4
    grid = -discount + np.exp(np.linspace(math.log(1e-5), math.log(60.0), 2001))
    prior_of_alpha = stats.gamma(2.0, loc=-discount, scale=1.0)
    posterior = eppf_posterior(grid, lambda a: PitmanYorPrior(alpha=a, discount=discount),
                               SIZES, prior_of_alpha.logpdf)

    def update(alpha, rng):
        return conc.pitman_yor_concentration_update(alpha, discount, SIZES,
                                                    prior_of_alpha.logpdf, rng).value

    assert one_step_pvalue(posterior, update, seed=3) > P_THRESHOLD


@pytest.mark.parametrize("alpha", [1.3, -0.2])
def test_pitman_yor_discount_slice_exact(alpha):
    lower = max(0.0, -alpha)
    grid = np.linspace(lower + 1e-9, 1 - 1e-9, 2001)
    posterior = eppf_posterior(grid, lambda d: PitmanYorPrior(alpha=alpha, discount=d), SIZES,
                               BETA_PRIOR.logpdf)

    def update(discount, rng):
        return conc.pitman_yor_discount_update(alpha, discount, SIZES, BETA_PRIOR, rng).value

    assert one_step_pvalue(posterior, update, seed=4) > P_THRESHOLD


def test_finite_dirichlet_slice_exact():
    k = 5
    grid = np.exp(np.linspace(math.log(1e-5), math.log(60.0), 2001))
    posterior = eppf_posterior(grid, lambda a: FiniteDirichletPrior(alpha=a, k=k), SIZES,
                               GAMMA_PRIOR.logpdf)

    def update(alpha, rng):
        return conc.finite_dirichlet_concentration_update(alpha, k, SIZES, GAMMA_PRIOR,
                                                          rng).value

    assert one_step_pvalue(posterior, update, seed=5) > P_THRESHOLD


def test_slice_without_jacobian_rejected():
    """Negative control: log-scale slice sampling that forgets the Jacobian."""
    grid = np.exp(np.linspace(math.log(1e-5), math.log(60.0), 2001))
    posterior = eppf_posterior(grid, lambda a: DirichletProcessPrior(alpha=a), SIZES,
                               GAMMA_PRIOR.logpdf)

    def log_target(a):
        return DirichletProcessPrior(alpha=a).log_eppf(SIZES) + GAMMA_PRIOR.logpdf(a)

    def update(alpha, rng):
        info = conc.slice_sample(math.log(alpha), lambda u: log_target(math.exp(u)), rng)
        return math.exp(info.value)

    assert one_step_pvalue(posterior, update, seed=2, n_steps=2) < P_THRESHOLD


def test_slice_sample_standard_normal_moments():
    """Plain slice sampler on N(0, 1): mean and variance of a long chain."""
    rng = np.random.default_rng(11)
    value, draws = 0.0, np.empty(20000)
    for t in range(draws.size):
        value = conc.slice_sample(value, lambda v: -0.5 * v * v, rng).value
        draws[t] = value
    assert abs(draws.mean()) < 0.05
    assert abs(draws.var() - 1.0) < 0.06


def test_slice_rejects_zero_density_start():
    with pytest.raises(ValueError, match="zero density"):
        conc.slice_sample(2.0, lambda v: -np.inf, np.random.default_rng(0))
    with pytest.raises(TypeError, match="log_prior_density"):
        conc.eppf_slice_update(1.0, lambda a: DirichletProcessPrior(alpha=a), SIZES, 3.0,
                               np.random.default_rng(0), lower=0.0)


# ------------------------------------------------------------------------- numba kernel
NUMBA_CASES = {
    # name: (prior, parameter, density code, density params, scipy frozen prior)
    "dp-alpha-gamma": (DirichletProcessPrior(1.0), "alpha", conc.DENSITY_GAMMA, (2.0, 1.0),
                       stats.gamma(2.0, scale=1.0)),
    "dp-alpha-half-normal": (DirichletProcessPrior(0.5), "alpha", conc.DENSITY_HALF_NORMAL,
                             (0.0, 2.0), stats.halfnorm(scale=2.0)),
    "py-alpha-log-normal": (PitmanYorPrior(0.8, 0.4), "alpha", conc.DENSITY_LOG_NORMAL,
                            (0.0, 1.0), stats.lognorm(s=1.0)),
    "py-discount-beta": (PitmanYorPrior(1.3, 0.3), "discount", conc.DENSITY_BETA, (1.5, 3.0),
                         stats.beta(1.5, 3.0)),
    "py-discount-uniform-negative-alpha": (PitmanYorPrior(-0.2, 0.5), "discount",
                                           conc.DENSITY_UNIFORM, (0.0, 0.9),
                                           stats.uniform(0.0, 0.9)),
    "finite-alpha-exponential": (FiniteDirichletPrior(0.7, 5), "alpha",
                                 conc.DENSITY_EXPONENTIAL, (2.0,), stats.expon(scale=2.0)),
}


class _UniformStream:
    """The same U(0, 1) sequence, read one at a time (reference) or in blocks (numba)."""

    def __init__(self, seed):
        self.values = np.random.default_rng(seed).random(200000)
        self.position = 0

    def one(self):
        self.position += 1
        return self.values[self.position - 1]

    def block(self, count):
        self.position += count
        return self.values[self.position - count:self.position]


def _theta(prior):
    return np.array([float(getattr(prior, name)) for name in type(prior).parameter_names])


@pytest.mark.parametrize("case", sorted(NUMBA_CASES))
def test_numba_slice_matches_plain_reference(case):
    """Same uniforms, same draws and evaluation counts along a chain of 300 updates."""
    prior, name, code, params, scipy_prior = NUMBA_CASES[case]
    kernel = conc.build_parameter_slice(type(prior), name, code, params, width=1.0)
    numba_stream, reference_stream = _UniformStream(1), _UniformStream(1)
    sizes = np.array([4, 0, 2, 1, 1])
    theta = _theta(prior)
    for _ in range(300):
        current = type(prior)(*theta)
        expected = conc.prior_parameter_update(current, name, sizes, scipy_prior,
                                               reference_stream.one, width=1.0)
        info = kernel(theta, sizes, numba_stream.block)
        assert info.n_evaluations == expected.n_evaluations
        assert info.value == pytest.approx(expected.value, rel=1e-12, abs=1e-300)
        assert theta[type(prior).parameter_names.index(name)] == info.value
        # the uniforms consumed agree (numba reads whole blocks of 16)
        assert 0 <= numba_stream.position - reference_stream.position < 16
        reference_stream.position = numba_stream.position


@pytest.mark.parametrize("case", sorted(NUMBA_CASES))
def test_numba_log_prior_density_matches_scipy_up_to_a_constant(case):
    _, _, code, params, scipy_prior = NUMBA_CASES[case]
    grid = scipy_prior.ppf(np.linspace(0.01, 0.99, 41))
    difference = np.array([conc.log_prior_density(code, np.array(params, dtype=float), x)
                           for x in grid]) - scipy_prior.logpdf(grid)
    assert np.ptp(difference) < 1e-10
    assert conc.log_prior_density(code, np.array(params, dtype=float), -1.0) == -np.inf


@pytest.mark.parametrize("case", ["dp-alpha-gamma", "py-alpha-log-normal", "py-discount-beta",
                                  "finite-alpha-exponential"])
def test_numba_slice_exact(case):
    prior, name, code, params, scipy_prior = NUMBA_CASES[case]
    prior_class = type(prior)
    values = {key: getattr(prior, key) for key in prior_class.parameter_names}
    lower, upper = prior_class.parameter_bounds(name, values)
    if math.isfinite(upper):
        grid = np.linspace(lower + 1e-9, upper - 1e-9, 2001)
    else:
        grid = lower + np.exp(np.linspace(math.log(1e-5), math.log(60.0), 2001))
    posterior = eppf_posterior(grid, lambda v: prior_class(**dict(values, **{name: v})), SIZES,
                               scipy_prior.logpdf)
    kernel = conc.build_parameter_slice(prior_class, name, code, params)
    theta = _theta(prior)
    index = prior_class.parameter_names.index(name)

    def update(value, rng):
        theta[index] = value
        return kernel(theta, SIZES, rng).value

    assert one_step_pvalue(posterior, update, seed=6) > P_THRESHOLD


def test_numba_slice_with_wrong_prior_density_rejected():
    """Negative control: the Gamma prior's scale read as a rate (scale 1/2 instead of 2)."""
    target = stats.gamma(2.0, scale=2.0)
    grid = np.exp(np.linspace(math.log(1e-5), math.log(60.0), 2001))
    posterior = eppf_posterior(grid, lambda a: DirichletProcessPrior(alpha=a), SIZES,
                               target.logpdf)
    kernel = conc.build_parameter_slice(DirichletProcessPrior, "alpha", conc.DENSITY_GAMMA,
                                        (2.0, 0.5))

    def update(alpha, rng):
        return kernel(np.array([alpha]), SIZES, rng).value

    assert one_step_pvalue(posterior, update, seed=6, n_steps=2) < P_THRESHOLD


def test_build_parameter_slice_validates():
    with pytest.raises(ValueError, match="no numba EPPF"):
        conc.build_parameter_slice(dict, "alpha")
    with pytest.raises(ValueError, match="no updatable parameter"):
        conc.build_parameter_slice(FiniteDirichletPrior, "k")
    with pytest.raises(ValueError, match="density_code"):
        conc.build_parameter_slice(DirichletProcessPrior, "alpha", 99)
    with pytest.raises(ValueError, match="width"):
        conc.build_parameter_slice(DirichletProcessPrior, "alpha", width=0.0)
    kernel = conc.build_parameter_slice(DirichletProcessPrior, "alpha", conc.DENSITY_UNIFORM,
                                        (1.0, 2.0))
    with pytest.raises(ValueError, match="zero density"):
        kernel(np.array([5.0]), SIZES, np.random.default_rng(0))


# ------------------------------------------------------------------------- the PyMC step
STEP_CASES = {
    # name: (prior kind, parameter, PyMC prior builder, scipy prior, numba path expected)
    "dp-alpha-half-cauchy-plain": ("dp", "alpha", lambda: pm.HalfCauchy("theta", 1.0),
                                   stats.halfcauchy(scale=1.0), False),
    "py-discount-uniform-interval": ("py", "discount", lambda: pm.Uniform("theta", 0.0, 0.9),
                                     stats.uniform(0.0, 0.9), True),
    "py-discount-beta-logodds": ("py", "discount", lambda: pm.Beta("theta", 1.5, 3.0),
                                 stats.beta(1.5, 3.0), True),
    "finite-alpha-gamma-log": ("finite", "alpha", lambda: pm.Gamma("theta", 2.0, 2.0),
                               stats.gamma(2.0, scale=0.5), True),
}
STEP_LABELS = np.array([0, 0, 0, 0, 1, 1, 2, 3])  # block sizes SIZES = (4, 2, 1, 1)


@pytest.mark.parametrize("case", sorted(STEP_CASES))
def test_partition_prior_slice_step_one_step_exact(case):
    """PartitionPriorSlice.step (numba or plain path, value transforms) keeps the conditional."""
    kind, _, build, scipy_prior, numba_path = STEP_CASES[case]
    data = np.arange(len(STEP_LABELS), dtype=float)[:, None] % 3
    with pm.Model() as model:
        theta = build()
        if kind == "dp":
            z = psm.DirichletProcess("z", alpha=theta, n=len(data))
            make_prior, lower, upper = (lambda v: DirichletProcessPrior(v)), 0.0, np.inf
        elif kind == "py":
            z = psm.PitmanYor("z", alpha=1.3, discount=theta, n=len(data))
            make_prior, lower, upper = (lambda v: PitmanYorPrior(1.3, v)), 0.0, 0.9
        else:
            z = psm.FiniteDirichlet("z", alpha=theta, k=5, n=len(data))
            make_prior, lower, upper = (lambda v: FiniteDirichletPrior(v, 5)), 0.0, np.inf
        psm.ConjugateMixture("y", partition=z, component=psm.GammaPoisson(), observed=data)
        step = psm.PartitionPriorSlice(theta, rng=1)
    assert [update.fast for update in step.updates] == [numba_path]
    if math.isfinite(upper):
        grid = np.linspace(lower + 1e-9, upper - 1e-9, 2001)
    else:
        grid = np.exp(np.linspace(math.log(1e-5), math.log(60.0), 2001))
    posterior = eppf_posterior(grid, make_prior, SIZES, scipy_prior.logpdf)
    value_name = model.rvs_to_values[theta].name
    transform = model.rvs_to_transforms[theta]
    x = pt.dscalar("x")
    forward = pytensor.function([x], transform.forward(x, *theta.owner.inputs),
                                on_unused_input="ignore")
    point = model.initial_point()
    point["z"] = STEP_LABELS.copy()
    values = posterior.sample(N_DRAWS // 2, np.random.default_rng(8))
    new_values = np.empty_like(values)
    natural = model.compile_fn(model.replace_rvs_by_values([theta])[0], inputs=model.value_vars,
                               on_unused_input="ignore")
    for i, value in enumerate(values):
        point[value_name] = np.asarray(forward(value))
        new_point, _ = step.step(point)
        new_values[i] = float(natural(new_point))
    assert stats.kstest(new_values, posterior.cdf).pvalue > P_THRESHOLD
