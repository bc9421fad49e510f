"""The one table of component families: numeric id, name and class.

Everything that must know every family reads :data:`FAMILIES`:

* the numba switch :mod:`pymc_splitmerge.components._leaf_dispatch` is *generated* from it
  (and from each class's ``numba_leaves``) by the developer command ``python -m
  pymc_splitmerge.components`` (:func:`write_leaf_dispatch`); importing never writes it, and
  ``tests/test_family_contract.py`` fails, naming the command, while the committed file differs
  from :func:`leaf_dispatch_source`;
* the package's exports: :mod:`pymc_splitmerge.components` and :mod:`pymc_splitmerge`
  export every registered class under its own name (no hand-kept list);
* :mod:`pymc_splitmerge.distributions.mixture` calls the family's own
  ``log_marginal_graph`` and ``sample_data``; :mod:`pymc_splitmerge.testing.geweke` its
  ``sample_data``;
* the generic contract tests (``tests/test_family_contract.py``) run on the ``examples`` of
  every registered class.

Why generated code: the run-time switch must serve every family, and numba caches a
function (``cache=True``) keyed on its own source file only, so the switch has to be static
source text that changes when the table changes (a switch built at import time could not
be cached, or would keep a stale cache when a family is added); the generated ``if/elif``
chain is the same code as the hand-written one it replaces, at the same speed
(``benchmarks/components.py``).

Adding a family (``docs/contracts.md``, "Adding a family"): write its module and add one
line to :data:`FAMILIES` (a new id, never reuse one: the ids are stored in ``ProductFamily``
params); run ``python -m pymc_splitmerge.components``, delete the numba caches
(``find . -name "*.nb[ic]" -delete``) and commit the regenerated ``_leaf_dispatch.py``.  Until
then the new family's id is refused by the switch ("unknown family_id").

The registry assigns ``family_id`` to each class (the ids live here only), as a
:class:`~pymc_splitmerge.components.dispatch.FamilyId` (numba types it as a literal, so a
kernel is compiled for the one family it is given); a
:class:`~pymc_splitmerge.components.base.ComponentFamily` subclass that is not registered
keeps ``family_id = -1``, which the numba core refuses.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

from pymc_splitmerge.components.base import ComponentFamily
from pymc_splitmerge.components.beta_bernoulli import BetaBernoulli
from pymc_splitmerge.components.dirichlet_categorical import DirichletCategorical
from pymc_splitmerge.components.dispatch import FamilyId
from pymc_splitmerge.components.gamma_poisson import GammaPoisson
from pymc_splitmerge.components.grid import GridComponent
from pymc_splitmerge.components.normal_inverse_gamma import NormalInverseGamma
from pymc_splitmerge.components.normal_inverse_wishart import NormalInverseWishart
from pymc_splitmerge.components.normal_known_covariance import NormalKnownCovariance
from pymc_splitmerge.components.normal_linear_regression import NormalLinearRegression
from pymc_splitmerge.components.product import ProductFamily

__all__ = [
    "FAMILIES",
    "LEAF_DISPATCH_PATH",
    "FamilyEntry",
    "entry_for",
    "leaf_dispatch_source",
    "write_leaf_dispatch",
]


@dataclass(frozen=True)
class FamilyEntry:
    """One registered family.

    Attributes
    ----------
    family_id : int
        The integer the numba core switches on (stored in params of products: never reuse).
    name : str
        Snake-case name; ``FAMILY_<NAME>`` is the constant of the generated switch.
    family_class : type
        The :class:`ComponentFamily` subclass.
    """

    family_id: int
    name: str
    family_class: type

    @property
    def constant(self) -> str:
        """Name of the id constant in the generated switch, e.g. ``FAMILY_GAMMA_POISSON``."""
        return "FAMILY_" + self.name.upper()

    @property
    def is_leaf(self) -> bool:
        """Whether the class has its own numba leaves (all but ``ProductFamily``)."""
        return self.family_class.numba_leaves is not None


FAMILIES: tuple[FamilyEntry, ...] = (
    FamilyEntry(0, "normal_inverse_wishart", NormalInverseWishart),
    FamilyEntry(1, "normal_known_covariance", NormalKnownCovariance),
    FamilyEntry(2, "normal_inverse_gamma", NormalInverseGamma),
    FamilyEntry(3, "beta_bernoulli", BetaBernoulli),
    FamilyEntry(4, "dirichlet_categorical", DirichletCategorical),
    FamilyEntry(5, "gamma_poisson", GammaPoisson),
    FamilyEntry(6, "grid", GridComponent),
    FamilyEntry(7, "product", ProductFamily),
    FamilyEntry(8, "normal_linear_regression", NormalLinearRegression),
)
"""Every family, in the order of the generated ``if/elif`` chains (most used first)."""


def _register(entries: tuple[FamilyEntry, ...]) -> None:
    ids = [entry.family_id for entry in entries]
    names = [entry.name for entry in entries]
    classes = [entry.family_class for entry in entries]
    for label, values in (("id", ids), ("name", names), ("class", classes)):
        if len(set(values)) != len(values):
            raise RuntimeError(f"components.registry: a family {label} is registered twice")
    for entry in entries:
        if not (isinstance(entry.family_class, type)
                and issubclass(entry.family_class, ComponentFamily)):
            raise TypeError(f"components.registry: {entry.family_class!r} is not a "
                            "ComponentFamily subclass")
        if not entry.name.isidentifier() or entry.name != entry.name.lower():
            raise RuntimeError(f"components.registry: bad family name {entry.name!r}")
        # set on the class itself (not inherited): a subclass of a registered family keeps
        # its parent's id, which is right, since it has the same numba leaves; a FamilyId, so
        # that a kernel given it is compiled for this family only (components.dispatch)
        entry.family_class.family_id = FamilyId(entry.family_id)


_register(FAMILIES)


def entry_for(family: ComponentFamily | type) -> FamilyEntry:
    """Registry entry of a family instance or class (``KeyError`` if not registered)."""
    cls = family if isinstance(family, type) else type(family)
    for entry in FAMILIES:
        if entry.family_class is cls:
            return entry
    for entry in FAMILIES:  # a subclass of a registered family
        if issubclass(cls, entry.family_class):
            return entry
    raise KeyError(f"{cls.__name__} is not registered in pymc_splitmerge.components.registry")


# ------------------------------------------------------------------ generated numba switch
LEAF_DISPATCH_PATH = Path(__file__).with_name("_leaf_dispatch.py")
"""The generated file (:func:`write_leaf_dispatch`)."""

_HEADER = '''"""Numba switch over the elementary component families.  GENERATED FILE: do not edit.

