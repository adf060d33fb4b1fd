"""MLA FA quant on Atlas A2/A3 (int8 query, key and value; query_quant_mode 3; bf16 rope and output) on the
simulated kernel ``fia_mla_quant`` against the float64 golden (``golden.mla_quant``) and the chip's own steps.

Default tier: one kernel specialisation (G 8, one batch, KV 300 in NZ blocks of 128, BSND), shared by the
golden comparison (with lse), the chip-step check (a planted q·k outside the DATO trick's exact range), the
V2 API, the cost model and the Ascend C build on the CPU twin; the DATO read against the bit pattern, the
golden's formula by hand, the refusals and the launches of the MLA perf mode's flash decode and balanced split
(recorded, not run) need no compile. Slow: three S2 blocks, BSH with three batches and G 16, TND with the causal
mask (sparse 3) and two query tokens per batch (lse), four query tokens with the causal mask and with a tree
(sparse 9: the causal tree with row 3 also hiding column 1), flash decode over KV 4100 (SplitBNS), BSH with
per-batch KV lengths that differ (the balanced split, rows spanning cores merged by the FD combine), TND
with per-batch query lengths 1 and 2.

The comparison floor (``_judge``): bf16's rtol, and an absolute floor of max|golden| / 127, one int8 step of P
at the output's scale; the worst errors are 3-4e-3 of max|golden| (the chip's fp16 -> int8 double rounding of
P and its fp16 P·V hand-off against the float64 golden)."""

from __future__ import annotations

import shutil

import ml_dtypes
import numpy as np
import pytest

import cvtile.dsl.ascendc as A
from cvtile.dsl.jit import record_launches
from cvtile.kernels import UnsupportedParameterError, compare
from cvtile.kernels.fia.api import fused_infer_attention_score_v4 as fia4
from cvtile.kernels.fia.api_v2 import npu_fused_infer_attention_score_v2 as fia_v2
from cvtile.kernels.fia.cost import fia_cost
from cvtile.kernels.golden.fia import fia_golden
from cvtile.kernels.golden.mla_quant import MLA_QUANT_EPS, attend_mla_quant
from cvtile.kernels.golden.nz import from_nz, to_nz
from cvtile.tiling.errors import ParamError

BF16 = ml_dtypes.bfloat16
D, DR, BS = 512, 64, 128
DK, DV, SCALE = 0.01, 0.02, 0.04


