"""plan_memory: an address for every on-chip buffer of every program, and the budget check that reads it.

Model
-----
Each program of a core group owns the spaces of its core: the AIC program L1,
L0A, L0B and L0C; the AIV program (run by each AIV) its UB. A sequential
kernel is planned as one program holding every space (program order's view;
the budget is judged on the split programs).

* Sizes. A buffer takes its tile's bytes, aligned as the platform table says;
  an L1 matrix is stored NZ (the Ascend C backend's ND->NZ copies), so it
  takes its rows padded to 16 and its columns to a 32-byte fractal
  (``tile_bytes``: an 8 x 512 int8 query tile takes 16 x 512 bytes), and an
  L0C matrix its fractal layout (``l0c_bytes``: rows padded to 16 per row
  block, columns to 16).
* Buffers. Each tile value that holds data gets a buffer (broadcast views,
  row slices and in-place row updates share their source's). Values share one
  buffer where the chip updates in place: a loop's carried value, its initial
  value when the loop is that value's only reader, and the value the body
  yields when it is computed after the last read of the old one (vector ops
  work in place), with the chain of elementwise ops that makes it from the
  carried value (``acc = acc * alpha; acc = acc + o``: each link the only
  reader of the one before, same size and width); an ``if`` result and the
  values its arms yield.
* Stages apart. In the AIV program a buffer made in a pipelined loop's body
  lives over the whole body: the stages of one step run beside the other
  steps' stages on other pipes (the next step's score chunks load while this
  step's P·V tile is read), so one stage's buffer never takes the address of
  another's. A program whose plan does not fit so is planned without it,
  before it gives up any ping-pong copy.
* Matmul staging. An ``mma`` stages its operands through L0A / L0B and its
  result through L0C in ping-pong base tiles (an ``acc=`` mma accumulates in
  place into its accumulator) (``plan_mma``: half of each
  buffer per piece); an operand read from GM, or handed over from the vector
  side into L1 only to be staged, streams through two L1 pieces (a base tile by up to 256 of the
  contraction). A result that only leaves the cube (a store, a hand-off, or a ``dequant`` only those read:
  the fixpipe converts each piece as it moves it, so a dequant is a view of its operand)
  streams out of L0C piece by piece, also when a runtime ``if`` chooses
  between two mma results (each arm's result, or a ``dequant`` of it, read by its yield only) whose
  ``if`` result only leaves the cube; such a result holds the mma's L0C pieces
  until its last store (the next mma's pieces cannot take their place before
  it: two scores computed back to back, then both handed off). One used
  again on the cube (``acc=``) is a resident L0C buffer. A stored result larger than its two L0C pieces is
  recorded in ``streamed_out``: it is computed piece by piece at its store
  (the Ascend C lowering and the cost model both read that record).
* Slots. On the 950 a hand-off lands in the receiving core's own memory: its
  ``depth`` slots are a UB buffer of each AIV (cube -> vector; its rows of a
  row-split tile) or an L1 buffer (vector -> cube) for the whole program.
* Ping-pong. In the AIV program, a UB buffer that moves data (it holds a
  load's result, MTE2, or a store's source, MTE3) and whose values are all
  made and last read inside one iteration of an innermost loop with a
  constant step (a row-chunk loop, a loop of vector work) gets two copies,
  shared with the values made in place over it (``s * scale``, ``exp``),
  picked by the iteration's parity: the loop's body starts with
  ``ping = ((iv - lo) // step) % 2`` and the buffer's address is
  ``offset + ping * copy`` (``Buffer.parity``). So the next iteration's load
  lands in the other copy while this one's is still read, and this one's
  store drains while the next is computed; insert_sync orders each copy
  against the iteration two back (``parity`` events). Both copies are
  reserved over the whole loop (the other iteration's copy is in flight
  while this one's ops run). A program whose plan does not fit with them
  gives them up loop by loop, the loop whose second copies take the most
  bytes first (single copies, its parity ops removed), and is over budget
  only without any. Cube tiles get no copies: the cube's operands
  already stream through the ping-pong staging pieces below.
* Lifetimes are ``liveness.Liveness``; a buffer lives over the union of its
  values' ranges (a ping-pong buffer over its loop, a stage's buffer over its
  pipelined loop, as above; an L1 tile staged into an mma up to that mma
  inclusive: the mma reads it piece by piece, beside its own stream pieces);
  a result may take the place of an operand it reads for the
  last time only with the same size and element width (in place, never a
  partial overlap). Addresses are assigned first-fit in order of first use, each
  aligned as the platform table says (UB 32 B, L1 512 B, L0A/L0B 512 B, L0C
  1 KB), copies side by side.
* The plan of a space is its buffers with addresses; its *peak* is the end of
  the highest buffer, which must fit the space's capacity. Otherwise
  ``BudgetError`` with the table of the buffers live at the busiest point,
  pointing at the line of the largest of them.

Invariants
----------
* Two buffers whose lifetimes overlap never overlap in address.
* The budget report is this plan (``CompiledKernel.report``), so the report
  and the addresses the Ascend C backend emits cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import BudgetError
from ..ir import Block, Kernel, Op, Value, walk
from ..liveness import Liveness
from ..types import INDEX, L0A, L0B, L0C, L1, UB, TileType

__all__ = ["plan_memory", "MemoryPlan", "Buffer", "SpacePlan", "MmaPlan", "plan_mma", "check_plan",
           "SPACES_OF", "l0c_blocks", "l0c_bytes"]

#: the spaces each program owns
SPACES_OF = {"aic": ("L1", "L0A", "L0B", "L0C"), "aiv": ("UB",), "kernel": ("UB", "L1", "L0A", "L0B", "L0C")}
#: ops whose result shares its operand's buffer (``dequant``: the fixpipe converts the int32 L0C tile as it moves it)
_VIEWS = ("expand", "slice_rows", "insert_rows", "dequant")
_INPLACE = ("ewise", "cast", "reduce", "create", "iota", "load", "mma")


@dataclass
class Buffer:
    name: str
    line: int
    space: str
    shape: tuple
    dtype: str
    copies: int
    bytes: int               # all copies
    start: int               # first position it is live (Liveness numbering of its program)
    end: int                 # one past the last
    note: str = ""
    offset: int = 0          # byte address in its space
    loc: object = None
    values: list = field(default_factory=list)   # ids of the values it holds
    parity: object = None    # the ping Value whose parity picks the copy (two copies, a loop's ping-pong)
    parity_loop: object = None   # the loop whose iterations alternate the copies


@dataclass
class SpacePlan:
    space: str
    capacity: int
    peak: int                                 # end address of the highest buffer
    buffers: list = field(default_factory=list)   # the buffers live at the busiest point (the table's rows)
    all: list = field(default_factory=list)       # every buffer of the space, by address

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
class MemoryPlan:
    """The memory plan of a kernel: per program, per space, the buffers and their addresses."""

    platform: str
    programs: dict                     # core ("aic", "aiv" or "kernel") -> {space: SpacePlan}
    mma_plans: list
    workspace_bytes: int
    buffer_of: dict = field(default_factory=dict)   # value id -> Buffer
    #: mma result value id -> (base_m, base_n) for a result computed piece by piece at its one store: it is only
    #: stored and its L0C fractals exceed the mma's two ``.c`` pieces, so each (base_m, base_n) piece is
    #: Fixpiped out when done while the next is computed (the Ascend C lowering emits it so; the cost model
    #: overlaps the drain with the Mmad pieces)
    streamed_out: dict = field(default_factory=dict)

    @property
    def spaces(self) -> dict:
        """Space name -> its plan (each space belongs to one program)."""
        out = {}
        for core, spaces in self.programs.items():
            out.update(spaces)
        order = ("UB", "L1", "L0A", "L0B", "L0C")
        return {s: out[s] for s in order if s in out}

    def table(self, only: str | None = None) -> str:
        lines = []
        for name, su in self.spaces.items():
            if only and name != only:
                continue
            lines.append(f"{name}: {su.peak} of {su.capacity} bytes at peak"
                         f" ({100.0 * su.peak / su.capacity:.1f}%){'' if su.fits else '  OVER BUDGET'}")
            if su.buffers:
                lines.append(f"  {'buffer':<22}{'line':>5} {'space':<6}{'shape':<14}{'dtype':<10}{'copies':>7}"
                             f"{'bytes':>10}{'address':>9}  note")
                for b in su.buffers:
                    shape = "x".join(map(str, b.shape))
                    lines.append(f"  {b.name:<22}{b.line:>5} {b.space:<6}{shape:<14}{b.dtype:<10}{b.copies:>7}"
                                 f"{b.bytes:>10}{b.offset:>9}  {b.note}")
                lines.append(f"  {'total':<65}{su.peak:>10}  capacity {su.capacity}")
        return "\n".join(lines)

    def memory_map(self) -> str:
        """Every buffer of every program by address: what lives where, and the peak per space."""
        lines = [f"memory plan on {self.platform}"
                 + (f"; GM workspace {self.workspace_bytes} bytes per core group" if self.workspace_bytes else "")]
        for core, spaces in self.programs.items():
            who = {"aic": "AIC program", "aiv": "AIV program (each AIV)", "kernel": "sequential kernel"}[core]
            lines.append(f"{who}:")
            for name, sp in spaces.items():
                lines.append(f"  {name}: peak {sp.peak} of {sp.capacity} bytes ({100.0 * sp.peak / sp.capacity:.1f}%)")
                for b in sorted(sp.all, key=lambda b: (b.offset, b.start)):
                    shape = "x".join(map(str, b.shape))
                    copies = f" x{b.copies}" if b.copies > 1 else ""
                    lines.append(f"    [{b.offset:>7}, {b.offset + b.bytes:>7})  {b.name:<20} {shape:<12} "
                                 f"{b.dtype:<9}{copies:<4} line {b.line:<5} live {b.start}-{b.end}"
                                 f"{'  ' + b.note if b.note else ''}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def plan_mma(m: int, n: int, k: int, in_bytes: int, platform) -> tuple[int, int, int]:
    """Ping-pong base tiles (baseM, baseN, baseK) of a block matmul: each L0 buffer half holds one piece.
    baseK is whole fractals of the operands' type (a multiple of 16 and of the 32-byte block: 32 for 8-bit
    operands), halved and rounded up to that unit until the pieces fit (K 80 of fp16 beside a 256-column B: 48,
    not 40)."""
    half_a, half_b, half_c = platform.l0a // 2, platform.l0b // 2, platform.l0c // 2
    base_m = min(_align(m, 16), 128)
    base_n = min(_align(n, 16), 256)
    while base_m * base_n * 4 > half_c and base_n > 16:
        base_n //= 2
    unit = max(16, 32 // in_bytes)
    base_k = min(_align(k, unit), 256)
    while (base_m * base_k * in_bytes > half_a or base_k * base_n * in_bytes > half_b) and base_k > unit:
        base_k = max(unit, _align(base_k // 2, unit))
    return base_m, base_n, base_k


def _align(x: int, a: int) -> int:
    return max(a, (x + a - 1) // a * a)


def tile_bytes(t: TileType) -> int:
    """The bytes a tile takes in its space: an L1 matrix is stored NZ (the Ascend C backend's ND->NZ copy),
    its rows padded to 16 and its columns to a 32-byte fractal; an L0C matrix in its fractal layout
    (``l0c_bytes``); other tiles take their elements' bytes."""
    if t.space is L1 and t.rank == 2:
        c0 = 32 // t.dtype.itemsize
        return -(-t.shape[0] // 16) * 16 * (-(-t.shape[1] // c0) * c0) * t.dtype.itemsize
    if t.space is L0C and t.rank == 2:
        return l0c_bytes(*t.shape)
    return t.nbytes


def l0c_blocks(M: int, N: int) -> list:
    """The layout of an (M, N) L0C tile: row blocks of up to 128 rows (the mma's base_m), each an NZ matrix of
    its rows padded to 16 (M1 fractal rows) and the columns padded to 16, one after the other:
    [(first row, rows, M1, element offset)]."""
    mb = min(-(-M // 16) * 16, 128)
    n16 = -(-N // 16) * 16
    out, off = [], 0
    for m0 in range(0, M, mb):
        rows = min(mb, M - m0)
        m1 = -(-rows // 16)
        out.append((m0, rows, m1, off))
        off += 16 * m1 * n16
    return out


def l0c_bytes(M: int, N: int) -> int:
    """Bytes of an (M, N) fp32 L0C tile laid out as ``l0c_blocks``."""
    _, _, m1, off = l0c_blocks(M, N)[-1]
    return (off + 16 * m1 * (-(-N // 16) * 16)) * 4


def plan_memory(kernel: Kernel, platform) -> Kernel:
    kernel.memory = plan_kernel(kernel, platform)
    return kernel


def plan_kernel(kernel: Kernel, platform) -> MemoryPlan:
    progs = kernel.programs() or {"kernel": kernel.body}
    plans, mma_plans, buffer_of, streamed_out = {}, [], {}, {}
    for core, body in progs.items():
        slots = [ch for ch in kernel.channels if ch.kind == "data" and ch.route == "onchip" and ch.dst == core]
        pings = _insert_pings(body) if core == "aiv" else {}
        apart = core == "aiv"
        while True:
            spaces, mmas, of, outs = _plan_program(body, SPACES_OF[core], platform, slots, pings, apart)
            if all(sp.fits for sp in spaces.values()):
                break
            if apart:
                apart = False
                continue
            if not pings:
                break
            # ping-pong is an overlap optimisation: a program that does not fit with it gives it up, loop by
            # loop, the loop whose second copies take the most bytes first
            extra = {key: sum(b.bytes // 2 for sp in spaces.values() for b in sp.all if b.parity_loop is loop)
                     for key, (loop, _, _) in pings.items()}
            worst = max(extra, key=extra.get)
            _remove_pings({worst: pings.pop(worst)})
        _remove_pings({k: v for k, v in pings.items()
                       if not any(b.parity_loop is v[0] for sp in spaces.values() for b in sp.all)})
        plans[core] = spaces
        mma_plans += mmas
        buffer_of.update(of)
        streamed_out.update(outs)
    return MemoryPlan(platform.name, plans, mma_plans, kernel.workspace_bytes, buffer_of, streamed_out)


# ------------------------------------------------------------------ one program

class _Groups:
    """Union-find of values that share one buffer."""

    def __init__(self):
        self.parent: dict[int, int] = {}

    def find(self, x: int) -> int:
        p = self.parent.setdefault(x, x)
        while p != x:
            self.parent[x] = self.parent.setdefault(p, p)
            x, p = p, self.parent[p]
        return x

    def union(self, a: Value, b: Value):
        ra, rb = self.find(a.id), self.find(b.id)
        if ra != rb:
            self.parent[ra] = rb


def share_groups(body: Block, lv: Liveness) -> _Groups:
    """The values of a program that share one buffer by construction: views with what they view, an
    accumulating mma with its acc tile, a loop's carried values with their inits, results and yields, an
    ``if`` result with its arms' yields (each where the sharing is safe). chunk_rows counts what stays
    resident by these groups, as this plan will lay it out."""
    groups = _Groups()
    for op in walk(body):
        k = op.kind
        if k in _VIEWS and op.results:
            groups.union(op.results[0], op.args[0])
        elif k == "mma" and op.attrs.get("acc"):
            groups.union(op.results[0], op.args[-1])   # accumulates in place into its acc tile
        elif k == "for":
            _share_loop(op, groups, lv)
        elif k == "if":
            for i, r in enumerate(op.results):
                if r.is_tile:
                    for arm in op.blocks:
                        y = arm.ops[-1].args[i]
                        if _only_use(y, lv, "yield") and _materialises(y):
                            groups.union(y, r)
    return groups


def _plan_program(body: Block, spaces: tuple, platform, slots=(), pings: dict | None = None,
                  apart: bool = False):
    lv = Liveness(body)
    groups = share_groups(body, lv)
    skip: set[int] = set()           # values that are no buffer of their own (views, staging, streams)
    staged: dict[int, list] = {}      # id(mma op) -> streamed operand notes
    mmas = []
    for op in walk(body):
        if op.kind == "copy" and op.attrs.get("staged"):
            skip.add(op.results[0].id)
    # streamed mma operands and results
    for op in walk(body):
        if op.kind == "if":   # each arm's mma result yielded to an if result that only leaves the cube streams too
            for r, arms in _streamed_if_results(op, lv):
                skip.add(r.id)
                for y, mma in arms:
                    skip.update((y.id, mma.results[0].id))
                    staged.setdefault(id(mma), []).append("out")
        if op.kind != "mma":
            continue
        users = lv.users.get(op.results[0].id, [])
        if not op.attrs.get("acc") and users and all(_leaves_by_store(u, lv) for u in users):
            skip.add(op.results[0].id)
            skip.update(u.results[0].id for u in users if u.kind == "dequant")
            staged.setdefault(id(op), []).append("out")
        for which, src in _mma_sources(op):
            if src is None:
                staged.setdefault(id(op), []).append(which)
            elif src.owner is not None and src.owner.kind == "load" and src.owner.attrs.get("handoff") \
                    and src.type.space is L1 and all(u.kind == "copy" and u.attrs.get("staged")
                                                     for u in lv.users.get(src.id, [])):
                skip.add(src.id)
                staged.setdefault(id(op), []).append(which)
    # an L1 tile staged into an mma is read by the mma itself, piece by piece, after its staged copy: it lives
    # until the mma (inclusive), so the mma's own stream pieces never take its place
    held: dict[int, int] = {}
    for op in walk(body):
        if op.kind == "mma":
            for _, src in _mma_sources(op):
                if src is not None:
                    held[src.id] = max(held.get(src.id, 0), lv.pos[id(op)] + 1)
    # buffers from groups
    members: dict[int, list] = {}
    for vid, v in lv.values.items():
        if not v.is_tile or v.type.space.name not in spaces or vid in skip:
            continue
        members.setdefault(groups.find(vid), []).append(v)
    buffers = []
    of = {}
    ponged = _ping_pong_groups(members, skip, lv, pings or {})
    stage_spans = _stage_spans(members, skip, lv, body) if apart else {}
    for root, vals in members.items():
        vals = [v for v in vals if v.id not in skip]
        if not vals:
            continue
        rep = max(vals, key=lambda v: (v.type.nbytes, -lv.def_pos.get(v.id, 0)))
        if any(v.owner is not None and v.owner.kind in _VIEWS for v in [rep]) and len(vals) > 1:
            rep = next((v for v in vals if v.owner is None or v.owner.kind not in _VIEWS), rep)
        start = min(lv.def_pos.get(v.id, 0) for v in vals)
        end = max(max(lv.end.get(v.id, lv.def_pos.get(v.id, 0) + 1), held.get(v.id, 0)) for v in vals)
        origin = _origin(rep, lv)
        pong = ponged.get(root)
        copies = 2 if pong else 1
        t: TileType = rep.type
        size = _align(tile_bytes(t), platform.align(t.space.name))
        note = "resident" if t.space is not UB else ""
        if root in stage_spans:
            start, end = stage_spans[root]
        if pong:
            loop, ping, (start, end) = pong
            note = f"ping-pong (loop at line {loop.loc.line if loop.loc else '?'})"
        b = Buffer(rep.name or (origin.kind if origin else "arg"), origin.loc.line if origin and origin.loc else 0,
                   t.space.name, t.shape, t.dtype.name, copies, copies * size, start, max(end, start + 1), note,
                   loc=origin.loc if origin else None, values=[v.id for v in vals],
                   parity=pong[1] if pong else None, parity_loop=pong[0] if pong else None)
        buffers.append(b)
        for v in vals:
            of[v.id] = b
    # the 950's on-chip hand-off slots: buffers of the receiving core for the whole program
    for ch in slots:
        space = "UB" if ch.dst == "aiv" else "L1"
        rows = ch.tile.shape[0] if space == "L1" or ch.rows == "whole" else (ch.tile.shape[0] + 1) // 2
        one = tile_bytes(TileType(ch.tile.dtype, L1, ch.tile.shape)) if space == "L1" else \
            ch.tile.nbytes * rows // ch.tile.shape[0]
        size = _align(one, platform.align(space))
        buffers.append(Buffer(f"slots {ch.name}", ch.loc.line if ch.loc else 0, space,
                              (rows,) + tuple(ch.tile.shape[1:]), ch.tile.dtype.name, ch.depth, ch.depth * size, 0,
                              lv.n + 1, "on-chip hand-off slots", loc=ch.loc))
    # matmul staging pieces
    outs = {}
    for op in walk(body):
        if op.kind != "mma":
            continue
        p = lv.pos[id(op)]
        rt = op.results[0].type
        m, n = rt.shape
        a_t, b_t = _mma_types(op)
        kk = a_t.shape[1]
        inb = max(1, a_t.dtype.bits // 8)
        bm, bn, bk = plan_mma(m, n, kk, inb, platform)
        line = op.loc.line if op.loc else 0
        pieces = [("L0A", "a", (bm, bk), a_t.dtype.name, bm * bk * inb),
                  ("L0B", "b", (bk, bn), b_t.dtype.name, bk * bn * inb)]
        notes = staged.get(id(op), [])
        end = p + 1
        if "out" in notes:
            pieces.append(("L0C", "c", (bm, bn), rt.dtype.name, bm * bn * 4))
            if op.results[0].id in skip:      # no buffer of its own: it stays in the pieces until its last store
                end = max(end, lv.end.get(op.results[0].id, end))
                if l0c_bytes(m, n) > 2 * _align(bm * bn * 4, platform.align("L0C")):
                    outs[op.results[0].id] = (bm, bn)
        kpiece = min(_align(kk, 16), 256)
        for which, piece, tt in (("a", (bm, kpiece), a_t), ("b", (kpiece, bn), b_t)):
            if which in notes:
                pieces.append(("L1", which + ".stream", piece, tt.dtype.name, piece[0] * piece[1] * inb))
        for space, tag, shape, dt, nb in pieces:
            if space not in spaces:
                continue
            size = _align(nb, platform.align(space))
            what = "streamed operand staging" if space == "L1" else "ping-pong base tile"
            buffers.append(Buffer(f"mma@{line}.{tag}", line, space, shape, dt, 2, 2 * size, p,
                                  end if space == "L0C" else p + 1, what, loc=op.loc))
        mmas.append(MmaPlan(line, bm, bn, bk, 2 * bm * bk * inb, 2 * bk * bn * inb, 2 * bm * bn * 4))
    out = {}
    for space in spaces:
        mine = [b for b in buffers if b.space == space]
        _assign(mine, platform.align(space))
        out[space] = _space_plan(space, mine, platform.capacity(space), lv.n)
    return out, mmas, of, outs


def _leaves_by_store(user: Op, lv: Liveness) -> bool:
    """A user of an mma result that only moves it out of L0C: a store, or a ``dequant`` only stores read (the
    fixpipe converts each piece as it writes it)."""
    if user.kind == "dequant":
        after = lv.users.get(user.results[0].id, [])
        return bool(after) and all(u.kind == "store" for u in after)
    return user.kind == "store"


def _streamed_if_results(op: Op, lv: Liveness):
    """(result, [(arm yield, its mma op), ...]) of an ``if`` whose tile result only leaves the cube (every user a
    store) and whose every arm yields, read by that yield only, an mma result (no acc) or a ``dequant`` of one
    read by the dequant only: the arms' results stream out of L0C as one result would (the chip's fixpipe
    writes either matmul's base tiles out, converting each as it goes), no resident score block."""
    found = []
    for i, r in enumerate(op.results):
        users = lv.users.get(r.id, [])
        if not r.is_tile or not users or not all(u.kind == "store" for u in users):
            continue
        arms = [(y, _streamed_mma_of(y, lv)) for y in (arm.ops[-1].args[i] for arm in op.blocks)]
        if len(arms) == 2 and all(mma is not None and _only_use(y, lv, "yield") for y, mma in arms):
            found.append((r, arms))
    return found


def _streamed_mma_of(y, lv: Liveness):
    """The mma op (no acc) whose result ``y`` is, directly or through a ``dequant`` that is its only reader;
    None otherwise."""
    if y.owner is not None and y.owner.kind == "dequant" and _only_use(y.owner.args[0], lv, "dequant"):
        y = y.owner.args[0]
    if y.owner is not None and y.owner.kind == "mma" and not y.owner.attrs.get("acc"):
        return y.owner
    return None


def _share_loop(op: Op, groups: _Groups, lv: Liveness):
    body = op.blocks[0]
    yields = body.ops[-1].args
    for arg, init, y, r in zip(body.args[1:], op.args[3:], yields, op.results):
        if not arg.is_tile:
            continue
        groups.union(arg, r)
        if _only_use(init, lv, "for") and _materialises(init):
            groups.union(init, arg)
        # (an arg the yield also passes on to another slot, a pipelined loop's shift register, is read at the
        # loop's end, after y is made: y cannot take its buffer)
        passed_on = any(a is arg for a, slot in zip(yields, body.args[1:]) if slot is not arg)
        if y is not arg and not passed_on and _materialises(y) and lv.block_of.get(id(y.owner)) is body \
                and _only_use(y, lv, "yield") and _last_read_before(arg, y, lv):
            groups.union(y, arg)
            # the chain that makes y from arg in place (acc = acc * alpha; acc = acc + o): each link the only
            # reader of the one before, same size and width, made after arg's last read
            ends = [arm.ops[-1].args[y.owner.results.index(y)] for arm in y.owner.blocks] \
                if y.owner.kind == "if" else [y]
            for z in ends:   # (an if's arm yields join its result, see share_groups)
                if z is not y and not (_only_use(z, lv, "yield") and _materialises(z)):
                    continue
                while z.owner is not None and z.owner.kind in ("ewise", "cast"):
                    x = next((a for a in z.owner.args if a.is_tile and a.type.nbytes == z.type.nbytes
                              and a.type.dtype.bits == z.type.dtype.bits), None)
                    if x is None or x is arg or not _materialises(x) or x.owner.kind == "if" \
                            or lv.block_of.get(id(x.owner)) is not lv.block_of.get(id(z.owner)) \
                            or len(lv.users.get(x.id, [])) != 1 or not _last_read_before(arg, x, lv):
                        break
                    groups.union(x, arg)
                    z = x


def _materialises(v: Value) -> bool:
    """Values computed into a buffer by their own op (an ``if`` result is its arms' buffer; an assembled
    row-chunk loop's output counts too: its chunks are written into it row by row)."""
    return v.owner is not None and (v.owner.kind in _INPLACE or v.owner.kind == "if"
                                    or (v.owner.kind == "for" and "chunk" in v.owner.attrs))


def _only_use(v: Value, lv: Liveness, kind: str) -> bool:
    users = lv.users.get(v.id, [])
    return len(users) == 1 and users[0].kind == kind


def _last_read_before(arg: Value, y: Value, lv: Liveness) -> bool:
    """No read of ``arg`` (direct, or through a pure vector op whose result is read later) comes after ``y`` is
    made (a row-chunk loop's output is made at the loop's end; its chunks read the rows they write)."""
    limit = lv.def_pos[y.id]
    if y.owner is not None and y.owner.kind == "if":   # made when its arms end
        limit = max([limit] + [lv.pos[id(o)] for b in y.owner.blocks for o in walk(b)])

    def last_read(v: Value, seen) -> int:
        out = -1
        for u in lv.users.get(v.id, []):
            if u.kind == "yield":
                continue
            p = lv.pos[id(u)]
            if u.defn.pure and u.results and u.results[0].id not in seen:
                seen.add(u.results[0].id)
                p = max(p, last_read(u.results[0], seen))
            out = max(out, p)
        return out

    return last_read(arg, {y.id}) <= limit


# ------------------------------------------------------------------ ping-pong copies

def _insert_pings(body: Block) -> dict:
    """id(loop) -> (loop, ping Value, its ops) for every innermost loop with a constant positive step that
    moves UB data (a load into UB or a store from it): the body starts with ping = ((iv - lo) // step) % 2."""
    out = {}
    for op in walk(body):
        if op.kind != "for" or any(o.kind == "for" for o in walk(op.blocks[0])):
            continue
        lo, _, step = op.args[:3]
        if not (isinstance(step.const, int) and step.const > 0):
            continue
        if not any(o.kind in ("load", "store") and _moves_ub(o) for o in walk(op.blocks[0])):
            continue
        loop_body = op.blocks[0]
        ops: list = []

        def sbin(kind, a, b, name=None):
            if not isinstance(b, Value):
                c = Op("const", [], [Value(INDEX, const=b)], {"value": b}, (), op.loc, None)
                ops.append(c)
                b = c.result
            o = Op("sbin", [a, b], [Value(INDEX, name)], {"op": kind}, (), op.loc, None)
            ops.append(o)
            return o.result

        k = loop_body.args[0] if lo.const == 0 else sbin("sub", loop_body.args[0], lo)
        ping = sbin("mod", sbin("floordiv", k, step), 2, "ping")
        loop_body.ops[0:0] = ops
        out[id(op)] = (op, ping, ops)
    return out


def _stage_spans(members: dict, skip: set, lv: Liveness, body: Block) -> dict:
    """root -> the span of the pipelined loop whose body makes all its values (UB buffers only): the stages of
    one step run beside the other steps' stages on other pipes, so a buffer of one stage must not take the
    address of another's (program order says they are disjoint; the pipes do not)."""
    inside, span = _loop_bodies([op for op in walk(body) if op.kind == "for" and op.attrs.get("stages", 1) > 1], lv)
    out = {}
    for root, vals in members.items():
        vals = [v for v in vals if v.id not in skip]
        if not vals or vals[0].type.space is not UB:
            continue
        loops = {inside.get(id(lv.def_op.get(v.id))) for v in vals}
        if len(loops) == 1 and None not in loops:
            out[root] = span[id(loops.pop())]
    return out


def _loop_bodies(loops: list, lv: Liveness) -> tuple:
    """({id(op): the first of ``loops`` whose body holds it}, {id(loop): its (start, end) positions})."""
    inside, span = {}, {}
    for loop in loops:
        ops = list(walk(loop.blocks[0]))
        for o in ops:
            inside.setdefault(id(o), loop)
        span[id(loop)] = (lv.pos[id(loop)], max(lv.pos[id(o)] for o in ops) + 1)
    return inside, span


def _remove_pings(pings: dict) -> None:
    for loop, _, ops in pings.values():
        body = loop.blocks[0]
        drop = {id(o) for o in ops}
        body.ops = [o for o in body.ops if id(o) not in drop]


def _moves_ub(op: Op) -> bool:
    t = (op.results[0] if op.kind == "load" else op.args[-1]).type
    return isinstance(t, TileType) and t.space is UB


def _ping_pong_groups(members: dict, skip: set, lv: Liveness, pings: dict) -> dict:
    """root -> (loop, ping, (start, end)) for the UB buffers that alternate two copies in one of ``pings``'
    loops: every value made by an op of the loop's body and read only there (never carried out by its
    yield), and one of them a load's result or a store's source. A group made in place over such a
    buffer's value read for the last time (same size and width) joins that buffer (``members`` is merged):
    the in-place chain of a loaded tile keeps one address, the iteration's copy. They live over the whole
    loop."""
    if not pings:
        return {}
    inside, span = _loop_bodies([loop for loop, _, _ in pings.values()], lv)
    local = {}                   # root -> (loop, its values): the groups made and read in one iteration
    for root, vals in members.items():
        vals = [v for v in vals if v.id not in skip]
        if not vals or vals[0].type.space is not UB:
            continue
        loops = {id(inside.get(id(lv.def_op.get(v.id)))) for v in vals}
        loop = inside.get(id(lv.def_op.get(vals[0].id)))
        if loop is None or len(loops) != 1:
            continue
        y = loop.blocks[0].ops[-1]
        if all(inside.get(id(u)) is loop and u is not y for v in vals for u in lv.users.get(v.id, [])):
            local[root] = (loop, vals)
    root_of = {v.id: root for root, (_, vals) in local.items() for v in vals}
    ponged = {root for root, (_, vals) in local.items()
              if any((v.owner is not None and v.owner.kind == "load")
                     or any(u.kind == "store" and u.args[-1] is v for u in lv.users.get(v.id, [])) for v in vals)}
    chain = {root: root for root in ponged}   # a ponged group -> the buffer it shares
    grown = True
    while grown:                 # in-place successors of a ponged buffer's values take its copy
        grown = False
        for root, (loop, vals) in local.items():
            if root in chain:
                continue
            for v in vals:
                op = lv.def_op.get(v.id)
                src = next((a for a in (op.args if op is not None and op.kind in _INPLACE else ())
                            if a.is_tile and root_of.get(a.id) in chain and local[root_of[a.id]][0] is loop
                            and lv.end.get(a.id) == lv.def_pos[v.id] and a.type.nbytes == v.type.nbytes
                            and a.type.dtype.bits == v.type.dtype.bits), None)
                if src is not None:
                    chain[root] = chain[root_of[src.id]]
                    grown = True
                    break
    for root, head in chain.items():
        if root != head:
            members[head] += members.pop(root)
    return {head: (local[head][0], pings[id(local[head][0])][1], span[id(local[head][0])]) for head in ponged}


def _mma_sources(op: Op):
    """(operand, the L1 tile staged into L0, or None for a GM window operand)."""
    tiles = iter(op.args)
    for which in ("a", "b"):
        if which in op.windows:
            yield which, None
            continue
        v = next(tiles)
        if v.owner is not None and v.owner.kind == "copy" and v.owner.attrs.get("staged"):
            yield which, v.owner.args[0]


def _mma_types(op: Op):
    tiles = iter(op.args)
    out = []
    for which in ("a", "b"):
        w = op.windows.get(which)
        out.append(TileType(w.tensor.type.dtype, L1, w.shape) if w is not None else next(tiles).type)
    return out


def _origin(v: Value, lv: Liveness):
    op = lv.def_op.get(v.id)
    if op is None:
        init = lv.carried_from.get(v.id)
        op = init.owner if init is not None else None
    return op


def _assign(buffers: list, align: int) -> None:
    """First-fit addresses in order of first use: a buffer that may work in place over an operand takes that
    operand's address when it is free; otherwise the lowest aligned address free over its whole life (an
    in-place candidate's range counts as taken unless the buffer lands exactly on it)."""
    placed: list[Buffer] = []
    for b in sorted(buffers, key=lambda b: (b.start, -b.bytes)):
        live = [x for x in placed if _overlap(x, b) or _touching(x, b)]

        def free(addr: int) -> bool:
            for x in live:
                identical = _touching(x, b) and not _overlap(x, b) and x.offset == addr
                if not identical and addr < x.offset + x.bytes and x.offset < addr + b.bytes:
                    return False
            return True

        candidates = [x.offset for x in live if _touching(x, b) and not _overlap(x, b)]
        addr = next((a for a in candidates if free(a)), None)
        if addr is None:
            addr = 0
            for lo, hi in sorted((x.offset, x.offset + x.bytes) for x in live):
                if addr + b.bytes <= lo and free(addr):
                    break
                addr = max(addr, (hi + align - 1) // align * align)
            while not free(addr):
                addr += align
        b.offset = addr
        placed.append(b)


def _touching(x: Buffer, b: Buffer) -> bool:
    return x.end == b.start or b.end == x.start


def _overlap(x: Buffer, b: Buffer) -> bool:
    """Whether two buffers may not share addresses. A buffer that starts where another's last read is (an op
    writing its result over an operand it reads for the last time) may take its place only when both have
    the same size and element width: the vector unit works in place on identical ranges, never on a partial
    overlap (a widening cast or a row reduction must not write over its source)."""
    if x.start < b.end and b.start < x.end:
        return True
    touching = x.end == b.start or b.end == x.start
    return touching and (x.bytes != b.bytes or _width(x) != _width(b))


def _width(b: Buffer) -> int:
    from ..types import DTYPES

    return DTYPES[b.dtype].bits if b.dtype in DTYPES else 0


def _space_plan(space: str, buffers: list, capacity: int, n: int) -> SpacePlan:
    peak = max((b.offset + b.bytes for b in buffers), default=0)
    # the busiest point: where the live buffers add up to most
    best, best_pos = -1, 0
    for p in sorted({b.start for b in buffers}):
        total = sum(b.bytes for b in buffers if b.start <= p < b.end)
        if total > best:
            best, best_pos = total, p
    live = sorted((b for b in buffers if b.start <= best_pos < b.end), key=lambda b: -b.bytes)
    return SpacePlan(space, capacity, peak, live, sorted(buffers, key=lambda b: b.offset))


def check_plan(plan: MemoryPlan, kernel: Kernel) -> None:
    """Raise ``BudgetError`` for the first space whose plan does not fit, at the line of its largest buffer."""
    for name, su in plan.spaces.items():
        if not su.fits:
            where = su.buffers[0].loc if su.buffers and su.buffers[0].loc is not None else kernel.loc
            raise BudgetError(f"kernel {kernel.name!r} does not fit {name} of {plan.platform}: "
                              f"{su.peak} bytes needed at peak, {su.capacity} available",
                              plan.table(only=name), plan, where)
