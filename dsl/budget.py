"""On-chip memory budgets: does a kernel fit the target's L1, L0A/L0B/L0C and UB?

Model
-----
A kernel is checked per core group: one AIC (L1, L0A, L0B, L0C) and its
vector cores (one UB each). The check follows how attention kernels really use
the chip, so that a kernel written at the real block sizes is judged the way
the hardware would run it:

* **Liveness.** A tile occupies its space from the op that defines it to its
  last use (a value used inside a loop it was defined outside of lives to the
  loop's end; loop-carried values live through the loop). An op may reuse the
  buffer of an operand it reads for the last time (Ascend vector ops work in
  place), so intervals are half-open.
* **Vector row split.** The vector cores of a group split a rank-2 vector tile
  by rows (``cv_ratio`` ways, the AIV each owning its half); rank-1 tiles are
  counted whole. A kernel with explicit sub-blocks (``subblock_idx()``)
  already writes its vector tiles per AIV: they are counted whole.
* **Streaming vector passes.** A maximal run of row-local vector ops (elementwise,
  cast, row reductions, broadcasts, hand-offs in) processes its rows in chunks:
  tiles that live only inside the pass are counted at the chunk height R, the
  largest of 256, 128, ..., 1 rows that fits beside what stays resident.
* **Matmul staging.** ``mma`` stages its operands through L0A/L0B and its result
  through L0C in ping-pong base tiles (half of each buffer); operands in GM or
  handed over from the vector side are streamed through two L1 staging pieces.
  An mma result that only leaves the cube (hand-off or store) streams out of
  L0C piece by piece; one used again on the cube (``acc=``) stays resident and
  is its own L0C buffer, and an ``acc=`` mma accumulates into it in place.
* **Hand-offs.** On A2/A3 a cube<->vector hand-off goes through the GM workspace
  (counted in ``workspace_bytes``, not on chip); the receiving side sees it as
  a streamed input, and the sending side streams it out chunk by chunk.
* **In-place updates.** A value whose only use is a ``yield`` is computed into
  the loop-carried (or branch result) buffer it is yielded to.

``copies`` multiplies a buffer (double buffering); this report uses 1 for
resident tiles and 2 for staging pieces.

The result is a ``BudgetReport`` with, per space, the peak bytes, the
capacity, and the buffers live at the peak; ``table()`` renders it. A space over
capacity raises ``BudgetError`` with that table.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import BudgetError
from .ir import Block, Kernel, Op, Value
from .types import L0A, L0B, L0C, L1, UB, TileType

__all__ = ["BufferUse", "SpaceUse", "BudgetReport", "plan_budget", "MmaPlan", "plan_mma"]

_ROW_LOCAL = {"ewise", "cast", "reduce", "expand", "handoff", "create", "iota", "load", "store"}
_CHUNKS = (256, 128, 64, 32, 16, 8, 4, 2, 1)


@dataclass
class BufferUse:
    name: str
    space: str
    shape: tuple
    dtype: str
    copies: int
    bytes: int
    note: str = ""
    line: int = 0


@dataclass
class SpaceUse:
    space: str
    capacity: int
    peak: int
    buffers: list = field(default_factory=list)

    @property
    def fits(self) -> bool:
        return self.peak <= self.capacity


@dataclass
class MmaPlan:
    line: int
    base_m: int
    base_n: int
    base_k: int
    l0a: int
    l0b: int
    l0c: int


@dataclass
class BudgetReport:
    platform: str
    spaces: dict
    mma_plans: list
    workspace_bytes: int

    def table(self, only: str | None = None) -> str:
        lines = []
        for name, su in self.spaces.items():
            if only and name != only:
                continue
            lines.append(f"{name}: {su.peak} of {su.capacity} bytes at peak"
                         f" ({100.0 * su.peak / su.capacity:.1f}%){'' if su.fits else '  OVER BUDGET'}")
            if su.buffers:
                lines.append(f"  {'buffer':<22}{'line':>5} {'space':<6}{'shape':<14}{'dtype':<10}{'copies':>7}"
                             f"{'bytes':>10}  note")
                for b in su.buffers:
                    shape = "x".join(map(str, b.shape))
                    lines.append(f"  {b.name:<22}{b.line:>5} {b.space:<6}{shape:<14}{b.dtype:<10}{b.copies:>7}"
                                 f"{b.bytes:>10}  {b.note}")
                lines.append(f"  {'total':<65}{su.peak:>10}  capacity {su.capacity}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def plan_mma(m: int, n: int, k: int, in_bytes: int, platform) -> tuple[int, int, int]:
    """Ping-pong base tiles (baseM, baseN, baseK) of a block matmul: each L0 buffer half holds one piece."""
    half_a, half_b, half_c = platform.l0a // 2, platform.l0b // 2, platform.l0c // 2
    base_m = min(_align(m, 16), 128)
    base_n = min(_align(n, 16), 256)
    while base_m * base_n * 4 > half_c and base_n > 16:
        base_n //= 2
    base_k = min(_align(k, 16), 256)
    while (base_m * base_k * in_bytes > half_a or base_k * base_n * in_bytes > half_b) and base_k > 16:
        base_k //= 2
    return base_m, base_n, base_k


def _align(x: int, a: int) -> int:
    return max(a, (x + a - 1) // a * a)


class _Liveness:
    """Program positions and live ranges over the structured IR."""

    def __init__(self, kernel: Kernel):
        self.pos: dict[int, int] = {}         # id(op) -> position
        self.def_pos: dict[int, int] = {}     # value id -> position
        self.end: dict[int, int] = {}         # value id -> end of live range (exclusive)
        self.loops: list = []                 # (start, end) of every loop
        self.values: dict[int, Value] = {}
        self.def_op: dict[int, Op] = {}
        self.users: dict[int, list] = {}
        self.block_of: dict[int, Block] = {}
        self._pending: dict[int, int] = {}    # value id -> start of the outermost loop it is used inside
        self.carried_from: dict[int, Value] = {}  # loop-carried block argument id -> its initial value
        self.n = 0
        self._number(kernel.body, [])

    def _number(self, block: Block, loops):
        for a in block.args:
            self.values[a.id] = a
        for op in block.ops:
            p = self.n
            self.n += 1
            self.pos[id(op)] = p
            self.block_of[id(op)] = block
            for r in op.results:
                self.def_pos[r.id] = p
                self.values[r.id] = r
                self.def_op[r.id] = op
            for o in op.operands:
                self.users.setdefault(o.id, []).append(op)
                self._use(o, p, loops)
            if op.kind == "for":
                body = op.blocks[0]
                start = p
                for a, init in zip(body.args[1:], op.operands[3:]):
                    self.carried_from[a.id] = init
                for a in body.args:
                    self.def_pos[a.id] = start
                self._number(body, loops + [(start, None)])
                end = self.n
                for a in body.args:
                    self.end[a.id] = max(self.end.get(a.id, 0), end)
                for r in op.results:  # the loop's results exist once it ends (they share the carried buffers)
                    self.def_pos[r.id] = end
                # close the loop: uses inside that were defined outside extend to the end
                for vid, lo in list(self._pending.items()):
                    if lo == start:
                        self.end[vid] = max(self.end.get(vid, 0), end)
                        del self._pending[vid]
                self.loops.append((start, end))
            else:
                for b in op.blocks:
                    self._number(b, loops)
            for r in op.results:
                self.end.setdefault(r.id, self.def_pos[r.id] + 1)

    def _use(self, v: Value, p: int, loops):
        d = self.def_pos.get(v.id, -1)
        self.end[v.id] = max(self.end.get(v.id, 0), p)
        for start, _ in loops:  # outermost first: the outermost loop the value was defined outside of
            if d < start:
                self._pending.setdefault(v.id, start)
                break


def plan_budget(kernel: Kernel, platform) -> BudgetReport:
    lv = _Liveness(kernel)
    # an AIV-only kernel's block is one vector core; a kernel with explicit sub-blocks writes its tiles per AIV
    cv = platform.cv_ratio if kernel.kind == "mixed" and not kernel.subblocks else 1
    intervals: dict[str, list] = {s: [] for s in ("L1", "L0A", "L0B", "L0C", "UB")}
    chunked: list = []  # (pass id, start, end, bytes per row, BufferUse template, rows)
    mma_plans: list[MmaPlan] = []
    workspace = 0

    passes = _vector_passes(kernel.body)
    pass_of: dict[int, int] = {}
    for pid, ops in enumerate(passes):
        for op in ops:
            pass_of[id(op)] = pid

    for vid, v in lv.values.items():
        if not isinstance(v.type, TileType):
            continue
        t: TileType = v.type
        op = lv.def_op.get(vid)
        start, end = lv.def_pos.get(vid, 0), lv.end.get(vid, lv.def_pos.get(vid, 0) + 1)
        src_op = op if op is not None else getattr(lv.carried_from.get(vid), "owner", None)
        line = src_op.loc.line if src_op is not None and src_op.loc else 0
        name = v.name or (op.kind if op else "arg")
        users = lv.users.get(vid, [])
        if op is not None and op.kind == "copy" and op.attrs.get("staged"):
            continue  # L0A/L0B staging is part of the mma plan
        if op is not None and op.kind == "handoff":
            if not platform.cube_to_vector_on_chip:
                workspace += t.nbytes * platform.preload_depth
            if t.space is L1 and users and all(u.kind == "mma" or _staged_copy(u) for u in users):
                continue  # streamed into the matmul through L1 staging
        if t.space is L0C and _streams_out(op, users):
            continue  # streams out of L0C piece by piece (counted in the mma plan)
        if users and all(u.kind == "yield" for u in users) and op is not None and op.kind in _ROW_LOCAL:
            continue  # computed in place into the loop-carried (or branch result) buffer it is yielded to
        if t.space is UB:
            rows = t.shape[0]
            per_aiv_rows = -(-rows // cv) if t.rank == 2 else rows
            row_bytes = (t.shape[1] if t.rank == 2 else 1) * _item(t)
            pid = pass_of.get(id(op)) if op is not None else None
            # streamed when every reader is in the same pass, or takes it across to the cube (the hand-off
            # writes each chunk out to the workspace as it is produced)
            inside = pid is not None and users and all(pass_of.get(id(u)) == pid or u.kind == "handoff"
                                                       for u in users)
            if inside and op.kind in _ROW_LOCAL:
                tmpl = BufferUse(name, "UB", t.shape, t.dtype.name, 1, 0, "streamed in row chunks", line)
                chunked.append((pid, start, end, row_bytes, tmpl, per_aiv_rows))
                continue
            nbytes = per_aiv_rows * row_bytes if t.rank == 2 else t.nbytes
            note = f"per AIV: {per_aiv_rows} of {rows} rows" if t.rank == 2 and cv > 1 else ""
            intervals["UB"].append((start, end, BufferUse(name, "UB", t.shape, t.dtype.name, 1, nbytes, note, line)))
            continue
        if t.space in (L1, L0A, L0B, L0C):
            intervals[t.space.name].append((start, end, BufferUse(name, t.space.name, t.shape, t.dtype.name, 1,
                                                                  t.nbytes, "resident", line)))

    # matmul staging pieces
    for op in kernel.ops():
        if op.kind != "mma":
            continue
        p = lv.pos[id(op)]
        rt = op.result.type
        m, n = rt.shape
        a_t, b_t = _mma_in_types(op)
        k = a_t.shape[1]
        inb = max(1, a_t.dtype.bits // 8)
        bm, bn, bk = plan_mma(m, n, k, inb, platform)
        line = op.loc.line if op.loc else 0
        pieces = [("L0A", (bm, bk), a_t.dtype.name, bm * bk * inb), ("L0B", (bk, bn), b_t.dtype.name, bk * bn * inb)]
        if _streams_out(op, lv.users.get(op.result.id, [])):
            # the result leaves L0C piece by piece; a resident result (an accumulator) is its own L0C buffer
            pieces.append(("L0C", (bm, bn), rt.dtype.name, bm * bn * 4))
        for space, shape, dt, nb in pieces:
            intervals[space].append((p, p + 1, BufferUse(f"mma@{line}", space, shape, dt, 2, 2 * nb,
                                                         "ping-pong base tile", line)))
        # a streamed operand passes through L1 in double-buffered pieces: a base tile along M or N and up to
        # 256 of the contraction dim
        kpiece = min(_align(k, 16), 256)
        for which, piece in (("a", (bm, kpiece)), ("b", (kpiece, bn))):
            tt = a_t if which == "a" else b_t
            if _streams(op, 0 if which == "a" else 1, lv):
                nb = piece[0] * piece[1] * inb
                intervals["L1"].append((p, p + 1, BufferUse(f"mma@{line}.{which}", "L1", piece, tt.dtype.name, 2,
                                                            2 * nb, "streamed operand staging", line)))
        mma_plans.append(MmaPlan(line, bm, bn, bk, 2 * bm * bk * inb, 2 * bk * bn * inb, 2 * bm * bn * 4))

    spaces = {}
    caps = {"L1": platform.l1, "L0A": platform.l0a, "L0B": platform.l0b, "L0C": platform.l0c,
            "UB": platform.capacity("UB")}
    for space in ("UB", "L1", "L0A", "L0B", "L0C"):
        spaces[space] = _peak(space, intervals[space], chunked if space == "UB" else [], caps[space], lv.n)
    return BudgetReport(platform.name, spaces, mma_plans, workspace)


def _peak(space, intervals, chunked, cap, n) -> SpaceUse:
    fixed = [0] * (n + 1)
    for s, e, b in intervals:
        for p in range(s, max(e, s + 1)):
            if p <= n:
                fixed[p] += b.bytes * 1
    # choose each pass's chunk height
    by_pass: dict[int, list] = {}
    for item in chunked:
        by_pass.setdefault(item[0], []).append(item)
    extra = [0] * (n + 1)
    chunk_rows: dict[int, int] = {}
    for pid, items in by_pass.items():
        rows_cap = max(it[5] for it in items)
        per_row = [0] * (n + 1)
        for _, s, e, rb, _, _ in items:
            for p in range(s, max(e, s + 1)):
                if p <= n:
                    per_row[p] += rb
        positions = [p for p in range(n + 1) if per_row[p]]
        chosen = 1
        for r in _CHUNKS:
            if r > rows_cap and r != 1:
                continue
            if all(fixed[p] + r * per_row[p] <= cap for p in positions):
                chosen = r
                break
        chunk_rows[pid] = min(chosen, rows_cap)
        for p in positions:
            extra[p] += chunk_rows[pid] * per_row[p]
    total = [f + x for f, x in zip(fixed, extra)]
    peak_pos = max(range(n + 1), key=lambda p: total[p]) if n >= 0 else 0
    peak = total[peak_pos] if total else 0
    live = [b for s, e, b in intervals if s <= peak_pos < max(e, s + 1)]
    for pid, s, e, rb, tmpl, rows in chunked:
        if s <= peak_pos < max(e, s + 1):
            r = chunk_rows[pid]
            live.append(BufferUse(tmpl.name, tmpl.space, tmpl.shape, tmpl.dtype, 1, r * rb,
                                  f"streamed: {r}-row chunks of {rows} rows per AIV", tmpl.line))
    live.sort(key=lambda b: -b.bytes)
    return SpaceUse(space, cap, peak, live)


def _streams_out(op: Op | None, users) -> bool:
    """An mma result that only leaves the cube (hand-off or store) and is not accumulated in place."""
    if op is None or op.kind != "mma" or op.attrs.get("acc"):
        return False
    return bool(users) and all(u.kind in ("handoff", "store") for u in users)


def _item(t: TileType) -> int:
    return max(1, t.dtype.bits // 8)


def _staged_copy(op: Op) -> bool:
    return op.kind == "copy" and op.attrs.get("staged")


def _mma_in_types(op: Op):
    """The (a, b) operand types of an mma; a streamed GM window counts as an L1 tile of its shape."""
    tiles = iter(op.args)
    out = []
    for which in ("a", "b"):
        w = op.windows.get(which)
        out.append(TileType(w.tensor.type.dtype, L1, w.shape) if w is not None else next(tiles).type)
    return tuple(out)


def _streams(op: Op, which: int, lv: _Liveness) -> bool:
    """Whether an mma operand is streamed through L1 (a GM window, or a hand-off from the vector side)."""
    key = "a" if which == 0 else "b"
    if key in op.windows:
        return True
    idx = 0 if which == 0 or "a" in op.windows else 1
    if idx >= len(op.args):
        return False
    v = op.args[idx]
    src = v.owner
    if src is not None and src.kind == "copy" and src.attrs.get("staged"):
        v = src.args[0]
        src = v.owner
    return src is not None and src.kind == "handoff"


def _vector_passes(block: Block) -> list[list[Op]]:
    """Maximal runs of consecutive row-local vector ops in each block."""
    out: list[list[Op]] = []
    cur: list[Op] = []
    for op in block.ops:
        if op.kind == "const" or (op.scope is None and op.kind not in ("for", "if", "yield")):
            continue  # scalar work interleaves freely
        if op.scope == "vector" and op.kind in _ROW_LOCAL:
            cur.append(op)
            continue
        if cur:
            out.append(cur)
            cur = []
        for b in op.blocks:
            out += _vector_passes(b)
    if cur:
        out.append(cur)
    return out


def check_budget(report: BudgetReport, kernel: Kernel) -> None:
    for name, su in report.spaces.items():
        if not su.fits:
            raise BudgetError(f"kernel {kernel.name!r} does not fit {name} of {report.platform}: "
                              f"{su.peak} bytes needed at peak, {su.capacity} available",
                              report.table(only=name), report, kernel.loc)
