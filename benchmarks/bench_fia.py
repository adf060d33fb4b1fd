"""FusedInferAttentionScore on the simulator, side by side with numpy and torch SDPA, in one process.

Cases (the DESIGN's reference shapes):
* prefill B=1 N=32 S=2048 D=128, causal (sparse_mode 3) and non-causal;
* decode  B=16 Nq=32 Nkv=8 Sq=1 Skv=4096 D=128 (GQA, G=4);
* fixed_cost B=1 N=1 S=16 D=64 (a call with almost no work: its time is the API's fixed cost per call) and
  small_prefill B=1 N=4 S=512 D=64, non-causal and causal (one 512 x 512 block per head on 4 cores: the
  causal call masks inside the block and does the same simulated work).

For each: the simulated kernel (fp16 inputs, the op_host tiling's core split
on Ascend910B1, all CPU threads) in program order and in pipelined order (the
split AIC/AIV programs meeting at flags; ``ratio_sim_to["cvtile_sim_pipelined"]``
is program / pipelined), a plain numpy fp32 attention, and torch's
``scaled_dot_product_attention`` in fp32 when torch is installed (decode both
with ``enable_gqa`` and with the G query heads folded into the query length).
Reports the best-of-N wall time, effective GFLOP/s (4·B·Nq·Sq·Skv·D, halved for
causal) and the ratio to each reference measured in the same run.

The API's fixed cost per call (``--breakdown``, by default for the three small cases): each call of the case
timed by stage (``fia_call_breakdown``: binding, op_host checks, tiling and its memo, the parameter record,
the host's launch preparation, DSL specialisation, argument conversion, launch, simulated cores, outputs),
the call minus its simulated cores as the fixed cost (median and best, in ms), the calling thread's CPU time,
and the fixed cost's ratio to the plain numpy attention of the same shape measured in the same run; also
the same with the tiling memo emptied before every call (a call with a new signature).
``docs/call_overhead.md`` records the figures before and after the fixed cost was cut.

Also: the cold compile of the FIA kernels (a fresh cache directory, in a
subprocess) and a warm process (same call, cache filled).

    python benchmarks/bench_fia.py [--repeat 5] [--json] [--skip-compile] [--breakdown CASE ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import cvtile
from cvtile.kernels.golden import mask_template

CASES = {
    "prefill_causal": dict(b=1, nq=32, nkv=32, sq=2048, skv=2048, d=128, causal=True),
    "prefill": dict(b=1, nq=32, nkv=32, sq=2048, skv=2048, d=128, causal=False),
    "decode": dict(b=16, nq=32, nkv=8, sq=1, skv=4096, d=128, causal=False),
    # the API's fixed cost: argument checks, tiling, conversions and the launch of a call with almost no work
    "fixed_cost": dict(b=1, nq=1, nkv=1, sq=16, skv=16, d=64, causal=False),
    "small_prefill": dict(b=1, nq=4, nkv=4, sq=512, skv=512, d=64, causal=False),
    "small_prefill_causal": dict(b=1, nq=4, nkv=4, sq=512, skv=512, d=64, causal=True),
}
#: the cases whose fixed cost per call is broken down by default (their calls take milliseconds)
BREAKDOWN_CASES = ("fixed_cost", "small_prefill", "small_prefill_causal")


def best_of(fn, repeat: int) -> float:
    fn()  # warm up (and compile)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def flops(c: dict) -> float:
    f = 4.0 * c["b"] * c["nq"] * c["sq"] * c["skv"] * c["d"]
    return f / 2 if c["causal"] else f


def inputs(c: dict, seed: int = 0):
    rng = np.random.default_rng(seed)
    q = rng.uniform(-1, 1, (c["b"], c["nq"], c["sq"], c["d"])).astype(np.float16)
    k = rng.uniform(-1, 1, (c["b"], c["nkv"], c["skv"], c["d"])).astype(np.float16)
    v = rng.uniform(-1, 1, (c["b"], c["nkv"], c["skv"], c["d"])).astype(np.float16)
    return q, k, v


def sim_call(c: dict, q, k, v, order: str = "program"):
    kw = dict(num_heads=c["nq"], num_key_value_heads=c["nkv"], input_layout="BNSD", scale=c["d"] ** -0.5)
    if c["causal"]:
        kw.update(sparse_mode=3, atten_mask=mask_template())
    return lambda: cvtile.npu_fused_infer_attention_score(q, k, v, order=order, **kw)


def numpy_attention(c: dict, q, k, v):
    """Plain numpy fp32 attention, per (batch, kv head), G heads folded into the rows."""
    q32, k32, v32 = (x.astype(np.float32) for x in (q, k, v))
    g = c["nq"] // c["nkv"]
    scale = np.float32(c["d"] ** -0.5)

    def run():
        out = np.empty_like(q32)
        for b in range(c["b"]):
            for n2 in range(c["nkv"]):
                rows = q32[b, n2 * g:(n2 + 1) * g].reshape(g * c["sq"], c["d"])
                s = rows @ k32[b, n2].T * scale
                if c["causal"]:
                    qpos = np.tile(np.arange(c["sq"]), g)[:, None] + (c["skv"] - c["sq"])
                    s = np.where(np.arange(c["skv"])[None, :] <= qpos, s, -np.inf)
                s -= s.max(axis=1, keepdims=True)
                np.exp(s, out=s)
                s /= s.sum(axis=1, keepdims=True)
                out[b, n2 * g:(n2 + 1) * g] = (s @ v32[b, n2]).reshape(g, c["sq"], c["d"])
        return out

    return run


def torch_calls(c: dict, q, k, v) -> dict:
    try:
        import torch
    except ImportError:
        return {}
    import torch.nn.functional as F

    qt, kt, vt = (torch.from_numpy(x.astype(np.float32)) for x in (q, k, v))
    calls = {}
    if c["nq"] == c["nkv"]:
        calls["torch_sdpa"] = lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=c["causal"])
    else:
        g = c["nq"] // c["nkv"]
        calls["torch_sdpa_gqa"] = lambda: F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=True)
        qf = qt.reshape(c["b"], c["nkv"], g * c["sq"], c["d"])
        calls["torch_sdpa_folded"] = lambda: F.scaled_dot_product_attention(qf, kt, vt)
    return calls


def fixed_cost(call, numpy_seconds: float, repeat: int) -> dict:
    """The call's stage breakdown with the tiling memo warm and emptied before each call
    (``fia_call_breakdown``), and the warm fixed cost's ratio to numpy's attention of the same shape."""
    from fia_call_breakdown import breakdown

    warm, fresh = breakdown(call, repeat), breakdown(call, max(5, repeat // 5), memo=False)
    return {"warm": warm, "new_signature": fresh, "numpy_ms": numpy_seconds * 1e3,
            "ratio_fixed_to_numpy": warm["fixed"] / (numpy_seconds * 1e3)}


def print_fixed_cost(fc: dict) -> None:
    warm, fresh = fc["warm"], fc["new_signature"]
    print(f"  fixed cost per call (call minus simulated cores): {warm['fixed']:.3f} ms median, "
          f"{warm['fixed_best']:.3f} ms best; calling thread's CPU {warm['cpu']:.3f} ms a call; "
          f"{fc['ratio_fixed_to_numpy']:.2f} x numpy's attention ({fc['numpy_ms']:.3f} ms); a new call "
          f"signature (tiling memo empty): {fresh['fixed']:.3f} ms")
    for label, ms in warm["components"].items():
        print(f"    {label:<22s} {ms:8.3f} ms   (new signature {fresh['components'][label]:8.3f} ms)")


_COMPILE_SCRIPT = """
import time, numpy as np
t0 = time.perf_counter()
import cvtile
from cvtile.sim.launch import COMPILE_STATS
t1 = time.perf_counter()
rng = np.random.default_rng(0)
q = rng.uniform(-1, 1, (16, 32, 1, 128)).astype(np.float16)
k = rng.uniform(-1, 1, (16, 8, 4096, 128)).astype(np.float16)
t2 = time.perf_counter()
cvtile.npu_fused_infer_attention_score(q, k, k, num_heads=32, num_key_value_heads=8, input_layout="BNSD",
                                       scale=128 ** -0.5)
