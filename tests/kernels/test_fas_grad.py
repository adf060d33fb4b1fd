"""The FlashAttentionScore backward (``npu_fusion_attention_grad``) on the simulated chip against the float64
analytic backward ``fas_grad_golden``, the golden itself against finite differences, and the refusals.

The forward's results the backward takes (softmax_max / softmax_sum / attention_in) come from the float64
forward golden (P rounded to the input dtype as the chip does), so these tests need neither the FAS tiling
mirror nor the forward kernel; one slow test feeds the forward kernel's outputs (and its seeded dropout) in
end to end.

Judging: fp32 outputs within 2**-13 of max|golden| (every element); fp16 / bf16 by ``precision.compare``
with the dtype's rtol and an absolute floor of one output ulp at the tensor's largest magnitude. dsink is
an fp32 output, judged by the inputs' class: its row terms use Δ = rowsum(dO∘O) of the dtype-rounded
attention_in, as the chip's pre-step does, where the golden's Δ is exact (fp16 1.3e-4 - 4.4e-4, bf16 up to
8e-3 of max|dsink| on the grid: a sum of signed terms over the rows). A gradient
element is a sum over a whole sequence of products whose P / dS operand the cube takes rounded to the input
dtype, so its error scales with the tensor, not the element: the default floors (2.5e-5 / 1e-4) fail 0.7 %
(fp16) to 8 % (bf16) of the small elements, the same elements a float64 emulation of that rounding fails.

The wide tier runs issue 10's grid (layouts × dtypes × causal / band × dropout × sink, 24 cases).

Compile budget: each feature set is two kernel compiles (~35 s each, cold). The default tier holds one fp32
set (outer pse type 1, sink, window + mask, a fully masked row), shared by the finite-difference check of the
kernel's dq; the slow tier adds fp16 GQA causal (BSND), bf16 TND with an empty batch, BSH with a broadcast
pse, a per-head mask and seeded dropout after the forward kernel, SBH fp16 alibi, and prefix + alibi-sqrt +
sink.
"""

from __future__ import annotations

import itertools
import json
import os
from dataclasses import replace

import numpy as np
import pytest

from cvtile.kernels.fas.api import dropout_source
from cvtile.kernels.fas.api_grad import fas_grad, npu_fusion_attention_grad
from cvtile.kernels.fas.grad_launch import grad_plan
from cvtile.kernels.fas.host import out_shape, prefix_template, prepare_call, stat_shape
from cvtile.kernels.golden.dtypes import numpy_dtype
from cvtile.kernels.golden.fas import fas_golden, fas_grad_golden
from cvtile.kernels.golden.masks import mask_template
from cvtile.kernels.precision import compare
from cvtile.tiling.errors import AclnnStatus, ParamError
from cvtile.tiling.platform import DEFAULT_TARGET, get_platform

NAMES = ("dq", "dk", "dv", "dpse", "dsink")
_ULP = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}


def _rand(rng, shape, dtype):
    return rng.uniform(-1.0, 1.0, shape).astype(numpy_dtype(dtype))


def _shapes(layout, b, n1, n2, s1, s2, d, dv):
    """q, k, v, dy shapes (TND: s1 / s2 are the token counts)."""
    f = {"BNSD": lambda n, s, x: (b, n, s, x), "BSND": lambda n, s, x: (b, s, n, x),
         "BSH": lambda n, s, x: (b, s, n * x), "SBH": lambda n, s, x: (s, b, n * x),
         "TND": lambda n, s, x: (s, n, x)}[layout]
    return f(n1, s1, d), f(n2, s2, d), f(n2, s2, dv), f(n1, s1, dv)


def _inputs(seed, layout, dtype, b, n1, n2, s1, s2, d, dv=None):
    rng = np.random.default_rng(seed)
    return [_rand(rng, sh, dtype) for sh in _shapes(layout, b, n1, n2, s1, s2, d, dv or d)]


def _forward(call, q, k, v):
    """(attention_in, softmax_max, softmax_sum) of the float64 forward, P rounded as the chip rounds it."""
    return fas_golden(call, q, k, v, p_dtype=None if call.dtype == "float32" else call.dtype)


