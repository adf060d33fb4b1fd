"""Opt-in: every emitted kernel compiled against the real public Ascend C headers (CPU-debug mode).

Where ``ASC_DEVKIT_DIR`` and ``ASC_TOOLS_DIR`` name local copies of the public repositories asc-devkit
(GitHub mirror ``mirror-cann/asc-devkit``) and asc-tools (``hicann/asc-tools``), the kernels the backend
emits (examples 01, 02, 03 and 05, the FIA attention and flash-decode combine kernels of a decode and a
prefill call, on Ascend910B1 and, for the cube examples and FIA, Ascend950, the A2/A3 MLA FA-quant and
full-quant kernels of their tests' module calls, the system-prefix kernel, RingAttentionUpdate's and an fp32
FlashAttentionScore's) are each
syntax-checked with ``g++ -std=c++17 -fsyntax-only`` for the four macro sets (arch22 / arch35 x AIC / AIV), with the stub
header ``cvtile.dsl.ascendc.real_headers`` generates from those headers at test time. A kernel the
backend does not lower today (``AscendCUnsupported``) is skipped with the reason. Slow (about 10 s and
400 MB per check), so marked ``slow`` as well; one g++ at a time.

    ASC_DEVKIT_DIR=/tmp/asc/asc-devkit ASC_TOOLS_DIR=/tmp/asc/asc-tools \\
        python -m pytest tests/ascendc/test_real_headers.py -m slow

``CVTILE_ASC_SCRATCH=DIR`` keeps the generated stub header (and what is known clean) across runs.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import cvtile
from cvtile.dsl import ascendc as A
from cvtile.dsl.ascendc import real_headers as R
from cvtile.dsl.ascendc.check import syntax_check

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DEVKIT, TOOLS = os.environ.get("ASC_DEVKIT_DIR"), os.environ.get("ASC_TOOLS_DIR")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (DEVKIT and TOOLS),
                       reason="opt-in: set ASC_DEVKIT_DIR and ASC_TOOLS_DIR to local copies of the public "
                              "repositories mirror-cann/asc-devkit and hicann/asc-tools"),
    pytest.mark.skipif(shutil.which(os.environ.get("CXX") or "g++") is None,
                       reason="g++ is not on PATH (the Ascend C checks need a C++17 g++)"),
]

T22, T35 = "Ascend910B1", "Ascend950"
# (case, target): the kernels each emits, by role
CASES = {
    ("ex01_vector_add", T22): ["scale_add"],
    ("ex02_softmax_rows", T22): ["softmax_rows"],
    ("ex03_flash_attention", T22): ["flash_attention"],
    ("ex03_flash_attention", T35): ["flash_attention"],
    ("ex05_cube_vector_subblocks", T22): ["scores_softmax"],
    ("ex05_cube_vector_subblocks", T35): ["scores_softmax"],
    ("fia_decode_fd", T22): ["fia_attention", "fia_fd_combine"],
    ("fia_decode_fd", T35): ["fia_attention", "fia_fd_combine"],
    ("fia_prefill", T22): ["fia_attention", "fia_fd_combine"],
    ("fia_prefill", T35): ["fia_attention", "fia_fd_combine"],
    ("fia_mla_quant", T22): ["fia_mla_quant"],
    ("fia_fullquant", T22): ["fia_fullquant"],
    ("fia_prefix", T22): ["fia_attention"],
    ("ring_attention_update", T22): ["ring_attention_update_kernel"],
    ("fas_fp32", T22): ["fas_attention"],
}
SETS = list(A.MACROS)


def _example(name):
    spec = importlib.util.spec_from_file_location(f"real_ex_{name}", EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _kernel_test(name):
    path = Path(__file__).resolve().parents[1] / "kernels" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"real_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _launches(case: str, target: str) -> list:
    """The launches of one case (kernels compiled, arguments as launched)."""
    import contextlib
    import io

    from cvtile.dsl.jit import record_launches

    if case in ("ex01_vector_add", "ex02_softmax_rows"):
        mod = _example(case[2:])
        with record_launches() as rec, contextlib.redirect_stdout(io.StringIO()):
            assert mod.main() == 0
        return [A.Launch.of(r) for r in rec.launches]
    rng = np.random.default_rng(0)
    if case == "ex03_flash_attention":     # the shapes of tests/ascendc/test_emit_cube.py
        S, D = 200, 64
        q, k, v = (rng.standard_normal((S, D)).astype(np.float16) for _ in range(3))
        args = [q, k, v, np.zeros((S, D), np.float16), 1.0 / np.sqrt(D)]
        ck = _example("03_flash_attention").flash_attention.on(target).compile(*args, S=S, D=D, BM=64, BN=64)
        return [A.Launch(ck, 2, args)]
    if case == "ex05_cube_vector_subblocks":
        rows, N, D, M = 256, 128, 64, 64
        q = rng.uniform(-1, 1, (rows, D)).astype(np.float16)
        k = rng.uniform(-1, 1, (N, D)).astype(np.float16)
        args = [q, k, np.zeros((rows, N), np.float32), np.zeros((rows, N), np.float16), D ** -0.5]
        ck = _example("05_cube_vector_subblocks").scores_softmax.on(target).compile(*args, M=M, N=N, D=D)
        return [A.Launch(ck, 2, args)]
    if case == "fia_prefix":      # the system prefix's if between two streamed matmuls (its kernel test's call)
        q, k, v, kw = _kernel_test("test_fia_shared_prefix")._call(rng)
        with record_launches() as rec:
            cvtile.npu_fused_infer_attention_score(q, k, v, **kw)
        return [A.Launch.of(r) for r in rec.launches]
    if case == "fas_fp32":                 # FlashAttentionScore in fp32: P @ V through the 32-bit transposing load
        from cvtile.kernels.fas.api import flash_attention_score

        q, k, v = (rng.uniform(-1, 1, (1, 2, 100, 64)).astype(np.float32) for _ in range(3))
        with record_launches() as rec:
            flash_attention_score(q, k, v, head_num=2, input_layout="BNSD", scale=0.125)
        return [A.Launch.of(r) for r in rec.launches]
    if case == "ring_attention_update":    # its strided lane-0 loads
        with record_launches() as rec:
            cvtile.npu_ring_attention_update(**_kernel_test("test_ring_attention_update").make("SBH", np.float16))
        return [A.Launch.of(r) for r in rec.launches]
    from cvtile.cases import DEFAULT_CASES, CaseSpec, make_inputs, with_options
    from cvtile.kernels.fia.api import fused_infer_attention_score_v4, npu_fused_infer_attention_score

    if case in ("fia_mla_quant", "fia_fullquant"):   # the module calls of their kernel tests
        mod = _kernel_test(f"test_{case}")
        with record_launches() as rec:
            if case == "fia_mla_quant":
                fused_infer_attention_score_v4(**mod._call(softmax_lse_flag=True))
            else:
                npu_fused_infer_attention_score(**mod._call(scale=1.0, softmax_lse_flag=True))
        return [A.Launch.of(r) for r in rec.launches]

    if case == "fia_decode_fd":            # the flash-decode case of tests/ascendc/test_emit.py
        spec = with_options(DEFAULT_CASES[0], batch=1, num_heads=8, num_kv_heads=1, kv_seqlen=8192,
                            actual_kv=(5000,), target=target)
    else:
        spec = CaseSpec(name="p", batch=2, num_heads=8, num_kv_heads=2, q_seqlen=64, kv_seqlen=600, head_dim=64,
                        dtype="float16", layout="BNSD", lse=True, target=target)
    q, k, v, kw = make_inputs(spec, 0)
    with record_launches() as rec:
        npu_fused_infer_attention_score(q, k, v, target=spec.target, **kw)
    return [A.Launch.of(r) for r in rec.launches]


@pytest.fixture(scope="session")
def emitted(tmp_path_factory) -> dict:
    """(case, target, role) -> the emitted kernel file, or why there is none: '!reason' (skip) or '?error'."""
    root = tmp_path_factory.mktemp("real_headers_emit")
    out = {}
    for (case, target), roles in CASES.items():
        try:
            launches = _launches(case, target)
        except Exception as e:  # noqa: BLE001  (reported by the tests of this case)
            for role in roles:
                out[(case, target, role)] = f"?{case} on {target} could not be run: {type(e).__name__}: {e}"
            continue
        for role in roles:
            mine = [L for L in launches if L.kernel.name == role]
            if not mine:
                out[(case, target, role)] = f"!{case} on {target} launches no {role} kernel"
                continue
            try:
                lk = A.lowered(mine[0].kernel)
            except A.AscendCUnsupported as e:
                out[(case, target, role)] = f"!not lowered today (AscendCUnsupported): {str(e).splitlines()[0]}"
                continue
            except A.AscendCError as e:
                out[(case, target, role)] = f"?lowering failed: {e}"
                continue
            d = root / f"{case}_{target}_{role}"
            A.emit(str(d), mine, with_data=False)
            out[(case, target, role)] = str(d / "op_kernel" / f"{lk.name}.cpp")
    return out


@pytest.fixture(scope="session")
def scratch(tmp_path_factory) -> str:
    return os.environ.get("CVTILE_ASC_SCRATCH") or str(tmp_path_factory.mktemp("real_headers_scratch"))


@pytest.fixture(scope="session")
def real_flags(emitted, scratch) -> list:
    """The stub generated from the real headers, probed with every emitted kernel."""
    return R.prepare(DEVKIT, TOOLS, scratch, probes=[p for p in emitted.values() if not p.startswith(("!", "?"))])


def _params():
    for (case, target), roles in CASES.items():
        for role in roles:
            for arch, core in SETS:
                yield pytest.param(case, target, role, arch, core, id=f"{case}-{target}-{role}-{arch}-{core}")


@pytest.mark.parametrize("case,target,role,arch,core", list(_params()))
def test_emitted_kernel_compiles_against_the_real_headers(emitted, real_flags, case, target, role, arch, core):
    path = emitted[(case, target, role)]
    if path.startswith("!"):
        pytest.skip(path[1:])
    if path.startswith("?"):
        pytest.fail(path[1:], pytrace=False)
    try:
        R.check_real(path, arch, core, real_flags)
        return
    except A.CheckFailed as e:
        failure = str(e)
    try:
        syntax_check(path, arch, core, include_dirs=[os.path.dirname(path)])
        decl = "it PASSES the project's declaration header (the header is laxer than the real API)"
    except A.CheckFailed:
        decl = "it fails the project's declaration header as well"
    pytest.fail(f"{failure}\n-- {decl}", pytrace=False)


def test_generated_stub_is_derived_and_complete(real_flags):
    """The stub header names only what the real headers call (several hundred intrinsics), defines the ISA
    enums, and the real kernel_operator.h alone compiles with it for every macro set."""
    stub = Path(real_flags[real_flags.index("-include") + 1])
    text = stub.read_text()
    names = {line.split("(")[0].split()[-1] for line in text.splitlines() if line.startswith("template <typename...")}
    assert len(names) > 300, len(names)
    assert {"set_flag", "wait_flag", "pipe_barrier", "get_block_idx"} <= names
    assert "enum pipe_t : int { PIPE_S," in text and "enum class Dist : int" in text
    probe = stub.parent / "probe_kernel_operator.cpp"
    for arch, core in SETS:
        R.check_real(str(probe), arch, core, real_flags)


def test_real_check_rejects_a_misspelled_api(real_flags, scratch, tmp_path):
    """A misspelled API in a kernel is an error (the generator never stubs a name the kernel itself uses)."""
    src = tmp_path / "bad.cpp"
    src.write_text('#include "kernel_operator.h"\nusing namespace AscendC;\n'
                   'extern "C" __global__ __aicore__ void bad_kernel(GM_ADDR x)\n{\n'
                   '    PipeBarier<PIPE_V>();\n    SetFlag<HardEvent::MTE2_MTE4>(0);\n    (void)x;\n}\n')
    R.prepare(DEVKIT, TOOLS, scratch, probes=[str(src)], macro_sets=[("arch22", "aiv")])   # adds nothing
    with pytest.raises(A.CheckFailed) as e:
        R.check_real(str(src), "arch22", "aiv", real_flags)
    text = e.value.output
    assert "PipeBarier" in text and "MTE2_MTE4" in text, text
    assert "PipeBarier" not in Path(scratch, "stub_fun.h").read_text()
