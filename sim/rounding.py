"""Exact 16-bit float storage for the simulator: decode, RNE encode, round.

Model
-----
numba has no float16, so the simulator keeps 16-bit floats in two forms:

* in global memory (GM) as **uint16 bit patterns** (fp16 = IEEE binary16,
  bf16 = the upper half of an IEEE binary32);
* on chip as **float32 values**.  Both 16-bit formats are exact subsets of
  float32, so a tile holding a "16-bit" value holds it exactly.

Whenever the chip stores a 16-bit value, the float32 value is rounded exactly
as an IEEE conversion would round it.  This module is that conversion, in
flavours with identical results:

* numba scalar functions (``@njit(inline="always")``) for generated kernels,
  and array loops over them (``parallel=False``, ``cache=True``).  The fp16
  ones exist twice: ``soft_*`` on integer operations only, and ``hard_*`` on
  LLVM's ``fptrunc``/``fpext`` to ``half``, which x86-64's F16C executes as
  VCVTPS2PH / VCVTPH2PS (3-5x faster in a compute-bound loop).  The public
  names (``f16_bits_to_f32``, ``f32_to_f16_bits``, ``round_to_f16``) are the
  ``hard_*`` ones on an F16C host (``HARDWARE_F16``), else the ``soft_*``
  ones; ``CVTILE_SOFT_F16=1`` forces the integer path.  bf16 has no hardware
  conversion on x86 and is integer-only;
* numpy references (``ref_*``) built on ``np.float16`` and
  ``ml_dtypes.bfloat16``, used by the tests and by host code.

Semantics
---------
``x`` is a float32 (another float type is first converted to float32); a
16-bit pattern ``u`` is any integer, taken modulo 2**16 (so int16 views work).

``f16_bits_to_f32(u)`` / ``bf16_bits_to_f32(u)``
    Exact decode.  Every pattern maps to the float32 of the same value:
    subnormals stay exact, -0 stays -0, +-inf stay +-inf.  NaNs stay NaNs with
    their payload carried over unchanged (fp16 payload shifted left by 13,
    bf16 payload by 16), so a signalling NaN decodes to a signalling NaN, as
    numpy's ``float16 -> float32`` and ml_dtypes' ``bfloat16 -> float32``
    casts do.  Harmless: nothing in the simulator traps.

``f32_to_f16_bits(x)`` / ``f32_to_bf16_bits(x)``
    IEEE round-to-nearest, ties-to-even, with gradual underflow:

    * fp16: finite ``|x| >= 65520`` (half-way between 65504 and 2**16) and
      +-inf give +-inf (0x7c00); ``|x|`` just below 65520 gives 65504.
      ``|x| < 2**-14`` rounds onto the subnormal grid (multiples of 2**-24),
      ties to even, and can round up into the smallest normal 2**-14;
      ``|x| <= 2**-25`` gives +-0 (2**-25 itself is a tie and goes to the even
      0).  fp32 subnormals therefore always give +-0.
    * bf16: rounding of the low 16 bits of the float32 pattern, ties to even;
      ``|x| >= 0x7f7f8000`` (half-way between bf16 max and 2**128) gives +-inf;
      fp32 subnormals round onto the bf16 subnormal grid.
    * the sign is always kept: tiny negatives give -0, -0 gives -0;
    * NaN gives a **quiet** NaN of the same sign carrying the top payload bits
      that fit (fp16: ``0x7e00 | payload[22:13]``, bf16: ``hi16 | 0x0040``).
      A NaN never becomes an infinity or a number.

``round_to_f16(x)`` / ``round_to_bf16(x)``
    The float32 value read back after storing ``x`` as a 16-bit value:
    bit-for-bit ``decode(encode(x))`` for every float32 pattern, NaNs included
    (so the result of a NaN is a quiet NaN).

``round_to_f16_away(x)`` / ``round_to_bf16_away(x)``
    The same with ties away from zero (Ascend C ``CAST_ROUND``): equal to the
    RNE rounding except at an exact half-way point, which goes to the
    neighbour of larger magnitude (fp16: 65520 still gives inf, 2**-25 gives
    2**-24); NaN as above.

``f32_as_u32(x)`` / ``u32_as_f32(u)``
    numba intrinsics reinterpreting a float32 as its uint32 pattern and a
    32-bit integer pattern as a float32 (no conversion; usable in kernels).

Array helpers (numba, ``cache=True``): ``decode_f16(u, out)``,
``decode_bf16(u, out)``, ``encode_f16(x, out)``, ``encode_bf16(x, out)``,
``round_f16(x, out)``, ``round_bf16(x, out)``, ``round_f16_inplace(x)``,
``round_bf16_inplace(x)``.  ``u`` is a uint16 (or int16) array, ``x`` a
float32 array, ``out`` an array of the same size (not shape): elementwise in
C order; a multi-dimensional array must be C-contiguous, a 1-D one may be
strided (but then does not vectorise).  They return ``out`` (or ``x``) and
raise ``ValueError`` on a size mismatch.

The ``ref_*`` numpy references give the same values; NaN payloads may differ
(numpy keeps a signalling NaN signalling, ml_dtypes canonicalises), NaN-ness
and sign do not.

Invariants of the implementation
--------------------------------
* The hardware and the integer fp16 paths give the same bits for every input,
  NaNs included (checked on every fp16 pattern and on every float32 near an
  fp16 value or midpoint; ``hard_f16_bits_to_f32`` keeps a NaN's payload
  itself, where VCVTPH2PS would quiet a signalling one).  VCVTPS2PH rounds by
  MXCSR's rounding field, which nothing in a Python process changes from
  nearest-even; its output ignores FTZ, and DAZ only zeroes float32
  subnormal inputs, which round to +-0 in fp16 anyway, sign kept.  The
  generated kernels' runtime stamp (``codegen.runtime_stamp``) names the
  path, so their cache keeps the paths apart; numba's own cache of this
  module's and ``rt``'s helpers is keyed by source file and CPU only and may
  serve either path's machine code, which is harmless for the same reason.
* The integer path (``soft_*``, and all of bf16) works on the bit pattern only: no float arithmetic
  that fastmath flags (``contract`` could fuse a caller's multiply into a
  magic-number add, ``reassoc`` could cancel ``(x + c) - c``) or the MXCSR
  modes (FTZ/DAZ, rounding direction) could change.  The only float operation
  is in the fp16 decode of subnormals, ``float32(m) * 2**-24`` with
  ``m < 1024``: exact, and its result is a normal float32.  (A magic-number
  ``x + 0.5`` encode of fp16 subnormals was measured about 1.5x faster when
  compute-bound and rejected for these reasons; large arrays are close to
  memory-bound either way.)
* All selects, no branches: a loop calling these functions vectorises (checked
  by ``loop_vectorised`` and the benchmark).
* 32-bit lanes: every intermediate is truncated back to uint32 so that LLVM
  narrows numba's 64-bit integer arithmetic to 32-bit vector lanes.
"""

