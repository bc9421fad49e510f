"""HyperparameterSlice: assignment, log density, plumbing; the batched SPD log-determinant.

The step's exactness (enumeration with quadrature through ``pm.sample``, with negative
controls) is tested in ``tests/test_hierarchical_exact.py``.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest

import pymc_splitmerge as psm
from pymc_splitmerge.core.linalg import inverse_stack, log_det_spd_stack
from pymc_splitmerge.distributions.statistics import mark_written_labels
from pymc_splitmerge.kernels.hit_and_run_slice import (
    MetricEstimator,
    hit_and_run_slice_move,
    orthonormal_directions,
)

RNG = np.random.default_rng(24)
Y = np.r_[RNG.normal(-2.0, 1.0, (12, 2)), RNG.normal(2.0, 1.0, (12, 2))]


def _model(extra_term=False):
    with pm.Model() as model:
        mu0 = pm.Normal("mu0", 0.0, 1.0, shape=2)
        kappa0 = pm.Gamma("kappa0", 2.0, 2.0)
        scale = pm.HalfNormal("scale", 2.0)
        alpha = pm.Gamma("alpha", 1.0, 1.0)
        z = psm.DirichletProcess("z", alpha=alpha, n=len(Y))
        psm.ConjugateMixture("y", partition=z, component=psm.NormalInverseWishart(
            mu0=mu0, kappa0=kappa0, nu0=4.0, psi0=scale * np.eye(2)), observed=Y)
        if extra_term:  # scale also drives another term: not only the family
            pm.Normal("w", mu=scale, sigma=1.0, observed=0.5)
    return model


def _assigned(model):
    from pymc.sampling.mcmc import assign_step_methods

    with model:
        _, selected = assign_step_methods(model)
    return {cls.__name__: sorted(v.name for v in values) for cls, values in selected.items()}


def test_pymc_assigns_the_family_hyperparameters_as_one_block():
    assigned = _assigned(_model())
    assert assigned["HyperparameterSlice"] == ["kappa0_log__", "mu0", "scale_log__"]
    assert assigned["ConcentrationGibbs"] == ["alpha_log__"]
    assert assigned["DefaultPartitionStep"] == ["z"]


def test_a_hyperparameter_that_drives_another_term_keeps_pymc_choice():
    assigned = _assigned(_model(extra_term=True))
    assert assigned["HyperparameterSlice"] == ["kappa0_log__", "mu0"]
    assert assigned["NUTS"] == ["scale_log__"]


def test_log_density_differences_equal_the_model_log_density():
    """Moving the block changes the step's density exactly as it changes the model's."""
    model = _model()
    labels = mark_written_labels(np.repeat([0, 1], 12).astype(model["z"].dtype))
    point = {**model.initial_point(), "z": labels}
    step = psm.HyperparameterSlice([model["mu0"], model["kappa0"], model["scale"]],
                                   model=model)
    model_logp = model.compile_logp()
    fixed = step._fixed_inputs(point)
    base = step._flatten(point)
    rng = np.random.default_rng(1)
    for _ in range(4):
        moved = base + rng.normal(size=base.size)
        new_point = {**point, "mu0": moved[:2], "kappa0_log__": moved[2],
                     "scale_log__": moved[3]}
        expected = model_logp(new_point) - model_logp(point)
        got = step.log_density(moved, fixed) - step.log_density(base, fixed)
        assert got == pytest.approx(expected, abs=1e-9)
    # outside the family's domain: -inf, never NaN or an error
    with pm.Model() as bad:
        nu0 = pm.Normal("nu0", 4.0, 1.0)
        z = psm.DirichletProcess("z", alpha=1.0, n=len(Y))
        psm.ConjugateMixture("y", partition=z, component=psm.NormalInverseWishart(
            mu0=np.zeros(2), kappa0=1.0, nu0=nu0, psi0=np.eye(2)), observed=Y)
        step = psm.HyperparameterSlice([nu0])
    point = {"nu0": np.array(0.5), "z": np.zeros(len(Y), dtype=bad["z"].dtype)}
    assert step.log_density(np.array([0.5]), step._fixed_inputs(point)) == -np.inf
    # a current point there: a clear error naming the variable, never an endless loop
    with pytest.raises(pm.exceptions.SamplingError, match="nu0"):
        step.step(point)


def test_sampling_is_reproducible_and_identical_for_one_and_two_cores():
    def run(cores):
        with _model():
            idata = pm.sample(draws=15, tune=15, chains=2, cores=cores, random_seed=7,
                              progressbar=False, compute_convergence_checks=False)
        return idata

    first, second = run(1), run(2)
    for name in ("mu0", "kappa0", "scale"):
        values = np.asarray(first["posterior"][name].values)
        np.testing.assert_array_equal(values, np.asarray(second["posterior"][name].values))
        assert np.unique(values.reshape(values.shape[0] * values.shape[1], -1),
                         axis=0).shape[0] > 10  # the hyperparameters move
    evaluations = np.asarray(first["sample_stats"]["hyperslice_evaluations"].values)
    # plain pm.sample() alternates the slice step with the partition step, 2 rounds a draw of
    # max(ceil(4 / 2), 3) = 3 moves on the 4-D block (mu0 of length 2, kappa0, scale); the
    # stats are the last round's, and each move evaluates at least twice
    assert evaluations.min() >= 1 + 2 * 3


def test_default_number_of_moves_is_one_sweep_of_the_block_and_at_least_three():
    model = _model()
    with model:
        block = psm.HyperparameterSlice([model["mu0"], model["kappa0"], model["scale"]])
        single = psm.HyperparameterSlice([model["kappa0"]])
        given = psm.HyperparameterSlice([model["kappa0"]], n_updates=7)
    assert (block.dimension, block.n_updates) == (4, 4)
    assert (single.dimension, single.n_updates) == (1, 3)
    assert given.n_updates == 7


def test_bad_arguments_are_refused_with_their_names():
    model = _model()
    with model:
        with pytest.raises(ValueError, match="n_updates"):
            psm.HyperparameterSlice([model["kappa0"]], n_updates=0)
        with pytest.raises(ValueError, match="width"):
            psm.HyperparameterSlice([model["kappa0"]], width=-1.0)
        with pytest.raises(ValueError, match="continuous"):
            psm.HyperparameterSlice([model["z"]])
        with pytest.raises(TypeError, match="unexpected keyword"):
            psm.HyperparameterSlice([model["kappa0"]], widht=1.0)


def test_log_det_spd_stack_matches_numpy_and_flags_non_positive_definite():
    rng = np.random.default_rng(3)
    for dim in (1, 2, 4, 7):
        factors = rng.normal(size=(5, dim, dim))
        matrices = factors @ factors.transpose(0, 2, 1) + 0.1 * np.eye(dim)
        np.testing.assert_allclose(log_det_spd_stack(matrices),
                                   np.linalg.slogdet(matrices)[1], rtol=1e-12, atol=1e-12)
        broken = matrices.copy()
        broken[2] = -np.eye(dim)  # negative definite (slogdet's sign would be +1 for even D)
        result = log_det_spd_stack(broken)
        assert np.isnan(result[2]) and np.isfinite(np.delete(result, 2)).all()
    assert log_det_spd_stack(np.empty((0, 3, 3))).shape == (0,)
    with pytest.raises(ValueError, match="square"):
        log_det_spd_stack(np.ones((2, 3, 4)))



@pytest.mark.parametrize("linker", ["cvm", "numba"])
def test_batched_log_det_compiled_matches_the_numba_loop(linker):
    """The Op as a compiled model runs it, in PyTensor's C virtual machine (its C code) and
    in PyTensor's numba backend (the registered numba loop; pytensor 3's default), against
    the numba loop and NumPy: stacks of every size (none, one, several; D = 1..7), a matrix
    that is not positive definite or has a NaN (NaN), strided views (the lower triangle read
    through strides) and the output buffer reused by calls of other lengths."""
    import pytensor
    import pytensor.tensor as pt

    from pymc_splitmerge.core.linalg import log_det_spd_stack_compiled
    from pymc_splitmerge.distributions.statistics import BatchedLogDet

    matrices = pt.tensor3("matrices")
    output = BatchedLogDet()(matrices)
    if linker == "cvm":
        compiled = pytensor.function([matrices], output,
                                     mode=pytensor.compile.mode.Mode(linker="cvm"))
        if pytensor.config.cxx:  # without a compiler PyTensor runs ``perform``
            (thunk,) = compiled.vm.thunks
            assert getattr(thunk, "cthunk", None) is not None, "C code not compiled"
    else:
        from pytensor.link.numba.dispatch import numba_funcify

        # the registered loop, not ``perform`` in numba's object mode
        assert numba_funcify(output.owner.op, node=output.owner) is log_det_spd_stack_compiled
        compiled = pytensor.function([matrices], output, mode="NUMBA")
    rng = np.random.default_rng(4)
    for dim in (1, 2, 4, 7):
        for count in (0, 1, 5, 2):  # the output buffer of the previous call is reused
            factors = rng.normal(size=(count, dim, dim))
            stack = factors @ factors.transpose(0, 2, 1) + 0.1 * np.eye(dim)
            got = compiled(stack)
            assert got.shape == (count,)
            np.testing.assert_allclose(got, log_det_spd_stack(stack), rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(got, np.linalg.slogdet(stack)[1], rtol=1e-12,
                                       atol=1e-12)
        broken = np.tile(np.eye(dim) * 2.0, (4, 1, 1))
        broken[1] = -np.eye(dim)
        broken[2, dim - 1, dim - 1] = np.nan
        expected = np.array([dim * np.log(2.0), np.nan, np.nan, dim * np.log(2.0)])
        np.testing.assert_allclose(compiled(broken), expected, rtol=1e-12)
        # strided views: every other matrix, and transposed matrices (reads the upper
        # triangle of the original, equal to its lower one)
        factors = rng.normal(size=(6, dim, dim))
        stack = factors @ factors.transpose(0, 2, 1) + 0.1 * np.eye(dim)
        for view in (stack[::2], stack.transpose(0, 2, 1), np.asfortranarray(stack)):
            np.testing.assert_allclose(compiled(view), log_det_spd_stack(view), rtol=1e-12,
                                       atol=1e-12)
    with pytest.raises(ValueError, match="square"):
        compiled(np.ones((2, 3, 4)))

def _one_move_from_exact_draws(level_shift=0.0, n_draws=3000, seed=5, orthonormal=False):
    """Exact draws of a correlated 2-D Gaussian, one hit-and-run move each (a fixed,
    mismatched metric; directions uniform on the circle, or with ``orthonormal`` the first
    vector of a sweep of :func:`orthonormal_directions`); the moved draws' Mahalanobis radii
    (chi-square, 2 dof)."""
    from scipy import stats

    covariance = np.array([[1.0, 0.8], [0.8, 1.0]])
    precision = np.linalg.inv(covariance)
    factor = np.linalg.cholesky(np.array([[2.0, 0.0], [0.0, 0.5]]))
    rng = np.random.default_rng(seed)
    draws = rng.multivariate_normal(np.zeros(2), covariance, size=n_draws)

    def log_density(theta):
        return -0.5 * theta @ precision @ theta

    moved = np.empty_like(draws)
    for i, theta in enumerate(draws):
        direction = orthonormal_directions(2, 1, rng)[0] if orthonormal else None
        moved[i], _, _ = hit_and_run_slice_move(log_density, theta,
                                                log_density(theta) + level_shift, factor,
                                                2.0, 10, rng, direction)
    radii = np.einsum("ij,jk,ik->i", moved, precision, moved)
    return stats.kstest(radii, stats.chi2(2).cdf).pvalue, moved, draws


def test_hit_and_run_move_keeps_the_target_and_a_wrong_level_does_not():
    from pymc_splitmerge.testing import GOF_PVALUE_THRESHOLD

    pvalue, moved, draws = _one_move_from_exact_draws()
    assert pvalue >= GOF_PVALUE_THRESHOLD, pvalue
    assert np.mean(np.any(moved != draws, axis=1)) == 1.0  # every draw moved
    # negative control: a slice level drawn below p(theta) U (the move then spreads the
    # draws out)
    assert _one_move_from_exact_draws(level_shift=-1.0)[0] < GOF_PVALUE_THRESHOLD


def test_moves_along_orthonormal_directions_keep_the_target_and_a_wrong_level_does_not():
    from pymc_splitmerge.testing import GOF_PVALUE_THRESHOLD

    pvalue, moved, draws = _one_move_from_exact_draws(seed=6, orthonormal=True)
    assert pvalue >= GOF_PVALUE_THRESHOLD, pvalue
    assert np.mean(np.any(moved != draws, axis=1)) == 1.0
    assert _one_move_from_exact_draws(level_shift=-1.0, seed=6,
                                      orthonormal=True)[0] < GOF_PVALUE_THRESHOLD


def test_orthonormal_directions_are_sweeps_over_random_orthonormal_bases():
    rng = np.random.default_rng(3)
    directions = orthonormal_directions(3, 7, rng)
    assert directions.shape == (7, 3)
    for block in (directions[:3], directions[3:6]):
        np.testing.assert_allclose(block @ block.T, np.eye(3), atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(directions, axis=1), 1.0, rtol=1e-12)
    assert not np.allclose(directions[:3], directions[3:6])  # a new basis per sweep
    # Haar: the first vector is uniform on the sphere (mean 0, second moment I / d)
    first = np.array([orthonormal_directions(3, 1, rng)[0] for _ in range(4000)])
    np.testing.assert_allclose(first.mean(axis=0), 0.0, atol=0.05)
    np.testing.assert_allclose(first.T @ first / 4000, np.eye(3) / 3, atol=0.03)
    assert orthonormal_directions(1, 2, rng).shape == (2, 1)


def test_the_step_takes_its_directions_from_a_stream_of_bases_reset_per_chain():
    """Rows left by one call are used by the next (two rounds of 3 moves on a 6-D block are
    one sweep of one basis); a chain start forgets them and the stream follows the chain's
    generator (so cores=1 and cores>1 agree)."""
    with _model() as model:
        step = psm.HyperparameterSlice([model["mu0"], model["kappa0"], model["scale"],
                                        model["alpha"]])
    dimension = step.dimension
    assert dimension == 5
    step.set_rng(np.random.default_rng(7))
    first, second = step._next_directions(3), step._next_directions(2)
    basis = np.r_[first, second]
    np.testing.assert_allclose(basis @ basis.T, np.eye(dimension), atol=1e-12)  # one basis
    np.testing.assert_array_equal(basis, orthonormal_directions(
        dimension, dimension, np.random.default_rng(7)))
    third = step._next_directions(4)  # a new basis
    assert not np.allclose(third @ basis.T, 0.0, atol=1e-6)
    step.set_rng(np.random.default_rng(7))  # a new chain: the rows left are forgotten
    np.testing.assert_array_equal(step._next_directions(3), first)


def test_metric_estimator_matches_the_sample_covariance():
    rng = np.random.default_rng(2)
    draws = rng.multivariate_normal([1.0, -1.0], [[2.0, 0.6], [0.6, 0.5]], size=256)
    metric = MetricEstimator(2)
    assert np.array_equal(metric.factor, np.eye(2))
    for draw in draws:
        metric.update(draw)
    expected = (256 / 261) * np.cov(draws.T) + 1e-3 * (5 / 261) * np.eye(2)
    np.testing.assert_allclose(metric.factor @ metric.factor.T, expected, rtol=1e-10)


def test_inverse_stack_matches_numpy_and_flags_singular_stacks():
    rng = np.random.default_rng(5)
    for dim in (1, 2, 4, 7):
        matrices = rng.normal(size=(5, dim, dim)) + 3.0 * np.eye(dim)
        np.testing.assert_allclose(inverse_stack(matrices), np.linalg.inv(matrices),
                                   rtol=1e-10, atol=1e-12)
        permuted = matrices[:, ::-1]  # rows reversed: pivoting needed
        np.testing.assert_allclose(inverse_stack(permuted), np.linalg.inv(permuted),
                                   rtol=1e-10, atol=1e-12)
        singular = matrices.copy()
        singular[3] = 0.0
        singular[3, 0, 0] = 1.0  # rank 1 (for dim > 1), zero for dim = 1 below
        if dim == 1:
            singular[3, 0, 0] = 0.0
        assert np.isnan(inverse_stack(singular)).all()  # as np.linalg.inv raising: all NaN
    assert inverse_stack(np.empty((0, 3, 3))).shape == (0, 3, 3)
    with pytest.raises(ValueError, match="square"):
        inverse_stack(np.ones((2, 3, 4)))


@pytest.mark.parametrize("linker", ["cvm", "numba"])
def test_batched_inverse_compiled_matches_perform(linker):
    """BatchedInverse as a compiled model runs it: ``perform`` (NumPy) in the C virtual
    machine, the registered numba loop in PyTensor's numba backend (pymc 6's default; not
    ``perform`` in object mode), compared with NumPy; a singular stack gives NaN in both."""
    import pytensor
    import pytensor.tensor as pt

    from pymc_splitmerge.core.linalg import inverse_stack_compiled
    from pymc_splitmerge.distributions.statistics import BatchedInverse

    matrices = pt.tensor3("matrices")
    output = BatchedInverse()(matrices)
    if linker == "cvm":
        compiled = pytensor.function([matrices], output,
                                     mode=pytensor.compile.mode.Mode(linker="cvm"))
    else:
        from pytensor.link.numba.dispatch import numba_funcify

        implementation = numba_funcify(output.owner.op, node=output.owner)
        assert implementation is inverse_stack_compiled
        compiled = pytensor.function([matrices], output, mode="NUMBA")
    rng = np.random.default_rng(6)
    for dim in (1, 2, 4, 7):
        for count in (0, 1, 5):
            stack = rng.normal(size=(count, dim, dim)) + 3.0 * np.eye(dim)
            got = compiled(stack)
            assert got.shape == (count, dim, dim)
            np.testing.assert_allclose(got, np.linalg.inv(stack), rtol=1e-10, atol=1e-12)
        view = (rng.normal(size=(6, dim, dim)) + 3.0 * np.eye(dim)).transpose(0, 2, 1)[::2]
        np.testing.assert_allclose(compiled(view), np.linalg.inv(view), rtol=1e-10,
                                   atol=1e-12)
        singular = np.tile(np.eye(dim), (3, 1, 1))
        singular[1] = 0.0
        assert np.isnan(compiled(singular)).all()
