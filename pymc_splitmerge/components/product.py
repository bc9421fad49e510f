r"""Independent conjugate families on groups of columns (mixed data types).

A row ``x`` of D columns is split into disjoint column groups ``x[C_1], ..., x[C_m]``
(covering all columns); within a cluster the groups are independent, each with its own
conjugate family and parameters::

    p(x_1..n | cluster) = prod_g p_g(x_1..n[C_g]),     theta = (theta_1, ..., theta_m),

so the log marginal likelihood and the log predictive are sums over the groups, and the
statistics row is the concatenation of the groups' rows.  E.g. Normal-Inverse-Wishart on the
continuous columns and Dirichlet-categorical on the categorical ones (Jain & Neal 2000,
section 4, use the same product form for mixed attributes).

The product's numba functions (``product_add_point``, ...) live here and call the
generated switch over the elementary families
(:mod:`pymc_splitmerge.components._leaf_dispatch`); the top-level functions of
:mod:`pymc_splitmerge.components.dispatch` send ``FAMILY_PRODUCT`` to them, so every kernel
handles a product like any family.  Nesting products is not supported (numba does not
reliably compile a function that calls itself through a type-dependent branch, so the
product level and the leaf level are separate functions).

Params layout (float64)::

    [n_sub, data_dim, scratch_offset,
     n_sub entries of 7: (family_id, sub_dim, stat_offset, stat_dim, param_offset,
                          param_length, column_offset),
     column indices of each sub-family (sub_dim each, at column_offset),
     the sub-families' params (at param_offset), scratch (max sub_dim)]

and the statistics row is the concatenation of the sub-families' rows (at stat_offset).  The
scratch tail receives the gathered columns of an observation for one sub-family, so a
product's params must not be shared between threads.

References
----------
Jain & Neal (2000), "A split-merge Markov chain Monte Carlo procedure for the Dirichlet
process mixture model", section 4.
"""

from __future__ import annotations

import importlib
import numbers
from typing import Any

import numpy as np

from pymc_splitmerge.components._leaf_dispatch import (
    leaf_add_point,
    leaf_log_marginal,
    leaf_log_predictive,
    leaf_remove_point,
)
from pymc_splitmerge.components.base import ComponentFamily
from pymc_splitmerge.components.beta_bernoulli import BetaBernoulli
from pymc_splitmerge.components.dirichlet_categorical import DirichletCategorical
from pymc_splitmerge.components.gamma_poisson import GammaPoisson
from pymc_splitmerge.components.normal_inverse_wishart import NormalInverseWishart
from pymc_splitmerge.core.jit import njit

__all__ = [
    "PRODUCT_ENTRY",
    "PRODUCT_HEADER",
    "ProductFamily",
    "product_add_point",
    "product_log_marginal",
    "product_log_predictive",
    "product_remove_point",
    "reference_log_marginal",
    "reference_log_predictive",
]

PRODUCT_HEADER = 3
"""Entries before the per-sub-family table of a product's params."""

PRODUCT_ENTRY = 7
"""Entries per sub-family in a product's params table."""


# ------------------------------------------------------------------ numba core
@njit(cache=True)
def _gather(params, entry, x_row):
    """Columns of sub-family ``entry`` of ``x_row``, copied to the scratch tail of params."""
    sub_dim = int(params[entry + 1])
    columns = int(params[entry + 6])
    scratch = int(params[2])
    for j in range(sub_dim):
        params[scratch + j] = x_row[int(params[columns + j])]
    return params[scratch:scratch + sub_dim]


@njit(cache=True)
def product_add_point(params, stats_row, x_row):
    """Add ``x_row`` to every sub-family's part of ``stats_row`` (in place)."""
    for i in range(int(params[0])):
        entry = PRODUCT_HEADER + PRODUCT_ENTRY * i
        stat_offset = int(params[entry + 2])
        param_offset = int(params[entry + 4])
        leaf_add_point(int(params[entry]),
                       params[param_offset:param_offset + int(params[entry + 5])],
                       stats_row[stat_offset:stat_offset + int(params[entry + 3])],
                       _gather(params, entry, x_row))


