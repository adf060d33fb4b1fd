"""Dtype names and exact conversions for the float64 goldens.

Model
-----
Goldens compute in float64. Inputs arrive as numpy arrays of float16,
ml_dtypes.bfloat16, float32 or float64 (or torch tensors when torch is
installed); every one of these converts to float64 *exactly*, so the golden's
only rounding is float64 arithmetic. ``round_to`` models a 16-bit (or fp32)
store on the chip: the value is first rounded to float32 (what the vector unit
holds), then to the target dtype, both round-to-nearest-even.

Invariants
----------
* ``to_f64`` never changes a value: float16/bfloat16/float32 → float64 is exact.
* ``canonical_dtype`` accepts numpy / ml_dtypes / torch dtypes and the short
  names of the corpora ("fp16", "bf16", "fp32", ...) and returns one of
  ``"float16", "bfloat16", "float32", "float64"`` or another lower-case name.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from ...tiling.params import memo_numpy_dtypes

__all__ = ["BFLOAT16", "canonical_dtype", "numpy_dtype", "to_f64", "to_numpy", "native_order", "round_to", "is_float_dtype"]

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)

_ALIASES = {
    "fp16": "float16", "half": "float16", "float16": "float16",
    "bf16": "bfloat16", "bfloat16": "bfloat16",
    "fp32": "float32", "float": "float32", "float32": "float32",
    "fp64": "float64", "double": "float64", "float64": "float64",
    "bool": "bool", "int8": "int8", "uint8": "uint8", "int16": "int16", "int32": "int32", "int64": "int64",
    "int4": "int4", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
    "float8_e4m3fn": "float8_e4m3fn", "fp8_e4m3fn": "float8_e4m3fn",
    "float4_e2m1": "float4_e2m1", "float4_e2m1fn": "float4_e2m1",
    "float8_e8m0": "float8_e8m0", "float8_e8m0fnu": "float8_e8m0",
    "hifloat8": "hifloat8", "hif8": "hifloat8",   # no numpy dtype: HiF8 tensors are uint8 codes (golden.hifloat8)
}

_NUMPY = {
    "float16": np.dtype(np.float16), "bfloat16": BFLOAT16, "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64), "bool": np.dtype(np.bool_), "int8": np.dtype(np.int8),
    "uint8": np.dtype(np.uint8), "int16": np.dtype(np.int16), "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64), "uint16": np.dtype(np.uint16), "uint32": np.dtype(np.uint32),
    "uint64": np.dtype(np.uint64), "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "float4_e2m1": np.dtype(ml_dtypes.float4_e2m1fn), "float8_e8m0": np.dtype(ml_dtypes.float8_e8m0fnu),
}

_FLOATS = ("float16", "bfloat16", "float32", "float64")


@memo_numpy_dtypes
def canonical_dtype(dtype: Any) -> str:
    """Canonical lower-case name of a dtype given as a string, numpy/ml_dtypes dtype or torch dtype."""
    if isinstance(dtype, str):
        name = dtype
    else:
        try:
            name = np.dtype(dtype).name
        except TypeError:
            name = str(getattr(dtype, "name", dtype))
    name = name.replace("torch.", "").strip().lower()
    return _ALIASES.get(name, name)


def numpy_dtype(dtype: Any) -> np.dtype:
    """The numpy dtype for a name or dtype (``"bf16"`` → ``ml_dtypes.bfloat16``)."""
    name = canonical_dtype(dtype)
    if name not in _NUMPY:
        raise ValueError(f"dtype {dtype!r}: no numpy equivalent (known: {sorted(_NUMPY)})")
    return _NUMPY[name]


def is_float_dtype(dtype: Any) -> bool:
    return canonical_dtype(dtype) in _FLOATS


def native_order(x: Any) -> Any:
    """``x``, or a native-byte-order copy of it when it is a numpy array stored in the other byte order (the
    kernels and goldens read native storage only)."""
    if isinstance(x, np.ndarray) and not x.dtype.isnative:
        return x.astype(x.dtype.newbyteorder("="))
    return x


def to_numpy(x: Any) -> np.ndarray:
    """A numpy view of ``x`` (numpy arrays pass through; torch tensors go through the CPU, bf16 bit-exact). An
    array in the other byte order (``'>f2'`` on a little-endian host) becomes a native copy of the same values:
    the kernels and the golden read native storage only (it used to fail inside the launch with a TypeError)."""
    if isinstance(x, np.ndarray):
        return native_order(x)
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # torch.Tensor, without importing torch
        t = x.detach().cpu()
        if str(t.dtype) == "torch.bfloat16":
            return t.view(dtype=_torch_int16()).numpy().view(BFLOAT16)
        return t.numpy()
    return np.asarray(x)


def _torch_int16():
    import torch  # only reached when a torch tensor was passed, so torch is importable

    return torch.int16


def to_f64(x: Any, name: str = "tensor") -> np.ndarray:
    """Exact float64 copy of a float16 / bfloat16 / float32 / float64 array (or torch tensor)."""
    a = to_numpy(x)
    kind = canonical_dtype(a.dtype)
    if kind == "bfloat16":
        # bf16 is the top half of an fp32: widen the bits, reinterpret, then widen exactly to f64.
        bits = np.ascontiguousarray(a).view(np.uint16).astype(np.uint32) << np.uint32(16)
        with np.errstate(invalid="ignore"):  # signalling NaNs stay NaN
            return bits.view(np.float32).astype(np.float64)
    if kind in ("float16", "float32", "float64"):
        with np.errstate(invalid="ignore"):
            return a.astype(np.float64)
    if kind == "bool" or kind.startswith("int") or kind.startswith("uint"):
        raise NotImplementedError(
            f"{name}: integer dtype {kind} (quantised input) is outside the float golden's scope")
    raise TypeError(f"{name}: unsupported dtype {a.dtype}")


def round_to(x: np.ndarray, dtype: Any) -> np.ndarray:
    """Round float64 values as the chip stores them in ``dtype``: to float32, then to ``dtype`` (both RNE)."""
    name = canonical_dtype(dtype)
    if name == "float64":
        return np.asarray(x, dtype=np.float64)
    if name not in ("float32", "float16", "bfloat16"):
        raise ValueError(f"round_to: dtype {dtype!r} is not a float dtype")
    with np.errstate(over="ignore", invalid="ignore"):  # overflow to inf is the modelled behaviour
        x32 = np.asarray(x, dtype=np.float64).astype(np.float32)
        if name == "float32":
            return x32.astype(np.float64)
        return x32.astype(numpy_dtype(name)).astype(np.float32).astype(np.float64)
