"""ct.gather(table, idx): result[i] = table[idx[i]] from a rank-1 GM view (a tensor argument, t[b], t.merge(0),
a ds slice) for rank-1 and rank-2 integer index tiles; every index is bound-checked (the out-of-bounds error
names the kernel line); checking mode shadows the table reads (a race with another block's store is reported);
misuse is a typed compile error. (Program vs pipelined order of a mixed kernel with a gather in its vector stage:
test_dsl_math.py, whose mixed kernel also gathers.)"""

from __future__ import annotations

import numpy as np
import pytest

import cvtile.dsl as ct
from cvtile.sim.checking import CheckMode, RaceError

N = 16


@ct.jit
def gathers(t, t2, idx, o, o2, b, s, N: ct.constexpr):
    with ct.vector():
        i = ct.load(idx[0:N])
        ct.store(o[0:N], ct.gather(t, i))                                   # <- oob
        ct.store(o2[0, 0:N], ct.gather(t2.merge(0), (i % 32) * 2))
        ct.store(o2[1, 0:N], ct.gather(t2[b], i % 8))
        ct.store(o2[2, 0:N], ct.gather(t2[b, ct.ds(s, 4)], i % 4))
        m = ct.gather(t2[b], (i % 8)[:, None] + ct.iota(N)[None, :] % 3)     # rank 2
        ct.store(o2[3:3 + N, 0:N], m)


def _args():
    t = (np.arange(100) * 0.5).astype(np.float16)
    t2 = np.arange(64, dtype=np.float32).reshape(4, 16)
    idx = np.array([3, 7, 0, 99, 5, 1, 2, 4, 11, 13, 17, 19, 23, 29, 31, 37], np.int32)
    return t, t2, idx, np.zeros(N, np.float16), np.zeros((3 + N, N), np.float32)


def test_gather_reads_table_elements_for_every_view_and_rank(dsl):
    t, t2, idx, o, o2 = _args()
    gathers[1](t, t2, idx, o, o2, 2, 5, N=N)
    assert dsl.same_bits(o, t[idx])
    assert np.array_equal(o2[0], t2.reshape(-1)[(idx % 32) * 2])
    assert np.array_equal(o2[1], t2[2][idx % 8])
    assert np.array_equal(o2[2], t2[2, 5:9][idx % 4])
    assert np.array_equal(o2[3:], t2[2][(idx % 8)[:, None] + np.arange(N)[None, :] % 3])


@pytest.mark.parametrize("bad,extent", [(100, 100), (-1, 100)])
def test_an_index_outside_the_table_raises_naming_the_line(dsl, bad, extent):
    t, t2, idx, o, o2 = _args()
    idx[5] = bad
    with pytest.raises(ct.SimulationError) as info:
        gathers[1](t, t2, idx, o, o2, 2, 5, N=N)
    dsl.assert_at(info.value, gathers, "# <- oob", "gather: an index lies outside the table",
                  f"index={bad}", f"extent={extent}")


def test_the_extent_of_a_slice_bounds_the_index(dsl):
    t, t2, idx, o, o2 = _args()
    with pytest.raises(ct.SimulationError) as info:   # t2[b, ds(13, 4)] reaches past the row's 16 elements
        gathers[1](t, t2, idx, o, o2, 2, 13, N=N)
    assert "gather: an index lies outside the table" in str(info.value)
    assert "ct.gather(t2[b, ct.ds(s, 4)], i % 4)" in str(info.value)


@ct.jit
def racy(buf, idx, o, N: ct.constexpr):
    b = ct.block_idx()
    with ct.vector():
        ct.store(buf[ct.ds(b * N, N)], ct.full((N,), 1.0, ct.float32))   # <- write
        i = ct.load(idx[0:N])
        ct.store(o[b, 0:N], ct.gather(buf, i))                           # <- read


def test_checking_mode_counts_gathered_elements_as_gm_reads():
    buf = np.zeros(2 * N, np.float32)
    own = np.arange(N, dtype=np.int32)          # block 0 reads what block 0 wrote: ordered
    o = np.zeros((1, N), np.float32)
    racy[1](buf, own, o, N=N, check=CheckMode(races=True))
    assert np.all(o == 1.0)
    other = (np.arange(N, dtype=np.int32) + N) % (2 * N)   # block 0 reads block 1's elements
    with pytest.raises(RaceError) as info:
        racy[2](np.zeros(2 * N, np.float32), other, np.zeros((2, N), np.float32), N=N, check=CheckMode(races=True))
    text = str(info.value)
    assert "ct.gather(buf, i)" in text and "ct.store(buf[ct.ds(b * N, N)]" in text, text


# ------------------------------------------------------------------ typed errors
@ct.jit
def rank2_table(t, idx, o, N: ct.constexpr):
    with ct.vector():
        ct.store(o[0:N], ct.gather(t, ct.load(idx[0:N])))  # <- error


@ct.jit
def float_idx(t, idx, o, N: ct.constexpr):
    with ct.vector():
        ct.store(o[0:N], ct.gather(t, ct.load(t[0:N])))  # <- error


@ct.jit
def cube_gather(t, idx, o, N: ct.constexpr):
    with ct.cube():
        g = ct.gather(t, ct.load(idx[0:N]))  # <- error


@ct.jit
def tile_table(t, idx, o, N: ct.constexpr):
    with ct.vector():
        i = ct.load(idx[0:N])
        ct.store(o[0:N], ct.gather(ct.load(t[0:N]), i))  # <- error


@pytest.mark.parametrize("kernel,table,fragment", [
    (rank2_table, np.zeros((4, 16), np.float32), "gather(table=...): table must be a rank-1 GM view, got rank 2"),
    (float_idx, np.zeros(16, np.float32), "gather's idx must be an integer tile, got float32"),
    (cube_gather, np.zeros(16, np.float32), "gather is a vector op; it is not allowed inside `with cube():`"),
    (tile_table, np.zeros(16, np.float32), "gather(table=...): table must be a rank-1 GM view"),
], ids=["rank2-table", "float-idx", "cube-scope", "tile-table"])
def test_gather_misuse_is_a_compile_error_at_the_line(dsl, kernel, table, fragment):
    err = dsl.compile_error(kernel, table, np.zeros(16, np.int32), np.zeros(16, np.float32), N=16)
    dsl.assert_at(err, kernel, "# <- error", fragment)
