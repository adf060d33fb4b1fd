"""Ascend950 MXFP8 full quant (``kernel_fullquant_mx``): FP8 query, key and value with float8_e8m0 group scales,
query/key/value quant modes 6/6/8, TND with a dense or a paged BnNBsD cache, as the upstream pytest
``fia_fullquant_mxfp8_test`` calls it (its data: fp16 uniform in [-1, 1] quantised with one power of two per 32
elements, 2^(floor(log2 max|x|) - 8), along D for q and k and along the KV positions for v).

The kernel is judged against the float64 golden (``golden.fullquant_mx``: the LN2-aligned max, P rounded to FP8
per 256 columns) under the upstream tolerance (``precision.compare``; the upstream check_result: bf16 rtol 2^-7,
atol 1e-4, fp16 rtol 0.005, atol 2.5e-5, 99.5 % of elements, outliers < 10).

Specialisations (numba compiles, ~45 s each cold): the module's dense call (prefill query scale, bf16 output,
causal band, lse), in the default tier, and the paged call (the decode-form query scale, quant_scale_p 15, fp16
output, no mask), in the slow tier with the fp32 operands' specialisation. A long decode (flash decode: the
pieces' partials merged by ``fia_fd_combine``) runs in the default tier, fp16 and bf16.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from cvtile.dsl.jit import record_launches
from cvtile.kernels.errors import UnsupportedParameterError
from cvtile.kernels.fia.api import fused_infer_attention_score_v4
from cvtile.kernels.fia.api_v2 import npu_fused_infer_attention_score_v2 as fia_v2
from cvtile.kernels.fia.cost import fia_cost, fia_plan
from cvtile.kernels.fia.fullquant_mx import MX_TEMPLATE
from cvtile.kernels.fia.kernel import fia_fd_combine
from cvtile.kernels.fia.launch import kernel_layout
from cvtile.kernels.fia.mla_fullquant import MLA_FQ_TEMPLATE
from cvtile.kernels.golden.fullquant import LN2_F32
from cvtile.kernels.golden.fullquant_gqa import fp8_e4m3
from cvtile.kernels.golden.fullquant_mx import attend_mxfp8, e8m0_values, fullquant_mx_reference, mx_dequantised
from cvtile.kernels.precision import compare
from cvtile.tiling.errors import ParamError
from cvtile.tiling.platform import get_platform

F8 = ml_dtypes.float8_e4m3fn
E8 = ml_dtypes.float8_e8m0fnu
BF16 = ml_dtypes.bfloat16
N1, N2, D = 4, 2, 128
#: batch 0: one S2 block of two sub-loops (256 + 44); batch 1: a block of one sub-loop; batch 2: two blocks
QLENS, KVLENS = (3, 70, 5), (300, 130, 600)
CAUSAL = np.triu(np.ones((2048, 2048), bool), 1)


def _mx_quant(x, axis):
    """Upstream's MXFP8 quantisation of x along ``axis`` (a multiple of 32 long): per group of 32 the power of two
    2^(floor(log2 max|x|) - 8) (1 for an all-zero group). Returns (fp8 x, E8M0 exponents [..., groups, ...])."""
    x = np.moveaxis(np.asarray(x, np.float32), axis, -1)
    g = x.reshape(x.shape[:-1] + (-1, 32))
    amax = np.abs(g).max(axis=-1)
    e = np.where(amax > 0, np.floor(np.log2(np.maximum(amax, 1e-30))) - 8, 0)
    q = np.clip(g / 2.0 ** e[..., None], -448, 448).astype(F8).reshape(x.shape)
    return np.moveaxis(q, -1, axis), np.moveaxis((e + 127).astype(np.uint8), -1, axis)


def _fp16(rng, shape):
    return rng.uniform(-1, 1, shape).astype(np.float16).astype(np.float32)


def _pairs(e):
    """E8M0 exponents [..., G] (G even) as the packed [..., G/2, 2] float8_e8m0 tensor."""
    return e.reshape(e.shape[:-1] + (-1, 2)).view(E8)


def _dense_data(seed=9, qlens=QLENS, kvlens=KVLENS, d=D):
    """TND q, k, v and their scales: q/k per 32 channels ([T, N, D/64, 2]); v per 32 positions of each batch
    ([Σ ceil(S2/64), N2, D, 2], an odd group count padded with byte 0 as upstream pads it)."""
    rng = np.random.default_rng(seed)
    q, eq = _mx_quant(_fp16(rng, (sum(qlens), N1, d)), 2)
    k, ek = _mx_quant(_fp16(rng, (sum(kvlens), N2, d)), 2)
    vraw = _fp16(rng, (sum(kvlens), N2, d))
    v, rows, t0 = np.empty(vraw.shape, F8), [], 0
    for s2 in kvlens:
        pad = -(-s2 // 64) * 64
        blk = np.zeros((pad, N2, d), np.float32)
        blk[:s2] = vraw[t0:t0 + s2]
        vq, ev = _mx_quant(blk, 0)                                   # ev [pad/32, N2, D]
        v[t0:t0 + s2] = vq[:s2]
        ev[-(-s2 // 32):] = 0                                        # groups past the KV: upstream's 2^-127 pad
        rows.append(ev.reshape(-1, 2, N2, d).transpose(0, 2, 3, 1))
        t0 += s2
    return dict(q=q, k=k, v=v, dq=_pairs(eq), dk=_pairs(ek), dv=np.concatenate(rows).view(E8), qlens=qlens,
                kvlens=kvlens, bt=None)


def _paged_data(seed=5, qlens=(2, 9), kvlens=(700, 64), bs=128):
    """A BnNBsD cache through a permuted block table, k's scales [blocks, N2, bs, D/64, 2], v's per 32 positions
    of a block [blocks, N2, bs/64, D, 2]; the query scale in the decode form [N2, T, G, D/64, 2]."""
    rng = np.random.default_rng(seed)
    nblk = [-(-s // bs) for s in kvlens]
    perm = rng.permutation(sum(nblk)).astype(np.int32)
    bt = np.full((len(kvlens), max(nblk)), -1, np.int32)
    i = 0
    for b, nb in enumerate(nblk):
        bt[b, :nb] = perm[i:i + nb]
        i += nb
    q, eq = _mx_quant(_fp16(rng, (sum(qlens), N1, D)), 2)
    k, ek = _mx_quant(_fp16(rng, (sum(nblk), N2, bs, D)), 3)
    v, ev = _mx_quant(_fp16(rng, (sum(nblk), N2, bs, D)), 2)       # ev [blocks, N2, bs/32, D]
    ev = ev.reshape(ev.shape[0], N2, -1, 2, D).transpose(0, 1, 2, 4, 3)
    eq5 = eq.reshape(sum(qlens), N2, N1 // N2, D // 32).transpose(1, 0, 2, 3)
    return dict(q=q, k=k, v=v, dq=_pairs(eq5), dk=_pairs(ek), dv=np.ascontiguousarray(ev).view(E8), qlens=qlens,
                kvlens=kvlens, bt=bt, bs=bs)


def _v2(x, **extra):
    kw = dict(num_query_heads=N1, num_key_value_heads=N2, input_layout="TND",
              actual_seq_qlen=list(np.cumsum(x["qlens"])), dequant_scale_query=x["dq"], dequant_scale_key=x["dk"],
              dequant_scale_value=x["dv"], query_quant_mode=6, key_quant_mode=6, value_quant_mode=8,
              softmax_scale=1 / math.sqrt(x["q"].shape[-1]), target="Ascend950")
    if x["bt"] is None:
        kw.update(actual_seq_kvlen=list(np.cumsum(x["kvlens"])), sparse_mode=3, atten_mask=CAUSAL,
                  return_softmax_lse=True, out_dtype=BF16)
    else:
        kw.update(actual_seq_kvlen=list(x["kvlens"]), block_table=x["bt"], block_size=x["bs"], out_dtype=np.float16)
    kw.update(extra)
    return fia_v2(x["q"], x["k"], x["v"], **kw)


def _golden(x, p_scale=1.0, sparse_mode=None):
    if sparse_mode is None:
        sparse_mode = 3 if x["bt"] is None else 0
    return fullquant_mx_reference(x["q"], x["k"], x["v"], x["dq"], x["dk"], x["dv"], qlens=x["qlens"],
                                  kvlens=x["kvlens"], scale=1 / math.sqrt(x["q"].shape[-1]), num_heads=N1,
                                  num_kv_heads=N2,
                                  p_scale=p_scale, block_table=x["bt"], sparse_mode=sparse_mode)


@pytest.fixture(scope="module")
def data():
    return _dense_data()


@pytest.fixture(scope="module")
def v2_run(data):
    return _v2(data)


def test_kernel_matches_the_golden(data, v2_run):
    out, lse = v2_run
    gold, glse = _golden(data)
    reps = [compare(out, gold, "bfloat16", name="attention_out"), compare(lse, glse, "float32", name="softmax_lse")]
    assert out.dtype == BF16 and out.shape == gold.shape == (sum(QLENS), N1, D) and lse.shape == glse.shape
    assert all(r.passed for r in reps), "\n".join(map(str, reps))
    assert reps[0].violations <= 0.001 * reps[0].total, str(reps[0])   # P's FP8 ties only


def test_v4_api_runs_the_same_call(data, v2_run):
    """aclnn V4's names (key/value_antiquant_scale, key/value_antiquant_mode) give V2's result bit for bit."""
    out, lse = fused_infer_attention_score_v4(
        data["q"], data["k"], data["v"], num_heads=N1, num_key_value_heads=N2, input_layout="TND",
        actual_seq_lengths=list(np.cumsum(QLENS)), actual_seq_lengths_kv=list(np.cumsum(KVLENS)),
        dequant_scale_query=data["dq"], key_antiquant_scale=data["dk"], value_antiquant_scale=data["dv"],
        query_quant_mode=6, key_antiquant_mode=6, value_antiquant_mode=8, scale=1 / math.sqrt(D), sparse_mode=3,
        atten_mask=CAUSAL, softmax_lse_flag=True, out_dtype="bfloat16", target="Ascend950")
    np.testing.assert_array_equal(out.view(np.uint16), v2_run[0].view(np.uint16))
    np.testing.assert_array_equal(lse, v2_run[1])


def _edged(data, low):
    """The data with a query scale byte 255 (a NaN: row (5, 2)'s scores, hence its output and lse, NaN), key
    groups and a value group scaled by byte ``low``, key 0's first channel the smallest FP8 subnormal 2^-9."""
    k = data["k"].copy()
    k[0, 0, 0] = 2.0 ** -9
    dk = data["dk"].view(np.uint8).copy()
    dk[:40, :, 0, 0] = low
    dv = data["dv"].view(np.uint8).copy()
    dv[1, :, :, 1] = low
    dq = data["dq"].view(np.uint8).copy()
    dq[5, 2, 1, 0] = 255
    return dict(data, k=k, dk=dk.view(E8), dv=dv.view(E8), dq=dq.view(E8))


def _check_edged(x):
    out, lse = _v2(x)
    gold, glse = _golden(x)
    assert np.isnan(out[5, 2].astype(np.float32)).all() and np.isnan(lse[5, 2]).all()
    assert not np.isnan(np.delete(out.reshape(-1, D).astype(np.float32), 5 * N1 + 2, axis=0)).any()
    rep = compare(out, gold, "bfloat16")
    assert rep.passed and rep.nonfinite_mismatches == 0, str(rep)
    assert compare(lse, glse, "float32").passed


def test_e8m0_edge_bytes_in_the_kernel(data):
    """Byte 255 reads as a NaN and propagates through the row; byte 20 (2^-107) groups, even times an FP8
    subnormal, stay exact in bf16."""
    _check_edged(_edged(data, 20))


def _spec_dtype(x):
    from cvtile.kernels.fia.api import prepare_fia

    optional = dict(actual_seq_lengths=list(np.cumsum(x["qlens"])), actual_seq_lengths_kv=list(np.cumsum(x["kvlens"])),
                    dequant_scale_query=x["dq"], key_antiquant_scale=x["dk"], value_antiquant_scale=x["dv"])
    attrs = dict(num_heads=N1, scale=1 / math.sqrt(D), pre_tokens=2147483647, next_tokens=2147483647,
                 input_layout="TND", num_key_value_heads=N2, sparse_mode=0, inner_precise=0, block_size=0,
                 antiquant_mode=0, softmax_lse_flag=False, key_antiquant_mode=6, value_antiquant_mode=8,
                 query_quant_mode=6)
    arrays, _ = prepare_fia(x["q"], x["k"], x["v"], optional, attrs, "Ascend950", dtypes={"attention_out": "bfloat16"})
    spec = arrays["_fullquant_mx"]
    assert spec.query.dtype == spec.key.dtype == spec.value.dtype
    return spec.query.dtype


def test_the_kernel_reads_bf16_unless_a_product_leaves_its_normal_range(data):
    """FP8 values times E8M0 scales are exact bf16 values (4 significant bits, fp32's exponents) except below
    2^-126 (byte 0 = 2^-127 times an FP8 value under 2^-3, here 2^-9, is a bf16 subnormal that drops bits):
    then fp32."""
    assert _spec_dtype(data) == BF16
    assert _spec_dtype(_edged(data, 20)) == BF16
    assert _spec_dtype(_edged(data, 0)) == np.float32


@pytest.mark.slow
def test_e8m0_byte_0_runs_the_fp32_specialisation(data):
    """Byte 0 (2^-127, E8M0 has no 0) on key and value groups: the fp32 operands, the same result as the golden."""
    _check_edged(_edged(data, 0))


@pytest.mark.slow   # the second specialisation (~45 s cold); the default tier runs the dense one
def test_paged_cache_with_the_decode_form_query_scale():
    """BnNBsD with a permuted block table, the [N2, T, G, D/64, 2] query scale, quant_scale_p 15 (P's FP8 range
    up to 15), an fp16 output, no mask."""
    x = _paged_data()
    out, _ = _v2(x, quant_scale_p=np.array([15.0], np.float32))
    gold, _ = _golden(x, p_scale=15.0)
    assert out.dtype == np.float16
    rep = compare(out, gold, "float16")
    assert rep.passed, str(rep)


def test_cost_model_times_the_call(data):
    rep = fia_cost(data["q"], data["k"], data["v"], target="Ascend950", num_heads=N1, num_key_value_heads=N2,
                   input_layout="TND", actual_seq_lengths=list(np.cumsum(QLENS)),
                   actual_seq_lengths_kv=list(np.cumsum(KVLENS)), dequant_scale_query=data["dq"],
                   key_antiquant_scale=data["dk"], value_antiquant_scale=data["dv"], query_quant_mode=6,
                   key_antiquant_mode=6, value_antiquant_mode=8, scale=1 / math.sqrt(D), sparse_mode=3,
                   atten_mask=CAUSAL, softmax_lse_flag=True, out_dtype="bfloat16")
    assert [lc.kernel for lc in rep.launches] == ["fia_fullquant_mx"] and rep.estimated_us > 0
    assert rep.tiling.template == "FiaTilingFullQuantMxArch35"


def test_emit_lowers_the_kernel(data):
    """``cvtile emit``'s lowering takes the kernel (its bf16 operands are the host-dequantised FP8 x E8M0
    products, not the chip's FP8 tensors and scales)."""
    from cvtile.dsl import ascendc
    from cvtile.dsl.jit import record_launches

    with record_launches() as rec:
        _v2(data)
    launches = [ascendc.Launch.of(r) for r in rec.launches]
    assert [lc.kernel.name for lc in launches] == ["fia_fullquant_mx"]
    assert ascendc.lowered(launches[0].kernel) is not None


@pytest.mark.slow
def test_d64_without_a_mask_and_an_empty_batch():
    """D 64 (op_host's config 27), sparse mode 0 without a mask, a batch without KV (its rows 0, lse +inf)."""
    x = _dense_data(seed=4, qlens=(100, 3, 7), kvlens=(1100, 0, 77), d=64)
    out, lse = _v2(x, sparse_mode=0, atten_mask=None)
    gold, glse = _golden(x, sparse_mode=0)
    assert compare(out, gold, "bfloat16").passed and compare(lse, glse, "float32").passed
    assert not out[100:103].astype(np.float32).any() and np.isposinf(lse[100:103]).all()


# ------------------------------------------------------------------------------------------------ golden

def test_e8m0_bytes_read_as_powers_of_two():
    """2^(e - 127); byte 0 is 2^-127 (E8M0 has no 0) and 255 a NaN."""
    got = e8m0_values(np.array([0, 1, 126, 127, 128, 254, 255], np.uint8).view(E8))
    np.testing.assert_array_equal(got[:-1], [2.0 ** -127, 2.0 ** -126, 0.5, 1.0, 2.0, 2.0 ** 127])
    assert np.isnan(got[-1])


def test_scale_layouts_by_hand():
    """q/k: [.., D/64, 2] pairs of 32-channel groups in order; dense v: batch b's rows start after the earlier
    batches' ceil(S2/64) rows, group 2r + c at [r, .., c]; paged v: [block, N2, bs/64, D, 2] the same per block."""
    d = 64
    q = np.ones((1, 1, d), F8)
    dq = np.array([[[[127, 128]]]], np.uint8).view(E8)              # channels 0-31 x1, 32-63 x2
    k = np.ones((3, 1, d), F8)                                       # batches of 1 and 2 positions
    dk = np.full((3, 1, 1, 2), 127, np.uint8).view(E8)
    v = np.ones((3, 1, d), F8)
    dv = np.zeros((2, 1, d, 2), np.uint8)
    dv[0, :, :, 0], dv[1, :, :, 0] = 129, 130                       # batch 0 group 0 x4; batch 1 group 0 x8
    qd, kd, vd = mx_dequantised(q, k, v, dq, dk, dv.view(E8), kvlens=(1, 2), paged=False)
    np.testing.assert_array_equal(qd[0, 0], [1.0] * 32 + [2.0] * 32)
    np.testing.assert_array_equal(kd, np.ones((3, 1, d)))
    np.testing.assert_array_equal(vd[:, 0, 0], [4.0, 8.0, 8.0])
    vp = np.ones((1, 1, 128, d), F8)
    dvp = np.zeros((1, 1, 2, d, 2), np.uint8)
    dvp[0, 0, :, :, 0], dvp[0, 0, :, :, 1] = [[127], [129]], [[128], [130]]
    _, _, vpd = mx_dequantised(q, vp, vp, dq, np.full((1, 1, 128, 1, 2), 127, np.uint8).view(E8),
                               dvp.view(E8), kvlens=(128,), paged=True)
    np.testing.assert_array_equal(vpd[0, 0, ::32, 0], [1.0, 2.0, 4.0, 8.0])


def test_golden_formula_by_hand():
    """One query row over 300 keys in two 256-column blocks: the block max aligned up to a multiple of LN2, P
    against it lowered by ln p_scale and rounded to FP8, the second block rescaling the first's state; the lse
    carries ln p_scale as the chip's does."""
    rng = np.random.default_rng(1)
    q = rng.uniform(-1, 1, (1, 1, 4))
    k = rng.uniform(-1, 1, (1, 300, 4))
    v = rng.uniform(-1, 1, (1, 300, 2))
    ps, scale = 2.0, 0.5
    out, lse = attend_mxfp8(q, k, v, scale, p_scale=ps)
    s = (q[0] @ k[0].T)[0] * scale
    lp = float(np.log(np.float32(ps)))

    def aligned(x):
        return math.ceil(x * 1.4426950216293335) * LN2_F32

    m0 = aligned(s[:256].max())
    m1 = max(m0, aligned(s[256:].max()))
    e0, e1 = np.exp(s[:256] - m0 + lp), np.exp(s[256:] - m1 + lp)
    o = fp8_e4m3(e0) @ v[0, :256] * math.exp(m0 - m1) + fp8_e4m3(e1) @ v[0, 256:]
    l_ = e0.sum() * math.exp(m0 - m1) + e1.sum()
    np.testing.assert_allclose(out[0, 0], o / l_, rtol=1e-12)
    np.testing.assert_allclose(lse[0, 0], m1 + math.log(l_), rtol=1e-12)
    assert abs(lse[0, 0] - (np.log(np.exp(s - s.max()).sum()) + s.max()) - lp) < 1e-12


# ---------------------------------------------------------------------------------------------- refusals

def test_a_query_rope_without_a_key_rope_is_op_hosts_error(data):
    with pytest.raises(ParamError) as err:
        _v2(data, query_rope=np.ones((sum(QLENS), N1, 64), BF16))
    assert err.value.param == "key_rope"


def test_a_rope_with_an_fp16_output_is_op_hosts_error(data):
    qr, kr = _ropes(data)
    with pytest.raises(ParamError) as err:
        _v2(data, query_rope=qr, key_rope=kr, out_dtype=np.float16)
    assert "MXFP8 with rope needs bf16 output" in str(err.value)


def test_a_p_scale_that_is_not_positive_is_refused_by_name(data):
    with pytest.raises(UnsupportedParameterError) as err:
        _v2(data, quant_scale_p=np.array([0.0], np.float32))
    assert err.value.param == "quant_scale_p"


def _launched(x, **extra):
    """The call's output and lse, and the names of the kernels it launched."""
    with record_launches() as rec:
        out, lse = _v2(x, return_softmax_lse=True, **extra)
    return out, lse, [r.kernel.name for r in rec.launches]


@pytest.fixture(scope="module")
def long_decode():
    """The decode form on a long KV: op_host's stream-K splits each (batch, kv head)'s row across cores."""
    return _paged_data(qlens=(1, 1), kvlens=(16384, 3000), bs=128)


def test_flash_decode_splits_merge_to_the_golden(long_decode):
    """Each piece of a split row writes its normalised partial, max and sum to the workspace; the combine merges
    them (fp16 output). Output and lse against the golden; quant_scale_p 15 leaves its ln in the lse, as a whole
    row's does."""
    x = long_decode
    out, lse, kernels = _launched(x, quant_scale_p=np.array([15.0], np.float32))
    assert kernels == ["fia_fullquant_mx", "fia_fd_combine"]
    gold, glse = _golden(x, p_scale=15.0)
    rep = compare(out, gold, "float16")
    assert rep.passed, str(rep)
    np.testing.assert_allclose(lse.reshape(-1), glse.reshape(-1), rtol=0, atol=1e-5)


def test_flash_decode_with_a_bf16_output(long_decode):
    x = long_decode
    out, lse, kernels = _launched(x, out_dtype=BF16)
    assert out.dtype == BF16 and kernels[-1] == "fia_fd_combine"
    gold, glse = _golden(x)
    rep = compare(out, gold, "bfloat16")
    assert rep.passed, str(rep)
    np.testing.assert_allclose(lse.reshape(-1), glse.reshape(-1), rtol=0, atol=1e-5)


def _ropes(x, seed=3):
    """bf16 query_rope (T, N1, 64) and key_rope shaped as the key (dense (T_kv, N2, 64) or paged (blocks, N2, bs,
    64))."""
    rng = np.random.default_rng(seed)
    kshape = x["k"].shape[:-1] + (64,)
    return (rng.uniform(-1, 1, (x["q"].shape[0], N1, 64)).astype(BF16), rng.uniform(-1, 1, kshape).astype(BF16))


def test_the_bf16_rope_adds_its_scores(data):
    """A bf16 rope (op_host then wants a bf16 output): the kernel accumulates q_rope · k_ropeᵀ onto the MX
    scores, as the chip's cube does in L0C; against the golden with the rope, which the output without it would
    fail."""
    qr, kr = _ropes(data)
    out, lse = _v2(data, query_rope=qr, key_rope=kr)
    gold, glse = fullquant_mx_reference(data["q"], data["k"], data["v"], data["dq"], data["dk"], data["dv"],
                                        qlens=QLENS, kvlens=KVLENS, scale=1 / math.sqrt(D), num_heads=N1,
                                        num_kv_heads=N2, sparse_mode=3, query_rope=qr, key_rope=kr)
    rep = compare(out, gold, "bfloat16")
    assert rep.passed, str(rep)
    assert not compare(out, _golden(data)[0], "bfloat16").passed
    finite = np.isfinite(glse)
    np.testing.assert_allclose(lse[finite], glse[finite], rtol=0, atol=1e-5)


def test_the_rope_of_a_paged_cache_with_flash_decode(long_decode):
    """key_rope paged as the key (blocks, N2, bs, 64), on the long decode whose rows split across cores."""
    x = long_decode
    qr, kr = _ropes(x)
    out, lse, kernels = _launched(x, query_rope=qr, key_rope=kr, out_dtype=BF16)
    assert kernels == ["fia_fullquant_mx", "fia_fd_combine"]
    gold, glse = fullquant_mx_reference(x["q"], x["k"], x["v"], x["dq"], x["dk"], x["dv"], qlens=x["qlens"],
                                        kvlens=x["kvlens"], scale=1 / math.sqrt(D), num_heads=N1, num_kv_heads=N2,
                                        block_table=x["bt"], query_rope=qr, key_rope=kr)
    rep = compare(out, gold, "bfloat16")
    assert rep.passed, str(rep)
    np.testing.assert_allclose(lse.reshape(-1), glse.reshape(-1), rtol=0, atol=1e-5)


def _pa_nz(x, kr=None):
    """The PA_NZ form of ``_paged_data``'s cache as upstream's ``mxfp8_pa_preprocessing`` lays it out: FP8 key /
    value (Bn, N2, D/32, bs, 32), key scale (Bn, N2, bs/16, D/64, 16, 2), value scale (Bn, N2, Dv/16, bs/64, 16,
    2), bf16 key_rope (Bn, N2, Dr/16, bs, 16)."""
    bn, n, bs, d = x["k"].shape

    def fp8(t):
        return np.ascontiguousarray(t.reshape(bn, n, bs, d // 32, 32).transpose(0, 1, 3, 2, 4))

    nz = dict(x, k=fp8(x["k"]), v=fp8(x["v"]),
              dk=np.ascontiguousarray(x["dk"].reshape(bn, n, bs // 16, 16, d // 64, 2).transpose(0, 1, 2, 4, 3, 5)),
              dv=np.ascontiguousarray(x["dv"].reshape(bn, n, bs // 64, d // 16, 16, 2).transpose(0, 1, 3, 2, 4, 5)))
    if kr is None:
        return nz
    return nz, np.ascontiguousarray(kr.reshape(bn, n, bs, kr.shape[-1] // 16, 16).transpose(0, 1, 3, 2, 4))


def test_a_pa_nz_cache_gives_the_bnnbsd_result(long_decode):
    """The PA_NZ cache, its NZ scales and an NZ key_rope: the host reads them as the BnNBsD cache they hold, so
    the call gives the BnNBsD call's output and lse bit for bit (flash decode and rope included)."""
    x = long_decode
    qr, kr = _ropes(x)
    nz, kr_nz = _pa_nz(x, kr)
    want = _v2(x, query_rope=qr, key_rope=kr, out_dtype=BF16, return_softmax_lse=True)
    got = _v2(nz, query_rope=qr, key_rope=kr_nz, out_dtype=BF16, return_softmax_lse=True)
    np.testing.assert_array_equal(got[0].view(np.uint16), want[0].view(np.uint16))
    np.testing.assert_array_equal(got[1], want[1])


@pytest.mark.parametrize("rounding, expected", [("round", 1 + 2.0 ** -10), ("rint", 1.0)])
def test_the_combine_rounds_its_output_as_told(rounding, expected):
    """Two pieces with equal (max, sum) merge with weights of exactly 1/2: a merged 1 + 2^-11, an fp16 tie, is
    rounded half away from zero (the 950's full-quant combine with an fp16 output, ``ROUND="round"``) or to even
    (the default)."""
    dv, r = 16, 8
    out = np.zeros((1, 1, 1, dv), np.float16)
    lse = np.zeros((1, 1, 1, 1), np.float32)
    ws_o = np.zeros((2, r, dv), np.float32)
    ws_o[:, 0, :] = 1 + 2.0 ** -11
    ws_o[:, 0, 1] = -(1 + 2.0 ** -11)
    ws_ml = np.zeros((2, 2, r), np.float32)
    ws_ml[:, 1, :] = 1.0
    fd_tab = np.array([[0, 0, 0, 1, 2, 0]], np.int64)
    work = np.array([[0, 0, 1]], np.int64)
    one = np.zeros(1, np.float32)
    fia_fd_combine.on(get_platform("Ascend950"))[1](
        out, lse, one, ws_o, ws_ml, fd_tab, work, np.array([0, 1], np.int64), np.array([1], np.int64),
        np.array([0], np.int64), one, one, LAYOUT=kernel_layout("BNSD"), ORDER="GS1", TOKEN=False, G=1, R=r, DV=dv,
        LSE=True, SINK=False, EMPTY_LSE=float("inf"), ROUND=rounding)
    assert out[0, 0, 0, 0] == np.float16(expected) and out[0, 0, 0, 1] == np.float16(-expected)
    assert out[0, 0, 0, 2] == np.float16(expected)
    assert lse[0, 0, 0, 0] == np.float32(np.log(np.float32(2.0)))


def test_the_mla_full_quant_template_is_not_mxfp8():
    """FP8 MLA full quant (modes 3/0/0, D 512 + bf16 rope 64) passes op_host on the catch-all template, not
    MXFP8's (it runs on ``fia_mla_fullquant``: ``test_fia_mla_fullquant950``)."""
    t, n1 = 4, 8
    q = np.ones((t, n1, 512), F8)
    k = np.ones((t, 1, 512), F8)
    tiling = fia_plan(q, k, k, query_rope=np.ones((t, n1, 64), BF16), key_rope=np.ones((t, 1, 64), BF16),
                      num_heads=n1, num_key_value_heads=1, input_layout="TND", actual_seq_lengths=[t],
                      actual_seq_lengths_kv=[t], dequant_scale_query=np.ones((t, n1), np.float32),
                      key_antiquant_scale=np.ones(1, np.float32), value_antiquant_scale=np.ones(1, np.float32),
                      query_quant_mode=3, out_dtype="bfloat16", target="Ascend950")
    assert tiling.template == MLA_FQ_TEMPLATE != MX_TEMPLATE
