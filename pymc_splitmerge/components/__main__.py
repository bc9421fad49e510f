"""``python -m pymc_splitmerge.components``: regenerate the numba switch from the registry.

Rewrites :mod:`pymc_splitmerge.components._leaf_dispatch` from
:data:`pymc_splitmerge.components.registry.FAMILIES` (see that module).
"""

from pymc_splitmerge.components.registry import LEAF_DISPATCH_PATH, write_leaf_dispatch

if __name__ == "__main__":
    changed = write_leaf_dispatch()
    if changed:
        print(f"{LEAF_DISPATCH_PATH}: rewritten; now delete the numba caches "
              "(find . -name '*.nb[ic]' -delete)")
    else:
        print(f"{LEAF_DISPATCH_PATH}: up to date")
