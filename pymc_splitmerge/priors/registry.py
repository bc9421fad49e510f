"""The registry of partition priors: one line per prior class.

Each registered class is a :class:`~pymc_splitmerge.priors.base.GibbsTypePrior` that owns its
numpy EPPF (``_log_v`` / ``_log_w``), its pytensor graph (``log_v_graph`` / ``log_w_graph`` /
``support_graph``, see ``GibbsTypePrior.log_eppf_graph``), its validation, its test examples
(``examples`` / ``invalid_examples``) and, optionally, a vectorised urn (``urn_parameters`` /
``urn_log_weights``).  Everything else reads :data:`PRIOR_REGISTRY`:

* :mod:`pymc_splitmerge.priors` exports every registered class under its name;
* :mod:`pymc_splitmerge.distributions.priors` gives a registered prior without a hand-written
  PyMC distribution one generated from the class (``partition_prior_distribution``), which
  :mod:`pymc_splitmerge` exports;
* ``tests/test_prior_contract.py`` runs the same checks on the examples of every registered
  prior.

Adding a prior (``docs/contracts.md``, "Adding a prior") is its module plus one
``register_prior`` line below.
"""

from __future__ import annotations

from pymc_splitmerge.priors.base import GibbsTypePrior
from pymc_splitmerge.priors.dirichlet_process import DirichletProcessPrior
from pymc_splitmerge.priors.finite_dirichlet import FiniteDirichletPrior
from pymc_splitmerge.priors.mixture_of_finite_mixtures import MixtureOfFiniteMixturesPrior
from pymc_splitmerge.priors.pitman_yor import PitmanYorPrior

__all__ = ["PRIOR_REGISTRY", "register_prior"]

PRIOR_REGISTRY: dict[str, type[GibbsTypePrior]] = {}
"""Registered prior classes by name (the name of the matching PyMC ``RandomVariable``)."""


def register_prior(name: str, prior_class: type[GibbsTypePrior]) -> type[GibbsTypePrior]:
    """Add a prior class to :data:`PRIOR_REGISTRY` (idempotent for the same class).

    Raises
    ------
    TypeError
        If ``prior_class`` is not a ``GibbsTypePrior`` subclass.
    ValueError
        If ``name`` is already registered for another class.
    """
    if not (isinstance(prior_class, type) and issubclass(prior_class, GibbsTypePrior)):
        raise TypeError(f"prior_class must be a GibbsTypePrior subclass, got {prior_class!r}")
    if PRIOR_REGISTRY.get(name, prior_class) is not prior_class:
        raise ValueError(f"a prior named {name!r} is already registered "
                         f"({PRIOR_REGISTRY[name].__name__}); choose another name")
    PRIOR_REGISTRY[name] = prior_class
    return prior_class


register_prior("dirichlet_process", DirichletProcessPrior)
register_prior("pitman_yor", PitmanYorPrior)
register_prior("finite_dirichlet", FiniteDirichletPrior)
register_prior("mixture_of_finite_mixtures", MixtureOfFiniteMixturesPrior)
