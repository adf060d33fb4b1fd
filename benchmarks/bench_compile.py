"""Compile time of the simulator: cold compile of the default cases and the warm process's first result.

Each measurement runs in a fresh Python process. ``cold``: a fresh, empty ``CVTILE_CACHE_DIR`` (the kernels'
modules are generated and compiled, by each compiler of ``--compilers`` in turn (``CVTILE_COMPILER``: the
direct compiler, numba's pipeline), whose ratios and output bits are compared; the runtime helpers of ``cvtile.sim.rt`` come from numba's own cache, as on any machine that ran
cvtile once). ``warm``: the same cache directory a second time (the kernels load
from the cache). A case whose call launches several kernels compiles the later ones in a child process while
it compiles the first (``sim/precompile.py``); ``CVTILE_COMPILE_PROCESSES=1`` measures them one after the
other; the kernels compile at ``$CVTILE_OPT`` (default LLVM level 1, ``sim/optlevel.py``), ``CVTILE_OPT=3`` at
numba's usual level. Printed per case: best of N of the compile seconds (``CaseResult.compile_seconds``), the
simulator run seconds, and the process's wall time to its first result (import included).

    python benchmarks/bench_compile.py [--repeat N] [--case 0|1 ...] [--order program|pipelined]
                                       [--compilers direct numba]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from cvtile.cases import DEFAULT_CASES, run_case
r = run_case(DEFAULT_CASES[int(sys.argv[1])], order=sys.argv[2])
print(json.dumps({"compile": r.compile_seconds, "run": r.sim_seconds, "wall": time.perf_counter() - t0,
                  "passed": r.passed, "sha256": r.sha256, "name": r.spec.name}))
"""


def _child(case: int, order: str, cache: str, compiler: str) -> dict:
    env = dict(os.environ, CVTILE_CACHE_DIR=cache, CVTILE_COMPILER=compiler)
    out = subprocess.run([sys.executable, "-c", _CHILD, str(case), order], env=env, capture_output=True,
                         text=True, check=True, cwd=tempfile.gettempdir())
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(case: int, order: str, repeat: int, compiler: str) -> dict:
    cold, warm = [], []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="cvtile-bench-") as cache:
            cold.append(_child(case, order, cache, compiler))
            warm.append(_child(case, order, cache, compiler))
    shas = {json.dumps(r["sha256"], sort_keys=True) for r in cold + warm}
    return {"name": cold[0]["name"], "cold_compile": min(r["compile"] for r in cold),
            "cold_wall": min(r["wall"] for r in cold), "warm_compile": min(r["compile"] for r in warm),
            "warm_wall": min(r["wall"] for r in warm), "run": min(r["run"] for r in cold + warm),
            "passed": all(r["passed"] for r in cold + warm), "same_bits": len(shas) == 1,
            "sha256": cold[0]["sha256"]}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--case", type=int, action="append", help="index into cvtile.cases.DEFAULT_CASES")
    ap.add_argument("--order", default="program", choices=("program", "pipelined"))
    ap.add_argument("--compilers", nargs="+", default=["direct", "numba"], choices=("direct", "numba"),
                    help="the simulator's compilers to measure (CVTILE_COMPILER); the first is compared with the "
                         "others, measured in the same run")
    args = ap.parse_args(argv)
    print(f"{'case':26s} {'compiler':8s} {'cold compile':>12s} {'cold wall':>10s} {'warm compile':>12s} "
          f"{'warm wall':>10s} {'run':>7s}  result")
    for case in args.case or [0, 1]:
        results = {}
        for compiler in args.compilers:
            t = time.perf_counter()
            r = results[compiler] = measure(case, args.order, args.repeat, compiler)
            print(f"{r['name']:26s} {compiler:8s} {r['cold_compile']:11.2f}s {r['cold_wall']:9.2f}s "
                  f"{r['warm_compile']:11.2f}s {r['warm_wall']:9.2f}s {r['run']:6.2f}s  "
                  f"{'PASS' if r['passed'] else 'FAIL'}"
                  f"{'' if r['same_bits'] else ' (results differ between runs!)'}  [{time.perf_counter() - t:.0f}s]")
            print(f"  sha256 {json.dumps(r['sha256'])}")
        first, *others = args.compilers
        for other in others:
            a, b = results[first], results[other]
            same = "the same bits" if a["sha256"] == b["sha256"] else "OTHER BITS"
            print(f"  {first} / {other}: cold compile {a['cold_compile'] / b['cold_compile']:.2f}, warm wall "
                  f"{a['warm_wall'] / b['warm_wall']:.2f}, run {a['run'] / b['run']:.2f}; {same}")


if __name__ == "__main__":
    main()
