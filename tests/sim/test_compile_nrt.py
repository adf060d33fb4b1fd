"""Compile-time levers of the numba backend: generated functions that allocate nothing are compiled without
numba's NRT (no reference counting: cheaper early exits), and the BLAS matmul goes through ``rt.dot_into``
(compiled once per machine). Results are bitwise those of the NRT build; a function that needs NRT after
all falls back to it; the checked variant keeps NRT.
"""

from __future__ import annotations

import numpy as np
import pytest

import cvtile.dsl as ct
from cvtile.sim import codegen
from cvtile.sim.launch import NumbaRunner

R, C, N = 32, 64, 3    # 32 rows: the mma takes the BLAS path (dot_into)


@ct.jit
def mm_softmax(x, w, out, n, R: ct.constexpr, C: ct.constexpr):
    for i in range(ct.block_idx(), n, ct.block_num()):
        with ct.cube():
            s = ct.mma(ct.load(x[i, 0:R, 0:C]), ct.load(w[0:C, 0:C]))
        with ct.vector():
            m = ct.rowmax(s)
            p = ct.exp(s - m[:, None])
            ct.store(out[i, 0:R, 0:C], p / ct.rowsum(p)[:, None])


def _args():
    rng = np.random.default_rng(3)
    x = rng.uniform(-2, 2, (N, R, C)).astype(np.float16)
    w = rng.uniform(-2, 2, (C, C)).astype(np.float16)
    return x, w, np.zeros((N, R, C), np.float32)


@pytest.fixture(scope="module")
def compiled():
    x, w, out = _args()
    return mm_softmax.compile(x, w, out, N, R=R, C=C)


def _run(runner, grid=2):
    x, w, out = _args()
    runner.launch(grid, [x, w, out, N])
    return out


@pytest.mark.parametrize("order", ["program", "pipelined"])
def test_nrt_free_text_and_bitwise_equal_to_nrt(compiled, order):
    free = NumbaRunner(compiled, order)
    assert "_nrt=False" in free.source and "dot_into(" in free.source and "np.dot(" not in free.source
    with_nrt = NumbaRunner(compiled, order)
    with_nrt.generated.text = with_nrt.source.replace(", _nrt=False", "")
    with_nrt._plain = type(with_nrt._plain)(with_nrt.generated, compiled.name + "_nrt")
    assert "_nrt=False" not in with_nrt.generated.text
    a, b = _run(free), _run(with_nrt)
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
    x, w, _ = _args()
    s = x.astype(np.float32) @ w.astype(np.float32)
    p = np.exp(s - s.max(axis=2, keepdims=True))
    assert np.allclose(a, p / p.sum(axis=2, keepdims=True), rtol=1e-5, atol=1e-6)


def test_decorator_keeps_nrt_for_allocations_and_checked_mode():
    assert "_nrt=False" in codegen._decorator(["    x = buf[:4]"])
    for line in ("    y = x.copy()", "    print(x)", "    t = np.empty(4, np.float32)"):
        assert "_nrt" not in codegen._decorator([line])
    assert "_nrt" not in codegen._decorator(["    x = buf[:4]"], nrt_free=False)
    from cvtile.sim.checkgen import CheckedGen

    assert CheckedGen.nrt_free is False


def test_falls_back_to_nrt_when_a_function_needs_it(compiled, monkeypatch):
    monkeypatch.setenv("CVTILE_COMPILER", "numba")      # the NRT fallback is numba's compile
    runner = NumbaRunner(compiled, "program")
    # an allocation the marker list does not know: the NRT-free compile fails, the launcher recompiles with NRT
    text = runner.source.replace("    return 0\n", "    _t = np.arange(3)\n    return 0\n", 1)
    runner.generated.text = text
    runner._plain = type(runner._plain)(runner.generated, compiled.name + "_fallback")
    out = _run(runner)
    assert "_nrt=False" not in runner.generated.text
    assert np.array_equal(out.view(np.uint32), _run(NumbaRunner(compiled, "program")).view(np.uint32))
