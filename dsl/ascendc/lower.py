"""Lowering rules: the IR after every pass, printed as the Ascend C kernel the chip runs.

Model
-----
The input is a kernel after the whole pipeline (``passes.PIPELINE``): split
into programs (``program aic`` / ``program aiv``), hand-offs lowered to
workspace loads and stores, flags and events inserted, and every on-chip
value given a buffer by ``plan_memory`` (``kernel.memory.buffer_of``). The
backend reads nothing else: not the kernel library, not the tiling mirror.

* One ``op_<kind>`` method per op kind; an op kind without one raises
  ``AscendCUnsupported`` naming the kind and the source line (never silently
  skipped).
* Each program becomes an ``if ASCEND_IS_AIV { ... }`` / ``if ASCEND_IS_AIC
  { ... }`` block with its own ``TPipe`` and one ``TBuf`` per space; a tile
  value is a ``LocalTensor`` at its planned byte offset in that space
  (``<space>[offset].ReinterpretCast<T>()``), named after the DSL variable;
  a ping-pong buffer's tile is at ``offset + ping * copy``, the copy its
  loop's iteration parity picks (plan_memory), and its events' ids follow the
  same ping.
* UB tiles are row-major with the capacity's column count as row pitch; the
  rows a vector op touches are the valid rows (``ValidExtents``), the columns
  the whole pitch (the pad columns hold values nobody stores). Row reductions
  and stores use the valid columns. A pitch that is not whole 32-byte blocks
  (a (M, 1) column, a row of 7 floats) is kept: its copies move each row
  through an aligned scratch row, its row reductions read each row from one,
  and a column broadcast over it is the scalar loop (slow, exact).
* The vector API temporaries (the row-broadcast block of ``Brcb``, the
  ``ReduceMax`` work area, the divisor row of a tile/scalar division, the
  run row of a merged-dim copy, the aligned row of an unaligned-pitch copy or
  reduction, gathered unaligned row chunks) live in a
  scratch area placed after the planned UB peak; ``AscendCError`` when it
  does not fit.
* Elementwise ops the vector API has no form for here (compares and bool
  logic, ``where`` with broadcast or scalar arms, integer ``//`` / ``%`` /
  shifts) are a loop of scalar UB accesses fenced by ``PipeBarrier<PIPE_ALL>``:
  exact, slow. ``tanh`` / ``sigmoid`` / ``erf`` / ``floor`` / ``pow`` are the
  math library's ``Tanh`` / ``Sigmoid`` / ``Erf`` / ``Floor`` / ``Power`` count
  forms (half and float tiles); the scalar math functions are not lowered.
  A cast no one ``Cast`` does (fp32 -> int8, int8 -> fp32) is exact steps
  through half over scratch chunks (``_CAST_VIA``).
  ``gather`` is a fenced loop of scalar GM reads and UB writes, each index
  checked with ``CVT_CHECK``; ``device_print`` is a ``// device_print(...)``
  comment.
* Scalars are C++ locals (``int64_t``, ``float``, ``bool``; unnamed ones are
  inlined into their uses); ``//`` and ``%`` keep Python's floor semantics
  (``cvtFloorDiv`` / ``cvtMod``). Runtime scalar parameters and the GM
  tensors' shapes come from the tiling struct; the channels' workspace
  parameters are views of the one ``workspace`` argument.
* Loop-carried and branch values are assigned at ``yield`` (UB tiles copied
  when the plan gave them different buffers; L0C/L1 accumulators stay in
  place). The cube ops' rules are ``lower_cube.CubeRules``.
* ``check`` ops become ``CVT_CHECK(cond, "message")``: the twin reports the
  message and stops; on the chip it traps.
* Every statement block carries a ``// line N: source`` comment of the DSL
  line it came from (once per line change).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ir import Block, Kernel, Op, Value, Window
from ..shapes import ValidExtents
from ..types import DTYPES, ScalarType, TensorType, TileType
from .c_syntax import CTYPE, SPACE_VAR, AscendCError, AscendCUnsupported, c_cast, c_sum
from .lower_cube import CubeRules, _const
from .names import Namer, c_string, comment

__all__ = ["AscendCError", "AscendCUnsupported", "LoweredKernel", "lower_kernel", "CTYPE"]


_SCALAR_CTYPE = {"int64": "int64_t", "float32": "float", "bool": "bool"}
_POSITION = {"UB": "TPosition::VECCALC", "L1": "TPosition::A1", "L0A": "TPosition::A2", "L0B": "TPosition::B2",
             "L0C": "TPosition::CO1"}
_PIPE = {"V": "PIPE_V", "M": "PIPE_M", "MTE1": "PIPE_MTE1", "MTE2": "PIPE_MTE2", "MTE3": "PIPE_MTE3",
         "FIX": "PIPE_FIX", "S": "PIPE_S"}
_BIN_TT = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "max": "Max", "min": "Min"}
_BIN_TS = {"add": "Adds", "mul": "Muls", "max": "Maxs", "min": "Mins"}
_UNARY = {"exp": "Exp", "log": "Ln", "sqrt": "Sqrt", "rsqrt": "Rsqrt", "abs": "Abs", "relu": "Relu"}
#: the math-library (advanced API) unary functions: their element count is a uint32_t calCount
_MATH_UNARY = {"tanh": "Tanh", "sigmoid": "Sigmoid", "erf": "Erf", "floor": "Floor"}
_REDUCE = {"max": "ReduceMax", "min": "ReduceMin", "sum": "ReduceSum"}
_ROUND = {"rint": "RoundMode::CAST_RINT", "round": "RoundMode::CAST_ROUND", "trunc": "RoundMode::CAST_TRUNC", "floor": "RoundMode::CAST_FLOOR",
          "ceil": "RoundMode::CAST_CEIL"}
_SCALAR_BIN = {"add": "({a} + {b})", "sub": "({a} - {b})", "mul": "({a} * {b})", "truediv": "({a} / {b})",
               "floordiv": "cvtFloorDiv({a}, {b})", "mod": "cvtMod({a}, {b})", "min": "cvtMin({a}, {b})",
               "max": "cvtMax({a}, {b})", "lt": "({a} < {b})", "le": "({a} <= {b})", "gt": "({a} > {b})",
               "ge": "({a} >= {b})", "eq": "({a} == {b})", "ne": "({a} != {b})", "xor": "({a} ^ {b})",
               "lshift": "({a} << {b})", "rshift": "({a} >> {b})"}
#: bytes of one vector repeat and of one data block
_REPEAT, _BLOCK = 256, 32


@dataclass
class TilingField:
    """One member of the tiling struct: its C name, C type and what the host puts there."""

    name: str
    ctype: str
    source: tuple        # ("dim", param index, axis) | ("scalar", param index)


@dataclass
class LoweredKernel:
    """A kernel printed as Ascend C: the entry's source text and what the project writer needs."""

    name: str                   # the C name of the entry
    source: str                 # op_kernel/<name>.cpp
    tiling_struct: str          # the C name of the tiling struct
    tiling_header: str          # <name>_tiling.h
    tiling_fields: list
    params: list                # (C name, IR Param) of the GM tensor arguments in order (then workspace, tiling)
    kernel_type: str            # KERNEL_TYPE_...
    workspace_bytes_per_block: int
    slot_area_bytes: int = 0    # GM workspace one core group's slots take (the launcher allocates blocks x this)
    scratch_bytes: int = 0
    api: set = field(default_factory=set)   # the Ascend C names the source uses


def lower_kernel(kernel: Kernel, platform) -> LoweredKernel:
    """Print a kernel after the pipeline as Ascend C (see the module docstring)."""
    return _Lowering(kernel, platform).run()


