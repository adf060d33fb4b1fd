"""Post-quant (``quant_scale2`` / ``quant_offset2``) of a float64 attention output, as the chip rounds it.

Model
-----
The operator's int8 output is ``quant(out · scale + offset)``: ``out`` the
attention output (float64 here), ``scale`` / ``offset`` one value per tensor
or one per output channel. A per-channel parameter holds ``N1 · DV`` values in
(head, channel) order whatever its shape ((H,) for BSH, (1, N1, 1, DV) or
(N1, DV) otherwise); ``quant`` is the chip's two conversions, each rounding
half away from zero (``CAST_ROUND``): to fp16 (overflow to ±inf), then to int8
saturated to [-128, 127]. A NaN gives 0 (the twin's choice, see the Ascend C
declaration README). Rows of a batch without KV depend on the route (see
``fia_golden``): the FIA framework's output init leaves them 0, the legacy
IFATiling kernel writes ``quant(0 · scale + offset)`` (``InitAllZeroInt8Output``).
"""

from __future__ import annotations

import numpy as np

from .dtypes import to_f64

__all__ = ["post_quant_int8", "round_half_away"]


def round_half_away(x: np.ndarray) -> np.ndarray:
    """Round to an integral value, ties away from zero (NaN and ±inf stay)."""
    x = np.asarray(x, np.float64)
    return np.where(x >= 0, np.floor(x + 0.5), -np.floor(0.5 - x))


def _to_f16_away(x: np.ndarray) -> np.ndarray:
    """float64 -> the float64 value of its fp16 rounding, ties away from zero."""
    with np.errstate(over="ignore", invalid="ignore"):
        r = x.astype(np.float16).astype(np.float64)           # ties to even
        up = np.nextafter(np.abs(r).astype(np.float16), np.float16(np.inf)).astype(np.float64)
        tie = np.isfinite(x) & (np.abs(r) < np.abs(x)) & (up - np.abs(x) == np.abs(x) - np.abs(r))
    return np.where(tie, np.copysign(up, x), r)


def post_quant_int8(out_bnsd: np.ndarray, scale, offset, *, heads_axis: int, num_heads: int) -> np.ndarray:
    """The int8 post-quant of ``out_bnsd`` (heads on ``heads_axis``, channels last) with ``scale`` / ``offset``
    (``offset`` may be None) per tensor or per (head, channel)."""
    out = np.asarray(out_bnsd, np.float64)
    dv = out.shape[-1]

    def param(p):
        a = to_f64(p).reshape(-1)
        if a.size == 1:
            return a[0]
        if a.size != num_heads * dv:
            raise ValueError(f"post-quant parameter of {a.size} values: must be 1 or N1*D = {num_heads * dv}")
        shape = [1] * out.ndim
        shape[heads_axis], shape[-1] = num_heads, dv
        return a.reshape(num_heads, dv).reshape(shape)

    y = out * param(scale)
    if offset is not None:
        y = y + param(offset)
    q = round_half_away(_to_f16_away(y))
    q = np.where(np.isnan(q), 0.0, np.clip(q, -128.0, 127.0))
    return q.astype(np.int8)
