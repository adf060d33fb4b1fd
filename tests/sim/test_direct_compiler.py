"""The direct compiler (``cvtile.sim.direct``, the default; ``CVTILE_COMPILER=numba`` for numba's): the generated modules compiled without
numba's front end give numba's bits, load from the kernel cache in a later process, and fall back to numba for
a module outside their subset; the scalar semantics of the subset are numba's (Python ``//`` and ``%``, the numpy
error model, promotion, slices with negative bounds, short circuits).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from numba import typeof

import cvtile.dsl as ct
from cvtile.dsl.jit import record_launches
from cvtile.kernels.fia.api import npu_fused_infer_attention_score
from cvtile.sim import direct
from cvtile.sim.launch import COMPILE_STATS, NumbaRunner, _compiling, _direct_cache_path, _load_module


def _outputs(rec, compiler: str, order: str, monkeypatch) -> list:
    """Every array argument of the recorded launch after running it afresh (from its inputs as they were before
    the recorded run) with ``compiler``, on a runner of its own."""
    monkeypatch.setenv("CVTILE_COMPILER", compiler)
    args = [np.array(rec.before[id(a)], copy=True) if isinstance(a, np.ndarray) else a for a in rec.args]
    NumbaRunner(rec.kernel, order).launch(rec.grid, args)
    return [a for a in args if isinstance(a, np.ndarray)]


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.tobytes() == b.tobytes()


def _fia_call(kind: str):
    rng = np.random.default_rng(7)
    r = lambda *s: rng.uniform(-1, 1, s).astype(np.float16)  # noqa: E731
    if kind == "decode":     # GQA decode with flash decode: the attention kernel and the combine
        q, k, v = r(2, 8, 1, 64), r(2, 2, 4096, 64), r(2, 2, 4096, 64)
        kw = dict(num_heads=8, num_key_value_heads=2, input_layout="BNSD", softmax_lse_flag=True)
    else:                    # causal prefill, BSH
        q, k, v = r(1, 300, 256), r(1, 300, 256), r(1, 300, 256)
        from cvtile.kernels.golden import mask_template
        kw = dict(num_heads=4, input_layout="BSH", sparse_mode=3, atten_mask=mask_template())
    return lambda: npu_fused_infer_attention_score(q, k, v, scale=0.125, **kw)


@pytest.mark.parametrize("kind, order", [("decode", "program"), ("prefill", "pipelined")])
def test_an_fia_call_gives_numba_bits_compiled_directly(kind, order, monkeypatch):
    with record_launches() as rec:
        _fia_call(kind)()
    assert rec.launches
    before = dict(COMPILE_STATS)
    for launch in rec.launches:
        want = _outputs(launch, "numba", order, monkeypatch)
        got = _outputs(launch, "direct", order, monkeypatch)
        assert all(_same_bits(a, b) for a, b in zip(want, got)), launch.kernel.name
    assert COMPILE_STATS["direct"] - before["direct"] == len(rec.launches)
    assert COMPILE_STATS["direct_fallbacks"] == before["direct_fallbacks"]


@ct.jit
def printing(x, out, N: ct.constexpr):
    with ct.vector():
        t = ct.load(x[0:N])
        ct.device_print("sum", t * 3.0)
        ct.store(out[0:N], t * 2.0)


def test_a_module_outside_the_subset_runs_through_numba_and_the_log_says_why(monkeypatch, tmp_path, capfd):
    """``device_print`` is numba's boxed print: the direct compiler does not lower it, numba compiles the
    module, the result is the same and the compile log names the construct."""
    log = tmp_path / "compile.log"
    monkeypatch.setenv("CVTILE_COMPILE_LOG", str(log))
    monkeypatch.setenv("CVTILE_COMPILER", "direct")
    before = COMPILE_STATS["direct_fallbacks"]
    x = np.arange(16, dtype=np.float32)
    out = np.zeros(16, np.float32)
    printing[1](x, out, N=16)
    np.testing.assert_array_equal(out, x * 2)
    assert "device_print 'sum'" in capfd.readouterr().out
    assert COMPILE_STATS["direct_fallbacks"] == before + 1
    assert "direct fallback" in log.read_text() and "'print'" in log.read_text()


def test_the_compiler_variable_is_checked(monkeypatch):
    monkeypatch.setenv("CVTILE_COMPILER", "llvm")
    with pytest.raises(ValueError, match="CVTILE_COMPILER='llvm'.*direct, numba"):
        direct.compiler()
    monkeypatch.delenv("CVTILE_COMPILER")
    assert direct.compiler() == "direct"


# ---------------------------------------------------------------------------------------------------------------
# the subset's scalar and view semantics against numba's compile of the same text

SEMANTICS = textwrap.dedent('''\
    import numpy as np
    from numba import njit
    from cvtile.sim.rt import NEG_INF, f32, fail, fail_first, fexp, fmax, sel
    OPT_LEVEL = 1


    @njit(nogil=True, error_model='numpy', no_cfunc_wrapper=True, _nrt=False)
    def core(blk, nblk, sub, err, ints, floats, out_i, out_f):
        n = ints.shape[0]
        for k in range(n):
            a = np.int64(ints[k])
            b = np.int64(ints[(k + 1) % n])
            out_i[k, 0] = a // b
            out_i[k, 1] = a % b
            out_i[k, 2] = min(a, b) if a > 0 or b < 0 else max(a, -b)
            out_i[k, 3] = (a < b) & (b != 0) | (a == 3)
            out_i[k, 4] = a >> 2 if a >= 0 else abs(a)
            x = floats[k]
            y = floats[(k + 3) % n]
            out_f[k, 0] = x / y
            out_f[k, 1] = fmax(x, y)
            out_f[k, 2] = sel(x < y, fexp(x), f32(y * 0.5))
            out_f[k, 3] = min(x, y)
            out_f[k, 4] = a / b
            out_f[k, 5] = x * a + 0.1
        seg = floats[2:-1]
        tail = floats[-3:]
        out_i[0, 5] = seg.shape[0]
        out_i[1, 5] = tail.shape[0]
        grid = floats[:(n // 4) * 4].reshape(n // 4, 4)
        out_f[0, 6] = grid[1, 2]
        out_f[1, 6] = grid[2][3]
        out_f[2, 6] = grid.T[3, 1]
        w = 0
        while w < n and ints[w] != 7:
            w += 1
        out_i[2, 5] = w
        out_i[3, 5] = ints[-1]
        if ints[0] > 1000:
            return fail(err, blk, np.int64(7), np.int64(ints[0]), np.int64(n), np.int64(0))
        _ck1 = ints[1] > 1000
        _ck2 = ints[2] > 1000
        if _ck1 | _ck2:
            return fail_first(err, blk, (_ck1, _ck2,), (np.int64(8), np.int64(ints[1]), np.int64(0), np.int64(0),
                                                        np.int64(9), np.int64(ints[2]), np.int64(1), np.int64(2),))
        return 0
''')


def _semantics_module():
    return _load_module(SEMANTICS, "direct_semantics")


@pytest.mark.parametrize("seed", [0, 1])
def test_the_subset_computes_what_numba_computes(seed):
    module = _semantics_module()
    rng = np.random.default_rng(seed)
    n = 24
    ints = rng.integers(-9, 10, n).astype(np.int32)
    ints[:3] = [5, 0, -7]           # division by zero, negative floor division and modulo
    floats = rng.uniform(-3, 3, n).astype(np.float32)
    floats[3:6] = [0.0, np.nan, -np.inf]
    runs = []
    for which in ("numba", "direct"):
        out_i, out_f = np.zeros((n, 6), np.int64), np.zeros((n, 7), np.float32)
        err = np.zeros((1, 5), np.int64)
        args = [np.int64(0), np.int64(1), np.int64(0), err, ints, floats, out_i, out_f]
        if which == "numba":
            r = module.core(*args)
        else:
            sig = tuple(typeof(a) for a in args)
            fn = direct.compile_functions(module, SEMANTICS, [("core", sig)], 1, _direct_cache_path, _compiling).core
            r = fn(*args)
        runs.append((r, err.copy(), out_i, out_f))
    (r0, e0, i0, f0), (r1, e1, i1, f1) = runs
    assert r0 == r1 and _same_bits(e0, e1)
    assert _same_bits(i0, i1), np.argwhere(i0 != i1)[:5]
    assert _same_bits(f0, f1), np.argwhere(f0.view(np.int32) != f1.view(np.int32))[:5]
    assert i0[0, 5] == n - 3 and i0[1, 5] == 3 and i0[3, 5] == ints[-1]


def test_the_checks_records_are_numbas():
    module = _semantics_module()
    n = 8
    for first in ([2000, 0, 0], [1, 2000, 3000], [1, 1, 3000]):
        recs = []
        for which in ("numba", "direct"):
            ints = np.arange(n, dtype=np.int32) + 1
            ints[:3] = first
            err = np.zeros((1, 5), np.int64)
            args = [np.int64(0), np.int64(1), np.int64(0), err, ints, np.ones(n, np.float32),
                    np.zeros((n, 6), np.int64), np.zeros((n, 7), np.float32)]
            if which == "numba":
                r = module.core(*args)
            else:
                sig = tuple(typeof(a) for a in args)
                r = direct.compile_functions(module, SEMANTICS, [("core", sig)], 1, _direct_cache_path,
                                             _compiling).core(*args)
            recs.append((r, err.tolist()))
        assert recs[0] == recs[1] and recs[0][0] in (7, 8, 9)


_CHILD = r"""
import json, os, sys
from cvtile.cases import DEFAULT_CASES, make_inputs, with_options
from cvtile.kernels.fia.api import npu_fused_infer_attention_score
from cvtile.sim.direct import build
from cvtile.sim.launch import COMPILE_STATS
spec = with_options(DEFAULT_CASES[1], num_heads=2, num_kv_heads=2)   # the causal prefill: BLAS products
q, k, v, kw = make_inputs(spec)
out = npu_fused_infer_attention_score(q, k, v, **kw)[0]
print(json.dumps({"stats": dict(COMPILE_STATS), "build": dict(build.STATS),
                  "scipy_linalg_package": "scipy.linalg" in sys.modules,
                  "digest": __import__("hashlib").sha1(out.tobytes()).hexdigest()}))