from __future__ import annotations

import os

import ml_dtypes
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

__all__ = [
    "f32_as_u32",
    "u32_as_f32",
    "f16_bits_to_f32",
    "bf16_bits_to_f32",
    "f8e4m3_bits_to_f32",
    "f32_to_f16_bits",
    "f32_to_bf16_bits",
    "round_to_f16",
    "round_to_bf16",
    "round_to_f16_away",
    "round_to_bf16_away",
    "decode_f16",
    "decode_bf16",
    "encode_f16",
    "encode_bf16",
    "round_f16",
    "round_bf16",
    "round_f16_inplace",
    "round_bf16_inplace",
    "ref_f16_bits_to_f32",
    "ref_bf16_bits_to_f32",
    "ref_f32_to_f16_bits",
    "ref_f32_to_bf16_bits",
    "ref_round_to_f16",
    "ref_round_to_bf16",
    "loop_vectorised",
    "soft_f16_bits_to_f32",
    "soft_f32_to_f16_bits",
    "soft_round_to_f16",
    "hard_f16_bits_to_f32",
    "hard_f32_to_f16_bits",
    "hard_round_to_f16",
    "HARDWARE_F16",
    "F16_MAX",
    "F16_OVERFLOW",
    "BF16_MAX",
]

F16_MAX = 65504.0  #: largest finite fp16
F16_OVERFLOW = 65520.0  #: smallest float32 magnitude that rounds to fp16 inf
BF16_MAX = float(np.uint32(0x7F7F0000).view(np.float32))  #: largest finite bf16

# Integer discipline: numba widens uint32 (op) uint32 to uint64 and a uint64
# mixed with a plain int literal to float64.  So every constant below is a
# uint32 and every intermediate is wrapped back into _U32(...): the values stay
# exact 32-bit patterns and LLVM narrows the arithmetic to 32-bit vector lanes.
# A variable shift amount is masked with 31 so LLVM knows it is in range.
_U32 = np.uint32
_TWO_M24 = np.float32(2.0**-24)
_SIGN = _U32(0x80000000)
_ABS = _U32(0x7FFFFFFF)
_F32_INF = _U32(0x7F800000)
_F32_QUIET = _U32(0x00400000)
_ONE = _U32(1)


