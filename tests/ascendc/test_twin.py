"""The Ascend C declaration header and its CPU twin (dsl/ascendc/include).

Every case in twin_cases/ is syntax-checked against the declaration header for the four macro sets of the
two architectures (AIC / AIV of arch22 and arch35), four cases must be rejected by it, and the cases are
compiled against the twin (once per architecture) and run: results are compared with numpy references that
follow the documented algorithm bit for bit; the runtime negatives must stop with the twin's error line.
Skips when no g++ is on PATH.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
INCLUDE = ROOT / "dsl" / "ascendc" / "include"
CASES = HERE / "twin_cases"
GXX = shutil.which("g++")

pytestmark = pytest.mark.skipif(GXX is None, reason="g++ is not on PATH (the Ascend C twin tests need a C++17 g++)")

MACRO_SETS = {
    "arch22-aic": ["-D__NPU_ARCH__=2201", "-D__DAV_C220__", "-D__DAV_C220_CUBE__", "-D__DAV_CUBE__"],
    "arch22-aiv": ["-D__NPU_ARCH__=2201", "-D__DAV_C220__", "-D__DAV_C220_VEC__", "-D__DAV_VEC__"],
    "arch35-aic": ["-D__NPU_ARCH__=3510", "-D__DAV_C310__", "-D__DAV_C310_CUBE__", "-D__DAV_CUBE__"],
    "arch35-aiv": ["-D__NPU_ARCH__=3510", "-D__DAV_C310__", "-D__DAV_C310_VEC__", "-D__DAV_VEC__"],
}
ARCH = {"arch22": "2201", "arch35": "3510"}
GOOD_CASES = ["cube_matmul", "vec_ops", "vec_logic", "mix_pipeline", "neg_runtime", "api_coverage"]
BAD_CASES = {
    "neg_compile_overload": "no matching function for call to 'Mmad",
    "neg_compile_field": "has no member named 'cmatrixInitValue'",
    "neg_compile_event": "'MTE2_MTE4' is not a member of 'AscendC::HardEvent'",
    "neg_compile_bitwise": "no matching function for call to 'And",
}

F16 = np.float16
BF16 = ml_dtypes.bfloat16
F32 = np.float32


def _syntax(case: str, macros: list[str]) -> subprocess.CompletedProcess:
    cmd = [GXX, "-std=c++17", "-fsyntax-only", "-Wall", "-Werror", f"-I{INCLUDE / 'decl'}", *macros,
           "-DASCENDC_CPU_DEBUG=1", str(CASES / f"{case}.cpp")]
    return subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"})


@pytest.mark.parametrize("macro_set", list(MACRO_SETS))
@pytest.mark.parametrize("case", GOOD_CASES)
def test_declaration_header_accepts_case(case, macro_set):
    t0 = time.perf_counter()
    r = _syntax(case, MACRO_SETS[macro_set])
    dt = time.perf_counter() - t0
    assert r.returncode == 0, r.stderr
    assert dt < 1.0, f"syntax check took {dt:.2f} s"


@pytest.mark.parametrize("macro_set", list(MACRO_SETS))
@pytest.mark.parametrize("case", list(BAD_CASES))
def test_declaration_header_rejects_case(case, macro_set):
    r = _syntax(case, MACRO_SETS[macro_set])
    assert r.returncode != 0
    text = r.stderr.replace("\u2018", "'").replace("\u2019", "'")
    assert BAD_CASES[case] in text, text


# ---------------------------------------------------------------- building and running twin programs
@pytest.fixture(scope="session")
def twin(tmp_path_factory):
    """twin(case, arch) -> path of the executable (compiled once per session)."""
    out = tmp_path_factory.mktemp("twin_bin")
    built: dict[tuple[str, str], Path] = {}

    def build(case: str, arch: str) -> Path:
        key = (case, arch)
        if key not in built:
            exe = out / f"{case}_{arch}"
            cmd = [GXX, "-std=c++17", "-O1", "-pthread", "-ffp-contract=off", "-Wall", "-Werror",
                   f"-D__NPU_ARCH__={ARCH[arch]}", f"-I{INCLUDE / 'twin'}", str(CASES / f"{case}.cpp"), "-o", str(exe)]
            r = subprocess.run(cmd, capture_output=True, text=True)
            assert r.returncode == 0, r.stderr
            built[key] = exe
        return built[key]

    return build


def _run(exe: Path, *args, timeout: float = 30, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def _bits_equal(actual: np.ndarray, expected: np.ndarray) -> bool:
    """Bit equality, except that any NaN matches any NaN."""
    a = np.asarray(actual)
    e = np.asarray(expected)
    if a.dtype.kind == "f" or a.dtype in (F16, BF16):
        with np.errstate(invalid="ignore"):   # ml_dtypes warns when it widens a bf16 NaN
            an = np.isnan(a.astype(np.float64))
            en = np.isnan(e.astype(np.float64))
        if not np.array_equal(an, en):
            return False
        keep = ~en
        return np.array_equal(a[keep].view(np.uint8 if a.itemsize == 1 else f"u{a.itemsize}"),
                              e[keep].view(np.uint8 if e.itemsize == 1 else f"u{e.itemsize}"))
    return np.array_equal(a, e)


# ---------------------------------------------------------------- reference numerics
def vexp(x: np.ndarray) -> np.ndarray:
    """The vector unit's float exp (the simulator's algorithm), step by step in float32."""
    x = np.asarray(x, F32)
    lo, hi = F32(-87.33654), F32(88.72283)
    nan = np.isnan(x)
    xc = np.minimum(np.maximum(np.where(nan, F32(0), x), lo), hi).astype(F32)
    n = np.floor(xc * F32(1.4426950408889634) + F32(0.5)).astype(F32)
    r = xc - n * F32(0.693145751953125)
    r = r - n * F32(1.428606765330187e-06)
    p = F32(1.9875691500e-4)
    for c in (1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1):
        p = p * r + F32(c)
    p = p * r * r + r + F32(1.0)
    ni = n.astype(np.int32)
    n1 = ni >> 1
    s1 = ((n1 + 127).astype(np.uint32) << np.uint32(23)).view(F32)
    s2 = ((ni - n1 + 127).astype(np.uint32) << np.uint32(23)).view(F32)
    y = (p * s1) * s2
    y = np.where(x < lo, F32(0), y)
    y = np.where(x > hi, F32(np.inf), y)
    return np.where(nan, x, y).astype(F32)


def vmax(a, b):
    return np.where((a > b) | np.isnan(a), a, b)


def vmin(a, b):
    return np.where((a < b) | np.isnan(a), a, b)


def to_f16(x, mode: str) -> np.ndarray:
    """float32 -> float16 with an Ascend C round mode (one rounding from the exact float32 value)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return _to_f16(np.asarray(x, F32), mode)


