"""Tiling keys: encode named fields to the integer op_host hands the kernel, and decode them back.

Model
-----
Three encodings exist on the paths cvtile mirrors.

**arch22 FIA** (``FiaTilingNonQuant`` / ``FiaTilingNonQuantMla`` / empty tensor)
is decimal: ``mode * 10^17 + template * 10^15 + sum(digit_i * 10^i)`` with nine digits,
least significant first: q layout, q dtype, kv dtype, out dtype, origin dtype (= q),
flags (softmax broadcast 4 + paged 2 + flash decode 1), antiquant mode, kv layout,
and a last digit (tree mask 2, plus 1 for a CV 1:1 MLA). Dtype codes: fp16 0,
bf16 2, int8 3, int4 4. Layout codes: BNSD 0, BSH/BSND 1, paged NZ 2, TND 3
(MLA: q TND is 2), NTD 5. ``mode`` is 1 (2 for an MLA system prefix); template 3/4
is GQA high-performance/general, 5 MLA, 0 the empty-tensor key ``10^17 + 20``.

**legacy IFA** (``IFATiling``, when FIA routes to the old decode operator) is
decimal with a 10^16 mode: ``mode * 10^16 + perf * 10^15 + twelve digits``:
q layout, q, kv, out, origin dtype, flags (antiquant per-token 4 + paged 2 +
flash decode 1), antiquant mode, kv layout, AMLA mode, balance mode, CV 1:1, tree.

**arch35** uses the template-argument bit packing (least significant first):
in/out layout 8 bits, config 10, pse mode 4, quant mode 5, has mask 1, has rope 1,
kv layout 2, flash decode 1, empty tensor 1, KV prefix 1, S1 outer split 1,
refactored template 1. In/out layout: BNSD 0, BSH 1, TND 2, BNSD->BSND 3, NTD 4,
NTD->TND 5. Quant mode: antiquant per-channel 0, K per-channel V per-token 2,
K per-token 6, full quant per-block 17, Q per-token-head KV per-tensor 18, MXFP8
prefill 19 / decode 20, QK per-token-head V per-head 21, other full quant 30, no
quant 31. Pse mode: outer mul-add 0, outer add-mul 1, inner 2/3, none 9. KV layout:
contiguous 0, paged (old templates) 1, paged BBH 1, paged BNBD 2, paged NZ 3.

**arch22 split-fuse** (``FAInferTiling``, the TND "FAI" route) is decimal with a
base of ``5 * 10^18``: ``5 * 10^18 + mode * 10^17 + sum(digit_i * 10^i)`` with nine
digits, least significant first: mask (causal 3, band 5, pse "full" 6, none 0),
KV cache NZ, dtype (fp16 1, bf16 2), lse out, inner_precise 1 (low precision), q
layout (TND 2), an unused digit, paged cache, learnable sink; ``mode`` is 1 for
flash decode, 2 for the one-token decoding split, else 0.

**arch22 legacy PFA, TND branch** (``PromptFlashAttentionTiling::RunBigKernelTilingWithParams`` with a
TND-like layout, called by FIA's ``TilingProcess4PFA``) is decimal with a base of ``4 * 10^18`` (the
branch's ``3 * 10^18`` plus FIA's ``10^18`` for the PFA route), plus three digits: the template at 10^0
(value head dim <= 128: 3 without a mask tensor, 2 with one; above 128: 1 and 0), the query layout at
10^5 (its distance from ``TND`` in op_host's layout enum: TND 0, NTD_TND 2) and the paged cache at 10^7
(none 0, BBH / BNBD 1, NZ 2).

Invariants
----------
* ``decode(encode(fields)) == fields`` for every encoding (round trip; tests check it).
* Encoders reject a field outside its digit / bit width (ValueError).
"""

from __future__ import annotations

__all__ = ["ARCH22_DIGITS", "IFA_DIGITS", "ARCH35_FIELDS", "DTYPE_CODE", "encode_arch22", "decode_arch22",
           "encode_ifa", "decode_ifa", "encode_arch35", "decode_arch35", "decode_key", "UNCHECKED_KEY",
           "ARCH22_EMPTY_TENSOR_KEY", "FAI_DIGITS", "FAI_BASE", "encode_fai", "decode_fai", "PFA_TND_BASE",
           "PFA_TND_DIGITS", "encode_pfa_tnd", "decode_pfa_tnd"]

UNCHECKED_KEY = 18446744073709551615            # the UT corpus's "key not checked" marker (uint64 max)
ARCH22_EMPTY_TENSOR_KEY = 10 ** 17 + 20

#: dtype codes of the decimal keys
DTYPE_CODE = {"float16": 0, "bfloat16": 2, "int8": 3, "int4": 4}

ARCH22_DIGITS = ("q_layout", "q_dtype", "kv_dtype", "out_dtype", "origin_dtype", "flags", "antiquant_mode",
                 "kv_layout", "tail")
IFA_DIGITS = ("q_layout", "q_dtype", "kv_dtype", "out_dtype", "origin_dtype", "flags", "antiquant_mode",
              "kv_layout", "amla_mode", "balance_mode", "cv_1_1", "tree")

FAI_DIGITS = ("mask", "kv_nz", "dtype", "lse", "inner_low_prec", "q_layout", "unused", "paged", "sink")
FAI_BASE = 5 * 10 ** 18

#: (field, decimal position) of the legacy PFA TND-branch key
PFA_TND_DIGITS = (("template", 0), ("q_layout", 5), ("kv_cache", 7))
PFA_TND_BASE = 4 * 10 ** 18

