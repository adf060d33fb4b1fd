"""Pipelined order: the split programs run as threads that meet only at flags, on real workspace slots.

Results equal program order bit for bit; and the bugs a wrong sync would be on the chip are caught, as tests
that seed them into the programs the passes produced (a copy of the final IR, run by its own runner):
a removed set (deadlock report), a dropped WAR flag (a slot reused too early: the result changes), more than
15 outstanding sets (the counter saturates), a flag id beyond the hardware's, a preload depth beyond the
slots (both compile-time errors).
"""

from __future__ import annotations

import copy
import dataclasses
import os
import re

import numpy as np
import pytest

import cvtile.dsl as ct
from cvtile.dsl.ir import walk
from cvtile.dsl.passes import run_pipeline
from cvtile.sim.launch import NumbaRunner
from cvtile.tiling.platform import get_platform

A2 = get_platform("Ascend910B1")
N, R, C = 12, 16, 32     # 12 tiles: fewer than the 15 sets a flag holds


@ct.jit
def oneway(x, w, out, n, R: ct.constexpr, C: ct.constexpr):
    for i in range(ct.block_idx(), n, ct.block_num()):
        with ct.cube():
            s = ct.mma(ct.load(x[i, 0:R, 0:C]), ct.load(w[0:C, 0:C]))     # <- mma
        with ct.vector():
            ct.store(out[i, 0:R, 0:C], s * 2.0)                             # <- use


def _args(n=N):
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, (n, R, C)).astype(np.float16)
    w = rng.uniform(-1, 1, (C, C)).astype(np.float16)
    return x, w, np.zeros((n, R, C), np.float32)


def _want(x, w):
    return (x.astype(np.float32) @ w.astype(np.float32)) * 2


@pytest.fixture(scope="module")
def compiled():
    x, w, out = _args()
    return oneway.compile(x, w, out, N, R=R, C=C)


def _run(compiled, ir=None, grid=1, n=N):
    x, w, out = _args(n)
    runner = NumbaRunner(compiled, "pipelined", ir=ir)
    runner.launch(grid, [x, w, out, n])
    return x, w, out


def _seeded(compiled, drop):
    """A copy of the final IR without the flag ops ``drop(op, core)`` selects (inside the loops)."""
    ir = copy.deepcopy(compiled.compilation.final)
    for core, body in ir.programs().items():
        for op in walk(body):
            for b in op.blocks:
                b.ops = [o for o in b.ops if not (o.defn.category == "sync" and drop(o, core))]
    return ir


def test_pipelined_equals_program_order_and_the_golden(compiled):
    x, w, out = _args()
    oneway[1](x, w, out, N, R=R, C=C)
    _, _, piped = _run(compiled)
    assert np.array_equal(out.view(np.uint32), piped.view(np.uint32))
    assert np.allclose(piped, _want(x, w), rtol=1e-5, atol=1e-5)


def test_the_ir_after_insert_sync_shows_both_programs_with_their_flags(compiled):
    text = compiled.ir_after("insert_sync")
    assert "program aic {" in text and "program aiv {" in text
    assert "flag_set{id=0, name='C1V1'" in text and "flag_wait{id=1, name='C1V1_FREE'" in text
    ch = compiled.compilation.final.channels
    assert [(c.name, c.depth, c.flags) for c in ch] == [("C1V1", 2, {"ready": 0, "free": 1})]
    assert compiled.compilation.final.workspace_bytes == 2 * R * C * 4


def test_seeded_removed_set_is_a_deadlock_report_naming_the_flag_and_lines(compiled):
    ir = _seeded(compiled, lambda o, core: core == "aic" and o.kind == "flag_set" and o.attrs["name"] == "C1V1")
    with pytest.raises(ct.SimulationError) as info:
        _run(compiled, ir)
    text = str(info.value)
    assert "deadlock in core group 0" in text
    assert "aiv0 waits on flag C1V1 (id 0)" in text and "aiv1 waits on flag C1V1 (id 0)" in text
    line = _line("# <- use")
    assert f"{os.path.basename(__file__)}:{line}" in text.replace(os.path.dirname(__file__) + "/", "")
    assert "its set is in the nowhere: no program sets it" in text


def test_seeded_dropped_war_flag_reuses_a_slot_too_early(compiled):
    """Without the slot-free flag the AIC writes all 12 tiles before an AIV reads one: two slots, so the AIVs
    read the last two tiles over and over."""
    ir = _seeded(compiled, lambda o, core: o.attrs.get("name") == "C1V1_FREE")
    x, w, out = _run(compiled, ir)
    want = _want(x, w)
    bad = ~np.isclose(out, want, rtol=1e-5, atol=1e-5)
    assert bad.any()
    assert np.allclose(out[0], want[N - 2], rtol=1e-5, atol=1e-5)   # slot 0 last held tile 18


