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
"""

from __future__ import annotations

import argparse
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
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
