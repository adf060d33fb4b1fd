"""pipeline: software-pipeline the loops that carry hand-offs, so the cube and vector work of different
iterations overlap.

Model
-----
In the split programs a loop body such as FIA's runs, per iteration i,
C1(i): S = Q K^T -> slot; V1(i): softmax -> P slot; C2(i): O = P V -> slot;
V2(i): acc update. Run as written, the cube waits for the vector (and back)
inside every iteration. The chip's kernel instead preloads: the AIC computes
C1(i+1) while the AIVs run V1(i), and the AIVs run V2(i-1) while the AIC runs
C2(i) (ascendc_backend.md §3: "C1(i) | V1(i-1), C2(i-1) | V2(i-2)").

* Phases. The ops of a loop body (each top-level op of the body, control ops
  whole) get a phase: 0 for ops that depend on no hand-off, and across
  programs a consumer's phase is its producer's plus one (C1 = 0, V1 = 1,
  C2 = 2, V2 = 3). A program's stage boundary lies before each receive that
  closes a round trip (what it receives depends on what it sent in the same
  iteration): an op's round trip is ``(phase - q) // 2`` (at least 0), q the
  phase of the program's first send (cube C1 -> 0, C2 -> 1; vector: its work
  before and in V1 -> 0, V2 -> 1), and round trip k runs at stage
  ``k * (D - 1)``, D the platform's preload depth (at least 2): C1 and V1 of
  iteration t + D - 1 are issued before C2 and V2 of iteration t, as the
  chip's kernels issue D score matmuls ahead (D = 2: "C1(i+1) before C2(i)";
  the stages between are empty). A loop-carried value's readers are moved to
  a stage no earlier than its producer's (a recurrence cannot be pipelined
  across).
* Schedule. A body with S > 1 stages becomes one loop over
  ``range(lo, hi + (S-1)*step, step)``; step t runs stage 0 for iteration t,
  stage 1 for t - step, ..., each stage guarded by ``lo <= it < hi`` (the
  first S-1 steps are the prologue, where the later stages' guards fail; the
  last S-1 the epilogue). So the AIC issues C1 of the next iteration before C2
  of the current one, and the AIVs V1 of the next before V2 of the current.
* Values across steps. A value made at stage a and read at stage b > a, and a
  loop-carried value made at stage p and read at stage q >= p, travel through
  a shift register of carried values (``b - a`` resp. ``q - p + 1`` long):
  at the end of each step the registers shift and the newest takes the value
  the stage made (or keeps its old value when the stage's guard failed). This
  is modulo variable expansion: the memory plan gives each register its own
  buffer (the ping-pong of pipelined buffers).
* Scalar work of the body (addresses, counts) is recomputed in each stage
  from that stage's iteration index; runtime checks run in the first stage.
* Slots. A channel sent at stage a and received at stage b lets its producer
  run b - a iterations ahead of its consumer, so it keeps up to b - a + 1
  tiles in flight; place_handoffs gave it ``depth`` slots (the preload depth);
  fewer is a compile-time error. (A kernel whose vector section feeds the
  cube's first matmul, such as the 950 dequant kernel's V0 -> C1, has one
  round trip more than the non-quant kernel's, so its loop has more stages,
  but no channel spans more than the preload depth.)

A loop is pipelined only when its step is a positive constant and every op in
it belongs to one program's stage; otherwise it is left as it is (still
correct: the flags order the programs either way). A GM tensor the loop
stores to outside channel spans (a core's scratch rows, such as FIA's GM
accumulator) is its program's own memory: every op of that program's loop
that reads or writes it is put in one stage (the latest of theirs), so its
accesses keep their order across iterations. (A GM tensor both sides touch
is ordered by a GM-order channel of split_cv, and a loop holding one is not
pipelined.)

Invariants
----------
* Every iteration's ops run once, in their order, on the same values: the
  results are bitwise those of the loop as written.
* Channel spans keep their flags' balance: a stage's guard holds for the
  same iterations in both programs.
"""

from __future__ import annotations

from ..errors import CompilationError
from ..ir import Block, Kernel, Op, Value, clone_block, clone_op, walk
from ..types import BOOL, F32, INDEX, UB, TileType