def _judge(got, gold, dtype):
    """{name: max|a - g| / max|g|} of the outputs; asserts the module's rule and the empty-array convention."""
    errs = {}
    for name, a, g in zip(NAMES, got, gold):
        if g is None:
            assert a.size == 0, name
            continue
        assert a.shape == g.shape, name
        a64 = np.asarray(a, np.float32).astype(np.float64)
        scale = float(np.abs(g).max())
        err = float(np.abs(a64 - g).max()) / scale if scale else float(np.abs(a64).max())
        errs[name] = err
        out_dtype = dtype    # dsink is fp32, but from the rounded attention_in (Δ = rowsum(dO∘O)): the input's class
        if out_dtype == "float32":
            assert err <= 2.0 ** -13, (name, err)
        else:
            rep = compare(a, g, out_dtype, atol=_ULP[out_dtype] * scale, name=name)
            assert rep.passed, rep
    return errs


def _run_call(call, q, k, v, dy):
    out, smax, ssum = _forward(call, q, k, v)
    got = fas_grad(call, q, k, v, dy, smax, ssum, out)
    return _judge(got, fas_grad_golden(call, q, k, v, dy), call.dtype)


# ------------------------------------------------------------------ default tier: one fp32 feature set

def _fp32_kw(rng, b, n, s1, s2, scale):
    """BNSD fp32, pse type 1 (BNSS), a sink, sparse mode 0 with a window and an explicit mask whose row 3
    hides every key (that row's gradients and dsink term are 0)."""
    mask = rng.uniform(size=(s1, s2)) < 0.15
    mask[3] = True
    return dict(head_num=n, input_layout="BNSD", pse=_rand(rng, (b, n, s1, s2), "float32"), atten_mask=mask,
                scale_value=scale, pre_tockens=40, next_tockens=12, sparse_mode=0,
                sink=rng.uniform(-1, 1, n).astype(np.float32))


def _api_call(q, k, v, dy, kw):
    """(the normalised call, attention_in, softmax_max, softmax_sum) of the API keywords ``kw``."""
    host = dict(kw)
    host["scale"] = host.pop("scale_value")
    call = prepare_call(q, k, v, **host)
    out, smax, ssum = _forward(call, q, k, v)
    return call, out, smax, ssum


def test_bnsd_fp32_pse_add_then_mul_sink_window_and_mask():
    rng = np.random.default_rng(0)
    b, n, s1, s2, d = 2, 2, 150, 200, 32
    q, k, v, dy = _inputs(1, "BNSD", "float32", b, n, n, s1, s2, d)
    kw = _fp32_kw(rng, b, n, s1, s2, d ** -0.5)
    call, out, smax, ssum = _api_call(q, k, v, dy, kw)
    got = npu_fusion_attention_grad(q, k, v, dy, softmax_max=smax, softmax_sum=ssum, attention_in=out, **kw)
    assert [x.dtype for x in got] == [np.float32] * 5 and got[3].shape == kw["pse"].shape and got[4].shape == (n,)
    _judge(got, fas_grad_golden(call, q, k, v, dy), "float32")
    assert not got[0][:, :, 3].any()                             # the fully masked row
    assert np.isneginf(smax[:, :, 3]).all()


def test_kernel_dq_matches_a_finite_difference_of_the_forward():
    """The kernel's dq (the fp32 feature set above, so no new compile) against central differences of
    L(q) = Σ dy ∘ out(q) taken on the float64 forward golden."""
    rng = np.random.default_rng(4)
    b, n, s1, s2, d = 1, 2, 12, 20, 32
    q, k, v, dy = _inputs(5, "BNSD", "float32", b, n, n, s1, s2, d)
    kw = _fp32_kw(rng, b, n, s1, s2, d ** -0.5)
    call, out, smax, ssum = _api_call(q, k, v, dy, kw)
    dq = npu_fusion_attention_grad(q, k, v, dy, softmax_max=smax, softmax_sum=ssum, attention_in=out, **kw)[0]
    c64 = replace(call, dtype="float64", pse=call.pse.astype(np.float64))
    q64, k64, v64, dy64 = (x.astype(np.float64) for x in (q, k, v, dy))
    fd = _central(lambda x: float((fas_golden(c64, x, k64, v64)[0] * dy64).sum()), q64)
    assert np.abs(dq - fd).max() <= 2.0 ** -13 * np.abs(fd).max()


