"""Plan-search overrides on every route the plan search covers (``tiling.plan_overrides``): an override changes
the tiling the way asked and through op_host's own machinery (the split, the FD plan, the workspace and the key
follow), a value a rule forbids or a planner that reads no overrides is refused naming the parameter and the
rule, and op_host's plan without overrides is the one it always was (keys and launches pinned)."""

from __future__ import annotations

from itertools import accumulate

import pytest

from cvtile.tiling import FiaParams, TensorMeta
from cvtile.tiling.errors import ParamError, UnsupportedPlanOverride
from cvtile.tiling.fia import tile_fia
from cvtile.tiling.validate import assert_valid

T = TensorMeta
B1 = "Ascend910B1"


def ifa_decode(b=1, n=4, s2=16384, d=256):
    """An fp16 MHA decode with D 256: the legacy IFA route, all-vector perf mode (48 split cores)."""
    q, kv = T((b, n, 1, d), "float16"), T((b, n, s2, d), "float16")
    return FiaParams.from_api(dict(query=q, key=kv, value=kv, attention_out=q),
                              dict(num_heads=n, num_key_value_heads=n, input_layout="BNSD"))


def fai_tnd(q_lens, kv_lens, *, n=8, nkv=2, d=64, paged_bs=0):
    """A TND call the split-fuse route takes (KV cumulative, or per batch in a paged cache)."""
    tq = sum(q_lens)
    tensors = {"query": T((tq, n, d), "float16"), "attention_out": T((tq, n, d), "float16"),
               "actual_seq_lengths": list(accumulate(q_lens))}
    attrs = dict(num_heads=n, num_key_value_heads=nkv, input_layout="TND")
    if paged_bs:
        blocks = [-(-k // paged_bs) for k in kv_lens]
        cache = T((sum(blocks), paged_bs, nkv * d), "float16")
        tensors.update(key=cache, value=cache, block_table=T((len(kv_lens), max(blocks)), "int32"),
                       actual_seq_lengths_kv=list(kv_lens))
        attrs["block_size"] = paged_bs
    else:
        kv = T((sum(kv_lens), nkv, d), "float16")
        tensors.update(key=kv, value=kv, actual_seq_lengths_kv=list(accumulate(kv_lens)))
    return FiaParams.from_api(tensors, attrs)


def pfa_antiquant():
    """An fp16 prefill on an int8 cache (BSH): the legacy PFA route."""
    return FiaParams.from_api(dict(query=T((2, 128, 1024), "float16"), key=T((2, 512, 1024), "int8"),
                                   value=T((2, 512, 1024), "int8"), antiquant_scale=T((2, 1024), "float16"),
                                   attention_out=T((2, 128, 1024), "float16")), dict(num_heads=8, input_layout="BSH"))


def mla_decode():
    """Split-rope MLA decode on a paged cache: arch22 FiaTilingNonQuantMla."""
    return FiaParams.from_api(dict(query=T((2, 1, 32, 512), "bfloat16"), key=T((8, 128, 512), "bfloat16"),
                                   value=T((8, 128, 512), "bfloat16"), attention_out=T((2, 1, 32, 512), "bfloat16"),
                                   query_rope=T((2, 1, 32, 64), "bfloat16"), key_rope=T((8, 128, 64), "bfloat16"),
                                   block_table=T((2, 4), "int32"), actual_seq_lengths_kv=[300, 512]),
                              dict(num_heads=32, num_key_value_heads=1, input_layout="BSND", block_size=128))


def gqa_prefill():
    q, kv = T((2, 8, 512, 128), "float16"), T((2, 2, 1024, 128), "float16")
    return FiaParams.from_api(dict(query=q, key=kv, value=kv, attention_out=q),
                              dict(num_heads=8, num_key_value_heads=2, input_layout="BNSD"))


def _launch(t):
    return (t.route, t.template, t.tiling_key, t.block_dim, t.used_cores, t.m_base, t.s2_base, t.fd, t.kv_splits,
            t.workspace_bytes)


# ------------------------------------------------------------------------------------------------ op_host's plan
#: op_host's plans, pinned before the overrides were threaded through the planners: (route, template, key,
#: block_dim, used cores, M base, S2 base, FD, KV splits, workspace bytes)
OP_HOST = [
    (ifa_decode, B1, ("ifa", "IFATiling", 11000000000100000, 24, 48, 1, 1366, True, 12, 16829440)),
    (lambda: ifa_decode(b=8, s2=4096), B1, ("ifa", "IFATiling", 11000000000000000, 16, 32, 1, 4096, False, 0,
                                             16777216)),
    (lambda: fai_tnd([1] * 30, [8] * 30, n=15, nkv=3), B1,
     ("fai", "FlashAttentionInferSplitFuse", 5000000000000200100, 24, 24, 128, 512, False, 0, 92274688)),
    (pfa_antiquant, B1, ("pfa", "PromptFlashAttentionTiling", 0, 16, 16, 256, 512, False, 0, 0)),
    (gqa_prefill, "Ascend950", ("fia", "FiaTilingNonQuantArch35", 34492121856, 32, 32, 128, 128, False, 0,
                                16777216)),
]


@pytest.mark.parametrize("make, target, expected", OP_HOST, ids=["ifa_fd", "ifa_bn", "fai", "pfa", "arch35"])
def test_op_hosts_plan_without_overrides_is_unchanged(make, target, expected):
    t = tile_fia(make(), target)
    assert _launch(t) == expected
    assert tile_fia(make(), target, {}).tiling_key == t.tiling_key


# ------------------------------------------------------------------------------------------------ legacy IFA
def test_ifa_kv_splits_sets_the_flash_decode_split_and_the_launch_follows():
    base = tile_fia(ifa_decode(), B1)
    assert base.fd and base.kv_splits == 12
    t = tile_fia(ifa_decode(), B1, {"kv_splits": 3})
    assert t.fd and t.kv_splits == 3 and {ft.splits for ft in t.fd_tasks} == {3}
    assert t.used_cores == 4 * 3 and t.decision("kv_splits").value == 3
    assert "plan search override" in t.decision("kv_splits").rule
    assert t.s2_base == 5462           # op_host's sInner for G 1 (8192) clipped to a part: ceil(16384 / 3)
    assert t.workspace_bytes < base.workspace_bytes     # FD partials for 3 splits, not 12
    assert t.tiling_key == base.tiling_key
    assert_valid(t)


def test_ifa_one_kv_split_turns_flash_decode_off():
    t = tile_fia(ifa_decode(), B1, {"kv_splits": 1})
    assert not t.fd and not t.fd_tasks and t.used_cores == 4
    assert t.key_fields != tile_fia(ifa_decode(), B1).key_fields       # the key's FD bit is off
    assert_valid(t)


def test_ifa_kv_splits_turns_flash_decode_on_where_op_host_has_none():
    base = tile_fia(ifa_decode(b=6, s2=4096), B1)      # B*N2 = 24, not < 0.5 * 48 (all-vector mode): no FD
    assert not base.fd
    t = tile_fia(ifa_decode(b=6, s2=4096), B1, {"kv_splits": 2})
    assert t.fd and t.kv_splits == 2 and t.used_cores == 6 * 4 * 2
    assert_valid(t)


def test_ifa_cores_override_runs_op_hosts_rules_on_that_count():
    base = tile_fia(ifa_decode(b=8, s2=4096), B1)
    t = tile_fia(ifa_decode(b=8, s2=4096), B1, {"cores": 8})
    assert t.decision("split_units").value == 8 and base.decision("split_units").value == 48
    assert t.used_cores == 8 and base.used_cores == 32
    assert sum(len(c.tasks) for c in t.cores) == 32     # every (b, n2) unit still placed
    fd = tile_fia(ifa_decode(), B1, {"cores": 24})     # FD: kvSplitPart = 24 // 4
    assert fd.fd and fd.kv_splits == 6
    assert_valid(t)


def test_ifa_s2_base_override_replaces_s_inner():
    t = tile_fia(ifa_decode(b=8, s2=4096), B1, {"s2_base": 1024})
    assert t.s2_base == 1024 and "plan search" in t.decision("s2_base").rule
    assert max(task.s2_hi for c in t.cores for task in c.tasks) == 4
    clipped = tile_fia(ifa_decode(b=8, s2=4096), B1, {"s2_base": 8192})
    assert clipped.s2_base == 4096          # clipped to the KV length, as op_host clips its own
    assert_valid(t)


@pytest.mark.parametrize("overrides, param, rule", [
    ({"kv_splits": 13}, "overrides.kv_splits", "at most 12"),
    ({"kv_splits": 0}, "overrides.kv_splits", "at least 1"),
    ({"cores": 49}, "overrides.cores", "at most 48"),
    ({"s2_base": 1000}, "overrides.s2_base", "a multiple of 16"),
])
def test_ifa_illegal_overrides_name_the_parameter_and_the_rule(overrides, param, rule):
    with pytest.raises(ParamError) as e:
        tile_fia(ifa_decode(), B1, overrides)
    assert e.value.param == param and rule in e.value.rule and e.value.checker == "plan search"


def test_ifa_refuses_m_base():
    with pytest.raises(UnsupportedPlanOverride, match=r"\['m_base'\] are not read by the arch22 ifa/IFATiling"):
        tile_fia(ifa_decode(), B1, {"m_base": 32})


# ------------------------------------------------------------------------------------------------ split-fuse
def test_fai_cores_override_sets_the_launch_and_the_round_robin():
    call = lambda: fai_tnd([1] * 30, [8] * 30, n=15, nkv=3)   # noqa: E731
    t = tile_fia(call(), B1, {"cores": 6})
    assert t.used_cores == t.block_dim == 6 and len(t.cores) == 6
    assert t.decision("split_cores").value == 6
    assert sum(len(c.tasks) for c in t.cores) == sum(len(c.tasks) for c in tile_fia(call(), B1).cores)
    assert t.workspace_bytes < tile_fia(call(), B1).workspace_bytes      # staging for 6 cores, not 24
    assert_valid(t)


def test_fai_cores_override_changes_the_flash_decode_split():
    call = lambda: fai_tnd([1, 1], [4096, 4096], n=8, nkv=2, paged_bs=128)   # noqa: E731
    base = tile_fia(call(), B1)
    assert base.fd
    t = tile_fia(call(), B1, {"cores": 8})
    assert t.fd and t.used_cores <= 8 < base.used_cores
    assert sum(ft.splits for ft in t.fd_tasks) < sum(ft.splits for ft in base.fd_tasks)
    assert_valid(t)


def test_fai_refuses_bases_and_too_many_cores():
    with pytest.raises(UnsupportedPlanOverride, match="s2_base"):
        tile_fia(fai_tnd([1] * 30, [8] * 30, n=15, nkv=3), B1, {"s2_base": 256})
    with pytest.raises(ParamError, match="overrides.cores"):
        tile_fia(fai_tnd([1] * 30, [8] * 30, n=15, nkv=3), B1, {"cores": 25})


# ------------------------------------------------------------------------------------------------ PFA, MLA, arch35
def test_pfa_bases_and_cores_override():
    base = tile_fia(pfa_antiquant(), B1)
    t = tile_fia(pfa_antiquant(), B1, {"m_base": 64, "s2_base": 256})
    assert (t.m_base, t.s2_base) == (64, 256)       # the query's 128 rows in two M blocks
    assert max(task.m_rows for c in t.cores for task in c.tasks) == 64
    tasks = lambda x: sum(len(c.tasks) for c in x.cores)   # noqa: E731
    assert tasks(t) == 2 * tasks(base)
    few = tile_fia(pfa_antiquant(), B1, {"cores": 4})
    assert few.used_cores <= 5 < base.used_cores
    with pytest.raises(ParamError, match="overrides.m_base.*multiple of 32"):
        tile_fia(pfa_antiquant(), B1, {"m_base": 48})


def test_mla_takes_bases_and_cores():
    base = tile_fia(mla_decode(), B1)
    t = tile_fia(mla_decode(), B1, {"s2_base": base.s2_base // 2, "cores": 24})
    assert t.s2_base == base.s2_base // 2 and t.template == "FiaTilingNonQuantMla"
    assert t.used_cores >= base.used_cores
    assert_valid(t)


def test_arch35_cores_override_sets_the_core_count():
    base = tile_fia(gqa_prefill(), "Ascend950")
    t = tile_fia(gqa_prefill(), "Ascend950", {"cores": 16})
    assert t.used_cores == 16 < base.used_cores and t.template == "FiaTilingNonQuantArch35"
    assert "16 cores forced" in t.decision("used_cores").rule
    with pytest.raises(UnsupportedPlanOverride, match="m_base"):
        tile_fia(gqa_prefill(), "Ascend950", {"m_base": 64})
