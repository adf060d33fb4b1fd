"""FlashAttentionScore forward (and backward) on the simulated chip against a CPU reference in the same run.

The case of issue 10: fp16 prefill B1 N32 S2048 D128, causal (sparse_mode 3), BNSD, through
``cvtile.npu_fusion_attention`` (op_host's FAS tiling, the DSL kernel, numba). The reference is
torch's ``scaled_dot_product_attention`` in fp32 on the CPU (``is_causal=True``) when torch is installed,
else an fp32 numpy attention with the same mask (one BLAS matmul pair per head, exp in fp32), each timed in
the same process, best of N. Printed: both wall times and the ratio cvtile / reference (target <= 1.5x).
With ``--grad`` the backward (``npu_fusion_attention_grad``) is timed against torch autograd of SDPA
(target <= 2x) or, without torch, the numpy fp32 backward.

    python benchmarks/bench_fas.py [--repeat 3] [--seq 2048] [--heads 32] [--grad] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from bench_fia import best_of  # noqa: E402
from cvtile.kernels.golden.masks import mask_template  # noqa: E402


def _inputs(seq: int, heads: int, d: int = 128):
    rng = np.random.default_rng(0)
    q, k, v, dy = (rng.standard_normal((1, heads, seq, d)).astype(np.float16) for _ in range(4))
    kw = dict(head_num=heads, input_layout="BNSD", scale=1.0 / np.sqrt(d), atten_mask=mask_template(),
              sparse_mode=3)
    return q, k, v, dy, kw


def _numpy_forward(q, k, v, scale):
    """fp32 causal attention per head (the reference without torch); returns out and the softmax stats."""
    qf, kf, vf = (x[0].astype(np.float32) for x in (q, k, v))
    s = qf.shape[1]
    causal = np.triu(np.ones((s, s), bool), 1)
    out = np.empty_like(qf)
    stats = []
    for h in range(qf.shape[0]):
        sc = (qf[h] @ kf[h].T) * np.float32(scale)
        sc[causal] = -np.inf
        m = sc.max(axis=1, keepdims=True)
        p = np.exp(sc - m)
        den = p.sum(axis=1, keepdims=True)
        out[h] = (p / den) @ vf[h]
        stats.append((m, den))
    return out, stats


def _numpy_backward(q, k, v, dy, scale):
    qf, kf, vf, df = (x[0].astype(np.float32) for x in (q, k, v, dy))
    s = qf.shape[1]
    causal = np.triu(np.ones((s, s), bool), 1)
    grads = []
    for h in range(qf.shape[0]):
        sc = (qf[h] @ kf[h].T) * np.float32(scale)
        sc[causal] = -np.inf
        p = np.exp(sc - sc.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        dv = p.T @ df[h]
        dp = df[h] @ vf[h].T
        ds = p * (dp - (p * dp).sum(axis=1, keepdims=True)) * np.float32(scale)
        grads.append((ds @ kf[h], ds.T @ qf[h], dv))
    return grads


def _torch_reference(q, k, v, dy, repeat: int, grad: bool):
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return None
    tq, tk, tv, tdy = (torch.from_numpy(x.astype(np.float32)) for x in (q, k, v, dy))
    fwd = best_of(lambda: F.scaled_dot_product_attention(tq, tk, tv, is_causal=True), repeat)
    res = {"reference": "torch SDPA fp32 (CPU)", "ref_forward_s": fwd}
    if grad:
        def backward():
            a, b, c = (t.clone().requires_grad_(True) for t in (tq, tk, tv))
            F.scaled_dot_product_attention(a, b, c, is_causal=True).backward(tdy)
        res["ref_backward_s"] = best_of(backward, repeat)
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--grad", action="store_true", help="also time the backward")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    from cvtile.kernels.fas.api import npu_fusion_attention

    q, k, v, dy, kw = _inputs(args.seq, args.heads)
    fwd = npu_fusion_attention(q, k, v, **kw)          # compile once before timing
    sim_fwd = best_of(lambda: npu_fusion_attention(q, k, v, **kw), args.repeat)
    res = {"case": f"B1 N{args.heads} S{args.seq} D128 fp16 causal BNSD", "cvtile_forward_s": sim_fwd}
    ref = _torch_reference(q, k, v, dy, args.repeat, args.grad)
    if ref is None:
        ref = {"reference": "numpy fp32 (torch not installed)",
               "ref_forward_s": best_of(lambda: _numpy_forward(q, k, v, kw["scale"]), args.repeat)}
        if args.grad:
            ref["ref_backward_s"] = best_of(lambda: _numpy_backward(q, k, v, dy, kw["scale"]), args.repeat)
    res.update(ref)
    res["forward_ratio"] = sim_fwd / ref["ref_forward_s"]
    if args.grad:
        from cvtile.kernels.fas.api_grad import npu_fusion_attention_grad

        gkw = dict(kw)
        gkw["scale_value"] = gkw.pop("scale")

        def grad():
            return npu_fusion_attention_grad(q, k, v, dy, softmax_max=fwd[1], softmax_sum=fwd[2], attention_in=fwd[0],
                                             **gkw)
        grad()
        res["cvtile_backward_s"] = best_of(grad, args.repeat)
        res["backward_ratio"] = res["cvtile_backward_s"] / ref["ref_backward_s"]
    if args.json:
        print(json.dumps(res, indent=2))
    else:
        for key, val in res.items():
            print(f"{key:>18}: {val:.4f}" if isinstance(val, float) else f"{key:>18}: {val}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
