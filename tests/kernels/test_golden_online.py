"""golden.online: the online-softmax benchmark of the st double benchmark, against the single-pass attend."""

from __future__ import annotations

import numpy as np
import pytest

from cvtile.kernels.golden.attend import attend
from cvtile.kernels.golden.dtypes import round_to
from cvtile.kernels.golden.online import attend_online


def _qkv(seed=0, hq=4, h=2, r=3, c=37, d=8):
    rng = np.random.default_rng(seed)
    q, k, v = (round_to(rng.uniform(-3, 3, s), "bfloat16") for s in ((hq, r, d), (h, c, d), (h, c, d)))
    return q, k, v


def test_one_block_is_the_single_pass_softmax_in_fp32():
    q, k, v = _qkv()
    for p_dtype in (None, "bfloat16"):
        o1, l1 = attend_online(q, k, v, 0.4, p_dtype=p_dtype, kv_block=64)
        o2, l2 = attend(q, k, v, 0.4, p_dtype=p_dtype, work_dtype="float32")
        assert np.allclose(o1, o2, rtol=1e-6, atol=1e-7) and np.allclose(l1, l2, rtol=1e-6)


def test_blocks_round_p_against_the_running_max():
    """Unrounded, the blockwise result is the exact softmax (to fp32); with P in bf16 each block is rounded
    against its running max, so small blocks differ from the single pass by P's rounding, not more."""
    q, k, v = _qkv(1)
    exact = attend(q, k, v, 0.4)
    o, lse = attend_online(q, k, v, 0.4, kv_block=5)
    assert np.allclose(o, exact[0], rtol=1e-5, atol=1e-6) and np.allclose(lse, exact[1], rtol=1e-6)
    blocks = attend_online(q, k, v, 0.4, p_dtype="bfloat16", kv_block=5)[0]
    single = attend_online(q, k, v, 0.4, p_dtype="bfloat16", kv_block=64)[0]
    assert not np.array_equal(blocks, single)
    assert np.allclose(blocks, exact[0], rtol=2 ** -6, atol=2 ** -7)


def test_masked_leading_blocks_sink_and_empty_rows():
    """A row whose first blocks are all masked keeps m = -inf, l = 0 (no NaN); the sink joins at the last
    block as in attend; a row with no visible key gives 0 and lse +inf."""
    q, k, v = _qkv(2)
    keep = np.ones((3, 37), bool)
    keep[0, :20] = False        # row 0: its first four blocks of 5 are masked
    keep[2] = False             # row 2: nothing visible
    sink = np.array([0.5, -1.0, 2.0, 0.0])
    o, lse = attend_online(q, k, v, 0.4, keep=keep, sink=sink, kv_block=5)
    ref_o, ref_lse = attend(q, k, v, 0.4, keep=keep, sink=sink)
    assert np.isfinite(o).all() and np.allclose(o, ref_o, rtol=1e-5, atol=1e-6)
    assert np.array_equal(o[:, 2], np.zeros_like(o[:, 2])) and np.isposinf(lse[:, 2]).all()
    assert np.allclose(lse[:, :2], ref_lse[:, :2], rtol=1e-6)


def test_fp16_intermediates_for_inner_precise_1():
    q, k, v = _qkv(3)
    o16 = attend_online(q, k, v, 0.4, p_dtype="float16", work_dtype="float16")[0]
    o32 = attend_online(q, k, v, 0.4, p_dtype="float16")[0]
    assert not np.array_equal(o16, o32) and np.allclose(o16, o32, rtol=2 ** -7, atol=2 ** -8)
    with pytest.raises(ValueError, match="work_dtype"):
        attend_online(q, k, v, 0.4, work_dtype="int8")
