"""A deliberately plain, loop-per-element FusedInferAttentionScore reference (small shapes only).

Model
-----
``fia_naive`` computes the same function as :func:`.fia.fia_golden` with no
shared code: every input element is read through its own index arithmetic
(layout, paged block lookup, prefix, left padding), every (batch, head, row)
is a Python loop, and the visibility of each (row, column) pair is decided by
``if`` statements written straight from the aclnn mask table. Tests compare the
vectorised golden against it; it is far too slow for anything but a few
thousand score elements.

Invariants
----------
* Same keyword interface and return convention as ``fia_golden`` (minus
  ``p_dtype``); same documented semantics (see :mod:`.fia`).
* Uses only ``math`` and numpy indexing; converts inputs with ``float()`` of
  float32 views (exact for fp16/bf16/fp32).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["fia_naive"]

INT_MAX = 2147483647


def _f(x) -> float:
    return float(np.float64(np.float32(x)) if x.dtype != np.float64 else x)


def _vals(x, b):
    if x is None:
        return None
    v = [int(t) for t in np.ravel(np.asarray(x))]
    return v * b if len(v) == 1 else v[:b]


def fia_naive(query, key, value, *, pse_shift=None, atten_mask=None, actual_seq_lengths=None,
              actual_seq_lengths_kv=None, block_table=None, query_padding_size=None, kv_padding_size=None,
              key_shared_prefix=None, value_shared_prefix=None, actual_shared_prefix_len=None,
              learnable_sink=None, num_heads=1, scale=1.0, pre_tokens=INT_MAX, next_tokens=INT_MAX,
              input_layout="BSH", num_key_value_heads=0, sparse_mode=0, inner_precise=0, block_size=0,
              softmax_lse_flag=False):
    lay_in, _, lay_out = input_layout.partition("_")
    lay_out = lay_out or lay_in
    n = num_heads
    n2 = num_key_value_heads or n
    g = n // n2
    token = lay_in in ("TND", "NTD")

    # ---- element readers -----------------------------------------------------------------------
    def dense_vec(t, b, h, j, lay, heads):  # j = physical row (S index, or token index)
        if lay == "BSH":
            dd = t.shape[2] // heads
            return t[b, j, h * dd:(h + 1) * dd]
        if lay == "BSND":
            return t[b, j, h]
        if lay == "BNSD":
            return t[b, h, j]
        if lay == "TND":
            return t[j, h]
        return t[h, j]

    def qvec(b, h, i):
        return dense_vec(query, b, h, i, lay_in, n)

    def kv_vec(t, b, h, j, kv_base):
        if block_table is not None:
            blk = int(block_table[b][j // block_size])
            off = j % block_size
            if t.ndim == 3:
                dd = t.shape[2] // n2
                return t[blk, off, h * dd:(h + 1) * dd]
            return t[blk, h, off]
        if token:
            return dense_vec(t, 0, h, kv_base + j, lay_in, n2)
        return dense_vec(t, b, h, j, lay_in, n2)

    # ---- shapes and lengths ----------------------------------------------------------------------
    if token:
        t_rows = query.shape[0] if lay_in == "TND" else query.shape[1]
        cq = [int(x) for x in actual_seq_lengths]
        batch = len(cq)
        q_len = [cq[0]] + [cq[i] - cq[i - 1] for i in range(1, batch)]
        q_base = [0] + cq[:-1]
        if block_table is not None:
            kv_len = _vals(actual_seq_lengths_kv, batch)
            kv_base = [0] * batch
        else:
            ck = [int(x) for x in actual_seq_lengths_kv][:batch]
            kv_len = [ck[0]] + [ck[i] - ck[i - 1] for i in range(1, batch)]
            kv_base = [0] + ck[:-1]
        s1_full = None
    else:
        if lay_in == "BSH":
            batch, s1_full = query.shape[0], query.shape[1]
        elif lay_in == "BSND":
            batch, s1_full = query.shape[0], query.shape[1]
        else:
            batch, s1_full = query.shape[0], query.shape[2]
        if block_table is not None:
            cap = block_table.shape[1] * block_size
        else:
            cap = key.shape[2] if lay_in == "BNSD" else key.shape[1]
        decode = s1_full == 1
        ql = _vals(actual_seq_lengths, batch) if not decode else None
        q_len = ql if ql is not None else [s1_full] * batch
        if decode:
            q_len = [1] * batch
        kl = _vals(actual_seq_lengths_kv, batch)
        kv_len = kl if kl is not None else [cap] * batch
        q_base = [0] * batch
        kv_base = [0] * batch
        if query_padding_size is not None and not decode:
            pad = max(int(np.ravel(query_padding_size)[0]), 0)
            q_base = [s1_full - pad - q_len[b] for b in range(batch)]
        if kv_padding_size is not None:
            pad = max(int(np.ravel(kv_padding_size)[0]), 0)
            kv_base = [cap - pad - kv_len[b] for b in range(batch)]
        t_rows = s1_full

    prefix_len = 0
    if key_shared_prefix is not None:
        full = key_shared_prefix.shape[2] if lay_in == "BNSD" else key_shared_prefix.shape[1]
        prefix_len = full if actual_shared_prefix_len is None else int(np.ravel(actual_shared_prefix_len)[0])

    d_q = query.shape[-1] // n if lay_in == "BSH" else query.shape[-1]
    if block_table is not None:
        d_v = value.shape[2] // n2 if value.ndim == 3 else value.shape[3]
    else:
        d_v = value.shape[-1] // n2 if lay_in == "BSH" else value.shape[-1]
    legacy = lay_in in ("BSH", "BSND", "BNSD") and not token and s1_full == 1 and d_q == d_v \
        and input_layout in ("BSH", "BSND", "BNSD")
    kv_size = int(np.prod(key.shape)) * int(np.prod(value.shape))
    empty_lse = math.inf if (not legacy or kv_size == 0) else float(np.float32(-3.4e38))

    # ---- outputs in [B, N, S, Dv] or [T, N, Dv] ----------------------------------------------------
    if token:
        out = np.zeros((t_rows, n, d_v))
        lse = np.full((t_rows, n), empty_lse)
    else:
        out = np.zeros((batch, n, t_rows, d_v))
        lse = np.full((batch, n, t_rows), empty_lse)

    mask = None if atten_mask is None else np.asarray(atten_mask)

    def user_masked(b, r_phys, c_phys):
        m = mask
        if m.ndim == 2:
            if s1_full == 1:
                return bool(m[b if m.shape[0] > 1 else 0, c_phys])
            return bool(m[r_phys, c_phys])
        if m.ndim == 3:
            return bool(m[b if m.shape[0] > 1 else 0, r_phys, c_phys])
        return bool(m[b if m.shape[0] > 1 else 0, 0, r_phys, c_phys])

    for b in range(batch):
        s1 = q_len[b]
        if not token and q_base[b] < 0:
            continue
        s_kv = kv_len[b] if (token or kv_base[b] >= 0) else 0
        kb = max(kv_base[b], 0) if not token else kv_base[b]
        s2 = prefix_len + s_kv
        if kv_size == 0 or s2 == 0:
            continue
        for h in range(n):
            hk = h // g
            for i in range(s1):
                r_phys = q_base[b] + i
                qv = qvec(b, h, r_phys)
                scores = []
                for j in range(s2):
                    # visibility, straight from the aclnn mask table
                    if legacy:
                        vis = mask is None or not user_masked(b, r_phys, (0 if token else kb) + j)
                    elif sparse_mode == 0:
                        if mask is None:
                            vis = True
                        else:
                            vis = not user_masked(b, r_phys, kb + j)
                            padded = query_padding_size is not None or kv_padding_size is not None
                            if not padded and not (-pre_tokens <= j - i <= next_tokens):
                                vis = False
                    elif sparse_mode == 1:
                        vis = not user_masked(b, r_phys, kb + j)
                    elif sparse_mode == 2:
                        vis = j <= i
                    elif sparse_mode == 3:
                        vis = j - i <= s2 - s1
                    else:
                        vis = (s2 - s1 - pre_tokens) <= j - i <= (s2 - s1 + next_tokens)
                    if not vis:
                        scores.append(None)
                        continue
                    if j < prefix_len:
                        kv = dense_vec(key_shared_prefix, 0, hk, j, lay_in, n2)
                    else:
                        kv = kv_vec(key, b, hk, (0 if token else kb) + j - prefix_len, kv_base[b] if token else 0)
                    sc = scale * sum(_f(a) * _f(c) for a, c in zip(qv, kv))
                    if pse_shift is not None:
                        pb = b if pse_shift.shape[0] > 1 else 0
                        pr = 0 if pse_shift.shape[2] == 1 else r_phys
                        sc += _f(pse_shift[pb, h, pr, kb + j])
                    scores.append(sc)
                seen = [x for x in scores if x is not None]
                if not seen:
                    lse_v, o = math.inf, [0.0] * d_v
                else:
                    mx = max(seen)
                    if learnable_sink is not None:
                        mx = max(mx, _f(learnable_sink[h]))
                    den = sum(math.exp(x - mx) for x in seen)
                    if learnable_sink is not None:
                        den += math.exp(_f(learnable_sink[h]) - mx)
                    o = [0.0] * d_v
                    for j, x in enumerate(scores):
                        if x is None:
                            continue
                        w = math.exp(x - mx) / den
                        if j < prefix_len:
                            vv = dense_vec(value_shared_prefix, 0, hk, j, lay_in, n2)
                        else:
                            vv = kv_vec(value, b, hk, (0 if token else kb) + j - prefix_len,
                                        kv_base[b] if token else 0)
                        for e in range(d_v):
                            o[e] += w * _f(vv[e])
                    lse_v = mx + math.log(den)
                if token:
                    out[q_base[b] + i, h] = o
                    lse[q_base[b] + i, h] = lse_v
                else:
                    out[b, h, r_phys] = o
                    lse[b, h, r_phys] = lse_v

    # ---- output layout --------------------------------------------------------------------------
    if token:
        res = out if lay_out == "TND" else out.transpose(1, 0, 2)
        lse_r = lse[:, :, None]
    else:
        if lay_out == "BSH":
            res = out.transpose(0, 2, 1, 3).reshape(batch, t_rows, n * d_v)
        elif lay_out == "BSND":
            res = out.transpose(0, 2, 1, 3)
        elif lay_out == "NBSD":
            res = out.transpose(1, 0, 2, 3)
        else:
            res = out
        lse_r = lse[..., None]
    return np.ascontiguousarray(res), (lse_r if softmax_lse_flag else None)