def _call(seed=0, n=8, lengths=(300,), layout="BSND", s1=1, target="Ascend910B1", plant=False, **extra):
    """A paged MLA FA-quant decode: int8 query and NZ key/value (one latent tensor, as vLLM passes it), bf16
    ropes; ``plant`` makes head 0's query and KV position 5 all 127 (q·k = 512·127², beyond DATO's exact
    range) with a query scale that makes that score about 4 (the others near 0)."""
    rng = np.random.default_rng(seed)
    b = len(lengths)
    per = -(-max(lengths) // BS)
    table = rng.permutation(b * per).astype(np.int32).reshape(b, per)
    key = rng.integers(-127, 128, (b * per, 1, BS, D)).astype(np.int8)
    rope = rng.uniform(-1, 1, (b * per, 1, BS, DR)).astype(BF16)
    tokens = extra["actual_seq_lengths"][-1] if layout == "TND" else b * s1
    q = rng.integers(-127, 128, (tokens, n, D)).astype(np.int8)
    qr = rng.uniform(-1, 1, (tokens, n, DR)).astype(BF16)
    dsq = rng.uniform(0.002, 0.01, (tokens, n)).astype(np.float32)
    if plant:
        q[:, 0] = 127
        key[table[0, 0], 0, 5] = 127
        dsq[:, 0] = 1e-3
    if layout != "TND":
        q, qr, dsq = (x.reshape(b, s1, *x.shape[1:]) for x in (q, qr, dsq))
    if layout == "BSH":
        q, qr = q.reshape(b, s1, n * D), qr.reshape(b, s1, n * DR)
    kw = dict(query=q, key=to_nz(key), value=to_nz(key), query_rope=qr, key_rope=to_nz(rope), num_heads=n,
              num_key_value_heads=1, input_layout=layout, scale=SCALE, block_table=table, block_size=BS,
              actual_seq_lengths_kv=list(lengths), dequant_scale_query=dsq,
              key_antiquant_scale=np.array([DK], np.float32), value_antiquant_scale=np.array([DV], np.float32),
              query_quant_mode=3, target=target)
    kw.update(extra)
    return kw


def _golden(kw):
    return fia_golden(**{k: v for k, v in kw.items() if k != "target"})


def _judge(out, g):
    """The bf16 comparison with an absolute floor of one P step at the output's scale (max|golden| / 127):
    P's int8 quantisation (and the chip's fp16 -> int8 double rounding of it) moves an element by a fraction
    of the row's scale, not of the element, and an attention row of random values is a sum that cancels."""
    return compare(out, g, "bfloat16", atol=float(np.abs(g).max()) / 127)


@pytest.fixture(scope="module")
def base():
    kw = _call(softmax_lse_flag=True)
    with record_launches() as rec:
        out, lse = fia4(**kw)
    return kw, out, lse, rec.launches


def test_the_kernel_matches_the_golden(base):
    """G 8 heads over KV 300 (one S2 block): bf16 output within one P step at the row's scale of the float64
    golden, the lse within fp32's tolerance; the kernel is the MLA FA-quant one and writes bf16."""
    kw, out, lse, launches = base
    assert [r.kernel.name for r in launches] == ["fia_mla_quant"]
    assert out.dtype == BF16 and out.shape == (1, 1, 8, D)
    g, g_lse = _golden(kw)
    rep = _judge(out, g)
    assert rep.passed, str(rep)
    assert np.abs(g).max() > 0.1
    assert compare(lse, g_lse, "float32").passed


def _dato(c):
    """The DATO read of int32 scores c, piecewise per fp32 binade (as ``kernel_mla_quant.dato``)."""
    f32 = np.float32
    t = (np.asarray(c) + 2 ** 21).astype(f32)
    v = np.where(t >= 2 ** 23, 2 ** 24 + (t - 2 ** 23) * 2, np.where(t >= 0, 2 ** 23 + t, np.where(
        t >= -2 ** 23, 2 ** 23 + t * f32(0.5), 2 ** 22 + (t + 2 ** 23) * f32(0.25)))).astype(f32)
    return (v - f32(10485760)).astype(f32)


def test_dato_is_the_bit_pattern():
    """The piecewise DATO read equals the chip's: the int32 2²¹ + 150·2²³ + c read as fp32 (the upstream st
    executor's ``AS_fp32``), minus 2²¹ · 5, over every |c| <= 512·128² (a sample, and the binade edges);
    exact, c itself, on [-2²¹, 6291456)."""
    edges = np.array([-2 ** 23, -6291456, -2 ** 21 - 1, -2 ** 21, 0, 6291455, 6291456, 2 ** 23])
    c = np.concatenate([edges, np.random.default_rng(3).integers(-2 ** 23, 2 ** 23 + 1, 20000)])
    bits = (c + 1260388352).astype(np.int32).view(np.float32)
    np.testing.assert_array_equal(_dato(c), bits - np.float32(10485760))
    inside = (c >= -2 ** 21) & (c < 6291456)
    np.testing.assert_array_equal(_dato(c)[inside], c[inside])
    beyond = ~inside & (c != 6291456)   # (6291456 itself reads as 2c - 6291456 = c)
    assert np.all(_dato(c)[beyond] != c[beyond])


def _chip(kw):
    """The chip's steps (``kernel_mla_quant``'s model) in numpy for a one-batch, one-block BSND decode."""
    f32, f16 = np.float32, np.float16
    s2 = kw["actual_seq_lengths_kv"][0]
    table = kw["block_table"][0]
    k = from_nz(kw["key"])[table, 0].reshape(-1, D)[:s2].astype(np.int64)
    kr = from_nz(kw["key_rope"])[table, 0].reshape(-1, DR)[:s2].astype(f32)
    q = kw["query"][0, 0].astype(np.int64)
    qr = kw["query_rope"][0, 0].astype(f32)
    c = q @ k.T
    nope = _dato(c)
    d1 = (kw["dequant_scale_query"][0, 0] * f32(DK)).astype(f32) * f32(SCALE)
    s = ((nope + (qr @ kr.T).astype(f32)) * d1[:, None]).astype(f32)
    hm = s.max(axis=1)
    p = np.exp(s - hm[:, None]).astype(f32)
    gl = p.sum(axis=1, dtype=f32)
    mp = (np.exp(hm - hm) + f32(MLA_QUANT_EPS)).astype(f32)
    p8 = np.rint((p * (f32(127) / mp)[:, None]).astype(f32).astype(f16)).astype(np.int64)
    o = (p8 @ k).astype(f32) * f32(1 / 1024)
    go = o.astype(f16) * mp.astype(f16)[:, None]
    res = go.astype(f32) * f32(1024) / gl[:, None] * f32(f32(DV) * f32(1 / 127))
    return res.astype(BF16).astype(np.float64), nope, c


def test_the_kernel_follows_the_chip_steps_through_dato():
    """The same kernel on data whose head 0 meets a key with q·k = 512·127² = 8258048: the DATO trick's int32
    bias carries into the fp32 exponent there, and the chip (and the kernel) score it 10224640, not 8258048.
    Every other element of the kernel's output equals the chip's steps in numpy (the module doc of
    kernel_mla_quant) to one bf16 rounding, and the planted head differs from the float golden by far more."""
    kw = _call(plant=True, softmax_lse_flag=True)   # the module call's specialisation (lse on): no compile
    out, _ = fia4(**kw)
    emu, nope, c = _chip(kw)
    assert c[0, 5] == 512 * 127 * 127 and nope[0, 5] == 10224640.0
    got = out.astype(np.float64)[0, 0]
    assert np.all(np.abs(got - emu) <= np.abs(emu) * 2 ** -8 + 1e-6), np.abs(got - emu).max()
    g, _ = _golden(kw)
    tol = np.abs(g).max() / 127
    assert np.abs(g[0, 0, 0] - got[0]).max() > 10 * tol > 10 * np.abs(got[1:] - g[0, 0, 1:]).max()


def test_the_golden_by_hand():
    """attend_mla_quant on a 1-row, 3-column case in two blocks of 2, against the formula by hand: block 1's
    P against its own max, block 2's against the new running max with its max factor mp, out = o / l / 127."""
    q = np.array([[[1.0, 0.0]]])
    k = np.array([[[2.0, 0.0], [0.5, 0.0], [3.0, 0.0]]])
    v = np.array([[[10.0], [-20.0], [30.0]]])
    out, lse = attend_mla_quant(q, k, v, 1.0, kv_block=2)
    s = np.array([2.0, 0.5, 3.0])
    e1 = np.exp(s[:2] - 2.0)
    p1 = np.round(e1 * 127 / (1 + MLA_QUANT_EPS))
    o = p1 @ np.array([10.0, -20.0]) * (1 + MLA_QUANT_EPS)
    l_ = e1.sum()
    a = np.exp(2.0 - 3.0)
    p2 = np.round(1.0 * 127 / (1 + MLA_QUANT_EPS))
    o = o * a + p2 * 30.0 * (1 + MLA_QUANT_EPS)
    l_ = l_ * a + 1.0
    assert p1.tolist() == [127.0, 28.0]
    np.testing.assert_allclose(out[0, 0, 0], o / l_ / 127, rtol=1e-15)
    np.testing.assert_allclose(lse[0, 0], 3.0 + np.log(l_), rtol=1e-15)


def test_v2_names_run_the_same_kernel(base):
    """V2's dequant_scale_query / dequant_scale_key / dequant_scale_value / query_quant_mode give V1's
    result."""
    kw, out, lse, _ = base
    v2 = fia_v2(kw["query"], kw["key"], kw["value"], query_rope=kw["query_rope"], key_rope=kw["key_rope"],
                num_query_heads=8, num_key_value_heads=1, input_layout="BSND", softmax_scale=SCALE,
                block_table=kw["block_table"], block_size=BS, actual_seq_kvlen=kw["actual_seq_lengths_kv"],
                dequant_scale_query=kw["dequant_scale_query"], dequant_scale_key=kw["key_antiquant_scale"],
                dequant_scale_value=kw["value_antiquant_scale"], query_quant_mode=3, return_softmax_lse=True,
                target=kw["target"])
    np.testing.assert_array_equal(np.asarray(v2[0], np.float64), np.asarray(out, np.float64))
    np.testing.assert_array_equal(v2[1], lse)


def test_the_cost_model_times_it(base):
    kw, *_ = base
    rep = fia_cost(**kw)
    assert [c.kernel for c in rep.launches] == ["fia_mla_quant"] and rep.launches[0].compute_cycles > 0


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not on PATH (the Ascend C checks need a C++17 g++)")
def test_the_kernel_builds_and_runs_on_the_twin(base, tmp_path):
    """The Ascend C backend lowers it (the NZ caches copied into L1 as fractals, the int8 P·V through
    LoadDataWithTranspose, the 8-row int8 query planned at its NZ size, the latent and rope scores in L0C until
    their hand-off; each was a refusal): both arches' syntax checks pass, and on the A2/A3 twin the output is the
    simulator's and the lse within the twin tolerance."""
    from cvtile.kernels.precision import MAX_FAIL_RATIO, twin_tolerance

    launches = [A.Launch.of(r) for r in base[3]]
    res = A.emit(str(tmp_path), launches, goldens="as_run", tolerance=twin_tolerance(np.dtype("float16")),
                 max_fail_ratio=MAX_FAIL_RATIO)
    A.check_project(str(tmp_path), res["kernels"])
    report = A.run_project(str(tmp_path), A.arch_of(launches[0].kernel.platform))
    assert report.count("PASS") == len(res["outputs"]) == 2, report


@pytest.mark.parametrize("name, extra, why", [
    ("learnable_sink", dict(learnable_sink=np.zeros(8, np.float32)), "learnable sink"),
    ("key_rope_antiquant_scale", dict(key_rope_antiquant_scale=np.ones(1, np.float32)), "reserved"),
])
def test_what_the_kernel_does_not_model_is_refused_by_name(name, extra, why):
    with pytest.raises(UnsupportedParameterError) as err:
        fia4(**_call(**extra))
    assert err.value.param == name and why in err.value.reason


@pytest.mark.parametrize("extra, kernels, blocks", [
    (dict(lengths=(4100,)), ["fia_mla_quant", "fia_fd_combine"], 8),
    (dict(lengths=(3000, 700, 5000), layout="BSH", n=16), ["fia_mla_quant", "fia_fd_combine"], 18),
    (dict(lengths=(300, 9), layout="TND", actual_seq_lengths=[1, 3]), ["fia_mla_quant"], 2),
])
def test_the_nz_cache_takes_the_mla_mode_with_flash_decode_and_the_balanced_split(extra, kernels, blocks):
    """IFATiling sets its GQA KV-NZ flag only without rope, so MLA FA quant (always an NZ cache) is perf mode 5,
    not 6 (GQA MTP / DD, which has no FD): a long KV is flash-decoded (SplitBNS; the FD combine runs after the
    kernel), and TND or per-batch KV lengths that differ take the balanced split (rows spanning cores merged by
    the FD combine; TND batches with their own query rows). Recorded here, not run (no compile); the numerics
    are in the slow tier, the tiling against op_host in tests/tiling/test_ophost_rows_regression.py."""
    kw = _call(**extra)
    with record_launches(run=False) as rec:
        fia4(**kw)
    assert [r.kernel.name for r in rec.launches] == kernels
    assert rec.launches[0].grid == blocks


@pytest.mark.parametrize("extra, param", [
    (dict(query_quant_mode=2), "query_quant_mode"),
    (dict(input_layout="BNSD"), None),
    (dict(value_antiquant_scale=None), "value_antiquant_scale"),
    (dict(dequant_scale_query=np.ones((1, 1, 4), np.float32)), "dequant_scale_query"),
    (dict(quant_scale2=np.ones(1, np.float32)), "quant_scale2"),
])
def test_op_host_rejects_bad_calls_with_its_status(extra, param):
    kw = _call(**extra)
    if extra.get("input_layout") == "BNSD":
        kw["query"], kw["query_rope"] = (x.transpose(0, 2, 1, 3) for x in (kw["query"], kw["query_rope"]))
        kw["dequant_scale_query"] = kw["dequant_scale_query"].transpose(0, 2, 1)
        param = "input_layout"
    with pytest.raises(ParamError) as err:
        fia4(**kw)
    assert err.value.param == param and err.value.status in (161002, 561002)


# ---------------------------------------------------------------- slow: more shapes

@pytest.mark.slow
@pytest.mark.parametrize("case", [
    dict(lengths=(1300,)),
    dict(lengths=(300, 700, 20), layout="BSH", n=16),
    dict(lengths=(300, 9), layout="TND", sparse_mode=3, atten_mask=np.triu(np.ones((2048, 2048), np.int8), 1),
         actual_seq_lengths=[2, 4], softmax_lse_flag=True),
    dict(s1=4, sparse_mode=3, atten_mask=np.triu(np.ones((2048, 2048), np.int8), 1)),
    dict(s1=4, sparse_mode=9, atten_mask=np.triu(np.ones((1, 4, 4), np.int8), 1) | (np.arange(16) == 13)
         .reshape(1, 4, 4).astype(np.int8)),
    dict(lengths=(4100,)),
    dict(lengths=(3000, 700, 5000), layout="BSH", n=16),
    dict(lengths=(300, 9), layout="TND", actual_seq_lengths=[1, 3]),
])
def test_more_shapes_match_the_golden(case):
    kw = _call(**case)
    out, _ = fia4(**kw)
    rep = _judge(out, _golden(kw)[0])
    assert rep.passed, str(rep)
