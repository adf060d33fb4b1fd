"""The per-iteration memo of core-local loops (``schedule._IterationMemo``): a loop whose whole-loop key is new is
timed iteration by iteration, and an iteration seen before in the same relative clock state is replayed. The
schedule is the straightforward interpretation's, bit for bit (``test_group_memo.assert_same``)."""

from __future__ import annotations

import numpy as np
import pytest

import cvtile.sim.cost.schedule as schedule
from cvtile.kernels.fia.cost import fia_cost

from .test_group_memo import assert_same

#: a prefill the tiling splits over the KV (flash decode): the attention kernel's row loops and the combine's loops
#: over rows and splits repeat their iterations
FD_PREFILL = dict(q=(2, 8, 512, 128), k=(2, 1, 4096, 128), kw=dict(num_heads=8, num_key_value_heads=1,
                                                                 input_layout="BNSD", scale=0.125))


def _cost(record: str, per_iteration: bool, monkeypatch, made: list):
    q = np.zeros(FD_PREFILL["q"], np.float16)
    k = np.zeros(FD_PREFILL["k"], np.float16)
    real = schedule._IterationMemo.__init__

    def init(self, *a):
        real(self, *a)
        made.append(self)

    with monkeypatch.context() as m:
        m.setattr(schedule._IterationMemo, "__init__", init)
        if not per_iteration:
            m.setattr(schedule._IterationMemo, "ready", lambda self: False)
        return fia_cost(q, k, k.copy(), target="Ascend910B1", record=record, **FD_PREFILL["kw"])


@pytest.mark.parametrize("record", ["none", "critical"])
def test_replayed_iterations_give_the_interpreted_schedule(record, monkeypatch):
    made: list = []
    plain = _cost(record, False, monkeypatch, [])
    fast = _cost(record, True, monkeypatch, made)
    assert len(fast.launches) == 2, "the call no longer splits the KV: pick one that does"
    assert sum(m.hits for m in made) > 0, "no iteration was replayed: the test does not exercise the memo"
    assert_same(fast, plain)


def test_a_loop_whose_lookups_keep_missing_stops_looking_up():
    memo = schedule._IterationMemo(None, None, set())
    memo.compiled, memo.prepass = True, (lambda vals, blk, sub: ())
    memo.tries, memo.hits = 255, 0
    assert memo.ready()
    memo.tries = 256
    assert not memo.ready() and memo.prepass is None
