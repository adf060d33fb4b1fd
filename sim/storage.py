"""Host-side conversion between user arrays and simulator storage.

Model
-----
The simulator's global memory (GM) holds numpy arrays in a *storage* dtype
that numba can compile against.  numba has no float16, so both 16-bit float
formats are stored as their uint16 bit patterns (see ``sim/rounding.py``):

=============  =======================  ============  ========
name           user dtype               storage       itemsize
=============  =======================  ============  ========
float16        np.float16               np.uint16     2
bfloat16       ml_dtypes.bfloat16       np.uint16     2
float8_e4m3fn  ml_dtypes.float8_e4m3fn  np.uint8      1
float32        np.float32               np.float32    4
int8           np.int8                  np.int8       1
int16          np.int16                 np.int16      2
int32          np.int32                 np.int32      4
int64          np.int64                 np.int64      8
uint8          np.uint8                 np.uint8      1
bool           np.bool_                 np.bool_      1
=============  =======================  ============  ========

An FP8 tensor (the 950's FP8 KV cache) is stored as its 8-bit codes, which the
kernel's reads decode exactly (``rounding.f8e4m3_bits_to_f32``); kernels only
read it.

The canonical names are the strings above, the same as ``dsl.types.DTYPES``;
every API that takes a dtype accepts a canonical name or one of the DSL's
aliases ("fp16", "half", "bf16", "fp32", "float", "int", "bool_"), a numpy
dtype or scalar type, a torch dtype, or any object whose ``name`` is a
canonical name (a DSL ``DType``).

Invariants
----------
* ``to_storage`` returns a C-contiguous, native-byte-order array and never
  copies when the input already is one: the storage is a *view* of the user's
  memory (``np.shares_memory`` holds), so a kernel writing to it writes to the
  user's array.  A copy is made only for non-contiguous or byte-swapped input,
  and for a torch tensor that is not a contiguous CPU tensor.
* ``from_storage`` is always a view (the bits are reinterpreted, never
  converted), so ``from_storage(*to_storage(a))`` shares memory with ``a``
  and is bit-identical to it, NaN payloads included.
* torch is optional: it is never imported here.  A torch tensor can only
  exist if the caller imported torch, so it is recognised through
  ``sys.modules``.  fp16/bf16 tensors are viewed as int16 before ``.numpy()``
  (numpy has no bfloat16), then as uint16.
* An unsupported dtype raises ``TypeError`` naming the parameter, the dtype
  and the supported names.
"""

from __future__ import annotations

import sys

import ml_dtypes
import numpy as np
from numba import njit

__all__ = [
    "DTYPE_NAMES",
    "ITEMSIZE",
    "STORAGE_DTYPE",
    "USER_DTYPE",
    "dtype_name",
    "is_16bit",
    "itemsize",
    "storage_dtype",
    "user_dtype",
    "to_storage",
    "from_storage",
    "empty_storage",
]

DTYPE_NAMES = ("float16", "bfloat16", "float8_e4m3fn", "float32", "int8", "int16", "int32", "int64", "uint8", "bool")

_ALIASES = {"fp16": "float16", "half": "float16", "bf16": "bfloat16", "fp32": "float32",
            "float": "float32", "int": "int64", "bool_": "bool"}

USER_DTYPE = {
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "float32": np.dtype(np.float32),
    "int8": np.dtype(np.int8),
    "int16": np.dtype(np.int16),
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
    "uint8": np.dtype(np.uint8),
    "bool": np.dtype(np.bool_),
}

STORAGE_DTYPE = {
    name: (np.dtype(np.uint16) if name in ("float16", "bfloat16") else
           np.dtype(np.uint8) if name == "float8_e4m3fn" else dt)
    for name, dt in USER_DTYPE.items()
}

ITEMSIZE = {name: dt.itemsize for name, dt in USER_DTYPE.items()}

#: the dtypes numpy (or numba) has no arithmetic for, held as their bit patterns (a storage of the same size)
_CODED = tuple(name for name in USER_DTYPE if STORAGE_DTYPE[name] != USER_DTYPE[name])

_BY_NUMPY = {dt: name for name, dt in USER_DTYPE.items()}


def _torch():
    """The torch module if the process has imported it, else None."""
    return sys.modules.get("torch")


def _is_tensor(obj) -> bool:
    torch = _torch()
    return torch is not None and isinstance(obj, torch.Tensor)


def _unsupported(param: str, what) -> TypeError:
    return TypeError(
        f"{param}: unsupported dtype {what}; supported: {', '.join(DTYPE_NAMES)}"
    )


