"""Scheduling the programs the chip runs: each core's pipes, its events, the flags between a group's cores.

Model
-----
The input is the final IR (after every pass: the AIC and AIV programs,
pipelined, with their memory plan and every flag and event insert_sync
placed) and one launch's runtime arguments. Each program is *interpreted*:
scalars are computed exactly (loop bounds, branch conditions, valid
extents; scalar GM reads read the real argument), tiles are only their valid
extents, so the time of every op follows from what it really moves.

One core = one in-order scalar issue unit feeding in-order pipe queues (MTE2,
MTE1, M, FIX, V, MTE3; S is the issue unit itself), as on the chip:

* a tile op is issued at the issue clock (which advances by one scalar op) and
  starts when its pipe is free: ``start = max(issue, pipe_free[pipe])``; it
  holds the pipe for its duration (``durations``);
* ``event_set{src, dst}`` fires when pipe src has finished its earlier work
  (its id is ``id_odd`` when its ``ping`` operand is odd: a ping-pong pair);
  ``event_wait`` holds pipe dst until the matching set fired (sets and waits
  pair in FIFO order per (src, dst, id), as the hardware counts them);
  ``barrier`` holds later work of its pipe (all pipes for PIPE_ALL) until the
  earlier work is done;
* ``flag_set{pipe}`` fires when that pipe has finished its earlier work and
  arrives ``flag_latency_cycles`` later; ``flag_wait`` blocks the issue unit
  until the flag has arrived (the AIC's wait needs both AIVs' sets, an AIV's
  wait the AIC's set: mode 2 of CrossCoreSetFlag, as the simulator counts);
* scalar ops advance the issue clock by their cost;
* an mma the memory plan streams out (``MemoryPlan.streamed_out``: only stored,
  larger than its two L0C pieces) is timed where its store is, as the Ascend C
  lowering emits it: after a FIX -> M fence, its pieces, and the drain of its
  p base tiles overlapping them (from the end of the first piece's Mmad to
  one piece's drain after the last; M held while the slower drain frees the
  two L0C copies). An ``if`` whose two arms each yield such an mma (the
  system prefix's KV step), its result stored once after it, is timed whole
  at that store, each arm's mma streamed into it (``lower_cube.defer_if``).

A core group (one AIC, two AIVs) runs its three programs as coroutines that
meet only at flags: a program runs until it waits on a flag nobody has set
yet, then the next one runs; the k-th wait on a flag takes the k-th set, so
the result does not depend on the interleaving. A round in which no program
moves is a deadlock (``ModelDeadlock``, a ``ModelError``). A block's time is the latest pipe or
issue clock of its programs.

A flag-carrying loop that every program of the group holds (FIA's task and S2 loops) is timed per group
step: the scheduler holds each program at the head of iteration i until all stand there, then replays the
step from ``group_memo`` when the group's relative state and the iteration's timing inputs were seen before
(the holds only change the interleaving). A core-local loop is replayed whole when its inputs and clock state
were seen before (``loop_memo``), else timed per iteration, an iteration replayed when its prepass key (the
group memo's) and relative clock state were (``_IterationMemo``). A block is not run at all when a block of the
launch with the same whole-program prepass key was (``block_memo``, in ``estimate``); a block that is run keys its
group steps on the items of that key (``run_group``'s ``items``). While spans are recorded, a
replayed group step's spans are made only when read (``spans``).

Blocks beyond the core count run in waves: block b runs on physical core
b mod cores after the previous block on it (plus the per-block dispatch
cost); the kernel time is the launch overhead plus the busiest core's time,
and never less than the compulsory HBM traffic at the chip's bandwidth.

Invariants: deterministic (no wall clock, no randomness); every duration is
a whole number of cycles (rounded up), so the schedule's arithmetic is exact
and a loop replay (``loop_memo``, ``group_memo``) reproduces it bit for bit; every op of every
program is visited in its program's order; a recorded span's ``cause`` names
what decided its start (its pipe, the issue clock, an event or a flag), which
is what the critical path follows.
"""

from __future__ import annotations

import math
import operator
from collections import deque

import numpy as np

from ...dsl.errors import CompilationError
from ...dsl.ir import Value, walk
from ...dsl.ops import SCALAR_BINARY
from .durations import scalar_cost, tile_cost
from .group_memo import END, OFF, GroupMemo, Hold, compile_prepass, group_loops, group_step, head_inputs
from .loop_memo import core_local, free_inputs, relevant_values
from .prepass_source import compile_scalars, compile_tuple
from .spans import Span

__all__ = ["ModelError", "ModelDeadlock", "Span", "CoreClock", "run_group", "program_prepass"]

PIPES = ("S", "MTE2", "MTE1", "M", "FIX", "V", "MTE3")


class ModelError(CompilationError):
    """The cost model cannot time this program (a deadlock, an event waited before it is ever set)."""


class ModelDeadlock(ModelError):
    """The cost model's programs of one core group wait on flags none of them will set."""


