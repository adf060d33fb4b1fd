"""tile_fia decisions on hand-built cases (decode, flash decode, causal prefill, sink, empty, legacy IFA, arch35)."""

from __future__ import annotations

import pytest

from cvtile.tiling import FiaParams, ParamError, TensorMeta
from cvtile.tiling.fia import format_tiling, tile_fia
from cvtile.tiling.validate import assert_valid


def bnsd(b, n, nkv, s1, s2, d=128, dtype="float16", **attrs):
    q = TensorMeta((b, n, s1, d), dtype)
    k = TensorMeta((b, nkv, s2, d), dtype)
    tensors = {"query": q, "key": k, "value": k, "attention_out": q}
    extra = {k_: v for k_, v in attrs.items() if k_ in ("atten_mask", "actual_seq_lengths", "actual_seq_lengths_kv")}
    tensors.update(extra)
    a = {"num_heads": n, "num_key_value_heads": nkv, "input_layout": "BNSD", "scale": d ** -0.5}
    a.update({k_: v for k_, v in attrs.items() if k_ not in extra})
    return FiaParams.from_api(tensors, a)


def check_invariants(t):
    """The FiaTiling contract (every block once, FD fields consistent); returns the set of covered blocks."""
    assert_valid(t)
    return {(x.b, x.n2, x.m_start, j) for c in t.cores for x in c.tasks for j in range(x.s2_lo, x.s2_hi)}


def test_default_decode_on_910b1():
    """B=4 Nq=32 Nkv=8 Sq=1 Skv=4096 D=128 fp16 BNSD: GQA template, no FD (32 units fill 16 cores evenly)."""
    t = tile_fia(bnsd(4, 32, 8, 1, 4096), "Ascend910B1")
    assert (t.route, t.template) == ("fia", "FiaTilingNonQuant")
    assert t.decision("template_id").value == 3
    assert t.s2_base == 4096 and "min(G/5,2)" in t.decision("s2_base").rule
    assert t.m_base == 64 and t.m_order == "GS1"
    assert t.used_cores == 16 and len(t.cores) == 16
    assert not t.fd and t.kv_splits == 0
    assert t.tiling_key == 103000000000400000
    assert t.key_fields["softmax_brcb"] and not t.key_fields["fd"]
    blocks = check_invariants(t)
    assert blocks == {(b, n, 0, 0) for b in range(4) for n in range(8)}
    assert all(len(c.tasks) == 2 for c in t.cores)
    text = format_tiling(t)
    assert "FiaTilingNonQuant" in text and "103000000000400000" in text and "flash decode: off" in text
    assert "split_core" in t.explain()


def test_long_decode_splits_the_kv_row():
    """One (b, n2) with a 32K KV: the split cuts its row across 8 cores -> FD with 8 KV pieces."""
    t = tile_fia(bnsd(1, 8, 1, 1, 32768), "Ascend910B1")
    assert t.fd and len(t.fd_tasks) == 1 and t.kv_splits == 8 and t.used_cores == 8
    assert t.key_fields["fd"]
    check_invariants(t)
    assert t.fd_vector_work and t.fd_vector_work[0].pieces == ((0, 0, 8),)
    assert "fd_partial_out" in t.workspace_layout


def test_causal_prefill_tasks_stay_left_of_the_diagonal():
    mask = TensorMeta((2048, 2048), "int8")
    t = tile_fia(bnsd(1, 8, 8, 2048, 2048, atten_mask=mask, sparse_mode=3), "Ascend910B1")
    assert t.m_base == 512 and t.s2_base == 512
    blocks = check_invariants(t)
    for (_b, _n, m_start, j) in blocks:
        assert j * 512 <= m_start + 511          # right-down causal with S1 == S2
    assert len(blocks) == 8 * (1 + 2 + 3 + 4)
    assert t.used_cores <= 24


def test_tiling_sink_skips_the_split():
    """actual_seq_lengths_kv given as a tensor without values: max workspace, every core, no host split."""
    lens = TensorMeta((4,), "int64")
    t = tile_fia(bnsd(4, 32, 8, 1, 4096, actual_seq_lengths_kv=lens), "Ascend910B3")
    assert t.extras.get("tiling_sink") and not t.cores and t.used_cores == 20
    assert not t.key_fields["fd"] and not t.key_fields["softmax_brcb"]


def test_empty_kv_uses_the_empty_tensor_template():
    t = tile_fia(bnsd(4, 16, 16, 13, 0), "Ascend910B3")
    assert t.template == "FiaTilingEmptyTensor" and t.tiling_key == 10 ** 17 + 20


