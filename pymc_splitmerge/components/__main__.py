"""``python -m pymc_splitmerge.components``: regenerate the numba switch from the registry.

Rewrites :mod:`pymc_splitmerge.components._leaf_dispatch` from
:data:`pymc_splitmerge.components.registry.FAMILIES` (see that module).  Importing the
package already does this when the package directory is writable; this command is the one
to run, as a user who can write there, when an import refused a stale switch.
"""

from pymc_splitmerge.components import registry

if __name__ == "__main__":
    changed = registry.write_leaf_dispatch() or registry.leaf_dispatch_regenerated
    if changed:
        print(f"{registry.LEAF_DISPATCH_PATH}: rewritten; now delete the numba caches "
              "(find . -name '*.nb[ic]' -delete)")
    else:
        print(f"{registry.LEAF_DISPATCH_PATH}: up to date")
