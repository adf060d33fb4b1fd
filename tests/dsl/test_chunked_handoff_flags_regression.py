"""Regressions of chunk_rows around the hand-offs inside an over-budget vector pass: the flags that wrap a
chunk loop deadlocked the pipelined programs (the simulator's pipelined order and the cost model alike).

1. A span inside an ``if``'s arm lost its condition. The value the cube multiplies in both arms of a
   branch crosses twice (one channel per arm, V1C2 and V1C2_2: FIA's shared-prefix step reads the prefix
   or the batch's own V); chunk_rows moved both spans onto the chunk loop, so the AIV waited for both
   channels' free credits and set both ready flags on every step while the AIC takes only the one of the
   arm it runs. The flags now sit in the same arm of an ``if`` on the same condition around the loop.
2. A pass held a round trip to the cube. The antiquant kernel's V2 stores P's digits to a GM workspace the
   cube multiplies, and V3 reads the product back in the same row-local run; one chunk loop waited for the
   product before its first chunk while the digits were handed over only after its last. A pass now ends
   before a span that waits for the other side's data once one of its spans has handed data over.

Each kernel is compiled at a width whose vector pass does not fit UB (so it is chunked), timed by the cost
model (the deadlock was a ``ModelError``) and run in pipelined order (it deadlocked), against numpy.
"""

from __future__ import annotations

import numpy as np

import cvtile.dsl as ct
from cvtile.dsl import printer

R, C, D = 16, 4096, 64


@ct.jit
def _branch_handoff(q, kb, vb, wb, lens, out, R: ct.constexpr, C: ct.constexpr, D: ct.constexpr):
    """FIA's step with a branch around C2: P (a pass over UB) goes to the mma of the arm that runs."""
    for t in range(2):
        r = lens[2]   # (the result's valid extents come from before the branch)
        with ct.cube():
            s = ct.mma(ct.load(q[ct.ds(0, R, valid=r), 0:D]), kb[t, 0:C, 0:D], trans_b=True)
        with ct.vector():
            p = ct.cast(ct.exp(s - ct.rowmax(s)[:, None]), ct.float16)
        with ct.cube():
            if lens[t] != 0:
                o = ct.mma(p, vb[t, 0:C, 0:D])
            else:
                o = ct.mma(p, wb[t, 0:C, 0:D])
        with ct.vector():
            ct.store(out[t, ct.ds(0, R, valid=r), 0:D], o)


@ct.jit
def _gm_round_trip(x, w, ws_p, ws_o, out, R: ct.constexpr, C: ct.constexpr, D: ct.constexpr):
    """The antiquant kernel's V2 -> C2 -> V3 through the kernel's own GM workspaces, in one vector block."""
    core = ct.block_idx()
    for t in range(2):
        with ct.vector():
            s = ct.load(x[t, 0:R, 0:C]) * 2.0
            p = ct.exp(s - ct.rowmax(s)[:, None])
            ct.store(ws_p[core, 0:R, 0:C], ct.cast(p, ct.float16))
        with ct.cube():
            ct.store(ws_o[core, 0:R, 0:D], ct.mma(ct.load(ws_p[core, 0:R, 0:C]), w[0:C, 0:D]))
        with ct.vector():
            ct.store(out[t, 0:R, 0:D], ct.load(ws_o[core, 0:R, 0:D]) / ct.rowsum(p)[:, None])


def _timed_and_run_pipelined(kernel, args: list, out: int, want):
    ck = kernel.compile(*args, R=R, C=C, D=D)
    assert "row chunks" in printer.format_kernel(ck.compilation.final)   # the pass is chunked
    assert ck.cost(1, args).estimated_us > 0          # a ModelError (deadlock on hand-off flags) was the bug
    kernel[1](*args, R=R, C=C, D=D, order="pipelined")   # a SimulationError (deadlock) was the bug
    np.testing.assert_allclose(args[out], want, rtol=2e-3, atol=2e-3)


def _softmax_numerator(s):
    return np.exp(s - s.max(axis=-1, keepdims=True))


def test_chunked_pass_sets_the_flags_of_a_branch_handoff_only_in_its_branch():
    rng = np.random.default_rng(0)
    q = rng.standard_normal((R, D)).astype(np.float16)
    kb, vb, wb = (rng.standard_normal((2, C, D)).astype(np.float16) for _ in range(3))
    lens = np.array([1, 0, R], np.int64)   # step 0 takes the first arm, step 1 the second
    want = np.zeros((2, R, D))
    for t, vt in ((0, vb[0]), (1, wb[1])):
        p = _softmax_numerator(q.astype(np.float64) @ kb[t].T.astype(np.float64)).astype(np.float16)
        want[t] = p.astype(np.float64) @ vt.astype(np.float64)
    _timed_and_run_pipelined(_branch_handoff, [q, kb, vb, wb, lens, np.zeros((2, R, D), np.float32)], 5, want)


def test_chunked_pass_ends_before_a_round_trip_to_the_cube():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, R, C)).astype(np.float32)
    w = rng.standard_normal((C, D)).astype(np.float16)
    p = _softmax_numerator(2.0 * x.astype(np.float64))
    want = (p.astype(np.float16).astype(np.float64) @ w.astype(np.float64)) / p.sum(axis=-1, keepdims=True)
    args = [x, w, np.zeros((1, R, C), np.float16), np.zeros((1, R, D), np.float32), np.zeros((2, R, D), np.float32)]
    _timed_and_run_pipelined(_gm_round_trip, args, 4, want)
