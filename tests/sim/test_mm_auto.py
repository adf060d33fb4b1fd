"""``rt.mm_auto_*``: the skinny/dense choice of a GM-window mma, made in the runtime instead of a kernel branch.

A generated kernel multiplies a tile by a plain-rows float GM window in one call; the runtime streams the
window row by row for at most ``SKINNY_ROWS`` rows of a (``mm_bt_*`` / ``mm_b_*``) and stages it for BLAS
otherwise. Both sides of the threshold must give the product of the decoded window, for each storage dtype,
transposed or not.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from cvtile.sim import rt

_STORE = {"f16": (np.float16, np.uint16), "bf16": (ml_dtypes.bfloat16, np.uint16), "f32": (np.float32, np.float32)}


def _window(tag, rows, cols, stride, rng):
    """A GM window of ``rows`` x ``cols`` values at row stride ``stride`` (flat storage) and its float32 values."""
    dt, store = _STORE[tag]
    vals = rng.standard_normal((rows, cols)).astype(dt)
    flat = np.zeros(rows * stride + 3, store)
    for r in range(rows):
        flat[3 + r * stride:3 + r * stride + cols] = vals[r].view(store)
    return flat, vals.astype(np.float32)


@pytest.mark.parametrize("tag", sorted(_STORE))
@pytest.mark.parametrize("m", [1, rt.SKINNY_ROWS, rt.SKINNY_ROWS + 1, 40])
def test_both_paths_give_the_product_of_the_decoded_window(tag, m):
    rng = np.random.default_rng(m)
    k, n = 24, 9
    bt = getattr(rt, f"mm_auto_bt_{tag}")
    b = getattr(rt, f"mm_auto_b_{tag}")
    rbuf, stage = np.empty(32, np.float32), np.empty(32 * 32, np.float32)
    flat, wt = _window(tag, n, k, 30, rng)                  # B as n rows of k: out = a @ B.T
    a = rng.standard_normal((m, k)).astype(np.float32)
    out = np.full((m, n), np.nan, np.float32)
    bt(a, flat, 3, 30, n, k, out, rbuf, stage)
    np.testing.assert_allclose(out, a @ wt.T, rtol=1e-5, atol=1e-5)
    flat, w = _window(tag, k, n, 30, rng)                   # B as k rows of n: out = a @ B
    out = np.full((m, n), np.nan, np.float32)
    b(a, flat, 3, 30, k, n, out, rbuf, stage)
    np.testing.assert_allclose(out, a @ w, rtol=1e-5, atol=1e-5)
