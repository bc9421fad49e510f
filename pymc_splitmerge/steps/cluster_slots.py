r"""PyMC step method for a partition with cluster parameters (any likelihood, no conjugacy).

:class:`SlotGibbsStep` samples the labels of a partition whose clusters carry
:func:`~pymc_splitmerge.distributions.cluster_parameters.ClusterParameter` variables.  Each
draw, with the cluster parameters held by the other steps (NUTS by default):

1. **refresh**: the parameters of the empty slots are drawn afresh from their base
   distributions (PyMC's forward sampling, one compiled function seeded from the chain's
   generator) -- an exact Gibbs update, since an empty slot's parameter appears in no
   likelihood term;
2. the (n, C) matrix ``log f(y_i | theta_s)`` is computed by one compiled pytensor function
   (the observed terms' per-observation log densities, vectorised over the C slots);
3. ``n_parameter_updates`` independence Metropolis-Hastings updates of the occupied slots'
   parameters given the labels (Laplace proposals; optional: the step then owns the cluster
   parameters and PyMC gives them no NUTS);
4. ``n_split_merge`` split-merge updates and ``n_gibbs_sweeps`` Algorithm 8 sweeps
   (:mod:`pymc_splitmerge.kernels.cluster_slots`, numba) move the labels given that matrix.

Plain ``pm.sample()`` assigns it to every partition variable with cluster parameters
(``competence`` IDEAL; the collapsed partition steps refuse such partitions) and NUTS to
the cluster parameters.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytensor.tensor as pt
from pymc.exceptions import SamplingError
from pymc.model import modelcontext
from pymc.pytensorf import compile as compile_pytensor
from pymc.pytensorf import replace_rng_nodes, reseed_rngs
from pymc.step_methods.compound import BlockedStep, Competence
from pymc.util import get_random_generator
from pytensor.graph.basic import Constant
from pytensor.graph.replace import vectorize_graph

try:  # pytensor >= 2.31
    from pytensor.graph.traversal import ancestors, io_toposort
except ImportError:  # pragma: no cover - older pytensor
    from pytensor.graph.basic import ancestors, io_toposort
from pytensor.tensor.random.type import RandomGeneratorType
from threadpoolctl import ThreadpoolController

from pymc_splitmerge.distributions.cluster_parameters import (
    INDEX_OPS,
    has_cluster_parameters,
    slot_partition,
)
from pymc_splitmerge.distributions.priors import MixtureOfFiniteMixturesRV, PartitionPriorRV
from pymc_splitmerge.distributions.statistics import mark_written_labels
from pymc_splitmerge.kernels.cluster_slots import (
    laplace_parameter_update,
    parameter_split_merge,
    slot_gibbs_sweeps,
    slot_sizes,
    slot_split_merge,
)
from pymc_splitmerge.kernels.options import non_negative_integer
from pymc_splitmerge.steps.base import PerChainSetup, partition_value_and_random_variable

__all__ = ["SlotGibbsStep", "SlotLikelihood", "per_slot_log_density"]


def per_slot_log_density(log_density, labels, capacity: int, n: int):
    """The graph of ``log_density`` (a function of the labels, shape (n, ...)) for every
    slot: shape (C, n, ...), entry ``[s, i]`` = the term of point ``i`` with label ``s``.

    Each ``param[labels, ...]`` (shape (n, ...)) is replaced by ``param[0:C, ...]`` with a
    broadcast axis for the points (shape (C, 1, ...)), so the rest of the graph broadcasts
    over the slots with elementwise operations; where that does not give shape (C, n, ...),
    ``pytensor``'s ``vectorize_graph`` over a (C, n) label matrix does (slower: Blockwise).
    """
    replacements = {}
    slots = pt.arange(capacity)
    for node in io_toposort([labels], [log_density]):
        if (isinstance(node.op, INDEX_OPS)
                and node.inputs[1] is labels
                and not any(inp is labels for inp in node.inputs[2:])):
            per_slot = node.inputs[0][(slots, *node.inputs[2:])]
            replacements[node.outputs[0]] = pt.expand_dims(per_slot, 1)
    if replacements:
        try:
            candidate = vectorize_graph(log_density, replacements)
        except Exception:  # noqa: BLE001 -- not elementwise over the points: the general way
            candidate = None
        if candidate is not None and labels not in ancestors([candidate]):
            candidate = pt.broadcast_to(candidate, (capacity, n, *candidate.shape[2:]))
            if candidate.ndim == log_density.ndim + 1:
                return candidate
    labels_per_slot = pt.broadcast_to(pt.arange(capacity, dtype=labels.dtype)[:, None],
                                      (capacity, n))
    return vectorize_graph(log_density, {labels: labels_per_slot})


class SlotLikelihood:
    """Compiled pieces of a partition with cluster parameters (built once per step).

    ``log_likelihood(point)`` -> float64 (n, C); ``refreshed(point, labels)`` -> the point's
    cluster-parameter values (transformed) with the empty slots redrawn from the base
    distributions; ``numeric_prior(point)``.
    """

    def __init__(self, partition_var, model):
        self.spec = slot_partition(partition_var, model)
        self.capacity = self.spec.capacity
        self.model = model
        self.value_vars = list(model.value_vars)
        value_var = model.rvs_to_values[partition_var]
        n = int(partition_var.type.shape[-1])
        self.n_points = n
        self._value_var = value_var
        self._log_likelihood = compile_pytensor(self.value_vars,
                                                self.per_slot_graph(self.capacity),
                                                on_unused_input="ignore")
        # forward draws of every slot of every cluster parameter, on the transformed scale
        draws = []
        self.parameter_value_names = []
        for parameter in self.spec.parameters:
            clone = parameter.owner.clone().default_output()
            transform = model.rvs_to_transforms.get(parameter)
            draw = clone if transform is None else transform.forward(clone,
                                                                     *clone.owner.inputs)
            draws.append(draw)
            self.parameter_value_names.append(model.rvs_to_values[parameter].name)
        draws = model.replace_rvs_by_values(draws)
        draws = replace_rng_nodes(draws)
        self._draw = compile_pytensor(self.value_vars, draws, on_unused_input="ignore")
        self._draw_rngs = [shared for shared in self._draw.get_shared()
                           if isinstance(shared.type, RandomGeneratorType)]
        # the prior's parameters (constants once, others by one compiled function)
        op = partition_var.owner.op
        params = list(op.dist_params(partition_var.owner))[:-1]
        self._prior_op = op
        self._constant_prior = {}
        symbolic, self._symbolic_names = [], []
        for name, param in zip(op.parameter_names, params, strict=True):
            if isinstance(param, Constant):
                value = np.asarray(param.data)
                self._constant_prior[name] = int(value) if name == "k" else float(value)
            else:
                symbolic.append(param)
                self._symbolic_names.append(name)
        self._prior_function = (compile_pytensor(self.value_vars,
                                                 model.replace_rvs_by_values(symbolic),
                                                 on_unused_input="ignore")
                                if symbolic else None)
        self._cached_prior_values = None
        self._prior = self._tables = None
        self._parameter_model = None

    def per_slot_graph(self, width: int):
        """Graph of ``log f(y_i | theta_s)`` for the first ``width`` slots, shape (width, n)."""
        total = None
        for term in self.spec.likelihood_terms:
            (log_density,) = self.model.logp(vars=[term], sum=False, jacobian=False)
            per_slot = per_slot_log_density(log_density, self._value_var, width, self.n_points)
            if per_slot.ndim > 2:
                per_slot = per_slot.sum(axis=tuple(range(2, per_slot.ndim)))
            total = per_slot if total is None else total + per_slot
        return total

    def _inputs(self, point):
        return [point[var.name] for var in self.value_vars]

    def reseed(self, rng: np.random.Generator) -> None:
        """Seed the forward-sampling function from the chain's generator."""
        reseed_rngs(self._draw_rngs, int(rng.integers(2**63)))

    def log_likelihood(self, point) -> np.ndarray:
        """``log f(y_i | theta_s)``, float64 array of shape (n, C)."""
        matrix = np.asarray(self._log_likelihood(*self._inputs(point)), dtype=np.float64)
        if matrix.shape != (self.capacity, self.n_points):
            raise ValueError(
                f"the likelihood terms {[t.name for t in self.spec.likelihood_terms]} do not "
                f"give one log density per point (shape {matrix.shape[1:]} for "
                f"{self.n_points} points): the first axis of the observed data must run over "
                "the points of the partition")
        return np.ascontiguousarray(matrix.T)

    def refreshed(self, point, labels) -> dict:
        """New values of the cluster parameters with the empty slots redrawn."""
        empty = slot_sizes(labels, self.capacity) == 0
        draws = self._draw(*self._inputs(point))
        values = {}
        for name, draw in zip(self.parameter_value_names, draws, strict=True):
            value = np.array(point[name], copy=True)
            value[empty] = np.asarray(draw)[empty]
            values[name] = value
        return values

    def parameter_model(self) -> ParameterSlotModel:
        """The slot model of :func:`~pymc_splitmerge.kernels.cluster_slots.parameter_split_merge`
        (compiled at the first call)."""
        if self._parameter_model is None:
            self._parameter_model = ParameterSlotModel(self)
        return self._parameter_model

    def prior_and_tables(self, point):
        """The numeric prior of the point and its ``(log_v, log_w)`` tables (cached)."""
        values = dict(self._constant_prior)
        if self._prior_function is not None:
            outputs = self._prior_function(*self._inputs(point))
            values.update({name: float(np.asarray(value))
                           for name, value in zip(self._symbolic_names, outputs, strict=True)})
        if self._prior is None or values != self._cached_prior_values:
            op = self._prior_op
            if isinstance(op, MixtureOfFiniteMixturesRV):
                prior = op.numeric_prior()
            else:
                prior = op.prior_class(**{p: values[p] for p in op.prior_class.parameter_names})
            self._prior = prior
            self._tables = prior.tables(self.n_points)
            self._cached_prior_values = values
        return self._prior, self._tables


