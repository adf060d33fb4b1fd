"""Host side of Ascend950 MXFP8 full quant (FP8 query, key and value with E8M0 group scales; quant modes 6/6/8).

Model
-----
op_host routes an FP8 full-quant call with query/key/value quant modes 6/6/8 to ``FiaTilingFullQuantMxArch35``
(``tiling.route``; its rules are ``tiling.checkers.dequant``'s: TND, D 64/64 or 128/128, float8_e8m0 scales of
the shapes ``golden.fullquant_mx`` lists, dense or paged key/value, ``quant_scale1`` (torch_npu V2's
``quant_scale_p``) float32 (1,)). ``fullquant_mx_call`` runs after op_host accepted the call and returns the
``FullQuantMxSpec`` the launch hands to ``kernel_fullquant_mx.fia_fullquant_mx``: the query and key/value
dequantised with their group scales (``golden.fullquant_mx.mx_dequantised``: what the chip's MX matmuls
multiply) as bf16, which holds every product exactly (an e4m3fn value has 4 significant bits, a scale is a
power of two, bf16 has fp32's exponent range) unless one falls below bf16's normal range (scales near 2^-127)
or overflows; then as fp32 (exact but for overflow; the kernel's second specialisation). ln(quant_scale1) is an
fp32 (0 without it).

Both forms of the query scale run: the prefill's (rank 4, per query head) and the decode's (rank 5
[N2, T, G, D/64, 2]: G folded into S1, op_host's split with stream-K). A stream-K split that cuts a row's KV
across cores (flash decode) has each piece write its normalised partial, max and sum to the workspace, and the
launch merges them with ``kernel.fia_fd_combine`` as the chip's ``FiaBlockVecFlashDecodeFullQuant`` does (an
fp16 output rounded half away from zero, a bf16 one to even). It refuses by name
(``UnsupportedParameterError``) what the kernel does not model: a learnable sink, the tree mask, and a
quant_scale1 that is not a positive finite number (ln of it shifts the softmax max). A PA_NZ cache (op_host's
other paged layout for MXFP8: the FP8 key/value in fractals of 32, the E8M0 scales in fractals of 16 rows,
``bnnbsd_of_nz``) is turned into the BnNBsD cache it holds on the host, where the group scales are applied
anyway: the kernel then reads it paged as BnNBsD (the chip reads the fractals in place; the cost model books
the widened BnNBsD tiles, as it does for every MXFP8 call). A bf16 rope
(``query_rope`` (T, N1, 64), ``key_rope`` in the key's layout; op_host then wants a bf16 output) runs: the
kernel accumulates its scores onto the MX scores, as the chip's cube does in L0C.

Invariants
----------
* The spec's tensors are new arrays of one dtype, bf16 or float32, holding the exact products (the caller's are
  not modified); values beyond the fp32 range (an FP8 value times 2^127) become ±inf.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import UnsupportedParameterError
from ..golden.dtypes import BFLOAT16
from ..golden.fullquant_mx import mx_dequantised
from ..golden.nz import from_nz
from .fullquant_gqa import fp8_p_scale_log

__all__ = ["FullQuantMxSpec", "bnnbsd_of_nz", "fullquant_mx_call", "MX_TEMPLATE"]

#: op_host's template of the MXFP8 full quant
MX_TEMPLATE = "FiaTilingFullQuantMxArch35"


@dataclass(frozen=True)
class FullQuantMxSpec:
    """The kernel's operands: query, key and value dequantised (bf16 or fp32) in their own shapes, ln(quant_scale1)
    as an fp32, and the bf16 ``query_rope`` / ``key_rope`` as given (None without rope)."""

    query: np.ndarray
    key: np.ndarray
    value: np.ndarray
    ln_p: np.float32
    query_rope: np.ndarray | None = None
    key_rope: np.ndarray | None = None


def fullquant_mx_call(arrays: dict, attrs: dict, tiling) -> FullQuantMxSpec:
    """Check an MXFP8 full-quant call op_host accepted (see the module docstring); return its spec."""
    dq = arrays["dequant_scale_query"]
    paged = arrays.get("block_table") is not None
    key, value, ks, vs, key_rope = (arrays.get(name) for name in ("key", "value", "key_antiquant_scale",
                                                                   "value_antiquant_scale", "key_rope"))
    if paged and np.ndim(key) == 5:
        key, value, ks, vs, key_rope = bnnbsd_of_nz(key, value, ks, vs, key_rope)
    ln_p = fp8_p_scale_log(arrays, attrs, tiling, "MXFP8")
    with np.errstate(over="ignore", invalid="ignore"):
        exact = mx_dequantised(arrays["query"], key, value, dq, ks, vs, tiling.kv_seqlens, paged)
        q, k, v = (x.astype(BFLOAT16) for x in exact)
        if not all(np.array_equal(w.astype(np.float64), x, equal_nan=True) for w, x in zip((q, k, v), exact)):
            q, k, v = (x.astype(np.float32) for x in exact)
    return FullQuantMxSpec(query=q, key=k, value=v, ln_p=ln_p, query_rope=arrays.get("query_rope"),
                           key_rope=key_rope)


def bnnbsd_of_nz(key, value, key_scale, value_scale, key_rope=None) -> tuple:
    """An MXFP8 PA_NZ cache as the BnNBsD one it holds: key / value (blocks, N2, D/32, bs, 32) -> (blocks, N2,
    bs, D); the key scale (blocks, N2, bs/16, D/64, 16, 2) -> (blocks, N2, bs, D/64, 2) (each 16 positions' pairs
    of D groups, position-minor); the value scale (blocks, N2, Dv/16, bs/64, 16, 2) -> (blocks, N2, bs/64, Dv, 2)
    (each 16 channels' pairs of 32-position groups, channel-minor); a bf16 key_rope (blocks, N2, Dr/16, bs, 16) ->
    (blocks, N2, bs, Dr). Copies; the caller's tensors are not modified."""
    def scale_rows(x, rows_axis):   # the 16-row fractal axis back next to its outer axis
        order = (0, 1, 2, 4, 3, 5) if rows_axis == 2 else (0, 1, 3, 2, 4, 5)
        y = np.asarray(x).transpose(order)
        return y.reshape(y.shape[0], y.shape[1], y.shape[2], y.shape[3] * y.shape[4], 2) if rows_axis == 3 else \
            y.reshape(y.shape[0], y.shape[1], y.shape[2] * y.shape[3], y.shape[4], 2)

    k, v = (from_nz(x) for x in (key, value))
    kr = from_nz(key_rope) if key_rope is not None and np.ndim(key_rope) == 5 else key_rope
    return k, v, scale_rows(key_scale, 2), scale_rows(value_scale, 3), kr
