"""An interrupted or killed ``ZarrTrace`` run reads as exactly the draws it completed.

``ZarrTrace`` allocates ``tune + draws`` iterations per chain, filled with labels 0 / NaN, and
records how many it wrote in ``_sampling_state/draw_idx``; ``pm.sample`` moves the warm-up to
the ``warmup_*`` groups only when it returns.  Two real runs of a 2-chain sequential sample:

* Ctrl-C: a callback raises ``KeyboardInterrupt`` in chain 0; ``pm.sample`` returns (chain 0
  stops early, chain 1 runs to the end) and splits the warm-up off;
* killed: a callback raises an exception ``pm.sample`` does not catch, so the store is left
  as kill -9 leaves it (flushed chunks and ``draw_idx`` written, no split, chain 1 never ran).

Each reader (``zarr_posterior``, ``iter_zarr_draws``, ``completed_draws``, ``summary``) must
return the post-warm-up draws the callback saw being written, and nothing else.
"""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import pytest

import pymc_splitmerge as psm
import pymc_splitmerge.analysis as psa

pytestmark = pytest.mark.filterwarnings(
    "ignore:`return_inferencedata=False` is deprecated:FutureWarning")

TUNE, DRAWS, CHUNK, STOP_AT = 5, 20, 3, 14  # stop at the 14th iteration of chain 0


class _Killed(BaseException):
    """Stands for kill -9: nothing of pm.sample's own clean-up after the draws runs."""


def _run(zarr_trace, tmp_path, interrupt, stop_at=STOP_AT):
    zarr, ZarrTrace = zarr_trace
    data = np.random.default_rng(3).integers(0, 2, size=(12, 3))
    with pm.Model() as model:
        z = psm.DirichletProcess("z", alpha=pm.Gamma("alpha", 2.0, 1.0), n=len(data))
        psm.ConjugateMixture("y", partition=z, component=psm.BetaBernoulli(a=1.0, b=1.0),
                             observed=data)
    seen = {0: [], 1: []}  # every iteration's labels and alpha, as recorded

    def callback(trace, draw):
        seen[draw.chain].append((np.array(draw.point["z"]), float(np.exp(draw.point["alpha_log__"]))))
        if draw.chain == 0 and len(seen[0]) == stop_at:
            raise interrupt

    trace = ZarrTrace(store=zarr.DirectoryStore(str(tmp_path / "trace.zarr")),
                      draws_per_chunk=CHUNK)
    try:
        with model:
            pm.sample(draws=DRAWS, tune=TUNE, chains=2, cores=1, trace=trace, callback=callback,
                      return_inferencedata=False, compute_convergence_checks=False,
                      progressbar=False, random_seed=2, quiet=True)
    except _Killed:
        pass
    return trace, seen


def _read(call):
    """``call()`` and the warnings it gave (checked after the values it returned)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    return result, " ".join(str(w.message) for w in caught)


def _written(seen, chain, draw_idx):
    """The post-warm-up draws of ``chain`` among its first ``draw_idx`` iterations."""
    kept = seen[chain][TUNE:draw_idx]
    return np.array([labels for labels, _ in kept]), np.array([alpha for _, alpha in kept])


def test_ctrl_c_reads_only_the_completed_draws(zarr_trace, tmp_path):
    trace, seen = _run(zarr_trace, tmp_path, KeyboardInterrupt)
    draw_idx = trace._sampling_state.draw_idx[:]
    assert draw_idx.tolist() == [12, TUNE + DRAWS]  # chain 0: 4 chunks of 3 flushed, 13-14 lost
    assert "warmup_posterior" in trace.groups()  # pm.sample returned and split the warm-up off
    labels0, _ = _written(seen, 0, 12)
    labels1, alpha1 = _written(seen, 1, TUNE + DRAWS)
    # the rectangular read keeps what pm.sample keeps (chain 1 alone: 20 > 2 x 7 draws)
    posterior, said = _read(lambda: psa.zarr_posterior(trace))
    np.testing.assert_array_equal(posterior["z"].values, labels1[None])
    np.testing.assert_allclose(posterior["alpha"].values, alpha1[None])
    assert posterior["chain"].values.tolist() == [1]
    assert "chain 0: 7, chain 1: 20" in said
    # the stream gives every completed draw of each chain and no fill values
    blocks = list(psa.iter_zarr_draws(trace, "z"))
    for chain, expected in ((0, labels0), (1, labels1)):
        stream = np.concatenate([block for c, _, block in blocks if c == chain])
        np.testing.assert_array_equal(stream, expected)
    stats, _ = _read(lambda: psa.zarr_posterior(trace, group="sample_stats",
                                                draws=slice(0, 7)))
    assert not stats["in_warmup"].values.any()
    np.testing.assert_array_equal(psa.completed_draws(trace), [7, DRAWS])
    np.testing.assert_array_equal(psa.completed_draws(trace, "warmup_posterior"), [TUNE, TUNE])
    table, said = _read(lambda: psm.summary(trace, reference=None))
    n_clusters = labels1.max(axis=-1) + 1
    assert table.loc["n_clusters", "mean"] == pytest.approx(n_clusters.mean())
    assert "different numbers of draws" in said


def test_killed_run_reads_only_the_completed_draws_without_warm_up(zarr_trace, tmp_path):
    trace, seen = _run(zarr_trace, tmp_path, _Killed())
    draw_idx = trace._sampling_state.draw_idx[:]
    assert draw_idx.tolist() == [12, 0]  # chain 1 never started
    assert "warmup_posterior" not in trace.groups()  # no split: the warm-up is in posterior
    assert trace.posterior["z"].shape[1] == TUNE + DRAWS
    labels0, alpha0 = _written(seen, 0, 12)
    for source in (trace, str(tmp_path / "trace.zarr")):  # the object, or the store reopened
        posterior, said = _read(lambda source=source: psa.zarr_posterior(source))
        np.testing.assert_array_equal(posterior["z"].values, labels0[None])
        np.testing.assert_allclose(posterior["alpha"].values, alpha0[None])
        assert posterior["draw"].values.tolist() == list(range(7))
        assert "chain 0: 7, chain 1: 0" in said
        blocks = list(psa.iter_zarr_draws(source, "z", draws_per_block=2))
        assert {chain for chain, _, _ in blocks} == {0}
        np.testing.assert_array_equal(np.concatenate([b for _, _, b in blocks]), labels0)
    warm_up, _ = _read(lambda: psa.zarr_posterior(trace, "z", group="warmup_posterior",
                                                  draws=[0, -1]))
    np.testing.assert_array_equal(warm_up["z"].values[0], [seen[0][0][0], seen[0][TUNE - 1][0]])
    stats, _ = _read(lambda: psa.zarr_posterior(trace, group="sample_stats"))
    assert not stats["in_warmup"].values.any() and stats.sizes["draw"] == 7
    table, _ = _read(lambda: psm.summary(trace, reference=None))
    assert table.loc["n_clusters", "mean"] == pytest.approx((labels0.max(axis=-1) + 1).mean())


def test_no_completed_draw_is_an_error(zarr_trace, tmp_path):
    trace, _ = _run(zarr_trace, tmp_path, _Killed(), stop_at=4)  # during the warm-up
    with pytest.raises(ValueError, match="no completed draw"):
        psa.zarr_posterior(trace)
    assert psa.completed_draws(trace, "warmup_posterior").tolist() == [3, 0]
