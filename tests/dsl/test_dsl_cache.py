"""The compile caches.

In process: a specialisation is keyed by (source hash, constexpr values, argument dtypes and ranks, target);
the same key returns the same CompiledKernel, any change of those recompiles, shapes and scalar values do
not. On disk: the numba backend writes the generated module into ``$CVTILE_CACHE_DIR`` and numba keeps the
machine code beside it, so a second *process* with the same kernel loads instead of compiling (numba's compile,
``CVTILE_COMPILER=numba``; the direct compiler's cache is tested in ``tests/sim/test_direct_compiler.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np

import cvtile.dsl as ct


@ct.jit
def axpy(x, o, alpha, N: ct.constexpr, BLOCK: ct.constexpr = 8):
    for r0 in range(0, N, BLOCK):
        with ct.vector():
            n = min(BLOCK, N - r0)
            ct.store(o[ct.ds(r0, BLOCK, valid=n)], ct.load(x[ct.ds(r0, BLOCK, valid=n)]) * alpha)


def _args(n=16, dtype=np.float32, rank=1):
    shape = (n,) if rank == 1 else (n, 2)
    return np.zeros(shape, dtype), np.zeros(shape, dtype)


def test_same_specialisation_reuses_the_compiled_kernel():
    a = axpy.compile(*_args(), 2.0, N=16)
    b = axpy.compile(*_args(), 2.0, N=16)
    assert a is b
    assert a.runner() is a.runner()          # backend artifacts are built once per specialisation


def test_shapes_and_scalar_values_do_not_recompile():
    a = axpy.compile(*_args(16), 2.0, N=16)
    assert axpy.compile(*_args(4000), -7.5, N=16) is a
    assert axpy.compile(*_args(16), np.float32(3.0), N=16) is a   # a numpy float32 scalar is a float scalar


def test_constexpr_values_recompile():
    a = axpy.compile(*_args(), 2.0, N=16)
    b = axpy.compile(*_args(), 2.0, N=32)
    c = axpy.compile(*_args(), 2.0, N=16, BLOCK=4)
    assert len({id(a), id(b), id(c)}) == 3
    assert b.ir.constexprs == {"N": 32, "BLOCK": 8} and c.ir.constexprs == {"N": 16, "BLOCK": 4}


def test_dtype_changes_recompile():
    a = axpy.compile(*_args(), 2.0, N=16)
    f16 = axpy.compile(*_args(dtype=np.float16), 2.0, N=16)
    assert f16 is not a and "gm<float16, rank 1>" in str(f16.ir)


@ct.jit
def rank_poly(x, o):
    with ct.vector():
        if x.ndim == 1:                  # the rank is known at compile time
            t = ct.load(x[0:4])
        else:
            t = ct.load(x[0, 0:4])
        ct.store(o[0:4], t)


def test_rank_changes_recompile():
    o = np.zeros(4, np.float32)
    r1 = rank_poly.compile(np.zeros(4, np.float32), o)
    r2 = rank_poly.compile(np.zeros((3, 4), np.float32), o)
    assert r1 is not r2
    assert "gm<float32, rank 1>" in str(r1.ir) and "gm<float32, rank 2>" in str(r2.ir)
    assert rank_poly.compile(np.zeros((5, 9), np.float32), o) is r2


def test_scalar_kind_is_part_of_the_key():
    a = axpy.compile(*_args(), 2.0, N=16)
    b = axpy.compile(*_args(), 2, N=16)     # an int scalar: a different specialisation
    assert a is not b
    assert "%alpha" in str(b.ir) and ": int64" in str(b.ir).split("\n")[0]


def test_target_changes_recompile():
    a = axpy.compile(*_args(), 2.0, N=16)
    b = axpy.on("Ascend950").compile(*_args(), 2.0, N=16)
    assert a is not b and b.platform.name == "Ascend950" and a.platform.name == "Ascend910B1"
    assert axpy.on("Ascend950").compile(*_args(), 2.0, N=16) is b     # .on() shares the cache
    assert axpy.compile(*_args(), 2.0, N=16) is a


CHILD = textwrap.dedent('''
    import json, sys, time
    import numpy as np
    import cvtile.dsl as ct

    @ct.jit
    def disk_cached(x, o, N: ct.constexpr):
        with ct.vector():
            ct.store(o[0:N], ct.exp(ct.load(x[0:N])) + 1.0)

    x = np.linspace(-1, 1, 8).astype(np.float32)
    o = np.zeros(8, np.float32)
    t0 = time.perf_counter()
    disk_cached[1](x, o, N=8)
    elapsed = time.perf_counter() - t0
    stats = disk_cached.compile(x, o, N=8).runner().module.core.stats
    print(json.dumps({"hits": sum(stats.cache_hits.values()), "misses": sum(stats.cache_misses.values()),
                      "seconds": elapsed, "ok": bool(np.allclose(o, np.exp(x) + 1, rtol=1e-6))}))
''')


def _run_child(script, cache):
    cmd, env = _child_command(script, cache)
    return _result(subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300))


def _child_command(script, cache):
    """The child runs numba's compile (``CVTILE_COMPILER=numba``): these tests are about numba's disk cache; the
    direct compiler's is ``tests/sim/test_direct_compiler.py``'s."""
    return [sys.executable, str(script)], dict(os.environ, CVTILE_CACHE_DIR=str(cache), CVTILE_COMPILER="numba")


def _result(done):
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_second_process_loads_the_kernel_from_the_disk_cache(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    cache = tmp_path / "cache"
    first = _run_child(script, cache)
    assert first["ok"] and first["misses"] == 1 and first["hits"] == 0
    generated = sorted(p.name for p in cache.glob("cvtile_k_disk_cached_*.py"))
    assert len(generated) == 1
    assert list((cache / "__pycache__").glob(generated[0][:-3] + ".core-*.nbi"))   # numba's index file
    second = _run_child(script, cache)
    assert second["ok"] and second["hits"] == 1 and second["misses"] == 0
    assert second["seconds"] < first["seconds"]


def test_two_processes_that_need_one_kernel_at_once_compile_it_once(tmp_path):
    """Test workers and corpus workers often reach the same specialisation together: the compile holds the
    module's lock file, so the second process waits and loads the first one's machine code (a numba cache hit)
    instead of compiling it again."""
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    cmd, env = _child_command(script, tmp_path / "cache")
    children = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for _ in range(2)]
    results = []
    for child in children:
        out, err = child.communicate(timeout=300)
        results.append(_result(subprocess.CompletedProcess(cmd, child.returncode, out, err)))
    assert all(r["ok"] for r in results)
    assert sorted((r["misses"], r["hits"]) for r in results) == [(0, 1), (1, 0)], results
