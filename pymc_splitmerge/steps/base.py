"""Shared PyMC adapter of the partition samplers.

:class:`PartitionStep` turns a kernel of :mod:`pymc_splitmerge.kernels` into a PyMC
``BlockedStep``.  It owns everything PyMC-specific so that a concrete sampler only supplies
the kernel call and its stats:

* model discovery (:func:`pymc_splitmerge.distributions.discover`) from the partition RV;
* a cached :class:`~pymc_splitmerge.kernels.state.PartitionState`, rebuilt only when the
  labels in the point differ from the canonical labels this step last wrote (another step
  moved them), when the component family's hyperparameter values changed or when the
  observed data changed (``pm.set_data`` between runs of a reused step:
  ``PartitionModel.is_current``); the prior's
  tables are recomputed only when the prior's hyperparameters changed;
* the random generator: ``set_rng(rng)`` (pymc 5), ``setup_chain(rng, tune, draws)``
  (pymc 6), or a fallback Generator when neither is called; both reset per-chain state;
* tuning: ``self.tune`` is true from the start of every chain until PyMC's ``stop_tuning()``
  (which PyMC propagates into a ``CompoundStep``, unlike the ``tune`` attribute itself), so
  steps that adapt (informed anchor proposals) adapt inside a compound step too;
* point handling: the point's arrays are never modified in place (with ``cores > 1`` they
  live in shared memory); a new dict with every key is returned and the stored labels are
  canonical (order of first appearance, ``0..K-1``).

Subclasses set ``name`` (a short name, also the prefix of their stats), declare
``stats_dtypes_shapes`` (every name prefixed by ``name + "_"``), hold a kernel built once in
``__init__`` by a ``kernels.*.build_*`` function (``self.transition(model, partition,
tables, rng)``; options are validated there, the adapter holds no maths) and implement
:meth:`PartitionStep.kernel_step`, usually as :meth:`PartitionStep.run_transition` plus the
mapping of the kernel's info to stats.  Every partition step also emits
``<name>_n_clusters``: PyMC's progress-bar columns can only show sampler stats
(``_make_progressbar_update_functions`` maps a step's stats dict to column values), so the
number-of-clusters column needs it; analyses should still derive partition quantities from
the stored labels.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pymc.exceptions import SamplingError
from pymc.model import modelcontext
from pymc.step_methods.compound import BlockedStep, Competence
from pymc.util import get_random_generator
from rich.progress import TextColumn
from rich.table import Column

from pymc_splitmerge.distributions import discover
from pymc_splitmerge.distributions.checks import check_labels
from pymc_splitmerge.distributions.cluster_parameters import has_cluster_parameters
from pymc_splitmerge.distributions.mixture import number_of_label_slots
from pymc_splitmerge.distributions.priors import PartitionPriorRV
from pymc_splitmerge.distributions.statistics import mark_written_labels
from pymc_splitmerge.kernels.state import PartitionState, PriorTables

__all__ = [
    "PartitionStep",
    "partition_value_and_random_variable",
]


def _same_array(first, second) -> bool:
    """Bitwise equality of two arrays (cheap; a false "changed" only costs a rebuild)."""
    first = np.asarray(first)
    return (first.shape == second.shape and first.dtype == second.dtype
            and first.tobytes() == second.tobytes())


def partition_value_and_random_variable(vars, model):
    """Return ``(value_var, rv)`` of the single partition variable in ``vars``.

    ``vars`` may be the partition RV, its value variable, or a one-element list of either.
    """
    if not isinstance(vars, list | tuple):
        vars = [vars]
    if len(vars) != 1:
        raise ValueError(
            f"a partition step samples exactly one partition variable; got {len(vars)} "
            "variables (create one step per partition)"
        )
    (var,) = vars
    value_var = model.rvs_to_values.get(var, var)
    if value_var not in model.value_vars:
        raise ValueError(f"{getattr(var, 'name', var)!r} is not a free variable of the model")
    rv = model.values_to_rvs[value_var]
    if rv.owner is None or not isinstance(rv.owner.op, PartitionPriorRV):
        raise TypeError(
            f"{rv.name!r} is not a partition variable: pass the variable created with "
            "DirichletProcess / PitmanYor / FiniteDirichlet / MixtureOfFiniteMixtures"
        )
    return value_var, rv


class PerChainSetup:
    """PyMC's per-chain hooks of a step with per-chain state (its ``reset_chain()``).

    pymc 5 calls ``set_rng`` and pymc 6 ``setup_chain`` before a chain's first draw; both
    give the step the chain's generator and reset its per-chain state, and pymc 6 also says
    whether the chain tunes.
    """

    def set_rng(self, rng) -> None:
        """pymc 5: receive this chain's generator; resets per-chain state."""
        self.rng = get_random_generator(rng, copy=False)
        self.reset_chain()

    def setup_chain(self, rng, tune: int, draws: int) -> None:
        """pymc 6: receive this chain's generator and tuning length; resets per-chain state."""
        self.set_rng(rng)
        self.tune = int(tune) > 0


