"""How long the cost model takes on every FusedInferAttentionScore call of the st corpora (target: <= 1 s each).

Every case of the FIA st corpora (``fia_v4.json``, ``ifa_v4.json``, ``pfa_v3.json``: the same V4 entry) whose
call takes torch_npu's V1 parameters (no ``learnable_sink``, ``query_quant_mode`` 0) is built as the st runner
builds it and timed through ``fia_cost``, the function ``cvtile cost`` calls (``record="critical"``, its
default): the host side (checks, tiling, the kernels' compilation to the final IR) and the model. Each call is
run twice in this one process:

* ``first``: the first time the call is seen here; it includes compiling a kernel specialisation no earlier
  call needed (the compile cache is per process), so it depends on the order of the corpus;
* ``warm``: the same call again, every kernel compiled: the per-call time of a process that costs many calls
  (the plan search, this benchmark), and the figure the 1 s target is judged on.

``--cold N`` also runs the N slowest warm calls each in a fresh process (``--one``), reporting the time of its
one ``fia_cost`` (imports excluded; compilation included): what one ``cvtile cost`` invocation pays.

``--times FILE`` writes every call's seconds (first, warm). ``--record FILE`` writes every call's estimate (per launch: estimated_us, bound, per-pipe busy fractions,
compute and per-block cycles; or op_host's rejection); ``--check FILE`` compares this run's estimates with such
a file, bit for bit (floats as ``repr``), and exits 1 on any difference.

Run: python benchmarks/bench_cost_speed.py [CORPUS.json ...] [--limit N] [--cold N] [--record F | --check F]
(default: the three corpora under ``$CVTILE_CASES/st``)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from cvtile.kernels.fia.cost import fia_cost
from cvtile.kernels.st_cases import load_st_cases
from cvtile.kernels.st_runner import _case_seed
from cvtile.tiling.platform import DEFAULT_TARGET

CORPORA = ("fia_v4.json", "ifa_v4.json", "pfa_v3.json")
_V4_ONLY = ("learnable_sink", "dequant_scale_query", "query_quant_mode")


def calls(path: Path, limit: int | None = None):
    """(label, inputs) of every case of the corpus at ``path`` that ``fia_cost`` takes, in corpus order."""
    for i, case in enumerate(load_st_cases(path)[:limit]):
        rng = np.random.default_rng([0, _case_seed(case.id)])     # the st runner's inputs (seed 0)
        try:
            kw = case.make_inputs(rng)
        except Exception:  # noqa: BLE001 - a case the runner cannot build never reaches the model either
            continue
        if kw.get("learnable_sink") is not None or kw.get("query_quant_mode", 0) != 0 or \
                kw.get("dequant_scale_query") is not None:
            continue
        for name in _V4_ONLY:
            kw.pop(name, None)
        kw.setdefault("target", DEFAULT_TARGET)      # the V4 entry's default, as the st runner calls it
        yield f"{path.stem}:{i}", kw


def estimate_of(kw: dict) -> dict:
    """What one call's estimate is (or op_host's / the model's refusal), floats kept exact."""
    q, k, v = kw["query"], kw["key"], kw["value"]
    rest = {n: x for n, x in kw.items() if n not in ("query", "key", "value")}
    try:
        rep = fia_cost(q, k, v, record="critical", **rest)
    except Exception as e:  # noqa: BLE001 - a rejection is part of the result
        return {"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}
    return {"estimated_us": repr(rep.estimated_us), "bound": rep.bound, "query": list(q.shape),
            "launches": [{"kernel": lc.kernel, "estimated_us": repr(lc.estimated_us), "bound": lc.bound,
                          "compute_cycles": repr(lc.compute_cycles), "critical_block": lc.critical_block,
                          "block_cycles": [repr(c) for c in lc.block_cycles],
                          "path": {c: repr(x) for c, x in lc.path.items()},
                          "busy": {t: {p: repr(f) for p, f in d.items()} for t, d in lc.busy.items()}}
                         for lc in rep.launches]}


def timed(kw: dict) -> tuple:
    t0 = time.perf_counter()
    est = estimate_of(kw)
    return time.perf_counter() - t0, est


def one(label: str) -> int:
    """``--one corpus:i``: time that call alone in this (fresh) process; prints its seconds."""
    stem, i = label.rsplit(":", 1)
    path = _root() / "st" / f"{stem}.json"
    kw = next(kw for lab, kw in calls(path, int(i) + 1) if lab == label)
    secs, _ = timed(kw)
    print(f"{secs:.3f}")
    return 0


def _root() -> Path:
    return Path(os.environ.get("CVTILE_CASES", Path(__file__).resolve().parents[2] / "shared" / "cases"))


def _stats(name: str, secs: list) -> str:
    s = sorted(secs)
    return (f"{name:>6}: {len(s)} calls, median {statistics.median(s):.3f} s, max {s[-1]:.3f} s, "
            f"{sum(x > 1.0 for x in s)} over 1 s, total {sum(s):.1f} s")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="*", type=Path)
    ap.add_argument("--limit", type=int, help="the first N cases of each corpus")
    ap.add_argument("--cold", type=int, default=0, help="time the N slowest calls in fresh processes too")
    ap.add_argument("--record", type=Path, help="write every call's estimate to this JSON file")
    ap.add_argument("--check", type=Path, help="compare every call's estimate with this file (bitwise)")
    ap.add_argument("--times", type=Path, help="write every call's seconds (first, warm) to this JSON file")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        return one(args.one)
    paths = args.paths or [_root() / "st" / name for name in CORPORA]
    missing = [p for p in paths if not p.exists()]
    if missing:
        print(f"bench_cost_speed: {missing[0]}: no such corpus (set CVTILE_CASES)", file=sys.stderr)
        return 2
    rows, estimates = [], {}
    for path in paths:
        for label, kw in calls(path, args.limit):
            first, est = timed(kw)
            warm, again = timed(kw)
            if again != est:
                print(f"{label}: the warm estimate differs from the first", file=sys.stderr)
                return 1
            estimates[label] = est
            rows.append((label, first, warm, est))
    timed_rows = [r for r in rows if "error" not in r[3]]
    print(f"{len(rows)} calls, {len(timed_rows)} timed by the model, {len(rows) - len(timed_rows)} refused")
    print(_stats("first", [r[1] for r in timed_rows]))
    print(_stats("warm", [r[2] for r in timed_rows]))
    slow = sorted(timed_rows, key=lambda r: -r[2])
    for label, first, warm, est in slow[:10]:
        print(f"  {label:<14} first {first:6.2f} s  warm {warm:6.2f} s  est {float(est['estimated_us']):9.1f} us  "
              f"{est['bound']:<7} q{tuple(est['query'])}")
    for label, first, warm, est in slow[:args.cold]:
        cmd = [sys.executable, __file__, "--one", label]
        t0 = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.split()[-1]
        print(f"  cold {label:<14} fia_cost {float(out):6.2f} s (process {time.perf_counter() - t0:.2f} s)")
    if args.times:
        args.times.write_text(json.dumps({r[0]: [round(r[1], 4), round(r[2], 4)] for r in rows}, indent=1))
    if args.record:
        args.record.write_text(json.dumps(estimates, indent=1, sort_keys=True))
    if args.check:
        return _check(json.loads(args.check.read_text()), estimates)
    return 0


def _check(before: dict, now: dict) -> int:
    changed = sorted(k for k in before.keys() | now.keys() if before.get(k) != now.get(k))
    for label in changed[:20]:
        print(f"  changed: {label}: {before.get(label, {}).get('estimated_us')} -> "
              f"{now.get(label, {}).get('estimated_us')}")
    print(f"estimates: {len(now)} calls, {len(changed)} differ from the recorded ones")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
