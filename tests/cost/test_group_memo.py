"""The group-loop memo (``sim/cost/group_memo``): a flag-carrying loop's iterations replayed for the whole core
group give the schedule the straightforward interpretation gives, bit for bit: every block's cycles, the busy
fractions, the critical path and every recorded span (its times, op, cause and flow)."""

from __future__ import annotations

import numpy as np
import pytest

import cvtile.sim.cost.block_memo as block_memo
import cvtile.sim.cost.group_memo as group_memo
import cvtile.sim.cost.schedule as schedule
from cvtile.kernels.fia.cost import fia_cost

GQA = dict(args=((4, 8, 256, 64), (4, 2, 1536, 64), np.float16), kw=dict(num_heads=8, num_key_value_heads=2,
           input_layout="BNSD", scale=0.125, actual_seq_lengths_kv=[1536, 1000, 700, 1536]))
ANTIQUANT = dict(args=((12, 8, 1, 128), (12, 1, 1397, 128), np.int8), kw=dict(
    num_heads=8, num_key_value_heads=1, input_layout="BNSD", scale=0.125,
    key_antiquant_scale=np.ones((1, 128), np.float16), value_antiquant_scale=np.ones((1, 128), np.float16)))


def _cost(call, record, memo: bool, monkeypatch, hits: list):
    qs, ks, kdt = call["args"]
    q = np.zeros(qs, np.float16)
    k = np.zeros(ks, kdt)
    real_set_flags = group_memo.set_flags

    def counted(*a):
        hits.append(1)
        return real_set_flags(*a)

    with monkeypatch.context() as m:
        m.setattr(group_memo, "set_flags", counted)
        m.setattr(block_memo, "ENABLED", False)       # every block run: what this memo replays
        if not memo:
            m.setattr(schedule, "group_loops", lambda programs: {})
        return fia_cost(q, k, k.copy(), target="Ascend910B1", record=record, **call["kw"])


def _spans(lc):
    out = []
    for blk, start, spans in lc.recorded:
        index = {id(s): i for i, s in enumerate(spans)}
        out.append((blk, start, [(s.role, s.pipe, s.start, s.end, id(s.op), index.get(id(s.cause), -1)
                                  if s.cause is not None else None, id(s.flow) if s.flow is not None else None)
                                 for s in spans]))
    return out


#: every FIA call of these tests, with spans recorded and without
each_call = pytest.mark.parametrize("call", [GQA, ANTIQUANT], ids=["gqa", "antiquant"])
each_record = pytest.mark.parametrize("record", ["none", "critical"])


@each_call
@each_record
def test_the_group_memo_replays_exactly_what_interpretation_gives(call, record, monkeypatch):
    hits: list = []
    plain = _cost(call, record, False, monkeypatch, [])
    fast = _cost(call, record, True, monkeypatch, hits)
    assert hits, "no group-loop step was replayed: the test does not exercise the memo"
    assert_same(fast, plain)


def assert_same(fast, plain) -> None:
    """Two reports of one call are the same bit for bit: time, bound, every launch's block cycles, busy
    fractions, critical path and recorded spans."""
    assert fast.estimated_us == plain.estimated_us and fast.bound == plain.bound
    for a, b in zip(fast.launches, plain.launches):
        assert a.block_cycles == b.block_cycles and a.busy == b.busy
        assert a.path == b.path and a.path_lines == b.path_lines and a.critical_block == b.critical_block
        assert _spans(a) == _spans(b)
