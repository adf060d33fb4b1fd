"""Flash-decode (FD) rules of the operators that decide FD *before* splitting: legacy IFA and the arch35 catch-all.

Model
-----
The new FIA templates decide FD as a by-product of the core split (a row split
across cores, see :mod:`.split_core`). Two older paths decide it up front from the
shape and then cut every ``(b, n2)``'s KV range into ``kv_splits`` equal parts,
one part per core:

**Legacy IFA** (``IFATiling``, arch22 decode routed to the old operator):

* perf mode: KV in NZ without rope -> 6 (cube-view DD); rope -> 5 (MLA, an NZ cache too); fp16 q/kv/out with no
  PA, no prefix, G == 1 and D <= 512 -> 1 (all-vector); G <= 16, D == 128, no
  prefix, not high precision, ``B*N2*ceil(max S2 / 2048) > 128`` and a paged BNSD
  fp16/bf16 (or int8 per-channel) cache -> 3 (cube-view); else 0 (normal), which
  becomes 2 (C1V1) when there is no FD, no prefix and ``B*N2*2 <= vector cores``.
  Split units are vector cores for modes 0/1/2, cube cores for 3/5/6;
* FD is off for paged attention with ``max S2 <= 1024`` (not MLA), rope with S1 > 1
  or G > 128, and GQA MTP (``gqaMtpFlag_``: 1 < S1 <= 16 without rope, whatever the cache
  layout; an NZ cache with S1 1 may take FD); otherwise it needs ``B*N2 < r * cores``
  (``<=`` and r = 0.5 for the cube-view modes, r = 0.5 for all-vector, else 0.4)
  and either G == 1 or ``max S2 >= 2048``;
* KV splits (``SplitBNS``): ``cores // (B*N2)``, decreased while
  ``max S2 / splits < 512``; used cores ``B*N2*splits``; each split is
  ``ceil(S2 / splits)`` (aligned up to the PA block size, to 2 for int4);
* S2 base (``CalcInnerSize``): 8192, or ``{8192,4096,2048}[min(G/5,2)]`` without
  antiquant; antiquant with G > 1: 2048 (cube view) or 1024; MLA 512 (1024 with
  antiquant; an FD part of 256 positions 128, of 257-512 256, not for TND); PA rounds
  down to a block multiple; clipped to the (split) length;
* without FD (``SplitBN``): ``B*N2*outer`` units over the cores, an even split
  (the first ``units % cores`` cores take one more; MLA first lowers the cores to
  ``ceil(units / ceil(units / cube cores))``) when lengths are equal or units <= cores, else a load balance over per-unit KV lengths (empty units weigh 1,
  antiquant at least 1024).

**arch35 catch-all** (``FusedInferAttentionScoreTilingImpl``): FD only for an IFA
problem without PFA merge; non-quant needs S1 == 1, no rope, ``max S2 >= 256``;
antiquant needs no prefix and ``max S2 >= 2 * sInner``; then ``loops = B*N2*ceil(G/sOuter)
< 0.4 * cube cores`` and (G == 1 or ``max S2 >= 2048``). KV splits: ``cube cores //
(B*N2*(G + sOuter - 1) // sOuter)``, decreased while ``S2 / splits < max(256, sInner)``.

Invariants
----------
* ``kv_splits >= 1``; with FD off the split count is 1.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["IFA_PERF_NORMAL", "IFA_PERF_ALL_VEC", "IFA_PERF_C1V1", "IFA_PERF_CUBE_VIEW", "IFA_PERF_MLA",
           "IFA_PERF_DD", "IfaPlan", "ifa_gqa_flags", "ifa_perf_mode", "ifa_is_flash_decode", "ifa_kv_splits", "ifa_s_inner",
           "ifa_split_bn", "impl_flash_decode", "impl_kv_splits"]

IFA_PERF_NORMAL, IFA_PERF_ALL_VEC, IFA_PERF_C1V1, IFA_PERF_CUBE_VIEW, IFA_PERF_MLA, IFA_PERF_DD = 0, 1, 2, 3, 5, 6
_CUBE_VIEW_MODES = (IFA_PERF_CUBE_VIEW, IFA_PERF_MLA, IFA_PERF_DD)
MAX_SPLIT_SIZE = 8192
IFA_MAX_CORES = 50


@dataclass(frozen=True)
class IfaPlan:
    perf_mode: int
    cores: int              # split units: vector or cube cores
    fd: bool
    kv_splits: int
    split_len: int          # KV positions per split (the whole length without FD)
    s_inner: int
    used_cores: int
    unit_starts: tuple      # without FD: first unit of each used core
    reasons: dict


def ifa_gqa_flags(*, kv_nz: bool, rope: bool, s1: int) -> tuple[bool, bool]:
    """(``gqaKvNZFlag_``, ``gqaMtpFlag_``) of ``IFATiling::GetRopeAndGqaFlag``: a 5-D (NZ) cache without rope,
    and a query length in (1, 16] without rope (the query's S dim; T for TND). Rope (MLA) sets neither."""
    return kv_nz and not rope, 1 < s1 <= 16 and not rope


def ifa_perf_mode(*, kv_nz: bool, rope: bool, q_dtype: str, kv_dtype: str, out_dtype: str, paged: bool,
                  prefix: bool, g: int, d: int, batch: int, n2: int, max_s2: int, inner_precise: int,
                  layout: str, antiquant: bool = False, antiquant_per_channel: bool = False) -> tuple[int, str]:
    """``IFATiling::SetupPerfMode`` (A2/A3). ``kv_nz`` is the cache's NZ layout; upstream tests its GQA KV-NZ
    flag, which is set only without rope (:func:`ifa_gqa_flags`), so MLA with an NZ cache is mode 5."""
    gqa_kv_nz, _ = ifa_gqa_flags(kv_nz=kv_nz, rope=rope, s1=0)
    if gqa_kv_nz:
        return IFA_PERF_DD, "KV in NZ without rope (GQA KV NZ): cube-view DD mode 6"
    if rope:
        return IFA_PERF_MLA, "rope (MLA): cube-view MLA mode 5" + (" (an NZ cache too)" if kv_nz else "")
    if (not paged and not prefix and g == 1 and d <= 512 and q_dtype == kv_dtype == out_dtype == "float16"):
        return IFA_PERF_ALL_VEC, "fp16 q/kv/out, no PA/prefix, G == 1, D <= 512: all-vector mode 1"
    if _cube_view(prefix=prefix, g=g, d=d, batch=batch, n2=n2, max_s2=max_s2, inner_precise=inner_precise,
                  layout=layout, paged=paged, q_dtype=q_dtype, kv_dtype=kv_dtype, antiquant=antiquant,
                  antiquant_per_channel=antiquant_per_channel):
        return IFA_PERF_CUBE_VIEW, "G <= 16, D == 128, paged BNSD and B*N2*ceil(S2/2048) > 128: cube-view mode 3"
    return IFA_PERF_NORMAL, "normal mode 0"


def _cube_view(*, prefix, g, d, batch, n2, max_s2, inner_precise, layout, paged, q_dtype, kv_dtype, antiquant,
               antiquant_per_channel) -> bool:
    if prefix or g > 16 or d != 128:
        return False
    if inner_precise == 0:                       # high precision: no ND2NZ copy path
        return False
    if layout in ("BSH", "BSND") and d * n2 >= 65536:
        return False
    if batch * n2 * ((max_s2 + 2047) // 2048) <= 128:
        return False
    if antiquant and kv_dtype == "int4":
        return False
    if paged and layout == "BNSD":
        quant_ok = antiquant and antiquant_per_channel and q_dtype in ("float16", "bfloat16") and kv_dtype == "int8"
        plain_ok = q_dtype == kv_dtype and q_dtype in ("float16", "bfloat16")
        return quant_ok or plain_ok
    return False


def ifa_is_flash_decode(*, cores: int, perf_mode: int, batch: int, n2: int, g: int, s1: int, max_s2: int,
                        paged: bool, rope: bool, gqa_mtp: bool) -> tuple[bool, str]:
    """op_host ``IsFlashDecode`` / ``CheckCoreOkFlag`` of the legacy IFA tiling (A2/A3)."""
    if paged and perf_mode != IFA_PERF_MLA and max_s2 <= 1024:
        return False, f"paged attention with max S2 {max_s2} <= 1024: no FD"
    if rope and (s1 > 1 or g > 128):
        return False, "rope with S1 > 1 or G > 128: no FD"
    if gqa_mtp:
        return False, "GQA MTP: no FD"
    bn = batch * n2
    if perf_mode in _CUBE_VIEW_MODES:
        ratio, ok = 0.5, bn <= 0.5 * cores
        rel = "<="
    elif perf_mode == IFA_PERF_ALL_VEC:
        ratio, ok = 0.5, bn < 0.5 * cores
        rel = "<"
    else:
        ratio, ok = 0.4, bn < 0.4 * cores
        rel = "<"
    if not ok:
        return False, f"B*N2={bn} not {rel} {ratio}*{cores} cores: enough units, no FD"
    if g == 1:
        return True, f"B*N2={bn} {rel} {ratio}*{cores} cores and G == 1: FD"
    if max_s2 >= 2048:
        return True, f"B*N2={bn} {rel} {ratio}*{cores} cores and max S2 {max_s2} >= 2048: FD"
    return False, f"G={g} > 1 and max S2 {max_s2} < 2048: no FD"


def ifa_kv_splits(*, cores: int, batch: int, n2: int, max_s2: int, s2: int, paged: bool, block_size: int,
                  int4: bool = False, parts: int | None = None) -> tuple[int, int, str]:
    """(kv splits, positions per split, reason) of ``SplitBNS``; ``parts`` (the plan search's) replaces
    kvSplitPart, the positions per split following from it as from op_host's."""
    bn = batch * n2
    if parts is None:
        parts = max(cores // bn, 1) if bn else 1
        while max_s2 // parts < 512 and parts > 1:
            parts -= 1
        rule = f"kvSplitPart = {cores}//(B*N2={bn}) lowered while max S2 / parts < 512 -> {parts}"
    else:
        rule = f"kvSplitPart {parts} (plan search override)"
    length = (s2 + parts - 1) // parts
    if paged and block_size:
        length = (length + block_size - 1) // block_size * block_size
    if int4:
        length = (length + 1) // 2 * 2
    why = f"{rule}; {length} KV positions per split (SplitBNS)"
    return parts, length, why


def ifa_s_inner(*, seq: int, g: int, antiquant: bool, perf_mode: int, rope: bool, paged: bool, block_size: int,
                int4: bool = False, fd: bool = False, tnd: bool = False) -> tuple[int, str]:
    """S2 base of the legacy IFA tiling (``CalcInnerSize``) for a (split) KV length ``seq``; ``fd``: the length is
    a flash-decode part (MLA halves a part of 256-512 positions so that it takes two blocks, not for TND)."""
    if antiquant:
        if g > 1:
            base = 2048 if perf_mode == IFA_PERF_CUBE_VIEW else 1024
        else:
            base = 1024 if perf_mode == IFA_PERF_DD else MAX_SPLIT_SIZE
        why = f"antiquant G={g}: sInner {base}"
    else:
        base = (8192, 4096, 2048)[min(g // 5, 2)]
        why = f"sInner = {{8192,4096,2048}}[min(G/5,2)] = {base} (IFATiling::CalcInnerSize)"
    if rope:
        base = 1024 if antiquant else 512
        why = f"MLA: sInner {base}"
        if fd and not tnd and not antiquant and 256 <= seq <= 512:
            base = 128 if seq == 256 else 256
            why += f"; an FD part of {seq} positions takes two blocks: {base}"
    if paged and block_size and base % block_size:
        base = base // block_size * block_size
        why += f"; PA block {block_size} rounds it down to {base}"
    if seq and base > seq:
        base = seq
        why += f"; clipped to {seq}"
    if int4:
        base = (base + 1) // 2 * 2
    return max(base, 1), why


def ifa_split_bn(*, units: int, cores: int, loads: list | None, equal: bool, mla: bool = False,
                 aic: int = 0) -> tuple[int, tuple, int]:
    """(used cores, first unit of each core, cores split over) of ``SplitBN`` without FD. The even split
    (``SplitBN_V0``) of MLA launches as few cores as keep the most units per core: ``coreNum_`` becomes
    ``ceil(units / ceil(units / aic))``, which the workspace then counts."""
    if loads is None or equal or units <= cores:
        if mla and aic:
            per = -(-units // aic)
            cores = -(-units // per)
        former = units % cores
        big = units // cores + (1 if former else 0)
        small = big - 1 if former else big
        used = min(units, cores)
        starts = []
        for i in range(used):
            starts.append(big * i if i < former else former * big + small * (i - former))
        return used, tuple(starts), cores
    starts = _balanced_starts(loads, units, cores, -(-units // cores))
    used = cores
    return used, tuple(s for s in starts[:used]), cores


def _accumulate(loads, starts, total, n):
    out = [0] * n
    for i in range(n):
        s = starts[i]
        e = starts[i + 1] if i + 1 < n else total
        if s < total:
            out[i] = sum(loads[s:e])
        else:
            break
    return out


def _balance_pass(loads, total, n, value, starts) -> bool:
    best = max(value)
    for i in range(1, n):
        s = starts[i]
        if 0 < s < total and value[i - 1] + loads[s] < best:
            value[i - 1] += loads[s]
            value[i] -= loads[s]
            starts[i] += 1
        elif s == total:
            break
    mid = max(value)
    for i in range(n - 1, 0, -1):
        s = starts[i]
        if s == total:
            if starts[i - 1] == total:
                continue
            value[i - 1] -= loads[s - 1]
            value[i] = loads[s - 1]
            starts[i] -= 1
        elif s > 0:
            if value[i] + loads[s - 1] >= mid:
                continue
            value[i - 1] -= loads[s - 1]
            value[i] += loads[s - 1]
            starts[i] -= 1
        else:
            break
    return max(value) < best


def _balanced_starts(loads, total, n, factor):
    even = [min(i * factor, total) for i in range(IFA_MAX_CORES)]
    even_val = _accumulate(loads, even, total, n)
    remaining = sum(loads)
    avg = -(-remaining // n)
    starts = [total] * IFA_MAX_CORES
    starts[0] = 0
    for i in range(1, IFA_MAX_CORES):
        s = starts[i - 1]
        acc = 0
        starts[i] = s
        while acc < avg and starts[i] < total:
            acc += loads[starts[i]]
            starts[i] += 1
        if s + 1 < starts[i]:
            redo = acc - loads[starts[i] - 1]
            if acc - avg > avg - redo:
                starts[i] -= 1
                acc = redo
            remaining -= acc
            left = n - i
            avg = -(-remaining // left) if left > 0 else remaining
    val = _accumulate(loads, starts, total, n)
    while _balance_pass(loads, total, n, val, starts):
        pass
    if max(even_val) > max(val):
        return starts
    return even


def impl_flash_decode(*, ifa: bool, pfa_merge: bool, antiquant: bool, prefix: bool, s1: int, rope: bool,
                      max_s2: int, s_inner: int, s_outer: int, batch: int, n2: int, g: int, aic: int,
                      per_block_quant: bool = False) -> tuple[bool, str]:
    """FD decision of the arch35 catch-all template (``CheckFlashDecode``)."""
    if not ifa or pfa_merge:
        return False, "not an IFA problem (or PFA merge): no FD"
    if s1 == 1 and per_block_quant:
        return False, "per-block full quant decode: no FD"
    if antiquant:
        if prefix:
            return False, "antiquant with a system prefix: no FD"
        if max_s2 < s_inner * 2:
            return False, f"antiquant max S2 {max_s2} < 2*sInner {2 * s_inner}: no FD"
    else:
        if s1 != 1 or rope:
            return False, "S1 != 1 or rope: no FD"
        if max_s2 < 256:
            return False, f"max S2 {max_s2} < 256: no FD"
    loops = batch * n2 * ((g + s_outer - 1) // s_outer)
    if loops < 0.4 * aic and g == 1:
        return True, f"B*N2*ceil(G/sOuter)={loops} < 0.4*{aic} cube cores and G == 1: FD"
    if loops < 0.4 * aic and max_s2 >= 2048:
        return True, f"B*N2*ceil(G/sOuter)={loops} < 0.4*{aic} cube cores and max S2 {max_s2} >= 2048: FD"
    return False, f"B*N2*ceil(G/sOuter)={loops} vs 0.4*{aic} cube cores, max S2 {max_s2}: no FD"


def impl_kv_splits(*, aic: int, batch: int, n2: int, g: int, s_outer: int, s2: int, s_inner: int) -> tuple[int, str]:
    """KV split count of the arch35 catch-all template (``SplitS2``)."""
    limit = 256 if s_inner <= 256 else s_inner
    loops = batch * n2 * (g + s_outer - 1) // s_outer
    parts = aic // loops if loops else 1
    while parts > 1 and s2 // parts < limit:
        parts -= 1
    parts = max(parts, 1)
    return parts, f"kvSplitPart = {aic}//{loops} lowered while S2/parts < {limit} -> {parts} (SplitS2)"
