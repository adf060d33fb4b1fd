"""Host side of MLA FA quant on Atlas A2/A3 (int8 query, key and value; ``query_quant_mode`` 3): checks and spec.

Model
-----
op_host (IFATiling's ``ProcessQuant`` / ``SetQuantFlag``, mirrored by ``tiling.checkers.legacy_ifa``) accepts an
int8 query with int8 key/value only as MLA decode: query_rope / key_rope in bf16, D 512, one KV head, a paged
NZ cache, layouts BSH/BSND/TND (not BNSD), ``dequant_scale_query`` with the query's shape less D, per-tensor
(1,) fp32 ``key_antiquant_scale`` / ``value_antiquant_scale`` (V2: ``dequant_scale_key`` / ``_value``), quant
modes 3/0/0, no offsets, no quant_scale1 / dequant_scale1/2. Such a call runs the arch22 kernel
``IncreFlashAttentionAttenPreloadMla`` with Q_T = KV_T = int8 (its tiling keys are OUTBF16 with a paged NZ
cache), simulated by ``kernel_mla_quant.fia_mla_quant``.

:func:`mla_quant_call` runs after op_host accepted the call. It raises ``UnsupportedParameterError`` naming
what the simulated kernel does not model: pse_shift, a learnable sink, left padding, a shared prefix, a rope
antiquant scale, a route or template other than IFATiling's MLA path (op_host's ``CheckQueryQuantParam4FullQuant``,
the query scale's shape, and ``CheckMlaMisc``'s refusal of a post-quantised (int8) output are the tiling
mirror's: ``tiling.checkers.legacy_ifa``). It returns the :class:`MlaQuantSpec` the launch
passes to the kernel: the rope tensors, the query scales as a (…, 1) view, and the scalars the kernel's vector
code takes, each an fp32 as the chip holds it (dk, the softmax scale, and dv · (1/127) as one fp32 product).

Invariants
----------
* Only arch22 calls with an int8 query reach here (``api._check_query_quant`` passes them on); the caller
  skips the rope join (the kernel runs the int8 nope and the bf16 rope as two matmuls).
* Nothing is copied: the spec holds views of the caller's arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...tiling.errors import AclnnStatus, ParamError
from ...tiling.params import canonical_dtype
from ..errors import UnsupportedParameterError
from ..golden.layouts import parse_layout
from ..golden.mla_quant import P_RANGE

__all__ = ["MlaQuantSpec", "is_mla_quant", "mla_quant_call", "mla_query_scales", "refuse_mla_extras",
           "MLA_QUANT_INPUTS"]

#: the optional inputs the MLA FA-quant kernel consumes beyond the non-quant MLA's
MLA_QUANT_INPUTS = ("dequant_scale_query", "key_antiquant_scale", "value_antiquant_scale")
#: inputs the kernel does not take, with what they are
_NOT_WITH = (("quant_scale2", "a post-quantised output (the A2/A3 MLA FA-quant tiling keys and the Ascend950 "
                              "MLA full-quant checks are bf16 output only)"),
             ("pse_shift", "pse_shift"), ("learnable_sink", "a learnable sink"),
             ("query_padding_size", "left padding"), ("kv_padding_size", "left padding"),
             ("key_shared_prefix", "a shared prefix"), ("key_rope_antiquant_scale", "a rope antiquant scale"))


@dataclass(frozen=True)
class MlaQuantSpec:
    """What the MLA quant kernels read besides query/key/value: the ropes, the query scales (the query's shape
    less D, plus a unit axis) and the fp32 scalars dk, scale and the value scale: dv/127 for the A2/A3 MLA FA
    quant, dv itself for the Ascend950 MLA full quant (``mla_fullquant``)."""

    query_rope: np.ndarray
    key_rope: np.ndarray
    query_scale: np.ndarray
    key_scale: np.float32
    scale: np.float32
    value_scale: np.float32


def is_mla_quant(arrays: dict, tiling) -> bool:
    """An arch22 call with an int8 query and the split rope (what op_host lets through as MLA FA quant)."""
    q = arrays.get("query")
    return (tiling.arch == "arch22" and q is not None and canonical_dtype(q.dtype) == "int8"
            and "query_rope" in arrays)


def _scalar(x) -> np.float32:
    return np.float32(np.asarray(x, np.float32).reshape(-1)[0])


def refuse_mla_extras(arrays: dict, what: str) -> None:
    """Raise ``UnsupportedParameterError`` naming the first input of ``_NOT_WITH`` given to an MLA quant call
    (``what`` names the flavour)."""
    for name, extra in _NOT_WITH:
        if name in arrays:
            raise UnsupportedParameterError(name, "given", f"{what} with {extra} is not simulated")


def mla_query_scales(arrays: dict, attrs: dict) -> tuple:
    """(query scales as a (…, 1) view, dk, dv as fp32) of an MLA quant call; a ``dequant_scale_query`` that is
    not the query's shape without D ((B, S, N) for BSH) is op_host's ``CheckQueryQuantParam4FullQuant``
    ``ParamError`` (561002, checker "mla_quant")."""
    dsq = np.asarray(arrays["dequant_scale_query"])
    q = arrays["query"].shape
    want = (*q[:2], int(attrs["num_heads"])) if parse_layout(attrs["input_layout"]).qkv == "BSH" else q[:-1]
    if tuple(dsq.shape) != tuple(want):
        raise ParamError("dequant_scale_query", tuple(dsq.shape), f"with a quantised query its shape is the "
                         f"query's without D, {tuple(want)} (CheckQueryQuantParam4FullQuant)",
                         status=AclnnStatus.INNER_TILING_ERROR, checker="mla_quant")
    return (dsq.reshape(*dsq.shape, 1), _scalar(arrays["key_antiquant_scale"]),
            _scalar(arrays["value_antiquant_scale"]))


def mla_quant_call(arrays: dict, attrs: dict, tiling) -> MlaQuantSpec:
    """Check an MLA FA-quant call (module doc) and return its :class:`MlaQuantSpec`."""
    refuse_mla_extras(arrays, "MLA FA quant")
    if tiling.route != "ifa" or tiling.template != "IFATiling" or tiling.extras.get("legacy_ifa", False):
        raise UnsupportedParameterError("dequant_scale_query", "given", "MLA FA quant is simulated on IFATiling's "
                                        f"MLA path; this call tiles to {tiling.route}/{tiling.template}")
    for name in ("key", "value", "key_rope"):
        if getattr(arrays[name], "ndim", 0) != 5 or arrays.get("block_table") is None:
            raise UnsupportedParameterError(name, "given", "MLA FA quant is simulated with paged NZ caches (what "
                                            "op_host requires)")
    dsq, dk, dv = mla_query_scales(arrays, attrs)
    return MlaQuantSpec(query_rope=arrays["query_rope"], key_rope=arrays["key_rope"], query_scale=dsq,
                        key_scale=dk, scale=np.float32(float(attrs["scale"])),
                        value_scale=np.float32(dv * np.float32(1.0 / P_RANGE)))
