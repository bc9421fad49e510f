"""Plots of partition draws (matplotlib; every function returns the figure and axes).

References
----------
Jain, S. and Neal, R. M. (2004). A split-merge Markov chain Monte Carlo procedure for the
Dirichlet process mixture model. J. Comput. Graph. Statist. 13(1), 158-182 (Figs 1-3: fraction
of observations in the largest block, two largest, ... along the run).
Wade, S. and Ghahramani, Z. (2018). Bayesian cluster analysis: point estimation and credible
balls. Bayesian Analysis 13(2) (posterior similarity heat map ordered by the estimate).
"""

from __future__ import annotations

import numpy as np

from pymc_splitmerge.analysis._labels import as_labels, partition_draws
from pymc_splitmerge.analysis.point_estimate import PointEstimate, point_estimate
from pymc_splitmerge.analysis.quantities import block_fractions
from pymc_splitmerge.analysis.similarity import posterior_similarity_matrix

__all__ = ["plot_block_fractions", "plot_n_clusters", "plot_similarity_matrix"]


def _pyplot():
    # imported on first use: this module is imported with the package, and pyplot is slow to
    # import and chooses a GUI backend, which users who never plot should not pay for
    import matplotlib.pyplot as plt

    return plt


def plot_block_fractions(data, var_name: str | None = None, *, num_largest: int = 3, axes=None):
    """Trace plot of the fraction of observations in the largest, two largest, ... clusters,
    one panel per chain (Jain & Neal 2004, Figs 1-3).

    Parameters
    ----------
    data : trace or array_like of shape (chain, draw, n)
    num_largest : int
    axes : sequence of matplotlib Axes, optional
        One per chain.

    Returns
    -------
    figure, axes : matplotlib Figure and ndarray of Axes (one per chain)
    """
    labels, _ = partition_draws(data, var_name)
    fractions = block_fractions(labels, num_largest)
    chains = labels.shape[0]
    if axes is None:
        figure, axes = _pyplot().subplots(
            chains, 1, sharex=True, sharey=True, figsize=(8, 1.8 * chains + 0.6), squeeze=False,
            layout="constrained",
        )
        axes = axes[:, 0]
    else:
        axes = np.atleast_1d(np.asarray(axes, dtype=object)).ravel()
        if axes.size != chains:
            raise ValueError(f"need one Axes per chain ({chains}), got {axes.size}")
        figure = axes[0].figure
    iterations = np.arange(labels.shape[1])
    for chain, ax in enumerate(axes):
        for m in range(fractions.shape[-1]):
            label = "largest" if m == 0 else f"{m + 1} largest"
            ax.plot(iterations, fractions[chain, :, m], lw=0.8, label=label)
        ax.set_ylim(0, 1.02)
        ax.set_ylabel(f"chain {chain}")
    axes[0].set_title("fraction of observations in the largest clusters")
    axes[0].legend(loc="lower right", fontsize="small", ncol=fractions.shape[-1])
    axes[-1].set_xlabel("draw")
    return figure, axes


def plot_n_clusters(data, var_name: str | None = None, *, ax=None):
    """Distribution of the number of clusters, one set of bars per chain.

    Returns
    -------
    figure, ax
    """
    labels, _ = partition_draws(data, var_name)
    n_clusters = labels.max(axis=-1) + 1
    if ax is None:
        figure, ax = _pyplot().subplots(figsize=(6, 3.5), layout="constrained")
    else:
        figure = ax.figure
    values = np.arange(n_clusters.min(), n_clusters.max() + 1)
    chains = n_clusters.shape[0]
    width = 0.8 / chains
    for chain in range(chains):
        frequency = np.array([(n_clusters[chain] == v).mean() for v in values])
        ax.bar(values - 0.4 + width * (chain + 0.5), frequency, width=width, label=f"chain {chain}")
    ax.set_xlabel("number of clusters")
    ax.set_ylabel("posterior frequency")
    ax.set_xticks(values)
    ax.legend(fontsize="small")
    return figure, ax


def plot_similarity_matrix(data, var_name: str | None = None, *, order_by=None,
                           similarity_matrix=None, ax=None, cmap: str = "Greys"):
    """Heat map of the posterior similarity matrix, observations ordered by a point estimate.

    Parameters
    ----------
    data : trace or array_like of shape (chain, draw, n)
    order_by : PointEstimate or labels of shape (n,), optional
        Default: the VI point estimate.  Cluster boundaries are drawn as lines.
    similarity_matrix : ndarray of shape (n, n), optional
        Precomputed matrix (computed otherwise).

    Returns
    -------
    figure, ax
    """
    labels, _ = partition_draws(data, var_name)
    n = labels.shape[-1]
    if order_by is None:
        order_by = point_estimate(labels, num_runs=2, rng=0).labels
    elif isinstance(order_by, PointEstimate):
        order_by = order_by.labels
    estimate = as_labels(order_by, "order_by", n=n)
    if similarity_matrix is None:
        similarity_matrix = posterior_similarity_matrix(labels)
    matrix = np.asarray(similarity_matrix)
    if matrix.shape != (n, n):
        raise ValueError(f"similarity_matrix has shape {matrix.shape}, expected ({n}, {n})")
    order = np.argsort(estimate, kind="stable")
    if ax is None:
        figure, ax = _pyplot().subplots(figsize=(5.5, 5), layout="constrained")
    else:
        figure = ax.figure
    image = ax.imshow(matrix[np.ix_(order, order)], cmap=cmap, vmin=0, vmax=1,
                      interpolation="nearest")
    boundaries = np.cumsum(np.bincount(estimate))[:-1] - 0.5
    for b in boundaries:
        ax.axhline(b, color="tab:red", lw=0.6)
        ax.axvline(b, color="tab:red", lw=0.6)
    figure.colorbar(image, ax=ax, label="co-clustering probability")
    ax.set_title("posterior similarity\n(ordered by point estimate)")
    return figure, ax
