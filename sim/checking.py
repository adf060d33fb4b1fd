"""Checking mode: the simulator as a sanitizer (uninitialised reads, write-once outputs, races, flags,
pipelined-order equivalence).

Model
-----
``kernel[grid](..., check=CheckMode())`` (or ``check=True`` for every check, or ``CompiledKernel.launch(...,
check=...)``) runs the kernel through a *checked* variant of its numba module (``checkgen``): the same
computation plus shadow bookkeeping (``shadow``), generated only for checked launches, so unchecked launches
run exactly the code they ran before. A broken rule raises a ``SimulationError`` subclass naming the kernel
file:line of every access involved:

=========================  ==================================================================
``UninitialisedReadError``  an op reads an on-chip tile element, or a workspace slot element,
                            that nothing has written
``WriteOnceError``          an output element written twice, or a pure output left with holes
``RaceError``               two accesses to one GM element, at least one a write, that nothing
                            orders: two launch blocks, or two programs of a core group without a
                            cross-core flag between them
``FlagError``               flags left set at the end, a deadlock, an intra-core event waited
                            without a set or set and never waited
``EquivalenceError``        program order and pipelined order give different bits
=========================  ==================================================================

``with checked_launches(mode):`` checks every launch inside (operator APIs such as
``npu_fused_infer_attention_score`` launch several kernels and take no ``check`` argument) and judges
write-once over all of them at the end: an element may be written by any one launch of the session
(flash-decode writes the rows of split tasks in the combine launch, the others in the attention launch),
and a tensor that any launch of the session reads is not a pure output; an output the operator's host code filled
for rows its launches leave to that fill (``note_host_initialised``: FIA's rows past a batch's actual query
length) is judged for double writes, not holes. Without a session each checked
launch is its own. Tensors are identified by their memory (address, shape, strides, dtype).

Invariants
----------
* A checked launch computes bitwise what the unchecked launch computes (the checks only read the data).
* Every check is exact for the accesses it shadows: no report without a broken rule, and a broken rule on
  a shadowed access is reported (the first one found; with several blocks running in parallel, which of
  several broken rules is found first may vary, the verdict does not).
* Unchecked launches generate, compile and run none of this.
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass, replace

import numpy as np

from ..dsl.errors import SimulationError
from .shadow import (AREA, CLOCK, ERR_ROLE, ERR_SITE, ERR_VALUES, KINDS, MAX_BLOCKS, RAW, UNINIT, WAR, XRAW, XWAR, XWW,
                     LaunchShadows, accesses, entry_fields, runtime_params, write_counts)
from .storage import from_storage, to_storage
from .sync import ROLES

__all__ = ["CheckMode", "checked_launches", "note_host_initialised", "CheckSession", "CheckError", "RaceError", "UninitialisedReadError",
           "WriteOnceError", "FlagError", "EquivalenceError", "CheckModeError"]


@dataclass(frozen=True)
class CheckMode:
    """What a checked launch checks (``check=CheckMode(...)``; ``check=True`` is ``CheckMode.full()``).

    uninit
        Every tile buffer starts as NaN; a tile created without a fill (the row-chunk assembly, a hand-made
        IR) gets a "written" shadow per element, and an op that reads an element of it nobody wrote is an
        ``UninitialisedReadError`` at the op's line (``where`` reads only the arm it selects). A workspace
        slot element read before this core group wrote it is one too. Cost: a pass over each such tile per
        reader; one shadow word per workspace element touched.
    write_once
        Counts the writes of every element of every user tensor the kernel stores into and does not read
        back (a tensor it reads too is its own scratch, such as FIA's GM accumulator, rewritten by design;
        races still judges it). An element written twice, or (for a *pure output*: a tensor no launch of the session reads) never written while others
        of the tensor are, is a ``WriteOnceError`` with the number of such elements, the first index and the
        store's line. Cost: one atomic compare-and-swap per stored element (shared with ``races``).
    races
        A GM element written by one launch block and read or written by another is a ``RaceError`` naming
        both blocks and lines. Inside a core group in pipelined order, two accesses to one element (of a
        user tensor or a workspace slot) by two programs must be ordered by a cross-core flag (vector clocks
        joined at each wait from its set); an unordered pair is a ``RaceError`` naming both programs and
        lines: a dropped flag, a slot reused too early. Cost: the compare-and-swap per stored element, a
        shadow read per element loaded from a tensor the kernel also writes (such launches run their blocks
        one at a time), a shadow update per workspace element.
    flags
        Pipelined order reports deadlocks and flags left set at the end on every launch; in checking mode
        they are ``FlagError`` naming the lines of the unmatched sets, and each program's intra-core events
        are counted: a wait before any set, or a set never waited by the program's end, is a ``FlagError``
        (the chip would hang a pipe). Cost: a counter per event op.
    equivalence
        Runs the kernel in the other order too (program <-> pipelined) on copies of its outputs, with the
        same checks (but write-once), and compares every output **bit for bit** (NaN payloads included):
        the simulator computes each element with the same ops in the same order in both, so any difference
        is a wrong hand-off, slot or flag. An ``EquivalenceError`` names the first differing element and
        both values. Cost: a second, checked run in the other order (so it is not part of the default).
    """

    uninit: bool = True
    write_once: bool = True
    races: bool = True
    flags: bool = True
    equivalence: bool = False

    @classmethod
    def full(cls) -> "CheckMode":
        """Every check, equivalence included (what ``check=True`` means)."""
        return cls(equivalence=True)

    @classmethod
    def of(cls, check) -> "CheckMode | None":
        """The mode a ``check=`` argument asks for: None/False none, True ``full()``, a CheckMode itself."""
        if check is None or check is False:
            return None
        if check is True:
            return cls.full()
        if isinstance(check, cls):
            return check
        raise CheckModeError("check", f"expected True, False, None or a cvtile.sim.CheckMode, got {check!r}")

    @property
    def per_run(self) -> "CheckMode":
        """The checks of one run (equivalence is a second run, not a different module)."""
        return replace(self, equivalence=False)


class CheckError(SimulationError):
    """A rule checking mode enforces was broken (see the subclasses)."""


class RaceError(CheckError):
    """Two unordered accesses to one GM element, at least one a write."""


class UninitialisedReadError(CheckError):
    """A read of an on-chip tile element or workspace element nothing has written."""


class WriteOnceError(CheckError):
    """An output element written more than once, or a pure output with elements never written."""


class FlagError(CheckError):
    """Cross-core flags left set or deadlocked, or intra-core events unbalanced."""


class EquivalenceError(CheckError):
    """Program order and pipelined order computed different bits."""


class CheckModeError(ValueError):
    """A check request the checker cannot serve; names the parameter."""

    def __init__(self, param: str, message: str):
        self.param = param
        super().__init__(f"{param}: {message}")


# ------------------------------------------------------------------ sessions

_ACTIVE: contextvars.ContextVar = contextvars.ContextVar("cvtile_check_session", default=None)


@dataclass
class _Output:
    name: str
    shape: tuple
    total: np.ndarray
    stores: list          # (kernel name, Loc) of the stores into it


class CheckSession:
    """The launches judged together for write-once (see the module docstring)."""

    def __init__(self, mode: CheckMode):
        self.mode = mode
        self.outputs: dict = {}
        self.read: set = set()        # memory keys of the tensors some launch read
        self.initialised: list = []   # (start, end) addresses of outputs the host filled before the launches
        self.launches = 0

    def record(self, kernel: str, plan, shadows: LaunchShadows, values: dict, storages: dict, sites) -> None:
        """A finished launch's write counts: overlaps inside it or with an earlier launch raise at once."""
        self.launches += 1
        for t, (wr, _) in zip(plan.tensors, shadows.user):
            if not t.counts:
                continue
            cnt = write_counts(wr)
            value = values[t.name]
            shape = storages[t.name].shape
            over = np.flatnonzero(cnt > 1)
            if over.size:
                e = int(over[0])
                raise WriteOnceError(f"write-once: {over.size} element(s) of {t.name} are written more than once "
                                     f"by one launch (first {t.name}{_index(e, shape)}){_last_writer(wr, e, sites)}",
                                     None, _store_loc(wr, e, t, sites))
            key = _memory_key(value)
            prev = self.outputs.get(key)
            if prev is not None and prev.total.size == cnt.size:
                both = np.flatnonzero((prev.total > 0) & (cnt > 0))
                if both.size:
                    e = int(both[0])
                    first = prev.stores[0]
                    raise WriteOnceError(f"write-once: {both.size} element(s) of {t.name} are written by this launch "
                                         f"of {kernel} and by an earlier launch of {first[0]} (first "
                                         f"{t.name}{_index(e, shape)}; the earlier store is at {first[1]})", None,
                                         _store_loc(wr, e, t, sites))
                prev.total += cnt
                prev.stores += [(kernel, loc) for loc in t.stores]
            else:
                self.outputs[key] = _Output(t.name, shape, cnt.copy(), [(kernel, loc) for loc in t.stores])

    def note_reads(self, values: list) -> None:
        """Tensors a launch reads: no launch of the session leaves them pure outputs."""
        self.read.update(_memory_key(v) for v in values)

    def note_initialised(self, *arrays) -> None:
        """Outputs the operator's host code filled before its launches, where the launches leave elements to
        that fill by design (the chip's output init: FIA's rows past a batch's actual query length): they are
        judged for double writes, not for holes."""
        for a in arrays:
            a = np.asarray(a)
            start = a.__array_interface__["data"][0]
            self.initialised.append((start, start + a.nbytes))

    def _host_filled(self, key) -> bool:
        return isinstance(key[0], int) and any(lo <= key[0] < hi for lo, hi in self.initialised)

    def finish(self) -> None:
        """Holes: elements of a pure output that no launch of the session wrote, while others were (an output
        the host filled for the launches, ``note_initialised``, has none)."""
        for key, o in self.outputs.items():
            if key in self.read or not o.total.any() or self._host_filled(key):
                continue
            holes = np.flatnonzero(o.total == 0)
            if holes.size:
                kernel, loc = o.stores[0]
                raise WriteOnceError(f"write-once: {holes.size} of {o.total.size} elements of {o.name} are never "
                                     f"written (first {o.name}{_index(int(holes[0]), o.shape)}); {o.name} is a pure "
                                     f"output of {kernel} (no launch reads it), written by the store here", None, loc)


