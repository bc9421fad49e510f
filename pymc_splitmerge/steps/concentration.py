"""PyMC step methods for the partition prior's hyperparameters (exact, EPPF-only updates).

Given the partition, the conditional of the prior's concentration α (and Pitman–Yor discount
d) involves only the EPPF and the parameter's own prior, so these steps are cheap: they never
evaluate the model's likelihood.  ``pm.Slice`` or NUTS on α also target the right
distribution, but each of their evaluations costs a full-model logp (the mixture marginal
likelihood included), 5–8 of them per draw for ``pm.Slice``.

* :class:`ConcentrationGibbs` — Escobar & West (1995) auxiliary-variable Gibbs update of the
  Dirichlet-process α with a ``pm.Gamma`` prior.
* :class:`PartitionPriorSlice` — univariate slice updates (Neal 2003) of α and/or d of a
  Dirichlet process, Pitman–Yor or finite-Dirichlet prior, with any prior on them.

Both require that the parameter influences the model only through its own prior and the
partition prior (checked at construction).
"""

from __future__ import annotations

import math

import numpy as np
import pytensor
import pytensor.tensor as pt
from pymc.model import modelcontext
from pymc.step_methods.compound import BlockedStep, Competence
from pymc.util import get_random_generator
from pytensor.scalar.basic import Cast, Identity
from pytensor.tensor.elemwise import Elemwise

try:
    from pytensor.graph.traversal import ancestors, graph_inputs
except ImportError:  # older pytensor
    from pytensor.graph.basic import ancestors, graph_inputs
from pytensor.graph.basic import Constant, Variable
from pytensor.graph.replace import graph_replace
from pytensor.tensor.random.basic import GammaRV

from pymc_splitmerge.distributions.checks import check_labels
from pymc_splitmerge.distributions.cluster_parameters import has_cluster_parameters
from pymc_splitmerge.distributions.discovery import discover
from pymc_splitmerge.distributions.priors import DirichletProcessRV, PartitionPriorRV
from pymc_splitmerge.kernels.concentration import (
    DENSITY_BETA,
    DENSITY_EXPONENTIAL,
    DENSITY_GAMMA,
    DENSITY_HALF_NORMAL,
    DENSITY_LOG_NORMAL,
    DENSITY_UNIFORM,
    NUMBA_PRIORS,
    build_parameter_slice,
    escobar_west_update,
    prior_parameter_update,
)

__all__ = ["ConcentrationGibbs", "PartitionPriorSlice"]


def _strip_casts(variable):
    """Follow dtype casts / identity ops back to the underlying variable."""
    while (variable.owner is not None and isinstance(variable.owner.op, Elemwise)
           and isinstance(variable.owner.op.scalar_op, Cast | Identity)):
        variable = variable.owner.inputs[0]
    return variable


def _dist_params(rv):
    op = rv.owner.op
    if hasattr(op, "dist_params"):
        return list(op.dist_params(rv.owner))
    return list(rv.owner.inputs[2:])


def _value_and_rv(var, model):
    value_var = model.rvs_to_values.get(var, var)
    if value_var not in model.value_vars:
        raise ValueError(f"{getattr(var, 'name', var)!r} is not a free variable of the model")
    return value_var, model.values_to_rvs[value_var]


def _prior_parameter_roles(partition_rv, model) -> dict:
    """``{"alpha": rv or None, "discount": rv or None}``: the free variables that are the
    partition prior's concentration / discount themselves (a partition with cluster
    parameters: its slot placement potential does not involve them)."""
    op = partition_rv.owner.op
    params = _dist_params(partition_rv)
    roles = {}
    for name in ("alpha", "discount"):
        var = None
        if name in op.parameter_names:
            candidate = _strip_casts(params[op.parameter_names.index(name)])
            var = candidate if any(candidate is free for free in model.free_RVs) else None
        roles[name] = var
    return roles


