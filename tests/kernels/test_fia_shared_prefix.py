"""The system prefix (key/value_shared_prefix, actual_shared_prefix_len) in the FIA kernel, against the golden.

Every batch attends to the first ``plen`` prefix positions, then to its own KV: the kernel's KV lengths and S2
blocks count both (IFATiling's and the Ascend950 catch-all's KV lengths count the own KV: the launch adds the
prefix), the kernel reads the prefix views below ``plen`` and the batch's own after it (a block that
straddles ``plen`` is two steps). With the IFATiling flash-decode split the prefix pass is piece 0 of every split
row (``kernels.fia.prefix_fd``). The kernel also builds for the chip: the Ascend C twin runs it.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from cvtile.dsl import ascendc as A
from cvtile.dsl.jit import record_launches
from cvtile.kernels import compare
from cvtile.kernels.fia.api import npu_fused_infer_attention_score as fia
from cvtile.kernels.fia.kernel import fia_attention
from cvtile.kernels.golden.fia import fia_golden_lowp


def _call(rng, b=2, n=4, n2=2, s1=1, s2=100, p=300, d=64, layout="BNSD"):
    u = lambda *shape: rng.uniform(-1, 1, shape).astype(np.float16)   # noqa: E731
    q, k, v = u(b, n, s1, d), u(b, n2, s2, d), u(b, n2, s2, d)
    kp, vp = u(1, n2, p, d), u(1, n2, p, d)
    if layout == "BSH":
        q, k, v, kp, vp = (x.transpose(0, 2, 1, 3).reshape(x.shape[0], x.shape[2], -1) for x in (q, k, v, kp, vp))
    return q, k, v, dict(num_heads=n, num_key_value_heads=n2, input_layout=layout, scale=d ** -0.5,
                         key_shared_prefix=kp, value_shared_prefix=vp)


def _check(q, k, v, **kw):
    out, lse = fia(q, k, v, softmax_lse_flag=True, **kw)
    gold, glse = fia_golden_lowp(q, k, v, softmax_lse_flag=True, **kw)
    rep = compare(out, gold, q.dtype)
    assert rep.passed, str(rep)
    assert compare(lse, glse, "float32", rtol=1e-4, atol=1e-4).passed
    return out


@pytest.mark.slow
def test_decode_with_a_partial_prefix_straddling_a_block():
    rng = np.random.default_rng(1)
    q, k, v, kw = _call(rng)
    _check(q, k, v, actual_shared_prefix_len=[250], **kw)


@pytest.mark.slow
def test_bsh_decode_with_kv_lengths_and_the_whole_prefix():
    rng = np.random.default_rng(2)
    q, k, v, kw = _call(rng, b=3, layout="BSH")
    _check(q, k, v, actual_seq_lengths_kv=[100, 7, 60], **kw)


@pytest.mark.slow
def test_the_prefix_changes_the_result():
    """Not a no-op: the same call without the prefix gives another output."""
    rng = np.random.default_rng(3)
    q, k, v, kw = _call(rng)
    with_prefix = _check(q, k, v, **kw)
    kw.pop("key_shared_prefix"), kw.pop("value_shared_prefix")
    without, _ = fia(q, k, v, **kw)
    assert np.abs(with_prefix.astype(np.float32) - without.astype(np.float32)).max() > 1e-2


@pytest.mark.slow
def test_prefill_rows_with_a_prefix():
    rng = np.random.default_rng(4)
    q, k, v, kw = _call(rng, b=1, n=2, n2=1, s1=32, s2=80, p=50)
    _check(q, k, v, **kw)


def test_prefix_with_the_ifa_flash_decode_split_regression():
    """Bug: a shared prefix on the legacy IFA route (MHA decode, D 80) whose tiling splits the own KV for flash
    decode was refused. The prefix pass (its own S2 block of 300) is now piece 0 of every split row, the own
    KV's parts the next pieces, merged by the FD combine."""
    rng = np.random.default_rng(7)
    q, k, v, kw = _call(rng, b=1, n=2, n2=2, s2=1100, p=300, d=80)
    with record_launches() as rec:
        _check(q, k, v, actual_shared_prefix_len=[250], **kw)
    names = [r.kernel.name for r in rec.launches]
    assert names == ["fia_attention", "fia_fd_combine"], names
    tasks = rec.launches[0].args[list(fia_attention.signature.parameters).index("tasks")]
    # the task table: prefix piece [0, 250) then the own parts
    assert sorted({(int(t[7]), int(t[8])) for t in tasks}) == [(0, 250), (250, 800), (800, 1350)]


def test_prefix_on_the_ascend950_catch_all_tiling_regression():
    """Bug: on Ascend950 (FusedInferAttentionScoreTilingImpl, whose KV lengths count each batch's own KV while
    its row tasks' S2 blocks span the prefix too) the launch added the prefix to the kernel's KV lengths only
    for IFATiling, and the kernel read a negative block extent (SimulationError)."""
    rng = np.random.default_rng(8)
    q, k, v, kw = _call(rng)
    _check(q, k, v, actual_shared_prefix_len=[250], target="Ascend950", **kw)


@pytest.mark.slow
def test_a_score_block_of_a_prefix_kernel_streams_out_of_l0c_regression():
    """Bug: B 2, N 5, KV 4096 + prefix 1024: the prefix / own K choice kept the 16 x 4096 fp32 score block of
    each arm resident in L0C (2 x 128 KB > 128 KB), and the call was refused; the arms' results stream out of
    L0C in base tiles as one mma's would."""
    rng = np.random.default_rng(5)
    q, k, v, kw = _call(rng, b=2, n=5, n2=5, s2=4096, p=1024, d=128)
    _check(q, k, v, **kw)


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not on PATH (the twin needs a C++17 g++)")
def test_the_prefix_kernel_builds_and_runs_on_the_twin(tmp_path):
    """The kernel's ``if`` between the prefix's keys and the batch's own (both matmuls streamed out of L0C) was
    refused by the Ascend C backend; it lowers now (at its result's store, ``lower_cube.defer_if``)."""
    from cvtile.kernels.precision import MAX_FAIL_RATIO, twin_tolerance

    rng = np.random.default_rng(6)
    q, k, v, kw = _call(rng)
    with record_launches() as rec:
        fia(q, k, v, **kw)
    d = str(tmp_path)
    res = A.emit(d, [A.Launch.of(r) for r in rec.launches], tolerance=twin_tolerance(q.dtype),
                 max_fail_ratio=MAX_FAIL_RATIO, goldens="as_run")      # the recorded run's: no pipelined compile
    A.check_project(d, res["kernels"])
    report = A.run_project(d, A.arch_of(rec.launches[0].kernel.platform))
    lines = [ln for ln in report.splitlines() if ln.strip()]
    assert lines and all(ln.startswith("PASS") for ln in lines), report
