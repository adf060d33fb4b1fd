"""Regression: on the legacy PromptFlashAttention route, a batch whose actual query length is shorter than the
query's S read its GQA heads' rows at the full S.

Found by the runtime fuzz (its KV-antiquant prefill envelope): ``actual_seq_lengths=[64, 1]`` with four query
heads on one kv head. The route plans per query head, and the mirror placed head h's rows of a batch at h * S1 in
the (batch, kv head) fold, where the kernels fold each batch's own S1 rows per head; batch 1's heads 1-3 then
started at rows 64, 128, 192 of a 4-row fold, and the simulator's bounds check stopped the launch. It hit every
kernel that runs on that route: the int8 full quant and the KV antiquant one."""

from __future__ import annotations

import numpy as np
import pytest

import cvtile
from cvtile.kernels.fia.cost import fia_plan
from cvtile.kernels.golden.fia import fia_golden, fia_golden_lowp
from cvtile.kernels.precision import compare

RNG = np.random.default_rng(5)
QLENS = [64, 1]


def test_the_route_places_each_heads_rows_at_the_batchs_own_query_length():
    q = np.zeros((2, 4, 64, 64), np.float16)
    k = np.zeros((2, 1, 512, 64), np.int8)
    t = fia_plan(q, k, k, num_heads=4, num_key_value_heads=1, input_layout="BNSD", target="Ascend910B1",
                 antiquant_scale=np.ones((2, 1, 1, 64), np.float16), actual_seq_lengths=QLENS)
    assert t.route == "pfa"
    starts = sorted(r.m_start for c in t.cores for r in c.tasks if r.b == 1)
    assert starts == [0, 1, 2, 3]


@pytest.mark.parametrize("flavour", ["kv_antiquant", "full_quant"])
def test_a_short_query_in_one_batch_runs_on_the_prefill_route(flavour):
    kw = dict(num_heads=4, num_key_value_heads=1, input_layout="BNSD", scale=0.125, actual_seq_lengths=QLENS)
    if flavour == "kv_antiquant":
        q = RNG.standard_normal((2, 4, 64, 64)).astype(np.float16)
        kw.update(antiquant_scale=RNG.uniform(0.002, 0.02, (2, 1, 1, 64)).astype(np.float16))
        golden = fia_golden_lowp
    else:   # small values and a coarse P scale, as test_fia_fullquant takes them
        q = RNG.integers(-3, 4, (2, 4, 64, 64)).astype(np.int8)
        kw.update(dequant_scale1=np.array([np.float32(0.5).view(np.uint32)], np.uint64),
                  quant_scale1=np.array([4.0], np.float32), dequant_scale2=np.array([0.25], np.float32))
        golden = fia_golden
    k = RNG.integers(-3, 4, (2, 1, 512, 64)).astype(np.int8)
    v = RNG.integers(-3, 4, (2, 1, 512, 64)).astype(np.int8)
    out, _ = cvtile.npu_fused_infer_attention_score(q, k, v, **kw)
    gold, _ = golden(q, k, v, **kw)
    rows = np.concatenate([out[0].reshape(-1, 64), out[1][:, :1].reshape(-1, 64)])
    want = np.concatenate([gold[0].reshape(-1, 64), gold[1][:, :1].reshape(-1, 64)])
    rep = compare(rows, want, "float16")
    assert rep.passed, str(rep)