#: PyTensor mode of the functions the parameter moves call many times a draw (the fits):
#: the numba backend, already the default of pytensor >= 3.  With pytensor 2's default C
#: backend a draw of the parameter moves takes about twice as long; the numba mode compiles
#: longer (about 35 s more at the first draw for a new data set or model), which a run of
#: more than ~800 draws with parameter moves repays (``benchmarks/nonconjugate.py
#: --draw-cost``, docs/benchmarks.md).  ``None``: PyTensor's default mode.
FIT_COMPILE_MODE: str | None = "NUMBA"


class _ManyCallFunction:
    """A compiled function called many times a draw: its inputs are converted to their
    dtypes and their number of dimensions checked here, and PyTensor's own per-call input
    validation (``trust_input``; ~30 us a call, a few per cent of a draw with parameter
    moves) is skipped."""

    def __init__(self, function):
        self.function = function
        variables = [entry.variable for entry in function.maker.inputs]
        self.dtypes = [variable.type.dtype for variable in variables]
        self.ndims = [variable.type.ndim for variable in variables]
        self.names = [variable.name for variable in variables]
        function.trust_input = True

    def __call__(self, *args):
        if len(args) != len(self.dtypes):
            raise TypeError(f"expected {len(self.dtypes)} inputs, got {len(args)}")
        arrays = [np.asarray(arg, dtype=dtype)
                  for arg, dtype in zip(args, self.dtypes, strict=True)]
        for array, ndim, name in zip(arrays, self.ndims, self.names, strict=True):
            if array.ndim != ndim:
                raise ValueError(f"input {name!r} has {array.ndim} dimensions, expected {ndim}")
        return self.function(*arrays)


