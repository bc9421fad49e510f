r"""Geweke's joint-distribution test of partition kernels ("getting it right").

Model.  For a partition prior with concentration :math:`α` (a Gibbs-type prior built by
``prior_factory(α)``) and a conjugate component family,

.. math::

    α \sim \mathrm{Gamma}(a, \text{rate } b), \qquad c \mid α \sim p(c \mid α), \qquad
    x \mid c \sim \prod_{\text{clusters } h} \int \prod_{i: c_i = h} f(x_i \mid θ_h)\,
    p(θ_h)\, dθ_h

(``α`` is held fixed when no Gamma prior is given).

Two simulators of this joint law are compared (Geweke 2004, section 2):

marginal-conditional
    i.i.d. draws :math:`(α, c, x)` straight from the generative model above;
successive-conditional
    a Markov chain started from one such draw that repeats (i) fresh data
    :math:`x \sim p(x \mid c)`, (ii) the kernel under test, which must leave
    :math:`p(c \mid x, α)` invariant, (iii) an update of :math:`α` leaving
    :math:`p(α \mid c)` invariant (:math:`α ⟂ x \mid c`).  Each step preserves the joint law,
    so the chain is stationary at the joint law from its first state on.

For every test function :math:`g` the two means must agree.  With :math:`\bar g_{MC}` (standard
error :math:`s/\sqrt{M}` from :math:`M` independent draws) and :math:`\bar g_{SC}` (standard
error by non-overlapping batch means over :math:`B` batches, which accounts for the
autocorrelation of the chain; Geweke 2004, section 3),

.. math::

    z = \frac{\bar g_{MC} - \bar g_{SC}}{\sqrt{\widehat{se}^2_{MC} + \widehat{se}^2_{SC}}}

is referred to a Student t law with the Welch–Satterthwaite degrees of freedom (the batch-means
variance has only :math:`B - 1` degrees of freedom).  A kernel that leaves the wrong
conditional invariant moves the chain's stationary law away from the joint law, which a
function of :math:`(α, c, x)` detects; functions that couple :math:`c` with :math:`x`
(``log_likelihood``) detect kernels that use the data wrongly.

Significance budget.  The test passes when every two-sided p-value exceeds
``pvalue_threshold / n_functions`` (Bonferroni over the test functions), with
``pvalue_threshold`` defaulting to the suite-wide per-test threshold
:data:`pymc_splitmerge.testing.gof.GOF_PVALUE_THRESHOLD`.

References
----------
.. [1] Geweke, J. (2004). Getting it right: joint distribution tests of posterior simulators.
   JASA 99(467), 799-804.  Sections 2-3.
.. [2] Escobar, M. D. and West, M. (1995). Bayesian density estimation and inference using
   mixtures.  JASA 90(430), 577-588 (the default update of α).
.. [3] Flegal, J. M. and Jones, G. L. (2010). Batch means and spectral variance estimators in
   Markov chain Monte Carlo.  Annals of Statistics 38(2), 1034-1070 (batch means, B ≈ √N).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from pymc_splitmerge.kernels.concentration import escobar_west_update
from pymc_splitmerge.kernels.state import PartitionState
from pymc_splitmerge.priors import DirichletProcessPrior, sample_partitions
from pymc_splitmerge.testing.gof import GOF_PVALUE_THRESHOLD as _DEFAULT_THRESHOLD

__all__ = [
    "GEWEKE_TEST_FUNCTIONS",
    "GewekeResult",
    "assert_geweke",
    "batch_means_standard_error",
    "geweke_test",
    "register_data_simulator",
    "sample_prior_partitions",
    "simulate_data",
]

GEWEKE_TEST_FUNCTIONS = (
    "n_clusters",
    "alpha",
    "largest_cluster_size",
    "points_0_1_together",
    "log_sum_squared_sizes",
    "log_likelihood",
)
"""Names of the built-in test functions (``alpha`` only when α is random):

