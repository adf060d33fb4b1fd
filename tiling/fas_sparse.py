"""FlashAttentionScore sparse modes: op_host's normalisation, the kernel's S2 range per S1 block, the split loads.

Model
-----
op_host turns (sparse_mode, pre_tokens, next_tokens, prefix) into a *sparse type* (``SparseEnum``: ALL 0,
NONE 1, CAUSAL 3, BAND 4, PREFIX 5, BAND_COMPRESS 6, RIGHT_DOWN_CAUSAL 7, RIGHT_DOWN_CAUSAL_BAND 8,
BAND_LEFT_UP_CAUSAL 9), a left-up (pre, next) window, and the 128-aligned valid sizes the kernel cuts the
band with. Without an atten_mask every mode is ignored (full attention, type ALL).

Fixed-length layouts (``flash_attention_score_tiling_general.cpp``, ``FlashAttentionScoreTilingBase``:
``GetSparseInfo`` -> ``SparseModeProcess`` -> ``PretokenAndNexttokenAdjustment`` / ``SparseBandModeCheck``
/ ``GetPrefixNList``):

====  ==========================================================================================
mode  result
====  ==========================================================================================
0     pre >= S1 and next == 0: CAUSAL; pre >= S1 and next >= S2: ALL; else the band check
1     NONE (full; pre/next reset to int32 max when narrower than the matrix); modes 1/5/6 alike
2     CAUSAL (left-up: pre = S1, next = 0)
3     S1 == S2: CAUSAL; else BAND with pre = S1, next = S2 - S1 (right-down triangle), S1 > S2
      turns on invalid-line mode
4     pre/next counted from the bottom-right: pre += S1 - S2, next += S2 - S1, then the band check
5/6   PREFIX when prefix holds B values in [max(S2 - S1, 0), S2]; otherwise mode 5 falls back to
      ALL (the kernel then reads the full mask) and mode 6 fails
7/8   refused (varlen only)
====  ==========================================================================================

The band check: both >= 0 -> BAND (or ALL when the window covers the matrix); both < 0 -> error;
pre < 0 needs next >= |pre| and |pre| < S2; next < 0 needs pre >= |next| and |next| < S1. A band gets
``s1_valid = min(AlignUp(pre, 128), S1)`` and ``s2_valid = min(AlignUp(next, 128), S2)`` (a negative value
aligns towards 0 and is capped at 0), and pre < S1 - S2 or next < 0 turns on invalid-line mode
(``EnableBandInvalidLineImplMode``).

TND (``FlashAttentionVarLenScoreTiling``: ``GetSparseInfo`` -> ``SparseNoMaskModeCheck`` /
``CheckPretokenAndNexttoken`` / ``VarLenGetPrefixNList``) works per batch: mode 0 as above with per-batch
"invalid row" checks (next < 0 refused; kv + pre < q refused), 1 NONE, 2 CAUSAL, 3 RIGHT_DOWN_CAUSAL (each
q <= kv), 4 BAND_COMPRESS (pre >= 0, pre + next >= 0, q - next <= kv; pre >= S2max with next 0 is
RIGHT_DOWN_CAUSAL), 5 refused, 6 PREFIX (q > kv: 0 <= N <= kv; else kv - q <= N <= kv), 7
RIGHT_DOWN_CAUSAL_BAND (pre >= kv and next <= 0 at the band batch = the last non-empty one, q <= kv
everywhere), 8 BAND_LEFT_UP_CAUSAL (band batch = the first non-empty one; pre >= its kv; q - next <= kv).

S2 range (``GetS2LoopRange`` of ``flash_attention_score_s1s2_bn2gs1.h``, ``..._s1_bn2gs1.h``,
``..._s1s2_bn2gs1_sab.h``, ``flash_attention_var_len_score.h``, ``..._var_len_score_sab.h``): for the S1 block
``s1o`` of ``s1_base`` rows the kernel computes KV positions [start, end):

* CAUSAL ``[0, min((s1o+1)*s1_base, S2))``; BAND ``[max(s1o*s1_base - s1_valid, 0), min((s1o+1)*s1_base +
  s2_valid, S2))``, an empty band falling back to ``[0, min(S2, 128))`` (varlen: ``[0, kv)``); PREFIX
  ``[0, max((s1o+1)*s1_base - S1 + S2, N))`` rounded up to ``s2_base``; ALL/NONE ``[0, S2)``;
* varlen adds RIGHT_DOWN_CAUSAL ``end = (s1o+1)*s1_base + kv - q``, BAND_COMPRESS (the exact bottom-right
  band), the band batch of modes 7/8, and aligns start down / end up to 8.

Because a BAND (fixed-length modes 0/3/4, TND mode 0) is cut with 128-aligned pre/next, its range can include
blocks no element of which is visible (at most one 128-block on each side); the other types are exact at block
granularity for a full S1 block (a tail block's range follows its nominal rows, so it may list more when
``s1_base`` exceeds ``s2_base``). Rows with no visible key still get op_host's fallback range.

Split loads (the weights the core split balances; not the kernel ranges): ``InitSparseValidArray`` (fixed:
the estimated S2 block count per S1 block, 6 for an empty band row, 1 if S2 fits one block; prefix: per batch
``ceil(end / s2_base)``) and the varlen ``GetS2RealSize`` with its ``COF`` table.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import AclnnStatus, ParamError
from .fas_params import INT32_MAX, FasParams, FasView

__all__ = ["SparseInfo", "normalise_sparse", "fixed_s2_range", "varlen_s2_range", "fixed_loads", "prefix_loads",
           "varlen_loads", "varlen_load", "SPARSE_NAMES", "ALL", "NONE", "ANY", "CAUSAL", "BAND", "PREFIX", "BAND_COMPRESS",
           "RIGHT_DOWN_CAUSAL", "RIGHT_DOWN_CAUSAL_BAND", "BAND_LEFT_UP_CAUSAL", "align_up", "cdiv"]

ALL, NONE, ANY, CAUSAL, BAND, PREFIX, BAND_COMPRESS, RIGHT_DOWN_CAUSAL, RIGHT_DOWN_CAUSAL_BAND, \
    BAND_LEFT_UP_CAUSAL = range(10)
SPARSE_NAMES = ("ALL", "NONE", "ANY", "CAUSAL", "BAND", "PREFIX", "BAND_COMPRESS", "RIGHT_DOWN_CAUSAL",
                "RIGHT_DOWN_CAUSAL_BAND", "BAND_LEFT_UP_CAUSAL")
_BLOCK = 128                    # HIGH_PERF_BLOCK_SIZE: the alignment of the band's valid sizes
_INVALID_ROW_LOAD = 6           # INVALID_ROW_SPARSE_RATIO
_COF = (256, 384, 512, 640, 768, 896, 960, 1024)   # the varlen load table for the S2 remainder per 128
_GENERAL = "flash_attention_score_tiling_general.cpp"
_TILING = AclnnStatus.INNER_TILING_ERROR


def align_up(x: int, a: int) -> int:
    """op_host ``AlignUp``: a negative value rounds towards zero."""
    if x < 0:
        return -((-x) // a) * a
    return -(-x // a) * a


def cdiv(a: int, b: int) -> int:
    """op_host ``CeilDivision`` with C++ truncating division (0 for b == 0)."""
    if b == 0:
        return 0
    n = a + b - 1
    q = abs(n) // abs(b)
    return q if (n >= 0) == (b > 0) else -q


@dataclass(frozen=True)
class SparseInfo:
    """op_host's normalised sparse state (see the module doc)."""

    sparse_type: int
    pre: int
    next: int
    s1_valid: int
    s2_valid: int
    invalid_line: bool = False
    prefix: tuple | None = None
    band_index: int = -1
    rule: str = ""

    @property
    def name(self) -> str:
        return SPARSE_NAMES[self.sparse_type]


