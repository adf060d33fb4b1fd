"""Regression: a row-chunked pass's assembled outputs made every pipelined FIA program compile twice.

chunk_rows writes each chunk of a row state used after the pass into its full tile (``insert_rows``). The
numba backend printed that as an array slice assignment (``full[r0:r0 + n] = chunk``), which numba lowers only
with its NRT, so the NRT-free compile of the whole program failed at native lowering and the launcher compiled
it a second time with NRT: the FIA decode with flash-decode took 45 s to compile in pipelined order instead
of 23 s. The rows are now copied element by element; the program compiles once, without NRT.
"""

from __future__ import annotations

import numpy as np

import cvtile.dsl as ct
from cvtile.sim.launch import COMPILE_STATS


@ct.jit
def _running_max(x, w, out, mx, n, R: ct.constexpr, C: ct.constexpr):
    """A cube product per step and a vector pass over UB (R x C fp32) carrying a running row max across the
    loop: chunk_rows assembles the carried max from its chunks (``insert_rows``)."""
    with ct.vector():
        m = ct.full((R,), -1e30, ct.float32)
    for i in range(n):
        with ct.cube():
            s = ct.mma(ct.load(x[i, 0:R, 0:64]), ct.load(w[0:64, 0:C]))
        with ct.vector():
            m = ct.maximum(m, ct.rowmax(s))
            ct.store(out[i, 0:R, 0:C], ct.exp(s - m[:, None]))
    with ct.vector():
        ct.store(mx[0:R], m)


def test_a_chunked_pass_with_an_assembled_output_compiles_without_nrt():
    rng = np.random.default_rng(0)
    R, C, n = 256, 1024, 2
    x = rng.uniform(-1, 1, (n, R, 64)).astype(np.float16)
    w = rng.uniform(-1, 1, (64, C)).astype(np.float16)
    args = lambda: (x, w, np.zeros((n, R, C), np.float32), np.zeros(R, np.float32), n)   # noqa: E731
    ck = _running_max.compile(*args(), R=R, C=C)
    assert "insert_rows" in ck.ir_after("chunk_rows")
    s = np.einsum("nrk,kc->nrc", x.astype(np.float64), w.astype(np.float64))
    m = np.maximum.accumulate(s.max(axis=2), axis=0)
    results = {}
    for order in ("program", "pipelined"):
        a = args()
        before = COMPILE_STATS["nrt_fallbacks"]
        _running_max[1](*a, R=R, C=C, order=order)
        assert COMPILE_STATS["nrt_fallbacks"] == before, order
        assert "_nrt=False" in ck.runner("numba", order).source, order
        assert np.abs(a[2] - np.exp(s - m[..., None])).max() <= 1e-4 and np.abs(a[3] - m[-1]).max() <= 1e-5
        results[order] = a
    assert all(np.array_equal(p, q) for p, q in zip(results["program"][2:4], results["pipelined"][2:4]))
