"""The names a kernel calls: builtin functions that only mean something inside ``@jit`` code.

Each builtin is a real Python function with its signature and docstring
(``help(ct.load)`` shows them), marked as a builtin. The frontend recognises
it when a kernel calls it (names are looked up in the kernel's globals, so
``ct.exp`` and ``from cvtile.dsl import exp`` both work), binds the call's
arguments to the signature (a wrong call is a ``CompilationError`` at the
kernel line naming the builtin and its signature) and lowers it. Called from
ordinary Python a builtin raises, naming itself: kernels are compiled, not
executed by the interpreter.

``constexpr`` marks compile-time parameters (``M: ct.constexpr``); their
values are part of the compile cache key and fold during compilation.
"""

from __future__ import annotations

import functools
import inspect

from .types import float16, int32

__all__ = ["Builtin", "constexpr", "BUILTINS", "ScopeMarker", "cube", "vector"]


class Builtin:
    """A kernel builtin: the stub function's name, signature and docstring."""

    def __init__(self, fn):
        self.fn = fn
        self.name = fn.__name__
        self.signature = inspect.signature(fn)
        self.__doc__ = fn.__doc__
        self.__name__ = fn.__name__
        self.__signature__ = self.signature
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"cvtile.dsl.{self.name} is a kernel builtin: call it inside an @jit kernel "
                           f"(launch with kernel[grid](...))")

    def bind(self, args, kwargs) -> inspect.BoundArguments:
        """The call's arguments bound to the signature, defaults applied (TypeError when they do not fit)."""
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return bound

    @property
    def usage(self) -> str:
        return f"{self.name}{self.signature}"

    def __repr__(self) -> str:
        return f"<cvtile builtin {self.name}>"


class ScopeMarker(Builtin):
    """``with cube():`` / ``with vector():``: the core type that runs the enclosed tile ops."""


class _Constexpr:
    """Annotation for compile-time kernel parameters: ``def k(x, M: ct.constexpr)``."""

    def __repr__(self) -> str:
        return "constexpr"


constexpr = _Constexpr()

BUILTINS: dict[str, Builtin] = {}


def _builtin(fn):
    b = Builtin(fn)
    BUILTINS[b.name] = b
    return b


def _scope(fn):
    b = ScopeMarker(fn)
    BUILTINS[b.name] = b
    return b


# ------------------------------------------------------------------ scopes

@_scope
def cube():
    """with cube(): the enclosed tile ops run on the cube core (AIC)."""


@_scope
def vector():
    """with vector(): the enclosed tile ops run on the vector cores (AIV)."""


# ------------------------------------------------------------------ cores

@_builtin
def block_idx():
    """block_idx() -> int: the index of this AI core (cube+vector group; vector core for AIV-only kernels)."""


@_builtin
def block_num():
    """block_num() -> int: the number of cores the kernel was launched on."""


@_builtin
def subblock_idx():
    """subblock_idx() -> int: in `with vector():`, this vector core's index (0..subblock_num()-1) in its core
    group; using it makes each vector section run once per vector core."""


@_builtin
def subblock_num():
    """subblock_num() -> int: the vector cores per core group (the platform's cv ratio, 2)."""


# ------------------------------------------------------------------ data movement

@_builtin
def load(view, space=None):
    """load(view, space=None) -> tile: GM->L1 in cube scope, GM->UB in vector scope."""


@_builtin
def store(view, tile):
    """store(view, tile): UB->GM (vector) or L0C->GM through the fixpipe (cube, may cast)."""


@_builtin
def copy(tile, space):
    """copy(tile, space) -> tile: an on-chip move along a legal edge (L1->L0A/L0B; 950 adds L0C->UB, UB->L1)."""


@_builtin
def through_gm(tile):
    """through_gm(tile) -> tile: the same tile, marked to cross to the other core type through the GM workspace
    on every target. On A2/A3 every hand-off does; on the 950 hand-offs stay on chip (L0C->UB, UB->L1) and their
    slots are buffers of the receiving core, so a tile whose slots would not fit there is marked."""


@_builtin
def mma(a, b, trans_b=False, acc=None):
    """mma(a, b, trans_b=False, acc=None) -> L0C tile: a @ b (or a @ b.T), fp32/int32 accumulation."""


@_builtin
def dequant(x, scale, dtype=float16):
    """dequant(x, scale, dtype=float16) -> L0C tile: the fixpipe's dequantisation of an int32 mma result on its way
    out of L0C (quantPre DEQF16), float16(float32(x) * scale) rounded to nearest even. Cube scope; ``scale`` is one
    float32 scalar (deqScalar). Only a store or a hand-off to the vector reads the result: the conversion is done
    by the move, which then carries float16 (half the bytes of the int32 block, and no vector work)."""


