"""The FlashAttentionScore forward on the simulated chip (``npu_fusion_attention``) against the float64 golden.

Every call goes through the whole operator: host normalisation, op_host's FAS tiling, the DSL kernel. Each
distinct feature set is one kernel compile (~30 s cold), so the default tier holds three calls that together
cover the layouts with a head fold (BSND GQA), varlen TND with an empty batch, fp32 (the cube's fp32 path),
every pse order, the sink and dropout; the slow tier adds SBH, the prefix and varlen outer-split modes, the
inner alibi and a variant hook.
"""

from __future__ import annotations

import numpy as np
import pytest

from cvtile.kernels.fas.api import fas_tiling, npu_fusion_attention, npu_fusion_attention_v2
from cvtile.kernels.fas.host import prefix_template, prepare_call
from cvtile.kernels.golden.dtypes import numpy_dtype
from cvtile.kernels.golden.fas import fas_golden
from cvtile.kernels.golden.masks import mask_template
from cvtile.kernels.precision import compare


def _rand(rng, shape, dtype, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, shape).astype(numpy_dtype(dtype))


def _judge(q, k, v, result, kw, modify=None):
    out, smax, ssum = result[:3]
    host = {k_: v_ for k_, v_ in kw.items() if k_ not in ("target",)}
    host.pop("inner_precise", None)
    call = prepare_call(q, k, v, **host)
    g_out, g_max, g_sum = fas_golden(call, q, k, v, p_dtype=call.dtype, modify=modify)
    rep = compare(out, g_out, call.dtype, name="attention_out")
    assert rep.passed, rep
    fin = np.isfinite(g_max)
    assert np.array_equal(np.isfinite(smax), fin)
    assert compare(smax[fin], g_max[fin], np.float32, rtol=1e-5, atol=1e-5, name="softmax_max").passed
    assert compare(ssum, g_sum, np.float32, rtol=1e-4, atol=1e-6, name="softmax_sum").passed
    assert (smax == smax[..., :1]).all() and (ssum == ssum[..., :1]).all()     # 8 equal lanes
    return call


@pytest.mark.slow
def test_bsnd_gqa_right_down_causal_with_a_longer_kv():
    rng = np.random.default_rng(0)
    b, n, n2, s1, s2, d = 2, 4, 2, 80, 150, 64
    q, k, v = _rand(rng, (b, s1, n, d), "float16"), _rand(rng, (b, s2, n2, d), "float16"), \
        _rand(rng, (b, s2, n2, d), "float16")
    kw = dict(head_num=n, input_layout="BSND", scale=d ** -0.5, atten_mask=mask_template(), sparse_mode=3)
    res = npu_fusion_attention(q, k, v, **kw)
    assert len(res) == 7 and res[3].size == 0 and res[4:] == (0, 0, 0)
    _judge(q, k, v, res, kw)


def test_tnd_bf16_with_an_empty_batch_and_the_default_softmax_layout():
    rng = np.random.default_rng(1)
    lens_q, lens_kv = [40, 0, 72], [64, 0, 72]
    n, d = 2, 64
    q = _rand(rng, (sum(lens_q), n, d), "bfloat16")
    k, v = _rand(rng, (sum(lens_kv), n, d), "bfloat16"), _rand(rng, (sum(lens_kv), n, d), "bfloat16")
    kw = dict(head_num=n, input_layout="TND", scale=0.125, atten_mask=mask_template(), sparse_mode=2,
              actual_seq_qlen=np.cumsum(lens_q), actual_seq_kvlen=np.cumsum(lens_kv))
    res = npu_fusion_attention(q, k, v, **kw)
    assert res[1].shape == (sum(lens_q), n, 8)
    _judge(q, k, v, res, kw)


