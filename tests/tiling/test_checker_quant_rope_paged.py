"""Checker families dequant (antiquant and full quant), rope and paged_attention: one rejection per rule."""

from __future__ import annotations

import pytest

from cvtile.tiling.errors import AclnnStatus
from cvtile.tiling.params import TensorMeta as T

INNER = int(AclnnStatus.INNER_TILING_ERROR)

#: a valid arch35 antiquant decode: bf16 query, int8 BNSD cache, per-channel bf16 scales (mode 0)
ANTI = dict(query=T((2, 8, 1, 128), "bfloat16"), attention_out=T((2, 8, 1, 128), "bfloat16"),
            key=T((2, 2, 256, 128), "int8"), value=T((2, 2, 256, 128), "int8"),
            key_antiquant_scale=T((2, 128), "bfloat16"), value_antiquant_scale=T((2, 128), "bfloat16"))
#: a valid per-tensor int8 full quant prefill
FULL = dict(query=T((2, 8, 128, 128), "int8"), key=T((2, 2, 256, 128), "int8"), value=T((2, 2, 256, 128), "int8"),
            attention_out=T((2, 8, 128, 128), "bfloat16"), dequant_scale1=T((1,), "float32"),
            quant_scale1=T((1,), "float32"), dequant_scale2=T((1,), "float32"))


def _with(base: dict, **over) -> dict:
    return {**base, **over}


