"""split_cv: the sequential kernel becomes the programs of a core group (one AIC, one AIV run by both AIVs).

Model
-----
The kernel is written in sequential order: cube sections and vector sections
interleave in one program. The chip runs it as separate programs, one per
core type, that meet only where a value crosses. This pass builds them:

* ``program aic`` holds the cube tile ops, ``program aiv`` the vector tile
  ops; control flow and scalar work both need are duplicated (a scalar never
  depends on a tile, so both programs can compute every scalar; each
  program's dead scalars are dropped). Loop-carried values and branch results
  go to the program whose core type holds them (scalars to both).
* Every value that crosses (the builder's ``handoff`` ops, and on targets with
  on-chip paths the ``copy`` L0C->UB / UB->L1) becomes a **data channel**: a
  ``send`` in the producer's program where the value crosses, a ``recv`` in
  the consumer's. The receiver's valid extents are the value's, computed from
  the (duplicated) scalars of its own program. A hand-off of a tile the kernel
  marked ``through_gm`` gives its channel the GM route (place_handoffs routes
  the others by target).
* A GM tensor that one side writes and the other reads or writes (a kernel
  that hands data through its own GM buffer) gets an **order channel**: the
  spans of consecutive accesses by one side, in the block that holds them all,
  are ordered after the previous span of the other side (``attrs["channels"]``
  on the span's first and last op; insert_sync turns them into flags).
* **Rows (the merged model).** A kernel that does not call ``subblock_idx()``
  writes each vector section for the group's rows at once; the AIV program is
  run by both vector cores, each on its half. A row analysis classes every
  vector tile as *split* (its rows, dim 0 of a rank-2 tile or the elements of
  a rank-1 row vector, are divided: AIV k owns rows [k*H, k*H+H) of a
  capacity of C rows, H = ceil(C/2)) or *whole* (a column vector used as
  ``v[None, :]``, a broadcast row, and everything computed from them: both AIVs
  hold all of it). Split tiles get capacity H; their row starts and valid
  counts come from ``subblock_idx()`` (the offset ``min(k*H, valid)``, the
  count ``min(valid - offset, H)``), applied where rows enter (create, iota,
  load, recv) and leave (store, send). A whole tile stored to GM is stored by
  AIV 0 only; a whole tile sent to the cube is written by AIV 0 only.
* A kernel that calls ``subblock_idx()`` splits rows itself: each vector
  section (a loop over the sub-blocks in the sequential IR) becomes its body,
  the sub-block index being the AIV's own.
* A one-sided kernel (cube only or vector only) becomes one program.

Invariants
----------
* Each program reads only kernel arguments and its own values; an op runs in
  exactly one program (scalars and control flow: in each that needs them).
* Every data channel has exactly one send and one recv, in control flow that
  both programs share (the same loops and branches), so both execute equally
  often; the same holds for the two spans of an order channel.
* Numbers are unchanged: the programs compute what the sequential kernel
  computes, split by rows only where every op is row-local.
"""

from __future__ import annotations

from dataclasses import replace

from ..errors import CompilationError
from ..ir import Block, Channel, Kernel, Op, Value, clone_block, clone_op, core_of_space, walk
from ..shapes import ValidExtents
from ..types import BOOL, INDEX, UB, TileType
from .simplify import simplify_block

__all__ = ["split_cv", "RowClasses"]

_SCOPE = {"aic": "cube", "aiv": "vector"}


def split_cv(kernel: Kernel, platform) -> Kernel:
    if kernel.kind != "mixed":
        vmap: dict = {}
        body = clone_block(kernel.body, vmap)
        prog = Op("program", [], [], {"core": kernel.kind}, [body], kernel.loc, None)
        return replace(kernel, body=Block(ops=[prog]), channels=[])
    return _Splitter(kernel, platform).run()




# ------------------------------------------------------------------ the row analysis