def _err(param, value, rule, fn):
    return ParamError(param, value, f"{rule} [{_GENERAL} {fn}]", status=_TILING, checker="sparse")


def normalise_sparse(p: FasParams, v: FasView) -> SparseInfo:
    """The sparse type and window op_host derives (raises ``ParamError`` where op_host fails)."""
    pre, nxt = int(p.pre_tokens), int(p.next_tokens)
    if not p.has_mask:
        return SparseInfo(ALL, pre, nxt, pre, nxt, rule="no atten_mask: sparse_mode, pre_tokens and next_tokens "
                          "are ignored (GetSparseInfo returns before reading them)")
    if v.tnd:
        return _varlen(p, v, pre, nxt)
    return _fixed(p, v, pre, nxt)


# ---- fixed-length layouts ------------------------------------------------------------------------------------
def _fixed(p: FasParams, v: FasView, pre: int, nxt: int) -> SparseInfo:
    s1, s2, mode = v.s1, v.s2, int(p.sparse_mode)
    if mode == 0:
        if pre >= s1 and nxt == 0:
            return SparseInfo(CAUSAL, s1, 0, s1, 0, rule="mode 0 with pre >= S1 and next == 0: CAUSAL")
        if pre >= s1 and nxt >= s2:
            return SparseInfo(ALL, pre, nxt, pre, nxt, rule="mode 0 window covers the matrix: ALL")
        return _band_check(pre, nxt, s1, s2, pre, nxt, "mode 0")
    if mode > 6:
        raise _err("sparse_mode", mode, f"modes 7/8 are varlen (TND) modes; the {v.layout} layout takes 0..6",
                   "SparseModeProcess")
    if mode in (1, 5, 6):
        if pre < s1 - 1 or nxt < s2 - 1:
            pre = nxt = INT32_MAX
        if mode == 1:
            return SparseInfo(NONE, pre, nxt, pre, nxt, rule="mode 1 (full mask): sparse type NONE, full S2 range "
                              "(PretokenAndNexttokenAdjustment)")
        return _fixed_prefix(p, v, pre, nxt, mode)
    if mode == 2:
        return SparseInfo(CAUSAL, s1, 0, s1, 0, rule="mode 2: left-up CAUSAL (pre = S1, next = 0)")
    if mode == 3:
        if s1 == s2:
            return SparseInfo(CAUSAL, s1, 0, s1, 0, rule="mode 3 with S1 == S2: CAUSAL")
        pre, nxt = s1, s2 - s1
        return SparseInfo(BAND, pre, nxt, pre, min(align_up(nxt, _BLOCK), s2), invalid_line=_invalid_line(pre, nxt,
                          s1, s2), rule=f"mode 3 with S1 != S2: BAND pre = S1 = {pre}, next = S2 - S1 = {nxt} "
                          f"(right-down triangle)")
    # mode 4: counted from the bottom-right vertex
    if s1 != s2:
        pre, nxt = pre + s1 - s2, nxt + s2 - s1
    return _band_check(pre, nxt, s1, s2, int(p.pre_tokens), int(p.next_tokens), "mode 4")


