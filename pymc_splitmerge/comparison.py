r"""The same mixture models written with PyMC's built-in distributions, for side-by-side runs.

A PyMC user without this package writes a mixture with a truncated number of components
``K`` and either keeps the labels as a random variable or sums them out:

* **explicit labels**::

      weights ~ StickBreaking(alpha, K)  or  Dirichlet(alpha, ..., alpha)
      theta_k ~ H (k = 1..K)
      z_i ~ Categorical(weights),   y_i ~ F(theta_{z_i})

  ``pm.sample`` assigns NUTS to the weights and ``theta`` and ``CategoricalGibbsMetropolis``
  to ``z`` (:func:`describe_step_assignment` prints what it chose);
* **labels marginalised**: ``log p(y | weights, theta) = sum_i logsumexp_k(log weights_k +
  log F(y_i | theta_k))`` as a ``pm.Potential``; NUTS samples everything.

``StickBreaking(alpha, K)`` is the truncated stick-breaking representation of the Dirichlet
process (Sethuraman 1994; Ishwaran & James 2001): ``v_k ~ Beta(1, alpha)`` for ``k < K``,
``weights_k = v_k prod_{l<k} (1 - v_l)`` and the last component takes the rest.  With
``Dirichlet(alpha, ..., alpha)`` weights over ``K`` components the model is *exactly*
:class:`~pymc_splitmerge.FiniteDirichlet` ``(alpha, k=K)`` with the component parameters
integrated out, so a comparison cannot be blamed on truncation.  The component priors are read
from this package's family objects (``BetaBernoulli(a, b)``: ``theta_kj ~ Beta(a, b)``;
``NormalKnownCovariance(mu0, sigma0, sigma)``: ``theta_k ~ N(mu0, sigma0)``,
``y_i ~ N(theta_{z_i}, sigma)``), so both sides have the same priors.

Every contender is judged by the same code: :func:`labels_from_parameters` draws, for each
posterior draw of ``(weights, theta)``, labels from ``p(z | weights, theta, y)`` (independent
over observations) and canonicalises them, and the package's analysis functions
(:func:`~pymc_splitmerge.summary`, ...) then read them as they read our own traces.
:func:`sample_builtin_mixture` does all of this in one call and returns a trace whose
posterior holds canonical labels ``z``.

References
----------
Ishwaran, H. and James, L. F. (2001). Gibbs sampling methods for stick-breaking priors.
J. Amer. Statist. Assoc. 96(453), 161-173.
Jain, S. and Neal, R. M. (2004). A split-merge Markov chain Monte Carlo procedure for the
Dirichlet process mixture model. J. Comput. Graph. Statist. 13(1), 158-182.
"""

from __future__ import annotations

import time

import arviz as az
import matplotlib.pyplot as plt
import numpy as np
import pymc as pm
import pytensor.tensor as pt
import xarray as xr
from pymc.sampling.mcmc import assign_step_methods

from pymc_splitmerge.analysis import _arviz_compat as compat
from pymc_splitmerge.analysis._labels import canonicalize, partition_draws
from pymc_splitmerge.analysis.quantities import block_fractions
from pymc_splitmerge.components import BetaBernoulli, NormalKnownCovariance

__all__ = [
    "WallClockBudget",
    "builtin_mixture_model",
    "describe_step_assignment",
    "labels_from_parameters",
    "log_predictive_draws",
    "plot_largest_fraction",
    "replace_labels",
    "sample_builtin_mixture",
    "sample_with_budget",
]

WEIGHT_KINDS = ("stick_breaking", "dirichlet")
LABEL_KINDS = ("explicit", "marginal")


def _family_arrays(family, dim: int) -> dict:
    """Numeric hyperparameters of a supported family, broadcast to the data dimension."""
    values = family.hyperparameters
    if isinstance(family, BetaBernoulli):
        return {"a": np.broadcast_to(np.asarray(values["a"], dtype=float), (dim,)).copy(),
                "b": np.broadcast_to(np.asarray(values["b"], dtype=float), (dim,)).copy()}
    if isinstance(family, NormalKnownCovariance):
        def matrix(value):
            array = np.asarray(value, dtype=float)
            return array * np.eye(dim) if array.ndim == 0 else array.reshape(dim, dim)

        return {"mu0": np.broadcast_to(np.asarray(values["mu0"], dtype=float), (dim,)).copy(),
                "sigma0": matrix(values["sigma0"]), "sigma": matrix(values["sigma"])}
    raise TypeError(
        f"built-in PyMC versions exist for BetaBernoulli and NormalKnownCovariance components, "
        f"got {type(family).__name__}"
    )


