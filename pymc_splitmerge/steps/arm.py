r"""PyMC step method: Adaptive Reconfiguration Moves (ARM, Herlau, Mørup, Schmidt & Teh).

Each draw applies ``n_sams_updates`` SAMS updates (default 0), one ARM move
(:func:`pymc_splitmerge.kernels.arm.build_arm_move`) and ``n_gibbs_sweeps`` collapsed Gibbs
sweeps (the paper's iteration: one ARM move + one Gibbs sweep; composed by
:func:`pymc_splitmerge.kernels.arm.build_arm_transition`).  An ARM move needs two *library*
partitions :math:`z^a \ne z^b`; the move is an exact
Metropolis–Hastings move for :math:`\pi` whenever their law does not depend on the chain's
current state.  Three ways to supply them (``library=``):

``"ensemble"`` (default, exact)
    Red/black halves of a population of chains (``../shared/specs/arm_and_smc.md`` §1).  At
    draw ``t`` chain ``c`` makes an ARM move when ``c + t`` is even, drawing
    :math:`z^a, z^b` from the *current* states of the chains with ``c' + t`` odd; those
    make no ARM move this draw (only their SAMS updates and Gibbs sweeps).  Each half-step
    leaves :math:`\pi^{\otimes S}` invariant (the source half's update does not depend on the
    ARM half, whose law given the source half is invariant).
    Built on PyMC's population sampler (``PopulationArrayStepShared``), which hands every
    chain the other chains' states of the previous draw and updates all chains at once; the
    halves make that simultaneous update exact.  Needs ``chains >= 4`` (each ARM chain needs
    two source chains); works with ``cores=1`` (chains in lockstep in one process) and
    ``cores > 1`` (one process per chain, the population piped every draw).
``"frozen"`` (exact after tuning)
    Each chain collects its own past states during tuning (the window
    :math:`\lfloor t/2 \rfloor .. t-1`, never the current state); the library is frozen
    (distinct partitions kept) when tuning ends.  Ordinary ``pm.sample`` (any ``chains``,
    ``cores``); no information crosses chains.  Tuning draws are adaptive (discarded).
``"adaptive"`` (the paper as published; **not exactly invariant**)
    Population sampling; :math:`z^a` from the chain's own past states and :math:`z^b` from all
    chains' past states in the window :math:`\lfloor t/2 \rfloor .. t-1` (the current state
    excluded).  This is adaptive MCMC: the kernel changes with the history and the chains'
    joint update is simultaneous, so the stationary law is only approached under diminishing
    adaptation.  A warning is emitted; use it to reproduce the paper.

Costs per draw: one ARM move is two runs of Algorithm 3 (forward and forced reverse), each
about one Gibbs sweep over the points of the two chosen blocks plus one restricted move of
every other point, plus the ``n_gibbs_sweeps`` sweeps; in ``"ensemble"`` mode half of the
chains only sweep.  ``"ensemble"`` and ``"adaptive"`` run the chains in lockstep through
PyMC's population sampler (slower per draw than independent chains with ``cores > 1``).

References
----------
Herlau, T., Mørup, M., Schmidt, M. N. and Teh, Y. W. Adaptive reconfiguration moves for
Dirichlet mixtures.  Algorithm 3, eq. (8), §2.4, §3.
"""

from __future__ import annotations

import collections
import warnings

import numpy as np
from pymc.step_methods.arraystep import PopulationArrayStepShared
from pymc.step_methods.compound import Competence

from pymc_splitmerge.core.relabel import canonical_labels
from pymc_splitmerge.distributions.priors import PartitionPriorRV
from pymc_splitmerge.kernels.arm import build_arm_transition, distinct_rows
from pymc_splitmerge.kernels.options import non_negative_integer
from pymc_splitmerge.steps.base import PartitionStep

__all__ = ["LIBRARY_MODES", "ARMStep"]

LIBRARY_MODES = ("ensemble", "frozen", "adaptive")
_POPULATION_MODES = ("ensemble", "adaptive")
MIN_ENSEMBLE_CHAINS = 4


