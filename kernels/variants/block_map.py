"""Block-sparse skipping: a variant's ``mask_mod`` classifies the tiling's (row task, S2 block) pairs on the host.

Model
-----
The FIA tiling hands each core row tasks: up to M folded query rows of one
(batch, kv head) (the G query heads of the group folded in the tiling's
order) and a run of S2 blocks. ``mask_mod`` is evaluated on the host, in
numpy, over every element of every task's run (``hooks.host_function``), and
each (task, S2 block) is

* **empty**: no (row, KV position) of the block is kept — the kernel never
  visits it (no cube or vector work, no KV load);
* **full**: every valid element is kept;
* **partial**: some elements are kept.

The kernel visits full and partial blocks; it evaluates ``mask_mod`` on the
partial ones only (a runtime branch on the block's full flag). A partial
block is visited over its **live columns** only: the KV positions of the
block that some row of the task keeps, widened to ``SPAN_ALIGN`` positions
(a cube fractal's 16) at both ends and clipped to the block and the KV
length. A sliding window's blocks on either side of the diagonal keep a
band of columns; the kernel then loads, multiplies and softmaxes that band,
not the whole S2 block (the block's S2 base stays its tile shape, the band
its valid extent, as a KV tail is).

``plan_block_map`` chooses the row height the map is taken at: the tiling's
row tasks whole, or each as two row passes of half its rows (each vector
core's share of the score block; the kernel runs them as the row passes of
``fia.row_passes.split_row_passes``) when the halves visit at least
``HALVES_GAIN`` fewer (row, live column) pairs: a window's or a causal
mask's top half reaches back further than its bottom half, and the
diagonal block is a band of columns for the top half.

``BlockMap.table`` is what the kernel reads: per task a contiguous run of
``(S2 block index, full, first live column, live columns)`` rows, the task's
``[j0, j1)`` pointing into it.
The tasks then go back onto the same number of cores, split in their order
into contiguous runs of about equal remaining work (visited blocks, plus one
per task for its prologue and epilogue), so the skipped blocks do not leave
cores idle.

Invariants
----------
* Only the elements inside the valid extents (the task's rows, the batch's KV
  length) decide a block's class: padding never makes a block partial.
* Skipping never changes a result beyond the order of a row sum: an empty
  block or a dead column contributes exp(-inf) = 0 to every row with the
  running max unchanged, a full block's mask would keep everything. Output
  and lse equal the dense hooked run's up to the fp32 reassociation of the
  row sums over the narrower blocks.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass, replace

import numpy as np

from ..fia.row_passes import row_pass_heights, row_pass_offsets
from .hooks import Hooks, VariantError, host_function

__all__ = ["BlockMap", "classify_blocks", "plan_block_map", "balance_tasks"]

#: elements per host evaluation (bounds the host memory of one mask_mod call)
_CHUNK = 1 << 22

EMPTY, PARTIAL, FULL = 0, 1, 2

#: a live-column band starts and ends on a multiple of this many KV positions (a cube fractal's width)
SPAN_ALIGN = 16


@dataclass(frozen=True)
class BlockMap:
    """The classes of every (task, S2 block) of a tiling (``classes[i]``: task i's blocks from its s2_lo) and
    each block's live columns (``spans[i][j] = (first, count)`` relative to the block's first KV position)."""

    classes: tuple            # per task: np.ndarray of EMPTY / PARTIAL / FULL
    spans: tuple              # per task: (nblk, 2) int64 array of (first live column, live columns)
    total: int                # blocks the tiling's tasks cover
    visited: int              # blocks the kernel visits (not empty)
    full: int                 # visited blocks that skip the mask
    columns: int              # KV positions of the visited blocks (clipped to the KV length)
    live: int                 # of them, the live columns the kernel visits
    pairs: int                # (row, live column) pairs the kernel visits: the work it does
    tasks: tuple = ()         # the classified row tasks (RowTask; the tiling's, or their row passes)
    height: int = 0           # the kernel's tile rows for them (the row-pass height when they are passes)

    @property
    def density(self) -> float:
        """Visited blocks / all blocks (1.0 = dense)."""
        return self.visited / self.total if self.total else 1.0

    def table(self) -> tuple[np.ndarray, np.ndarray]:
        """``(blocks, ptr)``: the kernel's (S2 block, full, first live column, live columns) rows, and each
        task's [ptr[i], ptr[i+1]) into them."""
        rows, ptr = [], [0]
        for lo, cls, span in zip((t.s2_lo for t in self.tasks), self.classes, self.spans):
            js = np.nonzero(cls != EMPTY)[0]
            rows.extend((lo + int(j), int(cls[j] == FULL), int(span[j, 0]), int(span[j, 1])) for j in js)
            ptr.append(len(rows))
        blocks = np.array(rows, dtype=np.int64).reshape(-1, 4) if rows else np.zeros((1, 4), np.int64)
        return blocks, np.array(ptr, dtype=np.int64)

    def summary(self) -> str:
        live = 100 * self.live / self.columns if self.columns else 100.0
        return (f"block map: {self.visited}/{self.total} blocks of {len(self.tasks)} row tasks of up to "
                f"{self.height} rows visited ({100 * self.density:.1f}% dense), {self.full} full, "
                f"{self.visited - self.full} partial, {self.total - self.visited} skipped; {live:.1f}% of the "
                f"visited blocks' columns live, {self.pairs} (row, column) pairs")


