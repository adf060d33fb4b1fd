"""``npu_fused_infer_attention_score_v2``: torch_npu's second FIA API, run on the simulated chip.

Model
-----
V2 calls the same operator (aclnnFusedInferAttentionScoreV4 underneath) with
renamed, trimmed keywords and one new input, ``learnable_sink``. This module
only renames: every V2 keyword maps to the V1 record that ``prepare_fia`` /
``run_fia`` read, so both APIs share the checks, the tiling and the kernels.

=========================  ==========================  =====================================
V2 keyword                 operator parameter (V1)     simulated
=========================  ==========================  =====================================
actual_seq_qlen            actual_seq_lengths          yes
actual_seq_kvlen           actual_seq_lengths_kv       yes
num_query_heads            num_heads                   yes
softmax_scale              scale                       yes
return_softmax_lse         softmax_lse_flag            yes
learnable_sink             learnable_sink              yes (one logit per query head)
dequant_scale_key/value    key/value_antiquant_scale   yes with an int8/int4 key/value (KV antiquant);
                                                       on Ascend950 also FP8, FP4 and HiF8 (below)
dequant_offset_key/value   key/value_antiquant_offset  yes
quant_scale_out/offset_out quant_scale2/offset2        yes (int8 attention_out)
dequant_scale_query        dequant_scale_query         op_host's checks run (its ParamError with the aclnn
query_quant_mode           query_quant_mode (V4 attr)  status); on A2/A3 the MLA FA quant (int8 query, key,
                                                       value, mode 3) runs (``fia.mla_quant``), on Ascend950 the
                                                       FP8 GQA (modes 3/3/2) and MXFP8 (6/6/8, float8_e8m0
                                                       scales) full quant; other query-quant calls are refused
                                                       by name
quant_scale_p              quant_scale1                yes with the FP8 GQA and MXFP8 full quant (P's FP8 scale)
dequant_scale_key_rope     (rope quantisation)         no
key/value_quant_mode       key/value_antiquant_mode    0 only; 0-3 with dequant_scale_key/value (full quant:
                                                       3/2 FP8 GQA, 6/8 MXFP8)
key_dtype, value_dtype     (the tensors' dtypes)       "hifloat8" / torch_npu.hifloat8 (290)
                                                       with uint8 key/value: a HiF8 cache
out_dtype                  (attention_out's dtype)     float16 / bfloat16 with an FP8 full-quant query
other *_dtype              (the tensors' dtypes)       None, or the tensor's own dtype (a no-op)
=========================  ==========================  =====================================

A HiFloat8 KV cache (Ascend950's dequant kernel; op_host takes it in per-channel mode 0 only, without offsets,
key and value both hifloat8) is what torch_npu's binding does with ``key_dtype`` / ``value_dtype``: uint8
tensors of HiF8 codes reinterpreted as hifloat8 (``golden.hifloat8`` decodes them). The V1 API has no dtype
argument and cannot express one. A dtype override of anything else, or on another tensor, raises
``UnsupportedParameterError`` naming its keyword; a hifloat8 key with a uint8 value is op_host's dtype error
(``ParamError`` naming the value).

Invariants
----------
* A keyword that changes the computation and is not modelled raises
  ``UnsupportedParameterError`` naming the V2 keyword; nothing is dropped.
* The result is exactly what the V1 call with the mapped keywords returns
  (plus the sink), so V1 and V2 agree wherever both can express a call.
"""

from __future__ import annotations

from ...tiling.errors import ParamError
from ...tiling.platform import DEFAULT_TARGET
from ..errors import UnsupportedParameterError
from ..golden.dtypes import canonical_dtype
from .api import KV_DTYPE_KEYWORDS, kv_dtype_overrides, simulate_fia
from .keywords import inverse, renamed

__all__ = ["npu_fused_infer_attention_score_v2", "V2_TO_V1", "V2_ATTRS_TO_V1"]

#: V2 tensor keywords -> the operator parameter they feed.
V2_TO_V1 = {
    "query_rope": "query_rope", "key_rope": "key_rope", "pse_shift": "pse_shift", "atten_mask": "atten_mask",
    "actual_seq_qlen": "actual_seq_lengths", "actual_seq_kvlen": "actual_seq_lengths_kv",
    "block_table": "block_table", "dequant_scale_key": "key_antiquant_scale",
    "dequant_offset_key": "key_antiquant_offset", "dequant_scale_value": "value_antiquant_scale",
    "dequant_offset_value": "value_antiquant_offset", "quant_scale_out": "quant_scale2",
    "quant_offset_out": "quant_offset2", "learnable_sink": "learnable_sink",
    "dequant_scale_query": "dequant_scale_query", "quant_scale_p": "quant_scale1",
}

#: V2 attributes renamed from V1 -> the V1 attribute they set
V2_ATTRS_TO_V1 = {"num_query_heads": "num_heads", "softmax_scale": "scale", "return_softmax_lse": "softmax_lse_flag",
                  "key_quant_mode": "key_antiquant_mode", "value_quant_mode": "value_antiquant_mode",
                  "query_quant_mode": "query_quant_mode"}

