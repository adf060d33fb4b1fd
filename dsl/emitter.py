"""The IR builder: creates ops with their typing rules, folds constants, inserts hand-offs.

Model
-----
The frontend walks the user's AST and calls one method here per language
construct; every method checks its typing rule and raises
``CompilationError`` at the current source location (``self.loc``) when the
rule is broken. Compile-time Python values (ints, floats, bools) fold: an
operation on two of them gives a Python value, never an op.

Scopes: ``self.scope`` is ``"cube"`` inside ``with cube():``, ``"vector"``
inside ``with vector():`` and ``None`` elsewhere. Matrix work belongs to the
cube, elementwise/reduction work to the vector cores, scalar work to both.

Hand-offs: a tile produced in one scope and used in the other crosses between
the AIC and the AIVs. ``use`` inserts a ``handoff`` op at the first such use
(L0C/L1 -> UB for the vector side, UB -> L1 for the cube side) and reuses it
for later uses it dominates. On targets without on-chip cube<->vector paths
(A2/A3) the hand-off's route goes through the GM workspace; later passes (CV
split, sync insertion) turn each hand-off into workspace traffic and flags.
A tile the kernel marked with ``through_gm`` takes the GM route on every
target (on the 950 too, where the other hand-offs stay on chip): its slots
are GM, not buffers of the receiving core.

Invariants
----------
* Every op carries ``loc`` and ``scope``; tile ops never have scope ``None``.
* Ops only read values defined in the current block or an enclosing one.
"""

from __future__ import annotations

from typing import Any, Sequence

from .errors import CompilationError
from .ir import Block, Loc, Lookup, Op, Value, WDim, Window
from .ops import SCALAR_BINARY
from .shapes import ValidExtents
from .types import (BOOL, F32, GM, INDEX, L0A, L0B, L0C, L1, UB, DType, ScalarType, Space, TileType, bfloat16,
                    bool_, float8_e4m3fn, float16, float32, int8, int32, dtype_of, space_of)

__all__ = ["Builder", "WDim", "Window", "Lookup", "is_const"]  # the address types live in ir; re-exported

_SCALAR_BIN = {"add", "sub", "mul", "truediv", "floordiv", "mod", "min", "max", "lt", "le", "gt", "ge", "eq", "ne",
               "and", "or", "xor", "lshift", "rshift", "pow"}
_CMP = {"lt", "le", "gt", "ge", "eq", "ne"}
_EWISE_BIN = {"add", "sub", "mul", "div", "max", "min", "floordiv", "mod", "and", "or", "xor", "lt", "le", "gt", "ge",
              "eq", "ne", "pow", "lshift", "rshift"}