def _row_indices(task, s1: int, group: int, order: str):
    rows = np.arange(task.m_start, task.m_start + task.m_rows, dtype=np.int32)   # int32, as the kernel's tiles
    if order == "GS1":
        g, pos = rows // s1, rows % s1
    else:
        g, pos = rows % group, rows // group
    return task.n2 * group + g, pos


def _digest(a) -> tuple:
    a = np.ascontiguousarray(a)
    return a.shape, a.dtype.str, hashlib.blake2b(a.view(np.uint8).reshape(-1), digest_size=16).hexdigest()


def classify_blocks(tasks, hooks: Hooks, *, s2_base: int, qlen, kvlen, group: int, order: str) -> BlockMap:
    """Classify every S2 block of every task by ``hooks.mask_mod`` (see the module docstring).

    Memoised (the last ``_MEMO_SIZE`` maps): the key is the mask_mod object itself (as the kernel's compile
    cache keys it: a hook reading a global that later changes is a new hook), the captured tensors' contents,
    the tasks' geometry, the S2 base, the lengths, the group and the order; a training loop's repeated calls
    classify once, as FlexAttention's ``create_block_mask`` is built once."""
    key = (hooks.mask_mod, tuple(_digest(c) for c in hooks.captures),
           tuple((t.b, t.n2, t.m_start, t.m_rows, t.s2_lo, t.s2_hi) for t in tasks), int(s2_base),
           _digest(np.asarray(qlen, np.int64)), _digest(np.asarray(kvlen, np.int64)), int(group), order)
    with _MEMO_LOCK:
        hit = _MEMO.get(key)
        if hit is not None:
            _MEMO.move_to_end(key)
            return hit
    bmap = _classify(tasks, hooks, s2_base=s2_base, qlen=qlen, kvlen=kvlen, group=group, order=order)
    with _MEMO_LOCK:
        _MEMO[key] = bmap
        while len(_MEMO) > _MEMO_SIZE:
            _MEMO.popitem(last=False)
    return bmap


_MEMO: OrderedDict = OrderedDict()
_MEMO_SIZE = 16
_MEMO_LOCK = threading.Lock()    # calls from several threads share the memo