class CoreClock:
    """The issue clock and pipe clocks of one program instance (one AIC or one AIV)."""

    def __init__(self, role: str, record: bool):
        self.role = role
        self.t = 0.0
        self.free = dict.fromkeys(PIPES, 0.0)
        self.last = dict.fromkeys(PIPES, None)       # the span that last held each pipe (record mode)
        self.busy = dict.fromkeys(PIPES, 0.0)
        self.flag_stall = 0.0
        self.events: dict = {}
        self.spans: list | None = [] if record else None
        self.issue_cause = None

    def run(self, pipe: str, cycles: float, op, earliest: float = 0.0, after=None) -> float:
        """Issue ``op`` on ``pipe`` for ``cycles``, not before ``earliest`` (the previous piece ``after``)."""
        free = self.free[pipe]
        start = max(self.t, free, earliest)
        end = start + cycles
        self.free[pipe] = end
        self.busy[pipe] += cycles
        if self.spans is not None:
            if start == earliest and after is not None:
                cause = after
            elif start == free:
                cause = self.last[pipe]
            else:
                cause = self.issue_cause
            span = Span(self.role, pipe, start, end, op, cause)
            self.spans.append(span)
            self.last[pipe] = span
            return span
        return end

    def finish(self) -> float:
        return max(self.t, max(self.free.values()))

    # ---- loop replay (see loop_memo): the state relative to the issue clock, and a loop's effect on it
    def normalise(self) -> None:
        """Move pipe free times and pending event sets that lie before the issue clock up to it (neutral for
        every later op: each starts at max(issue, free) and an event only ever raises a free time)."""
        t = self.t
        free = self.free
        for p, f in free.items():
            if f < t:
                free[p] = t
        for q in self.events.values():
            if q:
                for i, (w, src) in enumerate(q):
                    if w < t:
                        q[i] = (t, src)

    def relative_state(self) -> tuple:
        """(each pipe's free time in ``PIPES`` order, the pending events sorted by key: their set times), all
        relative to the issue clock."""
        t = self.t
        free = tuple([f - t for f in self.free.values()])      # in PIPES order (the dict's, never reordered)
        ev = [(k, tuple([w - t for w, _ in q])) for k, q in self.events.items() if q]
        if len(ev) > 1:
            ev.sort()
        return free, tuple(ev)

    def snapshot(self) -> tuple:
        return self.t, dict(self.busy)

    def effect_since(self, snap) -> tuple:
        t0, busy0 = snap
        return (self.t - t0, self.relative_state(), {p: b - busy0[p] for p, b in self.busy.items() if b != busy0[p]})

    def replay(self, effect) -> None:
        dt, (free, events), dbusy = effect
        self.t += dt
        t = self.t
        self.free = dict(zip(PIPES, [t + f for f in free]))
        self.events = {k: deque([(t + w, None) for w in q]) for k, q in events}
        for p, b in dbusy.items():
            self.busy[p] += b


class _Env:
    """Runtime values: scalars as Python numbers, tiles as their valid extents (tuples of ints)."""

    __slots__ = ("vals",)

    def __init__(self):
        self.vals: dict = {}

    def __call__(self, x):
        if isinstance(x, Value):
            if x.const is not None:
                return x.const
            return self.vals[x.id]
        return x


def _sbin(fn):
    """A scalar binary op as the cost model evaluates it: a division by zero gives 0 (the simulator reports it;
    here it only decides a count that the check op before it would have rejected)."""
    def run(a, b):
        try:
            return fn(a, b)
        except ZeroDivisionError:
            return 0
    return run


class Launch:
    """What every program of one launch reads: the kernel, the target's cost table, the argument arrays."""

    def __init__(self, kernel, platform, grid: int, tensors: dict, scalars: dict, gm_rate_scale: float):
        self.kernel = kernel
        self.platform = platform
        self.cost = platform.cost
        self.grid = grid
        self.tensors = tensors          # value id -> flat numpy array (user dtype) and its shape
        self.scalars = scalars          # value id -> Python scalar
        self.gm_rate_scale = gm_rate_scale
        self._steps: dict = {}
        self.group_loops = group_loops(kernel.programs())    # id(for op) -> its name in every program
        self.group_memo = GroupMemo()

    def release(self) -> None:
        """Drop the compiled steps and the memos (the launch is timed): their steps refer back to the launch, and
        reference counting frees them now, not the next cyclic collection."""
        self._steps = {}
        self.group_memo = GroupMemo()

    def reader(self, tid):
        """``read(vals, i)``: element i of tensor ``tid`` as a Python number, as ``arr[i].item()`` gives it (a GM
        read, ``sload``). A small launch argument (a length or a block table) is read as a Python list made on the
        first read (the same numbers: ``tolist`` is ``item`` per element); an index the list refuses is read from
        the array (its own exception)."""
        got = self.tensors.get(tid)
        arr = got[0] if got is not None else None
        if not isinstance(arr, np.ndarray) or arr.ndim != 1 or arr.size > _LISTED:
            return lambda vals, i: _item_of(vals[tid][0], i)
        lst = []

        def read(vals, i):
            if not lst:
                lst.append(arr.tolist())
            try:
                return lst[0][i]
            except IndexError:
                return _item_of(arr, i)
        return read

    def steps(self, core: str) -> list:
        """The compiled steps of program ``core`` (built once per launch; their tile memos are shared)."""
        got = self._steps.get(core)
        if got is None:
            block = self.kernel.programs()[core]
            got = self._steps[core] = _compile_block(block, self, relevant_values(block))
        return got


