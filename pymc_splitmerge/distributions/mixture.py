r"""``ConjugateMixture``: observations of a mixture whose component parameters are integrated out.

Given the partition ``z`` (labels of shape (n,)) and a conjugate component family with
hyperparameters :math:`\eta`, the log-likelihood of the data is the sum over clusters of the
family's log marginal likelihood,

.. math:: \log p(x \mid z, \eta) = \sum_{j:\, n_j > 0} \log m_\eta(x_{\{i : z_i = j\}}).

It is written in pytensor for every family (so ``model.compile_logp`` and gradient-based
samplers for the hyperparameters see it): the sufficient statistics of the label slots
``0..L-1`` are scatter-adds of per-point statistics (``inc_subtensor`` on advanced
indices), and each slot's log marginal is evaluated in closed form, vectorised over slots.
Empty slots contribute exactly 0 (masked).  The per-family formula is the family's own
``log_marginal_graph`` (in its module under :mod:`pymc_splitmerge.components`, written
against the tensor namespace this module hands in through :class:`SlotGraph`); this module
holds no per-family maths.

Hyperparameters may be numbers, ``pm.Data`` or random variables: the symbolic ones become
inputs of the random-variable node (so PyMC sees the dependency), the numeric ones are
constants.  The ``ConjugateMixture`` node's first input is the partition, which is how
:func:`pymc_splitmerge.distributions.discovery.discover` finds it.

References
----------
.. [1] Bouchard-Côté, A., Doucet, A. and Roth, A. (2017). Particle Gibbs split-merge sampling
   for Bayesian inference in mixture models. JMLR 18(28), Appendix E.
.. [2] Murphy, K. P. (2007). Conjugate Bayesian analysis of the Gaussian distribution.
"""

from __future__ import annotations

import sys

import numpy as np
import pytensor.tensor as pt
from pymc.distributions.dist_math import check_parameters
from pymc.distributions.distribution import Distribution
from pymc.logprob.abstract import _logprob
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Constant, Variable
from pytensor.tensor.random.op import RandomVariable

from pymc_splitmerge.components import ComponentFamily
from pymc_splitmerge.components.base import is_numeric_value
from pymc_splitmerge.distributions.priors import (
    FiniteDirichletRV,
    call_random_variable,
)
from pymc_splitmerge.distributions.statistics import (
    batched_inverse,
    batched_log_det,
    cluster_statistics,
)

__all__ = [
    "ConjugateMixture",
    "ConjugateMixtureRV",
    "SlotGraph",
    "conjugate_mixture_log_likelihood",
    "data_reference",
    "number_of_label_slots",
    "observed_value",
    "prepare_observed_data",
    "sample_clusters",
]


# --------------------------------------------------------------------------- helpers
def observed_value(observed) -> np.ndarray:
    """Numeric value of observed data given as an array, a constant or ``pm.Data``."""
    if isinstance(observed, SharedVariable):
        return np.asarray(observed.get_value())
    if isinstance(observed, Constant):
        return np.asarray(observed.data)
    if isinstance(observed, Variable):
        try:
            return np.asarray(observed.eval())
        except Exception as error:
            raise TypeError(
                "ConjugateMixture needs observed data whose value is known when the model is "
                "built (an array or pm.Data); got a symbolic expression that cannot be "
                f"evaluated: {error}"
            ) from error
    return np.asarray(observed)


def prepare_observed_data(family: ComponentFamily, data) -> np.ndarray:
    """Validated float64 data of shape (n, data_dim) for ``family`` (numeric or symbolic).

    Numeric families use ``family.prepare_data`` (which also binds the data dimension);
    families with symbolic hyperparameters get shape, finiteness and domain checks
    (``family.check_data_symbolic``).
    """
    array = observed_value(data)
    if family.is_numeric:
        return family.prepare_data(array)
    return family.check_data_symbolic(array)


def number_of_label_slots(partition: Variable, n: int) -> int:
    """Label range ``[0, L)`` of a partition variable: ``max(n, k)`` for finite Dirichlet."""
    owner = getattr(partition, "owner", None)
    if owner is not None and isinstance(owner.op, FiniteDirichletRV):
        k_input = owner.inputs[-2]
        if isinstance(k_input, Constant):
            return max(n, int(k_input.data))
    return n


