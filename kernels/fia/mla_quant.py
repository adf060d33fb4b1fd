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

from ...tiling.params import canonical_dtype
from ..errors import UnsupportedParameterError
from ..golden.mla_quant import P_RANGE

__all__ = ["MlaQuantSpec", "is_mla_quant", "mla_quant_call", "MLA_QUANT_INPUTS"]

#: the optional inputs the MLA FA-quant kernel consumes beyond the non-quant MLA's
MLA_QUANT_INPUTS = ("dequant_scale_query", "key_antiquant_scale", "value_antiquant_scale")
#: inputs the kernel does not take, with what they are
_NOT_WITH = (("pse_shift", "pse_shift"), ("learnable_sink", "a learnable sink"),
             ("query_padding_size", "left padding"), ("kv_padding_size", "left padding"),
             ("key_shared_prefix", "a shared prefix"), ("key_rope_antiquant_scale", "a rope antiquant scale"))


@dataclass(frozen=True)
class MlaQuantSpec:
    """What the MLA FA-quant kernel reads besides query/key/value: the ropes, the query scales (the query's
    shape less D, plus a unit axis) and the fp32 scalars dk, scale and dv/127."""

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


def mla_quant_call(arrays: dict, attrs: dict, tiling) -> MlaQuantSpec:
    """Check an MLA FA-quant call (module doc) and return its :class:`MlaQuantSpec`."""
    for name, what in _NOT_WITH:
        if name in arrays:
            raise UnsupportedParameterError(name, "given", f"MLA FA quant with {what} is not simulated")
    if tiling.route != "ifa" or tiling.template != "IFATiling" or tiling.extras.get("legacy_ifa", False):
        raise UnsupportedParameterError("dequant_scale_query", "given", "MLA FA quant is simulated on IFATiling's "
                                        f"MLA path; this call tiles to {tiling.route}/{tiling.template}")
    for name in ("key", "value", "key_rope"):
        if getattr(arrays[name], "ndim", 0) != 5 or arrays.get("block_table") is None:
            raise UnsupportedParameterError(name, "given", "MLA FA quant is simulated with paged NZ caches (what "
                                            "op_host requires)")
    dsq = np.asarray(arrays["dequant_scale_query"])      # the query's shape without D (the tiling checked it)
    dsq = dsq.reshape(*dsq.shape, 1)
    dk = _scalar(arrays["key_antiquant_scale"])
    dv = _scalar(arrays["value_antiquant_scale"])
    return MlaQuantSpec(query_rope=arrays["query_rope"], key_rope=arrays["key_rope"], query_scale=dsq,
                        key_scale=dk, scale=np.float32(float(attrs["scale"])),
                        value_scale=np.float32(dv * np.float32(1.0 / P_RANGE)))
