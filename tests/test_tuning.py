"""Adaptation of the partition steps while PyMC tunes: alone and inside a ``CompoundStep``.

PyMC sets ``tune`` only on the top-level step (``step.tune = bool(tune)`` in pymc 5's
``_iter_sample``; pymc 5's multiprocess sampler sets nothing) and propagates only
``stop_tuning()`` into a ``CompoundStep``; pymc 6 additionally hands every step
``setup_chain(rng, tune, draws)``.  Every step that adapts (the informed anchor proposals of
SAMS and PGSM) must therefore adapt during the tuning draws of *every* chain, whether it runs
alone or next to another step, and never after tuning.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest

import pymc_splitmerge as psm

DATA = np.array([[1, 1, 0, 0], [1, 1, 0, 1], [1, 0, 0, 0], [0, 0, 1, 1], [0, 1, 1, 1],
                 [0, 1, 1, 0]])
TUNE, DRAWS, CHAINS = 7, 5, 2

ADAPTING_STEPS = {
    "sams_cluster_informed": lambda z: psm.SAMSStep(z, anchor_proposal="cluster_informed"),
    "sams_threshold_informed": lambda z: psm.SAMSStep(z, anchor_proposal="threshold_informed"),
    "pgsm_cluster_informed": lambda z: psm.PGSMStep(z, num_particles=4,
                                                    anchor_proposal="cluster_informed"),
    "pgsm_threshold_informed": lambda z: psm.PGSMStep(z, num_particles=4,
                                                      anchor_proposal="threshold_informed"),
}

PARTNERS = {
    # name -> (random alpha?, other steps)
    "alone": (False, lambda z, alpha: []),
    "with_concentration_gibbs": (True, lambda z, alpha: [psm.ConcentrationGibbs(alpha)]),
    "with_collapsed_gibbs": (False, lambda z, alpha: [psm.CollapsedGibbsStep(z)]),
}


def _run(step_name, partner, tune):
    """Sample with a spy on ``anchor_proposal.adapt``.

    Returns the draw indices (within each chain) of every ``adapt`` call, per chain, and the
    step.
    """
    random_alpha, make_others = PARTNERS[partner]
    with pm.Model():
        alpha = pm.Gamma("alpha", 2.0, 1.0) if random_alpha else 1.0
        z = psm.DirichletProcess("z", alpha=alpha, n=len(DATA))
        psm.ConjugateMixture("y", partition=z, component=psm.BetaBernoulli(a=0.5, b=0.5),
                             observed=DATA)
        step = ADAPTING_STEPS[step_name](z)
        calls = []  # one list per chain
        original_adapt = step.anchor_proposal.adapt
        original_kernel_step = step.kernel_step
        original_reset = step.reset_chain

        def reset_chain():
            original_reset()
            calls.append([])
            step._spy_draw = 0

        def kernel_step(*args):
            out = original_kernel_step(*args)
            step._spy_draw += 1
            return out

        def adapt(*args):
            calls[-1].append(step._spy_draw)
            return original_adapt(*args)

        step.anchor_proposal.adapt = adapt
        step.kernel_step = kernel_step
        step.reset_chain = reset_chain
        others = make_others(z, alpha)
        pm.sample(draws=DRAWS, tune=tune, chains=CHAINS, cores=1,
                  step=[step, *others] if others else step, random_seed=3,
                  progressbar=False, compute_convergence_checks=False)
    # reset_chain may run more than once before a chain starts (pymc 6: set_rng and
    # setup_chain); keep the lists of the chains that drew
    return [chain for chain in calls if chain or tune == 0][-CHAINS:], step


@pytest.mark.parametrize("partner", sorted(PARTNERS))
@pytest.mark.parametrize("step_name", sorted(ADAPTING_STEPS))
def test_adapts_during_tuning_of_every_chain_only(step_name, partner):
    calls, step = _run(step_name, partner, TUNE)
    assert len(calls) == CHAINS
    for chain_calls in calls:
        # adapt() runs before the move of each tuning draw 0..TUNE-1 of each chain, never after
        assert chain_calls == list(range(TUNE)), calls
    assert step.anchor_proposal.is_adapted and not step.tune


@pytest.mark.parametrize("step_name", sorted(ADAPTING_STEPS))
def test_no_adaptation_without_tuning(step_name):
    calls, step = _run(step_name, "with_concentration_gibbs", 0)
    assert all(chain == [] for chain in calls)
    assert not step.anchor_proposal.is_adapted and not step.tune