#: the float math functions (tiles: ewise ops; runtime scalars: sun ops with a float32 result)
MATH_UNARY = ("exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "floor")
_EWISE_UN = {"neg", "abs", "not", "relu", *MATH_UNARY}
_FLOAT_ONLY = {*MATH_UNARY, "div", "pow"}
_INT_ONLY = {"floordiv", "mod", "and", "or", "xor", "lshift", "rshift"}
#: the largest constant integer exponent ``x ** n`` lowers to multiplies (binary exponentiation)
POW_BY_MULTIPLIES = 8
_REDUCE = {"max", "sum", "min"}
_MMA_IN = {float16: float32, bfloat16: float32, float32: float32, int8: int32}


def is_const(x) -> bool:
    return isinstance(x, (bool, int, float)) and not isinstance(x, Value)


class Builder:
    def __init__(self, platform, filename: str = "<kernel>"):
        self.platform = platform
        self.loc: Loc | None = Loc(filename, 0)
        self.scope: str | None = None
        self.root = Block()
        self.blocks: list[Block] = [self.root]
        self._handoffs: list[dict] = [{}]
        self.value_scope: dict[int, str | None] = {}
        #: tiles ``through_gm`` marked: their hand-offs take the GM route on every target
        self.through_gm_ids: set[int] = set()
        self.scopes_seen: set[str] = set()
        #: explicit sub-blocks (``subblock_idx()``): None on the first walk; on the second walk the number of
        #: vector cores each ``with vector():`` section runs on, one after the other (see frontend.build_kernel)
        self.subblocks: int | None = None
        #: where the first walk met ``subblock_idx()`` / ``subblock_num()`` (None: not used)
        self.subblock_use: Loc | None = None
        #: the running section's sub-block index (a loop variable) on the second walk
        self.subblock_value: Value | None = None
        #: valid extents of the tiles built so far (see shapes.py)
        self.shapes = ValidExtents()

    # ------------------------------------------------------------------ errors
    def error(self, message: str):
        raise CompilationError(message, self.loc)

    # --------------------------------------------------------------- structure
    @property
    def block(self) -> Block:
        return self.blocks[-1]

    def push_block(self, block: Block):
        self.blocks.append(block)
        self._handoffs.append({})

    def pop_block(self) -> Block:
        self._handoffs.pop()
        return self.blocks.pop()

    def emit(self, kind: str, operands: Sequence = (), types: Sequence = (), attrs: dict | None = None,
             blocks: Sequence[Block] = (), scope: Any = "current", names: Sequence | None = None,
             windows: dict | None = None) -> Op:
        scope = self.scope if scope == "current" else scope
        results = [Value(t, (names[i] if names else None)) for i, t in enumerate(types)]
        op = Op(kind, [self.value(o) for o in operands], results, attrs, blocks, self.loc, scope, windows)
        self.block.append(op)
        for r in results:
            self.value_scope[r.id] = scope
        if scope:
            self.scopes_seen.add(scope)
        return op

    # ----------------------------------------------------------------- scalars
    def const(self, x) -> Value:
        if isinstance(x, Value):
            return x
        if isinstance(x, bool):
            t = BOOL
        elif isinstance(x, int):
            t = INDEX
        elif isinstance(x, float):
            t = F32
        else:
            self.error(f"cannot use {x!r} ({type(x).__name__}) as a kernel value")
        op = Op("const", [], [Value(t, const=x)], {"value": x}, (), self.loc, None)
        self.block.append(op)
        return op.result

    def value(self, x) -> Value:
        return x if isinstance(x, Value) else self.const(x)

    def scalar_type(self, x) -> ScalarType:
        if isinstance(x, Value):
            if not x.is_scalar:
                self.error(f"expected a scalar, got {x.type!r}")
            return x.type
        if isinstance(x, bool):
            return BOOL
        if isinstance(x, int):
            return INDEX
        if isinstance(x, float):
            return F32
        self.error(f"expected a scalar, got {x!r}")

    def sbin(self, op: str, a, b):
        if op not in _SCALAR_BIN:
            self.error(f"operator {op} is not supported on scalars")
        if is_const(a) and is_const(b):
            return _fold(op, a, b, self)
        simple = _identity(op, a, b)
        if simple is not None:
            return simple
        ta, tb = self.scalar_type(a), self.scalar_type(b)
        if op == "pow":
            return self.spow(a, b, ta, tb)
        if op == "truediv":
            rt = F32
        elif op in _CMP:
            rt = BOOL
        elif op in ("and", "or", "xor") and ta == BOOL and tb == BOOL:
            rt = BOOL
        elif ta == F32 or tb == F32:
            if op in ("floordiv", "mod", "and", "or", "xor", "lshift", "rshift"):
                self.error(f"operator {op} needs integer operands, got {ta} and {tb}")
            rt = F32
        else:
            rt = INDEX
        a = self._scalar_as(a, ta, rt if rt != BOOL or op in _CMP else BOOL, op)
        b = self._scalar_as(b, tb, rt if rt != BOOL or op in _CMP else BOOL, op)
        return self.emit("sbin", [a, b], [rt], {"op": op}, scope=None).result

    def spow(self, a, b, ta=None, tb=None):
        """a ** b on scalars: a constant integer exponent 0..POW_BY_MULTIPLIES is multiplies (exact for integers,
        one rounding per multiply for floats); otherwise a float32 pow (an integer base needs such a constant
        exponent)."""
        ta = ta or self.scalar_type(a)
        tb = tb or self.scalar_type(b)
        n = _small_exponent(b)
        if n is not None and ta != BOOL:
            return _by_multiplies(a, n, lambda x, y: self.sbin("mul", x, y),
                                  lambda: 1.0 if ta == F32 else 1)
        if ta in (BOOL, INDEX) and tb != F32 and not (is_const(a) and isinstance(a, float)):
            self.error(f"** of an integer scalar needs a constant exponent in 0..{POW_BY_MULTIPLIES}, got "
                       f"{_describe(b)}; cast the base to float for a general power")
        if BOOL in (ta, tb):
            self.error("** of a bool scalar")
        a, b = self._scalar_as(a, ta, F32, "pow"), self._scalar_as(b, tb, F32, "pow")
        return self.emit("sbin", [a, b], [F32], {"op": "pow"}, scope=None).result

    def _scalar_as(self, x, t, rt, op):
        # comparisons and arithmetic on mixed int/float promote the int side to float
        if op in _CMP:
            return x
        if rt == F32 and t != F32:
            return self.scast(x, float32)
        return x

    def sun(self, op: str, a):
        """A scalar unary op: neg, not, abs, or one of the float math functions (``MATH_UNARY``, a float32
        result; an integer operand converts first; compile-time operands fold)."""
        if is_const(a):
            if op in MATH_UNARY:
                return _fold_math(op, a, self)
            return {"neg": lambda v: -v, "not": lambda v: not v, "abs": abs}[op](a)
        t = self.scalar_type(a)
        if op in MATH_UNARY:
            if t == BOOL:
                self.error(f"{op}() of a bool scalar")
            return self.emit("sun", [self.scast(a, float32)], [F32], {"op": op}, scope=None).result
        rt = BOOL if op == "not" else t
        return self.emit("sun", [a], [rt], {"op": op}, scope=None).result

    def scast(self, a, dtype):
        dt = dtype_of(dtype)
        if is_const(a):
            return float(a) if dt.is_float else (bool(a) if dt.is_bool else int(a))
        rt = F32 if dt.is_float else (BOOL if dt.is_bool else INDEX)
        if a.type == rt:
            return a
        return self.emit("scast", [a], [rt], {"to": rt.dtype.name}, scope=None).result

    def sselect(self, c, a, b):
        if is_const(c):
            return a if c else b
        ta, tb = self.scalar_type(a), self.scalar_type(b)
        if ta != tb:
            if F32 in (ta, tb):
                a, b = self.scast(a, float32), self.scast(b, float32)
                ta = F32
            else:
                self.error(f"conditional expression arms have different types {ta} and {tb}")
        return self.emit("sselect", [c, a, b], [ta], scope=None).result

    def check(self, cond, message: str, *values, labels: tuple = ()):
        """A runtime assertion (a bound or shape rule) the simulator enforces; ``labels`` name the reported
        values in the error (default: their IR names)."""
        if is_const(cond):
            if not cond:
                self.error(message)
            return
        attrs = {"message": message}
        if labels:
            attrs["labels"] = tuple(labels)
        self.emit("check", [cond, *values], [], attrs, scope=None)

    def dim(self, tensor: Value, axis: int) -> Value:
        return self.emit("dim", [tensor], [INDEX], {"axis": axis}, scope=None).result

    def sload(self, tensor: Value, offset) -> Value:
        """A scalar read of element ``offset`` of a GM tensor (its indices were bound-checked by the view)."""
        dt = tensor.type.dtype
        rt = F32 if dt.is_float else (BOOL if dt.is_bool else INDEX)
        return self.emit("sload", [tensor, offset], [rt], scope=None).result

    # ------------------------------------------------------------ tile helpers
    def use(self, v: Value) -> Value:
        """A tile operand as seen from the current scope (inserting a hand-off when it crosses cores)."""
        if not isinstance(v, Value) or not v.is_tile:
            return v
        src = self.value_scope.get(v.id)
        dst = self.scope
        if src is None or dst is None or src == dst:
            return v
        if (dst == "vector" and v.type.space is UB) or (dst == "cube" and v.type.space in (L1, L0A, L0B, L0C)):
            return v  # already on the reading side (a 950 on-chip copy L0C->UB or UB->L1 did the crossing)
        for cache in reversed(self._handoffs):
            if (v.id, dst) in cache:
                return cache[(v.id, dst)]
        space = UB if dst == "vector" else L1
        via_gm = v.id in self.through_gm_ids
        attrs = {"src": v.type.space.name, "dst": space.name, "route": self._handoff_route(v.type.space, space, via_gm)}
        if via_gm:
            attrs["through_gm"] = True
        out = self.emit("handoff", [v], [v.type.with_(space=space)], attrs, names=[v.name]).result
        self._handoffs[-1][(v.id, dst)] = out
        return out

    def through_gm(self, v: Value) -> Value:
        """Mark tile ``v`` (made in the current scope) to cross to the other core type through the GM
        workspace on every target; returns ``v``."""
        if self.scope is None:
            self.error("through_gm marks a tile made in a cube() or vector() scope; it is outside both")
        if not isinstance(v, Value) or not v.is_tile:
            self.error(f"through_gm takes a tile, got {_describe(v)}")
        if self.value_scope.get(v.id) != self.scope:
            self.error(f"through_gm: the tile was not made in this `with {self.scope}():` scope; mark it where "
                       f"it is made, before it crosses")
        self.through_gm_ids.add(v.id)
        return v

    def _handoff_route(self, src: Space, dst: Space, through_gm: bool = False) -> str:
        on_chip = self.platform.cube_to_vector_on_chip and not through_gm
        if src is L0C and dst is UB:
            return "FIX L0C->UB" if on_chip else "FIX L0C->GM(workspace), MTE2 GM->UB"
        if src is UB and dst is L1:
            return "MTE3 UB->L1" if on_chip else "MTE3 UB->GM(workspace), MTE2 GM->L1"
        if src is L1 and dst is UB:
            return "MTE1 L1->UB" if on_chip else "FIX/MTE GM(workspace) round trip"
        self.error(f"a {src} tile cannot be handed between the cube and vector cores")

    def _require_scope(self, what: str, scope: str):
        if self.scope != scope:
            where = "outside any cube()/vector() scope" if self.scope is None else f"inside `with {self.scope}():`"
            self.error(f"{what} is a {scope} op; it is not allowed {where}")

    def _tile(self, v, what: str) -> Value:
        if not isinstance(v, Value) or not v.is_tile:
            self.error(f"{what} must be a tile, got {_describe(v)}")
        return v

    # -------------------------------------------------------------- tile ops
    def load(self, window: Window, space=None) -> Value:
        if self.scope is None:
            self.error("load is a tile op; put it inside `with cube():` (GM->L1) or `with vector():` (GM->UB)")
        space = space_of(space) if space is not None else (L1 if self.scope == "cube" else UB)
        legal = {"cube": (L1,), "vector": (UB,)}[self.scope]
        if space not in legal:
            self.error(f"load into {space} is not a legal copy edge in {self.scope} scope "
                       f"(legal: GM->{'/'.join(s.name for s in legal)})")
        t = TileType(window.tensor.type.dtype, space, window.shape)
        self._check_tile_dtype(t.dtype, space)
        return self.emit("load", [], [t], windows={"window": window}).result

    def _read_only_fp8(self, tiles, what: str):
        """An FP8 tile is only cast (to a wider float): the language reads FP8 tensors and computes in wider
        types, as the 950 dequantises its FP8 cache before any arithmetic."""
        for t in tiles:
            if isinstance(t, Value) and t.is_tile and t.type.dtype is float8_e4m3fn:
                self.error(f"{what} of a float8_e4m3fn tile: an FP8 tile is only cast (to float16, bfloat16 or "
                           f"float32) before any other op")

    def store(self, window: Window, tile) -> None:
        tile = self.use(self._tile(tile, "store's tile"))
        src = tile.type.space
        gdt = window.tensor.type.dtype
        if gdt is float8_e4m3fn:
            self.error("store into a float8_e4m3fn GM tensor: FP8 tensors are read only (kernels load and cast "
                       "them)")
        if src is UB:
            self._require_scope("store from UB", "vector")
            if tile.type.dtype != gdt:
                self.error(f"store of a {tile.type.dtype} UB tile into a {gdt} GM tensor: the UB->GM copy does "
                           f"not convert; cast the tile to {gdt} first")
        elif src is L0C:
            self._require_scope("store from L0C", "cube")
            if not (tile.type.dtype == gdt or (tile.type.dtype == float32 and gdt in (float16, bfloat16))):
                self.error(f"the fixpipe cannot convert {tile.type.dtype} to {gdt} on store")
        else:
            self.error(f"store from {src} is not a legal copy edge (legal: UB->GM, L0C->GM)")
        if tile.type.rank != len(window.dims):
            self.error(f"store of a rank-{tile.type.rank} tile into a rank-{len(window.dims)} window")
        for i, d in enumerate(window.dims):
            if any(is_const(st) and st == 0 for st in d.strides):
                self.error(f"store into a broadcast view (dim {i} has stride 0) would write the same GM elements "
                           f"several times")
        for i, (te, we) in enumerate(zip(tile.type.shape, window.shape)):
            if te > we:
                self.error(f"store: tile dim {i} capacity {te} exceeds the window extent {we}")
        self.emit("store", [tile], [], windows={"window": window})

    def copy(self, tile, space) -> Value:
        tile = self.use(self._tile(tile, "copy's source"))
        self._read_only_fp8([tile], "copy")
        dst = space_of(space)
        src = tile.type.space
        legal = {(L1, L0A): "cube", (L1, L0B): "cube"}
        if self.platform.cube_to_vector_on_chip:
            legal.update({(L0C, UB): "cube", (UB, L1): "vector", (L0C, L1): "cube"})
        scope = legal.get((src, dst))
        if scope is None:
            edges = ", ".join(f"{a}->{b}" for a, b in legal)
            self.error(f"copy {src}->{dst} is not a legal on-chip edge on {self.platform.name} (legal: {edges}; "
                       f"GM moves are load/store)")
        self._require_scope(f"copy {src}->{dst}", scope)
        return self.emit("copy", [tile], [tile.type.with_(space=dst)]).result

    def mma(self, a, b, trans_b: bool = False, acc=None) -> Value:
        self._require_scope("mma", "cube")
        a_t, a_in = self._mma_operand(a, L0A, "a")
        b_t, b_in = self._mma_operand(b, L0B, "b")
        windows = {name: x for name, x in (("a", a), ("b", b)) if isinstance(x, Window)}
        if a_t.dtype != b_t.dtype:
            self.error(f"mma operands must have one dtype, got {a_t.dtype} and {b_t.dtype}")
        if a_t.dtype not in _MMA_IN:
            self.error(f"mma takes float16, bfloat16, float32 or int8 operands, got {a_t.dtype}")
        if len(a_t.shape) != 2 or len(b_t.shape) != 2:
            self.error("mma operands must be rank 2")
        m, k = a_t.shape
        kb, n = (b_t.shape[1], b_t.shape[0]) if trans_b else b_t.shape
        if k != kb:
            self.error(f"mma contraction extents differ: a is {m}x{k}, b{'^T' if trans_b else ''} is {kb}x{n}")
        rt = TileType(_MMA_IN[a_t.dtype], L0C, (m, n))
        operands = [*a_in, *b_in]
        attrs = {"trans_b": bool(trans_b), "acc": acc is not None}
        if acc is not None:
            acc = self._tile(acc, "mma acc")
            if acc.type != rt:
                self.error(f"mma acc must be {rt!r}, got {acc.type!r}")
            operands.append(acc)
        return self.emit("mma", operands, [rt], attrs, windows=windows).result

    def dequant(self, x, scale, dtype=float16) -> Value:
        """The fixpipe's DEQF16: an int32 L0C tile (an int8 mma's result) dequantised on its way out of L0C,
        float16(float32(x) * scale). Its result is a view that only a store or a hand-off reads."""
        self._require_scope("dequant", "cube")
        x = self.use(self._tile(x, "dequant's tile"))
        if x.type.space is not L0C or x.type.dtype != int32:
            self.error(f"dequant reads an int32 L0C tile (an int8 mma's result), got a {x.type.dtype} "
                       f"{x.type.space} tile")
        if dtype_of(dtype) != float16:
            self.error(f"dequant produces float16 (the fixpipe's DEQF16), got dtype={dtype_of(dtype)}: the A2/A3 "
                       f"fixpipe has no int32 -> {dtype_of(dtype)} dequant with a scalar scale")
        if isinstance(scale, Value) and scale.is_tile:
            self.error("dequant's scale is one float32 scalar (the fixpipe's deqScalar); a per-channel scale "
                       "vector (VDEQF16) is not in the language")
        if isinstance(scale, bool) or not isinstance(scale, (int, float, Value)):
            self.error(f"dequant's scale must be a float scalar, got {scale!r}")
        s = self.const(self.scast(scale, float32))
        return self.emit("dequant", [x, s], [x.type.with_(dtype=float16)]).result

    def _mma_operand(self, x, l0: Space, which: str):
        if isinstance(x, Window):
            if len(x.dims) != 2:
                self.error(f"mma operand {which} must be a rank-2 window, got rank {len(x.dims)}")
            return TileType(x.tensor.type.dtype, GM, x.shape), []
        v = self.use(self._tile(x, f"mma operand {which}"))
        sp = v.type.space
        if sp is L1:
            v = self.emit("copy", [v], [v.type.with_(space=l0)], {"staged": True}, names=[v.name]).result
        elif sp is not l0:
            self.error(f"mma operand {which} must be in L1, {l0} or a GM window, got a {sp} tile")
        return v.type, [v]

    def create(self, shape, value, dtype, space=None, valid=None) -> Value:
        shape = self._static_shape(shape, "shape")
        dt = dtype_of(dtype)
        space = self._default_space(space)
        t = TileType(dt, space, shape)
        self._check_tile_dtype(dt, space)
        valid = self._valid(valid, shape)
        if not (is_const(value) or (isinstance(value, Value) and value.is_scalar)):
            self.error(f"fill value must be a scalar, got {_describe(value)}")
        if not dt.is_float and (isinstance(value, float) or (isinstance(value, Value) and value.type == F32)):
            what = value if isinstance(value, float) else "a float32 scalar"
            self.error(f"a float fill value ({what}) for a {dt} tile: use an int, or a float dtype")
        return self.emit("create", [value, *valid], [t], {"nvalid": len(valid)}).result

    def iota(self, n, dtype=int32, start=0, valid=None) -> Value:
        (n,) = self._static_shape((n,), "n")
        self._require_scope("iota", "vector")
        dt = dtype_of(dtype)
        valid = self._valid(valid, (n,))
        return self.emit("iota", [start, *valid], [TileType(dt, UB, (n,))], {"nvalid": len(valid)}).result

    def _default_space(self, space) -> Space:
        if space is not None:
            return space_of(space)
        if self.scope == "vector":
            return UB
        self.error("this tile op needs an explicit space= outside `with vector():`")

    def _static_shape(self, shape, what) -> tuple:
        if is_const(shape):
            shape = (shape,)
        if not isinstance(shape, (tuple, list)) or not shape or len(shape) > 2:
            self.error(f"{what} must be a tuple of 1 or 2 compile-time ints, got {shape!r}")
        for d in shape:
            if not isinstance(d, int) or isinstance(d, bool) or d <= 0:
                self.error(f"{what} must be positive compile-time ints (constexpr), got {_describe(d)}")
        return tuple(shape)

    def _valid(self, valid, shape) -> list:
        if valid is None:
            return []
        if is_const(valid) or isinstance(valid, Value):
            valid = (valid,)
        if len(valid) != len(shape):
            self.error(f"valid= needs {len(shape)} extents, got {len(valid)}")
        for v, cap in zip(valid, shape):
            if is_const(v) and not (0 <= v <= cap):
                self.error(f"valid extent {v} is outside [0, {cap}]")
            if isinstance(v, Value) and v.type != INDEX:
                self.error(f"valid extents must be integers, got {v.type}")
        return list(valid)

    def _check_tile_dtype(self, dt: DType, space: Space):
        if space in (L0A, L0B) and dt not in _MMA_IN:
            self.error(f"{space} holds mma operands (float16/bfloat16/float32/int8), not {dt}")
        if space is L0C and dt not in (float32, int32):
            self.error(f"L0C holds float32/int32 accumulators, not {dt}")

    # ----------------------------------------------------------- vector ops
    def ewise(self, op: str, *args) -> Value:
        if op not in _EWISE_BIN | _EWISE_UN | {"where"}:
            self.error(f"unknown elementwise op {op}")
        self._require_scope(_OPNAME.get(op, op), "vector")
        tiles = [self.use(a) for a in args]
        tile_args = [a for a in tiles if isinstance(a, Value) and a.is_tile]
        self._read_only_fp8(tile_args, _OPNAME.get(op, op))
        for a in tiles:
            if not (is_const(a) or isinstance(a, Value)):
                self.error(f"operand of {_OPNAME.get(op, op)} must be a tile or scalar, got {_describe(a)}")
            if isinstance(a, Value) and a.is_tile and a.type.space is not UB:
                self.error(f"vector ops read UB tiles; this operand is in {a.type.space} "
                           f"(copy or hand it to the vector side first)")
        shape = self._broadcast([a.type.shape for a in tile_args])
        if op == "where":
            cond, x, y = tiles
            if not (isinstance(cond, Value) and cond.is_tile and cond.type.dtype == bool_):
                self.error("where's condition must be a bool tile (a comparison result)")
            if not any(isinstance(a, Value) and a.is_tile for a in (x, y)):
                # two scalar arms: float32 (or int32 for two integers), the natural dtypes of vector values
                ints = all((is_const(a) and isinstance(a, int)) or (isinstance(a, Value) and a.type == INDEX)
                           for a in (x, y))
                dt = int32 if ints else float32
            else:
                dt = self._common_dtype([x, y], op)
            rt = dt
        else:
            dt = self._common_dtype(tiles, op)
            if op in _FLOAT_ONLY and not dt.is_float:
                self.error(f"{_OPNAME.get(op, op)} needs a float tile, got {dt}")
            if op in _INT_ONLY and dt.is_float:
                self.error(f"{_OPNAME.get(op, op)} needs integer or bool tiles, got {dt}")
            if op == "not" and not (dt.is_bool or dt.is_int):
                self.error(f"~ needs a bool or integer tile, got {dt}")
            if op in ("lshift", "rshift"):
                if dt.is_bool:
                    self.error(f"{_OPNAME[op]} needs integer tiles, got {dt}")
                amount = tiles[1]
                if is_const(amount) and not (isinstance(amount, int) and 0 <= amount < dt.bits):
                    self.error(f"{_OPNAME[op]}: the shift amount {amount!r} is outside [0, {dt.bits}) for a {dt} tile")
            rt = bool_ if op in _CMP else dt
        return self.emit("ewise", tiles, [TileType(rt, UB, shape)], {"op": op, "dtype": dt.name}).result

    def pow(self, x, y) -> Value:
        """x ** y with a tile operand: a constant integer exponent 0..POW_BY_MULTIPLIES becomes multiplies of x
        (binary exponentiation; each product rounds to the tile dtype as the chip's Mul does; integer tiles
        too); any other exponent is the float ``pow`` op (tile ** scalar, scalar ** tile, tile ** tile)."""
        self._require_scope("** (pow)", "vector")
        for name, v in (("x", x), ("y", y)):
            if isinstance(v, Value) and v.is_tile and v.type.dtype.is_bool:
                self.error(f"pow({name}=...): {name} is a bool tile; pow needs numeric tiles")
        n = _small_exponent(y)
        if n is not None and isinstance(x, Value) and x.is_tile:
            x = self.use(x)
            if n == 0:   # ones with x's shape and valid extents (pow(x, 0) = 1 also for inf and NaN)
                return self.create(x.type.shape, 1, x.type.dtype, UB, valid=list(self.shapes(x)))
            return _by_multiplies(x, n, lambda a, b: self.ewise("mul", a, b), None)
        tile = next((v for v in (x, y) if isinstance(v, Value) and v.is_tile), None)
        if tile is not None and not tile.type.dtype.is_float:
            self.error(f"pow of a {tile.type.dtype} tile needs a constant integer exponent in "
                       f"0..{POW_BY_MULTIPLIES}, got {_describe(y)}; cast the tile to a float dtype first")
        return self.ewise("pow", x, y)

    def _broadcast(self, shapes) -> tuple:
        if not shapes:
            self.error("an elementwise op needs at least one tile operand")
        ranks = {len(s) for s in shapes}
        if len(ranks) > 1:
            self.error("mixing a rank-1 tile with a rank-2 tile: broadcast explicitly with v[:, None] (per row) "
                       "or v[None, :] (per column)")
        out = []
        for dims in zip(*shapes):
            big = {d for d in dims if d != 1}
            if len(big) > 1:
                self.error(f"tile shapes {' and '.join(map(str, shapes))} do not broadcast")
            out.append(big.pop() if big else 1)
        return tuple(out)

    def _common_dtype(self, args, op) -> DType:
        dts = {a.type.dtype for a in args if isinstance(a, Value) and a.is_tile}
        if len(dts) > 1:
            self.error(f"{_OPNAME.get(op, op)} operands have different dtypes {sorted(d.name for d in dts)}; "
                       f"cast one of them first")
        if not dts:
            self.error(f"{_OPNAME.get(op, op)} needs a tile operand")
        dt = dts.pop()
        for a in args:
            if isinstance(a, float) and not dt.is_float:
                self.error(f"a float scalar operand with a {dt} tile; cast the tile or use an int")
            if isinstance(a, Value) and a.is_scalar and a.type == F32 and not dt.is_float:
                self.error(f"a float scalar operand with a {dt} tile; cast the tile first")
        return dt

    def cast(self, x, dtype, rounding: str = "rint") -> Value:
        self._require_scope("cast", "vector")
        x = self.use(self._tile(x, "cast's operand"))
        dt = dtype_of(dtype)
        if dt is float8_e4m3fn:
            self.error("cast to float8_e4m3fn: FP8 tiles come only from loads of FP8 tensors (the language does "
                       "not round to FP8)")
        if x.type.space is not UB:
            self.error(f"cast reads a UB tile, got a {x.type.space} tile")
        if rounding not in ("rint", "round", "trunc", "floor", "ceil"):
            self.error(f"cast rounding must be rint, round, trunc, floor or ceil, got {rounding!r}")
        src = x.type.dtype
        if src.is_float and dt.is_float and dt.bits < src.bits and rounding not in ("rint", "round"):
            self.error(f"a float narrowing cast ({src} -> {dt}) rounds rint (ties to even) or round (ties away "
                       f"from zero), got {rounding!r}")
        if dt == x.type.dtype:
            return x   # a cast to the tile's own dtype changes no value: no op (the Ascend C Cast would round)
        return self.emit("cast", [x], [x.type.with_(dtype=dt)], {"to": dt.name, "rounding": rounding}).result

    def reduce(self, op: str, x) -> Value:
        self._require_scope(f"row{op}", "vector")
        x = self.use(self._tile(x, f"row{op}'s operand"))
        self._read_only_fp8([x], f"row{op}")
        if x.type.rank != 2:
            self.error(f"row{op} reduces the columns of a rank-2 tile, got rank {x.type.rank}")
        if x.type.space is not UB:
            self.error(f"row{op} reads a UB tile, got a {x.type.space} tile")
        if not (x.type.dtype.is_float or x.type.dtype.is_int):
            self.error(f"row{op} needs a numeric tile, got {x.type.dtype}")
        rt = x.type.with_(shape=(x.type.shape[0],))
        return self.emit("reduce", [x], [rt], {"op": op}).result

    def gather(self, table: Window, idx) -> Value:
        """result[i] = table[idx[i]]: ``table`` a rank-1 window whose ``valid`` is the table's extent (an index
        must lie in [0, valid) and its element inside the dimension's bound; the simulator checks each one),
        ``idx`` an integer UB tile; the result is a UB tile of idx's shape and the table's dtype."""
        self._require_scope("gather", "vector")
        idx = self.use(self._tile(idx, "gather's idx"))
        if idx.type.space is not UB:
            self.error(f"gather's idx must be a UB tile, got a {idx.type.space} tile")
        if not idx.type.dtype.is_int:
            self.error(f"gather's idx must be an integer tile, got {idx.type.dtype}")
        t = TileType(table.tensor.type.dtype, UB, idx.type.shape)
        return self.emit("gather", [idx], [t], windows={"table": table}).result

    def device_print(self, name: str, value) -> None:
        """A ``device_print`` op of ``value`` (a tile or a scalar) with the induction variables of the loops
        around it as further operands (printed with their names), in the current scope."""
        if self.scope is None:
            self.error("device_print is a tile op; put it inside `with cube():` or `with vector():` (the core "
                       "that prints)")
        if not isinstance(name, str):
            self.error(f"device_print(name=...): name must be a compile-time string, got {_describe(name)}")
        if isinstance(value, Value) and value.is_tile:
            value = self.use(value)
        elif not (is_const(value) or (isinstance(value, Value) and value.is_scalar)):
            self.error(f"device_print(value=...): value must be a tile or a scalar, got {_describe(value)}")
        loops = [b.args[0] for b in self.blocks if b.args]
        self.emit("device_print", [value, *loops], [], {"name": name, "loop_names": [v.name or "i" for v in loops]})

    def expand(self, x, axis: int) -> Value:
        x = self.use(self._tile(x, "broadcast operand"))
        if x.type.rank != 1:
            self.error(f"v[:, None] / v[None, :] broadcast a rank-1 tile, got rank {x.type.rank}")
        n = x.type.shape[0]
        shape = (n, 1) if axis == 1 else (1, n)
        return self.emit("expand", [x], [x.type.with_(shape=shape)], {"axis": axis}).result


_OPNAME = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "mod": "%", "lt": "<", "le": "<=",
           "gt": ">", "ge": ">=", "eq": "==", "ne": "!=", "and": "&", "or": "|", "xor": "^", "not": "~",
           "neg": "unary -", "max": "maximum", "min": "minimum", "pow": "** (pow)", "lshift": "<<", "rshift": ">>"}


