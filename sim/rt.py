"""Functions that generated simulator code calls (the numba runtime of a kernel).

Model
-----
Generated kernels (see ``codegen.py``) hold every floating tile as float32
values; 16-bit values are rounded where the chip stores them (``rounding``)
and GM 16-bit tensors are read and written as uint16 bits. This module gathers
the scalar helpers the generated source imports by name, so the generated
text stays short and readable.

The compiled (``cache=True``) helpers say ``_nrt=True``: generated kernels are
compiled without numba's NRT (``codegen``), and a helper compiled from such a
caller would otherwise inherit that flag and fail where it allocates.
``dot_into`` is numpy's ``np.dot(a, b, out)`` (BLAS), compiled once per
machine rather than typed in every kernel. The per-dtype variants (GM row
readers and writers, skinny matmuls, the called one-argument functions) are
one body each, compiled per dtype by ``_variant`` as plain functions with
their converter bound as a global, so numba's cache keeps them across
processes; their names carry the runtime's source stamp (``stamp``).

``fexp`` is the vector unit's exp: float32, a Cody-Waite range reduction and a
degree-6 polynomial, within 1 ulp of the correctly rounded result over the
normal range. Like a vector unit it flushes results below the smallest normal
float32 (x < -87.33) to 0, gives +inf above 88.72 and NaN for NaN; exp(-inf)
is exactly 0, which is what masking with -inf relies on. It is branch-free so
loops over it vectorise (about 0.8 ns per element on one core, against about
4 ns for libm's expf).

The other elementary functions of the vector math builtins are float32 in,
float32 out, and each is one fixed rule that the CPU twin's implementation of
the Ascend C call follows bit for bit (``include/twin/cvtile_twin_numeric.h``):
``ftanh``, ``ferf`` and ``fpow`` evaluate the double-precision libm function on
the (exact) float64 value of the operands and round once to float32 (within an
ulp; the chip's own polynomial is not modelled bit for bit); ``fsigmoid`` is
``1 / (1 + fexp(-x))`` in float32, the formula of the Sigmoid API built on the
vector exp; ``ffloor`` is exact. 16-bit tiles round each result once more to
their grid, as for exp.
"""

from __future__ import annotations

import math
import types

import numpy as np
from numba import njit

from .rounding import (_f32_as_u32, _u32_as_f32, bf16_bits_to_f32, f16_bits_to_f32, f32_to_bf16_bits,
                       f32_to_f16_bits, f8e4m3_bits_to_f32, round_to_bf16, round_to_bf16_away, round_to_f16,
                       round_to_f16_away)
from .stamp import source_stamp

__all__ = ["fexp", "flog", "fsqrt", "frsqrt", "fmax", "fmin", "frelu", "f16_bits_to_f32", "bf16_bits_to_f32",
           "f8e4m3_bits_to_f32", "read_rows_f8e4m3",
           "f32_to_f16_bits", "f32_to_bf16_bits", "round_to_f16", "round_to_bf16", "FASTMATH", "f32",
           "NEG_INF", "POS_INF", "cast_rint", "cast_trunc", "cast_floor", "cast_ceil", "cast_round", "sat_int",
           "round_to_f16_away", "round_to_bf16_away", "fail", "fail_first", "fixpipe_scale", "row_sum", "SKINNY_ROWS",
           "mm_auto_bt_f16", "mm_auto_b_f16", "mm_auto_bt_bf16", "mm_auto_b_bf16", "mm_auto_bt_f32", "mm_auto_b_f32",
           "row_max", "row_min", "row_max_int", "row_min_int", "mm_bt_f16", "mm_b_f16", "mm_bt_bf16", "mm_b_bf16",
           "mm_bt_f32", "mm_b_f32", "read_rows_f16", "write_rows_f16", "read_rows_bf16", "write_rows_bf16",
           "read_rows_f32", "write_rows_f32", "read_rows_raw", "write_rows_raw", "fexp_call", "flog_call",
           "fsqrt_call", "frsqrt_call", "round_f16_call", "round_bf16_call", "dot_rows_t", "axpy_rows", "ftanh",
           "fsigmoid", "ferf", "ffloor", "fpow", "ftanh_call", "fsigmoid_call", "ferf_call", "ffloor_call",
           "fpow_call", "dot_into", "dot_int_into", "mm_bt_i8", "mm_b_i8", "sel"]

