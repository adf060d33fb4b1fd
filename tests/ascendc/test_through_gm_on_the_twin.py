"""``ct.through_gm`` hand-offs on the Ascend 950 CPU twin: the GM route the 950 dequant kernel takes for its
dequantised blocks (vector -> cube, in a pipelined loop), and the other way (the cube's scores to the vector
cores through the GM workspace), each built against the declaration header and run against the simulator."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import cvtile.dsl as ct
from cvtile.dsl import ascendc as A
from cvtile.dsl.jit import record_launches

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None,
                               reason="g++ is not on PATH (the Ascend C checks need a C++17 g++)")


@ct.jit
def _dequant_then_mma(q, k, scale, out, M: ct.constexpr, S2: ct.constexpr, D: ct.constexpr):
    """Per block of S2 keys: the vector dequantises the int8 block (k · scale, in half) and hands it to the cube
    through the GM workspace, the cube computes q · blockᵀ and hands it back, the vector stores it."""
    with ct.cube():
        qt = ct.load(q[0:M, 0:D])
    for j in range(0, k.shape[0] // S2):
        with ct.vector():
            kd = ct.through_gm(ct.cast(ct.load(k[ct.ds(j * S2, S2), 0:D]), ct.float16)
                               * ct.load(scale[0:1, 0:D]))
        with ct.cube():
            s = ct.mma(qt, kd, trans_b=True)
        with ct.vector():
            ct.store(out[0:M, ct.ds(j * S2, S2)], s * 2.0)


@needs_gxx
def test_a_dequantised_block_through_gm_runs_pipelined_on_the_950_twin(twin):
    rng = np.random.default_rng(5)
    M, S2, D, blocks = 16, 128, 64, 4
    q = rng.uniform(-1, 1, (M, D)).astype(np.float16)
    k = rng.integers(-127, 128, (blocks * S2, D)).astype(np.int8)
    scale = rng.uniform(0.001, 0.01, (1, D)).astype(np.float16)
    out = np.zeros((M, blocks * S2), np.float32)
    with record_launches() as rec:
        _dequant_then_mma.on("Ascend950")[1](q, k, scale, out, M=M, S2=S2, D=D)
    launches = [A.Launch.of(r) for r in rec.launches]
    ck = launches[0].kernel
    assert [ch.route for ch in ck.compilation.final.channels if ch.kind == "data"] == ["gm", "onchip"]
    assert "pipelined(" in ck.ir_after("pipeline")
    kd = (k.astype(np.float16) * scale).astype(np.float64)
    np.testing.assert_allclose(out, q.astype(np.float64) @ kd.T * 2.0, rtol=1e-5, atol=1e-5)
    twin(launches, 1e-5)


@ct.jit
def _scores_through_gm(q, k, out, M: ct.constexpr, S2: ct.constexpr, D: ct.constexpr):
    """The other way: the cube's scores handed to the vector cores through the GM workspace (Fixpipe L0C -> GM,
    MTE2 GM -> UB) on the 950 too."""
    with ct.cube():
        s = ct.through_gm(ct.mma(ct.load(q[0:M, 0:D]), k[0:S2, 0:D], trans_b=True))
    with ct.vector():
        ct.store(out[0:M, 0:S2], s * 0.5)


@needs_gxx
def test_scores_through_gm_run_on_the_950_twin(twin):
    rng = np.random.default_rng(6)
    M, S2, D = 16, 256, 64
    q, k = (rng.uniform(-1, 1, shape).astype(np.float16) for shape in ((M, D), (S2, D)))
    out = np.zeros((M, S2), np.float32)
    with record_launches() as rec:
        _scores_through_gm.on("Ascend950")[1](q, k, out, M=M, S2=S2, D=D)
    launches = [A.Launch.of(r) for r in rec.launches]
    final = launches[0].kernel.compilation.final
    assert [ch.route for ch in final.channels if ch.kind == "data"] == ["gm"] and final.workspace_bytes > 0
    np.testing.assert_allclose(out, q.astype(np.float64) @ k.T.astype(np.float64) * 0.5, rtol=1e-5, atol=1e-5)
    twin(launches, 1e-5)
