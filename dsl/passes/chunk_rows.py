"""chunk_rows: a run of row-local vector ops whose tiles do not fit UB is processed in row chunks.

Model
-----
Attention's vector stage holds tiles far larger than UB (a 16 x 8192 fp32
score block is 512 KB; UB is 192 KB): the chip's kernel processes such a
stage a few rows at a time. This pass does the same, as an IR rewrite every
backend follows (the one rule of "a tile over budget": the compiler chunks
row-local work; anything else over budget is a compile-time error with the
memory table, see plan_memory).

* A *vector pass* is a maximal run of consecutive row-local vector ops of one
  block of an AIV program (create, iota, load, store, elementwise, cast, row
  reductions, broadcasts; scalar ops in between do not break it). Each of its
  tiles is *row-wise* (its rows are independent: split.RowClasses) or *whole*
  (a column vector or broadcast row, and what is computed only from them).
* A pass whose tiles fit UB beside what stays resident is left alone.
  Otherwise its height R is the largest of 256, 128, ..., 1 rows (below the
  pass's row capacity H) with ``resident + R * bytes_per_row <= UB``, and the
  pass becomes ``for r0 in range(0, rows, R)`` over its valid rows:
  - its whole ops and the scalar work between its ops (address arithmetic,
    GM reads of tables, bound checks) move before the loop;
  - a row-wise tile defined before the pass is read as ``slice_rows(x, r0)``
    (a view of R rows);
  - a load or store of a row-wise tile moves its window's row start by r0
    and takes the chunk's rows; a gather takes the chunk's rows of its index
    tile and reads its table unchanged (a pass that also stores to that
    table is left whole);
  - a row-wise tile used after the pass is assembled in place: a full tile
    (``create`` without a fill) is carried through the loop and each chunk
    is written into its rows (``insert_rows``); later uses read it.
  - channel spans of ops inside move to the loop (the flags wrap all chunks);
    a span inside an ``if``'s arm keeps its condition (``span_guards``: its
    flags run under the same condition, so they meet the other side's, which
    stays inside the branch).
* A pass ends before a span that waits for the other side's data (a channel's
  consume begins) once one of its spans has handed data to the other side (a
  produce ended): the flags wrapping a chunk loop wait for all its inputs
  before its first chunk and hand over its outputs after the last, so a round
  trip inside one loop (V2 stores digits the cube multiplies, V3 reads the
  product back) would wait for data that the other side computes only from the
  loop's own outputs.

Invariants
----------
* Every row is computed by the same ops on the same values: results are bitwise
  those of the unchunked pass (the ops are row-local).
* The chunk loop's tiles have capacity R; only the assembled outputs and what
  lives across the pass keep their full size.
"""

from __future__ import annotations

from dataclasses import replace

from ..ir import Block, Kernel, Op, Value, clone_op
from ..liveness import Liveness
from ..shapes import ValidExtents
from ..types import BOOL, INDEX, UB, TileType
from .plan_memory import share_groups
from .split_cv import RowClasses

__all__ = ["chunk_rows", "ROW_LOCAL", "CHUNKS"]

#: vector op kinds a pass may hold (each row of the result depends on the same row of the operands only; a
#: gather's rows are those of its index tile, its table is read whole)
ROW_LOCAL = {"ewise", "cast", "reduce", "expand", "create", "iota", "load", "store", "gather"}
CHUNKS = (256, 128, 64, 32, 16, 8, 4, 2, 1)


def chunk_rows(kernel: Kernel, platform) -> Kernel:
    progs = kernel.programs()
    body = progs.get("aiv")
    if body is None:
        return kernel
    cap = platform.capacity("UB")
    rows = RowClasses(body)
    ve = ValidExtents.of(body)
    _blocks(body, body, rows, ve, cap)
    return kernel


def _blocks(block: Block, root: Block, rows, ve, cap):
    """Chunk the passes of ``block``, then those inside its remaining ops' blocks. Outer passes go first: an
    ``if`` whose arms are row-local work belongs to the pass around it (each chunk runs it), and chunking its
    arms on their own first would cut that pass in two around full-height tiles."""
    _passes(block, root, rows, ve, cap)
    for op in block.ops:
        if op.kind == "for" and "chunk" in op.attrs:
            continue   # a chunk loop made here: its body is already chunk-sized
        for b in op.blocks:
            _blocks(b, root, rows, ve, cap)