t3 = time.perf_counter()
print(f"{t1 - t0:.3f} {t3 - t2:.3f} {COMPILE_STATS['seconds']:.3f}")
"""


def compile_times() -> dict:
    """Cold (empty cache) and warm (cache filled) processes running one decode call."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, CVTILE_CACHE_DIR=cache)
        out = {}
        for label in ("cold", "warm"):
            t0 = time.perf_counter()
            res = subprocess.run([sys.executable, "-c", _COMPILE_SCRIPT], env=env, capture_output=True, text=True,
                                 check=True)
            wall = time.perf_counter() - t0
            imp, call, comp = (float(x) for x in res.stdout.split()[-3:])
            out[label] = {"process_seconds": wall, "import_seconds": imp, "first_call_seconds": call,
                          "compile_seconds": comp}
        return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--skip-compile", action="store_true", help="skip the cold/warm process measurement")
    ap.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
    ap.add_argument("--program-only", action="store_true", help="skip the pipelined-order runs")
    ap.add_argument("--breakdown", nargs="*", choices=list(CASES), default=list(BREAKDOWN_CASES),
                    help="cases whose fixed cost per call is broken down by stage (none: no breakdown)")
    ap.add_argument("--breakdown-repeat", type=int, default=50)
    args = ap.parse_args(argv)
    report = {"threads": os.cpu_count(), "cases": {}}
    for name in args.cases:
        c = CASES[name]
        q, k, v = inputs(c)
        times = {"cvtile_sim": best_of(sim_call(c, q, k, v), args.repeat),
                 "numpy_fp32": best_of(numpy_attention(c, q, k, v), max(1, args.repeat // 2))}
        if not args.program_only:
            times["cvtile_sim_pipelined"] = best_of(sim_call(c, q, k, v, "pipelined"), args.repeat)
        for label, fn in torch_calls(c, q, k, v).items():
            times[label] = best_of(fn, args.repeat)
        f = flops(c)
        entry = {"shape": c, "seconds": times, "gflops": {k2: f / t / 1e9 for k2, t in times.items()},
                 "ratio_sim_to": {k2: times["cvtile_sim"] / t for k2, t in times.items() if k2 != "cvtile_sim"}}
        report["cases"][name] = entry
        if name in args.breakdown:
            entry["fixed_cost"] = fixed_cost(sim_call(c, q, k, v), times["numpy_fp32"], args.breakdown_repeat)
        if not args.json:
            print(f"{name}: " + ", ".join(f"{k2} {t * 1e3:.1f} ms ({entry['gflops'][k2]:.0f} GFLOP/s)"
                                          for k2, t in times.items()))
            print("  sim / reference: " + ", ".join(f"{k2} {r:.2f}" for k2, r in entry["ratio_sim_to"].items()))
            if "fixed_cost" in entry:
                print_fixed_cost(entry["fixed_cost"])
    if not args.skip_compile:
        report["compile"] = compile_times()
        if not args.json:
            for label, m in report["compile"].items():
                print(f"{label} process: {m['process_seconds']:.2f} s (import {m['import_seconds']:.2f} s, "
                      f"first call {m['first_call_seconds']:.2f} s of which kernel compile/load "
                      f"{m['compile_seconds']:.2f} s)")
    if args.json:
        print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
