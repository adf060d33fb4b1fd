"""Tile arithmetic in `with vector():`: elementwise ops, scalar operands, broadcasts, compare/where,
reductions, casts with their rounding modes, iota, zeros/full with valid extents.

Numerics contract (see sim/codegen.py): every op on a float16/bfloat16 tile computes in float32 and rounds
its result to the 16-bit grid (round to nearest even), so a chain of + - * / sqrt, max/min, where and
broadcasts is bit-identical to numpy float16 / ml_dtypes bfloat16 arithmetic done op by op; a scalar
operand is first converted to the tile dtype. exp is within an ulp (a float32 polynomial), row sums
accumulate in float32 and round once.
"""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

import cvtile.dsl as ct

bf16 = ml_dtypes.bfloat16
R, C = 8, 32
ALPHA = 0.3


@ct.jit
def ewise16(x, y, r, c, o, alpha, R: ct.constexpr, C: ct.constexpr):
    with ct.vector():
        a = ct.load(x[0:R, 0:C])
        b = ct.load(y[0:R, 0:C])
        rv = ct.load(r[0:R])
        cv = ct.load(c[0:C])
        ct.store(o[0, 0:R, 0:C], (a - b) * b / (abs(a) + 1.0) + a * alpha)
        ct.store(o[1, 0:R, 0:C], ct.where((a > b) | (b == 1.0), ct.maximum(a, -b) - rv[:, None],
                                          2.0 - ct.minimum(a, b) * cv[None, :]))


@ct.jit
def unary16(x, o, red, R: ct.constexpr, C: ct.constexpr):
    with ct.vector():
        a = ct.load(x[0:R, 0:C])
        ct.store(o[0, 0:R, 0:C], ct.sqrt(abs(a)))
        ct.store(o[1, 0:R, 0:C], ct.exp(a))
        ct.store(red[0, 0:R], ct.rowmax(a))
        ct.store(red[1, 0:R], ct.rowsum(a))


def _inputs(dt):
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((R, C)) * 3).astype(dt)
    y = (rng.standard_normal((R, C)) * 3 + 0.01).astype(dt)
    y[0, :4] = dt(1.0)  # exercise the == arm of the where
    r = rng.standard_normal(R).astype(dt)
    c = rng.standard_normal(C).astype(dt)
    return x, y, r, c


def _reference(dt, x, y, r, c):
    al = np.float32(ALPHA).astype(dt)   # a scalar operand is converted to the tile dtype first
    one, two = dt(1.0), dt(2.0)
    return [(x - y) * y / (np.abs(x) + one) + x * al,
            np.where((x > y) | (y == one), np.maximum(x, -y) - r[:, None], two - np.minimum(x, y) * c[None, :])]


@pytest.fixture(scope="module", params=[np.float16, bf16], ids=["float16", "bfloat16"])
def ewise_run(request):
    dt = request.param
    x, y, r, c = _inputs(dt)
    o = np.zeros((2, R, C), dt)
    ewise16[1](x, y, r, c, o, ALPHA, R=R, C=C)
    return dt, (x, y, r, c), o


@pytest.fixture(scope="module")
def f16_run():
    x = _inputs(np.float16)[0]
    o = np.zeros((2, R, C), np.float16)
    red = np.zeros((2, R), np.float16)
    unary16[1](x, o, red, R=R, C=C)
    return x, o, red


def test_16bit_elementwise_chains_round_after_every_op_bit_exactly(ewise_run, dsl):
    dt, ins, o = ewise_run
    for i, want in enumerate(_reference(dt, *ins)):
        assert dsl.same_bits(o[i], np.asarray(want, dt)), f"chain {i} differs from numpy {dt.__name__}"


def test_float16_sqrt_is_correctly_rounded(f16_run, dsl):
    x, o, _ = f16_run
    assert dsl.same_bits(o[0], np.sqrt(np.abs(x)))