class SlotGraph:
    """What a family's ``log_marginal_graph`` needs to write its formula per cluster.

    See :meth:`pymc_splitmerge.components.base.ComponentFamily.log_marginal_graph`.  The
    "slots" are the K non-empty clusters of the labels, in increasing label order: their
    sizes and the per-cluster sums of per-point values come from
    :class:`~pymc_splitmerge.distributions.statistics.ClusterStatistics`, computed once per
    label vector, so the family's formula costs O(K x statistics row) per evaluation.

    Attributes
    ----------
    pt : module
        ``pytensor.tensor``.
    labels : int tensor of shape (n,)
        The labels as given (the statistics op checks and clips them).
    counts : float tensor of shape (K,)
        Points per non-empty cluster.
    in_range : int8 scalar tensor
        Whether every label lies in ``[0, n_slots)``.
    n_slots : int
        Label range.
    dim : int
        Width of the data the family models.
    reference : ndarray of float64, shape (dim,)
        A fixed point near the data (their column means when known at build time, else 0):
        continuous families sum ``x - reference`` (:meth:`centred`) so that data far from
        zero relative to their spread lose no precision; the log marginal is exact for any
        reference.
    """

    def __init__(self, pt, labels, n_slots: int, dim: int, reference=None):
        self.pt = pt
        self.labels = pt.as_tensor_variable(labels)
        self.n_slots = int(n_slots)
        self.dim = int(dim)
        self.reference = (np.zeros(self.dim) if reference is None
                          else np.asarray(reference, dtype=np.float64).reshape(self.dim))
        self.in_range, self.counts = cluster_statistics(self.labels, self.n_slots)

    def restrict(self, columns) -> SlotGraph:
        """The same clusters for a sub-family of the data columns ``columns`` (``ProductFamily``);
        an int is read as the first ``columns`` columns."""
        columns = (np.arange(int(columns)) if np.ndim(columns) == 0
                   else np.asarray(columns, dtype=np.int64).reshape(-1))
        out = object.__new__(SlotGraph)
        out.__dict__.update(self.__dict__)
        out.dim = int(columns.size)
        out.reference = self.reference[columns]
        return out

    def cluster_sums(self, *values):
        """Per-cluster sums of per-point values, one (K, ...) tensor per argument.

        ``values[m]`` has shape (n, ...) and must not depend on a hyperparameter (it is
        folded into a constant for constant data; the sums carry no gradient).
        """
        if not values:
            return []
        _, _, *sums = cluster_statistics(self.labels, self.n_slots, *values)
        return sums

    def segment_sum(self, values):
        """``out[k] = sum_{i in cluster k} values[i]``, shape (K, ...) (see :meth:`cluster_sums`)."""
        return self.cluster_sums(values)[0]

    def centred(self, x2d):
        """``x2d - reference`` (see :attr:`reference`), the per-point values of continuous
        families."""
        return x2d - self.reference[None, :]

    def vector(self, value):
        """A hyperparameter as a float64 vector of length ``dim`` (scalars broadcast)."""
        value = pt.as_tensor_variable(value).astype("float64")
        return pt.alloc(value, self.dim) if value.ndim == 0 else value

    def matrix(self, value):
        """A hyperparameter as a float64 (dim, dim) matrix (a scalar times the identity)."""
        value = pt.as_tensor_variable(value).astype("float64")
        return value * pt.eye(self.dim) if value.ndim == 0 else value

    @staticmethod
    def log_det_cholesky(matrices):
        """Log-determinants and lower Cholesky factors of (a stack of) SPD matrices."""
        chol = pt.linalg.cholesky(matrices, lower=True)
        return 2.0 * pt.sum(pt.log(pt.diagonal(chol, axis1=-2, axis2=-1)), axis=-1), chol

    @staticmethod
    def log_det_stack(matrices):
        """Log-determinants of a (K, D, D) stack of SPD matrices (NaN where not positive
        definite), one compiled loop and a batched gradient."""
        return batched_log_det(matrices)

    @staticmethod
    def inverse_stack(matrices):
        """Inverses of a (K, D, D) stack of matrices (one batched NumPy call)."""
        return batched_inverse(matrices)

    @staticmethod
    def is_finite(value):
        """Whether every entry is finite (a boolean scalar)."""
        return pt.all(pt.invert(pt.isnan(value) | pt.isinf(value)))


def data_reference(data, dim: int) -> np.ndarray:
    """Column means of data known at build time (a constant or ``pm.Data``), else zeros.

    The fixed point of :attr:`SlotGraph.reference`; any value gives the same log density, a
    point near the data keeps the per-cluster sums free of cancellation.
    """
    if isinstance(data, (Constant, SharedVariable, np.ndarray)):
        values = observed_value(data)
        if values.size and values.dtype.kind in "biuf":
            reference = np.asarray(values, dtype=np.float64).reshape(-1, dim).mean(axis=0)
            if np.all(np.isfinite(reference)):
                return reference
    return np.zeros(dim)


