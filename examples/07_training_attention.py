"""FlashAttentionScore, the training forward: causal attention with dropout, checked against float64.

    python examples/07_training_attention.py

``cvtile.npu_fusion_attention`` takes torch_npu's arguments; the call runs op_host's FAS tiling (printed) and
the DSL kernel on the simulated chip, and returns the output and the softmax statistics the backward reads.
"""

import sys

import numpy as np

import cvtile
from cvtile.kernels import compare
from cvtile.kernels.fas.api import fas_tiling
from cvtile.kernels.fas.dropout import pack_drop_mask
from cvtile.kernels.fas.host import prepare_call
from cvtile.kernels.golden import mask_template
from cvtile.kernels.golden.fas import fas_golden


def main():
    rng = np.random.default_rng(0)
    b, n, n_kv, s, d = 1, 4, 2, 256, 64
    q = rng.standard_normal((b, s, n, d)).astype(np.float16)
    k = rng.standard_normal((b, s, n_kv, d)).astype(np.float16)
    v = rng.standard_normal((b, s, n_kv, d)).astype(np.float16)
    keep = rng.uniform(size=(b, n, s, s)) < 0.9                      # the dropout mask, as bits
    kw = dict(head_num=n, input_layout="BSND", scale=d ** -0.5, atten_mask=mask_template(), sparse_mode=2,
              keep_prob=0.9, dropout_mask=pack_drop_mask(keep))

    out, softmax_max, softmax_sum = cvtile.npu_fusion_attention(q, k, v, **kw)[:3]

    call = prepare_call(q, k, v, **kw)
    t = fas_tiling(call)
    print(f"op_host: template {t.template} (priority {t.priority}), blocks {t.s1_base}x{t.s2_base}, "
          f"{t.core_num} cores, tiling key {t.tiling_key}")
    golden, g_max, _ = fas_golden(call, q, k, v, p_dtype="float16")
    report = compare(out, golden, np.float16, name="attention_out")
    print(report)
    ok = report.passed and np.allclose(softmax_max, g_max)
    print("PASS: causal FlashAttentionScore with dropout matches the float64 golden" if ok else
          "FAIL: the output or softmax_max is off the float64 golden")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
