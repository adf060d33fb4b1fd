"""Flag-carrying loops of a core group: what lets the scheduler reuse one iteration's timing for the whole group.

Model
-----
A loop that holds a cross-core flag (FIA's task loop, its pipelined S2 loop) cannot be timed per program
(``loop_memo``): its time depends on when the other cores' flags arrive. It can be timed per *group*: the AIC
and AIV programs are compiled from one source loop, so they hold a loop at the same source line (matched by
``(line, occurrence)``, ``group_loops``), and iteration i of that loop in all of them is one step of the group.
When every program of the group stands at the head of iteration i (the scheduler holds each one there, which
changes only the interleaving: the k-th flag wait still takes the k-th set), the group's state is every clock
relative to the first program's issue clock and every pending flag's arrival relative to it; the iteration's
inputs that decide time are what ``prepass`` computes. The same state and inputs give the same state at the head
of iteration i + 1, the same busy cycles and the same loop-carried values, so the step is recorded once per
distinct key and replayed after (``GroupMemo``).

``prepass(vals)`` evaluates, for one iteration, only the scalar ops whose results decide time
(``loop_memo.relevant_values``) and gathers what the scheduler's tile memo keys on (every tile op's scalar
operands and window extents), the taken branches, the parity of every ping-pong event id, each nested
flag-carrying loop's trip count and its iterations walked the same way, and each nested core-local loop's bounds
and timing-relevant inputs (``loop_memo``'s key: such a loop is a function of them and its clock state). Scalar
GM reads
are made, so an iteration's key holds the lengths it reads, not the offsets it reads them at: iterations that
differ only in addresses share a key. The loop-carried values that decide time are taken from the prepass on a
replay, the others from the record (nothing timing-relevant reads them). The prepass is a tree of steps; it runs
as the Python source ``prepass_source`` writes from the tree, the tree's own interpreter being the reference
(``compile_prepass(generated=False)``).

``compile_prepass`` of a whole program's block is ``block_memo``'s key of a block. It marks where each group loop
iteration's items lie in that key and what the iteration yields (``marked``); a block that is run keys its group
steps on those items (``StepInputs``), headed by the outside and carried tiles' extents (``head_inputs``), instead
of running each loop's own prepass again. Those items key a nested core-local loop by the inputs that decide its
own time (``loop_memo.own_inputs``), which the block key already relies on: its other inputs are keyed where
they are read. A key of that form never meets one of the loop's own prepass (it is tagged).

A loop is not memoised (``compile_prepass`` gives None) when its body reads a value the prepass cannot compute
(a scalar a tile op makes, a timing-relevant result of a nested core-local loop).

When spans are recorded (the block a trace or the critical path shows), a step's record also holds its spans
relative to the step's head, each cause named as a span of the step or as one of the spans the state held at
its head (each pipe's last span, the issue unit's cause, each pending event's and flag's setter:
``held_spans``); which of those are the same span and which ops set the pending flags join the key. A replay
makes the same spans with the same causes and puts the named spans back where the state holds them, so the
critical path and the trace are those of the interpretation. The replay leaves them as one chunk per program,
each span made when read (``spans``), which changes nothing a reader sees.

Invariant: replaying never changes the schedule, only its cost. Holding programs at an iteration head is
neutral (results do not depend on the interleaving); if the holds leave no program able to move, the loop's
memo is switched off for the launch and the programs run free, as without it.
"""

from __future__ import annotations

from collections import deque

from ...dsl.ir import Value, walk
from . import prepass_source
from .loop_memo import core_local, free_inputs, own_inputs
from .prepass_source import Fetch
from .spans import LazySpan, Replayed, ReplayedStep

__all__ = ["group_loops", "compile_prepass", "head_inputs", "StepInputs", "group_step", "Hold", "GroupMemo", "END",
           "OFF"]

#: the iteration index of a hold at a loop's exit
END = -1
#: the scheduler's answer to a hold when the loop's memo is switched off
OFF = object()


