"""Windows whose column dim is merged from two radices with a contiguous inner one (an NZ cache's D: D/d0
fractals of d0 elements): the simulator walks them in runs (``codegen._gm_runs``) for loads and stores, from a
column start inside a fractal and with a valid count that ends inside one, element for element as the
numpy view of the same data."""

from __future__ import annotations

import numpy as np

import cvtile.dsl as ct

X = np.arange(2 * 3 * 5 * 4, dtype=np.float32).reshape(2, 3, 5, 4)     # (B, D1, S, d0)
VIEW = X[1].transpose(1, 0, 2).reshape(5, 12)                          # (S, D1 * d0) of batch 1


@ct.jit
def fractal_load(x, o):
    with ct.vector():
        rows = x[1].permute(1, 0, 2).merge(1)                             # (S, D1 * d0), columns in runs of d0
        ct.store(o[0:3, ct.ds(0, 8, valid=7)], ct.load(rows[ct.ds(1, 3), ct.ds(2, 8, valid=7)]))


@ct.jit
def fractal_store(x, back):
    with ct.vector():
        t = ct.load(x[1].permute(1, 0, 2).merge(1)[ct.ds(1, 3), ct.ds(2, 8, valid=7)])
        ct.store(back[1].permute(1, 0, 2).merge(1)[ct.ds(1, 3), ct.ds(2, 8, valid=7)], t)


def test_merged_columns_load_and_store_in_runs():
    o = np.full((3, 7), -1.0, np.float32)
    fractal_load[1](X, o)
    assert np.array_equal(o, VIEW[1:4, 2:9])
    back = np.full(X.shape, -1.0, np.float32)
    fractal_store[1](X, back)
    bview = back[1].transpose(1, 0, 2).reshape(5, 12)
    assert np.array_equal(bview[1:4, 2:9], VIEW[1:4, 2:9])
    untouched = np.ones((5, 12), bool)
    untouched[1:4, 2:9] = False
    assert (bview[untouched] == -1).all() and (back[0] == -1).all()


def test_merged_columns_under_the_checking_mode():
    """The checking mode (NaN-filled on-chip memory, bounds, write-once outputs) runs the same load."""
    o = np.full((3, 7), -1.0, np.float32)
    fractal_load.compile(X, o).launch(1, [X, o], check=True)
    assert np.array_equal(o, VIEW[1:4, 2:9])
