"""The documented semantics decisions of fia_golden: invalid rows, empty kv, lse fill values, invariances, errors."""

from __future__ import annotations

import math
import time

import ml_dtypes
import numpy as np
import pytest

from cvtile.kernels.errors import UnsupportedParameterError
from cvtile.tiling.errors import ParamError
from cvtile.kernels.golden import (LSE_EMPTY_LEGACY_DECODE, fia_golden, fia_golden_lowp, is_legacy_decode,
                                   mask_template)
from cvtile.kernels.golden.layouts import from_bnsd, from_tnd, to_bnsd, to_tnd


def _rand(rng, shape, dtype=np.float16):
    return rng.uniform(-1, 1, shape).astype(np.float32).astype(dtype)


def _bnsd(rng, b=2, n=4, n2=2, s1=3, s2=6, d=8, dtype=np.float16):
    return _rand(rng, (b, n, s1, d), dtype), _rand(rng, (b, n2, s2, d), dtype), _rand(rng, (b, n2, s2, d), dtype)


KW = dict(num_heads=4, num_key_value_heads=2, scale=0.35, softmax_lse_flag=True)


def test_fully_masked_rows_give_zero_and_inf_lse_for_every_inner_precise():
    rng = np.random.default_rng(1)
    q, k, v = _bnsd(rng)
    mask = np.zeros((2, 1, 3, 6), dtype=bool)
    mask[0, 0, 1] = True  # batch 0, row 1 sees nothing
    for ip in range(5):
        out, lse = fia_golden(q, k, v, input_layout="BNSD", atten_mask=mask, sparse_mode=1, inner_precise=ip, **KW)
        assert not out[0, :, 1].any()
        assert np.isposinf(lse[0, :, 1]).all()
        assert np.isfinite(lse[0, :, 0]).all() and np.isfinite(lse[1]).all()


def test_sink_does_not_rescue_a_fully_masked_row():
    rng = np.random.default_rng(2)
    q, k, v = _bnsd(rng)
    mask = np.zeros((3, 6), dtype=bool)
    mask[2] = True
    out, lse = fia_golden(q, k, v, input_layout="BNSD", atten_mask=mask, sparse_mode=1,
                          learnable_sink=np.full(4, 2.0, np.float16), **KW)
    assert not out[:, :, 2].any() and np.isposinf(lse[:, :, 2]).all()


def test_sparse3_with_more_queries_than_keys_has_invalid_rows():
    rng = np.random.default_rng(3)
    q, k, v = _bnsd(rng, s1=6, s2=3)
    out, lse = fia_golden(q, k, v, input_layout="BNSD", atten_mask=mask_template(), sparse_mode=3, **KW)
    # right-down causal: row i sees j <= i - 3, so rows 0..2 see nothing
    assert not out[:, :, :3].any() and np.isposinf(lse[:, :, :3]).all()
    assert np.isfinite(lse[:, :, 3:]).all()


def test_empty_kv_tensor_gives_zeros_and_inf_lse_even_on_the_legacy_decode_route():
    rng = np.random.default_rng(4)
    q = _rand(rng, (2, 1, 32))
    k = np.zeros((2, 0, 16), np.float16)
    out, lse = fia_golden(q, k, k, input_layout="BSH", **KW)
    assert out.shape == (2, 1, 32) and not out.any()
    assert lse.shape == (2, 4, 1, 1) and np.isposinf(lse).all()


def test_zero_kv_batch_lse_depends_on_route():
    rng = np.random.default_rng(5)
    q, k, v = _bnsd(rng, s1=1)
    lens = dict(actual_seq_lengths_kv=[0, 6])
    # legacy decode route (BNSD, S1 == 1, D == Dv): the kernel's IFA-compatible init -3.4e38
    out, lse = fia_golden(q, k, v, input_layout="BNSD", **lens, **KW)
    assert not out[0].any() and (lse[0] == LSE_EMPTY_LEGACY_DECODE).all()
    assert LSE_EMPTY_LEGACY_DECODE == float(np.float32(-3.4e38))
    # same data through BNSD_BSND (not the legacy route): +inf
    out2, lse2 = fia_golden(q, k, v, input_layout="BNSD_BSND", **lens, **KW)
    assert np.isposinf(lse2[0]).all()
    np.testing.assert_array_equal(lse2[1], lse[1])
    # prefill: +inf, and the rows stay 0
    q3, k3, v3 = _bnsd(rng, s1=3)
    out3, lse3 = fia_golden(q3, k3, v3, input_layout="BNSD", **lens, **KW)
    assert not out3[0].any() and np.isposinf(lse3[0]).all()


