"""Every ```python block of the README and the user guide runs as written, in order, one
namespace per document.

Whatever blocks the documents hold are found by parsing them, so a section added later is
tested too.  What the test changes, and nothing else: the run lengths (``pm.sample`` /
``psm.sample``: at most 30 draws, 20 tuning steps and 4 chains, ``cores=1``;
``psm.sample_smc``: at most 40 particles and 2 chains, ``cores=1``), the working directory
(a temporary one, for files a block writes) and matplotlib's backend (Agg).  A block that needs
PyMC's ``ZarrTrace`` (zarr 2) is skipped where zarr 2 is not installed.  A block preceded by
``<!-- docs-test: skip (slow) -->`` is skipped; it must be followed by a small-data twin in an
HTML comment (``<!-- docs-test: twin`` ... ``-->``, holding a ```python block), which runs
in its place.
"""

from __future__ import annotations

import inspect
import pathlib
import re

import matplotlib
import pymc as pm
import pytest

import pymc_splitmerge as psm

matplotlib.use("Agg")

ROOT = pathlib.Path(__file__).parents[1]
DOCUMENTS = ["README.md", "docs/user_guide.md"]
BLOCK = re.compile(r"```python\n(.*?)```", flags=re.DOTALL)
SKIP = "<!-- docs-test: skip"
TWIN = "<!-- docs-test: twin"

MAX_DRAWS, MAX_TUNE, MAX_CHAINS = 30, 20, 4
MAX_PARTICLES, MAX_SMC_CHAINS = 40, 2


def blocks(document: str) -> list[tuple[int, str, bool]]:
    """(line, code, skipped) of every ```python block of ``document``, in order."""
    text = (ROOT / document).read_text()
    found = []
    for match in BLOCK.finditer(text):
        before = text[:match.start()]
        since_last_block = before[before.rfind("```") + 3:] if "```" in before else before
        skipped = SKIP in since_last_block[-200:]
        found.append((before.count("\n") + 1, match.group(1), skipped))
    return found


def test_every_skipped_block_has_a_twin():
    for document in DOCUMENTS:
        text = (ROOT / document).read_text()
        for match in BLOCK.finditer(text):
            before = text[:match.start()]
            if SKIP in before[before.rfind("```") + 3:][-200:]:
                line = before.count("\n") + 1
                assert TWIN in text[match.end():match.end() + 300], (
                    f"{document}:{line} is skipped without a small-data twin after it")


def _capped(function, caps, defaults):
    positional = [parameter.name for parameter in inspect.signature(function).parameters.values()
                  if parameter.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]

    def run(*args, **kwargs):
        # leading positional arguments by name (``pm.sample(500, tune=500)``), so they are capped
        kwargs.update(zip(positional, args))
        args = args[len(positional):]
        for name, cap in caps.items():
            kwargs[name] = min(kwargs.get(name, defaults[name]), cap)
        kwargs["cores"] = 1
        kwargs.setdefault("progressbar", False)
        return function(*args, **kwargs)

    return run


def _zarr2_available() -> bool:
    try:
        import zarr
        from pymc.backends import zarr as pymc_zarr
    except ImportError:
        return False
    return bool(pymc_zarr._zarr_available) and int(zarr.__version__.split(".")[0]) < 3


@pytest.mark.parametrize("document", DOCUMENTS)
def test_document_code_blocks_run_in_order(document, tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(pm, "sample", _capped(pm.sample, {
        "draws": MAX_DRAWS, "tune": MAX_TUNE, "chains": MAX_CHAINS},
        {"draws": 1000, "tune": 1000, "chains": 2}))
    smc = psm.sample_smc
    monkeypatch.setattr(psm, "sample_smc", _capped(smc, {
        "draws": MAX_PARTICLES, "chains": MAX_SMC_CHAINS}, {"draws": 2000, "chains": 4}))
    found = blocks(document)
    assert found, f"{document} has no python block"
    namespace: dict = {"__name__": "__docs__"}
    ran = 0
    for line, code, skipped in found:
        if skipped:
            continue
        if "ZarrTrace" in code and not _zarr2_available():
            continue
        try:
            exec(compile(code, f"{document}:{line}", "exec"), namespace)  # noqa: S102
        except Exception as error:
            raise AssertionError(f"the block at {document}:{line} failed: {error!r}") from error
        finally:
            plt.close("all")
        ran += 1
    assert ran >= 1