def _invalid_line(pre: int, nxt: int, s1: int, s2: int) -> bool:
    return pre < s1 - s2 or nxt < 0


def _band_check(pre: int, nxt: int, s1: int, s2: int, pre0: int, nxt0: int, what: str) -> SparseInfo:
    fn = "SparseBandModeCheck"
    if pre >= 0 and nxt >= 0:
        if pre >= s1 and nxt >= s2:
            return SparseInfo(ALL, pre, nxt, pre, nxt, rule=f"{what}: the window (pre {pre}, next {nxt}) covers "
                              f"the matrix: ALL")
        return SparseInfo(BAND, pre, nxt, min(align_up(pre, _BLOCK), s1), min(align_up(nxt, _BLOCK), s2),
                          invalid_line=_invalid_line(pre, nxt, s1, s2), rule=f"{what}: BAND (left-up pre {pre}, "
                          f"next {nxt})")
    if pre < 0 and nxt < 0:
        raise _err("pre_tockens", pre0, f"{what}: pre_tokens and next_tokens (next_tockens={nxt0}) are both "
                   f"negative: the band has no visible block", fn)
    if pre < 0:
        if nxt >= -pre and -pre < s2:
            return SparseInfo(BAND, pre, nxt, min(align_up(pre, _BLOCK), 0), min(align_up(nxt, _BLOCK), s2),
                              invalid_line=_invalid_line(pre, nxt, s1, s2), rule=f"{what}: BAND with negative "
                              f"pre {pre}")
        raise _err("pre_tockens", pre0, f"{what}: a negative pre_tokens needs next_tokens >= |pre| and |pre| < S2 "
                   f"(left-up pre {pre}, next {nxt}, S2 {s2}): the band and the matrix do not overlap", fn)
    if -nxt <= pre and -nxt < s1:
        return SparseInfo(BAND, pre, nxt, min(align_up(pre, _BLOCK), s1), min(align_up(nxt, _BLOCK), 0),
                          invalid_line=_invalid_line(pre, nxt, s1, s2), rule=f"{what}: BAND with negative next {nxt}")
    raise _err("next_tockens", nxt0, f"{what}: a negative next_tokens needs pre_tokens >= |next| and |next| < S1 "
               f"(left-up pre {pre}, next {nxt}, S1 {s1}): the band and the matrix do not overlap", fn)


