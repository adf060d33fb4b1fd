"""Ascend950 MXFP8 full quant (FP8 query, key and value with E8M0 group scales; quant modes 6/6/8), in float64.

Model
-----
The operator's MX full quant (``FiaTilingFullQuantMxArch35``): float8_e4m3fn q, k, v, each with float8_e8m0
scales, one power of two 2^(e - 127) per group of 32 elements (byte 0 is 2^-127, byte 255 a NaN: E8M0 has no 0):

* ``dequant_scale_query`` per token, query head and 32 channels of D: [T, N1, ceil(D/64), 2], the groups of D
  in pairs (the prefill form; the decode form [N2, T, G, ceil(D/64), 2] folds G),
* ``key_antiquant_scale`` the same per KV position and kv head: [T_kv, N2, ceil(D/64), 2] (dense TND) or
  [block_num, N2, block_size, ceil(D/64), 2] (paged BnNBsD),
* ``value_antiquant_scale`` per 32 KV positions, kv head and channel: [Σ_b ceil(S2_b/64), N2, Dv, 2] (dense: each
  batch's groups of 64 positions in its own rows, the two 32-position halves in the last axis) or
  [block_num, N2, ceil(block_size/64), Dv, 2] (paged),
* ``quant_scale1`` (torch_npu V2's ``quant_scale_p``, default 1) the scale P takes before its FP8 cast.

``mx_dequantised`` applies them (q·sq, k·sk, v·sv: exact in float64). For one kv head's block of dequantised
q [hq, r, D], k [h, c, D], v [h, c, Dv]::

    s   = (q·kᵀ) · scale                   masked pairs -> -inf
    per KV block of 256 columns (the chip's sub-loop), with the running max m and sum l:
        m'  = max(m, ceil(rowmax(s_blk) · INV_LN2) · LN2);   e = exp(s_blk - m' + ln(p_scale))
        l   = l · exp(m - m') + Σ e
        p8  = fp8(e)                       (RNE onto the e4m3fn grid, saturated to ±448)
        o   = o · exp(m - m') + p8 · v
    out = o / l,   lse = m + ln(l)         (= the true lse + ln(p_scale): l carries the p_scale factor)

as the upstream pytest golden (``fia_fullquant_mxfp8_golden.py``'s CPU golden) and the chip compute it. The
upstream golden (and the chip) take two 256-column blocks per P·V step and rescale the first block's P by
exp(m_0 - m_1), which the LN2 alignment makes a power of two (the chip's E8M0 P scale): in exact arithmetic that
is the block-by-block recurrence above, which is what this golden computes (float64). ln(p_scale) is the fp32
the chip's ``Ln`` gives. The upstream golden adds 1e-20 to the sum; this one does not (rounding only).

Invariants
----------
* Inputs are float64 values (FP8 codes and E8M0 scales widened exactly); no input is modified.
* A row that sees no key gives output 0 and lse +inf (:mod:`.attend`'s convention).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from .antiquant import _e8m0_as_bf16
from .attend import block_dims, empty_block
from .fullquant import online_quantised
from .fullquant_gqa import fp8_e4m3
from .masks import INT_MAX, MaskEngine, mask_template

__all__ = ["attend_mxfp8", "e8m0_values", "fullquant_mx_reference", "mx_dequantised", "MX_GROUP", "SUB_LOOP"]

#: elements per E8M0 scale
MX_GROUP = 32
#: the chip's P rounding block (the vector cores' sub-loop of an S2 block of 512)
SUB_LOOP = 256


def e8m0_values(x) -> np.ndarray:
    """float8_e8m0 bytes as float64 powers of two 2^(e - 127), byte 0 as 2^-127 and 255 as a NaN (the 950's
    reading, ``antiquant._e8m0_as_bf16``)."""
    return _e8m0_as_bf16(np.asarray(x)).astype(np.float64)


def _channel_groups(scale, d: int) -> np.ndarray:
    """A [..., ceil(D/64), 2] query/key scale as float64 per element: [..., D]."""
    s = e8m0_values(scale)
    s = s.reshape(s.shape[:-2] + (-1,))
    return np.repeat(s, MX_GROUP, axis=-1)[..., :d]


def _position_groups(scale, dv: int) -> np.ndarray:
    """A [R, N2, Dv, 2] (dense) or [blocks, N2, R, Dv, 2] (paged) value scale as float64 per 32 positions, in
    order along its position axis: [2R, N2, Dv] or [blocks, N2, 2R, Dv]."""
    s = e8m0_values(scale)
    if s.ndim == 4:
        return s.transpose(0, 3, 1, 2).reshape(-1, s.shape[1], s.shape[2])[..., :dv]
    return s.transpose(0, 1, 2, 4, 3).reshape(s.shape[0], s.shape[1], -1, s.shape[3])[..., :dv]


def mx_dequantised(query, key, value, deq_q, deq_k, deq_v, kvlens, paged: bool):
    """(q·sq, k·sk, v·sv) as float64 in the tensors' own shapes: ``query`` [T, N1, D], ``key`` / ``value``
    [T_kv, N2, D] (dense TND, batches of ``kvlens`` one after the other) or [block_num, N2, block_size, D]
    (``paged``) FP8, with the E8M0 scales of the module docstring (the query's in either form)."""
    q = np.asarray(query).astype(np.float64)
    k = np.asarray(key).astype(np.float64)
    v = np.asarray(value).astype(np.float64)
    if np.ndim(deq_q) == 5:   # the decode form [N2, T, G, D/64, 2]: heads n2·G + g
        deq_q = np.asarray(deq_q).transpose(1, 0, 2, 3, 4)
        deq_q = deq_q.reshape(deq_q.shape[0], -1, *deq_q.shape[3:])
    qd = q * _channel_groups(deq_q, q.shape[-1])
    kd = k * _channel_groups(deq_k, k.shape[-1])
    vs = _position_groups(deq_v, v.shape[-1])
    if paged:
        bs = v.shape[2]
        sv = np.repeat(vs, MX_GROUP, axis=2)[:, :, :bs]
    else:
        sv = np.empty(v.shape)
        t0 = g0 = 0
        for s2 in (int(x) for x in kvlens):
            sv[t0:t0 + s2] = np.repeat(vs[g0:g0 + -(-s2 // MX_GROUP)], MX_GROUP, axis=0)[:s2]
            t0 += s2
            g0 += 2 * -(-s2 // (2 * MX_GROUP))
    return qd, kd, v * sv


def attend_mxfp8(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, *, p_scale: float = 1.0,
                 keep: np.ndarray | None = None, kv_block: int = SUB_LOOP):
    """MXFP8 attention of the dequantised ``q [hq, r, D]`` over ``k [h, c, D]``, ``v [h, c, Dv]`` (float64) with
    ``keep`` ([r, c] or [hq, r, c], True = visible; None: all). Returns ``(out [hq, r, Dv], lse [hq, r])``."""
    hq, r, h, c, d, dv, g = block_dims(q, k, v)
    if c == 0 or r == 0:
        return empty_block(hq, r, dv)
    s = np.matmul(q.reshape(h, g * r, d), k.transpose(0, 2, 1)).reshape(hq, r, c) * scale
    if keep is not None:
        s = np.where(np.broadcast_to(keep, s.shape), s, -np.inf)
    vh = np.repeat(v, g, axis=0)

    def block_pv(e, j0):
        return np.matmul(fp8_e4m3(e), vh[:, j0:j0 + kv_block])

    shift = float(np.log(np.float32(p_scale)))
    out, lse = online_quantised(s, kv_block, block_pv, shift=shift, align_ln2=True)
    return out, lse + shift


def fullquant_mx_reference(query, key, value, deq_q, deq_k, deq_v, *, qlens, kvlens, scale: float, num_heads: int,
                           num_kv_heads: int, p_scale: float = 1.0, block_table=None, sparse_mode: int = 0,
                           pre_tokens: int = INT_MAX, next_tokens: int = INT_MAX, query_rope=None, key_rope=None):
    """The documented TND call in float64: ``query`` (T, N1, D) FP8; ``key`` / ``value`` (T_kv, N2, D) dense or
    (block_num, N2, block_size, D) read through ``block_table`` (B, max blocks); the E8M0 scales of the module
    docstring; ``qlens`` / ``kvlens`` per batch (not cumulative). Sparse modes 0 and 2/3/4 with pre/next tokens.
    A bf16 rope (``query_rope`` (T, N1, Dr), ``key_rope`` shaped as the key with Dr) adds q_rope · k_ropeᵀ to
    the scores (the rope columns joined to the dequantised q and k). Returns ``(out (T, N1, Dv), lse (T, N1,
    1))``."""
    engine = MaskEngine(sparse_mode=sparse_mode, atten_mask=None if sparse_mode == 0 else mask_template(),
                        pre_tokens=pre_tokens, next_tokens=next_tokens, batch=len(qlens), decode=False,
                        legacy_decode=False, token_layout=True, left_padding=False)
    paged = block_table is not None
    q, kc, vc = mx_dequantised(query, key, value, deq_q, deq_k, deq_v, kvlens, paged)
    if query_rope is not None:
        q = np.concatenate([q, np.asarray(query_rope).astype(np.float64)], axis=-1)
        kc = np.concatenate([kc, np.asarray(key_rope).astype(np.float64)], axis=-1)
    out = np.zeros((q.shape[0], num_heads, vc.shape[-1]))
    lse = np.full((q.shape[0], num_heads, 1), np.inf)
    t0 = k0 = 0
    for b, (s1, s2) in enumerate(zip(qlens, kvlens)):
        s1, s2 = int(s1), int(s2)
        if paged:
            bs = kc.shape[2]
            ids = np.asarray(block_table[b][:-(-s2 // bs)], np.int64)
            kb = kc[ids].transpose(1, 0, 2, 3).reshape(num_kv_heads, -1, kc.shape[-1])[:, :s2]
            vb = vc[ids].transpose(1, 0, 2, 3).reshape(num_kv_heads, -1, vc.shape[-1])[:, :s2]
        else:
            kb = kc[k0:k0 + s2].transpose(1, 0, 2)
            vb = vc[k0:k0 + s2].transpose(1, 0, 2)
        if s1:
            keep = engine.keep(SimpleNamespace(b=b, s1=s1, s2=s2, q0=t0, k0=0), 0, s1)
            o, l_ = attend_mxfp8(q[t0:t0 + s1].transpose(1, 0, 2), kb, vb, scale, p_scale=p_scale, keep=keep)
            out[t0:t0 + s1] = o.transpose(1, 0, 2)
            lse[t0:t0 + s1, :, 0] = l_.T
        t0 += s1
        k0 += s2
    return out, lse