def test_seeded_missing_wait_saturates_the_flag_counter(compiled):
    ir = _seeded(compiled, lambda o, core: core == "aiv" and o.kind == "flag_wait" and o.attrs["name"] == "C1V1")
    with pytest.raises(ct.SimulationError) as info:
        _run(compiled, ir, n=20)
    text = str(info.value)
    # the AIVs no longer wait for the tiles, so they free slots faster than the AIC can take them back
    assert re.search(r"flag C1V1(_FREE)? \(id [01]\) is set a 16th time without a wait: the hardware counter "
                     r"saturates at 15 \(core 0 \((aic|aiv0)\)\)", text), text
    assert f":{_line('# <- use')}:" in text


@ct.jit
def six_handoffs(x, out, R: ct.constexpr, C: ct.constexpr):
    with ct.cube():
        a = ct.load(x[0:R, 0:C])
        s0 = ct.mma(a, a, trans_b=True)
        s1 = ct.mma(a, a, trans_b=True)
        s2 = ct.mma(a, a, trans_b=True)
        s3 = ct.mma(a, a, trans_b=True)
        s4 = ct.mma(a, a, trans_b=True)
        s5 = ct.mma(a, a, trans_b=True)
    with ct.vector():
        ct.store(out[0:R, 0:R], s0 + s1 + s2 + s3 + s4 + s5)


def test_more_flags_than_the_hardware_has_is_a_compile_time_error():
    x = np.zeros((16, 32), np.float16)
    with pytest.raises(ct.CompilationError) as info:
        six_handoffs.compile(x, np.zeros((16, 16), np.float32), R=16, C=32)
    text = str(info.value)
    assert "needs 12 cross-core flags for its 6 hand-offs" in text and "the hardware has 11 (ids 0-10)" in text


@ct.jit
def roundtrip(x, w, out, n, R: ct.constexpr, C: ct.constexpr):
    """C1: s = x_i w; V1: p = fp16(s / 2); C2: o = p w; V2: acc += o: the attention loop's shape."""
    b = ct.block_idx()
    with ct.vector():
        acc = ct.zeros((R, C), ct.float32)
    for i in range(0, n):
        with ct.cube():
            s = ct.mma(ct.load(x[b, i, 0:R, 0:C]), ct.load(w[0:C, 0:C]))
        with ct.vector():
            p = ct.cast(s * 0.5, ct.float16)
        with ct.cube():
            o = ct.mma(p, ct.load(w[0:C, 0:C]))
        with ct.vector():
            acc = acc + o
    with ct.vector():
        ct.store(out[b, 0:R, 0:C], acc)


def _roundtrip_args(groups=2, n=7):
    rng = np.random.default_rng(2)
    x = rng.uniform(-1, 1, (groups, n, R, C)).astype(np.float16)
    w = rng.uniform(-0.5, 0.5, (C, C)).astype(np.float16)
    return x, w, np.zeros((groups, R, C), np.float32), n


def test_a_pipelined_loop_equals_program_order_bitwise():
    x, w, out, n = _roundtrip_args()
    roundtrip[2](x, w, out, n, R=R, C=C)
    piped = np.zeros_like(out)
    roundtrip[2](x, w, piped, n, R=R, C=C, order="pipelined")
    assert np.array_equal(out.view(np.uint32), piped.view(np.uint32))
    ck = roundtrip.compile(x, w, out, n, R=R, C=C)
    text = ck.ir_after("pipeline")
    assert text.count("pipelined(2 stages)") == 2 and "if stage 0" in text and "if stage 1" in text
    assert [c.name for c in ck.compilation.final.channels] == ["C1V1", "V1C2", "C2V2"]


@ct.jit
def roundtrip_scratch(x, w, ws, out, n, R: ct.constexpr, C: ct.constexpr):
    """``roundtrip`` with the accumulator in the core's GM scratch rows ws[b] (FIA's GM_ACC)."""
    b = ct.block_idx()
    with ct.vector():
        ct.store(ws[b, 0:R, 0:C], ct.zeros((R, C), ct.float32))
    for i in range(0, n):
        with ct.cube():
            s = ct.mma(ct.load(x[b, i, 0:R, 0:C]), ct.load(w[0:C, 0:C]))
        with ct.vector():
            p = ct.cast(s * 0.5, ct.float16)
        with ct.cube():
            o = ct.mma(p, ct.load(w[0:C, 0:C]))
        with ct.vector():
            ct.store(ws[b, 0:R, 0:C], ct.load(ws[b, 0:R, 0:C]) + o)
    with ct.vector():
        ct.store(out[b, 0:R, 0:C], ct.load(ws[b, 0:R, 0:C]))