__all__ = ["pipeline"]


def pipeline(kernel: Kernel, platform) -> Kernel:
    progs = kernel.programs()
    if len(progs) != 2:
        return kernel
    loops = {core: _channel_loops(body) for core, body in progs.items()}
    pairs = [(loops["aic"][o], loops["aiv"][o]) for o in loops["aic"] if o in loops["aiv"]]
    channels = {ch.id: ch for ch in kernel.channels}
    for pair in pairs:
        stages = _stages(pair, max(2, int(platform.preload_depth)))
        if stages is None:
            continue
        _check_slots(pair, stages, channels)
        for (loop, block, _), core in zip(pair, ("aic", "aiv")):
            st = stages[id(loop)]
            if max(st.values(), default=0) > 0:
                # found now: an earlier loop of the same block rewritten into several ops moved it
                index = next(i for i, o in enumerate(block.ops) if o is loop)
                block.ops[index:index + 1] = _pipelined(loop, st)
    return kernel


# ------------------------------------------------------------------ which loops

def _channel_loops(block: Block) -> dict:
    """origin -> (loop, block holding it, index) for the innermost loops whose bodies hold channel spans."""
    found = {}

    def visit(b: Block):
        for i, op in enumerate(b.ops):
            if op.kind == "for":
                inner = any(o.kind == "for" and _has_spans(o) for o in walk(op.blocks[0]))
                if _has_spans(op) and not inner and _pipelinable(op):
                    found[op.attrs.get("origin", id(op))] = (op, b, i)
            for nb in op.blocks:
                visit(nb)

    visit(block)
    return found


def _has_spans(loop: Op) -> bool:
    return any(o.attrs.get("channels") for o in walk(loop.blocks[0]))


def _pipelinable(loop: Op) -> bool:
    step = loop.args[2]
    if not (isinstance(step, Value) and isinstance(step.const, int) and step.const > 0):
        return False
    for o in walk(loop.blocks[0]):
        if o.attrs.get("channels") and not o.attrs.get("handoff"):
            return False   # a span of a GM-order channel
    return True


# ------------------------------------------------------------------ the loop's own GM memory

def _gm_tensors(op: Op) -> set:
    """Ids of the GM tensors an op (with its nested ops) reads or writes through a window."""
    return {w.tensor.id for o in [op] + [x for b in op.blocks for x in walk(b)] for w in o.windows.values()}


def _memory_groups(body: Block) -> list:
    """Per scratch tensor of the body, the top-level ops that touch it (they must share a stage)."""
    groups = []
    scratch = {o.windows["window"].tensor.id for o in walk(body)
               if o.kind == "store" and not o.attrs.get("handoff")}
    for tid in scratch:
        ops = [op for op in body.ops[:-1] if tid in _gm_tensors(op)]
        if len(ops) > 1:
            groups.append(ops)
    return groups


# ------------------------------------------------------------------ stages

def _uses(op: Op):
    yield from op.operands
    for b in op.blocks:
        for inner in walk(b):
            yield from inner.operands


def _roles(op: Op):
    for o in [op] + [x for b in op.blocks for x in walk(b)]:
        yield from o.attrs.get("channels", ())


