"""GM views: indexing, slices and ds(start, size, valid=), split/permute/merge/narrow/reshape/broadcast,
scalar reads of GM tensors; @inline helpers and calling one @jit kernel from another.

Every view is checked against the numpy view of the same data (the kernel copies it out with load/store).
"""

from __future__ import annotations

import numpy as np
import pytest

import cvtile.dsl as ct

X = np.arange(2 * 3 * 4 * 8, dtype=np.float32).reshape(2, 3, 4, 8)
Y = np.arange(24 * 8, dtype=np.float32).reshape(24, 8) * 0.5
IDX = np.array([5, 1, 7], np.int32)
H = (np.arange(12).reshape(3, 4) / 3).astype(np.float16)


@ct.jit
def views_a(x, y, idx, o1, o2, o3, o4):
    b = idx[1]                                                   # scalar read of an int32 tensor
    with ct.vector():
        ct.store(o1[0:4, 0:8], ct.load(x.permute(1, 0, 2, 3)[2, b][0:4, 0:8]))
        ct.store(o2[0:6, 0:8], ct.load(x[1].merge(0)[ct.ds(5, 6), 0:8]))
        ct.store(o3[0:4, 0:8], ct.load(y.split(0, 4)[b + 2][0:4, 0:8]))
        ct.store(o4[0:4, 0:8], ct.load(y.narrow(0, 10, 5)[ct.ds(2, 4, valid=3), 0:8]))


@ct.jit
def views_b(x, y, h, o5, o6, o7, o8):
    with ct.vector():
        ct.store(o5[0:2, 0:32], ct.load(x.reshape(6, -1)[1:3, 0:32]))
        ct.store(o6[0:4, 0:8], ct.load(y[3].broadcast(0, 4)[0:4, 0:8]))
        ct.store(o7[0:12, 0:8], ct.load(x[0].permute(1, 0, 2).merge(0)[0:12, 0:8]))   # a non-contiguous merge
        v = x[1, 2, 3, 4] + y[y.shape[0] - 1, 7]                                      # scalar reads, runtime shape
        ct.store(o8[0:3], ct.full((3,), v + h[1, 2], ct.float32))                       # a float16 element


@pytest.fixture(scope="module")
def view_outputs():
    o1, o2, o3 = np.zeros((4, 8), np.float32), np.zeros((6, 8), np.float32), np.zeros((4, 8), np.float32)
    o4 = np.full((4, 8), -1.0, np.float32)
    views_a[1](X, Y, IDX, o1, o2, o3, o4)
    o5, o6, o7 = np.zeros((2, 32), np.float32), np.zeros((4, 8), np.float32), np.zeros((12, 8), np.float32)
    o8 = np.zeros(3, np.float32)
    views_b[1](X, Y, H, o5, o6, o7, o8)
    return o1, o2, o3, o4, o5, o6, o7, o8


def test_permute_then_index_with_a_runtime_scalar(view_outputs):
    assert np.array_equal(view_outputs[0], X.transpose(1, 0, 2, 3)[2, IDX[1]])


def test_merge_rows_with_ds(view_outputs):
    assert np.array_equal(view_outputs[1], X[1].reshape(12, 8)[5:11])


def test_split_a_dimension(view_outputs):
    assert np.array_equal(view_outputs[2], Y.reshape(6, 4, 8)[IDX[1] + 2])


def test_narrow_then_ds_with_valid_reads_only_valid_rows(view_outputs):
    want = np.full((4, 8), -1.0, np.float32)
    want[:3] = Y[10:15][2:5]
    assert np.array_equal(view_outputs[3], want)


def test_reshape_with_minus_one(view_outputs):
    assert np.array_equal(view_outputs[4], X.reshape(6, 32)[1:3])


def test_broadcast_repeats_a_row(view_outputs):
    assert np.array_equal(view_outputs[5], np.broadcast_to(Y[3], (4, 8)))


def test_merge_of_non_contiguous_dims(view_outputs):
    assert np.array_equal(view_outputs[6], X[0].transpose(1, 0, 2).reshape(12, 8))


def test_scalar_reads_and_runtime_shapes(view_outputs):
    want = np.float32(X[1, 2, 3, 4] + Y[23, 7]) + np.float32(H[1, 2])   # float16 decoded exactly
    assert view_outputs[7].tolist() == [want] * 3


def test_compiled_kernel_launch_matches_the_grid_launch(view_outputs):
    # CompiledKernel.launch(grid, runtime args) runs the same specialisation as kernel[grid](...)
    o1, o2, o3 = np.zeros((4, 8), np.float32), np.zeros((6, 8), np.float32), np.zeros((4, 8), np.float32)
    o4 = np.full((4, 8), -1.0, np.float32)
    ck = views_a.compile(X, Y, IDX, o1, o2, o3, o4)
    ck.launch(2, [X, Y, IDX, o1, o2, o3, o4])
    for got, want in zip((o1, o2, o3, o4), view_outputs[:4]):
        assert np.array_equal(got, want)


def test_merged_window_is_printed_with_its_radices():
    ck = views_b.compile(X, Y, H, np.zeros((2, 32), np.float32), np.zeros((4, 8), np.float32),
                         np.zeros((12, 8), np.float32), np.zeros(3, np.float32))
    loads = [line for line in str(ck.ir).splitlines() if "= load(" in line]
    assert any("merged(" in line for line in loads)
    assert len([op for op in ck.ir.ops() if op.kind == "sload"]) == 3
    # every GM access is guarded: the scalar reads emit bound checks
    assert any(op.kind == "check" and "out of bounds" in op.attrs["message"] for op in ck.ir.ops())


# ---------------------------------------------------------------- helpers: @inline and @jit calling @jit

@ct.inline
def affine(t, scale, shift=1.0):
    u = t * scale
    return u + shift


@ct.inline
def rows_of(view, r0, R):
    return view[ct.ds(r0, R), :]          # a helper may build and return GM views


@ct.jit
def add_rows(x, o, r0, R: ct.constexpr):
    with ct.vector():
        ct.store(o[ct.ds(r0, R)], affine(ct.load(x[ct.ds(r0, R)]), 3.0))


@ct.jit
def calls_helpers(x, o, R: ct.constexpr):
    with ct.vector():
        t = ct.load(rows_of(x, 2, R)[:, 0:8])
        ct.store(o[0, 0:R, 0:8], affine(t, 2.0, shift=-1.0))
    for r in range(R):
        add_rows(x[:, 0], o[1, :, 0], r, 1)  # another @jit kernel, inlined with its own constexpr
    with ct.vector():
        ct.store(o[1, 0:R, 1:8], ct.load(x[0:R, 1:8]))


def test_inline_helpers_and_jit_called_from_jit():
    x = np.arange(8 * 8, dtype=np.float32).reshape(8, 8)
    o = np.zeros((2, 4, 8), np.float32)
    calls_helpers[1](x, o, R=4)
    assert np.array_equal(o[0], x[2:6] * 2 - 1)
    assert np.array_equal(o[1][:, 0], x[:4, 0] * 3 + 1)
    assert np.array_equal(o[1][:, 1:], x[:4, 1:])


def test_inlined_ops_carry_the_helpers_source_lines(dsl):
    ck = calls_helpers.compile(np.zeros((8, 8), np.float32), np.zeros((2, 4, 8), np.float32), R=4)
    muls = [op for op in ck.ir.ops() if op.kind == "ewise" and op.attrs["op"] == "mul"]
    assert {op.loc.line for op in muls} == {dsl.line_of(affine, "u = t * scale")}
    assert len([op for op in ck.ir.ops() if op.kind == "for"]) == 1
