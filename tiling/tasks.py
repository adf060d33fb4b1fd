"""Turn a core plan into the simulator's work lists: per-core ``RowTask``s, FD tasks and the combine's vector work.

Model
-----
A :class:`~.split_core.CorePlan` gives per-core end cursors over the block grid.
``core_work`` expands them into ``RowTask``s (one per row block a core touches, in
the core's order). A row block touched by ``k > 1`` cores is an FD task: its pieces
are numbered 0..k-1 in KV order, and the task's partials live in workspace slots
``slot .. slot + k - 1`` where ``slot`` is the running sum of ``splits`` over the tasks
before it (the kernel's convention, arch22 and arch35 alike). One slot holds
``m_base`` rows of ``Dv`` partial outputs plus the rows' max and sum.

``vector_work_v1`` expands the arch22 combine balance (inclusive ``(task, 8-row
piece)`` ends per vector) and ``vector_work_v2`` the arch35 one (one ``(task, row
start, rows)`` per vector) into ``FdVectorWork`` records whose row offsets are
relative to the task's first row.

Invariants
----------
* Every active block appears in exactly one RowTask; ``fd_task < 0`` iff the row is not split.
* The FD tasks derived from the tasks agree with the plan's recorded FD heads (checked).
"""

from __future__ import annotations

from .block_grid import BlockGrid
from .result import CoreWork, FdTask, FdVectorWork, RowTask
from .split_core import CorePlan, core_runs

__all__ = ["core_work", "vector_work_v1", "vector_work_v2", "PlanMismatch"]


class PlanMismatch(AssertionError):
    """The FD rows found from the tasks differ from the plan's FD records (a splitter bug)."""


def core_work(grid: BlockGrid, plan: CorePlan) -> tuple[tuple[CoreWork, ...], tuple[FdTask, ...]]:
    runs = core_runs(grid, plan.ends)
    spec = grid.spec
    owners: dict = {}
    for core, lst in enumerate(runs):
        for (b, n2, m, lo, hi) in lst:
            owners.setdefault((b, n2, m), []).append(core)
    split_rows = [key for key, cores in owners.items() if len(cores) > 1]
    # FD tasks in the plan's record order (heads are recorded when the cursor leaves a split row)
    head_keys = [(h.bn2 // spec.n2, h.bn2 % spec.n2, h.m) for h in plan.heads]
    if sorted(head_keys) != sorted(split_rows):
        raise PlanMismatch(f"FD heads {head_keys} differ from split rows {sorted(split_rows)}")
    task_index = {key: i for i, key in enumerate(head_keys)}
    fd_tasks = []
    slot = 0
    for h, key in zip(plan.heads, head_keys):
        b, n2, m = key
        fd_tasks.append(FdTask(b, n2, m * spec.m_base, grid.row_rows(b, m), len(owners[key]), slot))
        slot += len(owners[key])
    piece_seen: dict = {}
    cores = []
    for core, lst in enumerate(runs):
        tasks = []
        for (b, n2, m, lo, hi) in lst:
            key = (b, n2, m)
            t = task_index.get(key, -1)
            piece = 0
            if t >= 0:
                piece = piece_seen.get(key, 0)
                piece_seen[key] = piece + 1
            tasks.append(RowTask(b, n2, m * spec.m_base, grid.row_rows(b, m), lo, hi, t, piece))
        cost = plan.costs[core] if core < len(plan.costs) else 0
        cores.append(CoreWork(core, tuple(tasks), cost))
    return tuple(cores), tuple(fd_tasks)


def vector_work_v1(fd_tasks, ends, piece_rows: int = 8) -> tuple[FdVectorWork, ...]:
    """arch22: expand inclusive ``(task, piece)`` ends per vector into row ranges."""
    flat = []
    for t, task in enumerate(fd_tasks):
        n = (task.m_rows + piece_rows - 1) // piece_rows
        for p in range(n):
            rows = piece_rows if p < n - 1 else task.m_rows - piece_rows * (n - 1)
            flat.append((t, p * piece_rows, rows))
    index = {}
    i = 0
    for t, task in enumerate(fd_tasks):
        n = (task.m_rows + piece_rows - 1) // piece_rows
        for p in range(n):
            index[(t, p)] = i
            i += 1
    out = []
    start = 0
    for v, end in enumerate(ends):
        stop = index.get(tuple(end), start - 1) + 1
        pieces = _merge(flat[start:stop])
        out.append(FdVectorWork(v, pieces))
        start = max(start, stop)
    return tuple(out)


def vector_work_v2(entries) -> tuple[FdVectorWork, ...]:
    """arch35: one ``(task, m_start, m_rows)`` per vector."""
    return tuple(FdVectorWork(v, ((t, s, n),)) for v, (t, s, n) in enumerate(entries))


def _merge(pieces) -> tuple:
    out: list = []
    for t, s, n in pieces:
        if out and out[-1][0] == t and out[-1][1] + out[-1][2] == s:
            out[-1] = (t, out[-1][1], out[-1][2] + n)
        else:
            out.append((t, s, n))
    return tuple(out)
