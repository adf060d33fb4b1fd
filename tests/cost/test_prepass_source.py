"""The group memo's generated prepass (``sim/cost/prepass_source``) computes what the step tree's interpreter
computes: on every iteration of every group loop of FIA calls, the same key and the same value table after it;
and the estimates (every block's cycles, busy fractions, critical path, recorded spans) are those of the
interpretation without any group memo."""

from __future__ import annotations

import cvtile.sim.cost.group_memo as group_memo
import cvtile.sim.cost.schedule as schedule

from .test_group_memo import _cost, assert_same, each_call, each_record


def _same(a, b) -> bool:
    return a is b or a == b or (a != a and b != b)      # NaN keys compare equal to themselves


def _checked(calls: list):
    real = group_memo.compile_prepass

    def both(loop, relevant, scalar_fn, tile_operands, scalar_src=lambda op: None, generated=True):
        gen = real(loop, relevant, scalar_fn, tile_operands, scalar_src, generated=True)
        ref = real(loop, relevant, scalar_fn, tile_operands, scalar_src, generated=False)
        if gen is None or ref is None:
            assert gen is None and ref is None
            return None

        def prepass(vals, blk, sub):
            mine = dict(vals)
            want = ref[0](mine, blk, sub)
            got = gen[0](vals, blk, sub)
            assert got == want
            assert vals.keys() == mine.keys()
            assert all(_same(vals[k], mine[k]) for k in vals)
            calls.append(1)
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
