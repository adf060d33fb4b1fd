"""The FIA checker driver: every family, phase by phase, in op_host's order.

Model
-----
``run_checkers(info)`` mirrors op_host's FIAChecker: nothing is checked for an
empty-tensor call; otherwise the phases run in the order single-parameter,
existence, cross-feature, multi-parameter consistency, and within each phase
the families run in the order common, mask, actual_seq_len, paged_attention,
post_quant, rope, pse, left_padding, system_prefix, softmax_lse,
learnable_sink, dequant. The first failing rule raises its ``ParamError``.
"""

from __future__ import annotations

from ..info import FiaInfo
from . import (actual_seq_len, common, dequant, learnable_sink, left_padding, mask, paged_attention, post_quant,
               pse, rope, softmax_lse, system_prefix)
from .base import CheckContext

__all__ = ["run_checkers", "FAMILIES", "PHASES"]

FAMILIES = (common, mask, actual_seq_len, paged_attention, post_quant, rope, pse, left_padding, system_prefix,
            softmax_lse, learnable_sink, dequant)
PHASES = ("single_para", "existence", "cross_feature", "consistency")


def run_checkers(info: FiaInfo) -> None:
    """Run every checker rule on ``info``; raise the first ``ParamError``."""
    if info.empty_tensor_flag:
        return
    ctx = CheckContext(info)
    for phase in PHASES:
        for family in FAMILIES:
            fn = getattr(family, phase, None)
            if fn is not None:
                fn(ctx)
