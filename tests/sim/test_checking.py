"""Checking mode: the ``CheckMode`` settings, what unchecked launches keep, and sessions.

The seeded-bug suite (test_seeded_bugs.py) shows each check catching a planted bug (and the flag and event
reports); this file pins the mode's interface and the rules around it: the unchecked module is untouched,
a checked launch computes the same bits, write-once is judged over a ``checked_launches()`` session, and
what is not supported is a typed error naming the parameter.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import cvtile.dsl as ct
from cvtile.sim import CheckMode, CheckModeError, WriteOnceError, checked_launches
from cvtile.sim.codegen import generate

R, C, N = 16, 32, 6


@ct.jit
def twice(x, out, R: ct.constexpr, C: ct.constexpr):
    for r0 in range(ct.block_idx() * R, x.shape[0], ct.block_num() * R):
        with ct.vector():
            ct.store(out[ct.ds(r0, R), 0:C], ct.load(x[ct.ds(r0, R), 0:C]) * 2.0)        # <- store


@ct.jit
def half_rows(x, out, first, R: ct.constexpr, C: ct.constexpr):
    """Writes the row blocks of parity ``first`` (0: even, 1: odd)."""
    for r0 in range((2 * ct.block_idx() + first) * R, x.shape[0], 2 * ct.block_num() * R):
        with ct.vector():
            ct.store(out[ct.ds(r0, R), 0:C], ct.load(x[ct.ds(r0, R), 0:C]) + 1.0)         # <- half


@ct.jit
def pipe(x, w, out, n, R: ct.constexpr, C: ct.constexpr):
    for i in range(ct.block_idx(), n, ct.block_num()):
        with ct.cube():
            s = ct.mma(ct.load(x[i, 0:R, 0:C]), ct.load(w[0:C, 0:C]))
        with ct.vector():
            ct.store(out[i, 0:R, 0:C], s * 2.0)                                            # <- use


@ct.jit
def swap_carry(x, out, R: ct.constexpr, C: ct.constexpr):
    """Two loop-carried tiles swapped every iteration (the loop's yield copies them through temporaries)."""
    with ct.vector():
        a = ct.zeros((R, C), ct.float32)                                               # <- unfilled
        b = ct.load(x[0:R, 0:C])
    for k in range(3):
        with ct.vector():
            a, b = b, a
    with ct.vector():
        ct.store(out[0:R, 0:C], a * 2.0 + b)                                           # <- reader


@ct.jit
def paged_store(cache, bt, out, S: ct.constexpr, D: ct.constexpr):
    """Reads a paged cache through the block table and (wrongly) writes into the table itself."""
    with ct.vector():
        rows = ct.load(cache.paged(bt[0], S)[0:S, 0:D])
        ct.store(out[0:S, 0:D], rows)
        ct.store(bt[0, 0:2], ct.iota(2))


def _rows(n_rows=96):
    x = np.random.default_rng(0).uniform(-1, 1, (n_rows, C)).astype(np.float32)
    return x, np.zeros_like(x)


def _pipe_args():
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, (N, R, C)).astype(np.float16)
    w = rng.uniform(-1, 1, (C, C)).astype(np.float16)
    return x, w, np.zeros((N, R, C), np.float32), N


@pytest.fixture(scope="module")
def pipe_compiled():
    x, w, out, n = _pipe_args()
    return pipe.compile(x, w, out, n, R=R, C=C)


# ------------------------------------------------------------------------------------------- the settings

