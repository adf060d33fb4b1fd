"""The op_host tiling UT corpora: verdict and tiling-key agreement must not fall below the levels reached.

The constants are a ratchet: raise them when cvtile agrees with more rows, never lower them.
Timing is measured in the report, not asserted here.
"""

from __future__ import annotations

import pytest

from cvtile.tiling.corpus import run_corpus

# (file, arch, verdict agree at least, key agree at least, rows with a checked key)
RATCHET = [
    ("ut_tiling/fia_arch22.csv", "arch22", 145, 36, 36),
    ("ut_tiling/fia_arch35.csv", "arch35", 530, 19, 19),
]


@pytest.mark.parametrize("relpath, arch, verdict_min, key_min, key_rows", RATCHET)
def test_corpus_agreement(corpus_file, relpath, arch, verdict_min, key_min, key_rows):
    result = run_corpus(corpus_file(relpath))
    assert result.arch == arch
    errors = [(r.case, r.error) for r in result.records if r.actual == "ERROR"]
    assert not errors, errors
    assert result.key_rows == key_rows
    assert result.key_agree >= key_min, [(r.case, r.key, r.expected_key) for r in result.mismatches()
                                         if r.key_checked and not r.key_ok]
    assert result.verdict_agree >= verdict_min, result.summary_line()
    assert result.summary_line().startswith(f"cases: {result.run} run, ")


def test_every_accepted_row_obeys_the_task_invariants(corpus_file):
    """Every tiling the corpus produces covers each active block once and keeps the FD fields consistent."""
    from cvtile.tiling import FiaParams, ParamError, ut_platform
    from cvtile.tiling.fia import tile_fia
    import csv

    from cvtile.tiling.validate import tiling_problems

    for relpath, arch in (("ut_tiling/fia_arch22.csv", "arch22"), ("ut_tiling/fia_arch35.csv", "arch35")):
        with open(corpus_file(relpath), newline="") as fh:
            for row in csv.DictReader(fh):
                try:
                    t = tile_fia(FiaParams.from_csv_row(row), ut_platform(arch))
                except ParamError:
                    continue
                assert not tiling_problems(t), (row['case_name'], tiling_problems(t)[:3])
                assert t.key_fields
