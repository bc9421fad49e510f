"""Cost of one PGSM move against the closure size |s̄| (NIW, D = 2, 20 particles).

Usage::

    python benchmarks/pgsm_cost.py [--repeats 20] [--baseline GIT_REF | --switch-cost]
                                   [--sizes 2000 ...]

With ``--baseline`` the kernel module ``pymc_splitmerge/kernels/pgsm.py`` of ``GIT_REF`` is
loaded (from ``git show``, into a temporary module used only by this run) and each move is
timed with both implementations, alternating, in the same process and from the same seed (so
both follow the same particle paths); the ratio of the CPU medians (current / baseline) is
printed.  Caveat: if ``GIT_REF``'s ``pgsm.py`` defines numba named tuples of its own
(``PGSMOptions`` etc.), numba unboxes the temporary module's copies
through a slow path costing ~0.4 ms per call, which biases the comparison against the
baseline (an A/A run read 0.78); compare such refs as whole trees in separate processes.
Refs up to ``a075fa5`` pass plain arrays and are not affected.

``--switch-cost`` uses the same alternating harness on two temporary copies of this tree's
``kernels/pgsm.py``: as it is, and with its one negative-control switch (``conditional``:
``False`` runs plain SMC, which the tests reject) folded to the constant ``True``; a ratio
of 1 within the noise shows that the switch costs nothing in the production kernel.

The data set holds the closure (two Gaussian clusters of |s̄|/2 points, one anchor in each,
or a single cluster of |s̄| points holding both anchors) plus 200 other clusters of 5 points
that the move must not touch: the per-particle cost of PGSM does not depend on the number of
clusters (paper §3.5), only the O(n) scan that collects the closure does.  Each timing starts
from the same partition (the state is restored between repetitions, outside the timer); the
first move of each configuration compiles / warms up and is not timed.  Wall-clock median /
min and the median CPU time of the thread are printed: on a shared machine the wall time
includes waiting for a core, the CPU time does not.
Target: <= 5 ms for |s̄| = 2,000 (CPU median, both configurations); the verdict is printed
when 2000 is among ``--sizes``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time

import numpy as np
from _common import load_temporary_module

from pymc_splitmerge.components import NormalInverseWishart
from pymc_splitmerge.kernels.pgsm import pgsm_move
from pymc_splitmerge.kernels.state import PartitionState
from pymc_splitmerge.priors import DirichletProcessPrior

CLOSURE_SIZES = (100, 500, 1000, 2000, 5000, 10000)
TARGET_SIZE = 2000
TARGET_MS = 5.0  # CPU median per move, both configurations
N_OTHER_CLUSTERS = 200
OTHER_CLUSTER_SIZE = 5


def build(closure_size: int, configuration: str, rng: np.random.Generator):
    half = closure_size // 2
    closure = np.vstack([rng.normal(size=(half, 2)), rng.normal(size=(closure_size - half, 2))
                         + 1.5])
    other = rng.normal(size=(N_OTHER_CLUSTERS * OTHER_CLUSTER_SIZE, 2)) * 0.3 + 20.0
    data = np.vstack([closure, other])
    if configuration == "split":  # two clusters, one anchor in each
        closure_labels = np.r_[np.zeros(half, int), np.ones(closure_size - half, int)]
        anchors = np.array([0, closure_size - 1])
    else:  # one cluster holding both anchors
        closure_labels = np.zeros(closure_size, int)
        anchors = np.array([0, closure_size - 1])
    other_labels = 2 + np.repeat(np.arange(N_OTHER_CLUSTERS), OTHER_CLUSTER_SIZE)
    labels = np.r_[closure_labels, other_labels]
    family = NormalInverseWishart(mu0=np.zeros(2), kappa0=0.1, nu0=4.0, psi0=np.eye(2))
    x = family.prepare_data(data)
    return family, x, labels, anchors


def load_baseline(ref: str):
    """The PGSM entry point of ``pymc_splitmerge/kernels/pgsm.py`` at git ``ref`` (temp module:
    ``pgsm_move``, or ``pgsm_step`` for refs before the rename)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    source = subprocess.run(["git", "show", f"{ref}:pymc_splitmerge/kernels/pgsm.py"],
                            cwd=root, capture_output=True, text=True, check=True).stdout
    module = load_temporary_module(source, "_pgsm_baseline")
    return getattr(module, "pgsm_move", None) or module.pgsm_step


SWITCH_LINE = "    conditional = options.conditional\n"


def load_switch_pair():
    """Two temporary copies of this tree's ``kernels/pgsm.py``: as it is, and with the
    ``conditional`` option (plain SMC, the tests' negative control) replaced by the constant
    ``True`` so that numba folds the switch away.  Both are temporary modules, so both pay
    the same unboxing of their own named tuples."""
    from pymc_splitmerge.kernels import pgsm

    with open(pgsm.__file__) as handle:
        source = handle.read()
    if source.count(SWITCH_LINE) != 1:
        raise SystemExit("kernels/pgsm.py no longer reads options.conditional in one line")
    with_switch = load_temporary_module(source, "_pgsm_with_switch")
    folded = load_temporary_module(source.replace(SWITCH_LINE, "    conditional = True\n"),
                          "_pgsm_switch_folded")
    return with_switch.pgsm_move, folded.pgsm_move


