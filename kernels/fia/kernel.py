"""The FusedInferAttentionScore non-quant GQA kernel and its flash-decode combine, in the tile language.

Model
-----
``fia_attention`` is the arch22 FiaTilingNonQuant family's kernel, driven by the
tiling: each core walks its row tasks (``tasks[task_ptr[c]:task_ptr[c+1]]``, one
row = up to M query rows of one (batch, kv head) with the G query heads folded
into the rows, and a run of S2 blocks of S2 KV positions, counted from the task's first KV position and ending at its
last: a flash-decode part of the legacy IFA route starts anywhere and ends in a partial block). Per S2 block:

    C1  s  = q · kᵀ                       (cube, fp32 in L0C)
    V1  s  = s · scale + pse, masked      (vector; pse_shift is added after the scale, "mul then add")
        hm = max(gm, rowmax(s)); dm = exp(gm - hm); p = exp(s - hm)
        gl = dm · gl + rowsum(p); gm = hm; p = cast(p, q dtype)   (P in fp16/bf16, as on the chip)
    C2  o  = p · v                        (cube, fp32)
    V2  go = go · dm + o                  (vector)

and at the end of the row: out = go / gl (cast to the output dtype), lse =
gm + log(gl). With GM_ACC (a tall row block, whose fp32 accumulator would crowd
UB: ``launch.gm_accumulator``) go lives in the core's workspace rows
``ws_acc[core]``, as op_host's vec2 workspace holds it: zeroed at the row's
start, V2 reads, updates and writes it back (row chunk by row chunk), and the
row's end reads it once; the numbers are the same (fp32 in, fp32 out).

A row split across cores (flash decode) instead writes its partial (go / gl, gm, gl) to the workspace slot of its piece, and
``fia_fd_combine`` merges the pieces of each split row: M = max mᵢ,
wᵢ = exp(mᵢ - M)·lᵢ, L = Σ wᵢ, O = Σ (wᵢ / L)·Oᵢ, lse = M + log L.

A learnable sink (one logit per query head) joins the softmax denominator
as the chip's online softmax does: at the row's last KV tile the running max
takes the sink (hm = max(hm, sink), rows that saw a key only), P of that tile
is taken against it and gl += exp(sink - hm). A split row leaves the sink out
of its pieces and the combine adds it once (M = max(M, sink), L += exp(sink - M)).

Post-quant (quant_scale2, optional quant_offset2; POSTQ 1 per tensor, 2 per
channel of the (N1, DV) output channels): the final fp32 rows become int8 as
the chip's PostQuant makes them (``post_quant``), in the attention kernel or,
for split rows, in the combine.

System prefix (PREFIX: key/value_shared_prefix, its first ``plen`` positions
shared by every batch): a batch attends to ``plen`` prefix positions followed
by its own KV, and the KV lengths the kernel gets (``run_fia`` adds the prefix
where the tiling counts the own KV) and S2 blocks count both. A block
reads the prefix views below ``plen`` and the batch's views after it; the one
block that straddles ``plen`` is taken in two steps (the prefix rows, then
the batch's), where the chip copies both into one L1 block (one softmax step):
the two differ only in the P rounding of that block (P of its first part is
rounded against the smaller running max).

Rows with no visible key (fully masked, or no KV) give output 0 and lse
``LSE_EMPTY`` (+inf; the legacy IFA route writes -3.4e38), as the chip's
invalid-row handling does.

Layouts: the query rows of (b, n2) are a *view* of the query tensor (no data
moves); ORDER, the tiling's fold, says how the G heads fold into rows ("GS1":
row = g·S1 + s, the BNSD order; "S1G": row = s·G + g, BSND/TND). The output
and lse views fold the same way whatever their own layout (BNSD_BSND etc.).

Paged KV (block_table): K/V rows are read through the batch's block-table
row (``GMView.paged``); the tiling's S2 base is a multiple of the block size,
as op_host rounds it, so a tile covers whole blocks. CACHE "NZ" reads the
(blocks, N2, D/d0, block_size, d0) cache in place (``paged_kv_rows``).

Key/value tensor lists (CACHE "list"): k and v are the list's arena (``launch.list_arena``: the B tensors one
after the other along S in one batch-1 tensor) and batch b's K/V rows start at ``kvoff[b]``, its own tensor's
offset there; the views are the dense ones of batch 0.

Variant hooks (``cvtile.kernels.variants``): ``SCORE_MOD(score, b, h, q_idx, kv_idx, *captures)`` and
``MASK_MOD(b, h, q_idx, kv_idx, *captures)`` are ``@ct.inline`` functions compiled into V1: SCORE_MOD after the
scale and pse and before the band and mask (a masked score stays -inf), MASK_MOD after them: score is the (M, S2) fp32 block, b the batch, and h / q_idx / kv_idx the query
head (M, 1), query position (M, 1) and KV position (1, S2) of each element as int32 tiles (positions within
the batch's sequence, as FlexAttention numbers them); a False of MASK_MOD sets the score to -inf. Up to four
captured GM tensors (``mod0..mod3``, NCAP of them) follow the indices. With SPARSE the host has classified
every (row task, S2 block) by MASK_MOD (``variants.block_map``): a task's KV loop walks only its non-empty
blocks, ``blocks[jj] = (S2 block index, full, first live column, live columns)``, each over its live columns
only (the band of the block some row keeps: the others add exp(-inf) = 0); a full block skips MASK_MOD (a
runtime ``if`` on its flag: MASK_MOD would keep every element; chunk_rows runs the ``if`` on each row chunk
of the pass around it).

Masking is by band: a row at query position i sees KV position j iff
-pre[b] <= j - i <= nxt[b] (the host normalises sparse modes 2/3/4 and the
pre/next tokens to this left-up form per batch), and/or by an explicit mask
tensor (sparse 0/1), read with the same row fold. The tree mask (sparse 9, MASK
"tree") is the band j - i <= s2 - s1 and each batch's Q_S x Q_S tree over its
last s1 KV positions, gathered per element (``tree_kept``).
"""

