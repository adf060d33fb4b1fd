"""MLA FA quant (int8 query, key and value with per-token-head query scales; A2/A3), in float64.

Model
-----
The operator's decode MLA with FA quant (``query_quant_mode`` 3, key/value quant modes 0): an int8 query
with ``dequant_scale_query`` dq (one fp32 per query token and head), an int8 latent cache K (D 512; the value
cache V, in vLLM the same tensor) with per-tensor fp32 scales dk (``key_antiquant_scale`` / V2's
``dequant_scale_key``) and dv (``value_antiquant_scale``), and bf16 ``query_rope`` / ``key_rope`` (64). The
chip adds the rope scores to the int32 q·kᵀ before the dequant, so the rope is dequantised with the query and
key (the upstream st test hands the chip ``query_rope / (dq·dk)``)::

    s   = scale · dq · dk · (q·kᵀ + q_rope·k_ropeᵀ)            masked pairs -> -inf

and the row is taken in KV blocks of ``kv_block`` columns (the chip's S2 block, 512 for MLA) as its online
softmax takes it, P quantised to int8 against the block's own max::

    hm  = max(m, rowmax(s_blk));  e = exp(s_blk - hm);  α = exp(m - hm)
    mp  = exp(rowmax(s_blk) - hm) + ε                          (ε = 2.220446049250313e-16, the kernel's)
    p8  = round(e · 127 / mp)                                   (to nearest, ties to even; |p8| <= 127)
    l   = l·α + Σ e;   o = o·α + (p8 · V)·mp;   m = hm
    out = dv · o / l / 127,   lse = m + ln(l)

which is the upstream st executor's float64 golden for this scenario (``_t_indequant_ds_act_golden`` in
``executor_aclnnFusedInferAttentionScoreV4.py``: float64, P quantised per 512-column block with
127 / (exp(blockmax - runningmax) + eps), the rope scaled by dq·dk). The chip's own steps (the DATO int32 ->
fp32 trick, the fp16 P·V hand-off) are the kernel's (``kernels.fia.kernel_mla_quant``), not the golden's.

``mla_quant_golden`` prepares a FIA call for :func:`.fia.fia_golden`: the NZ caches as BnNBsD, the query and
its rope scaled by dq·dk per (token, head) in float64, the value by dv, and this module's block function in
place of the float one; masks, layouts, paging and lse are then the float golden's.

Invariants
----------
* Inputs hold integers (int8 values as float64) and bf16 ropes; no input is modified.
* A row that sees no key gives output 0 and lse +inf (:mod:`.attend`'s convention).
"""

from __future__ import annotations

import functools

import numpy as np

from .attend import block_dims, empty_block
from .dtypes import to_numpy
from .layouts import parse_layout
from .nz import from_nz

__all__ = ["attend_mla_quant", "mla_quant_golden", "MLA_QUANT_EPS", "MLA_QUANT_BLOCK", "P_RANGE"]

#: the kernel's FLOAT_EPS, added to the block's max factor before 127 is divided by it
MLA_QUANT_EPS = 2.220446049250313e-16
#: the chip's S2 block for MLA (IFATiling's sInner with the rope), the golden's default block
MLA_QUANT_BLOCK = 512
#: P's int8 range: 127 maps the block's largest probability to 127
P_RANGE = 127.0


