"""The cost of a FlashAttentionScore forward call: the cost model on exactly what the operator launches.

``fas_cost(query, key, value, **kwargs)`` takes ``npu_fusion_attention``'s arguments (torch_npu's names) plus
``target``, runs the operator's host side (checks, the FAS tiling mirror, the kernel's compilation for the
target) with the launch recorded but not run, and times it with ``cvtile.sim.cost``. Only scalars the kernel
reads (lengths, the task tables) matter; zeros are a fine stand-in for the data.

``useful_flops`` is the call's matmul work over its visible pairs, 2·pairs·(D + Dv) per head, where pairs is
counted from the call's own visibility (``FasCall.visible``), so a causal call is credited with half the work.
"""

from __future__ import annotations

import numpy as np

from ...dsl.jit import record_launches
from ...sim.cost import CostReport, estimate_calls
from .api import fas_tiling, npu_fusion_attention
from .host import FasCall, prepare_call

__all__ = ["fas_cost", "useful_flops"]

_NOT_HOST = ("gen_mask_parallel", "sync", "target", "score_mod", "mask_mod", "mod_args", "order")


def fas_cost(query, key, value, *, target: str, record: str = "critical", **kwargs) -> CostReport:
    """The cost report of ``npu_fusion_attention(query, key, value, target=target, **kwargs)``."""
    host_kw = {k: v for k, v in kwargs.items() if k not in _NOT_HOST}
    inner = int(host_kw.pop("inner_precise", 0) or 0)
    call = prepare_call(query, key, value, **host_kw)
    tiling = fas_tiling(call, target, inner)
    with record_launches(run=False) as rec:
        npu_fusion_attention(query, key, value, target=target, **kwargs)
    report = estimate_calls(rec.launches, target, flops=useful_flops(call), record=record)
    report.tiling = tiling
    return report


def useful_flops(call: FasCall) -> float:
    """2·(visible pairs)·(D + Dv) summed over batches and query heads (``FasCall.visible_pairs``: counted row by
    row, never as one (S1, S2) matrix, which for a long prefill would not fit in memory)."""
    pairs = 0
    for b in range(call.b):
        heads = call.n1 if call.mask is not None and call.mask.shape[1] > 1 else 1
        per = sum(call.visible_pairs(b, n) for n in range(heads))
        pairs += per * (call.n1 // heads)
    return 2.0 * pairs * (call.d + call.dv)