class ARMStep(PartitionStep):
    """Adaptive Reconfiguration Moves for a partition variable.

    Parameters
    ----------
    vars : TensorVariable or list of one TensorVariable
        The partition variable (e.g. created with ``DirichletProcess``).
    library : {"ensemble", "frozen", "adaptive"}, default "ensemble"
        Where the two auxiliary partitions come from (module docstring): ``"ensemble"`` is
        exact (red/black halves of ``chains >= 4`` population chains); ``"frozen"`` is exact
        after tuning (each chain's own tuning history, ordinary ``pm.sample``);
        ``"adaptive"`` is the paper's adaptive scheme, not exactly invariant (warns).
    n_gibbs_sweeps : int, default 1
        Collapsed Gibbs sweeps after the ARM move in each draw (the paper uses 1; with
        ``"ensemble"`` the other half makes these sweeps only).
    n_sams_updates : int, default 0
        SAMS split-merge updates (uniform anchors) before the ARM move in each draw, by every
        chain (``kernels.arm.build_arm_transition``).  They leave the posterior invariant on
        their own, move the chains where their states agree (ARM proposes only where two
        library partitions disagree: from the one-cluster start all chains agree), and put
        split-merge states in a ``"frozen"`` library.  ``1`` is the setting measured by
        ``benchmarks/mixing.py``.
    model : pymc.Model, optional
    rng : int or numpy.random.Generator, optional
        Used only if PyMC does not hand a generator to the step.

    Notes
    -----
    Sampler stats: ``arm_sams_accepted`` (SAMS updates accepted this draw, int64),
    ``arm_move`` (0 none, 1 split, 2 merge: whether the anchors shared a
    block), ``arm_accepted`` (bool), ``arm_n_moved`` (points whose block changed, int64),
    ``arm_log_accept_ratio`` (float64; ``nan`` when no move was made this draw) and
    ``arm_n_clusters`` (also the progress-bar column).  ``pm.sample`` never selects ARMStep
    automatically (it needs a choice of library and, by default, several chains).

    References
    ----------
    Herlau, T., Mørup, M., Schmidt, M. N. and Teh, Y. W. Adaptive reconfiguration moves for
    Dirichlet mixtures.  Algorithm 3, eq. (8), §2.4.
    """

    name = "arm"
    stats_dtypes_shapes = {
        "arm_move": (np.int64, []),
        "arm_accepted": (bool, []),
        "arm_n_moved": (np.int64, []),
        "arm_log_accept_ratio": (np.float64, []),
        "arm_n_clusters": (np.int64, []),
        "arm_sams_accepted": (np.int64, []),
    }

    def __new__(cls, *args, library="ensemble", **kwargs):
        target = _PopulationARMStep if cls is ARMStep and library in _POPULATION_MODES else cls
        return super().__new__(target, *args, library=library, **kwargs)

    def __init__(self, vars, library: str = "ensemble", n_gibbs_sweeps: int = 1,
                 n_sams_updates: int = 0, model=None, rng=None, **kwargs):
        if library not in LIBRARY_MODES:
            raise ValueError(
                f"unknown library {library!r}; choose one of "
                f"{', '.join(repr(mode) for mode in LIBRARY_MODES)}"
            )
        self.library = library
        self.n_gibbs_sweeps = non_negative_integer(n_gibbs_sweeps, "n_gibbs_sweeps")
        self.n_sams_updates = non_negative_integer(n_sams_updates, "n_sams_updates")
        self.tune = False  # PyMC sets it to True while tuning
        self.transition = self.build_transition()
        super().__init__(vars, model=model, rng=rng, **kwargs)
        if self.n_points < 2:
            raise ValueError(
                f"ARMStep needs a partition of at least 2 points; got {self.n_points}")
        if library == "adaptive":
            warnings.warn(
                "ARMStep(library='adaptive') is the published adaptive scheme: the auxiliary "
                "partitions depend on the chains' histories, so the chain is not exactly "
                "invariant for the posterior (it converges only under diminishing adaptation). "
                "Use library='ensemble' (exact, chains >= 4) or library='frozen' (exact after "
                "tuning) for exact sampling.",
                UserWarning,
                stacklevel=2,
            )

    # ------------------------------------------------------------------ per-chain state
    def reset_chain(self) -> None:
        super().reset_chain()
        self._draw = 0
        self._own_history: collections.deque = collections.deque()
        self._all_history: collections.deque = collections.deque()
        self._frozen_library: np.ndarray | None = None

    @staticmethod
    def competence(var, has_grad=None):
        """COMPATIBLE, never IDEAL: automatic assignment keeps the default partition step."""
        owner = getattr(var, "owner", None)
        if owner is not None and isinstance(owner.op, PartitionPriorRV):
            return Competence.COMPATIBLE
        return Competence.INCOMPATIBLE

    def stop_tuning(self):
        """End of tuning: freeze the library (``library="frozen"``)."""
        super().stop_tuning()
        if self.library == "frozen" and self._frozen_library is None:
            self._frozen_library = distinct_rows(list(self._own_history))
            self._own_history = collections.deque()
            if self._frozen_library.shape[0] < 2:
                warnings.warn(
                    "ARMStep(library='frozen') collected fewer than 2 distinct partitions "
                    "during tuning, so it makes no ARM moves (Gibbs sweeps only); increase "
                    "`tune`.",
                    UserWarning,
                    stacklevel=2,
                )

    # ------------------------------------------------------------------ libraries
    @staticmethod
    def _window_trim(history: collections.deque, draw: int) -> None:
        """Keep the states of draws floor(draw/2) .. draw-1 (``history`` holds the last ones)."""
        keep = draw - draw // 2
        while len(history) > keep:
            history.popleft()

    def _pair_from(self, candidates):
        """Two distinct partitions drawn uniformly from ``candidates`` (or ``None``)."""
        distinct = distinct_rows(candidates)
        if distinct.shape[0] < 2:
            return None
        first, second = self.rng.choice(distinct.shape[0], size=2, replace=False)
        return distinct[first], distinct[second]

    def _library_pair(self, current_labels):
        """``(z^a, z^b)`` for this draw, or ``None`` when this chain makes no ARM move."""
        if self.library == "frozen":
            if self._frozen_library is not None:
                library = self._frozen_library
            else:  # tuning: the chain's own past states (adaptive, discarded)
                self._window_trim(self._own_history, self._draw)
                library = list(self._own_history)
                self._own_history.append(current_labels)
            return self._pair_from(library)
        return None  # population modes: see _PopulationARMStep

    def build_transition(self):
        return build_arm_transition(self._library_for_move, self.n_sams_updates,
                                    self.n_gibbs_sweeps)

    def _library_for_move(self, partition):
        """The library pair of this draw (``None``: no ARM move), given to the ARM move."""
        pair = self._library_pair(canonical_labels(partition.labels))
        self._draw += 1
        return pair

    def kernel_step(self, state, prior, tables):
        sams, info, _ = self.run_transition(state, tables)
        return {"arm_move": int(info.move), "arm_accepted": bool(info.accepted),
                "arm_n_moved": int(info.n_moved),
                "arm_log_accept_ratio": float(info.log_accept_ratio),
                "arm_sams_accepted": (0 if sams is None
                                      else sum(int(move.accepted) for move in sams.moves))}