def test_float16_exp_is_within_one_ulp(f16_run, dsl):
    x, o, _ = f16_run
    assert dsl.ulp_diff16(o[1], np.exp(x.astype(np.float32)).astype(np.float16)) <= 1


def test_regression_reduce_of_loaded_tile(f16_run, dsl):
    # rowmax of a tile straight from a load reduced a 1x1 tile (codegen took the load for a fused op)
    x, _, red = f16_run
    assert dsl.same_bits(red[0], x.max(axis=1))


def test_16bit_rowsum_accumulates_in_float32_and_rounds_once(f16_run):
    x, _, red = f16_run
    want = x.astype(np.float64).sum(axis=1)
    assert np.allclose(red[1].astype(np.float64), want, rtol=2 ** -10, atol=2e-3)


# ---------------------------------------------------------------- float32 input: casts, iota, valid, relu

N = 16
CAST_IN = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.7, 2.7, 1e-8, 65519.0, 65520.0, 3.0009765625, 1.00048828125,
                    1.0009765625, -0.0, 70000.0, 1 / 3], np.float32)


@ct.jit
def convert(x4, o16, ob16, oi, of, n, N: ct.constexpr):
    with ct.vector():
        a = ct.load(x4[0, 0:N])
        ct.store(o16[0:N], ct.cast(a, ct.float16))
        ct.store(ob16[0:N], ct.cast(a, ct.bfloat16))
        a4 = ct.load(x4[0:4, 0:N])   # four copies of the inputs: row k is cast with rounding mode k
        mode = ct.iota(4)[:, None]
        ct.store(oi[0:4, 0:N], ct.where(mode == 0, ct.cast(a4, ct.int32),
                                        ct.where(mode == 1, ct.cast(a4, ct.int32, rounding="trunc"),
                                                 ct.where(mode == 2, ct.cast(a4, ct.int32, rounding="floor"),
                                                          ct.cast(a4, ct.int32, rounding="ceil")))))
        ct.store(oi[4, 0:N], ct.iota(N, ct.int32, start=3) * 2 + ct.relu(ct.iota(N, start=-5)) * 100)
        ct.store(oi[5, 0:N], ct.full((N,), 7, ct.int32, valid=n))
        ct.store(of[0, 0:N], ct.relu(a * -1.0e36))
        ct.store(of[1, 0:N], ct.cast(ct.iota(N, start=-3), ct.float32) / 2.0
                 + ct.cast(ct.cast(a * 3.0, ct.float16) + 1.0, ct.float32))


@pytest.fixture(scope="module")
def convert_run():
    o16 = np.zeros(N, np.float16)
    ob16 = np.zeros(N, bf16)
    oi = np.full((6, N), -99, np.int32)
    of = np.full((2, N), -99.0, np.float32)
    convert[1](np.tile(CAST_IN, (4, 1)), o16, ob16, oi, of, 5, N=N)
    return o16, ob16, oi, of


def test_cast_to_16bit_floats_is_round_to_nearest_even(convert_run, dsl):
    o16, ob16, _, _ = convert_run
    with np.errstate(over="ignore"):
        assert dsl.same_bits(o16, CAST_IN.astype(np.float16))  # incl. 65520 -> inf, 1e-8 -> 0, -0.0
    assert dsl.same_bits(ob16, CAST_IN.astype(bf16))


@pytest.mark.parametrize("row, fn", [(0, np.rint), (1, np.trunc), (2, np.floor), (3, np.ceil)],
                         ids=["rint", "trunc", "floor", "ceil"])
def test_cast_float_to_int_rounding_modes(convert_run, row, fn):
    _, _, oi, _ = convert_run
    assert oi[row].tolist() == fn(CAST_IN.astype(np.float64)).astype(np.int64).tolist()


def test_rint_rounds_ties_to_even(convert_run):
    _, _, oi, _ = convert_run
    assert oi[0, :5].tolist() == [0, 2, 2, 0, -2]   # 0.5, 1.5, 2.5, -0.5, -1.5


