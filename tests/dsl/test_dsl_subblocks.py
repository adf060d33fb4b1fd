"""Explicit sub-blocks: ``subblock_idx()`` makes each ``with vector():`` section run once per vector core.

The pattern is the A2/A3 one: the cube writes a result to a GM workspace, and each of the group's two vector
cores loads its half of the rows, works on it in its own UB and stores it. In program order the simulator
runs AIV 0's section, then AIV 1's; a vector core's tiles and scalars are its own, so nothing passes from one
sub-block's run to the next except through GM.
"""

from __future__ import annotations

import numpy as np

import cvtile.dsl as ct

MARK = "# <- error"


@ct.jit
def row_softmax_of_scores(q, k, ws, out, M: ct.constexpr, N: ct.constexpr, D: ct.constexpr):
    """out = softmax(q @ k.T) per block of M query rows; each AIV normalises M / subblock_num() rows."""
    b = ct.block_idx()
    with ct.cube():
        s = ct.mma(ct.load(q[ct.ds(b * M, M), 0:D]), ct.load(k[0:N, 0:D]), trans_b=True)
        ct.store(ws[ct.ds(b * M, M), 0:N], s)
    with ct.vector():
        h = M // ct.subblock_num()
        r0 = b * M + ct.subblock_idx() * h
        x = ct.load(ws[ct.ds(r0, h), 0:N])
        e = ct.exp(x - ct.rowmax(x)[:, None])
        ct.store(out[ct.ds(r0, h), 0:N], ct.cast(e / ct.rowsum(e)[:, None], ct.float16))


def _softmax_case(blocks=3, m=32, n=48, d=16, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.uniform(-1, 1, (blocks * m, d)).astype(np.float16)
    k = rng.uniform(-1, 1, (n, d)).astype(np.float16)
    ws = np.full((blocks * m, n), np.nan, np.float32)
    out = np.zeros((blocks * m, n), np.float16)
    return q, k, ws, out


def test_each_vector_core_computes_its_half_of_the_rows():
    q, k, ws, out = _softmax_case()
    row_softmax_of_scores[3](q, k, ws, out, M=32, N=48, D=16)
    s = q.astype(np.float64) @ k.astype(np.float64).T
    e = np.exp(s - s.max(axis=1, keepdims=True))
    ref = e / e.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(out.astype(np.float64), ref, rtol=2 ** -10, atol=1e-4)


def test_the_ir_shows_the_sub_block_loop_and_the_budget_counts_tiles_per_aiv():
    k = row_softmax_of_scores.compile(*_softmax_case(), M=32, N=48, D=16)
    assert k.ir.subblocks == 2
    text = str(k.ir)
    assert "[mixed, 2 sub-blocks, target=Ascend910B1]" in text
    assert "for %subblock" in text and "range(0, 2, 1)" in text
    assert "per AIV:" not in k.report.table()  # the kernel's vector tiles are already per AIV


def test_without_subblock_idx_a_section_runs_once_for_the_whole_group():
    @ct.jit
    def whole_group(x, o, M: ct.constexpr):
        with ct.cube():
            pass
        with ct.vector():
            ct.store(o[0:M], ct.load(x[0:M]) + 1.0)

    x = np.arange(8, dtype=np.float32)
    o = np.zeros(8, np.float32)
    k = whole_group.compile(x, o, M=8)
    assert k.ir.subblocks == 0 and "%subblock" not in str(k.ir)


@ct.jit
def subblock_on_the_cube(x, o):
    with ct.cube():
        i = ct.subblock_idx()  # <- error
    with ct.vector():
        ct.store(o[0:8], ct.load(x[0:8]))


@ct.jit
def subblock_in_a_vector_only_kernel(x, o):
    with ct.vector():
        r0 = ct.subblock_idx() * 8  # <- error
        ct.store(o[ct.ds(r0, 8)], ct.load(x[ct.ds(r0, 8)]))


@ct.jit
def state_across_sub_blocks(x, o):
    total = ct.block_idx()
    with ct.cube():
        a = ct.load(x[0:16, 0:16])
    with ct.vector():  # <- error
        total = total + ct.subblock_idx()
        ct.store(o[0:1, 0:8], ct.load(x[0:1, 0:8]))


@ct.jit
def tile_used_after_its_section(x, o):
    with ct.cube():
        a = ct.load(x[0:16, 0:16])
    with ct.vector():
        t = ct.load(x[ct.ds(ct.subblock_idx() * 8, 8), 0:16])
    with ct.vector():
        ct.store(o[0:8, 0:16], t)  # <- error


def _xo():
    return np.zeros((16, 16), np.float32), np.zeros((16, 16), np.float32)


def test_subblock_idx_on_the_cube_is_an_error(dsl):
    err = dsl.compile_error(subblock_on_the_cube, np.zeros(8, np.float32), np.zeros(8, np.float32))
    dsl.assert_at(err, subblock_on_the_cube, MARK, "subblock_idx() outside `with vector():`")


def test_subblock_idx_in_a_vector_only_kernel_is_an_error(dsl):
    err = dsl.compile_error(subblock_in_a_vector_only_kernel, np.zeros(16, np.float32), np.zeros(16, np.float32))
    dsl.assert_at(err, subblock_in_a_vector_only_kernel, MARK, "need a kernel with both `with cube():`",
                  "block_idx()")


def test_a_section_may_not_carry_state_between_sub_blocks(dsl):
    err = dsl.compile_error(state_across_sub_blocks, *_xo())
    dsl.assert_at(err, state_across_sub_blocks, MARK, "rebinds 'total'", "keep such state in GM")


def test_a_tile_of_a_sub_block_section_is_not_visible_after_it(dsl):
    err = dsl.compile_error(tile_used_after_its_section, *_xo())
    dsl.assert_at(err, tile_used_after_its_section, MARK, "'t' is first assigned inside the `with vector():`",
                  "pass it through GM")


@ct.inline
def _my_rows(base, h):
    return base + ct.subblock_idx() * h


@ct.jit
def halves_through_a_helper(x, o, M: ct.constexpr):
    with ct.cube():
        a = ct.load(x[0:16, 0:16])
    with ct.vector():
        h = M // ct.subblock_num()
        r0 = _my_rows(0, h)
        ct.store(o[ct.ds(r0, h), 0:16], ct.load(x[ct.ds(r0, h), 0:16]) * 2.0 + r0)


def test_an_inlined_helper_sees_its_sections_sub_block():
    x = np.arange(16 * 16, dtype=np.float32).reshape(16, 16)
    o = np.zeros_like(x)
    halves_through_a_helper[1](x, o, M=16)
    expect = x * 2 + np.repeat([0.0, 8.0], 8)[:, None]
    np.testing.assert_array_equal(o, expect)