def _find_parameter_role(rv, model):
    """Return ``(partition_rv, parameter_name)`` of the partition prior that uses ``rv``.

    The roles come from :func:`~pymc_splitmerge.distributions.discovery.discover`
    (``concentration_var`` / ``discount_var`` of each partition variable of the model).
    """
    found = []
    for candidate in model.free_RVs:
        if candidate.owner is None or not isinstance(candidate.owner.op, PartitionPriorRV):
            continue
        if has_cluster_parameters(candidate):  # slot form: the EPPF is the partition's term
            roles = _prior_parameter_roles(candidate, model)
        else:
            try:
                described = discover(candidate, model)
            except (TypeError, ValueError):  # no ConjugateMixture: not sampled by this package
                continue
            roles = {"alpha": described.concentration_var, "discount": described.discount_var}
        found.extend((candidate, name) for name, var in roles.items() if var is rv)
    if not found:
        raise ValueError(
            f"{rv.name!r} is not directly a parameter (alpha / discount) of a partition prior "
            "(DirichletProcess, PitmanYor, FiniteDirichlet) used by a ConjugateMixture or by "
            "cluster parameters in this model"
        )
    if len(found) > 1:
        raise ValueError(f"{rv.name!r} is a parameter of more than one partition prior")
    partition_rv, name = found[0]
    # Exactness: the parameter may influence nothing else in the model.
    others = [v for v in (*model.basic_RVs, *model.potentials)
              if v is not rv and v is not partition_rv]
    for other in others:
        graph = other.owner.inputs if other.owner is not None else []
        if rv in set(ancestors(graph, blockers=[partition_rv])):
            raise ValueError(
                f"{rv.name!r} also influences {other.name!r}; its conditional then involves more "
                "than the partition prior: use pm.Slice or NUTS instead"
            )
    return partition_rv, name


class _ParameterAccess:
    """Compiled read of a free scalar parameter (natural scale) and write-back (transformed)."""

    def __init__(self, rv, value_var, model, extra_outputs=()):
        natural = model.replace_rvs_by_values([rv, *extra_outputs])
        self.read = model.compile_fn(natural, inputs=model.value_vars, on_unused_input="ignore",
                                     point_fn=True)
        self.value_name = value_var.name
        self.value_dtype = value_var.dtype
        new_value = pt.scalar("new_value", dtype="float64")
        transform = model.rvs_to_transforms.get(rv)
        forward = new_value if transform is None else transform.forward(new_value,
                                                                         *rv.owner.inputs)
        (forward,) = model.replace_rvs_by_values([forward])
        log_prior = model.logp(vars=[rv], jacobian=False, sum=True)
        # logp of the parameter's own prior as a function of its natural value
        (log_prior,) = graph_replace([log_prior], {value_var: forward}, strict=False)
        # only the value variables these graphs need (each pytensor input costs per call)
        needed = set(ancestors([forward, log_prior]))
        inputs = [v for v in model.value_vars if v in needed]
        self.value_var_names = [v.name for v in inputs]
        self._forward = pytensor.function([new_value, *inputs], forward, on_unused_input="ignore")
        self._log_prior = pytensor.function([new_value, *inputs], log_prior,
                                            on_unused_input="ignore")

    def values(self, point):
        return self.read(point)

    def transformed(self, natural, point):
        args = [point[name] for name in self.value_var_names]
        return np.asarray(self._forward(natural, *args), dtype=self.value_dtype)

    def log_prior_density(self, point):
        args = [point[name] for name in self.value_var_names]
        return lambda natural: float(self._log_prior(natural, *args))


def _label_counts(labels, name):
    """``np.bincount`` of the labels of the partition ``name`` (checked: ``check_labels``)."""
    array = np.asarray(labels)
    if array.dtype.kind not in "iu" or array.ndim != 1 or (array.size and array.min() < 0):
        check_labels(array, name)  # raises, naming the variable
    return np.bincount(array if array.dtype.kind == "i" else array.astype(np.int64))


def _sizes(labels, name):
    """Cluster sizes of the labels of the partition ``name``."""
    counts = _label_counts(labels, name)
    return counts[counts > 0]


def _automatic_role(var):
    """``(partition_rv, role)`` when ``var`` is an exactly updatable prior parameter, else None.

    Used by the steps' ``competence`` (PyMC's automatic assignment).  PyMC hands only the
    random variable, so the model is the one on the context stack (``pm.sample`` inside
    ``with model:``).  Must be cheap and never raise: it runs for every free variable of
    every model sampled after ``import pymc_splitmerge``.
    """
    try:
        if getattr(var, "owner", None) is None or isinstance(var.owner.op, PartitionPriorRV):
            return None
        model = modelcontext(None)
        if var not in model.free_RVs or not any(
                rv.owner is not None and isinstance(rv.owner.op, PartitionPriorRV)
                for rv in model.free_RVs):
            return None
        return _find_parameter_role(var, model)
    except Exception:  # noqa: BLE001 -- competence must never raise: no model on the stack, not a parameter, not exact: not ours
        return None