@contextlib.contextmanager
def checked_launches(mode=True):
    """``with checked_launches(CheckMode(...)) as session:`` every kernel launch inside is checked with ``mode``
    (``True``: every check), and write-once is judged over all of them when the block ends."""
    m = CheckMode.of(mode)
    if m is None:
        raise CheckModeError("mode", "checked_launches() needs True or a CheckMode")
    session = CheckSession(m)
    token = _ACTIVE.set(session)
    try:
        yield session
    except BaseException:
        _ACTIVE.reset(token)
        raise
    _ACTIVE.reset(token)
    session.finish()


def active():
    """The innermost ``checked_launches()`` session of this context, or None."""
    return _ACTIVE.get()


def note_host_initialised(*arrays) -> None:
    """Tell the active session (if any) that the host filled these outputs for the launches that follow and
    that the launches leave some of their elements to that fill (``CheckSession.note_initialised``)."""
    session = _ACTIVE.get()
    if session is not None:
        session.note_initialised(*arrays)


def resolve(check):
    """(mode, session, own): the checks a launch's ``check=`` argument asks for (None: the active
    session's), the session judging its writes, and whether the launch owns that session."""
    session = _ACTIVE.get()
    if check is None:
        return (session.mode, session, False) if session is not None else (None, None, False)
    mode = CheckMode.of(check)
    if mode is None:
        return None, None, False
    if session is None:
        return mode, CheckSession(mode), True
    return mode, session, False


