r"""Vectors of categorical attributes with independent Dirichlet priors.

Model::

    x_ij | p_j ~ Categorical(p_j) on {0, ..., K_j - 1},   p_j ~ Dirichlet(alpha_j),  j = 1..J

With counts ``c_jk`` (number of points of the cluster with ``x_ij = k``) and
``A_j = sum_k alpha_jk``::

    log p(x_1..n) = sum_j [lgamma(A_j) - lgamma(A_j + n)
                           + sum_k (lgamma(alpha_jk + c_jk) - lgamma(alpha_jk))]
    p(x | cluster) = prod_j (alpha_{j, x_j} + c_{j, x_j}) / (A_j + n)

Hyperparameters
---------------
``n_categories``: an int (every attribute) or a sequence of J ints.
``concentration``: a scalar (symmetric, all attributes), a 1-D array of length J
(symmetric Dirichlet per attribute), or a nested sequence / 2-D array whose j-th entry is
the full parameter vector ``alpha_j`` of length ``K_j`` (full Dirichlet).  A *1-D* array is
always read as per-attribute symmetric concentrations; write ``[[1, 2, 3]]`` for a single
attribute with a full Dirichlet(1, 2, 3).

Layouts
-------
Statistics row (``stat_dim = 2 + 2 sum_j K_j``): ``[n, counts flattened, probabilities
flattened, flag]`` with the counts of attribute j at ``1 + offset_j .. 1 + offset_j + K_j``.
The last ``1 + sum_j K_j`` entries cache the predictive's factors, the posterior predictive
probabilities ``(alpha_jk + c_jk) / (A_j + n)``: a predictive is J look-ups, a product and
one logarithm, with no division; ``add_point``/``remove_point`` recompute them from the
(exact, integer) counts in O(sum_j K_j) without logarithms.  The flag is 1.0 when every
cached probability is at least 1e-9 (underflow is then checked once per 16 factors).
Params (``2 + 2J + sum_j K_j``): ``[J, offsets (J + 1, as floats), alpha flattened
(sum K_j), A (J)]``.

References
----------
Jain & Neal (2000), section 4 (multinomial attributes); Minka (2000), "Estimating a
Dirichlet distribution" (Dirichlet-multinomial).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from pymc_splitmerge.components.base import (
    ComponentFamily,
    NumbaLeaves,
    is_numeric_value,
)
from pymc_splitmerge.core.jit import njit

__all__ = [
    "DirichletCategorical",
    "dirichlet_categorical_add_point",
    "dirichlet_categorical_log_marginal",
    "dirichlet_categorical_log_predictive",
    "dirichlet_categorical_remove_point",
    "reference_log_marginal",
    "reference_log_predictive",
]


_BLOCK = 16
_SAFE_PROBABILITY = 1e-9  # 16 such factors stay above 1e-144: no underflow in a block


@njit(cache=True)
def _refresh_cache(params, stats):
    """Recompute every cached ``(alpha_jk + c_jk) / (A_j + n)`` and the flag (O(sum_j K_j)).

    The flag is 1.0 when every cached probability is at least 1e-9 (the predictive may then
    check for underflow once per block of 16 factors), 0.0 otherwise.
    """
    n_attributes = int(params[0])
    total_categories = int(params[1 + n_attributes])
    offset_alpha = 2 + n_attributes
    offset_total = offset_alpha + total_categories
    offset_cache = 1 + total_categories
    count = stats[0]
    safe = 1.0
    for j in range(n_attributes):
        inverse_total = 1.0 / (params[offset_total + j] + count)
        for position in range(int(params[1 + j]), int(params[2 + j])):
            probability = (params[offset_alpha + position] + stats[1 + position]) * inverse_total
            stats[offset_cache + position] = probability
            if probability < _SAFE_PROBABILITY:
                safe = 0.0
    stats[offset_cache + total_categories] = safe


@njit(cache=True)
def dirichlet_categorical_add_point(params, stats, x):
    """Add one row of category codes ``x`` (shape (J,)) to a statistics row, in place."""
    n_attributes = int(params[0])
    stats[0] += 1.0
    for j in range(n_attributes):
        stats[1 + int(params[1 + j]) + int(x[j])] += 1.0
    _refresh_cache(params, stats)


@njit(cache=True)
def dirichlet_categorical_remove_point(params, stats, x):
    """Remove one row of category codes from a statistics row, in place."""
    n_attributes = int(params[0])
    stats[0] -= 1.0
    for j in range(n_attributes):
        stats[1 + int(params[1 + j]) + int(x[j])] -= 1.0
    _refresh_cache(params, stats)


@njit(cache=True)
def dirichlet_categorical_log_predictive(params, stats, x):
    """Log predictive mass of a row of category codes from the cached probabilities, O(J).

    A product of J cached factors and one logarithm (no division); the running product is
    flushed into a log below 1e-150, once per block of 16 factors when the row's flag says
    its factors are all at least 1e-9, after every factor otherwise.
    """
    n_attributes = int(params[0])
    total_categories = int(params[1 + n_attributes])
    offset_cache = 1 + total_categories
    check_every = _BLOCK if stats[offset_cache + total_categories] > 0.5 else 1
    log_total = 0.0
    product = 1.0
    for j in range(n_attributes):
        product *= stats[offset_cache + int(params[1 + j]) + int(x[j])]
        if (j + 1) % check_every == 0 and product < 1e-150:
            log_total += math.log(product)
            product = 1.0
    return log_total + math.log(product)


@njit(cache=True)
def dirichlet_categorical_log_marginal(params, stats):
    """Log marginal likelihood of a statistics row; 0.0 for an empty row."""
    count = stats[0]
    if count == 0.0:
        return 0.0
    n_attributes = int(params[0])
    offset_alpha = 2 + n_attributes
    offset_total = offset_alpha + int(params[1 + n_attributes])
    total = 0.0
    for j in range(n_attributes):
        concentration_total = params[offset_total + j]
        total += math.lgamma(concentration_total) - math.lgamma(concentration_total + count)
        for position in range(int(params[1 + j]), int(params[2 + j])):
            counts = stats[1 + position]
            if counts > 0.0:
                alpha = params[offset_alpha + position]
                total += math.lgamma(alpha + counts) - math.lgamma(alpha)
    return total


class DirichletCategorical(ComponentFamily):
    """Vectors of J categorical attributes, each with its own Dirichlet prior.

    Parameters
    ----------
    concentration : float, array_like of shape (J,), or nested sequence of J vectors
        Dirichlet parameters, > 0: scalar (symmetric, all attributes), 1-D (symmetric per
        attribute) or full vectors (entry j of length ``n_categories[j]``).
    n_categories : int or sequence of J ints
        Number of categories of each attribute, >= 1.

    Notes
    -----
    Data: integer codes ``0 .. n_categories_j - 1``, shape (n, J) (or (n,) for J = 1).
    """

    hyperparameter_names = ("concentration", "n_categories")
    numba_leaves = NumbaLeaves(
        add_point=dirichlet_categorical_add_point,
        remove_point=dirichlet_categorical_remove_point,
        log_predictive=dirichlet_categorical_log_predictive,
        log_marginal=dirichlet_categorical_log_marginal,
    )
    _accepts_bool = True

    def __init__(self, concentration=1.0, n_categories=2):
        super().__init__(concentration=concentration, n_categories=n_categories)

    def log_marginal_graph(self, graph, hyperparameters, x2d):
        """Dirichlet-multinomial per attribute and label slot in pytensor.

        ``n_categories`` must be numeric (it fixes the layout); the concentration may be
        symbolic: a scalar, one value per attribute, or full vectors (rectangular (J, K)
        tensor or a ragged list of numeric arrays).
        """
        pt, counts, dim = graph.pt, graph.counts, graph.dim
        if not is_numeric_value(self.hyperparameters["n_categories"]):
            raise TypeError(f"{type(self).__name__}: n_categories must be numeric (static)")
        categories = np.asarray(self.hyperparameters["n_categories"], dtype=np.float64)
        categories = np.broadcast_to(categories, (dim,)).astype(np.int64)
        offsets = np.concatenate([[0], np.cumsum(categories)])
        attribute = np.repeat(np.arange(dim), categories)
        total = int(offsets[-1])
        concentration = hyperparameters["concentration"]
        if isinstance(concentration, list):  # ragged numeric full Dirichlet vectors
            alpha = pt.as_tensor_variable(
                np.concatenate([np.asarray(v, dtype=np.float64) for v in concentration]))
        else:
            concentration = pt.as_tensor_variable(concentration).astype("float64")
            if concentration.ndim == 0:
                alpha = pt.alloc(concentration, total)
            elif concentration.ndim == 1:
                alpha = concentration[attribute]
            else:  # rectangular (J, K) full Dirichlet
                alpha = concentration.reshape((-1,))
        codes = pt.clip(x2d.astype("int64"), 0, categories[None, :] - 1)
        flat = offsets[None, :-1] + codes  # (n, J): each point's cell of every attribute
        one_hot = pt.sum(pt.eq(flat[:, :, None], np.arange(total)[None, None, :]), axis=1)
        [table] = graph.cluster_sums(one_hot.astype("float64"))  # (K, sum_j K_j) counts
        membership = np.zeros((total, dim))
        membership[np.arange(total), attribute] = 1.0
        alpha_totals = pt.dot(alpha, membership)  # (J,)
        per_slot = (
            pt.sum(pt.gammaln(alpha_totals)[None]
                   - pt.gammaln(alpha_totals[None] + counts[:, None]), axis=1)
            + pt.sum(pt.gammaln(alpha[None] + table) - pt.gammaln(alpha)[None], axis=1)
        )
        return per_slot, [pt.all(pt.gt(alpha, 0))]

    @classmethod
    def examples(cls, rng):
        """Symmetric per-attribute concentration and ragged full Dirichlet vectors."""
        return [("dirichlet-symmetric", cls(0.7, [2, 3, 5]),
                 np.column_stack([rng.integers(0, k, size=10) for k in (2, 3, 5)])),
                ("dirichlet-full", cls([[0.5, 1.5], [1.0, 2.0, 0.3, 0.9]], [2, 4]),
                 np.column_stack([rng.integers(0, k, size=10) for k in (2, 4)]))]

    def _parameter_shapes(self):
        return {"probabilities": (self._data_dim, int(np.max(self._full["n_categories"])))}

    def _sample_parameters(self, rng, x2d):
        """``p_j ~ Dirichlet(alpha_j + c_j)`` per attribute; row j padded with NaN past K_j."""
        categories = self._full["n_categories"]
        out = np.full((categories.shape[0], int(np.max(categories))), np.nan)
        for j, alpha in enumerate(self._full["concentration"]):
            counts = np.bincount(x2d[:, j].astype(np.int64), minlength=categories[j])
            out[j, :categories[j]] = rng.dirichlet(alpha + counts)
        return {"probabilities": out}

    def _sample_observations(self, rng, parameters, size):
        out = np.empty((size, self._data_dim))
        for j, k in enumerate(self._full["n_categories"]):
            out[:, j] = rng.choice(int(k), size=size, p=parameters["probabilities"][j, :k])
        return out

    def _validate(self, values):
        name = type(self).__name__
        categories = values["n_categories"]
        if isinstance(categories, list) or categories.ndim > 1:
            raise ValueError(f"{name}: 'n_categories' must be an int or a 1-D sequence of ints")
        if np.any(categories != np.round(categories)) or np.any(categories < 1):
            raise ValueError(
                f"{name}: 'n_categories' must be integers >= 1, got {values['n_categories']!r}"
            )
        concentration = values["concentration"]
        if isinstance(concentration, list) or concentration.ndim == 2:
            vectors = [np.asarray(item, dtype=np.float64) for item in concentration]
            if any(vector.ndim != 1 for vector in vectors):
                raise ValueError(
                    f"{name}: a full 'concentration' must be a sequence of 1-D vectors"
                )
            for vector in vectors:
                if not np.all(vector > 0):
                    raise ValueError(f"{name}: hyperparameter 'concentration' must be > 0")
            lengths = np.array([vector.shape[0] for vector in vectors])
            if categories.ndim == 0:
                categories = np.full(len(vectors), float(categories))
            if categories.shape[0] != len(vectors) or np.any(lengths != categories):
                raise ValueError(
                    f"{name}: the full 'concentration' vectors have lengths {lengths.tolist()} "
                    f"but n_categories is {categories.astype(int).tolist()}"
                )
            return {"concentration": vectors, "n_categories": categories}
        if concentration.ndim > 2:
            raise ValueError(f"{name}: 'concentration' has too many dimensions")
        if not np.all(concentration > 0):
            raise ValueError(
                f"{name}: hyperparameter 'concentration' must be > 0, got {concentration!r}"
            )
        if (concentration.ndim == 1 and categories.ndim == 1
                and concentration.shape[0] != categories.shape[0]):
            raise ValueError(
                f"{name}: 'concentration' has length {concentration.shape[0]} but "
                f"'n_categories' has length {categories.shape[0]}"
            )
        return {"concentration": concentration, "n_categories": categories}

    def _data_dim_from_hyperparameters(self, canonical):
        concentration = canonical["concentration"]
        if isinstance(concentration, list):
            return len(concentration)
        if concentration.ndim == 1:
            return concentration.shape[0]
        if canonical["n_categories"].ndim == 1:
            return canonical["n_categories"].shape[0]
        return None

    def _finalize(self, canonical, data_dim):
        name = type(self).__name__
        categories = canonical["n_categories"]
        if categories.ndim == 0:
            categories = np.full(data_dim, float(categories))
        elif categories.shape[0] != data_dim:
            raise ValueError(
                f"{name}: 'n_categories' has length {categories.shape[0]}, data have "
                f"{data_dim} attributes"
            )
        categories = categories.astype(np.int64)
        concentration = canonical["concentration"]
        if isinstance(concentration, list):
            if len(concentration) != data_dim:
                raise ValueError(
                    f"{name}: 'concentration' has {len(concentration)} vectors, data have "
                    f"{data_dim} attributes"
                )
            vectors = [vector.copy() for vector in concentration]
        else:
            if concentration.ndim == 1 and concentration.shape[0] != data_dim:
                raise ValueError(
                    f"{name}: 'concentration' has length {concentration.shape[0]}, data have "
                    f"{data_dim} attributes"
                )
            per_attribute = np.broadcast_to(concentration, (data_dim,))
            vectors = [np.full(k, float(c)) for k, c in zip(categories, per_attribute)]
        return {"concentration": vectors, "n_categories": categories}

    def _pack_params(self, full):
        categories = full["n_categories"]
        offsets = np.concatenate([[0], np.cumsum(categories)])
        alpha = np.concatenate(full["concentration"])
        totals = np.array([vector.sum() for vector in full["concentration"]])
        return np.concatenate([[categories.shape[0]], offsets, alpha, totals]).astype(np.float64)

    def _pack_empty_stats(self, full, params):
        # the numba refresh writes the prior predictive's cached form
        row = np.zeros(2 + 2 * int(np.sum(full["n_categories"])))
        _refresh_cache(params, row)
        return row

    def _check_data_domain(self, x2d):
        categories = self._full["n_categories"] if self._full is not None else None
        bad = (x2d != np.round(x2d)) | (x2d < 0)
        if categories is not None:
            bad |= x2d >= categories[None, :]
        if np.any(bad):
            row, column = np.argwhere(bad)[0]
            limit = "" if categories is None else f" < {categories[column]}"
            raise ValueError(
                f"{type(self).__name__}: data must be integer category codes 0 <= code{limit}, "
                f"found {x2d[row, column]} at row {row}, column {column}"
            )


def reference_log_marginal(family: DirichletCategorical, x2d) -> float:
    """Dirichlet-multinomial (ordered sequence) with scipy, from the raw codes (n, J)."""
    full = family._full
    x2d = np.asarray(x2d).reshape(-1, len(full["concentration"])).astype(np.int64)
    total = 0.0
    for j, alpha in enumerate(full["concentration"]):
        counts = np.bincount(x2d[:, j], minlength=alpha.shape[0])
        total += special.gammaln(alpha.sum()) - special.gammaln(alpha.sum() + x2d.shape[0])
        total += np.sum(special.gammaln(alpha + counts) - special.gammaln(alpha))
    return float(total)


def reference_log_predictive(family: DirichletCategorical, x_row, x2d) -> float:
    """Posterior-mean categorical probabilities from the raw codes."""
    full = family._full
    x2d = np.asarray(x2d).reshape(-1, len(full["concentration"])).astype(np.int64)
    x_row = np.reshape(x_row, -1).astype(np.int64)
    total = 0.0
    for j, alpha in enumerate(full["concentration"]):
        counts = np.bincount(x2d[:, j], minlength=alpha.shape[0])
        total += np.log((alpha[x_row[j]] + counts[x_row[j]]) / (alpha.sum() + x2d.shape[0]))
    return float(total)
