"""FlashAttentionScore's dropout keep mask: the explicit bit mask, the Philox generator, the element count.

Model
-----
``keep[b, n, i, j]`` (bool, shape (B, N1, S1, S2), local positions) True means the softmax probability
``P[b, n, i, j]`` is kept and scaled by ``1 / keep_prob`` before ``P·V``; False means it is zeroed.
``keep_prob == 1`` means no dropout at all: no mask is read or generated (torch_npu's ``DROPOUT_NONE``).
The mask reaches the kernel in one of two ways, both modelled here.

**Explicit mask** (``dropMaskOptional`` / torch_npu ``dropout_mask``; what torch_npu itself generates on
chips before Ascend 950). uint8, any shape; only its element count is checked: it must hold at least
``ceil(numels / 8)`` bytes (op_host ``flash_attention_score_tiling_general.cpp``, the drop-mask check in
``AnalyzeOptionalInput``; the same rule in arch35 ``flash_attention_score_tiling_regbase.cpp``), surplus
bytes are ignored. The bytes are one flat bit stream, one bit per score, in (B, N1, S1, S2) row-major order
(N1 = N2·G, head ``n = n2·G + g``): score number ``k`` is bit ``k % 8`` (least significant first) of byte
``k // 8``; 1 = keep. There is no padding per row: with ``S2 % 8 != 0`` a row starts mid-byte, which is why
op_host schedules the ``FlashAttentionScoreTilingDropMask`` template (priority 90) and the kernel runs
``FlashAttentionScoreDropMaskAdapter`` (bits to bytes over the whole flat stream) first. The kernel's block
offset is ``ComputeDropOffset`` (``common/include/kernel/dropmask.h``: b·N2·G·S1·S2 + n2·G·S1·S2 +
g·S1·S2 + row·S2 + col). TND: one (N1, s1_b, s2_b) block per batch, the batches back to back with no
padding between them (``bSSOffset`` = Σ earlier s1·s2), numels = N1·Σ s1_b·s2_b. The bit order is the
Ascend C ``DropOut`` bit mode's (asc-devkit ``examples/.../dropout/scripts/gen_data.py`` expands each mask
byte least significant bit first; the worked example in ``DropOut.md`` reads MSB first and disagrees with
that golden; the golden, the ``Select`` bit mask and the packing below agree). torch_npu allocates
``ceil(numels / 128) · 16`` bytes (aclnn ``DropoutGenMask`` output size; ``+ 32`` for the all-zero mask of
``keep_prob == 0``). The documented shape [B, N1, S1, S2/8] is this stream when ``S2 % 8 == 0``.

**Generated in the kernel** (Ascend 950: op-plugin ``npu_fusion_attention`` generates no mask there and
passes ``seed`` / ``offset`` to ``aclnnFlashAttentionScoreV4``; the arch35 kernel draws the mask itself,
``attention/common/op_kernel/arch35/dropmask.h``, ``GenDropMask`` / ``GenMaskVF``). ``source="kernel"``:

* Philox4x32 with **7** rounds (the hand-written loop of ``GenMaskVF``; Ascend C ``PhiloxRandom`` also
  defaults to ``Rounds = 7``), key ``(seed & 0xffffffff, seed >> 32)``.
* Counter ``(c & 0xffffffff, c >> 32, carry, 0)`` with
  ``c = ceil((E + offset) / 16) + j // 16``, where ``E = B_off(b)·N1 + n·s1_b·A_b + i·A_b``,
  ``A_b = ceil16(s2_b)`` (S2 aligned to 16, ``b1SSOffsetAlign16``) and ``B_off(b) = Σ_{b'<b} s1_b'·A_b'``
  (batch layouts: ``b·S1·A``). One counter gives 16 random bytes, for 16 consecutive scores of a row:
  score ``j`` takes byte ``j % 4`` (little-endian) of output word ``(j % 16) // 4``.
* ``keep = byte <= T`` with ``T = int(float32(keep_prob) · 255)`` (op_host ``keepProbUint8``, truncated;
  ``CompareScalar<uint8_t, LE>``), so the realised keep probability is ``(T + 1) / 256``
  (:func:`effective_keep_prob`), not ``keep_prob``; the kept scores are still scaled by ``1 / keep_prob``.

``source="gen_mask"``: the explicit mask ``StatelessDropOutGenMask`` (ops-math ``random/
stateless_drop_out_gen_mask``: its golden ``tests/assets/golden.py`` and arch35 kernel) would produce for the
flat stream: Philox4x32-10, key as above, counter ``(m & 0xffffffff, m >> 32, offset & 0xffffffff,
offset >> 32)`` for output block ``m = k // 4`` (aclnn ``DropoutGenMask`` passes the offset list
``{0, offset}``), word ``k % 4``; ``u = float32(x)·2⁻³² + 2⁻³³`` in float32, kept iff ``u < p`` with
``p = float32(1 - (float32(1) - float32(keep_prob)))`` (op-plugin passes the drop probability, aclnn passes
``1 - prob`` to the op).

What is assumed (not public)
----------------------------
* The A2/A3 generator: torch_npu's ``aclnnDropoutGenMaskV2`` runs ``DSAGenBitMask`` on the DSA hardware
  unit there, whose algorithm is not published. ``source="gen_mask"`` is the public op with the same
  contract, not a bit-exact model of the DSA unit.
* ``GenMaskVF``'s ``Interleave`` steps are read as the usual zip (dst0 = interleaved low halves), and a
  uint32 register viewed as uint8 as little-endian: together they put the 4 words of one counter, each
  byte least significant first, on 16 consecutive scores.
* Every S2 block of the kernel starts at a multiple of 16 (true for the S2 base blocks of 128/256/512 and
  a row start of 0). The band/prefix sparse modes can start a row's first block elsewhere; the chip then
  rounds that block's counter up (``CeilDiv(maskOffset, 16)``) and its draw depends on the tiling, which
  is not reproduced.
* Offsets that round up to the same ``ceil(offset / 16)`` give the same mask, and an offset larger by 16
  shifts the draw by one 16-score group; torch_npu advances the generator by only
  ``philox_engine_inputs(10)`` per call (rounded up to 12 in the NPUGeneratorImpl versions that round to a
  multiple of 4), so consecutive calls on 950 draw overlapping streams. That is what the public code does;
  it is modelled, not corrected.

Outputs of the forward
----------------------
torch_npu returns ``(seed, offset, numels)``: the generator's seed and its offset *before* the call
(``philox_engine_inputs(10)`` returns the old offset and advances it), and ``numels = B·N1·S1·S2``
(TND: ``N1·Σ s1_b·s2_b``), computed even when ``keep_prob == 1`` (:func:`dropout_numels`).
"""