# (id, arch, base, overrides, checker, param, rule fragment)
CASES = [
    # antiquant
    ("anti_mode_range", "arch35", "gqa", _with(ANTI, key_antiquant_mode=7, value_antiquant_mode=7),
     "dequant", "key_antiquant_mode", "0..6"),
    ("anti_modes_differ", "arch35", "gqa", _with(ANTI, key_antiquant_mode=2, value_antiquant_mode=3),
     "dequant", "value_antiquant_mode", "must be equal"),
    ("anti_needs_both_scales", "arch35", "gqa", _with(ANTI, value_antiquant_scale=None),
     "dequant", "value_antiquant_scale", "needs both"),
    ("anti_combined_mode", "arch35", "gqa", _with(ANTI, antiquant_mode=1),
     "dequant", "antiquant_mode", "split mode 0"),
    ("anti_offset_pair", "arch35", "gqa", _with(ANTI, key_antiquant_offset=T((2, 128), "bfloat16")),
     "dequant", "value_antiquant_offset", "come together"),
    ("anti_per_token_scale_dtype", "arch35", "gqa",
     _with(ANTI, key_antiquant_mode=1, value_antiquant_mode=1, key_antiquant_scale=T((2, 256), "bfloat16"),
           value_antiquant_scale=T((2, 256), "bfloat16")),
     "dequant", "key_antiquant_scale", "float32"),
    ("anti_per_token_scale_shape", "arch35", "gqa",
     _with(ANTI, key_antiquant_mode=1, value_antiquant_mode=1, key_antiquant_scale=T((2, 100), "float32"),
           value_antiquant_scale=T((2, 100), "float32")),
     "dequant", "key_antiquant_scale", "per-token"),
    ("anti_per_channel_shape", "arch35", "gqa", _with(ANTI, key_antiquant_scale=T((3, 128), "bfloat16"),
                                                      value_antiquant_scale=T((3, 128), "bfloat16")),
     "dequant", "key_antiquant_scale", "per-channel"),
    ("anti_int8_tnd", "arch35", "tnd",
     dict(query=T((96, 8, 128), "bfloat16"), attention_out=T((96, 8, 128), "bfloat16"),
          key=T((192, 2, 128), "int8"), value=T((192, 2, 128), "int8"),
          key_antiquant_scale=T((2, 128), "bfloat16"), value_antiquant_scale=T((2, 128), "bfloat16")),
     "dequant", "input_layout", "TND"),
    ("anti_prefill_fp16", "arch35", "gqa",
     _with(ANTI, query=T((2, 8, 8, 128), "float16"), attention_out=T((2, 8, 8, 128), "float16"),
           key_antiquant_scale=T((2, 128), "float16"), value_antiquant_scale=T((2, 128), "float16")),
     "dequant", "query", "bf16 query and output"),
    ("non_quant_takes_no_scales", "arch35", "gqa", dict(key_antiquant_scale=T((2, 128), "float16")),
     "dequant", "key_antiquant_scale", "absent without quantisation"),
    # full quant
    ("full_quant_scale1_dtype", "arch35", "gqa", _with(FULL, quant_scale1=T((1,), "bfloat16")),
     "dequant", "quant_scale1", "float32"),
    ("full_quant_scale_shape", "arch35", "gqa", _with(FULL, dequant_scale1=T((2,), "float32")),
     "dequant", "dequant_scale1", "[1]"),
    ("full_quant_missing_scale", "arch35", "gqa", _with(FULL, dequant_scale2=None),
     "dequant", "dequant_scale2", "needs dequant_scale2"),
    ("full_quant_output", "arch35", "gqa", _with(FULL, attention_out=T((2, 8, 128, 128), "float16")),
     "dequant", "query", "(int8, int8, bf16)"),
    ("full_quant_layout", "arch35", "tnd",
     dict(query=T((96, 8, 128), "int8"), key=T((192, 2, 128), "int8"), value=T((192, 2, 128), "int8"),
          attention_out=T((96, 8, 128), "bfloat16"), dequant_scale1=T((1,), "float32"),
          quant_scale1=T((1,), "float32"), dequant_scale2=T((1,), "float32")),
     "dequant", "input_layout", "per-tensor"),
    ("full_quant_decode", "arch35", "gqa", _with(FULL, query=T((2, 8, 1, 128), "int8"),
                                                attention_out=T((2, 8, 1, 128), "bfloat16")),
     "dequant", "query", "S of query 1"),
    ("full_quant_group", "arch35", "gqa", _with(FULL, num_heads=128, num_key_value_heads=1,
                                               query=T((2, 128, 128, 128), "int8"), key=T((2, 1, 256, 128), "int8"),
                                               value=T((2, 1, 256, 128), "int8"),
                                               attention_out=T((2, 128, 128, 128), "bfloat16")),
     "dequant", "num_heads", "G in [1, 64]"),
    # rope
    ("rope_pair", "arch35", "gqa", dict(query_rope=T((2, 8, 128, 64), "float16")),
     "rope", "key_rope", "query_rope needs key_rope"),
    ("rope_dtype", "arch35", "mla", dict(query_rope=T((2, 1, 32, 64), "float32")),
     "rope", "query_rope", "fp16 or bf16"),
    ("rope_d", "arch35", "mla", dict(query_rope=T((2, 1, 32, 32), "bfloat16"), key_rope=T((8, 128, 32), "bfloat16")),
     "rope", "query_rope", "64"),
    ("rope_with_prefix", "arch35", "gqa", dict(query_rope=T((2, 8, 128, 64), "float16"),
                                              key_rope=T((2, 2, 256, 64), "float16"),
                                              key_shared_prefix=T((1, 2, 64, 128), "float16"),
                                              value_shared_prefix=T((1, 2, 64, 128), "float16")),
     None, None, "prefix"),
    ("paged_with_prefix", "arch22", "mla", dict(key_shared_prefix=T((1, 1, 64, 512), "bfloat16"),
                                               value_shared_prefix=T((1, 1, 64, 512), "bfloat16")),
     "paged_attention", "key_shared_prefix", "shared prefix"),
    ("rope_with_pse", "arch35", "gqa", dict(query_rope=T((2, 8, 128, 64), "float16"),
                                           key_rope=T((2, 2, 256, 64), "float16"),
                                           pse_shift=T((2, 8, 128, 256), "float16")),
     "rope", "pse_shift", "not supported with query_rope"),
    ("rope_shape", "arch35", "gqa", dict(query_rope=T((2, 8, 64, 64), "float16"),
                                        key_rope=T((2, 2, 256, 64), "float16")),
     "rope", "query_rope", "axis 2 of query_rope"),
    ("key_rope_dtype", "arch35", "mla", dict(key_rope=T((8, 128, 64), "float16")), "rope", "key_rope", "dtype"),
    # paged attention
    ("block_table_dtype", "arch35", "paged", dict(block_table=T((2, 4), "int64")),
     "paged_attention", "block_table", "int32"),
    ("block_table_rank", "arch35", "paged", dict(block_table=T((8,), "int32")), "parse", "block_table", "2 dims"),
    ("block_size_zero", "arch35", "paged", dict(block_size=0), "parse", "block_size", "greater than 0"),
    ("block_size_align", "arch35", "paged", dict(block_size=100, key=(8, 100, 256), value=(8, 100, 256),
                                                 block_table=T((2, 6), "int32")),
     "paged_attention", "block_size", "multiple of 16"),
    ("block_table_short", "arch35", "paged", dict(block_table=T((2, 2), "int32")),
     "paged_attention", "block_table", ">= max blocks per batch"),
    ("cache_block_axis", "arch35", "paged", dict(key=(8, 64, 256), value=(8, 64, 256)),
     "paged_attention", "key", "block_size"),
    ("cache_hidden", "arch35", "paged", dict(key=(8, 128, 512), value=(8, 128, 512)), "paged_attention", "value",
     "equal head dims"),
    ("paged_mask_short", "arch35", "paged", dict(atten_mask=T((2, 1, 16, 256), "bool")),
     "paged_attention", "atten_mask", "block_size"),
    ("dense_views_without_paging", "arch35", "gqa",
     dict(key=T((2, 2, 256, 128), "float16", stride=(131072, 128, 256, 1))), "paged_attention", "key", "dense"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_quant_rope_paged_rule(verdict_kit, case):
    _, arch, base, over, checker, param, fragment = case
    err = verdict_kit.reject(arch, base, **over)
    assert int(err.status) in (int(AclnnStatus.INNER_TILING_ERROR), int(AclnnStatus.PARAM_INVALID),
                               int(AclnnStatus.PARAM_NULLPTR))
    if checker is not None:
        assert err.checker == checker, str(err)
    if param is not None:
        assert err.param == param, str(err)
    assert fragment in err.rule, str(err)


@pytest.mark.parametrize("arch,base,over,quant", [
    ("arch35", "gqa", ANTI, "anti"),
    ("arch35", "gqa", _with(ANTI, key_antiquant_mode=1, value_antiquant_mode=1,
                            key_antiquant_scale=T((2, 256), "float32"), value_antiquant_scale=T((2, 256), "float32")),
     "anti"),
    ("arch35", "gqa", FULL, "full"),
    ("arch22", "mla", {}, "no"),
    ("arch35", "paged", {}, "no"),
], ids=["anti_per_channel", "anti_per_token", "full_per_tensor", "mla", "paged"])
def test_quant_rope_paged_accepted(verdict_kit, arch, base, over, quant):
    info = verdict_kit.accept(arch, base, **over)
    assert info.quant_mode == quant
