"""Names of a package that load on first use (PEP 562), one implementation for every package.

A package lists the names to load late and where each lives; :func:`lazy_names` returns the
module-level ``__getattr__`` and ``__dir__`` it assigns::

    __getattr__, __dir__ = lazy_names(__name__, globals(), {"PGSMStep": "pgsm"})

``package.PGSMStep`` then imports ``package.pgsm`` on first use and binds the name in the
package (later look-ups do not reach ``__getattr__``); ``dir(package)`` lists it before.
Used where importing a submodule costs time a user who does not need it should not pay
(numba kernels, plots, scipy's optimisers): ``pymc_splitmerge``, ``analysis``, ``steps``,
``sampling``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(package: str, namespace: dict[str, Any],
               where: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list]]:
    """``(__getattr__, __dir__)`` for the package ``package`` (its ``__name__``) whose
    globals are ``namespace``.

    ``where[name]`` is the submodule, relative to the package, that defines ``name``; when it
    is ``name`` itself the name is that submodule (``{"testing": "testing"}``).  A name not
    in ``where`` raises the usual ``AttributeError``.
    """

    def __getattr__(name: str) -> Any:
        submodule = where.get(name)
        if submodule is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(f"{package}.{submodule}")
        value = module if submodule == name else getattr(module, name)
        namespace[name] = value  # later look-ups skip __getattr__
        return value

    def __dir__() -> list:
        return sorted({*namespace, *where})

    return __getattr__, __dir__
