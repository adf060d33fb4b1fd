"""Shadow memory of a checked launch: what is shadowed, how an access is recorded, and what a conflict is.

Model
-----
A checked kernel (``codegen.generate(..., check=mode)``) records its GM accesses in *shadow* arrays beside
the data, one entry per element, and checks each access against the entries there.

An **entry** is one int64: ``((block + 1) << 49) | (clock << 20) | (site << 4) | (count << 2) | role`` --
which launch block (core group) made the access, which program of the group (role 0 AIC, 1 AIV 0, 2 AIV 1;
0 in program order), the program's own vector-clock component at the access, the generated source's site
id of the op (its kernel line) and, in a user tensor's last-write entry, how often the element was written
(0, 1, 2: more than once). 0 means "no access". Fields: block < 16383 (checked at launch), clock < 2**29,
site < 65536 (checked at generation).

Happens-before. Inside a core group the three programs are ordered only by cross-core flags. Each program
keeps a vector clock ``vc[role]`` over the group's three programs (its own component starts at 1); a
``flag_set`` pushes a snapshot of the setter's clock onto the flag's queue (one FIFO per receiving counter
and flag id, in step with the hardware counter: the k-th wait on a counter is released by the k-th set
on it) and then advances the setter's own component; a ``flag_wait`` joins the snapshot it consumed. An
access by program p at clock c happened before program q's current point iff ``vc[q][p] >= c``.
Accesses by different launch blocks are never ordered (the language has no inter-block synchronisation),
so any such pair that involves a write is a race.

Shadowed memory:

* a user GM tensor the kernel stores into: ``wr`` (last write and write count, replaced by one atomic
  compare-and-swap per write, so that two blocks writing one element concurrently always see each other
  and no write is lost from the count) and, only when the kernel also reads the tensor and races are
  checked, ``rd`` (5 entries per element: the last read by each role, then the first read of any block and
  a later read by another block -- enough to find a read by any block other than a writer's). A launch with
  such an ``rd`` runs its blocks one at a time, so that reads need no atomics. Tensors the kernel only reads
  cannot race and are not shadowed.
* the workspace (hand-off slots): per worker thread and per channel (its slots in one core group), the last
  write and each role's last read of every element, kept per slot row while accesses are column prefixes
  (``ws_rows``). A group's slots are only its own, so an access outside them is reported as such (``AREA``)
  and entries of another group are stale: an element without a write of this group is unwritten (an
  uninitialised read).

Failed checks are recorded, not raised: the first of a block goes into ``err[blk, 5:10]`` (site, three
values, role) and the kernel runs on (no exit path is added to it, which keeps numba's compile time); the
launcher reports it. For an access the values are the element, the other access's entry and the kind of
conflict (``KINDS``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numba import njit

from .sync import atomic_cas

__all__ = ["shadow_entry", "entry_fields", "KINDS", "WW", "RAW", "WAR", "XWW", "XRAW", "XWAR", "UNINIT", "AREA", "CLOCK",
           "WS_EPOCHS",
           "gm_rows", "gm_one", "ws_rows", "ws_one", "vc_push", "vc_join", "ev_set", "ev_wait", "ev_left", "ini_check_1d", "ini_check_2d", "chk_fail",
           "ERR_SITE", "ERR_VALUES", "ERR_ROLE", "ERR_WIDTH", "ShadowPlan", "TrackedTensor",
           "TrackedWorkspace", "LaunchShadows", "accesses", "runtime_params", "write_counts", "MAX_SITES", "MAX_BLOCKS"]

_BLK = 49
_CLK = 20
_SITE = 4
_CNT = 2
_CLK_MASK = (1 << 29) - 1
_SITE_MASK = (1 << 16) - 1
MAX_SITES = _SITE_MASK
MAX_BLOCKS = (1 << 14) - 2

WW, RAW, WAR, XWW, XRAW, XWAR, UNINIT, AREA, CLOCK = 1, 2, 3, 4, 5, 6, 7, 8, 9
KINDS = {
    WW: "write unordered with an earlier write of another program of the group",
    RAW: "read unordered with an earlier write of another program of the group",
    WAR: "write unordered with an earlier read of another program of the group",
    XWW: "write of an element another launch block wrote",
    XRAW: "read of an element another launch block wrote",
    XWAR: "write of an element another launch block read",
    UNINIT: "read of a workspace element this core group has not written",
    AREA: "workspace access outside this core group's slots of the channel",
    CLOCK: "more flag sets in one program of a core group than the workspace shadow counts (4194303)",
}


def entry_fields(x: int) -> tuple:
    """(block, role, clock, site) of an entry (block -1 for no access)."""
    x = int(x)
    return (x >> _BLK) - 1, x & 3, (x >> _CLK) & _CLK_MASK, (x >> _SITE) & _SITE_MASK


def write_counts(wr: np.ndarray) -> np.ndarray:
    """Per element of a last-write shadow: 0 never written, 1 once, 2 more than once."""
    return (wr >> _CNT) & 3


@njit(inline="always")
def shadow_entry(blk, role, clk, site):
    return ((blk + 1) << _BLK) | (clk << _CLK) | (site << _SITE) | role


#: columns of ``err`` a checked kernel records its first failed check in (the kernel's own checks use 0..4):
#: the site, three values, the role
ERR_SITE, ERR_VALUES, ERR_ROLE, ERR_WIDTH = 5, 6, 9, 10


@njit(inline="always")
def _record(err, blk, site, a, b, c, role):
    if err[blk, ERR_SITE] == 0:
        err[blk, ERR_SITE] = site
        err[blk, ERR_VALUES] = a
        err[blk, ERR_VALUES + 1] = b
        err[blk, ERR_VALUES + 2] = c
        err[blk, ERR_ROLE] = role


@njit(inline="always")
def _report(err, blk, me, e, other, kind):
    _record(err, blk, (me >> _SITE) & _SITE_MASK, e, other, kind, me & 3)
    return 1


@njit(cache=True, nogil=True)
def chk_fail(err, blk, site, a, b, role):
    """Record a failed check (the first of the block wins; the kernel runs on, the launcher reports it)."""
    _record(err, blk, site, a, b, 0, role)


@njit(inline="always")
def _thresholds(vc, role):
    """Per role q, the clock up to which q's accesses are ordered before ``role``'s current point (``role``
    itself: every clock, program order)."""
    t0 = _CLK_MASK if role == 0 else vc[role, 0]
    t1 = _CLK_MASK if role == 1 else vc[role, 1]
    t2 = _CLK_MASK if role == 2 else vc[role, 2]
    return t0, t1, t2


@njit(inline="always")
def _late(x, g, thr):
    """Entry x is an access of group g (block + 1) not ordered before the current point."""
    r = x & 3
    t = thr[0] if r == 0 else (thr[1] if r == 1 else thr[2])
    return ((x >> _BLK) == g) & (((x >> _CLK) & _CLK_MASK) > t)


# ---------------------------------------------------------------- user GM tensors
# Each row loop is written out in full: numba's inlined helpers with several returns keep LLVM from
# optimising the loop (10x slower); the one-element variants are the 1 x 1 window. One loop serves reads
# and writes (``write`` is loop-invariant).

@njit(cache=True, nogil=True)
def gm_rows(wr, rd, base, stride, n0, n1, me, vc, blk, role, err, write, races):
    """Record (and, with ``races``, check) the accesses of elements base + r*stride + c (r < n0, c < n1) of
    a user tensor; 1 on a conflict (recorded in err). Reads are recorded only for tensors with ``rd``."""
    thr = _thresholds(vc, role)
    g = blk + 1
    for r in range(n0):
        o = base + r * stride
        for c in range(n1):
            e = o + c
            if write:
                w = wr[e]
                while True:   # the entry becomes ``me`` with the element's write count one higher (at most 2)
                    n = min(((w >> _CNT) & 3) + 1, 2)
                    seen = atomic_cas(wr, e, w, me | (n << _CNT))
                    if seen == w:
                        break
                    w = seen
            else:
                w = wr[e]
            if not races:
                continue
            if w != 0 and (w >> _BLK) != g:
                return _report(err, blk, me, e, w, XWW if write else XRAW)
            if _late(w, g, thr):
                return _report(err, blk, me, e, w, WW if write else RAW)
            if rd.size:
                b = 5 * e
                if write:
                    for q in range(3):
                        if _late(rd[b + q], g, thr):
                            return _report(err, blk, me, e, rd[b + q], WAR)
                    for k in range(3, 5):
                        x = rd[b + k]
                        if x != 0 and (x >> _BLK) != g:
                            return _report(err, blk, me, e, x, XWAR)
                else:
                    rd[b + role] = me
                    x1 = rd[b + 3]
                    if x1 == 0:
                        rd[b + 3] = me
                    elif (x1 >> _BLK) != g:
                        rd[b + 4] = me
    return 0


@njit(cache=True, nogil=True)
def gm_one(wr, rd, e, me, vc, blk, role, err, write, races):
    return gm_rows(wr, rd, e, 0, 1, 1, me, vc, blk, role, err, write, races)


# ---------------------------------------------------------------- the workspace (per worker, per channel)
# Workspace entries are int32: ``(epoch << 24) | (clock << 2) | role``, the epoch numbering the core groups a
# worker runs (an entry of an earlier group is stale: unwritten). The site of an entry is not stored:
# ``info[1 + 2 * role + write]`` holds the last site of each program's reads and writes of the channel (a
# channel is accessed only by its hand-off ops, one per side and line), and a conflict is reported as a full
# entry built from it.
#
# Per element, exactly, but at the cost of a slot row: a hand-off window is rows x a column prefix [0, n)
# of the slot tile, so each slot row keeps a *summary* (extent, entry) of its last write, and one per role of
# that role's last read: columns below the extent have that entry; columns at or above it have their own
# entry in the element array (materialised when an access shrinks the extent). An access of another shape
# first *demotes* the rows it touches (summary -> elements) and is handled element by element.
# ``ws``: int32[2, rows] (extent, entry) of the writes, ``we``: int32[elems]; ``rs``: int32[3, 2, rows] and
# ``re``: int32[3, elems] the same per reading role (empty without races).

_WS_EPOCH = 24
_WS_CLK_MASK = (1 << 22) - 1
#: a worker's group epochs run 1..WS_EPOCHS - 1, then its shadows are cleared and the epochs start again
WS_EPOCHS = 128


@njit(inline="always")
def _ws_late(x, epoch, thr):
    r = x & 3
    t = thr[0] if r == 0 else (thr[1] if r == 1 else thr[2])
    return ((x >> _WS_EPOCH) == epoch) & (((x >> 2) & _WS_CLK_MASK) > t)


@njit(inline="always")
def _ws_report(err, blk, me, e, x, write, info, kind):
    """Report a conflict with workspace entry x (a write entry when ``write``) as a full entry."""
    r = x & 3
    other = shadow_entry(blk, r, (x >> 2) & _WS_CLK_MASK, info[1 + 2 * r + (1 if write else 0)])
    return _report(err, blk, me, e, other, kind)


@njit(cache=True, nogil=True)
def _demote(summary, el, row, first):
    """Row ``row``'s summary becomes element entries (its extent 0)."""
    n = summary[0, row]
    if n:
        e = summary[1, row]
        for j in range(n):
            el[first + j] = e
        summary[0, row] = 0