from __future__ import annotations

import cvtile.dsl as ct

from ..merge_state import guarded_max, guarded_sum, rescaled, softmax_rescale, state_lse

#: lse written for rows with no visible KV position.
LSE_EMPTY = float("inf")


@ct.inline
def heads_view(t, b, n2, s1, q0, LAYOUT, G):
    """The (G, s1, D) view of the G query heads of kv head n2 of batch b in a query-shaped tensor, its rows
    starting at query position (or token, for TND/NTD) q0.

    LAYOUT: "BNSD" (B, N1, S, D); "BSND" (B, S, N1, D); "NBSD" (N1, B, S, D); "SBND" (S, B, N1, D);
    "TND" (T, N1, D); "NTD" (N1, T, D).
    """
    if LAYOUT == "NBSD" or LAYOUT == "SBND":
        t = t.permute(1, 0, 2, 3)
    if LAYOUT == "NTD":
        t = t.permute(1, 0, 2)
    if LAYOUT == "BNSD" or LAYOUT == "NBSD":
        v = t.split(1, G)[b, n2].narrow(1, q0, s1)
    elif LAYOUT == "BSND" or LAYOUT == "SBND":
        v = t.split(2, G)[b][:, n2].permute(1, 0, 2).narrow(1, q0, s1)
    else:
        v = t.split(1, G).narrow(0, q0, s1)[:, n2].permute(1, 0, 2)
    return v


@ct.inline
def fold_rows(t, b, n2, s1, q0, LAYOUT, ORDER, G):
    """The (s1*G, D) row view of (b, n2): the G heads folded into rows in ORDER
    ("GS1": row = g*s1 + s; "S1G": row = s*G + g)."""
    v = heads_view(t, b, n2, s1, q0, LAYOUT, G)
    if ORDER == "GS1":
        rows = v.merge(0)
    else:
        rows = v.permute(1, 0, 2).merge(0)
    return rows


@ct.inline
def kv_rows(t, b, n2, s2, k0, LAYOUT):
    """The (s2, D) view of one (batch, kv head) of a key/value tensor, from KV position (or token) k0."""
    if LAYOUT == "NBSD" or LAYOUT == "SBND":
        t = t.permute(1, 0, 2, 3)
    if LAYOUT == "NTD":
        t = t.permute(1, 0, 2)
    if LAYOUT == "BNSD" or LAYOUT == "NBSD":
        v = t[b, n2].narrow(0, k0, s2)
    elif LAYOUT == "BSND" or LAYOUT == "SBND":
        v = t[b].narrow(0, k0, s2)[:, n2]
    else:
        v = t.narrow(0, k0, s2)[:, n2]
    return v


@ct.inline
def paged_kv_rows(t, bt, b, n2, s2, D, CACHE):
    """The (s2, D) view of one (batch, kv head) of a paged KV cache read through the batch's block table row:
    CACHE "BnBsH" is (blocks, block_size, N2*D); "BnNBsD" is (blocks, N2, block_size, D); "NZ" is (blocks, N2,
    D/d0, block_size, d0), d0 elements of 32 bytes (``golden.nz``), read in place: a row's D is its D/d0
    fractals (stride block_size·d0) of d0 contiguous elements, one merged dimension, as the chip's copy of an NZ
    block into L1 reads it."""
    if CACHE == "BnBsH":
        blocks = t.split(2, D)[:, :, n2]
    elif CACHE == "NZ":
        blocks = t.permute(0, 1, 3, 2, 4).merge(3)[:, n2]
    else:
        blocks = t[:, n2]
    return blocks.paged(bt[b], s2)


@ct.inline
def lse_rows(lse, b, n2, s1, q0, TOKEN, ORDER, G):
    """The (s1*G,) lse view of (b, n2) in ORDER; lse is (B, N1, S1, 1), or (T, N1, 1) when TOKEN."""
    if TOKEN:
        v = fold_rows(lse, b, n2, s1, q0, "TND", ORDER, G)
    else:
        v = fold_rows(lse, b, n2, s1, q0, "BNSD", ORDER, G)
    return v[:, 0]


