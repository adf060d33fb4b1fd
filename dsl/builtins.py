"""The names a kernel calls: builtin markers that only mean something inside ``@jit`` code.

Each builtin is an object the frontend recognises when a kernel calls it (it
looks names up in the kernel's globals, so ``ct.exp`` and ``from cvtile.dsl
import exp`` both work). Called from ordinary Python a builtin raises, naming
itself: kernels are compiled, not executed by the interpreter.

``constexpr`` marks compile-time parameters (``M: ct.constexpr``); their
values are part of the compile cache key and fold during compilation.
"""

from __future__ import annotations

__all__ = ["Builtin", "constexpr", "BUILTINS", "ScopeMarker", "cube", "vector"]


class Builtin:
    def __init__(self, name: str, doc: str):
        self.name = name
        self.__doc__ = doc
        self.__name__ = name

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"cvtile.dsl.{self.name} is a kernel builtin: call it inside an @jit kernel "
                           f"(launch with kernel[grid](...))")

    def __repr__(self) -> str:
        return f"<cvtile builtin {self.name}>"


class ScopeMarker(Builtin):
    """``with cube():`` / ``with vector():``: the core type that runs the enclosed tile ops."""


class _Constexpr:
    """Annotation for compile-time kernel parameters: ``def k(x, M: ct.constexpr)``."""

    def __repr__(self) -> str:
        return "constexpr"


constexpr = _Constexpr()

_DOCS = {
    "block_idx": "block_idx() -> int: the index of this AI core (cube+vector group; vector core for AIV-only kernels).",
    "block_num": "block_num() -> int: the number of cores the kernel was launched on.",
    "subblock_idx": "subblock_idx() -> int: in `with vector():`, this vector core's index (0..subblock_num()-1) in "
                    "its core group; using it makes each vector section run once per vector core.",
    "subblock_num": "subblock_num() -> int: the vector cores per core group (the platform's cv ratio, 2).",
    "load": "load(window, space=None) -> tile: GM->L1 in cube scope, GM->UB in vector scope.",
    "store": "store(window, tile): UB->GM (vector) or L0C->GM through the fixpipe (cube, may cast).",
    "copy": "copy(tile, space) -> tile: an on-chip move along a legal edge (L1->L0A/L0B; 950 adds L0C->UB, UB->L1).",
    "mma": "mma(a, b, trans_b=False, acc=None) -> L0C tile: a @ b (or a @ b.T), fp32/int32 accumulation.",
    "zeros": "zeros(shape, dtype, space=None, valid=None) -> tile filled with 0.",
    "full": "full(shape, value, dtype, space=None, valid=None) -> tile filled with value.",
    "iota": "iota(n, dtype=int32, start=0, valid=None) -> rank-1 UB tile [start, start+1, ...].",
    "exp": "exp(x): elementwise e**x.", "log": "log(x): elementwise natural log.",
    "sqrt": "sqrt(x): elementwise square root.", "rsqrt": "rsqrt(x): elementwise 1/sqrt(x).",
    "abs": "abs(x): elementwise |x| (Python's abs() works too).", "relu": "relu(x): max(x, 0).",
    "maximum": "maximum(a, b): elementwise max.", "minimum": "minimum(a, b): elementwise min.",
    "where": "where(cond, a, b): elementwise select by a bool tile.",
    "cast": "cast(x, dtype, rounding='rint') -> tile of dtype (RNE for float narrowing).",
    "rowmax": "rowmax(x) -> rank-1 tile: the max of each row's valid columns.",
    "rowsum": "rowsum(x) -> rank-1 tile: the sum of each row's valid columns.",
    "rowmin": "rowmin(x) -> rank-1 tile: the min of each row's valid columns.",
    "ds": "ds(start, size, valid=None): a GM slice of static extent size at a runtime start, valid <= size used.",
    "static_assert": "static_assert(cond, msg=''): a compile-time assertion on constexpr values.",
    "static_range": "static_range(n) / static_range(a, b): a loop unrolled at compile time.",
}

BUILTINS = {name: Builtin(name, doc) for name, doc in _DOCS.items()}
cube = ScopeMarker("cube", "with cube(): the enclosed tile ops run on the cube core (AIC).")
vector = ScopeMarker("vector", "with vector(): the enclosed tile ops run on the vector cores (AIV).")
BUILTINS["cube"] = cube
BUILTINS["vector"] = vector
