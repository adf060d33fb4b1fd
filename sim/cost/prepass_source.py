"""A group loop's prepass compiled to Python source: the same key, without an interpreter's call per op.

Model
-----
``group_memo.compile_prepass`` turns a group loop's body into a tree of steps (the timing-relevant scalar ops, the
tile ops' key operands, the taken branches, the ping-pong parities, nested loops iterated) and interprets it once
per iteration of every program of the core group: a closure call per operand and per op, about a microsecond per
scalar op. ``compile_steps`` writes the same tree as one Python function, every operand a ``vals[id]`` lookup in
line (or a local, once the function wrote the value), the scalar ops ``scalar_src`` writes (arithmetic,
comparisons, logic, divisions with the evaluator's 0 for a zero divisor, casts, selects, constants, dims, the block
indices) as Python expressions, a GM read as a call of its evaluator's reader and every other op as a call of the scheduler's own
evaluator, and compiles it once per loop (its code object kept for the next launch writing the same source).
``compile_scalars`` writes a straight run of scalar ops the same way (the scheduler's step for the scalar ops
between two other ops of a program), ``compile_tuple`` a tuple of operands (a tile op's memo key). A whole
program's prepass also appends each marked group loop iteration to ``marks`` (``group_memo.StepInputs``), as the
interpreter does.

Invariant: the generated function computes exactly what the tree's interpreter computes, in the same order: the
same key (the same values, appended in the same order), the same entries written to ``vals`` (the interpreter's
own evaluators or the same Python operators on the same Python numbers), the same exceptions. Only the cost of
running it changes. ``tests/cost/test_prepass_source.py`` runs both on FIA calls and compares every key, every
value table and the marks.
"""

from __future__ import annotations

from ...dsl.ir import Value

__all__ = ["Fetch", "compile_steps", "compile_scalars", "compile_tuple"]


class Fetch:
    """An operand read as ``vals.get(id)`` (an input of a nested core-local loop, which may be unset)."""

    __slots__ = ("id",)

    def __init__(self, i):
        self.id = i


class _Writer:
    """The source of one generated function. A value the function itself writes (``vals[i] = ...``) is bound to a
    local ``v{i}`` as well, and read from it after (``bound``: the ids written earlier in an enclosing scope of the
    line being written). In SSA form a value is read only after its definition and in its scope (or, an if's result
    or a loop's carried value, where the writer writes it in that scope), so the local always holds what
    ``vals[i]`` holds; reading it is what saves a dict lookup per operand."""

    def __init__(self):
        self.lines: list = []
        self.env: dict = {}
        self.depth = 0
        self.bound: set = set()

    def name(self, prefix: str, obj) -> str:
        """A global of the generated code holding ``obj``."""
        n = f"_{prefix}{len(self.env)}"
        self.env[n] = obj
        return n

    def src(self, x) -> str:
        """The expression of an operand, as ``group_memo``'s getters read it."""
        if isinstance(x, Fetch):
            return f"vals.get({x.id!r})"
        if isinstance(x, Value):
            if x.const is not None:
                return self.name("k", x.const)
            return f"v{x.id}" if x.id in self.bound else f"vals[{x.id!r}]"
        return self.name("k", x)

    def write(self, i, expr: str, indent: int) -> None:
        """``vals[i] = expr``, ``i`` bound to its local from here on in this scope."""
        self.emit(f"v{i} = vals[{i!r}] = {expr}", indent)
        self.bound.add(i)

    def scoped(self, fn, *args) -> None:
        """Write a nested scope (an if's arm, a loop's body): what it binds is unbound after it."""
        outer = set(self.bound)
        fn(*args)
        self.bound = outer

    def emit(self, line: str, indent: int) -> None:
        self.lines.append("    " * indent + line)

    def block(self, steps, indent: int) -> None:
        for st in steps:
            tag = st[0]
            if tag == 0:
                self.scalar(st, indent)
            elif tag == 1:
                self.emit("ap((" + "".join(self.src(v) + ", " for v in st[2]) + "))", indent)
            elif tag == 2:
                c = self._local("c")
                self.emit(f"{c} = bool({self.src(st[4])})", indent)
                self.emit(f"ap({c})", indent)
                for head, arm_outs in ((f"if {c}:", st[2]), ("else:", st[3])):
                    self.emit(head, indent)
                    before = len(self.lines)
                    self.scoped(self.arm, arm_outs, indent + 1)
                    if len(self.lines) == before:
                        self.emit("pass", indent + 1)
            elif tag == 3:
                self.emit(f"ap({self.src(st[2])} % 2)", indent)
            else:
                iv, carry, inner, outs, bounds, name = st[2], st[3], st[4], st[5], st[6], st[7]
                trips, i = self._local("trips"), self._local("i")
                lo, hi, step = (f"int({self.src(b)})" for b in bounds)
                self.emit(f"{trips} = range({lo}, {hi}, {step})", indent)
                self.emit(f"ap(len({trips}))", indent)
                for a, _, _, init, _ in carry:
                    self.write(a, self.src(init), indent)
                self.emit(f"for {i} in {trips}:", indent)
                self.scoped(self.body, iv, i, inner, carry, name, indent + 1)
                for rid, c in zip(outs, carry):
                    self.write(rid, self.src_id(c[0]), indent)

    def arm(self, arm_outs, indent: int) -> None:
        """An if's arm, then the if's results it gives."""
        arm, outs = arm_outs
        self.block(arm, indent)
        for rid, _, y in outs:
            self.emit(f"vals[{rid!r}] = {self.src(y)}", indent)

    def body(self, iv, i: str, inner, carry, name, indent: int) -> None:
        """A loop's body: the induction variable, the body, then the carried values it yields (all read before any
        is written); a marked loop's (``name``) iteration appended to ``marks`` at its head when given."""
        self.write(iv, i, indent)
        mark = self._local("mark")
        if name is not None:
            self.emit(f"{mark} = [{self.name('g', name)}, len(out), 0, ()] if marks is not None else None", indent)
            self.emit(f"if {mark} is not None:", indent)
            self.emit(f"marks.append({mark})", indent + 1)
        self.block(inner, indent)
        now = "()"
        if carry:
            now = self._local("now")
            self.emit(f"{now} = (" + "".join(self.src(c[4]) + ", " for c in carry) + ")", indent)
            for j, c in enumerate(carry):
                self.write(c[0], f"{now}[{j}]", indent)
        if name is not None:
            self.emit(f"if {mark} is not None:", indent)
            self.emit(f"{mark}[2], {mark}[3] = len(out), {now}", indent + 1)

    def src_id(self, i) -> str:
        return f"v{i}" if i in self.bound else f"vals[{i!r}]"

    def scalar(self, st, indent: int) -> None:
        """A scalar op (``(0, evaluator, op, expression or None)``): its expression in line, else its evaluator
        called (a constant's expression names it as ``{k}``, a GM read's the evaluator's reader, ``fn.read``)."""
        fn, op, expr = st[1], st[2], st[3]
        if expr is None:
            self.emit(f"{self.name('f', fn)}(vals, blk, sub)", indent)
        else:
            k = self.name("k", op.results[0].const) if op.kind == "const" else \
                self.name("r", fn.read) if op.kind == "sload" else None
            self.write(op.results[0].id, expr.format(*(self.src(a) for a in op.args), k=k), indent)

    def _local(self, prefix: str) -> str:
        self.depth += 1
        return f"{prefix}{self.depth}"


