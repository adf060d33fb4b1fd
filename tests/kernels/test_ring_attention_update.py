"""RingAttentionUpdate: the simulated operator against the float64 golden, and every constraint it enforces.

Numerics: ``cvtile.npu_ring_attention_update`` (the vector-only DSL kernel on the tiling mirror's core split)
against ``ring_attention_update_golden`` under the upstream tolerance class of the attn dtype (the
statistics, fp32, under the fp32 class), on SBH and TND and each attn dtype. The golden itself is checked
against attention computed whole: splitting the keys of a softmax attention in two, computing each half's
(O, max, sum) and merging them must give the attention over all keys.

Constraints: each documented / op_host rule raises ``ParamError`` naming the parameter, with the aclnn status
(161001 null, 161002 invalid, 561002 op_host tiling).

Compiles: one kernel specialisation per attn dtype and softmax layout (the tile is fixed), shared by the tests.
"""

from __future__ import annotations

import shutil

import ml_dtypes
import numpy as np
import pytest

import cvtile
from cvtile import ParamError
from cvtile.kernels.golden.ring_attention_update import ring_attention_update_golden, softmax_rows_bns8
from cvtile.kernels.precision import compare

BF16 = ml_dtypes.bfloat16
DTYPES = [np.float16, BF16, np.float32]


def _stats(rng, shape):
    """(max, sum) with the 8 trailing values equal, as FlashAttention writes them."""
    m = rng.normal(0.0, 4.0, shape[:-1] + (1,)).astype(np.float32)
    s = rng.uniform(0.5, 20.0, shape[:-1] + (1,)).astype(np.float32)
    return np.repeat(m, 8, -1), np.repeat(s, 8, -1)


def make(layout, dtype, seed=0, s=37, b=2, n=3, d=64, lens=(0, 4, 4, 20, 29)):
    rng = np.random.default_rng(seed)
    if layout == "SBH":
        attn, sm = (s, b, n * d), (b, n, s, 8)
        q = None
    else:
        t = lens[-1]
        attn, sm = (t, n, d), (t, n, 8)
        q = np.array(lens, np.int64)
    a1 = (rng.standard_normal(attn) * 3).astype(dtype)
    a2 = (rng.standard_normal(attn) * 3).astype(dtype)
    m1, l1 = _stats(rng, sm)
    m2, l2 = _stats(rng, sm)
    return dict(prev_attn_out=a1, prev_softmax_max=m1, prev_softmax_sum=l1, cur_attn_out=a2, cur_softmax_max=m2,
                cur_softmax_sum=l2, actual_seq_qlen=q, input_layout=layout)


def _check(kw, res, **extra):
    want = ring_attention_update_golden(**kw, **extra)
    dt = np.dtype(kw["prev_attn_out"].dtype).name
    reps = [compare(res[0], want[0], dt, name="attn_out"), compare(res[1], want[1], "float32", name="softmax_max"),
            compare(res[2], want[2], "float32", name="softmax_sum")]
    assert all(r.passed for r in reps), "\n".join(map(str, reps))
    assert res[0].dtype == kw["prev_attn_out"].dtype and res[0].shape == kw["prev_attn_out"].shape
    assert res[1].dtype == np.float32 and res[1].shape == kw["prev_softmax_max"].shape
    return reps


@pytest.mark.parametrize("layout", ["SBH", "TND"])
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16", "fp32"])
def test_kernel_matches_golden(layout, dtype):
    kw = make(layout, dtype, seed=hash((layout, str(dtype))) % 1000)
    res = cvtile.npu_ring_attention_update(**kw)
    reps = _check(kw, res)
    assert reps[0].max_abs_err > 0 or dtype == np.float32   # the cast to the attn dtype rounds


def test_tnd_softmax_layouts_differ_and_both_match():
    """The default TND softmax layout is per batch (N, S_b, 8); "TND" is (T, N, 8) itself: the two read the
    same tensors differently, and the kernel follows each."""
    kw = make("TND", np.float16, seed=5)
    g_default = ring_attention_update_golden(**kw)
    g_tnd = ring_attention_update_golden(**kw, input_softmax_layout="TND")
    assert not np.allclose(g_default[0].astype(np.float64), g_tnd[0].astype(np.float64))
    _check(kw, cvtile.npu_ring_attention_update(**kw))
    _check(kw, cvtile.npu_ring_attention_update(**kw, input_softmax_layout="TND"), input_softmax_layout="TND")