@njit(cache=True)
def product_remove_point(params, stats_row, x_row):
    """Remove ``x_row`` from every sub-family's part of ``stats_row`` (in place)."""
    for i in range(int(params[0])):
        entry = PRODUCT_HEADER + PRODUCT_ENTRY * i
        stat_offset = int(params[entry + 2])
        param_offset = int(params[entry + 4])
        leaf_remove_point(int(params[entry]),
                          params[param_offset:param_offset + int(params[entry + 5])],
                          stats_row[stat_offset:stat_offset + int(params[entry + 3])],
                          _gather(params, entry, x_row))


@njit(cache=True)
def product_log_predictive(params, stats_row, x_row):
    """Sum of the sub-families' log predictives of their columns of ``x_row``."""
    total = 0.0
    for i in range(int(params[0])):
        entry = PRODUCT_HEADER + PRODUCT_ENTRY * i
        stat_offset = int(params[entry + 2])
        param_offset = int(params[entry + 4])
        total += leaf_log_predictive(
            int(params[entry]), params[param_offset:param_offset + int(params[entry + 5])],
            stats_row[stat_offset:stat_offset + int(params[entry + 3])],
            _gather(params, entry, x_row))
    return total


@njit(cache=True)
def product_log_marginal(params, stats_row):
    """Sum of the sub-families' log marginal likelihoods (0.0 for an empty row)."""
    total = 0.0
    for i in range(int(params[0])):
        entry = PRODUCT_HEADER + PRODUCT_ENTRY * i
        stat_offset = int(params[entry + 2])
        param_offset = int(params[entry + 4])
        total += leaf_log_marginal(
            int(params[entry]), params[param_offset:param_offset + int(params[entry + 5])],
            stats_row[stat_offset:stat_offset + int(params[entry + 3])])
    return total


def _prefix(index: int) -> str:
    return f"f{index}_"


def _as_columns(columns: Any, index: int) -> np.ndarray:
    where = f"ProductFamily: component {index}"
    if isinstance(columns, slice):
        raise TypeError(f"{where}: give the columns as a list of ints "
                        f"(e.g. list(range(0, 3))), not a slice")
    if isinstance(columns, bool | np.bool_):
        raise TypeError(f"{where}: columns must be ints, got {columns!r}")
    if isinstance(columns, numbers.Integral):
        columns = [columns]
    try:
        array = np.asarray(columns)
    except ValueError:
        raise TypeError(f"{where}: columns must be a list of ints, got {columns!r}") from None
    if array.ndim != 1 or array.size == 0 or array.dtype.kind not in "iu":
        raise TypeError(f"{where}: columns must be a non-empty list of ints, got {columns!r}")
    if np.any(array < 0):
        raise ValueError(f"{where}: column indices must be >= 0, got {array.tolist()}")
    if np.unique(array).size != array.size:
        raise ValueError(f"{where}: columns {array.tolist()} repeat an index")
    return array.astype(np.int64)