#: (name, bit width), least significant first
ARCH35_FIELDS = (("inout_layout", 8), ("config", 10), ("pse_mode", 4), ("quant_mode", 5), ("has_mask", 1),
                 ("has_rope", 1), ("kv_layout", 2), ("fd", 1), ("empty_tensor", 1), ("kv_prefix", 1),
                 ("s1_outer_split", 1), ("refactored", 1))


def _digits_encode(names, fields: dict) -> int:
    value = 0
    for i, name in enumerate(names):
        d = int(fields.get(name, 0))
        if not 0 <= d <= 9:
            raise ValueError(f"tiling key digit {name}={d} is not a decimal digit")
        value += d * 10 ** i
    return value


def _digits_decode(names, value: int) -> dict:
    out = {}
    for i, name in enumerate(names):
        out[name] = (value // 10 ** i) % 10
    return out


def encode_arch22(fields: dict) -> int:
    """arch22 FIA key from ``mode``, ``template`` and the nine digits of :data:`ARCH22_DIGITS`."""
    mode, template = int(fields.get("mode", 1)), int(fields.get("template", 0))
    if not 0 <= template <= 9 or not 0 <= mode <= 183:
        raise ValueError(f"mode={mode} / template={template} out of range")
    return mode * 10 ** 17 + template * 10 ** 15 + _digits_encode(ARCH22_DIGITS, fields)


def decode_arch22(key: int) -> dict:
    out = {"mode": key // 10 ** 17, "template": (key // 10 ** 15) % 100}
    out.update(_digits_decode(ARCH22_DIGITS, key % 10 ** 9))
    flags = out["flags"]
    out.update(softmax_brcb=bool(flags & 4), paged=bool(flags & 2), fd=bool(flags & 1))
    return out


def encode_ifa(fields: dict) -> int:
    """Legacy IFA key from ``mode``, ``perf`` and the twelve digits of :data:`IFA_DIGITS`."""
    mode, perf = int(fields.get("mode", 1)), int(fields.get("perf", 0))
    if not 0 <= perf <= 9 or not 0 <= mode <= 1843:
        raise ValueError(f"mode={mode} / perf={perf} out of range")
    return mode * 10 ** 16 + perf * 10 ** 15 + _digits_encode(IFA_DIGITS, fields)


def decode_ifa(key: int) -> dict:
    out = {"mode": key // 10 ** 16, "perf": (key // 10 ** 15) % 10}
    out.update(_digits_decode(IFA_DIGITS, key % 10 ** 12))
    flags = out["flags"]
    out.update(antiquant_per_token=bool(flags & 4), paged=bool(flags & 2), fd=bool(flags & 1))
    return out


def encode_fai(fields: dict) -> int:
    """Split-fuse key from ``mode`` (0 regular, 1 flash decode, 2 decoding) and the digits of :data:`FAI_DIGITS`."""
    mode = int(fields.get("mode", 0))
    if not 0 <= mode <= 9:
        raise ValueError(f"mode={mode} out of range")
    return FAI_BASE + mode * 10 ** 17 + _digits_encode(FAI_DIGITS, fields)


def decode_fai(key: int) -> dict:
    out = {"base": key // 10 ** 18, "mode": (key // 10 ** 17) % 10}
    out.update(_digits_decode(FAI_DIGITS, key % 10 ** 9))
    out.update(fd=out["mode"] == 1, decoding=out["mode"] == 2)
    return out


def encode_pfa_tnd(fields: dict) -> int:
    """Legacy PFA TND-branch key from the digits of :data:`PFA_TND_DIGITS`."""
    value = PFA_TND_BASE
    for name, pos in PFA_TND_DIGITS:
        d = int(fields.get(name, 0))
        if not 0 <= d <= 9:
            raise ValueError(f"tiling key digit {name}={d} is not a decimal digit")
        value += d * 10 ** pos
    return value


def decode_pfa_tnd(key: int) -> dict:
    out = {"base": key // 10 ** 18}
    out.update({name: (key // 10 ** pos) % 10 for name, pos in PFA_TND_DIGITS})
    out.update(mask=out["template"] % 2 == 0, v_dim_le_128=out["template"] >= 2)
    return out


def encode_arch35(fields: dict) -> int:
    value, shift = 0, 0
    for name, width in ARCH35_FIELDS:
        v = int(fields.get(name, 0))
        if not 0 <= v < (1 << width):
            raise ValueError(f"tiling key field {name}={v} does not fit in {width} bits")
        value |= v << shift
        shift += width
    return value


def decode_arch35(key: int) -> dict:
    out, shift = {}, 0
    for name, width in ARCH35_FIELDS:
        out[name] = (key >> shift) & ((1 << width) - 1)
        shift += width
    for name in ("has_mask", "has_rope", "fd", "empty_tensor", "kv_prefix", "s1_outer_split", "refactored"):
        out[name] = bool(out[name])
    return out


def decode_key(key: int, arch: str, *, family: str | None = None) -> dict:
    """Decode a key of ``arch`` (``family`` "ifa" / "fai" / "pfa_tnd" picks the legacy IFA / split-fuse / legacy
    PFA TND-branch encoding on arch22; without it a key of 5 * 10^18 and up is read as split-fuse, one of
    4 * 10^18 and up as the PFA TND branch)."""
    if arch == "arch35":
        return decode_arch35(key)
    if family == "pfa_tnd" or (family is None and key // 10 ** 18 == 4):
        return decode_pfa_tnd(key)
    if family == "fai" or (family is None and key // 10 ** 18 == 5):
        return decode_fai(key)
    if family == "ifa" or (family is None and key // 10 ** 17 == 0 and key >= 10 ** 16):
        return decode_ifa(key)
    return decode_arch22(key)