class RowClasses:
    """Union-find over the vector tiles of a kernel (or of one program): ``split(v)`` is True when v's rows are
    divided between the AIVs, False when both hold all of it (see the module docstring); chunk_rows reads
    the same classes as "rows can be taken in chunks" / "computed whole"."""

    def __init__(self, kernel_or_block):
        self.parent: dict[int, int] = {}
        self.whole: set[int] = set()
        body = kernel_or_block.body if isinstance(kernel_or_block, Kernel) else kernel_or_block
        for op in walk(body):
            self._op(op)

    def _find(self, x: int) -> int:
        p = self.parent.setdefault(x, x)
        while p != x:
            self.parent[x] = self.parent.setdefault(p, p)
            x, p = p, self.parent[p]
        return x

    def _union(self, a: Value, b: Value):
        ra, rb = self._find(a.id), self._find(b.id)
        if ra != rb:
            self.parent[ra] = rb
            if ra in self.whole:
                self.whole.add(rb)

    def _make_whole(self, v: Value):
        self.whole.add(self._find(v.id))

    def _op(self, op: Op):
        k = op.kind
        res = op.results[0] if op.results else None
        if k == "ewise":
            for o in op.args:
                if not o.is_tile:
                    continue
                if o.type.rank == res.type.rank == 2 and o.type.shape[0] == 1 and res.type.shape[0] != 1:
                    self._make_whole(o)
                else:
                    self._union(o, res)
        elif k in ("cast", "reduce", "gather"):
            self._union(op.args[0], res)
        elif k == "expand":
            if op.attrs["axis"] == 1:
                self._union(op.args[0], res)
            else:
                self._make_whole(op.args[0])
                self._make_whole(res)
        elif k == "for":
            body = op.blocks[0]
            ys = body.ops[-1].args
            for arg, init, y, r in zip(body.args[1:], op.args[3:], ys, op.results):
                if arg.is_tile and arg.type.space is UB:
                    self._union(arg, init)
                    self._union(arg, y)
                    self._union(arg, r)
        elif k == "if":
            for i, r in enumerate(op.results):
                if r.is_tile and r.type.space is UB:
                    for arm in op.blocks:
                        self._union(r, arm.ops[-1].args[i])

    def split(self, v: Value) -> bool:
        return self._find(v.id) not in self.whole


# ------------------------------------------------------------------ the splitter

class _Program:
    """One program being built: its core type, value map and the helpers of its row split."""

    def __init__(self, core: str, halve: bool):
        self.core = core
        self.scope = _SCOPE[core]
        self.vmap: dict = {}
        self.halve = halve
        self.sb: Value | None = None
        self.body = Block()

    def m(self, v):
        return self.vmap.get(v.id, v) if isinstance(v, Value) else v


