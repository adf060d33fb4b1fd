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


# ---- a HiFloat8 KV cache (Ascend950) ---------------------------------------------------------------------------

#: the shape of tests/kernels/test_fia_dequant_arch35_hifloat8's GQA decode: the same compiled dequant kernel
_HIF8 = ["--batch", "2", "--num-heads", "8", "--num-kv-heads", "2", "--kv-seqlen", "300", "--head-dim", "128",
         "--lse", "--target", "Ascend950"]


def _hif8_call(kv):
    import numpy as np

    rng = np.random.default_rng(0)
    q = rng.uniform(-1, 1, (2, 8, 1, 128)).astype(np.float16)
    scales = {f"{n}_antiquant_scale": np.full((2, 1, 128), 0.02, np.float16) for n in ("key", "value")}
    return q, kv, kv, dict(num_heads=8, num_key_value_heads=2, input_layout="BNSD", scale=128 ** -0.5,
                           softmax_lse_flag=True, **scales)


def test_fia_cost_of_a_hifloat8_cache_is_the_dequant_kernels():
    """fia_cost takes V2's key_dtype / value_dtype: a uint8 HiF8 cache is costed on the dequant kernel. The kernel
    reads it widened to the query's dtype (the language has no HiF8 type), two bytes per element, where it reads
    an FP8 cache as it is (``float8_e4m3fn``), one byte: the HiF8 estimate is the larger."""
    import ml_dtypes
    import numpy as np

    from cvtile.kernels.fia.cost import fia_cost

    q, k, v, kw = _hif8_call(np.full((2, 2, 300, 128), 0x08, np.uint8))
    hif8 = fia_cost(q, k, v, target="Ascend950", key_dtype="hifloat8", value_dtype=290, **kw)
    fp8 = np.ones((2, 2, 300, 128), ml_dtypes.float8_e4m3fn)
    e4m3 = fia_cost(q, fp8, fp8, target="Ascend950", **kw)
    assert [lc.kernel for lc in hif8.launches] == ["fia_dequant"]
    assert hif8.tiling.template == "FusedInferAttentionScoreTilingImpl"
    assert hif8.estimated_us > e4m3.estimated_us > 0
    assert hif8.launches[0].gm_bytes - e4m3.launches[0].gm_bytes == 2 * 2 * 2 * 300 * 128   # K and V, 1 B more


def test_fia_cost_refuses_other_dtype_overrides_by_name():
    import numpy as np

    from cvtile.kernels.errors import UnsupportedParameterError
    from cvtile.kernels.fia.cost import fia_cost

    q, k, v, kw = _hif8_call(np.zeros((2, 2, 300, 128), np.uint8))
    with pytest.raises(UnsupportedParameterError) as err:
        fia_cost(q, k, v, target="Ascend950", key_dtype="float8_e5m2", value_dtype="hifloat8", **kw)
    assert err.value.param == "key_dtype" and err.value.value == "float8_e5m2"


def test_cost_command_takes_a_hifloat8_cache_on_ascend950(capsys):
    assert main(["cost", *_HIF8, "--kv-dtype", "hifloat8", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["target"] == "Ascend950" and rep["launches"][0]["kernel"] == "fia_dequant" and rep["estimated_us"] > 0
    assert main(["cost", *_HIF8, "--kv-dtype", "float8_e4m3fn", "--json"]) == 0
    assert 0 < json.loads(capsys.readouterr().out)["estimated_us"] < rep["estimated_us"]   # FP8: one byte a value


def test_cost_of_the_fas_forward_refuses_a_kv_dtype(capsys):
    assert main(["cost", "--op", "fas", "--kv-dtype", "int8"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--kv-dtype" in err[0] and "FlashAttentionScore" in err[0]
