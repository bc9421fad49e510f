"""PyMC step method: Sequentially-Allocated Merge-Split (SAMS, Dahl 2003) for a partition."""

from __future__ import annotations

import numpy as np
from pytensor.tensor.random.basic import GammaRV

from pymc_splitmerge.kernels.anchors import ANCHOR_PROPOSALS, AnchorProposal
from pymc_splitmerge.kernels.options import non_negative_integer, positive_integer
from pymc_splitmerge.kernels.sams import build_sams_move
from pymc_splitmerge.kernels.splitmerge_common import build_moves_then_gibbs
from pymc_splitmerge.kernels.state import PriorTables
from pymc_splitmerge.priors.dirichlet_process import (
    DirichletProcessPrior,
    GammaMixedDirichletProcessPrior,
)
from pymc_splitmerge.steps.base import PartitionStep
from pymc_splitmerge.steps.concentration import (
    ConcentrationGibbs,
    _constant,
    _dist_params,
    _find_parameter_role,
    _transform_pair,
)

__all__ = ["DefaultPartitionStep", "SAMSStep", "integrate_concentration_out"]

#: The ``anchor_proposal`` choices of :class:`SAMSStep`: ``kernels.anchors`` proposals, and
#: ``"cluster"`` (cluster anchors, a move of its own: ``build_sams_move(cluster_anchors=True)``).
SAMS_ANCHOR_PROPOSALS = (*ANCHOR_PROPOSALS, "cluster")


