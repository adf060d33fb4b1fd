"""KV antiquant on the Atlas A2/A3 PromptFlashAttention route (a query S above 1 with an int8 key/value cache):
its KvAntiquant path, as ``kernel_dequant.pfa_step`` runs it, and its MSD path, as ``kernel_antiquant`` runs it.

op_host sends an fp16 query with an int8 cache and the stacked ``antiquant_scale`` / ``antiquant_offset`` (or
key/value parameters with a query S above 16) through PromptFlashAttention's KvAntiquant path: the vector
dequantises each K and V block with AscendAntiQuant, (x + offset) · scale with each step rounded to fp16, in
sub-blocks into a GM workspace, and the cube reads the fp16 blocks; the rest is the non-quant flow. The key's and
the value's own parameters with a query S of at most 16 take its MSD path: the query (and
P) split into two int8 digits with the kernel's own constants (R 127.49, E 254.98), int8 x int8 products on the
cube, the parameters applied around them as IFATiling's MSD kernel applies them, per channel or per token.

The kernels are judged against the float64 golden under the query dtype's tolerance, the KvAntiquant path's
dequantisation bit for bit (with one KV position the output row is the dequantised value row) and the MSD path's
split bit for bit (with one KV position the lse is the split score). Both build as Ascend C and run on the CPU
twin.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import cvtile
from cvtile import ParamError, UnsupportedParameterError
from cvtile.kernels.fia.cost import fia_cost, fia_plan
from cvtile.kernels.golden.dtypes import BFLOAT16
from cvtile.kernels.golden.fia import fia_golden_lowp
from cvtile.kernels.precision import compare

B, N1, N2, D = 2, 4, 2, 128
RNG = np.random.default_rng(7)


def _cache(shape):
    return RNG.integers(-128, 128, shape).astype(np.int8)


def _params(shape):
    return RNG.uniform(0.002, 0.02, shape).astype(np.float16), RNG.uniform(-3, 3, shape).astype(np.float16)


def _call(s1=64, s2=700, layout="BNSD", param_shape=(2, N2, 1, D), **extra):
    qshape = {"BNSD": (B, N1, s1, D), "BSND": (B, s1, N1, D), "BSH": (B, s1, N1 * D)}[layout]
    kshape = {"BNSD": (B, N2, s2, D), "BSND": (B, s2, N2, D), "BSH": (B, s2, N2 * D)}[layout]
    sc, of = _params(param_shape)
    kw = dict(num_heads=N1, num_key_value_heads=N2, input_layout=layout, scale=D ** -0.5, antiquant_scale=sc,
              antiquant_offset=of, softmax_lse_flag=True, **extra)
    return RNG.standard_normal(qshape).astype(np.float16), _cache(kshape), _cache(kshape), kw


def _judged(q, k, v, kw):
    out, lse = cvtile.npu_fused_infer_attention_score(q, k, v, **kw)
    g, gl = fia_golden_lowp(q, k, v, **kw)
    rep = compare(out, g, "float16")
    assert rep.passed, str(rep)
    rep = compare(lse, gl, "float16")
    assert rep.passed, f"softmax_lse: {rep}"
    return out


@pytest.mark.parametrize("layout, param_shape", [
    ("BNSD", (2, N2, 1, D)),     # per channel
    ("BSH", (2, N2 * D)),
    ("BSND", (2, N2, D)),
    ("BNSD", (2,)),              # per tensor
])
def test_the_kv_antiquant_path_matches_the_golden(layout, param_shape):
    q, k, v, kw = _call(layout=layout, param_shape=param_shape)
    assert fia_plan(q, k, v, target="Ascend910B1", **kw).route == "pfa"
    _judged(q, k, v, kw)


def test_a_causal_prefill_with_kv_lengths():
    q, k, v, kw = _call(s1=128, s2=1200, sparse_mode=3, atten_mask=np.triu(np.ones((2048, 2048), bool), 1),
                        actual_seq_lengths_kv=[1200, 333])
    _judged(q, k, v, kw)


def test_each_dequant_step_rounds_to_fp16():
    """One KV position: P is 1, so each output row is the dequantised value row, ((x + offset) rounded to fp16)
    · scale rounded to fp16, bit for bit; the exact (x + offset) · scale rounded once differs in some elements."""
    q, k, v, kw = _call(s1=8, s2=1)
    out = cvtile.npu_fused_infer_attention_score(q, k, v, **kw)[0]
    sc, of = kw["antiquant_scale"][1], kw["antiquant_offset"][1]                  # (N2, 1, D)
    stepwise = ((v.astype(np.float16) + of) * sc)[:, :, 0]                        # (B, N2, D), fp16 each step
    exact = ((v.astype(np.float64) + of.astype(np.float64)) * sc.astype(np.float64))[:, :, 0].astype(np.float16)
    assert not np.array_equal(stepwise, exact)
    want = np.repeat(stepwise, N1 // N2, axis=1)[:, :, None, :].repeat(8, axis=2)   # every query row of a group
    np.testing.assert_array_equal(out.view(np.uint16), want.view(np.uint16))


def _msd_call(qd=np.float16, s1=8, s2=700, layout="BNSD", mode=0, offset=True, **extra):
    """A call PromptFlashAttention takes through its MSD path: a query S of at most 16 with the key's and the
    value's own parameters (per channel, mode 0: (N2, 1, D) bf16, as op_host demands; per token, mode 1: (B, S2)
    fp32)."""
    q, k, v, kw = _call(s1=s1, s2=s2, layout=layout, **extra)
    kw = {n: x for n, x in kw.items() if not n.startswith("antiquant")}
    if mode == 0:
        sc, of = _params((N2, 1, D))
        vs, vo = _params((N2, 1, D))
        sc, of, vs, vo = (x.astype(BFLOAT16) for x in (sc, of, vs, vo))
    else:
        sc, of = (x.astype(np.float32) for x in _params((B, s2)))
        vs, vo = (x.astype(np.float32) for x in _params((B, s2)))
        kw.update(key_antiquant_mode=1, value_antiquant_mode=1)
    kw.update(key_antiquant_scale=sc, value_antiquant_scale=vs)
    if offset:
        kw.update(key_antiquant_offset=of, value_antiquant_offset=vo)
    return q.astype(qd), k, v, kw


@pytest.mark.parametrize("qd, s1, layout, mode, offset", [
    (BFLOAT16, 8, "BNSD", 0, True),        # per channel, the key offset only in the lse
    (BFLOAT16, 16, "BSH", 0, True),
    (np.float16, 16, "BSND", 1, True),     # per token, the key offset in the scores
    (BFLOAT16, 12, "BNSD", 1, False),
    (BFLOAT16, 2, "BNSD", 0, False),
])
def test_the_msd_path_matches_the_golden(qd, s1, layout, mode, offset):
    q, k, v, kw = _msd_call(qd, s1, layout=layout, mode=mode, offset=offset)
    assert fia_plan(q, k, v, target="Ascend910B1", **kw).route == "pfa"
    out, lse = cvtile.npu_fused_infer_attention_score(q, k, v, **kw)
    g, gl = fia_golden_lowp(q, k, v, **kw)
    dtype = "bfloat16" if qd is BFLOAT16 else "float16"
    rep = compare(out, g, dtype)
    assert rep.passed, str(rep)
    rep = compare(lse, gl, dtype)
    assert rep.passed, f"softmax_lse: {rep}"


def test_a_causal_msd_prefill_with_kv_lengths():
    q, k, v, kw = _msd_call(BFLOAT16, 16, s2=900, sparse_mode=3, atten_mask=np.triu(np.ones((2048, 2048), bool), 1),
                            actual_seq_lengths_kv=[900, 200])
    out, lse = cvtile.npu_fused_infer_attention_score(q, k, v, **kw)
    g, gl = fia_golden_lowp(q, k, v, **kw)
    assert compare(out, g, "bfloat16").passed and compare(lse, gl, "bfloat16").passed


def test_the_msd_path_scores_with_its_own_constants_bit_for_bit():
    """With one KV position the lse is the row's score times the scale, so it shows the MSD split bit for bit:
    q' = q · key_scale, a = q' · (R / amax), two digits d0 = round(a), d1 = round((a - d0) · E) (ties away from
    zero), s = ((d0·k + (d1·k) · W1) · (1/R)) · amax in fp32, with PromptFlashAttention's R 127.49 and E 254.98
    (``launch.msd_constants(pfa=True)``). IFATiling's R 127 and E 254 give other bits."""
    from cvtile.kernels.fia.launch import PFA_MSD_DIGITS, msd_constants

    rng = np.random.default_rng(3)
    q = rng.standard_normal((1, 2, 4, D)).astype(BFLOAT16)
    k = rng.integers(-128, 128, (1, 1, 1, D)).astype(np.int8)
    ks = rng.uniform(0.002, 0.02, (1, 1, D)).astype(BFLOAT16)
    kw = dict(num_heads=2, num_key_value_heads=1, input_layout="BNSD", scale=D ** -0.5, softmax_lse_flag=True,
              key_antiquant_scale=ks, value_antiquant_scale=ks)
    lse = cvtile.npu_fused_infer_attention_score(q, k, k, **kw)[1]
    f = np.float32

    def split(pfa):
        r, e, w1, _, _, inv_r = (f(x) for x in msd_constants(False, pfa=pfa))
        qs = q.astype(f) * ks.astype(f)[0, 0]
        amax = np.abs(qs).max(-1)
        a = qs * (r / amax)[..., None]
        away = lambda x: (np.sign(x) * np.floor(np.abs(x) + f(0.5))).astype(f)   # noqa: E731
        d0 = away(a)
        d1 = away((a - d0) * e)
        kk = k[0, 0, 0].astype(np.int64)
        c0, c1 = ((d.astype(np.int64) * kk).sum(-1).astype(f) for d in (d0, d1))
        return (((c0 + c1 * w1) * inv_r) * amax * f(D ** -0.5))[..., None]

    assert PFA_MSD_DIGITS == 2 and msd_constants(False, pfa=True)[:2] == (float(f(127.49)), float(f(254.98)))
    np.testing.assert_array_equal(lse, split(pfa=True))
    assert not np.array_equal(lse, split(pfa=False))


