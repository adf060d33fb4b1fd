"""The legacy PFA route's TND branch (``tiling/pfa_tnd.py``): block sizes, the G fold, units, the launch, the key
and the workspace."""

from __future__ import annotations

import pytest

from cvtile.tiling.pfa_tnd import (tnd_block_dim, tnd_g_fold, tnd_key_fields, tnd_loads, tnd_n_ratio, tnd_s1_block,
                                   tnd_s2_block, tnd_s2_step, tnd_softmax_bytes, tnd_units)
from cvtile.tiling.platform import ut_platform
from cvtile.tiling.tiling_key import decode_key, decode_pfa_tnd, encode_pfa_tnd
from cvtile.tiling.workspace import LIBAPI_WORKSPACE, pfa_tnd_workspace


@pytest.mark.parametrize("v_dim, max_q, want", [(128, 1720, 512), (64, 3000, 512), (192, 3000, 256),
                                                 (128, 100, 112), (128, 1, 16), (128, 0, 0)])
def test_s1_block_is_512_or_256_capped_by_the_longest_query(v_dim, max_q, want):
    assert tnd_s1_block(v_dim, max_q) == want


@pytest.mark.parametrize("v_dim, max_kv, want", [(128, 517, 512), (128, 10, 16), (128, 300, 384),
                                                  (192, 5000, 1024), (192, 200, 256)])
def test_s2_step_is_128_times_the_clipped_ratio(v_dim, max_kv, want):
    assert tnd_s2_step(v_dim, max_kv) == want


@pytest.mark.parametrize("q_lens, g, rope, lse, want", [((1, 1), 16, False, False, 16), ((1, 2), 8, False, False, 1),
                                                         ((1,), 17, False, False, 1), ((1,), 8, True, False, 1),
                                                         ((1,), 8, False, True, 1), ((1, 0), 4, False, False, 1)])
def test_group_folds_only_for_one_token_queries(q_lens, g, rope, lse, want):
    assert tnd_g_fold(q_lens, g, rope, lse) == want


def test_units_count_s1_blocks_per_batch_times_heads():
    assert tnd_units((399, 1720), 512, 1, 1) == 5
    assert tnd_units((399, 1720, 0), 512, 2, 4) == 40


@pytest.mark.parametrize("units, want", [(1, 1), (5, 5), (20, 20), (300, 20), (0, 0)])
def test_launch_is_one_block_per_used_cube_core(units, want):
    assert tnd_block_dim(units, ut_platform("arch22"))[1] == want


def test_loads_weigh_the_kv_each_block_sees():
    assert tnd_loads((399, 1720), (101, 416), 512, 1, False) == [256, 640, 640, 640, 640]
    # right-down causal: block j of batch b sees 512 * (j + 1) + kv - q positions, clipped to [0, kv]
    assert tnd_loads((1000,), (1200,), 512, 2, True) == [896, 1024 + 384, 896, 1024 + 384]


@pytest.mark.parametrize("max_kv, block, ratio", [(517, 128, 4), (10, 16, 1), (300, 128, 3), (0, 0, 0)])
def test_s2_block_and_ratio(max_kv, block, ratio):
    assert (tnd_s2_block(max_kv), tnd_n_ratio(128, max_kv)) == (block, ratio)
    assert tnd_n_ratio(192, 5000) == 8


@pytest.mark.parametrize("v_dim, mask, layout, cache, want", [
    (128, False, "TND", None, 4000000000000000003), (128, True, "NTD_TND", None, 4000000000000200002),
    (64, False, "NTD_TND", "BnBsH", 4000000000010200003), (128, True, "TND", "BnNBsD", 4000000000010000002),
    (128, False, "TND", "NZ", 4000000000020000003), (192, False, "TND", None, 4000000000000000001),
    (192, True, "TND", None, 4000000000000000000)])
def test_key_is_template_layout_and_cache_digits_over_4e18(v_dim, mask, layout, cache, want):
    key = encode_pfa_tnd(tnd_key_fields(v_dim, mask, layout, cache))
    assert key == want
    dec = decode_key(key, "arch22")
    assert dec == decode_pfa_tnd(key) and encode_pfa_tnd(dec) == key
    assert dec["mask"] is mask and dec["v_dim_le_128"] is (v_dim <= 128)


@pytest.mark.parametrize("q_dtype, ip, pse, want", [("bfloat16", 1, False, 4), ("bfloat16", 0, False, 4),
                                                     ("float16", 1, False, 2), ("float16", 3, False, 2),
                                                     ("float16", 0, False, 4), ("float16", 2, False, 4),
                                                     ("float16", 1, True, 4), ("int8", 0, False, 2)])
def test_softmax_dtype_is_fp16_only_for_fast_fp16_or_int8(q_dtype, ip, pse, want):
    assert tnd_softmax_bytes(q_dtype, ip, pse) == want


def test_workspace_is_three_score_and_four_output_tiles_per_cube_core():
    # S1 block 512, S2 block 128 x nRatio 4, D 128, fp32, 20 AIC (rand_arch22_2_07021)
    ws = pfa_tnd_workspace(aic=20, s1_block=512, s2_block=128, n_ratio=4, g_base=1, d_aligned=128, softmax_bytes=4)
    assert ws.total == 100663296
    assert ws.layout["pfa_scores"][1] == 3 * 4 * 512 * 128 * 4 * 20
    assert ws.layout["pfa_out"][1] == 4 * 512 * 128 * 4 * 20 and ws.layout["libapi"] == (0, LIBAPI_WORKSPACE)
    # the folded group multiplies the score tile: G 16, S1 block 16, S2 block 16, one step (rand_arch22_2_07141)
    assert pfa_tnd_workspace(aic=20, s1_block=16, s2_block=16, n_ratio=1, g_base=16, d_aligned=128,
                             softmax_bytes=4).total == 18415616