@njit(cache=True, nogil=True)
def _settle(summary, el, row, first, n, mine):
    """The row's summary after ``mine`` accessed its columns [0, n) (columns the old summary covered beyond
    n keep its entry, as elements)."""
    old = summary[0, row]
    if n < old:
        e = summary[1, row]
        for j in range(n, old):
            el[first + j] = e
    summary[0, row] = n
    summary[1, row] = mine


@njit(cache=True, nogil=True)
def _first_late(summary, el, row, first, n, epoch, thr):
    """(column, entry) of the first of the row's columns [0, n) whose entry is not ordered before the current
    point, (-1, 0) when none is."""
    ext = summary[0, row]
    if min(n, ext) > 0 and _ws_late(summary[1, row], epoch, thr):
        return 0, summary[1, row]
    for j in range(ext, n):
        x = el[first + j]
        if _ws_late(x, epoch, thr):
            return j, x
    return -1, 0


@njit(cache=True, nogil=True)
def _first_unwritten(summary, el, row, first, n, epoch):
    """The first of the row's columns [0, n) this group has not written, -1 when all are."""
    ext = summary[0, row]
    if min(n, ext) > 0 and (summary[1, row] >> _WS_EPOCH) != epoch:
        return 0
    for j in range(ext, n):
        if (el[first + j] >> _WS_EPOCH) != epoch:
            return j
    return -1