# --------------------------------------------------------------- bit casts
@intrinsic
def _f32_as_u32(typingctx, x):
    """Reinterpret a float32 as its uint32 bit pattern (no conversion)."""
    if x != types.float32:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return types.uint32(types.float32), codegen


@intrinsic
def _u32_as_f32(typingctx, u):
    """Reinterpret a 32-bit integer bit pattern as a float32."""
    if not isinstance(u, types.Integer) or u.bitwidth != 32:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.FloatType())

    return types.float32(u), codegen


#: Public names of the bit casts (the underscored names are kept as aliases).
f32_as_u32 = _f32_as_u32
u32_as_f32 = _u32_as_f32


@njit(inline="always")
def _bits(x):
    return _f32_as_u32(np.float32(x))


# ----------------------------------------------------------------- decode
@njit(inline="always")
def soft_f16_bits_to_f32(u):
    """fp16 bit pattern -> exact float32 value (NaN payload kept); integer operations only."""
    h = _U32(np.uint16(u))
    a = _U32(h & _U32(0x7FFF))
    sign = _U32(_U32(h & _U32(0x8000)) << _U32(16))
    shifted = _U32(a << _U32(13))
    normal = _U32(shifted + _U32(112 << 23))  # rebias 15 -> 127
    infnan = _U32(shifted | _F32_INF)
    # subnormal (and zero): a * 2**-24 is exact and a normal float32 (a < 1024)
    sub = _U32(_f32_as_u32(np.float32(np.int32(a)) * _TWO_M24) & _ABS)
    r = infnan if a >= 0x7C00 else (sub if a < 0x400 else normal)
    return _u32_as_f32(_U32(r | sign))


@njit(inline="always")
def bf16_bits_to_f32(u):
    """bf16 bit pattern -> exact float32 value (the upper half of its bits)."""
    return _u32_as_f32(_U32(_U32(np.uint16(u)) << _U32(16)))


@njit(inline="always")
def f8e4m3_bits_to_f32(u):
    """float8_e4m3fn bit pattern -> exact float32 value: 1 sign, 4 exponent (bias 7) and 3 mantissa bits, no
    infinities, S.1111.111 NaN, subnormals m * 2**-9."""
    b = np.int32(np.uint8(u))
    e = (b >> 3) & 15
    m = b & 7
    mag = np.float32(m) * np.float32(2.0 ** -9) if e == 0 else \
        np.float32(8 + m) * np.float32(2.0 ** -10) * np.float32(np.int32(1) << e)
    mag = np.float32(np.nan) if (e == 15 and m == 7) else mag
    return -mag if b >= 128 else mag


# ----------------------------------------------------------------- encode
@njit(inline="always")
def soft_f32_to_f16_bits(x):
    """float32 -> fp16 bit pattern, round-to-nearest-even (see module doc); integer operations only."""
    u = _bits(x)
    a = _U32(u & _ABS)
    sign = _U32(_U32(u >> _U32(16)) & _U32(0x8000))
    # normal range: rebias 127 -> 15 and round at bit 13.  Clamping at 2**16
    # makes every overflow (inf included) carry exactly onto 0x7c00.
    an = min(a, _U32(0x47800000))
    lsb = _U32(_U32(an >> _U32(13)) & _ONE)
    hn = _U32(_U32(an - _U32(0x38000000)) + _U32(0xFFF))
    hn = _U32(_U32(hn + lsb) >> _U32(13))
    # subnormal range (a < 2**-14): the mantissa with its implicit bit, shifted
    # right by s = 126 - exponent (14..24, capped at 31: the result is 0 there)
    # with ties to even.  Rounding up out of the range gives 0x400 by itself.
    e = _U32(a >> _U32(23))
    s = _U32(_U32(_U32(126) - min(max(e, _U32(95)), _U32(112))) & _U32(31))
    m = _U32(_U32(a & _U32(0x7FFFFF)) | _U32(0x800000))
    half_m1 = _U32(_U32(_ONE << _U32(_U32(s - _ONE) & _U32(31))) - _ONE)
    lsb = _U32(_U32(m >> s) & _ONE)
    hs = _U32(_U32(_U32(m + half_m1) + lsb) >> s)
    h = hs if a < 0x38800000 else hn
    qnan = _U32(_U32(_U32(a >> _U32(13)) & _U32(0x3FF)) | _U32(0x7E00))
    h = qnan if a > 0x7F800000 else h
    return np.uint16(_U32(h | sign))


