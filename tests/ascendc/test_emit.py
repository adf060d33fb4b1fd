"""The Ascend C backend, vector side: emitted kernels pass the declaration-header check for both arches and
run on the CPU twin with the simulator's pipelined-order results; hostile names cannot change the C;
unsupported constructs are typed errors naming the line.

Skips when no g++ is on PATH (the reason is printed)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import cvtile.dsl as ct
from cvtile.dsl import ascendc as A
from cvtile.dsl.jit import record_launches

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None,
                               reason="g++ is not on PATH (the Ascend C checks need a C++17 g++)")


def _example(name):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"ex_{name}", EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _manifest(d: Path) -> dict:
    return json.loads((d / "data" / "manifest.json").read_text())


@ct.jit
def _scale_add(x, y, out, alpha, N: ct.constexpr, BLOCK: ct.constexpr):
    for r0 in range(ct.block_idx() * BLOCK, N, ct.block_num() * BLOCK):
        n = min(BLOCK, N - r0)
        with ct.vector():
            a = ct.load(x[ct.ds(r0, BLOCK, valid=n), 0:64])
            b = ct.load(y[ct.ds(r0, BLOCK, valid=n), 0:64])
            ct.store(out[ct.ds(r0, BLOCK, valid=n), 0:64], a * alpha + b)


def _scale_add_args(n=200):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((n, 64)).astype(np.float32)
    y = rng.standard_normal((n, 64)).astype(np.float32)
    return x, y, np.zeros_like(x)


def test_source_is_printed_from_the_final_ir():
    x, y, out = _scale_add_args()
    ck = _scale_add.compile(x, y, out, 1.5, N=200, BLOCK=64)
    src = ck.ascendc
    assert 'extern "C" __global__ __aicore__ void _scale_add' not in src   # leading underscore is reserved
    assert "__global__ __aicore__ void user_scale_add_kernel(GM_ADDR x, GM_ADDR y, GM_ADDR out, GM_ADDR workspace" \
        in src
    assert "KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);" in src
    assert "if ASCEND_IS_AIV {" in src and "ASCEND_IS_AIC" not in src
    # every event insert_sync placed is printed, once per op
    final = ck.compilation.final
    from cvtile.dsl.ir import walk

    sets = sum(1 for op in walk(final.body) if op.kind == "event_set")
    assert src.count("SetFlag<HardEvent::") == sets
    # buffers at the planned addresses, named after the DSL variables
    plan = final.memory
    a = next(b for b in plan.buffer_of.values() if b.name == "a")
    assert f"LocalTensor<float> a = ub[{a.offset}].ReinterpretCast<float>();" in src
    assert "// line " in src


@needs_gxx
@pytest.mark.parametrize("example,bitwise", [("01_vector_add", True), ("02_softmax_rows", False)])
def test_example_emits_checks_and_runs_on_the_twin(tmp_path, example, bitwise):
    mod = _example(example)
    with record_launches() as rec:
        assert mod.main() == 0
    from cvtile.kernels.precision import tolerance

    res = A.emit(str(tmp_path), [A.Launch.of(r) for r in rec.launches], tolerance=tolerance)
    checked = A.check_project(str(tmp_path), res["kernels"])
    assert len(checked) == 4 * len(res["kernels"])
    report = A.run_project(str(tmp_path), "arch22")
    assert report.startswith("PASS"), report
    if bitwise:
        assert "bitwise equal" in report
    # the goldens are real results (the kernel wrote its output), and the twin's output files are what passed
    for out in _manifest(tmp_path)["outputs"]:
        before = np.fromfile(tmp_path / "data" / f"input_{out['name']}.bin", np.uint8)
        golden = np.fromfile(tmp_path / "data" / f"golden_{out['name']}.bin", np.uint8)
        assert not np.array_equal(before, golden)


@needs_gxx
def test_twin_catches_a_corrupted_kernel(tmp_path):
    """The comparison can fail: a kernel whose emitted Adds is turned into a Muls is reported."""
    x, y, out = _scale_add_args()
    ck = _scale_add.compile(x, y, out, 1.5, N=200, BLOCK=64)
    A.emit(str(tmp_path), [A.Launch(ck, 3, [x, y, out, 1.5])])
    src = tmp_path / "op_kernel" / "user_scale_add_kernel.cpp"
    text = src.read_text()
    assert "Add(" in text
    src.write_text(text.replace("Add(", "Sub(", 1))
    with pytest.raises(A.CheckFailed) as e:
        A.run_project(str(tmp_path), "arch22")
    assert "FAIL: out" in str(e.value) and "largest difference" in str(e.value)


def int(main, new, cvtT, xGm, delete, N: ct.constexpr):  # noqa: A001  (hostile names on purpose)
    for r0 in range(ct.block_idx() * 16, N, ct.block_num() * 16):
        n = min(16, N - r0)
        with ct.vector():
            template = ct.load(main[ct.ds(r0, 16, valid=n), 0:8])
            class_ = ct.load(new[ct.ds(r0, 16, valid=n), 0:8])
            ct.store(xGm[ct.ds(r0, 16, valid=n), 0:8], template * cvtT + class_ - delete)


hostile = ct.jit(int)
del int


@needs_gxx
def test_hostile_names_cannot_change_the_emitted_c(tmp_path):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((40, 8)).astype(np.float32)
    b = rng.standard_normal((40, 8)).astype(np.float32)
    o = np.zeros_like(a)
    ck = hostile.compile(a, b, 2.0, o, 0.5, N=40)
    lk = A.lowered(ck)
    idents = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", lk.source))
    # the kernel and its parameters are renamed away from C keywords and the backend's own names
    assert "void user_int_kernel(" in lk.source
    # the tiling struct is <Entry>Tiling: never one of the library's global <Name>Tiling structs
    assert lk.tiling_struct == "UserIntKernelTiling"
    for bad in ("GM_ADDR int", "GM_ADDR main", "GM_ADDR new", "GM_ADDR delete", "GM_ADDR cvtT"):
        assert bad not in lk.source
    assert {"user_main", "user_new", "user_delete_value", "user_cvtT_value", "user_template", "class_"} <= idents
    A.emit(str(tmp_path), [A.Launch(ck, 2, [a, b, 2.0, o, 0.5])])
    A.check_project(str(tmp_path), [lk])
    report = A.run_project(str(tmp_path), "arch22")
    assert "bitwise equal" in report, report


def test_namer_sanitises_everything():
    from cvtile.dsl.ascendc.names import Namer, c_string, comment

    n = Namer()
    assert n.ident("int") == "user_int"
    assert n.entry("u_int") == "u_int_kernel" and n.entry("time") == "time_kernel"
    # names the Ascend C headers or libc may define as macros (UB_ADDR, DT_FLOAT, errno)
    assert n.ident("UB_ADDR") == "user_UB_ADDR" and n.ident("errno") == "user_errno"
    assert n.ident("noyau_é") == "noyau__"
    assert n.ident("9lives") == "v9lives"
    assert n.ident("a;system(\"rm\")") == "a_system__rm__"
    assert n.ident("x") == "x" and n.ident("x") == "x_2"
    assert n.ident("__evil") == "user_evil" and n.ident("cvtFlag") == "user_cvtFlag"
    assert comment("a */ b\nc\\") == "a * / b?c/"
    lit = c_string('q"\\\n\u00e9')
    assert lit == '"q\\"\\\\\\012\\303\\251"'
    assert "\n" not in lit


@ct.jit
def _fill_int8(out, N: ct.constexpr):
    with ct.vector():
        ct.store(out[0:N], ct.full((N,), 3, ct.int8))


def test_unsupported_construct_is_a_typed_error_naming_the_line():
    ck = _fill_int8.compile(np.zeros(64, np.int8), N=64)
    with pytest.raises(A.AscendCUnsupported) as e:
        A.lowered(ck)
    assert "test_emit.py" in str(e.value) and "int8" in str(e.value) and "Duplicate" in str(e.value)


@needs_gxx
def test_cli_emit_runs_an_example_and_user_errors_exit_2(tmp_path):
    ex = EXAMPLES / "01_vector_add.py"
    r = subprocess.run([sys.executable, "-m", "cvtile", "emit", str(ex), "-o", str(tmp_path / "p"), "--check",
                        "--run"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "syntax check PASS" in r.stdout and r.stdout.strip().endswith("PASS")
    assert (tmp_path / "p" / "CMakeLists.txt").is_file() and (tmp_path / "p" / "run.sh").is_file()
    r = subprocess.run([sys.executable, "-m", "cvtile", "emit", "nosuch", "-o", str(tmp_path / "q")],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "nosuch" in r.stderr


@needs_gxx
def test_cli_emit_of_an_st_case_runs_on_the_twin(tmp_path, capsys, corpus_file):
    """``cvtile emit CORPUS.json --case ID``: the operator call of one st case (RingAttentionUpdate's case 1, the
    inputs ``cvtile cases`` draws for it) as a project, built and run on the twin against the simulator."""
    from cvtile.cli import main

    path = corpus_file("st/ring_attention_update.json")
    assert main(["emit", str(path), "--case", "1", "-o", str(tmp_path / "rau"), "--run"]) == 0
    out = capsys.readouterr().out
    assert "case 1 (index 0)" in out and out.count("PASS: ") == 3 and out.strip().endswith("PASS")
    assert (tmp_path / "rau" / "op_kernel" / "ring_attention_update_kernel.cpp").is_file()


@pytest.mark.parametrize("argv,needle", [
    (["--case", "0"], "no case of"),                 # the corpus' ids start at 1
    ([], "holds 152 cases: name one with --case ID"),
])
def test_cli_emit_of_an_st_case_user_errors_exit_2(tmp_path, capsys, corpus_file, argv, needle):
    from cvtile.cli import main

    path = corpus_file("st/ring_attention_update.json")
    assert main(["emit", str(path), *argv, "-o", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err


def test_cli_emit_case_without_a_corpus_exits_2(tmp_path, capsys):
    from cvtile.cli import main

    assert main(["emit", "fia", "--case", "3", "-o", str(tmp_path / "p")]) == 2
    assert "give the corpus .json file" in capsys.readouterr().err


@needs_gxx
@pytest.mark.slow
def test_cli_emit_runs_the_variant_example_on_the_twin(tmp_path):
    """A score_mod (tanh soft-cap) and a mask_mod compiled into the FIA kernel emit, compile and run on the
    CPU twin, agreeing with the simulator."""
    ex = EXAMPLES / "06_attention_variants.py"
    r = subprocess.run([sys.executable, "-m", "cvtile", "emit", str(ex), "-o", str(tmp_path / "p"), "--check",
                        "--run"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "syntax check PASS" in r.stdout and r.stdout.strip().endswith("PASS")
    assert "Tanh(" in (tmp_path / "p" / "op_kernel" / "fia_attention_kernel.cpp").read_text()


def _fia_launches(**case):
    from cvtile.cases import DEFAULT_CASES, make_inputs, with_options
    from cvtile.kernels.fia.api import npu_fused_infer_attention_score

    spec = with_options(DEFAULT_CASES[0], **case)
    q, k, v, kw = make_inputs(spec, 0)
    with record_launches() as rec:
        npu_fused_infer_attention_score(q, k, v, target=spec.target, **kw)
    return rec.launches


def _check_launches(tmp_path, launches, only=None):
    """Emit, check, build and run ``launches`` on the twin; every output passes against the simulator's under
    its class (a workspace at the query's: ``twin_tolerance``) and the upstream pass rule (``cvtile emit
    --run``'s: at most MAX_FAIL_RATIO of the elements outside, none a gross outlier). The two sum in different
    orders, and where the host's BLAS order moves a score's last bit, a P element can round one fp16 ulp apart."""
    from cvtile.kernels.precision import MAX_FAIL_RATIO, twin_tolerance

    chosen = [A.Launch.of(r) for r in launches if only is None or r.kernel.name == only]
    assert chosen
    query = launches[0].args[0]   # the first launch is the attention kernel, its first argument the query
    res = A.emit(str(tmp_path), chosen, tolerance=twin_tolerance(query.dtype), max_fail_ratio=MAX_FAIL_RATIO)
    A.check_project(str(tmp_path), res["kernels"])
    report = A.run_project(str(tmp_path), A.arch_of(chosen[0].kernel.platform))
    assert report.count("PASS") == len(res["outputs"]) >= 1, report
    return report


@needs_gxx
@pytest.mark.wide
def test_fia_flash_decode_combine_runs_on_the_twin(tmp_path):
    """The flash-decode combine alone (AIV only: merged-dim loads and stores, masks, where): bitwise."""
    report = _check_launches(tmp_path, _fia_launches(batch=1, num_heads=8, num_kv_heads=1, kv_seqlen=8192,
                                                     actual_kv=(5000,)), only="fia_fd_combine")
    assert "bitwise equal" in report, report


@pytest.mark.wide
@needs_gxx
def test_fia_decode_with_flash_decode_runs_on_the_twin(tmp_path):
    """The mix attention kernel (AIC + 2 AIV, flags, workspace slots, row chunks) and its combine, as one
    project: every output (attention_out, lse and the flash-decode partials) within the golden tolerance."""
    report = _check_launches(tmp_path, _fia_launches(batch=1, num_heads=8, num_kv_heads=1, kv_seqlen=8192,
                                                     actual_kv=(5000,)))
    assert "out" in report and "ws_o" in report


@pytest.mark.slow
@needs_gxx
def test_fia_post_quant_decode_runs_on_the_twin(tmp_path):
    """Post-quant (per-channel scale and offset): the attention kernel's int8 epilogue (Mul, Add, two
    CAST_ROUND casts, the saturating int8 store) and the flash-decode combine's, on the twin."""
    from cvtile.kernels.fia.api import npu_fused_infer_attention_score

    rng = np.random.default_rng(0)
    q = rng.uniform(-1, 1, (1, 8, 1, 64)).astype(np.float16)
    k = rng.uniform(-1, 1, (1, 1, 8192, 64)).astype(np.float16)
    v = rng.uniform(-1, 1, (1, 1, 8192, 64)).astype(np.float16)
    qs = rng.uniform(50, 200, (1, 8, 1, 64)).astype(np.float32)
    qo = rng.uniform(-2, 2, (1, 8, 1, 64)).astype(np.float32)
    with record_launches() as rec:
        npu_fused_infer_attention_score(q, k, v, num_heads=8, num_key_value_heads=1, input_layout="BNSD",
                                        scale=0.125, actual_seq_lengths_kv=[5000], quant_scale2=qs, quant_offset2=qo)
    assert {r.kernel.name for r in rec.launches} == {"fia_attention", "fia_fd_combine"}
    report = _check_launches(tmp_path, rec.launches)
    assert "out" in report