#: source -> its code object: a launch of a kernel seen before writes the same source (ids and names), only its
#: constants (``env``) may differ; cleared when it grows past ``_CODE_MAX`` entries
_CODE: dict = {}
_CODE_MAX = 1 << 14


def _compiled(w: _Writer, name: str):
    src = "\n".join(w.lines)
    code = _CODE.get(src)
    if code is None:
        if len(_CODE) >= _CODE_MAX:
            _CODE.clear()
        code = _CODE[src] = compile(src, "<group_memo prepass>", "exec")
    env = dict(w.env)
    exec(code, env)   # noqa: S102 - our own generated code
    return env.pop(name)     # not left in its own globals (a reference cycle): freed when its step is


def compile_scalars(steps):
    """``run(vals, blk, sub)``: a straight run of scalar ops (prepass steps of tag 0) evaluated in order, as the
    evaluators calls one by one would (the scheduler's run of scalar ops between two other ops)."""
    w = _Writer()
    w.emit("def run(vals, blk, sub):", 0)
    for st in steps:
        w.scalar(st, 1)
    w.emit("return None", 1)
    return _compiled(w, "run")


def compile_tuple(operands):
    """``key(vals)``: the tuple of ``operands``' values (each read as ``group_memo``'s getters read it), in line."""
    w = _Writer()
    w.emit("def key(vals):", 0)
    w.emit("return (" + "".join(w.src(x) + ", " for x in operands) + ")", 1)
    return _compiled(w, "key")


def compile_steps(steps, outside: tuple, carried_tiles: tuple):
    """``prepass(vals, blk, sub)``: the key ``group_memo``'s interpreter of ``steps`` gives, as generated code."""
    w = _Writer()
    w.emit("def prepass(vals, blk, sub, marks=None):", 0)
    w.emit("out = [(" + "".join(f"vals.get({t!r}), " for t in outside) + "), ("
           + "".join(f"vals.get({t!r}), " for t in carried_tiles) + ")]", 1)
    w.emit("ap = out.append", 1)
    w.block(steps, 1)
    w.emit("return tuple(out)", 1)
    return _compiled(w, "prepass")