class Hold:
    """What a program yields at the head of an iteration of a group loop (or at its exit, ``i == END``)."""

    __slots__ = ("loop", "i", "key", "cur")

    def __init__(self, loop, i, key, cur):
        self.loop, self.i, self.key, self.cur = loop, i, key, cur


def _flag_loops(block) -> list:
    return [op for op in walk(block) if op.kind == "for"
            and any(o.kind in ("flag_set", "flag_wait") for o in walk(op.blocks[0]))]


def group_loops(programs: dict) -> dict:
    """id(for op) -> its group-loop name, for the flag-carrying loops every program of the group holds at the same
    source line (the n-th such loop at a line in each program; a line whose count differs is left out)."""
    if "aic" not in programs or "aiv" not in programs:
        return {}
    per = {}
    for name, block in programs.items():
        by_line: dict = {}
        for op in _flag_loops(block):
            by_line.setdefault(str(op.loc), []).append(op)
        per[name] = by_line
    out = {}
    lines = set(per["aic"]) & set(per["aiv"])
    for line in lines:
        a, v = per["aic"][line], per["aiv"][line]
        if len(a) == len(v):
            for n, (x, y) in enumerate(zip(a, v)):
                out[id(x)] = out[id(y)] = (line, n)
    return out


def _getter(x):
    if isinstance(x, Value):
        if x.const is not None:
            c = x.const
            return lambda vals: c
        i = x.id
        return lambda vals: vals[i]
    return lambda vals: x


