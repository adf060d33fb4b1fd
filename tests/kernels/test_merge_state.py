"""The merge-state primitives through ``npu_attention_update`` (K (O, lse) partials), against the golden.

``cvtile.npu_attention_update`` is the DSL kernel built on ``cvtile.kernels.merge_state``; the golden is
float64. The partials come from real attention over K chunks of the keys, so the merge must also equal
attention over all keys (vllm-ascend's chunked-context use). Rows whose partials are all empty (lse -inf)
give 0 and lse -inf. Contract violations raise ``ParamError`` with the aclnn status.
"""

from __future__ import annotations

import numpy as np
import pytest

import cvtile
from cvtile import ParamError
from cvtile.kernels.golden.ring_attention_update import attention_update_golden
from cvtile.kernels.precision import compare


def _chunks(rng, rows=150, d=72, kv=48, k=3):
    q = rng.standard_normal((rows, d))
    keys = rng.standard_normal((kv, d))
    vals = rng.standard_normal((kv, d))
    s = q @ keys.T / np.sqrt(d)
    cuts = np.array_split(np.arange(kv), k)
    lse, outs = [], []
    for c in cuts:
        x = s[:, c]
        m = x.max(1)
        p = np.exp(x - m[:, None])
        lse.append(m + np.log(p.sum(1)))
        outs.append(p @ vals[c] / p.sum(1)[:, None])
    p = np.exp(s - s.max(1)[:, None])
    full = p @ vals / p.sum(1)[:, None]
    return [x.astype(np.float32) for x in lse], [o.astype(np.float32) for o in outs], full


@pytest.fixture(scope="module")
def merged():
    rng = np.random.default_rng(0)
    lse, outs, full = _chunks(rng)
    for x in lse:                      # rows 5..9 have no key in any chunk; row 12 only in chunk 2
        x[5:10] = -np.inf
    lse[0][12] = lse[1][12] = -np.inf
    outs[0][5:10] = outs[1][5:10] = outs[2][5:10] = 0.0
    return lse, outs, full, cvtile.npu_attention_update(lse, outs, 1)


def test_attention_update_matches_golden(merged):
    lse, outs, _, (out, lse_out) = merged
    g_out, g_lse = attention_update_golden(lse, outs, 1)
    rep_o, rep_l = compare(out, g_out, "float32", name="out"), compare(lse_out, g_lse, "float32", name="lse")
    assert rep_o.passed and rep_l.passed, f"{rep_o}\n{rep_l}"
    assert (out[5:10] == 0).all() and (lse_out[5:10] == -np.inf).all()


def test_merge_equals_attention_over_all_keys(merged):
    lse, outs, full, (out, _) = merged
    ok = np.ones(len(full), bool)
    ok[5:13] = False                   # the rows the test emptied
    np.testing.assert_allclose(out[ok], full[ok], rtol=1e-4, atol=1e-5)


def test_update_type_0_returns_no_lse(merged):
    lse, outs, _, (out1, _) = merged
    out0, lse0 = cvtile.npu_attention_update(lse, outs, 0)
    assert lse0.size == 0 and np.array_equal(out0, out1)


@pytest.mark.parametrize("change,param,status", [
    (lambda l, o: (l[:1], o), "out_list", 161002),
    (lambda l, o: (l * 6, o * 6), "lse_list", 161002),                                 # 18 > 16 partials
    (lambda l, o: (l, [x[:, :70] for x in o]), "out_list[0]", 161002),                 # D 70: not a multiple of 8
    (lambda l, o: (l, [x.astype(np.float16) for x in o]), "out_list[0]", 161002),      # fp16 on A2
    (lambda l, o: ([x.astype(np.float16) for x in l], o), "lse_list[0]", 161002),
    (lambda l, o: (None, o), "lse_list", 161001),
])
def test_contract_raises_param_error(merged, change, param, status):
    lse, outs = change(list(merged[0]), list(merged[1]))
    with pytest.raises(ParamError) as ei:
        cvtile.npu_attention_update(lse, outs, 1)
    assert (ei.value.param, int(ei.value.status)) == (param, status), str(ei.value)


def test_bad_update_type(merged):
    with pytest.raises(ParamError) as ei:
        cvtile.npu_attention_update(merged[0], merged[1], 2)
    assert ei.value.param == "update_type"
