"""The MLA kernel (query_rope / key_rope, D 512 + rope 64, one KV head) against the non-quant GQA kernel, per KV
byte, side by side in one process.

Issue 9's performance rule: a kernel a separate template adds runs within 1.5x of the non-quant GQA kernel's
simulated time *per KV byte* (a decode streams its KV cache). Shapes (Ascend910B1, op_host's tiling):

* ``gqa``: ``bench_fia``'s decode, B=16 Nq=32 Nkv=8 Sq=1 Skv=4096 D=128, fp16, the reference;
* ``mla``: a DeepSeek-style decode on the FiaTilingNonQuantMla template, B=16 Nq=32 Nkv=1 Sq=1 Skv=4096,
  D=512 + rope 64, dense BSND (value the key's tensor, as MLA passes it);
* ``mla_nz``: the same with NZ paged caches of block size 128 (read in place by the kernel).

For each: the best-of-N wall and CPU time of the whole API call (compiled before timing; it includes the host's
rope join, one copy of q and k), the KV bytes the kernel reads (key + key_rope + value), the CPU time per KV byte
and its ratio to the reference (target <= 1.5); and, since MLA's G = 32 heads per KV row make it compute-bound where
the GQA decode is memory-bound, the CPU time per FLOP against the reference.

    python benchmarks/bench_mla.py [--repeat 3] [--json]

``--chip950`` instead times, with the cost model only (``fia_cost``, no run), Ascend950's MLA full quant
(``fia_mla_fullquant``: float8_e4m3fn query and latent cache, per-token-head query scales, per-tensor key/value
scales, bf16 rope and output) against the bf16 MLA of the same shape on the same chip (B=16 Nq=32 Nkv=1 Sq=1
Skv=4096, D=512 + rope 64, dense BSND, the latent passed as key and value, both on the catch-all template): the
chip time of each and per byte of the latent cache as stored (key + key_rope: the 8-bit cache holds 640 bytes a
position, the bf16 one 1152). The 950's bf16 MLA kernels are not simulated (``tree.ROPE_TEMPLATES``): the bf16
figure is the non-quant kernel ``fia_attention`` with the rope joined (D 576, Dv 512, K and V loaded apart), as
the simulator runs the A2/A3 MLA, on op_host's tiling of the bf16 call. The simulated full-quant kernel loads the
FP8 cache widened to fp16 (``launch.float_cache_widened``) and reads the key's block twice (for q·kᵀ and as V,
where the chip reuses its L1 copy), so its load time is that of the 16-bit cache read twice, as the bf16
stand-in's K and V (2176 bytes a position either way): an upper bound on the chip's, which streams the 640
bytes a position of the FP8 latent and its rope once.

    python benchmarks/bench_mla.py --chip950 [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from bench_fia import CASES, inputs  # noqa: E402
from bench_quant import measure, report  # noqa: E402
from cvtile.kernels.golden.nz import to_nz  # noqa: E402

B, NQ, SKV, D, DR, BS = 16, 32, 4096, 512, 64, 128


def _calls() -> dict:
    """name -> (query, key, value, keywords, KV bytes)."""
    c = CASES["decode"]
    q, k, v = inputs(c)
    gkw = dict(num_heads=c["nq"], num_key_value_heads=c["nkv"], input_layout="BNSD", scale=c["d"] ** -0.5)
    rng = np.random.default_rng(2)
    r = lambda shape: rng.uniform(-1, 1, shape).astype(np.float16)  # noqa: E731
    mq, mqr = r((B, 1, NQ, D)), r((B, 1, NQ, DR))
    mk, mkr = r((B, SKV, 1, D)), r((B, SKV, 1, DR))
    mkw = dict(num_heads=NQ, num_key_value_heads=1, input_layout="BSND", scale=(D + DR) ** -0.5)
    per = SKV // BS
    table = rng.permutation(B * per).astype(np.int32).reshape(B, per)
    cache = lambda x: to_nz(np.ascontiguousarray(  # noqa: E731  (BSND -> BnNBsD blocks in table order -> NZ)
        x.reshape(B * per, BS, 1, x.shape[-1]).transpose(0, 2, 1, 3))[np.argsort(table.ravel())])
    nk, nkr = cache(mk), cache(mkr)
    pkw = dict(mkw, block_table=table, block_size=BS, actual_seq_lengths_kv=[SKV] * B)
    return {"gqa": (q, k, v, gkw, k.nbytes + v.nbytes),
            "mla": (mq, mk, mk, dict(mkw, query_rope=mqr, key_rope=mkr), 2 * mk.nbytes + mkr.nbytes),
            "mla_nz": (mq, nk, nk, dict(pkw, query_rope=mqr, key_rope=nkr), 2 * nk.nbytes + nkr.nbytes)}


def chip950() -> dict:
    """name -> the cost model's chip time (us), the latent cache's bytes and the time per byte, for the bf16
    MLA and the FP8 MLA full quant on Ascend950 (module doc), with the full quant's ratios to the bf16 one."""
    from unittest import mock

    import ml_dtypes

    from cvtile.kernels.fia import tree
    from cvtile.kernels.fia.cost import fia_cost

    rng = np.random.default_rng(3)
    bf16, f8 = ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn
    u = lambda shape, dtype, a=1.0: rng.uniform(-a, a, shape).astype(dtype)  # noqa: E731
    kw = dict(num_heads=NQ, num_key_value_heads=1, input_layout="BSND", scale=(D + DR) ** -0.5,
              target="Ascend950")
    kr = u((B, SKV, 1, DR), bf16)
    qr = u((B, 1, NQ, DR), bf16)
    k16, k8 = u((B, SKV, 1, D), bf16), u((B, SKV, 1, D), f8, 4.0)
    calls = {"mla_bf16": (u((B, 1, NQ, D), bf16), k16, dict(kw, query_rope=qr, key_rope=kr)),
             "mla_fullquant_fp8": (u((B, 1, NQ, D), f8, 4.0), k8, dict(
                 kw, query_rope=qr, key_rope=kr, dequant_scale_query=np.full((B, 1, NQ), 0.01, np.float32),
                 key_antiquant_scale=np.ones(1, np.float32), value_antiquant_scale=np.ones(1, np.float32),
                 query_quant_mode=3, out_dtype="bfloat16"))}
    res = {}
    for name, (q, k, extra) in calls.items():
        with mock.patch.object(tree, "ROPE_TEMPLATES", tree.ROPE_TEMPLATES + ("FusedInferAttentionScoreTilingImpl",)):
            rep = fia_cost(q, k, k, **extra)   # (the bf16 call's rope joined on the catch-all: module doc)
        nbytes = k.nbytes + kr.nbytes
        res[name] = {"kernel": rep.main.kernel, "template": rep.tiling.template, "chip_us": rep.estimated_us,
                     "cache_bytes": nbytes,
                     "chip_ps_per_byte": rep.estimated_us / nbytes * 1e6, "bound": rep.bound}
    ref, fq = res["mla_bf16"], res["mla_fullquant_fp8"]
    fq["ratio"] = fq["chip_us"] / ref["chip_us"]
    fq["ratio_per_byte"] = fq["chip_ps_per_byte"] / ref["chip_ps_per_byte"]
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--chip950", action="store_true", help="the cost model's Ascend950 MLA full quant vs bf16 MLA")
    args = ap.parse_args(argv)
    if args.chip950:
        res = chip950()
        if args.json:
            print(json.dumps(res, indent=2))
            return 0
        print(f"Ascend950 decode B={B} Nq={NQ} Skv={SKV} D={D}+{DR}: the cost model's chip time")
        for name, r in res.items():
            extra = (f"  ratio {r['ratio']:.2f}, per byte {r['ratio_per_byte']:.2f}" if "ratio" in r else "")
            print(f"  {name:18s} {r['kernel']:18s} {r['chip_us']:9.1f} us  cache {r['cache_bytes'] / 2 ** 20:6.1f} "
                  f"MiB  {r['chip_ps_per_byte']:.3f} ps/B  ({r['bound']}){extra}")
        return 0
    res = measure(_calls(), args.repeat, "gqa")
    report(res, f"decode B={B} Nq={NQ} Skv={SKV}: GQA Nkv=8 D=128 vs MLA Nkv=1 D={D}+{DR} (Ascend910B1), best of "
           f"{args.repeat}", args.json, "the GQA kernel's", 8)
    if args.json:
        return 0
    # the per-byte ratio hides the arithmetic: G = 32 query heads share each MLA KV row (4 in the GQA case) and
    # each row is 512 + 64 + 512 wide, so MLA does 4.25x the GQA case's FLOPs on 0.53x its bytes
    c = CASES["decode"]
    flops = {"gqa": 4 * c["b"] * c["nq"] * c["skv"] * c["d"], "mla": 2 * B * NQ * SKV * (2 * D + DR)}
    flops["mla_nz"] = flops["mla"]
    ref = res["gqa"]["cpu_s"] / flops["gqa"]
    print("  CPU time per FLOP / the GQA kernel's: " + ", ".join(
        f"{name} {r['cpu_s'] / flops[name] / ref:.2f}" for name, r in res.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
