"""The critical path (``sim/cost/critical_path``): walked a replayed group step at a time (``spans.Replayed``), it
is bit for bit the path of following every span's cause, and its top lines are the same in the same order."""

from __future__ import annotations

from collections import defaultdict
from operator import attrgetter

import numpy as np
import pytest

from cvtile.kernels.fia.cost import fia_cost
from cvtile.sim.cost.chrome_trace import short_loc
from cvtile.sim.cost.report import categorise
from cvtile.sim.cost.spans import LazySpan

from .test_group_memo import GQA

#: a prefill of many tasks per block: its critical block replays task-loop steps
PREFILL = dict(args=((16, 8, 256, 128), (16, 8, 256, 128), np.float16), kw=dict(
    num_heads=8, num_key_value_heads=8, input_layout="BNSD", scale=1.0))


def span_by_span(spans: list) -> tuple:
    """The path as following every span gives it (the walk ``estimate`` made before segments)."""
    path = {"cube": 0.0, "vector": 0.0, "memory": 0.0, "sync": 0.0, "scalar": 0.0}
    by_line: dict = defaultdict(float)
    meta: dict = {}
    cur = max(spans, key=attrgetter("end"))
    while cur is not None:
        dur = cur.end - cur.start
        path["sync" if cur.flow is not None else categorise(cur.pipe)] += dur
        key = short_loc(cur.op.loc if cur.op is not None else None)
        by_line[key] += dur
        meta[key] = (cur.op.kind if cur.op is not None else "?", cur.pipe)
        prev = cur.cause
        gap = cur.start - (prev.end if prev is not None else 0.0)
        if gap > 0:
            via_sync = cur.flow is not None or (prev is not None and prev.role != cur.role) or \
                (prev is not None and prev.pipe != cur.pipe and prev.op is not cur.op)
            path["sync" if via_sync else "scalar"] += gap
        cur = prev
    top = sorted(by_line.items(), key=lambda kv: -kv[1])[:8]
    return path, [(c, line, *meta[line]) for line, c in top]


@pytest.mark.parametrize("call", [PREFILL, GQA], ids=["prefill", "gqa"])
def test_the_path_by_replayed_steps_is_the_path_span_by_span(call):
    qs, ks, kdt = call["args"]
    q, k = np.zeros(qs, np.float16), np.zeros(ks, kdt)
    rep = fia_cost(q, k, k.copy(), target="Ascend910B1", record="critical", **call["kw"])
    lc = rep.launches[0]
    spans = lc.recorded[0][2]
    if call is PREFILL:
        assert any(type(s) is LazySpan for s in spans), "no replayed step: the test exercises no segment"
    assert (lc.path, lc.path_lines) == span_by_span(spans)
