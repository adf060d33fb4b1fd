"""``sim.precompile``: a call's later kernels compiled in child processes while the caller compiles the first.

Checked: the argument types a child compiles for are the types the launch then passes (``flat_types`` against
the converted arguments, for the FIA decode's attention kernel and flash-decode combine in both orders,
without compiling anything); a call of two small kernels starts one child for the second, the child leaves
that kernel's machine code in numba's cache, and the call's results are those of a call without children;
``CVTILE_COMPILE_PROCESSES=1`` and a call whose kernels are compiled start none; the FIA API starts one child
for a call it tiles afresh (the flash-decode combine) and none for a repeat the tiling memo answers, with the
same results either way.
"""

from __future__ import annotations

import numpy as np
import pytest

import cvtile.dsl as ct
from cvtile.cases import DEFAULT_CASES, make_inputs
from cvtile.dsl.jit import record_launches
from cvtile.kernels.fia.api import run_call
from cvtile.sim.launch import cache_dir, signatures
from cvtile.sim.precompile import compile_ahead, compiled_ahead, wait


def _writeable(args):
    return [np.array(a) if isinstance(a, np.ndarray) and not a.flags.writeable else a for a in args]


@pytest.mark.parametrize("order", ["program", "pipelined"])
def test_flat_types_are_the_types_of_the_converted_arguments(order):
    from numba import typeof

    spec = DEFAULT_CASES[0]             # the decode with flash decode: the attention kernel, then the combine
    q, k, v, kw = make_inputs(spec, 0)
    with record_launches(run=False) as rec:
        run_call(q, k, v, target=spec.target, order=order, **kw)
    assert len(rec.launches) == 2
    for launch in rec.launches:
        runner = launch.kernel.runner("numba", order)
        flat, _, _ = runner.convert(launch.grid, _writeable(launch.args), runner.plain)
        assert runner.flat_types(launch.args) == [typeof(a) for a in flat]
        group = runner.generated.entry == "group"
        err = np.zeros((launch.grid, 5), np.int64)
        assert signatures(runner.module, group, err, flat) == signatures(runner.module, group, err,
                                                                         runner.flat_types(launch.args))


@ct.jit
def _double(x, o):
    with ct.vector():
        ct.store(o[0:16, 0:16], ct.load(x[0:16, 0:16]) * 2.0)


@ct.jit
def _plus_one(x, o):
    with ct.vector():
        ct.store(o[0:16, 0:16], ct.load(x[0:16, 0:16]) + 1.0)


def _call(x):
    y = np.zeros((16, 16), np.float32)
    z = np.zeros((16, 16), np.float32)
    _double[1](x, y)
    _plus_one[1](y, z)
    return z


def _on_disk(kernel: str, function: str) -> bool:
    """Whether a child left ``function``'s machine code in the kernel cache: numba's index file, or the direct
    compiler's object (``$CVTILE_COMPILER``)."""
    return any((cache_dir() / "__pycache__").glob(f"cvtile_k_{kernel}_*.{function}-*.nbi")) or \
        any(cache_dir().glob(f"cvtile_k_{kernel}_*.{function}.*.direct"))


def test_the_second_kernel_compiles_in_a_child(tmp_path, monkeypatch):
    monkeypatch.setenv("CVTILE_CACHE_DIR", str(tmp_path))
    x = np.arange(256, dtype=np.float32).reshape(16, 16)
    with compiled_ahead(lambda: _call(x), processes=2) as children:
        assert len(children) == 1
        z = _call(x)
    assert [c.returncode for c in children] == [0]
    assert np.array_equal(z, x * 2 + 1)
    assert _on_disk("_plus_one", "core")
    assert compile_ahead(lambda: _call(x), processes=2) == []     # compiled: nothing left to start


def test_one_process_starts_no_child(tmp_path, monkeypatch):
    monkeypatch.setenv("CVTILE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("CVTILE_COMPILE_PROCESSES", "1")
    x = np.ones((16, 16), np.float32)
    children = compile_ahead(lambda: _call(x))
    wait(children)
    assert children == []


@ct.jit
def _mixed(a, b, o):
    with ct.cube():
        s = ct.mma(ct.load(a[0:16, 0:16]), ct.load(b[0:16, 0:16]))
    with ct.vector():
        ct.store(o[0:16, 0:16], s * 0.5)


def test_a_core_groups_two_programs_compile_in_two_processes(tmp_path, monkeypatch):
    monkeypatch.setenv("CVTILE_CACHE_DIR", str(tmp_path))
    a = np.eye(16, dtype=np.float16)
    b = np.arange(256, dtype=np.float16).reshape(16, 16)

    def call():
        o = np.zeros((16, 16), np.float32)
        _mixed[1](a, b, o, order="pipelined")
        return o

    with compiled_ahead(call, "pipelined", processes=2) as children:
        assert len(children) == 1
        o = call()
    assert [c.returncode for c in children] == [0]
    assert np.array_equal(o, b.astype(np.float32) * 0.5)
    assert _on_disk("_mixed", "prog_aiv")


_API_CHILD = r"""
import json
import numpy as np
import cvtile.sim.precompile as precompile
from cvtile.cases import DEFAULT_CASES, make_inputs
from cvtile.kernels.fia import tiling_memo
from cvtile.kernels.fia.api import run_call

started = []
compile_ahead = precompile.compile_ahead

def spy(*args, **kw):
    children = compile_ahead(*args, **kw)
    started.extend(children)
    return children

precompile.compile_ahead = spy
spec = DEFAULT_CASES[0]
q, k, v, kw = make_inputs(spec, 0)
out, lse = run_call(q, k, v, target=spec.target, **kw)
first = [c.returncode for c in started]
again, lse_again = run_call(q, k, v, target=spec.target, **kw)   # the tiling memo answers: no child
second = len(started)
print(json.dumps({"first": first, "second": second,
                  "same": bool(np.array_equal(out, again) and np.array_equal(lse, lse_again))}))
"""


def test_the_api_compiles_a_fresh_calls_combine_in_a_child(tmp_path):
    """In a fresh process (this one may have compiled the kernels already): the first call starts one child
    (the combine, compiled beside the attention kernel), the repeat none, with the same results."""
    import json
    import os
    import subprocess
    import sys

    env = dict(os.environ, CVTILE_CACHE_DIR=str(tmp_path), CVTILE_COMPILE_PROCESSES="2")
    done = subprocess.run([sys.executable, "-c", _API_CHILD], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got == {"first": [0], "second": 1, "same": True}, got


def test_a_call_whose_recording_raises_starts_no_child_and_raises_nothing():
    def call():
        raise ValueError("the call's own error")

    assert compile_ahead(call, processes=2) == []
    with pytest.raises(ValueError, match="own error"):
        with compiled_ahead(call, processes=2):
            call()


def test_a_callers_recording_sees_only_the_calls_own_launches_regression(tmp_path, monkeypatch):
    """Regression: the dry run's launches reached a recording the caller had open (an FIA call under
    ``record_launches()`` recorded the attention kernel and the combine twice). The dry run's recording is
    isolated now."""
    monkeypatch.setenv("CVTILE_CACHE_DIR", str(tmp_path))
    x = np.ones((16, 16), np.float32)
    with record_launches() as rec:
        with compiled_ahead(lambda: _call(x), processes=2):
            _call(x)
    assert [r.kernel.ir.name for r in rec.launches] == ["_double", "_plus_one"]