#: LLVM fast-math flags of the elementary functions: no "nnan"/"ninf" (masks use -inf), so NaN and inf stay
#: IEEE. numba lowers a helper it inlines at its IR level with its caller's flags, so in a kernel (and in the
#: ``*_call`` variants) these functions compile without them.
FASTMATH = {"nsz", "arcp", "contract", "afn", "reassoc"}

f32 = np.float32
NEG_INF = np.float32(-np.inf)
POS_INF = np.float32(np.inf)

_LOG2E = np.float32(1.4426950408889634)
_LN2_HI = np.float32(0.693145751953125)
_LN2_LO = np.float32(1.428606765330187e-06)
_EXP_LO = np.float32(-87.33654)
_EXP_HI = np.float32(88.72283)


@njit(inline="always", fastmath=FASTMATH)
def fexp(x):
    x = np.float32(x)
    xc = min(max(x, _EXP_LO), _EXP_HI)
    n = np.floor(xc * _LOG2E + np.float32(0.5))   # float32 floor (math.floor's int64 blocks vectorisation)
    r = xc - n * _LN2_HI
    r = r - n * _LN2_LO
    p = np.float32(1.9875691500e-4)
    p = p * r + np.float32(1.3981999507e-3)
    p = p * r + np.float32(8.3334519073e-3)
    p = p * r + np.float32(4.1665795894e-2)
    p = p * r + np.float32(1.6666665459e-1)
    p = p * r + np.float32(5.0000001201e-1)
    p = p * r * r + r + np.float32(1.0)
    # 2**n as two factors so that n = 128 (x near the top) and n = -126 both stay normal
    ni = np.int32(n)
    n1 = ni >> np.int32(1)
    s1 = _u32_as_f32(np.uint32((n1 + np.int32(127)) << np.int32(23)))
    s2 = _u32_as_f32(np.uint32((ni - n1 + np.int32(127)) << np.int32(23)))
    y = (p * s1) * s2
    y = np.float32(0.0) if x < _EXP_LO else y
    y = POS_INF if x > _EXP_HI else y
    return x if x != x else y


@njit(inline="always", fastmath=FASTMATH)
def flog(x):
    return np.float32(math.log(x)) if x > 0 else (NEG_INF if x == 0 else np.float32(np.nan))


@njit(inline="always", fastmath=FASTMATH)
def fsqrt(x):
    return np.float32(math.sqrt(x)) if x >= 0 else np.float32(np.nan)


@njit(inline="always", fastmath=FASTMATH)
def frsqrt(x):
    return np.float32(1.0) / np.float32(math.sqrt(x)) if x >= 0 else np.float32(np.nan)


@njit(inline="always")
def ftanh(x):
    """tanh of a float32: the double libm tanh of its exact value, rounded once to float32."""
    return np.float32(math.tanh(np.float64(x)))


@njit(inline="always")
def fsigmoid(x):
    """1 / (1 + exp(-x)) in float32, with the vector exp (``fexp``): 0 at -inf, 1 at +inf, NaN for NaN."""
    d = np.float32(np.float32(1.0) + np.float32(fexp(-np.float32(x))))
    return np.float32(np.float32(1.0) / d)      # a float64 quotient of float32 operands rounds exactly


@njit(inline="always")
def ferf(x):
    """erf of a float32: the double libm erf of its exact value, rounded once to float32."""
    return np.float32(math.erf(np.float64(x)))


@njit(inline="always")
def ffloor(x):
    """floor of a float32 (exact; -0.0, inf and NaN unchanged)."""
    return np.float32(np.floor(np.float64(x)))


@njit(inline="always")
def fpow(x, y):
    """x ** y of two float32: the double libm pow of their exact values (C99 special cases: pow(x, 0) = 1,
    pow(negative, non-integer) = NaN), rounded once to float32."""
    return np.float32(math.pow(np.float64(x), np.float64(y)))


