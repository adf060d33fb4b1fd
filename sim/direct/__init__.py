"""The direct compiler: a generated simulator module compiled without numba's front end.

Model
-----
``codegen`` writes each kernel program as Python for numba; numba's compile of it is about three quarters
front end (bytecode analysis, SSA, type inference, its Python lowering of every statement) and one quarter
LLVM (``docs/compile_time.md``). The generated text is a small regular subset of Python, so this package
reads it itself: ``lower`` types it in one pass and emits LLVM IR with numba's own typing and lowering of
each operation and numba's compiled runtime helpers, ``entry`` gives each function a C entry point called
through ``ctypes``, and ``build`` has numba's codegen optimise, link and emit it and caches the object code
beside the module's text. The launcher (``launch.NumbaRunner``) runs every module this way unless
``$CVTILE_COMPILER`` is ``numba``; a module outside the subset (``lower.Unsupported``: a ``device_print``, a
tile ``.copy()``) is compiled by numba as before, and the compile log says why.

Invariants
----------
* One text, two compilers, the same results: the direct compiler decides nothing numba's typing or lowering
  would decide differently, and links the same runtime helpers; the tests run kernels both ways and compare
  the outputs bit for bit.
* The generated text stays the single lowering of the tile IR; nothing here reads the IR.
"""

from __future__ import annotations

import os

from .build import DirectModule, cache_key, compile_functions
from .entry import DirectFunction, DirectRuntimeError
from .lower import Unsupported

__all__ = ["COMPILERS", "compiler", "compile_functions", "cache_key", "DirectModule", "DirectFunction", "DirectRuntimeError",
           "Unsupported"]

#: the values ``$CVTILE_COMPILER`` takes: the direct compiler (numba for a module outside its subset), the
#: default, or numba's full pipeline for every module
COMPILERS = ("direct", "numba")
DEFAULT = "direct"


def compiler() -> str:
    """``$CVTILE_COMPILER`` (``direct`` when unset); a ValueError naming the variable for anything else."""
    raw = os.environ.get("CVTILE_COMPILER", DEFAULT).strip() or DEFAULT
    if raw not in COMPILERS:
        raise ValueError(f"CVTILE_COMPILER={raw!r}: the simulator's compiler must be one of {', '.join(COMPILERS)}")
    return raw
