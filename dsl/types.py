"""Types of the tile language: element dtypes, memory spaces, and the types of IR values.

Model
-----
* ``DType``: an element type with its width and class. 16-bit floats are real
  types of the language; how a backend stores them (the simulator keeps
  float32 values rounded to the 16-bit grid, and uint16 bits in GM) is the
  backend's business.
* ``Space``: where a tile lives. GM (global memory, incl. the workspace), L1
  and L0A/L0B/L0C on the cube core (AIC), UB on the vector cores (AIV).
* IR value types: ``ScalarType`` (a runtime scalar: int64 index arithmetic,
  float32, bool), ``TensorType`` (a GM tensor argument: dtype and rank; its
  shape is runtime), ``TileType`` (an on-chip tile: dtype, space and a static
  capacity shape of rank 1 or 2; the runtime *valid* shape is at most the
  capacity and travels with the value).

Invariants
----------
* A tile's capacity shape is static (compile-time ints); its valid shape is
  known only at run time and never exceeds the capacity.
* Rank-2 tiles are (rows, columns); rank-1 tiles are vectors that a kernel
  broadcasts along rows (``v[:, None]``) or columns (``v[None, :]``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "DType", "float16", "bfloat16", "float8_e4m3fn", "float32", "int8", "int16", "int32", "int64", "uint8", "bool_",
    "DTYPES", "dtype_of", "Space", "GM", "L1", "L0A", "L0B", "L0C", "UB", "SPACES", "space_of",
    "ScalarType", "TensorType", "TileType", "INDEX", "F32", "BOOL",
]


@dataclass(frozen=True)
class DType:
    name: str
    bits: int
    kind: str  # "float", "int", "uint", "bool"

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        return self.kind in ("int", "uint")

    @property
    def is_bool(self) -> bool:
        return self.kind == "bool"

    @property
    def itemsize(self) -> int:
        return max(1, self.bits // 8)

    def __repr__(self) -> str:
        return self.name

    __str__ = __repr__

    def __deepcopy__(self, memo):   # one object per dtype: copies of IR share it (``is`` comparisons hold)
        return self

    def __reduce__(self):   # and IR loaded from a pickle gets this process's object (``specialisation_cache``)
        return dtype_of, (self.name,)


float16 = DType("float16", 16, "float")
bfloat16 = DType("bfloat16", 16, "float")
#: the 950's FP8 KV cache (1 sign, 4 exponent, 3 mantissa bits, no infinities): a GM tensor kernels read and cast
float8_e4m3fn = DType("float8_e4m3fn", 8, "float")
float32 = DType("float32", 32, "float")
int8 = DType("int8", 8, "int")
int16 = DType("int16", 16, "int")
int32 = DType("int32", 32, "int")
int64 = DType("int64", 64, "int")
uint8 = DType("uint8", 8, "uint")
bool_ = DType("bool", 8, "bool")

DTYPES = {d.name: d for d in (float16, bfloat16, float8_e4m3fn, float32, int8, int16, int32, int64, uint8, bool_)}
_DTYPE_ALIASES = {"fp16": "float16", "half": "float16", "bf16": "bfloat16", "fp32": "float32", "float": "float32",
                  "bool_": "bool", "int": "int64"}


def dtype_of(x) -> DType:
    """The DType named by a DType, a string, or a numpy/ml_dtypes/torch dtype."""
    if isinstance(x, DType):
        return x
    name = x if isinstance(x, str) else str(getattr(x, "name", x)).replace("torch.", "")
    name = _DTYPE_ALIASES.get(name, name)
    try:
        return DTYPES[name]
    except KeyError:
        raise TypeError(f"dtype {x!r} is not a cvtile tile dtype (known: {', '.join(DTYPES)})") from None


@dataclass(frozen=True)
class Space:
    name: str
    core: str  # "aic", "aiv" or "any" (GM)

    def __repr__(self) -> str:
        return self.name

    __str__ = __repr__

    def __deepcopy__(self, memo):   # one object per space: copies of IR share it (``is`` comparisons hold)
        return self

    def __reduce__(self):   # and IR loaded from a pickle gets this process's object (``specialisation_cache``)
        return space_of, (self.name,)


GM = Space("GM", "any")
L1 = Space("L1", "aic")
L0A = Space("L0A", "aic")
L0B = Space("L0B", "aic")
L0C = Space("L0C", "aic")
UB = Space("UB", "aiv")
SPACES = {s.name: s for s in (GM, L1, L0A, L0B, L0C, UB)}


def space_of(x) -> Space:
    if isinstance(x, Space):
        return x
    try:
        return SPACES[str(x).upper()]
    except KeyError:
        raise TypeError(f"memory space {x!r} is not one of {', '.join(SPACES)}") from None


@dataclass(frozen=True)
class ScalarType:
    dtype: DType

    def __repr__(self) -> str:
        return f"{self.dtype}"


INDEX = ScalarType(int64)
F32 = ScalarType(float32)
BOOL = ScalarType(bool_)


@dataclass(frozen=True)
class TensorType:
    """A GM tensor argument: dtype and rank; the shape is read at run time."""

    dtype: DType
    rank: int

    def __repr__(self) -> str:
        return f"gm<{self.dtype}, rank {self.rank}>"


@dataclass(frozen=True)
class TileType:
    dtype: DType
    space: Space
    shape: tuple[int, ...]

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return (self.numel * self.dtype.bits + 7) // 8

    def with_(self, **kw) -> "TileType":
        d = {"dtype": self.dtype, "space": self.space, "shape": self.shape}
        d.update(kw)
        return TileType(**d)

    def __repr__(self) -> str:
        dims = "x".join(str(d) for d in self.shape)
        return f"tile<{dims} {self.dtype} @{self.space}>"
