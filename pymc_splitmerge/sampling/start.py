"""A split-merge burn-in start for the partition variables of a model.

From the default start (every point in one cluster) a split-merge sampler with uniform anchors
separates well-separated clusters quickly at first, but the last merged pairs split only when
both anchors fall in the same pair (about 1 % of proposals with 20 clusters, far fewer for
small clusters), and at large ``n`` every draw pays a Gibbs sweep over all points.
:func:`splitmerge_start` does that burn-in on a random subsample, where a split-merge move
costs little, with anchors drawn cluster by cluster (every cluster, small or large, is
proposed for a split equally often), then places the other points greedily; ``pm.sample``
starts from the result (``initvals``).  Measured in ``benchmarks/scale.py --vi``
(``docs/benchmarks.md``, "The split-merge start").
"""

from __future__ import annotations

import numpy as np
import pymc as pm

from pymc_splitmerge.core.relabel import canonical_labels
from pymc_splitmerge.distributions import discover
from pymc_splitmerge.distributions.priors import PartitionPriorRV
from pymc_splitmerge.kernels.allocation import allocate_greedily
from pymc_splitmerge.kernels.options import non_negative_integer, positive_integer
from pymc_splitmerge.kernels.sams import build_sams_move
from pymc_splitmerge.kernels.splitmerge_common import build_moves_then_gibbs
from pymc_splitmerge.kernels.state import PartitionState, PriorTables
from pymc_splitmerge.steps.base import partition_value_and_random_variable

__all__ = ["splitmerge_start"]


def splitmerge_start(vars=None, model=None, *, subsample_size: int = 2000,
                     split_merge_moves: int = 2000, gibbs_draws: int = 10,
                     chains: int | None = None, point=None, random_seed=None):
    """Start labels for ``pm.sample``: a split-merge burn-in on a subsample, then greedy placement.

    For each partition variable, on ``subsample_size`` points drawn at random without
    replacement:

    1. ``split_merge_moves`` SAMS split-merge updates (Dahl 2003) with cluster anchors (no
       Gibbs sweep: each costs time proportional to the clusters involved only): half of
       them pick a cluster uniformly and two of its points as anchors, half two clusters
       and one point in each, with the anchor law's ratio in the acceptance ratio (an exact
       Metropolis–Hastings chain; ``build_sams_move(cluster_anchors=True)``), from
       the labels of ``point`` restricted to the subsample (by default the model's initial
       point, every point in one cluster);
    2. ``gibbs_draws`` SAMS updates each followed by one collapsed Gibbs sweep of the
       subsample;
    3. every other point, in random order, joins the cluster with the largest prior-weighted
       posterior predictive weight given the points already placed, ``W(m_b + 1) / W(m_b) *
       p(x_i | x_b)``, or opens a new cluster if ``V(n, K + 1) / V(n, K) * W(1) * p(x_i)`` is
       larger (the weights of a collapsed Gibbs update, taken at their maximum;
       :mod:`pymc_splitmerge.kernels.allocation`).

    Stages 1 and 2 use the model's prior on the subsample (``prior.tables(subsample_size)``)
    and stage 3 the prior on all ``n`` points, with the component family's own predictive,
    so the same rule serves every registered family and partition prior.  The whole start
    costs about one Gibbs sweep of the full data plus a fraction of a second.

    The start only sets the initial state of the chains; it does not change what they
    sample: every partition step of this package leaves the exact posterior invariant, from
    any start.  A better start shortens the burn-in (the draws to discard), nothing else.

    Parameters
    ----------
    vars : TensorVariable, str, list of them, pymc.Model or None
        The partition variable(s) to start (the random variable, its value variable or its
        name).  ``None`` (or a model): every partition variable of the model.
    model : pymc.Model, optional
        Defaults to ``vars`` if it is a model, else the model on the context stack.
    subsample_size : int, default 2000
        Points in the subsample (all points if ``n`` is not larger).
    split_merge_moves : int, default 2000
        Pure SAMS updates on the subsample (stage 1).
    gibbs_draws : int, default 10
        SAMS + one Gibbs sweep updates on the subsample (stage 2).
    chains : int, optional
        If given, return one start per chain (independent subsamples and moves), as the
        list ``pm.sample(chains=chains, initvals=...)`` takes.
    point : dict, optional
        A PyMC point (value-variable names to values) giving the hyperparameters (random
        concentration, random family hyperparameters) and the labels stage 1 starts from.
        Default: ``model.initial_point()``.
    random_seed : int, numpy.random.Generator or None
        Seed of the subsample, the moves and the allocation order: the same seed gives the
        same labels.

    Returns
    -------
    dict or list of dict
        ``{name: labels}`` for every partition variable started, ``labels`` an integer array
        of shape ``(n,)`` in the variable's dtype (canonical: clusters numbered ``0..K-1`` by
        first appearance); a list of ``chains`` such dicts if ``chains`` is given.  Pass it
        as ``pm.sample(initvals=...)``.

    Raises
    ------
    TypeError
        If a given variable is not a partition variable of this package, no model is given
        or on the context stack, or ``random_seed`` is not an int, a Generator or None.
    ValueError
        If the model has no partition variable, an option is out of range, or the start of
        stage 1 (the labels of ``point``) is outside the prior's support.

    See Also
    --------
    SAMSStep, CollapsedGibbsStep

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_splitmerge as psm
    >>> y = np.random.default_rng(0).normal(size=(500, 2))
    >>> with pm.Model() as model:
    ...     z = psm.DirichletProcess("z", alpha=1.0, n=len(y))
    ...     _ = psm.ConjugateMixture("y", partition=z, component=psm.NormalInverseWishart(
    ...         mu0=np.zeros(2), kappa0=0.1, nu0=4.0, psi0=np.eye(2)), observed=y)
    >>> start = psm.splitmerge_start(model, random_seed=1)
    >>> start["z"].shape
    (500,)
    >>> # idata = pm.sample(initvals=start, model=model)

    References
    ----------
    Dahl, D. B. (2003). An improved merge-split sampler for conjugate Dirichlet process
    mixture models. Technical Report 1086, University of Wisconsin–Madison.
    Neal, R. M. (2000). Markov chain sampling methods for Dirichlet process mixture models.
    Journal of Computational and Graphical Statistics 9(2), 249–265.
    """
    if isinstance(vars, pm.Model):
        if model is not None and model is not vars:
            raise ValueError("pass the model once: as vars or as model=, not two models")
        model, vars = vars, None
    try:
        model = pm.modelcontext(model)
    except TypeError as error:
        raise TypeError("splitmerge_start needs the model: call it inside `with model:` or "
                        "pass model=model") from error
    subsample_size = positive_integer(subsample_size, "subsample_size")
    split_merge_moves = non_negative_integer(split_merge_moves, "split_merge_moves")
    gibbs_draws = non_negative_integer(gibbs_draws, "gibbs_draws")
    if chains is not None:
        chains = positive_integer(chains, "chains")
    random_variables = _partition_variables(vars, model)
    if point is None:
        point = model.initial_point()
    seeds = np.random.SeedSequence(_entropy(random_seed))
    starts = []
    for chain_seed in seeds.spawn(1 if chains is None else chains):
        start = {}
        for rv, var_seed in zip(random_variables, chain_seed.spawn(len(random_variables)),
                                strict=True):
            labels = _start_labels(rv, model, point, np.random.default_rng(var_seed),
                                   subsample_size, split_merge_moves, gibbs_draws)
            start[rv.name] = labels.astype(rv.dtype)
        starts.append(start)
    return starts[0] if chains is None else starts