#: the largest tensor a GM read reads as a Python list
_LISTED = 1 << 16


def _item_of(arr, i):
    x = arr[i]
    return x.item() if hasattr(x, "item") else x


class _Group:
    """The flags between the AIC and the AIVs of one core group (arrival times, FIFO per flag)."""

    def __init__(self, n_aiv: int):
        self.to_aiv = [dict() for _ in range(n_aiv)]
        self.to_aic = [dict() for _ in range(n_aiv)]
        self.progress = 0
        # every queue with the program index that consumes it (aic 0, aiv k at k + 1): ``group_memo.queues_of``
        self.queues = [(0, q) for q in self.to_aic] + [(k + 1, q) for k, q in enumerate(self.to_aiv)]


_S_SCALAR, _S_FOR, _S_IF, _S_YIELD, _S_SYNC, _S_TILE, _S_STREAM = range(7)

_SBIN = {name: _sbin(fn) for name, fn in SCALAR_BINARY.items()}


def _getter(x):
    """A function of the value table giving operand ``x`` (a constant, a Value's runtime value, or an int)."""
    if isinstance(x, Value):
        if x.const is not None:
            c = x.const
            return lambda vals: c
        return operator.itemgetter(x.id)
    return lambda vals: x


def _scalar_fn(op, launch):
    kind = op.kind
    rid = op.results[0].id if op.results else None
    g = [_getter(x) for x in op.args]
    if kind == "const":
        c = op.results[0].const
        return lambda vals, blk, sub: vals.__setitem__(rid, c)
    if kind == "sbin":
        name = op.attrs["op"]
        ga, gb = g
        f = _SBIN.get(name)
        if f is None:
            raise ModelError(f"cost model: scalar op {name!r} is not modelled", op.loc)
        return lambda vals, blk, sub: vals.__setitem__(rid, f(ga(vals), gb(vals)))
    if kind == "sun":
        name = op.attrs["op"]
        (ga,) = g
        f = {"neg": operator.neg, "not": operator.not_, "abs": abs}[name]
        return lambda vals, blk, sub: vals.__setitem__(rid, f(ga(vals)))
    if kind == "scast":
        to = op.results[0].type.dtype
        f = float if to.is_float else bool if to.is_bool else int
        (ga,) = g
        return lambda vals, blk, sub: vals.__setitem__(rid, f(ga(vals)))
    if kind == "sselect":
        gc, ga, gb = g
        return lambda vals, blk, sub: vals.__setitem__(rid, ga(vals) if gc(vals) else gb(vals))
    if kind == "sload":
        tid = op.args[0].id
        go = g[1]
        read = launch.reader(tid)

        def sload(vals, blk, sub):
            vals[rid] = read(vals, int(go(vals)))
        sload.read = read       # what the generated code calls in line (``_scalar_src``)
        return sload
    if kind == "dim":
        tid, axis = op.args[0].id, op.attrs["axis"]
        return lambda vals, blk, sub: vals.__setitem__(rid, int(vals[tid][1][axis]))
    if kind == "block_idx":
        return lambda vals, blk, sub: vals.__setitem__(rid, blk)
    if kind == "block_num":
        grid = launch.grid
        return lambda vals, blk, sub: vals.__setitem__(rid, grid)
    if kind == "subblock_idx":
        return lambda vals, blk, sub: vals.__setitem__(rid, sub)
    if kind == "check":
        return lambda vals, blk, sub: None
    raise ModelError(f"cost model: scalar op {kind!r} is not modelled", op.loc)


def _scalar_operands(op) -> list:
    return [v for v in op.args if not v.is_tile]


def _window_operands(op) -> list:
    return [d.valid for w in op.windows.values() for d in w.dims]


def _tile_operands(op) -> list:
    """What a tile op's memo keys on besides its tile operands' extents: its scalar operands, then its windows'
    valid extents (``_TileStep.resolve``'s order, which the group memo's prepass follows)."""
    return _scalar_operands(op) + _window_operands(op)


#: the scalar ops the generated code (``prepass_source``: the group memo's prepass, the scheduler's runs of scalar
#: ops) writes as Python expressions: the same operators on the same Python numbers as ``_SBIN`` / ``_scalar_fn``
#: (a division by zero gives 0 as ``_sbin``'s does: ``a // b`` raises only when ``b == 0``; ``and`` / ``or`` as
#: ``ops._logic``: boolean on a ``bool``, else bitwise; each operand is a constant or a ``vals`` lookup, so reading
#: one twice is the same)
_INLINE_SBIN = {"add": "({} + {})", "sub": "({} - {})", "mul": "({} * {})", "min": "min({}, {})",
                "max": "max({}, {})", "lt": "({} < {})", "le": "({} <= {})", "gt": "({} > {})", "ge": "({} >= {})",
                "eq": "({} == {})", "ne": "({} != {})", "xor": "({} ^ {})", "lshift": "({} << {})",
                "rshift": "({} >> {})", "floordiv": "(({0} // {1}) if {1} else 0)",
                "mod": "(({0} % {1}) if {1} else 0)", "truediv": "(({0} / {1}) if {1} else 0)",
                "and": "(({0} and {1}) if {0}.__class__ is bool else ({0} & {1}))",
                "or": "(({0} or {1}) if {0}.__class__ is bool else ({0} | {1}))"}
