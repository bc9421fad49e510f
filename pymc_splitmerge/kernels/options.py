"""Validation of kernel options, shared by the ``build_*`` functions and the step adapters.

Every ``build_*`` function of ``kernels`` validates its options once with these helpers and
returns the transition; the PyMC adapters in ``steps/`` call the same builders, so an option
is checked (and its error message worded) in one place.
"""

from __future__ import annotations

import functools
import numbers
import warnings

import numpy as np

__all__ = ["OptionTypeError", "non_negative_integer", "positive_integer", "renamed_keyword"]


class OptionTypeError(TypeError, ValueError):
    """An option of the wrong type (e.g. ``1.5`` or ``"1"`` for a count).

    Both a ``TypeError`` and a ``ValueError``: callers written against either (the kernels
    used to raise ``ValueError``, the step adapters ``TypeError``) keep working.
    """


def _integer(value, name: str, minimum: int) -> int:
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Integral):
        raise OptionTypeError(f"{name} must be an integer >= {minimum}; got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value}")
    return int(value)


def non_negative_integer(value, name: str) -> int:
    """``value`` as an ``int`` >= 0; ``TypeError`` / ``ValueError`` naming ``name``."""
    return _integer(value, name, 0)


def positive_integer(value, name: str) -> int:
    """``value`` as an ``int`` >= 1; ``TypeError`` / ``ValueError`` naming ``name``."""
    return _integer(value, name, 1)


def renamed_keyword(new_value, old_value, new_name: str, old_name: str, default,
                    stacklevel: int = 3):
    """Resolve a keyword renamed from ``old_name`` to ``new_name``.

    ``new_value`` / ``old_value`` are ``None`` when not given.  The old name still works with
    a ``DeprecationWarning``; giving both is a ``TypeError``; ``default`` is used when neither
    is given.
    """
    if old_value is not None:
        if new_value is not None:
            raise TypeError(f"give {new_name} only ({old_name} is its deprecated old name)")
        warnings.warn(f"{old_name} is deprecated; use {new_name} (same meaning)",
                      DeprecationWarning, stacklevel=stacklevel)
        return old_value
    return default if new_value is None else new_value


def deprecated_alias(function, old_name: str):
    """``function`` under its deprecated old name ``old_name`` (a ``DeprecationWarning`` per call).

    One entry-point name per kernel (issue 11): the old ``*_step`` names of the kernel moves
    stay importable through this wrapper.
    """
    new_name = function.__name__

    @functools.wraps(function)
    def alias(*args, **kwargs):
        warnings.warn(f"{old_name} is deprecated; use {new_name} (same arguments)",
                      DeprecationWarning, stacklevel=2)
        return function(*args, **kwargs)

    alias.__name__ = alias.__qualname__ = old_name
    alias.__doc__ = f"Deprecated name of :func:`{new_name}` (same arguments)."
    return alias
