"""Regression: an mma result chosen by a runtime ``if`` (the shared prefix's K: the prefix's or the batch's own)
and only handed to the vector side was planned as a resident L0C buffer per arm, so a 128 x 256 fp32 score block
(the whole 128 KB of an A2 L0C) did not fit. Each arm's result now streams out of L0C in the mma's base tiles,
as one mma's result that is only stored does."""

from __future__ import annotations

import numpy as np

import cvtile.dsl as ct


@ct.jit
def scores_from_either_key(q, k1, k2, out, first, M: ct.constexpr, N: ct.constexpr, D: ct.constexpr):
    with ct.cube():
        qt = ct.load(q[0:M, 0:D])
        if first > 0:
            s = ct.mma(qt, k1[0:N, 0:D], trans_b=True)
        else:
            s = ct.mma(qt, k2[0:N, 0:D], trans_b=True)
    with ct.vector():
        ct.store(out[0:M, 0:N], s * 0.5)


def test_if_chosen_mma_result_streams_out_of_l0c_regression():
    m, n, d = 128, 256, 64
    rng = np.random.default_rng(0)
    q = rng.uniform(-1, 1, (m, d)).astype(np.float16)
    k1, k2 = (rng.uniform(-1, 1, (n, d)).astype(np.float16) for _ in range(2))
    out = np.zeros((m, n), np.float32)
    k = scores_from_either_key.compile(q, k1, k2, out, 1, M=m, N=n, D=d)   # raised BudgetError before
    l0c = k.report.spaces["L0C"]
    assert l0c.fits, k.report.table("L0C")
    assert all(b.shape != (m, n) for b in l0c.all), k.report.table("L0C")
    scores_from_either_key[1](q, k1, k2, out, 0, M=m, N=n, D=d)
    want = (q.astype(np.float32) @ k2.astype(np.float32).T) * 0.5
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
