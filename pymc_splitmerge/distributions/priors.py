r"""PyMC distributions over partitions: Dirichlet process, Pitman-Yor, finite Dirichlet, MFM.

The value of each distribution is a vector of ``n`` integer cluster labels (shape ``(n,)``) of
the smallest signed integer dtype that holds the label range (:func:`label_dtype`: int8 up to
``n = 127``, int16 up to 32,767, int32 up to 2**31 - 1), so a trace stores 4 bytes per label
and draw at ``n = 10**6`` instead of 8.  Its log-probability is the *normalised* log
exchangeable partition probability function (EPPF) of the set partition the labels induce,

.. math::

    \log p(c) = \log V(n, K) + \sum_{j=1}^{K} \log W(n_j)

(PGSM eq. 3 with :math:`\tau_1 = V`, :math:`\tau_2 = W`), where :math:`n_j` are the sizes of
the :math:`K` non-empty clusters.  It is written in pytensor on the sizes of the non-empty
clusters (:func:`cluster_sizes`, computed once per label vector by
:class:`~pymc_splitmerge.distributions.statistics.ClusterStatistics`), so the value is
invariant to a relabelling of the clusters and one evaluation for new parameter values costs
O(K).  Labels outside the range (``[0, n)``; ``[0, k)`` for the finite
Dirichlet prior) give ``-inf``.

The formulas (``log V``, ``log W``, the parameter conditions and the label range) are the
prior's own: each numeric prior class of :mod:`pymc_splitmerge.priors` writes them once, in
numpy and as a pytensor graph (``log_eppf_graph``), and :func:`partition_log_eppf` here only
counts the cluster sizes.  The mixture-of-finite-mixtures ``gamma`` and ``k_prior`` are numeric
constants: its ``log V_n(t)`` is the constant table of the numeric prior (Miller & Harrison
eq. 3.2).

Draws (``pm.draw``, ``pm.sample_prior_predictive``) use the sequential urn of the numeric
prior (:meth:`pymc_splitmerge.priors.base.GibbsTypePrior.sample`); the initial value
(``support_point``) puts every point in one cluster.

References
----------
.. [1] Bouchard-Côté, A., Doucet, A. and Roth, A. (2017). Particle Gibbs split-merge sampling
   for Bayesian inference in mixture models. JMLR 18(28), eq. 3.
.. [2] Pitman, J. (1995). Exchangeable and partially exchangeable random partitions.
   Probability Theory and Related Fields 102, 145-158.
.. [3] Miller, J. W. and Harrison, M. T. (2018). Mixture models with a prior on the number of
   components. JASA 113(521), 340-356, eqs. 3.2-3.3.
"""

from __future__ import annotations

import inspect
import numbers
import re
import warnings

import numpy as np
import pytensor.tensor as pt
from pymc.distributions.dist_math import check_parameters
from pymc.distributions.distribution import Discrete
from pymc.logprob.abstract import _logprob
from pymc.model import modelcontext
from pymc.pytensorf import normalize_rng_param
from pytensor.graph.basic import Constant, Variable
from pytensor.tensor.random.op import RandomVariable

from pymc_splitmerge.distributions.statistics import (
    BatchedInverse,
    BatchedLogDet,
    ClusterStatistics,
    cluster_statistics,
)
from pymc_splitmerge.priors.dirichlet_process import DirichletProcessPrior
from pymc_splitmerge.priors.finite_dirichlet import FiniteDirichletPrior
from pymc_splitmerge.priors.mixture_of_finite_mixtures import (
    ComponentCountPrior,
    MixtureOfFiniteMixturesPrior,
)
from pymc_splitmerge.priors.pitman_yor import PitmanYorPrior
from pymc_splitmerge.priors.registry import PRIOR_REGISTRY

__all__ = [
    "PARTITION_PRIOR_DISTRIBUTIONS",
    "PARTITION_PRIOR_RV_TYPES",
    "DirichletProcess",
    "DirichletProcessRV",
    "FiniteDirichlet",
    "FiniteDirichletRV",
    "MixtureOfFiniteMixtures",
    "MixtureOfFiniteMixturesRV",
    "PartitionPriorRV",
    "PitmanYor",
    "PitmanYorRV",
    "label_dtype",
    "partition_log_eppf",
    "partition_prior_distribution",
]

