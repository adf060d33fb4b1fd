"""place_handoffs: every data channel gets its slots, and its send/recv become slot traffic.

Model
-----
A data channel (split_cv) carries one tile per execution of its send. On
A2/A3 (``cube_to_vector_on_chip`` false) the tile travels through the GM
workspace: the producer writes it into a slot (Fixpipe L0C->GM, or MTE3
UB->GM) and the consumer reads it from there (MTE2 GM->UB or GM->L1). On the
950 the same slots model the on-chip destination (Fixpipe L0C->UB, MTE3
UB->L1), except for a tile the kernel marked ``through_gm``, whose channel
takes the GM route there too (split_cv records it); the route is recorded
for the backends and the cost model.

* Slots. A channel whose send runs inside a loop gets ``preload_depth`` slots
  (the platform table's: 2 on A2/A3, as the FIA kernel's PRELOAD_NUM); the
  k-th execution of the loop body uses slot ``k % depth`` (k counted from the
  loop's start: ``(iv - lo) // step``). A channel outside loops has one slot.
  A slot holds the tile at its full capacity (rows x columns, as the producer
  holds it); an AIV of a row-split tile writes or reads its rows of it.
* Workspace. Each core group owns ``workspace_bytes`` of GM: the GM channels'
  slot arrays one after the other, each starting at a multiple of 512 bytes.
  The 950's on-chip channels follow in the simulator's slot area (on the chip
  they are buffers of the receiving core, which plan_memory places). The
  kernel gets one tensor argument per channel, a typed flat view of one
  allocation of ``groups * slot_area_bytes`` (``Param.kind == "workspace"``;
  the launcher allocates it and passes the views), and its slot of group g
  starts at element ``(g * slot_area_bytes + offset) / itemsize + slot *
  rows * cols``.
* Lowering. ``send(tile, row_offset)`` becomes a ``store`` of the tile into
  its slot's rows from ``row_offset`` (by AIV 0 alone for a tile both AIVs
  hold); ``recv(row_offset, *valid)`` a ``load`` of those rows with the given
  valid extents. Both are marked as the one-op span of their channel
  (``attrs["channels"]``), which insert_sync wraps in flags, and carry the
  channel's route (``attrs["route"]``: "gm" or "onchip"), which the cost model
  times them by.
* Names. Channels are named as the FIA kernel names its flags: the producing
  and consuming sections, a side's section number growing each time it
  receives after having sent (C1V1: cube section 1 to vector section 1, then
  V1C2, C2V2 in the attention loop).

Invariants
----------
* No send or recv remains; every slot access stays inside its channel's slot
  (the window bounds are the slot's rows and columns).
* ``kernel.workspace_bytes`` is exactly the GM one core group's slots need
  (on the 950 only ``through_gm`` channels' slots: its other hand-offs stay
  on chip).
"""

from __future__ import annotations

from dataclasses import replace

from ..ir import Block, Channel, Kernel, Op, Param, Value, WDim, Window
from ..shapes import ValidExtents
from ..types import BOOL, INDEX, TensorType
from .simplify import simplify_block

__all__ = ["place_handoffs", "SLOT_ALIGN"]

#: byte alignment of each channel's slot array in the workspace
SLOT_ALIGN = 512


