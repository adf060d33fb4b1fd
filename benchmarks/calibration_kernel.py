"""The flash-attention forward of the public PTO-ISA / PTO-DSL measurements, in the cvtile tile language.

Their algorithm: non-causal, HEAD = D, one block of ``BM`` query rows per cube core at a time (blocks
spread over the cores in waves), S1 walked in tiles of ``BN`` keys; per tile the cube computes
S = Q K^T (fp32), the vector cores the online softmax (running max, running sum, rescaled accumulator,
P cast to fp16), the cube O = P V, the vector cores the accumulator update; the output is normalised
once at the end. cvtile's passes split, pipeline (preload depth of the platform table) and synchronise
it like any kernel; ``bench_cost.py`` times it with the cost model.
"""

import cvtile.dsl as ct


@ct.jit
def flash_attention_fwd(q, k, v, out, scale, S0: ct.constexpr, S1: ct.constexpr, D: ct.constexpr,
                        BM: ct.constexpr, BN: ct.constexpr):
    for m0 in range(ct.block_idx() * BM, S0, ct.block_num() * BM):
        mrows = min(BM, S0 - m0)
        with ct.cube():
            q1 = ct.load(q[ct.ds(m0, BM, valid=mrows), 0:D])
        with ct.vector():
            m = ct.full((BM,), -ct.inf, ct.float32, valid=mrows)
            l = ct.zeros((BM,), ct.float32, valid=mrows)
            acc = ct.zeros((BM, D), ct.float32, valid=(mrows, D))
        for n0 in range(0, S1, BN):
            ncols = min(BN, S1 - n0)
            with ct.cube():
                s = ct.mma(q1, k[ct.ds(n0, BN, valid=ncols), 0:D], trans_b=True)
            with ct.vector():
                s = s * scale
                m_new = ct.maximum(m, ct.rowmax(s))
                p = ct.exp(s - m_new[:, None])
                alpha = ct.exp(m - m_new)
                l = l * alpha + ct.rowsum(p)
                acc = acc * alpha[:, None]
                m = m_new
                p16 = ct.cast(p, ct.float16)
            with ct.cube():
                o = ct.mma(p16, v[ct.ds(n0, BN, valid=ncols), 0:D])
            with ct.vector():
                acc = acc + o
        with ct.vector():
            ct.store(out[ct.ds(m0, BM, valid=mrows), 0:D], ct.cast(acc / l[:, None], ct.float16))
