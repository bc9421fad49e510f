"""Validation of kernel options, shared by the ``build_*`` functions and the step adapters.

Every ``build_*`` function of ``kernels`` validates its options once with these helpers and
returns the transition; the PyMC adapters in ``steps/`` call the same builders, so an option
is checked (and its error message worded) in one place.
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = ["OptionTypeError", "non_negative_integer", "positive_integer"]


class OptionTypeError(TypeError, ValueError):
    """An option of the wrong type (e.g. ``1.5`` or ``"1"`` for a count).

    Both a ``TypeError`` (the wrong type) and a ``ValueError`` (an invalid option value), so
    that a caller may catch either.
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
