"""The group memo's generated prepass (``sim/cost/prepass_source``) computes what the step tree's interpreter
computes: on every iteration of every group loop of FIA calls, the same key and the same value table after it;
and the estimates (every block's cycles, busy fractions, critical path, recorded spans) are those of the
interpretation without any group memo."""

from __future__ import annotations

import numpy as np

import cvtile.sim.cost.block_memo as block_memo
import cvtile.sim.cost.group_memo as group_memo
import cvtile.sim.cost.schedule as schedule
from cvtile.kernels.fia.cost import fia_cost

from .test_group_memo import _cost, assert_same, each_call, each_record


def _same(a, b) -> bool:
    return a is b or a == b or (a != a and b != b)      # NaN keys compare equal to themselves


def _checked(calls: list, marked_calls: list | None = None):
    real = group_memo.compile_prepass
    marked_calls = [] if marked_calls is None else marked_calls

    def both(loop, relevant, scalar_fn, tile_operands, scalar_src=lambda op: None, generated=True, marked=None):
        gen = real(loop, relevant, scalar_fn, tile_operands, scalar_src, generated=True, marked=marked)
        ref = real(loop, relevant, scalar_fn, tile_operands, scalar_src, generated=False, marked=marked)
        if gen is None or ref is None:
            assert gen is None and ref is None
            return None

        def prepass(vals, blk, sub, marks=None):
            mine = dict(vals)
            my_marks = None if marks is None else []
            want = ref[0](mine, blk, sub, my_marks)
            got = gen[0](vals, blk, sub, marks)
            assert got == want
            assert marks == my_marks
            assert vals.keys() == mine.keys()
            assert all(_same(vals[k], mine[k]) for k in vals)
            calls.append(1)
            if marks:
                marked_calls.append(1)
            return got
        return prepass, gen[1]
    return both


@each_call
@each_record
def test_the_generated_prepass_gives_the_interpreters_keys(call, record, monkeypatch):
    calls: list = []
    plain = _cost(call, record, False, monkeypatch, [])
    monkeypatch.setattr(schedule, "compile_prepass", _checked(calls))
    hits: list = []
    fast = _cost(call, record, True, monkeypatch, hits)
    assert calls and hits, "no prepass ran or no step was replayed: the test does not exercise the generated code"
    assert_same(fast, plain)


def _result(fn, *args):
    try:
        return ("=", fn(*args))
    except Exception as e:  # noqa: BLE001 - the same exception is part of the same result
        return ("!", type(e))


def test_inline_scalar_ops_compute_what_the_evaluators_compute():
    """Every scalar op the generated code writes in line (``schedule._INLINE_SBIN`` / ``_INLINE_SUN``) gives the
    evaluator's value, of the same type, on ints, floats, bools and zero divisors (``_sbin``'s 0)."""
    values = [0, 1, -3, 7, 2.5, -0.0, 0.0, float("inf"), float("nan"), True, False]
    for name, expr in schedule._INLINE_SBIN.items():
        inline = eval("lambda a, b: " + expr.format("a", "b"))   # noqa: S307 - the template under test
        for a in values:
            for b in values:
                want, got = _result(schedule._SBIN[name], a, b), _result(inline, a, b)
                assert type(want[1]) is type(got[1]) and _same(want[1], got[1]), (name, a, b, want, got)
    unary = {"neg": lambda a: -a, "not": lambda a: not a, "abs": abs}
    for name, expr in schedule._INLINE_SUN.items():
        inline = eval("lambda a: " + expr.format("a"))   # noqa: S307
        for a in values:
            want, got = _result(unary[name], a), _result(inline, a)
            assert type(want[1]) is type(got[1]) and _same(want[1], got[1]), (name, a, want, got)


@each_call
def test_the_generated_whole_program_prepass_marks_the_group_loops_as_the_interpreter_does(call, monkeypatch):
    """With the block memo on, the whole-program prepass (``block_memo``'s key) also marks every group loop
    iteration (``compile_prepass(marked=...)``): the generated code appends the same marks as the interpreter."""
    calls: list = []
    marked: list = []
    plain = _cost(call, "none", True, monkeypatch, [])
    monkeypatch.setattr(schedule, "compile_prepass", _checked(calls, marked))
    monkeypatch.setattr(block_memo, "ENABLED", True)
    qs, ks, kdt = call["args"]
    k = np.zeros(ks, kdt)
    fast = fia_cost(np.zeros(qs, np.float16), k, k.copy(), target="Ascend910B1", record="none", **call["kw"])
    assert marked, "no whole-program prepass marked a group loop: the test does not exercise the marks"
    assert_same(fast, plain)
