"""ct.device_print(name, value): on the simulator each call prints one line with the name, the core (block, and
the AIV in a core group's program), the enclosing loops' indices and the value (a scalar, or a tile's valid
values), in program order and in pipelined order (where each AIV prints its own rows); dead-code elimination
keeps it; the emitted Ascend C holds a ``// device_print("name", ...)`` comment in its place."""

from __future__ import annotations

import numpy as np
import pytest

import cvtile.dsl as ct
from cvtile.dsl.ir import walk


@ct.jit
def printed(x, w, out, n, R: ct.constexpr, C: ct.constexpr):
    for t in range(ct.block_idx(), n, ct.block_num()):
        with ct.cube():
            s = ct.mma(ct.load(x[t, 0:R, 0:C]), ct.load(w[0:C, 0:C]))
            ct.device_print("step", t * 10)
        with ct.vector():
            y = s * 2.0
            ct.device_print("rowsum", ct.rowsum(y))     # used by nothing else: kept all the same
            ct.store(out[t, 0:R, 0:C], y)


def _args(n=2):
    return np.ones((n, 4, 16), np.float16), np.ones((16, 16), np.float16), np.zeros((n, 4, 16), np.float32)


def test_program_order_prints_name_core_loop_index_and_valid_values(capsys):
    printed[1](*_args(), 2, R=4, C=16)
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["device_print 'step' block 0 t 0 : 0", "device_print 'rowsum' block 0 t 0 : [512. 512. 512. 512.]",
                     "device_print 'step' block 0 t 1 : 10",
                     "device_print 'rowsum' block 0 t 1 : [512. 512. 512. 512.]"]


def test_pipelined_order_prints_each_aivs_rows_with_its_subblock(capsys):
    printed[2](*_args(3), 3, R=4, C=16, order="pipelined", serial=True)
    lines = capsys.readouterr().out.splitlines()
    assert sorted(ln for ln in lines if "'step'" in ln) == [f"device_print 'step' block {b} t {t} : {10 * t}"
                                                           for b, t in ((0, 0), (0, 2), (1, 1))]
    vec = [ln for ln in lines if "'rowsum'" in ln]
    assert len(vec) == 6 and all(ln.endswith(": [512. 512.]") for ln in vec)
    assert "device_print 'rowsum' block 1 sub 1 t 1 : [512. 512.]" in vec


def test_device_print_survives_the_passes_and_is_a_comment_in_ascend_c():
    ck = printed.compile(*_args(), 2, R=4, C=16)
    final = [op for op in walk(ck.compilation.final.body) if op.kind == "device_print"]
    assert len(final) == 2 and {op.scope for op in final} == {"cube", "vector"}
    src = ck.ascendc
    assert '// device_print("step", ' in src and '// device_print("rowsum", tile)' in src


@ct.jit
def printed_outside(o, n, N: ct.constexpr):
    ct.device_print("n", n)  # <- error
    with ct.vector():
        ct.store(o[0:N], ct.full((N,), 1.0, ct.float32))


def test_device_print_outside_a_scope_is_a_compile_error(dsl):
    err = dsl.compile_error(printed_outside, np.zeros(16, np.float32), 3, N=16)
    dsl.assert_at(err, printed_outside, "# <- error", "device_print is a tile op")
