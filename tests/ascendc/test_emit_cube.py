"""The Ascend C backend, cube side: GM -> L1 (Nd2Nz), L1 -> L0A/L0B (LoadData), Mmad in base-tile pieces and
L0C -> GM (Fixpipe) pass the declaration-header check for both arches and run on the CPU twin with the
simulator's pipelined-order results (within tolerance: Mmad sums k = 0..K-1 in float, the simulator's BLAS
in its own order); what the plan or the API subset cannot express is an ``AscendCUnsupported`` naming the
line.

Skips when no g++ is on PATH (the reason is printed). The FIA cases are ``wide`` (run by hand)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import cvtile.dsl as ct
from cvtile.dsl import ascendc as A

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None,
                               reason="g++ is not on PATH (the Ascend C checks need a C++17 g++)")
TARGETS = ["Ascend910B1", "Ascend950"]


def _example(name):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"ex_{name}", EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run(tmp_path, launches, atol=1e-3, rtol=1e-3) -> str:
    """Emit, syntax-check (arch22 + arch35, AIC + AIV), build and run on the twin of the kernels' target; the
    compare report, every output asserted PASS."""
    d = str(tmp_path / "proj")
    res = A.emit(d, launches, atol=atol, rtol=rtol)
    done = A.check_project(d, res["kernels"])
    assert len(done) == 4 * len(res["kernels"])
    report = A.run_project(d, A.arch_of(launches[0].kernel.platform))
    lines = [ln for ln in report.splitlines() if ln.strip()]
    assert lines and all(ln.startswith("PASS") for ln in lines), report
    assert len(lines) == len(res["outputs"]), report
    return report


def _cube_part(src: str) -> str:
    a = src.index("if ASCEND_IS_AIC {")
    b = src.find("if ASCEND_IS_AIV {", a)
    return src[a:b if b > 0 else len(src)]


def _events_balanced(src: str):
    """Every (event, id) the mma lowering uses (ids 6, 7) is set as often as it is waited, in the text."""
    for ev in ("FIX_M", "M_MTE1", "MTE1_MTE2", "MTE2_MTE1", "MTE1_M", "M_FIX"):
        for e in ("6", "7", "ev"):
            sets = len(re.findall(rf"SetFlag<HardEvent::{ev}>\({e}\w*\)", src))
            waits = len(re.findall(rf"WaitFlag<HardEvent::{ev}>\({e}\w*\)", src))
            assert sets == waits, (ev, e, sets, waits)


# ---------------------------------------------------------------------- cube-only kernels
@ct.jit
def mm_bt(a, b, c, M: ct.constexpr, N: ct.constexpr, K: ct.constexpr):
    with ct.cube():
        m = min(M, a.shape[0])
        n = min(N, b.shape[0])
        s = ct.mma(ct.load(a[ct.ds(0, M, valid=m), 0:K]), b[ct.ds(0, N, valid=n), 0:K], trans_b=True)
        ct.store(c[ct.ds(0, M, valid=m), ct.ds(0, N, valid=n)], s)


@ct.jit
def mm_b(a, b, c, M: ct.constexpr, N: ct.constexpr, K: ct.constexpr):
    with ct.cube():
        kv = min(K, a.shape[1])
        s = ct.mma(ct.load(a[0:M, ct.ds(0, K, valid=kv)]), b[ct.ds(0, K, valid=kv), 0:N])
        ct.store(c[0:M, 0:N], s)


@ct.jit
def mm_acc(a, b, c, M: ct.constexpr, N: ct.constexpr, K: ct.constexpr):
    with ct.cube():
        x = ct.load(a[0:M, 0:K])
        y = ct.load(b[0:K, 0:N])
        s = ct.mma(x, y)
        ct.store(c[0:M, 0:N], ct.mma(x, y, acc=s))


@ct.jit
def mm_gm_a(a, b, c, M: ct.constexpr, N: ct.constexpr, K: ct.constexpr):
    with ct.cube():
        y = ct.load(b[0:N, 0:K])
        ct.store(c[0:M, 0:N], ct.mma(a[0:M, 0:K], y, trans_b=True))


@ct.jit
def mm_gg(a, b, c, M: ct.constexpr, N: ct.constexpr, K: ct.constexpr):
    with ct.cube():
        kv = min(K, a.shape[1])
        s = ct.mma(a[0:M, ct.ds(0, K, valid=kv)], b[0:N, ct.ds(0, K, valid=kv)], trans_b=True)
        ct.store(c[0:M, 0:N], s)


@ct.jit
def mm_l1t(a, b, c, M: ct.constexpr, N: ct.constexpr, K: ct.constexpr):
    with ct.cube():
        y = ct.load(b[0:N, 0:K])
        x = ct.load(a[0:M, 0:K])
        ct.store(c[0:M, 0:N], ct.mma(x, y, trans_b=True))


@ct.jit
def mm_l1n(a, b, c, M: ct.constexpr, N: ct.constexpr, K: ct.constexpr):
    with ct.cube():
        y = ct.load(b[0:K, 0:N])
        x = ct.load(a[0:M, 0:K])
        ct.store(c[0:M, 0:N], ct.mma(x, y))


@ct.jit
def mm_loop(a, b, c, M: ct.constexpr, N: ct.constexpr, K: ct.constexpr):
    with ct.cube():
        acc = ct.mma(ct.load(a[0:M, 0:K]), ct.load(b[0:K, 0:N]))
    for k0 in range(K, a.shape[1], K):
        with ct.cube():
            acc = ct.mma(ct.load(a[0:M, ct.ds(k0, K)]), b[ct.ds(k0, K), 0:N], acc=acc)   # carried in L0C
    with ct.cube():
        ct.store(c[0:M, 0:N], acc)


def _f16(rng, *shape, dtype=np.float16):
    return rng.uniform(-1, 1, shape).astype(dtype)


try:
    import ml_dtypes

    BF16 = ml_dtypes.bfloat16
except ImportError:      # pragma: no cover - ml_dtypes comes with the simulator's dependencies
    BF16 = None


#: (id, kernel, a shape, b shape, c shape and dtype, constexprs): each exercises one part of the lowering
CUBE_CASES = [
    ("stream-bt-valid", mm_bt, (50, 64), (40, 64), ((64, 64), np.float32), dict(M=64, N=64, K=64)),
    ("stream-b-valid-k", mm_b, (64, 40), (40, 64), ((64, 64), np.float32), dict(M=64, N=64, K=64)),
    ("l1-acc", mm_acc, (32, 64), (64, 48), ((32, 48), np.float32), dict(M=32, N=48, K=64)),
    ("stream-a", mm_gm_a, (32, 64), (48, 64), ((32, 48), np.float32), dict(M=32, N=48, K=64)),
    ("fixpipe-f16", mm_bt, (50, 64), (40, 64), ((64, 64), np.float16), dict(M=64, N=64, K=64)),
    ("k-pieces-l1", mm_acc, (32, 608), (608, 48), ((32, 48), np.float32), dict(M=32, N=48, K=608)),
    ("k-pieces-stream", mm_gg, (48, 600), (64, 600), ((48, 64), np.float32), dict(M=48, N=64, K=640)),
    ("row-blocks", mm_gg, (256, 64), (64, 64), ((256, 64), np.float32), dict(M=256, N=64, K=64)),
    ("row-blocks-l1", mm_acc, (144, 64), (64, 48), ((144, 48), np.float32), dict(M=144, N=48, K=64)),
    ("column-loop-bt", mm_l1t, (64, 64), (1024, 64), ((64, 1024), np.float32), dict(M=64, N=1024, K=64)),
    ("column-loop-b", mm_l1n, (64, 64), (64, 1024), ((64, 1024), np.float32), dict(M=64, N=1024, K=64)),
    ("streamed-out", mm_gg, (256, 300), (512, 300), ((256, 512), np.float16), dict(M=256, N=512, K=320)),
    ("acc-loop", mm_loop, (64, 256), (256, 48), ((64, 48), np.float32), dict(M=64, N=48, K=64)),
    ("bf16", mm_bt, (50, 64), (40, 64), ((64, 64), BF16), dict(M=64, N=64, K=64)),
]
#: the cases whose 950 layout differs (L0A Nz) or whose size depends on L0C: run there too
CUBE_950 = {"l1-acc", "row-blocks", "column-loop-b", "streamed-out", "stream-a", "bf16"}


def _cube_params():
    out = []
    for case in CUBE_CASES:
        for t in TARGETS:
            if t == "Ascend950" and case[0] not in CUBE_950:
                continue
            out.append(pytest.param(case, t, id=f"{case[0]}-{t}"))
    return out


@needs_gxx
@pytest.mark.parametrize("case,target", _cube_params())
def test_cube_kernel_runs_on_twin(tmp_path, case, target):
    _, fn, ash, bsh, (csh, cdt), cx = case
    if cdt is None:
        pytest.skip("ml_dtypes is not installed")
    rng = np.random.default_rng(3)
    idt = BF16 if cdt is BF16 else np.float16
    a, b, c = _f16(rng, *ash, dtype=idt), _f16(rng, *bsh, dtype=idt), np.zeros(csh, cdt)
    ck = fn.on(target).compile(a, b, c, **cx)
    src = A.lowered(ck).source
    assert "KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIC_ONLY);" in src
    assert "Mmad(" in src and "Fixpipe<" in src and "LoadData(" in src
    _events_balanced(src)
    tol = {np.float16: 2e-3, BF16: 1e-2}.get(cdt, 1e-3)       # a 16-bit result may round the other way
    _run(tmp_path, [A.Launch(ck, 1, [a, b, c])], atol=tol, rtol=tol)


@needs_gxx
@pytest.mark.parametrize("target", TARGETS)
def test_int8_mma_is_exact(tmp_path, target):
    """int8 x int8 -> int32 (C0 = 32): Mmad and the simulator agree bit for bit."""
    rng = np.random.default_rng(0)
    a = rng.integers(-100, 100, (50, 64)).astype(np.int8)
    b = rng.integers(-100, 100, (40, 64)).astype(np.int8)
    c = np.zeros((64, 64), np.int32)
    ck = mm_bt.on(target).compile(a, b, c, M=64, N=64, K=64)
    report = _run(tmp_path, [A.Launch(ck, 1, [a, b, c])], atol=0, rtol=0)
    assert "bitwise equal" in report


@ct.jit
def mm_paged(q, cache, bt, c, w, out, M: ct.constexpr, N: ct.constexpr, D: ct.constexpr):
    with ct.cube():
        s2 = min(N, c.shape[1])
        kv = cache.paged(bt[0], s2)
        s = ct.mma(ct.load(q[0:M, 0:D]), kv[ct.ds(0, N, valid=s2), 0:D], trans_b=True)     # streamed, paged
        ct.store(c[0:M, ct.ds(0, N, valid=s2)], s)
        x = ct.load(kv[ct.ds(0, N, valid=s2), 0:D])                                          # GM -> L1, paged
        ct.store(c[ct.ds(M, M), ct.ds(0, N, valid=s2)], ct.mma(ct.load(q[0:M, 0:D]), x, trans_b=True))
        ct.store(out.paged(bt[0], s2)[ct.ds(0, N, valid=s2), 0:D], ct.mma(x, w[0:D, 0:D]))  # Fixpipe per row


@needs_gxx
@pytest.mark.parametrize("target", TARGETS)
def test_paged_windows(tmp_path, target):
    """Rows read and written through a block table: one Nd2Nz / Fixpipe per row, the block index checked."""
    rng = np.random.default_rng(0)
    q = _f16(rng, 32, 64)
    cache = _f16(rng, 8, 16, 64)                       # 8 blocks of 16 rows
    bt = np.array([[5, 2, 7, 0, 1, 3, 4, 6]], np.int32)
    c = np.zeros((64, 100), np.float32)
    w = _f16(rng, 64, 64)
    out = np.zeros((8, 16, 64), np.float32)
    ck = mm_paged.on(target).compile(q, cache, bt, c, w, out, M=32, N=112, D=64)
    cube = _cube_part(A.lowered(ck).source)
    assert cube.count("paged KV: a block-table entry is not a valid block index") == 3
    _run(tmp_path, [A.Launch(ck, 1, [q, cache, bt, c, w, out])])


@needs_gxx
def test_row_stride_beyond_16_bits(tmp_path):
    """Nd2NzParams.srcDValue is 16-bit: rows further apart are copied one by one (the runtime branch)."""
    rng = np.random.default_rng(0)
    a, b, c = _f16(rng, 16, 65600), _f16(rng, 16, 65600), np.zeros((16, 16), np.float32)
    ck = mm_bt.compile(a, b, c, M=16, N=16, K=64)
    assert "if (cvtT.a_dim1 >= 1 && cvtT.a_dim1 <= 65535) {" in A.lowered(ck).source
    _run(tmp_path, [A.Launch(ck, 1, [a, b, c])])


def test_cube_source_follows_the_plan():
    """Nd2Nz into the planned L1 tile, LoadData into the plan's base tiles, one Mmad per piece, Fixpipe NZ2ND."""
    rng = np.random.default_rng(0)
    a, b, c = _f16(rng, 32, 608), _f16(rng, 608, 48), np.zeros((32, 48), np.float32)
    ck = mm_acc.compile(a, b, c, M=32, N=48, K=608)
    src = A.lowered(ck).source
    plan = ck.compilation.final.memory
    x = next(bf for bf in plan.buffer_of.values() if bf.name == "x")
    assert f"LocalTensor<half> x = l1[{x.offset}].ReinterpretCast<half>();" in src
    # rows, columns, the source row length (runtime: a per-row fallback beyond 16 bits), 32 rows per block
    assert "DataCopy(x, aGm[0], Nd2NzParams(1, 32, 608, 0, static_cast<uint16_t>(cvtT.a_dim1), 32, 1, 0));" in src
    pa = next(bf for bf in plan.programs["aic"]["L0A"].all if bf.name.endswith(".a"))
    assert f"l0a[{pa.offset} + pp * {pa.bytes // 2}]" in src              # ping-pong base tiles
    assert "for (int64_t k0 = 0; k0 < 608; k0 += 256) {   // K pieces" in src
    assert "MmadParams(32, 48, static_cast<uint16_t>(kLen), 0, false, (k0 == 0))" in src   # init on the first
    assert "MmadParams(32, 48, static_cast<uint16_t>(kLen_2), 0, false, false)" in src      # acc= accumulates
    assert "FixpipeParamsV220 fixParams(48, 32, 32, static_cast<uint32_t>(cvtT.c_dim1), false);" in src
    assert "fixParams.quantPre = QuantMode_t::NoQuant;" in src
    _events_balanced(src)


