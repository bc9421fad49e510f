r"""Per-cluster statistics of a label vector, computed once per distinct label vector.

Given the labels, the log density of a partition prior depends on them only through the
block sizes, and a ``ConjugateMixture`` only through each cluster's sufficient statistics.
:class:`ClusterStatistics` is the pytensor ``Op`` that turns ``(labels, *per-point values)``
into

* ``in_range``: int8 scalar, whether every label lies in ``[0, n_labels)``;
* ``sizes``: float64 (K,), the sizes of the K non-empty clusters in increasing label order;
* one (K, ...) table per per-point value array: ``out[k] = sum_{i in cluster k} values[i]``.

Its output is cached on the node and reused while the labels (and the per-point values) are
unchanged, so a sampler that moves only hyperparameters (NUTS, a slice step) pays
O(K x statistics row) per evaluation instead of O(n): the per-point values of constant
observed data are folded into constants when the function is compiled.

Whether the labels are unchanged is decided in O(1) for labels written by a partition step
and by an O(n) comparison otherwise:

* a partition step hands every new label vector to :func:`mark_written_labels`, which makes
  the freshly created array read-only (a later in-place write raises instead of silently
  changing it) and records it; the same recorded, still read-only array object as the one the
  statistics were computed from is the same labels (this is what NUTS or a slice step sees
  between two partition moves: PyMC passes the step's array through unchanged);
* any other array (a user's point, an initial point, ``compile_logp`` on a fresh point, PyMC's
  shared-memory point of a parallel chain, which is overwritten in place) is compared with a
  private copy of the labels of the cached statistics, element by element.

The per-point values are the family's own statement of its sufficient statistics (its
``log_marginal_graph``, :class:`pymc_splitmerge.distributions.mixture.SlotGraph`); they must
not depend on a hyperparameter (the outputs carry no gradient to them).
"""

from __future__ import annotations

import weakref

import numpy as np
import pytensor.tensor as pt
from pytensor.gradient import DisconnectedType, disconnected_type
from pytensor.graph.basic import Apply, Constant
from pytensor.graph.op import Op
from pytensor.link.c.op import COp

from pymc_splitmerge.core.cluster_sums import cluster_index, cluster_sums
from pymc_splitmerge.core.linalg import (
    inverse_stack_compiled,
    log_det_spd_stack,
    log_det_spd_stack_compiled,
)

__all__ = ["BatchedInverse", "BatchedLogDet", "ClusterStatistics", "batched_inverse",
           "batched_log_det", "cluster_statistics", "mark_written_labels"]

# id -> weak reference of the label arrays recorded by mark_written_labels (an entry leaves
# when its array is garbage collected, before its id can be reused)
_WRITTEN: dict[int, weakref.ref] = {}


def mark_written_labels(labels: np.ndarray) -> np.ndarray:
    """Record a label vector a partition step has just created; return it, now read-only.

    ``labels`` must be a new array that owns its data and that nothing else refers to yet (e.g.
    ``state.labels().astype(dtype, copy=True)``): it is made read-only, so no one can change
    it in place afterwards, and :class:`ClusterStatistics` recognises it in O(1) (module doc).
    An array that does not own its data (a view, whose base may be written) is returned
    unchanged and not recorded.
    """
    if not isinstance(labels, np.ndarray) or labels.base is not None:
        return labels
    labels.flags.writeable = False
    key = id(labels)

    def forget(reference, key=key):
        if _WRITTEN.get(key) is reference:
            del _WRITTEN[key]

    _WRITTEN[key] = weakref.ref(labels, forget)
    return labels


def _is_written(labels) -> bool:
    """Whether ``labels`` is an array recorded by :func:`mark_written_labels`, still read-only."""
    reference = _WRITTEN.get(id(labels))
    return (reference is not None and reference() is labels
            and not labels.flags.writeable)


class _DerivativeOp(Op):
    """An Op whose reverse-mode derivative is :meth:`vector_jacobian` (inputs, outputs,
    cotangents -> one cotangent per input), installed under the name the running PyTensor
    calls: ``pullback`` where it exists (``L_op`` is deprecated there and warns), ``L_op``
    before."""

    def vector_jacobian(self, inputs, outputs, cotangents):
        raise NotImplementedError


if hasattr(Op, "pullback"):
    _DerivativeOp.pullback = lambda self, inputs, outputs, cotangents: self.vector_jacobian(
        inputs, outputs, cotangents)
