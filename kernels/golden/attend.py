"""One block of attention: scores, bias, mask, sink, softmax, P·V, lse (exact float64, or in fp32 as the st golden).

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
unit keeps it in fp32. ``work_dtype`` is the precision of every intermediate:
None computes in float64; ``"float32"`` computes as the upstream st executor's
golden does (``FiaOpForward``: an fp32 ``np.matmul`` for q·kᵀ, the scale, pse,
row max, exp and row sum in fp32 arrays, fp32 P·V with P rounded to ``p_dtype``,
the division by the fp32 row sum and the lse in fp32), so a q·k beyond the fp32
range is ±inf there and an inf - inf row max makes its row NaN, as on the
chip's L0C. With ``p_dtype=None`` and ``work_dtype=None`` everything is exact
float64.

Invariants
----------
* Inputs are float64; no input is modified.
* NaN inputs propagate to NaN outputs (never silently zeroed).
"""

from __future__ import annotations

import numpy as np

from .dtypes import canonical_dtype, round_to

__all__ = ["attend", "work_float", "block_dims", "empty_block"]


def attend(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, *, bias: np.ndarray | None = None,
           keep: np.ndarray | None = None, sink: np.ndarray | None = None, p_dtype=None, modify=None,
           work_dtype=None):
    """Attention of ``q [hq, r, D]`` over ``k [h, c, D]``, ``v [h, c, Dv]`` (float64 inputs).

    ``bias`` broadcasts to ``[hq, r, c]``; ``keep`` is bool ``[r, c]`` (True =
    attend) or None; ``sink`` is ``[hq]`` or None; ``modify(s) -> s`` rewrites
    the scaled, biased scores ``[hq, r, c]`` before ``keep`` applies (a
    variant's score_mod, and its mask_mod as -inf). Returns ``out [hq, r, Dv]``
    and ``lse [hq, r]`` as float64 arrays (holding float32 values with
    ``work_dtype="float32"``).
    """
    hq, r, h, c, d, dv, g = block_dims(q, k, v)
    if c == 0 or r == 0:
        return empty_block(hq, r, dv)
    f = work_float(work_dtype)
    with np.errstate(over="ignore", invalid="ignore"):   # fp32 overflow to inf is the modelled behaviour
        s = np.matmul(q.reshape(h, g * r, d).astype(f, copy=False),
                      k.transpose(0, 2, 1).astype(f, copy=False)).reshape(hq, r, c)
        s *= f(scale)
        if bias is not None:
            s += np.asarray(bias).astype(f)
    if modify is not None:
        s = np.array(modify(s), dtype=f)
    if keep is not None:
        s[:, ~keep] = -np.inf
    m = s.max(axis=-1)
    valid = ~np.isneginf(m)
    if sink is not None:
        m = np.where(valid, np.maximum(m, np.asarray(sink, f)[:, None]), m)
    m_safe = np.where(valid, m, f(0.0))
    with np.errstate(invalid="ignore"):     # an overflowed (+inf) row max: inf - inf is NaN, as on the chip
        s -= m_safe[..., None]
        np.exp(s, out=s)
    p = s
    denom = p.sum(axis=-1, dtype=f)
    if sink is not None:
        denom = denom + np.where(valid, np.exp(np.asarray(sink, f)[:, None] - m_safe), f(0.0))
    if p_dtype is not None:
        p = round_to(p, p_dtype).astype(f, copy=False)
    o = np.matmul(p.reshape(h, g * r, c), v.astype(f, copy=False)).reshape(hq, r, dv)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        o = np.where(valid[..., None], o / denom[..., None], f(0.0))
        lse = np.where(valid, m + np.log(denom), f(np.inf))
    return o.astype(np.float64), lse.astype(np.float64)


def block_dims(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> tuple:
    """``(hq, r, h, c, d, dv, g)`` of a block: query heads, rows, kv heads, columns, head dims, and the
    G = hq // h query heads per kv head."""
    hq, r, d = q.shape
    h, c, _ = k.shape
    return hq, r, h, c, d, v.shape[2], hq // h


def empty_block(hq: int, r: int, dv: int) -> tuple:
    """The result of a block without rows or keys: output 0, lse +inf."""
    return np.zeros((hq, r, dv)), np.full((hq, r), np.inf)


def work_float(work_dtype):
    """The numpy float type of a ``work_dtype`` (None: float64)."""
    if work_dtype is None:
        return np.float64
    name = canonical_dtype(work_dtype)
    if name not in ("float64", "float32", "float16"):
        raise ValueError(f"work_dtype {work_dtype!r}: float64, float32 or float16")
    return np.dtype(name).type
