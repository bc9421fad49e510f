"""Integer identifiers of the conjugate component families (re-exported by ``dispatch``).

Kept in a module of their own so that family modules and ``dispatch`` can both import them
without an import cycle.  The values are part of the numba ABI of the package: a kernel
compiled once handles every family by switching on these constants.
"""

__all__ = [
    "FAMILY_NORMAL_INVERSE_WISHART",
    "FAMILY_NORMAL_KNOWN_COVARIANCE",
    "FAMILY_NORMAL_INVERSE_GAMMA",
    "FAMILY_BETA_BERNOULLI",
    "FAMILY_DIRICHLET_CATEGORICAL",
    "FAMILY_GAMMA_POISSON",
    "FAMILY_GRID",
    "FAMILY_PRODUCT",
]

FAMILY_NORMAL_INVERSE_WISHART = 0
FAMILY_NORMAL_KNOWN_COVARIANCE = 1
FAMILY_NORMAL_INVERSE_GAMMA = 2
FAMILY_BETA_BERNOULLI = 3
FAMILY_DIRICHLET_CATEGORICAL = 4
FAMILY_GAMMA_POISSON = 5
FAMILY_GRID = 6
FAMILY_PRODUCT = 7  # ProductFamily: independent families on column groups
