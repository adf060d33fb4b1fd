"""MLA full quant on Ascend950 (float8_e4m3fn query and latent cache; quant modes 3/0/0; bf16 rope and output) on
the simulated kernel ``fia_mla_fullquant`` against the float64 golden (``golden.mla_fullquant``) and the chip's
own steps.

The comparison is the other full-quant tests' (``precision.compare``, bf16 class: the upstream check_result's
rtol 2^-7, atol 1e-4, 99.5 % of elements, outliers < 10); P's FP8 rounding against each 128-column block's max is
the golden's too, so kernel and golden part only where a P element sits within an fp32 ulp of an FP8 tie.

Default tier: two kernel specialisations, the module's dense BSND call (two batches, KV 300 and 100: a row of
three S2 blocks with a tail and a row of one; lse on), shared by the golden comparison, the chip-step check,
the V2 names and the cost model; and a paged BnBsH call (three batches, KV 129 / 300 / 7, lse off). The golden's
formula by hand and the refusals need no compile. Slow: BSH with G 16 and a 1300-long KV, TND with a BnBsH cache,
the causal mask (sparse 3) and two query tokens per batch (lse on), BNSD with a BnNBsD cache, three query tokens
and the causal mask.
"""

from __future__ import annotations

from types import SimpleNamespace

import ml_dtypes
import numpy as np
import pytest

from cvtile.kernels import UnsupportedParameterError
from cvtile.kernels.fia.api import fused_infer_attention_score_v4 as fia4
from cvtile.kernels.fia.api_v2 import V2_ATTRS_TO_V1, V2_TO_V1
from cvtile.kernels.fia.api_v2 import npu_fused_infer_attention_score_v2 as fia_v2
from cvtile.kernels.fia.cost import fia_cost
from cvtile.kernels.fia.mla_fullquant import MLA_FQ_TEMPLATE, mla_fullquant_call
from cvtile.kernels.golden.fullquant_gqa import fp8_e4m3
from cvtile.kernels.golden.mla_fullquant import mla_fullquant_golden
from cvtile.kernels.golden.mla_quant import MLA_QUANT_EPS, attend_mla_quant
from cvtile.kernels.golden.nz import to_nz
from cvtile.kernels.precision import compare
from cvtile.tiling.errors import ParamError

F8 = ml_dtypes.float8_e4m3fn
BF16 = ml_dtypes.bfloat16
D, DR, BS, S2 = 512, 64, 128, 128
DK, DV, SCALE = 1.0, 0.5, 1 / 24
CAUSAL = np.triu(np.ones((2048, 2048), np.int8), 1)


