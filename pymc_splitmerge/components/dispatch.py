"""Numba dispatch over the conjugate component families: the functions every kernel calls.

Every function here is ``@njit(cache=True)`` and takes the integer ``family_id`` (the
``family_id`` class attribute of each
:class:`~pymc_splitmerge.components.base.ComponentFamily`, assigned by
:mod:`pymc_splitmerge.components.registry`) first.  ``params`` is the family's packed constants (``family.params``), a
statistics row is a float64 array of shape (stat_dim,) and an observation ``x_row`` a
prepared data row of shape (data_dim,).

Some families (Normal-Inverse-Wishart, products) use a scratch tail of ``params``: calls
that share one params array must not run concurrently in several threads.

Functions
---------
add_point(family_id, params, stats_row, x_row)        in place
remove_point(family_id, params, stats_row, x_row)     in place; handles loss of definiteness
add_point_at(family_id, params, stats, slot, x, i)    add_point on stats[slot], x[i], no views
remove_point_at(family_id, params, stats, slot, x, i) remove_point likewise
log_predictive(family_id, params, stats_row, x_row)   -> float
log_marginal(family_id, params, stats_row)            -> float, 0.0 for an empty row
log_predictive_many(family_id, params, stats, slots, n_slots, x_row, out)
stats_from_rows(family_id, params, empty_row, x2d, index) -> new statistics row

No family appears here by name but ``ProductFamily`` (``FAMILY_PRODUCT``), the combinator:
its numba functions (in :mod:`pymc_splitmerge.components.product`) loop over the
sub-families through the *leaf* switches, which are generated from the registry into
:mod:`pymc_splitmerge.components._leaf_dispatch` (rewritten at import when out of date, see
:mod:`pymc_splitmerge.components.registry`).

Per-family specialisation: a registered family's ``family_id`` is a :class:`FamilyId` (an
``int`` that numba types as a literal, ``Literal[int](id)``), so a kernel called from Python
with it is compiled for that family alone: each function below selects the family's own
numba leaves at compile time (an ``@overload`` on the literal id) instead of compiling the
switch over every family.  A first run therefore compiles one family's code, not nine
(``benchmarks/cold_start.py``).  Called with a plain integer (or an id computed at run time,
as ``ProductFamily`` does for its sub-families), they fall back to the switch.

Note on numba caching: a cached function is only invalidated when *its own* source file
changes; after editing a family module, clear ``__pycache__`` (``*.nbi``/``*.nbc``) of this
package and of the kernels.
"""

from __future__ import annotations

from numba import types
from numba.core import errors, typing
from numba.core.datamodel import models
from numba.extending import intrinsic, overload, register_model, typeof_impl

from pymc_splitmerge.components._leaf_dispatch import (
    FAMILY_PRODUCT,
    leaf_add_point,
    leaf_add_point_at,
    leaf_log_marginal,
    leaf_log_predictive,
    leaf_log_predictive_many,
    leaf_remove_point,
    leaf_remove_point_at,
)
from pymc_splitmerge.components.product import (
    PRODUCT_ENTRY,
    PRODUCT_HEADER,
    product_add_point,
    product_log_marginal,
    product_log_predictive,
    product_remove_point,
)
from pymc_splitmerge.core.jit import njit

__all__ = [
    "FAMILY_PRODUCT",
    "PRODUCT_ENTRY",
    "PRODUCT_HEADER",
    "FamilyId",
    "FamilyLiteral",
    "add_point",
    "add_point_at",
    "leaf_add_point",
    "leaf_add_point_at",
    "leaf_log_marginal",
    "leaf_log_predictive",
    "leaf_log_predictive_many",
    "leaf_remove_point",
    "leaf_remove_point_at",
    "log_marginal",
    "log_predictive",
    "log_predictive_many",
    "remove_point",
    "remove_point_at",
    "stats_from_rows",
]


class FamilyId(int):
    """A family's integer id, typed by numba as a literal (``Literal[int](id)``).

    The registry gives every registered family class a ``family_id`` of this type.  Passed
    to a kernel from Python, it makes numba compile that kernel for this family only (the
    functions of this module pick the family's leaves when they are compiled); a plain
    ``int`` gives the same results through the switch over every family.

    ``dimension`` (0: any) names a data dimension for which the family has leaves of its
    own (``ComponentFamily.numba_leaves_by_dimension``): a family bound to such data carries
    ``FamilyId(id, dimension)``, which numba types as a :class:`FamilyLiteral`, so a kernel
    given it compiles the leaves of that dimension alone.  As an integer it is the family's
    id (the run-time switch, the ids stored in ``ProductFamily`` params).
    """

    def __new__(cls, value, dimension=0):
        self = super().__new__(cls, value)
        self.dimension = int(dimension)
        return self

    def __repr__(self) -> str:
        return int.__repr__(self)

    def __reduce__(self):
        return FamilyId, (int(self), self.dimension)