@ct.inline
def mask_rows(mask, b, s1, q0, ORDER, G):
    """The (s1*G, S2) view of the [Bm, S1, S2] mask for the rows of batch b (one row per query
    position from q0, shared by the G heads folded into the rows)."""
    mb = mask[b if mask.shape[0] > 1 else 0].narrow(0, q0, s1)
    if ORDER == "GS1":
        v = mb.broadcast(0, G).merge(0)
    else:
        v = mb.broadcast(1, G).merge(0)
    return v


@ct.inline
def tree_kept(s, tree, b, qpos, col, hi):
    """The scores with -inf where batch b's tree mask hides a pair (sparse_mode 9). ``tree`` is [B, W, W] (1 =
    masked out); the tree covers the batch's KV positions from start = s2 - s1, which the band's upper bound
    carries (hi = qpos + s2 - s1, so start = hi - qpos): a row at query position i reads tree row i, column
    j - start, by a gather from batch b's tree; columns before start are visible (the chip copies the tree
    into a UB tile zero-filled before it)."""
    rel = col[None, :] - (hi - qpos)[:, None]
    idx = qpos[:, None] * tree.shape[2] + ct.maximum(rel, 0)
    mk = ct.gather(tree[b].merge(0), idx)
    return ct.where((rel < 0) | (mk == 0), s, -ct.inf)


@ct.inline
def pse_rows(pse, b, n2, s1, q0, ORDER, G, ONE_ROW):
    """The (s1*G, S2) view of the pse_shift bias (B|1, N1, S1|1, S2) for the rows of (b, n2); a bias with one
    query row (ONE_ROW) is shared by every query position."""
    pb = b if pse.shape[0] > 1 else 0
    if ONE_ROW:
        heads = pse.split(1, G)[pb, n2][:, 0]            # (G, S2)
        if ORDER == "GS1":
            v = heads.broadcast(1, s1).merge(0)
        else:
            v = heads.broadcast(0, s1).merge(0)
    else:
        v = fold_rows(pse, pb, n2, s1, q0, "BNSD", ORDER, G)
    return v


@ct.inline
def sink_rows(sink, n2, s1, ORDER, G):
    """The (s1*G,) view of the learnable sink (N1,) for the rows of kv head n2: each row reads its head's logit."""
    heads = sink.split(0, G)[n2]                          # (G,)
    if ORDER == "GS1":
        v = heads.broadcast(1, s1).merge(0)
    else:
        v = heads.broadcast(0, s1).merge(0)
    return v


@ct.inline
def query_positions(m0, mrows, s1, M, ORDER, G):
    """The query position (0..s1-1) of each of the block's rows, as an int32 row vector."""
    rows = ct.iota(M, valid=mrows) + m0
    if ORDER == "GS1":
        pos = rows % s1
    else:
        pos = rows // G
    return pos


@ct.inline
def query_heads(m0, mrows, s1, n2, M, ORDER, G):
    """The query head (n2·G + g) of each of the block's rows, as an int32 row vector."""
    rows = ct.iota(M, valid=mrows) + m0
    if ORDER == "GS1":
        g = rows // s1
    else:
        g = rows % G
    return g + n2 * G


@ct.inline
def modded_score(SCORE_MOD, NCAP, s, b, h, qi, ki, mod0, mod1, mod2, mod3):
    """``SCORE_MOD(s, b, h, q_idx, kv_idx)`` followed by its NCAP captured tensors."""
    if NCAP == 0:
        r = SCORE_MOD(s, b, h, qi, ki)
    elif NCAP == 1:
        r = SCORE_MOD(s, b, h, qi, ki, mod0)
    elif NCAP == 2:
        r = SCORE_MOD(s, b, h, qi, ki, mod0, mod1)
    elif NCAP == 3:
        r = SCORE_MOD(s, b, h, qi, ki, mod0, mod1, mod2)
    else:
        r = SCORE_MOD(s, b, h, qi, ki, mod0, mod1, mod2, mod3)
    return r


@ct.inline
def mask_kept(MASK_MOD, NCAP, s, b, h, qi, ki, mod0, mod1, mod2, mod3):
    """The scores with -inf where ``MASK_MOD(b, h, q_idx, kv_idx, *captures)`` is False."""
    if NCAP == 0:
        keep = MASK_MOD(b, h, qi, ki)
    elif NCAP == 1:
        keep = MASK_MOD(b, h, qi, ki, mod0)
    elif NCAP == 2:
        keep = MASK_MOD(b, h, qi, ki, mod0, mod1)
    elif NCAP == 3:
        keep = MASK_MOD(b, h, qi, ki, mod0, mod1, mod2)
    else:
        keep = MASK_MOD(b, h, qi, ki, mod0, mod1, mod2, mod3)
    return ct.where(keep, s, -ct.inf)


