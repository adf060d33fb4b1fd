"""Regression: the tiling's invariant said op_host launches at least as many core groups as cores get work
(``block_dim >= used_cores``), and the plan fuzz property asserted it. On the legacy IFA route's perf modes 0
and 1 the work units are vector cores (each AIV a (b, n2) unit of its own), and op_host launches half as many
core groups (``CalcTschNumBlocks``): 48 units, block_dim 24, as the real op_host sets it. A fuzz draw of such a
call would have failed the property although the tiling is right. The invariant is now ``block_dim *
cv_ratio >= used_cores``."""

from __future__ import annotations

import numpy as np

from cvtile.kernels.fia.cost import fia_plan
from cvtile.tiling.platform import get_platform


def test_vector_core_units_launch_half_as_many_core_groups():
    b, nq, nkv, s2, d = 16, 32, 8, 1024, 128
    q = np.zeros((b, 1, nq * d), np.float16)
    k = np.zeros((b, s2, nkv * d), np.int8)
    scale = np.ones((2, nkv * d), np.float16)
    t = fia_plan(q, k, k, target="Ascend910B1", num_heads=nq, num_key_value_heads=nkv, input_layout="BSH",
                 antiquant_scale=scale)
    plat = get_platform("Ascend910B1")
    assert t.route == "ifa" and t.decision("perf_mode").value == 0
    assert (t.used_cores, t.block_dim) == (plat.aiv, plat.aic)     # 48 vector-core units, 24 core groups
    assert t.block_dim < t.used_cores <= t.block_dim * plat.cv_ratio
