"""The Ascend C of the vector math builtins, the integer tile operators, gather and device_print: a kernel using
every one of them passes the declaration-header syntax check (both arches, AIC and AIV macro sets) and runs on the
CPU twin with the simulator's results bit for bit (float32 and float16); what the backend does not lower is a
typed error naming the line. Skips when no g++ is on PATH."""

from __future__ import annotations

import shutil

import ml_dtypes
import numpy as np
import pytest

import cvtile.dsl as ct
from cvtile.dsl import ascendc as A

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None,
                               reason="g++ is not on PATH (the Ascend C checks need a C++17 g++)")


@ct.jit
def every_new_op(x, y, ix, o, oi, R: ct.constexpr, C: ct.constexpr):
    with ct.vector():
        a = ct.load(x[0:R, 0:C])
        b = ct.load(y[0:R, 0:C])
        i = ct.load(ix[0:R, 0:C])
        ct.store(o[0, 0:R, 0:C], ct.tanh(a))
        ct.store(o[1, 0:R, 0:C], ct.sigmoid(a))
        ct.store(o[2, 0:R, 0:C], ct.erf(a))
        ct.store(o[3, 0:R, 0:C], ct.floor(a * 3.0))
        ct.store(o[4, 0:R, 0:C], ct.pow(b, a))
        ct.store(o[5, 0:R, 0:C], a ** 3 + a ** 0)
        ct.store(o[6, 0:R, 0:C], b ** 0.5)
        ct.store(o[7, 0:R, 0:C], 2.0 ** a + ct.exp(a))
        ct.store(o[8, 0:R, 0:C], ct.gather(y.merge(0), i & 511) + ct.gather(x[3], i & 63))
        ct.store(oi[0, 0:R, 0:C], (i >> 2) + (i << 3) + ((i & 12) | (i ^ 5)))
        ct.store(oi[1, 0:R, 0:C], (i // 128) + (i % 7) + i ** 2)
        ct.device_print("i", i)


def _args(dt):
    rng = np.random.default_rng(0)
    x = rng.uniform(-3, 3, (8, 64)).astype(dt)
    y = rng.uniform(0.1, 3, (8, 64)).astype(dt)
    ix = rng.integers(-1000, 1000, (8, 64)).astype(np.int32)
    return [x, y, ix, np.zeros((9, 8, 64), dt), np.zeros((2, 8, 64), np.int32)]


@needs_gxx
@pytest.mark.parametrize("dt", [np.float32, pytest.param(np.float16, marks=pytest.mark.slow)], ids=["f32", "f16"])
def test_every_new_op_checks_and_runs_on_the_twin_bitwise(tmp_path, dt):
    args = _args(dt)
    ck = every_new_op.compile(*args, R=8, C=64)
    src = A.lowered(ck).source
    for call in ("Tanh(", "Sigmoid(", "Erf(", "Floor(", "Power(", "Exp(", "Gm.GetValue(", '// device_print("i", i)'):
        assert call in src, call
    res = A.emit(str(tmp_path), [A.Launch(ck, 1, args)])
    assert len(A.check_project(str(tmp_path), res["kernels"])) == 4
    report = A.run_project(str(tmp_path), "arch22")
    assert report.count("bitwise equal") == 2, report


@ct.jit
def bf16_tanh(x, o, N: ct.constexpr):
    with ct.vector():
        ct.store(o[0:N], ct.tanh(ct.load(x[0:N])))  # <- unsupported


@ct.jit
def scalar_tanh(o, s, N: ct.constexpr):
    with ct.vector():
        ct.store(o[0:N], ct.full((N,), ct.tanh(s), ct.float32))  # <- unsupported


def test_what_the_backend_does_not_lower_is_a_typed_error_at_the_line():
    x = np.zeros(64, ml_dtypes.bfloat16)
    for kernel, args, what in ((bf16_tanh, (x, x.copy()), "elementwise 'tanh' (bfloat16)"),
                               (scalar_tanh, (np.zeros(64, np.float32), 0.5), "the scalar math function tanh()")):
        ck = kernel.compile(*args, N=64)
        with pytest.raises(A.AscendCUnsupported) as info:
            A.lowered(ck)
        text = str(info.value)
        assert what in text and "test_emit_math.py:" in text and "# <- unsupported" in text, text
