"""The Ascend C backend's coverage of the st corpora: every kernel specialisation a corpus launches either lowers
or is refused by name (``AscendCUnsupported`` / ``AscendCError``), never an untyped error; and the counts that
lower only go up (``benchmarks/ascendc_coverage.py`` prints the reasons of the refused ones).

Counts measured on 2026-12-06 (lowering only, no compile): ifa_v4 28 of 28 specialisations, pfa_v3 17 of 17,
fia_v4 114 of 114. Before the same day's lowering of an ``if`` of two streamed matmuls, of a streamed matmul
stored after a check, of int8 <-> fp32 casts and of an int8 B whose N is not a multiple of 32, the plan keeping a
staged L1 operand until its matmul, and base_k kept whole fractals: fia_v4 84 (and before UB tiles with rows that
are not whole 32-byte blocks were lowered: 16, 14 and 59).
RingAttentionUpdate: 3 of 3 (0 before its strided lane-0 loads were lowered); FlashAttentionScore: fas_varlen_v5 1 of
1, fas_v3 3 of 3 (0 before its fp32 P @ V was lowered through the 32-bit LoadDataWithTranspose, the same day).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "ascendc_coverage.py"
#: corpus -> (specialisations, the floor of those that lower)
FLOORS = {"ifa_v4.json": (28, 28), "pfa_v3.json": (17, 17), "fia_v4.json": (114, 114),
          "ring_attention_update.json": (3, 3), "fas_varlen_v5.json": (1, 1), "fas_v3.json": (3, 3)}


def _coverage():
    spec = importlib.util.spec_from_file_location("ascendc_coverage", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("name", [
    "ifa_v4.json", "ring_attention_update.json", "fas_varlen_v5.json", "fas_v3.json",
    pytest.param("pfa_v3.json", marks=pytest.mark.corpus),
    pytest.param("fia_v4.json", marks=pytest.mark.corpus),
])
def test_every_corpus_specialisation_lowers_or_is_refused_by_name(name, corpus_file):
    n, outcomes, bugs = _coverage().lowering(str(corpus_file(f"st/{name}")))
    assert not bugs, bugs
    total, floor = FLOORS[name]
    assert n == total, f"{name}: {n} specialisations (the floor was set for {total}: update FLOORS)"
    assert outcomes["lowered"] >= floor, {k: v for k, v in outcomes.items()}
