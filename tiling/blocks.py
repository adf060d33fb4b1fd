"""Block sizes of the arch22 (Atlas A2/A3) FIA templates: S2 base (sInner), M base, and their flags.

Model
-----
Every function here is a pure rule on explicit arguments and returns the value
plus the reason (a short text naming the op_host rule) so that ``FiaTiling``'s
``explain()`` can show it.

``FiaTilingNonQuant`` (GQA / generic, priority 29):

* template id (the key's perf digit): 3 = high-performance GQA when
  ``(D, rope D, Dv)`` is one of (128,0,128), (64,0,64), (192,64,128), (128,64,128)
  and there is no system prefix, pse or left padding; else 4 = general GQA;
* S2 base: TND/NTD 512; decode/MTP (S1 <= 16) ``{8192, 4096, 2048}[min(G // 5, 2)]``
  (the mm1 result of V1 is 32 KB of fp32 = 8192 values; larger G keeps the
  workspace under 32 MB); prefill 512. A compressed mask (sparse 2/3/4) caps it at
  1024. Paged attention rounds it down to a multiple of the block size when it is
  larger than the block and not a multiple. Finally it is clipped to S2 (S2 = 0 is
  tiled as 1024) and its aligned size is rounded up to 32 elements;
* M base (G*S1 rows per block): TND/NTD 512; decode by the aligned S2 base
  (<=512: 512, <=1024: 256, <=2048: 128, <=4096: 64, else 32); prefill 512;
* the softmax broadcast flag (key bit 4) is set when ``M base <= 128``.

``FiaTilingNonQuantMla`` (MLA D512 + rope 64, priority 9): S2 base 512 (same PA
rounding and clipping); M base 256, lowered to ``S1G / (lcm(B*N2, cores) / (B*N2))``
when ``B*N2`` does not divide the core count, all batches have the same length, the
quotient divides ``S1G`` and lands in [128, 256] (cores then get equal shares
without FD). The FD halving of the S2 base (S2 = 256 -> 128, 256 < S2 <= 512 ->
256) only applies once FD is known, and op_host computes the S2 base before the
split, so it never fires; it is kept as a documented no-op.

Invariants
----------
* ``s2_base >= 1`` and ``s2_base <= max(S2, 1)`` after clipping; ``m_base`` is a power of two in [32, 512]
  for the GQA template.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["BYTE_BLOCK_ELEMS", "align_up", "Arch22Blocks", "gqa_template_id", "gqa_s2_base", "gqa_m_base",
           "arch22_gqa_blocks", "mla_s2_base", "mla_m_base", "arch22_mla_blocks", "paged_round_down"]

BYTE_BLOCK_ELEMS = 32          # op_host aligns element counts to a 32-element "byte block" constant
TEMPLATE_HIGH_PERF_GQA = 3
TEMPLATE_GENERAL_GQA = 4
TEMPLATE_HIGH_PERF_MLA = 5
_HIGH_PERF_DIMS = {(128, 0, 128), (64, 0, 64), (192, 64, 128), (128, 64, 128)}


def align_up(value: int, to: int) -> int:
    return 0 if to == 0 else (value + to - 1) // to * to


@dataclass(frozen=True)
class Arch22Blocks:
    """The arch22 block decision and the reasons behind each part."""

    template_id: int
    s2_base: int
    s2_base_aligned: int
    m_base: int
    softmax_brcb: bool
    head_dim_aligned: int
    reasons: dict


def gqa_template_id(qk_dim: int, rope_dim: int, v_dim: int, *, prefix: bool, pse: bool,
                    left_padding: bool) -> tuple[int, str]:
    dims = (qk_dim, rope_dim, v_dim)
    if dims in _HIGH_PERF_DIMS and not (prefix or pse or left_padding):
        return TEMPLATE_HIGH_PERF_GQA, (f"(D, rope D, Dv) = {dims} is a high-performance GQA shape and no prefix/pse/"
                                        "left padding: template 3 (FiaTilingNonQuant::IsHighPerformanceTemplate)")
    why = "not one of (128,0,128),(64,0,64),(192,64,128),(128,64,128)" if dims not in _HIGH_PERF_DIMS else \
        "prefix / pse / left padding present"
    return TEMPLATE_GENERAL_GQA, f"(D, rope D, Dv) = {dims}: {why}: general GQA template 4 (FiaTilingNonQuant)"


def paged_round_down(s2_base: int, block_size: int) -> int:
    """PA: a base larger than the cache block and not a multiple of it is rounded down to a multiple."""
    if block_size and s2_base > block_size and s2_base % block_size:
        return s2_base // block_size * block_size
    return s2_base


def gqa_s2_base(*, tnd: bool, s1: int, g: int, s2: int, mask: bool, sparse_mode: int, paged: bool,
                block_size: int) -> tuple[int, str]:
    """S2 base (sInnerSize) of FiaTilingNonQuant, clipped to S2 (op_host ``CalcInnerSize``)."""
    if tnd:
        base, why = 512, "TND/NTD layout: sInner = 512"
    elif s1 <= 16:
        idx = min(g // 5, 2)
        base = (8192, 4096, 2048)[idx]
        why = f"S1={s1}<=16 decode: sInner = {{8192,4096,2048}}[min(G/5,2)={idx}] = {base} (FiaTilingNonQuant)"
    else:
        base, why = 512, f"S1={s1}>16 prefill: sInner = 512 (FiaTilingNonQuant)"
    if mask and sparse_mode in (2, 3, 4) and base > 1024:
        base = 1024
        why += f"; compressed mask (sparse {sparse_mode}) caps it at 1024"
    return _paged_round_and_clip(base, why, s2=s2, paged=paged, block_size=block_size)


def _paged_round_and_clip(base: int, why: str, *, s2: int, paged: bool, block_size: int) -> tuple[int, str]:
    """The S2 base's last two rules: a paged cache rounds it down to whole blocks, then it is clipped to S2
    (S2 = 0 is tiled as 1024)."""
    if paged:
        rounded = paged_round_down(base, block_size)
        if rounded != base:
            why += f"; PA block size {block_size} rounds it down to {rounded}"
            base = rounded
    s2_eff = s2 if s2 != 0 else 1024
    if base > s2_eff:
        why += f"; clipped to S2={s2_eff}" + (" (S2=0 is tiled as 1024)" if s2 == 0 else "")
        base = s2_eff
    return base, why


def gqa_m_base(*, tnd: bool, s1: int, s2_base_aligned: int) -> tuple[int, str]:
    """M base (mBaseSize, rows of G*S1 per block) of FiaTilingNonQuant (op_host ``CalcMBaseSize``)."""
    if tnd:
        return 512, "TND/NTD layout: M base = 512"
    if s1 > 16:
        return 512, f"S1={s1}>16 prefill: M base = 512"
    for limit, m in ((512, 512), (1024, 256), (2048, 128), (4096, 64)):
        if s2_base_aligned <= limit:
            return m, f"decode: aligned sInner {s2_base_aligned} <= {limit}: M base = {m} (FiaTilingNonQuant)"
    return 32, f"decode: aligned sInner {s2_base_aligned} > 4096: M base = 32 (FiaTilingNonQuant)"


def arch22_gqa_blocks(*, qk_dim: int, rope_dim: int, v_dim: int, tnd: bool, s1: int, g: int, s2: int, mask: bool,
                      sparse_mode: int, paged: bool, block_size: int, prefix: bool = False, pse: bool = False,
                      left_padding: bool = False) -> Arch22Blocks:
    tid, tid_why = gqa_template_id(qk_dim, rope_dim, v_dim, prefix=prefix, pse=pse, left_padding=left_padding)
    s2b, s2_why = gqa_s2_base(tnd=tnd, s1=s1, g=g, s2=s2, mask=mask, sparse_mode=sparse_mode, paged=paged,
                              block_size=block_size)
    s2a = align_up(s2b, BYTE_BLOCK_ELEMS)
    mb, m_why = gqa_m_base(tnd=tnd, s1=s1, s2_base_aligned=s2a)
    brcb = mb <= 128
    reasons = {"template_id": tid_why, "s2_base": s2_why, "m_base": m_why,
               "softmax_brcb": f"M base {mb} {'<=' if brcb else '>'} 128: softmax broadcast flag "
                               f"{'on' if brcb else 'off'} (key +4)"}
    return Arch22Blocks(tid, s2b, s2a, mb, brcb, align_up(qk_dim, BYTE_BLOCK_ELEMS), reasons)


def mla_s2_base(*, s2: int, paged: bool, block_size: int, fd: bool = False, tnd: bool = False) -> tuple[int, str]:
    """S2 base of FiaTilingNonQuantMla (512; the FD halving needs FD known first, see the module docstring)."""
    base, why = 512, "MLA: sInner = 512 (FiaTilingNonQuantMla)"
    if fd and not tnd:
        if s2 == 256:
            base, why = 128, "MLA FD with S2=256: sInner = 128"
        elif 256 < s2 <= 512:
            base, why = 256, "MLA FD with 256<S2<=512: sInner = 256"
    return _paged_round_and_clip(base, why, s2=s2, paged=paged, block_size=block_size)


def mla_m_base(*, batch: int, n2: int, s1: int, g: int, cores: int, same_seq: bool) -> tuple[int, str]:
    """M base of FiaTilingNonQuantMla: 256, or the share that balances cores without FD."""
    base = 256
    bn2, s1g = batch * n2, s1 * g
    if bn2 == 0 or cores == 0:
        return base, "MLA: M base = 256"
    if bn2 % cores == 0:
        return base, f"MLA: B*N2={bn2} divides {cores} cores: M base = 256"
    if not same_seq:
        return base, "MLA: batches differ in length: M base = 256"
    lcm = bn2 // math.gcd(bn2, cores) * cores
    split = lcm // bn2
    if split == 0 or s1g % split:
        return base, f"MLA: S1G={s1g} not divisible by lcm(B*N2,cores)/(B*N2)={split}: M base = 256"
    cand = s1g // split
    if cand > base or cand < 128:
        return base, f"MLA: balanced share S1G/{split}={cand} outside [128, 256]: M base = 256"
    return cand, (f"MLA: S1G={s1g} cut in lcm(B*N2,cores)/(B*N2)={split} equal shares: M base = {cand} "
                  "(balances cores without FD)")


def arch22_mla_blocks(*, qk_dim: int, s2: int, paged: bool, block_size: int, batch: int, n2: int, s1: int, g: int,
                      cores: int, same_seq: bool) -> Arch22Blocks:
    s2b, s2_why = mla_s2_base(s2=s2, paged=paged, block_size=block_size)
    mb, m_why = mla_m_base(batch=batch, n2=n2, s1=s1, g=g, cores=cores, same_seq=same_seq)
    reasons = {"template_id": "MLA D512 + rope 64: template 5 (FiaTilingNonQuantMla)", "s2_base": s2_why,
               "m_base": m_why}
    return Arch22Blocks(TEMPLATE_HIGH_PERF_MLA, s2b, align_up(s2b, BYTE_BLOCK_ELEMS), mb, False,
                        align_up(qk_dim, BYTE_BLOCK_ELEMS), reasons)
