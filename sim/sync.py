"""The baton of a simulated core group: its AIC and AIV programs as threads that meet only at flags.

Model
-----
In pipelined order each program of a core group (the AIC program, the AIV
program as sub-block 0 and as sub-block 1) runs on a thread of its own, as
the chip runs them on separate cores. To keep a run deterministic (a missing
flag must change the result every time, not once in a while) exactly one of
the three runs at any moment: it holds the *baton*. A program keeps the baton
until it waits on a flag that is down (or finishes); then it passes the baton
to the next program still running, in the order AIC, AIV 0, AIV 1, and waits
until the baton comes back. So the AIC runs ahead as far as its flags allow,
then each AIV in turn: the adversarial order for a slot that is reused too
early (the producer overwrites it before the consumer has read it).

A deadlock is a full round in which no program made progress (no flag was
set or taken and none finished) while some still wait: the program that sees
it marks the group aborted and releases the others, which return at once; the
waiting programs' wait sites are left in ``sched`` for the report. A program
that fails a check aborts the group the same way. Nothing ever blocks without
a bound: every wait loop also watches the abort mark.

``sched`` (int64[16]) of one group:
  0 turn (the role holding the baton; -1: nobody)   1 alive (bit per role)
  2 abort (0, 1 a failed check, 2 a deadlock)       3 idle (passes without progress in a row)
  4 progress (sets, completed waits, finishes)      5..7 the wait site each role is blocked at (0: none)
  8..10 progress when each role last took the baton

Memory ordering: the baton is handed over with sequentially consistent
atomic stores and taken with atomic loads, so what one program wrote (slots,
flag counters) is visible to the next holder; nothing else is shared while a
program runs.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["atomic_load", "atomic_store", "atomic_xchg", "atomic_add", "atomic_cas", "take_turn", "wait_turn", "finish_turn", "abort_group", "new_sched",
           "ROLES", "SCHED_WAIT"]

ROLES = ("aic", "aiv0", "aiv1")
SCHED_WAIT = 5

_yield = types.ExternalFunction("sched_yield", types.int32())


def _element_ptr(context, builder, sig, args):
    """The LLVM pointer to ``arr[idx]`` of an intrinsic's (arr, idx, ...) arguments."""
    aryty = sig.args[0]
    ary = context.make_array(aryty)(context, builder, args[0])
    return cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]])


@intrinsic
def atomic_load(typingctx, arr, idx):
    """arr[idx] read with a sequentially consistent atomic load (int64 arrays)."""
    sig = types.int64(arr, idx)

    def codegen(context, builder, sig, args):
        return builder.load_atomic(_element_ptr(context, builder, sig, args), "seq_cst", 8)

    return sig, codegen


@intrinsic
def atomic_store(typingctx, arr, idx, val):
    """arr[idx] = val with a sequentially consistent atomic store (int64 arrays)."""
    sig = types.void(arr, idx, types.int64)

    def codegen(context, builder, sig, args):
        val = context.cast(builder, args[2], sig.args[2], types.int64)
        builder.store_atomic(val, _element_ptr(context, builder, sig, args), "seq_cst", 8)
        return context.get_dummy_value()

    return sig, codegen


def _atomic_rmw(op: str, doc: str):
    """An intrinsic ``f(arr, idx, val) -> old``: the sequentially consistent read-modify-write ``op`` of
    ``arr[idx]`` (int64 arrays), returning the value it replaced."""
    @intrinsic
    def rmw(typingctx, arr, idx, val):
        sig = types.int64(arr, idx, types.int64)

        def codegen(context, builder, sig, args):
            v = context.cast(builder, args[2], sig.args[2], types.int64)
            return builder.atomic_rmw(op, _element_ptr(context, builder, sig, args), v, "seq_cst")

        return sig, codegen

    rmw.__doc__ = doc
    return rmw


atomic_xchg = _atomic_rmw("xchg", "arr[idx] = val atomically; returns the old value (int64 arrays).")
atomic_add = _atomic_rmw("add", "arr[idx] += val atomically; returns the old value (int64 arrays).")


@intrinsic
def atomic_cas(typingctx, arr, idx, expected, val):
    """arr[idx] = val if it holds ``expected`` (sequentially consistent compare-and-swap, int64 arrays); returns
    the value it held."""
    sig = types.int64(arr, idx, types.int64, types.int64)

    def codegen(context, builder, sig, args):
        exp = context.cast(builder, args[2], sig.args[2], types.int64)
        new = context.cast(builder, args[3], sig.args[3], types.int64)
        res = builder.cmpxchg(_element_ptr(context, builder, sig, args), exp, new, "seq_cst", "seq_cst")
        return builder.extract_value(res, 0)

    return sig, codegen


def new_sched(roles: int = 3) -> np.ndarray:
    s = np.zeros(16, np.int64)
    s[1] = (1 << roles) - 1
    return s


@njit(cache=True, nogil=True)
def take_turn(sched, role):
    """Wait until ``role`` holds the baton; True when the group aborted meanwhile."""
    while atomic_load(sched, 0) != role:
        if atomic_load(sched, 2) != 0:
            return True
        _yield()
    sched[8 + role] = sched[4]
    return atomic_load(sched, 2) != 0


@njit(cache=True, nogil=True)
def _next_alive(sched, role):
    alive = sched[1]
    for k in range(1, 4):
        r = (role + k) % 3
        if alive & (1 << r):
            return r
    return -1


@njit(cache=True, nogil=True)
def wait_turn(sched, role):
    """``role`` waits on a flag that is down: pass the baton on and take it back; True when the group aborted
    (a deadlock found here, a failed check elsewhere)."""
    if sched[4] != sched[8 + role]:
        sched[3] = 0
    else:
        sched[3] += 1
    alive = sched[1]
    n = (alive & 1) + ((alive >> 1) & 1) + ((alive >> 2) & 1)
    if sched[3] >= n:          # everyone still running had a turn since anything moved
        atomic_store(sched, 2, 2)
        atomic_store(sched, 0, -1)
        return True
    atomic_store(sched, 0, _next_alive(sched, role))
    return take_turn(sched, role)


@njit(cache=True, nogil=True)
def finish_turn(sched, role):
    """``role``'s program ended: it leaves the group and passes the baton on."""
    sched[1] &= ~(1 << role)
    sched[4] += 1
    sched[3] = 0
    atomic_store(sched, 0, _next_alive(sched, role))


@njit(cache=True, nogil=True)
def abort_group(sched):
    """A failed check: every program of the group returns."""
    atomic_store(sched, 2, 1)
    atomic_store(sched, 0, -1)