@njit(inline="always")
def sel(c, a, b):
    """``a if c else b`` with both operands evaluated (a call's arguments are): the elementwise ``where`` of
    generated kernels. A conditional expression evaluates only the branch taken, so a loop over it loads its
    operands under the condition (masked vector loads, about 1.6x slower in the band mask's select); here the
    loads are plain and the choice is a blend. The operand expressions are pure (tile reads within the loop's
    extent, arithmetic; integer // and % by zero give 0 under the kernels' numpy error model), so evaluating
    the unused one changes no result."""
    return a if c else b


@njit(inline="always", fastmath=FASTMATH)
def fmax(a, b):
    return a if a > b or a != a else b


@njit(inline="always", fastmath=FASTMATH)
def fmin(a, b):
    return a if a < b or a != a else b


@njit(inline="always", fastmath=FASTMATH)
def frelu(a):
    return a if a > 0 else a * 0


@njit(inline="always")
def sat_int(r, lo, hi):
    """A rounded float as an int64 saturated to [lo, hi] (the target type's range; NaN gives 0): the chip's
    float -> integer conversions saturate, and so does the Ascend C twin."""
    if r != r:
        return np.int64(0)
    return np.int64(min(max(r, lo), hi))


@njit(inline="always")
def cast_rint(x, lo, hi):
    return sat_int(np.rint(np.float64(x)), lo, hi)


@njit(inline="always")
def cast_trunc(x, lo, hi):
    return sat_int(np.trunc(np.float64(x)), lo, hi)


@njit(inline="always")
def cast_floor(x, lo, hi):
    return sat_int(np.floor(np.float64(x)), lo, hi)


@njit(inline="always")
def cast_ceil(x, lo, hi):
    return sat_int(np.ceil(np.float64(x)), lo, hi)


@njit(inline="always")
def cast_round(x, lo, hi):
    """Round half away from zero (Ascend C CAST_ROUND), saturated."""
    a = np.float64(x)
    return sat_int(np.floor(a + 0.5) if a >= 0 else -np.floor(0.5 - a), lo, hi)


#: the bits of a DEQF16 scale the fixpipe keeps: sign, exponent and the 10 high mantissa bits
FIXPIPE_SCALE_BITS = np.uint32(0xFFFFE000)


@njit(inline="always")
def fixpipe_scale(s):
    """The fp32 the fixpipe's DEQF16 multiplies by: the scale s (an fp32) cut to its high 19 bits."""
    return _u32_as_f32(np.uint32(_f32_as_u32(np.float32(s)) & FIXPIPE_SCALE_BITS))


@njit(cache=True, nogil=True, _nrt=True)
def fail(err, blk, site, a, b, c):
    """Record a broken rule of core ``blk`` (site id and up to three values) and return the site id."""
    err[blk, 0] = site
    err[blk, 1] = np.int64(a)
    err[blk, 2] = np.int64(b)
    err[blk, 3] = np.int64(c)
    return site


@njit(cache=True, nogil=True, _nrt=True)
def fail_first(err, blk, failed, info):
    """``fail`` for the first true entry of ``failed`` (a tuple of the conditions of checks tested in one
    branch, in emission order), with the site and three values that ``info`` holds for it (four int64 per
    check); 0 when none is true."""
    for i in range(len(failed)):
        if failed[i]:
            return fail(err, blk, info[4 * i], info[4 * i + 1], info[4 * i + 2], info[4 * i + 3])
    return np.int64(0)


# --------------------------------------------------------------- reductions
# Row reductions run here, in functions compiled once per machine (cache=True), not in each kernel. A sum
# is vectorised with reassociation: its accumulation order is LLVM's lane order, not a sequential one (the
# chip's ReduceSum order is not modelled bit for bit either); max/min are exact in any order but for the sign
# of a zero, which the lanes' order of ``_row_max_lanes`` / ``_row_min_lanes`` decides.

@njit(cache=True, nogil=True, fastmath={"reassoc", "nsz"}, _nrt=True)
def row_sum(x, n):
    """Sum of x[:n] (float32 accumulation for float rows, int64 for integer rows)."""
    acc = x.dtype.type(0) if x.dtype.kind != "f" else np.float32(0.0)
    for j in range(n):
        acc += x[j]
    return acc


