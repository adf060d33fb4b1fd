"""The Ascend 950 KV-antiquant kernel (int8, int4, FP8, HiFloat8 or MXFP4 key/value cache, fp16/bf16 query) in
the tile language, and with SUB the Atlas A2/A3 PromptFlashAttention route's KvAntiquant path (int8 cache).

Model
-----
``fia_dequant`` is the arch35 antiquant path of FusedInferAttentionScoreTilingImpl as the chip computes it: the
vector cores dequantise each K and V block before the cube sees it (the 950 template's ``AntiquantVF``), and hand
the dequantised block to the cube, which then runs the non-quant flow:

    V0  K' = (K + key_offset) · key_scale          (query dtype; the vector's rounding at each step)
    C1  s = Q · K'ᵀ                                (fp32)
    V1  s · scale (+ pse), band and mask, online softmax; P cast to the query's dtype
    V0' V' = (V + value_offset) · value_scale
    C2  o = P · V'
    V2  go = go · dm + o;  at the row's end  out = go / gl

The dequantised blocks K' and V' are hand-offs (vector -> cube) like the scores and P, so the pipeline pass
overlaps the steps as on the chip: the vector dequantises the blocks of later steps while the cube multiplies
earlier ones (five hand-offs, ten of the 950's eleven cross-core flags). They take the GM route
(``ct.through_gm``): a 512 x 128 block in the query's dtype is 128 KB, and the 950's on-chip UB -> L1 route
would need three such slots for K and three for V in the cube's 512 KB L1. The chip's template instead moves
them on chip in sub-blocks, so this kernel's GM round trip (the vector's store, the cube's read) is traffic the
chip does not have; the cost model times what this kernel does.

V0 per cache: int8 or int4 values cast exactly to the query's dtype (an int4 cache reaches the kernel as its
int8 values, ``golden.int4``), then plus the offset, times the scale, each step rounded to the query's dtype,
per-token parameters (fp32) first rounded to it; FP8 E4M3 values (the cache's ``float8_e4m3fn`` codes, cast
exactly to the query's dtype; no offset) times the scale, per channel (mode 0) or per token (modes 1 and 4, the
fp32 scale rounded to the query's dtype as for int8: the 950's FP8 per-token vector functions); HiFloat8 values
(uint8 codes widened exactly to the query's dtype through ``golden.hifloat8.HIF8_TABLE``, as the 950's int8 path
casts them; per-channel mode 0 only, no offset: op_host's rules) times the scale; MXFP4 (mode 6, ``GROUP``) FP4
values (widened to bf16) times their group's bf16 power of two, in bf16, then cast to the query's dtype.

Caches: dense, or paged through the block table (``kernel_antiquant.cache_rows``): BnBsH, BnNBsD or NZ, which
the 950 template copies in fractals of 16 values whatever the cache's dtype (``golden.nz.antiquant_nz_fraction``;
read in place, ``kernel.paged_kv_rows``); the dequantisation does not depend on the layout.

Per-channel kinds (modes 0 and 2) read one (D,) row of the (N2, D) tables per task; per-token kinds (1, 3 and the
paged 4, 5) the (S2,) parameters of the block's KV positions (``kernel_antiquant.param_rows``: at the batch's
first KV position plus the position, or through the block table); the group kind an (S2, D) block of kv head
n2's (S', D) row of the (B, N2, S', D) tables, at the same positions; with an NZ cache (GROUP_NZ) the scales are
in the 950's NZ order, (B, N2, D/32, S2), and the kernel reads kv head n2's (D, S2) rows across
(``golden.antiquant``: the tables (B, N2, D, S2), S2 the block table's columns times the block size). Without a
shared prefix the 950 spaces the (b, n2) rows of the per-token + per-head (mode 3) and group (mode 6) tensors by
op_host's S of key, not their S': the tables the kernel gets are then the tensors' first B*N2*S2 rows as
(B, N2, S2[, D]) (``golden.antiquant.chip_seq_stride``), so it reads row (b, n2) where the chip does.

A2/A3 PromptFlashAttention's KvAntiquant path (SUB > 0: an fp16 query on the PFA route with an int8 cache, per
channel or per tensor, ``golden.antiquant.pfa_dequantises``): the same V0, done as the chip's AscendAntiQuant
does it, in sub-blocks of SUB rows stored to the core's GM workspaces wsk / wsv, which the cube then reads whole
(``pfa_step``); the chip waits on MTE3 -> MTE2 before each matmul, and the loop carries a GM-order channel, so
these steps run in program order. The dequantised values do not depend on SUB (the dequantisation is
elementwise); op_host's kvAntiquantSInnerSize comes from a UB-fit loop cvtile does not mirror.

System prefix (PREFIX, dense caches: op_host takes no prefix with a paged one): a batch attends to the plen
prefix positions (batch 0 of key/value_shared_prefix, quantised as the cache is), then its own KV, as
``fia_attention`` walks them (the rows' S2 blocks span both, a block straddling plen is two steps); the
prefix's blocks dequantise with the same parameters. These steps read one of two caches (``prefix_step``), so
their blocks reach the cube through the kernel's own GM workspaces wsk / wsv, in program order: not pipelined.
Per-token parameters are read as the 950 template reads them: the prefix's positions at [0, plen) of the table,
the own KV's S' - S of key into it (``pbase``, whatever plen is), where the A2/A3 MSD kernel reads them right
after the prefix's.

Invariants
----------
* The task tables, GQA fold, masks, pse, lse, flash-decode slots, paged-cache views and post-quant are
  ``fia_attention``'s (``kernel.py``) and the antiquant spec is ``golden.antiquant``'s, so this kernel, the MSD
  kernel and the golden read one interpretation of the parameters.
* Not here (the API refuses them by name): a learnable sink, token layouts (TND/NTD), per-token and
  per-token-group parameters with a key/value tensor list (CACHE "list" reads each batch's tensor from the
  list's arena, its masks, pse and parameters from column 0), and score/mask hooks.
* A row with no visible key gives 0 and lse ``EMPTY_LSE``.
"""