def compile_prepass(loop, relevant: set, scalar_fn, tile_operands, scalar_src=lambda op: None,
                    generated: bool = True, marked=None):
    """(the prepass of ``loop``'s body: ``prepass(vals, blk, sub, marks=None)`` gives the iteration's key; the getters of the
    timing-relevant loop-carried values it computes, as (position, getter)), or None when the body reads a value
    the prepass cannot compute. ``scalar_fn(op)`` is the scheduler's evaluator of a scalar op, ``scalar_src(op)``
    its expression for the generated code (``prepass_source``) or None (the evaluator is called there);
    ``tile_operands(op)`` a tile op's scalar operands and window extents, in the order its tile memo keys on them.
    ``generated``: the prepass is the step tree compiled to Python source (the default), else the tree's own
    interpreter (the reference the generated code must agree with). ``loop`` may also be a whole program's block
    (``block_memo``): its key is then that of the program run from the start, and it carries nothing; its
    core-local loops that hold other loops are iterated too where they can be (keyed by their trip counts and
    iterations, not their bounds: a block's own range of work items), the innermost ones keyed by their bounds
    and the inputs that decide their own time (``loop_memo.own_inputs``: not a row offset they only address
    by). ``marked`` (a whole program's: id(for op) -> group-loop name, ``group_loops``): each iteration of such a loop
    is appended to ``marks`` (when given) at its head, in the order the program reaches them, as [name, where its
    items start and end in the key, the timing-relevant carried values it yields, in ``carried`` order]: what
    ``block_memo`` hands the scheduler as the group steps' inputs (``StepInputs``)."""
    whole = not hasattr(loop, "blocks")
    marked = marked if whole and marked else {}
    body = loop if whole else loop.blocks[0]
    known = {a.id for a in body.args}
    inside = {r.id for o in walk(body) for r in o.results} | {a.id for o in walk(body) for b in o.blocks
                                                             for a in b.args}

    def need(vs) -> bool:
        return all(not isinstance(v, Value) or v.const is not None or v.id not in inside or v.id in known
                   for v in vs)

    def build(block):
        steps = []
        for op in block.ops:
            kind, cat = op.kind, op.defn.category
            if cat == "scalar":
                if any(r.id in relevant for r in op.results):
                    if not need(op.args):
                        return None
                    steps.append((0, scalar_fn(op), op, scalar_src(op)))
                    known.update(r.id for r in op.results)
            elif kind == "for":
                got = nested(op) if not core_local(op) or (whole and _holds_loops(op)) else None
                got = got if got is not None or not core_local(op) else local(op)
                if got is None:
                    return None
                steps.append(got)
            elif kind == "if":
                if not need(op.args[:1]):
                    return None
                arms = []
                for arm in op.blocks:
                    got = build(arm)
                    if got is None:
                        return None
                    ys = arm.ops[-1].args if arm.ops and arm.ops[-1].kind == "yield" else []
                    outs = tuple((r.id, _getter(ys[j]), ys[j]) for j, r in enumerate(op.results)
                                 if r.id in relevant and j < len(ys))
                    if not need([ys[j] for j, r in enumerate(op.results) if r.id in relevant and j < len(ys)]):
                        return None
                    arms.append((got, outs))
                known.update(r.id for r in op.results if r.id in relevant)
                steps.append((2, _getter(op.args[0]), arms[0], arms[1] if len(arms) > 1 else ((), ()), op.args[0]))
            elif kind in ("event_set", "event_wait"):
                if op.args:
                    if not need(op.args[:1]):
                        return None
                    steps.append((3, _getter(op.args[0]), op.args[0]))
            elif cat == "tile":
                operands = tile_operands(op)
                if not need(operands):
                    return None
                steps.append((1, tuple(_getter(v) for v in operands), tuple(operands)))
        return tuple(steps)

    def carried(op) -> list:
        """(position, body arg, init, yield) of the loop-carried values of ``op`` that decide time."""
        b = op.blocks[0]
        ys = b.ops[-1].args if b.ops and b.ops[-1].kind == "yield" else []
        return [(j, a, op.args[3 + j], ys[j]) for j, a in enumerate(b.args[1:]) if j < len(ys)
                and (a.id in relevant or (j < len(op.results) and op.results[j].id in relevant))]

    def local(op):
        """A nested core-local loop: its bounds and timing-relevant inputs (``loop_memo``'s key, the clock state
        aside; for a whole program only those that decide its own time: ``own_inputs``), or None when a value after
        it needs its results."""
        scalars = own_inputs(op, relevant) if whole else free_inputs(op, relevant)[1]
        if any(r.id in relevant for r in op.results) or not need(op.args[:3]) or \
                any(x in inside and x not in known for x in scalars):
            return None
        return (1, tuple(_getter(v) for v in op.args[:3]) + tuple(_id_getter(x) for x in scalars),
                tuple(op.args[:3]) + tuple(Fetch(x) for x in scalars))

    def nested(op):
        """A nested loop, iterated: its trip count, then each iteration's key items."""
        carry = carried(op)
        if not need([*op.args[:3], *(init for _, _, init, _ in carry)]):
            return None
        known.add(op.blocks[0].args[0].id)
        known.update(a.id for _, a, _, _ in carry)
        inner = build(op.blocks[0])
        if inner is None or not need([y for _, _, _, y in carry]):
            return None
        outs = tuple(op.results[j].id for j, _, _, _ in carry if j < len(op.results))
        known.update(outs)
        return (4, tuple(_getter(v) for v in op.args[:3]), op.blocks[0].args[0].id,
                tuple((a.id, _getter(init), _getter(y), init, y) for _, a, init, y in carry), inner, outs,
                tuple(op.args[:3]), marked.get(id(op)))

    try:
        steps = build(body)
        if steps is None:
            return None
        carry = [] if whole else [(j, y) for j, _, _, y in carried(loop)]
        if not need([y for _, y in carry]):
            return None
    finally:     # the builders name each other (a cycle holding the scheduler's evaluators): unlinked
        del build, nested, local, carried, need
    outside, carried_tiles = ((), ()) if whole else head_inputs(loop, relevant)
    prepass = prepass_source.compile_steps(steps, outside, carried_tiles) if generated else \
        _interpreted(steps, outside, carried_tiles)
    return prepass, tuple((j, _getter(y)) for j, y in carry)


