"""Regression: the runtime's per-dtype variants (GM row readers and writers, skinny matmuls, the called
one-argument functions) were closures over numba dispatchers, and numba keys a cached function on the
pickles of its closure cells, which for a dispatcher include a per-process uuid. So they never hit numba's
cache: every process that compiled a kernel recompiled each variant it called (about 2 s of the first
decode case's compile) and wrote one more cache file beside the last, without bound. They are now plain
functions whose bound names are globals, and their names carry the runtime's source stamp so a change to
``rounding`` cannot leave stale machine code behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from cvtile.sim import rt
from cvtile.sim.stamp import source_stamp

_VARIANTS = ("read_rows_f16", "write_rows_bf16", "read_rows_raw", "mm_bt_f16", "mm_b_bf16", "mm_b_f32",
             "fexp_call", "round_bf16_call")


def test_runtime_variants_have_no_closure_cells_and_carry_the_runtime_stamp():
    stamp = source_stamp(("rt.py", "rounding.py"))
    for name in _VARIANTS:
        fn = getattr(rt, name).py_func
        assert fn.__closure__ is None, name
        assert fn.__qualname__.endswith(f"_call_{stamp}" if name.endswith("_call") else f"{name}_{stamp}"), \
            fn.__qualname__
        assert fn.__module__ == "cvtile.sim.rt"


_CHILD = r"""
import json, numpy as np
from cvtile.sim import rt
flat = np.arange(64, dtype=np.uint16)
out = np.zeros((4, 8), np.float32)
rt.read_rows_f16(flat, 0, 8, 4, 8, out)
a = np.ones((2, 8), np.float32)
res = np.zeros((2, 4), np.float32)
rt.mm_bt_f16(a, flat, 0, 8, 4, 8, res, np.zeros(8, np.float32))
print(json.dumps({n: sum(getattr(rt, n).stats.cache_hits.values()) for n in ("read_rows_f16", "mm_bt_f16")}))
"""


def test_a_second_process_loads_the_runtime_variants_from_numbas_cache(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    runs = [json.loads(subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True,
                                      check=True, cwd=tmp_path).stdout.strip().splitlines()[-1])
            for _ in range(2)]
    assert runs[0] == {"read_rows_f16": 0, "mm_bt_f16": 0}, runs[0]
    assert runs[1] == {"read_rows_f16": 1, "mm_bt_f16": 1}, runs[1]
    assert len(list(tmp_path.rglob("*read_rows_f16*.nbc"))) == 1
