"""Block tiles and core splits of the arch22 TND split-fuse tiling ("FAI", op_host ``FAInferTiling``).

Model
-----
The split-fuse tiling works per batch ``b`` on its own query length ``q`` and KV
length ``kv`` (TND lengths de-cumulated; a paged cache's KV list is already per
batch). Its units of work:

* **query head tile** (``GetQNBlockTile``): ``floor(floor(128 / q) / 2) * 2`` query
  heads of one kv head, at most G and at least 1 (128 heads for ``q == 0``); a
  group of G heads is cut into ``ceil(G / tile)`` head blocks, so a batch has
  ``N2 * ceil(G / tile)`` head blocks, numbered kv-head-major;
* **query token tile** (``GetQSBlockTile``): always 128 tokens, ``ceil(q / 128)`` token
  blocks (``GetQSBlockTileDecode``, ``min(128, q)``, exists upstream but the host never
  calls it);
* **KV tile** (``GetKSBlockTile``): always 512 positions (``MAX_KV_STACK_LEN``),
  ``ceil(kv / 512)`` blocks counted from KV position 0;
* a **task** is one (head block, token block) of one batch: its heads are
  ``[g0, g0 + g_len)`` of kv head ``n2`` and its tokens ``[s0, s0 + s_len)``. A task
  never holds more than 128 query rows: more than 64 tokens force a one-head tile.

Three core splits exist, chosen by the planner (:mod:`.plan_fai`):

1. **regular** (no flag): tasks numbered batch by batch, token block major and head
   block minor inside a batch; the kernel hands task ``i`` to core ``i mod cores``
   (all cube cores launched). Each task walks its KV blocks itself: all of them, or
   with a right-down causal mask (``MASK_SPEC``) the first
   ``ceil(min(kv, (token block + 1) * 128 + max(kv - q, 0)) / 512)``, or with the
   band mask of sparse 4 the window from the pre/next tokens
   (:func:`regular_kv_blocks`);
2. **decoding** (``SplitCoreDecodeBS1GN2``: one query token per batch): a task is
   ``GetKvNBlockTile = clamp(128 // G, 1, N2)`` whole kv heads (G rows each) of one batch;
   tasks round-robin over the cores, and when the last round would keep at most
   half the cores busy its tasks are re-cut into one kv head each
   (:func:`decode_split`);
3. **flash decode** (``splitBN2S1GS2``): a greedy cursor over (batch, head block,
   token block, KV block) gives every core ``ceil(sum_b N1 * q_b * kv_b / cores)``
   "row x position" units (:func:`fd_core_ranges`, op_host
   ``fillCoreInfoForFlashDecode`` and its ``Consume*`` helpers, with their unsigned
   32-bit arithmetic); a row (head block, token block) whose KV blocks went to more
   than one core is a split node merged by the combine (:func:`fd_split_nodes`,
   ``ProcessCoreSplitInfo``).

Quirks kept on purpose (they change which core computes what upstream): the FD
cursor charges a row's non-last token block 128 units per KV position whatever its
head count, and its last one ``rows * head tile`` (not the real head count of a
group's last head block); whole batches are charged from the head-tile count;
the intermediate products wrap at 32 bits.

Invariants
----------
* :func:`regular_tasks` lists every task of every batch once, in the kernel's order.
* A task holds either one head or all of its batch's tokens, so its rows are one
  contiguous run in the G-major fold (row = g * q + s).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Q_TILE_CEIL", "KV_STACK", "MASK_NONE", "MASK_CAUSAL", "MASK_SWA", "MASK_FULL", "MASK_NAMES",
           "FaiBatch", "FaiTask", "qn_block_tile", "kv_n_block_tile", "batch_tiles", "regular_tasks",
           "regular_kv_blocks", "fd_kv_blocks", "DecodeSplit", "decode_split", "FdRanges", "fd_core_ranges",
           "FdPiece", "FdNode", "fd_pieces", "fd_split_nodes", "combine_rows"]

Q_TILE_CEIL = 128          # query rows of one task at most; also the token tile
KV_STACK = 512             # KV positions per step (MAX_KV_STACK_LEN), the KV tile
N_SPLIT_HELPER = 2         # the head tile is rounded down to a multiple of this
INT_MAX = 2147483647

MASK_NONE, MASK_CAUSAL, MASK_SWA, MASK_FULL = 0, 1, 3, 4
MASK_NAMES = {MASK_NONE: "NO_MASK", MASK_CAUSAL: "MASK_SPEC", MASK_SWA: "SWA_MASK", MASK_FULL: "FULL_MASK"}

_U32 = 0xFFFFFFFF


def _u32(x: int) -> int:
    return x & _U32


def _i32(x: int) -> int:
    x &= _U32
    return x - (1 << 32) if x >= (1 << 31) else x


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _tdiv(a: int, b: int) -> int:
    """C division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


