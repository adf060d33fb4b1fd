"""On-chip budgets are checked at compile time: a kernel whose tiles do not fit fails with a table.

`acc` is a (BR, D) float32 accumulator that lives in UB for the whole loop. With BR=256
and D=256 it needs 256 KB, more than the 192 KB UB of an Ascend910B1 vector core, so
`compile` (and any launch) raises `ct.BudgetError` listing the buffers live at the peak
(name, space, shape, dtype, copies, bytes) and the total against the capacity. Halving
the tile makes it fit (`kernel.on("Ascend950")` checks against that chip's budgets instead).

Run: python examples/04_budget_error.py
"""

import sys

import numpy as np

import cvtile.dsl as ct


@ct.jit
def sum_blocks(x, out, nblocks, BR: ct.constexpr, D: ct.constexpr):
    with ct.vector():
        acc = ct.zeros((BR, D), ct.float32)
    for j in range(nblocks):
        with ct.vector():
            acc = acc + ct.load(x[j, 0:BR, 0:D])
    with ct.vector():
        ct.store(out[0:BR, 0:D], acc)


def args(br, d=256):
    return np.zeros((2, br, d), np.float32), np.zeros((br, d), np.float32), 2


def main() -> int:
    try:
        sum_blocks.compile(*args(256), BR=256, D=256)
    except ct.BudgetError as e:
        print("BudgetError raised at compile time:")
        print(e)
        caught = e.report.spaces["UB"].peak > e.report.spaces["UB"].capacity
    else:
        caught = False
        print("no BudgetError for a 256 KB UB accumulator")

    small = sum_blocks.compile(*args(128), BR=128, D=256)            # half the rows: fits
    print("\nwith BR=128:\n" + small.report.table("UB"))
    fits = small.report.spaces["UB"].fits
    ok = caught and fits
    print(f"{'PASS' if ok else 'FAIL'}: BR=256 rejected with the UB table, BR=128 fits "
          f"({small.report.spaces['UB'].peak} of {small.report.spaces['UB'].capacity} bytes)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
