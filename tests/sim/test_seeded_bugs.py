"""Seeded bugs: small kernels, each with one planted bug that checking mode must catch and name the line of.

Each case is a kernel written with ``cvtile.dsl`` whose bug is switched by a runtime argument (so the clean
and the buggy launch share one compilation), or a hand-modified IR of a clean kernel (an unfilled create, a
dropped flag or event), or a shape that does not fit UB. The buggy launch raises the expected error with
the kernel line of the bug (the line carrying ``# <- bug:<name>``); the clean launch runs under every check
and matches a numpy reference.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest

import cvtile.dsl as ct
from cvtile.dsl.ir import walk
from cvtile.sim import (CheckMode, EquivalenceError, FlagError, RaceError, UninitialisedReadError,
                        WriteOnceError)
from cvtile.sim.launch import NumbaRunner

FULL = CheckMode.full()     # the buggy runs: every check (a bug is reported by the first run, in its order)
R, C = 16, 32


def _line(marker: str) -> int:
    """The line of this file that carries ``# <- bug:<marker>``."""
    with open(__file__) as f:
        for i, text in enumerate(f, 1):
            if f"# <- bug:{marker}" in text and "ct." in text:
                return i
    raise AssertionError(marker)


def _names_line(text: str, marker: str) -> None:
    line = _line(marker)
    assert f"{os.path.basename(__file__)}:{line}:" in text or f"{os.path.basename(__file__)}:{line} " in text, text


# --------------------------------------------------------------------------------------------- the kernels

@ct.jit
def shifted_rows(x, out, shift, R: ct.constexpr, C: ct.constexpr):
    """out = 2x by row blocks; ``shift`` 1 reads one row too far (the last block leaves the tensor)."""
    n_rows = x.shape[0]
    for r0 in range(ct.block_idx() * R, n_rows, ct.block_num() * R):
        n = min(R, n_rows - r0)
        with ct.vector():
            t = ct.load(x[ct.ds(r0 + shift, R, valid=n), 0:C])                     # <- bug:oob_row
            ct.store(out[ct.ds(r0, R, valid=n), 0:C], t * 2.0)


@ct.jit
def tail_rows(x, out, slack, R: ct.constexpr, C: ct.constexpr):
    """out = x + 1; ``slack`` R drops the tail's mask (the last block reads R rows past a short tail)."""
    n_rows = x.shape[0]
    for r0 in range(ct.block_idx() * R, n_rows, ct.block_num() * R):
        n = min(R, n_rows - r0 + slack)
        with ct.vector():
            t = ct.load(x[ct.ds(r0, R, valid=n), 0:C])                             # <- bug:tail
            ct.store(out[ct.ds(r0, R, valid=n), 0:C], t + 1.0)