else:
    _DerivativeOp.L_op = lambda self, inputs, outputs, cotangents: self.vector_jacobian(
        inputs, outputs, cotangents)


class ClusterStatistics(_DerivativeOp):
    """``(labels, *values) -> (in_range, sizes, *sums)`` over the non-empty clusters.

    Parameters
    ----------
    n_labels : int
        Labels must lie in ``[0, n_labels)``; out-of-range labels give ``in_range = 0`` (the
        sizes and sums are then those of the clipped labels).
    n_values : int
        Number of per-point value arrays (each of shape (n, ...), float64).
    """

    __props__ = ("n_labels", "n_values")

    def __init__(self, n_labels: int, n_values: int = 0):
        self.n_labels = int(n_labels)
        self.n_values = int(n_values)
        super().__init__()

    def make_node(self, labels, *values):
        labels = pt.as_tensor_variable(labels)
        if labels.ndim != 1 or not labels.dtype.startswith(("int", "uint")):
            raise TypeError("ClusterStatistics: labels must be an integer vector")
        values = [pt.as_tensor_variable(v).astype("float64") for v in values]
        if len(values) != self.n_values:
            raise TypeError(f"ClusterStatistics expects {self.n_values} value arrays")
        outputs = [pt.bscalar(), pt.dvector()]
        outputs += [pt.tensor(dtype="float64", shape=(None, *v.type.shape[1:])) for v in values]
        return Apply(self, [labels, *values], outputs)

    def perform(self, node, inputs, output_storage):
        labels, *values = inputs
        cache = getattr(node.tag, "cluster_statistics_cache", None)
        # values that are constants of the compiled graph (the per-point statistics of
        # constant data, folded when the function is compiled) never change: not compared
        varying = [value for value, variable in zip(values, node.inputs[1:], strict=True)
                   if not isinstance(variable, Constant)]
        if cache is not None and _same_inputs(cache.values, varying) and (
                (labels is cache.token and _is_written(labels))  # O(1): see the module doc
                or _same_inputs([cache.labels], [labels])):
            results = cache.results
            cache.token = labels if _is_written(labels) else None
        else:
            results = self._compute(labels, values)
            # copies: the caller (or pytensor's storage reuse) may overwrite its buffers
            node.tag.cluster_statistics_cache = _Cache(
                np.array(labels, copy=True), labels if _is_written(labels) else None,
                [np.array(value, copy=True) for value in varying], results)
        for storage, result in zip(output_storage, results, strict=True):
            storage[0] = result.copy() if isinstance(result, np.ndarray) else result

    def _compute(self, labels, values):
        in_range, sizes, index = cluster_index(labels, self.n_labels)
        n_clusters = sizes.shape[0]
        results = [np.array(in_range, dtype=np.int8), sizes]
        for value in values:  # one compiled loop per value array
            flat = np.asarray(value, dtype=np.float64).reshape(labels.shape[0], -1)
            table = cluster_sums(index, flat, n_clusters)
            results.append(table.reshape((n_clusters, *np.shape(value)[1:])))
        return results

    def connection_pattern(self, node):
        # labels are integers (no gradient); the sums depend on the values only
        return [[False] * len(node.outputs)] + [
            [False, False] + [i == j for j in range(self.n_values)]
            for i in range(self.n_values)]

    def vector_jacobian(self, inputs, outputs, output_gradients):
        # a point's value enters only its cluster's sum: its gradient is that sum's gradient
        # (per-point values may depend on hyperparameters, e.g. residuals about beta0)
        labels, *values = inputs
        safe = pt.clip(labels, 0, self.n_labels - 1)
        occupied = pt.gt(pt.extra_ops.bincount(safe, minlength=self.n_labels), 0)
        index = (pt.cumsum(occupied) - 1)[safe]
        gradients = [disconnected_type()]
        for value, gradient in zip(values, output_gradients[2:], strict=True):
            if isinstance(gradient.type, DisconnectedType):
                gradients.append(pt.zeros_like(value))
            else:
                gradients.append(gradient[index])
        return gradients


class _Cache:
    """The statistics of one label vector: a private copy of the labels, the recorded array
    they came from (``token``, or None), copies of the varying per-point values, results."""

    __slots__ = ("labels", "results", "token", "values")

    def __init__(self, labels, token, values, results):
        self.labels, self.token, self.values, self.results = labels, token, values, results