class _ParameterStep(BlockedStep):
    """Shared rng / point plumbing of the hyperparameter steps."""

    # given several parameters, PyMC's BlockedStep.__new__ builds one step per variable
    default_blocked = False

    def set_rng(self, rng) -> None:
        self.rng = get_random_generator(rng, copy=False)

    def setup_chain(self, rng, tune: int, draws: int) -> None:
        self.set_rng(rng)


class ConcentrationGibbs(_ParameterStep):
    """Escobar–West Gibbs update of a Dirichlet-process concentration with a Gamma prior.

    Parameters
    ----------
    vars : TensorVariable or list of one
        The concentration α: a ``pm.Gamma`` random variable used directly as the ``alpha``
        of a ``DirichletProcess`` (its Gamma parameters may themselves be random).
    model : pymc.Model, optional
    rng : int or numpy.random.Generator, optional
        Used only if PyMC does not hand a generator to the step.

    Notes
    -----
    ``pm.Slice`` / NUTS on α are also valid but evaluate the full model logp several times
    per draw; this update is O(1) given the number of clusters.  PyMC's Gamma is
    parameterised internally by shape and *scale* = 1/beta; the rate is read as 1/scale.
    Sampler stat: ``concentration_eta`` (the auxiliary Beta variable).

    References
    ----------
    Escobar, M. D. and West, M. (1995). JASA 90(430), 577-588, section 6.
    """

    name = "concentration_gibbs"
    stats_dtypes_shapes = {"concentration_eta": (np.float64, [])}

    @staticmethod
    def competence(var, has_grad=None):
        """IDEAL for the ``pm.Gamma`` alpha of a Dirichlet process that it updates exactly."""
        found = _automatic_role(var)
        if found is None:
            return Competence.INCOMPATIBLE
        partition_rv, role = found
        if (role == "alpha" and isinstance(partition_rv.owner.op, DirichletProcessRV)
                and isinstance(var.owner.op, GammaRV)):
            return Competence.IDEAL
        return Competence.INCOMPATIBLE

    def __init__(self, vars, model=None, rng=None, **kwargs):
        kwargs.pop("blocked", None)
        model = modelcontext(model)
        if isinstance(vars, list | tuple):
            if len(vars) != 1:
                raise ValueError("ConcentrationGibbs updates exactly one variable")
            (vars,) = vars
        value_var, rv = _value_and_rv(vars, model)
        partition_rv, role = _find_parameter_role(rv, model)
        if not isinstance(partition_rv.owner.op, DirichletProcessRV) or role != "alpha":
            raise ValueError(
                f"ConcentrationGibbs needs the alpha of a DirichletProcess; {rv.name!r} is the "
                f"{role!r} of a {type(partition_rv.owner.op).__name__}: use PartitionPriorSlice"
            )
        if not isinstance(rv.owner.op, GammaRV):
            raise ValueError(  # noqa: TRY004 -- a model error (wrong prior), not a wrong type
                f"ConcentrationGibbs needs a pm.Gamma prior on {rv.name!r}; got "
                f"{type(rv.owner.op).__name__}: use PartitionPriorSlice (any prior)"
            )
        shape, scale = _dist_params(rv)
        self.model = model
        self.vars = [value_var]
        self.partition_value_name = model.rvs_to_values[partition_rv].name
        self.value_name = value_var.name
        self.value_dtype = value_var.dtype
        # Fast path (no compiled call per draw): alpha read through its value transform and
        # constant (or directly free) Gamma parameters; otherwise one compiled function.
        pair = _transform_pair(rv, model)
        readers = [_fast_reader(param, model) for param in (rv, shape, 1.0 / scale)]
        if pair is not None and all(read is not None for read in readers):
            self.readers, self.forward, self.access = readers, pair[1], None
        else:
            self.readers = self.forward = None
            self.access = _ParameterAccess(rv, value_var, model,
                                           extra_outputs=(shape, 1.0 / scale))
        self.rng = get_random_generator(rng)

    def step(self, point):
        if self.access is None:
            alpha, shape, rate = (read(point) for read in self.readers)
        else:
            alpha, shape, rate = (float(v) for v in self.access.values(point))
        labels = np.asarray(point[self.partition_value_name])
        sizes = _sizes(labels, self.partition_value_name)
        info = escobar_west_update(alpha, sizes.size, labels.size, shape, rate, self.rng)
        new_point = dict(point)
        new_point[self.value_name] = (
            np.asarray(self.forward(info.alpha), dtype=self.value_dtype)
            if self.access is None else self.access.transformed(info.alpha, point))
        return new_point, [{"concentration_eta": info.eta}]


