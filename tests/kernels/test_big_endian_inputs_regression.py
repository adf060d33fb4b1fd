"""Regression: an input array in the other byte order (``'>f2'`` on a little-endian host) passed every check (its
dtype is still float16) and then failed inside the launch with a TypeError ("dtype '>f2' is not a cvtile tile
dtype"). The operator APIs now take a native copy of such an array at their intake, so the call runs on the
same values."""

from __future__ import annotations

import numpy as np
import pytest

from cvtile.kernels.fas import api as fas_api
from cvtile.kernels.golden.dtypes import native_order, to_numpy


def test_to_numpy_gives_a_native_copy_of_a_big_endian_array():
    x = np.arange(6, dtype=np.float16).reshape(2, 3)
    be = x.astype(">f2")
    got = to_numpy(be)
    assert got.dtype.isnative and got.dtype == np.float16 and np.array_equal(got, x)
    assert to_numpy(x) is x and native_order(x) is x
    assert native_order(None) is None and native_order(3) == 3


def test_fas_intake_passes_native_arrays_on(monkeypatch):
    seen = {}

    class Stop(Exception):
        pass

    def spy(query, key, value, **kw):
        seen.update(query=query, key=key, value=value, pse=kw["pse"])
        raise Stop

    monkeypatch.setattr(fas_api, "prepare_call", spy)
    q = np.zeros((1, 2, 4, 64), ">f2")
    with pytest.raises(Stop):
        fas_api.npu_fusion_attention(q, q, q, 2, "BNSD", pse=np.zeros((1, 2, 4, 4), ">f2"))
    assert all(a.dtype.isnative and a.dtype == np.float16 for a in seen.values())