def place_handoffs(kernel: Kernel, platform) -> Kernel:
    if not kernel.channels:
        return kernel
    progs = kernel.programs()
    _name_channels(kernel)
    depth = max(1, int(platform.preload_depth))
    loops = {}
    for core, body in progs.items():
        _find_loops(body, None, loops)
    params, args = list(kernel.params), list(kernel.args)
    ws_values: dict[int, Value] = {}
    data = [ch for ch in kernel.channels if ch.kind == "data"]
    for ch in data:
        ch.depth = depth if loops.get(ch.id) is not None else 1
        ch.route = ch.route or ("onchip" if platform.cube_to_vector_on_chip else "gm")
        ch.slot_bytes = ch.tile.nbytes
    offset = 0
    for route in ("gm", "onchip"):     # the GM workspace first, then the modelled on-chip slots
        if route == "onchip":
            gm_bytes = offset
        for ch in data:
            if ch.route == route:
                ch.offset = offset
                offset += -(-ch.depth * ch.slot_bytes // SLOT_ALIGN) * SLOT_ALIGN
    for ch in data:
        v = Value(TensorType(ch.tile.dtype, 1), f"ws_{ch.name.lower()}")
        params.append(Param(v.name, "workspace", v.type))
        args.append(v)
        ws_values[ch.id] = v
    out = replace(kernel, params=params, args=args, workspace_bytes=gm_bytes, slot_area_bytes=offset)
    ve = ValidExtents.of(out)
    for core, body in progs.items():
        _lower(body, out, ws_values, ve, None)
        simplify_block(body)
    return out


def _find_loops(block: Block, loop: Op | None, found: dict):
    """channel id -> the innermost loop around its send/recv (None outside loops)."""
    for op in block.ops:
        if op.kind in ("send", "recv"):
            found[op.attrs["channel"]] = loop
        for b in op.blocks:
            _find_loops(b, op if op.kind == "for" else loop, found)


def _name_channels(kernel: Kernel):
    """C1V1 / V1C2 / C2V2 ...: the producing and consuming sections in program order (see the docstring)."""
    section = {"aic": 1, "aiv": 1}
    sent = {"aic": False, "aiv": False}
    letter = {"aic": "C", "aiv": "V"}
    names = set()
    for ch in sorted(kernel.channels, key=lambda c: c.seq):
        src, dst = ch.src, ch.dst
        if sent[dst]:
            section[dst] += 1
            sent[dst] = False
        sent[src] = True
        base = f"{letter[src]}{section[src]}{letter[dst]}{section[dst]}"
        name, k = base, 2
        while name in names:
            name, k = f"{base}_{k}", k + 1
        names.add(name)
        ch.name = name


def _lower(block: Block, kernel: Kernel, ws: dict, ve: ValidExtents, loop: Op | None):
    out = []
    for op in block.ops:
        if op.kind in ("send", "recv"):
            ch = kernel.channels[op.attrs["channel"]]
            out += _lowered(op, ch, kernel, ws[ch.id], ve, loop)
            continue
        for b in op.blocks:
            _lower(b, kernel, ws, ve, op if op.kind == "for" else loop)
        out.append(op)
    block.ops = out


def _lowered(op: Op, ch: Channel, kernel: Kernel, ws: Value, ve: ValidExtents, loop: Op | None) -> list:
    ops: list = []
    loc = op.loc

    def sbin(kind, a, b, t=INDEX):
        a, b = _const(ops, a, loc), _const(ops, b, loc)
        o = Op("sbin", [a, b], [Value(t)], {"op": kind}, (), loc, None)
        ops.append(o)
        return o.result

    b = Op("block_idx", [], [Value(INDEX, "group")], {}, (), loc, None)
    ops.append(b)
    group = b.result
    item = ch.tile.dtype.itemsize
    rows = ch.tile.shape[0]
    cols = ch.tile.shape[1] if ch.tile.rank == 2 else 1
    base = sbin("add", sbin("mul", group, kernel.slot_area_bytes // item), ch.offset // item)
    if ch.depth > 1 and loop is not None:
        lo, _, step = loop.args[:3]
        iv = loop.blocks[0].args[0]
        k = sbin("floordiv", sbin("sub", iv, lo), step)
        slot = sbin("mod", k, ch.depth)
        base = sbin("add", base, sbin("mul", slot, rows * cols))
    if op.kind == "send":
        tile, row_off = op.args
        extents = ve(tile)
    else:
        row_off, *extents = op.args
        tile = op.results[0]
    shape = tile.type.shape
    dims = [WDim(row_off, rows, shape[0], extents[0], [rows], [cols])]
    if ch.tile.rank == 2:
        dims.append(WDim(0, cols, shape[1], extents[1], [cols], [1]))
    window = Window(ws, base, dims)
    role = "produce" if op.kind == "send" else "consume"
    span = [(ch.id, role, "begin"), (ch.id, role, "end")]
    if op.kind == "send":
        new = Op("store", [tile], [], {"channels": span, "handoff": ch.name, "route": ch.route}, (), loc, op.scope,
                 {"window": window})
        if op.attrs.get("writer") == "aiv0":
            sub = Op("subblock_idx", [], [Value(INDEX, "sub")], {}, (), loc, None)
            ops.append(sub)
            first = sbin("eq", sub.result, 0, BOOL)
            new.attrs.pop("channels")
            then = Block(ops=[new, Op("yield", [], [], {}, (), loc, None)])
            new = Op("if", [first], [], {"channels": span, "handoff": ch.name},
                     [then, Block(ops=[Op("yield", [], [], {}, (), loc, None)])], loc, None)
    else:   # the recv's result becomes the load's: its uses stay as they are
        new = Op("load", [], [tile], {"channels": span, "handoff": ch.name, "route": ch.route}, (), loc, op.scope,
                 {"window": window})
    ops.append(new)
    return ops


def _const(ops: list, x, loc):
    if isinstance(x, Value):
        return x
    o = Op("const", [], [Value(INDEX, const=x)], {"value": x}, (), loc, None)
    ops.append(o)
    return o.result
