"""Partitions with cluster parameters (``ClusterParameter``, ``SlotGibbsStep``) against exact laws.

The slot target ``EPPF(z) (C-K)!/C! prod_s G0(theta_s) prod_i f(y_i | theta_{z_i})`` has the
partition law of the Gibbs-type prior (restricted to ``K <= C``).  Checked:

* one-step invariance of each move (Algorithm 8 sweep, split-merge) from exact draws of
  ``(z, theta)``, for every prior, on a conjugate model (exact law from
  ``NormalKnownCovariance``) and two non-conjugate ones (Student-t location, Poisson
  log-rate; exact law by quadrature per block), with negative controls (the placement factor,
  i.e. Algorithm 8's ``1/E``, dropped);
* whole chains through ``pm.sample`` (NUTS on the cluster parameters), each move alone and
  combined;
* model building: the model's log density is the slot target; bad input gets clear errors.
"""

from __future__ import annotations

import zlib

import numpy as np
import pymc as pm
import pytest
from conftest import PRIORS, thinned_labels
from kernel_references import reference_slot_gibbs_sweep, reference_slot_split_merge
from scipy.special import gammaln
from scipy.stats import kstest, norm, poisson, t

import pymc_splitmerge as psm
from pymc_splitmerge.components import NormalKnownCovariance
from pymc_splitmerge.kernels.cluster_slots import (
    SPLIT_EM_ITERATIONS,
    SPLIT_EM_NEWTON,
    laplace_parameter_update,
    parameter_split_merge,
    slot_gibbs_sweeps,
    slot_sizes,
    slot_split_merge,
)
from pymc_splitmerge.testing import assert_partition_gof, chisquare_partitions, exact_posterior
from pymc_splitmerge.testing.cluster_slots import (
    BlockParameterSampler,
    exact_posterior_by_quadrature,
    slot_state_draws,
)
from pymc_splitmerge.testing.gof import GOF_PVALUE_THRESHOLD

NORMAL_Y = np.array([-1.5, -1.1, 0.2, 1.3, 1.6])
NORMAL_MEAN, NORMAL_SCALE, NOISE = 0.0, 1.5, 0.6
STUDENT_Y = np.array([-2.0, -1.6, 0.1, 1.7, 2.4])
STUDENT_SCALE, STUDENT_NU = 0.7, 4.0


def _normal_log_pdf(x, mean, scale):
    return -0.5 * ((x - mean) / scale) ** 2 - np.log(scale) - 0.5 * np.log(2 * np.pi)


def _student_log_pdf(x, mean):
    nu = STUDENT_NU
    constant = gammaln((nu + 1) / 2) - gammaln(nu / 2) - 0.5 * np.log(nu * np.pi)
    return (constant - np.log(STUDENT_SCALE)
            - (nu + 1) / 2 * np.log1p(((x - mean) / STUDENT_SCALE) ** 2 / nu))


def _poisson_log_pmf(k, log_rate):
    return k * log_rate - np.exp(log_rate) - gammaln(k + 1)
COUNTS = np.array([0, 1, 6, 8, 2])


class Problem:
    """A one-parameter mixture: log f(i, theta), G0, exact law, parameter draws."""

    def __init__(self, name, y, log_f, base_logpdf, base_draw, bounds, posterior_draw=None):
        self.name, self.y, self.log_f = name, y, log_f
        self.base_logpdf, self.base_draw, self.bounds = base_logpdf, base_draw, bounds
        self.posterior_draw = posterior_draw or BlockParameterSampler(log_f, base_logpdf,
                                                                      bounds)
        self._exact = {}

    def log_likelihood(self, theta):
        return self.log_f(np.arange(self.y.size)[:, None], theta[None, :])

    def exact(self, prior, capacity=None):
        key = (id(prior), capacity)
        if key not in self._exact:
            self._exact[key] = self._exact_law(prior, capacity)
        return self._exact[key]

    def _exact_law(self, prior, capacity):
        if self.name == "normal":
            family = NormalKnownCovariance(mu0=NORMAL_MEAN, sigma0=NORMAL_SCALE**2,
                                           sigma=NOISE**2)
            exact = exact_posterior(prior, family, self.y[:, None])
            if capacity is not None and capacity < self.y.size:
                log_prob = np.where(exact.n_clusters <= capacity, exact.log_prob, -np.inf)
                log_prob = log_prob - np.logaddexp.reduce(log_prob)
                exact = type(exact)(exact.partitions, log_prob)
            return exact
        return exact_posterior_by_quadrature(prior, self.log_f, self.base_logpdf, self.y.size,
                                             self.bounds, capacity)

    def draw_parameter(self, points, rng):
        if not points:
            return self.base_draw(rng)
        return self.posterior_draw(points, rng)


def _normal_posterior(points, rng):
    precision = 1 / NORMAL_SCALE**2 + len(points) / NOISE**2
    mean = (NORMAL_MEAN / NORMAL_SCALE**2 + NORMAL_Y[list(points)].sum() / NOISE**2) / precision
    return rng.normal(mean, precision**-0.5)


PROBLEMS = {
    "normal": Problem("normal", NORMAL_Y, lambda i, th: _normal_log_pdf(NORMAL_Y[i], th, NOISE),
                      lambda th: _normal_log_pdf(th, NORMAL_MEAN, NORMAL_SCALE),
                      lambda rng: rng.normal(NORMAL_MEAN, NORMAL_SCALE), (-12.0, 12.0),
                      _normal_posterior),
    "student_t": Problem("student_t", STUDENT_Y,
                         lambda i, th: _student_log_pdf(STUDENT_Y[i], th),
                         lambda th: _normal_log_pdf(th, 0.0, 2.0),
                         lambda rng: rng.normal(0.0, 2.0), (-16.0, 16.0)),
    "poisson": Problem("poisson", COUNTS, lambda i, th: _poisson_log_pmf(COUNTS[i], th),
                       lambda th: _normal_log_pdf(th, 0.5, 1.5),
                       lambda rng: rng.normal(0.5, 1.5), (-9.0, 6.5)),
}


