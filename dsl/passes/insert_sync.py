"""insert_sync: the intra-core events between pipes, and the cross-core flags of every channel.

The sync model
--------------
The AIC and the two AIVs of a core group run their programs independently;
they meet only at flags (``CrossCoreSetFlag`` / ``CrossCoreWaitFlag``, mode
2 on A2/A3: AIC <-> both AIVs of its group). A flag is a counter per
receiving core: a set by the AIC raises it on both AIVs; a set by an AIV
raises the AIC's counter for that AIV, and the AIC's wait needs both AIVs'
(each AIV sets once per span). A wait blocks until its counter is above zero,
then lowers it. A counter saturates at 15: more than 15 sets outstanding on
one id is a hardware error.

Every channel (split_cv; its spans marked by place_handoffs or split_cv in
``attrs["channels"]``) gets two flags:

* ``ready`` (named after the channel, e.g. C1V1): the producer sets it after
  the last op of its span (from the pipe that op runs on: FIX after a Fixpipe
  to GM, MTE3 after a UB->GM copy); the consumer waits on it before the first
  op of its span (RAW: the slot is read only after it was written);
* ``free`` (``<name>_FREE``): the consumer sets it after its span (from the
  pipe of its last op: MTE2 once the slot was read); the producer waits on it
  before its span (WAR: a slot is overwritten only after it was read). The
  consumer's program first sets it ``depth`` times (one credit per slot), and
  the producer's program ends by waiting on it ``depth`` times, so no set is
  outstanding when the kernel ends.

A span chunk_rows moved out of an ``if``'s arm onto its chunk loop keeps its
condition (``span_guards``): its flags are put in the same arm of an ``if`` on
the same condition around the loop, so they run exactly when the span does.

Intra-core events. Inside one core the pipes (MTE2, MTE1, M, FIX, V, MTE3,
S) run in parallel, each in order. For every RAW, WAR and WAW on one memory
(an on-chip buffer of the memory plan, or a GM tensor; buffers whose
addresses overlap are one memory: the plan places a buffer where a dead one
was, and the pipes see addresses, not buffers) between ops of two
pipes, the producer's pipe sets an event (``SetFlag<HardEvent::P_C>``) after
the consumer is issued and the consumer's pipe waits for it (``WaitFlag``),
right before the consumer; the set covers every earlier op of its pipe (pipes
are in order), so a later consumer whose producers it covers needs none, and
set and wait side by side never leave a pair open across other ops (id 0
serves them all). Dependent ops on the V pipe get a ``PipeBarrier<PIPE_V>``
unless one already stands after the producer.
A control op is one step at its block's level (its waits before it, its sets
after it; its own ops are ordered inside). A loop body is also checked against
itself across the back edge: a dependency of an iteration's early op on the
previous iteration's late op gets a pair inside the body (the set right
after the last op the pair's hazards wait for, not after the pipe's last op
of the body; the wait before the consumer; id 1 + the loop's depth, so
nested loops' pairs stay apart), one set before the loop and one wait after
it, so every set meets one wait. When every hazard of such a pair is on a
buffer whose two copies the loop's iterations alternate (plan_memory's
ping-pong), the dependency is on the iteration two back: the pair's id is
``1 + depth`` on even iterations and ``4 + depth`` on odd ones (the event
ops take the loop's ``ping`` as operand and carry ``id_odd``), two sets
before the loop and two waits after it; so the next iteration's load into
the other copy need not wait for this iteration's reads. In a vector
program a loop's back-edge pairs stay open across the iterations of the
loops around it when nothing else there uses their ids: the primes move
before the outermost such loop and the drains after it, so a chunk loop's
first load waits for the same copy's last reader, not for all the vector
work between two runs of the loop. Events
change no numbers (a core's pipes run in program order in the simulator); the
Ascend C backend prints them and the CPU twin checks their pairing.

Flag ids are allocated from 0 within the hardware's 0-10 (two per channel);
a kernel that needs more is a compile-time error naming the channels. The
outstanding sets on one id never exceed ``depth`` (credits) or one (ready).

Invariants
----------
* Every ``flag_wait`` is matched by the other side's ``flag_set`` in control
  flow both programs share, the same number of times.
* Flags change no numbers: a program that ran alone in program order would
  compute the same values; they only order the programs.
"""

