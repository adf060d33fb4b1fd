"""Read-only array arguments: a kernel may read them, never store into them.

Regression for two bugs: a read-only input that is not C-contiguous (``np.broadcast_to``) was copied for the
kernel and then "written back" into, which numpy refused (``ValueError: assignment destination is read-only``)
although the kernel never writes it; a read-only output reached numba as a readonly array and failed to compile
with a raw ``TypingError``. Now inputs run (on a private copy when needed) and an output says which argument."""

from __future__ import annotations

import numpy as np
import pytest

import cvtile.dsl as ct


@ct.jit
def copy_rows(x, out):
    with ct.vector():
        ct.store(out[0:32, 0:64], ct.load(x[0:32, 0:64]) * 2.0)


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


@pytest.mark.parametrize("make", [
    lambda: np.broadcast_to(np.float32(1.5), (40, 64)),                      # strided, read-only
    lambda: _read_only(np.full((40, 64), 1.5, np.float32)),                   # contiguous, read-only
], ids=["broadcast", "contiguous"])
def test_read_only_input_is_read_and_left_alone(make):
    x = make()
    before = x.copy()
    out = np.zeros((40, 64), np.float32)
    copy_rows[1](x, out)
    assert np.array_equal(out[:32], np.full((32, 64), 3.0, np.float32)) and not out[32:].any()
    assert np.array_equal(x, before) and not x.flags.writeable


def test_read_only_output_names_the_argument():
    x = np.ones((40, 64), np.float32)
    out = _read_only(np.zeros((40, 64), np.float32))
    with pytest.raises(ValueError, match=r"copy_rows: argument 'out' is a read-only array, but the kernel stores"):
        copy_rows[1](x, out)
    assert not out.any()
