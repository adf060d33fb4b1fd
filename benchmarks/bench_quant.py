"""The quantised FIA kernels against the non-quant kernel, per KV byte, side by side in one process.

Issue 9's performance rule: each kernel a quantised (or otherwise separate) template adds runs within 1.5x of the
non-quant kernel's simulated time *per KV byte* (the KV cache is what a decode streams; an int8 cache holds half
the bytes of an fp16 one). One decode shape (``bench_fia``'s: B=16 Nq=32 Nkv=8 Sq=1 Skv=4096 D=128, Ascend910B1,
op_host's tiling) is run

* ``nonquant``: fp16 key/value (``fia_attention``), the reference;
* ``antiquant``: int8 key/value with a per-channel scale and offset (``fia_antiquant``, the MSD kernel: the query
  and P split into int8 digits, three with inner_precise 0);
* ``antiquant_int4``: the same with an int4 cache packed 8 per int32 (four int4 digits; a quarter of the fp16
  cache's bytes);

With ``--case prefill`` (B=1 N=32 S=2048 D=128) the int8 cache takes the PromptFlashAttention route instead, its
KvAntiquant path (``fia_dequant``). With ``--case msd`` (the decode shape with a query S of 16, a bf16 query: a
speculative decode) it takes that route's MSD path (the key's and the value's own per-channel bf16 parameters:
``fia_antiquant`` with two digits); ``nonquant`` is then the bf16 call.

With ``--target Ascend950`` the same shape runs the non-quant kernel and the 950's ``fia_dequant`` (the int8,
int4 or FP8 E4M3 cache dequantised in the vector core, then the non-quant flow) instead.

For each, the best-of-N wall time and CPU time of the whole API call (compiled before timing), the KV bytes,
the CPU time per KV byte and its ratio to the reference (the target: <= 1.5). CPU time is reported beside wall
time because it is steadier on a shared machine; both are measured in the same run. Beside them (unless
``--no-chip``), the cost model's estimate of the chip's time for the same call (``fia_cost``: the launches
the API makes, timed on the target's cost table) per KV byte and its ratio: the simulator's time follows the
work it does (the MSD kernel's digit matmuls, the 950's dequantisation), the chip's also the bytes it
streams. An FP8 cache reaches the 950 kernel as its 8-bit codes (``float8_e4m3fn``); an int4 cache reaches
both kernels as int8 values (and a HiF8 one the 950's widened to 16 bits), which overstates their chip time. A
chip time of a launch cvtile's build runs otherwise than the chip's kernel carries the cost report's note (the
A2/A3 antiquant decode: its units run in two waves of core groups where op_host's launch runs one).

    python benchmarks/bench_quant.py [--repeat 5] [--json] [--target Ascend910B1|Ascend950]
                                     [--case decode|prefill|msd]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402

import cvtile  # noqa: E402
from bench_fia import CASES, inputs  # noqa: E402
from cvtile.kernels.fia.cost import fia_cost  # noqa: E402
from cvtile.kernels.golden.int4 import pack_int4  # noqa: E402

#: a speculative decode: bench_fia's decode shape with a query S of 16 (the MSD path's limit)
MSD_CASE = dict(CASES["decode"], sq=16)


def _calls(target: str = "Ascend910B1", case: str = "decode") -> dict:
    """name -> (query, key, value, keywords, KV bytes) of each call. On Ascend950 (its dequant kernel) with the
    key's and the value's own scale and offset. ``case`` "prefill" (``bench_fia``'s B=1 N=32 S=2048 D=128, Atlas
    A2/A3 only): the non-quant kernel and the int8 cache on the PromptFlashAttention route's KvAntiquant path
    (an fp16 query with the stacked parameters; an int4 cache is not simulated there). ``case`` "msd" (Atlas
    A2/A3 only): a query S of 16 in bf16, the non-quant kernel and the route's MSD path."""
    c = MSD_CASE if case == "msd" else CASES[case]
    q, k, v = inputs(c)
    if case == "msd":
        q, k, v = (x.astype(ml_dtypes.bfloat16) for x in (q, k, v))
    kw = dict(num_heads=c["nq"], num_key_value_heads=c["nkv"], input_layout="BNSD", scale=c["d"] ** -0.5,
              target=target)
    rng = np.random.default_rng(1)
    k8, v8 = (rng.integers(-127, 128, x.shape).astype(np.int8) for x in (k, v))
    k4, v4 = (pack_int4(rng.integers(-8, 8, x.shape).astype(np.int8)) for x in (k, v))
    scale = rng.uniform(0.002, 0.01, (2, c["nkv"], 1, c["d"])).astype(np.float16)
    offset = rng.uniform(-2, 2, (2, c["nkv"], 1, c["d"])).astype(np.float16)
    if target == "Ascend950":
        f8k, f8v = (rng.uniform(-240, 240, x.shape).astype(ml_dtypes.float8_e4m3fn) for x in (k, v))
        quant = dict(key_antiquant_scale=scale[0], value_antiquant_scale=scale[1], key_antiquant_offset=offset[0],
                     value_antiquant_offset=offset[1])
        fp8 = dict(key_antiquant_scale=scale[0], value_antiquant_scale=scale[1])
    else:
        quant = fp8 = dict(antiquant_scale=scale, antiquant_offset=offset)
    calls = {"nonquant": (q, k, v, {}), "antiquant": (q, k8, v8, quant), "antiquant_int4": (q, k4, v4, quant)}
    if case == "prefill":
        del calls["antiquant_int4"]
    if case == "msd":   # the key's and the value's own per-channel bf16 parameters: the MSD path
        bf = {name: x.astype(ml_dtypes.bfloat16) for name, x in
              dict(key_antiquant_scale=scale[0], value_antiquant_scale=scale[1], key_antiquant_offset=offset[0],
                   value_antiquant_offset=offset[1]).items()}
        calls = {"nonquant": calls["nonquant"], "antiquant_msd": (q, k8, v8, bf)}
    if target == "Ascend950":
        calls["antiquant_fp8"] = (q, f8k, f8v, fp8)
    return {name: (qq, kk, vv, {**extra, **kw}, kk.nbytes + vv.nbytes)
            for name, (qq, kk, vv, extra) in calls.items()}


