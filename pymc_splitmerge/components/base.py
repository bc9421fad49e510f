"""Base class of the conjugate component families.

A component family describes the law of the observations of one cluster,

    x_i | theta ~ F(theta),    theta ~ H(hyperparameters),

with theta integrated out.  Every family reduces a cluster to a fixed-length row of
*sufficient statistics* (float64, ``stat_dim`` entries, followed by the cached form of the
posterior predictive, ``docs/contracts.md`` section 2) that is updated when a point joins
(``add_point``) or leaves (``remove_point``), and from which the log marginal likelihood
``log p(x_cluster)`` and the log posterior predictive ``log p(x_new | x_cluster)`` are
computed.

One family is one module (``docs/contracts.md``, "Adding a family"): the module holds the
numba leaf functions (declared on the class as :attr:`ComponentFamily.numba_leaves`), the
plain numpy/scipy references ``reference_log_marginal`` / ``reference_log_predictive``, the
:class:`ComponentFamily` subclass with its validation, its prior/posterior samplers and its
pytensor log marginal (:meth:`ComponentFamily.log_marginal_graph`, written against the
tensor namespace handed in by the caller so that this layer never imports pytensor), and
small worked examples (:meth:`ComponentFamily.examples`) on which the generic contract tests
run.  The numeric id is given by the one table of families,
:mod:`pymc_splitmerge.components.registry`, from which the numba switch
(:mod:`pymc_splitmerge.components._leaf_dispatch`, generated) is written.  This module only
holds the shared Python-side machinery: hyperparameter handling (numeric or symbolic),
validation, data preparation, forward simulation of clusters and conveniences that call the
numba core through :mod:`pymc_splitmerge.components.dispatch`.

Hyperparameters
---------------
A hyperparameter is *numeric* when it is an ``int``/``float``/``bool``/NumPy scalar, a
NumPy array of a numeric dtype, or a (nested) list/tuple of numbers.  Numeric values are
validated at construction (``ValueError`` naming the parameter).  Anything else (e.g. a
pytensor variable) is *symbolic*: it is stored unvalidated and a numeric, validated copy is
obtained with :meth:`ComponentFamily.with_values`.

Data dimension
--------------
Some families know their data dimension from the hyperparameters (a ``psi0`` matrix, a list
of per-attribute categories, a grid); others accept scalar hyperparameters that broadcast to
any number of attributes.  In that case the dimension is *bound* by the first call of
:meth:`ComponentFamily.prepare_data` (the family object records it; later data must have
the same width) and carried over by :meth:`ComponentFamily.with_values`.

Sufficient statistics depend on the hyperparameters (e.g. the Cholesky factor of the
posterior scale matrix): after :meth:`with_values` the rows must be recomputed
(:meth:`stats_of`).
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

__all__ = ["ComponentFamily", "NumbaLeaves", "is_numeric_value"]


class NumbaLeaves(NamedTuple):
    """The ``@njit(cache=True)`` functions of an elementary family (its numba core).

    Signatures (``params`` the family's packed constants, ``stats_row`` a statistics row,
    ``x_row`` a prepared observation)::

        add_point(params, stats_row, x_row)              in place
        remove_point(params, stats_row, x_row)           in place; exact reset when emptied
        log_predictive(params, stats_row, x_row) -> float
        log_marginal(params, stats_row) -> float         0.0 for an empty row
        log_predictive_many(params, stats, slots, n_slots, x_row, out)   optional
        add_point_at(params, stats, slot, x, i)          optional, in place
        remove_point_at(params, stats, slot, x, i)       optional, in place

    The ``_at`` forms take the 2-D arrays ``stats`` (capacity, stat_dim) and ``x`` (n,
    data_dim) and the indices: ``add_point_at(params, stats, slot, x, i)`` must do exactly
    what ``add_point(params, stats[slot], x[i])`` does (bit for bit), without the two row
    views (each costs two atomic reference-count updates, which matters when the update
    itself is a few dozen operations, as in the kernels' hot loops).

    The generated switch :mod:`pymc_splitmerge.components._leaf_dispatch` imports them by
    module and name (rewritten by the import of :mod:`pymc_splitmerge.components.registry`
    when out of date, or by ``python -m pymc_splitmerge.components``); a
    family without ``log_predictive_many`` gets a loop over ``log_predictive``, one without
    an ``_at`` form a call of the row function on views.
    """

    add_point: Any
    remove_point: Any
    log_predictive: Any
    log_marginal: Any
    log_predictive_many: Any = None
    add_point_at: Any = None
    remove_point_at: Any = None


def is_numeric_value(value: Any) -> bool:
    """Whether a hyperparameter value is concrete (numeric) rather than symbolic.

    Parameters
    ----------
    value : object
        A hyperparameter as given by the user.

    Returns
    -------
    bool
        True for Python/NumPy numbers, NumPy arrays of a numeric dtype and (nested, possibly
        ragged) lists/tuples of numbers; False for anything else (e.g. pytensor variables).
    """
    if isinstance(value, (bool, np.bool_, numbers.Number)):
        return True
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "biufc"
    if isinstance(value, (list, tuple)):
        return all(is_numeric_value(item) for item in value)
    return False


def _format_value(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return " ".join(np.array2string(value, threshold=8, separator=", ", precision=4).split())
    if isinstance(value, (list, tuple)) and len(value) > 8:
        return f"[{len(value)} values]"
    if is_numeric_value(value):
        return repr(value)
    return str(value)


class ComponentFamily:
    """A conjugate component family with its hyperparameters (numeric or symbolic).

    Subclasses define ``hyperparameter_names``, ``numba_leaves``, the hooks ``_validate``,
    ``_data_dim_from_hyperparameters``, ``_finalize``, ``_pack_params``,
    ``_pack_empty_stats``, (optionally) ``_check_data`` / ``_check_data_domain``, the
    samplers ``_sample_parameters`` / ``_sample_observations`` / ``_parameter_shapes``,
    :meth:`log_marginal_graph` and :meth:`examples`; they are listed in
    :mod:`pymc_splitmerge.components.registry` (``docs/contracts.md``, "Adding a family").

    Attributes
    ----------
    hyperparameter_names : tuple of str
        Constructor keyword names, in order.
    family_id : int
        Constant per class, assigned by :mod:`pymc_splitmerge.components.registry` (the
        ``FAMILY_*`` constants of :mod:`pymc_splitmerge.components.dispatch`); -1 for a class
        that is not registered (the numba core refuses it).
    numba_leaves : NumbaLeaves or None
        The family's numba functions; None for :class:`ProductFamily`, which the top-level
        dispatch handles itself.
    numba_leaves_by_dimension : mapping of int to NumbaLeaves
        Leaves written for one data dimension (empty by default): an instance bound to such
        data has a ``family_id`` carrying the dimension, so kernels compile these leaves only.
    history_entries : int
        Trailing entries of a statistics row that depend on the row's history (update
        counters), not on the cluster; compare rows without them.
    """

    hyperparameter_names: tuple[str, ...] = ()
    family_id: int = -1
    numba_leaves: NumbaLeaves | None = None
    #: Leaves of the family for one data dimension (they need work for that dimension only),
    #: by dimension: bound to data of such a dimension, an instance's ``family_id`` carries
    #: it, and a kernel given that id compiles these leaves instead of ``numba_leaves``.
    numba_leaves_by_dimension: Mapping[int, NumbaLeaves] = {}
    #: Number of trailing entries of a statistics row that record the history of the row
    #: (an update counter for the periodic drift refresh) rather than the cluster: two rows
    #: of the same points may differ there, and only there beyond rounding.
    history_entries: int = 0
    #: The hyperparameters whose shapes fixed the data dimension (named in dimension errors;
    #: none for families that bind their dimension otherwise, e.g. ``ProductFamily``).
    _dimension_sources: tuple[str, ...] = ()

    def __init__(self, **hyperparameters: Any) -> None:
        unknown = set(hyperparameters) - set(self.hyperparameter_names)
        if unknown:
            raise TypeError(f"{type(self).__name__} got unknown hyperparameters {sorted(unknown)}")
        for name in self.hyperparameter_names:
            value = hyperparameters[name]
            if value is None or isinstance(value, (str, bytes)):
                raise TypeError(
                    f"{type(self).__name__}: hyperparameter {name!r} must be a number, an array "
                    f"or a symbolic (e.g. pytensor) variable, got {value!r}"
                )
        self._hyperparameters = {name: hyperparameters[name] for name in self.hyperparameter_names}
        self._data_dim: int | None = None
        self._dimension_sources: tuple[str, ...] = ()  # hyperparameters fixing the dimension
        self._canonical: dict[str, Any] | None = None
        self._full: dict[str, Any] | None = None
        self._params: np.ndarray | None = None
        self._empty_stats: np.ndarray | None = None
        self._is_numeric = all(is_numeric_value(v) for v in self._hyperparameters.values())
        if self._is_numeric:
            converted = {}
            for name, value in self._hyperparameters.items():
                array = self._to_array(name, value)
                converted[name] = array
            self._canonical = self._validate(converted)
            dim = self._data_dim_from_hyperparameters(self._canonical)
            if dim is not None:
                self._dimension_sources = _dimension_sources(self._canonical, dim)
                try:
                    self._bind(dim)
                except ValueError as error:
                    raise ValueError(
                        f"{error} (before any data: the dimension {dim} comes from "
                        f"{_names(self._dimension_sources)})") from None

    # ------------------------------------------------------------------ hooks
    def _validate(self, values: dict[str, Any]) -> dict[str, Any]:
        """Check domains of numeric hyperparameters; return canonical values.

        ``values`` maps names to float64 arrays (ragged lists stay lists of arrays).
        Must raise ``ValueError`` naming the parameter.
        """
        raise NotImplementedError

    def _data_dim_from_hyperparameters(self, canonical: dict[str, Any]) -> int | None:
        """Data dimension implied by the hyperparameters, or None if they broadcast."""
        raise NotImplementedError

    def _finalize(self, canonical: dict[str, Any], data_dim: int) -> dict[str, Any]:
        """Broadcast hyperparameters to ``data_dim`` and run dimension-dependent checks."""
        raise NotImplementedError

    def _pack_params(self, full: dict[str, Any]) -> np.ndarray:
        raise NotImplementedError

    def _pack_empty_stats(self, full: dict[str, Any], params: np.ndarray) -> np.ndarray:
        """Statistics row of an empty cluster; ``params`` is ``_pack_params(full)``, packed
        once per binding (a family rebuilt for new hyperparameter values at every draw packs
        it once)."""
        raise NotImplementedError

    def _check_data(self, x2d: np.ndarray) -> None:
        """Family-specific check of prepared data, numeric hyperparameters known (``ValueError``).

        Defaults to :meth:`_check_data_domain`.
        """
        self._check_data_domain(x2d)

    def _check_data_domain(self, x2d: np.ndarray) -> None:
        """Domain check of data that needs no numeric hyperparameter (``ValueError``).

        Also run on the data of a family whose hyperparameters are symbolic
        (:meth:`check_data_symbolic`).
        """

    _accepts_bool = True

    # ------------------------------------------------------------ internals
    def _to_array(self, name: str, value: Any) -> Any:
        try:
            array = np.asarray(value)
        except ValueError:
            # ragged nested list: keep as a list of arrays (checked by the family)
            return [self._to_array(name, item) for item in value]
        if array.dtype.kind == "c":
            raise ValueError(f"{type(self).__name__}: hyperparameter {name!r} must be real")
        if array.dtype == object:
            return [self._to_array(name, item) for item in value]
        array = array.astype(np.float64)
        if not np.all(np.isfinite(array)):
            raise ValueError(
                f"{type(self).__name__}: hyperparameter {name!r} must be finite, got {value!r}"
            )
        return array

    def _bind(self, data_dim: int) -> None:
        data_dim = int(data_dim)
        if self._canonical is not None:
            full = self._finalize(self._canonical, data_dim)  # may raise: bind nothing then
            params = np.ascontiguousarray(self._pack_params(full), dtype=np.float64)
            empty = np.ascontiguousarray(self._pack_empty_stats(full, params), dtype=np.float64)
            self._full, self._params, self._empty_stats = full, params, empty
        self._data_dim = data_dim
        family_id = type(self).family_id
        if data_dim in self.numba_leaves_by_dimension and hasattr(family_id, "dimension"):
            self.family_id = type(family_id)(family_id, data_dim)  # see numba_leaves_by_dimension

    def _dimension_mismatch(self, shape) -> str:
        """The error for data of ``shape`` whose columns differ from the bound dimension: names
        the hyperparameters that fixed the dimension, when they did."""
        name = type(self).__name__
        if self._dimension_sources:
            sources = _names(self._dimension_sources)
            verb = "gives" if len(self._dimension_sources) == 1 else "give"
            return (f"{name}: the data have {shape[1]} columns (shape {shape}) but {sources} "
                    f"{verb} dimension {self._data_dim}: give {sources} for "
                    f"{shape[1]}-dimensional data (or a scalar, broadcast to the data)")
        return (f"{name}: data rows must have {self._data_dim} entries, got {shape[1]} "
                f"(shape {shape})")

    def _require_ready(self) -> None:
        if self._params is not None:
            return
        if not self._is_numeric:
            symbolic = [n for n, v in self._hyperparameters.items() if not is_numeric_value(v)]
            raise ValueError(
                f"{type(self).__name__} has symbolic hyperparameters {symbolic}; "
                "call with_values(...) with numeric values first"
            )
        if self._params is None:
            raise ValueError(
                f"{type(self).__name__}: the data dimension is not known yet (all "
                "hyperparameters are scalars); call prepare_data(data) first or give "
                "hyperparameters of the data's dimension"
            )

    # ------------------------------------------------------------ public API
    @property
    def hyperparameters(self) -> dict[str, Any]:
        """Hyperparameters as given by the user (dict, constructor order)."""
        return dict(self._hyperparameters)

    @property
    def is_numeric(self) -> bool:
        """True when every hyperparameter is a concrete number/array."""
        return self._is_numeric

    @property
    def data_dim(self) -> int | None:
        """Width of a prepared data row, or None while not bound (see module docstring)."""
        return self._data_dim

    def with_values(self, **values: Any) -> ComponentFamily:
        """Return a validated numeric copy with some hyperparameters replaced.

        Parameters
        ----------
        **values
            New values, by hyperparameter name; the others are kept.  After the
            replacement every hyperparameter must be numeric.

        Returns
        -------
        ComponentFamily
            A new instance of the same class, bound to the same data dimension.
        """
        unknown = set(values) - set(self.hyperparameter_names)
        if unknown:
            raise TypeError(
                f"{type(self).__name__}.with_values got unknown names {sorted(unknown)}; "
                f"expected some of {self.hyperparameter_names}"
            )
        merged = {**self._hyperparameters, **values}
        symbolic = [n for n, v in merged.items() if not is_numeric_value(v)]
        if symbolic:
            raise ValueError(
                f"{type(self).__name__}.with_values needs numeric values for {symbolic}"
            )
        new = type(self)(**merged)
        if self._data_dim is not None:
            if new._data_dim is None:
                new._bind(self._data_dim)
            elif new._data_dim != self._data_dim:
                raise ValueError(
                    f"{type(self).__name__}.with_values: the new hyperparameters have data "
                    f"dimension {new._data_dim}, but the family is bound to {self._data_dim}"
                )
        return new

    @property
    def params(self) -> np.ndarray:
        """Packed numeric constants for the numba core, float64 array of shape (n_params,).

        The same array is returned on every call.  Some families reserve a scratch tail in
        it (documented per family) that the numba core writes to: do not share one params
        array between threads.
        """
        self._require_ready()
        return self._params

    @property
    def empty_stats(self) -> np.ndarray:
        """Statistics row of an empty cluster, float64 array of shape (stat_dim,) (a copy)."""
        self._require_ready()
        return self._empty_stats.copy()

    @property
    def stat_dim(self) -> int:
        """Length of a statistics row."""
        self._require_ready()
        return int(self._empty_stats.shape[0])

    @property
    def cluster_columns(self) -> np.ndarray:
        """Indices of the statistics-row entries that depend on the cluster only.

        Int64 array: every entry except the history entries (update counters), which two rows
        of the same points may hold differently.  Compare rows on these columns.
        """
        return np.arange(self.stat_dim - int(self.history_entries), dtype=np.int64)

    def prepare_data(self, data: Any) -> np.ndarray:
        """Validate observations and return them as a float64 array of shape (n, data_dim).

        A 1-D array of length n is read as n observations of dimension 1 (allowed while the
        data dimension is 1 or not yet bound).  Binds the data dimension if not yet known.

        Parameters
        ----------
        data : array_like
            Observations, shape (n, data_dim) (or (n,) for dimension 1).

        Returns
        -------
        ndarray of float64, shape (n, data_dim), C-contiguous.
        """
        name = type(self).__name__
        array = np.asarray(data)
        if array.dtype.kind not in "biuf":
            raise TypeError(f"{name}: data must be numeric (got dtype {array.dtype})")
        if array.dtype.kind == "b" and not self._accepts_bool:
            raise TypeError(f"{name}: data must not be boolean")
        if array.ndim == 1:
            if self._data_dim not in (None, 1):
                raise ValueError(
                    f"{name}: data must have shape (n, {self._data_dim}), got a 1-D array of "
                    f"shape {array.shape}"
                )
            array = array.reshape(-1, 1)
        if array.ndim != 2:
            raise ValueError(f"{name}: data must be a 2-D array (n, dim), got shape {array.shape}")
        x2d = np.ascontiguousarray(array, dtype=np.float64)
        if not np.all(np.isfinite(x2d)):
            bad = np.argwhere(~np.isfinite(x2d))[0]
            raise ValueError(
                f"{name}: data contains NaN or infinite values (first at row {bad[0]}, "
                f"column {bad[1]}: {x2d[bad[0], bad[1]]}); remove or impute them"
            )
        if self._data_dim is None:
            if x2d.shape[1] < 1:
                raise ValueError(f"{name}: data must have at least one column")
            self._bind(x2d.shape[1])
        elif x2d.shape[1] != self._data_dim:
            raise ValueError(self._dimension_mismatch(x2d.shape))
        self._check_data(x2d)
        return x2d

    # --- Python conveniences (call the numba core) ---
    def _as_rows(self, x2d: Any) -> np.ndarray:
        x2d = np.ascontiguousarray(x2d, dtype=np.float64)
        if x2d.ndim == 1 and self._data_dim == 1:
            x2d = x2d.reshape(-1, 1)
        if x2d.ndim != 2 or x2d.shape[1] != self._data_dim:
            raise ValueError(
                f"{type(self).__name__}: expected prepared rows of shape (n, {self._data_dim}), "
                f"got {x2d.shape}; use prepare_data"
            )
        return x2d

    def _as_stats(self, stats_row: Any) -> np.ndarray:
        row = np.ascontiguousarray(stats_row, dtype=np.float64)
        if row.shape != self._empty_stats.shape:
            raise ValueError(
                f"{type(self).__name__}: statistics row must have shape "
                f"{self._empty_stats.shape}, got {row.shape}"
            )
        return row

    def stats_of(self, x2d: Any) -> np.ndarray:
        """Sufficient statistics of a set of prepared rows.

        Parameters
        ----------
        x2d : ndarray, shape (n, data_dim)
            Prepared observations (see :meth:`prepare_data`).

        Returns
        -------
        ndarray of float64, shape (stat_dim,)
        """
        # imported here: dispatch imports every family module, which imports this module
        from pymc_splitmerge.components import dispatch

        self._require_ready()
        x2d = self._as_rows(x2d)
        index = np.arange(x2d.shape[0], dtype=np.int64)
        return dispatch.stats_from_rows(
            self.family_id, self._params, self._empty_stats, x2d, index
        )

    def log_marginal(self, stats_row: Any) -> float:
        """Log marginal likelihood of a cluster from its statistics row (0.0 when empty)."""
        from pymc_splitmerge.components import dispatch

        self._require_ready()
        return float(dispatch.log_marginal(self.family_id, self._params, self._as_stats(stats_row)))

    def log_predictive(self, x_row: Any, stats_row: Any) -> float:
        """Log posterior predictive density/mass of one prepared row given a cluster.

        Parameters
        ----------
        x_row : ndarray, shape (data_dim,)
        stats_row : ndarray, shape (stat_dim,)
        """
        from pymc_splitmerge.components import dispatch

        self._require_ready()
        x_row = np.ascontiguousarray(x_row, dtype=np.float64).reshape(-1)
        if x_row.shape[0] != self._data_dim:
            raise ValueError(
                f"{type(self).__name__}: x_row must have {self._data_dim} entries, "
                f"got {x_row.shape[0]}"
            )
        return float(
            dispatch.log_predictive(
                self.family_id, self._params, self._as_stats(stats_row), x_row
            )
        )

    # --- forward simulation: each family owns its prior/posterior parameter sampler ---
    def sample_parameters(self, rng: np.random.Generator, x2d: Any = None) -> dict[str, Any]:
        """One draw of a cluster's parameters, from the prior or from the posterior.

        Parameters
        ----------
        rng : numpy.random.Generator
        x2d : ndarray of shape (m, data_dim), optional
            Prepared observations of the cluster.  ``None`` (or ``m = 0``) draws from the
            prior; otherwise from the conjugate posterior given these rows.

        Returns
        -------
        dict
            Parameter name -> array of the shape given by :meth:`parameter_shapes` (e.g.
            ``{"mean": (D,), "covariance": (D, D)}`` for :class:`NormalInverseWishart`).
        """
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy.random.Generator; got {type(rng).__name__}")
        self._require_ready()
        rows = np.zeros((0, self._data_dim)) if x2d is None else self._as_rows(x2d)
        return self._sample_parameters(rng, rows)

    def sample_observations(self, rng: np.random.Generator, parameters: dict[str, Any],
                            size: int) -> np.ndarray:
        """``size`` i.i.d. observations given a cluster's parameters.

        Parameters
        ----------
        rng : numpy.random.Generator
        parameters : dict
            As returned by :meth:`sample_parameters`.
        size : int

        Returns
        -------
        ndarray of float64, shape (size, data_dim)
            In the prepared data layout.
        """
        self._require_ready()
        out = np.asarray(self._sample_observations(rng, parameters, int(size)), dtype=np.float64)
        return out.reshape(int(size), self._data_dim)

    def parameter_shapes(self) -> dict[str, tuple[int, ...]]:
        """Names and shapes of the parameters drawn by :meth:`sample_parameters`."""
        self._require_ready()
        return self._parameter_shapes()

    def _sample_parameters(self, rng, x2d):
        raise NotImplementedError(
            f"{type(self).__name__} has no parameter sampler")

    def _sample_observations(self, rng, parameters, size):
        raise NotImplementedError(
            f"forward sampling of observations is not available for {type(self).__name__}")

    def _parameter_shapes(self):
        raise NotImplementedError(f"{type(self).__name__} has no parameter sampler")

    def sample_data(self, rng: np.random.Generator, labels: Any,
                    observed: Any = None) -> np.ndarray:
        """Data given a partition: one parameter draw per cluster, then its points i.i.d.

        The one forward simulator of the package (``ConjugateMixture`` draws and the Geweke
        tests both call it).

        Parameters
        ----------
        rng : numpy.random.Generator
        labels : array_like of int, shape (n,)
            Cluster labels; clusters are visited in increasing label order.
        observed : ndarray of shape (n, data_dim), optional
            Prepared observed data.  When given, each cluster's parameters are drawn from
            their posterior given the observed rows of that cluster (posterior predictive
            replicate); otherwise from the prior (prior predictive).

        Returns
        -------
        ndarray of float64, shape (n, data_dim)
        """
        self._require_ready()
        labels = np.asarray(labels)
        out = np.empty((labels.shape[0], self._data_dim))
        for label in np.unique(labels):
            rows = np.flatnonzero(labels == label)
            parameters = self.sample_parameters(rng, None if observed is None else observed[rows])
            out[rows] = self.sample_observations(rng, parameters, rows.shape[0])
        return out

    @classmethod
    def has_observation_sampler(cls) -> bool:
        """Whether the class draws observations given parameters (:meth:`sample_observations`)."""
        return cls._sample_observations is not ComponentFamily._sample_observations

    # --- the PyMC layer's pytensor log marginal, written here against a passed namespace ---
    def log_marginal_graph(self, graph: Any, hyperparameters: dict[str, Any], x2d: Any):
        """Log marginal likelihood of every non-empty cluster, as a pytensor graph.

        Written with the tensor namespace the caller hands in, so that this layer never
        imports pytensor (``docs/contracts.md``, layers).  The formula reads the data only
        through per-cluster sums of per-point values that do not depend on a hyperparameter
        (``graph.cluster_sums``): they are computed once per label vector, so one evaluation
        for new hyperparameters costs O(K x statistics row) and is differentiable in every
        continuous hyperparameter.

        Parameters
        ----------
        graph : object
            Built by :mod:`pymc_splitmerge.distributions.mixture` (``SlotGraph``):
            ``graph.pt`` is ``pytensor.tensor``; ``graph.counts`` (float, shape (K,)) the
            number of points of each non-empty cluster and ``graph.dim`` the width of
            ``x2d``; ``graph.cluster_sums(*values)`` (per-cluster sums of per-point values of
            shape (n, ...), one (K, ...) tensor each; ``graph.segment_sum(values)`` for one),
            ``graph.centred(x2d)`` (``x2d - graph.reference``, a fixed point near the data:
            continuous families sum centred values and move their location hyperparameters
            by ``graph.reference``, so that data far from zero lose no precision),
            ``graph.vector(value)`` / ``graph.matrix(value)`` (a hyperparameter as a float64
            vector of length ``dim`` / a (dim, dim) matrix, scalars broadcast),
            ``graph.log_det_cholesky(matrices)`` -> (log-determinants, lower factors),
            ``graph.log_det_stack(stack)`` / ``graph.inverse_stack(stack)`` (log-determinants
            and inverses of a (K, D, D) stack in one batched call each, gradient included:
            prefer them for per-cluster matrices),
            ``graph.is_finite(value)`` and ``graph.restrict(columns)`` (the same clusters for
            a sub-family of some columns).
        hyperparameters : dict
            Name -> tensor of every hyperparameter (numeric ones as constants; a ragged
            Dirichlet concentration as a list of arrays).
        x2d : tensor of shape (n, dim)
            Observations in the prepared layout.

        Returns
        -------
        per_slot : tensor of shape (K,)
            ``log m(x_{z = j})`` for every non-empty cluster.
        conditions : list of boolean scalar tensors
            The hyperparameters' domain (``check_parameters``).
        """
        raise NotImplementedError(
            f"ConjugateMixture has no pytensor log marginal for {type(self).__name__}: "
            "implement log_marginal_graph (docs/contracts.md, 'Adding a family')")

    @classmethod
    def examples(cls, rng: np.random.Generator) -> list[tuple[str, ComponentFamily, np.ndarray]]:
        """Small instances with raw data covering the family's layouts.

        The generic contract tests (``tests/test_family_contract.py``) run on them for every
        registered family.

        Returns
        -------
        list of (label, family, raw data)
            Raw data are accepted by ``family.prepare_data``; at least 8 rows each.
        """
        raise NotImplementedError(f"{cls.__name__} provides no examples")

    def check_data_symbolic(self, data: Any) -> np.ndarray:
        """Shape, finiteness and domain checks of data for symbolic hyperparameters.

        The checks of :meth:`prepare_data` that need no numeric hyperparameter (the data
        dimension is not bound).

        Returns
        -------
        ndarray of float64, shape (n, dim)
        """
        name = type(self).__name__
        array = np.asarray(data)
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
        if self._data_dim is not None and x2d.shape[1] != self._data_dim:
            raise ValueError(self._dimension_mismatch(x2d.shape))
        self._check_data_domain(x2d)
        return x2d

    def log_marginal_of(self, x2d: Any) -> float:
        """Log marginal likelihood of a set of prepared rows, shape (n, data_dim)."""
        return self.log_marginal(self.stats_of(x2d))

    def __repr__(self) -> str:
        inner = ", ".join(
            f"{name}={_format_value(value)}" for name, value in self._hyperparameters.items()
        )
        return f"{type(self).__name__}({inner})"


# ---------------------------------------------------------------- validation helpers
def _require_positive(family: str, name: str, array: np.ndarray) -> None:
    if not np.all(array > 0):
        raise ValueError(f"{family}: hyperparameter {name!r} must be > 0, got "
                         f"{np.asarray(array).tolist()}")


def _require_scale_matrix(family: str, name: str, value: np.ndarray) -> np.ndarray:
    """A positive scalar or a symmetric positive-definite (D, D) matrix (checked by Cholesky)."""
    if isinstance(value, list) or value.ndim not in (0, 2):
        raise ValueError(
            f"{family}: hyperparameter {name!r} must be a scalar or a square (D, D) matrix"
        )
    if value.ndim == 0:
        if not value > 0:
            raise ValueError(f"{family}: hyperparameter {name!r} must be > 0, got {float(value)}")
        return value
    if value.shape[0] != value.shape[1]:
        raise ValueError(f"{family}: hyperparameter {name!r} must be square, got {value.shape}")
    scale = max(float(np.abs(value).max()), 1e-300)
    if float(np.abs(value - value.T).max()) > 1e-10 * scale:
        raise ValueError(f"{family}: hyperparameter {name!r} must be symmetric")
    try:
        np.linalg.cholesky(value)
    except np.linalg.LinAlgError:
        raise ValueError(f"{family}: hyperparameter {name!r} must be positive definite") from None
    return value


def _require_vector(family: str, name: str, array: Any) -> np.ndarray:
    if isinstance(array, list) or np.ndim(array) > 1:
        raise ValueError(
            f"{family}: hyperparameter {name!r} must be a scalar or a 1-D array, "
            f"got shape {np.shape(array)}"
        )
    return np.asarray(array, dtype=np.float64)


def _broadcast_vector(family: str, name: str, array: np.ndarray, size: int) -> np.ndarray:
    """Broadcast a scalar or length-``size`` 1-D hyperparameter to shape (size,)."""
    if array.ndim == 0:
        return np.full(size, float(array))
    if array.shape != (size,):
        raise ValueError(
            f"{family}: hyperparameter {name!r} has length {array.shape[0]} but the data have "
            f"{size} attributes"
        )
    return array.astype(np.float64).copy()


def _data_moments(family: str, data: Any, *, columns: str = "columns") -> tuple[np.ndarray,
                                                                               np.ndarray]:
    """Column means and covariance (ddof = 0) of data, for the ``from_data`` defaults.

    Parameters
    ----------
    family : str
        Name used in the error messages (``"NormalInverseWishart.from_data"``).
    data : array_like of shape (n,) or (n, D)
    columns : str
        What the columns are, for the messages.

    Returns
    -------
    mean : ndarray of shape (D,)
    covariance : ndarray of shape (D, D)
        With a positive diagonal (else ``ValueError`` naming the constant columns).
    """
    array = np.asarray(data)
    if array.dtype.kind not in "biuf":
        raise TypeError(f"{family}: data must be numeric (got dtype {array.dtype})")
    x2d = np.asarray(array, dtype=np.float64)
    if x2d.ndim == 1:
        x2d = x2d.reshape(-1, 1)
    if x2d.ndim != 2 or x2d.shape[0] < 2:
        raise ValueError(f"{family}: data must have shape (n, D) with n >= 2 rows, got "
                         f"{array.shape}")
    if not np.all(np.isfinite(x2d)):
        raise ValueError(f"{family}: data contains NaN or infinite values; remove or impute "
                         "them first")
    mean = x2d.mean(axis=0)
    covariance = np.atleast_2d(np.cov(x2d, rowvar=False, bias=True))
    constant = np.flatnonzero(~(np.diag(covariance) > 0))
    if constant.size:
        raise ValueError(f"{family}: {columns} {constant.tolist()} of the data are constant "
                         "(zero variance); drop them or give the hyperparameters yourself")
    return mean, covariance


def _check_fraction(family: str, variance_fraction: Any) -> float:
    value = float(variance_fraction)
    if not (np.isfinite(value) and value > 0):
        raise ValueError(f"{family}: variance_fraction must be a positive number (the prior "
                         f"mean of a cluster's variance relative to the data's), got "
                         f"{variance_fraction!r}")
    return value


def _dimension_sources(canonical: dict[str, Any], dim: int) -> tuple[str, ...]:
    """Names of the hyperparameters whose leading axis has length ``dim`` (those that fix the
    data dimension of a family)."""
    names = []
    for name, value in canonical.items():
        length = (np.shape(value)[0] if isinstance(value, np.ndarray) and value.ndim >= 1
                  else len(value) if isinstance(value, list) else None)
        if length == dim:
            names.append(name)
    return tuple(names)


def _names(names) -> str:
    quoted = [repr(name) for name in names]
    if len(quoted) == 1:
        return f"the hyperparameter {quoted[0]}"
    return "the hyperparameters " + ", ".join(quoted[:-1]) + " and " + quoted[-1]
