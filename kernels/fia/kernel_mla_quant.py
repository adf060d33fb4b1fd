"""The A2/A3 MLA FA-quant decode kernel (int8 query, key and value; ``query_quant_mode`` 3) in the tile language.

Model
-----
``fia_mla_quant`` is IFATiling's MLA kernel ``IncreFlashAttentionAttenPreloadMla`` with Q_T = KV_T = int8 and a
bf16 rope and output (its cube side ``IfaMatmulFullQuant``), as the chip computes it, driven by the same row
tasks as ``fia_attention`` (the G query heads of the one KV head folded into the rows, S2 blocks of the
tiling's sInner over a paged NZ cache, flash-decode pieces merged by ``fia_fd_combine``). With dq the row's
``dequant_scale_query``, dk / dv the per-tensor key / value scales, f(x) the fp32 rounding and h(x) the fp16
rounding (to nearest even), per S2 block::

    C1  c  = q · kᵀ                             int8 x int8 -> int32, exact
        c' = dato(c) + q_rope · k_ropeᵀ         the nope score through the DATO trick (below), plus the rope's
                                                 fp32 dot product, in the L0C accumulator
    V1  s  = c' · f(f(dq · dk) · scale)          the per-row dequant (Muls, Muls, RowMuls in fp32)
        masked -> -inf (the chip selects -1e12; equal after exp, a row without keys is zeroed either way)
        hm = max(gm, rowmax(s)); p = exp(s - hm); α = exp(gm - hm); gl = gl·α + Σ p     (SoftmaxFlashV2)
        mp = exp(rowmax(s) - hm) + ε             (ε = 2.220446049250313e-16)
        p8 = int8(h(p · f(127 / mp)))            (RowMuls, then casts fp32 -> fp16 -> int8, both CAST_RINT)
    C2  o  = p8 · v                             int8 x int8 -> int32, exact
        o  = h(o · 2⁻¹⁰)                         (the fixpipe's DEQF16 to the half matmul output)
    V2  go = h(h(go · h(α)) + h(o · h(mp)))      (half RowMuls, RowMuls, Add; the first block's go is 0)

and at the row's end out = bf16(f(f(f(go) · 1024) / gl) · f(dv · f(1/127))) (CAST_RINT), lse = gm + log(gl).

DATO: the cube starts the int32 accumulator at the bias 2²¹ + 150·2²³ (the bits of the fp32 10485760), adds
q·kᵀ and then, read as fp32, adds -2²¹ · 5 (a 1 x 1 fp32 matmul) before the rope matmul accumulates into it.
For -2²¹ <= c < 6291456 that is c exactly; outside, the int32 carries into the fp32 exponent and the value
follows the bit pattern (``dato``: the binades |c| <= 512·128² reaches, each exact in fp32).

The DATO correction and the rope's addition happen here in the vector unit on the cube's int32 and fp32 blocks
(the numerics are one fp32 addition each either way; the cost model books them on the vector pipe). C2's DEQF16
is the cube's ``ct.dequant``: the P·V block leaves L0C as fp16, as on the chip. The half
steps are fp16 tiles (the simulator rounds each fp16 op's result).

Invariants
----------
* q / q_rope / dq are views of the query-shaped tensors in the kernel's layout (BSND or TND; BSH viewed as
  BSND); key, value and key_rope are NZ caches read through the block table (CACHE "NZ", ``paged_kv_rows``).
* A row with no visible key gives 0 and lse ``EMPTY_LSE``.
* No pse, sink, prefix, tensor list, left padding or post-quant (the host refuses them, ``mla_quant.py``).
"""

from __future__ import annotations

import cvtile.dsl as ct

from ..golden.mla_quant import MLA_QUANT_EPS, P_RANGE
from ..merge_state import guarded_max
from .kernel import band_bounds, band_and_mask, empty_state, fold_rows, paged_kv_rows, query_positions, \
    row_epilogue, row_task, sink_softmax_step, tree_kept

#: the fixpipe's DEQF16 scale of the P·V matmul (deqScalar 0x3A800000) and its inverse at the row's end
MM2_DEQ = 1.0 / 1024.0
MM2_UNDO = 1024.0


@ct.inline
def dato(c):
    """The fp32 the DATO trick leaves of the int32 nope score c: bits(2²¹ + 150·2²³ + c) read as fp32, minus
    10485760 (module doc). t = c + 2²¹ is the offset from 2²³'s bit pattern (exact: |c| <= 2²³); a binade
    holds 2²³ patterns, so t in [0, 2²³) reads 2²³ + t, [2²³, 2²⁴) 2²⁴ + 2(t - 2²³), [-2²³, 0) 2²³ + t/2 and
    below that 2²² + (t + 2²³)/4: t plus one hinge per binade edge, then 2²³ (each partial sum exact in fp32,
    in this order)."""
    t = ct.cast(c, ct.float32) + 2097152.0
    u = t + ct.maximum(t - 8388608.0, 0.0) - ct.minimum(t, 0.0) * 0.5 - ct.minimum(t + 8388608.0, 0.0) * 0.25
    return (u + 8388608.0) - 10485760.0


