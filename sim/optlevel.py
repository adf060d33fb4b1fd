"""The LLVM optimisation level the simulator's generated kernels are compiled at.

Model
-----
numba compiles every function at one process-wide level (``NUMBA_OPT``, default 3). The generated
kernels are large, straight-line-heavy functions whose run time is dominated by the matmul helpers and
the vector loops, and LLVM's level-3 rounds cost a quarter of their cold compile for no measurable run
time (``docs/compile_time.md``, "The kernels' optimisation level"). So the simulator compiles its kernels
at ``$CVTILE_OPT`` (default 1) whatever the process's numba level is, and leaves every other numba
function of the process at numba's own level.

Invariants
----------
* The level is not meant to change a result. The kernels' own statements carry no fast-math flags, so LLVM
  keeps IEEE semantics for them at every level. The runtime's exp, log, sqrt and rsqrt are declared with
  ``rt.FASTMATH``, but numba lowers a helper it inlines (``inline="always"``) with its caller's flags, so
  inside a kernel they are IEEE too (found by the direct compiler, 2026-12-07: its first copies of them kept
  the flags and gave other bits). The reassociated sums of the compiled helpers (``row_sum``, the skinny
  matmuls) keep their own flags, where another pass pipeline could round differently; measured, they give
  the same bits at levels 1 and 3 (a test compiles one kernel that uses
  all four at both levels and compares fp32 bits), and the default cases' outputs hash the same at levels
  0 to 3.
* ``compiling_kernels()`` holds numba's global compiler lock while the level is swapped in, so no other
  numba compile of the process (another thread's) runs at the kernels' level, and the process's level is
  restored when the compile ends or raises.
* The level is part of a generated module's text (``OPT_LEVEL``, written by ``codegen`` when it generates the
  module), and the launcher compiles the module at that level: a kernel cached at one level is never loaded
  by a process asking for another (numba's own cache index does not record the level), and a text and its
  compile cannot disagree, even in a ``precompile`` child with another environment.
* Runtime helpers (``cvtile.sim.rt``) a kernel calls for the first time are compiled inside the kernel's
  compile, so at the kernels' level; their cache is numba's and is shared by every level (only speed can
  differ, never a bit).
"""

from __future__ import annotations

import contextlib
import os

__all__ = ["LEVELS", "kernel_opt_level", "compiling_kernels"]

#: the levels ``$CVTILE_OPT`` accepts (0 is refused: measured 1.6 to 4 times slower runs for a third less
#: compile than level 1)
LEVELS = ("1", "2", "3")
_DEFAULT = "1"


def kernel_opt_level() -> int:
    """The level of ``$CVTILE_OPT`` (1 when unset); a ValueError naming the variable for anything else."""
    raw = os.environ.get("CVTILE_OPT", _DEFAULT).strip() or _DEFAULT
    if raw not in LEVELS:
        raise ValueError(f"CVTILE_OPT={raw!r}: the simulator's kernel optimisation level must be one of "
                         f"{', '.join(LEVELS)}")
    return int(raw)


@contextlib.contextmanager
def compiling_kernels(level: int | None = None):
    """Compile the generated kernels inside this block at ``level`` (default ``kernel_opt_level()``; the launcher
    passes the level the module's text names): numba's process-wide level is swapped for it under numba's
    compiler lock and put back on exit."""
    from numba.core import config
    from numba.core.compiler_lock import global_compiler_lock

    level = kernel_opt_level() if level is None else int(level)
    with global_compiler_lock:
        config.reload_config()     # a NUMBA_OPT set since the last compile takes effect now, not inside ours
        saved = config.OPT
        config.OPT = config._OptLevel(level)
        try:
            yield level
        finally:
            config.OPT = saved