@njit(cache=True, nogil=True)
def ws_rows(ws, we, rs, re, info, lo, cols, base, stride, n0, n1, me, vc, blk, role, err, write, hb, uninit,
            readers):
    """Record (and check) the accesses of elements base + r*stride + c (r < n0, c < n1) of a workspace
    channel whose slot tiles have ``cols`` columns; 1 on a conflict (recorded in err). ``lo``: the workspace
    element at index 0 of the shadow."""
    thr = _thresholds(vc, role)
    epoch = info[0]
    clk = (me >> _CLK) & _CLK_MASK
    if clk > _WS_CLK_MASK:
        return _report(err, blk, me, base, 0, CLOCK)
    info[1 + 2 * role + (1 if write else 0)] = (me >> _SITE) & _SITE_MASK
    mine = np.int32((epoch << _WS_EPOCH) | (clk << 2) | role)
    n = we.size
    for r in range(n0):
        o = base + r * stride
        i0 = o - lo
        if i0 < 0 or i0 + n1 > n:
            return _report(err, blk, me, o if i0 < 0 else o + n - i0, 0, AREA)
        row = i0 // cols
        first = row * cols
        if i0 == first and n1 <= cols:      # a column prefix of one slot row: its summaries
            if write:
                if hb:
                    j, x = _first_late(ws, we, row, first, n1, epoch, thr)
                    if j >= 0:
                        return _ws_report(err, blk, me, o + j, x, True, info, WW)
                    for q in range(3):
                        if readers & (1 << q):
                            j, x = _first_late(rs[q], re[q], row, first, n1, epoch, thr)
                            if j >= 0:
                                return _ws_report(err, blk, me, o + j, x, False, info, WAR)
                _settle(ws, we, row, first, n1, mine)
            else:
                if uninit:
                    j = _first_unwritten(ws, we, row, first, n1, epoch)
                    if j >= 0:
                        return _report(err, blk, me, o + j, 0, UNINIT)
                if hb:
                    j, x = _first_late(ws, we, row, first, n1, epoch, thr)
                    if j >= 0:
                        return _ws_report(err, blk, me, o + j, x, True, info, RAW)
                    _settle(rs[role], re[role], row, first, n1, mine)
            continue
        for c in range(n1):                 # any other shape: element by element, its rows demoted
            i = i0 + c
            rr = i // cols
            _demote(ws, we, rr, rr * cols)
            if hb:
                for q in range(3):
                    _demote(rs[q], re[q], rr, rr * cols)
            w = we[i]
            if write:
                if hb:
                    if _ws_late(w, epoch, thr):
                        return _ws_report(err, blk, me, o + c, w, True, info, WW)
                    for q in range(3):
                        if readers & (1 << q) and _ws_late(re[q, i], epoch, thr):
                            return _ws_report(err, blk, me, o + c, re[q, i], False, info, WAR)
                we[i] = mine
            else:
                if uninit and (w >> _WS_EPOCH) != epoch:
                    return _report(err, blk, me, o + c, 0, UNINIT)
                if hb:
                    if _ws_late(w, epoch, thr):
                        return _ws_report(err, blk, me, o + c, w, True, info, RAW)
                    re[role, i] = mine
    return 0


