"""The cvtile command line: run, tiling and cases; exit codes, text and JSON output."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from cvtile.cases import DEFAULT_CASES, make_inputs, with_options
from cvtile.cli import main
from cvtile.kernels.fia.api import plan_call

SMALL = ["--batch", "1", "--num-heads", "4", "--num-kv-heads", "2", "--kv-seqlen", "300", "--head-dim", "64"]


def run_cli(capsys, *argv) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


def test_run_custom_case_passes_and_prints_the_report(capsys):
    code, out = run_cli(capsys, "run", *SMALL)
    assert code == 0, out
    assert "custom: B=1 Nq=4 Nkv=2 Sq=1 Skv=300 D=64 float16 BNSD lse on Ascend910B1" in out
    assert "tiling: FiaTilingNonQuant" in out and "M base" in out and "S2 base" in out and "cores" in out
    assert "attention_out  PASS" in out and "softmax_lse    PASS" in out
    assert "wall time: simulated" in out and "golden" in out
    assert out.rstrip().endswith("PASS")


def test_run_json_is_machine_readable(capsys):
    code, out = run_cli(capsys, "run", *SMALL, "--json")
    assert code == 0
    data = json.loads(out)
    assert isinstance(data, list) and len(data) == 1
    case = data[0]
    assert case["passed"] is True
    assert case["tiling"]["template"] == "FiaTilingNonQuant"
    assert case["reports"]["attention_out"]["passed"] is True
    assert case["spec"]["num_heads"] == 4
    assert case["order"] == "program" and set(case["sha256"]) == {"attention_out", "softmax_lse"}
    assert all(len(h) == 64 for h in case["sha256"].values())
    assert case["sim_seconds"] >= 0 and case["golden_seconds"] >= 0


@pytest.mark.wide
def test_run_order_pipelined_gives_bitwise_the_program_order_outputs(capsys):
    code, out = run_cli(capsys, "run", *SMALL, "--json")
    program = json.loads(out)[0]
    code2, out2 = run_cli(capsys, "run", *SMALL, "--json", "--order", "pipelined")
    pipelined = json.loads(out2)[0]
    assert code == code2 == 0 and pipelined["order"] == "pipelined" and pipelined["passed"]
    assert pipelined["sha256"] == program["sha256"]
    code3, text = run_cli(capsys, "run", *SMALL, "--order", "pipelined")
    assert code3 == 0 and "simulated (pipelined order)" in text


@pytest.mark.slow
@pytest.mark.parametrize("kv_dtype", ["int8", "int4"])
def test_run_kv_antiquant_cache_passes(capsys, kv_dtype):
    """``--kv-dtype``: an int8 / int4 (packed in int32) cache with per-channel antiquant scale and offset runs the
    MSD kernel on the IFA route and passes its golden."""
    code, out = run_cli(capsys, "run", *SMALL, "--kv-dtype", kv_dtype)
    assert code == 0, out
    assert f"lse kv {kv_dtype} on Ascend910B1" in out and "tiling: IFATiling" in out
    assert out.rstrip().endswith("PASS")


@pytest.mark.slow
@pytest.mark.parametrize("kv_dtype", ["int8", "int4", "float8_e4m3fn", "hifloat8"])
def test_run_kv_antiquant_cache_on_ascend950_runs_the_dequant_kernel(capsys, kv_dtype):
    code, out = run_cli(capsys, "run", *SMALL, "--kv-dtype", kv_dtype, "--target", "Ascend950")
    assert code == 0, out
    assert f"kv {kv_dtype} on Ascend950" in out and "FusedInferAttentionScoreTilingImpl" in out
    assert out.rstrip().endswith("PASS")


def test_case_inputs_of_a_950_kv_antiquant_cache_are_the_key_and_value_own():
    """Ascend950 takes no stacked antiquant_scale: the case gives key_/value_antiquant_scale and offsets."""
    spec = with_options(DEFAULT_CASES[0], batch=1, num_heads=4, num_kv_heads=2, kv_seqlen=300, head_dim=64,
                        kv_dtype="int8", target="Ascend950")
    q, k, v, kw = make_inputs(spec)
    assert "antiquant_scale" not in kw and k.dtype == np.int8
    assert kw["key_antiquant_scale"].shape == kw["value_antiquant_offset"].shape == (2, 1, 64)


#: the shape of tests/kernels/test_fia_dequant_arch35_hifloat8's GQA decode: the same compiled dequant kernel
HIF8_CASE = ["--batch", "2", "--num-heads", "8", "--num-kv-heads", "2", "--kv-seqlen", "300", "--head-dim", "128",
             "--kv-dtype", "hifloat8", "--target", "Ascend950"]


@pytest.mark.slow
def test_run_hifloat8_cache_on_ascend950_passes_its_golden(capsys):
    """``--kv-dtype hifloat8``: uint8 HiF8 codes marked by V2's key_dtype / value_dtype, per-channel scales, no
    offset; the dequant kernel against the float64 golden, which decodes the same codes."""
    code, out = run_cli(capsys, "run", *HIF8_CASE, "--json")
    case = json.loads(out)[0]
    assert code == 0 and case["passed"], out
    assert case["spec"]["kv_dtype"] == "hifloat8" and case["spec"]["description"].endswith("kv hifloat8 on Ascend950")
    assert case["tiling"]["template"] == "FusedInferAttentionScoreTilingImpl"
    assert case["reports"]["attention_out"]["passed"] and case["reports"]["softmax_lse"]["passed"]


def test_case_inputs_of_a_hifloat8_cache():
    """The case's HiF8 cache: uint8 codes of finite values in [-64, 64], the key's and the value's own scales in
    the query's dtype (no offsets: op_host refuses one), the dtype overrides among the keywords; plan_call reads
    them as hifloat8 and op_host tiles the call to the 950's impl route."""
    from cvtile.kernels.golden.hifloat8 import HIF8_TABLE

    spec = with_options(DEFAULT_CASES[0], batch=1, num_heads=4, num_kv_heads=2, kv_seqlen=300, head_dim=64,
                        kv_dtype="hifloat8", target="Ascend950")
    q, k, v, kw = make_inputs(spec)
    assert k.dtype == v.dtype == np.uint8 and k.shape == (1, 2, 300, 64)
    assert kw["key_dtype"] == kw["value_dtype"] == "hifloat8"
    assert not any("offset" in name for name in kw) and kw["key_antiquant_scale"].dtype == q.dtype
    values = HIF8_TABLE[k]
    assert np.isfinite(values).all() and np.abs(values).max() <= 64 and len(np.unique(k)) > 100
    arrays, tiling = plan_call(query=q, key=k, value=v, target=spec.target, **kw)
    assert tiling.template == "FusedInferAttentionScoreTilingImpl" and arrays["_antiquant"].cache == "hifloat8"
    deq = values.astype(np.float64) * kw["key_antiquant_scale"].astype(np.float64)
    assert np.abs(deq).max() < 1.1


