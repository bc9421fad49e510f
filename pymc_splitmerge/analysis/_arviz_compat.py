"""Compatibility layer between ArviZ 0.x (``InferenceData``) and ArviZ 1.x (``xarray.DataTree``).

``pm.sample`` returns an :class:`arviz.InferenceData` with pymc 5 / ArviZ 0.x (Python 3.11) and an
:class:`xarray.DataTree` with pymc 6 / ArviZ 1.x (Python 3.12).  Everything in
:mod:`pymc_splitmerge.analysis` goes through the few helpers below, so the rest of the layer never
asks which line it runs on.

Both lines accept an :class:`xarray.Dataset` with ``chain`` and ``draw`` dimensions in
``az.rhat`` and ``az.ess``; the helpers build such a dataset from plain arrays.  The tail ESS is
always computed with the quantiles (0.05, 0.95) (ArviZ 0.x's default; ArviZ 1.x's dataset default
differs), and the HDI is computed here (narrowest interval of the pooled sorted draws, ArviZ's
``"nearest"`` rule) because the two lines name its keyword and output coordinate differently.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

__all__ = [
    "ARVIZ_MAJOR",
    "LABELS_GROUP",
    "add_group",
    "ess",
    "from_groups",
    "get_group",
    "group_names",
    "has_group",
    "hdi",
    "is_datatree",
    "is_inference_data",
    "posterior_with_labels",
    "replace_group",
    "rhat",
]


def _arviz():
    """ArviZ, imported on first use: with pymc 6 / ArviZ 1.x ``import pymc`` does not import it,
    and importing it (with arviz_plots and matplotlib) costs ~1.3 CPU s, which
    ``import pymc_splitmerge`` would otherwise add to every fresh process
    (``benchmarks/scale.py --vi``, cold clock)."""
    import arviz

    return arviz


def _arviz_major() -> int:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return int(version("arviz").split(".")[0])
    except (PackageNotFoundError, ValueError):  # not installed as a distribution: ask it
        return int(str(_arviz().__version__).split(".")[0])


ARVIZ_MAJOR = _arviz_major()

#: ArviZ 0.x's matplotlib backend calls ``matplotlib.cbook.normalize_kwargs`` the way Matplotlib
#: 3.11 deprecates: one ``MatplotlibDeprecationWarning`` per line drawn (114 for
#: ``az.plot_trace`` of four variables), addressed to ArviZ, which the user can do nothing about
ARVIZ_MATPLOTLIB_DEPRECATION = "Passing a dict or None as alias_mapping to normalize_kwargs"


def quiet_arviz_matplotlib_deprecation() -> None:
    """Silence :data:`ARVIZ_MATPLOTLIB_DEPRECATION` when ArviZ 0.x's plotting code raises it
    (only that message, only from ``arviz.plots``; nothing on ArviZ 1.x)."""
    if ARVIZ_MAJOR < 1:
        import warnings

        warnings.filterwarnings("ignore", message=ARVIZ_MATPLOTLIB_DEPRECATION,
                                category=DeprecationWarning, module=r"arviz\.plots")


quiet_arviz_matplotlib_deprecation()

TAIL_PROBABILITIES = (0.05, 0.95)

#: the group that holds the partition variables' label draws of a ``pm.sample`` trace (outside
#: ``"posterior"``, so that ``az.summary`` / ``az.plot_trace`` show the label-invariant
#: quantities instead of one row per observation; see
#: :func:`pymc_splitmerge.sampling.mcmc.move_labels_out_of_posterior`)
LABELS_GROUP = "labels"


def is_datatree(data) -> bool:
    """Whether ``data`` is an :class:`xarray.DataTree` (ArviZ 1.x container)."""
    datatree_class = getattr(xr, "DataTree", None)
    return datatree_class is not None and isinstance(data, datatree_class)


def is_inference_data(data) -> bool:
    """Whether ``data`` is an ArviZ 0.x :class:`arviz.InferenceData`."""
    if ARVIZ_MAJOR >= 1:
        return False
    return isinstance(data, _arviz().InferenceData)


def group_names(data) -> list[str]:
    """Names of the groups of an ``InferenceData`` or ``DataTree`` (empty list otherwise)."""
    if is_inference_data(data):
        return list(data.groups())
    if is_datatree(data):
        return list(data.children)
    return []


def has_group(data, name: str) -> bool:
    """Whether ``data`` holds a group called ``name``."""
    return name in group_names(data)


def get_group(data, name: str = "posterior") -> xr.Dataset:
    """Return group ``name`` of ``data`` as an :class:`xarray.Dataset`.

    Parameters
    ----------
    data : InferenceData, DataTree or Dataset
        A Dataset is returned unchanged (whatever ``name`` is).
    name : str
        Group name.

    Raises
    ------
    ValueError
        If the container has no such group.
    TypeError
        If ``data`` is none of the supported containers.
    """
    if isinstance(data, xr.Dataset):
        return data
    if is_inference_data(data) or is_datatree(data):
        names = group_names(data)
        if name not in names:
            raise ValueError(f"the data has no group {name!r}; its groups are {names}")
        if is_inference_data(data):
            return getattr(data, name)
        return data[name].to_dataset()
    raise TypeError(
        "expected an arviz.InferenceData, an xarray.DataTree or an xarray.Dataset, "
        f"got {type(data).__name__}"
    )


def posterior_with_labels(data) -> xr.Dataset:
    """The posterior of ``data`` with the label draws of group ``"labels"`` added back.

    A ``pm.sample`` trace keeps its partition variables in the group :data:`LABELS_GROUP`; every
    reader of label draws goes through this function, which returns the ``"posterior"`` Dataset
    with those variables joined (no copy of the arrays).  A Dataset is returned unchanged; a
    container without the group gives its posterior as is (e.g. traces of ``psm.sample_smc``,
    of PyMC's built-in samplers, or written before the labels had their own group).
    """
    if isinstance(data, xr.Dataset):
        return data
    posterior = get_group(data, "posterior")
    if not has_group(data, LABELS_GROUP):
        return posterior
    labels = get_group(data, LABELS_GROUP)
    missing = {name: labels[name] for name in labels.data_vars if name not in posterior.data_vars}
    return posterior.assign(missing) if missing else posterior


def replace_group(data, name: str, dataset: xr.Dataset):
    """Replace group ``name`` of ``data`` by ``dataset`` in place, keeping the groups' order."""
    if is_inference_data(data) and has_group(data, name):
        setattr(data, name, dataset)
        return data
    return add_group(data, name, dataset)


def from_groups(groups: dict[str, xr.Dataset], inference_data: bool | None = None):
    """A container of ``groups`` (name -> Dataset, not copied): an ArviZ 0.x ``InferenceData``
    if ``inference_data`` (default: with ArviZ 0.x), else an ``xarray.DataTree``."""
    if inference_data is None:
        inference_data = ARVIZ_MAJOR < 1
    if inference_data:
        return _arviz().InferenceData(**groups)
    return xr.DataTree.from_dict(groups)


def add_group(data, name: str, dataset: xr.Dataset, overwrite: bool = True):
    """Attach ``dataset`` to ``data`` as group ``name``, in place, and return ``data``.

    Parameters
    ----------
    data : InferenceData or DataTree
    name : str
    dataset : xarray.Dataset
    overwrite : bool
        Replace an existing group of the same name (otherwise raise ValueError).
    """
    if has_group(data, name) and not overwrite:
        raise ValueError(f"the data already has a group {name!r}; pass overwrite=True")
    if is_inference_data(data):
        if has_group(data, name):
            del data[name]
        data.add_groups({name: dataset})
        return data
    if is_datatree(data):
        data[name] = xr.DataTree(dataset)
        return data
    raise TypeError(
        "can only add a group to an arviz.InferenceData or an xarray.DataTree, "
        f"got {type(data).__name__}"
    )


def _as_chain_draw(values) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2:
        raise ValueError(f"expected values of shape (chain, draw), got shape {array.shape}")
    return array


def _dataset(values: np.ndarray) -> xr.Dataset:
    return xr.Dataset({"x": (("chain", "draw"), values)})


def rhat(values) -> float:
    """Rank-normalised split R-hat (Vehtari et al. 2021) of an array of shape (chain, draw)."""
    with np.errstate(invalid="ignore", divide="ignore"):  # a constant chain: NaN, no warning
        return float(_arviz().rhat(_dataset(_as_chain_draw(values)))["x"].values)


def ess(values, method: str = "bulk") -> float:
    """Effective sample size of an array of shape (chain, draw).

    ``method`` is passed to ArviZ (``"bulk"``, ``"tail"``, ``"mean"``, ...); ``"tail"`` uses the
    quantiles (0.05, 0.95) on both ArviZ lines.
    """
    kwargs = {"method": method}
    if method == "tail":
        kwargs["prob"] = TAIL_PROBABILITIES
    with np.errstate(invalid="ignore", divide="ignore"):  # a constant chain: NaN, no warning
        return float(_arviz().ess(_dataset(_as_chain_draw(values)), **kwargs)["x"].values)


def hdi(values, probability: float = 0.94) -> tuple[float, float]:
    """Highest-density interval of the pooled draws (narrowest interval holding ``probability``).

    Same rule as ArviZ's default (``"nearest"``): among the intervals
    ``[x_(i), x_(i + m - 1)]`` of the sorted draws with ``m = floor(probability * N)``, the
    narrowest (first one on ties).
    """
    x = np.sort(np.asarray(values, dtype=np.float64).ravel())
    x = x[np.isfinite(x)]
    if x.size == 0:
        return (np.nan, np.nan)
    n = x.size
    interval_size = int(np.floor(probability * n))
    n_intervals = n - interval_size
    if n_intervals <= 0 or interval_size <= 0:
        return (float(x[0]), float(x[-1]))
    widths = x[interval_size:] - x[:n_intervals]
    start = int(np.argmin(widths))
    return (float(x[start]), float(x[start + interval_size]))
