"""arch22 legacy routes: the legacy entry, the split-fuse ("FAI"), IFA and PFA tilings' rejections."""

from __future__ import annotations

import pytest

from cvtile.tiling.errors import AclnnStatus
from cvtile.tiling.params import TensorMeta as T

INNER, NULL = int(AclnnStatus.INNER_TILING_ERROR), int(AclnnStatus.PARAM_NULLPTR)

#: the "tnd" base with a bf16 query, fp32 key / value and inner_precise 1: the legacy PFA route's TND branch
_PFA_TND = dict(query=T((96, 8, 128), "bfloat16"), key=T((192, 2, 128), "float32"),
                value=T((192, 2, 128), "float32"), attention_out=T((96, 8, 128), "bfloat16"), inner_precise=1)

# (id, base, overrides, checker, param, status, rule fragment); all on the arch22 UT platform
CASES = [
    # legacy entry
    ("entry_out_shape", "ifa", dict(attention_out=(2, 1, 1024)), "legacy", "attention_out", INNER, "must be"),
    ("entry_value_missing", "ifa", dict(value=None), "legacy", "value", NULL, "required"),
    ("entry_head_dim", "pfa", dict(query=(2, 128, 8 * 640), key=T((2, 64, 8 * 640), "int8"),
                                   value=T((2, 64, 8 * 640), "int8"), attention_out=(2, 128, 8 * 640)),
     "legacy", "query", INNER, "<= 512"),
    ("entry_query_rank", "pfa", dict(query=(2, 128, 8, 128)), "legacy", "query", INNER, "3 dims"),
    # split-fuse (TND)
    ("fai_mask_without_sparse", "tnd", dict(atten_mask=T((2048, 2048), "bool")),
     "legacy_fai", "sparse_mode", INNER, "3 or 4"),
    ("fai_mask_shape", "tnd", dict(sparse_mode=3, atten_mask=T((1024, 1024), "bool")),
     "legacy_fai", "atten_mask", INNER, "2048"),
    ("fai_needs_kv_lengths", "tnd", dict(actual_seq_lengths_kv=None),
     "legacy_fai", "actual_seq_lengths_kv", INNER, "needs actual_seq_lengths_kv"),
    ("fai_t_below_lengths", "tnd", dict(actual_seq_lengths=[32, 64, 100]),
     "legacy_fai", "actual_seq_lengths", INNER, "must not be below"),
    ("fai_band_tokens", "tnd", dict(sparse_mode=4, atten_mask=T((2048, 2048), "bool"), pre_tokens=-5,
                                    next_tokens=-5), "legacy_fai", "pre_tokens", INNER, "both be negative"),
    ("fai_sink_heads", "tnd", dict(learnable_sink=T((4,), "float16")),
     "legacy_fai", "learnable_sink", INNER, "N of query"),
    ("fai_lse_shape", "tnd", dict(softmax_lse_flag=True, softmax_lse=T((96, 8), "float32")),
     "legacy_fai", "softmax_lse", INNER, "3 dims"),
    # IFA
    ("ifa_inner_precise", "ifa", dict(inner_precise=3), "legacy_ifa", "inner_precise", INNER, "0 or 1"),
    ("ifa_kv_dtype_pair", "ifa", dict(key=T((2, 1024, 2048), "bfloat16"), value=T((2, 1024, 2048), "bfloat16")),
     "legacy_ifa", "key", INNER, "fp16 query takes"),
    ("ifa_in_out_pair", "ifa", dict(query=T((2, 1, 2048), "int32"), key=T((2, 1024, 2048), "int32"),
                                    value=T((2, 1024, 2048), "int32"), attention_out=T((2, 1, 2048), "int32")),
     "legacy_ifa", "key", INNER, "not supported by the IFA tiling"),
    ("ifa_kv_lengths_too_long", "ifa", dict(actual_seq_lengths_kv=[100, 1025]),
     "legacy_ifa", "actual_seq_lengths_kv", INNER, "<= S of key"),
    ("ifa_kv_lengths_count", "ifa", dict(query=(3, 1, 2048), attention_out=(3, 1, 2048), key=(3, 1024, 2048),
                                         value=(3, 1024, 2048), actual_seq_lengths_kv=[100, 200]),
     "legacy_ifa", "actual_seq_lengths_kv", INNER, "at least B"),
    ("ifa_mask_batch", "ifa", dict(atten_mask=T((1, 1, 1024), "bool")), "legacy_ifa", "atten_mask", INNER,
     "batch of atten_mask"),
    ("ifa_mask_short", "ifa", dict(atten_mask=T((2, 1, 512), "bool")), "legacy_ifa", "atten_mask", INNER,
     "last axis"),
    ("ifa_pse_shape", "ifa", dict(pse_shift=T((2, 4, 1, 1024), "float16")), "legacy_ifa", "pse_shift", INNER,
     "[B or 1, 8, 1, S]"),
    ("ifa_post_quant_needs_int8_out", "ifa", dict(quant_scale2=T((1,), "float32")),
     "legacy_ifa", "quant_scale2", INNER, "int8 attention_out"),
    ("ifa_per_layer_quant", "ifa", dict(dequant_scale1=T((1,), "uint64")), "legacy_ifa", "dequant_scale1", INNER,
     "int8 query"),
    ("ifa_in_out_pair_bf16", "ifa", dict(query=T((2, 1, 2048), "bfloat16"), key=T((2, 1024, 2048), "int8"),
                                         value=T((2, 1024, 2048), "int8"),
                                         attention_out=T((2, 1, 2048), "float16")),
     "legacy_ifa", "attention_out", INNER, "not supported"),
    ("ifa_group_limit", "ifa", dict(num_heads=128, num_key_value_heads=1, query=(2, 1, 128 * 64),
                                    key=T((2, 1024, 64), "int8"), value=T((2, 1024, 64), "int8"),
                                    attention_out=(2, 1, 128 * 64)),
     "legacy_ifa", "num_heads", INNER, "<= 64"),
    # PFA
    ("pfa_antiquant_mode", "pfa", dict(antiquant_mode=1), "legacy_pfa", "antiquant_mode", INNER, "0 only"),
    ("pfa_mask_dtype", "pfa", dict(atten_mask=T((2, 128, 512), "float16")),
     "legacy_pfa", "atten_mask", INNER, "bool, int8 or uint8"),
    ("pfa_tree_mask", "pfa", dict(sparse_mode=9, atten_mask=T((2, 128, 128), "bool")),
     "legacy_pfa", "sparse_mode", INNER, "sparse_mode 9"),
    ("pfa_head_dim_align", "pfa", dict(query=(2, 128, 8 * 72), key=T((2, 512, 8 * 72), "int8"),
                                       value=T((2, 512, 8 * 72), "int8"), attention_out=(2, 128, 8 * 72),
                                       antiquant_scale=T((2, 8 * 72), "float16")),
     "legacy_pfa", "query", INNER, "multiple of 32"),
    ("pfa_lse_shape", "pfa", dict(softmax_lse_flag=True, softmax_lse=T((2, 8, 64, 1), "float32")),
     "legacy_pfa", "softmax_lse", INNER, "[2, 8, 128, 1]"),
    ("pfa_bf16_needs_kv_scales", "pfa", dict(query=T((2, 128, 1024), "bfloat16"),
                                             attention_out=T((2, 128, 1024), "bfloat16"),
                                             antiquant_scale=T((2, 1024), "bfloat16")),
     "legacy_pfa", "key_antiquant_scale", INNER, "antiquant scales"),
    ("pfa_padding_needs_lengths", "pfa", dict(query_padding_size=[4]),
     "legacy_pfa", "actual_seq_lengths", INNER, "left padding"),
    ("pfa_prefix_pair", "pfa", dict(key_shared_prefix=T((1, 64, 1024), "int8")),
     "legacy_pfa", "value_shared_prefix", INNER, "come together"),
    # the token windows (sparse 0 with a mask keeps the tokens as given; band mode per batch)
    ("pfa_sparse0_pre_window", "pfa", dict(atten_mask=T((2, 128, 512), "bool"), pre_tokens=-512, next_tokens=1000),
     "legacy_pfa", "pre_tokens", INNER, "S of key/value (512)"),
    ("pfa_sparse0_pre_window_batch", "pfa", dict(atten_mask=T((2, 128, 512), "bool"), pre_tokens=-200,
                                                 next_tokens=1000, actual_seq_lengths_kv=[100, 512]),
     "legacy_pfa", "pre_tokens", INNER, "actual length of batch 0 (100)"),
    ("pfa_sparse0_next_window", "pfa", dict(atten_mask=T((2, 128, 512), "bool"), pre_tokens=1000, next_tokens=-128),
     "legacy_pfa", "next_tokens", INNER, "S of query (128)"),
    ("pfa_band_pre_window", "pfa", dict(sparse_mode=4, atten_mask=T((2048, 2048), "bool"), pre_tokens=-128,
                                        next_tokens=1000),
     "legacy_pfa", "pre_tokens", INNER, "in band mode"),
    # KV antiquant and post-quant on the PFA route (op_host's PromptFlashAttentionTiling, checked against the
    # oracle: the KvAntiquant path's shapes, the MSD path's rules, CheckPostQuantParams' dtypes)
    ("pfa_kv_antiquant_stacked_shape", "pfa", dict(antiquant_scale=T((2, 8, 128), "float16")),
     "legacy_pfa", "antiquant_scale", INNER, "(2, 1024)"),
    ("pfa_kv_antiquant_per_tensor_size", "pfa", dict(antiquant_scale=T((3,), "float16")),
     "legacy_pfa", "antiquant_scale", INNER, "2 elements"),
    ("pfa_kv_antiquant_separate_dense", "pfa", dict(antiquant_scale=None, key_antiquant_scale=T((1, 1024), "float16"),
                                                    value_antiquant_scale=T((1, 1024), "float16")),
     "legacy_pfa", "antiquant_scale", INNER, "needs antiquant_scale"),
    ("pfa_msd_long_query", "pfa", dict(query=T((2, 128, 1024), "bfloat16"), attention_out=T((2, 128, 1024), "bfloat16"),
                                       antiquant_scale=None, key_antiquant_scale=T((8, 128), "bfloat16"),
                                       value_antiquant_scale=T((8, 128), "bfloat16")),
     "legacy_pfa", "query", INNER, "at most 16"),
    ("pfa_msd_channel_dtype", "pfa", dict(query=T((2, 8, 1024), "float16"), attention_out=T((2, 8, 1024), "float16"),
                                          antiquant_scale=None, key_antiquant_scale=T((8, 128), "float16"),
                                          value_antiquant_scale=T((8, 128), "float16")),
     "legacy_pfa", "key_antiquant_scale", INNER, "bfloat16"),
    ("pfa_msd_token_rank", "pfa", dict(query=T((2, 8, 1024), "float16"), attention_out=T((2, 8, 1024), "float16"),
                                       antiquant_scale=None, key_antiquant_scale=T((1, 2, 512), "float32"),
                                       value_antiquant_scale=T((1, 2, 512), "float32"), key_antiquant_mode=1,
                                       value_antiquant_mode=1),
     "legacy_pfa", "key_antiquant_scale", INNER, "(2, 512)"),
    ("pfa_msd_int4", "pfa", dict(query=T((2, 8, 1024), "bfloat16"), attention_out=T((2, 8, 1024), "bfloat16"),
                                 key=T((2, 512, 1024), "int4"), value=T((2, 512, 1024), "int4"), antiquant_scale=None,
                                 key_antiquant_scale=T((8, 128), "bfloat16"), value_antiquant_scale=T((8, 128), "bfloat16")),
     "legacy_pfa", "key", INNER, "no int4"),
    ("pfa_post_quant_bf16_scale", "pfa", dict(query=T((2, 128, 1024), "int8"), key=T((2, 512, 1024), "int8"),
                                              value=T((2, 512, 1024), "int8"), antiquant_scale=None,
                                              attention_out=T((2, 128, 1024), "int8"),
                                              dequant_scale1=T((1,), "uint64"), quant_scale1=T((1,), "float32"),
                                              dequant_scale2=T((1,), "uint64"), quant_scale2=T((1,), "bfloat16")),
     "legacy_pfa", "quant_scale2", INNER, "needs a bfloat16 query"),
    # the TND branch (a bf16 query with fp32 key/value takes the PFA route)
    ("pfa_tnd_empty_mask_sparse0", "tnd", dict(_PFA_TND, atten_mask=T((2048, 0), "int8")),
     "legacy_pfa", "atten_mask", INNER, "not even an empty one"),
    ("pfa_tnd_paged_kv_all_zero", "tnd", dict(_PFA_TND, key=T((3, 2, 128, 128), "float32"),
                                              value=T((3, 2, 128, 128), "float32"), block_table=T((3, 2), "int32"),
                                              block_size=128, actual_seq_lengths_kv=[0, 0, 0]),
     "legacy_pfa", "actual_seq_lengths_kv", INNER, "some KV length must be positive"),
    ("pfa_tnd_paged_block_table_narrow", "tnd", dict(_PFA_TND, key=T((3, 2, 128, 128), "float32"),
                                                     value=T((3, 2, 128, 128), "float32"),
                                                     block_table=T((3, 1), "int32"), block_size=128,
                                                     actual_seq_lengths_kv=[0, 129, 0]),
     "legacy_pfa", "block_table", INNER, "[3, >= 2]"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_legacy_rule(verdict_kit, case):
    _, base, over, checker, param, status, fragment = case
    err = verdict_kit.reject("arch22", base, **over)
    if checker is not None:
        assert err.checker == checker, str(err)
    if param is not None:
        assert err.param == param, str(err)
    assert int(err.status) == status, str(err)
    assert fragment in err.rule, str(err)


@pytest.mark.parametrize("base,over,route", [
    ("ifa", {}, "ifa"),
    ("ifa", dict(actual_seq_lengths_kv=[100, 1024], atten_mask=T((2, 1, 1024), "bool")), "ifa"),
    ("pfa", {}, "pfa"),
    ("pfa", dict(atten_mask=T((2, 128, 512), "bool")), "pfa"),
    ("pfa", dict(atten_mask=T((2, 128, 512), "bool"), pre_tokens=-200, next_tokens=1000), "pfa"),
    ("tnd", {}, "fai"),
    ("tnd", dict(sparse_mode=3, atten_mask=T((2048, 2048), "bool")), "fai"),
    ("tnd", _PFA_TND, "pfa"),
    ("tnd", dict(_PFA_TND, key=T((3, 2, 128, 128), "float32"), value=T((3, 2, 128, 128), "float32"),
                 block_table=T((3, 2), "int32"), block_size=128, actual_seq_lengths_kv=[0, 1, 0]), "pfa"),
])
def test_legacy_route_accepts(verdict_kit, base, over, route):
    info = verdict_kit.accept("arch22", base, **over)
    assert info.route.route == route
    assert info.route.priority is None