ROUND_IN = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 2.4999998, 126.5, 127.5, 300.0, -300.0, np.nan, np.inf, -np.inf,
                     1 + 2 ** -11, -(1 + 3 * 2 ** -11), 2.0 ** -25], np.float32)


@ct.jit
def convert_round(x, o8, ou8, o16, ob16, N: ct.constexpr):
    with ct.vector():
        a = ct.load(x[0:N])
        ct.store(o8[0:N], ct.cast(a, ct.int8, rounding="round"))
        ct.store(ou8[0:N], ct.cast(a, ct.uint8))
        ct.store(o16[0:N], ct.cast(a, ct.float16, rounding="round"))
        ct.store(ob16[0:N], ct.cast(a, ct.bfloat16, rounding="round"))


def test_cast_round_is_ties_away_and_integer_casts_saturate():
    """rounding="round" (Ascend C CAST_ROUND) rounds half away from zero; a float -> int8/uint8 cast saturates
    to the type's range and a NaN gives 0 (the chip's conversion and the twin), it does not wrap."""
    o8, ou8 = np.zeros(N, np.int8), np.zeros(N, np.uint8)
    o16, ob16 = np.zeros(N, np.float16), np.zeros(N, bf16)
    convert_round[1](ROUND_IN, o8, ou8, o16, ob16, N=N)
    assert o8.tolist() == [1, 2, 3, -1, -3, 2, 127, 127, 127, -128, 0, 127, -128, 1, -1, 0]
    assert ou8.tolist() == [0, 2, 2, 0, 0, 2, 126, 128, 255, 0, 0, 255, 0, 1, 0, 0]
    # fp16: 1 + 2**-11 and -(1 + 3 * 2**-11) are ties (RNE: 1.0 and -(1 + 2**-9)); 2**-25 ties to 2**-24
    assert o16[13] == np.float16(1 + 2 ** -10) and o16[14] == np.float16(-(1 + 2 ** -9))
    assert o16[15] == np.float16(2.0 ** -24) and o16[1] == 1.5 and np.isnan(o16[10])
    assert ob16[13] == bf16(1.0) and ob16[15].astype(np.float32) == np.float32(2.0 ** -25)


def test_float_narrowing_cast_rejects_other_roundings():
    @ct.jit
    def narrow(x, o):
        with ct.vector():
            ct.store(o[0:16], ct.cast(ct.load(x[0:16]), ct.float16, rounding="trunc"))

    with pytest.raises(ct.CompilationError, match="rint .*or round"):
        narrow[1](np.zeros(16, np.float32), np.zeros(16, np.float16))


def test_iota_start_and_integer_relu(convert_run):
    _, _, oi, _ = convert_run
    assert oi[4].tolist() == [2 * (3 + i) + 100 * max(i - 5, 0) for i in range(N)]


def test_full_with_runtime_valid_stores_only_the_valid_elements(convert_run):
    _, _, oi, _ = convert_run
    assert oi[5].tolist() == [7] * 5 + [-99] * (N - 5)


def test_regression_relu_of_negative_and_minus_inf(convert_run, dsl):
    # relu was x * 0 for x <= 0: -0.0 for negatives and NaN for -inf
    _, _, _, of = convert_run
    with np.errstate(over="ignore"):
        scaled = CAST_IN * np.float32(-1.0e36)
    assert np.isneginf(scaled).any()
    want = np.maximum(scaled, np.float32(0.0))
    assert dsl.same_bits(of[0], want)
    assert not np.signbit(of[0]).any()


def test_int_to_float_cast_and_mixed_precision_chain(convert_run, dsl):
    _, _, _, of = convert_run
    with np.errstate(over="ignore"):
        half = ((CAST_IN * np.float32(3.0)).astype(np.float16) + np.float16(1.0)).astype(np.float32)
    want = (np.arange(N, dtype=np.float32) - 3) / np.float32(2.0) + half
    assert dsl.same_bits(of[1], want)


