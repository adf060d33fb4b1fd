"""Full int8 quantisation (int8 query, key and value): the PFA int8 kernel against the float64 golden.

The kernel (``kernels/fia/kernel_fullquant.py``) multiplies int8 on the cube, dequantises to fp16, quantises P
to int8 with quant_scale1 and dequantises P·V, as the arch22 PFA int8 template does; the golden
(``kernels/golden/fullquant.py``) is the same formula in float64 with P quantised against the row max (the
running max of the kernel's KV blocks with ``kv_block``). Compared under the fp16 class (int8 ±1 for a
post-quantised output). P's quantisation makes the comparison sensitive to where e·quant_scale1 lands near a
rounding midpoint, so the calls use a coarse quant_scale1 (P in 0..4), as the st corpus does (1..5).

The default tier runs one kernel (the smallest call: BNSD GQA, fp16 output, lse, a uint64 dequant scale) and
the checks, which compile nothing; the other kernel runs are slow.
"""

from __future__ import annotations

import inspect
import shutil

import numpy as np
import pytest

from cvtile.kernels import compare
from cvtile.kernels.errors import UnsupportedParameterError
from cvtile.kernels.fia.api import fused_infer_attention_score_v4, npu_fused_infer_attention_score as fia
from cvtile.kernels.fia.api import prepare_fia, v1_call_parts
from cvtile.kernels.golden.fia import fia_golden
from cvtile.kernels.golden.fullquant import attend_fullquant, dequant_value
from cvtile.tiling.errors import ParamError


def _u64(x: float) -> np.ndarray:
    """A per-tensor uint64 dequant scale: the fp32 bits of x in the low 32 bits."""
    return np.array([np.float32(x).view(np.uint32)], np.uint64)


def _call(b=1, n=2, n2=1, s1=64, s2=256, d=32, layout="BNSD", seed=3, **over):
    rng = np.random.default_rng(seed)
    q = rng.integers(-3, 4, (b, n, s1, d)).astype(np.int8)
    k = rng.integers(-3, 4, (b, n2, s2, d)).astype(np.int8)
    v = rng.integers(-3, 4, (b, n2, s2, d)).astype(np.int8)
    if layout == "BSH":
        q, k, v = (x.transpose(0, 2, 1, 3).reshape(x.shape[0], x.shape[2], -1) for x in (q, k, v))
    kw = dict(query=q, key=k, value=v, dequant_scale1=_u64(0.5), quant_scale1=np.array([4.0], np.float32),
              dequant_scale2=np.array([0.25], np.float32), num_heads=n, num_key_value_heads=n2, input_layout=layout)
    kw.update(over)
    return {name: x for name, x in kw.items() if x is not None}


def _check(kv_block=None, **kw):
    out, lse = fia(**kw)
    gold, glse = fia_golden(**kw, kv_block=kv_block)
    int8_out = kw.get("quant_scale2") is not None
    assert out.dtype == (np.int8 if int8_out else np.float16)
    rep = compare(out, gold, "int8" if int8_out else "float16")
    assert rep.passed, str(rep)
    if kw.get("softmax_lse_flag"):
        rl = compare(lse, glse, "float32")
        assert rl.passed, str(rl)
    return out, gold


def test_smallest_call_gqa_fp16_out_with_lse():
    """BNSD, 2 query heads on 1 kv head, a uint64-encoded dequant_scale1, fp16 output and the lse."""
    _check(**_call(scale=1.0, softmax_lse_flag=True))


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not on PATH (the Ascend C checks need a C++17 g++)")
def test_the_kernel_builds_and_runs_on_the_twin(tmp_path):
    """P·V multiplies V (int8) untransposed: L1 -> L0B by LoadDataWithTranspose (it was outside the emitted API
    subset and the backend refused the kernel). Both arches' syntax checks pass and the A2/A3 twin's output and
    lse match the simulator's under the twin tolerance."""
    from cvtile.dsl import ascendc
    from cvtile.dsl.jit import record_launches
    from cvtile.kernels.precision import MAX_FAIL_RATIO, twin_tolerance

    with record_launches() as rec:
        fia(**_call(scale=1.0, softmax_lse_flag=True))
    launches = [ascendc.Launch.of(r) for r in rec.launches]
    assert "LoadDataWithTranspose(" in ascendc.lowered(launches[0].kernel).source
    res = ascendc.emit(str(tmp_path), launches, goldens="as_run", tolerance=twin_tolerance(np.dtype("float16")),
                       max_fail_ratio=MAX_FAIL_RATIO)
    ascendc.check_project(str(tmp_path), res["kernels"])
    report = ascendc.run_project(str(tmp_path), ascendc.arch_of(launches[0].kernel.platform))
    assert report.count("PASS") == len(res["outputs"]) == 2, report