def test_is_legacy_decode():
    assert is_legacy_decode("BSH", 1, 128, 128)
    assert not is_legacy_decode("BNSD_BSND", 1, 128, 128)
    assert not is_legacy_decode("BSND", 2, 128, 128)
    assert not is_legacy_decode("BNSD", 1, 192, 128)


def test_padding_rows_are_zero_with_empty_lse():
    rng = np.random.default_rng(6)
    q, k, v = _bnsd(rng, s1=5)
    out, lse = fia_golden(q, k, v, input_layout="BNSD", actual_seq_lengths=[2, 5], **KW)
    assert not out[0, :, 2:].any() and np.isposinf(lse[0, :, 2:]).all()


def test_token_layout_rows_beyond_last_length_are_zero():
    rng = np.random.default_rng(7)
    q = _rand(rng, (8, 4, 8))
    k = _rand(rng, (9, 2, 8))
    out, lse = fia_golden(q, k, k, input_layout="TND", actual_seq_lengths=[2, 5], actual_seq_lengths_kv=[4, 9],
                          **KW)
    assert lse.shape == (8, 4, 1)
    assert not out[5:].any() and np.isposinf(lse[5:]).all() and np.isfinite(lse[:5]).all()


@pytest.mark.parametrize("layout", ["BSH", "BSND", "BNSD_BSND", "BSND_NBSD"])
def test_layout_invariance(layout):
    rng = np.random.default_rng(8)
    q, k, v = _bnsd(rng, s1=4, s2=7)
    mask = rng.random((2, 1, 4, 7)) < 0.3
    ref, ref_lse = fia_golden(q, k, v, input_layout="BNSD", atten_mask=mask, **KW)
    lay_in, _, lay_out = layout.partition("_")
    out, lse = fia_golden(from_bnsd(q, lay_in), from_bnsd(k, lay_in), from_bnsd(v, lay_in), input_layout=layout,
                          atten_mask=mask, **KW)
    np.testing.assert_array_equal(to_bnsd(out, lay_out or lay_in, 4), ref)
    np.testing.assert_array_equal(lse, ref_lse)


def test_token_layout_invariance_and_batch_equivalence():
    rng = np.random.default_rng(9)
    q, k, v = _bnsd(rng, b=2, s1=3, s2=5)
    ref, ref_lse = fia_golden(q, k, v, input_layout="BNSD", **KW)
    q_t = np.concatenate([q[b].transpose(1, 0, 2) for b in range(2)])
    k_t = np.concatenate([k[b].transpose(1, 0, 2) for b in range(2)])
    v_t = np.concatenate([v[b].transpose(1, 0, 2) for b in range(2)])
    lens = dict(actual_seq_lengths=[3, 6], actual_seq_lengths_kv=[5, 10])
    out, lse = fia_golden(q_t, k_t, v_t, input_layout="TND", **lens, **KW)
    out2, lse2 = fia_golden(from_tnd(q_t, "NTD"), from_tnd(k_t, "NTD"), from_tnd(v_t, "NTD"),
                            input_layout="NTD_TND", **lens, **KW)
    np.testing.assert_array_equal(out, out2)
    np.testing.assert_array_equal(lse, lse2)
    np.testing.assert_allclose(out.reshape(2, 3, 4, 8).transpose(0, 2, 1, 3), ref, rtol=0, atol=1e-15)
    np.testing.assert_allclose(lse.reshape(2, 3, 4).transpose(0, 2, 1), ref_lse[..., 0], rtol=0, atol=1e-14)
    np.testing.assert_array_equal(to_tnd(from_tnd(q_t, "NTD"), "NTD"), q_t)


def test_gqa_equals_repeated_kv_heads():
    rng = np.random.default_rng(10)
    q, k, v = _bnsd(rng, n=8, n2=2)
    out, lse = fia_golden(q, k, v, input_layout="BNSD", num_heads=8, num_key_value_heads=2, scale=0.3,
                          softmax_lse_flag=True)
    out_r, lse_r = fia_golden(q, np.repeat(k, 4, axis=1), np.repeat(v, 4, axis=1), input_layout="BNSD",
                              num_heads=8, num_key_value_heads=0, scale=0.3, softmax_lse_flag=True)
    np.testing.assert_allclose(out, out_r, rtol=0, atol=1e-15)
    np.testing.assert_allclose(lse, lse_r, rtol=0, atol=1e-14)