``n_clusters`` K; ``alpha``; ``largest_cluster_size``; ``points_0_1_together`` (1 when points 0
and 1 share a cluster); ``log_sum_squared_sizes`` log Σ_b |b|² (a relabelling-invariant
statistic of the partition); ``log_likelihood`` log p(x | c) under the family (couples the
partition with the data)."""


# ----------------------------------------------------------------------------- data given c


def _simulate_with_family(family, labels, n_clusters, rng, dim):
    """Default simulator: the family's own forward sampler (``ComponentFamily.sample_data``)."""
    if family.data_dim is None:
        family = family.with_values()  # a copy, bound to ``dim`` (the user's stays unbound)
        family.prepare_data(np.zeros((0, dim)))
    return family.sample_data(rng, labels)


_DATA_SIMULATORS: dict[type, Callable] = {}
"""Simulators registered with :func:`register_data_simulator`, for families without an
observation sampler of their own (e.g. ``GridComponent``, whose data are log-likelihood
vectors); they override the family's ``sample_data``."""


def register_data_simulator(family_class: type, simulator: Callable) -> None:
    """Register the generative sampler of data given a partition for a family class.

    Parameters
    ----------
    family_class : type
        A ``ComponentFamily`` subclass.
    simulator : callable
        ``simulator(family, labels, n_clusters, rng, data_dim) -> ndarray (n, data_dim)``:
        one parameter draw per cluster from the family's prior, then the points of cluster
        ``h`` (``labels == h``, labels canonical ``0..n_clusters-1``) i.i.d. given it.
    """
    if not isinstance(family_class, type):
        raise TypeError(f"family_class must be a class; got {family_class!r}")
    if not callable(simulator):
        raise TypeError(f"simulator must be callable; got {simulator!r}")
    _DATA_SIMULATORS[family_class] = simulator


def _simulator_for(family) -> Callable:
    for cls in type(family).__mro__:
        if cls in _DATA_SIMULATORS:
            return _DATA_SIMULATORS[cls]
    if family.has_observation_sampler():
        return _simulate_with_family
    raise TypeError(
        f"no data simulator for {type(family).__name__} (its family has no observation "
        "sampler). Register one with register_data_simulator(family_class, simulator)."
    )


def _data_dim(family, data_dim) -> int:
    bound = family.data_dim
    if data_dim is None:
        if bound is None:
            raise ValueError(
                f"{type(family).__name__} has scalar hyperparameters only: pass data_dim "
                "(the width of a data row)"
            )
        return int(bound)
    if isinstance(data_dim, bool) or int(data_dim) != data_dim or data_dim < 1:
        raise ValueError(f"data_dim must be a positive integer; got {data_dim!r}")
    if bound is not None and bound != data_dim:
        raise ValueError(f"data_dim={data_dim} but the family is bound to dimension {bound}")
    return int(data_dim)


