"""Attention variants: score_mod / mask_mod hooks in the FIA kernel, block skipping, the host evaluation.

Each hooked call is judged against ``variant_golden`` (the float64 FIA golden with the same hooks applied
in numpy) under the upstream tolerance classes. Every distinct hook is one more kernel compile, so the
default tier holds a sliding window (block skipping) and the error paths; ALiBi (a score_mod) and the
pipelined order run in the slow tier, the other gallery entries in test_variant_gallery.py.
"""

from __future__ import annotations

import numpy as np
import pytest

import cvtile.dsl as ct
from cvtile.dsl import CompilationError
from cvtile.kernels import compare, npu_fused_infer_attention_score
from cvtile.kernels.variants import (Hooks, VariantError, attention, host_function, variant_block_map,
                                     variant_golden)
from cvtile.kernels.variants.block_map import (EMPTY, FULL, PARTIAL, balance_tasks, classify_blocks, live_span,
                                              plan_block_map)
from cvtile.kernels.variants.gallery import alibi, causal, prefix_lm, sliding_window
from cvtile.tiling.result import RowTask


def _inputs(b=1, n=4, n2=2, s=2048, d=64, seed=0, dtype=np.float16):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((b, n, s, d)).astype(dtype)
    k = rng.standard_normal((b, n2, s, d)).astype(dtype)
    v = rng.standard_normal((b, n2, s, d)).astype(dtype)
    kw = dict(num_heads=n, num_key_value_heads=n2, input_layout="BNSD", scale=1.0 / np.sqrt(d),
              softmax_lse_flag=True)
    return q, k, v, kw


def _judge(out, lse, q, k, v, kw, **mods):
    g_out, g_lse = variant_golden(q, k, v, **mods, **kw)
    rep = compare(out, g_out, q.dtype, name="attention_out")
    assert rep.passed, rep
    finite = np.isfinite(g_lse)
    assert np.array_equal(np.isfinite(lse), finite)
    rep = compare(lse[finite], g_lse[finite], np.float32, rtol=1e-4, atol=1e-4, name="softmax_lse")
    assert rep.passed, rep


@pytest.mark.slow
def test_sliding_window_skips_empty_blocks_and_matches_the_golden():
    q, k, v, kw = _inputs()
    mm = sliding_window(128)
    bmap = variant_block_map(q, k, v, mask_mod=mm, **kw)
    assert bmap.total > bmap.visited > 0 and bmap.density < 0.6, bmap.summary()
    out, lse = attention(q, k, v, mask_mod=mm, **kw)
    _judge(out, lse, q, k, v, kw, mask_mod=mm)
    # skipping only leaves out blocks and columns that would add exp(-inf) = 0 with alpha = 1: the dense run's
    # result up to the fp32 summation order over the narrower blocks. That order is the host's: the scores are
    # BLAS sgemm, whose order depends on the call's shape on some hosts (an AMD EPYC: 16 of 524288 outputs
    # beyond one fp16 ulp, near zero), so the two runs are held to the kernel's own tolerance, not to one ulp
    assert bmap.live < bmap.columns, bmap.summary()
    dense_out, dense_lse = attention(q, k, v, mask_mod=mm, block_sparse=False, **kw)
    rep = compare(out, dense_out, q.dtype, name="attention_out (sparse vs dense)")
    assert rep.passed, rep
    np.testing.assert_allclose(lse, dense_lse, rtol=1e-6, atol=1e-6)


@pytest.mark.slow
def test_alibi_score_mod_matches_the_golden():
    q, k, v, kw = _inputs(s=600)
    sm = alibi(4)
    out, lse = attention(q, k, v, score_mod=sm, **kw)
    _judge(out, lse, q, k, v, kw, score_mod=sm)


def test_without_hooks_attention_is_the_operator_bitwise():
    q, k, v, kw = _inputs(s=200)
    out, lse = attention(q, k, v, **kw)
    ref, ref_lse = npu_fused_infer_attention_score(q, k, v, **kw)
    assert np.array_equal(out, ref) and np.array_equal(lse, ref_lse)


def test_a_hook_that_is_not_inline_is_refused_naming_the_parameter():
    q, k, v, kw = _inputs(s=64)
    with pytest.raises(VariantError, match="score_mod.*@cvtile.dsl.inline"):
        attention(q, k, v, score_mod=lambda s, b, h, qi, ki: s, **kw)
    with pytest.raises(VariantError, match="mod_args"):
        Hooks(mask_mod=causal(), captures=tuple(np.zeros(1) for _ in range(5)))


