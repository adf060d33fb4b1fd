"""Where a batch's keys and values come from: dense tensors, tensor lists, paged caches, shared prefix.

Model
-----
A ``KVSource`` answers one question for the golden: *the keys and values of
batch ``b``, kv heads ``h0:h1``, token positions ``start:stop``* (positions
counted in that batch's own sequence), as native-dtype arrays shaped
``[h, n, D]`` and ``[h, n, Dv]``. Four sources exist:

* ``DenseKV`` — key/value in a batch layout (BSH, BSND, BNSD): ``[B, N2, S2, D]``
  after :func:`.layouts.to_bnsd`.
* ``ListKV`` — the aclnn tensor-list form: one tensor per batch, each with
  batch 1 and its own S2.
* ``TokenKV`` — key/value in a token layout (TND, NTD) with cumulative kv
  lengths: batch ``b`` owns tokens ``cum[b-1]:cum[b]``.
* ``PagedKV`` — paged attention: caches ``BnBsH`` ``[blocks, block_size, N2*D]``
  or ``BnNBsD`` ``[blocks, N2, block_size, D]`` (an NZ cache, ``golden.nz``, read as the BnNBsD one it holds)
  and a ``block_table``
  ``[B, max_blocks]``; token ``t`` of batch ``b`` lives in block
  ``block_table[b, t // block_size]`` at offset ``t % block_size``.

``SharedPrefix`` holds the system prefix (``key_shared_prefix`` /
``value_shared_prefix``, batch 1, in the query's batch layout) cut to
``actual_shared_prefix_len``; its tokens are prepended to every batch's KV.

Invariants
----------
* Sources never convert to float64 themselves: the caller converts only the
  slice it needs, so multi-GB caches are never widened whole.
* ``capacity(b)`` is the largest length batch ``b`` can address (S2, the list
  element's S2, the token range, or ``max_blocks * block_size``).
"""

from __future__ import annotations

import numpy as np

from .dtypes import to_numpy
from .layouts import to_bnsd, to_tnd
from .nz import from_nz

__all__ = ["DenseKV", "ListKV", "TokenKV", "PagedKV", "SharedPrefix", "paged_cache_layout"]


def _check_pair(k_shape, v_shape, what: str):
    if k_shape[:-1] != v_shape[:-1]:
        raise ValueError(f"{what}: key {tuple(k_shape)} and value {tuple(v_shape)} must agree on every axis but D")


class DenseKV:
    """Key/value tensors in a batch layout, viewed as ``[B, N2, S2, D]``."""

    def __init__(self, key, value, layout: str, num_kv_heads: int):
        self.k = to_bnsd(to_numpy(key), layout, num_kv_heads, "key")
        self.v = to_bnsd(to_numpy(value), layout, num_kv_heads, "value")
        _check_pair(self.k.shape, self.v.shape, "key/value")
        self.batch, self.num_kv_heads, self.s2, self.d = self.k.shape
        self.dv = self.v.shape[3]
        self.dtype = self.k.dtype

    def capacity(self, b: int) -> int:
        return self.s2

    def fetch(self, b: int, h0: int, h1: int, start: int, stop: int):
        return self.k[b, h0:h1, start:stop], self.v[b, h0:h1, start:stop]


class ListKV:
    """The tensor-list form: ``key[b]`` / ``value[b]`` hold batch ``b`` (batch axis 1, own S2)."""

    def __init__(self, keys, values, layout: str, num_kv_heads: int):
        if len(keys) != len(values):
            raise ValueError(f"key/value tensor lists differ in length: {len(keys)} vs {len(values)}")
        self.k = [to_bnsd(to_numpy(x), layout, num_kv_heads, f"key[{i}]") for i, x in enumerate(keys)]
        self.v = [to_bnsd(to_numpy(x), layout, num_kv_heads, f"value[{i}]") for i, x in enumerate(values)]
        for i, (k, v) in enumerate(zip(self.k, self.v)):
            _check_pair(k.shape, v.shape, f"key[{i}]/value[{i}]")
            if k.shape[0] != 1:
                raise ValueError(f"key[{i}]: tensor-list elements must have batch 1, got shape {tuple(k.shape)}")
            if k.shape[1] != self.k[0].shape[1] or k.shape[3] != self.k[0].shape[3] \
                    or self.v[i].shape[3] != self.v[0].shape[3]:
                raise ValueError(f"key[{i}]: N and D must agree across the tensor list")
        self.batch = len(self.k)
        self.num_kv_heads, self.d = self.k[0].shape[1], self.k[0].shape[3]
        self.dv = self.v[0].shape[3]
        self.dtype = self.k[0].dtype

    def capacity(self, b: int) -> int:
        return self.k[b].shape[2]

    def fetch(self, b: int, h0: int, h1: int, start: int, stop: int):
        return self.k[b][0, h0:h1, start:stop], self.v[b][0, h0:h1, start:stop]


class TokenKV:
    """Key/value in a token layout; batch ``b`` owns tokens ``offsets[b]:offsets[b] + lengths[b]``."""

    def __init__(self, key, value, layout: str):
        self.k = to_tnd(to_numpy(key), layout, "key")
        self.v = to_tnd(to_numpy(value), layout, "value")
        _check_pair(self.k.shape, self.v.shape, "key/value")
        self.tokens, self.num_kv_heads, self.d = self.k.shape
        self.dv = self.v.shape[2]
        self.dtype = self.k.dtype
        self.offsets: list[int] = []
        self.lengths: list[int] = []

    def set_ranges(self, offsets, lengths):
        self.offsets, self.lengths = list(offsets), list(lengths)

    def capacity(self, b: int) -> int:
        return self.lengths[b]

    def fetch(self, b: int, h0: int, h1: int, start: int, stop: int):
        base = self.offsets[b]
        k = self.k[base + start:base + stop, h0:h1].transpose(1, 0, 2)
        v = self.v[base + start:base + stop, h0:h1].transpose(1, 0, 2)
        return k, v


