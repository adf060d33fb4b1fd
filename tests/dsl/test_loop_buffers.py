"""Where a loop's buffers live: in-place recurrences, the stages of a pipelined loop, the back-edge events.

* ``acc = acc * alpha; acc = acc + o`` in a loop is one buffer: each link of the chain reads the one before
  for the last time (the vector unit works in place), as the carried accumulator does;
* the stages of a pipelined loop run beside each other on the chip (the next step's loads while this step's
  vector work runs), so a buffer of one stage never takes the address of another's, when UB has the room;
* a loop's back-edge event is set right after the op its hazards wait for, not after the pipe's last op
  of the body (which would make the next iteration's first load wait for unrelated vector work).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

import cvtile.dsl as ct
from cvtile.dsl.ir import walk

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@ct.jit
def rescaled_sum(x, y, out, N: ct.constexpr, C: ct.constexpr):
    with ct.vector():
        acc = ct.zeros((16, C), ct.float32)
    for i in range(N):
        with ct.vector():
            a = ct.load(x[ct.ds(i * 16, 16), 0:C])
            b = ct.load(y[ct.ds(i * 16, 16), 0:C])
            acc = acc * a
            acc = acc + b
    with ct.vector():
        ct.store(out[0:16, 0:C], acc)


def test_an_in_place_recurrence_is_one_buffer_with_the_carried_accumulator():
    x = np.full((64, 64), 0.5, np.float32)
    y = np.ones((64, 64), np.float32)
    out = np.zeros((16, 64), np.float32)
    ck = rescaled_sum.compile(x, y, out, N=4, C=64)
    plan = ck.compilation.final.memory
    body = ck.compilation.final.programs()["aiv"]
    loop = next(op for op in walk(body) if op.kind == "for")
    mul = next(op for op in walk(loop.blocks[0]) if op.kind == "ewise" and op.attrs["op"] == "mul")
    carried = loop.blocks[0].args[1]
    assert plan.buffer_of[mul.results[0].id] is plan.buffer_of[carried.id]
    rescaled_sum[1](x, y, out, N=4, C=64)
    want = np.zeros((16, 64))
    for i in range(4):
        want = want * 0.5 + 1.0
    assert np.array_equal(out, want.astype(np.float32))


def _flash_attention():
    spec = importlib.util.spec_from_file_location("ex_flash_attention", EXAMPLES / "03_flash_attention.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.flash_attention


def test_a_pipelined_loops_stages_keep_apart_in_ub():
    fa = _flash_attention()
    S, D = 2048, 128
    q = np.zeros((S, D), np.float16)
    ck = fa.compile(q, q, q, q.copy(), 0.088, S=S, D=D, BM=128, BN=1024)
    final = ck.compilation.final
    plan = final.memory
    body = final.programs()["aiv"]
    piped = next(op for op in walk(body) if op.kind == "for" and op.attrs.get("stages", 1) > 1)
    chunk = next(op for op in walk(piped.blocks[0]) if op.kind == "for" and op.attrs.get("chunk"))
    in_chunk = {id(o) for o in walk(chunk.blocks[0])}
    copies = [b for b in plan.spaces["UB"].all if b.parity_loop is chunk]
    later = [plan.buffer_of[o.results[0].id] for o in walk(piped.blocks[0])
             if o.kind == "load" and id(o) not in in_chunk and o.results[0].id in plan.buffer_of]
    assert copies and later
    for b in later:     # the P.V tile the next stage loads never lands on the score chunks' copies
        assert all(b.offset >= c.offset + c.bytes or c.offset >= b.offset + b.bytes for c in copies), \
            plan.memory_map()


@ct.jit
def early_reader(x, out, N: ct.constexpr, C: ct.constexpr):
    for i in range(N):
        with ct.vector():
            a = ct.load(x[ct.ds(i * 16, 16), 0:C])
            s = ct.rowsum(a)
            t = ct.exp(ct.zeros((16, C), ct.float32) + s[:, None])
            ct.store(out[ct.ds(i * 16, 16), 0:C], t)


def test_a_back_edge_set_follows_the_op_its_hazard_waits_for():
    x = np.zeros((64, 64), np.float32)
    ck = early_reader.compile(x, x.copy(), N=4, C=64)
    loop = next(op for op in walk(ck.compilation.final.programs()["aiv"]) if op.kind == "for")
    ops = loop.blocks[0].ops
    reduce_at = next(i for i, op in enumerate(ops) if op.kind == "reduce")
    sets = [i for i, op in enumerate(ops) if op.kind == "event_set" and op.attrs["event"] == "V_MTE2"
            and op.attrs["id"] != 0]
    # the next iteration's load of a waits for the row sum (the last reader of a), not for the exp after it
    assert sets == [reduce_at + 1]