# ------------------------------------------------------------------ tile creation

@_builtin
def zeros(shape, dtype, space=None, valid=None):
    """zeros(shape, dtype, space=None, valid=None) -> tile filled with 0."""


@_builtin
def full(shape, value, dtype, space=None, valid=None):
    """full(shape, value, dtype, space=None, valid=None) -> tile filled with value."""


@_builtin
def iota(n, dtype=int32, start=0, valid=None):
    """iota(n, dtype=int32, start=0, valid=None) -> rank-1 UB tile [start, start+1, ...]."""


# ------------------------------------------------------------------ vector math

@_builtin
def exp(x):
    """exp(x): elementwise e**x.

    x: a float tile, or a scalar (the result is then a float32 scalar)."""


@_builtin
def log(x):
    """log(x): elementwise natural log.

    x: a float tile, or a scalar (the result is then a float32 scalar)."""


@_builtin
def sqrt(x):
    """sqrt(x): elementwise square root.

    x: a float tile, or a scalar (the result is then a float32 scalar)."""


@_builtin
def rsqrt(x):
    """rsqrt(x): elementwise 1/sqrt(x).

    x: a float tile, or a scalar (the result is then a float32 scalar)."""


@_builtin
def tanh(x):
    """tanh(x): elementwise hyperbolic tangent (a float tile, or a scalar: float32)."""


@_builtin
def sigmoid(x):
    """sigmoid(x): elementwise 1 / (1 + exp(-x)) (a float tile, or a scalar: float32)."""


@_builtin
def erf(x):
    """erf(x): elementwise Gauss error function (a float tile, or a scalar: float32)."""


@_builtin
def floor(x):
    """floor(x): elementwise largest integral value <= x, kept in the float dtype (a float tile, or a scalar)."""


@_builtin
def pow(x, y):
    """pow(x, y): elementwise x ** y (the ** operator): tile ** scalar, scalar ** tile or tile ** tile of float
    tiles; a constant integer exponent 0..8 is multiplies (integer tiles too)."""


@_builtin
def abs(x):
    """abs(x): elementwise |x| (Python's abs() works too)."""


@_builtin
def relu(x):
    """relu(x): max(x, 0)."""


@_builtin
def maximum(a, b):
    """maximum(a, b): elementwise max."""


@_builtin
def minimum(a, b):
    """minimum(a, b): elementwise min."""


@_builtin
def where(cond, a, b):
    """where(cond, a, b): elementwise select by a bool tile."""


@_builtin
def gather(table, idx):
    """gather(table, idx) -> tile: result[i] = table[idx[i]] for the valid elements of idx.

    table: a rank-1 GM view (a kernel tensor, or a view of one such as t[b], t.merge(0), t[b, ds(s, E)]);
    idx: an integer UB tile of rank 1 or 2. The result is a UB tile of idx's shape and table's dtype. Vector
    scope only; the simulator checks every index against the table's extent."""


@_builtin
def cast(x, dtype, rounding="rint"):
    """cast(x, dtype, rounding='rint') -> tile of dtype.

    rounding: "rint" (ties to even), "round" (ties away from zero, Ascend C CAST_ROUND), "trunc", "floor",
    "ceil"; a float narrowing (fp32 -> fp16/bf16) takes rint or round. A float -> integer cast saturates to
    the target's range (NaN gives 0), as the chip's conversions do."""


@_builtin
def rowmax(x):
    """rowmax(x) -> rank-1 tile: the max of each row's valid columns."""


@_builtin
def rowsum(x):
    """rowsum(x) -> rank-1 tile: the sum of each row's valid columns."""


@_builtin
def rowmin(x):
    """rowmin(x) -> rank-1 tile: the min of each row's valid columns."""


# ------------------------------------------------------------------ debugging

@_builtin
def device_print(name, value):
    """device_print(name, value): on the simulator, print name, the core (block, and the vector core in a
    core group's AIV program), the enclosing loops' indices and value (a scalar, or a tile's valid values,
    numpy-style, long tiles summarised).

    Inside `with cube():` or `with vector():`. It prints in program and in pipelined order (each AIV its own
    rows there); the emitted Ascend C holds a comment in its place."""


# ------------------------------------------------------------------ views and compile time

@_builtin
def ds(start, size, valid=None):
    """ds(start, size, valid=None): a GM slice of static extent size at a runtime start, valid <= size used."""


@_builtin
def static_assert(cond, msg=""):
    """static_assert(cond, msg=''): a compile-time assertion on constexpr values."""


@_builtin
def static_range(*args):
    """static_range(n) / static_range(a, b): a loop unrolled at compile time."""