def _entropy(random_seed):
    if isinstance(random_seed, np.random.Generator):
        return int(random_seed.integers(2**63))
    if random_seed is None or isinstance(random_seed, int | np.integer):
        return None if random_seed is None else int(random_seed)
    raise TypeError(f"random_seed must be an int, a numpy Generator or None; got "
                    f"{type(random_seed).__name__}")


def _partition_variables(vars, model) -> list:
    if vars is None:
        found = [rv for rv in model.free_RVs
                 if rv.owner is not None and isinstance(rv.owner.op, PartitionPriorRV)]
        if not found:
            raise ValueError(
                "the model has no partition variable (DirichletProcess, PitmanYor, "
                "FiniteDirichlet or MixtureOfFiniteMixtures): nothing to start")
        return found
    if not isinstance(vars, list | tuple):
        vars = [vars]
    found = []
    for var in vars:
        if isinstance(var, str):
            if var not in model.named_vars:
                raise ValueError(f"the model has no variable named {var!r}")
            var = model.named_vars[var]
        _, rv = partition_value_and_random_variable(var, model)
        found.append(rv)
    return found


def _start_labels(rv, model, point, rng, subsample_size, split_merge_moves, gibbs_draws):
    partition_model = discover(rv, model)
    value_name = model.rvs_to_values[rv].name
    if value_name not in point:
        raise ValueError(f"point has no value for the partition variable {value_name!r}")
    prior = partition_model.numeric_prior(point)
    family = partition_model.numeric_family(point)
    x = partition_model.data
    n = x.shape[0]
    initial = np.asarray(point[value_name]).astype(np.int64)
    if initial.shape != (n,):
        raise ValueError(f"point[{value_name!r}] has shape {initial.shape}; expected ({n},)")
    size = min(subsample_size, n)
    subset = rng.choice(n, size=size, replace=False)
    state = PartitionState(family, x[subset], initial[subset])
    tables = PriorTables(*prior.tables(size))
    log_joint = state.log_joint(prior)
    if not np.isfinite(log_joint):
        raise ValueError(
            f"the labels of {value_name!r} in point, restricted to the subsample, have log "
            f"joint density {log_joint} (outside the support): give a point whose labels "
            "the prior and the data allow, e.g. every point in one cluster")
    if size >= 2:
        # stage 1 in one compiled loop (cluster-anchor SAMS, no Python round trip per update;
        # merges settled by an early-rejection bound; 2,000 updates on 2,000 points of the
        # 2-D benchmark ~0.05 s)
        build_sams_move(cluster_anchors=True).run_updates(
            state.model, state.partition, tables, split_merge_moves, rng)
        polish = build_moves_then_gibbs(build_sams_move(), n_moves=1, n_gibbs_sweeps=1)
        for _ in range(gibbs_draws):
            polish(state.model, state.partition, tables, rng)
    labels = np.full(n, -1, dtype=np.int64)
    labels[subset] = state.slot_labels
    rest = np.flatnonzero(labels < 0)
    if rest.size == 0:
        return canonical_labels(labels)
    log_v_table, log_w_table = prior.tables(n)
    return allocate_greedily(family, x, labels, rng.permutation(rest), log_v_table, log_w_table)
