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

Op catalogue (``OPS``; the verifier in ``verify.py`` states what is legal):

scalar (pipe S, any scope)
  const, sbin(op), sun(op), scast, sselect, sload (a scalar read of a GM
  tensor element), dim (a GM tensor's runtime extent), block_idx, block_num,
  subblock_idx, check (a runtime bound assertion)
tiles
  load   GM window -> L1 (cube, MTE2) or UB (vector, MTE2)
  store  UB tile -> GM (vector, MTE3) or L0C tile -> GM (cube, FIX, may cast)
  copy   on-chip move: L1->L0A/L0B (MTE1), L0C->UB (FIX, 950), UB->L1 (MTE3, 950)
  handoff  a value crossing cube<->vector; lowered to workspace traffic on A2
  mma    matmul into L0C (cube, M); operands L0A/L0B, L1 (staged) or GM (streamed)
  create (zeros/full), iota, ewise(op) (elementwise, incl. compare and select),
  cast, reduce(op) (per-row max/sum/min), expand (rank-1 -> rank-2 broadcast view)
control
  for, if, yield
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Iterator

from .types import L0A, L0B, L0C, L1, UB, ScalarType, TensorType, TileType

__all__ = ["Loc", "Value", "Op", "Block", "Param", "Kernel", "OPS", "pipe_of", "walk"]


@dataclass(frozen=True)
class Loc:
    filename: str
    line: int
    col: int = 0
    text: str = ""

    def __str__(self) -> str:
        return f"{self.filename}:{self.line}"


_ids = itertools.count()


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


# kind -> category; categories: scalar, tile, control
OPS = {
    "const": "scalar", "sbin": "scalar", "sun": "scalar", "scast": "scalar", "sselect": "scalar",
    "sload": "scalar", "dim": "scalar", "block_idx": "scalar", "block_num": "scalar",
    "subblock_idx": "scalar", "check": "scalar",
    "load": "tile", "store": "tile", "copy": "tile", "handoff": "tile", "mma": "tile", "create": "tile",
    "iota": "tile", "ewise": "tile", "cast": "tile", "reduce": "tile", "expand": "tile",
    "for": "control", "if": "control", "yield": "control",
}


class Op:
    __slots__ = ("kind", "operands", "results", "attrs", "blocks", "loc", "scope")

    def __init__(self, kind: str, operands=(), results=(), attrs=None, blocks=(), loc: Loc | None = None,
                 scope: str | None = None):
        if kind not in OPS:
            raise ValueError(f"unknown IR op kind {kind!r}")
        self.kind = kind
        self.operands: list[Value] = list(operands)
        self.results: list[Value] = list(results)
        self.attrs: dict = dict(attrs or {})
        self.blocks: list[Block] = list(blocks)
        self.loc = loc
        self.scope = scope
        for r in self.results:
            r.owner = self

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

    def ops(self) -> Iterator[Op]:
        return walk(self.body)

    def __str__(self) -> str:
        from .printer import format_kernel

        return format_kernel(self)


def walk(block: Block) -> Iterator[Op]:
    """All ops of a block and its nested blocks, in program order."""
    for op in block.ops:
        yield op
        for b in op.blocks:
            yield from walk(b)


def pipe_of(op: Op) -> str:
    """The hardware pipe that executes an op (the cost model's unit of time)."""
    k = op.kind
    if OPS[k] == "scalar" or OPS[k] == "control":
        return "S"
    if k == "load":
        return "MTE2"
    if k == "store":
        return "FIX" if op.operands[-1].type.space is L0C else "MTE3"
    if k == "copy":
        src, dst = op.operands[0].type.space, op.results[0].type.space
        if src is L1 and dst in (L0A, L0B):
            return "MTE1"
        if src is L0C:
            return "FIX"
        if src is UB:
            return "MTE3"
        return "MTE2"
    if k == "handoff":
        return "FIX" if op.operands[0].type.space is L0C else "MTE3"
    if k == "mma":
        return "M"
    if k == "expand":
        return "S"
    return "V"


def is_on_chip(space) -> bool:
    return space in (L1, L0A, L0B, L0C, UB)
