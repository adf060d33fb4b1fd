"""Attention-variant hooks: ``score_mod`` / ``mask_mod`` written in the tile language, and their host twins.

Model
-----
A variant is two optional ``@ct.inline`` functions with FlexAttention's
signatures, plus the GM tensors they read:

* ``score_mod(score, b, h, q_idx, kv_idx, *captures) -> score``
* ``mask_mod(b, h, q_idx, kv_idx, *captures) -> bool``

Inside a kernel (the FIA kernel's V1 stage) ``score`` is the (M, S2) fp32 score
block after the scale and pse, ``b`` the batch (a scalar), and ``h``, ``q_idx``,
``kv_idx`` int32 tiles of shapes (M, 1), (M, 1), (1, S2) that broadcast against
the block: the query head, the query position and the KV position of each
element, positions counted within the batch's sequence. ``captures`` are up to
four arrays the hooks read (a bias table, document ids), passed to the kernel
as GM tensors and read with ``ct.load`` / ``ct.gather``.

The same functions also run on the host, on numpy arrays (``host_function``):
the function's code is re-bound to a namespace where every cvtile builtin it
names (``ct.where``, ``ct.exp``, a ``from cvtile.dsl import tanh``...) is its
numpy counterpart, in float64. The block map (``block_map``) and the float64
golden (``golden``) evaluate the hooks that way, so the kernel, its block
skipping and its reference all read one definition of the variant.

Invariants
----------
* A hook is an ``@ct.inline`` function; anything else is refused by
  ``VariantError`` naming the parameter. What the tile language cannot express
  inside a hook fails when the kernel compiles, at the hook's line.
* Host evaluation never guesses: a builtin without a numpy counterpart raises
  ``VariantError`` naming the hook and the builtin.
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

import cvtile.dsl as ct
from cvtile.dsl.builtins import Builtin
from cvtile.dsl.frontend import InlineFunction
from cvtile.dsl.types import DType

__all__ = ["Hooks", "VariantError", "host_function", "host_modifier", "MAX_CAPTURES"]

#: the kernels' capture slots (``mod0..mod3``)
MAX_CAPTURES = 4


class VariantError(ValueError):
    """A variant's hooks or captures are not usable: names the parameter, the value and the rule."""

    def __init__(self, param: str, value: Any, rule: str):
        self.param, self.value, self.rule = param, value, rule
        super().__init__(f"{param}={value!r}: {rule}")


@dataclass(frozen=True)
class Hooks:
    """One attention variant: its hooks, its captured tensors and whether empty blocks are skipped."""

    score_mod: InlineFunction | None = None
    mask_mod: InlineFunction | None = None
    captures: tuple = field(default=())
    #: classify (row block, S2 block) pairs by ``mask_mod`` on the host and skip the empty ones
    block_sparse: bool = True

    def __post_init__(self):
        for name in ("score_mod", "mask_mod"):
            fn = getattr(self, name)
            if fn is not None and not isinstance(fn, InlineFunction):
                raise VariantError(name, getattr(fn, "__name__", fn),
                                   "a hook is a function decorated with @cvtile.dsl.inline (written in the tile "
                                   "language)")
        caps = tuple(self.captures)
        if len(caps) > MAX_CAPTURES:
            raise VariantError("mod_args", f"{len(caps)} arrays", f"at most {MAX_CAPTURES} captured tensors")
        for i, c in enumerate(caps):
            if not (hasattr(c, "shape") and hasattr(c, "dtype")):
                raise VariantError(f"mod_args[{i}]", type(c).__name__, "a captured value is an array (scalars "
                                   "are written into the hook as constants)")
        object.__setattr__(self, "captures", caps)

    @property
    def active(self) -> bool:
        return self.score_mod is not None or self.mask_mod is not None

    @property
    def sparse(self) -> bool:
        return self.block_sparse and self.mask_mod is not None


# ------------------------------------------------------------------ host evaluation

def _np_cast(x, dtype, rounding="rint"):
    dt = _np_dtype(dtype)
    a = np.asarray(x)
    if np.issubdtype(dt, np.integer) and a.dtype.kind == "f":   # as the kernel's cast: rounded, saturated, NaN 0
        a = np.asarray(a, np.float64)
        away = np.where(a >= 0, np.floor(a + 0.5), -np.floor(0.5 - a))
        a = {"rint": np.rint(a), "floor": np.floor(a), "ceil": np.ceil(a), "trunc": np.trunc(a), "round": away}[rounding]
        info = np.iinfo(dt)
        a = np.where(np.isnan(a), 0.0, np.clip(a, float(info.min), float(info.max)))
    return a.astype(dt if dt.kind != "f" else np.float64)