# pytensor >= 3 wants ``return_next_rng=True`` (and warns without it); pytensor 2 lacks it.
_RETURNS_NEXT_RNG = "return_next_rng" in inspect.signature(RandomVariable.__call__).parameters


def call_random_variable(op: RandomVariable, *params, size=None, rng=None) -> Variable:
    """Apply a ``RandomVariable`` op and return its draw, on pytensor 2 and 3 alike."""
    rng = normalize_rng_param(rng)
    if _RETURNS_NEXT_RNG:
        return op(*params, size=size, rng=rng, return_next_rng=True)[1]
    return op(*params, size=size, rng=rng)


# --------------------------------------------------------------------------- validation
def label_dtype(n_labels: int) -> str:
    """Smallest signed integer dtype holding labels ``0..n_labels`` (the value's dtype).

    ``n_labels`` itself fits, so ``label + 1`` never overflows; steps may work in int64 and
    cast back (see :meth:`pymc_splitmerge.steps.base.PartitionStep.step`).
    """
    for dtype in ("int8", "int16", "int32"):
        if int(n_labels) <= np.iinfo(dtype).max:
            return dtype
    return "int64"


def static_positive_integer(value, what: str, example: str = "") -> int:
    """Return ``value`` as a Python int >= 1 or raise naming ``what``; ``value`` must be
    static (a number or a pytensor constant known when the model is built, not symbolic)."""
    if isinstance(value, Constant):
        value = value.data
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"{what} must be a Python or NumPy integer known when the model is built"
            f"{example}, got {type(value).__name__} {value!r}"
        )
    if int(value) < 1:
        raise ValueError(f"{what} must be a positive integer, got {int(value)}")
    return int(value)


def static_number_of_points(n) -> int:
    """``n`` (number of points) as a Python int >= 1 (:func:`static_positive_integer`)."""
    return static_positive_integer(n, "n (number of points)", " (e.g. n=len(data))")


def _labels_dtype_for(*bounds) -> str:
    """:func:`label_dtype` of the largest static bound (numbers or pytensor constants);
    int64 when a bound is symbolic."""
    values = []
    for value in bounds:
        if isinstance(value, Constant):
            value = value.data
        if isinstance(value, Variable):
            return "int64"
        values.append(int(np.asarray(value)))
    return label_dtype(max(values))


def constant_value(variable) -> np.ndarray | None:
    """Numeric value of a parameter fixed at model-build time, or None if it can change.

    Python/NumPy numbers and pytensor constants are fixed; random variables, ``pm.Data``
    (shared variables) and other graphs are not.
    """
    if isinstance(variable, Constant):
        return np.asarray(variable.data)
    if isinstance(variable, Variable):
        return None
    return np.asarray(variable)


def _as_float_tensor(value, name: str) -> Variable:
    if isinstance(value, str | bytes) or value is None:
        raise TypeError(f"{name} must be a number or a pytensor/PyMC variable, got {value!r}")
    if not isinstance(value, Variable):
        value = np.asarray(value, dtype=np.float64)  # never let pytensor autocast to float32
    tensor = pt.as_tensor_variable(value)
    if tensor.ndim != 0:
        raise ValueError(
            f"{name} must be a scalar (batched partition priors are not supported), "
            f"got ndim={tensor.ndim}"
        )
    if tensor.dtype != "float64":
        tensor = pt.cast(tensor, "float64")
    return tensor


def _validate_constant(value: Variable, name: str, check, requirement: str) -> None:
    numeric = constant_value(value)
    if numeric is None:
        return
    number = float(numeric)
    if not np.isfinite(number):
        raise ValueError(f"{name} must be finite (and satisfy {requirement}), got {number}")
    if not check(number):
        raise ValueError(f"{name} must satisfy {requirement}, got {number}")


