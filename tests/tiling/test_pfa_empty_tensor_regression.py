"""Regression: an empty query/output on the arch22 legacy PFA route crashed the mirror (ZeroDivisionError in
``plan_pfa``: the empty call had no head ratio). op_host takes its empty-tensor exit there: tiling key
1e18 + 20 (FIA's PFA offset + EMPTY_KV_TILING_KEY), the output zero-filled in slices over the 40 AIV cores,
launched as 20 blocks, 16 MiB workspace (values read off the real op_host tiling built on x86)."""

from __future__ import annotations

from cvtile.tiling.fia import tile_fia
from cvtile.tiling.params import FiaParams, TensorMeta
from cvtile.tiling.platform import ut_platform


def _t(shape, dtype="float16", data=None):
    return TensorMeta(tuple(shape), dtype, "ND", data)


def test_empty_output_on_the_pfa_route_takes_the_empty_exit():
    kv = _t((4, 954, 128), "float32")          # fp32 key/value: neither the new framework nor IFA takes it
    p = FiaParams(query=_t((4, 0, 128)), key=kv, value=kv, key_list=(kv,), value_list=(kv,),
                  attention_out=_t((0, 4, 128)), num_heads=4, num_key_value_heads=4, input_layout="NTD_TND",
                  actual_seq_lengths=_t((4,), "int64", (0, 0, 0, 0)),
                  actual_seq_lengths_kv=_t((4,), "int64", (296, 468, 654, 954)))
    t = tile_fia(p, ut_platform("arch22"))
    assert (t.route, t.tiling_key, t.block_dim, t.workspace_bytes) == ("pfa", 10 ** 18 + 20, 20, 16 * 1024 * 1024)


def test_empty_kv_on_the_pfa_route_matches_op_host():
    p = FiaParams(query=_t((4, 16, 13, 128), "int32"), key=_t((4, 16, 0, 128)), value=_t((4, 16, 0, 128)),
                  key_list=(_t((4, 16, 0, 128)),), value_list=(_t((4, 16, 0, 128)),),
                  atten_mask=_t((4, 13, 5173), "int8"), attention_out=_t((4, 16, 13, 128)), num_heads=16,
                  num_key_value_heads=1, input_layout="BNSD", inner_precise=3, pre_tokens=2, next_tokens=5218)
    t = tile_fia(p, ut_platform("arch22"))
    assert (t.route, t.tiling_key, t.block_dim, t.workspace_bytes) == ("pfa", 10 ** 18 + 20, 20, 16 * 1024 * 1024)