def _seed(*parts):
    """A seed that is the same in every process (``hash`` of a string is not)."""
    return zlib.crc32("/".join(parts).encode())


def _capacity(prior_name, n):
    return 3 if prior_name == "finite" else n


def _one_step_labels(problem, prior, capacity, move, num_samples, seed):
    rng = np.random.default_rng(seed)
    exact = problem.exact(prior, capacity)
    log_v, log_w = prior.tables(problem.y.size)
    out = []
    for labels, theta in slot_state_draws(exact, capacity, problem.draw_parameter,
                                          num_samples, rng):
        log_likelihood = problem.log_likelihood(theta)
        sizes = slot_sizes(labels, capacity)
        if move == "gibbs":
            slot_gibbs_sweeps(log_likelihood, labels, sizes, log_v, log_w, rng)
        elif move == "split_merge":
            for _ in range(3):
                slot_split_merge(log_likelihood, labels, sizes, log_v, log_w, rng)
        elif move in ("cluster_point_split_merge", "broken_cluster_point_split_merge"):
            for _ in range(3):  # the broken variant drops the anchors' probability ratio
                slot_split_merge(log_likelihood, labels, sizes, log_v, log_w, rng,
                                 anchors="cluster_point",
                                 _drop="anchor_ratio" if move.startswith("broken") else None)
        elif move == "reference_gibbs":
            labels = reference_slot_gibbs_sweep(log_likelihood, labels, prior, rng)
        elif move == "broken_gibbs":
            labels = reference_slot_gibbs_sweep(log_likelihood, labels, prior, rng,
                                                placement=False)
        elif move == "reference_split_merge":
            for _ in range(3):
                labels = reference_slot_split_merge(log_likelihood, labels, prior, rng)
        elif move == "broken_split_merge":
            for _ in range(3):
                labels = reference_slot_split_merge(log_likelihood, labels, prior, rng,
                                                    placement=False)
        elif move == "reference_cluster_point_split_merge":
            for _ in range(3):
                labels = reference_slot_split_merge(log_likelihood, labels, prior, rng,
                                                    cluster_point=True)
        in_place = move in ("gibbs", "split_merge", "cluster_point_split_merge",
                            "broken_cluster_point_split_merge")
        np.testing.assert_array_equal(sizes if in_place else slot_sizes(labels, capacity),
                                      slot_sizes(labels, capacity))
        out.append(labels)
    return np.array(out), exact


@pytest.mark.parametrize("move", ["gibbs", "split_merge", "cluster_point_split_merge"])
@pytest.mark.parametrize("prior_name", list(PRIORS))
@pytest.mark.parametrize("problem_name", list(PROBLEMS))
def test_one_step_invariance(problem_name, prior_name, move):
    problem = PROBLEMS[problem_name]
    labels, exact = _one_step_labels(problem, PRIORS[prior_name],
                                     _capacity(prior_name, problem.y.size), move, 3000,
                                     seed=_seed(problem_name, prior_name, move))
    assert_partition_gof(labels, exact)


@pytest.mark.parametrize("move", ["gibbs", "split_merge", "cluster_point_split_merge"])
def test_capacity_below_the_number_of_points_gives_the_truncated_law(move):
    problem = PROBLEMS["student_t"]
    labels, exact = _one_step_labels(problem, PRIORS["dp"], 3, move, 3000, seed=11)
    assert labels.max() < 3
    assert exact.n_clusters_pmf[4:].sum() == 0
    assert_partition_gof(labels, exact)


@pytest.mark.parametrize("move", ["gibbs", "split_merge", "cluster_point_split_merge"])
def test_plain_references_pass(move):
    problem = PROBLEMS["normal"]
    labels, exact = _one_step_labels(problem, PRIORS["py"], 5, f"reference_{move}", 1500,
                                     seed=5)
    assert_partition_gof(labels, exact)


@pytest.mark.parametrize("move", ["gibbs", "split_merge"])
def test_negative_control_without_the_placement_factor(move):
    """Dropping (C-K)!/C! (Algorithm 8's 1/E for a new cluster) must fail the same test."""
    problem = PROBLEMS["normal"]
    labels, exact = _one_step_labels(problem, PRIORS["py"], 5, f"broken_{move}", 1500, seed=5)
    assert chisquare_partitions(labels, exact).pvalue < GOF_PVALUE_THRESHOLD


def test_negative_control_without_the_cluster_point_anchor_ratio():
    """Cluster-point anchors without their reverse/forward probability ratio must fail the same
    test (the ratio is K n_k / ((K+1) m_b) for a split, far from 1 on five points)."""
    problem = PROBLEMS["normal"]
    labels, exact = _one_step_labels(problem, PRIORS["py"], 5, "broken_cluster_point_split_merge",
                                     5000, seed=5)
    assert chisquare_partitions(labels, exact).pvalue < GOF_PVALUE_THRESHOLD