@njit(cache=True, nogil=True, _nrt=True)
def _row_max_lanes(x, n):
    """Max of x[:n] (-inf for n == 0), in 16 lanes: lane t keeps the first of its largest elements j = t mod 16
    (a greater-than update skips NaNs and keeps the first of equal values), the elements after the last whole
    16 first, then the lanes in order. Where the largest value is a zero this order picks its sign."""
    lanes = np.full(16, -np.inf, np.float32)
    nb = n - n % 16
    for j0 in range(0, nb, 16):
        for t in range(16):
            v = x[j0 + t]
            lanes[t] = v if v > lanes[t] else lanes[t]
    acc = NEG_INF
    for j in range(nb, n):
        acc = x[j] if x[j] > acc else acc
    for t in range(16):
        acc = lanes[t] if lanes[t] > acc else acc
    return acc


@njit(cache=True, nogil=True, _nrt=True)
def _row_min_lanes(x, n):
    """Min of x[:n] (+inf for n == 0): ``_row_max_lanes`` with less-than."""
    lanes = np.full(16, np.inf, np.float32)
    nb = n - n % 16
    for j0 in range(0, nb, 16):
        for t in range(16):
            v = x[j0 + t]
            lanes[t] = v if v < lanes[t] else lanes[t]
    acc = POS_INF
    for j in range(nb, n):
        acc = x[j] if x[j] < acc else acc
    for t in range(16):
        acc = lanes[t] if lanes[t] < acc else acc
    return acc


# Float order as int32 order: a float32's bits as int32, the magnitude bits flipped where the sign is set, orders
# like the values (-0 just below +0); NaNs fall outside [key(-inf), key(+inf)], -NaN below, +NaN above.
_KEY_MIN = np.int32(-2147483648)
_KEY_MAX = np.int32(2147483647)
_KEY_NEG_INF = np.int32(np.uint32(0xFF800000).view(np.int32) ^ np.int32(0x7FFFFFFF))
_KEY_POS_INF = np.int32(0x7F800000)


@njit(inline="always")
def _order_key(v):
    b = np.int32(_f32_as_u32(np.float32(v)))
    return np.int32(b ^ np.int32(np.int32(b >> np.int32(31)) & np.int32(0x7FFFFFFF)))


@njit(inline="always")
def _key_value(k):
    return _u32_as_f32(np.uint32(np.int32(k ^ np.int32(np.int32(k >> np.int32(31)) & np.int32(0x7FFFFFFF)))))


@njit(cache=True, nogil=True, _nrt=True)
def row_max(x, n):
    """Max of x[:n] (-inf for n == 0 or only NaNs; NaNs are skipped), the value ``_row_max_lanes`` gives: a
    vectorised integer max of the order keys (NaN keys replaced by the smallest), and where that max is a zero,
    whose sign depends on the order, ``_row_max_lanes`` itself. Every other value has one bit pattern."""
    acc = _KEY_MIN
    for j in range(n):
        k = _order_key(x[j])
        acc = max(acc, sel(k > _KEY_POS_INF, _KEY_MIN, k))
    if acc < _KEY_NEG_INF:
        return NEG_INF
    m = _key_value(acc)
    return _row_max_lanes(x, n) if m == 0 else m


@njit(cache=True, nogil=True, _nrt=True)
def row_min(x, n):
    """Min of x[:n] (+inf for n == 0 or only NaNs): ``row_max`` mirrored (``_row_min_lanes`` for a zero)."""
    acc = _KEY_MAX
    for j in range(n):
        k = _order_key(x[j])
        acc = min(acc, sel(k < _KEY_NEG_INF, _KEY_MAX, k))
    if acc > _KEY_POS_INF:
        return POS_INF
    m = _key_value(acc)
    return _row_min_lanes(x, n) if m == 0 else m


@njit(cache=True, nogil=True, _nrt=True)
def row_max_int(x, n):
    acc = np.int64(-9223372036854775807)
    for j in range(n):
        acc = max(acc, np.int64(x[j]))
    return acc


@njit(cache=True, nogil=True, _nrt=True)
def row_min_int(x, n):
    acc = np.int64(9223372036854775807)
    for j in range(n):
        acc = min(acc, np.int64(x[j]))
    return acc


