"""Scalar code in kernels: constexpr parameters and folding, compile-time calls, int/float arithmetic and
promotion, floor division and modulo, min/max, comparisons and chains, and/or/not, conditional expressions.

One kernel computes every runtime expression and packs the results into one int64 and one float32 tile
(``pack``: an @inline helper that selects each value into its slot), so the whole file costs one numba
compile. Expected values are Python's (ints) and numpy float32's (floats: runtime float scalars are float32).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import cvtile.dsl as ct

NSLOT = 48


@ct.inline
def pack(vals, dtype):
    """A rank-1 tile whose element k is vals[k] (scalars or compile-time values)."""
    idx = ct.iota(NSLOT, ct.int32)
    out = ct.zeros((NSLOT,), dtype)
    for k in ct.static_range(len(vals)):
        out = ct.where(idx == k, vals[k], out)
    return out


@ct.jit
def scalar_exprs(iout, fout, a, b, x, D: ct.constexpr):
    ints = (
        a + b, a - b, a * b, a // b, a % b, (-a) // b, (-a) % b, a // (-b), a % (-b),      # 0-8
        min(a, b), max(a, b, 3), min(a, 2 * b, 100),                                       # 9-11
        a < b, a <= b, a > b, a >= b, a == b, a != b,                                      # 12-17
        1 < a < b, 0 < b < a, b < a < 10,                                                  # 18-20
        (a > 0) and (b > 0), (a > 100) or (b > 0), not a, not (a > 100), (a > 100) or (b > 100),  # 21-25
        a if a > b else b, a if a < b else b,                                              # 26-27
        D * 2 + 1, int(math.sqrt(D)), D // 3, D % 5, int(x), abs(-a), ~a,                # 28-34
        a << 2, a >> 1, a ^ b, a & b, a | b, -a, b - a * 2,                                # 35-41
        ct.block_idx(), ct.block_num(),                                                    # 42-43
    )
    floats = (
        a / b, x * a, x + 1, a + 0.5, x / 3, min(x, a), max(x, 1), math.sqrt(D) * x,      # 0-7
        x if a > b else a, x if a < b else a, float(a), -x, abs(-x), 7 / 2, x * x - 2.0,   # 8-14
        math.pi * D, 1 / D, x - a * 0.25,                                                  # 15-17
    )
    with ct.vector():
        ct.store(iout[ct.block_idx(), 0:NSLOT], pack(ints, ct.int64))     # one row per core
        ct.store(fout[ct.block_idx(), 0:NSLOT], pack(floats, ct.float32))


A, B, X, D = 7, 3, np.float32(0.1), 16
GRID = 3


def _expected_ints(a, b, x, d):
    return [a + b, a - b, a * b, a // b, a % b, (-a) // b, (-a) % b, a // (-b), a % (-b),
            min(a, b), max(a, b, 3), min(a, 2 * b, 100),
            a < b, a <= b, a > b, a >= b, a == b, a != b,
            1 < a < b, 0 < b < a, b < a < 10,
            (a > 0) and (b > 0), (a > 100) or (b > 0), not a, not (a > 100), (a > 100) or (b > 100),
            a if a > b else b, a if a < b else b,
            d * 2 + 1, int(math.sqrt(d)), d // 3, d % 5, int(x), abs(-a), ~a,
            a << 2, a >> 1, a ^ b, a & b, a | b, -a, b - a * 2]


def _with_ids(ints, core, grid):
    return ints + [core, grid]   # block_idx(), block_num()


def _expected_floats(a, b, x, d):
    f = np.float32
    a32 = f(a)
    return [f(a32 / f(b)), x * a32, x + f(1), a32 + f(0.5), x / f(3), min(x, a32), max(x, f(1)),
            f(math.sqrt(d)) * x, x if a > b else a32, x if a < b else a32, a32, -x, abs(x), f(3.5),
            x * x - f(2.0), f(math.pi * d), f(1 / d), x - a32 * f(0.25)]


@pytest.fixture(scope="module")
def scalar_results():
    iout = np.full((GRID, NSLOT), -12345, np.int64)
    fout = np.full((GRID, NSLOT), np.nan, np.float32)
    scalar_exprs[GRID](iout, fout, A, B, X, D=D)
    return iout, fout


def test_integer_expressions_match_python(scalar_results):
    iout, _ = scalar_results
    want = [int(v) for v in _expected_ints(A, B, float(X), D)]
    for core in range(GRID):
        assert iout[core, :len(want) + 2].tolist() == _with_ids(want, core, GRID)


def test_float_expressions_are_float32_and_promote_ints(scalar_results):
    _, fout = scalar_results
    want = np.array(_expected_floats(A, B, X, D), np.float32)
    got = fout[:, :len(want)]
    assert got.tobytes() == np.tile(want, (GRID, 1)).tobytes(), np.nonzero(got != want)


def test_floor_division_and_modulo_follow_python_signs(scalar_results):
    iout, _ = scalar_results
    assert iout[0, 5:9].tolist() == [-3, 2, -3, -2]  # -7//3, -7%3, 7//-3, 7%-3


def test_second_launch_with_other_scalars_reuses_the_compilation(scalar_results):
    iout = np.zeros((1, NSLOT), np.int64)
    fout = np.zeros((1, NSLOT), np.float32)
    before = scalar_exprs.compile(iout, fout, A, B, X, D=D)
    a, b, x = -9, 4, np.float32(2.75)
    scalar_exprs[1](iout, fout, a, b, x, D=D)
    assert scalar_exprs.compile(iout, fout, a, b, x, D=D) is before
    want = [int(v) for v in _expected_ints(a, b, float(x), D)]
    assert iout[0, :len(want) + 2].tolist() == _with_ids(want, 0, 1)
    wantf = np.array(_expected_floats(a, b, x, D), np.float32)
    assert fout[0, :len(wantf)].tobytes() == wantf.tobytes()


# ------------------------------------------------------------------ folding (IR only, no numba compile)

@ct.jit
def folded(o, n, D: ct.constexpr, SCALE: ct.constexpr):
    k = D * 2 + 1                  # folds to 33
    r = math.sqrt(D) * SCALE       # compile-time call, folds to 8.0
    w = (D > 8) and (SCALE == 2)   # folds to True
    with ct.vector():
        if w:
            ct.store(o[0:4], ct.full((4,), n * k + r, ct.float32))
        else:
            ct.store(o[0:4], ct.full((4,), -1.0, ct.float32))


def test_constexpr_arithmetic_and_compile_time_calls_fold():
    ck = folded.compile(np.zeros(4, np.float32), 5, D=16, SCALE=2)
    text = str(ck.ir)
    assert "D=16" in text and "SCALE=2" in text
    assert "sbin.mul(%n" in text and ", 33)" in text   # n * 33: D * 2 + 1 folded
    assert "8.0" in text                                # math.sqrt(16) * 2 folded
    assert "-1.0" not in text                           # the constant-false branch is not in the IR
    assert all(op.kind != "if" for op in ck.ir.ops())  # no IR branch for a compile-time condition
    sbin_ops = [op.attrs["op"] for op in ck.ir.ops() if op.kind == "sbin"]
    assert sbin_ops.count("mul") == 1 and "gt" not in sbin_ops and "eq" not in sbin_ops


def test_constexpr_values_change_the_folded_constants():
    text = str(folded.compile(np.zeros(4, np.float32), 5, D=9, SCALE=2).ir)
    assert ", 19)" in text and "6.0" in text


def test_runtime_conditional_expression_is_a_select():
    @ct.jit
    def sel(o, a, b):
        with ct.vector():
            ct.store(o[0:1], ct.full((1,), a if a > b else b, ct.int64))

    ck = sel.compile(np.zeros(1, np.int64), 1, 2)
    assert [op.kind for op in ck.ir.ops()].count("sselect") == 1


def test_regression_len_of_a_tuple_with_runtime_values():
    # len() of a tuple holding runtime values was "cannot be called with runtime values"
    @ct.jit
    def lens(o, a):
        vals = (a + 1, a * 2, 3)
        with ct.vector():
            ct.store(o[0:1], ct.full((1,), len(vals) * 10 + len((a,)), ct.int64))

    text = str(lens.compile(np.zeros(1, np.int64), 5).ir)
    assert "create{nvalid=0}(31)" in text
