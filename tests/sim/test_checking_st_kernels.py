"""FlashAttentionScore's and RingAttentionUpdate's st kernels run under full checking without a report.

Issue 8's rule: no false report of checking mode on any kernel of the library. The FIA kernels are checked on
their default cases (``test_checking_kernels.py``) and the st corpus' rows left to the output init
(``test_checking_rows_left_to_init_regression.py``); these are the other operators' corpora: one st case per
kernel specialisation they launch (the three of ``ring_attention_update.json``, the fp32 one of ``fas_v3.json``,
the TND one of ``fas_varlen_v5.json``), each run as the st runner runs it (its inputs, its golden, its
tolerance) inside ``checked_launches(CheckMode.full())``: every check, program order against pipelined order
bit for bit, write-once judged over the call's launches. The default tier runs the first RAU case and the fp32
FAS one; the other three are in the slow tier (``-m slow``), to keep CI's time. Measured 2026-12-06: every specialisation of these three
corpora, one case per specialisation of ``ifa_v4.json`` and ``pfa_v3.json``, and the 62 ``fia_v4.json`` cases of
the specialisations its 43-case feature sample does not reach ran so without a report.
"""

from __future__ import annotations

import pytest

from cvtile.kernels.st_runner import corpus_kind, default_api, golden_for, load_api, load_cases, run_case
from cvtile.sim import CheckMode, checked_launches

#: (corpus, case index): one case per kernel specialisation; the default tier runs one per corpus kind (RAU's
#: first, FAS's fp32 one), the others are slow (each a cold compile of a checked module, 20-90 s of CPU)
CASES = [("ring_attention_update.json", 0), ("fas_v3.json", 0),
         pytest.param("ring_attention_update.json", 1, marks=pytest.mark.slow),
         pytest.param("ring_attention_update.json", 4, marks=pytest.mark.slow),
         pytest.param("fas_varlen_v5.json", 0, marks=pytest.mark.slow)]


def _case_id(case) -> str:
    name, index = case.values if hasattr(case, "values") else case
    return f"{name.split('.')[0]}-{index}"


@pytest.mark.parametrize("name,index", CASES, ids=[_case_id(c) for c in CASES])
def test_st_kernel_passes_full_checking(corpus_file, name, index):
    path = corpus_file(f"st/{name}")
    golden, _ = golden_for("lowp", kind=corpus_kind(path))
    with checked_launches(CheckMode.full()) as session:
        rec = run_case(load_cases(path)[index], load_api(default_api(path)), golden=golden)
    assert rec.status == "passed", (rec.status, rec.reason, rec.detail)
    assert session.launches >= 1