def attend_mla_quant(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, *, kv_block: int = MLA_QUANT_BLOCK,
                     bias=None, keep=None, sink=None, p_dtype=None, p_range: float = P_RANGE, quantise=np.round):
    """MLA FA-quant attention of ``q [hq, r, D]`` (already scaled by dq·dk, the rope joined) over ``k [h, c,
    D]``, ``v [h, c, Dv]`` (v already scaled by dv), signature of :func:`.attend.attend`. ``p_range`` is what
    the block's largest probability maps to and ``quantise`` P's rounding onto its grid (int8: 127 and round
    to nearest even; Ascend950's FP8 MLA full quant: 448 and ``fullquant_gqa.fp8_e4m3``). Returns ``(out [hq,
    r, Dv], lse [hq, r])``."""
    if sink is not None:
        raise ValueError("learnable_sink: not part of MLA FA quant")
    if bias is not None:
        raise ValueError("pse_shift: not part of MLA FA quant")
    hq, r, h, c, d, dv, g = block_dims(q, k, v)
    if c == 0 or r == 0:
        return empty_block(hq, r, dv)
    s = np.matmul(q.reshape(h, g * r, d), k.transpose(0, 2, 1)).reshape(hq, r, c) * scale
    if keep is not None:
        s[:, ~keep] = -np.inf
    gm = np.full((hq, r), -np.inf)
    gl = np.zeros((hq, r))
    go = np.zeros((hq, r, dv))
    for j0 in range(0, c, int(kv_block)):
        blk = s[..., j0:j0 + int(kv_block)]
        bm = blk.max(axis=-1)
        hm = np.maximum(gm, bm)
        ms = np.where(np.isneginf(hm), 0.0, hm)
        e = np.exp(blk - ms[..., None])
        alpha = np.exp(gm - ms)
        mp = np.exp(bm - ms) + MLA_QUANT_EPS
        p8 = quantise(e * (p_range / mp)[..., None])
        o = np.matmul(p8.reshape(h, g * r, -1), v[:, j0:j0 + int(kv_block)]).reshape(hq, r, dv) * mp[..., None]
        gl = gl * alpha + e.sum(axis=-1)
        go = go * alpha[..., None] + o
        gm = hm
    valid = gl > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(valid[..., None], go / np.where(valid, gl, 1.0)[..., None] / p_range, 0.0)
        lse = np.where(valid, gm + np.log(np.where(valid, gl, 1.0)), np.inf)
    return out, lse


def _per_head(x: np.ndarray, scales: np.ndarray, heads: int, packed: bool) -> np.ndarray:
    """``x`` (a query-shaped tensor, float64) times its (token, head) scale: ``scales`` has x's shape without
    D (BSH: (B, S, N) against (B, S, N·D))."""
    if packed:
        shape = x.shape
        return (x.reshape(*shape[:-1], heads, shape[-1] // heads) * scales[..., None]).reshape(shape)
    return x * scales[..., None]


def mla_quant_golden(query, key, value, *, dequant_scale_query, key_antiquant_scale, value_antiquant_scale,
                     query_rope, key_rope, num_heads: int = 1, input_layout: str = "BSH",
                     kv_block: int = MLA_QUANT_BLOCK, query_quant_mode: int = 3, key_antiquant_mode: int = 0,
                     value_antiquant_mode: int = 0, p_range: float = P_RANGE, quantise=np.round, **kwargs):
    """Float64 MLA FA quant (module doc); ``p_range`` / ``quantise`` are :func:`attend_mla_quant`'s, the other
    keywords :func:`.fia.fia_golden`'s. Returns ``(out, lse)`` in float64 (``lse`` None unless
    ``softmax_lse_flag``)."""
    from .fia import fia_golden

    if (int(query_quant_mode), int(key_antiquant_mode), int(value_antiquant_mode)) != (3, 0, 0):
        raise ValueError(f"query/key/value quant modes {query_quant_mode}/{key_antiquant_mode}/"
                         f"{value_antiquant_mode}: MLA FA quant is 3/0/0")
    dk = float(np.asarray(to_numpy(key_antiquant_scale), np.float64).reshape(-1)[0])
    dv = float(np.asarray(to_numpy(value_antiquant_scale), np.float64).reshape(-1)[0])
    dq = np.asarray(to_numpy(dequant_scale_query), np.float64) * dk
    packed = parse_layout(input_layout).qkv == "BSH"

    def cache(x):
        x = to_numpy(x)
        return from_nz(x) if x.ndim == 5 else x

    q = _per_head(np.asarray(to_numpy(query), np.float64), dq, num_heads, packed)
    qr = _per_head(np.asarray(to_numpy(query_rope), np.float64), dq, num_heads, packed)
    k = np.asarray(cache(key), np.float64)
    kr = np.asarray(cache(key_rope), np.float64)
    v = np.asarray(cache(value), np.float64) * dv
    return fia_golden(q, k, v, query_rope=qr, key_rope=kr, num_heads=num_heads, input_layout=input_layout,
                      _attend=functools.partial(attend_mla_quant, kv_block=int(kv_block), p_range=float(p_range),
                                               quantise=quantise), **kwargs)