@pytest.mark.slow
def test_fp32_mask_pse_add_then_mul_sink_and_dropout():
    """fp32 through the cube, mode 0 with a mask and a window, pse type 1 (BN1S), a sink, dropout from an
    explicit bit mask."""
    from cvtile.kernels.fas.dropout import pack_drop_mask

    rng = np.random.default_rng(2)
    b, n, s1, s2, d, dv = 1, 2, 48, 96, 32, 16
    q, k, v = _rand(rng, (b, n, s1, d), "float32"), _rand(rng, (b, n, s2, d), "float32"), \
        _rand(rng, (b, n, s2, dv), "float32")
    mask = rng.uniform(size=(s1, s2)) < 0.1
    keep = rng.uniform(size=(b, n, s1, s2)) < 0.9
    kw = dict(head_num=n, input_layout="BNSD", scale=0.3, atten_mask=mask, sparse_mode=0, pre_tockens=60,
              next_tockens=40, pse=_rand(rng, (b, n, 1, s2), "float32"), sink=rng.uniform(-1, 1, n).astype(np.float32),
              keep_prob=0.9, dropout_mask=pack_drop_mask(keep))
    res = npu_fusion_attention(q, k, v, **kw)
    call = _judge(q, k, v, res, kw)
    assert call.keep is not None and np.array_equal(call.keep, keep)


def test_the_tiling_covers_every_visible_block_once():
    rng = np.random.default_rng(3)
    q = _rand(rng, (1, 2, 300, 64), "float16")
    call = prepare_call(q, q, q, head_num=2, input_layout="BNSD", atten_mask=mask_template(), sparse_mode=3)
    t = fas_tiling(call)
    seen = {}
    for core in t.core_tasks:
        for task in core:
            for j in range(task.s2_lo, task.s2_hi):
                key = (task.b, task.n1, task.m_start, j)
                assert key not in seen
                seen[key] = 1
    vis = call.visible(0, 0)
    for (b, n1, m0, j) in seen:
        assert vis[m0:m0 + t.s1_base, j * t.s2_base:(j + 1) * t.s2_base].any()


@pytest.mark.slow
def test_sbh_prefix_compressed_and_inner_alibi():
    rng = np.random.default_rng(4)
    s, b, n, d = 100, 2, 2, 64
    q, k, v = (_rand(rng, (s, b, n * d), "float16") for _ in range(3))
    kw = dict(head_num=n, input_layout="SBH", scale=0.125, atten_mask=prefix_template(), sparse_mode=6,
              prefix=[30, 64], pse=np.array([0.25, 0.5], np.float32))
    res = npu_fusion_attention_v2(q, k, v, pse_type=2, q_start_idx=[1], kv_start_idx=[0], **kw)
    _judge(q, k, v, res, dict(kw, pse_type=2, q_start_idx=[1], kv_start_idx=[0]))


@pytest.mark.slow
def test_varlen_outer_split_right_down_with_the_last_batch_banded():
    rng = np.random.default_rng(5)
    lens_q, lens_kv = [20, 33], [50, 90]
    n, d = 2, 64
    q = _rand(rng, (sum(lens_q), n, d), "float16")
    k, v = _rand(rng, (sum(lens_kv), n, d), "float16"), _rand(rng, (sum(lens_kv), n, d), "float16")
    kw = dict(head_num=n, input_layout="TND", scale=0.125, atten_mask=mask_template(), sparse_mode=7,
              pre_tockens=90, next_tockens=-10, actual_seq_qlen=np.cumsum(lens_q),
              actual_seq_kvlen=np.cumsum(lens_kv), softmax_layout="TND")
    _judge(q, k, v, npu_fusion_attention(q, k, v, **kw), kw)


@pytest.mark.slow
def test_a_score_mod_compiles_into_the_fas_kernel():
    from cvtile.kernels.variants.gallery import soft_cap
    from cvtile.kernels.variants.hooks import host_modifier

    rng = np.random.default_rng(6)
    q, k, v = (_rand(rng, (1, 2, 96, 64), "float16", -3, 3) for _ in range(3))
    kw = dict(head_num=2, input_layout="BNSD", scale=1.0, atten_mask=mask_template(), sparse_mode=2)
    res = npu_fusion_attention(q, k, v, score_mod=soft_cap(5.0), **kw)
    _judge(q, k, v, res, kw, modify=host_modifier(soft_cap(5.0)))


def test_an_arch35_target_is_unsupported_naming_the_target():
    from cvtile.kernels.errors import UnsupportedParameterError

    q = np.zeros((1, 2, 16, 64), np.float16)
    with pytest.raises(UnsupportedParameterError) as ei:
        npu_fusion_attention(q, q, q, 2, "BNSD", target="Ascend950")
    assert ei.value.param == "target" and "arch22" in str(ei.value) and "Ascend950" in str(ei.value)