class _Splitter:
    def __init__(self, kernel: Kernel, platform):
        self.k = kernel
        self.platform = platform
        self.ve = ValidExtents.of(kernel)
        self.merged = kernel.subblocks == 0
        self.rows = RowClasses(kernel) if self.merged else None
        self.channels: list[Channel] = []
        self._by_op: dict[int, Channel] = {}
        #: (id(op), core) -> [(channel id, "produce"/"consume", "begin"/"end")]: the order-channel spans an op
        #: of the sequential kernel starts or ends in that core's program
        self.order_roles: dict[tuple, list] = {}
        self._order_channels()

    def run(self) -> Kernel:
        progs = [_Program("aic", False), _Program("aiv", self.merged)]
        aiv = progs[1]
        sb = Op("subblock_idx", [], [Value(INDEX, "sub")], {}, (), self.k.loc, None)
        aiv.body.ops.append(sb)
        aiv.sb = sb.result
        ops = []
        for p in progs:
            self._block(p, self.k.body, p.body, None)
            simplify_block(p.body)
            ops.append(Op("program", [], [], {"core": p.core}, [p.body], self.k.loc, None))
        return replace(self.k, body=Block(ops=ops), channels=self.channels)

    # -------------------------------------------------------------- walking
    def _mine(self, p: _Program, v: Value) -> bool:
        if not v.is_tile:
            return True
        return core_of_space(v.type.space) == p.core

    def _block(self, p: _Program, src: Block, dst: Block, keep):
        for op in src.ops:
            if op.kind == "yield":
                dst.ops.append(Op("yield", [p.m(op.args[i]) for i in keep], [], {}, (), op.loc, None))
                continue
            self._op(p, op, dst)

    def _op(self, p: _Program, op: Op, dst: Block):
        k = op.kind
        if k == "for":
            return self._for(p, op, dst)
        if k == "if":
            return self._if(p, op, dst)
        d = op.defn
        if d.category == "scalar":
            dst.ops.append(clone_op(op, p.vmap))
            return
        if k == "handoff" or (k == "copy" and _crosses(op)):
            return self._handoff(p, op, dst)
        if op.scope != p.scope:
            return
        new = self._clone_tile_op(p, op, dst)
        self._roles(p, op, new)

    def _for(self, p: _Program, op: Op, dst: Block):
        body = op.blocks[0]
        if op.attrs.get("subblock"):
            if p.core == "aiv":
                if len(body.args) > 1:
                    raise CompilationError("a vector section carries values between sub-blocks", op.loc)
                p.vmap[body.args[0].id] = p.sb
                start = len(dst.ops)
                for inner in body.ops[:-1]:
                    self._op(p, inner, dst)
                roles = self.order_roles.get((id(op), p.core))
                if roles and len(dst.ops) > start:
                    _mark_span(dst.ops[start:], roles)
            return
        keep = [i for i, init in enumerate(op.args[3:]) if self._mine(p, init)]
        iv = Value(INDEX, body.args[0].name)
        p.vmap[body.args[0].id] = iv
        args = [iv]
        for i in keep:
            a = body.args[1 + i]
            n = Value(self._retype(p, a), a.name)
            p.vmap[a.id] = n
            args.append(n)
        nb = Block(args=args)
        self._block(p, body, nb, keep)
        results = []
        for i in keep:
            r = op.results[i]
            n = Value(self._retype(p, r), r.name)
            p.vmap[r.id] = n
            results.append(n)
        lo, hi, step = (p.m(x) for x in op.args[:3])
        new = Op("for", [lo, hi, step, *[p.m(op.args[3 + i]) for i in keep]], results, dict(op.attrs), [nb],
                 op.loc, None)
        new.attrs["origin"] = op.attrs.get("origin", id(op))
        self._roles(p, op, new)
        dst.ops.append(new)

    def _if(self, p: _Program, op: Op, dst: Block):
        keep = [i for i, r in enumerate(op.results) if self._mine(p, r)]
        arms = []
        for arm in op.blocks:
            nb = Block()
            self._block(p, arm, nb, keep)
            arms.append(nb)
        results = []
        for i in keep:
            r = op.results[i]
            n = Value(self._retype(p, r), r.name)
            p.vmap[r.id] = n
            results.append(n)
        new = Op("if", [p.m(op.args[0])], results, dict(op.attrs), arms, op.loc, None)
        self._roles(p, op, new)
        dst.ops.append(new)

    def _roles(self, p: _Program, op: Op, new: Op | None):
        roles = self.order_roles.get((id(op), p.core))
        if roles and new is not None:
            new.attrs.setdefault("channels", []).extend(roles)

    # -------------------------------------------------------------- tile ops
    def _split(self, p: _Program, v: Value) -> bool:
        return p.halve and v.is_tile and v.type.space is UB and self.rows.split(v)

    def _retype(self, p: _Program, v: Value):
        if not self._split(p, v):
            return v.type
        t: TileType = v.type
        return t.with_(shape=(_half(t.shape[0]),) + t.shape[1:])

    def _rows(self, p: _Program, dst: Block, valid, cap: int, loc):
        """(row offset, row count) of this AIV's part of ``valid`` rows of a ``cap``-row tile."""
        h = _half(cap)
        off = _sbin(dst, "mul", p.sb, h, loc)
        roff = _sbin(dst, "min", off, valid, loc)
        n = _sbin(dst, "min", _sbin(dst, "sub", valid, roff, loc), h, loc)
        return roff, n

    def _clone_tile_op(self, p: _Program, op: Op, dst: Block):
        k = op.kind
        if k == "store" and p.halve:
            tile = op.args[-1]
            if not self._split(p, tile):
                return self._store_by_first_aiv(p, op, dst)
        new = clone_op(op, p.vmap)
        if not p.halve:
            dst.ops.append(new)
            return new
        for r, nr in zip(op.results, new.results):
            nr.type = self._retype(p, r)
        res = op.results[0] if op.results else None
        if k == "create" and self._split(p, res):
            n = new.attrs.get("nvalid", 0)
            valid = [p.m(x) for x in (op.args[1:] if n else res.type.shape)]
            _, rows = self._rows(p, dst, valid[0], res.type.shape[0], op.loc)
            new.args = [new.args[0]] + [_const(dst, x, op.loc) for x in (rows, *valid[1:])]
            new.attrs["nvalid"] = len(new.args) - 1
        elif k == "iota" and self._split(p, res):
            valid = p.m(op.args[1]) if op.attrs.get("nvalid") else res.type.shape[0]
            roff, rows = self._rows(p, dst, valid, res.type.shape[0], op.loc)
            new.args = [_const(dst, _sbin(dst, "add", p.m(op.args[0]), roff, op.loc), op.loc), _const(dst, rows, op.loc)]
            new.attrs["nvalid"] = 1
        elif k == "load" and self._split(p, res):
            new.windows["window"] = self._half_window(p, dst, new.windows["window"], None, op.loc)
        elif k == "store":
            tile = op.args[-1]
            valid = p.m(self.ve(tile)[0])
            new.windows["window"] = self._half_window(p, dst, new.windows["window"], valid, op.loc)
        dst.ops.append(new)
        return new

    def _half_window(self, p: _Program, dst: Block, w, valid, loc):
        d0 = w.dims[0]
        valid = d0.valid if valid is None else valid
        roff, rows = self._rows(p, dst, valid, d0.extent, loc)
        dims = list(w.dims)
        dims[0] = replace(d0, start=_sbin(dst, "add", d0.start, roff, loc), extent=_half(d0.extent), valid=rows)
        return replace(w, dims=dims)

    def _store_by_first_aiv(self, p: _Program, op: Op, dst: Block):
        """A store of a tile both AIVs hold: AIV 0 writes it. Returns the guarding ``if``, which carries the
        store's channel roles: the cross-core flags of a hand-off (mode 2: the AIC's wait counts a set from each
        AIV) stay outside the guard, so AIV 1 takes part in them too."""
        first = _sbin(dst, "eq", p.sb, 0, op.loc)
        then = Block()
        new = clone_op(op, p.vmap)
        then.ops += [new, Op("yield", [], [], {}, (), op.loc, None)]
        guard = Op("if", [first], [], {}, [then, Block(ops=[Op("yield", [], [], {}, (), op.loc, None)])], op.loc,
                   None)
        dst.ops.append(guard)
        return guard

    # -------------------------------------------------------------- hand-offs
    def _channel(self, op: Op) -> Channel:
        ch = self._by_op.get(id(op))
        if ch is None:
            src = op.args[0]
            vec_value = op.results[0] if op.results[0].type.space is UB else src
            src_core = core_of_space(src.type.space)
            rows = "split" if (self.merged and self.rows.split(vec_value)) else "whole"
            ch = Channel(len(self.channels), "", src_core, "data", op.loc, src.type, rows,
                         route="gm" if op.attrs.get("through_gm") else "", seq=self.position[id(op)])
            self.channels.append(ch)
            self._by_op[id(op)] = ch
        return ch

    def _handoff(self, p: _Program, op: Op, dst: Block):
        ch = self._channel(op)
        src, res = op.args[0], op.results[0]
        valid = []
        for x in self.ve(res):
            if isinstance(x, Value) and x.id not in p.vmap and x.owner is not None:
                raise CompilationError(f"the valid extents of {res!r} come from values the {p.core} program does "
                                       f"not compute", op.loc)
            valid.append(p.m(x))
        split = p.halve and ch.rows == "split"
        roff = 0
        if split:
            roff, rows = self._rows(p, dst, valid[0], src.type.shape[0], op.loc)
            valid = [rows, *valid[1:]]
        if p.core == ch.src:
            new = Op("send", [p.m(src), roff], [], {"channel": ch.id}, (), op.loc, p.scope)
            if p.halve and ch.rows == "whole":
                new.attrs["writer"] = "aiv0"
        else:
            t = res.type if p.core == "aic" else self._retype(p, res)
            out = Value(t, res.name)
            p.vmap[res.id] = out
            new = Op("recv", [roff, *valid], [out], {"channel": ch.id}, (), op.loc, p.scope)
        new.args = [_const(dst, a, op.loc) for a in new.args]
        dst.ops.append(new)

    # -------------------------------------------------------------- GM order
    def _order_channels(self):
        """Order channels for GM tensors both sides access (see the module docstring)."""
        accesses: dict[int, list] = {}
        parents: dict[int, tuple] = {}   # id(op) -> (parent op or None, block)
        order: dict[int, int] = {}

        def visit(block: Block, parent):
            for op in block.ops:
                order[id(op)] = len(order)
                parents[id(op)] = (parent, block)
                for t, mode in _gm_accesses(op):
                    accesses.setdefault(t.id, []).append((op, mode))
                for b in op.blocks:
                    visit(b, op)

        visit(self.k.body, None)
        self.position = order
        written = {tid for tid, acc in accesses.items() if any(m == "w" for _, m in acc)}
        for op in walk(self.k.body):
            if op.kind == "sload" and op.args[0].id in written:
                raise CompilationError(f"a scalar read of {op.args[0]!r}, a tensor this kernel writes: the cube "
                                       f"and vector programs both compute scalars, and such a read is not "
                                       f"ordered after the write; pass the value as a tile or split the kernel",
                                       op.loc)
        for tid, acc in accesses.items():
            sides = {_side_of(op) for op, _ in acc}
            if len(sides) < 2 or tid not in written:
                continue
            chains = [_ancestors(op, parents) for op, _ in acc]
            common = _common_block(chains)
            spans: list = []
            for (op, mode), chain in zip(acc, chains):
                anc = next(a for a, b in chain if b is common)
                side = _side_of(op)
                inner_sides = {_side_of(o) for o, _ in acc if any(a is anc for a, _ in _ancestors(o, parents))}
                if len(inner_sides) > 1 and anc is not op:
                    raise CompilationError(
                        f"the cube and the vector side both access {_tensor_name(acc)} inside the block at line "
                        f"{anc.loc.line} and also outside it: the CV split orders the GM accesses of the two sides "
                        f"only within one block; hand the data over as a tile", op.loc)
                if spans and spans[-1][0] == side:
                    if spans[-1][2] is not anc:
                        spans[-1][2] = anc
                else:
                    spans.append([side, anc, anc])
            for a, b in zip(spans, spans[1:]):
                ch = Channel(len(self.channels), "", a[0], "order", b[1].loc, seq=order[id(b[1])])
                self.channels.append(ch)
                for (side, first, last), role in ((a, "produce"), (b, "consume")):
                    self.order_roles.setdefault((id(first), side), []).append((ch.id, role, "begin"))
                    self.order_roles.setdefault((id(last), side), []).append((ch.id, role, "end"))