def _fixed_prefix(p: FasParams, v: FasView, pre: int, nxt: int, mode: int) -> SparseInfo:
    fn = "GetPrefixNList"
    s1, s2 = v.s1, v.s2
    reason = None
    if p.prefix is None:
        reason = "prefix is missing"
    elif len(p.prefix) != v.b:
        reason = f"prefix must hold B = {v.b} values, got {len(p.prefix)}"
    else:
        lo = max(s2 - s1, 0)
        for i, n in enumerate(p.prefix):
            if not lo <= int(n) <= s2:
                reason = f"batch {i}: prefix N = {n} must be in [{lo}, {s2}]"
                break
    if reason is not None:
        if mode == 6:
            raise _err("prefix", p.prefix, f"sparse_mode 6: {reason}", fn)
        return SparseInfo(ALL, pre, nxt, pre, nxt, rule=f"mode 5: {reason}: op_host falls back to ALL (full S2 "
                          f"range; the kernel reads the full mask) [{fn}]")
    pfx = tuple(int(n) for n in p.prefix)
    inv = s1 > s2 and any(n == 0 for n in pfx)
    return SparseInfo(PREFIX, pre, nxt, pre, nxt, invalid_line=inv, prefix=pfx,
                      rule=f"mode {mode}: PREFIX with N = {pfx if len(pfx) <= 8 else str(len(pfx)) + ' values'}")


