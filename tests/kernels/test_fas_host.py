"""FlashAttentionScore's host normalisation (``kernels.fas.host``): the sparse-mode table, pse forms, layouts and
every refusal (no kernel runs here)."""

from __future__ import annotations

import numpy as np
import pytest

from cvtile.kernels.errors import UnsupportedParameterError
from cvtile.kernels.fas.host import head_rows, prefix_template, prepare_call, stat_rows, stat_shape
from cvtile.kernels.golden.masks import mask_template
from cvtile.tiling.errors import ParamError


def _qkv(b=2, n=4, n2=2, s1=8, s2=12, d=16, dv=None, layout="BNSD", dtype=np.float16):
    rng = np.random.default_rng(0)
    dv = dv or d
    shapes = {"BNSD": ((b, n, s1, d), (b, n2, s2, d), (b, n2, s2, dv)),
              "BSND": ((b, s1, n, d), (b, s2, n2, d), (b, s2, n2, dv)),
              "BSH": ((b, s1, n * d), (b, s2, n2 * d), (b, s2, n2 * dv)),
              "SBH": ((s1, b, n * d), (s2, b, n2 * d), (s2, b, n2 * dv))}[layout]
    return [rng.standard_normal(sh).astype(dtype) for sh in shapes]


def _vis(**kw):
    q, k, v = _qkv(b=1, n=1, n2=1, s1=kw.pop("s1", 6), s2=kw.pop("s2", 9))
    call = prepare_call(q, k, v, head_num=1, input_layout="BNSD", **kw)
    return call.visible(0, 0)


def _diff(s1, s2):
    return np.arange(s2)[None, :] - np.arange(s1)[:, None]


def test_no_mask_ignores_the_sparse_mode():
    assert _vis(sparse_mode=3, pre_tockens=0, next_tockens=0).all()


@pytest.mark.parametrize("mode, rule", [
    (2, lambda d, off: d <= 0),
    (3, lambda d, off: d <= off),
    (4, lambda d, off: (d >= off - 2) & (d <= off + 1)),
])
def test_compressed_modes_are_bands_anchored_as_documented(mode, rule):
    got = _vis(sparse_mode=mode, atten_mask=mask_template(), pre_tockens=2, next_tockens=1)
    assert np.array_equal(got, rule(_diff(6, 9), 3))


def test_mode0_reads_the_mask_and_the_left_up_window():
    m = np.zeros((6, 9), bool)
    m[2, 4] = True
    got = _vis(sparse_mode=0, atten_mask=m, pre_tockens=1, next_tockens=2)
    want = (_diff(6, 9) >= -1) & (_diff(6, 9) <= 2) & ~m
    assert np.array_equal(got, want)


def test_prefix_modes_open_the_first_columns_over_the_right_down_causal():
    got6 = _vis(sparse_mode=6, atten_mask=prefix_template(), prefix=[5])
    want = (_diff(6, 9) <= 3) | (np.arange(9)[None, :] < 5)
    assert np.array_equal(got6, want)
    full = np.zeros((1, 1, 6, 9), bool)
    assert np.array_equal(_vis(sparse_mode=5, atten_mask=full, prefix=[5]), want)
    assert _vis(sparse_mode=5, atten_mask=full, prefix=[10]).all()       # N > Skv: the full computation


def test_varlen_outer_split_modes_band_one_batch():
    rng = np.random.default_rng(1)
    lens_q, lens_kv = [0, 3, 2], [0, 4, 6]
    t, tk = sum(lens_q), sum(lens_kv)
    q = rng.standard_normal((t, 1, 16)).astype(np.float16)
    k = rng.standard_normal((tk, 1, 16)).astype(np.float16)
    call = prepare_call(q, k, k, head_num=1, input_layout="TND", atten_mask=mask_template(), sparse_mode=8,
                        pre_tockens=4, next_tockens=1, actual_seq_qlen=np.cumsum(lens_q),
                        actual_seq_kvlen=np.cumsum(lens_kv))
    # mode 8: the first non-empty batch (1) takes the band from the bottom-right, the rest are left-up causal
    assert np.array_equal(call.visible(1, 0), (_diff(3, 4) >= 1 - 4) & (_diff(3, 4) <= 1 + 1))
    assert np.array_equal(call.visible(2, 0), _diff(2, 6) <= 0)
    call7 = prepare_call(q, k, k, head_num=1, input_layout="TND", atten_mask=mask_template(), sparse_mode=7,
                         pre_tockens=6, next_tockens=-2, actual_seq_qlen=np.cumsum(lens_q),
                         actual_seq_kvlen=np.cumsum(lens_kv))
    assert np.array_equal(call7.visible(1, 0), _diff(3, 4) <= 1)
    assert np.array_equal(call7.visible(2, 0), (_diff(2, 6) >= 4 - 6) & (_diff(2, 6) <= 4 - 2))


def test_inner_alibi_follows_the_kernel_formula():
    q, k, v = _qkv(b=1, n=2, n2=2, s1=5, s2=5)
    call = prepare_call(q, k, v, head_num=2, input_layout="BNSD", pse=np.array([0.5, 2.0], np.float32), pse_type=3,
                        q_start_idx=[2], kv_start_idx=[1])
    want = -2.0 * np.sqrt(np.abs(_diff(5, 5) + 1 - 2))
    np.testing.assert_allclose(call.bias(0, 1), want)


