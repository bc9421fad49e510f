r"""Reading PyMC's on-disk, chunked trace (``ZarrTrace``) for the analysis functions.

``pm.sample(trace=pymc.backends.zarr.ZarrTrace(store=...))`` writes every
``draws_per_chunk`` draws of every chain to a zarr store, so sampling memory does not grow
with the number of draws (an in-memory trace holds ``chains x draws x n`` labels: 4 GB for
1,000 draws of int32 labels at ``n = 10**6``).  Two things stop the trace from going through
PyMC's own conversion on the installed stack: PyMC's ``ZarrTrace`` uses the zarr 2 API while
xarray >= 2025 reads zarr stores through the zarr 3 API (``to_inferencedata`` fails with
``open_group() got an unexpected keyword argument 'zarr_format'``), and numcodecs >= 0.15.2
refuses to unpickle the step's sampling state that ``ZarrTrace`` writes with the ``Pickle``
codec unless ``NUMCODECS_ALLOW_UNSAFE_PICKLE_DECODE=1`` is set before numcodecs is imported.
So sample with ``return_inferencedata=False, compute_convergence_checks=False`` and read the
trace with :func:`zarr_posterior`, which builds an :class:`xarray.Dataset` straight from the
zarr arrays, reading only the chunks of the requested draws.  Every analysis function takes
that dataset.  :func:`iter_zarr_draws` streams the labels block by block for quantities that
are sums over draws.

Only the draws a run completed are read.  ``ZarrTrace`` allocates every array for
``tune + draws`` iterations filled with a fill value (labels 0, NaN), records in
``_sampling_state/draw_idx`` how many iterations of each chain it wrote, and moves the first
``_sampling_state/tuning_steps`` of them to the ``warmup_*`` groups only when ``pm.sample``
returns.  So:

* a run stopped with Ctrl-C (``pm.sample`` returns; the warm-up is split off) holds fill
  values after the written draws: the readers stop at ``draw_idx - tuning_steps`` per chain;
* a killed run (kill -9, a crash: no split) holds the warm-up at the start of ``posterior``:
  the readers skip the first ``tuning_steps`` iterations and stop at ``draw_idx``
  (``group="warmup_posterior"`` reads those warm-up iterations from ``posterior``).

:func:`zarr_posterior` returns a rectangular ``(chain, draw)`` block: when chains completed
different numbers of draws it keeps the chains and length that ``pm.sample`` keeps for an
interrupted in-memory trace (the largest ``chains x draws``) and warns; :func:`iter_zarr_draws`
yields every completed draw of every chain.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import numpy as np
import xarray as xr

__all__ = ["completed_draws", "iter_zarr_draws", "zarr_posterior"]

WARMUP_PREFIX = "warmup_"  # arviz.data.inference_data.WARMUP_TAG, what ZarrTrace writes


def _root_group(trace):
    """The zarr root group of a ``ZarrTrace``, a zarr group, a store or a path."""
    root = getattr(trace, "root", None)
    if root is not None:
        return root
    try:
        import zarr
    except ImportError as error:  # pragma: no cover - exercised only without zarr
        raise ImportError(
            "reading a ZarrTrace needs zarr 2 (pip install 'zarr>=2.18,<3' 'numcodecs<0.16'), "
            "the version PyMC's ZarrTrace is written for"
        ) from error
    if hasattr(trace, "array_keys") and hasattr(trace, "group_keys"):
        return trace
    return zarr.open_group(trace, mode="r")


def _group(trace, group: str):
    """The zarr group holding ``group``'s draws, the offset of its first draw and the number of
    completed draws of each chain (see :func:`completed_draws`)."""
    root = _root_group(trace)
    groups = set(root.group_keys())
    source_name, offset, written = group, 0, None
    state = root["_sampling_state"] if "_sampling_state" in groups else None
    if state is not None and "draw_idx" in state.array_keys():
        written = np.asarray(state["draw_idx"][:], dtype=np.int64)
        tune = int(state["tuning_steps"][()]) if "tuning_steps" in state.array_keys() else 0
        base = group.removeprefix(WARMUP_PREFIX)
        split = tune == 0 or WARMUP_PREFIX + base in groups
        if group.startswith(WARMUP_PREFIX):
            written = np.clip(written, 0, tune)
            if not split:  # killed before pm.sample split the warm-up off: it is in `base`
                source_name = base
        else:
            written = np.clip(written - tune, 0, None)
            if not split:
                offset = tune
    if source_name not in groups:
        raise ValueError(
            f"the zarr trace has no group {group!r}; its groups are {sorted(groups)}"
        )
    return root[source_name], offset, written


def _completed(written, offset: int, array) -> np.ndarray:
    """Completed draws of each chain in ``array`` (all its draws without a recorded index)."""
    n_chains, n_draws = array.shape[:2]
    if written is None:
        return np.full(n_chains, n_draws, dtype=np.int64)
    if written.shape != (n_chains,):
        raise ValueError(
            f"the zarr trace records draws for {written.size} chains but its arrays have "
            f"{n_chains}: not a trace written by pymc.backends.zarr.ZarrTrace"
        )
    return np.clip(written, 0, n_draws - offset)


def completed_draws(trace, group: str = "posterior") -> np.ndarray:
    """Number of draws of each chain that a ``ZarrTrace`` run completed in ``group``.

    Read from PyMC's recorded draw index (``_sampling_state/draw_idx``, warm-up iterations
    included) and its tune/draw split (``_sampling_state/tuning_steps``); the same as the
    arrays' length for a run that finished.

    Returns
    -------
    ndarray of int64, shape (chain,)
    """
    source, offset, written = _group(trace, group)
    names = [name for name in source.array_keys()
             if _dims(source[name], name)[:2] == ["chain", "draw"]]
    if not names:
        raise ValueError(f"the zarr group {group!r} holds no variable with (chain, draw) dims")
    return _completed(written, offset, source[names[0]])


def _kept_chains(completed: np.ndarray) -> tuple[np.ndarray, int]:
    """The chains and common length that keep the most draws (``chains x length``), as
    ``pm.sample`` keeps for an interrupted in-memory trace."""
    lengths = np.unique(completed)
    kept = [int(length) * int((completed >= length).sum()) for length in lengths]
    length = int(lengths[int(np.argmax(kept))])
    return np.flatnonzero(completed >= length), length


def _dims(array, name: str) -> list[str]:
    dims = array.attrs.get("_ARRAY_DIMENSIONS")
    if dims is None:
        raise ValueError(
            f"zarr array {name!r} has no _ARRAY_DIMENSIONS attribute: not written by "
            "pymc.backends.zarr.ZarrTrace"
        )
    return list(dims)


def _draw_index(draws, n_draws: int) -> np.ndarray:
    if draws is None:
        return np.arange(n_draws)
    if isinstance(draws, slice):
        return np.arange(n_draws)[draws]
    index = np.asarray(draws)
    if index.ndim != 1 or not np.issubdtype(index.dtype, np.integer):
        raise ValueError(f"draws must be None, a slice or a 1-D array of integers, got {draws!r}")
    if index.size and (index.min() < -n_draws or index.max() >= n_draws):
        raise IndexError(f"draws index out of range for {n_draws} draws")
    return np.arange(n_draws)[index]


def zarr_posterior(trace, var_names=None, *, draws=None, group: str = "posterior") -> xr.Dataset:
    """A group of a PyMC ``ZarrTrace`` as an in-memory :class:`xarray.Dataset`.

    Parameters
    ----------
    trace : pymc.backends.zarr.ZarrTrace, zarr.Group, zarr store or path
        The trace ``pm.sample(trace=ZarrTrace(...), return_inferencedata=False)`` returned, or
        its store (e.g. the directory of a ``zarr.DirectoryStore``).
    var_names : str or list of str, optional
        Variables to read (default: all variables with ``chain`` and ``draw`` dimensions).
    draws : slice or array of int, optional
        Draws (per chain) to read, e.g. ``slice(None, None, 10)`` to thin by 10; only the
        chunks holding them are read.  Default: all.
    group : str
        ``"posterior"`` (default), ``"sample_stats"``, ...

    Returns
    -------
    xarray.Dataset
        Dims ``(chain, draw, ...)`` with the stored dtypes (the compact label dtype is kept);
        every :mod:`pymc_splitmerge.analysis` function accepts it.
    """
    source, offset, written = _group(trace, group)
    arrays = {name: source[name] for name in source.array_keys()}
    if isinstance(var_names, str):
        var_names = [var_names]
    data_names = []
    for name, array in arrays.items():
        dims = _dims(array, name)
        if dims[:2] == ["chain", "draw"]:
            data_names.append(name)
    if var_names is not None:
        missing = [name for name in var_names if name not in data_names]
        if missing:
            raise ValueError(
                f"the zarr group {group!r} has no variables {missing}; it has {data_names}"
            )
        data_names = list(var_names)
    if not data_names:
        raise ValueError(f"the zarr group {group!r} holds no variable with (chain, draw) dims")
    completed = _completed(written, offset, arrays[data_names[0]])
    n_chains = completed.size
    chains, n_draws = _kept_chains(completed)
    if n_draws == 0:
        raise ValueError(
            f"the zarr group {group!r} holds no completed draw (the run was stopped before "
            "its first one; the warm-up iterations written are in group 'warmup_posterior')")
    if chains.size < n_chains or n_draws < completed.max():
        warnings.warn(
            f"the chains of the zarr trace completed different numbers of draws "
            f"({', '.join(f'chain {c}: {k}' for c, k in enumerate(completed))}; an "
            f"interrupted run): reading the first {n_draws} draws of chains {chains.tolist()} "
            "(iter_zarr_draws streams every completed draw)", UserWarning, stacklevel=2)
    index = _draw_index(draws, n_draws)
    data_vars = {}
    coords = {}
    for name in data_names:
        array = arrays[name]
        dims = _dims(array, name)
        values = array.get_orthogonal_selection((chains, offset + index))
        data_vars[name] = (dims, values)
        for dim in dims[2:]:
            if dim in arrays and dim not in coords:
                coords[dim] = (dim, arrays[dim][:])
    chain_values = arrays["chain"][:] if "chain" in arrays else np.arange(n_chains)
    coords["chain"] = ("chain", np.asarray(chain_values)[chains])
    coords["draw"] = ("draw", index)
    return xr.Dataset(data_vars, coords=coords)


def iter_zarr_draws(
    trace, var_name: str, *, draws_per_block: int | None = None, group: str = "posterior"
) -> Iterator[tuple[int, slice, np.ndarray]]:
    """Stream one variable of a ``ZarrTrace`` block of draws by block of draws.

    Parameters
    ----------
    trace : pymc.backends.zarr.ZarrTrace, zarr.Group, zarr store or path
    var_name : str
    draws_per_block : int, optional
        Draws read at a time (default: the stored chunk length, so each block is one chunk).
    group : str

    Yields
    ------
    chain : int
    draws : slice
        The draws of ``chain`` in the block.
    values : ndarray of shape (draws in block, ...)
        Stored dtype (labels are not canonicalised: this package's steps store canonical
        labels; pass each block to :func:`~pymc_splitmerge.analysis.canonicalize` otherwise).
    """
    source, offset, written = _group(trace, group)
    if var_name not in source.array_keys():
        raise ValueError(f"the zarr group {group!r} has no variable {var_name!r}")
    array = source[var_name]
    if _dims(array, var_name)[:2] != ["chain", "draw"]:
        raise ValueError(f"{var_name!r} does not have (chain, draw) dims")
    completed = _completed(written, offset, array)
    size = int(draws_per_block or array.chunks[1])
    if size < 1:
        raise ValueError(f"draws_per_block must be a positive integer, got {draws_per_block!r}")
    for chain, n_draws in enumerate(completed.tolist()):
        for start in range(0, n_draws, size):
            block = slice(start, min(start + size, n_draws))
            yield chain, block, array[chain, offset + block.start:offset + block.stop]
