"""Spans: one op on one pipe of one core, and the spans of a replayed group step, made only when read.

Model
-----
A span is [start, end) of one op on one pipe of one program instance, with its ``cause`` (what decided its start:
the span the critical path steps back to) and, for a flag-wait stall, the flag's set op (``flow``). In record
mode a group step replayed from the memo (``group_memo``) makes its template's spans at the step's head. When only
the critical path is wanted (``cvtile cost``), most of them are never read: the path follows one chain of causes
back from the last span. So a replayed step leaves one entry per program in the clock's span list (a ``Replayed``
chunk) and makes a span (a ``LazySpan``) only when it is read: as a span the state holds after the step (a later
span's cause), as a cause along the path, as the last span (``last_span``), or all of them when the spans are
listed (``spans_of``: a trace; an outer step's template reads such a chunk from its rows, making none of its
spans: ``group_memo.span_template``). A span is made once (its chunk keeps it), so every reader sees the same
object, and its cause is resolved when first read, from the template's name for it and the spans held at the
step's head (a list that never changes after).

Invariant: the spans listed, their times, ops, flows and causes (the same objects) are exactly the spans making
them at the replay gives, in the same order; only when they are made changes.
"""

from __future__ import annotations

__all__ = ["Span", "LazySpan", "Replayed", "ReplayedStep", "spans_of", "last_span"]


class Span:
    """One op on one pipe of one core: [start, end) in cycles from the block's start."""

    __slots__ = ("role", "pipe", "start", "end", "op", "cause", "flow")

    def __init__(self, role, pipe, start, end, op, cause, flow=None):
        self.role, self.pipe, self.start, self.end, self.op, self.cause, self.flow = \
            role, pipe, start, end, op, cause, flow


_CAUSE = Span.__dict__["cause"]


class LazySpan(Span):
    """A span of a replayed step: its cause is the template's name for it until first read."""

    __slots__ = ("_step", "chunk", "index")

    def __init__(self, role, pipe, start, end, op, name, flow, chunk, index):
        self.role, self.pipe, self.start, self.end, self.op, self.flow = role, pipe, start, end, op, flow
        _CAUSE.__set__(self, name)
        self._step = chunk.step
        self.chunk, self.index = chunk, index     # where it is in its step (the critical path walks steps whole)

    @property
    def cause(self):
        step = self._step
        if step is not None:
            self._step = None
            _CAUSE.__set__(self, step.named(_CAUSE.__get__(self, LazySpan)))
        return _CAUSE.__get__(self, LazySpan)

    @cause.setter
    def cause(self, value):
        self._step = None
        _CAUSE.__set__(self, value)


class ReplayedStep:
    """One replay of a group step: its template's rows per program, a chunk per program and the spans held at its
    head (``old``)."""

    __slots__ = ("rows", "chunks", "old")

    def __init__(self, rows: dict, old: list):
        self.rows = rows
        self.chunks: dict = {}
        self.old = old

    def named(self, r):
        """The span a template names: ("n", program, index) one of the step's, ("o", slot) one held at its head."""
        if r is None:
            return None
        return self.chunks[r[1]].span(r[2]) if r[0] == "n" else self.old[r[1]]


class Replayed:
    """The spans one program made in a replayed step: template rows (pipe, start, end, op, cause name, flow)
    relative to ``ref``."""

    __slots__ = ("step", "n", "rows", "role", "ref", "made")

    def __init__(self, step: ReplayedStep, n: int, rows: tuple, role: str, ref: float):
        self.step, self.n, self.rows, self.role, self.ref = step, n, rows, role, ref
        self.made = [None] * len(rows)

    def span(self, j: int) -> LazySpan:
        s = self.made[j]
        if s is None:
            pipe, a, b, op, name, flow = self.rows[j]
            s = self.made[j] = LazySpan(self.role, pipe, self.ref + a, self.ref + b, op, name, flow, self, j)
        return s

    def spans(self) -> list:
        return [self.span(j) for j in range(len(self.rows))]


def spans_of(entries) -> list:
    """A clock's span list (or several, concatenated) with every replayed chunk made into its spans, in order."""
    out = []
    for e in entries:
        if type(e) is Replayed:
            out += e.spans()
        else:
            out.append(e)
    return out


def last_span(entries):
    """The span ``max(spans_of(entries), key=end)`` gives (the first of the latest), making only that one."""
    best, best_end = None, 0.0
    argmax: dict = {}
    for e in entries:
        if type(e) is Replayed:
            rows = e.rows
            if not rows:
                continue
            j = argmax.get(id(rows))
            if j is None:
                j = argmax[id(rows)] = max(range(len(rows)), key=lambda i: rows[i][2])
            end = e.ref + rows[j][2]
            if best is None or end > best_end:
                best, best_end = (e, j), end
        elif best is None or e.end > best_end:
            best, best_end = e, e.end
    if type(best) is tuple:
        return best[0].span(best[1])
    return best