# ------------------------------------------------------------------ one checked launch

def launch_checked(runner, mode: CheckMode, session: CheckSession, own: bool, grid: int, args: list,
                   serial: bool, dry: bool):
    """Run ``runner``'s kernel with the checks of ``mode`` (see ``launch.NumbaRunner.launch``)."""
    if grid > MAX_BLOCKS:
        raise CheckModeError("grid", f"checking mode records at most {MAX_BLOCKS} launch blocks, got {grid}")
    if mode.equivalence and not dry:
        _equivalent(runner, mode, session, grid, args, serial)
    else:
        _one_run(runner, mode.per_run, session, grid, args, serial, dry)
    if own and not dry:
        session.finish()


def _one_run(runner, mode: CheckMode, session, grid: int, args: list, serial: bool, dry: bool) -> None:
    variant = runner.variant(mode)
    gen = variant.generated
    info = gen.checks
    flat_args, writeback, storages = runner.convert(grid, args, variant)
    shadows = LaunchShadows(info.plan, storages, info.events)
    err, problems = runner.execute(variant, grid, flat_args, serial, dry, shadows)
    if dry:
        return
    _raise_recorded(runner, gen, err, storages)
    if problems:
        _raise_problem(runner, gen, problems[0], mode)
    values = dict(zip([n for n, k in gen.arg_names if k != "workspace"], args))
    if session is not None and mode.write_once:
        read = accesses(gen.kernel)[1]
        session.note_reads([values[p.name] for p, v in runtime_params(gen.kernel) if p.kind == "tensor"
                            and v.id in read])
        session.record(runner.compiled.name, info.plan, shadows, values, storages, gen.sites)
    runner.write_back(writeback)


