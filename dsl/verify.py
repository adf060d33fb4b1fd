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
              targets with on-chip paths), mma, create in L1/L0*
    - vector: load GM->UB, store UB->GM, create/iota/ewise/cast/reduce/expand in UB,
              copy UB->L1 on targets with on-chip paths
    - handoff: from a value of the other scope into UB (vector) or L1 (cube).
* dtypes: mma operands float16/bfloat16/int8, both alike, result float32/int32
  in L0C; L0A/L0B hold mma operands, L0C accumulators; elementwise operands
  share one dtype; a UB->GM store does not convert (L0C->GM may cast fp32 to
  fp16/bf16 through the fixpipe).
* On-chip budgets fit the target (``budget.py``); otherwise ``BudgetError``
  with the memory table.
"""

from __future__ import annotations

from .budget import BudgetReport, check_budget, plan_budget
from .errors import CompilationError
from .ir import Block, Kernel, Op
from .types import L0A, L0B, L0C, L1, UB, TileType

__all__ = ["verify", "verify_structure"]

_TILE_SCOPES = {
    "load": ("cube", "vector"), "store": ("cube", "vector"), "copy": ("cube", "vector"),
    "handoff": ("cube", "vector"), "mma": ("cube",), "create": ("cube", "vector"), "iota": ("vector",),
    "ewise": ("vector",), "cast": ("vector",), "reduce": ("vector",), "expand": ("vector",),
}


def verify(kernel: Kernel, platform) -> BudgetReport:
    """Check the structure and the budgets; return the budget report."""
    verify_structure(kernel, platform)
    report = plan_budget(kernel, platform)
    check_budget(report, kernel)
    return report


def verify_structure(kernel: Kernel, platform) -> None:
    defined = {a.id for a in kernel.args}
    _block(kernel.body, defined, platform, None)


def _fail(op: Op, message: str):
    raise CompilationError(f"invalid IR: {message}", op.loc)


def _block(block: Block, defined: set, platform, parent: Op | None):
    scope_defined = set(defined) | {a.id for a in block.args}
    for i, op in enumerate(block.ops):
        for o in op.operands:
            if o.id not in scope_defined:
                _fail(op, f"{op.kind} uses {o!r} before its definition")
        if op.kind == "yield":
            if i != len(block.ops) - 1:
                _fail(op, "yield must end its block")
        _op(op, platform)
        for b in op.blocks:
            _block(b, scope_defined, platform, op)
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
    k = op.kind
    if k in _TILE_SCOPES:
        if op.scope not in _TILE_SCOPES[k]:
            _fail(op, f"{k} in scope {op.scope!r} (allowed: {', '.join(_TILE_SCOPES[k])})")
    elif op.scope is not None:
        _fail(op, f"scalar/control op {k} must not carry a scope")
    res = op.results[0].type if op.results else None
    if k == "load":
        want = L1 if op.scope == "cube" else UB
        if res.space is not want:
            _fail(op, f"load in {op.scope} scope must produce a {want} tile, got {res.space}")
    elif k == "store":
        src = op.operands[-1].type.space
        if (op.scope, src) not in (("vector", UB), ("cube", L0C)):
            _fail(op, f"store from {src} in {op.scope} scope")
    elif k == "copy":
        src = op.operands[0].type.space
        edges = {(L1, L0A), (L1, L0B)}
        if platform.cube_to_vector_on_chip:
            edges |= {(L0C, UB), (UB, L1), (L0C, L1)}
        if (src, res.space) not in edges:
            _fail(op, f"copy {src}->{res.space} is not a legal edge on {platform.name}")
    elif k == "handoff":
        want = UB if op.scope == "vector" else L1
        if res.space is not want:
            _fail(op, f"handoff into {op.scope} must produce a {want} tile")
    elif k == "mma":
        if res.space is not L0C or res.dtype.name not in ("float32", "int32"):
            _fail(op, "mma must produce a float32/int32 L0C tile")
    elif k in ("create",):
        space = res.space
        if (op.scope == "vector") != (space is UB):
            _fail(op, f"create of a {space} tile in {op.scope} scope")
    elif k in ("iota", "ewise", "cast", "reduce", "expand"):
        if not isinstance(res, TileType) or res.space is not UB:
            _fail(op, f"{k} must produce a UB tile")
        for o in op.operands:
            if isinstance(o.type, TileType) and o.type.space is not UB:
                _fail(op, f"{k} reads a {o.type.space} tile; vector ops read UB")