def _check_shape_and_size(n: int, kwargs: dict) -> None:
    size = kwargs.get("size")
    if size is not None and np.size(size) != 0:
        raise NotImplementedError(
            f"partition priors have no batch dimensions; got size={size!r}. Leave size/shape "
            f"unset (the value has shape (n,) = ({n},))"
        )
    shape = kwargs.get("shape")
    if shape is None:
        return
    shape = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
    if len(shape) != 1:
        raise ValueError(f"a partition of n={n} points has shape ({n},), got shape={shape}")
    length = constant_value(shape[0]) if isinstance(shape[0], Variable) else shape[0]
    if length is not None and int(length) != n:
        raise ValueError(f"a partition of n={n} points has shape ({n},), got shape={shape}")


# --------------------------------------------------------------------------- pytensor maths
def cluster_sizes(labels: Variable, n_labels: int) -> tuple[Variable, Variable, Variable]:
    """Cluster sizes of a label vector, in pytensor.

    Parameters
    ----------
    labels : int tensor of shape (n,)
    n_labels : int
        Labels must lie in ``[0, n_labels)``.

    Returns
    -------
    in_range : int8 scalar
        Whether every label lies in ``[0, n_labels)``.
    sizes : int64 tensor of shape (K,)
        Sizes of the non-empty clusters in increasing label order (out-of-range labels are
        clipped, use ``in_range`` to mask the result); computed once per label vector
        (:class:`~pymc_splitmerge.distributions.statistics.ClusterStatistics`), so a log
        density of the sizes costs O(K) per evaluation while the labels are unchanged.
    n_clusters : int64 scalar
        Number of non-empty clusters ``K``.
    """
    in_range, sizes = cluster_statistics(labels, n_labels)
    return in_range, sizes.astype("int64"), sizes.shape[0].astype("int64")


def partition_log_eppf(prior_class, labels, n: int, **params) -> Variable:
    """Normalised log EPPF of a label vector (pytensor), ``-inf`` for out-of-range labels.

    The maths is the prior's own (``prior_class.log_eppf_graph``, ``label_range`` and
    ``support_graph`` in :mod:`pymc_splitmerge.priors`); this function only counts the
    cluster sizes and checks the label range and the parameters.

    Parameters
    ----------
    prior_class : type
        A registered :class:`~pymc_splitmerge.priors.base.GibbsTypePrior` subclass.
    labels : int tensor of shape (n,)
    n : int
        Number of points (static).
    **params
        The prior's inputs by name (tensors, or Python numbers for static inputs).
    """
    in_range, sizes, _ = cluster_sizes(labels, prior_class.label_range(n, **params))
    log_eppf = prior_class.log_eppf_graph(pt, sizes, n, **params)
    log_p = pt.switch(in_range, log_eppf, -np.inf)
    conditions, message = prior_class.support_graph(pt, **params)
    return check_parameters(log_p, *conditions, msg=message) if conditions else log_p


def _static(value):
    """Python int for an integer constant input (static, e.g. ``k``), else the tensor."""
    if isinstance(value, Constant) and value.dtype.startswith(("int", "uint")):
        return int(value.data)
    return value


# --------------------------------------------------------------------------- random variables
def quiet_object_mode(rv_type: type) -> None:
    """Silence pytensor's "Numba will use object mode" warning for ``rv_type``'s ops.

    Our random variables draw with NumPy (the urn, the prior predictive); under pytensor's
    numba backend (PyMC 6) they run in object mode by design, which is not worth a warning
    per compiled function.  The op prints as ``<name>_rv{...}`` or, with extra properties, as
    ``<ClassName>{...}``; both forms are matched, nothing else.
    """
    names = "|".join(map(re.escape, sorted({f"{rv_type.name}_rv", rv_type.__name__})))
    pattern = rf"Numba will use object mode to run ({names})\{{"
    OBJECT_MODE_PATTERNS.append(pattern)
    warnings.filterwarnings("ignore", message=pattern, category=UserWarning)


OBJECT_MODE_PATTERNS: list[str] = [
    (rf"Numba will use object mode to run ({ClusterStatistics.__name__}\{{|"
     rf"{BatchedLogDet.__name__}'s|{BatchedInverse.__name__}'s)")]
