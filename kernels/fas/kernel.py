"""The FlashAttentionScore forward kernel (training), in the tile language.

Model
-----
``fas_attention`` walks the per-core tasks of the FAS tiling mirror (:mod:`cvtile.tiling.fas`): a task is
up to M query rows of one query head of one batch and a run of S2 blocks of S2 KV positions. Rows are
addressed in the folded space of a kv head (row = g·s1 + s, the "GS1" fold of the FIA kernel, whose view
helpers this kernel shares), so a task of query head n1 = n2·G + g starts at folded row g·s1 + m_start.
Per S2 block:

    C1  t  = q · kᵀ                                    (cube, fp32)
    V1  s  = t · scale + pse | (t + pse) · scale        (pse types 0/2/3 | 1; 2/3 generate
                                                         -slope·|j - i + kv_start - q_start| (sqrt for 3))
        s  = score_mod(s, b, h, i, j)                     (a variant hook)
        s  = -inf off the band (lo[b] <= j - i <= hi[b], or j < prefix[b]), where the mask is 1 and where
             not mask_mod(b, h, i, j)
        hm = max(gm, rowmax(s)); dm = exp(gm - hm); p = exp(s - hm); gl = dm·gl + rowsum(p)
        p  = keep ? p / keep_prob : 0                    (dropout; gl keeps the undropped sum)
        p  = cast(p, input dtype)
    C2  o  = p · v                                     (cube, fp32)
    V2  go = go · dm + o

and at the row's end: out = go / gl, softmax_max = gm, softmax_sum = gl (8 equal lanes each). A learnable
sink joins at the row's last KV tile as in the FIA kernel (hm = max(hm, sink), gl += exp(sink - hm)). A row
with no visible key writes out 0, max -inf and sum 0.

Per-position tensors (pse, an explicit mask, the dropout keep mask) are (B|1, N1|1, S1|1, S2) arrays read at
the batch's local positions (TND batches included): the host (:mod:`.launch`) builds them from the
operator's inputs (:mod:`.host`). softmax_max / softmax_sum are (B, N1, S1, 8) ("BNSD"), (T, N1, 8)
("TND") or, for TND with the default layout, each batch's (N1, S_b, 8) block at token offset·N1 ("NTD",
passed flat as (T·N1, 8)).
"""

from __future__ import annotations

import cvtile.dsl as ct

from ..fia.kernel import (fold_rows, kv_rows, mask_kept, mask_rows, modded_score, normalised, pse_rows, query_heads,
                          query_positions, sink_rows, sink_softmax_step, task_fields)


@ct.inline
def stat_view(t, b, n2, s1, q0, SM_LAYOUT, G, N1):
    """The (G·s1, 8) rows of softmax_max / softmax_sum for the G heads of kv head n2 of batch b."""
    if SM_LAYOUT == "BNSD":
        v = fold_rows(t, b, n2, s1, 0, "BNSD", "GS1", G)
    elif SM_LAYOUT == "TND":
        v = fold_rows(t, b, n2, s1, q0, "TND", "GS1", G)
    else:
        v = t.narrow(0, q0 * N1 + n2 * G * s1, G * s1)
    return v


@ct.inline
def slope_rows(slopes, b, n2, s1, G):
    """The (G·s1,) alibi slope of each folded row of kv head n2, from slopes (B|1, N1)."""
    heads = slopes[b if slopes.shape[0] > 1 else 0].split(0, G)[n2]
    return heads.broadcast(1, s1).merge(0)