class _PopulationARMStep(ARMStep, PopulationArrayStepShared):
    """ARMStep for ``library="ensemble"`` / ``"adaptive"``: PyMC population sampling.

    Being a ``PopulationArrayStepShared`` makes ``pm.sample`` run the chains in lockstep and
    link every chain's step to the list of all chains' current points.
    """

    def __init__(self, *args, **kwargs):
        self.population = None
        self.this_chain = None
        self.other_chains = None
        super().__init__(*args, **kwargs)

    def astep(self, q0):  # pragma: no cover - PartitionStep.step is used instead
        raise NotImplementedError("ARMStep works on the point dict (step), not on arrays")

    def link_population(self, population, chain_index):
        """Called by ``pm.sample``; checks the number of chains."""
        if len(population) < MIN_ENSEMBLE_CHAINS:
            raise ValueError(
                f"ARMStep(library={self.library!r}) needs pm.sample(chains >= "
                f"{MIN_ENSEMBLE_CHAINS}): every chain draws its auxiliary partitions from at "
                f"least two other chains; got chains = {len(population)}.  Increase `chains` "
                "or use library='frozen', which works with any number of chains."
            )
        self.population = population
        self.this_chain = chain_index
        self.other_chains = [c for c in range(len(population)) if c != chain_index]

    def _chain_labels(self, chain):
        return canonical_labels(np.asarray(self.population[chain][self.value_name]))

    def _library_pair(self, current_labels):
        if self.population is None:
            raise RuntimeError(
                f"ARMStep(library={self.library!r}) runs only inside pm.sample with chains >= "
                f"{MIN_ENSEMBLE_CHAINS} (PyMC's population sampler links the chains); use "
                "library='frozen' to step a single chain."
            )
        draw = self._draw
        n_chains = len(self.population)
        if self.library == "ensemble":
            if (self.this_chain + draw) % 2 == 0:
                sources = [c for c in range(n_chains) if (c + draw) % 2 == 1]
            else:
                return None  # the source half: no ARM move this draw (SAMS, Gibbs only)
            return self._pair_from([self._chain_labels(c) for c in sources])
        # adaptive: window floor(t/2)..t-1 of all chains' states, z^a from the own history
        self._window_trim(self._all_history, draw)
        history = list(self._all_history)
        self._all_history.append(np.stack([self._chain_labels(c) for c in range(n_chains)]))
        if not history:
            return None
        own = distinct_rows([states[self.this_chain] for states in history])
        every = distinct_rows(np.concatenate(history, axis=0))
        if every.shape[0] < 2:
            return None
        labels_a = own[self.rng.integers(own.shape[0])]
        others = every[np.any(every != labels_a, axis=1)]
        labels_b = others[self.rng.integers(others.shape[0])]
        return labels_a, labels_b
