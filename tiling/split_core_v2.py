"""Core split of the arch35 FIA templates (op_host ``split_core_v2``): stream-K plus "is FD worth it".

Model
-----
The greedy and the core-count search are those of :mod:`.split_core` (stream-K on:
whole units, whole rows, then single S2 blocks, force one block). What v2 adds:

* **FD re-plan.** When the best stream-K plan split some row (FD), the same core
  count is planned again with stream-K off (no block-level splitting; every core's
  limit is raised to at least the most expensive row, so each core takes whole
  rows). FD is kept only if it pays:
  ``full = cost(min(max FD rows, m_base), s2_base)``; keep FD iff
  ``no_fd_cost > least_blocks * full`` and ``no_fd_cost - tolerance * full > fd_cost``.
  The GQA / MLA templates use tolerance 9 and least_blocks 0; MXFP8 uses 10 and 2.
* **Vector balance of the combine** (:func:`split_fd_v2`): the average load is
  ``ceil(sum(splits * rows) / vectors)``; a task gets ``max(1, splits * rows // avg)``
  vectors (fewer if its rows do not divide that finely, and never more than the
  spare vectors plus its own), and its rows are cut evenly (``ceil(rows / k)`` each,
  the last one takes the rest). When no vector is spare each task gets exactly one.
* Each FD task records its first workspace slot (the running sum of the splits of
  the tasks before it), the same slot convention as arch22.

Invariants
----------
* With stream-K off no row is ever split, so the re-plan has no FD.
* Every FD task gets at least one vector; the vectors' row ranges of a task are
  disjoint and cover its rows.
"""

from __future__ import annotations

from dataclasses import dataclass

from .block_grid import BlockGrid, block_cost
from .split_core import CorePlan, _empty_plan, plan_for_cores, search_bounds

__all__ = ["FdChoice", "split_core_v2", "fd_worth_it", "split_fd_v2"]

GQA_FD_TOLERANCE = 9
GQA_FD_LEAST_BLOCKS = 0


@dataclass(frozen=True)
class FdChoice:
    """The outcome of the FD re-plan, for ``explain()``."""

    considered: bool
    kept: bool
    fd_cost: int = 0
    no_fd_cost: int = 0
    full_block_cost: int = 0


def fd_worth_it(no_fd_cost: int, fd_cost: int, fd_rows: int, s2_base: int, tolerance: int, least_blocks: int) -> bool:
    """Keep the stream-K (FD) plan? (op_host ``CheckChooseWithFd``)."""
    full = block_cost(fd_rows, s2_base)
    if no_fd_cost <= least_blocks * full:
        return False
    return no_fd_cost - tolerance * full > fd_cost


def split_core_v2(grid: BlockGrid, cores: int, *, stream_k: bool = True, fd_tolerance: int = GQA_FD_TOLERANCE,
                  fd_least_blocks: int = GQA_FD_LEAST_BLOCKS, core_count: int | None = None
                  ) -> tuple[CorePlan, FdChoice]:
    """The arch35 core split: search, then the FD re-plan when the best plan split a row. ``core_count`` (the
    plan search's) replaces the search over core counts by that one count; the FD re-plan runs as usual."""
    if grid.all_empty:
        return _empty_plan(grid, cores), FdChoice(False, False)
    lo, hi = search_bounds(grid.total_blocks, cores)
    if core_count is not None:
        lo = hi = max(1, min(core_count, grid.total_blocks or 1))
    floor = grid.max_row_cost
    best: CorePlan | None = None
    best_cost = None
    for n in range(lo, hi + 1):
        plan = plan_for_cores(grid, n, best_cost, stream_k=stream_k, limit_floor=floor)
        if plan.aborted:
            continue
        if best is None or plan.max_cost < best_cost:
            best, best_cost = plan, plan.max_cost
    if best is None:
        best = plan_for_cores(grid, max(hi, 1), stream_k=stream_k, limit_floor=floor)
    choice = FdChoice(False, bool(best.heads))
    if stream_k and best.heads:
        no_fd = plan_for_cores(grid, best.used_cores, None, stream_k=False, limit_floor=floor)
        max_rows = max(h.rows for h in best.heads)
        rows = min(max_rows, grid.spec.m_base)
        keep = fd_worth_it(no_fd.max_cost, best.max_cost, rows, grid.spec.s2_base, fd_tolerance, fd_least_blocks)
        choice = FdChoice(True, keep, best.max_cost, no_fd.max_cost, block_cost(rows, grid.spec.s2_base))
        if not keep:
            best = no_fd
    if not best.ends:
        best.ends, best.costs, best.first_piece = [(0, 0, 0)], [0], [0]
        best.core_num = max(best.core_num, 1)
    best.used_cores = max(best.used_cores, 1)
    return best, choice


def split_fd_v2(heads: list, used_cores: int, cv_ratio: int) -> list:
    """Vector balance of the arch35 combine: per vector ``(task, m_start, m_rows)`` (op_host v2 ``SplitFD``)."""
    if not heads:
        return []
    vectors = used_cores * cv_ratio
    total = sum(h.splits * h.rows for h in heads)
    spare = vectors - len(heads)
    avg = (total + vectors - 1) // vectors
    out = []
    for t, h in enumerate(heads):
        if spare <= 0:
            out.append((t, 0, h.rows))
            continue
        k = max(h.splits * h.rows // avg, 1) if avg else 1
        per = (h.rows + k - 1) // k
        k = (h.rows + per - 1) // per if per else 1
        k = min(k, spare + 1)
        for v in range(k):
            rows = per if v < k - 1 else h.rows - v * per
            out.append((t, v * per, rows))
        spare -= k - 1
    return out