def _small_exponent(y):
    """The exponent as an int when it is a compile-time integer in 0..POW_BY_MULTIPLIES (else None)."""
    if is_const(y) and not isinstance(y, bool):
        if isinstance(y, float) and y.is_integer():
            y = int(y)
        if isinstance(y, int) and 0 <= y <= POW_BY_MULTIPLIES:
            return y
    return None


def _by_multiplies(x, n: int, mul, one):
    """x ** n (n >= 0) as products of x, by binary exponentiation (``one()``: the value of x ** 0)."""
    if n == 0:
        return one()
    result, base = None, x
    while n:
        if n & 1:
            result = base if result is None else mul(result, base)
        n >>= 1
        if n:
            base = mul(base, base)
    return result


def _fold_math(op, a, builder):
    """A float math function of a compile-time number (a float; ValueError is a compile error)."""
    import math

    x = float(a)
    try:
        if op == "rsqrt":
            return 1.0 / math.sqrt(x)
        if op == "sigmoid":
            return 1.0 / (1.0 + math.exp(-x)) if x > -700 else 0.0
        if op == "floor":
            return float(math.floor(x))
        return getattr(math, op)(x)
    except (ValueError, ZeroDivisionError, OverflowError) as e:
        builder.error(f"{op}({a!r}) at compile time: {e}")