def _check_inputs(data, family, n_components, weights, labels, alpha):
    data = np.asarray(data)
    if data.ndim != 2 or data.shape[0] < 1:
        raise ValueError(f"data must have shape (n, dim), got shape {data.shape}")
    if weights not in WEIGHT_KINDS:
        raise ValueError(f"weights must be one of {WEIGHT_KINDS}, got {weights!r}")
    if labels not in LABEL_KINDS:
        raise ValueError(f"labels must be one of {LABEL_KINDS}, got {labels!r}")
    if int(n_components) != n_components or n_components < 2:
        raise ValueError(f"n_components must be an integer >= 2, got {n_components!r}")
    if not float(alpha) > 0:
        raise ValueError(f"alpha must be > 0, got {alpha!r}")
    if not family.is_numeric:
        raise ValueError("the component family needs numeric hyperparameters here")
    if isinstance(family, BetaBernoulli) and not np.isin(data, (0, 1)).all():
        raise ValueError("BetaBernoulli data must be 0/1")
    return data


def builtin_mixture_model(data, family, n_components: int = 20, *, weights="stick_breaking",
                          alpha: float = 1.0, labels: str = "explicit"):
    """A truncated mixture written with PyMC's built-in distributions only.

    Parameters
    ----------
    data : array_like of shape (n, dim)
        Observations (0/1 for ``BetaBernoulli``).
    family : BetaBernoulli or NormalKnownCovariance
        This package's component family with numeric hyperparameters; it fixes the prior of
        the component parameters ``theta`` (see the module docstring).
    n_components : int, default 20
        Truncation level / number of components ``K``.
    weights : {"stick_breaking", "dirichlet"}
        Truncated stick-breaking with ``Beta(1, alpha)`` sticks (a truncated DP(alpha)), or
        symmetric ``Dirichlet(alpha, ..., alpha)`` weights (exactly
        ``FiniteDirichlet(alpha, k=n_components)``).
    alpha : float, default 1.0
    labels : {"explicit", "marginal"}
        ``"explicit"``: ``z ~ Categorical(weights)`` of shape (n,) and the likelihood given
        ``z``; ``"marginal"``: the labels summed out in a ``pm.Potential``.

    Returns
    -------
    pymc.Model
        Free variables ``weights`` (through ``sticks`` for stick-breaking), ``theta`` of shape
        (K, dim) (Bernoulli probabilities or component means) and, for explicit labels, ``z``.
    """
    data = _check_inputs(data, family, n_components, weights, labels, alpha)
    n, dim = data.shape
    k = int(n_components)
    hyper = _family_arrays(family, dim)
    with pm.Model() as model:
        if weights == "stick_breaking":
            sticks = pm.Beta("sticks", 1.0, float(alpha), shape=k - 1)
            remaining = pt.concatenate([[1.0], pt.cumprod(1.0 - sticks)])
            weight = pm.Deterministic(
                "weights", pt.concatenate([sticks, [1.0]]) * remaining)
        else:
            weight = pm.Dirichlet("weights", a=np.full(k, float(alpha)))
        if isinstance(family, BetaBernoulli):
            theta = pm.Beta("theta", alpha=hyper["a"], beta=hyper["b"], shape=(k, dim))
        else:
            theta = pm.MvNormal("theta", mu=hyper["mu0"], cov=hyper["sigma0"], shape=(k, dim))
        if labels == "explicit":
            z = pm.Categorical("z", p=weight, shape=n)
            if isinstance(family, BetaBernoulli):
                pm.Bernoulli("y", p=theta[z], observed=data)
            else:
                pm.MvNormal("y", mu=theta[z], cov=hyper["sigma"], observed=data)
        else:
            log_components = _log_component_likelihood(pt, family, data, theta, hyper)
            pm.Potential("y_marginal", pm.math.logsumexp(
                pt.log(weight)[None, :] + log_components, axis=1).sum())
    return model


def _log_component_likelihood(xp, family, data, theta, hyper):
    """log F(y_i | theta_k) as an (n, K) array; ``xp`` is numpy or pytensor.tensor."""
    if isinstance(family, BetaBernoulli):
        return xp.dot(data, xp.log(theta).T) + xp.dot(1.0 - data, xp.log1p(-theta).T)
    sigma = hyper["sigma"]
    cholesky = np.linalg.cholesky(sigma)
    whitening = np.linalg.inv(cholesky)  # constant (known covariance)
    dim = sigma.shape[0]
    constant = -0.5 * dim * np.log(2 * np.pi) - np.log(np.diag(cholesky)).sum()
    white_data = data @ whitening.T                      # (n, dim)
    white_theta = xp.dot(theta, whitening.T)             # (K, dim)
    squares = ((white_data ** 2).sum(axis=1)[:, None] - 2.0 * xp.dot(white_data, white_theta.T)
               + (white_theta ** 2).sum(axis=1)[None, :])
    return constant - 0.5 * squares


