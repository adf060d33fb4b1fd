"""A group step's span template (``group_memo.span_template``) reads a replayed inner step from its own template,
without making its spans: the template is the one naming every made span gives (the reference below), on FIA
calls whose outer steps hold replayed inner steps."""

from __future__ import annotations

import cvtile.sim.cost.group_memo as group_memo
from cvtile.kernels.fia.cost import fia_cost
from cvtile.sim.cost.spans import Replayed, spans_of

import numpy as np
import pytest

from .test_group_memo import GQA, _cost

#: a prefill whose task steps hold several S2 steps, replayed inside them
PREFILL = dict(args=((1, 8, 2048, 128), (1, 1, 8192, 128), np.float16), kw=dict(
    num_heads=8, num_key_value_heads=1, input_layout="BNSD", scale=0.125))


def _reference(clocks, alive, lens, old, ref, now_held):
    """The template with every span made (``spans_of``) and each cause named by identity."""
    since = {n: spans_of(clocks[n].spans[lens[n]:]) for n in alive}
    new = {id(s): (n, j) for n in alive for j, s in enumerate(since[n])}
    slot = group_memo.slots(old)

    def name(s):
        if s is None:
            return None
        if id(s) in new:
            return ("n", *new[id(s)])
        if id(s) in slot:
            return ("o", slot[id(s)])
        raise group_memo.NoTemplate

    made = {n: tuple((s.pipe, s.start - ref, s.end - ref, s.op, name(s.cause), s.flow) for s in since[n])
            for n in alive}
    return made, tuple(name(s) for s in now_held)


@pytest.mark.parametrize("call", [GQA, PREFILL], ids=["gqa", "prefill"])
def test_span_template_is_that_of_the_made_spans(call, monkeypatch):
    real = group_memo.span_template
    checked = []

    def both(clocks, alive, lens, old, ref, now_held):
        nested = any(type(e) is Replayed for n in alive for e in clocks[n].spans[lens[n]:])
        try:
            got = real(clocks, alive, lens, old, ref, now_held)
        except group_memo.NoTemplate:
            got = None
        try:
            want = _reference(clocks, alive, lens, old, ref, now_held)
        except group_memo.NoTemplate:
            want = None
        assert got == want
        checked.append(nested)
        if got is None:
            raise group_memo.NoTemplate
        return got

    monkeypatch.setattr(group_memo, "span_template", both)
    if call is PREFILL:         # every distinct block once (block_memo): the critical block's steps are replayed
        qs, ks, dt = call["args"]
        k = np.zeros(ks, dt)
        fia_cost(np.zeros(qs, np.float16), k, k.copy(), target="Ascend910B1", record="critical", **call["kw"])
    else:
        _cost(call, "critical", True, monkeypatch, [])
    assert checked
    if call is PREFILL:
        assert any(checked), "no template held a replayed inner step: the test does not exercise it"
