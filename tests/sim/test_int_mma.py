"""The simulator's int8 x int8 -> int32 mma: ``rt.dot_int_into`` (staged tiles, float BLAS) and the streamed
``rt.mm_bt_i8`` / ``rt.mm_b_i8`` (a few rows of a against 8-bit GM rows). Each is exact against numpy's int64
product in both orientations, at the extremes of int8 and uint8 and over contractions past float32's exact
range (where they switch to float64 / int64); int32 results wrap as the cube's int32 accumulator does."""

from __future__ import annotations

import numpy as np
import pytest

from cvtile.sim.rt import dot_int_into, mm_b_i8, mm_bt_i8

INT8_BOUND = 128 * 128
SHAPES = [(1, 1, 1), (12, 128, 1024), (12, 1024, 128), (12, 1025, 64), (64, 4096, 48), (3, 0, 5)]


def _operands(m, k, n, trans, dtype=np.int8):
    rng = np.random.default_rng(m * 7 + k + n)
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max + 1, (m, k)).astype(np.int32)
    b = rng.integers(info.min, info.max + 1, (n, k) if trans else (k, n)).astype(dtype)
    extreme = info.min if info.min else info.max      # the largest products
    a[:, :1] = extreme
    b[..., :1] = extreme
    want = a.astype(np.int64) @ (b.T if trans else b).astype(np.int64)
    return a, b, want.astype(np.int32)


@pytest.mark.parametrize("m, k, n", SHAPES)
@pytest.mark.parametrize("trans", [False, True])
def test_int8_products_are_exact(m, k, n, trans):
    a, b, want = _operands(m, k, n, trans)
    out = np.full((m, n), 7, np.int32)
    dot_int_into(a, b.astype(np.int32), out, trans, INT8_BOUND)
    assert np.array_equal(out, want)


@pytest.mark.parametrize("m, k, n", SHAPES)
@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_streamed_8bit_rows_are_exact(m, k, n, trans, dtype):
    """b as a GM tensor with a row stride wider than its rows (a window of a larger cache)."""
    a, b, want = _operands(m, k, n, trans, dtype)
    rows, cols = b.shape
    stride = cols + 5
    flat = np.zeros(3 + rows * stride + 8, dtype)
    for r in range(rows):
        flat[3 + r * stride:3 + r * stride + cols] = b[r]
    out = np.full((m, n), 7, np.int32)
    bound = 128 * (255 if dtype == np.uint8 else 128)
    if trans:
        mm_bt_i8(a, flat, 3, stride, n, k, out)
    else:
        mm_b_i8(a, flat, 3, stride, k, n, out, bound)
    assert np.array_equal(out, want)


def test_uint8_contractions_past_float32s_exact_range():
    """255 * 255 * 300 passes 2**24: the bound sends the staged product to float64, still exact."""
    a = np.full((2, 300), 255, np.int32)
    b = np.full((300, 3), 255, np.int32)
    b[0, 0] = 254
    out = np.zeros((2, 3), np.int32)
    dot_int_into(a, b, out, False, 255 * 255)
    assert np.array_equal(out, (a.astype(np.int64) @ b).astype(np.int32))


def test_views_of_larger_buffers_and_wrapping():
    buf = np.zeros(4096, np.int32)
    a = buf[:2 * 3].reshape(2, 3)
    a[:] = [[127, -128, 5], [0, 1, -1]]
    b = np.full((3, 2), -128, np.int32)
    out = np.zeros((2, 2), np.int32)
    dot_int_into(a, b, out, False, INT8_BOUND)
    assert out.tolist() == [[-128 * 4, -128 * 4], [0, 0]]
    big = np.full((1, 140000), 127, np.int32)      # 140000 * 127 * 127 passes 2**31: the int32 result wraps
    want = np.int64(140000 * 127 * 127).astype(np.int32)
    out1 = np.zeros((1, 1), np.int32)
    dot_int_into(big, big, out1, True, INT8_BOUND)
    assert out1[0, 0] == want
    flat = np.full(140000, 127, np.int8)
    mm_bt_i8(big, flat, 0, 140000, 1, 140000, out1)
    assert out1[0, 0] == want
    mm_b_i8(big, flat, 0, 1, 140000, 1, out1, INT8_BOUND)
    assert out1[0, 0] == want
