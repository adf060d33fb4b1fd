"""``npu_fused_infer_attention_score_v2``: keyword mapping onto V1, the learnable sink, refusals by V2 name."""

from __future__ import annotations

import inspect

import ml_dtypes
import numpy as np
import pytest

import cvtile
from cvtile import ParamError, UnsupportedParameterError
from cvtile.kernels import compare, fia_golden_lowp
from cvtile.kernels.fia.api import prepare_fia
from cvtile.kernels.fia.launch import run_fia

BF16 = ml_dtypes.bfloat16
CAUSAL = np.triu(np.ones((2048, 2048), dtype=bool), 1)


def _rand(rng, *shape, dtype=BF16, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, shape).astype(dtype)


@pytest.fixture(scope="module")
def tnd():
    """A TND prefill (two batches, GQA 8/2) with a bf16 sink, causal (sparse 3): the split-fuse route."""
    rng = np.random.default_rng(7)
    return dict(query=_rand(rng, 40, 8, 128), key=_rand(rng, 100, 2, 128), value=_rand(rng, 100, 2, 128),
                sink=_rand(rng, 8, lo=-3, hi=3), q_lens=[10, 40], kv_lens=[50, 100])


def _v2(t, **kw):
    base = dict(atten_mask=CAUSAL, actual_seq_qlen=t["q_lens"], actual_seq_kvlen=t["kv_lens"],
                num_query_heads=8, num_key_value_heads=2, softmax_scale=128 ** -0.5, input_layout="TND",
                sparse_mode=3, return_softmax_lse=True)
    base.update(kw)
    return cvtile.npu_fused_infer_attention_score_v2(t["query"], t["key"], t["value"], **base)


def _golden(t, sink):
    return fia_golden_lowp(t["query"], t["key"], t["value"], atten_mask=CAUSAL, actual_seq_lengths=t["q_lens"],
                           actual_seq_lengths_kv=t["kv_lens"], learnable_sink=sink, num_heads=8,
                           num_key_value_heads=2, scale=128 ** -0.5, input_layout="TND", sparse_mode=3,
                           softmax_lse_flag=True)


def test_signature_matches_torch_npu_v2():
    params = inspect.signature(cvtile.npu_fused_infer_attention_score_v2).parameters
    names = list(params)
    assert names[:3] == ["query", "key", "value"]
    assert all(params[n].kind is inspect.Parameter.KEYWORD_ONLY for n in names[3:])
    for name, default in (("num_query_heads", 1), ("num_key_value_heads", 0), ("softmax_scale", 1.0),
                          ("input_layout", "BSH"), ("return_softmax_lse", False), ("learnable_sink", None),
                          ("query_quant_mode", 0), ("out_dtype", None), ("target", "Ascend910B1")):
        assert params[name].default == default, name
    assert names.index("learnable_sink") < names.index("num_query_heads")


@pytest.mark.slow
def test_sink_matches_the_golden(tnd):
    out, lse = _v2(tnd, learnable_sink=tnd["sink"])
    g_out, g_lse = _golden(tnd, tnd["sink"])
    rep = compare(out, g_out, dtype="bfloat16")
    assert rep.passed, rep
    rep = compare(lse, g_lse, dtype="float32")
    assert rep.passed, rep


@pytest.mark.slow
def test_sink_changes_the_result(tnd):
    """The sink is applied, not dropped: with it the lse is larger (the sink joins the denominator)."""
    _, with_sink = _v2(tnd, learnable_sink=tnd["sink"])
    _, without = _v2(tnd)
    assert np.all(with_sink > without)


@pytest.mark.slow
def test_v2_equals_v1_without_the_sink(tnd):
    out2, lse2 = _v2(tnd)
    out1, lse1 = cvtile.npu_fused_infer_attention_score(
        tnd["query"], tnd["key"], tnd["value"], atten_mask=CAUSAL, actual_seq_lengths=tnd["q_lens"],
        actual_seq_lengths_kv=tnd["kv_lens"], num_heads=8, num_key_value_heads=2, scale=128 ** -0.5,
        input_layout="TND", sparse_mode=3, softmax_lse_flag=True)
    assert np.array_equal(out1.view(np.uint16), out2.view(np.uint16))
    assert np.array_equal(lse1, lse2)


