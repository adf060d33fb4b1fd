"""The launch's argument conversion without ``np.shares_memory`` (issue 12: the API's fixed cost per call).

A plain C-contiguous numpy array in native byte order is stored as a view of itself (``storage``'s invariant),
so ``NumbaRunner.convert`` no longer asks numpy whether each argument's storage shares its memory: such an
argument is never written back, every other one (a strided view, a byte-swapped array, a subclass) still is
when its storage is a copy. Nothing here runs a kernel (``convert`` only lays the arguments out).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import cvtile.dsl as ct
from cvtile.sim import storage as S
from cvtile.sim.launch import _is_view_of, _shares


@ct.jit
def copy_rows(x, o, N: ct.constexpr):
    with ct.vector():
        ct.store(o[0:N], ct.load(x[0:N]))


ARRAYS = {
    "float16": np.arange(8, dtype=np.float16),
    "bfloat16": np.arange(8).astype(ml_dtypes.bfloat16),
    "float32 2-D": np.ones((2, 4), np.float32),
    "int8": np.arange(8, dtype=np.int8),
    "empty": np.zeros((0, 4), np.float32),
    "strided": np.ones((4, 4), np.float16)[:, ::2],
    "transposed": np.ones((4, 2), np.float32).T,
    "byte-swapped": np.arange(8, dtype=">f4"),
    "subclass": np.arange(8, dtype=np.float32).view(np.recarray),
    "read-only": np.frombuffer(np.arange(8, dtype=np.float32).tobytes(), np.float32),
}


@pytest.mark.parametrize("name", list(ARRAYS))
def test_an_array_called_a_view_is_stored_as_a_view(name):
    a = ARRAYS[name]
    storage, dtype = S.to_storage(a)
    assert storage.flags.c_contiguous and storage.dtype.isnative
    assert dtype == S.dtype_name(a.dtype)
    if _is_view_of(a):
        assert a.size == 0 or np.shares_memory(storage, a)
        assert type(a) is np.ndarray and a.flags.c_contiguous and a.dtype.isnative
    else:   # the general test decides, as before
        assert _shares(storage.reshape(-1), a) == np.shares_memory(storage, a)


def _runner():
    x = np.zeros(16, np.float16)
    return copy_rows.compile(x, x, N=16).runner("numba")


def test_a_contiguous_output_is_not_written_back_and_a_strided_one_is():
    runner = _runner()
    x = np.arange(16, dtype=np.float16)
    out = np.zeros(16, np.float16)
    _, writeback, storages = runner.convert(1, [x, out], runner._plain)
    assert writeback == [] and np.shares_memory(storages["o"], out)
    wide = np.zeros((16, 2), np.float16)
    strided = wide[:, 0]
    _, writeback, storages = runner.convert(1, [x, strided], runner._plain)
    assert [orig is strided for orig, _ in writeback] == [True]
    storages["o"][:] = np.arange(16, dtype=np.float16).view(np.uint16)
    runner.write_back(writeback)
    assert np.array_equal(wide[:, 0], np.arange(16, dtype=np.float16)) and not wide[:, 1].any()


def test_a_byte_swapped_output_is_written_back_in_its_own_byte_order():
    runner = copy_rows.compile(np.zeros(16, np.float32), np.zeros(16, np.float32), N=16).runner("numba")
    out = np.zeros(16, ">f4")
    _, writeback, storages = runner.convert(1, [np.zeros(16, np.float32), out], runner._plain)
    assert len(writeback) == 1 and storages["o"].dtype == np.float32
    storages["o"][:] = 2.5
    runner.write_back(writeback)
    assert out.dtype == np.dtype(">f4") and np.all(out == 2.5)
