"""Regressions of chunk_rows around a runtime ``if`` inside an over-budget vector pass.

1. The pass was cut in two at the ``if``:

chunk_rows chunked the arms of an ``if`` on their own before the pass around it, so FIA's V1 pass was
split at the learnable sink's ``if`` (inside the pipelined KV loop) and the full-height score tiles on
both sides had to be whole in UB: the sink prefill at M 256 needed 690 KB of a 192 KB UB, and the
branch's own arm ran in chunks of one row. Outer passes now go first and the ``if`` runs once per chunk.
The kernel is compiled (IR, passes, memory plan) without running, so the test is quick.

2. An arm holding whole compute (a (1, C) column index) kept the ``if`` out of the pass (below).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

import cvtile.dsl as ct
from cvtile.dsl import printer
from cvtile.dsl.jit import record_launches
from cvtile.kernels.fia.api import fused_infer_attention_score_v4


def test_sink_prefill_at_m_base_256_is_chunked_through_the_sinks_branch():
    rng = np.random.default_rng(0)
    q = rng.standard_normal((2, 4, 300, 64)).astype(np.float16)
    k = rng.standard_normal((2, 2, 300, 64)).astype(np.float16)
    sink = rng.standard_normal(4).astype(ml_dtypes.bfloat16)
    with record_launches(run=False) as rec:   # a BudgetError here was the bug
        fused_infer_attention_score_v4(q, k, k, learnable_sink=sink, num_heads=4, num_key_value_heads=2,
                                       input_layout="BNSD", scale=0.125, softmax_lse_flag=True)
    attention = rec.launches[0].kernel
    text = printer.format_kernel(attention.compilation.final)
    assert "row chunks of 1 " not in text
    assert attention.report.spaces["UB"].fits


# ------------------------------------------------------------------ a runtime if with whole compute in its arm


@ct.jit
def _masked_rows(x, out, flags, R: ct.constexpr, C: ct.constexpr):
    """One (R, C) fp32 pass far over UB; its branch builds a (1, C) column index (whole compute) and masks."""
    for t in range(2):
        with ct.vector():
            s = ct.load(x[t, 0:R, 0:C]) * 2.0
            if flags[t] != 0:
                col = ct.iota(C)
                s = ct.where(col[None, :] < 100, s, -1.0)
            ct.store(out[t, 0:R, 0:C], ct.exp(s - ct.rowmax(s)[:, None]))


def test_an_if_arm_with_whole_compute_stays_inside_the_chunked_pass():
    """The (1, C) index inside the arm kept the ``if`` out of the pass (its ops had to be row-wise), so the
    block-skipping kernel's full-block branch left a 1 MB pass whole in a 192 KB UB. Whole compute in an arm
    now runs on every chunk; both orders give numpy's result."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 512, 512)).astype(np.float32)
    flags = np.array([1, 0], np.int64)
    ck = _masked_rows.compile(x, np.zeros_like(x), flags, R=512, C=512)
    assert ck.report.spaces["UB"].fits
    s = x.astype(np.float64) * 2.0
    s[0][:, 100:] = -1.0
    want = np.exp(s - s.max(axis=2, keepdims=True))
    for order in ("program", "pipelined"):
        out = np.zeros_like(x)
        _masked_rows[1](x, out, flags, R=512, C=512, order=order)
        assert np.abs(out - want).max() <= 1e-6, order
