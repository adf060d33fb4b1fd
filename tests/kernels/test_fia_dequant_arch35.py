"""KV antiquant on Ascend950 (int8, int4, FP8 E4M3 or MXFP4 key/value cache, fp16/bf16 query): the dequant kernel against the golden.

The kernel (``kernels/fia/kernel_dequant.py``) dequantises each K and V block in the vector core, each step
rounded to the query's dtype as the 950 template's vector does, and runs the non-quant flow on the result; the
golden with ``target`` Ascend950 dequantises with the same roundings (``AntiquantSpec.rounding``) and rounds P
to the query's dtype. Compared under the upstream rule of the query dtype's class. With a shared prefix (dense
caches only: op_host refuses it with a paged one) the prefix dequantises with the same parameters and the own
KV's per-token parameters start S' - S of key into the table. A paged NZ cache is (blocks, N, D/16, block_size, 16)
on the 950 whatever its dtype (op_host's rule; A2/A3 read 32 bytes); with an MXFP4 one the 950 reads the group
scales' bytes as (B, N2, D/32, S2), S2 the block table's columns times the block size. Without a prefix the 950
spaces mode 3 and mode 6 parameters' (b, n2) rows by S2 (the key's S, or the paged S2), not by their S'. An E8M0
byte of 0 loads as 2**-127 and one of 255 as a NaN. The default tier runs a call of each cache kind and of the
prefix; the other layouts, modes and the pipelined order are in the slow tier.
"""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np
import pytest

from cvtile.kernels.errors import UnsupportedParameterError
from cvtile.tiling.errors import ParamError
from cvtile.kernels import compare, fia_golden_lowp
from cvtile.kernels.fia.api import npu_fused_infer_attention_score as fia, plan_call
from cvtile.kernels.golden.antiquant import antiquant_spec, chip_seq_stride
from cvtile.kernels.golden.fia import fia_golden
from cvtile.kernels.golden.int4 import pack_int4
from cvtile.kernels.golden.nz import group_scale_stride, to_nz

BF16 = ml_dtypes.bfloat16
T950 = "Ascend950"


def _call(rng, b=2, n=8, n2=2, s1=1, s2=300, d=128, dtype=np.float16, layout="BNSD"):
    q = rng.uniform(-1, 1, (b, n, s1, d)).astype(dtype)
    k = rng.integers(-128, 128, (b, n2, s2, d)).astype(np.int8)
    v = rng.integers(-128, 128, (b, n2, s2, d)).astype(np.int8)
    if layout == "BSH":
        q, k, v = (x.transpose(0, 2, 1, 3).reshape(x.shape[0], x.shape[2], -1) for x in (q, k, v))
    return q, k, v, dict(num_heads=n, num_key_value_heads=n2, input_layout=layout, scale=d ** -0.5, target=T950)


def _channel(rng, n2, d, dtype, offset=True):
    shape = (n2, 1, d)
    kw = dict(key_antiquant_scale=rng.uniform(0.004, 0.012, shape).astype(dtype),
              value_antiquant_scale=rng.uniform(0.004, 0.012, shape).astype(dtype))
    if offset:
        kw.update(key_antiquant_offset=rng.uniform(-3, 3, shape).astype(dtype),
                  value_antiquant_offset=rng.uniform(-3, 3, shape).astype(dtype))
    return kw


def test_per_channel_with_offset_and_lse_gqa_decode(judge_fia):
    rng = np.random.default_rng(1)
    q, k, v, kw = _call(rng)
    judge_fia(q, k, v, softmax_lse_flag=True, **_channel(rng, 2, 128, np.float16), **kw)


@pytest.mark.slow
def test_per_token_bf16_bsh_with_kv_lengths(judge_fia):
    """Mode 1: fp32 (B, S') parameters per KV position, rounded to bf16 before the vector's add and multiply."""
    rng = np.random.default_rng(2)
    q, k, v, kw = _call(rng, dtype=BF16, layout="BSH", s2=700)
    tok = lambda lo, hi: rng.uniform(lo, hi, (2, 700)).astype(np.float32)   # noqa: E731
    judge_fia(q, k, v, key_antiquant_scale=tok(0.004, 0.012), value_antiquant_scale=tok(0.004, 0.012),
              key_antiquant_offset=tok(-3, 3), value_antiquant_offset=tok(-3, 3), key_antiquant_mode=1,
              value_antiquant_mode=1, actual_seq_lengths_kv=[700, 333], **kw)


@pytest.mark.slow
def test_bf16_prefill_per_channel_without_offset(judge_fia):
    rng = np.random.default_rng(3)
    q, k, v, kw = _call(rng, s1=5, n=4, n2=4, s2=600, dtype=BF16)
    judge_fia(q, k, v, softmax_lse_flag=True, **_channel(rng, 4, 128, BF16, offset=False), **kw)


@pytest.mark.slow
def test_paged_bnbsh_cache_per_channel(judge_fia, paged_bsh):
    rng = np.random.default_rng(4)
    b, n, n2, d, bs, lens = 2, 8, 2, 128, 128, (300, 700)
    q, kc, vc, table = paged_bsh(rng, lambda shape: rng.integers(-128, 128, shape).astype(np.int8), b=b, n=n, n2=n2,
                                 d=d, bs=bs, lens=lens)
    judge_fia(q, kc, vc, num_heads=n, num_key_value_heads=n2, input_layout="BSH", scale=d ** -0.5, target=T950,
              block_table=table, block_size=bs, actual_seq_lengths_kv=list(lens), softmax_lse_flag=True,
              **_channel(rng, n2, d, np.float16))