class PartitionPriorSlice(_ParameterStep):
    """Exact slice updates of the concentration / discount of a partition prior.

    Each given variable is updated in turn by univariate slice sampling (Neal 2003, stepping
    out and shrinkage) on its exact conditional ∝ own prior × EPPF, respecting
    ``0 <= d < 1`` and ``α > -d`` (Pitman–Yor) or ``α > 0`` (Dirichlet process, finite
    Dirichlet).

    Parameters
    ----------
    vars : TensorVariable or list of TensorVariable
        Free parameters ``alpha`` / ``discount`` used directly as inputs of a
        ``DirichletProcess``, ``PitmanYor`` or ``FiniteDirichlet`` variable; any prior.
    model : pymc.Model, optional
    width : float
        Initial stepping-out width (on the ``log(α - lower)`` scale).
    rng : int or numpy.random.Generator, optional
    use_numba : bool
        Use the numba kernel where supported (see Notes); ``False`` forces the plain path.

    Notes
    -----
    ``pm.Slice`` / NUTS are valid alternatives but cost a full-model logp per evaluation.
    Here the update runs in numba over the O(K) cluster sizes
    (:func:`~pymc_splitmerge.kernels.concentration.build_parameter_slice`) when the
    parameter's prior is a ``Gamma``, ``Exponential``, ``Uniform``, ``Beta``, ``HalfNormal`` or
    ``LogNormal`` with constant parameters and every input of the partition prior is a
    constant or a free variable with a log / log-odds / interval transform; otherwise each
    evaluation is one numpy EPPF plus the parameter's own compiled logp
    (:func:`~pymc_splitmerge.kernels.concentration.prior_parameter_update`).
    Sampler stat: ``prior_slice_evaluations`` (log-density evaluations in the draw).
    """

    name = "prior_slice"
    stats_dtypes_shapes = {"prior_slice_evaluations": (np.int64, [])}
    # several parameters of one prior (Pitman–Yor alpha and discount) are updated in turn by
    # one step
    default_blocked = True

    @staticmethod
    def competence(var, has_grad=None):
        """IDEAL for an alpha / discount of a DP, Pitman–Yor or finite-Dirichlet prior.

        Only when the parameter is used directly as that input and influences nothing else
        (the update is then exact); PREFERRED (losing to :class:`ConcentrationGibbs`) for a
        Dirichlet-process alpha with a ``pm.Gamma`` prior.
        """
        found = _automatic_role(var)
        if found is None:
            return Competence.INCOMPATIBLE
        if ConcentrationGibbs.competence(var, has_grad) == Competence.IDEAL:
            return Competence.PREFERRED
        return Competence.IDEAL

    def __init__(self, vars, model=None, width: float = 1.0, rng=None, use_numba: bool = True,
                 **kwargs):
        kwargs.pop("blocked", None)
        model = modelcontext(model)
        if not isinstance(vars, list | tuple):
            vars = [vars]
        self.model = model
        self.width = float(width)
        if not self.width > 0:
            raise ValueError(f"width must be positive; got {width}")
        self.updates = []
        self.vars = []
        for var in vars:
            value_var, rv = _value_and_rv(var, model)
            partition_rv, role = _find_parameter_role(rv, model)
            self.updates.append(_SliceUpdate(rv, value_var, partition_rv, role, model,
                                             self.width, use_numba))
            self.vars.append(value_var)
        self.rng = get_random_generator(rng)

    def step(self, point):
        new_point = dict(point)
        n_evaluations = 0
        for update in self.updates:
            n_evaluations += update(new_point, self.rng)
        return new_point, [{"prior_slice_evaluations": n_evaluations}]


# --------------------------------------------------------------------------- fast path
# Own priors of the parameter with a numba log density: RV type name -> density code and
# the distribution parameters (constants) in the kernel's order.
_NUMBA_DENSITIES = {
    "GammaRV": DENSITY_GAMMA,              # (shape, scale)
    "ExponentialRV": DENSITY_EXPONENTIAL,  # (scale,)
    "UniformRV": DENSITY_UNIFORM,          # (lower, upper)
    "BetaRV": DENSITY_BETA,                # (alpha, beta)
    "HalfNormalRV": DENSITY_HALF_NORMAL,   # (loc, scale)
    "LogNormalRV": DENSITY_LOG_NORMAL,     # (mu, sigma)
}