def test_the_kernels_fit_on_chip_memory_up_to_d_256():
    """Both kernels compile (budget check, no run) with every feature on, for fp32 and fp16 up to D = 256."""
    plat = get_platform(DEFAULT_TARGET)
    for dtype in ("float32", "float16"):
        for d, dv in ((64, 64), (128, 64), (192, 192), (256, 128), (256, 256)):
            q, k, v, dy = _inputs(0, "BNSD", dtype, 1, 2, 2, 8, 8, d, dv)
            call = prepare_call(q, k, v, head_num=2, input_layout="BNSD", pse=_rand(np.random.default_rng(0),
                                (1, 2, 8, 8), dtype), atten_mask=np.zeros((1, 2, 8, 8), bool), sparse_mode=5,
                                prefix=[2], sink=np.zeros(2, np.float32))
            call.keep_prob, call.keep = 0.9, np.ones((1, 2, 8, 8), bool)
            st = np.zeros(stat_shape(call), np.float32)
            plan = grad_plan(call, q, k, v, dy, st, st, dy, plat)
            for ln in plan.launches:
                ck = ln.kernel.on(plat.name).compile(*ln.args, **ln.consts)
                assert all(sp.fits for sp in ck.report.spaces.values()), (dtype, d, dv)


# ------------------------------------------------------------------ the golden against finite differences

def _central(f, x, eps=1e-6):
    """The gradient of scalar f at x (float64) by central differences, element by element."""
    g = np.zeros_like(x)
    flat, gf = x.reshape(-1), g.reshape(-1)
    for i in range(flat.size):
        keep = flat[i]
        flat[i] = keep + eps
        up = f(x)
        flat[i] = keep - eps
        down = f(x)
        flat[i] = keep
        gf[i] = (up - down) / (2 * eps)
    return g


@pytest.mark.parametrize("pse_type, pse_shape, mask", [
    (1, (1, 2, 5, 7), "band"),        # pse type 1 (shared over B), a sink, a window, dropout, GQA
    (0, (2, 2, 1, 7), "mask"),        # pse type 0 shared over S1, an explicit mask
])
def test_the_analytic_golden_matches_finite_differences(pse_type, pse_shape, mask):
    rng = np.random.default_rng(pse_type)
    b, n1, n2, s1, s2, d = 2, 2, 1, 5, 7, 4
    q, k, v, dy = (rng.standard_normal(s) for s in _shapes("BNSD", b, n1, n2, s1, s2, d, d))
    kw = dict(atten_mask=np.triu(np.ones((s1, s2), bool), 3), pre_tockens=2, next_tockens=1) if mask == "band" \
        else dict(atten_mask=rng.uniform(size=(b, 1, s1, s2)) < 0.3, sparse_mode=1)
    call = prepare_call(*(x.astype(np.float32) for x in (q, k, v)), head_num=n1, input_layout="BNSD", scale=0.7,
                        pse=np.zeros(pse_shape, np.float32), pse_type=pse_type,
                        sink=np.array([0.3, -0.5], np.float32), **kw)
    call = replace(call, dtype="float64", pse=rng.standard_normal(pse_shape), sink=np.array([0.3, -0.5]))
    if mask == "band":
        call = replace(call, keep_prob=0.75, keep=rng.uniform(size=(b, n1, s1, s2)) < 0.75)

    def loss(c, qq, kk, vv):
        return float((fas_golden(c, qq, kk, vv)[0] * dy).sum())

    dq, dk, dv, dpse, dsink = fas_grad_golden(call, q, k, v, dy)
    checks = [(dq, _central(lambda x: loss(call, x, k, v), q.copy())),
              (dk, _central(lambda x: loss(call, q, x, v), k.copy())),
              (dv, _central(lambda x: loss(call, q, k, x), v.copy())),
              (dpse, _central(lambda x: loss(replace(call, pse=x), q, k, v), call.pse.copy())),
              (dsink, _central(lambda x: loss(replace(call, sink=x), q, k, v), call.sink.copy()))]
    for got, fd in checks:
        assert np.allclose(got, fd, rtol=1e-6, atol=1e-7)