# ---- TND -----------------------------------------------------------------------------------------------------
def _varlen(p: FasParams, v: FasView, pre: int, nxt: int) -> SparseInfo:
    s1, s2, mode = v.s1, v.s2, int(p.sparse_mode)
    q, kv = v.q_lens, v.kv_lens
    if mode == 0:
        if pre >= s1 and nxt == 0:
            return SparseInfo(CAUSAL, s1, 0, s1, 0, rule="TND mode 0 with pre >= max S1 and next == 0: CAUSAL")
        if pre >= s1 and nxt >= s2:
            return SparseInfo(ALL, pre, nxt, pre, nxt, rule="TND mode 0 window covers every batch: ALL")
        fn = "SparseNoMaskModeCheck"
        if nxt < 0:
            raise _err("next_tockens", nxt, "TND mode 0: next_tokens must be >= 0 (a negative one leaves rows "
                       "without a visible key)", fn)
        for i in range(v.b):
            if q[i] and kv[i] and kv[i] + pre < q[i]:
                raise _err("pre_tockens", pre, f"TND mode 0: batch {i} (S1 {q[i]}, S2 {kv[i]}) has rows without a "
                           f"visible key (needs S2 + pre >= S1)", fn)
        if pre < 0 and nxt < -pre:
            raise _err("pre_tockens", pre, f"TND mode 0: a negative pre_tokens needs next_tokens >= |pre| "
                       f"(next {nxt})", fn)
        s1v = min(align_up(pre, _BLOCK), s1) if pre >= 0 else min(align_up(pre, _BLOCK), 0)
        return SparseInfo(BAND, pre, nxt, s1v, min(align_up(nxt, _BLOCK), s2),
                          rule=f"TND mode 0: BAND (left-up pre {pre}, next {nxt})")
    fn = "CheckPretokenAndNexttoken"
    if mode == 5:
        raise _err("sparse_mode", 5, "the varlen (TND) layout does not support mode 5 (use 6)",
                   "VarLenSparseModeProcess")
    if mode == 1:
        if pre < s1 - 1 or nxt < s2 - 1:
            pre = nxt = INT32_MAX
        return SparseInfo(NONE, pre, nxt, pre, nxt, rule="TND mode 1 (full mask): NONE")
    if mode == 2:
        return SparseInfo(CAUSAL, s1, 0, s1, 0, rule="TND mode 2: left-up CAUSAL per batch")
    if mode == 3:
        for i in range(v.b):
            if q[i] > kv[i]:
                raise _err("actual_seq_qlen", q[i], f"TND mode 3: batch {i} has S1 {q[i]} > S2 {kv[i]} (rows "
                           f"without a visible key)", fn)
        return SparseInfo(RIGHT_DOWN_CAUSAL, s2, 0, s2, 0, rule="TND mode 3: RIGHT_DOWN_CAUSAL per batch")
    if mode == 4:
        if pre < 0:
            raise _err("pre_tockens", pre, "TND mode 4: pre_tokens must be >= 0", fn)
        if nxt < 0 and pre + nxt < 0:
            raise _err("next_tockens", nxt, f"TND mode 4: pre + next must be >= 0 (pre {pre}): the band is empty", fn)
        for i in range(v.b):
            if q[i] and kv[i] and q[i] - nxt > kv[i]:
                raise _err("next_tockens", nxt, f"TND mode 4: batch {i} (S1 {q[i]}, S2 {kv[i]}) has rows without a "
                           f"visible key (needs S1 - next <= S2)", fn)
        if pre >= s2 and nxt == 0:
            return SparseInfo(RIGHT_DOWN_CAUSAL, s2, 0, s2, 0, rule="TND mode 4 with pre >= max S2 and next 0: "
                              "RIGHT_DOWN_CAUSAL")
        return SparseInfo(BAND_COMPRESS, pre, nxt, pre, nxt, rule=f"TND mode 4: BAND_COMPRESS (bottom-right pre "
                          f"{pre}, next {nxt}) per batch")
    if mode == 6:
        return _varlen_prefix(p, v, pre, nxt)
    nonempty = [i for i in range(v.b) if q[i] != 0]
    if mode == 7:
        bi = nonempty[-1] if nonempty else v.b - 1
        if pre < kv[bi] or nxt > 0:
            raise _err("pre_tockens" if pre < kv[bi] else "next_tockens", pre if pre < kv[bi] else nxt,
                       f"TND mode 7: needs pre_tokens >= S2 of the band batch {bi} ({kv[bi]}) and next_tokens <= 0 "
                       f"(pre {pre}, next {nxt})", fn)
        for i in range(v.b):
            if q[i] and kv[i] and q[i] > kv[i]:
                raise _err("actual_seq_qlen", q[i], f"TND mode 7: batch {i} has S1 {q[i]} > S2 {kv[i]}", fn)
            if i == bi and q[i] and kv[i] and q[i] - nxt > kv[i]:
                raise _err("next_tockens", nxt, f"TND mode 7: the band batch {i} has rows without a visible key "
                           f"(S1 {q[i]} - next > S2 {kv[i]})", fn)
        return SparseInfo(RIGHT_DOWN_CAUSAL_BAND, pre, nxt, pre, nxt, band_index=bi,
                          rule=f"TND mode 7: RIGHT_DOWN_CAUSAL per batch, the band at batch {bi} (the last non-empty)")
    bi = nonempty[0] if nonempty else 0
    if q[bi] - nxt > kv[bi]:
        raise _err("next_tockens", nxt, f"TND mode 8: the band batch {bi} (S1 {q[bi]}, S2 {kv[bi]}) has rows "
                   f"without a visible key (needs S1 - next <= S2)", fn)
    if pre < kv[bi]:
        raise _err("pre_tockens", pre, f"TND mode 8: pre_tokens must be >= S2 of the band batch {bi} ({kv[bi]})", fn)
    return SparseInfo(BAND_LEFT_UP_CAUSAL, pre, nxt, pre, nxt, band_index=bi,
                      rule=f"TND mode 8: left-up CAUSAL per batch, the band at batch {bi} (the first non-empty)")


