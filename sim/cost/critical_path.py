"""The critical path of a block: the chain of causes back from its last span, charged to categories and lines.

Model
-----
From the block's last span (``spans.last_span``) the path follows each span's ``cause`` (what decided its start)
back to the block's start. Each span's cycles are charged to its category (``report.categorise``; a flag-wait
stall to ``sync``) and to its source line; the gap between a span's start and its cause's end to ``sync`` when the
cause is on another core, a flag, or another pipe's op, else to ``scalar`` (issue time).

Most of a long block's path runs through group steps replayed from the memo (``group_memo``), whose spans are one
template (``spans.Replayed``) made again at every replay. Entering such a step at span j of program n, the path
stays in the step, by the template's names of the causes, until a cause is a span held at the step's head (or
none): a walk that depends only on (template, n, j). It is walked once per launch and such entry (a *segment*:
its cycles per category, per line in the order first met, each line's last op, and the span it leaves from) and
added as a whole at every later entry; only the gap to the span it leaves to is reckoned at each entry.

Invariant: the path and its top lines are exactly those of following every span: the schedule's times are whole
cycles, so a segment's sums (relative to its step, in any order) are the same floats as the span-by-span sums; a
line's place in the ranking's tie order is its first visit and its op is its last visit, as there.
"""

from __future__ import annotations

from .chrome_trace import short_loc
from .report import categorise
from .spans import LazySpan

__all__ = ["critical_path"]


class _Tally:
    """Cycles per category and per line (in the order first met), and each line's op kind and pipe (last met)."""

    __slots__ = ("path", "by_line", "meta", "lines_of")

    def __init__(self, lines_of: dict):
        self.path = {"cube": 0.0, "vector": 0.0, "memory": 0.0, "sync": 0.0, "scalar": 0.0}
        self.by_line: dict = {}
        self.meta: dict = {}
        self.lines_of = lines_of

    def span(self, pipe: str, dur: float, op, flow) -> None:
        self.path["sync" if flow is not None else categorise(pipe)] += dur    # a flag-wait stall is sync
        key = self.lines_of.get(id(op))
        if key is None:         # one short_loc per op (it builds a Path): a path holds each op many times
            key = self.lines_of[id(op)] = short_loc(op.loc if op is not None else None)
        self.by_line[key] = self.by_line.get(key, 0.0) + dur
        self.meta[key] = (op.kind if op is not None else "?", pipe)

    def gap(self, gap: float, flow, role, pipe, op, prev_role, prev_pipe, prev_op, has_prev: bool) -> None:
        """The wait between a span's start and its cause's end (``prev_*``; none: the block's start)."""
        if gap > 0:
            via_sync = flow is not None or (has_prev and prev_role != role) or \
                (has_prev and prev_pipe != pipe and prev_op is not op)
            self.path["sync" if via_sync else "scalar"] += gap

    def add(self, other: _Tally) -> None:
        for cat, c in other.path.items():
            self.path[cat] += c
        for key, c in other.by_line.items():
            self.by_line[key] = self.by_line.get(key, 0.0) + c
        self.meta.update(other.meta)


def _segment(step, n: int, j: int, lines_of: dict) -> tuple:
    """(tally, (program, index, cause name) of the span it leaves from) of the path entering ``step`` at span j of
    program n."""
    tally = _Tally(lines_of)
    rows, roles = step.rows, {m: c.role for m, c in step.chunks.items()}
    while True:
        pipe, a, b, op, name, flow = rows[n][j]
        tally.span(pipe, b - a, op, flow)
        if name is None or name[0] != "n":
            return tally, (n, j, name)
        n2, j2 = name[1], name[2]
        p = rows[n2][j2]
        tally.gap(a - p[2], flow, roles[n], pipe, op, roles[n2], p[0], p[3], True)
        n, j = n2, j2


def critical_path(cur) -> tuple:
    """(cycles per category, the top source lines [(cycles, line, op kind, pipe)]) of the path back from ``cur``,
    the block's last span (None: no span)."""
    lines_of: dict = {}
    total = _Tally(lines_of)
    if cur is None:
        return total.path, []
    segments: dict = {}
    seen = set()
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if type(cur) is LazySpan:          # a replayed step's span: the step's segment from it, as a whole
            chunk = cur.chunk
            step = chunk.step
            key = (id(step.rows), chunk.n, cur.index)
            seg = segments.get(key)
            if seg is None:
                seg = segments[key] = _segment(step, chunk.n, cur.index, lines_of)
            tally, (n, j, name) = seg
            total.add(tally)
            out = step.chunks[n]
            pipe, a, _, op, _, flow = out.rows[j]
            prev = step.named(name)
            start = out.ref + a
        else:
            total.span(cur.pipe, cur.end - cur.start, cur.op, cur.flow)
            out, pipe, op, flow, prev, start = cur, cur.pipe, cur.op, cur.flow, cur.cause, cur.start
        has = prev is not None
        total.gap(start - (prev.end if has else 0.0), flow, out.role, pipe, op,
                  prev.role if has else None, prev.pipe if has else None, prev.op if has else None, has)
        cur = prev
    top = sorted(total.by_line.items(), key=lambda kv: -kv[1])[:8]
    return total.path, [(c, line, *total.meta[line]) for line, c in top]
