"""The FIA kernels in pipelined order: the AIC and AIV programs the passes produce (split, hand-offs through
workspace slots, flags, software pipelining) give bitwise the outputs of program order.

Each case is checked against the golden in program order first (``fia_kit.check``), then run in
pipelined order and compared bit for bit. A pipelined specialisation compiles two programs (the AIC's and
the AIV's), so every case here is slow or wide (run by hand: ``python -m pytest -m "slow or wide"``; each
case compiles its own specialisation, minutes per case). In the default tier the FIA kernel and its
flash-decode combine run in pipelined order through the Ascend C twin test
(``tests/ascendc/test_emit_cube.py::test_fia_runs_on_twin[Ascend910B1-prefill]``: the simulator's pipelined
outputs against the built twin's), and ``tests/sim/test_pipelined_order.py`` holds the smaller kernels'
bitwise pipelined-against-program checks.
"""

from __future__ import annotations

import pytest

A2, A5 = "Ascend910B1", "Ascend950"


def case(id_, marks=(), **kw):
    return pytest.param(kw, id=id_, marks=marks)


DEFAULT = [
    # decode with flash-decode: the attention kernel writes partials, the combine merges them (D 128: the
    # specialisation of the Ascend C twin test of tests/ascendc/test_emit.py, so the two share its compiles)
    case("a2-decode-flash-decode", marks=pytest.mark.slow, layout="BNSD", b=1, n=8, nkv=1, s1=1, s2=8192, d=128, kv_lens=(5000,)),
]

SLOW = [
    # prefill, causal (band), S1 and S2 not multiples of the blocks, GQA fold
    case("a2-prefill-causal-gqa", layout="BNSD", b=2, n=8, nkv=2, s1=200, s2=700, sparse=3, q_lens=(200, 77),
         kv_lens=(700, 300)),
    case("a5-prefill", target=A5, layout="BNSD", b=1, n=4, nkv=4, s1=256, s2=512, sparse=3),
]

WIDE = [
    case("a2-tnd-varlen", layout="TND", b=3, n=8, nkv=2, d=64, q_lens=(150, 0, 60), kv_lens=(600, 300, 0)),
    case("a2-bsnd-mask-rows", layout="BSND", b=2, n=8, nkv=2, s1=64, s2=600, mask="rows"),
    case("a2-bsh-bf16-band", layout="BSH", dtype="bfloat16", b=1, n=4, nkv=4, s1=300, s2=300, sparse=4, pre=50,
         nxt=20),
    case("a2-decode-kv0", layout="BSH", b=2, n=8, nkv=1, s1=1, s2=8192, kv_lens=(8192, 0)),
    case("a5-decode-g64", target=A5, layout="BNSD", b=1, n=64, nkv=1, s1=1, s2=4096),
]


@pytest.mark.parametrize("params", DEFAULT)
def test_fia_pipelined_order_is_bitwise_program_order(fia_kit, params):
    fia_kit.check_pipelined(fia_kit.Case(**params))


@pytest.mark.slow
@pytest.mark.parametrize("params", SLOW)
def test_fia_pipelined_order_is_bitwise_program_order_more(fia_kit, params):
    fia_kit.check_pipelined(fia_kit.Case(**params))


@pytest.mark.wide
@pytest.mark.parametrize("params", WIDE)
def test_fia_pipelined_order_is_bitwise_program_order_wide(fia_kit, params):
    fia_kit.check_pipelined(fia_kit.Case(**params))