def _to_f16(x: np.ndarray, mode: str) -> np.ndarray:
    h = x.astype(F16)  # round to nearest even
    if mode == "rint":
        return h
    x64 = x.astype(np.float64)
    h64 = h.astype(np.float64)
    up = np.nextafter(h, F16(np.inf))
    down = np.nextafter(h, F16(-np.inf))
    lo = np.where(h64 > x64, down, h)
    hi = np.where(h64 < x64, up, h)
    exact = h64 == x64
    if mode == "trunc":
        r = np.where(x64 >= 0, lo, hi)
    elif mode == "odd":
        lo_odd = (lo.view(np.uint16) & 1) == 1
        r = np.where(lo_odd, lo, hi)
    else:
        raise ValueError(mode)
    r = np.where(exact | np.isnan(x), h, r)
    return r.astype(F16)


def f32_to_i32(x, mode: str) -> np.ndarray:
    x = np.asarray(x, F32).astype(np.float64)
    f = {"rint": np.rint, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc,
         "round": lambda v: np.sign(v) * np.floor(np.abs(v) + 0.5)}[mode]
    return np.clip(f(x), -2.0 ** 31, 2.0 ** 31 - 1).astype(np.int64).astype(np.int32)


def tree_sum(v: np.ndarray) -> np.float32:
    v = np.asarray(v, F32)
    while v.size > 1:
        v = (v[0::2] + v[1::2]).astype(F32)
    return F32(v[0])


def reduce_sum(x: np.ndarray, lanes: int, dtype) -> np.ndarray:
    total = None
    for r in range(0, x.size, lanes):
        seg = np.zeros(lanes, F32)
        part = x[r:r + lanes].astype(F32)
        seg[:part.size] = part
        rs = F32(np.asarray(tree_sum(seg)).astype(dtype).astype(F32))
        total = rs if total is None else F32(np.asarray(F32(total + rs)).astype(dtype).astype(F32))
    return np.asarray(total).astype(dtype)