class SAMSStep(PartitionStep):
    """SAMS split-merge Metropolis–Hastings updates of a partition variable.

    Each draw applies one SAMS update (:func:`pymc_splitmerge.kernels.sams.build_sams_move`):
    two anchors are drawn; if they share a cluster a split built by sequential allocation
    is proposed, otherwise the merge of their clusters (whose reverse split probability is
    computed by forcing the current allocation).  Optionally ``n_gibbs_sweeps`` collapsed
    Gibbs sweeps follow (the "mixed" kernel of Bouchard-Côté et al. 2017;
    ``kernels.splitmerge_common.build_moves_then_gibbs``).

    Parameters
    ----------
    vars : TensorVariable or list of one TensorVariable
        The partition variable (e.g. created with ``DirichletProcess``).
    anchor_proposal : {"uniform", "cluster_informed", "threshold_informed", "cluster"}
        Law of the two anchors.  The first three are ``kernels.anchors`` proposals whose law
        does not depend on the partition; the informed ones adapt a frozen snapshot during
        tuning only, and are uniform until the first adaptation.  ``"cluster"`` draws the
        anchors through the current clusters (``build_sams_move(cluster_anchors=True)``,
        the law of stage 1 of ``splitmerge_start``): half the updates pick a cluster
        uniformly and two of its points, half two clusters and one point in each, with
        the anchor law's ratio in the acceptance ratio (no adaptation); it proposes to
        split small clusters as often as large ones.
    n_gibbs_sweeps : int, default 0
        Collapsed Gibbs sweeps after the split-merge updates in each draw.
    n_split_merge_updates : int, default 1
        SAMS updates per draw, before the sweeps (with ``anchor_proposal="cluster"`` all in
        one compiled call: ``build_sams_move(cluster_anchors=True, n_updates=...)``).
    model : pymc.Model, optional
    rng : int or numpy.random.Generator, optional
        Used only if PyMC does not hand a generator to the step.

    Notes
    -----
    Sampler stats: ``sams_move`` (0 none, 1 split, 2 merge proposed), ``sams_accepted``
    (bool), ``sams_log_accept_ratio`` (float64), of the draw's last SAMS update, and
    ``sams_n_clusters``.  The ratio is
    ``nan`` when nothing was proposed, and with ``anchor_proposal="cluster"`` also for a
    merge rejected early (not computed: bounded below its Metropolis uniform).

    References
    ----------
    Dahl, D. B. (2003). An improved merge-split sampler for conjugate Dirichlet process
    mixture models. Technical Report 1086, University of Wisconsin–Madison.
    Bouchard-Côté, A., Doucet, A. and Roth, A. (2017). JMLR 18(28), §1 and §4.3.
    """

    name = "sams"
    stats_dtypes_shapes = {
        "sams_move": (np.int64, []),
        "sams_accepted": (bool, []),
        "sams_log_accept_ratio": (np.float64, []),
        "sams_n_clusters": (np.int64, []),
    }

    def __init__(self, vars, anchor_proposal: str = "uniform", n_gibbs_sweeps: int = 0,
                 n_split_merge_updates: int = 1, model=None, rng=None, **kwargs):
        if anchor_proposal not in SAMS_ANCHOR_PROPOSALS:
            raise ValueError(
                f"unknown anchor_proposal {anchor_proposal!r}; choose one of "
                f"{', '.join(repr(kind) for kind in SAMS_ANCHOR_PROPOSALS)}"
            )
        self.n_gibbs_sweeps = non_negative_integer(n_gibbs_sweeps, "n_gibbs_sweeps")
        self.n_split_merge_updates = positive_integer(n_split_merge_updates,
                                                      "n_split_merge_updates")
        self.cluster_anchors = anchor_proposal == "cluster"
        # cluster anchors depend on the partition: their own move, no AnchorProposal to adapt
        self.anchor_proposal = (None if self.cluster_anchors
                                else AnchorProposal(kind=anchor_proposal, n_anchors=2))
        self.transition = self.build_transition()
        super().__init__(vars, model=model, rng=rng, **kwargs)
        if self.n_points < self.minimum_points:
            raise ValueError(
                f"SAMSStep needs a partition of at least 2 points; got {self.n_points}")

    #: fewest observations the step accepts (a split-merge move needs two anchors)
    minimum_points = 2

    def build_transition(self):
        if self.cluster_anchors:  # all the updates in one compiled call
            move = build_sams_move(cluster_anchors=True, n_updates=self.n_split_merge_updates)
            n_moves = 1
        else:
            move = build_sams_move(self.anchor_proposal)
            n_moves = self.n_split_merge_updates
        return build_moves_then_gibbs(move, n_moves=n_moves,
                                      n_gibbs_sweeps=self.n_gibbs_sweeps)

    def reset_chain(self) -> None:
        super().reset_chain()
        if getattr(self, "anchor_proposal", None) is not None:
            self.anchor_proposal.reset()

    def kernel_step(self, state, prior, tables):
        if self.n_points < 2:  # one observation, one partition: nothing to propose
            return {"sams_move": 0, "sams_accepted": False, "sams_log_accept_ratio": np.nan}
        if self.tune and self.anchor_proposal is not None:
            self.anchor_proposal.adapt(state, tables[1])
        *_, info = self.run_transition(state, tables).moves
        return {
            "sams_move": int(info.move),
            "sams_accepted": bool(info.accepted),
            "sams_log_accept_ratio": float(info.log_accept_ratio),
        }


