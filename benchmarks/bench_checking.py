"""What checking mode costs: FusedInferAttentionScore unchecked and checked, side by side in one process.

Cases: the FIA benchmark's shapes (``bench_fia.CASES``: prefill B=1 N=32 S=2048 D=128 causal and not,
decode B=16 Nq=32 Nkv=8 Skv=4096) and ``cvtile run``'s default cases (a flash-decode GQA decode and a
causal prefill). For each, in program order and in pipelined order: the unchecked call, the call inside
``checked_launches(CheckMode())`` (uninitialised reads, write-once, races, flags) and, with ``--full``,
inside ``checked_launches(CheckMode.full())`` (equivalence too: the other order runs as well). Reports the
best-of-N wall time and the ratios to the unchecked program-order run of the same case (the budget: 3x)
and, for pipelined order, to the unchecked pipelined run.

    python benchmarks/bench_checking.py [--repeat 3] [--cases decode default-prefill ...] [--full] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cvtile  # noqa: E402
from bench_fia import CASES, best_of, inputs, sim_call  # noqa: E402
from cvtile.cases import DEFAULT_CASES, make_inputs  # noqa: E402
from cvtile.sim import CheckMode, checked_launches  # noqa: E402

DEFAULTS = {"default-" + s.name.split("-")[-1]: s for s in DEFAULT_CASES}


def _call(name: str, order: str):
    if name in CASES:
        c = CASES[name]
        return sim_call(c, *inputs(c), order=order)
    spec = DEFAULTS[name]
    q, k, v, kw = make_inputs(spec)
    return lambda: cvtile.npu_fused_infer_attention_score(q, k, v, target=spec.target, order=order, **kw)


def _checked(fn, mode: CheckMode):
    def run():
        with checked_launches(mode):
            fn()
    return run


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cases", nargs="+", choices=list(CASES) + list(DEFAULTS), default=list(CASES) + list(DEFAULTS))
    ap.add_argument("--full", action="store_true", help="also time CheckMode.full() (equivalence included)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    report = {"threads": os.cpu_count(), "cases": {}}
    for name in args.cases:
        times = {}
        for order in ("program", "pipelined"):
            fn = _call(name, order)
            times[f"{order}"] = best_of(fn, args.repeat)
            times[f"{order}_checked"] = best_of(_checked(fn, CheckMode()), args.repeat)
            if args.full:
                times[f"{order}_full"] = best_of(_checked(fn, CheckMode.full()), args.repeat)
        base = times["program"]
        entry = {"seconds": times, "ratio_to_program": {k: t / base for k, t in times.items() if k != "program"},
                 "ratio_pipelined_checked_to_pipelined": times["pipelined_checked"] / times["pipelined"]}
        report["cases"][name] = entry
        if not args.json:
            print(f"{name}: " + ", ".join(f"{k} {t * 1e3:.1f} ms" for k, t in times.items()))
            print("  / unchecked program order: " + ", ".join(f"{k} {r:.2f}x"
                                                            for k, r in entry["ratio_to_program"].items())
                  + f"; pipelined checked / pipelined {entry['ratio_pipelined_checked_to_pipelined']:.2f}x")
    if args.json:
        print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