# ------------------------------------------------- skinny streamed matmuls
# An mma whose a operand has few rows (decode: the G heads of one kv head) against a GM operand whose rows
# are plain strided rows: each 16-bit row of b is decoded once into ``rbuf`` and used for every row of a.
# Products of 16-bit values are exact in float32, so contracting to fma changes nothing; the fp32 sums are
# reassociated (vectorised), like the cube's own accumulation order, which is not modelled bit for bit.

def _variant(body, name: str, bindings: dict, **options):
    """``body`` compiled (``njit(cache=True)``) as a function of its own named ``name``, whose free names are
    the module's globals plus ``bindings`` (the variant's decoder, encoder or wrapped function).

    One body serves every dtype, yet each variant is a plain function to numba's cache, not a closure. numba
    keys a cached function on its bytecode and the pickles of its closure cells, and a cell that holds a
    dispatcher pickles with that dispatcher's per-process uuid: a closure never hit the cache, so every
    process recompiled each variant it called (about 2 s of the first decode case's compile) and left one
    more cache file beside the last. Globals are not part of the key; instead ``name`` carries the runtime's
    source stamp (``stamp.source_stamp``), so a change to a bound function (``rounding``'s converters)
    gets fresh cache entries rather than stale machine code.

    The name is also what keeps the variants apart once compiled: numba mangles symbols by qualified name,
    and two cached kernel libraries that each link a same-named variant (the fp16 and the bf16 row reader,
    say) would resolve to whichever the process loaded first, the other dtype's kernel silently reading
    with the wrong decoder."""
    fn = types.FunctionType(body.__code__, {**globals(), **bindings}, name)
    fn.__qualname__ = name
    fn.__doc__ = body.__doc__
    return njit(cache=True, nogil=True, _nrt=True, **options)(fn)


def _stamped(name: str) -> str:
    """``name`` with the runtime's source stamp, the cache name of a variant (``_variant``)."""
    return f"{name}_{source_stamp(('rt.py', 'rounding.py'))}"


# Bodies of the per-dtype variants. ``decode`` / ``encode`` (a 16-bit or FP8 storage value to float32 and back),
# ``decode_row`` and ``fn`` are not defined in this module: ``_variant`` binds them per variant.

def _decode_row(flat, start, n, dst):
    seg = flat[start:start + n]
    for c in range(n):
        dst[c] = decode(seg[c])  # noqa: F821 (bound per variant)


def _mm_bt(a, flat, base, rstride, n, k, out, rbuf):
    """out[i, j] = a[i, :k] . B[j, :k] with B row j at flat[base + j*rstride :]."""
    m = a.shape[0]
    for j in range(n):
        seg = flat[base + j * rstride:base + j * rstride + k]
        for c in range(k):
            rbuf[c] = decode(seg[c])  # noqa: F821 (bound per variant)
        for i in range(m):
            ar = a[i]
            acc = np.float32(0.0)
            for c in range(k):
                acc += ar[c] * rbuf[c]
            out[i, j] = acc


def _mm_b(a, flat, base, rstride, kdim, n, out, rbuf):
    """out[i, :n] = a[i, :kdim] @ B with B row r at flat[base + r*rstride :] (n columns). Four rows of B
    are decoded per pass over ``out`` (``rbuf`` holds one; the other three are this call's own), so each
    output row is loaded and stored once per four products instead of once per product."""
    m = a.shape[0]
    for i in range(m):
        orow = out[i]
        for c in range(n):
            orow[c] = 0.0
    quad = np.empty((3, n), np.float32)
    r = 0
    while r + 4 <= kdim:
        decode_row(flat, base + r * rstride, n, rbuf)  # noqa: F821 (bound per variant)
        decode_row(flat, base + (r + 1) * rstride, n, quad[0])  # noqa: F821
        decode_row(flat, base + (r + 2) * rstride, n, quad[1])  # noqa: F821
        decode_row(flat, base + (r + 3) * rstride, n, quad[2])  # noqa: F821
        b0, b1, b2, b3 = rbuf, quad[0], quad[1], quad[2]
        for i in range(m):
            x0, x1, x2, x3 = a[i, r], a[i, r + 1], a[i, r + 2], a[i, r + 3]
            orow = out[i]
            for c in range(n):
                orow[c] += x0 * b0[c] + x1 * b1[c] + x2 * b2[c] + x3 * b3[c]
        r += 4
    while r < kdim:
        decode_row(flat, base + r * rstride, n, rbuf)  # noqa: F821
        for i in range(m):
            air = a[i, r]
            orow = out[i]
            for c in range(n):
                orow[c] += air * rbuf[c]
        r += 1