class ProductFamily(ComponentFamily):
    """Independent conjugate families on disjoint groups of data columns.

    Parameters
    ----------
    components : sequence of (ComponentFamily, columns)
        Each family with the data columns it models: an int or a list of ints.  The column
        groups must be disjoint and cover ``0..D-1`` (D = total number of columns).  A
        family's hyperparameters may be numbers, ``pm.Data`` or random variables, as for a
        single family; nesting products is not supported.

    Examples
    --------
    Two continuous columns (0, 1) and two categorical ones (2: three categories, 3: two)::

        psm.ProductFamily([
            (psm.NormalInverseWishart(mu0=0.0, kappa0=1.0, nu0=4.0, psi0=np.eye(2)), [0, 1]),
            (psm.DirichletCategorical(concentration=1.0, n_categories=[3, 2]), [2, 3]),
        ])

    Notes
    -----
    Hyperparameters are exposed (``hyperparameters``, ``with_values``) with the prefix
    ``f{i}_`` of sub-family ``i`` (e.g. ``f0_mu0``).  Parameters drawn by
    :meth:`sample_parameters` carry the same prefix.  Statistics row: the sub-families'
    rows concatenated (in the order given).
    """


    def __init__(self, components):
        try:
            pairs = [tuple(item) for item in components]
        except TypeError:
            raise TypeError(
                "ProductFamily needs a list of (family, columns) pairs, e.g. "
                "[(psm.NormalInverseWishart(...), [0, 1]), (psm.BetaBernoulli(...), [2])]"
            ) from None
        if not pairs:
            raise ValueError("ProductFamily needs at least one (family, columns) pair")
        checked = []
        for index, pair in enumerate(pairs):
            if len(pair) != 2:
                raise TypeError(f"ProductFamily: component {index} must be a (family, columns) "
                                f"pair, got {pair!r}")
            family, columns = pair
            if isinstance(family, ProductFamily):
                raise TypeError("ProductFamily: nested products are not supported; list all "
                                "families in one ProductFamily")
            if not isinstance(family, ComponentFamily):
                raise TypeError(f"ProductFamily: component {index} must be a family from "
                                f"pymc_splitmerge.components, got {type(family).__name__}")
            columns = _as_columns(columns, index)
            if family.data_dim is not None and family.data_dim != columns.size:
                raise ValueError(
                    f"ProductFamily: component {index} ({type(family).__name__}) has data "
                    f"dimension {family.data_dim} but is given {columns.size} columns "
                    f"{columns.tolist()}")
            checked.append((family, columns))
        every = np.concatenate([columns for _, columns in checked])
        if np.unique(every).size != every.size:
            repeated = sorted({int(c) for c in every if np.sum(every == c) > 1})
            raise ValueError(f"ProductFamily: columns {repeated} belong to several families; "
                             "the column groups must be disjoint")
        data_dim = every.size
        if every.max() >= data_dim:
            missing = sorted(set(range(int(every.max()) + 1)) - {int(c) for c in every})
            raise ValueError(f"ProductFamily: the column groups must cover 0..D-1 without "
                             f"gaps; no family models columns {missing}")
        self._components = []
        for family, columns in checked:
            if family.data_dim is None:  # scalar hyperparameters: bind a private copy
                family = type(family)(**family.hyperparameters)
                family._bind(columns.size)
            self._components.append((family, columns))
        self._hyperparameters = {
            _prefix(i) + name: value
            for i, (family, _) in enumerate(self._components)
            for name, value in family.hyperparameters.items()}
        self.hyperparameter_names = tuple(self._hyperparameters)
        self._is_numeric = all(family.is_numeric for family, _ in self._components)
        self._canonical = None
        self._full = None
        self._params = self._empty_stats = None
        self._data_dim = int(data_dim)
        if self._is_numeric:
            self._params, self._empty_stats = self._pack()

    # ------------------------------------------------------------ packing
    def _pack(self) -> tuple[np.ndarray, np.ndarray]:
        count = len(self._components)
        subs = [(family, columns, family.params, family.empty_stats)
                for family, columns in self._components]
        table = np.zeros(PRODUCT_HEADER + PRODUCT_ENTRY * count)
        position = table.size
        column_offsets = []
        for _, columns, _, _ in subs:
            column_offsets.append(position)
            position += columns.size
        param_offsets = []
        for _, _, params, _ in subs:
            param_offsets.append(position)
            position += params.size
        scratch = position
        stat_offset = 0
        for i, (family, columns, params, empty) in enumerate(subs):
            entry = PRODUCT_HEADER + PRODUCT_ENTRY * i
            table[entry:entry + PRODUCT_ENTRY] = [
                family.family_id, columns.size, stat_offset, empty.size, param_offsets[i],
                params.size, column_offsets[i]]
            stat_offset += empty.size
        table[:PRODUCT_HEADER] = [count, self._data_dim, scratch]
        packed = np.concatenate(
            [table, *[columns.astype(np.float64) for _, columns, _, _ in subs],
             *[params for _, _, params, _ in subs],
             np.zeros(max(columns.size for _, columns in self._components))])
        empty = np.concatenate([empty for _, _, _, empty in subs])
        return np.ascontiguousarray(packed), np.ascontiguousarray(empty)

    # ------------------------------------------------------------ public API
    @property
    def cluster_columns(self) -> np.ndarray:
        """Each sub-family's cluster columns, shifted to its place in the product row."""
        self._require_ready()
        parts, offset = [], 0
        for family, _ in self._components:
            parts.append(family.cluster_columns + offset)
            offset += family.stat_dim
        return np.concatenate(parts)

    @property
    def components(self) -> list[tuple[ComponentFamily, np.ndarray]]:
        """The (family, columns) pairs, in order (families bound to their column count)."""
        return list(self._components)

    def split_hyperparameters(self, values: dict[str, Any]) -> list[dict[str, Any]]:
        """Split ``{"f{i}_name": value}`` into one dict per sub-family (names unprefixed)."""
        out: list[dict[str, Any]] = [{} for _ in self._components]
        for key, value in values.items():
            head, _, name = key.partition("_")
            index = int(head[1:]) if head[:1] == "f" and head[1:].isdigit() else -1
            if not 0 <= index < len(out) or not name:
                raise TypeError(f"ProductFamily: unknown hyperparameter {key!r}; expected "
                                f"names like 'f0_mu0' (sub-family index, then the name)")
            out[index][name] = value
        return out

    def with_values(self, **values: Any) -> ProductFamily:
        """Numeric copy with some (prefixed, e.g. ``f0_mu0``) hyperparameters replaced."""
        per_family = self.split_hyperparameters(values)
        return ProductFamily([(family.with_values(**new), columns)
                              for (family, columns), new in zip(self._components, per_family,
                                                                strict=True)])

    def _check_data_domain(self, x2d: np.ndarray) -> None:
        for family, columns in self._components:
            if family.is_numeric:
                family.prepare_data(x2d[:, columns])
            else:
                family.check_data_symbolic(x2d[:, columns])

    def log_marginal_graph(self, graph, hyperparameters, x2d):
        """Sum of the sub-families' graphs on their columns (domain conditions of all)."""
        pt = graph.pt
        per_slot, conditions = 0.0, []
        for sub_hyper, (sub, columns) in zip(self.split_hyperparameters(hyperparameters),
                                             self._components, strict=True):
            sub_x = pt.specify_shape(x2d[:, columns], (x2d.type.shape[0], columns.size))
            sub_slot, sub_conditions = sub.log_marginal_graph(
                graph.restrict(columns), sub_hyper, sub_x)
            per_slot = per_slot + sub_slot
            conditions += sub_conditions
        return per_slot, conditions

    @classmethod
    def examples(cls, rng):
        """Continuous, categorical, binary and count columns, interleaved."""
        family = cls([
            (NormalInverseWishart(mu0=0.0, kappa0=0.5, nu0=4.0, psi0=np.eye(2)), [3, 0]),
            (DirichletCategorical(concentration=[[1.0, 2.0, 0.5]], n_categories=3), [1]),
            (BetaBernoulli(a=0.5, b=1.5), [2, 4]),
            (GammaPoisson(shape=2.0, rate=0.5), 5),
        ])
        n = 9
        data = np.c_[rng.normal(size=n), rng.integers(0, 3, n), rng.integers(0, 2, n),
                     rng.normal(size=n), rng.integers(0, 2, n), rng.poisson(3.0, n)]
        return [("product", family, data)]

    def _parameter_shapes(self):
        return {_prefix(i) + name: shape for i, (family, _) in enumerate(self._components)
                for name, shape in family.parameter_shapes().items()}

    def _sample_parameters(self, rng, x2d):
        out = {}
        for i, (family, columns) in enumerate(self._components):
            for name, value in family.sample_parameters(rng, x2d[:, columns]).items():
                out[_prefix(i) + name] = value
        return out

    def _sample_observations(self, rng, parameters, size):
        out = np.empty((size, self._data_dim))
        for i, (family, columns) in enumerate(self._components):
            prefix = _prefix(i)
            own = {key[len(prefix):]: value for key, value in parameters.items()
                   if key.startswith(prefix)}
            out[:, columns] = family.sample_observations(rng, own, size)
        return out

    def __repr__(self) -> str:
        inner = ", ".join(f"({family!r}, {columns.tolist()})"
                          for family, columns in self._components)
        return f"ProductFamily([{inner}])"


def _reference(sub: ComponentFamily):
    """The module of a sub-family (its ``reference_*`` functions)."""
    return importlib.import_module(type(sub).__module__)


def reference_log_marginal(family: ProductFamily, x2d: np.ndarray) -> float:
    """Sum of the sub-families' plain references on their columns (no numba)."""
    x2d = np.asarray(x2d, dtype=np.float64).reshape(-1, family.data_dim)
    return float(sum(_reference(sub).reference_log_marginal(sub, x2d[:, columns])
                     for sub, columns in family.components))


def reference_log_predictive(family: ProductFamily, x_row, x2d: np.ndarray) -> float:
    """Sum of the sub-families' plain reference predictives on their columns."""
    x2d = np.asarray(x2d, dtype=np.float64).reshape(-1, family.data_dim)
    x_row = np.reshape(x_row, -1)
    return float(sum(_reference(sub).reference_log_predictive(sub, x_row[columns],
                                                              x2d[:, columns])
                     for sub, columns in family.components))
