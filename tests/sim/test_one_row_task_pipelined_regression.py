"""Regression: a one-row task crashed in pipelined order (the second vector core's share of it is empty).

In pipelined order the two AIVs of a core group split a task's rows; a task of one row (a decode whose
query heads do not share a KV head, G = 1) leaves AIV 1 zero rows. The numba backend took the runtime extent
of a fused elementwise value from its leaves of static extent other than 1, and used ``1`` where every leaf
had capacity 1 in that dim: AIV 1's empty share of ``exp(s - m[:, None])`` became one row, and the hand-off
store that sends it to the cube stopped with ``store: the tile's valid dim 0 exceeds the window's valid extent
(tile=1, window=0)``. Met on st case 212 of ``fia_v4.json`` (a decode with a shared prefix, N = N_kv = 16) when
running the corpus in both orders. Where every leaf has capacity 1, the first leaf's runtime extent (0 or 1)
is now the value's, as ``ValidExtents`` has it (``codegen._Gen._shape_from``).
"""

from __future__ import annotations

import numpy as np

import cvtile.dsl as ct


@ct.jit
def _one_row(x, w, v, out, n, C: ct.constexpr):
    """One query row against n KV tiles: the scores' online max (V1), P to the cube, P @ V back (V2)."""
    with ct.vector():
        m = ct.full((1,), -1e30, ct.float32)
    for i in range(n):
        with ct.cube():
            s = ct.mma(ct.load(x[0:1, 0:64]), w[i, 0:64, 0:C])
        with ct.vector():
            m = ct.maximum(m, ct.rowmax(s))
            p = ct.cast(ct.exp(s - m[:, None]), ct.float16)
        with ct.cube():
            o = ct.mma(p, v[i, 0:C, 0:64])
        with ct.vector():
            ct.store(out[i, 0:1, 0:64], o)


def test_a_one_row_task_runs_in_pipelined_order_as_in_program_order():
    rng = np.random.default_rng(0)
    c, n = 128, 2
    x = rng.uniform(-1, 1, (1, 64)).astype(np.float16)
    w = rng.uniform(-1, 1, (n, 64, c)).astype(np.float16)
    v = rng.uniform(-1, 1, (n, c, 64)).astype(np.float16)
    out = {}
    for order in ("program", "pipelined"):
        out[order] = np.zeros((n, 1, 64), np.float32)
        _one_row[1](x, w, v, out[order], n, C=c, order=order)
    s = np.einsum("rk,nkc->nrc", x.astype(np.float64), w.astype(np.float64))
    m = np.maximum.accumulate(s.max(axis=2), axis=0)
    p = np.exp(s - m[..., None]).astype(np.float16).astype(np.float64)
    golden = np.einsum("nrc,nck->nrk", p, v.astype(np.float64))
    assert np.abs(out["program"] - golden).max() <= 1e-3 * np.abs(golden).max()
    assert np.array_equal(out["program"], out["pipelined"])