def dtype_name(dtype, param: str = "dtype") -> str:
    """Canonical name of ``dtype`` (see the module docstring for what it accepts)."""
    if dtype is None:
        raise _unsupported(param, None)
    if isinstance(dtype, str):
        name = _ALIASES.get(dtype, dtype)
        if name in USER_DTYPE:
            return name
    torch = _torch()
    if torch is not None and isinstance(dtype, torch.dtype):
        name = str(dtype).removeprefix("torch.")
        if name in USER_DTYPE:
            return name
        raise _unsupported(param, dtype)
    try:
        dt = np.dtype(dtype)
    except TypeError:
        name = getattr(dtype, "name", None)
        if isinstance(name, str) and name in USER_DTYPE:
            return name
        raise _unsupported(param, repr(dtype)) from None
    name = _BY_NUMPY.get(dt)
    if name is None and dt.byteorder not in "=|":  # byte-swapped numbers
        name = _BY_NUMPY.get(dt.newbyteorder("="))
    if name is None:
        raise _unsupported(param, dt)
    return name


def is_16bit(dtype) -> bool:
    """Whether ``dtype`` is float16 or bfloat16 (stored as uint16 bits)."""
    return dtype_name(dtype) in ("float16", "bfloat16")


def itemsize(dtype) -> int:
    """Bytes per element of ``dtype`` (in GM and in the user's array)."""
    return ITEMSIZE[dtype_name(dtype)]


def storage_dtype(dtype) -> np.dtype:
    """The numpy dtype the simulator stores ``dtype`` in."""
    return STORAGE_DTYPE[dtype_name(dtype)]


def user_dtype(dtype) -> np.dtype:
    """The numpy dtype a user sees for ``dtype``."""
    return USER_DTYPE[dtype_name(dtype)]


def _tensor_to_numpy(t, param: str) -> tuple[np.ndarray, str]:
    torch = _torch()
    name = dtype_name(t.dtype, param)
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    t = t.resolve_conj().resolve_neg().contiguous()
    if name in _CODED:     # numpy has no bfloat16 or FP8: their bit patterns
        bits = {1: torch.uint8, 2: torch.int16}[ITEMSIZE[name]]
        return t.view(bits).numpy().view(STORAGE_DTYPE[name]), name
    return t.numpy(), name


def to_storage(array, param: str = "array") -> tuple[np.ndarray, str]:
    """``(storage, dtype_name)`` for a numpy array or torch tensor.

    The storage is a C-contiguous view of ``array`` whenever ``array`` is
    already C-contiguous with native byte order (see the module invariants).
    ``param`` names the argument in error messages.
    """
    if type(array) is np.ndarray:   # the common case first: no torch probe, the dtype's name by table
        arr = array
        name = _BY_NUMPY.get(arr.dtype) or dtype_name(arr.dtype, param)
    elif _is_tensor(array):
        arr, name = _tensor_to_numpy(array, param)
    else:
        arr = np.asarray(array)
        name = dtype_name(arr.dtype, param)
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    if not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr)
    if name in _CODED:
        arr = arr.view(STORAGE_DTYPE[name])
    return arr, name


def from_storage(storage: np.ndarray, dtype) -> np.ndarray:
    """View ``storage`` in the user dtype of ``dtype`` (no copy, no conversion)."""
    name = dtype_name(dtype)
    storage = np.asarray(storage)
    want = STORAGE_DTYPE[name]
    if name in _CODED and storage.dtype.kind in "ui" and storage.dtype.itemsize == want.itemsize:
        return storage.view(USER_DTYPE[name])   # the bit patterns, signed or not
    if storage.dtype != want:
        raise TypeError(
            f"storage: dtype {storage.dtype} is not the storage of {name} ({want})"
        )
    return storage


def empty_storage(shape, dtype) -> np.ndarray:
    """An uninitialised C-contiguous storage array for ``dtype``."""
    return np.empty(shape, dtype=STORAGE_DTYPE[dtype_name(dtype)])


@njit(cache=True, nogil=True)
def _gather(table, src, out):
    for i in range(src.size):
        out[i] = table[src[i]]


def gather_bytes(table: np.ndarray, data: np.ndarray) -> np.ndarray:
    """``table[b]`` for every byte b of ``data`` (C order), as a flat array of ``table``'s dtype: how the host
    widens a narrow cache (FP8 / FP4 patterns to 16-bit values, int4 pairs to int8 values) for the simulator.
    ``table`` has 256 entries. A compiled loop: numpy's fancy indexing takes about five times as long on a
    decode-sized cache."""
    if table.shape != (256,):
        raise ValueError(f"gather_bytes: the table has {table.shape} entries, not (256,)")
    src = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    bits = np.ascontiguousarray(table).view(f"u{table.dtype.itemsize}")   # numba sees the entries' bits
    out = np.empty(src.size, bits.dtype)
    _gather(bits, src, out)
    return out.view(table.dtype)

