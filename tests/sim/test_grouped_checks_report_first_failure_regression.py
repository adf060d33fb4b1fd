"""Regression guard: the checks the generator tests in one branch report what one branch per check reported.

A generated kernel used to test each runtime check in a branch of its own, an early return per check; the
branches were about a quarter of a kernel's compile time. The generator now tests the checks made between two
memory accesses in one branch (``rt.fail_first`` records the first failing one), and moves a ``check`` that
follows a scalar load ahead of it when it reads nothing loaded there (``codegen._Gen._hoist_checks``). Pinned
here on a kernel that reads a table row field by field with asserts between the reads: the error of each broken
rule names the same line and values as before, whether it fails alone or after an earlier check of the same
branch, the first failing check wins when several fail, a check that reads a loaded value still waits for the
load, and the clean run is unchanged. The FIA decode kernel's module shows the grouping: far fewer branches
than checks.
"""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

import cvtile.dsl as ct
from cvtile.sim.rt import fail_first


@ct.jit
def reads_row(tbl, o, r, k, lim):
    with ct.vector():
        a = tbl[r, 0]  # <- first read
        assert k < lim, "k reaches lim"  # <- first assert
        b = tbl[r, 1]
        assert k < lim - 1, "k reaches lim - 1"  # <- second assert
        c = tbl[r, k]  # <- column read
        assert c < 100, "the value read is 100 or more"  # <- value assert
        ct.store(o[0:8, 0:8], ct.full((8, 8), a + b + c, ct.float32))


def _line(marker: str) -> int:
    lines, first = inspect.getsourcelines(reads_row.fn)
    return first + next(i for i, text in enumerate(lines) if marker in text)


def _error(r, k, lim, tbl=None) -> ct.SimulationError:
    tbl = np.arange(4 * 8, dtype=np.int32).reshape(4, 8) if tbl is None else tbl
    with pytest.raises(ct.SimulationError) as info:
        reads_row[1](tbl, np.zeros((8, 8), np.float32), r, k, lim)
    return info.value


def test_the_clean_run_is_unchanged():
    tbl = np.arange(4 * 8, dtype=np.int32).reshape(4, 8)
    o = np.zeros((8, 8), np.float32)
    reads_row[1](tbl, o, 2, 5, 7)
    assert np.all(o == tbl[2, 0] + tbl[2, 1] + tbl[2, 5])


@pytest.mark.parametrize("r, k, lim, marker, fragment", [
    (2, 6, 7, "<- second assert", "k reaches lim - 1"),         # the first check of the branch passes
    (2, 7, 7, "<- first assert", "k reaches lim"),              # both fail: the first one is reported
    (9, 7, 7, "<- first read", "GM index out of bounds"),       # the row's bound check precedes both
    (2, 9, 12, "<- column read", "GM index out of bounds"),     # a check of a loaded index stays after it
])
def test_the_first_failing_check_in_program_order_is_reported(r, k, lim, marker, fragment):
    err = _error(r, k, lim)
    assert str(err).startswith(f"{inspect.getsourcefile(reads_row.fn)}:{_line(marker)}: "), str(err)
    assert fragment in str(err)


def test_a_check_of_a_loaded_value_waits_for_its_load():
    tbl = np.full((4, 8), 200, np.int32)
    err = _error(1, 2, 5, tbl)
    assert str(err).startswith(f"{inspect.getsourcefile(reads_row.fn)}:{_line('<- value assert')}: "), str(err)


def test_fail_first_records_the_first_true_entry():
    err = np.zeros((2, 5), np.int64)
    site = fail_first(err, 1, (False, True, True), (1, 10, 11, 12, 2, 20, 21, 22, 3, 30, 31, 32))
    assert site == 2 and list(err[1, :4]) == [2, 20, 21, 22] and not err[0].any()
    assert fail_first(err, 0, (False, False), (1, 0, 0, 0, 2, 0, 0, 0)) == 0 and not err[0].any()


def test_the_decode_kernel_tests_its_checks_in_far_fewer_branches():
    import cvtile
    from cvtile.dsl.jit import record_launches

    q = np.zeros((2, 8, 1, 64), np.float16)
    k = np.zeros((2, 2, 1024, 64), np.float16)
    with record_launches(run=False) as rec:
        cvtile.npu_fused_infer_attention_score(q, k, k, num_heads=8, num_key_value_heads=2, input_layout="BNSD",
                                               scale=0.125)
    text = rec.launches[0].kernel.numba_source
    checks = len(re.findall(r"^ *_ck\d+ = ", text, re.M))    # each check's condition, assigned
    branches = text.count("return fail(") + text.count("return fail_first(")
    assert branches > 0 and checks >= 2 * branches, (checks, branches)


def test_a_hoisted_statement_is_emitted_once():
    from cvtile.dsl.jit import record_launches

    with record_launches(run=False) as rec:
        reads_row[1](np.zeros((4, 8), np.int32), np.zeros((8, 8), np.float32), 1, 2, 5)
    text = rec.launches[0].kernel.numba_source
    assigned = re.findall(r"^ *([A-Za-z_]\w*) = ", text[text.index("def core"):], re.M)
    assert len(assigned) == len(set(assigned)), sorted(n for n in assigned if assigned.count(n) > 1)