_INLINE_SUN = {"neg": "(-{0})", "not": "(not {0})", "abs": "abs({0})"}


def _scalar_src(op):
    """A scalar op as a Python expression of its operands (``str.format`` fields in operand order, ``{k}`` a
    constant's value or a GM read's reader), or None when the generated code is to call ``_scalar_fn``'s evaluator."""
    kind = op.kind
    if not op.results:
        return None
    if kind == "sbin":
        return _INLINE_SBIN.get(op.attrs["op"])
    if kind == "sun":
        return _INLINE_SUN.get(op.attrs["op"])
    if kind == "scast":
        to = op.results[0].type.dtype
        return "float({0})" if to.is_float else "bool({0})" if to.is_bool else "int({0})"
    if kind == "sselect":
        return "({1} if {0} else {2})"
    if kind == "const":
        return "{k}"
    if kind == "dim":
        return f"int({{0}}[1][{int(op.attrs['axis'])!r}])"
    if kind == "sload":
        return "{k}(vals, int({1}))"        # ``{k}``: the evaluator's reader (``Launch.reader``)
    if kind == "block_idx":
        return "blk"
    if kind == "subblock_idx":
        return "sub"
    return None


class _TileStep:
    """A tile op with its memo: (operand extents, valid scalars) -> (result extents, spans)."""

    __slots__ = ("op", "rid", "key", "memo", "launch")

    def __init__(self, op, launch):
        self.op = op
        self.launch = launch
        self.rid = op.results[0].id if op.results else None
        # its tile operands' extents, scalar operands and windows' valid extents, one flat tuple of fixed arity
        self.key = compile_tuple([v for v in op.args if v.is_tile] + _scalar_operands(op) + _window_operands(op))
        self.memo = {}

    def resolve(self, vals):
        key = self.key(vals)
        got = self.memo.get(key)
        if got is None:
            got = self.memo[key] = self._compute(vals)
        return got

    def _compute(self, vals):
        op, launch = self.op, self.launch
        env = _Env()
        env.vals = vals

        def ext_of(v):
            return vals[v.id]

        def window_ext(w):
            return tuple(int(env(d.valid)) for d in w.dims)

        ext = tuple(int(env(e)) for e in op.defn.valid(op, ext_of)) if self.rid is not None else None
        if self.rid is not None:
            vals[self.rid] = ext       # tile_cost reads the result's extents
        pieces = []
        for p in tile_cost(op, ext_of, window_ext, launch.cost):
            cycles = p.cycles * launch.gm_rate_scale if p.pipe == "MTE2" else p.cycles
            cycles = math.ceil(cycles - 1e-9)       # whole cycles: the schedule's arithmetic is exact
            pieces.append((p.pipe, cycles, p.overlap))
        return ext, tuple(pieces)


def _held_mmas(block, launch) -> tuple[dict, set]:
    """(held, deferred) of ``block``'s matmuls that the memory plan streams out of L0C at their one store
    (``MemoryPlan.streamed_out``): the chip computes such an mma piece by piece where its store is, so the mma
    (``deferred``) is timed at the store (``held``: id(store) -> (mma, (base_m, base_n))). An ``if`` whose arms
    each yield such an mma (the system prefix's KV step: the prefix's keys or the batch's own), its result
    stored once after it, is timed whole at that store, each arm's mma streamed into it, as the Ascend C
    lowering emits it (``lower_cube.defer_if``): held[id(store)] = (the if, None)."""
    plan = launch.kernel.memory
    streamed = plan.streamed_out if plan is not None else {}
    held, deferred = {}, set()
    if not streamed:
        return held, deferred
    for i, op in enumerate(block.ops):
        if op.kind == "mma" and op.results[0].id in streamed:
            rid = op.results[0].id
        elif op.kind == "if" and len(op.results) == 1 and len(op.blocks) == 2 and \
                all(_arm_stream(arm, streamed) is not None for arm in op.blocks):
            rid = op.results[0].id
        else:
            continue
        stores = [o for o in block.ops[i + 1:] if any(a.id == rid for a in o.args)]
        if len(stores) == 1 and stores[0].kind == "store" and stores[0].args[0].id == rid:
            held[id(stores[0])] = (op, streamed.get(rid))
            deferred.add(id(op))
    return held, deferred


def _arm_stream(arm, streamed: dict):
    """The mma of an if's ``arm`` that makes the value the arm yields, when the plan streams it out, else None."""
    y = arm.ops[-1]
    mma = y.args[0].owner if y.kind == "yield" and y.args else None
    ok = mma is not None and mma.kind == "mma" and any(o is mma for o in arm.ops) and mma.results[0].id in streamed
    return mma if ok else None


