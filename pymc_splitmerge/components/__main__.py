"""``python -m pymc_splitmerge.components``: regenerate the numba switch from the registry.

Rewrites :mod:`pymc_splitmerge.components._leaf_dispatch` from
:data:`pymc_splitmerge.components.registry.FAMILIES` (see that module).  The developer command
to run after adding, removing or renaming a family; importing the package never writes it.
"""

from pymc_splitmerge.components import registry

if __name__ == "__main__":
    if registry.write_leaf_dispatch():
        print(f"{registry.LEAF_DISPATCH_PATH}: rewritten; now delete the numba caches "
              "(find . -name '*.nb[ic]' -delete)")
    else:
        print(f"{registry.LEAF_DISPATCH_PATH}: up to date")
