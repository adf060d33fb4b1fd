"""Regression: a chain of compile-time ``or`` / ``and`` operands folded to its last operand.

``BAND or SCORE_MOD is not None or MASK_MOD is not None`` with BAND False, a score_mod and no mask_mod
evaluated to False (the fold kept overwriting the result instead of stopping at the first decisive
operand), so a kernel skipped code its constexprs asked for.
"""

from __future__ import annotations

import numpy as np
import pytest

import cvtile.dsl as ct


@ct.jit
def _pick(out, A: ct.constexpr, B: ct.constexpr, C: ct.constexpr):
    with ct.vector():
        if A or B or C:
            ct.store(out[0:8], ct.full((8,), 1.0, ct.float32))
        else:
            ct.store(out[0:8], ct.full((8,), 2.0, ct.float32))
        if A and B and C:
            ct.store(out[8:16], ct.full((8,), 1.0, ct.float32))
        else:
            ct.store(out[8:16], ct.full((8,), 2.0, ct.float32))


@pytest.mark.parametrize("a,b,c", [(False, True, False), (False, False, True), (True, False, False),
                                   (False, False, False), (True, True, True), (True, True, False)])
def test_boolop_constant_chain_short_circuits_like_python(a, b, c):
    out = np.zeros(16, np.float32)
    _pick[1](out, A=a, B=b, C=c)
    assert out[0] == (1.0 if (a or b or c) else 2.0)
    assert out[8] == (1.0 if (a and b and c) else 2.0)


@ct.jit
def _mixed(out, n, A: ct.constexpr):
    with ct.vector():
        if A or n > 3:
            ct.store(out[0:8], ct.full((8,), 1.0, ct.float32))
        else:
            ct.store(out[0:8], ct.full((8,), 2.0, ct.float32))


@pytest.mark.parametrize("a,n,want", [(False, 5, 1.0), (False, 1, 2.0), (True, 1, 1.0)])
def test_boolop_mixes_a_constant_and_a_runtime_operand(a, n, want):
    out = np.zeros(8, np.float32)
    _mixed[1](out, n, A=a)
    assert out[0] == want
