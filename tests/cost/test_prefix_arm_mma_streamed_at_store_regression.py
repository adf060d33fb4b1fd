"""Regression: the cost model timed a system prefix's KV step as if its score block stayed in L0C.

The FIA kernel's KV step with a shared prefix is an ``if`` whose arms each compute the score matmul (the prefix's
keys or the batch's own) and yield it; the result is sent to the vector once, after the if. When the score block
exceeds the matmul's L0C pieces the memory plan streams each arm's matmul out of L0C at that store
(``MemoryPlan.streamed_out``), and the Ascend C build lowers the whole if at the store (``lower_cube.defer_if``).
The cost model looked for an mma's store only in the mma's own block, found none in the arm, and timed the
matmul whole and ahead of its hand-off slot: a (1, 8, 512, 128) prefill over a 512-key prefix and 1024 own keys
came out at 68.5 us, 14 % under the same prefill over 1536 keys without a prefix (79.7 us), which does the same
work through the same streamed-out matmul. The if is now timed at its store, each arm's matmul streamed into it
(``schedule._held_mmas``), and the two calls agree.
"""

from __future__ import annotations

import numpy as np

from cvtile.kernels.fia.cost import fia_cost


def _cost(kv: int, prefix: int = 0) -> float:
    rng = np.random.default_rng(0)
    u = lambda *shape: rng.uniform(-1, 1, shape).astype(np.float16)   # noqa: E731
    q, k, v = u(1, 8, 512, 128), u(1, 8, kv, 128), u(1, 8, kv, 128)
    kw = dict(num_heads=8, num_key_value_heads=8, input_layout="BNSD", scale=128 ** -0.5, target="Ascend910B1")
    if prefix:
        kw.update(key_shared_prefix=u(1, 8, prefix, 128), value_shared_prefix=u(1, 8, prefix, 128),
                  actual_shared_prefix_len=[prefix])
    return fia_cost(q, k, v, **kw).estimated_us


def test_a_prefix_prefill_costs_what_the_same_keys_cost_without_a_prefix():
    with_prefix, without = _cost(1024, prefix=512), _cost(1536)
    assert abs(with_prefix / without - 1) < 0.02, (with_prefix, without)