def test_kernel_sink_with_flash_decode_matches_the_golden():
    """No mirrored route splits a row when a sink is given (op_host turns flash decode off), but the kernels
    support it: the pieces leave the sink out and the combine adds it once per row. Run an Ascend950 FD plan
    (decode, one batch, long KV) with a sink through the launcher."""
    rng = np.random.default_rng(3)
    q = _rand(rng, 1, 8, 1, 128, dtype=np.float16)
    k, v = _rand(rng, 1, 2, 8192, 128, dtype=np.float16), _rand(rng, 1, 2, 8192, 128, dtype=np.float16)
    sink = _rand(rng, 8, dtype=np.float16, lo=-3, hi=3)
    attrs = dict(num_heads=8, scale=0.088, pre_tokens=2147483647, next_tokens=2147483647, input_layout="BNSD",
                 num_key_value_heads=2, sparse_mode=0, inner_precise=0, block_size=0, antiquant_mode=0,
                 softmax_lse_flag=True, key_antiquant_mode=0, value_antiquant_mode=0)
    _, tiling = prepare_fia(q, k, v, {}, attrs, "Ascend950")
    assert tiling.fd_tasks, "the case is meant to take the flash-decode split"
    out, lse, run = run_fia(q, k, v, tiling=tiling, scale=0.088, input_layout="BNSD", num_heads=8,
                            num_key_value_heads=2, softmax_lse_flag=True, learnable_sink=sink)
    assert run.combine_vectors > 0
    g_out, g_lse = fia_golden_lowp(q, k, v, learnable_sink=sink, num_heads=8, num_key_value_heads=2, scale=0.088,
                                   input_layout="BNSD", softmax_lse_flag=True)
    rep = compare(out, g_out, dtype="float16")
    assert rep.passed, rep
    rep = compare(lse, g_lse, dtype="float32")
    assert rep.passed, rep


def test_fully_masked_rows_are_not_rescued_by_the_sink(tnd):
    """A query row with no visible key gives 0 and lse +inf even with a sink (sparse 3, kv shorter than q)."""
    t = dict(tnd, q_lens=[10, 40], kv_lens=[5, 100])    # cumulative: batch 0 has 10 queries and 5 keys
    key, value = tnd["key"], tnd["value"]
    out, lse = cvtile.npu_fused_infer_attention_score_v2(
        tnd["query"], key, value, atten_mask=CAUSAL, actual_seq_qlen=t["q_lens"], actual_seq_kvlen=t["kv_lens"],
        num_query_heads=8, num_key_value_heads=2, softmax_scale=0.088, input_layout="TND", sparse_mode=3,
        return_softmax_lse=True, learnable_sink=tnd["sink"])
    assert np.all(np.asarray(out[:5], np.float32) == 0)       # rows 0..4 of batch 0 see no key
    assert np.all(np.isposinf(lse[:5]))
    assert np.all(np.isfinite(lse[5:]))


def test_sink_of_another_dtype_is_refused(tnd):
    """op_host (arch22 split-fuse entry): the sink must have the query's dtype; named by its V2 keyword."""
    with pytest.raises(ParamError) as info:
        _v2(tnd, learnable_sink=tnd["sink"].astype(np.float16))
    assert info.value.param == "learnable_sink"


def test_sink_with_wrong_length_is_refused(tnd):
    with pytest.raises(ParamError) as info:
        _v2(tnd, learnable_sink=tnd["sink"][:4])
    assert info.value.param == "learnable_sink"


def test_operator_errors_name_the_v2_keyword(tnd):
    with pytest.raises(ParamError) as info:
        _v2(tnd, actual_seq_qlen=[10, 50])          # cumulative lengths must not pass T = 40
    assert info.value.param == "actual_seq_qlen"


@pytest.mark.parametrize("name, value", [
    ("dequant_scale_query", np.ones((40, 8), np.float32)),
    ("quant_scale_p", np.ones(1, np.float32)),
    ("dequant_scale_key", np.ones((2, 128), np.float32)),
    ("quant_offset_out", np.ones(1, np.float32)),     # an offset without quant_scale_out
    ("query_quant_mode", 3),
    ("key_quant_mode", 1),
    ("query_dtype", 1),
    ("out_dtype", 1),
])
def test_unmodelled_v2_keywords_are_named(tnd, name, value):
    with pytest.raises(UnsupportedParameterError) as info:
        _v2(tnd, **{name: value})
    assert info.value.param == name


@pytest.mark.slow
def test_quant_scale_out_is_the_v1_post_quant(tnd):
    """``quant_scale_out``/``quant_offset_out`` are V1's ``quant_scale2``/``quant_offset2``: int8 output."""
    scale, offset = np.array([50.0], np.float32), np.array([2.0], np.float32)
    out, _ = _v2(tnd, quant_scale_out=scale, quant_offset_out=offset)
    gold, _ = fia_golden_lowp(tnd["query"], tnd["key"], tnd["value"], atten_mask=CAUSAL,
                              actual_seq_lengths=tnd["q_lens"], actual_seq_lengths_kv=tnd["kv_lens"],
                              num_heads=8, num_key_value_heads=2, scale=128 ** -0.5, input_layout="TND",
                              sparse_mode=3, softmax_lse_flag=True, quant_scale2=scale, quant_offset2=offset)
    assert out.dtype == np.int8
    rep = compare(out, gold, tnd["query"].dtype)
    assert rep.passed, str(rep)