def test_lse_flag_off_returns_none_and_lse_formula():
    rng = np.random.default_rng(11)
    q, k, v = _bnsd(rng, n=2, n2=2, b=1, s1=1, s2=4)
    out, lse = fia_golden(q, k, v, input_layout="BNSD", num_heads=2, scale=0.5)
    assert lse is None
    _, lse = fia_golden(q, k, v, input_layout="BNSD", num_heads=2, scale=0.5, softmax_lse_flag=True)
    s = 0.5 * np.einsum("hd,hjd->hj", q[0, :, 0].astype(np.float64), k[0].astype(np.float64))
    np.testing.assert_allclose(lse[0, :, 0, 0], np.log(np.exp(s).sum(-1)), rtol=1e-14)


def test_lowp_rounds_p_only():
    rng = np.random.default_rng(12)
    q, k, v = _bnsd(rng, s1=4, s2=64)
    ref, ref_lse = fia_golden(q, k, v, input_layout="BNSD", **KW)
    low, low_lse = fia_golden_lowp(q, k, v, input_layout="BNSD", **KW)
    np.testing.assert_array_equal(low_lse, ref_lse)
    diff = np.abs(low - ref).max()
    assert 0 < diff < 2e-3
    bf, _ = fia_golden(q, k, v, input_layout="BNSD", p_dtype=ml_dtypes.bfloat16, **KW)
    assert np.abs(bf - ref).max() > diff


def test_bf16_inputs_convert_exactly():
    rng = np.random.default_rng(13)
    q, k, v = _bnsd(rng, dtype=ml_dtypes.bfloat16)
    a, _ = fia_golden(q, k, v, input_layout="BNSD", **KW)
    b, _ = fia_golden(q.astype(np.float32), k.astype(np.float32), v.astype(np.float32), input_layout="BNSD", **KW)
    np.testing.assert_array_equal(a, b)


def test_chunking_does_not_change_results(monkeypatch):
    import cvtile.kernels.golden.fia as fia_mod

    rng = np.random.default_rng(14)
    q, k, v = _bnsd(rng, s1=9, s2=13)
    kw = dict(input_layout="BNSD", atten_mask=mask_template(), sparse_mode=4, pre_tokens=3, next_tokens=1,
              pse_shift=_rand(rng, (2, 4, 9, 13)), **KW)
    ref, ref_lse = fia_golden(q, k, v, **kw)
    monkeypatch.setattr(fia_mod, "CHUNK_ELEMENTS", 20)
    out, lse = fia_golden(q, k, v, **kw)
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-15)
    np.testing.assert_allclose(lse[np.isfinite(lse)], ref_lse[np.isfinite(ref_lse)], rtol=0, atol=1e-14)


def test_nan_inputs_propagate():
    rng = np.random.default_rng(15)
    q, k, v = _bnsd(rng, b=1, s1=1)
    q[0, 0, 0, 0] = np.nan
    out, _ = fia_golden(q, k, v, input_layout="BNSD", **KW)
    assert np.isnan(out[0, 0]).all() and np.isfinite(out[0, 1:]).all()


@pytest.mark.parametrize("param", ["dequant_scale_query", "key_rope_antiquant_scale"])
def test_out_of_scope_parameters_raise_unsupported(param):
    rng = np.random.default_rng(16)
    q, k, v = _bnsd(rng, s1=1)
    with pytest.raises(UnsupportedParameterError) as info:
        fia_golden(q, k, v, input_layout="BNSD", **{param: np.ones(4, np.float32)}, **KW)
    assert info.value.param == param and param in str(info.value)
    assert isinstance(info.value, NotImplementedError)


@pytest.mark.parametrize("param,rule", [("antiquant_scale", "leading axis of 2"),
                                        ("value_antiquant_scale", "come together")])
def test_antiquant_parameters_of_a_bad_form_are_param_errors(param, rule):
    """KV antiquant is modelled: a scale of the wrong shape, or a key scale without its value scale, is the
    operator's 161002 naming the parameter (these were out of scope before the antiquant kernel)."""
    rng = np.random.default_rng(16)
    q, k, v = _bnsd(rng, s1=1)
    given = "antiquant_scale" if param == "antiquant_scale" else "key_antiquant_scale"
    with pytest.raises(ParamError, match=rule) as info:
        fia_golden(q, k, v, input_layout="BNSD", **{given: np.ones(4, np.float32)}, **KW)
    assert info.value.param == param and info.value.status == 161002