def _compile_for_many_calls(inputs, outputs):
    """Compile in ``FIT_COMPILE_MODE``; in the default mode, with a warning, where that mode
    cannot compile the graph."""
    if FIT_COMPILE_MODE is not None:
        try:
            return _ManyCallFunction(compile_pytensor(inputs, outputs, mode=FIT_COMPILE_MODE,
                                                      on_unused_input="ignore"))
        except Exception as error:  # noqa: BLE001 -- any failure of that backend
            warnings.warn(f"the parameter moves' functions did not compile in PyTensor's "
                          f"{FIT_COMPILE_MODE} mode ({type(error).__name__}: {error}); "
                          "compiling them in the default mode", RuntimeWarning, stacklevel=2)
    return _ManyCallFunction(compile_pytensor(inputs, outputs, on_unused_input="ignore"))


def _summed_log_density(model, variables, jacobian: bool):
    """Elementwise log density of ``variables`` summed over every axis but the first (slots
    for cluster parameters, points for likelihood terms) and added up over the variables."""
    total = None
    for variable in variables:
        (term,) = model.logp(vars=[variable], sum=False, jacobian=jacobian)
        if term.ndim > 1:
            term = term.sum(axis=tuple(range(1, term.ndim)))
        total = term if total is None else total + term
    return total


