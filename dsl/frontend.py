"""The frontend: a kernel's Python AST to tile IR, as Triton's code generator does.

Model
-----
The kernel function is never executed. Its source is parsed and walked once per
specialisation; each name is bound to a *frontend value*: a compile-time Python
value (ints, floats, bools, dtypes, spaces, tuples; these fold), an IR
``Value`` (a runtime scalar or a tile), or a ``GMView`` (an address
description of a GM tensor). Statements map to IR as follows:

* ``for i in range(a, b, s)`` becomes an IR ``for`` (not unrolled); variables
  assigned in the body that exist before the loop are loop-carried (block
  arguments and results of the loop). ``static_range`` unrolls.
* ``if`` on a compile-time condition keeps one branch; on a runtime scalar it
  becomes an IR ``if`` whose results are the variables either arm assigns.
* ``with cube():`` / ``with vector():`` set the scope of the enclosed ops.
* Sub-blocks: a kernel without ``subblock_idx()`` writes each vector section
  for the whole core group (both AIVs' rows at once; the CV split divides
  them). A kernel that calls ``subblock_idx()`` / ``subblock_num()`` is walked
  twice: the first walk finds the call and the kernel kind; the second makes
  every ``with vector():`` section an IR loop over the group's vector cores
  (``subblock_num()`` = the platform's cv ratio), ``subblock_idx()`` being the
  loop variable, so program order runs AIV 0's section, then AIV 1's. Each
  vector core has its own UB and scalars: a section may not rebind a name
  that lives before it, and what it creates is not visible after it (state
  between sub-blocks and to the cube passes through GM).
* Calls to builtins lower through the ``Builder``; calls to other ``@jit`` or
  ``@inline`` functions are inlined; other Python callables run at compile
  time when every argument is a compile-time value (``math.sqrt(D)``).

Errors are ``CompilationError`` at the user's file and line.

Invariants
----------
* A variable first assigned inside a loop or an ``if`` arm is not visible
  after it (a clear error says so), and a loop-carried variable keeps one type.
* No construct outside the documented subset is silently accepted: ``while``,
  ``break``, ``continue``, ``try``, comprehensions, lambdas, tile item
  assignment and the like raise a ``CompilationError`` naming the construct.
"""

from __future__ import annotations

import ast
import builtins as _pybuiltins
import hashlib
import inspect
import textwrap
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from . import builtins as B
from .emitter import MATH_UNARY, Builder, Window, is_const
from .errors import CompilationError
from .ir import Block, Kernel, Loc, Param, Value, WDim
from .shapes import same_extents
from .types import INDEX, DType, ScalarType, Space, TensorType, int32
from .views import DynSlice, GMView, tensor_view

__all__ = ["Source", "source_of", "build_kernel", "InlineFunction"]


@dataclass
class Source:
    fn: Any
    tree: ast.FunctionDef
    filename: str
    first_line: int
    lines: list[str]
    indent: int

    @cached_property
    def digest(self) -> str:
        """The hash of the source lines (the compile cache's key part; computed once, the lines are never
        re-read for the same function object)."""
        return hashlib.sha1("\n".join(self.lines).encode()).hexdigest()[:16]

    def loc(self, node) -> Loc:
        line = getattr(node, "lineno", 1)
        col = getattr(node, "col_offset", 0) + self.indent
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        return Loc(self.filename, line + self.first_line - 1, col, text)


_SOURCES: dict[int, Source] = {}


def source_of(fn) -> Source:
    key = id(fn)
    if key in _SOURCES and _SOURCES[key].fn is fn:
        return _SOURCES[key]
    try:
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError) as e:
        raise CompilationError(f"cannot read the source of {getattr(fn, '__name__', fn)!r}: {e}") from None
    raw = "".join(lines)
    text = textwrap.dedent(raw)
    indent = len(lines[0]) - len(lines[0].lstrip())
    tree = ast.parse(text)
    fdef = tree.body[0]
    if not isinstance(fdef, ast.FunctionDef):
        raise CompilationError(f"{fn!r} is not a plain function")
    src = Source(fn, fdef, inspect.getsourcefile(fn) or "<unknown>", first, raw.splitlines(), indent)
    _SOURCES[key] = src
    return src


class InlineFunction:
    """A helper written in the kernel language and inlined at each call (``@cvtile.dsl.inline``)."""

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", "inline")
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__wrapped__ = fn

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self.__name__} is a cvtile inline function: call it from an @jit kernel")


#: the loop variable name of a sub-block section (not a Python identifier a kernel can write)
_SUBBLOCK = "subblock idx"


class _Poison:
    def __init__(self, why: str):
        self.why = why


class _Return(Exception):
    pass


