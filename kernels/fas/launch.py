"""Host side of the simulated FlashAttentionScore forward: from a normalised call and a tiling to the launch.

Model
-----
``run_fas`` lays the tensors out as ``fas_attention`` reads them (views: BSH as BSND, SBH as (S, B, N, D)),
turns the tiling's per-core ``FasTask`` lists into the kernel's task table — a task of query head
n1 = n2·G + g becomes folded rows ``g·s1 + m_start`` of kv head n2 — allocates the outputs (zero-filled,
softmax_max -inf, as the chip initialises them; zero-stride stand-ins when the launches are only recorded for the
cost model, ``dsl.jit.output_array``) and launches on the tiling's cores.

Invariants
----------
* The kernel runs exactly the tiling's tasks, in each core's order, with its S2 base; the M tile is the S1
  base (or the tallest task, 16-aligned, when every task is shorter).
* A task of a batch with no KV positions is dropped (its rows keep out 0, max -inf, sum 0).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...dsl.jit import output_array
from .host import FasCall, out_shape, stat_shape
from .kernel import fas_attention

__all__ = ["run_fas", "FasRun", "task_table", "kernel_inputs"]


@dataclass
class FasRun:
    """What one simulated call launched."""

    cores: int
    tasks: int
    blocks: int     # (task, S2 block) pairs computed


def _kernel_view(x: np.ndarray, call: FasCall, heads: int) -> np.ndarray:
    if call.layout in ("BSH", "SBH"):
        a, b_, h = x.shape
        return x.reshape(a, b_, heads, h // heads)
    return x


def task_table(call: FasCall, tiling) -> tuple[np.ndarray, np.ndarray, list]:
    """(tasks (T, 6) int64, per-core pointer (cores + 1,), the kept FasTasks) in the kernel's folded rows."""
    rows, counts = [], []
    for core in tiling.core_tasks:
        kept = [t for t in core if call.kvlen[t.b] > 0 and call.qlen[t.b] > 0]
        rows.extend(kept)
        counts.append(len(kept))
    tab = np.zeros((max(1, len(rows)), 6), np.int64)
    for i, t in enumerate(rows):
        g = t.n1 % call.g
        tab[i] = (t.b, t.n1 // call.g, g * int(call.qlen[t.b]) + t.m_start, t.m_rows, t.s2_lo, t.s2_hi)
    ptr = np.zeros(len(counts) + 1, np.int64)
    ptr[1:] = np.cumsum(counts)
    return tab, ptr, rows


def kernel_inputs(call: FasCall, qdtype) -> tuple:
    """(mask, MASK, pse, PSE, keep, sink, prefix): the per-position inputs as the forward and backward kernels read them
    (1-element placeholders where a feature is off)."""
    u8 = np.zeros((1, 1, 1, 1), np.uint8)
    mask_kind, mask = 0, u8
    if call.mask is not None:
        mask_kind = 1 if call.mask.shape[1] == 1 else 2
        mask = np.ascontiguousarray(call.mask[:, 0] if mask_kind == 1 else call.mask)
    if call.pse_kind == "outer":
        pse, pse_kind = call.pse, 1
    elif call.pse_kind in ("alibi", "alibi_sqrt"):
        pse, pse_kind = call.pse, 2 if call.pse_kind == "alibi" else 3
    else:
        pse, pse_kind = np.zeros((1, 1, 1, 1), qdtype), 0
    keep = np.ascontiguousarray(call.keep).view(np.uint8) if call.keep is not None else u8
    sink = call.sink if call.sink is not None else np.zeros(call.n1, np.float32)
    prefix = call.prefix if call.prefix is not None else np.zeros(call.b, np.int64)
    return mask, mask_kind, pse, pse_kind, keep, sink, prefix


def run_fas(call: FasCall, query, key, value, tiling, platform, *, hooks=None, serial: bool = False,
            order: str = "program"):
    """(attention_out, softmax_max, softmax_sum, FasRun) of the simulated forward on ``platform`` (a
    ``tiling.Platform``); ``hooks`` a ``variants.Hooks`` compiled into V1."""
    q = _kernel_view(np.asarray(query), call, call.n1)
    k = _kernel_view(np.asarray(key), call, call.n2)
    v = _kernel_view(np.asarray(value), call, call.n2)
    out = output_array(out_shape(call), q.dtype)
    out_k = _kernel_view(out, call, call.n1)
    smax = output_array(stat_shape(call), np.float32, -np.inf)
    ssum = output_array(stat_shape(call), np.float32)
    sm_k, ss_k = (smax.reshape(-1, 8), ssum.reshape(-1, 8)) if call.softmax_layout == "NTD" else (smax, ssum)
    tab, ptr, rows = task_table(call, tiling)
    if not rows:
        return out, smax, ssum, FasRun(0, 0, 0)
    most = max(t.m_rows for t in rows)
    m_tile = max(most, min(int(tiling.s1_base), -(-most // 16) * 16))
    mask, mask_kind, pse, pse_kind, keep, sink, prefix = kernel_inputs(call, q.dtype)
    caps, consts = [None] * 4, {}
    if hooks is not None and hooks.active:
        caps = [np.ascontiguousarray(c) for c in hooks.captures] + [None] * (4 - len(hooks.captures))
        consts = {"SCORE_MOD": hooks.score_mod, "MASK_MOD": hooks.mask_mod, "NCAP": len(hooks.captures)}
    ncores = len(ptr) - 1
    fas_attention.on(platform)[ncores](
        q, k, v, out_k, sm_k, ss_k, mask, pse, keep, sink, tab, ptr, call.qlen, call.kvlen, call.qoff, call.kvoff,
        call.lo, call.hi, prefix, *caps, np.float32(call.scale), np.float32(1.0 / call.keep_prob),
        np.int64(call.kv_start - call.q_start), LAYOUT=call.kernel_layout, SM_LAYOUT=call.softmax_layout,
        G=call.g, N1=call.n1, M=m_tile, S2=int(tiling.s2_base), D=call.d, DV=call.dv, PSE=pse_kind,
        PSE_ADD_FIRST=call.pse_type == 1, PSE_ONE_ROW=pse_kind == 1 and pse.shape[2] == 1, MASK=mask_kind,
        BAND=call.band, PREFIX=call.prefix is not None, DROPOUT=call.keep is not None,
        SINK=call.sink is not None, P_DTYPE=call.dtype, **consts, serial=serial, order=order)
    blocks = int(sum(t.s2_hi - t.s2_lo for t in rows))
    return out, smax, ssum, FasRun(ncores, len(rows), blocks)
