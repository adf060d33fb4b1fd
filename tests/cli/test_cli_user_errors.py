"""The command line's user errors: one line on stderr and exit status 2, never a traceback (issue 12, item 1);
the pass rule next to PASS; defaults in --help; the empty-kv run passes its own check."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from cvtile.cli import main


def _user_error(capsys, *argv) -> str:
    """The one stderr line of a user error: exit 2 from argparse (SystemExit) or from main's catch."""
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code
    assert code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    return lines[0]


def test_run_batch_minus_1_is_a_one_line_user_error(capsys):
    line = _user_error(capsys, "run", "--batch", "-1")
    assert "--batch" in line and "-1 is not positive" in line


def test_run_head_dim_0_is_a_one_line_user_error(capsys):
    line = _user_error(capsys, "run", "--head-dim", "0")
    assert "--head-dim" in line and "0 is not positive" in line


def test_run_unknown_kv_dtype_is_a_one_line_user_error(capsys):
    line = _user_error(capsys, "run", "--kv-dtype", "int3")
    assert "--kv-dtype" in line and "int8" in line and "int4" in line


@pytest.mark.parametrize("kv_dtype, target", [("int4", "Ascend910B1"), ("int4", "Ascend950"),
                                              ("float8_e4m3fn", "Ascend950"), ("hifloat8", "Ascend950")])