from __future__ import annotations

from ..errors import CompilationError
from ..ir import Block, Channel, Kernel, Op, walk

__all__ = ["insert_sync", "MAX_FLAG_ID", "MAX_OUTSTANDING"]

#: flag ids the kernels may use (the hardware's 0..15 minus the ids CANN's runtime keeps)
MAX_FLAG_ID = 10
#: sets a flag counter holds before it saturates
MAX_OUTSTANDING = 15


def insert_sync(kernel: Kernel, platform) -> Kernel:
    kernel.sync_counts = insert_events(kernel, platform)
    if not kernel.channels:
        return kernel
    _allocate_ids(kernel)
    mode = 2 if not platform.cube_to_vector_on_chip else 4
    by_id = {ch.id: ch for ch in kernel.channels}
    for core, body in kernel.programs().items():
        _wrap_spans(body, core, by_id, mode)
        head, tail = [], []
        for ch in kernel.channels:
            if ch.dst == core:   # the consumer grants one credit per slot
                head += [_flag("flag_set", ch, "free", core, mode, ch.loc, _credit_pipe(ch, body))
                         for _ in range(ch.depth)]
            if ch.src == core:   # the producer takes them back at the end
                tail += [_flag("flag_wait", ch, "free", core, mode, ch.loc) for _ in range(ch.depth)]
        body.ops = head + body.ops + tail
    return kernel


def _allocate_ids(kernel: Kernel) -> None:
    need = 2 * len(kernel.channels)
    if need > MAX_FLAG_ID + 1:
        names = ", ".join(f"{ch.name} (line {ch.loc.line if ch.loc else '?'})" for ch in kernel.channels)
        raise CompilationError(f"kernel {kernel.name!r} needs {need} cross-core flags for its {len(kernel.channels)} "
                               f"hand-offs ({names}); the hardware has {MAX_FLAG_ID + 1} (ids 0-{MAX_FLAG_ID}): "
                               f"fewer values may cross between the cube and vector sections", kernel.loc)
    next_id = 0
    for ch in sorted(kernel.channels, key=lambda c: c.seq):
        ch.flags = {"ready": next_id, "free": next_id + 1}
        next_id += 2


def _flag(kind: str, ch: Channel, which: str, core: str, mode: int, loc, pipe: str = "S") -> Op:
    name = ch.name if which == "ready" else f"{ch.name}_FREE"
    scope = "cube" if core == "aic" else "vector"
    attrs = {"id": ch.flags[which], "name": name, "mode": mode, "channel": ch.id, "which": which}
    if kind == "flag_set":
        attrs["pipe"] = pipe
    return Op(kind, [], [], attrs, (), loc, scope)


def _last_pipe(op: Op, cid: int | None = None) -> str:
    """The pipe a span's last op finishes on (its last tile op for a control op; for a chunk loop, the pipe
    of the channel's own op inside it)."""
    if cid is not None and cid in op.attrs.get("span_pipes", {}):
        return op.attrs["span_pipes"][cid]
    if op.defn.category == "tile":
        return op.pipe
    pipes = [o.pipe for o in walk(Block(ops=[op])) if o.defn.category == "tile"]
    return pipes[-1] if pipes else "S"


def _credit_pipe(ch: Channel, body: Block) -> str:
    for op in walk(body):
        for cid, role, end in op.attrs.get("channels", ()):
            if cid == ch.id and role == "consume" and end == "end":
                return _last_pipe(op, cid)
    return "S"


