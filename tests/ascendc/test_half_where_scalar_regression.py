"""Regression: ``where`` on fp16 tiles with a scalar arm lowered to ``c ? static_cast<float>(x) :
static_cast<half>(1.0f)`` in the scalar loop, which C++ rejects (the two arms of ``?:`` have different types).
Found when the A2/A3 full-quant kernel first lowered (``ct.where(ok, gl, 1.0)`` on an fp16 row sum): the tile
elements are read as float, and a scalar arm is now rounded to the op's dtype and read as float too.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import cvtile.dsl as ct
from cvtile.dsl import ascendc as A
from cvtile.dsl.jit import record_launches


@ct.jit
def _where_scalar_else(x, out):
    with ct.vector():
        t = ct.load(x[0:16, 0:16])
        ct.store(out[0:16, 0:16], ct.where(t > 0.0, t, 0.1))


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not on PATH (the Ascend C checks need a C++17 g++)")
def test_fp16_where_with_a_scalar_arm_builds_and_matches(tmp_path):
    x = np.random.default_rng(2).uniform(-1, 1, (16, 16)).astype(np.float16)
    out = np.zeros((16, 16), np.float16)
    with record_launches() as rec:
        _where_scalar_else[1](x, out)
    np.testing.assert_array_equal(out, np.where(x > 0, x, np.float16(0.1)))
    launches = [A.Launch.of(r) for r in rec.launches]
    res = A.emit(str(tmp_path), launches)
    A.check_project(str(tmp_path), res["kernels"])
    report = A.run_project(str(tmp_path), A.arch_of(launches[0].kernel.platform))
    assert report.startswith("PASS") and "bitwise equal" in report, report