Written by ``python -m pymc_splitmerge.components`` from the table of
:mod:`pymc_splitmerge.components.registry` and each family's ``numba_leaves``;
``tests/test_family_contract.py`` fails while this file differs from the generated text.

Every function is ``@njit(cache=True)`` and switches on the integer ``family_id`` (the
``FAMILY_*`` constants below), at run time: compiling one compiles every family.  They serve
ids known only at run time (``ProductFamily``'s sub-families, a plain ``int``);
:mod:`pymc_splitmerge.components.dispatch` compiles a kernel given a registered family's
``FamilyId`` for that family alone, and adds ``ProductFamily`` on top.
"""

'''

_SWITCHES = (
    # (function, signature, leaf field, returns a value, docstring)
    ("leaf_add_point", "family_id, params, stats_row, x_row", "add_point", False,
     "Add ``x_row`` to ``stats_row`` (in place)."),
    ("leaf_remove_point", "family_id, params, stats_row, x_row", "remove_point", False,
     "Remove ``x_row`` from ``stats_row`` (in place; exact reset when emptied)."),
    ("leaf_log_predictive", "family_id, params, stats_row, x_row", "log_predictive", True,
     "Log posterior predictive of ``x_row`` given a cluster's statistics row."),
    ("leaf_log_marginal", "family_id, params, stats_row", "log_marginal", True,
     "Log marginal likelihood of a cluster from its statistics row (0.0 when empty)."),
)


_SLOT_SWITCHES = (
    # (function, slot-index leaf field, row switch of the fallback, docstring lines)
    ("leaf_add_point_at", "add_point_at", "leaf_add_point",
     ("``leaf_add_point(family_id, params, stats[slot], x[i])`` without the row views.",
      "Families with an ``add_point_at`` leaf run it here (inlined, numba IR, into",
      "``dispatch.add_point_at``); the others go through ``leaf_add_point`` on views, which",
      "for them is faster than an inlined call of their row leaf.")),
    ("leaf_remove_point_at", "remove_point_at", "leaf_remove_point",
     ("``leaf_remove_point(family_id, params, stats[slot], x[i])`` without the row views.",
      "Families with a ``remove_point_at`` leaf run it here (inlined, numba IR, into",
      "``dispatch.remove_point_at``); the others go through ``leaf_remove_point`` on views.")),
)


def _call_arguments(signature: str) -> str:
    return signature.split(", ", 1)[1]


def leaf_dispatch_source(entries: tuple[FamilyEntry, ...] = FAMILIES) -> str:
    """Source text of :mod:`pymc_splitmerge.components._leaf_dispatch` for ``entries``."""
    leaves = [entry for entry in entries if entry.is_leaf]
    imports: dict[str, set[str]] = {}
    for entry in leaves:
        for function in entry.family_class.numba_leaves:
            if function is None:
                continue
            python_function = getattr(function, "py_func", function)
            imports.setdefault(python_function.__module__, set()).add(python_function.__name__)
    lines = [_HEADER.rstrip("\n"), ""]
    imports.setdefault("pymc_splitmerge.core.jit", set()).add("njit")
    for module in sorted(imports):
        if len(imports[module]) == 1:
            lines.append(f"from {module} import {next(iter(imports[module]))}")
            continue
        lines.append(f"from {module} import (")
        lines.extend(f"    {name}," for name in sorted(imports[module]))
        lines.append(")")
    exported = sorted(entry.constant for entry in entries) + sorted(
        [name for name, *_ in _SWITCHES] + ["leaf_log_predictive_many"]
        + [name for name, *_ in _SLOT_SWITCHES])
    lines += ["", "__all__ = ["] + [f'    "{name}",' for name in exported] + ["]", ""]
    for entry in entries:
        lines.append(f"{entry.constant} = {entry.family_id}")
    for name, signature, field, returns, doc in _SWITCHES:
        # the single predictive is inlined (numba IR) into dispatch.log_predictive and the
        # product's loop: one call level with four array arguments less, 10-12 ns per call
        # (benchmarks/components.py), which the restricted scans pay twice per point
        decorator = ('@njit(cache=True, inline="always")' if name == "leaf_log_predictive"
                     else "@njit(cache=True)")
        lines += ["", "", decorator, f"def {name}({signature}):", f'    """{doc}"""']
        for index, entry in enumerate(leaves):
            keyword = "if" if index == 0 else "elif"
            function = getattr(entry.family_class.numba_leaves, field)
            call = f"{function.py_func.__name__}({_call_arguments(signature)})"
            lines.append(f"    {keyword} family_id == {entry.constant}:")
            lines.append(f"        {'return ' if returns else ''}{call}")
        lines += ["    else:", '        raise ValueError("unknown family_id")']
    # inlined into dispatch.log_predictive_many (the kernels' hot loop): a call boundary
    # there costs reference-count updates of its five array arguments on every call
    lines += ["", "", '@njit(cache=True, inline="always")',
              ("def leaf_log_predictive_many(family_id, params, stats, slots, n_slots, x_row, "
               "out):"),
              '    """Predictive of ``x_row`` for the clusters ``slots[:n_slots]`` (into ``out``).',
              "",
              "    A family's own ``log_predictive_many`` leaf when it has one (view-free), else a",
              "    loop over its ``log_predictive``.  Inlined (numba IR) into its caller",
              "    ``dispatch.log_predictive_many``, the kernels' hot loop.",
              '    """']
    for index, entry in enumerate(leaves):
        keyword = "if" if index == 0 else "elif"
        lines.append(f"    {keyword} family_id == {entry.constant}:")
        many = entry.family_class.numba_leaves.log_predictive_many
        if many is not None:
            lines.append(f"        {many.py_func.__name__}(params, stats, slots, n_slots, x_row, "
                         "out)")
        else:
            single = entry.family_class.numba_leaves.log_predictive.py_func.__name__
            lines.append("        for j in range(n_slots):")
            lines.append(f"            out[j] = {single}(params, stats[slots[j]], x_row)")
    lines += ["    else:", '        raise ValueError("unknown family_id")']
    # slot-index forms: inlined into dispatch.add_point_at / remove_point_at (called once per
    # point move by the kernels); a family without its own falls back to the row leaf
    for name, field, row_switch, doc in _SLOT_SWITCHES:
        lines += ["", "", '@njit(cache=True, inline="always")',
                  f"def {name}(family_id, params, stats, slot, x, i):"]
        lines += [f'    """{doc[0]}', ""] + [f"    {line}" for line in doc[1:]] + ['    """']
        keyword = "if"
        for entry in leaves:
            at_form = getattr(entry.family_class.numba_leaves, field)
            if at_form is not None:
                lines.append(f"    {keyword} family_id == {entry.constant}:")
                lines.append(f"        {at_form.py_func.__name__}(params, stats, slot, x, i)")
                keyword = "elif"
        call = f"{row_switch}(family_id, params, stats[slot], x[i])"
        if keyword == "if":
            lines.append(f"    {call}")
        else:
            lines += ["    else:", f"        {call}"]
    lines.append("")
    return "\n".join(lines)


def write_leaf_dispatch(path: Path = LEAF_DISPATCH_PATH) -> bool:
    """Rewrite the generated switch; return whether the file changed.

    Delete the numba caches afterwards (``find . -name "*.nb[ic]" -delete``): the kernels'
    caches hold the old switch.
    """
    source = leaf_dispatch_source()
    path = Path(path)
    if path.exists() and path.read_text() == source:
        return False
    # write then rename: a process importing the package meanwhile never reads half a file
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    partial.write_text(source)
    os.replace(partial, path)
    # the bytecode cache is keyed on the source's mtime (whole seconds) and size: drop it
    Path(importlib.util.cache_from_source(str(path))).unlink(missing_ok=True)
    return True
