"""Timing-relevant values and core-local loops: what lets the scheduler reuse a loop's timing.

Model
-----
A loop whose body holds no cross-core flag (a row-chunk loop, a loop of
vector work between two hand-offs) changes only its own core's clocks. Its
effect is a function of (a) the values it reads from outside that decide
*time* (trip counts, branch conditions, valid extents, scalar GM read
offsets, and the tile operands' extents) and (b) the core's clock state on
entry relative to the issue clock (each pipe's free time, the pending event
sets). The same inputs in the same relative state give the same relative
state on exit, the same busy cycles and the same loop results, so the
scheduler runs such a loop once per distinct key and replays it after; a
loop whose key is new is timed per iteration, each iteration keyed the same way
on what it reads (the scheduler's ``_IterationMemo``, with the group memo's
prepass).

``relevant_values(program)`` is the static slice of values that decide
time: the roots above, closed backwards through the scalar ops that compute
them and through loop-carried and branch values. Values outside it (GM
addresses, window starts) never change a duration, so two iterations that
differ only in them share a memo entry; a replayed loop's results outside
the slice are the recorded ones, which nothing timing-relevant reads.

Invariant: replaying never changes the schedule, only its cost: the clock
state is normalised at every loop entry (a pipe already free, or an event
already set, before the issue clock is moved to the issue clock; that is
neutral for every later op), whether the loop is replayed or run.
"""

from __future__ import annotations

from ...dsl.ir import Block, Value, walk

__all__ = ["relevant_values", "core_local", "free_inputs", "own_inputs"]


def _roots(op) -> list:
    out = []
    if op.kind == "for":
        out += op.args[:3]
    elif op.kind == "if":
        out.append(op.args[0])
    elif op.kind == "sload":
        out.append(op.args[1])
    elif op.kind in ("event_set", "event_wait"):
        out += op.args           # a ping-pong pair's ping picks its id
    elif op.defn.category == "tile":
        out += [v for v in op.args if not v.is_tile]
        for w in op.windows.values():
            out += [d.valid for d in w.dims]
    return [v for v in out if isinstance(v, Value)]


def relevant_values(block) -> set:
    """Ids of the values of ``block`` (a program) that decide time (see the module docstring)."""
    defs: dict = {}
    carried: dict = {}      # body arg / op result id -> [value ids it takes]
    for op in walk(block):
        for r in op.results:
            defs[r.id] = op
        if op.kind == "for":
            body = op.blocks[0]
            ys = body.ops[-1].args if body.ops and body.ops[-1].kind == "yield" else []
            for i, a in enumerate(body.args[1:]):
                src = [op.args[3 + i]] + ([ys[i]] if i < len(ys) else [])
                carried[a.id] = src
                if i < len(op.results):
                    carried[op.results[i].id] = src
        elif op.kind == "if":
            for i, r in enumerate(op.results):
                carried[r.id] = [arm.ops[-1].args[i] for arm in op.blocks
                                 if arm.ops and arm.ops[-1].kind == "yield" and i < len(arm.ops[-1].args)]
    work = [v for op in walk(block) for v in _roots(op)]
    seen: set = set()
    while work:
        v = work.pop()
        if not isinstance(v, Value) or v.id in seen:
            continue
        seen.add(v.id)
        op = defs.get(v.id)
        if op is not None and op.defn.category == "scalar":
            work += [x for x in op.args if isinstance(x, Value)]
        work += carried.get(v.id, [])
    return seen


def core_local(op) -> bool:
    """A loop with no cross-core flag anywhere in its body."""
    return not any(o.kind in ("flag_set", "flag_wait") for o in walk(op.blocks[0]))


def own_inputs(op, relevant: set) -> tuple:
    """The scalars of ``free_inputs`` that decide the loop's own time: those that reach a root inside it (its bounds
    included) through its own scalar ops, carried and branch values. The others (read only as a window start or a
    GM address inside it, relevant for what comes after) change nothing in it."""
    own = relevant_values(Block(ops=[op]))
    return tuple(x for x in free_inputs(op, relevant)[1] if x in own)


def free_inputs(op, relevant: set) -> tuple:
    """(tile ids, scalar ids) the loop reads from outside whose values decide its time."""
    inside: set = set()
    body = op.blocks[0]
    inside.update(a.id for a in body.args)
    for o in walk(body):
        inside.update(r.id for r in o.results)
        for b in o.blocks:
            inside.update(a.id for a in b.args)
    tiles, scalars = set(), set()
    for o in [op] + list(walk(body)):
        reads = o.args[3:] if o is op else o.operands
        for v in reads:
            if not isinstance(v, Value) or v.id in inside or v.const is not None:
                continue
            if v.is_tile:
                tiles.add(v.id)
            elif not v.is_tensor and v.id in relevant:
                scalars.add(v.id)
        if o is op:
            scalars.update(v.id for v in op.args[:3] if isinstance(v, Value) and v.const is None)
    return tuple(sorted(tiles)), tuple(sorted(scalars))
