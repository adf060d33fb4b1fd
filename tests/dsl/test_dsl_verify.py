"""The verifier: on-chip budgets checked at compile time against the target (a kernel that does not fit
fails with a BudgetError carrying the memory table), and the structural spec of legal IR
(`verify_structure`) applied to hand-built illegal IR. Nothing here runs numba.
"""

from __future__ import annotations

import inspect
import os

import numpy as np
import pytest

import cvtile.dsl as ct
from cvtile.dsl.ir import Block, Kernel, Loc, Op, Param, Value
from cvtile.dsl.types import BOOL, F32, INDEX, L0A, L0C, L1, UB, TileType, float16, float32
from cvtile.dsl.verify import verify_structure
from cvtile.tiling.platform import get_platform

A2 = get_platform("Ascend910B1")
A5 = get_platform("Ascend950")


# ------------------------------------------------------------------ UB budget

@ct.jit
def acc_rows(x, o, n, R: ct.constexpr, D: ct.constexpr):
    with ct.vector():
        acc = ct.zeros((R, D), ct.float32)        # resident across the loop
    for j in range(n):
        with ct.vector():
            acc = acc + ct.load(x[j, 0:R, 0:D])   # streamed in row chunks
    with ct.vector():
        ct.store(o[0:R, 0:D], acc)


def _acc_args(R, D=256):
    return np.zeros((2, R, D), np.float32), np.zeros((R, D), np.float32), 2


def test_ub_over_budget_fails_at_compile_time_with_the_table(dsl):
    err = dsl.compile_error(acc_rows, *_acc_args(224), R=224, D=256, error=ct.BudgetError)
    text = str(err)
    assert isinstance(err, ct.CompilationError)
    assert "kernel 'acc_rows' does not fit UB of Ascend910B1: 230400 bytes needed at peak, 196608 available" in text
    assert "UB: 230400 of 196608 bytes at peak (117.2%)  OVER BUDGET" in text
    lines = text.splitlines()
    header = next(line for line in lines if line.strip().startswith("buffer"))
    assert header.split() == ["buffer", "line", "space", "shape", "dtype", "copies", "bytes", "address", "note"]
    acc = next(line for line in lines if line.strip().startswith("acc "))
    acc_line = str(dsl.line_of(acc_rows, "acc = ct.zeros"))
    assert acc.split()[:8] == ["acc", acc_line, "UB", "224x256", "float32", "1", "229376", "0"]
    # the load is processed one row at a time (chunk_rows): a 1-row chunk beside the resident accumulator
    chunk = next(line for line in lines if line.strip().startswith("load "))
    assert chunk.split()[2:8] == ["UB", "1x256", "float32", "1", "1024", "229376"]
    total = next(line for line in lines if line.strip().startswith("total"))
    assert total.split() == ["total", "230400", "capacity", "196608"]
    assert err.report.spaces["UB"].peak == 230400 and not err.report.spaces["UB"].fits
    assert err.table in text


def test_regression_budget_error_points_at_the_line_that_allocates_the_buffer(dsl):
    """The BudgetError pointed at the kernel's def line; it names the line of the largest buffer at the peak."""
    err = dsl.compile_error(acc_rows, *_acc_args(224), R=224, D=256, error=ct.BudgetError)
    first = str(err).splitlines()[0]
    assert first.startswith(f"{os.path.basename(__file__)}:{dsl.line_of(acc_rows, 'acc = ct.zeros')}: ") or \
        f"{os.path.basename(__file__)}:{dsl.line_of(acc_rows, 'acc = ct.zeros')}: kernel 'acc_rows'" in first


def test_regression_loop_carried_accumulator_is_one_buffer():
    """The budget counted a loop-carried accumulator twice (its initial value and the carried value)."""
    ck = acc_rows.compile(*_acc_args(128), R=128, D=256)
    ub = ck.report.spaces["UB"]
    accs = [b for b in ub.all if b.shape == (128, 256)]
    assert len(accs) == 1 and accs[0].name == "acc" and accs[0].bytes == 131072


def test_the_same_kernel_fits_a_bigger_target():
    ck = acc_rows.on("Ascend950").compile(*_acc_args(224), R=224, D=256)
    ub = ck.report.spaces["UB"]
    # the accumulator (224 KB) stays; the load streams in the largest chunk that fits the 24 KB beside it
    assert ub.fits and ub.capacity == 253952 and ub.peak == 229376 + 16 * 1024
    assert "acc" in [b.name for b in ub.buffers]


