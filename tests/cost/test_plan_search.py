"""Plan search (issue 8, item 7): op_host's FusedInferAttentionScore plan against its neighbours (per route:
M / S2 bases halved and doubled, core counts, the legacy IFA route's flash-decode split count, the preload
depth one step either way), timed by the cost model; ``cvtile tiling --compare``. The cost model runs on the
compiled IR only, so a search takes seconds."""

from __future__ import annotations

import numpy as np
import pytest

from cvtile.cli import main
from cvtile.kernels.fia.launch import kernel_platform
from cvtile.kernels.fia.plan_search import search_plans
from cvtile.tiling.fia import tile_fia
from cvtile.kernels.fia.api import plan_call

PREFILL = dict(num_heads=4, num_key_value_heads=2, input_layout="BNSD", scale=0.125)


def _prefill():
    rng = np.random.default_rng(0)
    q = rng.uniform(-1, 1, (1, 4, 512, 64)).astype(np.float16)
    k = rng.uniform(-1, 1, (1, 2, 1024, 64)).astype(np.float16)
    return q, k, k.copy()


@pytest.fixture(scope="module")
def prefill_search():
    q, k, v = _prefill()
    return search_plans(q, k, v, target="Ascend910B1", **PREFILL)


def test_op_hosts_plan_is_timed_beside_its_distinct_neighbours(prefill_search):
    s = prefill_search
    legal = [p for p in s.plans if p.legal]
    assert s.op_host in s.plans and s.op_host.overrides == {} and s.op_host.legal
    assert len(legal) > 5 and all(p.estimated_us > 0 for p in legal)
    assert s.best.estimated_us == min(p.estimated_us for p in legal) <= s.op_host.estimated_us
    assert s.op_host_over_best == pytest.approx(s.op_host.estimated_us / s.best.estimated_us)
    sigs = [(p.m_base, p.s2_base, p.cores, p.preload) for p in legal]
    assert len(sigs) == len(set(sigs)), "a plan was timed twice"
    assert {p.m_base for p in legal} >= {s.op_host.m_base // 2, s.op_host.m_base}
    doc = s.to_dict()
    assert doc["op_host"]["overrides"] == {} and doc["best"]["estimated_us"] > 0
    assert "op_host" in s.format() and "preload" in s.format()


def test_the_preload_depth_is_searched_and_too_few_slots_is_illegal(prefill_search):
    s = prefill_search
    platform_depth = s.op_host.preload
    assert platform_depth == 2
    deeper = [p for p in s.plans if p.overrides == {"preload_depth": 3}]
    assert len(deeper) == 1 and deeper[0].legal and deeper[0].preload == 3
    shallow = [p for p in s.plans if p.overrides == {"preload_depth": 1}]
    assert len(shallow) == 1 and not shallow[0].legal
    assert "preload depth exceeds the slots" in shallow[0].error


def test_a_preload_override_compiles_for_a_platform_of_its_own():
    q, k, v = _prefill()
    _, tiling = plan_call(query=q, key=k, value=v, **PREFILL)
    assert kernel_platform(tiling).name == "Ascend910B1"
    from cvtile.tiling.params import FiaParams, TensorMeta

    metas = {"query": TensorMeta(q.shape, "float16"), "key": TensorMeta(k.shape, "float16"),
             "value": TensorMeta(v.shape, "float16"), "attention_out": TensorMeta(q.shape, "float16")}
    attrs = dict(PREFILL, softmax_lse_flag=False)
    deep = tile_fia(FiaParams.from_api(metas, attrs), "Ascend910B1", {"preload_depth": 3})
    assert deep.extras["preload_depth"] == 3 and deep.decision("preload_depth").value == 3
    plat = kernel_platform(deep)
    assert plat.preload_depth == 3 and plat.name == "Ascend910B1+preload3" and plat.aic == 24
    with pytest.raises(ValueError, match="preload_depth must be at least 1"):
        tile_fia(FiaParams.from_api(metas, attrs), "Ascend910B1", {"preload_depth": 0})


def test_the_legacy_ifa_route_searches_its_flash_decode_split_and_s_inner():
    """An int8 KV-antiquant decode on the legacy IFA route: op_host runs it without FD; the search times it
    with 2 and with every KV split op_host's rule allows (12 per (b, n2) unit over the 48 vector cores), and
    at half op_host's sInner."""
    rng = np.random.default_rng(1)
    q = rng.uniform(-1, 1, (2, 8, 1, 128)).astype(np.float16)
    k = rng.integers(-127, 128, (2, 2, 512, 128)).astype(np.int8)
    s = search_plans(q, k, k.copy(), target="Ascend910B1", num_heads=8, num_key_value_heads=2,
                     input_layout="BNSD", scale=128 ** -0.5, antiquant_scale=np.full((2, 2, 1, 128), 0.01,
                                                                                    np.float16))
    assert s.searched and not s.note and s.op_host.tiling.route == "ifa"
    assert not s.op_host.fd and s.op_host.kv_splits == 1
    legal = [p for p in s.plans if p.legal]
    assert {p.kv_splits for p in legal} >= {1, 2, 12}
    two = [p for p in legal if p.overrides.get("kv_splits") == 2]     # parts of 256: sInner 256, 512 and 1024
    assert len(two) == 1 and two[0].fd and two[0].cores == 2 * 2 * 2   # clip to one plan, timed once
    assert any(p.s2_base == s.op_host.s2_base // 2 and not p.fd for p in legal)
    assert "splits" in s.format() and s.to_dict()["route"] == "ifa/IFATiling"


def test_a_planner_without_overrides_is_named_and_only_the_preload_is_searched():
    from types import SimpleNamespace

    from cvtile.kernels.fia.plan_search import _planner_candidates
    from cvtile.tiling.platform import get_platform

    empty = SimpleNamespace(arch="arch22", route="fia", template="FiaTilingEmptyTensor")
    got, note = _planner_candidates(empty, get_platform("Ascend910B1"))
    assert got == [] and "arch22 fia/FiaTilingEmptyTensor planner reads no overrides" in note


def test_cli_tiling_compare_prints_the_table(capsys):
    code = main(["tiling", "--compare", "--batch", "1", "--num-heads", "4", "--num-kv-heads", "2", "--q-seqlen",
                 "512", "--kv-seqlen", "1024", "--head-dim", "64"])
    out = capsys.readouterr().out
    assert code == 0
    assert "plan search (cost model):" in out and "op_host" in out and "preload" in out


def test_a_candidate_the_cost_model_deadlocks_on_is_named_apart_from_the_illegal_ones(monkeypatch):
    """A candidate whose programs the cost model deadlocks on is no verdict on the plan: the search lists it as
    dropped by the model (``dropped == "deadlock"``), counts and names it in its note, and never as illegal."""
    from cvtile.kernels.fia import plan_search
    from cvtile.sim.cost import ModelDeadlock

    real = plan_search.fia_cost

    def deadlocks_deeper(q, k, v, *, overrides=None, **kw):
        if overrides == {"preload_depth": 3}:
            raise ModelDeadlock("cost model: deadlock in core group 0: aic waits on flag X (id 1) at k.py:1")
        return real(q, k, v, overrides=overrides, **kw)

    monkeypatch.setattr(plan_search, "fia_cost", deadlocks_deeper)
    monkeypatch.setattr(plan_search, "_planner_candidates", lambda t, plat: ([], "preload depth only (test)"))
    q, k, v = _prefill()
    s = search_plans(q, k, v, target="Ascend910B1", **PREFILL)
    deep = [p for p in s.plans if p.overrides == {"preload_depth": 3}]
    assert len(deep) == 1 and not deep[0].legal and deep[0].dropped == "deadlock"
    assert s.model_dropped == deep
    shallow = [p for p in s.plans if p.overrides == {"preload_depth": 1}]
    assert shallow[0].dropped == "illegal" and shallow[0] not in s.model_dropped
    assert "1 candidate the cost model could not time (not counted as illegal): preload_depth=3 (deadlock)" in s.note
    assert s.to_dict()["model_dropped"][0]["dropped"] == "deadlock"
    assert "preload_depth=3: not timed, cost model deadlock" in s.format()
    assert "preload_depth=1: illegal" in s.format()