def _classify(tasks, hooks: Hooks, *, s2_base: int, qlen, kvlen, group: int, order: str) -> BlockMap:
    keep_fn = host_function(hooks.mask_mod, "mask_mod")
    classes, spans, total, visited, full, columns, live, pairs = [], [], 0, 0, 0, 0, 0, 0
    for t in tasks:
        nblk = t.s2_hi - t.s2_lo
        cls = np.full(nblk, EMPTY, dtype=np.int8)
        span = np.zeros((nblk, 2), dtype=np.int64)
        s1, s2 = int(qlen[t.b]), int(kvlen[t.b])
        heads, pos = _row_indices(t, s1, group, order)
        cols_per_call = max(s2_base, (_CHUNK // max(1, t.m_rows)) // s2_base * s2_base)
        for c0 in range(t.s2_lo * s2_base, min(t.s2_hi * s2_base, s2), cols_per_call):
            c1 = min(c0 + cols_per_call, t.s2_hi * s2_base, s2)
            kv = np.arange(c0, c1, dtype=np.int32)
            try:
                keep = keep_fn(t.b, heads[:, None], pos[:, None], kv[None, :], *hooks.captures)
            except VariantError:
                raise
            except Exception as exc:
                raise VariantError("mask_mod", hooks.mask_mod.__name__,
                                   f"its host evaluation failed ({type(exc).__name__}: {exc})") from None
            keep = np.broadcast_to(np.asarray(keep, dtype=bool), (t.m_rows, c1 - c0))
            for j0 in range(c0, c1, s2_base):
                blk = keep[:, j0 - c0:min(j0 + s2_base, c1) - c0]
                j = j0 // s2_base - t.s2_lo
                cls[j] = FULL if blk.all() else PARTIAL if blk.any() else EMPTY
                if cls[j] != EMPTY:
                    span[j] = live_span(blk.any(axis=0))
                    columns += blk.shape[1]
                    live += int(span[j, 1])
                    pairs += int(span[j, 1]) * t.m_rows
        total += nblk
        visited += int(np.count_nonzero(cls != EMPTY))
        full += int(np.count_nonzero(cls == FULL))
        cls.flags.writeable = False      # a memoised map is shared between calls
        span.flags.writeable = False
        classes.append(cls)
        spans.append(span)
    height = max((t.m_rows for t in tasks), default=0)
    return BlockMap(tuple(classes), tuple(spans), total, visited, full, columns, live, pairs, tuple(tasks), height)


def plan_block_map(tasks, hooks: Hooks, *, m_cap: int, s2_base: int, qlen, kvlen, group: int,
                   order: str) -> BlockMap:
    """The block map the kernel skips by: the row tasks classified whole (tile rows ``m_cap``), or each in two
    row passes of half the rows (16-aligned, at least ``MIN_HALF`` rows: each vector core's share of the score
    block) when those visit at least ``HALVES_GAIN`` fewer (row, live column) pairs. A window's rows reach back
    by different amounts: a task's top half reaches into the block before the diagonal, its bottom half does
    not, and the top half's diagonal block is a band of columns."""
    def classify(of):
        return classify_blocks(of, hooks, s2_base=s2_base, qlen=qlen, kvlen=kvlen, group=group, order=order)

    whole = replace(classify(tasks), height=m_cap)
    heights = row_pass_heights(m_cap)
    next(heights)
    half = next(heights, m_cap)
    if half < MIN_HALF or half >= m_cap:
        return whole
    halves = [replace(t, m_start=t.m_start + h, m_rows=min(half, t.m_rows - h))
              for t in tasks for h in row_pass_offsets(t.m_rows, half)]
    fine = classify(halves)
    return replace(fine, height=half) if fine.pairs <= (1.0 - HALVES_GAIN) * whole.pairs else whole


#: half-height row passes are classified only from this many rows per half
MIN_HALF = 64
#: ... and taken when they visit at least this fraction fewer (row, live column) pairs than the whole tasks
HALVES_GAIN = 0.1


def live_span(kept_columns) -> tuple[int, int]:
    """(first, count) of the columns of a block a kernel visits, given which of its n columns some row keeps:
    from the first kept column to the last, both widened to ``SPAN_ALIGN`` and clipped to [0, n)."""
    cols = np.flatnonzero(kept_columns)
    n = len(kept_columns)
    first = int(cols[0]) // SPAN_ALIGN * SPAN_ALIGN
    end = min(-(-(int(cols[-1]) + 1) // SPAN_ALIGN) * SPAN_ALIGN, n)
    return first, end - first


def balance_tasks(weights, ncores: int) -> list[int]:
    """Cut tasks (in order, with these weights) into ``ncores`` contiguous runs of about equal total weight:
    returns the ``ncores + 1`` run boundaries. Each cut is placed where the running weight first reaches the
    next equal share."""
    w = np.asarray(weights, dtype=np.float64)
    ptr = [0]
    if ncores <= 0:
        return [0, len(w)]
    csum = np.cumsum(w)
    total = csum[-1] if len(w) else 0.0
    for k in range(1, ncores):
        cut = int(np.searchsorted(csum, total * k / ncores, side="left")) + 1 if total else 0
        ptr.append(min(max(cut, ptr[-1]), len(w)))
    ptr.append(len(w))
    return ptr