def _posterior_arrays(idata, name):
    posterior = compat.posterior_with_labels(idata)
    if name not in posterior:
        raise ValueError(f"the posterior has no variable {name!r}; it has {list(posterior)}")
    return np.asarray(posterior[name].transpose("chain", "draw", ...).values, dtype=float)


def labels_from_parameters(idata, data, family, rng=None) -> np.ndarray:
    """Draw labels from ``p(z | weights, theta, y)`` for every posterior draw.

    Given the weights and the component parameters the labels are independent over
    observations, ``P(z_i = k) ∝ weights_k F(y_i | theta_k)``; one draw of them per posterior
    draw turns a trace of the label-marginalised model into partition draws (for the
    explicit-label model it gives a fresh draw of ``z`` from its full conditional).

    Parameters
    ----------
    idata : InferenceData or DataTree
        Trace of :func:`builtin_mixture_model` (variables ``weights`` and ``theta``).
    data : array_like of shape (n, dim)
    family : BetaBernoulli or NormalKnownCovariance
    rng : numpy.random.Generator or int, optional

    Returns
    -------
    ndarray of int64, shape (chain, draw, n)
        Canonical labels.
    """
    rng = np.random.default_rng(rng)
    data = np.asarray(data, dtype=float)
    hyper = _family_arrays(family, data.shape[1])
    weights = _posterior_arrays(idata, "weights")
    theta = _posterior_arrays(idata, "theta")
    chains, draws = weights.shape[:2]
    out = np.empty((chains, draws, data.shape[0]), dtype=np.int64)
    with np.errstate(divide="ignore"):
        for c in range(chains):
            for d in range(draws):
                log_p = np.log(weights[c, d])[None, :] + _log_component_likelihood(
                    np, family, data, theta[c, d], hyper)
                gumbel = -np.log(-np.log(rng.random(log_p.shape)))
                out[c, d] = np.argmax(log_p + gumbel, axis=1)
    return canonicalize(out)


def log_predictive_draws(idata, family, new_data, data_dim: int | None = None) -> np.ndarray:
    """``log p(y*_j | weights, theta)`` of held-out rows for every posterior draw.

    Parameters
    ----------
    idata : InferenceData or DataTree
        Trace of :func:`builtin_mixture_model`.
    family : BetaBernoulli or NormalKnownCovariance
    new_data : array_like of shape (m, dim)

    Returns
    -------
    ndarray of shape (chain, draw, m)
        Average ``exp`` of it over draws (then ``log``) is the held-out posterior predictive
        density.
    """
    new_data = np.asarray(new_data, dtype=float)
    hyper = _family_arrays(family, new_data.shape[1])
    weights = _posterior_arrays(idata, "weights")
    theta = _posterior_arrays(idata, "theta")
    chains, draws = weights.shape[:2]
    out = np.empty((chains, draws, new_data.shape[0]))
    with np.errstate(divide="ignore"):
        for c in range(chains):
            for d in range(draws):
                log_p = np.log(weights[c, d])[None, :] + _log_component_likelihood(
                    np, family, new_data, theta[c, d], hyper)
                top = log_p.max(axis=1, keepdims=True)
                out[c, d] = (top + np.log(np.exp(log_p - top).sum(axis=1, keepdims=True)))[:, 0]
    return out


def describe_step_assignment(model) -> list[str]:
    """What ``pm.sample`` assigns to each free variable of ``model``, as lines of text."""
    _, selected = assign_step_methods(model)
    lines = []
    for step_class, variables in selected.items():
        if variables:
            names = ", ".join(getattr(model.values_to_rvs.get(v, v), "name", str(v))
                              for v in variables)
            lines.append(f"{step_class.__name__}: [{names}]")
    return lines


