"""Regression: the generated simulator module of a kernel depended on what the process had traced before it.

Its variable and buffer names carried the IR values' process-wide ids (``s_363``, ``buf_1943``), and the kernel
cache finds a module by the digest of its text. So a kernel specialisation traced after other kernels got
another text than the same specialisation traced first: another module, compiled again, in every process whose
history differed (each test worker, each ``cvtile cases`` worker, each fuzz run). Names are now numbered per
program in the order the generator names them (``codegen._Gen.number``).
"""

from __future__ import annotations

import numpy as np

import cvtile.dsl as ct
from cvtile.sim.checking import CheckMode


@ct.jit
def scores(q, k, out, n, R: ct.constexpr, C: ct.constexpr, D: ct.constexpr):
    with ct.cube():
        q1 = ct.load(q[0:R, 0:D])
    with ct.vector():
        m = ct.full((R,), -ct.inf, ct.float32)
    for j in range(0, n, C):
        with ct.cube():
            s = ct.mma(q1, k[ct.ds(j, C, valid=min(C, n - j)), 0:D], trans_b=True)
        with ct.vector():
            m = ct.maximum(m, ct.rowmax(s * 0.5))
    with ct.vector():
        ct.store(out[0:R], m)


@ct.jit
def other(x, y, N: ct.constexpr):
    with ct.vector():
        ct.store(y[0:N], ct.exp(ct.load(x[0:N])) + 1.0)


def _texts():
    """The program-order, pipelined-order and checked modules of a fresh specialisation of ``scores``."""
    args = (np.zeros((16, 32), np.float16), np.zeros((64, 32), np.float16), np.zeros(16, np.float32), 40)
    ck = ct.jit(scores.fn).compile(*args, R=16, C=16, D=32)    # a fresh JITFunction: traced anew
    checked = ck.runner("numba").variant(CheckMode()).generated.text
    return ck.numba_source, ck.pipelined_source, checked


def test_a_kernel_generates_the_same_module_whatever_was_traced_before():
    first = _texts()
    for n in (8, 16, 24):   # trace other kernels in between: the process-wide value ids move on
        ct.jit(other.fn).compile(np.zeros(n, np.float32), np.zeros(n, np.float32), N=n)
    again = _texts()
    for a, b in zip(first, again):
        assert a == b