_UNSUPPORTED = {
    ast.While: "while loops (use for ... in range(...))", ast.Break: "break", ast.Continue: "continue",
    ast.Try: "try/except", ast.Raise: "raise", ast.Lambda: "lambda", ast.ListComp: "list comprehensions",
    ast.SetComp: "set comprehensions", ast.DictComp: "dict comprehensions", ast.GeneratorExp: "generators",
    ast.Global: "global", ast.Nonlocal: "nonlocal", ast.Import: "import", ast.ImportFrom: "import",
    ast.ClassDef: "class definitions", ast.FunctionDef: "nested functions (use @cvtile.dsl.inline helpers)",
    ast.AsyncFunctionDef: "async", ast.Await: "await", ast.Yield: "yield", ast.Delete: "del",
    ast.JoinedStr: "f-strings", ast.Dict: "dict literals", ast.Set: "set literals", ast.Starred: "*args",
    ast.NamedExpr: "the := operator",
}

_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv", ast.FloorDiv: "floordiv",
           ast.Mod: "mod", ast.BitAnd: "and", ast.BitOr: "or", ast.BitXor: "xor", ast.LShift: "lshift",
           ast.RShift: "rshift", ast.Pow: "pow"}
_CMPOPS = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne"}
_PY_FOLDABLE = {"min", "max", "abs", "int", "float", "bool", "len", "range", "print", "isinstance", "round"}


