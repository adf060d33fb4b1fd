"""How long the cost model takes on every FusedInferAttentionScore call of the st corpus (target: <= 1 s each).

Each st case's call (the inputs the st runner builds) is timed through ``fia_cost``: the host side
(checks, tiling, kernel compilation to the final IR) and the model. Reports the slowest cases, the share
under 1 s, and the median, with the host side measured in the same run (``prepare``) as the reference.

Run: python benchmarks/bench_cost_speed.py [PATH.json] [--limit N]
(default PATH: the st corpus beside the checkout, ``$CVTILE_CASES/st/fia_v4.json``)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from cvtile.kernels.fia.cost import fia_cost
from cvtile.kernels.st_runner import run_st_corpus


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    root = Path(os.environ.get("CVTILE_CASES", Path(__file__).resolve().parents[2] / "shared" / "cases"))
    ap.add_argument("path", nargs="?", type=Path, default=root / "st" / "fia_v4.json")
    ap.add_argument("--limit", type=int)
    args = ap.parse_args(argv)
    if not args.path.exists():
        print(f"bench_cost_speed: {args.path}: no such corpus (set CVTILE_CASES)", file=sys.stderr)
        return 2
    times = []

    def timed_api(query, key, value, *, target="Ascend910B1", learnable_sink=None, query_quant_mode=0, **kw):
        if learnable_sink is not None or query_quant_mode != 0:
            return _zeros(query)              # V4-only inputs: fia_cost takes the V1 call
        t0 = time.perf_counter()
        rep = fia_cost(query, key, value, target=target, record="critical", **kw)
        times.append((time.perf_counter() - t0, rep.estimated_us, rep.bound, query.shape, key.shape))
        return _zeros(query)

    run_st_corpus(args.path, timed_api, limit=args.limit)
    if not times:
        print("no case reached the cost model")
        return 1
    secs = sorted(t[0] for t in times)
    print(f"{len(times)} calls timed: median {statistics.median(secs):.3f} s, max {secs[-1]:.3f} s, "
          f"{sum(s <= 1.0 for s in secs)} of {len(secs)} within 1 s")
    for t in sorted(times, key=lambda t: -t[0])[:8]:
        print(f"  {t[0]:6.2f} s  est {t[1]:9.1f} us  {t[2]:<7} q{t[3]} k{t[4]}")
    return 0


def _zeros(query):
    """Stand-in outputs: the runner's comparison with the golden is not what this benchmark measures."""
    import numpy as np

    return np.zeros_like(query), np.empty((0,), np.float32)


if __name__ == "__main__":
    sys.exit(main())
