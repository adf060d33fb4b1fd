"""``benchmarks/bench_cost.py`` names the calibration points no model can place together: two points whose
model inputs are the same (so one estimate) but whose measured times are further apart than the calibration
band of their size is wide. Synthetic rows in the calibration table's columns; no file is read."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def bench_cost():
    sys.path.insert(0, str(BENCH))   # bench_cost imports its sibling calibration_kernel
    try:
        spec = importlib.util.spec_from_file_location("bench_cost", BENCH / "bench_cost.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(BENCH))
    return mod


def _row(pid, chip, s0, s1, blocks, us, kernel="PTO manual FA", tiling="?"):
    return {"id": pid, "chip": chip, "kernel": kernel, "S0": str(s0), "S1": str(s1), "D": "128",
            "cube_cores_used_or_blocks": blocks, "tiling_if_known": tiling, "time_us": str(us)}


def test_same_inputs_further_apart_than_the_band_are_named(bench_cost):
    # the per-core table's 8 cores and the 910B2 table's 8 blocks: one wave of the same blocks either way
    a = _row("P7", "A2/A3", 1024, 1024, "8 cores", 63.72)
    b = _row("M1", "910B2", 1024, 1024, "8 blocks", 20.96)
    assert bench_cost.pto_inputs(a) == bench_cost.pto_inputs(b)
    [(ia, ib, ta, tb, band)] = bench_cost.contradictions([a, b])
    assert (ia, ib, band) == ("P7", "M1", (0.65, 1.5))
    assert max(ta, tb) / min(ta, tb) > band[1] / band[0]


def test_points_a_band_can_hold_or_that_differ_are_not_named(bench_cost):
    near = [_row("A", "910B2", 1024, 1024, "8 blocks", 30.0), _row("B", "A2/A3", 1024, 1024, "8 cores", 60.0)]
    assert bench_cost.contradictions(near) == []          # 2.0x apart: 0.65-1.5 holds both (e = 39..45)
    big = [_row("C", "910B2", 8192, 8192, "64 blocks", 100.0), _row("D", "910B2", 8192, 8192, "64 blocks", 160.0)]
    assert [c[4] for c in bench_cost.contradictions(big)] == [(0.8, 1.25)]   # 1.6x > the 1.5625x band
    other_tiles = [_row("E", "910B2", 1024, 1024, "8 blocks", 20.0),
                   _row("F", "910B2", 1024, 1024, "8 blocks", 80.0, tiling="S1_TILE=512")]
    assert bench_cost.contradictions(other_tiles) == []  # different model inputs: two estimates