class PartitionStep(PerChainSetup, BlockedStep):
    """Base class of the PyMC step methods that sample a partition.

    Parameters
    ----------
    vars : TensorVariable or list of one TensorVariable
        The partition random variable (or its value variable).
    model : pymc.Model, optional
        Defaults to the model on the context stack.
    rng : int, numpy.random.Generator or None
        Fallback randomness used when PyMC does not call ``set_rng`` / ``setup_chain``.

    Notes
    -----
    Subclasses implement :meth:`kernel_step` and declare their stats.
    """

    name = "partition"
    stats_dtypes_shapes: dict[str, tuple[Any, Any]] = {}
    #: ``(numeric prior, PriorTables)`` used at every draw instead of the prior the point's
    #: hyperparameters give (a step that integrates a prior parameter out), or None
    fixed_prior: tuple | None = None
    # Given several partition variables, PyMC's BlockedStep.__new__ then builds one step per
    # variable (a CompoundStep) instead of one step for all of them.
    default_blocked = False

    def __init__(self, vars, model=None, rng=None, **kwargs):
        for ignored in ("blocked", "initial_point", "compile_kwargs"):  # passed by pm.sample
            kwargs.pop(ignored, None)
        if kwargs:
            raise TypeError(f"unexpected keyword arguments {sorted(kwargs)}")
        model = modelcontext(model)
        value_var, rv = partition_value_and_random_variable(vars, model)
        self.model = model
        self.vars = [value_var]
        self.value_name = value_var.name
        self.partition_var = rv
        self.partition_model = discover(rv, model)
        self.n_points = int(self.partition_model.data.shape[0])
        self.n_slots = number_of_label_slots(rv, self.n_points)
        self.rng = get_random_generator(rng)
        self.reset_chain()

    # ------------------------------------------------------------------ PyMC plumbing
    def reset_chain(self) -> None:
        """Forget cached state (called at the start of every chain)."""
        self._state: PartitionState | None = None
        self._cached_labels: np.ndarray | None = None
        self._cached_evaluated: dict | None = None  # random / Data hyperparameters, last seen
        self._family = None
        self._prior = None
        self._tables = None
        # Adaptation (the informed anchor proposals) runs while ``self.tune`` is true.  PyMC
        # sets ``tune`` only on the top-level step (pymc 5's multiprocess sampler not at all)
        # and only propagates ``stop_tuning()`` into a CompoundStep, which it calls when the
        # tuning draws end (before the first draw when ``tune=0``); so every chain starts in
        # tuning mode here and pymc 6's ``setup_chain`` sets it from the tuning length.
        self.tune = True
        self._start_checked = False

    @staticmethod
    def competence(var, has_grad=None):
        owner = getattr(var, "owner", None)
        if (owner is not None and isinstance(owner.op, PartitionPriorRV)
                and not has_cluster_parameters(var)):  # those: steps.cluster_slots
            return Competence.IDEAL
        return Competence.INCOMPATIBLE

    # ------------------------------------------------------------------ state handling
    def current_state(self, point) -> tuple[PartitionState, object, tuple[np.ndarray, np.ndarray]]:
        """The partition state, numeric prior and tables matching ``point``.

        The cached state is reused when the point's labels equal the canonical labels this
        step wrote last and the family's hyperparameter values are unchanged.  Constant
        hyperparameters are read once per chain; only those that can change between draws
        (random variables or ``pm.Data``: the outputs of the model's one compiled
        hyperparameter function, ``PartitionModel.random_hyperparameters``) are evaluated
        and compared at every draw.
        """
        if not self.partition_model.is_current():  # pm.set_data since the last draw
            self.partition_model = discover(self.partition_var, self.model)
            self._state = None
        labels = np.asarray(point[self.value_name])
        labels_changed = (self._cached_labels is None
                          or not np.array_equal(labels, self._cached_labels))
        if labels_changed:  # a start, or labels written by another step: named errors
            # (the range of a start is checked by check_start, a SamplingError)
            check_labels(labels, self.value_name, self.n_points,
                         self.n_slots if self._start_checked else None)
        prior_changed = family_changed = self._state is None or self._prior is None
        fixed = self.fixed_prior  # (prior, tables) that no hyperparameter of the point moves
        evaluated = None
        if self.partition_model.random_hyperparameters and (
                fixed is None or self.partition_model.symbolic_family):
            evaluated = self.partition_model._evaluate(point)
            cached = self._cached_evaluated
            for key, value in evaluated.items():
                if cached is None or not _same_array(value, cached[key]):
                    if key.startswith("family:"):
                        family_changed = True
                    elif fixed is None:
                        prior_changed = True
            if prior_changed or family_changed:
                self._cached_evaluated = {key: np.array(value, copy=True)
                                          for key, value in evaluated.items()}
        if prior_changed and fixed is not None:
            self._prior, self._tables = fixed
        elif prior_changed:
            self._prior = self.partition_model.numeric_prior(point, evaluated)
            self._tables = PriorTables(*self._prior.tables(self.n_points))
        if family_changed or labels_changed:
            if family_changed or self._family is None:
                self._family = self.partition_model.numeric_family(point, evaluated)
            self._state = PartitionState(self._family, self.partition_model.data, labels)
        return self._state, self._prior, self._tables

    def build_transition(self):
        """The kernel of this step, built once from its options by a ``kernels`` builder.

        Called by the subclass's ``__init__`` (``self.transition = self.build_transition()``)
        and again by :meth:`__copy__`, so that a copied step's kernel refers to the copy
        (PyMC's population sampler shallow-copies the step of every chain).
        """
        raise NotImplementedError

    def __copy__(self):
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)
        if "transition" in self.__dict__:
            clone.transition = clone.build_transition()
        return clone

    def run_transition(self, state: PartitionState, tables):
        """Apply the built kernel ``self.transition`` to ``state`` in place; return its info."""
        return self.transition(state.model, state.partition, PriorTables(*tables), self.rng)

    def kernel_step(self, state: PartitionState, prior, tables) -> dict[str, Any]:
        """Apply the kernel to ``state`` in place; return this step's stats (no n_clusters)."""
        raise NotImplementedError

    def check_start(self, point, state: PartitionState, prior) -> None:
        """Refuse a chain start outside the support (model log density ``-inf`` or NaN).

        Called at the first step of every chain.  Raises ``pymc.exceptions.SamplingError``
        naming the variable and the reason: labels outside the prior's label range
        (``prior.label_range``: ``[0, n)``, ``[0, k)`` for a finite Dirichlet prior), more
        clusters than a finite prior allows, a log prior or a collapsed log likelihood that is ``-inf`` or NaN.
        """
        prefix = (f"Initial evaluation of model at starting point failed: the start of "
                  f"partition variable {self.value_name!r}")
        advice = (f"Give a start inside the support (initvals={{{self.value_name!r}: labels}}), e.g. every point "
                  "in one cluster (the default)")
        prior_name = type(prior).__name__
        n_clusters = state.n_clusters
        max_clusters = prior.max_clusters
        if max_clusters is not None and n_clusters > max_clusters:
            raise SamplingError(
                f"{prefix} has {n_clusters} clusters but {prior_name} allows at most "
                f"{max_clusters} (log prior = -inf). {advice}.")
        labels = np.asarray(point[self.value_name])
        parameters = {name: getattr(prior, name) for name in type(prior).parameter_names}
        limit = int(type(prior).label_range(self.n_points, **parameters))
        if labels.min() < 0 or labels.max() >= limit:
            raise SamplingError(
                f"{prefix} has labels outside [0, {limit}) (the label range of {prior_name} "
                f"for n = {self.n_points}; found {int(labels.min())}..{int(labels.max())}), "
                f"so its log prior is -inf. {advice}.")
        log_prior = float(prior.log_eppf(state.cluster_sizes()))
        if not np.isfinite(log_prior):
            raise SamplingError(
                f"{prefix} has log prior {log_prior} under {type(prior).__name__} "
                f"(cluster sizes {sorted(state.cluster_sizes().tolist(), reverse=True)}). "
                f"{advice}.")
        log_likelihood = state.log_likelihood()
        if not np.isfinite(log_likelihood):
            raise SamplingError(
                f"{prefix} has a collapsed log likelihood of {log_likelihood} (the data rule "
                f"the start partition out). {advice}.")

    def step(self, point):
        state, prior, tables = self.current_state(point)
        if not self._start_checked:
            self.check_start(point, state, prior)
            self._start_checked = True
        stats = self.kernel_step(state, prior, tables)
        labels = state.labels()
        self._cached_labels = labels
        new_point = dict(point)  # never modify the point's arrays in place
        # a new, read-only array the model's cached cluster statistics recognise in O(1)
        new_point[self.value_name] = mark_written_labels(
            labels.astype(np.asarray(point[self.value_name]).dtype, copy=True))
        stats[f"{self.name}_n_clusters"] = state.n_clusters
        return new_point, [stats]

    # ------------------------------------------------------------------ progress bar
    # pymc 5.28 / 6.x build progress-bar columns from `_progressbar_config(n_chains)` and map
    # each step's stats dict to column values with `_make_progressbar_update_functions()`.
    def _progressbar_config(self, n_chains=1):
        key = f"{self.name}_n_clusters"
        columns = [TextColumn(f"{{task.fields[{key}]}}", table_column=Column("Clusters", ratio=1))]
        return columns, {key: [0] * n_chains}

    def _make_progressbar_update_functions(self):
        key = f"{self.name}_n_clusters"

        def update_stats(step_stats):
            return {key: step_stats[key]}

        return (update_stats,)
