"""The RingAttentionUpdate st corpus (``st/ring_attention_update.json``, 152 TND cases) through the simulator.

Each case's inputs are drawn in its ranges (NaN/±inf fills included), with the operator's contract applied
(8 equal softmax statistics, cumulative ``actual_seq_qlen``), run through ``npu_ring_attention_update`` and
judged against the float64 golden under the tolerance class of the attn dtype (see ``kernels/st_runner``).

* default: three small fp16 cases (one kernel specialisation), one with -inf attn and one with -inf sums;
* ``corpus``: all 152 cases (measured on the 2-core machine: 152 passed, a few minutes once the kernels are
  compiled), ``cvtile cases .../st/ring_attention_update.json``.
"""

from __future__ import annotations

import pytest

from cvtile.kernels.ring_attention_update import npu_ring_attention_update
from cvtile.kernels.st_cases import load_st_cases
from cvtile.kernels.st_runner import RAU_KIND, case_kind, corpus_kind, rau_golden, run_st_corpus

FAST = ("1", "4", "62")
#: passed cases of the whole corpus, measured: may only go up
PASSED_FLOOR = 152


@pytest.fixture(scope="module")
def rau_path(corpus_file):
    return corpus_file("st/ring_attention_update.json")


def test_corpus_is_recognised(rau_path):
    assert corpus_kind(rau_path) is RAU_KIND
    assert all(case_kind(c) is RAU_KIND for c in load_st_cases(rau_path))


def test_fast_sample(rau_path):
    res = run_st_corpus(rau_path, npu_ring_attention_update, golden=rau_golden, select=FAST)
    assert res.summary_line() == f"cases: {len(FAST)} run, {len(FAST)} passed, 0 failed, 0 unsupported, 0 errors", \
        "\n".join(f"{r.id}: {r.status}: {r.reason[:300]}" for r in res.records)
    for r in res.records:
        assert set(r.reports) == {"attn_out", "softmax_max", "softmax_sum"} and r.out == r.reports["attn_out"]


def test_contract_fixups(rau_path):
    import numpy as np

    case = next(c for c in load_st_cases(rau_path) if str(c.id) == "4")
    kw = case.make_inputs(np.random.default_rng(0))
    q = kw["actual_seq_qlen"]
    assert q[0] == 0 and q[-1] == kw["prev_attn_out"].shape[0] and (np.diff(q) >= 0).all()
    assert q.size == case.param("actual_seq_qlen").shape[0]
    m = kw["prev_softmax_max"]
    assert (m == m[..., :1]).all()


@pytest.mark.corpus
def test_whole_corpus(rau_path):
    res = run_st_corpus(rau_path, npu_ring_attention_update, golden=rau_golden)
    print(res.summary_line())
    bad = [r for r in res.records if r.status != "passed"]
    assert res.count("passed") >= PASSED_FLOOR, "\n".join(f"{r.id}: {r.status}: {r.reason[:300]}" for r in bad)
