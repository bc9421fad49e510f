r"""Dirichlet process (Chinese restaurant process) partition prior.

.. math::

    V(n, K) = \alpha^K \frac{\Gamma(\alpha)}{\Gamma(\alpha + n)}, \qquad W(m) = \Gamma(m),

so that :math:`p(c) = \alpha^K \Gamma(\alpha) / \Gamma(\alpha+n) \prod_j (n_j - 1)!`
(Ewens' sampling formula).  Under the prior the number of clusters has mean
:math:`\sum_{i=0}^{n-1} \alpha / (\alpha + i)`.

References
----------
.. [1] Antoniak, C. E. (1974). Mixtures of Dirichlet processes with applications to Bayesian
   nonparametric problems. Annals of Statistics 2(6), 1152-1174.
.. [2] Bouchard-Côté, A., Doucet, A. and Roth, A. (2017). Particle Gibbs split-merge sampling
   for Bayesian inference in mixture models. JMLR 18(28), eq. 3.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln

from pymc_splitmerge.core.jit import njit
from pymc_splitmerge.priors.base import GibbsTypePrior, _validate_n, validate_real

__all__ = [
    "DirichletProcessPrior",
    "dirichlet_process_expected_n_clusters",
    "dirichlet_process_log_eppf_numba",
]


@njit(cache=True)
def dirichlet_process_log_eppf_numba(sizes, n, theta):
    """Log EPPF of the non-zero ``sizes`` (``n`` points), ``theta = [alpha]`` (numba)."""
    alpha = theta[0]
    total, k = 0.0, 0
    for m in sizes:
        if m > 0:
            k += 1
            total += math.lgamma(m)
    return total + k * math.log(alpha) + math.lgamma(alpha) - math.lgamma(alpha + n)


def dirichlet_process_expected_n_clusters(alpha: float, n: int) -> float:
    r"""Prior mean of the number of clusters of a DP(alpha) partition of ``n`` points.

    .. math:: E[K] = \sum_{i=0}^{n-1} \frac{\alpha}{\alpha + i}.

    Parameters
    ----------
    alpha : float
        Concentration, ``alpha > 0``.
    n : int
        Number of points, ``n >= 0``.
    """
    alpha = validate_real(alpha, "alpha")
    if alpha <= 0:
        raise ValueError(f"alpha (DP concentration) must be > 0, got {alpha}")
    n = _validate_n(n)
    return float(np.sum(alpha / (alpha + np.arange(n))))


@dataclass(frozen=True)
class DirichletProcessPrior(GibbsTypePrior):
    """Dirichlet process partition prior (Chinese restaurant process).

    Parameters
    ----------
    alpha : float
        Concentration, ``alpha > 0``.
    """

    alpha: float
    parameter_names = ("alpha",)

    @classmethod
    def examples(cls):
        return [{"alpha": 0.3}, {"alpha": 2.5}]

    @classmethod
    def invalid_examples(cls):
        return [({"alpha": 0.0}, ValueError, "alpha"),
                ({"alpha": float("nan")}, ValueError, "alpha"),
                ({"alpha": "1"}, TypeError, "alpha")]

    def __post_init__(self):
        alpha = validate_real(self.alpha, "alpha")
        if alpha <= 0:
            raise ValueError(f"alpha (DP concentration) must be > 0, got {alpha}")
        object.__setattr__(self, "alpha", alpha)

    def _log_v(self, n: int, k: np.ndarray) -> np.ndarray:
        return k * math.log(self.alpha) + gammaln(self.alpha) - gammaln(self.alpha + n)

    def _log_w(self, m: np.ndarray) -> np.ndarray:
        return gammaln(m)

    # sequential urn, vectorised over the concentrations of a batch: join weight m, new alpha
    @classmethod
    def urn_parameters(cls, priors) -> np.ndarray:
        return np.array([prior.alpha for prior in priors], dtype=np.float64)

    @classmethod
    def urn_log_weights(cls, parameters, n_points, sizes, n_clusters):
        with np.errstate(divide="ignore"):
            return np.log(sizes), np.log(parameters)

    # pytensor graph (see GibbsTypePrior.log_eppf_graph)
    @classmethod
    def log_v_graph(cls, pt, n, n_clusters, *, alpha):
        return n_clusters * pt.log(alpha) + pt.gammaln(alpha) - pt.gammaln(alpha + n)

    @classmethod
    def log_w_graph(cls, pt, m, *, alpha):
        return pt.gammaln(m)

    @classmethod
    def support_graph(cls, pt, *, alpha):
        return [pt.gt(alpha, 0)], "alpha > 0"

    # hyperparameter updates given the partition (kernels/concentration.py)
    numba_log_eppf = staticmethod(dirichlet_process_log_eppf_numba)

    @classmethod
    def parameter_bounds(cls, name, values):
        """Support ``(lower, upper)`` of parameter ``name`` given the others: alpha > 0."""
        return 0.0, math.inf

    def expected_n_clusters(self, n: int) -> float:
        """Prior mean of the number of clusters of ``n`` points (see module docstring)."""
        return dirichlet_process_expected_n_clusters(self.alpha, n)
