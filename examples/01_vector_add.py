"""The basics of cvtile: out = alpha * x + y over the rows of two (N, 64) float32 tensors.

* `@ct.jit` compiles the function for each specialisation; `N` and `BLOCK` are compile-time
  (`ct.constexpr`), `alpha` is a runtime scalar, the arrays are GM tensors.
* `kernel[grid](...)` launches it on `grid` simulated cores; each core takes every
  `block_num()`-th block of BLOCK rows, starting at its `block_idx()`.
* `with ct.vector():` holds vector work: `load` copies a GM window into a UB tile,
  arithmetic makes new tiles, `store` copies a tile back to GM.
* `ct.ds(start, BLOCK, valid=n)` is a slice of static extent BLOCK of which only the first
  n rows are used: the tail block when N is not a multiple of BLOCK.

Run: python examples/01_vector_add.py
"""

import sys

import numpy as np

import cvtile.dsl as ct


@ct.jit
def scale_add(x, y, out, alpha, N: ct.constexpr, BLOCK: ct.constexpr):
    for r0 in range(ct.block_idx() * BLOCK, N, ct.block_num() * BLOCK):
        n = min(BLOCK, N - r0)                                   # rows in this block (< BLOCK at the tail)
        with ct.vector():
            a = ct.load(x[ct.ds(r0, BLOCK, valid=n), 0:64])      # GM -> UB
            b = ct.load(y[ct.ds(r0, BLOCK, valid=n), 0:64])
            ct.store(out[ct.ds(r0, BLOCK, valid=n), 0:64], a * alpha + b)   # UB -> GM


def main() -> int:
    N, BLOCK, alpha = 1000, 64, 2.5
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, 64)).astype(np.float32)
    y = rng.standard_normal((N, 64)).astype(np.float32)
    out = np.zeros_like(x)
    scale_add[4](x, y, out, alpha, N=N, BLOCK=BLOCK)             # 4 simulated cores

    ck = scale_add.compile(x, y, out, alpha, N=N, BLOCK=BLOCK)   # the same specialisation, from the cache:
    #  ck.ir (the tile IR), ck.report (on-chip budget), ck.numba_source (the simulator's code)
    print("\n".join(line for line in str(ck.ir).splitlines() if "load(" in line or "store(" in line))

    want = x * np.float32(alpha) + y                              # float32 arithmetic, op by op
    ok = np.array_equal(out, want)
    print(f"{'PASS' if ok else 'FAIL'}: scale_add N={N} BLOCK={BLOCK} on 4 cores, "
          f"max abs error {np.abs(out - want).max():.2e} (bit-exact expected)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
