"""Regression: a generated simulator module named the directory of its kernel's source file.

Its header comment gave the kernel's location as an absolute path, and the kernel cache finds a module by the
digest of its text: the same kernel, traced from two checkouts (or two virtual environments' installs) of
cvtile, got two module names and two compiles, and the cached module texts differed between machines. The
header now names the file and line only (``codegen._file_and_line``). Checked on a kernel of this file: no
module text (program order, pipelined order, checked) holds the directory, all name ``file.py:line``.
"""

from __future__ import annotations

import inspect
import os

import numpy as np

import cvtile.dsl as ct
from cvtile.dsl.jit import record_launches
from cvtile.sim.checking import CheckMode


@ct.jit
def scaled_copy(x, o, s):
    with ct.vector():
        ct.store(o[0:16, 0:16], ct.load(x[0:16, 0:16]) * s)


def test_no_module_text_names_the_kernels_directory():
    with record_launches(run=False) as rec:
        scaled_copy[1](np.ones((16, 16), np.float32), np.zeros((16, 16), np.float32), 2.0)
    kernel = rec.launches[0].kernel
    texts = [kernel.numba_source, kernel.pipelined_source, kernel.runner("numba").variant(CheckMode()).generated.text]
    path = inspect.getsourcefile(scaled_copy.fn)
    line = inspect.getsourcelines(scaled_copy.fn)[1]
    for text in texts:
        assert os.path.dirname(path) not in text
        assert f"({os.path.basename(path)}:" in text.splitlines()[0], text.splitlines()[0]
    assert any(f":{line + 1})" in t.splitlines()[0] or f":{line})" in t.splitlines()[0] for t in texts)