def _same_inputs(previous, inputs) -> bool:
    """Whether every input equals its cached copy (element by element: O(n) for labels)."""
    return all(old.shape == np.shape(new) and np.array_equal(old, new)
               for old, new in zip(previous, inputs, strict=True))


def cluster_statistics(labels, n_labels: int, *values):
    """Apply :class:`ClusterStatistics`: ``(in_range, sizes, *sums)`` (see the module doc)."""
    return ClusterStatistics(n_labels, len(values))(labels, *values)


class BatchedLogDet(_DerivativeOp, COp):
    """``log|A_k|`` of a stack (K, D, D) of symmetric positive-definite matrices in one
    compiled loop; NaN where a matrix is not positive definite.

    Pytensor's ``Blockwise`` of a Cholesky factor and its gradient's triangular solves make
    one Python (and BLAS) call per matrix; one batched call keeps a gradient of K small
    matrices at a few NumPy calls.  Gradient: ``g_k A_k^{-T}`` (:class:`BatchedInverse`).

    The compiled function runs the loop of
    :func:`~pymc_splitmerge.core.linalg.log_det_spd_stack` (the reference, and the Python
    implementation when PyTensor has no C compiler) as C code inside PyTensor's virtual
    machine: a call from the VM costs a fraction of a microsecond instead of the microseconds
    of a Python ``perform`` (this Op runs in every evaluation of a Normal-Inverse-Wishart
    mixture's log density given its cluster statistics).  PyTensor's numba backend (the
    default linker of pytensor 3, the pymc 6 line) calls the same loop compiled by numba
    (:func:`~pymc_splitmerge.core.linalg.log_det_spd_stack_compiled`, registered when the
    first node is made), not ``perform`` in object mode.
    """

    __props__ = ()

    def make_node(self, matrices):
        _register_numba_log_det()
        matrices = pt.as_tensor_variable(matrices).astype("float64")
        if matrices.ndim != 3:
            raise TypeError("BatchedLogDet needs a (K, D, D) tensor")
        return Apply(self, [matrices], [pt.tensor(dtype="float64", shape=(None,))])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = _log_det_spd(inputs[0])

    def c_code(self, node, name, inputs, outputs, sub):
        # the loop of core.linalg._log_det_spd_stack (same operations in the same order);
        # reads the lower triangle through the input's strides
        (matrices,), (out,), fail = inputs, outputs, sub["fail"]
        return f"""
        {{
            npy_intp n_matrices = PyArray_DIMS({matrices})[0];
            npy_intp dim = PyArray_DIMS({matrices})[1];
            npy_intp s0 = PyArray_STRIDES({matrices})[0], s1 = PyArray_STRIDES({matrices})[1],
                     s2 = PyArray_STRIDES({matrices})[2];
            const char* data = (const char*) PyArray_DATA({matrices});
            double* factor;
            double* result;
            npy_intp m, i, j, k;
            if (PyArray_DIMS({matrices})[2] != dim) {{
                PyErr_SetString(PyExc_ValueError, "BatchedLogDet needs square matrices");
                {fail}
            }}
            if ({out} == NULL || PyArray_DIMS({out})[0] != n_matrices
                    || !PyArray_ISCONTIGUOUS({out})) {{
                Py_XDECREF({out});
                {out} = (PyArrayObject*) PyArray_EMPTY(1, &n_matrices, NPY_FLOAT64, 0);
                if ({out} == NULL) {{ {fail} }}
            }}
            result = (double*) PyArray_DATA({out});
            factor = (double*) malloc(sizeof(double) * (dim > 0 ? dim * dim : 1));
            if (factor == NULL) {{
                PyErr_NoMemory();
                {fail}
            }}
            #define LOGDET_A(m_, i_, j_) (*(const double*) (data + (m_) * s0 + (i_) * s1 \\
                                                            + (j_) * s2))
            for (m = 0; m < n_matrices; ++m) {{
                double log_det = 0.0;
                for (j = 0; j < dim; ++j) {{
                    double total = LOGDET_A(m, j, j);
                    double diag;
                    for (k = 0; k < j; ++k) total -= factor[j * dim + k] * factor[j * dim + k];
                    if (!(total > 0.0)) {{  /* not positive definite (or NaN) */
                        log_det = NPY_NAN;
                        break;
                    }}
                    diag = sqrt(total);
                    factor[j * dim + j] = diag;
                    log_det += 2.0 * log(diag);
                    for (i = j + 1; i < dim; ++i) {{
                        total = LOGDET_A(m, i, j);
                        for (k = 0; k < j; ++k) total -= factor[i * dim + k] * factor[j * dim + k];
                        factor[i * dim + j] = total / diag;
                    }}
                }}
                result[m] = log_det;
            }}
            #undef LOGDET_A
            free(factor);
        }}
        """

    def c_code_cache_version(self):
        return (1,)

    def vector_jacobian(self, inputs, outputs, output_gradients):
        [matrices] = inputs
        inverse = BatchedInverse()(matrices)
        return [output_gradients[0][:, None, None] * inverse.transpose(0, 2, 1)]


