r"""Hit-and-run slice moves on a continuous block, with a metric adapted while tuning.

One move from :math:`\theta` with log density :math:`\ell(\theta)` (Neal 2003, section 4 and
5.2): take a direction :math:`u = L e`, with :math:`e` a unit vector drawn independently of
:math:`\theta` (uniform on the sphere, :math:`e = g / \lVert g \rVert` with
:math:`g \sim N(0, I)`, or the next vector of a random orthonormal basis:
:func:`orthonormal_directions`), where
:math:`L` is a fixed lower factor of the metric :math:`\Sigma = L L^T`; draw the slice level
:math:`\log y = \ell(\theta) + \log U`; place an interval of ``width`` around :math:`t = 0`
at random and step out along :math:`\theta + t u` (at most ``max_steps`` steps, split at
random between the two ends: fig. 3), then sample :math:`t` uniformly, shrinking the interval
towards 0 at every rejection (fig. 5).  The direction does not depend on :math:`\theta`,
and given it the update of :math:`t` is a slice update of the line's conditional law, so each
move leaves the law with density :math:`\propto e^{\ell}` invariant.  In whitened
coordinates (:math:`\theta = L \eta`) moves along the :math:`d` vectors of an orthonormal
basis are a Gibbs sweep in a rotated basis: for a Gaussian whose covariance the metric
matches, one sweep of :math:`d` moves gives an independent draw, where :math:`d` moves along
directions drawn uniformly on the sphere leave a correlation of about
:math:`(1 - 1/d)^d \approx e^{-1}`.  :math:`\ell = -\infty` (or NaN) is outside the slice.
The update of :math:`t` is the package's univariate slice sampler
(:func:`~pymc_splitmerge.kernels.concentration.slice_sample`) on
:math:`t \mapsto \ell(\theta + t u)` from :math:`t = 0`.

:class:`MetricEstimator` gives :math:`L` from the draws seen so far: Stan's regularised
windowed covariance estimate, :math:`\frac{m}{m+5}\hat\Sigma + 10^{-3}\frac{5}{m+5} I`,
refreshed when the number of draws reaches a power of two (from 16 on); the identity before.
Its use must stop when tuning stops (a metric that keeps changing with the chain's history
breaks the invariance).

References
----------
Neal, R. M. (2003). Slice sampling. *Annals of Statistics* 31(3), 705–767.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pymc_splitmerge.kernels.concentration import slice_sample

__all__ = ["MetricEstimator", "hit_and_run_slice_move", "orthonormal_directions"]


def hit_and_run_slice_move(log_density: Callable[[np.ndarray], float], current: np.ndarray,
                           log_current: float, factor: np.ndarray, width: float,
                           max_steps: int, rng: np.random.Generator,
                           direction: np.ndarray | None = None
                           ) -> tuple[np.ndarray, float, int]:
    """One hit-and-run slice move (module doc).

    Parameters
    ----------
    log_density : callable
        ``log_density(theta) -> float`` for theta of shape (d,); ``-inf`` or NaN outside the
        support.
    current : ndarray of shape (d,)
        The current state, with ``log_current = log_density(current)`` finite (the caller
        checks).
    factor : ndarray of shape (d, d)
        Lower factor ``L`` of the metric.
    width : float
        Interval width along a direction of unit length in the metric.
    max_steps : int
        Maximum number of stepping-out steps.
    rng : numpy.random.Generator
    direction : ndarray of shape (d,), optional
        The unit vector ``e`` of the move (its direction is ``L e``), drawn independently of
        ``current`` (e.g. a row of :func:`orthonormal_directions` drawn before the moves);
        uniform on the sphere when not given.

    Returns
    -------
    (new, log_new, evaluations) : (ndarray of shape (d,), float, int)
        The new state, its log density and the number of ``log_density`` calls.
    """
    if direction is None:
        direction = rng.standard_normal(current.shape[0])
        direction = direction / np.linalg.norm(direction)
    direction = factor @ direction
    step = slice_sample(0.0, lambda t: log_density(current + t * direction), rng, width=width,
                        max_steps_out=max_steps, log_value=log_current)
    return current + step.value * direction, step.log_density, step.n_evaluations


def orthonormal_directions(dimension: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` unit vectors: consecutive blocks of ``dimension`` orthonormal vectors, each
    block the rows of a uniformly random (Haar) orthogonal matrix (the QR factor of a
    Gaussian matrix with the signs of R's diagonal moved into Q), the last block cut short.

    Returns an array of shape (count, dimension).
    """
    blocks = []
    for _ in range(-(-int(count) // int(dimension))):
        q, r = np.linalg.qr(rng.standard_normal((dimension, dimension)))
        blocks.append((q * np.where(np.diagonal(r) < 0, -1.0, 1.0)).T)
    return np.concatenate(blocks)[:count] if blocks else np.empty((0, dimension))


class MetricEstimator:
    """Running mean and covariance of a chain's draws; the lower factor of the regularised
    metric (module doc).

    Parameters
    ----------
    dimension : int
        Size ``d`` of the block.
    """

    def __init__(self, dimension: int):
        self.dimension = int(dimension)
        self.count = 0
        self.mean = np.zeros(self.dimension)
        self.scatter = np.zeros((self.dimension, self.dimension))
        self.factor = np.eye(self.dimension)

    def update(self, draw: np.ndarray) -> None:
        """Add a draw (shape (d,)); refresh :attr:`factor` at 16, 32, 64, ... draws."""
        self.count += 1
        delta = draw - self.mean
        self.mean += delta / self.count
        self.scatter += np.outer(delta, draw - self.mean)
        count = self.count
        if count >= 16 and count & (count - 1) == 0:
            covariance = (count / (count + 5.0)) * self.scatter / (count - 1) \
                + 1e-3 * (5.0 / (count + 5.0)) * np.eye(self.dimension)
            try:
                self.factor = np.linalg.cholesky(covariance)
            except np.linalg.LinAlgError:  # keep the previous factor
                pass