from __future__ import annotations

import numpy as np

from ...tiling.errors import AclnnStatus, ParamError
from ..golden.dtypes import canonical_dtype, to_numpy

__all__ = ["PHILOX_M", "PHILOX_W", "GENERATOR_INCREMENT", "philox4x32", "keep_threshold_uint8",
           "effective_keep_prob", "mask_numels", "min_mask_bytes", "torch_npu_mask_bytes", "unpack_drop_mask",
           "pack_drop_mask", "generate_keep_mask", "dropout_numels", "next_generator_offset"]

PHILOX_M = (0xD2511F53, 0xCD9E8D57)     # round multipliers (counter words 0 and 2)
PHILOX_W = (0x9E3779B9, 0xBB67AE85)     # Weyl key increments
GENERATOR_INCREMENT = 10                # philox_engine_inputs(10) in op-plugin's npu_fusion_attention
KERNEL_ROUNDS = 7                       # arch35 GenMaskVF
GEN_MASK_ROUNDS = 10                    # StatelessDropOutGenMask
_M32 = 0xFFFFFFFF
_M64 = (1 << 64) - 1
_INVALID = AclnnStatus.PARAM_INVALID
_SOURCES = ("kernel", "gen_mask")


def _err(param, value, rule, status=_INVALID):
    return ParamError(param, value, rule, status=status, checker="dropout")


# ---------------------------------------------------------------------------------------------------------
# Philox4x32
# ---------------------------------------------------------------------------------------------------------

def philox4x32(counter, key, rounds: int = 10) -> np.ndarray:
    """Philox4x32-``rounds`` of counter words ``counter[0..3]`` (uint32 arrays, broadcast together) under the
    key ``(key[0], key[1])`` (ints). Returns a uint32 array of shape ``(4, *broadcast shape)``.

    Random123's definition: each round multiplies words 0 and 2 by ``PHILOX_M`` (hi/lo of the 64-bit
    product), the key is bumped by ``PHILOX_W`` between rounds."""
    if rounds < 1:
        raise ValueError("rounds must be >= 1")
    c0, c1, c2, c3 = np.broadcast_arrays(*[np.asarray(c, dtype=np.uint64) & _M32 for c in counter])
    k0, k1 = int(key[0]) & _M32, int(key[1]) & _M32
    m0, m1 = np.uint64(PHILOX_M[0]), np.uint64(PHILOX_M[1])
    shift, mask = np.uint64(32), np.uint64(_M32)
    for r in range(rounds):
        if r:
            k0, k1 = (k0 + PHILOX_W[0]) & _M32, (k1 + PHILOX_W[1]) & _M32
        p0 = c0 * m0
        p1 = c2 * m1
        c0, c1, c2, c3 = (p1 >> shift) ^ c1 ^ np.uint64(k0), p1 & mask, (p0 >> shift) ^ c3 ^ np.uint64(k1), p0 & mask
    return np.stack([c0, c1, c2, c3]).astype(np.uint32)


