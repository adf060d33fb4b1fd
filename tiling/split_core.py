"""Cost-based core split and flash-decode planner of the arch22 FIA templates (op_host ``split_core``).

Model
-----
The work is the ordered sequence of blocks ``(b, n2) -> row block m -> S2 block``
of a :class:`~.block_grid.BlockGrid`. A plan for ``n`` cores walks that sequence
with one cursor and hands each core a contiguous run:

1. the core's cost limit is ``unassigned // (n - i)`` (core ``i``);
2. whole ``(b, n2)`` units are taken while ``limit + last_block_cost // 2 >=
   core_cost + unit_cost`` (a unit of cost 0 is always taken);
3. then whole row blocks under the same tolerance (the row's last block);
4. then single S2 blocks under the tolerance of the block (this is what splits a
   row across cores: *stream-K*);
5. a core that got nothing is forced to take one block.

A core's end is recorded as a cursor ``(bn2, m, s2)`` (exclusive). The search tries
every core count in ``[min_core, max_core]`` with ``max_core = min(cores,
total_blocks)`` and ``min_core = round(sqrt(total_blocks + 0.25))`` and keeps the
plan with the smallest slowest-core cost (the first one on ties, i.e. fewer cores).

A row whose blocks went to more than one core is a *flash-decode (FD) task*: its
``k`` pieces each write a partial result and the FD combine merges them. The FD
record of a split row is written when the cursor leaves the row (``k`` is the number
of cores that touched it). :func:`split_fd` then balances the combine over the
vector cores: every task's rows are cut into 8-row pieces whose load is ``k``; a
vector closes when the next piece's load exceeds twice its remaining share.

The engine (:func:`plan_for_cores`) also serves ``split_core_v2``: ``stream_k=False``
disables steps 4-5 and ``limit_floor`` raises every core's limit (v2 uses the most
expensive row so that a core always takes at least one row).

Quirks kept on purpose (they change upstream decisions): the cursor update after a
forced block does not reload the unit's remaining cost when it crosses into the next
kv head of the same batch, so that unit is then taken "for free"; the block loop
keeps the cost of the block it started on.

Invariants
----------
* The cursors are non-decreasing; the last used core ends at ``(B*N2, 0, 0)``.
* :func:`core_runs` turns cursors into per-core ``(b, n2, m, s2_lo, s2_hi)`` runs that
  cover every active block exactly once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .block_grid import BlockGrid, RowInfo

__all__ = ["FdHead", "CorePlan", "plan_for_cores", "split_core", "split_fd", "core_runs", "search_bounds"]

Cursor = tuple  # (bn2, m, s2)


@dataclass(frozen=True)
class FdHead:
    """A row block split across cores (op_host's "FD head")."""

    bn2: int
    m: int
    splits: int
    workspace_slot: int      # sum of the splits of the heads recorded before this one
    rows: int                # valid rows of the row block (mSize)


@dataclass
class CorePlan:
    """A core split: per-core end cursors, per-core costs and the FD heads."""

    core_num: int                                   # the core count the plan was made for
    used_cores: int = 0
    ends: list = field(default_factory=list)        # per used core: (bn2, m, s2), exclusive
    costs: list = field(default_factory=list)       # per used core
    max_cost: int = 0
    heads: list = field(default_factory=list)       # FdHead, in record order
    first_piece: list = field(default_factory=list)  # per used core: index of its first piece in a split row
    max_splits: int = 0
    aborted: bool = False                           # the plan exceeded the cost limit and was abandoned

    @property
    def fd(self) -> bool:
        return bool(self.heads)


class _Walker:
    """The cursor state of one planning pass (op_host ``AssignContext``)."""

    def __init__(self, grid: BlockGrid):
        self.grid = grid
        spec = grid.spec
        self.units = spec.batch * spec.n2
        self.n2 = spec.n2
        self.bn2 = 0
        self.b = 0
        self.m = 0
        self.unit_cost = grid.unit_cost[0] if spec.batch else 0
        self.unit_blocks = grid.unit_blocks[0] if spec.batch else 0
        self._load_row(0)
        self.s2 = self.row_start
        self.finished = False
        self.core_cost = 0
        self.core_blocks = 0
        self.limit = 0

    def _load_row(self, m: int) -> None:
        r: RowInfo = self.grid.row(self.b, m)
        self.m = m
        self.row_start, self.row_end = r.s2_start, r.s2_end
        self.row_cost = r.cost
        self.row_blocks = r.blocks
        self.row_normal = r.normal_block_cost
        self.row_last = r.last_block_cost

    def cursor(self) -> Cursor:
        return (self.bn2, self.m, self.s2)

    # ------------------------------------------------------------- the four steps
    def take_units(self) -> None:
        if self.finished:
            return
        g = self.grid
        while (self.unit_cost == 0
               or self.limit + g.unit_last_block_cost[self.b] // 2 >= self.core_cost + self.unit_cost):
            self.core_cost += self.unit_cost
            self.core_blocks += self.unit_blocks
            self.bn2 += 1
            if self.bn2 == self.units:
                self.finished = True
                self.m = 0
                self.s2 = 0
                return
            if self.bn2 // self.n2 != self.b:
                self.b = self.bn2 // self.n2
            self.unit_cost = g.unit_cost[self.b]
            self.unit_blocks = g.unit_blocks[self.b]
            self._load_row(0)
            self.s2 = self.row_start

    def take_rows(self) -> None:
        if self.finished:
            return
        while self.limit + self.row_last // 2 >= self.core_cost + self.row_cost:
            self.core_cost += self.row_cost
            self.core_blocks += self.row_blocks
            self.unit_cost = self.unit_cost - self.row_cost if self.unit_cost > self.row_cost else 0
            self.unit_blocks = self.unit_blocks - self.row_blocks if self.unit_blocks > self.row_blocks else 0
            m = self.m
            while True:
                m += 1
                self._load_row(m)
                if self.row_blocks != 0:
                    break
                if m > self.grid.m_blocks[self.b] + self.grid.s2_blocks[self.b] + 1:
                    # op_host would spin here; no valid row remains in this unit
                    break
            self.s2 = self.row_start

    def take_blocks(self) -> None:
        if self.finished:
            return
        cost = self.row_last if self.s2 == self.row_end - 1 else self.row_normal
        while self.limit + cost // 2 >= self.core_cost + cost:
            self._take_one(cost)

    def force_one(self) -> None:
        if self.finished:
            return
        cost = self.row_last if self.s2 == self.row_end - 1 else self.row_normal
        self._take_one(cost)
        self._advance_cursor()

    def _take_one(self, cost: int) -> None:
        self.core_cost += cost
        self.core_blocks += 1
        self.s2 += 1
        self.unit_cost -= cost
        self.row_cost -= cost
        self.unit_blocks -= 1
        self.row_blocks -= 1

    def _advance_cursor(self) -> None:
        g = self.grid
        new_row = False
        if self.s2 >= self.row_end:
            self.s2 = 0
            self.m += 1
            new_row = True
        if self.m >= g.m_blocks[self.b]:
            self.m = 0
            self.bn2 += 1
        if self.bn2 == self.units:
            self.m = 0
            self.s2 = 0
            self.finished = True
            return
        new_batch = False
        if self.bn2 // self.n2 != self.b:
            self.b = self.bn2 // self.n2
            self.m = 0
            new_batch = new_row = True
        if new_batch:
            self.unit_cost = g.unit_cost[self.b]
            self.unit_blocks = g.unit_blocks[self.b]
        if new_row:
            self._load_row(self.m)
            self.s2 = self.row_start


def plan_for_cores(grid: BlockGrid, core_num: int, cost_limit: int | None = None, *, stream_k: bool = True,
                   limit_floor: int = 0) -> CorePlan:
    """One greedy pass for ``core_num`` cores (op_host ``CalcSplitPlan``).

    ``cost_limit``: abandon the pass (``aborted``) once a core exceeds it (the search's pruning).
    """
    plan = CorePlan(core_num=core_num)
    if core_num <= 0:
        return plan
    w = _Walker(grid)
    unassigned = grid.total_cost
    kv_split_part = 1
    slot_base = 0
    last_core = 0
    for i in range(core_num):
        if cost_limit is not None and plan.max_cost > cost_limit:
            plan.aborted = True
            return plan
        if w.finished or unassigned <= 0:
            break
        last_core = i
        plan.first_piece.append(kv_split_part - 1)
        avg = unassigned // (core_num - i)
        w.limit = avg if stream_k else max(avg, limit_floor)
        w.core_cost = 0
        w.core_blocks = 0
        w.take_units()
        w.take_rows()
        if stream_k:
            w.take_blocks()
        if w.core_blocks == 0 and stream_k:
            w.force_one()
        plan.ends.append(w.cursor())
        plan.costs.append(w.core_cost)
        plan.max_cost = max(plan.max_cost, w.core_cost)
        unassigned -= w.core_cost
        if i > 0 and kv_split_part > 1:
            prev_bn2, prev_m, _ = plan.ends[i - 1]
            if not (w.bn2 == prev_bn2 and w.m == prev_m):
                b = prev_bn2 // grid.spec.n2
                rows = (grid.spec.q_lens[b] * grid.spec.g - prev_m * grid.spec.m_base
                        if prev_m == grid.m_blocks[b] - 1 else grid.spec.m_base)
                plan.heads.append(FdHead(prev_bn2, prev_m, kv_split_part, slot_base, rows))
                plan.max_splits = max(plan.max_splits, kv_split_part)
                slot_base += kv_split_part
                kv_split_part = 1
        if w.row_start < w.s2 <= w.row_end:
            kv_split_part += 1
    plan.used_cores = last_core + 1
    del plan.ends[plan.used_cores:]
    del plan.costs[plan.used_cores:]
    del plan.first_piece[plan.used_cores:]
    return plan


def search_bounds(total_blocks: int, cores: int) -> tuple[int, int]:
    """[min_core, max_core] of the core-count search (float sqrt as op_host computes it)."""
    max_core = min(cores, total_blocks)
    min_core = int(np.float32(math.sqrt(float(np.float32(total_blocks) + np.float32(0.25)))) + np.float32(0.5))
    return min(min_core, max_core), max_core


def _empty_plan(grid: BlockGrid, core_num: int) -> CorePlan:
    spec = grid.spec
    plan = CorePlan(core_num=core_num, used_cores=1)
    plan.ends = [(spec.batch * spec.n2, 0, 0)]
    plan.costs = [0]
    plan.first_piece = [0]
    return plan


def split_core(grid: BlockGrid, cores: int) -> CorePlan:
    """The best plan over the core-count search (op_host ``SplitCore`` without its FD balance)."""
    if grid.all_empty:
        return _empty_plan(grid, cores)
    lo, hi = search_bounds(grid.total_blocks, cores)
    best: CorePlan | None = None
    best_cost = None
    for n in range(lo, hi + 1):
        plan = plan_for_cores(grid, n, best_cost)
        if plan.aborted:
            continue
        if best is None or plan.max_cost < best_cost:
            best, best_cost = plan, plan.max_cost
    if best is None:        # only when the search range is empty
        best = plan_for_cores(grid, max(hi, 1))
    if not best.ends:       # a search over zero blocks (every row masked out): one idle core
        best.ends, best.costs, best.first_piece = [(0, 0, 0)], [0], [0]
        best.core_num = max(best.core_num, 1)
    best.used_cores = max(best.used_cores, 1)
    return best


def split_fd(heads: list, pieces_per_head: list, used_cores: int, cv_ratio: int) -> list:
    """Vector balance of the FD combine (op_host ``SplitFD``, arch22).

    ``pieces_per_head[t]`` is the number of 8-row pieces of head ``t``. Returns, per used
    vector, the inclusive end ``(task, piece)`` of its run in the flattened piece order
    (vector 0 starts at (0, 0); vector ``v`` starts right after the end of ``v - 1``).
    """
    total_load = sum(h.splits * p for h, p in zip(heads, pieces_per_head))
    total_pieces = sum(pieces_per_head)
    max_vec = min(total_pieces, used_cores * cv_ratio)
    if max_vec <= 0:
        return []
    threshold = total_load / max_vec
    load = 0
    cur = 0
    prev_end = (0, 0)
    ends: list = []
    for t, h in enumerate(heads):
        for p in range(pieces_per_head[t]):
            remain = threshold - load
            if h.splits > remain * 2:
                ends.append(prev_end)
                cur += 1
                total_load -= load
                left = max_vec - cur
                threshold = total_load / left if left > 0 else math.inf
                load = 0
            load += h.splits
            prev_end = (t, p)
    ends.append(prev_end)
    return ends


def _normalise(grid: BlockGrid, c: Cursor) -> Cursor:
    """A cursor pointing past the last row block of its unit moves to the next unit."""
    bn2, m, s2 = c
    units = grid.spec.batch * grid.spec.n2
    while bn2 < units and m >= grid.m_blocks[bn2 // grid.spec.n2]:
        bn2, m, s2 = bn2 + 1, 0, 0
    return (bn2, m, s2)


def core_runs(grid: BlockGrid, ends: list) -> list:
    """Per-core lists of ``(b, n2, m, s2_lo, s2_hi)`` between consecutive end cursors.

    A cursor ``(bn2, m, x)`` sits before S2 block ``x`` of row block ``m`` (clamped to the
    row's valid range). Rows without valid blocks are skipped; a run never crosses a row.
    """
    spec = grid.spec
    units = spec.batch * spec.n2
    out = []
    start = _normalise(grid, (0, 0, 0))
    for end in ends:
        end = _normalise(grid, end)
        runs = []
        bn2, m = start[0], start[1]
        while bn2 < units and (bn2, m) <= (end[0], end[1]):
            b = bn2 // spec.n2
            if m >= grid.m_blocks[b]:
                bn2, m = bn2 + 1, 0
                continue
            r = grid.row(b, m)
            lo, hi = r.s2_start, r.s2_end
            if (bn2, m) == (start[0], start[1]):
                lo = min(max(start[2], r.s2_start), r.s2_end)
            if (bn2, m) == (end[0], end[1]):
                hi = min(max(end[2], r.s2_start), r.s2_end)
            if hi > lo:
                runs.append((b, bn2 % spec.n2, m, lo, hi))
            m += 1
        out.append(runs)
        start = end
    return out
