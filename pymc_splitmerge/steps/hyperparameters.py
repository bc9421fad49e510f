r"""Slice sampling of the component family's random hyperparameters on the cluster statistics.

Given the labels, a ``ConjugateMixture`` depends on the data only through each cluster's
sufficient statistics (:class:`~pymc_splitmerge.distributions.statistics.ClusterStatistics`,
computed once per label vector), so the conditional log density of hyperparameters
:math:`\theta` that feed only the mixture's component family (and their own priors) is

.. math::

    \log p(\theta \mid c, y) = \text{const} + \sum_j \log p(\theta_j \mid \ldots)
        + \log |J(\theta)| + \sum_{b \in c} \log m(y_b \mid \theta),

an O(K) evaluation: the terms of the block's own variables (with the Jacobians of their
transforms) and the mixture's term, compiled once into one PyTensor function of the block's
unconstrained values (a flat vector) and the other value variables it reads.

:class:`HyperparameterSlice` updates the whole block with ``n_updates`` hit-and-run slice
moves per draw (:mod:`pymc_splitmerge.kernels.hit_and_run_slice`; by default one sweep over a
random orthonormal basis of the whitened block, at least three moves), in the metric of the
block's covariance estimated while tuning (reset at the start of every chain, frozen when
tuning stops).  A proposal outside the family's domain (log density ``-inf`` or NaN) is a
rejection that shrinks the interval.

References
----------
Neal, R. M. (2003). Slice sampling. *Annals of Statistics* 31(3), 705–767.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytensor
import pytensor.tensor as pt
from pymc.exceptions import SamplingError
from pymc.model import modelcontext
from pymc.step_methods.compound import BlockedStep, Competence
from pymc.util import get_random_generator
from pytensor.compile.mode import get_default_mode
from pytensor.graph.replace import graph_replace
from pytensor.link.vm import VMLinker

try:  # pytensor >= 2.31
    from pytensor.graph.traversal import ancestors
except ImportError:  # pragma: no cover - older pytensor
    from pytensor.graph.basic import ancestors

from pymc_splitmerge.distributions.mixture import ConjugateMixtureRV
from pymc_splitmerge.distributions.statistics import ClusterStatistics
from pymc_splitmerge.kernels.hit_and_run_slice import (
    MetricEstimator,
    hit_and_run_slice_move,
    orthonormal_directions,
)
from pymc_splitmerge.steps.base import PerChainSetup

__all__ = ["HyperparameterSlice"]


def _mode_without_garbage_collection():
    """PyTensor's default mode, whose virtual machine (if it uses one) keeps the intermediate
    arrays between calls instead of freeing them after each: the density is called some 30
    times per draw on arrays of a few clusters, and freeing them cost about a quarter of an
    evaluation in the C virtual machine (``benchmarks/hierarchical.py --parts evaluation``).
    Other linkers (numba) are kept as they are."""
    mode = get_default_mode()
    if isinstance(mode.linker, VMLinker) and mode.linker.allow_gc:
        return mode.clone(link_kwargs={"allow_gc": False})
    return mode


def _mixtures(model) -> list:
    return [rv for rv in model.observed_RVs + model.free_RVs
            if rv.owner is not None and isinstance(rv.owner.op, ConjugateMixtureRV)]


def _feeds_only_component_families(rv, model) -> bool:
    """Whether ``rv`` reaches the model's density only through the component family of
    ``ConjugateMixture`` variables (never their partition input, no other variable, no
    potential)."""
    mixtures = _mixtures(model)
    if not mixtures:
        return False
    reached = False
    for other in (*model.basic_RVs, *model.potentials):
        if other is rv or other.owner is None:
            continue
        if any(other is mixture for mixture in mixtures):
            partition, *family_inputs = other.owner.op.dist_params(other.owner)
            if rv in set(ancestors([partition])):
                return False
            if rv in set(ancestors(family_inputs)):
                reached = True
        elif rv in set(ancestors(other.owner.inputs)):
            return False
    return reached


class HyperparameterSlice(PerChainSetup, BlockedStep):
    """Multivariate slice sampler of continuous hyperparameters of a component family.

    PyMC assigns it by itself (``competence`` IDEAL) to every continuous free variable that
    feeds only the component family of a ``ConjugateMixture`` and its own prior, e.g. ``mu0``,
    ``kappa0`` and the scale of ``psi0`` of a ``NormalInverseWishart`` family; all such
    variables form one block.  Each evaluation costs O(clusters) (module doc).

    Parameters
    ----------
    vars : list of TensorVariable
        The hyperparameters (random variables or their value variables).  Every model term
        that depends on them enters the log density, so the update is exact for any
        continuous variables; it is fast when they feed only cluster statistics.
    model : pymc.Model, optional
        Defaults to the model on the context stack.
    n_updates : int, optional
        Hit-and-run slice moves per draw, along consecutive vectors of the chain's stream of
        random orthonormal bases of the whitened block (:func:`~pymc_splitmerge.kernels.
        hit_and_run_slice.orthonormal_directions`; vectors left by one draw or round are
        used by the next).  Default: the block's dimension ``d`` (one sweep, which
        for a Gaussian conditional matched by the metric gives an independent draw), at
        least 3.  On hierarchical Iris (``mu0``, ``kappa0``, the ``psi0`` scale: d = 6) one
        sweep (about 28 evaluations per draw) gave ``mu0`` and ``kappa0`` about 1.8 times the
        effective sample size of 3 moves along uniform directions (about 15 evaluations) and
        the number of clusters the same (``docs/benchmarks.md``).
    width : float, default 2.0
        Initial interval width along a direction of unit length in the adapted metric.
    max_steps : int, default 10
        Maximum number of stepping-out steps per move.
    rng : int or numpy.random.Generator, optional
        Used only if PyMC does not hand a generator to the step.

    Notes
    -----
    Stats: ``hyperslice_evaluations`` (log-density evaluations in this draw).
    """

    name = "hyperslice"
    default_blocked = True
    stats_dtypes_shapes = {"hyperslice_evaluations": (np.int64, [])}

    def __init__(self, vars, model=None, n_updates: int | None = None, width: float = 2.0,
                 max_steps: int = 10, rng=None, **kwargs):
        for ignored in ("blocked", "initial_point", "compile_kwargs"):  # passed by pm.sample
            kwargs.pop(ignored, None)
        if kwargs:
            raise TypeError(f"unexpected keyword arguments {sorted(kwargs)}")
        model = modelcontext(model)
        if not isinstance(vars, list | tuple):
            vars = [vars]
        if n_updates is not None and int(n_updates) < 1:
            raise ValueError(f"n_updates must be a positive integer; got {n_updates}")
        if not float(width) > 0:
            raise ValueError(f"width must be positive; got {width}")
        if int(max_steps) < 0:
            raise ValueError(f"max_steps must be a non-negative integer; got {max_steps}")
        self.width, self.max_steps = float(width), int(max_steps)
        self.model = model
        value_vars = []
        for var in vars:
            value_var = model.rvs_to_values.get(var, var)
            if value_var not in model.value_vars:
                raise ValueError(f"{getattr(var, 'name', var)!r} is not a free variable of the "
                                 "model")
            if not value_var.dtype.startswith("float"):
                raise ValueError(f"HyperparameterSlice samples continuous variables; "
                                 f"{value_var.name!r} has dtype {value_var.dtype}")
            value_vars.append(value_var)
        self.vars = value_vars
        self._build_log_density(model, value_vars)
        self.n_updates = max(self.dimension, 3) if n_updates is None else int(n_updates)
        self.default_n_updates = n_updates is None  # an AlternatingStep may share them out
        self.rng = get_random_generator(rng)
        self.reset_chain()

    def _build_log_density(self, model, value_vars) -> None:
        rvs = [model.values_to_rvs[v] for v in value_vars]
        # every term that depends on the block: its own priors and their dependents
        terms = list(rvs)
        for other in (*model.basic_RVs, *model.potentials):
            if any(other is rv for rv in rvs) or other.owner is None:
                continue
            if set(rvs) & set(ancestors(other.owner.inputs)):
                terms.append(other)
        log_density = model.logp(vars=terms, jacobian=True, sum=True)
        point = model.initial_point()
        self._shapes = [tuple(np.shape(point[v.name])) for v in value_vars]
        self._sizes = [int(np.prod(shape, dtype=np.int64)) for shape in self._shapes]
        self._dtypes = [v.dtype for v in value_vars]
        flat = pt.dvector("hyperparameters_flat")
        replacements, start = {}, 0
        for var, shape, size in zip(value_vars, self._shapes, self._sizes, strict=True):
            replacements[var] = flat[start:start + size].reshape(shape).astype(var.dtype)
            start += size
        self.dimension = start
        (log_density,) = graph_replace([log_density], replacements, strict=False)
        # The cluster statistics of the labels do not change during the moves of one draw:
        # computed once per draw by a separate function and fed to the density as inputs
        # (statistics whose per-point values depend on the block stay inside the density).
        nodes = []
        for variable in ancestors([log_density]):
            node = variable.owner
            if (node is not None and isinstance(node.op, ClusterStatistics)
                    and node not in nodes and flat not in set(ancestors(node.inputs))):
                nodes.append(node)
        outputs = [output for node in nodes for output in node.outputs]
        placeholders = [output.type() for output in outputs]
        (log_density,) = graph_replace([log_density], dict(zip(outputs, placeholders,
                                                               strict=True)), strict=False)
        needed = set(ancestors([log_density, *outputs]))
        others = [v for v in model.value_vars if v in needed and v not in value_vars]
        self._other_names = [v.name for v in others]
        mode = _mode_without_garbage_collection()
        statistics = pytensor.function(others, outputs, on_unused_input="ignore", mode=mode)
        statistics.trust_input = True
        density = pytensor.function([flat, *placeholders, *others], log_density,
                                    on_unused_input="ignore", mode=mode)
        density.trust_input = True
        self._statistics, self._density = statistics, density

    def _fixed_inputs(self, point) -> list:
        """The inputs of the density that stay fixed during one draw: the cluster statistics
        of the point's labels, then the other value variables the density reads."""
        others = [point[name] for name in self._other_names]
        return [*self._statistics(*others), *others]

    # ------------------------------------------------------------------ PyMC plumbing
    def reset_chain(self) -> None:
        """Forget the adapted metric and the directions left (called at the start of every
        chain)."""
        self.tune = True
        self.metric = MetricEstimator(self.dimension)
        self._directions = np.empty((0, self.dimension))

    def _next_directions(self, count: int) -> np.ndarray:
        """The next ``count`` rows of this chain's stream of random orthonormal bases of the
        whitened block (:func:`~pymc_splitmerge.kernels.hit_and_run_slice.
        orthonormal_directions`, a new basis drawn when the rows left run out): rows left by
        one draw, or one round of an :class:`~pymc_splitmerge.steps.alternation.
        AlternatingStep`, are used by the next, so that e.g. two rounds of 3 moves on a 6-D
        block make one sweep of a basis (one QR factorisation per draw instead of two).
        Each basis is drawn from fresh random numbers, independent of the state, and the
        state stays independent of the rows not used yet (each move given its direction
        leaves the target invariant), so every move keeps the target."""
        left = self._directions
        if left.shape[0] < count:
            missing = count - left.shape[0]
            fresh = orthonormal_directions(self.dimension, -(-missing // self.dimension)
                                           * self.dimension, self.rng)
            left = np.concatenate([left, fresh])
        self._directions = left[count:]
        return left[:count]

    def stop_tuning(self) -> None:
        self.tune = False

    @staticmethod
    def competence(var, has_grad=None):
        """IDEAL for a continuous variable that feeds only a ``ConjugateMixture``'s component
        family (and its own prior); needs the model on the context stack."""
        try:
            if getattr(var, "owner", None) is None or not var.dtype.startswith("float"):
                return Competence.INCOMPATIBLE
            model = modelcontext(None)
            if var in model.free_RVs and _feeds_only_component_families(var, model):
                return Competence.IDEAL
        except Exception:  # noqa: BLE001 -- competence must never raise: not ours
            return Competence.INCOMPATIBLE
        return Competence.INCOMPATIBLE

    # ------------------------------------------------------------------ the update
    def _flatten(self, point) -> np.ndarray:
        return np.concatenate([np.asarray(point[v.name], dtype=np.float64).reshape(-1)
                               for v in self.vars])

    def log_density(self, flat, fixed) -> float:
        """The block's conditional log density at ``flat`` (a vector of the block's
        unconstrained values) given ``fixed`` (:meth:`_fixed_inputs`); NaN and errors give
        ``-inf``."""
        return self._log_density_given(fixed)(flat)

    def _log_density_given(self, fixed):
        """:meth:`log_density` as a function of ``flat`` alone, for the moves of one round
        (the fixed inputs bound once: the function is called some 15 times a round)."""
        density = self._density

        def log_density(flat) -> float:
            try:
                value = float(density(flat, *fixed))
            except (ValueError, np.linalg.LinAlgError):
                return -math.inf
            return -math.inf if math.isnan(value) else value  # NaN: outside the domain

        return log_density

    def step(self, point) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        log_density = self._log_density_given(self._fixed_inputs(point))
        current = self._flatten(point)
        log_current = log_density(current)
        if not np.isfinite(log_current):
            names = [v.name for v in self.vars]
            raise SamplingError(
                f"HyperparameterSlice: the log density of {names} is {log_current} at the "
                "current point (a hyperparameter outside its prior's support or the family's "
                "domain); give starts inside it (pm.sample(initvals=...))")
        evaluations = 1
        for direction in self._next_directions(self.n_updates):
            current, log_current, used = hit_and_run_slice_move(
                log_density, current, log_current,
                self.metric.factor, self.width, self.max_steps, self.rng, direction)
            evaluations += used
        if self.tune:
            self.metric.update(current)
        new_point = dict(point)  # never modify the point's arrays in place
        start = 0
        for var, shape, size, dtype in zip(self.vars, self._shapes, self._sizes, self._dtypes,
                                           strict=True):
            new_point[var.name] = current[start:start + size].reshape(shape).astype(dtype)
            start += size
        return new_point, [{"hyperslice_evaluations": evaluations}]