@ct.jit
def fas_attention(q, k, v, out, smax, ssum, mask, pse, keep, sink, tasks, task_ptr, qlen, kvlen, qoff, kvoff, lo,
                  hi, prefix, mod0, mod1, mod2, mod3, scale, inv_keep, qk_shift, LAYOUT: ct.constexpr,
                  SM_LAYOUT: ct.constexpr, G: ct.constexpr, N1: ct.constexpr, M: ct.constexpr, S2: ct.constexpr,
                  D: ct.constexpr, DV: ct.constexpr, PSE: ct.constexpr, PSE_ADD_FIRST: ct.constexpr,
                  PSE_ONE_ROW: ct.constexpr, MASK: ct.constexpr, BAND: ct.constexpr, PREFIX: ct.constexpr,
                  DROPOUT: ct.constexpr, SINK: ct.constexpr, P_DTYPE: ct.constexpr,
                  SCORE_MOD: ct.constexpr = None, MASK_MOD: ct.constexpr = None, NCAP: ct.constexpr = 0):
    """PSE: 0 none, 1 an outer pse tensor, 2 inner alibi, 3 inner alibi with sqrt; MASK: 0 none, 1 one mask
    per batch (Bm, S1, S2), 2 one per head (Bm, N1, S1, S2)."""
    core = ct.block_idx()
    for t in range(task_ptr[core], task_ptr[core + 1]):
        b, n2, m0, mrows, j0, j1 = task_fields(tasks, t)
        s1 = qlen[b]
        s2 = kvlen[b]
        q0 = qoff[b]
        k0 = kvoff[b]
        qv = fold_rows(q, b, n2, s1, q0, LAYOUT, "GS1", G)
        kv = kv_rows(k, b, n2, s2, k0, LAYOUT)
        vv = kv_rows(v, b, n2, s2, k0, LAYOUT)
        with ct.cube():
            q1 = ct.load(qv[ct.ds(m0, M, valid=mrows), 0:D])
        with ct.vector():
            gm = ct.full((M,), -ct.inf, ct.float32, valid=mrows)
            gl = ct.zeros((M,), ct.float32, valid=mrows)
            go = ct.zeros((M, DV), ct.float32, valid=(mrows, DV))
            if BAND or PSE >= 2 or SCORE_MOD is not None or MASK_MOD is not None:
                qpos = query_positions(m0, mrows, s1, M, "GS1", G)
            if BAND:
                lo_r = qpos + lo[b]
                hi_r = qpos + hi[b]
            if SCORE_MOD is not None or MASK_MOD is not None:
                qhead = query_heads(m0, mrows, s1, n2, M, "GS1", G)
            if PSE >= 2:
                slope = ct.load(slope_rows(pse, b, n2, s1, G)[ct.ds(m0, M, valid=mrows)])
            if SINK:
                sk = ct.cast(ct.load(sink_rows(sink, n2, s1, "GS1", G)[ct.ds(m0, M, valid=mrows)]), ct.float32)
            else:
                sk = 0.0
        for j in range(j0, j1):
            kv0 = j * S2
            n = min(S2, s2 - kv0)
            with ct.cube():
                s = ct.mma(q1, kv[ct.ds(kv0, S2, valid=n), 0:D], trans_b=True)
            with ct.vector():
                if PSE == 1:
                    pv = pse_rows(pse, b, n2, s1, 0, "GS1", G, PSE_ONE_ROW)
                    bias = ct.cast(ct.load(pv[ct.ds(m0, M, valid=mrows), ct.ds(kv0, S2, valid=n)]), ct.float32)
                    if PSE_ADD_FIRST:
                        s = (s + bias) * scale
                    else:
                        s = s * scale + bias
                else:
                    s = s * scale
                if BAND or PSE >= 2 or SCORE_MOD is not None or MASK_MOD is not None:
                    col = ct.iota(S2, valid=n) + kv0
                if PSE >= 2:
                    dist = ct.abs(ct.cast(col[None, :] - qpos[:, None] + qk_shift, ct.float32))
                    if PSE == 3:
                        dist = ct.sqrt(dist)
                    s = s - slope[:, None] * dist
                if SCORE_MOD is not None:   # before the masks: a masked score stays -inf whatever the mod
                    s = modded_score(SCORE_MOD, NCAP, s, b, qhead[:, None], qpos[:, None], col[None, :],
                                     mod0, mod1, mod2, mod3)
                if BAND:
                    inband = (col[None, :] >= lo_r[:, None]) & (col[None, :] <= hi_r[:, None])
                    if PREFIX:
                        inband = inband | (col[None, :] < prefix[b])
                    s = ct.where(inband, s, -ct.inf)
                if MASK == 1:
                    mv = mask_rows(mask, b, s1, 0, "GS1", G)
                    mk = ct.load(mv[ct.ds(m0, M, valid=mrows), ct.ds(kv0, S2, valid=n)])
                    s = ct.where(mk == 0, s, -ct.inf)
                if MASK == 2:
                    mv = pse_rows(mask, b, n2, s1, 0, "GS1", G, False)
                    mk = ct.load(mv[ct.ds(m0, M, valid=mrows), ct.ds(kv0, S2, valid=n)])
                    s = ct.where(mk == 0, s, -ct.inf)
                if MASK_MOD is not None:
                    s = mask_kept(MASK_MOD, NCAP, s, b, qhead[:, None], qpos[:, None], col[None, :],
                                  mod0, mod1, mod2, mod3)
                p, dm, gl, gm = sink_softmax_step(s, gm, gl, sk, j == j1 - 1, SINK)
                if DROPOUT:
                    kmv = pse_rows(keep, b, n2, s1, 0, "GS1", G, False)
                    kp = ct.load(kmv[ct.ds(m0, M, valid=mrows), ct.ds(kv0, S2, valid=n)])
                    p = ct.where(kp != 0, p * inv_keep, 0.0)
                p = ct.cast(p, P_DTYPE)
            with ct.cube():
                o = ct.mma(p, vv[ct.ds(kv0, S2, valid=n), 0:DV])
            with ct.vector():
                go = go * dm[:, None] + o
        with ct.vector():
            ok, glsafe, res = normalised(go, gl)
            ov = fold_rows(out, b, n2, s1, q0, LAYOUT, "GS1", G)
            ct.store(ov[ct.ds(m0, M, valid=mrows), 0:DV], ct.cast(res, out.dtype))
            lanes = ct.zeros((M, 8), ct.float32, valid=(mrows, 8))
            ct.store(stat_view(smax, b, n2, s1, q0, SM_LAYOUT, G, N1)[ct.ds(m0, M, valid=mrows), 0:8],
                     gm[:, None] + lanes)
            ct.store(stat_view(ssum, b, n2, s1, q0, SM_LAYOUT, G, N1)[ct.ds(m0, M, valid=mrows), 0:8],
                     gl[:, None] + lanes)
