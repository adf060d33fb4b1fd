"""FlashAttentionScore arch22 core split: which S1 blocks each core computes, in which order, over which S2 range.

Model
-----
Work is the flat list of S1 blocks in the kernels' order: batch, kv head n2, group g, S1 block (fixed
lengths: ``(b*N2 + n2)*G + g`` rows of ``s1_outer`` blocks; TND: batch-major, each batch contributing
``N2*G*ceil(q_b / s1_base)`` blocks; the B template: whole batches). op_host gives every *worker* (an AIV;
an AIC for the SameAB flavours) one contiguous run of that list:

* dense (sparse type ALL, fixed lengths): runs of ``split_factor = ceil(total / workers)`` blocks
  (``SetMultiCoreParams``; the kernels' ``Process``);
* sparse, fixed lengths (``SetSparseStartIdx``): a binary search for the smallest per-worker load L for which
  the greedy contiguous partition fits the workers (``PartitionSparseData``: each worker takes
  ``floor(L / period_load)`` whole periods of the per-S1-block loads, then blocks while the load stays <= L);
  the search keeps the last successful partition, so it is the optimal contiguous min-max partition;
* prefix (``SetPrefixSparseStartIdx``): a greedy pass closing a run as soon as its load reaches
  ceil(total load / workers);
* TND (the varlen ``SetSparseStartIdx``, always): an even split, a greedy pass towards the running average,
  ``BalanceLoad`` refinements (one block moved across a boundary when it lowers the maximum), and the better of
  the even and the refined split by maximum load (the algorithm of op_host's IFA split, shared with
  :mod:`.flash_decode`).

A worker with ``start[w]`` runs to ``start[w+1]`` (the last to the total), as ``GetS1LoopRange`` reads
``sparseStartIdx``. With L1 reuse the two AIV of an AIC share the run of the even one (``sparseStartIdx[2k]``
to ``[2k+2]``, or ``2k * split_factor`` onwards) and take alternate blocks: S1s2Bn2gs1 alternates within
each (b, n1) row (an odd count adds a fake iteration to the odd AIV, which recomputes its partner's block and
is not listed here), the even AIV extends its S2 end to the partner block's and the odd one starts at its
partner's start (``useNext`` / ``l1ReuseBlockMod2``) to keep the pair in lockstep over the shared K/V in L1;
those extra positions are masked for the AIV's own rows, so a task lists its block's own range (what
``GetS2LoopRange`` gives the block unpaired). S1Bn2gs1 alternates over the whole run.

The S2 range of a block is the kernel's (:func:`.fas_sparse.fixed_s2_range` / ``varlen_s2_range``); a task
lists it both in KV positions and in ``s2_base`` blocks counted from position 0.

Invariants
----------
* Every S1 block of the flat list is in exactly one task of one worker (a fake L1-reuse iteration is not a
  task); no block is split across workers.
* AIV ``2c`` and ``2c+1`` belong to AIC ``c`` (the mix-mode block index); ``core_tasks`` interleaves their
  lists, which is the L1-reuse processing order and a faithful merge otherwise.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from .fas_route import FasPlan
from .fas_sparse import cdiv, fixed_s2_range, varlen_s2_range
from .flash_decode import _balanced_starts

__all__ = ["FasTask", "worker_starts", "worker_tasks", "core_groups", "core_count", "partition_starts",
           "prefix_starts", "varlen_starts"]


@dataclass(frozen=True)
class FasTask:
    """Query rows [m_start, m_start + m_rows) of head n1 of batch b (positions within the batch) against S2 blocks
    [s2_lo, s2_hi) of ``s2_base`` positions from KV position 0; ``kv_start`` / ``kv_end`` are the exact KV
    positions the real kernel iterates (-1: the block bounds)."""

    b: int
    n1: int
    m_start: int
    m_rows: int
    s2_lo: int
    s2_hi: int
    kv_start: int = -1
    kv_end: int = -1


# ---- the three balancing algorithms ---------------------------------------------------------------------------
def partition_starts(period: list[int], total: int, workers: int) -> list[int]:
    """``SetSparseStartIdx`` (fixed lengths): the start of each worker's run; the load of block i is
    ``period[i % len(period)]``. Unused workers start at ``total``."""
    starts = [total] * workers
    if total <= workers:
        return list(range(total)) + [total] * (workers - total)
    n, s = len(period), sum(period)
    pre = [0]
    for x in period:
        pre.append(pre[-1] + x)
    load_total = s * (total // n)

    def prefix(i: int) -> int:
        return (i // n) * s + pre[i % n]

    def last_fit(t: int) -> int:
        """The largest e with prefix(e) <= t (capped at total); loads are >= 1, so ``pre`` rises strictly."""
        q = t // s
        return min(q * n + bisect_right(pre, t - q * s) - 1, total)

    def attempt(limit: int) -> list[int] | None:
        out, start = [0], 0
        while True:
            end = last_fit(prefix(start) + limit)
            if end >= total:
                return out + [total] * (workers - len(out))
            if end == start or len(out) >= workers:
                return None
            out.append(end)
            start = end

    lo = load_total // workers - 1
    hi = cdiv(load_total, workers) + max(period)
    while lo + 1 < hi:
        mid = lo + (hi - lo) // 2
        got = attempt(mid) if mid * workers >= load_total else None
        if got is not None:
            hi, starts = mid, got
        else:
            lo = mid
    return starts


def prefix_starts(load_of, total: int, workers: int) -> list[int]:
    """``SetPrefixSparseStartIdx``: close a run once its load reaches ceil(total load / workers)."""
    if total <= workers:
        return list(range(total)) + [total] * (workers - total)
    load_total = sum(load_of(i) for i in range(total))
    expect = cdiv(load_total, workers)
    starts, acc, begin = [], 0, 0
    for i in range(total):
        cur = load_of(i)
        if acc >= expect:
            starts.append(begin)
            begin, acc = i, cur
        else:
            acc += cur
    if acc:
        starts.append(begin)
    return starts + [total] * (workers - len(starts))


def varlen_starts(loads: list[int], total: int, workers: int, split_factor: int) -> list[int]:
    """The varlen ``SetSparseStartIdx``: the same even / greedy / ``BalanceLoad`` algorithm op_host's IFA tiling
    uses (:func:`.flash_decode._balanced_starts`); only the first ``workers`` starts are read (the entries op_host
    computes past them never reach a worker's range)."""
    return list(_balanced_starts(loads, total, workers, split_factor)[:workers])


# ---- runs per worker -------------------------------------------------------------------------------------------
def worker_starts(plan: FasPlan) -> list[int]:
    """The start of every worker's run (length = the number of workers op_host splits over)."""
    v = plan.view
    if plan.template == "Bn2gs1s2_B" or not plan.balanced:
        n = plan.core_num // 2 if plan.split_unit == "aic" else plan.core_num
        if plan.l1_reuse:       # one run per AIV pair, both AIV start there
            return [min((w // 2) * plan.split_factor, plan.total) for w in range(n)]
        return [min(w * plan.split_factor, plan.total) for w in range(n)]
    if plan.template == "VarLen":
        n = plan.core_num // 2 if plan.same_ab else plan.core_num
        return varlen_starts(plan.loads, plan.total, n, plan.split_factor)
    n = min(plan.core_num // 2, 24) if plan.same_ab else min(plan.core_num, 48)
    if plan.sparse.prefix is not None and plan.sparse.sparse_type == 5:
        per_b = plan.s1_outer * v.n2 * v.g
        starts = prefix_starts(lambda i: plan.loads[i // per_b][i % plan.s1_outer], plan.total, n)
    else:
        starts = partition_starts(plan.loads, plan.total, n)
    return starts[:n]


def _runs(plan: FasPlan) -> list[tuple[int, int]]:
    starts = worker_starts(plan)
    n = len(starts)
    if plan.l1_reuse and plan.balanced:
        # the pair (2k, 2k+1) runs from start[2k] to start[2k+2]
        return [(starts[w - w % 2], starts[w - w % 2 + 2] if w - w % 2 + 2 < n else plan.total) for w in range(n)]
    if plan.l1_reuse:
        return [(s, min(s + plan.split_factor, plan.total)) for s in starts]
    if not plan.balanced:
        return [(s, min(s + plan.split_factor, plan.total)) for s in starts]
    return [(starts[w], starts[w + 1] if w + 1 < n else plan.total) for w in range(n)]


# ---- tasks -----------------------------------------------------------------------------------------------------
def _task(plan: FasPlan, b: int, n1: int, s1o: int, q: int, start: int, end: int) -> FasTask:
    m0 = s1o * plan.s1_base
    sb = plan.s2_base
    if end > start:
        lo, hi = start // sb, cdiv(end, sb)
    else:
        lo = hi = start // sb
        end = start
    return FasTask(b, n1, m0, min(plan.s1_base, q - m0), lo, hi, start, end)


def _fixed_index(plan: FasPlan, idx: int) -> tuple[int, int, int]:
    v = plan.view
    per_n = plan.s1_outer
    b, rest = divmod(idx, v.n2 * v.g * per_n)
    n, s1o = divmod(rest, per_n)
    return b, n, s1o


def _fixed_task(plan: FasPlan, idx: int) -> FasTask:
    v = plan.view
    b, n1, s1o = _fixed_index(plan, idx)
    floor8 = plan.template == "S1Bn2gs1" and plan.has_drop and not plan.drop_mask_pass
    start, end = fixed_s2_range(plan.sparse, s1o, plan.s1_base, plan.s2_base, v.s1, v.s2, b, floor8=floor8)
    return _task(plan, b, n1, s1o, v.s1, start, end)


class _VarLenIndex:
    def __init__(self, plan: FasPlan):
        v = plan.view
        self.plan, self.acc, acc = plan, [], 0
        for q in v.q_lens:
            self.acc.append(acc)
            acc += cdiv(q, plan.s1_basic) * v.n2 * v.g

    def task(self, idx: int) -> FasTask:
        plan, v = self.plan, self.plan.view
        b = bisect_right(self.acc, idx) - 1       # the last batch starting at or before idx (skips empty ones)
        q, kv = v.q_lens[b], v.kv_lens[b]
        per = cdiv(q, plan.s1_basic)
        n1, s1o = divmod(idx - self.acc[b], per)
        start, end = varlen_s2_range(plan.sparse, s1o, plan.s1_basic, q, kv, b)
        return _task(plan, b, n1, s1o, q, start, end)


def worker_tasks(plan: FasPlan) -> list[tuple[FasTask, ...]]:
    """Every worker's tasks in its processing order (see the module doc)."""
    v = plan.view
    runs = _runs(plan)
    if plan.template == "Bn2gs1s2_B":
        out = []
        for lo, hi in runs:
            out.append(tuple(_task(plan, b, n1, s1o, v.s1, 0, v.s2) for b in range(lo, hi) for n1 in range(v.n1)
                             for s1o in range(plan.s1_outer)))
        return out
    if plan.template == "VarLen":
        ix = _VarLenIndex(plan)
        return [tuple(ix.task(i) for i in range(lo, hi)) for lo, hi in runs]
    if not plan.l1_reuse:
        return [tuple(_fixed_task(plan, i) for i in range(lo, hi)) for lo, hi in runs]
    if plan.l1_pairs == "flat":
        return [tuple(_fixed_task(plan, i) for i in range(lo, hi) if (i - lo) % 2 == w % 2)
                for w, (lo, hi) in enumerate(runs)]
    return [_row_pair_tasks(plan, lo, hi, w % 2) for w, (lo, hi) in enumerate(runs)]


def _row_pair_tasks(plan: FasPlan, lo: int, hi: int, odd: int) -> tuple[FasTask, ...]:
    """S1s2Bn2gs1 with L1 reuse: one AIV's half of its pair's run, alternating within each (b, n1) row."""
    out = []
    so = plan.s1_outer
    if lo >= hi:
        return ()
    for row in range(lo // so, cdiv(hi, so)):
        first = lo - row * so if row == lo // so else 0
        last = hi - row * so if row == cdiv(hi, so) - 1 else so
        out.extend(_fixed_task(plan, row * so + k) for k in range(first, last) if (k - first) % 2 == odd)
    return tuple(out)


def core_groups(plan: FasPlan, tasks: list[tuple[FasTask, ...]]) -> list[tuple[FasTask, ...]]:
    """Tasks per AIC: the workers themselves (SameAB) or AIV 2c and 2c+1 interleaved."""
    if plan.split_unit == "aic":
        cores = list(tasks)
    else:
        cores = []
        for c in range(0, len(tasks), 2):
            a = tasks[c]
            b = tasks[c + 1] if c + 1 < len(tasks) else ()
            merged = []
            for i in range(max(len(a), len(b))):
                if i < len(a):
                    merged.append(a[i])
                if i < len(b):
                    merged.append(b[i])
            cores.append(tuple(merged))
    while cores and not cores[-1]:
        cores.pop()
    return cores


def core_count(plan: FasPlan) -> int:
    """The AIC count ``core_groups`` returns, from the runs alone (no task is built)."""
    per_core = 1 if plan.split_unit == "aic" else 2
    busy = [w // per_core for w, (lo, hi) in enumerate(_runs(plan)) if hi > lo]
    return busy[-1] + 1 if busy else 0