def test_legacy_ifa_route_flash_decode():
    """MHA D=256 decode is the 'legacy preferred' shape: the old IFA tiling decides FD up front."""
    t = tile_fia(bnsd(1, 2, 2, 1, 8192, d=256), "Ascend910B1")
    assert t.route == "ifa"
    assert t.decision("flash_decode").value is True
    parts = t.decision("kv_splits").value
    assert parts > 1 and t.used_cores == 2 * parts
    assert t.tiling_key // 10 ** 16 == 1            # legacy IFA key family
    assert t.key_fields["fd"]
    check_invariants(t)


def test_arch35_gqa_decode():
    t = tile_fia(bnsd(4, 32, 8, 1, 2048), "Ascend950")
    assert t.template == "FiaTilingNonQuantArch35"
    assert t.m_base == 64 and t.s2_base == 256            # small-head 32/256
    assert t.key_fields["config"] == 1 and t.key_fields["refactored"]
    assert t.used_cores == 32 and not t.fd
    check_invariants(t)


def test_arch35_long_kv_goes_to_the_catch_all():
    """32 (b, n2) x 4096 x (D + Dv) x 2 B x 2 fills L2: the GQA template declines (S1 outer split), impl takes it."""
    t = tile_fia(bnsd(4, 32, 8, 1, 4096), "Ascend950")
    assert t.template == "FusedInferAttentionScoreTilingImpl"
    assert t.decision("impl_modes").value["ifa"] and t.key_fields["config"] == 1
    assert not t.key_fields["refactored"] and not t.key_fields["s1_outer_split"]
    check_invariants(t)


def test_rejected_call_raises_param_error():
    with pytest.raises(ParamError):
        tile_fia(bnsd(4, 32, 7, 1, 4096), "Ascend910B1")       # 32 heads do not group over 7 kv heads


def test_to_dict_is_json_ready():
    import json
    t = tile_fia(bnsd(2, 8, 8, 1, 1024), "Ascend910B1")
    d = json.loads(t.to_json())
    assert d["tiling_key"] == t.tiling_key and d["decisions"]


def _visible(sparse, pre, nxt, s1, s2, i, j):
    """Does query position i see key j (the documented sparse-mode semantics)?"""
    if sparse == 3:
        return j <= i + s2 - s1
    if sparse == 4:
        return i + s2 - s1 - pre <= j <= i + s2 - s1 + nxt
    return True


@pytest.mark.parametrize("plat, layout, sparse, pre, nxt, s1, s2", [
    ("Ascend910B1", "BNSD", 3, 2147483647, 0, 300, 700),
    ("Ascend910B1", "BSND", 4, 200, 30, 333, 900),
    ("Ascend950", "BNSD", 4, 150, 10, 300, 1000),
    ("Ascend950", "BSH", 3, 2147483647, 0, 257, 600),
])
def test_masked_tasks_cover_every_visible_block(plat, layout, sparse, pre, nxt, s1, s2):
    b, n, nkv, d = 2, 4, 2, 128
    g = n // nkv
    shapes = {"BNSD": ((b, n, s1, d), (b, nkv, s2, d)), "BSND": ((b, s1, n, d), (b, s2, nkv, d)),
              "BSH": ((b, s1, n * d), (b, s2, nkv * d))}
    qs, ks = shapes[layout]
    q, k = TensorMeta(qs, "float16"), TensorMeta(ks, "float16")
    p = FiaParams.from_api({"query": q, "key": k, "value": k, "attention_out": q,
                            "atten_mask": TensorMeta((2048, 2048), "int8")},
                           {"num_heads": n, "num_key_value_heads": nkv, "input_layout": layout, "scale": 0.1,
                            "sparse_mode": sparse, "pre_tokens": pre, "next_tokens": nxt})
    t = tile_fia(p, plat)
    check_invariants(t)
    sb = t.s2_base
    tasks = [x for c in t.cores for x in c.tasks]
    for bi in range(b):
        for h in range(nkv):
            mine = [x for x in tasks if x.b == bi and x.n2 == h]
            for r in range(s1 * g):
                i = r // g if t.m_order == "S1G" else r % s1
                rows = [x for x in mine if x.m_start <= r < x.m_start + x.m_rows]
                for j in range(0, s2, 7):
                    if _visible(sparse, pre, nxt, s1, s2, i, j):
                        assert any(x.s2_lo <= j // sb < x.s2_hi for x in rows), (t.template, bi, h, r, j)