def conjugate_mixture_log_likelihood(family: ComponentFamily, hyperparameters: dict,
                                     x2d, labels, n_slots: int, reference=None):
    """Sum over clusters of the family's log marginal likelihood, in pytensor.

    Parameters
    ----------
    family : ComponentFamily
        The family (only its class and static layout are used).
    hyperparameters : dict
        Name -> tensor (or numeric value) of every hyperparameter.
    x2d : tensor of shape (n, data_dim)
        Data (prepared layout).
    labels : int tensor of shape (n,)
        Cluster labels; labels outside ``[0, n_slots)`` give ``-inf``.
    n_slots : int
        Label range.
    reference : array_like of shape (data_dim,), optional
        :attr:`SlotGraph.reference` (default: the data's column means when ``x2d`` is a
        constant, else zeros).

    Returns
    -------
    scalar tensor
        ``sum_j log m(x_{z = j})``, wrapped in ``check_parameters`` for the hyperparameters.
        One evaluation costs O(K x statistics row) while the labels are unchanged
        (:mod:`pymc_splitmerge.distributions.statistics`).
    """
    dim = int(x2d.type.shape[1])
    if reference is None:
        reference = data_reference(x2d, dim)
    graph = SlotGraph(pt, labels, n_slots, dim, reference)
    per_slot, conditions = family.log_marginal_graph(graph, hyperparameters, x2d)
    total = pt.sum(per_slot)
    total = pt.switch(graph.in_range, total, -np.inf)
    if conditions:
        total = check_parameters(total, *conditions,
                                 msg=f"{type(family).__name__} hyperparameters in their domain")
    return total


# --------------------------------------------------------------------------- sampling
def sample_clusters(family: ComponentFamily, labels: np.ndarray, rng: np.random.Generator,
                    observed: np.ndarray | None = None) -> np.ndarray:
    """Draw data given labels: one parameter draw per cluster, then its points i.i.d.

    Parameters
    ----------
    family : ComponentFamily
        Numeric family (bound to its data dimension).
    labels : ndarray of int, shape (n,)
    rng : numpy.random.Generator
    observed : ndarray of shape (n, data_dim), optional
        Prepared observed data.  When given, each cluster's parameters are drawn from their
        posterior given the observed rows of that cluster (posterior predictive replicate);
        otherwise from the prior (prior predictive).

    Returns
    -------
    ndarray of float64, shape (n, data_dim)
    """
    return family.sample_data(rng, labels, observed)


def _in_posterior_predictive() -> bool:
    """Whether the caller is PyMC's ``sample_posterior_predictive`` (any PyMC line).

    A forward-sampling graph cannot tell a partition read from a posterior trace from one
    drawn from its prior (PyMC replaces trace variables by inputs of the same graph, and on
    the numba backend a fallback node does not show where its inputs came from), so the
    mode is read from the call stack.
    """
    frame = sys._getframe(1)
    while frame is not None:
        if (frame.f_code.co_name == "sample_posterior_predictive"
                and str(frame.f_globals.get("__name__", "")).startswith("pymc.")):
            return True
        frame = frame.f_back
    return False


