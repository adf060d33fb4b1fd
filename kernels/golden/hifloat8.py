"""HiFloat8 (HiF8): Ascend's 8-bit float, as numpy has no dtype for it (its bytes travel as uint8).

Model
-----
The format ("Ascend HiFloat8 Format for Deep Learning", arXiv 2409.16626) spends its 7 bits after the sign on a
prefix-coded *dot* field that says how many of the remaining bits hold the exponent, so precision tapers: 3
mantissa bits near 1, 1 far from it. Bits, most significant first::

    S | dot | exponent (w bits) | mantissa (m bits)        w + m + len(dot) = 7

=========  ===  ===  ====================  =====================================================
dot        w    m    exponent E            value
=========  ===  ===  ====================  =====================================================
11         4    1    ±(8 .. 15)            (-1)^S · 2^E · (1 + M/2)
10         3    2    ±(4 .. 7)             (-1)^S · 2^E · (1 + M/4)
01         2    3    ±(2, 3)               (-1)^S · 2^E · (1 + M/8)
001        1    3    ±1                    (-1)^S · 2^E · (1 + M/8)
0001       0    3    0                     (-1)^S · (1 + M/8)
0000       0    3    (denormal)            (-1)^S · 2^(M - 23), M = 1..7: 2^-22 .. 2^-16
=========  ===  ===  ====================  =====================================================

The exponent is sign-magnitude with an implicit leading one: its first bit is the sign (1 negative), the other
w - 1 bits b give the magnitude 2^(w-1) + b. Special codes: 0x00 is zero (there is no -0), 0x80 (S = 1 with
the denormal dot and M = 0) is the one NaN, and 0x6F / 0xEF (dot 11, E = +15, M = 1) are +inf / -inf, so the
largest finite value is 0x6E = 2^15 = 32768. The smallest normal is 0x7E = 2^-15, the smallest denormal
0x01 = 2^-22, and 1.0 is 0x08. 253 codes are finite (126 positive, 126 negative, zero).

Every HiF8 value is exact in float32, float16 and bfloat16 (at most 3 mantissa bits; exponents -22 .. 15 lie
inside bf16's range and inside fp16's subnormal-extended range, 2^-24 .. 65504), so a conversion to any of them
rounds nothing. ``HIF8_TABLE`` holds the 256 values as float32 (code = index); the Ascend950 dequant kernel's
launch (``fia.launch.float_cache_widened``) and the golden (``golden.antiquant``) both read it.

A HiF8 tensor is a uint8 array of its codes plus a marker saying so: torch_npu's V2 operators take a uint8
tensor with ``*_dtype=torch_npu.hifloat8`` (the code ``TORCH_NPU_HIFLOAT8``, 290); ``hifloat8_marker`` accepts
that code and the names "hifloat8" / "hif8".

Invariants
----------
* ``HIF8_TABLE`` is built once from the field definition above (``_decode``) and is read-only.
* ``hif8_values(x)`` never rounds: it is ``HIF8_TABLE[x]`` for a uint8 array x.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["HIFLOAT8", "TORCH_NPU_HIFLOAT8", "HIF8_TABLE", "HIF8_MAX", "HIF8_NAN", "HIF8_INF", "hif8_values",
           "hifloat8_marker"]

HIFLOAT8 = "hifloat8"
#: torch_npu.hifloat8: the dtype code a V2 operator's ``*_dtype`` argument takes for a HiF8 uint8 tensor
TORCH_NPU_HIFLOAT8 = 290
HIF8_NAN = 0x80       #: the one NaN code
HIF8_INF = 0x6F       #: +inf (0xEF is -inf)
HIF8_MAX = 32768.0    #: the largest finite value, code 0x6E

#: (leading bits of the 7-bit body, their count, exponent width): the dot field's prefix code
_DOTS = ((0b11, 2, 4), (0b10, 2, 3), (0b01, 2, 2), (0b001, 3, 1), (0b0001, 4, 0))


def _decode(code: int) -> float:
    """The value of one HiF8 code (0..255), from the fields."""
    negative = bool(code & 0x80)
    body = code & 0x7F
    if body >> 3 == 0:   # dot 0000: zero, NaN, or a denormal 2^(M - 23)
        m = body & 0x7
        if m == 0:
            return math.nan if negative else 0.0
        return math.copysign(math.ldexp(1.0, m - 23), -1.0 if negative else 1.0)
    if body == HIF8_INF:
        return -math.inf if negative else math.inf
    for prefix, length, width in _DOTS:
        if body >> (7 - length) == prefix:
            break
    mbits = 7 - length - width
    mant = body & ((1 << mbits) - 1)
    exp_field = (body >> mbits) & ((1 << width) - 1)
    if width == 0:
        exponent = 0
    else:
        magnitude = (1 << (width - 1)) + (exp_field & ((1 << (width - 1)) - 1))
        exponent = -magnitude if exp_field >> (width - 1) else magnitude
    value = math.ldexp(1.0 + mant / (1 << mbits), exponent)
    return -value if negative else value


def _table() -> np.ndarray:
    table = np.array([_decode(c) for c in range(256)], dtype=np.float32)
    table.flags.writeable = False
    return table


#: the float32 value of each HiF8 code (index = code)
HIF8_TABLE = _table()


def hif8_values(x) -> np.ndarray:
    """The float32 values of a uint8 array of HiF8 codes (same shape)."""
    a = np.asarray(x)
    if a.dtype != np.uint8:
        raise TypeError(f"hif8_values: HiF8 codes come as uint8, got {a.dtype}")
    return HIF8_TABLE[a]


def hifloat8_marker(dtype) -> bool:
    """Whether a V2 ``*_dtype`` argument names HiFloat8: torch_npu's code 290, or "hifloat8" / "hif8"."""
    if isinstance(dtype, str):
        return dtype.strip().lower().replace("torch_npu.", "") in ("hifloat8", "hif8")
    if isinstance(dtype, (int, np.integer)) and not isinstance(dtype, bool):
        return int(dtype) == TORCH_NPU_HIFLOAT8
    return False