def _stages(pair, depth: int):
    """{id(loop): {id(top-level op): stage}} for both loops of a pair, or None when it cannot be pipelined.
    Round trip ``k`` of a program runs at stage ``k * (depth - 1)``: the preload depth is how many iterations
    the first round trip runs ahead of the second."""
    loops = [p[0] for p in pair]
    src_phase: dict[int, int] = {}
    phase: dict[int, int] = {}
    for _ in range(16):
        changed = False
        for loop in loops:
            body = loop.blocks[0]
            where = {}
            for op in body.ops[:-1]:
                ph = 0
                for x in _uses(op):
                    d = where.get(x.id)
                    if d is not None:
                        ph = max(ph, phase[id(d)])
                for cid, role, _ in _roles(op):
                    if role == "consume" and cid in src_phase:
                        ph = max(ph, src_phase[cid] + 1)
                if phase.get(id(op)) != ph:
                    phase[id(op)] = ph
                    changed = True
                for cid, role, _ in _roles(op):
                    if role == "produce" and src_phase.get(cid, -1) < ph:
                        src_phase[cid] = ph
                        changed = True
                for r in op.results:
                    where[r.id] = op
        if not changed:
            break
    else:
        return None
    out = {}
    for loop in loops:
        body = loop.blocks[0]
        tiles = [op for op in body.ops[:-1] if _staged(op)]
        if not tiles:
            return None
        produce = [phase[id(op)] for op in tiles if any(r == "produce" for _, r, _ in _roles(op))]
        q = min(produce, default=0)
        st = {id(op): max(0, (phase[id(op)] - q) // 2) * (depth - 1) for op in tiles}
        if not _fix_recurrences(body, st):
            return None
        _sink_receives(body, st)
        out[id(loop)] = st
    return out


def _sink_receives(body: Block, st: dict) -> None:
    """A hand-off's receive (the load of its slot, and the staged copies of what it loaded) runs at the stage
    of its earliest reader, not earlier: a tile received one round trip before its matmul reads it would be
    carried across stages in L1 / L0 (a cube that receives the dequantised V of the 950 dequant kernel at C1's
    stage, for C2 two stages later). The slot holds it meanwhile (``_check_slots`` counts the stages between
    its send and its receive). A value the loop carries stays where it is made."""
    ops = body.ops[:-1]
    maker = {r.id: op for op in ops for r in op.results}
    carried = {y.id for y in body.ops[-1].args}
    readers: dict = {}
    for op in ops:
        if id(op) in st:
            for x in _reads(op, maker):
                readers.setdefault(x.id, []).append(op)
    for op in reversed(ops):
        receive = (op.kind == "load" and op.attrs.get("handoff")) or (op.kind == "copy" and op.attrs.get("staged"))
        if not receive or id(op) not in st or any(r.id in carried for r in op.results):
            continue
        later = [st[id(u)] for r in op.results for u in readers.get(r.id, []) if u is not op]
        if later and min(later) > st[id(op)]:
            st[id(op)] = min(later)


def _staged(op: Op) -> bool:
    """Ops that get a stage: tile and sync work and control ops; pure scalars and broadcast views (expand)
    are recomputed in each stage that reads them."""
    if op.kind in ("for", "if"):
        return True
    if op.kind == "expand":
        return False
    return op.defn.category in ("tile", "sync") or (op.defn.category == "scalar" and not op.defn.pure)


def _reads(op: Op, maker: dict):
    """The values a staged op reads, looking through the recomputed ops (scalars, expands) it reads."""
    seen = set()
    stack = list(_uses(op))
    while stack:
        x = stack.pop()
        if x.id in seen:
            continue
        seen.add(x.id)
        yield x
        m = maker.get(x.id)
        if m is not None and not _staged(m):
            stack += list(_uses(m))


def _fix_recurrences(body: Block, st: dict) -> bool:
    """Readers of a carried value no earlier than the stage that makes its next value; then readers of every
    value no earlier than its maker, and the accesses of each scratch GM tensor in one stage (stages only
    grow)."""
    ops = body.ops[:-1]
    maker = {r.id: op for op in ops for r in op.results}
    carried = body.args[1:]
    ys = body.ops[-1].args
    groups = [[op for op in g if id(op) in st] for g in _memory_groups(body)]
    for _ in range(2 * len(ops) + 2):
        changed = False
        for g in groups:    # a scratch tensor's accesses in one stage: the latest of theirs
            top = max((st[id(op)] for op in g), default=0)
            for op in g:
                if st[id(op)] != top:
                    st[id(op)] = top
                    changed = True
        for op in ops:
            if id(op) not in st:
                continue
            need = st[id(op)]
            for x in _reads(op, maker):
                m = maker.get(x.id)
                if m is not None and id(m) in st:
                    need = max(need, st[id(m)])
                    continue
                for a, y in zip(carried, ys):
                    if x is a:
                        ym = maker.get(y.id)
                        if ym is not None and id(ym) in st:
                            need = max(need, st[id(ym)])
            if need != st[id(op)]:
                st[id(op)] = need
                changed = True
        if not changed:
            break
    # yields of values not made in the body (an outer value, another argument) are not supported
    for a, y in zip(carried, ys):
        if y is not a and y.id not in maker:
            return False
    return True


def _check_slots(pair, stages, channels):
    """A data channel whose send runs at stage a and whose recv runs at stage b >= a holds the tiles of
    b - a + 1 iterations at once (the producer runs b - a iterations ahead of the consumer, and the tile being
    read is one more), so it needs that many slots (the preload depth place_handoffs gave it)."""
    stage_of: dict = {}
    for loop, _, _ in pair:
        st = stages[id(loop)]
        for op in loop.blocks[0].ops:
            for cid, role, _ in _roles(op):
                if id(op) in st:
                    stage_of[(cid, role)] = st[id(op)]
    for cid in sorted({c for c, _ in stage_of}):
        ch = channels[cid]
        a, b = stage_of.get((cid, "produce")), stage_of.get((cid, "consume"))
        if ch.kind != "data" or a is None or b is None:
            continue
        need = b - a + 1
        if ch.depth < need:
            raise CompilationError(f"the loop is pipelined so that hand-off {ch.name} is sent at stage {a} and "
                                   f"received at stage {b}: it has up to {need} tiles in flight, but it has "
                                   f"{ch.depth} workspace slot(s): the preload depth exceeds the slots",
                                   pair[0][0].loc)


# ------------------------------------------------------------------ the rewrite

class _Reg:
    """A shift register of carried values: ``args[j]`` holds the value made j+1 steps ago (at the start of a
    step). ``src`` is the body value whose new value the register takes at stage ``stage``; for a carried
    value ``arg`` is the loop argument it stands for (its reads are reads of the previous iteration's value).
    A reader at stage s sees ``args[s - stage]`` (carried) or ``args[s - stage - 1]`` (a temporary)."""

    def __init__(self, src: Value, stage: int, init, arg: Value | None):
        self.src = src
        self.stage = stage
        self.init = init
        self.arg = arg
        self.length = 1 if arg is not None else 0
        self.args: list[Value] = []


def _pipelined(loop: Op, st: dict) -> list:
    body = loop.blocks[0]
    ops = body.ops[:-1]
    ys = body.ops[-1].args
    iv, carried = body.args[0], body.args[1:]
    nstages = max(st.values()) + 1
    lo, hi, step = loop.args[:3]
    inits = loop.args[3:]
    stage_of = {r.id: st[id(op)] for op in ops if id(op) in st for r in op.results}
    loc = loop.loc
    pre: list[Op] = []

    # registers: one per carried value, one per value read at a later stage than the one that makes it
    regs: dict[int, _Reg] = {}
    for a, y, init in zip(carried, ys, inits):
        regs[a.id] = _Reg(y, stage_of.get(y.id, 0) if y is not a else 0, init, a)
    maker = {r.id: op for op in ops for r in op.results}
    for op in ops:
        if id(op) not in st:
            continue
        b = st[id(op)]
        for x in _reads(op, maker):
            r = regs.get(x.id)
            if r is not None and r.arg is x:
                r.length = max(r.length, b - r.stage + 1)
            elif x.id in stage_of and stage_of[x.id] < b:
                if r is None:
                    r = regs[x.id] = _Reg(x, stage_of[x.id], _placeholder(x, pre, loc), None)
                r.length = max(r.length, b - r.stage)
    t = Value(INDEX, iv.name)
    new_args, new_inits = [t], []
    for r in regs.values():
        for j in range(r.length):
            name = r.src.name if r.arg is None else r.arg.name
            v = Value((r.arg or r.src).type, f"{name or 'v'}_{j + 1}" if r.length > 1 else name)
            r.args.append(v)
            new_args.append(v)
            new_inits.append(r.init)
    nb = Block(args=new_args)
    newest = {key: r.args[0] for key, r in regs.items()}
    for s in range(nstages):
        _stage(nb, s, ops, st, t, iv, lo, hi, step.const, regs, newest, loc)
    yields = []
    for key, r in regs.items():
        yields += [newest[key]] + r.args[:-1]
    nb.ops.append(Op("yield", yields, [], {}, (), loc, None))
    end = Op("sbin", [hi, _c(pre, (nstages - 1) * step.const, loc)], [Value(INDEX)], {"op": "add"}, (), loc, None)
    pre.append(end)
    # the loop's results: the newest slot of each carried value's register keeps the old result value (its
    # uses after the loop stay as they are); the other slots get new values
    old = {a.id: r for a, r in zip(carried, loop.results)}
    results = []
    for key, r in regs.items():
        for j, v in enumerate(r.args):
            results.append(old[key] if (j == 0 and key in old) else Value(v.type, v.name))
    new = Op("for", [lo, end.result, step, *new_inits], results, dict(loop.attrs), [nb], loc, None)
    new.attrs["stages"] = nstages
    return pre + [new]


def _stage(nb: Block, s: int, ops, st, t, iv, lo, hi, step: int, regs, newest, loc):
    """Append stage ``s`` of step ``t``: its guard and the if that runs its ops for iteration t - s*step."""
    if not any(st.get(id(op)) == s for op in ops):
        return
    it = t if s == 0 else _emit(nb, "sub", t, _c(nb.ops, s * step, loc), INDEX, loc)
    guard = _emit(nb, "and", _emit(nb, "ge", it, lo, BOOL, loc), _emit(nb, "lt", it, hi, BOOL, loc), BOOL, loc)
    arm = Block()
    vmap: dict[int, Value] = {iv.id: it}
    for key, r in regs.items():
        k = s - r.stage if r.arg is not None else s - r.stage - 1
        if 0 <= k < r.length:
            vmap[key] = r.args[k]
    maker = {r.id: op for op in ops for r in op.results}
    done = set()

    def scalar_deps(op):
        for x in _uses(op):
            m = maker.get(x.id)
            if m is not None and id(m) not in st and id(m) not in done and x.id not in vmap:
                done.add(id(m))
                scalar_deps(m)
                arm.ops.append(clone_op(m, vmap))

    for op in ops:
        if st.get(id(op)) == s:
            scalar_deps(op)
            arm.ops.append(clone_op(op, vmap, [clone_block(b, vmap) for b in op.blocks]))
    outs, keys = [], []
    for key, r in regs.items():
        if r.stage == s and r.src.id in vmap and vmap[r.src.id] is not r.src and not (r.arg is r.src):
            outs.append(vmap[r.src.id])
            keys.append(key)
    arm.ops.append(Op("yield", outs, [], {}, (), loc, None))
    other = Block(ops=[Op("yield", [newest[k] for k in keys], [], {}, (), loc, None)])
    results = [Value(v.type, v.name) for v in outs]
    nb.ops.append(Op("if", [guard], results, {"stage": s}, [arm, other], loc, None))
    for k, r in zip(keys, results):
        newest[k] = r




def _emit(nb: Block, kind: str, a, b, t, loc) -> Value:
    op = Op("sbin", [a, b], [Value(t)], {"op": kind}, (), loc, None)
    nb.ops.append(op)
    return op.result


def _c(ops: list, x: int, loc) -> Value:
    op = Op("const", [], [Value(INDEX, const=x)], {"value": x}, (), loc, None)
    ops.append(op)
    return op.result


def _placeholder(x: Value, pre: list, loc) -> Value:
    """A value of x's type to start a register with (never read: the guards skip the iterations it stands
    for)."""
    if isinstance(x.type, TileType):
        fill = 0 if not x.type.dtype.is_float else 0.0
        zero = Op("const", [], [Value(F32 if isinstance(fill, float) else INDEX, const=fill)], {"value": fill}, (),
                  loc, None)
        pre.append(zero)
        scope = "vector" if x.type.space is UB else "cube"
        op = Op("create", [zero.result], [Value(x.type, x.name)], {"nvalid": 0}, (), loc, scope)
        pre.append(op)
        return op.result
    val = 0.0 if x.type.dtype.is_float else (False if x.type.dtype.is_bool else 0)
    op = Op("const", [], [Value(x.type, const=val)], {"value": val}, (), loc, None)
    pre.append(op)
    return op.result
