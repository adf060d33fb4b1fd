"""UB tiles whose rows are not whole 32-byte blocks (a row of 7 floats, a (M, 1) column of per-row values).

DataCopyPad puts every row it moves at a 32-byte boundary of UB, and the vector unit addresses rows from such
boundaries, but the backend keeps UB tiles dense. The lowering used to refuse the copy ("DataCopyPad needs
32-byte row pitch"); 25 of the FIA st corpus' 114 kernel specialisations stopped there (a lse column, odd KV
lengths, flash-decode partials of odd head dims). Now such a copy moves each row through an aligned scratch
row, a row reduction reads each row from one, and a column broadcast over such a tile is the scalar loop: slow,
exact, and run on the twin here against the simulator.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import cvtile.dsl as ct
from cvtile.dsl import ascendc as A

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None,
                               reason="g++ is not on PATH (the Ascend C checks need a C++17 g++)")


@ct.jit
def _odd_rows(x, out, mx, N: ct.constexpr, C: ct.constexpr):
    for r0 in range(ct.block_idx() * 16, N, ct.block_num() * 16):
        n = min(16, N - r0)
        with ct.vector():
            a = ct.load(x[ct.ds(r0, 16, valid=n), 0:C])
            m = ct.rowmax(a)
            ct.store(out[ct.ds(r0, 16, valid=n), 0:C], (a - m[:, None]) * 2.0 + ct.rowsum(a)[:, None])
            ct.store(mx[ct.ds(r0, 16, valid=n), 0:1], m[:, None])


@needs_gxx
def test_tiles_with_unaligned_rows_copy_reduce_and_broadcast_on_the_twin(tmp_path):
    from cvtile.kernels.precision import tolerance

    rng = np.random.default_rng(1)
    n, c = 40, 7      # 28-byte rows of x and out, 4-byte rows of mx; 40 rows: a tail block of 8
    x = rng.standard_normal((n, c)).astype(np.float32)
    out, mx = np.zeros_like(x), np.zeros((n, 1), np.float32)
    ck = _odd_rows.compile(x, out, mx, N=n, C=c)
    res = A.emit(str(tmp_path), [A.Launch(ck, 2, [x, out, mx])], tolerance=tolerance)
    assert len(A.check_project(str(tmp_path), res["kernels"])) == 4
    kernel = next((tmp_path / "op_kernel").glob("*_kernel.cpp")).read_text()
    assert "oddRow" in kernel and "reduceRow" in kernel
    report = A.run_project(str(tmp_path), "arch22")
    assert report.count("PASS") == 2, report
    assert "PASS: mx bitwise equal" in report, report     # the max and the copies are exact


@ct.jit
def _per_tensor_scale(x, s, out, N: ct.constexpr):
    for r0 in range(ct.block_idx() * 16, N, ct.block_num() * 16):
        n = min(16, N - r0)
        with ct.vector():
            a = ct.load(x[ct.ds(r0, 16, valid=n), 0:64])
            ct.store(out[ct.ds(r0, 16, valid=n), 0:64], a * ct.load(s[0:1])[:, None])


@needs_gxx
def test_a_per_tensor_value_broadcast_over_a_tile_reads_its_one_element(tmp_path):
    """Regression: a (1, 1) operand (a per-tensor scale, ``load(s[0:1])[:, None]``, as post-quant's quant_scale2)
    of a 16-row result was lowered as a column broadcast (``Brcb`` of 16 rows from a one-element tile) or, in
    the scalar loop, read at the row index: rows past the first got garbage (FIA full-quant st cases 44 and 45
    on the twin: 37-75 % of the int8 outputs wrong). Its one element is read for every row now."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((40, 64)).astype(np.float32)
    s = np.array([1.75], np.float32)
    out = np.zeros_like(x)
    ck = _per_tensor_scale.compile(x, s, out, N=40)
    res = A.emit(str(tmp_path), [A.Launch(ck, 2, [x, s, out])])
    A.check_project(str(tmp_path), res["kernels"])
    report = A.run_project(str(tmp_path), "arch22")
    assert "PASS: out bitwise equal" in report, report