def test_a_hook_the_language_cannot_express_fails_at_the_hooks_line():
    @ct.inline
    def bad_mod(score, b, h, q_idx, kv_idx):
        return np.tanh(score)             # a numpy call on a tile: not the tile language

    q, k, v, kw = _inputs(s=64)
    with pytest.raises(CompilationError) as info:
        attention(q, k, v, score_mod=bad_mod, **kw)
    assert "test_variants.py" in str(info.value) and "np.tanh" in str(info.value)


def test_host_evaluation_rebinds_builtins_to_numpy():
    fn = host_function(sliding_window(3))
    keep = fn(0, np.zeros((1, 1)), np.arange(6)[:, None], np.arange(6)[None, :])
    assert keep.dtype == bool and keep.sum() == 3 + 3 + 3 + 3 + 2 + 1
    assert np.array_equal(keep, np.tril(np.ones((6, 6), bool)) & ~np.tril(np.ones((6, 6), bool), -3))


def test_block_classes_follow_the_mask_inside_the_valid_extents():
    # one task of 8 rows (G=1, positions 0..7) over 4 blocks of 4 KV positions, KV length 14
    task = RowTask(b=0, n2=0, m_start=0, m_rows=8, s2_lo=0, s2_hi=4)
    bmap = classify_blocks([task], Hooks(mask_mod=causal()), s2_base=4, qlen=[8], kvlen=[14], group=1,
                           order="GS1")
    assert list(bmap.classes[0]) == [PARTIAL, PARTIAL, EMPTY, EMPTY]
    bmap = classify_blocks([task], Hooks(mask_mod=prefix_lm(8)), s2_base=4, qlen=[8], kvlen=[14], group=1,
                           order="GS1")
    assert list(bmap.classes[0]) == [FULL, FULL, EMPTY, EMPTY]
    blocks, ptr = bmap.table()
    assert blocks.tolist() == [[0, 1, 0, 4], [1, 1, 0, 4]] and ptr.tolist() == [0, 2]


@ct.inline
def _reach_grows_with_the_row(b, h, q_idx, kv_idx):
    return kv_idx < (q_idx + 1) * 256


@pytest.mark.slow
def test_half_height_passes_with_the_flash_decode_split_match_the_golden():
    """A mask whose rows reach further the later they sit takes half-height row passes; with a long KV the
    tiling also splits the rows (flash decode): each pass writes its rows of the split row's workspace slot
    from its own first row, and the combine merges them."""
    from cvtile.dsl.jit import record_launches

    rng = np.random.default_rng(5)
    q = rng.standard_normal((1, 64, 8, 128)).astype(np.float16)
    k, v = (rng.standard_normal((1, 16384, 1, 128)).astype(np.float16) for _ in range(2))
    kw = dict(num_heads=8, num_key_value_heads=1, input_layout="BSND", scale=128 ** -0.5, softmax_lse_flag=True)
    bmap = variant_block_map(q, k, v, mask_mod=_reach_grows_with_the_row, **kw)
    assert bmap.height == 256 and 0 < bmap.visited < bmap.total, bmap.summary()
    with record_launches() as rec:
        out, lse = attention(q, k, v, mask_mod=_reach_grows_with_the_row, **kw)
    assert [r.kernel.name for r in rec.launches] == ["fia_attention", "fia_fd_combine"]
    _judge(out, lse, q, k, v, kw, mask_mod=_reach_grows_with_the_row)


def test_partial_blocks_are_visited_over_their_live_columns_only():
    # rows at positions 64..127 under a causal window of 20 over S2 blocks of 64, KV length 120: block 0 keeps
    # columns 45..63 (row 64 sees 45..64), widened to the fractal's 16 -> (32, 32); block 1 keeps 64..119,
    # clipped to the KV length -> (0, 56)
    task = RowTask(b=0, n2=0, m_start=64, m_rows=56, s2_lo=0, s2_hi=2)
    bmap = classify_blocks([task], Hooks(mask_mod=sliding_window(20)), s2_base=64, qlen=[120], kvlen=[120],
                           group=1, order="GS1")
    assert list(bmap.classes[0]) == [PARTIAL, PARTIAL]
    blocks, _ = bmap.table()
    assert blocks.tolist() == [[0, 0, 32, 32], [1, 0, 0, 56]]
    assert (bmap.columns, bmap.live) == (120, 88) and "73.3% of the visited blocks' columns live" in bmap.summary()
    assert live_span(np.array([False] * 17 + [True] + [False] * 14)) == (16, 16)
    assert live_span(np.array([True] + [False] * 40)) == (0, 16)
    assert live_span(np.array([False] * 40 + [True])) == (32, 9)


