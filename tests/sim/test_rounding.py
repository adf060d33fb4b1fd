"""sim.rounding: exact fp16/bf16 decode, RNE encode and round, against numpy.

References: ``np.float16`` casts and ml_dtypes' ``bfloat16`` casts (both IEEE
round-to-nearest-even).  NaN payloads are implementation-defined, so a NaN is
compared as "NaN of the same sign, quiet" rather than bit for bit.

Coverage: every 16-bit pattern for decode; every float32 pattern within a few
ulps of every fp16/bf16 value and every rounding midpoint (ties, subnormals,
max/overflow, inf, NaN, -0) plus 2**21 random float32 patterns for encode and
round; a hand-written table of edge cases that does not rely on numpy; and,
in the slow tier, all 2**32 float32 patterns.
"""

from __future__ import annotations

import os

import ml_dtypes
import numba
import numpy as np
import pytest
from cvtile.sim import rounding as R
from llvmlite import binding as llvm
from numba import njit

FASTMATH = {"nsz", "arcp", "contract", "afn", "reassoc"}


# ---------------------------------------------------------------- helpers
def f32(bits) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint64).astype(np.uint32).view(np.float32)


def bits32(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).view(np.uint32)


def is_nan16(h, fmt) -> np.ndarray:
    h = np.asarray(h, dtype=np.uint16).astype(np.uint32)
    if fmt == "f16":
        return ((h & 0x7C00) == 0x7C00) & ((h & 0x3FF) != 0)
    return ((h & 0x7F80) == 0x7F80) & ((h & 0x7F) != 0)


def assert_encoded(x, got, want, fmt):
    """``got`` encodes ``x`` like ``want`` does; NaN -> quiet NaN, same sign."""
    x = np.asarray(x, dtype=np.float32)
    nan = np.isnan(x)
    bad = np.flatnonzero(~nan & (got != want))
    assert bad.size == 0, [(hex(int(bits32(x)[i])), hex(int(got[i])), hex(int(want[i]))) for i in bad[:8]]
    quiet = 0x200 if fmt == "f16" else 0x40
    g = got[nan].astype(np.uint32)
    assert is_nan16(g, fmt).all() and ((g & quiet) != 0).all()
    assert ((g >> 15) == (bits32(x[nan]) >> 31)).all()


def assert_same_f32(x, got, want):
    """float32 results equal bit for bit, except that NaN matches any quiet NaN."""
    gb, wb = bits32(got), bits32(want)
    nan = np.isnan(want)
    bad = np.flatnonzero(~nan & (gb != wb))
    assert bad.size == 0, [(hex(int(bits32(x)[i])), hex(int(gb[i])), hex(int(wb[i]))) for i in bad[:8]]
    assert np.isnan(got[nan]).all() and ((gb[nan] & 0x400000) != 0).all()


def encode(fn, x):
    return fn(np.asarray(x, np.float32), np.empty(np.shape(x), np.uint16))


def fdecode(fn, u):
    return fn(np.asarray(u, np.uint16), np.empty(np.shape(u), np.float32))


def fround(fn, x):
    return fn(np.asarray(x, np.float32), np.empty(np.shape(x), np.float32))


def near(patterns, radius) -> np.ndarray:
    """Every uint32 pattern within ``radius`` of one of ``patterns``, both signs."""
    p = np.asarray(patterns, dtype=np.int64).reshape(-1, 1) & 0x7FFFFFFF
    p = (p + np.arange(-radius, radius + 1)).ravel()
    p = p[(p >= 0) & (p <= 0x7FFFFFFF)]
    return np.concatenate([p, p | 0x80000000]).astype(np.uint32)  # repeats are harmless


def f16_boundaries() -> np.ndarray:
    """float32 patterns around every fp16 value and every midpoint."""
    values = np.arange(0x7C00, dtype=np.uint16).view(np.float16).astype(np.float64)
    nxt = np.append(values[1:], 65536.0)  # above 65504 the "next" is 2**16
    mids = ((values + nxt) / 2).astype(np.float32)  # exact: 12 bits
    return near(np.concatenate([bits32(values), bits32(mids), [0x7F800000, 0x7FC00000]]), 3)