#: V2-only quantisation inputs refused before the operator's checks (their operator parameter is not mapped).
_V2_ONLY_QUANT = {
    "dequant_scale_key_rope": "reserved by torch_npu; MLA rope quantisation is not simulated",
}

_RESERVED_DTYPES = ("query_dtype", "key_dtype", "value_dtype", "query_rope_dtype", "key_rope_dtype",
                    "key_shared_prefix_dtype", "value_shared_prefix_dtype", "dequant_scale_query_dtype",
                    "dequant_scale_key_dtype", "dequant_scale_value_dtype", "dequant_scale_key_rope_dtype")


def npu_fused_infer_attention_score_v2(
        query, key, value, *, query_rope=None, key_rope=None, pse_shift=None, atten_mask=None,
        actual_seq_qlen=None, actual_seq_kvlen=None, block_table=None, dequant_scale_query=None,
        dequant_scale_key=None, dequant_offset_key=None, dequant_scale_value=None, dequant_offset_value=None,
        dequant_scale_key_rope=None, quant_scale_out=None, quant_offset_out=None, quant_scale_p=None,
        learnable_sink=None, num_query_heads=1, num_key_value_heads=0, softmax_scale=1.0,
        pre_tokens=2147483647, next_tokens=2147483647, input_layout="BSH", sparse_mode=0, block_size=0,
        query_quant_mode=0, key_quant_mode=0, value_quant_mode=0, inner_precise=0, return_softmax_lse=False,
        query_dtype=None, key_dtype=None, value_dtype=None, query_rope_dtype=None, key_rope_dtype=None,
        key_shared_prefix_dtype=None, value_shared_prefix_dtype=None, dequant_scale_query_dtype=None,
        dequant_scale_key_dtype=None, dequant_scale_value_dtype=None, dequant_scale_key_rope_dtype=None,
        out_dtype=None, target: str = DEFAULT_TARGET, order: str = "program"):
    """FusedInferAttentionScore (torch_npu V2 keywords) on the simulator; see the module docstring.

    Returns ``(attention_out, softmax_lse)``; ``softmax_lse`` is empty unless ``return_softmax_lse``."""
    given = dict(locals())
    for name, reason in _V2_ONLY_QUANT.items():
        if given[name] is not None:
            raise UnsupportedParameterError(name, _short(given[name]), reason)
    for name in _RESERVED_DTYPES:   # one naming its tensor's own dtype changes nothing (the FP8 calls pass them)
        if given[name] is not None and _own_dtype(given, name):
            given[name] = None
        if given[name] is not None and name not in KV_DTYPE_KEYWORDS:
            raise UnsupportedParameterError(name, given[name], "a reserved torch_npu dtype override; the "
                                            "simulator takes dtypes from the arrays (leave it None, or the "
                                            "tensor's own dtype)")
    dtypes = kv_dtype_overrides(given["key_dtype"], given["value_dtype"])   # hifloat8: a uint8 HiF8 cache
    if out_dtype is not None:   # FP8 full quant's fp16 / bf16 output (api._dtype_overrides judges it)
        dtypes["attention_out"] = canonical_dtype(out_dtype)
    antiquant = dequant_scale_key is not None or dequant_scale_value is not None
    for name in ("key_quant_mode", "value_quant_mode"):
        if given[name] != 0 and not antiquant:
            raise UnsupportedParameterError(name, given[name], "quantised attention is not simulated (mode 0 only, "
                                            "or the KV antiquant modes 0-3 with dequant_scale_key/value)")
    # query_quant_mode and dequant_scale_query go to the operator: op_host judges them, prepare_fia refuses them
    optional = {v1: given[v2] for v2, v1 in V2_TO_V1.items()}
    attrs = dict(num_heads=num_query_heads, scale=softmax_scale, pre_tokens=pre_tokens, next_tokens=next_tokens,
                 input_layout=input_layout, num_key_value_heads=num_key_value_heads, sparse_mode=sparse_mode,
                 inner_precise=inner_precise, block_size=block_size, antiquant_mode=0,
                 softmax_lse_flag=bool(return_softmax_lse), key_antiquant_mode=key_quant_mode,
                 value_antiquant_mode=value_quant_mode, query_quant_mode=query_quant_mode)
    try:
        return simulate_fia(query, key, value, optional, attrs, target, order, dtypes=dtypes)
    except (UnsupportedParameterError, ParamError) as err:
        raise renamed(err, _V1_TO_V2) from None


#: operator (V1) names -> the V2 keyword a caller of this API used
_V1_TO_V2 = inverse({**V2_TO_V1, **V2_ATTRS_TO_V1})


def _own_dtype(given: dict, keyword: str) -> bool:
    """The ``*_dtype`` keyword names the dtype its tensor already has (torch_npu's reinterpretation is then a
    no-op)."""
    x = given.get(keyword[:-len("_dtype")])
    return hasattr(x, "dtype") and canonical_dtype(x.dtype) == canonical_dtype(given[keyword])


def _short(x) -> str:
    shape = getattr(x, "shape", None)
    return f"tensor {tuple(shape)}" if shape is not None else repr(x)
