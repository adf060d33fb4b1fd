"""IncreFlashAttention (IFA, decode): ``npu_incre_flash_attention`` and the aclnn-level ``incre_flash_attention_v3``.

Model
-----
IFA is the decode-only operator that FusedInferAttentionScore absorbed: the same attention with the query
length fixed to 1, no lse output and a few renamed parameters. Both entry points check the call against
the IFA constraints below, then run exactly the FIA call it maps to (``npu_fused_infer_attention_score``:
the same checks, tiling routes, kernels and numbers) and return its ``attention_out`` only:

=====================  ==========================  =======================================================
IFA (torch_npu)        aclnnIncreFlashAttentionV3  FIA (V1) parameter
=====================  ==========================  =======================================================
actual_seq_lengths     actualSeqLengths            actual_seq_lengths_kv (IFA's lengths are the KV lengths)
scale_value            scaleValue                  scale
block_table            blocktable                  block_table
pse_shift, atten_mask  pseShift, attenMask         same
kv_padding_size        (V4 only)                   kv_padding_size
num_heads, ...         numHeads, numKeyValueHeads, same (inner_precise defaults to 1 here)
                       inputLayout, blockSize,
                       innerPrecise
padding_mask           -                           reserved by torch_npu: UnsupportedParameterError
(fixed)                (fixed)                     sparse_mode 0, pre/next tokens INT_MAX, no lse
=====================  ==========================  =======================================================

The IFA constraints (aclnnIncreFlashAttentionV3 document, Atlas A2 column; torch_npu's API calls the V4
operator, which takes the same parameters plus ``kv_padding_size``), checked in this order, each a
``ParamError`` naming the parameter (by the caller's names: torch_npu's for ``npu_incre_flash_attention``,
aclnn's for ``incre_flash_attention_v3``), the value and the rule:

1. query, key, value present (161001);
2. dtypes and layout (161002, the aclnn layer's "data type or format not supported"): query fp16/bf16;
   key/value fp16/bf16/int8, one dtype; attention_out fp16/bf16/int8 (int8 only as post-quant output,
   otherwise the query's dtype); pse_shift the query's dtype; atten_mask bool/int8/uint8 with int8/uint8
   values 0/1; dequant scales uint64/fp32; quant_scale1 fp32; quant_scale2/quant_offset2 fp32 (or bf16
   with a bf16 query); antiquant scale/offset the query's dtype; block_table int32; input_layout BSH, BSND
   or BNSD;
3. shapes and values (561002, the IFA tiling's check): query rank of its layout; B <= 65536, N <= 256,
   D <= 512; the query's S axis is 1; num_heads equals the query's N (BSH: divides H); num_key_value_heads
   (0 = num_heads) divides num_heads and equals the heads of key/value; key and value of one shape;
   attention_out (aclnn) of the query's shape; inner_precise 0 or 1;
4. output quantisation: an int8 output needs quant_scale2 and forbids dequant_scale1, quant_scale1 and
   dequant_scale2 (quant_offset2 optional, with quant_scale2's dtype and shape; per-tensor (1) or per-channel
   with N*D elements); a non-int8 output takes no quant_scale2/quant_offset2; dequant_scale1, quant_scale1
   and dequant_scale2 are for an int8 query, which this operator does not take;
5. antiquantisation: antiquant_scale/offset of shape (2) per tensor or, per channel, (2, N, 1, D) for BNSD,
   (2, N, D) for BSND, (2, H) for BSH, N = num_key_value_heads, H = N*D; offset with the scale's shape; int8
   key/value need antiquant_scale;
6. page attention (block_table given): block_size in (0, 512], a multiple of 16 (fp16/bf16 cache) or 32
   (int8); actual_seq_lengths given; block_table 2-D with B rows and at least ceil(max kv length /
   block_size) columns; the cache (blocks, block_size, H) for every query layout or (blocks, N, block_size,
   D) for BNSD, key and value of one shape, blocks >= the blocks the lengths need, and for
   (blocks, block_size, H) num_key_value_heads * D <= 65535.

A call that passes them and asks for what the simulator does not model raises
``UnsupportedParameterError`` naming the parameter: ``padding_mask`` (reserved by torch_npu). KV
antiquantisation (an int8 cache with ``antiquant_scale``/``antiquant_offset``, per tensor or per channel,
dense or paged) runs as FIA's ``antiquant_mode`` 0 with the same tensors. A key/value tensor list of several
batches runs (``kv_list``). Errors
from the FIA body are renamed to the caller's keywords (``actual_seq_lengths_kv`` -> ``actual_seq_lengths`` / ``actualSeqLengths``).

Invariants
----------
* The output is bitwise the ``attention_out`` of ``npu_fused_infer_attention_score(**ifa_to_fia(...))``.
* Nothing given is ignored: every parameter is checked, mapped, or refused by name.
"""

