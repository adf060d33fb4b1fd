"""``npu_ring_attention_update``: RingAttentionUpdate in the tile language, run on the simulated chip.

Model
-----
The operator merges two FlashAttention results of the same queries — (attn out, softmax max, softmax sum)
over two disjoint key sets — into the result over their union (formulas in
:mod:`cvtile.kernels.golden.ring_attention_update`). It is vector-only: ``ring_attention_update_kernel``
has a single ``with ct.vector():`` scope, launched on the ``core_num`` AIV cores of the tiling mirror
(:mod:`cvtile.tiling.ring_attention_update`), each core walking its task rows.

A *task* is a run of ``count`` rows of one (batch, head) that one core merges: attn rows
``A[a0 : a0+count, col, :]`` of the attn view ``A`` (rows, columns, D) and softmax rows
``M[plane, s0 : s0+count, :]`` of the softmax view ``M`` (planes, rows, 8):

* SBH: A = attn (S, B·N, D) (a reshape of (S, B, H)), M = softmax (B·N, S, 8); core c takes the S run
  ``core_rows(c)`` of every (b, n) of its group;
* TND, softmax layout "BNS8" (the default): A = attn (T, N, D), M = softmax as (1, T·N, 8); core c's token
  run is cut at batch borders, and the rows of head n of batch b sit at ``start_b·N + n·S_b + (t - start_b)``;
* TND, softmax layout "TND": M = softmax (T, N, 8) permuted in the kernel to (N, T, 8).

Per block of R rows the kernel loads the four (R, 8) statistics, merges them with
:func:`cvtile.kernels.merge_state.merge_pair` (all 8 lanes, as the chip does) and stores the new max and
sum; the attn weights come from the merge of the statistics' lane 0; then per chunk of DL head-dim lanes
``out = prev · w1 + cur · w2`` in fp32, cast to the attn dtype (RNE).

The tile is fixed at R = 64 rows × DL = 64 lanes (``TILE_ROWS``/``TILE_LANES``), not op_host's UB pass
(``seq_loop_each`` × ``head_dim_loop_each``, ``head_num_loop_each``, recorded by the tiling): every tile
shape is one numba specialisation (about a minute to compile on the 2-core machine), and a fixed tile
makes a whole corpus one specialisation per attn dtype and softmax layout. A 64 × 64 fp32 tile is within
every pass op_host plans (at least 8 positions × 64 lanes, or one token's heads × D). The pass size changes
no element's arithmetic, nor does the inner walk order, which differs from the chip's too (TND: the chip
walks token by token, heads inner; here a core walks its (batch, head) runs).

Inputs are numpy arrays (float16, ml_dtypes.bfloat16 or float32 attn; float32 softmax; int64 qlen) or
torch tensors; outputs come back in the same kind, as ``(attn_out, softmax_max, softmax_sum)``.
"""

from __future__ import annotations

import numpy as np

import cvtile.dsl as ct

from ..tiling.platform import DEFAULT_TARGET
from ..tiling.ring_attention_update import RauTiling, tile_ring_attention_update
from .golden.dtypes import to_numpy
from .merge_state import merge_pair

__all__ = ["npu_ring_attention_update", "ring_attention_update_kernel", "run_ring_attention_update",
           "rau_tasks", "to_torch_like"]


@ct.jit
def ring_attention_update_kernel(a1, m1, l1, a2, m2, l2, out, mo, lo, tasks, task_ptr, d, R: ct.constexpr,
                                 DL: ct.constexpr, SM_PERMUTE: ct.constexpr):
    core = ct.block_idx()
    if SM_PERMUTE:
        m1 = m1.permute(1, 0, 2)
        l1 = l1.permute(1, 0, 2)
        m2 = m2.permute(1, 0, 2)
        l2 = l2.permute(1, 0, 2)
        mo = mo.permute(1, 0, 2)
        lo = lo.permute(1, 0, 2)
    for t in range(task_ptr[core], task_ptr[core + 1]):
        col = tasks[t, 0]
        a0 = tasks[t, 1]
        count = tasks[t, 2]
        plane = tasks[t, 3]
        s0 = tasks[t, 4]
        for r in range(0, count, R):
            nr = min(R, count - r)
            rows = ct.ds(s0 + r, R, valid=nr)
            with ct.vector():
                m, l, w1, w2 = merge_pair(ct.load(m1[plane][rows, 0:8]), ct.load(l1[plane][rows, 0:8]),
                                          ct.load(m2[plane][rows, 0:8]), ct.load(l2[plane][rows, 0:8]))
                ct.store(mo[plane][rows, 0:8], m)
                ct.store(lo[plane][rows, 0:8], l)
                m0, l0, v1, v2 = merge_pair(ct.load(m1[plane][rows, 0]), ct.load(l1[plane][rows, 0]),
                                            ct.load(m2[plane][rows, 0]), ct.load(l2[plane][rows, 0]))
                for d0 in range(0, d, DL):
                    lanes = ct.ds(d0, DL, valid=min(DL, d - d0))
                    arows = ct.ds(a0 + r, R, valid=nr)
                    o1 = ct.cast(ct.load(a1[:, col][arows, lanes]), ct.float32)
                    o2 = ct.cast(ct.load(a2[:, col][arows, lanes]), ct.float32)
                    res = o1 * v1[:, None] + o2 * v2[:, None]
                    ct.store(out[:, col][arows, lanes], ct.cast(res, out.dtype))


