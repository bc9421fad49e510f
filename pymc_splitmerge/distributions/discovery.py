"""Find, from a partition variable, everything a partition step method needs.

``discover(z)`` reads the model graph: the partition prior (the ``Op`` of ``z`` and its
inputs), the single :class:`~pymc_splitmerge.distributions.mixture.ConjugateMixture` whose
first input is ``z``, the component family and the prepared data.  Hyperparameters that are
random variables or ``pm.Data`` are evaluated from a PyMC point by *one* compiled function
(the prior's parameters and the family's symbolic hyperparameters, with random variables
replaced by their value variables).  Results are cached per model and partition variable,
and a cached description is used only while the shared variables behind the observed data
still hold the values it was built from: ``pm.set_data`` (or ``shared.set_value``) replaces
a shared variable's stored array, so comparing the stored arrays by identity
(:meth:`PartitionModel.is_current`, a few pointer comparisons) tells a stale description
from a current one.  ``pm.Data`` hyperparameters need no such check: the compiled
hyperparameter function reads them at every call.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pymc as pm
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Constant, Variable

try:  # pytensor >= 2.31
    from pytensor.graph.traversal import ancestors
except ImportError:  # pragma: no cover - older pytensor
    from pytensor.graph.basic import ancestors

from pymc_splitmerge.components import ComponentFamily
from pymc_splitmerge.distributions.checks import check_hyperparameter_supports
from pymc_splitmerge.distributions.mixture import ConjugateMixtureRV, prepare_observed_data
from pymc_splitmerge.distributions.priors import (
    MixtureOfFiniteMixturesRV,
    PartitionPriorRV,
)
from pymc_splitmerge.priors import GibbsTypePrior

__all__ = ["PartitionModel", "discover", "label_reading_terms"]


@dataclass(frozen=True, eq=False)
class PartitionModel:
    """What the partition samplers need to know about a model (see :func:`discover`).

    Attributes
    ----------
    partition_var, value_var : TensorVariable
        The partition random variable ``z`` and its value variable.
    prior_class : type
        Numeric prior class from :mod:`pymc_splitmerge.priors`.
    family : ComponentFamily
        The (possibly symbolic) family given by the user.
    data : ndarray of float64, shape (n, data_dim)
        Prepared observations.
    observed_var : TensorVariable
        The ``ConjugateMixture`` random variable.
    random_hyperparameters : bool
        Whether prior or family hyperparameters depend on free random variables or Data.
    concentration_var, discount_var : TensorVariable or None
        The free random variables used directly as the prior's ``alpha`` / ``discount``.
    model : pm.Model
    """

    partition_var: Variable
    value_var: Variable
    prior_class: type
    family: ComponentFamily
    data: np.ndarray
    observed_var: Variable
    random_hyperparameters: bool
    concentration_var: Variable | None
    discount_var: Variable | None
    model: Any
    _constant_prior_values: dict = field(repr=False)
    _symbolic_names: tuple = field(repr=False)  # ("prior:alpha", "family:mu0", ...)
    _function: Callable | None = field(repr=False)
    _numeric_prior_factory: Callable = field(repr=False)
    # (shared variable, the array it held when ``data`` was read) for every shared variable
    # behind the observed data; see the module doc
    _data_sources: tuple = field(default=(), repr=False)

    def is_current(self) -> bool:
        """Whether the observed data still hold the values this description was built from.

        False after ``pm.set_data`` (or ``set_value``) of a shared variable the observed data
        are computed from; :func:`discover` then builds a new description.
        """
        return all(shared.container.storage[0] is value for shared, value in self._data_sources)

    @property
    def n_points(self) -> int:
        """Number of points ``n``."""
        return int(self.data.shape[0])

    def _evaluate(self, point) -> dict[str, Any]:
        if self._function is None:
            return {}
        outputs = self._function(point)
        return dict(zip(self._symbolic_names, outputs, strict=True))

    def hyperparameter_values(self, point, evaluated=None) -> dict[str, Any]:
        """Current hyperparameter values.

        Parameters
        ----------
        point : dict
            A PyMC point (value-variable name -> value); may be empty when no hyperparameter
            is random.
        evaluated : dict, optional
            The random hyperparameters already evaluated at ``point`` (``_evaluate(point)``),
            so that a caller that compared them does not evaluate them a second time.

        Returns
        -------
        dict
            The prior's parameters by name (``alpha``, ``discount``, ``k``, ``gamma``,
            ``k_prior`` as applicable) and ``"family"``: a dict of every family
            hyperparameter with numeric values.
        """
        if evaluated is None:
            evaluated = self._evaluate(point)
        values = dict(self._constant_prior_values)
        family_values = dict(self.family.hyperparameters)
        for key, value in evaluated.items():
            kind, name = key.split(":", 1)
            if kind == "prior":
                values[name] = float(np.asarray(value))
            else:
                family_values[name] = np.asarray(value)
        values["family"] = family_values
        return values

    def numeric_prior(self, point, evaluated=None) -> GibbsTypePrior:
        """Numeric prior with the hyperparameter values of ``point`` (``evaluated``: as in
        :meth:`hyperparameter_values`)."""
        values = self.hyperparameter_values(point, evaluated)
        values.pop("family")
        return self._numeric_prior_factory(values)

    @property
    def symbolic_family(self) -> bool:
        """Whether a hyperparameter of the component family is symbolic: evaluated from the
        point (``"family:..."`` among the evaluated names), not a constant of the family."""
        return any(key.startswith("family:") for key in self._symbolic_names)

    @property
    def random_family(self) -> bool:
        """Whether a hyperparameter of the component family depends on a free random variable
        of the model (so that the family changes between draws)."""
        op = self.observed_var.owner.op
        inputs = list(op.dist_params(self.observed_var.owner))[1:1 + len(op.symbolic_names)]
        free = set(self.model.free_RVs)
        return any(variable in free for variable in ancestors(inputs))

    def numeric_family(self, point, evaluated=None) -> ComponentFamily:
        """Numeric family with the hyperparameter values of ``point`` (bound to the data);
        ``evaluated``: as in :meth:`hyperparameter_values`."""
        if self.family.is_numeric and not self.symbolic_family:
            return self.family
        if evaluated is None:
            evaluated = self._evaluate(point)
        symbolic = {key.split(":", 1)[1]: np.asarray(value) for key, value in evaluated.items()
                    if key.startswith("family:")}
        return self.observed_var.owner.op.numeric_family(
            *(symbolic[name] for name in self.observed_var.owner.op.symbolic_names)
        )


_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class _PointFunction:
    """A compiled function of some value variables, called with a whole PyMC point."""

    __slots__ = ("function", "names")

    def __init__(self, function, names):
        self.function = function
        self.names = names

    def __call__(self, point):
        return self.function(*[point[name] for name in self.names])


def _free_rv_or_none(variable, model) -> Variable | None:
    return variable if any(variable is rv for rv in model.free_RVs) else None


def discover(partition_var, model=None) -> PartitionModel:
    """Describe the mixture model built around a partition variable.

    Parameters
    ----------
    partition_var : TensorVariable
        A partition created with ``DirichletProcess``, ``PitmanYor``, ``FiniteDirichlet`` or
        ``MixtureOfFiniteMixtures``.
    model : pm.Model, optional
        Defaults to the model on the context stack.

    Returns
    -------
    PartitionModel

    Raises
    ------
    TypeError
        If ``partition_var`` is not a partition prior of this package.
    ValueError
        If no ``ConjugateMixture`` uses the partition, if more than one does, if another term
        of the model reads the labels (:func:`label_reading_terms`), if the observed data no
        longer have ``n`` rows (``pm.set_data``), or if a random hyperparameter's prior
        reaches outside its domain
        (:func:`~pymc_splitmerge.distributions.checks.check_hyperparameter_supports`).
    """
    try:
        model = pm.modelcontext(model)
    except TypeError as error:
        raise TypeError(
            "discover needs the model: call it inside `with model:` or pass model=model"
        ) from error
    owner = getattr(partition_var, "owner", None)
    if owner is None or not isinstance(owner.op, PartitionPriorRV):
        raise TypeError(
            "discover needs a partition variable created with DirichletProcess, PitmanYor, "
            f"FiniteDirichlet or MixtureOfFiniteMixtures; got {partition_var!r}"
        )
    if not any(partition_var is rv for rv in model.free_RVs):
        raise ValueError(f"{partition_var.name!r} is not a free random variable of the model")
    key = (partition_var, len(model.free_RVs), len(model.observed_RVs),
           len(model.deterministics), len(model.potentials))
    per_model = _CACHE.setdefault(model, {})
    cached = per_model.get(key)
    if cached is not None and cached.is_current():
        return cached
    result = _discover(partition_var, model)
    if cached is None:  # a new model (not new data): its hyperparameter priors once
        check_hyperparameter_supports(result)
    per_model[key] = result
    return result


def label_reading_terms(partition_var, observed_var, model) -> list[str]:
    """The model terms that read the labels of ``partition_var`` but that the partition
    samplers cannot account for, each described with its kind and name.

    The partition samplers update the labels from the partition prior and the collapsed
    likelihood of the one ``ConjugateMixture`` ``observed_var`` alone.  Every other term of
    the model's log density whose graph has the partition among its ancestors would be
    ignored by them: another random variable (free or observed, e.g. a custom distribution
    indexed by the labels), a ``pm.Potential``, and a hyperparameter or data input of the
    ``ConjugateMixture`` itself computed from the labels.  ``pm.Deterministic`` variables
    are not listed: they do not enter the log density.

    Parameters
    ----------
    partition_var : TensorVariable
        The partition random variable.
    observed_var : TensorVariable
        Its ``ConjugateMixture``, which may read the labels through its first input only.
    model : pm.Model

    Returns
    -------
    list of str
        E.g. ``["the potential 'one_cluster'", "the random variable 'w'"]``; empty when
        nothing but the prior and the mixture reads the labels.
    """
    found = []

    def reads(variables) -> bool:
        return partition_var in ancestors(list(variables))

    for rv in model.basic_RVs:
        if rv is partition_var:
            continue
        if rv is observed_var:
            inputs = list(observed_var.owner.op.dist_params(observed_var.owner))[1:]
            if reads(inputs):
                found.append(f"an input (hyperparameter or data) of {rv.name!r}")
            continue
        if reads(rv.owner.inputs):
            kind = "observed variable" if rv in model.observed_RVs else "random variable"
            found.append(f"the {kind} {rv.name!r}")
    for potential in model.potentials:
        if reads([potential]):
            found.append(f"the potential {potential.name!r}")
    return found


def _discover(partition_var, model) -> PartitionModel:
    name = partition_var.name
    # dict.fromkeys: pymc 5's sample_posterior_predictive appends the observed variables to
    # model.observed_RVs a second time (``observed_vars += ...`` on the model's own list)
    mixtures = [rv for rv in dict.fromkeys(model.observed_RVs)
                if isinstance(rv.owner.op, ConjugateMixtureRV)
                and rv.owner.op.dist_params(rv.owner)[0] is partition_var]
    if not mixtures:
        raise ValueError(
            f"no ConjugateMixture in the model uses the partition {name!r}; add "
            f"psm.ConjugateMixture('y', partition={name}, component=..., observed=data)"
        )
    if len(mixtures) > 1:
        raise ValueError(
            f"{len(mixtures)} ConjugateMixture variables use the partition {name!r} "
            f"({[rv.name for rv in mixtures]}); only one is supported. Stack the data "
            "column-wise into one array and use one ConjugateMixture with a "
            "psm.ProductFamily, e.g. component=psm.ProductFamily([(psm.NormalInverseWishart"
            "(...), [0, 1]), (psm.DirichletCategorical(...), [2])]) for columns 0-1 "
            "continuous and column 2 categorical"
        )
    [observed_var] = mixtures
    readers = label_reading_terms(partition_var, observed_var, model)
    if readers:
        raise ValueError(
            f"{', '.join(readers)} of the model read{'s' if len(readers) == 1 else ''} the "
            f"labels of the partition {name!r}; the partition samplers account only for the "
            f"partition's prior and its ConjugateMixture {observed_var.name!r}, so "
            f"{'this term' if len(readers) == 1 else 'these terms'} would be left out of the "
            "posterior they sample. Remove it from the model, or express it through the "
            "partition prior or the ConjugateMixture's component family"
        )

    op = partition_var.owner.op
    prior_params = list(op.dist_params(partition_var.owner))[:-1]  # drop n
    constant_prior_values: dict[str, Any] = {}
    symbolic_outputs: list[Variable] = []
    symbolic_names: list[str] = []
    for param_name, param in zip(op.parameter_names, prior_params, strict=True):
        if isinstance(param, Constant):
            value = np.asarray(param.data)
            constant_prior_values[param_name] = (int(value) if param_name == "k"
                                                 else float(value))
        else:
            symbolic_outputs.append(param)
            symbolic_names.append(f"prior:{param_name}")
    if isinstance(op, MixtureOfFiniteMixturesRV):
        constant_prior_values["gamma"] = op.gamma
        constant_prior_values["k_prior"] = op.k_prior

    mixture_op = observed_var.owner.op
    family_inputs = list(mixture_op.dist_params(observed_var.owner))[
        1:1 + len(mixture_op.symbolic_names)]
    for hyper_name, tensor in zip(mixture_op.symbolic_names, family_inputs, strict=True):
        symbolic_outputs.append(tensor)
        symbolic_names.append(f"family:{hyper_name}")

    function = None
    if symbolic_outputs:
        replaced = model.replace_rvs_by_values(symbolic_outputs)
        # only the value variables the hyperparameters depend on: each input of a compiled
        # function costs per call, and the labels (n of them) are not among them
        needed = set(ancestors(replaced))
        inputs = [value for value in model.value_vars if value in needed]
        function = _PointFunction(
            model.compile_fn(replaced, inputs=inputs, on_unused_input="ignore",
                             point_fn=False),
            tuple(value.name for value in inputs))

    alpha_var = discount_var = None
    if "alpha" in op.parameter_names:
        alpha_var = _free_rv_or_none(prior_params[op.parameter_names.index("alpha")], model)
    if "discount" in op.parameter_names:
        discount_var = _free_rv_or_none(
            prior_params[op.parameter_names.index("discount")], model)

    def factory(values):
        return op.prior_class(**{p: values[p] for p in op.prior_class.parameter_names})

    data_var = model.rvs_to_values[observed_var]
    data_sources = _shared_sources(data_var)
    data = prepare_observed_data(mixture_op.family, data_var)
    n = int(partition_var.type.shape[0])
    if data.shape[0] != n:
        raise ValueError(
            f"the observed data of {observed_var.name!r} now have {data.shape[0]} rows but the "
            f"partition {name!r} has n = {n} points, fixed when the model was built "
            f"(pm.set_data can change the data's values, not their number); to use "
            f"{data.shape[0]} points build the model again with n={data.shape[0]}"
        )
    return PartitionModel(
        partition_var=partition_var,
        value_var=model.rvs_to_values[partition_var],
        prior_class=op.prior_class,
        family=mixture_op.family,
        data=data,
        observed_var=observed_var,
        random_hyperparameters=bool(symbolic_outputs),
        concentration_var=alpha_var,
        discount_var=discount_var,
        model=model,
        _constant_prior_values=constant_prior_values,
        _symbolic_names=tuple(symbolic_names),
        _function=function,
        _numeric_prior_factory=factory,
        _data_sources=data_sources,
    )


def _shared_sources(variable) -> tuple:
    """``(shared variable, its stored array)`` for the shared variables ``variable`` reads."""
    if not isinstance(variable, Variable):
        return ()
    return tuple((shared, shared.container.storage[0])
                 for shared in ancestors([variable])
                 if isinstance(shared, SharedVariable))
