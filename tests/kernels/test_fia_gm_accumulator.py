"""The FIA kernel's GM accumulator (GM_ACC): a tall row block keeps its fp32 accumulator in the core's workspace.

At op_host's prefill M base of 512 rows, one vector core's half of the accumulator (256 x 128 fp32, 128 KiB)
would hold most of UB, and the score pass beside it ran in 4-row chunks. The chip keeps it in the vec2
workspace; so does the kernel now (``launch.gm_accumulator``). The arithmetic is the same fp32 stored and
reloaded, so the output is bitwise that of the UB accumulator, in program and in pipelined order.
"""

from __future__ import annotations

import numpy as np
import pytest

import cvtile
from cvtile.dsl.jit import record_launches
from cvtile.kernels import compare, fia_golden_lowp
from cvtile.kernels.fia import launch
from cvtile.kernels.golden import mask_template
from cvtile.tiling.platform import get_platform

A2 = get_platform("Ascend910B1")


def test_the_accumulator_moves_to_gm_when_its_half_takes_over_a_quarter_of_ub():
    assert launch.gm_accumulator(A2, 512, 128)       # 256 x 128 fp32 = 128 KiB per vector core
    assert launch.gm_accumulator(A2, 256, 128)       # 64 KiB > 48 KiB
    assert not launch.gm_accumulator(A2, 128, 128)   # 32 KiB
    assert not launch.gm_accumulator(A2, 8, 512)     # a decode's few rows


def _call(order="program"):
    rng = np.random.default_rng(7)
    q = rng.uniform(-1, 1, (1, 2, 512, 128)).astype(np.float16)
    k = rng.uniform(-1, 1, (1, 2, 1024, 128)).astype(np.float16)
    v = rng.uniform(-1, 1, (1, 2, 1024, 128)).astype(np.float16)
    kw = dict(num_heads=2, num_key_value_heads=2, input_layout="BNSD", scale=128 ** -0.5, sparse_mode=3,
              atten_mask=mask_template(), softmax_lse_flag=True)
    with record_launches() as rec:
        out, lse = cvtile.npu_fused_infer_attention_score(q, k, v, order=order, **kw)
    return (q, k, v, kw), out, lse, rec.launches


def _consts(launch_record) -> dict:
    return dict(part for part in launch_record.kernel.key[1] if len(part) == 2)


@pytest.fixture(scope="module")
def gm_run():
    return _call()


@pytest.mark.slow
def test_a_512_row_prefill_keeps_its_accumulator_in_gm_and_matches_the_golden(gm_run):
    (q, k, v, kw), out, lse, launches = gm_run
    att = [r for r in launches if r.kernel.name == "fia_attention"]
    assert att and _consts(att[0])["M"] == 512 and _consts(att[0]).get("GM_ACC") is True
    g_out, g_lse = fia_golden_lowp(q, k, v, **kw)
    assert compare(out, g_out, "float16").passed
    assert compare(lse, g_lse, "float32").passed


@pytest.mark.slow
def test_the_gm_accumulator_is_bitwise_the_ub_one_and_pipelined_order_is_bitwise_program_order(gm_run,
                                                                                                monkeypatch):
    _, out, lse, _ = gm_run
    _, p_out, p_lse, _ = _call("pipelined")
    assert np.array_equal(out.view(np.uint16), p_out.view(np.uint16)) and np.array_equal(lse, p_lse)
    monkeypatch.setattr(launch, "gm_accumulator", lambda plat, rows, dv: False)
    _, u_out, u_lse, u_launches = _call()
    assert not _consts(next(r for r in u_launches if r.kernel.name == "fia_attention")).get("GM_ACC")
    assert np.array_equal(out.view(np.uint16), u_out.view(np.uint16)) and np.array_equal(lse, u_lse)


@pytest.mark.slow
def test_checking_mode_takes_the_gm_accumulator_as_scratch_not_as_a_rewritten_output(gm_run):
    """regression: write-once reported the accumulator rows, rewritten at every KV block, as an output written
    262144 times over; a tensor the kernel reads back is its own scratch (races and uninit still judge it)."""
    from cvtile.sim import CheckMode, checked_launches

    (q, k, v, kw), out, _, _ = gm_run
    with checked_launches(CheckMode.full()):
        c_out, _ = cvtile.npu_fused_infer_attention_score(q, k, v, **kw)
    assert np.array_equal(out.view(np.uint16), c_out.view(np.uint16))