def _call(seed=0, n=8, lengths=(300, 100), layout="BSND", s1=1, cache="dense", **extra):
    """An MLA full-quant call: FP8 query and latent cache (passed as key and value, as vLLM does), bf16 ropes in
    the latent's score scale (the chip adds them before the dequant), query scales around 1/4 so the scores
    spread over a few units. ``cache``: "dense" (the query's layout), "BnBsH" or "BnNBsD" (paged, blocks of 128
    in a shuffled table)."""
    rng = np.random.default_rng(seed)
    b = len(lengths)
    tokens = extra["actual_seq_lengths"][-1] if layout == "TND" else b * s1
    q = rng.uniform(-4, 4, (tokens, n, D)).astype(F8)
    qr = rng.uniform(-6, 6, (tokens, n, DR)).astype(BF16)
    dsq = rng.uniform(0.15, 0.35, (tokens, n)).astype(np.float32)
    kw = {}
    if cache == "dense":
        s2 = max(lengths)
        key = rng.uniform(-4, 4, (b, s2, 1, D)).astype(F8)
        rope = rng.uniform(-6, 6, (b, s2, 1, DR)).astype(BF16)
        if layout == "BNSD":
            key, rope = key.transpose(0, 2, 1, 3), rope.transpose(0, 2, 1, 3)
        elif layout == "BSH":
            key, rope = key.reshape(b, s2, D), rope.reshape(b, s2, DR)
    else:
        per = -(-max(lengths) // BS)
        table = rng.permutation(b * per).astype(np.int32).reshape(b, per)
        shape = (b * per, BS) if cache == "BnBsH" else (b * per, 1, BS)
        key = rng.uniform(-4, 4, (*shape, D)).astype(F8)
        rope = rng.uniform(-6, 6, (*shape, DR)).astype(BF16)
        kw.update(block_table=table, block_size=BS)
    if layout != "TND":
        q, qr, dsq = (x.reshape(b, s1, *x.shape[1:]) for x in (q, qr, dsq))
    if layout == "BNSD":
        q, qr, dsq = q.transpose(0, 2, 1, 3), qr.transpose(0, 2, 1, 3), dsq.transpose(0, 2, 1)
    elif layout == "BSH":
        q, qr = q.reshape(b, s1, n * D), qr.reshape(b, s1, n * DR)
    kw.update(query=q, key=key, value=key, query_rope=qr, key_rope=rope, num_heads=n, num_key_value_heads=1,
              input_layout=layout, scale=SCALE, actual_seq_lengths_kv=list(lengths), dequant_scale_query=dsq,
              key_antiquant_scale=np.array([DK], np.float32), value_antiquant_scale=np.array([DV], np.float32),
              query_quant_mode=3, out_dtype="bfloat16", target="Ascend950")
    kw.update(extra)
    return kw


def _golden(kw):
    return mla_fullquant_golden(**{k: v for k, v in kw.items() if k not in ("target", "out_dtype")})


def _judge(out, g):
    return compare(out, g, "bfloat16", name="attention_out")


@pytest.fixture(scope="module")
def base():
    """The module's call (the default tier's first specialisation) and its (out, lse)."""
    kw = _call(softmax_lse_flag=True)
    return (kw, *fia4(**kw))


def test_the_kernel_matches_the_golden(base):
    """Two batches (KV 300: three S2 blocks with a 44 tail; KV 100: one block), G 8, dense BSND: the bf16 output
    within the upstream tolerance of the float64 golden, the lse within fp32's; the output is bf16 (the kernel is
    the MLA full-quant one: ``test_the_cost_model_times_it``)."""
    kw, out, lse = base
    assert out.dtype == BF16 and out.shape == (2, 1, 8, D)
    g, g_lse = _golden(kw)
    rep = _judge(out, g)
    assert rep.passed, str(rep)
    assert np.abs(g).max() > 0.3 and np.abs(out.astype(np.float64) - g).max() < 0.01 * np.abs(g).max()
    assert compare(lse, g_lse, "float32", name="softmax_lse").passed


def _chip(kw, b):
    """The chip's steps (``kernel_mla_fullquant``'s model) in numpy for batch b of a dense BSND decode."""
    f32 = np.float32
    s2 = kw["actual_seq_lengths_kv"][b]
    q = kw["query"][b, 0].astype(np.float64)
    k = kw["key"][b, :s2, 0].astype(np.float64)
    c = (q @ k.T).astype(f32) + (kw["query_rope"][b, 0].astype(f32) @ kw["key_rope"][b, :s2, 0].astype(f32).T)
    d1 = kw["dequant_scale_query"][b, 0] * f32(SCALE) * f32(DK)
    s = (c * d1[:, None]).astype(f32)
    kv = kw["key"][b, :s2, 0].astype(f32)
    gm = np.full(s.shape[0], -np.inf, f32)
    gl = np.zeros(s.shape[0], f32)
    go = np.zeros((s.shape[0], D), f32)
    nblk = -(-s2 // S2)
    for j in range(nblk):
        blk = s[:, j * S2:(j + 1) * S2]
        hm = np.maximum(gm, blk.max(axis=1))
        p = np.exp(blk - hm[:, None]).astype(f32)
        dm = np.exp(gm - hm).astype(f32)
        gl = (gl * dm + p.sum(axis=1, dtype=f32)).astype(f32)
        mp = (np.exp(blk.max(axis=1) - hm) + f32(MLA_QUANT_EPS)).astype(f32)
        p8 = fp8_e4m3(((p * f32(448)).astype(f32) / mp[:, None]).astype(f32)).astype(f32)
        o = (p8 @ kv[j * S2:(j + 1) * S2]).astype(f32)
        if j == 0:
            go = o
        elif j == 1:
            go = (go * dm[:, None]).astype(f32) * f32(DV) + (o * mp[:, None]).astype(f32) * f32(DV)
        else:
            go = (go * dm[:, None]).astype(f32) + (o * mp[:, None]).astype(f32) * f32(DV)
        gm = hm
    if nblk == 1:
        go = go * f32(DV)
    res = ((go / gl[:, None]).astype(f32) * f32(1 / 448)).astype(f32)
    return res


def test_the_kernel_follows_the_chip_steps(base):
    """The kernel's output against the chip's fp32 steps in numpy (the dequant factor f(f(dq·scale)·dk), P·448 / mp
    cast to FP8, the value scale caught up on the second block, ÷ l and ×1/448 at the end, the one-block row's
    dv before the division): within one bf16 rounding of the fp32 result everywhere, equal in almost all."""
    kw, out, _ = base
    for b in range(2):
        emu = _chip(kw, b).astype(np.float64)
        got = out.astype(np.float64)[b, 0]
        assert np.all(np.abs(got - emu) <= np.abs(emu) * 2 ** -8 + 1e-30), np.abs(got - emu).max()
        assert np.mean(got == emu.astype(np.float32).astype(BF16).astype(np.float64)) > 0.99


def test_the_golden_by_hand():
    """attend_mla_quant with the FP8 range and rounding on a 1-row, 3-column case in two blocks of 2: block 1's P
    against its own max (×448, onto the e4m3fn grid), block 2's against the new running max with its max factor
    mp, out = o / l / 448."""
    q = np.array([[[1.0, 0.0]]])
    k = np.array([[[2.0, 0.0], [0.37, 0.0], [3.0, 0.0]]])
    v = np.array([[[10.0], [-20.0], [30.0]]])
    out, lse = attend_mla_quant(q, k, v, 1.0, kv_block=2, p_range=448.0, quantise=fp8_e4m3)
    s = np.array([2.0, 0.37, 3.0])
    e1 = np.exp(s[:2] - 2.0)
    p1 = fp8_e4m3(e1 * 448 / (1 + MLA_QUANT_EPS))
    assert p1.tolist() == [448.0, 88.0]   # 448·e^-1.63 = 87.9 -> 88 (the grid's step is 8 there)
    o = p1 @ np.array([10.0, -20.0]) * (1 + MLA_QUANT_EPS)
    a = np.exp(2.0 - 3.0)
    o = o * a + 448.0 * 30.0 * (1 + MLA_QUANT_EPS)
    l_ = e1.sum() * a + 1.0
    np.testing.assert_allclose(out[0, 0, 0], o / l_ / 448, rtol=1e-15)
    np.testing.assert_allclose(lse[0, 0], 3.0 + np.log(l_), rtol=1e-15)


def test_the_value_is_the_key(base):
    """The chip's P·V reads the key's L1 copy: a value tensor other than the key changes nothing (same
    specialisation as the module call, no compile)."""
    kw, out, lse = base
    other, _ = fia4(**dict(kw, value=np.zeros_like(kw["key"])))
    np.testing.assert_array_equal(np.asarray(other, np.float64), np.asarray(out, np.float64))


def test_v2_names_run_the_same_kernel(base):
    """The module call under V2's names (dequant_scale_key / dequant_scale_value, num_query_heads,
    softmax_scale, return_softmax_lse ...) gives V4's result."""
    kw, out, lse = base
    v1_to_v2 = {v1: v2 for v2, v1 in {**V2_TO_V1, **V2_ATTRS_TO_V1}.items()}
    v2 = fia_v2(**{v1_to_v2.get(name, name): x for name, x in kw.items()})
    np.testing.assert_array_equal(np.asarray(v2[0], np.float64), np.asarray(out, np.float64))
    np.testing.assert_array_equal(v2[1], lse)


def test_the_cost_model_times_it(base):
    """``fia_cost`` times the one launch of the catch-all template's kernel (``bench_mla.py --chip950`` sets it
    against the bf16 MLA kernel)."""
    rep = fia_cost(**base[0])
    (launch,) = rep.launches
    assert launch.kernel == "fia_mla_fullquant" and launch.compute_cycles > 0 and rep.estimated_us > 0
    assert rep.tiling.template == MLA_FQ_TEMPLATE


def test_a_paged_cache_matches_the_golden():
    """A BnBsH paged cache in a shuffled block table, three batches (KV 129: two blocks, the second the last;
    300; 7), lse off (the default tier's second specialisation)."""
    kw = _call(lengths=(129, 300, 7), cache="BnBsH")
    out, lse = fia4(**kw)
    assert lse is None or lse.size == 0
    rep = _judge(out, _golden(kw)[0])
    assert rep.passed, str(rep)


# ---------------------------------------------------------------- refusals (no compile)

def _nz(kw):
    """The call with its paged BnNBsD caches as NZ (blocks, 1, D/d0, block_size, d0)."""
    return dict(kw, key=to_nz(kw["key"]), value=to_nz(kw["value"]), key_rope=to_nz(kw["key_rope"]))


@pytest.mark.parametrize("name, make, why", [
    ("query", lambda: _nz(dict(_call(cache="BnNBsD"), out_dtype=None,
                               query=np.zeros((2, 1, 8, D), np.int8),
                               key=np.zeros((6, 1, BS, D), np.int8), value=np.zeros((6, 1, BS, D), np.int8))),
     "int8 path"),
    ("key", lambda: _nz(_call(cache="BnNBsD")), "NZ cache"),
])
def test_what_the_kernel_does_not_model_is_refused_by_name(name, make, why):
    with pytest.raises(UnsupportedParameterError) as err:
        fia4(**make())
    assert err.value.param == name and why in err.value.reason


def test_a_flash_decode_split_is_refused_by_name():
    """The catch-all template gives the rope no flash decode (``CheckFlashDecode``), so no API call reaches it;
    a tiling with FD tasks is refused naming the KV lengths."""
    kw = _call()
    tiling = SimpleNamespace(fd_tasks=(object(),), kv_seqlens=(300, 100))
    arrays = {k: kw[k] for k in ("query", "key", "value", "query_rope", "key_rope", "dequant_scale_query",
                                  "key_antiquant_scale", "value_antiquant_scale")}
    with pytest.raises(UnsupportedParameterError) as err:
        mla_fullquant_call(arrays, dict(kw, sparse_mode=0), tiling)
    assert err.value.param == "actual_seq_lengths_kv" and "flash-decode" in err.value.reason


@pytest.mark.parametrize("extra, param", [
    (dict(query_quant_mode=2), "query_quant_mode"),
    (dict(value_antiquant_scale=None), "value_antiquant_scale"),
    (dict(dequant_scale_query=np.ones((2, 1, 4), np.float32)), "dequant_scale_query"),
    (dict(key_antiquant_scale=np.ones(1, np.float16)), "key_antiquant_scale"),
    (dict(learnable_sink=np.zeros(8, BF16)), "learnable_sink"),   # an FP8 query's sink: no dtype passes
    (dict(sparse_mode=9, atten_mask=np.zeros((2, 1, 1), np.int8)), "sparse_mode"),   # no tree mask on the 950
])
def test_op_host_rejects_bad_calls_with_its_status(extra, param):
    with pytest.raises(ParamError) as err:
        fia4(**_call(**extra))
    assert err.value.param == param and err.value.status in (161002, 561002)


# ---------------------------------------------------------------- slow: more shapes

@pytest.mark.slow
@pytest.mark.parametrize("case", [
    dict(lengths=(1300, 40), layout="BSH", n=16),
    dict(lengths=(300, 9), layout="TND", cache="BnBsH", sparse_mode=3, atten_mask=CAUSAL,
         actual_seq_lengths=[2, 4], softmax_lse_flag=True),
    dict(lengths=(260,), layout="BNSD", cache="BnNBsD", s1=3, sparse_mode=3, atten_mask=CAUSAL),
])
def test_more_shapes_match_the_golden(case):
    kw = _call(**case)
    out, lse = fia4(**kw)
    g, g_lse = _golden(kw)
    rep = _judge(out, g)
    assert rep.passed, str(rep)
    if kw.get("softmax_lse_flag"):
        assert compare(lse, g_lse, "float32").passed
