"""The numba backend: tile IR to the Python source of a numba-compiled simulator.

The text is numba's language, and numba's compile of it is the reference; by default it is compiled by
``sim.direct``, which reads this same text and lowers it with numba's typing, lowering and runtime
helpers but without numba's front end (``docs/compile_time.md``). What follows holds for either compiler.

Model
-----
The generated module has one function, ``core(blk, nblk, sub, err, bufs,
<args>)``: one AI core's program (``sub`` is the vector core's sub-block index
where the program reads it). GM tensors arrive flat (``x_flat``,
16-bit floats as uint16 bits, FP8 as its uint8 codes); their runtime shapes
arrive together in one int64 array, the last argument ``_dims`` (every tensor's
axes in parameter order, placed by the ranks known when the kernel is
specialised: one argument instead of one a tensor, since numba's Python wrapper
unboxes each array argument with code of its own); scalars as numba scalars.
It is compiled ``nogil``, so the launcher runs the cores on plain Python
threads in parallel (numba's ``prange`` would compile the whole kernel a second
time for its parallel region, doubling the cold compile).

Tiles. Every tile value owns a flat buffer of its static capacity, allocated
by the module's ``alloc`` (plain Python: numpy makes the arrays, once per
launcher thread) and passed to ``core``; the value itself is a C-contiguous view of its valid
shape (``buf[:r*c].reshape(r, c)``), so operations cover exactly the valid
elements and ``np.dot`` sees contiguous operands. A buffer is written only by
the op that defines its value; SSA makes that safe inside loops, and
loop-carried tiles get a buffer of their own that the loop's ``yield`` copies
into.

Names. Variables and buffers are named after the value's source name and its
number in the program, in the order the generator first names it (``number``),
never after the IR's process-wide value ids: the text depends on the kernel
alone (and on the LLVM level it is to compile at, its ``OPT_LEVEL`` line, from
``$CVTILE_OPT``), and the launcher finds a kernel's module in the cache by the
text's hash.

Numerics. Floating tiles hold float32 values. An op whose result dtype is
float16/bfloat16 rounds its float32 result to the 16-bit grid (exact emulation
for + - * / sqrt, since float32 carries more than 2p+2 bits); a GM load of a
16-bit or an FP8 tensor decodes the bits exactly; a GM store encodes with
round-to-nearest-even. ``mma`` multiplies float32 copies of its (exact)
16-bit operands with float32 accumulation (BLAS ``sgemm``). Masks rely on
``-inf``, so fast-math never assumes finite values.

Fusion. A chain of elementwise ops whose intermediate values have one use in
the same block becomes one loop nest (and a row reduction absorbs the chain
feeding it), so ``p = exp(s * scale - m[:, None])`` is one pass over ``s``.
A value that a consumer broadcasts is computed once, not per element.

Float semantics. Generated code is strict IEEE (no fast-math): every op
rounds as the chip's one-instruction-per-op vector unit does, so float32
chains are bit-exact. Row reductions and the streamed skinny matmuls run in
runtime functions (``rt.row_sum``/``row_max``/``row_min``, ``rt.mm_bt_*``)
compiled once per machine; sums there are vectorised, so their accumulation
order (like the chip's ReduceSum and the cube's) is not modelled bit for bit.

Compile time. A generated function that allocates nothing (its buffers come
from ``alloc``; its tiles are views) is compiled with ``_nrt=False``: numba
then emits no reference counting, so the early exit of each failed check does
not decref every live view (that chain of decrefs was about a third of a
kernel's compile). The BLAS matmul is ``rt.dot_into`` (compiled once per
machine, not typed in each kernel; it takes empty extents itself, so the
kernel calls it without a guard). An mma by a plain-rows float GM window is
one call, ``rt.mm_auto_*``, which picks the streamed or the BLAS product
itself. Numba makes a basic block of every jump, so the generated text avoids
them where the semantics allow: checks share branches (see Checks), and
boolean ``and``/``or`` of computed scalars are ``&``/``|``. None of this
changes a result bit.

Printing. ``device_print`` is a ``print`` in the generated code: numba's nopython print boxes its items and
writes them to ``sys.stdout`` while holding the GIL for the whole line, which is robust with the cores' nogil
threads (a line is never torn; lines of cores running at the same time interleave in the order they happen;
``serial=True`` gives block order) and keeps the module cacheable (no object-mode block).

Checks. Bound checks of GM accesses, shape agreement of tile operands and the
kernel's own ``check`` ops write an error record (site, values) into
``err[blk]`` and return; the launcher turns it into ``SimulationError`` with
the kernel source line (exceptions cannot cross numba's parallel loop).
A check's condition becomes a boolean; the checks made between two statements
that may touch memory (everything but pure scalar arithmetic, ``emit_pure``)
are tested in one branch before the next such statement, and ``rt.fail_first``
records the first failing one in emission order. A ``check`` op after a scalar
load is moved before the load when its operands are ready (``_hoist_checks``):
a task row read field by field is one branch. Invariant: no memory access runs
before every check emitted ahead of it has been tested, and a failing kernel
records the same (site, values) as with one branch per check: only pure
statements and effect-free loads are passed.
``generate(..., check=mode)`` produces the checking-mode variant instead
(``checkgen``, a subclass of the generator here, through the ``_prepare`` /
``_prologue`` / ``_epilogue`` / ``_bound_alias`` / ``_bound_copy`` hooks); without ``check`` the
text is exactly what it was without checking mode.
"""

from __future__ import annotations

import os

import numpy as np

from ..dsl.ir import Block, Kernel, Op, Value, Window
from ..dsl.types import BOOL, F32, INDEX, L1, DType, TileType, dtype_of
from .rt import SKINNY_ROWS as _SKINNY_ROWS   # a GM b operand is streamed row by row for this few a rows
from .stamp import source_stamp
from .optlevel import kernel_opt_level

__all__ = ["generate", "GeneratedSource", "STORAGE"]

#: numba/numpy storage dtype of each tile dtype on chip and in GM.
_TILE_NP = {"float16": "np.float32", "bfloat16": "np.float32", "float8_e4m3fn": "np.float32", "float32": "np.float32",
            "int8": "np.int32",
            "int16": "np.int32", "int32": "np.int32", "int64": "np.int64", "uint8": "np.int32", "bool": "np.bool_"}
STORAGE = {"float16": np.uint16, "bfloat16": np.uint16, "float8_e4m3fn": np.uint8, "float32": np.float32,
           "int8": np.int8, "int16": np.int16,
           "int32": np.int32, "int64": np.int64, "uint8": np.uint8, "bool": np.bool_}
_DECODE = {"float16": "f16_bits_to_f32", "bfloat16": "bf16_bits_to_f32", "float8_e4m3fn": "f8e4m3_bits_to_f32"}
#: suffix of the runtime GM copies (an FP8 tensor has a reader only: the language refuses its stores)
_KIND = {"float16": "f16", "bfloat16": "bf16", "float32": "f32", "float8_e4m3fn": "f8e4m3"}
_ENCODE = {"float16": "f32_to_f16_bits", "bfloat16": "f32_to_bf16_bits"}
_ROUND = {"float16": "round_to_f16", "bfloat16": "round_to_bf16"}
_BIN_FMT = {"add": "({a} + {b})", "sub": "({a} - {b})", "mul": "({a} * {b})", "div": "({a} / {b})",
            "floordiv": "({a} // {b})", "mod": "({a} % {b})", "and": "({a} & {b})", "or": "({a} | {b})",
            "xor": "({a} ^ {b})", "lt": "({a} < {b})", "le": "({a} <= {b})", "gt": "({a} > {b})",
            "ge": "({a} >= {b})", "eq": "({a} == {b})", "ne": "({a} != {b})", "max": "fmax({a}, {b})",
            "min": "fmin({a}, {b})", "pow": "fpow({a}, {b})", "lshift": "({a} << {b})", "rshift": "({a} >> {b})"}
_UN_FMT = {"neg": "(-{a})", "abs": "abs({a})", "exp": "fexp({a})", "log": "flog({a})", "sqrt": "fsqrt({a})",
           "rsqrt": "frsqrt({a})", "relu": "frelu({a})", "tanh": "ftanh({a})", "sigmoid": "fsigmoid({a})",
           "erf": "ferf({a})", "floor": "ffloor({a})"}
#: in rank-1 loops and (M, 1) column tiles (a few elements per row) the math functions are called, not inlined:
#: numba compiles an inlined call site far more slowly, and only the rank-2 loops are hot enough to need the
#: vectorised inline
_CALLED = {"fexp(": "fexp_call(", "flog(": "flog_call(", "fsqrt(": "fsqrt_call(", "frsqrt(": "frsqrt_call(",
           "round_to_f16(": "round_f16_call(", "round_to_bf16(": "round_bf16_call(", "ftanh(": "ftanh_call(",
           "fsigmoid(": "fsigmoid_call(", "ferf(": "ferf_call(", "ffloor(": "ffloor_call(", "fpow(": "fpow_call("}
_SCALAR_BIN = {"add": "({a} + {b})", "sub": "({a} - {b})", "mul": "({a} * {b})", "floordiv": "({a} // {b})",
               "mod": "({a} % {b})", "min": "min({a}, {b})", "max": "max({a}, {b})", "lt": "({a} < {b})",
               "le": "({a} <= {b})", "gt": "({a} > {b})", "ge": "({a} >= {b})", "eq": "({a} == {b})",
               "ne": "({a} != {b})", "xor": "({a} ^ {b})", "lshift": "({a} << {b})", "rshift": "({a} >> {b})",
               "pow": "fpow_call(f32({a}), f32({b}))"}
_CAST_INT = {"rint": "cast_rint", "trunc": "cast_trunc", "floor": "cast_floor", "ceil": "cast_ceil",
             "round": "cast_round"}
#: 16-bit float narrowing with rounding "round" (ties away from zero; "rint" is _ROUND)
_ROUND_AWAY = {"float16": "round_to_f16_away", "bfloat16": "round_to_bf16_away"}
#: the saturation range of a float -> integer cast, per target dtype
_INT_RANGE = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767), "int32": (-2 ** 31, 2 ** 31 - 1),
              "int64": (-2 ** 63, 2 ** 63 - 1024)}   # (the largest float64 below 2**63)
_INLINE_OPS = ("ewise", "cast", "expand")
#: integer mma operand dtypes ``rt.dot_int_into`` multiplies (8-bit: a contraction over fewer than 2**17 terms
#: fits its int32 result exactly)
_BYTE_INTS = ("int8", "uint8")

