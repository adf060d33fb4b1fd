"""``ct.dequant`` in the Ascend C backend: the store or hand-off that reads it is one Fixpipe with ``quantPre``
DEQF16 and the scale's fp32 bits as ``deqScalar``, the dequant itself has no code, and the CPU twin's Fixpipe
(the documented conversion: the int32 in fp32 times the scale cut to its high 19 bits, rounded to half) gives the
simulator's bits. Cases: a hand-off whose mma result fits the L0C pieces, one streamed out piece by piece at its
store, and a store to GM straight from the cube. Skips when no g++ is on PATH.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from cvtile.dsl import ascendc as A
from cvtile.dsl.jit import record_launches

pytestmark = pytest.mark.skipif(shutil.which("g++") is None,
                                reason="g++ is not on PATH (the Ascend C checks need a C++17 g++)")


def _kernels():
    spec = importlib.util.spec_from_file_location(
        "dequant_kernels", Path(__file__).resolve().parents[1] / "dsl" / "test_dequant.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("name, N, target", [
    ("scores_dequant", 128, "Ascend910B1"),           # 16 x 128 int32: stays in the mma's L0C pieces
    ("scores_dequant", 2048, "Ascend910B1"),          # 16 x 2048: Fixpiped out piece by piece at its store
    ("dequant_stored_by_cube", 256, "Ascend910B1"),   # the cube stores the dequantised block to GM itself
    pytest.param("scores_dequant", 2048, "Ascend950", marks=pytest.mark.slow),
])
def test_dequant_is_a_deqf16_fixpipe_on_the_twin(twin, name, N, target):
    mod = _kernels()
    M, D = 16, 64
    q, k = mod._inputs(M, N, D, seed=4)
    deq = float(np.float32(7.3e-4))     # mantissa bits below the fixpipe's 10: the twin must drop them too
    out = np.zeros((M, N), np.float16)
    with record_launches() as rec:
        getattr(mod, name).on(target)[1](q, k, out, deq, M=M, N=N, D=D)
    np.testing.assert_array_equal(out.view(np.uint16), mod.reference(q, k, deq).view(np.uint16))
    src = twin([A.Launch.of(r) for r in rec.launches], 0.0)
    assert len(re.findall(r"\.quantPre = QuantMode_t::DEQF16;", src)) >= 1
    assert re.search(r"\.deqScalar = cvtDeqScalar\(", src)
    assert "F322F16" not in src and "Cast(" not in src     # no fp32 step and no vector cast: the fixpipe converts