_numba_registered = False


def _register_numba_log_det() -> None:
    """Register the numba implementations of :class:`BatchedLogDet` and
    :class:`BatchedInverse` with PyTensor's numba backend, once (at the first node of either:
    importing the backend's dispatch costs about 0.3 s on pytensor 3, which
    ``import pymc_splitmerge`` does not pay).  With PyTensor's default cache key (where the
    helper exists) a compiled function that contains them is cached across processes like
    one of PyTensor's own Ops."""
    global _numba_registered
    if _numba_registered:
        return
    _numba_registered = True
    try:
        from pytensor.link.numba.dispatch import basic
    except ImportError:  # pragma: no cover - PyTensor without its numba backend
        return
    from pymc_splitmerge.core import linalg

    implementations = {  # Op: (the compiled function, the numba functions it runs)
        BatchedLogDet: (log_det_spd_stack_compiled,
                        (linalg._log_det_spd_stack, linalg.log_det_spd_stack_compiled)),
        BatchedInverse: (inverse_stack_compiled,
                         (linalg._inverse_stack, linalg.inverse_stack_compiled)),
    }
    register = getattr(basic, "register_funcify_default_op_cache_key", None)
    for op_class, (compiled, loops) in implementations.items():
        if register is not None:
            # the int salts PyTensor's cache key (a cached function would otherwise keep an
            # older implementation): a hash of the numba loops' source
            salt = _source_salt(loops)
            register(op_class)(lambda op, node=None, _compiled=compiled, _salt=salt,
                               **kwargs: (_compiled, _salt))
        else:  # pragma: no cover - older PyTensor
            basic.numba_funcify.register(op_class)(
                lambda op, node=None, _compiled=compiled, **kwargs: _compiled)


def _source_salt(functions) -> int:
    """A hash of the source of numba functions (of the package version without sources)."""
    import hashlib
    import inspect

    try:
        source = "".join(inspect.getsource(function.py_func) for function in functions)
    except (OSError, TypeError):  # pragma: no cover - no source files (a frozen install)
        from importlib.metadata import version

        source = version("pymc_splitmerge")
    return int(hashlib.sha256(source.encode()).hexdigest()[:12], 16)


class BatchedInverse(_DerivativeOp):
    """Inverses of a stack (K, D, D) of matrices in one NumPy call (``np.linalg.inv``), all
    NaN when one is singular.

    In PyTensor's numba backend (pymc 6's default linker; it runs the gradient of a
    Normal-Inverse-Wishart mixture's log density) the Op runs the compiled loop
    :func:`~pymc_splitmerge.core.linalg.inverse_stack_compiled` (Gauss-Jordan elimination,
    registered with :class:`BatchedLogDet`'s), not ``perform`` in numba's object mode.
    """

    __props__ = ()

    def make_node(self, matrices):
        _register_numba_log_det()
        matrices = pt.as_tensor_variable(matrices).astype("float64")
        return Apply(self, [matrices], [matrices.type()])

    def perform(self, node, inputs, output_storage):
        try:
            output_storage[0][0] = np.linalg.inv(inputs[0])
        except np.linalg.LinAlgError:
            output_storage[0][0] = np.full_like(inputs[0], np.nan)

    def vector_jacobian(self, inputs, outputs, output_gradients):
        inverse_t = outputs[0].transpose(0, 2, 1)
        return [-pt.matmul(pt.matmul(inverse_t, output_gradients[0]), inverse_t)]


def _log_det_spd(matrices):
    """``2 sum log diag(chol(A_k))`` per matrix (one compiled loop); NaN where the
    factorisation fails."""
    return log_det_spd_stack(matrices)


def batched_log_det(matrices):
    """:class:`BatchedLogDet` of a (K, D, D) stack."""
    return BatchedLogDet()(matrices)


def batched_inverse(matrices):
    """:class:`BatchedInverse` of a (K, D, D) stack."""
    return BatchedInverse()(matrices)