def test_arch35_loads_l0a_in_nz_order():
    rng = np.random.default_rng(0)
    a, b, c = _f16(rng, 32, 64), _f16(rng, 64, 48), np.zeros((32, 48), np.float32)
    s22 = _cube_part(A.lowered(mm_acc.compile(a, b, c, M=32, N=48, K=64)).source)
    s35 = _cube_part(A.lowered(mm_acc.on("Ascend950").compile(a, b, c, M=32, N=48, K=64)).source)
    # A2/A3 Zz: one LoadData per 16-row block; 950 Nz: one LoadData of all fractals in L1 order
    assert s22.count("LoadData(aL0") == 4 and "LoadData(aL0[1024], x[256]" in s22
    assert s35.count("LoadData(aL0") == 2 and "LoadData(aL0, x, LoadData2DParams(0, static_cast<uint8_t>(4 * 2)" in s35


# ---------------------------------------------------------------------- unsupported constructs
def _non_transposed_b_on_twin(tmp_path, a, b, tol: float, n: int | None = None) -> str:
    """mm_b of a by the first n columns of B stored [K, N] (all of them by default) in the simulator (against
    float64 within ``tol``), then on the twin: the source transposes B into L0B with LoadDataWithTranspose; the
    twin's report."""
    from cvtile.dsl.jit import record_launches

    n = n or b.shape[1]
    c = np.zeros((a.shape[0], n), np.int32 if a.dtype == np.int8 else np.float32)
    with record_launches() as rec:
        mm_b[1](a, b, c, M=a.shape[0], N=n, K=a.shape[1])
    np.testing.assert_allclose(c, a.astype(np.float64) @ b[:, :n].astype(np.float64), rtol=tol, atol=tol)
    launches = [A.Launch.of(r) for r in rec.launches]
    assert "LoadDataWithTranspose(" in A.lowered(launches[0].kernel).source
    return _run(tmp_path, launches, atol=tol, rtol=tol)


