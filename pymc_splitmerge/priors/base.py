r"""Gibbs-type partition priors: the shared base class.

Every partition prior of this package is *Gibbs-type*: the probability of a set
partition :math:`c` of :math:`n` points into :math:`K` blocks :math:`b_1, \dots, b_K` is

.. math::

    p(c) = V(n, K) \prod_{j=1}^{K} W(|b_j|),

normalised so that the sum over all set partitions of ``n`` points is one
(PGSM eq. 3, with :math:`\tau_1 = V` and :math:`\tau_2 = W`).

Kernels never call a prior object in their inner loops.  They receive the two tables
returned by :meth:`GibbsTypePrior.tables` for a partition of ``N`` points (``N`` counted
*after* the placement of the point being moved) and use

* log weight of joining a cluster of current size ``m``:
  ``log_w_table[m + 1] - log_w_table[m]``;
* log weight of opening a new cluster when ``K`` clusters exist:
  ``log_v_table[K + 1] - log_v_table[K] + log_w_table[1]``;

(the common factor :math:`V(N, K)` of the join weights cancels).  The one sequential urn,
:func:`sample_partitions` (behind :meth:`GibbsTypePrior.sample`, ``pm.draw`` and the Geweke
simulator), uses these ratios (:meth:`GibbsTypePrior.urn_log_weights`; closed forms for the
Dirichlet process and Pitman–Yor, vectorised over a batch of hyperparameters, which
``tests/test_prior_contract.py`` checks against the tables).

A prior class owns all its formulas: the numpy ``_log_v`` / ``_log_w``, the pytensor graph
(``log_v_graph``, ``log_w_graph``, ``support_graph``, ``label_range``; the ``pytensor.tensor``
namespace is handed in by the PyMC layer, this layer never imports it), a numba log EPPF and
``parameter_bounds`` for hyperparameter updates.  ``docs/contracts.md`` ("Adding a prior")
lists what a new prior provides.

References
----------
.. [1] Bouchard-Côté, A., Doucet, A. and Roth, A. (2017). Particle Gibbs split-merge sampling
   for Bayesian inference in mixture models. JMLR 18(28), eq. 3.
.. [2] Gnedin, A. and Pitman, J. (2006). Exchangeable Gibbs partitions and Stirling
   triangles. Journal of Mathematical Sciences 138(3).
"""

from __future__ import annotations

import math
import numbers
from abc import ABC, abstractmethod

import numpy as np

__all__ = [
    "GibbsTypePrior",
    "sample_partitions",
    "validate_positive_integer",
    "validate_real",
]


def validate_real(value, name: str) -> float:
    """Return ``value`` as a finite Python float or raise a clear error.

    Accepts Python numbers, numpy scalars and 0-d arrays.

    Raises
    ------
    TypeError
        If ``value`` is not a real number (e.g. a string, a list, a symbolic variable).
    ValueError
        If ``value`` is NaN or infinite.
    """
    if isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be a real number, got a boolean {value!r}")
    if isinstance(value, np.ndarray):
        if value.ndim != 0:
            raise TypeError(f"{name} must be a scalar, got an array of shape {value.shape}")
        value = value[()]
    if not isinstance(value, numbers.Real):
        raise TypeError(
            f"{name} must be a real number, got {type(value).__name__}; "
            "symbolic hyperparameters belong to the PyMC distributions, not the numeric priors"
        )
    result = float(value)
    if not math.isfinite(result):
        raise ValueError(f"{name} must be finite, got {result}")
    return result


def validate_positive_integer(value, name: str) -> int:
    """Return ``value`` as a Python int >= 1 or raise a clear error.

    Accepts Python/numpy integers and integral floats (``3.0``).
    """
    if isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be an integer >= 1, got a boolean {value!r}")
    if isinstance(value, np.ndarray):
        if value.ndim != 0:
            raise TypeError(f"{name} must be a scalar, got an array of shape {value.shape}")
        value = value[()]
    if isinstance(value, numbers.Integral):
        result = int(value)
    elif isinstance(value, numbers.Real):
        as_float = float(value)
        if not math.isfinite(as_float) or not as_float.is_integer():
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        result = int(as_float)
    else:
        raise TypeError(f"{name} must be an integer >= 1, got {type(value).__name__}")
    if result < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {result}")
    return result


