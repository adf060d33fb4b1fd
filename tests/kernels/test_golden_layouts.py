"""Layout conversions, exact float64 widening and chip-style rounding used by the goldens."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from cvtile.kernels.golden.batches import cumulative, per_batch, plan_batch_layout
from cvtile.kernels.golden.dtypes import canonical_dtype, round_to, to_f64
from cvtile.kernels.golden.layouts import (INPUT_LAYOUTS, bnsd_shape, from_bnsd, from_tnd, parse_layout, to_bnsd,
                                           to_tnd)


@pytest.mark.parametrize("layout", ["BSH", "BSND", "BNSD", "NBSD"])
def test_batch_layout_round_trip(layout):
    x = np.arange(2 * 3 * 5 * 4).reshape(2, 3, 5, 4)  # [B, N, S, D]
    y = from_bnsd(x, layout)
    assert y.shape == {"BSH": (2, 5, 12), "BSND": (2, 5, 3, 4), "BNSD": (2, 3, 5, 4), "NBSD": (3, 2, 5, 4)}[layout]
    np.testing.assert_array_equal(to_bnsd(y, layout, 3), x)
    assert bnsd_shape(y.shape, layout, 3) == x.shape
    if layout == "BSH":
        np.testing.assert_array_equal(y[1, 4, 4:8], x[1, 1, 4])  # head 1 is the second D-slice of H


def test_token_layout_round_trip():
    x = np.arange(7 * 3 * 2).reshape(7, 3, 2)
    np.testing.assert_array_equal(to_tnd(from_tnd(x, "NTD"), "NTD"), x)
    assert from_tnd(x, "NTD").shape == (3, 7, 2)


def test_parse_layout():
    assert set(INPUT_LAYOUTS) >= {"BSH", "BSND", "BNSD", "TND", "NTD", "BNSD_BSND", "BSH_BNSD", "BSND_BNSD",
                                  "NTD_TND", "TND_NTD", "BSH_NBSD", "BSND_NBSD", "BNSD_NBSD"}
    lay = parse_layout("bnsd_bsnd")
    assert (lay.qkv, lay.out, lay.token) == ("BNSD", "BSND", False)
    assert parse_layout("NTD_TND").token
    with pytest.raises(ValueError, match="supported"):
        parse_layout("SH")
    with pytest.raises(ValueError, match="multiple"):
        to_bnsd(np.zeros((1, 2, 10)), "BSH", 3)


def test_to_f64_is_exact_for_every_bf16_and_fp16_value():
    bits = np.arange(1 << 16, dtype=np.uint16)
    bf = bits.view(ml_dtypes.bfloat16)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(to_f64(bf), bf.astype(np.float32).astype(np.float64))
    h = bits.view(np.float16)
    np.testing.assert_array_equal(to_f64(h), h.astype(np.float64))


def test_round_to_models_fp32_then_16_bit_store():
    x = np.array([1 + 2 ** -11, 1 + 3 * 2 ** -11, 1 + 2 ** -9 + 2 ** -30, 70000.0, -1e-9])
    np.testing.assert_array_equal(round_to(x, np.float16), [1.0, 1 + 2 ** -9, 1 + 2 ** -9, np.inf, -0.0])
    np.testing.assert_array_equal(round_to(np.array([1 + 2 ** -8]), "bf16"), [1.0])
    np.testing.assert_array_equal(round_to(np.array([1 + 3 * 2 ** -8]), "bfloat16"), [1 + 2 ** -6])
    assert canonical_dtype(ml_dtypes.bfloat16) == "bfloat16" and canonical_dtype("fp16") == "float16"


def test_length_lists():
    assert per_batch([5], 3, "x") == [5, 5, 5]
    assert per_batch([1, 2, 3, 4], 3, "x") == [1, 2, 3]
    assert per_batch(None, 3, "x") is None
    with pytest.raises(ValueError, match="at least batch size"):
        per_batch([1, 2], 3, "x")
    assert cumulative([2, 2, 5], "c") == [2, 0, 3]
    with pytest.raises(ValueError, match="non-decreasing"):
        cumulative([3, 2], "c")
    with pytest.raises(ValueError, match="exceeds"):
        cumulative([3, 9], "c", total=8)


def test_left_padding_plans():
    plans = plan_batch_layout(batch=2, s1_full=6, kv_capacity=[9, 9], actual_seq_lengths=[3, 6],
                              actual_seq_lengths_kv=[5, 9], query_padding_size=[1], kv_padding_size=[2])
    assert (plans[0].q0, plans[0].s1, plans[0].k0, plans[0].s_kv) == (2, 3, 2, 5)
    assert plans[1].s1 == 0  # 6 - 1 - 6 < 0: the batch is not computed
    assert plans[1].s_kv == 0