from __future__ import annotations

import cvtile.dsl as ct

from .kernel import batch_extent, column_start, fold_rows, kv_rows, normalised, prefix_cut, prefix_part, \
    row_block_start, row_epilogue, task_fields, task_span
from .kernel_antiquant import cache_rows, param_rows, softmax_block

__all__ = ["fia_dequant"]


@ct.inline
def dequantised(x, ps, po, n2, a, m, S2, COLS, QT, PER_TOKEN, OFFSET, GROUP):
    """(x + offset) · scale of an int8 block x (m KV positions from position a) in the query's dtype QT: the
    int8 values convert exactly, the parameters (``block_params`` of the tables ps / po) round to QT, and the add
    and the multiply round as the chip's vector does. GROUP (MXFP4): x holds FP4 values as bf16, ps is the
    (S', D) row of bf16 powers of two; the product is taken in bf16, then cast to QT."""
    if GROUP:
        y = ct.cast(ct.cast(x, ct.bfloat16) * ct.load(ps[ct.ds(a, S2, valid=m), 0:COLS]), QT)
    else:
        y = ct.cast(x, QT)
        if OFFSET:
            y = y + block_params(po, n2, a, m, S2, COLS, QT, PER_TOKEN)
        y = y * block_params(ps, n2, a, m, S2, COLS, QT, PER_TOKEN)
    return y


@ct.inline
def block_params(table, n2, a, m, S2, COLS, QT, PER_TOKEN):
    """The parameters of the KV block at position a (m positions) in the query's dtype QT: a per-token (S2, 1)
    column of the ``token_rows`` row ``table`` (fp32 rounded to QT), or the (1, COLS) channel row of kv head n2."""
    if PER_TOKEN:
        col = ct.cast(ct.load(table[ct.ds(a, S2, valid=m)]), QT)[:, None]
    else:
        col = ct.cast(ct.load(table[n2, 0:COLS]), QT)[None, :]
    return col


@ct.inline
def staged_block(view, row, at, m, n2, ps, po, S2, COLS, QT, PER_TOKEN, OFFSET, GROUP):
    """The dequantised (S2, COLS) block (``dequantised``) of the m cache rows of ``view`` from ``row``, their
    per-token parameters at position ``at`` of the tables, marked to reach the cube through the GM workspace
    (``ct.through_gm``: its slots, a block of S2 x COLS in the query's dtype per preload stage for K and for V,
    do not fit the cube's L1 beside the other operands)."""
    x = ct.load(view[ct.ds(row, S2, valid=m), 0:COLS])
    return ct.through_gm(dequantised(x, ps, po, n2, at, m, S2, COLS, QT, PER_TOKEN, OFFSET, GROUP))


