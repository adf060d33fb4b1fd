"""KV antiquant (int8 key/value cache, fp16/bf16 query): the MSD kernel against the float64 golden.

The kernel (``kernels/fia/kernel_antiquant.py``) splits the query and P into int8 digits and multiplies them with
the int8 cache on the cube, as the chip's IFA antiquant template does, from a dense or a paged cache (BnBsH,
BnNBsD, int8 NZ); the golden dequantises the cache exactly, ``(x + offset) · scale``, and never rounds P.
Compared under the upstream rule of the query dtype's class. Each kernel specialisation compiles for about a
minute, so the kernel runs (the modes, paged caches, the flash-decode split, the digit count and the pipelined
order) are in the slow tier; the default tier keeps the golden and the refusals.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from cvtile.kernels.errors import UnsupportedParameterError
from cvtile.kernels.fia.api import npu_fused_infer_attention_score as fia
from cvtile.kernels.golden.fia import fia_golden
from cvtile.tiling.errors import ParamError

BF16 = ml_dtypes.bfloat16


def _cache(rng, b=2, n=8, n2=2, s2=300, d=64, dtype=np.float16, layout="BNSD"):
    q = rng.uniform(-1, 1, (b, n, 1, d)).astype(dtype)
    k = rng.integers(-128, 128, (b, n2, s2, d)).astype(np.int8)
    v = rng.integers(-128, 128, (b, n2, s2, d)).astype(np.int8)
    if layout == "BSH":
        q, k, v = (x.transpose(0, 2, 1, 3).reshape(x.shape[0], x.shape[2], -1) for x in (q, k, v))
    elif layout == "BSND":
        q, k, v = (x.transpose(0, 2, 1, 3) for x in (q, k, v))
    return q, k, v, dict(num_heads=n, num_key_value_heads=n2, input_layout=layout, scale=d ** -0.5)


@pytest.mark.slow
def test_per_channel_with_offset_and_lse_gqa_bnsd(judge_fia):
    """Mode 0, (2, N2, 1, D) stacked parameters with an offset: the lse gets the key offset's row term back."""
    rng = np.random.default_rng(1)
    q, k, v, kw = _cache(rng)
    sc = rng.uniform(0.001, 0.02, (2, 2, 1, 64)).astype(np.float16)
    of = rng.uniform(-2, 2, (2, 2, 1, 64)).astype(np.float16)
    judge_fia(q, k, v, antiquant_scale=sc, antiquant_offset=of, softmax_lse_flag=True, **kw)


@pytest.mark.slow
@pytest.mark.parametrize("inner_precise", [0, 1])
def test_per_tensor_separate_key_value_bsh(inner_precise, judge_fia):
    rng = np.random.default_rng(2)
    q, k, v, kw = _cache(rng, layout="BSH", n=4, n2=1)
    one = lambda lo, hi: rng.uniform(lo, hi, (1,)).astype(np.float16)   # noqa: E731
    judge_fia(q, k, v, key_antiquant_scale=one(0.005, 0.01), value_antiquant_scale=one(0.005, 0.01),
           key_antiquant_offset=one(-3, 3), value_antiquant_offset=one(-3, 3), inner_precise=inner_precise, **kw)


@pytest.mark.slow
def test_per_tensor_per_head_mode_2_bsnd(judge_fia):
    rng = np.random.default_rng(3)
    q, k, v, kw = _cache(rng, layout="BSND", n=4, n2=4)
    heads = lambda: rng.uniform(0.002, 0.02, (4,)).astype(np.float16)   # noqa: E731
    judge_fia(q, k, v, key_antiquant_scale=heads(), value_antiquant_scale=heads(), key_antiquant_mode=2,
           value_antiquant_mode=2, **kw)


