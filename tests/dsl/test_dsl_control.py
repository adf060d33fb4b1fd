"""Control flow: `for` over range is one IR loop (not unrolled) with loop-carried scalars and tiles;
zero-trip and nested loops; static_range unrolls; `if` on a constexpr keeps one branch, `if` on a runtime
scalar is an IR `if` whose results are the variables the arms assign; scopes inside loops and branches.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import cvtile.dsl as ct

NSLOT = 16


@ct.inline
def pack(vals, dtype):
    idx = ct.iota(NSLOT, ct.int32)
    out = ct.zeros((NSLOT,), dtype)
    for k in ct.static_range(len(vals)):
        out = ct.where(idx == k, vals[k], out)
    return out


@ct.jit
def scalar_flow(iout, fout, n):
    s = 0
    f = 0.0
    for i in range(n):                 # loop-carried int and float
        s = s + i
        f = f + 0.5
    z = 100
    for i in range(5, n - 10):         # zero trips when n < 15
        z = z + 1
    nest = 0
    for i in range(3):                 # nested, inner bounds depend on the outer variable
        for j in range(i, 4):
            nest = nest + i * j
    st = 0
    for i in ct.static_range(4):       # unrolled: i is a compile-time int
        st = st * 10 + i
    down = 0
    for i in range(n, 0, -3):          # negative step
        down = down + i
    if n > 5:                          # runtime if with results of both kinds
        br = s * 2
        bf = 1.5
    else:
        br = -1
        bf = f
    only = 3
    if n > 100:                        # assigned in one arm only: keeps its value otherwise
        only = 4
    cnt = 0
    for i in range(n):                 # a branch inside a loop
        if i % 3 == 0:
            cnt = cnt + 10
        else:
            cnt = cnt + 1
    with ct.vector():
        ct.store(iout[0:NSLOT], pack((s, z, nest, st, down, br, only, cnt, n), ct.int64))
        ct.store(fout[0:NSLOT], pack((f, bf), ct.float32))


def _expected(n):
    s = sum(range(n))
    ints = [s, 100 + max(0, (n - 10) - 5), sum(i * j for i in range(3) for j in range(i, 4)), 123,
            sum(range(n, 0, -3)), s * 2 if n > 5 else -1, 4 if n > 100 else 3,
            sum(10 if i % 3 == 0 else 1 for i in range(n)), n]
    floats = [0.5 * n, 1.5 if n > 5 else 0.5 * n]
    return ints, floats


@pytest.mark.parametrize("n", [12, 3, 0, 20])
def test_scalar_loops_and_branches(n):
    iout = np.full(NSLOT, -1, np.int64)
    fout = np.full(NSLOT, np.nan, np.float32)
    scalar_flow[1](iout, fout, n)
    ints, floats = _expected(n)
    assert iout[:len(ints)].tolist() == ints
    assert fout[:len(floats)].tolist() == floats


def test_range_loops_stay_loops_and_static_range_unrolls():
    ck = scalar_flow.compile(np.zeros(NSLOT, np.int64), np.zeros(NSLOT, np.float32), 1)
    kinds = [op.kind for op in ck.ir.ops()]
    # range(n), range(5, n-10), the nested pair, range(n, 0, -3) and the loop with a branch: six IR loops
    assert kinds.count("for") == 6
    assert kinds.count("if") == 3   # n > 5, n > 100, i % 3 == 0
    text = str(ck.ir)
    assert re.search(r"for %i\.\d+ in range\(0, %n\.\d+, 1\) iter\(%f\.\d+ = 0\.0, %s\.\d+ = 0\)", text)
    assert re.search(r"in range\(%n\.\d+, 0, -3\) iter\(%down\.\d+ = 0\)", text)
    # static_range(4): no loop; st folds to 123 (compile-time arithmetic on the unrolled index)
    assert "123" in text


def test_branch_results_are_yielded_by_both_arms():
    ck = scalar_flow.compile(np.zeros(NSLOT, np.int64), np.zeros(NSLOT, np.float32), 1)
    ifs = [op for op in ck.ir.ops() if op.kind == "if"]
    first = ifs[0]
    assert [r.name for r in first.results] == ["bf", "br"]
    assert [str(r.type) for r in first.results] == ["float32", "int64"]
    for arm in first.blocks:
        assert arm.ops[-1].kind == "yield" and len(arm.ops[-1].operands) == 2


# ---------------------------------------------------------------- loop-carried tiles

@ct.jit
def tile_loops(x, o, n, m, R: ct.constexpr, C: ct.constexpr):
    with ct.vector():
        a = ct.load(x[0, 0:R])
        b = ct.load(x[1, 0:R])
        c = ct.zeros((R,), ct.float32)
        z = ct.full((R,), 5.0, ct.float32)
        acc = ct.zeros((R, C), ct.float32)
    for i in range(n):
        with ct.vector():
            a, b = b, a                                 # carried tiles swapped each iteration
        if i % 2 == 0:
            with ct.vector():
                c = c + a                               # a tile updated in a runtime branch
    for i in range(m):
        with ct.vector():
            z = z * 2.0                                 # zero trips when m == 0: z keeps its value
    for j in range(0, n, 4):
        with ct.vector():
            t = ct.load(x[0:R, ct.ds(j, C, valid=min(C, n - j))])
            acc = acc + 1.0
            c = c + ct.rowsum(t)
    with ct.vector():
        ct.store(o[0, 0:R], a)
        ct.store(o[1, 0:R], b)
        ct.store(o[2, 0:R], c)
        ct.store(o[3, 0:R], z)
        ct.store(o[4:4 + R, 0:C], acc)


@pytest.mark.parametrize("n, m", [(3, 0), (8, 2)])
def test_loop_carried_tiles(n, m):
    R, C = 4, 4
    x = np.arange(R * 12, dtype=np.float32).reshape(R, 12)
    o = np.zeros((4 + R, 12), np.float32)
    tile_loops[1](x, o, n, m, R=R, C=C)
    a, b = x[0, :R], x[1, :R]
    c = np.zeros(R, np.float32)
    for i in range(n):
        a, b = b, a
        if i % 2 == 0:
            c = c + a
    trips = len(range(0, n, 4))
    c = c + x[:R, :n].sum(axis=1)
    assert o[0, :R].tolist() == a.tolist() and o[1, :R].tolist() == b.tolist()
    assert np.allclose(o[2, :R], c)
    assert o[3, :R].tolist() == [5.0 * 2 ** m] * R
    assert (o[4:, :C] == trips).all()


def test_tile_loop_ir_carries_tiles_through_one_loop():
    ck = tile_loops.compile(np.zeros((4, 12), np.float32), np.zeros((8, 12), np.float32), 3, 0, R=4, C=4)
    loops = [op for op in ck.ir.ops() if op.kind == "for"]
    assert len(loops) == 3
    carried = [str(a.type) for a in loops[0].blocks[0].args[1:]]
    assert carried == ["tile<4 float32 @UB>"] * 3        # a, b, c (sorted by name)
    assert [r.name for r in loops[0].results] == ["a", "b", "c"]


# ---------------------------------------------------------------- constexpr if (IR only)

@ct.jit
def branchy(x, o, MODE: ct.constexpr, CAUSAL: ct.constexpr):
    with ct.vector():
        t = ct.load(x[0:8])
        if MODE == "exp":
            t = ct.exp(t)
        elif MODE == "log":
            t = ct.log(t)
        else:
            t = ct.sqrt(t)
        if CAUSAL:
            t = t * 2.0
        ct.store(o[0:8], t)


@pytest.mark.parametrize("mode, causal", [("exp", True), ("log", False), ("other", True)])
def test_constexpr_if_keeps_only_the_taken_branch(mode, causal):
    x = np.ones(8, np.float32)
    ck = branchy.compile(x, x, MODE=mode, CAUSAL=causal)
    ops = [op.attrs.get("op") for op in ck.ir.ops() if op.kind == "ewise"]
    want = {"exp": "exp", "log": "log", "other": "sqrt"}[mode]
    assert ops == [want] + (["mul"] if causal else [])
    assert not any(op.kind == "if" for op in ck.ir.ops())
