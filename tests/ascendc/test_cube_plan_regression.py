"""Regressions of the memory plan that the Ascend C backend found (both refused the A2/A3 MLA FA-quant kernel):

* an L1 matrix is stored NZ (rows padded to 16, columns to a 32-byte fractal), so its buffer is planned at that
  size: an 8 x 512 int8 query tile takes 8192 bytes, not 4096 (``plan_memory.tile_bytes``);
* an mma result with no buffer of its own (only handed off) stays in the mma's L0C pieces until its store, so
  the next mma's pieces must not take their place in between (two scores computed back to back, then both
  handed to the vector).

Each kernel is lowered, syntax-checked and run on the CPU twin against the simulator's pipelined-order
result. Skips when no g++ is on PATH."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import cvtile.dsl as ct
from cvtile.dsl import ascendc as A
from cvtile.dsl.passes.plan_memory import tile_bytes
from cvtile.dsl.types import L1, UB, TileType, float16 as F16, int8 as INT8

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None,
                               reason="g++ is not on PATH (the Ascend C checks need a C++17 g++)")


@ct.jit
def two_scores(q, k, qr, kr, out, M: ct.constexpr, S2: ct.constexpr, D: ct.constexpr, DR: ct.constexpr):
    """s = q·kᵀ (int8, int32 result) + qr·krᵀ (fp16): the MLA FA quant's latent and rope scores."""
    with ct.cube():
        q1 = ct.load(q[0:M, 0:D])
        qr1 = ct.load(qr[0:M, 0:DR])
        c = ct.mma(q1, k[0:S2, 0:D], trans_b=True)
        r = ct.mma(qr1, kr[0:S2, 0:DR], trans_b=True)
    with ct.vector():
        ct.store(out[0:M, 0:S2], ct.cast(c, ct.float32) + r)


def _launch(target, M):
    rng = np.random.default_rng(3)
    S2, D, DR = 256, 512, 64
    q = rng.integers(-20, 21, (M, D)).astype(np.int8)
    k = rng.integers(-20, 21, (S2, D)).astype(np.int8)
    qr = rng.uniform(-1, 1, (M, DR)).astype(np.float16)
    kr = rng.uniform(-1, 1, (S2, DR)).astype(np.float16)
    out = np.zeros((M, S2), np.float32)
    from cvtile.dsl.jit import record_launches

    with record_launches() as rec:
        two_scores.on(target)[1](q, k, qr, kr, out, M=M, S2=S2, D=D, DR=DR)
    want = q.astype(np.float64) @ k.T.astype(np.float64) + qr.astype(np.float64) @ kr.T.astype(np.float64)
    np.testing.assert_allclose(out, want, rtol=1e-3, atol=1e-2)
    return [A.Launch.of(r) for r in rec.launches]


def test_an_l1_matrix_is_planned_at_its_nz_size():
    assert tile_bytes(TileType(INT8, L1, (8, 512))) == 16 * 512
    assert tile_bytes(TileType(F16, L1, (17, 40))) == 32 * 48 * 2
    assert tile_bytes(TileType(F16, UB, (8, 40))) == 8 * 40 * 2      # UB tiles stay ND


@needs_gxx
@pytest.mark.parametrize("target, M", [("Ascend910B1", 8), ("Ascend910B1", 16), ("Ascend950", 16)])
def test_two_handed_off_scores_lower_and_run_on_the_twin(tmp_path, target, M):
    """M 8: the NZ size of the int8 L1 query (and the L0C lifetime); M 16 (no padding): the L0C lifetime."""
    launches = _launch(target, M)
    d = str(tmp_path / "proj")
    res = A.emit(d, launches, atol=1e-3, rtol=1e-3)
    A.check_project(d, res["kernels"])
    report = A.run_project(d, A.arch_of(launches[0].kernel.platform))
    lines = [ln for ln in report.splitlines() if ln.strip()]
    assert lines and all(ln.startswith("PASS") for ln in lines), report
