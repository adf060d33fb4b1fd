"""Shadow memory of a checked launch: what is shadowed, how an access is recorded, and what a conflict is.

Model
-----
A checked kernel (``codegen.generate(..., check=mode)``) records its GM accesses in *shadow* arrays beside
the data, one entry per element, and checks each access against the entries there.

An **entry** is one int64: ``((block + 1) << 49) | (clock << 18) | (site << 2) | role`` -- which launch
block (core group) made the access, which program of the group (role 0 AIC, 1 AIV 0, 2 AIV 1; 0 in program
order), the program's own vector-clock component at the access, and the generated source's site id of the
op (its kernel line). 0 means "no access". Fields: block < 16383, clock < 2**31, site < 65536
(``ShadowPlan.check_limits``).

Happens-before. Inside a core group the three programs are ordered only by cross-core flags. Each program
keeps a vector clock ``vc[role]`` over the group's three programs (its own component starts at 1); a
``flag_set`` pushes a snapshot of the setter's clock onto the flag's queue (one FIFO per receiving counter
and flag id, in step with the hardware counter: the k-th wait on a counter is released by the k-th set
on it) and then advances the setter's own component; a ``flag_wait`` joins the snapshot it consumed. An
access by program p at clock c happened before program q's current point iff ``vc[q][p] >= c``.
Accesses by different launch blocks are never ordered (the language has no inter-block synchronisation),
so any such pair that involves a write is a race.

Shadowed memory:

* a user GM tensor the kernel stores into: ``wr`` (last write, exchanged atomically so that two blocks
  writing one element concurrently always see each other), ``cnt`` (writes per element, atomic adds, for
  write-once) and, only when the kernel also reads the tensor, ``rd`` (5 entries per element: the last read
  by each role, then the first read of any block and a later read by another block -- enough to find a read
  by any block other than a writer's). A launch with such an ``rd`` runs its blocks one at a time, so that
  reads need no atomics. Tensors the kernel only reads cannot race and are not shadowed.
* the workspace (hand-off slots): ``wr`` and ``rd`` (3 entries: the last read per role), per worker thread
  and per channel (its slots in one core group), indexed by the element's offset from the group's slots.
  A group's slots are only its own, so an access outside them is reported as such (``AREA``) and entries of
  another group are stale: an element without a write of this group is unwritten (an uninitialised read).

Failed checks are recorded, not raised: the first of a block goes into ``err[blk, 5:10]`` (site, three
values, role) and the kernel runs on (no exit path is added to it, which keeps numba's compile time); the
launcher reports it. For an access the values are the element, the other access's entry and the kind of
conflict (``KINDS``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numba import njit

from .sync import atomic_add, atomic_xchg

__all__ = ["shadow_entry", "entry_fields", "KINDS", "WW", "RAW", "WAR", "XWW", "XRAW", "XWAR", "UNINIT", "AREA",
           "gm_rows", "gm_one", "ws_rows", "ws_one", "vc_push", "vc_join", "ev_set", "ev_wait", "ev_left", "ini_check_1d", "ini_check_2d", "chk_fail",
           "ERR_SITE", "ERR_VALUES", "ERR_ROLE", "ERR_WIDTH", "ShadowPlan", "TrackedTensor",
           "TrackedWorkspace", "LaunchShadows", "accesses", "runtime_params", "MAX_SITES", "MAX_BLOCKS"]

_BLK = 49
_CLK = 18
_SITE = 2
_CLK_MASK = (1 << 31) - 1
_SITE_MASK = (1 << 16) - 1
MAX_SITES = _SITE_MASK
MAX_BLOCKS = (1 << 14) - 2

WW, RAW, WAR, XWW, XRAW, XWAR, UNINIT, AREA = 1, 2, 3, 4, 5, 6, 7, 8
KINDS = {
    WW: "write unordered with an earlier write of another program of the group",
    RAW: "read unordered with an earlier write of another program of the group",
    WAR: "write unordered with an earlier read of another program of the group",
    XWW: "write of an element another launch block wrote",
    XRAW: "read of an element another launch block wrote",
    XWAR: "write of an element another launch block read",
    UNINIT: "read of a workspace element this core group has not written",
    AREA: "workspace access outside this core group's slots of the channel",
}


def entry_fields(x: int) -> tuple:
    """(block, role, clock, site) of an entry (block -1 for no access)."""
    x = int(x)
    return (x >> _BLK) - 1, x & 3, (x >> _CLK) & _CLK_MASK, (x >> _SITE) & _SITE_MASK


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
    itself: every clock, program order; slot 3 unused)."""
    thr = np.empty(4, np.int64)
    for q in range(3):
        thr[q] = vc[role, q]
    thr[role] = _CLK_MASK
    thr[3] = _CLK_MASK
    return thr