from __future__ import annotations

import math
from numbers import Integral

import numpy as np

from ...tiling.errors import AclnnStatus, ParamError
from ...tiling.params import canonical_dtype, host_list_values
from ...tiling.platform import DEFAULT_TARGET
from ..errors import UnsupportedParameterError
from ..golden.dtypes import to_numpy
from .api import npu_fused_infer_attention_score
from .keywords import inverse, renamed

__all__ = ["npu_incre_flash_attention", "incre_flash_attention_v3", "ifa_to_fia", "check_ifa", "ACLNN_V3_NAMES",
           "IFA_LIMITS"]

INT_MAX = 2147483647
#: Atlas A2 limits of the seed document: B, N and D axes of the query
IFA_LIMITS = {"B": 65536, "N": 256, "D": 512}
_BLOCK_SIZE_MAX = 512
_BSH_CACHE_H_MAX = 65535
_LAYOUTS = ("BSH", "BSND", "BNSD")

#: torch_npu IFA keyword -> FIA (V1) keyword, where they differ
_IFA_TO_FIA = {"actual_seq_lengths": "actual_seq_lengths_kv", "scale_value": "scale"}
#: aclnnIncreFlashAttentionV3 parameter -> torch_npu IFA keyword
ACLNN_V3_NAMES = {
    "query": "query", "key": "key", "value": "value", "pseShift": "pse_shift", "attenMask": "atten_mask",
    "actualSeqLengths": "actual_seq_lengths", "dequantScale1": "dequant_scale1", "quantScale1": "quant_scale1",
    "dequantScale2": "dequant_scale2", "quantScale2": "quant_scale2", "quantOffset2": "quant_offset2",
    "antiquantScale": "antiquant_scale", "antiquantOffset": "antiquant_offset", "blocktable": "block_table",
    "numHeads": "num_heads", "scaleValue": "scale_value", "inputLayout": "input_layout",
    "numKeyValueHeads": "num_key_value_heads", "blockSize": "block_size", "innerPrecise": "inner_precise",
    "attentionOut": "attention_out",
}
_TORCH_TO_ACLNN = inverse(ACLNN_V3_NAMES)
#: FIA's names of this operator's parameters -> torch_npu IFA's
_FIA_TO_IFA = inverse(_IFA_TO_FIA)


def npu_incre_flash_attention(
        query, key, value, *, padding_mask=None, atten_mask=None, pse_shift=None, actual_seq_lengths=None,
        antiquant_scale=None, antiquant_offset=None, block_table=None, dequant_scale1=None, quant_scale1=None,
        dequant_scale2=None, quant_scale2=None, quant_offset2=None, kv_padding_size=None, num_heads=1,
        scale_value=1.0, input_layout="BSH", num_key_value_heads=0, block_size=0, inner_precise=1,
        target: str = DEFAULT_TARGET, order: str = "program"):
    """torch_npu's IncreFlashAttention on the simulator (see the module docstring); returns ``attention_out``."""
    given = dict(locals())
    if padding_mask is not None:
        raise UnsupportedParameterError("padding_mask", _describe(padding_mask),
                                        "reserved by torch_npu (the operator has no padding mask)")
    call = {k: v for k, v in given.items() if k not in ("padding_mask", "target", "order")}
    return _run(call, target, order, names=None)


