"""Benchmark of the collapsed Gibbs sweep (numba) against a plain numpy sweep.

Normal-inverse-Wishart components, D = 2, n = 10,000 points from 15 well-separated
Gaussians (K ≈ 15 after burn-in).  Reports time per sweep, point-cluster predictive
evaluations per second (target >= 25e6), the same for a plain compiled reference sweep that
keeps each cluster's Student-t predictive in closed form (``reference_sweeps``, the
hardware's limit) and for a vectorised numpy reference sweep (on a subset of points,
scaled), all measured in the same run, their ratios (target: kernel within 1.5x of the
plain compiled sweep), and the overhead of one ``pm.sample`` draw around the step.

Sweep and per-draw times are CPU time of the thread (``time.thread_time``): on a shared
machine wall time includes waiting for a core.  Kernel and plain reference sweeps alternate
(``--repeats`` pairs), and each pair's ratio is reported (median and range).  The per-draw
overhead times the Gibbs transition inside the draws it is part of (patched timer) and
reports what ``CollapsedGibbsStep.step`` (best of 5 x 200 draws) and ``pm.sample``
(difference of 1,000- and 200-draw runs) add to it.

``--compare-row-views {niw,nig,beta-bernoulli}`` instead runs the kernel and the same sweep
on statistics-row views instead of the slot-index forms, paired in one process on
the same state and seed, ``--repeats`` pairs of 3 sweeps, and prints the time ratio and
whether the results are identical (they must be, bit for bit).

Run: ``python benchmarks/gibbs.py [--n 10000] [--sweeps 5] [--overhead-n 100]
[--repeats 5] [--skip-overhead] [--compare-row-views niw]``.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from numba import njit
from scipy.special import gammaln

from pymc_splitmerge.components import BetaBernoulli, NormalInverseGamma, NormalInverseWishart
from pymc_splitmerge.kernels.gibbs import gibbs_sweep
from pymc_splitmerge.kernels.state import PartitionState
from pymc_splitmerge.priors import DirichletProcessPrior


def make_data(n, n_components=15, dim=2, seed=0):
    rng = np.random.default_rng(seed)
    angles = np.linspace(0, 2 * np.pi, n_components, endpoint=False)
    centres = 20.0 * np.stack([np.cos(angles), np.sin(angles)], axis=1)[:, :dim]
    truth = rng.integers(n_components, size=n)
    return centres[truth] + rng.normal(size=(n, dim)), truth


class NumpyNiwGibbs:
    """Plain numpy collapsed Gibbs for a DP × NIW mixture (vectorised over clusters)."""

    def __init__(self, x, labels, alpha, mu0, kappa0, nu0, psi0):
        self.x, self.alpha = x, alpha
        self.mu0, self.kappa0, self.nu0, self.psi0 = mu0, kappa0, nu0, psi0
        self.labels = labels.copy()
        capacity = x.shape[0] + 1
        dim = x.shape[1]
        self.count = np.zeros(capacity)
        self.total = np.zeros((capacity, dim))
        self.outer = np.zeros((capacity, dim, dim))
        for i, c in enumerate(self.labels):
            self._add(i, c, 1.0)

    def _add(self, i, c, sign):
        xi = self.x[i]
        self.count[c] += sign
        self.total[c] += sign * xi
        self.outer[c] += sign * np.outer(xi, xi)

    def _log_predictive(self, xi, count, total, outer):
        dim = xi.shape[0]
        kappa_n = self.kappa0 + count
        nu_n = self.nu0 + count
        mu_n = (self.kappa0 * self.mu0 + total) / kappa_n[:, None]
        psi_n = (self.psi0 + outer + self.kappa0 * np.outer(self.mu0, self.mu0)
                 - kappa_n[:, None, None] * mu_n[:, :, None] * mu_n[:, None, :])
        df = nu_n - dim + 1
        scale = psi_n * ((kappa_n + 1) / (kappa_n * df))[:, None, None]
        _, log_det = np.linalg.slogdet(scale)
        diff = xi - mu_n
        maha = np.einsum("ki,ki->k", diff, np.linalg.solve(scale, diff[:, :, None])[:, :, 0])
        return (gammaln((df + dim) / 2) - gammaln(df / 2) - dim / 2 * np.log(df * np.pi)
                - 0.5 * log_det - (df + dim) / 2 * np.log1p(maha / df))

    def sweep(self, points, rng):
        evaluations = 0
        for i in points:
            self._add(i, self.labels[i], -1.0)
            active = np.flatnonzero(self.count > 0)
            fresh = np.flatnonzero(self.count == 0)[0]
            candidates = np.append(active, fresh)
            log_weights = np.log(np.append(self.count[active], self.alpha))
            log_weights += self._log_predictive(self.x[i], self.count[candidates],
                                                self.total[candidates], self.outer[candidates])
            evaluations += active.size
            p = np.exp(log_weights - log_weights.max())
            c = candidates[np.searchsorted(np.cumsum(p), rng.random() * p.sum())]
            self.labels[i] = c
            self._add(i, c, 1.0)
        return evaluations


# ------------------------------------------------------------------------------------------
# Reference: a plain compiled sweep (DP x NIW, D = 2) keeping each cluster's Student-t
# predictive in closed form (location, inverse Cholesky factor of the scale, log-normaliser,
# exponent), refreshed from the cluster's sums when a point joins or leaves.  Written
# for this benchmark only (no dispatch, no slots, no prior tables): the hardware's limit.
# ------------------------------------------------------------------------------------------
@njit
def _reference_refresh(k, count, sums, cache, mu0, kappa0, nu0, psi0):
    kappa = kappa0 + count[k]
    nu = nu0 + count[k]
    m0 = (kappa0 * mu0[0] + sums[k, 0]) / kappa
    m1 = (kappa0 * mu0[1] + sums[k, 1]) / kappa
    # Psi_n = psi0 + sum xx^T + kappa0 mu0 mu0^T - kappa mu mu^T (2 x 2, symmetric)
    p00 = psi0[0] + sums[k, 2] + kappa0 * mu0[0] * mu0[0] - kappa * m0 * m0
    p10 = psi0[1] + sums[k, 3] + kappa0 * mu0[0] * mu0[1] - kappa * m1 * m0
    p11 = psi0[2] + sums[k, 4] + kappa0 * mu0[1] * mu0[1] - kappa * m1 * m1
    l00 = math.sqrt(p00)
    l10 = p10 / l00
    l11 = math.sqrt(p11 - l10 * l10)
    shrink = math.sqrt(kappa / (kappa + 1.0))  # folded into the inverse factor
    cache[k, 0] = m0
    cache[k, 1] = m1
    cache[k, 2] = shrink / l00
    cache[k, 3] = -shrink * l10 / (l00 * l11)
    cache[k, 4] = shrink / l11
    cache[k, 5] = -math.log(math.pi) + math.log(0.5 * (nu - 1.0) * cache[k, 2] * cache[k, 4])
    cache[k, 6] = 0.5 * (nu + 1.0)


@njit
def _reference_move(k, x0, x1, sign, count, sums):
    count[k] += sign
    sums[k, 0] += sign * x0
    sums[k, 1] += sign * x1
    sums[k, 2] += sign * x0 * x0
    sums[k, 3] += sign * x0 * x1
    sums[k, 4] += sign * x1 * x1


@njit
def reference_sweeps(x, labels, n_sweeps, alpha, mu0, kappa0, nu0, psi0, seed):
    """Collapsed Gibbs sweeps (random scan); returns the number of predictive evaluations."""
    np.random.seed(seed)
    n = x.shape[0]
    count = np.zeros(n + 1)
    sums = np.zeros((n + 1, 5))
    cache = np.zeros((n + 1, 7))
    active = np.empty(n + 1, np.int64)  # active cluster ids in active[:n_active]
    position = np.full(n + 1, -1)
    n_active = 0
    for i in range(n):
        _reference_move(labels[i], x[i, 0], x[i, 1], 1.0, count, sums)
    for k in range(n + 1):
        _reference_refresh(k, count, sums, cache, mu0, kappa0, nu0, psi0)
        if count[k] > 0:
            active[n_active] = k
            position[k] = n_active
            n_active += 1
    empty = n_active  # an id whose cluster is empty (any k with count 0)
    while count[empty] > 0:
        empty += 1
    log_alpha = math.log(alpha)
    weights = np.empty(n + 1)
    evaluations = 0
    for _ in range(n_sweeps):
        for i in np.random.permutation(n):
            x0, x1, k = x[i, 0], x[i, 1], labels[i]
            _reference_move(k, x0, x1, -1.0, count, sums)
            _reference_refresh(k, count, sums, cache, mu0, kappa0, nu0, psi0)
            if count[k] == 0:  # close the cluster: swap-remove from the active list
                last = active[n_active - 1]
                active[position[k]] = last
                position[last] = position[k]
                position[k] = -1
                n_active -= 1
                empty = k
            top = -np.inf
            for j in range(n_active + 1):
                c = active[j] if j < n_active else empty
                d0 = x0 - cache[c, 0]
                d1 = x1 - cache[c, 1]
                z0 = cache[c, 2] * d0
                z1 = cache[c, 3] * d0 + cache[c, 4] * d1
                w = (math.log(count[c]) if j < n_active else log_alpha) + (
                    cache[c, 5] - cache[c, 6] * math.log1p(z0 * z0 + z1 * z1))
                weights[j] = w
                top = max(top, w)
            evaluations += n_active
            total = 0.0
            for j in range(n_active + 1):
                total += math.exp(weights[j] - top)
                weights[j] = total
            threshold = np.random.random() * total
            j = 0
            while j < n_active and weights[j] <= threshold:
                j += 1
            if j == n_active:  # open the empty cluster
                k = empty
                active[n_active] = k
                position[k] = n_active
                n_active += 1
                empty = k + 1
                while count[empty] > 0 or position[empty] >= 0:
                    empty = (empty + 1) % (n + 1)
            else:
                k = active[j]
            _reference_move(k, x0, x1, 1.0, count, sums)
            _reference_refresh(k, count, sums, cache, mu0, kappa0, nu0, psi0)
            labels[i] = k
    return evaluations


class _KernelTimer:
    """Times every call of the Gibbs transition (``_GibbsSweep.__call__``, patched on the
    class, so that copies of the step that ``pm.sample`` may make are timed too)."""

    def __init__(self):
        from pymc_splitmerge.kernels import gibbs

        self.seconds = 0.0
        self.calls = 0
        self._class = gibbs._GibbsSweep
        self._original = self._class.__call__
        timer = self

        def timed(transition, *args):
            start = time.thread_time()
            try:
                return timer._original(transition, *args)
            finally:
                timer.seconds += time.thread_time() - start
                timer.calls += 1

        self._class.__call__ = timed

    def read(self):
        return self.seconds, self.calls

    def restore(self):
        self._class.__call__ = self._original


def pymc_overhead(x, family_kwargs, draws=200):
    """Per-draw CPU seconds of the kernel and of what the step and pm.sample add around it.

    The kernel's own time is measured inside the same draws (every call of the Gibbs
    transition is timed, ~1 us of timer cost per draw), so the overheads are differences on
    the same partitions, not between two chains that wandered to different numbers of
    clusters.  Returns ``(kernel, step overhead, pm.sample overhead beyond the step)``.
    """
    import pymc as pm

    from pymc_splitmerge.distributions.mixture import ConjugateMixture
    from pymc_splitmerge.distributions.priors import DirichletProcess
    from pymc_splitmerge.steps import CollapsedGibbsStep

    family = NormalInverseWishart(**family_kwargs)
    timer = _KernelTimer()
    try:
        with pm.Model():
            z = DirichletProcess("z", alpha=1.0, n=x.shape[0])
            ConjugateMixture("y", partition=z, component=family, observed=x)
            step = CollapsedGibbsStep(z)
            warm = pm.sample(draws=draws, tune=0, chains=1, cores=1, step=step,
                             progressbar=False, compute_convergence_checks=False,
                             random_seed=1)
            labels = np.asarray(warm["labels"]["z"].values)[0, -1]
            # step.step alone: best of 5 blocks of the step's time minus its kernel's time
            point = {"z": labels.copy()}
            point, _ = step.step(point)
            kernel_per_draw, step_overhead = [], np.inf
            for _ in range(5):
                kernel_before, _ = timer.read()
                start = time.thread_time()
                for _ in range(draws):
                    point, _ = step.step(point)
                total = time.thread_time() - start
                kernel = timer.read()[0] - kernel_before
                kernel_per_draw.append(kernel / draws)
                step_overhead = min(step_overhead, (total - kernel) / draws)
            # pm.sample: a long minus a short run removes its fixed setup; each length twice
            # (the first call with ``initvals`` pays a one-time cost), the least kept.
            outside = {draws: np.inf, 5 * draws: np.inf}
            for n_draws in (draws, 5 * draws, draws, 5 * draws):
                kernel_before, _ = timer.read()
                start = time.thread_time()
                pm.sample(draws=n_draws, tune=0, chains=1, cores=1, step=step,
                          progressbar=False, compute_convergence_checks=False, random_seed=2,
                          initvals={"z": labels})
                total = time.thread_time() - start
                kernel = timer.read()[0] - kernel_before
                outside[n_draws] = min(outside[n_draws], total - kernel)
            sample_overhead = (outside[5 * draws] - outside[draws]) / (4 * draws)
    finally:
        timer.restore()
    return float(np.median(kernel_per_draw)), step_overhead, sample_overhead - step_overhead


def _row_view_sweeps():
    """The fused Gibbs sweep on statistics-row views instead of the slot-index forms: compiled here
    from the kernel's own source with ``dispatch.remove_point_at`` / ``add_point_at``
    replaced by ``remove_point`` / ``add_point`` on the row views ``stats[slot]``, ``x[i]``
    (everything else identical), for a paired comparison in one process."""
    import inspect

    from pymc_splitmerge.kernels import gibbs

    source = inspect.getsource(gibbs._gibbs_sweeps_fields.py_func)
    replacements = (
        ("@numba.njit(cache=True)\n", ""),
        ("def _gibbs_sweeps_fields(", "def row_view_sweeps("),
        ("dispatch.remove_point_at(family_id, params, stats, old, x, i)",
         "dispatch.remove_point(family_id, params, stats[old], x_row)"),
        ("dispatch.add_point_at(family_id, params, stats, slot, x, i)",
         "dispatch.add_point(family_id, params, stats[slot], x_row)"),
    )
    for old, new in replacements:
        if old not in source:
            raise RuntimeError(f"kernels/gibbs.py changed: {old!r} not found")
        source = source.replace(old, new)
    namespace = dict(vars(gibbs))
    exec(source, namespace)  # noqa: S102 - benchmark only: the kernel's source, edited above
    return njit(namespace["row_view_sweeps"])


@njit
def _seed(seed):
    np.random.seed(seed)


def compare_row_views(family, prepared, truth, tables, pairs, sweeps):
    """Paired runs, same state and seed: the kernel (slot-index updates) against the same
    sweep on row views.  Prints the evaluation rates, the time ratio and whether labels and
    statistics came out identical."""
    import copy

    from pymc_splitmerge.kernels.gibbs import _gibbs_sweeps_fields

    row_view_sweeps = _row_view_sweeps()
    state = PartitionState(family, prepared, truth)

    def fields(current):
        partition = current.partition
        return (family.family_id, current.model.params, current.model.x, partition.labels,
                partition.sizes, partition.stats, partition.empty_row, partition.active,
                partition.where, partition.cluster_count, *tables)

    _seed(0)
    _gibbs_sweeps_fields(*fields(state), 2, True)  # compile, burn in
    _seed(0)
    row_view_sweeps(*fields(copy.deepcopy(state)), 1, True)  # compile
    ratios = []
    for pair in range(pairs):
        rows, slots = copy.deepcopy(state), copy.deepcopy(state)
        runs = {}
        # alternate which runs first (the second of a pair tends to run on warmer caches)
        order = ("rows", "slots") if pair % 2 == 0 else ("slots", "rows")
        for which in order:
            sweep, current = ((row_view_sweeps, rows) if which == "rows"
                              else (_gibbs_sweeps_fields, slots))
            _seed(pair)
            start = time.thread_time()
            _, evaluations = sweep(*fields(current), sweeps, True)
            runs[which] = (evaluations, time.thread_time() - start)
        (row_evaluations, row_time), (slot_evaluations, slot_time) = runs["rows"], runs["slots"]
        identical = (np.array_equal(rows.partition.labels, slots.partition.labels)
                     and np.array_equal(rows.partition.stats, slots.partition.stats))
        ratios.append(row_time / slot_time)
        print(f"  pair {pair}: row views {row_evaluations / row_time / 1e6:.2f} M/s, slot index "
              f"{slot_evaluations / slot_time / 1e6:.2f} M/s, time ratio rows/slots "
              f"{ratios[-1]:.3f}, identical {identical}", flush=True)
    print(f"slot-index updates vs row views ({type(family).__name__}): median time ratio "
          f"rows/slots {np.median(ratios):.3f} over {pairs} pairs")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--sweeps", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5,
                        help="alternating kernel / reference pairs of --sweeps sweeps")
    parser.add_argument("--reference-points", type=int, default=1000)
    parser.add_argument("--overhead-n", type=int, default=200,
                        help="points of the per-draw overhead measurement")
    parser.add_argument("--skip-overhead", action="store_true")
    parser.add_argument("--compare-row-views", choices=("niw", "nig", "beta-bernoulli"),
                        default=None,
                        help="only the paired slot-index / row-view sweep comparison"
                        " for this family, then exit")
    args = parser.parse_args()
    if args.compare_row_views:
        x, truth = make_data(args.n)
        if args.compare_row_views == "niw":
            family = NormalInverseWishart(mu0=np.zeros(2), kappa0=0.01, nu0=4.0, psi0=np.eye(2))
            prepared = family.prepare_data(x)
        elif args.compare_row_views == "nig":
            family = NormalInverseGamma(mu0=0.0, kappa0=0.01, alpha0=2.0, beta0=1.0)
            prepared = family.prepare_data(x[:, 0])
        else:
            family = BetaBernoulli(a=1.0, b=1.0)
            rates = (truth[:, None] % 4 + 1) / 6.0
            prepared = family.prepare_data(
                (np.random.default_rng(1).random((args.n, 8)) < rates).astype(int))
        tables = DirichletProcessPrior(alpha=1.0).tables(args.n)
        compare_row_views(family, prepared, truth, tables, args.repeats, 3)
        return

    x, truth = make_data(args.n)
    family_kwargs = {"mu0": np.zeros(2), "kappa0": 0.01, "nu0": 4.0, "psi0": np.eye(2)}
    family = NormalInverseWishart(**family_kwargs)
    prior = DirichletProcessPrior(alpha=1.0)
    prepared = family.prepare_data(x)
    tables = prior.tables(args.n)
    rng = np.random.default_rng(0)

    state = PartitionState(family, prepared, truth)
    gibbs_sweep(state, *tables, rng)  # compile / warm up
    # the plain compiled reference sweep, same data, same starting partition
    reference_args = (1.0, np.zeros(2), 0.01, 4.0, np.array([1.0, 0.0, 1.0]))
    start_labels = truth.astype(np.int64)
    reference_sweeps(prepared, start_labels.copy(), 1, *reference_args, 0)  # compile
    plain_labels = start_labels.copy()
    reference_sweeps(prepared, plain_labels, 1, *reference_args, 1)  # burn in like the kernel
    # Kernel and reference alternate (--repeats pairs of --sweeps sweeps each), so that each
    # pair's ratio sees the same load; CPU time of the thread (on a shared machine the wall
    # time includes waiting for a core).
    kernel_times, kernel_rates, plain_times, plain_rates, ratios = [], [], [], [], []
    for repeat in range(args.repeats):
        start = time.thread_time()
        info_evaluations = 0
        for _ in range(args.sweeps):
            info = gibbs_sweep(state, *tables, rng)
            info_evaluations += info.n_predictive_evaluations
        elapsed = time.thread_time() - start
        start = time.thread_time()
        plain_evaluations = reference_sweeps(prepared, plain_labels, args.sweeps,
                                             *reference_args, 2 + repeat)
        plain_elapsed = time.thread_time() - start
        kernel_times.append(elapsed / args.sweeps)
        kernel_rates.append(info_evaluations / elapsed)
        plain_times.append(plain_elapsed / args.sweeps)
        plain_rates.append(plain_evaluations / plain_elapsed)
        ratios.append((elapsed / info_evaluations) / (plain_elapsed / plain_evaluations))
    per_sweep = float(np.median(kernel_times))
    print(f"numba sweep: n={args.n}, K={state.n_clusters}, {per_sweep * 1e3:.1f} ms/sweep "
          f"(median of {args.repeats}), {np.median(kernel_rates) / 1e6:.2f} M point-cluster "
          f"evaluations/s (median; best {max(kernel_rates) / 1e6:.2f} M/s; target >= 25 M/s)")
    print(f"plain compiled reference sweep (closed-form Student-t per cluster): "
          f"K={np.unique(plain_labels).size}, {np.median(plain_times) * 1e3:.1f} ms/sweep, "
          f"{np.median(plain_rates) / 1e6:.2f} M evaluations/s (median; best "
          f"{max(plain_rates) / 1e6:.2f} M/s)")
    print(f"ratio kernel / plain reference, time per evaluation, per alternating pair: median "
          f"{np.median(ratios):.2f}x (range {min(ratios):.2f}-{max(ratios):.2f}; "
          f"target <= 1.5x)")

    reference = NumpyNiwGibbs(prepared, state.labels(), 1.0, np.zeros(2), 0.01, 4.0, np.eye(2))
    points = rng.permutation(args.n)[: args.reference_points]
    start = time.perf_counter()
    evaluations = reference.sweep(points, rng)
    reference_elapsed = time.perf_counter() - start
    reference_per_sweep = reference_elapsed * args.n / points.size
    reference_rate = evaluations / reference_elapsed
    print(f"numpy reference: {reference_per_sweep * 1e3:.1f} ms/sweep (scaled from "
          f"{points.size} points), {reference_rate / 1e6:.3f} M evaluations/s")
    print(f"speed-up numba / numpy: {reference_per_sweep / per_sweep:.1f}x")

    if args.skip_overhead:
        return
    overhead_n = args.overhead_n
    kernel, step, beyond = pymc_overhead(x[:overhead_n], family_kwargs)
    print(f"one draw at n={overhead_n}: kernel {kernel * 1e6:.0f} us; around it "
          f"CollapsedGibbsStep.step adds {step * 1e6:+.0f} us, pm.sample adds "
          f"{beyond * 1e6:+.0f} us more (pm.sample draw - kernel = "
          f"{(step + beyond) * 1e6:+.0f} us)")


if __name__ == "__main__":
    main()