def test_int8_kv_is_unsupported():
    rng = np.random.default_rng(17)
    q, k, v = _bnsd(rng, s1=1)
    with pytest.raises(UnsupportedParameterError, match="key"):
        fia_golden(q, k.astype(np.int8), v.astype(np.int8), input_layout="BNSD", **KW)


@pytest.mark.parametrize("kw,match", [
    (dict(sparse_mode=3), "requires the compressed"),
    (dict(sparse_mode=2, atten_mask=np.zeros((4, 4), bool)), "template"),
    (dict(sparse_mode=1), "requires a mask"),
    (dict(sparse_mode=6), "5-8"),
    (dict(actual_seq_lengths=[1, 9, 3]), "actual_seq_lengths"),
    (dict(actual_seq_lengths_kv=[7]), "actual_seq_lengths_kv"),
    (dict(input_layout="SBH"), "input_layout"),
    (dict(num_key_value_heads=3), "multiple"),
    (dict(inner_precise=5), "inner_precise"),
    (dict(atten_mask=np.zeros((2, 1, 2, 6), bool), sparse_mode=1), "shorter"),
    (dict(kv_padding_size=[1]), "needs actual_seq_lengths_kv"),
])
def test_invalid_parameters_raise_value_error(kw, match):
    rng = np.random.default_rng(18)
    q, k, v = _bnsd(rng, s1=3)
    args = dict(input_layout="BNSD", **KW)
    args.update(kw)
    with pytest.raises(ValueError, match=match):
        fia_golden(q, k, v, **args)


def test_length_list_shorter_than_batch_is_rejected():
    rng = np.random.default_rng(21)
    q, k, v = _bnsd(rng, b=3, s1=3)
    with pytest.raises(ValueError, match="at least batch size"):
        fia_golden(q, k, v, input_layout="BNSD", actual_seq_lengths_kv=[3, 4], **KW)


def test_tree_mask_sees_every_column_before_the_tree_and_the_tree_after():
    """sparse_mode 9: batch b's Q_S x Q_S tree covers its last s1 KV positions (from s2 - s1); before them every
    pair is visible; pairs past the right-down diagonal stay hidden even where a (non-tree) mask shows them."""
    from cvtile.kernels.golden.batches import BatchPlan
    from cvtile.kernels.golden.masks import MaskEngine

    tree = np.ones((2, 3, 3), bool)
    tree[:, [0, 1, 2, 2], [0, 1, 0, 2]] = False          # node 1 and 2's parent is node 0 (2), itself
    tree[1, 0, 2] = False                                 # batch 1 shows a pair past the diagonal
    eng = MaskEngine(sparse_mode=9, atten_mask=tree, pre_tokens=0, next_tokens=0, batch=2,
                     decode=False, legacy_decode=False, token_layout=False, left_padding=False)
    keep = eng.keep(BatchPlan(b=0, q0=0, s1=3, k0=0, s_kv=7, prefix=0), 0, 3)
    assert keep[:, :4].all()
    assert (keep[:, 4:] == ~tree[0]).all()
    keep1 = eng.keep(BatchPlan(b=1, q0=0, s1=3, k0=0, s_kv=5, prefix=0), 0, 3)
    assert not keep1[0, 4] and (keep1[:, 2:] == (~tree[1] & np.tri(3, dtype=bool))).all()
    with pytest.raises(ValueError, match="sparse_mode 9 takes"):
        MaskEngine(sparse_mode=9, atten_mask=tree[:1], pre_tokens=0, next_tokens=0, batch=2, decode=False,
                   legacy_decode=False, token_layout=False, left_padding=False)


def test_tnd_tree_mask_is_the_batches_trees_one_after_the_other():
    from cvtile.kernels.golden.masks import tree_masks

    flat = np.concatenate([np.full(4, 1, np.uint8), np.arange(9, dtype=np.uint8) % 2])
    trees = tree_masks(flat, 2, True, [2, 3])
    assert trees.shape == (2, 3, 3) and (trees[0, :2, :2] == 1).all() and (trees[0, 2] == 0).all()
    assert (trees[1] == (np.arange(9) % 2).reshape(3, 3)).all()
    with pytest.raises(ValueError, match=r"sum\(s1_b\*\*2\) = 13"):
        tree_masks(flat[:-1], 2, True, [2, 3])


