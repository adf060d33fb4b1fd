"""KV antiquant on Ascend950 with a HiFloat8 key/value cache: FIA V2 with uint8 key/value and
``key_dtype`` / ``value_dtype`` hifloat8 (torch_npu.hifloat8 = 290) against the golden, and the calls op_host or
the simulator refuse.

op_host takes a HiF8 cache in per-channel mode 0 only (scale (N2, 1, D) or (H), in the query's dtype), without
offsets, key and value both HiF8, fp16/bf16 query. The 950 dequantises it on its int8 path: the codes cast to the
query's dtype (exactly, ``golden.hifloat8``), times the scale rounded to it. The kernel and the golden read one
decode table. Compared under the upstream rule of the query dtype's class, as the FP8 tests are.
"""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np
import pytest

from cvtile.kernels import compare, fia_golden_lowp
from cvtile.kernels.errors import UnsupportedParameterError
from cvtile.kernels.fia.api import npu_fused_infer_attention_score as fia_v1
from cvtile.kernels.fia.api_v2 import npu_fused_infer_attention_score_v2 as fia_v2
from cvtile.kernels.fia.launch import float_cache_widened
from cvtile.kernels.golden.antiquant import antiquant_spec, cache_values
from cvtile.kernels.golden.fia import fia_golden
from cvtile.kernels.golden.hifloat8 import HIF8_TABLE, HIFLOAT8
from cvtile.kernels.golden.nz import to_nz
from cvtile.tiling.errors import ParamError

BF16 = ml_dtypes.bfloat16
T950 = "Ascend950"
HIF8 = dict(key_dtype="hifloat8", value_dtype="hifloat8")
#: the codes drawn for a cache: every finite HiF8 value of magnitude <= 64 (denormals and zero included)
_CODES = np.flatnonzero(np.isfinite(HIF8_TABLE) & (np.abs(HIF8_TABLE) <= 64)).astype(np.uint8)


def _hif8(rng, shape):
    return rng.choice(_CODES, shape)


def _call(rng, b=2, n=8, n2=2, s1=1, s2=300, d=128, dtype=np.float16):
    q = rng.uniform(-1, 1, (b, n, s1, d)).astype(dtype)
    k, v = _hif8(rng, (b, n2, s2, d)), _hif8(rng, (b, n2, s2, d))
    kw = dict(num_query_heads=n, num_key_value_heads=n2, input_layout="BNSD", softmax_scale=d ** -0.5,
              target=T950, **_channel(rng, n2, d, dtype), **HIF8)
    return q, k, v, kw


def _channel(rng, n2, d, dtype):
    return {name: rng.uniform(0.01, 0.03, (n2, 1, d)).astype(dtype)
            for name in ("dequant_scale_key", "dequant_scale_value")}


def test_hifloat8_cache_per_channel_gqa_decode(judge_fia_v2):
    """Mode 0 on a HiF8 cache (BNSD, fp16, GQA decode, lse): the codes widen exactly to fp16, times the scale."""
    rng = np.random.default_rng(40)
    q, k, v, kw = _call(rng)
    judge_fia_v2(q, k, v, return_softmax_lse=True, **kw)


def test_torch_npu_dtype_code_is_the_name():
    """key_dtype / value_dtype 290 (torch_npu.hifloat8) is the same call as "hifloat8": the same kernels
    launched with bitwise the same arguments (the widened cache included; recorded, not run)."""
    from cvtile.dsl.jit import record_launches

    rng = np.random.default_rng(41)
    q, k, v, kw = _call(rng, b=1, n=2, n2=1, s2=64, d=64)

    def launches(**given):
        with record_launches(run=False) as rec:
            fia_v2(q, k, v, **given)
        return rec.launches

    a, b = launches(**kw), launches(**dict(kw, key_dtype=290, value_dtype=290))
    assert a and [r.kernel.key for r in a] == [r.kernel.key for r in b]
    for ra, rb in zip(a, b):
        assert len(ra.args) == len(rb.args)
        for x, y in zip(ra.args, rb.args):
            x, y = np.asarray(x), np.asarray(y)
            assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


@pytest.mark.slow
def test_hifloat8_paged_bnbsh_cache_bf16_prefill(judge_fia_v2, paged_bsh):
    rng = np.random.default_rng(42)
    b, n, n2, d, bs, lens = 2, 4, 2, 128, 128, (300, 520)
    q, kc, vc, table = paged_bsh(rng, lambda shape: _hif8(rng, shape), b=b, n=n, n2=n2, d=d, bs=bs, lens=lens, s1=3,
                                 dtype=BF16)
    judge_fia_v2(q, kc, vc, num_query_heads=n, num_key_value_heads=n2, input_layout="BSH",
                 softmax_scale=d ** -0.5, target=T950, block_table=table, block_size=bs, actual_seq_kvlen=list(lens),
                 actual_seq_qlen=[3, 2], return_softmax_lse=True, **_channel(rng, n2, d, BF16), **HIF8)


