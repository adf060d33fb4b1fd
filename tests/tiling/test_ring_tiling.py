"""The RingAttentionUpdate tiling mirror: op_host's core split and UB pass on a few shapes, and its invariants.

The rules (op_host ring_attention_update_tiling.cpp, restated in cvtile.tiling.ring_attention_update):

* SBH: BN = B*N; groups = gcd(BN, AIV cores); a group's AIV/groups cores cut S into runs of
  ceil(S / (AIV/groups)); cores per group = ceil(S / run); core_num = groups * cores per group;
* TND: runs of ceil(T / AIV) tokens, core_num = ceil(T / run), the last core the tail;
* SBH UB pass: head_dim_loop_each = D rounded up to 64 (D below the widest 8-position pass), positions =
  UB // (8*56 + lanes*(6*dtype bytes + 8)), at most 255, a multiple of 8;
* TND UB pass: heads = (196608 - 64*(6*bytes + 8) - 64*56) // (D*(6*bytes + 8) + 8*56), capped at N.

Ascend910B1 has 48 AIV cores and a 192 KiB UB.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from cvtile.tiling.ring_attention_update import tile_ring_attention_update


def sbh(s, b, n, d, dtype=np.float16):
    a = np.zeros((s, b, n * d), dtype)
    m = np.zeros((b, n, s, 8), np.float32)
    return dict(prev_attn_out=a, cur_attn_out=a, prev_softmax_max=m, prev_softmax_sum=m, cur_softmax_max=m,
                cur_softmax_sum=m)


def tnd(t, n, d, lens, dtype=np.float16):
    a = np.zeros((t, n, d), dtype)
    m = np.zeros((t, n, 8), np.float32)
    return dict(prev_attn_out=a, cur_attn_out=a, prev_softmax_max=m, prev_softmax_sum=m, cur_softmax_max=m,
                cur_softmax_sum=m, actual_seq_qlen=np.array(lens, np.int64))


@pytest.mark.parametrize("shape,want", [
    # (S, B, N, D) -> (groups, cores per group, bn per group, seq each, seq tail, core_num)
    ((37, 2, 3, 64), (6, 8, 1, 5, 2, 48)),      # gcd(6, 48) = 6 groups of 8 cores, runs of ceil(37/8) = 5
    ((100, 1, 5, 64), (1, 34, 5, 3, 1, 34)),    # gcd 1: runs of ceil(100/48) = 3, only 34 runs exist
    ((7, 2, 48, 128), (48, 1, 2, 7, 7, 48)),    # gcd(96, 48) = 48: one core per group, two (b, n) each
    ((1, 1, 1, 64), (1, 1, 1, 1, 1, 1)),
])
def test_sbh_core_split(shape, want):
    t = tile_ring_attention_update(sbh(*shape), "SBH")
    got = (t.groups, t.cores_per_group, t.bn_per_group, t.seq_core_each, t.seq_core_tail, t.core_num)
    assert got == want, t.explain()
    assert t.tiling_key == 0 and t.head_dim == shape[3]


@pytest.mark.parametrize("t_len,want", [(20, (1, 20, 1)), (916, (20, 46, 16)), (48, (1, 48, 1)), (49, (2, 25, 1))])
def test_tnd_core_split(t_len, want):
    t = tile_ring_attention_update(tnd(t_len, 3, 64, [0, t_len]), "TND")
    assert (t.t_core_each, t.core_num, t.t_core_tail) == want, t.explain()


def test_ub_pass_sizes_and_keys():
    t = tile_ring_attention_update(sbh(37, 2, 3, 64), "SBH")
    assert (t.head_dim_loop_each, t.seq_loop_each) == (64, 112)     # 196608 // (448 + 64*20) = 113 -> 112
    t = tile_ring_attention_update(sbh(37, 2, 3, 100, np.float32), "SBH")
    assert (t.head_dim_loop_each, t.seq_loop_each, t.tiling_key) == (128, 40, 2)   # 196608 // (448+128*32) = 43
    t = tile_ring_attention_update(tnd(20, 300 // 3, 64, [0, 20]), "TND")
    assert t.head_num_loop_each == 100 and t.tiling_key == 10      # 191744 // 1728 = 110, capped at N = 100
    t = tile_ring_attention_update(tnd(20, 4, 768, [0, 20], np.float32), "TND", "TND")
    assert t.head_num_loop_each == (196608 - 64 * 32 - 64 * 56) // (768 * 32 + 448) and t.tiling_key == 12
    assert t.softmax_layout == "TND"
    t = tile_ring_attention_update(tnd(20, 4, 64, [0, 20], ml_dtypes.bfloat16), "TND")
    assert t.tiling_key == 11 and t.softmax_layout == "BNS8"
    assert any(d.what == "head_num_loop_each" for d in t.decisions) and "t_core_each" in t.explain()


@pytest.mark.parametrize("shape", [(37, 2, 3, 64), (100, 1, 5, 64), (7, 2, 48, 128), (300, 3, 7, 64)])
def test_every_sbh_row_on_exactly_one_core(shape):
    s, b, n, _ = shape
    t = tile_ring_attention_update(sbh(*shape), "SBH")
    seen = np.zeros((b * n, s), int)
    for c in range(t.core_num):
        first, count = t.core_rows(c)
        assert count > 0
        for bn in t.core_bn(c):
            seen[bn, first:first + count] += 1
    assert (seen == 1).all()


@pytest.mark.parametrize("t_len", [1, 20, 47, 916])
def test_every_tnd_token_on_exactly_one_core(t_len):
    t = tile_ring_attention_update(tnd(t_len, 2, 64, [0, t_len]), "TND")
    seen = np.zeros(t_len, int)
    for c in range(t.core_num):
        first, count = t.core_rows(c)
        assert count > 0
        seen[first:first + count] += 1
    assert (seen == 1).all()
