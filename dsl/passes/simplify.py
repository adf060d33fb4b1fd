"""simplify: merge repeated scalar computations and checks, drop unused pure ops.

Model
-----
The frontend emits address arithmetic and bound checks per access, so a kernel
that reads ``tasks[t, 0]``, ``tasks[t, 1]``, ... repeats ``t >= 0``,
``t < rows`` and ``t * cols`` for every read. This pass walks the structured
IR with a scoped table (an op's entry is visible in its block and the blocks
nested in it, so every replacement is dominated by what replaces it):

* a pure scalar op (``const``, ``sbin``, ``sun``, ``scast``, ``sselect``,
  ``dim``, ``block_idx``, ``block_num``, ``subblock_idx``) equal to an earlier
  visible one (same kind, attributes and operands) is removed and its uses
  read the earlier value;
* a ``check`` of a condition already checked by a visible ``check`` is
  removed, as is a check whose condition is the constant True;
* finally every pure op (scalar, or a tile op without side effects) whose
  results are unused is removed, repeatedly, and so is every loop-carried
  slot of a ``for`` that nothing reads: its result unused and its body
  argument read only by the yield that carries it on (a placeholder a kernel
  threads through a loop for the other core type, which would otherwise
  become an unused variable of the emitted program).

Purity and the CSE candidates come from the op table (``ops.OPS``).

Invariants: stores, checks that can fail, control flow and yields are never
removed; values inside GM windows (``Op.windows``) are rewritten along with the
plain operands.
"""

from __future__ import annotations

from ..ir import OPS, Block, Kernel, Op, Value, walk

__all__ = ["simplify", "simplify_block"]

#: scalar ops that CSE merges: the pure scalars, except GM reads (``sload``: a later store may change the element)
_CSE_KINDS = {k for k, d in OPS.items() if d.category == "scalar" and d.pure and k != "sload"}


def simplify(kernel: Kernel, platform=None) -> Kernel:
    simplify_block(kernel.body)
    return kernel


def simplify_block(block: Block) -> None:
    """CSE and DCE of one block and what it nests (a kernel body, or one program of a split kernel)."""
    subst: dict[int, Value] = {}
    _cse(block, [{}], subst)
    _dce(block)


def _key(op: Op):
    attrs = tuple(sorted(op.attrs.items()))
    if op.kind == "const":
        v = op.result.const
        return ("const", type(v).__name__, v, op.result.type)
    return (op.kind, attrs, tuple(o.id for o in op.operands))


def _cse(block: Block, scopes: list, subst: dict):
    kept = []
    for op in block.ops:
        _rewrite(op, subst)
        if op.kind in _CSE_KINDS and len(op.results) == 1:
            key = _key(op)
            found = _lookup(scopes, key)
            if found is not None:
                subst[op.result.id] = found
                continue
            scopes[-1][key] = op.result
        elif op.kind == "check":
            cond = op.operands[0]
            if cond.const is True:
                continue
            key = ("check", cond.id)
            if _lookup(scopes, key) is not None:
                continue
            scopes[-1][key] = cond
        for b in op.blocks:
            scopes.append({})
            _cse(b, scopes, subst)
            scopes.pop()
        kept.append(op)
    block.ops = kept


def _lookup(scopes, key):
    for s in reversed(scopes):
        if key in s:
            return s[key]
    return None


def _rewrite(op: Op, subst: dict):
    if subst:
        op.map_values(lambda v: _sub(v, subst))


def _sub(v, subst):
    while isinstance(v, Value) and v.id in subst:
        v = subst[v.id]
    return v


def _dce(body: Block):
    while True:
        used: set[int] = set()
        _collect_uses(body, used)
        if not _drop_unused(body, used):
            return


def _collect_uses(block: Block, used: set):
    for op in block.ops:
        for o in op.operands:
            used.add(o.id)
        for b in op.blocks:
            _collect_uses(b, used)


def _drop_unused(block: Block, used: set) -> bool:
    changed = False
    kept = []
    for op in block.ops:
        for b in op.blocks:
            changed |= _drop_unused(b, used)
        if op.kind == "for":
            changed |= _drop_dead_carried(op, used)
        pure = op.defn.pure
        if pure and op.results and not any(r.id in used for r in op.results):
            changed = True
            continue
        kept.append(op)
    block.ops = kept
    return changed


def _drop_dead_carried(loop: Op, used: set) -> bool:
    """Remove the carried slots of ``loop`` whose result is unused and whose body argument only its own yield
    slot reads (init, argument, yielded value and result go together)."""
    body = loop.blocks[0]
    ys = body.ops[-1]
    dead = []
    for i, (arg, r) in enumerate(zip(body.args[1:], loop.results)):
        if r.id in used:
            continue
        reads = sum(1 for op in walk(body) for o in op.operands if o is arg)
        if reads == (1 if ys.args[i] is arg else 0):
            dead.append(i)
    for i in reversed(dead):
        del loop.args[3 + i]
        del body.args[1 + i]
        del ys.args[i]
        del loop.results[i]
    return bool(dead)