def test_a_paged_msd_call():
    """A query S of at most 16 with the key's and the value's own parameters on a paged cache."""
    q, k, v, kw = _paged(s1=8)
    ks, ko = (x.astype(BFLOAT16) for x in _params((N2, 1, D)))
    vs, vo = (x.astype(BFLOAT16) for x in _params((N2, 1, D)))
    kw = dict(kw, key_antiquant_scale=ks, key_antiquant_offset=ko, value_antiquant_scale=vs,
              value_antiquant_offset=vo, softmax_lse_flag=True)
    q = q.astype(BFLOAT16)
    out, lse = cvtile.npu_fused_infer_attention_score(q, k, v, **kw)
    g, gl = fia_golden_lowp(q, k, v, **kw)
    assert compare(out, g, "bfloat16").passed and compare(lse, gl, "bfloat16").passed


@pytest.mark.parametrize("what, param", [
    ("long_query", "query"),             # the MSD path takes a query S of at most 16
    ("fp16_separate_dense", "antiquant_scale"),   # an fp16 query of S > 16 takes the KvAntiquant path
    ("token_rank_3", "key_antiquant_scale"),      # per-token tables are (B, S)
    ("tensor_list", "key"),              # the MSD path takes no tensor list
    ("channel_fp16", "key_antiquant_scale"),      # per-channel MSD parameters are bf16
])
def test_op_hosts_rules_of_the_pfa_antiquant_paths(what, param):
    """op_host's rules of the two paths (``PromptFlashAttentionTiling``: the S check of the MSD path, the
    KvAntiquant path's CheckAntiquantParamsShape and the MSD block), checked against the real op_host built as an
    oracle: each is a ParamError naming the parameter."""
    if what == "long_query":
        q, k, v, kw = _msd_call(BFLOAT16, 40)
    elif what == "fp16_separate_dense":
        q, k, v, kw = _msd_call(np.float16, 40, mode=1)
    elif what == "token_rank_3":
        q, k, v, kw = _msd_call(np.float16, 8, mode=1)
        kw = {n: (x[None] if "antiquant_" in n and isinstance(x, np.ndarray) else x) for n, x in kw.items()}
    elif what == "tensor_list":
        q, _, _, kw = _msd_call(BFLOAT16, 8)
        k = [_cache((1, N2, s, D)) for s in (300, 520)]
        v = [_cache((1, N2, s, D)) for s in (300, 520)]
        kw["actual_seq_lengths_kv"] = [300, 520]
    else:
        q, k, v, kw = _msd_call(BFLOAT16, 8)
        kw = {n: (x.astype(np.float16) if "antiquant_" in n and isinstance(x, np.ndarray) else x)
              for n, x in kw.items()}
    with pytest.raises(ParamError) as err:
        cvtile.npu_fused_infer_attention_score(q, k, v, **kw)
    assert err.value.param == param