_FUSE_CONSUMERS = ("ewise", "cast", "reduce")
#: scalar ops whose generated statement is pure arithmetic (``_Gen.emit_pure``): no memory access, no effect
_PURE_SCALAR = ("const", "sbin", "sun", "scast", "sselect", "dim", "block_idx", "block_num", "subblock_idx")
#: ops whose result gets a buffer of its own (copy, handoff and loop/branch results alias another value's)
_OWN_BUFFER = ("create", "iota", "load", "mma", "dequant", "ewise", "cast", "reduce", "gather")


class GeneratedSource:
    """The generated numba module text plus what the launcher needs to call and report on it."""

    def __init__(self, text: str, arg_names: list, sites: list, kernel: Kernel, entry: str):
        self.text = text
        self.arg_names = arg_names      # (param name, kind) in the order the launcher passes them
        self.sites = sites              # error and wait sites: (message, loc, value labels)
        self.kernel = kernel
        self.entry = entry              # "core" (one program per core) or "group" (a core group's programs)
        self.flag_sets: dict = {}       # flag id -> [(core, loc)] of its sets (for deadlock reports)


def generate(kernel: Kernel, *, nan_fill: bool = False, check=None) -> GeneratedSource:
    """The numba module of a kernel: ``core`` for a sequential kernel or a one-sided split kernel; for a split
    kernel with both programs, one function per program (``_generate_group``). ``check`` (a
    ``checking.CheckMode``) generates the checked variant instead (``checkgen``): other text, other module,
    other cache entry; without it nothing of the checks is generated."""
    if check is not None:
        from .checkgen import CheckedSource

        return _generate(kernel, CheckedSource(kernel, check))
    return _generate(kernel, _Plain(nan_fill))


class _Plain:
    """How ``_generate`` makes the generators of an unchecked module (the checked one: ``checkgen``)."""

    extra_params: list = []
    header: list = []

    def __init__(self, nan_fill: bool):
        self.nan_fill = nan_fill

    def gen(self, kernel, body, sites=None, program=None):
        return _Gen(kernel, self.nan_fill, body, sites=sites, program=program)

    def finish(self, source) -> None:
        pass


def _generate(kernel: Kernel, make) -> GeneratedSource:
    programs = kernel.programs()
    if len(programs) == 2:
        return _generate_group(kernel, programs, make)
    body = next(iter(programs.values())) if programs else kernel.body
    gen = make.gen(kernel, body)
    params, arg_names = gen.bind_params()
    lines = gen.function("core", ["blk", "nblk", "sub", "err", "bufs"] + make.extra_params + params)
    text = "\n".join(_module_header(kernel) + make.header + gen.alloc_function("alloc") + lines)
    out = GeneratedSource(text, arg_names, gen.sites, kernel, "core")
    make.finish(out)
    return out


def _generate_group(kernel: Kernel, programs: dict, make) -> GeneratedSource:
    """One function per program, ``prog_aic`` and ``prog_aiv`` (run twice, as sub-blocks 0 and 1), each on a
    thread of its own that holds the group's baton while it runs (see ``sync.py``); the launcher starts the
    three threads of a group."""
    sites: list = []
    parts = []
    allocs = []
    for core in ("aic", "aiv"):
        gen = make.gen(kernel, programs[core], sites=sites, program=core)
        params, arg_names = gen.bind_params()
        parts += gen.function(f"prog_{core}", ["blk", "nblk", "sub", "role", "flags", "sched", "err", "bufs"]
                              + make.extra_params + params)
        allocs += gen.alloc_function(f"alloc_{core}")
    text = "\n".join(_module_header(kernel) + make.header + allocs + parts)
    out = GeneratedSource(text, arg_names, sites, kernel, "group")
    for core, body in programs.items():
        for op in _all_ops(body):
            if op.kind == "flag_set":
                out.flag_sets.setdefault(op.attrs["id"], []).append((core, op.loc))
    make.finish(out)
    return out


def _file_and_line(loc) -> str:
    """``kernel.py:514`` of a kernel's location: the module text (and so its digest, its name and numba's
    cache of it) does not depend on the directory the kernel's source lives in."""
    return f"{os.path.basename(loc.filename)}:{loc.line}" if loc is not None else "?"


def _module_header(kernel: Kernel) -> list:
    return [
        f"# numba simulator of cvtile kernel {kernel.name!r} ({_file_and_line(kernel.loc)}), target "
        f"{kernel.target}, kind {kernel.kind}{', split into programs' if kernel.programs() else ''}",
        "# generated by cvtile.sim.codegen from the kernel's tile IR; do not edit",
        f"# runtime {runtime_stamp()} (numba's cache sees only this file: the stamp ties it to the runtime code)",
        "import math",
        "import numpy as np",
        "from numba import njit",
        f"OPT_LEVEL = {kernel_opt_level()}   # the LLVM level the functions compile at (optlevel.py; numba's cache "
        "does not record it, this text does)",
        "from cvtile.sim.rt import (NEG_INF, POS_INF, bf16_bits_to_f32, cast_ceil, cast_floor, cast_rint,",
        "                           cast_round, cast_trunc, round_to_f16_away, round_to_bf16_away, f16_bits_to_f32, f32, f32_to_bf16_bits, f32_to_f16_bits, fail,",
        "                           fail_first, mm_auto_bt_f16, mm_auto_b_f16, mm_auto_bt_bf16, mm_auto_b_bf16,",
        "                           mm_auto_bt_f32, mm_auto_b_f32,",
        "                           fexp, flog, fmax, fmin, frsqrt, fsqrt, mm_b_bf16, mm_b_f16, mm_b_f32,",
        "                           mm_bt_bf16, mm_bt_f16, mm_bt_f32, round_to_bf16, round_to_f16, row_max,",
        "                           row_max_int, row_min, row_min_int, row_sum, read_rows_f16, read_rows_bf16,",
        "                           read_rows_f32, read_rows_raw, write_rows_f16, write_rows_bf16,",
        "                           write_rows_f32, write_rows_raw, fexp_call, flog_call, fsqrt_call,",
        "                           frsqrt_call, round_f16_call, round_bf16_call, dot_rows_t, axpy_rows,",
        "                           ftanh, fsigmoid, ferf, ffloor, fpow, ftanh_call, fsigmoid_call, ferf_call,",
        "                           ffloor_call, fpow_call, dot_into, dot_int_into, mm_bt_i8, mm_b_i8, sel,",
        "                           f8e4m3_bits_to_f32, read_rows_f8e4m3, fixpipe_scale)",
    ] + (["from cvtile.sim.sync import abort_group, finish_turn, take_turn, wait_turn"] if len(kernel.programs()) == 2
         else []) + [""]