# ------------------------------------------------------------------ refusals (no kernel runs)

def _small():
    q, k, v, dy = _inputs(0, "BNSD", "float16", 1, 2, 1, 8, 8, 16)
    call = prepare_call(q, k, v, head_num=2, input_layout="BNSD")
    out, smax, ssum = _forward(call, q, k, v)
    return q, k, v, dy, dict(softmax_max=smax, softmax_sum=ssum, attention_in=out)


@pytest.mark.parametrize("missing", ["softmax_max", "softmax_sum", "attention_in", "dy"])
def test_a_missing_forward_result_is_a_null_pointer(missing):
    q, k, v, dy, fw = _small()
    args = dict(fw, dy=dy)
    args[missing] = None
    with pytest.raises(ParamError) as e:
        npu_fusion_attention_grad(q, k, v, args.pop("dy"), 2, "BNSD", **args)
    assert e.value.status == AclnnStatus.PARAM_NULLPTR and e.value.param == missing


@pytest.mark.parametrize("name, bad", [
    ("softmax_max", lambda x: x[..., :4]),
    ("softmax_sum", lambda x: x[:, :1]),
    ("attention_in", lambda x: x[:, :, :4]),
    ("dy", lambda x: x[..., :8]),
    ("attention_in", lambda x: x.astype(np.float32)),
    ("softmax_sum", lambda x: x.astype(np.float16)),
])
def test_a_forward_result_of_the_wrong_shape_or_dtype_is_invalid(name, bad):
    q, k, v, dy, fw = _small()
    args = dict(fw, dy=dy)
    args[name] = bad(args[name])
    with pytest.raises(ParamError) as e:
        npu_fusion_attention_grad(q, k, v, args.pop("dy"), 2, "BNSD", **args)
    assert e.value.status == AclnnStatus.PARAM_INVALID and e.value.param == name


def test_the_forward_checks_apply_and_empty_calls_return_zeros():
    q, k, v, dy, fw = _small()
    with pytest.raises(ParamError) as e:
        npu_fusion_attention_grad(q, k, v, dy, 2, "BNSH", **fw)
    assert e.value.param == "input_layout" and e.value.status == AclnnStatus.PARAM_INVALID
    # TND with every batch empty: no task runs; dpse / dsink are empty without a pse / sink
    q, k, v, dy = _inputs(0, "TND", "float16", 1, 2, 2, 4, 4, 16)
    kw = dict(actual_seq_qlen=[0, 0], actual_seq_kvlen=[0, 0])
    call = prepare_call(q, k, v, head_num=2, input_layout="TND", **kw)
    st = np.zeros(stat_shape(call), np.float32)
    got = npu_fusion_attention_grad(q, k, v, dy, 2, "TND", softmax_max=st, softmax_sum=st,
                                    attention_in=np.zeros(out_shape(call), np.float16), **kw)
    assert [x.shape for x in got] == [q.shape, k.shape, v.shape, (0,), (0,)]
    assert not any(x.any() for x in got[:3])


# ------------------------------------------------------------------ slow tier: more feature sets

@pytest.mark.slow
def test_bsnd_fp16_gqa_right_down_causal_with_a_longer_kv():
    b, n1, n2, s1, s2, d = 2, 4, 2, 100, 150, 64
    q, k, v, dy = _inputs(2, "BSND", "float16", b, n1, n2, s1, s2, d)
    kw = dict(head_num=n1, input_layout="BSND", atten_mask=mask_template(), sparse_mode=3, scale_value=d ** -0.5)
    call, out, smax, ssum = _api_call(q, k, v, dy, kw)
    got = npu_fusion_attention_grad(q, k, v, dy, softmax_max=smax, softmax_sum=ssum, attention_in=out, **kw)
    assert got[0].dtype == np.float16 and got[3].size == 0 and got[4].size == 0
    _judge(got, fas_grad_golden(call, q, k, v, dy), "float16")