def incre_flash_attention_v3(
        query, key, value, pseShift=None, attenMask=None, actualSeqLengths=None, dequantScale1=None,
        quantScale1=None, dequantScale2=None, quantScale2=None, quantOffset2=None, antiquantScale=None,
        antiquantOffset=None, blocktable=None, numHeads=1, scaleValue=1.0, inputLayout="BSH", numKeyValueHeads=0,
        blockSize=0, innerPrecise=1, attentionOut=None, *, target: str = DEFAULT_TARGET, order: str = "program"):
    """``aclnnIncreFlashAttentionV3GetWorkspaceSize`` + ``aclnnIncreFlashAttentionV3`` on the simulator.

    The parameters are the seed's, in its order (``key``/``value`` a tensor or a tensor list; optional
    tensors default to nullptr, attributes to the document's recommended values). ``attentionOut``, when
    given, fixes the output dtype and shape and receives the result; the result is also returned. Bad
    input raises ``ParamError`` with the aclnn status, naming the aclnn parameter."""
    given = dict(locals())
    call = {ACLNN_V3_NAMES[k]: v for k, v in given.items() if k in ACLNN_V3_NAMES}
    call["kv_padding_size"] = None
    out = _run(call, target, order, names=_TORCH_TO_ACLNN)
    if attentionOut is not None:
        dst = attentionOut
        if hasattr(dst, "copy_") and not isinstance(dst, np.ndarray):
            dst.copy_(out)
        else:
            dst[...] = out
    return out


def ifa_to_fia(call: dict) -> dict:
    """The ``npu_fused_infer_attention_score`` keywords (query, key, value included) of an IFA call given by
    torch_npu IFA names: lengths as the KV lengths, ``scale_value`` as ``scale``, no lse, sparse 0."""
    kw = {_IFA_TO_FIA.get(k, k): v for k, v in call.items()
          if k not in ("attention_out", "padding_mask") and v is not None}
    kw.update(sparse_mode=0, pre_tokens=INT_MAX, next_tokens=INT_MAX, softmax_lse_flag=False)
    return kw


def _run(call: dict, target: str, order: str, names: dict | None):
    """Check (raising under the caller's names), then run the mapped FIA call and return attention_out."""
    call = dict(call)
    try:
        call["key"], call["value"] = _unlist(call["key"], "key"), _unlist(call["value"], "value")
        check_ifa(call)
        out, _ = npu_fused_infer_attention_score(**ifa_to_fia(call), target=target, order=order)
    except (ParamError, UnsupportedParameterError) as err:
        err = renamed(err, _FIA_TO_IFA)
        raise (renamed(err, names) if names else err) from None
    return out


def _unlist(x, name: str):
    """A tensor list of one tensor is that tensor; a longer list stays (the FIA body reads it per batch)."""
    if isinstance(x, (list, tuple)):
        if not x:
            _invalid(name, "empty list", "a key/value tensor list must hold at least one tensor")
        return x[0] if len(x) == 1 else list(x)
    return x


# ---------------------------------------------------------------------------------------------- checks
def _invalid(name, value, rule):
    raise ParamError(name, value, rule, status=AclnnStatus.PARAM_INVALID, checker="ifa")


def _tiling(name, value, rule):
    raise ParamError(name, value, rule, status=AclnnStatus.INNER_TILING_ERROR, checker="ifa")


def _meta(x) -> tuple[tuple, str] | None:
    if x is None:
        return None
    return tuple(int(v) for v in x.shape), canonical_dtype(x.dtype)


def _as_list(x) -> list:
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _is_int(x) -> bool:
    return isinstance(x, Integral) and not isinstance(x, bool)


def _describe(x) -> str:
    m = _meta(x) if hasattr(x, "shape") else None
    return f"{m[1]} tensor {m[0]}" if m else repr(x)


def check_ifa(call: dict) -> None:
    """The IFA constraints of the module docstring on a call given by torch_npu IFA names (plus
    ``attention_out``, the aclnn output tensor, when there is one). Raises ``ParamError``."""
    for name in ("query", "key", "value"):
        if call.get(name) is None:
            raise ParamError(name, None, f"{name} is required", status=AclnnStatus.PARAM_NULLPTR, checker="ifa")
    c = _IfaCheck(call)
    c.dtypes()
    c.shapes()
    c.post_quant()
    c.antiquant()
    c.page_attention()


