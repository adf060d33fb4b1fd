"""The st runner end to end: golden-as-api on real cases, and every classification path."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cvtile.kernels.errors import UnsupportedParameterError
from cvtile.kernels.st_runner import golden_api, is_unsupported, main, run_st_corpus

SMALL = ["0", "13", "15", "20", "21", "26", "37", "61", "72", "202", "226", "300", "304", "308", "309", "334",
         "337", "392"]


@pytest.fixture(scope="module")
def fia_path(corpus_file):
    return corpus_file("st/fia_v4.json")


def test_golden_as_api_passes_small_cases(fia_path):
    res = run_st_corpus(fia_path, golden_api(), select=SMALL)
    assert res.run == len(SMALL)
    assert res.count("passed") == len(SMALL), [(r.id, r.status, r.reason) for r in res.records]
    assert res.summary_line() == f"cases: {len(SMALL)} run, {len(SMALL)} passed, 0 failed, 0 unsupported, 0 errors"
    rec = next(r for r in res.records if r.id == 304)
    assert rec.lse is not None and rec.lse["passed"] and rec.out["passed"]
    assert 0 < rec.max_abs_err < 1e-2 and "softmax_lse" not in rec.features


def test_full_quant_case_runs_through_the_golden(fia_path):
    """Full quant (44, the golden against itself: the golden was its refusal once) runs; KV antiquant (52 once)
    and MLA rope (70) run and are their own tests' business (``test_fia_antiquant``, ``test_fia_mla``)."""
    res = run_st_corpus(fia_path, golden_api(), select=["44"])
    assert [r.status for r in res.records] == ["passed"]


def _api_raising(exc):
    def api(**kwargs):
        raise exc
    return api


def test_unsupported_parameter_error_classifies_as_unsupported(fia_path):
    res = run_st_corpus(fia_path, _api_raising(UnsupportedParameterError("pse_shift", 3, "not simulated")),
                        select=["0"])
    (rec,) = res.records
    assert rec.status == "unsupported" and "pse_shift" in rec.reason and "not simulated" in rec.reason


def test_any_class_named_unsupported_parameter_error_counts(fia_path):
    class UnsupportedParameterError(RuntimeError):  # a lookalike from another module
        pass

    class Narrower(UnsupportedParameterError):
        pass

    assert is_unsupported(Narrower("x"))
    res = run_st_corpus(fia_path, _api_raising(Narrower("sparse_mode=9")), select=["0"])
    assert res.records[0].status == "unsupported"


def test_other_exceptions_are_errors(fia_path):
    res = run_st_corpus(fia_path, _api_raising(ValueError("bad layout")), select=["0", "1"])
    assert [r.status for r in res.records] == ["error", "error"]
    assert "ValueError: bad layout" in res.records[0].reason
    assert res.summary_line() == "cases: 2 run, 0 passed, 0 failed, 0 unsupported, 2 errors"


def test_numeric_failures_are_reported(fia_path):
    base = golden_api()

    def off_by_a_bit(**kwargs):
        out, lse = base(**kwargs)
        out = out.astype(np.float32)
        out.reshape(-1)[::7] += 0.05
        return out.astype(kwargs["query"].dtype), lse

    res = run_st_corpus(fia_path, off_by_a_bit, select=["3"])
    (rec,) = res.records
    assert rec.status == "failed" and "attention_out: FAIL" in rec.reason
    assert rec.out["violations"] > 0 and rec.out["worst_index"] is not None


def test_missing_lse_fails(fia_path):
    base = golden_api()

    def no_lse(**kwargs):
        return base(**kwargs)[0]

    res = run_st_corpus(fia_path, no_lse, select=["61", "0"])
    status = {r.id: r for r in res.records}
    assert status[0].status == "passed" and status[61].status == "failed"
    assert "softmax_lse" in status[61].reason