def bf16_boundaries() -> np.ndarray:
    """float32 patterns around every bf16 pattern and every midpoint."""
    hi = np.arange(0x8000, dtype=np.int64) << 16
    return near(np.concatenate([hi, hi | 0x8000, hi | 0xFFFF]), 3)


@pytest.fixture(scope="module")
def f16_set():
    return f32(f16_boundaries())


@pytest.fixture(scope="module")
def bf16_set():
    return f32(bf16_boundaries())


@pytest.fixture(scope="module")
def random_set():
    rng = np.random.default_rng(20261129)
    return rng.integers(0, 2**32, 1 << 21, dtype=np.uint64).astype(np.uint32).view(np.float32)


# ----------------------------------------------------------------- decode
def test_decode_f16_every_pattern():
    u = np.arange(1 << 16).astype(np.uint16)
    got = fdecode(R.decode_f16, u)
    # numpy's widening keeps NaN payloads too, so the match is bit for bit
    np.testing.assert_array_equal(bits32(got), bits32(R.ref_f16_bits_to_f32(u)))
    np.testing.assert_array_equal(bits32(got), bits32(u.view(np.float16).astype(np.float32)))


def test_decode_bf16_every_pattern():
    u = np.arange(1 << 16).astype(np.uint16)
    got = fdecode(R.decode_bf16, u)
    want = u.view(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_array_equal(bits32(got), bits32(want))
    np.testing.assert_array_equal(bits32(got), u.astype(np.uint32) << 16)


@pytest.mark.parametrize("fn", [R.decode_f16, R.decode_bf16])
def test_decode_int16_patterns_equal_uint16(fn):
    u = np.arange(1 << 16).astype(np.uint16)
    a = fn(u, np.empty(u.size, np.float32))
    b = fn(u.view(np.int16), np.empty(u.size, np.float32))
    np.testing.assert_array_equal(bits32(a), bits32(b))


DECODE_TABLE = [  # (fp16 bits, float32 bits)
    (0x0000, 0x00000000),
    (0x8000, 0x80000000),
    (0x0001, 0x33800000),  # 2**-24
    (0x8001, 0xB3800000),
    (0x03FF, 0x387FC000),  # largest subnormal 1023 * 2**-24
    (0x0400, 0x38800000),  # 2**-14
    (0x3C00, 0x3F800000),
    (0x7BFF, 0x477FE000),  # 65504
    (0x7C00, 0x7F800000),
    (0xFC00, 0xFF800000),
    (0x7E00, 0x7FC00000),
    (0x7C01, 0x7F802000),  # signalling NaN: payload carried over
    (0xFFFF, 0xFFFFE000),
]


def test_decode_f16_table():
    # through an array: a Python float would quieten the signalling NaN
    h = np.array([row[0] for row in DECODE_TABLE], np.uint16)
    want = np.array([row[1] for row in DECODE_TABLE], np.uint32)
    np.testing.assert_array_equal(bits32(fdecode(R.decode_f16, h)), want)
    np.testing.assert_array_equal(bits32(R.ref_f16_bits_to_f32(h)), want)


# ------------------------------------------------------- encode and round
# (float32 bits, fp16 bits, bf16 bits), written out by hand
ENCODE_TABLE = [
    (0x00000000, 0x0000, 0x0000),
    (0x80000000, 0x8000, 0x8000),  # -0 stays -0
    (0x3F800000, 0x3C00, 0x3F80),  # 1
    (0x3F801000, 0x3C00, 0x3F80),  # 1 + 2**-11: fp16 tie -> even 1
    (0x3F803000, 0x3C02, 0x3F80),  # 1 + 3 * 2**-11: fp16 tie -> even 1 + 2**-9
    (0x3F808000, 0x3C04, 0x3F80),  # 1 + 2**-8: bf16 tie -> even 1
    (0x3F818000, 0x3C0C, 0x3F82),  # 1 + 3 * 2**-8: bf16 tie -> even 1 + 2**-6
    (0x477FE000, 0x7BFF, 0x4780),  # 65504, fp16 max
    (0x477FEFFF, 0x7BFF, 0x4780),  # just below 65520
    (0x477FF000, 0x7C00, 0x4780),  # 65520: tie between 65504 and 2**16 -> inf
    (0xC77FF000, 0xFC00, 0xC780),
    (0x47800000, 0x7C00, 0x4780),  # 65536
    (0x7F7FFFFF, 0x7C00, 0x7F80),  # float32 max: bf16 rounds up to inf
    (0x7F7F0000, 0x7C00, 0x7F7F),  # bf16 max
    (0x7F7F7FFF, 0x7C00, 0x7F7F),
    (0x7F7F8000, 0x7C00, 0x7F80),  # bf16 tie at max, odd -> inf
    (0x7F800000, 0x7C00, 0x7F80),  # inf
    (0xFF800000, 0xFC00, 0xFF80),
    (0x38800000, 0x0400, 0x3880),  # 2**-14, smallest fp16 normal
    (0x387FE000, 0x0400, 0x3880),  # 1023.5 * 2**-24: tie, rounds up into the normal
    (0x387FDFFF, 0x03FF, 0x3880),
    (0x33800000, 0x0001, 0x3380),  # 2**-24, smallest fp16 subnormal
    (0x33000000, 0x0000, 0x3300),  # 2**-25: tie between 0 and 2**-24 -> 0
    (0x33000001, 0x0001, 0x3300),
    (0xB3000000, 0x8000, 0xB300),  # -2**-25 -> -0
    (0x33C00000, 0x0002, 0x33C0),  # 1.5 * 2**-24: tie -> even 2
    (0x34200000, 0x0002, 0x3420),  # 2.5 * 2**-24: tie -> even 2
    (0x00000001, 0x0000, 0x0000),  # float32 subnormals
    (0x80000001, 0x8000, 0x8000),
    (0x00008000, 0x0000, 0x0000),  # bf16 subnormal tie -> even 0
    (0x00008001, 0x0000, 0x0001),
    (0x00018000, 0x0000, 0x0002),  # bf16 subnormal tie -> even 2
    (0x007FFFFF, 0x0000, 0x0080),  # rounds up into the smallest bf16 normal
    (0x7FC00000, 0x7E00, 0x7FC0),  # quiet NaN
    (0x7F800001, 0x7E00, 0x7FC0),  # payload only in the low bits: still NaN
    (0xFF800001, 0xFE00, 0xFFC0),
    (0x7F802000, 0x7E01, 0x7FC0),
    (0x7FFFFFFF, 0x7FFF, 0x7FFF),  # rounding up would carry out of the NaN
    (0xFFFFFFFF, 0xFFFF, 0xFFFF),
]


def test_encode_table():
    x = f32([row[0] for row in ENCODE_TABLE])
    h = np.array([row[1] for row in ENCODE_TABLE], np.uint16)
    b = np.array([row[2] for row in ENCODE_TABLE], np.uint16)
    got = {
        "f16": encode(R.encode_f16, x),
        "bf16": encode(R.encode_bf16, x),
        "round f16": bits32(fround(R.round_f16, x)),
        "round bf16": bits32(fround(R.round_bf16, x)),
    }
    want = {
        "f16": h,
        "bf16": b,
        "round f16": bits32(fdecode(R.decode_f16, h)),
        "round bf16": b.astype(np.uint32) << 16,
    }
    for key, value in got.items():
        bad = np.flatnonzero(value != want[key])
        assert bad.size == 0, (key, [(hex(ENCODE_TABLE[i][0]), hex(int(value[i]))) for i in bad])


def test_table_agrees_with_references():
    x = f32([row[0] for row in ENCODE_TABLE])
    h = np.array([row[1] for row in ENCODE_TABLE], np.uint16)
    b = np.array([row[2] for row in ENCODE_TABLE], np.uint16)
    assert_encoded(x, h, R.ref_f32_to_f16_bits(x), "f16")
    assert_encoded(x, b, R.ref_f32_to_bf16_bits(x), "bf16")


def test_bf16_nan_never_becomes_inf():
    low = f32(np.arange(0x7F800001, 0x7F810000))  # NaNs with bf16-invisible payloads
    for x in (low, -low):
        assert is_nan16(encode(R.encode_bf16, x), "bf16").all()
        assert np.isnan(fround(R.round_bf16, x)).all()


@pytest.mark.parametrize("name", ["f16_set", "random_set"])
def test_encode_f16(name, request):
    x = request.getfixturevalue(name)
    assert_encoded(x, encode(R.encode_f16, x), R.ref_f32_to_f16_bits(x), "f16")


@pytest.mark.parametrize("name", ["f16_set", "bf16_set", "random_set"])
def test_encode_bf16(name, request):
    x = request.getfixturevalue(name)
    assert_encoded(x, encode(R.encode_bf16, x), R.ref_f32_to_bf16_bits(x), "bf16")


@pytest.mark.parametrize("name", ["f16_set", "random_set"])
def test_round_f16(name, request):
    x = request.getfixturevalue(name)
    assert_same_f32(x, fround(R.round_f16, x), R.ref_round_to_f16(x))


@pytest.mark.parametrize("name", ["bf16_set", "random_set"])
def test_round_bf16(name, request):
    x = request.getfixturevalue(name)
    assert_same_f32(x, fround(R.round_bf16, x), R.ref_round_to_bf16(x))


@pytest.mark.parametrize("fmt", ["f16", "bf16"])
def test_round_is_decode_of_encode_bit_for_bit(fmt, f16_set, bf16_set, random_set):
    enc, dec, rnd = {
        "f16": (R.encode_f16, R.decode_f16, R.round_f16),
        "bf16": (R.encode_bf16, R.decode_bf16, R.round_bf16),
    }[fmt]
    x = np.concatenate([f16_set, bf16_set, random_set])
    np.testing.assert_array_equal(
        bits32(fround(rnd, x)), bits32(fdecode(dec, encode(enc, x)))
    )


# -------------------------------------------------- as kernels will use it
# not cache=True: numba would not notice a change to rounding.py (inlined code)
@njit(fastmath=FASTMATH)
def _kernel_fastmath(a, b, h16, hbf, r16, rbf, d16, dbf):
    for i in range(a.size):
        p = a[i] * b[i]  # a caller's product must not fuse into the rounding
        h16[i] = R.f32_to_f16_bits(p)
        hbf[i] = R.f32_to_bf16_bits(p)
        r16[i] = R.round_to_f16(p)
        rbf[i] = R.round_to_bf16(p)
        d16[i] = R.f16_bits_to_f32(h16[i])
        dbf[i] = R.bf16_bits_to_f32(hbf[i])


def test_scalar_functions_under_fastmath(f16_set, bf16_set, random_set):
    rng = np.random.default_rng(7)
    a = np.concatenate([f16_set, bf16_set, random_set[: 1 << 18]])
    b = np.where(rng.random(a.size) < 0.5, 1, rng.random(a.size)).astype(np.float32)
    with np.errstate(all="ignore"):
        p = a * b
    n = a.size
    h16, hbf = np.empty(n, np.uint16), np.empty(n, np.uint16)
    r16, rbf, d16, dbf = (np.empty(n, np.float32) for _ in range(4))
    _kernel_fastmath(a, b, h16, hbf, r16, rbf, d16, dbf)
    assert_encoded(p, h16, R.ref_f32_to_f16_bits(p), "f16")
    assert_encoded(p, hbf, R.ref_f32_to_bf16_bits(p), "bf16")
    assert_same_f32(p, r16, R.ref_round_to_f16(p))
    assert_same_f32(p, rbf, R.ref_round_to_bf16(p))
    np.testing.assert_array_equal(bits32(r16), bits32(d16))
    np.testing.assert_array_equal(bits32(rbf), bits32(dbf))


def test_scalar_functions_accept_other_types():
    assert R.f16_bits_to_f32(np.int16(-1024)) == -np.inf  # 0xfc00 as int16
    assert R.round_to_f16(np.float64(1.0 + 2.0**-11)) == 1.0  # float64 -> float32 first


# ------------------------------------------------------------ array loops
def test_array_helpers_shapes_and_layouts():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 40)).astype(np.float32) * 1000
    # 2-D C-contiguous arrays
    h = np.zeros((6, 40), np.uint16)
    assert R.encode_f16(x, h) is h
    np.testing.assert_array_equal(h, R.ref_f32_to_f16_bits(x))
    y = x.copy()
    assert R.round_bf16_inplace(y) is y
    np.testing.assert_array_equal(y, R.ref_round_to_bf16(x))
    # 1-D strided views, read and written through
    flat = x.ravel().copy()
    R.round_f16_inplace(flat[::3])
    np.testing.assert_array_equal(flat[::3], R.ref_round_to_f16(x.ravel()[::3]))
    np.testing.assert_array_equal(flat[1::3], x.ravel()[1::3])
    # an empty array is fine
    R.round_f16_inplace(np.empty(0, np.float32))


