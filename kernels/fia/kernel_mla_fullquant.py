"""The Ascend950 MLA full-quant kernel (FP8 or int8 query and latent cache; quant modes 3/0/0) in the tile language.

Model
-----
``fia_mla_fullquant`` is the arch35 catch-all template's (``FusedInferAttentionScoreTilingImpl``) MLA full-quant
kernel (``FABlockCubeMlaFullquant`` / ``FABlockVecInferMlaFullquant`` on ``FABlockVecBaseFullquant`` with
``isMlaFullQuant``) for a float8_e4m3fn (QUANT "fp8") or int8 (QUANT "int8") query and cache, as the chip
computes it, driven by the tiling's row tasks (the G query heads of the one KV head folded into 64 rows, S2
blocks of 128). One template serves both: the cube file's int8 branch (``IterateBmm1MLAFullQuantInt8``, an int32
P·V result) and the vector's ``IsSameType<INPUT_T, int8_t>`` branches differ in the steps marked below. With dq
the row's ``dequant_scale_query``, dk / dv the per-tensor key / value scales, f(x) the fp32 rounding, h(x) the
fp16 one (RINT), fp8(x) the RNE cast onto the e4m3fn grid saturated to ±448 (``kernel_fullquant_gqa.fp8_rne``)
and R the flavour's P range (448, int8 127), per S2 block::

    C1  c  = q · kᵀ + q_rope · k_ropeᵀ       fp8 x fp8 and bf16 x bf16 into one fp32 accumulator (L0C)
        int8: c = dato(q · kᵀ) + q_rope · k_ropeᵀ   the int32 nope sum read as fp32 through the accumulator's
                                                     bias (``kernel_mla_quant.dato``), the rope accumulated on it
    V1  s  = c · f(f(dq · scale) · dk)       (Muls, Muls, Mul), masked -> -inf
        hm = max(gm, rowmax(s)); p = exp(s - hm); dm = exp(gm - hm); gl = gl · dm + rowsum(p)
        mp = f(exp(rowmax(s) - hm) + ε)      (ε = 2.220446049250313e-16: 1 on the row's first block)
        p8 = fp8(f(f(p · 448) / mp))         (Muls, Div, Cast RINT SAT)
        int8: p8 = int8(h(f(f(p · 127) / mp)))   (Muls, Div, then fp32 -> fp16 -> int8, both CAST_RINT)
    C2  o  = p8 · v                          fp8 x fp8 -> fp32, v the key's nope (below)
        int8: o = fp32(p8 · v)               int8 x int8 -> int32 in L0C, cast to fp32 in the vector (exact)
    V2  go = o                               (the row's first block)
        go = f(f(go · dm) · dv) + f(f(o · mp) · dv)   (its second block: the first block's dv is caught up)
        go = f(go · dm) + f(f(o · mp) · dv)           (later blocks)

and at the row's end out = bf16(f(f(go / gl) · f(1/R))), or f(f(f(o · dv) / gl) · f(1/R)) for a row of one
block (``FlashUpdateLastNew`` / ``LastDivNew``), the bf16 cast rounding half away from zero (CAST_ROUND);
lse = gm + log(gl).

The value: the chip's P·V matmul takes its right operand from the L1 buffer the key's nope was loaded into
(``l1KBuffers.GetReused()``), so V is the key's D 512 (the latent cache, which vLLM passes as both key and
value); the value tensor is not read. The kernel here reads the key's block again for C2 (a tile of the key held
for both matmuls would sit in L0B, which 128 x 512 halves overflow), so the cost model books a second load of it
where the chip has none.

The cache: dense, or paged through the block table as BnBsH, BnNBsD or NZ (op_host's ``paLayoutType`` 1 / 0 / 2;
the cube's paged copy into L1 reads an NZ block's 32-byte fractals, the nope's of 32 8-bit values and the bf16
rope's of 16, in place: ``paged_kv_rows``). The int8 flavour comes only with the NZ cache (op_host's
``CheckFeatureMLAFullquant``).

As in ``kernel_fullquant_gqa``, the simulator has no 8-bit float tiles: the host widens the FP8 query and cache
to fp16 (exact), P is rounded onto the FP8 grid in fp32 and handed to the cube as fp16 (exact); int8 tiles are
int8. The masked scores are -inf where the chip selects -3.4e38 (equal after exp).

Invariants
----------
* q / q_rope / dq are views of the query-shaped tensors in the kernel's layout (BSND, BNSD or TND; BSH viewed as
  BSND); key and key_rope are dense, or paged (BnBsH / BnNBsD / NZ, CACHE) through the block table.
* A row with no visible key gives 0 and lse ``EMPTY_LSE``.
* Not here (the host refuses them by name, ``mla_fullquant.py``): flash decode, the tree mask, HiFloat8 tensors.
"""

from __future__ import annotations

import cvtile.dsl as ct