@ct.inline
def dq_step(q1, kv, vv, row, at, a, m, gm, gl, go, scale, b, n2, s1, q0, k0, m0, mrows, lo, hi, mask, pse, ks, ko,
            vs, vo, ORDER, G, M, S2, D, DV, PSE, PSE_ONE_ROW, BAND, MASK, PER_TOKEN, OFFSET, GROUP, P_DTYPE):
    """One KV step over the m rows of kv / vv from ``row`` (their per-token parameters at ``at``), which are the
    positions a.. of the batch's attended sequence (k0: where the batch's masks and pse start, ``column_start``):
    V0, C1, V1, V0', C2, V2; returns the updated (gm, gl, go). The dequantised blocks are
    hand-offs like the scores and P, so the pipeline pass overlaps the steps as it does the non-quant kernel's
    (V0 of a later step while the cube runs C1 and C2 of earlier ones)."""
    with ct.vector():
        kd = staged_block(kv, row, at, m, n2, ks, ko, S2, D, q1.dtype, PER_TOKEN, OFFSET, GROUP)
    with ct.cube():
        s = ct.mma(q1, kd, trans_b=True)
    with ct.vector():
        p, dm, gl, gm = softmax_block(s * scale, gm, gl, a, m, b, n2, s1, q0, k0, m0, mrows, lo, hi, mask, pse,
                                      ORDER, G, M, S2, PSE, PSE_ONE_ROW, BAND, MASK)
        p = ct.cast(p, P_DTYPE)
        vd = staged_block(vv, row, at, m, n2, vs, vo, S2, DV, q1.dtype, PER_TOKEN, OFFSET, GROUP)
    with ct.cube():
        o = ct.mma(p, vd)
    with ct.vector():
        go = go * dm[:, None] + o
    return gm, gl, go


@ct.inline
def stage_prefix_block(ws, core, kv, kpv, plen, pbase, k0, a, m, n2, ps, po, S2, COLS, QT, PER_TOKEN, OFFSET,
                       GROUP):
    """With a system prefix: dequantise the m rows of positions a.. of the batch's attended sequence into the
    core's workspace ws[core] (the block lies on one side of plen: ``prefix_cut``): the prefix's rows kpv at a,
    parameters at a, or the own rows at a - plen, parameters at k0 + pbase + a - plen (the chip's own-KV
    parameters start S' - S of key into the table: ``launch._own_params_start``)."""
    rows = ct.ds(0, S2, valid=m)
    if a < plen:
        ct.store(ws[core, rows, 0:COLS], dequantised(ct.load(kpv[ct.ds(a, S2, valid=m), 0:COLS]), ps, po, n2, a, m,
                                                     S2, COLS, QT, PER_TOKEN, OFFSET, GROUP))
    else:
        ct.store(ws[core, rows, 0:COLS], dequantised(ct.load(kv[ct.ds(a - plen, S2, valid=m), 0:COLS]), ps, po, n2,
                                                     k0 + pbase + a - plen, m, S2, COLS, QT, PER_TOKEN, OFFSET,
                                                     GROUP))


@ct.inline
def prefix_step(q1, kv, vv, kpv, vpv, plen, pbase, wsk, wsv, core, a, m, gm, gl, go, scale, b, n2, s1, q0, k0, m0,
                mrows, lo, hi, mask, pse, ks, ko, vs, vo, ORDER, G, M, S2, D, DV, PSE, PSE_ONE_ROW, BAND, MASK,
                PER_TOKEN, OFFSET, GROUP, P_DTYPE):
    """``dq_step`` with a system prefix, whose steps read the prefix's rows or the batch's own: the dequantised
    blocks go through the core's GM workspaces wsk / wsv, which the kernel writes and the cube reads in program
    order (a hand-off's tile would be a branch result whose rows each AIV's load counts inside the branch; two
    loops, one per source, would need twice the cross-core flags the 950 has). So these steps are not
    pipelined: the loop carries a GM-order channel."""
    with ct.vector():
        stage_prefix_block(wsk, core, kv, kpv, plen, pbase, k0, a, m, n2, ks, ko, S2, D, q1.dtype, PER_TOKEN, OFFSET,
                           GROUP)
    p, dm, gl, gm = staged_scores(q1, wsk, core, a, m, gm, gl, scale, b, n2, s1, q0, k0, m0, mrows, lo, hi, mask,
                                  pse, ORDER, G, M, S2, D, PSE, PSE_ONE_ROW, BAND, MASK, P_DTYPE)
    with ct.vector():
        stage_prefix_block(wsv, core, vv, vpv, plen, pbase, k0, a, m, n2, vs, vo, S2, DV, q1.dtype, PER_TOKEN,
                           OFFSET, GROUP)
    return gm, gl, staged_update(p, wsv, core, m, dm, go, S2, DV)