class ParameterSlotModel:
    r"""The cluster parameters of all slots as one float64 array (C, d) on the transformed
    scale, with the compiled functions :func:`~pymc_splitmerge.kernels.cluster_slots.
    parameter_split_merge` needs (``bind(point)`` first: the other variables' values).

    ``fit_terms`` gives :math:`\log G_0(\theta_s) + \sum_i w_{is} \log f(y_i \mid
    \theta_s)` for ``fit_width`` parameter vectors (at most 3: a split-merge fits three
    blocks) with its gradient and its (W, d, d) Hessian blocks: the vectors do not interact,
    so ``d`` second-derivative passes give every block, and a fit costs O(n W d) whatever
    the capacity.
    """

    def __init__(self, slots: SlotLikelihood):
        model = slots.model
        self.slots = slots
        self.capacity = capacity = slots.capacity
        self.n_points = slots.n_points
        self.names = slots.parameter_value_names
        parameter_values = [model.rvs_to_values[p] for p in slots.spec.parameters]
        prior = _summed_log_density(model, slots.spec.parameters, jacobian=True)
        self.shapes = [_slot_shape(parameter) for parameter in slots.spec.parameters]
        self.sizes = [int(np.prod(shape)) for shape in self.shapes]
        self.dimension = int(sum(self.sizes))
        self.fit_width = width = min(3, capacity)
        weights = pt.matrix("slot_weights")
        objective = prior[:width] + (slots.per_slot_graph(width) * weights.T).sum(axis=1)

        def flat(gradients):
            return pt.concatenate([g[:width].reshape((width, -1)) for g in gradients], axis=1)

        gradient = flat(pt.grad(objective.sum(), parameter_values))
        hessian = pt.stack([flat(pt.grad(gradient[:, c].sum(), parameter_values))
                            for c in range(self.dimension)], axis=1)
        inputs = slots.value_vars
        self._prior = _compile_for_many_calls(inputs, prior)
        self._fit_log_likelihood = _compile_for_many_calls(inputs, slots.per_slot_graph(width))
        # every slot's terms with each point at its own label: one O(n d) pass per derivative
        point_terms = _summed_log_density(model, slots.spec.likelihood_terms, jacobian=False)
        # each point's term added to its label's slot: O(n), not the O(n C) of a one-hot sum
        label_objective = prior + pt.zeros(capacity, dtype=prior.dtype)[
            slots._value_var].inc(point_terms)
        total = prior.sum() + point_terms.sum()

        def full(gradients):
            return pt.concatenate([g.reshape((capacity, -1)) for g in gradients], axis=1)

        label_gradient = full(pt.grad(total, parameter_values))
        label_hessian = pt.stack([full(pt.grad(label_gradient[:, c].sum(), parameter_values))
                                  for c in range(self.dimension)], axis=1)
        self._label_fit = _compile_for_many_calls(inputs, [label_objective, label_gradient,
                                                           label_hessian])
        self._label_objective = _compile_for_many_calls(inputs, label_objective)
        self._fit = _compile_for_many_calls([*inputs, weights], [objective, gradient, hessian])
        self.point = None

    def bind(self, point) -> np.ndarray:
        """Use ``point`` for the other variables; returns its parameters as (C, d)."""
        self.point = dict(point)
        return self.pack(point)

    def pack(self, point) -> np.ndarray:
        return np.concatenate([np.asarray(point[name], dtype=np.float64).reshape(
            self.capacity, -1) for name in self.names], axis=1)

    def unpack(self, values) -> dict:
        out, first = {}, 0
        for name, shape, size in zip(self.names, self.shapes, self.sizes, strict=True):
            dtype = np.asarray(self.point[name]).dtype
            out[name] = values[:, first:first + size].reshape(
                (self.capacity, *shape)).astype(dtype)
            first += size
        return out

    def _inputs(self, values):
        point = dict(self.point)
        point.update(self.unpack(values))
        return [point[var.name] for var in self.slots.value_vars]

    def log_likelihood(self, values) -> np.ndarray:
        point = dict(self.point)
        point.update(self.unpack(values))
        return self.slots.log_likelihood(point)

    def _label_inputs(self, values, labels):
        point = dict(self.point)
        point.update(self.unpack(values))
        point[self.slots._value_var.name] = np.asarray(labels).astype(
            np.asarray(self.point[self.slots._value_var.name]).dtype)
        return [point[var.name] for var in self.slots.value_vars]

    def label_fit_terms(self, values, labels):
        r"""Objective (C,), gradient (C, d), Hessian (C, d, d) of :math:`\log G_0(\theta_s) +
        \sum_{i: z_i = s} \log f(y_i \mid \theta_s)` for every slot, the labels ``labels``:
        one evaluation costs O(n d) whatever the capacity."""
        objective, gradient, hessian = self._label_fit(*self._label_inputs(values, labels))
        return (np.asarray(objective, dtype=np.float64), np.asarray(gradient, dtype=np.float64),
                np.asarray(hessian, dtype=np.float64))

    def label_log_density(self, values, labels) -> np.ndarray:
        r""":math:`\log G_0(\theta_s) + \sum_{i: z_i = s} \log f(y_i \mid \theta_s)` for every
        slot (C,), the objective of :meth:`label_fit_terms` alone: one O(n) pass."""
        return np.asarray(self._label_objective(*self._label_inputs(values, labels)),
                          dtype=np.float64)

    def fit_log_likelihood(self, values) -> np.ndarray:
        """``log f(y_i | theta_w)`` (n, W) of ``W <= fit_width`` vectors ``values`` (W, d):
        O(n W), whatever the capacity."""
        padded = self.pack(self.point)
        padded[:values.shape[0]] = values
        matrix = np.asarray(self._fit_log_likelihood(*self._inputs(padded)), dtype=np.float64)
        return np.ascontiguousarray(matrix[:values.shape[0]].T)

    def log_prior(self, values) -> np.ndarray:
        return np.asarray(self._prior(*self._inputs(values)), dtype=np.float64)

    def draw_prior(self, rng) -> np.ndarray:
        draws = self.slots._draw(*self._inputs(self.pack(self.point)))
        return np.concatenate([np.asarray(d, dtype=np.float64).reshape(self.capacity, -1)
                               for d in draws], axis=1)

    def fit_terms(self, values, weights):
        """Objective (W,), gradient (W, d), Hessian (W, d, d) of ``fit_width`` = W vectors
        ``values`` (W, d) and weight columns ``weights`` (n, W)."""
        padded = self.pack(self.point)
        padded[:self.fit_width] = values
        objective, gradient, hessian = self._fit(*self._inputs(padded),
                                                 np.asarray(weights, dtype=np.float64))
        return (np.asarray(objective, dtype=np.float64), np.asarray(gradient, dtype=np.float64),
                np.asarray(hessian, dtype=np.float64))