@pytest.mark.slow
def test_tnd_bf16_with_an_empty_batch_and_the_default_softmax_layout():
    lens_q, lens_kv = [40, 0, 72], [64, 0, 90]
    n, d = 2, 64
    q, k, v, dy = _inputs(3, "TND", "bfloat16", 1, n, 1, sum(lens_q), sum(lens_kv), d)
    kw = dict(head_num=n, input_layout="TND", atten_mask=mask_template(), sparse_mode=3, scale_value=0.125,
              actual_seq_qlen=np.cumsum(lens_q), actual_seq_kvlen=np.cumsum(lens_kv))
    call, out, smax, ssum = _api_call(q, k, v, dy, kw)
    assert call.softmax_layout == "NTD" and smax.shape == (sum(lens_q), n, 8)
    got = npu_fusion_attention_grad(q, k, v, dy, softmax_max=smax, softmax_sum=ssum, attention_in=out, **kw)
    _judge(got, fas_grad_golden(call, q, k, v, dy), "bfloat16")


@pytest.mark.slow
def test_bsh_fp32_gqa_from_the_forward_kernel_with_seeded_dropout():
    """End to end: the forward kernel's outputs (``npu_fusion_attention``: op_host's FAS tiling, a keep mask
    drawn from seed / offset) into the backward; pse type 0 shared over B and S1 (wider than S2), a mask per
    head."""
    from cvtile.kernels.fas.api import dropout_source, npu_fusion_attention

    rng = np.random.default_rng(6)
    b, n1, n2, s1, s2, d = 2, 4, 2, 50, 130, 32
    q, k, v, dy = _inputs(7, "BSH", "float32", b, n1, n2, s1, s2, d)
    kw = dict(pse=_rand(rng, (1, n1, 1, 140), "float32"), atten_mask=rng.uniform(size=(b, n1, s1, s2)) < 0.2,
              sparse_mode=1, keep_prob=0.8, seed=7, offset=16, pse_type=0)
    out, smax, ssum = npu_fusion_attention(q, k, v, n1, "BSH", scale=0.2, **kw)[:3]
    got = npu_fusion_attention_grad(q, k, v, dy, n1, "BSH", softmax_max=smax, softmax_sum=ssum, attention_in=out,
                                    scale_value=0.2, **kw)
    call = prepare_call(q, k, v, head_num=n1, input_layout="BSH", scale=0.2,
                        dropout_source=dropout_source(DEFAULT_TARGET), **kw)
    assert 0.7 < call.keep.mean() < 0.9
    errs = _judge(got, fas_grad_golden(call, q, k, v, dy), "float32")
    assert set(errs) == {"dq", "dk", "dv", "dpse"}


@pytest.mark.slow
def test_sbh_fp16_alibi_with_start_indices_and_left_up_causal():
    b, n, s, d = 2, 2, 96, 64
    q, k, v, dy = _inputs(8, "SBH", "float16", b, n, 1, s, s, d)
    call = prepare_call(q, k, v, head_num=n, input_layout="SBH", scale=0.125, pse_type=2,
                        pse=np.array([0.25, 0.0625], np.float32), q_start_idx=[3], kv_start_idx=[1],
                        atten_mask=mask_template(), sparse_mode=2)
    errs = _run_call(call, q, k, v, dy)
    assert set(errs) == {"dq", "dk", "dv"}                       # alibi slopes get no gradient


