"""FP8 (float8_e4m3fn) GM tensors: the 950's FP8 KV cache is a tensor of the language, read as the chip reads it.

* A kernel loads an FP8 tensor (stored as its 8-bit codes, decoded exactly on read) and casts it to a wider
  float; every one of the 256 codes reaches float32, float16 and bfloat16 exactly (NaN stays NaN).
* FP8 tensors are read only and an FP8 tile is only cast: a store into one, a cast to FP8, or any other op on an
  FP8 tile is a compile error naming the rule.
* The cost model reads one byte per element (the FP8 cache used to be widened to 16 bits on the host, and timed
  so); the Ascend C backend refuses an FP8 tensor by name (its declaration header has no FP8 type).
* The 950 dequant kernel receives an FP8 cache as it is.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import cvtile.dsl as ct
from cvtile.dsl import ascendc as A
from cvtile.dsl.errors import CompilationError
from cvtile.dsl.jit import record_launches
from cvtile.sim.storage import from_storage, to_storage

CODES = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).reshape(8, 32)


@ct.jit
def widen(x, o32, o16, obf):
    with ct.vector():
        t = ct.load(x[0:8, 0:32])
        ct.store(o32[0:8, 0:32], ct.cast(t, ct.float32))
        ct.store(o16[0:8, 0:32], ct.cast(t, ct.float16))
        ct.store(obf[0:8, 0:32], ct.cast(t, ct.bfloat16))


def _outs():
    return np.zeros((8, 32), np.float32), np.zeros((8, 32), np.float16), np.zeros((8, 32), ml_dtypes.bfloat16)


@pytest.mark.parametrize("target", ["Ascend910B1", "Ascend950"])
def test_every_fp8_code_loads_and_casts_exactly(target):
    o32, o16, obf = _outs()
    widen.on(target)[1](CODES, o32, o16, obf)
    want = CODES.astype(np.float32)
    nan = np.isnan(want)
    assert nan.sum() == 2 and np.isnan(o32[nan]).all() and np.isnan(o16[nan]).all()
    np.testing.assert_array_equal(o32.view(np.uint32)[~nan], want.view(np.uint32)[~nan])   # -0 included
    np.testing.assert_array_equal(o16[~nan], want[~nan].astype(np.float16))
    np.testing.assert_array_equal(obf[~nan].astype(np.float32), want[~nan])


def test_fp8_storage_is_the_codes_a_view():
    s, name = to_storage(CODES)
    assert name == "float8_e4m3fn" and s.dtype == np.uint8 and np.shares_memory(s, CODES)
    assert from_storage(s, "float8_e4m3fn").dtype == CODES.dtype


def test_the_cost_model_reads_one_byte_per_fp8_element():
    o32, o16, obf = _outs()
    k8 = widen.on("Ascend950").cost(1, CODES, o32, o16, obf)
    k16 = widen_half.on("Ascend950").cost(1, CODES.astype(np.float16), o32, o16, obf)
    assert k8.gm_bytes == k16.gm_bytes - 8 * 32


@ct.jit
def widen_half(x, o32, o16, obf):
    with ct.vector():
        t = ct.load(x[0:8, 0:32])
        ct.store(o32[0:8, 0:32], ct.cast(t, ct.float32))
        ct.store(o16[0:8, 0:32], t)
        ct.store(obf[0:8, 0:32], ct.cast(t, ct.bfloat16))


@ct.jit
def store_fp8(x, out):
    with ct.vector():
        ct.store(out[0:8, 0:32], ct.load(x[0:8, 0:32]))


@ct.jit
def cast_to_fp8(x, out):
    with ct.vector():
        ct.store(out[0:8, 0:32], ct.cast(ct.cast(ct.load(x[0:8, 0:32]), ct.float8_e4m3fn), ct.float32))


@ct.jit
def add_fp8(x, out):
    with ct.vector():
        t = ct.load(x[0:8, 0:32])
        ct.store(out[0:8, 0:32], ct.cast(t + t, ct.float32))


def test_fp8_is_read_only_and_only_cast():
    with pytest.raises(CompilationError, match="store into a float8_e4m3fn GM tensor: FP8 tensors are read only"):
        store_fp8.compile(CODES, CODES.copy())
    with pytest.raises(CompilationError, match="cast to float8_e4m3fn"):
        cast_to_fp8.compile(np.zeros((8, 32), np.float32), np.zeros((8, 32), np.float32))
    with pytest.raises(CompilationError, match="of a float8_e4m3fn tile: an FP8 tile is only cast"):
        add_fp8.compile(CODES, np.zeros((8, 32), np.float32))


def test_the_ascend_c_backend_refuses_an_fp8_tensor_by_name():
    ck = widen.on("Ascend950").compile(CODES, *_outs())
    with pytest.raises(A.AscendCUnsupported, match="parameter 'x' is a float8_e4m3fn GM tensor"):
        A.lowered(ck)


def test_the_950_dequant_kernel_reads_an_fp8_cache_as_it_is():
    import cvtile

    rng = np.random.default_rng(0)
    q = rng.uniform(-1, 1, (1, 4, 1, 64)).astype(np.float16)
    k, v = (rng.uniform(-200, 200, (1, 1, 256, 64)).astype(ml_dtypes.float8_e4m3fn) for _ in range(2))
    scale = rng.uniform(0.001, 0.01, (1, 1, 64)).astype(np.float16)
    with record_launches(run=False) as rec:
        cvtile.npu_fused_infer_attention_score(q, k, v, num_heads=4, num_key_value_heads=1, input_layout="BNSD",
                                               key_antiquant_scale=scale, value_antiquant_scale=scale,
                                               target="Ascend950")
    launch = rec.launches[0]
    assert launch.kernel.name == "fia_dequant"
    assert [a.dtype for a in launch.args[1:3]] == [np.dtype(ml_dtypes.float8_e4m3fn)] * 2
