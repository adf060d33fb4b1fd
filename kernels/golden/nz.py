"""The NZ paged KV cache layout: (blocks, N, D/d0, block_size, d0), fractals of 32 bytes along D.

Model
-----
An NZ cache holds each block's (block_size, D) rows of a head as D/d0 column fractals of d0 = 32 bytes of
elements (16 for fp16/bf16, 32 for int8, 64 for int4, whose values the simulator holds one per int8): element (row s, column d) of block blk, head n is at
``[blk, n, d // d0, s, d % d0]``. Ascend950's KV-antiquant kernel is the exception (:func:`antiquant_nz_fraction`):
its vector copies a quantised cache (int8, int4, FP8) in fractals of 16 values whatever their width, the 32 bytes
of the fp16/bf16 query its dequantised rows become (op_host's paged-attention checker demands a last axis of 16). The chip's MLA and GQA-MTP kernels copy such blocks into L1 as they are;
the simulated kernel reads them in place (``kernels.fia.kernel.paged_kv_rows``, CACHE "NZ"), the golden
converts them to the BnNBsD cache (blocks, N, block_size, D) with :func:`from_nz`. With an NZ cache the 950 also
reads an MXFP4 cache's E8M0 group scales in an order of their own, (B, N, D/32, S2) with S2 =
:func:`group_scale_stride` (``golden.antiquant``).

Invariants
----------
* :func:`to_nz` and :func:`from_nz` are exact inverses (copies, no conversion of values).
* An NZ tensor is 5-D with its last axis d0 = :func:`nz_fraction` of its dtype (or the d0 its reader names);
  anything else raises ``ValueError`` naming the shape and the rule (the API turns it into a ``ParamError``).
"""

from __future__ import annotations

import numpy as np

__all__ = ["nz_fraction", "antiquant_nz_fraction", "nz_rule", "from_nz", "to_nz", "group_scale_stride"]


def nz_fraction(dtype) -> int:
    """d0, the elements of one 32-byte fractal row: 16 for fp16/bf16, 32 for int8, 64 for int4 (dtype
    "int4" or ``ml_dtypes.int4``; the simulator holds int4 values in int8 arrays, so callers name the cache's
    dtype)."""
    if (dtype if isinstance(dtype, str) else np.dtype(dtype).name) == "int4":
        return 64
    return 32 // np.dtype(dtype).itemsize


def antiquant_nz_fraction(dtype, arch: str) -> int:
    """d0 of a KV-antiquant NZ cache of ``dtype`` read on ``arch``: 16 on arch35 (the 950 dequant kernel's
    16-value fractals), else :func:`nz_fraction` (A2/A3's 32 bytes)."""
    return 16 if arch == "arch35" else nz_fraction(dtype)


def nz_rule(shape, dtype, d0: int | None = None) -> str | None:
    """Why ``shape`` is not an NZ cache of ``dtype`` ((blocks, N, D/d0, block_size, d0)), or None if it is;
    ``d0``: the fractal its reader takes (default :func:`nz_fraction`, 32 bytes)."""
    d0 = nz_fraction(dtype) if d0 is None else d0
    width = "32 bytes" if d0 == nz_fraction(dtype) else "the reader's fractal"
    if len(shape) != 5:
        return f"an NZ cache is 5-D (blocks, N, D/{d0}, block_size, {d0}), got {len(shape)}-D"
    if shape[4] != d0:
        name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
        return (f"an NZ cache of {name} is (blocks, N, D/{d0}, block_size, {d0}): its last axis "
                f"is {d0} ({width}), got {shape[4]}")
    return None


def from_nz(x, dtype=None, d0: int | None = None) -> np.ndarray:
    """The BnNBsD cache (blocks, N, block_size, D) of an NZ cache (a copy); ``dtype``: the cache's dtype when its
    array holds another (an int4 cache's int8 values: "int4"); ``d0``: as :func:`nz_rule`."""
    a = np.asarray(x)
    rule = nz_rule(a.shape, dtype or a.dtype, d0)
    if rule:
        raise ValueError(rule)
    nb, n, d1, bs, d0 = a.shape
    return np.ascontiguousarray(a.transpose(0, 1, 3, 2, 4)).reshape(nb, n, bs, d1 * d0)


def to_nz(x, d0: int | None = None) -> np.ndarray:
    """The NZ cache of a BnNBsD cache (blocks, N, block_size, D) in fractals of d0 (default :func:`nz_fraction`
    of its dtype); D must be a multiple of d0."""
    a = np.asarray(x)
    d0 = nz_fraction(a.dtype) if d0 is None else d0
    nb, n, bs, d = a.shape
    if d % d0:
        raise ValueError(f"D {d} is not a multiple of the NZ fractal {d0} ({a.dtype.name})")
    return np.ascontiguousarray(a.reshape(nb, n, bs, d // d0, d0).transpose(0, 1, 3, 2, 4))


def group_scale_stride(key, block_table) -> int | None:
    """S2 of an NZ cache's per-token-group scales as the 950 reads them, (B, N, D/32, S2): the block table's
    columns times the block size (op_host's S of a paged antiquant call); None without an NZ key and a block
    table (the scales are then [1, B, N, S', D/32] as given)."""
    if block_table is None or np.ndim(key) != 5:
        return None
    return int(np.shape(block_table)[1]) * int(np.shape(key)[3])