class FamilyLiteral(types.IntegerLiteral):
    """numba type of a :class:`FamilyId` with a ``dimension``: the literal id (its value, as
    ``Literal[int](id)``) and the dimension whose leaves the dispatch functions select."""

    def __init__(self, value, dimension):
        self.dimension = dimension
        super().__init__(value)
        self.name = f"Literal[int]({value}, dimension {dimension})"


register_model(FamilyLiteral)(models.IntegerModel)  # an integer, as its base literal

_LITERAL_TYPES: dict[tuple[int, int], types.Type] = {}


@typeof_impl.register(FamilyId)
def _typeof_family_id(value, context):
    # memoised: numba calls this on every Python call of a kernel (a new literal type each
    # time would cost ~30 us per call)
    key = (int(value), value.dimension)
    literal = _LITERAL_TYPES.get(key)
    if literal is None:
        literal = _LITERAL_TYPES[key] = (FamilyLiteral(*key) if key[1]
                                         else types.literal(key[0]))
    return literal


class _ProductLeaves:
    add_point = product_add_point
    remove_point = product_remove_point
    log_predictive = product_log_predictive
    log_marginal = product_log_marginal
    log_predictive_many = None
    add_point_at = None
    remove_point_at = None


def _leaves_of(family_id):
    """The numba leaves of a literal family id type, or None for a run-time id (switch)."""
    if not isinstance(family_id, types.IntegerLiteral):
        return None
    value = family_id.literal_value
    if value == FAMILY_PRODUCT:
        return _ProductLeaves
    # imported here: the registry imports every family module, which import this one
    from pymc_splitmerge.components.registry import FAMILIES

    for entry in FAMILIES:
        if entry.family_id == value:
            dimension = getattr(family_id, "dimension", 0)
            if dimension:
                return entry.family_class.numba_leaves_by_dimension[dimension]
            return entry.family_class.numba_leaves
    raise errors.TypingError(f"unknown family_id {value}")


# The three optional forms (a batch predictive, slot-index updates): each stub below is typed
# by its @overload, the family's leaf (or its row form) for a literal id (prefer_literal: numba
# offers the literal type first), the switch otherwise.  They are the fallback of the direct
# calls (``_resolve_direct`` below), which reach a family's leaf without them when it has the
# form asked for.
def _log_predictive_many(family_id, params, stats, slots, n_slots, x_row, out):
    raise NotImplementedError  # numba only


def _add_point_at(family_id, params, stats, slot, x, i):
    raise NotImplementedError  # numba only


def _remove_point_at(family_id, params, stats, slot, x, i):
    raise NotImplementedError  # numba only


_SELECT = {"prefer_literal": True}


# The switches over every family for a run-time id (a plain ``int``, or an id computed at run
# time, as ``ProductFamily`` does for its sub-families).  A literal id never reaches them:
# every family has these four leaves, which ``_resolve_direct`` calls directly.
@njit(cache=True)
def _add_point(family_id, params, stats_row, x_row):
    if family_id == FAMILY_PRODUCT:
        product_add_point(params, stats_row, x_row)
    else:
        leaf_add_point(family_id, params, stats_row, x_row)


@njit(cache=True)
def _remove_point(family_id, params, stats_row, x_row):
    if family_id == FAMILY_PRODUCT:
        product_remove_point(params, stats_row, x_row)
    else:
        leaf_remove_point(family_id, params, stats_row, x_row)


@njit(cache=True)
def _log_predictive(family_id, params, stats_row, x_row):
    if family_id == FAMILY_PRODUCT:
        return product_log_predictive(params, stats_row, x_row)
    return leaf_log_predictive(family_id, params, stats_row, x_row)


@njit(cache=True)
def _log_marginal(family_id, params, stats_row):
    if family_id == FAMILY_PRODUCT:
        return product_log_marginal(params, stats_row)
    return leaf_log_marginal(family_id, params, stats_row)