def test_block_map_takes_half_height_passes_where_they_visit_fewer_pairs():
    # a task of 512 rows at positions 512..1023 under a causal window of 256 over S2 blocks of 512: whole, it
    # visits block 0's columns 256..511 (row 512 reaches back to 257) and all of block 1 for all 512 rows; in two
    # passes of 256 the bottom half skips block 0 and the top half visits only block 1's first 256 columns
    task = RowTask(b=0, n2=0, m_start=512, m_rows=512, s2_lo=0, s2_hi=2)
    args = dict(s2_base=512, qlen=[1024], kvlen=[1024], group=1, order="GS1")
    whole = classify_blocks([task], Hooks(mask_mod=sliding_window(256)), **args)
    assert whole.pairs == 512 * (256 + 512)
    bmap = plan_block_map([task], Hooks(mask_mod=sliding_window(256)), m_cap=512, **args)
    assert bmap.height == 256 and len(bmap.tasks) == 2
    blocks, ptr = bmap.table()
    assert blocks.tolist() == [[0, 0, 256, 256], [1, 0, 0, 256], [1, 0, 0, 512]] and ptr.tolist() == [0, 2, 3]
    assert bmap.pairs == 256 * (256 + 256 + 512) < 0.9 * whole.pairs
    # a causal diagonal block: the top half visits half the columns (64 x 64 + 64 x 128 pairs, 25 % fewer)
    square = RowTask(b=0, n2=0, m_start=0, m_rows=128, s2_lo=0, s2_hi=1)
    small = dict(args, s2_base=128, qlen=[128], kvlen=[128])
    halved = plan_block_map([square], Hooks(mask_mod=causal()), m_cap=128, **small)
    assert halved.height == 64 and halved.pairs == 64 * 64 + 64 * 128
    # a mask that keeps everything gains nothing from halves: the whole task stays
    kept = plan_block_map([square], Hooks(mask_mod=prefix_lm(128)), m_cap=128, **small)
    assert kept.height == 128 and kept.tasks == (square,) and kept.full == 1


def test_block_maps_are_memoised_by_hook_captures_and_geometry():
    from cvtile.kernels.variants.gallery import document

    task = RowTask(b=0, n2=0, m_start=0, m_rows=8, s2_lo=0, s2_hi=2)
    docs = np.array([0] * 4 + [1] * 4, np.int32)
    args = dict(s2_base=4, qlen=[8], kvlen=[8], group=1, order="GS1")
    first = classify_blocks([task], Hooks(mask_mod=document(8), captures=(docs,)), **args)
    assert list(first.classes[0]) == [PARTIAL, PARTIAL]        # two documents of 4 positions
    again = classify_blocks([task], Hooks(mask_mod=document(8), captures=(docs.copy(),)), **args)
    assert again is first and not first.classes[0].flags.writeable
    # new capture contents are a new map
    other = classify_blocks([task], Hooks(mask_mod=document(8), captures=(np.zeros(8, np.int32),)), **args)
    assert other is not first and list(other.classes[0]) == [FULL, FULL]
    # and so are new lengths
    shorter = classify_blocks([task], Hooks(mask_mod=document(8), captures=(docs,)), **dict(args, kvlen=[4]))
    assert shorter is not first and list(shorter.classes[0]) == [PARTIAL, EMPTY]


def test_balance_tasks_cuts_equal_shares_in_order():
    assert balance_tasks([1, 1, 1, 1], 2) == [0, 2, 4]
    assert balance_tasks([8, 1, 1, 1, 1], 2) == [0, 1, 5]
    assert balance_tasks([1, 1], 4)[-1] == 2


@pytest.mark.slow
def test_hooked_kernel_pipelined_order_is_bitwise_the_program_order():
    q, k, v, kw = _inputs(s=1100)
    mods = dict(score_mod=alibi(4), mask_mod=sliding_window(300))
    a = attention(q, k, v, **mods, **kw)
    b = attention(q, k, v, **mods, order="pipelined", **kw)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


@ct.inline
def _printing_causal(b, h, q_idx, kv_idx):
    ct.device_print("mask_mod", b)     # one line each time the kernel evaluates the mask
    return q_idx >= kv_idx


@pytest.mark.slow
def test_full_blocks_skip_the_mask_evaluation(capsys):
    q, k, v, kw = _inputs(n=1, n2=1, s=1024)
    bmap = variant_block_map(q, k, v, mask_mod=_printing_causal, **kw)
    assert bmap.full > 0 and bmap.visited > bmap.full, bmap.summary()
    capsys.readouterr()
    out, lse = attention(q, k, v, mask_mod=_printing_causal, **kw)
    # one line per (task, block) evaluated (a row-chunked pass prints the same line once per chunk)
    evaluated = {ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("device_print 'mask_mod'")}
    assert len(evaluated) == bmap.visited - bmap.full, sorted(evaluated)     # the partial blocks only
    _judge(out, lse, q, k, v, kw, mask_mod=_printing_causal)
