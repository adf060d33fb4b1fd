"""Regression: an ``if`` whose arms each yield a dequantised mma result (``ct.dequant(ct.mma(...))``: either key
block, dequantised by the fixpipe) and whose result only leaves the cube was planned as a resident L0C buffer per
arm, because the plan's rule for an ``if`` of streamed mmas looked for an mma result in each arm's yield and
found the dequant. A 16 x 2048 int32 block (128 KB, the whole of an A2 L0C) then failed the budget. The rule now
looks through the dequant (the fixpipe converts each piece as it writes it out): each arm's mma streams out of
L0C in its base tiles, and the results are the documented DEQF16 bit for bit in both orders. The Ascend C
backend refused it by name; it now lowers it, each arm's pieces dequantised in their own Fixpipes."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

import cvtile.dsl as ct
from cvtile.dsl.jit import record_launches
from cvtile.dsl.ir import walk
from cvtile.kernels.golden.fullquant import dequant_value
from cvtile.sim.cost import estimate_calls


@ct.jit
def dequantised_scores_from_either_key(q, k1, k2, out, deq, first, M: ct.constexpr, N: ct.constexpr,
                                       D: ct.constexpr):
    with ct.cube():
        qt = ct.load(q[0:M, 0:D])
        if first > 0:
            s = ct.dequant(ct.mma(qt, k1[0:N, 0:D], trans_b=True), deq)
        else:
            s = ct.dequant(ct.mma(qt, k2[0:N, 0:D], trans_b=True), deq)
    with ct.vector():
        ct.store(out[0:M, 0:N], s)


def _inputs(M, N, D):
    rng = np.random.default_rng(3)
    q = rng.integers(-128, 128, (M, D)).astype(np.int8)
    k1, k2 = (rng.integers(-128, 128, (N, D)).astype(np.int8) for _ in range(2))
    return q, k1, k2


def _reference(q, k, deq):
    c = (q.astype(np.int64) @ k.astype(np.int64).T).astype(np.int32)
    return (c.astype(np.float32) * np.float32(dequant_value(np.array([deq], np.float32)))).astype(np.float16)


@pytest.mark.parametrize("order", ["program", "pipelined"])
@pytest.mark.parametrize("first", [1, 0])
def test_an_if_of_dequantised_mmas_streams_out_of_l0c_regression(order, first):
    M, N, D = 16, 2048, 64      # 16 x 2048 int32: more than the mma's two L0C pieces hold
    q, k1, k2 = _inputs(M, N, D)
    deq = float(np.float32(1.2345e-3))
    out = np.zeros((M, N), np.float16)
    dequantised_scores_from_either_key[1](q, k1, k2, out, deq, first, M=M, N=N, D=D, order=order)  # BudgetError before
    want = _reference(q, k1 if first > 0 else k2, deq)
    np.testing.assert_array_equal(out.view(np.uint16), want.view(np.uint16))


def test_each_arms_mma_is_computed_at_the_store_and_takes_no_l0c_of_its_own():
    M, N, D = 16, 2048, 64
    q, k1, k2 = _inputs(M, N, D)
    out = np.zeros((M, N), np.float16)
    with record_launches(run=False) as rec:
        dequantised_scores_from_either_key.on("Ascend910B1")[1](q, k1, k2, out, 1e-3, 1, M=M, N=N, D=D)
    (launch,) = rec.launches
    plan = launch.kernel.compilation.final.memory
    aic = launch.kernel.compilation.final.programs()["aic"]
    mmas = [op for op in walk(aic) if op.kind == "mma"]
    deqs = [op for op in walk(aic) if op.kind == "dequant"]
    ifs = [op for op in walk(aic) if op.kind == "if" and op.results]
    assert len(mmas) == 2 and len(deqs) == 2 and ifs
    for op in mmas + deqs:
        assert op.results[0].id not in plan.buffer_of
    assert all(op.results[0].id in plan.streamed_out for op in mmas)
    assert plan.spaces["L0C"].fits
    # the cost model times it: the fixpipe dequantises, the vector only moves the fp16 block out
    cost = estimate_calls(rec.launches, "Ascend910B1").launches[0]
    assert cost.estimated_us > 0 and cost.busy["aiv"].get("V", 0.0) == 0.0


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not on PATH (the Ascend C checks need a C++17 g++)")
@pytest.mark.parametrize("N, first", [(2048, 1), (2048, 0), (128, 0)])
def test_the_ascendc_backend_dequantises_each_arms_pieces_in_its_fixpipe(tmp_path, N, first):
    """The Ascend C backend lowers the ``if`` at its result's store (``lower_cube.defer_if``): each arm's mma is
    Fixpiped piece by piece with DEQF16 and the arm's scale, whether the result streams out (2048 columns) or
    would fit the L0C pieces (128: a handle cannot carry an arm's dequant, so it is lowered at the store too).
    It refused this before with "an arm yields a value no streamed mma of its own made". The CPU twin gives the
    simulator's bits."""
    from cvtile.dsl import ascendc as A

    M, D = 16, 64
    q, k1, k2 = _inputs(M, N, D)
    deq = float(np.float32(7.3e-4))     # mantissa bits below the fixpipe's 10
    out = np.zeros((M, N), np.float16)
    with record_launches() as rec:
        dequantised_scores_from_either_key.on("Ascend910B1")[1](q, k1, k2, out, deq, first, M=M, N=N, D=D)
    np.testing.assert_array_equal(out.view(np.uint16), _reference(q, k1 if first > 0 else k2, deq).view(np.uint16))
    d = str(tmp_path / "proj")
    res = A.emit(d, [A.Launch.of(r) for r in rec.launches], atol=0.0, rtol=0.0)
    A.check_project(d, res["kernels"])
    report = A.run_project(d, "arch22")
    assert report.strip() and all(ln.startswith("PASS") for ln in report.splitlines() if ln.strip()), report
    src = "\n".join(p.read_text() for p in sorted((tmp_path / "proj" / "op_kernel").glob("*_kernel.cpp")))
    assert "so it runs at its result's store" in src
    assert len(re.findall(r"\.quantPre = QuantMode_t::DEQF16;", src)) >= 2       # one Fixpipe in each arm
    assert "Cast(" not in src