@pytest.mark.slow
def test_hifloat8_bsnd_bf16_prefill_with_kv_lengths(judge_fia_v2):
    rng = np.random.default_rng(43)
    q, k, v, kw = _call(rng, n=4, n2=4, s1=5, s2=600, dtype=BF16)
    q, k, v = (x.transpose(0, 2, 1, 3).copy() for x in (q, k, v))
    judge_fia_v2(q, k, v, actual_seq_kvlen=[600, 257], return_softmax_lse=True, **dict(kw, input_layout="BSND"))


@pytest.mark.parametrize("dtype", [np.float16, BF16])
def test_kernel_widening_and_golden_read_the_one_table(dtype):
    """Every code, NaN and infinities included: the launch widens the cache through ``HIF8_TABLE`` (bitwise its
    values in the query's dtype) and the golden's dequantisation reads the same values."""
    codes = np.arange(256, dtype=np.uint8).reshape(1, 1, 4, 64)
    widened = float_cache_widened(codes, np.dtype(dtype), HIFLOAT8)
    assert widened.dtype == np.dtype(dtype)
    assert np.array_equal(widened.astype(np.float32).reshape(-1), HIF8_TABLE, equal_nan=True)
    assert float_cache_widened(codes, np.dtype(dtype)) is codes     # unmarked uint8: not a cache it widens
    assert np.array_equal(cache_values(codes, "key", HIFLOAT8).reshape(-1), HIF8_TABLE, equal_nan=True)
    one = np.ones((1, 1, 64), dtype)
    spec = antiquant_spec({"key_antiquant_scale": one, "value_antiquant_scale": one}, antiquant_mode=0,
                          key_antiquant_mode=0, value_antiquant_mode=0, batch=1, num_kv_heads=1, head_dim=64,
                          kv_len=4)
    got = dataclasses.replace(spec, cache=HIFLOAT8).dequantised(codes[0], "key", 0, 0, 1, 0, 4)
    assert np.array_equal(got.reshape(-1), HIF8_TABLE.astype(np.float64), equal_nan=True)


def test_golden_reads_uint8_as_hifloat8_only_when_marked():
    rng = np.random.default_rng(44)
    q, k, v, kw = _call(rng, b=1, n=2, n2=1, s2=32, d=32)
    v1 = dict(key_antiquant_scale=kw["dequant_scale_key"], value_antiquant_scale=kw["dequant_scale_value"],
              num_heads=2, input_layout="BNSD", target=T950)
    with pytest.raises(UnsupportedParameterError) as err:
        fia_golden(q, k, v, key_dtype="hifloat8", **v1)     # value_dtype missing
    assert err.value.param == "value_dtype"
    with pytest.raises(UnsupportedParameterError) as err:
        fia_golden(q, k, v, **v1)                           # unmarked uint8: not a cache
    assert err.value.param == "key"


# ---- refusals ------------------------------------------------------------------------------------------------

def _refused(rng, **change):
    """A small hif8 decode call with ``change`` applied (a None value drops the keyword)."""
    q, k, v, kw = _call(rng, b=1, n=2, n2=1, s2=64, d=64)
    kw = {name: x for name, x in {**kw, **change}.items() if x is not None}
    return fia_v2(q, k, v, **kw)


@pytest.mark.parametrize("change, param, checker", [
    # op_host: the value stays uint8 without value_dtype
    (dict(value_dtype=None), "value", "common"),
    # op_host: no offset with a hif8 cache
    (dict(dequant_offset_key=np.zeros((1, 1, 64), np.float16), dequant_offset_value=np.zeros((1, 1, 64),
                                                                                             np.float16)),
     "dequant_offset_key", "dequant"),
    # op_host: mode 1 takes int8/int4/fp8, per-tensor ([1] scales) int8 only
    (dict(dequant_scale_key=np.ones((1, 1, 64), np.float32), dequant_scale_value=np.ones((1, 1, 64), np.float32),
          key_quant_mode=1, value_quant_mode=1), "key", "dequant"),
    (dict(dequant_scale_key=np.ones(1, np.float16), dequant_scale_value=np.ones(1, np.float16)), "key", "dequant"),
    # op_host: mode 0 scales have the query's dtype
    (dict(dequant_scale_key=np.ones((1, 1, 64), np.float32), dequant_scale_value=np.ones((1, 1, 64), np.float32)),
     "dequant_scale_key", "dequant"),
    # op_host: a hif8 cache needs its scales
    (dict(dequant_scale_key=None, dequant_scale_value=None), "dequant_scale_key", "dequant"),
])
def test_operator_refusals_name_the_v2_keyword(change, param, checker):
    with pytest.raises(ParamError) as err:
        _refused(np.random.default_rng(45), **change)
    assert (err.value.param, err.value.checker) == (param, checker), str(err.value)
    assert "hifloat8" in str(err.value) or param.startswith("dequant_scale"), str(err.value)


def test_a2_refuses_a_hifloat8_cache():
    """A2/A3 have no HiF8 dtype: op_host's dtype check names the key."""
    with pytest.raises(ParamError) as err:
        _refused(np.random.default_rng(46), target="Ascend910B1")
    assert err.value.param == "key" and "hifloat8" in str(err.value)