def _np_gather(table, idx):
    t = np.asarray(table)
    i = np.asarray(idx)
    if t.ndim != 1:
        raise VariantError("gather", f"a rank-{t.ndim} table", "gather reads a rank-1 table")
    if i.size and (i.min() < 0 or i.max() >= t.shape[0]):
        bad = i[(i < 0) | (i >= t.shape[0])].ravel()[0]
        raise VariantError("gather", int(bad), f"index out of bounds of a table of {t.shape[0]} elements")
    return t[i].astype(np.float64) if t.dtype.kind == "f" else t[i]


def _erf(x):
    from math import erf
    return np.vectorize(erf, otypes=[np.float64])(x)


def _np_dtype(d) -> np.dtype:
    if isinstance(d, DType):
        return np.dtype(np.bool_) if d.is_bool else np.dtype("float32" if d.name == "bfloat16" else d.name)
    return np.dtype(d)


#: each tile-language builtin a hook may call, as numpy evaluates it (float64)
_HOST_BUILTINS: dict[str, Callable] = {
    "where": lambda c, a, b: np.where(c, a, b),
    "maximum": np.maximum, "minimum": np.minimum,
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1.0 / np.sqrt(x), "abs": np.abs,
    "relu": lambda x: np.maximum(x, 0), "tanh": np.tanh, "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "erf": _erf, "floor": np.floor, "pow": np.power, "cast": _np_cast, "gather": _np_gather,
    "full": lambda shape, value, dtype, space=None, valid=None: np.full(shape, value, _np_dtype(dtype)),
    "zeros": lambda shape, dtype, space=None, valid=None: np.zeros(shape, _np_dtype(dtype)),
    "device_print": lambda name, x: None,
}


class _HostNamespace(types.SimpleNamespace):
    """``ct`` as a hook sees it on the host: builtins → numpy, dtypes → numpy dtypes, constants as they are."""

    def __init__(self, hook: str):
        super().__init__()
        self._hook = hook

    def __getattr__(self, name):
        return _host_value(getattr(ct, name), self._hook, f"ct.{name}")


def _host_value(value, hook: str, spelled: str):
    if isinstance(value, Builtin):
        try:
            return _HOST_BUILTINS[value.name]
        except KeyError:
            raise VariantError(hook, spelled, f"{value.name}() has no host (numpy) evaluation, so the hook cannot "
                               f"drive block skipping or the golden") from None
    if isinstance(value, InlineFunction):
        return host_function(value, hook)
    return value   # dtypes (read by cast), constants and modules as they are


def host_function(fn: InlineFunction, hook: str = "hook") -> Callable:
    """The hook ``fn`` as a plain Python function over numpy arrays (see the module docstring)."""
    py = fn.fn
    env = dict(py.__globals__)
    for name, value in py.__globals__.items():
        if value is ct:
            env[name] = _HostNamespace(hook)
        elif isinstance(value, (Builtin, InlineFunction)):
            env[name] = _HostLazy(value, hook, name)
    closure = py.__closure__
    if closure:
        cells = []
        for cell in closure:
            v = cell.cell_contents
            if v is ct:
                v = _HostNamespace(hook)
            elif isinstance(v, (Builtin, InlineFunction)):
                v = _host_value(v, hook, getattr(v, "__name__", "?"))
            cells.append(types.CellType(v))
        closure = tuple(cells)
    return types.FunctionType(py.__code__, env, py.__name__, py.__defaults__, closure)


class _HostLazy:
    """A global builtin or inline helper, resolved to its host form when the hook calls it (so an unused
    global without a numpy counterpart does not fail)."""

    def __init__(self, value, hook: str, name: str):
        self._value, self._hook, self._name = value, hook, name

    def __call__(self, *args, **kwargs):
        return _host_value(self._value, self._hook, self._name)(*args, **kwargs)


def host_modifier(score_mod=None, mask_mod=None, mod_args=()) -> Callable | None:
    """The goldens' score hook of a variant: ``modify(s, b, h, q_idx, kv_idx) -> s`` applying score_mod and then
    mask_mod (as -inf) in numpy over broadcasting index arrays; None without hooks."""
    if score_mod is None and mask_mod is None:
        return None
    from ..golden.dtypes import to_numpy

    caps = tuple(to_numpy(a) for a in mod_args)
    sm = host_function(score_mod, "score_mod") if score_mod is not None else None
    mm = host_function(mask_mod, "mask_mod") if mask_mod is not None else None

    def modify(s, b, h, q_idx, kv_idx):
        if sm is not None:
            s = np.broadcast_to(sm(s, b, h, q_idx, kv_idx, *caps), s.shape)
        if mm is not None:
            keep = np.broadcast_to(np.asarray(mm(b, h, q_idx, kv_idx, *caps), dtype=bool), s.shape)
            s = np.where(keep, s, -np.inf)
        return s

    return modify
