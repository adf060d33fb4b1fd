"""The FlashAttentionScore backward (``npu_fusion_attention_grad``) kernels, in the tile language.

Model
-----
Two race-free kernels, launched one after the other by :mod:`.grad_launch`; every output element has one
writer, so no atomics are needed (the real FAG adds every block's dq / dk / dv into fp32 GM workspaces with
atomic fixpipe writes and casts them in a post-step; its op_host tiling and that split are not mirrored).
Rows are addressed in the "GS1" fold of a kv head (row = g·s1 + s), as in the forward (:mod:`.kernel`), so
the forward's view helpers read q, dO, out, the statistics and the per-position tensors.

``fas_grad_dq`` — one task per (b, n1, block of M query rows), walking the S2 blocks [j0, j1) that the band
leaves visible (the host skips the rest). It first computes, per row (fp32),

    Δ  = rowsum(dO ∘ out)                           (attention_in: the forward's output)

and writes Δ to a (B, N1, S1) workspace the second kernel reads (the real FAG's pre-step), and with a sink
the row's dsink term ``-Δ·exp(sink - m)/l`` to another. Per S2 block:

    C1  t  = q·kᵀ                                     (cube, fp32)
    V1  s  = the forward's scores (scale, pse types 0/1/2/3, band, prefix, mask: ``grad_scores``)
        P  = exp(s - m) / l                          (m, l = softmax_max / softmax_sum, lane 0)
    C1' dPd = dO·vᵀ                                   (cube, fp32)
    V1' dP = keep ? dPd / keep_prob : 0              (dropout)
        dS = P ∘ (dP - Δ)
        dpse workspace ← dS (pse type 0) | scale·dS (type 1)          (outer pse only)
        dS = cast(dS, input dtype)
    C2  gq += dS·k                                   (cube, accumulated in L0C)

and at the task's end gq leaves L0C through an fp32 GM workspace (the real FAG's dq workspace) and the
vector writes dq = cast(scale·gq).

``fas_grad_dkdv`` — one task per (b, n2, block of S2 key positions); the task walks the G query heads of n2
and, per head, the M-row query blocks [r0, r0 + nr) the band leaves visible. Everything is transposed (key
positions are the tile rows), so only ``trans_b`` is needed:

    C1  tᵀ = k·qᵀ                                     (cube, fp32, S2×M)
    V1  sᵀ = the same scores, read through transposed views of pse / mask / keep
        Pᵀ = exp(sᵀ - m[None, :]) / l[None, :]
    C1' dPdᵀ = v·dOᵀ                                  (cube, fp32, S2×M)
    V1' Pdᵀ = keep ? Pᵀ / keep_prob : 0;  dPᵀ = keep ? dPdᵀ / keep_prob : 0
        dSᵀ = Pᵀ ∘ (dPᵀ - Δ[None, :])                (Δ from fas_grad_dq)
        Pdᵀ, dSᵀ cast to the input dtype
    C2  gv += Pdᵀ·dO;  gk += dSᵀ·q                   (cube, both accumulated in L0C)

and at the task's end dv = cast(gv) leaves L0C through the fixpipe, gk through an fp32 workspace to the
vector, which writes dk = cast(scale·gk).

The two S2×M products sit in separate cube sections, each handed to the vector before the next mma (the
Ascend C backend streams an mma result out of L0C before it reuses the pieces). mma operands are cast to the
input dtype as the chip does (fp32 inputs stay fp32). The L0C accumulators start from an mma with a zero GM
operand: the chip sets L0C only through the cube (an mmad's init flag), and a task may visit no block at
all. A row with no visible key has m = -inf and l = 0: the max is guarded (subtract 0) and the sum too
(divide by 1), so its P, dS and dsink term are 0.

Hand-offs per kernel (cross-core flags: 2 each, 11 on the chip): dq 3 data (t, dPd, dS) + the dq workspace;
dk/dv 4 data (tᵀ, dPdᵀ, Pdᵀ, dSᵀ) + the dk workspace. Accumulating in L0C also keeps each inner loop free of
a cube-to-vector round trip, so a loop that is not software-pipelined (the dq loop with an outer pse stores
dpse inside it) runs its vector work as one row-chunked pass without waiting on its own output.

Invariants
----------
* ``grad_scores`` is the forward's score pipeline (same op order, so the recomputed s matches the scores the
  forward's statistics were taken over); TRANS only changes which axis a per-row / per-column value
  broadcasts along.
* dq, dk, dv, the Δ / dsink row workspaces and the dpse workspace are each written by exactly one task.
"""

