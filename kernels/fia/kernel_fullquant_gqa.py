"""The Ascend950 FP8 full-quant GQA kernel (FP8 query, key and value; quant modes 3/3/2) in the tile language.

Model
-----
``fia_fullquant_gqa`` is ``FiaTilingFullQuantGqaArch35``'s kernel (``FAFullQuantGqaBlockVec``: the per-token-head
vector functions ``ProcessVec1VfDnPerTokenHead`` and ``FlashUpdateNew`` / ``FlashUpdateLastNew`` /
``LastDivNew``) as the chip computes it, driven by the tiling's row tasks (per query head, 128 rows, S2 blocks
of 256). With dq the query's per-token-head scale, dk the key's per-token scale, dv the value's per-head
scale, lp = ln(quant_scale1) (fp32; 0 without it) and fp8(x) the RNE cast onto the e4m3fn grid saturated to
±448 (``fp8_rne``), per S2 block, everything fp32::

    C1  c  = q · kᵀ                          fp8 x fp8 -> fp32 (exact products)
    V1  s  = (c · (dq · scale)) · dk, masked -> -inf
        hm = max(gm, rowmax(s) - lp); p = exp(s - hm); dm = exp(gm - hm); gl = gl · dm + rowsum(p); gm = hm
        p8 = fp8(p)
    C2  o  = p8 · v                          fp8 x fp8 -> fp32
    V2  go = o                               (the row's first block: raw, not yet dequantised)
        go = (go · dm) · dv + o · dv         (its second block: the first block's dequant is caught up)
        go = go · dm + o · dv                (later blocks)

and at the row's end out = go / gl, or (go · dv) / gl for a row of one block, cast to the output dtype (fp16 or
bf16) rounding half away from zero (``Cast`` CAST_ROUND), lse = gm + log(gl) (the ln(quant_scale1) in gm and the
quant_scale1 factor in gl cancel).

The simulator has no 8-bit float tiles: the host widens the FP8 query and caches to fp16 (exact, as
``launch.float_cache_widened`` does for the antiquant caches), so the cube multiplies fp16 tiles holding FP8
values (the products are exact in fp32 either way); P is rounded onto the FP8 grid in fp32 (``fp8_rne``) and
handed to the cube as fp16 (exact). That rounding is a dozen vector passes where the chip's ``Cast`` (RINT, SAT)
is one, and the cost model books them all: on a 512 x 4096 causal call the kernel times about 1.8x the bf16
non-quant kernel (0.9x without the rounding). The chip's masked scores are -3.4e38 rather than -inf; a row
that sees a key gets the same result (a fully masked block is wiped by the next block's exp(gm - hm) = 0).
op_host's 128-row tasks run in row passes of 64 (``row_passes``), the rows each of the chip's two vector cores
takes.

Invariants
----------
* The task tables, band / mask reading and output / lse views are ``fia_attention``'s (``kernel.py``); the key
  scales are read per KV position through the block table as the paged antiquant modes read theirs
  (``kernel_antiquant.token_rows``); the query scales are an (N1, T, 1) view read as the query is.
* Not here (the host refuses them by name, ``fullquant_gqa.py``): flash decode, pse, a learnable sink, post-quant,
  hooks.
* A row with no visible key gives 0 and lse ``EMPTY_LSE``.
"""

from __future__ import annotations

import cvtile.dsl as ct

from ..merge_state import softmax_rescale
from .kernel import band_and_mask, band_bounds, batch_extent, empty_state, fold_rows, lse_rows, normalised, \
    paged_kv_rows, task_fields
from .kernel_antiquant import token_params, token_rows

__all__ = ["fia_fullquant_gqa", "FP8_MAX"]

#: the largest finite float8_e4m3fn (the SAT cast's bound)
FP8_MAX = 448.0
#: 1 / ln 2
_INV_LN2 = 1.4426950408889634


@ct.inline
def fp8_rne(p):
    """p (fp32, >= 0) rounded to the float8_e4m3fn grid, ties to even, saturated to 448: p / u rounded to an
    integer (RNE) and scaled back by u, u = 2^(e-3) the grid's spacing in p's binade [2^e, 2^(e+1)) (e >= -6;
    below 2^-6 the subnormal grid's 2^-9). e comes from floor(log2 p): where the fp32 log misses the binade by
    one (only within a few ulps of a power of two), p / u lands next to 16 (or 8) and rounds to the same value,
    so the result is exact (``test_fia_fullquant_gqa950`` checks every FP8 value, midpoint and neighbour)."""
    x = ct.minimum(p, FP8_MAX)
    e = ct.floor(ct.log(ct.maximum(x, 2.0 ** -6)) * _INV_LN2)
    ulp = 2.0 ** (e - 3.0)
    return ct.cast(ct.cast(x / ulp, ct.int32, rounding="rint"), ct.float32) * ulp


