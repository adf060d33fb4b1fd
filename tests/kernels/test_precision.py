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
    assert tolerance(np.int32) == (0.0, 0.0)   # exact integer sums (the antiquant kernel's MSD workspaces)
    with pytest.raises(ValueError, match="tolerance class"):
        tolerance(np.int64)


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


# ---- the double benchmark (ATK cv_fused_double_benchmark) ------------------------------------------------------

def _noisy(g, rel, seed):
    return g * (1 + rel * np.random.default_rng(seed).standard_normal(g.shape))


def test_double_benchmark_passes_an_output_as_good_as_the_benchmark():
    from cvtile.kernels.precision import DoubleBenchmark, compare_double_benchmark

    g = np.random.default_rng(0).uniform(0.5, 2.0, 4096)
    bench = _noisy(g, 1e-2, 1)
    limits = DoubleBenchmark(2, 1.2, 1.2)
    rep = compare_double_benchmark(_noisy(g, 1e-2, 2), g, bench, "bfloat16", limits, name="out")
    assert rep.passed and rep.compared == rep.total == 4096 and rep.nonfinite_failures == 0
    assert 0.8 < rep.ratios["avg_re_ratio"] < 1.2 and rep.actual["small_errors"] == 0
    assert str(rep).startswith("out: PASS double benchmark bfloat16 on 4096/4096 finite elements: max_re_ratio")
    bad = compare_double_benchmark(_noisy(g, 1.5e-2, 2), g, bench, "bfloat16", limits)
    assert not bad.passed and bad.ratios["avg_re_ratio"] > 1.2 and bad.ratios["max_re_ratio"] < 2
    d = bad.to_dict()
    assert d["passed"] is False and d["limits"]["avg_re_ratio"] == 1.2 and isinstance(d["max_abs_err"], float)


def test_double_benchmark_floors_the_benchmark_error_and_counts_small_values():
    """An exact benchmark does not make every output error infinite: its errors are floored at error_thd
    (bf16 2**-8); small golden values (|g| <= error_thd) are counted instead, over max(count, 1)."""
    from cvtile.kernels.precision import DoubleBenchmark, compare_double_benchmark

    g = np.array([1.0, 2.0, 1e-3, -1e-3])
    out = np.array([1.0 + 2 ** -9, 2.0, 1e-3, -1e-3])
    rep = compare_double_benchmark(out, g, g, "bfloat16", DoubleBenchmark(2, 1.2, 1.2))
    assert rep.passed and rep.ratios["max_re_ratio"] == pytest.approx(2 ** -9 / 2 ** -8)
    two_small = compare_double_benchmark(g + np.array([0, 0, 1e-4, 1e-4]), g, g, "bfloat16")
    assert two_small.actual["small_errors"] == 2 and two_small.ratios["small_count_ratio"] == 2.0
    assert two_small.passed          # limit 2 (ATK's default)
    # fp32 thresholds (error_thd 2**-14): 1e-3 is a large value there, and 10 % off it is 1600 error_thd
    fp32 = compare_double_benchmark(g + np.array([0, 0, 1e-4, 1e-4]), g, g, "float32")
    assert not fp32.passed and fp32.actual["small_errors"] == 0 and fp32.ratios["max_re_ratio"] > 1000


def test_double_benchmark_inf_nan_state_table():
    """An element whose output is not finite (or whose golden or benchmark is not) passes iff the output's
    state (finite, +inf, -inf, NaN) is the golden's or the benchmark's; such elements are then left out."""
    from cvtile.kernels.precision import compare_double_benchmark

    inf, nan = np.inf, np.nan
    g = np.array([1.0, nan, 1.0, inf, 1.0])
    bench = np.array([1.0, 1.0, inf, inf, -inf])
    out = np.array([1.0, nan, inf, 1.0, -inf])     # NaN = golden's, +inf = benchmark's, 1.0 vs inf/inf: fails
    rep = compare_double_benchmark(out, g, bench, "float16")
    assert not rep.passed and rep.nonfinite_failures == 1 and rep.compared == 1
    assert rep.worst_nonfinite == ((3,), ("+inf", "+inf", "finite"))
    assert "output finite, golden +inf, benchmark +inf" in str(rep)
    out[3] = inf
    ok = compare_double_benchmark(out, g, bench, "float16")
    assert ok.passed and ok.nonfinite_failures == 0
    all_special = compare_double_benchmark([nan, nan], [nan, 1.0], [1.0, nan], "bfloat16")
    assert all_special.passed and all_special.compared == 0
    assert not compare_double_benchmark([nan], [1.0], [1.0], "bfloat16").passed


def test_double_benchmark_limits_from_an_st_standard():
    from cvtile.kernels.precision import DoubleBenchmark, compare_double_benchmark

    assert DoubleBenchmark.from_standard("default") is None and DoubleBenchmark.from_standard(None) is None
    lim = DoubleBenchmark.from_standard({"cv_fused_double_benchmark": {
        "max_re_ratio": 2, "avg_re_ratio": 1.2, "root_mean_squared_ratio": 1.2}})
    assert lim == DoubleBenchmark(2.0, 1.2, 1.2, 2.0)
    assert DoubleBenchmark.from_standard({"cv_fused_double_benchmark": {}}) == DoubleBenchmark()
    rep = compare_double_benchmark(np.ones(3), np.ones(4), np.ones(4), "float16")
    assert not rep.passed and "shape mismatch" in str(rep)
    with pytest.raises(ValueError, match="no thresholds"):
        compare_double_benchmark(np.ones(2), np.ones(2), np.ones(2), "int8")