def _skinny(decode, tag: str):
    """The skinny mma pair (``mm_bt_<tag>``, ``mm_b_<tag>``) over B rows stored as ``decode`` reads them."""
    row = types.FunctionType(_decode_row.__code__, {**globals(), "decode": decode}, f"decode_row_{tag}")
    bind = {"decode": decode, "decode_row": njit(inline="always")(row)}
    fm = {"reassoc", "nsz", "contract"}
    return (_variant(_mm_bt, _stamped(f"mm_bt_{tag}"), bind, fastmath=fm),
            _variant(_mm_b, _stamped(f"mm_b_{tag}"), bind, fastmath=fm))


@njit(inline="always")
def _as_f32(x):
    return np.float32(x)


mm_bt_f16, mm_b_f16 = _skinny(f16_bits_to_f32, "f16")
mm_bt_bf16, mm_b_bf16 = _skinny(bf16_bits_to_f32, "bf16")
mm_bt_f32, mm_b_f32 = _skinny(_as_f32, "f32")


# ------------------------------------------------------------ GM row copies
# The common GM window: rows at a fixed stride, columns contiguous. Generated kernels call these (compiled
# once per machine) instead of emitting the loops, which keeps each kernel's own compile small.

def _read_rows(flat, base, rstride, n0, n1, dst):
    """dst[r, :n1] = decode(flat[base + r*rstride : ... + n1]) for r < n0."""
    for r in range(n0):
        seg = flat[base + r * rstride:base + r * rstride + n1]
        row = dst[r]
        for c in range(n1):
            row[c] = decode(seg[c])  # noqa: F821 (bound per variant)


def _write_rows(src, flat, base, rstride, n0, n1):
    """flat[base + r*rstride : ... + n1] = encode(src[r, :n1]) for r < n0."""
    for r in range(n0):
        seg = flat[base + r * rstride:base + r * rstride + n1]
        row = src[r]
        for c in range(n1):
            seg[c] = encode(row[c])  # noqa: F821 (bound per variant)


def _gm_copies(decode, encode, tag: str):
    """The GM row reader and writer of one storage dtype (``read_rows_<tag>``, ``write_rows_<tag>``)."""
    return (_variant(_read_rows, _stamped(f"read_rows_{tag}"), {"decode": decode}),
            _variant(_write_rows, _stamped(f"write_rows_{tag}"), {"encode": encode}))


@njit(inline="always")
def _same(x):
    return x


read_rows_f16, write_rows_f16 = _gm_copies(f16_bits_to_f32, f32_to_f16_bits, "f16")
read_rows_bf16, write_rows_bf16 = _gm_copies(bf16_bits_to_f32, f32_to_bf16_bits, "bf16")
read_rows_f32, write_rows_f32 = _gm_copies(_as_f32, _as_f32, "f32")
read_rows_raw, write_rows_raw = _gm_copies(_same, _same, "raw")
#: an FP8 (e4m3fn) tensor is read only (the language refuses stores to it): no writer
read_rows_f8e4m3 = _variant(_read_rows, _stamped("read_rows_f8e4m3"), {"decode": f8e4m3_bits_to_f32})


# ---------------------------------------------------------- called versions
# The same functions, compiled once and called: generated kernels use these where a loop is short (rank-1
# tiles), because each inlined call site costs numba a lot of compile time.

def _call(x):
    return fn(x)  # noqa: F821 (bound per variant)


def _called(f):
    """``f`` (an inlined one-argument runtime function) compiled once as a function of its own."""
    return _variant(_call, _stamped(f"{f.py_func.__name__}_call"), {"fn": f})


fexp_call, flog_call, fsqrt_call, frsqrt_call = _called(fexp), _called(flog), _called(fsqrt), _called(frsqrt)
round_f16_call, round_bf16_call = _called(round_to_f16), _called(round_to_bf16)
ftanh_call, fsigmoid_call, ferf_call, ffloor_call = _called(ftanh), _called(fsigmoid), _called(ferf), _called(ffloor)


