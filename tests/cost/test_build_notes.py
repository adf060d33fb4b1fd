"""The cost report of an operator call says where cvtile's build runs it otherwise than the chip's kernel
(``kernels.fia.cost.build_notes``): the legacy IFA route's perf modes that give each vector core a (b, n2) unit of
its own have op_host launch half as many core groups as units, while cvtile's kernel takes a unit per group and
runs them in more waves. The plan search carries the note of op_host's plan."""

from __future__ import annotations

import numpy as np

from cvtile.kernels.fia.cost import fia_cost
from cvtile.kernels.fia.plan_search import search_plans

B, NQ, NKV, S2, D = 16, 32, 8, 1024, 128


def _int8_decode():
    """An int8 KV-antiquant decode on the legacy IFA route: 128 (b, n2) units over the 48 vector cores."""
    q = np.zeros((B, 1, NQ * D), np.float16)
    k = np.zeros((B, S2, NKV * D), np.int8)
    scale = np.ones((1, NKV * D), np.float16)
    kw = dict(num_heads=NQ, num_key_value_heads=NKV, input_layout="BSH", antiquant_scale=np.stack([scale, scale])[:, 0])
    return q, k, kw


def test_a_unit_per_vector_core_plan_is_noted_as_more_waves_than_the_chip():
    q, k, kw = _int8_decode()
    rep = fia_cost(q, k, k, target="Ascend910B1", record="none", **kw)
    t, main = rep.tiling, rep.launches[0]
    assert t.route == "ifa" and t.decision("perf_mode").value == 0
    assert main.grid == t.used_cores == 48 and t.block_dim == 24 and main.waves == 2
    [note] = rep.notes
    assert "2 waves" in note and "24 core groups (perf mode 0), 1 wave(s)" in note
    assert rep.to_dict()["notes"] == [note] and f"note: {note}" in rep.summary()
    search = search_plans(q, k, k, target="Ascend910B1", **kw)
    assert search.op_host.notes == [note] and note in search.note


def test_a_call_the_build_runs_as_the_chip_has_no_note():
    q = np.zeros((4, 32, 1, D), np.float16)
    k = np.zeros((4, 8, S2, D), np.float16)
    rep = fia_cost(q, k, k, target="Ascend910B1", record="none", num_heads=32, num_key_value_heads=8,
                   input_layout="BNSD")
    assert rep.notes == [] and rep.launches[0].waves == 1 and "note:" not in rep.summary()