from __future__ import annotations

import cvtile.dsl as ct

from ..fia.kernel import (fold_rows, kv_rows, mask_rows, pse_rows, query_positions, sink_rows, task_fields)
from ..merge_state import guarded_max, guarded_sum
from .kernel import slope_rows, stat_view


@ct.inline
def along_q(x, TRANS):
    """A per-query-row vector broadcast over the tile: a column of (M, S2), a row of (S2, M) when TRANS."""
    if TRANS:
        r = x[None, :]
    else:
        r = x[:, None]
    return r


@ct.inline
def along_kv(x, TRANS):
    """A per-key-position vector broadcast over the tile (a row of (M, S2), a column of (S2, M))."""
    if TRANS:
        r = x[:, None]
    else:
        r = x[None, :]
    return r


@ct.inline
def block_of(view, m0, mrows, kv0, n, M, S2, TRANS):
    """The (M, S2) window of a (query rows, key positions) GM view, or its transpose (S2, M) when TRANS."""
    if TRANS:
        w = view.permute(1, 0)[ct.ds(kv0, S2, valid=n), ct.ds(m0, M, valid=mrows)]
    else:
        w = view[ct.ds(m0, M, valid=mrows), ct.ds(kv0, S2, valid=n)]
    return w


@ct.inline
def row_stat(t, b, n2, s1, q0, m0, mrows, SM_LAYOUT, G, N1, M):
    """Lane 0 of a (…, lanes) per-row statistic for the M folded rows from m0, as a (M,) fp32 tile."""
    return ct.load(stat_view(t, b, n2, s1, q0, SM_LAYOUT, G, N1)[ct.ds(m0, M, valid=mrows), 0])


@ct.inline
def task_views(q, dy, k, v, b, n2, qlen, kvlen, qoff, kvoff, LAYOUT, G):
    """(s1, s2, q0, k0, q rows, dO rows, k rows, v rows) of (b, n2): lengths and offsets of the batch, and the
    folded (G·s1, ·) query / dO views and the (s2, ·) key / value views."""
    s1 = qlen[b]
    s2 = kvlen[b]
    q0 = qoff[b]
    k0 = kvoff[b]
    qv = fold_rows(q, b, n2, s1, q0, LAYOUT, "GS1", G)
    dov = fold_rows(dy, b, n2, s1, q0, LAYOUT, "GS1", G)
    return s1, s2, q0, k0, qv, dov, kv_rows(k, b, n2, s2, k0, LAYOUT), kv_rows(v, b, n2, s2, k0, LAYOUT)


@ct.inline
def grad_scores(t, pse, mask, b, n2, s1, m0, mrows, kv0, n, qpos, slope, lo_r, hi_r, pfx, scale, qk_shift,
                TRANS, G, M, S2, PSE, PSE_ADD_FIRST, PSE_ONE_ROW, MASK, BAND, PREFIX):
    """The forward's scores of a block from t = q·kᵀ (tᵀ when TRANS): scale and pse, then -inf off the band
    (or prefix) and where the mask is 1."""
    if PSE == 1:
        pv = pse_rows(pse, b, n2, s1, 0, "GS1", G, PSE_ONE_ROW)
        bias = ct.cast(ct.load(block_of(pv, m0, mrows, kv0, n, M, S2, TRANS)), ct.float32)
        if PSE_ADD_FIRST:
            s = (t + bias) * scale
        else:
            s = t * scale + bias
    else:
        s = t * scale
    if BAND or PSE >= 2:
        col = along_kv(ct.iota(S2, valid=n) + kv0, TRANS)
    if PSE >= 2:
        dist = ct.abs(ct.cast(col - along_q(qpos, TRANS) + qk_shift, ct.float32))
        if PSE == 3:
            dist = ct.sqrt(dist)
        s = s - along_q(slope, TRANS) * dist
    if BAND:
        inband = (col >= along_q(lo_r, TRANS)) & (col <= along_q(hi_r, TRANS))
        if PREFIX:
            inband = inband | (col < pfx)
        s = ct.where(inband, s, -ct.inf)
    if MASK == 1:
        mk = ct.load(block_of(mask_rows(mask, b, s1, 0, "GS1", G), m0, mrows, kv0, n, M, S2, TRANS))
        s = ct.where(mk == 0, s, -ct.inf)
    if MASK == 2:
        mk = ct.load(block_of(pse_rows(mask, b, n2, s1, 0, "GS1", G, False), m0, mrows, kv0, n, M, S2, TRANS))
        s = ct.where(mk == 0, s, -ct.inf)
    return s


