"""Regression: an int8 -> half ``Cast`` was lowered with ``RoundMode::CAST_RINT``, which the vector unit does not
take for that exact conversion (only ``CAST_NONE``).

Found by building the Ascend 950 KV-dequant kernel (``cvtile emit fia --kv-dtype int8 --target Ascend950
--run``): the arch35 twin stopped at its first dequantisation with "Cast: int8_t -> half does not support
RoundMode::CAST_RINT on arch35". An exact conversion (int8 / uint8 to a float, a float to a wider float) now
takes ``CAST_NONE``. (``test_through_gm_on_the_twin.py`` runs that kernel's shape of work on the twin.)
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import cvtile.dsl as ct
from cvtile.dsl import ascendc as A
from cvtile.dsl.jit import record_launches

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None,
                               reason="g++ is not on PATH (the Ascend C checks need a C++17 g++)")


@ct.jit
def _widen(x, out, M: ct.constexpr, N: ct.constexpr):
    with ct.vector():
        ct.store(out[0:M, 0:N], ct.cast(ct.load(x[0:M, 0:N]), ct.float16) * 0.5)


@pytest.mark.parametrize("target", ["Ascend910B1", "Ascend950"])
def test_an_exact_int8_to_half_cast_takes_cast_none(target):
    x = np.arange(-128, 128, dtype=np.int8).reshape(8, 32)
    out = np.zeros((8, 32), np.float16)
    ck = _widen.on(target).compile(x, out, M=8, N=32)
    src = A.lowered(ck).source
    assert "RoundMode::CAST_NONE" in src and "CAST_RINT" not in src


@needs_gxx
@pytest.mark.parametrize("target", ["Ascend910B1", "Ascend950"])
def test_int8_to_half_runs_on_the_twin(twin, target):
    x = np.arange(-128, 128, dtype=np.int8).reshape(8, 32)
    out = np.zeros((8, 32), np.float16)
    with record_launches() as rec:
        _widen.on(target)[1](x, out, M=8, N=32)
    np.testing.assert_array_equal(out, (x.astype(np.float32) * 0.5).astype(np.float16))
    twin([A.Launch.of(r) for r in rec.launches])