@pytest.mark.slow
def test_bnsd_fp32_prefix_compressed_alibi_sqrt_and_a_sink():
    b, n, s, d = 2, 2, 80, 16
    q, k, v, dy = _inputs(9, "BNSD", "float32", b, n, n, s, s, d)
    call = prepare_call(q, k, v, head_num=n, input_layout="BNSD", scale=0.25, pse_type=3,
                        pse=np.array([[0.5, 0.1], [0.2, 0.3]], np.float32), atten_mask=prefix_template(),
                        sparse_mode=6, prefix=[20, 70], sink=np.array([1.0, 0.2], np.float32))
    errs = _run_call(call, q, k, v, dy)
    assert set(errs) == {"dq", "dk", "dv", "dsink"}


# ------------------------------------------------------------------ wide tier: issue 10's grid
# layouts × dtypes × causal / band × dropout × sink. Every combination of dtype (fp32, fp16, bf16), mask
# (right-down causal, sparse 3; a band, sparse 4 with pre/next tokens), dropout (off; keep_prob 0.85 drawn from
# seed / offset) and sink (off; a learnable sink per head) runs once: 24 cases, each on one of the five layouts in
# turn, so every layout meets every dtype and each binary feature in both states. GQA (N1 = 4, N2 = 2) and
# S1 != S2 throughout; TND has an empty batch. Each case is two kernel compiles (about a minute cold): the
# ``wide`` tier, run by hand. ``CVTILE_GRID_REPORT=path`` appends one JSON line per case (its errors).

LAYOUTS = ("BSH", "SBH", "BSND", "BNSD", "TND")
GRID = [(LAYOUTS[i % len(LAYOUTS)],) + combo for i, combo in
        enumerate(itertools.product(("float32", "float16", "bfloat16"), ("causal", "band"), (False, True),
                                    (False, True)))]


def _case(layout, dtype, mask, dropout, sink, seed):
    b, n1, n2, s1, s2, d = 2, 4, 2, 72, 112, 64
    kw = dict(head_num=n1, input_layout=layout, scale=d ** -0.5, atten_mask=mask_template())
    if layout == "TND":
        lens_q, lens_kv = [40, 0, 32], [64, 0, 48]
        kw.update(actual_seq_qlen=np.cumsum(lens_q), actual_seq_kvlen=np.cumsum(lens_kv))
        q, k, v, dy = _inputs(seed, layout, dtype, 1, n1, n2, sum(lens_q), sum(lens_kv), d)
    else:
        q, k, v, dy = _inputs(seed, layout, dtype, b, n1, n2, s1, s2, d)
    if mask == "causal":
        kw.update(sparse_mode=3)
    else:
        kw.update(sparse_mode=4, pre_tockens=24, next_tockens=8)
    if dropout:
        kw.update(keep_prob=0.85, seed=seed, offset=32, dropout_source=dropout_source(DEFAULT_TARGET))
    if sink:
        kw.update(sink=np.random.default_rng(seed).uniform(-1, 1, n1).astype(np.float32))
    return prepare_call(q, k, v, **kw), q, k, v, dy


@pytest.mark.wide
@pytest.mark.parametrize("layout, dtype, mask, dropout, sink", GRID,
                         ids=[f"{a}-{b}-{c}-{'drop' if d else 'nodrop'}-{'sink' if e else 'nosink'}"
                              for a, b, c, d, e in GRID])
def test_backward_grid(layout, dtype, mask, dropout, sink):
    call, q, k, v, dy = _case(layout, dtype, mask, dropout, sink, seed=GRID.index((layout, dtype, mask, dropout,
                                                                                     sink)))
    if dropout:      # the kept fraction over the valid positions (TND pads the shorter batches with False)
        kept = sum(int(call.keep[b, :, :call.qlen[b], :call.kvlen[b]].sum()) for b in range(call.b))
        assert 0.75 < kept / (call.n1 * int(np.dot(call.qlen, call.kvlen))) < 0.95
    errs = _run_call(call, q, k, v, dy)
    assert {"dq", "dk", "dv"} <= set(errs) and ("dsink" in errs) == sink
    report = os.environ.get("CVTILE_GRID_REPORT")
    if report:
        with open(report, "a") as fh:
            fh.write(json.dumps({"layout": layout, "dtype": dtype, "mask": mask, "dropout": dropout, "sink": sink,
                                 **errs}) + "\n")
