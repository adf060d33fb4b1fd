"""The full-quant prefill kernel (int8 query, key and value) in the tile language.

Model
-----
``fia_fullquant`` is the arch22 legacy PFA route's int8 template (``PromptFlashAttentionS1s2Bns1X910`` with
T = int8: its type traits make the matmul output and the softmax input half) as the chip computes it,
driven by the same row tasks as ``fia_attention``. Per S2 block, with deq1 / qs1 / deq2 the per-tensor
``dequant_scale1`` / ``quant_scale1`` / ``dequant_scale2`` (a uint64 scale's low 32 bits are the fp32 bits;
the dequant scales as the fixpipe keeps them, ``golden.fullquant.dequant_value``) and h(x) the fp16 rounding
(to nearest even) of x::

    C1  c  = q · kᵀ                          int8 x int8 -> int32, exact
        s  = h(c · deq1)                     (the fixpipe's dequant to the half matmul output)
    V1  s  = h(s · h(scale)), then h(s + pse), masked -> -inf   (Muls / Add in half)
        hm = max(gm, rowmax(s)); p = exp(s - hm); dm = exp(gm - hm);
        gl = gl · dm + rowsum(p); gm = hm    (SoftmaxFlashV2<half>: fp32 inside, max and sum fp32)
        p8 = int8(h(h(p) · h(qs1)))          (AscendQuant: half multiply, round half away, saturate)
    C2  o  = p8 · v                          int8 x int8 -> int32, exact
        o  = h(o · deq2)                     (the fixpipe's dequant)
    V2  go = h(h(go · h(dm)) + o)            (UpdateVmul, Bmm2UpdateAdd in half)

and at the row's end out = h(go / h(gl)) (Bmm2UpdateDivNoTail), written as fp16 or post-quantised to int8
(quant_scale2 / quant_offset2, ``kernel.post_quant``: the fp32 path of the other kernels, where the chip's
QuantCompute multiplies the half rows by h(scale2) in half; the two can differ by one int8 step), lse = gm +
log(gl) in fp32.

The fixpipe's dequant is the cube's ``ct.dequant``: the int32 block leaves L0C as fp16 (Fixpipe quantPre
DEQF16, the scale's fp32 bits as deqScalar), so the hand-off carries half the bytes of the int32 block and the
vector unit does no dequant work, as on the chip. The half steps are fp16 tiles (the simulator rounds each fp16 op's result; a scalar
operand of an fp16 op is taken in fp16, as Muls takes h(scale) and h(qs1)); the softmax widens the scores to
fp32 as SoftmaxFlashV2<half> does.

Invariants
----------
* The task tables, masks, pse and lse views are ``fia_attention``'s (``kernel.py``): the same tiling, the
  same GQA fold and band / mask reading; no flash decode, paging, tensor lists, prefix, sink or hooks (the
  host refuses them with full quant, ``fullquant.py``).
* A row with no visible key gives 0 and lse ``EMPTY_LSE``.
"""

from __future__ import annotations

import cvtile.dsl as ct

from .kernel import band_and_mask, band_bounds, batch_extent, empty_state, fold_rows, kv_rows, normalised, \
    pse_rows, row_epilogue, sink_softmax_step, task_fields


@ct.inline
def fq_step(q1, kv, vv, a, m, gm, gl, go, scale16, deq1, qs16, deq2, b, n2, s1, q0, k0, m0, mrows, lo, hi, mask,
            pse, ORDER, G, M, S2, D, DV, PSE, PSE_ONE_ROW, BAND, MASK):
    """One KV block of m positions from position a: C1, V1 (dequant, scale, pse, masks, online softmax, P's
    quantisation), C2, V2; returns the updated (gm, gl, go)."""
    with ct.cube():   # the fixpipe dequantises the int32 scores on their way out of L0C
        c = ct.dequant(ct.mma(q1, kv[ct.ds(a, S2, valid=m), 0:D], trans_b=True), deq1)
    with ct.vector():
        s = c * scale16
        if PSE:
            pv = pse_rows(pse, b, n2, s1, q0, ORDER, G, PSE_ONE_ROW)
            s = s + ct.cast(ct.load(pv[ct.ds(m0, M, valid=mrows), ct.ds(k0 + a, S2, valid=m)]), ct.float16)
        s = band_and_mask(ct.cast(s, ct.float32), a, m, lo, hi, mask, b, s1, q0, k0, m0, mrows, ORDER, G, M, S2,
                          BAND, MASK)
        p, dm, gl, gm = sink_softmax_step(s, gm, gl, 0.0, False, False)
        p8 = ct.cast(ct.cast(p, ct.float16) * qs16, ct.int8, rounding="round")
    with ct.cube():
        o = ct.dequant(ct.mma(p8, vv[ct.ds(a, S2, valid=m), 0:DV]), deq2)
    with ct.vector():
        go = go * ct.cast(dm, ct.float16)[:, None] + o
    return gm, gl, go


@ct.jit
def fia_fullquant(q, k, v, out, lse, mask, pse, ws_o, ws_ml, tasks, task_ptr, qlen, kvlen, qoff, kvoff, pre, nxt,
                  qs2, qo2, scale16, deq1, qs16, deq2, LAYOUT: ct.constexpr, OUT_LAYOUT: ct.constexpr,
                  ORDER: ct.constexpr, G: ct.constexpr, M: ct.constexpr, PSE: ct.constexpr,
                  PSE_ONE_ROW: ct.constexpr, S2: ct.constexpr, D: ct.constexpr, DV: ct.constexpr,
                  BAND: ct.constexpr, MASK: ct.constexpr, LSE: ct.constexpr, EMPTY_LSE: ct.constexpr,
                  POSTQ: ct.constexpr = 0, QOFF: ct.constexpr = False):
    core = ct.block_idx()
    for t in range(task_ptr[core], task_ptr[core + 1]):
        b, n2, m0, mrows, j0, j1 = task_fields(tasks, t)
        s1, s2, q0, k0 = batch_extent(qlen, kvlen, qoff, kvoff, b)
        qv = fold_rows(q, b, n2, s1, q0, LAYOUT, ORDER, G)
        kv = kv_rows(k, b, n2, s2, k0, LAYOUT)
        vv = kv_rows(v, b, n2, s2, k0, LAYOUT)
        with ct.cube():
            q1 = ct.load(qv[ct.ds(m0, M, valid=mrows), 0:D])
        with ct.vector():
            gm, gl, go32 = empty_state(M, DV, mrows)
            go = ct.cast(go32, ct.float16)
            lo, hi = band_bounds(pre, nxt, b, m0, mrows, s1, M, ORDER, G, BAND)
        for jj in range(j0, j1):
            kv0 = jj * S2
            n = min(S2, s2 - kv0)
            gm, gl, go = fq_step(q1, kv, vv, kv0, n, gm, gl, go, scale16, deq1, qs16, deq2, b, n2, s1, q0, k0, m0,
                                 mrows, lo, hi, mask, pse, ORDER, G, M, S2, D, DV, PSE, PSE_ONE_ROW, BAND, MASK)
        with ct.vector():
            ok, glsafe, res = normalised(go, ct.cast(gl, ct.float16))
            row_epilogue(ct.cast(res, ct.float32), ok, gm, gl, gm + ct.log(ct.where(ok, gl, 1.0)), out, lse, ws_o,
                         ws_ml, qs2, qo2, -1, 0, b, n2, s1, q0, m0, mrows, OUT_LAYOUT, ORDER, False, G, M, DV, False,
                         POSTQ, QOFF, LSE, EMPTY_LSE)
