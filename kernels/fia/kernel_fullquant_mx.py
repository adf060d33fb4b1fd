"""The Ascend950 MXFP8 full-quant kernel (FP8 query, key and value with E8M0 group scales; quant modes 6/6/8) in
the tile language.

Model
-----
``fia_fullquant_mx`` is ``FiaTilingFullQuantMxArch35``'s kernel (``FiaKernelFullQuantMx`` with
``FiaBlockVecFullQuantMx``: the vector functions ``ProcessVec1VfDnMxfp8`` / ``ProcessVec1VfMxfp8`` and
``FlashUpdateNew`` / ``FlashUpdateLastNew`` / ``LastDivNew``) as the chip computes it, driven by the tiling's row
tasks (per query head, 128 rows, S2 blocks of 512 that the vector cores take in two sub-loops of 256). The cube's
MX matmuls apply the E8M0 group scales: the query's and key's per 32 channels of D, the value's per 32 KV
positions and channel, P's per 32 KV positions. With lp = ln(quant_scale_p) (fp32; 0 without it), LN2 / INV_LN2
the fp32 ln 2 and 1 / ln 2, fp8(x) the RNE cast onto the e4m3fn grid saturated to 448 (``fp8_rne``), per S2
block of 512, everything fp32::

    per sub-loop h of 256 (one or two):
      C1  c   = q · kᵀ                     MX: Σ over D groups of (fp8 · fp8 products) · sq · sk
             (+ q_rope · k_ropeᵀ with ROPE: the bf16 rope matmul accumulated onto it in L0C, DR = 64)
      V1  s   = c · scale, masked -> -inf
          m_h = max(m_(h-1), ceil(rowmax(s) · INV_LN2) · LN2)           (m_(-1) = the row's max gm)
          e   = exp(s - (m_h - lp)); sum_h = rowsum(e); p8 = fp8(e)
      C2  o_h = p8 · v                     MX: P's group scale 1, the value's group scales
    sub-loop 1's scale of sub-loop 0's P: u = exp(m_0 - m_1) cast bf16 -> E8M0, the power of two 2^rint(log2 u)
    (the maxima are multiples of LN2, so u is one up to rounding)
    V2  one sub-loop:  gl = gl · exp(gm - m_0) + sum_0;            go = go · exp(gm - m_0) + o_0
        two:           gl = (sum_1 + sum_0 · u) + gl · exp(gm - m_1);  go = go · exp(gm - m_1) + (o_0 · 2^.. + o_1)
        gm = m_last

and at the row's end out = go / gl cast to the output dtype (fp16 or bf16) rounding half away from zero
(``Cast`` CAST_ROUND), lse = gm + log(gl) (``ComputeLseOutputVF``: the stored max excludes lp while gl carries the
quant_scale_p factor, so the lse is the true one plus ln(quant_scale_p), as the upstream golden's).

The simulator has no 8-bit float tiles nor MX matmuls: the host dequantises the FP8 query and key/value to
bf16 with their E8M0 group scales applied (``fullquant_mx``; exact: an e4m3fn value has 4 significant bits and a
scale is a power of two, and bf16 has fp32's exponent range; where a product would leave bf16's normal range the
host hands fp32 tiles instead, the kernel's second specialisation), so the cube multiplies tiles whose products
are the chip's; P is rounded onto the FP8 grid in fp32 (``fp8_rne``), handed to the cube in the value's dtype
(exact), and its sub-loop-0 E8M0 scale applied to that sub-loop's fp32 P·V (exact, a power of two). The 16-bit
tiles book twice the chip's FP8 bytes in the cost model. The chip's masked scores are the fp32 minimum rather
than -inf; a row that sees a key gets the same result. op_host's 128-row tasks run in row passes of 64
(``row_passes``), as in the FP8 GQA kernel.

Invariants
----------
* The task tables, band / mask reading and output / lse views are ``fia_attention``'s (``kernel.py``); dense TND
  and paged BnNBsD key/value are read as its views read them.
* A task with a flash-decode slot (FD, ``tasks[t, 6]`` >= 0: a piece of a row split across cores) writes its
  normalised partial go / gl and its (gm, gl) to the workspace slot (``kernel.fd_partial``), as the chip's
  ``Bmm2ResForFDCopyOut`` and ``ComputeLogSumExpAndCopyToGm`` do after ``FlashUpdateLastNew`` / ``LastDivNew``;
  gm excludes lp and gl carries the quant_scale_p factor, which cancels in the combine's weights and stays in
  its lse, as in a whole row's.
* With ROPE, qr / kr are the bf16 query_rope / key_rope in the query's and the key's layout (dense TND or
  paged BnNBsD as the key); without it they are placeholders the kernel does not read.
* Not here (the host refuses them by name, ``fullquant_mx.py``): NZ caches, pse, a learnable sink, the tree
  mask, post-quant, hooks.
* A row with no visible key gives 0 and lse ``EMPTY_LSE``.
"""

from __future__ import annotations

import cvtile.dsl as ct

from ..merge_state import guarded_max
from ..golden.fullquant import INV_LN2_F32, LN2_F32
from ..golden.fullquant_mx import SUB_LOOP
from .kernel import band_and_mask, batch_extent, fd_partial, fold_rows, lse_rows, normalised, row_block_start, \
    task_fields
from .kernel_antiquant import cache_rows
from .kernel_fullquant_gqa import fp8_rne

__all__ = ["fia_fullquant_mx"]


@ct.inline
def ln2_ceil(x):
    """x rounded up to a whole multiple of LN2 as the chip does it (Muls INV_LN2, CAST_CEIL, Muls LN2); -inf
    stays -inf."""
    return -ct.floor(-(x * INV_LN2_F32)) * LN2_F32


