"""The parameter record of FusedInferAttentionScore: every input's metadata and every attribute.

Model
-----
``FiaParams`` is what op_host sees in its tiling context: for each of the 31
inputs and 2 outputs a ``TensorMeta`` (shape, dtype, format, and for the
host-side integer lists their values) or ``None`` when the optional input is
absent, plus the 16 attributes. It is built alike from a user's operator call
(:meth:`FiaParams.from_api`) and from one row of the upstream op_host unit-test
CSV (:meth:`FiaParams.from_csv_row`), so the checkers, routes and core split run
on exactly one representation.

Invariants
----------
* dtypes are canonical lower-case names (see ``DTYPES``); unknown names are
  kept verbatim in upper case so a checker can reject them by name.
* ``key``/``value`` hold the first tensor of a tensor list; ``key_list`` /
  ``value_list`` hold all of them (length 1 when not a list). ``value_as_read`` is
  what op_host's dtype and format checks read as value (the second key tensor of a list).
* The record is metadata only; tensors' contents (but the integer lists) are
  never read here.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, fields, replace
from numbers import Integral
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from .errors import AclnnStatus, ParamError

__all__ = ["TensorMeta", "FiaParams", "INPUT_NAMES", "OUTPUT_NAMES", "ATTR_DEFAULTS", "DTYPES",
           "canonical_dtype", "dtype_size_bits", "host_list_values"]

#: Canonical dtype names and their widths in bits.
DTYPES = {
    "float16": 16, "bfloat16": 16, "float32": 32, "float64": 64,
    "int4": 4, "int8": 8, "int16": 16, "int32": 32, "int64": 64,
    "uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64, "bool": 8,
    "float8_e4m3fn": 8, "float8_e5m2": 8, "float8_e8m0": 8, "hifloat8": 8, "float4_e2m1": 4,
    "complex64": 64,
}

_ALIASES = {
    "fp16": "float16", "half": "float16", "float16": "float16",
    "bf16": "bfloat16", "bfloat16": "bfloat16",
    "fp32": "float32", "float": "float32", "float32": "float32",
    "fp64": "float64", "double": "float64", "float64": "float64",
    "int4": "int4", "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
    "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
    "bool": "bool", "float8_e4m3fn": "float8_e4m3fn", "fp8_e4m3fn": "float8_e4m3fn", "fp8_e4m3": "float8_e4m3fn",
    "float8_e5m2": "float8_e5m2", "fp8_e5m2": "float8_e5m2", "float8_e8m0": "float8_e8m0",
    "float8_e8m0fnu": "float8_e8m0", "hifloat8": "hifloat8", "hif8": "hifloat8",
    "float4_e2m1": "float4_e2m1", "float4_e2m1fn": "float4_e2m1", "complex64": "complex64",
}


#: dtype names the op_host unit-test CSV loader understands (anything else reaches the tiling as "undefined").
CSV_DTYPE_NAMES = {
    "FLOAT": "float32", "FLOAT16": "float16", "BF16": "bfloat16", "DOUBLE": "float64", "INT4": "int4",
    "INT8": "int8", "INT16": "int16", "INT32": "int32", "INT64": "int64", "UINT8": "uint8", "UINT16": "uint16",
    "UINT32": "uint32", "UINT64": "uint64", "BOOL": "bool", "COMPLEX64": "complex64", "HIFLOAT8": "hifloat8",
    "FLOAT8_E5M2": "float8_e5m2", "FLOAT8_E4M3FN": "float8_e4m3fn", "FLOAT8_E8M0": "float8_e8m0",
    "FLOAT4_E2M1": "float4_e2m1", "UNDEFINED": "undefined",
}
#: other names the loader knows; they keep their own (lower-case) name
_CSV_OTHER_DTYPES = ("STRING", "DUAL_SUB_INT8", "DUAL_SUB_UINT8", "COMPLEX128", "QINT8", "QINT16", "QINT32", "QUINT8",
                     "QUINT16", "RESOURCE", "STRING_REF", "DUAL", "VARIANT", "UINT1", "INT2", "UINT2", "COMPLEX32",
                     "FLOAT6_E3M2", "FLOAT6_E2M3", "FLOAT4_E1M2")


def csv_dtype(cell: str) -> str:
    """The dtype a UT CSV cell names, as the harness loader reads it: only its own names are known (``FLOAT`` is
    float32; e.g. ``FLOAT32`` is not a loader name and arrives as ``"undefined"``)."""
    key = (cell or "").strip()
    if key in CSV_DTYPE_NAMES:
        return CSV_DTYPE_NAMES[key]
    return key.lower() if key in _CSV_OTHER_DTYPES else "undefined"


def memo_numpy_dtypes(fn):
    """``fn(dtype)`` memoised for numpy dtype objects by identity (a numpy dtype is immutable; reading its
    ``name`` runs Python code in numpy, microseconds a call, and an operator call names a dozen dtypes).
    The memo holds the dtype itself, so the identity it is keyed by cannot be reused; anything that is not a
    numpy dtype is passed straight to ``fn``."""
    memo: dict = {}

    @functools.wraps(fn)
    def named(dtype):
        if not isinstance(dtype, np.dtype):
            return fn(dtype)
        hit = memo.get(id(dtype))
        if hit is not None and hit[0] is dtype:
            return hit[1]
        out = fn(dtype)
        if len(memo) >= 512:
            memo.clear()
        memo[id(dtype)] = (dtype, out)
        return out

    return named


@memo_numpy_dtypes
def canonical_dtype(name: Any) -> str:
    """The canonical name of a dtype given as a string, numpy/ml_dtypes dtype or torch dtype."""
    s = str(getattr(name, "name", name)) if not isinstance(name, str) else name
    s = s.replace("torch.", "").strip()
    key = s.lower()
    return _ALIASES.get(key, s.upper())


def dtype_size_bits(dtype: str) -> int:
    return DTYPES.get(dtype, 0)


@dataclass(frozen=True)
class TensorMeta:
    """Shape, dtype and format of one tensor; ``data`` holds the values of host-side integer lists."""

    shape: tuple[int, ...]
    dtype: str
    format: str = "ND"
    data: tuple[int, ...] | None = None
    #: element strides of a non-contiguous view (None: contiguous / not given)
    stride: tuple[int, ...] | None = None
    #: how many of ``stride`` the runtime reports as the stride rank (None: all of them). The op_host
    #: unit-test harness builds strides with a setter that leaves the rank one short of the values given,
    #: so CSV rows carry ``len(stride) - 1`` here (see ``FiaParams.from_csv_row``).
    stride_rank: int | None = None

    @property
    def stride_dims(self) -> int:
        """The stride rank the tiling sees (0 when no stride metadata is attached)."""
        if self.stride is None:
            return 0
        return len(self.stride) if self.stride_rank is None else self.stride_rank

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def to_dict(self) -> dict:
        d = {"shape": list(self.shape), "dtype": self.dtype, "format": self.format}
        if self.data is not None:
            d["data"] = list(self.data)
        if self.stride is not None:
            d["stride"] = list(self.stride)
        return d


#: The operator's inputs, in op-proto order (aclnn V4/V5).
INPUT_NAMES = (
    "query", "key", "value", "pse_shift", "atten_mask", "actual_seq_lengths", "actual_seq_lengths_kv",
    "dequant_scale1", "quant_scale1", "dequant_scale2", "quant_scale2", "quant_offset2",
    "antiquant_scale", "antiquant_offset", "block_table", "query_padding_size", "kv_padding_size",
    "key_antiquant_scale", "key_antiquant_offset", "value_antiquant_scale", "value_antiquant_offset",
    "key_shared_prefix", "value_shared_prefix", "actual_shared_prefix_len", "query_rope", "key_rope",
    "key_rope_antiquant_scale", "dequant_scale_query", "learnable_sink", "q_start_idx", "kv_start_idx",
)
OUTPUT_NAMES = ("attention_out", "softmax_lse")

#: Attributes with the torch_npu defaults (the op proto defaults inner_precise to 1; torch_npu passes 0).
ATTR_DEFAULTS = {
    "num_heads": 1, "scale": 1.0, "pre_tokens": 2147483647, "next_tokens": 2147483647,
    "input_layout": "BSH", "num_key_value_heads": 0, "sparse_mode": 0, "inner_precise": 0,
    "block_size": 0, "antiquant_mode": 0, "softmax_lse_flag": False, "key_antiquant_mode": 0,
    "value_antiquant_mode": 0, "query_quant_mode": 0, "pse_type": 0, "out_dtype": 0,
}

#: Integer-list inputs whose values the host reads.
_HOST_LISTS = frozenset(("actual_seq_lengths", "actual_seq_lengths_kv", "actual_shared_prefix_len", "q_start_idx",
                         "kv_start_idx"))
_TENSOR_NAMES = frozenset(INPUT_NAMES + OUTPUT_NAMES)


@dataclass(frozen=True)
class FiaParams:
    query: TensorMeta | None = None
    key: TensorMeta | None = None
    value: TensorMeta | None = None
    pse_shift: TensorMeta | None = None
    atten_mask: TensorMeta | None = None
    actual_seq_lengths: TensorMeta | None = None
    actual_seq_lengths_kv: TensorMeta | None = None
    dequant_scale1: TensorMeta | None = None
    quant_scale1: TensorMeta | None = None
    dequant_scale2: TensorMeta | None = None
    quant_scale2: TensorMeta | None = None
    quant_offset2: TensorMeta | None = None
    antiquant_scale: TensorMeta | None = None
    antiquant_offset: TensorMeta | None = None
    block_table: TensorMeta | None = None
    query_padding_size: TensorMeta | None = None
    kv_padding_size: TensorMeta | None = None
    key_antiquant_scale: TensorMeta | None = None
    key_antiquant_offset: TensorMeta | None = None
    value_antiquant_scale: TensorMeta | None = None
    value_antiquant_offset: TensorMeta | None = None
    key_shared_prefix: TensorMeta | None = None
    value_shared_prefix: TensorMeta | None = None
    actual_shared_prefix_len: TensorMeta | None = None
    query_rope: TensorMeta | None = None
    key_rope: TensorMeta | None = None
    key_rope_antiquant_scale: TensorMeta | None = None
    dequant_scale_query: TensorMeta | None = None
    learnable_sink: TensorMeta | None = None
    q_start_idx: TensorMeta | None = None
    kv_start_idx: TensorMeta | None = None
    attention_out: TensorMeta | None = None
    softmax_lse: TensorMeta | None = None
    key_list: tuple[TensorMeta, ...] = ()
    value_list: tuple[TensorMeta, ...] = ()
    # attributes
    num_heads: int = 1
    scale: float = 1.0
    pre_tokens: int = 2147483647
    next_tokens: int = 2147483647
    input_layout: str = "BSH"
    num_key_value_heads: int = 0
    sparse_mode: int = 0
    inner_precise: int = 0
    block_size: int = 0
    antiquant_mode: int = 0
    softmax_lse_flag: bool = False
    key_antiquant_mode: int = 0
    value_antiquant_mode: int = 0
    query_quant_mode: int = 0
    pse_type: int = 0
    out_dtype: int = 0
    # provenance (a CSV case name, or "api")
    source: str = field(default="", compare=False)

    # ------------------------------------------------------------------ views
    @property
    def is_tensor_list(self) -> bool:
        return len(self.key_list) > 1

    @property
    def value_as_read(self) -> "TensorMeta | None":
        """The tensor op_host's tiling reads as "value": its flattened input 2 (``GetInputDesc(VALUE_INDEX)``
        counts tensor instances), which is the second key tensor of a key/value tensor list."""
        return self.key_list[1] if len(self.key_list) > 1 else self.value

    def present(self, name: str) -> bool:
        return getattr(self, name) is not None

    def tensors(self) -> dict[str, TensorMeta]:
        """The present inputs and outputs by name."""
        return {n: getattr(self, n) for n in INPUT_NAMES + OUTPUT_NAMES if getattr(self, n) is not None}

    def attrs(self) -> dict[str, Any]:
        return {n: getattr(self, n) for n in ATTR_DEFAULTS}

    def with_(self, **changes) -> "FiaParams":
        return replace(self, **changes)

    def to_dict(self) -> dict:
        d = {n: t.to_dict() for n, t in self.tensors().items()}
        if self.is_tensor_list:
            d["key_list"] = [t.to_dict() for t in self.key_list]
            d["value_list"] = [t.to_dict() for t in self.value_list]
        d.update(self.attrs())
        return d

    # ------------------------------------------------------------ builders
    @classmethod
    def from_csv_row(cls, row: Mapping[str, str]) -> "FiaParams":
        """Build from one row of the upstream op_host tiling UT CSV (column format of
        ``tests/ut/op_host/arch*/test_fused_infer_attention_score_tiling.csv``).

        A tensor is present when its ``<name>_shape`` cell is non-empty (the harness drops
        tensors of rank 0 whatever their dtype cell says). Tensor lists are written
        ``"1 3 80|1 4 80"``. ``<name>_data`` cells hold host-list values; a host list with a
        shape but no data cell reaches the tiling with no data (op_host's "tiling sink").
        Dtype cells are read with the loader's own name table (``csv_dtype``).
        ``<name>_stride`` cells give view strides; the harness's stride setter reports a rank
        one less than the number of values, which ``TensorMeta.stride_rank`` records.
        """
        kw: dict[str, Any] = {"source": row.get("case_name", "")}
        for name in INPUT_NAMES + OUTPUT_NAMES:
            shape_s = (row.get(f"{name}_shape") or "").strip()
            if not shape_s:
                continue
            dtype = csv_dtype(row.get(f"{name}_dtype") or "")
            fmt = (row.get(f"{name}_format") or "ND").strip() or "ND"
            if "|" in shape_s and name in ("key", "value"):
                metas = tuple(TensorMeta(_ints(s), dtype, fmt) for s in shape_s.split("|"))
                kw[f"{name}_list"] = metas
                kw[name] = metas[0]
                continue
            data_s = (row.get(f"{name}_data") or "").strip()
            data = _ints(data_s) if data_s else None
            stride_s = (row.get(f"{name}_stride") or "").strip()
            stride = _ints(stride_s) if stride_s else None
            stride_rank = max(len(stride) - 1, 0) if stride else None
            kw[name] = TensorMeta(_ints(shape_s), dtype, fmt, data, stride, stride_rank)
        for attr, default in ATTR_DEFAULTS.items():
            cell = (row.get(attr) or "").strip()
            if cell == "":
                continue
            kw[attr] = _coerce(default, cell)
        for name in ("key", "value"):
            if kw.get(name) is not None and f"{name}_list" not in kw:
                kw[f"{name}_list"] = (kw[name],)
        return cls(**kw)

    @classmethod
    def from_api(cls, tensors: Mapping[str, Any], attrs: Mapping[str, Any], *, source: str = "api") -> "FiaParams":
        """Build from an operator call: ``tensors`` maps input/output names to arrays
        (numpy, ml_dtypes, torch; anything with ``shape`` and ``dtype``), Python int lists
        for the host lists, sequences of arrays for tensor lists, or ``None``;
        ``attrs`` maps attribute names to values.
        """
        kw: dict[str, Any] = {"source": source}
        for name, obj in tensors.items():
            if name not in _TENSOR_NAMES:
                raise KeyError(f"unknown FusedInferAttentionScore tensor {name!r}")
            if obj is None:
                continue
            if name in ("key", "value") and isinstance(obj, (list, tuple)):
                metas = tuple(meta_of(t) for t in obj)
                if not metas:
                    continue
                kw[f"{name}_list"] = metas
                kw[name] = metas[0]
                continue
            kw[name] = meta_of(obj, host_list=name in _HOST_LISTS, name=name)
        for name in ("key", "value"):
            if kw.get(name) is not None and f"{name}_list" not in kw:
                kw[f"{name}_list"] = (kw[name],)
        for attr, value in attrs.items():
            if attr not in ATTR_DEFAULTS:
                raise KeyError(f"unknown FusedInferAttentionScore attribute {attr!r}")
            kw[attr] = value
        return cls(**kw)


def meta_of(obj: Any, *, host_list: bool = False, name: str = "") -> TensorMeta:
    """TensorMeta of an array-like; an int sequence becomes a 1-D int64 host list (``host_list_values``
    checks its values; ``name`` is the parameter named in the error)."""
    if isinstance(obj, TensorMeta):
        return obj
    if isinstance(obj, (list, tuple, str, bytes)) or (host_list and not hasattr(obj, "shape")):
        vals = host_list_values(name or "host list", obj)
        return TensorMeta((len(vals),), "int64", "ND", vals)
    shape = tuple(int(d) for d in obj.shape)
    dtype = canonical_dtype(obj.dtype)
    data = None
    if host_list:
        data = host_list_values(name or "host list", obj)
    return TensorMeta(shape, dtype, "ND", data)


def host_list_values(name: str, obj: Any) -> tuple[int, ...]:
    """The values of an ``int[]`` parameter (a list/tuple of ints or an integer array), as torch_npu's binding
    takes them; anything else (a string, None, a fractional or non-numeric element) raises ``ParamError``
    (aclnn 161002) naming the parameter."""
    rule = "must be a list of ints (torch_npu: int[]) or an integer array"
    if isinstance(obj, (str, bytes)) or not (hasattr(obj, "__iter__") or hasattr(obj, "tolist")):
        raise ParamError(name, obj, f"{rule}, not {type(obj).__name__}", status=AclnnStatus.PARAM_INVALID,
                         checker="binding")
    vals = []
    for k, v in enumerate(_to_list(obj)):
        if isinstance(v, bool) or not isinstance(v, Integral):
            raise ParamError(name, _to_list(obj), f"{rule}: element {k} is {v!r} ({type(v).__name__})",
                             status=AclnnStatus.PARAM_INVALID, checker="binding")
        vals.append(int(v))
    return tuple(vals)


def _to_list(obj) -> Iterable:
    if hasattr(obj, "tolist"):
        out = obj.tolist()
        return out if isinstance(out, list) else [out]
    return list(obj)


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(float(t)) for t in text.replace(",", " ").split())


def _coerce(default: Any, cell: str) -> Any:
    if isinstance(default, bool):
        return cell.strip().lower() in ("1", "true")
    if isinstance(default, int):
        return int(float(cell))
    if isinstance(default, float):
        return float(cell)
    return cell


def _field_names() -> Sequence[str]:
    return [f.name for f in fields(FiaParams)]
