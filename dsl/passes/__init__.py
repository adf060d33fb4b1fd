"""IR passes, one per module named by its verb, and the pipeline that runs them.

Each pass is a function ``pass(kernel, platform) -> kernel`` with a module
docstring stating its model and invariants. ``run_pipeline`` runs them in
order and checks the spec of legal IR (``verify.verify_structure``) after the
frontend and after every pass; IR that breaks the spec after a pass is that
pass's bug and is reported as ``PassError`` naming it (a user error found by a
pass, e.g. a kernel that does not fit, stays a ``CompilationError`` at the
kernel line). The IR text after every pass is printed for ``ir_after`` (when first asked, for a kernel
``jit`` compiled: see ``Compilation``).

* ``simplify``: common-subexpression elimination of scalar arithmetic and
  repeated bound checks, then dead-code elimination of unused pure ops.
* ``split_cv``: the sequential kernel becomes one AIC and one AIV program
  (the AIV program run by both vector cores); crossing values become
  channels (``send``/``recv``), the vector rows are divided between the AIVs.
* ``place_handoffs``: each data channel gets its workspace slots (the preload
  depth of the platform table inside loops), its send/recv become stores and
  loads of the slot; the per-group workspace layout is fixed.
* ``pipeline``: the loops that carry hand-offs are software-pipelined (stages
  from the hand-off phases, guarded prologue/epilogue, shift registers for
  values that cross steps), so the AIC runs C1 of the next iteration while
  the AIVs run V1 of this one.
* ``chunk_rows``: a run of row-local vector work whose tiles do not fit UB
  is processed in row chunks (a loop over slices of the rows); what fits is
  left alone.
* ``plan_memory``: an address for every on-chip buffer of every program
  (lifetimes, in-place reuse, matmul staging pieces, ping-pong copies in
  pipelined loops, the platform's alignment); the budget report is this plan.
* ``insert_sync``: the cross-core flags of every channel (ready and free, the
  credits and the drain), ids allocated within the hardware's range.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..errors import CompilationError
from ..ir import Kernel
from .chunk_rows import chunk_rows
from .insert_sync import insert_sync
from .pipeline import pipeline
from .place_handoffs import place_handoffs
from .plan_memory import plan_memory
from .simplify import simplify
from .split_cv import split_cv

__all__ = ["simplify", "split_cv", "place_handoffs", "pipeline", "chunk_rows", "plan_memory", "insert_sync", "run_pipeline", "PassError", "Compilation",
           "PIPELINE"]


class PassError(CompilationError):
    """A pass produced IR that breaks the spec of legal IR: a compiler bug, named by the pass."""

    def __init__(self, pass_name: str, cause: CompilationError):
        self.pass_name = pass_name
        self.cause = cause
        super().__init__(f"internal compiler error: pass {pass_name!r} produced invalid IR: {cause.message}",
                         cause.loc)


#: the passes every kernel goes through, in order: (name, function). The IR before ``split_cv`` is the
#: sequential kernel (what program order runs); from ``split_cv`` on it holds the programs the chip runs.
PIPELINE = [("simplify", simplify), ("split_cv", split_cv), ("place_handoffs", place_handoffs),
            ("pipeline", pipeline), ("chunk_rows", chunk_rows),
            ("plan_memory", plan_memory), ("insert_sync", insert_sync)]


@dataclass
class Compilation:
    """The IR of one kernel along the pipeline: the IR objects, and the printed IR after each stage.

    The passes rewrite the IR in place, so the text of a stage exists only while the pipeline is at it.
    ``run_pipeline(..., texts=False)`` prints nothing (printing every stage was about a tenth of the pipeline's
    time) and keeps ``retrace``: the first ``ir_after`` traces the kernel again and runs the pipeline once
    more with the texts kept. The printer numbers values by their first appearance, so those texts are the
    ones the first run would have printed."""

    frontend: Kernel
    sequential: Kernel                          # the IR before split_cv (program order runs it)
    final: Kernel                               # the IR after every pass (pipelined order runs it)
    texts: dict | None = None                   # stage name -> printed IR (None: not printed yet)
    retrace: Callable[[], "Compilation"] | None = field(default=None, repr=False)

    def ir_after(self, stage: str) -> str:
        if self.texts is None:
            if self.retrace is None:
                raise KeyError("this compilation kept no printed IR (run_pipeline(..., texts=False) without a "
                               "retrace)")
            self.texts = self.retrace().texts
        try:
            return self.texts[stage]
        except KeyError:
            raise KeyError(f"no pass named {stage!r} (stages: {', '.join(self.texts)})") from None


def run_pipeline(kernel: Kernel, platform, passes=None, *, texts: bool = True,
                 retrace: Callable[[], "Compilation"] | None = None) -> Compilation:
    """Verify the frontend's IR, then run ``passes`` (default ``PIPELINE``), verifying after each; with
    ``texts`` the IR is printed after each stage (``Compilation.ir_after``), else ``retrace`` (a function
    that traces the same kernel again and runs this with ``texts``) prints it when first asked."""
    from ..verify import verify_structure

    _checked("frontend", kernel, platform, verify_structure)
    printed = {"frontend": str(kernel)} if texts else None
    ir = sequential = kernel
    for name, fn in (PIPELINE if passes is None else passes):
        ir = fn(ir, platform)
        _checked(name, ir, platform, verify_structure)
        if printed is not None:
            printed[name] = str(ir)
        if not ir.programs():
            sequential = ir
    return Compilation(kernel, sequential, ir, printed, None if texts else retrace)


def _checked(stage: str, kernel: Kernel, platform, verify_structure) -> None:
    try:
        verify_structure(kernel, platform)
    except PassError:
        raise
    except CompilationError as e:
        if stage == "frontend":
            raise PassError("frontend", e) from None
        raise PassError(stage, e) from None