@pytest.mark.slow
def test_pipelined_order_is_bitwise_the_program_order():
    rng = np.random.default_rng(5)
    q, k, v, kw = _call(rng, s2=1100)
    aq = _channel(rng, 2, 128, np.float16)
    a, la = fia(q, k, v, softmax_lse_flag=True, **aq, **kw)
    b, lb = fia(q, k, v, softmax_lse_flag=True, order="pipelined", **aq, **kw)
    assert np.array_equal(a.view(np.uint16), b.view(np.uint16)) and np.array_equal(la, lb)


def test_golden_dequantises_in_the_query_dtype_on_the_950():
    """(x + offset) · scale with the parameters and each step rounded to fp16: at x = 127 the fp16 grid is 1/16
    apart, so the offset 0.3 lands on 127.3125; A2/A3's MSD kernel (exact) keeps 127.3."""
    arrays = {"key_antiquant_scale": np.full((1, 1, 4), 0.01, np.float16),
              "value_antiquant_scale": np.full((1, 1, 4), 0.01, np.float16),
              "key_antiquant_offset": np.full((1, 1, 4), 0.3, np.float16),
              "value_antiquant_offset": np.full((1, 1, 4), 0.3, np.float16)}
    spec = antiquant_spec(arrays, antiquant_mode=0, key_antiquant_mode=0, value_antiquant_mode=0, batch=1,
                          num_kv_heads=1, head_dim=4, kv_len=1)
    x = np.full((1, 1, 4), 127, np.int8)
    exact = spec.dequantised(x, "key", 0, 0, 1, 0, 1)
    h = np.float16
    chip = float(h(h(h(127) + h(0.3)) * h(0.01)))
    rounded = dataclasses.replace(spec, rounding="float16").dequantised(x, "key", 0, 0, 1, 0, 1)
    assert np.all(rounded == chip) and not np.all(exact == chip)
    assert abs(exact[0, 0, 0] - (127 + float(h(0.3))) * float(h(0.01))) < 1e-15


def test_golden_rounds_only_on_the_950():
    rng = np.random.default_rng(6)
    q, k, v, kw = _call(rng, b=1, n=2, n2=1, s2=64, d=32)
    aq = _channel(rng, 1, 32, np.float16)
    on_950, _ = fia_golden(q, k, v, **aq, **kw)
    on_a2, _ = fia_golden(q, k, v, **aq, **dict(kw, target="Ascend910B1"))
    assert not np.array_equal(on_950, on_a2) and np.allclose(on_950, on_a2, atol=5e-3)


@pytest.mark.slow   # its own specialisation (~30 s cold); int8 and FP8 caches run the same dequant in the default tier
def test_int4_cache_per_channel_with_offset(judge_fia):
    """An int4 cache packed 8 per int32 (the W4 dequant): the int4 values cast exactly to the query's dtype, then
    the int8 cache's add and multiply, each rounded."""
    rng = np.random.default_rng(8)
    q, k, v, kw = _call(rng, s2=700)
    k, v = (pack_int4(rng.integers(-8, 8, x.shape).astype(np.int8)) for x in (k, v))
    aq = {name: x * 16 if "scale" in name else x for name, x in _channel(rng, 2, 128, np.float16).items()}
    judge_fia(q, k, v, softmax_lse_flag=True, **aq, **kw)