class DefaultPartitionStep(SAMSStep):
    """The step plain ``pm.sample()`` assigns to a partition variable: SAMS + one Gibbs sweep.

    Identical to ``SAMSStep(z, anchor_proposal="cluster", n_split_merge_updates=50,
    n_gibbs_sweeps=1)`` (for a random component family on small data, two rounds of 35
    updates alternated with the hyperparameter step: ``n_rounds`` below): 50 cluster-anchor
    SAMS updates (one compiled call), then one collapsed Gibbs sweep, per draw (same stats, ``sams_*``, and the same
    step name ``"sams"``: ``pm.sample`` passes a keyword argument named after a step to it,
    e.g. ``pm.sample(sams={"n_gibbs_sweeps": 2})``).  Importing ``pymc_splitmerge`` registers this class first in
    ``pymc.step_methods.STEP_METHODS``.  A split-merge move followed by a Gibbs sweep is the
    robust choice measured by ``benchmarks/mixing.py`` (collapsed Gibbs alone stays stuck
    on the Jain & Neal d = 18 data); many cheap cluster-anchor updates per draw mix the number
    of clusters of overlapping data several times faster per CPU second than one uniform-anchor
    update (``benchmarks/default_step.py``: a draw's fixed costs, the Gibbs sweep and the
    concentration update, are shared by the 50 updates).

    A partition of a single observation has one possible value: the step then leaves it as
    it is (stats as for "nothing proposed"), where an explicit ``SAMSStep`` refuses it.

    Parameters
    ----------
    vars : TensorVariable or list of one TensorVariable
    n_gibbs_sweeps : int, default 1
    anchor_proposal : str, default "cluster"
    n_split_merge_updates : int, optional
        Updates per draw, or per round when alternated (``n_rounds``).  50 by default.  When
        a hyperparameter of the component family is a free random variable (or depends on
        one) and there are at most ``random_family_max_points`` (1,000) points:
        ``random_family_round_split_merge_updates`` (35) per round when alternated,
        ``random_family_split_merge_updates`` (100) per draw when not (e.g. with a
        hyperparameter step given by the user).
    n_rounds : int, optional
        Rounds per draw when ``pm.sample`` also assigns a :class:`HyperparameterSlice` to
        the random hyperparameters of this partition's component family: the two steps are
        then applied ``n_rounds`` times per draw, in an
        :class:`~pymc_splitmerge.steps.alternation.AlternatingStep`, each round with its
        share of the slice moves and ``n_split_merge_updates`` updates.  Default
        ``random_family_rounds`` (2) in the case above (when ``n_split_merge_updates`` is
        not given), else 1.  The labels and those hyperparameters move each other, so the
        number of clusters mixes slowly per draw; alternating twice with 35 updates each
        mixes it faster per CPU second than once with 100
        (``benchmarks/hierarchical.py --parts coupling`` and ``--parts iris``).  On large
        data the updates dominate the draw and one round of 50 is kept (``--parts large``).
        No effect on a step that is not alternated with a hyperparameter step.
    concentration : TensorVariable, optional
        The ``alpha`` of the partition's ``DirichletProcess``: a ``pm.Gamma`` variable with
        constant parameters that influences nothing else in the model.  The step then owns
        it: the split-merge updates and the sweep see the partition's prior with alpha
        integrated out (:class:`~pymc_splitmerge.priors.GammaMixedDirichletProcessPrior`,
        tables built once), and after them alpha is drawn from ``p(alpha | K, n)``, so the
        pair (partition, alpha) moves with the right joint law.  ``pm.sample()`` gives the
        step the concentration by itself when it would otherwise assign
        :class:`ConcentrationGibbs` to it (:func:`integrate_concentration_out`), for at most
        ``concentration_max_points`` points; a user's explicit steps are never changed.
        Per CPU second the number of clusters mixes faster than with the Escobar–West
        update alternated with the partition step (``benchmarks/default_step.py``).
    **kwargs
        Other :class:`SAMSStep` parameters.
    """

    minimum_points = 1

    #: most points for which the step integrates the concentration out: its table of
    #: ``V(n, K)`` takes ``n + 2`` quadratures (about 1 CPU s at 10,000 points, once)
    concentration_max_points = 10_000

    #: When a hyperparameter of the component family is random and there are at most
    #: ``random_family_max_points`` points: split-merge updates per draw of a step that is not
    #: alternated, rounds per draw (``n_rounds``) and updates per round when it is
    #: (``benchmarks/hierarchical.py --parts iris``); 50 updates in one round otherwise.
    random_family_split_merge_updates = 100
    random_family_rounds = 2
    random_family_round_split_merge_updates = 35
    random_family_max_points = 1000

    def __init__(self, vars, n_gibbs_sweeps: int = 1, anchor_proposal: str = "cluster",
                 n_split_merge_updates: int | None = None, n_rounds: int | None = None,
                 concentration=None, **kwargs):
        super().__init__(vars, n_gibbs_sweeps=n_gibbs_sweeps, anchor_proposal=anchor_proposal,
                         n_split_merge_updates=50 if n_split_merge_updates is None
                         else n_split_merge_updates, **kwargs)
        self.n_rounds = 1 if n_rounds is None else positive_integer(n_rounds, "n_rounds")
        self.default_n_split_merge_updates = n_split_merge_updates is None
        if (n_split_merge_updates is None and self.n_points <= self.random_family_max_points
                and self.partition_model.random_family):
            self.n_split_merge_updates = self.random_family_split_merge_updates
            self.transition = self.build_transition()
            if n_rounds is None:
                self.n_rounds = self.random_family_rounds
        self.concentration_value_name = None
        if concentration is not None:
            reason = self.integrate_concentration(concentration)
            if reason is not None:
                raise ValueError(f"DefaultPartitionStep cannot own the concentration: {reason}")

    def integrate_concentration(self, var) -> str | None:
        """Own the concentration ``var`` (see ``concentration`` above); returns None, or
        why it cannot (the step is then unchanged)."""
        model = self.model
        value_var = model.rvs_to_values.get(var, var)
        rv = model.values_to_rvs.get(value_var)
        name = getattr(rv if rv is not None else var, "name", var)
        if rv is None or rv is not self.partition_model.concentration_var or (
                self.partition_model.prior_class is not DirichletProcessPrior):
            return f"{name!r} is not the alpha of the DirichletProcess {self.value_name!r}"
        if not isinstance(rv.owner.op, GammaRV):
            return f"{name!r} has a {type(rv.owner.op).__name__} prior, not a pm.Gamma"
        try:
            _find_parameter_role(rv, model)  # influences nothing but the partition prior
        except ValueError as error:
            return str(error)
        shape, scale = _dist_params(rv)
        shape, rate = _constant(shape), _constant(1.0 / scale)
        pair = _transform_pair(rv, model)
        if shape is None or rate is None or pair is None:
            return f"the parameters of the Gamma prior of {name!r} are not constants"
        if self.n_points > self.concentration_max_points:
            return (f"{self.n_points} points, more than concentration_max_points = "
                    f"{self.concentration_max_points}")
        prior = GammaMixedDirichletProcessPrior(shape=shape, rate=rate)
        self.fixed_prior = (prior, PriorTables(*prior.tables(self.n_points)))
        self._prior = None  # the next draw takes the fixed prior
        self.concentration_value_name = value_var.name
        self._concentration_dtype = value_var.dtype
        self._concentration_forward = pair[1]
        self.vars = [*self.vars, value_var]
        return None

    def draw_concentration(self, n_clusters: int) -> float:
        """Alpha from ``p(alpha | K, n)`` (the step owns the concentration)."""
        return self.fixed_prior[0].draw_concentration(self.n_points, n_clusters, self.rng)

    def step(self, point):
        new_point, stats = super().step(point)
        if self.concentration_value_name is not None:  # alpha | K after the partition
            alpha = self.draw_concentration(self._state.n_clusters)
            new_point[self.concentration_value_name] = np.asarray(
                self._concentration_forward(alpha), dtype=self._concentration_dtype)
        return new_point, stats


def integrate_concentration_out(steps: list, provided=()) -> list:
    """``steps`` (the list of steps PyMC's ``instantiate_steppers`` returned) with each
    assigned pair of a :class:`DefaultPartitionStep` and the :class:`ConcentrationGibbs` of
    its Dirichlet process's alpha replaced by the partition step owning alpha
    (``DefaultPartitionStep.integrate_concentration``), where it can.

    Only steps PyMC assigned (not in ``provided``); a pair the partition step cannot own
    (Gamma parameters that are not constants, too many points) is left as it is.  Returns a
    list.
    """
    chosen = [step for step in steps if not any(step is other for other in provided)]
    partitions = {step.value_name: step for step in chosen
                  if type(step) is DefaultPartitionStep and step.fixed_prior is None}
    owned = []
    for step in chosen:
        if type(step) is ConcentrationGibbs and len(step.vars) == 1:
            partition = partitions.get(step.partition_value_name)
            if partition is not None and partition.integrate_concentration(step.vars[0]) is None:
                owned.append(step)
    return [step for step in steps if not any(step is other for other in owned)]
