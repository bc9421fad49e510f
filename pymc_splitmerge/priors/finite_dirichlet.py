r"""Finite symmetric Dirichlet partition prior (``k`` labelled components).

Labels drawn i.i.d. from weights :math:`\pi \sim \mathrm{Dirichlet}(\alpha, \dots, \alpha)`
with ``k`` components induce, on the *unlabelled* set partition with :math:`K` blocks,

.. math::

    p(c) = \frac{k!}{(k-K)!}\,\frac{\Gamma(k\alpha)}{\Gamma(k\alpha + n)}
           \prod_{j=1}^{K} \frac{\Gamma(n_j + \alpha)}{\Gamma(\alpha)},
    \qquad K \le k,

i.e. :math:`V(n, K) = \frac{k!}{(k-K)!}\Gamma(k\alpha)\Gamma(\alpha)^{-K}/\Gamma(k\alpha+n)`
and :math:`W(m) = \Gamma(m + \alpha)`; :math:`V(n, K) = 0` for :math:`K > k`.

The factor :math:`k!/(k-K)!` counts the labellings of the blocks, and
:math:`\Gamma(\alpha)^{-K}` is part of the Dirichlet-multinomial normaliser.  Public code
(the PGSM reference implementation) drops both; the result is not a normalised law over
partitions and changes the posterior on the number of clusters.  The tests catch this by
enumeration: the EPPF must sum to one.

References
----------
.. [1] Bouchard-Côté, A., Doucet, A. and Roth, A. (2017). Particle Gibbs split-merge sampling
   for Bayesian inference in mixture models. JMLR 18(28), Section 2 (finite Dirichlet).
.. [2] Green, P. J. and Richardson, S. (2001). Modelling heterogeneity with and without the
   Dirichlet process. Scandinavian Journal of Statistics 28(2), 355-375.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln

from pymc_splitmerge.core.jit import njit
from pymc_splitmerge.priors.base import GibbsTypePrior, validate_positive_integer, validate_real

__all__ = ["FiniteDirichletPrior", "finite_dirichlet_log_eppf_numba"]


@njit(cache=True)
def finite_dirichlet_log_eppf_numba(sizes, n, theta):
    """Log EPPF of the non-zero ``sizes``, ``theta = [alpha, k]`` (numba; -inf if K > k)."""
    alpha, components = theta[0], theta[1]
    total, k = 0.0, 0
    for m in sizes:
        if m > 0:
            k += 1
            total += math.lgamma(m + alpha)
    if k > components:
        return -math.inf
    return (total + math.lgamma(components + 1.0) - math.lgamma(components - k + 1.0)
            + math.lgamma(components * alpha) - math.lgamma(components * alpha + n)
            - k * math.lgamma(alpha))


@dataclass(frozen=True)
class FiniteDirichletPrior(GibbsTypePrior):
    """Partition prior of a finite mixture with symmetric Dirichlet weights.

    Parameters
    ----------
    alpha : float
        Symmetric Dirichlet concentration of each component, ``alpha > 0``.
    k : int
        Number of components, ``k >= 1`` (the maximum number of clusters).
    """

    alpha: float
    k: int
    parameter_names = ("alpha", "k")
    static_parameter_names = ("k",)

    @classmethod
    def examples(cls):
        return [{"alpha": 0.7, "k": 3}, {"alpha": 2.0, "k": 1}, {"alpha": 0.2, "k": 10}]

    @classmethod
    def invalid_examples(cls):
        return [({"alpha": 1.0, "k": 0}, ValueError, "k"),
                ({"alpha": 1.0, "k": 2.5}, ValueError, "k"),
                ({"alpha": 0.0, "k": 3}, ValueError, "alpha")]

    def __post_init__(self):
        alpha = validate_real(self.alpha, "alpha")
        if alpha <= 0:
            raise ValueError(f"alpha (Dirichlet concentration) must be > 0, got {alpha}")
        k = validate_positive_integer(self.k, "k (number of components)")
        object.__setattr__(self, "alpha", alpha)
        object.__setattr__(self, "k", k)

    @property
    def max_clusters(self) -> int:
        return self.k

    def _log_v(self, n: int, k: np.ndarray) -> np.ndarray:
        # callers guarantee 1 <= K <= self.k
        alpha, components = self.alpha, self.k
        return (
            gammaln(components + 1.0)
            - gammaln(components - k + 1.0)
            + gammaln(components * alpha)
            - gammaln(components * alpha + n)
            - k * gammaln(alpha)
        )

    def _log_w(self, m: np.ndarray) -> np.ndarray:
        return gammaln(m + self.alpha)

    # sequential urn, vectorised over a batch: join weight m + alpha, new (k - K) alpha
    @classmethod
    def urn_parameters(cls, priors) -> tuple[np.ndarray, np.ndarray]:
        return cls.closed_form_urn_parameters(priors, "alpha", "k")

    @classmethod
    def urn_log_weights(cls, parameters, n_points, sizes, n_clusters):
        alpha, components = parameters
        return cls.closed_form_urn_log_weights(
            sizes + alpha[:, None], np.maximum(components - n_clusters, 0.0) * alpha)

    # pytensor graph (see GibbsTypePrior.log_eppf_graph); k is static (a Python int)
    @classmethod
    def label_range(cls, n, *, alpha, k):
        return int(k)

    @classmethod
    def log_v_graph(cls, pt, n, n_clusters, *, alpha, k):
        k = int(k)
        n_clusters = n_clusters.astype("float64")
        log_v = (
            math.lgamma(k + 1.0)
            - pt.gammaln(pt.maximum(np.float64(k) - n_clusters, 0.0) + 1.0)
            + pt.gammaln(k * alpha)
            - pt.gammaln(k * alpha + n)
            - n_clusters * pt.gammaln(alpha)
        )
        return pt.switch(pt.le(n_clusters, k), log_v, -np.inf)

    @classmethod
    def log_w_graph(cls, pt, m, *, alpha, k):
        return pt.gammaln(m + alpha)

    @classmethod
    def support_graph(cls, pt, *, alpha, k):
        return [pt.gt(alpha, 0)], "alpha > 0"

    # hyperparameter updates given the partition (kernels/concentration.py)
    numba_log_eppf = staticmethod(finite_dirichlet_log_eppf_numba)

    @classmethod
    def parameter_bounds(cls, name, values):
        """Support ``(lower, upper)`` of ``name``: alpha > 0 (``k`` is static)."""
        if name != "alpha":
            raise ValueError(f"only alpha of FiniteDirichletPrior is updated, not {name!r}")
        return 0.0, math.inf