def _constant(variable):
    """Float value of a scalar graph of constants only (e.g. ``1 / beta``), else None."""
    if isinstance(variable, int | float | np.number):
        return float(variable)
    if not isinstance(variable, Variable):
        return None
    if isinstance(variable, Constant):
        value = np.asarray(variable.data, dtype=np.float64)
    elif all(isinstance(leaf, Constant) for leaf in graph_inputs([variable])):
        value = np.asarray(variable.eval(), dtype=np.float64)
    else:
        return None
    return float(value) if value.ndim == 0 else None


def _numba_density(rv):
    """``(code, params)`` of the parameter's own prior when numba has it, else None."""
    code = _NUMBA_DENSITIES.get(type(rv.owner.op).__name__)
    if code is None:
        return None
    params = [_constant(p) for p in _dist_params(rv)]
    if any(p is None for p in params):
        return None
    return code, params


def _transform_pair(rv, model):
    """``(backward, forward)`` float functions of the value transform of ``rv``, or None."""
    transform = model.rvs_to_transforms.get(rv)
    name = type(transform).__name__
    if transform is None:
        return float, float
    if name == "LogTransform":
        return math.exp, math.log
    if name == "LogOddsTransform":
        return (lambda v: 1.0 / (1.0 + math.exp(-v)),
                lambda x: math.log(x) - math.log1p(-x))
    if hasattr(transform, "get_a_and_b"):
        a, b, lower_bounded, upper_bounded = transform.get_a_and_b(rv.owner.inputs)
        a = _constant(a) if lower_bounded else None
        b = _constant(b) if upper_bounded else None
        if a is None or b is None or not (math.isfinite(a) and math.isfinite(b)):
            return None

        def backward(v, a=a, b=b):
            sigmoid = 1.0 / (1.0 + math.exp(-v))
            return sigmoid * b + (1.0 - sigmoid) * a

        return backward, lambda x, a=a, b=b: math.log(x - a) - math.log(b - x)
    return None


def _fast_reader(param, model):
    """Function point -> natural value of a prior input (constant or transformed free RV)."""
    value = _constant(param)
    if value is not None:
        return lambda point, value=value: value
    rv = _strip_casts(param)
    if not any(rv is free for free in model.free_RVs):
        return None
    pair = _transform_pair(rv, model)
    if pair is None:
        return None
    backward, _ = pair
    name = model.rvs_to_values[rv].name
    return lambda point: backward(float(point[name]))


class _SliceUpdate:
    """One parameter's slice update: numba kernel over the cluster sizes, or the plain path."""

    def __init__(self, rv, value_var, partition_rv, role, model, width, use_numba=True):
        op = partition_rv.owner.op
        params = _dist_params(partition_rv)[:-1]  # drop n
        self.role = role
        self.op = op
        self.width = width
        self.partition_value_name = model.rvs_to_values[partition_rv].name
        self.value_name = value_var.name
        self.value_dtype = value_var.dtype
        density = _numba_density(rv)
        pair = _transform_pair(rv, model)
        readers = [_fast_reader(param, model) for param in params]
        self.fast = (use_numba and op.prior_class in NUMBA_PRIORS and density is not None
                     and pair is not None and all(r is not None for r in readers))
        if self.fast:
            self.readers = readers
            self.forward = pair[1]
            self.kernel = build_parameter_slice(op.prior_class, role, density[0], density[1],
                                                width=width)
        else:
            others = model.replace_rvs_by_values(params)
            self.access = _ParameterAccess(rv, value_var, model, extra_outputs=others)

    def __call__(self, point, rng) -> int:
        """Update ``point`` (a private copy) in place; return the number of evaluations."""
        sizes = _label_counts(point[self.partition_value_name], self.partition_value_name)
        if self.fast:
            theta = np.array([read(point) for read in self.readers])
            info = self.kernel(theta, sizes, rng)
            point[self.value_name] = np.asarray(self.forward(info.value), dtype=self.value_dtype)
            return info.n_evaluations
        access = self.access
        _, *parameters = access.values(point)
        prior = self.op.numeric_prior(*(np.asarray(p)[()] for p in parameters))
        info = prior_parameter_update(prior, self.role, sizes, access.log_prior_density(point),
                                      rng, width=self.width)
        point[access.value_name] = access.transformed(info.value, point)
        return info.n_evaluations
