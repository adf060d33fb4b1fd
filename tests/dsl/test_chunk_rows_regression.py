"""Regression: a runtime ``if`` inside an over-budget vector pass cut the pass in two.

chunk_rows chunked the arms of an ``if`` on their own before the pass around it, so FIA's V1 pass was
split at the learnable sink's ``if`` (inside the pipelined KV loop) and the full-height score tiles on
both sides had to be whole in UB: the sink prefill at M 256 needed 690 KB of a 192 KB UB, and the
branch's own arm ran in chunks of one row. Outer passes now go first and the ``if`` runs once per chunk.
The kernel is compiled (IR, passes, memory plan) without running, so the test is quick.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

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
