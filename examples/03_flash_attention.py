"""A minimal single-head causal flash-attention forward in the cvtile tile language.

out = softmax(q k^T * scale + causal mask) v, for q, k, v of shape (S, D) in float16.
Each core takes blocks of BM query rows; per block of BN keys the cube computes
s = q k^T (fp32 in L0C), the vector cores apply the mask and the online softmax
(running max m, running sum l, rescaled accumulator acc; ``online_softmax_step`` from the kernel
library, which keeps rows that have seen only masked keys at zero instead of NaN), cast P to fp16 as the
chip does, and the cube computes P v. The values crossing scopes (s, p16, o)
are the cube<->vector hand-offs the compiler derives; print `ck.ir` to see them.

Run: python examples/03_flash_attention.py
"""

import sys

import numpy as np

import cvtile.dsl as ct
from cvtile.kernels.merge_state import online_softmax_step


@ct.jit
def flash_attention(q, k, v, out, scale, S: ct.constexpr, D: ct.constexpr, BM: ct.constexpr, BN: ct.constexpr):
    for m0 in range(ct.block_idx() * BM, S, ct.block_num() * BM):
        mrows = min(BM, S - m0)
        with ct.cube():
            q1 = ct.load(q[ct.ds(m0, BM, valid=mrows), 0:D])                  # GM -> L1, reused for every key block
        with ct.vector():
            m = ct.full((BM,), -ct.inf, ct.float32, valid=mrows)               # running row max
            l = ct.zeros((BM,), ct.float32, valid=mrows)                        # running row sum
            acc = ct.zeros((BM, D), ct.float32, valid=(mrows, D))               # unnormalised output
            rows = ct.iota(BM, valid=mrows) + m0                                # query positions
        for n0 in range(0, min(S, m0 + BM), BN):                                # causal: key blocks up to the diagonal
            ncols = min(BN, S - n0)
            with ct.cube():
                s = ct.mma(q1, k[ct.ds(n0, BN, valid=ncols), 0:D], trans_b=True)   # q k^T, fp32 in L0C
            with ct.vector():
                cols = ct.iota(BN, valid=ncols) + n0
                s = ct.where(cols[None, :] <= rows[:, None], s * scale, -ct.inf)
                p, alpha, m, l = online_softmax_step(s, m, l)                   # the library step (all-masked guard)
                acc = acc * alpha[:, None]
                p16 = ct.cast(p, ct.float16)                                    # P in fp16, as on the chip
            with ct.cube():
                o = ct.mma(p16, v[ct.ds(n0, BN, valid=ncols), 0:D])             # P v, fp32
            with ct.vector():
                acc = acc + o
        with ct.vector():
            ct.store(out[ct.ds(m0, BM, valid=mrows), 0:D], ct.cast(acc / l[:, None], ct.float16))


def reference(q, k, v, scale):
    s = (q.astype(np.float64) @ k.astype(np.float64).T) * scale
    s[np.triu(np.ones(s.shape, bool), 1)] = -np.inf
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ v.astype(np.float64)


def main() -> int:
    S, D, BM, BN = 200, 64, 64, 64                                              # S is not a multiple of the blocks
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((S, D)).astype(np.float16) for _ in range(3))
    out = np.zeros((S, D), np.float16)
    scale = 1.0 / np.sqrt(D)
    flash_attention[2](q, k, v, out, scale, S=S, D=D, BM=BM, BN=BN)
    err = np.abs(out.astype(np.float64) - reference(q, k, v, scale)).max()
    ok = bool(np.isfinite(err) and err < 5e-3)
    print(f"{'PASS' if ok else 'FAIL'}: causal flash attention S={S} D={D}, max abs error {err:.2e} (tol 5e-3)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