"""


def test_a_later_process_loads_the_machine_code(tmp_path):
    """The second process loads what the first compiled and computes the same bits. Regression: the loading
    process skipped numba's registries and with them scipy's BLAS, which then loaded inside the first product,
    after the launcher had held the loaded BLAS libraries at one thread: the products ran threaded and
    blocked their sums otherwise, the causal prefill's outputs other bits. The BLAS is scipy's extension module
    loaded alone (``build.load_cython_blas``), without the 0.2 s of ``scipy.linalg``'s package: same bits."""
    env = dict(__import__("os").environ, CVTILE_CACHE_DIR=str(tmp_path), CVTILE_COMPILER="direct",
               CVTILE_COMPILE_PROCESSES="1")
    runs = [json.loads(subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True,
                                      check=True, cwd=tmp_path).stdout.strip().splitlines()[-1]) for _ in range(2)]
    assert runs[0]["build"]["compiled"] >= 1 and runs[0]["build"]["loaded"] == 0
    assert runs[1]["build"]["compiled"] == 0 and runs[1]["build"]["loaded"] == runs[0]["build"]["compiled"]
    assert runs[0]["digest"] == runs[1]["digest"]
    assert not runs[1]["scipy_linalg_package"]
    assert runs[1]["stats"]["direct"] == runs[0]["stats"]["direct"] and not runs[1]["stats"]["direct_fallbacks"]
    assert list(tmp_path.glob("*.direct"))


