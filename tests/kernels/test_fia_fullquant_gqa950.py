"""Ascend950 FP8 full quant on the GQA route (``kernel_fullquant_gqa``): FP8 query, key and value with the
query/key/value quant modes 3/3/2 (per-token-head query and key scales, per-head value scale), the paged
BnNBsD cache and NTD_TND, as the upstream pytest ``fia_fullquant_gqa_test`` calls it.

The kernel is judged against the float64 golden (``golden.fullquant_gqa``: P rounded to FP8 against the
running max of 256-column blocks) under the upstream tolerance (``precision.compare``, bf16 class; the upstream
test's check_result: rtol 2^-7, atol 1e-4, 99.5 % of elements, outliers < 10). The P rounding is where kernel
and golden may part: a P element within an fp32 ulp of an FP8 tie rounds by the exp's last bit (a few elements
per call, inside the tolerance).

Specialisations (numba compiles, ~10 s each cold): the module's call (bf16 output, causal band, lse) and the
FP8 rounding micro-kernel; an fp16 output without a mask is ``slow``.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import cvtile.dsl as ct
from cvtile.kernels.errors import UnsupportedParameterError
from cvtile.kernels.fia.api import fused_infer_attention_score_v4
from cvtile.kernels.fia.api_v2 import npu_fused_infer_attention_score_v2 as fia_v2
from cvtile.kernels.fia.cost import fia_cost
from cvtile.kernels.fia.kernel_fullquant_gqa import fp8_rne
from cvtile.kernels.golden.fullquant_gqa import attend_fp8_gqa, fp8_e4m3, fullquant_gqa_reference
from cvtile.kernels.precision import compare
from cvtile.tiling.errors import ParamError

F8 = ml_dtypes.float8_e4m3fn
BF16 = ml_dtypes.bfloat16
N1, N2, D, BS = 8, 2, 128, 128
#: batch 0: 2 KV blocks (256 + 44); batch 1: one (the single-block dequant path); batch 2: 3 (the later blocks)
QLENS, KVLENS = (3, 70, 5), (300, 130, 600)
CAUSAL = np.triu(np.ones((2048, 2048), bool), 1)


def _per_token(x):
    """Upstream's per-token(-head) quantisation of fp16 data: scale 448 / row max; returns (fp8, dequant scale)."""
    amax = np.maximum(np.abs(x).max(axis=-1, keepdims=True), 1e-8)
    qs = (448.0 / amax).astype(np.float32)
    return np.clip(x * qs, -448, 448).astype(F8), (1.0 / qs)[..., 0]