@pytest.mark.parametrize("anchors", ["uniform", "cluster_point"])
def test_split_merge_early_rejection_changes_no_outcome(anchors):
    """A merge that the log ratio's bound without the reverse allocation (a log probability,
    <= 0) already rejects is rejected before that O(block) allocation: from the same seeds the
    labels, sizes and decisions are those of the full computation, and the bound is never
    below the full log ratio.  States from well-separated to flat likelihoods, so that merges
    are both rejected early and accepted."""
    from pymc_splitmerge.kernels.cluster_slots import _slot_split_merge

    rng = np.random.default_rng(_seed("early_rejection", anchors))
    n, capacity = 40, 8
    log_v, log_w = PRIORS["py"].tables(n)
    early = accepted_merges = 0
    for _ in range(600):
        labels = rng.integers(0, rng.integers(2, 6), size=n)
        theta = rng.normal(0.0, 2.0, size=capacity)
        # the points near their slots' parameters (merges mostly rejected) or anywhere
        y = theta[labels] + 0.3 * rng.normal(size=n) if rng.random() < 0.5 else rng.normal(size=n)
        log_likelihood = -0.5 * (y[:, None] - theta[None, :]) ** 2 / np.exp(rng.uniform(-3, 3))
        sizes = slot_sizes(labels, capacity)
        seed = int(rng.integers(2**32))
        outcomes = []
        for early_rejection in (True, False):
            new_labels, new_sizes = labels.copy(), sizes.copy()
            move, accepted, log_ratio = _slot_split_merge(
                log_likelihood, new_labels, new_sizes, log_v, log_w, seed,
                anchors == "cluster_point", False, early_rejection)
            outcomes.append((move, accepted, log_ratio, new_labels, new_sizes))
        (move, accepted, bound, labels_a, sizes_a), (move_b, accepted_b, log_ratio, labels_b,
                                                     sizes_b) = outcomes
        assert (move, accepted) == (move_b, accepted_b)
        np.testing.assert_array_equal(labels_a, labels_b)
        np.testing.assert_array_equal(sizes_a, sizes_b)
        if move == 2:
            assert bound >= log_ratio
            early += bound != log_ratio
            accepted_merges += accepted
        else:
            np.testing.assert_equal(bound, log_ratio)
    assert early > 100 and accepted_merges > 10


def test_split_merge_refuses_labels_beyond_the_capacity():
    log_v, log_w = PRIORS["dp"].tables(4)
    labels = np.array([0, 1, 3, 1])
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 3\)"):
        slot_split_merge(np.zeros((4, 3)), labels, slot_sizes(labels, 4)[:3], log_v, log_w,
                         np.random.default_rng(0))


def test_problem_densities_match_scipy():
    theta = np.linspace(-3, 3, 7)
    for i in range(5):
        np.testing.assert_allclose(PROBLEMS["student_t"].log_f(i, theta),
                                   t.logpdf(STUDENT_Y[i], 4, theta, 0.7))
        np.testing.assert_allclose(PROBLEMS["poisson"].log_f(i, theta),
                                   poisson.logpmf(COUNTS[i], np.exp(theta)))
        np.testing.assert_allclose(PROBLEMS["normal"].log_f(i, theta),
                                   norm.logpdf(NORMAL_Y[i], theta, NOISE))


# --------------------------------------------------------------------------- through PyMC
def _partition(prior_name, n):
    prior = PRIORS[prior_name]
    if prior_name == "dp":
        return psm.DirichletProcess("z", alpha=prior.alpha, n=n)
    if prior_name == "py":
        return psm.PitmanYor("z", alpha=prior.alpha, discount=prior.discount, n=n)
    if prior_name == "finite":
        return psm.FiniteDirichlet("z", alpha=prior.alpha, k=prior.k, n=n)
    return psm.MixtureOfFiniteMixtures("z", gamma=prior.gamma, k_prior=prior.k_prior, n=n)


def _conjugate_model(prior_name, capacity=None):
    with pm.Model() as model:
        z = _partition(prior_name, NORMAL_Y.size)
        theta = psm.ClusterParameter("theta", pm.Normal.dist(NORMAL_MEAN, NORMAL_SCALE),
                                     partition=z, capacity=capacity)
        pm.Normal("y", mu=theta[z], sigma=NOISE, observed=NORMAL_Y)
    return model


def _sample(model, draws, step=None, seed=1, chains=2):
    with model:
        return pm.sample(draws, tune=200, chains=chains, cores=1, step=step, random_seed=seed,
                         progressbar=False, compute_convergence_checks=False)


def test_model_log_density_is_the_slot_target():
    model = _conjugate_model("py", capacity=4)
    point = model.initial_point()
    point["z"] = np.array([2, 2, 0, 3, 3], dtype=point["z"].dtype)
    point["theta"] = np.array([0.3, -0.2, -1.0, 1.2])
    prior = PRIORS["py"]
    expected = (prior.log_eppf([1, 2, 2]) + gammaln(4 - 3 + 1) - gammaln(4 + 1)
                + norm.logpdf(point["theta"], NORMAL_MEAN, NORMAL_SCALE).sum()
                + norm.logpdf(NORMAL_Y, point["theta"][point["z"]], NOISE).sum())
    np.testing.assert_allclose(model.compile_logp()(point), expected)
    point["z"] = np.array([0, 0, 0, 0, 4], dtype=point["z"].dtype)  # label >= capacity
    (graph,) = model.replace_rvs_by_values([model["z_slot_placement"]])
    placement = model.compile_fn(graph, inputs=model.value_vars,
                                 on_unused_input="ignore")
    assert placement(point) == -np.inf


def test_competence():
    from pymc.step_methods.compound import Competence

    from pymc_splitmerge.steps import SlotGibbsStep
    from pymc_splitmerge.steps.sams import DefaultPartitionStep

    model = _conjugate_model("dp")
    assert SlotGibbsStep.competence(model["z"]) == Competence.IDEAL
    assert DefaultPartitionStep.competence(model["z"]) == Competence.INCOMPATIBLE
    assert SlotGibbsStep.competence(model["theta"]) == Competence.INCOMPATIBLE


@pytest.mark.parametrize("prior_name", list(PRIORS))
def test_pm_sample_reproduces_the_exact_law(prior_name):
    """Automatic steps (Algorithm 8 + split-merge, NUTS on theta) on the conjugate model."""
    model = _conjugate_model(prior_name)
    idata = _sample(model, 1500, seed=_seed(prior_name))
    assert "slot_gibbs_n_clusters" in idata["sample_stats"]  # assigned by pm.sample
    exact = PROBLEMS["normal"].exact(PRIORS[prior_name],
                                     _capacity(prior_name, NORMAL_Y.size))
    assert_partition_gof(thinned_labels(idata, 2, chains=2), exact)


