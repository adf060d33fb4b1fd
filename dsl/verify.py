"""The spec of legal tile IR, checked after the frontend and after every pass.

Legal IR
--------
* Every operand is defined before its use, in the same block or an enclosing
  one; a ``for`` body's arguments are the induction variable and the carried
  values; ``for`` bodies and ``if`` arms end with one ``yield`` whose values
  match the op's result types (and, for ``for``, the carried inputs).
* Scopes: scalar ops and control flow have scope None (both core types run
  them); every tile op has scope "cube" or "vector":
    - cube:   load GM->L1, store L0C->GM, copy L1->L0A/L0B (and L0C->UB/L1 on
              targets with on-chip paths), mma, dequant (int32 -> float16 in L0C,
              the fixpipe's DEQF16), create in L1/L0*
    - vector: load GM->UB, store UB->GM, create/iota/ewise/cast/reduce/expand in UB,
              copy UB->L1 on targets with on-chip paths
    - handoff: from a value of the other scope into UB (vector) or L1 (cube).
* dtypes: mma operands float16/bfloat16/float32/int8, both alike, result float32/int32
  in L0C; L0A/L0B hold mma operands, L0C accumulators; elementwise operands
  share one dtype; a UB->GM store does not convert (L0C->GM may cast fp32 to
  fp16/bf16 through the fixpipe, and stores an int32 tile's ``dequant`` as fp16).
* After split_cv the kernel body holds only ``program`` ops (one per core
  type); an aic program holds no vector op and an aiv program no cube op, and
  a program reads only the kernel's arguments and its own values.
* (Budgets are not structure: plan_memory places every buffer and the
  compiler raises ``BudgetError`` with the memory table when a space does not
  fit, see ``passes/plan_memory.py``.)
"""

from __future__ import annotations

from .errors import CompilationError
from .ir import Block, Kernel, Op, Value

__all__ = ["verify_structure"]


def verify_structure(kernel: Kernel, platform) -> None:
    defined = {a.id for a in kernel.args}
    programs = [op for op in kernel.body.ops if op.kind == "program"]
    if programs and len(programs) != len(kernel.body.ops):
        _fail(programs[0], "a split kernel's body holds only its programs")
    _block(kernel.body, defined, platform, None, None)


def _fail(op: Op, message: str):
    raise CompilationError(f"invalid IR: {message}", op.loc)


_CORE_SCOPE = {"aic": "cube", "aiv": "vector"}


def _block(block: Block, defined: set, platform, parent: Op | None, core: str | None):
    scope_defined = set(defined) | {a.id for a in block.args}
    for i, op in enumerate(block.ops):
        if op.kind == "program":
            if parent is not None:
                _fail(op, "a program op nested in another op")
            if op.attrs.get("core") not in _CORE_SCOPE:
                _fail(op, f"a program for core {op.attrs.get('core')!r} (aic or aiv)")
            if op.blocks[0].ops and op.blocks[0].ops[-1].kind == "yield":
                _fail(op.blocks[0].ops[-1], "yield at the end of a program")
        elif core is not None and op.scope not in (None, _CORE_SCOPE[core]):
            _fail(op, f"a {op.scope} op in the {core} program")
        for o in op.args:
            if not isinstance(o, Value):
                _fail(op, f"{op.kind} has an operand that is not an IR value: {o!r}")
        for o in op.operands:
            if o.id not in scope_defined:
                _fail(op, f"{op.kind} uses {o!r} before its definition")
        if op.kind == "yield":
            if i != len(block.ops) - 1:
                _fail(op, "yield must end its block")
        _op(op, platform)
        for b in op.blocks:
            _block(b, scope_defined, platform, op, op.attrs["core"] if op.kind == "program" else core)
            if op.kind in ("for", "if"):
                if not b.ops or b.ops[-1].kind != "yield":
                    _fail(op, f"{op.kind} block does not end with yield")
                ys = b.ops[-1].operands
                if [y.type for y in ys] != [r.type for r in op.results]:
                    _fail(op, f"{op.kind} yields {[y.type for y in ys]} but produces {[r.type for r in op.results]}")
        scope_defined |= {r.id for r in op.results}
    if parent is None and block.ops and block.ops[-1].kind == "yield":
        _fail(block.ops[-1], "yield outside a for/if")


def _op(op: Op, platform):
    d = op.defn
    if op.scope not in d.scopes:
        if d.category in ("scalar", "control"):
            _fail(op, f"scalar/control op {op.kind} must not carry a scope")
        _fail(op, f"{op.kind} in scope {op.scope!r} (allowed: {', '.join(str(s) for s in d.scopes)})")
    if d.verify is not None:
        message = d.verify(op, platform)
        if message:
            _fail(op, message)
