"""The cost model's timeline as a Chrome-trace JSON file (Perfetto and chrome://tracing open it).

Model
-----
One process per physical core (core group) of the chip, one thread per
(program, pipe): ``aic MTE2``, ``aiv0 V``, ... Every span the scheduler
recorded becomes a complete event (``ph: X``) named by its DSL op (``mma``,
``ewise.exp``, ``store``) with the kernel source line, the op's pipe and its
cycles in ``args``; a flag wait that stalled is a slice on the issue unit's
track (``S``) from the stall to the flag's arrival, joined to the set on the
other core by a flow arrow (``ph: s`` / ``ph: f``). Times are microseconds at the target's
clock. Blocks that ran in later waves are placed after the earlier blocks of
their core, each with its dispatch cost. Several launches (an operator call)
follow one another on the same timeline.

Invariant: the file is plain JSON with ``traceEvents`` and
``displayTimeUnit``; every ``X`` event has ``ts``, ``dur``, ``pid``, ``tid``.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from .report import categorise

__all__ = ["trace_events", "write_chrome_trace", "op_label", "short_loc"]

_PIPE_ORDER = ("S", "MTE2", "MTE1", "M", "FIX", "V", "MTE3")


@lru_cache(maxsize=4096)
def short_loc(loc) -> str:
    """``file.py:line`` of an IR location (no directories: traces and reports name the kernel file only)."""
    if loc is None:
        return "?"
    return f"{Path(loc.filename).name}:{loc.line}"


def op_label(op) -> str:
    if op is None:
        return "?"
    sub = op.attrs.get("op") or op.attrs.get("name") or op.attrs.get("handoff") or ""
    return f"{op.kind}.{sub}" if sub else op.kind


def trace_events(report) -> list:
    """The trace events of a ``CostReport`` (each launch's recorded blocks, launches back to back)."""
    events: list = []
    tids: dict = {}
    pids: set = set()
    offset_us = 0.0
    flow_id = 0
    for lc in report.launches:
        clock = lc.clock_mhz
        launch_us = lc.launch_cycles / clock
        events.append({"name": f"launch {lc.kernel}[{lc.grid}]", "cat": "launch", "ph": "X", "ts": offset_us,
                       "dur": launch_us, "pid": 0, "tid": 0, "args": {"bound": lc.bound,
                                                                      "estimated_us": lc.estimated_us}})
        pids.add(0)
        tids[(0, 0)] = "launches"
        base = offset_us + launch_us
        for blk, start_cycles, spans in lc.recorded:
            core = blk % max(1, lc.cores)
            pid = core + 1
            pids.add(pid)
            t0 = base + start_cycles / clock
            for s in spans:
                key = (pid, s.role, s.pipe)
                tid = tids.setdefault(key, None)
                if tid is None:
                    tid = tids[key] = len(tids) + 1
                ts = t0 + s.start / clock
                if s.flow is not None and s.cause is not None:   # a flag wait: an arrow from the set
                    flow_id += 1
                    src = s.cause
                    src_tid = tids.setdefault((pid, src.role, src.pipe), len(tids) + 1)
                    events.append({"name": op_label(s.flow), "cat": "flag", "ph": "s", "id": flow_id,
                                   "ts": t0 + src.end / clock, "pid": pid, "tid": src_tid})
                    events.append({"name": op_label(s.flow), "cat": "flag", "ph": "f", "bp": "e", "id": flow_id,
                                   "ts": t0 + s.end / clock, "pid": pid, "tid": tid})
                if s.end <= s.start:
                    continue
                cat = "sync" if s.flow is not None else categorise(s.pipe)
                events.append({"name": op_label(s.op), "cat": cat, "ph": "X", "ts": ts,
                               "dur": (s.end - s.start) / clock, "pid": pid, "tid": tid,
                               "args": {"line": short_loc(s.op.loc if s.op is not None else None),
                                        "source": (s.op.loc.text.strip() if s.op is not None and s.op.loc
                                                   and s.op.loc.text else ""),
                                        "pipe": s.pipe, "cycles": round(s.end - s.start, 1), "block": blk}})
        offset_us += lc.estimated_us
    meta = [{"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "launches"}}]
    for pid in sorted(pids - {0}):
        meta.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": f"core {pid - 1}"}})
        meta.append({"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": pid}})
    for key, tid in tids.items():
        if key == (0, 0):
            meta.append({"name": "thread_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": "launches"}})
            continue
        pid, role, pipe = key
        order = (0 if role == "aic" else 1 + int(role[3:] or 0)) * 10 + _PIPE_ORDER.index(pipe)
        meta.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": f"{role} {pipe}"}})
        meta.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": order}})
    return meta + events


def write_chrome_trace(report, path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"traceEvents": trace_events(report), "displayTimeUnit": "ns",
           "otherData": {"target": report.target, "estimated_us": report.estimated_us, "bound": report.bound}}
    path.write_text(json.dumps(doc))
    return path
