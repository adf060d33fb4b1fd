"""Whole blocks of a launch: what lets ``estimate`` time each distinct block once.

Model
-----
Every block (core group, or single core) of a launch starts from zeroed clocks and empty flag queues, and runs the
same programs on the same arguments; only the block index (and each AIV's sub-block index) differs. Its cycles
and per-program busy cycles are therefore a function of what decides time in each of its program instances (the
AIC with sub-block 0, AIV k with sub-block k): the timing-relevant scalars (``loop_memo.relevant_values``), every
tile op's key operands, the taken branches, the ping-pong parities, each flag-carrying loop and each core-local
loop holding loops iterated, each innermost core-local loop's bounds and the inputs that decide its own time
(``loop_memo.own_inputs``). That is the key ``group_memo.compile_prepass`` computes for a loop body, computed
here for the whole program (``compile_prepass`` of the program's block) from the launch's arguments: lengths and
extents, not the offsets a block addresses its work by. Blocks whose keys are equal (FIA's flash-decode combine: every block the same; attention blocks with
the same task shapes at other offsets) are run once; the others take the recorded cycles and busy cycles.

When a program's prepass cannot be compiled (it reads a value the prepass cannot compute: a scalar a tile op makes,
a timing-relevant result of a core-local loop), or a key cannot be computed, every block is run. Blocks whose spans
are recorded (``record="all"``) are always run.

Invariant: reusing a block never changes the estimate: the key determines every op's duration and start in each
program instance, so equal keys give bitwise equal cycles and busy cycles (whole cycles, exact arithmetic); the
launch's loop and tile memos a skipped block would have filled only change how fast later blocks run.

A block that is run takes its group steps' inputs from its key: the prepass marks where each iteration of a group
loop lies in the key and what it yields (``compile_prepass(marked=...)``), which the scheduler keys the step on
instead of running the group loop's own prepass again (``schedule.run_group``'s ``items``).
"""

from __future__ import annotations

from .group_memo import StepInputs

__all__ = ["BlockMemo", "ENABLED"]

#: whether ``estimate`` reuses blocks (switched off by tests comparing against running every block)
ENABLED = True


class BlockMemo:
    """The blocks of one launch run so far: key -> (cycles, ((role, busy cycles per pipe) per program instance))."""

    def __init__(self, launch, prepass_of):
        """``prepass_of(block)``: the whole-program prepass of a program's block (``compile_prepass``), or None."""
        self.launch = launch
        self.instances = []
        programs = launch.kernel.programs()
        n_aiv = launch.platform.cv_ratio if "aic" in programs else 1
        subs = ([("aic", 0)] if "aic" in programs else []) + \
            ([("aiv", k) for k in range(n_aiv)] if "aiv" in programs else [])
        compiled = {core: prepass_of(programs[core]) for core in {c for c, _ in subs}} if ENABLED else {}
        if compiled and all(got is not None for got in compiled.values()):
            self.instances = [(compiled[core][0], sub) for core, sub in subs]
        self.seen: dict = {}
        self.hits = 0

    def key(self, blk: int, marks=None):
        """The block's key, or None (no prepass, or one that raised: the block is run, and raises if it must).
        ``marks``: a list per program instance, to which its group loops' iterations are appended
        (``compile_prepass``)."""
        if not self.instances:
            return None
        launch = self.launch
        try:
            out = []
            for k, (prepass, sub) in enumerate(self.instances):
                vals = dict(launch.tensors)
                vals.update(launch.scalars)
                out.append(prepass(vals, blk, sub, marks[k] if marks is not None else None))
            return tuple(out)
        except Exception:  # noqa: BLE001 - the interpreter reports what the prepass tripped on
            return None

    def run(self, blk: int, run_block) -> tuple:
        """(cycles, ((role, busy) per program instance)) of block ``blk``: recorded, or ``run_block(blk, items)``'s
        (cycles, clocks), ``items`` per program instance its group steps' inputs taken from the key
        (``group_memo.StepInputs``), or None."""
        marks = [[] for _ in self.instances]
        key = self.key(blk, marks)
        if key is not None:
            got = self.seen.get(key)
            if got is not None:
                self.hits += 1
                return got
        items = [StepInputs(k, m) for k, m in zip(key, marks)] if key is not None else None
        cycles, clocks = run_block(blk, items)
        got = (cycles, tuple((c.role, dict(c.busy)) for c in clocks))
        if key is not None:
            self.seen[key] = got
        return got
