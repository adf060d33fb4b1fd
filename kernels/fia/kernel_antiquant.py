"""The A2/A3 MSD KV-antiquant kernel (int8 or int4 key/value cache, fp16/bf16 query) in the tile language.

Model
-----
``fia_antiquant`` is the arch22 IFA antiquant template (IFATiling, the legacy decode route) as the chip
computes it, and PromptFlashAttention's MSD path (the legacy PFA route with the key's and the value's own
parameters and a query S of at most 16, per channel (bf16) or per token (fp32 (B, S) tables): its MSD_ON template, which splits and recombines the
same way with constants of its own, over op_host's PFA row tasks): the int8 (or int4) K/V blocks go to the cube
as they are, and the fp32 operand on the other side is split into digits of the cache's width (MSD,
"multi-step decomposition"): for a row x of fp32 values, ITER digits, a digit range R and a base E (IFATiling's
int8: R 127, E 254, ITER 3 with inner_precise 0 and 2 otherwise; int4: R 7.49, E 14.98, ITER 4;
PromptFlashAttention's: R 127.49, E 254.98, ITER 2; ``launch.msd_constants``)

    amax = rowmax|x|;  a = x · (R / amax)                        (zero rows: a = 0)
    d0 = round(a);  r1 = (a - d0) · E;  d1 = round(r1);  r2 = (r1 - d1) · E;  d2 = round(r2) ...
    x · K ≈ amax · (((c0 + c1 · W1) + c2 · W2) + c3 · W3) · (1/R),  cᵢ = dᵢ · K  (int x int -> int32, exact)

with the chip's fp32 weights W1 = 1/E, Wᵢ = Wᵢ₋₁ / E (each rounded to fp32, as its scalar unit divides) and
1/R rounded to fp32 (round: ties away from zero, each digit a saturating int8, which holds an int4 digit too;
the fp32 roundings of every step are the chip's). The int4 cache reaches the kernel unpacked to int8 values in
[-8, 7] (``int4_kv``): the products are the cube's int4 x int4 ones.

Per-channel kinds (modes 0 and 2: one scale / offset per (kv head, channel)):

    C1  q' = q · key_scale;  s = MSD(q') · Kᵀ       (the key offset adds q'·offset to a whole row: softmax drops
                                                     it, the lse adds it back: lse += scale · rowsum(q' · offset))
    V1  s · scale (+ pse), masks, online softmax; P stays fp32
    C2  o = MSD(P) · V with amax fixed at 1 (P ≤ 1: a = P · 127)
    V2  go = go · dm + o;  at the row's end  out = (go / gl + value_offset) · value_scale

Per-token kinds (modes 1 and 3: one scale / offset per KV position, of the batch (mode 1) or of the batch and
kv head (mode 3); modes 4 and 5 likewise, their tables paged as the KV, PAGED_PARAMS):

    C1  s = MSD(q) · Kᵀ;  s = (s + rowsum(q) · key_offset[j]) · key_scale[j]
    V1  s · scale (+ pse), masks, online softmax;  P' = P · value_scale[j]
    C2  o = MSD(P') · V + rowsum(P' · value_offset[j])
    V2  go = go · dm + o;  out = go / gl

Flash decode (a split row): each piece writes its finished (scaled, offset) partial and its softmax state to
the workspace, the max raised by the lse's key-offset term, and ``fia_fd_combine`` merges them as for the
non-quant kernel (the same constant on every piece's max leaves the weights unchanged). Post-quant
(quant_scale2) applies to the final rows as in ``fia_attention``.

Invariants
----------
* The task tables, masks, pse, lse and paged-cache views are ``fia_attention``'s (``kernel.py``): the same
  tiling, the same GQA fold, left padding (qoff / kvoff), system prefix (PREFIX, its straddling block in two
  steps), paged caches (CACHE "BnBsH", "BnNBsD" or "NZ": (blocks, N2, D/32, block_size, 32) for int8,
  (blocks, N2, D/64, block_size, 64) for int4) and key/value tensor lists (CACHE "list": batch b's rows from
  kvoff[b] of the list's arena, ``kv_list``; its masks, pse and per-token parameters from column 0,
  ``column_start``);
  no token layouts or sink (the API and ``run_fia`` refuse them with antiquant). Per-token parameters of modes
  1/3 are read at the batch's first KV position plus the position in the attended sequence (prefix first), as
  the chip's ``antiqParamOffsetPerToken``, whether the cache is dense or paged; those of modes 4/5
  (PAGED_PARAMS) through the block table at the block and row that hold the position's K/V.
* A row with no visible key gives 0 (not the offset · scale) and lse ``EMPTY_LSE``.
* A zero row of the split operand gets zero digits (amax 0). PromptFlashAttention's MsdMatmulPreProcess divides
  R by amax unguarded there; what its vector then gives for 0 · inf is not modelled.
"""