def time_pair(closure_size: int, configuration: str, repeats: int, rng, steps):
    """CPU-median ms of one move for each step function, timed alternately."""
    family, x, labels, anchors = build(closure_size, configuration, rng)
    state = PartitionState(family, x, labels)
    prior = DirichletProcessPrior(alpha=1.0)
    log_v_table, log_w_table = prior.tables(x.shape[0])
    saved = [array.copy() for array in state.arrays()]
    cpu = [[] for _ in steps]
    for step in steps:  # compile / warm up
        step(state, log_v_table, log_w_table, rng, anchors=anchors)
    for _ in range(repeats):
        # paired: every implementation runs from the same seed, so that (for the same
        # numbers) both follow the same particle paths and only the code differs
        seed = int(rng.integers(2**63))
        for index, step in enumerate(steps):
            for target, source in zip(state.arrays(), saved):
                target[...] = source
            paired = np.random.default_rng(seed)
            cpu_start = time.thread_time()
            step(state, log_v_table, log_w_table, paired, anchors=anchors, num_particles=20)
            cpu[index].append(time.thread_time() - cpu_start)
    return [float(np.median(values)) * 1e3 for values in cpu]


def time_move(closure_size: int, configuration: str, repeats: int,
              rng) -> tuple[float, float, float]:
    family, x, labels, anchors = build(closure_size, configuration, rng)
    state = PartitionState(family, x, labels)
    prior = DirichletProcessPrior(alpha=1.0)
    log_v_table, log_w_table = prior.tables(x.shape[0])
    saved = [array.copy() for array in state.arrays()]
    pgsm_move(state, log_v_table, log_w_table, rng, anchors=anchors)  # compile / warm up
    timings, cpu_timings = [], []
    for _ in range(repeats):
        for target, source in zip(state.arrays(), saved):
            target[...] = source
        start, cpu_start = time.perf_counter(), time.thread_time()
        info = pgsm_move(state, log_v_table, log_w_table, rng, anchors=anchors,
                         num_particles=20)
        cpu_timings.append(time.thread_time() - cpu_start)
        timings.append(time.perf_counter() - start)
        assert info.closure_size == closure_size
    return (float(np.median(timings)) * 1e3, float(np.min(timings)) * 1e3,
            float(np.median(cpu_timings)) * 1e3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--baseline", default=None,
                        help="git ref whose kernels/pgsm.py is timed alongside the current one")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(CLOSURE_SIZES),
                        help="closure sizes |s̄| to time (default: %(default)s)")
    parser.add_argument("--switch-cost", action="store_true",
                        help="time the move with its negative-control switch against a copy "
                             "with the switch folded to a constant")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    if args.baseline is not None or args.switch_cost:
        if args.switch_cost:
            current_move, baseline = load_switch_pair()
            label = "with the conditional switch vs folded to a constant"
        else:
            current_move, baseline = pgsm_move, load_baseline(args.baseline)
            label = f"current vs {args.baseline}"
        print(f"PGSM move CPU ms (median of {args.repeats}), {label}, "
              f"alternating in one process; load average {os.getloadavg()[0]:.2f}")
        print(f"{'|closure|':>10} {'config':>8} {'current':>9} {'baseline':>9} {'ratio':>7}")
        ratios = []
        for size in args.sizes:
            for configuration in ("split", "merge"):
                current, before = time_pair(size, configuration, args.repeats, rng,
                                            (current_move, baseline))
                ratios.append(current / before)
                print(f"{size:>10} {configuration:>8} {current:>9.3f} {before:>9.3f} "
                      f"{current / before:>7.3f}")
        print(f"geometric mean ratio current/baseline: {np.exp(np.mean(np.log(ratios))):.3f}")
        return
    print(f"PGSM move, 20 particles, NIW D=2, beta=0.5, annealing on, "
          f"+{N_OTHER_CLUSTERS} untouched clusters; {args.repeats} repeats; "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"{'|closure|':>10} {'anchors apart ms':>30} {'anchors together ms':>30}")
    print(f"{'':>10} {'(median / min / cpu median)':>30} {'(median / min / cpu median)':>30}")
    for size in args.sizes:
        apart = time_move(size, "split", args.repeats, rng)
        together = time_move(size, "merge", args.repeats, rng)
        print(f"{size:>10} {apart[0]:>12.3f} / {apart[1]:>6.3f} / {apart[2]:>6.3f} "
              f"{together[0]:>12.3f} / {together[1]:>6.3f} / {together[2]:>6.3f}")
        if size == TARGET_SIZE:
            verdict = "met" if max(apart[2], together[2]) <= TARGET_MS else "NOT met"
            print(f"{'':>10} target <= {TARGET_MS:g} ms CPU at |closure| = {TARGET_SIZE:,}: "
                  f"{verdict} (anchors apart {apart[2]:.2f} ms, together {together[2]:.2f} ms)")


if __name__ == "__main__":
    main()