def test_the_same_kernel_fits_a2_with_a_smaller_tile():
    ck = acc_rows.compile(*_acc_args(128), R=128, D=256)
    ub = ck.report.spaces["UB"]
    assert ub.fits and ub.peak <= ub.capacity == 196608
    assert "UB: " in str(ck.report) and "L1" not in ck.report.spaces   # a vector-only kernel has no L1
    assert "AIV program (each AIV):" in ck.memory_map and "[      0,  131072)  acc" in ck.memory_map


# ------------------------------------------------------------------ L1 budget

@ct.jit
def big_l1(a, b, o, M: ct.constexpr, K: ct.constexpr, N: ct.constexpr):
    with ct.cube():
        a1 = ct.load(a[0:M, 0:K])
        b1 = ct.load(b[0, 0:K, 0:N])
        b2 = ct.load(b[1, 0:K, 0:N])
        c = ct.mma(a1, b1)
        c = ct.mma(a1, b2, acc=c)
        ct.store(o[0:M, 0:N], c)


def _l1_args(M, K, N):
    return np.zeros((M, K), np.float16), np.zeros((2, K, N), np.float16), np.zeros((M, N), np.float32)


def test_l1_over_budget(dsl):
    err = dsl.compile_error(big_l1, *_l1_args(128, 1024, 128), M=128, K=1024, N=128, error=ct.BudgetError)
    text = str(err)
    assert "does not fit L1 of Ascend910B1" in text and "524288 available" in text
    rows = {line.split()[0]: line.split() for line in text.splitlines()
            if line.strip()[:3] in ("a1 ", "b1 ", "b2 ") and " L1 " in line}
    assert rows["a1"][2:8] == ["L1", "128x1024", "float16", "1", "262144", "0"]
    assert rows["b1"][2:8] == ["L1", "1024x128", "float16", "1", "262144", "262144"]
    assert err.report.spaces["L1"].peak > 524288
    assert "UB" not in err.table   # only the space that does not fit is tabulated


def test_l1_fits_with_a_shorter_contraction():
    ck = big_l1.compile(*_l1_args(64, 256, 64), M=64, K=256, N=64)
    assert ck.report.spaces["L1"].fits
    assert [p.line for p in ck.report.mma_plans] == [dsl_line(big_l1, "c = ct.mma(a1, b1)"),
                                                       dsl_line(big_l1, "c = ct.mma(a1, b2, acc=c)")]


def test_regression_l0c_accumulator_counted_once():
    # an mma result kept resident for acc= was counted twice (its ping-pong base tiles plus the tile):
    # a 128x128 float32 accumulator (64 KB of the 128 KB L0C) failed on A2
    ck = big_l1.compile(*_l1_args(128, 256, 128), M=128, K=256, N=128)
    l0c = ck.report.spaces["L0C"]
    assert l0c.fits and l0c.peak == 65536
    assert [(b.name, b.bytes) for b in l0c.all] == [("c", 65536)]