@overload(_log_predictive_many, **_SELECT)
def _log_predictive_many_typed(family_id, params, stats, slots, n_slots, x_row, out):
    leaves = _leaves_of(family_id)
    if leaves is None:
        def switch(family_id, params, stats, slots, n_slots, x_row, out):
            if family_id == FAMILY_PRODUCT:
                for j in range(n_slots):
                    out[j] = product_log_predictive(params, stats[slots[j]], x_row)
            else:
                leaf_log_predictive_many(family_id, params, stats, slots, n_slots, x_row, out)
        return switch
    many = leaves.log_predictive_many
    if many is not None:
        def batch(family_id, params, stats, slots, n_slots, x_row, out):
            many(params, stats, slots, n_slots, x_row, out)
        return batch
    single = leaves.log_predictive

    def loop(family_id, params, stats, slots, n_slots, x_row, out):
        for j in range(n_slots):
            out[j] = single(params, stats[slots[j]], x_row)
    return loop


@overload(_add_point_at, **_SELECT)
def _add_point_at_typed(family_id, params, stats, slot, x, i):
    leaves = _leaves_of(family_id)
    if leaves is None:
        def switch(family_id, params, stats, slot, x, i):
            if family_id == FAMILY_PRODUCT:
                product_add_point(params, stats[slot], x[i])
            else:
                leaf_add_point_at(family_id, params, stats, slot, x, i)
        return switch
    at_form, row_form = leaves.add_point_at, leaves.add_point
    if at_form is not None:
        return lambda family_id, params, stats, slot, x, i: at_form(params, stats, slot, x, i)
    return lambda family_id, params, stats, slot, x, i: row_form(params, stats[slot], x[i])


@overload(_remove_point_at, **_SELECT)
def _remove_point_at_typed(family_id, params, stats, slot, x, i):
    leaves = _leaves_of(family_id)
    if leaves is None:
        def switch(family_id, params, stats, slot, x, i):
            if family_id == FAMILY_PRODUCT:
                product_remove_point(params, stats[slot], x[i])
            else:
                leaf_remove_point_at(family_id, params, stats, slot, x, i)
        return switch
    at_form, row_form = leaves.remove_point_at, leaves.remove_point
    if at_form is not None:
        return lambda family_id, params, stats, slot, x, i: at_form(params, stats, slot, x, i)
    return lambda family_id, params, stats, slot, x, i: row_form(params, stats[slot], x[i])


def _resolve_direct(typingctx, leaf_name, fallback, family_id, args):
    """Typing of a direct call: the family's leaf ``leaf_name`` on ``args`` for a literal id
    whose family has it, else the overloaded stub ``fallback`` on ``(family_id, *args)``."""
    leaves = _leaves_of(family_id)
    leaf = getattr(leaves, leaf_name, None) if leaves is not None else None
    if leaf is not None:
        target, target_args, skip = leaf, args, 1
    else:
        target, target_args, skip = fallback, (family_id, *args), 0
    function_type = typingctx.resolve_value_type(target)
    signature = typingctx.resolve_function_type(function_type, target_args, {})
    if signature is None:
        raise errors.TypingError(f"{leaf_name}: no implementation for {target_args}")

    def codegen(context, builder, _signature, llvm_args):
        call = context.get_function(function_type, signature)
        return call(builder, llvm_args[skip:])

    return typing.signature(signature.return_type, family_id, *args), codegen


# The direct calls: a numba intrinsic per dispatch function, ``call(family_id, *args)`` is
# ``leaves.<name>(*args)`` of the literal id's family when it has that leaf, else the stub's
# overload above.  The leaf is called as a kernel calls any cached numba function (its compiled
# library linked in), with no function in between: every compiled level re-optimises and
# re-emits all the code below it (numba links callees' LLVM into each caller), so each level
# saved is one copy of the family's code less to compile per kernel.
@intrinsic(prefer_literal=True)
def _call_add_point(typingctx, family_id, params, stats_row, x_row):
    return _resolve_direct(typingctx, "add_point", _add_point, family_id,
                           (params, stats_row, x_row))


@intrinsic(prefer_literal=True)
def _call_remove_point(typingctx, family_id, params, stats_row, x_row):
    return _resolve_direct(typingctx, "remove_point", _remove_point, family_id,
                           (params, stats_row, x_row))


@intrinsic(prefer_literal=True)
def _call_log_predictive(typingctx, family_id, params, stats_row, x_row):
    return _resolve_direct(typingctx, "log_predictive", _log_predictive, family_id,
                           (params, stats_row, x_row))


@intrinsic(prefer_literal=True)
def _call_log_marginal(typingctx, family_id, params, stats_row):
    return _resolve_direct(typingctx, "log_marginal", _log_marginal, family_id,
                           (params, stats_row))


