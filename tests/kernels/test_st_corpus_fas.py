"""The FlashAttentionScore st corpora (``st/fas_v3.json``: 3 cases, ``st/fas_varlen_v5.json``: 1 case) through
``flash_attention_score`` (the aclnn V3/V4/varlen parameter set) on the simulated chip.

Measured (2-core machine): fas_v3 3 run, 3 passed; fas_varlen_v5 1 run, 1 passed. The default tier runs the
smallest case (16x16, pse type 0, allMask); the slow tier both whole files (the floors may only go up).
"""

from __future__ import annotations

import pytest

from cvtile.kernels.fas.api import fas_golden_api, flash_attention_score
from cvtile.kernels.st_cases import load_st_cases
from cvtile.kernels.st_runner import FAS_KIND, case_kind, corpus_kind, default_api, golden_for, run_st_corpus

FLOORS = {"st/fas_v3.json": 3, "st/fas_varlen_v5.json": 1}


def _explain(res):
    return "\n".join(f"{r.id}: {r.status}: {r.reason[:300]}" for r in res.records)


def test_the_corpora_are_recognised(corpus_file):
    for rel in FLOORS:
        path = corpus_file(rel)
        assert corpus_kind(path) is FAS_KIND
        assert all(case_kind(c) is FAS_KIND for c in load_st_cases(path))
        assert default_api(path) == "cvtile.kernels.fas.api:flash_attention_score"
    assert golden_for("lowp", kind=FAS_KIND)[0] is fas_golden_api


def test_smallest_case(corpus_file):
    res = run_st_corpus(corpus_file("st/fas_v3.json"), flash_attention_score, golden=fas_golden_api, select=["3"])
    assert res.summary_line() == "cases: 1 run, 1 passed, 0 failed, 0 unsupported, 0 errors", _explain(res)
    assert set(res.records[0].reports) == {"attention_out", "softmax_max", "softmax_sum"}


@pytest.mark.slow
@pytest.mark.parametrize("rel", sorted(FLOORS))
def test_whole_corpus(corpus_file, rel):
    res = run_st_corpus(corpus_file(rel), flash_attention_score, golden=fas_golden_api)
    print(rel, res.summary_line())
    assert res.count("passed") >= FLOORS[rel], _explain(res)
    assert res.count("error") == 0, _explain(res)