"""The message patterns :func:`quiet_object_mode` has silenced (for test runners that reset
the warning filters, e.g. pytest while it collects); the first covers the NumPy ops of the
cluster statistics (:mod:`~pymc_splitmerge.distributions.statistics`)."""
warnings.filterwarnings("ignore", message=OBJECT_MODE_PATTERNS[0], category=UserWarning)



class PartitionPriorRV(RandomVariable):
    """Base ``RandomVariable`` of the partition priors: integer labels of shape (n,).

    The last distribution parameter is always ``n`` (a constant int64 scalar); the others
    are the prior's hyperparameters in the order of :attr:`parameter_names`.  The value's
    dtype is set per op (``dtype=label_dtype(n)``); int64 is only the class default.
    Every subclass is registered with :func:`quiet_object_mode` (the written ones below
    :data:`PARTITION_PRIOR_RV_TYPES`, the generated ones by
    :func:`partition_prior_distribution`).
    """

    dtype = "int64"
    prior_class: type = None
    parameter_names: tuple[str, ...] = ()

    def _supp_shape_from_params(self, dist_params, param_shapes=None):
        return (dist_params[-1],)

    def numeric_prior(self, *parameter_values):
        """Numeric prior (from :mod:`pymc_splitmerge.priors`) for the given values."""
        return self.prior_class(*(np.asarray(v)[()] for v in parameter_values))

    def rng_fn(self, rng, *args):
        *params, n, size = args
        for value in params:
            if np.ndim(value) != 0:
                raise NotImplementedError("batched partition-prior parameters are not supported")
        prior = self.numeric_prior(*params)
        n = int(n)
        if size is None or len(size) == 0:
            return prior.sample(n, rng).astype(self.dtype)
        total = int(np.prod(size))
        return prior.sample(n, rng, size=total).reshape(*size, n).astype(self.dtype)


class DirichletProcessRV(PartitionPriorRV):
    """Partition of ``n`` points drawn from a Dirichlet process (Chinese restaurant)."""

    name = "dirichlet_process"
    signature = "(),()->(n)"
    _print_name = ("DirichletProcess", "\\operatorname{DirichletProcess}")
    prior_class = DirichletProcessPrior
    parameter_names = ("alpha",)


class PitmanYorRV(PartitionPriorRV):
    """Partition of ``n`` points drawn from a Pitman-Yor process."""

    name = "pitman_yor"
    signature = "(),(),()->(n)"
    _print_name = ("PitmanYor", "\\operatorname{PitmanYor}")
    prior_class = PitmanYorPrior
    parameter_names = ("alpha", "discount")


class FiniteDirichletRV(PartitionPriorRV):
    """Partition of ``n`` points of a finite mixture with symmetric Dirichlet weights.

    Parameters (after rng and size): ``alpha``, ``k`` (constant int64), ``n``.
    """

    name = "finite_dirichlet"
    signature = "(),(),()->(n)"
    _print_name = ("FiniteDirichlet", "\\operatorname{FiniteDirichlet}")
    prior_class = FiniteDirichletPrior
    parameter_names = ("alpha", "k")

    def numeric_prior(self, alpha, k):
        return FiniteDirichletPrior(alpha=float(np.asarray(alpha)), k=int(np.asarray(k)))


class MixtureOfFiniteMixturesRV(PartitionPriorRV):
    """Partition of ``n`` points drawn from a mixture of finite mixtures.

    ``gamma`` (float) and ``k_prior`` (a hashable
    :class:`~pymc_splitmerge.priors.mixture_of_finite_mixtures.ComponentCountPrior`) are
    numeric constants kept as ``Op`` properties; the only parameter is ``n``.
    """

    name = "mixture_of_finite_mixtures"
    signature = "()->(n)"
    _print_name = ("MixtureOfFiniteMixtures", "\\operatorname{MixtureOfFiniteMixtures}")
    prior_class = MixtureOfFiniteMixturesPrior
    parameter_names = ()
    __props__ = (*RandomVariable.__props__, "gamma", "k_prior")

    def __init__(self, *args, gamma: float = 1.0, k_prior: ComponentCountPrior = None, **kwargs):
        if k_prior is None:
            raise TypeError("MixtureOfFiniteMixturesRV needs a k_prior")
        prior = MixtureOfFiniteMixturesPrior(gamma=gamma, k_prior=k_prior)  # validates
        self.gamma = prior.gamma
        self.k_prior = prior.k_prior
        super().__init__(*args, **kwargs)

    def numeric_prior(self):
        return MixtureOfFiniteMixturesPrior(gamma=self.gamma, k_prior=self.k_prior)