_LOAD_THEN_COMPILE = r"""
import json, sys
import numpy as np
from cvtile.kernels.fia.api import npu_fused_infer_attention_score
from cvtile.sim.direct import build
q = np.random.default_rng(0).uniform(-1, 1, (1, 2, 64, 64)).astype(np.float16)
npu_fused_infer_attention_score(q, q, q, num_heads=2, input_layout="BNSD", scale=0.125)
if sys.argv[1] == "then-another":
    q = q.transpose(0, 2, 1, 3).copy()   # BSND: another kernel (its layout is a compile-time constant)
    npu_fused_infer_attention_score(q, q, q, num_heads=2, input_layout="BSND", scale=0.125)
print(json.dumps(build.STATS))
"""


def test_a_process_that_loaded_a_kernel_compiles_another_regression(tmp_path):
    """Regression: the loader filled the direct compiler's per-process state first, the compile path then took
    the state as made and failed with ``KeyError: 'ctx'``: a warm process that ran a cached kernel could not
    compile a new one."""
    env = dict(__import__("os").environ, CVTILE_CACHE_DIR=str(tmp_path), CVTILE_COMPILER="direct",
               CVTILE_COMPILE_PROCESSES="1")

    def run(mode):
        res = subprocess.run([sys.executable, "-c", _LOAD_THEN_COMPILE, mode], env=env, capture_output=True,
                             text=True, cwd=tmp_path)
        assert res.returncode == 0, res.stderr[-2000:]
        return json.loads(res.stdout.strip().splitlines()[-1])

    assert run("one")["compiled"] >= 1
    stats = run("then-another")
    assert stats["loaded"] >= 1 and stats["compiled"] >= 1