@njit(inline="always")
def f32_to_bf16_bits(x):
    """float32 -> bf16 bit pattern, round-to-nearest-even (see module doc)."""
    u = _bits(x)
    hi = _U32(u >> _U32(16))
    # a NaN must not go through the rounding add: its carry could make an inf
    r = _U32(_U32(_U32(u + _U32(0x7FFF)) + _U32(hi & _ONE)) >> _U32(16))
    qnan = _U32(hi | _U32(0x0040))
    r = qnan if _U32(u & _ABS) > 0x7F800000 else r
    return np.uint16(r)


# ------------------------------------------------------------------ round
@njit(inline="always")
def soft_round_to_f16(x):
    """float32 -> the float32 value of its fp16 rounding (decode(encode(x))); integer operations only."""
    u = _bits(x)
    a = _U32(u & _ABS)
    sign = _U32(u & _SIGN)
    # Round the float32 pattern in place at bit s, ties to even: s = 13 for
    # fp16 normals, 126 - exponent (14..23) in the fp16 subnormal range, where
    # the grid is 2**-24.  The carry of a round-up moves into the exponent.
    e = _U32(a >> _U32(23))
    s = _U32(_U32(_U32(126) - min(max(e, _U32(103)), _U32(113))) & _U32(31))
    half = _U32(_ONE << _U32(_U32(s - _ONE) & _U32(31)))
    keep = _U32(~_U32(_U32(half + half) - _ONE))
    lsb = _U32(_U32(a >> s) & _ONE)
    r = _U32(_U32(_U32(_U32(a + half) - _ONE) + lsb) & keep)
    # |x| < 2**-24: only 0 (|x| <= 2**-25, the tie goes to even) or 2**-24
    tiny = _U32(0) if a <= 0x33000000 else _U32(0x33800000)
    r = tiny if a < 0x33800000 else r
    r = _F32_INF if a >= 0x477FF000 else r  # overflow, inf
    qnan = _U32(_U32(a & _U32(0x7FFFE000)) | _F32_QUIET)
    r = qnan if a > 0x7F800000 else r
    return _u32_as_f32(_U32(r | sign))


# ------------------------------------------------- the F16C conversions
@intrinsic
def _cvt_f32_f16(typingctx, x):
    """float32 -> fp16 bit pattern by LLVM's ``fptrunc`` (x86 F16C: VCVTPS2PH), round to nearest even."""
    if x != types.float32:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), ir.IntType(16))

    return types.uint16(types.float32), codegen


@intrinsic
def _cvt_f16_f32(typingctx, u):
    """fp16 bit pattern -> float32 by LLVM's ``fpext`` (x86 F16C: VCVTPH2PS); exact."""
    if u != types.uint16:
        return None

    def codegen(context, builder, sig, args):
        return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())

    return types.float32(types.uint16), codegen


@njit(inline="always")
def hard_f16_bits_to_f32(u):
    """:func:`soft_f16_bits_to_f32` by the hardware conversion; a NaN keeps its payload (and so stays signalling
    if it was), as the integer path does, where VCVTPH2PS would quiet it."""
    h = np.uint16(u)
    a = _U32(_U32(h) & _U32(0x7FFF))
    nan = _U32(_U32(_U32(a << _U32(13)) | _F32_INF) | _U32(_U32(_U32(h) & _U32(0x8000)) << _U32(16)))
    v = _cvt_f16_f32(h)
    return _u32_as_f32(nan) if a > 0x7C00 else v


@njit(inline="always")
def hard_f32_to_f16_bits(x):
    """:func:`soft_f32_to_f16_bits` by the hardware conversion (bit-identical, NaNs included)."""
    return _cvt_f32_f16(np.float32(x))


@njit(inline="always")
def hard_round_to_f16(x):
    """:func:`soft_round_to_f16` by the hardware conversions (bit-identical, NaNs included): VCVTPS2PH then
    VCVTPH2PS (LLVM folds the bit casts between them)."""
    return _cvt_f16_f32(_cvt_f32_f16(np.float32(x)))


def _hardware_f16() -> bool:
    """Whether the fp16 conversions run on the host's F16C instructions: an x86-64 host that has them, unless
    ``CVTILE_SOFT_F16`` is set to anything but "" or "0" (then the integer path runs everywhere)."""
    if os.environ.get("CVTILE_SOFT_F16", "") not in ("", "0"):
        return False
    from llvmlite import binding

    return bool(binding.get_host_cpu_features().get("f16c", False))