def _all_zeros_support_point(rv, *args):
    # args = (n,) or (size, ..., n): n is always the last parameter
    return pt.zeros((args[-1],), dtype=rv.dtype)


# --------------------------------------------------------------------------- distributions
class PartitionDistribution(Discrete):
    """Base of the partition-prior distributions: checks ``initval=`` when the model is built.

    PyMC stores ``initval`` through ``rv.type.filter``, which refuses an int64 array for the
    compact label dtype ("cannot store a value of dtype int64 without risking loss of
    precision"); here the start is checked (:func:`~pymc_splitmerge.distributions.starts.
    check_partition_start`: shape, integer values, label range) and stored in that dtype.
    """

    def __new__(cls, name, *args, initval=None, **kwargs):
        rv = super().__new__(cls, name, *args, **kwargs)
        if initval is not None:
            # (imported here: the start checks use this module's constant_value)
            from pymc_splitmerge.distributions.starts import check_partition_start

            labels = check_partition_start(rv, initval, f"initval of {name!r}")
            modelcontext(None).set_initval(rv, labels)
        return rv


class DirichletProcess(PartitionDistribution):
    r"""Partition of ``n`` points under a Dirichlet process prior (Chinese restaurant process).

    .. math:: p(c) = \frac{\alpha^K \Gamma(\alpha)}{\Gamma(\alpha + n)} \prod_{j=1}^K \Gamma(n_j)

    Parameters
    ----------
    alpha : float or tensor_like
        Concentration, ``alpha > 0``; a constant, ``pm.Data`` or a random variable.
    n : int
        Number of points (static).

    Notes
    -----
    The value is an integer vector (dtype :func:`label_dtype`) of shape (n,) of labels in
    ``[0, n)``; the log-probability depends only on the partition the labels induce.

    References
    ----------
    .. [1] Bouchard-Côté, Doucet and Roth (2017), JMLR 18(28), eq. 3.
    """

    rv_type = DirichletProcessRV

    @classmethod
    def rv_op(cls, alpha, n, *, size=None, rng=None):
        op = DirichletProcessRV(dtype=_labels_dtype_for(n))
        return call_random_variable(op, alpha, n, size=size, rng=rng)

    @classmethod
    def dist(cls, alpha, n, **kwargs):
        n = static_number_of_points(n)
        _check_shape_and_size(n, kwargs)
        alpha = _as_float_tensor(alpha, "alpha")
        _validate_constant(alpha, "alpha (DP concentration)", lambda a: a > 0, "alpha > 0")
        return super().dist([alpha, pt.constant(n, dtype="int64")], **kwargs)

    @staticmethod
    def logp(value, alpha, n):
        return partition_log_eppf(DirichletProcessPrior, value, int(n.data), alpha=alpha)

    support_point = staticmethod(_all_zeros_support_point)


