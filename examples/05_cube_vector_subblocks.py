"""Cube -> GM workspace -> two vector cores: the A2/A3 hand-off written by hand with sub-blocks.

Each core group takes M query rows. The cube computes S = Q K^T (fp16 in, fp32 in L0C) and
stores it to a GM workspace. Calling `subblock_idx()` makes the `with vector():` section run
once per vector core of the group (AIV 0, then AIV 1 in program order): each loads its M/2
rows of S, applies the scale and a row softmax in its own UB, and stores fp16 probabilities.
The IR shows the section as a loop over the sub-blocks.

Run: python examples/05_cube_vector_subblocks.py
"""

import sys

import numpy as np

import cvtile.dsl as ct


@ct.jit
def scores_softmax(q, k, ws, p, scale, M: ct.constexpr, N: ct.constexpr, D: ct.constexpr):
    for r0 in range(ct.block_idx() * M, q.shape[0], ct.block_num() * M):
        with ct.cube():
            s = ct.mma(ct.load(q[ct.ds(r0, M), 0:D]), ct.load(k[0:N, 0:D]), trans_b=True)
            ct.store(ws[ct.ds(r0, M), 0:N], s)                      # L0C -> GM workspace
        with ct.vector():
            h = M // ct.subblock_num()                              # rows per vector core
            mine = r0 + ct.subblock_idx() * h
            x = ct.load(ws[ct.ds(mine, h), 0:N]) * scale
            e = ct.exp(x - ct.rowmax(x)[:, None])
            ct.store(p[ct.ds(mine, h), 0:N], ct.cast(e / ct.rowsum(e)[:, None], ct.float16))


def main() -> int:
    rows, N, D, M = 256, 128, 64, 64
    rng = np.random.default_rng(0)
    q = rng.uniform(-1, 1, (rows, D)).astype(np.float16)
    k = rng.uniform(-1, 1, (N, D)).astype(np.float16)
    ws = np.zeros((rows, N), np.float32)
    p = np.zeros((rows, N), np.float16)
    scale = D ** -0.5
    scores_softmax[2](q, k, ws, p, scale, M=M, N=N, D=D)
    ir = str(scores_softmax.compile(q, k, ws, p, scale, M=M, N=N, D=D).ir)
    loop = [line.split("#")[0].strip() for line in ir.splitlines() if "%subblock" in line and "for" in line]
    print("sub-block loop in the IR:", loop[0])

    s = q.astype(np.float64) @ k.astype(np.float64).T * scale
    e = np.exp(s - s.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    err = np.abs(p.astype(np.float64) - want).max()
    ok = bool(err < 1e-3) and len(loop) == 1
    print(f"{'PASS' if ok else 'FAIL'}: {rows}x{N} scaled softmax(QK^T), each AIV half of {M} rows per block, "
          f"max abs error {err:.2e} (tol 1e-3)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