# ---------------------------------------------------------------------------------------------------------
# thresholds and sizes
# ---------------------------------------------------------------------------------------------------------

def _keep_prob(keep_prob) -> float:
    if isinstance(keep_prob, bool) or not isinstance(keep_prob, (int, float, np.integer, np.floating)):
        raise _err("keep_prob", keep_prob, "must be a number")
    kp = float(keep_prob)
    if not (0.0 < kp <= 1.0):
        raise _err("keep_prob", keep_prob, "must be in (0, 1]")
    return kp


def keep_threshold_uint8(keep_prob) -> int:
    """The arch35 kernel's byte threshold: op_host ``keepProbUint8 = int64(keepProb · 255)`` (float32, truncated)."""
    return int(np.float32(_keep_prob(keep_prob)) * np.float32(255.0))


def _gen_mask_prob(keep_prob) -> np.float32:
    drop = float(np.float32(1.0) - np.float32(_keep_prob(keep_prob)))     # op-plugin: float(1) - float(kp)
    return np.float32(1.0 - drop)                                         # aclnn: float(1 - prob)


def effective_keep_prob(keep_prob, source: str = "kernel") -> float:
    """The probability a score is actually kept: ``(T + 1) / 256`` for the in-kernel generator, the float32
    threshold for ``gen_mask`` (u is uniform on the 2³² centres ``(x + 0.5)·2⁻³²``); 1 for ``keep_prob == 1``."""
    _source(source)
    if _keep_prob(keep_prob) >= 1.0:
        return 1.0
    if source == "kernel":
        return (keep_threshold_uint8(keep_prob) + 1) / 256.0
    return float(_gen_mask_prob(keep_prob))


def _source(source):
    if source not in _SOURCES:
        raise ValueError(f"source must be one of {_SOURCES}, not {source!r}")


def _lengths(shape, qlen, kvlen):
    """Per-batch (s1, s2) of a (B, N1, S1, S2) keep mask: the full S1/S2, or the TND lengths."""
    try:
        dims = tuple(int(v) for v in shape)
    except TypeError:
        raise _err("shape", shape, "must be (B, N1, S1, S2)") from None
    if len(dims) != 4 or min(dims) < 0:
        raise _err("shape", shape, "must be four non-negative ints (B, N1, S1, S2)")
    b, n, s1, s2 = dims
    if (qlen is None) != (kvlen is None):
        raise _err("actual_seq_kvlen" if kvlen is None else "actual_seq_qlen", None,
                   "per-batch lengths come in pairs (qlen and kvlen)")
    if qlen is None:
        return dims, np.full(b, s1, np.int64), np.full(b, s2, np.int64)
    ql = np.asarray(to_numpy(qlen), dtype=np.int64).reshape(-1)
    kl = np.asarray(to_numpy(kvlen), dtype=np.int64).reshape(-1)
    for name, lens, cap in (("actual_seq_qlen", ql, s1), ("actual_seq_kvlen", kl, s2)):
        if lens.shape[0] != b:
            raise _err(name, lens.tolist(), f"must hold one length per batch ({b})")
        if lens.size and (lens.min() < 0 or lens.max() > cap):
            raise _err(name, lens.tolist(), f"per-batch lengths must lie in [0, {cap}]")
    return dims, ql, kl


def mask_numels(shape, *, qlen=None, kvlen=None) -> int:
    """Scores covered by the mask: ``B·N1·S1·S2``, or ``N1·Σ qlen_b·kvlen_b`` with per-batch lengths (TND)."""
    (b, n, _, _), ql, kl = _lengths(shape, qlen, kvlen)
    return int(n * int(np.sum(ql * kl)))


def min_mask_bytes(numels: int) -> int:
    """The smallest explicit mask op_host accepts: ``ceil(numels / 8)`` bytes."""
    return (int(numels) + 7) // 8


def torch_npu_mask_bytes(numels: int) -> int:
    """What torch_npu allocates for a generated mask: ``ceil(numels / 128) · 128 / 8`` bytes."""
    return (int(numels) + 127) // 128 * 16