def test_check_mode_is_a_frozen_documented_settings_object():
    mode = CheckMode()
    assert (mode.uninit, mode.write_once, mode.races, mode.flags, mode.equivalence) == (True, True, True, True,
                                                                                         False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        mode.races = False
    assert CheckMode.full() == CheckMode(equivalence=True) and CheckMode.of(True) == CheckMode.full()
    assert CheckMode.of(None) is None and CheckMode.of(False) is None and CheckMode.of(mode) is mode
    for field in ("uninit", "write_once", "races", "flags", "equivalence"):
        assert field in CheckMode.__doc__ and "Cost" in CheckMode.__doc__


def test_a_bad_check_argument_is_a_typed_error_naming_it():
    x, out = _rows()
    with pytest.raises(CheckModeError) as info:
        twice[2](x, out, R=R, C=C, check="yes")
    assert info.value.param == "check" and "CheckMode" in str(info.value)


def test_the_unchecked_module_has_no_checking_code_and_the_checked_one_is_another_module():
    x, out = _rows()
    ck = twice.compile(x, out, R=R, C=C)
    plain = generate(ck.ir).text
    assert plain == ck.runner("numba").source
    checked = ck.runner("numba").variant(CheckMode()).generated.text
    for word in ("shadow", "gm_rows", "checking runtime"):     # the shadow tuple, the store's record, the stamp
        assert word not in plain and word in checked


def test_a_checked_launch_computes_the_same_bits():
    x, out = _rows()
    twice[3](x, out, R=R, C=C)
    checked = np.zeros_like(out)
    twice[3](x, checked, R=R, C=C, check=CheckMode())
    assert np.array_equal(out.view(np.uint32), checked.view(np.uint32))


@pytest.mark.slow
def test_check_true_runs_both_orders_and_computes_the_same_bits(pipe_compiled):
    x, w, plain, n = _pipe_args()
    pipe_compiled.launch(2, [x, w, plain, n], order="pipelined")
    piped = np.zeros_like(plain)
    pipe_compiled.launch(2, [x, w, piped, n], order="pipelined", check=True)   # every check, equivalence too
    assert np.array_equal(plain.view(np.uint32), piped.view(np.uint32))
    assert ("numba", "program") in pipe_compiled._runners     # the other order ran as well


def test_an_unwritten_tile_is_found_after_loop_carried_swaps():
    """Regression: the "written" shadow travels with a tile through the yield's temporaries, so after three
    swaps the unfilled tile (now ``b``) is still caught at its reader."""
    import copy

    from cvtile.dsl.ir import walk
    from cvtile.sim import UninitialisedReadError
    from cvtile.sim.launch import NumbaRunner

    x = np.ones((R, C), np.float32)
    out = np.zeros_like(x)
    ck = swap_carry.compile(x, out, R=R, C=C)
    swap_carry[1](x, out, R=R, C=C, check=CheckMode())
    assert np.all(out == 2.0)
    ir = copy.deepcopy(ck.ir)
    for op in walk(ir.body):
        if op.kind == "create":
            op.attrs["uninit"] = True
    with pytest.raises(UninitialisedReadError) as info:
        NumbaRunner(ck, "program", ir=ir).launch(1, [x, out], check=CheckMode())
    text = str(info.value)
    assert "of tile 'b', which no op has written" in text and "# <- reader" in text and "# <- unfilled" in text


def test_grid_beyond_what_the_entries_hold_is_refused():
    x, out = _rows(16)
    with pytest.raises(CheckModeError) as info:
        twice[20000](x, out, R=R, C=C, check=CheckMode())
    assert info.value.param == "grid"


def test_a_tensor_stored_into_and_read_as_a_block_table_is_refused_naming_it():
    cache = np.zeros((4, 8, 16), np.float32)
    bt = np.array([[0, 1, 2, 3]], np.int32)
    out = np.zeros((32, 16), np.float32)
    paged_store[1](cache, bt, out, S=32, D=16)          # unchecked, the kernel runs
    with pytest.raises(CheckModeError) as info:
        paged_store[1](cache, bt, out, S=32, D=16, check=CheckMode())
    assert info.value.param == "bt" and "block table" in str(info.value)


# ------------------------------------------------------------------------------------------- sessions

def test_a_session_judges_write_once_over_its_launches():
    x, out = _rows()
    with checked_launches(CheckMode()) as session:        # two launches, each writes half: no hole
        half_rows[2](x, out, 0, R=R, C=C)
        half_rows[2](x, out, 1, R=R, C=C)
    assert session.launches == 2 and np.allclose(out, x + 1)
    with pytest.raises(WriteOnceError) as info:            # alone, one launch leaves the other half
        half_rows[2](x, np.zeros_like(x), 0, R=R, C=C, check=CheckMode())
    text = str(info.value)
    assert "48 of 96 elements" not in text and "elements of out are never written (first out[16, 0])" in text
    assert "# <- half" in text                                # the store's line, quoted
    with pytest.raises(WriteOnceError) as info:            # the same half twice in one session
        with checked_launches():
            half_rows[2](x, out, 0, R=R, C=C)
            half_rows[2](x, out, 0, R=R, C=C)
    assert "written by this launch of half_rows and by an earlier launch of half_rows" in str(info.value)


def test_a_tensor_a_later_launch_reads_is_not_a_pure_output():
    x, out = _rows()
    tmp = np.zeros_like(x)
    with checked_launches(CheckMode()):
        half_rows[2](x, tmp, 0, R=R, C=C)       # tmp: half written ...
        twice[2](tmp, out, R=R, C=C)            # ... and read: an intermediate, its holes are not reported
    assert np.allclose(out[:R], (x[:R] + 1) * 2)


def test_an_explicit_check_false_inside_a_session_runs_unchecked():
    x, out = _rows()
    with checked_launches(CheckMode()) as session:
        half_rows[2](x, out, 0, R=R, C=C, check=False)
    assert session.launches == 0


# ------------------------------------------------------------------------------------------- the workspace shadow

def _ws_model(state, access):
    """The workspace rules element by element (what ``shadow.ws_rows`` keeps per slot row): returns
    (kind, element) of the first conflict, or None, and updates ``state`` (per element: the last write and
    each role's last read, as (epoch, clock, role))."""
    from cvtile.sim.shadow import RAW, UNINIT, WAR, WW

    W, Rd, epoch = state["W"], state["R"], state["epoch"]
    base, n0, n1, cols, role, clk, write, vc = (access[k] for k in ("base", "n0", "n1", "cols", "role", "clk",
                                                                     "write", "vc"))

    def late(x):
        return x is not None and x[0] == epoch and x[2] != role and x[1] > vc[role][x[2]]

    for r in range(n0):
        o = base + r * cols
        cells = range(o, o + n1)
        prefix = o % cols == 0 and n1 <= cols
        if write:   # a prefix row is checked for write-write first, then per reading role; others per element
            order = [[(i, W[i], WW) for i in cells]] + [[(i, Rd[q][i], WAR) for i in cells] for q in range(3)] \
                if prefix else [[(i, W[i], WW)] + [(i, Rd[q][i], WAR) for q in range(3)] for i in cells]
            for group in order:
                for i, x, kind in group:
                    if late(x):
                        return kind, i
            for i in cells:
                W[i] = (epoch, clk, role)
        else:
            for i in cells:
                if W[i] is None or W[i][0] != epoch:
                    return UNINIT, i
                if not prefix and late(W[i]):
                    return RAW, i
            for i in cells:
                if prefix and late(W[i]):
                    return RAW, i
            for i in cells:
                Rd[role][i] = (epoch, clk, role)
    return None


def test_workspace_shadow_rows_equal_the_per_element_model():
    """Random accesses (column prefixes that grow and shrink, windows that are not prefixes, three roles,
    clocks, group epochs): the row summaries give the verdicts and the per-element state of the model."""
    from cvtile.sim.shadow import _WS_CLK_MASK, shadow_entry, ws_rows

    cols, rows = 8, 6
    n = cols * rows
    rng = np.random.default_rng(11)
    for trial in range(40):
        ws, we = np.zeros((2, rows), np.int32), np.zeros(n, np.int32)
        rs, re = np.zeros((3, 2, rows), np.int32), np.zeros((3, n), np.int32)
        info = np.zeros(7, np.int64)
        info[0] = 1
        state = {"W": [None] * n, "R": [[None] * n for _ in range(3)], "epoch": 1}
        clocks = [1, 1, 1]
        row = 0
        for step in range(60):
            if rng.random() < 0.05:                       # the worker's next core group
                info[0] += 1
                state["epoch"] += 1
            role = int(rng.integers(3))
            clocks[role] += int(rng.integers(0, 2))
            vc = [[_WS_CLK_MASK if q == p else int(rng.integers(0, clocks[q] + 1)) for q in range(3)]
                  for p in range(3)]
            write = bool(rng.random() < 0.5)
            if write or rng.random() < 0.8:               # reads of rows just written stay meaningful
                row = int(rng.integers(rows))
            n0 = int(rng.integers(1, rows - row + 1))
            if rng.random() < 0.8:
                start, n1 = 0, int(rng.integers(0, cols + 1))
            else:
                start = int(rng.integers(1, cols))
                n1 = int(rng.integers(0, cols - start + 1))
            base = row * cols + start
            access = dict(base=base, n0=n0, n1=n1, cols=cols, role=role, clk=clocks[role], write=write, vc=vc)
            want = _ws_model(state, access)
            err = np.zeros((1, 10), np.int64)
            me = shadow_entry(0, role, clocks[role], 7)
            got = ws_rows(ws, we, rs, re, info, 0, cols, base, cols, n0, n1, me, np.array(vc, np.int64), 0, role, err,
                          write, True, True, 7)
            if want is None:
                assert got == 0, (trial, step, access, err)
            else:
                assert got == 1 and (int(err[0, 8]), int(err[0, 6])) == want, (trial, step, access, want, err)
                break
            for i in range(n):                            # the same per-element state
                r, c = divmod(i, cols)
                x = ws[1, r] if c < ws[0, r] else we[i]
                w = state["W"][i]
                assert (x == 0 and w is None) or (w is not None and (x >> 24, (x >> 2) & _WS_CLK_MASK, x & 3) == w), \
                    (trial, step, i)