@ct.inline
def row_terms(pse, b, n2, s1, m0, mrows, lo, hi, M, G, PSE, BAND):
    """(qpos, slope, lo_r, hi_r) of the M folded rows from m0 (0.0 where a feature is off)."""
    qpos = 0.0
    slope = 0.0
    lo_r = 0.0
    hi_r = 0.0
    if BAND or PSE >= 2:
        qpos = query_positions(m0, mrows, s1, M, "GS1", G)
    if BAND:
        lo_r = qpos + lo[b]
        hi_r = qpos + hi[b]
    if PSE >= 2:
        slope = ct.load(slope_rows(pse, b, n2, s1, G)[ct.ds(m0, M, valid=mrows)])
    return qpos, slope, lo_r, hi_r


@ct.inline
def probs(s, m, l, TRANS):
    """P = exp(s - m) / l of a block, from the forward's statistics (guarded: 0 on rows with no visible key)."""
    ok, lsafe = guarded_sum(l)
    return ct.exp(s - along_q(guarded_max(m), TRANS)) / along_q(lsafe, TRANS)


@ct.inline
def dropped_grads(p, dpd, delta, keep, b, n2, s1, m0, mrows, kv0, n, inv_keep, TRANS, G, M, S2, DROPOUT):
    """(Pd, dS) of a block: Pd = P·keep/keep_prob and dS = P ∘ (dP - Δ) with dP = dPd·keep/keep_prob."""
    if DROPOUT:
        kmv = pse_rows(keep, b, n2, s1, 0, "GS1", G, False)
        kp = ct.load(block_of(kmv, m0, mrows, kv0, n, M, S2, TRANS))
        pd = ct.where(kp != 0, p * inv_keep, 0.0)
        dp = ct.where(kp != 0, dpd * inv_keep, 0.0)
    else:
        pd = p
        dp = dpd
    return pd, p * (dp - along_q(delta, TRANS))