class FunctionCompiler(ast.NodeVisitor):
    """Walks one function's body (a kernel or an inlined helper) into the shared Builder."""

    def __init__(self, builder: Builder, src: Source, names: dict, depth: int = 0):
        self.b = builder
        self.src = src
        self.names = names
        self.depth = depth
        fn = src.fn
        self.globals = dict(getattr(fn, "__globals__", {}))
        if getattr(fn, "__closure__", None):
            for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
                try:
                    self.globals[name] = cell.cell_contents
                except ValueError:
                    pass
        self.returned = None
        self.has_return = False

    # ---------------------------------------------------------------- helpers
    def err(self, message: str, node=None):
        if node is not None:
            self.b.loc = self.src.loc(node)
        raise CompilationError(message, self.b.loc)

    def at(self, node):
        self.b.loc = self.src.loc(node)

    def generic_visit(self, node):
        what = _UNSUPPORTED.get(type(node), type(node).__name__)
        self.err(f"cvtile kernels do not support {what}", node)

    def lookup(self, name: str, node):
        if name in self.names:
            v = self.names[name]
            if isinstance(v, _Poison):
                self.err(v.why, node)
            return v
        if name in self.globals:
            return self.globals[name]
        if hasattr(_pybuiltins, name):
            if name in _PY_FOLDABLE or name in ("None", "True", "False"):
                return getattr(_pybuiltins, name)
            self.err(f"the Python builtin {name}() is not available in kernels", node)
        self.err(f"name {name!r} is not defined", node)

    # -------------------------------------------------------------- statements
    def run(self, stmts):
        for i, st in enumerate(stmts):
            if self.has_return:
                self.err("code after return is not supported", st)
            self.visit_stmt(st, last=(i == len(stmts) - 1))

    def visit_stmt(self, st, last=False):
        self.at(st)
        if isinstance(st, ast.Return):
            if self.depth == 0:
                self.err("kernels write their results to GM tensors; `return` is not allowed in a kernel", st)
            if not last or self._nested:
                self.err("an inline function may only return at the end of its body", st)
            self.returned = self.eval(st.value) if st.value is not None else None
            self.has_return = True
            return
        method = getattr(self, "stmt_" + type(st).__name__, None)
        if method is None:
            self.generic_visit(st)
        method(st)

    _nested = 0

    def stmt_Pass(self, st):
        pass

    def stmt_Expr(self, st):
        if isinstance(st.value, ast.Constant) and isinstance(st.value.value, str):
            return  # docstring
        self.eval(st.value)

    def stmt_Assign(self, st):
        value = self.eval(st.value)
        for target in st.targets:
            self.assign(target, value)

    def stmt_AnnAssign(self, st):
        if st.value is None:
            self.err("a bare annotation declares nothing in a kernel", st)
        self.assign(st.target, self.eval(st.value))

    def stmt_AugAssign(self, st):
        if not isinstance(st.target, ast.Name):
            self.err("augmented assignment needs a plain variable", st)
        cur = self.lookup(st.target.id, st)
        value = self.binop(_BINOPS.get(type(st.op)), cur, self.eval(st.value), st)
        self.assign(st.target, value)

    def assign(self, target, value):
        if isinstance(target, ast.Name):
            if isinstance(value, Value) and value.name is None:
                value.name = target.id
            self.names[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            if not isinstance(value, (tuple, list)) or len(value) != len(target.elts):
                self.err(f"cannot unpack {_desc(value)} into {len(target.elts)} names", target)
            for t, v in zip(target.elts, value):
                self.assign(t, v)
        elif isinstance(target, ast.Subscript):
            self.err("tiles are values: item assignment is not supported (build a new tile with where/ops)", target)
        else:
            self.err(f"cannot assign to {type(target).__name__}", target)

    def stmt_Assert(self, st):
        cond = self.eval(st.test)
        msg = self.eval(st.msg) if st.msg is not None else "assertion failed"
        if is_const(cond):
            if not cond:
                self.err(f"static assertion failed: {msg}", st)
            return
        if isinstance(cond, Value) and cond.is_scalar:
            self.b.check(cond, f"assertion failed: {msg}")
            return
        self.err("assert needs a scalar condition", st)

    def stmt_With(self, st):
        if len(st.items) != 1:
            self.err("one scope per with-statement", st)
        item = st.items[0]
        ctx = item.context_expr
        marker = self.eval(ctx.func) if isinstance(ctx, ast.Call) else self.eval(ctx)
        if not isinstance(marker, B.ScopeMarker):
            self.err("with-statements in kernels take cube() or vector()", st)
        if item.optional_vars is not None:
            self.err(f"`with {marker.name}()` binds no name", st)
        if self.b.scope is not None:
            self.err(f"`with {marker.name}():` inside `with {self.b.scope}():`: scopes do not nest", st)
        self.b.scope = marker.name
        try:
            self._nested += 1
            if marker.name == "vector" and self.b.subblocks:
                self._subblock_section(st)
            else:
                self.run(st.body)
        finally:
            self._nested -= 1
            self.b.scope = None

    def _subblock_section(self, st):
        """``with vector():`` of a kernel that uses sub-blocks: a loop over the group's vector cores."""
        line = self.src.loc(st).line
        before = dict(self.names)
        for name in sorted(_assigned_names(st.body)):
            v = before.get(name)
            if v is not None and not isinstance(v, _Poison) and _carryable(v):
                self.err(f"`with vector():` rebinds {name!r}, which lives before the section: the kernel uses "
                         f"subblock_idx(), so each vector core runs the section on its own UB and scalars and no "
                         f"value passes from one sub-block's run to the next; keep such state in GM", st)
        loop = ast.For(target=ast.Name(id=_SUBBLOCK, ctx=ast.Store()), iter=ast.Constant(None), body=st.body,
                       orelse=[])
        ast.copy_location(loop, st)
        ast.copy_location(loop.target, st)
        self.runtime_for(loop, 0, self.b.subblocks, 1)
        self.names.pop(_SUBBLOCK, None)
        for name, v in list(self.names.items()):
            if name not in before and isinstance(v, _Poison):
                self.names[name] = _Poison(
                    f"{name!r} is first assigned inside the `with vector():` section at line {line}, which runs "
                    f"once per vector core (the kernel uses subblock_idx()), so it is not visible after it; pass "
                    f"it through GM")

    def stmt_If(self, st):
        cond = self.eval(st.test)
        if is_const(cond) or cond is None or not isinstance(cond, Value):
            if isinstance(cond, (GMView, Window)):
                self.err("a GM view is not a condition", st.test)
            taken = st.body if cond else st.orelse
            self._nested += 1
            try:
                self.run(taken)
            finally:
                self._nested -= 1
            return
        if not cond.is_scalar:
            self.err("if needs a scalar condition; for tiles use where(...)", st.test)
        if cond.type.dtype.name != "bool":
            cond = self.b.sbin("ne", cond, 0)
        self.runtime_if(st, cond)

    def runtime_if(self, st, cond):
        before = dict(self.names)
        arms = []
        for body in (st.body, st.orelse):
            self.names = dict(before)
            block = Block()
            self.b.push_block(block)
            self._nested += 1
            try:
                self.run(body)
            finally:
                self._nested -= 1
                self.b.pop_block()
            arms.append((block, self.names))
        self.names = before
        assigned = _assigned_names(st.body) | _assigned_names(st.orelse)
        results = []
        for name in sorted(assigned):
            vt, ve = arms[0][1].get(name), arms[1][1].get(name)
            if vt is None or ve is None:
                if name in before:
                    vt = before[name] if vt is None else vt
                    ve = before[name] if ve is None else ve
                else:
                    self.names[name] = _Poison(f"{name!r} is assigned in only one arm of the if at line "
                                               f"{self.src.loc(st).line}; assign it before the if")
                    continue
            if vt is ve:
                continue
            if not _carryable(vt) or not _carryable(ve):
                self.names[name] = _Poison(f"{name!r} is rebound to a non-value in an if at line "
                                           f"{self.src.loc(st).line}; only scalars and tiles can differ by branch")
                continue
            results.append((name, vt, ve))
        types = []
        for (block, _), idx in ((arms[0], 1), (arms[1], 2)):
            vals = []
            self.b.push_block(block)
            try:
                for name, vt, ve in results:
                    v = (vt, ve)[idx - 1]
                    vals.append(v)
                vals = [self._materialize(v, results[i], types, i) for i, v in enumerate(vals)]
                self.b.emit("yield", vals, [], scope=None)
            finally:
                self.b.pop_block()
            if not types:
                types = [v.type for v in vals]
            else:
                for (name, _, _), t, v in zip(results, types, vals):
                    if v.type != t:
                        self.err(f"{name!r} has type {t!r} in one arm of the if and {v.type!r} in the other", st)
        self.at(st)
        op = self.b.emit("if", [cond], types, blocks=[arms[0][0], arms[1][0]], scope=None,
                         names=[r[0] for r in results])
        self.b.shapes.add_if(op)
        for i, ((name, vt, ve), r) in enumerate(zip(results, op.results)):
            self.names[name] = r
            if r.is_tile:   # the result lives where its arms computed it (a cube tile is handed off on use)
                self.b.value_scope[r.id] = self.b.value_scope.get(vt.id) or self.b.value_scope.get(ve.id)
            if r.is_tile:
                chosen = self.b.shapes(r)
                for arm in op.blocks:
                    y = arm.ops.pop()
                    self.b.push_block(arm)
                    try:
                        self._same_extents(y.args[i], chosen, f"the tile {name!r} has different valid extents in "
                                           f"the two arms of the if at line {self.src.loc(st).line}")
                    finally:
                        self.b.pop_block()
                    arm.ops.append(y)

    def _same_extents(self, tile, want, message):
        """Runtime checks (where not equal by construction) that ``tile``'s valid extents are ``want``."""
        have = self.b.shapes(tile)
        if same_extents(have, want):
            return
        for d, (h, w) in enumerate(zip(have, want)):
            if not same_extents((h,), (w,)):
                self.b.check(self.b.sbin("eq", h, w), f"{message} (dim {d})", h, w, labels=("valid", "expected"))

    def _materialize(self, v, result, types, i):
        if isinstance(v, Value):
            return v
        # a compile-time value in one arm: give it the other arm's scalar type
        other = result[2] if v is result[1] else result[1]
        if isinstance(other, Value) and other.is_scalar:
            return self.b.value(self.b.scast(v, other.type.dtype))
        return self.b.value(v)

    def stmt_For(self, st):
        if st.orelse:
            self.err("for-else is not supported", st)
        if not isinstance(st.target, ast.Name):
            self.err("the loop variable must be a plain name", st.target)
        it = st.iter
        if not isinstance(it, ast.Call):
            self.err("kernels loop over range(...) or static_range(...)", it)
        fn = self.eval(it.func)
        args = [self.eval(a) for a in it.args]
        if it.keywords:
            self.err("range takes positional arguments", it)
        if fn is B.BUILTINS["static_range"]:
            return self.static_for(st, args)
        if fn is not range:
            self.err("kernels loop over range(...) or static_range(...)", it)
        if not 1 <= len(args) <= 3:
            self.err("range takes 1 to 3 arguments", it)
        lo, hi, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) == 3 else 1)
        for a in (lo, hi, step):
            if not ((is_const(a) and isinstance(a, int) and not isinstance(a, bool))
                    or (isinstance(a, Value) and a.type == INDEX)):
                self.err(f"range bounds must be integers, got {_desc(a)}", it)
        if is_const(step) and step == 0:
            self.err("range step must not be zero", it)
        self.runtime_for(st, lo, hi, step)

    def static_for(self, st, args):
        for a in args:
            if not (is_const(a) and isinstance(a, int)):
                self.err("static_range needs compile-time int bounds", st.iter)
        for i in range(*args):
            self.names[st.target.id] = i
            self._nested += 1
            try:
                self.run(st.body)
            finally:
                self._nested -= 1

    def runtime_for(self, st, lo, hi, step):
        assigned = _assigned_names(st.body)
        carried = []
        for name in sorted(assigned):
            if name == st.target.id or name not in self.names:
                continue
            cur = self.names[name]
            if isinstance(cur, _Poison):
                continue
            if not _carryable(cur):
                continue
            carried.append(name)
        inits = []
        for name in carried:
            v = self.names[name]
            inits.append(self.b.value(v))
        body = Block()
        var = "subblock" if st.target.id == _SUBBLOCK else st.target.id
        iv = Value(INDEX, var)
        body.args.append(iv)
        args = []
        for name, v in zip(carried, inits):
            a = Value(v.type, name)
            self.b.value_scope[a.id] = self.b.value_scope.get(v.id)
            self.b.shapes.carry(a, v)
            args.append(a)
        body.args += args
        before = dict(self.names)
        self.names[st.target.id] = iv
        for name, a in zip(carried, args):
            self.names[name] = a
        self.b.push_block(body)
        self._nested += 1
        outer_subblock = self.b.subblock_value
        if st.target.id == _SUBBLOCK:
            self.b.subblock_value = iv  # subblock_idx() of this section (also inside inlined helpers)
        try:
            self.run(st.body)
            outs = []
            for name, init in zip(carried, inits):
                v = self.names.get(name)
                if isinstance(v, _Poison):
                    self.err(v.why, st)
                if not isinstance(v, Value) and not is_const(v):
                    self.err(f"loop-carried {name!r} becomes {_desc(v)} in the loop body; it must stay a "
                             f"{init.type!r}", st)
                if is_const(v):
                    v = self.b.value(self.b.scast(v, init.type.dtype) if init.is_scalar else v)
                if v.type != init.type:
                    where = v.owner.loc if v.owner is not None and v.owner.loc is not None else self.src.loc(st)
                    raise CompilationError(f"loop-carried {name!r} changes type in the loop: {init.type!r} before, "
                                           f"{v.type!r} at the end of the body (loop at line "
                                           f"{self.src.loc(st).line})", where)
                outs.append(v)
            self.at(st)
            for name, init, v in zip(carried, inits, outs):
                if v.is_tile:
                    self._same_extents(v, self.b.shapes(init), f"loop-carried tile {name!r} must keep the valid "
                                       f"extents of its initial value (loop at line {self.src.loc(st).line})")
            self.b.emit("yield", outs, [], scope=None)
        finally:
            self._nested -= 1
            self.b.subblock_value = outer_subblock
            self.b.pop_block()
        after = before
        for name in assigned | {st.target.id}:
            if name not in carried:
                if name in before and not _carryable(before[name]) and name != st.target.id:
                    after[name] = _Poison(f"{name!r} is rebound inside the loop at line {self.src.loc(st).line}; "
                                          f"GM views and helpers cannot be loop-carried")
                elif name not in before:
                    after[name] = _Poison(f"{name!r} is first assigned inside the loop at line "
                                          f"{self.src.loc(st).line} and is not visible after it; "
                                          f"assign it before the loop")
        self.names = after
        self.at(st)
        op = self.b.emit("for", [lo, hi, step, *inits], [v.type for v in inits], blocks=[body], scope=None,
                         names=carried)
        op.attrs["var"] = var
        if st.target.id == _SUBBLOCK:
            op.attrs["subblock"] = True
        self.b.shapes.add_loop(op)
        for name, r in zip(carried, op.results):
            self.names[name] = r

    # ------------------------------------------------------------- expressions
    def eval(self, node):
        self.at(node)
        method = getattr(self, "expr_" + type(node).__name__, None)
        if method is None:
            self.generic_visit(node)
        out = method(node)
        self.at(node)
        return out

    def expr_Constant(self, node):
        return node.value

    def expr_Name(self, node):
        return self.lookup(node.id, node)

    def expr_Tuple(self, node):
        return tuple(self.eval(e) for e in node.elts)

    expr_List = expr_Tuple

    def expr_Slice(self, node):
        lo = self.eval(node.lower) if node.lower is not None else None
        hi = self.eval(node.upper) if node.upper is not None else None
        st = self.eval(node.step) if node.step is not None else None
        return slice(lo, hi, st)

    def expr_Attribute(self, node):
        obj = self.eval(node.value)
        attr = node.attr
        if isinstance(obj, Value):
            if obj.is_tile:
                if attr == "shape":
                    return obj.type.shape
                if attr == "dtype":
                    return obj.type.dtype
                if attr == "space":
                    return obj.type.space
                self.err(f"tiles have .shape, .dtype and .space, not .{attr}", node)
            self.err(f"a scalar has no attribute .{attr}", node)
        if isinstance(obj, GMView):
            if attr in ("shape", "dtype", "ndim", "reshape", "split", "permute", "merge", "narrow", "broadcast",
                        "paged"):
                return getattr(obj, attr)
            self.err(f"GM views have .shape, .dtype, .ndim, .reshape, .split, .permute, .merge, .narrow, "
                     f".broadcast, .paged; not .{attr}", node)
        try:
            return getattr(obj, attr)
        except AttributeError:
            self.err(f"{_desc(obj)} has no attribute {attr!r}", node)

    def expr_Subscript(self, node):
        obj = self.eval(node.value)
        key = self.eval(node.slice)
        if isinstance(obj, GMView):
            return obj.index(key)
        if isinstance(obj, Value) and obj.is_tile:
            return self.tile_subscript(obj, key, node)
        if isinstance(obj, (tuple, list)):
            if isinstance(key, int) or isinstance(key, slice):
                try:
                    return obj[key]
                except IndexError:
                    self.err(f"index {key} out of range for a tuple of {len(obj)}", node)
            self.err("tuples are indexed with compile-time ints", node)
        self.err(f"{_desc(obj)} is not subscriptable in a kernel", node)

    def tile_subscript(self, t, key, node):
        full = slice(None, None, None)
        if isinstance(key, tuple) and len(key) == 2:
            if key[0] == full and key[1] is None:
                return self.b.expand(t, 1)
            if key[0] is None and key[1] == full:
                return self.b.expand(t, 0)
        self.err("tiles support v[:, None] and v[None, :] broadcasts only (no element access or slicing)", node)

    def expr_IfExp(self, node):
        cond = self.eval(node.test)
        if is_const(cond) or cond is None:
            return self.eval(node.body) if cond else self.eval(node.orelse)
        a, b = self.eval(node.body), self.eval(node.orelse)
        if (isinstance(a, Value) and a.is_tile) or (isinstance(b, Value) and b.is_tile):
            self.err("a conditional expression on tiles: use where(cond, a, b)", node)
        return self.b.sselect(cond, a, b)

    def expr_UnaryOp(self, node):
        v = self.eval(node.operand)
        op = node.op
        if isinstance(v, Value) and v.is_tile:
            if isinstance(op, ast.USub):
                return self.b.ewise("neg", v)
            if isinstance(op, ast.UAdd):
                return v
            if isinstance(op, ast.Invert):
                return self.b.ewise("not", v)
            self.err("`not` on a tile: use ~", node)
        if isinstance(op, ast.UAdd):
            return v
        if is_const(v) or v is None:
            return {ast.USub: lambda x: -x, ast.Not: lambda x: not x, ast.Invert: lambda x: ~x}[type(op)](v)
        if isinstance(op, ast.USub):
            return self.b.sun("neg", v)
        if isinstance(op, ast.Not):
            return self.b.sun("not", v)
        return self.b.sbin("xor", v, -1)

    def expr_BinOp(self, node):
        a, b = self.eval(node.left), self.eval(node.right)
        op = _BINOPS.get(type(node.op))
        if op is None:
            self.err(f"operator {type(node.op).__name__} is not supported", node)
        return self.binop(op, a, b, node)

    def binop(self, op, a, b, node):
        if (isinstance(a, Value) and a.is_tile) or (isinstance(b, Value) and b.is_tile):
            if op == "pow":
                return self.b.pow(a, b)
            return self.b.ewise({"truediv": "div"}.get(op, op), a, b)
        if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)) and op == "add":
            return tuple(a) + tuple(b)
        for x in (a, b):
            if not (is_const(x) or (isinstance(x, Value) and x.is_scalar)):
                self.err(f"operator {op} on {_desc(x)}", node)
        return self.b.sbin(op, a, b)

    def expr_BoolOp(self, node):
        is_and = isinstance(node.op, ast.And)
        result, first = None, True
        for sub in node.values:
            v = self.eval(sub)
            if isinstance(v, Value) and v.is_tile:
                self.err("and/or on tiles: use & and |", sub)
            folded = first or is_const(result)   # everything so far was compile-time (and not decisive)
            if is_const(v) and ((is_and and not v) or (not is_and and v)):
                # a decisive compile-time operand ends the chain, as Python's short circuit does
                return v if folded else (not is_and)
            if folded:
                result = v
            elif not is_const(v):
                result = self.b.sbin("and" if is_and else "or", self._as_bool(result), self._as_bool(v))
            first = False
        return result

    def _as_bool(self, v):
        if isinstance(v, Value) and v.type.dtype.name != "bool":
            return self.b.sbin("ne", v, 0)
        return v

    def expr_Compare(self, node):
        left = self.eval(node.left)
        result = None
        for opnode, rnode in zip(node.ops, node.comparators):
            right = self.eval(rnode)
            if isinstance(opnode, (ast.Is, ast.IsNot)):
                if isinstance(left, Value) or isinstance(right, Value):
                    if left is None or right is None:
                        r = isinstance(opnode, ast.IsNot)  # a value is never None
                    else:
                        self.err("`is` compares compile-time values only", node)
                else:
                    r = (left is right) if isinstance(opnode, ast.Is) else (left is not right)
            elif isinstance(opnode, (ast.In, ast.NotIn)):
                if isinstance(left, Value) or not isinstance(right, (tuple, list, str)):
                    self.err("`in` tests compile-time values against a tuple", node)
                r = (left in right) if isinstance(opnode, ast.In) else (left not in right)
            else:
                op = _CMPOPS[type(opnode)]
                if (isinstance(left, Value) and left.is_tile) or (isinstance(right, Value) and right.is_tile):
                    r = self.b.ewise(op, left, right)
                elif isinstance(left, (DType, Space, str, type(None))) or isinstance(right, (DType, Space, str)):
                    r = (left == right) if op == "eq" else (left != right) if op == "ne" else \
                        self.err(f"cannot order {_desc(left)} and {_desc(right)}", node)
                else:
                    r = self.b.sbin(op, left, right)
            result = r if result is None else self.binop("and", result, r, node)
            left = right
        return result

    def expr_Call(self, node):
        fn = self.eval(node.func)
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                self.err("*args is not supported in kernels", a)
            args.append(self.eval(a))
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                self.err("**kwargs is not supported in kernels", kw)
            kwargs[kw.arg] = self.eval(kw.value)
        self.at(node)
        return self.call(fn, args, kwargs, node)

    def call(self, fn, args, kwargs, node):
        if isinstance(fn, B.ScopeMarker):
            self.err(f"{fn.name}() is used as `with {fn.name}():`", node)
        if isinstance(fn, B.Builtin):
            try:
                bound = fn.bind(args, kwargs)
            except TypeError as e:
                self.err(f"{fn.name}: {e}; the builtin is {fn.__doc__.splitlines()[0]}", node)
            return getattr(self, "bi_" + fn.name)(*bound.args, **bound.kwargs)
        if isinstance(fn, InlineFunction) or hasattr(fn, "__cvtile_jit__"):
            target = fn.fn if isinstance(fn, InlineFunction) else fn.fn
            return self.inline(target, args, kwargs, node)
        if isinstance(getattr(fn, "__self__", None), GMView):
            return fn(*args, **kwargs)  # view algebra: emits scalar address arithmetic
        if fn is range:
            self.err("range() is only allowed as a for-loop iterator", node)
        if fn in (min, max) and args and not kwargs:
            vals = list(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else list(args)
            if any(isinstance(v, Value) and v.is_tile for v in vals):
                self.err(f"{fn.__name__}() on tiles: use maximum/minimum", node)
            out = vals[0]
            for v in vals[1:]:
                out = self.b.sbin("min" if fn is min else "max", out, v)
            return out
        if fn is abs and len(args) == 1:
            v = args[0]
            if isinstance(v, Value) and v.is_tile:
                return self.b.ewise("abs", v)
            return self.b.sun("abs", v)
        if fn in (int, float, bool) and len(args) == 1 and isinstance(args[0], Value):
            if not args[0].is_scalar:
                self.err(f"{fn.__name__}() of a tile: use cast(tile, dtype)", node)
            return self.b.scast(args[0], {int: "int64", float: "float32", bool: "bool"}[fn])
        if fn is print:
            if any(isinstance(a, Value) for a in args):
                self.err("print() shows compile-time values only", node)
            print(*args, **kwargs)
            return None
        if fn is len and len(args) == 1 and isinstance(args[0], GMView):
            return args[0].ndim
        if fn is len and len(args) == 1 and isinstance(args[0], (tuple, list)):
            return len(args[0])  # a tuple's length is static even when it holds runtime values
        if callable(fn) and all(_compile_time(a) for a in args) and all(_compile_time(v) for v in kwargs.values()):
            try:
                return fn(*args, **kwargs)
            except CompilationError:
                raise
            except Exception as e:  # a compile-time helper failed: report at the call site
                self.err(f"compile-time call {getattr(fn, '__name__', fn)}(...) failed: {type(e).__name__}: {e}",
                         node)
        self.err(f"{getattr(fn, '__name__', repr(fn))}() cannot be called with runtime values in a kernel "
                 f"(only builtins, @jit/@inline helpers and compile-time Python functions)", node)

    def inline(self, fn, args, kwargs, node):
        if self.depth > 32:
            self.err("inline calls nest too deeply (recursion?)", node)
        src = source_of(fn)
        sig = inspect.signature(fn)
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            self.err(f"calling {fn.__name__}: {e}", node)
        bound.apply_defaults()
        sub = FunctionCompiler(self.b, src, dict(bound.arguments), self.depth + 1)
        saved = self.b.loc
        sub.run(src.tree.body)
        self.b.loc = saved
        return sub.returned

    # ---------------------------------------------------------------- builtins
    def bi_block_idx(self):
        return self.b.emit("block_idx", [], [INDEX], scope=None).result

    def bi_block_num(self):
        return self.b.emit("block_num", [], [INDEX], scope=None).result

    def bi_subblock_idx(self):
        if self.b.scope != "vector":
            self.err("subblock_idx() outside `with vector():`: only the vector cores of a core group have a "
                     "sub-block index")
        if self.b.subblocks is None:  # first walk: note the use, stand in a runtime index
            self.b.subblock_use = self.b.subblock_use or self.b.loc
            return self.b.emit("subblock_idx", [], [INDEX], scope=None).result
        return self.b.subblock_value

    def bi_subblock_num(self):
        if self.b.subblocks is None:
            self.b.subblock_use = self.b.subblock_use or self.b.loc
            return self.b.platform.cv_ratio
        return self.b.subblocks

    def _window(self, v, what):
        if isinstance(v, GMView):
            return v.window(what)
        self.err(f"{what} needs a GM view (a sliced kernel tensor), got {_desc(v)}")

    def bi_load(self, view, space=None):
        return self.b.load(self._window(view, "load"), space)

    def bi_store(self, view, tile):
        self.b.store(self._window(view, "store"), tile)

    def bi_copy(self, tile, space):
        return self.b.copy(tile, space)

    def bi_through_gm(self, tile):
        return self.b.through_gm(tile)

    def bi_mma(self, a, b, trans_b=False, acc=None):
        a = self._window(a, "mma operand a") if isinstance(a, GMView) else a
        b = self._window(b, "mma operand b") if isinstance(b, GMView) else b
        if not is_const(trans_b):
            self.err("mma's trans_b must be a compile-time bool")
        return self.b.mma(a, b, bool(trans_b), acc)

    def bi_zeros(self, shape, dtype, space=None, valid=None):
        return self.b.create(shape, 0, dtype, space, valid)

    def bi_full(self, shape, value, dtype, space=None, valid=None):
        return self.b.create(shape, value, dtype, space, valid)

    def bi_iota(self, n, dtype=int32, start=0, valid=None):
        return self.b.iota(n, dtype, start, valid)

    def _unary(name):
        def f(self, x):
            if isinstance(x, Value) and x.is_tile:
                return self.b.ewise(name, x)
            if name in MATH_UNARY and (is_const(x) or (isinstance(x, Value) and x.is_scalar)):
                return self.b.sun(name, x)      # folds a compile-time operand; a runtime scalar is a sun op
            if name == "abs" and (is_const(x) or (isinstance(x, Value) and x.is_scalar)):
                return self.b.sun("abs", x)
            self.err(f"{name}() takes a tile or a scalar, got {_desc(x)}")
        f.__name__ = "bi_" + name
        return f

    bi_exp = _unary("exp")
    bi_log = _unary("log")
    bi_sqrt = _unary("sqrt")
    bi_rsqrt = _unary("rsqrt")
    bi_tanh = _unary("tanh")
    bi_sigmoid = _unary("sigmoid")
    bi_erf = _unary("erf")
    bi_floor = _unary("floor")
    bi_abs = _unary("abs")
    bi_relu = _unary("relu")
    del _unary

    def bi_pow(self, x, y):
        return self.binop("pow", x, y, None)

    def bi_gather(self, table, idx):
        if not isinstance(table, GMView):
            self.err(f"gather(table=...): table must be a rank-1 GM view (a kernel tensor or a view of one), got "
                     f"{_desc(table)}")
        if table.ndim != 1:
            self.err(f"gather(table=...): table must be a rank-1 GM view, got rank {table.ndim} (index or merge "
                     f"the other dims, e.g. t[b] or t.merge(0))")
        d = table.dims[0]
        if d.lookups:
            self.err("gather(table=...): a paged view (through a block table) cannot be gathered from")
        count = d.valid if d.valid is not None else (d.extent if d.extent is not None
                                                      else self.b.sbin("sub", d.bound, d.start))
        w = Window(table.tensor, table.offset,
                   [WDim(d.start, d.bound, d.extent or 0, count, list(d.radices), list(d.strides))])
        return self.b.gather(w, idx)

    def bi_device_print(self, name, value):
        self.b.device_print(name, value)

    def bi_maximum(self, a, b):
        return self.b.ewise("max", a, b)

    def bi_minimum(self, a, b):
        return self.b.ewise("min", a, b)

    def bi_where(self, cond, a, b):
        return self.b.ewise("where", cond, a, b)

    def bi_dequant(self, x, scale, dtype="float16"):
        return self.b.dequant(x, scale, dtype)

    def bi_cast(self, x, dtype, rounding="rint"):
        return self.b.cast(x, dtype, rounding)

    def bi_rowmax(self, x):
        return self.b.reduce("max", x)

    def bi_rowsum(self, x):
        return self.b.reduce("sum", x)

    def bi_rowmin(self, x):
        return self.b.reduce("min", x)

    def bi_ds(self, start, size, valid=None):
        return DynSlice(start, size, valid)

    def bi_static_assert(self, cond, msg=""):
        if not is_const(cond):
            self.err("static_assert needs a compile-time condition")
        if not cond:
            self.err(f"static_assert failed: {msg}")

    def bi_static_range(self, *args):
        self.err("static_range() is only allowed as a for-loop iterator")


def _compile_time(x) -> bool:
    if isinstance(x, (Value, GMView, Window, DynSlice)):
        return False
    if isinstance(x, (tuple, list)):
        return all(_compile_time(e) for e in x)
    return True


def _carryable(v) -> bool:
    return isinstance(v, Value) or is_const(v)


def _assigned_names(stmts) -> set:
    out = set()
    for st in stmts:
        for node in ast.walk(st):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                out.add(node.id)
    return out


def _desc(x) -> str:
    if isinstance(x, Value):
        return repr(x.type)
    if isinstance(x, GMView):
        return f"a rank-{x.ndim} GM view"
    if isinstance(x, Window):
        return "a GM window"
    return f"{type(x).__name__} {x!r}"


def build_kernel(fn, bindings: dict, platform, name: str | None = None) -> Kernel:
    """Compile ``fn`` to IR. ``bindings`` maps each parameter to ``("constexpr", value)``,
    ``("tensor", TensorType)`` or ``("scalar", ScalarType)``."""
    src = source_of(fn)
    b, kind, params, args = _walk(src, bindings, platform, None)
    if b.subblock_use is not None:
        if kind != "mixed":
            raise CompilationError("subblock_idx() / subblock_num() need a kernel with both `with cube():` and "
                                   "`with vector():` sections: in a vector-only kernel each block is one vector "
                                   "core (split the work by block_idx())", b.subblock_use)
        b, kind, params, args = _walk(src, bindings, platform, platform.cv_ratio)
    return Kernel(name or fn.__name__, params, args, b.root, src.loc(src.tree), platform.name,
                  {p.name: p.value for p in params if p.kind == "constexpr"}, kind, b.subblocks or 0)


def _walk(src: Source, bindings: dict, platform, subblocks: int | None):
    b = Builder(platform, src.filename)
    b.subblocks = subblocks
    b.loc = src.loc(src.tree)
    names: dict = {}
    params: list[Param] = []
    args: list[Value] = []
    for pname, (kind, info) in bindings.items():
        if kind == "constexpr":
            params.append(Param(pname, "constexpr", value=info))
            names[pname] = info
        elif kind == "tensor":
            assert isinstance(info, TensorType)
            v = Value(info, pname)
            params.append(Param(pname, "tensor", info))
            args.append(v)
            names[pname] = v
        elif kind == "scalar":
            assert isinstance(info, ScalarType)
            v = Value(info, pname)
            params.append(Param(pname, "scalar", info))
            args.append(v)
            names[pname] = v
        else:
            raise ValueError(f"unknown binding kind {kind!r} for {pname}")
    for pname, v in list(names.items()):
        if isinstance(v, Value) and v.is_tensor:
            names[pname] = tensor_view(b, v)
    fc = FunctionCompiler(b, src, names)
    fc.run(src.tree.body)
    kind = "mixed" if {"cube", "vector"} <= b.scopes_seen else ("aic" if "cube" in b.scopes_seen else "aiv")
    return b, kind, params, args
