"""Row softmax of a float16 (R, C) tensor: reductions, broadcasts and casts in the vector scope.

Each core takes blocks of BR rows. Per block: load the fp16 rows, compute in fp32
(`cast`), subtract the row max broadcast along the columns (`m[:, None]`), exponentiate,
divide by the row sum, and cast back to fp16 for the store (a UB->GM store does not
convert: storing an fp32 tile into an fp16 tensor is a compile error).

Run: python examples/02_softmax_rows.py
"""

import sys

import numpy as np

import cvtile.dsl as ct


@ct.jit
def softmax_rows(x, out, R: ct.constexpr, C: ct.constexpr, BR: ct.constexpr):
    for r0 in range(ct.block_idx() * BR, R, ct.block_num() * BR):
        n = min(BR, R - r0)
        with ct.vector():
            t = ct.cast(ct.load(x[ct.ds(r0, BR, valid=n), 0:C]), ct.float32)   # fp16 -> fp32
            m = ct.rowmax(t)                                                     # (BR,) row maxima
            p = ct.exp(t - m[:, None])                                           # broadcast along columns
            s = ct.rowsum(p)
            y = ct.cast(p / s[:, None], ct.float16)                              # round to fp16 (RNE)
            ct.store(out[ct.ds(r0, BR, valid=n), 0:C], y)


def main() -> int:
    R, C, BR = 300, 128, 32
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((R, C)) * 4).astype(np.float16)
    out = np.zeros_like(x)
    softmax_rows[4](x, out, R=R, C=C, BR=BR)

    xd = x.astype(np.float64)
    e = np.exp(xd - xd.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    err = np.abs(out.astype(np.float64) - want).max()
    rows = np.abs(out.astype(np.float64).sum(axis=1) - 1).max()
    ok = bool(err < 1e-3 and rows < 1e-2)
    print(f"{'PASS' if ok else 'FAIL'}: fp16 row softmax {R}x{C}, max abs error {err:.2e} (tol 1e-3), "
          f"max |row sum - 1| {rows:.2e}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
