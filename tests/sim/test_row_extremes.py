"""The runtime's row max / min (``rt.row_max`` / ``rt.row_min``: a vectorised max of integer order keys) give
the bits of the 16-lane reductions they replaced (``rt._row_max_lanes`` / ``rt._row_min_lanes``) for every
row: NaNs skipped (either sign, any payload), -inf / +inf for an empty or all-NaN row, and the sign of a zero
maximum (or minimum) the lanes' order picks."""

from __future__ import annotations

import numpy as np
import pytest

from cvtile.sim import rt

_SPECIALS = np.append(
    np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1.0, -1.0, 1e-45, -1e-45, 3.4e38, -3.4e38], np.float32),
    np.array([0xFFC00001, 0x7F800001, 0xFF800001, 0x7FFFFFFF, 0xFFFFFFFF], np.uint32).view(np.float32))
_ZEROS_AND_NANS = np.array([0.0, -0.0, np.nan, -np.inf, -1.0], np.float32)


def _rows(seed: int, count: int):
    rng = np.random.default_rng(seed)
    for i in range(count):
        n = int(rng.integers(0, 70))
        pool = (_SPECIALS, _ZEROS_AND_NANS, None, None)[i % 4]
        if pool is not None:
            row = rng.choice(pool, n)
        elif i % 8 == 2:
            row = rng.standard_normal(n)
        else:
            row = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
        yield np.ascontiguousarray(row, np.float32), int(rng.integers(0, n + 1))


@pytest.mark.parametrize("fast, lanes", [(rt.row_max, rt._row_max_lanes), (rt.row_min, rt._row_min_lanes)],
                         ids=["max", "min"])
def test_row_extreme_bits_equal_the_lane_reduction(fast, lanes):
    for row, n in _rows(3, 4000):
        got, want = np.float32(fast(row, n)), np.float32(lanes(row, n))
        assert got.view(np.uint32) == want.view(np.uint32), (row[:n], got, want)


def test_a_zero_maximum_keeps_the_sign_the_lanes_pick():
    row = np.zeros(40, np.float32)
    row[0] = -0.0      # lane 0 sees -0 first; the tail (32..39) holds +0 and comes first
    assert np.float32(rt.row_max(row, 40)).view(np.uint32) == np.float32(0.0).view(np.uint32)
    assert np.float32(rt.row_max(row, 32)).view(np.uint32) == np.float32(-0.0).view(np.uint32)
    assert rt.row_max(np.full(5, np.nan, np.float32), 5) == -np.inf
    assert rt.row_min(np.full(5, np.nan, np.float32), 5) == np.inf
    assert rt.row_max(np.zeros(0, np.float32), 0) == -np.inf