def _paged(rng, values, b=2, n=4, n2=2, d=128, bs=128, lens=(200, 130), dtype=np.float16, nz=False):
    """A BNSD decode on a paged BnNBsD cache through a permuted block table, or (``nz``) on the NZ cache as the
    950 takes it: (blocks, N2, D/16, block_size, 16) whatever the cache's dtype; ``values(shape)`` draws the
    BnNBsD cache. Returns (q, key, value, keywords, the BnNBsD caches)."""
    per = -(-max(lens) // bs)
    q = rng.uniform(-1, 1, (b, n, 1, d)).astype(dtype)
    nd = [values((b * per, n2, bs, d)) for _ in range(2)]
    table = rng.permutation(b * per).reshape(b, per).astype(np.int32)
    kw = dict(num_heads=n, num_key_value_heads=n2, input_layout="BNSD", scale=d ** -0.5, target=T950,
              block_table=table, block_size=bs, actual_seq_lengths_kv=list(lens), softmax_lse_flag=True)
    k, v = (to_nz(x, 16) for x in nd) if nz else nd
    return q, k, v, kw, nd


@pytest.mark.slow
def test_int4_paged_bnnbsd_cache_per_token_bf16(judge_fia):
    rng = np.random.default_rng(9)
    q, kc, vc, kw, _ = _paged(rng, lambda shape: pack_int4(rng.integers(-8, 8, shape).astype(np.int8)),
                              lens=(260, 500), dtype=BF16)
    tok = lambda lo, hi: rng.uniform(lo, hi, (2, 512)).astype(np.float32)   # noqa: E731
    judge_fia(q, kc, vc, key_antiquant_scale=tok(0.06, 0.2), value_antiquant_scale=tok(0.06, 0.2),
              key_antiquant_offset=tok(-2, 2), value_antiquant_offset=tok(-2, 2), key_antiquant_mode=1,
              value_antiquant_mode=1, **kw)


def _fp8(rng, shape):
    return rng.uniform(-240, 240, shape).astype(ml_dtypes.float8_e4m3fn)


def test_fp8_e4m3fn_cache_per_channel(judge_fia):
    """An FP8 cache: the values widen exactly to the query's dtype, then times the scale (rounded); FP8 takes no
    offset (op_host refuses one)."""
    rng = np.random.default_rng(10)
    q, k, v, kw = _call(rng, s2=600)
    k, v = _fp8(rng, k.shape), _fp8(rng, v.shape)
    aq = _channel(rng, 2, 128, np.float16, offset=False)
    judge_fia(q, k, v, softmax_lse_flag=True, **aq, **kw)


@pytest.mark.slow
def test_fp8_e4m3fn_paged_bnbsh_cache_bf16_prefill(judge_fia, paged_bsh):
    rng = np.random.default_rng(11)
    b, n, n2, d, bs, lens = 2, 4, 2, 128, 128, (300, 520)
    q, kc, vc, table = paged_bsh(rng, lambda shape: _fp8(rng, shape), b=b, n=n, n2=n2, d=d, bs=bs, lens=lens, s1=3,
                                 dtype=BF16)
    judge_fia(q, kc, vc, num_heads=n, num_key_value_heads=n2, input_layout="BSH", scale=d ** -0.5, target=T950,
              block_table=table, block_size=bs, actual_seq_lengths_kv=list(lens), actual_seq_lengths=[3, 2],
              softmax_lse_flag=True, **_channel(rng, n2, d, BF16, offset=False))


@pytest.mark.slow
def test_fp8_cache_per_token_with_kv_lengths(judge_fia):
    """Mode 1 on an FP8 cache: the fp32 scale of each KV position rounded to the query's dtype, times the
    widened FP8 values (the 950's FP8 per-token vector functions); no offset."""
    rng = np.random.default_rng(12)
    q, k, v, kw = _call(rng, n=4, s2=300)
    k, v = _fp8(rng, k.shape), _fp8(rng, v.shape)
    tok = lambda: rng.uniform(0.002, 0.01, (2, 300)).astype(np.float32)   # noqa: E731
    judge_fia(q, k, v, key_antiquant_scale=tok(), value_antiquant_scale=tok(), key_antiquant_mode=1,
              value_antiquant_mode=1, actual_seq_lengths_kv=[300, 170], softmax_lse_flag=True, **kw)


@pytest.mark.slow
def test_fp8_paged_cache_per_token_mode_4_bf16(judge_fia):
    """Mode 4: the per-token scales (block_num, block_size) live in the cache's blocks (a permuted table)."""
    rng = np.random.default_rng(26)
    q, kc, vc, kw, _ = _paged(rng, lambda shape: _fp8(rng, shape), lens=(300, 170), dtype=BF16)
    par = lambda: rng.uniform(0.002, 0.01, (kc.shape[0], 128)).astype(np.float32)   # noqa: E731
    judge_fia(q, kc, vc, key_antiquant_scale=par(), value_antiquant_scale=par(), key_antiquant_mode=4,
              value_antiquant_mode=4, **kw)


def test_golden_fp8_per_token_rounds_the_fp32_scale_to_the_query_dtype():
    """448 (an E4M3 value) times the fp32 scale 0.0123: the 950 rounds the scale to fp16, then the product."""
    arrays = {"key_antiquant_scale": np.full((1, 2), 0.0123, np.float32),
              "value_antiquant_scale": np.full((1, 2), 0.0123, np.float32)}
    spec = antiquant_spec(arrays, antiquant_mode=0, key_antiquant_mode=1, value_antiquant_mode=1, batch=1,
                          num_kv_heads=1, head_dim=4, kv_len=2)
    x = np.full((1, 2, 4), 448, np.float32).astype(ml_dtypes.float8_e4m3fn)
    h = np.float16
    chip = float(h(h(448) * h(np.float32(0.0123))))
    got = dataclasses.replace(spec, rounding="float16").dequantised(x, "key", 0, 0, 1, 0, 2)
    assert np.all(got == chip) and chip != 448 * float(np.float32(0.0123))


@pytest.mark.parametrize("mode", [3, 5])
def test_fp8_per_token_head_modes_are_refused_by_the_operator_checks(mode):
    """op_host takes an FP8 cache in modes 0, 1 and 4 only: modes 3/5 are a ParamError naming the key."""
    rng = np.random.default_rng(27)
    q, k, v, kw = _call(rng, s2=64)
    k, v = _fp8(rng, k.shape), _fp8(rng, v.shape)
    par = rng.uniform(0.002, 0.01, (2, 2, 64)).astype(np.float32)
    with pytest.raises(ParamError) as err:
        fia(q, k, v, key_antiquant_scale=par, value_antiquant_scale=par.copy(), key_antiquant_mode=mode,
            value_antiquant_mode=mode, **kw)
    assert err.value.param == "key" and f"mode {mode}" in str(err.value), str(err.value)


def test_fp8_cache_is_refused_on_a2_by_the_operator_checks():
    """A2/A3 have no FP8 dtype: op_host's own dtype check refuses the key, before any kernel."""
    rng = np.random.default_rng(13)
    q, k, v, kw = _call(rng, s2=64)
    k, v = _fp8(rng, k.shape), _fp8(rng, v.shape)
    with pytest.raises((ParamError, UnsupportedParameterError)) as err:
        fia(q, k, v, **_channel(rng, 2, 128, np.float16, offset=False), **dict(kw, target="Ascend910B1"))
    assert err.value.param in ("key", "key_antiquant_scale"), str(err.value)


def _mxfp4(rng, b, n2, s2, d, shape=None):
    """An FP4 E2M1 cache (its 16 values) of ``shape`` (default BNSD) and its per-token-group E8M0 scales
    [1, B, N2, S2, D/32] with exponents 2**-6..2**-2 (the dequantised values about in [-1.5, 1.5])."""
    cache = rng.choice(np.arange(16, dtype=np.uint8), shape or (b, n2, s2, d)).view(ml_dtypes.float4_e2m1fn)
    scale = rng.integers(121, 126, (1, b, n2, s2, d // 32)).astype(np.uint8).view(ml_dtypes.float8_e8m0fnu)
    return cache, scale


@pytest.mark.slow
def test_mxfp4_cache_per_token_group_bf16_decode(judge_fia):
    """Mode 6 (MXFP4): FP4 values widened exactly to bf16, times their group's power-of-two scale in bf16."""
    rng = np.random.default_rng(14)
    q, _, _, kw = _call(rng, s2=300, dtype=BF16)
    k, ks = _mxfp4(rng, 2, 2, 300, 128)
    v, vs = _mxfp4(rng, 2, 2, 300, 128)
    judge_fia(q, k, v, key_antiquant_scale=ks, value_antiquant_scale=vs, key_antiquant_mode=6,
              value_antiquant_mode=6, softmax_lse_flag=True, **kw)


@pytest.mark.slow
def test_mxfp4_paged_cache_fp16_prefill(judge_fia):
    """An fp16 query: the bf16 product is cast to fp16; the scales follow the logical KV position."""
    rng = np.random.default_rng(15)
    b, n, n2, d, bs, lens = 2, 4, 2, 128, 128, (200, 380)
    per = -(-max(lens) // bs)
    q = rng.uniform(-1, 1, (b, n, 2, d)).astype(np.float16)
    kc, _ = _mxfp4(rng, b, n2, 0, d, shape=(b * per, n2, bs, d))
    vc, _ = _mxfp4(rng, b, n2, 0, d, shape=(b * per, n2, bs, d))
    _, ks = _mxfp4(rng, b, n2, per * bs, d)
    _, vs = _mxfp4(rng, b, n2, per * bs, d)
    table = rng.permutation(b * per).reshape(b, per).astype(np.int32)
    judge_fia(q, kc, vc, num_heads=n, num_key_value_heads=n2, input_layout="BNSD", scale=d ** -0.5, target=T950,
              block_table=table, block_size=bs, actual_seq_lengths_kv=list(lens), key_antiquant_scale=ks,
              value_antiquant_scale=vs, key_antiquant_mode=6, value_antiquant_mode=6)


def test_e8m0_group_scales_load_as_bf16_powers_of_two():
    """Each E8M0 byte e becomes the bf16 with bits e << 7 (2**(e - 127)), over its 32 channels; a byte of 0
    becomes 0x0040 (2**-127, a subnormal) and one of 255 0x7fff (a NaN), as the 950's loaders
    ``AntiqScaleByVFImpl`` / ``AntiqScalePerTokenGroupByVFImpl`` (vf_antiquant_w4.h) select them."""
    e = np.array([0, 1, 120, 127, 200, 255], np.uint8).reshape(1, 1, 1, 6, 1).repeat(2, axis=-1)
    scale = e.view(ml_dtypes.float8_e8m0fnu)
    arrays = {"key_antiquant_scale": scale, "value_antiquant_scale": scale}
    spec = antiquant_spec(arrays, antiquant_mode=0, key_antiquant_mode=6, value_antiquant_mode=6, batch=1,
                          num_kv_heads=1, head_dim=64, kv_len=6)
    got = spec.key_scale.astype(np.float64)
    assert got.shape == (1, 1, 6, 64) and spec.per_group
    assert list(got[0, 0, :5, 0]) == [2.0 ** -127, 2.0 ** -126, 2.0 ** -7, 1.0, 2.0 ** 73]
    assert list(spec.key_scale.view(np.uint16)[0, 0, [0, 5], 0]) == [0x0040, 0x7FFF]
    assert (spec.key_scale.view(np.uint16) == spec.key_scale.view(np.uint16)[..., :1]).all()


def test_regression_e8m0_zero_and_255_load_as_the_chips_bf16_values():
    """Bug: an E8M0 byte of 0 loaded as 0 and one of 255 as +inf, where the 950 loads 2**-127 and a NaN. An MXFP4
    decode with a key group scale byte of 0 and a value group scale byte of 255: the kernel and the golden read the
    same tables, so the NaNs sit in the same places (the 32 output channels of the NaN group, every row) and the
    rest agrees under the bf16 rule."""
    rng = np.random.default_rng(29)
    q, _, _, kw = _call(rng, b=1, n=2, n2=1, s2=64, d=64, dtype=BF16)
    k, ks = _mxfp4(rng, 1, 1, 64, 64)
    v, vs = _mxfp4(rng, 1, 1, 64, 64)
    ks.view(np.uint8)[0, 0, 0, 5, 1] = 0
    vs.view(np.uint8)[0, 0, 0, 9, 0] = 255
    call = dict(key_antiquant_scale=ks, value_antiquant_scale=vs, key_antiquant_mode=6, value_antiquant_mode=6,
                **kw)
    out, _ = fia(q, k, v, **call)
    gold, _ = fia_golden_lowp(q, k, v, **call)
    nan = np.isnan(np.asarray(out, np.float64))
    assert np.array_equal(nan, np.isnan(np.asarray(gold, np.float64)))
    assert nan[..., :32].all() and not nan[..., 32:].any()
    rep = compare(np.where(nan, 0, out).astype(BF16), np.where(nan, 0, gold).astype(BF16), q.dtype)
    assert rep.passed, str(rep)


def _chip_prefix_of(x, s2):
    """The values the 950 reads of a (B, N2, S', ...) scale tensor spaced by S2 (no shared prefix): its first
    B*N2*S2 rows, as a tensor of that S2."""
    group = x.ndim == 5   # [1, B, N2, S', D/32], else (B, N2, S')
    shape = x.shape[:-2 if group else -1] + (s2,) + (x.shape[-1:] if group else ())
    return np.ascontiguousarray(x).reshape(-1)[:int(np.prod(shape))].reshape(shape)


def _check_spaced_by_s2(q, k, v, scales, s2, judge_fia, **kw):
    """A call whose scale tensors have S' > S2 (``scales``): judged against the golden; bitwise the call with the
    tensors' first B*N2*S2 rows as S' = S2 tensors (the 950's reading), and not the call with their [b, n2, :S2]
    rows (the reading by S', the old one)."""
    out = judge_fia(q, k, v, **scales, **kw)
    chip = {n: _chip_prefix_of(x, s2) for n, x in scales.items()}
    by_s_prime = {n: np.ascontiguousarray(x[..., :s2, :] if x.ndim == 5 else x[..., :s2]) for n, x in scales.items()}
    same, _ = fia(q, k, v, **chip, **kw)
    old, _ = fia(q, k, v, **by_s_prime, **kw)
    assert np.array_equal(np.asarray(out).view(np.uint16), np.asarray(same).view(np.uint16))
    assert not np.array_equal(np.asarray(out).view(np.uint16), np.asarray(old).view(np.uint16))


@pytest.mark.slow
def test_regression_per_token_head_scales_spaced_by_s2_of_key_not_s_prime(judge_fia):
    """Bug: mode 3 scales (B, N2, S') were read at [b, n2, s], spaced by S'; without a shared prefix the 950
    (``LoadAntiquantParamsPerToken``, per-head branch) spaces them by op_host's S of key, S2 = 96 here, so with
    S' = 120 > S2 and B*N2 = 4 the (b, n2) rows start at (b*N2 + n2)*S2 of the tensor."""
    rng = np.random.default_rng(30)
    q, k, v, kw = _call(rng, b=2, n=4, n2=2, s2=96, d=64)
    tok = lambda lo, hi: rng.uniform(lo, hi, (2, 2, 120)).astype(np.float32)   # noqa: E731
    scales = dict(key_antiquant_scale=tok(0.004, 0.012), value_antiquant_scale=tok(0.004, 0.012),
                  key_antiquant_offset=tok(-3, 3), value_antiquant_offset=tok(-3, 3))
    _check_spaced_by_s2(q, k, v, scales, 96, judge_fia, key_antiquant_mode=3, value_antiquant_mode=3, **kw)


def test_regression_mxfp4_group_scales_spaced_by_s2_of_key_not_s_prime(judge_fia):
    """The same bug for mode 6 (``LoadAntiquantParamsPerTokenGroup``, non-NZ branch without a prefix): the
    [1, B, N2, S', D/32] scales' (b, n2) rows start at (b*N2 + n2)*S2*D/32 bytes, S2 = 96 < S' = 110."""
    rng = np.random.default_rng(31)
    q, _, _, kw = _call(rng, b=2, n=4, n2=2, s2=96, d=64, dtype=BF16)
    (k, ks), (v, vs) = _mxfp4(rng, 2, 2, 96, 64), _mxfp4(rng, 2, 2, 96, 64)
    ks, vs = (np.concatenate([x, _mxfp4(rng, 2, 2, 14, 64)[1]], axis=3) for x in (ks, vs))
    _check_spaced_by_s2(q, k, v, dict(key_antiquant_scale=ks, value_antiquant_scale=vs), 96, judge_fia,
                        key_antiquant_mode=6, value_antiquant_mode=6, **kw)


@pytest.mark.slow
def test_regression_paged_mxfp4_group_scales_spaced_by_the_block_tables_s2(judge_fia):
    """On a paged (BnNBsD) cache S2 is the block table's columns times the block size (2 * 64 here), whatever S'
    (150) and the KV lengths."""
    rng = np.random.default_rng(32)
    q, k, v, kw, _ = _paged(rng, _fp4(rng), d=64, bs=64, lens=(100, 128), dtype=BF16)
    (_, ks), (_, vs) = _mxfp4(rng, 2, 2, 150, 64), _mxfp4(rng, 2, 2, 150, 64)
    _check_spaced_by_s2(q, k, v, dict(key_antiquant_scale=ks, value_antiquant_scale=vs), 128, judge_fia,
                        key_antiquant_mode=6, value_antiquant_mode=6, **kw)


def test_chip_seq_stride_is_the_key_s_or_the_block_tables_columns_times_the_block_size():
    """``chip_seq_stride``: the dense key's S in its layout, or a paged cache's table columns times its block size
    (BnBsH, BnNBsD, NZ); the spec reads mode 3 and mode 6 tensors' first B*N2*S2 rows with it, by S' without."""
    table = np.zeros((2, 3), np.int32)
    assert chip_seq_stride(np.zeros((2, 2, 50, 64)), None, "BNSD") == 50
    assert chip_seq_stride(np.zeros((2, 50, 128)), None, "BSH") == chip_seq_stride(np.zeros((2, 50, 2, 64)), None,
                                                                                  "BSND") == 50
    assert {chip_seq_stride(np.zeros(s), table, "BNSD") for s in ((6, 16, 128), (6, 2, 16, 64),
                                                                  (6, 2, 4, 16, 16))} == {48}
    x = np.arange(2 * 2 * 60, dtype=np.float32).reshape(2, 2, 60)
    common = dict(antiquant_mode=0, key_antiquant_mode=3, value_antiquant_mode=3, batch=2, num_kv_heads=2,
                  head_dim=64, kv_len=50)
    spec = antiquant_spec({"key_antiquant_scale": x, "value_antiquant_scale": x}, seq_stride=50, **common)
    assert np.array_equal(spec.key_scale, x.reshape(-1)[:200].reshape(2, 2, 50))
    assert antiquant_spec({"key_antiquant_scale": x, "value_antiquant_scale": x}, **common).key_scale is x
    with pytest.raises(ParamError, match="S' >= 61"):
        antiquant_spec({"key_antiquant_scale": x, "value_antiquant_scale": x}, seq_stride=61, **common)


def _prefix(rng, n2, p, d, layout="BNSD"):
    """An int8 shared prefix of p positions (batch 1) in the call's layout."""
    kp, vp = (rng.integers(-128, 128, (1, n2, p, d)).astype(np.int8) for _ in range(2))
    if layout == "BSH":
        kp, vp = (x.transpose(0, 2, 1, 3).reshape(1, p, n2 * d) for x in (kp, vp))
    return dict(key_shared_prefix=kp, value_shared_prefix=vp)


@pytest.mark.slow
def test_shared_prefix_per_channel_decode_with_a_block_straddling_its_end(judge_fia):
    """The int8 prefix dequantises with the cache's per-channel parameters and offsets; 250 of its 300 positions
    are attended, so one S2 block straddles the prefix's end (two steps, the prefix's rows then the own KV's)."""
    rng = np.random.default_rng(16)
    q, k, v, kw = _call(rng)
    judge_fia(q, k, v, softmax_lse_flag=True, actual_shared_prefix_len=[250], **_prefix(rng, 2, 300, 128),
              **_channel(rng, 2, 128, np.float16), **kw)


@pytest.mark.slow
def test_shared_prefix_per_token_params_of_the_own_kv_start_s_minus_s_of_key_into_the_table(judge_fia):
    """Mode 1 with S' = S of key + 17: the prefix's positions read the table's first plen entries and the own KV's
    start 17 (S' - S of key) into it, as the 950 template reads them, not right after the prefix's (A2/A3)."""
    rng = np.random.default_rng(17)
    q, k, v, kw = _call(rng)
    tok = lambda lo, hi: rng.uniform(lo, hi, (2, 317)).astype(np.float32)   # noqa: E731
    judge_fia(q, k, v, softmax_lse_flag=True, actual_shared_prefix_len=[250], **_prefix(rng, 2, 300, 128),
              key_antiquant_scale=tok(0.004, 0.012), value_antiquant_scale=tok(0.004, 0.012),
              key_antiquant_offset=tok(-3, 3), value_antiquant_offset=tok(-3, 3), key_antiquant_mode=1,
              value_antiquant_mode=1, **kw)


@pytest.mark.slow
def test_shared_prefix_bsh_bf16_prefill_per_token_with_kv_lengths(judge_fia):
    rng = np.random.default_rng(18)
    q, k, v, kw = _call(rng, s1=3, s2=500, dtype=BF16, layout="BSH")
    tok = lambda lo, hi: rng.uniform(lo, hi, (2, 500)).astype(np.float32)   # noqa: E731
    judge_fia(q, k, v, softmax_lse_flag=True, actual_seq_lengths_kv=[500, 123], **_prefix(rng, 2, 200, 128, "BSH"),
              key_antiquant_scale=tok(0.004, 0.012), value_antiquant_scale=tok(0.004, 0.012),
              key_antiquant_offset=tok(-3, 3), value_antiquant_offset=tok(-3, 3), key_antiquant_mode=1,
              value_antiquant_mode=1, **kw)


def test_shared_prefix_with_a_paged_cache_is_refused_by_the_operator_checks():
    """op_host takes no shared prefix with paged attention, on the 950 too: a ParamError naming the prefix."""
    rng = np.random.default_rng(19)
    b, n, n2, d, bs = 2, 8, 2, 128, 128
    q = rng.uniform(-1, 1, (b, n, 1, d)).astype(np.float16)
    kc, vc = (rng.integers(-128, 128, (b * 2, n2, bs, d)).astype(np.int8) for _ in range(2))
    table = np.arange(b * 2).reshape(b, 2).astype(np.int32)
    with pytest.raises(ParamError) as err:
        fia(q, kc, vc, num_heads=n, num_key_value_heads=n2, input_layout="BNSD", scale=d ** -0.5, target=T950,
            block_table=table, block_size=bs, actual_seq_lengths_kv=[200, 256], **_prefix(rng, n2, 64, d),
            **_channel(rng, n2, d, np.float16))
    assert err.value.param == "key_shared_prefix", str(err.value)


def _int8(rng):
    return lambda shape: rng.integers(-128, 128, shape).astype(np.int8)


def test_nz_cache_per_token_bf16_with_offset(judge_fia):
    """An int8 NZ cache on the 950 (16-value fractals) with per-token parameters and offsets: the kernel reads
    the fractals in place through the block table; the golden reads the BnNBsD cache they hold."""
    rng = np.random.default_rng(20)
    q, k, v, kw, _ = _paged(rng, _int8(rng), dtype=BF16, nz=True)
    tok = lambda lo, hi: rng.uniform(lo, hi, (2, 256)).astype(np.float32)   # noqa: E731
    judge_fia(q, k, v, key_antiquant_scale=tok(0.004, 0.012), value_antiquant_scale=tok(0.004, 0.012),
              key_antiquant_offset=tok(-3, 3), value_antiquant_offset=tok(-3, 3), key_antiquant_mode=1,
              value_antiquant_mode=1, **kw)


@pytest.mark.slow
def test_nz_cache_is_bitwise_the_bnnbsd_cache_it_holds(judge_fia):
    """The dequantisation does not depend on the layout: an int8 NZ cache gives the BnNBsD cache's bits."""
    rng = np.random.default_rng(21)
    q, k, v, kw, (kd, vd) = _paged(rng, _int8(rng), nz=True)
    aq = _channel(rng, 2, 128, np.float16)
    a, la = fia(q, k, v, **aq, **kw)
    b, lb = fia(q, kd, vd, **aq, **kw)
    assert np.array_equal(a.view(np.uint16), b.view(np.uint16)) and np.array_equal(la, lb)
    judge_fia(q, k, v, **aq, **kw)


@pytest.mark.slow
def test_int4_nz_cache_packed_per_channel(judge_fia):
    """An int4 NZ cache packed 8 per int32: (blocks, N2, D/16, block_size, 2) as aclnn takes it on the 950."""
    rng = np.random.default_rng(22)
    q, k, v, kw, _ = _paged(rng, lambda shape: rng.integers(-8, 8, shape).astype(np.int8), nz=True)
    k, v = pack_int4(k), pack_int4(v)
    assert k.shape == (4, 2, 8, 128, 2)
    aq = {name: x * 16 for name, x in _channel(rng, 2, 128, np.float16, offset=False).items()}
    judge_fia(q, k, v, **aq, **kw)


@pytest.mark.slow
def test_fp8_nz_cache_per_channel_bf16(judge_fia):
    rng = np.random.default_rng(23)
    q, k, v, kw, _ = _paged(rng, lambda shape: _fp8(rng, shape), dtype=BF16, nz=True)
    judge_fia(q, k, v, **_channel(rng, 2, 128, BF16, offset=False), **kw)


@pytest.mark.parametrize("target, d0, rule", [(T950, 32, "must be 16"), ("Ascend910B1", 16, "block_size, 32)")])
def test_nz_fraction_of_an_int8_cache_is_16_values_on_the_950_and_32_on_a2(target, d0, rule):
    """The 950's op_host takes an antiquant NZ cache in 16-value fractals (its dequant kernel copies 16 values a
    row whatever their width); A2/A3's IFA kernel reads 32 bytes. The other fractal is refused naming the key."""
    rng = np.random.default_rng(24)
    q, _, _, kw, (kd, vd) = _paged(rng, _int8(rng), nz=True, dtype=BF16)   # A2/A3's NZ template takes bf16
    with pytest.raises(ParamError) as err:
        plan_call(query=q, key=to_nz(kd, d0), value=to_nz(vd, d0), **_channel(rng, 2, 128, BF16),
                  **dict(kw, target=target))
    assert err.value.param == "key" and rule in str(err.value), str(err.value)


def _fp4(rng):
    return lambda shape: rng.choice(np.arange(16, dtype=np.uint8), shape).view(ml_dtypes.float4_e2m1fn)


def _nz_order(scale):
    """Per-token-group scales [1, B, N2, S, D/32] laid out as the 950 reads them with an NZ cache: the same
    buffer holding (B, N2, D/32, S) (each group's row of positions), still shaped [1, B, N2, S, D/32]."""
    return np.ascontiguousarray(scale[0].transpose(0, 1, 3, 2)).reshape(scale.shape)


def _mxfp4_nz(rng, dtype=BF16):
    """An MXFP4 decode on an NZ cache (``_paged``: blocks of 128, 2 table columns, so S2 = 256) with its scales
    in the NZ order; returns the call's (q, k, v, keywords) and the BnNBsD caches with the scales in their order."""
    q, k, v, kw, (kd, vd) = _paged(rng, _fp4(rng), dtype=dtype, nz=True)
    (_, ks), (_, vs) = _mxfp4(rng, 2, 2, 256, 128), _mxfp4(rng, 2, 2, 256, 128)
    kw.update(key_antiquant_mode=6, value_antiquant_mode=6)
    nz = dict(key_antiquant_scale=_nz_order(ks), value_antiquant_scale=_nz_order(vs))
    nd = dict(key_antiquant_scale=ks, value_antiquant_scale=vs)
    return (q, k, v, dict(kw, **nz)), (kd, vd, dict(kw, **nd))


@pytest.mark.slow
def test_mxfp4_nz_cache_with_its_group_scales_in_the_nz_order(judge_fia):
    """Mode 6 on an NZ cache: the 950 copies each group's row of positions ((B, N2, D/32, S2) bytes; its
    ``CopyAntiqScaleE8M0Nz``), the kernel reads them so, the golden likewise."""
    rng = np.random.default_rng(25)
    (q, k, v, kw), _ = _mxfp4_nz(rng)
    judge_fia(q, k, v, **kw)


@pytest.mark.slow
def test_mxfp4_nz_cache_is_bitwise_the_bnnbsd_cache_with_its_scales_in_their_order(judge_fia):
    """The NZ cache with its scales in the NZ order gives the bits of the BnNBsD cache it holds with the same
    scales in their [1, B, N2, S, D/32] order; the NZ cache read with the BnNBsD order's bytes does not."""
    rng = np.random.default_rng(26)
    (q, k, v, kw), (kd, vd, kw_nd) = _mxfp4_nz(rng, dtype=np.float16)
    a, la = fia(q, k, v, **kw)
    b, lb = fia(q, kd, vd, **kw_nd)
    assert np.array_equal(a.view(np.uint16), b.view(np.uint16)) and np.array_equal(la, lb)
    c, _ = fia(q, k, v, **dict(kw, **{n: kw_nd[n] for n in ("key_antiquant_scale", "value_antiquant_scale")}))
    assert not np.array_equal(a.view(np.uint16), c.view(np.uint16))
    judge_fia(q, k, v, **kw)


def test_nz_group_scales_are_read_from_the_start_with_s2_of_the_table_whatever_s_prime():
    """With an NZ cache the 950 reads the scale bytes as (B, N2, D/32, S2), S2 = block table columns * block
    size, from the tensor's start (its scale offset ignores a longer S'): the spec's (B, N2, D, S2) tables."""
    b, n2, d, bs, cols, extra = 2, 2, 64, 64, 3, 40
    s2, groups = cols * bs, d // 32
    raw = np.random.default_rng(27).integers(1, 255, (1, b, n2, s2 + extra, groups)).astype(np.uint8)
    key = np.zeros((b * cols, n2, d // 16, bs, 16), np.uint8).view(ml_dtypes.float4_e2m1fn)
    stride = group_scale_stride(key, np.zeros((b, cols), np.int32))
    assert stride == s2 and group_scale_stride(key[:, :, 0], np.zeros((b, cols), np.int32)) is None
    scale = raw.view(ml_dtypes.float8_e8m0fnu)
    spec = antiquant_spec({"key_antiquant_scale": scale, "value_antiquant_scale": scale}, antiquant_mode=0,
                          key_antiquant_mode=6, value_antiquant_mode=6, batch=b, num_kv_heads=n2, head_dim=d,
                          kv_len=s2, nz_stride=stride)
    chip = raw.reshape(-1)[:b * n2 * groups * s2].reshape(b, n2, groups, s2)
    want = np.repeat(chip.astype(np.uint16) << 7, 32, axis=2)
    assert spec.group_nz and np.array_equal(spec.key_scale.view(np.uint16), want)
    x = np.full((1, 5, d), 2, np.uint8).view(ml_dtypes.float4_e2m1fn)   # 1.0 at head 1, positions 100..104
    rows = spec.dequantised(x, "key", 1, 1, 2, 100, 105)
    assert np.array_equal(rows, want[1, 1:2, :, 100:105].view(BF16).astype(np.float64).transpose(0, 2, 1))
    with pytest.raises(ParamError, match="S' >= 192"):
        antiquant_spec({"key_antiquant_scale": scale[:, :, :, :s2 - 1], "value_antiquant_scale": scale},
                       antiquant_mode=0, key_antiquant_mode=6, value_antiquant_mode=6, batch=b, num_kv_heads=n2,
                       head_dim=d, kv_len=100, nz_stride=stride)


def test_ascend_c_backend_refuses_the_nz_view_by_name():
    """The kernel reads an NZ cache in place through a permuted, merged view whose last dim is not contiguous in
    GM; the Ascend C backend refuses it naming the source line (a BnNBsD cache's call lowers)."""
    from cvtile.dsl import ascendc
    from cvtile.dsl.ascendc.lower import AscendCUnsupported
    from cvtile.dsl.jit import record_launches

    rng = np.random.default_rng(28)
    q, k, v, kw, (kd, vd) = _paged(rng, _int8(rng), b=1, n=2, n2=1, lens=(128,), nz=True)
    aq = _channel(rng, 1, 128, np.float16, offset=False)
    launches = []
    for key, value in ((kd, vd), (k, v)):
        with record_launches(run=False) as rec:
            fia(q, key, value, **aq, **kw)
        launches.append(rec.launches[0].kernel)
    ascendc.lowered(launches[0])
    with pytest.raises(AscendCUnsupported, match="kernel_dequant.py:.*not contiguous"):
        ascendc.lowered(launches[1])
