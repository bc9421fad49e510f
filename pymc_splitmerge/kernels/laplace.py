r"""Gaussian (Laplace) approximations of a smooth log density, for independence proposals.

:func:`laplace_fit` takes Newton steps on a log density :math:`f` from a start :math:`x_0`
(Hessians by forward differences of the gradient, made positive definite, each step halved
until :math:`f` does not decrease) and returns the Gaussian

.. math::

    g = \mathcal{N}\big(x_m,\; s^2 P^{-1}\big), \qquad P = -\nabla^2 f(x_{m-1}),

with :math:`x_m` the last Newton iterate and :math:`s` an inflation of the scale.  The fit
is a deterministic function of :math:`f` and :math:`x_0` (no random numbers), so a
Metropolis–Hastings move that proposes from :math:`g(\cdot \mid c')` can evaluate its reverse
proposal density :math:`g(\cdot \mid c)` exactly.  The Newton steps only make :math:`g`
better; any number of them (even none) gives a valid proposal.

References
----------
Tierney, L. and Kadane, J. B. (1986). Accurate approximations for posterior moments and
marginal densities. *JASA* 81(393), 82–86.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

__all__ = ["GaussianApproximation", "laplace_fit"]

#: step of the forward differences of the gradient, relative to ``1 + |x|``
DIFFERENCE_STEP = 1e-5
#: smallest eigenvalue kept in a precision matrix, relative to the largest
EIGENVALUE_FLOOR = 1e-8
MAX_HALVINGS = 6


class GaussianApproximation(NamedTuple):
    """``N(mean, inverse(precision_factor @ precision_factor.T))``.

    Attributes
    ----------
    mean : ndarray of shape (d,)
    precision_factor : ndarray of shape (d, d)
        Lower Cholesky factor of the precision matrix.
    """

    mean: np.ndarray
    precision_factor: np.ndarray

    def log_density(self, value: np.ndarray) -> float:
        """Log density at ``value`` (shape (d,))."""
        whitened = self.precision_factor.T @ (np.asarray(value, dtype=np.float64) - self.mean)
        return float(np.sum(np.log(np.diag(self.precision_factor)))
                     - 0.5 * whitened @ whitened - 0.5 * self.mean.size * np.log(2 * np.pi))

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        """One draw (shape (d,))."""
        normal = rng.standard_normal(self.mean.size)
        return self.mean + np.linalg.solve(self.precision_factor.T, normal)


def _positive_definite(matrix: np.ndarray) -> np.ndarray:
    """The symmetric part of ``matrix`` with its eigenvalues replaced by their absolute
    values, floored at ``EIGENVALUE_FLOOR`` times the largest (at least 1e-300)."""
    values, vectors = np.linalg.eigh(0.5 * (matrix + matrix.T))
    values = np.abs(values)
    values = np.maximum(values, max(EIGENVALUE_FLOOR * values.max(), 1e-300))
    return (vectors * values) @ vectors.T


def _hessian(log_density_and_gradient, x, gradient) -> np.ndarray:
    """Forward differences of the gradient at ``x`` (``gradient`` the gradient there)."""
    d = x.size
    hessian = np.empty((d, d))
    for k in range(d):
        step = DIFFERENCE_STEP * (1.0 + abs(x[k]))
        shifted = x.copy()
        shifted[k] += step
        hessian[:, k] = (log_density_and_gradient(shifted)[1] - gradient) / step
    return hessian


def laplace_fit(log_density_and_gradient: Callable[[np.ndarray], tuple[float, np.ndarray]],
                start: np.ndarray, n_newton_steps: int = 1, scale: float = 1.0
                ) -> GaussianApproximation:
    """Gaussian approximation of ``exp(f)`` by Newton steps from ``start`` (module doc).

    Parameters
    ----------
    log_density_and_gradient : callable
        ``x -> (f(x), grad f(x))``; ``-inf`` (and any gradient) outside the domain.
    start : ndarray of shape (d,)
        :math:`x_0`.  A start where ``f`` or its derivatives are not finite gives
        ``N(start, scale^2 I)``.
    n_newton_steps : int, default 1
        :math:`m`; each costs ``d + 1`` evaluations (plus one per halving).
    scale : float, default 1.0
        :math:`s`, the inflation of the standard deviations.

    Returns
    -------
    GaussianApproximation
    """
    x = np.array(start, dtype=np.float64)
    d = x.size
    value, gradient = log_density_and_gradient(x)
    precision = None
    for _ in range(max(int(n_newton_steps), 1)):
        if not (np.isfinite(value) and np.all(np.isfinite(gradient))):
            break
        hessian = _hessian(log_density_and_gradient, x, gradient)
        if not np.all(np.isfinite(hessian)):
            break
        precision = _positive_definite(-hessian)
        if n_newton_steps < 1:
            break
        step = np.linalg.solve(precision, gradient)
        for _ in range(MAX_HALVINGS):
            value_new, gradient_new = log_density_and_gradient(x + step)
            if value_new >= value:  # NaN and -inf fail
                x, value, gradient = x + step, value_new, gradient_new
                break
            step = 0.5 * step
    if precision is None:
        precision = np.eye(d)
    return GaussianApproximation(x, np.linalg.cholesky(precision) / scale)