@pytest.mark.slow
def test_per_token_with_offset_bsh_fp32_parameters(judge_fia):
    """Mode 1: one scale and offset per KV position of each batch ((1, B, S'), S' beyond the KV length)."""
    rng = np.random.default_rng(4)
    q, k, v, kw = _cache(rng, layout="BSH", n=4, n2=2, s2=260)
    tok = lambda lo, hi: rng.uniform(lo, hi, (1, 2, 300)).astype(np.float32)   # noqa: E731
    judge_fia(q, k, v, key_antiquant_scale=tok(0.005, 0.02), key_antiquant_offset=tok(-2, 2),
           value_antiquant_scale=tok(0.005, 0.02), value_antiquant_offset=tok(-2, 2), key_antiquant_mode=1,
           value_antiquant_mode=1, softmax_lse_flag=True, **kw)


@pytest.mark.slow
def test_per_token_stacked_antiquant_scale_mode_1(judge_fia):
    rng = np.random.default_rng(5)
    q, k, v, kw = _cache(rng, n=2, n2=2)
    judge_fia(q, k, v, antiquant_scale=rng.uniform(0.005, 0.02, (2, 2, 300)).astype(np.float32), antiquant_mode=1,
           **kw)


@pytest.mark.slow
def test_per_token_per_head_mode_3_bf16_with_kv_lengths(judge_fia):
    rng = np.random.default_rng(6)
    q, k, v, kw = _cache(rng, dtype=BF16, n=8, n2=2)
    tok = lambda lo, hi: rng.uniform(lo, hi, (2, 2, 300)).astype(np.float32)   # noqa: E731
    judge_fia(q, k, v, key_antiquant_scale=tok(0.005, 0.02), key_antiquant_offset=tok(-1, 1),
           value_antiquant_scale=tok(0.005, 0.02), value_antiquant_offset=tok(-1, 1), key_antiquant_mode=3,
           value_antiquant_mode=3, actual_seq_lengths_kv=[300, 77], **kw)


@pytest.mark.slow
def test_flash_decode_split_rows_per_channel_with_lse(judge_fia):
    """One batch, one kv head, a long KV: the IFA tiling splits the row over cores; each piece writes its
    scaled partial and its max raised by the offset term, and the non-quant combine merges them."""
    from cvtile.dsl.jit import record_launches

    rng = np.random.default_rng(7)
    q, k, v, kw = _cache(rng, b=1, n=8, n2=1, s2=8192)
    sc = rng.uniform(0.002, 0.01, (2, 1, 1, 64)).astype(np.float16)
    of = rng.uniform(-2, 2, (2, 1, 1, 64)).astype(np.float16)
    with record_launches() as rec:
        judge_fia(q, k, v, antiquant_scale=sc, antiquant_offset=of, softmax_lse_flag=True, **kw)
    names = [r.kernel.name for r in rec.launches]
    assert names == ["fia_antiquant", "fia_fd_combine"], names