def _passes(block: Block, root: Block, rows, ve, cap):
    i = 0
    while i < len(block.ops):
        run = _pass_at(block, i, rows)
        if run is None:
            i += 1
            continue
        start, end, pass_ops = run
        new = _chunked(block, start, end, pass_ops, root, rows, ve, cap)
        if new is None:
            i = end + 1
            continue
        block.ops[start:end + 1] = new
        i = start + len(new)


def _row_local(op: Op) -> bool:
    return op.scope == "vector" and op.kind in ROW_LOCAL


def _member(op: Op, rows) -> bool:
    """Row-local vector work a pass may hold: any such op on row-wise tiles, and pure compute on whole tiles
    (a load or store of a whole tile ends the pass: it must not move across the chunks' GM accesses); an
    ``if`` whose arms hold only such work and scalars (it runs once per chunk: its row-wise ops on the chunk's
    rows, its whole compute, e.g. a (1, S2) column index expanded, and a print of a scalar, again on every
    chunk)."""
    if op.kind == "if":
        return all(_rowwise(r, rows) or not r.is_tile for r in op.results) and all(
            inner.kind == "yield" or inner.defn.category == "scalar" or (_member(inner, rows) and inner.kind != "if")
            or inner.kind == "device_print" and not inner.args[0].is_tile   # a scalar's print: once per chunk
            for arm in op.blocks for inner in arm.ops)
    if not _row_local(op):
        return False
    if op.kind in ("load", "store"):
        tile = op.results[0] if op.kind == "load" else op.args[-1]
        return _rowwise(tile, rows)
    return True


def _pass_at(block: Block, i: int, rows):
    """(first index, last index, the pass's ops) of the vector pass starting at op i, or None. The pass ends
    before a span that waits for the other side's data once a span has handed data to it (a round trip: see
    the module docstring)."""
    ops = block.ops
    if not _member(ops[i], rows):
        return None
    j, last, members, handed = i, i, [], False
    while j < len(ops):
        op = ops[j]
        if _member(op, rows):
            roles = [(role, end) for inner in _deep(op) for _, role, end in inner.attrs.get("channels", ())]
            if handed and ("consume", "begin") in roles:
                break
            handed = handed or ("produce", "end") in roles
            members.append(op)
            last = j
        elif op.defn.category != "scalar":   # scalars (and their checks) do not depend on tiles: they move ahead
            break
        j += 1
    return i, last, members


def _chunked(block, start, end, pass_ops, root, rows, ve, cap):
    stored = {op.windows["window"].tensor.id for op in pass_ops if op.kind == "store"}
    if any(op.kind == "gather" and op.windows["table"].tensor.id in stored for op in pass_ops):
        return None   # a gather of a tensor the pass also writes must keep its place among the stores
    split = [op for op in pass_ops if op.kind == "if" or op.results and _rowwise(op.results[0], rows)
             or op.kind == "store" and _rowwise(op.args[-1], rows)]
    if not [op for op in split if op.kind != "if"]:
        return None
    heights = {_height(inner) for op in split for inner in _deep(op)
               if inner.kind not in ("if", "yield") and inner.defn.category != "scalar" and _inner_rowwise(inner, rows)}
    if len(heights) != 1:
        return None
    height = heights.pop()
    in_pass = {r.id for op in pass_ops for r in op.results}
    later = _uses_after(block, end, root)
    outputs = [r for op in split for r in op.results if r.id in later]
    per_row, resident = _bytes(block, start, end, pass_ops, split, in_pass, outputs, root, rows)
    if per_row == 0 or resident + height * per_row <= cap:
        return None   # fits whole, or nothing would shrink (every tile of the pass is needed whole after it)
    chunk = next((r for r in CHUNKS if r < height and resident + r * per_row <= cap), 1)
    return _rewrite(block, start, end, pass_ops, split, outputs, chunk, rows, ve)


def _inner_rowwise(op: Op, rows) -> bool:
    v = op.results[0] if op.results else (op.args[-1] if op.args else None)
    return v is not None and _rowwise(v, rows)


def _deep(op: Op):
    yield op
    for b in op.blocks:
        for inner in b.ops:
            yield from _deep(inner)


def _rowwise(v: Value, rows) -> bool:
    return v.is_tile and v.type.space is UB and rows.split(v)


def _height(op: Op) -> int:
    v = op.results[0] if op.results else op.args[-1]
    return v.type.shape[0]


