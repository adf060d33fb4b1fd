"""Query quantisation (FA full quant: ``dequant_scale_query`` / ``query_quant_mode``) through the V2 and V4 APIs.

Both now reach the operator: op_host's checks judge them first (an invalid call is its ``ParamError`` with the
aclnn status, named by the caller's keyword), and a call op_host lets through is refused by name
(``UnsupportedParameterError``): cvtile simulates no query-quant kernel (Ascend950's full-quant GQA / MLA /
MXFP8 kernels). An FP8 full-quant call through V2 stops at op_host's output check: its attention_out takes the
query's dtype (V2's ``out_dtype`` is a reserved override), and an FP8 output is post-quant, which needs
quant_scale_out.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from cvtile.kernels.errors import UnsupportedParameterError
from cvtile.kernels.fia.api import fused_infer_attention_score_v4
from cvtile.kernels.fia.api_v2 import npu_fused_infer_attention_score_v2 as fia_v2
from cvtile.tiling.errors import ParamError

F8 = ml_dtypes.float8_e4m3fn


def _v2_call(target, s1=1, **extra):
    rng = np.random.default_rng(60)
    q = rng.uniform(-1, 1, (1, 4, s1, 64)).astype(np.float16)
    k = rng.uniform(-1, 1, (1, 2, 128, 64)).astype(np.float16)
    return fia_v2(q, k, k, num_query_heads=4, num_key_value_heads=2, input_layout="BNSD", softmax_scale=0.125,
                  target=target, **extra)


@pytest.mark.parametrize("s1", [1, 64])
def test_ascend950_rejects_a_query_scale_without_quantisation(s1):
    """op_host's arch35 dequant checker: dequant_scale_query must be absent in a non-quant call (aclnn 561002)."""
    with pytest.raises(ParamError) as err:
        _v2_call("Ascend950", s1, dequant_scale_query=np.ones((1, 4, s1), np.float32))
    assert (err.value.param, err.value.checker, err.value.status) == ("dequant_scale_query", "dequant", 561002)


def test_a_query_scale_op_host_lets_through_is_refused_by_name():
    """The A2 routes do not check a float call's query scale; cvtile refuses it rather than drop it."""
    with pytest.raises(UnsupportedParameterError) as err:
        _v2_call("Ascend910B1", dequant_scale_query=np.ones((1, 4, 1), np.float32))
    assert err.value.param == "dequant_scale_query" and "float16 query is not quantised" in err.value.reason


@pytest.mark.parametrize("target", ["Ascend950", "Ascend910B1"])
def test_query_quant_mode_alone_is_refused_by_name(target):
    with pytest.raises(UnsupportedParameterError) as err:
        _v2_call(target, query_quant_mode=3)
    assert err.value.param == "query_quant_mode" and err.value.value == 3
    assert "without dequant_scale_query" in err.value.reason


def test_v4_takes_the_query_scale_to_op_host():
    rng = np.random.default_rng(61)
    q = rng.uniform(-1, 1, (1, 4, 1, 64)).astype(np.float16)
    k = rng.uniform(-1, 1, (1, 2, 128, 64)).astype(np.float16)
    with pytest.raises(ParamError) as err:
        fused_infer_attention_score_v4(q, k, k, num_heads=4, num_key_value_heads=2, input_layout="BNSD",
                                       target="Ascend950", dequant_scale_query=np.ones((1, 4, 1), np.float32),
                                       query_quant_mode=3)
    assert err.value.param == "dequant_scale_query" and err.value.status == 561002


def test_query_quant_mode_must_be_an_int():
    with pytest.raises(ParamError) as err:
        _v2_call("Ascend950", query_quant_mode=3.0)
    assert err.value.param == "query_quant_mode" and err.value.status == 161002


def test_an_fp8_gqa_full_quant_call_stops_at_the_fp8_output():
    """The documented GQA full quant (FP8 q/k/v, query/key/value modes 3/3/2, paged BnNBsD, NTD_TND, D 128): V2
    infers an FP8 attention_out from the query, which op_host takes as post-quant needing quant_scale_out."""
    n1, n2, d, bs, t = 8, 2, 128, 128, 6
    q = np.ones((n1, t, d), F8)
    kv = np.ones((4, n2, bs, d), F8)
    with pytest.raises(ParamError) as err:
        fia_v2(q, kv, kv, num_query_heads=n1, num_key_value_heads=n2, input_layout="NTD_TND", block_size=bs,
               block_table=np.arange(4, dtype=np.int32).reshape(2, 2), actual_seq_qlen=[3, 6],
               actual_seq_kvlen=[200, 150], dequant_scale_query=np.ones((n1, t), np.float32),
               dequant_scale_key=np.ones((4, n2, bs), np.float32), dequant_scale_value=np.ones(n2, np.float32),
               query_quant_mode=3, key_quant_mode=3, value_quant_mode=2, target="Ascend950")
    assert err.value.param == "quant_scale_out" and err.value.checker == "post_quant"
