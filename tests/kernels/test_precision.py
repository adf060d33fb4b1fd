"""compare(): tolerance classes, the upstream ratio rule, worst-element reporting, non-finite handling."""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest

from cvtile.kernels.precision import MAX_FAIL_RATIO, compare, tolerance


def test_tolerance_classes():
    assert tolerance(np.float16) == (0.005, 2.5e-5)
    assert tolerance("fp16") == tolerance("float16")
    assert tolerance(ml_dtypes.bfloat16) == (2.0 ** -7, 1e-4)
    assert tolerance("bf16") == (0.0078125, 1e-4)
    r32, a32 = tolerance(np.float32)
    assert r32 < 0.005 and a32 < 2.5e-5
    assert tolerance("float64")[0] < r32
    assert tolerance(np.int8) == (0.0, 1.0)    # one int8 step (a quantised output against another simulation)
    with pytest.raises(ValueError, match="tolerance class"):
        tolerance(np.int32)


def test_identical_and_half_ulp_pass():
    g = np.linspace(-3, 3, 1000)
    assert compare(g, g, "fp16").passed
    rep = compare(g.astype(np.float16), g, np.float16)
    assert rep.passed and rep.violations == 0
    assert 0 < rep.max_rel_err <= 2.0 ** -11
    assert compare(g.astype(ml_dtypes.bfloat16), g, "bf16").passed


def test_elementwise_rule_is_atol_plus_rtol_times_golden():
    g = np.array([1.0, 0.0, 100.0])
    rtol, atol = tolerance("fp16")
    edge = g + 0.999 * (atol + rtol * np.abs(g))  # just inside the bound: close
    assert compare(edge, g, "fp16", max_fail_ratio=0).violations == 0
    over = g + 1.01 * (atol + rtol * np.abs(g))
    assert compare(over, g, "fp16", max_fail_ratio=0).violations == 3


def test_ratio_rule_and_worst_element():
    g = np.ones((4, 50, 10))  # 2000 elements: 0.5 % = 10 may fail
    a = g.copy()
    a[1, 2, 3] = 1.2
    a[3, 0, 0] = 1.1
    rep = compare(a, g, "fp16")
    assert rep.passed and rep.violations == 2  # within the upstream 0.5 % share
    assert rep.worst_index == (1, 2, 3) and rep.worst_actual == pytest.approx(1.2) and rep.worst_golden == 1.0
    assert rep.max_abs_err == pytest.approx(0.2)
    assert not compare(a, g, "fp16", max_fail_ratio=0).passed
    a.reshape(-1)[:11] = 1.05
    assert not compare(a, g, "fp16").passed  # 12 > 10
    assert MAX_FAIL_RATIO == 0.005


def test_outlier_rule_only_fires_on_nonfinite_values():
    # upstream: a failing element with |a-g| / max(|a|, |g|, 2**-14/0.005) >= 10 fails the output; since
    # |a-g| <= 2 max(|a|, |g|) that bound is only reachable through NaN/inf.
    g = np.zeros(10000)
    a = g.copy()
    a[5] = -0.5
    rep = compare(a, g, "fp16")
    assert rep.passed and rep.violations == 1 and rep.max_outlier == pytest.approx(1.0)
    a[6] = np.inf
    rep = compare(a, g, "fp16")
    assert not rep.passed and rep.max_outlier == np.inf and rep.nonfinite_mismatches == 1


def test_nan_where_golden_is_finite_fails():
    g = np.ones(1000)
    a = g.copy()
    a[10] = np.nan
    rep = compare(a, g, "bf16")
    assert not rep.passed and rep.nonfinite_mismatches == 1 and rep.worst_index == (10,)
    assert np.isnan(rep.worst_actual)


def test_matching_nonfinite_values_are_close():
    g = np.array([np.inf, -np.inf, np.nan, 1.0])
    assert compare(g.copy(), g, "fp32", max_fail_ratio=0).passed
    a = g.copy()
    a[0] = -np.inf
    rep = compare(a, g, "fp32")
    assert not rep.passed and rep.nonfinite_mismatches == 1
    a = g.copy()
    a[0] = 3e38  # finite where the golden lse is +inf
    assert not compare(a, g, "fp32").passed


def test_shape_mismatch_and_empty():
    rep = compare(np.zeros((2, 3)), np.zeros((3, 2)), "fp16")
    assert not rep.passed and "shape mismatch" in str(rep)
    assert compare(np.zeros((0, 4)), np.zeros((0, 4)), "fp16").passed


def test_report_str_and_dict():
    g = np.ones((2, 3))
    a = g.copy()
    a[1, 2] = 2.0
    rep = compare(a, g, "fp16", name="attention_out")
    line = str(rep)
    assert "\n" not in line and line.startswith("attention_out: FAIL")
    assert "(1, 2)" in line and "1/6" in line
    d = rep.to_dict()
    json.dumps(d)
    assert d["worst_index"] == [1, 2] and d["passed"] is False and d["fail_ratio"] == pytest.approx(1 / 6)


def test_explicit_tolerances_override_the_class():
    g = np.ones(10)
    a = g * 1.01
    assert not compare(a, g, "fp16", max_fail_ratio=0).passed
    assert compare(a, g, "fp16", rtol=0.02, max_fail_ratio=0).passed