@ct.inline
def staged_scores(q1, wsk, core, a, m, gm, gl, scale, b, n2, s1, q0, k0, m0, mrows, lo, hi, mask, pse, ORDER, G, M,
                  S2, D, PSE, PSE_ONE_ROW, BAND, MASK, P_DTYPE):
    """C1 over the m dequantised keys staged in the core's workspace wsk[core], and V1 (``softmax_block``, P cast
    to P_DTYPE): returns (p, dm, gl, gm)."""
    with ct.cube():
        s = ct.mma(q1, wsk[core, ct.ds(0, S2, valid=m), 0:D], trans_b=True)
    with ct.vector():
        p, dm, gl, gm = softmax_block(s * scale, gm, gl, a, m, b, n2, s1, q0, k0, m0, mrows, lo, hi, mask, pse,
                                      ORDER, G, M, S2, PSE, PSE_ONE_ROW, BAND, MASK)
        p = ct.cast(p, P_DTYPE)
    return p, dm, gl, gm


@ct.inline
def staged_update(p, wsv, core, m, dm, go, S2, DV):
    """C2 over the m dequantised values staged in the core's workspace wsv[core], and V2: the updated go."""
    with ct.cube():
        o = ct.mma(p, wsv[core, ct.ds(0, S2, valid=m), 0:DV])
    with ct.vector():
        go = go * dm[:, None] + o
    return go