@needs_gxx
@pytest.mark.wide
def test_fia_default_decode_runs_on_the_ascend950_twin(tmp_path):
    """cvtile run's default decode case (B=4, Nq=32, Nkv=8, Skv=16384) with the Ascend 950 tiling: the
    attention kernel (mode-4 flags, 950 fractal layouts) on the arch35 twin."""
    _check_launches(tmp_path, _fia_launches(target="Ascend950"))


@needs_gxx
@pytest.mark.slow
def test_cli_emit_fia_default_cases_pass(tmp_path):
    """The issue's acceptance run: ``cvtile emit fia --check --run`` on cvtile run's default cases (the GQA
    decode with flash-decode and its combine, the causal prefill): both arches' syntax checks and the A2/A3
    twin runs PASS."""
    r = subprocess.run([sys.executable, "-m", "cvtile", "emit", "fia", "-o", str(tmp_path / "fia"), "--check",
                        "--run"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("syntax check PASS") == 2 and r.stdout.count("twin run (arch22) in") == 2, r.stdout
    assert r.stdout.strip().endswith("PASS")


def _gallery_call(name):
    """(query, key, value, keywords) of a small hooked FIA call with gallery entry ``name`` (its captures in
    ``mod_args``): a GQA prefill of 320 positions (a 32-byte multiple: the backend's UB rows need it), or for
    ``paged_soft_cap`` the gallery's decode variant, soft-capping on a paged cache."""
    from cvtile.kernels.variants.gallery import GALLERY

    rng = np.random.default_rng(7)
    if name == "paged_soft_cap":
        per, bs = 4, 128
        q = (rng.standard_normal((2, 1, 4 * 64)) * 2).astype(np.float16)
        kc, vc = ((rng.standard_normal((2 * per, bs, 64)) * 2).astype(np.float16) for _ in range(2))
        kw = dict(num_heads=4, num_key_value_heads=1, input_layout="BSH", scale=0.125, block_size=bs,
                  block_table=rng.permutation(2 * per).reshape(2, per).astype(np.int32),
                  actual_seq_lengths_kv=[300, 450], score_mod=GALLERY["soft_cap"](30.0))
        return q, kc, vc, kw
    s = 320
    q = (rng.standard_normal((1, 4, s, 64)) * 2).astype(np.float16)
    k, v = (rng.standard_normal((1, 2, s, 64)).astype(np.float16) for _ in range(2))
    kw = dict(num_heads=4, num_key_value_heads=2, input_layout="BNSD", scale=0.125, softmax_lse_flag=True)
    args = {"soft_cap": (20.0,), "alibi": (4,), "causal": (), "sliding_window": (64,), "prefix_lm": (32,),
            "document": (s,), "rel_bias": (16,)}[name]
    hook = GALLERY[name](*args)
    kind = "score_mod" if name in ("soft_cap", "alibi", "rel_bias") else "mask_mod"
    kw[kind] = hook
    if name == "document":
        kw["mod_args"] = (np.sort(rng.integers(0, 4, size=s)).astype(np.int32),)
    elif name == "rel_bias":
        kw["mod_args"] = (rng.standard_normal(4 * 33).astype(np.float32),)
    return q, k, v, kw


@needs_gxx
@pytest.mark.slow
@pytest.mark.parametrize("name", ["soft_cap", "alibi", "causal", "sliding_window", "prefix_lm", "document",
                                  "rel_bias", "paged_soft_cap"])
def test_every_gallery_variant_runs_on_the_twin(tmp_path, name):
    """Each gallery entry compiled into the FIA kernel (mask_mods with block skipping: the block table's live
    column bands) emits, passes the declaration-header check and runs on the CPU twin within the golden
    tolerance of the simulator's result."""
    from cvtile.kernels.variants import attention

    q, k, v, kw = _gallery_call(name)
    with record_launches() as rec:
        attention(q, k, v, **kw)
    _check_launches(tmp_path, rec.launches)


@needs_gxx
def test_ping_pong_copies_are_addressed_by_parity_and_run_on_the_twin(tmp_path):
    """A row-chunk loop's loaded and stored tiles alternate two UB copies: the C addresses the iteration's copy
    (``offset + ping * copy``), its back-edge events take the even or odd id by the same ping, and the twin
    (which refuses a second SetFlag on a pending id and a wait with nothing pending) runs it within the
    example's tolerance of the simulator (its division rounds as the twin's may not: not bitwise)."""
    softmax_rows = _example("02_softmax_rows").softmax_rows   # rows of 8192 columns: chunked
    x = (np.random.default_rng(3).standard_normal((32, 8192)) * 4).astype(np.float16)
    with record_launches() as rec:
        softmax_rows[1](x, np.zeros_like(x), R=32, C=8192, BR=32)
    ck = rec.launches[0].kernel
    t = next(b for b in ck.compilation.final.memory.spaces["UB"].all if b.copies == 2)
    src = ck.ascendc
    assert f"ub[{t.offset} + ping * {t.bytes // 2}]" in src
    assert re.search(r"WaitFlag<HardEvent::V_MTE2>\(\d \+ 3 \* ping\);", src), src
    from cvtile.kernels.precision import tolerance

    res = A.emit(str(tmp_path), [A.Launch.of(r) for r in rec.launches], tolerance=tolerance)
    A.check_project(str(tmp_path), res["kernels"])
    report = A.run_project(str(tmp_path), "arch22")
    assert report.startswith("PASS"), report