@pytest.mark.parametrize(("n_gibbs_sweeps", "n_split_merge", "n_parameter_split_merge",
                          "n_cluster_point_split_merge"),
                         [(1, 0, 0, 0), (0, 2, 0, 0), (0, 0, 2, 0), (0, 0, 0, 2)])
def test_pm_sample_each_move_alone_with_nuts(n_gibbs_sweeps, n_split_merge,
                                             n_parameter_split_merge,
                                             n_cluster_point_split_merge):
    model = _conjugate_model("dp")
    with model:
        step = psm.SlotGibbsStep(model["z"], n_gibbs_sweeps=n_gibbs_sweeps,
                                 n_split_merge=n_split_merge,
                                 n_parameter_split_merge=n_parameter_split_merge,
                                 n_cluster_point_split_merge=n_cluster_point_split_merge)
    idata = _sample(model, 1500, step=[step], seed=3)
    assert_partition_gof(thinned_labels(idata, 2, chains=2),
                         PROBLEMS["normal"].exact(PRIORS["dp"], NORMAL_Y.size))


def test_pm_sample_poisson_log_rate():
    problem = PROBLEMS["poisson"]
    with pm.Model() as model:
        z = psm.DirichletProcess("z", alpha=PRIORS["dp"].alpha, n=COUNTS.size)
        log_rate = psm.ClusterParameter("log_rate", pm.Normal.dist(0.5, 1.5), partition=z)
        pm.Poisson("y", mu=pm.math.exp(log_rate[z]), observed=COUNTS)
    idata = _sample(model, 1500, seed=4)
    assert_partition_gof(thinned_labels(idata, 2, chains=2), problem.exact(PRIORS["dp"]))


# --------------------------------------------------------------------------- bad input
def test_cluster_parameter_needs_a_partition_variable():
    with pm.Model(), pytest.raises(TypeError, match="partition of ClusterParameter 'mu'"):
        w = pm.Normal("w", 0, 1, shape=3)
        psm.ClusterParameter("mu", pm.Normal.dist(0, 1), partition=w)


def test_capacity_is_checked():
    with pm.Model():
        z = psm.DirichletProcess("z", alpha=1.0, n=4)
        with pytest.raises(ValueError, match=r"capacity of ClusterParameter 'mu' must lie in"):
            psm.ClusterParameter("mu", pm.Normal.dist(0, 1), partition=z, capacity=9)
        psm.ClusterParameter("mu", pm.Normal.dist(0, 1), partition=z, capacity=3)
        with pytest.raises(ValueError, match="share one capacity"):
            psm.ClusterParameter("s", pm.HalfNormal.dist(1), partition=z, capacity=2)
    with pm.Model():
        z = psm.DirichletProcess("z", alpha=1.0, n=4, initval=np.array([0, 1, 2, 3]))
        with pytest.raises(ValueError, match="capacity=3"):
            psm.ClusterParameter("mu", pm.Normal.dist(0, 1), partition=z, capacity=3)


def test_base_distribution_must_be_sampleable():
    with pm.Model():
        z = psm.DirichletProcess("z", alpha=1.0, n=4)
        with pytest.raises(TypeError, match="unregistered PyMC distribution"):
            psm.ClusterParameter("mu", np.zeros(3), partition=z)
        with pytest.raises(TypeError, match="cannot be sampled"):
            psm.ClusterParameter("mu", pm.CustomDist.dist(0.0, logp=lambda v, m: -v**2),
                                 partition=z)


@pytest.mark.parametrize("likelihood", ["z_as_mean", "unindexed", "other_index"])
def test_likelihood_must_index_by_the_partition(likelihood):
    from pymc_splitmerge.steps import SlotGibbsStep

    with pm.Model() as model:
        z = psm.DirichletProcess("z", alpha=1.0, n=5)
        mu = psm.ClusterParameter("mu", pm.Normal.dist(0, 1), partition=z, capacity=3)
        mean = {"z_as_mean": mu[z] + z, "unindexed": mu.sum(),
                "other_index": mu[np.array([0, 1, 2, 0, 1])]}[likelihood]
        pm.Normal("y", mu=mean, sigma=1, observed=NORMAL_Y)
    with pytest.raises(ValueError, match="cluster parameter|partition 'z' other than"):
        SlotGibbsStep(z, model=model)


def test_start_beyond_capacity_is_refused_before_the_first_draw():
    from pymc.exceptions import SamplingError

    model = _conjugate_model("dp", capacity=2)
    with model:
        step = psm.SlotGibbsStep(model["z"])
    point = model.initial_point()
    point["z"] = np.array([0, 1, 2, 0, 1], dtype=point["z"].dtype)
    with pytest.raises(SamplingError, match="capacity=2"):
        step.step(point)


def test_a_chain_filling_the_capacity_stops_with_an_error_naming_it():
    from pymc.exceptions import SamplingError

    y = np.array([-30.0, 0.0, 30.0, 60.0, 90.0])  # far apart: every point wants its own
    with pm.Model() as model:
        z = psm.DirichletProcess("z", alpha=1.0, n=y.size)
        theta = psm.ClusterParameter("theta", pm.Normal.dist(30, 50), partition=z, capacity=2)
        pm.Normal("y", mu=theta[z], sigma=0.5, observed=y)
    with model, pytest.raises(SamplingError, match="capacity=2"):
        pm.sample(50, tune=0, chains=1, cores=1, random_seed=1, progressbar=False,
                  compute_convergence_checks=False)


