"""Ping-pong copies of a loop's UB transfer buffers (plan_memory) and the events that alternate them (insert_sync).

A row-chunk loop loads a chunk, computes it and stores it. With one buffer per tile the next chunk's load waits
for this chunk's last vector op; with two copies picked by the iteration's parity it waits only for the chunk
two back, so MTE2, V and MTE3 overlap as on the chip. The copies, the ``ping`` value, the parity event pairs and
the fallback when UB is too small for the copies are pinned here; the simulator's results are unchanged.
"""

from __future__ import annotations

import dataclasses
import importlib

import numpy as np

import cvtile.dsl as ct
from cvtile.dsl.ir import walk
from cvtile.dsl.passes.insert_sync import BACK_ID, PARITY_ID

platform_module = importlib.import_module("cvtile.tiling.platform")


@ct.jit
def rows_exp(x, out, R: ct.constexpr, C: ct.constexpr):
    with ct.vector():
        t = ct.load(x[0:R, 0:C])
        m = ct.rowmax(t)
        p = ct.exp(t - m[:, None])
        ct.store(out[0:R, 0:C], ct.cast(p, ct.float16))


@ct.jit
def rows_mul_exp(x, out, R: ct.constexpr, C: ct.constexpr):
    with ct.vector():
        t = ct.load(x[0:R, 0:C])
        p = ct.exp(t)
        q = t * p
        ct.store(out[0:R, 0:C], ct.cast(q, ct.float16))


def _args(dtype_out=np.float16, rows=64, cols=2048):
    x = np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32) * 0.5
    return x, np.zeros((rows, cols), dtype_out)


def _ping(loop):
    return next(r for op in loop.blocks[0].ops for r in op.results if r.name == "ping")


def _chunk_loop(ck):
    body = ck.compilation.final.programs()["aiv"]
    return next(op for op in walk(body) if op.kind == "for" and "chunk" in op.attrs)


def test_a_chunk_loops_loaded_and_stored_tiles_alternate_two_copies_by_its_parity():
    x, out = _args()
    ck = rows_exp.compile(x, out, R=64, C=2048)
    plan = ck.compilation.final.memory
    loop = _chunk_loop(ck)
    ponged = {b.name: b for b in plan.spaces["UB"].all if b.copies == 2}
    # the loaded tile (and its in-place chain: t - m and exp work over it) and the stored fp16 cast
    assert set(ponged) == {"t", "cast"}, plan.memory_map()
    ping = _ping(loop)
    assert ping.name == "ping" and all(b.parity is ping and b.parity_loop is loop for b in ponged.values())
    # one buffer holds the in-place chain, reserved over the whole loop
    t = ponged["t"]
    assert len(t.values) >= 3 and t.bytes == 2 * 4 * 2048 * 4
    # the row max is compute only: one copy
    assert all(b.copies == 1 for b in plan.spaces["UB"].all if b.name == "m")


def test_the_loops_back_edge_events_wait_for_the_iteration_two_back():
    x, out = _args()
    ck = rows_exp.compile(x, out, R=64, C=2048)
    loop = _chunk_loop(ck)
    ping = _ping(loop)
    inside = [op for op in loop.blocks[0].ops if op.kind in ("event_set", "event_wait") and op.args]
    kinds = {(op.kind, op.attrs["event"]) for op in inside}
    # V -> MTE2: the next load into a copy waits for the reads of that copy; MTE3 -> V: the cast into a copy
    # waits for the store that drained it
    assert kinds == {("event_wait", "V_MTE2"), ("event_set", "V_MTE2"), ("event_wait", "MTE3_V"),
                     ("event_set", "MTE3_V")}
    assert all(op.args == [ping] and (op.attrs["id"], op.attrs["id_odd"]) == (BACK_ID, PARITY_ID) for op in inside)
    body = ck.compilation.final.programs()["aiv"].ops
    at = body.index(loop)
    primes = [(op.attrs["event"], op.attrs["id"]) for op in body[:at] if op.kind == "event_set"]
    drains = [(op.attrs["event"], op.attrs["id"]) for op in body[at + 1:] if op.kind == "event_wait"]
    for ev in ("V_MTE2", "MTE3_V"):   # one set per copy before the loop, one wait per copy after it
        assert sorted(i for e, i in primes if e == ev) == [BACK_ID, PARITY_ID]
        assert sorted(i for e, i in drains if e == ev) == [BACK_ID, PARITY_ID]
    # the printed IR shows the pair
    assert "id_odd=4}(%ping" in ck.ir_after("insert_sync")