def _plan(**kw):
    q, k, v, sink = kw.pop("query"), kw.pop("key"), kw.pop("value"), kw.pop("learnable_sink", None)
    bound = inspect.signature(fia).bind(q, k, v, **kw)
    bound.apply_defaults()
    optional, attrs = v1_call_parts(dict(bound.arguments), sink)
    return prepare_fia(q, k, v, optional, attrs, "Ascend910B1")


def test_call_plans_on_the_pfa_route_with_the_scales_it_reads():
    arrays, tiling = _plan(**_call(scale=0.3))
    spec = arrays["_fullquant"]
    assert tiling.route == "pfa" and not tiling.fd_tasks
    assert (spec.deq1, spec.qs1_half, spec.deq2) == (np.float32(0.5), np.float32(4.0), np.float32(0.25))
    assert spec.scale_half == np.float32(np.float16(0.3)) != np.float32(0.3)   # Muls in half takes h(scale)


@pytest.mark.parametrize("param,value,rule", [
    ("dequant_scale1", np.ones(2, np.uint64), "per tensor"),
    ("dequant_scale2", np.ones((1, 2), np.float32), "per tensor"),
    ("quant_scale1", np.ones(1, np.float16), "float32"),
    ("dequant_scale2", np.ones(1, np.int32), "uint64 or float32"),
])
def test_scale_of_a_bad_form_is_a_param_error(param, value, rule):
    with pytest.raises(ParamError, match=rule) as info:
        _plan(**_call(**{param: value}))
    assert info.value.param == param and info.value.status == 161002


def test_missing_scale_is_op_hosts_error():
    with pytest.raises(ParamError) as info:
        _plan(**_call(quant_scale1=None))
    assert info.value.param == "quant_scale1" and info.value.status == 561002


def test_scales_with_a_float_query_are_refused_or_an_error_with_an_int8_output():
    """The operator ignores them with a float output (refused by name, never dropped); the docs make them an
    error with the float-in, int8-out post-quant."""
    f16 = {name: np.zeros(shape, np.float16) for name, shape in
           (("query", (1, 2, 64, 32)), ("key", (1, 1, 256, 32)), ("value", (1, 1, 256, 32)))}
    with pytest.raises(UnsupportedParameterError, match="ignores it") as info:
        _plan(**_call(**f16, quant_scale1=None, dequant_scale2=None))
    assert info.value.param == "dequant_scale1"
    with pytest.raises(ParamError, match="int8 output") as info:
        _plan(**_call(**f16, quant_scale2=np.ones(1, np.float32)))
    assert info.value.param == "dequant_scale1" and info.value.status == 161002


def test_int8_query_with_a_float_value_is_an_error():
    with pytest.raises(ParamError) as info:
        _plan(**_call(value=np.zeros((1, 1, 256, 32), np.float16)))
    assert info.value.param == "value"


def test_learnable_sink_with_full_quant_is_refused():
    """(Left padding, prefix, paging and tensor lists with an int8 query are op_host's refusals already.)"""
    with pytest.raises(UnsupportedParameterError) as info:
        _plan(**_call(learnable_sink=np.zeros(2, np.float32)))
    assert info.value.param == "learnable_sink"


def test_query_quant_mode_on_the_pfa_route_is_op_hosts_error():
    """query_quant_mode goes to op_host: the legacy PFA route (the int8 per-tensor template) does not dequantise
    the query, so op_host rejects mode 3 naming it (aclnn 561002)."""
    with pytest.raises(ParamError) as info:
        fused_infer_attention_score_v4(**_call(query_quant_mode=3))
    assert info.value.param == "query_quant_mode" and info.value.status == 561002