def _validate_n(n) -> int:
    if isinstance(n, bool | np.bool_) or not isinstance(n, numbers.Integral):
        raise TypeError(f"n (number of points) must be an integer, got {type(n).__name__}")
    n = int(n)
    if n < 0:
        raise ValueError(f"n (number of points) must be >= 0, got {n}")
    return n


def _as_int_array(values, name: str) -> np.ndarray:
    array = np.asarray(values)
    if array.dtype.kind == "f":
        if not np.all(np.isfinite(array)) or not np.all(array == np.round(array)):
            raise ValueError(f"{name} must hold integers, got {values!r}")
        array = array.astype(np.int64)
    elif array.dtype.kind not in "iu":
        raise TypeError(f"{name} must hold integers, got dtype {array.dtype}")
    return array.astype(np.int64, copy=False)


class GibbsTypePrior(ABC):
    r"""Base class of Gibbs-type partition priors :math:`p(c) = V(n, K) \prod_b W(|b|)`.

    Subclasses implement :meth:`_log_v` (vectorised over ``K >= 1``, ``n >= 1``) and
    :meth:`_log_w` (vectorised over ``m >= 1``); this class handles validation, the
    ``K = 0`` / ``n = 0`` conventions, the EPPF, the kernel tables and the urn sampler.
    """

    # ----------------------------------------------------------------- to implement
    @abstractmethod
    def _log_v(self, n: int, k: np.ndarray) -> np.ndarray:
        """log V(n, K) for ``n >= 1`` and an int64 array of ``K >= 1``."""

    @abstractmethod
    def _log_w(self, m: np.ndarray) -> np.ndarray:
        """log W(m) for an int64 array of ``m >= 1``."""

    @property
    def max_clusters(self) -> int | None:
        """Largest number of clusters with positive prior mass (``None`` when unbounded)."""
        return None

    @classmethod
    def examples(cls) -> list[dict]:
        """Valid hyperparameters (keyword dicts) of the contract tests.

        ``tests/test_prior_contract.py`` runs every check on each (the first also gets the
        urn's χ² test); every registered prior must give some (``docs/contracts.md``,
        "Adding a prior").
        """
        return []

    @classmethod
    def invalid_examples(cls) -> list[tuple[dict, type, str]]:
        """Invalid hyperparameters, the exception type and a word its message must contain."""
        return []

    # ----------------------------------------------------------------- public API
    def log_v(self, n: int, k):
        """Log of the Gibbs coefficient :math:`V(n, K)`.

        Parameters
        ----------
        n : int
            Number of points, ``n >= 0``.
        k : int or array of int
            Number of clusters ``K >= 0``.

        Returns
        -------
        float or ndarray of float64 (same shape as ``k``)
            ``log V(n, K)``; ``-inf`` where the configuration is infeasible
            (``K = 0`` with ``n >= 1``, ``K >= 1`` with ``n = 0``, ``K > max_clusters``).
        """
        if type(n) is int and type(k) is int and 1 <= k and 1 <= n:  # fast scalar path
            if self.max_clusters is not None and k > self.max_clusters:
                return -np.inf
            return float(self._log_v(n, np.int64(k)))
        n = _validate_n(n)
        k_array = _as_int_array(k, "k (number of clusters)")
        if np.any(k_array < 0):
            raise ValueError(f"k (number of clusters) must be >= 0, got {k!r}")
        flat = k_array.reshape(-1)
        result = np.full(flat.shape, -np.inf)
        if n == 0:
            result[flat == 0] = 0.0
        else:
            positive = flat >= 1
            if self.max_clusters is not None:
                positive &= flat <= self.max_clusters
            if np.any(positive):
                result[positive] = self._log_v(n, flat[positive])
        result = result.reshape(k_array.shape)
        return float(result) if result.ndim == 0 else result

    def log_w(self, m):
        """Log of the block weight :math:`W(m)`.

        Parameters
        ----------
        m : int or array of int
            Block sizes, ``m >= 1``.

        Returns
        -------
        float or ndarray of float64 (same shape as ``m``)
        """
        m_array = _as_int_array(m, "m (block size)")
        if np.any(m_array < 1):
            raise ValueError(f"m (block size) must be >= 1, got {m!r}")
        result = np.asarray(self._log_w(m_array.reshape(-1)), dtype=np.float64)
        result = result.reshape(m_array.shape)
        return float(result) if result.ndim == 0 else result

    def log_eppf(self, sizes) -> float:
        """Log exchangeable partition probability function.

        Parameters
        ----------
        sizes : array of int, shape (n_slots,)
            Block sizes; zero entries (free slots) are ignored.

        Returns
        -------
        float
            ``log V(n, K) + sum_j log W(sizes[j])`` with ``n = sizes.sum()`` and
            ``K`` the number of non-zero entries.
        """
        sizes = _as_int_array(sizes, "sizes").reshape(-1)
        if np.any(sizes < 0):
            raise ValueError(f"sizes must be >= 0, got {sizes!r}")
        sizes = sizes[sizes > 0]
        n = int(sizes.sum())
        log_v = self.log_v(n, len(sizes))
        if log_v == -np.inf:
            return -np.inf
        return float(log_v + (np.sum(self.log_w(sizes)) if len(sizes) else 0.0))

    def tables(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Tables the kernels use for a partition of ``n`` points.

        Parameters
        ----------
        n : int
            Number of points (after the placement of the point being moved).

        Returns
        -------
        log_v_table : ndarray of float64, shape (n + 2,)
            ``log_v_table[K] = log V(n, K)`` for ``K = 0..n+1``.
        log_w_table : ndarray of float64, shape (n + 2,)
            ``log_w_table[m] = log W(m)`` for ``m = 1..n+1`` and ``log_w_table[0] = 0``.
        """
        # Called at every draw whose hyperparameters changed: the subclass formulas are
        # evaluated directly on valid int64 arguments (the same values as :meth:`log_v` and
        # :meth:`log_w` over ``0..n+1``, without their per-call argument checks).
        n = _validate_n(n)
        log_v_table = np.full(n + 2, -np.inf)
        if n == 0:
            log_v_table[0] = 0.0
        else:
            k = np.arange(1, n + 2, dtype=np.int64)
            if self.max_clusters is not None:
                k = k[k <= self.max_clusters]
            if k.size:
                log_v_table[k] = self._log_v(n, k)
        log_w_table = np.zeros(n + 2)
        log_w_table[1:] = self._log_w(np.arange(1, n + 2, dtype=np.int64))
        return log_v_table, log_w_table

    def sample(self, n: int, rng: np.random.Generator, size: int | None = None) -> np.ndarray:
        """Draw partitions from the prior with the sequential (Chinese-restaurant) urn.

        Point ``N`` (1-based) joins an existing cluster of size ``m`` with weight
        ``W(m+1)/W(m)`` or opens a new one with weight ``V(N, K+1)/V(N, K) W(1)``
        (:meth:`urn_log_weights`); see :func:`sample_partitions`.

        Parameters
        ----------
        n : int
            Number of points.
        rng : numpy.random.Generator
            Source of randomness.
        size : int, optional
            Number of independent partitions; ``None`` draws one.

        Returns
        -------
        labels : ndarray of int64, shape (n,) or (size, n)
            Canonical labels (order of first appearance, ``0..K-1``).
        """
        num = 1 if size is None else int(size)
        if num < 0:
            raise ValueError(f"size must be >= 0, got {size}")
        labels = sample_partitions([self] * num, n, rng) if num else np.zeros((0, _validate_n(n)),
                                                                            dtype=np.int64)
        return labels[0] if size is None else labels

    # ----------------------------------------------------------------- sequential urn
    @classmethod
    def urn_parameters(cls, priors) -> object:
        """Per-row parameters of a batch of priors of this class for :meth:`urn_log_weights`.

        The default keeps each distinct prior with the indices of its rows (the weights then
        come from its :meth:`tables`); closed-form priors override this with arrays of their
        hyperparameters.
        """
        distinct: dict = {}
        rows = np.array([distinct.setdefault(prior, len(distinct)) for prior in priors],
                        dtype=np.int64)
        order = np.argsort(rows, kind="stable")
        groups = np.split(order, np.cumsum(np.bincount(rows, minlength=len(distinct)))[:-1])
        return list(zip(distinct, groups, strict=True))

    @classmethod
    def urn_log_weights(cls, parameters, n_points: int, sizes: np.ndarray,
                        n_clusters: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r"""Unnormalised log seating weights of point ``n_points`` (1-based), for each row.

        Parameters
        ----------
        parameters
            The output of :meth:`urn_parameters` for the batch.
        n_points : int
            ``N``: the number of points *after* the placement, ``N >= 2``.
        sizes : ndarray of int64, shape (num, n_slots)
            Cluster sizes of each row before the placement (``0`` for free slots).
        n_clusters : ndarray of int64, shape (num,)
            ``K >= 1`` clusters of each row (slots ``0..K-1`` are occupied).

        Returns
        -------
        log_join : ndarray of float64, shape (num, n_slots)
            ``log W(m+1) - log W(m)`` for occupied slots (other entries are ignored).
        log_new : ndarray of float64, shape (num,)
            ``log V(N, K+1) - log V(N, K) + log W(1)`` (``-inf`` when ``K + 1`` clusters are
            infeasible).

        Any per-row constant may be added to both (the urn normalises each row).
        """
        log_join = np.empty(sizes.shape)
        log_new = np.empty(sizes.shape[0])
        for prior, mask in parameters:  # each distinct prior and its rows
            log_v_table, log_w_table = prior.tables(n_points)
            row_sizes = sizes[mask]
            log_join[mask] = (log_w_table[np.minimum(row_sizes + 1, n_points)]
                              - log_w_table[np.minimum(row_sizes, n_points)])
            k = n_clusters[mask]
            log_new[mask] = log_v_table[k + 1] - log_v_table[k] + log_w_table[1]
        return log_join, log_new

    @classmethod
    def closed_form_urn_parameters(cls, priors, *names: str) -> tuple[np.ndarray, ...]:
        """Float64 arrays of the hyperparameters ``names`` over a batch of priors.

        The :meth:`urn_parameters` of a prior whose seating weights have a closed form (see
        :meth:`closed_form_urn_log_weights`).
        """
        return tuple(np.array([getattr(prior, name) for prior in priors], dtype=np.float64)
                     for name in names)

    @staticmethod
    def closed_form_urn_log_weights(join_weight: np.ndarray, new_weight: np.ndarray
                                    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`urn_log_weights` from closed-form weights ``W(m+1)/W(m)`` and ``V`` ratio.

        ``join_weight`` (num, n_slots) and ``new_weight`` (num,) are the unnormalised seating
        weights of the occupied slots and of a new cluster; a zero weight gives ``-inf``
        (infeasible), entries of free slots may be anything (they are ignored).
        """
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(join_weight), np.log(new_weight)

    # ----------------------------------------------------------------- pytensor graphs
    # The PyMC layer (``distributions/priors.py``) builds the log-probability of a partition
    # from these class methods; ``pt`` is the ``pytensor.tensor`` namespace handed in by the
    # caller (this layer never imports pytensor).  ``params`` are the prior's inputs by name
    # (``parameter_names``): tensors, or Python numbers for static inputs.
    parameter_names: tuple[str, ...] = ()
    """Names of the hyperparameters, in the order of the constructor and of the PyMC inputs."""
    static_parameter_names: tuple[str, ...] = ()
    """Hyperparameters that are numeric constants in the graph (Python numbers / objects)."""

    # Hyperparameter updates given the partition (kernels/concentration.py): the numba log
    # EPPF ``numba_log_eppf(sizes, n, theta)`` with ``theta`` the float64 values of
    # ``parameter_names`` and the support of each updatable parameter.
    numba_log_eppf = None
    """``@njit`` log EPPF of block sizes, or None when the prior has no updatable parameter."""

    @classmethod
    def parameter_bounds(cls, name: str, values: dict) -> tuple[float, float]:
        """Support ``(lower, upper)`` of parameter ``name`` given the other ``values``."""
        raise ValueError(f"{cls.__name__} has no hyperparameter updated given the partition")

    @classmethod
    def label_range(cls, n: int, **params) -> int:
        """Labels of a partition of ``n`` points lie in ``[0, label_range)`` (default ``n``)."""
        return n

    @classmethod
    def log_v_graph(cls, pt, n: int, n_clusters, **params):  # pragma: no cover - interface
        """Symbolic ``log V(n, K)`` for a static ``n`` and a symbolic int64 ``K >= 1``."""
        raise NotImplementedError(f"{cls.__name__} has no pytensor graph")

    @classmethod
    def log_w_graph(cls, pt, m, **params):  # pragma: no cover - interface
        """Symbolic ``log W(m)`` for a float64 tensor of block sizes ``m >= 1``."""
        raise NotImplementedError(f"{cls.__name__} has no pytensor graph")

    @classmethod
    def support_graph(cls, pt, **params) -> tuple[list, str]:
        """Symbolic conditions on the parameters and the message when one fails."""
        return [], ""

    @classmethod
    def log_eppf_graph(cls, pt, sizes, n: int, **params):
        """Symbolic normalised log EPPF of block sizes (zeros are free slots).

        Parameters
        ----------
        pt : module
            ``pytensor.tensor``.
        sizes : int64 tensor, shape (n_slots,)
            Block sizes summing to ``n``.
        n : int
            Number of points (static).
        **params
            The prior's inputs by name.

        Returns
        -------
        float64 scalar tensor
            ``log V(n, K) + sum_{sizes > 0} log W(sizes)`` (PGSM eq. 3).
        """
        occupied = pt.gt(sizes, 0)
        n_clusters = pt.sum(occupied, dtype="int64")
        safe_sizes = pt.maximum(sizes, 1).astype("float64")
        log_w_sum = pt.sum(pt.switch(occupied, cls.log_w_graph(pt, safe_sizes, **params), 0.0))
        return cls.log_v_graph(pt, n, n_clusters, **params) + log_w_sum


def sample_partitions(priors, n: int, rng: np.random.Generator) -> np.ndarray:
    """The sequential urn: one partition of ``n`` points from each prior of a batch.

    Point 1 opens cluster 0; point ``N >= 2`` joins a cluster of size ``m`` with weight
    ``W(m+1)/W(m)`` or opens a new one with weight ``V(N, K+1)/V(N, K) W(1)``
    (:meth:`GibbsTypePrior.urn_log_weights`, the seating rule of the kernels).  The product
    of these conditionals is the EPPF, so each row is an exact draw (Pitman 1995).

    Parameters
    ----------
    priors : sequence of GibbsTypePrior
        One prior per row, all of the same class (hyperparameters may differ per row).
    n : int
        Number of points.
    rng : numpy.random.Generator

    Returns
    -------
    labels : ndarray of int64, shape (len(priors), n)
        Canonical labels (order of first appearance, ``0..K-1``).
    """
    n = _validate_n(n)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    priors = list(priors)
    num = len(priors)
    labels = np.zeros((num, n), dtype=np.int64)
    if num == 0 or n == 0:
        return labels
    cls = type(priors[0])
    if not isinstance(priors[0], GibbsTypePrior) or any(type(p) is not cls for p in priors):
        raise TypeError("sample_partitions needs GibbsTypePrior instances, all of one class")
    parameters = cls.urn_parameters(priors)
    cluster_sizes = np.zeros((num, n + 1), dtype=np.int64)
    cluster_sizes[:, 0] = 1  # point 1 opens cluster 0
    n_clusters = np.ones(num, dtype=np.int64)
    rows = np.arange(num)
    slots = np.arange(n + 1)
    for point in range(1, n):
        log_join, log_new = cls.urn_log_weights(parameters, point + 1, cluster_sizes,
                                                n_clusters)
        log_weights = np.where(slots[None, :] < n_clusters[:, None], log_join, -np.inf)
        log_weights[rows, n_clusters] = log_new
        log_weights -= np.max(log_weights, axis=1, keepdims=True)
        cumulative = np.cumsum(np.exp(log_weights), axis=1)
        uniforms = rng.random(num) * cumulative[:, -1]
        choice = np.minimum((cumulative <= uniforms[:, None]).sum(axis=1), n_clusters)
        labels[:, point] = choice
        cluster_sizes[rows, choice] += 1
        n_clusters += choice == n_clusters
    return labels