class _Gen:
    #: the generated functions may be compiled without NRT when their text allocates nothing (``_decorator``)
    nrt_free = True

    def __init__(self, kernel: Kernel, nan_fill: bool, body: Block, sites: list | None = None,
                 program: str | None = None):
        self.k = kernel
        self.body = body
        self.core = program            # "aic" / "aiv": a program of a core group (it holds the baton), else None
        self.nan_fill = nan_fill
        self.lines: list[str] = []
        #: the checks emitted since the last statement that is not pure scalar arithmetic (``fail_if``): each
        #: (condition variable, site id, value expressions, depth); one branch tests them all (``_flush_checks``)
        self._pending: list[tuple] = []
        self.depth = 1
        self.names: dict[int, str] = {}      # value id -> python expression / variable
        self.tile_var: dict[int, str] = {}   # materialised tile value id -> variable
        self.buffers: list[str] = []
        self.sites: list = [] if sites is None else sites
        self.tensors: dict[int, tuple] = {}  # tensor value id -> (flat, shape, dtype name)
        self.uses: dict[int, list] = {}
        self.block_of: dict[int, Block] = {}
        self.inline: set[int] = set()
        self.siblings: dict[int, list] = {}   # materialised value id -> consumers computed in its loop
        self.fused_into: dict[int, int] = {}  # id(consumer op) -> the value whose loop computes it
        self.owner_block: dict[int, Block] = {}
        self.checked: list[set] = [set()]    # conditions checked on the current path, per nesting level
        self.share: dict[int, Value] = {}    # value id -> the value whose buffer it lives in
        self._numbers: dict[int, int] = {}   # value id -> its number in the generated names (``number``)
        self._tmp = 0

    # -------------------------------------------------------------- driver
    def bind_params(self):
        """The generated function's parameters for the kernel's runtime arguments, and (name, kind) of each
        in the order the launcher passes them: each tensor's flat storage or scalar, then ``_dims``, the
        tensors' axes one after the other (a tensor's first axis at the sum of the ranks before it)."""
        params = []
        arg_names = []
        args = iter(self.k.args)
        at = 0
        for p in self.k.params:
            if p.kind == "constexpr":
                continue
            v = next(args)
            ident = _ident(p.name)
            if p.kind in ("tensor", "workspace"):
                flat = f"{ident}_flat"
                self.tensors[v.id] = (flat, at, v.type.dtype.name)
                at += v.type.rank
                params.append(flat)
            else:
                self.names[v.id] = ident
                params.append(ident)
            arg_names.append((p.name, p.kind))
        return params + ["_dims"], arg_names

    def function(self, name: str, signature: list) -> list:
        """The text of one generated function running ``self.body``."""
        self._analyse(self.body, None)
        self._prepare()
        self.lines = []
        self._block(self.body)
        self._flush_checks()
        body = self.lines
        self.lines = []
        prologue, epilogue = self._prologue(), self._epilogue()
        out = ["", "", _decorator(prologue + body + epilogue, self.nrt_free), f"def {name}({', '.join(signature)}):"]
        if self.buffers:
            names = [n for n, _ in self.buffers]
            out.append(f"    {', '.join(names)}{',' if len(names) == 1 else ''} = bufs")
        out += prologue
        if self.core:
            out += ["    if take_turn(sched, role):", "        return 0"]
        out += body
        out += epilogue
        if self.core:
            out.append("    finish_turn(sched, role)")
        out.append("    return 0")
        out.append("")
        return out

    # hooks of the checked generator (checkgen.CheckedGen); nothing here
    def _prepare(self):
        """Called once the analysis of the body is done, before any line is generated."""

    def _prologue(self) -> list:
        """Lines at the function's entry (after the buffers are unpacked)."""
        return []

    def _epilogue(self) -> list:
        """Lines before the function's normal end."""
        return []

    def _bound_alias(self, dst: str, src: str, value: Value):
        """The tile variable ``dst`` was just bound to the tile variable ``src`` (``value``'s)."""

    def _bound_copy(self, dst: str, src: str):
        """The tile variable ``dst`` was just bound to a copy of the tile variable ``src``."""

    def alloc_function(self, name: str) -> list:
        """The program's buffer allocator, ``name()`` -> the tuple of its tile buffers (called after
        ``function()``: the buffers are known then). Plain Python, not jitted: numpy makes the same arrays
        (numba types them alike), and compiling it cost about 0.7 s of every kernel's first compile."""
        return ["", "", f"def {name}():",
                "    # the tile buffers of one program; the launcher allocates them once per thread",
                "    return (" + "".join(f"{b}, " for _, b in self.buffers) + ")"]

    # ------------------------------------------------------------ analysis
    def _analyse(self, block: Block, parent):
        for a in block.args:
            self.owner_block[a.id] = block
        for op in block.ops:
            for r in op.results:
                self.owner_block[r.id] = block
            for o in op.operands:
                self.uses.setdefault(o.id, []).append(op)
                self.block_of[id(op)] = block
            self.block_of[id(op)] = block
            for b in op.blocks:
                self._analyse(b, op)
        for op in block.ops:
            if op.kind not in _INLINE_OPS or not op.results[0].is_tile:
                continue
            v = op.results[0]
            if op.kind == "expand":
                self.inline.add(v.id)
                continue
            uses = self.uses.get(v.id, [])
            if len(uses) != 1:
                continue
            user = uses[0]
            if user.kind not in _FUSE_CONSUMERS or self.block_of.get(id(user)) is not block:
                continue
            if user.kind == "ewise" and _broadcasts_into(v, user):
                continue
            self.inline.add(v.id)
        self._plan_siblings(block)
        for op in block.ops:
            if op.kind == "for":
                self._plan_loop_buffers(op)

    def _plan_loop_buffers(self, op: Op):
        """Let a loop-carried tile live in one buffer: its initial value when the loop is that value's only
        reader, and its next value when the op computing it (elementwise) is the last reader of the old one
        in the iteration (computed in place, as the chip updates an accumulator)."""
        body = op.blocks[0]
        args = body.args[1:]
        inits = op.operands[3:]
        yields = body.ops[-1].operands if body.ops and body.ops[-1].kind == "yield" else []
        pos = {}
        for i, top in enumerate(body.ops):
            pos[id(top)] = i
            for nested in _all_ops_in(top):
                pos[id(nested)] = i
        for a, init, v in zip(args, inits, yields):
            if not a.is_tile:
                continue
            if (init.owner is not None and init.owner.kind in _OWN_BUFFER and init.id not in self.inline
                    and self.uses.get(init.id) == [op] and init.id not in self.share):
                self.share[a.id] = init
            src = v.owner
            if (src is None or src.kind not in ("ewise", "cast") or v.id in self.inline or id(src) in self.fused_into
                    or self.block_of.get(id(src)) is not body or sum(1 for y in yields if y is v) != 1
                    or any(y is a for y in yields if y is not v)):
                continue
            last = pos[id(src)]
            if all(pos.get(id(u), -1) <= last for u in self.uses.get(a.id, []) if u.kind != "yield"):
                self.share[v.id] = a

    def _plan_siblings(self, block: Block):
        """Fuse into a materialised value's loop the consumers that read only it: its row reductions and
        same-shape casts/elementwise ops whose other operands are scalars or inlined elementwise values of it
        (``_only_from``): one pass over the data, not several."""
        pos = {id(op): i for i, op in enumerate(block.ops)}
        for op in block.ops:
            if op.kind not in ("ewise", "cast") or not op.results[0].is_tile:
                continue
            v = op.results[0]
            if v.id in self.inline or id(op) in self.fused_into:
                continue   # a value computed in another's loop hosts no siblings (they would never be emitted)
            fused = []
            for u in self.uses.get(v.id, []):
                if self.block_of.get(id(u)) is not block or id(u) in self.fused_into:
                    continue
                r = u.results[0] if u.results else None
                if r is None or not r.is_tile or r.id in self.inline:
                    continue
                if u.kind == "reduce" and u.operands[0] is v and v.type.rank == 2:
                    fused.append(u)
                elif u.kind in ("ewise", "cast") and r.type.shape == v.type.shape and all(
                        self._only_from(o, v, op, block, pos) if o.is_tile else
                        self._available_before(o, op, block, pos) for o in u.operands):
                    fused.append(u)
            if fused:
                self.siblings[v.id] = fused
                for u in fused:
                    self.fused_into[id(u)] = v.id

    def _only_from(self, x: Value, v: Value, op: Op, block: Block, pos: dict) -> bool:
        """True when the tile ``x`` is ``v``, or an inlined elementwise value of v's shape computed from v alone
        and scalars available before ``op`` (``where(v == c, a, v)``'s condition): what v's loop can compute."""
        if x is v:
            return True
        if (x.id not in self.inline or x.owner is None or x.owner.kind not in ("ewise", "cast")
                or x.type.shape != v.type.shape):
            return False
        return all(self._only_from(o, v, op, block, pos) if o.is_tile else self._available_before(o, op, block, pos)
                   for o in x.owner.operands)

    def _available_before(self, x: Value, op: Op, block: Block, pos: dict) -> bool:
        if x.const is not None or x.owner is None:
            return True
        if self.owner_block.get(x.id) is not block:
            return True  # defined in an enclosing block (or an argument)
        return pos.get(id(x.owner), len(block.ops)) < pos[id(op)]

    # ------------------------------------------------------------ emission
    @property
    def depth(self) -> int:
        """The indentation level of the next line; changing it (entering or leaving a body) first emits the
        pending checks, at the level they were made."""
        return self._depth

    @depth.setter
    def depth(self, value: int):
        self._flush_checks()
        self._depth = value

    def emit(self, line: str):
        """Emit a statement that may touch memory: the pending checks are tested before it."""
        self._flush_checks()
        self.lines.append("    " * self._depth + line)

    def emit_pure(self, line: str):
        """Emit a statement of pure scalar arithmetic (no memory access, no effect, nothing that can fault under
        the numpy error model): the pending checks need not be tested before it."""
        self.lines.append("    " * self._depth + line)

    def _flush_checks(self):
        """Test the pending checks in one branch. One check is ``if c: return fail(...)``; several are
        ``if c1 | c2 ...: return fail_first(...)``, which records the first failing one in emission order, with
        its values: the record a branch per check would have written, because the statements between the
        checks were pure (their conditions read nothing those statements could make unsafe). A branch per
        check was about a quarter of a kernel's compile time (numba and LLVM, per basic block)."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        pad = "    " * pending[0][3]
        if len(pending) == 1:
            var, sid, vals, _ = pending[0]
            self.lines.append(f"{pad}if {var}:")
            call = f"fail(err, blk, np.int64({sid}), {', '.join(f'np.int64({v})' for v in vals)})"
        else:
            self.lines.append(f"{pad}if {' | '.join(p[0] for p in pending)}:")
            info = ", ".join(f"np.int64({x})" for _, sid, vals, _ in pending for x in (sid, *vals))
            call = f"fail_first(err, blk, ({', '.join(p[0] for p in pending)},), ({info},))"
        if self.core:   # a program of a core group: the others must stop too
            self.lines.append(f"{pad}    err[blk, 4] = role")
            self.lines.append(f"{pad}    abort_group(sched)")
        self.lines.append(f"{pad}    return {call}")

    def tmp(self, base: str = "t") -> str:
        self._tmp += 1
        return f"_{base}{self._tmp}"

    def number(self, v: Value) -> int:
        """The value's number in this program, in the order the generator first names it: the generated
        text depends on the kernel alone, not on the process-wide value ids (which depend on what the
        process traced before), so a kernel's module is found in the kernel cache by any process."""
        return self._numbers.setdefault(v.id, len(self._numbers))

    def var_name(self, v: Value) -> str:
        base = _ident(v.name) if v.name else "v"
        return f"{base}_{self.number(v)}"

    def ref(self, x) -> str:
        """The Python expression of a scalar value (or a literal)."""
        if isinstance(x, Value):
            if x.const is not None and x.owner is not None and x.owner.kind == "const":
                return _literal(x.const, x.type)
            if x.id in self.names:
                return self.names[x.id]
            raise KeyError(f"value {x!r} used before definition in generated code")
        return _literal(x, None)

    def site(self, message: str, op, labels=()) -> int:
        op = op if op is not None else getattr(self, "cur_op", None)
        self.sites.append((message, op.loc if op is not None else None, tuple(labels)))
        return len(self.sites)

    def fail_if(self, cond: str, message: str, op, values=()):
        """Emit a runtime check. A condition already checked on the current path (same text, same SSA
        variables) is not checked again, and a condition that is false by its constant parts is dropped."""
        cond = _simplify_condition(cond)
        if cond is None or any(cond in done for done in self.checked):
            return
        self.checked[-1].add(cond)
        sid = self.site(message, op, [v for v, _ in values][:3] if values else ())
        vals = ([e for _, e in values] + ["0", "0", "0"])[:3]
        var = self.tmp("ck")
        parts = cond.split(" or ")   # comparisons (and ``not b``): or-ed without a branch
        self.emit_pure(f"{var} = {cond if len(parts) == 1 else ' | '.join(f'({p})' for p in parts)}")
        self._pending.append((var, sid, vals, self._depth))

    def bufname(self, v: Value) -> str:
        seen = set()
        while v.id in self.share and v.id not in seen:
            seen.add(v.id)
            v = self.share[v.id]
        return f"buf_{self.number(v)}"

    def buffer(self, v: Value) -> str:
        t: TileType = v.type
        if v.id in self.share:
            return self.bufname(v)
        name = f"buf_{self.number(v)}"
        npd = _TILE_NP[t.dtype.name]
        if self.nan_fill and t.dtype.is_float:
            self.buffers.append((name, f"np.full({t.numel}, np.nan, {npd})"))
        else:
            self.buffers.append((name, f"np.empty({t.numel}, {npd})"))
        return name

    def view(self, v: Value, dims: list[str]) -> str:
        """Bind v's variable to a view of its buffer with runtime valid dims."""
        name = self.var_name(v)
        buf = self.buffer(v)
        if len(dims) == 1:
            self.emit(f"{name} = {buf}[:{dims[0]}]")
        else:
            self.emit(f"{name} = {buf}[:{dims[0]} * {dims[1]}].reshape({dims[0]}, {dims[1]})")
        self.tile_var[v.id] = name
        return name

    def _block(self, block: Block):
        early: set[int] = set()
        for k, op in enumerate(block.ops):
            if id(op) in early:
                continue
            if op.kind == "sload" and self._plain_load(op):
                self._hoist_checks(block.ops, k + 1, early)
            self.cur_op = op
            getattr(self, "op_" + op.kind)(op)

    def _hoist_checks(self, ops: list, start: int, early: set):
        """Emit now the ``check`` ops of the run of scalar loads, checks and pure scalar ops that follows a
        scalar load (``ops[start:]``) whose operands are ready, with the pure ops that compute them: they join
        the checks pending before the load, so a table row read field by field (a check, then a load, per
        field) is tested in one branch, not one per field. Only loads are passed, and they have no effect, so
        a failing run records the check it recorded before (the first failing one in program order) and
        nothing else changes; a check that reads a value loaded in the run stays where it is."""
        for op in ops[start:]:
            if id(op) in early or (op.kind == "sload" and self._plain_load(op)):
                continue
            if op.kind != "check" and op.kind not in _PURE_SCALAR:
                return
            if all(self._ready(x) for x in op.operands):
                early.add(id(op))
                self.cur_op = op
                getattr(self, "op_" + op.kind)(op)

    def _plain_load(self, op) -> bool:
        """True when the scalar load ``op`` has no effect and cannot fail (checked modules: unless its tensor is
        tracked)."""
        return True

    def _ready(self, x) -> bool:
        """True when the scalar operand ``x`` has its Python expression now."""
        if not isinstance(x, Value):
            return True
        if x.const is not None and x.owner is not None and x.owner.kind == "const":
            return True
        return x.id in self.names or x.id in self.tensors

    # -------------------------------------------------------------- scalars
    def op_const(self, op):
        pass

    def op_sbin(self, op):
        a, b = op.operands
        kind = op.attrs["op"]
        ra, rb = self.ref(a), self.ref(b)
        out = self.var_name(op.result)
        if kind in ("floordiv", "mod") and not (b.const is not None):
            self.fail_if(f"{rb} == 0", "integer division by zero", op)
        if op.result.type == F32 and kind not in ("lt", "le", "gt", "ge", "eq", "ne"):
            if kind == "truediv":
                expr = f"f32(f32({ra}) / f32({rb}))"
            else:
                expr = "f32(" + _SCALAR_BIN[kind].format(a=ra, b=rb) + ")"
        elif kind == "truediv":
            expr = f"f32(f32({ra}) / f32({rb}))"
        elif kind in ("and", "or"):
            if op.result.type == BOOL and not (_is_bool(a) and _is_bool(b)):
                expr = f"({ra} {kind} {rb})"
            else:   # booleans (or integers): both evaluated, no branch
                expr = f"({ra} {'&' if kind == 'and' else '|'} {rb})"
        else:
            expr = _SCALAR_BIN[kind].format(a=ra, b=rb)
        self.emit_pure(f"{out} = {expr}")
        self.names[op.result.id] = out

    def op_sun(self, op):
        (a,) = op.operands
        kind = op.attrs["op"]
        out = self.var_name(op.result)
        ra = self.ref(a)
        if kind in _UN_FMT and kind not in ("neg", "abs"):   # a float math function: the called runtime version
            expr = _called(_UN_FMT[kind].format(a=f"f32({ra})"))
        else:
            expr = {"neg": f"-{ra}", "not": f"not {ra}", "abs": f"abs({ra})"}[kind]
        if op.result.type == F32:
            expr = f"f32({expr})"
        self.emit_pure(f"{out} = {expr}")
        self.names[op.result.id] = out

    def op_scast(self, op):
        (a,) = op.operands
        out = self.var_name(op.result)
        t = op.result.type
        fn = {F32: "f32", INDEX: "np.int64", BOOL: "bool"}[t]
        self.emit_pure(f"{out} = {fn}({self.ref(a)})")
        self.names[op.result.id] = out

    def op_sselect(self, op):
        c, a, b = op.operands
        out = self.var_name(op.result)
        self.emit_pure(f"{out} = {self.ref(a)} if {self.ref(c)} else {self.ref(b)}")
        self.names[op.result.id] = out

    def op_sload(self, op):
        tensor, offset = op.operands
        flat, _, dt = self.tensors[tensor.id]
        out = self.var_name(op.result)
        raw = f"{flat}[{self.ref(offset)}]"
        if dt in _DECODE:
            expr = f"{_DECODE[dt]}({raw})"
        elif dt == "float32":
            expr = f"f32({raw})"
        elif dt == "bool":
            expr = f"bool({raw})"
        else:
            expr = f"np.int64({raw})"
        self.emit(f"{out} = {expr}")
        self.names[op.result.id] = out

    def op_dim(self, op):
        _, first_axis, _ = self.tensors[op.operands[0].id]
        out = self.var_name(op.result)
        self.emit_pure(f"{out} = _dims[{first_axis + op.attrs['axis']}]")
        self.names[op.result.id] = out

    def op_block_idx(self, op):
        self.names[op.result.id] = "blk"

    def op_block_num(self, op):
        self.names[op.result.id] = "nblk"

    def op_subblock_idx(self, op):
        self.names[op.result.id] = "sub"

    # ------------------------------------------------------------ cross-core flags
    # flags[k, id] for k = 0, 1: AIV k's inbound counter (the AIC's set raises both); k = 2, 3: the AIC's
    # inbound counter from AIV k-2 (its wait needs both). sched[4] counts every set and completed wait (the
    # baton's progress measure, see sync.py); only the baton holder touches either
    def _flag_rows(self, inbound: bool) -> list:
        if self.core == "aic":
            return ["2", "3"] if inbound else ["0", "1"]
        return ["sub"] if inbound else ["2 + sub"]

    def op_flag_set(self, op):
        fid, name = op.attrs["id"], op.attrs["name"]
        for r in self._flag_rows(False):
            sid = self.site(f"flag {name} (id {fid}) is set a 16th time without a wait: the hardware counter "
                            f"saturates at 15", op)
            self.emit(f"if flags[{r}, {fid}] >= 15:")
            self.emit("    err[blk, 4] = role")
            self.emit("    abort_group(sched)")
            self.emit(f"    return fail(err, blk, np.int64({sid}), np.int64(0), np.int64(0), np.int64(0))")
            self.emit(f"flags[{r}, {fid}] += 1")
        self.emit("sched[4] += 1")

    def op_event_set(self, op):
        pass   # a core's pipes run in program order here: events order nothing (the CPU twin checks pairing)

    op_event_wait = op_event_set
    op_barrier = op_event_set

    def op_flag_wait(self, op):
        fid, name = op.attrs["id"], op.attrs["name"]
        rows = self._flag_rows(True)
        sid = self.site(f"waits on flag {name} (id {fid})", op)
        self.emit(f"while {' or '.join(f'flags[{r}, {fid}] == 0' for r in rows)}:")
        self.emit(f"    sched[5 + role] = {sid}")
        self.emit("    if wait_turn(sched, role):")
        self.emit("        return 0")
        self.emit("sched[5 + role] = 0")
        for r in rows:
            self.emit(f"flags[{r}, {fid}] -= 1")
        self.emit("sched[4] += 1")

    def op_check(self, op):
        cond, *vals = op.operands
        labels = op.attrs.get("labels") or tuple(repr(v) for v in vals)
        self.fail_if(f"not {self.ref(cond)}", op.attrs["message"], op,
                     [(lab, self.ref(v)) for lab, v in zip(labels, vals)])

    # ----------------------------------------------------------- GM access
    def _row_addr(self, w: Window, dim: int, idx: str, op=None) -> str:
        """The element offset of index ``idx`` of window dim ``dim`` (emits the mixed-radix decomposition and,
        for paged dims, the checked block-table reads)."""
        d = w.dims[dim]
        lookups = d.lookups or [None] * len(d.radices)
        if len(d.radices) == 1 and lookups[0] is None:
            s = self.ref(d.strides[0])
            return idx if s == "1" else f"({idx}) * {s}"
        digits = []
        rest = self.tmp("i")
        self.emit(f"{rest} = {idx}")
        for radix in reversed(d.radices[1:]):
            r = self.ref(radix)
            digit = self.tmp("i")
            self.emit(f"{digit} = {rest} % {r}")
            digits.append(digit)
            nxt = self.tmp("i")
            self.emit(f"{nxt} = {rest} // {r}")
            rest = nxt
        digits.append(rest)
        digits.reverse()   # outer to inner
        parts = []
        for digit, stride, lk in zip(digits, d.strides, lookups):
            if lk is not None:
                flat = self.tensors[lk.table.id][0]
                idx_var = self.tmp("blk")
                self.emit(f"{idx_var} = np.int64({flat}[{self.ref(lk.offset)} + {digit} * {self.ref(lk.stride)}])")
                bound = self.ref(lk.bound)
                self.fail_if(f"{idx_var} < 0 or {idx_var} >= {bound}", "paged KV: a block-table entry is not a valid "
                             "block index", op, [("entry", idx_var), ("blocks", bound)])
                digit = idx_var
            parts.append(f"{digit} * {self.ref(stride)}")
        return " + ".join(parts)

    def _window_bounds(self, w: Window, op, counts: list[str], what: str):
        for i, (d, n) in enumerate(zip(w.dims, counts)):
            start, bound = self.ref(d.start), self.ref(d.bound)
            self.fail_if(f"{start} < 0 or {start} + {n} > {bound}" if start != "0" else f"{n} > {bound}",
                         f"{what}: GM dim {i} access [start, start+count) leaves [0, bound)", op,
                         [("start", start), ("count", n), ("bound", bound)])

    def _window_counts(self, w: Window, op, what: str) -> list[str]:
        counts = []
        for i, d in enumerate(w.dims):
            n = self.ref(d.valid)
            if not (d.valid.const is not None if isinstance(d.valid, Value) else True):
                self.fail_if(f"{n} < 0 or {n} > {d.extent}", f"{what}: valid extent of dim {i} is outside "
                             f"[0, {d.extent}]", op, [("valid", n)])
            counts.append(n)
        return counts

    def _contiguous(self, w: Window, dim: int) -> bool:
        d = w.dims[dim]
        return len(d.radices) == 1 and self.ref(d.strides[0]) == "1" and not any(d.lookups or ())

    def _plain_rows(self, w: Window) -> bool:
        """A rank-2 window with one stride for its rows and contiguous columns (the runtime copies' shape)."""
        return (len(w.dims) == 2 and len(w.dims[0].radices) == 1 and not any(w.dims[0].lookups or ())
                and self._contiguous(w, 1))

    def _plain_base(self, w: Window) -> tuple[str, str]:
        stride = self.ref(w.dims[0].strides[0])
        base = self.tmp("base")
        self.emit(f"{base} = {self.ref(w.offset)} + ({self.ref(w.dims[0].start)}) * {stride} + "
                  f"{self.ref(w.dims[1].start)}")
        return base, stride

    def _gm_segment(self, w: Window, dim: int, base: str, count: str):
        """A 1-D slice of the flat tensor covering ``count`` elements of a contiguous window dim from ``base``
        (slices index with the plain loop variable, which lets LLVM vectorise the loop)."""
        flat = self.tensors[w.tensor.id][0]
        seg = self.tmp("seg")
        lo = f"{base} + {self.ref(w.dims[dim].start)}"
        self.emit(f"{seg} = {flat}[{lo}:{lo} + {count}]")
        return seg

    def _gm_elem(self, w: Window, dim: int, base: str, idx: str) -> str:
        """The flat-tensor element of window dim ``dim`` at ``idx`` (emits the index decomposition)."""
        flat = self.tensors[w.tensor.id][0]
        return f"{flat}[{base} + {self._row_addr(w, dim, f'{self.ref(w.dims[dim].start)} + {idx}')}]"

    def _gm_elementwise(self, w: Window, off: str, counts: list[str], tile: str, assign, index_only=False):
        """Emit the element loop between the window at ``off`` and the tile variable ``tile``.

        ``assign(gm, t)`` returns the statement for one element pair (GM expression, tile expression); a read
        and a store differ only in it. Contiguous dims walk a slice (vectorisable), the others decompose the
        index through the window's dims. ``index_only``: ``assign(index, None)`` gets the element's flat
        index instead (no slices, no tile)."""
        def inner(base, dim, row):
            c = self.tmp("c")
            if self._fractal_runs(w, dim) and not index_only:
                self._gm_runs(w, dim, base, counts[dim], row, assign)
                return
            if self._contiguous(w, dim) and not index_only:
                seg = self._gm_segment(w, dim, base, counts[dim])   # the slice is taken once, outside the loop
                self.emit(f"for {c} in range({counts[dim]}):")
                self.emit("    " + assign(f"{seg}[{c}]", f"{row}[{c}]"))
                return
            self.emit(f"for {c} in range({counts[dim]}):")
            self.depth += 1
            if index_only:
                self.emit(assign(f"{base} + {self._row_addr(w, dim, f'{self.ref(w.dims[dim].start)} + {c}')}", None))
            else:
                self.emit(assign(self._gm_elem(w, dim, base, c), f"{row}[{c}]"))
            self.depth -= 1

        if len(w.dims) == 1:
            inner(off, 0, tile)
            return
        r = self.tmp("r")
        self.emit(f"for {r} in range({counts[0]}):")
        self.depth += 1
        ro = self.tmp("ro")
        self.emit(f"{ro} = {off} + {self._row_addr(w, 0, f'{self.ref(w.dims[0].start)} + {r}')}")
        row = None
        if not index_only:
            row = self.tmp("row")
            self.emit(f"{row} = {tile}[{r}]")
        inner(ro, 1, row)
        self.depth -= 1

    def _fractal_runs(self, w: Window, dim: int) -> bool:
        """A window dim merged from two plain radices whose inner one is contiguous (an NZ cache's D: fractals of
        d0 contiguous elements), walked in runs without a division per element."""
        d = w.dims[dim]
        return len(d.radices) == 2 and self.ref(d.strides[1]) == "1" and not any(d.lookups or ())

    def _gm_runs(self, w: Window, dim: int, base: str, count: str, row: str, assign):
        """The element loop of a ``_fractal_runs`` dim: runs of up to one inner radix of contiguous elements, each
        a slice of the flat tensor (vectorisable), the outer digit stepping by its stride between runs."""
        d = w.dims[dim]
        flat = self.tensors[w.tensor.id][0]
        inner_r, outer_s = self.ref(d.radices[1]), self.ref(d.strides[0])
        start = self.ref(d.start)
        c, hi, lo, n, e, seg = (self.tmp(x) for x in ("c", "hi", "lo", "n", "e", "seg"))
        self.emit(f"{hi} = ({start}) // {inner_r}")
        self.emit(f"{lo} = ({start}) % {inner_r}")
        self.emit(f"{c} = 0")
        self.emit(f"while {c} < {count}:")
        self.depth += 1
        self.emit(f"{n} = min({inner_r} - {lo}, {count} - {c})")
        self.emit(f"{seg} = {flat}[{base} + {hi} * {outer_s} + {lo}:{base} + {hi} * {outer_s} + {lo} + {n}]")
        self.emit(f"for {e} in range({n}):")
        self.emit("    " + assign(f"{seg}[{e}]", f"{row}[{c} + {e}]"))
        self.emit(f"{c} += {n}")
        self.emit(f"{hi} += 1")
        self.emit(f"{lo} = 0")
        self.depth -= 1

    def _gm_read_loop(self, w: Window, dst: str, counts: list[str]):
        dt = self.tensors[w.tensor.id][2]
        dec = _DECODE.get(dt)
        if len(w.dims) == 2 and self._plain_rows(w):
            base, stride = self._plain_base(w)
            self.emit(f"read_rows_{_KIND.get(dt, 'raw')}({self.tensors[w.tensor.id][0]}, {_i64(base)}, "
                      f"{_i64(stride)}, {_i64(counts[0])}, {_i64(counts[1])}, {dst})")
            return
        self._gm_elementwise(w, self.ref(w.offset), counts, dst,
                             lambda gm, t: f"{t} = {dec}({gm})" if dec else f"{t} = {gm}")

    def op_load(self, op):
        w: Window = op.windows["window"]
        counts = self._window_counts(w, op, "load")
        self._window_bounds(w, op, counts, "load")
        dst = self.view(op.result, counts)
        self._gm_read_loop(w, dst, counts)

    def op_store(self, op):
        w: Window = op.windows["window"]
        tile = op.args[-1]
        src = self.tile(tile)
        flat, _, dt = self.tensors[w.tensor.id]
        counts = [f"{src}.shape[{i}]" for i in range(tile.type.rank)]
        wcounts = self._window_counts(w, op, "store")
        for i, (n, wn) in enumerate(zip(counts, wcounts)):
            self.fail_if(f"{n} > {wn}", f"store: the tile's valid dim {i} exceeds the window's valid extent", op,
                         [("tile", n), ("window", wn)])
        self._window_bounds(w, op, counts, "store")
        enc = _ENCODE.get(dt) or ("f32" if dt == "float32" else None)
        if len(w.dims) == 2 and self._plain_rows(w) and (enc or tile.type.dtype.name == dt):
            base, stride = self._plain_base(w)
            self.emit(f"write_rows_{_KIND.get(dt, 'raw')}({src}, {flat}, {_i64(base)}, {_i64(stride)}, "
                      f"{_i64(counts[0])}, {_i64(counts[1])})")
            return
        self._gm_elementwise(w, self.ref(w.offset), counts, src,
                             lambda gm, t: f"{gm} = {enc}({t})" if enc else f"{gm} = {t}")

    # ------------------------------------------------------------ cube ops
    def tile(self, v: Value) -> str:
        """The variable of a materialised tile value. An inlined value (a broadcast ``expand``, or an elementwise
        chain with one use) that an op reads whole rather than per element (``insert_rows`` of a broadcast
        chunk, say) is materialised here, where that op reads it, into a buffer of its own."""
        if v.id in self.tile_var:
            return self.tile_var[v.id]
        if v.id in self.inline and v.owner is not None:
            self._materialise(v.owner)
            return self.tile_var[v.id]
        raise KeyError(f"tile {v!r} is not materialised (codegen ordering bug)")

    def _alias(self, op):
        self.tile_var[op.result.id] = self.tile(op.operands[0])

    op_copy = _alias
    op_handoff = _alias

    def _mma_operand(self, op, window) -> str:
        """A streamed (GM window) mma operand, read whole into a staging buffer."""
        counts = self._window_counts(window, op, "mma operand")
        self._window_bounds(window, op, counts, "mma operand")
        stage = Value(TileType(window.tensor.type.dtype, L1, window.shape), "staged")
        dst = self.view(stage, counts)
        self._gm_read_loop(window, dst, counts)
        return dst

    def op_mma(self, op):
        attrs = op.attrs
        ops = list(op.args)
        acc = ops.pop() if attrs["acc"] else None
        trans = attrs["trans_b"]
        is_int = op.result.type.dtype.is_int
        a_win, b_win = op.windows.get("a"), op.windows.get("b")
        byte_ints = is_int and all(dt in _BYTE_INTS for dt in _mma_operand_dtypes(op))
        if b_win is not None and a_win is None and (not is_int or byte_ints and self._plain_rows(b_win)):
            a = self.tile(ops.pop(0))
            w = b_win
            counts = self._window_counts(w, op, "mma operand")
            self._window_bounds(w, op, counts, "mma operand")  # both paths
            kind = _KIND.get(self.tensors[w.tensor.id][2])
            if not is_int and self._plain_rows(w) and kind in ("f16", "bf16", "f32"):
                self._mma_auto(op, a, w, counts, trans, kind)
                return self._mma_acc(op, acc)
            self.emit(f"if {a}.shape[0] <= {_SKINNY_ROWS}:")
            self.depth += 1
            self.checked.append(set())
            self._mma_skinny(op, a, w, trans)
            self.checked.pop()
            self.depth -= 1
            self.emit("else:")
            self.depth += 1
            self.checked.append(set())
            b = self._mma_operand(op, w)
            self._mma_dense(op, a, b, trans, is_int, bind=False)
            self.checked.pop()
            self.depth -= 1
        else:
            a = self._mma_operand(op, a_win) if a_win is not None else self.tile(ops.pop(0))
            b = self._mma_operand(op, b_win) if b_win is not None else self.tile(ops.pop(0))
            self._mma_dense(op, a, b, trans, is_int)
        self._mma_acc(op, acc)

    def _mma_acc(self, op, acc):
        """The accumulation of an mma with ``acc`` into its product."""
        if acc is not None:
            out = self.tile(op.result)
            acc_v = self.tile(acc)
            self.fail_if(f"{acc_v}.shape[0] != {out}.shape[0] or {acc_v}.shape[1] != {out}.shape[1]",
                         "mma: acc's valid shape differs from the product's", op)
            i, j = self.tmp("i"), self.tmp("j")
            self.emit(f"for {i} in range({out}.shape[0]):")
            self.emit(f"    for {j} in range({out}.shape[1]):")
            self.emit(f"        {out}[{i}, {j}] += {acc_v}[{i}, {j}]")

    def _mma_auto(self, op, a: str, w: Window, counts, trans: bool, kind: str):
        """a times a plain-rows float GM window in one runtime call (``rt.mm_auto_bt_<kind>`` /
        ``mm_auto_b_<kind>``), which streams the window for a few rows of a and stages it for BLAS otherwise:
        the skinny/dense choice without a branch in the kernel."""
        out = self._window_product(op, a, counts, trans)
        rbuf = self._row_buffer(w)
        stage = self.buffer(Value(TileType(w.tensor.type.dtype, L1, w.shape), "staged"))
        self._emit_streamed_mm(w, a, counts, out, trans, kind, [rbuf, stage], fn="mm_auto")

    def _window_product(self, op, a: str, counts, trans: bool) -> str:
        """The result view of a times a GM window of valid extents ``counts`` (n x k when ``trans``, else
        k x n), after the check that the contraction extents agree."""
        m, k = f"{a}.shape[0]", f"{a}.shape[1]"
        n, kb = counts if trans else (counts[1], counts[0])
        self.fail_if(f"{k} != {kb}", "mma: the operands' valid contraction extents differ", op,
                     [("k_a", k), ("k_b", kb)])
        return self._result_view(op, [m, n])

    def _row_buffer(self, w: Window) -> str:
        """A buffer of one decoded row of the GM window ``w`` (float32)."""
        return self.buffer(Value(TileType(w.tensor.type.dtype, L1, (w.dims[1].extent,)), "brow"))

    def _mma_dense(self, op, a, b, trans, is_int, bind=True):
        m, k = f"{a}.shape[0]", f"{a}.shape[1]"
        kb, n = (f"{b}.shape[1]", f"{b}.shape[0]") if trans else (f"{b}.shape[0]", f"{b}.shape[1]")
        self.fail_if(f"{k} != {kb}", "mma: the operands' valid contraction extents differ", op,
                     [("k_a", k), ("k_b", kb)])
        out = self._result_view(op, [m, n], bind)
        bt = f"{b}.T" if trans else b
        if is_int and all(dt in _BYTE_INTS for dt in _mma_operand_dtypes(op)):
            self.emit(f"dot_int_into({a}, {b}, {out}, {bool(trans)}, {_byte_product_bound(op)})")
        elif is_int:
            i, j, p, s = self.tmp("i"), self.tmp("j"), self.tmp("p"), self.tmp("s")
            self.emit(f"for {i} in range({m}):")
            self.emit(f"    for {j} in range({n}):")
            self.emit(f"        {s} = 0")
            self.emit(f"        for {p} in range({k}):")
            bel = f"{b}[{j}, {p}]" if trans else f"{b}[{p}, {j}]"
            self.emit(f"            {s} += np.int64({a}[{i}, {p}]) * np.int64({bel})")
            self.emit(f"        {out}[{i}, {j}] = {s}")
        else:
            self.emit(f"dot_into({a}, {bt}, {out})")   # empty extents inside: no branch here

    def _result_view(self, op, dims, bind=True) -> str:
        """The mma result's view; the two branches of a skinny/dense choice share one buffer and name."""
        v = op.result
        if v.id in self.tile_var:
            name = self.tile_var[v.id]
            self.emit(f"{name} = {self.bufname(v)}[:{dims[0]} * {dims[1]}].reshape({dims[0]}, {dims[1]})")
            return name
        return self.view(v, dims)

    def _mma_skinny(self, op, a: str, w: Window, trans: bool):
        """a (few rows) times a GM window, reading the window's rows once, straight into the products (a
        matrix-vector shape: BLAS and a staged copy of the window cost more than the math), for the windows
        ``_mma_auto`` does not take: 16-bit and fp32 windows without plain rows decode into fp32 rows element by
        element; 8-bit integer ones (plain rows only, as op_mma decides) go to the exact integer ``mm_bt_i8`` /
        ``mm_b_i8``."""
        counts = self._window_counts(w, op, "mma operand")
        self._window_bounds(w, op, counts, "mma operand")
        dec = _DECODE.get(self.tensors[w.tensor.id][2])
        out = self._window_product(op, a, counts, trans)
        if op.result.type.dtype.is_int:   # 8-bit operands, plain rows (op_mma's condition): exact integer sums
            self._emit_streamed_mm(w, a, counts, out, trans, "i8", [] if trans else [str(_byte_product_bound(op))])
            return
        # a float window here has no plain rows (plain-rows float windows are ``_mma_auto``'s)
        rbuf = self._row_buffer(w)
        r, c = self.tmp("r"), self.tmp("c")
        if not trans:
            self.emit(f"{out}.fill(0)")
        self.emit(f"for {r} in range({counts[0]}):")
        self.depth += 1
        ro = self.tmp("ro")
        self.emit(f"{ro} = {self.ref(w.offset)} + {self._row_addr(w, 0, f'{self.ref(w.dims[0].start)} + {r}')}")
        if self._contiguous(w, 1):
            seg = self._gm_segment(w, 1, ro, counts[1])
            self.emit(f"for {c} in range({counts[1]}):")
            self.emit(f"    {rbuf}[{c}] = {dec}({seg}[{c}])" if dec else f"    {rbuf}[{c}] = {seg}[{c}]")
        else:
            self.emit(f"for {c} in range({counts[1]}):")
            self.depth += 1
            raw = self._gm_elem(w, 1, ro, c)
            self.emit(f"{rbuf}[{c}] = {dec}({raw})" if dec else f"{rbuf}[{c}] = {raw}")
            self.depth -= 1
        if trans:  # out[:, r] = a . b[r, :]
            self.emit(f"dot_rows_t({a}, {rbuf}, {_i64(counts[1])}, {out}, {r})")
        else:  # out[:, :] += a[:, r] * b[r, :]
            self.emit(f"axpy_rows({a}, {r}, {rbuf}, {_i64(counts[1])}, {out})")
        self.depth -= 1

    def _emit_streamed_mm(self, w: Window, a: str, counts, out: str, trans: bool, kind: str, extra: list,
                          fn: str = "mm"):
        """The call of a runtime mma on a plain-rows window: ``<fn>_bt_<kind>`` / ``<fn>_b_<kind>`` (``mm``:
        the streamed ones; ``mm_auto``: streamed or staged for BLAS, see ``_mma_auto``)."""
        flat = self.tensors[w.tensor.id][0]
        base, stride = self._plain_base(w)
        args = [a, flat, _i64(base), _i64(stride), _i64(counts[0]), _i64(counts[1]), out] + extra
        self.emit(f"{fn}_{'bt' if trans else 'b'}_{kind}({', '.join(args)})")

    def op_dequant(self, op):
        """The fixpipe's DEQF16 as the chip computes it: float32(x) (exact below 2**24, else to nearest even) times
        the scale as the fixpipe keeps it (its fp32 cut to the high 19 bits, ``rt.fixpipe_scale``), rounded to
        float16 (nearest even): for a scale already so cut, the same steps as ``cast(cast(x, float32) * scale,
        float16)`` in the vector unit."""
        x, scale = op.operands
        src = self.tile_var[x.id]
        out = self.view(op.result, [f"{src}.shape[0]", f"{src}.shape[1]"])
        i, j, k = self.tmp("i"), self.tmp("j"), self.tmp("deq")
        self.emit(f"{k} = fixpipe_scale({self._scalar_as(scale, F32.dtype)})")
        self.emit(f"for {i} in range({src}.shape[0]):")
        self.emit(f"    for {j} in range({src}.shape[1]):")
        self.emit(f"        {out}[{i}, {j}] = {_ROUND['float16']}(f32({src}[{i}, {j}]) * {k})")

    def op_create(self, op):
        t: TileType = op.result.type
        value, *valid = op.operands
        dims = [self.ref(v) for v in valid] if valid else [str(d) for d in t.shape]
        for i, v in enumerate(valid):
            if v.const is None:
                self.fail_if(f"{dims[i]} < 0 or {dims[i]} > {t.shape[i]}",
                             f"valid extent of dim {i} is outside [0, {t.shape[i]}]", op, [("valid", dims[i])])
        out = self.view(op.result, dims)
        if not op.attrs.get("uninit"):
            self.emit(f"{out}.fill({self._scalar_as(value, t.dtype)})")

    def op_iota(self, op):
        t: TileType = op.result.type
        start, *valid = op.operands
        n = self.ref(valid[0]) if valid else str(t.shape[0])
        if valid and valid[0].const is None:
            self.fail_if(f"{n} < 0 or {n} > {t.shape[0]}", f"iota valid extent is outside [0, {t.shape[0]}]", op,
                         [("valid", n)])
        out = self.view(op.result, [n])
        j = self.tmp("j")
        self.emit(f"for {j} in range({n}):")
        conv = "f32" if t.dtype.is_float else ""
        self.emit(f"    {out}[{j}] = {conv}({self.ref(start)} + {j})")

    def _scalar_as(self, x, dt: DType) -> str:
        """A scalar operand converted to a tile dtype (rounded for 16-bit floats)."""
        if not isinstance(x, Value) or x.const is not None:
            c = x.const if isinstance(x, Value) else x
            if dt.is_float:
                c = float(c)
                if dt.name == "float16":
                    c = float(np.float16(c))
                elif dt.name == "bfloat16":
                    import ml_dtypes
                    c = float(np.array(c, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32))
                return _literal(c, F32)
            if dt.is_bool:
                return "True" if c else "False"
            return str(int(c))
        r = self.ref(x)
        if dt.is_float:
            return f"{_ROUND[dt.name]}(f32({r}))" if dt.name in _ROUND else f"f32({r})"
        if dt.is_bool:
            return f"bool({r})"
        return f"np.int64({r})"

    # ---------------------------------------------------------- device_print
    def op_device_print(self, op):
        """One line on stdout through numba's print (it holds the GIL for the line, so the cores' threads
        print whole lines): ``device_print 'name' block B [sub S] [loop i ...] : value``, the value a scalar or
        the tile's valid view (numpy's str, which summarises long arrays)."""
        value, *loops = op.args
        items = ["'device_print'", repr(repr(op.attrs["name"])), "'block'", "blk"]
        if self.core == "aiv":
            items += ["'sub'", "sub"]
        for name, v in zip(op.attrs["loop_names"], loops):
            items += [repr(name), self.ref(v)]
        if isinstance(value, Value) and value.is_tile:
            src = value.owner.args[0] if value.owner is not None and value.owner.kind == "expand" else value
            shown = self.tile(src)
        else:
            shown = self.ref(value)
        self.emit(f"print({', '.join(items)}, ':', {shown})")

    # ---------------------------------------------------------- gather
    def op_gather(self, op):
        """result[i] = table[idx[i]] over idx's valid elements. Each index k is checked before the read: k in
        [0, count) (the table view's extent) and start + k below the dimension's bound; a failure is the
        kernel line's out-of-bounds error. ``_gather_prologue`` / ``_gather_read`` are the checking mode's
        hooks (a GM read of every element)."""
        w = op.windows["table"]
        (idx,) = op.args
        shape = self._shape_from(self._leaves(idx), idx, op)
        out = self.view(op.result, list(shape))
        flat, _, dt = self.tensors[w.tensor.id]
        dec = _DECODE.get(dt)
        d = w.dims[0]
        n, start, bound = self.ref(d.valid), self.ref(d.start), self.ref(d.bound)
        state = self._gather_prologue(op)
        ivars = [self.tmp("i") for _ in shape]
        for iv, ext in zip(ivars, shape):
            self.emit(f"for {iv} in range({ext}):")
            self.depth += 1
        k = self.tmp("k")
        self.emit(f"{k} = np.int64({self.expr(idx, tuple(ivars))})")
        past = f"{k} >= {n}" if start == "0" else f"{k} >= {n} or {start} + {k} >= {bound}"
        self.fail_if(f"{k} < 0 or {past}", "gather: an index lies outside the table (GM index out of bounds)",
                     op, [("index", k), ("extent", n), ("bound", bound)])
        addr = self.tmp("a")
        self.emit(f"{addr} = {self.ref(w.offset)} + {self._row_addr(w, 0, k if start == '0' else f'{start} + {k}', op)}")
        self._gather_read(op, state, addr)
        raw = f"{flat}[{addr}]"
        self.emit(f"{out}[{', '.join(ivars)}] = {f'{dec}({raw})' if dec else raw}")
        self.depth -= len(ivars)

    def _gather_prologue(self, op):
        return None

    def _gather_read(self, op, state, addr: str):
        pass

    # ---------------------------------------------------------- row chunks
    def op_slice_rows(self, op):
        x, row, n = op.args
        name = self.var_name(op.result)
        self.emit(f"{name} = {self.tile(x)}[{self.ref(row)}:{self.ref(row)} + {self.ref(n)}]")
        self.tile_var[op.result.id] = name

    def op_insert_rows(self, op):
        """The chunk's rows copied into the full tile element by element: an array-to-array slice assignment
        needs numba's NRT (it may copy an overlapping source), which would make the whole function fail its
        NRT-free compile and be compiled a second time with NRT."""
        full, chunk, row = op.args
        f, c = self.tile(full), self.tile(chunk)
        r, i = self.tmp("r"), self.tmp("i")
        self.emit(f"for {i} in range({c}.shape[0]):")
        self.emit(f"    {r} = {self.ref(row)} + {i}")
        if len(chunk.type.shape) == 1:
            self.emit(f"    {f}[{r}] = {c}[{i}]")
        else:
            j = self.tmp("j")
            self.emit(f"    for {j} in range({c}.shape[1]):")
            self.emit(f"        {f}[{r}, {j}] = {c}[{i}, {j}]")
        self.tile_var[op.result.id] = f

    # ---------------------------------------------------------- fused ops
    def op_expand(self, op):
        pass  # always inlined into its consumers

    def op_ewise(self, op):
        if op.result.id in self.inline or id(op) in self.fused_into:
            return
        self._materialise(op)

    op_cast = op_ewise

    def op_reduce(self, op):
        if id(op) in self.fused_into:
            return
        (x,) = op.operands
        leaves = self._leaves(x)
        rows, cols = self._shape_from(leaves, x, op)
        out = self.view(op.result, [rows])
        i = self.tmp("i")
        self.emit(f"for {i} in range({rows}):")
        self.depth += 1
        if x.id in self.tile_var:
            row = f"{self.tile_var[x.id]}[{i}]"
        else:  # the reduced expression is computed into a row buffer first
            row = self.buffer(Value(TileType(dtype_of("float32") if x.type.dtype.is_float else dtype_of("int64"),
                                             L1, (x.type.shape[1],)), "row"))
            j = self.tmp("j")
            self.emit(f"for {j} in range({cols}):")
            self.emit(f"    {row}[{j}] = {self.expr(x, (i, j))}")
        self.emit(f"{out}[{i}] = {self._reduce_call(op, row, cols)}")
        self.depth -= 1

    @staticmethod
    def _reduce_call(u: Op, row: str, n: str) -> str:
        """The runtime reduction of ``row[:n]`` (rounded to the result dtype)."""
        dt = u.result.type.dtype
        kind = u.attrs["op"]
        fn = {"sum": "row_sum", "max": "row_max", "min": "row_min"}[kind]
        if not dt.is_float and kind != "sum":
            fn += "_int"
        call = f"{fn}({row}, {_i64(n)})"
        return f"{_ROUND[dt.name]}({call})" if dt.name in _ROUND else call

    def _materialise(self, op):
        v = op.result
        leaves = self._leaves(v)
        shape = self._shape_from(leaves, v, op)
        sibs = self.siblings.get(v.id, [])
        reds = [u for u in sibs if u.kind == "reduce"]
        # v's buffer is needed when a consumer reads it later, and by the fused reductions (they reduce v's
        # rows right after computing them, while they are in cache)
        keep = bool(reds) or len(sibs) < len(self.uses.get(v.id, []))
        out = self.view(v, list(shape)) if keep else None
        elem = self.tmp("e")
        outs = [(self.view(u.result, list(shape)), u) for u in sibs if u.kind != "reduce"]
        red_views = [self.view(u.result, [shape[0]]) for u in reds]
        i = self.tmp("i")
        j = self.tmp("j")
        self.emit(f"for {i} in range({shape[0]}):")
        self.depth += 1
        if v.type.rank == 1:
            self.emit(f"{elem} = {_called(self.expr(v, (i,), root=True))}")
            if out:
                self.emit(f"{out}[{i}] = {elem}")
            for view, u in outs:
                self.emit(f"{view}[{i}] = {_called(self.expr(u.result, (i,), root=True, subst={v.id: elem}))}")
            self.depth -= 1
            return
        # a column tile ((M, 1): a per-row value broadcast later) has rank-1 work: its math is called too
        math = _called if v.type.shape[1] == 1 else (lambda e: e)
        self.emit(f"for {j} in range({shape[1]}):")
        self.depth += 1
        self.emit(f"{elem} = {math(self.expr(v, (i, j), root=True))}")
        if out:
            self.emit(f"{out}[{i}, {j}] = {elem}")
        for view, u in outs:
            self.emit(f"{view}[{i}, {j}] = {math(self.expr(u.result, (i, j), root=True, subst={v.id: elem}))}")
        self.depth -= 1
        for u, view in zip(reds, red_views):
            self.emit(f"{view}[{i}] = {self._reduce_call(u, f'{out}[{i}]', shape[1])}")
        self.depth -= 1

    def _leaves(self, v: Value):
        """(leaf value, map from the leaf's dims to the root's dims) for every tile leaf of v's fusion tree."""
        out = []

        def walk(x, dmap, root=False):
            if not (isinstance(x, Value) and x.is_tile):
                return
            if x.id in self.tile_var or (not root and x.id not in self.inline):
                out.append((x, dmap))  # a materialised tile (also the root of a reduction over a loaded tile)
                return
            op = x.owner
            if op.kind == "expand":
                (src,) = op.operands
                walk(src, (dmap[0],) if op.attrs["axis"] == 1 else (dmap[1],))
                return
            for o in op.operands:
                if isinstance(o, Value) and o.is_tile:
                    sub = tuple(dmap[d] if o.type.shape[d] != 1 or x.type.shape[d] == 1 else None
                                for d in range(o.type.rank))
                    walk(o, sub)

        walk(v, tuple(range(v.type.rank)), root=True)
        return out

    def _shape_from(self, leaves, v: Value, op) -> tuple:
        """The runtime extents of a fused value: in each dim, its first leaf's that is not broadcast there; the
        other such leaves must agree (a runtime check). A leaf of static extent 1 counts only where no leaf has
        more: where the value's capacity is 1 too, the first leaf's runtime extent (0 or 1: an AIV's empty share
        of a one-row task) is the value's, as ``ValidExtents`` has it."""
        rank = v.type.rank
        cands: list[list[str]] = [[] for _ in range(rank)]
        ones: list[list[str]] = [[] for _ in range(rank)]
        for leaf, dmap in leaves:
            var = self.tile(leaf)
            for ld, rd in enumerate(dmap):
                if rd is not None:
                    (cands if leaf.type.shape[ld] != 1 else ones)[rd].append(f"{var}.shape[{ld}]")
        dims = []
        for d in range(rank):
            if not cands[d]:
                dims.append(ones[d][0] if ones[d] and v.type.shape[d] == 1 else "1")
                continue
            first = cands[d][0]
            for other in dict.fromkeys(cands[d][1:]):
                if other != first:
                    self.fail_if(f"{first} != {other}", f"tile operands' valid extents differ in dim {d}", op,
                                 [("a", first), ("b", other)])
            dims.append(first)
        return tuple(dims)

    def expr(self, v, idx: tuple, root: bool = False, subst: dict | None = None) -> str:
        """The per-element expression of v at index idx (index variables of v's own dims); ``subst`` maps
        value ids to element variables already computed in the current loop."""
        if not isinstance(v, Value):
            return _literal(v, None)
        if subst and v.id in subst and not root:
            return subst[v.id]
        if v.is_scalar:
            return self.ref(v)
        if v.id in self.tile_var and not root:
            var = self.tile_var[v.id]
            ix = [("0" if v.type.shape[d] == 1 else idx[d]) for d in range(v.type.rank)]
            return f"{var}[{', '.join(ix)}]"
        op = v.owner
        if op.kind == "expand":
            (src,) = op.operands
            return self.expr(src, (idx[0],) if op.attrs["axis"] == 1 else (idx[1],), subst=subst)
        dt = v.type.dtype
        if op.kind == "cast":
            (x,) = op.operands
            e = self.expr(x, self._sub_idx(x, v, idx), subst=subst)
            src = x.type.dtype
            to = dt
            if to.is_float:
                e = e if src.is_float else f"f32({e})"
                table = _ROUND_AWAY if op.attrs.get("rounding") == "round" else _ROUND
                return f"{table[to.name]}({e})" if to.name in table else f"f32({e})"
            if to.is_bool:
                return f"({e} != 0)"
            if src.is_float:
                lo, hi = _INT_RANGE[to.name]
                return f"{_CAST_INT[op.attrs['rounding']]}({e}, {float(lo)!r}, {float(hi)!r})"
            return f"np.int64({e})"
        kind = op.attrs["op"]
        args = []
        operand_dt = _operand_dtype(op)
        for o in op.operands:
            if isinstance(o, Value) and o.is_tile:
                args.append(self.expr(o, self._sub_idx(o, v, idx), subst=subst))
            else:
                args.append(self._scalar_as(o, operand_dt))
        if kind == "where":   # both operands evaluated (see ``rt.sel``)
            e = f"sel({args[0]}, {args[1]}, {args[2]})"
        elif kind in _BIN_FMT:
            e = _BIN_FMT[kind].format(a=args[0], b=args[1])
        elif kind == "not":
            e = f"(not {args[0]})" if operand_dt.is_bool else f"(~{args[0]})"
        elif kind == "relu":  # max(x, +0): negatives and -inf give +0.0, NaN stays NaN
            e = f"fmax({args[0]}, f32(0.0))" if operand_dt.is_float else f"max({args[0]}, 0)"
        else:
            e = _UN_FMT[kind].format(a=args[0])
        if dt.name in _ROUND and kind not in ("lt", "le", "gt", "ge", "eq", "ne"):
            e = f"{_ROUND[dt.name]}({e})"
        elif dt.name == "float32" and kind in ("div",):
            e = f"f32({e})"
        return e

    @staticmethod
    def _sub_idx(o: Value, parent: Value, idx: tuple) -> tuple:
        return tuple("0" if (o.type.shape[d] == 1 and parent.type.shape[d] != 1) else idx[d]
                     for d in range(o.type.rank))

    # ------------------------------------------------------------- control
    def op_for(self, op):
        lo, hi, step, *inits = op.operands
        body = op.blocks[0]
        iv, *args = body.args
        for a, init in zip(args, inits):
            self._bind_carried(a, init)
        ivn = self.var_name(iv)
        self.names[iv.id] = ivn
        self.emit(f"for {ivn} in range({self.ref(lo)}, {self.ref(hi)}, {self.ref(step)}):")
        self.depth += 1
        self.emit("pass")
        self.checked.append(set())
        self._block(body)
        self.checked.pop()
        self.depth -= 1
        for r, a in zip(op.results, args):
            if a.is_tile:
                self.tile_var[r.id] = self.tile_var[a.id]
            else:
                self.names[r.id] = self.names[a.id]

    def _bind_carried(self, a: Value, init: Value):
        if a.is_tile:
            name = self.var_name(a)
            src = self.tile(init)
            self.tile_var[a.id] = name
            if self.share.get(a.id) is init:
                self.emit(f"{name} = {src}")   # the loop starts in the initial value's own buffer
                self._bound_alias(name, src, a)
            else:
                self._copy_into(name, self.buffer(a), src, a.type.rank)
        else:
            name = self.var_name(a)
            self.emit(f"{name} = {self.ref(init)}")
            self.names[a.id] = name

    def _copy_into(self, name, buf, src, rank):
        if rank == 1:
            self.emit(f"{name} = {buf}[:{src}.shape[0]]")
            i = self.tmp("i")
            self.emit(f"for {i} in range({src}.shape[0]):")
            self.emit(f"    {name}[{i}] = {src}[{i}]")
        else:
            self.emit(f"{name} = {buf}[:{src}.shape[0] * {src}.shape[1]].reshape({src}.shape[0], {src}.shape[1])")
            i, j = self.tmp("i"), self.tmp("j")
            self.emit(f"for {i} in range({src}.shape[0]):")
            self.emit(f"    for {j} in range({src}.shape[1]):")
            self.emit(f"        {name}[{i}, {j}] = {src}[{i}, {j}]")

    def op_yield(self, op):
        parent = self._parent_of_yield(op)
        if parent.kind == "for":
            args = parent.blocks[0].args[1:]
            scalars_l, scalars_r = [], []
            pending = []
            arg_ids = {a.id for a in args}
            rebinds = []
            for a, v in zip(args, op.operands):
                if a.is_tile:
                    if self.tile(v) == self.tile(a):
                        continue
                    if self.bufname(v) == self.bufname(a):   # computed in place: just rebind the view
                        rebinds.append((a, v))
                        continue
                    pending.append((a, v))
                else:
                    scalars_l.append(self.names[a.id])
                    scalars_r.append(self.ref(v))
            clash = any(v.id in arg_ids for _, v in pending)
            if clash:
                temps = []
                for a, v in pending:
                    t = self.tmp("y")
                    self.emit(f"{t} = {self.tile(v)}.copy()")
                    self._bound_copy(t, self.tile(v))
                    temps.append(t)
                srcs = temps
            else:
                srcs = [self.tile(v) for _, v in pending]
            for (a, _), src in zip(pending, srcs):
                self._copy_into(self.tile(a), self.bufname(a), src, a.type.rank)
            for a, v in rebinds:
                self.emit(f"{self.tile(a)} = {self.tile(v)}")
                self._bound_alias(self.tile(a), self.tile(v), a)
            if scalars_l:
                self.emit(f"{', '.join(scalars_l)} = {', '.join(scalars_r)}" if len(scalars_l) > 1 else
                          f"{scalars_l[0]} = {scalars_r[0]}")
        else:  # if
            for r, v in zip(parent.results, op.operands):
                if r.is_tile:
                    name = self.var_name(r)
                    self.emit(f"{name} = {self.tile(v)}")
                    self.tile_var[r.id] = name
                    self._bound_alias(name, self.tile(v), r)
                else:
                    name = self.var_name(r)
                    self.emit(f"{name} = {self.ref(v)}")
                    self.names[r.id] = name

    def _parent_of_yield(self, yop):
        for op in _all_ops(self.body):
            for b in op.blocks:
                if b.ops and b.ops[-1] is yop:
                    return op
        raise KeyError("yield without a parent op")

    def op_if(self, op):
        self.emit(f"if {self.ref(op.operands[0])}:")
        self.depth += 1
        self.emit("pass")
        self.checked.append(set())
        self._block(op.blocks[0])
        self.checked.pop()
        self.depth -= 1
        self.emit("else:")
        self.depth += 1
        self.emit("pass")
        self.checked.append(set())
        self._block(op.blocks[1])
        self.checked.pop()
        self.depth -= 1