@njit(inline="always")
def _late(x, g, thr):
    """Entry x is an access of group g (block + 1) not ordered before the current point."""
    return ((x >> _BLK) == g) & (((x >> _CLK) & _CLK_MASK) > thr[x & 3])


# ---------------------------------------------------------------- user GM tensors
# Each row loop is written out in full: numba's inlined helpers with several returns keep LLVM from
# optimising the loop (10x slower); the one-element variants are the 1 x 1 window. One loop serves reads
# and writes (``write`` is loop-invariant).

@njit(cache=True, nogil=True)
def gm_rows(wr, rd, cnt, base, stride, n0, n1, me, vc, blk, role, err, write):
    """Record (and check) the accesses of elements base + r*stride + c (r < n0, c < n1) of a user tensor;
    1 on a conflict (recorded in err). Reads are recorded only for tensors with ``rd`` (5 entries each)."""
    thr = _thresholds(vc, role)
    g = blk + 1
    for r in range(n0):
        o = base + r * stride
        for c in range(n1):
            e = o + c
            if write:
                w = atomic_xchg(wr, e, me) if wr.size else 0
            else:
                w = wr[e]
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
            if write and cnt.size:
                atomic_add(cnt, e, 1)
    return 0


@njit(cache=True, nogil=True)
def gm_one(wr, rd, cnt, e, me, vc, blk, role, err, write):
    return gm_rows(wr, rd, cnt, e, 0, 1, 1, me, vc, blk, role, err, write)


# ---------------------------------------------------------------- the workspace (per worker, per channel)
# The common case is "ordered": each element is tested branch-light, the conflicting entry looked for only
# when there is one. ``lo`` is the workspace element at index 0 of the shadow. One loop serves reads and
# writes (``write`` is loop-invariant: LLVM keeps two loops).

@njit(cache=True, nogil=True)
def ws_rows(wr, rd, lo, base, stride, n0, n1, me, vc, blk, role, err, write, hb, uninit):
    """Record (and check) the accesses of elements base + r*stride + c (r < n0, c < n1) of a workspace
    channel; 1 on a conflict (recorded in err)."""
    thr = _thresholds(vc, role)
    g = blk + 1
    for r in range(n0):
        o = base + r * stride
        i0 = o - lo
        if i0 < 0 or i0 + n1 > wr.size:
            return _report(err, blk, me, o if i0 < 0 else o + wr.size - i0, 0, AREA)
        for c in range(n1):
            i = i0 + c
            w = wr[i]
            if write:
                wr[i] = me
                b = 3 * i
                if hb and (_late(w, g, thr) | _late(rd[b], g, thr) | _late(rd[b + 1], g, thr)
                           | _late(rd[b + 2], g, thr)):
                    if _late(w, g, thr):
                        return _report(err, blk, me, o + c, w, WW)
                    for q in range(3):
                        if _late(rd[b + q], g, thr):
                            return _report(err, blk, me, o + c, rd[b + q], WAR)
            else:
                if uninit and (w >> _BLK) != g:
                    return _report(err, blk, me, o + c, 0, UNINIT)
                if hb:
                    if _late(w, g, thr):
                        return _report(err, blk, me, o + c, w, RAW)
                    rd[3 * i + role] = me
    return 0


@njit(cache=True, nogil=True)
def ws_one(wr, rd, lo, e, me, vc, blk, role, err, write, hb, uninit):
    return ws_rows(wr, rd, lo, e, 0, 1, 1, me, vc, blk, role, err, write, hb, uninit)


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
    wr: bool                   # last-write shadow (races)
    rd: bool                   # read shadow (races, and the kernel also reads it)
    cnt: bool                  # write counts (write-once)
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


