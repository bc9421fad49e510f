"""Built-in datasets: simulated from the recipes of the source papers.

Nothing is downloaded; each dataset is generated from an explicit seed so the same
call always returns the same data.
"""

from __future__ import annotations

import numpy as np

__all__ = ["gaussian_blobs", "jain_neal_bernoulli"]

# Jain & Neal (2000), Table 1: P(y_h = 1 | c) for the first six attributes of the five
# equally likely components.  Tables 2 and 3 replicate the last column to 15 and 18
# attributes ("Dimensionality is increased by simply replicating the distribution for the
# last attribute", section 4.2).
_JAIN_NEAL_TABLE_1 = np.array(
    [
        [0.95, 0.95, 0.95, 0.95, 0.95, 0.95],
        [0.05, 0.05, 0.05, 0.05, 0.95, 0.95],
        [0.95, 0.05, 0.05, 0.95, 0.95, 0.95],
        [0.05, 0.05, 0.05, 0.05, 0.05, 0.05],
        [0.95, 0.95, 0.95, 0.95, 0.05, 0.05],
    ]
)


def jain_neal_bernoulli(n_attributes: int = 6, n_per_component: int = 20, seed: int = 0):
    """Binary data from the five-component mixture of Jain & Neal (2000), section 4.2.

    Parameters
    ----------
    n_attributes : int, default 6
        Number of binary attributes (the paper uses 6, 15 and 18); attributes beyond
        the sixth copy the distribution of the sixth.
    n_per_component : int, default 20
        Observations generated from each of the five components (the paper: 20,
        so n = 100).
    seed : int, default 0
        Seed of the ``numpy.random.Generator`` used.

    Returns
    -------
    data : ndarray of shape (5 * n_per_component, n_attributes), dtype int64
        The 0/1 attributes.
    true_labels : ndarray of shape (5 * n_per_component,), dtype int64
        The generating component of each observation (0..4).

    References
    ----------
    Jain, S. and Neal, R. M. (2000). A split-merge Markov chain Monte Carlo procedure
    for the Dirichlet process mixture model. Tables 1-3.
    """
    n_attributes = int(n_attributes)
    if n_attributes < 6:
        raise ValueError(f"n_attributes must be at least 6 (Table 1 has 6); got {n_attributes}")
    if int(n_per_component) < 1:
        raise ValueError(f"n_per_component must be a positive integer; got {n_per_component}")
    extra = np.repeat(_JAIN_NEAL_TABLE_1[:, -1:], n_attributes - 6, axis=1)
    probabilities = np.hstack([_JAIN_NEAL_TABLE_1, extra])
    rng = np.random.default_rng(seed)
    true_labels = np.repeat(np.arange(5), int(n_per_component))
    data = (rng.random((true_labels.size, n_attributes)) < probabilities[true_labels]).astype(
        np.int64
    )
    return data, true_labels


def gaussian_blobs(
    n: int = 1000,
    n_components: int = 15,
    dim: int = 2,
    separation: float = 10.0,
    scale: float = 1.0,
    seed: int = 0,
):
    """Well-separated isotropic Gaussian clusters (for benchmarks and demos).

    Component means lie on a grid with spacing ``separation`` (in units of ``scale``);
    the cluster sizes are as equal as possible.

    Returns
    -------
    data : ndarray of shape (n, dim)
    true_labels : ndarray of shape (n,), dtype int64
    """
    rng = np.random.default_rng(seed)
    side = int(np.ceil(n_components ** (1.0 / dim)))
    grid = np.stack(np.meshgrid(*[np.arange(side)] * dim, indexing="ij"), -1).reshape(-1, dim)
    means = separation * scale * grid[:n_components].astype(float)
    true_labels = np.arange(n) % n_components
    data = means[true_labels] + scale * rng.standard_normal((n, dim))
    return data, true_labels.astype(np.int64)
