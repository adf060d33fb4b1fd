"""One block of exact attention in float64: scores, bias, mask, sink, softmax, P·V, lse.

Model
-----
For ``hq = h * G`` query heads sharing ``h`` kv heads (GQA: query head
``g + G * n2`` reads kv head ``n2``), rows ``r`` and columns ``c``::

    s     = scale * q·kᵀ (+ pse)                    masked pairs → -inf
    m     = max_c s            (with a sink: max(m, sink) on rows that see a key)
    p     = exp(s - m)
    l     = Σ_c p (+ exp(sink - m))
    out   = (p · v) / l
    lse   = m + ln(l)

A row that sees no key at all (every pair masked, or no kv) is *invalid*: its
output is 0 and its lse is ``+inf``. This is what the kernel's invalid-row
correction writes (inner_precise 2/3; the row max is -inf, the output is
zeroed, ``AdjustSoftMaxRes`` sets the lse to FLOAT_INF), and it holds even
with a learnable sink (the kernel does not fold the sink into a -inf row max).

``p_dtype`` models the chip's precision of P: the matrix fed to P·V is rounded
to float32 then to ``p_dtype`` (the chip casts P to the input dtype before the
second matmul), while ``l`` stays the sum of the unrounded P, as the vector
unit keeps it in fp32. ``score_dtype`` models the precision of the scores: ``q·kᵀ`` and its scaled value
are each rounded to ``score_dtype`` (float32: the upstream st golden's fp32 matmul, where a product beyond
the fp32 range becomes ±inf and an inf - inf row max makes the row NaN, as on the chip's L0C). With
``p_dtype=None`` and ``score_dtype=None`` everything is float64.

Invariants
----------
* Inputs are float64; no input is modified.
* NaN inputs propagate to NaN outputs (never silently zeroed).
"""

from __future__ import annotations

import numpy as np

from .dtypes import round_to

__all__ = ["attend"]


def attend(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, *, bias: np.ndarray | None = None,
           keep: np.ndarray | None = None, sink: np.ndarray | None = None, p_dtype=None, modify=None,
           score_dtype=None):
    """Exact attention of ``q [hq, r, D]`` over ``k [h, c, D]``, ``v [h, c, Dv]``.

    ``bias`` broadcasts to ``[hq, r, c]``; ``keep`` is bool ``[r, c]`` (True =
    attend) or None; ``sink`` is ``[hq]`` or None; ``modify(s) -> s`` rewrites
    the scaled, biased scores ``[hq, r, c]`` before ``keep`` applies (a
    variant's score_mod, and its mask_mod as -inf). Returns ``out [hq, r, Dv]``
    and ``lse [hq, r]``.
    """
    hq, r, d = q.shape
    h, c, _ = k.shape
    dv = v.shape[2]
    g = hq // h
    if c == 0 or r == 0:
        return np.zeros((hq, r, dv)), np.full((hq, r), np.inf)
    s = np.matmul(q.reshape(h, g * r, d), k.transpose(0, 2, 1)).reshape(hq, r, c)
    if score_dtype is not None:
        s = round_to(s, score_dtype)
    s *= scale
    if score_dtype is not None:
        s = round_to(s, score_dtype)
    if bias is not None:
        s += bias
    if modify is not None:
        s = np.array(modify(s), dtype=np.float64)
    if keep is not None:
        s[:, ~keep] = -np.inf
    m = s.max(axis=-1)
    valid = ~np.isneginf(m)
    if sink is not None:
        m = np.where(valid, np.maximum(m, sink[:, None]), m)
    m_safe = np.where(valid, m, 0.0)
    with np.errstate(invalid="ignore"):     # an overflowed (+inf) row max: inf - inf is NaN, as on the chip
        s -= m_safe[..., None]
        np.exp(s, out=s)
    p = s
    denom = p.sum(axis=-1)
    if sink is not None:
        denom = denom + np.where(valid, np.exp(sink[:, None] - m_safe), 0.0)
    if p_dtype is not None:
        p = round_to(p, p_dtype)
    o = np.matmul(p.reshape(h, g * r, c), v).reshape(hq, r, dv)
    with np.errstate(divide="ignore", invalid="ignore"):
        o = np.where(valid[..., None], o / denom[..., None], 0.0)
        lse = np.where(valid, m + np.log(denom), np.inf)
    return o, lse
