"""HiFloat8 decoding (``golden.hifloat8``): every code against a computation from its bit string, the special
values, and exactness in the dtypes the Ascend950 dequant kernel widens a HiF8 cache to."""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from cvtile.kernels.golden.hifloat8 import HIF8_MAX, HIF8_TABLE, TORCH_NPU_HIFLOAT8, hif8_values, hifloat8_marker

#: dot prefix -> exponent width (the paper's Table 2), matched against the bit string after the sign
_WIDTHS = {"11": 4, "10": 3, "01": 2, "001": 1, "0001": 0}


def _reference(code: int):
    """The value of ``code`` read off its 8-character bit string, exactly (a Fraction), or "nan" / "+inf" /
    "-inf": an independent reading of the format (strings and rationals, not the module's bit arithmetic)."""
    bits = format(code, "08b")
    sign, rest = (-1 if bits[0] == "1" else 1), bits[1:]
    if rest.startswith("0000"):
        m = int(rest[4:], 2)
        if m == 0:
            return "nan" if sign < 0 else Fraction(0)
        return sign * Fraction(2) ** (m - 23)
    dot = next(p for p in _WIDTHS if rest.startswith(p))
    w = _WIDTHS[dot]
    e_bits, m_bits = rest[len(dot):len(dot) + w], rest[len(dot) + w:]
    if w == 0:
        e = 0
    else:
        magnitude = 2 ** (w - 1) + (int(e_bits[1:], 2) if w > 1 else 0)
        e = -magnitude if e_bits[0] == "1" else magnitude
    if dot == "11" and e == 15 and m_bits == "1":
        return "+inf" if sign > 0 else "-inf"
    return sign * Fraction(2) ** e * (1 + Fraction(int(m_bits, 2), 2 ** len(m_bits)))


def _matches(want, got: float) -> bool:
    if want == "nan":
        return math.isnan(got)
    if want in ("+inf", "-inf"):
        return got == (math.inf if want == "+inf" else -math.inf)
    return Fraction(got) == want


def test_every_code_matches_its_fields():
    wrong = [(hex(c), _reference(c), float(HIF8_TABLE[c])) for c in range(256)
             if not _matches(_reference(c), float(HIF8_TABLE[c]))]
    assert not wrong, wrong


def test_special_values():
    t = HIF8_TABLE
    assert t[0x00] == 0 and not np.signbit(t[0x00])
    assert np.isnan(t[0x80]) and np.isnan(t).sum() == 1              # one NaN, no -0
    assert t[0x6F] == np.inf and t[0xEF] == -np.inf and np.isinf(t).sum() == 2
    assert t[0x6E] == HIF8_MAX == 2.0 ** 15 == np.nanmax(t[np.isfinite(t)])
    assert t[0xEE] == -HIF8_MAX
    assert t[0x7E] == 2.0 ** -15 and t[0x7F] == 1.5 * 2.0 ** -15      # smallest normal (dot 11, E = -15)
    assert t[0x01] == 2.0 ** -22 and t[0x07] == 2.0 ** -16            # denormals 2^(M-23)
    assert t[0x81] == -(2.0 ** -22)
    assert t[0x08] == 1.0 and t[0x0F] == 1.875 and t[0x18] == 0.5 and t[0x10] == 2.0
    positive = t[np.isfinite(t) & (t > 0)]
    assert np.min(positive) == 2.0 ** -22 and len(positive) == 126 == len(np.unique(positive))
    assert np.isfinite(t).sum() == 253


def test_table_is_read_only_float32():
    assert HIF8_TABLE.dtype == np.float32 and HIF8_TABLE.shape == (256,)
    with pytest.raises(ValueError):
        HIF8_TABLE[0] = 1


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_every_value_is_exact_in_the_widened_dtypes(dtype):
    """fp16 and bf16 hold every HiF8 value (the kernel's widening rounds nothing); inf and NaN stay so."""
    back = HIF8_TABLE.astype(dtype).astype(np.float32)
    assert np.array_equal(back, HIF8_TABLE, equal_nan=True)


def test_values_of_a_uint8_array():
    codes = np.array([[0x08, 0x88], [0x6E, 0x01]], np.uint8)
    assert np.array_equal(hif8_values(codes), [[1, -1], [32768, 2.0 ** -22]])
    with pytest.raises(TypeError):
        hif8_values(codes.astype(np.int8))


@pytest.mark.parametrize("marker, named", [("hifloat8", True), ("HIF8", True), ("torch_npu.hifloat8", True),
                                           (TORCH_NPU_HIFLOAT8, True), (290, True), (np.int64(290), True),
                                           ("float8_e4m3fn", False), (1, False), (True, False), (None, False)])
def test_dtype_marker(marker, named):
    assert hifloat8_marker(marker) is named