@njit(cache=True, nogil=True, _nrt=True)
def fpow_call(x, y):
    return fpow(x, y)


@njit(cache=True, nogil=True, fastmath={"reassoc", "nsz", "contract"}, _nrt=True)
def dot_rows_t(a, rbuf, k, out, r):
    """out[i, r] = a[i, :k] . rbuf[:k] for every row i of a (one decoded row of a streamed b operand)."""
    for i in range(a.shape[0]):
        ar = a[i]
        acc = np.float32(0.0)
        for c in range(k):
            acc += ar[c] * rbuf[c]
        out[i, r] = acc


@njit(cache=True, nogil=True, fastmath={"reassoc", "nsz", "contract"}, _nrt=True)
def axpy_rows(a, r, rbuf, n, out):
    """out[i, :n] += a[i, r] * rbuf[:n] for every row i of a (one decoded row of a streamed b operand)."""
    for i in range(a.shape[0]):
        air = a[i, r]
        orow = out[i]
        for c in range(n):
            orow[c] += air * rbuf[c]


@njit(cache=True, nogil=True, _nrt=True)
def dot_into(a, b, out):
    """out = a @ b (numpy's np.dot with ``out``: BLAS sgemm on float32) for any valid extents: nothing to do
    when the product is empty, zeros when the contraction is (BLAS is never called with a zero extent).
    Compiled once per machine and signature, with its branches, rather than typed inside each kernel."""
    if out.shape[0] > 0 and out.shape[1] > 0:
        if a.shape[1] == 0:
            out[:, :] = 0
        else:
            np.dot(a, b, out)


#: an mma whose a operand has at most this many valid rows streams its GM b operand row by row (no BLAS)
SKINNY_ROWS = 16


def _mm_bt_auto(a, flat, base, rstride, n, k, out, rbuf, stage):
    """out = a @ B.T for B's n rows of k elements at flat[base + j*rstride :] (a plain-rows GM window): the
    streamed product ``mm_bt`` for a few rows of a, else B decoded whole into ``stage`` and multiplied by
    BLAS. The choice the generated kernel used to make in a branch of its own, one per mma."""
    if a.shape[0] <= SKINNY_ROWS:
        mm_bt(a, flat, base, rstride, n, k, out, rbuf)  # noqa: F821 (bound per variant)
    else:
        staged = stage[:n * k].reshape(n, k)
        read_rows(flat, base, rstride, n, k, staged)  # noqa: F821 (bound per variant)
        dot_into(a, staged.T, out)


def _mm_b_auto(a, flat, base, rstride, kdim, n, out, rbuf, stage):
    """out = a @ B for B's kdim rows of n elements at flat[base + r*rstride :], chosen as ``_mm_bt_auto``."""
    if a.shape[0] <= SKINNY_ROWS:
        mm_b(a, flat, base, rstride, kdim, n, out, rbuf)  # noqa: F821 (bound per variant)
    else:
        staged = stage[:kdim * n].reshape(kdim, n)
        read_rows(flat, base, rstride, kdim, n, staged)  # noqa: F821 (bound per variant)
        dot_into(a, staged, out)


def _auto(tag: str, mm_bt, mm_b, read_rows):
    """The pair (``mm_auto_bt_<tag>``, ``mm_auto_b_<tag>``) over one storage dtype's streamed products."""
    bind = {"mm_bt": mm_bt, "mm_b": mm_b, "read_rows": read_rows}
    return (_variant(_mm_bt_auto, _stamped(f"mm_auto_bt_{tag}"), bind),
            _variant(_mm_b_auto, _stamped(f"mm_auto_b_{tag}"), bind))


mm_auto_bt_f16, mm_auto_b_f16 = _auto("f16", mm_bt_f16, mm_b_f16, read_rows_f16)
mm_auto_bt_bf16, mm_auto_b_bf16 = _auto("bf16", mm_bt_bf16, mm_b_bf16, read_rows_bf16)
mm_auto_bt_f32, mm_auto_b_f32 = _auto("f32", mm_bt_f32, mm_b_f32, read_rows_f32)