@ct.inline
def task_fields(tasks, t):
    """(b, n2, m0, mrows, j0, j1) of row task t: batch, kv head, first folded row, rows, S2 block run."""
    return tasks[t, 0], tasks[t, 1], tasks[t, 2], tasks[t, 3], tasks[t, 4], tasks[t, 5]


@ct.inline
def row_task(tasks, t, qlen, kvlen, qoff, kvoff):
    """Everything a kernel reads of row task t: ``task_fields``, its FD slot, ``task_span`` and its batch's
    ``batch_extent``: (b, n2, m0, mrows, j0, j1, slot, kbase, kend, step, s1, s2, q0, k0)."""
    b, n2, m0, mrows, j0, j1 = task_fields(tasks, t)
    kbase, kend, step = task_span(tasks, t)
    s1, s2, q0, k0 = batch_extent(qlen, kvlen, qoff, kvoff, b)
    return b, n2, m0, mrows, j0, j1, tasks[t, 6], kbase, kend, step, s1, s2, q0, k0


@ct.inline
def task_span(tasks, t):
    """(kbase, kend, step) of row task t: its blocks of step <= S2 positions start at KV position
    kbase + j * step and end by kend (the batch's KV length, or a flash-decode part's end: a legacy IFA part
    starts and ends anywhere, its last block partial; the system prefix's own pass has its own block size)."""
    return tasks[t, 7], tasks[t, 8], tasks[t, 9]


@ct.inline
def sink_softmax_step(s, gm, gl, sk, last, SINK):
    """One online-softmax step (``softmax_rescale``) over the block s; with SINK, the tile that is the row's
    ``last`` folds the sink logit sk into the max (rows that saw a key) and adds exp(sk - max) to the sum.
    Returns (p, dm, gl, hm)."""
    hm = ct.maximum(gm, ct.rowmax(s))
    if SINK:
        if last:
            hm = ct.where(hm == -ct.inf, hm, ct.maximum(hm, sk))
    p, dm, gl = softmax_rescale(s, gm, gl, hm)
    if SINK:
        hs = guarded_max(hm)     # the max softmax_rescale subtracted (one op after CSE)
        if last:
            gl = gl + ct.where(hm == -ct.inf, 0.0, ct.exp(sk - hs))
    return p, dm, gl, hm


@ct.inline
def quant_rows(qp, n2, s1, ORDER, G):
    """The (s1*G, DV) view of a per-channel post-quant parameter viewed as (1, N1, 1, DV): each row reads its
    query head's channel values (every query position of a head shares them)."""
    heads = qp.split(1, G)[0, n2][:, 0]                   # (G, DV)
    if ORDER == "GS1":
        v = heads.broadcast(1, s1).merge(0)
    else:
        v = heads.broadcast(0, s1).merge(0)
    return v


@ct.inline
def post_quant(res, qs, qo, n2, s1, m0, mrows, ORDER, G, M, DV, POSTQ, QOFF):
    """The int8 output of post-quant (quant_scale2 / quant_offset2) of the fp32 result rows [m0, m0 + M):
    y = res · scale (+ offset) in fp32, then fp32 -> fp16 -> int8, each rounded half away from zero and the
    int8 saturated (the chip's PostQuant: Mul, Add, Cast CAST_ROUND twice). POSTQ 1: one scale (and offset)
    for the tensor, a (1,) GM tensor each; 2: per channel, (1, N1, 1, DV) views of the parameters. A bf16
    parameter is widened to fp32 exactly, as the chip casts it."""
    if POSTQ == 1:
        y = res * ct.cast(ct.load(qs[0:1]), ct.float32)[:, None]
        if QOFF:
            y = y + ct.cast(ct.load(qo[0:1]), ct.float32)[:, None]
    else:
        y = res * ct.cast(ct.load(quant_rows(qs, n2, s1, ORDER, G)[ct.ds(m0, M, valid=mrows), 0:DV]), ct.float32)
        if QOFF:
            y = y + ct.cast(ct.load(quant_rows(qo, n2, s1, ORDER, G)[ct.ds(m0, M, valid=mrows), 0:DV]),
                            ct.float32)
    return ct.cast(ct.cast(y, ct.float16, rounding="round"), ct.int8, rounding="round")


@ct.inline
def normalised(go, gl):
    """(ok, glsafe, out) at a row's end: out = go / gl, 0 on rows with no visible key (gl == 0; a NaN from
    overflowed scores propagates as on the chip)."""
    ok = gl != 0.0
    glsafe = ct.where(ok, gl, 1.0)
    return ok, glsafe, ct.where(ok[:, None], go / glsafe[:, None], 0.0)


@ct.inline
def empty_state(M, DV, mrows):
    """A row block's online-softmax state before its first KV block: (gm, gl, go) = (-inf, 0, 0)."""
    return (ct.full((M,), -ct.inf, ct.float32, valid=mrows), ct.zeros((M,), ct.float32, valid=mrows),
            ct.zeros((M, DV), ct.float32, valid=(mrows, DV)))


