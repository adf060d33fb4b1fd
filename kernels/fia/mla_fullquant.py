"""Host side of MLA full quant on Ascend950 (FP8 or int8 query and latent cache; quant modes 3/0/0): checks and spec.

Model
-----
op_host (the dequant checker, mirrored by ``tiling.checkers.dequant``: "MLA full quant") accepts a quantised
query (float8_e4m3fn, int8 or hifloat8, the key/value alike) with bf16 ``query_rope`` / ``key_rope``, D 512,
one KV head, G a power of two up to 128, a bf16 output, ``dequant_scale_query`` with the query's shape less D and
per-tensor (1,) float32 ``key_antiquant_scale`` / ``value_antiquant_scale``, quant modes 3/0/0 (int8: only a
paged NZ cache, ``CheckFeatureMLAFullquant``; not BNSD), and routes it to the catch-all template
``FusedInferAttentionScoreTilingImpl`` (64 rows of G·S1, S2 blocks of 128), whose kernel for it is
``FABlockVecInferMlaFullquant``, simulated by ``kernel_mla_fullquant.fia_mla_fullquant`` (its QUANT "fp8" or
"int8"). A paged cache of any of BnBsH, BnNBsD and NZ (``paLayoutType`` 1 / 0 / 2) is read as the chip's paged
copy into L1 reads it.

:func:`mla_fullquant_call` runs after op_host accepted the call. It refuses by name
(``UnsupportedParameterError``) what the simulated kernel does not model: a HiFloat8 query (``query``: no call
reaches op_host with one, as the V2 binding here takes no ``query_dtype`` override, and the kernel's P cast to
HiF8 against 32768 with CAST_ROUND is not simulated), a post-quantised output (``quant_scale2``), and through
``fullquant_gqa.fp8_p_scale_log`` a learnable sink and the tree mask (sparse_mode 9), and flash-decode splits
(``fullquant_gqa.refuse_flash_decode``; the catch-all gives the rope none, so no call reaches it). It
returns the ``mla_quant.MlaQuantSpec`` the launch hands to the kernel (on an arch35 tiling): the rope tensors,
the query scales as a (…, 1) view and the key / value scales and softmax scale as fp32.

Invariants
----------
* Only arch35 calls with a quantised query and the split rope on the catch-all template reach here
  (``is_mla_fullquant``); the caller skips the rope join (the kernel runs the quantised nope and the bf16 rope
  as two matmuls into one accumulator).
* Nothing is copied: the spec holds views of the caller's arrays.
"""

from __future__ import annotations

import numpy as np

from ...tiling.params import canonical_dtype
from ..errors import UnsupportedParameterError
from .fullquant_gqa import fp8_p_scale_log, refuse_flash_decode
from .mla_quant import MlaQuantSpec, mla_query_scales, refuse_mla_extras

__all__ = ["is_mla_fullquant", "mla_fullquant_call", "MLA_FQ_TEMPLATE"]

#: op_host's template an Ascend950 MLA full-quant call tiles to
MLA_FQ_TEMPLATE = "FusedInferAttentionScoreTilingImpl"
#: what the simulator makes of the HiFloat8 flavour op_host takes
_HIF8_REFUSED = ("the chip's HiFloat8 path (P cast to HiF8 against 32768, CAST_ROUND) is not simulated, and no "
                 "call reaches it: the V2 binding takes no query_dtype override (a HiF8 query is uint8 codes)")


def is_mla_fullquant(arrays: dict, tiling) -> bool:
    """An arch35 call with a quantised query (float8_e4m3fn, int8, hifloat8), its ``dequant_scale_query`` and the
    split rope on the catch-all template: what op_host lets through as the MLA full quant."""
    q = arrays.get("query")
    return (tiling.arch == "arch35" and tiling.template == MLA_FQ_TEMPLATE and q is not None
            and "query_rope" in arrays and "dequant_scale_query" in arrays
            and canonical_dtype(q.dtype) in ("float8_e4m3fn", "int8", "hifloat8", "uint8"))


def mla_fullquant_call(arrays: dict, attrs: dict, tiling) -> MlaQuantSpec:
    """Check an Ascend950 MLA full-quant call (module doc) and return its ``mla_quant.MlaQuantSpec`` (the value
    scale dv itself: the kernel multiplies by 1/448, or 1/127, on its own)."""
    qd = canonical_dtype(arrays["query"].dtype)
    if qd not in ("float8_e4m3fn", "int8"):
        raise UnsupportedParameterError("query", "hifloat8", f"MLA full quant with the hifloat8 query: "
                                        f"{_HIF8_REFUSED}; cvtile runs the float8_e4m3fn and int8 ones")
    refuse_mla_extras(arrays, "MLA full quant on Ascend950")
    refuse_flash_decode(tiling, "MLA")
    fp8_p_scale_log(arrays, attrs, tiling, "MLA")
    dsq, dk, dv = mla_query_scales(arrays, attrs)
    return MlaQuantSpec(query_rope=arrays["query_rope"], key_rope=arrays["key_rope"], query_scale=dsq,
                        key_scale=dk, scale=np.float32(float(attrs["scale"])), value_scale=dv)