@ct.jit
def one_block_per_core(x, out, share, R: ct.constexpr, C: ct.constexpr):
    """Core b writes row block b; ``share`` 2 makes cores 2k and 2k+1 write the same window."""
    r0 = (ct.block_idx() // share) * R
    with ct.vector():
        t = ct.load(x[ct.ds(ct.block_idx() * R, R), 0:C])
        ct.store(out[ct.ds(r0, R), 0:C], t * 3.0)                                  # <- bug:two_cores


@ct.jit
def neighbour_read(x, tmp, out, shift, R: ct.constexpr, C: ct.constexpr):
    """Each core writes its rows of tmp and reads back rows of tmp: ``shift`` 1 reads the next core's rows
    (written by another core, with nothing ordering the two)."""
    b = ct.block_idx()
    with ct.vector():
        ct.store(tmp[ct.ds(b * R, R), 0:C], ct.load(x[ct.ds(b * R, R), 0:C]) * 2.0)         # <- bug:xcore_write
        y = ct.load(tmp[ct.ds(((b + shift) % ct.block_num()) * R, R), 0:C])                # <- bug:xcore_read
        ct.store(out[ct.ds(b * R, R), 0:C], y + 1.0)


@ct.jit
def block_sums(x, out, R: ct.constexpr, C: ct.constexpr):
    """out[r] = sum over k of x[k, r]: an accumulator carried through the k loop."""
    n_rows = x.shape[1]
    for r0 in range(ct.block_idx() * R, n_rows, ct.block_num() * R):
        with ct.vector():
            acc = ct.zeros((R, C), ct.float32)                                     # <- bug:acc_init
        for k in range(x.shape[0]):
            with ct.vector():
                acc = acc + ct.load(x[k, ct.ds(r0, R), 0:C])                       # <- bug:acc_use
        with ct.vector():
            ct.store(out[ct.ds(r0, R), 0:C], acc)


@ct.jit
def row_lse(s, lens, lse, R: ct.constexpr, C: ct.constexpr):
    """lse of each row's first lens[r] columns; a row with none gets +inf from the ``empty`` tile."""
    n_rows = s.shape[0]
    for r0 in range(ct.block_idx() * R, n_rows, ct.block_num() * R):
        with ct.vector():
            x = ct.load(s[ct.ds(r0, R), 0:C])
            lim = ct.load(lens[ct.ds(r0, R)])
            x = ct.where(ct.iota(C)[None, :] < lim[:, None], x, -ct.inf)
            m = ct.rowmax(x)
            l = ct.rowsum(ct.exp(x - ct.where(m == -ct.inf, 0.0, m)[:, None]))
            empty = ct.full((R,), ct.inf, ct.float32)                              # <- bug:empty_init
            ct.store(lse[ct.ds(r0, R)], ct.where(l > 0.0, m + ct.log(l), empty))    # <- bug:empty_lse


@ct.jit
def split_partials(x, ws_o, ntasks, splits, stride, R: ct.constexpr, C: ct.constexpr):
    """Flash-decode partials: task t is split t % splits of row t // splits and writes its partial into
    slot (t // splits) * splits + (t % splits) * stride; ``stride`` 0 sends every split to one slot."""
    for t in range(ct.block_idx(), ntasks, ct.block_num()):
        slot = (t // splits) * splits + (t % splits) * stride
        with ct.vector():
            ct.store(ws_o[slot, 0:R, 0:C], ct.load(x[t, 0:R, 0:C]) * 0.5)          # <- bug:fd_slot


@ct.jit
def covered_rows(x, out, drop, R: ct.constexpr, C: ct.constexpr):
    """out = -x by row blocks up to n_rows - drop: ``drop`` R leaves the last block unwritten."""
    n_rows = x.shape[0]
    for r0 in range(ct.block_idx() * R, n_rows - drop, ct.block_num() * R):
        n = min(R, n_rows - r0)
        with ct.vector():
            ct.store(out[ct.ds(r0, R, valid=n), 0:C], -ct.load(x[ct.ds(r0, R, valid=n), 0:C]))   # <- bug:holes


@ct.jit
def handoff(x, w, out, n, R: ct.constexpr, C: ct.constexpr):
    """s = x_i w on the cube, 2s on the vector cores: one hand-off per iteration through two workspace slots."""
    for i in range(ct.block_idx(), n, ct.block_num()):
        with ct.cube():
            s = ct.mma(ct.load(x[i, 0:R, 0:C]), ct.load(w[0:C, 0:C]))              # <- bug:mma
        with ct.vector():
            ct.store(out[i, 0:R, 0:C], s * 2.0)                                    # <- bug:slot


@ct.jit
def gm_handoff(q, k, ws, p, M: ct.constexpr, N: ct.constexpr, D: ct.constexpr):
    """The cube stores S = q k^T into a GM tensor of the kernel's own; the vector cores read it back (an
    order channel: a flag pair orders the store before the loads)."""
    for r0 in range(ct.block_idx() * M, q.shape[0], ct.block_num() * M):
        with ct.cube():
            s = ct.mma(ct.load(q[ct.ds(r0, M), 0:D]), ct.load(k[0:N, 0:D]), trans_b=True)
            ct.store(ws[ct.ds(r0, M), 0:N], s)                                     # <- bug:gm_store
        with ct.vector():
            x = ct.load(ws[ct.ds(r0, M), 0:N])                                     # <- bug:gm_load
            ct.store(p[ct.ds(r0, M), 0:N], ct.exp(x - ct.rowmax(x)[:, None]))


@ct.jit
def wide_rows(x, out, D: ct.constexpr):
    """A (16, D) fp32 accumulator carried through a loop stays in UB whole: fine at D = 64, 1 MB at
    D = 16384 (UB is 192 KB; row chunks cannot help a tile that lives across the loop)."""
    for r0 in range(ct.block_idx() * 16, x.shape[1], ct.block_num() * 16):
        with ct.vector():
            acc = ct.zeros((16, D), ct.float32)                                    # <- bug:ub
        for k in range(x.shape[0]):
            with ct.vector():
                acc = acc + ct.load(x[k, ct.ds(r0, 16), 0:D])
        with ct.vector():
            ct.store(out[ct.ds(r0, 16), 0:D], acc)


# --------------------------------------------------------------------------------------------- inputs

def _rng(seed=0):
    return np.random.default_rng(seed)


def _rows_args(n_rows=72):
    x = _rng().uniform(-1, 1, (n_rows, C)).astype(np.float32)
    return x, np.zeros_like(x)


def _handoff_args(n=6):
    rng = _rng(1)
    x = rng.uniform(-1, 1, (n, R, C)).astype(np.float16)
    w = rng.uniform(-1, 1, (C, C)).astype(np.float16)
    return x, w, np.zeros((n, R, C), np.float32), n


def _gm_handoff_args(rows=64, n=32, d=32, m=32):
    rng = _rng(2)
    q = rng.uniform(-1, 1, (rows, d)).astype(np.float16)
    k = rng.uniform(-1, 1, (n, d)).astype(np.float16)
    return q, k, np.zeros((rows, n), np.float32), np.zeros((rows, n), np.float32), dict(M=m, N=n, D=d)


# --------------------------------------------------------------------------------------------- IR seeding

_SEEDED: dict = {}


def _seeded_runner(compiled, order: str, seed: Callable, key) -> NumbaRunner:
    """One runner per seeded IR (``seed(compiled)``), reused by every test that runs it (a new runner would
    generate and compile its module again)."""
    k = (id(compiled), order, key)
    if k not in _SEEDED:
        _SEEDED[k] = NumbaRunner(compiled, order, ir=seed(compiled))
    return _SEEDED[k]


def _mark_uninit(ir, marker: str):
    """A copy of ``ir`` whose create at the ``marker`` line leaves its tile unfilled."""
    ir = copy.deepcopy(ir)
    line = _line(marker)
    hits = [op for op in walk(ir.body) if op.kind == "create" and op.loc and op.loc.line == line]
    assert hits, marker
    for op in hits:
        op.attrs["uninit"] = True
    return ir


def _drop(ir, select: Callable):
    """A copy of ``ir`` (split into programs) without the sync ops ``select(op, core)`` picks, in loops."""
    ir = copy.deepcopy(ir)
    dropped = 0
    for core, body in ir.programs().items():
        for op in walk(body):
            for b in op.blocks:
                keep = [o for o in b.ops if not (o.defn.category == "sync" and select(o, core))]
                dropped += len(b.ops) - len(keep)
                b.ops = keep
    assert dropped, "nothing dropped"
    return ir


# --------------------------------------------------------------------------------------------- the cases

@dataclass
class Case:
    name: str
    run: Callable        # run(buggy: bool, check) -> arrays to compare with want (clean run) or raises
    want: Callable       # want() -> reference arrays of the clean run
    error: type          # what the buggy run raises
    lines: tuple         # markers of the lines the message names
    texts: tuple = ()    # more substrings of the message


def _run_rows(kernel, knob_clean, knob_bug, grid=3, n_rows=72, **extra):
    def run(buggy, check):
        x, out = _rows_args(n_rows)
        kernel[grid](x, out, knob_bug if buggy else knob_clean, R=R, C=C, check=check, **extra)
        return [out]
    return run


def _handoff_compiled():
    x, w, out, n = _handoff_args()
    return handoff.compile(x, w, out, n, R=R, C=C)      # compiled once: the jit cache holds it


def _pipelined_run(compiled_of, args_of, ir_of, out_index):
    """Run a kernel in pipelined order on 2 core groups: the clean final IR, or ``ir_of(compiled)`` seeded."""
    def run(buggy, check):
        args = args_of()
        compiled = compiled_of()
        runner = _seeded_runner(compiled, "pipelined", ir_of, ir_of) if buggy else \
            compiled.runner("numba", "pipelined")
        runner.launch(2, list(args), check=check)
        return [args[out_index]]
    return run


def _handoff_run(ir_of):
    return _pipelined_run(_handoff_compiled, _handoff_args, ir_of, 2)


def _handoff_want():
    x, w, _, _ = _handoff_args()
    return [(x.astype(np.float32) @ w.astype(np.float32)) * 2]


def _gm_handoff_compiled():
    q, k, ws, p, kw = _gm_handoff_args()
    return gm_handoff.compile(q, k, ws, p, **kw)


def _gm_handoff_run(ir_of):
    return _pipelined_run(_gm_handoff_compiled, lambda: _gm_handoff_args()[:4], ir_of, 3)


def _gm_handoff_want():
    q, k, _, _, _ = _gm_handoff_args()
    s = q.astype(np.float32) @ k.astype(np.float32).T
    return [np.exp(s - s.max(axis=1, keepdims=True))]


def _block_sums_run(buggy, check):
    x = _rng(3).uniform(-1, 1, (5, 48, C)).astype(np.float32)
    out = np.zeros((48, C), np.float32)
    compiled = block_sums.compile(x, out, R=R, C=C)
    runner = _seeded_runner(compiled, "program", lambda ck: _mark_uninit(ck.ir, "acc_init"), "acc_init") if buggy \
        else compiled.runner("numba", "program")
    runner.launch(2, [x, out], check=check)
    return [out]


def _lse_inputs(empty_row: bool):
    s = _rng(4).uniform(-1, 1, (48, C)).astype(np.float32)
    lens = np.full(48, C, np.int32)
    lens[::5] = 7
    if empty_row:
        lens[17] = 0
    return s, lens, np.zeros(48, np.float32)


def _lse_run(empty_row: bool):
    def run(buggy, check):
        s, lens, lse = _lse_inputs(empty_row)
        compiled = row_lse.compile(s, lens, lse, R=R, C=C)
        runner = _seeded_runner(compiled, "program", lambda ck: _mark_uninit(ck.ir, "empty_init"), "empty_init") \
            if buggy else compiled.runner("numba", "program")
        runner.launch(2, [s, lens, lse], check=check)
        return [lse]
    return run


def _lse_want(empty_row: bool):
    s, lens, _ = _lse_inputs(empty_row)
    out = np.full(48, np.inf, np.float64)
    for r in range(48):
        if lens[r]:
            row = s[r, :lens[r]].astype(np.float64)
            out[r] = row.max() + np.log(np.exp(row - row.max()).sum())
    return [out]


def _split_run(grid):
    def run(buggy, check):
        x = _rng(5).uniform(-1, 1, (8, R, C)).astype(np.float32)
        ws = np.zeros((8, R, C), np.float32)
        split_partials[grid](x, ws, 8, 2, 0 if buggy else 1, R=R, C=C, check=check)
        return [ws]
    return run


def _split_want():
    x = _rng(5).uniform(-1, 1, (8, R, C)).astype(np.float32)
    return [x * 0.5]


def _ub_run(buggy, check):
    d = 16384 if buggy else 64
    x = _rng(6).uniform(-1, 1, (3, 32, d)).astype(np.float32)
    out = np.zeros((32, d), np.float32)
    wide_rows[2](x, out, D=d, check=check)
    return [out]


def _ub_want():
    return [_rng(6).uniform(-1, 1, (3, 32, 64)).astype(np.float32).sum(axis=0)]


def _free_wait(o, core):
    return core == "aic" and o.kind == "flag_wait" and o.attrs["name"].endswith("_FREE")


def _free_pair(o, core):
    """The free flag's sets and waits in the loop (the credits before it and the drain after it stay)."""
    return o.attrs.get("name") == "C1V1_FREE"


def _order_pair(compiled):
    """The order channel's ready pair (the set after the cube's store, the wait before the vector's load)."""
    order = [ch for ch in compiled.compilation.final.channels if ch.kind == "order"]
    assert order, "gm_handoff has no order channel"
    ready = order[0].flags["ready"]
    return _drop(compiled.compilation.final, lambda o, core: o.kind in ("flag_set", "flag_wait")
                 and o.attrs["id"] == ready)


CASES = [
    Case("oob_row", _run_rows(shifted_rows, 0, 1, n_rows=72), lambda: [_rows_args()[0] * 2], ct.SimulationError,
         ("oob_row",), ("GM dim 0 access",)),
    Case("tail_not_masked", _run_rows(tail_rows, 0, R, n_rows=72), lambda: [_rows_args()[0] + 1],
         ct.SimulationError, ("tail",), ("leaves [0, bound)",)),
    Case("two_cores_one_window", _run_rows(one_block_per_core, 1, 2, grid=4, n_rows=4 * R),
         lambda: [_rows_args(4 * R)[0] * 3], RaceError, ("two_cores",), ("race: core ", " writes out[",
                                                                             "launch blocks are never ordered")),
    Case("cross_core_read_after_write", lambda buggy, check: _neighbour(buggy, check), lambda: _neighbour_want(),
         RaceError, ("xcore_write", "xcore_read"), ("launch blocks are never ordered",)),
    Case("uninitialised_accumulator", _block_sums_run,
         lambda: [_rng(3).uniform(-1, 1, (5, 48, C)).astype(np.float32).sum(axis=0)], UninitialisedReadError,
         ("acc_use", "acc_init"), ("of tile 'acc', which no op has written",)),
    Case("slot_reused_too_early", _handoff_run(lambda ck: _drop(ck.compilation.final, _free_wait)), _handoff_want,
         RaceError, ("slot",), ("workspace slot", "C1V1", "no cross-core flag")),
    Case("missing_flag_pair", _gm_handoff_run(_order_pair), _gm_handoff_want, RaceError,
         ("gm_store", "gm_load"), ("ws[", "no cross-core flag")),
    Case("ub_overflow_at_a_rare_shape", _ub_run, _ub_want, ct.BudgetError, ("ub",), ("UB",)),
    Case("flash_decode_slot_two_cores", _split_run(2), _split_want, RaceError, ("fd_slot",),
         ("writes ws_o[", "launch blocks are never ordered")),
    Case("flash_decode_slot_one_core", _split_run(1), _split_want, WriteOnceError, ("fd_slot",),
         ("written more than once by one launch (first ws_o[0, 0, 0])",)),
    Case("lse_of_an_empty_row", _lse_run(True), lambda: _lse_want(True), UninitialisedReadError,
         ("empty_lse", "empty_init"), ("reads element (1) of tile 'empty'", "(core 1)")),   # row 17 = row 1 of block 1
    Case("holes_in_a_pure_output", _run_rows(covered_rows, 0, R, n_rows=72), lambda: [-_rows_args()[0]],
         WriteOnceError, ("holes",), ("are never written (first out[64, 0])",)),
    pytest.param(Case("dropped_event", _handoff_run(lambda ck: _drop(ck.compilation.final, lambda o, core: core
                                                                      == "aiv" and o.kind == "event_set"
                                                                      and o.attrs["id"] == 0)),
                      _handoff_want, FlagError, ("slot",), ("intra-core event",)), marks=pytest.mark.slow,
                 id="dropped_event"),
]
CASE_IDS = [c.name if isinstance(c, Case) else c.values[0].name for c in CASES]

def _neighbour_args():
    x = _rng(7).uniform(-1, 1, (3 * R, C)).astype(np.float32)
    return x, np.zeros_like(x), np.zeros_like(x)


def _neighbour(buggy, check):
    x, tmp, out = _neighbour_args()
    neighbour_read[3](x, tmp, out, 1 if buggy else 0, R=R, C=C, check=check)
    return [out]


def _neighbour_want():
    x, _, _ = _neighbour_args()
    return [x * 2 + 1]


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_the_seeded_bug_is_caught_naming_its_line(case):
    with pytest.raises(case.error) as info:
        case.run(True, FULL)
    text = str(info.value)
    for marker in case.lines:
        _names_line(text, marker)
    for t in case.texts:
        assert t in text, text


def _clean(case, mode):
    got = case.run(False, mode)
    for g, w in zip(got, case.want()):
        assert np.allclose(g, w, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_the_clean_kernel_passes_every_check(case):
    _clean(case, CheckMode())


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_the_clean_kernel_passes_full_checking(case):
    """Equivalence too: each clean kernel also runs in the other order, bit for bit the same."""
    _clean(case, FULL)


def test_the_empty_row_bug_is_invisible_without_an_empty_row():
    """The unfilled ``empty`` tile is read only by rows with no column (``where`` reads the arm it selects):
    the same seeded kernel passes every check on inputs without such a row, and is caught on one."""
    got = _lse_run(False)(True, FULL)
    assert np.allclose(got[0], _lse_want(False)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_a_slot_reused_too_early_is_an_equivalence_error_without_the_race_check():
    """With the race check off, a slot reused too early (the free flag's set and wait dropped, so no flag is
    left over) still fails: pipelined order differs from program order bit for bit (the element and both
    values named)."""
    run = _handoff_run(lambda ck: _drop(ck.compilation.final, _free_pair))
    with pytest.raises(EquivalenceError) as info:
        run(True, CheckMode(races=False, uninit=False, equivalence=True))
    text = str(info.value)
    assert "out: " in text and "differ between pipelined order and program order" in text
    _names_line(text, "slot")


# --------------------------------------------------------------------------------------------- flags left over

def _seeded_handoff_error(select, mode):
    x, w, out, n = _handoff_args()
    compiled = _handoff_compiled()
    with pytest.raises(FlagError) as info:
        NumbaRunner(compiled, "pipelined", ir=_drop(compiled.compilation.final, select)).launch(1, [x, w, out, n],
                                                                                                   check=mode)
    return str(info.value)


def test_leftover_flags_are_a_flag_error_naming_the_set():
    """The free waits dropped (races off, so the slot reuse is not what is reported): the AIVs' credits are
    left on the AIC's counters when the kernel ends."""
    text = _seeded_handoff_error(_free_wait, CheckMode(races=False))
    assert "flags are left set at the end of the kernel" in text and "aic counter from aiv0 of flag id 1" in text
    assert "flag id 1 is set in the aiv program at" in text
    _names_line(text, "slot")


@pytest.mark.slow
def test_a_deadlock_is_a_flag_error():
    text = _seeded_handoff_error(lambda o, core: core == "aic" and o.kind == "flag_set" and o.attrs["name"] == "C1V1",
                                 CheckMode())
    assert "deadlock in core group 0" in text and "aiv0 waits on flag C1V1 (id 0)" in text


@pytest.mark.slow
def test_an_event_set_never_waited_is_a_flag_error():
    """Dropping the waits of one intra-core event leaves its sets outstanding when the program ends."""
    text = _seeded_handoff_error(lambda o, core: core == "aiv" and o.kind == "event_wait" and o.attrs["id"] == 0
                                 and o.attrs["event"] == "V_MTE3", CheckMode())
    assert "intra-core event V_MTE3 (id 0) is set here and not waited before the aiv program ends" in text
    _names_line(text, "slot")
