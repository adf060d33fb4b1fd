"""``cvtile tiling --mask-mod SPEC``: the block map a variant's mask_mod gives the tiling (no kernel runs)."""

from __future__ import annotations

import json

from cvtile.cli import main

PREFILL = ["--batch", "1", "--num-heads", "8", "--num-kv-heads", "8", "--q-seqlen", "4096", "--kv-seqlen", "4096"]


def test_tiling_shows_the_block_map_density_of_a_sliding_window(capsys):
    assert main(["tiling", *PREFILL, "--mask-mod", "sliding_window:256"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("sliding_window:256: block map:") and "% dense" in last and "skipped" in last
    assert main(["tiling", *PREFILL, "--mask-mod", "causal", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)["block_map"]
    # causal at S1 = S2: about half the blocks (plus the diagonal) are visited, the diagonal ones partial
    assert 0.5 <= doc["density"] < 0.7 and 0 < doc["full"] < doc["visited"] < doc["total"]


def test_tiling_mask_mod_user_errors_exit_2_with_one_line(capsys):
    assert main(["tiling", "--mask-mod", "no_such_variant"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a gallery entry" in err[0]
    assert main(["tiling", "--mask-mod", "sliding_window:wide"]) == 2
    assert "is not a number" in capsys.readouterr().err
