"""The Ascend C backend lowers what the FIA system-prefix and KV-antiquant kernels needed and it refused:

* an ``if`` whose arms each compute an mma whose result only leaves the cube (the prefix's KV step: the
  prefix's keys or the batch's own). The memory plan gives the ``if`` result no buffer, each arm's result
  streams out of L0C. A result larger than the mma's two L0C pieces is computed piece by piece at its store,
  so the whole ``if`` is lowered there (``lower_cube.defer_if``). A smaller one stays in the arm's own pieces,
  and the ``if`` result is a ``LocalTensor`` handle each arm points at them (``if_result_handle``);
* a streamed-out mma whose store follows a bounds check (the check now runs before the mma);
* fp32 -> int8 (the MSD digits) and int8 -> fp32 casts, which no one ``Cast`` does on either arch: exact steps
  through half (``lower._CAST_VIA``).

Each kernel is lowered, syntax-checked against the declaration header and run on the CPU twin against the
simulator's result: the casts bitwise, the mmas within 1e-5 (Mmad sums K in its order, the simulator's BLAS in
its own). Skips when no g++ is on PATH.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import numpy as np
import pytest

import cvtile.dsl as ct
from cvtile.dsl import ascendc as A
from cvtile.dsl.jit import record_launches

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None,
                               reason="g++ is not on PATH (the Ascend C checks need a C++17 g++)")


def _pick_keys():
    """The simulator's regression kernel of the same shape (``tests/dsl/test_if_mma_streams_regression.py``):
    s = q·k1ᵀ when first > 0 else q·k2ᵀ, handed to the vector side and stored there times 0.5."""
    spec = importlib.util.spec_from_file_location(
        "if_mma_streams", Path(__file__).resolve().parents[1] / "dsl" / "test_if_mma_streams_regression.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.scores_from_either_key


@ct.jit
def stored_after_check(q, k, out, row, M: ct.constexpr, S2: ct.constexpr, D: ct.constexpr):
    """A cube store into plane ``row`` (a runtime index): its bounds check stands between the mma and the store
    (the FIA antiquant kernel's store of the core's workspace rows)."""
    with ct.cube():
        s = ct.mma(ct.load(q[0:M, 0:D]), k[0:S2, 0:D], trans_b=True)
        ct.store(out[row, 0:M, 0:S2], s)


@ct.jit
def digits(x, d8, back, M: ct.constexpr, N: ct.constexpr, MODE: ct.constexpr):
    """d8 = int8(x) with rounding MODE (saturating), back = float32(d8)."""
    with ct.vector():
        d = ct.cast(ct.load(x[0:M, 0:N]), ct.int8, rounding=MODE)
        ct.store(d8[0:M, 0:N], d)
        ct.store(back[0:M, 0:N], ct.cast(d, ct.float32))


def _launches(kernel, *args, target="Ascend910B1", **consts):
    with record_launches() as rec:
        kernel.on(target)[1](*args, **consts)
    return [A.Launch.of(r) for r in rec.launches]


@needs_gxx
@pytest.mark.parametrize("s2, plen, mode, target", [
    (2048, 1, "at the store", "Ascend910B1"),      # 16 x 2048 fp32: more than the two L0C pieces hold
    (128, 0, "a handle", "Ascend910B1"),          # 16 x 128: it stays in the arm's pieces
    (2048, 0, "at the store", "Ascend950"),
    pytest.param(128, 1, "a handle", "Ascend950", marks=pytest.mark.slow),
])
def test_an_if_of_two_streamed_mmas_runs_on_the_twin(twin, s2, plen, mode, target):
    rng = np.random.default_rng(1)
    M, D = 16, 128
    q = rng.uniform(-1, 1, (M, D)).astype(np.float16)
    k = rng.uniform(-1, 1, (s2, D)).astype(np.float16)
    kp = rng.uniform(-1, 1, (s2, D)).astype(np.float16)
    out = np.zeros((M, s2), np.float32)
    launches = _launches(_pick_keys(), q, kp, k, out, plen, target=target, M=M, N=s2, D=D)
    want = q.astype(np.float64) @ (kp if plen else k).T.astype(np.float64) * 0.5
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    src = twin(launches, 1e-5)
    if mode == "at the store":
        assert "so it runs at its result's store" in src
    else:
        assert "the arm's mma result in its L0C pieces" in src


@needs_gxx
def test_a_streamed_mma_stored_after_a_bounds_check_runs_on_the_twin(twin):
    rng = np.random.default_rng(2)
    M, S2, D = 16, 2048, 64
    q = rng.uniform(-1, 1, (M, D)).astype(np.float16)
    k = rng.uniform(-1, 1, (S2, D)).astype(np.float16)
    out = np.zeros((3, M, S2), np.float32)
    launches = _launches(stored_after_check, q, k, out, 1, M=M, S2=S2, D=D)
    ir = launches[0].kernel.ir_after("insert_sync")
    assert "check{" in ir
    np.testing.assert_allclose(out[1], q.astype(np.float64) @ k.T.astype(np.float64), rtol=1e-5, atol=1e-5)
    src = twin(launches, 1e-5)
    assert "streamed out of L0C piece by piece at its store" in src


@needs_gxx
@pytest.mark.parametrize("mode, target", [
    ("round", "Ascend910B1"), ("rint", "Ascend910B1"), ("round", "Ascend950"),
    pytest.param("trunc", "Ascend910B1", marks=pytest.mark.slow),
])
def test_int8_casts_go_through_half_exactly(twin, mode, target):
    rng = np.random.default_rng(3)
    M, N = 8, 640        # 5120 elements: two whole chunks of 2048 and a partial one
    x = rng.uniform(-130, 130, (M, N)).astype(np.float32)
    x[0, :8] = [0.5, -0.5, 1.5, -2.5, 127.5, -128.5, 1e6, -1e6]      # ties, the int8 bounds, saturation
    x[1, :4] = [2047.5, 2049.0, -4096.25, 126.49999]
    d8, back = np.zeros((M, N), np.int8), np.zeros((M, N), np.float32)
    launches = _launches(digits, x, d8, back, target=target, M=M, N=N, MODE=mode)
    rounded = {"round": np.where(x >= 0, np.floor(x + 0.5), np.ceil(x - 0.5)), "rint": np.rint(x),
               "trunc": np.trunc(x)}[mode]
    np.testing.assert_array_equal(d8, np.clip(rounded, -128, 127).astype(np.int8))
    np.testing.assert_array_equal(back, d8.astype(np.float32))
    src = twin(launches, 0.0)
    assert "float32 -> int8: no one Cast" in src and "int8 -> float32: no one Cast" in src
