"""Host side of the simulated FlashAttentionScore backward: task tables, workspaces, the two launches and the
host reductions.

Model
-----
``grad_plan`` lays the tensors out as the kernels of :mod:`.grad_kernel` read them (the forward's views: BSH
as BSND, SBH as (S, B, N, D)), builds two task lists and deals each over the platform's AIC cores evenly in
order (core c takes a contiguous run; run lengths differ by at most one). The FAG op_host tiling (its
templates, S1/S2 bases and core split) is **not** mirrored: the block sizes are :func:`grad_blocks` (M = 64
query rows; S2 = 128 for the dq kernel, 128 / 64 / 32 for the dk/dv kernel by what L0C holds), chosen so
every tile fits A2's UB, L1 and L0 up to D = 256.

* dq tasks: (b, kv head, first folded row g·s1 + i0, rows, S2 block run [j0, j1)), one per (b, n1, M-row
  block); the run is the blocks the band (with its prefix) can make visible, the rest are skipped.
* dk/dv tasks: (b, kv head, S2 block, first query block, query blocks per head), one per (b, n2, S2 block);
  the query blocks are those the band can make visible.

``run_fas_grad`` launches ``fas_grad_dq`` first (it writes Δ = rowsum(dO∘out), read by ``fas_grad_dkdv``),
then ``fas_grad_dkdv``, and reduces on the host: dpse is the fp32 workspace (B, N1, S1, S2) summed over the
pse's broadcast axes (B = 1, S1 = 1), dsink the (B, N1, S1) row terms summed per head.

Invariants
----------
* Batches with no query rows or no key positions get no task (their dq / dk / dv stay 0).
* Skipping a block only drops (row, key) pairs that are invisible to every row of the block, whose P, and
  so dS, is 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .grad_kernel import fas_grad_dkdv, fas_grad_dq
from .host import FasCall
from .launch import _kernel_view, kernel_inputs

__all__ = ["run_fas_grad", "grad_plan", "GradPlan", "GradLaunch", "FasGradRun", "grad_blocks", "dq_tasks", "dkdv_tasks",
           "deal"]

M_BLOCK = 64


@dataclass
class FasGradRun:
    """What one simulated backward launched."""

    cores: int
    dq_tasks: int
    dkdv_tasks: int
    dq_blocks: int       # (dq task, S2 block) pairs computed
    dkdv_blocks: int     # (dk/dv task, head, query block) triples computed
    m: int
    s2_dq: int           # S2 block of the dq kernel
    s2_kv: int           # S2 block (key positions per task) of the dk/dv kernel


def grad_blocks(call: FasCall, platform) -> tuple[int, int, int]:
    """(M, S2 of the dq kernel, S2 of the dk/dv kernel). The dk/dv kernel keeps its (S2, D) and (S2, Dv) fp32
    accumulators resident in L0C beside the two ping-pong (S2, M) pieces of its products, so its S2 is the
    largest of 128 / 64 / 32 with ``S2·(D + Dv + 2M)·4 <= L0C`` (A2: 128 up to D + Dv = 128, 64 up to 384,
    32 above); the dq kernel's (M, D) accumulator fits beside S2 = 128 up to D = 256."""
    for s2kv in (128, 64, 32):
        if s2kv * (call.d + call.dv + 2 * M_BLOCK) * 4 <= platform.l0c:
            break
    return M_BLOCK, 128, s2kv


def _kv_span(call: FasCall, b: int, i0: int, i1: int) -> tuple[int, int]:
    """[lo, hi) key positions the band (or prefix) can make visible to query rows [i0, i1) of batch b."""
    s2 = int(call.kvlen[b])
    if not call.band:
        return 0, s2
    lo, hi = max(0, i0 + int(call.lo[b])), min(s2, i1 - 1 + int(call.hi[b]) + 1)
    if call.prefix is not None and int(call.prefix[b]) > 0:
        p = min(s2, int(call.prefix[b]))
        lo, hi = (0, max(hi, p)) if hi > lo else (0, p)
    return lo, max(lo, hi)


def _q_span(call: FasCall, b: int, j0: int, j1: int) -> tuple[int, int]:
    """[lo, hi) query rows the band (or prefix) can make see key positions [j0, j1) of batch b."""
    s1 = int(call.qlen[b])
    if not call.band or (call.prefix is not None and int(call.prefix[b]) > j0):
        return 0, s1
    lo, hi = max(0, j0 - int(call.hi[b])), min(s1, j1 - 1 - int(call.lo[b]) + 1)
    return lo, max(lo, hi)