def test_array_helpers_check_sizes():
    with pytest.raises(ValueError, match="size"):
        R.decode_f16(np.zeros(4, np.uint16), np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="size"):
        R.encode_bf16(np.zeros(4, np.float32), np.zeros(5, np.uint16))


def _has_avx2() -> bool:
    return "+avx2" in llvm.get_host_cpu_features().flatten()


@pytest.mark.parametrize(
    "fn, args",
    [
        (R.decode_f16, (np.zeros(8, np.uint16), np.zeros(8, np.float32))),
        (R.encode_f16, (np.zeros(8, np.float32), np.zeros(8, np.uint16))),
        (R.round_f16_inplace, (np.zeros(8, np.float32),)),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_loops_vectorise(fn, args):
    if fn in (R.encode_f16, R.round_f16_inplace) and not _has_avx2():
        pytest.skip("per-lane variable shifts need AVX2 to be worth vectorising")
    assert R.loop_vectorised(fn, tuple(numba.typeof(a) for a in args))


# ---------------------------------------------------------------- slow tier
def _slow_requested(config) -> bool:
    return "slow" in (config.getoption("markexpr") or "") or bool(os.environ.get("CVTILE_SLOW"))


@njit(nogil=True)
def _sweep(start, n, e16, ebf):
    """Encode n patterns from start; count round(x) != decode(encode(x)) (both formats)."""
    bad = 0
    for i in range(n):
        x = R._u32_as_f32(np.uint32(start + i))
        h = R.f32_to_f16_bits(x)
        b = R.f32_to_bf16_bits(x)
        e16[i] = h
        ebf[i] = b
        bad += R._f32_as_u32(R.round_to_f16(x)) != R._f32_as_u32(R.f16_bits_to_f32(h))
        bad += R._f32_as_u32(R.round_to_bf16(x)) != R._f32_as_u32(R.bf16_bits_to_f32(b))
    return bad


@pytest.mark.wide
def test_every_float32_pattern(request):
    """All 2**32 inputs: encode vs numpy/ml_dtypes, round == decode(encode).

    Decode is exhaustively checked above, so this closes the chain for round
    too.  fp16 outside [2**-26, 2**17) (results +-0, +-inf or NaN by the
    exponent alone, where numpy's cast is slow) is checked in closed form.
    """
    if not _slow_requested(request.config):
        pytest.skip("slow tier: run with -m slow (or CVTILE_SLOW=1)")
    chunk = 1 << 24
    e16 = np.empty(chunk, np.uint16)
    ebf = np.empty(chunk, np.uint16)
    offsets = np.arange(chunk, dtype=np.uint32)
    for start in range(0, 1 << 32, chunk):
        assert _sweep(start, chunk, e16, ebf) == 0, hex(start)
        x = (offsets + np.uint32(start)).view(np.float32)
        a = start & 0x7FFFFFFF  # |x| of the chunk's first pattern
        sign = np.uint16((start >> 16) & 0x8000)
        if a >= 0x7F000000:  # exponents 254, 255: NaNs in the chunk
            assert_encoded(x, ebf, R.ref_f32_to_bf16_bits(x), "bf16")
        else:
            assert np.array_equal(ebf, R.ref_f32_to_bf16_bits(x)), hex(start)
        if a + chunk <= 0x32800000:  # |x| < 2**-26
            assert (e16 == sign).all(), hex(start)
        elif a >= 0x48000000:  # |x| >= 2**17: inf, or NaN (quiet, same sign)
            nan = (offsets + np.uint32(a)) > 0x7F800000
            assert (e16[~nan] == (sign | 0x7C00)).all(), hex(start)
            assert is_nan16(e16[nan], "f16").all() and ((e16[nan] & 0x8200) == (sign | 0x200)).all()
        else:
            assert np.array_equal(e16, R.ref_f32_to_f16_bits(x)), hex(start)


# ------------------------------------------- the F16C and the integer paths
@njit(nogil=True)
def _hard_soft_mismatches(x, u):
    """Counts of bit differences between the hardware and the integer conversions: encode and round of every
    float32 in x, decode of every pattern in u (NaNs compared bit for bit too)."""
    bad = 0
    for i in range(x.size):
        bad += R.hard_f32_to_f16_bits(x[i]) != R.soft_f32_to_f16_bits(x[i])
        bad += R._f32_as_u32(R.hard_round_to_f16(x[i])) != R._f32_as_u32(R.soft_round_to_f16(x[i]))
    for i in range(u.size):
        bad += R._f32_as_u32(R.hard_f16_bits_to_f32(u[i])) != R._f32_as_u32(R.soft_f16_bits_to_f32(u[i]))
    return bad


@pytest.mark.skipif(not llvm.get_host_cpu_features().get("f16c", False), reason="the host has no F16C")
def test_hardware_and_integer_fp16_conversions_agree_bit_for_bit(f16_set, random_set):
    """The F16C path (VCVTPS2PH / VCVTPH2PS) gives the integer path's bits for every fp16 pattern and for every
    float32 near an fp16 value or midpoint and 2**21 random ones: ties to even, subnormals, overflow, -0, and
    NaNs (quieted on encode with the top payload bits; a signalling NaN decodes signalling)."""
    every16 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    assert _hard_soft_mismatches(f16_set, every16) == 0
    assert _hard_soft_mismatches(random_set, every16[:0]) == 0


def test_the_integer_fp16_path_is_chosen_by_environment():
    """``CVTILE_SOFT_F16=1`` runs the integer conversions (and kernels' runtime stamp says which path they
    inline, so their caches stay apart)."""
    import subprocess
    import sys

    code = ("from cvtile.sim import rounding as R, codegen as C; "
            "print(R.HARDWARE_F16, R.round_to_f16 is R.soft_round_to_f16, C.runtime_stamp())")
    outs = {}
    for flag in ("1", "0"):
        env = dict(os.environ, CVTILE_SOFT_F16=flag)
        outs[flag] = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                    check=True).stdout.split()
    assert outs["1"][:2] == ["False", "True"]
    has_f16c = bool(llvm.get_host_cpu_features().get("f16c", False))
    assert outs["0"][0] == str(has_f16c)
    assert (outs["0"][2] != outs["1"][2]) == has_f16c
