"""Post-quant (``quant_scale2`` / ``quant_offset2``): the FIA kernels' int8 output against the golden.

The kernel quantises its fp32 result rows as the chip's PostQuant does (scale, offset, fp32 -> fp16 -> int8,
each rounded half away from zero, saturated); the golden (``golden.quant``) applies the same conversions to
the float64 output. Compared under the upstream rule (the query dtype's class, at most 0.5 % of elements off):
an int8 off by one counts as a miss, so the output must agree almost everywhere.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from cvtile.kernels import compare
from cvtile.kernels.errors import UnsupportedParameterError
from cvtile.kernels.fia.api import npu_fused_infer_attention_score as fia
from cvtile.kernels.golden.fia import fia_golden_lowp
from cvtile.kernels.golden.quant import post_quant_int8, round_half_away

BF16 = ml_dtypes.bfloat16


def _decode(rng, b=2, n=4, n2=2, s2=300, d=64, dtype=np.float16, layout="BSH"):
    q = rng.uniform(-2, 2, (b, n, 1, d)).astype(dtype)
    k = rng.uniform(-2, 2, (b, n2, s2, d)).astype(dtype)
    v = rng.uniform(-2, 2, (b, n2, s2, d)).astype(dtype)
    if layout == "BSH":
        q, k, v = (x.transpose(0, 2, 1, 3).reshape(x.shape[0], x.shape[2], -1) for x in (q, k, v))
    return q, k, v, dict(num_heads=n, num_key_value_heads=n2, input_layout=layout, scale=d ** -0.5)


def _check(q, k, v, **kw):
    out, _ = fia(q, k, v, **kw)
    gold, _ = fia_golden_lowp(q, k, v, **kw)
    assert out.dtype == np.int8 and gold.dtype == np.int8 and out.shape == gold.shape
    rep = compare(out, gold, q.dtype)
    assert rep.passed, str(rep)
    return out, gold


@pytest.mark.slow
def test_per_tensor_scale_and_offset_bsh_decode():
    rng = np.random.default_rng(1)
    q, k, v, kw = _decode(rng)
    out, gold = _check(q, k, v, quant_scale2=np.array([40.0], np.float32),
                       quant_offset2=np.array([3.0], np.float32), **kw)
    assert np.abs(out.astype(int)).max() > 20      # the scale spreads the values over the int8 range


@pytest.mark.slow
def test_per_channel_bf16_parameters_bnsd():
    rng = np.random.default_rng(2)
    q, k, v, kw = _decode(rng, dtype=BF16, layout="BNSD")
    n, d = kw["num_heads"], q.shape[-1]
    scale = rng.uniform(10, 60, (1, n, 1, d)).astype(BF16)
    offset = rng.uniform(-3, 3, (1, n, 1, d)).astype(BF16)
    _check(q, k, v, quant_scale2=scale, quant_offset2=offset, **kw)


def test_per_channel_without_offset_through_the_flash_decode_combine():
    """One batch, one kv head, a long KV: the tiling splits the row over cores, so the combine quantises."""
    rng = np.random.default_rng(3)
    q, k, v, kw = _decode(rng, b=1, n=8, n2=1, s2=8192, d=64, layout="BNSD")
    scale = rng.uniform(20, 80, (1, 8, 1, 64)).astype(np.float32)
    from cvtile.dsl.jit import record_launches

    with record_launches() as rec:
        _check(q, k, v, quant_scale2=scale, actual_seq_lengths_kv=[5000], **kw)
    assert "fia_fd_combine" in [r.kernel.name for r in rec.launches]


def test_prefill_per_tensor_on_the_fia_route():
    rng = np.random.default_rng(4)
    b, n, s1, s2, d = 1, 2, 64, 200, 64
    q = rng.uniform(-2, 2, (b, n, s1, d)).astype(np.float16)
    k = rng.uniform(-2, 2, (b, n, s2, d)).astype(np.float16)
    v = rng.uniform(-2, 2, (b, n, s2, d)).astype(np.float16)
    _check(q, k, v, num_heads=n, input_layout="BNSD", scale=d ** -0.5, quant_scale2=np.array([50.0], np.float32))


def test_saturation_at_both_ends_of_int8():
    rng = np.random.default_rng(5)
    q, k, v, kw = _decode(rng)
    out, _ = _check(q, k, v, quant_scale2=np.array([3000.0], np.float32), **kw)
    assert out.max() == 127 and out.min() == -128


@pytest.mark.slow
def test_rows_of_a_batch_without_kv_stay_zero_on_the_fia_route():
    """The FIA framework zero-initialises the int8 output and never visits a batch without KV: those rows are
    0, not quant(offset) (the golden's default convention)."""
    rng = np.random.default_rng(6)
    q, k, v, kw = _decode(rng, b=3, layout="BNSD")
    out, gold = _check(q, k, v, quant_scale2=np.array([30.0], np.float32),
                       quant_offset2=np.array([5.0], np.float32), actual_seq_lengths_kv=[300, 0, 120], **kw)
    assert (out[1] == 0).all() and (out[0] != 0).any()


def test_golden_post_quant_rounds_half_away_through_fp16():
    """fp16 first (ties away), then int8 (ties away): 2.4999 becomes 2.5 in fp16 and then 3."""
    out = np.array([0.5, -0.5, 2.4999, 1.5, 200.0, -200.0, np.nan]).reshape(1, 1, 1, 7)
    q = post_quant_int8(out, np.array([1.0]), None, heads_axis=1, num_heads=1)
    assert q.ravel().tolist() == [1, -1, 3, 2, 127, -128, 0]
    assert round_half_away(np.array([-2.5, 2.5, 0.49])).tolist() == [-3.0, 3.0, 0.0]


def test_quant_offset2_without_scale_is_refused_not_dropped():
    """The operator ignores a quant_offset2 without quant_scale2 (its output is not quantised); cvtile says so."""
    rng = np.random.default_rng(7)
    q, k, v, kw = _decode(rng)
    with pytest.raises(UnsupportedParameterError) as info:
        fia(q, k, v, quant_offset2=np.array([1.0], np.float32), **kw)
    assert info.value.param == "quant_offset2" and "quant_scale2" in str(info.value)