class _IterationMemo:
    """The per-iteration memo of a core-local loop (``loop_memo``): a loop whose whole-loop key missed (its
    bounds or inputs are new: a block's own task range, a row loop starting at the task's first row) is timed
    per iteration, keyed, as a group loop's step is (``group_memo``), on what the iteration's prepass computes
    (the lengths and extents that decide its time, not the offsets it reads them at) and the core's clock state
    relative to its issue clock. The prepass is compiled on the loop's first use (None when the body reads a
    value it cannot compute); a loop whose lookups keep missing (fewer than one in eight hit after 256) stops
    looking up. Either way only the model's speed changes, never its result."""

    __slots__ = ("op", "launch", "relevant", "compiled", "prepass", "carry", "steps", "tries", "hits")

    def __init__(self, op, launch, relevant: set):
        self.op, self.launch, self.relevant = op, launch, relevant
        self.compiled = False
        self.prepass = self.carry = None
        self.steps: dict = {}
        self.tries = self.hits = 0

    def ready(self) -> bool:
        """Whether iterations are to be looked up (compiling the prepass the first time)."""
        if not self.compiled:
            self.compiled = True
            got = _prepass_of(self.op, self.launch, self.relevant)
            if got is not None:
                self.prepass, self.carry = got
        if self.prepass is not None and self.tries >= 256 and self.hits * 8 < self.tries:
            self.prepass = None
        return self.prepass is not None


def _prepass_of(op, launch, relevant: set, marked=None):
    """``group_memo.compile_prepass`` of loop ``op`` with the scheduler's scalar evaluator and tile-op keys."""
    return compile_prepass(op, relevant, lambda o: _scalar_fn(o, launch), _tile_operands, _scalar_src, marked=marked)


def program_prepass(launch: Launch, block):
    """The whole-program prepass of a program's block (``block_memo``'s key, its group loops marked), or None."""
    return _prepass_of(block, launch, relevant_values(block), launch.group_loops)


def _group_loop(op, launch, relevant: set):
    """(name, prepass, carried getters, (outside tiles, carried tiles): ``head_inputs``) of a group loop
    (``group_memo``), or None."""
    name = launch.group_loops.get(id(op))
    if name is None:
        return None
    got = _prepass_of(op, launch, relevant)
    return None if got is None else (name, *got, head_inputs(op, relevant))


def _compile_block(block, launch, relevant: set, into=None) -> list:
    """The steps of ``block``. ``into``: (store, the if's result id) when ``block`` is an arm of an if timed at
    its result's store (``_held_mmas``): the arm's streamed mma goes out through that store."""
    steps = []
    held, deferred = _held_mmas(block, launch)
    streamed = launch.kernel.memory.streamed_out if into is not None else {}
    arm_mma = _arm_stream(block, streamed) if into is not None else None
    for op in block.ops:
        kind = op.kind
        cat = op.defn.category
        if id(op) in deferred:
            continue       # timed at its store (below)
        if op is arm_mma:
            store, rid = into
            steps.append((_S_STREAM, _TileStep(op, launch), _TileStep(store, launch), streamed[op.results[0].id],
                          rid))
            continue
        if id(op) in held:
            mma, bases = held[id(op)]
            if mma.kind == "if":
                arms = [_compile_block(arm, launch, relevant, (op, mma.results[0].id)) for arm in mma.blocks]
                steps.append((_S_IF, _getter(mma.args[0]), arms[0], arms[1], (mma.results[0].id,)))
            else:
                steps.append((_S_STREAM, _TileStep(mma, launch), _TileStep(op, launch), bases, None))
            continue
        if cat == "scalar":
            cycles = math.ceil(scalar_cost(op, launch.cost))
            if steps and steps[-1][0] == _S_SCALAR:      # a run of scalar ops: one step (see _scalar_run)
                steps[-1][1].append(op)
                steps[-1][2].append(cycles)
            else:
                steps.append([_S_SCALAR, [op], [cycles]])
        elif kind == "for":
            body = op.blocks[0]
            iv, *carried = body.args
            memo = (*free_inputs(op, relevant), {}, _IterationMemo(op, launch, relevant)) if core_local(op) \
                else None
            steps.append((_S_FOR, tuple(_getter(x) for x in op.args[:3]), iv.id, tuple(a.id for a in carried),
                          tuple(_getter(x) for x in op.args[3:]), _compile_block(body, launch, relevant),
                          tuple(r.id for r in op.results), memo, _group_loop(op, launch, relevant)))
        elif kind == "if":
            steps.append((_S_IF, _getter(op.args[0]), _compile_block(op.blocks[0], launch, relevant),
                          _compile_block(op.blocks[1], launch, relevant) if len(op.blocks) > 1 else None,
                          tuple(r.id for r in op.results)))
        elif kind == "yield":
            steps.append((_S_YIELD, tuple(_getter(x) for x in op.args)))
        elif cat == "sync":
            a = op.attrs
            steps.append((_S_SYNC, op, _getter(op.args[0]) if op.args else None, kind == "flag_wait",
                          (a.get("src"), a.get("dst"), a.get("id")), (a.get("src"), a.get("dst"), a.get("id_odd"))))
        else:
            steps.append((_S_TILE, _TileStep(op, launch)))
    return [_scalar_run(st, launch) if st[0] == _S_SCALAR else st for st in steps]