@njit(cache=True, nogil=True)
def ws_one(ws, we, rs, re, info, lo, cols, e, me, vc, blk, role, err, write, hb, uninit, readers):
    return ws_rows(ws, we, rs, re, info, lo, cols, e, 0, 1, 1, me, vc, blk, role, err, write, hb, uninit, readers)


# ---------------------------------------------------------------- vector clocks at flags

@njit(cache=True, nogil=True)
def vc_push(vcq, vch, vc, row, fid, role):
    """A set of flag ``fid`` on counter ``row``: queue a snapshot of the setter's clock."""
    t = vch[row, fid, 1]
    k = t % vcq.shape[2]
    for c in range(3):
        vcq[row, fid, k, c] = vc[role, c]
    vch[row, fid, 1] = t + 1


@njit(cache=True, nogil=True)
def vc_join(vcq, vch, vc, row, fid, role):
    """A wait that consumed one count of flag ``fid`` on counter ``row``: join the matching set's snapshot."""
    h = vch[row, fid, 0]
    k = h % vcq.shape[2]
    for c in range(3):
        x = vcq[row, fid, k, c]
        if x > vc[role, c]:
            vc[role, c] = x
    vch[row, fid, 0] = h + 1


# ---------------------------------------------------------------- intra-core events
# evc of one program: [0] the site of the first wait that found no set (0: none), then per (event, id) slot k
# its outstanding sets at 1 + 2k and the site of its last set at 2 + 2k. Calls, not inlined branches: the
# kernel's control flow stays as it was (numba compiles every extra exit path slowly).

@njit(cache=True, nogil=True)
def ev_set(evc, k, site):
    evc[1 + 2 * k] += 1
    evc[2 + 2 * k] = site


