"""The op_host UT corpus through ``check_fia``: verdict agreement per CSV may only go up (a ratchet).

A row's verdict is SUCCESS iff ``check_fia`` raises no ``ParamError``; it agrees when that matches the
row's ``expectResult``. The whole corpus must also stay cheap (the verdict of both CSVs well under 2 s).
"""

from __future__ import annotations

import csv
import time

import pytest

from cvtile.tiling.errors import ParamError
from cvtile.tiling.params import FiaParams
from cvtile.tiling.platform import ut_platform
from cvtile.tiling.verdict import check_fia

#: rows whose verdict agrees with upstream, per CSV (raise when more agree; never lower)
AGREEING_ROWS = {"arch22": 145, "arch35": 530}
ROWS = {"arch22": 145, "arch35": 530}


def _verdicts(path, arch):
    plat = ut_platform(arch)
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    agree, mismatches = 0, []
    for row in rows:
        params = FiaParams.from_csv_row(row)
        try:
            check_fia(params, plat)
            got, why = "SUCCESS", ""
        except ParamError as e:
            got, why = "FAILED", str(e)
        if got == row["expectResult"]:
            agree += 1
        else:
            mismatches.append(f"{row['case_name']}: expected {row['expectResult']}, got {got} {why}")
    return rows, agree, mismatches


@pytest.mark.parametrize("arch", ["arch22", "arch35"])
def test_verdict_agreement_ratchet(corpus_file, arch):
    path = corpus_file(f"ut_tiling/fia_{arch}.csv")
    rows, agree, mismatches = _verdicts(path, arch)
    assert len(rows) >= ROWS[arch]
    assert agree >= AGREEING_ROWS[arch], "\n".join(mismatches[:20])


def test_verdict_corpus_is_cheap(corpus_file):
    paths = {arch: corpus_file(f"ut_tiling/fia_{arch}.csv") for arch in ("arch22", "arch35")}
    start = time.perf_counter()
    for arch, path in paths.items():
        _verdicts(path, arch)
    assert time.perf_counter() - start < 2.0


def test_verdict_corpus_success_rows_carry_a_route(corpus_file):
    for arch in ("arch22", "arch35"):
        plat = ut_platform(arch)
        with open(corpus_file(f"ut_tiling/fia_{arch}.csv"), newline="") as f:
            for row in csv.DictReader(f):
                if row["expectResult"] != "SUCCESS":
                    continue
                info = check_fia(FiaParams.from_csv_row(row), plat)
                assert info.route is not None and info.route.template, row["case_name"]
