"""End-to-end checks of the public API with pm.sample.

* two step methods on the same partition variable, composed through CompoundStep, are exact;
* ``cores=2`` with the spawn and fork start methods gives the same draws as ``cores=1``, for
  every step method (informed anchors adapting in tuning, cluster anchors, the ARM libraries, the prior-parameter
  steps, the steps plain ``pm.sample()`` assigns);
* the README's main job (``python -m pymc_splitmerge.demo``) runs on this PyMC line.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest

import pymc_splitmerge as psm
from pymc_splitmerge.analysis._arviz_compat import posterior_with_labels
from pymc_splitmerge.testing import assert_partition_gof, exact_posterior

BERNOULLI_DATA = np.array([[1, 1, 0], [1, 1, 1], [0, 0, 1], [0, 0, 0], [1, 0, 1], [0, 1, 0]])
SAMPLE_KWARGS = {"tune": 50, "chains": 2, "cores": 1, "progressbar": False,
                     "compute_convergence_checks": False}


def _bernoulli_model(alpha):
    model = pm.Model()
    with model:
        z = psm.PitmanYor("z", alpha=alpha, discount=0.25, n=len(BERNOULLI_DATA))
        psm.ConjugateMixture("y", partition=z, component=psm.BetaBernoulli(a=1.0, b=1.0),
                             observed=BERNOULLI_DATA)
    return model, z


def test_two_partition_steps_composed_through_compound_step_are_exact():
    model, z = _bernoulli_model(alpha=0.7)
    with model:
        steps = [psm.SAMSStep(z), psm.CollapsedGibbsStep(z)]
        idata = pm.sample(draws=2000, step=steps, random_seed=41, **SAMPLE_KWARGS)
    assert {"sams_accepted", "gibbs_changed"} <= set(idata.sample_stats.data_vars)
    labels = np.asarray(idata.labels["z"].values)[:, ::3].reshape(-1, len(BERNOULLI_DATA))
    exact = exact_posterior(psm.priors.PitmanYorPrior(alpha=0.7, discount=0.25),
                            psm.BetaBernoulli(a=1.0, b=1.0), BERNOULLI_DATA)
    assert_partition_gof(labels, exact)


def test_negative_control_composed_steps_against_the_wrong_posterior():
    """The same check rejects the right sampler against a different (DP) posterior."""
    model, z = _bernoulli_model(alpha=0.7)
    with model:
        steps = [psm.SAMSStep(z), psm.CollapsedGibbsStep(z)]
        idata = pm.sample(draws=2000, step=steps, random_seed=42, **SAMPLE_KWARGS)
    labels = np.asarray(idata.labels["z"].values)[:, ::3].reshape(-1, len(BERNOULLI_DATA))
    wrong = exact_posterior(psm.priors.DirichletProcessPrior(alpha=0.7),
                            psm.BetaBernoulli(a=1.0, b=1.0), BERNOULLI_DATA)
    with pytest.raises(AssertionError):
        assert_partition_gof(labels, wrong)


@pytest.mark.parametrize("mp_ctx", ["spawn", "fork"])
def test_multiprocess_sampling_reproduces_sequential_draws(mp_ctx):
    data, _ = psm.datasets.jain_neal_bernoulli(6, n_per_component=6, seed=3)
    with pm.Model():
        alpha = pm.Gamma("alpha", 2.0, 1.0)
        z = psm.DirichletProcess("z", alpha=alpha, n=len(data))
        psm.ConjugateMixture("y", partition=z, component=psm.BetaBernoulli(a=1.0, b=1.0),
                             observed=data)

        def steps():
            return [psm.PGSMStep(z, num_particles=5, n_gibbs_sweeps=1), psm.SAMSStep(z),
                    psm.ConcentrationGibbs(alpha)]

        kwargs = {"draws": 30, "tune": 5, "chains": 2, "random_seed": 7, "progressbar": False,
                      "compute_convergence_checks": False}
        sequential = pm.sample(step=steps(), cores=1, **kwargs)
        parallel = pm.sample(step=steps(), cores=2, mp_ctx=mp_ctx, **kwargs)
    for name in ("z", "alpha"):
        np.testing.assert_array_equal(posterior_with_labels(sequential)[name].values,
                                      posterior_with_labels(parallel)[name].values)
    # the chains differ from each other (the seed is split per chain)
    assert not np.array_equal(sequential.posterior["alpha"].values[0],
                              sequential.posterior["alpha"].values[1])


CORES_STEPS = {
    "default": lambda z, alpha: None,  # what plain pm.sample() assigns
    "gibbs": lambda z, alpha: [psm.CollapsedGibbsStep(z, scan="random")],
    "sams_cluster": lambda z, alpha: [psm.SAMSStep(z, anchor_proposal="cluster",
                                                   n_gibbs_sweeps=1)],
    "sams_informed": lambda z, alpha: [psm.SAMSStep(z, anchor_proposal="cluster_informed",
                                                    n_gibbs_sweeps=1)],
    "rgsm": lambda z, alpha: [psm.RGSMStep(z, n_intermediate_scans=2)],
    "pgsm_informed": lambda z, alpha: [psm.PGSMStep(z, num_particles=4,
                                                    anchor_proposal="threshold_informed")],
    "arm_frozen": lambda z, alpha: [psm.ARMStep(z, library="frozen")],
    "arm_ensemble": lambda z, alpha: [psm.ARMStep(z)],
    "prior_slice": lambda z, alpha: [psm.SAMSStep(z), psm.PartitionPriorSlice(alpha)],
}


@pytest.mark.parametrize("step_name", sorted(CORES_STEPS))
def test_every_step_gives_the_same_draws_on_two_cores(step_name):
    data, _ = psm.datasets.jain_neal_bernoulli(6, n_per_component=4, seed=3)
    chains = 4 if step_name == "arm_ensemble" else 2  # population sampling needs >= 4 chains
    results = []
    for cores in (1, 2):
        with pm.Model():
            alpha = pm.Gamma("alpha", 2.0, 1.0)
            z = psm.DirichletProcess("z", alpha=alpha, n=len(data))
            psm.ConjugateMixture("y", partition=z, component=psm.BetaBernoulli(a=1.0, b=1.0),
                                 observed=data)
            results.append(pm.sample(draws=15, tune=15, chains=chains, cores=cores,
                                     step=CORES_STEPS[step_name](z, alpha), random_seed=11,
                                     progressbar=False, compute_convergence_checks=False))
    sequential, parallel = results
    for name in ("z", "alpha"):
        np.testing.assert_array_equal(posterior_with_labels(sequential)[name].values,
                                      posterior_with_labels(parallel)[name].values)
    assert len({sequential.posterior["alpha"].values[c].tobytes() for c in range(chains)}) > 1


def test_main_job_runs(tmp_path, capsys):
    import logging
    import re

    from pymc_splitmerge.demo import SAMPLERS, main

    class Records(logging.Handler):
        def __init__(self):
            super().__init__(logging.DEBUG)
            self.messages = []

        def emit(self, record):
            self.messages.append(record.getMessage())

    records = Records()
    logging.getLogger("pymc").addHandler(records)
    try:
        code = main(["--attributes", "6", "--draws", "40", "--tune", "10", "--chains", "2",
                     "--samplers", "gibbs", "sams_gibbs", "--output", str(tmp_path)])
    finally:
        logging.getLogger("pymc").removeHandler(records)
    assert code == 0
    out = capsys.readouterr().out
    assert "r_hat" in out and "log_joint" in out and "comparison" in out
    # no unexplained PyMC chatter (warm-up "Only 2 samples per chain", "took N seconds")
    assert records.messages == []
    assert "compiling / loading the kernels of collapsed Gibbs" in out
    files = sorted(path.name for path in tmp_path.glob("*.png"))
    assert len(files) == 6
    assert all(re.fullmatch(r"[A-Za-z0-9_.-]+", name) for name in files), files
    assert all(re.fullmatch(r"[A-Za-z0-9_-]+", sampler.name) for sampler in SAMPLERS)
    # the tables explain themselves, the seconds say what they include, the files are indexed
    assert "How to read the summary tables" in out and "How to read the comparison" in out
    for name in ("n_clusters", "log_joint", "iat", "r_hat", "ess_bulk", "distance_to_reference",
                 "seconds", "mean K", "ARI(point estimate, truth)"):
        assert name in out
    assert "(wall, kernels compiled before)" in out
    index = (tmp_path / "INDEX.md").read_text()
    listed = re.findall(r"^- `([^`]+)`: (.*)$", index, flags=re.MULTILINE)
    assert sorted(name for name, _ in listed) == files
    assert all("d = 6" in text and ("Gibbs" in text) for _, text in listed), listed


def test_plots_fit_their_figures():
    """Every text of the three plots lies inside its figure; titles clear the colour bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, size=(2, 30, 40))
    for make in (psm.plot_n_clusters, psm.plot_block_fractions, psm.plot_similarity_matrix):
        figure, _ = make(labels)
        figure.canvas.draw()
        renderer = figure.canvas.get_renderer()
        box = figure.bbox
        for ax in figure.axes:
            for text in (ax.title, ax.xaxis.label, ax.yaxis.label):
                if not text.get_text():
                    continue
                extent = text.get_window_extent(renderer)
                assert (extent.x0 >= box.x0 - 1 and extent.x1 <= box.x1 + 1
                        and extent.y0 >= box.y0 - 1 and extent.y1 <= box.y1 + 1), (
                    make.__name__, text.get_text())
        if make is psm.plot_similarity_matrix:
            heat_map, colour_bar = figure.axes
            title = heat_map.title.get_window_extent(renderer)
            assert not title.overlaps(colour_bar.get_window_extent(renderer))
        plt.close(figure)
