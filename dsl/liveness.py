"""Live ranges of IR values over a structured block: the positions memory planning and row chunking read.

Model
-----
Ops are numbered in program order, nested blocks inline (a loop's body after
the ``for``, an ``if``'s arms after the ``if``). A value lives from the
position of its definition to its last use; a value used inside a loop it
was defined outside of lives to that loop's end (the body reads it on every
iteration), and a loop's body arguments live through the whole loop. A
loop's results exist from the loop's end (they share the carried values'
storage). Intervals are half-open: an op may reuse the storage of an operand
it reads for the last time (Ascend vector ops work in place).
"""

from __future__ import annotations

from .ir import Block, Op, Value

__all__ = ["Liveness"]


class Liveness:
    """Program positions and live ranges over the structured IR."""

    def __init__(self, body: Block):
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
        self._number(body, [])

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
                for a, init in zip(body.args[1:], op.args[3:]):
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