# --------------------------------------------------------------------------- RV and distribution
class ConjugateMixtureRV(RandomVariable):
    """Observations of a conjugate mixture given the partition (first parameter).

    Properties: ``family`` (the user's family object), ``symbolic_names`` (names of the
    hyperparameters given as pytensor variables, which follow the labels as parameters) and
    ``value_shape_tail`` (``()`` for 1-D data, ``(data_dim,)`` otherwise), ``n_points`` and
    ``n_slots`` (labels must lie in ``[0, n_slots)``) and ``conditions_on_observed``: whether
    the last parameter is the observed data.

    Forward sampling draws each cluster's parameters and then its points.  Inside
    ``pm.sample_posterior_predictive`` the parameters of a cluster are drawn from their
    posterior given the observed rows of the cluster under the trace's partition and
    hyperparameters (a posterior predictive replicate); everywhere else
    (``pm.sample_prior_predictive``, ``pm.draw``) from the prior.
    """

    name = "conjugate_mixture"
    dtype = "float64"
    _print_name = ("ConjugateMixture", "\\operatorname{ConjugateMixture}")
    __props__ = (*RandomVariable.__props__, "family", "symbolic_names", "value_shape_tail",
                 "n_points", "n_slots", "conditions_on_observed")

    def __init__(self, *args, family=None, symbolic_names=(), value_shape_tail=(),
                 n_points=1, n_slots=1, conditions_on_observed=False, **kwargs):
        if not isinstance(family, ComponentFamily):
            raise TypeError("ConjugateMixtureRV needs a ComponentFamily")
        self.family = family
        self.n_points = int(n_points)
        self.n_slots = int(n_slots)
        self.conditions_on_observed = bool(conditions_on_observed)
        self.symbolic_names = tuple(symbolic_names)
        self.value_shape_tail = tuple(int(d) for d in value_shape_tail)
        super().__init__(*args, **kwargs)

    def _supp_shape_from_params(self, dist_params, param_shapes=None):
        return (dist_params[0].shape[-1], *self.value_shape_tail)

    @property
    def data_dim(self) -> int:
        return self.value_shape_tail[0] if self.value_shape_tail else 1

    def numeric_family(self, *symbolic_values) -> ComponentFamily:
        """Numeric family for the given values of the symbolic hyperparameters."""
        if self.family.is_numeric and not self.symbolic_names:
            family = self.family
        else:
            family = self.family.with_values(
                **{name: np.asarray(value) for name, value in
                   zip(self.symbolic_names, symbolic_values, strict=True)})
        if family.data_dim is None:
            family.prepare_data(np.zeros((0, self.data_dim)))  # binds the dimension
        return family

    def rng_fn(self, rng, labels, *args):
        *symbolic_values, size = args
        if size is not None and len(size) != 0:
            raise NotImplementedError("ConjugateMixture has no batch dimensions")
        observed = None
        if self.conditions_on_observed:
            *symbolic_values, observed = symbolic_values
        family = self.numeric_family(*symbolic_values)
        if observed is not None and _in_posterior_predictive():
            observed = np.asarray(observed, dtype=np.float64).reshape(-1, self.data_dim)
        else:
            observed = None
        draws = sample_clusters(family, np.asarray(labels), rng, observed)
        return draws.reshape(labels.shape[0], *self.value_shape_tail)


def _signature(symbolic_tensors, value_ndim: int, conditions_on_observed: bool = False) -> str:
    inputs = ["(n)"]
    for i, tensor in enumerate(symbolic_tensors):
        inputs.append("(" + ",".join(f"h{i}_{d}" for d in range(tensor.ndim)) + ")")
    output = "(n)" if value_ndim == 1 else "(n,d)"
    if conditions_on_observed:
        inputs.append(output)
    return ",".join(inputs) + "->" + output


class ConjugateMixture(Distribution):
    r"""Data of a mixture with a conjugate component family, parameters integrated out.

    .. math:: \log p(x \mid z) = \sum_{j:\, n_j > 0} \log m(x_{\{i: z_i = j\}})

    Parameters
    ----------
    name : str
    partition : TensorVariable
        The partition, e.g. ``psm.DirichletProcess("z", alpha, n)``: int labels of shape (n,).
    component : ComponentFamily
        A family from :mod:`pymc_splitmerge.components`, e.g. ``NormalInverseWishart(...)``;
        hyperparameters may be numbers, ``pm.Data`` or random variables.
    observed : array_like or pm.Data
        Data of shape (n,) or (n, data_dim) (the layout of ``component.prepare_data``).

    Raises
    ------
    ValueError
        If the data fail the family's validation (NaN, domain), or ``len(data) != n``.

    References
    ----------
    .. [1] Bouchard-Côté, Doucet and Roth (2017), JMLR 18(28), Appendix E.
    """

    rv_type = ConjugateMixtureRV

    def __new__(cls, name, partition=None, component=None, *, observed=None, **kwargs):
        if observed is None:
            raise ValueError(
                "ConjugateMixture needs observed=data (it is the likelihood of the data given "
                "the partition; forward simulation alone is not supported)"
            )
        _check_arguments(partition, component)
        observed = _without_mask(observed, name)
        value = observed_value(observed)
        prepared = prepare_observed_data(component, value)
        n = _partition_length(partition)
        if prepared.shape[0] != n:
            raise ValueError(
                f"ConjugateMixture: the data have {prepared.shape[0]} rows but the partition "
                f"{getattr(partition, 'name', '')!r} has n={n} points; they must match"
            )
        if not isinstance(observed, Variable):
            observed = np.asarray(observed, dtype=np.float64)
        kwargs.setdefault("shape", tuple(value.shape))
        kwargs["observed_data"] = observed
        return super().__new__(cls, name, partition, component, observed=observed, **kwargs)

    @classmethod
    def dist(cls, partition, component, *, shape=None, observed_data=None, **kwargs):
        _check_arguments(partition, component)
        if shape is None:
            dim = component.data_dim
            shape = (_partition_length(partition),) + (() if dim in (None, 1) else (dim,))
        shape = tuple(int(s) for s in shape)
        if len(shape) not in (1, 2) or shape[0] != _partition_length(partition):
            raise ValueError(
                f"ConjugateMixture value shape must be (n,) or (n, data_dim) with "
                f"n={_partition_length(partition)}, got {shape}")
        kwargs["value_shape_tail"] = shape[1:]
        kwargs["observed_data"] = observed_data
        return super().dist([partition, component], shape=shape, **kwargs)

    @classmethod
    def rv_op(cls, partition, component, *, value_shape_tail=(), observed_data=None, size=None,
              rng=None):
        symbolic_names = tuple(
            name for name, value in component.hyperparameters.items()
            if not is_numeric_value(value))
        symbolic_tensors = [pt.as_tensor_variable(component.hyperparameters[name])
                            for name in symbolic_names]
        symbolic_tensors = [t if t.dtype == "float64" else t.astype("float64")
                            for t in symbolic_tensors]
        extra = []
        if observed_data is not None:  # conditions posterior predictive draws (class doc)
            data = pt.as_tensor_variable(observed_data)
            extra = [data if data.dtype == "float64" else data.astype("float64")]
        op = ConjugateMixtureRV(
            signature=_signature(symbolic_tensors, 1 + len(value_shape_tail), bool(extra)),
            family=component,
            symbolic_names=symbolic_names,
            value_shape_tail=value_shape_tail,
            n_points=_partition_length(partition),
            n_slots=number_of_label_slots(partition, _partition_length(partition)),
            conditions_on_observed=bool(extra),
        )
        labels = pt.as_tensor_variable(partition)
        return call_random_variable(op, labels, *symbolic_tensors, *extra, size=size, rng=rng)


