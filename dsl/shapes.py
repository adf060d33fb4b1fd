"""Valid extents: the runtime shape of every tile value, as IR facts.

Model
-----
A tile's capacity shape is static (its ``TileType``); the extents actually
valid are runtime scalars. They are not stored: each op kind's rule in the op
table (``OpDef.valid``) derives its result's valid extents from its operands
(a load's from its window, a create's from its ``valid=`` operands, an mma's
from its operands' rows and columns, an elementwise op's from its first
operand not broadcast along each dim). Two structural rules complete it:

* a loop-carried tile keeps the valid extents of its initial value (the
  frontend checks at run time that what the body yields has them);
* an ``if`` result has the valid extents of the arm whose extents are defined
  before the ``if`` (the frontend checks that the arms agree).

An extent is an ``int`` or an INDEX ``Value``. Backends that keep runtime
shapes (numba) need these only where a tile crosses between programs; the CV
split, the row chunking, the Ascend C backend and the cost model read them
everywhere.

``ValidExtents`` memoises per value; build it over a whole kernel
(``ValidExtents.of(kernel)``) or feed it loops and branches as they are built
(the frontend).
"""

from __future__ import annotations

from .ir import Kernel, Op, Value, walk

__all__ = ["ValidExtents", "same_extents"]


class ValidExtents:
    def __init__(self):
        self._memo: dict[int, tuple] = {}
        self._carried: dict[int, Value] = {}     # loop body argument id -> its initial value
        self._branch: dict[int, tuple] = {}      # if result id -> (if op, result index)
        self._inside: dict[int, set] = {}        # id(if op) -> ids of values defined in its arms

    @classmethod
    def of(cls, kernel_or_block) -> "ValidExtents":
        ve = cls()
        body = kernel_or_block.body if isinstance(kernel_or_block, Kernel) else kernel_or_block
        for op in walk(body):
            if op.kind == "for":
                ve.add_loop(op)
            elif op.kind == "if":
                ve.add_if(op)
        return ve

    def carry(self, arg: Value, init: Value) -> None:
        """A loop body argument carrying ``init`` (registered before the body is built)."""
        self._carried[arg.id] = init

    def add_loop(self, op: Op) -> None:
        body = op.blocks[0]
        for arg, init in zip(body.args[1:], op.args[3:]):
            self._carried[arg.id] = init
        for r, init in zip(op.results, op.args[3:]):
            self._carried[r.id] = init

    def add_if(self, op: Op) -> None:
        for i, r in enumerate(op.results):
            self._branch[r.id] = (op, i)

    def __call__(self, v: Value) -> tuple:
        """The valid extents of tile value ``v`` (one per dim)."""
        got = self._memo.get(v.id)
        if got is not None:
            return got
        if v.id in self._carried:
            out = self(self._carried[v.id])
        elif v.id in self._branch:
            out = self._of_branch(*self._branch[v.id])
        elif v.owner is not None and v.owner.defn.valid is not None:
            out = tuple(v.owner.defn.valid(v.owner, self))
        else:
            out = tuple(v.type.shape)
        self._memo[v.id] = out
        return out

    def _of_branch(self, op: Op, i: int) -> tuple:
        inside = self._inside.get(id(op))
        if inside is None:
            inside = {r.id for b in op.blocks for o in walk(b) for r in o.results}
            inside |= {a.id for b in op.blocks for o in walk(b) for bb in o.blocks for a in bb.args}
            self._inside[id(op)] = inside
        candidates = []
        for arm in op.blocks:
            y = arm.ops[-1].args[i]
            ext = self(y)
            if not any(isinstance(e, Value) and e.id in inside for e in ext):
                return ext
            candidates.append(ext)
        from .errors import CompilationError

        raise CompilationError(f"the tile {op.results[i]!r} assigned in this if has valid extents computed inside "
                               f"both arms; compute its extents (valid=, ds(..., valid=)) before the if", op.loc)


def same_extents(a: tuple, b: tuple) -> bool:
    """Two extent tuples that are equal by construction (the same values or equal constants)."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, Value) or isinstance(y, Value):
            xv = x.const if isinstance(x, Value) and x.const is not None else x
            yv = y.const if isinstance(y, Value) and y.const is not None else y
            if isinstance(xv, Value) or isinstance(yv, Value):
                if xv is not yv:
                    return False
                continue
            if xv != yv:
                return False
        elif x != y:
            return False
    return True