@njit(cache=True, nogil=True)
def ev_wait(evc, k, site):
    if evc[1 + 2 * k] == 0:
        if evc[0] == 0:
            evc[0] = site
    else:
        evc[1 + 2 * k] -= 1


@njit(cache=True, nogil=True)
def ev_left(evc, err, blk, role):
    """At the program's end: record the first wait without a set, else a set never waited (value: its
    outstanding count)."""
    if evc[0] != 0:
        _record(err, blk, evc[0], 0, 0, 0, role)
        return
    for k in range((evc.size - 1) // 2):
        if evc[1 + 2 * k] != 0:
            _record(err, blk, evc[2 + 2 * k], evc[1 + 2 * k], 0, 0, role)
            return


# ---------------------------------------------------------------- on-chip "initialised" shadows

@njit(cache=True, nogil=True)
def ini_check_1d(ini, err, blk, site, role):
    """Record the first element of ``ini`` that is not written (value: its index)."""
    for i in range(ini.shape[0]):
        if not ini[i]:
            _record(err, blk, site, i, 0, 0, role)
            return


@njit(cache=True, nogil=True)
def ini_check_2d(ini, err, blk, site, role):
    """Record the first element of ``ini`` that is not written (values: row, column)."""
    for i in range(ini.shape[0]):
        for j in range(ini.shape[1]):
            if not ini[i, j]:
                _record(err, blk, site, i, j, 0, role)
                return


# ---------------------------------------------------------------- the plan: which memory is shadowed

@dataclass
class TrackedTensor:
    """A user GM tensor a kernel stores into."""

    name: str                  # the kernel parameter
    value_id: int
    races: bool                # the accesses are checked for races
    rd: bool                   # read shadow (races, and the kernel also reads it)
    counts: bool               # write-once: the last-write entries' counts are judged after the launch
    stores: list = field(default_factory=list)   # Locs of the stores into it


@dataclass
class TrackedWorkspace:
    """The slots of one data channel in the workspace (one parameter of kind "workspace")."""

    name: str
    value_id: int
    channel: str
    lo: int                    # element offset of the channel's slot 0 in one core group's slot area
    elems: int                 # elements of all the channel's slots
    area: int                  # elements of one core group's slot area
    slot: int                  # elements of one slot
    cols: int                  # columns of a slot tile (1 for rank 1)
    hb: bool                   # races: happens-before checks
    uninit: bool               # reads of unwritten slot elements
    readers: int               # bit mask of the roles whose program reads the channel


@dataclass
class ShadowPlan:
    """What a checked kernel shadows, in the order of its ``shadow`` tuple: ``vc, vcq, vch, evc``, then
    ``(wr, rd)`` per tracked tensor, then ``(ws, we, rs, re, info)`` per workspace channel."""

    tensors: list
    workspace: list
    serial: bool               # some tracked tensor is also read: blocks run one at a time

    @classmethod
    def of(cls, ir, mode) -> "ShadowPlan":
        stored, read = accesses(ir)
        readers = _readers(ir)
        tensors, workspace = [], []
        data = [ch for ch in ir.channels if ch.kind == "data"]
        params = runtime_params(ir)
        if mode.races or mode.write_once:
            for p, v in params:
                if p.kind == "tensor" and v.id in stored:
                    # write-once judges what the kernel only writes: a tensor it also reads back is its own
                    # scratch (FIA's GM accumulator) or updated in place, rewritten by design
                    tensors.append(TrackedTensor(p.name, v.id, mode.races, mode.races and v.id in read,
                                                 mode.write_once and v.id not in read, stored[v.id]))
        if mode.races or mode.uninit:
            for (p, v), ch in zip([pv for pv in params if pv[0].kind == "workspace"], data):
                item = ch.tile.dtype.itemsize
                cols = ch.tile.shape[1] if ch.tile.rank == 2 else 1
                workspace.append(TrackedWorkspace(p.name, v.id, ch.name, ch.offset // item,
                                                  ch.depth * ch.slot_bytes // item, ir.slot_area_bytes // item,
                                                  ch.tile.shape[0] * cols, cols, mode.races, mode.uninit,
                                                  readers.get(v.id, 0)))
        return cls(tensors, workspace, any(t.rd for t in tensors))

    def tensor(self, value_id: int):
        return next((t for t in self.tensors if t.value_id == value_id), None)

    def channel(self, value_id: int):
        return next((w for w in self.workspace if w.value_id == value_id), None)

    def user_shadows(self, storages: dict) -> list:
        """(wr, rd) of every tracked tensor for one launch (``storages``: parameter name -> storage array)."""
        out = []
        for t in self.tensors:
            n = storages[t.name].size
            out.append((np.zeros(n, np.int64), np.zeros(5 * n if t.rd else 0, np.int64)))
        return out

    def workspace_shadows(self) -> list:
        """(ws, we, rs, re, info) of every channel (see ``ws_rows``), for one worker thread (reused by the
        groups it runs, one epoch each: entries of an earlier epoch are stale, so the arrays are cleared only
        when the epochs wrap)."""
        out = []
        for w in self.workspace:
            rows = -(-w.elems // w.cols)
            k = 3 if w.hb else 0
            out.append((np.zeros((2, rows), np.int32), np.zeros(w.elems, np.int32),
                        np.zeros((k, 2, rows if k else 0), np.int32), np.zeros((k, w.elems if k else 0), np.int32),
                        np.zeros(7, np.int64)))
        return out


def runtime_params(ir) -> list:
    """(Param, Value) of every runtime parameter of a kernel IR."""
    return list(zip([p for p in ir.params if p.kind != "constexpr"], ir.args))


def _readers(ir) -> dict:
    """Workspace value id -> bit mask of the roles reading it (the AIC program: role 0; the AIV program is run
    by roles 1 and 2)."""
    from ..dsl.ir import walk

    out: dict[int, int] = {}
    for core, body in ir.programs().items():
        bits = 1 if core == "aic" else 6
        for op in walk(body):
            if op.kind in ("load", "mma"):
                for w in op.windows.values():
                    out[w.tensor.id] = out.get(w.tensor.id, 0) | bits
    return out


def accesses(ir) -> tuple:
    """({tensor value id: [Locs of the stores into it]}, {ids of the tensors it reads}) over every program."""
    from ..dsl.ir import walk

    stored: dict[int, list] = {}
    read: set[int] = set()
    for body in list(ir.programs().values()) or [ir.body]:
        for op in walk(body):
            if op.kind == "store":
                stored.setdefault(op.windows["window"].tensor.id, []).append(op.loc)
            elif op.kind in ("load", "mma", "gather"):
                read.update(w.tensor.id for w in op.windows.values())
            elif op.kind == "sload":
                read.add(op.args[0].id)
            for w in op.windows.values():
                for d in w.dims:
                    read.update(lk.table.id for lk in d.lookups or () if lk is not None)
    return stored, read


class LaunchShadows:
    """The ``shadow`` tuples of one launch: the tracked tensors' arrays (shared by every program of the
    launch), the workspace arrays (one set per worker thread), and per core group its vector clocks and
    flag queues; per program its event counters (``events``: program -> counters)."""

    #: flag ids the queues hold (the flags array's) and queued sets per (counter, id) (the counter holds 15)
    IDS, DEPTH = 16, 16

    def __init__(self, plan: ShadowPlan, storages: dict, events: dict):
        self.plan = plan
        self.serial = plan.serial
        self.user = plan.user_shadows(storages)
        self._user = tuple(a for t in self.user for a in t)
        self.events = events

    def _clocks(self):
        return (np.zeros((3, 3), np.int64), np.zeros((4, self.IDS, self.DEPTH, 3), np.int64),
                np.zeros((4, self.IDS, 2), np.int64))

    def _workspace(self) -> tuple:
        return tuple(a for arrays in self.plan.workspace_shadows() for a in arrays)

    def _evc(self, program: str):
        return np.zeros(1 + 2 * self.events.get(program, 0), np.int64)

    def for_core(self) -> tuple:
        """The tuple of one worker running ``core`` functions (program order, one-sided kernels)."""
        return self._clocks() + (self._evc("core"),) + self._user + self._workspace()

    def for_group(self):
        """(tuples of the AIC, AIV 0 and AIV 1 programs, reset) for one worker running core groups; call
        ``reset()`` before each group (its clocks restart, its queues empty)."""
        vc, vcq, vch = self._clocks()
        shadows = self.plan.workspace_shadows()
        ws = tuple(a for arrays in shadows for a in arrays)
        tuples = [(vc, vcq, vch, self._evc(p)) + self._user + ws for p in ("aic", "aiv", "aiv")]

        def reset():
            vc[:] = 0
            np.fill_diagonal(vc, 1)
            vch[:] = 0
            for *arrays, info in shadows:     # the next group: a new epoch
                info[0] += 1
                if info[0] == WS_EPOCHS:
                    for a in arrays:
                        a[...] = 0
                    info[0] = 1

        return tuples, reset
