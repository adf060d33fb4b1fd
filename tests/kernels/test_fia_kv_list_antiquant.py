"""KV antiquant with key/value tensor lists on Atlas A2/A3: the MSD kernel (``fia_antiquant``, CACHE "list")
reads each batch's int8 (or int4) tensor from the list's arena. Each batch's output is bit for bit what the
same call gives on that batch's tensor alone (a dense cache), and the call passes the float64 golden; per-token
parameters are read at the batch's own positions. Ascend950's dequant kernel reads a list too, per channel, per
tensor or per token (it spaces per-token-per-head rows by op_host's S of key, the longest tensor's S)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from cvtile.kernels import UnsupportedParameterError, compare, npu_fused_infer_attention_score as fia
from cvtile.kernels.golden.antiquant import chip_seq_stride
from cvtile.kernels.golden.fia import fia_golden_lowp
from cvtile.kernels.golden.int4 import pack_int4

N, N2, D = 8, 2, 128
#: three batches: 2 KV blocks of the IFA tiling's 512 (the second partial), one short block, 2 whole blocks
LENGTHS = (700, 45, 1024)


def _call(layout: str = "BSH", int4: bool = False, seed: int = 0, **extra):
    rng = np.random.default_rng(seed)
    b = len(LENGTHS)
    if layout == "BSH":
        q = rng.uniform(-1, 1, (b, 1, N * D)).astype(np.float16)
        shapes, param = [(1, s, N2 * D) for s in LENGTHS], (2, N2 * D)
    else:   # BSND
        q = rng.uniform(-1, 1, (b, 1, N, D)).astype(np.float16)
        shapes, param = [(1, s, N2, D) for s in LENGTHS], (2, N2, D)
    lo, hi = (-8, 8) if int4 else (-127, 128)

    def cache(shape):
        x = rng.integers(lo, hi, shape).astype(np.int8)
        return pack_int4(x) if int4 else x

    kw = dict(query=q, key=[cache(s) for s in shapes], value=[cache(s) for s in shapes], num_heads=N,
              num_key_value_heads=N2, input_layout=layout, scale=D ** -0.5, softmax_lse_flag=True,
              antiquant_scale=rng.uniform(0.002, 0.02, param).astype(np.float16),
              antiquant_offset=rng.uniform(-3, 3, param).astype(np.float16), antiquant_mode=0,
              actual_seq_lengths_kv=list(LENGTHS))
    kw.update(extra)
    return kw


def _each_batch_alone(kw, out, lse, per_token=False):
    """Each batch's output and lse, bit for bit, those of the same call on that batch's tensor alone (a dense
    cache; with ``per_token``, that batch's row of the per-token parameters)."""
    for b, s in enumerate(LENGTHS):
        alone = dict(kw, query=kw["query"][b:b + 1], key=kw["key"][b], value=kw["value"][b],
                     actual_seq_lengths_kv=[s])
        if per_token:
            alone.update({k: v[b:b + 1][..., :s] for k, v in kw.items() if k.endswith(("_scale", "_offset"))})
        o, l_ = fia(**alone)
        assert out[b:b + 1].tobytes() == o.tobytes() and lse[b:b + 1].tobytes() == l_.tobytes(), b


@pytest.mark.parametrize("layout,int4", [("BSH", False), ("BSND", True)], ids=["bsh-int8", "bsnd-int4"])
def test_each_batch_reads_its_own_tensor_and_the_call_passes_the_golden(layout, int4):
    kw = _call(layout, int4)
    out, lse = fia(**kw)
    _each_batch_alone(kw, out, lse)
    g_out, g_lse = fia_golden_lowp(**kw)
    rep = compare(out, g_out, "float16", name="attention_out")
    assert rep.passed, str(rep)
    assert compare(lse, g_lse, "float32", name="softmax_lse").passed


@pytest.mark.parametrize("mode", [1, 3], ids=["per-token", "per-token-per-head"])
def test_per_token_parameters_are_read_at_the_batchs_own_positions(mode):
    """Per-token parameters (B, S') are indexed by the batch's own KV positions, not by its tensor's place in the
    list's arena (``kernel.column_start``)."""
    rng = np.random.default_rng(mode)
    shape = (len(LENGTHS), N2, max(LENGTHS)) if mode == 3 else (len(LENGTHS), max(LENGTHS))
    kw = _call(antiquant_mode=None, antiquant_scale=None, antiquant_offset=None, key_antiquant_mode=mode,
               value_antiquant_mode=mode,
               **{f"{kv}_antiquant_{p}": rng.uniform(lo, hi, shape).astype(np.float32)
                  for kv in ("key", "value") for p, lo, hi in (("scale", 0.002, 0.02), ("offset", -3, 3))})
    kw = {k: v for k, v in kw.items() if v is not None}
    out, lse = fia(**kw)
    _each_batch_alone(kw, out, lse, per_token=True)
    g_out, _ = fia_golden_lowp(**kw)
    rep = compare(out, g_out, "float16", name="attention_out")
    assert rep.passed, str(rep)


@pytest.mark.parametrize("mode", [1, 3], ids=["per-token", "per-token-per-head"])
def test_ascend950_reads_per_token_parameters_of_a_list_at_each_batchs_positions(mode):
    """The 950 with a list and per-token parameters: mode 1's (B, S') rows by their own S', mode 3's (b, n) rows
    spaced by op_host's S of key, the longest tensor's S (``chip_seq_stride``); each batch reads its own
    positions. Against the golden, which indexes them the same way."""
    rng = np.random.default_rng(20 + mode)
    longest = max(LENGTHS)
    kw = _950(_call())
    for kv in ("key", "value"):
        shape = (len(LENGTHS), N2, longest + 16) if mode == 3 else (1, len(LENGTHS), longest + 16)
        kw[f"{kv}_antiquant_scale"] = rng.uniform(0.002, 0.02, shape).astype(np.float32)
        kw[f"{kv}_antiquant_offset"] = rng.uniform(-3, 3, shape).astype(np.float32)
        kw[f"{kv}_antiquant_mode"] = mode
    assert chip_seq_stride(kw["key"], None, "BSH") == longest
    out, lse = fia(**kw)
    g_out, g_lse = fia_golden_lowp(**kw)
    rep = compare(out, g_out, "float16", name="attention_out")
    assert rep.passed, str(rep)
    assert compare(lse, g_lse, "float32", name="softmax_lse").passed


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not on PATH (the twin needs a C++17 g++)")
@pytest.mark.parametrize("kernel", ["fia_antiquant", "fia_dequant"])
def test_the_ascend_c_build_reads_the_arena_as_the_simulator_does(tmp_path, kernel):
    """The dequantising kernel's launch of a list call (A2/A3's MSD kernel, the 950's dequant kernel), emitted as
    Ascend C, syntax-checked and run on the CPU twin against the simulator's results."""
    from cvtile.dsl import ascendc as A
    from cvtile.dsl.jit import record_launches
    from cvtile.kernels.precision import MAX_FAIL_RATIO, twin_tolerance

    kw = _call() if kernel == "fia_antiquant" else _950(_call())
    with record_launches() as rec:
        fia(**kw)
    chosen = [A.Launch.of(r) for r in rec.launches if r.kernel.name == kernel]
    assert chosen, [r.kernel.name for r in rec.launches]
    res = A.emit(str(tmp_path), chosen, tolerance=twin_tolerance(kw["query"].dtype), max_fail_ratio=MAX_FAIL_RATIO,
                 goldens="as_run")
    A.check_project(str(tmp_path), res["kernels"])
    report = A.run_project(str(tmp_path), A.arch_of(chosen[0].kernel.platform))
    lines = [ln for ln in report.splitlines() if ln.strip()]
    assert lines and all(ln.startswith("PASS") for ln in lines), report


def _950(kw):
    """``kw`` as Ascend950's operator takes it: the separate key and value scales and offsets, modes 0."""
    kw = dict(kw, target="Ascend950")
    scale, offset = kw.pop("antiquant_scale"), kw.pop("antiquant_offset")
    del kw["antiquant_mode"]
    kw.update(key_antiquant_scale=scale[0], value_antiquant_scale=scale[1], key_antiquant_offset=offset[0],
              value_antiquant_offset=offset[1], key_antiquant_mode=0, value_antiquant_mode=0)
    return kw


def test_ascend950_dequantises_each_batchs_own_tensor():
    """The 950's dequant kernel on a list: each batch bit for bit its dense call, and the golden."""
    kw = _950(_call())
    out, lse = fia(**kw)
    _each_batch_alone(kw, out, lse)
    g_out, _ = fia_golden_lowp(**kw)
    rep = compare(out, g_out, "float16", name="attention_out")
    assert rep.passed, str(rep)


def test_a_shared_prefix_precedes_each_batchs_own_tensor():
    """A decode with an int8 shared prefix and a list on IFATiling's route: the prefix's blocks come first in
    every batch, dequantised with the same per-channel parameters, then the batch's own tensor from its region
    of the arena (its length less the prefix: the route counts each batch's own KV)."""
    rng = np.random.default_rng(13)
    prefix = rng.integers(-127, 128, (1, 300, N2 * D)).astype(np.int8)
    kw = _call(key_shared_prefix=prefix, value_shared_prefix=prefix[:, ::-1].copy(), actual_shared_prefix_len=[260])
    out, lse = fia(**kw)
    g_out, g_lse = fia_golden_lowp(**kw)
    rep = compare(out, g_out, "float16", name="attention_out")
    assert rep.passed, str(rep)
    assert compare(lse, g_lse, "float32", name="softmax_lse").passed


def test_ascend950_reads_mxfp4_group_scales_of_a_list_spaced_by_the_longest_tensor():
    """Mode 6 (an MXFP4 list, BNSD): the [1, B, N2, S', D/32] E8M0 scales' (b, n2) rows are spaced by op_host's S
    of key, the longest tensor's S, not by their S'; each batch reads its own positions."""
    import ml_dtypes

    rng = np.random.default_rng(31)
    b, longest = len(LENGTHS), max(LENGTHS)
    q = rng.uniform(-1, 1, (b, N, 1, D)).astype(ml_dtypes.bfloat16)

    def fp4(s):
        return rng.choice(np.arange(16, dtype=np.uint8), (1, N2, s, D)).view(ml_dtypes.float4_e2m1fn)

    def scales():
        return rng.integers(121, 126, (1, b, N2, longest + 16, D // 32)).astype(np.uint8).view(
            ml_dtypes.float8_e8m0fnu)

    kw = dict(query=q, key=[fp4(s) for s in LENGTHS], value=[fp4(s) for s in LENGTHS], num_heads=N,
              num_key_value_heads=N2, input_layout="BNSD", scale=D ** -0.5, softmax_lse_flag=True,
              key_antiquant_scale=scales(), value_antiquant_scale=scales(), key_antiquant_mode=6,
              value_antiquant_mode=6, actual_seq_lengths_kv=list(LENGTHS), target="Ascend950")
    out, lse = fia(**kw)
    g_out, g_lse = fia_golden_lowp(**kw)
    rep = compare(out, g_out, "bfloat16", name="attention_out")
    assert rep.passed, str(rep)
    assert compare(lse, g_lse, "float32", name="softmax_lse").passed
