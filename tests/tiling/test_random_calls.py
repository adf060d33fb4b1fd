"""The random-call generator (``tiling.random_calls``) and the mirror on its calls: deterministic rows, every
column present, and on 1,500 calls per arch the mirror answers each with a tiling or a typed ParamError
(any other exception is a mirror bug; this is how the PFA empty-tensor crash was found); the MLA calls with an
NZ cache are there and reach the legacy IFA route's MLA mode."""

from __future__ import annotations

import csv

import pytest

from cvtile.tiling.errors import ParamError
from cvtile.tiling.oracle import cvtile_record
from cvtile.tiling.params import FiaParams
from cvtile.tiling.random_calls import header, random_rows, write_rows


def _corpus(corpus_file, arch):
    with open(corpus_file(f"ut_tiling/fia_{arch}.csv"), newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize("arch", ["arch22", "arch35"])
def test_rows_are_a_pure_function_of_the_seed(arch, corpus_file):
    corpus = _corpus(corpus_file, arch)
    a = random_rows(arch, 300, seed=7, corpus_rows=corpus)
    b = random_rows(arch, 300, seed=7, corpus_rows=corpus)
    c = random_rows(arch, 300, seed=8, corpus_rows=corpus)
    assert a == b
    assert a != c
    assert all(list(r) == header(arch) for r in a)
    assert len({r["case_name"] for r in a}) == 300


def test_written_rows_read_back(tmp_path, corpus_file):
    rows = random_rows("arch35", 50, seed=1, corpus_rows=_corpus(corpus_file, "arch35"))
    path = write_rows(rows, tmp_path / "rows.csv", "arch35")
    with open(path, newline="") as fh:
        assert list(csv.DictReader(fh)) == rows


@pytest.mark.parametrize("arch", ["arch22", "arch35"])
def test_the_mirror_answers_every_random_call_with_a_tiling_or_a_typed_error(arch, corpus_file):
    rows = random_rows(arch, 1500, seed=0, corpus_rows=_corpus(corpus_file, arch))
    got = [cvtile_record(r, arch) for r in rows]
    errors = [(r["case_name"], g["error"]) for r, g in zip(rows, got) if g["got"] == "ERROR"]
    assert errors == []
    accepted = sum(g["got"] == "SUCCESS" for g in got)
    # the synthetic half is built to be mostly valid: a generator that only makes garbage tests nothing
    assert accepted > 0.15 * len(rows)
    for r in rows[:200]:
        try:
            FiaParams.from_csv_row(r)
        except ParamError:
            pass


def test_mla_calls_with_an_nz_cache_are_generated_and_many_are_accepted(corpus_file):
    """About 3% of the rows are MLA calls with a paged NZ cache (the corpora have none), from streams of their
    own; on arch22 a good share of them plan on the legacy IFA route's MLA perf mode 5 (balanced or not)."""
    rows = random_rows("arch22", 3000, seed=0, corpus_rows=_corpus(corpus_file, "arch22"))
    mla_nz = [r for r in rows if r["query_rope_shape"] and len(r["key_shape"].split()) == 5]
    assert 0.02 * len(rows) < len(mla_nz) < 0.04 * len(rows)
    got = [cvtile_record(r, "arch22") for r in mla_nz]
    ifa = [g for g in got if g["got"] == "SUCCESS" and g["route"] == "ifa/IFATiling"]
    assert len(ifa) > 0.25 * len(mla_nz)
    assert {g["tiling_key"] // 10 ** 15 % 10 for g in ifa} == {5}
    assert {g["tiling_key"] // 10 ** 9 % 10 for g in ifa} == {0, 1}