#: True when ``f16_bits_to_f32`` / ``f32_to_f16_bits`` / ``round_to_f16`` are the F16C (``hard_*``) functions,
#: False when they are the integer (``soft_*``) ones; both give the same bits for every input
HARDWARE_F16 = _hardware_f16()
if HARDWARE_F16:
    f16_bits_to_f32, f32_to_f16_bits, round_to_f16 = hard_f16_bits_to_f32, hard_f32_to_f16_bits, hard_round_to_f16
else:
    f16_bits_to_f32, f32_to_f16_bits, round_to_f16 = soft_f16_bits_to_f32, soft_f32_to_f16_bits, soft_round_to_f16


@njit(inline="always")
def round_to_bf16(x):
    """float32 -> the float32 value of its bf16 rounding (decode(encode(x)))."""
    u = _bits(x)
    lsb = _U32(_U32(u >> _U32(16)) & _ONE)
    r = _U32(_U32(_U32(u + _U32(0x7FFF)) + lsb) & _U32(0xFFFF0000))
    qnan = _U32(_U32(u & _U32(0xFFFF0000)) | _F32_QUIET)
    r = qnan if _U32(u & _ABS) > 0x7F800000 else r
    return _u32_as_f32(r)



@njit(inline="always")
def round_to_f16_away(x):
    """float32 -> the float32 value of its fp16 rounding with ties away from zero (Ascend C CAST_ROUND):
    the RNE rounding, except that an exact tie RNE took toward zero goes to the neighbour away from zero."""
    r = round_to_f16(x)
    a = abs(np.float64(x))
    m = abs(np.float64(r))
    if m < a:   # RNE rounded toward zero: a tie if x is exactly half-way to the next fp16 up
        up = np.float64(f16_bits_to_f32(_U32(f32_to_f16_bits(np.float32(m))) + _ONE))
        if up - a == a - m:
            return np.float32(-up) if x < 0 else np.float32(up)
    return r


@njit(inline="always")
def round_to_bf16_away(x):
    """float32 -> the float32 value of its bf16 rounding with ties away from zero (Ascend C CAST_ROUND)."""
    u = _bits(x)
    r = _U32(_U32(u + _U32(0x8000)) & _U32(0xFFFF0000))
    return round_to_bf16(x) if _U32(u & _ABS) > 0x7F800000 else _u32_as_f32(r)

# ----------------------------------------------------------- array loops
# Each loop flattens its arrays (a 1-D array is used as it is, strided or
# not; a multi-dimensional one must be C-contiguous) and checks the sizes,
# since numba does no bounds checking.


@njit(cache=True, parallel=False, _nrt=True)
def decode_f16(u, out):
    """out[...] = f16_bits_to_f32(u[...]) elementwise; returns out."""
    src = u if u.ndim == 1 else u.reshape(-1)
    dst = out if out.ndim == 1 else out.reshape(-1)
    if src.size != dst.size:
        raise ValueError("decode_f16: u and out differ in size")
    for i in range(src.size):
        dst[i] = f16_bits_to_f32(src[i])
    return out


@njit(cache=True, parallel=False, _nrt=True)
def decode_bf16(u, out):
    """out[...] = bf16_bits_to_f32(u[...]) elementwise; returns out."""
    src = u if u.ndim == 1 else u.reshape(-1)
    dst = out if out.ndim == 1 else out.reshape(-1)
    if src.size != dst.size:
        raise ValueError("decode_bf16: u and out differ in size")
    for i in range(src.size):
        dst[i] = bf16_bits_to_f32(src[i])
    return out


@njit(cache=True, parallel=False, _nrt=True)
def encode_f16(x, out):
    """out[...] = f32_to_f16_bits(x[...]) elementwise; returns out."""
    src = x if x.ndim == 1 else x.reshape(-1)
    dst = out if out.ndim == 1 else out.reshape(-1)
    if src.size != dst.size:
        raise ValueError("encode_f16: x and out differ in size")
    for i in range(src.size):
        dst[i] = f32_to_f16_bits(src[i])
    return out