#: what needs numba's reference-counted runtime (NRT) in a generated function's text: allocations and boxing
_NEEDS_NRT = (".copy()", "np.empty(", "np.zeros(", "np.ones(", "np.full(", "np.array(", "np.asarray(",
              "np.concatenate(", "np.dot(", "print(")


def _mma_operand_dtypes(op: Op) -> list:
    """The dtype names of an mma's a and b operands, whether streamed from a GM window or tiles."""
    tiles = iter(op.args)
    out = []
    for name in ("a", "b"):
        w = op.windows.get(name)
        out.append((w.tensor if w is not None else next(tiles)).type.dtype.name)
    return out


def _byte_product_bound(op: Op) -> int:
    """The largest |product| of an 8-bit integer mma's operands (int8 x int8: 2**14; uint8 reaches 255)."""
    a, b = (255 if dt == "uint8" else 128 for dt in _mma_operand_dtypes(op))
    return a * b


def _decorator(lines: list, nrt_free: bool = True) -> str:
    """The ``@njit`` line of a generated kernel function. A function that allocates nothing (its buffers
    come from ``alloc``, its tiles are views of them) is compiled without NRT (``_nrt=False``): numba then
    emits no reference counting, so each early exit (a failed check returns) costs no chain of decrefs of
    every live view, which is most of the compile of a kernel with many checks. Nothing numeric changes.
    ``nrt_free`` False (the checked generator, whose shadows allocate) keeps NRT. The launcher calls a kernel
    function from Python only, never through a C function pointer, so numba is told not to build its C-callable
    wrapper (``no_cfunc_wrapper``): code nothing runs (about 2 % of a decode kernel's LLVM module; the saving
    is below this machine's noise, ``docs/compile_time.md``)."""
    text = "\n".join(lines)
    nrt = "" if not nrt_free or any(m in text for m in _NEEDS_NRT) else ", _nrt=False"
    return f"@njit(cache=True, nogil=True, error_model='numpy', no_cfunc_wrapper=True{nrt})"