class WallClockBudget:
    """``pm.sample`` callback that stops each chain after ``seconds`` of wall-clock time.

    PyMC documents interrupting a chain by raising ``KeyboardInterrupt`` in the callback; it
    then keeps the draws made so far (all chains cut to a common length).  A chain's clock
    starts at its first draw (the first draw's own duration is estimated by the second's).
    ``times[chain]`` lists, for every draw (tuning included), the seconds since the chain
    started.

    Parameters
    ----------
    seconds : float or None
        Budget per chain (None: never stop, only record times).
    """

    def __init__(self, seconds: float | None):
        self.seconds = None if seconds is None else float(seconds)
        self.times: dict[int, list[float]] = {}
        self._stamps: dict[int, list[float]] = {}

    def __call__(self, trace, draw):
        now = time.perf_counter()
        stamps = self._stamps.setdefault(int(draw.chain), [])
        stamps.append(now)
        first = stamps[1] - stamps[0] if len(stamps) > 1 else 0.0
        elapsed = now - stamps[0] + first
        if self.seconds is not None and elapsed >= self.seconds:
            raise KeyboardInterrupt

    def chain_times(self) -> dict[int, np.ndarray]:
        """Seconds since the start of the chain at the end of each draw, per chain."""
        out = {}
        for chain, stamps in self._stamps.items():
            stamps = np.asarray(stamps)
            first = stamps[1] - stamps[0] if stamps.size > 1 else 0.0
            out[chain] = stamps - stamps[0] + first
        return out


def _trace_from_arrays(values: dict):
    """An InferenceData (ArviZ 0.x) or DataTree (ArviZ 1.x) with ``values`` as posterior."""
    if compat.ARVIZ_MAJOR >= 1:
        return az.from_dict({"posterior": values})
    return az.from_dict(posterior=values)


def sample_with_budget(model, *, seconds: float | None, chains: int = 4, draws: int = 1000,
                       tune: int = 1000, step=None, random_seed=None, initvals=None,
                       **sample_kwargs):
    """Run ``chains`` chains of ``pm.sample`` one after another, each within ``seconds``.

    Each chain is its own ``pm.sample(chains=1)`` call with a :class:`WallClockBudget`; the
    chains are then cut to their common length and stacked (PyMC's own handling of an
    interrupted multi-chain run would drop the shorter chains instead).

    Parameters
    ----------
    model : pymc.Model
    seconds : float or None
        Budget per chain (None: run ``tune + draws`` iterations).
    chains, draws, tune, random_seed, initvals, **sample_kwargs
        As in ``pm.sample``; ``draws`` is a cap when ``seconds`` is given.
    step : callable returning the step methods, optional
        Called once per chain (None: what ``pm.sample`` assigns).

    Returns
    -------
    trace : InferenceData or DataTree, or None
        Posterior of the chains that reached past tuning (None if none did): the model's
        variables, a partition's labels included (in the posterior, as for PyMC's built-in
        samplers).
    times : list of ndarray
        Per kept chain, seconds since its start at the end of every iteration (tuning
        included).
    failed : list of float
        Seconds spent by each chain that stopped before the end of tuning.
    """
    seeds = np.random.default_rng(random_seed).integers(2**31 - 1, size=int(chains))
    kept, times, failed = [], [], []
    for chain in range(int(chains)):
        budget = WallClockBudget(seconds)
        try:
            with model:
                trace = pm.sample(draws=draws, tune=tune, chains=1, cores=1,
                                  step=step() if step is not None else None,
                                  random_seed=int(seeds[chain]), initvals=initvals,
                                  progressbar=False, compute_convergence_checks=False,
                                  callback=budget, **sample_kwargs)
        except ValueError as error:  # every iteration was a tuning iteration
            if "Not enough samples" not in str(error):
                raise
            spent = budget.chain_times()
            failed.append(float(spent[0][-1]) if spent else float("nan"))
            continue
        # the model's variables, labels included (pm.sample keeps them in group "labels");
        # the label-invariant quantities differ in length between chains and are left out
        posterior = compat.posterior_with_labels(trace)
        kept.append({str(name): np.asarray(variable.values[0])
                     for name, variable in posterior.data_vars.items()
                     if name in model.named_vars})
        times.append(budget.chain_times()[0])
    if not kept:
        return None, times, failed
    length = min(next(iter(values.values())).shape[0] for values in kept)
    stacked = {name: np.stack([values[name][:length] for values in kept])
               for name in kept[0]}
    return _trace_from_arrays(stacked), times, failed


