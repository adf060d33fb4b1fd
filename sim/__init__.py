"""cvtile.sim: the CPU simulator of tile kernels.

The numba backend generates, from a kernel's tile IR, a numba-compiled
program that runs every core of the launch on the CPU threads with exact
fp16/bf16 rounding and checked GM accesses (``codegen``, ``launch``), plus the
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
