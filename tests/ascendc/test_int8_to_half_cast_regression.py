"""Regression: an int8 -> half ``Cast`` was lowered with ``RoundMode::CAST_RINT``, which the vector unit does not
take for that exact conversion (only ``CAST_NONE``).

Found by building the Ascend 950 KV-dequant kernel (``cvtile emit fia --kv-dtype int8 --target Ascend950
--run``): the arch35 twin stopped at its first dequantisation with "Cast: int8_t -> half does not support
RoundMode::CAST_RINT on arch35". An exact conversion (int8 / uint8 to a float, a float to a wider float) now
takes ``CAST_NONE``. The second test runs that kernel's shape of work on the twin: a dequantised block handed
from the vector cores to the cube through the GM workspace (``ct.through_gm``) in a pipelined loop.
"""

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
def _widen(x, out, M: ct.constexpr, N: ct.constexpr):
    with ct.vector():
        ct.store(out[0:M, 0:N], ct.cast(ct.load(x[0:M, 0:N]), ct.float16) * 0.5)


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


@pytest.mark.parametrize("target", ["Ascend910B1", "Ascend950"])
def test_an_exact_int8_to_half_cast_takes_cast_none(target):
    x = np.arange(-128, 128, dtype=np.int8).reshape(8, 32)
    out = np.zeros((8, 32), np.float16)
    ck = _widen.on(target).compile(x, out, M=8, N=32)
    src = A.lowered(ck).source
    assert "RoundMode::CAST_NONE" in src and "CAST_RINT" not in src


@needs_gxx
@pytest.mark.parametrize("target", ["Ascend910B1", "Ascend950"])
def test_int8_to_half_runs_on_the_twin(twin, target):
    x = np.arange(-128, 128, dtype=np.int8).reshape(8, 32)
    out = np.zeros((8, 32), np.float16)
    with record_launches() as rec:
        _widen.on(target)[1](x, out, M=8, N=32)
    np.testing.assert_array_equal(out, (x.astype(np.float32) * 0.5).astype(np.float16))
    twin([A.Launch.of(r) for r in rec.launches])


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
