"""Properties of the core splitters (arch22 split_core, arch35 split_core_v2) and their FD plans."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cvtile.tiling.block_grid import BlockGrid, GridSpec, block_cost
from cvtile.tiling.split_core import plan_for_cores, search_bounds, split_core, split_fd
from cvtile.tiling.split_core_v2 import fd_worth_it, split_core_v2, split_fd_v2
from cvtile.tiling.tasks import core_work, vector_work_v1

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def grids(draw):
    batch = draw(st.integers(1, 4))
    n2 = draw(st.integers(1, 3))
    g = draw(st.sampled_from([1, 2, 4, 8]))
    q = tuple(draw(st.lists(st.integers(0, 40), min_size=batch, max_size=batch)))
    kv = tuple(draw(st.lists(st.integers(0, 3000), min_size=batch, max_size=batch)))
    m_base = draw(st.sampled_from([16, 32, 64, 128]))
    s2_base = draw(st.sampled_from([64, 128, 256, 512]))
    mask = draw(st.booleans())
    sparse = draw(st.sampled_from([0, 2, 3, 4])) if mask else 0
    pre = draw(st.integers(-64, 4000))
    nxt = draw(st.integers(-64, 4000))
    if sparse in (2, 3):
        pre, nxt = 2147483647, 0
    spec = GridSpec(batch, n2, g, q, kv, m_base, s2_base, draw(st.booleans()), mask, sparse, pre, nxt)
    return BlockGrid(spec)


def _active(grid: BlockGrid) -> set:
    spec = grid.spec
    out = set()
    for b in range(spec.batch):
        for n2 in range(spec.n2):
            for m in range(grid.m_blocks[b]):
                r = grid.row(b, m)
                for j in range(r.s2_start, r.s2_end):
                    out.add((b, n2, m * spec.m_base, j))
    return out


def _check_plan(grid: BlockGrid, plan, cores: int) -> None:
    spec = grid.spec
    work, fd_tasks = core_work(grid, plan)
    seen = {}
    for cw in work:
        for t in cw.tasks:
            assert 0 < t.m_rows <= spec.m_base
            for j in range(t.s2_lo, t.s2_hi):
                key = (t.b, t.n2, t.m_start, j)
                assert key not in seen, f"block {key} assigned twice"
                seen[key] = cw.core
    assert set(seen) == _active(grid), "every active block exactly once"
    # FD only for rows split across cores; pieces numbered in KV order
    owners = {}
    for cw in work:
        for t in cw.tasks:
            owners.setdefault((t.b, t.n2, t.m_start), []).append((cw.core, t))
    for key, lst in owners.items():
        split = len(lst) > 1
        for k, (core, t) in enumerate(lst):
            assert (t.fd_task >= 0) == split
            if split:
                assert t.fd_piece == k
                assert fd_tasks[t.fd_task].splits == len(lst)
                assert (fd_tasks[t.fd_task].b, fd_tasks[t.fd_task].n2, fd_tasks[t.fd_task].m_start) == key
        if split:
            los = [t.s2_lo for _, t in lst]
            assert los == sorted(los)
    assert bool(fd_tasks) == any(len(v) > 1 for v in owners.values())
    slots = [t.workspace_slot for t in fd_tasks]
    assert slots == sorted(slots) and all(b - a == t.splits for a, b, t in zip(slots, slots[1:], fd_tasks))
    # core counts
    if not grid.all_empty and grid.total_blocks:
        lo, hi = search_bounds(grid.total_blocks, cores)
        assert lo <= plan.core_num <= hi
        assert 1 <= plan.used_cores <= plan.core_num
    assert plan.max_cost == max(plan.costs)


def _check_balance(grid: BlockGrid, plan, stream_k: bool = True) -> None:
    """Each core stays within its share: cost <= unassigned // (n - i) (+ half a block), or it was forced one block."""
    spec = grid.spec
    half = block_cost(spec.m_base, spec.s2_base) // 2
    unassigned = grid.total_cost
    work, _ = core_work(grid, plan)
    for i, cost in enumerate(plan.costs):
        limit = unassigned // (plan.core_num - i)
        if not stream_k:
            limit = max(limit, grid.max_row_cost)
        blocks = sum(t.s2_hi - t.s2_lo for t in work[i].tasks)
        assert cost <= limit + half or blocks <= 1, (i, cost, limit)
        unassigned -= cost