def _describe(x) -> str:
    if isinstance(x, Value):
        return repr(x.type)
    if isinstance(x, Window):
        return f"a GM window {x.shape}"
    return f"{type(x).__name__} {x!r}"


def _identity(op, a, b):
    """x+0, 0+x, x-0, x*1, 1*x, x//1 on integer scalars simplify to x (keeps generated code readable)."""
    def is_int_const(x, v):
        return is_const(x) and not isinstance(x, bool) and isinstance(x, int) and x == v

    def int_value(x):
        return isinstance(x, Value) and x.type == INDEX

    if op == "add":
        if is_int_const(b, 0) and int_value(a):
            return a
        if is_int_const(a, 0) and int_value(b):
            return b
    elif op == "sub" and is_int_const(b, 0) and int_value(a):
        return a
    elif op == "mul":
        if is_int_const(b, 1) and int_value(a):
            return a
        if is_int_const(a, 1) and int_value(b):
            return b
    elif op == "floordiv" and is_int_const(b, 1) and int_value(a):
        return a
    elif op in ("and", "or"):
        keep = op == "and"  # True and x -> x; False or x -> x
        for c, x in ((a, b), (b, a)):
            if isinstance(c, bool) and c is keep and isinstance(x, Value) and x.type == BOOL:
                return x
    return None


def _fold(op, a, b, builder):
    try:
        return SCALAR_BINARY[op](a, b)
    except ZeroDivisionError:
        builder.error(f"division by zero in a compile-time expression ({a} {op} {b})")