from ..golden.mla_quant import P_RANGE
from ..merge_state import guarded_max, softmax_rescale
from .kernel import band_and_mask, batch_extent, fold_rows, lse_rows, normalised, row_block_start, task_fields
from .kernel_antiquant import cache_rows
from .kernel_fullquant_gqa import FP8_MAX, fp8_rne, picked
from .kernel_mla_quant import dato

__all__ = ["fia_mla_fullquant", "MLA_FQ_EPS"]

#: the kernel's floatEps, added to the block's max factor before P is divided by it
MLA_FQ_EPS = 2.220446049250313e-16
#: the fp32 1/448 the kernel multiplies the normalised output by
_INV_FP8_MAX = 1.0 / FP8_MAX
#: the fp32 1/127 the int8 flavour multiplies it by
_INV_P_RANGE = 1.0 / P_RANGE


@ct.jit
def fia_mla_fullquant(q, qr, dq, k, kr, out, lse, mask, block_table, tasks, task_ptr, qlen, kvlen, qoff, kvoff,
                      pre, nxt, dk, scale, dv, QUANT: ct.constexpr, CACHE: ct.constexpr, LAYOUT: ct.constexpr,
                      OUT_LAYOUT: ct.constexpr, ORDER: ct.constexpr, TOKEN: ct.constexpr, G: ct.constexpr,
                      M: ct.constexpr, S2: ct.constexpr, D: ct.constexpr, DR: ct.constexpr, DV: ct.constexpr,
                      BAND: ct.constexpr, MASK: ct.constexpr, LSE: ct.constexpr, EMPTY_LSE: ct.constexpr):
    core = ct.block_idx()
    for t in range(task_ptr[core], task_ptr[core + 1]):
        b, n2, m0, mrows, j0, j1 = task_fields(tasks, t)
        s1, s2, q0, k0 = batch_extent(qlen, kvlen, qoff, kvoff, b)
        kv, krv = cache_rows(k, kr, block_table, b, n2, s2, k0, 0, D, DR, LAYOUT, CACHE)
        q1, gm, gl, go, lo, hi = row_block_start(fold_rows(q, b, n2, s1, q0, LAYOUT, ORDER, G), pre, nxt, b, m0,
                                                 mrows, s1, M, D, DV, ORDER, G, BAND)
        with ct.cube():
            qr1 = ct.load(fold_rows(qr, b, n2, s1, q0, LAYOUT, ORDER, G)[ct.ds(m0, M, valid=mrows), 0:DR])
        with ct.vector():
            d1 = ct.load(fold_rows(dq, b, n2, s1, q0, LAYOUT, ORDER, G)[ct.ds(m0, M, valid=mrows), 0]) * scale * dk
        for jj in range(j0, j1):
            a = jj * S2
            n = min(S2, s2 - a)
            later = min(jj - j0, 1)
            second = later * (1 - min(jj - j0 - 1, 1))
            with ct.cube():
                c = ct.mma(q1, kv[ct.ds(a, S2, valid=n), 0:D], trans_b=True)
                r = ct.mma(qr1, krv[ct.ds(a, S2, valid=n), 0:DR], trans_b=True)
            with ct.vector():
                if QUANT == "int8":
                    s = (dato(c) + r) * d1[:, None]
                else:
                    s = (c + r) * d1[:, None]
                s = band_and_mask(s, a, n, lo, hi, mask, b, s1, q0, k0, m0, mrows, ORDER, G, M, S2, BAND, MASK)
                hm = ct.maximum(gm, ct.rowmax(s))
                p, dm, gl = softmax_rescale(s, gm, gl, hm)
                mp = ct.exp(ct.rowmax(s) - guarded_max(hm)) + MLA_FQ_EPS
                if QUANT == "int8":
                    p8 = ct.cast(ct.cast(p * P_RANGE / mp[:, None], ct.float16), ct.int8)
                else:
                    p8 = ct.cast(fp8_rne(p * FP8_MAX / mp[:, None]), ct.float16)
                gm = hm
            with ct.cube():
                o = ct.mma(p8, kv[ct.ds(a, S2, valid=n), 0:DV])
            with ct.vector():
                if QUANT == "int8":
                    o = ct.cast(o, ct.float32, rounding="round")
                go = (go * dm[:, None]) * picked(second, dv) + (o * mp[:, None]) * picked(later, dv)
        with ct.vector():
            ok, glsafe, res = normalised(go * picked(1 - min(j1 - j0 - 1, 1), dv), gl)
            ov = fold_rows(out, b, n2, s1, q0, OUT_LAYOUT, ORDER, G)
            if QUANT == "int8":
                res = res * _INV_P_RANGE
            else:
                res = res * _INV_FP8_MAX
            ct.store(ov[ct.ds(m0, M, valid=mrows), 0:DV], ct.cast(res, out.dtype, rounding="round"))
            if LSE:
                lv = lse_rows(lse, b, n2, s1, q0, TOKEN, ORDER, G)
                ct.store(lv[ct.ds(m0, M, valid=mrows)], ct.where(ok, gm + ct.log(glsafe), EMPTY_LSE))