class _Lowering(CubeRules):
    def __init__(self, kernel: Kernel, platform):
        if kernel.memory is None:
            raise AscendCError("the Ascend C backend needs the memory plan (run the whole pipeline)")
        for p in kernel.params:
            dt = getattr(p.type, "dtype", None)
            if dt is not None and dt.name not in CTYPE:
                raise AscendCUnsupported(f"parameter {p.name!r} is a {dt} GM tensor, which the Ascend C backend "
                                         f"does not lower (its declaration header has no {dt} type); the "
                                         f"simulator and the cost model run it", kernel.loc)
        self.k = kernel
        self.platform = platform
        self.arch35 = "950" in platform.name
        self.plan = kernel.memory
        self.valid = ValidExtents.of(kernel)
        self.namer = Namer()
        self.names: dict[int, str] = {}     # value id -> C expression
        self.lines: list[str] = []
        self.depth = 0
        self.api: set[str] = set()
        self.core = None
        self.last_line = None
        self.scratch: dict[str, int] = {}   # what -> byte offset in UB (per program)
        self.scratch_top = 0
        self.gm: dict[int, str] = {}        # tensor value id -> GlobalTensor name
        self.gm_dtype: dict[int, str] = {}

    # ------------------------------------------------------------------ driver
    def run(self) -> LoweredKernel:
        k = self.k
        entry = self.namer.entry(k.name)
        # <Name>KernelTiling: never one of the Ascend C library's own global <Name>Tiling structs
        struct = "".join(p[:1].upper() + p[1:] for p in entry.split("_") if p) + "Tiling"
        struct = self.namer.ident(struct)
        programs = k.programs()
        if not programs:
            raise AscendCError("the kernel was not split into programs (run the whole pipeline)")
        kind = {frozenset({"aiv"}): "KERNEL_TYPE_AIV_ONLY", frozenset({"aic"}): "KERNEL_TYPE_AIC_ONLY"}.get(
            frozenset(programs), "KERNEL_TYPE_MIX_AIC_1_2")
        self.mix = kind == "KERNEL_TYPE_MIX_AIC_1_2"
        gm_params, fields, scalars = [], [], []
        for i, (p, v) in enumerate(zip([p for p in k.params if p.kind != "constexpr"], k.args)):
            name = self.namer.ident(p.name, key=("param", i))
            if p.kind in ("tensor", "workspace"):
                gm_params.append((name, p, v))
                if p.kind == "tensor":
                    for ax in range(v.type.rank):
                        fields.append(TilingField(self.namer.ident(f"{name}_dim{ax}"), "int64_t", ("dim", i, ax)))
            else:
                ct = _SCALAR_CTYPE[v.type.dtype.name]
                fields.append(TilingField(self.namer.ident(f"{name}_value"), ct, ("scalar", i)))
                scalars.append((name, v, fields[-1]))
        self.fields = {f.source: f for f in fields}
        arg_list = ", ".join(f"GM_ADDR {n}" for n, p, _ in gm_params if p.kind == "tensor")
        arg_list = (arg_list + ", " if arg_list else "") + "GM_ADDR workspace, GM_ADDR tiling"
        self.emit(f"extern \"C\" __global__ __aicore__ void {entry}({arg_list})")
        self.emit("{")
        self.depth += 1
        self.emit(f"KERNEL_TASK_TYPE_DEFAULT({kind});")
        self.emit(f"const {struct} cvtT = *reinterpret_cast<__gm__ {struct}*>(tiling);")
        for name, v, f in scalars:
            self.names[v.id] = f"cvtT.{f.name}"
        for i, (name, p, v) in enumerate(gm_params):
            dt = v.type.dtype.name
            ct = CTYPE[dt]
            g = self.namer.ident(name + "Gm")
            self.gm[v.id], self.gm_dtype[v.id] = g, dt
            if p.kind == "tensor":
                idx = [j for j, q in enumerate(x for x in k.params if x.kind != "constexpr") if q is p][0]
                numel = " * ".join(f"cvtT.{self.fields[('dim', idx, ax)].name}" for ax in range(v.type.rank))
                self.emit(f"GlobalTensor<{ct}> {g};")
                self.emit(f"{g}.SetGlobalBuffer(reinterpret_cast<__gm__ {ct}*>({name}), {numel});")
            else:
                # every channel's slots are a view of the one workspace (the windows hold the group offset:
                # slot_area_bytes per core group)
                self.emit(f"GlobalTensor<{ct}> {g};   // channel slots: {k.slot_area_bytes} bytes per core group")
                self.emit(f"{g}.SetGlobalBuffer(reinterpret_cast<__gm__ {ct}*>(workspace), GetBlockNum() * "
                          f"{k.slot_area_bytes // max(v.type.dtype.bits // 8, 1)});")
        self.api |= {"GlobalTensor", "KERNEL_TASK_TYPE_DEFAULT"}
        self.emit_flag_ids(programs)
        for core in ("aic", "aiv"):
            if core in programs:
                self.program(core, programs[core])
        self.depth -= 1
        self.emit("}")
        src = self._file_head(entry, struct) + "\n".join(self.lines) + "\n"
        header = _tiling_header(struct, fields, k)
        params = [(n, p) for n, p, _ in gm_params if p.kind == "tensor"]
        return LoweredKernel(entry, src, struct, header, fields, params, kind, k.workspace_bytes,
                             k.slot_area_bytes, self.scratch_top, set(self.api))

    def _file_head(self, entry: str, struct: str) -> str:
        loc = self.k.loc
        return "\n".join([
            f"// {comment(entry)}: Ascend C kernel written by cvtile from the DSL kernel {comment(self.k.name)}",
            f"// ({comment(getattr(loc, 'filename', ''))}) for {comment(self.platform.name)}; the programs, "
            "buffers, hand-offs and",
            "// synchronisation are those the cvtile simulator verified in pipelined order.",
            '#include "kernel_operator.h"',
            f'#include "{entry}_tiling.h"',
            "",
            "using namespace AscendC;",
            "",
            "#ifndef CVTILE_KERNEL_HELPERS   // once per translation unit (the twin host includes every kernel)",
            "#define CVTILE_KERNEL_HELPERS",
            "#ifdef CVTILE_TWIN",
            "#define CVT_CHECK(cond, msg) do { if (!(cond)) { cvtile_twin::Fail(\"CVT_CHECK\", \"%s\", msg); } } while (0)",
            "#else",
            "#define CVT_CHECK(cond, msg) do { if (!(cond)) { __builtin_trap(); } } while (0)",
            "#endif",
            "",
            "__aicore__ inline int64_t cvtFloorDiv(int64_t a, int64_t b)",
            "{",
            "    int64_t q = a / b;",
            "    return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;",
            "}",
            "__aicore__ inline int64_t cvtMod(int64_t a, int64_t b) { return a - cvtFloorDiv(a, b) * b; }",
            "template <typename T> __aicore__ inline T cvtMin(T a, T b) { return a < b ? a : b; }",
            "template <typename T> __aicore__ inline T cvtMax(T a, T b) { return a > b ? a : b; }",
            "// a Fixpipe DEQF16 scale: the fp32's bits in the low 32 bits of deqScalar",
            "__aicore__ inline uint64_t cvtDeqScalar(float s)",
            "{",
            "    union { float f; uint32_t u; } b;",
            "    b.f = s;",
            "    return static_cast<uint64_t>(b.u);",
            "}",
            "#endif", "", ""])

    def emit_flag_ids(self, programs: dict):
        """One named constant per cross-core flag (``cvtFlagC1V1Ready = 0``): the ids insert_sync chose."""
        from ..ir import walk

        ids = {}
        for body in programs.values():
            for op in walk(body):
                if op.kind in ("flag_set", "flag_wait"):
                    ids.setdefault(op.attrs["name"], op.attrs["id"])
        for name, fid in sorted(ids.items(), key=lambda x: x[1]):
            self.emit(f"constexpr uint16_t cvtFlag{name} = {fid};")
        if ids:
            self.emit("")

    def program(self, core: str, body: Block):
        self.core = core
        self.scratch, self.scratch_top = {}, 0
        self.emit(f"if ASCEND_IS_{core.upper()} {{")
        self.depth += 1
        start = len(self.lines)
        self.api.add(f"ASCEND_IS_{core.upper()}")
        self.emit("TPipe pipe;")
        spaces = self.plan.programs.get(core, {})
        self.space_decl_at = len(self.lines)
        self.spaces_used = {}
        for space, sp in spaces.items():
            self.spaces_used[space] = sp.peak
        self.block(body)
        # the TBufs go before the body: their sizes include the scratch area the body asked for
        decl = []
        for space, peak in self.spaces_used.items():
            size = peak
            if space == "UB" and self.scratch_top:
                size = self.scratch_top
            if size <= 0:
                continue
            var = SPACE_VAR[space]
            decl += [f"TBuf<{_POSITION[space]}> {var}Buf;", f"pipe.InitBuffer({var}Buf, {_ceil(size, 32)});",
                     f"LocalTensor<uint8_t> {var} = {var}Buf.Get<uint8_t>();"]
            self.api |= {"TPipe", "TBuf", "InitBuffer", "LocalTensor"}
        ind = "    " * self.depth
        self.lines[self.space_decl_at:self.space_decl_at] = [ind + d for d in decl]
        del start
        self.depth -= 1
        self.emit("}")

    def block(self, block: Block):
        for op in block.ops:
            self.note(op)
            rule = getattr(self, "op_" + op.kind, None)
            if rule is None:
                raise AscendCUnsupported(f"the Ascend C backend has no lowering for op {op.kind!r}", op.loc)
            rule(op)

    # ------------------------------------------------------------------ helpers
    def emit(self, line: str):
        pending = getattr(self, "pending_note", None)
        if pending and not line.startswith("}"):
            self.lines.append("    " * self.depth + pending)
            self.pending_note = None
        self.lines.append("    " * self.depth + line)

    def note(self, op: Op):
        loc = op.loc
        if loc is None or op.kind in ("yield", "const") or op.defn.category == "sync":
            return
        key = (loc.filename, loc.line)
        if key == self.last_line:
            return
        self.last_line = key
        text = comment(loc.text) if getattr(loc, "text", "") else ""
        self.pending_note = f"// line {loc.line}" + (f": {text}" if text else "")   # printed before the next statement

    def fail(self, op: Op, what: str):
        raise AscendCError(what, op.loc)

    def ref(self, x) -> str:
        """The C expression of a scalar operand (constants as literals)."""
        if isinstance(x, Value):
            if x.const is not None:
                return _literal(x.const, x.type)
            if x.id in self.names:
                return self.names[x.id]
            raise AscendCError(f"value {x!r} is used before the backend named it (lowering order bug)")
        return _literal(x, None)

    def define(self, v: Value, expr: str, ctype: str | None = None, hint: str | None = None):
        """A scalar result: a named C constant when the DSL named it (or ``hint`` names it), else inlined
        as an expression into its uses (pure scalars only reach here)."""
        if not (v.name or hint):
            self.names[v.id] = expr if _atomic(expr) else f"({expr})" if not expr.startswith("(") else expr
            return
        ct = ctype or _SCALAR_CTYPE[v.type.dtype.name]
        name = self.namer.ident(v.name or hint)
        self.emit(f"const {ct} {name} = {expr};")
        self.names[v.id] = name

    def tile(self, v: Value) -> str:
        """The LocalTensor of a tile value (declared at its planned address on first use)."""
        if v.id in self.names:
            return self.names[v.id]
        owner = v.owner
        if owner is not None and owner.kind in ("expand",):
            return self.tile(owner.args[0])
        if owner is not None and owner.kind == "slice_rows":
            x, row, _ = owner.args
            return _row_at(self.tile(x), x.type, self.ref(row))
        buf = self.plan.buffer_of.get(v.id)
        if buf is None:
            raise AscendCError(f"tile {v!r} has no buffer in the memory plan", owner.loc if owner else None)
        ct = CTYPE[v.type.dtype.name]
        name = self.namer.ident(v.name or buf.name or "t")
        space = SPACE_VAR[buf.space]
        self.spaces_used.setdefault(buf.space, 0)
        at = str(buf.offset) if buf.parity is None else \
            f"{buf.offset} + {self.ref(buf.parity)} * {buf.bytes // buf.copies}"   # this iteration's copy
        self.emit(f"LocalTensor<{ct}> {name} = {space}[{at}].ReinterpretCast<{ct}>();")
        self.names[v.id] = name
        return name

    def extents(self, v: Value) -> tuple:
        return tuple(self.ref(e) if isinstance(e, Value) else str(e) for e in self.valid(v))

    def rows_of(self, v: Value) -> str:
        return self.extents(v)[0] if v.type.rank == 2 else "1"

    def count(self, v: Value) -> str:
        """Elements a vector op over v touches: its valid rows times the row pitch (rank 2) or its valid
        extent (rank 1)."""
        if v.type.rank == 1:
            return self.extents(v)[0]
        return _mul(self.extents(v)[0], str(_cols(v.type)))

    def need_scratch(self, what: str, nbytes: int) -> str:
        """A scratch block in UB after the planned buffers (per program): ``ub[offset]``."""
        if what not in self.scratch:
            base = max(self.spaces_used.get("UB", 0), self.scratch_top)
            off = _ceil(base, _BLOCK)
            self.scratch[what] = off
            self.scratch_top = off + _ceil(nbytes, _BLOCK)
            cap = self.platform.ub_usable if hasattr(self.platform, "ub_usable") else self.platform.ub
            if self.scratch_top > cap:
                raise AscendCError(f"the vector API work area ({what}, {nbytes} bytes) does not fit UB after the "
                                   f"planned buffers: {self.scratch_top} > {cap} bytes")
            self.spaces_used.setdefault("UB", 0)
        return self.scratch[what]

    # ------------------------------------------------------------------ scalars
    def op_const(self, op):
        pass

    def op_sbin(self, op):
        a, b = op.args
        kind = op.attrs["op"]
        if kind in ("and", "or"):
            expr = f"({self.ref(a)} {'&&' if op.result.type.dtype.name == 'bool' else ('&' if kind == 'and' else '|')}" \
                   f" {self.ref(b)})"
            if op.result.type.dtype.name == "bool":
                expr = f"({self.ref(a)} {'&&' if kind == 'and' else '||'} {self.ref(b)})"
        elif kind in ("floordiv", "mod") and op.result.type.dtype.name == "float32":
            raise AscendCUnsupported(f"float {kind} of scalars", op.loc)
        elif kind == "pow":
            raise AscendCUnsupported("a float ** of scalars (the scalar unit has no pow in the subset)", op.loc)
        elif kind == "truediv" and op.result.type.dtype.name != "float32":
            expr = f"(static_cast<float>({self.ref(a)}) / static_cast<float>({self.ref(b)}))"
        else:
            expr = _SCALAR_BIN[kind].format(a=self.ref(a), b=self.ref(b))
        if kind in ("floordiv", "mod") and b.const is None:
            self.emit(f"CVT_CHECK({self.ref(b)} != 0, {c_string('integer division by zero')});")
        if kind in ("min", "max"):
            ct = _SCALAR_CTYPE[op.result.type.dtype.name]
            expr = expr.replace("cvtMin(", f"cvtMin<{ct}>(").replace("cvtMax(", f"cvtMax<{ct}>(")
        self.define(op.result, expr)

    def op_sun(self, op):
        (a,) = op.args
        kind = op.attrs["op"]
        if kind not in ("neg", "not", "abs"):
            raise AscendCUnsupported(f"the scalar math function {kind}() (the scalar unit has no such "
                                     f"instruction in the subset; compute it on a tile)", op.loc)
        expr = {"neg": f"(-{self.ref(a)})", "not": f"(!{self.ref(a)})",
                "abs": f"({self.ref(a)} < 0 ? -{self.ref(a)} : {self.ref(a)})"}[kind]
        self.define(op.result, expr)

    def op_scast(self, op):
        (a,) = op.args
        self.define(op.result, f"static_cast<{_SCALAR_CTYPE[op.result.type.dtype.name]}>({self.ref(a)})")

    def op_sselect(self, op):
        c, a, b = op.args
        self.define(op.result, f"({self.ref(c)} ? {self.ref(a)} : {self.ref(b)})")

    def op_sload(self, op):
        tensor, offset = op.args
        dt = self.gm_dtype[tensor.id]
        expr = f"{self.gm[tensor.id]}.GetValue({self.ref(offset)})"
        res = op.result.type.dtype.name
        if dt in ("float16", "bfloat16"):
            expr = f"static_cast<float>({expr})"
        self.define(op.result, f"static_cast<{_SCALAR_CTYPE[res]}>({expr})", hint="gmValue")
        self.api.add("GlobalTensor::GetValue")

    def op_dim(self, op):
        (t,) = op.args
        pi = [i for i, v in enumerate(self.k.args) if v is t]
        if not pi:
            raise AscendCError(f"dim of a tensor that is not a kernel parameter: {t!r}", op.loc)
        self.names[op.result.id] = f"cvtT.{self.fields[('dim', pi[0], op.attrs['axis'])].name}"

    def op_block_idx(self, op):
        self.api.add("GetBlockIdx")
        if self.mix and self.core == "aiv":
            self.api.add("GetTaskRatio")
            self.define(op.result, "static_cast<int64_t>(GetBlockIdx() / GetTaskRatio())", hint="blockIdx")
        else:
            self.define(op.result, "static_cast<int64_t>(GetBlockIdx())", hint="blockIdx")

    def op_block_num(self, op):
        self.api.add("GetBlockNum")
        self.define(op.result, "static_cast<int64_t>(GetBlockNum())", hint="blockNum")

    def op_subblock_idx(self, op):
        self.api.add("GetSubBlockIdx")
        self.define(op.result, "static_cast<int64_t>(GetSubBlockIdx())", hint="subBlockIdx")

    def op_check(self, op):
        cond = op.args[0]
        self.emit(f"CVT_CHECK({self.ref(cond)}, {c_string(op.attrs['message'])});")

    # ------------------------------------------------------------------ control
    def op_for(self, op):
        lo, hi, step, *init = op.args
        body = op.blocks[0]
        iv, *carried = body.args
        for arg, x, r in zip(carried, init, op.results):
            self.carry_in(arg, x, r)
        name = self.namer.ident(iv.name or "i")
        self.names[iv.id] = name
        self.emit(f"for (int64_t {name} = {self.ref(lo)}; {name} < {self.ref(hi)}; {name} += {self.ref(step)}) {{")
        self.depth += 1
        saved = getattr(self, "yield_to", None)
        self.yield_to = list(carried)
        self.block(body)
        self.yield_to = saved
        self.depth -= 1
        self.emit("}")

    def carry_in(self, arg: Value, init: Value, result: Value):
        """A loop-carried value: a mutable C local (scalar), or the body argument's planned buffer (tile; the
        initial value is copied in when the plan put it elsewhere). The loop's result is the same variable."""
        if arg.is_tile:
            # UB: the argument's own planned buffer; L0C/L1 accumulators work in place in the initial value's
            # buffer (the mma rules write their result there)
            if arg.id in self.plan.buffer_of and arg.type.space.name == "UB":
                name = self.tile(arg)
                self.copy_tile(arg, name, init, self.tile(init))
            else:
                name = self.tile(init)
                self.names[arg.id] = name
            self.names[result.id] = name
            return
        ct = _SCALAR_CTYPE[arg.type.dtype.name]
        name = self.namer.ident(arg.name or "c")
        self.emit(f"{ct} {name} = {self.ref(init)};")
        self.names[arg.id] = name
        self.names[result.id] = name

    def copy_tile(self, dst: Value, a: str, src: Value, b: str):
        """UB tile ``src`` (C name b) copied whole into ``dst``'s buffer (a): DataCopy when the capacity is a
        whole number of 32-byte blocks, else an exact Muls by 1 (count form), else a scalar loop."""
        if a == b:
            return
        if dst.type.space.name != "UB":
            raise AscendCUnsupported(f"a loop-carried {dst.type.space.name} tile the plan puts in two buffers",
                                     dst.owner.loc if dst.owner else None)
        n = src.type.numel
        nbytes = n * src.type.dtype.bits // 8
        ct = CTYPE[src.type.dtype.name]
        if nbytes % _BLOCK == 0:
            self.emit(f"DataCopy({a}, {b}, {n});")
            self.api.add("DataCopy")
        elif src.type.dtype.name in ("float32", "float16", "int32", "int16"):
            self.emit(f"Muls({a}, {b}, static_cast<{ct}>(1), {n});")
            self.api.add("Muls")
        else:
            i = self.namer.ident("i")
            self.emit("PipeBarrier<PIPE_ALL>();")
            self.emit(f"for (int64_t {i} = 0; {i} < {n}; ++{i}) {{")
            self.emit(f"    {a}.SetValue({i}, {b}.GetValue({i}));")
            self.emit("}")
            self.emit("PipeBarrier<PIPE_ALL>();")
        self.emit("PipeBarrier<PIPE_V>();")

    def op_yield(self, op):
        """The yielded values become the loop's carried variables (or the if's results): scalars assigned
        (through temporaries when one yielded value is another carried variable), tiles copied when the plan
        gave them different buffers."""
        target = getattr(self, "yield_to", None)
        if target is None:
            return
        pairs = list(zip(target, op.args))
        dst_names = {self.names.get(d.id) for d, _ in pairs if not d.is_tile}
        staged = {}
        for d, v in pairs:
            if not d.is_tile and self.ref(v) in dst_names and self.ref(v) != self.names.get(d.id):
                tmp = self.namer.ident("next")
                self.emit(f"const {_SCALAR_CTYPE[d.type.dtype.name]} {tmp} = {self.ref(v)};")
                staged[d.id] = tmp
        handles = getattr(self, "handles", set())
        for d, v in pairs:
            if d.id in handles:      # an if result pointed at the arm's mma pieces (lower_cube.if_result_handle)
                self.emit(f"{self.names[d.id]} = {self.tile(v)};")
        for d, v in self._parallel_copy_order([(d, v) for d, v in pairs if d.is_tile and d.id not in handles],
                                              op):
            self.copy_tile(d, self.tile(d), v, self.tile(v))
        for d, v in pairs:
            if not d.is_tile:
                src = staged.get(d.id, self.ref(v))
                if self.names[d.id] != src:
                    self.emit(f"{self.names[d.id]} = {src};")

    def _parallel_copy_order(self, pairs: list, op) -> list:
        """The tile copies of a yield in an order that keeps its parallel meaning: a copy that overwrites the
        buffer another copy still reads runs after it (a pipelined loop's shift register ``reg1 <- reg0,
        reg0 <- new`` copies reg0 out first). A cycle (a swap) would need a temporary and is refused."""
        def span(v):
            buf = self.plan.buffer_of.get(v.id)
            return None if buf is None else (buf.space, buf.offset, buf.offset + buf.bytes)

        def overlaps(a, b):
            return a is not None and b is not None and a[0] == b[0] and a[1] < b[2] and b[1] < a[2]

        todo = [(d, v) for d, v in pairs if span(d) is None or span(d) != span(v)]
        out = []
        while todo:
            ready = [i for i, (d, _) in enumerate(todo)
                     if not any(overlaps(span(d), span(v2)) for j, (_, v2) in enumerate(todo) if j != i)]
            if not ready:
                raise AscendCUnsupported("a yield whose tile copies form a cycle (a swap of two buffers) is not "
                                         "lowered", op.loc)
            out.append(todo.pop(ready[0]))
        return out + [(d, v) for d, v in pairs if span(d) is not None and span(d) == span(v)]

    def op_if(self, op):
        for r in op.results:
            if r.is_tile:
                continue
            name = self.namer.ident(r.name or "r")
            self.emit(f"{_SCALAR_CTYPE[r.type.dtype.name]} {name};")
            self.names[r.id] = name
        # an if's tile results have buffers of their own in the plan (shared with the arms' values where the
        # plan put them together): declared before the branch, so both arms and the code after see them
        for r in op.results:
            if r.is_tile and r.id not in self.names and r.id in self.plan.buffer_of:
                self.tile(r)
            elif r.is_tile and r.id not in self.names:   # plan_memory streams it: each arm's mma result
                if self.core != "aic":
                    raise AscendCUnsupported("an if on the vector side whose tile result has no buffer", op.loc)
                if self.if_result_handle(op, r):   # each arm's mma leaves it in its own L0C pieces
                    continue
                self.defer_if(op)     # lowered at its result's store (lower_cube)
                return
        self.emit(f"if ({self.ref(op.args[0])}) {{")
        for i, blk in enumerate(op.blocks):
            if i == 1:
                self.emit("} else {")
            self.depth += 1
            saved = getattr(self, "yield_to", None)
            self.yield_to = list(op.results)
            self.block(blk)
            self.yield_to = saved
            self.depth -= 1
        self.emit("}")

    def op_program(self, op):
        raise AscendCError("nested program op")

    # ------------------------------------------------------------------ GM <-> UB
    def _window_rows(self, w: Window, op):
        """(base element offset expression, row stride expression or None, rows, cols) of a rank-1/2 window
        whose columns are contiguous; rows with one stride give one copy, others one copy per row."""
        dims = w.dims
        cold = dims[-1]
        if len(cold.radices) != 1 or self.ref(cold.strides[0]) != "1" or any(cold.lookups or ()):
            raise AscendCUnsupported("a GM window whose last dim is not contiguous", op.loc)
        return dims

    def _row_offset(self, d, idx: str, op) -> str:
        lookups = d.lookups or [None] * len(d.radices)
        if len(d.radices) == 1 and lookups[0] is None:
            s = self.ref(d.strides[0])
            return idx if s == "1" else f"({idx}) * {s}"
        rest = self.namer.ident("rest")
        self.emit(f"int64_t {rest} = {idx};")
        digits = []
        for radix in reversed(d.radices[1:]):
            dg = self.namer.ident("digit")
            self.emit(f"const int64_t {dg} = cvtMod({rest}, {self.ref(radix)});")
            self.emit(f"{rest} = cvtFloorDiv({rest}, {self.ref(radix)});")
            digits.append(dg)
        digits.append(rest)
        digits.reverse()
        parts = []
        for dg, stride, lk in zip(digits, d.strides, lookups):
            if lk is not None:
                b = self.namer.ident("blockId")
                self.emit(f"const int64_t {b} = static_cast<int64_t>({self.gm[lk.table.id]}.GetValue("
                          f"{self.ref(lk.offset)} + {dg} * {self.ref(lk.stride)}));")
                self.emit(f"CVT_CHECK({b} >= 0 && {b} < {self.ref(lk.bound)}, "
                          f"{c_string('paged KV: a block-table entry is not a valid block index')});")
                dg = b
            parts.append(f"{dg} * {self.ref(stride)}")
        return " + ".join(parts)

    def _copy_runs(self, op, w: Window, tile: Value, n: str, to_gm: bool):
        """A rank-1 window over a merged dim (several radices): the elements come in runs along the inner
        radix (contiguous when its stride is 1). Each run is one DataCopyPad through a scratch row of UB,
        moved to or from the tile by scalar UB accesses fenced with PipeBarrier<PIPE_ALL>."""
        (d,) = w.dims
        if any(d.lookups or ()):
            raise AscendCUnsupported("a rank-1 GM window through a block table", op.loc)
        dt = tile.type.dtype
        size = dt.bits // 8
        ct = CTYPE[dt.name]
        inner = self.ref(d.radices[-1])
        inner_stride = self.ref(d.strides[-1])
        g = self.gm[w.tensor.id]
        t = self.tile(tile)
        off = self.need_scratch(f"run row {dt} {tile.type.shape[0]}", tile.type.shape[0] * size + _BLOCK)
        scr = self.namer.ident("runRow")
        i, run = self.namer.ident("i"), self.namer.ident("run")
        self.emit(f"LocalTensor<{ct}> {scr} = ub[{off}].ReinterpretCast<{ct}>();")
        self.emit(f"CVT_CHECK({self.ref(d.start)} >= 0 && {self.ref(d.start)} + {n} <= {self.ref(d.bound)}, "
                  f"{c_string(('store' if to_gm else 'load') + ': GM dim 0 access leaves [0, bound)')});")
        self.emit("PipeBarrier<PIPE_ALL>();")
        self.emit(f"for (int64_t {i} = 0; {i} < {n};) {{")
        self.depth += 1
        idx = self.namer.ident("idx")
        self.emit(f"const int64_t {idx} = {c_sum(self.ref(d.start), i)};")
        roff = self._row_offset(d, idx, op)
        self.emit(f"const int64_t {run} = " + (f"cvtMin<int64_t>({inner} - cvtMod({idx}, {inner}), {n} - {i});"
                                                if inner_stride == "1" else "1;"))
        base = c_sum(self.ref(w.offset), roff)
        self._scalar_moved_run(f"{g}[{base}]", scr, t, i, run, ct, size, to_gm)
        self.emit(f"{i} += {run};")
        self.depth -= 1
        self.emit("}")

    def _scalar_moved_run(self, gm: str, scr: str, t: str, at: str, n: str, ct: str, size: int, to_gm: bool):
        """``n`` elements between ``gm`` and the tile ``t`` from element ``at``, through the aligned scratch row
        ``scr``: one DataCopyPad between GM and the scratch row, scalar UB accesses between it and the tile,
        fenced with PipeBarrier<PIPE_ALL> (the scalar unit and the copy engines meet only at barriers)."""
        e = self.namer.ident("e")
        params = f"DataCopyExtParams{{1, static_cast<uint32_t>({n} * {size}), 0, 0, 0}}"
        if to_gm:
            self.emit(f"for (int64_t {e} = 0; {e} < {n}; ++{e}) {{")
            self.emit(f"    {scr}.SetValue({e}, {t}.GetValue({c_sum(at, e)}));")
            self.emit("}")
            self.emit("PipeBarrier<PIPE_ALL>();")
            self.emit(f"DataCopyPad({gm}, {scr}, {params});")
            self.emit("PipeBarrier<PIPE_ALL>();")
        else:
            self.emit(f"DataCopyPad({scr}, {gm}, {params}, DataCopyPadExtParams<{ct}>{{false, 0, 0, 0}});")
            self.emit("PipeBarrier<PIPE_ALL>();")
            self.emit(f"for (int64_t {e} = 0; {e} < {n}; ++{e}) {{")
            self.emit(f"    {t}.SetValue({c_sum(at, e)}, {scr}.GetValue({e}));")
            self.emit("}")
            self.emit("PipeBarrier<PIPE_ALL>();")
        self.api |= {"DataCopyPad", "DataCopyExtParams", "PipeBarrier", "LocalTensor::GetValue",
                     "LocalTensor::SetValue"}
        if not to_gm:
            self.api.add("DataCopyPadExtParams")

    def _copy_rows_scalar(self, op, w: Window, tile: Value, counts: tuple, to_gm: bool):
        """A 2-D tile whose UB row is not a whole number of 32-byte blocks (a (M, 1) column of per-row values, a
        row of 7 floats). The tile is dense in UB, and DataCopyPad puts every row it moves at a 32-byte
        boundary, so each row goes through a scratch row of UB (``_scalar_moved_run``). Slow (scalar moves),
        but the chip runs it as written."""
        dims = self._window_rows(w, op)
        dt = tile.type.dtype
        size = dt.bits // 8
        ct = CTYPE[dt.name]
        g = self.gm[w.tensor.id]
        t = self.tile(tile)
        width = _cols(tile.type)
        rows, cols = counts
        self._window_checks(w, counts, to_gm)
        off = self.need_scratch(f"odd row {dt} {width}", width * size + _BLOCK)
        scr = self.namer.ident("oddRow")
        self.emit(f"LocalTensor<{ct}> {scr} = ub[{off}].ReinterpretCast<{ct}>();")
        self.emit("PipeBarrier<PIPE_ALL>();")
        r = self.namer.ident("row")
        self.emit(f"for (int64_t {r} = 0; {r} < {rows}; ++{r}) {{")
        self.depth += 1
        roff = self._row_offset(dims[0], f"{self.ref(dims[0].start)} + {r}", op)
        base = c_sum(self.ref(w.offset), roff, self.ref(dims[-1].start))
        self._scalar_moved_run(f"{g}[{base}]", scr, t, _mul(r, str(width)), cols, ct, size, to_gm)
        self.depth -= 1
        self.emit("}")

    def _load_strided(self, op, w: Window, tile: Value, counts: tuple):
        """A load whose window's last dim is strided (a column of a row-major tensor: RingAttentionUpdate's
        ``m[rows, 0]`` of its 8-lane softmax statistics): element by element, scalar GM reads
        (``GlobalTensor::GetValue``) into UB, fenced like the gather. Slow, exact; the inputs are only read, so
        no data cache stands between an earlier GM write and these reads."""
        g, t = self.gm[w.tensor.id], self.tile(tile)
        *lead, last = w.dims
        self._window_checks(w, counts, False)
        ivars = [self.namer.ident(n) for n in ("r", "c")[-len(w.dims):]]
        self.emit("PipeBarrier<PIPE_ALL>();")
        for k, (iv, n) in enumerate(zip(ivars, counts)):
            self.emit("    " * k + f"for (int64_t {iv} = 0; {iv} < {n}; ++{iv}) {{")
        self.depth += len(ivars)
        parts = [self.ref(w.offset)]
        if lead:
            parts.append(self._row_offset(lead[0], f"{self.ref(lead[0].start)} + {ivars[0]}", op))
        parts.append(_mul(f"({self.ref(last.start)} + {ivars[-1]})", self.ref(last.strides[0])))
        at = ivars[-1] if not lead else c_sum(_mul(ivars[0], str(_cols(tile.type))), ivars[-1])
        self.emit(f"{t}.SetValue({at}, {g}.GetValue({c_sum(*parts)}));")
        self.depth -= len(ivars)
        for k in reversed(range(len(ivars))):
            self.emit("    " * k + "}")
        self.emit("PipeBarrier<PIPE_ALL>();")
        self.api |= {"GlobalTensor::GetValue", "LocalTensor::SetValue", "PipeBarrier"}

    def _window_checks(self, w: Window, counts: tuple, to_gm: bool):
        """The run-time check that every dim of a GM access stays inside the tensor."""
        for i, (d, n) in enumerate(zip(w.dims, counts)):
            start, bound = self.ref(d.start), self.ref(d.bound)
            cond = f"{n} <= {bound}" if start == "0" else f"{start} >= 0 && {start} + {n} <= {bound}"
            self.emit(f"CVT_CHECK({cond}, "
                      f"{c_string(('store' if to_gm else 'load') + f': GM dim {i} access leaves [0, bound)')});")

    def _copy_ub(self, op, w: Window, tile: Value, counts: tuple, to_gm: bool):
        if len(w.dims) == 1 and (len(w.dims[0].radices) > 1 or any(w.dims[0].lookups or ())):
            return self._copy_runs(op, w, tile, counts[0], to_gm)
        last = w.dims[-1]
        if not to_gm and len(last.radices) == 1 and not any(last.lookups or ()) and self.ref(last.strides[0]) != "1":
            return self._load_strided(op, w, tile, counts)
        dims = self._window_rows(w, op)
        g = self.gm[w.tensor.id]
        dt = tile.type.dtype
        size = dt.bits // 8
        pitch = _cols(tile.type) * size
        one_row = tile.type.rank == 1 or tile.type.shape[0] == 1
        if not _aligned_rows(tile.type):
            return self._copy_rows_scalar(op, w, tile, counts, to_gm)
        t = self.tile(tile)
        rows, cols = (counts[0], counts[1]) if len(counts) == 2 else ("1", counts[0])
        self._window_checks(w, counts, to_gm)
        col0 = self.ref(dims[-1].start)
        blen = _mul(cols, str(size))
        if one_row:   # one block run: no gap between rows (a UB buffer's size is whole 32-byte blocks)
            gap_ub = "0"
        else:
            gap_ub = str((pitch - _ceil(int(blen), _BLOCK)) // _BLOCK) if blen.isdigit() else \
                f"({pitch} - ({blen} + 31) / 32 * 32) / 32"
        self.api |= {"DataCopyPad", "DataCopyExtParams"}
        if not to_gm:
            self.api.add("DataCopyPadExtParams")
        plain = len(dims) == 1 or (len(dims[0].radices) == 1 and not any(dims[0].lookups or ()))
        if plain:
            off = self.ref(w.offset)
            if len(dims) == 2:
                stride = self.ref(dims[0].strides[0])
                base = c_sum(off, _mul(self.ref(dims[0].start), stride), col0)
                gap_gm = f"({stride} - {cols}) * {size}" if not (stride.isdigit() and cols.isdigit()) else \
                    str((int(stride) - int(cols)) * size)
            else:
                base, gap_gm = c_sum(off, col0), "0"
            params = f"{{{c_cast('uint16_t', rows)}, {c_cast('uint32_t', blen)}, " \
                     f"{c_cast('uint32_t', gap_gm if not to_gm else gap_ub)}, " \
                     f"{c_cast('uint32_t', gap_ub if not to_gm else gap_gm)}, 0}}"
            if to_gm:
                self.emit(f"DataCopyPad({g}[{base}], {t}, DataCopyExtParams{params});")
            else:
                self.emit(f"DataCopyPad({t}, {g}[{base}], DataCopyExtParams{params}, "
                          f"DataCopyPadExtParams<{CTYPE[dt.name]}>{{false, 0, 0, 0}});")
            return
        r = self.namer.ident("row")
        self.emit(f"for (int64_t {r} = 0; {r} < {rows}; ++{r}) {{")
        self.depth += 1
        roff = self._row_offset(dims[0], f"{self.ref(dims[0].start)} + {r}", op)
        base = c_sum(self.ref(w.offset), roff, col0)
        params = f"{{1, {c_cast('uint32_t', blen)}, 0, 0, 0}}"
        row_ub = f"{t}[{r} * {_cols(tile.type)}]"
        if to_gm:
            self.emit(f"DataCopyPad({g}[{base}], {row_ub}, DataCopyExtParams{params});")
        else:
            self.emit(f"DataCopyPad({row_ub}, {g}[{base}], DataCopyExtParams{params}, "
                      f"DataCopyPadExtParams<{CTYPE[dt.name]}>{{false, 0, 0, 0}});")
        self.depth -= 1
        self.emit("}")

    def op_load(self, op):
        if op.result.type.space.name != "UB":
            return self.cube_load(op)
        w = op.windows["window"]
        counts = tuple(self.ref(d.valid) for d in w.dims)
        for i, (d, n) in enumerate(zip(w.dims, counts)):
            if not (isinstance(d.valid, Value) and d.valid.const is not None) and isinstance(d.valid, Value):
                self.emit(f"CVT_CHECK({n} >= 0 && {n} <= {d.extent}, "
                          f"{c_string(f'load: valid extent of dim {i} is outside [0, {d.extent}]')});")
        self._copy_ub(op, w, op.result, counts, to_gm=False)

    def op_store(self, op):
        tile = op.args[-1]
        if tile.type.space.name != "UB":
            return self.cube_store(op)
        w = op.windows["window"]
        counts = self.extents(tile)
        wcounts = tuple(self.ref(d.valid) for d in w.dims)
        for i, (n, wn) in enumerate(zip(counts, wcounts)):
            if n != wn:
                self.emit(f"CVT_CHECK({n} <= {wn}, "
                          f"{c_string(f'store: the tile valid dim {i} exceeds the window valid extent')});")
        self._copy_ub(op, w, tile, counts, to_gm=True)

    # ------------------------------------------------------------------ vector
    def op_create(self, op):
        t: TileType = op.result.type
        if op.attrs.get("uninit"):
            self.tile(op.result)
            return
        value = op.args[0]
        if t.dtype.name in ("bool", "int8", "uint8", "int64") or (self.arch35 is False and t.dtype.name == "int8"):
            raise AscendCUnsupported(f"a tile of {t.dtype} filled by Duplicate (not in the API subset for "
                                     f"{t.dtype} on every target)", op.loc)
        dst = self.tile(op.result)
        n = self.count(op.result)
        self.emit(f"Duplicate({dst}, {self.scalar_as(value, t.dtype)}, {c_cast('int32_t', n)});")
        self.api.add("Duplicate")

    def op_iota(self, op):
        t: TileType = op.result.type
        start = op.args[0]
        dst = self.tile(op.result)
        n = self.count(op.result)
        ct = CTYPE[t.dtype.name]
        call = f"ArithProgression<{ct}>({dst}, {self.scalar_as(start, t.dtype)}, static_cast<{ct}>(1), " \
               f"{c_cast('int32_t', n)});"
        self.emit(call if n.isdigit() else f"if ({n} > 0) {{ {call} }}")
        self.api.add("ArithProgression")

    def scalar_as(self, x, dt) -> str:
        ct = CTYPE[dt.name]
        if isinstance(x, Value) and x.const is None:
            return f"static_cast<{ct}>({self.ref(x)})"
        c = x.const if isinstance(x, Value) else x
        if dt.is_float:
            return f"static_cast<{ct}>({_float_literal(float(c))})"
        return f"static_cast<{ct}>({int(c)})"

    def op_cast(self, op):
        (x,) = op.args
        src, dst = x.type.dtype, op.result.type.dtype
        # exact conversions take no rounding mode: the vector unit's Cast accepts only CAST_NONE for them
        # (int8/uint8 -> half on both arches)
        exact = (src.is_float and dst.is_float and dst.bits > src.bits) or \
            (src.name in ("int8", "uint8") and dst.is_float)
        mode = "RoundMode::CAST_NONE" if exact else _ROUND[op.attrs.get("rounding", "rint")]
        n = self.count(op.result)
        steps = _CAST_VIA.get((src.name, dst.name))
        if steps is not None:
            self._cast_via(op, x, steps, mode, n)
            return
        self.emit(f"Cast({self.tile(op.result)}, {self.tile(x)}, {mode}, {c_cast('uint32_t', n)});")
        self.api |= {"Cast", mode.split("::")[0]}

    def _cast_via(self, op, x, steps, mode: str, n: str):
        """A cast the vector unit has no one instruction for, as exact steps through scratch chunks of
        ``_CAST_CHUNK`` elements (``_CAST_VIA``), each step fenced on the V pipe."""
        dst, src = self.tile(op.result), self.tile(x)
        self.emit(f"// {x.type.dtype} -> {op.result.type.dtype}: no one Cast, "
                  f"{' -> '.join([steps[0][0]] + [t for _, t, _ in steps])} (exact)")
        tmp = {}
        for _, t, _ in steps[:-1]:
            if t not in tmp:
                off = self.need_scratch(f"cast via {t}", _CAST_CHUNK * DTYPES[t].itemsize)
                name = self.namer.ident(f"via{t.capitalize()}")
                self.emit(f"LocalTensor<{CTYPE[t]}> {name} = ub[{off}].ReinterpretCast<{CTYPE[t]}>();")
                tmp[t] = name
        c0, ln = self.namer.ident("c0"), self.namer.ident("len")
        self.emit(f"for (int64_t {c0} = 0; {c0} < {n}; {c0} += {_CAST_CHUNK}) {{")
        self.depth += 1
        self.emit(f"const uint32_t {ln} = static_cast<uint32_t>(cvtMin<int64_t>({_CAST_CHUNK}, {n} - {c0}));")
        for i, (f, t, m) in enumerate(steps):
            a = f"{dst}[{c0}]" if i == len(steps) - 1 else tmp[t]
            b = f"{src}[{c0}]" if i == 0 else tmp[f]
            rm = mode if m == "op" else m
            self.emit(f"Cast({a}, {b}, {rm}, {ln});")
            self.emit("PipeBarrier<PIPE_V>();")
            self.api |= {"Cast", rm.split("::")[0]}
        self.depth -= 1
        self.emit("}")
        self.api |= {"LocalTensor", "PipeBarrier"}

    def op_reduce(self, op):
        (x,) = op.args
        if x.type.rank != 2:
            raise AscendCUnsupported("a reduction of a rank-1 tile", op.loc)
        kind = op.attrs["op"]
        fn = _REDUCE[kind]
        dt = x.type.dtype
        rows, cols = self.extents(x)
        pitch = _cols(x.type)
        dst, src = self.tile(op.result), self.tile(x)
        lanes = _REPEAT // (dt.bits // 8)
        e = _BLOCK // (dt.bits // 8)
        r1 = -(-pitch // lanes)
        work_elems = max(-(-2 * r1 // e) * e, e)
        work = self.need_scratch(f"reduce work {dt}", work_elems * dt.bits // 8)
        ct = CTYPE[dt.name]
        wname = self.namer.ident("reduceWork")
        self.emit(f"LocalTensor<{ct}> {wname} = ub[{work}].ReinterpretCast<{ct}>();")
        r = self.namer.ident("r")
        row = f"{src}[{r} * {pitch}]"
        if not _aligned_rows(x.type):
            # a row that starts inside a 32-byte block, which the vector unit cannot address: moved to an
            # aligned scratch row first (scalar UB accesses, fenced)
            off = self.need_scratch(f"reduce row {dt} {pitch}", pitch * dt.bits // 8)
            row = self.namer.ident("reduceRow")
            self.emit(f"LocalTensor<{ct}> {row} = ub[{off}].ReinterpretCast<{ct}>();")
            self.api |= {"LocalTensor::GetValue", "LocalTensor::SetValue", "PipeBarrier"}
        self.emit(f"for (int64_t {r} = 0; {r} < {rows}; ++{r}) {{")
        self.depth += 1
        if not _aligned_rows(x.type):
            c = self.namer.ident("c")
            self.emit("PipeBarrier<PIPE_ALL>();")
            self.emit(f"for (int64_t {c} = 0; {c} < {cols}; ++{c}) {{")
            self.emit(f"    {row}.SetValue({c}, {src}.GetValue({r} * {pitch} + {c}));")
            self.emit("}")
            self.emit("PipeBarrier<PIPE_ALL>();")
        if kind == "sum":
            self.emit(f"{fn}<{ct}>({dst}[{r}], {row}, {wname}, static_cast<int32_t>({cols}));")
        else:
            self.emit(f"{fn}<{ct}>({dst}[{r}], {row}, {wname}, static_cast<int32_t>({cols}), false);")
        self.depth -= 1
        self.emit("}")
        self.api.add(fn)

    def op_expand(self, op):
        pass   # a view: its consumers broadcast the rank-1 tile

    def op_slice_rows(self, op):
        """A view of rows [row, row + rows) of a tile. A rank-1 tile's chunk whose capacity is not a whole
        number of 32-byte blocks may start anywhere inside a block, where the vector unit cannot address it:
        it is gathered into a scratch block of its own (scalar UB accesses, fenced)."""
        x, row, n = op.args
        if x.type.rank != 1 or (op.result.type.shape[0] * x.type.dtype.bits // 8) % _BLOCK == 0:
            return   # an aligned view: tile() addresses the parent's rows
        v = op.result
        ct = CTYPE[v.type.dtype.name]
        off = self.need_scratch(f"row chunk of value {v.id}", v.type.shape[0] * v.type.dtype.bits // 8)
        name = self.namer.ident((x.name or "chunk") + "Rows")
        src = self.tile(x)
        i = self.namer.ident("i")
        self.emit(f"LocalTensor<{ct}> {name} = ub[{off}].ReinterpretCast<{ct}>();")
        self.emit("PipeBarrier<PIPE_ALL>();")
        self.emit(f"for (int64_t {i} = 0; {i} < {self.ref(n)}; ++{i}) {{")
        self.emit(f"    {name}.SetValue({i}, {src}.GetValue({self.ref(row)} + {i}));")
        self.emit("}")
        self.emit("PipeBarrier<PIPE_ALL>();")
        self.names[v.id] = name
        self.api |= {"LocalTensor::GetValue", "LocalTensor::SetValue", "PipeBarrier"}

    def op_insert_rows(self, op):
        """The chunk's valid rows copied into the full tile at ``row``: by ``DataCopy`` when its rows are whole
        32-byte blocks; otherwise its valid elements exactly (a rank-1 tail chunk's capacity may reach past the
        full tile's end: copying the capacity wrote into the next buffer in UB), by the count form of ``Muls``
        by 1 (16/32-bit types) where the chunk lands on a 32-byte block (a runtime row: checked at run time;
        (M, 1) columns of 4-row chunks land on 16-byte offsets), else by scalar stores."""
        full, chunk, row = op.args
        f, c = self.tile(full), self.tile(chunk)
        self.names[op.result.id] = f
        target = _row_at(f, full.type, self.ref(row))
        if c == target:
            return
        dt = chunk.type.dtype
        ct = CTYPE[dt.name]
        if full.type.rank == 1:
            n, unit, base = self.count(chunk), dt.bits // 8, self.ref(row)
            whole = (chunk.type.shape[0] * dt.bits // 8) % _BLOCK == 0
        else:
            rows, cols = self.rows_of(chunk), _cols(chunk.type)
            unit = cols * dt.bits // 8
            n, base, whole = _mul(rows, str(cols)), _mul(self.ref(row), str(cols)), True
            if unit % _BLOCK == 0:
                self.emit(f"DataCopy({target}, {c}, {c_cast('uint32_t', n)});")
                self.api.add("DataCopy")
                return
        # an exact element count (a DataCopy would round up to 32 bytes and write past the chunk): Muls by 1
        # where the chunk lands on a 32-byte block (a runtime row: checked at run time), else scalar stores
        vector = whole and dt.name in _MULS_TYPES
        at = _const(self.ref(row))
        muls = f"Muls({target}, {c}, static_cast<{ct}>(1), {c_cast('int32_t', n)});"
        if vector and at is not None and (at * unit) % _BLOCK == 0:
            self.emit(muls)
            self.api.add("Muls")
            return
        if vector:
            self.emit(f"if ((({self.ref(row)}) * {unit}) % {_BLOCK} == 0) {{")
            self.emit("    " + muls)
            self.emit("} else {")
            self.depth += 1
            self.api.add("Muls")
        i = self.namer.ident("i")   # scalar stores (see op_slice_rows)
        self.emit("PipeBarrier<PIPE_ALL>();")
        self.emit(f"for (int64_t {i} = 0; {i} < {n}; ++{i}) {{")
        self.emit(f"    {f}.SetValue({base} + {i}, {c}.GetValue({i}));")
        self.emit("}")
        self.emit("PipeBarrier<PIPE_ALL>();")
        self.api |= {"LocalTensor::GetValue", "LocalTensor::SetValue", "PipeBarrier"}
        if vector:
            self.depth -= 1
            self.emit("}")

    def op_ewise(self, op):
        kind = op.attrs["op"]
        out = op.result
        dt = out.type.dtype
        if dt.name == "bool" or kind in _SCALAR_EWISE or not self._vector_form(op):
            return self._scalar_ewise(op)
        dst = self.tile(out)
        n = self.count(out)
        ct = CTYPE[dt.name]
        tiles = [a for a in op.args if a.is_tile]
        if kind in _MATH_UNARY:
            return self._math_unary(op, kind, dst, n, ct)
        if kind == "pow":
            return self._power(op, dst, n)
        if kind in _UNARY or kind == "neg":
            (x,) = op.args
            xs = self._full_operand(x, out, op)
            if kind == "neg":
                self.emit(f"Muls({dst}, {xs}, static_cast<{ct}>(-1), {c_cast('int32_t', n)});")
                self.api.add("Muls")
            else:
                self.emit(f"{_UNARY[kind]}({dst}, {xs}, {c_cast('int32_t', n)});")
                self.api.add(_UNARY[kind])
            return
        if kind not in _BIN_TT:
            raise AscendCUnsupported(f"elementwise {kind!r}", op.loc)
        a, b = op.args
        if len(tiles) == 1:
            return self._tile_scalar(op, kind, a, b, dst, n, ct)
        ba, bb = self._bcast(a, out), self._bcast(b, out)
        if ba is None and bb is None:
            self.emit(f"{_BIN_TT[kind]}({dst}, {self.tile(a)}, {self.tile(b)}, {c_cast('int32_t', n)});")
            self.api.add(_BIN_TT[kind])
            return
        if ba is not None and bb is not None:
            raise AscendCUnsupported("an elementwise op whose operands are both broadcast", op.loc)
        if ba == "row" or bb == "row":
            raise AscendCUnsupported("a broadcast along rows (a (1, n) operand)", op.loc)
        full, col = (b, a) if ba is not None else (a, b)
        if full is b and kind in ("sub", "div"):
            raise AscendCUnsupported(f"{kind} of a column-broadcast tile by a full tile", op.loc)
        self._column_broadcast(op, kind, full, col, dst, out)

    def _math_unary(self, op, kind, dst, n, ct):
        """Tanh / Sigmoid / Erf / Floor: the math library's count form (no temporary buffer argument)."""
        (x,) = op.args
        xs = self._full_operand(x, op.result, op)
        self.emit(f"{_MATH_UNARY[kind]}({dst}, {xs}, {c_cast('uint32_t', n)});")
        self.api.add(_MATH_UNARY[kind])

    def _power(self, op, dst, n):
        """x ** y (not a small integer constant, which the builder made multiplies): Power's tensor-tensor,
        tensor-scalar or scalar-tensor count form (operands of the result's shape)."""
        a, b = op.args
        out = op.result
        for t in (a, b):
            if t.is_tile and t.type.shape != out.type.shape:
                raise AscendCUnsupported("a broadcast operand of pow", op.loc)
        dt = out.type.dtype
        x = self.tile(a) if a.is_tile else self.scalar_as(a, dt)
        y = self.tile(b) if b.is_tile else self.scalar_as(b, dt)
        self.emit(f"Power({dst}, {x}, {y}, {c_cast('uint32_t', n)});")
        self.api.add("Power")

    def op_device_print(self, op):
        """A simulator-only print: a comment naming it (no code, no sync)."""
        value = op.args[0]
        what = (value.name or "tile") if value.is_tile else (value.name or self.ref(value))
        self.emit(f"// device_print({comment(chr(34) + op.attrs['name'] + chr(34))}, {comment(str(what))})")

    def op_gather(self, op):
        """result[i] = table[idx[i]]: a loop of scalar reads (GlobalTensor::GetValue of each index, checked
        against the table's extent and bound by CVT_CHECK) and UB writes (LocalTensor::SetValue) over idx's
        valid elements, fenced by PipeBarrier<PIPE_ALL> like the scalar elementwise loop."""
        w = op.windows["table"]
        (idx,) = op.args
        out = op.result
        d = w.dims[0]
        dst, src = self.tile(out), self.tile(idx)
        ext = self.extents(out)
        ivars = [self.namer.ident(n) for n in ("i", "j")[:out.type.rank]]
        pitch = out.type.shape[-1]
        at = ivars[0] if out.type.rank == 1 else c_sum(_mul(ivars[0], str(pitch)), ivars[1])
        if idx.type.shape != out.type.shape:
            raise AscendCUnsupported("a gather with a broadcast idx operand", op.loc)
        self.emit("PipeBarrier<PIPE_ALL>();")
        for k, (iv, e) in enumerate(zip(ivars, ext)):
            self.emit("    " * k + f"for (int64_t {iv} = 0; {iv} < {e}; ++{iv}) {{")
        self.depth += len(ivars)
        k = self.namer.ident("k")
        n, start, bound = self.ref(d.valid), self.ref(d.start), self.ref(d.bound)
        self.emit(f"const int64_t {k} = static_cast<int64_t>({src}.GetValue({at}));")
        past = f"{k} < {n}" if start == "0" else f"{k} < {n} && {start} + {k} < {bound}"
        self.emit(f"CVT_CHECK({k} >= 0 && {past}, {c_string('gather: an index lies outside the table')});")
        elem = k if start == "0" else f"{start} + {k}"
        addr = c_sum(self.ref(w.offset), self._row_offset(d, elem, op))
        self.emit(f"{dst}.SetValue({at}, {self.gm[w.tensor.id]}.GetValue({addr}));")
        self.depth -= len(ivars)
        for k in reversed(range(len(ivars))):
            self.emit("    " * k + "}")
        self.emit("PipeBarrier<PIPE_ALL>();")
        self.api |= {"GlobalTensor::GetValue", "LocalTensor::GetValue", "LocalTensor::SetValue", "PipeBarrier"}

    def _vector_form(self, op) -> bool:
        """Whether the vector API has a form for this elementwise op (else the scalar loop lowers it)."""
        kind, out = op.attrs["op"], op.result
        dt = out.type.dtype.name
        tiles = [a for a in op.args if a.is_tile]
        if dt not in ("float32", "float16") and not (dt in ("int32", "int16") and kind in ("add", "sub", "mul",
                                                                                         "max", "min")):
            return False
        if len(tiles) == 1 and tiles[0].type.shape != out.type.shape:
            return False
        if len(tiles) == 2:
            bs = [self._bcast(t, out) for t in tiles]
            if "row" in bs or "both" in bs or bs == ["col", "col"]:
                return False
            if any(bs) and not _aligned_rows(out.type):   # the repeat form walks rows in 32-byte blocks
                return False
            if bs[1] is None and bs[0] == "col" and kind in ("sub", "div"):
                return False
        if len(tiles) == 1 and kind == "div" and dt.startswith("int"):
            return False
        return True

    def _scalar_ewise(self, op):
        """The elementwise ops the vector API has no form for here (compares and bool logic: the vector
        Compare writes bit masks; where with broadcast or scalar arms; integer // and %): a loop of scalar
        UB reads and writes over the valid region, fenced by PipeBarrier<PIPE_ALL> so the vector and MTE
        pipes have finished before and wait after (slow, exact, and it makes no layout assumption)."""
        out = op.result
        kind = op.attrs["op"]
        dst = self.tile(out)
        shape = out.type.shape
        ext = self.extents(out)
        r, c = self.namer.ident("i"), self.namer.ident("j")

        def at(x: Value) -> str:
            if not x.is_tile:     # in the op's dtype; a 16-bit float read as float, as the tiles' elements are
                dt = _promote(op, x)
                v = self.scalar_as(x, dt)
                return f"static_cast<float>({v})" if dt.name in ("float16", "bfloat16") else v
            t = self.tile(x)
            if x.type.rank == 1:
                idx = c
            else:
                pitch = x.type.shape[1]
                rr = "0" if x.type.shape[0] == 1 and shape[0] != 1 else r
                cc = "0" if x.type.shape[1] == 1 and shape[-1] != 1 else c
                idx = c_sum(_mul(rr, str(pitch)), cc)
            val = f"{t}.GetValue({idx})"
            return f"static_cast<float>({val})" if x.type.dtype.name in ("float16", "bfloat16") else val

        def expand_src(x: Value) -> Value:
            return x.owner.args[0] if x.owner is not None and x.owner.kind == "expand" else x

        args = [a for a in op.args]
        vals = []
        for a in args:
            if a.is_tile and a.owner is not None and a.owner.kind == "expand":
                src = expand_src(a)
                t = self.tile(src)
                dim = 0 if a.owner.attrs["axis"] == 1 else 1     # the result dim the source runs along
                idx = "0" if src.type.shape[0] == 1 and shape[dim] != 1 else (r if dim == 0 else c)
                v = f"{t}.GetValue({idx})"
                vals.append(f"static_cast<float>({v})" if src.type.dtype.name in ("float16", "bfloat16") else v)
            else:
                vals.append(at(a))
        expr = _scalar_expr(kind, vals, out.type.dtype.name, op)
        ct = CTYPE[out.type.dtype.name]
        self.emit("PipeBarrier<PIPE_ALL>();")
        if len(shape) == 2:
            self.emit(f"for (int64_t {r} = 0; {r} < {ext[0]}; ++{r}) {{")
            self.emit(f"    for (int64_t {c} = 0; {c} < {ext[1]}; ++{c}) {{")
            self.emit(f"        {dst}.SetValue({c_sum(_mul(r, str(shape[1])), c)}, static_cast<{ct}>({expr}));")
            self.emit("    }")
            self.emit("}")
        else:
            self.emit(f"for (int64_t {c} = 0; {c} < {ext[0]}; ++{c}) {{")
            self.emit(f"    {dst}.SetValue({c}, static_cast<{ct}>({expr}));")
            self.emit("}")
        self.emit("PipeBarrier<PIPE_ALL>();")
        self.api |= {"LocalTensor::GetValue", "LocalTensor::SetValue", "PipeBarrier"}

    def _bcast(self, x: Value, out: Value):
        """None for an operand of the result's shape; 'col' for an (R, 1) operand of an (R, C) result, 'row'
        for (1, C); 'both' for a (1, 1) operand of a result of more than one row and column (a per-tensor
        value: the scalar loop reads its one element)."""
        if x.type.shape == out.type.shape:
            return None
        if x.type.rank == 2 and x.type.shape[1] == 1:
            return "col" if x.type.shape[0] == out.type.shape[0] else "both"
        return "row"

    def _full_operand(self, x: Value, out: Value, op) -> str:
        if x.type.shape != out.type.shape:
            raise AscendCUnsupported("a broadcast operand of a unary op", op.loc)
        return self.tile(x)

    def _tile_scalar(self, op, kind, a, b, dst, n, ct):
        tile_first = a.is_tile
        t, s = (a, b) if tile_first else (b, a)
        if t.type.shape != op.result.type.shape:
            raise AscendCUnsupported("a broadcast tile with a scalar operand", op.loc)
        src = self.tile(t)
        sv = self.scalar_as(s, op.result.type.dtype)
        cnt = f"{c_cast('int32_t', n)}"
        if kind in _BIN_TS:
            self.emit(f"{_BIN_TS[kind]}({dst}, {src}, {sv}, {cnt});")
            self.api.add(_BIN_TS[kind])
        elif kind == "sub" and tile_first:          # t - s == t + (-s), exactly
            self.emit(f"Adds({dst}, {src}, static_cast<{ct}>(-({sv})), {cnt});")
            self.api.add("Adds")
        elif kind == "sub":                          # s - t == (-t) + s, exactly
            self.emit(f"Muls({dst}, {src}, static_cast<{ct}>(-1), {cnt});")
            self.emit(f"Adds({dst}, {dst}, {sv}, {cnt});")
            self.api |= {"Adds", "Muls"}
        else:                                        # division: the scalar as a row of divisors
            nbytes = op.result.type.numel * op.result.type.dtype.bits // 8
            off = self.need_scratch(f"divisor {op.result.type.dtype} {nbytes}", nbytes)
            d = self.namer.ident("divisor")
            self.emit(f"LocalTensor<{ct}> {d} = ub[{off}].ReinterpretCast<{ct}>();")
            self.emit(f"Duplicate({d}, {sv}, {cnt});")
            self.emit("PipeBarrier<PIPE_V>();")
            if tile_first:
                self.emit(f"Div({dst}, {src}, {d}, {cnt});")
            else:
                self.emit(f"Div({dst}, {d}, {src}, {cnt});")
            self.api |= {"Duplicate", "Div", "PipeBarrier"}

    def _column_broadcast(self, op, kind, full: Value, col: Value, dst: str, out: Value):
        """dst[r, :] = full[r, :] op col[r]: Brcb spreads col[r] over one 32-byte block per row, then the
        repeat form reads that block in every block of row r (source block stride 0)."""
        dt = out.type.dtype
        size = dt.bits // 8
        ct = CTYPE[dt.name]
        rows = self.rows_of(out)
        R = out.type.shape[0]
        pitch = _cols(out.type)
        lanes = _REPEAT // size
        nrep8 = -(-R // 8)
        off = self.need_scratch(f"row broadcast {dt} {R}", nrep8 * 8 * _BLOCK)
        brc = self.namer.ident("rowBrc")
        src_col = self.tile(col)
        self.emit(f"LocalTensor<{ct}> {brc} = ub[{off}].ReinterpretCast<{ct}>();")
        self.emit(f"Brcb({brc}, {src_col}, static_cast<uint8_t>(({rows} + 7) / 8), BrcbRepeatParams(1, 8));")
        self.emit("PipeBarrier<PIPE_V>();")
        self.api |= {"Brcb", "BrcbRepeatParams", "PipeBarrier", "BinaryRepeatParams", _BIN_TT[kind]}
        fsrc = self.tile(full)
        rep_blocks = pitch * size // _BLOCK
        fn = _BIN_TT[kind]
        a_is_full = op.args[0] is full
        if rep_blocks <= 255 and R <= 255:
            # one call per 64-lane column chunk: repeats walk the rows
            for c0 in range(0, pitch, lanes):
                mask = min(lanes, pitch - c0)
                p = f"BinaryRepeatParams(1, 1, 0, {rep_blocks}, {rep_blocks}, 1)" if a_is_full else \
                    f"BinaryRepeatParams(1, 0, 1, {rep_blocks}, 1, {rep_blocks})"
                s0, s1 = (f"{fsrc}[{c0}]", brc) if a_is_full else (brc, f"{fsrc}[{c0}]")
                self.emit(f"{fn}({dst}[{c0}], {s0}, {s1}, {mask}, static_cast<uint8_t>({rows}), {p});")
            return
        r = self.namer.ident("r")
        self.emit(f"for (int64_t {r} = 0; {r} < {rows}; ++{r}) {{")
        full_reps, tail = divmod(pitch, lanes)
        for c0, reps, mask in ([(0, full_reps, lanes)] if full_reps else []) + (
                [(full_reps * lanes, 1, tail)] if tail else []):
            left = 0
            while left < reps:
                chunk = min(255, reps - left)
                cc = c0 + left * lanes
                p = "BinaryRepeatParams(1, 1, 0, 8, 8, 0)" if a_is_full else "BinaryRepeatParams(1, 0, 1, 8, 0, 8)"
                s0 = f"{fsrc}[{r} * {pitch} + {cc}]"
                s1 = f"{brc}[{r} * {_BLOCK // size}]"
                if not a_is_full:
                    s0, s1 = s1, s0
                self.emit(f"    {fn}({dst}[{r} * {pitch} + {cc}], {s0}, {s1}, {mask}, {chunk}, {p});")
                left += chunk
        self.emit("}")

    # ------------------------------------------------------------------ sync
    def event_id(self, op) -> str:
        """An event's id: a constant, or for a ping-pong pair the even or odd iteration's id by its ping."""
        eid = op.attrs["id"]
        if not op.args:
            return str(eid)
        return f"{eid} + {op.attrs['id_odd'] - eid} * {self.ref(op.args[0])}"

    def op_event_set(self, op):
        self.emit(f"SetFlag<HardEvent::{op.attrs['event']}>({self.event_id(op)});")
        self.api |= {"SetFlag", "HardEvent"}

    def op_event_wait(self, op):
        self.emit(f"WaitFlag<HardEvent::{op.attrs['event']}>({self.event_id(op)});")
        self.api |= {"WaitFlag", "HardEvent"}

    def op_barrier(self, op):
        self.emit(f"PipeBarrier<{_PIPE[op.attrs['pipe']]}>();")
        self.api.add("PipeBarrier")

    def op_flag_set(self, op, postponed: bool = False):
        """Mode 2 (A2/A3): one set reaches both AIVs of the group (or, from the AIVs, counts once both have
        set). Mode 4 (950): per-AIV counters, so the AIC sets id for AIV 0 and id + 16 for AIV 1. A set the cube
        rules postponed (a slot still read by a later mma) is printed where they say."""
        if not postponed and id(op) in getattr(self, "skip_ops", ()):
            return
        mode, pipe, name = op.attrs.get("mode", 2), _PIPE[op.attrs["pipe"]], f"cvtFlag{op.attrs['name']}"
        ids = [name, f"{name} + 16"] if mode == 4 and self.core == "aic" else [name]
        for fid in ids:
            self.emit(f"CrossCoreSetFlag<{mode}, {pipe}>({fid});")
        self.api.add("CrossCoreSetFlag")

    def op_flag_wait(self, op):
        """Mode 4 on the AIC waits on both AIVs' counters (id and id + 16)."""
        mode, name = op.attrs.get("mode", 2), f"cvtFlag{op.attrs['name']}"
        ids = [name, f"{name} + 16"] if mode == 4 and self.core == "aic" else [name]
        for fid in ids:
            self.emit(f"CrossCoreWaitFlag<{mode}, PIPE_S>({fid});")
        self.api.add("CrossCoreWaitFlag")


_SCALAR_EWISE = ("lt", "le", "gt", "ge", "eq", "ne", "where", "and", "or", "not", "xor", "floordiv", "mod", "lshift",
                 "rshift")
_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def _promote(op, x) -> object:
    """The dtype a scalar operand takes in a scalar-loop elementwise op: the tile operands' dtype."""
    for a in op.args:
        if a.is_tile and a.type.dtype.name != "bool":
            return a.type.dtype
    return op.result.type.dtype


def _scalar_expr(kind: str, vals: list, dt: str, op) -> str:
    if kind in _CMP:
        return f"({vals[0]} {_CMP[kind]} {vals[1]})"
    if kind == "where":
        return f"({vals[0]} ? {vals[1]} : {vals[2]})"
    if kind in ("and", "or", "xor") and dt == "bool":
        return f"({vals[0]} {'&&' if kind == 'and' else '||' if kind == 'or' else '!='} {vals[1]})"
    if kind in ("and", "or", "xor"):
        return f"({vals[0]} {'&' if kind == 'and' else '|' if kind == 'or' else '^'} {vals[1]})"
    if kind == "not":
        return f"(!{vals[0]})" if dt == "bool" else f"(~{vals[0]})"
    if kind in ("lshift", "rshift"):
        return f"({vals[0]} {'<<' if kind == 'lshift' else '>>'} {vals[1]})"
    if kind in ("floordiv", "mod") and not dt.startswith("float"):
        return f"{'cvtFloorDiv' if kind == 'floordiv' else 'cvtMod'}(static_cast<int64_t>({vals[0]}), " \
               f"static_cast<int64_t>({vals[1]}))"
    simple = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
    if kind in simple:
        return f"({vals[0]} {simple[kind]} {vals[1]})"
    if kind in ("max", "min"):
        return f"cvt{kind.capitalize()}({vals[0]}, {vals[1]})"
    if kind == "neg":
        return f"(-{vals[0]})"
    raise AscendCUnsupported(f"elementwise {kind!r} ({dt}) in the scalar fallback", op.loc)


# ---------------------------------------------------------------------- text helpers
def _row_at(base: str, t: TileType, row: str) -> str:
    """The LocalTensor of row ``row`` of tile ``base`` (rank 2: row pitch = the capacity's columns; rank 1:
    one element per row)."""
    if row == "0":
        return base
    return f"{base}[{_mul(row, str(t.shape[1]))}]" if t.rank == 2 else f"{base}[{row}]"


#: casts with no one vector instruction on either arch (the declaration header's ``CastOk``): their exact steps
#: (from, to, round mode; "op" = the op's own rounding). An fp32 -> int8 value is rounded in fp32 first (the
#: op's mode), then reaches int8 through half, exactly: an integer of at most 2048 in magnitude is a half, and a
#: larger one saturates to the int8 bound either way (half's inf included)
_CAST_VIA = {
    ("float32", "int8"): (("float32", "float32", "op"), ("float32", "float16", "RoundMode::CAST_NONE"),
                          ("float16", "int8", "RoundMode::CAST_RINT")),
    ("int8", "float32"): (("int8", "float16", "RoundMode::CAST_NONE"),
                          ("float16", "float32", "RoundMode::CAST_NONE")),
}
_CAST_CHUNK = 2048

#: element types ``Muls`` takes (an exact copy by the count form: x * 1 is x, NaN and -0 included)
_MULS_TYPES = ("float16", "float32", "int16", "int32")


def _cols(t: TileType) -> int:
    return t.shape[-1] if t.rank == 2 else t.shape[0]


def _aligned_rows(t: TileType) -> bool:
    """Whether every row of a UB tile starts at a 32-byte boundary (what the vector unit and DataCopyPad
    address): a one-row tile, or a row pitch of whole 32-byte blocks."""
    return t.rank == 1 or t.shape[0] == 1 or (t.shape[1] * t.dtype.bits // 8) % _BLOCK == 0


def _ceil(x: int, a: int) -> int:
    return (x + a - 1) // a * a


def _mul(a: str, b: str) -> str:
    if a == "1":
        return b
    if b == "1":
        return a
    if a == "0" or b == "0":
        return "0"
    if a.isdigit() and b.isdigit():
        return str(int(a) * int(b))
    return f"{a} * {b}" if a.isidentifier() or a.replace(".", "").isidentifier() else f"({a}) * {b}"


def _atomic(e: str) -> bool:
    """An expression that needs no parentheses: a name, a literal or a member access."""
    return e.replace(".", "").replace("_", "a").isalnum() or e.lstrip("-").replace(".", "").isdigit()


def _float_literal(x: float) -> str:
    import math

    if math.isnan(x):
        return "(0.0f / 0.0f)"
    if math.isinf(x):
        return "(1.0f / 0.0f)" if x > 0 else "(-1.0f / 0.0f)"
    return repr(float(x)) + "f" if "e" in repr(float(x)) or "." in repr(float(x)) else repr(float(x)) + ".0f"


def _literal(c, t) -> str:
    if isinstance(c, bool):
        return "true" if c else "false"
    if isinstance(t, ScalarType) and t.dtype.name == "float32" or isinstance(c, float):
        return _float_literal(float(c))
    v = int(c)
    return f"{v}LL" if abs(v) > 2 ** 31 - 1 else str(v)


def _tiling_header(struct: str, fields: list, kernel: Kernel) -> str:
    guard = struct.upper() + "_H"
    lines = [f"// The tiling struct of {comment(kernel.name)}: the runtime scalars and GM tensor shapes the host",
             "// writes into the tiling buffer (a POD: the host copies its bytes, the kernel reads them from GM).",
             f"#ifndef {guard}", f"#define {guard}", "", "#include <cstdint>", "",
             f"struct {struct} {{"]
    for f in fields:
        lines.append(f"    {f.ctype} {f.name};")
    if not fields:
        lines.append("    int64_t unused;")
    lines += ["};", "", f"#endif  // {guard}", ""]
    return "\n".join(lines)
