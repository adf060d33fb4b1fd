"""``cvtile cost`` and ``cvtile trace``: the report's fields, the files, and one-line user errors."""

from __future__ import annotations

import json

import pytest

from cvtile.cli import main


def test_cost_json_prints_the_estimate_bound_and_busy_fractions(capsys):
    assert main(["cost", "--batch", "1", "--num-heads", "8", "--q-seqlen", "256", "--kv-seqlen", "1024",
                 "--target", "Ascend910B2", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["target"] == "Ascend910B2" and rep["estimated_us"] > 0
    assert rep["bound"] in ("cube", "vector", "memory", "sync", "scalar", "launch")
    assert set(rep["busy"]) == {"aic", "aiv"} and "M" in rep["busy"]["aic"] and "V" in rep["busy"]["aiv"]
    assert rep["launches"][0]["kernel"] == "fia_attention"


def test_cost_of_the_fas_forward_times_its_kernel(capsys):
    assert main(["cost", "--op", "fas", "--batch", "1", "--num-heads", "4", "--q-seqlen", "256", "--kv-seqlen", "256",
                 "--sparse-mode", "3", "--layout", "BNSD", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["estimated_us"] > 0 and rep["launches"][0]["kernel"] == "fas_attention"
    assert rep["bound"] in ("cube", "vector", "memory", "sync", "scalar", "launch")


def test_cost_text_names_the_critical_path_lines(capsys):
    assert main(["cost"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("estimated ") and "critical path" in out and "kernel.py:" in out


@pytest.mark.parametrize("argv, words", [
    (["cost", "--op", "fas", "--layout", "NTD"], "FlashAttentionScore takes"),
    (["cost", "--op", "fas", "--block-size", "128"], "--block-size"),
    (["cost", "--target", "Ascend999"], "Ascend999"),
    (["cost", "--num-heads", "6", "--num-kv-heads", "4"], "num"),
    (["trace", "-o", "unused", "--target", "Ascend999"], "Ascend999"),
])
def test_user_errors_are_one_line_and_exit_2(argv, words, capsys, tmp_path):
    argv = [a if a != "unused" else str(tmp_path / "t") for a in argv]
    try:
        code = main(argv)
    except SystemExit as e:          # an option argparse itself refuses (a checked type)
        code = e.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err


def test_trace_writes_a_chrome_trace_both_pngs_and_the_report(tmp_path, capsys):
    assert main(["trace", "-o", str(tmp_path)]) == 0
    for name in ("trace.json", "timeline.png", "roofline.png", "cost.json"):
        assert (tmp_path / name).stat().st_size > 1000, name
    doc = json.loads((tmp_path / "trace.json").read_text())
    assert doc["displayTimeUnit"] == "ns" and doc["traceEvents"]
    assert "wrote" in capsys.readouterr().out
