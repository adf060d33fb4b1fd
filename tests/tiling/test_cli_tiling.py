"""The ``cvtile tiling`` / ``cvtile cases`` command functions."""

from __future__ import annotations

import argparse
import json

from cvtile.cli_tiling import add_tiling_parser, build_params, run_tiling, run_ut_cases


def parse(argv):
    parser = argparse.ArgumentParser()
    add_tiling_parser(parser.add_subparsers(dest="cmd"))
    return parser.parse_args(["tiling", *argv])


def test_tiling_prints_template_key_blocks_and_fd(capsys):
    args = parse(["--batch", "4", "--num-heads", "32", "--num-kv-heads", "8", "--q-seqlen", "1",
                  "--kv-seqlen", "4096"])
    assert args.func is run_tiling and run_tiling(args) == 0
    out = capsys.readouterr().out
    for text in ("FiaTilingNonQuant", "103000000000400000", "M base 64", "S2 base 4096", "cores used  : 16",
                 "flash decode: off", "min(G/5,2)"):
        assert text in out


def test_tiling_json_and_rejection(capsys):
    assert run_tiling(parse(["--json", "-b", "1", "-n", "8", "--num-kv-heads", "1", "--kv-seqlen", "32768"])) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["fd"] and d["fd_tasks"][0]["splits"] == 8
    assert run_tiling(parse(["--num-heads", "32", "--num-kv-heads", "7"])) == 1
    assert "rejected" in capsys.readouterr().out


def test_tiling_of_a_kv_antiquant_cache(capsys):
    """``--kv-dtype``: int8/int4 key/value with per-channel (2, Nkv, 1, D) antiquant parameters route a decode to
    IFATiling, the int4 dtype code (4) in its key."""
    p = build_params(parse(["--kv-dtype", "int4", "-b", "2", "-n", "8"]))
    assert p.key.dtype == p.value.dtype == "int4" and p.antiquant_scale.shape == (2, 8, 1, 128)
    assert run_tiling(parse(["--json", "--kv-dtype", "int4", "-b", "2", "-n", "8", "--kv-seqlen", "2048"])) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["template"] == "IFATiling" and str(d["tiling_key"])[-3:-2] == "4"
    assert run_tiling(parse(["--json", "--kv-dtype", "int8", "-b", "2", "-n", "8", "--kv-seqlen", "2048"])) == 0
    assert str(json.loads(capsys.readouterr().out)["tiling_key"])[-3:-2] == "3"


def test_build_params_paged_and_tnd():
    p = build_params(parse(["--layout", "TND", "--block-size", "128", "--kv-seqlen", "1000", "-b", "2"]))
    assert p.block_table.shape == (2, 8) and p.actual_seq_lengths.data == (1, 2)
    assert p.actual_seq_lengths_kv.data == (1000, 1000)


def test_cases_prints_the_summary_line(corpus_file, capsys):
    rc = run_ut_cases(corpus_file("ut_tiling/fia_arch35.csv"))
    out = capsys.readouterr().out.strip().splitlines()
    assert rc == 0 and out[-1].startswith("cases: 530 run, ")


def test_num_kv_heads_0_is_torch_npus_as_many_as_num_heads():
    """``--num-kv-heads 0`` silently became the default 8 (``args.num_kv_heads or 8``); torch_npu's 0 means as
    many KV heads as query heads: the attribute op_host reads stays 0 and the key has N heads."""
    from cvtile.cli_call import build_call

    tensors, attrs = build_call(parse(["--num-heads", "12", "--num-kv-heads", "0"]))
    assert attrs["num_key_value_heads"] == 0 and tensors["key"].shape == (4, 12, 4096, 128)


def test_value_head_dim_0_is_refused(capsys):
    """``--value-head-dim 0`` silently meant "as head-dim" (``args.value_head_dim or d``)."""
    import pytest

    from cvtile.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["tiling", "--value-head-dim", "0"])
    assert exc.value.code == 2 and "--value-head-dim: 0 is not positive" in capsys.readouterr().err


def test_tiling_says_when_tnd_cumulative_lengths_decrease(capsys):
    """``cvtile tiling --layout TND --actual-q 5 3`` showed batch 1 with query length -2 without a word: the
    split-fuse route plans it as op_host does (it does not check), and the decision now says so, and that the
    API refuses the call."""
    assert run_tiling(parse(["--layout", "TND", "--actual-q", "5", "3", "--actual-kv", "10", "10"])) == 0
    out = capsys.readouterr().out
    assert "'q': [5, -2]" in out
    assert "the cumulative lengths decrease (query of batch 1 is -2)" in out and "API refuses the call" in out
