"""cvtile.dsl: the Cube/Vector tile language.

Write a kernel as a plain Python function decorated with ``@jit``; launch it
with ``kernel[grid](*args)``. Inside a kernel:

* scopes: ``with cube():`` (matrix work on the AIC) and ``with vector():``
  (elementwise and reduction work on the AIVs);
* GM tensors are kernel arguments; view them with indexing, ``ds``,
  ``reshape``/``split``/``permute``/``merge``/``narrow``;
* tiles: ``load``, ``store``, ``copy``, ``mma``, ``dequant`` (the fixpipe's int32 -> float16 on the way out
  of L0C), ``zeros``, ``full``, ``iota``,
  arithmetic operators (``**`` too; integer tiles: ``// % & | ^ << >>``),
  ``exp``/``log``/``sqrt``/``rsqrt``/``tanh``/``sigmoid``/``erf``/``floor``/``pow``/``abs``/``relu``
  (the float math functions also take scalars),
  ``maximum``/``minimum``/``where``/``cast``, ``rowmax``/``rowsum``/``rowmin``,
  ``gather(table, idx)`` (table[idx[i]] from a rank-1 GM view), ``device_print(name, value)``;
  broadcasts ``v[:, None]`` / ``v[None, :]``;
* scalars: ``block_idx()``, ``block_num()``, reads of GM integer tensors,
  Python arithmetic; ``for`` over ``range`` (an IR loop) or ``static_range``
  (unrolled); ``if`` on constexpr (resolved) or runtime scalars (a branch).

Memory spaces ``GM, L1, L0A, L0B, L0C, UB`` and dtypes ``float16, bfloat16,
float32, int8, int16, int32, int64, uint8, bool_`` (and ``float8_e4m3fn``, for
FP8 tensors kernels read and cast) are attributes of this module.
"""

from .builtins import (BUILTINS, abs, block_idx, block_num, cast, constexpr, copy, cube, dequant, device_print, ds,
                       erf, exp,
                       floor, full, gather, iota, load, log, maximum, minimum, mma, pow, relu, rowmax, rowmin, rowsum,
                       rsqrt, sigmoid, sqrt, static_assert, static_range, store, subblock_idx, subblock_num, tanh,
                       through_gm, vector, where, zeros)
from .errors import BudgetError, CompilationError, SimulationError
from .jit import CompiledKernel, JITFunction, inline, jit
from .types import (GM, L0A, L0B, L0C, L1, UB, DType, Space, bfloat16, bool_, float8_e4m3fn, float16, float32, int8,
                    int16, int32, int64, uint8)

inf = float("inf")

__all__ = [
    "jit", "inline", "constexpr", "cube", "vector", "JITFunction", "CompiledKernel", "CompilationError",
    "BudgetError", "SimulationError", "GM", "L1", "L0A", "L0B", "L0C", "UB", "DType", "Space", "float16",
    "float8_e4m3fn",
    "bfloat16", "float32", "int8", "int16", "int32", "int64", "uint8", "bool_", "block_idx", "block_num",
    "subblock_idx", "subblock_num", "load", "store", "copy", "through_gm", "mma", "dequant", "zeros", "full", "iota", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "floor", "pow", "abs",
    "relu", "maximum", "minimum", "where", "gather", "cast", "rowmax", "rowsum", "rowmin", "device_print", "ds", "static_assert",
    "static_range", "inf",
]