def test_trace_analysis_posterior_predictive_and_components():
    y = np.array([-3.1, -2.8, -3.3, 2.9, 3.2, 3.0])
    with pm.Model() as model:
        z = psm.DirichletProcess("z", alpha=1.0, n=y.size)
        mu = psm.ClusterParameter("mu", pm.Normal.dist(0, 5), partition=z, capacity=6)
        beta = psm.ClusterParameter("beta", pm.MvNormal.dist(np.zeros(2), np.eye(2)),
                                    partition=z)
        pm.StudentT("y", nu=4, mu=mu[z] + beta[z, 1], sigma=1.0, observed=y)
    idata = _sample(model, 40, seed=2, chains=2)
    with model:
        predictive = pm.sample_posterior_predictive(idata, random_seed=1, progressbar=False)
    assert predictive["posterior_predictive"]["y"].shape == (2, 40, y.size)
    assert "n_clusters" in psm.summary(idata).index
    psm.sample_components(idata, model=model)
    components = idata["component_parameters"]
    labels = np.asarray(idata["labels"]["z"].values)
    chain, draw = 1, 39
    first_slot = labels[chain, draw, 0]
    np.testing.assert_allclose(components["mu"].values[chain, draw, 0],
                               idata["posterior"]["mu"].values[chain, draw, first_slot])
    np.testing.assert_allclose(components["beta"].values[chain, draw, 0],
                               idata["posterior"]["beta"].values[chain, draw, first_slot])
    assert components["cluster_size"].values[chain, draw].sum() == y.size


def test_posterior_predictive_is_quiet_about_the_slot_placement_term():
    """PyMC warns that Potentials are ignored in predictive draws; the package's own
    slot-placement term is a prior term of (labels, slots), which the draws take from the
    trace, so it must not trigger the warning -- while a user's own Potential still does."""
    import warnings

    model = _conjugate_model("dp")
    with model:
        idata = pm.sample(5, tune=0, chains=1, cores=1, random_seed=1, progressbar=False,
                          compute_convergence_checks=False)

    def potential_warnings(model):
        with warnings.catch_warnings(record=True) as caught, model:
            warnings.simplefilter("always")
            pm.sample_posterior_predictive(idata, random_seed=1, progressbar=False)
        return [w for w in caught if "Potentials" in str(w.message)]

    assert potential_warnings(model) == []
    with model:
        pm.Potential("user_term", -0.5 * model["theta"].sum() ** 2)
    assert len(potential_warnings(model)) == 1  # negative control: PyMC's warning kept


# --------------------------------------------------------------------------- split-merge with
# proposed parameters (Laplace proposals, MH on the joint of labels and parameters)
class ScalarSlotModel:
    """A :func:`parameter_split_merge` slot model for a one-parameter ``Problem`` (plain
    numpy; derivatives by central differences -- any deterministic proposal is exact)."""

    dimension = 1

    def __init__(self, problem, capacity):
        self.problem, self.capacity, self.n_points = problem, capacity, problem.y.size

    def log_likelihood(self, values):
        return self.problem.log_likelihood(values[:, 0])

    def log_prior(self, values):
        return self.problem.base_logpdf(values[:, 0])

    def draw_prior(self, rng):
        return np.array([[self.problem.base_draw(rng)] for _ in range(self.capacity)])

    def _objective(self, theta, weights):
        return self.problem.base_logpdf(theta) + (weights * self.problem.log_likelihood(theta)
                                                  ).sum(axis=0)

    def fit_terms(self, values, weights):
        theta, h = values[:, 0], 1e-4
        at, up, down = (self._objective(theta + shift, weights) for shift in (0.0, h, -h))
        return at, ((up - down) / (2 * h))[:, None], ((up - 2 * at + down) / h**2)[:, None, None]


class LabelScalarSlotModel(ScalarSlotModel):
    """``ScalarSlotModel`` with the labels' form of the fit terms (every slot at once, each
    point at its own label), which :func:`laplace_parameter_update` then uses."""

    def label_fit_terms(self, values, labels):
        weights = np.zeros((self.n_points, self.capacity))
        weights[np.arange(self.n_points), labels] = 1.0
        return self.fit_terms(values, weights)


def _parameter_split_merge_labels(problem, prior, capacity, num_samples, seed, drop=None,
                                  n_moves=3):
    rng = np.random.default_rng(seed)
    exact = problem.exact(prior, capacity)
    log_v, log_w = prior.tables(problem.y.size)
    model = ScalarSlotModel(problem, capacity)
    out, moves = [], []
    for labels, theta in slot_state_draws(exact, capacity, problem.draw_parameter,
                                          num_samples, rng):
        values = theta[:, None].copy()
        sizes = slot_sizes(labels, capacity)
        log_likelihood = model.log_likelihood(values)
        for _ in range(n_moves):
            info = parameter_split_merge(model, values, labels, sizes, log_v, log_w, rng,
                                         log_likelihood=log_likelihood, _drop=drop)
            moves.append((info.move, info.accepted))
        np.testing.assert_array_equal(sizes, slot_sizes(labels, capacity))
        # the two changed columns are updated in place when a move is accepted
        np.testing.assert_array_equal(log_likelihood, model.log_likelihood(values))
        out.append(labels.copy())
    return np.array(out), exact, np.array(moves)


@pytest.mark.parametrize(("problem_name", "prior_name"),
                         [("normal", name) for name in PRIORS]
                         + [("student_t", "dp"), ("poisson", "py")])
def test_parameter_split_merge_one_step_invariance(problem_name, prior_name):
    problem = PROBLEMS[problem_name]
    labels, exact, moves = _parameter_split_merge_labels(
        problem, PRIORS[prior_name], _capacity(prior_name, problem.y.size), 1500,
        seed=_seed(problem_name, prior_name, "laplace"))
    for move in (1, 2):  # both directions proposed and accepted
        assert moves[moves[:, 0] == move, 1].mean() > 0.02
    assert_partition_gof(labels, exact)


def test_parameter_split_merge_negative_control_without_the_placement_factor():
    """Dropping the slot placement (C-K)!/C! from the target ratio must fail."""
    problem = PROBLEMS["normal"]
    labels, exact, _ = _parameter_split_merge_labels(problem, PRIORS["dp"], 5, 1500, seed=3,
                                                     drop="placement")
    assert chisquare_partitions(labels, exact).pvalue < GOF_PVALUE_THRESHOLD