@ct.inline
def picked(f, x):
    """x if the flag f (0 or 1) is set, else 1.0, exactly (one term is 0)."""
    return 1.0 * (1 - f) + x * f


@ct.inline
def fq_gqa_step(q1, kv, vv, ksr, dqs, a, m, later, second, dvs, lnp, gm, gl, go, b, s1, q0, k0, m0, mrows, lo,
                hi, mask, ORDER, G, M, S2, D, DV, BAND, MASK):
    """One KV block of m positions from position a: C1, V1 (the scales, masks, online softmax with ln p_scale,
    P's FP8 rounding), C2, V2 (the value scale as the chip applies it: ``later`` 0 on the row's first block,
    ``second`` 1 on its second); returns the updated (gm, gl, go)."""
    with ct.cube():
        c = ct.mma(q1, kv[ct.ds(a, S2, valid=m), 0:D], trans_b=True)
    with ct.vector():
        s = (c * dqs[:, None]) * token_params(ksr, a, m, S2)[None, :]
        s = band_and_mask(s, a, m, lo, hi, mask, b, s1, q0, k0, m0, mrows, ORDER, G, M, S2, BAND, MASK)
        hm = ct.maximum(gm, ct.rowmax(s) - lnp)
        p, dm, gl = softmax_rescale(s, gm, gl, hm)
        p8 = ct.cast(fp8_rne(p), ct.float16)
    with ct.cube():
        o = ct.mma(p8, vv[ct.ds(a, S2, valid=m), 0:DV])
    with ct.vector():
        go = (go * dm[:, None]) * picked(second, dvs) + o * picked(later, dvs)
    return hm, gl, go


@ct.jit
def fia_fullquant_gqa(q, k, v, out, lse, mask, block_table, tasks, task_ptr, qlen, kvlen, qoff, kvoff, pre, nxt,
                      dq, ks, vs, scale, lnp, CACHE: ct.constexpr, LAYOUT: ct.constexpr, OUT_LAYOUT: ct.constexpr,
                      ORDER: ct.constexpr, TOKEN: ct.constexpr, G: ct.constexpr, M: ct.constexpr,
                      S2: ct.constexpr, D: ct.constexpr, DV: ct.constexpr, BAND: ct.constexpr, MASK: ct.constexpr,
                      LSE: ct.constexpr, EMPTY_LSE: ct.constexpr):
    core = ct.block_idx()
    for t in range(task_ptr[core], task_ptr[core + 1]):
        b, n2, m0, mrows, j0, j1 = task_fields(tasks, t)
        s1, s2, q0, k0 = batch_extent(qlen, kvlen, qoff, kvoff, b)
        qv = fold_rows(q, b, n2, s1, q0, LAYOUT, ORDER, G)
        kv = paged_kv_rows(k, block_table, b, n2, s2, D, CACHE)
        vv = paged_kv_rows(v, block_table, b, n2, s2, DV, CACHE)
        ksr = token_rows(ks, block_table, b, n2, s2, True, True)
        dvs = vs[n2]
        with ct.cube():
            q1 = ct.load(qv[ct.ds(m0, M, valid=mrows), 0:D])
        with ct.vector():
            dqs = ct.load(fold_rows(dq, b, n2, s1, q0, LAYOUT, ORDER, G)[ct.ds(m0, M, valid=mrows), 0]) * scale
            gm, gl, go = empty_state(M, DV, mrows)
            lo, hi = band_bounds(pre, nxt, b, m0, mrows, s1, M, ORDER, G, BAND)
        for jj in range(j0, j1):
            kv0 = jj * S2
            n = min(S2, s2 - kv0)
            later = min(jj - j0, 1)
            gm, gl, go = fq_gqa_step(q1, kv, vv, ksr, dqs, kv0, n, later, later * (1 - min(jj - j0 - 1, 1)), dvs, lnp, gm, gl, go, b,
                                     s1, q0, k0, m0, mrows, lo, hi, mask, ORDER, G, M, S2, D, DV, BAND, MASK)
        with ct.vector():
            ok, glsafe, res = normalised(go * picked(1 - min(j1 - j0 - 1, 1), dvs), gl)
            ov = fold_rows(out, b, n2, s1, q0, OUT_LAYOUT, ORDER, G)
            ct.store(ov[ct.ds(m0, M, valid=mrows), 0:DV], ct.cast(res, out.dtype, rounding="round"))
            if LSE:
                lv = lse_rows(lse, b, n2, s1, q0, TOKEN, ORDER, G)
                ct.store(lv[ct.ds(m0, M, valid=mrows)], ct.where(ok, gm + ct.log(glsafe), EMPTY_LSE))
