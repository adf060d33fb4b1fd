"""Opt-in: random calls through the tiling mirror and the real op_host tiling (built on x86 from the public
sources; ``CVTILE_OPHOST_ORACLE`` names the build dir or the ``fia_oracle`` binary; nothing of it is in this
project). ``CVTILE_ORACLE_ROWS`` sets the calls per arch (default 2,000; the issue's target is 10,000),
``CVTILE_ORACLE_SEED`` the generator's seed (default 0).

Each field's disagreements must stay at or below the ratchet (what the mirror reached when it was last
measured: lower it as rules land, never raise it); a cvtile exception other than ParamError fails at once.
The calls include the generator's MLA calls with a paged NZ cache (3%); on arch22 op_host must accept some
of them, so that the legacy IFA route's MLA perf mode (flash decode, the balanced split) is compared.
The comparison is written to ``CVTILE_ORACLE_REPORT`` (a directory) when it is set."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest

from cvtile.tiling.oracle import FIELDS, compare_rows, find_oracle, run_oracle
from cvtile.tiling.random_calls import random_rows

ORACLE = find_oracle()
pytestmark = pytest.mark.skipif(ORACLE is None, reason="CVTILE_OPHOST_ORACLE does not point at a built oracle")

#: disagreements (verdict, key, block_dim, workspace) as last measured, by (seed, calls); another count is held
#: to the seed's 10,000 figures scaled up. Seeds 0 to 4 are at 0 everywhere (measured again with the MLA-NZ
#: calls in the generator, after the legacy IFA MLA perf-mode fix).
_ZERO = {"verdict": 0, "key": 0, "block_dim": 0, "workspace": 0}
RATCHET = {(0, 2000): {"arch22": _ZERO, "arch35": _ZERO},
           (0, 10000): {"arch22": _ZERO, "arch35": _ZERO},
           (1, 10000): {"arch22": _ZERO, "arch35": _ZERO},
           (2, 10000): {"arch22": _ZERO, "arch35": _ZERO},
           (3, 10000): {"arch22": _ZERO, "arch35": _ZERO},
           (4, 10000): {"arch22": _ZERO, "arch35": _ZERO}}


def _mla_nz(row: dict) -> bool:
    return bool(row["query_rope_shape"].strip()) and len(row["key_shape"].split()) == 5


def _allowed(seed: int, n: int, arch: str, what: str) -> float:
    if (seed, n) in RATCHET:
        return RATCHET[seed, n][arch][what]
    return RATCHET[seed if (seed, 10000) in RATCHET else 1, 10000][arch][what] * max(n / 10000, 1)


@pytest.mark.parametrize("arch", ["arch22", "arch35"])
def test_mirror_against_op_host(arch, corpus_file):
    n = int(os.environ.get("CVTILE_ORACLE_ROWS", "2000"))
    seed = int(os.environ.get("CVTILE_ORACLE_SEED", "0"))
    with open(corpus_file(f"ut_tiling/fia_{arch}.csv"), newline="") as fh:
        corpus = list(csv.DictReader(fh))
    rows = random_rows(arch, n, seed=seed, corpus_rows=corpus)
    ophost = run_oracle(ORACLE, rows, arch)
    cmp = compare_rows(rows, arch, ophost, ORACLE)
    report = os.environ.get("CVTILE_ORACLE_REPORT")
    if report:
        Path(report).mkdir(parents=True, exist_ok=True)
        (Path(report) / f"oracle_{arch}.json").write_text(json.dumps(cmp.to_dict(), indent=1))
    print(cmp.summary_line())
    errors = [d.case for d in cmp.diffs if d.cvtile.get("got") == "ERROR"]
    assert errors == [], f"cvtile raised a non-ParamError on {errors[:5]}"
    if arch == "arch22" and n >= 2000:
        accepted = [r["case_name"] for r in rows if _mla_nz(r) and ophost[r["case_name"]].get("got") == "SUCCESS"]
        assert accepted, "op_host accepted none of the MLA calls with an NZ cache"
    for what in FIELDS:
        assert cmp.disagreements(what) <= _allowed(seed, n, arch, what), (what, cmp.summary_line())