def _without_mask(observed, name):
    """``observed`` with an all-false mask dropped; masked observations refused.

    PyMC turns a numpy masked array into imputed missing values (a free random variable per
    masked entry) that the partition samplers would not update, and the collapsed likelihood
    would read the hidden values as data; so masked entries are refused (``pm.Data`` holds
    no mask, so only arrays given directly are checked).
    """
    if not np.ma.isMaskedArray(observed):
        return observed
    mask = np.ma.getmaskarray(observed)
    if mask.any():
        rows = (np.flatnonzero(mask.reshape(mask.shape[0], -1).any(axis=1)).tolist()
                if mask.ndim else [])
        raise ValueError(
            f"ConjugateMixture {name!r}: observed is a masked array with {int(mask.sum())} "
            f"masked (missing) entries, in rows {rows[:10]}"
            f"{' ...' if len(rows) > 10 else ''}; missing observations are not supported by "
            "the partition samplers. Drop those rows (e.g. data[~mask.any(axis=1)]) and build "
            "the partition with n equal to the number of rows kept")
    return np.ma.getdata(observed)


def _partition_length(partition) -> int:
    length = partition.type.shape[0]
    if length is None:
        raise ValueError("the partition must have a static length n")
    return int(length)


def _check_arguments(partition, component) -> None:
    if not isinstance(component, ComponentFamily):
        raise TypeError(
            "component must be a family from pymc_splitmerge.components (e.g. "
            f"NormalInverseWishart(...)), got {type(component).__name__}")
    if not isinstance(partition, Variable) or partition.ndim != 1 or \
            not partition.dtype.startswith(("int", "uint")):
        raise TypeError(
            "partition must be an integer label vector of shape (n,), e.g. "
            f"psm.DirichletProcess('z', alpha=1.0, n=len(data)); got {partition!r}")
    _partition_length(partition)


@_logprob.register(ConjugateMixtureRV)
def _conjugate_mixture_logp(op, values, rng, size, labels, *symbolic, **kwargs):
    [value] = values
    symbolic = symbolic[:len(op.symbolic_names)]  # drop the observed data (sampling only)
    family = op.family
    n = op.n_points
    dim = op.data_dim
    x2d = pt.specify_shape(pt.as_tensor_variable(value).astype("float64").reshape((n, dim)),
                           (n, dim))
    hyper = {}
    for name, item in family.hyperparameters.items():
        if name in op.symbolic_names:
            hyper[name] = symbolic[op.symbolic_names.index(name)]
            continue
        try:
            hyper[name] = pt.as_tensor_variable(np.asarray(item, dtype=np.float64))
        except ValueError:  # ragged full Dirichlet concentration vectors
            hyper[name] = [np.asarray(v, dtype=np.float64) for v in item]
    reference = data_reference(value, dim) if isinstance(value, (Constant, SharedVariable)) \
        else None
    return conjugate_mixture_log_likelihood(family, hyper, x2d, labels, op.n_slots, reference)
