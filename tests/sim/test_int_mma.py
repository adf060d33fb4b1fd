"""The simulator's int8 x int8 -> int32 mma (``rt.dot_int_into``): exact against numpy's int64 product in both
orientations, at the extremes of int8 and over contractions as long as a KV block; int32 results wrap as the
cube's int32 accumulator does past its range."""

from __future__ import annotations

import numpy as np
import pytest

from cvtile.sim.rt import dot_int_into


@pytest.mark.parametrize("m, k, n", [(1, 1, 1), (12, 128, 1024), (12, 1024, 128), (64, 4096, 48), (3, 0, 5)])
@pytest.mark.parametrize("trans", [False, True])
def test_int8_products_are_exact(m, k, n, trans):
    rng = np.random.default_rng(m * 7 + k + n)
    a = rng.integers(-128, 128, (m, k)).astype(np.int32)
    b = rng.integers(-128, 128, (n, k) if trans else (k, n)).astype(np.int32)
    a[:, :1] = -128          # the largest products
    b[..., :1] = -128
    out = np.full((m, n), 7, np.int32)
    dot_int_into(a, b, out, trans)
    want = a.astype(np.int64) @ (b.T if trans else b).astype(np.int64)
    assert np.array_equal(out, want.astype(np.int32))


def test_views_of_larger_buffers_and_wrapping():
    buf = np.zeros(4096, np.int32)
    a = buf[:2 * 3].reshape(2, 3)
    a[:] = [[127, -128, 5], [0, 1, -1]]
    b = np.full((3, 2), -128, np.int32)
    out = np.zeros((2, 2), np.int32)
    dot_int_into(a, b, out, False)
    assert out.tolist() == [[-128 * 4, -128 * 4], [0, 0]]
    big = np.full((1, 140000), 127, np.int32)      # 140000 * 127 * 127 passes 2**31: the int32 result wraps
    out1 = np.zeros((1, 1), np.int32)
    dot_int_into(big, big, out1, True)
    assert out1[0, 0] == np.int64(140000 * 127 * 127).astype(np.int32)