@ct.inline
def batch_extent(qlen, kvlen, qoff, kvoff, b):
    """(s1, s2, q0, k0) of batch b: its query and KV lengths and first query / KV position in its tensors."""
    return qlen[b], kvlen[b], qoff[b], kvoff[b]


@ct.inline
def row_block_start(qv, pre, nxt, b, m0, mrows, s1, M, D, DV, ORDER, G, BAND):
    """A task's start: its M query rows of the fold ``qv`` loaded for the cube, the empty online-softmax state and
    the rows' band bounds: ``(q1, gm, gl, go, lo, hi)``."""
    with ct.cube():
        q1 = ct.load(qv[ct.ds(m0, M, valid=mrows), 0:D])
    with ct.vector():
        gm, gl, go = empty_state(M, DV, mrows)
        lo, hi = band_bounds(pre, nxt, b, m0, mrows, s1, M, ORDER, G, BAND)
    return q1, gm, gl, go, lo, hi


@ct.inline
def band_bounds(pre, nxt, b, m0, mrows, s1, M, ORDER, G, BAND):
    """(lo, hi) of the block's rows: the KV positions query position i sees are [i - pre[b], i + nxt[b]]
    (0, 0 without BAND)."""
    lo, hi = 0, 0
    if BAND:
        qpos = query_positions(m0, mrows, s1, M, ORDER, G)
        lo = qpos - pre[b]
        hi = qpos + nxt[b]
    return lo, hi


@ct.inline
def column_start(k0, CACHE):
    """The batch's first KV position in its mask, pse and per-token parameter columns: k0, its first position in
    its key/value tensor (left padding), except for a tensor list, whose k0 is the place of the batch's tensor in
    the list's arena (``kv_list``): its columns start at 0 (a list takes no left padding)."""
    c0 = k0
    if CACHE == "list":
        c0 = 0
    return c0


@ct.inline
def band_and_mask(s, a, m, lo, hi, mask, b, s1, q0, k0, m0, mrows, ORDER, G, M, S2, BAND, MASK):
    """The scores s of the m KV positions from position a with -inf outside each row's band [lo, hi] (BAND)
    and where the [Bm, S1, S2] mask is set (MASK), read from the batch's first column k0 (``column_start``)."""
    if BAND:
        col = ct.iota(S2, valid=m) + a
        inband = (col[None, :] >= lo[:, None]) & (col[None, :] <= hi[:, None])
        s = ct.where(inband, s, -ct.inf)
    if MASK:
        mv = mask_rows(mask, b, s1, q0, ORDER, G)
        mk = ct.load(mv[ct.ds(m0, M, valid=mrows), ct.ds(k0 + a, S2, valid=m)])
        s = ct.where(mk == 0, s, -ct.inf)
    return s


@ct.inline
def fd_partial(res, gm, gl, ws_o, ws_ml, slot, roff, M, DV, mrows):
    """A split row's piece: its normalised partial res and softmax state (gm, gl) into workspace slot ``slot``
    from the slot's row roff, where ``fia_fd_combine`` reads them."""
    ct.store(ws_o[slot, ct.ds(roff, M, valid=mrows), 0:DV], res)
    ct.store(ws_ml[slot, 0, ct.ds(roff, M, valid=mrows)], gm)
    ct.store(ws_ml[slot, 1, ct.ds(roff, M, valid=mrows)], gl)


@ct.inline
def row_epilogue(res, ok, gm, gl, lsev, out, lse, ws_o, ws_ml, qs2, qo2, slot, roff, b, n2, s1, q0, m0, mrows,
                 OUT_LAYOUT, ORDER, TOKEN, G, M, DV, FD, POSTQ, QOFF, LSE, EMPTY_LSE):
    """A row task's end: a split row's piece (FD, slot >= 0) writes its partial res and softmax state (gm, gl)
    to its workspace slot from the slot's row roff (a row pass's first row in its task); a whole row writes res to the output (post-quantised with POSTQ, else cast) and,
    with LSE, lsev (EMPTY_LSE on rows without a visible key, ``ok`` False)."""
    if FD and slot >= 0:
        fd_partial(res, gm, gl, ws_o, ws_ml, slot, roff, M, DV, mrows)
    else:
        ov = fold_rows(out, b, n2, s1, q0, OUT_LAYOUT, ORDER, G)
        if POSTQ:
            ct.store(ov[ct.ds(m0, M, valid=mrows), 0:DV],
                     post_quant(res, qs2, qo2, n2, s1, m0, mrows, ORDER, G, M, DV, POSTQ, QOFF))
        else:
            ct.store(ov[ct.ds(m0, M, valid=mrows), 0:DV], ct.cast(res, out.dtype))
        if LSE:
            lv = lse_rows(lse, b, n2, s1, q0, TOKEN, ORDER, G)
            ct.store(lv[ct.ds(m0, M, valid=mrows)], ct.where(ok, lsev, EMPTY_LSE))


