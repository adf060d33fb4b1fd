"""Tiling keys: encode/decode round trips on both arches, and the known upstream keys decode to sensible fields."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cvtile.tiling.tiling_key import (ARCH22_DIGITS, ARCH35_FIELDS, IFA_DIGITS, PFA_TND_DIGITS, decode_arch22,
                                      decode_arch35, decode_ifa, decode_key, decode_pfa_tnd, encode_arch22,
                                      encode_arch35, encode_ifa, encode_pfa_tnd)

digit = st.integers(0, 9)


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 3), st.integers(0, 9), st.lists(digit, min_size=len(ARCH22_DIGITS), max_size=len(ARCH22_DIGITS)))
def test_arch22_round_trip(mode, template, digits):
    fields = {"mode": mode, "template": template, **dict(zip(ARCH22_DIGITS, digits))}
    key = encode_arch22(fields)
    dec = decode_arch22(key)
    assert {k: dec[k] for k in fields} == fields
    assert encode_arch22(dec) == key


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 3), st.integers(0, 9), st.lists(digit, min_size=len(IFA_DIGITS), max_size=len(IFA_DIGITS)))
def test_ifa_round_trip(mode, perf, digits):
    fields = {"mode": mode, "perf": perf, **dict(zip(IFA_DIGITS, digits))}
    key = encode_ifa(fields)
    dec = decode_ifa(key)
    assert {k: dec[k] for k in fields} == fields
    assert encode_ifa(dec) == key


@settings(max_examples=40, deadline=None)
@given(st.lists(digit, min_size=len(PFA_TND_DIGITS), max_size=len(PFA_TND_DIGITS)))
def test_pfa_tnd_round_trip(digits):
    fields = {name: d for (name, _), d in zip(PFA_TND_DIGITS, digits)}
    key = encode_pfa_tnd(fields)
    dec = decode_pfa_tnd(key)
    assert {k: dec[k] for k in fields} == fields and dec["base"] == 4
    assert encode_pfa_tnd(dec) == key and decode_key(key, "arch22") == dec


@st.composite
def arch35_fields(draw):
    return {name: draw(st.integers(0, (1 << width) - 1)) for name, width in ARCH35_FIELDS}


@settings(max_examples=80, deadline=None)
@given(arch35_fields())
def test_arch35_round_trip(fields):
    key = encode_arch35(fields)
    dec = decode_arch35(key)
    assert {k: int(v) for k, v in dec.items()} == fields
    assert encode_arch35(dec) == key


@pytest.mark.parametrize("key", [103000000010400001, 104000000010522221, 105000000010200002, 100000000000000020])
def test_arch22_upstream_keys(key):
    dec = decode_key(key, "arch22")
    assert encode_arch22(dec) == key
    assert dec["mode"] == 1


def test_arch22_fields_of_a_decode_key():
    dec = decode_arch22(104000000010522221)
    assert dec["template"] == 4 and dec["q_layout"] == 1 and dec["q_dtype"] == 2
    assert dec["softmax_brcb"] and dec["fd"] and not dec["paged"] and dec["kv_layout"] == 1


def test_arch35_fields_of_upstream_keys():
    dec = decode_arch35(36639604993)          # GQA new template, small-head config, flash decode
    assert dec["config"] == 1 and dec["fd"] and dec["refactored"] and dec["quant_mode"] == 31
    dec = decode_arch35(35515538434)          # MXFP8 prefill, paged BNBD
    assert dec["config"] == 28 and dec["quant_mode"] == 19 and dec["kv_layout"] == 2 and dec["inout_layout"] == 2


def test_encoders_reject_out_of_range_fields():
    with pytest.raises(ValueError):
        encode_arch22({"q_layout": 10})
    with pytest.raises(ValueError):
        encode_arch35({"config": 1024})