@ct.inline
def mx_sub_loop(q1, kv, vv, qr1, krv, a, m, lnp, scale, mh, sh, oh, b, s1, q0, k0, m0, mrows, lo, hi, mask, ORDER,
                G, M, D, DV, DR, BAND, MASK, ROPE):
    """One sub-loop of m KV positions from position a: C1, V1 (scale, masks, the LN2-aligned max, P against it
    lowered by lp, P's FP8 rounding), C2; folds it into the S2 block's (max, sum, P·V) = (mh, sh, oh): the earlier
    sub-loop's sum rescaled by exp(mh - m') and its P·V by that factor's power of two (P's E8M0 scale)."""
    with ct.cube():
        c = ct.mma(q1, kv[ct.ds(a, SUB_LOOP, valid=m), 0:D], trans_b=True)
        if ROPE:
            r = ct.mma(qr1, krv[ct.ds(a, SUB_LOOP, valid=m), 0:DR], trans_b=True)
    with ct.vector():
        if ROPE:
            c = c + r
        s = c * scale
        s = band_and_mask(s, a, m, lo, hi, mask, b, s1, q0, k0, m0, mrows, ORDER, G, M, SUB_LOOP, BAND, MASK)
        hm = ct.maximum(mh, ln2_ceil(ct.rowmax(s)))
        ms = guarded_max(hm)
        e = ct.exp(s - (ms - lnp)[:, None])
        d = mh - ms
        sh = sh * ct.exp(d) + ct.rowsum(e)
        p8 = ct.cast(fp8_rne(e), vv.dtype)
    with ct.cube():
        o = ct.mma(p8, vv[ct.ds(a, SUB_LOOP, valid=m), 0:DV])
    with ct.vector():
        oh = oh * (2.0 ** ct.floor(d * INV_LN2_F32 + 0.5))[:, None] + o
    return hm, sh, oh


@ct.jit
def fia_fullquant_mx(q, k, v, qr, kr, out, lse, mask, block_table, ws_o, ws_ml, tasks, task_ptr, qlen, kvlen, qoff,
                     kvoff, pre, nxt, scale, lnp, CACHE: ct.constexpr, LAYOUT: ct.constexpr,
                     OUT_LAYOUT: ct.constexpr, ORDER: ct.constexpr, TOKEN: ct.constexpr, G: ct.constexpr,
                     M: ct.constexpr, S2: ct.constexpr, D: ct.constexpr, DV: ct.constexpr, DR: ct.constexpr,
                     BAND: ct.constexpr, MASK: ct.constexpr, LSE: ct.constexpr, FD: ct.constexpr,
                     ROPE: ct.constexpr, EMPTY_LSE: ct.constexpr):
    core = ct.block_idx()
    for t in range(task_ptr[core], task_ptr[core + 1]):
        b, n2, m0, mrows, j0, j1 = task_fields(tasks, t)
        slot = tasks[t, 6]
        s1, s2, q0, k0 = batch_extent(qlen, kvlen, qoff, kvoff, b)
        qv = fold_rows(q, b, n2, s1, q0, LAYOUT, ORDER, G)
        kv, vv = cache_rows(k, v, block_table, b, n2, s2, k0, 0, D, DV, LAYOUT, CACHE)
        q1, gm, gl, go, lo, hi = row_block_start(qv, pre, nxt, b, m0, mrows, s1, M, D, DV, ORDER, G, BAND)
        qr1 = q1
        krv = kv
        if ROPE:   # the bf16 rope of the query rows and of the keys (dense or paged as the key)
            krv = cache_rows(kr, kr, block_table, b, n2, s2, k0, 0, DR, DR, LAYOUT, CACHE)[0]
            with ct.cube():
                qr1 = ct.load(fold_rows(qr, b, n2, s1, q0, LAYOUT, ORDER, G)[ct.ds(m0, M, valid=mrows), 0:DR])
        for jj in range(j0, j1):
            a = jj * S2
            n = min(S2, s2 - a)
            with ct.vector():
                mh, sh, oh = gm, ct.zeros((M,), ct.float32, valid=mrows), \
                    ct.zeros((M, DV), ct.float32, valid=(mrows, DV))
            for h in range(0, (n + SUB_LOOP - 1) // SUB_LOOP):
                mh, sh, oh = mx_sub_loop(q1, kv, vv, qr1, krv, a + h * SUB_LOOP, min(SUB_LOOP, n - h * SUB_LOOP),
                                         lnp, scale, mh, sh, oh, b, s1, q0, k0, m0, mrows, lo, hi, mask, ORDER, G,
                                         M, D, DV, DR, BAND, MASK, ROPE)
            with ct.vector():
                dm = ct.exp(gm - guarded_max(mh))
                gl = gl * dm + sh
                go = go * dm[:, None] + oh
                gm = mh
        with ct.vector():
            ok, glsafe, res = normalised(go, gl)
            if FD and slot >= 0:
                fd_partial(res, gm, gl, ws_o, ws_ml, slot, tasks[t, 10], M, DV, mrows)
            else:
                ov = fold_rows(out, b, n2, s1, q0, OUT_LAYOUT, ORDER, G)
                ct.store(ov[ct.ds(m0, M, valid=mrows), 0:DV], ct.cast(res, out.dtype, rounding="round"))
                if LSE:
                    lv = lse_rows(lse, b, n2, s1, q0, TOKEN, ORDER, G)
                    ct.store(lv[ct.ds(m0, M, valid=mrows)], ct.where(ok, gm + ct.log(glsafe), EMPTY_LSE))
