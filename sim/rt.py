"""Functions that generated simulator code calls (the numba runtime of a kernel).

Model
-----
Generated kernels (see ``codegen.py``) hold every floating tile as float32
values; 16-bit values are rounded where the chip stores them (``rounding``)
and GM 16-bit tensors are read and written as uint16 bits. This module gathers
the scalar helpers the generated source imports by name, so the generated
text stays short and readable.

``fexp`` is the vector unit's exp: float32, a Cody-Waite range reduction and a
degree-6 polynomial, within 1 ulp of the correctly rounded result over the
normal range. Like a vector unit it flushes results below the smallest normal
float32 (x < -87.33) to 0, gives +inf above 88.72 and NaN for NaN; exp(-inf)
is exactly 0, which is what masking with -inf relies on. It is branch-free so
loops over it vectorise (about 0.8 ns per element on one core, against about
4 ns for libm's expf).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .rounding import (_u32_as_f32, bf16_bits_to_f32, f16_bits_to_f32, f32_to_bf16_bits, f32_to_f16_bits,
                       round_to_bf16, round_to_f16)

__all__ = ["fexp", "flog", "fsqrt", "frsqrt", "fmax", "fmin", "frelu", "f16_bits_to_f32", "bf16_bits_to_f32",
           "f32_to_f16_bits", "f32_to_bf16_bits", "round_to_f16", "round_to_bf16", "FASTMATH", "f32",
           "NEG_INF", "POS_INF", "cast_rint", "cast_trunc", "cast_floor", "cast_ceil", "fail"]

#: LLVM fast-math flags for generated code: no "nnan"/"ninf" (masks use -inf), so NaN and inf stay IEEE.
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
    n = math.floor(xc * _LOG2E + np.float32(0.5))
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
def cast_rint(x):
    return np.int64(np.rint(x))


@njit(inline="always")
def cast_trunc(x):
    return np.int64(x)


@njit(inline="always")
def cast_floor(x):
    return np.int64(math.floor(x))


@njit(inline="always")
def cast_ceil(x):
    return np.int64(math.ceil(x))


@njit(cache=True, nogil=True)
def fail(err, blk, site, a, b, c):
    """Record a broken rule of core ``blk`` (site id and up to three values) and return the site id."""
    err[blk, 0] = site
    err[blk, 1] = np.int64(a)
    err[blk, 2] = np.int64(b)
    err[blk, 3] = np.int64(c)
    return site