def runtime_stamp() -> str:
    """A hash of the code generated kernels call into, so a changed runtime invalidates cached kernels."""
    return source_stamp(("codegen.py", "rt.py", "rounding.py", "sync.py"))


def _all_ops_in(op: Op):
    for b in op.blocks:
        yield from _all_ops(b)


def _all_ops(block):
    for op in block.ops:
        yield op
        for b in op.blocks:
            yield from _all_ops(b)


def _operand_dtype(op: Op) -> DType:
    return dtype_of(op.attrs["dtype"])


def _broadcasts_into(v: Value, user: Op) -> bool:
    """True when ``user`` reads ``v`` broadcast (v has a 1 where the user's result does not)."""
    out = user.results[0].type.shape
    return any(d == 1 and o != 1 for d, o in zip(v.type.shape, out))


def _simplify_condition(cond: str):
    """Drop the alternatives of an ``a or b or ...`` check that are false by constants (``0 < 0``); None when
    nothing is left."""
    parts = [p.strip() for p in cond.split(" or ")]
    kept = []
    for p in parts:
        bits = p.split()
        if len(bits) == 3 and bits[1] in ("<", ">", "<=", ">=", "!=", "==") and all(
                b.lstrip("-").isdigit() for b in (bits[0], bits[2])):
            if not eval(p):  # a comparison of two integer literals
                continue
        kept.append(p)
    return " or ".join(kept) if kept else None


def _is_bool(x) -> bool:
    """True for a boolean scalar operand (a BOOL value or a Python bool)."""
    return x.type == BOOL if isinstance(x, Value) else isinstance(x, bool)


def _called(expr: str) -> str:
    """``expr`` with its inlined math functions replaced by their called versions (see ``_CALLED``)."""
    for inl, called in _CALLED.items():
        expr = expr.replace(inl, called)
    return expr


def _i64(expr: str) -> str:
    """An integer argument of a runtime-function call. A bare literal is wrapped in np.int64: numba would
    otherwise type it as a literal and compile the callee once per literal value."""
    e = str(expr).strip()
    return f"np.int64({e})" if e.lstrip("-").isdigit() else e


def _ident(name: str) -> str:
    out = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in str(name))
    if not out or out[0].isdigit():
        out = "v_" + out
    return out


def _literal(x, t) -> str:
    if isinstance(x, bool):
        return "True" if x else "False"
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        if x != x:
            return "f32(np.nan)"
        if x == float("inf"):
            return "POS_INF"
        if x == float("-inf"):
            return "NEG_INF"
        return f"f32({x!r})"
    raise TypeError(f"no literal for {x!r}")