@needs_gxx
@pytest.mark.parametrize("k, n", [(64, 32), (96, 64), (64, 31), (64, 120)])
def test_int8_non_transposed_b_runs_on_the_twin(tmp_path, k, n):
    """B stored [K, N] int8: L1 -> L0B by LoadDataWithTranspose (32 x 32 squares, two L0B fractals each); the
    int32 result is exact, so the twin's equals the simulator's bit for bit; K 96 is three squares per column
    block; N 31 and 120 (the FIA antiquant kernel's odd head dims) fill their last square with the L1 block's
    zero padding."""
    rng = np.random.default_rng(7)
    a, b = rng.integers(-128, 128, (32, k)).astype(np.int8), rng.integers(-128, 128, (k, n)).astype(np.int8)
    report = _non_transposed_b_on_twin(tmp_path, a, b, 0)
    assert "bitwise equal" in report, report


@needs_gxx
@pytest.mark.parametrize("k, n, width", [(64, 32, 32), (40, 24, 24), (608, 48, 48), (64, 300, 300),
                                          (40, 24, 5000)])
def test_float_non_transposed_b_runs_on_the_twin(tmp_path, k, n, width):
    """B stored [K, N] float (FlashAttentionScore's fp32 P @ V): its GM stream pieces go to L1 as Zz (16-row NZ
    bands: one Nd2Nz for the whole bands and one for the rest, or, for rows 5000 elements apart, whose 16 rows
    exceed Nd2Nz's 16-bit source stride, one per band), and L1 -> L0B is the 32-bit LoadDataWithTranspose, each
    16 x 16 square (two 16 x 8 fractals side by side) into two L0B fractals. K 40 ends in a half band, N 24 in a
    half square, K 608 runs K pieces, N 300 column pieces."""
    rng = np.random.default_rng(11)
    a, b = rng.uniform(-1, 1, (32, k)).astype(np.float32), rng.uniform(-1, 1, (k, width)).astype(np.float32)
    _non_transposed_b_on_twin(tmp_path, a, b, 1e-4, n)


