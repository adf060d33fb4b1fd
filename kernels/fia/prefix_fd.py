"""The system prefix on the legacy IFA route with flash decode: the prefix pass and the own-KV pass as FD pieces.

Model
-----
With a shared prefix the IFA kernel runs two passes and merges them (``IFATiling::SharedPrefixTiling`` and the
kernel's ``InitPrefix`` / ``Process`` / ``Init`` / ``Process`` / ``ProcessSysPrefixCombine``):

1. the prefix pass: batch 1 of the prefix tensors, every batch's query rows stacked against it, no KV split
   (``splitKVFlag_`` off), its own S2 block size (``CalcInnerSize`` over the prefix tensor's S);
2. the own-KV pass: the base tiling (each batch's own KV, cut into the FD parts of ``SplitBNS``);
3. a merge by the two results' softmax states (lse), after the own pass's FD combine.

Here each (batch, kv head) row becomes one FD row whose piece 0 is its prefix pass (KV positions [0, plen) of
the attended sequence, in blocks of the prefix pass's size) and whose next pieces are the own pass's parts
shifted past the prefix ([plen + lo, plen + hi)); ``fia_fd_combine`` merges all pieces in one step. The rows of
different batches are independent, so stacking them (the chip's one prefix matmul) changes no value. The one
difference from the chip: it merges the own parts first and then the prefix result with it, both in fp32, where
the combine here merges all pieces at once (fp32 rounding order only).

Invariants
----------
* Every (b, n2) row with any attended position has its pieces in KV order (prefix first), one workspace slot
  each; a row with one piece only is not split (it writes the output directly).
* The pieces' block sizes are at most the kernel's S2 tile (the larger of the two passes' sizes).
"""

from __future__ import annotations

from dataclasses import replace

from ...tiling.flash_decode import ifa_s_inner
from ...tiling.result import CoreWork, FdTask, FdVectorWork, FiaTiling, RowTask

__all__ = ["prefix_fd_tiling"]


def prefix_fd_tiling(t: FiaTiling, plen: int, prefix_s: int, own_kvlen) -> tuple[FiaTiling, dict, int]:
    """(tiling, steps, prefix block size): ``t``'s FD plan with the prefix pass added as piece 0 of every row.
    ``steps`` maps the prefix pass's RowTasks to their block size (the others use ``t.s2_base``); ``own_kvlen``
    are the batches' own KV lengths (the tiling's)."""
    step, _ = ifa_s_inner(seq=prefix_s, g=t.group, antiquant=False, perf_mode=0, rope=False, paged=False,
                          block_size=0)
    own = {}   # (b, n2) -> the own pass's parts [(lo, hi)] in KV order
    for cw in t.cores:
        for x in cw.tasks:
            lo = x.first_position(t.s2_base)
            hi = x.kv_end if x.kv_start >= 0 else min(x.s2_hi * t.s2_base, int(own_kvlen[x.b]))
            own.setdefault((x.b, x.n2), []).append((x.fd_piece, lo, hi, x.m_start, x.m_rows))
    cores, fd_tasks, steps = [], [], {}
    slot = 0
    pre_cores: dict = {}
    for b in range(t.batch):
        for n2 in range(t.num_kv_heads):
            parts = sorted(own.get((b, n2), [(0, 0, 0, 0, t.m_base)]))
            m0, mrows = parts[0][3], parts[0][4]
            spans = ([(0, plen)] if plen else []) + [(plen + lo, plen + hi) for _, lo, hi, _, _ in parts if hi > lo]
            ti = len(fd_tasks) if len(spans) > 1 else -1
            if ti >= 0:
                fd_tasks.append(FdTask(b, n2, m0, mrows, len(spans), slot))
                slot += len(spans)
            for k, (lo, hi) in enumerate(spans):
                size = step if (plen and k == 0) else t.s2_base
                task = RowTask(b, n2, m0, mrows, 0, -(-(hi - lo) // size), ti, k if ti >= 0 else 0, lo, hi)
                if plen and k == 0:   # the prefix pass: one core per kv head, the batches' rows one after the other
                    steps[task] = step
                    pre_cores.setdefault(n2, []).append(task)
                else:
                    cores.append(CoreWork(len(cores), (task,), task.s2_hi))
    for n2 in sorted(pre_cores):
        cores.append(CoreWork(len(cores), tuple(pre_cores[n2]), sum(x.s2_hi for x in pre_cores[n2])))
    work = tuple(FdVectorWork(i, ((i, 0, ft.m_rows),)) for i, ft in enumerate(fd_tasks))
    return replace(t, cores=tuple(cores), fd_tasks=tuple(fd_tasks), fd_vector_work=work, fd=bool(fd_tasks)), \
        steps, step
