"""The cost report of one or more launches: time, bound, busy fractions, critical path.

Model
-----
``estimate`` times one launch (``schedule``): every core group is run,
blocks are placed on the physical cores in waves, and the slowest core sets
the kernel's compute time. The block that finishes last is run once more
with spans recorded; its critical path is followed back from its last span
through what decided each start (the pipe's previous op, the previous piece
of the same op, an event's set, a flag's set on another core, the issue
unit: ``critical_path``). Each cycle of that path is charged to one category:

* ``cube``: the M pipe; ``vector``: the V pipe; ``memory``: MTE2, MTE1,
  MTE3 and FIX (GM and on-chip data movement); ``sync``: the gap between a
  flag's or event's set and the wait it releases; ``scalar``: issue time
  (scalar ops, loop control) with no pipe busy on the path.

The bound is ``launch`` when the launch overhead exceeds the compute time,
``memory`` when the compulsory HBM traffic at the chip's bandwidth exceeds
it, else the category with the most critical-path cycles (``scalar``
counts as ``sync``-free issue overhead and is reported as ``scalar``).

Busy fractions are per core type and pipe: busy cycles summed over every
program instance of that type, over (instances x the compute time).

An operator call's report (``CostReport``) is the sum of its launches, run one
after another, timed as cvtile builds them; its ``notes`` say where that build
runs the call otherwise than the chip's kernel (set by the operator's cost
function, e.g. ``kernels.fia.cost.build_notes``), so the estimate is not read as
the chip's where it is not.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

__all__ = ["CostReport", "LaunchCost", "categorise"]

CATEGORY = {"M": "cube", "V": "vector", "MTE2": "memory", "MTE1": "memory", "MTE3": "memory", "FIX": "memory",
            "S": "scalar"}


def categorise(pipe: str) -> str:
    return CATEGORY.get(pipe, "scalar")


@dataclass
class LaunchCost:
    """The estimate of one kernel launch."""

    kernel: str
    target: str
    grid: int
    cores: int                       # physical cores (core groups for a mixed kernel) the blocks ran on
    waves: int
    clock_mhz: float
    launch_cycles: float
    compute_cycles: float            # the busiest core's time (all its blocks, with dispatch)
    hbm_floor_cycles: float          # compulsory GM bytes at the chip's HBM bandwidth
    gm_bytes: int
    busy: dict                       # core type -> pipe -> fraction of the compute time
    path: dict                       # category -> cycles on the critical path of the critical block
    path_lines: list                 # [(cycles, "file:line", op kind, pipe)] top contributors on the path
    block_cycles: list               # per block
    #: ``recorded`` or the function making it (the critical block's spans are made when first read)
    recorded_source: object = field(default_factory=list, repr=False)
    critical_block: int = 0
    flops: float = 0.0

    @property
    def recorded(self) -> list:
        """[(block, its start on its core in cycles, its spans)] for the trace: the critical block, or every
        block."""
        if callable(self.recorded_source):
            self.recorded_source = self.recorded_source()
        return self.recorded_source

    @property
    def cycles(self) -> float:
        return self.launch_cycles + max(self.compute_cycles, self.hbm_floor_cycles)

    @property
    def estimated_us(self) -> float:
        return self.cycles / self.clock_mhz

    @property
    def bound(self) -> str:
        if self.launch_cycles > max(self.compute_cycles, self.hbm_floor_cycles):
            return "launch"
        if self.hbm_floor_cycles > self.compute_cycles:
            return "memory"
        path = {k: v for k, v in self.path.items() if v > 0}
        if not path:
            return "scalar"
        return max(path, key=path.get)


@dataclass
class CostReport:
    """The estimate of an operator call: its launches, run one after another."""

    launches: list
    target: str
    #: the operator's tiling when the report is of an operator call (``kernels.fia.cost``), else None
    tiling: object = None
    #: what the estimate does not mean to say about the chip (``kernels.fia.cost.build_notes``: where cvtile's
    #: build runs the call otherwise than the chip's kernel does); printed by ``summary``, in ``to_dict``
    notes: list = field(default_factory=list)

    @property
    def estimated_us(self) -> float:
        return sum(lc.estimated_us for lc in self.launches)

    @property
    def main(self) -> LaunchCost:
        """The launch that takes longest (its bound is the call's bound)."""
        return max(self.launches, key=lambda lc: lc.estimated_us)

    @property
    def bound(self) -> str:
        return self.main.bound

    @property
    def busy(self) -> dict:
        return self.main.busy

    def to_dict(self) -> dict:
        def one(lc: LaunchCost) -> dict:
            return {"kernel": lc.kernel, "grid": lc.grid, "cores": lc.cores, "waves": lc.waves,
                    "estimated_us": round(lc.estimated_us, 3), "bound": lc.bound,
                    "launch_us": round(lc.launch_cycles / lc.clock_mhz, 3),
                    "compute_us": round(lc.compute_cycles / lc.clock_mhz, 3),
                    "hbm_floor_us": round(lc.hbm_floor_cycles / lc.clock_mhz, 3), "gm_bytes": lc.gm_bytes,
                    "busy": {c: {p: round(f, 4) for p, f in d.items()} for c, d in lc.busy.items()},
                    "critical_path_cycles": {k: round(v, 1) for k, v in lc.path.items()},
                    "critical_path_top": [{"cycles": round(c, 1), "line": ln, "op": k, "pipe": p}
                                          for c, ln, k, p in lc.path_lines],
                    "critical_block": lc.critical_block,
                    "tflops": round(lc.flops / (lc.estimated_us * 1e6), 3) if lc.flops else None}
        return {"target": self.target, "estimated_us": round(self.estimated_us, 3), "bound": self.bound,
                "busy": {c: {p: round(f, 4) for p, f in d.items()} for c, d in self.busy.items()},
                "launches": [one(lc) for lc in self.launches], "notes": list(self.notes)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def summary(self) -> str:
        lines = [f"estimated {self.estimated_us:.2f} us on {self.target}, bound: {self.bound}"]
        for lc in self.launches:
            busy = ", ".join(f"{c}.{p} {f:.0%}" for c, d in lc.busy.items() for p, f in d.items() if f >= 0.01)
            lines.append(f"  {lc.kernel}[{lc.grid}]: {lc.estimated_us:.2f} us ({lc.waves} wave(s) on {lc.cores} "
                         f"cores; launch {lc.launch_cycles / lc.clock_mhz:.2f} us), bound {lc.bound}; busy {busy}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)
