"""The legacy PFA route's TND branch (``tiling/pfa_tnd.py``): block sizes, the G fold, units and the launch."""

from __future__ import annotations

import pytest

from cvtile.tiling.pfa_tnd import tnd_block_dim, tnd_g_fold, tnd_loads, tnd_s1_block, tnd_s2_step, tnd_units
from cvtile.tiling.platform import ut_platform


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
