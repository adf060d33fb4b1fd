"""cvtile.sim: the CPU simulator of tile kernels.

The numba backend generates, from a kernel's tile IR, the Python source of a
program (``codegen``) that runs every core of the launch on the CPU threads with
exact fp16/bf16 rounding and checked GM accesses, compiled by the direct compiler
(``direct``: numba's typing, lowering and runtime without numba's front end) or by
numba (``CVTILE_COMPILER=numba``, and a module outside the direct compiler's
subset) and run by ``launch``, plus the
runtime helpers it calls (``rt``, ``rounding``) and the host-side storage
conversions (``storage``), and the checking mode (``checking``: ``CheckMode``,
``checked_launches()`` and the errors it raises; ``checkgen``, ``shadow``). Importing
this package registers the backend with ``cvtile.dsl``.
"""

from ..dsl.jit import register_backend
from .checking import (CheckError, CheckMode, CheckModeError, EquivalenceError, FlagError, RaceError,
                       UninitialisedReadError, WriteOnceError, checked_launches)
from .launch import NumbaRunner, cache_dir

register_backend("numba", NumbaRunner)

__all__ = ["NumbaRunner", "cache_dir", "CheckMode", "checked_launches", "CheckError", "RaceError", "UninitialisedReadError",
           "WriteOnceError", "FlagError", "EquivalenceError", "CheckModeError"]