from __future__ import annotations

import cvtile.dsl as ct

from .kernel import band_and_mask, band_bounds, column_start, empty_state, fold_rows, kv_rows, normalised, \
    paged_kv_rows, prefix_cut, prefix_part, pse_rows, row_epilogue, row_task, sink_softmax_step

@ct.inline
def msd_split(x, MSD):
    """(amax, a) of the fp32 rows x: amax = rowmax|x| and a = x · (R / amax), 0 on a zero row (R = MSD[0])."""
    amax = ct.rowmax(ct.abs(x))
    factor = ct.where(amax > 0.0, MSD[0] / ct.where(amax > 0.0, amax, 1.0), 0.0)
    return amax, x * factor[:, None]


@ct.inline
def store_digits(ws, core, rows, x, cols, ITER, COLS, MSD):
    """The ITER digits of x (|x| <= the digit range, ``rows`` valid rows, ``cols`` valid columns) stacked by rows
    into the core's int8 workspace ws[core]: digit i at rows [i·rows, (i+1)·rows) (the chip's msdIterNum·G rows
    of the A operand). d0 = round(x), then the digits of the residual times the base E = MSD[1] (round: ties
    away from zero)."""
    r = x
    for i in ct.static_range(ITER):
        if i > 0:
            r = (r - ct.cast(d, ct.float32)) * MSD[1]
        d = ct.cast(r, ct.int8, rounding="round")
        ct.store(ws[core, ct.ds(i * rows, x.shape[0], valid=rows), ct.ds(0, COLS, valid=cols)], d)


@ct.inline
def msd_combine(ws, core, rows, M, cols, COLS, ITER, MSD):
    """The fp32 value of the stacked digit products in ws[core] (int32, digit i at rows [i·rows, (i+1)·rows),
    ``cols`` valid columns): (((c0 + c1·W1) + c2·W2) + c3·W3) · (1/R) over the ITER digits, the chip's fp32
    steps (MSD = (R, E, W1, W2, W3, 1/R): ``launch.msd_constants``)."""
    r = ct.cast(ct.load(ws[core, ct.ds(0, M, valid=rows), ct.ds(0, COLS, valid=cols)]), ct.float32)
    for i in ct.static_range(1, ITER):
        c = ct.cast(ct.load(ws[core, ct.ds(i * rows, M, valid=rows), ct.ds(0, COLS, valid=cols)]), ct.float32)
        r = r + c * MSD[1 + i]
    return r * MSD[5]


@ct.inline
def token_rows(t, bt, b, n2, s2, PER_HEAD, PAGED):
    """The per-token parameter row of (b, n2) over the batch's KV positions: of a (B, N2 | 1, S') table, or
    (PAGED, modes 4/5) of a (block_num, N2 | 1, block_size) table read through the batch's block table row
    bt[b] as its paged KV is (s2 positions)."""
    if PAGED:
        if PER_HEAD:
            row = t[:, n2].paged(bt[b], s2)
        else:
            row = t[:, 0].paged(bt[b], s2)
    else:
        if PER_HEAD:
            row = t[b, n2]
        else:
            row = t[b, 0]
    return row


@ct.inline
def token_params(row, kv0, n, S2):
    """The fp32 (S2,) per-token parameters of KV positions kv0.. of a ``token_rows`` row."""
    return ct.cast(ct.load(row[ct.ds(kv0, S2, valid=n)]), ct.float32)


