"""FlashAttentionScore in float64: the forward (out, softmax max / sum) and the analytic backward.

Model
-----
Per batch b and query head n (kv head n // G), over the pairs ``FasCall.visible(b, n)``::

    t   = q·kᵀ
    s   = scale·t + pse            (pse types 0, 2, 3)      s = scale·(t + pse)   (pse type 1)
    m   = max_j s                  (a sink: max(m, sink) on rows that see a key)
    l   = Σ_j exp(s - m)  (+ exp(sink - m))
    P   = exp(s - m) / l
    Pd  = P · keep / keep_prob     (dropout; keep_prob = 1: Pd = P)
    out = Pd · v

softmax_max = m and softmax_sum = l, each written to the 8 lanes of its (…, 8) row; a row with no visible
pair has out 0, m = -inf, l = 0. ``p_dtype`` rounds Pd to the input dtype before the product with v (the
chip's cast of P before the second matmul; the sum keeps the unrounded P), as the FIA golden's "lowp".

Backward (``fas_grad_golden``), from dO and the same call::

    dPd = dO·vᵀ;  dP = dPd · keep / keep_prob;  Δ = Σ_j P·dP (= Σ dO∘out)
    dS  = P · (dP - Δ)
    dv  = Pdᵀ·dO;  dt = scale·dS;  dq = dt·k;  dk = dtᵀ·q
    dpse = dS (types 0/2/3) or scale·dS (type 1), summed over the pse's broadcast axes
    dsink[n] = -Σ_rows Δ · exp(sink - m) / l

(the G query heads of a kv head add into its dk, dv).

Invariants
----------
* Inputs are never modified; everything is float64 until the outputs are cast to the call's dtypes.
"""

from __future__ import annotations

import numpy as np

from ..fas.host import FasCall, head_rows, out_shape, stat_rows, stat_shape
from .dtypes import numpy_dtype, round_to, to_f64

__all__ = ["fas_golden", "fas_grad_golden", "head_scores"]