def test_split_rope_is_one_dot_product_over_the_joined_head_dim():
    """query_rope / key_rope add q_rope.k_rope to every score: the golden of the joined head dims (BSH: per
    head, not at the end of H)."""
    rng = np.random.default_rng(31)
    b, s1, s2, n, d, dr = 2, 3, 9, 2, 8, 4
    q, k, v = (_rand(rng, s, ml_dtypes.bfloat16) for s in ((b, s1, n * d), (b, s2, n * d), (b, s2, n * d)))
    qr, kr = _rand(rng, (b, s1, n * dr), ml_dtypes.bfloat16), _rand(rng, (b, s2, n * dr), ml_dtypes.bfloat16)
    out, _ = fia_golden(q, k, v, query_rope=qr, key_rope=kr, num_heads=n, input_layout="BSH", scale=0.3)
    qj = np.concatenate([q.reshape(b, s1, n, d), qr.reshape(b, s1, n, dr)], -1).astype(np.float64)
    kj = np.concatenate([k.reshape(b, s2, n, d), kr.reshape(b, s2, n, dr)], -1).astype(np.float64)
    sc = 0.3 * np.einsum("bind,bjnd->bnij", qj, kj)
    p = np.exp(sc - sc.max(-1, keepdims=True))
    ref = np.einsum("bnij,bjnd->bind", p / p.sum(-1, keepdims=True), v.reshape(b, s2, n, d).astype(np.float64))
    assert np.allclose(out, ref.reshape(b, s1, n * d), rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="give both"):
        fia_golden(q, k, v, query_rope=qr, num_heads=n, input_layout="BSH")


def test_decode_golden_speed():
    """B=4 N=32 S=4096 D=128 fp16 decode: well under a second on the development machine."""
    rng = np.random.default_rng(20)
    q = rng.random((4, 32, 1, 128), dtype=np.float32).astype(np.float16)
    k = (rng.random((4, 32, 4096, 128), dtype=np.float32) - 0.5).astype(np.float16)
    v = k[:, ::-1]
    fia_golden(q[:1, :2, :, :], k[:1, :2, :64], v[:1, :2, :64], input_layout="BNSD", num_heads=2)  # warm BLAS
    t0 = time.perf_counter()
    out, _ = fia_golden(q, k, v, input_layout="BNSD", num_heads=32, scale=1 / math.sqrt(128))
    assert time.perf_counter() - t0 < 2.0
    assert out.shape == (4, 32, 1, 128)


def test_regression_empty_query_with_sparse_mode_5_gives_the_api_s_empty_outputs():
    """Found by the simulated fuzz tier: an empty query with ``sparse_mode=5`` is accepted by op_host (its
    empty-output path returns before the sparse-mode checks) and by the API, but the golden raised
    ``ValueError`` on the training-only mode. An empty query now gives the golden's empty outputs too."""
    import cvtile
    rng = np.random.default_rng(31)
    q = _rand(rng, (1, 0, 128))
    k = _rand(rng, (1, 8, 128))
    kw = dict(num_heads=2, input_layout="BSH", sparse_mode=5, atten_mask=np.zeros((1, 0, 8), bool), scale=0.125,
              softmax_lse_flag=True)
    out, lse = cvtile.npu_fused_infer_attention_score(q, k, k, **kw)
    g_out, g_lse = fia_golden(q, k, k, **kw)
    assert out.shape == g_out.shape == (1, 0, 128)
    assert lse.shape == g_lse.shape
    with pytest.raises(ValueError, match="sparse_mode=5"):   # with query rows the mode is still out of scope
        fia_golden(_rand(rng, (1, 2, 128)), k, k, **dict(kw, atten_mask=np.zeros((1, 2, 8), bool)))


def test_regression_inner_precise_4_with_a_pse_matches_the_golden():
    """Found by the simulated fuzz tier: op_host's FIA route takes ``inner_precise`` 4 (its common check allows
    [0, 4]) and so does the API, but the golden refused it. 4 is high precision without the invalid-row bit;
    the kernel and the golden now agree on it."""
    import cvtile
    from cvtile.kernels.precision import compare
    rng = np.random.default_rng(32)
    q, k = _rand(rng, (1, 4, 128)), _rand(rng, (1, 8, 128))
    v, pse = _rand(rng, (1, 8, 128)), _rand(rng, (1, 2, 4, 8))
    kw = dict(pse_shift=pse, num_heads=2, input_layout="BSH", scale=0.125)
    out, _ = cvtile.npu_fused_infer_attention_score(q, k, v, inner_precise=4, **kw)
    rep = compare(out, fia_golden(q, k, v, inner_precise=4, **kw)[0], "float16")
    assert rep.passed, rep
    np.testing.assert_array_equal(fia_golden(q, k, v, inner_precise=4, **kw)[0],
                                  fia_golden(q, k, v, inner_precise=0, **kw)[0])
