"""The pieces of C both Ascend C lowering rule sets print (``lower`` for the vector and scalar ops,
``lower_cube`` for the cube ops), and the errors they raise.

Model
-----
* ``CTYPE``: the C element type of each IR element dtype (bool is stored as ``uint8_t``).
* ``SPACE_VAR``: the variable of each on-chip buffer (UB, L1, L0A, L0B, L0C) a tile's ``LocalTensor`` is a
  view of, at the byte offset the memory plan gave it.
* ``c_cast`` / ``c_sum``: a ``static_cast`` (not around an integer literal) and a sum without zero terms, so
  the printed index arithmetic stays readable.
* ``AscendCError`` (a layout or size rule of the API is broken) and ``AscendCUnsupported`` (an IR construct
  the backend does not lower, naming the op kind and the line): typed, never a C compile error later.
"""

from __future__ import annotations

from ..errors import CompilationError

__all__ = ["AscendCError", "AscendCUnsupported", "CTYPE", "SPACE_VAR", "c_cast", "c_sum"]


class AscendCError(CompilationError):
    """The kernel cannot be printed as Ascend C (a layout or size rule of the API is broken)."""


class AscendCUnsupported(AscendCError):
    """An IR construct the Ascend C backend does not lower (yet); names the op kind and the line."""


CTYPE = {"float32": "float", "float16": "half", "bfloat16": "bfloat16_t", "int8": "int8_t", "uint8": "uint8_t",
         "int16": "int16_t", "int32": "int32_t", "int64": "int64_t", "bool": "uint8_t"}
SPACE_VAR = {"UB": "ub", "L1": "l1", "L0A": "l0a", "L0B": "l0b", "L0C": "l0c"}


def c_cast(ctype: str, e: str) -> str:
    """``static_cast<ctype>(e)``, or the literal itself."""
    return e if e.isdigit() else f"static_cast<{ctype}>({e})"


def c_sum(*terms: str) -> str:
    """A C sum of expressions, without the zero terms."""
    kept = [t for t in terms if t not in ("0", "", "(0)")]
    return " + ".join(kept) if kept else "0"