def simulate_data(family, labels, rng: np.random.Generator, data_dim: int | None = None):
    """Draw data given a partition from the family's generative model.

    Each cluster gets its own parameter drawn from the family's prior, then its points are
    drawn i.i.d. given that parameter (e.g. BetaBernoulli: ``θ_h ~ Beta(a, b)`` per attribute,
    ``x_ij ~ Bernoulli(θ_{c_i j})``; NormalInverseWishart: ``Σ_h ~ InvWishart(ν0, Ψ0)``,
    ``μ_h ~ N(μ0, Σ_h / κ0)``, ``x_i ~ N(μ_{c_i}, Σ_{c_i})``).

    Parameters
    ----------
    family : ComponentFamily
        A numeric family whose class has an observation sampler
        (:meth:`~pymc_splitmerge.components.ComponentFamily.sample_observations`; every
        built-in family but ``GridComponent``) or a registered simulator (see
        :func:`register_data_simulator`).
    labels : array_like of int, shape (n,)
        Any labelling of the partition.
    rng : numpy.random.Generator
    data_dim : int, optional
        Width of a data row; required when the family is not bound to a dimension yet.

    Returns
    -------
    ndarray of float64, shape (n, data_dim)
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator; got {type(rng).__name__}")
    if not family.is_numeric:
        raise ValueError(f"{type(family).__name__} has symbolic hyperparameters; use with_values")
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.dtype.kind not in "iu":
        raise ValueError(f"labels must be a 1-D integer array; got {labels.dtype} {labels.shape}")
    _, canonical = np.unique(labels, return_inverse=True)
    n_clusters = int(canonical.max()) + 1 if canonical.size else 0
    simulator = _simulator_for(family)
    x = simulator(family, canonical, n_clusters, rng, _data_dim(family, data_dim))
    return np.ascontiguousarray(x, dtype=np.float64)


# ----------------------------------------------------------------------------- c given alpha


def sample_prior_partitions(prior_factory: Callable, alphas, n: int, rng: np.random.Generator):
    """One prior partition of ``n`` points for each concentration in ``alphas``.

    The prior's own sequential urn (:func:`pymc_splitmerge.priors.sample_partitions`),
    vectorised over the batch (closed-form weights for Dirichlet-process, Pitman–Yor and
    finite Dirichlet priors, the prior's tables otherwise).

    Parameters
    ----------
    prior_factory : callable
        ``prior_factory(alpha) -> GibbsTypePrior``.
    alphas : array_like of float, shape (n_draws,)
    n : int
    rng : numpy.random.Generator

    Returns
    -------
    labels : ndarray of int64, shape (n_draws, n)
        Canonical labels (order of first appearance).
    """
    alphas = np.asarray(alphas, dtype=np.float64).ravel()
    return sample_partitions([prior_factory(float(alpha)) for alpha in alphas], n, rng)


# ----------------------------------------------------------------------------- statistics


def batch_means_standard_error(values, n_batches: int) -> tuple[float, float, int]:
    """Standard error of the mean of a stationary chain by non-overlapping batch means.

    Parameters
    ----------
    values : array_like of float, shape (n_draws,)
    n_batches : int
        Number of batches ``B >= 2`` (the trailing ``n_draws mod B`` draws are dropped).

    Returns
    -------
    standard_error : float
        ``sd(batch means) / sqrt(B)``.
    effective_sample_size : float
        ``var(values) / standard_error²`` (``n_draws`` for an i.i.d. sequence, on average).
    degrees_of_freedom : int
        ``B - 1``.
    """
    values = np.asarray(values, dtype=np.float64)
    if n_batches < 2 or values.shape[0] < n_batches:
        raise ValueError(f"need 2 <= n_batches <= n_draws; got {n_batches}, {values.shape[0]}")
    size = values.shape[0] // n_batches
    batch_means = values[: size * n_batches].reshape(n_batches, size).mean(axis=1)
    standard_error = float(np.std(batch_means, ddof=1) / math.sqrt(n_batches))
    variance = float(np.var(values, ddof=1))
    ess = variance / standard_error**2 if standard_error > 0 else float(values.shape[0])
    return standard_error, ess, n_batches - 1


def _default_statistics(alpha, labels, x, family, log_likelihood=None) -> np.ndarray:
    sizes = np.bincount(labels)
    sizes = sizes[sizes > 0]
    if log_likelihood is None:
        log_likelihood = PartitionState(family, x, labels).log_likelihood()
    return np.array([
        sizes.shape[0],
        alpha,
        sizes.max(),
        float(labels[0] == labels[1]),
        math.log(float(np.sum(sizes * sizes))),
        log_likelihood,
    ])


@dataclass(frozen=True)
class GewekeResult:
    """Outcome of :func:`geweke_test` (one row per test function).

    Attributes
    ----------
    names : tuple of str
    marginal_mean, marginal_standard_error : ndarray of float64, shape (n_functions,)
        Marginal-conditional simulator (i.i.d. draws).
    successive_mean, successive_standard_error : ndarray of float64, shape (n_functions,)
        Successive-conditional chain (batch-means standard error).
    effective_sample_size : ndarray of float64, shape (n_functions,)
        Of the successive-conditional chain.
    z_scores, degrees_of_freedom, pvalues : ndarray of float64, shape (n_functions,)
        Two-sided Welch t test of equal means.
    pvalue_threshold : float
        Suite-wide per-test threshold; each function is held to
        ``pvalue_threshold / n_functions`` (Bonferroni).
    passed : bool
        ``min(pvalues) > pvalue_threshold / n_functions``.
    n_marginal_samples, n_successive_samples : int
    """

    names: tuple
    marginal_mean: np.ndarray
    marginal_standard_error: np.ndarray
    successive_mean: np.ndarray
    successive_standard_error: np.ndarray
    effective_sample_size: np.ndarray
    z_scores: np.ndarray
    degrees_of_freedom: np.ndarray
    pvalues: np.ndarray
    pvalue_threshold: float
    passed: bool
    n_marginal_samples: int
    n_successive_samples: int

    @property
    def per_function_threshold(self) -> float:
        """Bonferroni threshold applied to each p-value."""
        return self.pvalue_threshold / len(self.names)

    def table(self) -> str:
        """The statistics table as text."""
        header = (f"{'function':<24}{'marginal':>12}{'± se':>10}{'successive':>12}{'± se':>10}"
                  f"{'ESS':>9}{'z':>9}{'p-value':>11}")
        lines = [header]
        for j, name in enumerate(self.names):
            lines.append(
                f"{name:<24}{self.marginal_mean[j]:>12.4g}{self.marginal_standard_error[j]:>10.2g}"
                f"{self.successive_mean[j]:>12.4g}{self.successive_standard_error[j]:>10.2g}"
                f"{self.effective_sample_size[j]:>9.0f}{self.z_scores[j]:>9.2f}"
                f"{self.pvalues[j]:>11.2e}"
            )
        lines.append(
            f"per-function threshold {self.per_function_threshold:.2e} "
            f"({self.pvalue_threshold:.1e} / {len(self.names)} functions); "
            f"{'passed' if self.passed else 'FAILED'}; M = {self.n_marginal_samples} marginal, "
            f"N = {self.n_successive_samples} successive draws"
        )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def _compare(names, marginal, successive, n_batches, pvalue_threshold) -> GewekeResult:
    from scipy import stats  # on first use: scipy.stats costs ~0.5 CPU s to import
    num_functions = len(names)
    m_mean = marginal.mean(axis=0)
    m_se = marginal.std(axis=0, ddof=1) / math.sqrt(marginal.shape[0])
    s_mean = successive.mean(axis=0)
    s_se, ess, z, dof, pvalues = (np.empty(num_functions) for _ in range(5))
    for j in range(num_functions):
        s_se[j], ess[j], batch_dof = batch_means_standard_error(successive[:, j], n_batches)
        v_m, v_s = m_se[j] ** 2, s_se[j] ** 2
        difference = m_mean[j] - s_mean[j]
        if v_m + v_s == 0.0:  # both simulators constant
            z[j], dof[j] = (0.0 if difference == 0 else math.copysign(math.inf, difference)), 1.0
            pvalues[j] = 1.0 if difference == 0 else 0.0
            continue
        z[j] = difference / math.sqrt(v_m + v_s)
        # Welch-Satterthwaite degrees of freedom of the combined variance estimate
        dof[j] = (v_m + v_s) ** 2 / (v_m**2 / (marginal.shape[0] - 1) + v_s**2 / batch_dof)
        pvalues[j] = 2.0 * stats.t.sf(abs(z[j]), dof[j])
    passed = bool(np.all(pvalues > pvalue_threshold / num_functions))
    return GewekeResult(tuple(names), m_mean, m_se, s_mean, s_se, ess, z, dof, pvalues,
                        float(pvalue_threshold), passed, int(marginal.shape[0]),
                        int(successive.shape[0]))


# ----------------------------------------------------------------------------- driver


def _validate_count(value, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


def geweke_test(kernel_step: Callable, prior_factory: Callable, family, n: int, n_samples: int,
                rng: np.random.Generator, alpha_prior: tuple[float, float] | None = (1.0, 1.0),
                *, concentration: float = 1.0, concentration_update: Callable | None = None,
                data_dim: int | None = None, n_marginal_samples: int | None = None,
                kernel_steps_per_iteration: int = 1, n_batches: int | None = None,
                test_functions: Mapping[str, Callable] | None = None,
                pvalue_threshold: float | None = None) -> GewekeResult:
    r"""Geweke's joint-distribution test of a partition kernel (and of the α update).

    Parameters
    ----------
    kernel_step : callable
        ``kernel_step(state, log_v_table, log_w_table, rng)`` updating a
        :class:`~pymc_splitmerge.kernels.state.PartitionState` in place and leaving
        ``p(c | x, α)`` invariant, e.g. ``gibbs_sweep``, ``sams_move`` or ``pgsm_move``
        (bind options with ``functools.partial``).
    prior_factory : callable
        ``prior_factory(alpha) -> GibbsTypePrior`` (e.g. ``DirichletProcessPrior``).
    family : ComponentFamily
        Numeric conjugate family with a data simulator (:func:`simulate_data`).
    n : int
        Number of points, ``>= 2``.
    n_samples : int
        Length ``N`` of the successive-conditional chain.
    rng : numpy.random.Generator
    alpha_prior : (float, float) or None, default (1, 1)
        Shape ``a`` and *rate* ``b`` of the Gamma prior on α; ``None`` keeps α fixed at
        ``concentration``.
    concentration : float, default 1.0
        The fixed α when ``alpha_prior`` is None.
    concentration_update : callable, optional
        ``concentration_update(alpha, sizes, rng) -> float`` leaving ``p(α | c)`` invariant
        (``sizes``: int array of the cluster sizes).  Default: Escobar–West
        (:func:`~pymc_splitmerge.kernels.concentration.escobar_west_update`), which requires
        a Dirichlet-process prior.
    data_dim : int, optional
        Width of a data row when the family's hyperparameters are all scalars.
    n_marginal_samples : int, optional
        Number ``M`` of marginal-conditional draws (default ``N``).
    kernel_steps_per_iteration : int, default 1
        Kernel applications per cycle of the successive-conditional chain.
    n_batches : int, optional
        Number of batches of the batch-means standard error (default ``max(20, ⌊√N⌋)``).
    test_functions : mapping of str to callable, optional
        Extra functions ``g(alpha, labels, x) -> float`` (labels canonical, x of shape
        (n, data_dim)) compared in addition to :data:`GEWEKE_TEST_FUNCTIONS`.
    pvalue_threshold : float, optional
        Per-test budget (default :data:`~pymc_splitmerge.testing.gof.GOF_PVALUE_THRESHOLD`),
        Bonferroni-split over the functions.

    Returns
    -------
    GewekeResult

    References
    ----------
    Geweke (2004), sections 2-3; Escobar & West (1995), section 6.
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator; got {type(rng).__name__}")
    if not callable(kernel_step) or not callable(prior_factory):
        raise TypeError("kernel_step and prior_factory must be callable")
    n = _validate_count(n, "n", 2)
    n_samples = _validate_count(n_samples, "n_samples", 40)
    n_marginal = n_samples if n_marginal_samples is None else _validate_count(
        n_marginal_samples, "n_marginal_samples", 2)
    steps = _validate_count(kernel_steps_per_iteration, "kernel_steps_per_iteration", 1)
    batches = max(20, math.isqrt(n_samples)) if n_batches is None else _validate_count(
        n_batches, "n_batches", 2)
    if batches > n_samples // 2:
        raise ValueError(f"n_batches={batches} needs n_samples >= {2 * batches}")
    threshold = _DEFAULT_THRESHOLD if pvalue_threshold is None else float(pvalue_threshold)
    if not 0.0 < threshold < 1.0:
        raise ValueError(f"pvalue_threshold must be in (0, 1); got {pvalue_threshold}")
    extra = dict(test_functions or {})
    for name, function in extra.items():
        if name in GEWEKE_TEST_FUNCTIONS or not callable(function):
            raise ValueError(f"test function {name!r} must be callable with a new name")
    if not family.is_numeric:
        raise ValueError(f"{type(family).__name__} has symbolic hyperparameters; use with_values")
    dim = _data_dim(family, data_dim)
    simulator = _simulator_for(family)

    random_alpha = alpha_prior is not None
    if random_alpha:
        shape, rate = (float(v) for v in alpha_prior)
        if not (shape > 0 and rate > 0 and math.isfinite(shape) and math.isfinite(rate)):
            raise ValueError(f"alpha_prior must be (shape > 0, rate > 0); got {alpha_prior}")
        if concentration_update is None:
            if not isinstance(prior_factory(1.0), DirichletProcessPrior):
                raise ValueError("the default Escobar-West update needs a Dirichlet-process "
                                 "prior_factory; pass concentration_update for other priors")

            def concentration_update(alpha, sizes, generator):
                return escobar_west_update(alpha, sizes.shape[0], n, shape, rate,
                                           generator).alpha
    elif not (concentration > 0 and math.isfinite(concentration)):
        raise ValueError(f"concentration must be a finite positive number; got {concentration}")

    def data_given(labels, generator):
        n_clusters = int(labels.max()) + 1
        return np.ascontiguousarray(simulator(family, labels, n_clusters, generator, dim),
                                    dtype=np.float64)

    names = [g for g in GEWEKE_TEST_FUNCTIONS if random_alpha or g != "alpha"]
    keep = [j for j, g in enumerate(GEWEKE_TEST_FUNCTIONS) if g in names]
    names += list(extra)

    def statistics(alpha, labels, x, log_likelihood=None):
        values = _default_statistics(alpha, labels, x, family, log_likelihood)[keep]
        if extra:
            values = np.concatenate([values, [float(g(alpha, labels, x)) for g in extra.values()]])
        return values

    # marginal-conditional simulator: i.i.d. (alpha, c, x)
    def draw_alphas(count):
        if random_alpha:
            return rng.gamma(shape, 1.0 / rate, size=count)  # numpy takes the scale 1/rate
        return np.full(count, float(concentration))

    alphas = draw_alphas(n_marginal)
    partitions = sample_prior_partitions(prior_factory, alphas, n, rng)
    family.prepare_data(data_given(partitions[0], rng))  # validates the simulator's output
    marginal = np.array([statistics(alphas[t], partitions[t], data_given(partitions[t], rng))
                         for t in range(n_marginal)])

    # successive-conditional simulator, started from an exact joint draw
    alpha = float(draw_alphas(1)[0])
    labels = sample_prior_partitions(prior_factory, [alpha], n, rng)[0]
    tables = prior_factory(alpha).tables(n)
    successive = np.empty((n_samples, len(names)))
    for t in range(n_samples):
        state = PartitionState(family, data_given(labels, rng), labels)
        for _ in range(steps):
            kernel_step(state, tables[0], tables[1], rng)
        labels = state.labels()
        if random_alpha:
            sizes = np.bincount(labels)
            alpha = float(concentration_update(alpha, sizes, rng))
            if not (alpha > 0 and math.isfinite(alpha)):
                raise ValueError(f"concentration_update returned an invalid alpha {alpha}")
            tables = prior_factory(alpha).tables(n)
        successive[t] = statistics(alpha, labels, state.x, state.log_likelihood())

    return _compare(names, marginal, successive, batches, threshold)


def assert_geweke(result: GewekeResult) -> None:
    """Raise ``AssertionError`` with the statistics table when the Geweke test failed.

    Parameters
    ----------
    result : GewekeResult
    """
    if not isinstance(result, GewekeResult):
        raise TypeError(f"expected a GewekeResult; got {type(result).__name__}")
    if not result.passed:
        raise AssertionError("Geweke joint-distribution test failed:\n" + result.table())
