"""The parsed problem (``FiaInfo``) check_fia returns: axes, layouts, lengths, paged and feature flags."""

from __future__ import annotations

from cvtile.tiling.params import TensorMeta as T


def test_tnd_lengths_are_de_cumulated(verdict_kit):
    info = verdict_kit.accept("arch35", "tnd")
    assert (info.b_size, info.n1_size, info.n2_size, info.g_size) == (3, 8, 2, 4)
    assert info.actual_seq_q == (32, 64, 96) and info.is_accum_q_seq
    assert info.s1_per_batch == (32, 32, 32) and info.s2_per_batch == (64, 64, 64)
    assert (info.s1_size, info.s2_size) == (32, 64)
    assert (info.q_layout, info.kv_layout, info.out_layout) == ("TND", "TND", "TND")


def test_transposing_layout_splits_into_query_and_output(verdict_kit):
    info = verdict_kit.accept("arch22", "gqa", input_layout="BNSD_BSND", attention_out=(2, 128, 8, 128))
    assert (info.input_layout, info.q_layout, info.kv_layout, info.out_layout) == \
        ("BNSD_BSND", "BNSD", "BNSD", "BSND")


def test_paged_cache_fields(verdict_kit):
    for arch in ("arch22", "arch35"):
        info = verdict_kit.accept(arch, "paged")
        assert info.page_attention_flag and info.kv_storage_mode == "page_attention"
        assert (info.kv_layout, info.block_size, info.block_table_cols) == ("BnBsH", 128, 4)
        assert info.s2_size == 4 * 128
        assert info.actual_seq_kv == (300, 512)


def test_split_and_combined_rope(verdict_kit):
    mla = verdict_kit.accept("arch22", "mla")
    assert (mla.rope_mode, mla.mla_mode, mla.rope_head_dim, mla.qk_head_dim) == ("split", "split_d512", 64, 512)
    comb = verdict_kit.accept("arch35", "gqa", query=(2, 8, 128, 192), key=(2, 2, 256, 192),
                              value=(2, 2, 256, 128), attention_out=(2, 8, 128, 128))
    assert (comb.rope_mode, comb.mla_mode, comb.rope_head_dim) == ("combine", "combine_d128", 64)
    assert not comb.is_qkv_d_different


def test_length_list_without_values_is_the_tiling_sink(verdict_kit):
    info = verdict_kit.accept("arch35", "gqa", actual_seq_lengths_kv=T((2,), "int64"))
    assert info.is_max_workspace and info.actual_seq_kv_present and info.actual_seq_kv is None


def test_tensor_list_lengths(verdict_kit):
    keys = [T((1, 2, 100, 128), "float16"), T((1, 2, 256, 128), "float16")]
    info = verdict_kit.accept("arch35", "gqa", key=keys, value=list(keys))
    assert info.kv_storage_mode == "tensor_list"
    assert info.kv_list_seq_lens == (100, 256) and info.s2_size == 256


def test_right_down_causal_tokens_are_normalised(verdict_kit):
    info = verdict_kit.accept("arch35", "gqa", sparse_mode=3, atten_mask=T((2048, 2048), "bool"), pre_tokens=7,
                              next_tokens=9)
    assert info.atten_mask_flag
    assert (info.pre_token, info.next_token) == (2147483647, 0)


def test_quant_flags(verdict_kit):
    anti = verdict_kit.accept("arch35", "gqa", query=T((2, 8, 1, 128), "bfloat16"),
                              attention_out=T((2, 8, 1, 128), "bfloat16"), key=T((2, 2, 256, 128), "int8"),
                              value=T((2, 2, 256, 128), "int8"), key_antiquant_scale=T((2, 128), "bfloat16"),
                              value_antiquant_scale=T((2, 128), "bfloat16"))
    assert anti.quant_mode == "anti" and anti.antiquant_flag
    post = verdict_kit.accept("arch35", "gqa", attention_out=T((2, 8, 128, 128), "int8"),
                              quant_scale2=T((1,), "float32"))
    assert post.is_out_quant_enable and post.quant_mode == "no"


def test_empty_key_sets_the_empty_tensor_flag(verdict_kit):
    info = verdict_kit.accept("arch22", "gqa", key=(2, 2, 0, 128), value=(2, 2, 0, 128))
    assert info.empty_tensor_flag
    assert info.route.template == "FiaTilingEmptyTensor"
