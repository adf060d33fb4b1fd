"""Regression: every launch built a new threadpoolctl context (``threadpool_limits``), which walks every native
library the process has loaded: about 2 ms, three quarters of the fixed cost of a small FIA call (2.2 ms
before, 0.7 ms after; ``benchmarks/bench_fia.py --cases fixed_cost``). The launcher's BLAS limit now reuses
one controller while the process imports nothing new, and still limits BLAS to one thread inside a launch."""

from __future__ import annotations

import sys
import types

from threadpoolctl import threadpool_info

from cvtile.sim import launch


def test_the_blas_controller_is_built_once_while_no_module_is_imported(monkeypatch):
    built = []

    class Counting(launch.ThreadpoolController):
        def __init__(self):
            built.append(1)
            super().__init__()

    monkeypatch.setattr(launch, "ThreadpoolController", Counting)
    monkeypatch.setitem(launch._BLAS, "modules", -1)
    for _ in range(5):
        with launch._one_blas_thread():
            pass
    assert len(built) == 1
    # an import may bring a BLAS library of its own: the next launch looks again
    monkeypatch.setitem(sys.modules, "cvtile_test_fake_module", types.ModuleType("cvtile_test_fake_module"))
    with launch._one_blas_thread():
        pass
    assert len(built) == 2


def test_blas_runs_one_thread_inside_a_launch():
    blas = [p for p in threadpool_info() if p["user_api"] == "blas"]
    with launch._one_blas_thread():
        inside = [p for p in threadpool_info() if p["user_api"] == "blas"]
    assert all(p["num_threads"] == 1 for p in inside)
    assert [p["filepath"] for p in inside] == [p["filepath"] for p in blas]