@pytest.mark.parametrize("change, param", [
    (dict(key_dtype="float8_e4m3fn"), "key_dtype"),                          # only hifloat8 is taken
    (dict(value_dtype=1), "value_dtype"),
    (dict(query_dtype=290), "query_dtype"),                                   # HiF8 full quant: not simulated
    (dict(out_dtype=290), "out_dtype"),
    (dict(dequant_scale_key_dtype=290), "dequant_scale_key_dtype"),
])
def test_other_dtype_overrides_are_unsupported(change, param):
    with pytest.raises(UnsupportedParameterError) as err:
        _refused(np.random.default_rng(47), **change)
    assert err.value.param == param


def test_hifloat8_marks_only_uint8_arrays():
    rng = np.random.default_rng(48)
    q, k, v, kw = _call(rng, b=1, n=2, n2=1, s2=64, d=64)
    with pytest.raises(UnsupportedParameterError) as err:
        fia_v2(q, k.view(np.int8), v.view(np.int8), **kw)
    assert err.value.param == "key_dtype" and "uint8" in err.value.reason


def test_v1_has_no_dtype_argument_so_a_uint8_cache_is_an_operator_error():
    """V1 cannot mark a HiF8 cache: its uint8 key is op_host's dtype error, whatever the bytes hold."""
    rng = np.random.default_rng(49)
    q, k, v, kw = _call(rng, b=1, n=2, n2=1, s2=64, d=64)
    with pytest.raises(ParamError) as err:
        fia_v1(q, k, v, key_antiquant_scale=kw["dequant_scale_key"], value_antiquant_scale=kw["dequant_scale_value"],
               num_heads=2, input_layout="BNSD", target=T950)
    assert err.value.param == "key" and "uint8" in str(err.value)


@pytest.mark.slow
def test_hifloat8_nz_cache_is_bitwise_the_bnnbsd_cache_it_holds(judge_fia_v2, paged_bsh):
    """A HiF8 NZ cache (blocks, N2, D/16, block_size, 16) on the 950: read in place, the same bits as the BnNBsD
    cache it holds; judged against the golden."""
    rng = np.random.default_rng(50)
    n, n2, d, bs, lens = 4, 2, 128, 128, (200, 130)
    q, kc, vc, table = paged_bsh(rng, lambda shape: _hif8(rng, shape), b=2, n=n, n2=n2, d=d, bs=bs, lens=lens,
                                 dtype=BF16)
    kd, vd = (x.reshape(x.shape[0], bs, n2, d).transpose(0, 2, 1, 3).copy() for x in (kc, vc))   # BnNBsD
    q = q.reshape(2, 1, n, d).transpose(0, 2, 1, 3)      # BNSD, as a 4-D or 5-D paged cache wants
    kw = dict(num_query_heads=n, num_key_value_heads=n2, input_layout="BNSD", softmax_scale=d ** -0.5, target=T950,
              block_table=table, block_size=bs, actual_seq_kvlen=list(lens), return_softmax_lse=True,
              **_channel(rng, n2, d, BF16), **HIF8)
    a, la = fia_v2(q, to_nz(kd, 16), to_nz(vd, 16), **kw)
    b, lb = fia_v2(q, kd, vd, **kw)
    assert np.array_equal(a.view(np.uint16), b.view(np.uint16)) and np.array_equal(la, lb)
    judge_fia_v2(q, to_nz(kd, 16), to_nz(vd, 16), **kw)


@pytest.mark.slow
def test_nan_and_inf_codes_reach_the_output_as_the_golden_has_them():
    """A NaN code (0x80) in the key and a -inf code (0xEF) in the value: the kernel and the golden decode them
    through the one table, so the non-finite outputs sit in the same places (a NaN score poisons its row, the
    -inf value its channel) and the rest agrees under the fp16 rule."""
    rng = np.random.default_rng(51)
    q, k, v, kw = _call(rng, b=1, n=2, n2=1, s2=64, d=64)
    k[0, 0, 10, 3] = 0x80
    k2, v2 = k.copy(), v.copy()
    k2[0, 0, 10, 3] = 0x08
    v2[0, 0, 20, 7] = 0xEF
    golden_kw = dict(key_antiquant_scale=kw["dequant_scale_key"], value_antiquant_scale=kw["dequant_scale_value"],
                     num_heads=2, num_key_value_heads=1, input_layout="BNSD", scale=kw["softmax_scale"],
                     target=T950, **HIF8)
    for key, value in ((k, v), (k2, v2)):
        out, _ = fia_v2(q, key, value, **kw)
        gold, _ = fia_golden_lowp(q, key, value, **golden_kw)
        out64, gold64 = np.asarray(out, np.float64), np.asarray(gold, np.float64)
        assert np.array_equal(np.isnan(out64), np.isnan(gold64)) and np.array_equal(out64 == -np.inf,
                                                                                  gold64 == -np.inf)
        bad = ~np.isfinite(out64)
        assert bad.any()
        rep = compare(np.where(bad, 0, out).astype(q.dtype), np.where(bad, 0, gold), q.dtype)
        assert rep.passed, str(rep)
    assert np.isnan(np.asarray(fia_v2(q, k, v, **kw)[0], np.float64)).all()
