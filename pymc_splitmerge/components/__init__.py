"""Conjugate component families (parameters integrated out) and their numba core.

One module per family (``docs/contracts.md``, "Adding a family"), listed in the one table
:mod:`pymc_splitmerge.components.registry` (numeric id, name, class).  See
:mod:`pymc_splitmerge.components.base` for the Python interface and
:mod:`pymc_splitmerge.components.dispatch` for the numba functions the kernels call.
"""

from pymc_splitmerge.components import dispatch, registry
from pymc_splitmerge.components.base import ComponentFamily
from pymc_splitmerge.components.beta_bernoulli import BetaBernoulli
from pymc_splitmerge.components.dirichlet_categorical import DirichletCategorical
from pymc_splitmerge.components.gamma_poisson import GammaPoisson
from pymc_splitmerge.components.grid import GridComponent
from pymc_splitmerge.components.normal_inverse_gamma import NormalInverseGamma
from pymc_splitmerge.components.normal_inverse_wishart import NormalInverseWishart
from pymc_splitmerge.components.normal_known_covariance import NormalKnownCovariance
from pymc_splitmerge.components.product import ProductFamily
from pymc_splitmerge.components.registry import FAMILIES

__all__ = [
    "FAMILIES",
    "BetaBernoulli",
    "ComponentFamily",
    "DirichletCategorical",
    "GammaPoisson",
    "GridComponent",
    "NormalInverseGamma",
    "NormalInverseWishart",
    "NormalKnownCovariance",
    "ProductFamily",
    "dispatch",
    "registry",
]
