"""MLA full quant on Ascend950 (float8_e4m3fn or int8 query and latent cache; quant modes 3/0/0; bf16 rope and
output) on the simulated kernel ``fia_mla_fullquant`` against the float64 golden (``golden.mla_fullquant``) and
the chip's own steps.

The comparison is the other full-quant tests' (``precision.compare``, bf16 class: the upstream check_result's
rtol 2^-7, atol 1e-4, 99.5 % of elements, outliers < 10); P's FP8 rounding against each 128-column block's max is
the golden's too, so kernel and golden part only where a P element sits within an fp32 ulp of an FP8 tie. The
int8 flavour's adds the A2/A3 MLA quant test's floor of one P step (max|golden| / 127): the chip rounds P through
fp16 to int8 (``_judge``).

Default tier: two kernel specialisations, the module's dense BSND FP8 call (two batches, KV 300 and 100: a row
of three S2 blocks with a tail and a row of one; lse on), shared by the golden comparison, the chip-step check,
the V2 names and the cost model; and the int8 flavour's paged NZ BSND call (KV 129 / 300 / 7, lse on), shared by
its golden comparison and its chip-step check. The golden's formula by hand and the refusals need no compile.
Slow: a paged BnBsH FP8 call (three batches, KV 129 / 300 / 7, lse off), BSH with G 16 and a 1300-long KV,
TND with a BnBsH cache, the causal mask (sparse 3) and two query tokens per batch (lse on), BNSD with a BnNBsD
cache, three query tokens and the causal mask, an FP8 NZ cache with G 32; int8 with an NZ cache in BSH (G 16, KV
1300) and in TND with the causal mask and two query tokens per batch.
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
from cvtile.kernels.golden.nz import from_nz, to_nz
from cvtile.kernels.precision import compare
from cvtile.tiling.errors import ParamError

F8 = ml_dtypes.float8_e4m3fn
BF16 = ml_dtypes.bfloat16
D, DR, BS, S2 = 512, 64, 128, 128
DK, DV, SCALE = 1.0, 0.5, 1 / 24
CAUSAL = np.triu(np.ones((2048, 2048), np.int8), 1)


def _call(seed=0, n=8, lengths=(300, 100), layout="BSND", s1=1, cache="dense", int8=False, **extra):
    """An MLA full-quant call: FP8 query and latent cache (passed as key and value, as vLLM does), bf16 ropes in
    the latent's score scale (the chip adds them before the dequant), query scales around 1/4 so the scores
    spread over a few units; ``int8``: int8 query and cache over [-127, 127] with query scales and dk to match
    (dk 0.05, dv 0.01; no out_dtype: that override is the FP8 one's). ``cache``: "dense" (the query's layout),
    "BnBsH", "BnNBsD" or "NZ" (paged, blocks of 128 in a shuffled table; NZ: the BnNBsD blocks in 32-byte
    fractals, the bf16 rope's of 16)."""
    rng = np.random.default_rng(seed)
    b = len(lengths)
    tokens = extra["actual_seq_lengths"][-1] if layout == "TND" else b * s1
    lat = (lambda shape: rng.integers(-127, 128, shape).astype(np.int8)) if int8 else \
        (lambda shape: rng.uniform(-4, 4, shape).astype(F8))
    q = lat((tokens, n, D))
    qr = rng.uniform(-6, 6, (tokens, n, DR)).astype(BF16)
    dsq = rng.uniform(0.002, 0.004, (tokens, n)) if int8 else rng.uniform(0.15, 0.35, (tokens, n))
    dsq = dsq.astype(np.float32)
    kw = {}
    if cache == "dense":
        s2 = max(lengths)
        key = lat((b, s2, 1, D))
        rope = rng.uniform(-6, 6, (b, s2, 1, DR)).astype(BF16)
        if layout == "BNSD":
            key, rope = key.transpose(0, 2, 1, 3), rope.transpose(0, 2, 1, 3)
        elif layout == "BSH":
            key, rope = key.reshape(b, s2, D), rope.reshape(b, s2, DR)
    else:
        per = -(-max(lengths) // BS)
        table = rng.permutation(b * per).astype(np.int32).reshape(b, per)
        shape = (b * per, BS) if cache == "BnBsH" else (b * per, 1, BS)
        key = lat((*shape, D))
        rope = rng.uniform(-6, 6, (*shape, DR)).astype(BF16)
        if cache == "NZ":
            key, rope = to_nz(key), to_nz(rope)
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
    if int8:
        kw.update(key_antiquant_scale=np.array([0.05], np.float32),
                  value_antiquant_scale=np.array([0.01], np.float32), out_dtype=None)
    kw.update(extra)
    return kw


def _golden(kw):
    return mla_fullquant_golden(**{k: v for k, v in kw.items() if k not in ("target", "out_dtype")})


def _judge(out, g, int8=False):
    """The bf16 comparison; the int8 flavour's with the A2/A3 MLA quant test's absolute floor of one P step at
    the output's scale (max|golden| / 127): the chip's fp32 -> fp16 -> int8 double rounding of P moves an
    element of P by one step where the golden rounds once, which a cancelling attention row does not hide."""
    return compare(out, g, "bfloat16", name="attention_out", atol=float(np.abs(g).max()) / 127 if int8 else None)


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


def _kv_rows(kw, b, name):
    """Batch b's (s2, width) rows of the key (or key_rope) of a BSND call: dense, or paged through its table."""
    s2, x = kw["actual_seq_lengths_kv"][b], kw[name]
    if "block_table" not in kw:
        return x[b, :s2, 0]
    x = from_nz(x) if x.ndim == 5 else x.reshape(x.shape[0], 1, BS, -1) if x.ndim == 3 else x
    return x[kw["block_table"][b], 0].reshape(-1, x.shape[-1])[:s2]


def _chip(kw, b):
    """The chip's steps (``kernel_mla_fullquant``'s model) in numpy for batch b of a BSND decode: FP8, or int8
    (the nope score read through the DATO bias: the int32 sum's bits as fp32 less 10485760; P through fp16 to
    int8, both RINT; P·V in int32; ×1/127 at the end)."""
    f32 = np.float32
    int8 = kw["query"].dtype == np.int8
    rng_, dk, dv = f32(127 if int8 else 448), f32(kw["key_antiquant_scale"][0]), f32(kw["value_antiquant_scale"][0])
    s2 = kw["actual_seq_lengths_kv"][b]
    kv = _kv_rows(kw, b, "key").astype(np.float64)
    c = kw["query"][b, 0].astype(np.float64) @ kv.T
    if int8:   # the bias 2^21 + 150·2^23 in the int32 accumulator, then + (-2^21)·5 in fp32
        c = (c.astype(np.int64) + 1260388352).astype(np.int32).view(f32) + f32(-10485760)
    c = c.astype(f32) + (kw["query_rope"][b, 0].astype(f32) @ _kv_rows(kw, b, "key_rope").astype(f32).T)
    d1 = kw["dequant_scale_query"][b, 0] * f32(SCALE) * dk
    s = (c * d1[:, None]).astype(f32)
    kv = kv.astype(f32)
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
        x = ((p * rng_).astype(f32) / mp[:, None]).astype(f32)
        p8 = np.rint(x.astype(np.float16)).astype(f32) if int8 else fp8_e4m3(x).astype(f32)
        o = (p8.astype(np.float64) @ kv[j * S2:(j + 1) * S2]).astype(f32)
        if j == 0:
            go = o
        elif j == 1:
            go = (go * dm[:, None]).astype(f32) * dv + (o * mp[:, None]).astype(f32) * dv
        else:
            go = (go * dm[:, None]).astype(f32) + (o * mp[:, None]).astype(f32) * dv
        gm = hm
    if nblk == 1:
        go = go * dv
    return ((go / gl[:, None]).astype(f32) * f32(1 / rng_)).astype(f32)


def _follows_the_chip(kw, out):
    """The kernel's output within one bf16 rounding of the chip's fp32 steps everywhere, equal in almost all."""
    for b in range(len(kw["actual_seq_lengths_kv"])):
        emu = _chip(kw, b).astype(np.float64)
        got = out.astype(np.float64)[b, 0]
        assert np.all(np.abs(got - emu) <= np.abs(emu) * 2 ** -8 + 1e-30), np.abs(got - emu).max()
        assert np.mean(got == emu.astype(np.float32).astype(BF16).astype(np.float64)) > 0.99


def test_the_kernel_follows_the_chip_steps(base):
    """The kernel's output against the chip's fp32 steps in numpy (the dequant factor f(f(dq·scale)·dk), P·448 / mp
    cast to FP8, the value scale caught up on the second block, ÷ l and ×1/448 at the end, the one-block row's
    dv before the division): within one bf16 rounding of the fp32 result everywhere, equal in almost all."""
    _follows_the_chip(*base[:2])


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


@pytest.mark.slow
def test_a_paged_cache_matches_the_golden():
    """A BnBsH paged cache in a shuffled block table, three batches (KV 129: two blocks, the second the last;
    300; 7), lse off (slow: the int8 flavour's call reads a paged cache in the default tier)."""
    kw = _call(lengths=(129, 300, 7), cache="BnBsH")
    out, lse = fia4(**kw)
    assert lse is None or lse.size == 0
    rep = _judge(out, _golden(kw)[0])
    assert rep.passed, str(rep)


@pytest.fixture(scope="module")
def int8():
    """The int8 flavour's call (the default tier's third specialisation): int8 query and latent cache in the
    paged NZ cache op_host demands of it, three batches (KV 129: two blocks, the second the last; 300: three; 7),
    G 8, BSND, lse on; and its (out, lse)."""
    kw = _call(lengths=(129, 300, 7), cache="NZ", int8=True, softmax_lse_flag=True)
    return (kw, *fia4(**kw))


def test_the_int8_flavour_matches_the_golden(int8):
    """The int8 flavour (DATO score read, P int8 against 127, int32 P·V, ×1/127) within the bf16 tolerance with
    the A2/A3 MLA quant's floor of one P step (``_judge``) of the float64 golden, the lse within fp32's."""
    kw, out, lse = int8
    assert out.dtype == BF16 and out.shape == (3, 1, 8, D)
    g, g_lse = _golden(kw)
    rep = _judge(out, g, int8=True)
    assert rep.passed, str(rep)
    assert np.abs(g).max() > 0.3 and np.abs(out.astype(np.float64) - g).max() < 0.01 * np.abs(g).max()
    assert compare(lse, g_lse, "float32", name="softmax_lse").passed


def test_the_int8_flavour_follows_the_chip_steps(int8):
    """The int8 flavour against the chip's steps in numpy (the DATO bias read bit for bit, P through fp16 to int8,
    P·V in int32), read through the NZ cache's block table; a zero value tensor changes nothing (V is the key);
    the cost model times the same kernel."""
    kw, out, _ = int8
    _follows_the_chip(kw, out)
    other, _ = fia4(**dict(kw, value=np.zeros_like(kw["value"])))
    np.testing.assert_array_equal(np.asarray(other, np.float64), np.asarray(out, np.float64))
    (launch,) = fia_cost(**kw).launches
    assert launch.kernel == "fia_mla_fullquant" and launch.compute_cycles > 0


# ---------------------------------------------------------------- refusals (no compile)

def test_the_hifloat8_flavour_is_refused_by_name():
    """op_host takes a HiFloat8 MLA full quant, but no call reaches it here: a HiF8 query is uint8 codes and the
    V2 binding refuses a query_dtype override by name; the host side refuses such a query by name too (its P cast
    to HiF8 against 32768, CAST_ROUND, is not simulated)."""
    kw = _call(cache="NZ")
    with pytest.raises(UnsupportedParameterError) as err:
        fia_v2(kw["query"].view(np.uint8), kw["key"].view(np.uint8), kw["value"].view(np.uint8),
               query_dtype="hifloat8", key_dtype="hifloat8", value_dtype="hifloat8", target="Ascend950")
    assert err.value.param == "query_dtype"
    arrays = {k: kw[k] for k in ("key", "value", "query_rope", "key_rope", "dequant_scale_query",
                                  "key_antiquant_scale", "value_antiquant_scale")}
    with pytest.raises(UnsupportedParameterError) as err:
        mla_fullquant_call(dict(arrays, query=kw["query"].view(np.uint8)), dict(kw, sparse_mode=0),
                           SimpleNamespace(fd_tasks=()))
    assert err.value.param == "query" and "HiF8" in err.value.reason


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
    (dict(int8=True, cache="BnNBsD", layout="TND", actual_seq_lengths=[1, 2]), "key"),   # int8: NZ only
    (dict(int8=True, cache="NZ", layout="BNSD"), "input_layout"),   # int8: no BNSD
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
    dict(lengths=(260, 40), cache="NZ", n=32, softmax_lse_flag=True),
    dict(lengths=(1300, 40), layout="BSH", n=16, cache="NZ", int8=True),
    dict(lengths=(300, 9), layout="TND", cache="NZ", int8=True, sparse_mode=3, atten_mask=CAUSAL,
         actual_seq_lengths=[2, 4], softmax_lse_flag=True),
], ids=["bsh-g16", "tnd-bnbsh-causal", "bnsd-bnnbsd-causal", "fp8-nz-g32", "int8-nz-bsh-g16",
        "int8-nz-tnd-causal"])
def test_more_shapes_match_the_golden(case):
    kw = _call(**case)
    out, lse = fia4(**kw)
    g, g_lse = _golden(kw)
    rep = _judge(out, g, case.get("int8", False))
    assert rep.passed, str(rep)
    if kw.get("softmax_lse_flag"):
        assert compare(lse, g_lse, "float32").passed