def dq_tasks(call: FasCall, m: int, s2b: int) -> np.ndarray:
    """(T, 6) int64: (b, n2, folded first row, rows, first S2 block, end S2 block) per (b, n1, row block)."""
    rows = []
    for b in range(call.b):
        s1, s2 = int(call.qlen[b]), int(call.kvlen[b])
        if s1 == 0 or s2 == 0:
            continue
        for n1 in range(call.n1):
            g = n1 % call.g
            for i0 in range(0, s1, m):
                mr = min(m, s1 - i0)
                lo, hi = _kv_span(call, b, i0, i0 + mr)
                j0, j1 = (lo // s2b, -(-hi // s2b)) if hi > lo else (0, 0)
                rows.append((b, n1 // call.g, g * s1 + i0, mr, j0, j1))
    return np.asarray(rows, np.int64).reshape(-1, 6)


def dkdv_tasks(call: FasCall, m: int, s2b: int) -> np.ndarray:
    """(T, 5) int64: (b, n2, S2 block, first query block, query blocks per head) per (b, n2, S2 block)."""
    rows = []
    for b in range(call.b):
        s1, s2 = int(call.qlen[b]), int(call.kvlen[b])
        if s1 == 0 or s2 == 0:
            continue
        for n2 in range(call.n2):
            for j in range(-(-s2 // s2b)):
                lo, hi = _q_span(call, b, j * s2b, min(s2, (j + 1) * s2b))
                r0, r1 = (lo // m, -(-hi // m)) if hi > lo else (0, 0)
                rows.append((b, n2, j, r0, r1 - r0))
    return np.asarray(rows, np.int64).reshape(-1, 5)


def deal(ntasks: int, cores: int) -> np.ndarray:
    """(C + 1,) pointers: ``ntasks`` dealt over C = min(cores, ntasks) cores in order, evenly."""
    c = max(1, min(cores, ntasks))
    counts = np.full(c, ntasks // c, np.int64)
    counts[:ntasks % c] += 1
    ptr = np.zeros(c + 1, np.int64)
    ptr[1:] = np.cumsum(counts)
    return ptr


def _sum_to(ws: np.ndarray, shape: tuple) -> np.ndarray:
    """The (B, N1, S1, S2) dpse workspace summed over the pse's broadcast axes, zero-padded to ``shape``."""
    r = ws
    if shape[0] == 1:
        r = r.sum(axis=0, keepdims=True)
    if shape[2] == 1:
        r = r.sum(axis=2, keepdims=True)
    out = np.zeros(shape, np.float64)
    out[:, :, :r.shape[2], :r.shape[3]] = r
    return out


@dataclass
class GradLaunch:
    """One kernel launch of the backward: ``kernel.on(platform)[grid](*args, **consts)``."""

    kernel: object
    grid: int
    args: tuple
    consts: dict


@dataclass
class GradPlan:
    """The backward's launches (dq first, then dk/dv), the outputs they write (kernel views of dq / dk / dv)
    and the workspaces the host reduces."""

    dq: np.ndarray
    dk: np.ndarray
    dv: np.ndarray
    delta_ws: np.ndarray
    sink_ws: np.ndarray
    dpse_ws: np.ndarray
    launches: list
    run: FasGradRun


def grad_plan(call: FasCall, query, key, value, dy, softmax_max, softmax_sum, attention_in, platform) -> GradPlan:
    """Everything ``run_fas_grad`` launches, with zero-filled outputs and workspaces (nothing runs)."""
    q = _kernel_view(np.asarray(query), call, call.n1)
    k = _kernel_view(np.asarray(key), call, call.n2)
    v = _kernel_view(np.asarray(value), call, call.n2)
    do = _kernel_view(np.asarray(dy), call, call.n1)
    att = _kernel_view(np.asarray(attention_in), call, call.n1)
    dq = np.zeros(np.shape(query), q.dtype)
    dk = np.zeros(np.shape(key), k.dtype)
    dv = np.zeros(np.shape(value), v.dtype)
    dq_k, dk_k, dv_k = _kernel_view(dq, call, call.n1), _kernel_view(dk, call, call.n2), _kernel_view(dv, call, call.n2)
    smax = np.ascontiguousarray(softmax_max, np.float32)
    ssum = np.ascontiguousarray(softmax_sum, np.float32)
    sm_k, ss_k = (smax.reshape(-1, 8), ssum.reshape(-1, 8)) if call.softmax_layout == "NTD" else (smax, ssum)
    m, s2q, s2kv = grad_blocks(call, platform)
    tq, tkv = dq_tasks(call, m, s2q), dkdv_tasks(call, m, s2kv)
    rows_shape = (call.b, call.n1, max(1, call.s1_full), 1)
    one = (1, 1, 1, 1)
    delta_ws = np.zeros(rows_shape, np.float32)
    sink_ws = np.zeros(rows_shape if call.sink is not None else one, np.float32)
    dpse_ws = np.zeros((call.b, call.n1, call.s1_full, call.s2_full) if call.pse_kind == "outer" else one,
                       np.float32)
    mask, mask_kind, pse, pse_kind, keep, sink, prefix = kernel_inputs(call, q.dtype)
    consts = dict(LAYOUT=call.kernel_layout, SM_LAYOUT=call.softmax_layout, G=call.g, N1=call.n1, M=m,
                  D=call.d, DV=call.dv, PSE=pse_kind, PSE_ADD_FIRST=call.pse_type == 1,
                  PSE_ONE_ROW=pse_kind == 1 and pse.shape[2] == 1, MASK=mask_kind, BAND=call.band,
                  PREFIX=call.prefix is not None, DROPOUT=call.keep is not None, P_DTYPE=call.dtype)
    scale, inv_keep = np.float32(call.scale), np.float32(1.0 / call.keep_prob)
    shift = np.int64(call.kv_start - call.q_start)
    lens = (call.qlen, call.kvlen, call.qoff, call.kvoff, call.lo, call.hi, prefix)
    cores = int(platform.aic)
    pq, pkv = deal(len(tq), cores), deal(len(tkv), cores)
    launches = []
    zero = np.zeros((max(m, s2kv, call.d), 16), q.dtype)   # the operand that sets the L0C accumulators to 0
    if len(tq):
        launches.append(GradLaunch(fas_grad_dq, len(pq) - 1, (
            q, k, v, do, att, dq_k, np.zeros(dq_k.shape, np.float32), sm_k, ss_k, delta_ws, sink_ws, dpse_ws, mask,
            pse, keep, sink, zero, tq, pq, *lens, scale, inv_keep, shift,
            np.float32(call.scale if call.pse_type == 1 else 1.0)),
            dict(consts, S2=s2q, SINK=call.sink is not None)))
        launches.append(GradLaunch(fas_grad_dkdv, len(pkv) - 1, (
            q, k, v, do, dk_k, dv_k, np.zeros(dk_k.shape, np.float32), sm_k, ss_k, delta_ws, mask, pse, keep, zero,
            tkv, pkv, *lens, scale, inv_keep, shift), dict(consts, S2=s2kv)))
    run = FasGradRun(len(pq) - 1 if len(tq) else 0, len(tq), len(tkv), int((tq[:, 5] - tq[:, 4]).sum()),
                     int((tkv[:, 4] * call.g).sum()), m, s2q, s2kv)
    return GradPlan(dq, dk, dv, delta_ws, sink_ws, dpse_ws, launches, run)


def run_fas_grad(call: FasCall, query, key, value, dy, softmax_max, softmax_sum, attention_in, platform, *,
                 serial: bool = False, order: str = "program", check=None):
    """(dq, dk, dv, dpse float64 or None, dsink float64 or None, FasGradRun) of the simulated backward on
    ``platform`` (a ``tiling.Platform``); ``check`` a ``cvtile.sim.CheckMode`` (or True) runs checking mode."""
    plan = grad_plan(call, query, key, value, dy, softmax_max, softmax_sum, attention_in, platform)
    for ln in plan.launches:
        ln.kernel.on(platform)[ln.grid](*ln.args, **ln.consts, serial=serial, order=order, check=check)
    dpse = dsink = None
    if call.pse_kind == "outer":
        dpse = _sum_to(plan.dpse_ws.astype(np.float64), call.pse.shape)
    if call.sink is not None:
        dsink = plan.sink_ws[..., 0].astype(np.float64).sum(axis=(0, 2))
    return plan.dq, plan.dk, plan.dv, dpse, dsink, plan.run