@ct.inline
def cache_rows(k, v, block_table, b, n2, s2, k0, plen, D, DV, LAYOUT, CACHE):
    """(kv, vv): batch b's kv head n2 of the int8 cache, dense or a tensor list's arena (its own s2 - plen
    positions from k0, after a plen system prefix) or paged (BnBsH, BnNBsD or NZ, read through the batch's block
    table row)."""
    if CACHE == "dense":
        kv = kv_rows(k, b, n2, s2 - plen, k0, LAYOUT)
        vv = kv_rows(v, b, n2, s2 - plen, k0, LAYOUT)
    elif CACHE == "list":   # a tensor list's arena (batch 1): batch b's own tensor starts at k0 = kvoff[b]
        kv = kv_rows(k, 0, n2, s2 - plen, k0, LAYOUT)
        vv = kv_rows(v, 0, n2, s2 - plen, k0, LAYOUT)
    else:
        kv = paged_kv_rows(k, block_table, b, n2, s2, D, CACHE)
        vv = paged_kv_rows(v, block_table, b, n2, s2, DV, CACHE)
    return kv, vv


@ct.inline
def param_rows(ks, ko, vs, vo, block_table, b, n2, s2, PER_TOKEN, PER_HEAD, OFFSET, PAGED_PARAMS, GROUP=False,
               GROUP_NZ=False):
    """The parameter views a task of (b, n2) reads: per-token kinds, the ``token_rows`` rows (read at the
    batch's positions); the group kind (mode 6, no offset), the (S', D) rows of kv head n2's (B, N2, S', D)
    tables, or with GROUP_NZ (an NZ cache) kv head n2's (D, S2) rows of the (B, N2, D, S2) tables read across
    as (S2, D), the order the 950 copies them in; channel kinds, the (N2, D) tables as they are."""
    ksr, kor, vsr, vor = ks, ko, vs, vo
    if GROUP_NZ:
        ksr, vsr = ks[b, n2].permute(1, 0), vs[b, n2].permute(1, 0)
    elif GROUP:
        ksr, vsr = ks[b, n2], vs[b, n2]
    if PER_TOKEN:
        ksr = token_rows(ks, block_table, b, n2, s2, PER_HEAD, PAGED_PARAMS)
        vsr = token_rows(vs, block_table, b, n2, s2, PER_HEAD, PAGED_PARAMS)
        if OFFSET:
            kor = token_rows(ko, block_table, b, n2, s2, PER_HEAD, PAGED_PARAMS)
            vor = token_rows(vo, block_table, b, n2, s2, PER_HEAD, PAGED_PARAMS)
    return ksr, kor, vsr, vor


@ct.inline
def softmax_block(s, gm, gl, a, m, b, n2, s1, q0, k0, m0, mrows, lo, hi, mask, pse, ORDER, G, M, S2, PSE,
                  PSE_ONE_ROW, BAND, MASK):
    """V1 of a quantised kernel's step: the scaled fp32 scores s of the attended positions a.. (m of them) plus
    pse, banded and masked, through the online softmax (no sink); returns (P in fp32, dm, gl, gm)."""
    if PSE:
        pv = pse_rows(pse, b, n2, s1, q0, ORDER, G, PSE_ONE_ROW)
        s = s + ct.cast(ct.load(pv[ct.ds(m0, M, valid=mrows), ct.ds(k0 + a, S2, valid=m)]), ct.float32)
    s = band_and_mask(s, a, m, lo, hi, mask, b, s1, q0, k0, m0, mrows, ORDER, G, M, S2, BAND, MASK)
    return sink_softmax_step(s, gm, gl, 0.0, False, False)