class PitmanYor(PartitionDistribution):
    r"""Partition of ``n`` points under a Pitman-Yor (two-parameter) prior.

    Parameters
    ----------
    alpha : float or tensor_like
        Concentration, ``alpha > -discount``.
    discount : float or tensor_like
        Discount, ``0 <= discount < 1`` (``0`` is the Dirichlet process).
    n : int
        Number of points (static).

    References
    ----------
    .. [1] Pitman, J. and Yor, M. (1997). Annals of Probability 25(2), 855-900.
    """

    rv_type = PitmanYorRV

    @classmethod
    def rv_op(cls, alpha, discount, n, *, size=None, rng=None):
        op = PitmanYorRV(dtype=_labels_dtype_for(n))
        return call_random_variable(op, alpha, discount, n, size=size, rng=rng)

    @classmethod
    def dist(cls, alpha, discount, n, **kwargs):
        n = static_number_of_points(n)
        _check_shape_and_size(n, kwargs)
        alpha = _as_float_tensor(alpha, "alpha")
        discount = _as_float_tensor(discount, "discount")
        _validate_constant(discount, "discount", lambda d: 0 <= d < 1, "0 <= discount < 1")
        alpha_value, discount_value = constant_value(alpha), constant_value(discount)
        if alpha_value is not None and not np.isfinite(float(alpha_value)):
            raise ValueError(f"alpha must be finite (and > -discount), got {float(alpha_value)}")
        if alpha_value is not None and discount_value is not None:
            if not float(alpha_value) > -float(discount_value):
                raise ValueError(
                    f"alpha must be > -discount (= {-float(discount_value)}), got "
                    f"alpha = {float(alpha_value)}; with discount = 0 this means alpha > 0"
                )
        elif alpha_value is not None and not float(alpha_value) > -1.0:
            raise ValueError(f"alpha must be > -discount > -1, got alpha = {float(alpha_value)}")
        return super().dist([alpha, discount, pt.constant(n, dtype="int64")], **kwargs)

    @staticmethod
    def logp(value, alpha, discount, n):
        return partition_log_eppf(PitmanYorPrior, value, int(n.data), alpha=alpha,
                                  discount=discount)

    support_point = staticmethod(_all_zeros_support_point)


class FiniteDirichlet(PartitionDistribution):
    r"""Partition of ``n`` points of a ``k``-component mixture with Dirichlet(alpha) weights.

    .. math:: p(c) = \frac{k!}{(k-K)!}\frac{\Gamma(k\alpha)}{\Gamma(k\alpha+n)}
              \prod_{j=1}^K \frac{\Gamma(n_j + \alpha)}{\Gamma(\alpha)}, \quad K \le k

    Parameters
    ----------
    alpha : float or tensor_like
        Symmetric Dirichlet concentration of each component, ``alpha > 0``.
    k : int
        Number of components, ``k >= 1`` (static).  Labels lie in ``[0, k)``.
    n : int
        Number of points (static).

    References
    ----------
    .. [1] Green, P. J. and Richardson, S. (2001). Scand. J. Statist. 28(2), 355-375.
    """

    rv_type = FiniteDirichletRV

    @classmethod
    def rv_op(cls, alpha, k, n, *, size=None, rng=None):
        op = FiniteDirichletRV(dtype=_labels_dtype_for(n, k))
        return call_random_variable(op, alpha, k, n, size=size, rng=rng)

    @classmethod
    def dist(cls, alpha, k, n, **kwargs):
        n = static_number_of_points(n)
        _check_shape_and_size(n, kwargs)
        k = static_positive_integer(k, "k (number of components)")
        alpha = _as_float_tensor(alpha, "alpha")
        _validate_constant(alpha, "alpha (Dirichlet concentration)", lambda a: a > 0, "alpha > 0")
        params = [alpha, pt.constant(int(k), dtype="int64"), pt.constant(n, dtype="int64")]
        return super().dist(params, **kwargs)

    @staticmethod
    def logp(value, alpha, k, n):
        return partition_log_eppf(FiniteDirichletPrior, value, int(n.data), alpha=alpha,
                                  k=_static(k))

    support_point = staticmethod(_all_zeros_support_point)