def sample_builtin_mixture(data, family, n_components: int = 20, *, weights="stick_breaking",
                           alpha: float = 1.0, labels: str = "explicit", draws: int = 1000,
                           tune: int = 1000, chains: int = 4, random_seed=None,
                           seconds_per_chain: float | None = None, **sample_kwargs):
    """Sample :func:`builtin_mixture_model` with what ``pm.sample`` assigns; canonical labels.

    The returned trace's posterior variable ``z`` holds canonical labels: for explicit labels
    the sampled ``z`` relabelled, for marginalised labels one draw from
    ``p(z | weights, theta, y)`` per posterior draw (:func:`labels_from_parameters`).  Hence
    ``psm.summary(idata, var_name="z")``, ``psm.plot_block_fractions`` etc. work unchanged.

    Parameters
    ----------
    data, family, n_components, weights, alpha, labels
        As in :func:`builtin_mixture_model`.
    draws, tune, chains, random_seed
        Passed to ``pm.sample`` (``cores=1``, chains in sequence, see
        :func:`sample_with_budget`).
    seconds_per_chain : float, optional
        Stop each chain after this much wall-clock time; ``draws`` is then a cap.
    **sample_kwargs
        Further arguments of ``pm.sample``.

    Returns
    -------
    InferenceData or DataTree
        Posterior attributes ``step_assignment`` (what ``pm.sample`` chose) and
        ``seconds`` (sampling wall-clock time per chain, tuning included).

    Raises
    ------
    RuntimeError
        If no chain got past tuning within ``seconds_per_chain``.
    """
    model = builtin_mixture_model(data, family, n_components, weights=weights, alpha=alpha,
                                  labels=labels)
    idata, times, _ = sample_with_budget(model, seconds=seconds_per_chain, chains=chains,
                                         draws=draws, tune=tune, random_seed=random_seed,
                                         **sample_kwargs)
    if idata is None:
        raise RuntimeError(f"no chain got past its {tune} tuning iterations within "
                           f"{seconds_per_chain} s; give more time or fewer tuning iterations")
    rng = np.random.default_rng(None if random_seed is None else np.asarray(random_seed).sum())
    replace_labels(idata, labels_from_parameters(idata, data, family, rng)
                   if labels == "marginal" else None)
    _set_posterior_attrs(idata, {
        "step_assignment": "; ".join(describe_step_assignment(model)),
        "seconds": float(np.mean([t[-1] for t in times]))})
    return idata


def _set_posterior_attrs(idata, attrs):
    if compat.is_datatree(idata):
        idata["posterior"].attrs.update(attrs)
    else:
        idata.posterior.attrs.update(attrs)


def replace_labels(idata, labels=None, var_name: str = "z"):
    """Store canonical labels as posterior variable ``var_name`` (in place; returns ``idata``).

    ``labels`` of shape (chain, draw, n); None canonicalises the variable already there.
    """
    posterior = compat.get_group(idata, "posterior")
    if labels is None:
        labels = canonicalize(posterior[var_name].transpose("chain", "draw", ...).values)
    n = labels.shape[-1]
    variable = xr.DataArray(labels, dims=("chain", "draw", f"{var_name}_dim_0"),
                            coords={"chain": posterior.chain.values,
                                    "draw": posterior.draw.values,
                                    f"{var_name}_dim_0": np.arange(n)})
    if var_name in posterior and posterior[var_name].dims[2] != f"{var_name}_dim_0":
        posterior = posterior.drop_vars(var_name)
    posterior = posterior.assign({var_name: variable})
    if compat.is_datatree(idata):
        idata["posterior"] = xr.DataTree(posterior)
    else:
        idata.posterior = posterior
    return idata


def plot_largest_fraction(traces: dict, var_name: str = "z", reference: float | None = None):
    """Largest-cluster fraction of every chain, one panel per trace, side by side.

    Parameters
    ----------
    traces : dict of str -> InferenceData, DataTree or label array (chain, draw, n)
        E.g. ``{"sams+gibbs": idata, "pymc built-in": builtin_idata}``; labels need not be
        canonical.
    var_name : str
    reference : float, optional
        Drawn as a dashed line (e.g. the largest fraction of a long reference run).

    Returns
    -------
    figure, axes
    """
    figure, axes = plt.subplots(1, len(traces), figsize=(3.6 * len(traces), 2.8), sharey=True,
                                squeeze=False)
    for axis, (name, trace) in zip(axes[0], traces.items()):
        labels, _ = partition_draws(trace, None if isinstance(trace, np.ndarray) else var_name)
        largest = block_fractions(labels, 1)[..., 0]
        for chain, values in enumerate(largest):
            axis.plot(values, lw=0.7, label=f"chain {chain}")
        if reference is not None:
            axis.axhline(reference, color="k", ls="--", lw=1, label="reference")
        axis.set_title(name, fontsize=9)
        axis.set_xlabel("draw")
    axes[0, 0].set_ylabel("largest-cluster fraction")
    axes[0, 0].legend(fontsize=7)
    figure.tight_layout()
    return figure, axes
