"""int4 key/value caches: how a call hands them over, and their values.

Model
-----
An int4 KV cache (KV antiquant, the legacy IFA decode route) reaches the operator in one of two forms:

* an int4 tensor (``ml_dtypes.int4``: one value in [-8, 7] per numpy element), its shape the real one;
* an int32 tensor each of whose elements packs 8 int4 values, its last axis 1/8 of the real one. aclnn's
  op_api (``TensorPreProcess`` / ``PrefixTensorPreProcess`` in the FIA inner aclnn) turns such a key and
  value (both int32, or it leaves them alone) into an int4 view with the last axis times 8 before op_host
  sees them, and the shared-prefix key/value likewise. The memory does not move: value j of a row is nibble
  j of the row's bytes in memory order, the low nibble of a byte first (int4 on the chip: two per byte, the
  even element in the low half), so on a little-endian host value j sits in bits 4·(j mod 8) .. +3 of int32
  element j // 8.

``int4_kv`` applies op_api's rule and returns the values as int8 arrays (what the simulator stores and the
golden dequantises) with the tensor metadata op_host reads (dtype int4, the real shape); ``pack_int4`` is the
inverse of the int32 form, for callers that build such caches.

Invariants
----------
* ``unpack_int32(pack_int4(x))`` equals ``x`` for int8 values in [-8, 7]; a value outside raises.
* Nothing else changes: a pair that is not both int32 (or int4) passes through as given, so op_host's own
  dtype checks judge it.
"""

from __future__ import annotations

import numpy as np

from .dtypes import canonical_dtype, to_numpy

__all__ = ["INT4_PER_INT32", "int4_kv", "pack_int4", "unpack_int32"]

#: int4 values one int32 element packs (op_api's ``INT4_NUMS_IN_INT32``)
INT4_PER_INT32 = 8
_SHIFTS = np.arange(INT4_PER_INT32, dtype=np.uint32) * 4


def _byte_table() -> np.ndarray:
    """byte -> its two int4 values as the two int8 bytes of a uint16 (low nibble first in memory)."""
    nib = np.arange(256)
    lo, hi = ((v ^ 8) - 8 for v in (nib & 0xF, nib >> 4))     # sign-extend 4 bits
    return ((lo & 0xFF) | ((hi & 0xFF) << 8)).astype("<u2")


_BYTE_VALUES = _byte_table()


def unpack_int32(x) -> np.ndarray:
    """The int8 values of an int32 tensor packing 8 int4 values per element (last axis times 8): one table
    look-up per byte (``sim.storage.gather_bytes``)."""
    from ...sim.storage import gather_bytes

    a = np.ascontiguousarray(to_numpy(x))
    if a.dtype.byteorder == ">":
        a = a.astype("<i4")
    values = gather_bytes(_BYTE_VALUES, a).view(np.int8)
    return values.reshape(*a.shape[:-1], a.shape[-1] * INT4_PER_INT32)


def pack_int4(values) -> np.ndarray:
    """The int32 form of int4 values (an integer array in [-8, 7] whose last axis is a multiple of 8)."""
    v = np.asarray(values)
    if v.size and (v.min() < -8 or v.max() > 7):
        raise ValueError(f"int4 values lie in [-8, 7]; got [{v.min()}, {v.max()}]")
    if v.shape[-1] % INT4_PER_INT32:
        raise ValueError(f"the last axis ({v.shape[-1]}) must be a multiple of {INT4_PER_INT32} to pack int4 into "
                         "int32")
    nibbles = (v.astype(np.int64) & 0xF).astype(np.uint32).reshape(*v.shape[:-1], -1, INT4_PER_INT32)
    return np.bitwise_or.reduce(nibbles << _SHIFTS, axis=-1).view(np.int32)


def _values(x) -> np.ndarray:
    """int8 values of one int4 or int32-packed tensor."""
    a = to_numpy(x)
    return unpack_int32(a) if canonical_dtype(a.dtype) == "int32" else a.astype(np.int8)


def _each(x, fn):
    return [fn(t) for t in x] if isinstance(x, (list, tuple)) else fn(x)


def _first(x):
    return x[0] if isinstance(x, (list, tuple)) and len(x) else x


def int4_kv(key, value):
    """``(key, value, int4)``: with an int4 cache (both int32, as op_api views them, or both int4), the int8
    values of key and value (tensor lists element by element) and True; else the pair unchanged and False."""
    kd, vd = (canonical_dtype(to_numpy(_first(t)).dtype) for t in (key, value))
    if not ((kd == vd == "int32") or (kd == vd == "int4")):
        return key, value, False
    return _each(key, _values), _each(value, _values), True
