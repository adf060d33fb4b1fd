"""Checker families mask, actual_seq_len, pse, left_padding, system_prefix, softmax_lse, learnable_sink and
post_quant: one rejection per rule, each built from a valid hand-made call."""

from __future__ import annotations

import pytest

from cvtile.tiling.errors import AclnnStatus
from cvtile.tiling.params import TensorMeta as T

INVALID, INNER, NULL = int(AclnnStatus.PARAM_INVALID), int(AclnnStatus.INNER_TILING_ERROR), \
    int(AclnnStatus.PARAM_NULLPTR)
MASK = T((2048, 2048), "bool")
FULL_MASK = T((2, 1, 128, 256), "bool")

# (id, arch, base, overrides, checker, param, status, rule fragment)
CASES = [
    # mask
    ("mask_dtype", "arch35", "gqa", dict(atten_mask=T((2, 1, 128, 256), "float16")),
     "mask", "atten_mask", INVALID, "int8, uint8 or bool"),
    ("mask_format", "arch35", "gqa", dict(atten_mask=T((2, 1, 128, 256), "bool", "FRACTAL_NZ")),
     "mask", "atten_mask", INVALID, "format"),
    ("sparse_mode_range", "arch35", "gqa", dict(sparse_mode=5, atten_mask=MASK), "mask", "sparse_mode", INNER,
     "0, 1, 2, 3, 4, 9"),
    ("sparse_needs_mask", "arch35", "gqa", dict(sparse_mode=3), "mask", "atten_mask", INNER, "needs an atten_mask"),
    ("compressed_mask_shape", "arch35", "gqa", dict(sparse_mode=3, atten_mask=T((1024, 1024), "bool")),
     "mask", "atten_mask", INNER, "compressed mask"),
    ("full_mask_too_short", "arch35", "gqa", dict(atten_mask=T((2, 1, 128, 200), "bool")),
     "mask", "atten_mask", INNER, ">= S of key"),
    ("tokens_negative_band", "arch35", "gqa", dict(pre_tokens=-10, next_tokens=5, atten_mask=FULL_MASK),
     "mask", "pre_tokens", INNER, "band is empty"),
    ("tree_needs_rope", "arch22", "gqa", dict(sparse_mode=9, atten_mask=T((2, 128, 128), "bool")),
     "mask", "sparse_mode", INNER, "query_rope"),
    # actual_seq_len
    ("kv_len_too_long", "arch35", "gqa", dict(actual_seq_lengths_kv=[100, 300]),
     "actual_seq_len", "actual_seq_lengths_kv", INNER, "must not exceed S of key"),
    ("kv_len_count", "arch35", "gqa", dict(query=(3, 8, 128, 128), attention_out=(3, 8, 128, 128),
                                          key=(3, 2, 256, 128), value=(3, 2, 256, 128),
                                          actual_seq_lengths_kv=[100, 200]),
     "actual_seq_len", "actual_seq_lengths_kv", INNER, "1 or at least B"),
    ("q_len_negative", "arch35", "gqa", dict(actual_seq_lengths=[-1, 5]),
     "actual_seq_len", "actual_seq_lengths", INNER, "not be negative"),
    ("tnd_q_len_decreasing", "arch35", "tnd", dict(actual_seq_lengths=[32, 16, 96]),
     "actual_seq_len", "actual_seq_lengths", INNER, "must not decrease"),
    ("tnd_q_len_last_is_t", "arch35", "tnd", dict(actual_seq_lengths=[32, 64, 90]),
     "actual_seq_len", "actual_seq_lengths", INNER, "equal T of query"),
    ("tnd_needs_q_len", "arch35", "tnd", dict(actual_seq_lengths=None),
     "parse", "actual_seq_lengths", None, "required"),
    ("paged_needs_kv_len", "arch35", "paged", dict(actual_seq_lengths_kv=None),
     "actual_seq_len", "actual_seq_lengths_kv", INNER, "paged attention needs"),
    # pse
    ("pse_type", "arch35", "gqa", dict(pse_type=1), "parse", "pse_type", INNER, "must be 0"),
    ("pse_dtype", "arch35", "gqa", dict(pse_shift=T((2, 8, 128, 256), "bfloat16")),
     "pse", "pse_shift", INNER, "must be float16"),
    ("pse_shape", "arch35", "gqa", dict(pse_shift=T((2, 4, 128, 256), "float16")),
     "pse", "pse_shift", INNER, "[1 or 2, 8,"),
    ("pse_short_s2", "arch35", "gqa", dict(pse_shift=T((2, 8, 128, 100), "float16")),
     "pse", "pse_shift", INNER, ">= 256]"),
    ("pse_tnd", "arch35", "tnd", dict(pse_shift=T((3, 8, 32, 64), "float16")),
     "pse", "pse_shift", INNER, "not supported with input_layout TND"),
    # left padding
    ("q_padding_needs_lengths", "arch35", "gqa", dict(query_padding_size=[3]),
     "left_padding", "actual_seq_lengths", INNER, "needs actual_seq_lengths"),
    ("kv_padding_with_paged", "arch35", "paged", dict(kv_padding_size=[3]),
     "paged_attention", "kv_padding_size", INNER, "left padding"),
    ("padding_shape", "arch35", "gqa", dict(kv_padding_size=T((2,), "int64"), actual_seq_lengths_kv=[100, 200]),
     "left_padding", "kv_padding_size", INNER, "exactly one element"),
    # system prefix
    ("prefix_pair", "arch35", "gqa", dict(key_shared_prefix=T((1, 2, 64, 128), "float16")),
     "system_prefix", "value_shared_prefix", INNER, "needs value_shared_prefix"),
    ("prefix_with_paged", "arch35", "paged", dict(key_shared_prefix=T((1, 2, 64, 128), "bfloat16"),
                                                 value_shared_prefix=T((1, 2, 64, 128), "bfloat16")),
     "paged_attention", "key_shared_prefix", INNER, "shared prefix"),
    ("prefix_dtype", "arch35", "gqa", dict(key_shared_prefix=T((1, 2, 64, 128), "bfloat16"),
                                          value_shared_prefix=T((1, 2, 64, 128), "bfloat16")),
     "system_prefix", None, INNER, "dtype"),
    ("prefix_batch", "arch35", "gqa", dict(key_shared_prefix=T((2, 2, 64, 128), "float16"),
                                          value_shared_prefix=T((2, 2, 64, 128), "float16")),
     "system_prefix", "key_shared_prefix", INNER, "batch axis"),
    ("prefix_len_too_long", "arch35", "gqa", dict(key_shared_prefix=T((1, 2, 64, 128), "float16"),
                                                 value_shared_prefix=T((1, 2, 64, 128), "float16"),
                                                 actual_shared_prefix_len=[65]),
     "system_prefix", "actual_shared_prefix_len", INNER, "must not exceed S"),
    # softmax_lse
    ("lse_missing", "arch35", "gqa", dict(softmax_lse_flag=True), "parse", "softmax_lse", None, "softmax_lse_flag"),
    ("lse_dtype", "arch35", "gqa", dict(softmax_lse_flag=True, softmax_lse=T((2, 8, 128, 1), "float16")),
     "softmax_lse", "softmax_lse", None, "float32"),
    ("lse_shape", "arch35", "gqa", dict(softmax_lse_flag=True, softmax_lse=T((2, 8, 64, 1), "float32")),
     "softmax_lse", "softmax_lse", INNER, "[2, 8, 128, 1]"),
    # learnable sink
    ("sink_shape", "arch35", "gqa", dict(learnable_sink=T((4,), "float16")),
     "learnable_sink", "learnable_sink", INNER, "num_heads (8) elements"),
    ("sink_dtype", "arch35", "gqa", dict(learnable_sink=T((8,), "bfloat16")),
     "learnable_sink", "learnable_sink", INNER, "query dtype"),
    ("sink_with_pse", "arch35", "gqa", dict(learnable_sink=T((8,), "float16"),
                                           pse_shift=T((2, 8, 128, 256), "float16")),
     "learnable_sink", "learnable_sink", INNER, "pse_shift"),
    ("sink_arch22_dtype", "arch22", "gqa", dict(learnable_sink=T((8,), "float16")),
     "learnable_sink", "learnable_sink", INNER, "bf16"),
    # post quant
    ("post_quant_needs_scale", "arch35", "gqa", dict(attention_out=T((2, 8, 128, 128), "int8")),
     "post_quant", "quant_scale2", INNER, "needs quant_scale2"),
    ("post_quant_scale_dtype", "arch35", "gqa", dict(attention_out=T((2, 8, 128, 128), "int8"),
                                                    quant_scale2=T((1,), "float16")),
     "post_quant", "quant_scale2", INNER, "bf16 or float32"),
    ("post_quant_scale_size", "arch35", "gqa", dict(attention_out=T((2, 8, 128, 128), "int8"),
                                                   quant_scale2=T((7,), "float32")),
     "post_quant", "quant_scale2", INNER, "per channel"),
    ("post_quant_offset_dtype", "arch35", "gqa", dict(attention_out=T((2, 8, 128, 128), "int8"),
                                                     quant_scale2=T((1,), "float32"),
                                                     quant_offset2=T((1,), "bfloat16")),
     "post_quant", "quant_offset2", INNER, "dtype of quant_scale2"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_feature_rule(verdict_kit, case):
    _, arch, base, over, checker, param, status, fragment = case
    err = verdict_kit.reject(arch, base, **over)
    if checker is not None:
        assert err.checker == checker, str(err)
    if param is not None:
        assert err.param == param, str(err)
    if status is not None:
        assert int(err.status) == status, str(err)
    assert fragment in err.rule, str(err)


@pytest.mark.parametrize("over", [
    dict(atten_mask=FULL_MASK),
    dict(sparse_mode=3, atten_mask=MASK),
    dict(actual_seq_lengths_kv=[100, 256], actual_seq_lengths=[64, 128]),
    dict(pse_shift=T((1, 8, 128, 256), "float16")),
    dict(key_shared_prefix=T((1, 2, 64, 128), "float16"), value_shared_prefix=T((1, 2, 64, 128), "float16"),
         actual_shared_prefix_len=[32]),
    dict(softmax_lse_flag=True, softmax_lse=T((2, 8, 128, 1), "float32")),
    dict(learnable_sink=T((8,), "float16")),
    dict(attention_out=T((2, 8, 128, 128), "int8"), quant_scale2=T((1,), "float32")),
], ids=["mask", "sparse3", "lengths", "pse", "prefix", "lse", "sink", "post_quant"])
def test_feature_accepted(verdict_kit, over):
    assert verdict_kit.accept("arch35", "gqa", **over).route.template
