"""``ct.dequant``: the fixpipe's DEQF16 on an int32 mma result, as the language, the simulator, the memory plan and
the cost model see it.

The reference is the documented conversion: the int32 converted to fp32, times the scale cut to its high 19 bits
(what the fixpipe keeps of deqScalar), rounded to fp16 to nearest even. The simulator must give exactly that, in
program and in pipelined order, and exactly what the same steps give in the vector unit; the hand-off must carry
fp16 (half the bytes) and the vector unit must do no dequant work.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import cvtile.dsl as ct
from cvtile.dsl.jit import record_launches
from cvtile.kernels.golden.fullquant import dequant_value
from cvtile.sim.cost import estimate_calls

@ct.jit
def scores_dequant(q, k, out, deq, M: ct.constexpr, N: ct.constexpr, D: ct.constexpr):
    """out = fp16(q · kᵀ · deq), dequantised by the fixpipe and handed to the vector, which stores it."""
    with ct.cube():
        s = ct.dequant(ct.mma(ct.load(q[0:M, 0:D]), k[0:N, 0:D], trans_b=True), deq)
    with ct.vector():
        ct.store(out[0:M, 0:N], s)


@ct.jit
def scores_vector_dequant(q, k, out, deq, M: ct.constexpr, N: ct.constexpr, D: ct.constexpr):
    """The same with the int32 scores handed over and dequantised by the vector unit."""
    with ct.cube():
        s = ct.mma(ct.load(q[0:M, 0:D]), k[0:N, 0:D], trans_b=True)
    with ct.vector():
        ct.store(out[0:M, 0:N], ct.cast(ct.cast(s, ct.float32) * deq, ct.float16))


@ct.jit
def dequant_stored_by_cube(q, k, out, deq, M: ct.constexpr, N: ct.constexpr, D: ct.constexpr):
    """The dequantised block stored straight from the cube (a Fixpipe to GM)."""
    with ct.cube():
        ct.store(out[0:M, 0:N], ct.dequant(ct.mma(ct.load(q[0:M, 0:D]), k[0:N, 0:D], trans_b=True), deq))


def _inputs(M, N, D, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.integers(-128, 128, (M, D)).astype(np.int8)
    k = rng.integers(-128, 128, (N, D)).astype(np.int8)
    return q, k


def reference(q, k, deq: float) -> np.ndarray:
    """The documented DEQF16 of q · kᵀ (exact int32) with a float32 scale, the scale as the golden reads it
    (``dequant_value``: cut to the fixpipe's 19 bits)."""
    c = q.astype(np.int64) @ k.astype(np.int64).T
    scale = np.float32(dequant_value(np.array([deq], np.float32)))
    return (c.astype(np.int32).astype(np.float32) * scale).astype(np.float16)


@pytest.mark.parametrize("order", ["program", "pipelined"])
@pytest.mark.parametrize("kernel", [scores_dequant, dequant_stored_by_cube])
def test_dequant_is_the_documented_conversion_bit_for_bit(kernel, order):
    M, N, D = 32, 96, 64
    q, k = _inputs(M, N, D)
    deq = float(np.float32(1.2345e-3))     # low mantissa bits the fixpipe drops
    out = np.zeros((M, N), np.float16)
    kernel[1](q, k, out, deq, M=M, N=N, D=D, order=order)
    np.testing.assert_array_equal(out.view(np.uint16), reference(q, k, deq).view(np.uint16))


def test_fixpipe_dequant_matches_the_vector_steps_for_a_cut_scale():
    """With a scale the fixpipe keeps whole, moving the dequant from the vector to the fixpipe changes no bit."""
    M, N, D = 16, 2048, 64     # 16 x 2048 int32: more than the L0C pieces, so the mma streams out
    q, k = _inputs(M, N, D, seed=1)
    deq = dequant_value(np.array([3.0e-4], np.float32))
    a, b = np.zeros((M, N), np.float16), np.zeros((M, N), np.float16)
    scores_dequant[1](q, k, a, deq, M=M, N=N, D=D, order="pipelined")
    scores_vector_dequant[1](q, k, b, deq, M=M, N=N, D=D, order="pipelined")
    np.testing.assert_array_equal(a.view(np.uint16), b.view(np.uint16))


def _launch(kernel, M, N, D, deq=1e-3, target="Ascend910B1"):
    q, k = _inputs(M, N, D)
    out = np.zeros((M, N), np.float16)
    with record_launches(run=False) as rec:
        kernel.on(target)[1](q, k, out, deq, M=M, N=N, D=D)
    return rec.launches


def test_the_hand_off_carries_fp16_and_the_vector_does_no_dequant_work():
    M, N, D = 128, 512, 128
    fix = estimate_calls(_launch(scores_dequant, M, N, D), "Ascend910B1").launches[0]
    vec = estimate_calls(_launch(scores_vector_dequant, M, N, D), "Ascend910B1").launches[0]
    # the cube's Fixpipe writes the slot as fp16, half the bytes of the int32 block: a shorter FIX span
    fix_store = sum(c for c, _, kind, pipe in fix.path_lines if kind == "store" and pipe == "FIX")
    vec_store = sum(c for c, _, kind, pipe in vec.path_lines if kind == "store" and pipe == "FIX")
    assert 0 < fix_store < vec_store
    assert fix.busy["aiv"].get("V", 0.0) == 0.0 < vec.busy["aiv"]["V"]
    assert fix.estimated_us < vec.estimated_us


def _ops(launch, kind):
    from cvtile.dsl.ir import walk

    return [op for op in walk(launch.kernel.compilation.final.programs()["aic"]) if op.kind == kind]


@pytest.mark.parametrize("N, streamed", [(2048, True), (128, False)])
def test_the_dequantised_tile_takes_no_l0c_of_its_own(N, streamed):
    """The dequant result is a view of its int32 operand (the fixpipe converts as it moves the tile): an mma
    result that only leaves the cube through a dequant is staged in the mma's own L0C pieces as one that is only
    stored would be, and computed piece by piece at its store when it exceeds them (16 x 2048 int32)."""
    (launch,) = _launch(scores_dequant, 16, N, 64)
    plan = launch.kernel.compilation.final.memory
    (deq,), (mma,) = _ops(launch, "dequant"), _ops(launch, "mma")
    assert deq.results[0].id not in plan.buffer_of and mma.results[0].id not in plan.buffer_of
    assert (mma.results[0].id in plan.streamed_out) == streamed


@pytest.mark.parametrize("body, message", [
    ("vector_scope", "dequant is a cube op; it is not allowed inside `with vector():`"),
    ("float_mma", "dequant reads an int32 L0C tile"),
    ("bf16", "dequant produces float16"),
    ("tile_scale", "a per-channel scale vector (VDEQF16) is not in the language"),
])
def test_dequant_refuses_what_the_fixpipe_cannot_do(body, message):
    if body == "vector_scope":
        @ct.jit
        def bad(q, out, deq):
            with ct.vector():
                ct.store(out[0:16, 0:16], ct.dequant(ct.load(q[0:16, 0:16]), deq))
        args = (np.zeros((16, 16), np.int32), np.zeros((16, 16), np.float16), 1.0)
    elif body == "float_mma":
        @ct.jit
        def bad(q, out, deq):
            with ct.cube():
                ct.store(out[0:16, 0:16], ct.dequant(ct.mma(ct.load(q[0:16, 0:16]), q[0:16, 0:16]), deq))
        args = (np.zeros((16, 16), np.float16), np.zeros((16, 16), np.float16), 1.0)
    elif body == "bf16":
        @ct.jit
        def bad(q, out, deq):
            with ct.cube():
                ct.store(out[0:16, 0:32],
                         ct.dequant(ct.mma(ct.load(q[0:16, 0:32]), q[0:32, 0:32]), deq, ct.bfloat16))
        args = (np.zeros((32, 32), np.int8), np.zeros((16, 32), np.float16), 1.0)
    else:
        @ct.jit
        def bad(q, sc, out):
            with ct.cube():
                c = ct.mma(ct.load(q[0:16, 0:32]), q[0:32, 0:32])
                ct.store(out[0:16, 0:32], ct.dequant(c, ct.load(sc[0:16, 0:32])))
        args = (np.zeros((32, 32), np.int8), np.zeros((16, 32), np.float32), np.zeros((16, 32), np.float16))
    with pytest.raises(ct.CompilationError, match=re.escape(message)):
        bad[1](*args)
