"""The runtime matmuls take the empty extents the generated kernels no longer branch on.

``codegen`` used to wrap each dense mma in ``if m > 0 and n > 0: if k == 0: out.fill(0) else: dot_into(...)``;
those branches now live in ``rt.dot_into`` / ``rt.dot_int_into`` (compiled once per machine), so a kernel
calls them unconditionally. Pinned here: an empty contraction gives zeros, an empty product is left alone, and
a normal product is BLAS's.
"""

from __future__ import annotations

import numpy as np

from cvtile.sim.rt import dot_int_into, dot_into


def test_an_empty_contraction_gives_zeros():
    out = np.full((3, 4), np.nan, np.float32)
    dot_into(np.zeros((3, 0), np.float32), np.zeros((0, 4), np.float32), out)
    assert np.array_equal(out, np.zeros((3, 4), np.float32))


def test_an_empty_product_is_left_alone():
    for m, n in ((0, 4), (3, 0)):
        out = np.full((m, n), np.nan, np.float32)
        dot_into(np.ones((m, 5), np.float32), np.ones((5, n), np.float32), out)
        assert out.shape == (m, n)
    out = np.zeros((0, 4), np.int32)
    dot_int_into(np.ones((0, 5), np.int32), np.ones((5, 4), np.int32), out, False, 2 ** 14)
    assert out.shape == (0, 4)


def test_a_product_is_blas_sgemm():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((5, 7), np.float32), rng.standard_normal((4, 7), np.float32)
    out = np.empty((5, 4), np.float32)
    dot_into(a, b.T, out)
    assert np.array_equal(out, np.dot(a, b.T))
    iout = np.empty((5, 4), np.int32)
    ia, ib = rng.integers(-128, 128, (5, 7)).astype(np.int32), rng.integers(-128, 128, (4, 7)).astype(np.int32)
    dot_int_into(ia, ib, iout, True, 2 ** 14)
    assert np.array_equal(iout, ia.astype(np.int64) @ ib.T.astype(np.int64))
