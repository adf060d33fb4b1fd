"""The cost model: how long the chip would run a kernel, and what bounds it.

It times exactly the programs the chip runs: the final IR after every pass
(the AIC and AIV programs, pipelined, with the flags and events insert_sync
placed and the memory plan), interpreted with one launch's real arguments
(``schedule``), with per-op durations from the target's cost table in the
platform table (``durations``; ``Platform.cost``). ``report`` turns the
schedule into the estimate: time, bound, per-pipe busy fractions and the
critical path; ``chrome_trace`` writes the timeline for Perfetto, ``plots``
the timeline and roofline PNGs; ``critical_path`` walks the critical block's
spans (``spans``: a replayed group step's are made when read, and its walk
is reused per entry). ``estimate`` runs each distinct block once
(``block_memo``), with the cyclic garbage collector paused (nothing it
would find changes an estimate).

Entry points: ``estimate(compiled, grid, args)`` for one launch,
``estimate_calls(launch_records, target)`` for what an operator API
launched (``cvtile.dsl.record_launches(run=False)``), and ``k.cost(...)`` on
a compiled kernel.
"""

from __future__ import annotations

import gc
from collections import defaultdict
from contextlib import contextmanager

from .block_memo import BlockMemo
from .chrome_trace import write_chrome_trace
from .critical_path import critical_path
from .report import CostReport, LaunchCost
from .schedule import Launch, ModelDeadlock, ModelError, program_prepass, run_group, tensors_of
from .spans import last_span, spans_of

__all__ = ["estimate", "estimate_calls", "CostReport", "LaunchCost", "ModelDeadlock", "ModelError",
           "write_chrome_trace"]


def _physical_cores(kernel, platform) -> int:
    programs = kernel.programs()
    if "aic" in programs:
        return platform.aic
    return platform.aiv


def estimate(compiled, grid: int, args: list, *, flops: float = 0.0, record: str = "critical") -> LaunchCost:
    """Time one launch of ``compiled`` (a ``CompiledKernel``) on ``grid`` blocks with runtime ``args``.
    ``record``: whose spans to keep for a trace: ``"critical"`` (the block that finishes last), ``"all"``
    (every block, placed on its core's timeline) or ``"none"``."""
    if record not in ("critical", "all", "none"):
        raise ValueError(f"record must be 'critical', 'all' or 'none', got {record!r}")
    with _no_cyclic_gc():
        return _estimate(compiled, grid, args, flops, record)


@contextmanager
def _no_cyclic_gc():
    """The cyclic garbage collector paused while a launch is timed (as it was on entry after): the model makes
    many small tuples (memo keys, clock states, spans) that live until the launch is timed, and each collection
    would walk them and the whole compiled IR again (a fifth of a long launch's time). Reference counting frees
    everything else as usual (the launch's memos too: ``Launch.release``); the cycles made meanwhile are collected
    at the next collection after."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _estimate(compiled, grid: int, args: list, flops: float, record: str) -> LaunchCost:
    kernel = compiled.compilation.final
    platform = compiled.platform
    cost = platform.cost
    tensors, scalars = tensors_of(kernel, args, grid)
    launch = Launch(kernel, platform, grid, tensors, scalars, gm_rate_scale=1.0)
    ncores = min(grid, _physical_cores(kernel, platform))
    block_cycles, per_core, starts, recorded = [], [0.0] * ncores, [], []
    busy_sum: dict = defaultdict(lambda: defaultdict(float))
    instances: dict = defaultdict(int)
    # one block, or every block's spans kept: nothing to reuse
    blocks = BlockMemo(launch, lambda b: program_prepass(launch, b)) if record != "all" and grid > 1 else None
    for blk in range(grid):
        if blocks is not None:
            cycles, per_program = blocks.run(blk, lambda b, items: run_group(launch, b, items=items))
        else:
            cycles, clocks = run_group(launch, blk, record=record == "all")
            per_program = [(c.role, c.busy) for c in clocks]
        block_cycles.append(cycles)
        starts.append(per_core[blk % ncores] + cost.block_start_cycles)
        per_core[blk % ncores] += cycles + cost.block_start_cycles
        if record == "all":
            recorded.append((blk, starts[-1], spans_of(s for c in clocks for s in c.spans)))
        for role, per_pipe in per_program:
            ctype = "aic" if role == "aic" else "aiv"
            instances[ctype] += 1
            for pipe, b in per_pipe.items():
                if b:
                    busy_sum[ctype][pipe] += b
    compute = max(per_core) if per_core else 0.0
    waves = -(-grid // ncores) if ncores else 0
    # busy fractions over the time each instance's physical core exists: (instances / waves) cores of that type
    busy = {}
    for ctype, d in busy_sum.items():
        cores_of_type = instances[ctype] / max(1, waves)
        busy[ctype] = {p: b / (cores_of_type * compute) for p, b in sorted(d.items())} if compute else {}
    crit = max(range(grid), key=lambda b: block_cycles[b]) if grid else 0
    if record == "all":
        path, lines = critical_path(last_span(recorded[crit][2]) if grid else None)
    else:
        _, clocks = run_group(launch, crit, record=True)
        entries = [s for c in clocks for s in c.spans]
        path, lines = critical_path(last_span(entries))
        if record == "critical":          # the spans a trace shows, made when first read (spans.Replayed)
            recorded = lambda: [(crit, starts[crit], spans_of(entries))]  # noqa: E731
    launch.release()
    gm_bytes = _gm_bytes(kernel, args)
    hbm_floor = gm_bytes / (platform.hbm_gbytes_per_s * 1e9) * platform.clock_mhz * 1e6
    return LaunchCost(kernel=compiled.name, target=platform.name, grid=grid, cores=ncores, waves=waves,
                      clock_mhz=platform.clock_mhz, launch_cycles=cost.launch_cycles, compute_cycles=compute,
                      hbm_floor_cycles=hbm_floor, gm_bytes=gm_bytes, busy=busy, path=path, path_lines=lines,
                      block_cycles=block_cycles, recorded_source=recorded, critical_block=crit, flops=flops)


def _gm_bytes(kernel, args) -> int:
    """Compulsory HBM traffic: every user tensor argument once (read or written)."""
    import numpy as np

    return int(sum(np.asarray(a).nbytes for a in args if hasattr(a, "shape") and np.ndim(a) > 0))


def estimate_calls(records: list, target=None, *, flops: float = 0.0, record: str = "critical") -> CostReport:
    """The estimate of launches an operator API made (``record_launches`` records), run one after another
    (``flops``: the call's useful work, credited to its first launch for the TFLOPS figure)."""
    launches = [estimate(r.kernel, r.grid, r.args, flops=flops if i == 0 else 0.0, record=record)
                for i, r in enumerate(records)]
    name = target.name if hasattr(target, "name") else (target or (launches[0].target if launches else "?"))
    return CostReport(launches, name)