@ct.jit
def scratch_to_cube(x, w, ws, out, n, R: ct.constexpr, C: ct.constexpr):
    """``roundtrip`` whose vector first writes GM rows the cube reads (the 950 dequant kernel's shape): the
    flags order those accesses within an iteration, nothing across iterations."""
    b = ct.block_idx()
    with ct.vector():
        acc = ct.zeros((R, C), ct.float32)
    for i in range(0, n):
        with ct.vector():
            ct.store(ws[b, 0:R, 0:C], ct.cast(ct.load(x[b, i, 0:R, 0:C]) * 0.5, ct.float16))
        with ct.cube():
            s = ct.mma(ct.load(ws[b, 0:R, 0:C]), ct.load(w[0:C, 0:C]))
        with ct.vector():
            p = ct.cast(s * 0.5, ct.float16)
        with ct.cube():
            o = ct.mma(p, ct.load(w[0:C, 0:C]))
        with ct.vector():
            acc = acc + o
    with ct.vector():
        ct.store(out[b, 0:R, 0:C], acc)


def test_a_loop_with_its_own_gm_scratch_is_pipelined_with_the_scratch_in_one_stage():
    """regression: a loop that stores to GM rows of its own (FIA's accumulator at a tall M) was left
    unpipelined; its scratch accesses now share the latest stage, and the result is bitwise roundtrip's."""
    x, w, out, n = _roundtrip_args()
    ref = np.zeros_like(out)
    roundtrip[2](x, w, ref, n, R=R, C=C)
    ws = np.zeros((2, R, C), np.float32)
    for order in ("program", "pipelined"):
        got = np.zeros_like(out)
        roundtrip_scratch[2](x, w, ws, got, n, R=R, C=C, order=order)
        assert np.array_equal(got.view(np.uint32), ref.view(np.uint32)), order
    ck = roundtrip_scratch.compile(x, w, ws, out, n, R=R, C=C)
    text = ck.ir_after("pipeline")
    assert text.count("pipelined(2 stages)") == 2
    loop = next(op for op in walk(ck.compilation.final.programs()["aiv"]) if op.kind == "for")
    stage1 = loop.blocks[0].ops
    scratch = [op for op in walk(loop.blocks[0]) if op.kind in ("load", "store") and
               op.windows["window"].tensor.name == "ws"]
    assert len(scratch) == 2
    stage_ifs = [op for op in stage1 if op.kind == "if" and any(s in walk(op.blocks[0]) for s in scratch)]
    assert len(stage_ifs) == 1, "the scratch load and store run in one stage"


def test_a_loop_whose_gm_rows_the_other_program_reads_is_not_pipelined():
    """The cube's reads of GM rows the vector wrote are ordered by a GM-order channel within the iteration only:
    such a loop stays as written."""
    x, w, out, n = _roundtrip_args()
    ws = np.zeros((2, R, C), np.float16)
    ck = scratch_to_cube.compile(x, w, ws, out, n, R=R, C=C)
    assert "pipelined(" not in ck.ir_after("pipeline")


def test_preload_depth_beyond_the_slots_is_a_compile_time_error():
    x, w, out, n = _roundtrip_args()
    ck = roundtrip.compile(x, w, out, n, R=R, C=C)
    one_slot = dataclasses.replace(A2, preload_depth=1)
    with pytest.raises(ct.CompilationError) as info:
        run_pipeline(copy.deepcopy(ck.compilation.frontend), one_slot)
    text = str(info.value)
    assert "has up to 2 tiles in flight, but it has 1 workspace slot(s): the preload depth exceeds the slots" \
        in text


@pytest.mark.parametrize("grid", [1, 3])
def test_pipelined_order_on_several_core_groups(compiled, grid):
    x, w, out = _args()
    oneway[grid](x, w, out, N, R=R, C=C, order="pipelined")
    assert np.allclose(out, _want(x, w), rtol=1e-5, atol=1e-5)


def _line(marker: str) -> int:
    """The line of the kernel source that carries ``marker``."""
    with open(__file__) as f:
        for i, text in enumerate(f, 1):
            if marker in text and "ct." in text:
                return i
    raise AssertionError(marker)


def test_unknown_order_is_refused(compiled):
    x, w, out = _args()
    with pytest.raises(ValueError, match="order must be one of program, pipelined"):
        oneway[1](x, w, out, N, R=R, C=C, order="fast")



def test_insert_sync_balances_every_event_of_every_program():
    """Each intra-core event (HardEvent, id) is set as often as it is waited, per program (the CPU twin checks
    the same pairing at run time on the emitted code)."""
    from collections import Counter

    x, w, out, n = _roundtrip_args()
    final = roundtrip.compile(x, w, out, n, R=R, C=C).compilation.final
    assert final.sync_counts["events"] > 0 and final.sync_counts["barriers"] > 0
    for core, body in final.programs().items():
        sets, waits = Counter(), Counter()
        for op in walk(body):
            if op.kind in ("event_set", "event_wait"):
                (sets if op.kind == "event_set" else waits)[(op.attrs["event"], op.attrs["id"])] += 1
        assert sets and sets == waits, (core, sets, waits)
        kinds = {e for e, _ in sets}
        assert ("MTE2_V" in kinds and "V_MTE3" in kinds) if core == "aiv" else ("M_FIX" in kinds), (core, kinds)