@pytest.mark.parametrize("problem_name", ["normal", "student_t"])
def test_parameter_split_merge_negative_control_without_the_soft_split_proposal(problem_name):
    """Leaving the soft (two-component EM) split's parameter proposal densities
    ``q_a(theta_k') q_b(theta_s')`` out of the ratio must fail."""
    labels, exact, _ = _parameter_split_merge_labels(PROBLEMS[problem_name], PRIORS["dp"], 5,
                                                     1500, seed=4, drop="soft_split_proposal")
    assert chisquare_partitions(labels, exact).pvalue < GOF_PVALUE_THRESHOLD


def test_parameter_slot_model_of_a_two_parameter_likelihood():
    """The compiled slot model (Student-t with location and scale per cluster): its log
    likelihood, log prior (transformed scale) and Newton terms against scipy / differences."""
    from pymc_splitmerge.steps.cluster_slots import SlotLikelihood

    y = np.array([-3.1, -2.8, 2.9, 3.2, 3.0])
    with pm.Model() as model:
        z = psm.DirichletProcess("z", alpha=1.0, n=y.size)
        mu = psm.ClusterParameter("mu", pm.Normal.dist(0, 5), partition=z, capacity=3)
        sigma = psm.ClusterParameter("sigma", pm.HalfNormal.dist(2.0), partition=z)
        pm.StudentT("y", nu=4, mu=mu[z], sigma=sigma[z], observed=y)
    slot_model = SlotLikelihood(z, model).parameter_model()
    point = model.initial_point()
    point["mu"] = np.array([-3.0, 0.5, 3.0])
    point["sigma_log__"] = np.log([0.5, 1.0, 2.0])
    values = slot_model.bind(point)
    assert values.shape == (3, 2) and slot_model.dimension == 2
    np.testing.assert_allclose(slot_model.log_likelihood(values),
                               t.logpdf(y[:, None], 4, values[:, 0], np.exp(values[:, 1])))
    sigma_values = np.exp(values[:, 1])
    np.testing.assert_allclose(slot_model.log_prior(values),
                               norm.logpdf(values[:, 0], 0, 5)
                               + norm.logpdf(sigma_values, 0, 2) + np.log(2) + values[:, 1])
    weights = np.zeros((5, 3))
    weights[:2, 0] = weights[2:, 2] = weights[0, 1] = 1.0
    objective, gradient, hessian = slot_model.fit_terms(values, weights)
    np.testing.assert_allclose(objective, slot_model.log_prior(values) + (
        weights * slot_model.log_likelihood(values)).sum(axis=0))
    h = 1e-5
    for c in range(2):
        shifted = values.copy()
        shifted[:, c] += h
        up, up_gradient, _ = slot_model.fit_terms(shifted, weights)
        shifted[:, c] -= 2 * h
        down, down_gradient, _ = slot_model.fit_terms(shifted, weights)
        np.testing.assert_allclose(gradient[:, c], (up - down) / (2 * h), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(hessian[:, :, c], (up_gradient - down_gradient) / (2 * h),
                                   rtol=1e-4, atol=1e-5)
    # the columns of a split-merge's changed slots: fewer than W vectors, in any order
    np.testing.assert_allclose(slot_model.fit_log_likelihood(values[[2, 0]]),
                               slot_model.log_likelihood(values)[:, [2, 0]], rtol=1e-12)
    # the labels' form: every slot at once, each point at its own label (capacity 3 = W)
    labels = np.array([0, 0, 2, 2, 1])
    one_hot = np.zeros((5, 3))
    one_hot[np.arange(5), labels] = 1.0
    for got, expected in zip(slot_model.label_fit_terms(values, labels),
                             slot_model.fit_terms(values, one_hot), strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


def test_parameter_split_merge_separates_two_groups_started_together():
    """Two well-separated groups in one cluster: the parameter split-merge, each followed by
    an Algorithm 8 sweep as in the step, splits them within a few updates."""
    from pymc_splitmerge.kernels.cluster_slots import parameter_split_merge
    from pymc_splitmerge.steps.cluster_slots import SlotLikelihood

    y = np.concatenate([np.full(6, -4.0), np.full(6, 4.0)]) + np.linspace(-0.3, 0.3, 12)
    with pm.Model() as model:
        z = psm.DirichletProcess("z", alpha=1.0, n=y.size)
        mu = psm.ClusterParameter("mu", pm.Normal.dist(0, 10), partition=z, capacity=4)
        sigma = psm.ClusterParameter("sigma", pm.HalfNormal.dist(1.0), partition=z)
        pm.Normal("y", mu=mu[z], sigma=sigma[z], observed=y)
    slot_model = SlotLikelihood(z, model).parameter_model()
    point = model.initial_point()
    point["mu"] = np.array([0.0, 20.0, -20.0, 30.0])
    point["sigma_log__"] = np.log([4.0, 0.1, 0.1, 0.1])
    labels = np.zeros(y.size, dtype=np.int64)
    values, sizes = slot_model.bind(point), slot_sizes(labels, 4)
    log_v, log_w = PRIORS["dp"].__class__(1.0).tables(y.size)
    rng = np.random.default_rng(0)
    accepted, first = 0, None
    for update in range(40):
        accepted += parameter_split_merge(slot_model, values, labels, sizes, log_v, log_w,
                                          rng).accepted
        slot_gibbs_sweeps(slot_model.log_likelihood(values), labels, sizes, log_v, log_w, rng)
        if first is None and not set(labels[:6]) & set(labels[6:]):
            first = update
    assert accepted >= 1 and first is not None and first < 20
    # no cluster holds points of both groups (a group may be split further: the posterior
    # of six points with a free scale puts mass on that too)
    assert not set(labels[:6]) & set(labels[6:])


# --------------------------------------------------------------------------- the occupied slots'
# parameters given the labels (Laplace independence proposals)
def _parameter_update_pit(problem_name, num_samples, seed, drop=None, n_updates=3,
                          slot_model=ScalarSlotModel):
    """Probability integral transforms of the occupied slots' parameters after
    ``n_updates`` updates from exact draws of ``(z, theta)``: uniform iff the update leaves
    every block posterior invariant.  Also the acceptance rate."""
    problem = PROBLEMS[problem_name]
    rng = np.random.default_rng(seed)
    prior, capacity = PRIORS["dp"], problem.y.size
    model = slot_model(problem, capacity)
    pit, proposed, accepted = [], 0, 0
    for labels, theta in slot_state_draws(problem.exact(prior, capacity), capacity,
                                          problem.draw_parameter, num_samples, rng):
        values = theta[:, None].copy()
        sizes = slot_sizes(labels, capacity)
        before_labels, empty = labels.copy(), sizes == 0
        for _ in range(n_updates):
            info = laplace_parameter_update(model, values, labels, sizes, rng, _drop=drop)
            proposed, accepted = proposed + info.n_proposed, accepted + info.n_accepted
        np.testing.assert_array_equal(labels, before_labels)  # the labels are not moved
        np.testing.assert_array_equal(values[empty, 0], theta[empty])  # nor empty slots
        np.testing.assert_allclose(info.log_likelihood, model.log_likelihood(values))
        pit.extend(problem.posterior_draw.cdf(np.flatnonzero(labels == s), values[s, 0])
                   for s in np.flatnonzero(sizes))
    return np.array(pit), accepted / proposed


@pytest.mark.parametrize("slot_model", [ScalarSlotModel, LabelScalarSlotModel])
@pytest.mark.parametrize("problem_name", ["student_t", "poisson"])
def test_laplace_parameter_update_leaves_the_block_posteriors_invariant(problem_name,
                                                                        slot_model):
    """Non-Gaussian block posteriors (Student-t location, Poisson log-rate): the proposals
    are not exact, so the acceptance ratio matters (acceptance strictly below one).  Fits by
    weight columns and by labels (all blocks at once)."""
    pit, acceptance = _parameter_update_pit(problem_name, 400, seed=21, slot_model=slot_model)
    assert 0.2 < acceptance < 0.99
    assert kstest(pit, "uniform").pvalue > GOF_PVALUE_THRESHOLD


@pytest.mark.parametrize("slot_model", [ScalarSlotModel, LabelScalarSlotModel])
def test_laplace_parameter_update_negative_control_without_the_proposal_density(slot_model):
    """Treating the independence proposal as symmetric must fail the same test."""
    pit, _ = _parameter_update_pit("student_t", 400, seed=21, drop="proposal",
                                   slot_model=slot_model)
    assert kstest(pit, "uniform").pvalue < GOF_PVALUE_THRESHOLD


def test_pm_sample_with_parameter_updates_instead_of_nuts():
    """``n_parameter_updates=1``: the step owns the cluster parameters (no NUTS) and the
    chain has the exact partition law (Poisson log-rate, non-conjugate)."""
    problem = PROBLEMS["poisson"]
    with pm.Model() as model:
        z = psm.DirichletProcess("z", alpha=PRIORS["dp"].alpha, n=COUNTS.size)
        log_rate = psm.ClusterParameter("log_rate", pm.Normal.dist(0.5, 1.5), partition=z)
        pm.Poisson("y", mu=pm.math.exp(log_rate[z]), observed=COUNTS)
        step = psm.SlotGibbsStep(z, n_split_merge=0, n_parameter_updates=1)
    assert [v.name for v in step.vars] == ["z", "log_rate"]
    idata = _sample(model, 500, step=[step], seed=6)
    stats = idata["sample_stats"]
    assert "tree_depth" not in stats  # no NUTS
    acceptance = np.asarray(stats["slot_parameter_update_acceptance"])
    assert 0.3 < np.nanmean(acceptance) < 0.999
    assert_partition_gof(thinned_labels(idata, 2, chains=2), problem.exact(PRIORS["dp"]))


class _FailingSlotModel(ScalarSlotModel):
    """Fit terms that never improve (NaN objective) or raise: counts the evaluations."""

    def __init__(self, problem, capacity, failure):
        super().__init__(problem, capacity)
        self.failure, self.evaluations = failure, 0

    def fit_terms(self, values, weights):
        self.evaluations += 1
        if self.failure == "raise":
            raise np.linalg.LinAlgError("Eigenvalues did not converge")
        objective, gradient, hessian = super().fit_terms(values, weights)
        if self.failure == "nan":
            return np.full_like(objective, np.nan), gradient, hessian
        return objective, gradient, np.full_like(hessian, np.inf)  # "inf_hessian"


@pytest.mark.parametrize("failure", ["nan", "raise", "inf_hessian"])
def test_parameter_split_merge_failed_fits_are_bounded_and_rejected(failure):
    """A fit that never improves or has no usable curvature costs a bounded number of
    evaluations (its proposal is then centred at the fixed start: still a deterministic
    proposal, hence exact); a fit that raises rejects the proposal, splits and merges alike."""
    problem = PROBLEMS["normal"]
    n_newton = 12
    log_v, log_w = PRIORS["dp"].tables(problem.y.size)
    rng = np.random.default_rng(5)
    moves = set()
    for start in ([0, 0, 0, 0, 0], [0, 1, 0, 1, 2]):
        model = _FailingSlotModel(problem, 5, failure)
        labels = np.array(start, dtype=np.int64)
        values = np.linspace(-1.0, 1.0, 5)[:, None]
        for _ in range(5):
            sizes = slot_sizes(labels, 5)
            before = model.evaluations
            info = parameter_split_merge(model, values.copy(), labels, sizes, log_v, log_w,
                                         rng, n_newton=n_newton)
            # the anchors' fit, the EM iterations and the final fit, each at most
            # 1 + (its Newton steps) * 25 evaluations
            assert model.evaluations - before <= (
                (1 + min(n_newton, 4) * 25) + SPLIT_EM_ITERATIONS * (1 + SPLIT_EM_NEWTON * 25)
                + (1 + n_newton * 25))
            moves.add(info.move)
            if failure == "raise":
                assert not info.accepted and info.log_accept_ratio == -np.inf
            if not info.accepted:
                np.testing.assert_array_equal(labels, start)
            np.testing.assert_array_equal(sizes, slot_sizes(labels, 5))
            labels = np.array(start, dtype=np.int64)
    assert moves == {1, 2}


def test_slot_step_runs_its_moves_on_one_blas_thread(monkeypatch):
    """The step's many tiny LAPACK calls run on one BLAS thread (several threads made each
    call wait for a scheduler slice on a loaded machine)."""
    from threadpoolctl import threadpool_info

    from pymc_splitmerge.steps import cluster_slots as step_module

    seen = []
    original = step_module.slot_gibbs_sweeps

    def recording(*args, **kwargs):
        seen.extend(pool["num_threads"] for pool in threadpool_info()
                    if pool["user_api"] == "blas")
        return original(*args, **kwargs)

    monkeypatch.setattr(step_module, "slot_gibbs_sweeps", recording)
    model = _conjugate_model("dp")
    with model:
        step = psm.SlotGibbsStep(model["z"], rng=1)
    point = model.initial_point()
    step.step(point)
    assert seen and set(seen) == {1}


def test_alpha_of_a_cluster_parameter_model_gets_the_exact_concentration_step():
    """Given the labels, alpha's conditional involves only the block sizes: ConcentrationGibbs
    (assigned by competence) keeps p(alpha | K) of slot labels."""
    from pymc.step_methods.compound import Competence
    from scipy import special, stats

    with pm.Model() as model:
        alpha = pm.Gamma("alpha", 2.0, 1.0)
        z = psm.DirichletProcess("z", alpha=alpha, n=NORMAL_Y.size)
        theta = psm.ClusterParameter("theta", pm.Normal.dist(0, 1.5), partition=z, capacity=5)
        pm.Normal("y", mu=theta[z], sigma=NOISE, observed=NORMAL_Y)
        assert psm.ConcentrationGibbs.competence(alpha) == Competence.IDEAL
        step = psm.ConcentrationGibbs(alpha, rng=3)
    point = model.initial_point()
    point["z"] = np.array([4, 4, 1, 3, 3], dtype=point["z"].dtype)  # K = 3 blocks
    grid = np.exp(np.linspace(np.log(1e-6), np.log(100.0), 20001))
    log_density = (stats.gamma.logpdf(grid, 2.0) + 3 * np.log(grid) + special.gammaln(grid)
                   - special.gammaln(grid + NORMAL_Y.size))
    density = np.exp(log_density - log_density.max())
    cdf = np.concatenate([[0.0], np.cumsum(0.5 * (density[1:] + density[:-1]) * np.diff(grid))])
    cdf /= cdf[-1]
    rng = np.random.default_rng(4)
    draws = []
    for value in np.interp(rng.random(1500), cdf, grid):
        point["alpha_log__"] = np.log(value)
        new_point, _ = step.step(point)
        draws.append(np.exp(new_point["alpha_log__"]))
    assert stats.kstest(draws, lambda v: np.interp(v, grid, cdf)).pvalue > 1e-3
    # negative control: the same test against the conditional of K = 2 blocks rejects
    log_wrong = log_density - np.log(grid)
    wrong = np.exp(log_wrong - log_wrong.max())
    wrong_cdf = np.concatenate([[0.0], np.cumsum(0.5 * (wrong[1:] + wrong[:-1])
                                                 * np.diff(grid))])
    wrong_cdf /= wrong_cdf[-1]
    assert stats.kstest(draws, lambda v: np.interp(v, grid, wrong_cdf)).pvalue < 1e-3


@pytest.mark.parametrize("parameter_moves", [False, True])
def test_cores_one_and_two_give_the_same_draws(parameter_moves):
    """Also with the parameter moves, whose fits each worker process compiles itself."""
    from pymc_splitmerge.analysis._arviz_compat import posterior_with_labels

    results = []
    for cores in (1, 2):
        with pm.Model():
            alpha = pm.Gamma("alpha", 2.0, 1.0)
            z = psm.DirichletProcess("z", alpha=alpha, n=NORMAL_Y.size)
            theta = psm.ClusterParameter("theta", pm.Normal.dist(0, 1.5), partition=z,
                                         capacity=5)
            pm.Normal("y", mu=theta[z], sigma=NOISE, observed=NORMAL_Y)
            step = ([psm.SlotGibbsStep(z, n_parameter_split_merge=1, n_parameter_updates=1)]
                    if parameter_moves else None)
            results.append(pm.sample(draws=10, tune=10, chains=2, cores=cores, random_seed=11,
                                     step=step, progressbar=False,
                                     compute_convergence_checks=False))
    sequential, parallel = (posterior_with_labels(result) for result in results)
    for name in ("z", "theta", "alpha"):
        np.testing.assert_array_equal(sequential[name].values, parallel[name].values)
    assert not np.array_equal(sequential["theta"].values[0], sequential["theta"].values[1])


def test_fit_functions_fall_back_to_the_default_mode_with_a_warning(monkeypatch):
    """A backend that cannot compile the parameter moves' functions: a warning naming it and
    a working function in PyTensor's default mode, never a silent change."""
    import warnings

    import pytensor.tensor as pt

    import pymc_splitmerge.steps.cluster_slots as slot_steps

    x = pt.dvector("x")
    monkeypatch.setattr(slot_steps, "FIT_COMPILE_MODE", "NO_SUCH_MODE")
    with pytest.warns(RuntimeWarning, match="NO_SUCH_MODE"):
        function = slot_steps._compile_for_many_calls([x], 2.0 * x)
    np.testing.assert_array_equal(function(np.array([1.0, 2.0])), [2.0, 4.0])
    monkeypatch.setattr(slot_steps, "FIT_COMPILE_MODE", "FAST_COMPILE")  # a mode that works
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        function = slot_steps._compile_for_many_calls([x], 2.0 * x)
    np.testing.assert_array_equal(function(np.array([1.0, 2.0])), [2.0, 4.0])
