r"""Cluster parameters as PyMC variables: any PyMC likelihood as a mixture component.

``ClusterParameter("mu", pm.Normal.dist(0, 5), partition=z, capacity=C)`` is an ordinary
free PyMC variable of shape ``(C, *base_shape)``: one value per *slot*, i.i.d. from the base
distribution :math:`G_0`.  The likelihood indexes it by the partition,
``pm.StudentT("y", nu=4, mu=mu[z], sigma=sigma[z], observed=y)``.  The model's log density
is then the slot target

.. math::

    \log p_{\mathrm{slot}}(z) + \sum_{s<C} \log G_0(\theta_s) + \sum_i \log f(y_i \mid
    \theta_{z_i}), \qquad p_{\mathrm{slot}}(z) = \mathrm{EPPF}(z)\,\frac{(C-K)!}{C!},

(``K`` occupied slots): the partition prior's own log density gives the EPPF and the first
cluster parameter of a partition adds the slot placement ``log((C-K)!/C!)`` as the potential
``<z>_slot_placement`` (``-inf`` for a label ``>= C``).  Summed over the parameters of the
empty slots this is exactly the Gibbs-type prior of the partition; the only approximation is
the capacity (no partition with more than ``C`` clusters).  With the labels fixed one
evaluation costs O(n + C).

:func:`slot_partition` describes a partition with cluster parameters for the step methods
(``steps.cluster_slots``): its parameters, its capacity and its likelihood terms, checked
(:func:`slot_likelihood_terms`): every model term that reads the labels is the partition
prior, the placement potential or an observed variable that reads them only as
``param[z]`` / ``param[z, ...]`` of cluster parameters of this partition.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.distributions.shape_utils import change_dist_size
from pytensor.graph.basic import Variable
from pytensor.tensor import subtensor
from pytensor.tensor.random.op import RandomVariable

try:  # pytensor >= 2.31
    from pytensor.graph.traversal import ancestors
except ImportError:  # pragma: no cover - older pytensor
    from pytensor.graph.basic import ancestors

from pymc_splitmerge.distributions.priors import PartitionPriorRV, cluster_sizes
from pymc_splitmerge.distributions.starts import _label_limit

#: The ops of ``param[labels, ...]`` (pytensor 3 has no ``AdvancedSubtensor1``).
INDEX_OPS = tuple(getattr(subtensor, name) for name in ("AdvancedSubtensor", "AdvancedSubtensor1")
                  if hasattr(subtensor, name))

__all__ = [
    "DEFAULT_CAPACITY",
    "INDEX_OPS",
    "ClusterParameter",
    "SlotPartition",
    "has_cluster_parameters",
    "slot_capacity",
    "slot_likelihood_terms",
    "slot_partition",
]

DEFAULT_CAPACITY = 30
"""Capacity when none is given: ``min(30, the prior's label range)``."""


@dataclass(eq=False)
class SlotPartition:
    """A partition variable with cluster parameters (see :func:`slot_partition`).

    Attributes
    ----------
    partition_var : TensorVariable
    capacity : int
        Number of slots ``C``.
    parameters : list of TensorVariable
        The cluster parameters (free random variables of shape ``(C, ...)``).
    placement : TensorVariable
        The placement potential ``log((C - K)! / C!)``.
    likelihood_terms : list of TensorVariable
        Observed variables reading the labels (filled by :func:`slot_likelihood_terms`).
    """

    partition_var: Variable
    capacity: int
    parameters: list = field(default_factory=list)
    placement: Variable | None = None
    likelihood_terms: list = field(default_factory=list)


# partition variable -> SlotPartition (the model holds the variables; nothing else does)
_REGISTRY: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def slot_capacity(partition_var) -> int | None:
    """The capacity of a partition variable with cluster parameters, None without."""
    spec = _REGISTRY.get(partition_var)
    return None if spec is None else spec.capacity


def is_slot_placement(potential) -> bool:
    """Whether ``potential`` is the slot-placement term this module adds for a partition
    variable with cluster parameters (a prior term of the labels and slots, which a
    posterior predictive draw conditions on)."""
    return any(spec.placement is potential for spec in list(_REGISTRY.values()))


def has_cluster_parameters(partition_var) -> bool:
    """Whether ``ClusterParameter`` variables were created for this partition variable."""
    return partition_var in _REGISTRY


def _placement_log_density(labels, capacity: int, label_range: int):
    in_range, _, n_clusters = cluster_sizes(labels, label_range)
    in_capacity = pt.all(pt.lt(labels, capacity))
    log_placement = pt.gammaln(capacity - n_clusters + 1.0) - pt.gammaln(capacity + 1.0)
    return pt.switch(pt.neq(in_range, 0) & in_capacity & pt.le(n_clusters, capacity), log_placement,
                     -np.inf)


def _check_capacity(capacity, limit: int, name: str, partition_name: str) -> int:
    if capacity is None:
        return min(DEFAULT_CAPACITY, limit)
    if isinstance(capacity, bool) or not isinstance(capacity, int | np.integer):
        raise TypeError(f"capacity of ClusterParameter {name!r} must be an integer (the number "
                        f"of slots), got {capacity!r}")
    capacity = int(capacity)
    if capacity < 1 or capacity > limit:
        raise ValueError(
            f"capacity of ClusterParameter {name!r} must lie in [1, {limit}] (the label range "
            f"of {partition_name!r}: at most {limit} clusters); got {capacity}")
    return capacity


def ClusterParameter(name: str, base_dist, *, partition, capacity: int | None = None,
                     **kwargs):
    """A free PyMC variable holding one cluster parameter per slot, i.i.d. ``base_dist``.

    Parameters
    ----------
    name : str
    base_dist : TensorVariable
        An unregistered PyMC distribution (``pm.Normal.dist(0, 5)``,
        ``pm.MvNormal.dist(mu, cov)``, ...): the base distribution :math:`G_0` of one cluster's
        parameter.  PyMC must be able to draw from it and evaluate it.
    partition : TensorVariable
        The partition variable (``DirichletProcess``, ``PitmanYor``, ``FiniteDirichlet``,
        ``MixtureOfFiniteMixtures``).
    capacity : int, optional
        Number of slots ``C`` (the largest number of clusters represented); at most the
        prior's label range (``n``; ``k`` for a finite Dirichlet).  Default
        ``min(30, label range)``; all cluster parameters of a partition share it (give it once).
        A chain that fills every slot stops with an error naming this argument.
    **kwargs
        Passed to ``model.register_rv`` (``dims``, ``initval``, ``transform``,
        ``default_transform``).

    Returns
    -------
    TensorVariable
        Of shape ``(C, *base_dist.shape)``; index it by the partition (``mu[z]``,
        ``beta[z, 0]``) in the likelihood.

    Raises
    ------
    TypeError
        ``partition`` is not a partition variable, or ``base_dist`` is not an unregistered
        PyMC distribution.
    ValueError
        A capacity outside ``[1, label range]``, differing from the capacity of another
        cluster parameter of the partition, or smaller than the number of clusters of the
        partition's ``initval``.
    """
    model = pm.modelcontext(kwargs.pop("model", None))
    owner = getattr(partition, "owner", None)
    if owner is None or not isinstance(owner.op, PartitionPriorRV):
        raise TypeError(
            f"partition of ClusterParameter {name!r} must be a partition variable created with "
            "DirichletProcess, PitmanYor, FiniteDirichlet or MixtureOfFiniteMixtures; got "
            f"{partition!r}")
    if not any(partition is rv for rv in model.free_RVs):
        raise ValueError(f"partition of ClusterParameter {name!r}: {partition.name!r} is not a "
                         "free random variable of this model")
    base_owner = getattr(base_dist, "owner", None)
    if (not isinstance(base_dist, Variable) or base_owner is None
            or not isinstance(base_owner.op, RandomVariable | pm.distributions.distribution.
                              SymbolicRandomVariable)):
        raise TypeError(
            f"base_dist of ClusterParameter {name!r} must be an unregistered PyMC distribution "
            f"such as pm.Normal.dist(0, 5); got {base_dist!r}")
    if any(base_dist is rv for rv in model.basic_RVs):
        raise TypeError(f"base_dist of ClusterParameter {name!r} is a model variable "
                        f"({base_dist.name!r}); pass an unregistered distribution, "
                        "e.g. pm.Normal.dist(0, 5)")
    n = int(partition.type.shape[-1])
    limit = _label_limit(partition, n) or n
    spec = _REGISTRY.get(partition)
    if spec is not None:
        if capacity is not None and int(capacity) != spec.capacity:
            raise ValueError(
                f"capacity of ClusterParameter {name!r} is {capacity} but another cluster "
                f"parameter of {partition.name!r} ({spec.parameters[0].name!r}) has capacity "
                f"{spec.capacity}; all cluster parameters of a partition share one capacity "
                "(give it once)")
        capacity = spec.capacity
    else:
        capacity = _check_capacity(capacity, limit, name, partition.name)
    start = model.rvs_to_initial_values.get(partition)
    if start is not None and not isinstance(start, str | Variable):
        n_clusters = np.unique(np.asarray(start)).size
        if np.max(start) >= capacity:
            raise ValueError(
                f"the initval of {partition.name!r} has labels up to {int(np.max(start))} "
                f"({n_clusters} clusters) but ClusterParameter {name!r} has capacity={capacity} "
                f"slots (labels 0..{capacity - 1}): raise capacity or relabel the start")
    try:
        draw_check = pm.draw(base_dist, random_seed=0)
    except Exception as error:  # noqa: BLE001 -- any failure of PyMC's forward sampling
        raise TypeError(f"base_dist of ClusterParameter {name!r} cannot be sampled by PyMC "
                        f"({type(error).__name__}: {error}); a cluster parameter's base "
                        "distribution must support forward sampling") from None
    if not np.all(np.isfinite(np.asarray(draw_check, dtype=float))):
        raise ValueError(f"base_dist of ClusterParameter {name!r} drew a non-finite value")
    base_shape = tuple(np.shape(draw_check))
    slots = change_dist_size(base_dist, new_size=(capacity,), expand=True)
    if tuple(slots.type.shape[1:]) != base_shape and None not in slots.type.shape[1:]:
        raise ValueError(f"base_dist of ClusterParameter {name!r}: unexpected shape")
    parameter = model.register_rv(slots, name, **kwargs)
    if spec is None:
        spec = SlotPartition(partition_var=partition, capacity=capacity)
        label_range = limit
        placement = _placement_log_density(partition, capacity, label_range)
        spec.placement = pm.Potential(f"{partition.name}_slot_placement", placement,
                                      model=model)
        _REGISTRY[partition] = spec
    spec.parameters.append(parameter)
    return parameter


def _slot_index_nodes(terms, partition_var, parameters):
    """Check every use of the labels (and of the parameters) in ``terms``' graphs."""
    parameter_set = set(parameters)
    for term in terms:
        nodes = {var.owner for var in ancestors([term], blockers=[partition_var, *parameters])
                 if var.owner is not None and var is not partition_var
                 and var not in parameter_set}
        for node in nodes:
            uses_labels = any(inp is partition_var for inp in node.inputs)
            uses_parameter = [inp for inp in node.inputs if inp in parameter_set]
            if not (uses_labels or uses_parameter):
                continue
            is_index = isinstance(node.op, INDEX_OPS)
            if is_index and node.inputs[0] in parameter_set and node.inputs[1] is partition_var:
                if any(inp is partition_var for inp in node.inputs[2:]):
                    raise ValueError(f"{term.name!r} indexes {node.inputs[0].name!r} by "
                                     f"{partition_var.name!r} twice; use param[z, j]")
                continue
            if uses_parameter:
                (parameter, *_) = uses_parameter
                raise ValueError(
                    f"{term.name!r} uses the cluster parameter {parameter.name!r} other than "
                    f"as {parameter.name}[{partition_var.name}] (a cluster parameter of "
                    f"partition {partition_var.name!r} must be indexed by that partition, "
                    f"first, e.g. {parameter.name}[{partition_var.name}] or "
                    f"{parameter.name}[{partition_var.name}, 0])")
            raise ValueError(
                f"{term.name!r} uses the partition {partition_var.name!r} other than as the "
                f"index of a cluster parameter (param[{partition_var.name}]); the cluster "
                "samplers need each observation's term to depend on its own label only")


def slot_likelihood_terms(partition_var, model) -> list:
    """The observed variables whose log density reads the partition ``partition_var``.

    Each must read the labels only as the first index of cluster parameters of this
    partition (``mu[z]``, ``beta[z, 1]``); its first axis runs over the ``n`` points.

    Raises
    ------
    ValueError
        A term reads the labels or a cluster parameter otherwise; a free random variable
        or a potential (other than the placement) depends on the labels; no observed term
        uses the partition.
    """
    spec = _REGISTRY[partition_var]
    name = partition_var.name
    blockers = [partition_var]
    terms = []
    for rv in dict.fromkeys(model.observed_RVs):
        if partition_var in set(ancestors(rv.owner.inputs)):
            terms.append(rv)
    for rv in model.free_RVs:
        if rv is partition_var:
            continue
        if partition_var in set(ancestors(rv.owner.inputs, blockers=blockers)):
            raise ValueError(f"the random variable {rv.name!r} depends on the partition "
                             f"{name!r}; with cluster parameters only observed variables may "
                             "read the labels")
    for rv in dict.fromkeys(model.observed_RVs):
        if rv in terms:
            continue
        used = set(ancestors([rv], blockers=spec.parameters)).intersection(spec.parameters)
        if used:
            parameter = next(iter(used))
            raise ValueError(
                f"{rv.name!r} uses the cluster parameter {parameter.name!r} without indexing it "
                f"by its partition: write {parameter.name}[{name}] (one value per observation)")
    for potential in model.potentials:
        if potential is spec.placement:
            continue
        if partition_var in set(ancestors([potential])):
            raise ValueError(f"the potential {potential.name!r} reads the partition {name!r}; "
                             "with cluster parameters only observed variables may read the "
                             "labels")
    if not terms:
        raise ValueError(
            f"no observed variable uses the cluster parameters of {name!r}: index them by the "
            f"partition in the likelihood, e.g. pm.Normal('y', mu=mu[{name}], sigma=1, "
            "observed=y)")
    _slot_index_nodes(terms, partition_var, spec.parameters)
    spec.likelihood_terms = terms
    return terms


def slot_partition(partition_var, model=None) -> SlotPartition:
    """Describe a partition with cluster parameters (checked; see :func:`slot_likelihood_terms`).

    Raises
    ------
    ValueError
        ``partition_var`` has no cluster parameters, or a model term reads it otherwise
        than through ``param[z]``.
    """
    model = pm.modelcontext(model)
    spec = _REGISTRY.get(partition_var)
    if spec is None:
        raise ValueError(f"{partition_var.name!r} has no cluster parameters (create them with "
                         "psm.ClusterParameter(name, base_dist, partition=z))")
    for parameter in spec.parameters:
        if not any(parameter is rv for rv in model.free_RVs):
            raise ValueError(f"the cluster parameter {parameter.name!r} is not a free variable "
                             "of this model")
    slot_likelihood_terms(partition_var, model)
    return spec