@njit(cache=True, parallel=False, _nrt=True)
def encode_bf16(x, out):
    """out[...] = f32_to_bf16_bits(x[...]) elementwise; returns out."""
    src = x if x.ndim == 1 else x.reshape(-1)
    dst = out if out.ndim == 1 else out.reshape(-1)
    if src.size != dst.size:
        raise ValueError("encode_bf16: x and out differ in size")
    for i in range(src.size):
        dst[i] = f32_to_bf16_bits(src[i])
    return out


@njit(cache=True, parallel=False, _nrt=True)
def round_f16(x, out):
    """out[...] = round_to_f16(x[...]) elementwise; returns out."""
    src = x if x.ndim == 1 else x.reshape(-1)
    dst = out if out.ndim == 1 else out.reshape(-1)
    if src.size != dst.size:
        raise ValueError("round_f16: x and out differ in size")
    for i in range(src.size):
        dst[i] = round_to_f16(src[i])
    return out


@njit(cache=True, parallel=False, _nrt=True)
def round_bf16(x, out):
    """out[...] = round_to_bf16(x[...]) elementwise; returns out."""
    src = x if x.ndim == 1 else x.reshape(-1)
    dst = out if out.ndim == 1 else out.reshape(-1)
    if src.size != dst.size:
        raise ValueError("round_bf16: x and out differ in size")
    for i in range(src.size):
        dst[i] = round_to_bf16(src[i])
    return out


@njit(cache=True, parallel=False, _nrt=True)
def round_f16_inplace(x):
    """x[...] = round_to_f16(x[...]); returns x."""
    v = x if x.ndim == 1 else x.reshape(-1)
    for i in range(v.size):
        v[i] = round_to_f16(v[i])
    return x


@njit(cache=True, parallel=False, _nrt=True)
def round_bf16_inplace(x):
    """x[...] = round_to_bf16(x[...]); returns x."""
    v = x if x.ndim == 1 else x.reshape(-1)
    for i in range(v.size):
        v[i] = round_to_bf16(v[i])
    return x


def loop_vectorised(dispatcher, signature=None) -> bool:
    """Whether LLVM vectorises a loop of a numba-jitted function.

    Recompiles ``dispatcher.py_func`` without the on-disk cache (numba cannot
    inspect cached code) for ``signature`` (default: the dispatcher's first
    compiled one) and looks for the ``llvm.loop.isvectorized`` marker in the
    optimised IR.  For tests, benchmarks and generated kernels.
    """
    sig = signature if signature is not None else dispatcher.signatures[0]
    options = {k: v for k, v in dispatcher.targetoptions.items() if k not in ("cache", "nopython")}
    fresh = njit(**options)(dispatcher.py_func)
    fresh.compile(sig)
    return "llvm.loop.isvectorized" in fresh.inspect_llvm(sig)


# ------------------------------------------------------- numpy references
def _as_f32(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32)


def _as_u16(u) -> np.ndarray:
    u = np.asarray(u)
    if u.dtype == np.uint16:
        return u
    if u.dtype == np.int16:
        return u.view(np.uint16)
    return (u.astype(np.int64) & 0xFFFF).astype(np.uint16)


def ref_f16_bits_to_f32(u) -> np.ndarray:
    """numpy reference of :func:`f16_bits_to_f32` (np.float16 cast)."""
    return _as_u16(u).view(np.float16).astype(np.float32)


def ref_bf16_bits_to_f32(u) -> np.ndarray:
    """numpy reference of :func:`bf16_bits_to_f32` (ml_dtypes cast)."""
    return _as_u16(u).view(ml_dtypes.bfloat16).astype(np.float32)


def ref_f32_to_f16_bits(x) -> np.ndarray:
    """numpy reference of :func:`f32_to_f16_bits`: ``astype(np.float16)``.

    Same values; NaN payloads may differ (numpy keeps a signalling NaN
    signalling), NaN-ness does not.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        return _as_f32(x).astype(np.float16).view(np.uint16)


def ref_f32_to_bf16_bits(x) -> np.ndarray:
    """numpy reference of :func:`f32_to_bf16_bits` (ml_dtypes RNE cast).

    Same values; ml_dtypes gives the canonical quiet NaN for every NaN.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        return _as_f32(x).astype(ml_dtypes.bfloat16).view(np.uint16)


def ref_round_to_f16(x) -> np.ndarray:
    """numpy reference of :func:`round_to_f16`."""
    return ref_f32_to_f16_bits(x).view(np.float16).astype(np.float32)


def ref_round_to_bf16(x) -> np.ndarray:
    """numpy reference of :func:`round_to_bf16`."""
    return ref_f32_to_bf16_bits(x).view(ml_dtypes.bfloat16).astype(np.float32)