def test_dequant_value_reads_the_low_32_bits_of_a_uint64_as_the_fixpipe_truncates_them():
    high = _u64(0.375) | np.uint64(0x5A5A << 40)
    assert dequant_value(high) == 0.375 == dequant_value(np.array([0.375], np.float32))
    # 0.1's low 13 mantissa bits are dropped (SetQuantScalar keeps scale & 0xFFFFE000): 0.0999755859375
    kept = float((np.array([0.1], np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)[0])
    assert dequant_value(np.array([0.1], np.float32)) == dequant_value(_u64(0.1)) == kept == 0.0999755859375


def test_golden_block_is_the_formula():
    """One block: P = round(exp(s - rowmax) · qs1) (half away from zero), out = deq2 · P·V / rowsum(exp)."""
    rng = np.random.default_rng(5)
    q = rng.integers(-4, 5, (2, 3, 16)).astype(np.float64)
    k = rng.integers(-4, 5, (1, 7, 16)).astype(np.float64)
    v = rng.integers(-4, 5, (1, 7, 8)).astype(np.float64)
    out, lse = attend_fullquant(q, k, v, 0.5, deq1=0.125, qs1=3.0, deq2=0.75)
    s = np.einsum("hrd,cd->hrc", q, k[0]) * 0.125 * 0.5
    e = np.exp(s - s.max(-1, keepdims=True))
    p8 = np.floor(e * 3.0 + 0.5)
    np.testing.assert_allclose(out, 0.75 * np.einsum("hrc,cd->hrd", p8, v[0]) / e.sum(-1)[..., None], rtol=1e-13)
    np.testing.assert_allclose(lse, s.max(-1) + np.log(e.sum(-1)), rtol=1e-13)
    # blocks of the whole row are the same thing; smaller blocks quantise against the running max
    same, _ = attend_fullquant(q, k, v, 0.5, deq1=0.125, qs1=3.0, deq2=0.75, kv_block=7)
    np.testing.assert_array_equal(same, out)


# ------------------------------------------------------------------------------------------------ slow tier
@pytest.mark.slow
def test_bsh_int8_output_per_channel_post_quant():
    rng = np.random.default_rng(9)
    _check(**_call(layout="BSH", n=4, n2=2, s1=48, s2=300, d=64, scale=1.0,
                   quant_scale2=rng.uniform(1, 5, (4 * 64,)).astype(np.float32),
                   quant_offset2=rng.uniform(-3, 3, (4 * 64,)).astype(np.float32)))


@pytest.mark.slow
def test_multi_block_causal_with_pse_against_the_running_max_golden():
    """KV longer than the tiling's S2 block (1024): the kernel quantises P of each block against the running
    max, as ``kv_block`` makes the golden do; sparse 3 and a pse bias on top. The bias is on the 0.5 grid of
    the scores (deq1 · scale = 0.5), so the fp16 scores are exact: a bias off it moves e by the scores' fp16
    rounding (~1 % at |s| ~ 30), which flips P's int8 rounding in ~12 % of the rows here against the float64
    golden (the chip's precision, not the algorithm)."""
    rng = np.random.default_rng(11)
    kw = _call(s1=64, s2=1500, scale=1.0, softmax_lse_flag=True, sparse_mode=3,
               atten_mask=np.triu(np.ones((2048, 2048), bool), 1),
               pse_shift=(rng.integers(-2, 3, (1, 2, 64, 1500)) * 0.5).astype(np.float16))
    _, tiling = _plan(**dict(kw))
    assert tiling.s2_base < 1500
    _check(kv_block=tiling.s2_base, **kw)


@pytest.mark.slow
def test_pipelined_order_matches_program_order():
    kw = _call(s2=300, scale=1.0, softmax_lse_flag=True)
    a, la = fia(**kw)
    b, lb = fia(**kw, order="pipelined")
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(la, lb)


def test_the_matmul_blocks_leave_l0c_as_fp16_through_the_fixpipe():
    """Both int32 blocks (q·kᵀ and p8·v) are dequantised by the cube's fixpipe (``ct.dequant``, DEQF16) as on the
    chip: the cube hands the vector fp16 tiles, and the vector program holds no int32 tile (no dequant work)."""
    from cvtile.dsl.ir import walk
    from cvtile.dsl.jit import record_launches

    with record_launches(run=False) as rec:
        fia(**_call(scale=1.0, softmax_lse_flag=True))
    (launch,) = [r for r in rec.launches if r.kernel.name == "fia_fullquant"]
    progs = launch.kernel.compilation.final.programs()
    deqs = [op for op in walk(progs["aic"]) if op.kind == "dequant"]
    assert len(deqs) == 2 and all(op.results[0].type.dtype.name == "float16" for op in deqs)
    assert not any(v.is_tile and v.type.dtype.name == "int32" for op in walk(progs["aiv"]) for v in op.results)
