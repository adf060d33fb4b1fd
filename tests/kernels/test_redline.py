"""The flash_attn redline train CSV runner (``kernels.redline``): parsing, the work budget, the mapping onto
``npu_fusion_attention``, and a small synthetic row through the simulator."""

from __future__ import annotations

import numpy as np
import pytest

from cvtile.cli import main
from cvtile.kernels.redline import is_redline_csv, load_redline, redline_call, row_gflop, run_redline

HEADER = ("testcase_name,api_name,tensor_view_shapes,tensor_dtypes,tensor_formats,attributes,output_tensor_indexes,"
          "golden_api,input_data_ranges,precision_tolerances,absolute_precision\n")


def _row(name, shapes, dtype, attrs, tol="((0.005, 2.5e-05),)"):
    rng = "((-10, 10), (-10, 10), (-10, 10))"
    dts = f"('{dtype}', '{dtype}', '{dtype}')"
    return f'{name},flash_attn_ttk_ops.flash_attn_ttk,"{shapes}","{dts}",,"{attrs}",,,"{rng}","{tol}",1e-08\n'


def _attrs(layout, mode, **extra):
    a = {"softmax_scale": 0.125, "mask_mode": mode, "win_left": -1, "win_right": -1, "layout_q": layout,
         "layout_kv": layout, "layout_out": layout, "return_softmax_lse": False}
    a.update(extra)
    return repr(a)


@pytest.fixture
def csv_file(tmp_path):
    p = tmp_path / "train.csv"
    p.write_text(HEADER
                 + _row("small_causal", ((2, 64, 2, 64), (2, 96, 1, 64), (2, 96, 1, 64)), "float16",
                        _attrs("BSND", 3))
                 + _row("huge", ((128, 910, 16, 128),) * 3, "bfloat16", _attrs("BSND", 0), "((0.0078125, 0.0001),)")
                 + _row("tnd_seqused", ((10, 1, 64),) * 3, "float16",
                        _attrs("TND", 0, cu_seqlens_q_values=[0, 4, 10], cu_seqlens_kv_values=[0, 4, 10],
                               seqused_q_values=[3, 6], seqused_kv_values=[4, 6])))
    return p


def test_rows_parse_and_their_work_is_counted(csv_file):
    assert is_redline_csv(csv_file)
    rows = load_redline(csv_file)
    assert [r["name"] for r in rows] == ["small_causal", "huge", "tnd_seqused"]
    # the causal row: rows i see min(96, 32 + i + 1) keys
    pairs = sum(min(96, 32 + i + 1) for i in range(64))
    assert row_gflop(rows[0]) == pytest.approx(4 * 64 * 2 * 2 * pairs / 1e9)
    assert row_gflop(rows[1]) == pytest.approx(4 * 128 * 16 * 910 * 910 * 128 / 1e9)


def test_a_row_maps_onto_the_fas_call(csv_file):
    q, k, v, kw, tol, dtype = redline_call(load_redline(csv_file)[0], np.random.default_rng(0))
    assert q.shape == (2, 64, 2, 64) and q.dtype == np.float16 and np.abs(q).max() <= 10
    assert kw["sparse_mode"] == 3 and kw["atten_mask"].shape == (2048, 2048) and kw["head_num"] == 2
    assert tol == (0.005, 2.5e-05) and dtype == "float16"


def test_the_runner_runs_skips_and_refuses(csv_file):
    res = run_redline(csv_file, max_gflop=50)
    status = {r.name: r.status for r in res.records}
    assert status == {"small_causal": "passed", "huge": "skipped", "tnd_seqused": "unsupported"}, \
        [(r.name, r.reason) for r in res.records]
    assert "GFLOP" in res.records[1].reason and "seqused_q_values" in res.records[2].reason
    assert res.summary_line() == "cases: 2 run, 1 passed, 0 failed, 1 unsupported, 0 errors, 1 skipped"


def test_cli_reads_a_redline_csv(csv_file, capsys):
    assert main(["cases", str(csv_file), "--max-gflop", "50", "--case", "huge"]) == 0
    out = capsys.readouterr().out
    assert "huge: skipped" in out and out.strip().endswith("1 skipped")


def test_redline_case_naming_no_row_is_refused(csv_file, capsys):
    """``--case`` with a name no row has used to run nothing and exit 0."""
    with pytest.raises(ValueError, match="--case nope: no case of"):
        run_redline(csv_file, select=["small_causal", "nope"])
    assert main(["cases", str(csv_file), "--case", "nope"]) == 2
    assert "--case nope" in capsys.readouterr().err