# ------------------------------------------------------------------------------------------------ block tiles
def qn_block_tile(q: int, g: int) -> int:
    """Query heads per task (``GetQNBlockTile``): as many as fit 128 rows, rounded down to even, within [1, G]."""
    t = (Q_TILE_CEIL // q) // N_SPLIT_HELPER * N_SPLIT_HELPER if q else Q_TILE_CEIL
    return max(min(t, g), 1)


def kv_n_block_tile(rows_per_head: int, n2: int) -> int:
    """kv heads per decoding task (``GetKvNBlockTile``): as many G-row heads as fit 128 rows, within [1, N2]."""
    t = Q_TILE_CEIL // rows_per_head if rows_per_head else Q_TILE_CEIL
    return max(min(t, n2), 1)


@dataclass(frozen=True)
class FaiBatch:
    """The tiles of one batch (op_host ``BatchParams``)."""

    q: int
    kv: int
    qn_tile: int            # query heads per head block
    qn_per_group: int       # head blocks per kv head
    qn_num: int             # head blocks of the batch (all kv heads)
    qs_tile: int            # tokens per token block (128)
    qs_num: int             # token blocks
    ks_tile: int            # KV positions per KV block (512)
    ks_num: int             # KV blocks

    @property
    def tasks(self) -> int:
        return self.qn_num * self.qs_num


def batch_tiles(q: int, kv: int, g: int, n2: int) -> FaiBatch:
    tile = qn_block_tile(q, g)
    per_group = _cdiv(g, tile)
    return FaiBatch(q, kv, tile, per_group, per_group * n2, Q_TILE_CEIL, _cdiv(q, Q_TILE_CEIL),
                    KV_STACK, _cdiv(kv, KV_STACK))


@dataclass(frozen=True)
class FaiTask:
    """One upstream task: heads [g0, g0 + g_len) of kv head n2, tokens [s0, s0 + s_len) of batch b."""

    b: int
    n2: int
    g0: int
    g_len: int
    s_idx: int              # token block index
    s0: int
    s_len: int
    head_block: int         # head block index inside the batch (kv-head major)


def _task(bt: FaiBatch, b: int, g: int, head_block: int, s_idx: int) -> FaiTask:
    n2, gi = divmod(head_block, bt.qn_per_group)
    g0 = gi * bt.qn_tile
    s0 = s_idx * bt.qs_tile
    return FaiTask(b, n2, g0, min(bt.qn_tile, g - g0), s_idx, s0, min(bt.qs_tile, bt.q - s0), head_block)


def regular_tasks(batches: list[FaiBatch], g: int) -> list[FaiTask]:
    """Every task in the kernel's global order (batch, then token block, then head block)."""
    out = []
    for b, bt in enumerate(batches):
        for t in range(bt.tasks):
            s_idx, head_block = divmod(t, bt.qn_num)
            out.append(_task(bt, b, g, head_block, s_idx))
    return out


# ------------------------------------------------------------------------------------------------ KV ranges
def regular_kv_blocks(bt: FaiBatch, task: FaiTask, mask_type: int, sparse: int, pre: int, nxt: int
                      ) -> tuple[int, int, str]:
    """The KV blocks [lo, hi) the regular kernel walks for ``task``, and which rule gave them.

    ``pre`` / ``nxt`` are the pre/next-token attributes clamped to +-INT_MAX (only sparse 4 reads them).
    """
    q, kv = bt.q, bt.kv
    if mask_type != MASK_NONE and sparse != 4 and mask_type != MASK_FULL:
        diff = max(kv - q, 0)
        reach = min(kv, (task.s_idx + 1) * bt.qs_tile + diff)
        return 0, _cdiv(reach, KV_STACK), "causal: blocks up to the block holding the last visible key"
    if mask_type != MASK_NONE and sparse == 4:
        start = 0
        if pre < 0 and -pre >= q:
            start = kv // KV_STACK + 1
        elif pre != INT_MAX:
            left = _i32(kv - q - pre)
            first = _i32(task.s0 + left)
            start = max(0, first) // KV_STACK
        if nxt < 0 and -nxt >= kv:
            total = 0
        elif nxt != INT_MAX:
            left = _i32(kv - q + nxt)
            end = _i32(task.s0 + task.s_len + left)
            reach = min(kv, _tdiv(end + KV_STACK - 1, KV_STACK) * KV_STACK)
            if reach <= 0:
                reach = kv
            total = _cdiv(reach, KV_STACK)
        else:
            total = _cdiv(kv, KV_STACK)
        return start, total, ("band (sparse 4): blocks from the first key of the first row to the last key of "
                              "the last row")
    return 0, bt.ks_num, "every KV block"


def fd_kv_blocks(bt: FaiBatch, s_idx: int, mask_type: int) -> int:
    """The KV block count the flash-decode kernel clips a row's last piece to (``kvSLoopNumTotal``)."""
    reach = bt.kv
    if mask_type != MASK_NONE:
        reach = min(bt.kv, (s_idx + 1) * bt.qs_tile + max(bt.kv - bt.q, 0))
    return _cdiv(reach, KV_STACK)


# ------------------------------------------------------------------------------------------------ decoding split
@dataclass(frozen=True)
class DecodeSplit:
    """``SplitCoreDecodeBS1GN2``: per-core lists of (batch, first kv head, kv heads) and the tiling fields."""

    kv_tile: int
    tasks_per_batch: int
    total_tasks: int
    main_tasks: int
    tail_tasks: int            # the tiling's tailLoopTaskNum (after the re-cut)
    tail_start_batch: int
    tail_start_n2: int
    tail_kv_tile: int          # 1 when the tail was re-cut into single kv heads, else 0
    per_core: tuple = ()


def decode_split(batch: int, n2: int, g: int, cores: int) -> DecodeSplit:
    tile = kv_n_block_tile(g, n2)
    per_batch = _cdiv(n2, tile)
    total = per_batch * batch
    main = (total // cores) * cores
    tail = total - main
    tsb = main // per_batch if per_batch else 0
    tsn = (main - tsb * per_batch) * tile
    if 0 < tail <= cores // 2:
        tail_tile, rework = 1, (n2 - tsn) + (batch - tsb - 1) * n2
    elif tail > 0:
        tail_tile, rework = 0, tail
    else:
        tail_tile, rework = 0, 0
    per_core: list = [[] for _ in range(cores)]
    use_main = main if tail_tile > 0 else total
    for t in range(use_main):
        b, k = divmod(t, per_batch)
        count = n2 - k * tile if k == per_batch - 1 else tile
        per_core[t % cores].append((b, k * tile, count))
    if tail_tile > 0:
        first = n2 - tsn
        for t in range(rework):
            if t < first:
                b, n = tsb, tsn + t
            else:
                off, n = divmod(t - first, n2)
                b = tsb + 1 + off
            per_core[t % cores].append((b, n, 1))
    return DecodeSplit(tile, per_batch, total, main, rework, tsb, tsn, tail_tile,
                       tuple(tuple(x) for x in per_core))


# ------------------------------------------------------------------------------------------------ flash decode
Cursor = tuple   # (batch, head block, token block, KV block)


@dataclass(frozen=True)
class FdRanges:
    """Per-core [start, end] cursors of the flash-decode split (end: batch/head/token block inclusive, KV
    block exclusive), as ``fillCoreInfoForFlashDecode`` leaves them."""

    total_units: int
    per_core_units: int
    starts: tuple
    ends: tuple
    need_core_num: int            # 0 when the walk never reached the last batch's end explicitly
    filled: int                   # cores whose cursors the walk wrote
    overrun: bool = False         # the walk went on with a cursor past the last batch (upstream reads past the lists)
    notes: tuple = field(default=())


def fd_core_ranges(batches: list[FaiBatch], n1: int, cores: int) -> FdRanges:
    nb = len(batches)
    total = sum(n1 * bt.q * bt.kv for bt in batches)
    per_core = _cdiv(total, cores) if cores else 0
    starts = [(0, 0, 0, 0)] * cores
    ends = [(0, 0, 0, 0)] * cores
    c = {"B": 0, "N": 0, "S": 0, "K": 0}
    need = 0
    filled = 0
    overrun = False

    def advance(p: FaiBatch) -> None:
        if c["K"] == p.ks_num:
            c["S"] += 1
            c["K"] = 0
        if c["S"] == p.qs_num:
            c["N"] += 1
            c["S"] = c["K"] = 0
        if c["N"] == p.qn_num:
            c["B"] += 1
            c["N"] = c["S"] = c["K"] = 0

    def consume_blocks(res: int) -> int:
        while c["B"] < nb and c["K"] < batches[c["B"]].ks_num and res > 0:
            p = batches[c["B"]]
            rows = p.qs_tile if c["S"] < _u32(p.qs_num - 1) else _u32((p.q - c["S"] * p.qs_tile) * p.qn_tile)
            span = KV_STACK if c["K"] < _u32(p.ks_num - 1) else _u32(p.kv - c["K"] * KV_STACK)
            res -= _u32(rows * span)
            c["K"] += 1
        return res

    def consume_batches(res: int) -> int:
        while c["B"] < nb and res > 0:
            p = batches[c["B"]]
            rows = _u32(_u32(p.q * _u32(n1 - _u32(p.qn_tile * c["N"]))) - _u32(c["S"] * p.qs_tile))
            units = _u32(rows * p.kv)
            if res < units:
                break
            res -= units
            c["B"] += 1
            c["N"] = c["S"] = c["K"] = 0
        return res

    def consume_heads(res: int, p: FaiBatch) -> int:
        while c["N"] < p.qn_num and res > 0:
            rows = _u32(_u32(p.q * p.qn_tile) - _u32(c["S"] * p.qs_tile))
            units = _u32(rows * p.kv)
            if res < units:
                break
            res -= units
            c["N"] += 1
            c["S"] = c["K"] = 0
        return res

    def consume_tokens(res: int, p: FaiBatch) -> int:
        while c["S"] < p.qs_num and res > 0:
            rows = p.qs_tile if c["S"] < _u32(p.qs_num - 1) else _u32((p.q - c["S"] * p.qs_tile) * p.qn_tile)
            units = _u32(rows * p.kv)
            if res < units:
                break
            res -= units
            c["S"] += 1
            c["K"] = 0
        return res

    def now() -> Cursor:
        return (c["B"], c["N"], c["S"], c["K"])

    def finish() -> Cursor:
        p = batches[nb - 1]
        return (nb - 1, p.qn_num - 1, p.qs_num - 1, p.ks_num)

    for core in range(cores):
        if c["B"] >= nb:
            overrun = True
            break
        res = per_core
        starts[core] = now()
        filled = core + 1
        p = batches[c["B"]]
        res = consume_blocks(res)
        if res <= 0:
            ends[core] = now()
        advance(p)
        if c["B"] < nb and res <= 0:
            continue
        if c["B"] == nb:
            ends[core], need = finish(), core + 1
            break
        res = consume_batches(res)
        if c["B"] == nb:
            ends[core], need = finish(), core + 1
            break
        p = batches[c["B"]]
        res = consume_heads(res, p)
        advance(p)
        if c["B"] == nb:
            ends[core], need = finish(), core + 1
            break
        p = batches[c["B"]]
        res = consume_tokens(res, p)
        advance(p)
        if c["B"] == nb:
            ends[core], need = finish(), core + 1
            break
        p = batches[c["B"]]
        res = consume_blocks(res)
        ends[core] = now()
        advance(p)
    return FdRanges(total, per_core, tuple(starts), tuple(ends), need, filled, overrun)


@dataclass(frozen=True)
class FdPiece:
    """A row (batch, head block, token block) as one core walks it: KV blocks [k_lo, k_hi) of the row's
    ``ks_num`` (before the kernel clips the last piece to the mask); ``split`` when 0 < covered < ks_num."""

    core: int
    b: int
    head_block: int
    s_idx: int
    k_lo: int
    k_hi: int
    split: bool


@dataclass(frozen=True)
class FdNode:
    """A split row (op_host ``splitNode``): query heads [head_start, head_end), tokens [q_start, q_end)."""

    b: int
    head_block: int
    s_idx: int
    head_start: int           # global query head index
    head_end: int
    q_start: int
    q_end: int
    splits: int
    lse_offset: int           # elements of the partial-lse area before this node
    o_offset: int             # elements of the partial-output area before this node


def fd_pieces(batches: list[FaiBatch], ranges: FdRanges, cores: int) -> list[FdPiece]:
    """Every row each core's cursor range covers, in core order (``ProcessCoreSplitInfo``'s walk, which the
    kernel's loop repeats)."""
    out = []
    for core in range(cores):
        sb, sn, ss, sk = ranges.starts[core]
        eb, en, es, ek = ranges.ends[core]
        for b in range(sb, eb + 1):
            p = batches[b]
            n_lo = sn if b == sb else 0
            n_hi = en if b == eb else p.qn_num - 1
            for n in range(n_lo, n_hi + 1):
                s_lo = ss if (b == sb and n == sn) else 0
                s_hi = es if (b == eb and n == en) else p.qs_num - 1
                for s in range(s_lo, s_hi + 1):
                    k_lo = sk if (b == sb and n == sn and s == ss) else 0
                    k_hi = ek if (b == eb and n == en and s == es) else p.ks_num
                    covered = _u32(k_hi - k_lo)
                    out.append(FdPiece(core, b, n, s, k_lo, k_hi, 0 < covered < p.ks_num))
    return out


def fd_split_nodes(batches: list[FaiBatch], pieces: list[FdPiece], g: int, dv: int, cores: int
                   ) -> tuple[list[FdNode], int, int]:
    """The split nodes in record order, and the partial-lse / partial-output element totals."""
    nodes: list[dict] = []
    prev = None
    idx = -1
    lse = o = 0
    for pc in pieces:
        if not pc.split:
            continue
        p = batches[pc.b]
        n2, gi = divmod(pc.head_block, p.qn_per_group)
        h0 = n2 * g + gi * p.qn_tile
        h1 = min(h0 + p.qn_tile, (n2 + 1) * g)
        q0 = pc.s_idx * p.qs_tile
        q1 = min(q0 + p.qs_tile, p.q)
        key = (pc.b, pc.head_block, pc.s_idx)
        if key != prev:
            idx += 1
            if idx < cores + 1:       # the tiling data holds cores + 1 nodes
                nodes.append(dict(b=pc.b, head_block=pc.head_block, s_idx=pc.s_idx, head_start=h0, head_end=h1,
                                  q_start=q0, q_end=q1, splits=0, lse_offset=lse, o_offset=o))
            prev = key
        if idx < cores + 1:
            nodes[idx]["splits"] += 1
            lse += (h1 - h0) * (q1 - q0)
            o += (h1 - h0) * (q1 - q0) * dv
    return [FdNode(**x) for x in nodes], lse, o


def combine_rows(node: FdNode, half: int) -> list[tuple[int, int]]:
    """The node's rows one vector of the combine merges (``half`` 0 or 1), as (first row, rows) runs in the
    node's G-major row numbering (row = head * tokens + token).

    Upstream the first vector of a pair takes the first half of the node's rows in token-major order: for
    one token the first ``heads // 2`` heads, else the first ``tokens // 2`` tokens of every head.
    """
    q_len = node.q_end - node.q_start
    n_len = node.head_end - node.head_start
    if q_len == 1:
        former = (q_len * n_len) // 2
        lo, hi = (0, former) if half == 0 else (former, n_len)
        return [(lo, hi - lo)] if hi > lo else []
    t_half = q_len // 2
    lo, hi = (0, t_half) if half == 0 else (t_half, q_len)
    if hi <= lo:
        return []
    return [(h * q_len + lo, hi - lo) for h in range(n_len)]
