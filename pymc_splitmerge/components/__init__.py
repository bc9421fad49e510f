"""Conjugate component families (parameters integrated out) and their numba core.

One module per family (``docs/contracts.md``, "Adding a family"), listed in the one table
:mod:`pymc_splitmerge.components.registry` (numeric id, name, class); every registered class
is exported here under its own name, from that table.  See
:mod:`pymc_splitmerge.components.base` for the Python interface and
:mod:`pymc_splitmerge.components.dispatch` for the numba functions the kernels call.
"""

from pymc_splitmerge.components import dispatch, registry
from pymc_splitmerge.components.base import ComponentFamily
from pymc_splitmerge.components.registry import FAMILIES

FAMILY_CLASSES = {entry.family_class.__name__: entry.family_class for entry in FAMILIES}
"""Every registered family class by class name (what this package exports)."""

globals().update(FAMILY_CLASSES)

__all__ = [
    "FAMILIES",
    "FAMILY_CLASSES",
    "ComponentFamily",
    "dispatch",
    "registry",
]
__all__ += list(FAMILY_CLASSES)
