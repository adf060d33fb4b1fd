"""``npu_fused_infer_attention_score``: the torch_npu operator, run on the simulated chip.

Model
-----
The call takes torch_npu's parameters with their names, order and defaults
(``torch_npu.npu_fused_infer_attention_score``, V1 API) plus ``target`` (the
platform; default Ascend910B1). It does what the real operator does on the
host and then runs the simulated kernels:

1. the parameter record (``FiaParams``) is built from the arrays' metadata and
   the attributes, with the output metadata the operator infers;
2. the tiling mirror (``tile_fia``) runs op_host's checkers (bad input raises
   ``ParamError`` with the aclnn status), route, block sizes, core split and
   flash-decode plan;
3. features the simulated kernels do not model raise
   ``UnsupportedParameterError`` naming the parameter — nothing is ignored;
4. ``run_fia`` launches the DSL kernels on that tiling.

Inputs are numpy arrays (float16, ml_dtypes.bfloat16, float32 for none of
q/k/v) or torch tensors when torch is installed; the outputs come back in the
same kind. Returns ``(attention_out, softmax_lse)``; ``softmax_lse`` is a
``(B, N, S1, 1)`` / ``(T, N, 1)`` float32 array when ``softmax_lse_flag``,
else an empty ``(0,)`` array (what torch_npu returns, whatever its doc says).

Semantics the simulator fixes where the chip varies: a fully masked row gives
output 0 (the chip guarantees it with inner_precise 2/3 and cvtile for all
values), and its lse is +inf.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...tiling.errors import AclnnStatus, ParamError
from ...tiling.fia import tile_fia
from ...tiling.params import FiaParams, TensorMeta, canonical_dtype
from ...tiling.platform import DEFAULT_TARGET
from ..errors import UnsupportedParameterError
from ..golden.dtypes import to_numpy
from ..golden.layouts import parse_layout
from .launch import LSE_EMPTY_LEGACY, run_fia
from .kernel import LSE_EMPTY

__all__ = ["npu_fused_infer_attention_score", "SUPPORTED_OPTIONAL_INPUTS", "prepare_fia"]

#: Optional tensor inputs the simulated kernels implement; every other one raises UnsupportedParameterError.
SUPPORTED_OPTIONAL_INPUTS = ("atten_mask", "actual_seq_lengths", "actual_seq_lengths_kv")

_UNSUPPORTED_REASON = {
    "pse_shift": "positional bias (pse_shift) is not simulated yet",
    "dequant_scale1": "full int8 quantisation is not simulated",
    "quant_scale1": "full int8 quantisation is not simulated",
    "dequant_scale2": "full int8 quantisation is not simulated",
    "quant_scale2": "output quantisation (post quant) is not simulated",
    "quant_offset2": "output quantisation (post quant) is not simulated",
    "antiquant_scale": "KV antiquantisation is not simulated",
    "antiquant_offset": "KV antiquantisation is not simulated",
    "key_antiquant_scale": "KV antiquantisation is not simulated",
    "key_antiquant_offset": "KV antiquantisation is not simulated",
    "value_antiquant_scale": "KV antiquantisation is not simulated",
    "value_antiquant_offset": "KV antiquantisation is not simulated",
    "block_table": "paged attention (block_table) is not simulated yet",
    "query_padding_size": "left padding is not simulated yet",
    "kv_padding_size": "left padding is not simulated yet",
    "key_shared_prefix": "the shared system prefix is not simulated yet",
    "value_shared_prefix": "the shared system prefix is not simulated yet",
    "actual_shared_prefix_len": "the shared system prefix is not simulated yet",
    "query_rope": "MLA (split rope) is not simulated yet",
    "key_rope": "MLA (split rope) is not simulated yet",
    "key_rope_antiquant_scale": "MLA (split rope) is not simulated yet",
}


def npu_fused_infer_attention_score(
        query, key, value, *, pse_shift=None, atten_mask=None, actual_seq_lengths=None,
        actual_seq_lengths_kv=None, dequant_scale1=None, quant_scale1=None, dequant_scale2=None, quant_scale2=None,
        quant_offset2=None, antiquant_scale=None, antiquant_offset=None, key_antiquant_scale=None,
        key_antiquant_offset=None, value_antiquant_scale=None, value_antiquant_offset=None, block_table=None,
        query_padding_size=None, kv_padding_size=None, key_shared_prefix=None, value_shared_prefix=None,
        actual_shared_prefix_len=None, query_rope=None, key_rope=None, key_rope_antiquant_scale=None, num_heads=1,
        scale=1.0, pre_tokens=2147483647, next_tokens=2147483647, input_layout="BSH", num_key_value_heads=0,
        sparse_mode=0, inner_precise=0, block_size=0, antiquant_mode=0, key_antiquant_mode=0,
        value_antiquant_mode=0, softmax_lse_flag=False, target: str = DEFAULT_TARGET):
    """FusedInferAttentionScore on the simulator; see the module docstring."""
    optional = {
        "pse_shift": pse_shift, "atten_mask": atten_mask, "actual_seq_lengths": actual_seq_lengths,
        "actual_seq_lengths_kv": actual_seq_lengths_kv, "dequant_scale1": dequant_scale1,
        "quant_scale1": quant_scale1, "dequant_scale2": dequant_scale2, "quant_scale2": quant_scale2,
        "quant_offset2": quant_offset2, "antiquant_scale": antiquant_scale, "antiquant_offset": antiquant_offset,
        "key_antiquant_scale": key_antiquant_scale, "key_antiquant_offset": key_antiquant_offset,
        "value_antiquant_scale": value_antiquant_scale, "value_antiquant_offset": value_antiquant_offset,
        "block_table": block_table, "query_padding_size": query_padding_size, "kv_padding_size": kv_padding_size,
        "key_shared_prefix": key_shared_prefix, "value_shared_prefix": value_shared_prefix,
        "actual_shared_prefix_len": actual_shared_prefix_len, "query_rope": query_rope, "key_rope": key_rope,
        "key_rope_antiquant_scale": key_rope_antiquant_scale,
    }
    attrs = dict(num_heads=num_heads, scale=scale, pre_tokens=pre_tokens, next_tokens=next_tokens,
                 input_layout=input_layout, num_key_value_heads=num_key_value_heads, sparse_mode=sparse_mode,
                 inner_precise=inner_precise, block_size=block_size, antiquant_mode=antiquant_mode,
                 softmax_lse_flag=bool(softmax_lse_flag), key_antiquant_mode=key_antiquant_mode,
                 value_antiquant_mode=value_antiquant_mode)
    torch_out = any(_is_torch(x) for x in (query, key, value))
    arrays, tiling = prepare_fia(query, key, value, optional, attrs, target)
    q, k, v = arrays["query"], arrays["key"], arrays["value"]
    legacy = tiling.extras.get("legacy_ifa", False)
    if tiling.route == "empty" or not tiling.cores:
        out, lse = _empty_outputs(q, v, attrs, legacy)
    else:
        out, lse, _ = run_fia(q, k, v, tiling=tiling, scale=float(scale), input_layout=input_layout,
                              num_heads=num_heads, num_key_value_heads=num_key_value_heads,
                              atten_mask=arrays.get("atten_mask"), sparse_mode=sparse_mode, pre_tokens=pre_tokens,
                              next_tokens=next_tokens, softmax_lse_flag=softmax_lse_flag, legacy_route=legacy)
    if lse is None:
        lse = np.empty((0,), dtype=np.float32)
    if torch_out:
        return _to_torch(out), _to_torch(lse)
    return out, lse


def prepare_fia(query, key, value, optional: dict, attrs: dict, target: str):
    """Check the call as the operator would and plan it: returns (numpy arrays by name, FiaTiling).

    Raises ``ParamError`` (the operator rejects the call) or ``UnsupportedParameterError``
    (the simulator does not model a requested feature)."""
    for name, kind in (("query", query), ("key", key), ("value", value)):
        if isinstance(kind, (list, tuple)):
            raise UnsupportedParameterError(name, f"a list of {len(kind)} tensors",
                                            "key/value tensor lists are not simulated yet")
    arrays: dict[str, Any] = {"query": to_numpy(query), "key": to_numpy(key), "value": to_numpy(value)}
    for name, x in optional.items():
        if x is None:
            continue
        arrays[name] = x if isinstance(x, (list, tuple)) else to_numpy(x)
    q = arrays["query"]
    metas = {name: arrays.get(name) for name in ("query", "key", "value", *optional)}
    paged = arrays.get("block_table") is not None
    try:
        out_shape = _out_shape(q.shape, attrs, arrays["value"], paged)
        lse_shape = _lse_shape(q.shape, attrs) if attrs["softmax_lse_flag"] else None
        shape_error = None
    except (ValueError, IndexError, ZeroDivisionError) as exc:
        # the shapes do not fit input_layout (or the layout is unknown): the operator's checkers judge the
        # call with a placeholder output and name the parameter; the query's own shape stands in for it
        out_shape, lse_shape, shape_error = tuple(q.shape), None, exc
    metas["attention_out"] = TensorMeta(out_shape, canonical_dtype(q.dtype))
    if attrs["softmax_lse_flag"] and lse_shape is not None:
        metas["softmax_lse"] = TensorMeta(lse_shape, "float32")
    params = FiaParams.from_api(metas, attrs)
    tiling = tile_fia(params, target)
    if shape_error is not None:
        raise ParamError("input_layout", attrs["input_layout"],
                         f"query {tuple(q.shape)} / value {tuple(arrays['value'].shape)} do not fit the layout "
                         f"({shape_error})", status=AclnnStatus.PARAM_INVALID, checker="api")
    unsupported = [name for name in optional if name in arrays and name not in SUPPORTED_OPTIONAL_INPUTS]
    if unsupported:
        name = unsupported[0]
        reason = _UNSUPPORTED_REASON.get(name, "")
        if len(unsupported) > 1:
            reason += f" (also given and not simulated: {', '.join(unsupported[1:])})"
        raise UnsupportedParameterError(name, _describe(arrays[name]), reason)
    if tiling.route == "fai":
        raise UnsupportedParameterError("input_layout", attrs["input_layout"],
                                        "the arch22 TND split-fuse route (FAI: TND, sparse 0/3/4, inner_precise 0 "
                                        "for GQA) is not simulated; its tiling is not mirrored")
    if not tiling.cores and _has_work(tiling):
        raise UnsupportedParameterError("actual_seq_lengths_kv", list(tiling.kv_seqlens),
                                        f"the {tiling.route}/{tiling.template} tiling gave no core work for this "
                                        f"call: {tiling.extras.get('row_tasks', 'its core split is not mirrored')}")
    qd, kd = canonical_dtype(q.dtype), canonical_dtype(arrays["key"].dtype)
    if qd not in ("float16", "bfloat16") or kd != qd or canonical_dtype(arrays["value"].dtype) != qd:
        raise UnsupportedParameterError("key" if qd in ("float16", "bfloat16") else "query",
                                        f"query {qd}, key {kd}",
                                        "the simulated kernel is the non-quant one: query, key and value float16 "
                                        "or bfloat16, all alike")
    if attrs["sparse_mode"] == 9:
        raise UnsupportedParameterError("sparse_mode", 9, "the tree mask is not simulated")
    return arrays, tiling


def _empty_outputs(q: np.ndarray, v: np.ndarray, attrs: dict, legacy: bool):
    shape = _out_shape(q.shape, attrs, v)
    out = np.zeros(shape, dtype=q.dtype)
    lse = None
    if attrs["softmax_lse_flag"]:
        lse = np.full(_lse_shape(q.shape, attrs), LSE_EMPTY_LEGACY if legacy else LSE_EMPTY, np.float32)
    return out, lse


def _out_shape(qshape, attrs: dict, value, paged: bool = False) -> tuple:
    from .launch import _out_shape as shape_for

    lay = parse_layout(attrs["input_layout"])
    n1 = attrs["num_heads"]
    n2 = attrs["num_key_value_heads"] or n1
    vshape = value.shape
    if paged:
        # a paged cache has its own layout: (blocks, block_size, H) BnBsH, (blocks, N, block_size, D) BnNBsD,
        # or NZ (blocks, N, D/16, block_size, 16)
        dv = vshape[-1] // n2 if len(vshape) == 3 else (vshape[2] * vshape[4] if len(vshape) == 5 else vshape[-1])
    elif lay.qkv == "BSH":
        dv = vshape[-1] // n2 if vshape else 0
    else:
        dv = vshape[-1]
    return shape_for(tuple(qshape), lay.qkv, lay.out, n1, dv)


def _has_work(tiling) -> bool:
    """Some batch has both query rows and KV positions (so an empty core split would drop results)."""
    return any(q > 0 and kv > 0 for q, kv in zip(tiling.q_seqlens, tiling.kv_seqlens))


def _lse_shape(qshape, attrs: dict) -> tuple:
    lay = parse_layout(attrs["input_layout"])
    n1 = attrs["num_heads"]
    if lay.token:
        t = qshape[0] if lay.qkv == "TND" else qshape[1]
        return (t, n1, 1)
    b = qshape[0]
    s = qshape[2] if lay.qkv == "BNSD" else qshape[1]
    return (b, n1, s, 1)


def _describe(x) -> str:
    if isinstance(x, (list, tuple)):
        return f"list of {len(x)}"
    return f"{canonical_dtype(x.dtype)} tensor {tuple(x.shape)}"


def _is_torch(x) -> bool:
    return hasattr(x, "detach") and hasattr(x, "cpu") and type(x).__module__.startswith("torch")


def _to_torch(a: np.ndarray):
    import torch

    if canonical_dtype(a.dtype) == "bfloat16":
        return torch.from_numpy(np.ascontiguousarray(a).view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(a))
