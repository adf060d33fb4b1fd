"""Structural checks of a ``FiaTiling``: the invariants the simulator kernel relies on, as a list of problems.

Model
-----
``tiling_problems(t)`` walks the per-core ``RowTask``s and the FD records and
reports, in words, every violation of the contract stated in
:mod:`.result`: a block assigned twice, an empty or oversized task, an FD flag
on a row that is not split (or missing on one that is), pieces out of KV order,
a split count that disagrees with the number of pieces, FD workspace slots
that overlap, a combine that misses or repeats an FD row. An empty list means
the tiling is usable by the kernel and the FD combine.

Invariants
----------
* Pure: reads the tiling, never changes it.
"""

from __future__ import annotations

from .result import FiaTiling

__all__ = ["tiling_problems", "assert_valid"]


def tiling_problems(t: FiaTiling) -> list[str]:
    problems: list[str] = []
    seen: dict = {}
    owners: dict = {}
    for cw in t.cores:
        for task in cw.tasks:
            if task.m_rows <= 0 or task.s2_hi <= task.s2_lo:
                problems.append(f"core {cw.core}: empty task {task}")
            if t.m_base and task.m_rows > t.m_base:
                problems.append(f"core {cw.core}: task {task} has more than M base {t.m_base} rows")
            for j in range(task.s2_lo, task.s2_hi):   # blocks keyed by their first KV position
                key = (task.b, task.n2, task.m_start, task.block_position(j, t.s2_base or 1))
                if key in seen:
                    problems.append(f"block {key} on cores {seen[key]} and {cw.core}")
                seen[key] = cw.core
            owners.setdefault((task.b, task.n2, task.m_start), []).append(task)
    for key, tasks in owners.items():
        split = len(tasks) > 1
        if any((x.fd_task >= 0) != split for x in tasks):
            problems.append(f"row {key}: fd_task set {'without' if not split else 'only partly with'} a split")
            continue
        if split:
            if [x.fd_piece for x in tasks] != list(range(len(tasks))):
                problems.append(f"row {key}: pieces {[x.fd_piece for x in tasks]} not 0..k-1 in KV order")
            firsts = [x.first_position(t.s2_base or 1) for x in tasks]
            if firsts != sorted(firsts):
                problems.append(f"row {key}: pieces not in KV order")
            idx = tasks[0].fd_task
            if idx >= len(t.fd_tasks) or t.fd_tasks[idx].splits != len(tasks):
                problems.append(f"row {key}: fd task {idx} does not record {len(tasks)} splits")
    if t.fd != bool(t.fd_tasks):
        problems.append("fd flag disagrees with fd_tasks")
    slots = set()
    for i, ft in enumerate(t.fd_tasks):
        for s in range(ft.workspace_slot, ft.workspace_slot + ft.splits):
            if s in slots:
                problems.append(f"fd task {i}: workspace slot {s} reused")
            slots.add(s)
    if t.fd_vector_work:
        rows: dict = {}
        for vw in t.fd_vector_work:
            for ti, start, n in vw.pieces:
                for r in range(start, start + n):
                    if (ti, r) in rows:
                        problems.append(f"fd task {ti} row {r} combined twice")
                    rows[(ti, r)] = vw.vector
        want = {(ti, r) for ti, ft in enumerate(t.fd_tasks) for r in range(ft.m_rows)}
        if set(rows) != want:
            problems.append(f"combine covers {len(rows)} FD rows, expected {len(want)}")
    return problems


def assert_valid(t: FiaTiling) -> None:
    problems = tiling_problems(t)
    if problems:
        raise AssertionError("; ".join(problems[:10]))
