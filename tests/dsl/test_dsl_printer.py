"""The IR printer: one op per line with results, kind{attrs}(operands) : result types, and on the right the
scope, pipe and source location; nested blocks indented, loop-carried values shown as iter(...), constants
inline. The key lines of a small mixed kernel are checked (patterns use \\d+ for value numbers), plus
stability: values are numbered in the order they appear, so the same kernel compiled twice prints the same
text, and ``ir_after`` (printed from a second trace when first asked) matches the compiled IR.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import cvtile.dsl as ct


@ct.jit
def attn_step(q, k, o, scale, n, M: ct.constexpr, N: ct.constexpr, D: ct.constexpr):
    with ct.cube():
        q1 = ct.load(q[0:M, 0:D])
    with ct.vector():
        m = ct.full((M,), -ct.inf, ct.float32)
    for j in range(0, n, N):
        with ct.cube():
            s = ct.mma(q1, k[ct.ds(j, N, valid=min(N, n - j)), 0:D], trans_b=True)
        with ct.vector():
            m = ct.maximum(m, ct.rowmax(s * scale))
    if n > 0:
        with ct.vector():
            m = m * 2.0
    with ct.vector():
        ct.store(o[0:M], m)


ARGS = (np.zeros((16, 32), np.float16), np.zeros((64, 32), np.float16), np.zeros(16, np.float32), 0.5, 40)
CONSTS = dict(M=16, N=16, D=32)


@pytest.fixture(scope="module")
def text():
    return str(attn_step.compile(*ARGS, **CONSTS).ir)


def _line(text, pattern):
    hits = [line for line in text.splitlines() if re.search(pattern, line)]
    assert len(hits) == 1, f"{pattern!r} matched {len(hits)} lines of\n{text}"
    return hits[0]


def _where(dsl, marker):
    return rf"test_dsl_printer\.py:{dsl.line_of(attn_step, marker)}$"


def test_header_lists_params_kind_target_and_location(text, dsl):
    head = text.splitlines()[0]
    assert re.match(r"kernel attn_step\[mixed, target=Ascend910B1\]\(%q\.\d+: gm<float16, rank 2>, "
                    r"%k\.\d+: gm<float16, rank 2>, %o\.\d+: gm<float32, rank 1>, %scale\.\d+: float32, %n\.\d+: int64, "
                    r"M=16, N=16, D=32\)  # ", head)
    assert re.search(_where(dsl, "def attn_step("), head)


def test_tile_op_lines_show_types_scope_pipe_and_line(text, dsl):
    load = _line(text, r"= load\(")
    assert re.match(r"  %q1\.\d+ = load\(%q\.\d+\[0 \+: 16, 0 \+: 32\]\) : tile<16x32 float16 @L1>\s+# cube   MTE2 ",
                    load)
    assert re.search(_where(dsl, "q1 = ct.load("), load)
    create = _line(text, r"= create")
    assert re.match(r"  %m\.\d+ = create\{nvalid=0\}\(-inf\) : tile<16 float32 @UB>\s+# vector V    ", create)
    store = _line(text, r"^\s*store\(")
    assert re.match(r"  store\(%o\.\d+\[0 \+: 16\], %m\.\d+\)\s+# vector MTE3 ", store)
    assert re.search(_where(dsl, "ct.store(o[0:M], m)"), store)
    # short lines are padded so that the scope/pipe/location column lines up
    # the comment column is 74, or two past the op's text when value ids (global counters: six digits once a
    # worker has built 100,000 values) make it longer
    for line, tag in ((load, "# cube"), (create, "# vector"), (store, "# vector")):
        assert line.index(tag) == max(74, len(line[:line.index(tag)].rstrip()) + 2), line


def test_loop_lines_show_iter_values_and_an_indented_body(text, dsl):
    head = _line(text, r"= for ")
    assert re.match(r"  %m\.\d+ = for %j\.\d+ in range\(0, %n\.\d+, 16\) iter\(%m\.\d+ = %m\.\d+\) \{\s+# -      S    ",
                    head)
    assert re.search(_where(dsl, "for j in range(0, n, N):"), head)
    mma = _line(text, r"= mma")
    assert re.match(r"    %s\.\d+ = mma\{trans_b=True\}\(%q1\.\d+, %k\.\d+\[%j\.\d+ \+: 16 valid %\d+, 0 \+: 32\]\) "
                    r": tile<16x16 float32 @L0C>\s+# cube   M    ", mma)
    staged = _line(text, r"copy\{staged=True\}")
    assert re.match(r"    %q1\.\d+ = copy\{staged=True\}\(%q1\.\d+\) : tile<16x32 float16 @L0A>\s+# cube   MTE1 ", staged)
    lines = text.splitlines()
    start = lines.index(head)
    assert lines[start + 1].startswith("    ")                       # the body is indented one level deeper
    close = next(i for i in range(start, len(lines)) if lines[i] == "  }")
    assert re.match(r"    yield\(%m\.\d+\)\s+# -      S    ", lines[close - 1])


def test_handoff_line_shows_its_route(text, dsl):
    hand = _line(text, r"= handoff")
    assert re.match(r"    %s\.\d+ = handoff\{src='L0C', dst='UB', route='FIX L0C->GM\(workspace\), MTE2 GM->UB'\}"
                    r"\(%s\.\d+\) : tile<16x16 float32 @UB>  # vector FIX  ", hand)
    assert re.search(_where(dsl, "m = ct.maximum(m, ct.rowmax(s * scale))"), hand)


def test_branch_lines_show_both_arms(text):
    lines = text.splitlines()
    head = _line(text, r" = if ")
    assert re.match(r"  %m\.\d+ = if %\d+ \{\s+# -      S    ", head)
    i = lines.index(head)
    assert re.match(r"    %m\.\d+ = ewise\.mul\{dtype='float32'\}\(%m\.\d+, 2\.0\) : tile<16 float32 @UB>", lines[i + 1])
    assert re.match(r"    yield\(%m\.\d+\)", lines[i + 2])
    assert lines[i + 3] == "  } else {"
    assert re.match(r"    yield\(%m\.\d+\)", lines[i + 4]) and lines[i + 5] == "  }"


def test_constants_print_inline_not_as_ops(text):
    assert "const" not in text
    assert re.search(r"sbin\.min\(16, %\d+\) : int64", text)


def test_printing_is_stable(text):
    again = str(ct.jit(attn_step.fn).compile(*ARGS, **CONSTS).ir)   # a fresh JITFunction: compiled anew
    assert again == text                                            # (its values have other ids)
    assert str(attn_step.compile(*ARGS, **CONSTS).ir) == text


def test_ir_after_prints_the_compiled_ir_when_asked():
    ck = ct.jit(attn_step.fn).compile(*ARGS, **CONSTS)
    assert ck.compilation.texts is None            # nothing printed while compiling
    assert ck.ir_after("simplify") == ck.ir_text   # printed from a second trace: the same text
    assert ck.ir_after("insert_sync") == str(ck.compilation.final)
    assert ck.ir_after("frontend").startswith("kernel attn_step[")