def test_limit_and_size_cap_are_reported_as_skipped(fia_path):
    res = run_st_corpus(fia_path, golden_api(), select=["0", "1", "2", "213"], limit=2)
    assert [r.status for r in res.records] == ["passed", "passed", "skipped", "skipped"]
    assert res.summary_line().endswith(", 2 skipped")
    res = run_st_corpus(fia_path, golden_api(), select=["0", "213"], max_elements=10_000_000)
    assert [r.status for r in res.records] == ["passed", "skipped"]
    assert "exceed" in res.records[1].reason


def test_to_json_and_cli(fia_path, tmp_path, capsys):
    out = tmp_path / "res.json"
    # (44, full quant, was the golden's refusal until the full-quant golden; it runs now)
    rc = main([str(fia_path), "--api", "golden", "--case", "0", "--case", "44", "--json", str(out)])
    assert rc == 0
    assert capsys.readouterr().out.strip().endswith("cases: 2 run, 2 passed, 0 failed, 0 unsupported, 0 errors")
    data = json.loads(out.read_text())
    assert data["counts"]["passed"] == 2 and data["counts"]["unsupported"] == 0
    assert [c["status"] for c in data["cases"]] == ["passed", "passed"]
    assert all({"id", "name", "status", "reason", "max_abs_err", "max_rel_err"} <= set(c) for c in data["cases"])


def test_st_golden_convention_overflows_the_fp32_scores_like_the_chip():
    """``--golden st`` (the upstream st executor's fp32 scores): a q.k beyond the fp32 range is inf there, its row
    NaN; the float64 goldens stay finite. A NaN output then agrees with it (NaN = NaN in the comparison)."""
    from cvtile.kernels import compare
    from cvtile.kernels.golden import fia_golden_lowp, fia_golden_st
    from cvtile.kernels.st_runner import FIA_GOLDENS, golden_for

    import ml_dtypes

    q = np.full((1, 1, 1, 16), 3.0e38, dtype=ml_dtypes.bfloat16)
    k = np.full((1, 1, 8, 16), 3.0e38, dtype=ml_dtypes.bfloat16)
    k[..., 1::2, :] = -k[..., 1::2, :]
    v = np.ones((1, 1, 8, 16), dtype=ml_dtypes.bfloat16)
    kw = dict(num_heads=1, input_layout="BNSD", scale=0.25)
    assert np.isfinite(fia_golden_lowp(q, k, v, **kw)[0]).all()
    out = fia_golden_st(q, k, v, **kw)[0]
    assert np.isnan(out).all()
    assert compare(np.full(out.shape, np.nan, dtype=np.float32), out, "bfloat16").passed
    small = np.full((1, 1, 1, 16), 0.5, dtype=ml_dtypes.bfloat16)
    a, b = fia_golden_st(small, v, v, **kw)[0], fia_golden_lowp(small, v, v, **kw)[0]
    assert np.allclose(a, b, rtol=1e-6)
    assert set(FIA_GOLDENS) == {"lowp", "exact", "st"}
    assert golden_for("st")[0] is fia_golden_st and golden_for("st")[1].startswith("golden: st (")


def test_st_convention_judges_each_case_by_its_standard(fia_path):
    """``--golden st`` hands the case's ``standard`` to the golden: the BSND case 3 ("default") is compared with
    the fp32 golden under the fp16 class, the TND case 300 (cv_fused_double_benchmark) by the double benchmark
    with the case's limits, and the run says so in its golden line and verbose lines."""
    from cvtile.kernels.golden import fia_golden, fia_golden_st
    from cvtile.kernels.st_runner import golden_for

    res = run_st_corpus(fia_path, golden_api(fia_golden), golden=fia_golden_st, select=["3", "300"])
    by_id = {r.id: r for r in res.records}
    assert [r.status for r in res.records] == ["passed", "passed"], [r.reason for r in res.records]
    single, double = by_id[3].reports["attention_out"], by_id[300].reports["attention_out"]
    assert single["rtol"] == 0.005 and "limits" not in single
    assert double["limits"] == {"max_re_ratio": 2.0, "avg_re_ratio": 1.2, "root_mean_squared_ratio": 1.2,
                                "small_count_ratio": 2.0}
    assert double["dtype"] == "float32" and double["compared"] == double["total"] > 0
    line = golden_for("st")[1]
    assert "fp32 golden" in line and "double benchmark" in line and "NaN = NaN" in line