def test_float_non_transposed_b_on_ascend950_is_unsupported():
    ck = mm_b.on("Ascend950").compile(np.ones((32, 64), np.float32), np.ones((64, 32), np.float32),
                                      np.zeros((32, 32), np.float32), M=32, N=32, K=64)
    with pytest.raises(A.AscendCUnsupported, match=r"non-transposed B of float32 on Ascend950"):
        A.lowered(ck)


def test_int8_non_transposed_b_with_a_half_square_piece_is_unsupported():
    """N 48: its one column piece is three 16-column fractals, a square and a half."""
    ck = mm_b.compile(np.ones((32, 64), np.int8), np.ones((64, 48), np.int8), np.zeros((32, 48), np.int32),
                      M=32, N=48, K=64)
    with pytest.raises(A.AscendCUnsupported, match=r"are not whole 32-column squares"):
        A.lowered(ck)


def test_int8_non_transposed_b_on_ascend950_is_unsupported():
    a = np.ones((32, 64), np.int8)
    b = np.ones((64, 32), np.int8)
    c = np.zeros((32, 32), np.int32)
    ck = mm_b.on("Ascend950").compile(a, b, c, M=32, N=32, K=64)
    with pytest.raises(A.AscendCUnsupported, match=r"non-transposed B of int8 on Ascend950") as e:
        A.lowered(ck)
    assert e.value.loc is not None and e.value.loc.line > 0