# ---------------------------------------------------------------------------------------------------------
# the explicit bit mask
# ---------------------------------------------------------------------------------------------------------

def unpack_drop_mask(drop_mask, shape, *, qlen=None, kvlen=None, param: str = "dropout_mask") -> np.ndarray:
    """The keep mask (bool, ``shape`` = (B, N1, S1, S2)) of an explicit uint8 bit mask (module docstring).

    ``qlen`` / ``kvlen`` (per-batch lengths, TND) read the batches as back-to-back (N1, s1_b, s2_b) blocks
    and leave positions past a batch's lengths False. Raises ``ParamError`` (161002) naming ``param`` for a
    dtype other than uint8 or fewer than ``ceil(numels / 8)`` bytes."""
    if drop_mask is None:
        raise _err(param, None, "the mask tensor is missing", status=AclnnStatus.PARAM_NULLPTR)
    m = to_numpy(drop_mask)
    dtype = canonical_dtype(m.dtype)
    if dtype != "uint8":
        raise _err(param, f"dtype {dtype}", "the drop mask must be uint8 (one bit per score)")
    (b, n, s1, s2), ql, kl = _lengths(shape, qlen, kvlen)
    numels = int(n * int(np.sum(ql * kl)))
    flat = np.ascontiguousarray(m).reshape(-1)
    need = min_mask_bytes(numels)
    if flat.size < need:
        raise _err(param, f"{flat.size} bytes (shape {tuple(m.shape)})",
                   f"must hold at least ceil({numels} / 8) = {need} bytes (one bit per score, B·N1·S1·S2 or "
                   f"N1·Σ s1·s2 scores)")
    bits = np.unpackbits(flat[:need], bitorder="little")[:numels].astype(bool)
    keep = np.zeros((b, n, s1, s2), dtype=bool)
    if qlen is None:
        return bits.reshape(b, n, s1, s2) if numels else keep
    start = 0
    for i in range(b):
        size = n * int(ql[i]) * int(kl[i])
        keep[i, :, :ql[i], :kl[i]] = bits[start:start + size].reshape(n, int(ql[i]), int(kl[i]))
        start += size
    return keep


def pack_drop_mask(keep, *, qlen=None, kvlen=None, align_bits: int = 8) -> np.ndarray:
    """The explicit uint8 bit mask (1-D) of a keep mask (B, N1, S1, S2): the inverse of
    :func:`unpack_drop_mask`. ``align_bits`` pads the stream with zero bits to a multiple (8: the minimum
    op_host accepts; 128: torch_npu's allocation)."""
    k = np.asarray(to_numpy(keep))
    if k.ndim != 4:
        raise _err("keep", f"shape {tuple(k.shape)}", "must be (B, N1, S1, S2)")
    if align_bits <= 0 or align_bits % 8:
        raise ValueError("align_bits must be a positive multiple of 8")
    k = k.astype(bool)
    (b, n, _, _), ql, kl = _lengths(k.shape, qlen, kvlen)
    if qlen is None:
        bits = k.reshape(-1)
    else:
        bits = np.concatenate([k[i, :, :ql[i], :kl[i]].reshape(-1) for i in range(b)] + [np.zeros(0, bool)])
    total = (bits.size + align_bits - 1) // align_bits * align_bits
    padded = np.zeros(total, dtype=bool)
    padded[:bits.size] = bits
    return np.packbits(padded, bitorder="little")


# ---------------------------------------------------------------------------------------------------------
# the generated mask
# ---------------------------------------------------------------------------------------------------------

def _u64(name, v) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise _err(name, v, "must be an int")
    v = int(v)
    if not (-(1 << 63) <= v <= _M64):
        raise _err(name, v, "must fit in 64 bits")
    return v & _M64


def _split(c: np.ndarray):
    """uint64 array -> (low word, high word) uint32 arrays."""
    return (c & np.uint64(_M32)).astype(np.uint32), (c >> np.uint64(32)).astype(np.uint32)


def _bytes(words: np.ndarray) -> np.ndarray:
    """(4, ...) uint32 Philox words -> (..., 16) bytes, word by word, each least significant byte first."""
    w = np.moveaxis(words, 0, -1).astype("<u4")
    return np.ascontiguousarray(w).view(np.uint8)


