"""Flash decode: rows split across cores, partials merged by ``fia_fd_combine``, against the golden.

FD happens when the tiling cuts one (batch, kv head) row block's KV range across cores: decode (or
a short prefill) with long KV and few row blocks. Every case asserts ``tile_fia(...).fd`` (and that
the combine has vector work) so the test really exercises the combine, then checks the result like the
grid does (``fia_kit.check``: P-rounded float64 golden, upstream tolerances, empty-row promises).
The default tier keeps the regression and the short-KV check here; the default decode case is slow (flash
decode against the golden also runs in the default tier through the sink, post-quant, TND split-fuse and
shared-prefix tests).
All FD cases are fp16: with bf16 the pieces round P against their own maxima, which alone exceeds the
0.5 % budget against any golden rounding against the row's final max (see test_fia_kernel_grid.py).
"""

from __future__ import annotations

import numpy as np
import pytest

A2, A5 = "Ascend910B1", "Ascend950"


def case(id_, marks=(), **kw):
    return pytest.param(kw, id=id_, marks=marks)


DEFAULT = [
    # decode, one (b, n2) row of 8 query heads over 8192 positions: cut into KV pieces (legacy IFA class)
    case("a2-decode-g8-s8k", marks=pytest.mark.slow, layout="BNSD", b=1, n=8, nkv=1, s1=1, s2=8192, kv_lens=(5000,)),
]

SLOW = [
    # decode, long KV, 8 (b, n2) rows on 24 cube cores: each row cut into KV pieces
    case("a2-decode-n32-nkv8-s32k-d128", layout="BNSD", b=1, n=32, nkv=8, s1=1, s2=32768, d=128),
    # S1G fold, and a kv-length-0 batch next to a split one (legacy lse -3.4e38 through the combine launch)
    case("a2-decode-bsh-kv0", layout="BSH", b=2, n=8, nkv=1, s1=1, s2=8192, kv_lens=(8192, 0)),
    # prefill rows split too (S1 64, one kv head per query head, 8192 positions); right-down causal: the
    # last pieces of early rows are fully masked; lse off (the combine's other specialisation)
    case("a2-prefill-g1-sparse3", layout="BNSD", b=1, n=8, nkv=8, s1=64, s2=8192, sparse=3, lse=False),
    case("a2-prefill-ntd-empties", layout="NTD", b=2, n=8, nkv=8, s1=64, s2=8192, q_lens=(64, 0),
         kv_lens=(8192, 0)),
    # the legacy IFA tiling (MHA decode, D 256): S2 base 32768 / 6 pieces
    case("a2-ifa-d256", layout="BSH", b=1, n=8, nkv=8, s1=1, s2=32768, d=256),
    # arch35: IFA decode with G 64 (no PFA merge) gets FD
    case("a5-decode-g64", target=A5, layout="BNSD", b=1, n=64, nkv=1, s1=1, s2=4096),
]


def _run_fd(fia_kit, params):
    c = fia_kit.Case(**params)
    t = fia_kit.tiling(c)
    assert t.fd and t.fd_tasks and any(w.pieces for w in t.fd_vector_work), t.explain()
    assert all(ft.splits >= 2 for ft in t.fd_tasks)
    r = fia_kit.check(c)
    return r


@pytest.mark.parametrize("params", DEFAULT)
def test_fia_flash_decode_default(fia_kit, params):
    _run_fd(fia_kit, params)


@pytest.mark.wide
@pytest.mark.parametrize("params", SLOW)
def test_fia_flash_decode_grid(fia_kit, params):
    _run_fd(fia_kit, params)


def test_fd_off_for_the_same_row_on_short_kv(fia_kit):
    """The FD decision is the tiling's: the default case's shape with 256 KV positions is not split."""
    c = fia_kit.Case(layout="BNSD", b=1, n=8, nkv=1, s1=1, s2=256)
    assert not fia_kit.tiling(c).fd
    long = fia_kit.tiling(fia_kit.Case(**DEFAULT[0].values[0]))
    assert long.kv_splits >= 2 and long.extras["legacy_ifa"]
    np.testing.assert_array_equal(sorted({ft.b for ft in long.fd_tasks}), [0])


def test_ifa_fd_part_not_whole_blocks_regression(fia_kit, monkeypatch):
    """Bug: the legacy IFA route's KV parts (ceil(S2 / kv_splits) positions) that are not a whole number of S2
    blocks got no core work (long KV, e.g. 65536 / 6 parts over 8192-position blocks). Each part now starts
    anywhere and ends in a partial block, as the IFA kernel's per-part loop walks it. The S2 base is lowered to
    128 here (the tiling's rule clips it to the part of 683 positions) so a small MHA D 256 decode has parts
    starting mid-block and ending in a partial one."""
    from cvtile.tiling import plan_legacy

    real = plan_legacy.ifa_s_inner
    monkeypatch.setattr(plan_legacy, "ifa_s_inner", lambda **kw: (min(real(**kw)[0], 128), "lowered by the test"))
    c = fia_kit.Case(layout="BSH", b=1, n=8, nkv=8, s1=1, s2=2048, d=256, kv_lens=(2000,))
    t = fia_kit.tiling(c)
    assert t.extras["legacy_ifa"] and t.s2_base == 128 and t.kv_splits == 3, t.explain()
    parts = [x.tasks[0] for x in t.cores if x.tasks and x.tasks[0].n2 == 0]
    assert [(p.kv_start, p.kv_end, p.s2_hi) for p in parts] == \
        [(0, 683, 6), (683, 1366, 6), (1366, 2000, 5)]
    fia_kit.check(c)
