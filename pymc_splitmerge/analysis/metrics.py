r"""Distances and agreement scores between partitions.

For partitions :math:`c, \hat c` of :math:`n` observations with cluster sizes :math:`n_k`,
:math:`m_l` and contingency table :math:`n_{kl} = \#\{i : c_i = k, \hat c_i = l\}`:

* variation of information (Meila 2007; Wade & Ghahramani 2018, eq. 7)

  .. math:: \mathrm{VI}(c, \hat c) = H(c) + H(\hat c) - 2 I(c, \hat c)
     = \frac1n\Big[\sum_k n_k \log n_k + \sum_l m_l \log m_l - 2\sum_{kl} n_{kl}\log n_{kl}\Big]

* Binder's loss with unit costs (Binder 1978; Wade & Ghahramani 2018, eq. 4): the number of
  pairs :math:`i<j` on which the two partitions disagree,

  .. math:: B(c, \hat c) = \tfrac12\Big[\sum_k n_k^2 + \sum_l m_l^2 - 2 \sum_{kl} n_{kl}^2\Big]

  (so ``1 - rand_index = B / binom(n, 2)``);
* adjusted Rand index (Hubert & Arabie 1985) and V-measure (Rosenberg & Hirschberg 2007).

References
----------
Meila, M. (2007). Comparing clusterings - an information based distance. J. Multivariate Anal.
Wade, S. and Ghahramani, Z. (2018). Bayesian cluster analysis: point estimation and credible
balls. Bayesian Analysis 13(2), 559-626.
Hubert, L. and Arabie, P. (1985). Comparing partitions. J. Classification 2, 193-218.
Rosenberg, A. and Hirschberg, J. (2007). V-measure: a conditional entropy-based external cluster
evaluation measure. EMNLP-CoNLL.
"""

from __future__ import annotations

import numpy as np

from pymc_splitmerge.analysis._labels import as_label_draws, as_labels, partition_draws
from pymc_splitmerge.core.jit import njit

__all__ = [
    "adjusted_rand_index",
    "agreement_with_truth",
    "binder_distance",
    "contingency_table",
    "distances_to_reference",
    "rand_index",
    "v_measure",
    "variation_of_information",
]


def _pair(labels_a, labels_b) -> tuple[np.ndarray, np.ndarray]:
    a = as_labels(labels_a, "labels_a")
    b = as_labels(labels_b, "labels_b")
    if a.size != b.size:
        raise ValueError(
            f"the two partitions label different numbers of observations ({a.size} and {b.size})"
        )
    return a, b


def contingency_table(labels_a, labels_b) -> np.ndarray:
    """Contingency table ``n_kl`` of two partitions, int64 array of shape (K_a, K_b)."""
    a, b = _pair(labels_a, labels_b)
    table = np.zeros((a.max() + 1, b.max() + 1), dtype=np.int64)
    np.add.at(table, (a, b), 1)
    return table


