"""fia_golden against the loop-per-element reference (kernels/golden/naive.py), feature by feature."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from cvtile.kernels.golden import fia_golden, mask_template
from cvtile.kernels.golden.layouts import from_bnsd, from_tnd
from cvtile.kernels.golden.naive import fia_naive

BF16 = ml_dtypes.bfloat16


def _rand(rng, shape, dtype=np.float16, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, shape).astype(np.float32).astype(dtype)


def _assert_same(kw, *, atol=1e-12):
    out, lse = fia_golden(**kw)
    ref_out, ref_lse = fia_naive(**kw)
    assert out.shape == ref_out.shape
    np.testing.assert_allclose(out, ref_out, rtol=0, atol=atol)
    if kw.get("softmax_lse_flag"):
        assert lse.shape == ref_lse.shape
        np.testing.assert_array_equal(np.isinf(lse), np.isinf(ref_lse))
        fin = np.isfinite(ref_lse)
        np.testing.assert_allclose(lse[fin], ref_lse[fin], rtol=0, atol=atol)
        np.testing.assert_array_equal(lse[~fin], ref_lse[~fin])
    else:
        assert lse is None
    return out, lse


def _batch_inputs(rng, layout, b=2, n=4, n2=2, s1=3, s2=7, d=8, dv=None, dtype=np.float16):
    dv = dv or d
    q = _rand(rng, (b, n, s1, d), dtype)
    k = _rand(rng, (b, n2, s2, d), dtype)
    v = _rand(rng, (b, n2, s2, dv), dtype)
    lay_in, _, lay_out = layout.partition("_")
    return dict(query=from_bnsd(q, lay_in), key=from_bnsd(k, lay_in), value=from_bnsd(v, lay_in),
                num_heads=n, num_key_value_heads=n2, input_layout=layout, scale=1 / math.sqrt(d),
                softmax_lse_flag=True)


def _token_inputs(rng, layout, q_lens, kv_lens, n=4, n2=2, d=8, dv=None, dtype=np.float16):
    dv = dv or d
    lay_in = layout.split("_")[0]
    q = _rand(rng, (sum(q_lens), n, d), dtype)
    k = _rand(rng, (sum(kv_lens), n2, d), dtype)
    v = _rand(rng, (sum(kv_lens), n2, dv), dtype)
    return dict(query=from_tnd(q, lay_in), key=from_tnd(k, lay_in), value=from_tnd(v, lay_in),
                actual_seq_lengths=list(np.cumsum(q_lens)), actual_seq_lengths_kv=list(np.cumsum(kv_lens)),
                num_heads=n, num_key_value_heads=n2, input_layout=layout, scale=1 / math.sqrt(d),
                softmax_lse_flag=True)


BATCH_LAYOUTS = ["BSH", "BSND", "BNSD", "BNSD_BSND", "BSH_BNSD", "BSND_BNSD", "BSH_NBSD", "BSND_NBSD", "BNSD_NBSD"]
TOKEN_LAYOUTS = ["TND", "NTD", "TND_NTD", "NTD_TND"]


@pytest.mark.parametrize("layout", BATCH_LAYOUTS)
@pytest.mark.parametrize("s1", [1, 3])
def test_batch_layouts(layout, s1):
    rng = np.random.default_rng(1)
    _assert_same(_batch_inputs(rng, layout, s1=s1))


@pytest.mark.parametrize("layout", TOKEN_LAYOUTS)
def test_token_layouts(layout):
    rng = np.random.default_rng(2)
    _assert_same(_token_inputs(rng, layout, [3, 1, 4], [5, 2, 6]))


@pytest.mark.parametrize("n2", [8, 2, 1])  # GQA ratio 1, 4, 8
@pytest.mark.parametrize("layout", ["BSH", "BNSD", "TND"])
def test_gqa_ratios(n2, layout):
    rng = np.random.default_rng(3)
    if layout == "TND":
        kw = _token_inputs(rng, layout, [2, 3], [4, 6], n=8, n2=n2)
    else:
        kw = _batch_inputs(rng, layout, n=8, n2=n2, s1=2, s2=5)
    _assert_same(kw)


def test_value_head_dim_differs():
    rng = np.random.default_rng(4)
    _assert_same(_batch_inputs(rng, "BSH", d=8, dv=16, s1=2))
    _assert_same(_token_inputs(rng, "TND", [2, 3], [4, 5], d=16, dv=8))


def test_bf16_and_fp32_inputs():
    rng = np.random.default_rng(5)
    _assert_same(_batch_inputs(rng, "BNSD", dtype=BF16))
    _assert_same(_batch_inputs(rng, "BSND", dtype=np.float32))


@pytest.mark.parametrize("q_lens,kv_lens", [([2, 3], [7, 4]), ([0, 3], [5, 0]), ([1], [0])])
def test_actual_lengths_batch_layout(q_lens, kv_lens):
    rng = np.random.default_rng(6)
    kw = _batch_inputs(rng, "BSND", s1=3, s2=7)
    kw.update(actual_seq_lengths=q_lens, actual_seq_lengths_kv=kv_lens)
    out, lse = _assert_same(kw)
    ql = q_lens * 2 if len(q_lens) == 1 else q_lens
    for b, n_rows in enumerate(ql):  # rows beyond the q length are 0
        assert not out[b, n_rows:].any()


def test_decode_ignores_actual_seq_lengths():
    rng = np.random.default_rng(7)
    kw = _batch_inputs(rng, "BSH", s1=1, s2=6)
    base, _ = fia_golden(**kw)
    kw.update(actual_seq_lengths=[0, 0])
    out, _ = _assert_same(kw)
    np.testing.assert_array_equal(out, base)


def test_token_layout_empty_batches():
    rng = np.random.default_rng(8)
    _assert_same(_token_inputs(rng, "TND", [2, 0, 3, 1], [3, 4, 0, 2]))


@pytest.mark.parametrize("mask_shape", ["BN1SS", "1SS", "SS", "B1SS_bool_int8"])
@pytest.mark.parametrize("sparse", [0, 1])
def test_sparse_0_1_user_mask(sparse, mask_shape):
    rng = np.random.default_rng(9)
    b, s1, s2 = 2, 4, 7
    kw = _batch_inputs(rng, "BNSD", b=b, s1=s1, s2=s2)
    shapes = {"BN1SS": (b, 1, s1, s2), "1SS": (1, s1, s2), "SS": (s1, s2), "B1SS_bool_int8": (b, 1, s1, s2)}
    mask = rng.random(shapes[mask_shape]) < 0.35
    if mask_shape.endswith("int8"):
        mask = mask.astype(np.int8)
    kw.update(sparse_mode=sparse, atten_mask=mask, actual_seq_lengths=[3, 4], actual_seq_lengths_kv=[7, 5])
    if sparse == 0:
        kw.update(pre_tokens=1, next_tokens=2)
    _assert_same(kw)


def test_sparse_0_without_mask_ignores_band():
    rng = np.random.default_rng(10)
    kw = _batch_inputs(rng, "BNSD", s1=4, s2=6)
    full, _ = fia_golden(**kw)
    kw.update(pre_tokens=0, next_tokens=0)
    out, _ = _assert_same(kw)
    np.testing.assert_array_equal(out, full)


@pytest.mark.parametrize("sparse,pre,nxt", [(2, 0, 0), (3, 0, 0), (4, 2, 1), (4, 5, -1), (4, 0, 3)])
@pytest.mark.parametrize("layout", ["BSH", "TND"])
def test_sparse_2_3_4_template(sparse, pre, nxt, layout):
    rng = np.random.default_rng(11)
    if layout == "TND":
        kw = _token_inputs(rng, layout, [3, 5, 2], [6, 3, 2])
    else:
        kw = _batch_inputs(rng, layout, s1=5, s2=6)
        kw.update(actual_seq_lengths=[5, 3], actual_seq_lengths_kv=[4, 6])
    kw.update(sparse_mode=sparse, atten_mask=mask_template(), pre_tokens=pre, next_tokens=nxt)
    _assert_same(kw)


@pytest.mark.parametrize("shape", [(2048, 2048), (1, 2048, 2048), (1, 1, 2048, 2048)])
def test_template_shapes_accepted(shape):
    rng = np.random.default_rng(12)
    kw = _batch_inputs(rng, "BNSD", s1=3, s2=5)
    kw.update(sparse_mode=3, atten_mask=np.triu(np.ones(shape, dtype=np.uint8), 1))
    _assert_same(kw)


def test_legacy_decode_ignores_sparse_mode():
    rng = np.random.default_rng(13)
    kw = _batch_inputs(rng, "BSH", s1=1, s2=9)
    mask = rng.random((2, 9)) < 0.4  # decode (B, S2) mask
    kw.update(atten_mask=mask, sparse_mode=3, pre_tokens=0, next_tokens=0)
    out, _ = _assert_same(kw)
    kw.update(sparse_mode=1)
    np.testing.assert_array_equal(fia_golden(**kw)[0], out)


def test_pse_shift_prefill_and_decode():
    rng = np.random.default_rng(14)
    kw = _batch_inputs(rng, "BNSD", s1=3, s2=6)
    kw.update(pse_shift=_rand(rng, (2, 4, 3, 6), lo=-2, hi=2), actual_seq_lengths=[3, 2])
    _assert_same(kw)
    kw = _batch_inputs(rng, "BSH", s1=1, s2=6)
    kw.update(pse_shift=_rand(rng, (1, 4, 1, 8), lo=-2, hi=2), actual_seq_lengths_kv=[6, 4])
    _assert_same(kw)


@pytest.mark.parametrize("layout", ["TND", "BNSD"])
def test_learnable_sink(layout):
    rng = np.random.default_rng(15)
    if layout == "TND":
        kw = _token_inputs(rng, layout, [2, 3], [4, 5])
        kw.update(sparse_mode=3, atten_mask=mask_template())
    else:
        kw = _batch_inputs(rng, layout, s1=2, s2=5)
    kw.update(learnable_sink=_rand(rng, (4,), BF16, lo=-3, hi=3))
    _assert_same(kw)


def _page(rng, k_bnsd, v_bnsd, lens, bs, layout):
    """Scatter [B, N2, S, D] key/value into shuffled blocks; returns caches and a block table."""
    b, n2, s, d = k_bnsd.shape
    per = [math.ceil(x / bs) for x in lens]
    width = max(max(per), 1) + 1
    nblocks = sum(per) + 2
    perm = rng.permutation(nblocks)
    table = np.full((b, width), -1, dtype=np.int32)
    dv = v_bnsd.shape[3]
    if layout == "BnBsH":
        kc = np.zeros((nblocks, bs, n2 * d), k_bnsd.dtype)
        vc = np.zeros((nblocks, bs, n2 * dv), v_bnsd.dtype)
    else:
        kc = np.zeros((nblocks, n2, bs, d), k_bnsd.dtype)
        vc = np.zeros((nblocks, n2, bs, dv), v_bnsd.dtype)
    pos = 0
    for bi in range(b):
        for i in range(per[bi]):
            blk = perm[pos]
            pos += 1
            table[bi, i] = blk
            t0, t1 = i * bs, min(lens[bi], (i + 1) * bs)
            if layout == "BnBsH":
                kc[blk, :t1 - t0] = k_bnsd[bi, :, t0:t1].transpose(1, 0, 2).reshape(t1 - t0, -1)
                vc[blk, :t1 - t0] = v_bnsd[bi, :, t0:t1].transpose(1, 0, 2).reshape(t1 - t0, -1)
            else:
                kc[blk, :, :t1 - t0] = k_bnsd[bi, :, t0:t1]
                vc[blk, :, :t1 - t0] = v_bnsd[bi, :, t0:t1]
    return kc, vc, table


@pytest.mark.parametrize("cache_layout", ["BnBsH", "BnNBsD"])
@pytest.mark.parametrize("s1", [1, 3])
def test_paged_attention_matches_dense(cache_layout, s1):
    rng = np.random.default_rng(16)
    kw = _batch_inputs(rng, "BSH", s1=s1, s2=11)
    lens = [11, 6]
    k_bnsd = _rand(rng, (2, 2, 11, 8))
    v_bnsd = _rand(rng, (2, 2, 11, 8))
    kw.update(key=from_bnsd(k_bnsd, "BSH"), value=from_bnsd(v_bnsd, "BSH"), actual_seq_lengths_kv=lens)
    dense, dense_lse = fia_golden(**kw)
    kc, vc, table = _page(rng, k_bnsd, v_bnsd, lens, 4, cache_layout)
    kw.update(key=kc, value=vc, block_table=table, block_size=4)
    out, lse = _assert_same(kw)
    np.testing.assert_allclose(out, dense, rtol=0, atol=1e-15)
    np.testing.assert_allclose(lse, dense_lse, rtol=0, atol=1e-14)


def test_paged_attention_token_layout_uses_per_batch_kv_lengths():
    rng = np.random.default_rng(17)
    kv_lens = [5, 0, 7]
    k_bnsd = _rand(rng, (3, 2, 7, 8))
    v_bnsd = _rand(rng, (3, 2, 7, 8))
    kc, vc, table = _page(rng, k_bnsd, v_bnsd, kv_lens, 4, "BnBsH")
    q = _rand(rng, (6, 4, 8))
    kw = dict(query=q, key=kc, value=vc, block_table=table, block_size=4, actual_seq_lengths=[2, 3, 6],
              actual_seq_lengths_kv=kv_lens, num_heads=4, num_key_value_heads=2, input_layout="TND",
              scale=0.35, softmax_lse_flag=True, sparse_mode=3, atten_mask=mask_template())
    out, lse = _assert_same(kw)
    assert not out[2:3].any() and np.isposinf(lse[2:3]).all()  # batch 1 has no kv


@pytest.mark.parametrize("layout", ["BSH", "BNSD", "BSND"])
def test_shared_prefix(layout):
    rng = np.random.default_rng(18)
    kw = _batch_inputs(rng, layout, s1=1, s2=6)
    kp = _rand(rng, (1, 2, 5, 8))
    vp = _rand(rng, (1, 2, 5, 8))
    p_len = 3
    mask = rng.random((2, 1, 1, p_len + 6)) < 0.3
    kw.update(key_shared_prefix=from_bnsd(kp, layout), value_shared_prefix=from_bnsd(vp, layout),
              actual_shared_prefix_len=[p_len], actual_seq_lengths_kv=[6, 0], atten_mask=mask,
              pse_shift=_rand(rng, (2, 4, 1, p_len + 6)))
    _assert_same(kw)


def test_shared_prefix_prefill_with_causal_modes():
    rng = np.random.default_rng(19)
    kw = _batch_inputs(rng, "BNSD", s1=4, s2=5)
    kw.update(key_shared_prefix=_rand(rng, (1, 2, 3, 8)), value_shared_prefix=_rand(rng, (1, 2, 3, 8)),
              sparse_mode=3, atten_mask=mask_template(), actual_seq_lengths=[4, 2], actual_seq_lengths_kv=[2, 5])
    _assert_same(kw)


def test_left_padding():
    rng = np.random.default_rng(20)
    kw = _batch_inputs(rng, "BSH", s1=6, s2=9)
    mask = rng.random((2, 1, 6, 9)) < 0.3
    kw.update(actual_seq_lengths=[3, 4], actual_seq_lengths_kv=[5, 7], query_padding_size=np.array([1]),
              kv_padding_size=np.array([2]), atten_mask=mask, pre_tokens=0, next_tokens=0)
    out, lse = _assert_same(kw)
    o = out.reshape(2, 6, 4, 8)
    assert not o[0, :2].any() and not o[0, 5:].any()  # valid rows 6-1-3=2 .. 5
    assert not o[1, :1].any() and o[1, 1:5].any()


def test_decode_kv_left_padding_with_pse():
    rng = np.random.default_rng(21)
    kw = _batch_inputs(rng, "BNSD", s1=1, s2=9)
    kw.update(actual_seq_lengths_kv=[4, 6], kv_padding_size=[1], pse_shift=_rand(rng, (2, 4, 1, 9)))
    _assert_same(kw)


def test_tensor_list_kv():
    rng = np.random.default_rng(22)
    q = _rand(rng, (2, 1, 32))
    keys = [_rand(rng, (1, 5, 16)), _rand(rng, (1, 8, 16))]
    vals = [_rand(rng, (1, 5, 16)), _rand(rng, (1, 8, 16))]
    out, lse = fia_golden(q, keys, vals, num_heads=4, num_key_value_heads=2, input_layout="BSH", scale=0.3,
                          softmax_lse_flag=True)
    for b in range(2):
        ob, lb = fia_golden(q[b:b + 1], keys[b], vals[b], num_heads=4, num_key_value_heads=2,
                            input_layout="BSH", scale=0.3, softmax_lse_flag=True)
        np.testing.assert_array_equal(out[b:b + 1], ob)
        np.testing.assert_array_equal(lse[b:b + 1], lb)


def _random_config(rng):
    n2 = int(rng.choice([1, 2]))
    n = n2 * int(rng.choice([1, 2, 4]))
    d = int(rng.choice([4, 8]))
    kw = dict(num_heads=n, num_key_value_heads=n2, scale=float(rng.uniform(0.1, 1)), softmax_lse_flag=True)
    if rng.random() < 0.3:
        b = int(rng.integers(1, 4))
        q_lens, kv_lens = list(rng.integers(0, 5, b)), list(rng.integers(0, 7, b))
        kw.update(_token_inputs(rng, str(rng.choice(TOKEN_LAYOUTS)), q_lens, kv_lens, n=n, n2=n2, d=d))
        kw.update(num_heads=n, num_key_value_heads=n2)
        sparse = int(rng.choice([0, 3, 4]))
        if sparse:
            kw.update(sparse_mode=sparse, atten_mask=mask_template(), pre_tokens=int(rng.integers(-2, 5)),
                      next_tokens=int(rng.integers(-2, 5)))
        if rng.random() < 0.3:
            kw["learnable_sink"] = _rand(rng, (n,), lo=-2, hi=2)
        return kw
    b, s1, s2 = int(rng.integers(1, 4)), int(rng.choice([2, 5])), int(rng.integers(1, 9))
    layout = str(rng.choice(["BSH", "BSND", "BNSD", "BNSD_BSND", "BSH_BNSD", "BSND_NBSD"]))
    kw.update(_batch_inputs(rng, layout, b=b, n=n, n2=n2, s1=s1, s2=s2, d=d))
    kw.update(scale=float(rng.uniform(0.1, 1)))
    if rng.random() < 0.5:
        kw["actual_seq_lengths"] = list(rng.integers(0, s1 + 1, b))
    if rng.random() < 0.5:
        kw["actual_seq_lengths_kv"] = list(rng.integers(0, s2 + 1, b))
    sparse = int(rng.choice([0, 0, 1, 2, 3, 4]))
    kw["sparse_mode"] = sparse
    if sparse == 1 or (sparse == 0 and rng.random() < 0.6):
        kw["atten_mask"] = rng.random((b, 1, s1, s2)) < 0.4
        if sparse == 0 and rng.random() < 0.5:
            kw.update(pre_tokens=int(rng.integers(0, 4)), next_tokens=int(rng.integers(0, 4)))
    elif sparse >= 2:
        kw.update(atten_mask=mask_template(), pre_tokens=int(rng.integers(-1, 5)),
                  next_tokens=int(rng.integers(-1, 5)))
    if rng.random() < 0.3:
        kw["pse_shift"] = _rand(rng, (b, n, s1, s2))
    if rng.random() < 0.2:
        kw["learnable_sink"] = _rand(rng, (n,), lo=-2, hi=2)
    return kw


def test_random_configurations_match_naive():
    rng = np.random.default_rng(2024)
    for _ in range(60):
        _assert_same(_random_config(rng))