@ct.inline
def prefix_cut(kv0, n, plen):
    """(cut, straddle) of the S2 block of n positions from kv0 against a system prefix of plen positions: cut
    of them are the prefix's; straddle is 1 iff 0 < cut < n (the block is then taken in two steps, the prefix
    rows then the batch's own)."""
    cut = min(max(plen - kv0, 0), n)
    return cut, min(cut, 1) * min(n - cut, 1)


@ct.inline
def prefix_part(kv0, n, cut, straddle, h):
    """(first position, count) of step h of a block split by ``prefix_cut`` (the whole block when it does not
    straddle)."""
    return kv0 + cut * h, n - cut * h - (n - cut) * straddle * (1 - h)


@ct.inline
def kv_step(q1, kv, vv, kpv, vpv, plen, a, m, jj, gm, gl, go, wacc, sk, last, scale, b, n2, s1, q0, k0, m0, mrows,
            qpos, lo, hi, qhead, mask, pse, blocks, mod0, mod1, mod2, mod3, ORDER, G, M, S2, D, DV, PSE, PSE_ONE_ROW,
            BAND, MASK, SCORE_MOD, MASK_MOD, NCAP, SPARSE, SINK, P_DTYPE, PREFIX, GM_ACC):
    """One KV step of a row task: the m KV positions from position a of the batch's attended sequence (the
    system prefix first when PREFIX: positions below plen read the prefix views kpv / vpv, the others the
    batch's own kv / vv at a - plen). C1, V1 (scale, pse, score_mod, band, mask, mask_mod, online softmax),
    C2, V2; returns the updated (gm, gl, go). GM_ACC: the accumulator lives in the core's workspace rows wacc
    (V2 reads, updates and writes them back; go passes through unchanged)."""
    with ct.cube():
        if PREFIX:
            if a < plen:
                s = ct.mma(q1, kpv[ct.ds(a, S2, valid=m), 0:D], trans_b=True)
            else:
                s = ct.mma(q1, kv[ct.ds(a - plen, S2, valid=m), 0:D], trans_b=True)
        else:
            s = ct.mma(q1, kv[ct.ds(a, S2, valid=m), 0:D], trans_b=True)
    with ct.vector():
        s = s * scale
        if PSE:
            pv = pse_rows(pse, b, n2, s1, q0, ORDER, G, PSE_ONE_ROW)
            bias = ct.load(pv[ct.ds(m0, M, valid=mrows), ct.ds(k0 + a, S2, valid=m)])
            s = s + ct.cast(bias, ct.float32)
        if BAND or SCORE_MOD is not None or MASK_MOD is not None:
            col = ct.iota(S2, valid=m) + a
        if SCORE_MOD is not None:   # before the masks: a masked score stays -inf whatever the mod
            s = modded_score(SCORE_MOD, NCAP, s, b, qhead[:, None], qpos[:, None], col[None, :],
                             mod0, mod1, mod2, mod3)
        if BAND:
            inband = (col[None, :] >= lo[:, None]) & (col[None, :] <= hi[:, None])
            s = ct.where(inband, s, -ct.inf)
        if MASK == "tree":
            s = tree_kept(s, mask, b, qpos, col, hi)
        elif MASK:
            mv = mask_rows(mask, b, s1, q0, ORDER, G)
            mk = ct.load(mv[ct.ds(m0, M, valid=mrows), ct.ds(k0 + a, S2, valid=m)])
            s = ct.where(mk == 0, s, -ct.inf)
        if MASK_MOD is not None:
            if SPARSE:
                partial = blocks[jj, 1] == 0     # a full block's mask would keep every element
            else:
                partial = True
            if partial:
                s = mask_kept(MASK_MOD, NCAP, s, b, qhead[:, None], qpos[:, None], col[None, :],
                              mod0, mod1, mod2, mod3)
        p, dm, gl, gm = sink_softmax_step(s, gm, gl, sk, last, SINK)
        p = ct.cast(p, P_DTYPE)
    with ct.cube():
        if PREFIX:
            if a < plen:
                o = ct.mma(p, vpv[ct.ds(a, S2, valid=m), 0:DV])
            else:
                o = ct.mma(p, vv[ct.ds(a - plen, S2, valid=m), 0:DV])
        else:
            o = ct.mma(p, vv[ct.ds(a, S2, valid=m), 0:DV])
    with ct.vector():
        if GM_ACC:
            ct.store(wacc, ct.load(wacc) * dm[:, None] + o)
        else:
            go = go * dm[:, None] + o
    return gm, gl, go


