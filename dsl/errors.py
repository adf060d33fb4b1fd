"""Errors of the tile language.

``CompilationError`` is raised while a kernel is turned into IR or verified. It
names the user's file and line and quotes the offending source line with a
caret under the column, like a compiler diagnostic:

    fia.py:42: mma is a cube op; it is not allowed inside `with vector():`
        s = ct.mma(q1, k1, trans_b=True)
            ^

``BudgetError`` (a ``CompilationError``) carries the on-chip memory table of
the kernel that does not fit. ``SimulationError`` is raised by the simulator
when a running kernel breaks a rule (an out-of-bounds GM access, a shape
mismatch between tiles); it names the kernel source line too.
"""

from __future__ import annotations

__all__ = ["CompilationError", "BudgetError", "SimulationError"]


class CompilationError(Exception):
    def __init__(self, message: str, loc=None):
        self.message = message
        self.loc = loc
        super().__init__(self._render())

    def _render(self) -> str:
        if self.loc is None:
            return self.message
        text = f"{self.loc.filename}:{self.loc.line}: {self.message}"
        if self.loc.text:
            line = self.loc.text.rstrip("\n")
            stripped = line.lstrip()
            lead = len(line) - len(stripped)
            caret = " " * max(0, self.loc.col - lead)
            text += f"\n    {stripped}\n    {caret}^"
        return text


class BudgetError(CompilationError):
    """A kernel whose on-chip buffers exceed a memory space of the target."""

    def __init__(self, message: str, table: str, report=None, loc=None):
        self.table = table
        self.report = report
        super().__init__(f"{message}\n{table}", loc)


class SimulationError(RuntimeError):
    """A rule broken while the simulated kernel ran (out-of-bounds access, shape mismatch...)."""

    def __init__(self, message: str, core: int | None = None, loc=None, values=()):
        self.core = core
        self.loc = loc
        self.values = tuple(values)
        where = f"{loc.filename}:{loc.line}: " if loc is not None else ""
        who = f" (core {core})" if core is not None else ""
        detail = f"\n    {loc.text.strip()}" if loc is not None and loc.text else ""
        super().__init__(f"{where}{message}{who}{detail}")
