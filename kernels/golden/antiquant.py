"""KV antiquantisation parameters: what the (int8, int4, FP8, HiF8 or FP4) key/value caches mean, and their
float64 dequantisation.

Model
-----
An int8 (or int4, :mod:`.int4`, read as its int8 values; or, on Ascend950, float8_e4m3fn, float4_e2m1 or HiFloat8
— uint8 codes with the spec's ``cache`` "hifloat8", read through :data:`.hifloat8.HIF8_TABLE` — whose values are
exact in every float type here) key or value element x of KV position s, kv head n, channel d stands
for

    (x + offset) · scale

with ``offset`` optional (0 when absent) and ``scale`` / ``offset`` indexed by the mode:

=========================  ==========  ==================================================================
mode (key_/value_)         kind        parameter shapes (per tensor; ``antiquant_scale`` stacks key, value
                                       on a leading axis of 2)
=========================  ==========  ==================================================================
0 per-channel/per-tensor   channel     (1) / (2); (H) (1, H) / (2, H); (N, D) / (2, N, D);
                                       (N, 1, D) / (2, N, 1, D)
1 per-token                token       (1, B, S') / (2, B, S'); (B, S') — S' >= the KV length
2 per-tensor + per-head    channel     (N)
3 per-token + per-head     token       (B, N, S'); Ascend950 without a shared prefix reads the tensor's
                                       first B*N*S2 values as (B, N, S2), S2 = op_host's S of key (the dense
                                       key's S, or block table columns * block_size), whatever S' is
4 per-token, paged         token       (block_num, block_size): the parameter of position p of batch b is
                                       at [block_table[b, p // block_size], p % block_size], as its KV
5 per-token + per-head,    token       (block_num, N, block_size), read through the block table likewise
  paged
6 per-token-group (MX)     group       [1, B, N, S', D/32] float8_e8m0: one power of two per KV position and
                                       32 channels (Ascend950's MXFP4: an FP4 E2M1 cache, no offset); with an
                                       NZ cache the 950 reads the same bytes as (B, N, D/32, S2), S2 = block
                                       table columns * block_size (its S of a paged call), whatever S' is;
                                       without one and without a shared prefix it reads them as
                                       [B, N, S2, D/32], S2 as in mode 3
=========================  ==========  ==================================================================

``antiquant_scale`` / ``antiquant_offset`` (key and value together) take ``antiquant_mode`` 0 or 1;
``key_/value_antiquant_scale`` (each its own) take ``key_/value_antiquant_mode``, and key and value must share
the mode; modes 4/5 are simulated on a paged cache (``block_table``) only. Mode 8 (per-channel-group) and a
per-channel key with a per-token value are separate kernels cvtile does not simulate:
``UnsupportedParameterError`` naming the mode.

``antiquant_spec`` turns the user's parameters into an ``AntiquantSpec``: channel kinds as (N2, D) tables
(per tensor and per head broadcast to the channels, values unchanged), token kinds as (B, N2 | 1, S') tables
(mode 3 with ``seq_stride``, the 950 without a shared prefix: (B, N2, S2), the values it reads; mode 1 it
spaces by S' as given) or, paged (modes 4/5), the (block_num, N2 | 1, block_size) tables as given with the
block table that addresses them, in the parameters' own dtype; the group kind as (B, N2, S', D) bf16 tables
((B, N2, S2, D) with ``seq_stride``; each E8M0 exponent as the bf16 the 950 loads it as, repeated over its 32
channels: its power of two, except that a byte of 0 loads as 2**-127 and one of 255 as a NaN), or, with an NZ
cache (``group_nz``), (B, N2, D, S2) tables in the order the 950 reads them (the groups' rows of positions,
each repeated over its 32 channels). The same spec feeds the simulated kernel's launch and the golden
(``dequantised``), so both read one interpretation of the shapes.

Invariants
----------
* Shape rules are checked here and a violation is a ``ParamError`` (aclnn 161002) naming the parameter, its
  shape and the accepted shapes; no parameter is silently reshaped (an NZ cache's mode-6 scales, and on the
  950 without a shared prefix the mode-3 and mode-6 parameters, are read in the 950's order of their bytes, the
  table above).
* Dequantisation is float64 and exact in the inputs (int8, FP8, FP4, HiF8, fp16/bf16/fp32 parameters convert
  exactly), except with ``rounding`` (Ascend950's dequant kernel, and A2/A3 PromptFlashAttention's KvAntiquant
  path, ``pfa_dequantises``: the parameters, x + offset and the product each rounded to the query's dtype, as
  the vector computes them; the group kind's product is rounded to bf16, then to the query's dtype). The launch
  runs the dequant kernel for a spec with ``rounding`` on Atlas A2/A3, and the MSD kernel without (IFATiling's
  decode and PromptFlashAttention's MSD path, whose digit split the exact golden stands for).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...tiling.checkers.legacy_pfa import MSD_MAX_QUERY_S
from ...tiling.errors import AclnnStatus, ParamError
from ..errors import UnsupportedParameterError
from .dtypes import BFLOAT16, canonical_dtype, round_to, to_f64, to_numpy
from .hifloat8 import HIFLOAT8, hif8_values

__all__ = ["AntiquantSpec", "antiquant_spec", "chip_seq_stride", "cache_values",
           "pfa_dequantises", "PFA_MSD_MAX_QUERY_S",
           "ANTIQUANT_PARAMS", "QUANTISED_CACHES"]

#: the cache dtypes a dequantisation reads: int8 (an int4 cache as its int8 values) and, on Ascend950, FP8 E4M3
#: and (MXFP4, mode 6) FP4 E2M1; a HiFloat8 cache is uint8 codes with the spec's ``cache`` "hifloat8"
QUANTISED_CACHES = ("int8", "float8_e4m3fn", "float4_e2m1")

ANTIQUANT_PARAMS = ("antiquant_scale", "antiquant_offset", "key_antiquant_scale", "key_antiquant_offset",
                    "value_antiquant_scale", "value_antiquant_offset")
_CHANNEL, _TOKEN, _GROUP = "channel", "token", "group"

#: the longest query S PromptFlashAttention's MSD path takes (op_host's CVDIFF_SMALL_QS_THRESHOLDS; the tiling
#: mirror's rule, ``legacy_pfa.MSD_MAX_QUERY_S``)
PFA_MSD_MAX_QUERY_S = MSD_MAX_QUERY_S


def pfa_dequantises(query_dtype: str, query_s: int, separate_params: bool) -> bool:
    """Whether Atlas A2/A3's PromptFlashAttention route takes an int8 cache through its KvAntiquant path (the vector
    dequantises each K and V block to the query's dtype with AscendAntiQuant, (x + offset) · scale each step
    rounded, into a GM workspace the cube reads; then the non-quant flow) rather than its MSD one: an fp16 query
    with the stacked ``antiquant_scale`` / ``antiquant_offset``, or with key/value parameters and a query S above
    ``PFA_MSD_MAX_QUERY_S`` (op_host's ``PromptFlashAttentionTiling``: enableKvAntiquant against enableMsd; a
    bf16 query takes only MSD, and needs the key/value parameters; op_host refuses the MSD path a query S above
    16, and an fp16 query of S above 16 with key/value parameters reads them only from a paged cache). The MSD
    path runs ``fia_antiquant``."""
    return query_dtype == "float16" and (not separate_params or query_s > PFA_MSD_MAX_QUERY_S)
_MODE_KIND = {0: _CHANNEL, 1: _TOKEN, 2: _CHANNEL, 3: _TOKEN, 4: _TOKEN, 5: _TOKEN, 6: _GROUP}
GROUP_SIZE = 32   #: channels per scale of the per-token-group (MX) mode 6
#: the bf16 bits the 950 loads an E8M0 byte of 0 (2**-127) and of 255 (a NaN) as (``_e8m0_as_bf16``)
_E8M0_ZERO_BF16, _E8M0_NAN_BF16 = 0x0040, 0x7FFF
_PAGED_MODES = (4, 5)
_MODE_NAME = {0: "per-channel", 1: "per-token", 2: "per-tensor + per-head", 3: "per-token + per-head",
              4: "per-token (page-table managed)", 5: "per-token + per-head (page-table managed)",
              6: "per-token-group", 8: "per-channel-group"}


@dataclass(frozen=True)
class AntiquantSpec:
    """One call's antiquantisation: ``kind`` "channel" (tables (N2, D)) or "token" (tables (B, N2 | 1, S')),
    the key and value scales and optional offsets in their own dtype."""

    kind: str
    key_scale: np.ndarray
    key_offset: np.ndarray | None
    value_scale: np.ndarray
    value_offset: np.ndarray | None
    mode: int
    block_table: np.ndarray | None = None    # modes 4/5: the table addressing the (block_num, N2 | 1, bs) tables
    int4: bool = False    # an int4 cache (:mod:`.int4`; its values held as int8): the kernel splits into int4 digits
    rounding: str | None = None   # the dtype each dequant step rounds to (a vector dequant: the query's)
    group_nz: bool = False   # mode 6 with an NZ cache: the tables are (B, N2, D, S2), the 950's NZ scale order
    cache: str | None = None   # "hifloat8": the uint8 key/value hold HiFloat8 codes (None: the arrays' dtype says)

    @property
    def per_token(self) -> bool:
        return self.kind == _TOKEN

    @property
    def per_group(self) -> bool:
        """Mode 6 (MXFP4): one power-of-two scale per KV position and 32 channels, tables (B, N2, S', D) (S2 for
        S' when read by the 950's stride), or (B, N2, D, S2) with ``group_nz``."""
        return self.kind == _GROUP

    @property
    def paged(self) -> bool:
        """The per-token tables are (block_num, N2 | 1, block_size), read through ``block_table``."""
        return self.block_table is not None

    @property
    def has_offset(self) -> bool:
        return self.key_offset is not None

    def dequantised(self, x, which: str, b: int, h0: int, h1: int, start: int, stop: int) -> np.ndarray:
        """float64 (x + offset) · scale of a chunk ``x`` (heads h0:h1, KV positions start:stop, D) of batch b."""
        scale = self.key_scale if which == "key" else self.value_scale
        offset = self.key_offset if which == "key" else self.value_offset
        xf = cache_values(x, which, self.cache)
        if self.kind == _GROUP:   # the 950 multiplies in bf16, then casts to the query's dtype
            s = to_f64(self._group_rows(scale, b, h0, h1, start, stop), "scale")
            return round_to(round_to(xf * s, "bfloat16"), self.rounding) if self.rounding else xf * s
        if self.kind == _CHANNEL:
            s = to_f64(scale[h0:h1], "scale")[:, None, :]
            o = to_f64(offset[h0:h1], "offset")[:, None, :] if offset is not None else 0.0
        else:
            heads = slice(h0, h1) if scale.shape[1] > 1 else slice(0, 1)
            s = to_f64(self._token_rows(scale, b, heads, start, stop), "scale")[:, :, None]
            o = to_f64(self._token_rows(offset, b, heads, start, stop), "offset")[:, :, None] \
                if offset is not None else 0.0
        if self.rounding is None:
            return (xf + o) * s
        r = self.rounding   # the 950 vector: parameters and each step in the query's dtype
        s = round_to(s, r)
        if offset is not None:
            xf = round_to(xf + round_to(o, r), r)
        return round_to(xf * s, r)

    def _group_rows(self, table: np.ndarray, b: int, h0: int, h1: int, start: int, stop: int) -> np.ndarray:
        """(heads, stop - start, D) group scales of batch b's positions start:stop (of the (B, N2, D, S2) tables
        of an NZ cache: its groups' rows of positions, read across)."""
        if self.group_nz:
            return table[b, h0:h1, :, start:stop].transpose(0, 2, 1)
        return table[b, h0:h1, start:stop]

    def _token_rows(self, table: np.ndarray, b: int, heads: slice, start: int, stop: int) -> np.ndarray:
        """(heads, stop - start) token parameters of batch b's positions start:stop."""
        if not self.paged:
            return table[b, heads, start:stop]
        pos = np.arange(start, stop)
        bs = table.shape[2]
        blocks = self.block_table[b, pos // bs].astype(np.int64)
        return table[blocks, heads, pos % bs].T     # (block_num, N2 | 1, bs) -> (heads, positions)


def cache_values(x, which: str, cache: str | None = None) -> np.ndarray:
    """The float64 values of a quantised key/value chunk ``x`` (exact): int8, FP8 or FP4 as they are, uint8
    HiFloat8 codes (``cache`` "hifloat8") through the HiF8 table."""
    raw = to_numpy(x)
    kind = canonical_dtype(raw.dtype)
    if cache == HIFLOAT8 and kind == "uint8":
        return hif8_values(raw).astype(np.float64)
    if cache is not None or kind not in QUANTISED_CACHES:
        raise ParamError(which, kind, "KV antiquant reads an int8 key/value cache (an int4 one as its int8 "
                         "values: golden.int4) or, on Ascend950, a float8_e4m3fn, float4_e2m1 or HiFloat8 (uint8 "
                         "codes marked hifloat8) one", status=AclnnStatus.PARAM_INVALID, checker="antiquant")
    return raw.astype(np.float64)


def _bad(name: str, x, rule: str) -> ParamError:
    return ParamError(name, tuple(np.shape(x)), rule, status=AclnnStatus.PARAM_INVALID, checker="antiquant")


def _channel_table(name: str, x: np.ndarray, mode: int, n2: int, d: int) -> np.ndarray:
    """The (N2, D) table of one channel-kind parameter (key or value, already out of a stacked pair)."""
    if mode == 2:
        if tuple(x.shape) != (n2,):
            raise _bad(name, x, f"per-tensor + per-head (mode 2) parameters are (N2,) = ({n2},)")
        return np.ascontiguousarray(np.broadcast_to(x[:, None], (n2, d)))
    squeezed = tuple(s for s in x.shape if s != 1)
    if x.size == 1:
        return np.full((n2, d), x.reshape(-1)[0], dtype=x.dtype)
    if squeezed in ((n2 * d,), (n2, d)):
        return np.ascontiguousarray(x.reshape(n2, d))
    raise _bad(name, x, f"per-channel parameters hold one value (per tensor) or N2*D = {n2 * d} values shaped "
               f"(H), (1, H), (N2, D), (N2, 1, D) or (1, N2, 1, D) (N2={n2}, D={d})")


def _token_table(name: str, x: np.ndarray, mode: int, batch: int, n2: int, kv_len: int,
                 seq_stride: int | None = None) -> np.ndarray:
    """The (B, N2 | 1, S') table of one token-kind parameter (key or value, already out of a stacked pair); mode 3
    with ``seq_stride`` S2: the tensor's first B*N2*S2 values as (B, N2, S2), as the 950 reads them."""
    shape = tuple(x.shape)
    if mode == 3:
        least = max(kv_len, seq_stride or 0)
        if len(shape) != 3 or shape[:2] != (batch, n2) or shape[2] < least:
            raise _bad(name, x, f"per-token + per-head (mode 3) parameters are (B, N2, S') = ({batch}, {n2}, "
                       f"S' >= {least}, the longest KV)")
        return x if seq_stride is None else _read_from_start(x, (batch, n2, seq_stride))
    if len(shape) == 3 and shape[0] == 1:
        shape, x = shape[1:], x[0]
    if len(shape) != 2 or shape[0] != batch or shape[1] < kv_len:
        raise _bad(name, x, f"per-token (mode 1) parameters are (1, B, S') or (B, S') = ({batch}, S' >= {kv_len}, "
                   "the longest KV); antiquant_scale stacks key and value: (2, B, S')")
    return x[:, None, :]


def antiquant_spec(arrays: dict, *, antiquant_mode: int, key_antiquant_mode: int, value_antiquant_mode: int,
                   batch: int, num_kv_heads: int, head_dim: int, kv_len: int,
                   nz_stride: int | None = None, seq_stride: int | None = None) -> AntiquantSpec:
    """The ``AntiquantSpec`` of one call from its parameter arrays (by V1 name; absent ones missing or None;
    ``block_table`` read for the paged modes 4/5). ``kv_len``: the longest KV length the call attends (a
    per-token table must cover it). ``nz_stride``: with an NZ cache, the S2 its mode-6 scales are read with
    (``golden.nz.group_scale_stride``). ``seq_stride``: the S2 Ascend950 spaces the (b, n2) rows of mode 3 and
    mode 6 parameters by without a shared prefix (:func:`chip_seq_stride`); None reads them by their S'."""
    get = {name: (to_numpy(arrays[name]) if arrays.get(name) is not None else None) for name in ANTIQUANT_PARAMS}
    separate = get["key_antiquant_scale"] is not None or get["value_antiquant_scale"] is not None
    if separate:
        for name in ("key_antiquant_scale", "value_antiquant_scale"):
            if get[name] is None:
                raise ParamError(name, None, "key_antiquant_scale and value_antiquant_scale come together",
                                 status=AclnnStatus.PARAM_INVALID, checker="antiquant")
        if (get["key_antiquant_offset"] is None) != (get["value_antiquant_offset"] is None):
            raise ParamError("value_antiquant_offset", None, "key and value antiquant offsets come together",
                             status=AclnnStatus.PARAM_INVALID, checker="antiquant")
        mode, mode_name = int(key_antiquant_mode), "key_antiquant_mode"
        if int(value_antiquant_mode) != mode:
            raise UnsupportedParameterError("value_antiquant_mode", value_antiquant_mode,
                                            f"key mode {mode} with value mode {value_antiquant_mode} is a separate "
                                            "kernel (e.g. per-channel key, per-token value) that is not simulated")
        pairs = {"key_scale": ("key_antiquant_scale", get["key_antiquant_scale"]),
                 "key_offset": ("key_antiquant_offset", get["key_antiquant_offset"]),
                 "value_scale": ("value_antiquant_scale", get["value_antiquant_scale"]),
                 "value_offset": ("value_antiquant_offset", get["value_antiquant_offset"])}
    else:
        sc, of = get["antiquant_scale"], get["antiquant_offset"]
        if sc is None:
            raise ParamError("antiquant_scale", None, "int8 or int4 key/value (KV antiquant) needs antiquant_scale or "
                             "key_/value_antiquant_scale", status=AclnnStatus.PARAM_INVALID, checker="antiquant")
        mode, mode_name = int(antiquant_mode), "antiquant_mode"
        if mode not in (0, 1):
            raise ParamError("antiquant_mode", mode, "antiquant_mode is 0 (per-channel) or 1 (per-token)",
                             status=AclnnStatus.PARAM_INVALID, checker="antiquant")
        if sc.ndim == 0 or sc.shape[0] != 2:
            raise _bad("antiquant_scale", sc, "antiquant_scale stacks the key and value parameters on a leading "
                       "axis of 2")
        if of is not None and tuple(of.shape) != tuple(sc.shape):
            raise _bad("antiquant_offset", of, f"antiquant_offset has antiquant_scale's shape {tuple(sc.shape)}")
        pairs = {"key_scale": ("antiquant_scale", sc[0]), "key_offset": ("antiquant_offset", None if of is None
                                                                         else of[0]),
                 "value_scale": ("antiquant_scale", sc[1]), "value_offset": ("antiquant_offset", None if of is None
                                                                             else of[1])}
    if mode not in _MODE_KIND:
        raise UnsupportedParameterError(mode_name, mode, f"{_MODE_NAME.get(mode, 'this')} antiquant is not "
                                        "simulated (modes 0-5 are)")
    kind = _MODE_KIND[mode]
    table = to_numpy(arrays["block_table"]) if arrays.get("block_table") is not None else None
    if mode in _PAGED_MODES and table is None:
        raise UnsupportedParameterError(mode_name, mode, f"{_MODE_NAME[mode]} antiquant (mode {mode}) is simulated "
                                        "on a paged cache, its parameters read through the block table; without a "
                                        "block_table it is not")
    tables = {}
    for field, (name, x) in pairs.items():
        if x is None:
            tables[field] = None
            continue
        if field.endswith("offset"):
            scale_name, scale = pairs[field.replace("offset", "scale")]
            if tuple(x.shape) != tuple(scale.shape):
                raise _bad(name, x, f"{name} has {scale_name}'s shape {tuple(scale.shape)}")
        if kind == _GROUP:
            tables[field] = _group_table(name, x, batch, num_kv_heads, kv_len, head_dim, nz_stride, seq_stride)
            continue
        if canonical_dtype(x.dtype) not in ("float16", "bfloat16", "float32"):
            raise ParamError(name, canonical_dtype(x.dtype), "antiquant parameters are float16, bfloat16 or "
                             "float32", status=AclnnStatus.PARAM_INVALID, checker="antiquant")
        if kind == _CHANNEL:
            tables[field] = _channel_table(name, x, mode, num_kv_heads, head_dim)
        elif mode in _PAGED_MODES:
            tables[field] = _paged_token_table(name, x, mode, num_kv_heads)
        else:
            tables[field] = _token_table(name, x, mode, batch, num_kv_heads, kv_len, seq_stride)
    return AntiquantSpec(kind, tables["key_scale"], tables["key_offset"], tables["value_scale"],
                         tables["value_offset"], mode, table if mode in _PAGED_MODES else None,
                         group_nz=kind == _GROUP and nz_stride is not None)


def _group_table(name: str, x: np.ndarray, batch: int, n2: int, kv_len: int, d: int,
                 nz_stride: int | None = None, seq_stride: int | None = None) -> np.ndarray:
    """The bf16 table of a per-token-group (mode 6, MX) parameter given as float8_e8m0 [1, B, N2, S', D/32]
    (:func:`_e8m0_as_bf16`, repeated over each group's 32 channels): (B, N2, S', D), indexed by the KV position
    in the batch's sequence, paged or not; with ``seq_stride`` S2 the tensor's first B*N2*S2*D/32 bytes as
    (B, N2, S2, D), as the 950 reads them without a shared prefix; with ``nz_stride`` S2 (an NZ cache) the same
    bytes as the 950 reads them, (B, N2, D/32, S2) from the tensor's start, as (B, N2, D, S2)."""
    if canonical_dtype(x.dtype) != "float8_e8m0":
        raise ParamError(name, canonical_dtype(x.dtype), "per-token-group (mode 6) scales are float8_e8m0",
                         status=AclnnStatus.PARAM_INVALID, checker="antiquant")
    shape = tuple(x.shape)
    least = max(kv_len, nz_stride or seq_stride or 0)
    if len(shape) != 5 or shape[:3] != (1, batch, n2) or shape[3] < least or shape[4] * GROUP_SIZE != d:
        raise _bad(name, x, f"per-token-group (mode 6) scales are [1, B, N2, S', D/32] = [1, {batch}, {n2}, "
                   f"S' >= {least}, {d // GROUP_SIZE}]")
    groups = d // GROUP_SIZE
    if nz_stride is not None:
        nz = _read_from_start(x, (batch, n2, groups, nz_stride))
        return np.repeat(_e8m0_as_bf16(nz), GROUP_SIZE, axis=2)
    rows = x[0] if seq_stride is None else _read_from_start(x, (batch, n2, seq_stride, groups))
    return np.repeat(_e8m0_as_bf16(rows), GROUP_SIZE, axis=-1)


def _read_from_start(x: np.ndarray, shape: tuple) -> np.ndarray:
    """The first prod(``shape``) values of ``x`` (in its row-major order) as ``shape``: a parameter tensor read
    as the 950 addresses it, whatever its declared shape (which the caller has checked holds that many)."""
    return np.ascontiguousarray(x).reshape(-1)[:int(np.prod(shape))].reshape(shape)


def chip_seq_stride(key, block_table, qkv_layout: str) -> int:
    """S2, the stride by which Ascend950 spaces the (b, n2) rows of per-token + per-head (mode 3) and
    per-token-group (mode 6) parameters without a shared prefix: op_host's S of key, the dense key's S (BNSD:
    axis 2, BSH/BSND: axis 1), a key/value tensor list's longest tensor's S (``FiaInfoParser``'s s2Size over the
    list), or a paged cache's block table columns times its block size (BnBsH (blocks, bs, H), BnNBsD
    (blocks, N, bs, D) or NZ (blocks, N, D/d0, bs, d0)), not the tensor's S'."""
    if isinstance(key, (list, tuple)):
        return max(chip_seq_stride(t, None, qkv_layout) for t in key)
    shape = np.shape(key)
    if block_table is not None:
        return int(np.shape(block_table)[1]) * int(shape[{3: 1, 4: 2, 5: 3}[len(shape)]])
    return int(shape[2] if qkv_layout == "BNSD" else shape[1])


def _e8m0_as_bf16(e: np.ndarray) -> np.ndarray:
    """float8_e8m0 exponents e as the bf16 the 950's scale loaders (``AntiqScaleByVFImpl``,
    ``AntiqScalePerTokenGroupByVFImpl``) make of them: the bits e << 7 (2**(e - 127)), except e = 0, which they
    load as 0x0040 (2**-127, a bf16 subnormal, not 0), and e = 255, as 0x7fff (a NaN, not +inf)."""
    bits = np.ascontiguousarray(e).view(np.uint8).astype(np.uint16) << 7
    bits[bits == 0] = _E8M0_ZERO_BF16
    bits[bits == 0xFF << 7] = _E8M0_NAN_BF16
    return bits.view(BFLOAT16)


def _paged_token_table(name: str, x: np.ndarray, mode: int, n2: int) -> np.ndarray:
    """The (block_num, N2 | 1, block_size) table of a paged per-token parameter (mode 4: (block_num,
    block_size) gains a head axis of 1; mode 5 is (block_num, N2, block_size)). op_host checks the block count
    and size against the cache."""
    if mode == 4:
        if x.ndim != 2:
            raise _bad(name, x, "paged per-token (mode 4) parameters are (block_num, block_size)")
        return x[:, None, :]
    if x.ndim != 3 or x.shape[1] != n2:
        raise _bad(name, x, f"paged per-token + per-head (mode 5) parameters are (block_num, N2, block_size) "
                   f"(N2={n2})")
    return x