@ct.jit
def fia_attention(q, k, v, out, lse, mask, pse, sink, block_table, ws_o, ws_ml, ws_acc, tasks, task_ptr, qlen, kvlen,
                  qoff, kvoff, pre, nxt, mod0, mod1, mod2, mod3, blocks, qs2, qo2, kp, vp, plen, scale, CACHE: ct.constexpr, LAYOUT: ct.constexpr, OUT_LAYOUT: ct.constexpr,
                  ORDER: ct.constexpr, TOKEN: ct.constexpr, G: ct.constexpr, M: ct.constexpr, PSE: ct.constexpr,
                  PSE_ONE_ROW: ct.constexpr, SINK: ct.constexpr,
                  S2: ct.constexpr, D: ct.constexpr, DV: ct.constexpr, BAND: ct.constexpr, MASK: ct.constexpr,
                  LSE: ct.constexpr, FD: ct.constexpr, P_DTYPE: ct.constexpr, EMPTY_LSE: ct.constexpr,
                  SCORE_MOD: ct.constexpr = None, MASK_MOD: ct.constexpr = None, NCAP: ct.constexpr = 0,
                  SPARSE: ct.constexpr = False, POSTQ: ct.constexpr = 0, QOFF: ct.constexpr = False,
                  PREFIX: ct.constexpr = False, GM_ACC: ct.constexpr = False):
    core = ct.block_idx()
    for t in range(task_ptr[core], task_ptr[core + 1]):
        b, n2, m0, mrows, j0, j1 = task_fields(tasks, t)
        slot = tasks[t, 6]
        kbase, kend, step = task_span(tasks, t)
        s1 = qlen[b]
        s2 = kvlen[b]
        q0 = qoff[b]
        k0 = kvoff[b]
        c0 = column_start(k0, CACHE)
        qv = fold_rows(q, b, n2, s1, q0, LAYOUT, ORDER, G)
        if PREFIX:   # the batch's own KV follows the plen prefix positions (batch 0 of the prefix tensors)
            kpv = kv_rows(kp, 0, n2, plen, 0, LAYOUT)
            vpv = kv_rows(vp, 0, n2, plen, 0, LAYOUT)
            kb = 0 if CACHE == "list" else b   # a tensor list's arena is batch 1, its region from k0
            kv = kv_rows(k, kb, n2, s2 - plen, k0, LAYOUT)
            vv = kv_rows(v, kb, n2, s2 - plen, k0, LAYOUT)
        elif CACHE == "dense":
            kv = kv_rows(k, b, n2, s2, k0, LAYOUT)
            vv = kv_rows(v, b, n2, s2, k0, LAYOUT)
        elif CACHE == "list":   # a tensor list's arena (batch 1): batch b's own tensor starts at k0 = kvoff[b]
            kv = kv_rows(k, 0, n2, s2, k0, LAYOUT)
            vv = kv_rows(v, 0, n2, s2, k0, LAYOUT)
        else:
            kv = paged_kv_rows(k, block_table, b, n2, s2, D, CACHE)
            vv = paged_kv_rows(v, block_table, b, n2, s2, DV, CACHE)
        with ct.cube():
            q1 = ct.load(qv[ct.ds(m0, M, valid=mrows), 0:D])
        with ct.vector():
            gm, gl, go = empty_state(M, DV, mrows)
            wacc = 0
            if GM_ACC:   # the running accumulator in the core's workspace rows (op_host's vec2 workspace)
                wacc = ws_acc[core, ct.ds(0, M, valid=mrows), 0:DV]
                ct.store(wacc, go)
                go = 0.0
            qpos, lo, hi, qhead = 0, 0, 0, 0     # (placeholders of what the features below do not need)
            if BAND or SCORE_MOD is not None or MASK_MOD is not None:
                qpos = query_positions(m0, mrows, s1, M, ORDER, G)
            if BAND:
                lo = qpos - pre[b]
                hi = qpos + nxt[b]
            if SCORE_MOD is not None or MASK_MOD is not None:
                qhead = query_heads(m0, mrows, s1, n2, M, ORDER, G)
            if SINK:
                sk = ct.cast(ct.load(sink_rows(sink, n2, s1, ORDER, G)[ct.ds(m0, M, valid=mrows)]), ct.float32)
            else:
                sk = 0.0
        for jj in range(j0, j1):
            if SPARSE:   # the block's live columns (block_map.live_span)
                kv0 = kbase + blocks[jj, 0] * step + blocks[jj, 2]
                n = min(blocks[jj, 3], kend - kv0)
            else:
                kv0 = kbase + jj * step
                n = min(step, kend - kv0)
            last = slot < 0 and jj == j1 - 1
            if PREFIX:
                cut, straddle = prefix_cut(kv0, n, plen)
                for h in range(1 + straddle):
                    a, m = prefix_part(kv0, n, cut, straddle, h)
                    gm, gl, go = kv_step(q1, kv, vv, kpv, vpv, plen, a, m, jj, gm, gl, go, wacc, sk,
                                         last and h == straddle, scale, b, n2, s1, q0, c0, m0, mrows, qpos, lo, hi,
                                         qhead, mask, pse, blocks, mod0, mod1, mod2, mod3, ORDER, G, M, S2, D, DV,
                                         PSE, PSE_ONE_ROW, BAND, MASK, SCORE_MOD, MASK_MOD, NCAP, SPARSE, SINK,
                                         P_DTYPE, PREFIX, GM_ACC)
            else:
                gm, gl, go = kv_step(q1, kv, vv, kv, vv, 0, kv0, n, jj, gm, gl, go, wacc, sk, last, scale, b, n2,
                                     s1, q0, c0, m0, mrows, qpos, lo, hi, qhead, mask, pse, blocks, mod0, mod1, mod2,
                                     mod3, ORDER, G, M, S2, D, DV, PSE, PSE_ONE_ROW, BAND, MASK, SCORE_MOD,
                                     MASK_MOD, NCAP, SPARSE, SINK, P_DTYPE, PREFIX, GM_ACC)
        with ct.vector():
            if GM_ACC:
                go = ct.load(wacc)
            ok, glsafe, res = normalised(go, gl)
            row_epilogue(res, ok, gm, gl, gm + ct.log(glsafe), out, lse, ws_o, ws_ml, qs2, qo2, slot, tasks[t, 10], b,
                         n2, s1, q0, m0, mrows, OUT_LAYOUT, ORDER, TOKEN, G, M, DV, FD, POSTQ, QOFF, LSE, EMPTY_LSE)


