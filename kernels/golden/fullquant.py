"""Full int8 quantisation (int8 query, key and value) of one attention block, in float64.

Model
-----
The operator's full-quant attention (``dequant_scale1``, ``quant_scale1``, ``dequant_scale2``, all per
tensor) for int8 q, k, v::

    s   = deq1 · (q·kᵀ) · scale (+ pse)        masked pairs -> -inf    (q·kᵀ exact: int8 products in float64)
    m   = rowmax(s);  e = exp(s - m);  l = Σ e
    p8  = sat8(round(e · qs1))                 (round half away from zero, saturated to [-128, 127])
    out = deq2 · (p8 · v) / l,   lse = m + ln(l)

so P is quantised against the row max before P·V while l is the sum of the unquantised e, as the chip keeps
it. With ``kv_block`` the row is taken in KV blocks of that many columns as the chip's online softmax takes
it: e and p8 of a block are against the running max, and the earlier output and sum are rescaled by
exp(m_old - m_new) (float64 throughout). One block that covers the row is the formula above.

``dequant_value`` reads a dequant scale as the chip applies it: the fp32 whose bits are a float32 tensor's
bits, or the low 32 bits of a uint64 tensor's first element (the docs' encoding), truncated to its high 19
bits (sign, exponent and 10 mantissa bits): the kernel hands the value to the matmul's ``SetQuantScalar``,
whose fixpipe keeps ``scale & 0xFFFFE000`` (Ascend C's SetQuantScalar documentation). deq1 and deq2 above
are these values.

Invariants
----------
* Inputs hold integers (int8 values as float64); no input is modified.
* A row that sees no key gives output 0 and lse +inf (:mod:`.attend`'s convention).
"""

from __future__ import annotations

import numpy as np

from .attend import block_dims, empty_block
from .dtypes import to_numpy
from .quant import round_half_away

__all__ = ["attend_fullquant", "dequant_value", "online_quantised", "FULLQUANT_SCALES", "LN2_F32", "INV_LN2_F32"]

#: the full-quant scales, all per tensor
FULLQUANT_SCALES = ("dequant_scale1", "quant_scale1", "dequant_scale2")


#: the fp32 ln 2 and 1 / ln 2 the MXFP8 kernel aligns its running max with
LN2_F32, INV_LN2_F32 = 0.6931471824645996, 1.4426950216293335

#: the scale bits the fixpipe keeps (sign, exponent, the top 10 mantissa bits)
FIXPIPE_SCALE_MASK = 0xFFFFE000


def dequant_value(x) -> float:
    """The fp32 a per-tensor dequant scale multiplies by on the chip: a float32 tensor's value, or the fp32
    held in the low 32 bits of a uint64 tensor, truncated to the fixpipe's 19 bits."""
    a = np.ascontiguousarray(to_numpy(x)).reshape(-1)
    if a.dtype == np.uint64:
        bits = np.array([a[0] & np.uint64(0xFFFFFFFF)], np.uint64).astype(np.uint32)
    else:
        bits = np.array([a[0]], np.float32).view(np.uint32)
    return float((bits & np.uint32(FIXPIPE_SCALE_MASK)).view(np.float32)[0])


def attend_fullquant(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, *, deq1: float, qs1: float,
                     deq2: float, kv_block: int | None = None, bias: np.ndarray | None = None,
                     keep: np.ndarray | None = None, sink=None, p_dtype=None):
    """Full-quant attention of ``q [hq, r, D]`` over ``k [h, c, D]``, ``v [h, c, Dv]`` (int8 values as
    float64; signature of :func:`.attend.attend`). Returns ``(out [hq, r, Dv], lse [hq, r])``. ``p_dtype``
    may only be None or int8 (P is int8 here by definition); a sink is not part of full quant."""
    if sink is not None:
        raise ValueError("learnable_sink: not modelled with full quant")
    if p_dtype not in (None, "int8") and str(np.dtype(p_dtype)) != "int8":
        raise ValueError(f"p_dtype {p_dtype!r}: full quant multiplies an int8 P")
    hq, r, h, c, d, dv, g = block_dims(q, k, v)
    if c == 0 or r == 0:
        return empty_block(hq, r, dv)
    s = np.matmul(q.reshape(h, g * r, d), k.transpose(0, 2, 1)).reshape(hq, r, c) * (deq1 * scale)
    if bias is not None:
        s = s + np.asarray(bias, np.float64)
    if keep is not None:
        s[:, ~keep] = -np.inf
    step = c if kv_block is None else int(kv_block)

    def block_pv(e, j0):
        p8 = np.clip(round_half_away(e * qs1), -128.0, 127.0)
        return np.matmul(p8.reshape(h, g * r, -1), v[:, j0:j0 + step]).reshape(hq, r, dv) * deq2

    return online_quantised(s, step, block_pv)


def online_quantised(s: np.ndarray, step: int, block_pv, shift: float = 0.0, align_ln2: bool = False):
    """The online softmax of the scores ``s [hq, r, c]`` (c > 0; masked pairs -inf) in blocks of ``step`` columns,
    as the full-quant kernels take a row: per block, m' = max(m, rowmax(s_blk) - shift), e = exp(s_blk - m'),
    l = l·exp(m - m') + Σ e, o = o·exp(m - m') + ``block_pv(e, j0)`` (the block's P·V from its unquantised e,
    quantised as the caller's operator does). With ``align_ln2`` the block's row max is first rounded up to a whole
    multiple of ln 2 (the MXFP8 kernel's ``ceil(max · INV_LN2) · LN2`` with the chip's fp32 constants, so that
    the rescale of an earlier block's P is a power of two). Returns ``(out = o / l, lse = m + ln l)``; a row
    that saw no key gives 0 and +inf; a NaN in a row's scores gives NaN."""
    hq, r, c = s.shape
    gm = np.full((hq, r), -np.inf)
    gl = np.zeros((hq, r))
    go = 0.0
    for j0 in range(0, c, step):
        blk = s[..., j0:j0 + step]
        bm = blk.max(axis=-1)
        if align_ln2:
            bm = np.ceil(bm * INV_LN2_F32) * LN2_F32
        hm = np.maximum(gm, bm - shift)
        ms = np.where(np.isneginf(hm), 0.0, hm)
        e = np.exp(blk - ms[..., None])
        dm = np.exp(gm - ms)
        gl = gl * dm + e.sum(axis=-1)
        go = go * dm[..., None] + block_pv(e, j0)
        gm = hm
    valid = gl != 0   # a NaN sum (a NaN scale or score) propagates, as on the chip
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(valid[..., None], go / np.where(valid, gl, 1.0)[..., None], 0.0)
        lse = np.where(valid, gm + np.log(np.where(valid, gl, 1.0)), np.inf)
    return out, lse
