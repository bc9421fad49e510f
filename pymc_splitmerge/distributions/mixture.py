r"""``ConjugateMixture``: observations of a mixture whose component parameters are integrated out.

Given the partition ``z`` (labels of shape (n,)) and a conjugate component family with
hyperparameters :math:`\eta`, the log-likelihood of the data is the sum over clusters of the
family's log marginal likelihood,

.. math:: \log p(x \mid z, \eta) = \sum_{j:\, n_j > 0} \log m_\eta(x_{\{i : z_i = j\}}).

It is written in pytensor for every family (so ``model.compile_logp`` and gradient-based
samplers for the hyperparameters see it): the sufficient statistics of the label slots
``0..L-1`` are scatter-adds of per-point statistics (``inc_subtensor`` on advanced
indices), and each slot's log marginal is evaluated in closed form, vectorised over slots.
Empty slots contribute exactly 0 (masked).

==========================  ================================================================
family                      per-cluster log marginal (see the family module for the maths)
==========================  ================================================================
NormalInverseWishart        PGSM eq. 31: Cholesky log-determinants of :math:`\Psi_0, \Psi_n`
NormalKnownCovariance       Gaussian integral: :math:`\Lambda_n = \Sigma_0^{-1} + n\Sigma^{-1}`
NormalInverseGamma          Murphy (2007) eq. 95
BetaBernoulli               :math:`\sum_j \log B(a_j + c_j, b_j + n - c_j) - \log B(a_j, b_j)`
DirichletCategorical        Dirichlet-multinomial per attribute
GammaPoisson                negative-binomial marginal per attribute
GridComponent               :math:`\operatorname{logsumexp}_g(\log\pi_g + \sum_i \ell_{ig})`
==========================  ================================================================

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

from pymc_splitmerge.components import (
    BetaBernoulli,
    ComponentFamily,
    DirichletCategorical,
    GammaPoisson,
    GridComponent,
    NormalInverseGamma,
    NormalInverseWishart,
    NormalKnownCovariance,
    ProductFamily,
)
from pymc_splitmerge.components.base import is_numeric_value
from pymc_splitmerge.distributions.priors import (
    FiniteDirichletRV,
    call_random_variable,
)

__all__ = [
    "ConjugateMixture",
    "ConjugateMixtureRV",
    "conjugate_mixture_log_likelihood",
    "sample_clusters",
    "observed_value",
    "prepare_observed_data",
    "number_of_label_slots",
]

_LOG_PI = float(np.log(np.pi))
_LOG_2PI = float(np.log(2.0 * np.pi))


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
        except Exception as error:  # noqa: BLE001 - re-raised with advice
            raise TypeError(
                "ConjugateMixture needs observed data whose value is known when the model is "
                "built (an array or pm.Data); got a symbolic expression that cannot be "
                f"evaluated: {error}"
            ) from error
    return np.asarray(observed)


def _symbolic_data_check(family: ComponentFamily, array: np.ndarray) -> np.ndarray:
    """Shape/finiteness/domain checks of data for a family with symbolic hyperparameters."""
    name = type(family).__name__
    if array.dtype.kind not in "biuf":
        raise TypeError(f"{name}: data must be numeric (got dtype {array.dtype})")
    if array.ndim == 1:
        array = array.reshape(-1, 1)
    if array.ndim != 2 or array.shape[1] < 1:
        raise ValueError(f"{name}: data must be a 2-D array (n, dim), got shape {array.shape}")
    x2d = np.ascontiguousarray(array, dtype=np.float64)
    if not np.all(np.isfinite(x2d)):
        row, column = np.argwhere(~np.isfinite(x2d))[0]
        raise ValueError(
            f"{name}: data contains NaN or infinite values (first at row {row}, column "
            f"{column}); remove or impute them"
        )
    if isinstance(family, BetaBernoulli) and np.any((x2d != 0.0) & (x2d != 1.0)):
        raise ValueError(f"{name}: data must be binary (0/1 or bool)")
    if isinstance(family, GammaPoisson | DirichletCategorical):
        if np.any((x2d < 0) | (x2d != np.round(x2d))):
            raise ValueError(f"{name}: data must be non-negative integers")
    if isinstance(family, NormalInverseGamma) and x2d.shape[1] != 1:
        raise ValueError(f"{name} is univariate: data must have shape (n,) or (n, 1)")
    if isinstance(family, ProductFamily):
        if x2d.shape[1] != family.data_dim:
            raise ValueError(f"{name}: data rows must have {family.data_dim} entries, got "
                             f"{x2d.shape[1]}")
        for sub, columns in family.components:
            prepare_observed_data(sub, x2d[:, columns])
    return x2d


def prepare_observed_data(family: ComponentFamily, data) -> np.ndarray:
    """Validated float64 data of shape (n, data_dim) for ``family`` (numeric or symbolic).

    Numeric families use ``family.prepare_data`` (which also binds the data dimension);
    families with symbolic hyperparameters get shape, finiteness and domain checks.
    """
    array = observed_value(data)
    if family.is_numeric:
        return family.prepare_data(array)
    return _symbolic_data_check(family, array)


def number_of_label_slots(partition: Variable, n: int) -> int:
    """Label range ``[0, L)`` of a partition variable: ``max(n, k)`` for finite Dirichlet."""
    owner = getattr(partition, "owner", None)
    if owner is not None and isinstance(owner.op, FiniteDirichletRV):
        k_input = owner.inputs[-2]
        if isinstance(k_input, Constant):
            return max(n, int(k_input.data))
    return n


def _segment_sum(values, labels, n_slots: int):
    """``out[j] = sum_{i: labels[i] = j} values[i]`` (scatter-add), shape (n_slots, ...)."""
    values = pt.as_tensor_variable(values)
    zeros = pt.zeros((n_slots, *[values.shape[d] for d in range(1, values.ndim)]),
                     dtype=values.dtype)
    return pt.inc_subtensor(zeros[labels], values)


def _is_finite(value):
    return pt.all(pt.invert(pt.isnan(value) | pt.isinf(value)))


def _log_det_cholesky(matrices):
    chol = pt.linalg.cholesky(matrices, lower=True)
    return 2.0 * pt.sum(pt.log(pt.diagonal(chol, axis1=-2, axis2=-1)), axis=-1), chol


def _as_vector(value, dim: int):
    value = pt.as_tensor_variable(value).astype("float64")
    if value.ndim == 0:
        return pt.alloc(value, dim)
    return value


def _as_matrix(value, dim: int):
    value = pt.as_tensor_variable(value).astype("float64")
    if value.ndim == 0:
        return value * pt.eye(dim)
    return value


# --------------------------------------------------------------------------- per family
def _normal_inverse_wishart(hyper, x2d, labels, counts, n_slots, dim):
    mu0 = _as_vector(hyper["mu0"], dim)
    kappa0 = pt.as_tensor_variable(hyper["kappa0"]).astype("float64")
    nu0 = pt.as_tensor_variable(hyper["nu0"]).astype("float64")
    psi0 = _as_matrix(hyper["psi0"], dim)
    sums = _segment_sum(x2d, labels, n_slots)  # (L, D)
    outer = _segment_sum(x2d[:, :, None] * x2d[:, None, :], labels, n_slots)  # (L, D, D)
    safe = pt.maximum(counts, 1.0)
    kappa_n = kappa0 + counts
    nu_n = nu0 + counts
    mean = sums / safe[:, None]
    scatter = outer - sums[:, :, None] * sums[:, None, :] / safe[:, None, None]
    deviation = mean - mu0[None, :]
    psi_n = (psi0[None] + scatter
             + (kappa0 * counts / kappa_n)[:, None, None]
             * deviation[:, :, None] * deviation[:, None, :])
    log_det0, _ = _log_det_cholesky(psi0)
    log_det_n, _ = _log_det_cholesky(psi_n)
    d_index = pt.arange(dim, dtype="float64")
    log_gamma_ratio = pt.sum(
        pt.gammaln(0.5 * (nu_n[:, None] - d_index[None, :]))
        - pt.gammaln(0.5 * (nu0 - d_index))[None, :],
        axis=1,
    )
    per_slot = (
        -0.5 * counts * dim * _LOG_PI
        + 0.5 * dim * (pt.log(kappa0) - pt.log(kappa_n))
        + 0.5 * nu0 * log_det0
        - 0.5 * nu_n * log_det_n
        + log_gamma_ratio
    )
    conditions = [pt.gt(kappa0, 0), pt.gt(nu0, dim - 1), _is_finite(log_det0),
                  pt.all(pt.eq(psi0, psi0.T))]
    return per_slot, conditions


def _normal_known_covariance(hyper, x2d, labels, counts, n_slots, dim):
    mu0 = _as_vector(hyper["mu0"], dim)
    sigma0 = _as_matrix(hyper["sigma0"], dim)
    sigma = _as_matrix(hyper["sigma"], dim)
    sigma_inverse = pt.linalg.inv(sigma)
    sigma0_inverse = pt.linalg.inv(sigma0)
    log_det_sigma, _ = _log_det_cholesky(sigma)
    log_det_sigma0, _ = _log_det_cholesky(sigma0)
    sums = _segment_sum(x2d, labels, n_slots)  # (L, D)
    quadratic = _segment_sum(pt.sum((x2d @ sigma_inverse) * x2d, axis=1), labels, n_slots)
    precision_n = sigma0_inverse[None] + counts[:, None, None] * sigma_inverse[None]  # (L,D,D)
    b = (sigma0_inverse @ mu0)[None, :] + sums @ sigma_inverse  # (L, D) (sigma^-1 symmetric)
    log_det_n, chol_n = _log_det_cholesky(precision_n)
    whitened = pt.linalg.solve_triangular(chol_n, b[:, :, None], lower=True)[:, :, 0]
    per_slot = (
        -0.5 * counts * dim * _LOG_2PI
        - 0.5 * counts * log_det_sigma
        - 0.5 * quadratic
        - 0.5 * pt.dot(mu0, sigma0_inverse @ mu0)
        + 0.5 * pt.sum(whitened**2, axis=1)
        - 0.5 * log_det_sigma0
        - 0.5 * log_det_n
    )
    conditions = [_is_finite(log_det_sigma), _is_finite(log_det_sigma0)]
    return per_slot, conditions


def _normal_inverse_gamma(hyper, x2d, labels, counts, n_slots, dim):
    mu0, kappa0, alpha0, beta0 = (pt.as_tensor_variable(hyper[k]).astype("float64")
                                  for k in ("mu0", "kappa0", "alpha0", "beta0"))
    centred = x2d[:, 0] - mu0
    s = _segment_sum(centred, labels, n_slots)
    q = _segment_sum(centred**2, labels, n_slots)
    kappa_n = kappa0 + counts
    alpha_n = alpha0 + 0.5 * counts
    beta_n = beta0 + 0.5 * (q - s**2 / kappa_n)
    per_slot = (
        pt.gammaln(alpha_n) - pt.gammaln(alpha0)
        + alpha0 * pt.log(beta0) - alpha_n * pt.log(beta_n)
        + 0.5 * (pt.log(kappa0) - pt.log(kappa_n))
        - 0.5 * counts * _LOG_2PI
    )
    conditions = [pt.gt(kappa0, 0), pt.gt(alpha0, 0), pt.gt(beta0, 0)]
    return per_slot, conditions


def _betaln(a, b):
    return pt.gammaln(a) + pt.gammaln(b) - pt.gammaln(a + b)


def _beta_bernoulli(hyper, x2d, labels, counts, n_slots, dim):
    a = _as_vector(hyper["a"], dim)
    b = _as_vector(hyper["b"], dim)
    ones = _segment_sum(x2d, labels, n_slots)  # (L, J)
    per_slot = pt.sum(
        _betaln(a[None] + ones, b[None] + counts[:, None] - ones) - _betaln(a, b)[None], axis=1
    )
    return per_slot, [pt.all(pt.gt(a, 0)), pt.all(pt.gt(b, 0))]


def _gamma_poisson(hyper, x2d, labels, counts, n_slots, dim):
    shape = _as_vector(hyper["shape"], dim)
    rate = _as_vector(hyper["rate"], dim)
    totals = _segment_sum(x2d, labels, n_slots)  # (L, J)
    log_factorials = _segment_sum(pt.sum(pt.gammaln(x2d + 1.0), axis=1), labels, n_slots)
    per_slot = pt.sum(
        pt.gammaln(shape[None] + totals) - pt.gammaln(shape)[None]
        + (shape * pt.log(rate))[None]
        - (shape[None] + totals) * pt.log(rate[None] + counts[:, None]),
        axis=1,
    ) - log_factorials
    return per_slot, [pt.all(pt.gt(shape, 0)), pt.all(pt.gt(rate, 0))]


def _dirichlet_categorical_layout(family: DirichletCategorical, dim: int):
    categories = np.asarray(family.hyperparameters["n_categories"], dtype=np.float64)
    if not is_numeric_value(family.hyperparameters["n_categories"]):
        raise TypeError("DirichletCategorical: n_categories must be numeric (static)")
    categories = np.broadcast_to(categories, (dim,)).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(categories)])
    attribute = np.repeat(np.arange(dim), categories)
    return categories, offsets, attribute


def _dirichlet_categorical(hyper, x2d, labels, counts, n_slots, dim, family):
    categories, offsets, attribute = _dirichlet_categorical_layout(family, dim)
    total = int(offsets[-1])
    concentration = hyper["concentration"]
    if isinstance(concentration, list):  # ragged numeric full Dirichlet vectors
        alpha = pt.as_tensor_variable(
            np.concatenate([np.asarray(v, dtype=np.float64) for v in concentration]))
    else:
        concentration = pt.as_tensor_variable(concentration).astype("float64")
        if concentration.ndim == 0:
            alpha = pt.alloc(concentration, total)
        elif concentration.ndim == 1:
            alpha = concentration[attribute]
        else:  # rectangular (J, K) full Dirichlet
            alpha = concentration.reshape((-1,))
    codes = pt.clip(x2d.astype("int64"), 0, categories[None, :] - 1)
    flat = labels[:, None] * total + offsets[None, :-1] + codes  # (n, J)
    ones = pt.ones(flat.shape, dtype="float64").reshape((-1,))
    table = pt.inc_subtensor(pt.zeros((n_slots * total,))[flat.reshape((-1,))], ones)
    table = table.reshape((n_slots, total))
    membership = np.zeros((total, dim))
    membership[np.arange(total), attribute] = 1.0
    alpha_totals = pt.dot(alpha, membership)  # (J,)
    per_slot = (
        pt.sum(pt.gammaln(alpha_totals)[None] - pt.gammaln(alpha_totals[None] + counts[:, None]),
               axis=1)
        + pt.sum(pt.gammaln(alpha[None] + table) - pt.gammaln(alpha)[None], axis=1)
    )
    return per_slot, [pt.all(pt.gt(alpha, 0))]


def _grid(hyper, x2d, labels, counts, n_slots, dim):
    log_prior = pt.as_tensor_variable(hyper["log_prior_grid"]).astype("float64")
    log_prior = log_prior - pt.logsumexp(log_prior)
    sums = _segment_sum(x2d, labels, n_slots)  # (L, G)
    per_slot = pt.logsumexp(log_prior[None] + sums, axis=1)
    return per_slot, []


_FAMILY_GRAPHS = {
    NormalInverseWishart: _normal_inverse_wishart,
    NormalKnownCovariance: _normal_known_covariance,
    NormalInverseGamma: _normal_inverse_gamma,
    BetaBernoulli: _beta_bernoulli,
    GammaPoisson: _gamma_poisson,
    GridComponent: _grid,
}


def _per_slot_log_marginal(family, hyperparameters, x2d, labels, counts, n_slots, dim):
    """Log marginal of every label slot (and domain conditions) for one family."""
    if isinstance(family, ProductFamily):  # sum of the sub-families on their columns
        per_slot, conditions = 0.0, []
        for sub_hyper, (sub, columns) in zip(family.split_hyperparameters(hyperparameters),
                                             family.components, strict=True):
            sub_x = pt.specify_shape(x2d[:, columns], (x2d.type.shape[0], columns.size))
            sub_slot, sub_conditions = _per_slot_log_marginal(
                sub, sub_hyper, sub_x, labels, counts, n_slots, int(columns.size))
            per_slot = per_slot + sub_slot
            conditions += sub_conditions
        return per_slot, conditions
    if isinstance(family, DirichletCategorical):
        return _dirichlet_categorical(hyperparameters, x2d, labels, counts, n_slots, dim, family)
    graph = next((g for cls, g in _FAMILY_GRAPHS.items() if isinstance(family, cls)), None)
    if graph is None:
        raise NotImplementedError(
            f"ConjugateMixture has no pytensor log marginal for {type(family).__name__}")
    return graph(hyperparameters, x2d, labels, counts, n_slots, dim)


def conjugate_mixture_log_likelihood(family: ComponentFamily, hyperparameters: dict,
                                     x2d, labels, n_slots: int):
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

    Returns
    -------
    scalar tensor
        ``sum_j log m(x_{z = j})``, wrapped in ``check_parameters`` for the hyperparameters.
    """
    dim = int(x2d.type.shape[1])
    labels = pt.as_tensor_variable(labels)
    in_range = pt.all(pt.ge(labels, 0) & pt.lt(labels, n_slots))
    safe = pt.clip(labels, 0, n_slots - 1).astype("int64")
    counts = _segment_sum(pt.ones(safe.shape, dtype="float64"), safe, n_slots)
    per_slot, conditions = _per_slot_log_marginal(family, hyperparameters, x2d, safe, counts,
                                                  n_slots, dim)
    total = pt.sum(pt.switch(pt.gt(counts, 0), per_slot, 0.0))
    total = pt.switch(in_range, total, -np.inf)
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
    labels = np.asarray(labels)
    out = np.empty((labels.shape[0], family.data_dim))
    for label in np.unique(labels):
        rows = np.flatnonzero(labels == label)
        parameters = family.sample_parameters(rng, None if observed is None else observed[rows])
        out[rows] = family.sample_observations(rng, parameters, rows.shape[0])
    return out


def _in_posterior_predictive() -> bool:
    """Whether the caller is PyMC's ``sample_posterior_predictive`` (any PyMC line).

    A forward-sampling graph cannot tell a partition read from a posterior trace from one
    drawn from its prior (PyMC replaces trace variables by inputs of the same graph, and on
    the numba backend a fallback node no longer shows where its inputs came from), so the
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
    return conjugate_mixture_log_likelihood(family, hyper, x2d, labels, op.n_slots)
