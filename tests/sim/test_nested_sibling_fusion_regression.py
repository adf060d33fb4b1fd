"""Regression: a value fused into another's loop as its sibling hosted siblings of its own, which were then never
emitted ("tile ... is not materialised (codegen ordering bug)"). Found by the KV-antiquant kernel, where
``pa = p * 127`` is computed in the loop of the softmax's ``p`` and its int8 digit ``round(pa)`` was planned into
``pa``'s loop."""

import numpy as np

import cvtile.dsl as ct


@ct.jit
def chained_casts(x, digits, rest, D: ct.constexpr):
    with ct.vector():
        p = ct.exp(ct.load(x[0:4, 0:D]))            # materialised: two readers (the row sum, pa)
        total = ct.rowsum(p)                        # a sibling of p
        pa = p * 127.0                              # a sibling of p, read twice
        d0 = ct.cast(pa, ct.int8, rounding="round")   # reads only pa: planned as pa's sibling before the fix
        ct.store(digits[0:4, 0:D], d0)
        ct.store(rest[0:4, 0:D], (pa - ct.cast(d0, ct.float32)) * total[:, None])


def test_a_sibling_of_a_fused_sibling_is_materialised():
    x = np.random.default_rng(0).uniform(-3, 0, (4, 16)).astype(np.float32)
    digits = np.zeros((4, 16), np.int8)
    rest = np.zeros((4, 16), np.float32)
    chained_casts[1](x, digits, rest, D=16)
    pa = np.exp(x.astype(np.float64)) * 127
    want = np.sign(pa) * np.floor(np.abs(pa) + 0.5)
    assert np.abs(digits - want).max() <= 1    # fp32 exp vs float64: a tie may round either way
    assert np.isfinite(rest).all() and np.abs(rest).max() <= 0.5 * 16 + 1e-3