def test_emit_of_a_widened_cache_is_refused_naming_kv_dtype(capsys, tmp_path, kv_dtype, target):
    """The kernels read an int4 cache's int8 values and an FP8 cache's 16-bit values; an emitted kernel would read
    a cache the chip does not hold, so the backend refuses instead of writing it."""
    assert main(["emit", "fia", "--kv-dtype", kv_dtype, "--target", target, "-o", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert captured.out == "" and len(lines) == 1, captured.err
    assert f"kv_dtype={kv_dtype!r}" in lines[0] and "--kv-dtype int8" in lines[0]
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("command", ["run", "cost", "trace"])
@pytest.mark.parametrize("target", ["Ascend910B1", "Ascend910_93"])
@pytest.mark.parametrize("kv_dtype", ["hifloat8", "float8_e4m3fn"])
def test_an_ascend950_cache_off_ascend950_is_a_one_line_user_error(capsys, tmp_path, command, target, kv_dtype):
    """A2/A3 have no HiFloat8 or FP8 KV cache: run, cost and trace refuse --kv-dtype hifloat8 / float8_e4m3fn
    before drawing inputs, in one line naming the parameter, the value, the target and the rule (exit 2, nothing
    on stdout; ``run`` reported op_host's rejection of an FP8 cache as a failed case, exit 1)."""
    argv = [command, "--kv-dtype", kv_dtype, "--target", target] + (["-o", str(tmp_path)] if command == "trace"
                                                                     else [])
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert captured.out == "" and len(lines) == 1, captured.err
    assert f"kv_dtype={kv_dtype!r}" in lines[0] and target in lines[0] and "Ascend950" in lines[0], lines[0]
    assert not any(tmp_path.iterdir())


def test_run_target_ascend999_lists_the_known_targets(capsys):
    line = _user_error(capsys, "run", "--target", "Ascend999")
    assert "unknown target 'Ascend999'" in line and "Ascend910B1" in line and "Ascend950" in line


@pytest.mark.parametrize("command", ["tiling", "cost"])
def test_tiling_batch_minus_2_is_refused_before_any_allocation(capsys, command):
    """It used to size host arrays by the wrapped uint32 batch (4 billion entries); cost shares the options."""
    line = _user_error(capsys, command, "--batch", "-2")
    assert "--batch" in line and "-2 is not positive" in line


def test_tiling_target_is_checked(capsys):
    assert "unknown target" in _user_error(capsys, "tiling", "--target", "Ascend999")


def test_run_non_integer_is_a_one_line_user_error(capsys):
    assert "'x' is not an integer" in _user_error(capsys, "run", "--kv-seqlen", "x")


def test_typed_errors_raised_by_a_command_are_one_line_exit_2(capsys, monkeypatch):
    """A ParamError / UnsupportedParameterError / ValueError escaping a command is caught at main's top."""
    import cvtile.cli as cli
    from cvtile.kernels.errors import UnsupportedParameterError
    from cvtile.tiling.errors import ParamError

    for exc in (ParamError("num_heads", 4.0, "must be an int"), UnsupportedParameterError("key", "x", "why"),
                ValueError("bad case\nsecond line")):
        def boom(args, exc=exc):
            raise exc
        monkeypatch.setattr(cli, "_cases", boom)
        assert main(["cases", "x.csv"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"cvtile cases: {type(exc).__name__}: "), err


@pytest.mark.parametrize("command", ["run", "trace", "emit"])
def test_inputs_larger_than_the_host_are_a_one_line_user_error(capsys, tmp_path, command):
    """A 100-million-key cache op_host accepts (763 GiB of key) used to die in numpy with a MemoryError
    traceback; every command that draws the call's data now refuses it before drawing, naming the largest
    tensor, its shape and the memory available."""
    argv = [command, "fia"] if command == "emit" else [command]
    argv += ["--kv-seqlen", "100000000"] + (["-o", str(tmp_path / "out")] if command in ("trace", "emit") else [])
    line = _user_error(capsys, *argv)
    assert "HostMemoryError: key: (4, 8, 100000000, 128) float16 (762.9 GiB)" in line, line
    assert "of memory this machine has available" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("kv_dtype", [None, "int8"])
def test_too_large_inputs_op_host_rejects_report_op_host_rule(capsys, kv_dtype):
    """When the inputs would not fit and op_host rejects the call too (D 100000 > 512), the rule the operator
    applies is what the user reads (run: the case is rejected, exit 1; cost: one line, exit 2)."""
    assert main(["run", "--head-dim", "100000"] + (["--kv-dtype", kv_dtype] if kv_dtype else [])) == 1
    out = capsys.readouterr().out
    assert "rejected: aclnn 561002" in out and "D of query (100000) must be <= 512" in out
    line = _user_error(capsys, "cost", "--head-dim", "100000")
    assert "aclnn 561002" in line and "must be <= 512" in line


def test_cost_answers_a_call_larger_than_the_host(capsys):
    """``cvtile cost`` refused a call whose tensors exceed the machine's memory (HostMemoryError), although the
    cost model reads no tensor's values; its stand-ins are now zero-stride views, so a 512 GiB key costs
    nothing to describe."""
    import json

    assert main(["cost", "--batch", "4096", "--kv-seqlen", "65536", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["estimated_us"] > 0 and report["bound"] == "memory"


def test_cost_stand_ins_take_no_memory_and_pack_int4():
    from cvtile.cli_call import arrays_of_call
    from cvtile.tiling import TensorMeta

    arrays = arrays_of_call({"query": TensorMeta((4, 32, 1, 128), "float16"),
                             "key": TensorMeta((4, 8, 1 << 30, 128), "int4"), "actual_seq_lengths_kv": [5] * 4})
    assert arrays["key"].shape == (4, 8, 1 << 30, 16) and arrays["key"].dtype == np.int32
    assert arrays["key"].strides == (0, 0, 0, 0) and not arrays["key"].flags.writeable
    assert arrays["actual_seq_lengths_kv"] == [5] * 4


def test_too_large_int4_cache_reports_the_memory_rule(capsys):
    """op_host's checks read an int4 cache unpacked to int8 (the host widens it), which a too-large cache cannot
    be: the memory rule is reported instead of op_host's, in one line."""
    line = _user_error(capsys, "run", "--head-dim", "100000", "--kv-dtype", "int4")
    assert "HostMemoryError: key: (4, 8, 16384, 12500) int32" in line


def test_check_fits_names_the_largest_tensor_and_the_limit():
    from cvtile.host_memory import HostMemoryError, check_fits

    check_fits({"query": ((4, 8), "float16")}, limit=64)                  # 64 bytes: fits exactly
    with pytest.raises(HostMemoryError) as exc:
        check_fits({"query": ((4, 8), "float16"), "key": ((8, 8), "float32")}, temporary=1, limit=300)
    e = exc.value
    assert (e.param, e.need, e.limit) == ("key", 64 + 256 + 1, 300)
    assert str(e).startswith("key: (8, 8) float32 (256 B): the inputs need 321 B, more than the 300 B")


@pytest.mark.parametrize("command", ["trace", "emit"])
def test_an_output_directory_that_cannot_be_made_is_a_one_line_user_error(capsys, tmp_path, command, monkeypatch):
    """``-o`` under a regular file used to raise NotADirectoryError through a traceback. It is also refused before
    any work: ``emit`` used to compile, simulate and lower the FIA kernels first (40 s on a cold cache)."""
    import cvtile.cli_emit
    import cvtile.kernels.fia.cost

    def too_early(*a, **k):
        raise AssertionError("the call ran before the output directory was made")

    monkeypatch.setattr(cvtile.cli_emit, "_emit_one", too_early)
    monkeypatch.setattr(cvtile.kernels.fia.cost, "fia_cost", too_early)
    blocker = tmp_path / "file"
    blocker.write_text("")
    argv = ([command, "fia"] if command == "emit" else [command]) + ["-o", str(blocker / "out")]
    line = _user_error(capsys, *argv)
    assert line.startswith(f"cvtile {command}: NotADirectoryError: ") and "file/out" in line


@pytest.mark.parametrize("command", ["cost", "trace"])
def test_cost_of_an_empty_kv_call_names_key_and_the_empty_tensor_template(capsys, tmp_path, command):
    """``cost`` / ``trace --kv-seqlen 0`` died on ``max()`` of no launches (ValueError: max() arg is an empty
    sequence): the call takes op_host's empty-tensor template, whose output-filling kernel cvtile does not build,
    so there is nothing to time; said in one line naming the key."""
    argv = [command, "--kv-seqlen", "0"] + (["-o", str(tmp_path / "t")] if command == "trace" else [])
    line = _user_error(capsys, *argv)
    assert "unsupported parameter key=<float16 array (4, 8, 0, 128)>" in line
    assert "FiaTilingEmptyTensor" in line and "no launch to time" in line


@pytest.mark.parametrize("text", ['{"x": 1}', '[{"id": 3, "inputs": "x"}]', '[1, 2]'])
def test_cases_on_a_json_that_is_no_corpus_is_a_one_line_user_error(capsys, tmp_path, text):
    """A JSON dict that is neither an st list nor a tiny_rdv case used to run as an st case and fail inside the
    API ("missing 3 required positional arguments"), exit 1; now the file is refused, naming the rule."""
    f = tmp_path / "x.json"
    f.write_text(text)
    assert main(["cases", str(f)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "case 0 has no 'inputs' list" in err[0] and "tiny_rdv" in err[0], err


def test_cases_on_a_csv_without_ut_columns_is_a_one_line_user_error(capsys, tmp_path):
    """A CSV without op_host's UT columns used to be judged row by row ("verdict FAILED (expected )"), exit 0."""
    f = tmp_path / "x.csv"
    f.write_text("a,b\n1,2\n")
    line = _user_error(capsys, "cases", str(f))
    assert "not a UT tiling CSV" in line and "case_name, expectResult, query_shape" in line


def _st_corpus(tmp_path) -> str:
    f = tmp_path / "st.json"
    f.write_text('[{"id": 7, "name": "tiny", "inputs": []}]')
    return str(f)


def test_cases_case_naming_no_case_is_a_one_line_user_error(capsys, tmp_path):
    """``--case`` with a typo matched nothing and the run reported "0 run, 0 passed", exit 0."""
    line = _user_error(capsys, "cases", _st_corpus(tmp_path), "--case", "7", "--case", "tiyn")
    assert "--case tiyn" in line and "no case of st.json" in line


@pytest.mark.parametrize("option, value, rule", [("--max-gflop", "10", "it is for a redline CSV"),
                                                 ("--arch", "arch35", "it is for an op_host UT CSV")])
def test_cases_option_of_another_corpus_kind_is_a_one_line_user_error(capsys, tmp_path, option, value, rule):
    """``--max-gflop`` (redline CSVs) and ``--arch`` (UT CSVs) on an st corpus were ignored without a word."""
    line = _user_error(capsys, "cases", _st_corpus(tmp_path), option, value)
    assert f"{option} does not apply to an st JSON corpus" in line and rule in line


def test_cases_golden_on_a_ut_csv_is_a_one_line_user_error(capsys, tmp_path):
    f = tmp_path / "x.csv"
    f.write_text("case_name,expectResult,query_shape\n")
    line = _user_error(capsys, "cases", str(f), "--golden", "st")
    assert "--golden does not apply to an op_host UT CSV" in line


@pytest.mark.parametrize("argv, text", [(("run", "--seed", "-1"), "--seed: -1 is not >= 0"),
                                        (("cases", "x.json", "--seed", "-2"), "--seed: -2 is not >= 0"),
                                        (("cases", "x.csv", "--max-gflop", "-1"),
                                         "--max-gflop: -1 is not a positive finite number")])
def test_negative_seed_and_budget_are_one_line_user_errors(capsys, argv, text):
    """``run --seed -1`` printed numpy's "ValueError: expected non-negative integer"; a negative --max-gflop
    skipped every row."""
    assert text in _user_error(capsys, *argv)


def test_help_shows_defaults():
    out = subprocess.run([sys.executable, "-m", "cvtile", "run", "--help"], capture_output=True, text=True,
                         check=True).stdout
    flat = " ".join(out.split())
    for text in ("batch B (default 4)", "(default 16384)", "(default Ascend910B1)", "(default BNSD)",
                 "(default float16)", "(default 0)"):
        assert text in flat, text


def test_run_kv_seqlen_0_passes_with_the_pass_rule_stated(capsys):
    """Regression: the operator returned -3.4e38 for softmax_lse while the golden said +inf. An empty kv
    tensor goes to the empty-tensor template, which writes +inf on every route (golden.fia.empty_row_lse)."""
    code = main(["run", "--kv-seqlen", "0"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "softmax_lse    PASS" in out and "attention_out  PASS" in out
    last = out.rstrip().splitlines()[-1]
    assert last.endswith(": PASS") and "at most 0.50% of its elements outside rtol/atol" in last


def test_check_output_dir_raises_what_mkdir_would_and_makes_nothing(tmp_path):
    """``check_output_dir`` (run before a command's work) refuses what ``mkdir(parents=True, exist_ok=True)``
    refuses, with the same error type, and leaves the file system as it was."""
    from cvtile.cli_options import check_output_dir

    blocker = tmp_path / "file"
    blocker.write_text("")
    for path in (blocker, blocker / "out", blocker / "a" / "b"):
        with pytest.raises(OSError) as checked:
            check_output_dir(path)
        with pytest.raises(OSError) as made:
            path.mkdir(parents=True, exist_ok=True)
        assert type(checked.value) is type(made.value) and checked.value.filename == str(path)
    check_output_dir(tmp_path / "new" / "deeper")
    check_output_dir(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]