def _row_bytes(t: TileType) -> int:
    return (t.shape[1] if t.rank == 2 else 1) * max(1, t.dtype.bits // 8)


def _uses_after(block: Block, end: int, root: Block) -> set:
    """Ids of values read after op ``end`` of ``block`` (later ops of the block, its yield, and anything
    after the block in its program)."""
    used = set()
    for op in block.ops[end + 1:]:
        for o in _all_ops(op):
            used |= {v.id for v in o.operands}
    # a block's values are visible only inside it: its later ops and its yield cover every reader
    return used


def _all_ops(op: Op):
    yield op
    for b in op.blocks:
        for o in b.ops:
            yield from _all_ops(o)


def _bytes(block, start, end, pass_ops, split, in_pass, outputs, root, rows):
    """(bytes per row of the pass's chunked tiles, bytes resident while it runs)."""
    lv = Liveness(root)
    out_ids = {o.id for o in outputs}
    chunked = {r.id for op in split for inner in _deep(op) for r in inner.results
               if _rowwise(r, rows) and r.id not in out_ids and inner.kind != "expand"}
    per_row = sum(_row_bytes(v.type) for op in split for inner in _deep(op) for v in inner.results
                  if v.id in chunked)
    lo, hi = lv.pos[id(block.ops[start])], lv.pos[id(block.ops[end])]
    groups = share_groups(root, lv)
    resident: dict[int, int] = {}    # one buffer per group of values the memory plan shares (a carried
    for vid, v in lv.values.items():  # accumulator, its loop result and its branch results are one tile)
        if not (v.is_tile and v.type.space is UB) or vid in chunked:
            continue
        d, e = lv.def_pos.get(vid, 0), lv.end.get(vid, 0)
        if d <= hi and e > lo:
            op = lv.def_op.get(vid)
            if op is not None and op.kind == "expand":
                continue
            g = groups.find(vid)
            resident[g] = max(resident.get(g, 0), v.type.nbytes)
    return per_row, sum(resident.values())


def _rewrite(block, start, end, pass_ops, split, outputs, chunk, rows, ve):
    loc = pass_ops[0].loc
    span = block.ops[start:end + 1]
    members = {id(op) for op in split}
    before = [op for op in span if id(op) not in members]   # scalars and whole ops: once, before the loop
    pre: list[Op] = []
    # the pass's valid rows: those of its first row-wise value
    first = next(op for op in split if op.kind != "if")   # (an if may lead: e.g. the empty AIV copy of a cube if)
    ref = first.results[0] if first.results else first.args[-1]
    nrows = ve(ref)[0]
    nrows = nrows if isinstance(nrows, Value) else _const(pre, nrows, loc)
    # full tiles for the outputs, carried through the chunk loop
    fulls = []
    for v in outputs:
        ext = [x if isinstance(x, Value) else _const(pre, x, loc) for x in ve(v)]
        zero = _const(pre, 0.0 if v.type.dtype.is_float else 0, loc, float_=v.type.dtype.is_float)
        c = Op("create", [zero, *ext], [Value(v.type, v.name)], {"nvalid": len(ext), "uninit": True}, (), loc,
               "vector")
        pre.append(c)
        fulls.append(c.result)
    r0 = Value(INDEX, "r0")
    args = [r0] + [Value(v.type, v.name) for v in outputs]
    body = Block(args=args)
    vmap: dict[int, Value] = {}
    sliced: dict[int, Value] = {}

    def sbin(kind, a, b, t=INDEX):
        a = a if isinstance(a, Value) else _const(body.ops, a, loc)
        b = b if isinstance(b, Value) else _const(body.ops, b, loc)
        o = Op("sbin", [a, b], [Value(t)], {"op": kind}, (), loc, None)
        body.ops.append(o)
        return o.result

    def chunk_rows_of(valid):
        return sbin("min", sbin("max", sbin("sub", valid, r0), 0), chunk)

    spans, span_pipes, span_guards = [], {}, {}
    inner_defs = {r.id for op in split for inner in _deep(op) for r in inner.results}
    # row-wise tiles from before the pass: a view of this chunk's rows, taken once at the top of the chunk
    for op in split:
        for inner in _deep(op):
            for x in inner.args:
                if x.is_tile and x.id not in inner_defs and x.id not in vmap and _rowwise(x, rows):
                    n = chunk_rows_of(ve(x)[0])
                    t = x.type.with_(shape=(chunk,) + x.type.shape[1:])
                    sl = Op("slice_rows", [x, r0, n], [Value(t, x.name)], {"cap": chunk}, (), loc, "vector")
                    body.ops.append(sl)
                    vmap[x.id] = sl.result

    def emit(op: Op, dst: Block, guard: tuple = ()):
        for cid, role, end_ in op.attrs.get("channels", []):
            spans.append((cid, role, end_))
            span_pipes[cid] = op.pipe
            if guard:
                span_guards[cid] = guard
        if op.kind == "if":
            arms = []
            for k, arm in enumerate(op.blocks):
                nb = Block()
                for inner in arm.ops:
                    if inner.kind == "yield":
                        nb.ops.append(Op("yield", [vmap.get(v.id, v) for v in inner.args], [], {}, (), inner.loc,
                                         None))
                    else:   # (the condition is a scalar: computed before the loop, where the flags go)
                        emit(inner, nb, guard + ((op.args[0], k),))
                arms.append(nb)
            res = []
            for r in op.results:
                nr = Value(r.type.with_(shape=(chunk,) + r.type.shape[1:]) if _rowwise(r, rows) else r.type, r.name)
                vmap[r.id] = nr
                res.append(nr)
            new = Op("if", [vmap.get(op.args[0].id, op.args[0])], res, dict(op.attrs), arms, op.loc, None)
            new.attrs.pop("channels", None)
            dst.ops.append(new)
            return
        new = clone_op(op, vmap)
        new.attrs.pop("channels", None)
        if op.defn.category == "scalar" or not _inner_rowwise(op, rows):
            dst.ops.append(new)   # scalars, and whole compute inside an if arm: unchanged, once per chunk
            return
        for r, nr in zip(op.results, new.results):
            if _rowwise(r, rows):
                nr.type = r.type.with_(shape=(chunk,) + r.type.shape[1:])
        ops = dst.ops

        def local(kind, a, b):
            a = a if isinstance(a, Value) else _const(ops, a, loc)
            b = b if isinstance(b, Value) else _const(ops, b, loc)
            o = Op("sbin", [a, b], [Value(INDEX)], {"op": kind}, (), loc, None)
            ops.append(o)
            return o.result

        def rows_of(valid):
            return local("min", local("max", local("sub", valid, r0), 0), chunk)

        if op.kind == "create" and op.attrs.get("nvalid"):
            new.args[1] = rows_of(new.args[1])
        elif op.kind == "create":
            new.args = [new.args[0], rows_of(op.results[0].type.shape[0]),
                        *[_const(ops, d, loc) for d in op.results[0].type.shape[1:]]]
            new.attrs["nvalid"] = op.results[0].type.rank
        elif op.kind == "iota":
            valid = new.args[1] if op.attrs.get("nvalid") else op.results[0].type.shape[0]
            new.args = [local("add", new.args[0], r0), rows_of(valid)]
            new.attrs["nvalid"] = 1
        elif op.kind in ("load", "store"):
            w = new.windows["window"]
            d0 = w.dims[0]
            dims = list(w.dims)
            valid = ve(op.args[-1])[0] if op.kind == "store" else d0.valid
            valid = vmap.get(valid.id, valid) if isinstance(valid, Value) else valid
            dims[0] = replace(d0, start=local("add", d0.start, r0), extent=chunk, valid=rows_of(valid))
            new.windows["window"] = replace(w, dims=dims)
        dst.ops.append(new)

    for op in split:
        emit(op, body)
    yields = []
    for v, arg in zip(outputs, args[1:]):
        ins = Op("insert_rows", [arg, vmap[v.id], r0], [Value(v.type, v.name)], {}, (), loc, "vector")
        body.ops.append(ins)
        yields.append(ins.result)
    body.ops.append(Op("yield", yields, [], {}, (), loc, None))
    step = _const(pre, chunk, loc)
    zero_i = _const(pre, 0, loc)
    results = [Value(v.type, v.name) for v in outputs]
    loop = Op("for", [zero_i, nrows, step, *fulls], results, {"var": "r0", "chunk": chunk}, [body], loc, None)
    ve.add_loop(loop)   # later passes of this block read the assembled tiles' valid extents
    if spans:
        loop.attrs["channels"] = spans
        loop.attrs["span_pipes"] = span_pipes   # the pipe each channel's own op runs on (for its flag set)
        if span_guards:   # the spans inside an if's arm: (condition, arm) from the pass's level inwards
            loop.attrs["span_guards"] = span_guards
        loop.attrs["handoff"] = "chunked"
    # later readers of an output read the assembled tile
    subst = {v.id: r for v, r in zip(outputs, results)}
    for op in block.ops[end + 1:]:
        for o in _all_ops(op):
            o.map_values(lambda x: subst.get(x.id, x))
    return before + pre + [loop]


def _const(ops: list, x, loc, float_=False) -> Value:
    from ..types import F32

    t = F32 if (float_ or isinstance(x, float)) else (BOOL if isinstance(x, bool) else INDEX)
    op = Op("const", [], [Value(t, const=x)], {"value": x}, (), loc, None)
    ops.append(op)
    return op.result