#: float32 adds integers exactly up to this magnitude: a contraction of k integer products of at most ``pmax``
#: each is exact in float32 while k * pmax stays within it (every partial sum is an integer no larger)
F32_EXACT = 2 ** 24


@njit(cache=True, nogil=True, _nrt=True)
def dot_int_into(a, b, out, trans, pmax):
    """out = a @ b (``trans``: a @ b.T) for 8-bit integer operands held in int32 tiles: the cube's int8 x int8
    -> int32 MMAD (``pmax``: the largest |product| the operand dtypes allow, 2**14 for int8 x int8). Computed
    by BLAS on floats, which is exact here: every partial sum is an integer of at most k * pmax, so float32
    (while that is within ``F32_EXACT``) or float64 (any contraction a tile holds) adds without rounding and the
    accumulation order does not matter. The sum is then narrowed to int32 as the cube's accumulator wraps.
    An empty product is left as it is."""
    if out.shape[0] == 0 or out.shape[1] == 0:
        return
    k = a.shape[1]
    if k * pmax <= F32_EXACT:
        r32 = np.dot(a.astype(np.float32), b.astype(np.float32).T) if trans else \
            np.dot(a.astype(np.float32), b.astype(np.float32))
        _narrow_into(r32, out)
    else:
        r64 = np.dot(a.astype(np.float64), b.astype(np.float64).T) if trans else \
            np.dot(a.astype(np.float64), b.astype(np.float64))
        _narrow_into(r64, out)


@njit(cache=True, nogil=True, _nrt=True)
def mm_bt_i8(a, flat, base, rstride, n, k, out):
    """out[i, j] = a[i, :k] . B[j, :k] for 8-bit a (an int32 tile) and 8-bit B rows at flat[base + j*rstride :]
    (a streamed GM operand, as ``mm_bt_f16``): the cube's int8 MMAD for a few rows of a. The operands are
    widened to 16 bits and summed as integers (LLVM multiplies pairs of 16-bit lanes), exact for any k; the
    sums narrow to int32 as the cube's accumulator wraps."""
    m = a.shape[0]
    a16 = np.empty((m, k), np.int16)
    for i in range(m):
        for c in range(k):
            a16[i, c] = a[i, c]
    rb = np.empty(k, np.int16)
    for j in range(n):
        seg = flat[base + j * rstride:base + j * rstride + k]
        for c in range(k):
            rb[c] = seg[c]
        for i in range(m):
            ar = a16[i]
            acc = np.int64(0)
            for c in range(k):
                acc += np.int32(ar[c]) * np.int32(rb[c])
            out[i, j] = acc


@njit(cache=True, nogil=True, _nrt=True)
def mm_b_i8(a, flat, base, rstride, kdim, n, out, pmax):
    """out[i, :n] = a[i, :kdim] @ B for 8-bit a (an int32 tile) and 8-bit B rows at flat[base + r*rstride :]
    (``pmax`` as for ``dot_int_into``): in float32 through ``mm_b_f32`` where that is exact (kdim * pmax within
    ``F32_EXACT``), else in int64; narrowed to int32 as the cube's accumulator wraps."""
    m = a.shape[0]
    if kdim * pmax <= F32_EXACT:
        acc = np.empty((m, n), np.float32)
        mm_b_f32(a[:, :kdim].astype(np.float32), flat, base, rstride, kdim, n, acc, np.empty(n, np.float32))
        _narrow_into(acc, out)
        return
    acc64 = np.zeros((m, n), np.int64)
    for r in range(kdim):
        seg = flat[base + r * rstride:base + r * rstride + n]
        for i in range(m):
            air = np.int64(a[i, r])
            orow = acc64[i]
            for c in range(n):
                orow[c] += air * seg[c]
    _narrow_into(acc64, out)


@njit(cache=True, nogil=True)
def _narrow_into(r, out):
    """out = r, integral floats narrowed through int64 to int32 (wrapping as an int32 accumulator does)."""
    for i in range(r.shape[0]):
        orow = out[i]
        rrow = r[i]
        for j in range(rrow.shape[0]):
            orow[j] = np.int32(np.int64(rrow[j]))