def _wrap_spans(block: Block, core: str, channels: dict, mode: int) -> None:
    out = []
    for op in block.ops:
        for b in op.blocks:
            _wrap_spans(b, core, channels, mode)
        roles = op.attrs.get("channels", ())
        before, after = [], []
        guards = op.attrs.get("span_guards", {})
        for cid, role, end in roles:
            ch = channels[cid]
            if end == "begin":
                flag = _flag("flag_wait", ch, "ready" if role == "consume" else "free", core, mode, op.loc)
                before.append(_guarded(flag, guards.get(cid, ())))
            else:
                flag = _flag("flag_set", ch, "ready" if role == "produce" else "free", core, mode, op.loc,
                             _last_pipe(op, cid))
                after.append(_guarded(flag, guards.get(cid, ())))
        out += before + [op] + after
    block.ops = out


def _guarded(flag: Op, guard: tuple) -> Op:
    """``flag`` run only where its span ran: inside arm ``k`` of ``if cond`` for each (cond, k) of ``guard``
    (chunk_rows' ``span_guards``, outermost first); the flag itself when the span was unconditional."""
    for cond, k in reversed(guard):
        arms = [Block(ops=[Op("yield", [], [], {}, (), flag.loc, None)]) for _ in range(2)]
        arms[k].ops.insert(0, flag)
        flag = Op("if", [cond], [], {}, arms, flag.loc, None)
    return flag


# ------------------------------------------------------------------ intra-core events

#: the event kinds the hardware has between two pipes of one core (HardEvent, src_dst)
HARD_EVENTS = {"MTE2_MTE1", "MTE1_MTE2", "MTE1_M", "M_MTE1", "MTE2_V", "V_MTE2", "MTE3_V", "V_MTE3", "M_V", "V_M",
               "MTE3_MTE1", "MTE1_MTE3", "MTE1_V", "MTE2_M", "M_MTE2", "V_MTE1", "M_FIX", "FIX_M", "MTE3_MTE2",
               "MTE2_MTE3", "S_V", "V_S", "S_MTE2", "MTE2_S", "S_MTE3", "MTE3_S", "MTE2_FIX", "FIX_MTE2", "FIX_S",
               "M_S", "FIX_MTE3", "MTE1_FIX", "FIX_MTE1"}
#: the event id of forward (same-iteration) pairs; a loop's back-edge pairs use BACK_ID + its depth, and on
#: odd iterations PARITY_ID + its depth when they alternate two copies
FORWARD_ID, BACK_ID, PARITY_ID = 0, 1, 4


def insert_events(kernel: Kernel, platform) -> dict:
    """Insert the intra-core events of every program; returns counts {"events": pairs, "barriers": n}."""
    plan = kernel.memory
    counts = {"events": 0, "barriers": 0}
    for core, body in (kernel.programs() or {"kernel": kernel.body}).items():
        scope = {"aic": "cube", "aiv": "vector"}.get(core)
        _EventBlock(plan, scope, counts).run(body)
    return counts


def _key(v, plan):
    b = plan.buffer_of.get(v.id) if plan is not None else None
    return ("buf", id(b)) if b is not None else ("val", v.id)


def _accesses(op: Op, plan):
    """(reads, writes) of one op: lists of (memory key, pipe). GM tensors are keyed by the tensor value."""
    k = op.kind
    reads, writes = [], []
    pipe = op.pipe
    if k == "load":
        reads.append((("gm", op.windows["window"].tensor.id), "MTE2"))
        writes.append((_key(op.results[0], plan), "MTE2"))
    elif k == "store":
        reads.append((_key(op.args[-1], plan), pipe))
        writes.append((("gm", op.windows["window"].tensor.id), pipe))
    elif k == "copy":
        reads.append((_key(op.args[0], plan), pipe))
        if not op.attrs.get("staged"):
            writes.append((_key(op.results[0], plan), pipe))
    elif k == "mma":
        for w in op.windows.values():
            reads.append((("gm", w.tensor.id), "MTE2"))
        if op.attrs.get("acc"):
            reads.append((_key(op.args[-1], plan), "M"))
        writes.append((_key(op.results[0], plan), "M"))
    elif k in ("ewise", "cast", "reduce", "create", "iota", "insert_rows"):
        for a in op.args:
            if a.is_tile:
                reads.append((_key(a, plan), "V"))
        writes.append((_key(op.results[0], plan), "V"))
    elif k == "gather":   # the table's elements are scalar reads; the result is a vector-side UB write
        reads += [(_key(op.args[0], plan), "V"), (("gm", op.windows["table"].tensor.id), "S")]
        writes.append((_key(op.results[0], plan), "V"))
    elif k == "sload":
        reads.append((("gm", op.args[0].id), "S"))
    return reads, writes