def paged_cache_layout(shape) -> str:
    """``"BnBsH"`` for a 3-D cache, ``"BnNBsD"`` for a 4-D one, ``"NZ"`` for a 5-D one (``golden.nz``)."""
    if len(shape) == 3:
        return "BnBsH"
    if len(shape) == 4:
        return "BnNBsD"
    if len(shape) == 5:
        return "NZ"
    raise ValueError(f"key: a paged cache must be 3-D (BnBsH), 4-D (BnNBsD) or 5-D (NZ), got shape "
                     f"{tuple(shape)}")


class PagedKV:
    """Paged caches addressed through ``block_table``."""

    def __init__(self, key, value, block_table, block_size: int, num_kv_heads: int):
        k = to_numpy(key)
        v = to_numpy(value)
        self.layout = paged_cache_layout(k.shape)
        if paged_cache_layout(v.shape) != self.layout:
            raise ValueError(f"key {tuple(k.shape)} and value {tuple(v.shape)} caches use different layouts")
        if self.layout == "NZ":   # read as the BnNBsD cache it holds
            k, v, self.layout = from_nz(k), from_nz(v), "BnNBsD"
        self.table = np.asarray(to_numpy(block_table))
        if self.table.ndim != 2:
            raise ValueError(f"block_table: must be 2-D [B, max_blocks], got shape {tuple(self.table.shape)}")
        if not np.issubdtype(self.table.dtype, np.integer):
            raise ValueError(f"block_table: must hold integers (int32), got dtype {self.table.dtype}")
        if block_size <= 0:
            raise ValueError(f"block_size={block_size}: paged attention needs a positive block size")
        self.block_size = int(block_size)
        self.num_kv_heads = int(num_kv_heads)
        if self.layout == "BnBsH":
            nb, bs, hk = k.shape
            hv = v.shape[2]
            if hk % self.num_kv_heads or hv % self.num_kv_heads:
                raise ValueError(f"key/value cache H ({hk}, {hv}) is not a multiple of num_key_value_heads "
                                 f"{self.num_kv_heads}")
            self.d, self.dv = hk // self.num_kv_heads, hv // self.num_kv_heads
            self.k = k.reshape(nb, bs, self.num_kv_heads, self.d)
            self.v = v.reshape(v.shape[0], bs, self.num_kv_heads, self.dv)
        else:
            nb, n2, bs, self.d = k.shape
            self.dv = v.shape[3]
            if n2 != self.num_kv_heads:
                raise ValueError(f"key cache has {n2} heads, num_key_value_heads is {self.num_kv_heads}")
            self.k, self.v = k, v
        if bs != self.block_size:
            raise ValueError(f"block_size={block_size}: the {self.layout} cache has block size {bs} "
                             f"(shape {tuple(k.shape)})")
        if self.v.shape[0] != nb:
            raise ValueError(f"key/value caches hold different block counts: {nb} vs {self.v.shape[0]}")
        self.num_blocks = nb
        self.batch = self.table.shape[0]
        self.dtype = k.dtype

    def capacity(self, b: int) -> int:
        return self.table.shape[1] * self.block_size

    def fetch(self, b: int, h0: int, h1: int, start: int, stop: int):
        pos = np.arange(start, stop)
        blocks = self.table[b, pos // self.block_size].astype(np.int64)
        if blocks.size and (blocks.min() < 0 or blocks.max() >= self.num_blocks):
            bad = blocks[(blocks < 0) | (blocks >= self.num_blocks)][0]
            raise ValueError(f"block_table[{b}] holds block id {int(bad)} outside [0, {self.num_blocks}) "
                             f"for a token below the kv length {stop}")
        offs = pos % self.block_size
        heads = np.arange(h0, h1)
        if self.layout == "BnBsH":
            k = self.k[blocks, offs][:, h0:h1].transpose(1, 0, 2)
            v = self.v[blocks, offs][:, h0:h1].transpose(1, 0, 2)
        else:
            k = self.k[blocks[None, :], heads[:, None], offs[None, :]]
            v = self.v[blocks[None, :], heads[:, None], offs[None, :]]
        return k, v


class SharedPrefix:
    """The system prefix, prepended to every batch's keys/values (batch axis 1, query's batch layout)."""

    def __init__(self, key_prefix, value_prefix, layout: str, num_kv_heads: int, actual_len=None):
        self.k = to_bnsd(to_numpy(key_prefix), layout, num_kv_heads, "key_shared_prefix")
        self.v = to_bnsd(to_numpy(value_prefix), layout, num_kv_heads, "value_shared_prefix")
        _check_pair(self.k.shape, self.v.shape, "key_shared_prefix/value_shared_prefix")
        if self.k.shape[0] != 1:
            raise ValueError(f"key_shared_prefix: batch axis must be 1, got shape {tuple(self.k.shape)}")
        full = self.k.shape[2]
        if actual_len is None:
            self.length = full
        else:
            vals = [int(x) for x in np.ravel(np.asarray(actual_len))]
            if len(vals) < 1:
                raise ValueError("actual_shared_prefix_len: empty list")
            self.length = vals[0]
        if not 0 <= self.length <= full:
            raise ValueError(f"actual_shared_prefix_len={self.length}: must lie in [0, {full}] "
                             f"(the prefix's S)")
        self.num_kv_heads, self.d, self.dv = self.k.shape[1], self.k.shape[3], self.v.shape[3]

    def fetch(self, h0: int, h1: int):
        return self.k[0, h0:h1, :self.length], self.v[0, h0:h1, :self.length]