def test_an_fp16_query_with_per_channel_msd_parameters_is_refused_by_name():
    """op_host demands bf16 per-channel parameters on the MSD path, and its fp16 MSD template reads them as fp16
    values: what the chip then computes is not simulated."""
    q, k, v, kw = _msd_call(BFLOAT16, 8)
    with pytest.raises(UnsupportedParameterError) as err:
        cvtile.npu_fused_infer_attention_score(q.astype(np.float16), k, v, **kw)
    assert err.value.param == "key_antiquant_scale" and "fp16" in err.value.reason


@pytest.mark.parametrize("path, kernel", [("kv_antiquant", "fia_dequant"), ("msd", "fia_antiquant")])
def test_the_cost_model_times_the_call(path, kernel):
    q, k, v, kw = _call() if path == "kv_antiquant" else _msd_call(BFLOAT16, 16)
    rep = fia_cost(q, k, v, target="Ascend910B1", **kw)
    assert [lc.kernel for lc in rep.launches] == [kernel] and rep.estimated_us > 0


def _paged(s1=32, s2=600, bs=128):
    nb = -(-s2 // bs)
    q = RNG.standard_normal((B, s1, N1 * D)).astype(np.float16)
    k, v = _cache((B * nb, bs, N2 * D)), _cache((B * nb, bs, N2 * D))
    bt = RNG.permutation(B * nb).astype(np.int32).reshape(B, nb)
    return q, k, v, dict(num_heads=N1, num_key_value_heads=N2, input_layout="BSH", block_table=bt, block_size=bs,
                         actual_seq_lengths_kv=[s2, 451], scale=D ** -0.5)


def test_a_paged_cache_with_key_and_value_parameters():
    """An fp16 query S above 16 with the key's and the value's own per-channel parameters on a paged cache: the
    KvAntiquant path's paged copy, under op_host's rules for it ((1, H) parameters with BSH, inner_precise 1,
    sparse_mode 3 with its mask)."""
    q, k, v, kw = _paged()
    ks, ko = _params((1, N2 * D))
    vs, vo = _params((1, N2 * D))
    _judged(q, k, v, dict(kw, key_antiquant_scale=ks, key_antiquant_offset=ko, value_antiquant_scale=vs,
                          value_antiquant_offset=vo, softmax_lse_flag=True, inner_precise=1, sparse_mode=3,
                          atten_mask=np.triu(np.ones((2048, 2048), bool), 1)))


def test_a_key_value_tensor_list():
    q, _, _, kw = _call(s1=40)
    ks = [_cache((1, N2, s, D)) for s in (300, 520)]
    vs = [_cache((1, N2, s, D)) for s in (300, 520)]
    _judged(q, ks, vs, dict(kw, actual_seq_lengths_kv=[300, 520]))


@pytest.mark.parametrize("path", ["kv_antiquant", "msd"])
def test_a_shared_prefix_on_either_path(path):
    """op_host takes a shared prefix with KV antiquant on this route (dense; per-channel parameters: per-token
    ones with a prefix are refused): its
    blocks come first in every row, dequantised (or multiplied) with the same parameters. The route counts each
    batch's own KV, so the launch adds the prefix's length, as it does for IFATiling's."""
    if path == "kv_antiquant":
        q, k, v, kw = _call(s1=40, s2=300)
        qd = np.float16
    else:
        qd = BFLOAT16
        q, k, v, kw = _msd_call(qd, 16, s2=300)
    kp, vp = _cache((1, N2, 200, D)), _cache((1, N2, 200, D))
    kw.update(key_shared_prefix=kp, value_shared_prefix=vp, actual_shared_prefix_len=[163],
              actual_seq_lengths_kv=[300, 120])
    out, lse = cvtile.npu_fused_infer_attention_score(q, k, v, **kw)
    g, gl = fia_golden_lowp(q, k, v, **kw)
    dtype = "float16" if qd is np.float16 else "bfloat16"
    rep = compare(out, g, dtype)
    assert rep.passed, str(rep)
    assert compare(lse, gl, dtype).passed


def test_per_token_parameters_with_a_shared_prefix_are_refused_by_name():
    q, k, v, kw = _msd_call(np.float16, 8, s2=300, mode=1)
    kp = _cache((1, N2, 200, D))
    kw.update(key_shared_prefix=kp, value_shared_prefix=kp, actual_shared_prefix_len=[200])
    with pytest.raises(UnsupportedParameterError) as err:
        cvtile.npu_fused_infer_attention_score(q, k, v, **kw)
    assert err.value.param == "key_antiquant_mode"


def test_a_paged_cache_with_the_stacked_parameters_is_op_hosts_error():
    """The KvAntiquant path's paged copy reads the key's and the value's own parameters: with only the stacked
    antiquant_scale op_host finds the key's scale missing."""
    q, k, v, kw = _paged()
    kw.update(zip(("antiquant_scale", "antiquant_offset"), _params((2, N2 * D))))
    with pytest.raises(ParamError) as err:
        cvtile.npu_fused_infer_attention_score(q, k, v, **kw)
    assert err.value.param == "key_antiquant_scale"


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not on PATH (the twin needs a C++17 g++)")
@pytest.mark.parametrize("path, kernel", [("kv_antiquant", "fia_dequant"), ("msd", "fia_antiquant")])
def test_the_ascend_c_build_runs_the_pfa_antiquant_paths_on_the_twin(tmp_path, path, kernel):
    """The KvAntiquant path's sub-blocked staging and the MSD path's digit hand-offs as Ascend C: syntax-checked
    for both arches and run on the CPU twin against the simulator's results (the workspaces included)."""
    from cvtile.dsl import ascendc as A
    from cvtile.dsl.jit import record_launches
    from cvtile.kernels.precision import MAX_FAIL_RATIO, twin_tolerance

    q, k, v, kw = _call(s1=16, s2=300) if path == "kv_antiquant" else _msd_call(BFLOAT16, 16, s2=300)
    with record_launches() as rec:
        cvtile.npu_fused_infer_attention_score(q, k, v, **kw)
    chosen = [A.Launch.of(r) for r in rec.launches]
    assert [c.kernel.name for c in chosen] == [kernel]
    res = A.emit(str(tmp_path), chosen, tolerance=twin_tolerance(q.dtype), max_fail_ratio=MAX_FAIL_RATIO,
                 goldens="as_run")
    A.check_project(str(tmp_path), res["kernels"])
    report = A.run_project(str(tmp_path), A.arch_of(chosen[0].kernel.platform))
    lines = [ln for ln in report.splitlines() if ln.strip()]
    assert lines and all(ln.startswith("PASS") for ln in lines), report


def test_a_tall_prefill_runs_in_row_passes():
    """op_host's M of 256 rows with S2 blocks of 1024 does not fit the kernel's UB at once: the launch takes each
    task's rows in passes (``row_passes``), each dequantising the task's K and V again."""
    q = RNG.standard_normal((1, 2, 512, D)).astype(np.float16)
    k, v = _cache((1, 1, 2048, D)), _cache((1, 1, 2048, D))
    sc, of = _params((2, 1, 1, D))
    kw = dict(num_heads=2, num_key_value_heads=1, input_layout="BNSD", scale=D ** -0.5, antiquant_scale=sc,
              antiquant_offset=of, softmax_lse_flag=True)
    t = fia_plan(q, k, v, target="Ascend910B1", **kw)
    assert (t.route, t.m_base, t.s2_base) == ("pfa", 256, 1024)
    _judged(q, k, v, kw)


def test_an_inner_precise_the_pfa_route_reads_by_bits_is_refused_by_name_regression():
    """Found by the fuzz tier (seed 20261210): inner_precise=-1 on the PFA route, which op_host reads by its bits
    0 and 1 without a range check, ran the KvAntiquant path, and the golden then raised a plain ValueError. The
    API refuses a value outside op_host's range there, naming inner_precise."""
    q, k, v, kw = _call(s1=3, s2=1)
    with pytest.raises(UnsupportedParameterError) as err:
        cvtile.npu_fused_infer_attention_score(q, k, v, **dict(kw, inner_precise=-1))
    assert err.value.param == "inner_precise" and "PromptFlashAttention" in err.value.reason
