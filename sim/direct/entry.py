"""How Python calls a directly compiled function: one C entry point and a block of 64-bit words.

Model
-----
A generated function's body is compiled in numba's calling convention (``lower``); its C entry point

    int64 entry(int64 a0, int64 a1, int64 a2, int64 a3, int64 *block, int64 *status)

takes the function's leading integer parameters (at most four: ``blk, nblk, sub`` and a group's ``role``)
as they are and every other argument from ``block``, in parameter order, each as words:

* a C-contiguous array: its data address, then its shape (the strides are the C strides of that shape);
* a tuple (the programs' tile buffers): its items' words in order;
* a boolean or an integer: its value; a float: the bits of its float64 value (a float32 is exact in it).

It calls the body and returns what the body returns; ``*status`` gets numba's status code (0 when the body
returned normally; an exception a runtime helper raised is a nonzero code, which ``DirectFunction`` raises
as ``DirectRuntimeError``). ``pack`` writes the block for a call's Python values, ``build_entry`` reads it
in LLVM, both from the same numba types, so they agree word for word. ``DirectFunction.bind`` packs a
launch's arguments once and returns a callable of the leading integers, which the launcher calls per core.

The entry is called through ``ctypes``, which releases the GIL for the call: the launcher's threads run
cores in parallel as they do with numba's nogil functions.
"""

from __future__ import annotations

import ctypes
import struct

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.np.arrayobj import populate_array

from .lower import Unsupported

__all__ = ["LEAD", "build_entry", "pack", "leading", "DirectFunction", "DirectRuntimeError"]

#: the most leading integer parameters the entry takes as arguments
LEAD = 4
_I64 = ir.IntType(64)
_F64 = ir.DoubleType()
_CFUNC = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                          ctypes.c_void_p, ctypes.c_void_p)
_PACK_D = struct.Struct("<d")
_UNPACK_Q = struct.Struct("<q")


class DirectRuntimeError(RuntimeError):
    """A runtime helper a directly compiled kernel called raised (numba's status code in the message)."""


def leading(argtys) -> int:
    """How many leading parameters the entry takes as arguments: the integer ones, at most ``LEAD``."""
    n = 0
    for ty in argtys[:LEAD]:
        if not isinstance(ty, types.Integer):
            break
        n += 1
    return n


def _check_packable(ty):
    if isinstance(ty, types.Array):
        if ty.layout != "C":
            raise Unsupported(f"an array argument of layout {ty.layout}")
    elif isinstance(ty, types.BaseTuple):
        for t in ty.types:
            _check_packable(t)
    elif not isinstance(ty, (types.Boolean, types.Integer, types.Float)):
        raise Unsupported(f"an argument of type {ty}")


def build_entry(ctx, module: ir.Module, body: ir.Function, argtys: list, name: str) -> ir.Function:
    """The C entry point of ``body`` (a function in numba's calling convention over ``argtys``)."""
    nlead = leading(argtys)
    for ty in argtys[nlead:]:
        _check_packable(ty)
    fn = ir.Function(module, ir.FunctionType(_I64, [_I64] * LEAD + [_I64.as_pointer()] * 2), name)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    block, status_out = fn.args[LEAD], fn.args[LEAD + 1]
    pos = [0]

    def word():
        v = b.load(b.gep(block, [ir.Constant(_I64, pos[0])]))
        pos[0] += 1
        return v

    def value(ty):
        if isinstance(ty, types.Array):
            data = b.inttoptr(word(), ctx.get_data_type(ty.dtype).as_pointer())
            shape = [word() for _ in range(ty.ndim)]
            itemsize = ctx.get_abi_sizeof(ctx.get_data_type(ty.dtype))
            strides, acc = [], ir.Constant(_I64, itemsize)
            for d in reversed(shape):
                strides.insert(0, acc)
                acc = b.mul(acc, d)
            ary = ctx.make_array(ty)(ctx, b)
            populate_array(ary, data=data, shape=cgutils.pack_array(b, shape), strides=cgutils.pack_array(b, strides),
                           itemsize=ir.Constant(_I64, itemsize), meminfo=None)
            return ary._getvalue()
        if isinstance(ty, types.BaseTuple):
            return ctx.make_tuple(b, ty, [value(t) for t in ty.types])
        return scalar(word(), ty)

    def scalar(w, ty):
        if isinstance(ty, types.Boolean):
            return b.icmp_unsigned("!=", w, ir.Constant(_I64, 0))
        if isinstance(ty, types.Integer):
            return w if ty.bitwidth == 64 else b.trunc(w, ir.IntType(ty.bitwidth))
        d = b.bitcast(w, _F64)
        return d if ty.bitwidth == 64 else b.fptrunc(d, ctx.get_value_type(ty))

    vals = [scalar(fn.args[k], ty) for k, ty in enumerate(argtys[:nlead])]
    vals += [value(ty) for ty in argtys[nlead:]]
    status, ret = ctx.call_conv.call_function(b, body, types.int64, list(argtys), vals)
    b.store(b.sext(status.code, _I64), status_out)
    b.ret(ret)
    return fn


def _words(x, out: list) -> None:
    if isinstance(x, np.ndarray):
        if not x.flags.c_contiguous:
            raise ValueError("a directly compiled kernel takes C-contiguous arrays")
        out.append(x.__array_interface__["data"][0])
        out.extend(x.shape)
    elif isinstance(x, tuple):
        for item in x:
            _words(item, out)
    elif isinstance(x, (float, np.floating)):
        out.append(_UNPACK_Q.unpack(_PACK_D.pack(float(x)))[0])
    else:
        out.append(int(x))


def pack(values) -> np.ndarray:
    """The block of words of a call's values (everything after the leading integers), as ``build_entry``
    reads it."""
    out: list = []
    for x in values:
        _words(x, out)
    return np.array(out, dtype=np.int64) if out else np.zeros(1, np.int64)


class DirectFunction:
    """A compiled generated function, called as the numba function of the same name would be (the same
    arguments, the same return value). Holds its code library so that the code stays alive."""

    def __init__(self, library, address: int, nlead: int, name: str):
        self.library = library
        self.nlead = nlead
        self.name = name
        self._cfunc = _CFUNC(address)

    def __call__(self, *args):
        n = self.nlead
        return self.bind(*args[n:])(*args[:n])

    def bind(self, *rest):
        """The function with every argument after the leading integers fixed: a callable of the leading ones.
        The block of words is packed once here (about 150 us for a kernel's 60 arguments), not at each call: the
        launcher binds a launch's arguments once per thread and calls the result for each core."""
        block = pack(rest)
        status = np.zeros(1, np.int64)
        b, st = block.ctypes.data, status.ctypes.data
        pad = (0,) * (LEAD - self.nlead)
        cfunc, name = self._cfunc, self.name

        def call(*lead):
            r = cfunc(*lead, *pad, b, st)
            if status[0] and status[0] != -2:
                code, status[0] = int(status[0]), 0
                raise DirectRuntimeError(f"{name}: a runtime helper raised (numba status {code}); run with "
                                         "CVTILE_COMPILER=numba for numba's own message")
            return r

        call.keep = (block, rest)      # the words, and the arrays they point into, live as long as the callable
        return call
