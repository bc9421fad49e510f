"""Checks, before the first draw, that a partition model is one the samplers handle exactly.

* :func:`check_hyperparameter_supports`: a random hyperparameter (of the partition prior or
  of the component family) whose own prior puts mass outside the domain the hyperparameter
  needs (``alpha ~ Normal(0, 1)`` for a Dirichlet-process concentration, ``discount ~
  Uniform(0, 2)``, ``kappa0 ~ Normal``) is refused, naming the variable, its prior and the
  domain; otherwise a draw outside the domain fails inside a step (or NUTS's "Bad initial
  energy").  The support of each free random variable the hyperparameters depend on is
  probed through its value transform (the value space of a transformed variable is the
  whole real line): the hyperparameters are evaluated with that variable's value at
  ``-30``, ``0`` and ``30`` (natural values ``-1e6``, ``0``, ``1e6`` for an untransformed
  continuous variable), the others at the model's initial point, and each result must be
  accepted by the numeric prior and family.  A support reaching outside the domain anywhere
  is found when it does so at an end of the support or at its centre (the domains of the
  priors and families are intervals, and products of intervals).
* :func:`check_labels`: labels handed to a partition step by another step have the shape,
  an integer dtype and the range ``[0, n_slots)`` of the partition, or the error names the
  variable (not a bare ``np.bincount`` error).
"""

from __future__ import annotations

import numpy as np
from pytensor.graph.basic import Constant

try:  # pytensor >= 2.31
    from pytensor.graph.traversal import ancestors
except ImportError:  # pragma: no cover - older pytensor
    from pytensor.graph.basic import ancestors

__all__ = ["check_hyperparameter_supports", "check_labels"]

#: value-space probes of a transformed variable; natural probes of an untransformed one
TRANSFORMED_PROBES = (-30.0, 0.0, 30.0)
NATURAL_PROBES = (-1e6, 0.0, 1e6)


def _prior_text(rv) -> str:
    """``Normal(0.0, 1.0)``: the distribution of ``rv`` with its constant parameters."""
    op = rv.owner.op
    name = getattr(op, "_print_name", (type(op).__name__,))[0]
    params = op.dist_params(rv.owner) if hasattr(op, "dist_params") else rv.owner.inputs[2:]
    shown = []
    for param in params:
        if isinstance(param, Constant) and np.asarray(param.data).size == 1:
            shown.append(f"{float(np.asarray(param.data)):g}")
        else:
            shown.append(getattr(param, "name", None) or "...")
    return f"{name}({', '.join(shown)})"


def _value_probes(rv, model) -> list[np.ndarray] | None:
    """Values of ``rv``'s value variable probing its support, or None (not probed)."""
    from pymc.distributions.transforms import _default_transform

    if rv.dtype.startswith(("int", "uint", "bool")):
        return None
    value_var = model.rvs_to_values[rv]
    shape = tuple(value_var.type.shape) if None not in value_var.type.shape else None
    transform = model.rvs_to_transforms.get(rv)
    if transform is not None:
        probes = TRANSFORMED_PROBES
    else:  # an untransformed model (or default_transform=None): the support from PyMC's default
        default = _default_transform(rv.owner.op, rv)
        if default is None:
            probes = NATURAL_PROBES
        elif _parameters_are_fixed(rv, model):
            probes = [float(np.asarray(default.backward(np.float64(t), *rv.owner.inputs).eval()))
                      for t in TRANSFORMED_PROBES]
        else:  # the bounds of the support depend on other random variables: not probed
            return None
    if shape is None:
        return None
    return [np.full(shape, probe, dtype=value_var.dtype) for probe in probes]


def check_hyperparameter_supports(partition_model) -> None:
    """Refuse random hyperparameters whose prior reaches outside their domain (module doc).

    Raises
    ------
    ValueError
        Naming the random variable, its prior and the hyperparameter's domain (the numeric
        prior's or family's own message at the probe value that leaves it).
    """
    function = partition_model._function
    if function is None:
        return
    model = partition_model.model
    partition = partition_model.partition_var
    inputs = [*partition.owner.inputs,
              *(v for v in partition_model.observed_var.owner.inputs if v is not partition)]
    needed = set(ancestors(inputs))
    candidates = [rv for rv in model.free_RVs if rv is not partition and rv in needed]
    if not candidates:
        return
    base = model.initial_point()
    for rv in candidates:
        probes = _value_probes(rv, model)
        points = [base] if probes is None else [{**base, model.rvs_to_values[rv].name: value}
                                                for value in probes]
        for point in points:
            try:
                partition_model.numeric_prior(point)
                partition_model.numeric_family(point)
            except (ValueError, FloatingPointError, np.linalg.LinAlgError) as error:
                natural = ""
                if probes is not None:
                    natural = (f" (e.g. {rv.name} = "
                               f"{_natural_value(rv, model, point):g})")
                raise ValueError(
                    f"the random hyperparameter {rv.name!r} ~ {_prior_text(rv)} takes values "
                    f"outside the domain its use in the partition model "
                    f"{partition_model.partition_var.name!r} needs{natural}: {error}. Give "
                    f"{rv.name!r} a prior supported only on that domain (e.g. pm.Gamma or "
                    f"pm.HalfNormal for a positive parameter, pm.Beta or pm.Uniform inside "
                    f"the allowed interval)"
                ) from None


def _natural_value(rv, model, point) -> float:
    value = np.asarray(point[model.rvs_to_values[rv].name])
    transform = model.rvs_to_transforms.get(rv)
    if transform is not None and _parameters_are_fixed(rv, model):
        value = np.asarray(transform.backward(value, *rv.owner.inputs).eval())
    return float(value.ravel()[0])


def _parameters_are_fixed(rv, model) -> bool:
    """Whether the distribution parameters of ``rv`` depend on no random variable."""
    return not any(other in set(ancestors(rv.owner.inputs)) for other in model.basic_RVs)


def check_labels(labels, name: str, n_points: int | None = None,
                 n_slots: int | None = None) -> np.ndarray:
    """``labels`` as an array after checking shape, integer dtype and range (module doc).

    ``n_points`` None accepts any length of a vector; ``n_slots`` None checks only that no
    label is negative.

    Raises
    ------
    ValueError
        Naming the partition variable ``name`` and what is wrong with its labels.
    """
    array = np.asarray(labels)
    expected = "(n,)" if n_points is None else f"({n_points},)"
    if array.ndim != 1 or (n_points is not None and array.shape[0] != n_points):
        raise ValueError(
            f"the labels of the partition {name!r} have shape {array.shape}; expected "
            f"{expected}. Another step wrote a value of the wrong shape")
    if array.dtype.kind not in "iu":
        raise ValueError(
            f"the labels of the partition {name!r} have dtype {array.dtype}; expected "
            "integers. Another step wrote non-integer labels")
    if array.size:
        low, high = int(array.min()), int(array.max())
        if low < 0 or (n_slots is not None and high >= n_slots):
            allowed = f"[0, {n_slots})" if n_slots is not None else "[0, n)"
            raise ValueError(
                f"the labels of the partition {name!r} range over {low}..{high}; they must "
                f"lie in {allowed}. Another step wrote labels outside the partition's label "
                "range")
    return array