def _raise_recorded(runner, gen, err, storages: dict) -> None:
    """The first failed check: a checking-mode record (``err[:, 5:10]``; it came before any failure of the
    kernel's own checks in its block, which stop the block), else the kernel's own (``err[:, 0:5]``)."""
    bad = np.nonzero(err[:, ERR_SITE])[0]
    if not bad.size:
        bad = np.nonzero(err[:, 0])[0]
        if bad.size:
            runner.raise_error(gen, err, int(bad[0]))
        return
    blk = int(bad[0])
    site = int(err[blk, ERR_SITE])
    vals = [int(x) for x in err[blk, ERR_VALUES:ERR_VALUES + 3]]
    message, loc, labels = gen.sites[site - 1]
    group = gen.entry == "group"
    role = int(err[blk, ERR_ROLE])
    who = f"{blk} ({ROLES[role]})" if group else blk
    what = gen.checks.sites[site]
    kind = what[0]
    if kind == "access":
        raise _access_error(gen, blk, who, what, loc, vals, storages)
    vals = vals[:len(labels)]
    if kind == "uninit":
        _, name, origin = what
        at = ", ".join(str(v) for v in vals)
        made = f" (its buffer is created without a fill at {origin}: {_text(origin)})" if origin is not None else ""
        raise UninitialisedReadError(f"reads element ({at}) of tile {name!r}, which no op has written{made}",
                                     who, loc, vals)
    detail = f" ({', '.join(f'{lab}={val}' for lab, val in zip(labels, vals))})" if labels else ""
    raise FlagError(f"{message}{detail}", who, loc, vals)


def _access_error(gen, blk: int, who: str, what: tuple, loc, vals, storages: dict) -> Exception:
    _, name, how, is_ws = what
    e, other, kind = (int(x) for x in vals)
    elem = _element(gen, name, e, blk, is_ws, storages)
    if kind == UNINIT:
        return UninitialisedReadError(f"reads {elem}, which this core group has not written (a hand-off read "
                                      f"before its producer wrote it)", who, loc, (e,))
    if kind == CLOCK:
        return CheckModeError("check", f"core group {blk}: {KINDS[CLOCK]}; run this launch unchecked or with "
                              f"CheckMode(races=False, uninit=False)")
    if kind == AREA:
        return RaceError(f"{how}s {name} element {e}, outside this core group's slots of the channel (another "
                         f"group's hand-offs)", who, loc, (e,))
    oblk, orole, _, osite = entry_fields(other)
    oloc = gen.sites[osite - 1][1] if osite else None
    at = f"{oloc} ({_text(oloc)})" if oloc is not None else "an unknown line"
    if kind in (XWW, XRAW, XWAR):
        unit = "core group" if gen.entry == "group" else "core"
        oacc = "reads" if kind == XWAR else "writes"
        return RaceError(f"race: {unit} {blk} {how}s {elem}, which {unit} {oblk} {oacc} at {at}; launch blocks are "
                         f"never ordered, so no two may access one element when one of them writes it", who, loc,
                         (e, oblk, orole))
    other_role = ROLES[orole]
    if kind == RAW:
        msg = (f"race in core group {blk}: this read of {elem} is not ordered after its last write, by {other_role} "
               f"at {at}: no cross-core flag is set after that write and waited before this read")
    elif kind == WAR:
        msg = (f"race in core group {blk}: this write of {elem} is not ordered after {other_role}'s read of it at "
               f"{at}: no cross-core flag is set after that read and waited before this write (a slot or buffer "
               f"reused too early)")
    else:
        msg = (f"race in core group {blk}: this write of {elem} is not ordered after {other_role}'s write of it at "
               f"{at}: no cross-core flag orders the two writes")
    return RaceError(msg, who, loc, (e, oblk, orole))


def _element(gen, name: str, e: int, blk: int, is_ws: bool, storages: dict) -> str:
    plan = gen.checks.plan
    if is_ws:
        ch = next(w for w in plan.workspace if w.channel == name)
        local = e - (blk * ch.area + ch.lo)
        slot, within = divmod(local, ch.slot)
        return f"workspace slot {slot} of channel {name} (row {within // ch.cols}, column {within % ch.cols})"
    return f"{name}{_index(e, storages[name].shape)}"