def _varlen_prefix(p: FasParams, v: FasView, pre: int, nxt: int) -> SparseInfo:
    fn = "VarLenGetPrefixNList"
    if p.prefix is None:
        raise _err("prefix", None, "TND sparse_mode 6 needs prefix (one N per batch)", fn)
    if len(p.prefix) != v.b:
        raise _err("prefix", p.prefix, f"must hold B = {v.b} values, got {len(p.prefix)}", fn)
    inv = False
    for i, n in enumerate(p.prefix):
        q, kv, n = v.q_lens[i], v.kv_lens[i], int(n)
        lo = 0 if q > kv else kv - q
        if not lo <= n <= kv:
            raise _err("prefix", tuple(p.prefix), f"batch {i}: N = {n} must be in [{lo}, {kv}] (S1 {q}, S2 {kv})", fn)
        inv = inv or (q > kv and n == 0)
    pfx = tuple(int(n) for n in p.prefix)
    return SparseInfo(PREFIX, pre, nxt, pre, nxt, invalid_line=inv, prefix=pfx, rule="TND mode 6: PREFIX per batch")


# ---- the kernel's S2 range -------------------------------------------------------------------------------------
def fixed_s2_range(sp: SparseInfo, s1o: int, s1_base: int, s2_base: int, s1: int, s2: int, b: int, *,
                   floor8: bool = False) -> tuple[int, int]:
    """KV positions [start, end) a fixed-length kernel computes for S1 block ``s1o`` of batch ``b`` (unpaired;
    ``floor8`` aligns a band's start down to 8, as S1Bn2gs1 does with a bit-mode drop mask)."""
    t = sp.sparse_type
    if t == CAUSAL:
        return 0, min((s1o + 1) * s1_base, s2)
    if t not in (BAND, PREFIX):
        return 0, s2
    if t == BAND:
        start = max(s1o * s1_base - sp.s1_valid, 0)
        start = start // 8 * 8 if floor8 else start
        end = min((s1o + 1) * s1_base + sp.s2_valid, s2)
        return (start, end) if end > start else (0, min(s2, 128))
    end = max(s1_base * (s1o + 1) - s1 + s2, sp.prefix[b])
    return 0, min(128 if end <= 0 else -(-end // s2_base) * s2_base, s2)


def varlen_s2_range(sp: SparseInfo, s1o: int, s1_base: int, q: int, kv: int, b: int) -> tuple[int, int]:
    """KV positions [start, end) of batch ``b`` (lengths q, kv) the varlen kernel computes for S1 block ``s1o``."""
    t, row_end = sp.sparse_type, (s1o + 1) * s1_base
    start, end = 0, kv
    if t == CAUSAL:
        end = min(row_end, kv)
    elif t == RIGHT_DOWN_CAUSAL:
        end = min(row_end + kv - q, kv)
    elif t == BAND:
        start, end = max(s1o * s1_base - sp.s1_valid, 0), min(row_end + sp.s2_valid, kv)
        if end - start <= 0:
            start, end = 0, kv
    elif t == BAND_COMPRESS:
        start = max(s1o * s1_base - q + max(kv - sp.pre, 0), 0)
        end = min(row_end + kv - max(q - sp.next, 0), kv)
        if end - start <= 0:
            start, end = 0, kv
    elif t == RIGHT_DOWN_CAUSAL_BAND:
        end = min(row_end + kv + (sp.next if b == sp.band_index else 0) - q, kv)
    elif t == BAND_LEFT_UP_CAUSAL:
        end = min(row_end + kv - max(q - sp.next, 0), kv) if b == sp.band_index else min(row_end, kv)
    elif t == PREFIX:
        end = min(max(row_end - q + kv, sp.prefix[b]), kv)
        if end <= 0:
            start, end = 0, kv
    start = start // 8 * 8
    end = min(-(-end // 8) * 8, kv)
    return start, end


# ---- the loads the core split balances ------------------------------------------------------------------------
def fixed_loads(sp: SparseInfo, s1_outer: int, s1_basic: int, s2_basic: int, s2: int) -> tuple[list[int], int]:
    """``InitSparseValidArray`` (non-prefix): the S2 block estimate per S1 block and ``maxValidS2Len``."""
    s2_blocks = cdiv(s2, s2_basic)
    v1, v2 = cdiv(sp.s1_valid, s1_basic), cdiv(sp.s2_valid, s2_basic)
    empty = 1 if s2 <= s2_basic else _INVALID_ROW_LOAD
    out, max_len = [], 0
    for i in range(s1_outer):
        reduce = 0 if i < v1 else cdiv((i + 1) * s1_basic - sp.s1_valid, s2_basic) - 1
        add = min(s2_blocks - v2, cdiv((i + 1) * s1_basic + sp.s2_valid, s2_basic) - v2)
        n = v2 - reduce + add
        out.append(n if n > 0 else empty)
        max_len = max(max_len, out[-1] * s1_basic)
    return out, max_len


def prefix_loads(sp: SparseInfo, b: int, s1_outer: int, s1_base: int, s2_basic: int, s1: int, s2: int) -> list[int]:
    """``InitSparseValidArray`` (prefix) for batch ``b``: ``ceil(end / s2_basic)`` per S1 block."""
    out = []
    for i in range(s1_outer):
        ignored = max(s1 - s1_base * (i + 1), 0)
        if s2 > ignored:
            end = max(s2 - ignored, sp.prefix[b])
        else:
            end = min(s2, sp.prefix[b])
        out.append(cdiv(min(end, s2), s2_basic))
    return out


def _varlen_real_size(sp: SparseInfo, s1_basic: int, s2_max: int, q: int, kv: int, b: int, s1o: int) -> int:
    t = sp.sparse_type
    size = s2_max
    if t == CAUSAL:
        size = s1_basic * (s1o + 1)
    elif t == PREFIX:
        size = max(s1_basic * (s1o + 1) - q + kv, sp.prefix[b])
    elif t == BAND_COMPRESS:
        start = max(s1o * s1_basic - q + max(kv - sp.pre, 0), 0)
        end = min((s1o + 1) * s1_basic + kv - max(q - sp.next, 0), kv)
        if end - start <= 0:
            start, end = 0, kv
        size = end - start
    return min(size, kv)


def varlen_load(size: int) -> int:
    """The load of one S1 block that sees ``size`` KV positions in the varlen splits (the FAS and the legacy PFA
    ``InitSparseValidArray``): the whole 1024s, plus the ``COF`` entry of the remainder counted in 128s."""
    rem = size % 1024
    return size // 1024 * 1024 + (_COF[cdiv(rem, 128) - 1] if rem > 0 else 0)


def varlen_loads(sp: SparseInfo, v: FasView, s1_basic: int) -> list[int]:
    """The varlen ``InitSparseValidArray``: one load per (batch, kv head, group, S1 block), batch-major."""
    out = []
    n2g = v.n2 * v.g
    for b in range(v.b):
        q, kv = v.q_lens[b], v.kv_lens[b]
        row = []
        for j in range(cdiv(q, s1_basic)):
            row.append(varlen_load(_varlen_real_size(sp, s1_basic, v.s2, q, kv, b, j)))
        out.extend(row * n2g)
    return out