@ct.jit
def fia_fd_combine(out, lse, sink, ws_o, ws_ml, fd_tasks, work, work_ptr, qlen, qoff, qs2, qo2, LAYOUT: ct.constexpr,
                   ORDER: ct.constexpr, TOKEN: ct.constexpr, G: ct.constexpr, R: ct.constexpr, DV: ct.constexpr,
                   LSE: ct.constexpr, SINK: ct.constexpr, EMPTY_LSE: ct.constexpr, POSTQ: ct.constexpr = 0,
                   QOFF: ct.constexpr = False, ROUND: ct.constexpr = "rint"):
    """Merge the partials of split rows: one vector core per launch block; its rows are the (task, first row,
    row count) items of ``work``, merged R rows (the tiling's FD piece height) at a time. A learnable sink
    joins here, once per row (the pieces leave it out); post-quant (POSTQ) quantises the merged rows, else they
    are cast to the output dtype rounding as ROUND says (``ct.cast``'s modes: the Ascend950 full-quant combine
    rounds an fp16 output half away from zero)."""
    vec = ct.block_idx()
    for w in range(work_ptr[vec], work_ptr[vec + 1]):
        task = work[w, 0]
        b = fd_tasks[task, 0]
        n2 = fd_tasks[task, 1]
        m0 = fd_tasks[task, 2]
        splits = fd_tasks[task, 4]
        slot = fd_tasks[task, 5]
        s1 = qlen[b]
        q0 = qoff[b]
        for r0 in range(work[w, 1], work[w, 1] + work[w, 2], R):
            nr = min(R, work[w, 1] + work[w, 2] - r0)
            with ct.vector():
                gmax = ct.full((R,), -ct.inf, ct.float32, valid=nr)
                for i in range(splits):
                    mi = ct.load(ws_ml[slot + i, 0, ct.ds(r0, R, valid=nr)])
                    gmax = ct.maximum(gmax, mi)
                if SINK:
                    sk = ct.cast(ct.load(sink_rows(sink, n2, s1, ORDER, G)[ct.ds(m0 + r0, R, valid=nr)]),
                                 ct.float32)
                    gmax = ct.where(gmax == -ct.inf, gmax, ct.maximum(gmax, sk))
                gs = guarded_max(gmax)
                total = ct.zeros((R,), ct.float32, valid=nr)
                if SINK:
                    total = ct.where(gmax == -ct.inf, 0.0, ct.exp(sk - gs))
                for i in range(splits):
                    mi = ct.load(ws_ml[slot + i, 0, ct.ds(r0, R, valid=nr)])
                    li = ct.load(ws_ml[slot + i, 1, ct.ds(r0, R, valid=nr)])
                    total = total + rescaled(mi, li, gs)
                ok, tsafe = guarded_sum(total)
                acc = ct.zeros((R, DV), ct.float32, valid=(nr, DV))
                for i in range(splits):
                    mi = ct.load(ws_ml[slot + i, 0, ct.ds(r0, R, valid=nr)])
                    li = ct.load(ws_ml[slot + i, 1, ct.ds(r0, R, valid=nr)])
                    oi = ct.load(ws_o[slot + i, ct.ds(r0, R, valid=nr), 0:DV])
                    wi = rescaled(mi, li, gs) / tsafe
                    acc = acc + oi * wi[:, None]
                ov = fold_rows(out, b, n2, s1, q0, LAYOUT, ORDER, G)
                if POSTQ:
                    ct.store(ov[ct.ds(m0 + r0, R, valid=nr), 0:DV],
                             post_quant(acc, qs2, qo2, n2, s1, m0 + r0, nr, ORDER, G, R, DV, POSTQ, QOFF))
                else:
                    ct.store(ov[ct.ds(m0 + r0, R, valid=nr), 0:DV], ct.cast(acc, out.dtype, rounding=ROUND))
                if LSE:
                    lv = lse_rows(lse, b, n2, s1, q0, TOKEN, ORDER, G)
                    ct.store(lv[ct.ds(m0 + r0, R, valid=nr)], ct.where(ok, state_lse(gs, tsafe), EMPTY_LSE))