def _raise_problem(runner, gen, problem, mode: CheckMode) -> None:
    text = runner.describe(problem, gen)
    if not mode.flags:
        raise SimulationError(text, problem[0])
    blk, kind, data = problem
    if kind == "leftover":
        ids = sorted({fid for _, fid, _ in data})
        sets = "; ".join(f"flag id {fid} is set in the {core} program at {loc}: {_text(loc)}"
                         for fid in ids for core, loc in gen.flag_sets.get(fid, []))
        text += f"\n    {sets}" if sets else ""
    raise FlagError(text, blk)


# ------------------------------------------------------------------ equivalence

def _equivalent(runner, mode: CheckMode, session, grid: int, args: list, serial: bool) -> None:
    """The run in ``runner``'s order, then the other order on copies of the stored tensors, compared bitwise."""
    variant = runner.variant(mode.per_run)
    kernel = variant.generated.kernel
    ids = accesses(kernel)[0]
    stored = {p.name for p, v in runtime_params(kernel) if p.kind == "tensor" and v.id in ids}
    names = [n for n, k in variant.generated.arg_names if k != "workspace"]
    before = {i: _copy(a) for i, (n, a) in enumerate(zip(names, args)) if n in stored}
    _one_run(runner, mode.per_run, session, grid, args, serial, False)
    other_order = "pipelined" if runner.order == "program" else "program"
    other = runner.compiled.runner("numba", other_order)
    oargs = list(args)
    for i, copy in before.items():
        oargs[i] = copy
    other.launch(grid, oargs, serial=serial, check=replace(mode, equivalence=False, write_once=False))
    for i in before:
        mine, theirs = to_storage(args[i], names[i])[0], to_storage(oargs[i], names[i])[0]
        a = mine.reshape(-1).view(f"u{mine.itemsize}")
        b = theirs.reshape(-1).view(f"u{theirs.itemsize}")
        diff = np.flatnonzero(a != b)
        if diff.size:
            e = int(diff[0])
            dt = getattr(args[i], "dtype", None)
            va = from_storage(mine, _dtype_name(dt)).reshape(-1)[e]
            vb = from_storage(theirs, _dtype_name(dt)).reshape(-1)[e]
            locs = _stores_of(kernel, names[i])
            raise EquivalenceError(f"{names[i]}: {diff.size} of {a.size} elements differ between {runner.order} order "
                                   f"and {other_order} order (first {names[i]}{_index(e, mine.shape)}: {va!r} in "
                                   f"{runner.order} order, {vb!r} in {other_order} order)", None,
                                   locs[0] if locs else None)


def _stores_of(kernel, name: str) -> list:
    """Locs of the stores into parameter ``name``."""
    ids = [v.id for p, v in runtime_params(kernel) if p.name == name]
    return accesses(kernel)[0].get(ids[0], []) if ids else []


def _copy(a):
    storage, dt = to_storage(a, "arg")
    return np.asarray(from_storage(storage.copy(), dt))


def _dtype_name(dt) -> str:
    from .storage import dtype_name

    return dtype_name(dt)


# ------------------------------------------------------------------ small helpers

def _index(e: int, shape) -> str:
    if not shape:
        return f"[{e}]"
    return "[" + ", ".join(str(int(i)) for i in np.unravel_index(e, tuple(int(s) for s in shape))) + "]"


def _text(loc) -> str:
    return loc.text.strip() if loc is not None and loc.text else ""


def _last_writer(wr, e: int, sites) -> str:
    if not wr.size or not wr[e]:
        return ""
    blk, role, _, site = entry_fields(wr[e])
    loc = sites[site - 1][1] if site else None
    return f"; the last write is by block {blk} at {loc}: {_text(loc)}" if loc is not None else ""


def _store_loc(wr, e: int, t, sites):
    if wr.size and wr[e]:
        site = entry_fields(wr[e])[3]
        if site:
            return sites[site - 1][1]
    return t.stores[0] if t.stores else None


def _memory_key(value) -> tuple:
    if hasattr(value, "data_ptr"):   # torch
        return ("torch", value.data_ptr(), tuple(value.shape), tuple(value.stride()), str(value.dtype))
    a = np.asarray(value)
    return (a.__array_interface__["data"][0], a.shape, a.strides, a.dtype.str)