def _paged(rng, cache: str, b=2, n=8, n2=2, d=128, bs=128, lens=(300, 700)):
    """A decode on a paged int8 cache of ``cache`` layout (BnBsH with a BSH query, else BNSD; NZ is
    (blocks, N2, D/32, block_size, 32)) through a permuted block table."""
    from cvtile.kernels.golden.nz import to_nz

    per = -(-max(lens) // bs)
    q = rng.uniform(-1, 1, (b, n, 1, d)).astype(np.float16)
    kc, vc = (rng.integers(-128, 128, (b * per, n2, bs, d)).astype(np.int8) for _ in range(2))
    layout = "BNSD"
    if cache == "BnBsH":
        q = q.reshape(b, 1, n * d)
        kc, vc = (x.transpose(0, 2, 1, 3).reshape(b * per, bs, n2 * d) for x in (kc, vc))
        layout = "BSH"
    elif cache == "NZ":
        kc, vc = to_nz(kc), to_nz(vc)
        assert kc.shape == (b * per, n2, d // 32, bs, 32)
    table = rng.permutation(b * per).reshape(b, per).astype(np.int32)
    kw = dict(num_heads=n, num_key_value_heads=n2, input_layout=layout, scale=d ** -0.5, block_table=table,
              block_size=bs, actual_seq_lengths_kv=list(lens), softmax_lse_flag=True)
    return q, kc, vc, kw, per * bs


@pytest.mark.slow
@pytest.mark.parametrize("cache", ["BnBsH", "BnNBsD"])
def test_paged_cache_per_channel_with_offset(cache, judge_fia):
    """Mode 0 on a paged int8 cache: the kernel reads the blocks through the table."""
    rng = np.random.default_rng(16)
    q, k, v, kw, _ = _paged(rng, cache)
    sc = rng.uniform(0.001, 0.02, (2, 2 * 128)).astype(np.float16)
    of = rng.uniform(-2, 2, (2, 2 * 128)).astype(np.float16)
    judge_fia(q, k, v, antiquant_scale=sc, antiquant_offset=of, **kw)


@pytest.mark.slow
def test_nz_paged_cache_per_channel(judge_fia):
    """Mode 0 on an NZ int8 cache, read in place, as op_host's GQA NZ template takes it (``CheckGqaIOTensor``,
    ``CheckGqaAttribute``): a bf16 query and output, the key's and the value's own bf16 scales of (N2, 1, D) for
    BNSD, no offsets or lse, inner_precise 1."""
    rng = np.random.default_rng(16)
    q, k, v, kw, _ = _paged(rng, "NZ")
    kw = dict(kw, softmax_lse_flag=False, inner_precise=1)
    ks, vs = (rng.uniform(0.001, 0.02, (2, 1, 128)).astype(BF16) for _ in range(2))
    judge_fia(q.astype(BF16), k, v, key_antiquant_scale=ks, value_antiquant_scale=vs, **kw)


@pytest.mark.slow
def test_paged_cache_per_token_parameters_follow_the_logical_position(judge_fia):
    """Mode 1 on a paged cache: the per-token scale / offset of a KV position is read at its position in the
    batch's sequence, not at its place in the cache's blocks."""
    rng = np.random.default_rng(17)
    q, k, v, kw, cap = _paged(rng, "BnNBsD")
    tok = lambda lo, hi: rng.uniform(lo, hi, (1, 2, cap)).astype(np.float32)   # noqa: E731
    judge_fia(q, k, v, key_antiquant_scale=tok(0.005, 0.02), key_antiquant_offset=tok(-1, 1),
           value_antiquant_scale=tok(0.005, 0.02), value_antiquant_offset=tok(-1, 1), key_antiquant_mode=1,
           value_antiquant_mode=1, **kw)


@pytest.mark.slow
@pytest.mark.parametrize("mode", [4, 5])
def test_paged_modes_read_their_parameters_through_the_block_table(mode, judge_fia):
    """Modes 4/5: per-token (per-head with 5) scales and offsets of (block_num, [N2,] block_size) live in the
    cache's blocks; position p of a batch reads [block_table[b, p // bs], p % bs] (the table is permuted, so
    reading them at the logical position would fail the golden)."""
    rng = np.random.default_rng(18 + mode)
    q, k, v, kw, cap = _paged(rng, "BnNBsD")
    shape = (cap // 128 * 2, 128) if mode == 4 else (cap // 128 * 2, 2, 128)
    par = lambda lo, hi: rng.uniform(lo, hi, shape).astype(np.float32)   # noqa: E731
    judge_fia(q, k, v, key_antiquant_scale=par(0.005, 0.02), key_antiquant_offset=par(-1, 1),
           value_antiquant_scale=par(0.005, 0.02), value_antiquant_offset=par(-1, 1), key_antiquant_mode=mode,
           value_antiquant_mode=mode, **kw)


def test_paged_mode_golden_reads_the_parameters_of_the_block_it_reads():
    """The golden of mode 4 dequantises position p of batch b with the scale at [block_table[b, p // bs],
    p % bs]: a cache of ones with a scale equal to the block id times 1000 plus the row gives, per position,
    exactly that number."""
    from cvtile.kernels.golden.antiquant import antiquant_spec

    table = np.array([[2, 0], [1, 3]], np.int32)
    scale = (np.arange(4)[:, None] * 1000 + np.arange(4)[None, :]).astype(np.float32)    # (blocks 4, bs 4)
    spec = antiquant_spec({"key_antiquant_scale": scale, "value_antiquant_scale": scale, "block_table": table},
                          antiquant_mode=0, key_antiquant_mode=4, value_antiquant_mode=4, batch=2, num_kv_heads=1,
                          head_dim=1, kv_len=8)
    x = np.ones((1, 6, 1), np.int8)
    got = spec.dequantised(x, "key", 1, 0, 1, 1, 7)[0, :, 0]
    assert got.tolist() == [1001, 1002, 1003, 3000, 3001, 3002]


@pytest.mark.slow
def test_three_digits_are_more_precise_than_two():
    """inner_precise 0 takes three MSD digits, 1 two: against the exact golden the third digit must cut the
    error of the scores' split (a fp32 output isolates it from the output rounding)."""
    rng = np.random.default_rng(8)
    q, k, v, kw = _cache(rng, b=1, n=16, n2=1, s2=512, d=128)
    sc = np.full((2,), 0.05, np.float16)
    errs = []
    for ip in (0, 1):
        out, lse = fia(q, k, v, antiquant_scale=sc, inner_precise=ip, softmax_lse_flag=True, **kw)
        _, glse = fia_golden(q, k, v, antiquant_scale=sc, inner_precise=ip, softmax_lse_flag=True, **kw)
        errs.append(np.abs(lse.astype(np.float64) - glse).max())
    assert errs[0] < errs[1] / 4, errs


@pytest.mark.slow
@pytest.mark.parametrize("n", [4, 2])
def test_pipelined_order_is_bitwise_the_program_order(n):
    """G = 2, and G = 1 (an MHA decode: one query row per task, its digits stored by AIV 0 alone; the pipelined
    programs deadlocked on that hand-off's flags before split_cv kept them outside the AIV 0 guard)."""
    rng = np.random.default_rng(9)
    q, k, v, kw = _cache(rng, n=n, n2=2, s2=700)
    sc = rng.uniform(0.005, 0.02, (2, 2, 64)).astype(np.float16)
    a, la = fia(q, k, v, antiquant_scale=sc, softmax_lse_flag=True, **kw)
    b, lb = fia(q, k, v, antiquant_scale=sc, softmax_lse_flag=True, order="pipelined", **kw)
    assert np.array_equal(a.view(np.uint16), b.view(np.uint16)) and np.array_equal(la, lb)


def test_golden_dequantises_exactly():
    rng = np.random.default_rng(10)
    q, k, v, kw = _cache(rng, n=2, n2=2)
    sc = rng.uniform(0.001, 0.02, (2, 2, 1, 64)).astype(np.float16)
    of = rng.uniform(-2, 2, (2, 2, 1, 64)).astype(np.float16)
    gold, _ = fia_golden(q, k, v, antiquant_scale=sc, antiquant_offset=of, **kw)
    kd = (k.astype(np.float64) + of[0].astype(np.float64)) * sc[0].astype(np.float64)
    vd = (v.astype(np.float64) + of[1].astype(np.float64)) * sc[1].astype(np.float64)
    want, _ = fia_golden(q.astype(np.float64), kd, vd, **kw)
    assert np.array_equal(gold, want)


# ---- refusals ------------------------------------------------------------------------------------------
def _refusal(rng, **extra):
    q, k, v, kw = _cache(rng)
    kw.update(extra)
    return q, k, v, kw


def test_int8_cache_without_scale_names_antiquant_scale():
    """op_host's legacy IFA checker refuses it first (561002, as the real tiling fails)."""
    rng = np.random.default_rng(11)
    q, k, v, kw = _refusal(rng)
    with pytest.raises(ParamError) as info:
        fia(q, k, v, **kw)
    assert info.value.param == "antiquant_scale" and int(info.value.status) == 561002


def test_bad_per_channel_shape_names_the_parameter_and_the_shapes():
    rng = np.random.default_rng(12)
    q, k, v, kw = _refusal(rng)
    with pytest.raises(ParamError) as info:
        fia(q, k, v, key_antiquant_scale=np.ones((3, 64), np.float16), value_antiquant_scale=np.ones((3, 64),
            np.float16), **kw)
    # op_host's CheckKVAntiQuantPerChannel (the tiling mirror) lists the accepted per-channel shapes
    assert info.value.param == "key_antiquant_scale" and "[1, 128]" in str(info.value), str(info.value)


def test_short_per_token_table_is_refused():
    rng = np.random.default_rng(13)
    q, k, v, kw = _refusal(rng)
    short = np.ones((1, 2, 100), np.float32)
    with pytest.raises(ParamError) as info:
        fia(q, k, v, key_antiquant_scale=short, value_antiquant_scale=short, key_antiquant_mode=1,
            value_antiquant_mode=1, **kw)
    assert info.value.param == "key_antiquant_scale" and ">= 300" in str(info.value)


def test_per_channel_key_with_per_token_value_is_an_unsimulated_kernel():
    """Modes 0/1 (the key per channel in the query's dtype, the value per token in fp32, as op_host requires)
    are a separate kernel: refused by name."""
    rng = np.random.default_rng(14)
    q, k, v, kw = _refusal(rng, key_antiquant_mode=0, value_antiquant_mode=1)
    with pytest.raises(UnsupportedParameterError) as info:
        fia(q, k, v, key_antiquant_scale=np.full((1,), 0.01, np.float16),
            value_antiquant_scale=np.full((2, 300), 0.01, np.float32), **kw)
    assert info.value.param == "value_antiquant_mode"


def test_paged_antiquant_modes_without_a_block_table_are_refused_as_op_host_does():
    """Modes 4/5 keep their parameters in the paged cache: op_host's CheckKVAntiQuantMode refuses them without
    one (aclnn 561002)."""
    rng = np.random.default_rng(14)
    q, k, v, kw = _refusal(rng, key_antiquant_mode=4, value_antiquant_mode=4)
    one = np.full((1,), 0.01, np.float16)
    with pytest.raises(ParamError) as info:
        fia(q, k, v, key_antiquant_scale=one, value_antiquant_scale=one, **kw)
    assert info.value.param == "key_antiquant_mode"


def test_v2_dequant_scales_run_and_a_sink_is_refused():
    """The V2 API's dequant_scale_key/value are the antiquant scales (key/value_quant_mode the modes); the
    antiquant kernel takes no learnable sink, which is refused by name."""
    from cvtile.kernels.fia.api_v2 import npu_fused_infer_attention_score_v2 as fia_v2

    rng = np.random.default_rng(15)
    q, k, v, _ = _cache(rng)
    one = np.full((1,), 0.01, np.float16)
    with pytest.raises(UnsupportedParameterError) as info:
        fia_v2(q, k, v, dequant_scale_key=one, dequant_scale_value=one, learnable_sink=np.zeros(8, np.float16),
               num_query_heads=8, num_key_value_heads=2, input_layout="BNSD")
    assert info.value.param == "learnable_sink"
    with pytest.raises(ParamError) as info:   # paged modes without a block table: op_host's refusal, V2 names
        fia_v2(q, k, v, dequant_scale_key=one, dequant_scale_value=one, key_quant_mode=4, value_quant_mode=4,
               num_query_heads=8, num_key_value_heads=2, input_layout="BNSD")
    assert info.value.param == "key_quant_mode"