@pytest.mark.parametrize("layout", ["BNSD", "BSND", "BSH", "SBH"])
def test_head_rows_read_one_head_in_every_layout(layout):
    qb = _qkv(layout="BNSD")[0]                        # (B, N, S, D)
    q = {"BNSD": qb, "BSND": qb.transpose(0, 2, 1, 3), "BSH": qb.transpose(0, 2, 1, 3).reshape(2, 8, 64),
         "SBH": qb.transpose(2, 0, 1, 3).reshape(8, 2, 64)}[layout]
    k, v = _qkv(layout=layout)[1:]
    call = prepare_call(q, k, v, head_num=4, input_layout=layout)
    np.testing.assert_array_equal(head_rows(q, call, 1, 3, 2, 4, 16), qb[1, 3, 2:6])
    assert (call.n2, call.d, call.dv) == (2, 16, 16)


def test_tnd_softmax_rows_default_to_per_batch_head_blocks():
    rng = np.random.default_rng(2)
    q = rng.standard_normal((7, 2, 16)).astype(np.float16)
    call = prepare_call(q, q, q, head_num=2, input_layout="TND", actual_seq_qlen=[3, 7], actual_seq_kvlen=[3, 7])
    t = np.arange(np.prod(stat_shape(call)), dtype=np.float32).reshape(stat_shape(call))
    # batch 1 starts at token 3: its (N, S_b, 8) block starts at row 3*N; head 1 after head 0's 4 rows
    np.testing.assert_array_equal(stat_rows(t, call, 1, 1), t.reshape(-1, 8)[3 * 2 + 4:3 * 2 + 8])
    call_t = prepare_call(q, q, q, head_num=2, input_layout="TND", actual_seq_qlen=[3, 7], actual_seq_kvlen=[3, 7],
                          softmax_layout="TND")
    np.testing.assert_array_equal(stat_rows(t, call_t, 1, 1), t[3:7, 1])


@pytest.mark.parametrize("kw, param, code", [
    (dict(input_layout="BNSD", head_num=4, keep_prob=0.0), "keep_prob", 161002),
    (dict(input_layout="NSD", head_num=4), "input_layout", 161002),
    (dict(input_layout="BNSD", head_num=4, pse_type=5), "pse_type", 161002),
    (dict(input_layout="BNSD", head_num=4, sparse_mode=9, atten_mask=mask_template()), "sparse_mode", 561002),
    (dict(input_layout="BNSD", head_num=4, sparse_mode=3, atten_mask=np.zeros((8, 12), bool)), "atten_mask", 161002),
    (dict(input_layout="BNSD", head_num=4, sparse_mode=6, atten_mask=prefix_template()), "prefix", 161001),
    (dict(input_layout="BNSD", head_num=4, sparse_mode=6, atten_mask=prefix_template(), prefix=[1, 20]), "prefix",
     561002),
    (dict(input_layout="BNSD", head_num=4, sparse_mode=4, atten_mask=mask_template(), pre_tockens=1,
          next_tockens=-3), "pre_tockens", 561002),
    (dict(input_layout="BNSD", head_num=4, sparse_mode=7, atten_mask=mask_template()), "sparse_mode", 561002),
    (dict(input_layout="BNSD", head_num=4, pse=np.zeros((2, 3, 8, 12), np.float16)), "pse", 161002),
    (dict(input_layout="BNSD", head_num=4, pse=np.zeros(4, np.float32), pse_type=2), "pse", 161002),
    (dict(input_layout="BNSD", head_num=4, sink=np.zeros(4, np.float16)), "sink", 161002),
    (dict(input_layout="BNSD", head_num=4, actual_seq_qlen=[8, 16]), "actual_seq_qlen", 161002),
    (dict(input_layout="BNSD", head_num=4, softmax_layout="TND"), "softmax_layout", 161002),
])
def test_refusals_name_the_parameter_and_the_aclnn_code(kw, param, code):
    q, k, v = _qkv()
    with pytest.raises(ParamError) as e:
        prepare_call(q, k, v, **kw)
    assert e.value.param == param and int(e.value.status) == code, e.value


def test_value_wider_than_the_query_is_refused():
    q, k, _ = _qkv()
    v = _qkv(dv=32)[2]
    with pytest.raises(ParamError, match="Dv <= D"):
        prepare_call(q, k, v, head_num=4, input_layout="BNSD")


def test_tnd_needs_both_cumulative_lengths():
    q = np.zeros((6, 2, 16), np.float16)
    with pytest.raises(ParamError) as e:
        prepare_call(q, q, q, head_num=2, input_layout="TND", actual_seq_qlen=[6])
    assert e.value.param == "actual_seq_kvlen" and int(e.value.status) == 161001
    with pytest.raises(ParamError, match="must not decrease"):
        prepare_call(q, q, q, head_num=2, input_layout="TND", actual_seq_qlen=[4, 2, 6], actual_seq_kvlen=[6])


def test_unmodelled_inputs_are_refused_loudly():
    q, k, v = _qkv()
    with pytest.raises(UnsupportedParameterError, match="padding_mask"):
        prepare_call(q, k, v, head_num=4, input_layout="BNSD", padding_mask=np.zeros(1, np.uint8))
