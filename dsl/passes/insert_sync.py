"""insert_sync: the cross-core flags of every channel.

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
        for cid, role, end in roles:
            ch = channels[cid]
            if end == "begin":
                before.append(_flag("flag_wait", ch, "ready" if role == "consume" else "free", core, mode, op.loc))
            else:
                after.append(_flag("flag_set", ch, "ready" if role == "produce" else "free", core, mode, op.loc,
                                   _last_pipe(op, cid)))
        out += before + [op] + after
    block.ops = out
