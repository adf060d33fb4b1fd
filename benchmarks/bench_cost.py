"""The cost model against public NPU measurements of flash attention (calibration), and its own speed.

For every point of the shared calibration table (``calibration_points.csv`` of the project's research
notes: ``$CVTILE_CALIBRATION`` or ``../shared/research/calibration_points.csv`` beside the checkout):

* the PTO-ISA manual and PTO-DSL kernels' times: cvtile's model of a DSL kernel with their algorithm and
  tile sizes (``calibration_kernel.flash_attention_fwd``: 128 query rows per block, S1 tiles of 256, or
  512 where the point says so; one block per core for the per-core table, every block on the chip's 24
  cores for the multi-core tables), on the chip the point names;
* the torch_npu column next to a point: cvtile's own FusedInferAttentionScore kernel with op_host's
  tiling on the same shape (B=1, N=1, BNSD, non-causal), as ``cvtile cost`` times it.

Nothing is fitted per point: the constants are the cost table's, per core generation. Prints one markdown
table (model us, measured us, model/measured) and the summary the calibration targets are stated in
(S1 >= 4096: every ratio in 0.8-1.25 and median |log ratio| <= 0.10; smaller shapes 0.65-1.5), then the
model's own time per estimate. ``--max-s N`` skips points with S1 > N (the FIA model of S=131072 takes
about a minute).

Run: python benchmarks/bench_cost.py [--max-s 32768] [--markdown FILE]
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration_kernel import flash_attention_fwd  # noqa: E402

from cvtile.kernels.fia.cost import fia_cost  # noqa: E402
from cvtile.sim.cost import estimate  # noqa: E402
from cvtile.tiling.platform import get_platform  # noqa: E402

_CHIP = {"910B2": "Ascend910B2", "A2/A3": "Ascend910B2", "A3-class 24 AIC": "Ascend910_93", "A3-class": "Ascend910_93"}


def _points_file() -> Path:
    env = os.environ.get("CVTILE_CALIBRATION")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "shared" / "research" / "calibration_points.csv"


def _tile_s1(row) -> int:
    t = row["tiling_if_known"]
    return 512 if "S1_TILE=512" in t else 256


def _preload(row) -> int:
    """The point's QK preload: the QK_PRELOAD it states, else its kernel's default: 3 for the PTO-DSL kernel
    (what its stated points use), 4 for the manual kernel (its case generator's qk_preload, calibration.md)."""
    t = row["tiling_if_known"]
    if "QK_PRELOAD=" in t:
        return int(t.split("QK_PRELOAD=")[1].split()[0])
    return 3 if row["kernel"].startswith("PTO-DSL") else 4


def _blocks_per_core_table(row) -> int | None:
    c = row["cube_cores_used_or_blocks"]
    return int(c.split()[0]) if c.endswith("core") or c.endswith("cores") else None


def pto_inputs(row) -> tuple:
    """What the model of a PTO point reads from it: (chip model, S0, S1, D, grid, S1 tile, preload). Two points
    with the same inputs get the same estimate, whatever their tables say besides."""
    s0, s1, d = int(row["S0"]), int(row["S1"]), int(row["D"])
    chip = _CHIP[row["chip"]]
    cores = _blocks_per_core_table(row)
    grid = cores if cores else min(get_platform(chip).aic, -(-s0 // 128))
    return chip, s0, s1, d, grid, _tile_s1(row), _preload(row)


def model_pto(row) -> tuple:
    """(model us, seconds the model took) of the DSL kernel with the point's algorithm and tiles."""
    chip, s0, s1, d, grid, tile, depth = pto_inputs(row)
    base = get_platform(chip)
    plat = replace(base, name=f"{base.name}+preload{depth}", preload_depth=depth)
    q = np.zeros((s0, d), np.float16)
    k = np.zeros((s1, d), np.float16)
    out = np.zeros((s0, d), np.float16)
    t0 = time.perf_counter()
    kern = flash_attention_fwd.on(plat)
    ck = kern.compile(q, k, k, out, 0.0883883, S0=s0, S1=s1, D=d, BM=128, BN=tile)
    lc = estimate(ck, grid, [q, k, k, out, 0.0883883], flops=4.0 * s0 * s1 * d, record="none")
    return lc.estimated_us, time.perf_counter() - t0, lc.bound


def contradictions(rows: list) -> list:
    """The pairs of PTO points the model cannot tell apart (the same ``pto_inputs``) whose measured times are
    further apart than the calibration band of their size allows for any one estimate (S1 >= 4096: 0.8-1.25,
    a spread of 1.5625x; smaller: 0.65-1.5, 2.31x): (id a, id b, measured a, measured b, band (lo, hi))."""
    out = []
    for i, a in enumerate(rows):
        for b in rows[i + 1:]:
            if pto_inputs(a) != pto_inputs(b):
                continue
            ta, tb = float(a["time_us"]), float(b["time_us"])
            lo, hi = (0.8, 1.25) if int(a["S1"]) >= 4096 else (0.65, 1.5)
            if max(ta, tb) * lo > min(ta, tb) * hi:   # e >= lo * max and e <= hi * min cannot both hold
                out.append((a["id"], b["id"], ta, tb, (lo, hi)))
    return out


def model_fia(row) -> tuple:
    s0, s1, d = int(row["S0"]), int(row["S1"]), int(row["D"])
    plat = get_platform(_CHIP[row["chip"]])
    q = np.zeros((1, 1, s0, d), np.float16)
    k = np.zeros((1, 1, s1, d), np.float16)
    t0 = time.perf_counter()
    rep = fia_cost(q, k, k, target=plat.name, num_heads=1, num_key_value_heads=1, input_layout="BNSD",
                   scale=d ** -0.5, record="none")
    return rep.estimated_us, time.perf_counter() - t0, rep.bound


def _torch_npu_us(row) -> float | None:
    note = row["notes"]
    if "torch_npu" in note:
        return float(note.split("torch_npu")[1].split()[0])
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max-s", type=int, default=1 << 30, help="skip points with S1 above this")
    ap.add_argument("--markdown", type=Path, help="also write the table to this file")
    args = ap.parse_args(argv)
    path = _points_file()
    if not path.exists():
        print(f"bench_cost: {path}: no calibration table (set CVTILE_CALIBRATION)", file=sys.stderr)
        return 2
    rows = [r for r in csv.DictReader(path.open()) if r["kernel"].startswith("PTO") and "FA" in r["kernel"]]
    lines = ["| point | kernel | chip model | S0 | S1 | measured us | model us | model/measured | bound | "
             "model s |", "|---|---|---|---|---|---|---|---|---|---|"]
    results = []
    for row in rows:
        s1 = int(row["S1"])
        if s1 > args.max_s:
            continue
        jobs = [("DSL kernel, PTO tiles", float(row["time_us"]), model_pto)]
        tn = _torch_npu_us(row)
        if tn is not None:
            jobs.append(("cvtile FIA (torch_npu column)", tn, model_fia))
        for what, measured, fn in jobs:
            us, secs, bound = fn(row)
            ratio = us / measured
            results.append((row["id"], what, s1, ratio))
            lines.append(f"| {row['id']} | {what} | {_CHIP[row['chip']]} | {row['S0']} | {s1} | {measured:.1f} | "
                         f"{us:.1f} | {ratio:.2f} | {bound} | {secs:.2f} |")
            print(lines[-1], flush=True)
    print()
    summary = []
    for what in ("DSL kernel, PTO tiles", "cvtile FIA (torch_npu column)"):
        big = [r for _, w, s, r in results if w == what and s >= 4096]
        small = [r for _, w, s, r in results if w == what and s < 4096]
        if big:
            med = statistics.median(abs(math.log(r)) for r in big)
            summary.append(f"{what}: S1 >= 4096: {len(big)} points, ratios {min(big):.2f}-{max(big):.2f} "
                           f"({sum(0.8 <= r <= 1.25 for r in big)} in 0.8-1.25), median |log ratio| {med:.3f}")
        if small:
            summary.append(f"{what}: S1 < 4096: {len(small)} points, ratios {min(small):.2f}-{max(small):.2f} "
                           f"({sum(0.65 <= r <= 1.5 for r in small)} in 0.65-1.5)")
    for a, b, ta, tb, (lo, hi) in contradictions(rows):
        summary.append(f"{a} and {b} give the model the same inputs (kernel, chip model, shape, blocks, tiles, "
                       f"preload), so one estimate, but were measured {ta:.1f} and {tb:.1f} us ({max(ta, tb) / min(ta, tb):.2f}x "
                       f"apart): no estimate puts both in {lo}-{hi} ({hi / lo:.2f}x wide)")
    print("\n".join(summary))
    if args.markdown:
        args.markdown.write_text("\n".join(lines) + "\n\n" + "\n".join(f"- {s}" for s in summary) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
