"""Regression: a specialisation that failed to compile was compiled again on every launch.

FIA's row passes try op_host's M base first and take smaller tile heights when it does not fit on chip
(``BudgetError``). Only successes were kept in ``JITFunction``'s cache, so every later call of a D 512 prefill ran
the whole pass pipeline again for the height that does not fit (about 0.1 s of a 0.02 s call). The error is now
kept under the specialisation's key and raised again without compiling."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import cvtile.dsl as ct

jit = importlib.import_module("cvtile.dsl.jit")   # the module (``cvtile.dsl.jit`` the attribute is the decorator)


# the shape of examples/04_budget_error.py's kernel, kept apart: the test counts compilations, and a kernel object
# another test (the example's) already compiled in this process would have its failure cached before it starts
@ct.jit
def resident_rows(x, o, n, R: ct.constexpr, D: ct.constexpr):
    with ct.vector():
        acc = ct.zeros((R, D), ct.float32)
    for j in range(n):
        with ct.vector():
            acc = acc + ct.load(x[j, 0:R, 0:D])
    with ct.vector():
        ct.store(o[0:R, 0:D], acc)


def _args(rows):
    return np.zeros((2, rows, 256), np.float32), np.zeros((rows, 256), np.float32), 2


def test_a_budget_error_is_raised_again_without_compiling(monkeypatch):
    runs = []
    real = jit.run_pipeline
    monkeypatch.setattr(jit, "run_pipeline", lambda *a, **k: runs.append(1) or real(*a, **k))
    errors = []
    for _ in range(3):
        with pytest.raises(ct.BudgetError) as info:
            resident_rows.compile(*_args(224), R=224, D=256)   # 224 x 256 fp32 twice: over A2's UB
        errors.append(str(info.value))
    assert len(runs) == 1 and len(set(errors)) == 1
    assert "does not fit UB" in errors[0]
    # a specialisation that fits is still compiled, once
    resident_rows.compile(*_args(32), R=32, D=256)
    resident_rows.compile(*_args(32), R=32, D=256)
    assert len(runs) == 2
