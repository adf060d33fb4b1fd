"""One function of a generated simulator module, lowered from its Python text to LLVM IR.

Model
-----
``codegen`` writes each program as a function in a small, regular subset of Python (assignments, ``for``
over ``range``, ``while``, ``if``, element and slice access of flat buffers and their 2-d views, calls of
the runtime's helpers, the checks' ``fail`` records). ``FunctionLowering`` reads that text (``ast``) and
emits the function with llvmlite, in numba's calling convention, the way numba would: every typing
question goes to numba's typing context (``resolve_function_type``: the result type of ``+`` on two
values, of ``min``, of a comparison) and every scalar operation to numba's own lowering of it
(``context.get_function``, ``context.cast``), so the arithmetic is numba's to the bit (Python ``//`` and
``%``, the numpy error model's division by zero, int/float promotion). What numba's front end would
add - bytecode analysis, SSA, its type-inference engine and its per-statement lowering machinery - is
not run: the subset is typed in one forward pass, statement by statement.

Values
------
A value is a ``V`` (LLVM value, numba type). Arrays are numba array structs (meminfo and parent null),
built here for views: a 1-d slice with Python's bounds (clamped, negative from the end), a row of a 2-d
array, ``.T``; a reshape is numba's own lowering (its C helper hides the new shape from LLVM, as in numba's
compile, which keeps the runtime helpers' vectorised sums in numba's order). Elements are read and written
through ``cgutils.get_item_pointer2`` with negative indices wrapped, as numba indexes (no bounds check:
the kernel's own checks guard every GM access); ``x[a:b] = v`` fills the slice with a scalar or copies a
1-d array of its length. Locals live in entry-block allocas (LLVM promotes them);
a name keeps the type of its first assignment, and a later assignment of another type is ``Unsupported``.

Calls
-----
* ``np.int64(x)``, ``f32(x)`` (numpy scalar types): ``context.cast``.
* ``min``, ``max``, ``abs``: numba's builtins.
* Runtime helpers (numba dispatchers): compiled by numba for the argument types (loaded from numba's
  cache when it has them), called in numba's calling convention, their library linked into the kernel's
  (LLVM inlines them where numba would). A helper numba inlines at its IR level (``inline="always"``) is
  compiled once as a cached function of its own (``twin``) and inlined by LLVM instead: the same
  operations with the flags numba lowers them with when it inlines them, the kernel's (no fast-math, the
  numpy error model; a helper's own ``fastmath`` does not reach a caller that inlines it). An error status
  a helper returns is propagated.
* ``fail`` / ``fail_first``: the error record written here, as ``rt.fail`` writes it.

Anything outside the subset raises ``Unsupported`` naming the construct and its line; the caller then
compiles the module with numba.
"""

from __future__ import annotations

import ast
import operator
import types as pytypes

import numpy as np
from llvmlite import ir
from numba import from_dtype, njit, types
from numba.core import cgutils
from numba.core.dispatcher import Dispatcher
from numba.np.arrayobj import populate_array

from ..stamp import source_stamp

__all__ = ["FunctionLowering", "Unsupported", "V", "twin"]


class Unsupported(Exception):
    """A construct the direct compiler does not lower (the module is compiled by numba instead)."""


class V:
    """A lowered value: ``value`` (an LLVM value; a tuple's items for ``items``) and its numba type."""

    __slots__ = ("value", "ty", "items")

    def __init__(self, value, ty, items=None):
        self.value, self.ty, self.items = value, ty, items


_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.BitAnd: operator.and_,
           ast.BitOr: operator.or_, ast.BitXor: operator.xor, ast.LShift: operator.lshift,
           ast.RShift: operator.rshift, ast.Pow: operator.pow}
_CMPOPS = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
           ast.Eq: operator.eq, ast.NotEq: operator.ne}
_UNOPS = {ast.Not: operator.not_, ast.USub: operator.neg, ast.Invert: operator.invert}
_BUILTINS = {"min": min, "max": max, "abs": abs}
_I64 = ir.IntType(64)

