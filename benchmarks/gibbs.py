"""Benchmark of the collapsed Gibbs sweep (numba) against a plain numpy sweep.

Normal-inverse-Wishart components, D = 2, n = 10,000 points from 15 well-separated
Gaussians (K ≈ 15 after burn-in).  Reports time per sweep, point-cluster predictive
evaluations per second (target >= 3e6), the same for a vectorised numpy reference sweep
measured in the same run (on a subset of points, scaled), their ratio, and the overhead of
one ``pm.sample`` draw around the step.

Run: ``python benchmarks/gibbs.py [--n 10000] [--sweeps 5]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.special import gammaln

from pymc_splitmerge.components import NormalInverseWishart
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


def pymc_overhead(x, family_kwargs, prior, draws=200):
    """Per-draw seconds of the kernel, of the PyMC step around it, and of a pm.sample draw.

    All three are measured from the same equilibrium partition (the end of a warm-up chain),
    so their differences are the adapter's and pm.sample's own costs.
    """
    import pymc as pm

    from pymc_splitmerge.distributions.mixture import ConjugateMixture
    from pymc_splitmerge.distributions.priors import DirichletProcess
    from pymc_splitmerge.steps import CollapsedGibbsStep

    family = NormalInverseWishart(**family_kwargs)
    with pm.Model():
        z = DirichletProcess("z", alpha=1.0, n=x.shape[0])
        ConjugateMixture("y", partition=z, component=family, observed=x)
        step = CollapsedGibbsStep(z)
        warm = pm.sample(draws=draws, tune=0, chains=1, cores=1, step=step, progressbar=False,
                         compute_convergence_checks=False, random_seed=1)
        labels = np.asarray(warm["posterior"]["z"].values)[0, -1]
        timings = []
        for n_draws in (draws, 5 * draws):  # the difference removes pm.sample's fixed setup
            start = time.perf_counter()
            pm.sample(draws=n_draws, tune=0, chains=1, cores=1, step=step, progressbar=False,
                      compute_convergence_checks=False, random_seed=2, initvals={"z": labels})
            timings.append(time.perf_counter() - start)
        per_draw = (timings[1] - timings[0]) / (4 * draws)
        point = {"z": labels.copy()}
        step.step(point)
        start = time.perf_counter()
        for _ in range(draws):
            point, _ = step.step(point)
        per_step = (time.perf_counter() - start) / draws
    state = PartitionState(family, family.prepare_data(x), labels)
    tables = prior.tables(x.shape[0])
    rng = np.random.default_rng(3)
    start = time.perf_counter()
    for _ in range(draws):
        gibbs_sweep(state, *tables, rng)
    per_kernel = (time.perf_counter() - start) / draws
    return per_kernel, per_step, per_draw


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--sweeps", type=int, default=5)
    parser.add_argument("--reference-points", type=int, default=1000)
    args = parser.parse_args()

    x, truth = make_data(args.n)
    family_kwargs = dict(mu0=np.zeros(2), kappa0=0.01, nu0=4.0, psi0=np.eye(2))
    family = NormalInverseWishart(**family_kwargs)
    prior = DirichletProcessPrior(alpha=1.0)
    prepared = family.prepare_data(x)
    tables = prior.tables(args.n)
    rng = np.random.default_rng(0)

    state = PartitionState(family, prepared, truth)
    gibbs_sweep(state, *tables, rng)  # compile / warm up
    start = time.perf_counter()
    info_evaluations = 0
    for _ in range(args.sweeps):
        info = gibbs_sweep(state, *tables, rng)
        info_evaluations += info.n_predictive_evaluations
    elapsed = time.perf_counter() - start
    per_sweep = elapsed / args.sweeps
    rate = info_evaluations / elapsed
    print(f"numba sweep: n={args.n}, K={state.n_clusters}, {per_sweep * 1e3:.1f} ms/sweep, "
          f"{rate / 1e6:.2f} M point-cluster evaluations/s (target >= 3 M/s)")

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

    overhead_n = 200
    kernel, step, draw = pymc_overhead(x[:overhead_n], family_kwargs, prior)
    print(f"one draw at n={overhead_n} (same equilibrium partition): kernel "
          f"{kernel * 1e6:.0f} us, PyMC step around it {step * 1e6:.0f} us (adapter "
          f"{(step - kernel) * 1e6:+.0f} us), pm.sample draw {draw * 1e6:.0f} us (pm.sample "
          f"{(draw - step) * 1e6:+.0f} us)")

if __name__ == "__main__":
    main()