def test_st_golden_rounds_like_the_executor():
    """Outside TND the st golden is the executor's fp32 one with the output rounded to the query dtype; a TND call
    returns the float64 golden and the online-softmax benchmark for the double benchmark."""
    import ml_dtypes

    from cvtile.kernels.golden import fia_golden_st
    from cvtile.kernels.golden.dtypes import round_to
    from cvtile.kernels.precision import Benchmarked, DoubleBenchmark

    rng = np.random.default_rng(3)
    bf = ml_dtypes.bfloat16
    q, k, v = (rng.uniform(-2, 2, s).astype(bf) for s in ((1, 2, 3, 16), (1, 2, 40, 16), (1, 2, 40, 16)))
    out, lse = fia_golden_st(q, k, v, num_heads=2, input_layout="BNSD", scale=0.3, softmax_lse_flag=True)
    assert np.array_equal(out, round_to(out, "bfloat16")) and np.array_equal(lse, round_to(lse, "float32"))
    tq, tk, tv = (x[0].transpose(1, 0, 2) for x in (q, k, v))
    t_out, t_lse = fia_golden_st(tq, tk, tv, num_heads=2, input_layout="TND", scale=0.3, softmax_lse_flag=True,
                                 actual_seq_lengths=[3], actual_seq_lengths_kv=[40])
    assert isinstance(t_out, Benchmarked) and isinstance(t_lse, Benchmarked)
    assert t_out.limits == DoubleBenchmark(2.0, 1.2, 1.2) and t_out.dtype == "float32"
    assert np.array_equal(t_out.benchmark, round_to(t_out.benchmark, "bfloat16"))
    assert np.allclose(t_out.golden, out.transpose(0, 2, 1, 3)[0], rtol=2 ** -7, atol=1e-3)
    single = fia_golden_st(tq, tk, tv, num_heads=2, input_layout="TND", scale=0.3, accuracy_standard="default",
                           actual_seq_lengths=[3], actual_seq_lengths_kv=[40])[0]
    assert isinstance(single, np.ndarray) and np.array_equal(single, t_out.golden)


class _Case:
    """A stand-in st case: what ``feature_cover`` reads (its optional inputs and its size)."""

    def __init__(self, features, elements):
        self._features, self._elements = list(features), elements

    def features(self):
        return self._features

    def elements(self):
        return self._elements


def test_feature_cover_takes_the_rarest_input_first_each_at_its_cheapest(monkeypatch):
    from cvtile.kernels import st_runner

    cases = [_Case(["mask", "pse"], 50),        # 0: the cheapest with pse, which also gives mask
             _Case(["mask"], 10),               # 1: the cheapest with mask: not needed once 0 is chosen
             _Case(["pse"], 80),                # 2
             _Case(["sink", "mask"], 200),      # 3: the only case with sink (the rarest input): chosen first
             _Case([], 30),                     # 4: plain
             _Case([], 20),                     # 5: the cheapest plain case
             _Case(["mask", "pse", "lse"], 500),  # 6
             _Case(["lse"], 40)]                # 7: the cheapest with lse
    monkeypatch.setattr(st_runner, "load_st_cases", lambda path: cases)
    # sink (1 case) -> 3, lse (2) -> 7, pse (3) -> 0, mask: given by 3 already; then the plain case 5
    assert st_runner.feature_cover("corpus.json") == [0, 3, 5, 7]
    # a corpus without a plain case gets none
    monkeypatch.setattr(st_runner, "load_st_cases", lambda path: cases[:4])
    assert st_runner.feature_cover("corpus.json") == [0, 3]
