"""Writing an attention variant: a score_mod and a mask_mod compiled into the FusedInferAttentionScore kernel.

A variant is two small functions in the tile language (FlexAttention's signatures): here Gemma 2's logit
soft-capping and a causal sliding window. ``cvtile.attention`` runs the operator's own tiling (op_host's
block sizes, GQA fold, core split) with the hooks in its vector stage and skips the blocks the window
empties; ``variant_golden`` applies the same two functions in numpy, in float64.

Run: python examples/06_attention_variants.py
Emit it as an Ascend C project and run that on the CPU twin:
    cvtile emit examples/06_attention_variants.py -o /tmp/variant --check --run
"""

import sys

import numpy as np

import cvtile
import cvtile.dsl as ct
from cvtile.kernels import compare
from cvtile.kernels.variants import variant_block_map, variant_golden

WINDOW, CAP = 96, 30.0


@ct.inline
def soft_cap(score, b, h, q_idx, kv_idx):
    return ct.tanh(score * (1.0 / CAP)) * CAP


@ct.inline
def sliding_window(b, h, q_idx, kv_idx):
    return (q_idx >= kv_idx) & (q_idx - kv_idx < WINDOW)


def main() -> int:
    rng = np.random.default_rng(0)
    q = (rng.standard_normal((1, 4, 1500, 64)) * 2).astype(np.float16)      # BNSD, 4 query heads
    k = (rng.standard_normal((1, 2, 1500, 64)) * 2).astype(np.float16)      # 2 kv heads (GQA)
    v = rng.standard_normal((1, 2, 1500, 64)).astype(np.float16)
    kw = dict(num_heads=4, num_key_value_heads=2, input_layout="BNSD", scale=0.125, softmax_lse_flag=True)
    print(variant_block_map(q, k, v, mask_mod=sliding_window, **kw).summary())
    out, lse = cvtile.attention(q, k, v, score_mod=soft_cap, mask_mod=sliding_window, **kw)
    gold, _ = variant_golden(q, k, v, score_mod=soft_cap, mask_mod=sliding_window, **kw)
    rep = compare(out, gold, np.float16)
    print(rep)
    print(f"{'PASS' if rep.passed else 'FAIL'}: soft-capped sliding-window attention, worst |err| "
          f"{rep.max_abs_err:.2e}")
    return 0 if rep.passed else 1


if __name__ == "__main__":
    sys.exit(main())