@pytest.mark.slow
def test_the_st_corpus_feature_cover_gives_numba_bits_compiled_directly(corpus_file, monkeypatch):
    """Every optional input of the FIA st corpus (``st_runner.feature_cover``: KV antiquant, full quant, MLA,
    paged and NZ caches, shared prefix, tensor lists, pse, masks, sinks, post-quant ...), each launch run both
    ways from the same inputs: every output bit the same."""
    from cvtile.kernels.fia.api import fused_infer_attention_score_v4
    from cvtile.kernels.st_cases import load_st_cases
    from cvtile.kernels.st_runner import feature_cover

    path = corpus_file("st/fia_v4.json")
    cases = load_st_cases(path)
    checked = 0
    for i in feature_cover(path):
        with record_launches() as rec:
            fused_infer_attention_score_v4(**cases[i].make_inputs(np.random.default_rng(0)))
        for launch in rec.launches:
            want = _outputs(launch, "numba", "program", monkeypatch)
            got = _outputs(launch, "direct", "program", monkeypatch)
            assert all(_same_bits(a, b) for a, b in zip(want, got)), (cases[i].id, launch.kernel.name)
            checked += 1
    assert checked >= len(feature_cover(path))


def test_an_unchecked_numba_version_is_compiled_by_numba(tmp_path, monkeypatch):
    """The direct compiler calls numba's internal APIs: under a numba version it was not checked against it
    declines with a reason (and a warning once), and numba's pipeline compiles the module."""
    from cvtile.sim.direct import build

    build.check_numba_version("0.68.1")
    monkeypatch.setitem(build._STATE, "warned", True)   # (warned once per process: not by this check)
    with pytest.raises(direct.Unsupported, match=r"numba 0\.60\.0 is not a version the direct compiler"):
        build.check_numba_version("0.60.0")
    monkeypatch.setenv("CVTILE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("CVTILE_COMPILER", "direct")
    monkeypatch.setattr(build, "CHECKED_NUMBA", ())
    build._STATE["warned"] = False
    q = np.random.default_rng(3).uniform(-1, 1, (1, 1, 32, 64)).astype(np.float16)
    before = dict(COMPILE_STATS)
    with pytest.warns(RuntimeWarning, match="is not a version the direct compiler was checked against"):
        out = npu_fused_infer_attention_score(q, q, q, num_heads=1, input_layout="BNSD", scale=0.125)[0]
    assert COMPILE_STATS["direct_fallbacks"] > before["direct_fallbacks"]
    assert COMPILE_STATS["direct"] == before["direct"] and np.isfinite(out).all()
