"""Regression: a cast to a tile's own dtype lowered to an Ascend C ``Cast`` with ``CAST_RINT``, which rounds a
float to an integral value, while the simulator left the value unchanged.

Found by emitting the FAS kernel with a float32 learnable sink (``ct.cast(ct.load(sink), ct.float32)``): on the
CPU twin every softmax sum was off by the rounded sink's exp. A same-dtype cast is now no op in the IR, so the
simulator, the cost model and the backend read the same (absent) operation.
"""

from __future__ import annotations

import numpy as np

import cvtile.dsl as ct


@ct.jit
def _copy_through_cast(x, out):
    with ct.vector():
        t = ct.load(x[0:8])
        ct.store(out[0:8], ct.cast(t, ct.float32) * 1.0)


def test_a_same_dtype_cast_is_no_op_in_the_ir():
    from cvtile.dsl.ascendc import lowered
    from cvtile.dsl.ir import walk

    x = np.array([0.5, -0.5, 1.5, 2.5, -1.25, 0.2, 3.7, -2.5], np.float32)
    out = np.zeros(8, np.float32)
    _copy_through_cast[1](x, out)
    np.testing.assert_array_equal(out, x)
    ck = _copy_through_cast.compile(x, out)
    assert not [op for op in walk(ck.compilation.final.body) if op.kind == "cast"]
    assert "Cast(" not in lowered(ck).source