def dsl_line(kernel, text):
    lines, first = inspect.getsourcelines(kernel.fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


# ------------------------------------------------------------------ structural spec on hand-built IR

LOC = Loc("hand_built.py", 10, 4, "    the offending op\n")


def _kernel(ops, args=()):
    body = Block(ops=list(ops))
    params = [Param(a.name, "tensor" if a.is_tensor else "scalar", a.type) for a in args]
    return Kernel("hand", params, list(args), body, Loc("hand_built.py", 1), "Ascend910B1")


def _create(shape, space, scope, dtype=float32):
    zero = Op("const", [], [Value(F32, const=0.0)], {"value": 0.0}, loc=LOC)
    op = Op("create", [zero.result], [Value(TileType(dtype, space, shape), "t")], {"nvalid": 0}, loc=LOC,
            scope=scope)
    return zero, op


def _ewise(x, scope="vector"):
    return Op("ewise", [x, x], [Value(x.type, "y")], {"op": "add", "dtype": x.type.dtype.name}, loc=LOC,
              scope=scope)


def _fails(kernel, fragment, platform=A2):
    with pytest.raises(ct.CompilationError) as info:
        verify_structure(kernel, platform)
    text = str(info.value)
    assert text.startswith("hand_built.py:10: invalid IR: "), text
    assert fragment in text
    assert "the offending op" in text


def test_hand_built_legal_ir_passes():
    zero, create = _create((16,), UB, "vector")
    verify_structure(_kernel([zero, create, _ewise(create.result)]), A2)


def test_verify_rejects_a_vector_op_in_cube_scope():
    zero, create = _create((16,), UB, "vector")
    _fails(_kernel([zero, create, _ewise(create.result, scope="cube")]), "ewise in scope 'cube' (allowed: vector)")


def test_verify_rejects_a_tile_op_without_scope():
    zero, create = _create((16,), UB, None)
    _fails(_kernel([zero, create]), "create in scope None (allowed: cube, vector)")


def test_verify_rejects_a_scalar_op_with_a_scope():
    n = Value(INDEX, "n")
    op = Op("sbin", [n, n], [Value(INDEX)], {"op": "add"}, loc=LOC, scope="vector")
    _fails(_kernel([op], args=[n]), "scalar/control op sbin must not carry a scope")


def test_verify_rejects_create_in_the_wrong_space():
    zero, create = _create((16, 16), L1, "vector", float16)
    _fails(_kernel([zero, create]), "create of a L1 tile in vector scope")


@pytest.mark.parametrize("src, dst", [(UB, L0A), (L1, UB), (L0C, UB)])
def test_verify_rejects_illegal_copy_edges_on_a2(src, dst):
    zero, create = _create((16, 16), src, "cube" if src is not UB else "vector",
                           float32 if src in (UB, L0C) else float16)
    copy = Op("copy", [create.result], [Value(create.result.type.with_(space=dst))], loc=LOC, scope="cube")
    _fails(_kernel([zero, create, copy]), f"copy {src}->{dst} is not a legal edge on Ascend910B1")


def test_the_950_allows_the_on_chip_copy_a2_rejects():
    zero, create = _create((16, 16), L0C, "cube")
    copy = Op("copy", [create.result], [Value(create.result.type.with_(space=UB))], loc=LOC, scope="cube")
    kernel = _kernel([zero, create, copy])
    verify_structure(kernel, A5)
    _fails(kernel, "copy L0C->UB is not a legal edge on Ascend910B1", A2)


def test_verify_rejects_use_before_definition():
    zero, create = _create((16,), UB, "vector")
    _fails(_kernel([zero, _ewise(create.result), create]), "ewise uses %t")


def test_verify_rejects_a_value_from_a_sibling_block():
    zero, create = _create((16,), UB, "vector")
    cond = Value(BOOL, "c")
    inner = _ewise(create.result)
    arm0 = Block(ops=[zero, create, Op("yield", [], [], loc=LOC)])
    arm1 = Block(ops=[inner, Op("yield", [], [], loc=LOC)])
    branch = Op("if", [cond], [], blocks=[arm0, arm1], loc=LOC)
    _fails(_kernel([branch], args=[cond]), "ewise uses %t")


def _loop(body_ops, body_args, inits, result_types):
    n = Value(INDEX, "n")
    lo = Op("const", [], [Value(INDEX, const=0)], {"value": 0}, loc=LOC)
    one = Op("const", [], [Value(INDEX, const=1)], {"value": 1}, loc=LOC)
    body = Block(args=body_args, ops=body_ops)
    loop = Op("for", [lo.result, n, one.result, *inits], [Value(t) for t in result_types], blocks=[body],
              loc=LOC)
    return n, [lo, one, loop]


def test_verify_rejects_a_yield_that_does_not_match_the_results():
    iv, carried = Value(INDEX, "i"), Value(F32, "s")
    init = Op("const", [], [Value(F32, const=0.0)], {"value": 0.0}, loc=LOC)
    body = [Op("yield", [iv], [], loc=LOC)]           # yields an int64 for a float32 result
    n, ops = _loop(body, [iv, carried], [init.result], [F32])
    _fails(_kernel([init, *ops], args=[n]), "for yields [int64] but produces [float32]")


def test_verify_rejects_a_yield_before_the_end_of_its_block():
    iv = Value(INDEX, "i")
    x = Value(INDEX, "x")
    body = [Op("yield", [], [], loc=LOC), Op("sbin", [iv, iv], [x], {"op": "add"}, loc=LOC)]
    n, ops = _loop(body, [iv], [], [])
    _fails(_kernel(ops, args=[n]), "yield must end its block")


def test_verify_rejects_a_loop_body_without_yield():
    iv = Value(INDEX, "i")
    body = [Op("sbin", [iv, iv], [Value(INDEX)], {"op": "add"}, loc=LOC)]
    n, ops = _loop(body, [iv], [], [])
    _fails(_kernel(ops, args=[n]), "for block does not end with yield")


def test_verify_rejects_an_mma_result_outside_l0c():
    zero, a = _create((16, 16), L0A, "cube", float16)
    bad = Op("mma", [a.result, a.result], [Value(TileType(float32, UB, (16, 16)))], {"trans_b": False}, loc=LOC,
             scope="cube")
    _fails(_kernel([zero, a, bad]), "mma must produce a float32/int32 L0C tile")


def test_frontend_ir_satisfies_the_spec():
    ck = acc_rows.compile(*_acc_args(64), R=64, D=256)
    verify_structure(ck.ir, A2)
    ck950 = big_l1.on("Ascend950").compile(*_l1_args(64, 64, 64), M=64, K=64, N=64)
    verify_structure(ck950.ir, A5)
