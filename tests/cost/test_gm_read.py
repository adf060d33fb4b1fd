"""A GM read (``sload``) of a small launch argument reads a Python list (``schedule.Launch.reader``): the same
Python numbers as ``arr[i].item()``, and the array's own exception for an index out of range; and the cyclic
garbage collector is paused only while a launch is timed (``estimate``)."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import cvtile.sim.cost as cost
from cvtile.sim.cost.schedule import Launch


def _reader(arr):
    launch = Launch.__new__(Launch)
    launch.tensors = {7: (arr, arr.shape)}
    return launch.reader(7), {7: (arr, arr.shape)}


@pytest.mark.parametrize("dtype", ["float16", "float32", "int32", "int64", "bool"])
def test_list_read_is_item(dtype):
    arr = np.array([0, 3, -2, 7, 1], dtype=dtype)
    if dtype.startswith("float"):
        arr[2] = np.nan
    read, vals = _reader(arr)
    for i in range(-5, 5):
        want, got = arr[i].item(), read(vals, i)
        assert type(got) is type(want) and (got == want or (got != got and want != want))
    with pytest.raises(IndexError) as e:
        read(vals, 5)
    with pytest.raises(IndexError) as want:
        arr[5]
    assert str(e.value) == str(want.value)


def test_gc_paused_only_inside_estimate(monkeypatch):
    seen = []
    monkeypatch.setattr(cost, "_estimate", lambda *a: seen.append(gc.isenabled()))
    assert gc.isenabled()
    cost.estimate(None, 1, [])
    assert seen == [False] and gc.isenabled()
    gc.disable()
    try:
        cost.estimate(None, 1, [])
        assert not gc.isenabled()
    finally:
        gc.enable()