def test_results_are_those_of_program_order_in_pipelined_order_with_the_copies():
    x, out = _args()
    rows_exp[1](x, out, R=64, C=2048)
    piped = np.zeros_like(out)
    rows_exp[1](x, piped, R=64, C=2048, order="pipelined")
    assert np.array_equal(out, piped)
    want = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True)).astype(np.float16)
    assert np.abs(out.astype(np.float64) - want.astype(np.float64)).max() <= 2 ** -10


def test_a_program_without_room_for_the_copies_is_planned_with_single_copies(monkeypatch):
    """UB of 120000 bytes: chunk_rows sizes 4-row chunks (t, exp, t * exp and the cast: 14 bytes a column);
    the copies would need 16 bytes a column, so the loop gives them up, its ping ops go, its events are
    plain, and the kernel still fits and computes the same."""
    small = dataclasses.replace(platform_module.get_platform("Ascend910B1"), ub_usable=120000)
    monkeypatch.setattr(platform_module, "get_platform", lambda name=None: small)
    x, out = _args()
    ck = rows_mul_exp.compile(x, out, R=64, C=2048)
    plan = ck.compilation.final.memory
    assert plan.spaces["UB"].fits and all(b.copies == 1 for b in plan.spaces["UB"].all), plan.memory_map()
    loop = _chunk_loop(ck)
    assert loop.attrs["chunk"] == 4
    assert not any(r.name == "ping" for op in walk(loop.blocks[0]) for r in op.results)
    assert not any(op.args for op in walk(ck.compilation.final.programs()["aiv"])
                   if op.kind in ("event_set", "event_wait"))
    rows_mul_exp[1](x, out, R=64, C=2048)
    want = (x.astype(np.float64) * np.exp(x.astype(np.float64))).astype(np.float16)
    assert np.abs(out.astype(np.float64) - want.astype(np.float64)).max() <= 2 ** -9


@ct.jit
def blocks_exp(x, out, R: ct.constexpr, C: ct.constexpr, BR: ct.constexpr):
    for r0 in range(0, R, BR):
        with ct.vector():
            t = ct.load(x[ct.ds(r0, BR), 0:C])
            m = ct.rowmax(t)
            p = ct.exp(t - m[:, None])
            ct.store(out[ct.ds(r0, BR), 0:C], ct.cast(p, ct.float16))


def test_a_chunk_loops_pairs_stay_open_across_the_loop_around_it():
    """The chunk loop's primes are not re-issued before each run inside the block loop (a prime is a set on
    the vector pipe after all vector work before it: the next block's first load would wait for the last
    block's whole tail); they stand before the block loop, the drains after it, and each run's first
    iteration waits for the last run's iteration of the same parity."""
    x, out = _args(rows=128)
    ck = blocks_exp.compile(x, out, R=128, C=2048, BR=64)
    body = ck.compilation.final.programs()["aiv"].ops
    outer = next(i for i, op in enumerate(body) if op.kind == "for")
    chunk = next(op for op in walk(body[outer].blocks[0]) if op.kind == "for")
    assert {(op.attrs["id"], op.attrs["id_odd"]) for op in walk(chunk.blocks[0])
            if op.kind == "event_wait" and op.attrs["event"] == "V_MTE2"} == {(BACK_ID + 1, PARITY_ID + 1)}
    tops = [(op.kind, op.attrs["id"]) for op in body if op.kind.startswith("event") and op.attrs["event"] == "V_MTE2"]
    assert tops.count(("event_set", BACK_ID + 1)) == tops.count(("event_set", PARITY_ID + 1)) == 1
    assert tops.count(("event_wait", BACK_ID + 1)) == tops.count(("event_wait", PARITY_ID + 1)) == 1
    inner = [op for op in body[outer].blocks[0].ops if op.kind.startswith("event") and op.attrs["id"] in
             (BACK_ID + 1, PARITY_ID + 1) and op.attrs["event"] == "V_MTE2"]
    assert not inner
    blocks_exp[1](x, out, R=128, C=2048, BR=64)
    piped = np.zeros_like(out)
    blocks_exp[1](x, piped, R=128, C=2048, BR=64, order="pipelined")
    assert np.array_equal(out, piped)
    want = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True)).astype(np.float16)
    assert np.abs(out.astype(np.float64) - want.astype(np.float64)).max() <= 2 ** -10