@ct.jit
def fia_mla_quant(q, qr, dq, k, kr, v, out, lse, mask, block_table, ws_o, ws_ml, tasks, task_ptr, qlen, kvlen,
                  qoff, kvoff, pre, nxt, qs2, qo2, dk, scale, dv, LAYOUT: ct.constexpr, OUT_LAYOUT: ct.constexpr,
                  ORDER: ct.constexpr, TOKEN: ct.constexpr, G: ct.constexpr, M: ct.constexpr, S2: ct.constexpr,
                  D: ct.constexpr, DR: ct.constexpr, DV: ct.constexpr, BAND: ct.constexpr, MASK: ct.constexpr,
                  LSE: ct.constexpr, FD: ct.constexpr, EMPTY_LSE: ct.constexpr):
    core = ct.block_idx()
    for t in range(task_ptr[core], task_ptr[core + 1]):
        b, n2, m0, mrows, j0, j1, slot, kbase, kend, step, s1, s2, q0, k0 = row_task(tasks, t, qlen, kvlen, qoff,
                                                                                     kvoff)
        qv = fold_rows(q, b, n2, s1, q0, LAYOUT, ORDER, G)
        qrv = fold_rows(qr, b, n2, s1, q0, LAYOUT, ORDER, G)
        dqv = fold_rows(dq, b, n2, s1, q0, LAYOUT, ORDER, G)[:, 0]
        kv = paged_kv_rows(k, block_table, b, n2, s2, D, "NZ")
        krv = paged_kv_rows(kr, block_table, b, n2, s2, DR, "NZ")
        vv = paged_kv_rows(v, block_table, b, n2, s2, DV, "NZ")
        with ct.cube():
            q1 = ct.load(qv[ct.ds(m0, M, valid=mrows), 0:D])
            qr1 = ct.load(qrv[ct.ds(m0, M, valid=mrows), 0:DR])
        with ct.vector():
            d1 = ct.load(dqv[ct.ds(m0, M, valid=mrows)]) * dk * scale
            gm, gl, go32 = empty_state(M, DV, mrows)
            go = ct.cast(go32, ct.float16)
            lo, hi = band_bounds(pre, nxt, b, m0, mrows, s1, M, ORDER, G, BAND)
            qpos = 0
            if MASK == "tree":
                qpos = query_positions(m0, mrows, s1, M, ORDER, G)
        for jj in range(j0, j1):
            a = kbase + jj * step
            n = min(step, kend - a)
            with ct.cube():
                c = ct.mma(q1, kv[ct.ds(a, S2, valid=n), 0:D], trans_b=True)
                r = ct.mma(qr1, krv[ct.ds(a, S2, valid=n), 0:DR], trans_b=True)
            with ct.vector():
                s = (dato(c) + r) * d1[:, None]
                if MASK == "tree":
                    s = tree_kept(s, mask, b, qpos, ct.iota(S2, valid=n) + a, hi)
                    s = band_and_mask(s, a, n, lo, hi, mask, b, s1, q0, k0, m0, mrows, ORDER, G, M, S2, BAND,
                                      False)
                else:
                    s = band_and_mask(s, a, n, lo, hi, mask, b, s1, q0, k0, m0, mrows, ORDER, G, M, S2, BAND,
                                      MASK)
                p, alpha, gl, hm = sink_softmax_step(s, gm, gl, 0.0, False, False)
                mp = ct.exp(ct.rowmax(s) - guarded_max(hm)) + MLA_QUANT_EPS
                p8 = ct.cast(ct.cast(p * (P_RANGE / mp)[:, None], ct.float16), ct.int8)
                gm = hm
            with ct.cube():   # the fixpipe's DEQF16 by 2⁻¹⁰ as the block leaves L0C
                o = ct.dequant(ct.mma(p8, vv[ct.ds(a, S2, valid=n), 0:DV]), MM2_DEQ)
            with ct.vector():
                o16 = o * ct.cast(mp, ct.float16)[:, None]
                go = go * ct.cast(alpha, ct.float16)[:, None] + o16
        with ct.vector():
            ok = gl != 0.0
            glsafe = ct.where(ok, gl, 1.0)
            res = ct.where(ok[:, None], ct.cast(go, ct.float32) * MM2_UNDO / glsafe[:, None] * dv, 0.0)
            row_epilogue(res, ok, gm, gl, gm + ct.log(glsafe), out, lse, ws_o, ws_ml, qs2, qo2, slot, tasks[t, 10],
                         b, n2, s1, q0, m0, mrows, OUT_LAYOUT, ORDER, TOKEN, G, M, DV, FD, 0, False, LSE, EMPTY_LSE)
