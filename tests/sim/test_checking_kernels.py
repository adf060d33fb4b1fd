"""Every kernel of the library and of the examples runs under full checking without a report.

``checked_launches(CheckMode.full())`` around the FusedInferAttentionScore API (its default decode case,
flash-decode and the combine kernel, and its default causal prefill) and around each example's ``main``:
every check on, equivalence included (each launch runs in program order and in pipelined order, compared
bit for bit), write-once judged over all the launches of the call. The outputs equal the unchecked ones.
It compiles the checked variants of both orders of every kernel: the examples are in the slow tier (CI),
the two FIA default cases (about 6 minutes each on 2 busy cores) in the wide tier, run by hand.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

import cvtile
from cvtile.cases import DEFAULT_CASES, make_inputs
from cvtile.sim import CheckMode, checked_launches

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

@pytest.mark.wide
@pytest.mark.parametrize("spec", DEFAULT_CASES, ids=[s.name for s in DEFAULT_CASES])
def test_the_fia_default_cases_pass_full_checking(spec):
    q, k, v, kw = make_inputs(spec)
    want = cvtile.npu_fused_infer_attention_score(q, k, v, target=spec.target, **kw)
    with checked_launches(CheckMode.full()) as session:
        got = cvtile.npu_fused_infer_attention_score(q, k, v, target=spec.target, **kw)
    assert session.launches >= 1
    for a, b in zip(want, got):
        assert np.array_equal(np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8))


def _example(path: Path):
    spec = importlib.util.spec_from_file_location(f"cvtile_example_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


#: examples whose full checking runs an operator-sized kernel (minutes): the wide tier
_WIDE_EXAMPLES = {"06_attention_variants"}


@pytest.mark.slow
@pytest.mark.parametrize("script", [pytest.param(p, marks=pytest.mark.wide) if p.stem in _WIDE_EXAMPLES else p
                                    for p in sorted(EXAMPLES.glob("[0-9][0-9]_*.py"))], ids=lambda p: p.stem)
def test_every_example_passes_full_checking(script, capsys):
    module = _example(script)
    with checked_launches(CheckMode.full()):
        assert module.main() == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("PASS: ")
