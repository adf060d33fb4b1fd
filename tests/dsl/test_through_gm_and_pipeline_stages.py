"""``ct.through_gm`` and the pipeline pass on loops whose vector section feeds the cube's first matmul.

* ``through_gm(tile)`` routes the tile's hand-off through the GM workspace on every target: on the 950, whose
  hand-offs otherwise stay on chip (slots in the receiving core's buffer), the channel's slots are GM.
* A loop V0 -> C1 -> V1 -> C2 -> V2 (the 950 dequant kernel's step: a vector section before the first matmul)
  has one round trip more than the non-quant kernel's, so it is pipelined in more stages than the preload depth;
  each channel holds only (receive stage - send stage + 1) tiles, which the slots cover. The pass used to
  demand a slot per stage of the loop and refused it.
* A hand-off's receive (its slot load and the staged copies) runs at its reader's stage, not one round trip
  early: V' (sent with V0) is read by C2, and was carried across stages in L0B.
* Regression: two pipelined loops in one block. The second loop's place in its block was the one found before
  the first loop was rewritten into several ops, so the rewrite replaced the wrong op ("for uses ... before its
  definition").
Results in pipelined order are bitwise those of program order throughout.
"""

from __future__ import annotations

import numpy as np
import pytest

import cvtile.dsl as ct
from cvtile.dsl.errors import CompilationError