@intrinsic(prefer_literal=True)
def _call_log_predictive_many(typingctx, family_id, params, stats, slots, n_slots, x_row, out):
    return _resolve_direct(typingctx, "log_predictive_many", _log_predictive_many, family_id,
                           (params, stats, slots, n_slots, x_row, out))


@intrinsic(prefer_literal=True)
def _call_add_point_at(typingctx, family_id, params, stats, slot, x, i):
    return _resolve_direct(typingctx, "add_point_at", _add_point_at, family_id,
                           (params, stats, slot, x, i))


@intrinsic(prefer_literal=True)
def _call_remove_point_at(typingctx, family_id, params, stats, slot, x, i):
    return _resolve_direct(typingctx, "remove_point_at", _remove_point_at, family_id,
                           (params, stats, slot, x, i))


@njit(cache=True, inline="always")
def log_predictive_many(family_id, params, stats, slots, n_slots, x_row, out):
    """Predictive of one observation for several clusters.

    The kernels' hot loop: prefer it to ``n_slots`` calls of :func:`log_predictive`, which
    each create a row view (two atomic reference-count updates, more than a cached
    low-dimensional predictive costs); families with a view-free batch leaf use it.

    Parameters
    ----------
    family_id : int
    params : ndarray of float64, shape (n_params,)
    stats : ndarray of float64, shape (capacity, stat_dim)
    slots : ndarray of int64, shape (>= n_slots,)
        Cluster slots (rows of ``stats``).
    n_slots : int
    x_row : ndarray of float64, shape (data_dim,)
    out : ndarray of float64, shape (>= n_slots,)
        Receives ``out[j] = log p(x_row | cluster slots[j])`` for ``j < n_slots``.
    """
    _call_log_predictive_many(family_id, params, stats, slots, n_slots, x_row, out)


@njit(cache=True)
def stats_from_rows(family_id, params, empty_row, x2d, index):
    """Statistics row of the observations ``x2d[index]`` (a new array).

    Parameters
    ----------
    empty_row : ndarray of float64, shape (stat_dim,)
        ``family.empty_stats``.
    x2d : ndarray of float64, shape (n, data_dim)
    index : ndarray of int64, shape (m,)
    """
    row = empty_row.copy()
    for i in index:
        add_point(family_id, params, row, x2d[i])
    return row


# ------------------------------------------------------------------ top level
@njit(cache=True, inline="always")
def add_point(family_id, params, stats_row, x_row):
    """Add the observation ``x_row`` to the statistics row ``stats_row`` (in place)."""
    _call_add_point(family_id, params, stats_row, x_row)


@njit(cache=True, inline="always")
def remove_point(family_id, params, stats_row, x_row):
    """Remove the observation ``x_row`` from ``stats_row`` (in place).

    Removing the last point restores the empty row exactly; the Normal-Inverse-Wishart
    family recomputes its Cholesky factor from the raw sums when a downdate loses
    definiteness.
    """
    _call_remove_point(family_id, params, stats_row, x_row)


@njit(cache=True, inline="always")
def log_predictive(family_id, params, stats_row, x_row):
    """Log posterior predictive of ``x_row`` given a cluster's statistics row."""
    return _call_log_predictive(family_id, params, stats_row, x_row)


@njit(cache=True, inline="always")
def log_marginal(family_id, params, stats_row):
    """Log marginal likelihood of a cluster from its statistics row (0.0 when empty)."""
    return _call_log_marginal(family_id, params, stats_row)


@njit(cache=True, inline="always")
def add_point_at(family_id, params, stats, slot, x, i):
    """:func:`add_point` of ``x[i]`` to ``stats[slot]``, without the two row views.

    Same result bit for bit.  For the kernels' hot loops: a row view costs two atomic
    reference-count updates, which is a good part of a low-dimensional update; families
    with a slot-index leaf (``NumbaLeaves.add_point_at``) use it, the others (and
    ``ProductFamily``) their row leaf on views.

    Parameters
    ----------
    family_id : int
    params : ndarray of float64, shape (n_params,)
    stats : ndarray of float64, shape (capacity, stat_dim)
    slot : int
        Row of ``stats`` (the cluster).
    x : ndarray of float64, shape (n, data_dim)
        Prepared data.
    i : int
        Row of ``x`` (the point).
    """
    _call_add_point_at(family_id, params, stats, slot, x, i)


@njit(cache=True, inline="always")
def remove_point_at(family_id, params, stats, slot, x, i):
    """:func:`remove_point` of ``x[i]`` from ``stats[slot]``, without the two row views
    (same result bit for bit; see :func:`add_point_at`)."""
    _call_remove_point_at(family_id, params, stats, slot, x, i)