def _crosses(op: Op) -> bool:
    return core_of_space(op.args[0].type.space) != core_of_space(op.results[0].type.space)


def _half(cap: int) -> int:
    return (cap + 1) // 2


def _const(dst: Block, x, loc):
    if isinstance(x, Value):
        return x
    t = INDEX
    op = Op("const", [], [Value(t, const=x)], {"value": x}, (), loc, None)
    dst.ops.append(op)
    return op.result


def _sbin(dst: Block, kind: str, a, b, loc):
    """An index scalar op appended to ``dst`` (folded when both sides are ints)."""
    if not isinstance(a, Value) and not isinstance(b, Value):
        return {"mul": a * b, "min": min(a, b), "sub": a - b, "add": a + b, "eq": a == b}[kind]
    if kind == "add" and not isinstance(b, Value) and b == 0:
        return a
    if kind == "add" and not isinstance(a, Value) and a == 0:
        return b
    a, b = _const(dst, a, loc), _const(dst, b, loc)
    op = Op("sbin", [a, b], [Value(BOOL if kind == "eq" else INDEX)], {"op": kind}, (), loc, None)
    dst.ops.append(op)
    return op.result


def _mark_span(ops: list, roles: list):
    first, last = ops[0], ops[-1]
    for ch, role, end in roles:
        target = first if end == "begin" else last
        target.attrs.setdefault("channels", []).append((ch, role, end))


def _gm_accesses(op: Op):
    if op.kind == "load":
        yield op.windows["window"].tensor, "r"
    elif op.kind == "store":
        yield op.windows["window"].tensor, "w"
    elif op.kind in ("mma", "gather"):
        for w in op.windows.values():
            yield w.tensor, "r"


def _side_of(op: Op) -> str:
    return "aic" if op.scope == "cube" else "aiv"


def _ancestors(op: Op, parents: dict) -> list:
    """(op, block) pairs from ``op`` outwards: each ancestor op with the block that holds it."""
    out = []
    cur = op
    while cur is not None:
        parent, block = parents[id(cur)]
        out.append((cur, block))
        cur = parent
    return out


def _common_block(chains: list) -> Block:
    blocks = [[b for _, b in chain] for chain in chains]
    for b in blocks[0]:
        if all(any(b is x for x in other) for other in blocks[1:]):
            return b
    raise AssertionError("no common block")


def _tensor_name(acc) -> str:
    op = acc[0][0]
    w = next(iter(op.windows.values()))
    return repr(w.tensor)

