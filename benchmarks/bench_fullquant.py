"""The full-quant FIA kernel against the non-quant kernel, per KV byte, side by side in one process.

Issue 9's performance rule (``bench_quant``'s): a quantised template's kernel runs within 1.5x of the non-quant
kernel's simulated time *per KV byte*. Full quant is a prefill template (arch22's legacy PFA int8 route; an
int8 decode needs the rope), so one prefill shape of ``bench_fia`` is run (``small_prefill`` by default:
B=1 N=4 S=512 D=64; ``--case prefill`` for B=1 N=32 S=2048 D=128), Ascend910B1, op_host's tiling:

* ``nonquant``: fp16 query, key and value (``fia_attention``), the reference;
* ``fullquant``: int8 query, key and value with per-tensor dequant_scale1 / quant_scale1 / dequant_scale2
  (``fia_fullquant``: the int8 x int8 -> int32 matmuls, fp16 dequant, P quantised to int8);

and for each the best-of-N wall time and CPU time of the whole API call (compiled before timing), the KV bytes
(an int8 cache holds half the bytes of an fp16 one), the CPU time per KV byte and its ratio to the reference
(the target: <= 1.5).

    python benchmarks/bench_fullquant.py [--case small_prefill|prefill] [--repeat 5] [--json]
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from bench_fia import CASES, inputs  # noqa: E402
from bench_quant import measure, report  # noqa: E402


def _calls(c: dict) -> dict:
    """name -> (query, key, value, keywords, KV bytes)."""
    q, k, v = inputs(c)
    kw = dict(num_heads=c["nq"], num_key_value_heads=c["nkv"], input_layout="BNSD", scale=c["d"] ** -0.5)
    rng = np.random.default_rng(1)
    q8, k8, v8 = (rng.integers(-127, 128, x.shape).astype(np.int8) for x in (q, k, v))
    scales = dict(dequant_scale1=np.array([np.float32(1e-3).view(np.uint32)], np.uint64),
                  quant_scale1=np.array([127.0], np.float32), dequant_scale2=np.array([1e-4], np.float32))
    return {"nonquant": (q, k, v, kw, k.nbytes + v.nbytes),
            "fullquant": (q8, k8, v8, {**scales, **kw}, k8.nbytes + v8.nbytes)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--case", choices=("small_prefill", "prefill"), default="small_prefill")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    c = CASES[args.case]
    report(measure(_calls(c), args.repeat), f"{args.case} B={c['b']} N={c['nq']} Sq={c['sq']} Skv={c['skv']} "
           f"D={c['d']} (Ascend910B1), best of {args.repeat}", args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
