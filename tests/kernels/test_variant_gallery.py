"""The variant gallery: every entry compiled into the FIA kernel and judged against the float64 golden.

Each entry costs one kernel compile, so the default tier runs soft-capping (a tanh score_mod) and the
document mask (a captured tensor read with ct.gather); causal + sink and the paged decode run in the slow tier,
the mask variants and the relative-position table in the wide tier. The line-count test
pins the "a variant is at most 10 lines" promise for every entry.
"""

from __future__ import annotations

import inspect

import ml_dtypes
import numpy as np
import pytest

from cvtile.kernels import compare
from cvtile.kernels.variants import attention, variant_golden
from cvtile.kernels.variants.gallery import (GALLERY, alibi, causal, document, prefix_lm, rel_bias, sliding_window,
                                             soft_cap)

ARGS = {"soft_cap": (50.0,), "alibi": (4,), "causal": (), "sliding_window": (64,), "prefix_lm": (32,),
        "document": (256,), "rel_bias": (16,)}


def _prefill(s=256, seed=0, spread=2.0):
    rng = np.random.default_rng(seed)
    q = (rng.standard_normal((2, 4, s, 64)) * spread).astype(np.float16)
    k = (rng.standard_normal((2, 2, s, 64)) * spread).astype(np.float16)
    v = rng.standard_normal((2, 2, s, 64)).astype(np.float16)
    kw = dict(num_heads=4, num_key_value_heads=2, input_layout="BNSD", scale=0.125, softmax_lse_flag=True)
    return q, k, v, kw


def _check(q, k, v, kw, **mods):
    out, lse = attention(q, k, v, **mods, **kw)
    g_out, g_lse = variant_golden(q, k, v, **mods, **kw)
    rep = compare(out, g_out, q.dtype, name="attention_out")
    assert rep.passed, rep
    finite = np.isfinite(g_lse)
    assert np.array_equal(np.isfinite(lse), finite)
    assert compare(lse[finite], g_lse[finite], np.float32, rtol=1e-4, atol=1e-4).passed
    return out


@pytest.mark.parametrize("name", sorted(GALLERY))
def test_every_gallery_variant_is_at_most_ten_lines(name):
    fn = GALLERY[name](*ARGS[name])
    lines = [ln for ln in inspect.getsource(fn.fn).splitlines() if ln.strip()]
    assert len(lines) <= 10, lines


@pytest.mark.slow
def test_soft_cap_squashes_large_scores_as_the_golden_does():
    q, k, v, kw = _prefill(spread=4.0)          # scores well beyond the cap
    _check(q, k, v, kw, score_mod=soft_cap(20.0))


def test_document_mask_reads_its_captured_ids_with_gather():
    q, k, v, kw = _prefill()
    rng = np.random.default_rng(3)
    ids = np.sort(rng.integers(0, 5, size=(2, 256)), axis=1).astype(np.int32)   # packed documents per batch
    _check(q, k, v, kw, mask_mod=document(256), mod_args=(ids.reshape(-1),))


@pytest.mark.wide
def test_relative_position_bias_table():
    q, k, v, kw = _prefill()
    table = np.random.default_rng(4).standard_normal((4, 33)).astype(np.float32)
    _check(q, k, v, kw, score_mod=rel_bias(16), mod_args=(table.reshape(-1),))


@pytest.mark.wide
@pytest.mark.parametrize("mods", [dict(score_mod=alibi(4), mask_mod=causal()), dict(mask_mod=prefix_lm(32)),
                                  dict(mask_mod=sliding_window(64))], ids=["alibi+causal", "prefix_lm", "window"])
def test_mask_variants(mods):
    q, k, v, kw = _prefill(s=300)
    _check(q, k, v, kw, **mods)


@pytest.mark.slow
def test_causal_with_a_learnable_sink():
    q, k, v, kw = _prefill(s=300)
    sink = np.random.default_rng(5).standard_normal(4).astype(ml_dtypes.bfloat16)
    out, _ = attention(q, k, v, mask_mod=causal(), learnable_sink=sink, **kw)
    g_out, _ = variant_golden(q, k, v, mask_mod=causal(), learnable_sink=sink, **kw)
    assert compare(out, g_out, q.dtype).passed


@pytest.mark.slow
def test_decode_on_a_paged_cache_with_soft_cap():
    rng = np.random.default_rng(6)
    b, n, n2, d, bs, lens = 2, 8, 2, 64, 128, [700, 1500]
    per = -(-max(lens) // bs)
    q = (rng.standard_normal((b, 1, n * d)) * 2).astype(np.float16)
    kc = (rng.standard_normal((b * per, bs, n2 * d)) * 2).astype(np.float16)
    vc = rng.standard_normal((b * per, bs, n2 * d)).astype(np.float16)
    table = rng.permutation(b * per).reshape(b, per).astype(np.int32)
    kw = dict(num_heads=n, num_key_value_heads=n2, input_layout="BSH", scale=0.125, block_table=table,
              block_size=bs, actual_seq_lengths_kv=lens, softmax_lse_flag=True)
    _check(q, kc, vc, kw, score_mod=soft_cap(30.0))