@ct.inline
def aq_step(qd, qmax, qsum, kv, vv, kpv, vpv, plen, a, m, gm, gl, go, core, scale, b, n2, s1, q0, k0, m0, mrows, lo,
            hi, mask, pse, ks, ko, vs, vo, wsc1, wsp, wsc2, ORDER, G, M, S2, D, DV, PSE, PSE_ONE_ROW, BAND, MASK,
            PER_TOKEN, PER_HEAD, OFFSET, ITER, PREFIX, MSD):
    """One KV step: the m positions from position a of the batch's attended sequence (the system prefix's first
    when PREFIX: positions below plen read kpv / vpv, the others the batch's own kv / vv at a - plen); k0 is
    where the batch's masks, pse and per-token parameters start (``column_start``: its first KV position in its
    tensor with left padding, 0 for a tensor list). C1 (the query digits times K), V1 (combine, per-token
    parameters, scale, pse, masks, online softmax, P's digits), C2, V2; returns the updated (gm, gl, go)."""
    with ct.cube():
        if PREFIX:
            if a < plen:
                c = ct.mma(qd, kpv[ct.ds(a, S2, valid=m), 0:D], trans_b=True)
            else:
                c = ct.mma(qd, kv[ct.ds(a - plen, S2, valid=m), 0:D], trans_b=True)
        else:
            c = ct.mma(qd, kv[ct.ds(a, S2, valid=m), 0:D], trans_b=True)
        ct.store(wsc1[core, ct.ds(0, ITER * M, valid=ITER * mrows), ct.ds(0, S2, valid=m)], c)
    with ct.vector():
        s = msd_combine(wsc1, core, mrows, M, m, S2, ITER, MSD) * qmax[:, None]
        if PER_TOKEN:
            if OFFSET:
                s = s + qsum[:, None] * token_params(ko, k0 + a, m, S2)[None, :]
            s = s * token_params(ks, k0 + a, m, S2)[None, :]
        p, dm, gl, gm = softmax_block(s * scale, gm, gl, a, m, b, n2, s1, q0, k0, m0, mrows, lo, hi, mask, pse,
                                      ORDER, G, M, S2, PSE, PSE_ONE_ROW, BAND, MASK)
        if PER_TOKEN:
            p = p * token_params(vs, k0 + a, m, S2)[None, :]
            psum = ct.zeros((M,), ct.float32, valid=mrows)
            if OFFSET:
                psum = ct.rowsum(p * token_params(vo, k0 + a, m, S2)[None, :])
            pmax, pa = msd_split(p, MSD)
        else:
            pa = p * MSD[0]
        store_digits(wsp, core, mrows, pa, m, ITER, S2, MSD)
    with ct.cube():
        pd = ct.load(wsp[core, ct.ds(0, ITER * M, valid=ITER * mrows), ct.ds(0, S2, valid=m)])
        if PREFIX:
            if a < plen:
                o = ct.mma(pd, vpv[ct.ds(a, S2, valid=m), 0:DV])
            else:
                o = ct.mma(pd, vv[ct.ds(a - plen, S2, valid=m), 0:DV])
        else:
            o = ct.mma(pd, vv[ct.ds(a, S2, valid=m), 0:DV])
        ct.store(wsc2[core, ct.ds(0, ITER * M, valid=ITER * mrows), 0:DV], o)
    with ct.vector():
        o = msd_combine(wsc2, core, mrows, M, DV, DV, ITER, MSD)
        if PER_TOKEN:
            o = o * pmax[:, None]
            if OFFSET:
                o = o + psum[:, None]
        go = go * dm[:, None] + o
    return gm, gl, go


