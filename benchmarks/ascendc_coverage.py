"""Which kernel specialisations of an st corpus the Ascend C backend lowers, and (``--twin``) which run on the twin.

Every case's inputs are drawn and the operator API is called inside ``record_launches`` (``run=False``: the
kernels are specialised, not compiled by numba nor run). Each distinct specialisation is lowered
(``cvtile.dsl.ascendc.lowered``) and, for a checked consumer's view of the same IR, its program-order and
pipelined-order simulator modules are generated with checking mode on. Printed: how many lower, the reasons
of those refused (``AscendCUnsupported`` / ``AscendCError``: one line naming the construct) and any other
error (a bug).

``--twin``: then, for one case per feature set (the st corpus test's feature sample), the launches whose
kernels lower are run (the simulator's results are the goldens), emitted as one project, compiled and run on
the CPU twin with g++, each output judged by the golden's tolerance class and the upstream pass rule (as
``cvtile emit --run``). Minutes per case on a cold kernel cache.

    python benchmarks/ascendc_coverage.py PATH/st/fia_v4.json [--twin] [--case INDEX ...]
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time

import numpy as np

import cvtile
from cvtile.dsl import ascendc as A
from cvtile.dsl.jit import record_launches
from cvtile.kernels.st_cases import load_st_cases
from cvtile.kernels.st_runner import corpus_launches, default_api, feature_sample, load_api, load_cases
from cvtile.sim.checking import CheckMode
from cvtile.sim.codegen import generate


def lowering(path: str):
    """(specialisations, Counter of outcomes, list of (case index, kernel, error) for unexpected errors)."""
    seen: dict = {}
    outcomes: collections.Counter = collections.Counter()
    bugs = []
    for i, recorded in corpus_launches(path):
        if isinstance(recorded, (cvtile.ParamError, cvtile.UnsupportedParameterError)):
            continue
        if isinstance(recorded, Exception):
            outcomes["error"] += 1
            bugs.append((i, "the API", f"{type(recorded).__name__}: {str(recorded).splitlines()[0][:200]}"))
            continue
        for launch in recorded:
            kernel = launch.kernel
            if kernel.key in seen:
                continue
            seen[kernel.key] = i
            try:
                generate(kernel.ir, check=CheckMode())
                generate(kernel.compilation.final, check=CheckMode())
                A.lowered(kernel)
                outcomes["lowered"] += 1
            except A.AscendCError as e:   # AscendCUnsupported, or a plan the backend cannot place: by name
                outcomes["refused: " + str(e).splitlines()[0].split(": ", 1)[-1][:100]] += 1
            except Exception as e:   # noqa: BLE001  (a bug: reported, the sweep goes on)
                outcomes["error"] += 1
                bugs.append((i, kernel.name, f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"))
    return len(seen), outcomes, bugs


def twin(path: str, indices: list[int]) -> None:
    from cvtile.kernels.precision import MAX_FAIL_RATIO, twin_tolerance

    cases = load_cases(path)
    st = load_st_cases(path)
    api = load_api(default_api(path))
    for i in indices:
        t0 = time.perf_counter()
        try:
            with record_launches() as rec:
                api(**cases[i].make_inputs(np.random.default_rng(0)))
        except (cvtile.ParamError, cvtile.UnsupportedParameterError) as e:
            print(f"case {st[i].id} (index {i}): not run ({type(e).__name__})")
            continue
        chosen, refused = [], []
        for r in rec.launches:
            try:
                A.lowered(r.kernel)
                chosen.append(A.Launch.of(r))
            except A.AscendCError:
                refused.append(r.kernel.name)
        if not chosen:
            print(f"case {st[i].id} (index {i}): no launch lowers ({', '.join(refused)})")
            continue
        with tempfile.TemporaryDirectory() as d:
            try:
                res = A.emit(d, chosen, tolerance=twin_tolerance(rec.launches[0].args[0].dtype),
                             max_fail_ratio=MAX_FAIL_RATIO)
                A.check_project(d, res["kernels"])
                report = A.run_project(d, A.arch_of(chosen[0].kernel.platform))
                verdict = " | ".join(line for line in report.splitlines() if line.strip())
            except Exception as e:   # noqa: BLE001
                verdict = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
        names = ", ".join(c.kernel.name for c in chosen)
        skipped = f" (not lowered: {', '.join(refused)})" if refused else ""
        print(f"case {st[i].id} (index {i}) [{names}]{skipped}: {verdict} [{time.perf_counter() - t0:.0f} s]", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path")
    ap.add_argument("--twin", action="store_true", help="run the feature sample's lowered launches on the twin")
    ap.add_argument("--case", type=int, action="append",
                    help="with --twin: these case indices (positions in the file, from 0; not case ids) instead")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    n, outcomes, bugs = lowering(args.path)
    print(f"{args.path}: {n} kernel specialisations, {outcomes['lowered']} lower to Ascend C, "
          f"{n - outcomes['lowered'] - outcomes['error']} refused by name, {outcomes['error']} errors "
          f"[{time.perf_counter() - t0:.0f} s]")
    for what, count in outcomes.most_common():
        if what.startswith("refused"):
            print(f"  {count:3d} {what}")
    for i, name, err in bugs:
        print(f"  error: case index {i}, {name}: {err}")
    if args.twin:
        twin(args.path, args.case or feature_sample(args.path))
    return 1 if bugs else 0


if __name__ == "__main__":
    sys.exit(main())