def test_tiling_of_a_hifloat8_cache_on_ascend950(capsys):
    code, out = run_cli(capsys, "tiling", *HIF8_CASE)
    assert code == 0 and "fia/FusedInferAttentionScoreTilingImpl" in out, out


@pytest.mark.parametrize("kv_dtype, dtype, packed", [("int8", np.int8, 1), ("int4", np.int32, 8)])
def test_case_inputs_of_a_kv_antiquant_cache(kv_dtype, dtype, packed):
    """The case's cache: integers (int4 packed 8 per int32) with per-channel (2, Nkv, 1, D) parameters in the
    query's dtype, dequantised about into [-1, 1]; op_host tiles it to the IFA decode route."""
    spec = with_options(DEFAULT_CASES[0], batch=1, num_heads=4, num_kv_heads=2, kv_seqlen=300, head_dim=64,
                        kv_dtype=kv_dtype)
    q, k, v, kw = make_inputs(spec)
    assert k.dtype == v.dtype == dtype and k.shape == (1, 2, 300, 64 // packed)
    assert kw["antiquant_scale"].shape == kw["antiquant_offset"].shape == (2, 2, 1, 64)
    assert kw["antiquant_scale"].dtype == q.dtype
    arrays, tiling = plan_call(query=q, key=k, value=v, target=spec.target, **kw)
    values = arrays["key"].astype(np.float64)
    deq = (values + kw["antiquant_offset"][0].astype(np.float64)) * kw["antiquant_scale"][0].astype(np.float64)
    assert tiling.template == "IFATiling" and np.abs(deq).max() < 1.2
    assert spec.describe().endswith(f"kv {kv_dtype} on Ascend910B1")


def test_run_kv_antiquant_on_a_prefill_is_refused_naming_key(capsys):
    """op_host tiles an antiquant prefill to the PFA route, whose KvAntiquant path cvtile runs for an int8 cache
    but not for an int4 one."""
    code, out = run_cli(capsys, "run", *SMALL, "--q-seqlen", "64", "--kv-dtype", "int4")
    assert code == 1
    assert "rejected: unsupported parameter key='int4 tensor" in out and "int4 cache on the A2/A3" in out


def test_run_rejected_case_exits_1_with_the_aclnn_status(capsys):
    code, out = run_cli(capsys, "run", "--batch", "1", "--num-heads", "6", "--num-kv-heads", "4",
                        "--kv-seqlen", "128", "--head-dim", "64")
    assert code == 1
    assert "rejected" in out and "aclnn" in out and "num_key_value_heads" in out


def test_tiling_default_decode_case_explains_its_decisions(capsys):
    code, out = run_cli(capsys, "tiling")
    assert code == 0
    for fragment in ("template", "FiaTilingNonQuant", "M base", "S2 base", "cores used", "flash decode"):
        assert fragment in out
    assert "no row block split across cores" in out  # the reason FD is off for B=4 Skv=4096


def test_tiling_json_and_rejection(capsys):
    code, out = run_cli(capsys, "tiling", "--kv-seqlen", "16384", "--json")
    assert code == 0
    t = json.loads(out)
    assert t["fd"] is True and t["fd_tasks"], "B=4 Skv=16384 decode splits rows across cores"
    code, out = run_cli(capsys, "tiling", "--num-heads", "6", "--num-kv-heads", "4")
    assert code == 1 and "rejected" in out


def test_cases_ut_csv_summary_line(capsys, corpus_file):
    path = corpus_file("ut_tiling/fia_arch22.csv")
    code, out = run_cli(capsys, "cases", str(path))
    assert code == 0
    last = out.strip().splitlines()[-1]
    assert last.startswith("cases: 145 run, 145 verdict agree, 36 key agree (of 36 success rows), 0 errors")


def test_cases_ut_csv_json(capsys, corpus_file):
    code, out = run_cli(capsys, "cases", str(corpus_file("ut_tiling/fia_arch35.csv")), "--json")
    assert code == 0
    data = json.loads(out)
    assert data["run"] == 530 and data["verdict_agree"] == 530


def test_cases_st_json_limit(capsys, corpus_file):
    code, out = run_cli(capsys, "cases", str(corpus_file("st/fia_v4.json")), "--limit", "2")
    last = out.strip().splitlines()[-1]
    assert last.startswith("cases: 2 run, ")
    assert code == (0 if " 0 failed, " in last and " 0 errors" in last else 1)


def test_cases_rejects_missing_and_unknown_files(tmp_path, capsys):
    assert main(["cases", str(tmp_path / "nope.csv")]) == 2
    other = tmp_path / "x.txt"
    other.write_text("hello")
    assert main(["cases", str(other)]) == 2


@pytest.mark.parametrize("argv", [["-m", "cvtile", "--help"], ["-m", "cvtile", "tiling", "--help"]])
def test_module_entry_point(argv):
    res = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0
    assert "usage: cvtile" in res.stdout


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_case_inputs_are_drawn_in_float32_not_float64_regression(dtype):
    """Bug pinned: ``make_inputs`` drew every tensor in float64 and cast it (numpy's scalar float64 -> float16
    cast), 5.7 s of a warm ``cvtile run`` for the default decode case's 67 M-element key alone. The draw is
    float32 now: the peak memory of drawing a case is its tensors plus one 4-byte draw of the largest, not an
    8-byte one; the values stay uniform in [-1, 1)."""
    import tracemalloc

    spec = with_options(DEFAULT_CASES[0], batch=2, num_heads=8, num_kv_heads=2, kv_seqlen=8192, head_dim=128,
                        dtype=dtype)
    tracemalloc.start()
    try:
        q, k, v, _ = make_inputs(spec)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    tensors = q.nbytes + k.nbytes + v.nbytes
    assert peak < tensors + 4 * k.size + (1 << 20), (peak, tensors)
    kf = k.astype(np.float32)
    assert k.dtype == np.dtype(q.dtype) and -1.0 <= kf.min() < -0.99 and 0.99 < kf.max() <= 1.0
    assert abs(float(kf.mean())) < 0.01
