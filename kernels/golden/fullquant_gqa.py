"""Ascend950 FP8 full quant on the GQA route (FP8 query, key and value; quant modes 3/3/2), in float64.

Model
-----
The operator's per-token-head full quant (``FiaTilingFullQuantGqaArch35``): float8_e4m3fn q, k, v with

* ``dequant_scale_query`` per token and query head (the NTD_TND call's (N1, T) tensor),
* ``key_antiquant_scale`` per token and kv head (the paged cache's (block_num, N2, block_size) tensor),
* ``value_antiquant_scale`` per kv head ((N2,)),
* ``quant_scale1`` (torch_npu V2's ``quant_scale_p``, default 1) the scale P takes before its FP8 cast.

For one kv head's block (q [hq, r, D], k [h, c, D], v [h, c, Dv] as float64 values of FP8 codes)::

    s   = (q·kᵀ) · (dq·scale) · dk         masked pairs -> -inf    (q·kᵀ exact in float64)
    per KV block of ``kv_block`` columns (the chip's S2 base, 256), with the running max m and sum l:
        m'  = max(m, rowmax(s_blk) - ln(p_scale));   e = exp(s_blk - m')
        l   = l · exp(m - m') + Σ e
        p8  = fp8(e)                       (RNE onto the e4m3fn grid, saturated to ±448)
        o   = o · exp(m - m') + (p8 · v) · dv
    out = o / l,   lse = m + ln(l)

as the upstream pytest golden (``fia_fullquant_gqa_golden.py``'s CPU golden) and the chip compute it: P is
quantised against the running max lowered by ln(p_scale) (so e <= p_scale), the sum is the unquantised e's,
the value scale multiplies P·V. The p_scale factor cancels between o and l; it only sets P's FP8 range. ln(p_scale) is taken as the fp32 the
chip's ``Ln`` gives: a row's max element has e = exp(ln p_scale), which for a p_scale on an FP8 tie (100 =
12.5 · 8) falls on the side that fp32 logarithm puts it.
The upstream golden normalises o at every block and adds 1e-20 to the sum; the two differ from this one by
rounding only (float64 here).

Invariants
----------
* Inputs are float64 values (FP8 codes widened exactly); no input is modified.
* A row that sees no key gives output 0 and lse +inf (:mod:`.attend`'s convention).
"""

from __future__ import annotations

from types import SimpleNamespace

import ml_dtypes
import numpy as np

from .attend import block_dims, empty_block
from .fullquant import online_quantised
from .masks import INT_MAX, MaskEngine, mask_template

__all__ = ["attend_fp8_gqa", "fp8_e4m3", "fullquant_gqa_reference", "FP8_MAX", "KV_BLOCK"]

#: the largest finite float8_e4m3fn
FP8_MAX = 448.0
#: the chip's S2 block of the FP8 GQA template (sInner 256): P is quantised against the running max per block
KV_BLOCK = 256


def fp8_e4m3(x) -> np.ndarray:
    """x rounded to the float8_e4m3fn grid (ties to even), saturated to ±448, as float64 (the chip's
    ``Cast`` with CAST_RINT and SAT)."""
    x = np.clip(np.asarray(x, np.float64), -FP8_MAX, FP8_MAX)
    return x.astype(ml_dtypes.float8_e4m3fn).astype(np.float64)