@ct.inline
def stage_sub_blocks(ws, core, view, row, at, m, n2, ps, po, SUB, COLS, QT, PER_TOKEN, OFFSET):
    """A2/A3 PromptFlashAttention's KvAntiquant staging: the m cache rows of ``view`` from ``row`` dequantised
    (``dequantised``; parameters at position ``at``) in sub-blocks of SUB rows into the core's workspace ws[core],
    each sub-block a load, the dequantisation and a store of the vector (the chip's AscendAntiQuant per
    kvAntiquantSInnerSize rows, into its GM workspace)."""
    for h in range(0, (m + SUB - 1) // SUB):
        r = h * SUB
        mh = min(SUB, m - r)
        with ct.vector():
            x = ct.load(view[ct.ds(row + r, SUB, valid=mh), 0:COLS])
            ct.store(ws[core, ct.ds(r, SUB, valid=mh), 0:COLS],
                     dequantised(x, ps, po, n2, at + r, mh, SUB, COLS, QT, PER_TOKEN, OFFSET, False))


@ct.inline
def pfa_step(q1, kv, vv, wsk, wsv, core, row, at, a, m, gm, gl, go, scale, b, n2, s1, q0, k0, m0, mrows, lo, hi,
             mask, pse, ks, ko, vs, vo, ORDER, G, M, S2, SUB, D, DV, PSE, PSE_ONE_ROW, BAND, MASK, PER_TOKEN, OFFSET,
             P_DTYPE):
    """``dq_step`` as A2/A3's PromptFlashAttention runs it with an int8 cache (its KvAntiquant path): K and V
    dequantised in sub-blocks of SUB rows (``stage_sub_blocks``) into the core's GM workspaces wsk / wsv, which
    the cube then reads whole, in program order (the chip waits on MTE3 -> MTE2 before each matmul; the loop
    carries a GM-order channel, so these steps are not pipelined)."""
    stage_sub_blocks(wsk, core, kv, row, at, m, n2, ks, ko, SUB, D, q1.dtype, PER_TOKEN, OFFSET)
    p, dm, gl, gm = staged_scores(q1, wsk, core, a, m, gm, gl, scale, b, n2, s1, q0, k0, m0, mrows, lo, hi, mask,
                                  pse, ORDER, G, M, S2, D, PSE, PSE_ONE_ROW, BAND, MASK, P_DTYPE)
    stage_sub_blocks(wsv, core, vv, row, at, m, n2, vs, vo, SUB, DV, q1.dtype, PER_TOKEN, OFFSET)
    return gm, gl, staged_update(p, wsv, core, m, dm, go, S2, DV)


@ct.jit
def fia_dequant(q, k, v, out, lse, mask, pse, block_table, ws_o, ws_ml, tasks, task_ptr, qlen, kvlen, qoff, kvoff,
                pre, nxt, ks, ko, vs, vo, qs2, qo2, wsk, wsv, kp, vp, plen, pbase, scale, CACHE: ct.constexpr,
                LAYOUT: ct.constexpr, OUT_LAYOUT: ct.constexpr, ORDER: ct.constexpr, G: ct.constexpr,
                M: ct.constexpr, PSE: ct.constexpr, PSE_ONE_ROW: ct.constexpr, S2: ct.constexpr, D: ct.constexpr,
                DV: ct.constexpr, BAND: ct.constexpr, MASK: ct.constexpr, LSE: ct.constexpr, FD: ct.constexpr,
                P_DTYPE: ct.constexpr, EMPTY_LSE: ct.constexpr, PER_TOKEN: ct.constexpr, PER_HEAD: ct.constexpr,
                OFFSET: ct.constexpr, POSTQ: ct.constexpr = 0, QOFF: ct.constexpr = False,
                PAGED_PARAMS: ct.constexpr = False, GROUP: ct.constexpr = False, GROUP_NZ: ct.constexpr = False,
                PREFIX: ct.constexpr = False, SUB: ct.constexpr = 0):
    core = ct.block_idx()
    for t in range(task_ptr[core], task_ptr[core + 1]):
        b, n2, m0, mrows, j0, j1 = task_fields(tasks, t)
        slot = tasks[t, 6]
        kbase, kend, step = task_span(tasks, t)
        s1, s2, q0, k0 = batch_extent(qlen, kvlen, qoff, kvoff, b)
        qv = fold_rows(q, b, n2, s1, q0, LAYOUT, ORDER, G)
        kv, vv = cache_rows(k, v, block_table, b, n2, s2, k0, plen, D, DV, LAYOUT, CACHE)
        c0 = column_start(k0, CACHE)   # (a list's k0 is its tensor's place in the arena, not a column)
        ksr, kor, vsr, vor = param_rows(ks, ko, vs, vo, block_table, b, n2, s2, PER_TOKEN, PER_HEAD, OFFSET,
                                        PAGED_PARAMS, GROUP, GROUP_NZ)
        kpv = kv
        vpv = vv
        if PREFIX:   # the batch's own KV follows the plen prefix positions (batch 0 of the prefix tensors)
            kpv = kv_rows(kp, 0, n2, plen, 0, LAYOUT)
            vpv = kv_rows(vp, 0, n2, plen, 0, LAYOUT)
        q1, gm, gl, go, lo, hi = row_block_start(qv, pre, nxt, b, m0, mrows, s1, M, D, DV, ORDER, G, BAND)
        if PREFIX:   # a block straddling plen is two steps, the prefix's rows then the own KV's
            for jj in range(j0, j1):
                kv0 = kbase + jj * step
                n = min(step, kend - kv0)
                cut, straddle = prefix_cut(kv0, n, plen)
                for h in range(1 + straddle):
                    a, m = prefix_part(kv0, n, cut, straddle, h)
                    gm, gl, go = prefix_step(q1, kv, vv, kpv, vpv, plen, pbase, wsk, wsv, core, a, m, gm, gl, go,
                                             scale, b, n2, s1, q0, k0, m0, mrows, lo, hi, mask, pse, ksr, kor, vsr,
                                             vor, ORDER, G, M, S2, D, DV, PSE, PSE_ONE_ROW, BAND, MASK, PER_TOKEN,
                                             OFFSET, GROUP, P_DTYPE)
        elif SUB:   # A2/A3 PromptFlashAttention's KvAntiquant path
            for jj in range(j0, j1):
                kv0 = kbase + jj * step
                n = min(step, kend - kv0)
                gm, gl, go = pfa_step(q1, kv, vv, wsk, wsv, core, kv0, c0 + kv0, kv0, n, gm, gl, go, scale, b, n2,
                                      s1, q0, c0, m0, mrows, lo, hi, mask, pse, ksr, kor, vsr, vor, ORDER, G, M, S2,
                                      SUB, D, DV, PSE, PSE_ONE_ROW, BAND, MASK, PER_TOKEN, OFFSET, P_DTYPE)
        else:
            for jj in range(j0, j1):
                kv0 = kbase + jj * step
                n = min(step, kend - kv0)
                gm, gl, go = dq_step(q1, kv, vv, kv0, c0 + kv0, kv0, n, gm, gl, go, scale, b, n2, s1, q0, c0, m0,
                                     mrows, lo, hi, mask, pse, ksr, kor, vsr, vor, ORDER, G, M, S2, D, DV, PSE,
                                     PSE_ONE_ROW, BAND, MASK, PER_TOKEN, OFFSET, GROUP, P_DTYPE)
        with ct.vector():
            ok, glsafe, res = normalised(go, gl)
            row_epilogue(res, ok, gm, gl, gm + ct.log(glsafe), out, lse, ws_o, ws_ml, qs2, qo2, slot, tasks[t, 10], b,
                         n2, s1, q0, m0, mrows, OUT_LAYOUT, ORDER, False, G, M, DV, FD, POSTQ, QOFF, LSE, EMPTY_LSE)