def _scalar_run(st, launch) -> tuple:
    """A run of scalar ops as one step: (``_S_SCALAR``, one generated function evaluating them in order
    (``prepass_source.compile_scalars``), their summed cycles). The issue clock then moves once by the sum: the
    same float (whole cycles, exact), and no scalar op reads the clock."""
    _, ops, cycles = st
    ops_run = [op for op in ops if op.kind != "check"]      # a check's evaluator does nothing
    fn = compile_scalars([(0, _scalar_fn(op, launch), op, _scalar_src(op)) for op in ops_run]) if ops_run \
        else (lambda vals, blk, sub: None)
    return (_S_SCALAR, fn, sum(cycles))


def _program_gen(launch: Launch, steps: list, role: str, sub: int, blk: int, group: _Group, clock: CoreClock,
                 items=None):
    """Interpret one program on ``clock``; yields when it waits on a flag that has not been set yet. ``items``:
    its group steps' inputs from the block's key (``group_memo.StepInputs``), taken at the holds instead of running
    the loop's prepass, or None."""
    vals: dict = {}
    for vid, arr in launch.tensors.items():
        vals[vid] = arr
    vals.update(launch.scalars)
    cost = launch.cost
    loop_cycles = cost.scalar_op_cycles
    event_latency, flag_latency, barrier_cycles = cost.event_latency_cycles, cost.flag_latency_cycles, \
        cost.barrier_cycles      # the cost table's entries, read once (each read is a lookup by name)
    n_aiv = len(group.to_aiv)
    record = clock.spans is not None
    gmemo = launch.group_memo

    def run_steps(steps):
        for st in steps:
            tag = st[0]
            if tag == _S_SCALAR:
                st[1](vals, blk, sub)
                clock.t += st[2]
            elif tag == _S_TILE:
                step = st[1]
                ext, pieces = step.resolve(vals)
                if step.rid is not None:
                    vals[step.rid] = ext
                clock.t += loop_cycles
                _run_pieces(step.op, pieces)
            elif tag == _S_STREAM:
                _streamed_out(st[1], st[2], st[3], st[4])
            elif tag == _S_FOR:
                glo, ghi, gstep = st[1]
                iv, carried, inits, body, results, memo = st[2], st[3], st[4], st[5], st[6], st[7]
                clock.normalise()
                key = None
                if memo is not None and not record:
                    key = (tuple(vals.get(i) for i in memo[0]), tuple(vals.get(i) for i in memo[1]),
                           clock.relative_state())
                    hit = memo[2].get(key)
                    if hit is not None:
                        clock.replay(hit[0])
                        for r, v in zip(results, hit[1]):
                            vals[r] = v
                        continue
                    start = clock.snapshot()
                cur = [g(vals) for g in inits]
                gm = st[8]
                hold = gm is not None and gm[0] not in gmemo.off
                per = memo[3] if key is not None and memo[3].ready() else None
                for i in range(int(glo(vals)), int(ghi(vals)), int(gstep(vals))):
                    vals[iv] = i
                    for a, v in zip(carried, cur):
                        vals[a] = v
                    if per is not None:       # an iteration seen before (_IterationMemo) is replayed
                        clock.normalise()
                        ikey = (per.prepass(vals, blk, sub), clock.relative_state())
                        per.tries += 1
                        got = per.steps.get(ikey)
                        if got is not None:
                            per.hits += 1
                            clock.replay(got[0])
                            cur = list(got[1])
                            for j, g in per.carry:
                                cur[j] = g(vals)
                            continue
                        isnap = clock.snapshot()
                        cur = yield from run_steps(body)
                        clock.t += loop_cycles
                        per.steps[ikey] = (clock.effect_since(isnap), tuple(cur))
                        continue
                    if hold:
                        got = yield from _hold(gm, i, cur)
                        if got is OFF:
                            hold = False
                        elif got is not None:        # the group replayed this iteration: its carried values
                            cur = got
                            continue
                    cur = yield from run_steps(body)
                    clock.t += loop_cycles
                if hold:
                    yield from _hold(gm, END, cur)
                for r, v in zip(results, cur):
                    vals[r] = v
                if key is not None:
                    memo[2][key] = (clock.effect_since(start), tuple(cur))
            elif tag == _S_IF:
                clock.t += loop_cycles
                arm = st[2] if st[1](vals) else st[3]
                if arm is not None:
                    got = yield from run_steps(arm)
                    for r, v in zip(st[4], got):
                        vals[r] = v
            elif tag == _S_YIELD:
                return [g(vals) for g in st[1]]
            else:
                if st[3]:
                    yield from _flag_wait(st[1])
                else:
                    _sync(st[1], st[2], st[4], st[5])
        return []

    def _hold(gm, i, cur):
        """Stand at the head of iteration ``i`` of a group loop (``END``: its exit) until the scheduler answers:
        None (run it), ``OFF`` (run free from now on) or, for a step the scheduler replayed on the clocks, the
        recorded loop-carried values (those that decide time the iteration's own). The iteration's key is its
        prepass's, or the items the block's key gave it (``items``), headed by the outside and carried tiles'
        extents (a key of its own form: the two never meet)."""
        name = gm[0]
        if name in gmemo.off:
            return OFF
        clock.normalise()
        given = items.take(name, gmemo.off) if items is not None and i != END else None
        if given is not None:
            outside, carried_tiles = gm[3]
            key = ("block", tuple([vals.get(t) for t in outside]), tuple([vals.get(t) for t in carried_tiles]),
                   given[3])
        else:
            key = gm[1](vals, blk, sub) if i != END else None
        got = yield Hold(name, i, key, cur)
        if got is None or got is OFF:
            return got
        cur = list(got)
        if given is not None:
            items.skip(given[2])
            for (j, _), x in zip(gm[2], given[4]):
                cur[j] = x
        else:
            for j, g in gm[2]:
                cur[j] = g(vals)
        return cur

    def _run_pieces(op, pieces, m_fence: bool = False):
        """Run an op's pieces in order, each streamed piece letting the next start after 1/overlap of it
        (``m_fence``: the M piece also waits for the FIX pipe). Returns (the last span or None, the M piece's
        start and cycles)."""
        earliest, prev, m_start, m_cycles = 0.0, None, 0.0, 0
        for pipe, cycles, overlap in pieces:
            if m_fence and pipe == "M":
                earliest = max(earliest, clock.free["FIX"])
            got = clock.run(pipe, cycles, op, earliest, prev)
            if record:
                prev, end = got, got.end
            else:
                end = got
            if pipe == "M":
                m_start, m_cycles = end - cycles, cycles
            earliest = end - cycles + -(-cycles // overlap) if overlap > 1 else end
        return prev, m_start, m_cycles

    def _streamed_out(mstep, sstep, bases, alias):
        """An mma streamed out of L0C at its store, as the Ascend C lowering emits it: a FIX -> M fence (an
        earlier Fixpipe may still read L0C), the mma's pieces, and each (base_m, base_n) piece Fixpiped out
        when done while the next is computed in the other L0C copy. The drain starts after the first of the
        p pieces and ends no sooner than one piece's drain after the last Mmad; with p > 2 the Mmad of piece
        i + 2 waits for the drain of piece i (two copies), which holds M when the drain is the slower.
        ``alias``: the id of the if result the store writes (an arm's mma, ``_held_mmas``), or None."""
        ext, pieces = mstep.resolve(vals)
        vals[mstep.rid] = ext
        if alias is not None:
            vals[alias] = ext
        clock.t += loop_cycles
        prev, m_start, m_cycles = _run_pieces(mstep.op, pieces, m_fence=True)
        m_end = m_start + m_cycles
        _, fix = sstep.resolve(vals)
        clock.t += loop_cycles
        drain = sum(c for pipe, c, _ in fix)
        rows, cols = ext[:2]
        p = -(-rows // bases[0]) * -(-cols // bases[1])
        start = max(clock.t, clock.free["FIX"], m_start + -(-m_cycles // p))
        stop = max(start + drain, m_end + -(-drain // p))
        clock.run("FIX", stop - start, sstep.op, start, prev)
        clock.busy["FIX"] -= stop - start - drain     # waiting for the last Mmad is not drain work
        if p > 2:
            clock.free["M"] = max(clock.free["M"], start + -(-(p - 2) * drain // p) + -(-m_cycles // p))

    def _sync(op, ping, even, odd):
        """A sync op other than a flag wait (``even`` / ``odd``: an event's (src, dst, id) for an even and an odd
        ``ping``)."""
        kind = op.kind
        a = op.attrs
        if kind == "event_set":
            key = odd if ping is not None and ping(vals) % 2 else even
            when = max(clock.t, clock.free[a["src"]]) + event_latency
            clock.events.setdefault(key, deque()).append((when, clock.last[a["src"]]))
        elif kind == "event_wait":
            key = odd if ping is not None and ping(vals) % 2 else even
            q = clock.events.get(key)
            if not q:
                raise ModelError(f"cost model: event {a['src']}->{a['dst']} id {key[2]} is waited before it is "
                                 f"set in program order ({role})", op.loc)
            when, src_span = q.popleft()
            dst = a["dst"]
            if when > clock.free[dst]:
                clock.free[dst] = when
                if record:
                    clock.last[dst] = src_span
        elif kind == "barrier":
            pipe = a["pipe"]
            if pipe == "ALL":
                clock.t = clock.finish() + barrier_cycles
            else:
                clock.free[pipe] = max(clock.free[pipe], clock.t) + barrier_cycles
        elif kind == "flag_set":
            pipe = a["pipe"]
            when = max(clock.t, clock.free[pipe]) + flag_latency
            item = (when, clock.last[pipe], op)
            fid = a["id"]
            if role == "aic":
                for k in range(n_aiv):
                    group.to_aiv[k].setdefault(fid, deque()).append(item)
            else:
                group.to_aic[sub].setdefault(fid, deque()).append(item)
            group.progress += 1
        else:
            raise ModelError(f"cost model: sync op {kind!r} is not modelled", op.loc)

    def _flag_wait(op):
        """A flag wait: yields while the flag has not been set; then stalls the issue unit to its arrival."""
        fid = op.attrs["id"]
        queues = group.to_aic if role == "aic" else [group.to_aiv[sub]]
        while any(not q.get(fid) for q in queues):
            yield op
        arrivals = [q[fid].popleft() for q in queues]
        when, src_span, set_op = max(arrivals, key=lambda x: x[0])
        group.progress += 1
        if when > clock.t:
            waited_from = clock.t
            clock.flag_stall += when - clock.t
            clock.t = when
            if record:       # the stall as a span of the issue unit, its cause the set on the other core
                clock.issue_cause = src_span
                clock.spans.append(Span(role, "S", waited_from, when, op, src_span, flow=set_op))

    try:
        return (yield from run_steps(steps))
    finally:     # the nested functions name each other (a cycle): unlinked, what they hold is freed now
        del run_steps, _hold, _run_pieces, _streamed_out, _sync, _flag_wait


def run_group(launch: Launch, blk: int, record: bool = False, items=None) -> tuple:
    """Run core group (or single core) ``blk`` of the launch: (cycles, [CoreClock per program instance]).
    ``items``: per program instance (aic, then each aiv) its group steps' inputs from the block's key, or None
    (``_program_gen``)."""
    programs = launch.kernel.programs()
    n_aiv = launch.platform.cv_ratio if "aic" in programs else 1
    group = _Group(n_aiv if "aiv" in programs else 0)
    runs = []
    if "aic" in programs:
        clock = CoreClock("aic", record)
        runs.append((clock, _program_gen(launch, launch.steps("aic"), "aic", 0, blk, group, clock,
                                         items[len(runs)] if items else None)))
    if "aiv" in programs:
        for k in range(n_aiv):
            clock = CoreClock(f"aiv{k}", record)
            runs.append((clock, _program_gen(launch, launch.steps("aiv"), f"aiv{k}", k, blk, group, clock,
                                             items[len(runs)] if items else None)))
    clocks = [c for c, _ in runs]
    _drive(launch, group, runs, blk)
    return max(c.finish() for c in clocks), clocks


def _drive(launch: Launch, group: _Group, runs: list, blk: int) -> None:
    """Run the group's programs as coroutines until all are done: each runs until it waits on a flag nobody has
    set yet or stands at the head of a group loop's iteration (``group_memo``); when all stand at the same one,
    the step is replayed from the memo or run and recorded. A round in which nothing moves is a deadlock, unless
    programs are held: then their loops' memos are switched off and they run free."""
    memo = launch.group_memo
    clocks = [c for c, _ in runs]
    alive = list(range(len(runs)))
    answer = [None] * len(runs)
    held: dict = {}
    waiting: dict = {}
    pending: dict = {}
    while alive:
        before = group.progress
        for n in [n for n in alive if n not in held]:
            try:
                got = runs[n][1].send(answer[n])
            except StopIteration:
                alive.remove(n)
                waiting.pop(n, None)
                group.progress += 1
                continue
            answer[n] = None
            if isinstance(got, Hold):
                held[n] = got
                waiting.pop(n, None)
                group.progress += 1
            else:
                waiting[n] = got
        if alive and len(held) == len(alive) and len({(h.loop, h.i) for h in held.values()}) == 1:
            group_step(memo, group, clocks, alive, held, answer, pending)
        elif alive and group.progress == before:
            if not held:
                sites = "; ".join(f"{clocks[n].role} waits on flag {op.attrs.get('name')} (id {op.attrs.get('id')}) "
                                  f"at {op.loc}" for n, op in waiting.items())
                raise ModelDeadlock(f"cost model: deadlock in core group {blk}: {sites}")
            for n, h in held.items():           # the holds stopped the group: these loops run free
                memo.off.add(h.loop)
                pending.pop(h.loop, None)
                answer[n] = OFF
            held.clear()
            group.progress += 1


def tensors_of(kernel, args: list, grid: int) -> tuple:
    """The launch's GM tensors (value id -> (flat array, shape)) and scalars (value id -> number). The model reads
    a tensor's values only at a scalar GM read (``sload``): the workspace is filled (NaN) only when a program
    reads it so, else only its shape is read."""
    from ..launch import workspace_views

    tensors, scalars = {}, {}
    params = [p for p in kernel.params if p.kind != "constexpr"]
    user = [p for p in params if p.kind != "workspace"]
    values = dict(zip([p.name for p in user], args))
    read = {op.args[0].id for block in kernel.programs().values() for op in walk(block) if op.kind == "sload"}
    ws_ids = {v.id for p, v in zip(params, kernel.args) if p.kind == "workspace"}
    ws = iter(workspace_views(kernel, grid, fill=bool(read & ws_ids)))
    for p, v in zip(params, kernel.args):
        if p.kind == "workspace":
            arr = next(ws)
            tensors[v.id] = (arr, arr.shape)
        elif p.kind == "tensor":
            arr = np.asarray(values[p.name])
            tensors[v.id] = (arr.reshape(-1), arr.shape)
        else:
            x = values[p.name]
            scalars[v.id] = x.item() if hasattr(x, "item") else x
    return tensors, scalars
