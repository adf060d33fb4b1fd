"""The tile IR: the one program representation every consumer reads.

Model
-----
A ``Kernel`` is a structured SSA program: a ``Block`` of ``Op``s whose operands
and results are ``Value``s. Control flow is structured: ``for`` and ``if`` ops
own nested blocks and carry values in and out explicitly (loop-carried values
are block arguments of the loop body and results of the ``for``; branch
results are ``yield``-ed by both arms), so every use of a value is dominated by
its definition and liveness is a walk over nested blocks.

Every op records where it came from (``Loc``: file, line, column and the source
line's text), the scope it was written in (``"cube"``, ``"vector"`` or
``None`` for scalar code that both core types run), and its pipe (MTE2, MTE1,
M, FIX, V, MTE3, S), so that the simulator, the cost model and the Ascend C
emitter all see the same facts.

Ops are defined in one table (``ops.OPS``: category, scopes, purity, pipe,
named operands, legality and valid-extent rules); ``verify.py`` states what
legal IR is as a whole.

Operands. ``Op.args`` are an op's plain operands (values); ``Op.windows`` its
GM-window operands by name (``Window``: the address description of a
rectangular region of a GM tensor, its values held once, here);
``Op.operands`` is every value the op reads (windows first), which is what
analyses walk. ``Op.map_values`` rewrites both.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Iterator

from .ops import OPS, opdef
from .types import L0A, L0B, L0C, L1, UB, ScalarType, TensorType, TileType

__all__ = ["Loc", "Value", "Op", "Block", "Param", "Kernel", "OPS", "pipe_of", "walk", "WDim", "Lookup", "Window",
           "is_on_chip", "Channel", "clone_op", "clone_block", "core_of_space"]


@dataclass(frozen=True)
class Loc:
    filename: str
    line: int
    col: int = 0
    text: str = ""

    def __str__(self) -> str:
        return f"{self.filename}:{self.line}"


_ids = itertools.count()


def max_value_id() -> int:
    """A number above the id of every value made so far in this process (it uses one id up)."""
    return next(_ids)


def reserve_ids(top: int) -> None:
    """Move the value-id counter past ``top``: values made after IR was loaded from another process (whose
    ids run up to ``top``) never share an id with a loaded value."""
    global _ids
    _ids = itertools.count(max(next(_ids), top + 1))


class Value:
    """An SSA value. ``name`` is the source variable it was bound to, when any."""

    __slots__ = ("id", "type", "name", "owner", "const")

    def __init__(self, type, name: str | None = None, owner: "Op | None" = None, const: Any = None):
        self.id = next(_ids)
        self.type = type
        self.name = name
        self.owner = owner
        self.const = const

    @property
    def is_tile(self) -> bool:
        return isinstance(self.type, TileType)

    @property
    def is_scalar(self) -> bool:
        return isinstance(self.type, ScalarType)

    @property
    def is_tensor(self) -> bool:
        return isinstance(self.type, TensorType)

    def __repr__(self) -> str:
        return f"%{self.name}.{self.id}" if self.name else f"%{self.id}"




@dataclass
class WDim:
    """One dimension of a GM window: element i is merged index ``start + i`` of a
    space of ``bound`` indices, decomposed mixed-radix by ``radices`` (outer to
    inner) and addressed with ``strides``. ``extent`` is the static capacity;
    ``valid`` the runtime count actually accessed."""

    start: Any
    bound: Any
    extent: int
    valid: Any
    radices: list
    strides: list
    lookups: list = None   # per radix: None, or a Lookup (an index read from a GM table: paged KV)

    def values(self) -> list:
        out = [self.start, self.bound, self.valid, *self.radices, *self.strides]
        for lk in self.lookups or ():
            if lk is not None:
                out += lk.values()
        return out

    def map(self, fn) -> "WDim":
        lookups = None if self.lookups is None else [None if lk is None else lk.map(fn) for lk in self.lookups]
        return WDim(_mapv(fn, self.start), _mapv(fn, self.bound), self.extent, _mapv(fn, self.valid),
                    [_mapv(fn, r) for r in self.radices], [_mapv(fn, s) for s in self.strides], lookups)


@dataclass
class Lookup:
    """An indirect digit: digit d of a merged dim addresses entry ``table[offset + d * stride]`` of a GM
    integer table, whose value (checked to lie in [0, bound)) is the index actually used (a paged KV cache:
    position p is row p % block_size of block ``block_table[b, p // block_size]``)."""

    table: Any
    offset: Any
    stride: Any
    bound: Any

    def values(self) -> list:
        return [self.table, self.offset, self.stride, self.bound]

    def map(self, fn) -> "Lookup":
        return Lookup(_mapv(fn, self.table), _mapv(fn, self.offset), _mapv(fn, self.stride), _mapv(fn, self.bound))


@dataclass
class Window:
    """A rectangular (rank 1 or 2) region of a GM tensor that a tile op reads or writes: element (i, j) is at
    ``offset + addr_0(start_0 + i) + addr_1(start_1 + j)`` of the flat tensor (see ``WDim``)."""

    tensor: Value
    offset: Any
    dims: list

    @property
    def shape(self) -> tuple:
        return tuple(d.extent for d in self.dims)

    def values(self) -> list:
        out = [self.tensor, self.offset]
        for d in self.dims:
            out += d.values()
        return out

    def map(self, fn) -> "Window":
        return Window(_mapv(fn, self.tensor), _mapv(fn, self.offset), [d.map(fn) for d in self.dims])


def _mapv(fn, x):
    return fn(x) if isinstance(x, Value) else x


class Op:
    """One IR operation: ``args`` (plain operands), ``windows`` (GM-window operands by name), results,
    attributes, nested blocks, source location and scope."""

    __slots__ = ("kind", "args", "windows", "results", "attrs", "blocks", "loc", "scope")

    def __init__(self, kind: str, operands=(), results=(), attrs=None, blocks=(), loc: Loc | None = None,
                 scope: str | None = None, windows: dict | None = None):
        opdef(kind)
        self.kind = kind
        self.args: list[Value] = list(operands)
        self.windows: dict[str, Window] = dict(windows or {})
        self.results: list[Value] = list(results)
        self.attrs: dict = dict(attrs or {})
        self.blocks: list[Block] = list(blocks)
        self.loc = loc
        self.scope = scope
        for r in self.results:
            r.owner = self

    @property
    def operands(self) -> list:
        """Every value the op reads: its windows' values (in window order), then its plain operands."""
        if not self.windows:
            return self.args
        out = [v for w in self.windows.values() for v in w.values() if isinstance(v, Value)]
        return out + self.args

    def map_values(self, fn) -> None:
        """Replace every operand value v (plain and inside windows) by fn(v)."""
        self.args = [fn(v) for v in self.args]
        if self.windows:
            self.windows = {k: w.map(fn) for k, w in self.windows.items()}

    @property
    def defn(self):
        return OPS[self.kind]

    @property
    def result(self) -> Value:
        return self.results[0]

    @property
    def pipe(self) -> str:
        return pipe_of(self)

    def __repr__(self) -> str:
        return f"<Op {self.kind} {self.attrs.get('op', '')} @{self.loc}>"


@dataclass
class Block:
    args: list[Value] = field(default_factory=list)
    ops: list[Op] = field(default_factory=list)

    def append(self, op: Op) -> Op:
        self.ops.append(op)
        return op


@dataclass(frozen=True)
class Param:
    name: str
    kind: str  # "tensor", "scalar", "constexpr"
    type: Any = None  # TensorType / ScalarType for runtime params
    value: Any = None  # the constexpr value


@dataclass
class Kernel:
    name: str
    params: list[Param]
    args: list[Value]            # the runtime params' values, in order
    body: Block
    loc: Loc
    target: str
    constexprs: dict = field(default_factory=dict)
    kind: str = "mixed"          # "mixed" (cube + vector), "aic" (cube only), "aiv" (vector only)
    #: 0: each ``with vector():`` section covers the rows of all vector cores of the group at once (the
    #: CV split divides them later); n > 0: the kernel uses subblock_idx() and each section is a loop over
    #: the group's n vector cores, one sub-block per iteration, each owning its own tiles
    subblocks: int = 0
    #: after split_cv: the one-way hand-offs between the programs of a core group (see ``Channel``)
    channels: list = field(default_factory=list)
    #: after place_handoffs: bytes of GM workspace one core group uses for its hand-off slots
    workspace_bytes: int = 0
    #: after place_handoffs: bytes per core group of every channel's slots as the simulator allocates them (the
    #: GM workspace, then the 950's on-chip slots)
    slot_area_bytes: int = 0
    #: after plan_memory: the memory plan (passes.plan_memory.MemoryPlan)
    memory: Any = None
    #: after insert_sync: {"events": event pairs, "barriers": PipeBarriers} it inserted
    sync_counts: dict = field(default_factory=dict)

    def ops(self) -> Iterator[Op]:
        return walk(self.body)

    def programs(self) -> dict:
        """After split_cv: core type ("aic" / "aiv") -> its program's block; before: {}."""
        return {op.attrs["core"]: op.blocks[0] for op in self.body.ops if op.kind == "program"}

    def __str__(self) -> str:
        from .printer import format_kernel

        return format_kernel(self)


@dataclass
class Channel:
    """A one-way hand-off between the AIC program and the AIV programs of a core group (after split_cv).

    ``kind`` "data": a tile crosses (the producer writes it into a slot, the consumer reads it; ``tile`` is
    its full type as the producer holds it, ``rows`` "split" when each AIV owns its rows of it, "whole" when
    both AIVs hold all of it). ``kind`` "order": no data, a GM tensor one side writes and the other reads
    (or writes) in program order, so the later access must wait for the earlier one. place_handoffs fills
    ``depth`` (slots), ``route`` and the slots' place in the workspace; insert_sync the flag ids."""

    id: int
    name: str
    src: str                      # producer core type: "aic" or "aiv"
    kind: str                     # "data" or "order"
    loc: Loc | None
    tile: Any = None              # TileType of a data channel
    rows: str = "split"
    depth: int = 1
    route: str = ""               # "gm" (workspace) or "onchip" (950 L0C->UB / UB->L1)
    slot_bytes: int = 0
    offset: int = 0               # byte offset of slot 0 in the group's workspace
    flags: dict = field(default_factory=dict)   # "ready" / "free" -> flag id
    seq: int = 0                  # position of the crossing in the sequential kernel (naming order)

    @property
    def dst(self) -> str:
        return "aiv" if self.src == "aic" else "aic"


def clone_op(op: Op, vmap: dict, blocks=()) -> Op:
    """A copy of ``op`` reading ``vmap``-mapped values (value id -> value; unmapped values are kept), with new
    result values recorded in ``vmap``."""
    def m(v):
        return vmap.get(v.id, v)

    results = [Value(r.type, r.name, const=r.const) for r in op.results]
    for r, n in zip(op.results, results):
        vmap[r.id] = n
    return Op(op.kind, [m(a) for a in op.args], results, dict(op.attrs), blocks, op.loc, op.scope,
              {k: w.map(m) for k, w in op.windows.items()})


def clone_block(block: Block, vmap: dict) -> Block:
    """A deep copy of ``block`` (new argument and result values, recorded in ``vmap``)."""
    args = []
    for a in block.args:
        n = Value(a.type, a.name)
        vmap[a.id] = n
        args.append(n)
    out = Block(args=args)
    for op in block.ops:
        out.ops.append(clone_op(op, vmap, [clone_block(b, vmap) for b in op.blocks]))
    return out


def walk(block: Block) -> Iterator[Op]:
    """All ops of a block and its nested blocks, in program order."""
    for op in block.ops:
        yield op
        for b in op.blocks:
            yield from walk(b)


def pipe_of(op: Op) -> str:
    """The hardware pipe that executes an op (the cost model's unit of time): the op table's rule."""
    return OPS[op.kind].pipe_of(op)


def core_of_space(space) -> str:
    """The core type that holds an on-chip space: "aiv" for UB, "aic" for L1/L0A/L0B/L0C."""
    return "aiv" if space is UB else "aic"


def is_on_chip(space) -> bool:
    return space in (L1, L0A, L0B, L0C, UB)