def _aliases(plan) -> dict:
    """Buffer key -> the keys of the buffers of its program and space whose addresses overlap it: a buffer the
    plan placed where a dead one was (or that shares an in-place address) is the same memory to the pipes."""
    out: dict = {}
    if plan is None:
        return out
    for spaces in plan.programs.values():
        for sp in spaces.values():
            bufs = sorted(sp.all, key=lambda b: b.offset)
            for i, a in enumerate(bufs):
                for b in bufs[i + 1:]:
                    if b.offset >= a.offset + a.bytes:
                        break
                    out.setdefault(("buf", id(a)), []).append(("buf", id(b)))
                    out.setdefault(("buf", id(b)), []).append(("buf", id(a)))
    return out


class _EventBlock:
    def __init__(self, plan, scope, counts):
        self.plan = plan
        self.scope = scope
        self.counts = counts
        self.depth = 0          # loops around the block being ordered (a back-edge pair's id is 1 + depth)
        self.aliases = _aliases(plan)
        self.pair_of: dict = {}  # id(event op) -> the back-edge pair it belongs to (vector programs)
        # plan_memory's ping-pong buffers: key -> the loop alternating its copies; id(loop) -> its ping value
        pongs = [b for b in plan.buffer_of.values() if b.parity is not None] if plan is not None else []
        self.alternating = {("buf", id(b)): b.parity_loop for b in pongs}
        self.ping_of = {id(b.parity_loop): b.parity for b in pongs}

    def run(self, block: Block) -> None:
        self._block(block)

    # an op's accesses, nested ops included (a control op is one compound step at its block's level)
    def _deep(self, op: Op):
        reads, writes = _accesses(op, self.plan)
        for b in op.blocks:
            for inner in walk(b):
                r, w = _accesses(inner, self.plan)
                reads += r
                writes += w
        return reads, writes

    def _block(self, block: Block) -> None:
        for op in list(block.ops):   # _loop puts the primes and drains around a loop in this list
            if op.kind == "for":
                self._loop(op, block)
            elif op.kind in ("if", "program"):
                for b in op.blocks:
                    self._block(b)
        self._forward(block)

    def _needs(self, ops, state, prev_len=0):
        """Walk ``ops`` with the hazard state; return {index: [(src pipe, dst pipe, producer index)]} and the
        V-pipe barrier positions. Producer indices below 0 are in the previous pass (a loop's previous
        iteration)."""
        last_write, readers = state
        needs, barriers = {}, {}
        for i, op in enumerate(ops):
            if op.defn.category == "sync":
                continue
            reads, writes = self._deep(op)
            if not reads and not writes:
                continue
            for key, pipe in reads:
                for k in (key, *self.aliases.get(key, ())):
                    w = last_write.get(k)
                    if w is not None:
                        self._hazard(w[0], pipe, w[1], i, needs, barriers, k)
            for key, pipe in writes:
                for k in (key, *self.aliases.get(key, ())):
                    w = last_write.get(k)
                    if w is not None:
                        self._hazard(w[0], pipe, w[1], i, needs, barriers, k)
                    for rp, ri in readers.get(k, {}).items():
                        self._hazard(rp, pipe, ri, i, needs, barriers, k)
            for key, pipe in reads:
                readers.setdefault(key, {})[pipe] = i
            for key, pipe in writes:
                last_write[key] = (pipe, i)
                readers[key] = {}
        return needs, barriers

    @staticmethod
    def _hazard(src, dst, at, i, needs, barriers, key):
        if src == dst:
            if src == "V" and at >= 0:
                barriers[i] = max(barriers.get(i, -1), at)
            return
        if src == "S" or dst == "S":
            return   # scalar reads of GM tables: inputs the kernel does not write
        needs.setdefault(i, []).append((src, dst, at, key))

    def _forward(self, block: Block) -> None:
        """Same-iteration hazards of one block: a set and its wait right before the consumer (the set is issued
        after every earlier op of its pipe, so it covers the producer and all before it; set and wait adjacent
        never leave a pair open across other ops, so one id serves all of them)."""
        ops = block.ops
        needs, barriers = self._needs(ops, ({}, {}))
        before: dict[int, list] = {}
        covered: dict[tuple, int] = {}
        fenced = -1                      # the V ops before this index are behind a PipeBarrier<PIPE_V>
        for i in range(len(ops)):
            loc = ops[i].loc
            for src, dst, at, _ in needs.get(i, []):
                if at < 0 or covered.get((src, dst), -1) >= at:
                    continue
                before.setdefault(i, []).append(self._event("event_set", src, dst, FORWARD_ID, loc))
                before[i].append(self._event("event_wait", src, dst, FORWARD_ID, loc))
                covered[(src, dst)] = i - 1
                self.counts["events"] += 1
            at = barriers.get(i)
            if at is not None and at > fenced:
                before.setdefault(i, []).append(Op("barrier", [], [], {"pipe": "V"}, (), loc, self.scope))
                fenced = i - 1
                self.counts["barriers"] += 1
        out = []
        for i, op in enumerate(ops):
            out += before.get(i, [])
            out.append(op)
        block.ops = out

    def _loop(self, loop: Op, outer: Block) -> None:
        """Back-edge hazards of a loop body: what an iteration's first ops need from the previous iteration's
        last ones. A set at the end of the producer's pipe work in the body, a wait before the consumer, one
        set before the loop (the first iteration has no predecessor) and one wait after it (the last set)."""
        body = loop.blocks[0]
        self.depth += 1
        try:
            self._block(body)
        finally:
            self.depth -= 1
        self._hoist(loop, outer)
        ops = body.ops
        state = ({}, {})
        self._needs(ops, state)                      # pass 1: the previous iteration
        last_write, readers = state
        shifted = ({k: (p, i - len(ops)) for k, (p, i) in last_write.items()},
                   {k: {p: i - len(ops) for p, i in d.items()} for k, d in readers.items()})
        needs, _ = self._needs(ops, shifted)         # pass 2: producers from pass 1 have negative indices
        pairs, single, last = {}, set(), {}
        for i, lst in needs.items():
            for src, dst, at, key in lst:
                if at < 0:
                    pairs.setdefault((src, dst), i)
                    last[(src, dst)] = max(last.get((src, dst), -1), at + len(ops))   # the producer's index
                    if not self._alternates(key, loop):
                        single.add((src, dst))
        if not pairs:
            return
        before: dict[int, list] = {}
        after: dict[int, list] = {}
        prime, drain = [], []
        ping = self._ping(loop)
        for (src, dst), i in pairs.items():
            j = last[(src, dst)]   # the set goes after the last op the hazards wait for, not the pipe's last op
            if j < i:
                continue      # the set would precede its wait in the body: a forward pair already orders them
            loc = loop.loc
            eid = BACK_ID + self.depth
            if eid > 7:
                raise CompilationError(f"loops nest {self.depth + 1} deep with cross-iteration pipe hazards: the "
                                       f"hardware has event ids 0-7 for {src}_{dst}", loop.loc)
            if (src, dst) in single or ping is None or PARITY_ID + self.depth > 7:
                ids, par = [eid], None
            else:     # every hazard is on a copy the iterations alternate: wait for the iteration two back
                ids, par = [eid, PARITY_ID + self.depth], ping
            pair = [self._event("event_wait", src, dst, eid, loc, par, ids[-1]),
                     self._event("event_set", src, dst, eid, loc, par, ids[-1])]
            before.setdefault(i, []).append(pair[0])
            after.setdefault(j, []).append(pair[1])
            ends = [self._event("event_set", src, dst, e, loc) for e in ids] + \
                [self._event("event_wait", src, dst, e, loc) for e in ids]
            if self.scope == "vector":   # the pair's ops, so an enclosing loop can keep it open (_hoist)
                for o in pair + ends:
                    self.pair_of[id(o)] = (id(loop), src, dst)
            prime += ends[:len(ids)]
            drain += ends[len(ids):]
            self.counts["events"] += 1
        out = []
        for i, op in enumerate(ops):
            out += before.get(i, [])
            out.append(op)
            out += after.get(i, [])
        y = [o for o in out if o.kind == "yield"]
        body.ops = [o for o in out if o.kind != "yield"] + y
        k = outer.ops.index(loop)
        outer.ops[k:k + 1] = prime + [loop] + drain

    def _hoist(self, loop: Op, outer: Block) -> None:
        """Keep the back-edge pairs of the loops inside ``loop``'s body open across its iterations: their primes
        move before ``loop`` and their drains after it, when nothing else in the body uses their events and
        ids. A pair's sets and waits balance within each run of its loop, so its last iteration's sets stand
        in for the next run's primes (the first iteration of the next run waits for the same-parity
        iteration of the last run, which wrote or read the same copy); a prime left inside would be a set on
        the producer's pipe after everything before it, so the next run's first load would wait for the work
        between two runs (V2 between two chunk loops). Hazards between the loop and that work are the
        body's own pairs. Vector programs only (the cube lowering adds events of its own around mmas)."""
        body = loop.blocks[0]
        found: dict = {}        # pair -> (its primes and drains: (block, op))
        uses: dict = {}         # (event, id) -> the pairs using it (None: an op of no pair)

        def scan(block: Block, top: bool):
            for op in block.ops:
                if op.kind in ("event_set", "event_wait"):
                    pair = self.pair_of.get(id(op))
                    for eid in (op.attrs["id"], op.attrs.get("id_odd")):
                        if eid is not None:
                            uses.setdefault((op.attrs["event"], eid), set()).add(pair)
                    if top and pair is not None and not op.args:
                        found.setdefault(pair, []).append((block, op))
                for b in op.blocks:
                    scan(b, top and op.kind != "for")

        scan(body, True)
        prime, drain = [], []
        for pair, ends in found.items():
            keys = {(op.attrs["event"], op.attrs["id"]) for _, op in ends}
            if any(uses[k] != {pair} for k in keys):
                continue      # another pair (or a forward event) uses the same id in this body
            for block, op in ends:
                block.ops.remove(op)
                (prime if op.kind == "event_set" else drain).append(op)
        if prime or drain:
            k = outer.ops.index(loop)
            outer.ops[k:k + 1] = prime + [loop] + drain

    def _alternates(self, key, loop: Op) -> bool:
        """Whether ``key`` is a buffer whose two copies ``loop``'s iterations alternate (plan_memory)."""
        return self.alternating.get(key) is loop

    def _ping(self, loop: Op):
        """The parity value plan_memory put at the top of ``loop``'s body when a buffer of it alternates."""
        return self.ping_of.get(id(loop))

    def _event(self, kind, src, dst, eid, loc, ping=None, odd=None) -> Op:
        """An event op; with ``ping`` its id is ``eid`` on even iterations and ``odd`` on odd ones."""
        name = f"{src}_{dst}"
        if name not in HARD_EVENTS:
            raise CompilationError(f"no hardware event orders pipe {src} before {dst} ({name})", loc)
        attrs = {"src": src, "dst": dst, "id": eid, "event": name}
        if ping is not None:
            attrs["id_odd"] = odd
        return Op(kind, [ping] if ping is not None else [], [], attrs, (), loc, self.scope)