@needs_gxx
def test_rows_padded_to_nz_fit_their_planned_buffers(tmp_path):
    """200 rows: the L1 operand's NZ layout and the resident L0C result's fractals pad them to 208; the plan
    sizes both buffers so (``plan_memory.tile_bytes``; it used to plan 200 rows and the lowering refused the
    kernel), and the kernel runs on the twin."""
    rng = np.random.default_rng(0)
    a, b, c = _f16(rng, 200, 64), _f16(rng, 64, 48), np.zeros((200, 48), np.float32)
    ck = mm_acc.compile(a, b, c, M=200, N=48, K=64)
    sizes = {(bf.space, bf.shape): bf.bytes for sp in ck.report.spaces.values() for bf in sp.all}
    assert sizes[("L1", (200, 64))] >= 208 * 64 * 2 and sizes[("L0C", (200, 48))] >= 208 * 48 * 4
    from cvtile.dsl.jit import record_launches

    with record_launches() as rec:
        mm_acc[1](a, b, c, M=200, N=48, K=64)
    _run(tmp_path, [A.Launch.of(r) for r in rec.launches])


@needs_gxx
def test_a_staged_l1_operand_lives_until_its_mma_regression(tmp_path):
    """Regression: the plan freed a staged L1 operand at its staged copy, so the mma's own stream pieces (the
    GM operand, 256 rows in two pieces) could take its place while the mma still read it piece by piece; the
    backend refused the kernel (and the FIA antiquant kernel's P @ V). The operand now lives until its mma
    (``plan_memory``): the kernel lowers and runs on the twin."""
    rng = np.random.default_rng(0)
    a, b, c = _f16(rng, 256, 64), _f16(rng, 64, 64), np.zeros((256, 64), np.float32)
    ck = mm_bt.compile(a, b, c, M=256, N=64, K=64)
    l1 = [bf for bf in ck.report.spaces["L1"].all]
    operand = next(bf for bf in l1 if bf.shape == (256, 64) and not bf.name.startswith("mma@"))
    stream = next(bf for bf in l1 if bf.name.endswith(".b.stream"))
    assert operand.end > stream.start, (operand, stream)        # alive at the mma ...
    assert operand.offset + operand.bytes <= stream.offset or stream.offset + stream.bytes <= operand.offset
    A.lowered(ck)
    from cvtile.dsl.jit import record_launches

    with record_launches() as rec:
        mm_bt[1](a, b, c, M=256, N=64, K=64)
    _run(tmp_path, [A.Launch.of(r) for r in rec.launches])


