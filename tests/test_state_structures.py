"""The state structures (``kernels.state``: Model, Partition, PriorTables) in numba.

``add`` / ``remove`` / ``move`` on the structures keep the state equal to one recomputed from
the labels (``PartitionState.check``), on a random sequence of moves.
"""

from __future__ import annotations

import numpy as np
import pytest

from pymc_splitmerge.components import NormalInverseWishart
from pymc_splitmerge.core.slots import free_slot, reset_row
from pymc_splitmerge.kernels import state as st
from pymc_splitmerge.priors import DirichletProcessPrior


def test_moves_on_structures_keep_the_state_consistent():
    rng = np.random.default_rng(3)
    family = NormalInverseWishart(mu0=np.zeros(2), kappa0=0.5, nu0=4.0, psi0=np.eye(2))
    x = family.prepare_data(rng.normal(size=(40, 2)))
    state = st.PartitionState(family, x, rng.integers(0, 4, size=40))
    model, partition = state.model, state.partition
    for _ in range(300):
        i = int(rng.integers(40))
        if rng.random() < 0.2:
            slot = int(free_slot(partition.where))
        else:
            slot = int(partition.active[rng.integers(partition.cluster_count[0])])
        st.move(model, partition, i, slot)
        assert state.n_clusters == partition.cluster_count[0]
    state.check()
    tables = state.tables(*DirichletProcessPrior(1.0).tables(40))
    value = st.log_target(model.family_id, model.params, tables.log_v, tables.log_w,
                          partition.sizes, partition.stats, partition.active,
                          partition.cluster_count)
    np.testing.assert_allclose(value, state.log_joint(DirichletProcessPrior(1.0)), rtol=1e-10)


def test_reset_row_refuses_a_row_of_another_width():
    """``core.slots.reset_row`` (inlined into the kernels; its check a compiled call) resets
    one row and refuses a row whose width is not the statistics' before writing anything."""
    stats = np.arange(12.0).reshape(3, 4)
    reset_row(stats, 1, np.full(4, -1.0))
    np.testing.assert_array_equal(stats, [[0, 1, 2, 3], [-1, -1, -1, -1], [8, 9, 10, 11]])
    for width in (3, 5):
        with pytest.raises(ValueError, match="one entry per column"):
            reset_row(stats, 0, np.zeros(width))
    np.testing.assert_array_equal(stats[0], [0, 1, 2, 3])