def _interpreted(steps, outside: tuple, carried_tiles: tuple):
    """``prepass(vals, blk, sub, marks=None)``: the step tree interpreted (the reference the generated code must
    agree with, ``prepass_source``)."""

    def run(block_steps, vals, out, marks):
        for st in block_steps:
            tag = st[0]
            if tag == 0:
                st[1](vals, _blk[0], _blk[1])
            elif tag == 1:
                out.append(tuple(g(vals) for g in st[1]))
            elif tag == 2:
                c = bool(st[1](vals))
                out.append(c)
                arm, outs = st[2] if c else st[3]
                run(arm, vals, out, marks)
                for rid, g, _ in outs:
                    vals[rid] = g(vals)
            elif tag == 3:
                out.append(st[1](vals) % 2)
            else:
                lo, hi, step = (int(g(vals)) for g in st[1])
                trips = range(lo, hi, step)
                out.append(len(trips))
                iv, carry, inner, outs, name = st[2], st[3], st[4], st[5], st[7]
                for a, init, *_ in carry:
                    vals[a] = init(vals)
                for i in trips:
                    vals[iv] = i
                    mark = [name, len(out), 0, ()] if name is not None and marks is not None else None
                    if mark is not None:
                        marks.append(mark)
                    run(inner, vals, out, marks)
                    now = [c[2](vals) for c in carry]
                    for c, v in zip(carry, now):
                        vals[c[0]] = v
                    if mark is not None:
                        mark[2], mark[3] = len(out), tuple(now)
                for rid, c in zip(outs, carry):
                    a = c[0]
                    vals[rid] = vals[a]

    _blk = [0, 0]

    def prepass(vals, blk, sub, marks=None):
        _blk[0], _blk[1] = blk, sub
        out = [tuple(vals.get(t) for t in outside), tuple(vals.get(t) for t in carried_tiles)]
        run(steps, vals, out, marks)
        return tuple(out)

    return prepass


def head_inputs(loop, relevant: set) -> tuple:
    """(the tiles ``loop`` reads from outside whose extents decide its time, its carried tiles): the ids whose values
    head every iteration's key."""
    return free_inputs(loop, relevant)[0], tuple(a.id for a in loop.blocks[0].args[1:] if a.is_tile)


class StepInputs:
    """A program instance's group-step inputs from its block's key (``compile_prepass(marked=...)``'s ``marks``):
    each group loop iteration's (name, start, end, its items in the key, its timing-relevant carried values), in
    the order the program reaches their heads. The program takes them in that order at its holds: an iteration of
    a loop whose memo is off is not held (passed over); a replayed step's nested iterations are not reached
    (``skip``). An iteration that is not the one expected (never, when the prepass and the program agree) ends the
    taking: the loop's own prepass keys the steps from there."""

    __slots__ = ("marks", "at")

    def __init__(self, key: tuple, marks: list):
        self.marks = [(name, start, end, key[start:end], now) for name, start, end, now in marks]
        self.at = 0

    def take(self, name, off: set):
        """The next iteration if it is one of loop ``name`` (passing over those of loops in ``off``), else None."""
        marks, at = self.marks, self.at
        while at < len(marks) and marks[at][0] != name and marks[at][0] in off:
            at += 1
        if at == len(marks) or marks[at][0] != name:
            self.marks = ()
            return None
        self.at = at + 1
        return marks[at]

    def skip(self, end: int) -> None:
        """The step just taken (ending at ``end`` in the key) was replayed: pass over the iterations inside it."""
        marks, at = self.marks, self.at
        while at < len(marks) and marks[at][1] < end:
            at += 1
        self.at = at


def _holds_loops(op) -> bool:
    return any(o.kind == "for" for o in walk(op.blocks[0]))


def _id_getter(i):
    return lambda vals: vals.get(i)


class GroupMemo:
    """The recorded steps of a launch's group loops: key -> (per program: (clock effect, flag stall, carried
    values), the pending flags relative to the first program's clock, and in record mode the step's spans), and
    the loops switched off."""

    def __init__(self):
        self.steps: dict = {}
        self.recorded: dict = {}      # the same with spans (record mode: the block a trace or critical path shows)
        self.off: set = set()


class NoTemplate(Exception):
    """A recorded span's cause is neither a span of the step nor one the state at its head holds."""