# ---------------------------------------------------------------- valid extents and float32 chains

@ct.jit
def masked_rows(x, y, o, red, ncols, R: ct.constexpr, C: ct.constexpr):
    with ct.vector():
        a = ct.load(x[0:R, ct.ds(0, C, valid=ncols)])
        b = ct.load(y[0:R, ct.ds(0, C, valid=ncols)])
        ct.store(o[0, 0:R, 0:C], a + b - 1.5)
        ct.store(o[1, 0:R, 0:C], ct.zeros((R, C), ct.float32, valid=(R - 2, ncols)) + 4.0)
        ct.store(red[0, 0:R], ct.rowmax(a * 2.0))
        ct.store(red[1, 0:R], ct.rowsum(b))
        ct.store(red[2, 0:R], ct.rowmin(b - a))


@pytest.fixture(scope="module")
def masked_run():
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((R, C)) * 3).astype(np.float32)
    y = (rng.standard_normal((R, C)) * 3).astype(np.float32)
    o = np.full((2, R, C), -7.0, np.float32)
    red = np.zeros((3, R), np.float32)
    ncols = 20
    masked_rows[1](x, y, o, red, ncols, R=R, C=C)
    return x, y, o, red, ncols


def test_reductions_cover_only_the_valid_columns(masked_run, dsl):
    x, y, _, red, n = masked_run
    assert dsl.same_bits(red[0], (x[:, :n] * np.float32(2)).max(axis=1))
    assert np.allclose(red[1], y[:, :n].sum(axis=1), rtol=1e-6, atol=1e-5)
    assert dsl.same_bits(red[2], (y[:, :n] - x[:, :n]).min(axis=1))


def test_valid_extents_limit_what_a_store_writes(masked_run):
    # zeros(..., valid=(R - 2, ncols)) + 4.0: elementwise ops keep the valid extents
    _, _, o, _, n = masked_run
    assert (o[0][:, n:] == -7.0).all()
    assert (o[1][:R - 2, :n] == 4.0).all()
    assert (o[1][R - 2:] == -7.0).all() and (o[1][:, n:] == -7.0).all()


def test_regression_float32_chain_is_bit_exact(masked_run, dsl):
    # fast-math (reassoc + nsz) let LLVM compute (a + b) - 1.5 as a + (b - 1.5): 1-ulp differences
    x, y, o, _, n = masked_run
    want = (x[:, :n] + y[:, :n]) - np.float32(1.5)
    assert dsl.same_bits(o[0][:, :n], want)


# ---------------------------------------------------------------- IR shape of tile ops (no numba compile)

def test_tile_ops_in_the_ir_carry_types_scope_and_pipe():
    x, y, r, c = _inputs(np.float16)
    ck = ewise16.compile(x, y, r, c, np.zeros((2, R, C), np.float16), ALPHA, R=R, C=C)
    text = str(ck.ir)
    red = str(unary16.compile(x, np.zeros((2, R, C), np.float16), np.zeros((2, R), np.float16), R=R, C=C).ir)
    assert re.search(r"%a\.\d+ = load\(%x\.\d+\[0 \+: 8, 0 \+: 32\]\) : tile<8x32 float16 @UB>", text)
    assert "expand{axis=1}" in text and "expand{axis=0}" in text          # r[:, None] and c[None, :]
    assert "reduce.max(" in red and "reduce.sum(" in red and ": tile<8 float16 @UB>" in red
    ewise = [op for op in ck.ir.ops() if op.kind == "ewise"]
    assert {op.scope for op in ewise} == {"vector"} and {op.pipe for op in ewise} == {"V"}
    assert {"add", "sub", "mul", "div", "abs", "max", "min", "gt", "eq", "or", "where", "neg"} <= \
        {op.attrs["op"] for op in ewise}