class MixtureOfFiniteMixtures(PartitionDistribution):
    r"""Partition of ``n`` points under a mixture of finite mixtures (Miller & Harrison 2018).

    .. math:: p(c) = V_n(K) \prod_{j=1}^K \gamma^{(n_j)}, \qquad
              V_n(t) = \sum_{k \ge 1} \frac{k_{(t)}}{(\gamma k)^{(n)}} p_K(k)

    Parameters
    ----------
    gamma : float
        Dirichlet concentration of the weights given ``k``, ``gamma > 0`` (numeric constant).
    k_prior : ShiftedPoisson or Geometric or ExplicitPmf
        Prior on the number of components (numeric constant).
    n : int
        Number of points (static).

    Notes
    -----
    ``gamma`` and ``k_prior`` are properties of the ``Op``; :math:`\log V_n(t)` is a constant
    table computed by the numeric prior.

    References
    ----------
    .. [1] Miller, J. W. and Harrison, M. T. (2018). JASA 113(521), eqs. 3.2-3.3.
    """

    rv_type = MixtureOfFiniteMixturesRV

    @classmethod
    def rv_op(cls, n, *, gamma, k_prior, size=None, rng=None):
        op = MixtureOfFiniteMixturesRV(gamma=gamma, k_prior=k_prior,
                                       dtype=_labels_dtype_for(n))
        return call_random_variable(op, n, size=size, rng=rng)

    @classmethod
    def dist(cls, gamma, k_prior, n, **kwargs):
        n = static_number_of_points(n)
        _check_shape_and_size(n, kwargs)
        if isinstance(gamma, Variable) and constant_value(gamma) is None:
            raise TypeError(
                "gamma of MixtureOfFiniteMixtures must be a numeric constant (its V_n(t) table "
                "is precomputed); random gamma is not supported"
            )
        gamma_value = constant_value(gamma)
        if gamma_value.ndim != 0:
            raise ValueError(f"gamma must be a scalar, got shape {gamma_value.shape}")
        gamma_value = float(gamma_value)
        if not np.isfinite(gamma_value) or gamma_value <= 0:
            raise ValueError(f"gamma (MFM Dirichlet concentration) must be > 0, got {gamma_value}")
        if not isinstance(k_prior, ComponentCountPrior):
            raise TypeError(
                "k_prior must be a ShiftedPoisson, Geometric or ExplicitPmf instance from "
                f"pymc_splitmerge.priors, got {type(k_prior).__name__}"
            )
        return super().dist(
            [pt.constant(n, dtype="int64")], gamma=gamma_value, k_prior=k_prior, **kwargs
        )

    support_point = staticmethod(_all_zeros_support_point)


@_logprob.register(MixtureOfFiniteMixturesRV)
def _mixture_of_finite_mixtures_logp(op, values, rng, size, n, **kwargs):
    [value] = values
    return partition_log_eppf(MixtureOfFiniteMixturesPrior, value, int(n.data),
                              gamma=op.gamma, k_prior=op.k_prior)


# --------------------------------------------------------------------------- generated ones
def _python_value(value):
    """Python scalar of a static input (number, 0-d array or pytensor constant)."""
    if isinstance(value, Constant):
        value = value.data
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    return value.item() if isinstance(value, np.generic) else value