def _slot_shape(parameter) -> tuple:
    """Shape of one slot of a cluster parameter (its static shape after the slot axis)."""
    shape = parameter.type.shape[1:]
    if any(size is None for size in shape):
        raise ValueError(f"cluster parameter {parameter.name!r} needs a static shape")
    return tuple(int(size) for size in shape)


@functools.cache
def _blas_threads() -> ThreadpoolController:
    """The process's BLAS/LAPACK thread pools (found once per process, after the first step
    loaded them; a module-level cache, so the step itself stays picklable for ``cores > 1``)."""
    return ThreadpoolController()


class SlotGibbsStep(PerChainSetup, BlockedStep):
    r"""Neal's Algorithm 8 (slot form) and a split-merge move for a partition with cluster
    parameters.

    Each draw refreshes the empty slots' parameters from their base distributions, computes
    ``log f(y_i | theta_s)`` for every point and slot, then applies ``n_split_merge``
    split-merge Metropolis-Hastings updates and ``n_gibbs_sweeps`` Algorithm 8 sweeps to the
    labels (:mod:`pymc_splitmerge.kernels.cluster_slots`).  The cluster parameters of
    occupied slots are left to the other steps (``pm.sample`` gives them NUTS).

    Parameters
    ----------
    vars : TensorVariable or list of one TensorVariable
        A partition variable with cluster parameters
        (:func:`~pymc_splitmerge.distributions.cluster_parameters.ClusterParameter`).
    n_gibbs_sweeps : int, default 1
        Algorithm 8 sweeps per draw.
    n_split_merge : int, default 1
        Split-merge updates of the labels given the parameters per draw (before the sweeps;
        a new cluster takes an empty slot's draw from the base distribution).
    n_cluster_point_split_merge : int, default 0
        Split-merge updates of the labels given the parameters per draw whose anchors are
        drawn cluster first (``j`` uniform in a uniformly chosen occupied slot, ``i`` uniform
        among the other points: ``slot_split_merge(anchors="cluster_point")``; after the
        ``n_split_merge`` updates, before the sweeps).  Uniform anchors propose to merge a
        cluster of ``m`` points away with probability about ``2 m / n``; these with
        probability ``1/K``: the move that removes small clusters (and, in reverse, creates
        them), at the cost of one pass over the points.
    n_parameter_split_merge : int, default 0
        Split-merge updates of the labels *and* the two clusters' parameters per draw
        (first; Laplace proposals of the parameters, Metropolis-Hastings on the joint:
        :func:`~pymc_splitmerge.kernels.cluster_slots.parameter_split_merge`).  This is the
        move that splits a cluster whose parameters no single base draw fits (several or
        vector parameters, tight clusters); it needs the gradient of the log density in the
        cluster parameters (continuous parameters, as NUTS does), compiles their Hessian
        blocks at the first draw (``FIT_COMPILE_MODE``; half a minute to a minute for a new
        model or data set, cached on disk by PyTensor) and costs bounded
        Newton fits on three slots (half the moves also a two-component EM fit of the block:
        up to ~100 evaluations, O(n) each) per move, hence opt-in.
    n_parameter_updates : int, default 0
        Updates of the occupied slots' parameters given the labels per draw (after the
        refresh, before the label moves): per slot an independence Metropolis-Hastings
        proposal from the Laplace approximation of the slot's conditional posterior
        (:func:`~pymc_splitmerge.kernels.cluster_slots.laplace_parameter_update`).  With
        ``n_parameter_updates >= 1`` the step also owns the cluster parameters (``vars``
        includes them), so ``pm.sample`` gives them no NUTS: every draw then costs one
        Newton fit of all occupied slots at once (each evaluation one O(n) pass over the
        points, each at its own label) instead of NUTS trajectories over all
        slots, whose step size the clusters' very different posterior scales (a cluster of
        hundreds of points next to empty slots at the base distribution's scale) drive down.
        Needs continuous cluster parameters with gradients, like
        ``n_parameter_split_merge``; the first draw compiles their Hessian blocks.
    model : pymc.Model, optional
    rng : int or numpy.random.Generator, optional
        Used only if PyMC does not hand a generator to the step.

    Notes
    -----
    Sampler stats: ``slot_gibbs_changed`` (point updates that changed slot),
    ``slot_split_merge_accepted`` (accepted label split-merge updates in the draw, both
    anchor laws),
    ``slot_parameter_update_acceptance`` (accepted fraction of the occupied slots' parameter
    proposals in the draw, ``nan`` without them) and ``slot_gibbs_n_clusters``.  A draw after tuning whose clusters fill every slot while the
    prior allows more stops the chain with an error naming ``capacity`` (the posterior needs
    more slots); during tuning this is allowed (transients from the start).

    References
    ----------
    Neal, R. M. (2000). Markov chain sampling methods for Dirichlet process mixture models.
    JCGS 9(2), 249-265, Algorithm 8.  Dahl, D. B. (2003), sequentially-allocated
    merge-split.
    """

    name = "slot_gibbs"
    default_blocked = False
    stats_dtypes_shapes = {
        "slot_gibbs_changed": (np.int64, []),
        "slot_split_merge_accepted": (np.int64, []),
        "slot_parameter_split_merge_accepted": (np.int64, []),
        "slot_parameter_update_acceptance": (np.float64, []),
        "slot_gibbs_n_clusters": (np.int64, []),
    }

    def __init__(self, vars, n_gibbs_sweeps: int = 1, n_split_merge: int = 1,
                 n_parameter_split_merge: int = 0, n_parameter_updates: int = 0,
                 n_cluster_point_split_merge: int = 0, model=None, rng=None, **kwargs):
        for ignored in ("blocked", "initial_point", "compile_kwargs"):  # passed by pm.sample
            kwargs.pop(ignored, None)
        if kwargs:
            raise TypeError(f"unexpected keyword arguments {sorted(kwargs)}")
        self.n_gibbs_sweeps = non_negative_integer(n_gibbs_sweeps, "n_gibbs_sweeps")
        self.n_split_merge = non_negative_integer(n_split_merge, "n_split_merge")
        self.n_parameter_split_merge = non_negative_integer(n_parameter_split_merge,
                                                            "n_parameter_split_merge")
        self.n_parameter_updates = non_negative_integer(n_parameter_updates,
                                                        "n_parameter_updates")
        self.n_cluster_point_split_merge = non_negative_integer(
            n_cluster_point_split_merge, "n_cluster_point_split_merge")
        if (self.n_gibbs_sweeps + self.n_split_merge + self.n_parameter_split_merge
                + self.n_cluster_point_split_merge == 0):
            raise ValueError("SlotGibbsStep needs n_gibbs_sweeps >= 1, n_split_merge >= 1, "
                             "n_cluster_point_split_merge >= 1 or n_parameter_split_merge >= 1")
        model = modelcontext(model)
        value_var, rv = partition_value_and_random_variable(vars, model)
        self.model = model
        self.vars = [value_var]
        self.value_name = value_var.name
        self.partition_var = rv
        self.slots = SlotLikelihood(rv, model)
        if self.n_parameter_updates:  # the step owns the cluster parameters: no NUTS on them
            self.vars += [model.rvs_to_values[p] for p in self.slots.spec.parameters]
        self.capacity = self.slots.capacity
        self.n_points = self.slots.n_points
        self.rng = get_random_generator(rng)
        self.reset_chain()

    def reset_chain(self) -> None:
        """Start a chain: reseed the forward sampling, check the start at the first draw."""
        self._start_checked = False
        # a transient that fills every slot while tuning (e.g. the first sweeps from the
        # one-cluster start, with NUTS not yet adapted) is not an error; PyMC's
        # ``stop_tuning()`` ends tuning (pymc 6's ``setup_chain`` also says if there is any)
        self.tune = True
        self.slots.reseed(self.rng)

    @staticmethod
    def competence(var, has_grad=None):
        """IDEAL for a partition variable with cluster parameters."""
        owner = getattr(var, "owner", None)
        if owner is not None and isinstance(owner.op, PartitionPriorRV) and \
                has_cluster_parameters(var):
            return Competence.IDEAL
        return Competence.INCOMPATIBLE

    def _check_start(self, labels) -> None:
        parameters = ", ".join(repr(p.name) for p in self.slots.spec.parameters)
        if labels.shape != (self.n_points,):
            raise SamplingError(f"the labels of {self.value_name!r} have shape {labels.shape}, "
                                f"expected ({self.n_points},)")
        if labels.min() < 0 or labels.max() >= self.capacity:
            raise SamplingError(
                f"the start of partition variable {self.value_name!r} has labels "
                f"{int(labels.min())}..{int(labels.max())}, outside the {self.capacity} slots "
                f"0..{self.capacity - 1} (capacity={self.capacity} of the cluster parameters "
                f"{parameters}): raise capacity or relabel the start into [0, {self.capacity})")

    def _check_capacity(self, n_clusters: int, prior) -> None:
        max_clusters = prior.max_clusters
        reachable = self.n_points if max_clusters is None else min(self.n_points, max_clusters)
        if n_clusters >= self.capacity and self.capacity < reachable:
            parameters = ", ".join(repr(p.name) for p in self.slots.spec.parameters)
            raise SamplingError(
                f"the partition {self.value_name!r} filled all {self.capacity} slots: the "
                f"posterior puts mass on more clusters than capacity={self.capacity} of the "
                f"cluster parameters {parameters} allows. Raise capacity= of "
                f"psm.ClusterParameter (at most {reachable}), e.g. "
                f"capacity={min(2 * self.capacity, reachable)}")

    def step(self, point):
        # The compiled functions make many LAPACK calls on tiny matrices (d x d per slot:
        # MvNormal's Cholesky solves, the Laplace fits); with a multi-threaded BLAS each call
        # hands work to a second thread and, on a machine with more runnable processes than
        # cores, waits a scheduler time slice for it (~20 ms a call: a parameter split-merge of
        # a few dozen evaluations took seconds).  One thread is always enough for them.
        with _blas_threads().limit(limits=1, user_api="blas"):
            return self._step(point)

    def _step(self, point):
        labels = np.asarray(point[self.value_name]).astype(np.int64)
        if not self._start_checked:
            self._check_start(labels)
            self._start_checked = True
        new_point = dict(point)  # never modify the point's arrays in place
        new_point.update(self.slots.refreshed(point, labels))
        prior, (log_v, log_w) = self.slots.prior_and_tables(point)
        sizes = slot_sizes(labels, self.capacity)
        parameters_accepted = 0
        updates_proposed = updates_accepted = 0
        log_likelihood = None  # the (n, C) matrix, once, after the parameter updates
        if self.n_parameter_split_merge or self.n_parameter_updates:
            slot_model = self.slots.parameter_model()
            values = slot_model.bind(new_point)
            for _ in range(self.n_parameter_updates):
                info = laplace_parameter_update(slot_model, values, labels, sizes, self.rng,
                                                log_likelihood=log_likelihood)
                log_likelihood = info.log_likelihood
                updates_proposed += info.n_proposed
                updates_accepted += info.n_accepted
            if log_likelihood is None:
                log_likelihood = self.slots.log_likelihood(new_point)
            for _ in range(self.n_parameter_split_merge):
                info = parameter_split_merge(slot_model, values, labels, sizes, log_v, log_w,
                                             self.rng, log_likelihood=log_likelihood)
                parameters_accepted += info.accepted  # log_likelihood updated in place
            if parameters_accepted or updates_accepted:
                new_point.update(slot_model.unpack(values))
        else:
            log_likelihood = self.slots.log_likelihood(new_point)
        accepted = 0
        for _ in range(self.n_split_merge):
            accepted += slot_split_merge(log_likelihood, labels, sizes, log_v, log_w,
                                         self.rng).accepted
        for _ in range(self.n_cluster_point_split_merge):
            accepted += slot_split_merge(log_likelihood, labels, sizes, log_v, log_w,
                                         self.rng, anchors="cluster_point").accepted
        changed = 0
        if self.n_gibbs_sweeps:
            changed = slot_gibbs_sweeps(log_likelihood, labels, sizes, log_v, log_w, self.rng,
                                        self.n_gibbs_sweeps).n_changed
        n_clusters = int(np.count_nonzero(sizes))
        if not self.tune:
            self._check_capacity(n_clusters, prior)
        new_point[self.value_name] = mark_written_labels(  # read-only, recognised in O(1)
            labels.astype(np.asarray(point[self.value_name]).dtype, copy=True))
        stats = {"slot_gibbs_changed": changed, "slot_split_merge_accepted": accepted,
                 "slot_parameter_split_merge_accepted": parameters_accepted,
                 "slot_parameter_update_acceptance": (updates_accepted / updates_proposed
                                                      if updates_proposed else np.nan),
                 "slot_gibbs_n_clusters": n_clusters}
        return new_point, [stats]
