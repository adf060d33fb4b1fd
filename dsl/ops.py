"""The op-definition table: every IR op kind is one record here, read by every consumer.

Model
-----
An ``OpDef`` states what is true of one op kind wherever it appears:

* ``category``: ``scalar`` (index/float/bool arithmetic and reads, both core
  types run it), ``tile`` (work on on-chip tiles or GM windows), ``control``
  (structured control flow: ``for``, ``if``, ``yield``) or ``sync`` (flags and
  events the sync pass inserts);
* ``scopes``: the scopes an op of this kind may carry (``None`` is the scope of
  scalar and control ops, which both core types run);
* ``pure``: no effect beyond its results, so common-subexpression elimination
  may merge two equal ones and dead-code elimination may drop an unused one;
* ``pipe``: the hardware pipe that executes it (MTE2, MTE1, M, FIX, V, MTE3, S),
  a constant or a function of the op (a copy's pipe depends on its edge);
* ``operands``: the names of the op's plain operands in order (``*x`` is
  variadic), and ``windows``: the names of its GM-window operands (a window is
  an address description, see ``ir.Window``; a window operand is stored once,
  in ``Op.windows``);
* ``verify``: the op's own legality rule beyond scopes (result space and dtype,
  legal copy edges of the target), ``verify(op, platform) -> message | None``;
* ``valid``: the rule giving the runtime valid extents of its tile result from
  its operands (``shapes.valid_of`` applies it).

Who reads it: ``verify`` (scopes, hooks), ``passes.simplify`` (purity),
``budget`` and the memory plan (pipes, categories), the printer (operand names),
the numba backend (one ``op_<kind>`` lowering rule per kind, checked against
this table by the tests), and the Ascend C backend and the cost model the same
way. Adding an op is one record here plus one lowering rule per backend.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Callable

from .types import L0A, L0B, L0C, L1, UB, TileType

__all__ = ["OpDef", "OPS", "opdef", "SCALAR_BINARY"]


@dataclass(frozen=True)
class OpDef:
    kind: str
    category: str
    scopes: tuple
    pure: bool
    pipe: object                      # a pipe name, or op -> pipe name
    operands: tuple = ()
    windows: tuple = ()
    verify: Callable | None = None
    valid: Callable | None = None
    doc: str = ""
    #: the pass that replaces every op of this kind (backends need no lowering rule for it)
    lowered_by: str | None = None

    def pipe_of(self, op) -> str:
        return self.pipe(op) if callable(self.pipe) else self.pipe


# ------------------------------------------------------------------ verify hooks (op, platform) -> message

def _result(op):
    return op.results[0].type if op.results else None


def _verify_load(op, platform):
    want = L1 if op.scope == "cube" else UB
    if _result(op).space is not want:
        return f"load in {op.scope} scope must produce a {want} tile, got {_result(op).space}"


def _verify_store(op, platform):
    src = op.args[-1].type.space
    if (op.scope, src) not in (("vector", UB), ("cube", L0C)):
        return f"store from {src} in {op.scope} scope"


def copy_edges(platform) -> set:
    """The legal on-chip copy edges of a target (A2/A3: L1->L0A/L0B; 950 adds L0C->UB, UB->L1, L0C->L1)."""
    edges = {(L1, L0A), (L1, L0B)}
    if platform.cube_to_vector_on_chip:
        edges |= {(L0C, UB), (UB, L1), (L0C, L1)}
    return edges


def _verify_copy(op, platform):
    src, dst = op.args[0].type.space, _result(op).space
    if (src, dst) not in copy_edges(platform):
        return f"copy {src}->{dst} is not a legal edge on {platform.name}"


def _verify_handoff(op, platform):
    want = UB if op.scope == "vector" else L1
    if _result(op).space is not want:
        return f"handoff into {op.scope} must produce a {want} tile"


def _verify_mma(op, platform):
    res = _result(op)
    if res.space is not L0C or res.dtype.name not in ("float32", "int32"):
        return "mma must produce a float32/int32 L0C tile"


def _verify_dequant(op, platform):
    x, res = op.args[0].type, _result(op)
    if x.space is not L0C or x.dtype.name != "int32":
        return f"dequant reads an int32 L0C tile (an int8 mma's result), got a {x.dtype} {x.space} tile"
    if res.space is not L0C or res.dtype.name != "float16":
        return "dequant must produce a float16 L0C tile (the fixpipe's DEQF16 output)"


def _verify_create(op, platform):
    space = _result(op).space
    if (op.scope == "vector") != (space is UB):
        return f"create of a {space} tile in {op.scope} scope"


def _verify_vector(op, platform):
    res = _result(op)
    if not isinstance(res, TileType) or res.space is not UB:
        return f"{op.kind} must produce a UB tile"
    for o in op.args:
        if isinstance(o.type, TileType) and o.type.space is not UB:
            return f"{op.kind} reads a {o.type.space} tile; vector ops read UB"


# ------------------------------------------------------------------ pipes

def _store_pipe(op) -> str:
    return "FIX" if op.args[-1].type.space is L0C else "MTE3"


def _copy_pipe(op) -> str:
    src, dst = op.args[0].type.space, op.results[0].type.space
    if src is L1 and dst in (L0A, L0B):
        return "MTE1"
    if src is L0C:
        return "FIX"
    if src is UB:
        return "MTE3"
    return "MTE2"


def _handoff_pipe(op) -> str:
    return "FIX" if op.args[0].type.space is L0C else "MTE3"


# ------------------------------------------------------------------ valid-extent rules (see shapes.valid_of)

def _valid_window(op, valid_of):
    w = op.windows["window"]
    return tuple(d.valid for d in w.dims)


def _valid_operands(op, valid_of):
    """create / iota: the explicit valid operands, else the capacity."""
    n = op.attrs.get("nvalid", 0)
    t = op.results[0].type
    return tuple(op.args[-n:]) if n else tuple(t.shape)


def _valid_same(op, valid_of):
    return valid_of(op.args[0])


def _valid_mma(op, valid_of):
    def extents(which, tile_index):
        w = op.windows.get(which)
        if w is not None:
            return tuple(d.valid for d in w.dims)
        return valid_of(op.args[tile_index])

    a_tiles = 0 if "a" in op.windows else 1
    a = extents("a", 0)
    b = extents("b", a_tiles)
    return (a[0], b[0] if op.attrs.get("trans_b") else b[1])


def _valid_ewise(op, valid_of):
    """Per dim, the first tile operand that is not broadcast along it (the simulator checks that the operands'
    valid extents agree)."""
    t = op.results[0].type
    tiles = [o for o in op.args if o.is_tile]
    out = []
    for d in range(t.rank):
        for o in tiles:
            if o.type.shape[d] != 1 or t.shape[d] == 1:
                out.append(valid_of(o)[d])
                break
        else:
            out.append(1)
    return tuple(out)


def _valid_recv(op, valid_of):
    return tuple(op.args[1:])


def _valid_slice_rows(op, valid_of):
    return (op.args[2],) + tuple(valid_of(op.args[0])[1:])


def _valid_full(op, valid_of):
    return valid_of(op.args[0])


def _valid_reduce(op, valid_of):
    return (valid_of(op.args[0])[0],)


def _valid_expand(op, valid_of):
    (n,) = valid_of(op.args[0])
    return (n, 1) if op.attrs["axis"] == 1 else (1, n)


_ANY_SCOPE = (None,)
_VEC = ("vector",)
_BOTH = ("cube", "vector")

_DEFS = [
    # scalars: both core types run them
    OpDef("const", "scalar", _ANY_SCOPE, True, "S", doc="a compile-time constant"),
    OpDef("sbin", "scalar", _ANY_SCOPE, True, "S", ("a", "b"), doc="scalar binary op (attrs op)"),
    OpDef("sun", "scalar", _ANY_SCOPE, True, "S", ("a",),
          doc="scalar unary op (attrs op: neg, not, abs, or a float math function with a float32 result)"),
    OpDef("scast", "scalar", _ANY_SCOPE, True, "S", ("a",), doc="scalar conversion (attrs to)"),
    OpDef("sselect", "scalar", _ANY_SCOPE, True, "S", ("cond", "a", "b"), doc="scalar select"),
    OpDef("sload", "scalar", _ANY_SCOPE, True, "S", ("tensor", "offset"),
          doc="a scalar read of one element of a GM tensor (its indices were bound-checked by the view)"),
    OpDef("dim", "scalar", _ANY_SCOPE, True, "S", ("tensor",), doc="a GM tensor's runtime extent (attrs axis)"),
    OpDef("block_idx", "scalar", _ANY_SCOPE, True, "S", doc="this core's index in the launch"),
    OpDef("block_num", "scalar", _ANY_SCOPE, True, "S", doc="the number of cores launched"),
    OpDef("subblock_idx", "scalar", _ANY_SCOPE, True, "S", doc="the vector core's index in its group"),
    OpDef("check", "scalar", _ANY_SCOPE, False, "S", ("cond", "*values"),
          doc="a runtime assertion (attrs message, labels); the simulator enforces it"),
    # tiles
    OpDef("load", "tile", _BOTH, True, "MTE2", (), ("window",), _verify_load, _valid_window,
          doc="GM window -> L1 (cube) or UB (vector)"),
    OpDef("store", "tile", _BOTH, False, _store_pipe, ("tile",), ("window",), _verify_store,
          doc="UB tile -> GM (vector, MTE3) or L0C tile -> GM through the fixpipe (cube, may cast)"),
    OpDef("copy", "tile", _BOTH, True, _copy_pipe, ("src",), (), _verify_copy, _valid_same,
          doc="on-chip move: L1->L0A/L0B (MTE1); 950: L0C->UB (FIX), UB->L1 (MTE3)"),
    OpDef("handoff", "tile", _BOTH, True, _handoff_pipe, ("src",), (), _verify_handoff, _valid_same,
          doc="a tile crossing between the cube and the vector cores (attrs route); split_cv lowers it"),
    OpDef("mma", "tile", ("cube",), True, "M", ("a?", "b?", "acc?"), ("a", "b"), _verify_mma, _valid_mma,
          doc="matmul into L0C (attrs trans_b, acc); a or b may be a GM window (streamed through L1)"),
    OpDef("dequant", "tile", ("cube",), True, "FIX", ("x", "scale"), (), _verify_dequant, _valid_same,
          doc="the fixpipe's dequantisation of an int32 L0C tile on its way out (quantPre DEQF16): "
              "float16(float32(x) * scale), rounded to nearest even; a view of x that only a store or a hand-off "
              "reads (the conversion happens in the move, which carries float16)"),
    OpDef("create", "tile", _BOTH, True, "V", ("value", "*valid"), (), _verify_create, _valid_operands,
          doc="a tile filled with a scalar (zeros/full)"),
    OpDef("iota", "tile", _VEC, True, "V", ("start", "*valid"), (), _verify_vector, _valid_operands,
          doc="a rank-1 tile start, start+1, ..."),
    OpDef("ewise", "tile", _VEC, True, "V", ("*x",), (), _verify_vector, _valid_ewise,
          doc="elementwise op (attrs op, dtype): arithmetic, compares, where, integer // % & | ^ << >>, "
              "float math (exp log sqrt rsqrt tanh sigmoid erf floor pow)"),
    OpDef("cast", "tile", _VEC, True, "V", ("x",), (), _verify_vector, _valid_same,
          doc="dtype conversion (attrs to, rounding)"),
    OpDef("reduce", "tile", _VEC, True, "V", ("x",), (), _verify_vector, _valid_reduce,
          doc="per-row max/sum/min of a rank-2 tile (attrs op)"),
    OpDef("gather", "tile", _VEC, True, "V", ("idx",), ("table",), _verify_vector, _valid_same,
          doc="result[i] = table[idx[i]] over idx's valid elements: a UB tile of idx's shape and the table's dtype; "
              "the table window is a rank-1 GM view (valid = its extent), every index is checked against it"),
    OpDef("expand", "tile", _VEC, True, "S", ("x",), (), _verify_vector, _valid_expand,
          doc="a rank-1 tile viewed as (n, 1) or (1, n) for broadcasting (attrs axis); no data moves"),
    OpDef("device_print", "tile", _BOTH, False, "S", ("value", "*loops"),
          doc="print a tile's valid values or a scalar when the kernel runs on the simulator (attrs name, "
              "loop_names: the enclosing loops' variables, operands after value); not pure, so no pass drops it; "
              "the Ascend C is a comment"),
    # row chunks (chunk_rows): views and in-place updates of a tile's rows, no data movement of their own
    OpDef("slice_rows", "tile", _VEC, True, "S", ("x", "row", "rows"), (), _verify_vector, _valid_slice_rows,
          doc="rows [row, row+rows) of a UB tile as a tile of capacity attrs['cap'] rows (a view)"),
    OpDef("insert_rows", "tile", _VEC, False, "V", ("full", "chunk", "row"), (), _verify_vector, _valid_full,
          doc="the full tile with rows [row, row+chunk rows) replaced by chunk (in place: the result is full)"),
    # control
    OpDef("for", "control", _ANY_SCOPE, False, "S", ("lo", "hi", "step", "*init"),
          doc="a loop; its body's arguments are the induction variable and the carried values"),
    OpDef("if", "control", _ANY_SCOPE, False, "S", ("cond",), doc="a branch; both arms yield its results"),
    OpDef("yield", "control", _ANY_SCOPE, False, "S", ("*values",), doc="ends a for body or an if arm"),
    OpDef("program", "control", _ANY_SCOPE, False, "S",
          doc="one core type's program after the CV split (attrs core: aic or aiv); the kernel body holds one "
              "per core type that has work"),
    # hand-offs between the programs (split_cv makes them, place_handoffs lowers them to slot traffic)
    OpDef("send", "tile", _BOTH, False, _handoff_pipe, ("tile", "row_offset"),
          doc="hand a tile to the other core type over channel attrs['channel'], its rows placed from row_offset",
          lowered_by="place_handoffs"),
    OpDef("recv", "tile", _BOTH, False, "MTE2", ("row_offset", "*valid"), valid=_valid_recv,
          doc="receive a tile over channel attrs['channel'] (rows from row_offset, the given valid extents)",
          lowered_by="place_handoffs"),
    # cross-core flags (insert_sync)
    OpDef("flag_set", "sync", _BOTH, False, lambda op: op.attrs["pipe"],
          doc="CrossCoreSetFlag: raise flag attrs['id'] (attrs name, mode) for the other core type"),
    OpDef("flag_wait", "sync", _BOTH, False, "S",
          doc="CrossCoreWaitFlag: block until flag attrs['id'] is raised, then lower it"),
    # intra-core events between the pipes of one core (insert_sync)
    OpDef("event_set", "sync", _BOTH, False, lambda op: op.attrs["src"],
          doc="SetFlag<HardEvent::SRC_DST>(id): pipe attrs['src'] signals once its earlier work is done"),
    OpDef("event_wait", "sync", _BOTH, False, lambda op: op.attrs["dst"],
          doc="WaitFlag<HardEvent::SRC_DST>(id): pipe attrs['dst'] waits for the matching set"),
    OpDef("barrier", "sync", _BOTH, False, lambda op: op.attrs["pipe"],
          doc="PipeBarrier<PIPE_X>: later instructions of pipe attrs['pipe'] wait for its earlier ones"),
]

OPS: dict[str, OpDef] = {d.kind: d for d in _DEFS}


def _real_pow(a, b):
    """a ** b of two Python numbers; a complex result (a negative base, a fractional exponent) is NaN, as the
    C pow gives."""
    r = operator.pow(a, b)
    return float("nan") if isinstance(r, complex) else r


def _logic(bitwise, boolean):
    return lambda a, b: boolean(a, b) if isinstance(a, bool) else bitwise(a, b)


#: what each ``sbin`` op computes on Python numbers (the frontend's constant folding and the cost model's
#: scalar interpretation; integer division and modulo floor, as the simulator's int64 arithmetic does)
SCALAR_BINARY: dict = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "truediv": operator.truediv,
    "floordiv": operator.floordiv, "mod": operator.mod, "min": min, "max": max,
    "and": _logic(operator.and_, lambda a, b: a and b), "or": _logic(operator.or_, lambda a, b: a or b),
    "xor": operator.xor, "lshift": operator.lshift, "rshift": operator.rshift, "pow": _real_pow,
    "lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge, "eq": operator.eq, "ne": operator.ne,
}


def opdef(kind: str) -> OpDef:
    try:
        return OPS[kind]
    except KeyError:
        raise ValueError(f"unknown IR op kind {kind!r}") from None