def matmul_ref(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a [M, K] @ b [K, N] with float32 products added in k order (the twin's Mmad order)."""
    a32 = a.astype(F32)
    b32 = b.astype(F32)
    c = np.zeros((a.shape[0], b.shape[1]), F32)
    for k in range(a.shape[1]):
        c = (c + a32[:, k:k + 1] * b32[k:k + 1, :]).astype(F32)
    return c


# ---------------------------------------------------------------- cube
@pytest.mark.parametrize("arch", ["arch22", "arch35"])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("b_trans", [0, 1])
@pytest.mark.parametrize("out16", [0, 1])
def test_cube_matmul(twin, tmp_path, arch, dtype, b_trans, out16):
    _cube(twin, tmp_path, arch, dtype, 40, 72, 24, b_trans, out16, k_split=0, wrong=0, expect_equal=True)


@pytest.mark.parametrize("arch", ["arch22", "arch35"])
@pytest.mark.parametrize("b_trans", [0, 1])
def test_cube_matmul_k_split_accumulates(twin, tmp_path, arch, b_trans):
    _cube(twin, tmp_path, arch, "f16", 40, 72, 48, b_trans, 0, k_split=1, wrong=0, expect_equal=True)


@pytest.mark.parametrize("arch", ["arch22", "arch35"])
@pytest.mark.parametrize("b_trans", [0, 1])
def test_cube_wrong_layout_gives_wrong_numbers(twin, tmp_path, arch, b_trans):
    _cube(twin, tmp_path, arch, "f16", 40, 72, 24, b_trans, 0, k_split=0, wrong=1, expect_equal=False)


def _cube(twin, tmp_path, arch, dtype, m, n, k, b_trans, out16, k_split, wrong, expect_equal):
    exe = twin("cube_matmul", arch)
    rng = np.random.default_rng(m * 1000 + n * 10 + k + b_trans)
    npdt = F16 if dtype == "f16" else BF16
    a = rng.standard_normal((m, k)).astype(npdt)
    b = rng.standard_normal((k, n)).astype(npdt)
    a.tofile(tmp_path / "a.bin")
    (np.ascontiguousarray(b.T) if b_trans else b).tofile(tmp_path / "b.bin")
    np.array([m, n, k, b_trans, out16, k_split, wrong, 0], np.int32).tofile(tmp_path / "tiling.bin")
    r = _run(exe, tmp_path, dtype)
    assert r.returncode == 0, r.stderr
    got = np.fromfile(tmp_path / "c.bin", npdt if out16 else F32).reshape(m, n)
    ref = matmul_ref(a, b)
    if out16:
        ref = ref.astype(npdt)
    if expect_equal:
        assert _bits_equal(got, ref)
        # and the sequential fp32 sum is close to a float64 product (sanity of the reference itself)
        np.testing.assert_allclose(got.astype(np.float64), a.astype(np.float64) @ b.astype(np.float64),
                                   rtol=2e-2 if out16 else 1e-5, atol=2e-2 if out16 else 1e-4)
    else:
        assert np.abs(got.astype(np.float64) - ref.astype(np.float64)).max() > 1.0


# ---------------------------------------------------------------- vector sweep
def _vec_inputs(rng):
    n = 1024
    x = rng.uniform(-4, 4, n).astype(F32)
    y = rng.uniform(-4, 4, n).astype(F32)
    y[:16] = x[:16]  # ties for Max / Min / Compare
    p = rng.uniform(0.05, 8, n).astype(F32)
    e = rng.uniform(-95, 95, n).astype(F32)
    e[:14] = [np.nan, np.inf, -np.inf, 0.0, -0.0, -87.33654, 88.72283, -87.336, 88.7228, 1e-30, -1e-30,
              88.8, -88.0, 0.5]
    # cast-to-16-bit arguments: wide magnitudes, exact half and bfloat16 ties, subnormals, overflow
    mag = np.exp2(rng.uniform(-30, 18, n)) * rng.choice([-1.0, 1.0], n)
    c = mag.astype(F32)
    hv = rng.standard_normal(200).astype(F16)
    c[:200] = ((hv.astype(np.float64) + np.nextafter(hv, F16(np.inf)).astype(np.float64)) / 2).astype(F32)
    bv = rng.standard_normal(200).astype(F32).astype(BF16)
    bnext = (bv.view(np.uint16) + 1).view(BF16)
    c[200:400] = ((bv.astype(np.float64) + bnext.astype(np.float64)) / 2).astype(F32)
    c[400:420] = [np.nan, np.inf, -np.inf, 65504, 65519, 65520, -65520, 65536, 2.0 ** -24, 2.0 ** -25, -2.0 ** -25,
                  3 * 2.0 ** -26, 2.0 ** -14, 6e-8, 0.0, -0.0, 1e-40, 3e38, -3e38, 1.0]
    rf = rng.uniform(-1e5, 1e5, n).astype(F32)
    rf[:12] = [0.5, -0.5, 1.5, -1.5, 2.5, -2.5, -3.5, 1e10, -1e10, 2147483520.0, -2147483648.0, 0.49999997]
    xi = rng.integers(-2 ** 31, 2 ** 31, n, dtype=np.int64).astype(np.int32)
    xi[:4] = [2 ** 24 + 1, 2 ** 24 + 3, -(2 ** 31), 2 ** 31 - 1]
    xh = rng.uniform(-4, 4, n).astype(F16)
    yh = rng.uniform(-4, 4, n).astype(F16)
    ph = rng.uniform(0.05, 8, n).astype(F16)
    qh = rng.uniform(-300, 300, n).astype(F16)
    qh[:6] = [2.5, -2.5, 127.5, -128.5, 0.5, -0.5]
    rows = rng.standard_normal(5 * 37).astype(F32)
    img = np.zeros(40960, np.uint8)
    for off, arr in [(0, x), (4096, y), (8192, p), (12288, e), (16384, c), (20480, rf), (24576, xi), (28672, xh),
                     (30720, yh), (32768, ph), (34816, qh), (36864, rows)]:
        img[off:off + arr.nbytes] = arr.view(np.uint8)
    return img, dict(x=x, y=y, p=p, e=e, c=c, rf=rf, xi=xi, xh=xh, yh=yh, ph=ph, qh=qh, rows=rows)


def _vec_expected(v):
    x, y, p, e, c, rf, xi = v["x"], v["y"], v["p"], v["e"], v["c"], v["rf"], v["xi"]
    xh, yh, ph, qh, rows = v["xh"], v["yh"], v["ph"], v["qh"], v["rows"]
    h = lambda a: a.astype(F32)  # noqa: E731
    sec = []
    sec += [("Add f32", x + y), ("Sub f32", x - y), ("Mul f32", x * y), ("Div f32", x / p),
            ("Max f32", vmax(x, y)), ("Min f32", vmin(x, y))]
    sec += [("Add f16", (h(xh) + h(yh)).astype(F16)), ("Mul f16", (h(xh) * h(yh)).astype(F16)),
            ("Div f16", (h(xh) / h(ph)).astype(F16)), ("Max f16", vmax(h(xh), h(yh)).astype(F16))]
    sec += [("Adds", x + F32(0.37)), ("Muls", x * F32(-1.7)), ("Maxs", vmax(x, F32(0.1))), ("Mins", vmin(x, F32(0.1))),
            ("Muls f16", (h(xh) * F32(F16(0.3))).astype(F16))]
    sec += [("Exp f32", vexp(e)), ("Exp f16", vexp(h(xh)).astype(F16)),
            ("Ln", np.log(p.astype(np.float64)).astype(F32)), ("Sqrt", np.sqrt(p)), ("Rsqrt", F32(1) / np.sqrt(p)),
            ("Reciprocal", F32(1) / p), ("Abs", np.abs(x)), ("Relu", np.where(x > 0, x, x * F32(0)))]
    sec += [("Duplicate", np.full(1000, 3.25, F32))]
    sec += [("Cast f32->f16 RINT", to_f16(c, "rint")), ("Cast f32->bf16 RINT", c.astype(BF16)),
            ("Cast f16->f32", h(xh))]
    sec += [(f"Cast f32->i32 {m}", f32_to_i32(rf, m)) for m in ("rint", "floor", "ceil", "round", "trunc")]
    sec += [("Cast i32->f32 RINT", xi.astype(F32)), ("Cast f32->f16 ODD", to_f16(c, "odd")),
            ("Cast f32->f16 TRUNC", to_f16(c, "trunc")),
            ("Cast f16->i8 RINT", np.clip(np.rint(qh.astype(np.float64)), -128, 127).astype(np.int8))]
    lt = np.packbits(x < y, bitorder="little")
    ge = h(xh) >= F32(F16(0.25))
    sec += [("Compare LT", lt), ("Select tensor-tensor", np.where(x < y, x, y)),
            ("Compares GE f16", np.packbits(ge, bitorder="little")),
            ("Select tensor-scalar f16", np.where(ge, xh, F16(-1.0)))]
    x1 = x[:1000]
    sec += [("ReduceMax idx", np.array([x1.max(), np.array([x1.argmax()], np.uint32).view(F32)[0]], F32)),
            ("ReduceMin idx", np.array([x1.min(), np.array([x1.argmin()], np.uint32).view(F32)[0]], F32)),
            ("ReduceSum f32", np.array([reduce_sum(x1, 64, F32)], F32)),
            ("ReduceSum f16", np.array([reduce_sum(xh[:1000], 128, F16)], F16)),
            ("ReduceMax f16 idx", np.array([xh[:1000].max(), np.array([xh[:1000].argmax()], np.uint16).view(F16)[0]],
                                           F16))]
    xr = x.reshape(16, 64)
    wmax = np.stack([xr.max(1), np.asarray(xr.argmax(1), np.uint32).view(F32)], 1).reshape(-1)
    wsum = np.array([tree_sum(row) for row in xr], F32)
    hr = xh.reshape(8, 128)
    rrep = np.stack([np.asarray(hr.argmax(1), np.uint16).view(F16), hr.max(1)], 1).reshape(-1)
    sec += [("WholeReduceMax", wmax), ("WholeReduceSum", wsum), ("ReduceRepeat MAX index-value f16", rrep)]
    sec += [("Brcb + Mul row broadcast", (xr * p[:16, None]).reshape(-1))]
    r5 = rows.reshape(5, 37)
    sec += [("DataCopyPad right padding", np.concatenate([r5, np.full((5, 3), -7.0, F32)], 1).reshape(-1)),
            ("DataCopyPad round trip", rows),
            ("DataCopyPad dummy = first element", np.concatenate([r5, np.repeat(r5[:, :1], 3, 1)], 1).reshape(-1))]
    masked = np.zeros(192, F32)
    for rep in range(3):
        masked[rep * 64:rep * 64 + 40] = x[rep * 64:rep * 64 + 40] + y[rep * 64:rep * 64 + 40]
    sec += [("Add repeat form, count mask 40", masked)]
    return sec


@pytest.mark.parametrize("arch", ["arch22", "arch35"])
def test_vector_ops_match_numpy(twin, tmp_path, arch):
    exe = twin("vec_ops", arch)
    img, v = _vec_inputs(np.random.default_rng(7))
    img.tofile(tmp_path / "in.bin")
    r = _run(exe, tmp_path)
    assert r.returncode == 0, r.stderr
    out = np.fromfile(tmp_path / "out.bin", np.uint8).reshape(64, 8192)
    bad = []
    sections = _vec_expected(v)
    for i, (name, ref) in enumerate(sections):
        ref = np.asarray(ref)
        got = out[i][:ref.nbytes].view(ref.dtype)
        if not _bits_equal(got, ref) or out[i][ref.nbytes:].any():
            where = np.flatnonzero(got.view(np.uint8) != ref.view(np.uint8))[:4]
            bad.append(f"section {i} {name}: first differing bytes {where.tolist()}")
    assert not out[len(sections):].any()
    assert not bad, "\n".join(bad)


# ---------------------------------------------------------------- bitwise ops and arithmetic progressions
def _ap_ops(dt):
    """(add, mul, index) in dt's arithmetic: floats in float32 with one rounding to dt, integers wrapping."""
    dt = np.dtype(dt)
    if dt.kind == "f":
        def add(a, b):
            return (np.asarray(a, dt).astype(F32) + np.asarray(b, dt).astype(F32)).astype(dt)

        def mul(a, b):
            return (np.asarray(a, dt).astype(F32) * np.asarray(b, dt).astype(F32)).astype(dt)

        def index(i):
            return np.asarray(i, np.float64).astype(F32).astype(dt)
    else:
        def wrap(u):
            return np.asarray(u, np.uint64).astype(dt)

        def u64(a):
            return np.asarray(a, dt).astype(np.int64).astype(np.uint64)

        def add(a, b):
            return wrap(u64(a) + u64(b))

        def mul(a, b):
            return wrap(u64(a) * u64(b))

        def index(i):
            return wrap(np.asarray(i, np.uint64))
    return add, mul, index


def arith_progression(first, diff, count, dt, arch):
    """The elements ArithProgression / Arange write (arch22 may write up to the next 32-byte block)."""
    dt = np.dtype(dt)
    add, mul, index = _ap_ops(dt)
    first = np.asarray(first, dt)
    diff = np.asarray(diff, dt)
    if arch == "arch35":  # register of L lanes: l*diff + first, then + L*diff per repeat
        lanes = 64 if dt.itemsize == 8 else 256 // dt.itemsize
        reg = add(mul(index(np.arange(lanes)), diff), first)
        step = mul(index(lanes), diff)
        out = np.zeros(count, dt)
        for r in range(0, count, lanes):
            k = min(lanes, count - r)
            out[r:r + k] = reg[:k]
            reg = add(reg, step)
        return out
    e, rep = 32 // dt.itemsize, 256 // dt.itemsize
    w = count if count <= e else -(-count // e) * e
    out = np.zeros(w, dt)
    i = np.arange(min(count, e))
    if dt.kind == "f":  # scalar head: firstValue + diffValue * i in float
        out[:i.size] = (first.astype(F32) + diff.astype(F32) * i.astype(F32)).astype(dt)
    else:
        out[:i.size] = add(first, mul(diff, index(i)))
    if count > e:
        step_e = (diff.astype(F32) * F32(e)).astype(dt) if dt.kind == "f" else mul(diff, index(e))
        blocks = rep // e if count > rep else w // e
        for s0 in range(e, blocks * e, e):
            out[s0:s0 + e] = add(out[s0 - e:s0], step_e)
        if count > rep:
            step_r = (diff.astype(F32) * F32(rep)).astype(dt) if dt.kind == "f" else mul(diff, index(rep))
            for s0 in range(rep, w, rep):
                s1 = min(s0 + rep, w)
                out[s0:s1] = add(out[s0 - rep:s1 - rep], step_r)
    return out


def _logic_expected(raw_a: np.ndarray, raw_b: np.ndarray, arch: str):
    a, b = raw_a.view(np.int16), raw_b.view(np.int16)
    au, bu = raw_a.view(np.uint16), raw_b.view(np.uint16)
    sec = [("And i16", a & b), ("Or i16", a | b), ("Not i16", ~a), ("And u16 count 1000", au[:1000] & bu[:1000])]
    o = np.zeros(384, np.uint16)
    for r in range(3):
        o[r * 128:r * 128 + 100] = au[r * 128:r * 128 + 100] | bu[r * 128:r * 128 + 100]
    sec += [("Or u16 repeat, count mask 100", o)]
    m = [0xF0F0F0F0F0F0F0F0, 0x00000000FFFFFFFF]
    o = np.zeros(256, np.int16)
    for r in range(2):
        for j in range(128):
            if (m[j // 64] >> (j % 64)) & 1:
                o[r * 128 + j] = a[r * 128 + j] & b[r * 16 + j % 16]
    sec += [("And i16 repeat, bit mask, src1 block stride 0", o)]
    m = [0x00FF00FF00FF00FF, 0xFFFF0000FFFF0000]
    o = au[:1024] & bu[:1024]
    bits = np.array([(m[j // 64] >> (j % 64)) & 1 for j in range(128)] * 8, bool)
    o = np.where(bits, o | bu[:1024], o)
    sec += [("And count mask + Or bit mask in place", o)]
    o = np.zeros(1024, np.uint16)
    for r in range(4):
        o[r * 256:r * 256 + 128] = ~au[r * 128:r * 128 + 128]
    sec += [("Not u16 repeat, dst repeat stride 16", o)]
    m = [0x5555555555555555, 0x8000000000000001]
    o = np.zeros(256, np.int16)
    for j in range(128):
        if (m[j // 64] >> (j % 64)) & 1:
            o[(j // 16) * 32 + j % 16] = ~a[j]
    sec += [("Not i16 repeat, bit mask, dst block stride 2", o)]
    sec += [("ArithProgression f32 1000", arith_progression(F32(1.234), F32(5.678), 1000, F32, arch)),
            ("ArithProgression f32 20", arith_progression(F32(-2.5), F32(0.1), 20, F32, arch)),
            ("ArithProgression f16 300", arith_progression(F16(-3.0), F16(F32(0.0999)), 300, F16, arch)),
            ("ArithProgression i16 2000 (wraps)", arith_progression(32000, 37, 2000, np.int16, arch)),
            ("ArithProgression i32 300 (wraps)", arith_progression(2147483000, 3, 300, np.int32, arch)),
            ("ArithProgression i32 5 (scalar only)", arith_progression(-5, 2, 5, np.int32, arch)),
            ("Arange f32 2000", arith_progression(F32(100.0), F32(0.3), 2000, F32, arch))]
    if arch == "arch35":
        sec += [("And i32", raw_a.view(np.int32) & raw_b.view(np.int32)),
                ("Or u32 repeat", raw_a.view(np.uint32)[:256] | raw_b.view(np.uint32)[:256]),
                ("And i8", raw_a.view(np.int8) & raw_b.view(np.int8)),
                ("Or u64", raw_a.view(np.uint64) | raw_b.view(np.uint64)),
                ("Not f32 (bits)", (~raw_a.view(np.uint32)[:512]).view(F32)),
                ("Not f16 repeat (bits)", (~raw_a.view(np.uint16)).view(F16)),
                ("Not i64", ~raw_a.view(np.int64)),
                ("Not u8", ~raw_a),
                ("ArithProgression i64 1000", arith_progression(1 << 40, 123456789, 1000, np.int64, arch)),
                ("Arange f16 1000", arith_progression(F16(1000.0), F16(F32(0.3)), 1000, F16, arch))]
    return sec


@pytest.mark.parametrize("arch", ["arch22", "arch35"])
def test_bitwise_and_arith_progression_match_numpy(twin, tmp_path, arch):
    exe = twin("vec_logic", arch)
    rng = np.random.default_rng(21)
    raw = rng.integers(0, 256, 4096, dtype=np.uint8)
    raw.tofile(tmp_path / "in.bin")
    r = _run(exe, tmp_path)
    assert r.returncode == 0, r.stderr
    out = np.fromfile(tmp_path / "out.bin", np.uint8).reshape(32, 8192)
    sections = _logic_expected(raw[:2048], raw[2048:], arch)
    assert len(sections) == (26 if arch == "arch35" else 16)
    bad = []
    for i, (name, ref) in enumerate(sections):
        ref = np.asarray(ref)
        got = out[i][:ref.nbytes].view(ref.dtype)
        if not _bits_equal(got, ref) or out[i][ref.nbytes:].any():
            where = np.flatnonzero(got.view(np.uint8) != ref.view(np.uint8))[:4]
            tail = int(np.count_nonzero(out[i][ref.nbytes:]))
            bad.append(f"section {i} {name}: first differing bytes {where.tolist()}, {tail} non-zero bytes after")
    assert not out[len(sections):].any()
    assert not bad, "\n".join(bad)
    # the progressions against their closed forms: integers exactly (modulo 2^bits) ...
    n = {"arch22": lambda c, e: c if c <= e else -(-c // e) * e, "arch35": lambda c, e: c}[arch]
    i16 = out[12][:2 * n(2000, 16)].view(np.int16)
    assert np.array_equal(i16, ((32000 + 37 * np.arange(i16.size) + 2 ** 15) % 2 ** 16 - 2 ** 15).astype(np.int16))
    i32 = out[13][:4 * n(300, 8)].view(np.int32)
    assert np.array_equal(i32, ((2147483000 + 3 * np.arange(i32.size) + 2 ** 31) % 2 ** 32 - 2 ** 31).astype(np.int32))
    # ... floats close to first + i*diff, and bitwise different from the one-rounding formula (accumulation)
    f32 = out[9][:4000].view(F32).astype(np.float64)
    exact = 1.234 + 5.678 * np.arange(1000)
    np.testing.assert_allclose(f32, exact, rtol=1e-5)
    assert not np.array_equal(out[9][:4000].view(F32), (F32(1.234) + F32(5.678) * np.arange(1000, dtype=F32)))
    if arch == "arch22":  # the 20-element float progression fills its last 32-byte block (24 elements)
        assert out[10][80:96].view(F32).tolist() == arith_progression(F32(-2.5), F32(0.1), 24, F32, arch)[20:].tolist()


# ---------------------------------------------------------------- coverage of every declared overload
@pytest.mark.parametrize("arch", ["arch22", "arch35"])
def test_api_coverage(twin, tmp_path, arch):
    exe = twin("api_coverage", arch)
    rng = np.random.default_rng(0)
    img = np.zeros(8192, np.uint8)
    a8 = rng.integers(-128, 128, (16, 32)).astype(np.int8)
    b8 = rng.integers(-128, 128, (16, 32)).astype(np.int8)
    ag = rng.standard_normal((1, 32)).astype(F16)
    bg = rng.standard_normal((16, 32)).astype(F16)
    af = rng.standard_normal((16, 12)).astype(F32)
    bf = rng.standard_normal((16, 12)).astype(F32)
    xv = rng.uniform(-4, 4, 1024).astype(F32)
    xv[:4] = [0.0005, -0.0015, 2.5e-3, -3.5e-3]  # ties after x * 1000
    for off, arr in [(0, a8), (512, b8), (1024, ag), (1088, bg), (2560, af), (3328, bf), (4096, xv)]:
        img[off:off + arr.nbytes] = arr.reshape(-1).view(np.uint8)
    img.tofile(tmp_path / "in.bin")
    r = _run(exe, tmp_path)
    assert r.returncode == 0, r.stderr
    res = np.fromfile(tmp_path / "res.bin", np.uint8)
    ri = res.view(np.int32)
    rf = res.view(F32)
    # int8 Mmad, NZ Fixpipe (one 16 x 16 fractal = row-major)
    assert np.array_equal(ri[0:256].reshape(16, 16), a8.astype(np.int32) @ b8.astype(np.int32).T)
    # GEMV m = 1
    assert _bits_equal(rf[1024:1040], matmul_ref(ag, bg.T)[0])
    # fp32 Mmad with k = 12
    c32 = matmul_ref(af, bf.T)
    assert _bits_equal(rf[2048:2304].reshape(16, 16), c32)
    if arch == "arch35":  # NZ2DN (CFG_COLUMN_MAJOR): column-major output
        assert _bits_equal(rf[7680:7936].reshape(16, 16), c32.T)
    # repeat forms
    x = xv[:256]
    vec = rf[3072:3584]
    x64 = x[:64]
    assert _bits_equal(vec[0:64], F32(5) - x64)
    assert _bits_equal(vec[64:128], np.full(64, 5, F32))
    assert _bits_equal(vec[192:256], x64.astype(F16).astype(F32))
    assert _bits_equal(vec[256:320], ((np.clip(x64, -0.5, 0.5) + F32(1)) * F32(2)).astype(F32))
    assert _bits_equal(vec[320:384], x64 + x64)
    assert _bits_equal(vec[384:448], (x64 / F32(2)) / (x64 / F32(2)))
    assert _bits_equal(vec[448:512], np.full(64, 1, F32))
    # integer conversions
    oi = ri[4096:4608]
    t = rf[4608:5120]
    k = (x64 * F32(1000)).astype(F32)
    i32 = f32_to_i32(k, "rint")
    assert np.array_equal(oi[0:64], i32)
    i16 = np.clip(i32, -32768, 32767).astype(np.int16)
    assert np.array_equal(oi[64:128], np.trunc(i16.astype(F16).astype(np.float64)).astype(np.int32))
    assert np.array_equal(oi[128:192], i32)
    h100 = (x64 * F32(100)).astype(F16).astype(np.float64)
    assert np.array_equal(oi[192:256], np.clip(np.floor(h100), -128, 127).astype(np.int32))
    u8 = np.clip(np.ceil(h100), 0, 255).astype(np.int32)
    assert np.array_equal(oi[256:320], u8)
    bt = (k.view(np.uint32) & np.uint32(0xFFFF0000)).view(F32)  # bfloat16 truncation
    assert np.array_equal(oi[320:384], f32_to_i32(bt, "round"))
    assert np.array_equal(oi[384:448], u8)
    relu = np.maximum(np.maximum(oi[0:64].astype(np.int64) + oi[64:128], oi[128:192]), 0).astype(np.int32)
    assert np.array_equal(oi[448:511], relu[:63])
    assert oi[511] == oi[0] + 1
    assert _bits_equal(t[0:64], k)
    assert _bits_equal(t[64:128], i32.astype(F32))
    assert _bits_equal(t[128:192], np.clip(np.floor(k.astype(np.float64)), -32768, 32767).astype(F32))
    assert _bits_equal(t[192:256], np.floor(k))
    assert _bits_equal(t[256:320], (x64 * F32(100)).astype(F32))
    assert _bits_equal(t[320:384], bt)
    # system variables of the four vector cores
    sys = ri[5120:5152].reshape(4, 8)
    for i in range(4):
        assert sys[i].tolist() == [i, 2, i % 2, 2, 2, 1, 10 * i, 1]


# ---------------------------------------------------------------- mix kernels
def _mix_ref(q, k):
    s = np.stack([matmul_ref(qi, k.T) for qi in q])
    return vexp(((s * F32(0.125)).astype(F32) + F32(-1.0)).astype(F32))


@pytest.mark.parametrize("arch,mode,serial", [("arch22", "gm", "0"), ("arch22", "gm", "1"), ("arch35", "gm", "0"),
                                              ("arch35", "ub", "0")])
def test_mix_kernel_cube_to_vector(twin, tmp_path, arch, mode, serial):
    exe = twin("mix_pipeline", arch)
    groups, iters = 3, 5
    rng = np.random.default_rng(11)
    q = rng.standard_normal((groups * iters, 32, 32)).astype(F16)
    k = rng.standard_normal((64, 32)).astype(F16)
    q.tofile(tmp_path / "q.bin")
    k.tofile(tmp_path / "k.bin")
    r = _run(exe, tmp_path, mode, groups, env={"CVTILE_TWIN_SERIAL": serial})
    assert r.returncode == 0, r.stderr
    got = np.fromfile(tmp_path / "out.bin", F32).reshape(groups * iters, 32, 64)
    assert _bits_equal(got, _mix_ref(q, k))


# ---------------------------------------------------------------- runtime negatives
@pytest.mark.parametrize("mode,status,message", [
    ("deadlock", 4, "cvtile-twin: deadlock: every live core of the launch is blocked in a cross-core wait"),
    ("sixteen", 3, "CrossCoreSetFlag<2, PIPE_FIX>(5): flag 5 of AIV 0 (block 0, group 0, sub 0) would exceed 15"),
    ("ub_overflow", 3, "Add: dst touches UB bytes [196352, 196864), beyond the UB capacity of 196608 bytes"),
    ("wait_no_set", 3, "WaitFlag<HardEvent::V_MTE3>(0): no earlier SetFlag<HardEvent::V_MTE3>(0) on this core"),
    ("double_set", 3, "SetFlag<HardEvent::MTE2_V>(1): the event is already set and not waited"),
    ("leftover", 3, "kernel ended with events set but never waited: SetFlag<HardEvent::V_MTE3>(2)"),
])
def test_runtime_rule_breaks_stop_the_kernel(twin, mode, status, message):
    exe = twin("neg_runtime", "arch22")
    t0 = time.perf_counter()
    r = _run(exe, mode, timeout=20, env={"CVTILE_TWIN_TIMEOUT": "10"})
    dt = time.perf_counter() - t0
    assert r.returncode == status, (r.returncode, r.stderr)
    # Which core trips first is up to the thread scheduler when several blocks
    # break the same rule; the message is fixed up to the core/block numbers.
    def unnumbered(text):
        return re.sub(r"(AIV|AIC|block|group) \d+", r"\1 N", text)
    assert unnumbered(message) in unnumbered(r.stderr), r.stderr
    assert "finished without an error" not in r.stdout
    assert dt < 5.0, f"took {dt:.1f} s"
    first = r.stderr.splitlines()[0]
    assert first.startswith("cvtile-twin: "), first