def _data(seed=9, qlens=QLENS, kvlens=KVLENS):
    """Inputs as the upstream golden makes them: fp16 data of per-token amplitudes, q/k per token and head,
    v per head, quantised to FP8; the cache paged through a permuted block table."""
    rng = np.random.default_rng(seed)
    t = sum(qlens)
    nblk = [-(-s // BS) for s in kvlens]
    total = sum(nblk)
    perm = rng.permutation(total).astype(np.int32)
    bt = np.full((len(kvlens), max(nblk)), -1, np.int32)
    i = 0
    for b, nb in enumerate(nblk):
        bt[b, :nb] = perm[i:i + nb]
        i += nb

    def gen(shape, amp_shape):
        amp = 10.0 ** rng.uniform(-2, 0, amp_shape)
        return (rng.uniform(-1, 1, shape) * amp).astype(np.float16).astype(np.float32)

    q, dq = _per_token(gen((N1, t, D), (N1, t, 1)))
    k, dk = _per_token(gen((total, N2, BS, D), (total, N2, BS, 1)))
    vraw = gen((total, N2, BS, D), (1, N2, 1, 1))
    vmax = np.maximum(np.abs(vraw).max(axis=(0, 2, 3)), 1e-8)
    v = np.clip(vraw * (448.0 / vmax)[None, :, None, None], -448, 448).astype(F8)
    dv = (vmax / 448.0).astype(np.float32)
    return dict(q=q, k=k, v=v, dq=dq.astype(np.float32), dk=dk.astype(np.float32), dv=dv, bt=bt, qlens=qlens,
                kvlens=kvlens)


def _v2(x, **extra):
    kw = dict(num_query_heads=N1, num_key_value_heads=N2, input_layout="NTD_TND", block_size=BS,
              block_table=x["bt"], actual_seq_qlen=list(np.cumsum(x["qlens"])), actual_seq_kvlen=list(x["kvlens"]),
              dequant_scale_query=x["dq"], dequant_scale_key=x["dk"], dequant_scale_value=x["dv"],
              query_quant_mode=3, key_quant_mode=3, value_quant_mode=2, softmax_scale=1 / math.sqrt(D),
              sparse_mode=3, atten_mask=CAUSAL, return_softmax_lse=True, out_dtype=BF16, target="Ascend950")
    kw.update(extra)
    return fia_v2(x["q"], x["k"], x["v"], **kw)


def _golden(x, p_scale=1.0, sparse_mode=3, **band):
    return fullquant_gqa_reference(x["q"], x["k"], x["v"], x["bt"], x["dq"], x["dk"], x["dv"], qlens=x["qlens"],
                                   kvlens=x["kvlens"], scale=1 / math.sqrt(D), num_heads=N1, num_kv_heads=N2,
                                   p_scale=p_scale, sparse_mode=sparse_mode, **band)


@pytest.fixture(scope="module")
def data():
    return _data()


@pytest.fixture(scope="module")
def v2_run(data):
    return _v2(data, quant_scale_p=np.array([1.0], np.float32))


def test_kernel_matches_the_golden(data, v2_run):
    out, lse = v2_run
    assert out.dtype == BF16 and out.shape == (sum(QLENS), N1, D) and lse.shape == (sum(QLENS), N1, 1)
    gold, glse = _golden(data)
    rep = compare(out, gold, "bfloat16", name="attention_out")
    assert rep.passed, str(rep)
    assert rep.violations <= 0.001 * rep.total, str(rep)      # P's FP8 ties only, not a systematic error
    rep = compare(lse, glse, "float32", name="softmax_lse")
    assert rep.passed, str(rep)


def test_v4_api_runs_the_same_call(data, v2_run):
    """aclnn V4's names (key/value_antiquant_scale, quant_scale1) and out_dtype give V2's result bit for bit."""
    out, lse = fused_infer_attention_score_v4(
        data["q"], data["k"], data["v"], num_heads=N1, num_key_value_heads=N2, input_layout="NTD_TND",
        block_size=BS, block_table=data["bt"], actual_seq_lengths=list(np.cumsum(QLENS)),
        actual_seq_lengths_kv=list(KVLENS), dequant_scale_query=data["dq"], key_antiquant_scale=data["dk"],
        value_antiquant_scale=data["dv"], quant_scale1=np.array([1.0], np.float32), query_quant_mode=3,
        key_antiquant_mode=3, value_antiquant_mode=2, scale=1 / math.sqrt(D), sparse_mode=3, atten_mask=CAUSAL,
        softmax_lse_flag=True, out_dtype="bfloat16", target="Ascend950")
    np.testing.assert_array_equal(out.view(np.uint16), v2_run[0].view(np.uint16))
    np.testing.assert_array_equal(lse, v2_run[1])


def test_strided_views_read_as_dense(data):
    """The upstream IS_CONTIGUOUS=False case: key and value slices of one stacked cache, the key scale a slice of
    a stacked scale: the same result as the dense tensors."""
    kv = np.stack([data["k"], data["v"]], axis=2)
    dk = np.stack([data["dk"], np.ones_like(data["dk"])], axis=2)[:, :, 0]
    x = dict(data, k=kv[:, :, 0], v=kv[:, :, 1], dk=dk)
    out, lse = _v2(x)
    ref, rlse = _v2(data)
    np.testing.assert_array_equal(out.view(np.uint16), ref.view(np.uint16))
    np.testing.assert_array_equal(lse, rlse)


def test_the_upstream_dtype_keywords_are_no_ops(data, v2_run):
    """The upstream test passes query/key/value_dtype fp8 and the scales' dtypes float32: each names its tensor's
    own dtype, which changes nothing."""
    out, lse = _v2(data, quant_scale_p=np.array([1.0], np.float32), query_dtype=F8, key_dtype=F8, value_dtype=F8,
                   dequant_scale_query_dtype=np.float32, dequant_scale_key_dtype=np.float32,
                   dequant_scale_value_dtype=np.float32)
    np.testing.assert_array_equal(out.view(np.uint16), v2_run[0].view(np.uint16))


def test_quant_scale_p_sets_the_range_of_p(data):
    """quant_scale_p = 100 lowers the running max by ln 100 (P up to 100 before its FP8 cast: another grid than
    P <= 1 has, a power of two would only scale it); without it P <= 1. 100 is an FP8 tie (12.5 · 8): each row's
    max element, exp(ln 100), rounds up or down by the fp32 ln(100), which the golden takes as the chip (and the
    upstream golden's float32 ln_p_scale) does."""
    out, lse = _v2(data, quant_scale_p=np.array([100.0], np.float32))
    gold, glse = _golden(data, p_scale=100.0)
    rep = compare(out, gold, "bfloat16")
    assert rep.passed, str(rep)
    assert compare(lse, glse, "float32").passed


@pytest.mark.parametrize("sparse_mode, band", [(2, {}), (4, dict(pre_tokens=100, next_tokens=0))])
def test_op_host_takes_only_sparse_modes_0_and_3(data, sparse_mode, band):
    """FP8 GQA full quant: sparse_mode 0 without a mask or 3 with the compressed one (op_host's mask checker)."""
    with pytest.raises(ParamError) as err:
        _v2(data, sparse_mode=sparse_mode, **band)
    assert err.value.param == "sparse_mode" and err.value.status == 561002


def test_cost_model_times_the_call(data):
    rep = fia_cost(data["q"], data["k"], data["v"], target="Ascend950", num_heads=N1, num_key_value_heads=N2,
                   input_layout="NTD_TND", block_size=BS, block_table=data["bt"],
                   actual_seq_lengths=list(np.cumsum(QLENS)), actual_seq_lengths_kv=list(KVLENS),
                   dequant_scale_query=data["dq"], key_antiquant_scale=data["dk"],
                   value_antiquant_scale=data["dv"], query_quant_mode=3, key_antiquant_mode=3,
                   value_antiquant_mode=2, scale=1 / math.sqrt(D), sparse_mode=3, atten_mask=CAUSAL,
                   softmax_lse_flag=True, out_dtype="bfloat16")
    assert [lc.kernel for lc in rep.launches] == ["fia_fullquant_gqa"] and rep.estimated_us > 0
    assert rep.tiling.template == "FiaTilingFullQuantGqaArch35"


def test_a_call_without_kv_gives_zero_rows_in_out_dtype():
    """No KV at all: no launch; the output is the zero-filled out_dtype tensor and the lse +inf."""
    x = _data(seed=3, qlens=(3, 4), kvlens=(300, 130))
    out, lse = _v2(x, actual_seq_kvlen=[0, 0])
    assert out.dtype == BF16 and not out.astype(np.float32).any() and np.isposinf(lse).all()


# ------------------------------------------------------------------------------------------------ golden

def test_fp8_rounding_of_the_golden():
    """RNE onto the e4m3fn grid (0.296875 = 9.5 / 32 is a tie: to the even 10 / 32), saturated to 448."""
    x = np.array([0.296875, 0.28125 + 1e-9, 1.0625, 1.0 + 1 / 16 + 1e-6, 2.0 ** -10, 3 * 2.0 ** -11, 460.0, 1e6])
    np.testing.assert_array_equal(fp8_e4m3(x), [0.3125, 0.28125, 1.0, 1.125, 0.0, 2.0 ** -9, 448.0, 448.0])


def test_golden_formula_by_hand():
    """One query row over three keys, blocks of two: s = (q·k)(dq·scale)dk; block 1's P is rounded against its
    max lowered by ln p_scale, block 2 rescales the running state; out = Σ fp8(e)·v·dv / Σ e."""
    q = np.array([[[1.0, 2.0]]])                  # [hq 1, r 1, D 2]
    k = np.array([[[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]]])
    v = np.array([[[1.0, 0.0], [0.0, 1.0], [3.0, -1.0]]])
    dq, dk, dv, scale, ps = np.array([[0.5]]), np.array([[1.0, 2.0, 0.25]]), np.array([2.0]), 0.5, 2.0
    s = np.array([1.0, 2.0 * 2.0, 6.0 * 0.25]) * 0.5 * 0.5            # [0.25, 1.0, 0.375]
    lp = float(np.log(np.float32(ps)))                                   # ln p_scale as the chip's fp32 Ln
    m1 = max(s[:2]) - lp
    e1 = np.exp(s[:2] - m1)
    m2 = max(m1, s[2] - lp)
    e2 = np.exp(s[2:] - m2)
    num = (fp8_e4m3(e1) @ v[0, :2] * math.exp(m1 - m2) + fp8_e4m3(e2) @ v[0, 2:]) * 2.0
    den = e1.sum() * math.exp(m1 - m2) + e2.sum()
    out, lse = attend_fp8_gqa(q, k, v, scale, deq_q=dq, deq_k=dk, deq_v=dv, p_scale=ps, kv_block=2)
    np.testing.assert_allclose(out[0, 0], num / den, rtol=1e-15)
    np.testing.assert_allclose(lse[0, 0], m2 + math.log(den), rtol=1e-15)
    # p_scale cancels without the FP8 rounding: the exact softmax up to it
    exact = np.exp(s - s.max()) / np.exp(s - s.max()).sum() @ v[0] * 2.0
    np.testing.assert_allclose(out[0, 0], exact, rtol=0.07)


@ct.jit
def _fp8_kernel(x, y, N: ct.constexpr):
    with ct.vector():
        ct.store(y[0:N], fp8_rne(ct.load(x[0:N])))


def test_kernel_fp8_rounding_is_rne_with_saturation():
    """``fp8_rne`` on every e4m3fn value, every midpoint (ties to even) and its fp32 neighbours, over/underflow."""
    vals = np.arange(0, 127, dtype=np.uint8).view(F8).astype(np.float32)     # the non-negative finite codes
    mids = (vals[:-1] + vals[1:]) / 2
    x = np.concatenate([vals, mids, np.nextafter(mids, 0), np.nextafter(mids, 1), [449.0, 470.0, 1e9, 2.0 ** -11]])
    x = x.astype(np.float32)
    n = 1024
    xin = np.zeros(n, np.float32)
    xin[:x.size] = x
    y = np.zeros(n, np.float32)
    _fp8_kernel[1](xin, y, N=n)
    np.testing.assert_array_equal(y[:x.size], fp8_e4m3(x).astype(np.float32))


# ------------------------------------------------------------------------------------------------ refusals

def test_a_p_scale_that_is_not_positive_is_refused_by_name(data):
    with pytest.raises(UnsupportedParameterError) as err:
        _v2(data, quant_scale_p=np.array([0.0], np.float32))
    assert err.value.param == "quant_scale_p" and "positive" in err.value.reason


def test_out_dtype_is_taken_only_for_an_fp8_query(data):
    with pytest.raises(UnsupportedParameterError) as err:
        _v2(data, out_dtype=np.float32)
    assert err.value.param == "out_dtype"


def test_without_out_dtype_the_fp8_output_is_op_hosts_post_quant_error(data):
    with pytest.raises(ParamError) as err:
        _v2(data, out_dtype=None)
    assert err.value.param == "quant_scale_out"


def test_a_bad_value_scale_is_op_hosts_param_error(data):
    with pytest.raises(ParamError) as err:
        _v2(data, dequant_scale_value=np.ones((1, N2), np.float32))
    assert err.value.param == "dequant_scale_value" and err.value.checker == "dequant"


@ct.inline
def _doubled(score, b, h, q_idx, kv_idx):
    return score * 2.0


def test_a_score_mod_is_refused_by_name(data):
    """A variant's hooks (``simulate_fia(hooks=...)``) are not compiled into the FP8 kernel: refused, not dropped."""
    from cvtile.kernels.fia.api import simulate_fia
    from cvtile.kernels.variants.hooks import Hooks

    optional = dict(block_table=data["bt"], actual_seq_lengths=list(np.cumsum(QLENS)),
                    actual_seq_lengths_kv=list(KVLENS), dequant_scale_query=data["dq"],
                    key_antiquant_scale=data["dk"], value_antiquant_scale=data["dv"], atten_mask=CAUSAL)
    attrs = dict(num_heads=N1, scale=1 / math.sqrt(D), pre_tokens=2147483647, next_tokens=2147483647,
                 input_layout="NTD_TND", num_key_value_heads=N2, sparse_mode=3, inner_precise=0, block_size=BS,
                 antiquant_mode=0, softmax_lse_flag=False, key_antiquant_mode=3, value_antiquant_mode=2,
                 query_quant_mode=3)
    with pytest.raises(UnsupportedParameterError) as err:
        simulate_fia(data["q"], data["k"], data["v"], optional, attrs, "Ascend950", hooks=Hooks(score_mod=_doubled),
                     dtypes={"attention_out": "bfloat16"})
    assert err.value.param == "hooks"


@pytest.mark.slow
def test_fp16_output_without_a_mask():
    """Sparse mode 0 (every key visible), an fp16 output, another block table."""
    x = _data(seed=11, qlens=(130, 2), kvlens=(520, 257))
    out, lse = _v2(x, out_dtype=np.float16, sparse_mode=0, atten_mask=None)
    gold, glse = _golden(x, sparse_mode=0)
    assert out.dtype == np.float16
    rep = compare(out, gold, "float16")
    assert rep.passed, str(rep)
    assert compare(lse, glse, "float32").passed
