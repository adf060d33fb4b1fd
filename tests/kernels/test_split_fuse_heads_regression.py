"""Regression: the TND split-fuse route ran calls whose heads it cannot cover, and returned rows of zeros; it also
ran an inner_precise op_host leaves unchecked there (the last test).

Found by the full fuzz tier (``-m fuzz``, 500 calls): ``num_heads=1, num_key_value_heads=3`` on a TND call was
accepted and its attention_out came back all zeros, where the golden refuses the call. aclnn and op_host route
it to ``FAInferTiling`` without checking the head ratio; its GQA group ``num_heads / num_key_value_heads`` is 0,
it plans no task, and the chip leaves attention_out unwritten. A key or value holding fewer heads than
num_key_value_heads ran into the simulator's out-of-bounds check (a ``SimulationError``), where the chip reads
beyond the tensor. The API now refuses both by name (``api._refuse_unplanned_heads``); the tiling mirror still
plans what op_host plans."""

from __future__ import annotations

import numpy as np
import pytest

from cvtile import UnsupportedParameterError
from cvtile import npu_fused_infer_attention_score as fia
from cvtile.kernels.fia.cost import fia_plan


def _call(n1, n2, kv_heads):
    q = np.ones((1, n1, 16), np.float16)
    k = np.ones((1, kv_heads, 16), np.float16)
    return (q, k, k.copy()), dict(num_heads=n1, num_key_value_heads=n2, input_layout="TND",
                                  actual_seq_lengths=[1], actual_seq_lengths_kv=[1])


@pytest.mark.parametrize("n1, n2, kv_heads, param, says", [
    (1, 3, 3, "num_key_value_heads", "split-fuse"),     # a head ratio that is not whole
    (5, 2, 2, "num_key_value_heads", "split-fuse"),
    (3, 3, 1, "key", "fewer than"),                     # a cache with fewer heads than the route reads
    (2, 2, 1, "key", "fewer than"),
    (4, 0, 2, "key", "fewer than"),
])
def test_calls_whose_heads_the_route_cannot_cover_are_refused_by_name(n1, n2, kv_heads, param, says):
    args, kw = _call(n1, n2, kv_heads)
    assert fia_plan(*args, target="Ascend910B1", **kw).route == "fai"   # planned as op_host plans it
    with pytest.raises(UnsupportedParameterError) as info:
        fia(*args, **kw)
    assert info.value.param == param and says in str(info.value)


@pytest.mark.parametrize("n1, n2, kv_heads", [(4, 2, 2), (4, 0, 4), (2, 1, 2)])
def test_whole_ratios_still_run(n1, n2, kv_heads):
    """(2, 1, 2): a key with more heads than num_key_value_heads reads the first, as the chip does."""
    args, kw = _call(n1, n2, kv_heads)
    out, _ = fia(*args, **kw)
    assert out.shape == (1, n1, 16) and np.isfinite(out.astype(np.float32)).all()


def test_a_tnd_key_of_no_heads_is_refused_by_name_regression():
    """Found by the fuzz tier (seed 20261207): a TND key of shape (1, 0, 16) (no heads, so no elements) with a
    value that is not empty and a batch of KV length 1. The key alone empty is no empty-tensor call, so op_host
    routes it to split fuse, and the refusal of a cache with too few heads skipped empty tensors: the simulator's
    bounds check stopped the launch with a SimulationError instead of a typed refusal."""
    q = np.ones((1, 1, 16), np.float16)
    kw = dict(num_heads=1, num_key_value_heads=1, input_layout="TND", actual_seq_lengths=[0, 1],
              actual_seq_lengths_kv=[0, 1])
    k, v = np.zeros((1, 0, 16), np.float16), np.ones((1, 1, 16), np.float16)
    assert fia_plan(q, k, v, target="Ascend910B1", **kw).route == "fai"
    with pytest.raises(UnsupportedParameterError) as info:
        fia(q, k, v, **kw)
    assert info.value.param == "key" and "fewer than" in str(info.value)


@pytest.mark.parametrize("inner_precise", [-1, 5, 7])
def test_an_inner_precise_the_split_fuse_route_does_not_check_is_refused_by_name_regression(inner_precise):
    """Found by the fuzz tier (seed 20261207): inner_precise=-1 on a TND MHA call. The split-fuse route takes it
    without op_host's range check, the simulator ran it, and the golden then raised a plain ValueError. The API
    now refuses a value outside op_host's range on that route, naming inner_precise; 0-4 still run."""
    args, kw = _call(1, 1, 1)
    kw["inner_precise"] = inner_precise
    assert fia_plan(*args, target="Ascend910B1", **kw).route == "fai"   # op_host takes it there
    with pytest.raises(UnsupportedParameterError) as info:
        fia(*args, **kw)
    assert info.value.param == "inner_precise"
    out, _ = fia(*args, **dict(kw, inner_precise=0))
    assert np.isfinite(out.astype(np.float32)).all()
