r"""A joint Metropolis–Hastings move of the labels and the component family's hyperparameters.

In a mixture whose component family has random hyperparameters :math:`\phi` (e.g. ``mu0``,
``kappa0`` of a Normal–Inverse-Wishart family) the labels :math:`c` and :math:`\phi` move each
other: a split or merge that changes the number of clusters is unlikely under the current
:math:`\phi`, and :math:`\phi` changes little given the current labels.  One update of
:class:`JointSplitMergeStep` proposes both, from a reference value :math:`\phi_0` of the
hyperparameters that the move does not change (the running mean of the block while tuning,
frozen when tuning stops):

1. a SAMS split or merge :math:`c \to c'` under :math:`\phi_0` (anchors drawn through the
   clusters as the default partition step's updates draw them, or uniformly; a uniformly
   random order of the other points of their clusters), with the SAMS ratio under
   :math:`\phi_0` (the anchors' reverse/forward probability included)

   .. math::

       \rho_1 = \frac{p(c', \phi_0 \mid y)\, q_{\phi_0}(c \mid c')}
                     {p(c, \phi_0 \mid y)\, q_{\phi_0}(c' \mid c)};

2. :math:`\phi' \sim g(\cdot \mid c')`, a Gaussian approximation of :math:`p(\phi \mid c', y)`
   in the block's unconstrained space (:func:`~pymc_splitmerge.kernels.laplace.laplace_fit`
   from :math:`\phi_0` on the O(clusters) log density of
   :class:`~pymc_splitmerge.HyperparameterSlice`), a deterministic function of :math:`c'`.

The full Metropolis–Hastings ratio of the pair is

.. math::

    r = \frac{p(c', \phi' \mid y)\, q_{\phi_0}(c \mid c')\, g(\phi \mid c)}
             {p(c, \phi \mid y)\, q_{\phi_0}(c' \mid c)\, g(\phi' \mid c')}
      = \rho_1\, \frac{w(c', \phi')}{w(c, \phi)}, \qquad
    w(c, \phi) = \frac{p(c, \phi \mid y)}{p(c, \phi_0 \mid y)\, g(\phi \mid c)},

(the partition prior cancels in :math:`w`, which needs the block's density only).  The move
accepts in two stages (delayed acceptance, Christen & Fox 2005): first with probability
:math:`\min(1, \rho_1)`, from the compiled SAMS kernel alone; only then are the Gaussian
fits made and the move accepted with probability :math:`\min(1, r / \rho_1)`.  Since
:math:`\rho_1(c', c) = 1 / \rho_1(c, c')`, the product of the two stages satisfies detailed
balance with respect to :math:`p(c, \phi \mid y)`.

References
----------
Christen, J. A. and Fox, C. (2005). Markov chain Monte Carlo using an approximation.
*JCGS* 14(4), 795–810.
Dahl, D. B. (2003). An improved merge-split sampler for conjugate Dirichlet process mixture
models. Technical Report 1086, University of Wisconsin–Madison.
Tierney, L. (1994). Markov chains for exploring posterior distributions. *Annals of
Statistics* 22(4), 1701–1762.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pymc.model import modelcontext
from pymc.step_methods.compound import BlockedStep, Competence

from pymc_splitmerge.core.relabel import canonical_labels
from pymc_splitmerge.distributions.statistics import mark_written_labels
from pymc_splitmerge.kernels.laplace import laplace_fit
from pymc_splitmerge.kernels.options import positive_integer
from pymc_splitmerge.kernels.sams import _sams_proposal_fields
from pymc_splitmerge.kernels.state import PartitionState, PriorTables
from pymc_splitmerge.steps.base import PerChainSetup
from pymc_splitmerge.steps.hyperparameters import HyperparameterSlice
from pymc_splitmerge.steps.sams import SAMSStep

__all__ = ["JointSplitMergeStep"]


def _log_cluster_anchor_ratio(n_clusters: int, size: int, size_a: int, size_b: int) -> float:
    """Log ratio of the reverse (merge-type) to the forward (split-type) cluster-anchor
    probability of splitting a cluster of ``size`` points, one of ``n_clusters``, into
    ``size_a + size_b`` (the law of ``kernels.sams._sams_updates``)."""
    log_split_type = 0.0 if n_clusters == 1 else -np.log(2.0)
    return (-np.log(2.0) - log_split_type + np.log(size * (size - 1.0))
            - np.log((n_clusters + 1.0) * size_a * size_b))


def _cluster_anchors(labels: np.ndarray, rng: np.random.Generator):
    """Two anchors drawn through the clusters (the law of ``kernels.sams._sams_updates``):
    split-type (probability 1/2, or 1 from one cluster) a cluster uniformly and an ordered
    pair of its points, merge-type an ordered pair of clusters and a point in each.

    Returns ``(anchor_i, anchor_j)``, or None for a split-type draw of a cluster of one
    point."""
    sizes = np.bincount(labels)
    clusters = np.flatnonzero(sizes)
    n_clusters = clusters.size
    if n_clusters == 1 or rng.random() < 0.5:  # split-type
        members = np.flatnonzero(labels == clusters[rng.integers(n_clusters)])
        if members.size < 2:
            return None
        anchor_i, anchor_j = rng.choice(members, size=2, replace=False)
        return int(anchor_i), int(anchor_j)
    first, second = rng.choice(clusters, size=2, replace=False)
    anchor_i = rng.choice(np.flatnonzero(labels == first))
    anchor_j = rng.choice(np.flatnonzero(labels == second))
    return int(anchor_i), int(anchor_j)


class JointSplitMergeStep(PerChainSetup, BlockedStep):
    """Joint split-merge moves of a partition and its component family's hyperparameters.

    Parameters
    ----------
    vars : TensorVariable or list of one TensorVariable
        The partition variable.
    hyperparameters : list of TensorVariable
        Continuous hyperparameters of the partition's component family (as for
        :class:`~pymc_splitmerge.HyperparameterSlice`, which provides their O(clusters) log
        density).
    n_updates : int, default 1
        Joint updates per draw.
    n_newton_steps : int, default 1
        Newton steps of each Gaussian fit (each ``d + 1`` evaluations of the block's log
        density and gradient; :func:`~pymc_splitmerge.kernels.laplace.laplace_fit`).
    scale : float, default 1.2
        Inflation of the fitted standard deviations.
    anchor_proposal : {"cluster", "uniform"}, default "cluster"
        Anchors drawn through the clusters (module doc) or two distinct points uniformly
        (Dahl 2003; a law that does not depend on the partition).
    model : pymc.Model, optional
    rng : int or numpy.random.Generator, optional
        Used only if PyMC does not hand a generator to the step.

    Notes
    -----
    Use it together with steps that move each block alone (it proposes only splits and
    merges), e.g. ``psm.AlternatingStep([psm.HyperparameterSlice(phi),
    psm.DefaultPartitionStep(z), psm.JointSplitMergeStep(z, phi)])``.
    Stats: ``joint_accepted`` (accepted updates in this draw), ``joint_log_accept_ratio`` (of
    the draw's last update).
    """

    name = "joint"
    default_blocked = True
    stats_dtypes_shapes = {"joint_accepted": (np.int64, []),
                           "joint_log_accept_ratio": (np.float64, [])}

    def __init__(self, vars, hyperparameters, n_updates: int = 1, n_newton_steps: int = 1,
                 scale: float = 1.2, anchor_proposal: str = "cluster", model=None, rng=None,
                 **kwargs):
        for ignored in ("blocked", "initial_point", "compile_kwargs"):  # passed by pm.sample
            kwargs.pop(ignored, None)
        if kwargs:
            raise TypeError(f"unexpected keyword arguments {sorted(kwargs)}")
        model = modelcontext(model)
        self.n_updates = positive_integer(n_updates, "n_updates")
        self.n_newton_steps = int(n_newton_steps)
        if self.n_newton_steps < 0:
            raise ValueError(f"n_newton_steps must be a non-negative integer; got "
                             f"{n_newton_steps}")
        if not float(scale) > 0:
            raise ValueError(f"scale must be positive; got {scale}")
        self.scale = float(scale)
        if anchor_proposal not in ("cluster", "uniform"):
            raise ValueError(f"unknown anchor_proposal {anchor_proposal!r}; choose 'cluster' "
                             "or 'uniform'")
        self.cluster_anchors = anchor_proposal == "cluster"
        self.partition = SAMSStep(vars, model=model)
        self.hyperparameters = HyperparameterSlice(hyperparameters, model=model)
        self.value_name = self.partition.value_name
        if self.value_name not in self.hyperparameters._other_names:
            raise ValueError(f"the hyperparameters do not feed the component family of the "
                             f"partition {self.value_name!r}")
        self.model = model
        self.vars = [*self.partition.vars, *self.hyperparameters.vars]
        self.rng = np.random.default_rng(rng) if not isinstance(rng, np.random.Generator) \
            else rng
        self.reset_chain()

    def reset_chain(self) -> None:
        """Forget the reference point (called at the start of every chain)."""
        self.tune = True
        self.partition.reset_chain()
        self._reference = None
        self._reference_count = 0
        self._reference_family = None
        self._prior_key = self._tables = None

    def stop_tuning(self) -> None:
        self.tune = False

    @staticmethod
    def competence(var, has_grad=None):
        return Competence.INCOMPATIBLE  # given explicitly only

    # ------------------------------------------------------------------ the update
    def _fit(self, fixed):
        hyper = self.hyperparameters
        return laplace_fit(lambda flat: hyper.log_density_and_gradient(flat, fixed),
                           self._reference, self.n_newton_steps, self.scale)

    def _log_density_at_reference(self, fixed) -> float:
        """The block's log density at the reference given the statistics ``fixed``."""
        return self.hyperparameters.log_density(self._reference, fixed)

    def _reference_state(self, point, labels):
        """The partition state of ``labels`` under the family at the reference, and the
        prior and its tables of ``point``."""
        if self._reference_family is None or self.tune:
            self._reference_family = self.partition.partition_model.numeric_family(
                self.hyperparameters.with_values(point, self._reference))
        prior = self.partition.partition_model.numeric_prior(point)
        key = tuple(float(getattr(prior, name)) for name in type(prior).parameter_names)
        if self._prior_key != key:
            self._prior_key, self._tables = key, PriorTables(*prior.tables(labels.shape[0]))
        state = PartitionState(self._reference_family, self.partition.partition_model.data,
                               labels)
        return state, self._tables

    def step(self, point) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        hyper = self.hyperparameters
        dtype = np.asarray(point[self.value_name]).dtype
        labels = np.asarray(point[self.value_name], dtype=np.int64)
        flat = hyper._flatten(point)
        if self.tune or self._reference is None:  # running mean while tuning
            self._reference_count += 1
            if self._reference is None:
                self._reference = flat.copy()
            else:
                self._reference = self._reference + (flat - self._reference) / \
                    self._reference_count
        n = labels.shape[0]
        state, tables = self._reference_state(point, labels)
        fixed = fit_current = log_current = None
        accepted, log_ratio = 0, np.nan
        for _ in range(self.n_updates if n >= 2 else 0):
            if self.cluster_anchors:
                anchors = _cluster_anchors(labels, self.rng)
                if anchors is None:  # a split-type update of a cluster of one point
                    log_ratio = np.nan
                    continue
            else:
                anchors = self.rng.choice(n, size=2, replace=False)
            anchor_i, anchor_j = int(anchors[0]), int(anchors[1])
            # stage 1: a SAMS proposal and its ratio under the family at the reference
            _, log_ratio, moving, _ = _sams_proposal_fields(
                *state.model, *state.partition, *tables,
                np.array([anchor_i, anchor_j], dtype=np.int64), self.rng.random(2 * n))
            log_ratio += self._log_anchor_ratio(labels, anchor_i, anchor_j, moving)
            if not np.log(self.rng.random()) < log_ratio:
                continue
            # stage 2: the hyperparameters drawn given the proposed labels
            proposed = labels.copy()
            proposed[moving] = (np.flatnonzero(np.bincount(labels, minlength=n + 1) == 0)[0]
                                if labels[anchor_i] == labels[anchor_j] else labels[anchor_j])
            proposed_point = dict(point)
            proposed_point[self.value_name] = proposed.astype(dtype)
            proposed_fixed = hyper._fixed_inputs(proposed_point)
            fit_proposed = self._fit(proposed_fixed)
            proposed_flat = fit_proposed.draw(self.rng)
            if fixed is None:
                fixed = hyper._fixed_inputs(point)
                fit_current = self._fit(fixed)
                log_current = (hyper.log_density(flat, fixed)
                               - self._log_density_at_reference(fixed)
                               - fit_current.log_density(flat))
            log_proposed = (hyper.log_density(proposed_flat, proposed_fixed)
                            - self._log_density_at_reference(proposed_fixed)
                            - fit_proposed.log_density(proposed_flat))
            log_ratio = log_proposed - log_current
            if np.log(self.rng.random()) < log_ratio:
                accepted += 1
                labels, flat, fixed, fit_current, log_current = (
                    proposed, proposed_flat, proposed_fixed, fit_proposed, log_proposed)
                point = hyper.with_values(point, flat)
                point[self.value_name] = proposed.astype(dtype)
                state = PartitionState(self._reference_family,
                                       self.partition.partition_model.data, labels)
        new_point = dict(point)
        if accepted:
            new_point[self.value_name] = mark_written_labels(
                canonical_labels(labels).astype(dtype, copy=True))
        return new_point, [{"joint_accepted": accepted, "joint_log_accept_ratio": log_ratio}]

    def _log_anchor_ratio(self, labels, anchor_i, anchor_j, moving) -> float:
        """Log ratio of the anchors' reverse to forward probability (0 for uniform
        anchors); ``moving`` is anchor ``i``'s side of the proposal."""
        if not self.cluster_anchors:
            return 0.0
        sizes = np.bincount(labels)
        n_clusters = int(np.count_nonzero(sizes))
        size_i, size_j = int(sizes[labels[anchor_i]]), int(sizes[labels[anchor_j]])
        if labels[anchor_i] == labels[anchor_j]:  # a split into moving and the rest
            return _log_cluster_anchor_ratio(n_clusters, size_i, moving.size,
                                             size_i - moving.size)
        return -_log_cluster_anchor_ratio(n_clusters - 1, size_i + size_j, size_i, size_j)
