"""Plan search over the st corpus: how often op_host's FIA plan is within 5 % of the best plan the cost
model finds among its neighbours (``kernels.fia.plan_search``; target: at least 90 % of the calls).

Every st case's call (the inputs the st runner builds) goes through ``search_plans``; a call whose
template takes no overrides counts as op_host's plan alone (reported apart). Prints the share within
5 %, the cases outside it with op_host's and the best plan, and the time taken.

Run: python benchmarks/bench_plan_search.py [PATH.json] [--limit N]
(default PATH: ``$CVTILE_CASES/st/fia_v4.json``, the st corpus beside the checkout)
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

from cvtile.kernels.fia.plan_search import search_plans
from cvtile.kernels.st_runner import run_st_corpus


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    root = Path(os.environ.get("CVTILE_CASES", Path(__file__).resolve().parents[2] / "shared" / "cases"))
    ap.add_argument("path", nargs="?", type=Path, default=root / "st" / "fia_v4.json")
    ap.add_argument("--limit", type=int)
    args = ap.parse_args(argv)
    if not args.path.exists():
        print(f"bench_plan_search: {args.path}: no such corpus (set CVTILE_CASES)", file=sys.stderr)
        return 2
    found = []

    def api(query, key, value, *, target="Ascend910B1", learnable_sink=None, query_quant_mode=0, **kw):
        if learnable_sink is None and query_quant_mode == 0:
            t0 = time.perf_counter()
            s = search_plans(query, key, value, target=target, **kw)
            found.append((s, time.perf_counter() - t0, query.shape, key.shape, target))
        return np.zeros_like(query), np.empty((0,), np.float32)

    t0 = time.perf_counter()
    run_st_corpus(args.path, api, limit=args.limit)
    searched = [f for f in found if len(f[0].plans) > 1]
    alone = len(found) - len(searched)
    within = [f for f in searched if f[0].op_host_over_best <= 1.05]
    print(f"{len(found)} calls: {len(searched)} searched ({alone} on templates without overrides: op_host's plan "
          f"alone); op_host within 5 % of the best found on {len(within)} of {len(searched)} "
          f"({100.0 * len(within) / max(1, len(searched)):.0f} %), {time.perf_counter() - t0:.0f} s")
    for s, secs, qs, ks, target in sorted(searched, key=lambda f: -f[0].op_host_over_best):
        if s.op_host_over_best <= 1.05:
            break
        o, b = s.op_host, s.best
        print(f"  q{qs} k{ks} {target}: op_host M{o.m_base}/S2 {o.s2_base}/{o.cores} cores/preload {o.preload} "
              f"{o.estimated_us:.1f} us, best M{b.m_base}/S2 {b.s2_base}/{b.cores} cores/preload {b.preload} "
              f"{b.estimated_us:.1f} us "
              f"({s.op_host_over_best:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