def _queues_in_order(group):
    for _, q in queues_of(group):
        for fid in sorted(f for f, dq in q.items() if dq):
            yield q[fid]


def held_spans(group, clocks, alive) -> list:
    """Every span the group's state holds in record mode (what a later span may name as its cause: each pipe's
    last span, the issue unit's cause, each pending event's and flag's setter), in a canonical order."""
    out = []
    for n in alive:
        c = clocks[n]
        out += c.last.values()
        out.append(c.issue_cause)
        for k in sorted(k for k, q in c.events.items() if q):
            out += [src for _, src in c.events[k]]
    for dq in _queues_in_order(group):
        out += [it[1] for it in dq]
    return out


def aliasing(spans: list) -> tuple:
    """Which of the held spans are the same span (part of a record-mode key)."""
    first: dict = {}
    return tuple(first.setdefault(id(s), i) if s is not None else -1 for i, s in enumerate(spans))


def flag_setters(group) -> tuple:
    return tuple(it[2] for dq in _queues_in_order(group) for it in dq)


def restore_held(group, clocks, alive, spans, setters) -> None:
    """Put ``spans`` back in the slots ``held_spans`` reads, and ``setters`` as the pending flags' set ops."""
    it = iter(spans)
    for n in alive:
        c = clocks[n]
        for p in c.last:
            c.last[p] = next(it)
        c.issue_cause = next(it)
        for k in sorted(k for k, q in c.events.items() if q):
            q = c.events[k]
            for i, (w, _) in enumerate(q):
                q[i] = (w, next(it))
    ops = iter(setters)
    for dq in _queues_in_order(group):
        for i, item in enumerate(dq):
            dq[i] = (item[0], next(it), next(ops))


def slots(old: list) -> dict:
    """id(span) -> its first slot in ``old`` (the spans held at a step's head)."""
    slot = {}
    for i, s in enumerate(old):
        if s is not None:
            slot.setdefault(id(s), i)
    return slot


def span_template(clocks, alive, lens, old: list, ref: float, now_held: list) -> tuple:
    """The spans each program made since ``lens`` (its span count at the step's head) relative to ``ref``, each
    cause named as ("n", program, index) (a span of the step) or ("o", slot) (a span held at its head, ``old``),
    and the same names for the spans held now. Raises ``NoTemplate`` for a cause that is neither.

    A replayed step inside the step (a ``spans.Replayed`` chunk) is read from its own template, its spans not made:
    row j of a chunk at index k of the step is span k + j, its cause the one its template names (a span of that
    inner step, every chunk of which lies in this step, or one held at its head); the times are the same floats
    (``chunk.ref + a``, then ``- ref``)."""
    at = {}           # id(direct span or chunk) -> (program, index of its first span in the step)
    entries = {}
    for n in alive:
        k = 0
        es = entries[n] = clocks[n].spans[lens[n]:]
        for e in es:
            at[id(e)] = (n, k)
            k += len(e.rows) if type(e) is Replayed else 1
    slot = slots(old)

    def name(s):
        if s is None:
            return None
        if type(s) is LazySpan:
            got = at.get(id(s.chunk))
            if got is not None:
                return ("n", got[0], got[1] + s.index)
        elif id(s) in at:
            return ("n", *at[id(s)])
        if id(s) in slot:
            return ("o", slot[id(s)])
        raise NoTemplate

    def inner(e, r):
        """The name of an inner chunk's cause ``r`` (its template's name)."""
        if r is None:
            return None
        if r[0] == "n":
            n, k = at[id(e.step.chunks[r[1]])]
            return ("n", n, k + r[2])
        return name(e.step.old[r[1]])

    made = {}
    for n in alive:
        rows = []
        for e in entries[n]:
            if type(e) is Replayed:
                base = e.ref
                rows += [(pipe, (base + a) - ref, (base + b) - ref, op, inner(e, r), flow)
                         for pipe, a, b, op, r, flow in e.rows]
            else:
                rows.append((e.pipe, e.start - ref, e.end - ref, e.op, name(e.cause), e.flow))
        made[n] = tuple(rows)
    return made, tuple(name(s) for s in now_held)


