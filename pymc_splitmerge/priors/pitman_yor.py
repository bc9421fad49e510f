r"""Pitman-Yor (two-parameter Poisson-Dirichlet) partition prior.

With concentration :math:`\alpha` and discount :math:`d`, ``0 <= d < 1``, ``alpha > -d``:

.. math::

    V(n, K) = \frac{\prod_{i=1}^{K-1} (\alpha + i d)}{(\alpha + 1)_{n-1}}, \qquad
    W(m) = (1 - d)_{m-1},

with :math:`(x)_j = \Gamma(x + j) / \Gamma(x)` the rising factorial.  For ``d > 0``,
:math:`\prod_{i=1}^{K-1}(\alpha + i d) = d^{K-1}\Gamma(\alpha/d + K)/\Gamma(\alpha/d + 1)`.
``d = 0`` is the Dirichlet process.

References
----------
.. [1] Pitman, J. and Yor, M. (1997). The two-parameter Poisson-Dirichlet distribution derived
   from a stable subordinator. Annals of Probability 25(2), 855-900.
.. [2] Bouchard-Côté, A., Doucet, A. and Roth, A. (2017). Particle Gibbs split-merge sampling
   for Bayesian inference in mixture models. JMLR 18(28), eq. 3.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln

from pymc_splitmerge.core.jit import njit
from pymc_splitmerge.priors.base import GibbsTypePrior, validate_real

#: Above this alpha / discount the log V numerator is summed term by term (see ``_log_v``).
_TERMWISE_RATIO = 1e4

__all__ = ["PitmanYorPrior", "pitman_yor_log_eppf_numba"]


@njit(cache=True)
def pitman_yor_log_eppf_numba(sizes, n, theta):
    """Log EPPF of the non-zero ``sizes``, ``theta = [alpha, discount]`` (numba)."""
    alpha, discount = theta[0], theta[1]
    log_w_one = math.lgamma(1.0 - discount)
    total, k = 0.0, 0
    for m in sizes:
        if m > 0:
            k += 1
            total += math.lgamma(m - discount) - log_w_one
    for i in range(1, k):
        total += math.log(alpha + i * discount)
    return total - math.lgamma(alpha + n) + math.lgamma(alpha + 1.0)


@dataclass(frozen=True)
class PitmanYorPrior(GibbsTypePrior):
    """Pitman-Yor partition prior.

    Parameters
    ----------
    alpha : float
        Concentration (strength), ``alpha > -discount`` (may be negative).
    discount : float
        Discount, ``0 <= discount < 1``.
    """

    alpha: float
    discount: float
    parameter_names = ("alpha", "discount")

    @classmethod
    def examples(cls):
        return [{"alpha": 1.0, "discount": 0.25}, {"alpha": -0.4, "discount": 0.6},
                {"alpha": 1.3, "discount": 0.0}]

    @classmethod
    def invalid_examples(cls):
        return [({"alpha": 1.0, "discount": 1.0}, ValueError, "discount"),
                ({"alpha": -0.5, "discount": 0.5}, ValueError, "alpha"),
                ({"alpha": 1.0, "discount": -0.1}, ValueError, "discount")]

    def __post_init__(self):
        alpha = validate_real(self.alpha, "alpha")
        discount = validate_real(self.discount, "discount")
        if not 0.0 <= discount < 1.0:
            raise ValueError(f"discount must satisfy 0 <= discount < 1, got {discount}")
        if alpha <= -discount:
            raise ValueError(
                f"alpha must be > -discount (= {-discount}), got alpha = {alpha}; "
                "with discount = 0 this means alpha > 0"
            )
        object.__setattr__(self, "alpha", alpha)
        object.__setattr__(self, "discount", discount)

    def _log_v(self, n: int, k: np.ndarray) -> np.ndarray:
        alpha, discount = self.alpha, self.discount
        if discount == 0.0:
            log_numerator = (k - 1) * math.log(alpha)
        elif alpha > _TERMWISE_RATIO * discount:
            # prod_{i<K} (alpha + i d) = alpha^(K-1) prod_{i<K} (1 + i d / alpha), term by term:
            # the gamma-function form below cancels two huge values (inf - inf for a
            # subnormal d)
            steps = np.arange(1, max(int(np.max(k)), 1), dtype=np.float64)
            partial = np.concatenate(([0.0], np.cumsum(np.log1p(steps * (discount / alpha)))))
            log_numerator = (k - 1) * math.log(alpha) + partial[np.asarray(k) - 1]
        else:
            ratio = alpha / discount
            log_numerator = (
                (k - 1) * math.log(discount) + gammaln(ratio + k) - gammaln(ratio + 1.0)
            )
        log_denominator = gammaln(alpha + n) - gammaln(alpha + 1.0)
        return log_numerator - log_denominator

    def _log_w(self, m: np.ndarray) -> np.ndarray:
        return gammaln(m - self.discount) - gammaln(1.0 - self.discount)

    # sequential urn, vectorised over a batch: join weight m - d, new alpha + K d
    @classmethod
    def urn_parameters(cls, priors) -> tuple[np.ndarray, np.ndarray]:
        return cls.closed_form_urn_parameters(priors, "alpha", "discount")

    @classmethod
    def urn_log_weights(cls, parameters, n_points, sizes, n_clusters):
        alpha, discount = parameters
        return cls.closed_form_urn_log_weights(sizes - discount[:, None],
                                               alpha + discount * n_clusters)

    # pytensor graph (see GibbsTypePrior.log_eppf_graph)
    @classmethod
    def log_v_graph(cls, pt, n, n_clusters, *, alpha, discount):
        # prod_{i=1}^{K-1} (alpha + i d) (valid for d = 0 too)
        index = pt.arange(1, n_clusters, dtype="float64")  # K - 1 terms: O(K)
        log_numerator = pt.sum(pt.log(alpha + index * discount))
        return log_numerator - pt.gammaln(alpha + n) + pt.gammaln(alpha + 1.0)

    @classmethod
    def log_w_graph(cls, pt, m, *, alpha, discount):
        return pt.gammaln(m - discount) - pt.gammaln(1.0 - discount)

    @classmethod
    def support_graph(cls, pt, *, alpha, discount):
        conditions = [pt.ge(discount, 0), pt.lt(discount, 1), pt.gt(alpha, -discount)]
        return conditions, "0 <= discount < 1, alpha > -discount"

    # hyperparameter updates given the partition (kernels/concentration.py)
    numba_log_eppf = staticmethod(pitman_yor_log_eppf_numba)

    @classmethod
    def parameter_bounds(cls, name, values):
        """Support ``(lower, upper)`` of ``name`` given the other parameter.

        ``alpha > -discount``; ``max(0, -alpha) <= discount < 1`` (the open end
        ``discount > -alpha`` of a negative alpha is nudged up by one ulp).
        """
        if name == "alpha":
            return -float(values["discount"]), math.inf
        if name == "discount":
            alpha = float(values["alpha"])
            lower = max(0.0, -alpha)
            if alpha < 0:
                lower = float(np.nextafter(lower, np.inf))
            return lower, 1.0
        raise ValueError(f"PitmanYorPrior has no parameter {name!r} (alpha, discount)")
