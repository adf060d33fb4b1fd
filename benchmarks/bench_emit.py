"""The Ascend C backend's speed, in one process: lowering, the declaration-header check, the CPU twin.

For every kernel the examples and the default FIA cases launch:
* the lowering time of the kernel (final IR + memory plan -> source; best of N, cache cleared each time);
* the g++ ``-fsyntax-only`` check of the emitted file against the declaration header, per macro set;
* the emitted line count beside the DSL kernel function's;
and for each launch set, the CPU-twin build and run time of the whole project beside the simulator's
pipelined-order run of the same launches (the reference, measured in the same run).

Kernels the backend does not lower yet are listed with the reason.

    python benchmarks/bench_emit.py [--repeat 3] [--json] [--skip-twin]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _record_example(name):
    from cvtile.dsl.jit import record_launches

    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "examples" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with record_launches() as rec, contextlib.redirect_stdout(io.StringIO()):
        mod.main()
    return rec.launches


def _record_fia(which):
    from cvtile.cases import DEFAULT_CASES, make_inputs
    from cvtile.dsl.jit import record_launches
    from cvtile.kernels.fia.api import npu_fused_infer_attention_score

    spec = DEFAULT_CASES[which]
    q, k, v, kw = make_inputs(spec, 0)
    with record_launches() as rec:
        npu_fused_infer_attention_score(q, k, v, target=spec.target, **kw)
    return rec.launches


def _dsl_lines(ck) -> int:
    """Lines of the DSL kernel function (its def to the next top-level statement)."""
    loc = ck.ir.loc
    try:
        src = Path(loc.filename).read_text().splitlines()
    except OSError:
        return 0
    start = loc.line - 1
    end = start + 1
    while end < len(src) and (not src[end].strip() or src[end].startswith((" ", "\t", "#"))):
        end += 1
    return end - start


def main(argv=None) -> int:
    from cvtile.dsl import ascendc as A
    from cvtile.kernels.precision import tolerance

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--skip-twin", action="store_true")
    args = ap.parse_args(argv)

    sets = {"01_vector_add": lambda: _record_example("01_vector_add"),
            "02_softmax_rows": lambda: _record_example("02_softmax_rows"),
            "03_flash_attention": lambda: _record_example("03_flash_attention"),
            "05_cube_vector_subblocks": lambda: _record_example("05_cube_vector_subblocks"),
            "fia_decode_default": lambda: _record_fia(0),
            "fia_prefill_default": lambda: _record_fia(1)}
    results = {}
    for name, record in sets.items():
        launches = [A.Launch.of(r) for r in record()]
        entry = {"kernels": {}, "unsupported": {}}
        ok = []
        seen = set()
        for L in launches:
            ck = L.kernel
            if id(ck) in seen:
                continue
            seen.add(id(ck))
            best = None
            try:
                for _ in range(args.repeat):
                    ck._ascendc = None
                    t0 = time.perf_counter()
                    lk = A.lowered(ck)
                    best = min(best or 1e9, time.perf_counter() - t0)
            except A.AscendCError as e:
                entry["unsupported"][ck.name] = str(e).splitlines()[0]
                continue
            ok.append(L)
            with tempfile.TemporaryDirectory() as d:
                A.emit(d, [L], with_data=False)
                path = os.path.join(d, "op_kernel", f"{lk.name}.cpp")
                checks = {}
                for arch in ("arch22", "arch35"):
                    for core in ("aic", "aiv"):
                        t0 = time.perf_counter()
                        A.check.syntax_check(path, arch, core, include_dirs=[os.path.dirname(path)])
                        checks[f"{arch}-{core}"] = round(time.perf_counter() - t0, 3)
            entry["kernels"][ck.name] = {"lower_s": round(best, 4), "check_s": checks,
                                         "emitted_lines": lk.source.count("\n"), "dsl_lines": _dsl_lines(ck)}
        if not args.skip_twin and ok and len(ok) == len(launches):
            with tempfile.TemporaryDirectory() as d:
                t0 = time.perf_counter()
                from cvtile.kernels.precision import MAX_FAIL_RATIO

                A.emit(d, launches, tolerance=tolerance, max_fail_ratio=MAX_FAIL_RATIO)
                t_emit = time.perf_counter() - t0          # includes the simulator's pipelined run (goldens)
                t0 = time.perf_counter()
                exe = A.check.build_twin(d, A.arch_of(launches[0].kernel.platform))
                t_build = time.perf_counter() - t0
                t0 = time.perf_counter()
                A.check.run_twin(d, exe)
                t_run = time.perf_counter() - t0
                import subprocess

                cmp = subprocess.run([sys.executable, "compare.py"], cwd=d, capture_output=True, text=True).stdout
                t0 = time.perf_counter()
                for L in launches:
                    L.kernel.launch(L.grid, [a.copy() if hasattr(a, "copy") else a for a in L.args],
                                    order="pipelined")
                t_sim = time.perf_counter() - t0
            entry["twin"] = {"build_s": round(t_build, 2), "run_s": round(t_run, 2),
                             "sim_pipelined_s": round(t_sim, 3), "ratio_twin_to_sim": round(t_run / t_sim, 2),
                             "emit_with_goldens_s": round(t_emit, 2), "compare": cmp.strip().splitlines()}
        results[name] = entry
    if args.json:
        print(json.dumps(results, indent=1))
        return 0
    for name, e in results.items():
        print(name)
        for k, v in e["kernels"].items():
            worst = max(v["check_s"].values())
            print(f"  {k:<22} lower {v['lower_s'] * 1000:7.1f} ms  check <= {worst:.2f} s/file  "
                  f"{v['emitted_lines']} emitted lines vs {v['dsl_lines']} DSL lines")
        for k, why in e["unsupported"].items():
            print(f"  {k:<22} not lowered: {why}")
        if "twin" in e:
            t = e["twin"]
            print(f"  twin: build {t['build_s']} s, run {t['run_s']} s vs simulator pipelined {t['sim_pipelined_s']} s "
                  f"(x{t['ratio_twin_to_sim']})")
            for line in t["compare"]:
                print(f"    {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