@ct.jit
def scaled_block_scores(q, k, scale, out, M: ct.constexpr, S2: ct.constexpr, D: ct.constexpr,
                        GM_ROUTE: ct.constexpr):
    """V0 (scale the block), C1 (q · blockᵀ), V1 (store the scores), per block of S2 keys."""
    with ct.cube():
        qt = ct.load(q[0:M, 0:D])
    for j in range(0, k.shape[0] // S2):
        with ct.vector():
            kd = ct.load(k[ct.ds(j * S2, S2), 0:D]) * ct.load(scale[0:1, 0:D])
            if GM_ROUTE:
                kd = ct.through_gm(kd)
        with ct.cube():
            s = ct.mma(qt, kd, trans_b=True)
        with ct.vector():
            ct.store(out[0:M, ct.ds(j * S2, S2)], s)


@ct.jit
def five_handoffs(q, k, v, out, M: ct.constexpr, S2: ct.constexpr, D: ct.constexpr):
    """The dequant kernel's step without the dequantisation: V0 stages K and V (plain copies times 1), C1, V1
    (exp of the scores, cast), C2, V2 (accumulate)."""
    with ct.cube():
        qt = ct.load(q[0:M, 0:D])
    with ct.vector():
        acc = ct.zeros((M, D), ct.float32)
    for j in range(0, k.shape[0] // S2):
        with ct.vector():
            kd = ct.through_gm(ct.load(k[ct.ds(j * S2, S2), 0:D]) * 1.0)
        with ct.cube():
            s = ct.mma(qt, kd, trans_b=True)
        with ct.vector():
            p = ct.cast(ct.exp(s * 0.125), ct.float16)
            vd = ct.through_gm(ct.load(v[ct.ds(j * S2, S2), 0:D]) * 1.0)
        with ct.cube():
            o = ct.mma(p, vd)
        with ct.vector():
            acc = acc + o
    with ct.vector():
        ct.store(out[0:M, 0:D], acc)


@ct.jit
def two_loops(q, k, out, out2, M: ct.constexpr, S2: ct.constexpr, D: ct.constexpr):
    """Two pipelined loops one after the other in one block: C1 -> V1 -> C2 -> V2 over the first half of the
    keys into an accumulator, then C1 -> V1 -> C2 over the second half, each block's P · K stored by the cube."""
    with ct.cube():
        qt = ct.load(q[0:M, 0:D])
    with ct.vector():
        acc = ct.zeros((M, D), ct.float32)
    half = k.shape[0] // S2 // 2
    for j in range(0, half):
        with ct.cube():
            s = ct.mma(qt, k[ct.ds(j * S2, S2), 0:D], trans_b=True)
        with ct.vector():
            p = ct.cast(ct.exp(s * 0.125), ct.float16)
        with ct.cube():
            o = ct.mma(p, k[ct.ds(j * S2, S2), 0:D])
        with ct.vector():
            acc = acc + o
    with ct.vector():
        ct.store(out[0:M, 0:D], acc)
    for j in range(half, 2 * half):
        with ct.cube():
            s = ct.mma(qt, k[ct.ds(j * S2, S2), 0:D], trans_b=True)
        with ct.vector():
            p = ct.cast(ct.exp(s * 0.25), ct.float16)
        with ct.cube():
            ct.store(out2[ct.ds((j - half) * M, M), 0:D], ct.mma(p, k[ct.ds(j * S2, S2), 0:D]))


def _inputs(rng, M, S2, D, blocks):
    q = rng.uniform(-1, 1, (M, D)).astype(np.float16)
    k = rng.uniform(-1, 1, (blocks * S2, D)).astype(np.float16)
    return q, k


@pytest.mark.parametrize("target", ["Ascend910B1", "Ascend950"])
def test_through_gm_takes_the_gm_route_on_every_target(target):
    rng = np.random.default_rng(0)
    M, S2, D = 16, 128, 64
    q, k = _inputs(rng, M, S2, D, 4)
    scale = rng.uniform(0.5, 1.5, (1, D)).astype(np.float16)
    routes = {}
    for gm in (False, True):
        out = np.zeros((M, 4 * S2), np.float32)
        scaled_block_scores.on(target)[1](q, k, scale, out, M=M, S2=S2, D=D, GM_ROUTE=gm)
        want = q.astype(np.float64) @ (k * scale).astype(np.float64).T
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
        final = scaled_block_scores.on(target).compile(q, k, scale, out, M=M, S2=S2, D=D,
                                                       GM_ROUTE=gm).compilation.final
        chans = [ch for ch in final.channels if ch.kind == "data"]
        routes[gm] = [ch.route for ch in chans]
        vector_to_cube = next(ch for ch in chans if ch.src == "aiv")
        assert (final.workspace_bytes >= vector_to_cube.slot_bytes) == (gm or target == "Ascend910B1")
    on_chip = target == "Ascend950"
    assert routes[False] == (["onchip", "onchip"] if on_chip else ["gm", "gm"])
    assert routes[True] == (["gm", "onchip"] if on_chip else ["gm", "gm"])


def test_through_gm_outside_a_scope_is_an_error():
    @ct.jit
    def bad(x, out):
        with ct.vector():
            t = ct.load(x[0:8, 0:16])
        u = ct.through_gm(t)
        with ct.vector():
            ct.store(out[0:8, 0:16], u)

    with pytest.raises(CompilationError, match="through_gm marks a tile made in a cube"):
        bad.compile(np.zeros((8, 16), np.float32), np.zeros((8, 16), np.float32))


def test_through_gm_of_a_tile_made_on_the_other_side_is_an_error():
    @ct.jit
    def bad(q, k, out):
        with ct.cube():
            s = ct.mma(ct.load(q[0:16, 0:16]), ct.load(k[0:16, 0:16]), trans_b=True)
        with ct.vector():
            ct.store(out[0:16, 0:16], ct.through_gm(s))

    x = np.zeros((16, 16), np.float16)
    with pytest.raises(CompilationError, match="was not made in this `with vector"):
        bad.compile(x, x, np.zeros((16, 16), np.float32))


@pytest.mark.parametrize("target", ["Ascend910B1", "Ascend950"])
def test_a_vector_section_before_the_first_matmul_is_pipelined_bitwise(target):
    rng = np.random.default_rng(1)
    M, S2, D, blocks = 16, 128, 64, 5
    q, k = _inputs(rng, M, S2, D, blocks)
    v = rng.uniform(-1, 1, (blocks * S2, D)).astype(np.float16)
    ck = five_handoffs.on(target).compile(q, k, v, np.zeros((M, D), np.float32), M=M, S2=S2, D=D)
    depth = 3 if target == "Ascend950" else 2
    ir = ck.ir_after("pipeline")
    stages = 1 + 2 * (depth - 1)       # the vector's round trips 0, 1, 2 at stages 0, D - 1, 2(D - 1)
    assert f"pipelined({stages} stages)" in ir
    assert len([ch for ch in ck.compilation.final.channels if ch.kind == "data"]) == 5
    outs = {}
    for order in ("program", "pipelined"):
        outs[order] = np.zeros((M, D), np.float32)
        five_handoffs.on(target)[1](q, k, v, outs[order], M=M, S2=S2, D=D, order=order)
    np.testing.assert_array_equal(outs["program"], outs["pipelined"])
    p = np.exp((q.astype(np.float64) @ k.astype(np.float64).T).astype(np.float32) * 0.125).astype(np.float16)
    np.testing.assert_allclose(outs["program"], p.astype(np.float64) @ v.astype(np.float64), rtol=2e-3, atol=2e-3)


def test_a_receive_runs_at_its_readers_stage():
    """V' is sent at the vector's first stage and read by C2 at a later one: its slot load and its staged copy
    into L0B sit in C2's stage, so the cube holds no L0B copy of V' across stages."""
    rng = np.random.default_rng(2)
    M, S2, D = 16, 128, 64
    q, k = _inputs(rng, M, S2, D, 4)
    ck = five_handoffs.on("Ascend950").compile(q, k, k, np.zeros((M, D), np.float32), M=M, S2=S2, D=D)
    aic = ck.ir_after("pipeline").split("program aiv")[0]
    stage_of = {}
    stage = None
    for line in aic.splitlines():
        if "if stage" in line:
            stage = int(line.split("if stage")[1].split()[0])
        for name in ("handoff='V2C2_2'", "mma{trans_b=False}"):
            if name in line:
                stage_of[name] = stage
    assert stage_of["handoff='V2C2_2'"] == stage_of["mma{trans_b=False}"] == 2


def test_two_pipelined_loops_in_one_block_regression():
    rng = np.random.default_rng(3)
    M, S2, D = 16, 128, 64
    q, k = _inputs(rng, M, S2, D, 6)
    outs = {}
    for order in ("program", "pipelined"):
        outs[order] = np.zeros((M, D), np.float32), np.zeros((3 * M, D), np.float32)
        two_loops[1](q, k, *outs[order], M=M, S2=S2, D=D, order=order)
    for a, b in zip(outs["program"], outs["pipelined"]):
        np.testing.assert_array_equal(a, b)
    s = (q.astype(np.float64) @ k.astype(np.float64).T).astype(np.float32)
    kk = k.astype(np.float64)
    p1 = np.exp(s[:, :3 * S2] * 0.125).astype(np.float16).astype(np.float64)
    np.testing.assert_allclose(outs["program"][0], p1 @ kk[:3 * S2], rtol=2e-3, atol=2e-3)
    for i in range(3):
        blk = slice((3 + i) * S2, (4 + i) * S2)
        p2 = np.exp(s[:, blk] * 0.25).astype(np.float16).astype(np.float64)
        np.testing.assert_allclose(outs["program"][1][i * M:(i + 1) * M], p2 @ kk[blk], rtol=2e-3, atol=2e-3)
    ck = two_loops.compile(q, k, *outs["program"], M=M, S2=S2, D=D)
    # both loops in the AIC program, the first in the AIV program too (the second's AIV side is one stage)
    assert ck.ir_after("pipeline").count("pipelined(") == 3