def test_golden_merges_split_attention_exactly():
    """Attention over keys K1 ∪ K2 equals the merge of the attention over K1 and over K2 (the formulas with the
    sum factors; the document's printed ones, without them, fail this)."""
    rng = np.random.default_rng(3)
    s, b, n, d, kv = 5, 2, 3, 16, 40
    q = rng.standard_normal((b, n, s, d))
    k = rng.standard_normal((b, n, kv, d))
    v = rng.standard_normal((b, n, kv, d))
    scores = q @ k.transpose(0, 1, 3, 2)

    def part(sl):
        x = scores[..., sl]
        m = x.max(-1)
        p = np.exp(x - m[..., None])
        lsum = p.sum(-1)
        o = (p @ v[:, :, sl]) / lsum[..., None]                     # (b, n, s, d)
        o_sbh = o.transpose(2, 0, 1, 3).reshape(s, b, n * d)
        return o_sbh, np.repeat(m[..., None], 8, -1), np.repeat(lsum[..., None], 8, -1)

    o1, m1, l1 = part(slice(0, 17))
    o2, m2, l2 = part(slice(17, kv))
    o, m, lsum = ring_attention_update_golden(o1, m1, l1, o2, m2, l2, input_layout="SBH")
    full = part(slice(0, kv))
    np.testing.assert_allclose(o, full[0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(m, full[1], rtol=0, atol=0)
    np.testing.assert_allclose(lsum, full[2], rtol=1e-12)


def test_bns8_view_is_per_batch_heads_major():
    t, n = 5, 2
    sm = np.arange(t * n * 8, dtype=np.float64).reshape(t, n, 8)
    rows = softmax_rows_bns8(sm, [0, 2, 5])
    flat = sm.reshape(-1, 8)
    assert (rows[1, 1] == flat[0 * n + 1 * 2 + 1]).all()          # batch 0 (S 2): head 1, position 1
    assert (rows[3, 0] == flat[2 * n + 0 * 3 + 1]).all()          # batch 1 (S 3): head 0, position 1


def test_nonfinite_inputs_propagate_like_the_golden():
    kw = make("TND", np.float16, seed=9)
    kw["cur_softmax_max"][3:6] = np.inf
    kw["prev_softmax_sum"][10:12] = np.nan
    kw["prev_attn_out"][20] = -np.inf
    res = cvtile.npu_ring_attention_update(**kw)
    assert np.isnan(res[0].astype(np.float32)).any() and np.isinf(res[0].astype(np.float32)).any()
    _check(kw, res)


def test_torch_tensors_in_torch_tensors_out():
    torch = pytest.importorskip("torch")
    kw = make("TND", np.float32, seed=11)
    tk = {k: (torch.from_numpy(v) if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
    res = cvtile.npu_ring_attention_update(**tk)
    assert all(isinstance(x, torch.Tensor) for x in res)
    _check(kw, tuple(x.numpy() for x in res))


# ---- constraints -----------------------------------------------------------------------------------------------
def _with(base, **changes):
    kw = dict(base)
    kw.update(changes)
    return kw


SBH = make("SBH", np.float16, s=6, b=1, n=2, d=64)
TND = make("TND", np.float16, n=2, d=64, lens=(0, 3, 6))


def _f32(shape):
    return np.zeros(shape, np.float32)


CONSTRAINTS = [
    # (id, call, parameter, status, words of the rule)
    ("null-prev-out", _with(SBH, prev_attn_out=None), "prev_attn_out", 161001, "null"),
    ("null-cur-sum", _with(SBH, cur_softmax_sum=None), "cur_softmax_sum", 161001, "null"),
    ("attn-dtype-mismatch", _with(SBH, cur_attn_out=SBH["cur_attn_out"].astype(np.float32)), "cur_attn_out",
     161002, "share one dtype"),
    ("attn-dtype", _with(SBH, prev_attn_out=SBH["prev_attn_out"].astype(np.float64),
                         cur_attn_out=SBH["cur_attn_out"].astype(np.float64)), "prev_attn_out", 161002, "dtype"),
    ("softmax-all-fp16", _with(SBH, **{k: SBH[k].astype(np.float16) for k in
                                       ("prev_softmax_max", "prev_softmax_sum", "cur_softmax_max",
                                        "cur_softmax_sum")}), "prev_softmax_max", 161002, "float32"),
    ("softmax-one-fp16", _with(SBH, cur_softmax_sum=SBH["cur_softmax_sum"].astype(np.float16)), "cur_softmax_sum",
     561002, "float32"),
    ("zero-dim", _with(SBH, prev_softmax_sum=_f32((1, 2, 0, 8))), "prev_softmax_sum", 161002, "0"),
    ("layout", _with(SBH, input_layout="BSH"), "input_layout", 161002, "'SBH'"),
    ("sbh-3d-softmax", _with(SBH, prev_softmax_max=_f32((6, 2, 8))), "prev_softmax_max", 161002, "4-D"),
    ("tail-not-8", _with(SBH, cur_softmax_max=_f32((1, 2, 6, 4))), "cur_softmax_max", 161002, "8"),
    ("sbh-s-mismatch", _with(SBH, **{k: _f32((1, 2, 5, 8)) for k in ("prev_softmax_max", "prev_softmax_sum",
                                                                      "cur_softmax_max", "cur_softmax_sum")}),
     "prev_softmax_max", 561002, "S=6"),
    ("sbh-cur-shape", _with(SBH, cur_attn_out=np.zeros((6, 1, 64), np.float16)), "cur_attn_out", 561002, "shape"),
    ("sbh-h-not-nd", _with(SBH, prev_attn_out=np.zeros((6, 1, 129), np.float16),
                           cur_attn_out=np.zeros((6, 1, 129), np.float16)), "prev_attn_out", 161002, "N*D"),
    ("tnd-no-qlen", _with(TND, actual_seq_qlen=None), "actual_seq_qlen", 161001, "required"),
    ("tnd-d-96", _with(TND, prev_attn_out=np.zeros((6, 2, 96), np.float16),
                       cur_attn_out=np.zeros((6, 2, 96), np.float16)), "prev_attn_out", 561002, "multiple of 64"),
    ("tnd-d-832", _with(TND, prev_attn_out=np.zeros((6, 2, 832), np.float16),
                        cur_attn_out=np.zeros((6, 2, 832), np.float16)), "prev_attn_out", 561002, "<= 768"),
    ("tnd-n-257", _with(TND, prev_attn_out=np.zeros((6, 257, 64), np.float16),
                        cur_attn_out=np.zeros((6, 257, 64), np.float16),
                        **{k: _f32((6, 257, 8)) for k in ("prev_softmax_max", "prev_softmax_sum", "cur_softmax_max",
                                                          "cur_softmax_sum")}), "prev_attn_out", 561002, "<= 256"),
    ("tnd-qlen-int32", _with(TND, actual_seq_qlen=np.array([0, 3, 6], np.int32)), "actual_seq_qlen", 561002,
     "int64"),
    ("tnd-qlen-no-zero", _with(TND, actual_seq_qlen=np.array([3, 6], np.int64)), "actual_seq_qlen", 161002,
     "from 0"),
    ("tnd-qlen-not-t", _with(TND, actual_seq_qlen=np.array([0, 3, 5], np.int64)), "actual_seq_qlen", 161002, "T=6"),
    ("tnd-qlen-decreasing", _with(TND, actual_seq_qlen=np.array([0, 4, 3, 6], np.int64)), "actual_seq_qlen",
     161002, "non-decreasing"),
    ("tnd-cur-shape", _with(TND, cur_attn_out=np.zeros((6, 2, 128), np.float16)), "cur_attn_out", 161002, "shape"),
    ("tnd-softmax-shape", _with(TND, cur_softmax_max=_f32((6, 3, 8))), "cur_softmax_max", 161002, "(T, N, 8)"),
    ("tnd-softmax-layout", _with(TND, input_softmax_layout="BNSD"), "input_softmax_layout", 561002, "'TND'"),
]


@pytest.mark.parametrize("kw,param,status,words", [pytest.param(*c[1:], id=c[0]) for c in CONSTRAINTS])
def test_constraint_raises_param_error(kw, param, status, words):
    with pytest.raises(ParamError) as ei:
        cvtile.npu_ring_attention_update(**kw)
    e = ei.value
    assert (e.param, int(e.status)) == (param, status), str(e)
    assert words in e.rule and f"aclnn {status}" in str(e) and param in str(e)


def test_valid_calls_of_the_constraint_tests_pass_the_checks():
    from cvtile.tiling.ring_attention_update import tile_ring_attention_update

    for base in (SBH, TND):
        t = {k: v for k, v in base.items() if k != "input_layout"}
        assert tile_ring_attention_update(t, base["input_layout"]).core_num > 0


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not on PATH (the twin needs a C++17 g++)")
@pytest.mark.parametrize("layout", ["SBH", "TND"])
def test_the_kernel_builds_and_runs_on_the_twin(tmp_path, layout):
    """The kernel reads lane 0 of the 8-lane statistics (``m[rows, 0]``: a strided GM column), which the Ascend C
    backend refused ("a GM window whose last dim is not contiguous"); it is now read element by element
    (``lower._load_strided``), and the built kernel's outputs equal the simulator's bit for bit."""
    from cvtile.dsl import ascendc as A
    from cvtile.dsl.jit import record_launches

    kw = make(layout, np.float16, seed=5)
    with record_launches() as rec:
        cvtile.npu_ring_attention_update(**kw)
    launches = [A.Launch.of(r) for r in rec.launches]
    res = A.emit(str(tmp_path), launches, atol=0.0, rtol=0.0)
    A.check_project(str(tmp_path), res["kernels"])
    assert "GetValue(" in next((tmp_path / "op_kernel").glob("*_kernel.cpp")).read_text()
    report = A.run_project(str(tmp_path), A.arch_of(launches[0].kernel.platform))
    lines = [ln for ln in report.splitlines() if ln.strip()]
    assert lines and all(ln.startswith("PASS") and "bitwise equal" in ln for ln in lines), report
