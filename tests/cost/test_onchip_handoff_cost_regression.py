"""Regression: the cost model timed the 950's on-chip hand-offs as GM round trips.

On Ascend 950 a hand-off between the core types moves on chip (the cube's fixpipe writes L0C into the vector's
UB, the vector's MTE3 writes UB into the cube's L1), unless the kernel marks the tile ``through_gm``. The
simulator keeps every slot in its workspace area, and the cost model used to time the slot's store as a GM write
(FIX to GM, MTE3 to GM) and its load as a GM read (MTE2): traffic the chip does not have. Now the store is timed
as the on-chip move (the L0C -> UB and UB -> L1 rates of the cost table, as an explicit ``copy`` along those
edges) and the receiver's load costs nothing; a ``through_gm`` tile keeps its GM round trip.
"""

from __future__ import annotations

import numpy as np
import pytest

import cvtile.dsl as ct
from cvtile.dsl.jit import record_launches
from cvtile.sim.cost import estimate_calls


@ct.jit
def scores_round_trip(q, k, out, M: ct.constexpr, N: ct.constexpr, D: ct.constexpr, VIA_GM: ct.constexpr):
    """Scores to the vector, P back to the cube: two hand-offs, on chip on the 950 unless VIA_GM."""
    with ct.cube():
        s = ct.mma(ct.load(q[0:M, 0:D]), k[0:N, 0:D], trans_b=True)
        if VIA_GM:
            s = ct.through_gm(s)
    with ct.vector():
        p = ct.cast(ct.exp(s - ct.rowmax(s)[:, None]), ct.float16)
        if VIA_GM:
            p = ct.through_gm(p)
    with ct.cube():
        ct.store(out[0:M, 0:D], ct.mma(p, k[0:N, 0:D]))


def _cost(via_gm: bool, target: str):
    M, N, D = 64, 256, 64
    rng = np.random.default_rng(0)
    q = rng.uniform(-1, 1, (M, D)).astype(np.float16)
    k = rng.uniform(-1, 1, (N, D)).astype(np.float16)
    out = np.zeros((M, D), np.float32)
    with record_launches(run=False) as rec:
        scores_round_trip.on(target)[1](q, k, out, M=M, N=N, D=D, VIA_GM=via_gm)
    return estimate_calls(rec.launches, target).launches[0]


def test_onchip_handoffs_cost_no_gm_round_trip_on_ascend950():
    onchip, gm = _cost(False, "Ascend950"), _cost(True, "Ascend950")
    assert onchip.estimated_us < gm.estimated_us
    # the receivers read nothing from GM for an on-chip hand-off: the vector's MTE2 has no work at all here
    assert onchip.busy["aiv"].get("MTE2", 0.0) == 0.0 < gm.busy["aiv"]["MTE2"]


@pytest.mark.parametrize("via_gm", [False, True])
def test_a2_handoffs_still_go_through_gm(via_gm):
    """On A2/A3 every hand-off takes the GM route: marked or not, the same time."""
    assert _cost(via_gm, "Ascend910B1").estimated_us == _cost(not via_gm, "Ascend910B1").estimated_us
