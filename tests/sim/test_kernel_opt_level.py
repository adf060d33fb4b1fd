"""The simulator's kernels compile at ``$CVTILE_OPT`` (``sim/optlevel.py``), not at numba's process level.

Checked: the level reaches LLVM's pass builders during a kernel's compile and numba's own level is back after
it; the level is in the module text (two levels, two modules, never one cache entry for both); a kernel
compiled at level 1 and at level 3 gives the same bits, its exp, log, sqrt and rsqrt included (the runtime
helpers that carry fast-math flags); a level the simulator does not take is a ValueError naming ``CVTILE_OPT``.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba.core import codegen as numba_codegen
from numba.core import config

import cvtile.dsl as ct
from cvtile.sim import optlevel
from cvtile.sim.launch import NumbaRunner

R, C, N = 32, 64, 3


@ct.jit
def scores_math_f32(x, w, out, n, scale, R: ct.constexpr, C: ct.constexpr):
    """One mma per block, then the runtime's fast-math helpers (exp, log, sqrt, rsqrt: their fast-math flags
    let LLVM contract and reassociate, so they are where a level could change a bit), stored in fp32 so that no
    rounding to fp16 hides a last-bit difference."""
    for i in range(ct.block_idx(), n, ct.block_num()):
        with ct.cube():
            s = ct.mma(ct.load(w[0:C, 0:C]), ct.load(x[i, 0:C, 0:R]))
        with ct.vector():
            t = s * scale
            e = ct.exp(t - ct.rowmax(t)[:, None])
            a = ct.abs(t) + 0.5
            ct.store(out[i, 0:C, 0:R], e + ct.log(a) * ct.sqrt(a) + ct.rsqrt(a))


def _args():
    rng = np.random.default_rng(5)
    x = rng.uniform(-2, 2, (N, C, R)).astype(np.float16)
    w = rng.uniform(-2, 2, (C, C)).astype(np.float16)
    return x, w, np.zeros((N, C, R), np.float32)


@pytest.fixture
def seen(monkeypatch):
    """The optimisation levels LLVM's pass builders are asked for while the test runs (numba's cheap round asks
    for 0 whatever the level)."""
    levels = []
    real = numba_codegen.CPUCodegen._pass_builder

    def spy(self, **kwargs):
        levels.append(int(kwargs.get("opt", config.OPT)))
        return real(self, **kwargs)

    monkeypatch.setattr(numba_codegen.CPUCodegen, "_pass_builder", spy)
    return levels


def _run_at(level, monkeypatch, seen):
    monkeypatch.setenv("CVTILE_OPT", str(level))
    x, w, out = _args()
    runner = NumbaRunner(scores_math_f32.compile(x, w, out, N, 0.125, R=R, C=C), "program")
    seen.clear()
    runner.launch(2, [x, w, out, N, 0.125])
    return runner.source, out


def test_kernels_compile_at_their_level_with_the_same_bits(monkeypatch, tmp_path, seen):
    monkeypatch.setenv("CVTILE_CACHE_DIR", str(tmp_path))
    process_level = int(config.OPT)
    text1, out1 = _run_at(1, monkeypatch, seen)
    assert 1 in seen and 3 not in seen, seen
    text3, out3 = _run_at(3, monkeypatch, seen)
    assert 3 in seen, seen
    assert int(config.OPT) == process_level
    assert "\nOPT_LEVEL = 1 " in text1 and "\nOPT_LEVEL = 3 " in text3
    assert text1.replace("OPT_LEVEL = 1 ", "OPT_LEVEL = 3 ") == text3
    assert np.array_equal(out1.view(np.uint32), out3.view(np.uint32))
    assert np.isfinite(out1).all() and out1.any()


def test_a_module_compiles_at_the_level_its_text_names_not_at_the_current_environments(monkeypatch, tmp_path, seen):
    """The level is read once, when the module is generated; a later change of ``CVTILE_OPT`` (or a child process
    with another environment compiling the same text) does not make the text and its compile disagree."""
    monkeypatch.setenv("CVTILE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("CVTILE_OPT", "2")
    x, w, out = _args()
    runner = NumbaRunner(scores_math_f32.compile(x, w, out, N, 0.125, R=R, C=C), "program")
    assert "\nOPT_LEVEL = 2 " in runner.source
    monkeypatch.setenv("CVTILE_OPT", "3")
    runner.launch(2, [x, w, out, N, 0.125])
    assert 2 in seen and 3 not in seen, seen


@pytest.mark.parametrize("raw", ["0", "4", "max", "fast"])
def test_a_level_the_simulator_does_not_take_names_cvtile_opt(monkeypatch, raw):
    monkeypatch.setenv("CVTILE_OPT", raw)
    with pytest.raises(ValueError, match=r"CVTILE_OPT='.*'.*one of 1, 2, 3"):
        optlevel.kernel_opt_level()


def test_numbas_level_is_restored_when_a_compile_raises(monkeypatch):
    monkeypatch.setenv("CVTILE_OPT", "2")
    before = int(config.OPT)
    with pytest.raises(RuntimeError):
        with optlevel.compiling_kernels() as level:
            assert level == 2 and int(config.OPT) == 2
            raise RuntimeError("a failing compile")
    assert int(config.OPT) == before
