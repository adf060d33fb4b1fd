"""Float64 goldens of RingAttentionUpdate and AttentionUpdate (merging partial attention results).

RingAttentionUpdate (aclnnRingAttentionUpdate, torch_npu.npu_ring_attention_update), per softmax row
(SBH: (b, n, s); TND: (t, n)) and for each of the trailing 8 statistics:

    softmax_max = max(prev_max, cur_max)
    softmax_sum = prev_sum · exp(prev_max - softmax_max) + cur_sum · exp(cur_max - softmax_max)
    attn_out    = prev_out · prev_sum · exp(prev_max - softmax_max) / softmax_sum
                + cur_out  · cur_sum  · exp(cur_max  - softmax_max) / softmax_sum

The operator document prints the second and third formula without the sum factors (``prev_sum ·`` of the
output term, ``cur_sum ·`` of both); the operator's kernel, the op-plugin test golden and MindSpeed's
reference implementation all multiply by them, and without them the merge is not a softmax merge, so
this golden follows the kernel. The attn weight of a row is taken from its statistic 0 (the 8 values are
equal by contract; the chip reads them cyclically, lane d using value d mod 8). Layouts: SBH attn
(S, B, N·D) with softmax (B, N, S, 8); TND attn (T, N, D) with softmax shaped (T, N, 8) but laid out per
batch as (N, S_b, 8) by default (softmax layout "" / "SBH"), or as (T, N, 8) itself (``input_softmax_layout
"TND"``).

AttentionUpdate (torch_npu.npu_attention_update) merges K (O, lse) partials:

    lse_max = max_i lse_i;  L = Σ exp(lse_i - lse_max);  lse_m = lse_max + log L;  O = Σ O_i · exp(lse_i - lse_m)

with rows every partial of which is empty (lse -inf) giving O = 0, lse -inf.

Everything is float64 with no guard, so NaN and ±inf inputs propagate as the formulas say. One concession
to the chip's number range (``fp32_range``, on by default): a rescale factor exp(x) that float32 cannot
hold as a normal number (x < ln 2⁻¹²⁶ ≈ -87.34) is 0, as the vector unit's exp flushes it; this changes
nothing beyond 1e-38 except products with ±inf inputs (inf · 0 = NaN on the chip, not inf).
"""

from __future__ import annotations

import numpy as np

from .dtypes import to_f64, to_numpy

__all__ = ["ring_attention_update_golden", "attention_update_golden", "softmax_rows_bns8", "FP32_EXP_FLUSH"]

#: exp(x) below the smallest normal float32 is flushed to 0 by the vector unit: x < ln(2**-126).
FP32_EXP_FLUSH = float(np.log(np.float64(2.0) ** -126))


def _exp(x: np.ndarray, fp32_range: bool) -> np.ndarray:
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        e = np.exp(x)
    if fp32_range:
        e = np.where(x < FP32_EXP_FLUSH, 0.0, e)
    return e


def softmax_rows_bns8(sm: np.ndarray, cu_seqlens) -> np.ndarray:
    """The (T, N, 8) view of a TND softmax tensor laid out per batch as (N, S_b, 8) (the default layout)."""
    t, n, k = sm.shape
    flat = sm.reshape(-1, k)
    out = np.empty_like(sm)
    cu = [int(v) for v in np.asarray(cu_seqlens).reshape(-1)]
    for b in range(len(cu) - 1):
        s0, s1 = cu[b], cu[b + 1]
        out[s0:s1] = flat[s0 * n:s1 * n].reshape(n, s1 - s0, k).transpose(1, 0, 2)
    return out


def _from_rows_bns8(rows: np.ndarray, cu_seqlens) -> np.ndarray:
    """Inverse of :func:`softmax_rows_bns8`."""
    t, n, k = rows.shape
    out = np.empty_like(rows)
    flat = out.reshape(-1, k)
    cu = [int(v) for v in np.asarray(cu_seqlens).reshape(-1)]
    for b in range(len(cu) - 1):
        s0, s1 = cu[b], cu[b + 1]
        flat[s0 * n:s1 * n] = rows[s0:s1].transpose(1, 0, 2).reshape(-1, k)
    return out


def ring_attention_update_golden(prev_attn_out, prev_softmax_max, prev_softmax_sum, cur_attn_out, cur_softmax_max,
                                 cur_softmax_sum, *, actual_seq_qlen=None, input_layout: str = "SBH",
                                 input_softmax_layout: str = "", fp32_range: bool = True, **_ignored):
    """``(attn_out, softmax_max, softmax_sum)`` in float64, attn_out in the attn layout's shape."""
    o1, o2 = to_f64(prev_attn_out, "prev_attn_out"), to_f64(cur_attn_out, "cur_attn_out")
    m1, l1 = to_f64(prev_softmax_max), to_f64(prev_softmax_sum)
    m2, l2 = to_f64(cur_softmax_max), to_f64(cur_softmax_sum)
    bns8 = input_layout == "TND" and input_softmax_layout != "TND"
    if bns8:
        cu = to_numpy(actual_seq_qlen)
        m1, l1, m2, l2 = (softmax_rows_bns8(x, cu) for x in (m1, l1, m2, l2))
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        m = np.maximum(m1, m2)
        s1 = l1 * _exp(m1 - m, fp32_range)
        s2 = l2 * _exp(m2 - m, fp32_range)
        total = s1 + s2
        w1, w2 = s1[..., 0] / total[..., 0], s2[..., 0] / total[..., 0]
        if input_layout == "TND":        # rows (T, N), attn (T, N, D)
            out = o1 * w1[..., None] + o2 * w2[..., None]
        else:                            # rows (B, N, S), attn (S, B, N*D)
            s, b, h = o1.shape
            n = m.shape[1]
            f1 = w1.transpose(2, 0, 1)[..., None]          # (S, B, N, 1)
            f2 = w2.transpose(2, 0, 1)[..., None]
            out = (o1.reshape(s, b, n, h // n) * f1 + o2.reshape(s, b, n, h // n) * f2).reshape(s, b, h)
    if bns8:
        m, total = _from_rows_bns8(m, cu), _from_rows_bns8(total, cu)
    return out, m, total


def attention_update_golden(lse_list, out_list, update_type: int = 0, *, fp32_range: bool = True, **_ignored):
    """``(out, lse_out)`` in float64 (lse_out None when ``update_type`` is 0)."""
    lse = np.stack([to_f64(x).reshape(-1) for x in lse_list])            # (K, R)
    outs = np.stack([to_f64(x).reshape(lse.shape[1], -1) for x in out_list])   # (K, R, D)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        top = lse.max(axis=0)
        empty = top == -np.inf
        shift = np.where(empty, 0.0, top)
        e = _exp(lse - shift, fp32_range)
        total = e.sum(axis=0)
        lse_m = np.where(empty, -np.inf, shift + np.log(np.where(empty, 1.0, total)))
        w = np.where(empty, 0.0, e / np.where(empty, 1.0, total))
        out = (outs * w[..., None]).sum(axis=0)
    return out, (lse_m if int(update_type) == 1 else None)