@ct.jit
def fia_antiquant(q, k, v, out, lse, mask, pse, block_table, ws_o, ws_ml, tasks, task_ptr, qlen, kvlen, qoff, kvoff,
                  pre, nxt, ks, ko, vs, vo, qs2, qo2, wsq, wsp, wsc1, wsc2, kp, vp, plen, scale, CACHE: ct.constexpr,
                  LAYOUT: ct.constexpr,
                  OUT_LAYOUT: ct.constexpr, ORDER: ct.constexpr, G: ct.constexpr, M: ct.constexpr,
                  PSE: ct.constexpr, PSE_ONE_ROW: ct.constexpr, S2: ct.constexpr, D: ct.constexpr, DV: ct.constexpr,
                  BAND: ct.constexpr, MASK: ct.constexpr, LSE: ct.constexpr, FD: ct.constexpr,
                  EMPTY_LSE: ct.constexpr, PER_TOKEN: ct.constexpr, PER_HEAD: ct.constexpr, OFFSET: ct.constexpr,
                  ITER: ct.constexpr, MSD: ct.constexpr, POSTQ: ct.constexpr = 0, QOFF: ct.constexpr = False,
                  PREFIX: ct.constexpr = False, PAGED_PARAMS: ct.constexpr = False):
    core = ct.block_idx()
    for t in range(task_ptr[core], task_ptr[core + 1]):
        b, n2, m0, mrows, j0, j1, slot, kbase, kend, step, s1, s2, q0, k0 = row_task(tasks, t, qlen, kvlen, qoff,
                                                                                     kvoff)
        qv = fold_rows(q, b, n2, s1, q0, LAYOUT, ORDER, G)
        kv, vv = cache_rows(k, v, block_table, b, n2, s2, k0, plen, D, DV, LAYOUT, CACHE)
        c0 = column_start(k0, CACHE)
        ksr, kor, vsr, vor = param_rows(ks, ko, vs, vo, block_table, b, n2, s2, PER_TOKEN, PER_HEAD, OFFSET,
                                        PAGED_PARAMS)
        kpv = kv
        vpv = vv
        if PREFIX:   # the batch's own KV follows the plen prefix positions (batch 0 of the prefix tensors)
            kpv = kv_rows(kp, 0, n2, plen, 0, LAYOUT)
            vpv = kv_rows(vp, 0, n2, plen, 0, LAYOUT)
        with ct.vector():
            qf = ct.cast(ct.load(qv[ct.ds(m0, M, valid=mrows), 0:D]), ct.float32)
            qsum = ct.zeros((M,), ct.float32, valid=mrows)
            if PER_TOKEN:
                if OFFSET:
                    qsum = ct.rowsum(qf)
            else:
                qf = qf * ct.cast(ct.load(ks[n2, 0:D]), ct.float32)[None, :]
                if OFFSET and LSE:
                    qsum = ct.rowsum(qf * ct.cast(ct.load(ko[n2, 0:D]), ct.float32)[None, :])
            qmax, qa = msd_split(qf, MSD)
            store_digits(wsq, core, mrows, qa, D, ITER, D, MSD)
            gm, gl, go = empty_state(M, DV, mrows)
            lo, hi = band_bounds(pre, nxt, b, m0, mrows, s1, M, ORDER, G, BAND)
        with ct.cube():   # the query's digits, once per row task (the chip's Q preprocess)
            qd = ct.load(wsq[core, ct.ds(0, ITER * M, valid=ITER * mrows), 0:D])
        for jj in range(j0, j1):
            kv0 = kbase + jj * step
            n = min(step, kend - kv0)
            if PREFIX:
                cut, straddle = prefix_cut(kv0, n, plen)
                for h in range(1 + straddle):
                    a, m = prefix_part(kv0, n, cut, straddle, h)
                    gm, gl, go = aq_step(qd, qmax, qsum, kv, vv, kpv, vpv, plen, a, m, gm, gl, go, core, scale, b,
                                         n2, s1, q0, c0, m0, mrows, lo, hi, mask, pse, ksr, kor, vsr, vor, wsc1, wsp,
                                         wsc2, ORDER, G, M, S2, D, DV, PSE, PSE_ONE_ROW, BAND, MASK, PER_TOKEN,
                                         PER_HEAD, OFFSET, ITER, PREFIX, MSD)
            else:
                gm, gl, go = aq_step(qd, qmax, qsum, kv, vv, kv, vv, 0, kv0, n, gm, gl, go, core, scale, b, n2, s1,
                                     q0, c0, m0, mrows, lo, hi, mask, pse, ksr, kor, vsr, vor, wsc1, wsp, wsc2, ORDER,
                                     G, M, S2, D, DV, PSE, PSE_ONE_ROW, BAND, MASK, PER_TOKEN, PER_HEAD, OFFSET,
                                     ITER, PREFIX, MSD)
        with ct.vector():
            ok, glsafe, res = normalised(go, gl)
            if not PER_TOKEN:
                if OFFSET:
                    res = res + ct.cast(ct.load(vo[n2, 0:DV]), ct.float32)[None, :]
                res = ct.where(ok[:, None], res * ct.cast(ct.load(vs[n2, 0:DV]), ct.float32)[None, :], 0.0)
            gmax = gm
            lsev = ct.log(glsafe) + gm
            if not PER_TOKEN:
                if OFFSET and LSE:   # the key offset's row constant that the scores left out
                    gmax = gm + qsum * scale
                    lsev = lsev + qsum * scale
            row_epilogue(res, ok, gmax, gl, lsev, out, lse, ws_o, ws_ml, qs2, qo2, slot, tasks[t, 10], b, n2, s1, q0,
                         m0, mrows, OUT_LAYOUT, ORDER, False, G, M, DV, FD, POSTQ, QOFF, LSE, EMPTY_LSE)