def partition_prior_distribution(name: str, prior_class: type) -> type[Discrete]:
    """The PyMC distribution of a registered prior that has none written here.

    Everything comes from the numeric prior class (``docs/contracts.md``, "Adding a prior"):
    the inputs are ``prior_class.parameter_names`` then ``n`` (the names in
    ``static_parameter_names`` are numeric constants, passed to the graph as Python values);
    constant values are validated by constructing the numeric prior (its messages name the
    parameter); the log-probability is :func:`partition_log_eppf` (the class's
    ``log_v_graph`` / ``log_w_graph`` / ``support_graph``); draws use its urn; labels lie in
    ``[0, label_range(n, ...))``.

    Parameters
    ----------
    name : str
        The registry name (``RandomVariable.name``).
    prior_class : type
        A :class:`~pymc_splitmerge.priors.base.GibbsTypePrior` subclass.

    Returns
    -------
    type
        A ``pm.Distribution`` named after the class without its ``Prior`` suffix, with
        ``dist(*parameters, n)`` (positional or by keyword).
    """
    parameter_names = tuple(prior_class.parameter_names)
    static = frozenset(prior_class.static_parameter_names)
    title = prior_class.__name__.removesuffix("Prior") or prior_class.__name__

    def numeric_prior(self, *values):
        return prior_class(*(_python_value(np.asarray(value)) for value in values))

    rv_type = type(f"{title}RV", (PartitionPriorRV,), {
        "__doc__": f"Partition of ``n`` points under ``{prior_class.__name__}`` (generated).",
        "__module__": __name__,
        "name": name,
        "signature": ",".join(["()"] * (len(parameter_names) + 1)) + "->(n)",
        "_print_name": (title, f"\\operatorname{{{title}}}"),
        "prior_class": prior_class,
        "parameter_names": parameter_names,
        "numeric_prior": numeric_prior,
    })
    quiet_object_mode(rv_type)

    def _graph_parameters(values):
        return {key: (_python_value(value) if key in static else value)
                for key, value in zip(parameter_names, values, strict=True)}

    def rv_op(cls, *inputs, size=None, rng=None):
        *values, n = inputs
        bound = prior_class.label_range(int(_python_value(n)), **_graph_parameters(values))
        op = rv_type(dtype=_labels_dtype_for(n, bound))
        return call_random_variable(op, *inputs, size=size, rng=rng)

    def dist(cls, *args, **kwargs):
        names = (*parameter_names, "n")
        if len(args) > len(names):
            raise TypeError(f"{title}.dist takes {', '.join(names)}; got {len(args)} values")
        given = dict(zip(names, args, strict=False))
        for key in names[len(args):]:
            if key not in kwargs:
                raise TypeError(f"{title}.dist needs {key!r} (inputs: {', '.join(names)})")
            given[key] = kwargs.pop(key)
        n = static_number_of_points(given.pop("n"))
        _check_shape_and_size(n, kwargs)
        inputs, constants = [], {}
        for key in parameter_names:
            if key in static:
                value = _python_value(given[key])
                if isinstance(value, Variable):
                    raise TypeError(f"{key} of {title} must be a number known when the model "
                                    f"is built, got {value!r}")
                constants[key] = value
                dtype = "int64" if isinstance(value, numbers.Integral) else "float64"
                inputs.append(pt.constant(value, dtype=dtype))
            else:
                tensor = _as_float_tensor(given[key], key)
                value = constant_value(tensor)
                if value is not None:
                    constants[key] = float(value)
                inputs.append(tensor)
        if len(constants) == len(parameter_names):
            prior_class(**constants)  # the numeric class's validation and messages
        return Discrete.dist.__func__(cls, [*inputs, pt.constant(n, dtype="int64")], **kwargs)

    def logp(value, *inputs):
        *values, n = inputs
        return partition_log_eppf(prior_class, value, int(n.data), **_graph_parameters(values))

    return type(title, (PartitionDistribution,), {
        "__doc__": f"Partition of ``n`` points under ``{prior_class.__name__}`` "
                   f"(generated from the registry entry {name!r}).",
        "__module__": __name__,
        "rv_type": rv_type,
        "rv_op": classmethod(rv_op),
        "dist": classmethod(dist),
        "logp": staticmethod(logp),
        "support_point": staticmethod(_all_zeros_support_point),
    })


_WRITTEN_HERE = (DirichletProcess, PitmanYor, FiniteDirichlet, MixtureOfFiniteMixtures)

PARTITION_PRIOR_DISTRIBUTIONS = {
    name: next((distribution for distribution in _WRITTEN_HERE
                if distribution.rv_type.name == name), None)
    or partition_prior_distribution(name, prior_class)
    for name, prior_class in PRIOR_REGISTRY.items()
}
"""PyMC distribution of each registered prior, keyed like
:data:`pymc_splitmerge.priors.PRIOR_REGISTRY` (``Distribution.dist(**parameters, n=n)``):
the four written above (with their own messages and documentation), and one generated by
:func:`partition_prior_distribution` for any other registered prior."""

PARTITION_PRIOR_RV_TYPES = tuple(distribution.rv_type
                                 for distribution in PARTITION_PRIOR_DISTRIBUTIONS.values())
"""The ``RandomVariable`` of each registered prior."""

for _rv_type in PARTITION_PRIOR_RV_TYPES:
    quiet_object_mode(_rv_type)
