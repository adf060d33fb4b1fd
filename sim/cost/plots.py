"""PNG views of a cost estimate: the pipeline timeline and the roofline.

Model
-----
``timeline_png``: the critical block of the call's longest launch as a Gantt
chart, one row per (program, pipe), bars coloured by category (cube, vector,
memory, scalar; a flag wait's stall on the issue unit's row ``S``); the title states the estimate and the
bound. ``roofline_png``: the target's roofs (the cube peak of every core at
the core clock, fp16: 16x16x16 MACs per cycle per fractal of the cost table,
and the HBM bandwidth line) on log-log axes of arithmetic intensity (useful
FLOPs per compulsory GM byte) against TFLOPS, with the call's point.

Both use matplotlib's non-interactive Agg backend (no display needed).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["timeline_png", "roofline_png"]

_COLORS = {"cube": "#d62728", "vector": "#1f77b4", "memory": "#2ca02c", "scalar": "#7f7f7f", "sync": "#ff7f0e"}
_PIPE_ORDER = ("S", "MTE2", "MTE1", "M", "FIX", "V", "MTE3")


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def timeline_png(report, path) -> Path:
    from .report import categorise

    plt = _plt()
    lc = report.main
    blk, _, spans = next(((b, s0, sp) for b, s0, sp in lc.recorded if b == lc.critical_block), lc.recorded[0])
    rows = sorted({(s.role, s.pipe) for s in spans if s.end > s.start},
                  key=lambda rp: ((0 if rp[0] == "aic" else 1 + int(rp[0][3:] or 0)), _PIPE_ORDER.index(rp[1])))
    index = {rp: i for i, rp in enumerate(rows)}
    fig, ax = plt.subplots(figsize=(12, 0.45 * len(rows) + 1.8))
    clock = lc.clock_mhz
    for cat in _COLORS:
        bars = [(s.start / clock, (s.end - s.start) / clock, index[(s.role, s.pipe)]) for s in spans
                if s.end > s.start and ("sync" if s.flow is not None else categorise(s.pipe)) == cat]
        for y in sorted({b[2] for b in bars}):
            ax.broken_barh([(x, w) for x, w, yy in bars if yy == y], (y - 0.4, 0.8), facecolors=_COLORS[cat])
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"{r} {p}" for r, p in rows])
    ax.invert_yaxis()
    ax.set_xlabel("time in the block (us)")
    ax.set_title(f"{lc.kernel}[{lc.grid}] on {lc.target}: block {blk}, estimated {report.estimated_us:.2f} us "
                 f"for the call, bound {report.bound}", fontsize=10)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in _COLORS.values()]
    ax.legend(handles, [("flag wait" if k == "sync" else k) for k in _COLORS], loc="upper right", fontsize=8,
              ncol=5)
    return _save(plt, fig, path)


def _save(plt, fig, path) -> Path:
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def roofline_png(report, platform, path, flops: float) -> Path:
    plt = _plt()
    lc = report.main
    peak_tflops = platform.aic * platform.clock_mhz * 1e6 * 2 * 16 * 16 * 16 / \
        platform.cost.mma_cycles_per_fractal["float16"] / 1e12
    bw = platform.hbm_gbytes_per_s * 1e9
    gm_bytes = sum(x.gm_bytes for x in report.launches)
    fig, ax = plt.subplots(figsize=(7, 5))
    ai_knee = peak_tflops * 1e12 / bw
    xs = [ai_knee / 100, ai_knee, ai_knee * 100]
    ax.loglog(xs, [min(peak_tflops, x * bw / 1e12) for x in xs], color="k", lw=1.5,
              label=f"roof: {peak_tflops:.0f} TFLOPS fp16 cube, {platform.hbm_gbytes_per_s / 1000:.1f} TB/s HBM")
    if flops and gm_bytes:
        ai = flops / gm_bytes
        tflops = flops / (report.estimated_us * 1e-6) / 1e12
        ax.loglog([ai], [tflops], "o", color=_COLORS["cube"], ms=8,
                  label=f"{lc.kernel}: {tflops:.2f} TFLOPS at {ai:.1f} FLOP/B ({tflops / peak_tflops:.0%} of peak)")
    ax.set_xlabel("arithmetic intensity (FLOP per compulsory GM byte)")
    ax.set_ylabel("TFLOPS")
    ax.set_title(f"roofline on {platform.name}: estimated {report.estimated_us:.2f} us, bound {report.bound}",
                 fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return _save(plt, fig, path)
