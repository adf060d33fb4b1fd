"""The whole-block memo (``sim/cost/block_memo``): a block whose key was seen before takes the recorded cycles and
busy cycles, and the launch's estimate is bit for bit the one running every block gives; blocks that differ are
not merged."""

from __future__ import annotations

import numpy as np
import pytest

import cvtile.sim.cost as cost
import cvtile.sim.cost.block_memo as block_memo
import cvtile.sim.cost.group_memo as group_memo
from cvtile.kernels.fia.cost import fia_cost

import cvtile.dsl as ct

from .test_cost_model import _matmul
from .test_group_memo import GQA, assert_same, each_call


@ct.jit
def chunks(x, out, N: ct.constexpr, BLOCK: ct.constexpr):
    """Each block copies its chunks of BLOCK rows (the last of all short), each in two column halves."""
    for r0 in range(ct.block_idx() * BLOCK, N, ct.block_num() * BLOCK):
        n = min(BLOCK, N - r0)
        for c0 in range(0, 256, 128):
            with ct.vector():
                ct.store(out[ct.ds(0, BLOCK, valid=n), ct.ds(c0, 128)], ct.load(x[ct.ds(0, BLOCK, valid=n),
                                                                                  ct.ds(c0, 128)]))


def _memos(monkeypatch, on: bool) -> list:
    """Switch the block memo on or off; the memos ``estimate`` builds are appended to the list returned."""
    made: list = []

    class Spy(block_memo.BlockMemo):
        def __init__(self, *a):
            super().__init__(*a)
            made.append(self)

    monkeypatch.setattr(block_memo, "ENABLED", on)
    monkeypatch.setattr(cost, "BlockMemo", Spy)
    return made


def _fields(lc) -> tuple:
    return (lc.block_cycles, lc.busy, lc.compute_cycles, lc.path, lc.path_lines, lc.critical_block, lc.cycles)


def test_identical_blocks_run_once_and_give_what_running_each_gives(monkeypatch):
    made = _memos(monkeypatch, True)
    fast = _matmul(grid=8)
    assert made and made[0].hits == 7 and len(made[0].seen) == 1
    _memos(monkeypatch, False)
    plain = _matmul(grid=8)
    assert _fields(fast) == _fields(plain)


def test_blocks_with_other_work_are_not_merged(monkeypatch):
    x = np.zeros((1000, 256), np.float16)
    out = np.zeros_like(x)
    made = _memos(monkeypatch, True)
    # 16 row chunks, 64 b + 384 i: blocks 0-2 copy three full ones, block 3 two and one of 40 rows, 4-5 two
    fast = chunks.on("Ascend910B2").cost(6, x, out, N=1000, BLOCK=64)
    assert len(set(fast.block_cycles)) == 3
    assert len(made[0].seen) == 3 and made[0].hits == 3
    _memos(monkeypatch, False)
    plain = chunks.on("Ascend910B2").cost(6, x, out, N=1000, BLOCK=64)
    assert _fields(fast) == _fields(plain)


@pytest.mark.parametrize("record", ["none", "critical"])
def test_a_fia_call_gives_what_running_every_block_gives(monkeypatch, record):
    qs, ks, kdt = GQA["args"]
    q, k = np.zeros(qs, np.float16), np.zeros(ks, kdt)
    made = _memos(monkeypatch, True)
    fast = fia_cost(q, k, k.copy(), target="Ascend910B1", record=record, **GQA["kw"])
    assert any(m.instances for m in made), "no launch had a whole-program prepass"
    _memos(monkeypatch, False)
    plain = fia_cost(q, k, k.copy(), target="Ascend910B1", record=record, **GQA["kw"])
    assert_same(fast, plain)


@each_call
@pytest.mark.parametrize("record", ["none", "critical"])
def test_group_steps_keyed_on_the_blocks_key_give_what_the_loops_prepass_gives(monkeypatch, call, record):
    """A block that is run takes its group steps' inputs from its whole-program key (``group_memo.StepInputs``)
    instead of running each group loop's prepass; the estimate is bit for bit the one the loops' own prepasses
    give, and every iteration a program holds is found in the key in order (none lost)."""
    qs, ks, kdt = call["args"]
    q, k = np.zeros(qs, np.float16), np.zeros(ks, kdt)
    taken: list = []
    real_take = group_memo.StepInputs.take

    def take(self, name, off):
        got = real_take(self, name, off)
        taken.append(got is not None)
        return got

    with monkeypatch.context() as m:
        m.setattr(group_memo.StepInputs, "take", take)
        fast = fia_cost(q, k, k.copy(), target="Ascend910B1", record=record, **call["kw"])
    assert taken and all(taken), "no group step took its inputs from the block's key, or one was lost"
    monkeypatch.setattr(block_memo, "StepInputs", lambda key, marks: None)     # every step keyed by its prepass
    plain = fia_cost(q, k, k.copy(), target="Ascend910B1", record=record, **call["kw"])
    assert_same(fast, plain)