def rau_tasks(tiling: RauTiling, actual_seq_qlen=None) -> tuple[np.ndarray, np.ndarray]:
    """(task table (n, 5) int64: col, attn row, count, softmax plane, softmax row; per-core pointers)."""
    per_core: list[list[tuple]] = []
    n = tiling.heads
    cu = None if actual_seq_qlen is None else [int(v) for v in np.asarray(actual_seq_qlen).reshape(-1)]
    for c in range(tiling.core_num):
        first, count = tiling.core_rows(c)
        items = []
        if tiling.layout == "SBH":
            items = [(bn, first, count, bn, first) for bn in tiling.core_bn(c)]
        elif tiling.softmax_layout == "TND":
            items = [(h, first, count, h, first) for h in range(n)]
        else:
            for b in range(len(cu) - 1):
                lo, hi = max(cu[b], first), min(cu[b + 1], first + count)
                if lo >= hi:
                    continue
                sb = cu[b + 1] - cu[b]
                items += [(h, lo, hi - lo, 0, cu[b] * n + h * sb + (lo - cu[b])) for h in range(n)]
        per_core.append(items)
    rows = [it for items in per_core for it in items]
    tab = np.zeros((max(1, len(rows)), 5), np.int64)
    if rows:
        tab[:len(rows)] = rows
    ptr = np.zeros(len(per_core) + 1, np.int64)
    ptr[1:] = np.cumsum([len(items) for items in per_core])
    return tab, ptr


def _views(t: dict, tiling: RauTiling) -> dict:
    """Zero-copy kernel views: attn (rows, columns, D); softmax (planes, rows, 8) (or (T, N, 8) to permute)."""
    v = {}
    for name in ("prev_attn_out", "cur_attn_out"):
        a = t[name]
        v[name] = a.reshape(a.shape[0], -1, tiling.head_dim) if tiling.layout == "SBH" else a
    for name in ("prev_softmax_max", "prev_softmax_sum", "cur_softmax_max", "cur_softmax_sum"):
        s = np.ascontiguousarray(t[name])
        if tiling.layout == "SBH":
            v[name] = s.reshape(-1, tiling.seq, 8)
        elif tiling.softmax_layout == "TND":
            v[name] = s
        else:
            v[name] = s.reshape(1, -1, 8)
    return v


#: the kernel's tile: rows x head-dim lanes (fixed, see the module doc)
TILE_ROWS = 64
TILE_LANES = 64


def run_ring_attention_update(t: dict, tiling: RauTiling, order: str = "program"):
    """Launch the kernel on the tiling: returns ``(attn_out, softmax_max, softmax_sum)`` numpy arrays."""
    v = _views(t, tiling)
    out = np.zeros_like(t["prev_attn_out"])
    mo = np.zeros(t["prev_softmax_max"].shape, np.float32)
    lo = np.zeros(t["prev_softmax_max"].shape, np.float32)
    out_v = out.reshape(v["prev_attn_out"].shape)
    mo_v, lo_v = mo.reshape(v["prev_softmax_max"].shape), lo.reshape(v["prev_softmax_max"].shape)
    tab, ptr = rau_tasks(tiling, t.get("actual_seq_qlen"))
    ring_attention_update_kernel.on(tiling.platform)[tiling.core_num](
        v["prev_attn_out"], v["prev_softmax_max"], v["prev_softmax_sum"], v["cur_attn_out"], v["cur_softmax_max"],
        v["cur_softmax_sum"], out_v, mo_v, lo_v, tab, ptr, int(tiling.head_dim), R=TILE_ROWS, DL=TILE_LANES,
        SM_PERMUTE=tiling.layout == "TND" and tiling.softmax_layout == "TND", order=order)
    return out, mo, lo


def _is_torch(x) -> bool:
    return hasattr(x, "detach") and hasattr(x, "cpu") and type(x).__module__.startswith("torch")


def to_torch_like(inputs, outputs):
    """``outputs`` as torch tensors when any of ``inputs`` is one (bf16 bit-exact), else unchanged."""
    if not any(_is_torch(x) for x in inputs):
        return outputs
    from .fia.api import _to_torch

    return tuple(None if o is None else _to_torch(o) for o in outputs)


def npu_ring_attention_update(prev_attn_out, prev_softmax_max, prev_softmax_sum, cur_attn_out, cur_softmax_max,
                              cur_softmax_sum, *, actual_seq_qlen=None, input_layout: str = "SBH",
                              input_softmax_layout: str = "", target: str = DEFAULT_TARGET,
                              order: str = "program"):
    """torch_npu.npu_ring_attention_update on the simulator: ``(attn_out, softmax_max, softmax_sum)``.

    Bad input raises ``ParamError`` with the operator's aclnn status (see :mod:`cvtile.tiling.ring_attention_update`).
    """
    given = dict(prev_attn_out=prev_attn_out, prev_softmax_max=prev_softmax_max, prev_softmax_sum=prev_softmax_sum,
                 cur_attn_out=cur_attn_out, cur_softmax_max=cur_softmax_max, cur_softmax_sum=cur_softmax_sum,
                 actual_seq_qlen=actual_seq_qlen)
    t = {k: (None if x is None else to_numpy(x)) for k, x in given.items()}
    layout = "SBH" if input_layout is None else str(input_layout)
    tiling = tile_ring_attention_update(t, layout, input_softmax_layout or "", target)
    res = run_ring_attention_update(t, tiling, order=order)
    return to_torch_like(given.values(), res)
