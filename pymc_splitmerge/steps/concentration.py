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

import numpy as np
import pytensor
import pytensor.tensor as pt
from pymc.model import modelcontext
from pymc.step_methods.compound import BlockedStep, Competence
try:
    from pytensor.graph.traversal import ancestors
except ImportError:  # older pytensor
    from pytensor.graph.basic import ancestors
from pytensor.graph.replace import graph_replace
from pytensor.tensor.random.basic import GammaRV

from pymc_splitmerge.kernels.concentration import (
    escobar_west_update,
    eppf_slice_update,
)

__all__ = ["ConcentrationGibbs", "PartitionPriorSlice"]


def _strip_casts(variable):
    """Follow dtype casts / identity ops back to the underlying variable."""
    from pytensor.scalar.basic import Cast, Identity
    from pytensor.tensor.elemwise import Elemwise

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


def _find_parameter_role(rv, model):
    """Return ``(partition_rv, parameter_name)`` of the partition prior that uses ``rv``."""
    from pymc_splitmerge.distributions.priors import PartitionPriorRV

    found = []
    for candidate in model.free_RVs:
        if candidate.owner is None or not isinstance(candidate.owner.op, PartitionPriorRV):
            continue
        op = candidate.owner.op
        for name, param in zip(op.parameter_names, _dist_params(candidate)):
            if _strip_casts(param) is rv:
                found.append((candidate, name))
    if not found:
        raise ValueError(
            f"{rv.name!r} is not directly a parameter (alpha / discount) of a partition prior "
            "(DirichletProcess, PitmanYor, FiniteDirichlet) in this model"
        )
    if len(found) > 1:
        raise ValueError(f"{rv.name!r} is a parameter of more than one partition prior")
    partition_rv, name = found[0]
    if name not in ("alpha", "discount"):
        raise ValueError(f"{rv.name!r} is the {name!r} input of {partition_rv.name!r}, not "
                         "alpha / discount")
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


def _sizes(labels):
    counts = np.bincount(np.asarray(labels, dtype=np.int64))
    return counts[counts > 0]


def _automatic_role(var):
    """``(partition_rv, role)`` when ``var`` is an exactly updatable prior parameter, else None.

    Used by the steps' ``competence`` (PyMC's automatic assignment).  PyMC hands only the
    random variable, so the model is the one on the context stack (``pm.sample`` inside
    ``with model:``).  Must be cheap and never raise: it runs for every free variable of
    every model sampled after ``import pymc_splitmerge``.
    """
    from pymc_splitmerge.distributions.priors import PartitionPriorRV

    try:
        if getattr(var, "owner", None) is None or isinstance(var.owner.op, PartitionPriorRV):
            return None
        model = modelcontext(None)
        if var not in model.free_RVs or not any(
                rv.owner is not None and isinstance(rv.owner.op, PartitionPriorRV)
                for rv in model.free_RVs):
            return None
        return _find_parameter_role(var, model)
    except Exception:  # no model on the stack, not a parameter, not exact: not ours
        return None


class _ParameterStep(BlockedStep):
    """Shared rng / point plumbing of the hyperparameter steps."""

    # given several parameters, PyMC's BlockedStep.__new__ builds one step per variable
    default_blocked = False

    def set_rng(self, rng) -> None:
        from pymc.util import get_random_generator

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
        from pymc_splitmerge.distributions.priors import DirichletProcessRV

        found = _automatic_role(var)
        if found is None:
            return Competence.INCOMPATIBLE
        partition_rv, role = found
        if (role == "alpha" and isinstance(partition_rv.owner.op, DirichletProcessRV)
                and isinstance(var.owner.op, GammaRV)):
            return Competence.IDEAL
        return Competence.INCOMPATIBLE

    def __init__(self, vars, model=None, rng=None, **kwargs):
        from pymc.util import get_random_generator

        from pymc_splitmerge.distributions.priors import DirichletProcessRV

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
            raise ValueError(
                f"ConcentrationGibbs needs a pm.Gamma prior on {rv.name!r}; got "
                f"{type(rv.owner.op).__name__}: use PartitionPriorSlice (any prior)"
            )
        shape, scale = _dist_params(rv)
        self.model = model
        self.vars = [value_var]
        self.partition_value_name = model.rvs_to_values[partition_rv].name
        self.access = _ParameterAccess(rv, value_var, model, extra_outputs=(shape, 1.0 / scale))
        self.rng = get_random_generator(rng)

    def step(self, point):
        alpha, shape, rate = (float(v) for v in self.access.values(point))
        labels = np.asarray(point[self.partition_value_name])
        sizes = _sizes(labels)
        info = escobar_west_update(alpha, sizes.size, labels.size, shape, rate, self.rng)
        new_point = dict(point)
        new_point[self.access.value_name] = self.access.transformed(info.alpha, point)
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

    Notes
    -----
    ``pm.Slice`` / NUTS are valid alternatives but cost a full-model logp per evaluation;
    here each evaluation is one EPPF plus the parameter's own compiled logp.
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

    def __init__(self, vars, model=None, width: float = 1.0, rng=None, **kwargs):
        from pymc.util import get_random_generator

        from pymc_splitmerge.distributions.priors import FiniteDirichletRV, PitmanYorRV

        kwargs.pop("blocked", None)
        model = modelcontext(model)
        if not isinstance(vars, list | tuple):
            vars = [vars]
        self.model = model
        self.width = float(width)
        self.updates = []
        self.vars = []
        for var in vars:
            value_var, rv = _value_and_rv(var, model)
            partition_rv, role = _find_parameter_role(rv, model)
            op = partition_rv.owner.op
            params = _dist_params(partition_rv)
            others = model.replace_rvs_by_values(params[:-1])
            self.updates.append({
                "role": role,
                "op": op,
                "partition_value_name": model.rvs_to_values[partition_rv].name,
                "access": _ParameterAccess(rv, value_var, model, extra_outputs=others),
                "is_pitman_yor": isinstance(op, PitmanYorRV),
                "is_finite": isinstance(op, FiniteDirichletRV),
            })
            self.vars.append(value_var)
        self.rng = get_random_generator(rng)

    def step(self, point):
        new_point = dict(point)
        n_evaluations = 0
        for update in self.updates:
            access = update["access"]
            value, *parameters = access.values(new_point)
            value = float(value)
            parameters = [np.asarray(p)[()] for p in parameters]
            op = update["op"]
            sizes = _sizes(new_point[update["partition_value_name"]])
            names = op.parameter_names
            current = dict(zip(names, parameters))

            def make_prior(theta, current=current, op=op, role=update["role"]):
                values = dict(current, **{role: theta})
                return op.numeric_prior(*(values[name] for name in op.parameter_names))

            lower, upper = 0.0, np.inf
            if update["is_pitman_yor"]:
                if update["role"] == "alpha":
                    lower = -float(current["discount"])
                else:
                    alpha = float(current["alpha"])
                    lower = max(0.0, -alpha)
                    if alpha < 0:
                        lower = float(np.nextafter(lower, np.inf))
                    upper = 1.0
            info = eppf_slice_update(value, make_prior, sizes,
                                     access.log_prior_density(new_point), self.rng,
                                     lower=lower, upper=upper, width=self.width)
            n_evaluations += info.n_evaluations
            new_point[access.value_name] = access.transformed(info.value, new_point)
        return new_point, [{"prior_slice_evaluations": n_evaluations}]