def generate_keep_mask(seed, offset, keep_prob, shape, *, qlen=None, kvlen=None, source: str = "kernel") -> np.ndarray:
    """The keep mask (bool, ``shape`` = (B, N1, S1, S2)) the operator draws from ``seed`` / ``offset``.

    ``source="kernel"``: the Ascend 950 in-kernel generator; ``source="gen_mask"``: the explicit mask of
    ``StatelessDropOutGenMask`` (module docstring). ``keep_prob == 1`` keeps everything. With ``qlen`` /
    ``kvlen`` (TND) positions past a batch's lengths are False."""
    _source(source)
    kp = _keep_prob(keep_prob)
    seed_u, off_u = _u64("seed", seed), _u64("offset", offset)
    (b, n, s1, s2), ql, kl = _lengths(shape, qlen, kvlen)
    if kp >= 1.0:
        keep = np.zeros((b, n, s1, s2), dtype=bool)
        for i in range(b):
            keep[i, :, :ql[i], :kl[i]] = True
        return keep
    key = (seed_u & _M32, seed_u >> 32)
    if source == "gen_mask":
        return _gen_mask(key, off_u, kp, (b, n, s1, s2), ql, kl, qlen is not None)
    thr = np.uint8(keep_threshold_uint8(kp))
    off16 = np.uint64(((off_u + 15) >> 4) & _M64)
    keep = np.zeros((b, n, s1, s2), dtype=bool)
    boff16 = 0                                   # B_off(b) / 16
    for i in range(b):
        r1, r2 = int(ql[i]), int(kl[i])
        groups = (r2 + 15) // 16                 # counters per row = A_b / 16
        if r1 and r2 and n:
            rows = np.arange(n * r1, dtype=np.uint64)[:, None]
            part = np.uint64(boff16 * n) + rows * np.uint64(groups) + np.arange(groups, dtype=np.uint64)[None, :]
            ctr = part + off16                   # uint64, wraps like the chip's counter words 0/1
            lo, hi = _split(ctr)
            carry = (ctr < part).astype(np.uint32)
            words = philox4x32((lo, hi, carry, np.zeros_like(lo)), key, KERNEL_ROUNDS)
            rnd = _bytes(words).reshape(n * r1, groups * 16)[:, :r2]
            keep[i, :, :r1, :r2] = (rnd <= thr).reshape(n, r1, r2)
        boff16 += r1 * groups
    return keep


def _gen_mask(key, off_u, kp, dims, ql, kl, varlen) -> np.ndarray:
    b, n, s1, s2 = dims
    numels = int(n * int(np.sum(ql * kl)))
    blocks = (numels + 3) // 4
    m = np.arange(blocks, dtype=np.uint64)
    lo, hi = _split(m)
    words = philox4x32((lo, hi, np.uint32(off_u & _M32), np.uint32(off_u >> 32)), key, GEN_MASK_ROUNDS)
    x = np.moveaxis(words, 0, -1).reshape(-1)[:numels]
    inv = np.float32(2.0 ** -32)
    u = x.astype(np.float32) * inv + np.float32(2.0 ** -33)     # float32 arithmetic, as the kernel's vector ops
    bits = u < _gen_mask_prob(kp)
    packed = np.packbits(bits, bitorder="little")
    return unpack_drop_mask(packed, dims, qlen=ql if varlen else None, kvlen=kl if varlen else None)


# ---------------------------------------------------------------------------------------------------------
# what the forward returns
# ---------------------------------------------------------------------------------------------------------

def dropout_numels(call_or_b, n1=None, s1=None, s2=None, *, qlen=None, kvlen=None) -> int:
    """torch_npu's ``numels`` output: ``B·N1·S1·S2``, TND ``N1·Σ s1_b·s2_b``.

    Takes a normalised call (anything with ``n1``, ``qlen``, ``kvlen``: per-batch lengths, which covers
    every layout) or ``(b, n1, s1, s2)`` with optional per-batch ``qlen`` / ``kvlen``."""
    if n1 is None:
        call = call_or_b
        ql = np.asarray(call.qlen, dtype=np.int64)
        kl = np.asarray(call.kvlen, dtype=np.int64)
        return int(int(call.n1) * int(np.sum(ql * kl)))
    return mask_numels((call_or_b, n1, s1, s2), qlen=qlen, kvlen=kvlen)


def next_generator_offset(offset: int, *, round_up_to_4: bool = True) -> int:
    """The NPU generator's offset after one ``npu_fusion_attention`` call: ``philox_engine_inputs(10)`` adds
    10, rounded up to 12 by the NPUGeneratorImpl versions that keep the offset a multiple of 4."""
    inc = (GENERATOR_INCREMENT + 3) // 4 * 4 if round_up_to_4 else GENERATOR_INCREMENT
    return int(offset) + inc
