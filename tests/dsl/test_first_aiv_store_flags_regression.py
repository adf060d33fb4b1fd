"""Regression: a vector store of a tile too short to split between the two AIVs (one row, as the KV-antiquant
kernel's query digits of an MHA decode) is written by AIV 0 alone, inside an ``if`` on the sub-block. The
store's hand-off flags were put inside that ``if`` too, so AIV 1 never set them; the cube's mode-2 wait counts a
set from each AIV, and the pipelined programs deadlocked (``fia_antiquant`` with one query row per task). The
flags now stand around the guard: both AIVs take part, AIV 0 alone writes."""

from __future__ import annotations

import numpy as np

import cvtile.dsl as ct


@ct.jit
def handoff_row(x, ws, w, out, D: ct.constexpr):
    """A whole (1, D) tile (a vector broadcast as a row: both AIVs hold it) handed to the cube through GM."""
    core = ct.block_idx()
    with ct.vector():
        ct.store(ws[core, 0:1, 0:D], ct.load(x[core, 0:D])[None, :] * 2.0)
    with ct.cube():
        a = ct.load(ws[core, 0:1, 0:D])
        ct.store(out[core, 0:1, 0:16], ct.mma(a, w[0:D, 0:16]))


def test_a_store_by_the_first_aiv_keeps_both_aivs_in_its_flags_regression():
    rng = np.random.default_rng(0)
    d, cores = 32, 2
    x = rng.uniform(-1, 1, (cores, d)).astype(np.float16)
    w = rng.uniform(-1, 1, (d, 16)).astype(np.float16)
    want = (x.astype(np.float32) * 2) @ w.astype(np.float32)
    for order in ("program", "pipelined"):      # pipelined: a deadlock before the fix
        ws = np.zeros((cores, 1, d), np.float16)
        out = np.zeros((cores, 1, 16), np.float32)
        handoff_row[cores](x, ws, w, out, D=d, order=order)
        np.testing.assert_allclose(out[:, 0], want, rtol=2e-3, atol=2e-3)
    text = str(handoff_row.compile(x, ws, w, out, D=d).compilation.final)
    aiv = text[text.index("program aiv"):]
    guard = aiv.index("if ")
    assert aiv.index("flag_wait") < guard < aiv.index("flag_set{id=0"), "the hand-off's flags are inside the guard"