# ---------------------------------------------------------------------- mixed kernels
@ct.jit
def qk_pv(x, w, v, out, M: ct.constexpr, D: ct.constexpr, BN: ct.constexpr):
    for m0 in range(ct.block_idx() * M, x.shape[0], ct.block_num() * M):
        with ct.cube():
            q1 = ct.load(x[ct.ds(m0, M), 0:D])
        with ct.vector():
            acc = ct.zeros((M, D), ct.float32)
        for n0 in range(0, w.shape[0], BN):
            with ct.cube():
                s = ct.mma(q1, w[ct.ds(n0, BN), 0:D], trans_b=True)
            with ct.vector():
                p16 = ct.cast(s * 0.125, ct.float16)
            with ct.cube():
                o = ct.mma(p16, v[ct.ds(n0, BN), 0:D])           # the hand-off staged through L1 stream pieces
            with ct.vector():
                acc = acc + o
        with ct.vector():
            ct.store(out[ct.ds(m0, M), 0:D], acc)


@needs_gxx
@pytest.mark.parametrize("target", TARGETS)
def test_example_05_cube_vector_subblocks(tmp_path, target):
    m = _example("05_cube_vector_subblocks")
    rows, N, D, M = 256, 128, 64, 64
    rng = np.random.default_rng(0)
    q = rng.uniform(-1, 1, (rows, D)).astype(np.float16)
    k = rng.uniform(-1, 1, (N, D)).astype(np.float16)
    ws = np.zeros((rows, N), np.float32)
    p = np.zeros((rows, N), np.float16)
    args = [q, k, ws, p, D ** -0.5]
    ck = m.scores_softmax.on(target).compile(*args, M=M, N=N, D=D)
    src = A.lowered(ck).source
    cube = _cube_part(src)
    assert "DataCopy(load, qGm[" in cube and "Nd2NzParams(1, 64, 64, 0," in cube
    assert "Mmad(s, aL0, bL0, MmadParams(64, 128, 64, 0, false, true));" in cube
    assert "Fixpipe<float, float, CFG_ROW_MAJOR>(wsGm[" in cube
    _events_balanced(cube)
    report = _run(tmp_path, [A.Launch(ck, 2, args)])
    # the fp32 scores may match bitwise or within tolerance (the simulator's fp32 matmul sums in the host BLAS's
    # order, which differs between machines); both pass
    assert re.search(r"PASS: ws (within|bitwise)", report) and re.search(r"PASS: p (within|bitwise)", report), report


