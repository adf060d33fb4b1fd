"""Cube work: mma with L1 tiles, L0A/L0B tiles and GM-window operands, trans_b, acc=, int8 -> int32,
the fixpipe's float32 -> float16 cast on store, and the cube <-> vector hand-offs the frontend inserts
where a value crosses scopes (visible in the IR with their route), on A2 (through the GM workspace) and on
the 950 (on-chip paths, where `copy` may also move L0C -> UB and UB -> L1).

Operands are small integers so every product and sum is exact in float32: results are compared exactly.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import cvtile.dsl as ct

M, N, K = 16, 16, 32


@ct.jit
def matmuls(a, b, bt, ai, bi, o16, o, oi, M: ct.constexpr, N: ct.constexpr, K: ct.constexpr):
    with ct.cube():
        a1 = ct.load(a[0:M, 0:K])                                   # GM -> L1
        b1 = ct.load(b[0:K, 0:N])
        c0 = ct.mma(a1, b1)                                         # L1 operands (staged through L0A/L0B)
        c1 = ct.mma(a[0:M, 0:K], bt[0:N, 0:K], trans_b=True)        # GM-window operands, b transposed
        c2 = ct.mma(a1, b1, acc=c0)                                 # accumulate onto c0
        ct.store(o16[0:M, 0:N], c0)                                 # L0C float32 -> GM float16 (fixpipe)
        ct.store(o[0, 0:M, 0:N], c2)
        a0 = ct.copy(a1, ct.L0A)                                    # explicit L1 -> L0A / L0B
        b0 = ct.copy(ct.load(bt[0:N, 0:K]), ct.L0B)
        ct.store(o[1, 0:M, 0:N], ct.mma(a0, b0, trans_b=True))
        ct.store(oi[0:M, 0:N], ct.mma(ct.load(ai[0:M, 0:K]), ct.load(bi[0:K, 0:N])))   # int8 -> int32
    with ct.vector():
        s = c1 * 0.5                                                # L0C -> UB hand-off
        ct.store(o[2, 0:M, 0:N], s)
        p = ct.cast(s, ct.float16)
    with ct.cube():
        ct.store(o[3, 0:M, 0:N], ct.mma(p, ct.load(b[0:N, 0:N])))   # UB -> L1 hand-off into the cube


def _inputs():
    rng = np.random.default_rng(5)
    a = rng.integers(-3, 4, (M, K)).astype(np.float16)
    b = rng.integers(-3, 4, (K, N)).astype(np.float16)
    ai = rng.integers(-100, 100, (M, K)).astype(np.int8)
    bi = rng.integers(-100, 100, (K, N)).astype(np.int8)
    return a, b, np.ascontiguousarray(b.T), ai, bi


@pytest.fixture(scope="module")
def mm_run():
    a, b, bt, ai, bi = _inputs()
    o16 = np.zeros((M, N), np.float16)
    o = np.zeros((4, M, N), np.float32)
    oi = np.zeros((M, N), np.int32)
    matmuls[1](a, b, bt, ai, bi, o16, o, oi, M=M, N=N, K=K)
    return (a, b, ai, bi), o16, o, oi


def test_mma_of_l1_tiles_and_fixpipe_cast_to_float16(mm_run, dsl):
    (a, b, _, _), o16, _, _ = mm_run
    ref = a.astype(np.float32) @ b.astype(np.float32)
    assert dsl.same_bits(o16, ref.astype(np.float16))


def test_mma_acc_adds_onto_the_accumulator(mm_run):
    (a, b, _, _), _, o, _ = mm_run
    assert np.array_equal(o[0], 2 * (a.astype(np.float32) @ b.astype(np.float32)))


def test_mma_trans_b_with_l0_tiles(mm_run):
    (a, b, _, _), _, o, _ = mm_run
    assert np.array_equal(o[1], a.astype(np.float32) @ b.astype(np.float32))


def test_mma_int8_accumulates_in_int32(mm_run):
    (_, _, ai, bi), _, _, oi = mm_run
    assert np.array_equal(oi, ai.astype(np.int32) @ bi.astype(np.int32))


def test_gm_window_operands_and_handoffs_both_ways(mm_run):
    (a, b, _, _), _, o, _ = mm_run
    s = (a.astype(np.float32) @ b.astype(np.float32)) * np.float32(0.5)
    assert np.array_equal(o[2], s)
    p = s.astype(np.float16).astype(np.float32)
    assert np.array_equal(o[3], p @ b[:N].astype(np.float32))


# ---------------------------------------------------------------- IR (no numba compile)

def _compile(kernel=matmuls):
    a, b, bt, ai, bi = _inputs()
    return kernel.compile(a, b, bt, ai, bi, np.zeros((M, N), np.float16), np.zeros((4, M, N), np.float32),
                          np.zeros((M, N), np.int32), M=M, N=N, K=K)


def test_mma_ir_operands_staging_and_pipes():
    ck = _compile()
    ir = ck.ir
    assert ir.kind == "mixed"
    mmas = [op for op in ir.ops() if op.kind == "mma"]
    assert len(mmas) == 6 and {op.pipe for op in mmas} == {"M"} and {op.scope for op in mmas} == {"cube"}
    assert [op.attrs["trans_b"] for op in mmas] == [False, True, False, True, False, False]
    assert [str(op.result.type) for op in mmas][:2] == ["tile<16x16 float32 @L0C>"] * 2
    assert str(mmas[4].result.type) == "tile<16x16 int32 @L0C>"
    staged = [op for op in ir.ops() if op.kind == "copy" and op.attrs.get("staged")]
    assert {str(op.result.type.space) for op in staged} == {"L0A", "L0B"} and {op.pipe for op in staged} == {"MTE1"}
    text = str(ir)
    assert re.search(r"%c1\.\d+ = mma\{trans_b=True\}\(%a\.\d+\[0 \+: 16, 0 \+: 32\], %bt\.\d+\[0 \+: 16, 0 \+: 32\]\) "
                     r": tile<16x16 float32 @L0C>", text)
    assert re.search(r", acc=%c0\.\d+\)", text)
    stores = [op for op in ir.ops() if op.kind == "store"]
    assert [op.pipe for op in stores] == ["FIX", "FIX", "FIX", "FIX", "MTE3", "FIX"]


def test_cross_scope_values_become_handoffs_on_a2():
    ir = _compile().ir
    hand = [op for op in ir.ops() if op.kind == "handoff"]
    assert [(op.attrs["src"], op.attrs["dst"], op.scope) for op in hand] == [("L0C", "UB", "vector"),
                                                                          ("UB", "L1", "cube")]
    assert [op.operands[0].name for op in hand] == ["c1", "p"]
    assert "GM(workspace)" in hand[0].attrs["route"] and "GM(workspace)" in hand[1].attrs["route"]
    text = str(ir)
    assert "handoff{src='L0C', dst='UB', route='FIX L0C->GM(workspace), MTE2 GM->UB'}" in text
    assert _compile().report.workspace_bytes > 0   # A2 hand-offs travel through the GM workspace


def test_handoffs_use_on_chip_paths_on_950():
    ck = _compile(matmuls.on("Ascend950"))
    hand = [op for op in ck.ir.ops() if op.kind == "handoff"]
    assert [op.attrs["route"] for op in hand] == ["FIX L0C->UB", "MTE3 UB->L1"]
    assert ck.report.workspace_bytes == 0
    assert "target=Ascend950" in str(ck.ir)


@ct.jit
def onchip_copies(a, o, M: ct.constexpr, K: ct.constexpr):
    with ct.cube():
        c = ct.mma(a[0:M, 0:K], a[0:M, 0:K], trans_b=True)
        u = ct.copy(c, ct.UB)                # 950 only: L0C -> UB through the fixpipe
    with ct.vector():
        v = ct.cast(u * 2.0, ct.float16)
        w = ct.copy(v, ct.L1)                # 950 only: UB -> L1
    with ct.cube():
        ct.store(o[0:M, 0:M], ct.mma(w, a[0:M, 0:M]))


def test_regression_950_on_chip_copies_cross_scopes_without_handoff():
    a = np.zeros((16, 16), np.float16)
    o = np.zeros((16, 16), np.float32)
    k950 = onchip_copies.on("Ascend950")
    ck = k950.compile(a, o, M=16, K=16)
    copies = [(str(op.operands[0].type.space), str(op.result.type.space), op.pipe) for op in ck.ir.ops()
              if op.kind == "copy" and not op.attrs.get("staged")]
    assert copies == [("L0C", "UB", "FIX"), ("UB", "L1", "MTE3")]
    assert not any(op.kind == "handoff" for op in ck.ir.ops())   # explicit copies: nothing to hand off
    assert ck.report.workspace_bytes == 0


def test_on_chip_copies_are_rejected_on_a2(dsl):
    a = np.zeros((16, 16), np.float16)
    err = dsl.compile_error(onchip_copies, a, np.zeros((16, 16), np.float32), M=16, K=16)
    dsl.assert_at(err, onchip_copies, "u = ct.copy(c, ct.UB)", "copy L0C->UB is not a legal on-chip edge on "
                  "Ascend910B1", "legal: L1->L0A, L1->L0B")