def _best(fn, repeat: int) -> tuple:
    """(best wall seconds, best CPU seconds) over ``repeat`` runs after a warm-up (the compile)."""
    fn()
    wall = cpu = float("inf")
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall, cpu = min(wall, time.perf_counter() - t0), min(cpu, time.process_time() - c0)
    return wall, cpu


def measure(calls: dict, repeat: int, reference: str = "nonquant", chip: bool = True) -> dict:
    """name -> timings of each ``(query, key, value, keywords, KV bytes)`` of ``calls``: the simulator's CPU time
    per KV byte and, with ``chip``, the cost model's estimate of the chip's time (``fia_cost``, the same launches)
    per KV byte, each with its ratio to the ``reference`` entry's."""
    res = {}
    for name, (q, k, v, kw, nbytes) in calls.items():
        wall, cpu = _best(lambda: cvtile.npu_fused_infer_attention_score(q, k, v, **kw), repeat)
        res[name] = {"wall_s": wall, "cpu_s": cpu, "kv_bytes": nbytes, "cpu_ns_per_kv_byte": cpu / nbytes * 1e9}
        if chip:
            rep = fia_cost(q, k, v, **{"target": "Ascend910B1", **kw})
            us = rep.estimated_us
            res[name].update(chip_us=us, chip_ps_per_kv_byte=us / nbytes * 1e6, chip_notes=list(rep.notes))
    for key, out in (("cpu_ns_per_kv_byte", "ratio_per_kv_byte"), ("chip_ps_per_kv_byte", "chip_ratio_per_kv_byte")):
        if key in res[reference]:
            for r in res.values():
                r[out] = r[key] / res[reference][key]
    return res


def report(res: dict, title: str, as_json: bool, reference: str = "the non-quant kernel's", width: int = 14) -> None:
    """Print ``measure``'s result as JSON or as one line per kernel under ``title``."""
    if as_json:
        print(json.dumps(res, indent=2))
        return
    print(f"{title}; ratio = time per KV byte / {reference} (target <= 1.5): the simulator's CPU time, and the "
          "cost model's chip time")
    for name, r in res.items():
        chip = (f"  chip {r['chip_us']:8.1f} us  {r['chip_ps_per_kv_byte']:.3f} ps/B  ratio "
                f"{r['chip_ratio_per_kv_byte']:.2f}") if "chip_us" in r else ""
        print(f"  {name:{width}s} wall {r['wall_s'] * 1e3:8.1f} ms  cpu {r['cpu_s'] * 1e3:8.1f} ms  "
              f"KV {r['kv_bytes'] / 2 ** 20:6.1f} MiB  {r['cpu_ns_per_kv_byte']:.3f} ns/B  "
              f"ratio {r['ratio_per_kv_byte']:.2f}{chip}")
        for note in r.get("chip_notes", ()):   # where the chip time is of cvtile's build, not the chip's kernel
            print(f"  {'':{width}s} note: {note}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-chip", action="store_true", help="skip the cost model's chip-time column")
    ap.add_argument("--target", choices=("Ascend910B1", "Ascend950"), default="Ascend910B1",
                    help="Ascend910B1: the MSD kernels (int8, int4); Ascend950: its dequant kernel (int8, int4, fp8)")
    ap.add_argument("--case", choices=("decode", "prefill", "msd"), default="decode",
                    help="prefill: Ascend910B1's PromptFlashAttention KvAntiquant path; msd: its MSD path (a "
                         "query S of 16), each against the non-quant kernel")
    args = ap.parse_args(argv)
    if args.case in ("prefill", "msd") and args.target != "Ascend910B1":
        ap.error(f"--case {args.case} runs on Ascend910B1 (the PromptFlashAttention route)")
    c = MSD_CASE if args.case == "msd" else CASES[args.case]
    report(measure(_calls(args.target, args.case), args.repeat, chip=not args.no_chip),
           f"{args.case} B={c['b']} Nq={c['nq']} Nkv={c['nkv']} Sq={c['sq']} Skv={c['skv']} D={c['d']} "
           f"({args.target}), best of {args.repeat}", args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