@needs_gxx
@pytest.mark.parametrize("target", TARGETS)
def test_example_03_flash_attention(tmp_path, target):
    m = _example("03_flash_attention")
    S, D, BM, BN = 200, 64, 64, 64
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((S, D)).astype(np.float16) for _ in range(3))
    out = np.zeros((S, D), np.float16)
    args = [q, k, v, out, 1.0 / np.sqrt(D)]
    ck = m.flash_attention.on(target).compile(*args, S=S, D=D, BM=BM, BN=BN)
    cube = _cube_part(A.lowered(ck).source)
    assert "operand b streamed from GM" in cube                         # k and v stream through L1 pieces
    assert "LocalTensor<half> p16 = l1[" in cube                         # the hand-off, loaded at its flags
    _events_balanced(cube)
    _run(tmp_path, [A.Launch(ck, 2, args)])


@needs_gxx
def test_handoff_through_l1_stream_pieces(tmp_path):
    rng = np.random.default_rng(0)
    x, w, v = _f16(rng, 128, 64), _f16(rng, 192, 64), _f16(rng, 192, 64)
    out = np.zeros((128, 64), np.float32)
    ck = qk_pv.compile(x, w, v, out, M=64, D=64, BN=64)
    _run(tmp_path, [A.Launch(ck, 2, [x, w, v, out])])


# ---------------------------------------------------------------------- FIA (slow)
def _fia_launches(spec):
    from cvtile.cases import make_inputs
    from cvtile.dsl.jit import record_launches
    from cvtile.kernels.fia.api import npu_fused_infer_attention_score

    q, k, v, kw = make_inputs(spec, 0)
    with record_launches() as rec:
        npu_fused_infer_attention_score(q, k, v, target=spec.target, **kw)
    shared, launches = {}, []
    for r in rec.launches:     # the arrays as they were before the launches, one object per GM buffer
        args = []
        for a in r.args:
            if isinstance(a, np.ndarray):
                args.append(shared.setdefault(id(a), r.before[id(a)]))
            else:
                args.append(a)
        launches.append(A.Launch(r.kernel, r.grid, args))
    return launches


def _fia_spec(kind: str, target: str):
    from cvtile.cases import CaseSpec

    if kind == "prefill":    # G = 4 folded rows (M = 256: two L0C row blocks), S2 = 512 (streamed out), FD split
        return CaseSpec(name="p", batch=2, num_heads=8, num_kv_heads=2, q_seqlen=64, kv_seqlen=600, head_dim=64,
                        dtype="float16", layout="BNSD", lse=True, target=target)
    return CaseSpec(name="d", batch=1, num_heads=8, num_kv_heads=2, q_seqlen=1, kv_seqlen=4096, head_dim=128,
                    dtype="float16", layout="BNSD", lse=True, target=target)


# the FIA API compiles its kernels for the tiling's platform (A2/A3 or Ascend 950)
@pytest.mark.wide
@needs_gxx
@pytest.mark.parametrize("kind", ["prefill", "decode"])
def test_fia_lowers_and_checks(tmp_path, kind):
    launches = _fia_launches(_fia_spec(kind, "Ascend910B1"))
    cube = _cube_part(A.lowered(launches[0].kernel).source)
    assert "streamed out of L0C piece by piece at its store" in cube     # S = Q K^T exceeds the L0C pieces
    assert "runs here, streaming it from its slot" in cube               # P exceeds the L1 stream pieces
    _events_balanced(cube)
    d = str(tmp_path / "proj")
    res = A.emit(d, launches, atol=1e-3, rtol=1e-3, with_data=False)
    A.check_project(d, res["kernels"])


# one FIA build runs in the default tier (the A2 prefill: streamed-out scores, a P hand-off streamed from its slot,
# the flash-decode combine), so CI compiles and runs an emitted FIA project; the rest are the wide tier's
_FIA_TWIN = [pytest.param(k, t, marks=() if (k, t) == ("prefill", "Ascend910B1") else pytest.mark.wide, id=f"{t}-{k}")
             for t in TARGETS for k in ("prefill", "decode")]


@needs_gxx
@pytest.mark.parametrize("kind, target", _FIA_TWIN)
def test_fia_runs_on_twin(tmp_path, kind, target):
    launches = _fia_launches(_fia_spec(kind, target))
    _events_balanced(_cube_part(A.lowered(launches[0].kernel).source))
    _run(tmp_path, launches)