#: the cached twins of the runtime's inline helpers, by dispatcher
_TWINS: dict = {}


def twin(disp: Dispatcher) -> Dispatcher:
    """``disp`` itself, or for a helper numba inlines at its IR level (``inline="always"``) a cached function
    of the same Python code and options, which the kernel calls and LLVM inlines."""
    opts = disp.targetoptions
    if opts.get("inline", "never") == "never":
        return disp
    t = _TWINS.get(disp)
    if t is None:
        # a function of its own name: numba's cache index does not record the options a function was
        # compiled with, so the twin must not share an entry with any other compile of the same code
        py = disp.py_func
        name = f"{py.__name__}_direct_{source_stamp(('rt.py', 'rounding.py', 'sync.py', 'direct/lower.py'))}"
        fn = pytypes.FunctionType(py.__code__, py.__globals__, name, py.__defaults__, py.__closure__)
        fn.__qualname__ = name
        # the kernel's own options: numba lowers an inlined helper with its caller's flags
        t = _TWINS[disp] = njit(cache=True, nogil=True, _nrt=True, error_model="numpy")(fn)
    return t


class FunctionLowering:
    """Lowers one generated function (``node``, an ``ast.FunctionDef``) with numba argument types
    ``argtys`` into ``fn`` (an llvmlite function in numba's calling convention, returning int64).
    ``namespace``: the module's globals; ``memo``: (typing, lowering) memos shared by the process."""

    def __init__(self, ctx, typingctx, fn, node: ast.FunctionDef, argtys: list, namespace: dict, memo: dict):
        self.ctx, self.typingctx, self.fn, self.node = ctx, typingctx, fn, node
        self.ns, self.memo = namespace, memo
        self.libraries: list = []
        self.b = ir.IRBuilder(fn.append_basic_block("entry"))
        self.vars: dict = {}
        arginfo = ctx.call_conv._get_arg_packer(argtys)
        values = arginfo.from_arguments(self.b, ctx.call_conv.get_arguments(fn))
        names = [a.arg for a in node.args.args]
        if len(names) != len(argtys):
            raise Unsupported(f"{node.name}: {len(names)} parameters, {len(argtys)} argument types")
        for name, val, ty in zip(names, values, argtys):
            self.assign(name, V(val, ty))

    # ------------------------------------------------------------------ driver
    def lower(self):
        self.block(self.node.body)
        if not self.b.block.is_terminated:
            self.ret(V(ir.Constant(_I64, 0), types.int64))

    def block(self, stmts):
        for st in stmts:
            if self.b.block.is_terminated:      # code after a return in the same suite: dead
                return
            self.line = getattr(st, "lineno", 0)
            method = getattr(self, "st_" + type(st).__name__, None)
            if method is None:
                self.unsupported(f"a {type(st).__name__} statement")
            method(st)

    def unsupported(self, what: str):
        raise Unsupported(f"{self.node.name}, line {getattr(self, 'line', '?')}: {what}")

    # ------------------------------------------------------------------ variables
    def assign(self, name: str, v: V):
        slot = self.vars.get(name)
        if slot is None:
            if v.items is not None:          # a tuple value: kept as its items (never stored)
                self.vars[name] = (None, v.ty, v)
                return
            ptr = cgutils.alloca_once(self.b, self.ctx.get_value_type(v.ty), name=name)
            self.vars[name] = slot = (ptr, v.ty, None)
        ptr, ty, _ = slot
        if ptr is None or v.ty != ty:
            self.unsupported(f"{name} assigned a {v.ty} after a {ty}")
        self.b.store(v.value, ptr)

    def load_name(self, name: str) -> V:
        slot = self.vars.get(name)
        if slot is not None:
            ptr, ty, tup = slot
            return tup if ptr is None else V(self.b.load(ptr), ty)
        if name not in self.ns:
            self.unsupported(f"the name {name!r}")
        return self.constant(self.ns[name], name)

    def constant(self, x, what: str) -> V:
        if isinstance(x, (bool, np.bool_)):
            return V(ir.Constant(ir.IntType(1), int(bool(x))), types.boolean)
        if isinstance(x, (int, np.integer)):
            ty = types.int64 if isinstance(x, int) else from_dtype(np.asarray(x).dtype)
            return V(self.ctx.get_constant(ty, int(x)), ty)
        if isinstance(x, (float, np.floating)):
            ty = types.float64 if isinstance(x, float) else from_dtype(np.asarray(x).dtype)
            return V(self.ctx.get_constant(ty, x), ty)
        self.unsupported(f"the global {what!r} ({type(x).__name__})")

    # ------------------------------------------------------------------ statements
    def st_Assign(self, st):
        if len(st.targets) != 1:
            self.unsupported("a chained assignment")
        target = st.targets[0]
        if isinstance(target, ast.Name):
            self.assign(target.id, self.expr(st.value))
        elif isinstance(target, ast.Subscript):
            self.store_item(target, self.expr(st.value))
        elif isinstance(target, ast.Tuple):
            v = self.expr(st.value)
            items = self.items(v)
            if len(items) != len(target.elts) or not all(isinstance(t, ast.Name) for t in target.elts):
                self.unsupported("a tuple assignment")
            for t, item in zip(target.elts, items):
                self.assign(t.id, item)
        else:
            self.unsupported(f"an assignment to a {type(target).__name__}")

    def st_AugAssign(self, st):
        if not isinstance(st.target, ast.Subscript):
            if isinstance(st.target, ast.Name):
                self.assign(st.target.id, self.apply(_BINOPS[type(st.op)], [self.load_name(st.target.id),
                                                          self.expr(st.value)]))
                return
            self.unsupported("an augmented assignment")
        arr, ptr = self.item_pointer(st.target)
        old = V(self.ctx.unpack_value(self.b, arr.ty.dtype, ptr), arr.ty.dtype)
        self.store_at(arr, ptr, self.apply(_BINOPS[type(st.op)], [old, self.expr(st.value)]))

    def st_Expr(self, st):
        if isinstance(st.value, ast.Constant):
            return
        self.expr(st.value)

    def st_Pass(self, st):
        pass

    def st_Return(self, st):
        self.ret(self.expr(st.value) if st.value is not None else V(ir.Constant(_I64, 0), types.int64))

    def ret(self, v: V):
        if v.ty == types.none:
            v = V(ir.Constant(_I64, 0), types.int64)
        self.ctx.call_conv.return_value(self.b, self.cast(v, types.int64))

    def st_If(self, st):
        cond = self.truth(self.expr(st.test))
        with self.b.if_else(cond) as (then, other):
            with then:
                self.block(st.body)
            with other:
                self.block(st.orelse)

    def st_While(self, st):
        if st.orelse:
            self.unsupported("a while with an else")
        head = self.fn.append_basic_block("while.head")
        body = self.fn.append_basic_block("while.body")
        end = self.fn.append_basic_block("while.end")
        self.b.branch(head)
        self.b.position_at_end(head)
        self.b.cbranch(self.truth(self.expr(st.test)), body, end)
        self.b.position_at_end(body)
        self.block(st.body)
        if not self.b.block.is_terminated:
            self.b.branch(head)
        self.b.position_at_end(end)

    def st_For(self, st):
        it = st.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range" and
                isinstance(st.target, ast.Name) and not st.orelse and 1 <= len(it.args) <= 3 and not it.keywords):
            self.unsupported("a for loop that is not over range()")
        args = [self.cast(self.expr(a), types.int64) for a in it.args]
        start, stop, step = (ir.Constant(_I64, 0), args[0], None) if len(args) == 1 else \
            (args[0], args[1], args[2] if len(args) == 3 else None)
        step_const = 1 if step is None else (int(it.args[2].value) if isinstance(it.args[2], ast.Constant)
                                             else None)
        if step is None:
            step = ir.Constant(_I64, 1)
        idx = cgutils.alloca_once(self.b, _I64, name="range.idx")
        self.b.store(start, idx)
        head = self.fn.append_basic_block("for.head")
        body = self.fn.append_basic_block("for.body")
        end = self.fn.append_basic_block("for.end")
        self.b.branch(head)
        self.b.position_at_end(head)
        i = self.b.load(idx)
        if step_const is not None:
            more = self.b.icmp_signed("<" if step_const > 0 else ">", i, stop)
        else:
            up = self.b.icmp_signed(">", step, ir.Constant(_I64, 0))
            more = self.b.select(up, self.b.icmp_signed("<", i, stop), self.b.icmp_signed(">", i, stop))
        self.b.cbranch(more, body, end)
        self.b.position_at_end(body)
        self.assign(st.target.id, V(i, types.int64))
        self.b.store(self.b.add(i, step), idx)
        self.block(st.body)
        if not self.b.block.is_terminated:
            self.b.branch(head)
        self.b.position_at_end(end)

    # ------------------------------------------------------------------ expressions
    def expr(self, e) -> V:
        method = getattr(self, "ex_" + type(e).__name__, None)
        if method is None:
            self.unsupported(f"a {type(e).__name__} expression")
        return method(e)

    def ex_Name(self, e):
        return self.load_name(e.id)

    def ex_Constant(self, e):
        if e.value is None:
            return V(None, types.none)
        return self.constant(e.value, repr(e.value))

    def ex_Tuple(self, e):
        items = [self.expr(x) for x in e.elts]
        return V(None, types.Tuple([v.ty for v in items]), items)

    def ex_BinOp(self, e):
        op = _BINOPS.get(type(e.op))
        if op is None:
            self.unsupported(f"the operator {type(e.op).__name__}")
        return self.apply(op, [self.expr(e.left), self.expr(e.right)])

    def ex_UnaryOp(self, e):
        op = _UNOPS.get(type(e.op))
        if op is None:
            self.unsupported(f"the operator {type(e.op).__name__}")
        return self.apply(op, [self.expr(e.operand)])

    def ex_Compare(self, e):
        if len(e.ops) != 1:
            self.unsupported("a chained comparison")
        return self.apply(_CMPOPS[type(e.ops[0])], [self.expr(e.left), self.expr(e.comparators[0])])

    def ex_BoolOp(self, e):
        """``a or b`` / ``a and b`` with Python's short circuit (the value of the operand that decides)."""
        end = self.fn.append_basic_block("boolop.end")
        incoming = []
        for x in e.values[:-1]:
            cur = self.expr(x)
            incoming.append((cur, self.b.block))
            nxt = self.fn.append_basic_block("boolop.next")
            if isinstance(e.op, ast.Or):
                self.b.cbranch(self.truth(cur), end, nxt)
            else:
                self.b.cbranch(self.truth(cur), nxt, end)
            self.b.position_at_end(nxt)
        incoming.append((self.expr(e.values[-1]), self.b.block))
        self.b.branch(end)
        return self.merge(incoming, end, "a boolean operation")

    def ex_IfExp(self, e):
        cond = self.truth(self.expr(e.test))
        then = self.fn.append_basic_block("ifexp.then")
        other = self.fn.append_basic_block("ifexp.else")
        end = self.fn.append_basic_block("ifexp.end")
        self.b.cbranch(cond, then, other)
        incoming = []
        for blk, arm in ((then, e.body), (other, e.orelse)):
            self.b.position_at_end(blk)
            incoming.append((self.expr(arm), self.b.block))
            self.b.branch(end)
        return self.merge(incoming, end, "a conditional expression")

    def merge(self, incoming: list, end, what: str) -> V:
        """The value at ``end`` of the (value, block) pairs of the blocks branching to it: their types unified
        as numba unifies them, each cast in its own block before the branch."""
        ty = incoming[0][0].ty
        for v, _ in incoming[1:]:
            ty = self.typingctx.unify_types(ty, v.ty)
            if ty is None:
                self.unsupported(f"{what} over values of different types")
        cast = []
        for v, blk in incoming:
            with self.b.goto_block(blk):       # before the block's branch to ``end``
                cast.append((self.cast(v, ty), blk))
        self.b.position_at_end(end)
        phi = self.b.phi(self.ctx.get_value_type(ty))
        for val, blk in cast:
            phi.add_incoming(val, blk)
        return V(phi, ty)

    def ex_Attribute(self, e):
        if isinstance(e.value, ast.Name) and e.value.id not in self.vars:
            obj = self.ns.get(e.value.id)
            if obj is not None:
                try:
                    return self.constant(getattr(obj, e.attr), f"{e.value.id}.{e.attr}")
                except AttributeError:
                    pass
        v = self.expr(e.value)
        if isinstance(v.ty, types.Array):
            if e.attr == "shape":
                dims = self.shape(v)
                return V(None, types.UniTuple(types.intp, len(dims)), [V(d, types.intp) for d in dims])
            if e.attr == "T":
                return self.transpose(v)
        self.unsupported(f"the attribute .{e.attr}")

    def ex_Subscript(self, e):
        v = self.expr(e.value)
        if v.items is not None or isinstance(v.ty, types.BaseTuple):
            if not isinstance(e.slice, ast.Constant) or not isinstance(e.slice.value, int):
                self.unsupported("a tuple indexed by a variable")
            return self.items(v)[e.slice.value]
        if not isinstance(v.ty, types.Array):
            self.unsupported(f"indexing a {v.ty}")
        idx = e.slice.elts if isinstance(e.slice, ast.Tuple) else [e.slice]
        if any(isinstance(i, ast.Slice) for i in idx):
            if len(idx) != 1 or v.ty.ndim != 1:
                self.unsupported("a slice of a multi-dimensional array")
            return self.slice1d(v, idx[0])
        if len(idx) == v.ty.ndim:
            ptr = self.element_pointer(v, [self.expr(i) for i in idx])
            return V(self.ctx.unpack_value(self.b, v.ty.dtype, ptr), v.ty.dtype)
        if len(idx) == 1 and v.ty.ndim == 2:
            return self.row(v, self.expr(idx[0]))
        self.unsupported(f"an index of {len(idx)} into a {v.ty.ndim}-d array")

    def ex_Call(self, e):
        if e.keywords:
            self.unsupported("a call with keywords")
        f = e.func
        if isinstance(f, ast.Attribute):
            if isinstance(f.value, ast.Name) and f.value.id not in self.vars and f.value.id in self.ns:
                target = getattr(self.ns[f.value.id], f.attr, None)
                return self.call_object(target, e, f"{f.value.id}.{f.attr}")
            obj = self.expr(f.value)
            if isinstance(obj.ty, types.Array) and f.attr == "reshape":
                return self.reshape(obj, [self.cast(self.expr(a), types.intp) for a in e.args])
            if isinstance(obj.ty, types.Array) and f.attr == "fill" and len(e.args) == 1:
                return self.fill(obj, self.expr(e.args[0]))
            self.unsupported(f"the method .{f.attr}")
        if not isinstance(f, ast.Name):
            self.unsupported("a call of an expression")
        if f.id in ("fail", "fail_first") and f.id not in self.vars:
            args = [self.expr(a) for a in e.args]
            return self.fail(*args) if f.id == "fail" else self.fail_first(*args)
        if f.id in _BUILTINS and f.id not in self.ns:
            return self.apply(_BUILTINS[f.id], [self.expr(a) for a in e.args])
        if f.id not in self.ns:
            self.unsupported(f"a call of {f.id!r}")
        return self.call_object(self.ns[f.id], e, f.id)

    def call_object(self, target, e, name: str) -> V:
        args = [self.expr(a) for a in e.args]
        if isinstance(target, type) and issubclass(target, np.generic) and len(args) == 1:
            return V(self.cast(args[0], from_dtype(np.dtype(target))), from_dtype(np.dtype(target)))
        if isinstance(target, Dispatcher):
            return self.call_dispatcher(twin(target), args, name)
        self.unsupported(f"a call of {name}")

    # ------------------------------------------------------------------ numba's typing and lowering
    def apply(self, fn, args: list) -> V:
        """The Python function ``fn`` (an operator or builtin) applied to ``args`` as numba types and lowers it."""
        fnty = self.memo["fnty"].get(fn)
        if fnty is None:
            fnty = self.memo["fnty"][fn] = self.typingctx.resolve_value_type(fn)
        return self.call_typed(fnty, args)

    def call_typed(self, fnty, args: list, recvr: V | None = None) -> V:
        """A call of the numba function type ``fnty`` (``recvr``: the array of a bound method) on ``args``:
        numba's typing of it, then numba's implementation of that signature, the arguments cast to it (a
        ``*args`` tail packed into one tuple, as numba folds it)."""
        argtys = tuple(a.ty for a in args)
        found = self.memo["sig"].get((fnty, argtys))
        if found is None:
            sig = self.typingctx.resolve_function_type(fnty, argtys, {})
            if sig is None:
                self.unsupported(f"{fnty} of {argtys}")
            if recvr is not None and sig.recvr is None:
                sig = sig.replace(recvr=recvr.ty)
            found = self.memo["sig"][(fnty, argtys)] = (sig, self.ctx.get_function(fnty, sig))
        sig, impl = found
        params = list(sig.args)
        star = params.pop() if params and isinstance(params[-1], (types.StarArgTuple, types.StarArgUniTuple)) \
            else None
        vals = [self.cast(a, t) for a, t in zip(args, params)]
        if star is not None:
            vals.append(self.ctx.make_tuple(self.b, star, [self.cast(a, t) for a, t in
                                                           zip(args[len(params):], star.types)]))
        head = [recvr.value] if recvr is not None else []
        return V(impl(self.b, head + vals), sig.return_type)

    def cast(self, v: V, ty):
        if v.ty == ty:
            return v.value
        if v.items is not None or v.value is None:
            self.unsupported(f"a {v.ty} where a {ty} is needed")
        return self.ctx.cast(self.b, v.value, v.ty, ty)

    def truth(self, v: V):
        if v.ty == types.boolean:
            return v.value
        return self.ctx.is_true(self.b, v.ty, v.value)

    def items(self, v: V) -> list:
        if v.items is not None:
            return v.items
        if isinstance(v.ty, types.BaseTuple):
            return [V(self.b.extract_value(v.value, i), t) for i, t in enumerate(v.ty.types)]
        self.unsupported(f"unpacking a {v.ty}")

    def call_dispatcher(self, disp: Dispatcher, args: list, name: str) -> V:
        argtys = tuple(types.unliteral(a.ty) for a in args)
        for a in args:
            if a.items is not None and not all(x.value is not None for x in a.items):
                self.unsupported(f"{name}: a tuple argument")
        key = (disp, argtys)
        cres = self.memo["cres"].get(key)
        if cres is None:
            entry = disp.compile(argtys)
            cres = disp.overloads.get(argtys) or next(
                c for c in disp.overloads.values() if c.entry_point == entry)
            self.memo["cres"][key] = cres
        sig = cres.signature
        if cres.library not in self.libraries:
            self.libraries.append(cres.library)
        fnty = self.ctx.call_conv.get_function_type(sig.return_type, sig.args)
        callee = cgutils.get_or_insert_function(self.b.module, fnty, cres.fndesc.llvm_func_name)
        vals = [self.tuple_value(a) if a.items is not None else self.cast(a, t) for a, t in zip(args, sig.args)]
        status, res = self.ctx.call_conv.call_function(self.b, callee, sig.return_type, sig.args, vals)
        with cgutils.if_unlikely(self.b, status.is_error):
            self.ctx.call_conv.return_status_propagate(self.b, status)
        return V(res, sig.return_type)

    def tuple_value(self, v: V):
        return self.ctx.make_tuple(self.b, v.ty, [x.value for x in v.items])

    # ------------------------------------------------------------------ the checks' error records
    def err_row(self, err: V, blk: V, k: int):
        return self.element_pointer(err, [blk, V(ir.Constant(_I64, k), types.int64)])

    def fail(self, err: V, blk: V, site: V, a: V, c: V, d: V) -> V:
        """``rt.fail``: err[blk, 0:4] = site, a, b, c (as int64); the site id."""
        for k, x in enumerate((site, a, c, d)):
            self.b.store(self.cast(x, types.int64), self.err_row(err, blk, k))
        return V(self.cast(site, types.int64), types.int64)

    def fail_first(self, err: V, blk: V, failed: V, info: V) -> V:
        """``rt.fail_first``: the record of the first true condition of ``failed`` (four ``info`` values each),
        its site id; 0 when none is true."""
        conds, vals = self.items(failed), self.items(info)
        out = cgutils.alloca_once(self.b, _I64, name="fail.site")
        self.b.store(ir.Constant(_I64, 0), out)
        end = self.fn.append_basic_block("fail.end")
        for i, c in enumerate(conds):
            hit = self.fn.append_basic_block("fail.hit")
            nxt = self.fn.append_basic_block("fail.next")
            self.b.cbranch(self.truth(c), hit, nxt)
            self.b.position_at_end(hit)
            site = self.fail(err, blk, *vals[4 * i:4 * i + 4])
            self.b.store(site.value, out)
            self.b.branch(end)
            self.b.position_at_end(nxt)
        self.b.branch(end)
        self.b.position_at_end(end)
        return V(self.b.load(out), types.int64)

    # ------------------------------------------------------------------ arrays
    def shape(self, v: V) -> list:
        return [self.b.extract_value(v.value, [5, i]) for i in range(v.ty.ndim)]

    def strides(self, v: V) -> list:
        return [self.b.extract_value(v.value, [6, i]) for i in range(v.ty.ndim)]

    def data(self, v: V):
        return self.b.extract_value(v.value, 4)

    def make_array(self, ty, data, shape: list, strides: list) -> V:
        ary = self.ctx.make_array(ty)(self.ctx, self.b)
        itemsize = self.ctx.get_constant(types.intp, self.ctx.get_abi_sizeof(self.ctx.get_data_type(ty.dtype)))
        populate_array(ary, data=data, shape=cgutils.pack_array(self.b, shape),
                       strides=cgutils.pack_array(self.b, strides), itemsize=itemsize, meminfo=None)
        return V(ary._getvalue(), ty)

    def element_pointer(self, v: V, idx: list):
        inds = []
        for i in idx:
            inds.append(self.cast(i, types.intp))
            if isinstance(i.ty, types.Integer) and not i.ty.signed and i.ty.bitwidth >= 64:
                self.unsupported("an unsigned 64-bit index")
        return cgutils.get_item_pointer2(self.ctx, self.b, self.data(v), self.shape(v), self.strides(v),
                                         v.ty.layout, inds, wraparound=True)

    def item_pointer(self, target):
        v = self.expr(target.value)
        if not isinstance(v.ty, types.Array):
            self.unsupported(f"an element store into a {v.ty}")
        idx = target.slice.elts if isinstance(target.slice, ast.Tuple) else [target.slice]
        if len(idx) != v.ty.ndim or any(isinstance(i, ast.Slice) for i in idx):
            self.unsupported("a store into a slice")
        return v, self.element_pointer(v, [self.expr(i) for i in idx])

    def store_item(self, target, value: V):
        if isinstance(target.slice, ast.Slice):       # x[a:b] = value: a scalar everywhere, or a 1-d array
            view = self.slice1d(self.expr(target.value), target.slice)
            if not isinstance(value.ty, types.Array):
                self.fill(view, value)
                return
            self.copy_into(view, value)
            return
        arr, ptr = self.item_pointer(target)
        self.store_at(arr, ptr, value)

    def copy_into(self, view: V, src: V):
        """``view[:] = src`` for a 1-d ``src`` of the view's length (numba raises on another length)."""
        if src.ty.ndim != 1:
            self.unsupported(f"a slice assigned a {src.ty}")
        (n,), (m,) = self.shape(view), self.shape(src)
        with cgutils.if_unlikely(self.b, self.b.icmp_signed("!=", n, m)):
            self.ctx.call_conv.return_user_exc(self.b, ValueError, ("cannot assign slices of different lengths",))
        with cgutils.for_range(self.b, n) as loop:
            i = V(loop.index, types.intp)
            x = V(self.ctx.unpack_value(self.b, src.ty.dtype, self.element_pointer(src, [i])), src.ty.dtype)
            self.store_at(view, self.element_pointer(view, [i]), x)

    def store_at(self, arr: V, ptr, value: V):
        self.ctx.pack_value(self.b, arr.ty.dtype, self.cast(value, arr.ty.dtype), ptr)

    def _clamp_bound(self, x, n, default):
        """A slice bound as Python takes it for a step of 1: negative from the end, then clamped to [0, n]."""
        if x is None:
            return default
        x = self.cast(x, types.intp)
        zero = ir.Constant(_I64, 0)
        x = self.b.select(self.b.icmp_signed("<", x, zero), self.b.add(x, n), x)
        x = self.b.select(self.b.icmp_signed("<", x, zero), zero, x)
        return self.b.select(self.b.icmp_signed(">", x, n), n, x)

    def slice1d(self, v: V, s: ast.Slice) -> V:
        if s.step is not None:
            self.unsupported("a slice with a step")
        (n,), (st,) = self.shape(v), self.strides(v)
        lo = self._clamp_bound(self.expr(s.lower) if s.lower is not None else None, n, ir.Constant(_I64, 0))
        hi = self._clamp_bound(self.expr(s.upper) if s.upper is not None else None, n, n)
        length = self.b.sub(hi, lo)
        length = self.b.select(self.b.icmp_signed("<", length, ir.Constant(_I64, 0)), ir.Constant(_I64, 0), length)
        data = self.data(v)
        start = self.b.gep(self.b.bitcast(data, ir.IntType(8).as_pointer()), [self.b.mul(lo, st)])
        ty = v.ty.copy(layout="C" if v.ty.layout in "CF" else "A")
        return self.make_array(ty, self.b.bitcast(start, data.type), [length], [st])

    def row(self, v: V, i: V) -> V:
        ptr = cgutils.get_item_pointer2(self.ctx, self.b, self.data(v), self.shape(v), self.strides(v), v.ty.layout,
                                        [self.cast(i, types.intp), ir.Constant(_I64, 0)], wraparound=True)
        ty = v.ty.copy(ndim=1, layout="C" if v.ty.layout == "C" else "A")
        return self.make_array(ty, ptr, self.shape(v)[1:], self.strides(v)[1:])

    def transpose(self, v: V) -> V:
        if v.ty.ndim != 2:
            return v
        layout = {"C": "F", "F": "C"}.get(v.ty.layout, "A")
        return self.make_array(v.ty.copy(layout=layout), self.data(v), self.shape(v)[::-1], self.strides(v)[::-1])

    def reshape(self, v: V, dims: list) -> V:
        """``v.reshape(*dims)`` by numba's own lowering of it: numba computes the view's strides in a C helper
        (``numba_attempt_nocopy_reshape``), so LLVM does not see the new shape as constants, and the loops of
        the runtime helpers that read it are vectorised as in numba's compile of the same text (a known trip
        count can change a reassociated sum's order)."""
        fnty = self.memo["attr"].get((v.ty, "reshape"))
        if fnty is None:
            fnty = self.memo["attr"][(v.ty, "reshape")] = self.typingctx.resolve_getattr(v.ty, "reshape")
        return self.call_typed(fnty, [V(d, types.intp) for d in dims], recvr=v)

    def fill(self, v: V, value: V) -> V:
        if v.ty.layout != "C" or v.ty.ndim > 2:
            self.unsupported(f"fill of a {v.ty}")
        x = self.cast(value, v.ty.dtype)
        n = self.b.extract_value(v.value, 2)
        data = self.data(v)
        with cgutils.for_range(self.b, n) as loop:
            self.ctx.pack_value(self.b, v.ty.dtype, x, self.b.gep(data, [loop.index]))
        return V(None, types.none)