class _IfaCheck:
    """One IFA call being checked: the tensors' metadata and the axes read from the query's layout."""

    def __init__(self, call: dict):
        self.call = call
        self.layout = call.get("input_layout")
        self.q = _meta(call["query"])
        self.keys = [_meta(t) for t in _as_list(call["key"])]
        self.values = [_meta(t) for t in _as_list(call["value"])]
        self.k, self.v = self.keys[0], self.values[0]
        self.paged = call.get("block_table") is not None
        out = call.get("attention_out")
        if out is not None:
            self.out = _meta(out)
        else:   # torch_npu infers it: int8 with quant_scale2, else the query's dtype and shape
            self.out = (self.q[0], "int8" if call.get("quant_scale2") is not None else self.q[1])

    def m(self, name):
        return _meta(self.call.get(name))

    # ---- 2: dtypes and layout (aclnn, 161002)
    def dtypes(self) -> None:
        qd = self.q[1]
        if qd not in ("float16", "bfloat16"):
            _invalid("query", qd, "query must be float16 or bfloat16")
        for name, metas in (("key", self.keys), ("value", self.values)):
            for _, dt in metas:
                if dt not in ("float16", "bfloat16", "int8"):
                    _invalid(name, dt, f"{name} must be float16, bfloat16 or int8")
        if self.v[1] != self.k[1]:
            _invalid("value", self.v[1], f"key and value must have one dtype (key is {self.k[1]})")
        od = self.out[1]
        if od not in ("float16", "bfloat16", "int8"):
            _invalid("attention_out", od, "attention_out must be float16, bfloat16 or int8")
        if od != "int8" and od != qd:
            _invalid("attention_out", od, f"attention_out must have the query's dtype ({qd}) unless it is the "
                     "int8 output of post quantisation")
        pse = self.m("pse_shift")
        if pse and pse[1] != qd:
            _invalid("pse_shift", pse[1], f"pse_shift must have the query's dtype ({qd})")
        self._mask()
        for name, allowed in (("dequant_scale1", ("uint64", "float32")), ("dequant_scale2", ("uint64", "float32")),
                              ("quant_scale1", ("float32",))):
            t = self.m(name)
            if t and t[1] not in allowed:
                _invalid(name, t[1], f"{name} must be {' or '.join(allowed)}")
        for name in ("quant_scale2", "quant_offset2"):
            t = self.m(name)
            if t and not (t[1] == "float32" or (t[1] == "bfloat16" and qd == "bfloat16")):
                _invalid(name, t[1], f"{name} must be float32 (or bfloat16 with a bfloat16 query; query is {qd})")
        for name in ("antiquant_scale", "antiquant_offset"):
            t = self.m(name)
            if t and t[1] != qd:
                _invalid(name, t[1], f"{name} must have the query's dtype ({qd})")
        bt = self.m("block_table")
        if bt and bt[1] != "int32":
            _invalid("block_table", bt[1], "block_table must be int32")
        if self.call.get("actual_seq_lengths") is not None:
            host_list_values("actual_seq_lengths", self.call["actual_seq_lengths"])
        if not isinstance(self.layout, str) or self.layout not in _LAYOUTS:
            _invalid("input_layout", self.layout, f"input_layout must be one of {', '.join(_LAYOUTS)}")

    def _mask(self) -> None:
        mask = self.call.get("atten_mask")
        if mask is None:
            return
        dt = canonical_dtype(mask.dtype)
        if dt not in ("bool", "int8", "uint8"):
            _invalid("atten_mask", dt, "atten_mask must be bool, int8 or uint8")
        if dt != "bool":
            vals = to_numpy(mask)
            if vals.size and not np.isin(vals, (0, 1)).all():
                bad = vals[~np.isin(vals, (0, 1))].reshape(-1)[0]
                _invalid("atten_mask", f"{dt} tensor {tuple(vals.shape)} holding {int(bad)}",
                         "an int8/uint8 atten_mask must hold only 0 and 1")

    # ---- 3: shapes and values (IFA tiling, 561002)
    def shapes(self) -> None:
        call, (qs, _) = self.call, self.q
        rank = 3 if self.layout == "BSH" else 4
        if len(qs) != rank:
            _tiling("query", qs, f"input_layout {self.layout} needs a {rank}-D query")
        n = call.get("num_heads")
        if not _is_int(n) or n <= 0:
            _tiling("num_heads", n, "num_heads must be a positive int")
        b = qs[0]
        if self.layout == "BSH":
            s, h = qs[1], qs[2]
            if h % n:
                _tiling("num_heads", n, f"num_heads must divide H of query ({h}) for input_layout BSH")
            heads, d = n, h // n
        elif self.layout == "BSND":
            s, heads, d = qs[1], qs[2], qs[3]
        else:
            heads, s, d = qs[1], qs[2], qs[3]
        self.b, self.d = b, d
        if b > IFA_LIMITS["B"]:
            _tiling("query", qs, f"B ({b}) must be <= {IFA_LIMITS['B']}")
        if n > IFA_LIMITS["N"]:
            _tiling("num_heads", n, f"N ({n}) must be <= {IFA_LIMITS['N']}")
        if d > IFA_LIMITS["D"]:
            _tiling("query", qs, f"D ({d}) must be <= {IFA_LIMITS['D']}")
        if s != 1:
            _tiling("query", qs, f"the S axis of query must be 1 (got {s}): IncreFlashAttention is decode only")
        if heads != n:
            _tiling("num_heads", n, f"num_heads must equal the N axis of query {qs} ({heads})")
        n2 = call.get("num_key_value_heads")
        if not _is_int(n2) or n2 < 0:
            _tiling("num_key_value_heads", n2, "num_key_value_heads must be an int >= 0 (0: num_heads)")
        n2 = n2 or n
        if n % n2:
            _tiling("num_key_value_heads", n2, f"num_heads ({n}) must be a multiple of num_key_value_heads")
        self.n, self.n2 = n, n2
        for i, (k, v) in enumerate(zip(self.keys, self.values)):
            if k[0] != v[0]:
                _tiling("value", v[0], f"key and value tensors must have one shape (key {i} is {k[0]})")
        if len(self.keys) != len(self.values):
            _tiling("value", len(self.values), f"key and value lists must have one length ({len(self.keys)})")
        if not self.paged:
            self._contiguous_kv()
        if self.call.get("attention_out") is not None and self.out[0] != qs:
            _tiling("attention_out", self.out[0], f"attention_out must have the query's shape {qs}")
        ip = call.get("inner_precise")
        if not _is_int(ip) or ip not in (0, 1):
            _tiling("inner_precise", ip, "inner_precise must be 0 (high precision) or 1 (high performance)")

    def _contiguous_kv(self) -> None:
        ks = self.k[0]
        rank = 3 if self.layout == "BSH" else 4
        if len(self.keys) > 1:
            if len(self.keys) != self.b:
                _tiling("key", f"list of {len(self.keys)}", f"a key/value tensor list needs B ({self.b}) tensors")
            if self.b > 256:
                _tiling("key", f"list of {len(self.keys)}", "a key/value tensor list holds at most 256 tensors")
        for i, (shape, _) in enumerate(self.keys):
            if len(shape) != rank:
                _tiling("key", shape, f"input_layout {self.layout} needs {rank}-D key/value")
            if len(self.keys) > 1 and shape[0] != 1:
                _tiling("key", shape, f"tensor {i} of a key/value list must have batch 1")
        if self.layout == "BSH":
            if ks[2] != self.n2 * self.d:
                _tiling("key", ks, f"H of key must be num_key_value_heads * D ({self.n2} x {self.d})")
        else:
            heads, d = (ks[2], ks[3]) if self.layout == "BSND" else (ks[1], ks[3])
            if heads != self.n2:
                _tiling("num_key_value_heads", self.n2, f"the N axis of key {ks} ({heads}) must equal "
                        "num_key_value_heads (0: num_heads)")
            if d != self.d:
                _tiling("key", ks, f"the D axis of key ({d}) must equal that of query ({self.d})")

    # ---- 4: post quantisation
    def post_quant(self) -> None:
        scale, offset = self.m("quant_scale2"), self.m("quant_offset2")
        if self.out[1] == "int8":
            if scale is None:
                _tiling("quant_scale2", None, "an int8 attention_out needs quant_scale2")
            for name in ("dequant_scale1", "quant_scale1", "dequant_scale2"):
                if self.m(name) is not None:
                    _tiling(name, _describe(self.call[name]), "must be absent (nullptr) with an fp16/bf16 "
                            "query and an int8 attention_out")
        else:
            for name, t in (("quant_scale2", scale), ("quant_offset2", offset)):
                if t is not None:
                    _tiling(name, _describe(self.call[name]), f"{name} needs an int8 attention_out (output "
                            f"is {self.out[1]})")
            for name in ("dequant_scale1", "quant_scale1", "dequant_scale2"):
                if self.m(name) is not None:
                    _tiling(name, _describe(self.call[name]), "only an int8 query takes it (query is "
                            f"{self.q[1]}; this operator takes fp16/bf16 queries)")
        if scale is None:
            return
        if offset is not None and offset != scale:
            _tiling("quant_offset2", offset, f"quant_offset2 must have quant_scale2's dtype and shape {scale}")
        count = math.prod(scale[0])
        if count not in (1, self.n * self.d):
            what = "H" if self.layout == "BSH" else "N*D"
            _tiling("quant_scale2", scale[0], f"quant_scale2 must be per-tensor (1 element) or per-channel with "
                    f"{what} = {self.n * self.d} elements")

    # ---- 5: antiquantisation
    def antiquant(self) -> None:
        scale, offset = self.m("antiquant_scale"), self.m("antiquant_offset")
        if scale is None:
            if offset is not None:
                _tiling("antiquant_offset", offset[0], "antiquant_offset needs antiquant_scale")
            if self.k[1] == "int8":
                _tiling("antiquant_scale", None, "int8 key/value need antiquant_scale")
            return
        per_channel = {"BNSD": (2, self.n2, 1, self.d), "BSND": (2, self.n2, self.d),
                       "BSH": (2, self.n2 * self.d)}[self.layout]
        if scale[0] not in ((2,), per_channel):
            _tiling("antiquant_scale", scale[0], f"antiquant_scale must be (2,) per tensor or {per_channel} per "
                    f"channel for input_layout {self.layout} (N = num_key_value_heads {self.n2}, D {self.d})")
        if offset is not None and offset[0] != scale[0]:
            _tiling("antiquant_offset", offset[0], f"antiquant_offset must have antiquant_scale's shape {scale[0]}")

    # ---- 6: page attention
    def page_attention(self) -> None:
        if not self.paged:
            return
        call = self.call
        bs = call.get("block_size")
        kd = self.k[1]
        align = 32 if kd == "int8" else 16
        if not _is_int(bs) or bs <= 0 or bs > _BLOCK_SIZE_MAX or bs % align:
            _tiling("block_size", bs, f"with block_table, block_size must be in (0, {_BLOCK_SIZE_MAX}] and a "
                    f"multiple of {align} for a {kd} cache")
        if call.get("actual_seq_lengths") is None:
            _tiling("actual_seq_lengths", None, "page attention needs actual_seq_lengths (the KV lengths)")
        lens = list(host_list_values("actual_seq_lengths", call["actual_seq_lengths"]))
        bt = self.m("block_table")[0]
        need_cols = math.ceil(max(lens, default=0) / bs)
        if len(bt) != 2 or bt[0] != self.b or bt[1] < need_cols:
            _tiling("block_table", bt, f"block_table must be 2-D (B = {self.b}, >= {need_cols} = ceil(max "
                    f"actual_seq_lengths / block_size)) columns")
        ks = self.k[0]
        if len(self.keys) > 1:
            _tiling("key", f"list of {len(self.keys)}", "page attention takes one key/value cache tensor")
        if len(ks) == 3:
            if ks[1] != bs or ks[2] != self.n2 * self.d:
                _tiling("key", ks, f"a (blocks, block_size, H) cache must be (blocks, {bs}, {self.n2 * self.d})")
            if ks[2] > _BSH_CACHE_H_MAX:
                _tiling("key", ks, f"a (blocks, block_size, H) cache needs num_key_value_heads * D <= "
                        f"{_BSH_CACHE_H_MAX} (use the (blocks, N, block_size, D) cache or fewer kv heads)")
        elif len(ks) == 4 and self.layout == "BNSD":
            if ks[1:] != (self.n2, bs, self.d):
                _tiling("key", ks, f"a (blocks, N, block_size, D) cache must be (blocks, {self.n2}, {bs}, {self.d})")
        else:
            allowed = "(blocks, block_size, H) or (blocks, N, block_size, D)" if self.layout == "BNSD" \
                else "(blocks, block_size, H)"
            _tiling("key", ks, f"with input_layout {self.layout} the paged cache must be {allowed}")
        per_batch = lens * self.b if len(lens) == 1 else lens[:self.b]
        need = sum(math.ceil(max(0, n) / bs) for n in per_batch)
        if ks[0] < need:
            _tiling("key", ks, f"the cache holds {ks[0]} blocks, the KV lengths need {need}")