@SETTINGS
@given(grids(), st.integers(1, 24))
def test_split_core_covers_every_block_once(grid, cores):
    plan = split_core(grid, cores)
    _check_plan(grid, plan, cores)
    if grid.total_blocks:
        _check_balance(grid, plan)


@SETTINGS
@given(grids(), st.integers(1, 32))
def test_split_core_v2_covers_every_block_once(grid, cores):
    plan, choice = split_core_v2(grid, cores)
    _check_plan(grid, plan, cores)
    if choice.considered and choice.kept:
        assert fd_worth_it(choice.no_fd_cost, choice.fd_cost, min(max(h.rows for h in plan.heads), grid.spec.m_base),
                           grid.spec.s2_base, 9, 0)
    if choice.considered and not choice.kept:
        assert not plan.heads


@SETTINGS
@given(grids(), st.integers(1, 32))
def test_split_core_v2_without_stream_k_never_splits_rows(grid, cores):
    plan, choice = split_core_v2(grid, cores, stream_k=False)
    assert not plan.heads and not choice.considered
    _check_plan(grid, plan, cores)
    if grid.total_blocks:
        _check_balance(grid, plan, stream_k=False)


@SETTINGS
@given(grids(), st.integers(1, 24), st.sampled_from([1, 2]))
def test_split_fd_assigns_every_piece_to_one_vector(grid, cores, ratio):
    plan = split_core(grid, cores)
    _, fd_tasks = core_work(grid, plan)
    if not fd_tasks:
        return
    pieces = [(t.m_rows + 7) // 8 for t in fd_tasks]
    ends = split_fd(plan.heads, pieces, plan.used_cores, ratio)
    assert 1 <= len(ends) <= plan.used_cores * ratio
    work = vector_work_v1(fd_tasks, ends)
    rows = {}
    for vw in work:
        for t, start, n in vw.pieces:
            for r in range(start, start + n):
                assert (t, r) not in rows
                rows[(t, r)] = vw.vector
    assert set(rows) == {(t, r) for t, task in enumerate(fd_tasks) for r in range(task.m_rows)}


@SETTINGS
@given(grids(), st.integers(1, 32))
def test_split_fd_v2_covers_each_task(grid, cores):
    plan, _ = split_core_v2(grid, cores)
    entries = split_fd_v2(plan.heads, plan.used_cores, 2)
    assert len(entries) <= plan.used_cores * 2 or not plan.heads
    covered = {}
    for t, start, n in entries:
        assert n > 0
        for r in range(start, start + n):
            assert (t, r) not in covered
            covered[(t, r)] = True
    assert set(covered) == {(t, r) for t, h in enumerate(plan.heads) for r in range(h.rows)}


def test_uneven_lengths_split_a_long_row():
    """One long KV row and many short ones: stream-K cuts the long row (FD) to balance 8 cores."""
    spec = GridSpec(4, 1, 1, (1, 1, 1, 1), (65536, 512, 512, 512), 16, 512)
    plan = split_core(BlockGrid(spec), 8)
    assert plan.heads and plan.heads[0].bn2 == 0 and plan.heads[0].splits > 1


def test_forced_block_is_taken_when_nothing_fits():
    spec = GridSpec(1, 1, 1, (1,), (8 * 512,), 16, 512)
    plan = plan_for_cores(BlockGrid(spec), 8)
    assert plan.used_cores == 8 and all(c == plan.costs[0] for c in plan.costs)


def test_search_bounds_round_sqrt():
    assert search_bounds(32, 24) == (6, 24)
    assert search_bounds(3, 24) == (2, 3)