@dataclass
class ShadowPlan:
    """What a checked kernel shadows, in the order of its ``shadow`` tuple: ``vc, vcq, vch, evc``, then
    ``(wr, rd, cnt)`` per tracked tensor, then ``(wr, rd)`` per workspace channel."""

    tensors: list
    workspace: list
    serial: bool               # some tracked tensor is also read: blocks run one at a time

    @classmethod
    def of(cls, ir, mode) -> "ShadowPlan":
        stored, read = accesses(ir)
        tensors, workspace = [], []
        data = [ch for ch in ir.channels if ch.kind == "data"]
        params = runtime_params(ir)
        if mode.races or mode.write_once:
            for p, v in params:
                if p.kind == "tensor" and v.id in stored:
                    tensors.append(TrackedTensor(p.name, v.id, mode.races, mode.races and v.id in read,
                                                 mode.write_once, stored[v.id]))
        if mode.races or mode.uninit:
            for (p, v), ch in zip([pv for pv in params if pv[0].kind == "workspace"], data):
                item = ch.tile.dtype.itemsize
                cols = ch.tile.shape[1] if ch.tile.rank == 2 else 1
                workspace.append(TrackedWorkspace(p.name, v.id, ch.name, ch.offset // item,
                                                  ch.depth * ch.slot_bytes // item, ir.slot_area_bytes // item,
                                                  ch.tile.shape[0] * cols, cols, mode.races, mode.uninit))
        return cls(tensors, workspace, any(t.rd for t in tensors))

    def tensor(self, value_id: int):
        return next((t for t in self.tensors if t.value_id == value_id), None)

    def channel(self, value_id: int):
        return next((w for w in self.workspace if w.value_id == value_id), None)

    def user_shadows(self, storages: dict) -> list:
        """(wr, rd, cnt) of every tracked tensor for one launch (``storages``: parameter name -> storage array)."""
        out = []
        for t in self.tensors:
            n = storages[t.name].size
            out.append((np.zeros(n if t.wr else 0, np.int64), np.zeros(5 * n if t.rd else 0, np.int64),
                        np.zeros(n if t.cnt else 0, np.int64)))
        return out

    def workspace_shadows(self) -> list:
        """(wr, rd) of every channel, for one worker thread (reused by the groups it runs: stale entries of
        another group are ignored, so they need no reset)."""
        return [(np.zeros(w.elems, np.int64), np.zeros(3 * w.elems if w.hb else 0, np.int64))
                for w in self.workspace]


def runtime_params(ir) -> list:
    """(Param, Value) of every runtime parameter of a kernel IR."""
    return list(zip([p for p in ir.params if p.kind != "constexpr"], ir.args))


def accesses(ir) -> tuple:
    """({tensor value id: [Locs of the stores into it]}, {ids of the tensors it reads}) over every program."""
    from ..dsl.ir import walk

    stored: dict[int, list] = {}
    read: set[int] = set()
    for body in list(ir.programs().values()) or [ir.body]:
        for op in walk(body):
            if op.kind == "store":
                stored.setdefault(op.windows["window"].tensor.id, []).append(op.loc)
            elif op.kind in ("load", "mma"):
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
        return tuple(a for pair in self.plan.workspace_shadows() for a in pair)

    def _evc(self, program: str):
        return np.zeros(1 + 2 * self.events.get(program, 0), np.int64)

    def for_core(self) -> tuple:
        """The tuple of one worker running ``core`` functions (program order, one-sided kernels)."""
        return self._clocks() + (self._evc("core"),) + self._user + self._workspace()

    def for_group(self):
        """(tuples of the AIC, AIV 0 and AIV 1 programs, reset) for one worker running core groups; call
        ``reset()`` before each group (its clocks restart, its queues empty)."""
        vc, vcq, vch = self._clocks()
        ws = self._workspace()
        tuples = [(vc, vcq, vch, self._evc(p)) + self._user + ws for p in ("aic", "aiv", "aiv")]

        def reset():
            vc[:] = 0
            np.fill_diagonal(vc, 1)
            vch[:] = 0

        return tuples, reset
