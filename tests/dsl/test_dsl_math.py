"""Vector math builtins (tanh, sigmoid, erf, floor, pow / **), integer tile operators (// % & | ^ << >>) and the
math functions on runtime scalars: each against a float64 numpy golden with the project's comparison
(``kernels.precision.compare``, the dtype's tolerance class) for float32, float16 and bfloat16 inputs; integer
results exactly; program and pipelined order bit for bit for a mixed kernel that uses them (and a gather) in its
vector stage;
unsupported uses are typed compile errors naming the operand."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import cvtile.dsl as ct
from cvtile.kernels.precision import compare

BF16 = ml_dtypes.bfloat16
R, C = 8, 32


@ct.jit
def math_ops(x, y, o, N: ct.constexpr):
    with ct.vector():
        a = ct.load(x[0:N])   # rank 1: the math functions are called, not inlined (a short numba compile)
        b = ct.load(y[0:N])
        ct.store(o[0, 0:N], ct.tanh(a))
        ct.store(o[1, 0:N], ct.sigmoid(a))
        ct.store(o[2, 0:N], ct.erf(a))
        ct.store(o[3, 0:N], ct.floor(a))
        ct.store(o[4, 0:N], ct.pow(b, a))           # tile ** tile (b > 0)
        ct.store(o[5, 0:N], b ** 2.5)               # tile ** scalar
        ct.store(o[6, 0:N], 2.0 ** a)               # scalar ** tile
        ct.store(o[7, 0:N], a ** 3)                 # multiplies
        ct.store(o[8, 0:N], a ** 0)                 # ones


def _golden(x, y):
    a, b = x.astype(np.float64), y.astype(np.float64)
    erf = np.vectorize(math.erf)
    return [np.tanh(a), 1 / (1 + np.exp(-a)), erf(a), np.floor(a), b ** a, b ** 2.5, 2.0 ** a, a ** 3,
            np.ones_like(a)]


@pytest.fixture(scope="module", params=[np.float32, np.float16, BF16], ids=["f32", "f16", "bf16"])
def math_run(request):
    dt = request.param
    rng = np.random.default_rng(3)
    x = rng.uniform(-4, 4, R * C).astype(dt)
    x[:6] = [0, -0.0, 0.5, -2.5, 3.0, -3.0]   # floor at integers and halves
    y = rng.uniform(0.1, 3, R * C).astype(dt)
    o = np.zeros((9, R * C), dt)
    math_ops[1](x, y, o, N=R * C)
    return dt, x, y, o


@pytest.mark.parametrize("i,name", list(enumerate(["tanh", "sigmoid", "erf", "floor", "pow tt", "pow ts",
                                                      "pow st", "x**3", "x**0"])))
def test_math_builtin_matches_the_float64_golden(math_run, i, name):
    dt, x, y, o = math_run
    rep = compare(o[i], _golden(x, y)[i], dt, max_fail_ratio=0, name=name)
    assert rep.passed, str(rep)


def test_floor_is_exact_and_keeps_the_sign_of_zero(math_run, dsl):
    dt, x, _, o = math_run
    want = np.floor(x.astype(np.float32)).astype(dt)
    assert dsl.same_bits(o[3], want)


def test_float32_math_is_within_an_ulp_of_float64(math_run):
    dt, x, y, o = math_run
    if dt is np.float32:   # tanh, erf: libm double rounded once to float32
        for i in (0, 2):
            g = _golden(x, y)[i]
            assert np.all(np.abs(o[i] - g) <= np.spacing(np.abs(g).astype(np.float32)))


@ct.jit
def scalar_math(o, s, n, m, C: ct.constexpr):
    with ct.vector():
        v = ct.sqrt(s) + ct.rsqrt(s) + ct.exp(s) + ct.log(s) + ct.tanh(s) + ct.sigmoid(s) + ct.erf(s)
        w = ct.floor(s) + s ** 2.5 + s ** 2 + ct.sqrt(n) + min(s, 1.0) + max(n, m)
        ct.store(o[0:C], ct.full((C,), v, ct.float32))
        ct.store(o[C:2 * C], ct.full((C,), w, ct.float32))
        ct.store(o[2 * C:3 * C], ct.full((C,), min(n, m) * 1000 + max(n, m) + n ** 3 + ct.sqrt(16.0), ct.float32))


def test_math_functions_and_min_max_on_runtime_scalars():
    o = np.zeros(3 * C, np.float32)
    s, n, m = 2.25, 7, 3
    scalar_math[1](o, s, n, m, C=C)
    v = math.sqrt(s) + 1 / math.sqrt(s) + math.exp(s) + math.log(s) + math.tanh(s) + 1 / (1 + math.exp(-s)) \
        + math.erf(s)
    w = math.floor(s) + s ** 2.5 + s ** 2 + math.sqrt(n) + min(s, 1.0) + max(n, m)
    assert compare(o[:C], np.full(C, v), np.float32, max_fail_ratio=0).passed, o[0]
    assert compare(o[C:2 * C], np.full(C, w), np.float32, max_fail_ratio=0).passed, o[C]
    assert np.all(o[2 * C:] == 3 * 1000 + 7 + 343 + 4)


# ------------------------------------------------------------------ program vs pipelined order
@ct.jit
def mixed_math(x, w, idx, table, out, oi, n, R: ct.constexpr, C: ct.constexpr):
    for t in range(ct.block_idx(), n, ct.block_num()):
        with ct.cube():
            s = ct.mma(ct.load(x[t, 0:R, 0:C]), ct.load(w[0:C, 0:C]))
        with ct.vector():
            g = ct.sigmoid(s) * ct.tanh(s) + ct.erf(s) - ct.floor(s) + s ** 2
            bucket = ct.minimum(ct.cast(ct.abs(s) * 4.0, ct.int32, "floor"), 63)
            ct.store(out[t, 0:R, 0:C], g + ct.gather(table, bucket))
            i = ct.load(idx[t, 0:R, 0:C])
            ct.store(oi[t, 0:R, 0:C], ((i >> 2) << 1) + (i // 128) % 5 + ((i & 3) | (i ^ 6)) + (~i) + i ** 2 + t)


def test_mixed_kernel_math_integer_ops_and_gather_program_and_pipelined_order_bitwise(dsl):
    rng = np.random.default_rng(5)
    n = 3
    x = rng.uniform(-1, 1, (n, 16, 32)).astype(np.float16)
    w = rng.uniform(-1, 1, (32, 32)).astype(np.float16)
    idx = rng.integers(-4096, 4096, (n, 16, 32)).astype(np.int32)
    table = rng.standard_normal(64).astype(np.float32)
    outs = []
    for order in ("program", "pipelined"):
        out, oi = np.zeros((n, 16, 32), np.float32), np.zeros((n, 16, 32), np.int32)
        mixed_math[2](x, w, idx, table, out, oi, n, R=16, C=32, order=order)
        outs.append((out, oi))
    assert dsl.same_bits(outs[0][0], outs[1][0]) and dsl.same_bits(outs[0][1], outs[1][1])
    s = x.astype(np.float64) @ w.astype(np.float64)
    golden = 1 / (1 + np.exp(-s)) * np.tanh(s) + np.vectorize(math.erf)(s) - np.floor(s) + s ** 2 \
        + table[np.minimum(np.floor(np.abs(s) * 4).astype(np.int64), 63)]
    rep = compare(outs[0][0], golden, np.float32, max_fail_ratio=0.01)   # floor near integers may flip
    assert rep.passed, str(rep)
    t = np.arange(n)[:, None, None]
    assert np.array_equal(outs[0][1], ((idx >> 2) << 1) + (idx // 128) % 5 + ((idx & 3) | (idx ^ 6)) + (~idx)
                          + idx ** 2 + t)   # the integer tile operators with Python's semantics


# ------------------------------------------------------------------ typed errors
@ct.jit
def pow_of_bool(x, o, N: ct.constexpr):
    with ct.vector():
        b = ct.load(x[0:N]) > 0.0
        ct.store(o[0:N], ct.cast(ct.pow(b, 2.0), ct.float32))  # <- error


@ct.jit
def tanh_of_int(x, o, N: ct.constexpr):
    with ct.vector():
        ct.store(o[0:N], ct.tanh(ct.load(x[0:N])))  # <- error


@ct.jit
def shift_of_float(x, o, N: ct.constexpr):
    with ct.vector():
        ct.store(o[0:N], ct.load(x[0:N]) >> 1)  # <- error


@ct.jit
def shift_too_far(x, o, N: ct.constexpr):
    with ct.vector():
        ct.store(o[0:N], ct.load(x[0:N]) << 32)  # <- error


@ct.jit
def int_pow_runtime(x, o, e, N: ct.constexpr):
    with ct.vector():
        ct.store(o[0:N], ct.load(x[0:N]) ** e)  # <- error


@pytest.mark.parametrize("kernel,dtype,extra,fragments", [
    (pow_of_bool, np.float32, (), ["pow(x=...): x is a bool tile"]),
    (tanh_of_int, np.int32, (), ["tanh needs a float tile, got int32"]),
    (shift_of_float, np.float32, (), [">> needs integer or bool tiles, got float32"]),
    (shift_too_far, np.int32, (), ["<<: the shift amount 32 is outside [0, 32) for a int32 tile"]),
    (int_pow_runtime, np.int32, (3,), ["pow of a int32 tile needs a constant integer exponent"]),
], ids=["pow-bool", "tanh-int", "shift-float", "shift-range", "int-pow-runtime"])
def test_unsupported_math_is_a_compile_error_at_the_line(dsl, kernel, dtype, extra, fragments):
    x = np.zeros(16, dtype)
    err = dsl.compile_error(kernel, x, x.copy(), *extra, N=16)
    dsl.assert_at(err, kernel, "# <- error", *fragments)