@ct.jit
def fas_grad_dq(q, k, v, dy, att, dq, dq_ws, smax, ssum, delta_ws, sink_ws, dpse_ws, mask, pse, keep, sink, zero,
                tasks, task_ptr, qlen, kvlen, qoff, kvoff, lo, hi, prefix, scale, inv_keep, qk_shift, dpse_scale,
                LAYOUT: ct.constexpr, SM_LAYOUT: ct.constexpr, G: ct.constexpr, N1: ct.constexpr, M: ct.constexpr,
                S2: ct.constexpr, D: ct.constexpr, DV: ct.constexpr, PSE: ct.constexpr,
                PSE_ADD_FIRST: ct.constexpr, PSE_ONE_ROW: ct.constexpr, MASK: ct.constexpr, BAND: ct.constexpr,
                PREFIX: ct.constexpr, DROPOUT: ct.constexpr, SINK: ct.constexpr, P_DTYPE: ct.constexpr):
    """dq, Δ (delta_ws, (B, N1, S1, 1) fp32), the dsink row terms (sink_ws, same shape) and the dpse
    contributions (dpse_ws (B, N1, S1, S2) fp32, PSE == 1). PSE / MASK as in ``fas_attention``."""
    core = ct.block_idx()
    for t in range(task_ptr[core], task_ptr[core + 1]):
        b, n2, m0, mrows, j0, j1 = task_fields(tasks, t)
        s1, s2, q0, k0, qv, dov, kv, vv = task_views(q, dy, k, v, b, n2, qlen, kvlen, qoff, kvoff, LAYOUT, G)
        with ct.cube():
            q1 = ct.load(qv[ct.ds(m0, M, valid=mrows), 0:D])
            do1 = ct.load(dov[ct.ds(m0, M, valid=mrows), 0:DV])
            gq = ct.mma(zero[ct.ds(0, M, valid=mrows), 0:16], zero[0:D, 0:16], trans_b=True)     # L0C := 0
        with ct.vector():
            do_u = ct.cast(ct.load(dov[ct.ds(m0, M, valid=mrows), 0:DV]), ct.float32)
            o_u = ct.cast(ct.load(fold_rows(att, b, n2, s1, q0, LAYOUT, "GS1", G)[ct.ds(m0, M, valid=mrows), 0:DV]),
                          ct.float32)
            delta = ct.rowsum(do_u * o_u)
            ct.store(stat_view(delta_ws, b, n2, s1, 0, "BNSD", G, N1)[ct.ds(m0, M, valid=mrows), 0], delta)
            m = row_stat(smax, b, n2, s1, q0, m0, mrows, SM_LAYOUT, G, N1, M)
            l = row_stat(ssum, b, n2, s1, q0, m0, mrows, SM_LAYOUT, G, N1, M)
            if SINK:
                ok, lsafe = guarded_sum(l)
                sk = ct.cast(ct.load(sink_rows(sink, n2, s1, "GS1", G)[ct.ds(m0, M, valid=mrows)]), ct.float32)
                term = ct.where(ok, (0.0 - delta) * ct.exp(sk - guarded_max(m)) / lsafe, 0.0)
                ct.store(stat_view(sink_ws, b, n2, s1, 0, "BNSD", G, N1)[ct.ds(m0, M, valid=mrows), 0], term)
            qpos, slope, lo_r, hi_r = row_terms(pse, b, n2, s1, m0, mrows, lo, hi, M, G, PSE, BAND)
        for j in range(j0, j1):
            kv0 = j * S2
            n = min(S2, s2 - kv0)
            with ct.cube():
                st = ct.mma(q1, kv[ct.ds(kv0, S2, valid=n), 0:D], trans_b=True)
            with ct.vector():
                s = grad_scores(st, pse, mask, b, n2, s1, m0, mrows, kv0, n, qpos, slope, lo_r, hi_r, prefix[b],
                                scale, qk_shift, False, G, M, S2, PSE, PSE_ADD_FIRST, PSE_ONE_ROW, MASK, BAND,
                                PREFIX)
                p = probs(s, m, l, False)
            with ct.cube():
                dpd = ct.mma(do1, vv[ct.ds(kv0, S2, valid=n), 0:DV], trans_b=True)
            with ct.vector():
                pd, ds = dropped_grads(p, dpd, delta, keep, b, n2, s1, m0, mrows, kv0, n, inv_keep, False, G, M, S2,
                                       DROPOUT)
                if PSE == 1:
                    wv = fold_rows(dpse_ws, b, n2, s1, 0, "BNSD", "GS1", G)
                    ct.store(block_of(wv, m0, mrows, kv0, n, M, S2, False), ds * dpse_scale)
                ds = ct.cast(ds, P_DTYPE)
            with ct.cube():
                gq = ct.mma(ds, kv[ct.ds(kv0, S2, valid=n), 0:D], acc=gq)
        with ct.cube():
            ct.store(fold_rows(dq_ws, b, n2, s1, q0, LAYOUT, "GS1", G)[ct.ds(m0, M, valid=mrows), 0:D], gq)
        with ct.vector():
            gq = ct.load(fold_rows(dq_ws, b, n2, s1, q0, LAYOUT, "GS1", G)[ct.ds(m0, M, valid=mrows), 0:D])
            ct.store(fold_rows(dq, b, n2, s1, q0, LAYOUT, "GS1", G)[ct.ds(m0, M, valid=mrows), 0:D],
                     ct.cast(gq * scale, dq.dtype))