def replay_spans(template, clocks, alive, old: list, ref: float) -> callable:
    """Append the step's spans to each program's clock from ``template`` (``span_template``) at ``ref``, as one
    ``spans.Replayed`` chunk per program (its spans made when read); gives the function naming a span of the
    template (for the spans held after the step)."""
    made_t, _ = template
    step = ReplayedStep(made_t, old)
    for n in alive:
        c = clocks[n]
        chunk = step.chunks[n] = Replayed(step, n, made_t[n], c.role, ref)
        c.spans.append(chunk)
    return step.named


def queues_of(group) -> list:
    """Every flag queue of the group with the program index that consumes it (aic 0, aiv k at k + 1), listed once
    when the group is made."""
    return group.queues


def normalise_flags(group, clocks) -> None:
    """Move every pending flag arrival before its consumer's issue clock up to it (neutral, like
    ``CoreClock.normalise``: a wait only ever stalls to an arrival after its issue clock)."""
    for who, q in queues_of(group):
        t = clocks[who].t
        for fid, dq in q.items():
            for i, item in enumerate(dq):
                if item[0] < t:
                    dq[i] = (t, *item[1:])


def flags_relative(group, ref: float) -> tuple:
    """Per queue (``queues_of``), its pending flags sorted by id: their arrivals relative to ``ref``."""
    out = []
    for _, q in group.queues:
        got = [(fid, tuple([it[0] - ref for it in dq])) for fid, dq in q.items() if dq]
        if len(got) > 1:
            got.sort()
        out.append(tuple(got))
    return tuple(out)


def set_flags(group, rel: tuple, ref: float) -> None:
    for (_, q), items in zip(queues_of(group), rel):
        q.clear()
        for fid, whens in items:
            q[fid] = deque((ref + w, None, None) for w in whens)


def group_step(memo: GroupMemo, group, clocks: list, alive: list, held: dict, answer: list, pending: dict) -> None:
    """Every live program stands at the head of the same iteration of a group loop: close the record of the
    previous iteration, then replay this one from the memo or let it run (recording it). In record mode the
    step's spans are part of the record (their causes named relative to the spans the state holds)."""
    h0 = held[alive[0]]
    name, i = h0.loop, h0.i
    record = clocks[alive[0]].spans is not None
    steps = memo.recorded if record else memo.steps
    normalise_flags(group, clocks)
    ref = clocks[alive[0]].t
    got = pending.pop(name, None)
    if got is not None:
        key, at, snaps, stalls, lens, old = got
        done = (tuple((clocks[n].effect_since(snaps[k]), clocks[n].flag_stall - stalls[k], tuple(held[n].cur))
                      for k, n in enumerate(alive)), flags_relative(group, at))
        try:
            steps[key] = done + ((span_template(clocks, alive, lens, old, at, held_spans(group, clocks, alive)),
                                  flag_setters(group)) if record else ())
        except NoTemplate:
            pass
    if i != END:
        key = (name, tuple(alive), tuple((held[n].key, clocks[n].t - ref, clocks[n].relative_state()) for n in alive),
               flags_relative(group, ref))
        old = held_spans(group, clocks, alive) if record else None
        if record:
            key += (aliasing(old), tuple(map(id, flag_setters(group))))
        hit = steps.get(key)
        if hit is not None:
            for k, n in enumerate(alive):
                effect, stall, cur = hit[0][k]
                clocks[n].replay(effect)
                clocks[n].flag_stall += stall
                answer[n] = cur
            set_flags(group, hit[1], ref)
            if record:
                template, setters = hit[2], hit[3]
                named = replay_spans(template, clocks, alive, old, ref)
                restore_held(group, clocks, alive, [named(r) for r in template[1]], setters)
        else:
            pending[name] = (key, ref, [clocks[n].snapshot() for n in alive], [clocks[n].flag_stall for n in alive],
                             {n: len(clocks[n].spans) for n in alive} if record else None, old)
    held.clear()
    group.progress += 1
