"""Checker family "common": dtypes, formats, head counts, layouts, ranks and q/k/v/out shape agreement."""

from __future__ import annotations

import pytest

from cvtile.tiling.errors import AclnnStatus
from cvtile.tiling.params import TensorMeta as T

INVALID, INNER, NULL = int(AclnnStatus.PARAM_INVALID), int(AclnnStatus.INNER_TILING_ERROR), \
    int(AclnnStatus.PARAM_NULLPTR)

# (id, arch, base, overrides, param, status, rule fragment)
CASES = [
    ("out_dtype_fp32", "arch35", "gqa", dict(attention_out=T((2, 8, 128, 128), "float32")),
     "attention_out", INVALID, "dtype of attention_out"),
    ("query_format", "arch35", "gqa", dict(query=T((2, 8, 128, 128), "float16", "NC1HWC0")),
     "query", INVALID, "format of query"),
    ("inner_precise_range", "arch35", "gqa", dict(inner_precise=5), "inner_precise", INNER, "[0, 4]"),
    ("layout_unknown_arch35", "arch35", "gqa", dict(input_layout="SBH"), "input_layout", None, "input_layout"),
    ("d_align16_arch22", "arch22", "gqa",
     dict(query=(2, 8, 128, 72), key=(2, 2, 256, 72), value=(2, 2, 256, 72), attention_out=(2, 8, 128, 72)),
     "value", INNER, "multiple of 16"),
    ("transposed_layout_d_arch22", "arch22", "gqa",
     dict(input_layout="BSND_BNSD", query=(2, 128, 8, 96), key=(2, 256, 2, 96), value=(2, 256, 2, 96),
          attention_out=(2, 8, 128, 96)),
     "value", INNER, "head dims 64 and 128 only"),
    ("bsh_rank", "arch35", "gqa_bsh", dict(query=(2, 128, 8, 128)), "query", INNER, "3 dims"),
    ("bnsd_key_rank", "arch35", "gqa", dict(key=(2, 256, 256)), "key", INNER, "4 dims"),
    ("query_missing", "arch35", "gqa", dict(query=None), "query", NULL, "required"),
    ("value_missing", "arch35", "gqa", dict(value=None), "value", NULL, "required"),
    ("out_dtype_differs", "arch35", "gqa", dict(attention_out=T((2, 8, 128, 128), "bfloat16")),
     "attention_out", INNER, "dtype"),
    ("value_dtype_differs", "arch35", "gqa", dict(value=T((2, 2, 256, 128), "bfloat16")),
     "value", None, "dtype"),
    ("heads_mismatch", "arch35", "gqa", dict(num_heads=4), "query", INNER, "num_heads"),
    ("kv_heads_mismatch", "arch35", "gqa", dict(num_key_value_heads=4), "key", INNER, "num_key_value_heads"),
    ("bsh_h_not_multiple", "arch35", "gqa_bsh", dict(num_heads=3, num_key_value_heads=1,
                                                     key=(2, 256, 1024), value=(2, 256, 1024)),
     "query", INNER, "multiple of the head count"),
    ("batch_mismatch", "arch35", "gqa", dict(key=(3, 2, 256, 128), value=(3, 2, 256, 128)),
     "key", INNER, "B of key"),
    ("key_value_axes", "arch35", "gqa", dict(key=(2, 2, 256, 64)), "value", INNER, "axis 3 of key"),
    ("value_out_d", "arch35", "gqa", dict(key=(2, 2, 256, 64), value=(2, 2, 256, 64)),
     "attention_out", INNER, "D of attention_out"),
    ("key_d_differs", "arch35", "gqa", dict(key=(2, 2, 256, 64), value=(2, 2, 256, 64), attention_out=(2, 8, 128, 64)),
     "key", INNER, "D of key must equal D of query"),
    ("out_shape_differs", "arch35", "gqa", dict(attention_out=(2, 8, 64, 128)), "attention_out", INNER, ""),
    ("head_dim_too_big", "arch35", "gqa",
     dict(query=(2, 8, 128, 640), key=(2, 2, 256, 640), value=(2, 2, 256, 640), attention_out=(2, 8, 128, 640)),
     "query", INNER, "<= 512"),
    ("mla_two_kv_heads", "arch22", "mla", dict(num_key_value_heads=2, key=(8, 128, 1024), value=(8, 128, 1024),
                                              key_rope=(8, 128, 128)),
     "num_key_value_heads", INNER, "one kv head"),
    ("mla_heads_not_pow2", "arch22", "mla",
     dict(num_heads=24, query=(2, 1, 24, 512), query_rope=(2, 1, 24, 64), attention_out=(2, 1, 24, 512)),
     "num_heads", INNER, "power of two"),
    ("list_with_block_table", "arch35", "gqa",
     dict(key=[T((1, 2, 256, 128), "float16")] * 2, value=[T((1, 2, 256, 128), "float16")] * 2,
          block_table=T((2, 4), "int32"), block_size=128),
     "block_table", INNER, "tensor lists"),
    ("list_length", "arch35", "gqa",
     dict(query=(3, 8, 128, 128), attention_out=(3, 8, 128, 128),
          key=[T((1, 2, 256, 128), "float16")] * 2, value=[T((1, 2, 256, 128), "float16")] * 2),
     "key", INNER, "number of key tensors"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_common_rule(verdict_kit, case):
    _, arch, base, over, param, status, fragment = case
    err = verdict_kit.reject(arch, base, **over)
    assert err.param == param, str(err)
    if status is not None:
        assert int(err.status) == status, str(err)
    assert fragment in err.rule, str(err)


def test_common_accepts_the_bases(verdict_kit):
    for arch in ("arch22", "arch35"):
        for base in ("gqa", "gqa_bsh", "paged", "mla"):
            assert verdict_kit.accept(arch, base).route.template