def attend_fp8_gqa(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, *, deq_q: np.ndarray,
                   deq_k: np.ndarray, deq_v: np.ndarray, p_scale: float = 1.0, keep: np.ndarray | None = None,
                   kv_block: int | None = KV_BLOCK):
    """FP8 full-quant attention of ``q [hq, r, D]`` over ``k [h, c, D]``, ``v [h, c, Dv]`` (FP8 values as
    float64) with ``deq_q [hq, r]``, ``deq_k [h, c]``, ``deq_v [h]`` and ``keep`` ([r, c] or [hq, r, c], True =
    visible; None: all). ``kv_block`` None takes the row as one block. Returns ``(out [hq, r, Dv], lse
    [hq, r])``."""
    hq, r, h, c, d, dv, g = block_dims(q, k, v)
    if c == 0 or r == 0:
        return empty_block(hq, r, dv)
    qk = np.matmul(q.reshape(h, g * r, d), k.transpose(0, 2, 1)).reshape(hq, r, c)
    kh = np.repeat(np.asarray(deq_k, np.float64), g, axis=0)            # [hq, c]
    s = qk * (np.asarray(deq_q, np.float64) * scale)[..., None] * kh[:, None, :]
    if keep is not None:
        s = np.where(np.broadcast_to(keep, s.shape), s, -np.inf)
    vh = np.repeat(v, g, axis=0)                                          # [hq, c, dv]
    dvh = np.repeat(np.asarray(deq_v, np.float64).reshape(-1), g)        # [hq]
    step = c if kv_block is None else int(kv_block)

    def block_pv(e, j0):
        return np.matmul(fp8_e4m3(e), vh[:, j0:j0 + step]) * dvh[:, None, None]

    return online_quantised(s, step, block_pv, shift=float(np.log(np.float32(p_scale))))


def fullquant_gqa_reference(query, key, value, block_table, deq_q, deq_k, deq_v, *, qlens, kvlens, scale: float,
                            num_heads: int, num_kv_heads: int, p_scale: float = 1.0, sparse_mode: int = 0,
                            pre_tokens: int = INT_MAX, next_tokens: int = INT_MAX, kv_block: int | None = KV_BLOCK):
    """The documented NTD_TND call in float64: ``query`` (N1, T, D) FP8, ``key`` / ``value`` (block_num, N2,
    block_size, D) FP8 paged caches read through ``block_table`` (B, max blocks), ``deq_q`` (N1, T), ``deq_k``
    (block_num, N2, block_size), ``deq_v`` (N2,); ``qlens`` / ``kvlens`` per batch (not cumulative). Sparse
    modes 0 (no mask) and 2/3/4 (the compressed mask's bands, ``masks.MaskEngine``) with pre/next tokens.
    Returns ``(out (T, N1, Dv), lse (T, N1, 1))``."""
    engine = MaskEngine(sparse_mode=sparse_mode, atten_mask=None if sparse_mode == 0 else mask_template(),
                        pre_tokens=pre_tokens, next_tokens=next_tokens, batch=len(qlens), decode=False,
                        legacy_decode=False, token_layout=True, left_padding=False)
    q = np.asarray(query).astype(np.float64)
    kc = np.asarray(key).astype(np.float64)
    vc = np.asarray(value).astype(np.float64)
    dq = np.asarray(deq_q, np.float64)
    dk = np.asarray(deq_k, np.float64)
    bs = kc.shape[2]
    t_total = q.shape[1]
    out = np.zeros((t_total, num_heads, vc.shape[-1]))
    lse = np.full((t_total, num_heads, 1), np.inf)
    t0 = 0
    for b, (s1, s2) in enumerate(zip(qlens, kvlens)):
        s1, s2 = int(s1), int(s2)
        if s1 == 0:
            continue
        nblk = -(-s2 // bs)
        ids = np.asarray(block_table[b][:nblk], np.int64)
        kb = kc[ids].transpose(1, 0, 2, 3).reshape(num_kv_heads, nblk * bs, -1)[:, :s2]
        vb = vc[ids].transpose(1, 0, 2, 3).reshape(num_kv_heads, nblk * bs, -1)[:, :s2]
        dkb = dk[ids].transpose(1, 0, 2).reshape(num_kv_heads, nblk * bs)[:, :s2]
        keep = engine.keep(SimpleNamespace(b=b, s1=s1, s2=s2, q0=t0, k0=0), 0, s1)
        o, l_ = attend_fp8_gqa(q[:, t0:t0 + s1], kb, vb, scale, deq_q=dq[:, t0:t0 + s1], deq_k=dkb, deq_v=deq_v,
                               p_scale=p_scale, keep=keep, kv_block=kv_block)
        out[t0:t0 + s1] = o.transpose(1, 0, 2)
        lse[t0:t0 + s1, :, 0] = l_.T
        t0 += s1
    return out, lse