def _xlogx(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return np.where(x > 0, x * np.log(np.where(x > 0, x, 1.0)), 0.0)


def variation_of_information(labels_a, labels_b, base: float = 2.0) -> float:
    """Variation of information between two partitions (0 iff equal).

    Parameters
    ----------
    labels_a, labels_b : array_like of int, shape (n,)
    base : float
        Base of the logarithm (2, as in Wade & Ghahramani 2018, by default).
    """
    table = contingency_table(labels_a, labels_b)
    n = table.sum()
    value = (_xlogx(table.sum(1)).sum() + _xlogx(table.sum(0)).sum() - 2 * _xlogx(table).sum()) / n
    return float(max(value, 0.0) / np.log(base))


def binder_distance(labels_a, labels_b, normalize: bool = False) -> float:
    """Binder's loss with unit costs: number of pairs ``i < j`` clustered together in one partition
    and apart in the other; divided by ``n (n - 1) / 2`` if ``normalize`` (then ``1 - rand_index``).
    """
    table = contingency_table(labels_a, labels_b).astype(np.float64)
    n = table.sum()
    value = 0.5 * (np.sum(table.sum(1) ** 2) + np.sum(table.sum(0) ** 2) - 2 * np.sum(table**2))
    if normalize:
        value /= n * (n - 1) / 2 if n > 1 else 1.0
    return float(value)


def rand_index(labels_a, labels_b) -> float:
    """Rand index: fraction of pairs on which the two partitions agree."""
    return 1.0 - binder_distance(labels_a, labels_b, normalize=True)


def adjusted_rand_index(labels_a, labels_b) -> float:
    """Adjusted Rand index (Hubert & Arabie 1985); 1 for equal partitions, 0 in expectation
    under random labelling with the same cluster sizes."""
    table = contingency_table(labels_a, labels_b).astype(np.float64)
    n = table.sum()

    def pairs(x):
        return np.sum(x * (x - 1) / 2)

    index = pairs(table)
    sum_a = pairs(table.sum(1))
    sum_b = pairs(table.sum(0))
    total = n * (n - 1) / 2
    expected = sum_a * sum_b / total if total > 0 else 0.0
    maximum = (sum_a + sum_b) / 2
    if maximum == expected:  # both trivial (all singletons or one cluster)
        return 1.0
    return float((index - expected) / (maximum - expected))


def v_measure(labels_true, labels_predicted, beta: float = 1.0) -> dict[str, float]:
    """Homogeneity, completeness and V-measure of ``labels_predicted`` against ``labels_true``.

    Returns
    -------
    dict with keys ``"homogeneity"``, ``"completeness"``, ``"v_measure"``.
    """
    table = contingency_table(labels_true, labels_predicted).astype(np.float64)
    n = table.sum()
    entropy_true = np.log(n) - _xlogx(table.sum(1)).sum() / n
    entropy_predicted = np.log(n) - _xlogx(table.sum(0)).sum() / n
    mutual = (
        _xlogx(table).sum() - _xlogx(table.sum(1)).sum() - _xlogx(table.sum(0)).sum()
    ) / n + np.log(n)
    homogeneity = 1.0 if entropy_true == 0 else mutual / entropy_true
    completeness = 1.0 if entropy_predicted == 0 else mutual / entropy_predicted
    if homogeneity + completeness == 0:
        v = 0.0
    else:
        v = (1 + beta) * homogeneity * completeness / (beta * homogeneity + completeness)
    return {"homogeneity": float(homogeneity), "completeness": float(completeness), "v_measure": float(v)}


def agreement_with_truth(labels, truth, base: float = 2.0, *, var_name: str | None = None
                         ) -> dict:
    """Agreement of a partition (or of every draw) with a known true partition.

    Parameters
    ----------
    labels : InferenceData, DataTree, Dataset, DataArray or array_like of int
        One partition of shape (n,), or draws: what the other analysis functions take (a trace
        of ``pm.sample``, a posterior Dataset, or an array of shape (draw, n) or
        (chain, draw, n)).
    truth : array_like of int, shape (n,)
    base : float, default 2
        Logarithm base of the variation of information.
    var_name : str, optional
        Name of the partition variable of a trace (found automatically when omitted).

    Returns
    -------
    dict
        ``adjusted_rand_index``, ``variation_of_information`` (log base ``base``),
        ``binder_distance`` (normalised, i.e. ``1 - rand_index``), ``v_measure``; floats for a
        single partition, arrays of shape (chain, draw) for draws.
    """
    if hasattr(labels, "groups") or hasattr(labels, "children") or hasattr(labels, "data_vars"):
        array, _ = partition_draws(labels, var_name)  # a trace or a Dataset
    else:
        array = np.asarray(labels.values if hasattr(labels, "values") else labels)
    if array.ndim == 1:
        truth_labels = as_labels(truth, "truth", n=array.size)
        return {
            "adjusted_rand_index": adjusted_rand_index(truth_labels, array),
            "variation_of_information": variation_of_information(truth_labels, array, base),
            "binder_distance": binder_distance(truth_labels, array, normalize=True),
            "v_measure": v_measure(truth_labels, array)["v_measure"],
        }
    draws = as_label_draws(array)
    truth_labels = as_labels(truth, "truth", n=draws.shape[-1])
    flat = draws.reshape(-1, draws.shape[-1])
    out = {key: np.empty(flat.shape[0]) for key in
           ("adjusted_rand_index", "variation_of_information", "binder_distance", "v_measure")}
    for s, row in enumerate(flat):
        for key, value in agreement_with_truth(row, truth_labels, base).items():
            out[key][s] = value
    return {key: value.reshape(draws.shape[:2]) for key, value in out.items()}


@njit(cache=True)
def _distances_to_reference(draws, reference, n_reference_clusters):  # pragma: no cover
    """Per row of ``draws``: VI to ``reference`` (natural log), pairs together in the draw, pairs
    together in both (and pairs together in the reference, a scalar)."""
    n_draws, n = draws.shape
    vi = np.empty(n_draws)
    together_draw = np.empty(n_draws)
    together_both = np.empty(n_draws)
    reference_sizes = np.zeros(n_reference_clusters, dtype=np.int64)
    for i in range(n):
        reference_sizes[reference[i]] += 1
    reference_xlogx = 0.0
    reference_square = 0.0
    for k in range(n_reference_clusters):
        m = reference_sizes[k]
        reference_xlogx += m * np.log(m)
        reference_square += m * m
    max_label = 0
    for s in range(n_draws):
        for i in range(n):
            max_label = max(max_label, draws[s, i])
    table = np.zeros((max_label + 1, n_reference_clusters), dtype=np.int64)
    sizes = np.zeros(max_label + 1, dtype=np.int64)
    for s in range(n_draws):
        k_max = 0
        for i in range(n):
            label = draws[s, i]
            table[label, reference[i]] += 1
            sizes[label] += 1
            k_max = max(k_max, label)
        cross_xlogx = 0.0
        cross_square = 0.0
        draw_xlogx = 0.0
        draw_square = 0.0
        for k in range(k_max + 1):
            size = sizes[k]
            if size > 0:
                draw_xlogx += size * np.log(size)
                draw_square += size * size
            sizes[k] = 0
            for l in range(n_reference_clusters):
                count = table[k, l]
                if count > 0:
                    cross_xlogx += count * np.log(count)
                    cross_square += count * count
                    table[k, l] = 0
        vi[s] = max((draw_xlogx + reference_xlogx - 2.0 * cross_xlogx) / n, 0.0)
        together_draw[s] = 0.5 * (draw_square - n)
        together_both[s] = 0.5 * (cross_square - n)
    return vi, together_draw, together_both, 0.5 * (reference_square - n)


def distances_to_reference(draws, reference, base: float = 2.0) -> dict[str, np.ndarray]:
    """Variation of information and Binder distance of every draw to a reference partition.

    Parameters
    ----------
    draws : array_like of int, shape (draw, n) or (chain, draw, n)
    reference : array_like of int, shape (n,)
    base : float
        Log base of the variation of information.

    Returns
    -------
    dict with ``"variation_of_information"`` and ``"binder_distance"`` (unit-cost pair count),
    arrays of shape (chain, draw).
    """
    labels = as_label_draws(draws)
    reference_labels = as_labels(reference, "reference", n=labels.shape[-1])
    flat = labels.reshape(-1, labels.shape[-1])
    vi, together_draw, together_both, together_reference = _distances_to_reference(
        flat, reference_labels, int(reference_labels.max()) + 1
    )
    binder = together_draw + together_reference - 2.0 * together_both
    return {
        "variation_of_information": (vi / np.log(base)).reshape(labels.shape[:2]),
        "binder_distance": binder.reshape(labels.shape[:2]),
    }