@ct.jit
def fas_grad_dkdv(q, k, v, dy, dk, dv, dk_ws, smax, ssum, delta_ws, mask, pse, keep, zero, tasks, task_ptr, qlen,
                  kvlen, qoff, kvoff, lo, hi, prefix, scale, inv_keep, qk_shift, LAYOUT: ct.constexpr,
                  SM_LAYOUT: ct.constexpr, G: ct.constexpr, N1: ct.constexpr, M: ct.constexpr, S2: ct.constexpr,
                  D: ct.constexpr, DV: ct.constexpr, PSE: ct.constexpr, PSE_ADD_FIRST: ct.constexpr,
                  PSE_ONE_ROW: ct.constexpr, MASK: ct.constexpr, BAND: ct.constexpr, PREFIX: ct.constexpr,
                  DROPOUT: ct.constexpr, P_DTYPE: ct.constexpr):
    """dk, dv of one S2 block of key positions per task: tasks (T, 5) = (b, n2, S2 block, first M-row query
    block of each head, query blocks per head); Δ from ``fas_grad_dq``'s delta_ws."""
    core = ct.block_idx()
    for t in range(task_ptr[core], task_ptr[core + 1]):
        b = tasks[t, 0]
        n2 = tasks[t, 1]
        kv0 = tasks[t, 2] * S2
        r0 = tasks[t, 3]
        nr = tasks[t, 4]
        s1, s2, q0, k0, qv, dov, kv, vv = task_views(q, dy, k, v, b, n2, qlen, kvlen, qoff, kvoff, LAYOUT, G)
        n = min(S2, s2 - kv0)
        with ct.cube():
            k1 = ct.load(kv[ct.ds(kv0, S2, valid=n), 0:D])
            v1 = ct.load(vv[ct.ds(kv0, S2, valid=n), 0:DV])
            gk = ct.mma(zero[ct.ds(0, S2, valid=n), 0:16], zero[0:D, 0:16], trans_b=True)    # L0C := 0
            gv = ct.mma(zero[ct.ds(0, S2, valid=n), 0:16], zero[0:DV, 0:16], trans_b=True)
        for u in range(G * nr):
            i0 = (r0 + u % nr) * M
            m0 = (u // nr) * s1 + i0
            mrows = min(M, s1 - i0)
            with ct.cube():
                st = ct.mma(k1, qv[ct.ds(m0, M, valid=mrows), 0:D], trans_b=True)
            with ct.vector():
                m = row_stat(smax, b, n2, s1, q0, m0, mrows, SM_LAYOUT, G, N1, M)
                l = row_stat(ssum, b, n2, s1, q0, m0, mrows, SM_LAYOUT, G, N1, M)
                qpos, slope, lo_r, hi_r = row_terms(pse, b, n2, s1, m0, mrows, lo, hi, M, G, PSE, BAND)
                s = grad_scores(st, pse, mask, b, n2, s1, m0, mrows, kv0, n, qpos, slope, lo_r, hi_r, prefix[b],
                                scale, qk_shift, True, G, M, S2, PSE, PSE_ADD_FIRST, PSE_ONE_ROW, MASK, BAND,
                                PREFIX)
                p = probs(s, m, l, True)
            with ct.cube():
                dpd = ct.mma(v1, dov[ct.ds(m0, M, valid=mrows), 0:DV], trans_b=True)
            with ct.vector():
                delta = row_stat(delta_ws, b, n2, s1, 0, m0, mrows, "BNSD", G, N1, M)
                pd, ds = dropped_grads(p, dpd, delta, keep, b, n2, s1, m0, mrows, kv0, n, inv_keep, True, G, M, S2,
                                       DROPOUT)
                pd = ct.cast(pd, P_DTYPE)
                ds = ct.cast(ds, P_DTYPE)
            with ct.cube():
                gv = ct.mma(pd, dov[ct.ds(m0, M, valid=mrows), 0:DV], acc=gv)
                gk = ct.mma(ds, qv[ct.ds(m0, M, valid=mrows), 0:D], acc=gk)
        with ct.cube():
            ct.store(kv_rows(dv, b, n2, s2, k0, LAYOUT)[ct.ds(kv0, S2, valid=n), 0:DV], gv)
            ct.store(kv_rows(dk_ws, b, n2, s2, k0, LAYOUT)[ct.ds(kv0, S2, valid=n), 0:D], gk)
        with ct.vector():
            gk = ct.load(kv_rows(dk_ws, b, n2, s2, k0, LAYOUT)[ct.ds(kv0, S2, valid=n), 0:D])
            ct.store(kv_rows(dk, b, n2, s2, k0, LAYOUT)[ct.ds(kv0, S2, valid=n), 0:D], ct.cast(gk * scale, dk.dtype))
