r"""Non-conjugate mixtures: cluster parameters as PyMC variables against PyMC's truncated
stick-breaking model with NUTS.

Run ``python benchmarks/nonconjugate.py`` (reduced default: n = 300 / 500, 300 draws per
chain, 2 chains; a few minutes on two cores) or ``--n-student 2000 --n-poisson 5000 --draws
2000 --chains 4`` (the full sizes).  The script sets ``OPENBLAS_NUM_THREADS=1`` (unless set)
for every contender: NUTS on small vector parameters loses most of its time to BLAS thread
hand-offs on a busy machine.  ``--reference-draws R`` adds a long run of ``alg8+laplace``
(R draws per chain, ``--reference-chains`` chains) and the distance of every contender's
posterior means of K and the largest fraction from it in Monte Carlo standard errors
(``sqrt(mcse^2 + mcse_ref^2)``).

Problems (training data, 25 % more points held out, DP(alpha ~ Gamma(1, 1)) prior):

* ``student_t``: a DP mixture of Student-t clusters (nu = 4), three true clusters at -6, 0, 5
  with scales 1, 0.6, 1.5; cluster parameters ``mu ~ Normal(0, 5)``,
  ``sigma ~ Gamma(2, 2)`` per cluster;
* ``poisson``: a mixture of Poisson regressions with log link, ``y ~ Poisson(exp(b0 + b1 x))``,
  three true clusters; ``beta ~ MvNormal(0, 2 I)`` per cluster.

Contenders (all through ``pm.sample``, ``cores=1``, the same draws and tuning;
``--contenders`` picks some):

* ``alg8``: ``psm.SlotGibbsStep(z, n_split_merge=0, n_parameter_split_merge=0)``
  (Algorithm 8 in slot form) + NUTS on the cluster parameters, the exact concentration
  update on alpha;
* ``alg8+laplace``: ``psm.SlotGibbsStep(z, n_split_merge=0, n_parameter_updates=1)``:
  Algorithm 8 and, instead of NUTS, one independence Metropolis-Hastings update of every
  occupied slot's parameters from the Laplace approximation of its conditional posterior,
  and 10 split-merge updates of the labels given the parameters (cheap: O(cluster size));
* ``laplace+psm``: ``alg8+laplace`` and one split-merge with Laplace-proposed parameters
  (``n_parameter_split_merge=1``) per draw;
* ``laplace+psm3``: the same with three parameter split-merge updates per draw;
* ``laplace+psm10``: the same with ten parameter split-merge updates per draw;
* ``alg8+sm``: ``psm.SlotGibbsStep(z, n_parameter_split_merge=1)`` (one split-merge update
  with proposed parameters, one of the labels and one sweep per draw), the same other steps;
* ``laplace+psm3+cp20``: ``laplace+psm3`` and 20 split-merge updates of the labels with
  cluster-point anchors (``n_cluster_point_split_merge=20``: ``j`` in a uniform cluster, ``i``
  any other point) per draw;
* ``laplace+psm3+cp50x3``: ``laplace+psm3``, 50 cluster-point split-merge updates and three
  Algorithm 8 sweeps per draw; ``laplace+psm1+cp50x3``: the same with one parameter
  split-merge per draw; ``laplace+psm1+cp50x3+sm50``: that with 50 label split-merge
  updates with uniform anchors per draw instead of 10 (run these by name with
  ``--contenders``);
* ``pymc_sb``: PyMC's truncated stick-breaking mixture (K = 20 components, labels
  marginalised with ``pm.Mixture``), NUTS on everything; the labels of a draw are drawn from
  ``p(z | weights, theta, y)`` to compute the partition quantities.

``--stuck`` runs instead the case where one-point moves get stuck: two well-separated
Normal groups (n/2 points at -5 and n/2 at +5, sd 0.5), Normal likelihood with per-cluster
``mu ~ Normal(0, 10)`` and ``sigma ~ HalfNormal(5)``, DP(alpha = 1), every chain started
with all points in one cluster.  Contenders: ``alg8`` (Algorithm 8 alone), ``alg8+label_sm``
(+ the split-merge of labels given the slots' parameters, new cluster from an empty slot's
base draw), ``alg8+param_sm`` (+ the split-merge with Laplace-proposed parameters) and
``all`` (the three moves); NUTS on the cluster parameters.  ``--stuck-dimension 2``: the
groups in 2-D at -(2.5, 2.5) and +(2.5, 2.5), ``mu ~ MvNormal(0, 100 I)`` per cluster and one
scale ``sigma`` per cluster.
Columns: the fraction of the kept draws in which the two groups are separated, the first
kept draw that separates them per chain (-1: never; ``--stuck-tune`` tuning draws before),
the mean number of clusters and seconds.

Columns: ``K`` posterior mean number of clusters; ``largest`` posterior mean of the largest
cluster's fraction; ``ESS/s`` (bulk ESS per second of sampling, tuning included) of both,
and ``ESS/cpu`` per second of the process's CPU time (``cpu s``: comparable across machine
loads, where wall seconds are not);
``lpd`` held-out log predictive density per point (``log mean_draws p(y*_j | draw)``
averaged over held-out points; for the slot models the predictive of a draw is
``sum_k n_k/(n + alpha) f(y* | theta_k) + alpha/(n + alpha) mean_{empty s} f(y* | theta_s)``,
the empty slots holding fresh base-distribution draws).
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy loads OpenBLAS

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from scipy import stats
from scipy.special import logsumexp

import pymc_splitmerge as psm
from pymc_splitmerge.analysis._arviz_compat import ess as arviz_ess
from pymc_splitmerge.analysis._arviz_compat import posterior_with_labels

STUDENT_CENTRES, STUDENT_SCALES = np.array([-6.0, 0.0, 5.0]), np.array([1.0, 0.6, 1.5])


def student_data(n, rng, return_labels=False):
    labels = rng.choice(3, size=n, p=[0.5, 0.3, 0.2])
    y = STUDENT_CENTRES[labels] + STUDENT_SCALES[labels] * rng.standard_t(4, size=n)
    return (y, labels) if return_labels else (y, None)


def poisson_data(n, rng):
    beta = np.array([[0.5, 1.0], [2.5, -0.5], [1.0, 0.0]])
    labels = rng.choice(3, size=n, p=[0.4, 0.35, 0.25])
    x = rng.uniform(-1.5, 1.5, size=n)
    return rng.poisson(np.exp(beta[labels, 0] + beta[labels, 1] * x)), x


def log_f(problem, y, x, parameters):
    """log f(y_j | theta_k): array (n, K) for parameters of K clusters."""
    if problem == "student_t":
        mu, sigma = parameters
        return stats.t.logpdf(y[:, None], 4, mu[None, :], sigma[None, :])
    (beta,) = parameters
    return stats.poisson.logpmf(y[:, None], np.exp(beta[None, :, 0] + beta[None, :, 1] * x[:, None]))


def slot_model(problem, y, x, capacity):
    with pm.Model() as model:
        alpha = pm.Gamma("alpha", 1.0, 1.0)
        z = psm.DirichletProcess("z", alpha=alpha, n=len(y))
        if problem == "student_t":
            mu = psm.ClusterParameter("mu", pm.Normal.dist(0.0, 5.0), partition=z,
                                      capacity=capacity)
            sigma = psm.ClusterParameter("sigma", pm.Gamma.dist(2.0, 2.0), partition=z)
            pm.StudentT("y", nu=4, mu=mu[z], sigma=sigma[z], observed=y)
        else:
            beta = psm.ClusterParameter("beta", pm.MvNormal.dist(np.zeros(2), 2 * np.eye(2)),
                                        partition=z, capacity=capacity)
            pm.Poisson("y", mu=pm.math.exp(beta[z, 0] + beta[z, 1] * x), observed=y)
    return model


def stick_breaking_model(problem, y, x, components=20):
    with pm.Model() as model:
        alpha = pm.Gamma("alpha", 1.0, 1.0)
        v = pm.Beta("v", 1.0, alpha, shape=components - 1)
        remaining = pm.math.concatenate([[1.0], pt.cumprod(1 - v)])
        weights = pm.Deterministic(
            "weights", pm.math.concatenate([v, [1.0]]) * remaining)
        if problem == "student_t":
            mu = pm.Normal("mu", 0.0, 5.0, shape=components)
            sigma = pm.Gamma("sigma", 2.0, 2.0, shape=components)
            pm.Mixture("y", w=weights, comp_dists=pm.StudentT.dist(nu=4, mu=mu, sigma=sigma),
                       observed=y)
        else:
            beta = pm.MvNormal("beta", np.zeros(2), 2 * np.eye(2), shape=(components, 2))
            rate = pm.math.exp(beta[None, :, 0] + beta[None, :, 1] * x[:, None])
            pm.Mixture("y", w=weights, comp_dists=pm.Poisson.dist(mu=rate), observed=y)
    return model


def _posterior(idata, name):
    return np.asarray(posterior_with_labels(idata)[name].values)


def partition_quantities(labels):
    """(K, largest fraction) per draw, arrays (chain, draw)."""
    chains, draws, n = labels.shape
    k = np.empty((chains, draws))
    largest = np.empty((chains, draws))
    for c in range(chains):
        for d in range(draws):
            counts = np.bincount(labels[c, d])
            k[c, d] = np.count_nonzero(counts)
            largest[c, d] = counts.max() / n
    return k, largest


def slot_summaries(problem, idata, y, x, y_test, x_test):
    labels = _posterior(idata, "z").astype(np.int64)
    alpha = _posterior(idata, "alpha")
    names = ["mu", "sigma"] if problem == "student_t" else ["beta"]
    params = [_posterior(idata, name) for name in names]
    chains, draws, n = labels.shape
    log_pred = []
    for c in range(chains):
        for d in range(draws):
            counts = np.bincount(labels[c, d], minlength=params[0].shape[2])
            values = log_f(problem, y_test, x_test, [p[c, d] for p in params])
            occupied = counts > 0
            log_w = np.full(counts.size, -np.inf)
            log_w[occupied] = np.log(counts[occupied] / (n + alpha[c, d]))
            n_empty = np.count_nonzero(~occupied)
            if n_empty:
                log_w[~occupied] = np.log(alpha[c, d] / (n + alpha[c, d]) / n_empty)
            log_pred.append(logsumexp(values + log_w[None, :], axis=1))
    k, largest = partition_quantities(labels)
    return k, largest, np.asarray(log_pred)


def stick_breaking_summaries(problem, idata, y, x, y_test, x_test, rng):
    weights = _posterior(idata, "weights")
    names = ["mu", "sigma"] if problem == "student_t" else ["beta"]
    params = [_posterior(idata, name) for name in names]
    chains, draws, _ = weights.shape
    labels = np.empty((chains, draws, len(y)), dtype=np.int64)
    log_pred = []
    for c in range(chains):
        for d in range(draws):
            draw = [p[c, d] for p in params]
            log_w = np.log(weights[c, d])
            logits = log_f(problem, y, x, draw) + log_w[None, :]
            probabilities = np.exp(logits - logsumexp(logits, axis=1, keepdims=True))
            cumulative = probabilities.cumsum(axis=1)
            labels[c, d] = (rng.random((len(y), 1)) > cumulative).sum(axis=1)
            log_pred.append(logsumexp(log_f(problem, y_test, x_test, draw) + log_w[None, :],
                                      axis=1))
    k, largest = partition_quantities(np.minimum(labels, weights.shape[2] - 1))
    return k, largest, np.asarray(log_pred)


def ess(values):
    """Bulk ESS of an array (chain, draw), computed the same way for every contender."""
    return arviz_ess(values, method="bulk")


def mcse(values):
    """Monte Carlo standard error of the mean: sd / sqrt(ESS of the mean)."""
    values = np.asarray(values, dtype=np.float64)
    return float(values.std() / np.sqrt(arviz_ess(values, method="mean")))


CONTENDERS = ("alg8", "alg8+laplace", "laplace+psm", "laplace+psm3", "laplace+psm10", "alg8+sm",
              "pymc_sb")


def _sample_contender(problem, contender, y, x, y_test, x_test, draws, tune, chains, seed,
                      capacity, rng):
    """Run one contender; returns (seconds, K (chain, draw), largest, log_pred, acceptance)."""
    if contender == "pymc_sb":
        model = stick_breaking_model(problem, y, x)
        step = None
    else:
        model = slot_model(problem, y, x, capacity)
        with model:
            step = [psm.SlotGibbsStep(model["z"], **CONTENDER_MOVES[contender])]
    with model:
        start, start_cpu = time.perf_counter(), time.process_time()
        idata = pm.sample(draws, tune=tune, chains=chains, cores=1, step=step,
                          random_seed=seed, progressbar=False,
                          compute_convergence_checks=False)
        seconds, cpu = time.perf_counter() - start, time.process_time() - start_cpu
    if contender == "pymc_sb":
        k, largest, log_pred = stick_breaking_summaries(problem, idata, y, x, y_test, x_test,
                                                        rng)
        depth = np.asarray(idata["sample_stats"]["tree_depth"]).mean()
    else:
        k, largest, log_pred = slot_summaries(problem, idata, y, x, y_test, x_test)
        stats = idata["sample_stats"]
        depth = np.asarray(stats["tree_depth"]).mean() if "tree_depth" in stats else np.nan
    return seconds, cpu, k, largest, log_pred, depth


def run(problem, n, draws, chains, seed, capacity, contenders=CONTENDERS, tune=None,
        reference_draws=0, reference_chains=4):
    rng = np.random.default_rng(seed)
    generate = student_data if problem == "student_t" else poisson_data
    y_all, x_all = generate(n + n // 4, rng)
    y, y_test = y_all[:n], y_all[n:]
    x, x_test = (None, None) if x_all is None else (x_all[:n], x_all[n:])
    tune = draws if tune is None else tune
    print(f"\n{problem}: n = {n}, {chains} chains x {draws} draws (+{tune} tuning), "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}")
    print(f"{'contender':<21}{'seconds':>9}{'cpu s':>8}{'K':>7}{'mcse':>7}{'ESS/s K':>9}"
          f"{'ESS/cpu K':>10}{'largest':>9}{'mcse':>7}{'ESS/s lg':>9}{'ESS/cpu lg':>11}"
          f"{'lpd':>9}{'depth':>7}  K per chain  (load average {os.getloadavg()[0]:.1f})",
          flush=True)
    rows = []
    for contender in contenders:  # each row as soon as it is measured
        seconds, cpu, k, largest, log_pred, depth = _sample_contender(
            problem, contender, y, x, y_test, x_test, draws, tune, chains, seed, capacity, rng)
        lpd = float(np.mean(logsumexp(log_pred, axis=0) - np.log(len(log_pred))))
        rows.append((contender, k, largest))
        print(f"{contender:<21}{seconds:>9.1f}{cpu:>8.1f}{k.mean():>7.3f}{mcse(k):>7.3f}"
              f"{ess(k) / seconds:>9.3f}{ess(k) / cpu:>10.3f}{largest.mean():>9.3f}"
              f"{mcse(largest):>7.3f}{ess(largest) / seconds:>9.3f}{ess(largest) / cpu:>11.3f}"
              f"{lpd:>9.3f}{depth:>7.2f}  K per chain "
              f"{np.round(k.mean(axis=1), 2).tolist()}  largest per chain "
              f"{np.round(largest.mean(axis=1), 3).tolist()}  load average "
              f"{os.getloadavg()[0]:.1f}", flush=True)
    if reference_draws:
        _, _, k_ref, largest_ref, _, _ = _sample_contender(
            problem, "alg8+laplace", y, x, y_test, x_test, reference_draws, tune,
            reference_chains, seed + 1000, capacity, rng)
        print(f"reference (alg8+laplace, {reference_chains} chains x {reference_draws} draws): "
              f"K {k_ref.mean():.3f} +- {mcse(k_ref):.3f}, largest {largest_ref.mean():.3f} "
              f"+- {mcse(largest_ref):.3f}; distance in MCSE (sqrt(mcse^2 + mcse_ref^2)):")
        for name, k, largest in rows:
            z_k = (k.mean() - k_ref.mean()) / np.hypot(mcse(k), mcse(k_ref))
            z_l = (largest.mean() - largest_ref.mean()) / np.hypot(mcse(largest),
                                                                    mcse(largest_ref))
            print(f"  {name:<13} K {z_k:+.2f}  largest {z_l:+.2f}")


CONTENDER_MOVES = {
    "alg8": {"n_split_merge": 0, "n_parameter_split_merge": 0},
    "alg8+laplace": {"n_split_merge": 10, "n_parameter_updates": 1},
    "laplace+psm": {"n_split_merge": 10, "n_parameter_updates": 1,
                    "n_parameter_split_merge": 1},
    "laplace+psm3": {"n_split_merge": 10, "n_parameter_updates": 1,
                     "n_parameter_split_merge": 3},
    "laplace+psm10": {"n_split_merge": 10, "n_parameter_updates": 1,
                      "n_parameter_split_merge": 10},
    "alg8+sm": {"n_parameter_split_merge": 1},
    "laplace+psm3+cp20": {"n_split_merge": 10, "n_parameter_updates": 1,
                           "n_parameter_split_merge": 3, "n_cluster_point_split_merge": 20},
    "laplace+psm3+cp50x3": {"n_split_merge": 10, "n_parameter_updates": 1,
                             "n_parameter_split_merge": 3, "n_cluster_point_split_merge": 50,
                             "n_gibbs_sweeps": 3},
    "laplace+psm1+cp50x3": {"n_split_merge": 10, "n_parameter_updates": 1,
                             "n_parameter_split_merge": 1, "n_cluster_point_split_merge": 50,
                             "n_gibbs_sweeps": 3},
    "laplace+psm1+cp50x3+sm50": {"n_split_merge": 50, "n_parameter_updates": 1,
                                 "n_parameter_split_merge": 1,
                                 "n_cluster_point_split_merge": 50, "n_gibbs_sweeps": 3},
}


STUCK_MOVES = {
    "alg8": {"n_split_merge": 0, "n_parameter_split_merge": 0},
    "alg8+label_sm": {"n_split_merge": 1, "n_parameter_split_merge": 0},
    "alg8+param_sm": {"n_split_merge": 0, "n_parameter_split_merge": 1},
    "all": {"n_parameter_split_merge": 1},
}


def stuck_data(n, dimension, rng):
    """Two groups of n/2 points, sd 0.5: at -5 and +5 (1-D) or at -(2.5, 2.5) and
    +(2.5, 2.5) (2-D)."""
    group = np.repeat([0, 1], n // 2)
    if dimension == 1:
        return group, np.where(group == 0, -5.0, 5.0) + 0.5 * rng.standard_normal(group.size)
    centres = np.where(group[:, None] == 0, -2.5, 2.5) * np.ones((1, 2))
    return group, centres + 0.5 * rng.standard_normal((group.size, 2))


def stuck(n, draws, tune, chains, seed, capacity, contenders=tuple(STUCK_MOVES),
          dimension=1):
    """Two well-separated groups started in one cluster: who separates them, and when."""
    rng = np.random.default_rng(seed)
    group, y = stuck_data(n, dimension, rng)
    where = ("at -5 and +5" if dimension == 1 else "in 2-D at -(2.5, 2.5) and +(2.5, 2.5)")
    print(f"\nstuck: n = {group.size} (two groups {where}), {chains} chains x {draws} "
          f"draws (+{tune} tuning), all points started in one cluster")
    print(f"{'contender':<15}{'seconds':>9}{'first split':>13}{'separated':>11}{'K':>7}")
    for name in contenders:
        options = STUCK_MOVES[name]
        with pm.Model():
            z = psm.DirichletProcess("z", alpha=1.0, n=group.size)
            sigma = psm.ClusterParameter("sigma", pm.HalfNormal.dist(5.0), partition=z,
                                         capacity=capacity)
            if dimension == 1:
                mu = psm.ClusterParameter("mu", pm.Normal.dist(0.0, 10.0), partition=z)
                pm.Normal("y", mu=mu[z], sigma=sigma[z], observed=y)
            else:
                mu = psm.ClusterParameter("mu", pm.MvNormal.dist(np.zeros(2), 100 * np.eye(2)),
                                          partition=z)
                pm.Normal("y", mu=mu[z], sigma=sigma[z][:, None], observed=y)
            step = [psm.SlotGibbsStep(z, **options)]
            start = time.perf_counter()
            idata = pm.sample(draws, tune=tune, chains=chains, cores=1, step=step,
                              initvals={"z": np.zeros(group.size, dtype=np.int64)},
                              random_seed=seed, progressbar=False,
                              compute_convergence_checks=False)
            seconds = time.perf_counter() - start
        labels = _posterior(idata, "z").astype(np.int64)
        separated = np.array([[np.unique(row[group == 0]).size == 1
                               and np.unique(row[group == 1]).size == 1
                               and row[0] != row[-1] for row in chain] for chain in labels])
        first = [int(np.argmax(chain)) if chain.any() else -1 for chain in separated]
        k, _ = partition_quantities(labels)
        print(f"{name:<15}{seconds:>9.1f}{first!s:>13}{separated.mean():>11.2f}"
              f"{k.mean():>7.2f}")


class _WeightColumns:
    """A slot model seen without its ``label_fit_terms``: the Laplace update then fits the
    blocks by weight columns, ``fit_width`` slots per evaluation over all n points."""

    def __init__(self, model):
        self._model = model

    def __getattr__(self, name):
        if name == "label_fit_terms":
            raise AttributeError(name)
        return getattr(self._model, name)


def update_cost(n, capacity, repeats, seed):
    """Seconds per Laplace parameter update (every occupied slot), fits by labels (one pass
    over the points for all slots) against fits by weight columns, side by side."""
    from pymc_splitmerge.kernels.cluster_slots import laplace_parameter_update, slot_sizes
    from pymc_splitmerge.steps.cluster_slots import SlotLikelihood

    rng = np.random.default_rng(seed)
    y, truth = student_data(n + n // 4, rng, return_labels=True)
    y, truth = y[:n], truth[:n]
    model = slot_model("student_t", y, None, capacity)
    parameter_model = SlotLikelihood(model["z"], model).parameter_model()
    point = model.initial_point()
    point["z"] = truth.astype(point["z"].dtype)
    point["mu"] = np.resize(np.concatenate([STUDENT_CENTRES, np.zeros(capacity)]), capacity)
    values = parameter_model.bind(point)
    labels, sizes = truth.astype(np.int64), slot_sizes(truth, capacity)
    print(f"\nLaplace update of every occupied slot: Student-t n = {n}, capacity {capacity}, "
          f"{np.count_nonzero(sizes)} occupied slots, {repeats} updates per path (after one "
          "warm-up each, which compiles)")
    seconds = {}
    for name, target in (("labels", parameter_model),
                         ("weight columns", _WeightColumns(parameter_model))):
        laplace_parameter_update(target, values.copy(), labels, sizes, rng)
        accepted = proposed = 0
        start = time.perf_counter()
        for _ in range(repeats):
            info = laplace_parameter_update(target, values.copy(), labels, sizes, rng)
            accepted, proposed = accepted + info.n_accepted, proposed + info.n_proposed
        seconds[name] = (time.perf_counter() - start) / repeats
        print(f"  {name:<15} {1000 * seconds[name]:8.1f} ms / update, acceptance "
              f"{accepted / max(proposed, 1):.2f}", flush=True)
    print(f"  weight columns / labels: {seconds['weight columns'] / seconds['labels']:.1f}x")


def draw_cost(n, capacity, draws, seed, moves="laplace+psm3", modes=("NUMBA", None)):
    """Milliseconds per draw of ``SlotGibbsStep`` (``CONTENDER_MOVES[moves]``) by move (wall
    clock; the whole draw also in CPU time, which a loaded machine inflates less), from
    the true labels of the Student-t data, with the parameter moves' fits compiled in the
    numba mode and in PyTensor's default mode, interleaved draw by draw in one process; and
    the seconds of building the step and of its first two draws (which compile: run with a
    fresh ``PYTENSOR_FLAGS=base_compiledir=...`` and one mode per process for a first use)."""
    import pymc_splitmerge.steps.cluster_slots as slot_steps

    rng = np.random.default_rng(seed)
    y, truth = student_data(n, rng, return_labels=True)
    model = slot_model("student_t", y, None, capacity)
    timers = {}

    def timed(owner, name, label):
        function = getattr(owner, name)

        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            out = function(*args, **kwargs)
            timers[label] = timers.get(label, 0.0) + time.perf_counter() - start
            return out
        return wrapper

    parts = {"laplace_parameter_update": "Laplace parameter update",
             "parameter_split_merge": "parameter split-merge",
             "slot_split_merge": "label split-merge", "slot_gibbs_sweeps": "Algorithm 8 sweep"}
    originals = {name: getattr(slot_steps, name) for name in parts}
    for name, label in parts.items():
        setattr(slot_steps, name, timed(slot_steps, name, label))
    default_mode = slot_steps.FIT_COMPILE_MODE
    steps, points, seconds, by_part, cpu_seconds = {}, {}, {}, {}, {}
    for mode in modes:
        slot_steps.FIT_COMPILE_MODE = mode
        start = time.perf_counter()
        with model:
            step = psm.SlotGibbsStep(model["z"], **CONTENDER_MOVES[moves])
        built = time.perf_counter() - start
        step.rng = np.random.default_rng(seed)
        point = model.initial_point()
        point["z"] = truth.astype(point["z"].dtype)
        first = []
        for _ in range(2):  # the parameter moves' functions compile (some at the second)
            start = time.perf_counter()
            point, _ = step.step(point)
            first.append(time.perf_counter() - start)
        print(f"  {mode or 'default'} mode: step built in {built:.1f} s, first two draws "
              f"{first[0]:.1f} s and {first[1]:.1f} s", flush=True)
        steps[mode], points[mode], seconds[mode], by_part[mode] = step, point, 0.0, {}
        cpu_seconds[mode] = 0.0
    slot_steps.FIT_COMPILE_MODE = default_mode
    for _ in range(draws):
        for mode, step in steps.items():
            timers.clear()
            start, start_cpu = time.perf_counter(), time.process_time()
            points[mode], _ = step.step(points[mode])
            seconds[mode] += time.perf_counter() - start
            cpu_seconds[mode] += time.process_time() - start_cpu
            for label, value in timers.items():
                by_part[mode][label] = by_part[mode].get(label, 0.0) + value
    for name, function in originals.items():
        setattr(slot_steps, name, function)
    print(f"\nms per draw of SlotGibbsStep({moves}): Student-t n = {n}, capacity {capacity}, "
          f"{draws} draws per mode after the first two, load average "
          f"{os.getloadavg()[0]:.1f}")
    print(f"  {'':<28}" + "".join(f"{m or 'default':>9}" for m in steps))
    for label in [*parts.values()]:
        print(f"  {label:<28}" + "".join(f"{1000 * by_part[m].get(label, 0.0) / draws:9.1f}"
                                         for m in steps))
    print(f"  {'whole draw':<28}" + "".join(f"{1000 * seconds[m] / draws:9.1f}" for m in steps))
    print(f"  {'whole draw, ms of CPU':<28}"
          + "".join(f"{1000 * cpu_seconds[m] / draws:9.1f}" for m in steps))
    if len(steps) == 2:
        print(f"  default / numba: {seconds[None] / seconds['NUMBA']:.2f}x")


def move_counts(n, capacity, draws, tune, chains, seed, contender):
    """What changes the number of clusters K and the largest cluster's size, by move: each
    move of ``SlotGibbsStep`` (the moves of ``CONTENDER_MOVES[contender]``) wrapped to record
    the occupied slots before and after it, through ``pm.sample`` on the Student-t data
    (``--seed`` picks the data set and the chains); K's posterior, the sizes of the clusters
    beyond the three largest, K's and the largest fraction's bulk ESS, the largest fraction's
    quantiles and its runs below 0.46 (excursions of the largest cluster split in two)."""
    import pymc_splitmerge.steps.cluster_slots as slot_steps

    records = []
    moves = {"laplace_parameter_update": "Laplace parameter update",
             "parameter_split_merge": "parameter split-merge",
             "slot_split_merge": "label split-merge", "slot_gibbs_sweeps": "Algorithm 8 sweep"}
    originals = {name: getattr(slot_steps, name) for name in moves}

    def recorded(name):
        function = originals[name]

        def wrapper(*args, **kwargs):
            sizes = args[3] if "parameter" in name else args[2]
            before = sizes.copy()
            start = time.process_time()
            out = function(*args, **kwargs)
            label = moves[name] + (", cluster-point" if kwargs.get("anchors") == "cluster_point"
                                   else "")
            records.append((label, before, sizes.copy(), time.process_time() - start))
            return out
        return wrapper

    for name in moves:
        setattr(slot_steps, name, recorded(name))
    try:
        y, _ = student_data(n + n // 4, np.random.default_rng(seed))
        model = slot_model("student_t", y[:n], None, capacity)
        with model:
            step = [psm.SlotGibbsStep(model["z"], **CONTENDER_MOVES[contender])]
            start = time.process_time()
            idata = pm.sample(draws, tune=tune, chains=chains, cores=1, step=step,
                              random_seed=seed, progressbar=False,
                              compute_convergence_checks=False)
            cpu = time.process_time() - start
    finally:
        for name, function in originals.items():
            setattr(slot_steps, name, function)
    k, largest = partition_quantities(_posterior(idata, "z").astype(np.int64))
    labels = _posterior(idata, "z").astype(np.int64)
    beyond = [size for chain in labels for row in chain
              for size in np.sort(np.bincount(row)[np.bincount(row) > 0])[::-1][3:]]
    values, counts = np.unique(k, return_counts=True)
    print(f"\nmoves of {contender}: Student-t n = {n}, {chains} chains x {draws} draws "
          f"(+{tune} tuning), {cpu:.1f} s CPU, load average {os.getloadavg()[0]:.1f}")
    print(f"  K {k.mean():.2f}, per chain {np.round(k.mean(axis=1), 2).tolist()}, bulk ESS "
          f"{ess(k):.0f}; largest fraction bulk ESS {ess(largest):.0f}")
    print("  K posterior: " + ", ".join(f"{int(v)}: {c / counts.sum():.3f}"
                                         for v, c in zip(values, counts, strict=True)))
    runs = [len(run) for chain in largest
            for run in np.split(np.flatnonzero(chain < 0.46),
                                np.flatnonzero(np.diff(np.flatnonzero(chain < 0.46)) > 1) + 1)
            if len(run)]
    print("  largest fraction (1, 5, 50, 95 %): "
          f"{np.round(np.quantile(largest, [0.01, 0.05, 0.5, 0.95]), 3).tolist()}; runs of "
          f"draws below 0.46: {len(runs)}, mean length {np.mean(runs) if runs else 0:.1f}")
    if beyond:
        print(f"  clusters beyond the 3 largest: {len(beyond) / k.size:.2f} a draw, sizes "
              f"(10, 25, 50, 75, 90 %) {np.quantile(beyond, [0.1, 0.25, 0.5, 0.75, 0.9])}")
    kept = records[len(records) * tune // (tune + draws):]  # about the kept draws' calls
    print(f"  {'move':<40}{'calls':>7}{'changed':>9}{'K up':>6}{'K down':>8}{'ms CPU':>8}"
          f"{'largest >=20':>13}{'>=100':>6}{'d^2/draw':>9}"
          "  points in the clusters born / died by a call (median; share >= 20)")
    for label in dict.fromkeys(r[0] for r in kept):
        rows = [r for r in kept if r[0] == label]
        up = sum(np.count_nonzero(after) > np.count_nonzero(before) for _, before, after, _ in rows)
        down = sum(np.count_nonzero(after) < np.count_nonzero(before)
                   for _, before, after, _ in rows)
        changed = sum(bool(np.any(before != after)) for _, before, after, _ in rows)
        # the change of the largest cluster's size by the call
        shift = np.array([after.max() - before.max() for _, before, after, _ in rows], float)
        born = [int(a[(b == 0) & (a > 0)].sum()) for _, b, a, _ in rows if ((b == 0) & (a > 0)).any()]
        died = [int(b[(b > 0) & (a == 0)].sum()) for _, b, a, _ in rows if ((b > 0) & (a == 0)).any()]

        def summary(sizes):
            return (f"{np.median(sizes):.0f}; {np.mean(np.array(sizes) >= 20):.2f}" if sizes
                    else "-")
        print(f"  {label:<40}{len(rows):>7}{changed:>9}{up:>6}{down:>8}"
              f"{1000 * np.mean([r[3] for r in rows]):>8.2f}"
              f"{np.count_nonzero(np.abs(shift) >= 20):>13}"
              f"{np.count_nonzero(np.abs(shift) >= 100):>6}"
              f"{(shift ** 2).sum() / (chains * draws):>9.0f}  {summary(born)} / {summary(died)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-student", type=int, default=300)
    parser.add_argument("--n-poisson", type=int, default=500)
    parser.add_argument("--draws", type=int, default=300)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--capacity", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--tune", type=int, default=None, help="tuning draws (default --draws)")
    parser.add_argument("--contenders", nargs="+", default=list(CONTENDERS),
                        choices=[*CONTENDER_MOVES, "pymc_sb"])
    parser.add_argument("--reference-draws", type=int, default=0)
    parser.add_argument("--reference-chains", type=int, default=4)
    parser.add_argument("--problems", nargs="+", default=["student_t", "poisson"])
    parser.add_argument("--stuck", action="store_true",
                        help="only the stuck case (two separated groups started together)")
    parser.add_argument("--n-stuck", type=int, default=200)
    parser.add_argument("--stuck-tune", type=int, default=50)
    parser.add_argument("--stuck-dimension", type=int, default=1, choices=[1, 2])
    parser.add_argument("--stuck-contenders", nargs="+", default=list(STUCK_MOVES),
                        choices=list(STUCK_MOVES))
    parser.add_argument("--update-cost", action="store_true",
                        help="only the cost of one Laplace parameter update, two ways")
    parser.add_argument("--update-repeats", type=int, default=20)
    parser.add_argument("--draw-cost", action="store_true",
                        help="only the cost of a slot step's draw by move, two compile modes")
    parser.add_argument("--draw-cost-modes", nargs="+", default=["numba", "default"],
                        choices=["numba", "default"])
    parser.add_argument("--draw-cost-moves", default="laplace+psm3", metavar="CONTENDER",
                        choices=list(CONTENDER_MOVES),
                        help="the slot contender whose moves --draw-cost times")
    parser.add_argument("--move-counts", metavar="CONTENDER", choices=list(CONTENDER_MOVES),
                        help="only what changes K and the largest cluster, by move, for one "
                             "slot contender (Student-t, --n-student, --draws, --tune, "
                             "--chains, --seed)")
    args = parser.parse_args()
    if args.move_counts:
        move_counts(args.n_student, args.capacity, args.draws,
                    args.draws if args.tune is None else args.tune, args.chains, args.seed,
                    args.move_counts)
        return
    if args.draw_cost:
        draw_cost(args.n_student, args.capacity, args.draws, args.seed, args.draw_cost_moves,
                  modes=[{"numba": "NUMBA", "default": None}[m] for m in args.draw_cost_modes])
        return
    if args.update_cost:
        update_cost(args.n_student, args.capacity, args.update_repeats, args.seed)
        return
    if args.stuck:
        stuck(args.n_stuck, args.draws, args.stuck_tune, args.chains, args.seed,
              min(args.capacity, args.n_stuck), args.stuck_contenders, args.stuck_dimension)
        return
    sizes = {"student_t": args.n_student, "poisson": args.n_poisson}
    for problem in args.problems:
        run(problem, sizes[problem], args.draws, args.chains, args.seed, args.capacity,
            args.contenders, args.tune, args.reference_draws, args.reference_chains)


if __name__ == "__main__":
    main()
