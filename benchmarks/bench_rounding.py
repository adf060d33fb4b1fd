"""Throughput of the simulator's 16-bit storage loops against numpy's casts.

For each loop of ``cvtile.sim.rounding`` (decode, encode, round, round in
place; fp16 and bf16) this measures nanoseconds per element, single-threaded,
best of ``--repeat`` runs, on

* a large array (``--n`` elements, default 2**24: memory traffic included),
* a cache-resident array (``--small`` elements, default 2**14, many passes:
  the compute cost alone, which is what a kernel's on-chip rounding pays),

next to the reference measured in the same run: numpy's ``float16`` cast and
ml_dtypes' ``bfloat16`` cast into preallocated arrays (``np.copyto``; a
round is two casts).  ``speedup`` is reference time / our time.  The column
``vec`` says whether LLVM vectorised the loop.

The data are normal-distributed float32 values (scale 100), i.e. mostly in
the fp16 normal range; numpy's fp16 cast is much slower on subnormal or
overflowing values, ours is branch-free and does not depend on the data.

    python benchmarks/bench_rounding.py [--n N] [--small N] [--repeat R] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import ml_dtypes
import numba
import numpy as np
from cvtile.sim import rounding as R

BF16 = ml_dtypes.bfloat16


def _cast(dst, src):
    np.copyto(dst, src, casting="unsafe")


def cases(n: int, seed: int = 0):
    """(name, ours, reference, args factory) for every loop."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * 100).astype(np.float32)
    u16 = x.astype(np.float16).view(np.uint16)
    ubf = x.astype(BF16).view(np.uint16)
    f32 = np.empty(n, np.float32)
    h = np.empty(n, np.uint16)

    def round_ref(fmt):
        tmp = np.empty(n, fmt)
        return lambda: (_cast(tmp, x), _cast(f32, tmp))

    y = x.copy()
    return [
        ("decode_f16", lambda: R.decode_f16(u16, f32), lambda: _cast(f32, u16.view(np.float16)), (u16, f32)),
        ("decode_bf16", lambda: R.decode_bf16(ubf, f32), lambda: _cast(f32, ubf.view(BF16)), (ubf, f32)),
        ("encode_f16", lambda: R.encode_f16(x, h), lambda: _cast(h.view(np.float16), x), (x, h)),
        ("encode_bf16", lambda: R.encode_bf16(x, h), lambda: _cast(h.view(BF16), x), (x, h)),
        ("round_f16", lambda: R.round_f16(x, f32), round_ref(np.float16), (x, f32)),
        ("round_bf16", lambda: R.round_bf16(x, f32), round_ref(BF16), (x, f32)),
        ("round_f16_inplace", lambda: R.round_f16_inplace(y), round_ref(np.float16), (y,)),
        ("round_bf16_inplace", lambda: R.round_bf16_inplace(y), round_ref(BF16), (y,)),
    ]


def best_ns(fn, n: int, repeat: int, passes: int) -> float:
    fn()  # warm: compile or cache load, page faults
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(passes):
            fn()
        best = min(best, time.perf_counter() - t)
    return best / passes / n * 1e9


def run(n: int, small: int, repeat: int) -> list[dict]:
    rows = []
    vec = {}
    for size, label in ((n, "large"), (small, "cache")):
        passes = max(1, (1 << 24) // size) if label == "cache" else 1
        with np.errstate(over="ignore", invalid="ignore"):
            for name, ours, ref, args in cases(size):
                t_ours = best_ns(ours, size, repeat, passes)
                t_ref = best_ns(ref, size, repeat, passes)
                fn = getattr(R, name)
                if name not in vec:
                    vec[name] = R.loop_vectorised(fn, tuple(numba.typeof(a) for a in args))
                rows.append(
                    {
                        "op": name,
                        "size": label,
                        "n": size,
                        "ns_per_elem": round(t_ours, 4),
                        "ref_ns_per_elem": round(t_ref, 4),
                        "speedup": round(t_ref / t_ours, 2),
                        "vectorised": vec[name],
                    }
                )
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1 << 24, help="large array size (default 2**24)")
    ap.add_argument("--small", type=int, default=1 << 14, help="cache-resident size (default 2**14)")
    ap.add_argument("--repeat", type=int, default=7, help="runs per measurement; the best counts")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = ap.parse_args(argv)
    rows = run(args.n, args.small, args.repeat)
    if args.json:
        info = {
            "cpu_count": os.cpu_count(),
            "machine": platform.machine(),
            "python": platform.python_version(),
            "numpy": np.__version__,
            "numba": numba.__version__,
            "ml_dtypes": ml_dtypes.__version__,
        }
        print(json.dumps({"env": info, "results": rows}, indent=1))
        return
    print(f"{'op':<20}{'size':<7}{'n':>10}{'ns/elem':>10}{'numpy ns':>10}{'speedup':>9}  vec")
    for r in rows:
        print(
            f"{r['op']:<20}{r['size']:<7}{r['n']:>10}{r['ns_per_elem']:>10.3f}"
            f"{r['ref_ns_per_elem']:>10.3f}{r['speedup']:>8.1f}x  {'yes' if r['vectorised'] else 'NO'}"
        )


if __name__ == "__main__":
    main()
