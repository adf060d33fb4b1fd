"""Plan search over the st corpus: how often op_host's FIA plan is within 5 % of the best plan the cost
model finds among its neighbours (``kernels.fia.plan_search``; target: at least 90 % of the calls).

Every st case's call (the inputs the st runner builds) goes through ``search_plans``; a call whose
planner takes no overrides (only its preload depth is searched) is reported apart, and a call whose own
plan the cost model cannot time is counted as failed. Prints the calls per route, the share within 5 %,
the calls whose op_host plan cvtile's build runs in more waves than the chip (``fia.cost.build_notes``), the cases
outside 5 % with op_host's and the best plan, and the time taken.

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
    found, failed = [], []

    def api(query, key, value, *, target="Ascend910B1", learnable_sink=None, query_quant_mode=0, **kw):
        if learnable_sink is None and query_quant_mode == 0:
            t0 = time.perf_counter()
            try:
                s = search_plans(query, key, value, target=target, **kw)
            except ValueError as e:
                failed.append((query.shape, str(e).splitlines()[0][:120]))
            else:
                found.append((s, time.perf_counter() - t0, query.shape, key.shape, target))
        return np.zeros_like(query), np.empty((0,), np.float32)

    t0 = time.perf_counter()
    run_st_corpus(args.path, api, limit=args.limit)
    _report(found, failed, time.perf_counter() - t0)
    return 0


def _route(s) -> str:
    return f"{s.op_host.tiling.route}/{s.op_host.tiling.template}"


def _plan(p) -> str:
    return (f"M{p.m_base}/S2 {p.s2_base}/{p.cores} cores/{p.kv_splits} splits/preload {p.preload} "
            f"{p.estimated_us:.1f} us")


def _report(found: list, failed: list, secs: float) -> None:
    searched = [f for f in found if f[0].searched]
    alone = len(found) - len(searched)
    within = [f for f in searched if f[0].op_host_over_best <= 1.05]
    print(f"{len(found) + len(failed)} calls: {len(searched)} searched, {alone} with a planner that takes no "
          f"overrides (preload depth only), {len(failed)} whose own plan the cost model cannot time; op_host "
          f"within 5 % of the best found on {len(within)} of {len(searched)} "
          f"({100.0 * len(within) / max(1, len(searched)):.0f} %), {secs:.0f} s")
    dropped = [(f[2], p) for f in found for p in f[0].model_dropped]
    print(f"  {len(dropped)} candidate plans the cost model could not time (not counted as illegal)"
          + "".join(f"\n    q{qs}: {p.overrides} ({p.dropped}: {p.error})" for qs, p in dropped))
    waves = [f for f in searched if f[0].op_host.notes]
    print(f"  {len(waves)} calls whose op_host plan cvtile's build runs otherwise than the chip (more waves: "
          f"fia.cost.build_notes), {sum(f[0].op_host_over_best > 1.05 for f in waves)} of them outside 5 %")
    for route in sorted({_route(f[0]) for f in found}):
        mine = [f for f in searched if _route(f[0]) == route]
        ok = sum(f[0].op_host_over_best <= 1.05 for f in mine)
        print(f"  {route}: {len(mine)} searched, {ok} within 5 %, "
              f"{sum(_route(f[0]) == route for f in found) - len(mine)} preload only")
    for s, _, qs, ks, target in sorted(searched, key=lambda f: -f[0].op_host_over_best):
        if s.op_host_over_best <= 1.05:
            break
        print(f"  q{qs} k{ks} {target} {_route(s)}: op_host {_plan(s.op_host)}, best {_plan(s.best)} "
              f"({s.op_host_over_best:.2f}x){' [more waves than the chip]' if s.op_host.notes else ''}")
    for qs, why in failed:
        print(f"  not searched: q{qs}: {why}")


if __name__ == "__main__":
    sys.exit(main())