def head_scores(call: FasCall, q, k, b: int, n: int, modify=None):
    """(s, vis, t) of batch b, query head n: the scores after scale, pse and ``modify(s, b, h, q_idx, kv_idx)``
    (a variant's score_mod / mask_mod as -inf; q_idx (s1, 1), kv_idx (1, s2)) with -inf off the visible pairs,
    the visibility, and q·kᵀ (all float64)."""
    s1, s2 = int(call.qlen[b]), int(call.kvlen[b])
    qh = to_f64(head_rows(q, call, b, n, int(call.qoff[b]), s1, call.d), "query")
    kh = to_f64(head_rows(k, call, b, n // call.g, int(call.kvoff[b]), s2, call.d), "key")
    t = qh @ kh.T
    bias = call.bias(b, n)
    if bias is None:
        s = call.scale * t
    elif call.pse_type == 1:
        s = call.scale * (t + bias)
    else:
        s = call.scale * t + bias
    if modify is not None:
        s = np.broadcast_to(np.asarray(modify(s, b, n, np.arange(s1)[:, None], np.arange(s2)[None, :]),
                                       dtype=np.float64), s.shape)
    vis = call.visible(b, n)
    s = np.where(vis, s, -np.inf)
    return s, vis, t


def _softmax(call: FasCall, s: np.ndarray, n: int):
    """(P, m, l) of one head's scores (P over the visible pairs; invalid rows 0)."""
    m = s.max(axis=1) if s.shape[1] else np.full(s.shape[0], -np.inf)
    valid = ~np.isneginf(m)
    if call.sink is not None:
        m = np.where(valid, np.maximum(m, float(call.sink[n])), m)
    ms = np.where(valid, m, 0.0)
    e = np.exp(s - ms[:, None])
    l = e.sum(axis=1)
    if call.sink is not None:
        l = l + np.where(valid, np.exp(float(call.sink[n]) - ms), 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.where(valid[:, None], e / np.where(valid, l, 1.0)[:, None], 0.0)
    return p, m, np.where(valid, l, 0.0)


def _keep(call: FasCall, b: int, n: int) -> np.ndarray | None:
    if call.keep is None:
        return None
    return call.keep[b, n, :int(call.qlen[b]), :int(call.kvlen[b])]


def fas_golden(call: FasCall, query, key, value, *, p_dtype=None, modify=None):
    """(attention_out in the query's dtype, softmax_max, softmax_sum float32) of a call; ``modify`` as in
    :func:`head_scores`."""
    out = np.zeros(out_shape(call), np.float64)
    smax = np.zeros(stat_shape(call), np.float32)
    ssum = np.zeros(stat_shape(call), np.float32)
    for b in range(call.b):
        s1, s2 = int(call.qlen[b]), int(call.kvlen[b])
        if s1 == 0:
            continue
        for n in range(call.n1):
            if s2 == 0:
                stat_rows(smax, call, b, n)[:] = -np.inf
                continue
            s, _, _ = head_scores(call, query, key, b, n, modify)
            p, m, l = _softmax(call, s, n)
            pd = p
            kp = _keep(call, b, n)
            if kp is not None:
                pd = p * kp / call.keep_prob
            if p_dtype is not None:
                # the chip casts the unnormalised exp(s - m) (dropped) to the input dtype; 1/l is applied in fp32
                pd = round_to(pd * l[:, None], p_dtype) / np.where(l > 0, l, 1.0)[:, None]
            vh = to_f64(head_rows(value, call, b, n // call.g, int(call.kvoff[b]), s2, call.dv), "value")
            head_rows(out, call, b, n, int(call.qoff[b]), s1, call.dv)[:] = pd @ vh
            stat_rows(smax, call, b, n)[:] = m[:, None]
            stat_rows(ssum, call, b, n)[:] = l[:, None]
    return out.astype(numpy_dtype(call.dtype)), smax, ssum


def fas_grad_golden(call: FasCall, query, key, value, dy):
    """(dq, dk, dv, dpse or None, dsink or None) in float64 (shapes of query, key, value, pse, sink)."""
    dq = np.zeros(np.shape(query), np.float64)
    dk = np.zeros(np.shape(key), np.float64)
    dvv = np.zeros(np.shape(value), np.float64)
    dpse = None if call.pse_kind != "outer" else np.zeros(call.pse.shape, np.float64)
    dsink = None if call.sink is None else np.zeros(call.n1, np.float64)
    for b in range(call.b):
        s1, s2 = int(call.qlen[b]), int(call.kvlen[b])
        if s1 == 0 or s2 == 0:
            continue
        q0, k0 = int(call.qoff[b]), int(call.kvoff[b])
        for n in range(call.n1):
            n2 = n // call.g
            s, _, _ = head_scores(call, query, key, b, n)
            p, m, l = _softmax(call, s, n)
            kp = _keep(call, b, n)
            pd = p if kp is None else p * kp / call.keep_prob
            qh = to_f64(head_rows(query, call, b, n, q0, s1, call.d), "query")
            kh = to_f64(head_rows(key, call, b, n2, k0, s2, call.d), "key")
            vh = to_f64(head_rows(value, call, b, n2, k0, s2, call.dv), "value")
            do = to_f64(head_rows(dy, call, b, n, q0, s1, call.dv), "dy")
            dpd = do @ vh.T
            dp = dpd if kp is None else dpd * kp / call.keep_prob
            delta = (p * dp).sum(axis=1)
            ds = p * (dp - delta[:, None])
            head_rows(dvv, call, b, n2, k0, s2, call.dv)[:] += pd.T @ do
            dt = call.scale * ds
            head_rows(dq, call, b, n, q0, s1, call.d)[:] += dt @ kh
            head_rows(dk, call, b, n2, k0, s2, call.d)[:] += dt.T @ qh
            if dpse is not None:
                g = ds * (call.scale if call.pse_type == 1 else 1.0)
                pb = b if dpse.shape[0] > 1 else 0
                if dpse.shape[2] == 1:
                    dpse[pb, n, 0, :s2] += g.sum(axis=0)
                else:
                    dpse[pb, n, :s1, :s2] += g
            if dsink is not None:
                valid = ~np.isneginf(m)
                ps = np.where(valid, np.exp(float(call.sink[n]) - np.where(valid, m, 0.0)) /
                              np.where(valid, l, 1.0), 0.0)
                dsink[n] += -(delta * ps).sum()
    return dq, dk, dvv, dpse, dsink
