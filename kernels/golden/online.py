"""Online-softmax attention over KV blocks: the low-precision benchmark of the upstream st double benchmark.

Model
-----
The upstream st executor judges the TND (split-fuse) cases of FusedInferAttentionScore by a *double
benchmark* (``cv_fused_double_benchmark``, :func:`..precision.compare_double_benchmark`): the chip's error
against a high-precision golden is compared with the error of a *benchmark* that computes the way a flash
attention kernel does (``TestFIAV4SplitFuse.ref_flash_attention`` in
``executor_aclnnFusedInferAttentionScoreV4.py``). :func:`attend_online` is that benchmark, with the
signature of :func:`.attend.attend`. Per query row, over the KV columns in blocks of ``kv_block`` (512
upstream), all in ``work_dtype`` (fp32; fp16 for ``inner_precise`` 1, as the executor's ``interm_dtype``)::

    s   = scale · q·kᵀ (+ pse)          masked pairs → -inf
    hm  = max(gm, rowmax(s))            (the running max; a sink joins it at the row's last block)
    p   = exp(s - hm);  rs = Σ p        (rs in work_dtype, from the unrounded p)
    o   = round(p, p_dtype) · v         (P in the query dtype, as the cube multiplies it)
    dm  = exp(gm - hm)
    gl  = gl · dm + rs;  go = go · dm + o;  gm = hm
    out = go / gl,  lse = gm + ln(gl)   (a sink adds exp(sink - hm) to gl at the last block)

so P is rounded against each block's running max, as on the chip, where the exact golden rounds nothing.
The executor also splits each matmul's sum into 128-wide chunks; here numpy sums in one call (a reordering
of fp32 sums). Rows that see no key give output 0 and lse +inf (:mod:`.attend`'s convention; the
executor adds a finite -3e38 mask instead of -inf, which only differs on rows with no visible key).

Invariants
----------
* Same inputs, outputs and invalid-row rule as :func:`.attend.attend`; returned as float64 arrays holding
  ``work_dtype`` values.
* ``kv_block`` >= the row length gives one block: the online result is then the single-pass softmax with
  P rounded against the row max.
"""

from __future__ import annotations

import numpy as np

from .attend import block_dims, empty_block, work_float
from .dtypes import round_to

__all__ = ["attend_online", "KV_BLOCK"]

#: KV columns per block of the upstream benchmark (``kv_chunk_size``).
KV_BLOCK = 512


def attend_online(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, *, bias: np.ndarray | None = None,
                  keep: np.ndarray | None = None, sink: np.ndarray | None = None, p_dtype=None,
                  work_dtype="float32", kv_block: int = KV_BLOCK):
    """Blockwise online-softmax attention of ``q [hq, r, D]`` over ``k [h, c, D]``, ``v [h, c, Dv]`` (see the
    module doc); ``bias``, ``keep`` and ``sink`` as in :func:`.attend.attend`. Returns
    ``(out [hq, r, Dv], lse [hq, r])``."""
    hq, r, h, c, d, dv, g = block_dims(q, k, v)
    if c == 0 or r == 0:
        return empty_block(hq, r, dv)
    f = work_float(work_dtype)
    qf = q.reshape(h, g * r, d).astype(np.float32, copy=False)
    gm = np.full((hq, r), -np.inf, f)
    gl = np.zeros((hq, r), f)
    go = np.zeros((hq, r, dv), f)
    sk = None if sink is None else np.asarray(sink, f)[:, None]
    for c0 in range(0, c, kv_block):
        c1 = min(c, c0 + kv_block)
        last = c1 == c
        with np.errstate(over="ignore", invalid="ignore"):
            s = np.matmul(qf, k[:, c0:c1].transpose(0, 2, 1).astype(np.float32)).reshape(hq, r, c1 - c0)
            s = s.astype(f) * f(scale)
            if bias is not None:
                s += np.asarray(bias)[..., c0:c1].astype(f)
        if keep is not None:
            s[:, ~keep[:, c0:c1]] = -np.inf
        hm = np.maximum(gm, s.max(axis=-1))
        if sk is not None and last:
            hm = np.where(np.isneginf(hm), hm, np.maximum(hm, sk))
        hs = np.where(np.isneginf(hm), f(0.0), hm)           # a row with no key so far: exp(-inf) = 0, not NaN
        with np.errstate(invalid="ignore", over="ignore"):
            p = np.exp(s - hs[..., None])
            rs = p.sum(axis=-1, dtype=f)
            pr = p if p_dtype is None else round_to(p, p_dtype).astype(f, copy=False)
            o = np.matmul(pr.reshape(h, g * r, c1 - c0).astype(np.float32),
                          v[:, c0:c1].astype(np.float32)).reshape(hq, r, dv).astype(f)
            dm = np.exp(gm - hs)
            gl = gl * dm + rs
            go = go * dm[..., None] + o
            if sk is not None and last:
                gl = gl + np.where(np.isneginf(hm), f(0.0), np.exp(sk - hs))
        gm = hm
    ok = gl != 0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        out = np.where(ok[..., None], go / np.where(ok, gl, f(1.0))[..., None], f(0.0))
        lse = np.where(ok, gm + np.log(np.where(ok, gl, f(1.0))), f(np.inf))
    return out.astype(np.float64), lse.astype(np.float64)
