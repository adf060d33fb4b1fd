"""Planners of the arch22 legacy routes: the old IFA decode tiling, the old PFA prefill split, and split-fuse.

Model
-----
``plan_ifa`` mirrors ``IFATiling`` with the rules of :mod:`.flash_decode`: perf mode,
FD decision, ``SplitBNS`` (FD: every ``(b, n2)`` cut into ``kv_splits`` parts, one part
per core, core ``c`` = unit ``c // splits``, part ``c % splits``) or ``SplitBN`` (no FD:
contiguous runs of units; a unit is ``(b, n2)``, or with rope / GQA MTP one of its row
blocks of at most ``gMax_`` rows, cut along S1 for BSH/BSND, else along G). Block sizes
are cut from ``seqSize_`` (a paged cache's table width times the block size). Both map
onto ``RowTask``s: a part that is a whole number of S2 blocks as a plain block run,
any other (a part of ``ceil(S2 / kv_splits)`` positions over 8192-position blocks,
e.g. long KV) as a position part that starts anywhere and ends in a partial block
(``RowTask.kv_start`` / ``kv_end``, as the kernel's per-part loop walks it). Its key is the legacy IFA decimal key. With ``inner_precise`` 2, paged int8 KV and
query lengths it takes the ATB kernel instead (``AtbTilingProcess``: key mode 3,
every AIV:AIC group launched, its own workspace; no RowTasks). MLA (perf mode 5) with TND, or
(neither with antiquant nor BNSD) when the batches' KV lengths differ, or in ``IsFdBalanceCase``'s MLA
FA-quant shapes, takes the balanced split instead (``SplitBalanced``): units ``(b, n2, S1 block
of 128 // G positions, sInner block)`` in that order, a core closed at the first unit where the
running count reaches ``(core + 1) * ceil(total / cube cores)`` while a core is left; a row
whose blocks span cores is flash-decoded (FdTasks); every cube core's staging and
``2 * N2 * 128`` FD rows per cube core in the workspace; the key's balance digit set.

``plan_pfa`` mirrors ``PromptFlashAttentionSplitNSNew``: rows ``(head, batch, S1
block)`` in head-major order, weight ``k + 1`` for causal rows (next tokens 0;
right-down causal uses ``S2 + prefix - S1``) else the row's S2 block count; the
same "cut when ``weight - dif > dif``" greedy as the arch35 catch-all, over cube
cores with ``sOuter * 2`` rows (the cube-view mode). Block sizes follow the
documented defaults (sOuter 128, or 16 for S1 <= 16, 64 with PA; sInner 1024, 512
when S2 <= 1024, 2048 for a maskless decode over S2 > 2048); the UB-fit shrink loop
is not mirrored. The PFA key and workspace are not mirrored (``tiling_key`` 0, ``key_mirrored`` and
``workspace_mirrored`` False). The TND-like layouts (``TND``, ``NTD_TND``) take op_host's TND branch
instead, with its own block sizes, split, key and workspace, all mirrored: :mod:`.pfa_tnd`.

Plan search (:mod:`.plan_overrides`): ``plan_ifa`` takes ``cores`` (the cores SplitBN / SplitBNS work
over, in place of ``SetCoreNum``'s; the FD rule then runs on that count), ``kv_splits`` (SplitBNS's
kvSplitPart: 2 or more forces flash decode with that many parts per (b, n2), 1 forces SplitBN; at most
cores / (B*N2), refused for GQA MTP and for rope with S1 > 1 or G > 128) and ``s2_base`` (sInner, whole
paged blocks, clipped to the part's length as op_host clips its own); the tasks, the launch, the workspace
and the key follow as for op_host's plan. The ATB kernel and the balanced split refuse them. ``plan_pfa`` (not the TND branch or
an empty tensor) takes ``m_base`` (2 x sOuter), ``s2_base`` (sInner) and ``cores`` (the greedy's target
divides the weight by that count instead of the cube cores).

The TND split-fuse route ("fai") has its own planner, :func:`.plan_fai.plan_fai`
(re-exported here under its old name).

Invariants
----------
* Tasks cover every active block once; SplitBNS's FD tasks have ``splits == kv_splits``, the balanced
  split's at most ``kv_splits`` (the most cores one row spans).
"""

from __future__ import annotations

from .block_grid import BlockGrid, GridSpec, per_batch_lengths
from .draft import Draft
from .flash_decode import (IFA_PERF_C1V1, IFA_PERF_CUBE_VIEW, IFA_PERF_DD, IFA_PERF_MLA, IFA_PERF_NORMAL,
                           ifa_gqa_flags, ifa_is_flash_decode, ifa_kv_splits, ifa_perf_mode, ifa_s_inner, ifa_split_bn)
from .errors import ParamError
from .plan_overrides import forced, refuse_overrides
from .platform import Platform, tsch_num_blocks
from .result import CoreWork, FdTask, FdVectorWork, RowTask
from .tiling_key import DTYPE_CODE, decode_ifa, encode_ifa
from .workspace import LIBAPI_WORKSPACE, Workspace, fixed_workspace, ifa_staging_workspace
from .plan_fai import plan_fai  # noqa: F401  (the split-fuse planner, re-exported)
from . import pfa_tnd

__all__ = ["plan_ifa", "plan_pfa", "plan_fai"]

_IFA_LAYOUT = {"BNSD": 0, "BSH": 1, "BSND": 1, "TND": 2}
#: the key's KV layout digit (GetKvLayoutInfo: NZ 2, BSH/BSND 1, BNSD 0), set in the MLA and DD perf modes
_IFA_KV_LAYOUT_DIGIT = {"NZ": 2, "BSH": 1, "BSND": 1, "BnBsH": 1}


def plan_ifa(d: Draft, plat: Platform) -> None:
    v = d.view
    if _ifa_atb(v):
        _plan_ifa_atb(d, plat)
        return
    rope = v.rope_mode == "split"
    kv_nz = v.kv_layout == "NZ"
    # upstream's sOfQuery: the query's S dim, T for TND
    gqa_kv_nz, gqa_mtp = ifa_gqa_flags(kv_nz=kv_nz, rope=rope, s1=v.q_t if v.tnd else v.s1)
    anti = v.quant_mode == "anti"
    full_quant = rope and v.q_dtype == "int8"         # quantFlag_: MLA FA quant (int8 query, bf16 rope)
    max_s2 = v.max_actual_seq or v.s2
    perf, pwhy = ifa_perf_mode(kv_nz=kv_nz, rope=rope, q_dtype=v.q_dtype, kv_dtype=v.kv_dtype, out_dtype=v.out_dtype,
                               paged=v.paged, prefix=v.prefix, g=v.g, d=v.qk_dim, batch=v.batch, n2=v.n2,
                               max_s2=max_s2, inner_precise=v.inner_precise, layout=v.input_layout, antiquant=anti,
                               antiquant_per_channel=v.key_antiquant_mode == 0)
    d.decide("perf_mode", perf, pwhy + " (IFATiling::SetupPerfMode)")
    balance, bwhy = _ifa_balance_mode(v, perf, anti=anti, full_quant=full_quant, kv_nz=kv_nz)
    if balance:
        d.decide("balance_mode", True, bwhy + " (IFATiling::IsBalanceSplitCore)")
        _plan_ifa_balanced(d, plat, kv_nz=kv_nz, anti=anti, full_quant=full_quant)
        return
    cores = _ifa_split_units(d, plat, perf)
    fd, fwhy = ifa_is_flash_decode(cores=cores, perf_mode=perf, batch=v.batch, n2=v.n2, g=v.g, s1=v.s1,
                                   max_s2=max_s2, paged=v.paged, rope=rope, gqa_mtp=gqa_mtp)
    forced_parts = _ifa_forced_splits(d, cores, rope=rope, gqa_mtp=gqa_mtp)
    if forced_parts is not None:
        fd, fwhy = forced_parts > 1, f"plan search: kv_splits {forced_parts}" + (" (no FD)" if forced_parts == 1
                                                                                  else "")
    d.decide("flash_decode", fd, fwhy + " (IFATiling::IsFlashDecode)")
    s2 = _ifa_seq_size(v)            # the block sizing's S2; the KV itself is v.s2
    q = per_batch_lengths(v.batch, v.s1, None)
    kv = per_batch_lengths(v.batch, v.s2, v.actual_kv, cumulative=v.accum_kv)
    d.q_lens, d.kv_lens = q, kv
    rows = v.g * v.s1
    d.m_base = rows
    d.m_order = "S1G" if v.s1_major else "GS1"
    parts = 1
    if fd:
        parts, length, kwhy = ifa_kv_splits(cores=cores, batch=v.batch, n2=v.n2, max_s2=max_s2, s2=s2,
                                            paged=v.paged, block_size=v.block_size, int4=v.kv_dtype == "int4",
                                            parts=forced_parts)
        d.decide("kv_splits", parts, kwhy)
        s_inner, swhy = _ifa_s_inner(d, seq=length, g=v.g, antiquant=anti, perf_mode=perf, rope=rope,
                                     paged=v.paged, block_size=v.block_size, int4=v.kv_dtype == "int4", fd=True,
                                     tnd=v.input_layout.startswith("TND"))
        d.s2_base = d.decide("s2_base", s_inner, swhy)
        d.used_cores = d.decide("used_cores", v.batch * v.n2 * parts, f"B*N2*kv_splits = {v.batch}*{v.n2}*{parts}")
        _ifa_fd_tasks(d, parts, length, s_inner)
    else:
        s_inner, swhy = _ifa_s_inner(d, seq=s2, g=v.g, antiquant=anti, perf_mode=perf, rope=rope,
                                     paged=v.paged, block_size=v.block_size, int4=v.kv_dtype == "int4")
        d.s2_base = d.decide("s2_base", s_inner, swhy)
        outer, split, by_s1 = _ifa_row_split(v, rope=rope, gqa_mtp=gqa_mtp, gqa_kv_nz=gqa_kv_nz, anti=anti)
        if outer > 1:
            d.decide("row_split", (outer, split), f"{outer} row blocks of {split} "
                     + ("query positions" if by_s1 else "heads") + " per (b, n2) (IFATiling::SplitUnbalanced)")
        units = v.batch * v.n2 * outer
        loads = None
        if v.actual_kv is not None and len(v.actual_kv) > 1:
            loads = [(1024 if kv[b] < 1024 else kv[b]) if anti else (kv[b] or 1)
                     for b in range(v.batch) for _ in range(v.n2 * outer)]
        equal = v.same_actual_seq or (v.actual_kv is not None and len(v.actual_kv) == 1)
        used, starts, cores = ifa_split_bn(units=units, cores=cores, loads=loads, equal=equal,
                                           mla=perf == IFA_PERF_MLA, aic=plat.aic)
        d.used_cores = d.decide("used_cores", used, f"{units} (b, n2) units over {cores} cores "
                                                    + ("evenly" if loads is None or equal else "by KV length")
                                                    + " (IFATiling::SplitBN)")
        _ifa_bn_tasks(d, starts, units, s_inner, outer=outer, split=split, by_s1=by_s1)
        if perf == IFA_PERF_NORMAL and not v.prefix and units * 2 <= plat.aiv:
            perf = d.decide("perf_mode", IFA_PERF_C1V1, f"no FD, B*N2*2={units * 2} <= {plat.aiv} vector cores: "
                                                        "C1V1 mode 2 (IFATiling::UpdatePerfMode)")
    d.block_dim = d.decide("block_dim", _ifa_block_dim(perf, fd, d.used_cores, plat),
                           "IFATiling::SetBlockDim: with FD (not MLA) every core group; else the used cores as "
                           "C1V1 1:1, cube-view 1:ratio, or vector cores paired 2:1")
    ws = Workspace().add("libapi", LIBAPI_WORKSPACE)
    ifa_staging_workspace(ws, perf_mode=perf, cores=cores, s_inner=d.s2_base, g=v.g, s1=v.s1, head_dim=v.qk_dim,
                          antiquant=anti, int4=v.kv_dtype == "int4", high_precision=v.inner_precise == 0, rope=rope,
                          amla=rope and kv_nz and not anti and not full_quant and v.block_size == 128,
                          tnd=v.input_layout == "TND",
                          prefix_batch=v.batch if v.prefix else 0)
    if fd:
        params = v.batch * v.n1 * parts
        dalign = (v.qk_dim + 31) // 32 * 32
        ws.add("fd_partial_out", params * dalign * 4)
        ws.add("fd_row_sum", params * 8 * 4).add("fd_row_max", params * 8 * 4)
    if v.paged:
        ws.add("paged_callback", cores * 64 * 2)     # per core split over (actCoreNum), used or not
    d.workspace = ws
    d.decide("workspace_bytes", ws.total, "libapi + the matmul staging areas (not in all-vector mode) + FD "
                                          "partials B*N*kv_splits*align32(D) and sums/maxes (IFATiling::CalcWorkSpace)")
    aq_mode = ifa_antiquant_mode(v) if anti else 0
    flags = (2 if _ifa_s_max(v) else 0) + (1 if fd else 0) + (4 if aq_mode == 1 else 0)
    _ifa_key(d, mode=2 if v.prefix else 1, perf=perf, flags=flags,
             antiquant_mode=aq_mode if aq_mode not in (0, 1) else 0,
             kv_layout=(_IFA_KV_LAYOUT_DIGIT.get(v.kv_layout, 0)
                        if perf in (IFA_PERF_MLA, IFA_PERF_DD) else 0),
             origin=v.out_dtype if full_quant else v.q_dtype,
             why="IFATiling::GenTilingKey: mode*10^16 + perf*10^15 + digits (MLA FA quant: the origin digit is "
                 "the output's dtype)")


def _ifa_s_max(v) -> int:
    """IFATiling's paged ``sMax_``: the table width times the block size, however many blocks the lengths use
    (0 without a paged cache; the key's paged digit is set when it is not 0)."""
    return v.block_table_width * v.block_size if v.paged else 0


def _ifa_seq_size(v) -> int:
    """IFATiling's ``seqSize_``, the S2 its block sizes are cut from: ``sMax_`` for a paged cache, else the key's
    S; an empty key sizes as 1024."""
    s2 = _ifa_s_max(v) if v.paged else v.s2
    return s2 if s2 else 1024


#: (batch sizes, query lengths, num_heads, KV length range) of ``IFATiling::IsFdBalanceCase`` (IsValidFlag,
#: IsValidFlag3B, IsValidFlag560B): MLA FA-quant shapes that always take the balanced split
_FD_BALANCE_CASES = (((1,), (2,), 128, (37000, 65536)), ((1, 2, 4), (4,), 8, (4096, 5120)),
                     ((4,), (2, 3, 4), 64, (4096, 5120)))
#: cube M rows of one balanced-split unit (FIA_BALANCE_SG_BASIC_SIZE)
_BALANCE_SG = 128


def _ifa_balance_mode(v, perf: int, *, anti: bool, full_quant: bool, kv_nz: bool) -> tuple[bool, str]:
    """``IsFdBalanceCase`` + ``IsBalanceSplitCore``: (balanced split, why)."""
    if full_quant and v.sparse_mode == 3 and kv_nz and v.paged and v.query_quant_mode == 3 \
            and v.key_antiquant_mode == 0 and v.value_antiquant_mode == 0 and v.n2 == 1 \
            and v.qk_dim == 512 and v.v_dim == 512 and v.actual_kv:
        kv = [int(x) for x in v.actual_kv]
        for batches, s1s, heads, (lo, hi) in _FD_BALANCE_CASES:
            lens = kv[:1] if len(kv) == 1 else kv[:v.batch]
            if v.batch in batches and v.s1 in s1s and v.n1 == heads and all(lo <= x <= hi for x in lens):
                return True, f"MLA FA quant B {v.batch}, S1 {v.s1}, N {v.n1}, KV in [{lo}, {hi}]: FD balance case"
    if perf != IFA_PERF_MLA:
        return False, "not MLA"
    if v.input_layout.startswith("TND"):
        return True, "MLA with TND: balanced split"
    if anti:
        return False, "MLA antiquant: no balanced split"
    if v.q_layout == "BNSD":
        return False, "MLA with BNSD: no balanced split"
    raw = [int(x) for x in (v.actual_kv or ())]
    loop = 1 if (v.actual_kv_dims == 1 and not v.paged) else v.batch   # isSameActualseq_ reads B values
    if all((raw[i] if i < len(raw) else 0) == (raw[0] if raw else 0) for i in range(loop)):
        return False, "MLA with one KV length for every batch: no balanced split"
    return True, "MLA with per-batch KV lengths that differ: balanced split"


def _plan_ifa_balanced(d: Draft, plat: Platform, *, kv_nz: bool, anti: bool, full_quant: bool) -> None:
    """``IFATiling::SplitBalanced`` (and ``SplitBalancedFd``, the same core split): the units (b, n2, S1 block of
    ``128 // G`` query rows, S2 block of sInner) in that order, cut over the cube cores by the running count:
    a core ends at the first unit where ``count + 1 >= (core + 1) * ceil(total / cube cores)`` (a target of 1
    per core when total <= cores) while a core is left for the rest. An (b, n2, S1 block) whose S2 blocks span
    cores is flash-decoded (the pieces merged by the FD combine); the launch, the workspace and the key follow."""
    refuse_overrides(d, "the balanced split of the legacy IFA MLA route takes no plan-search overrides")
    v = d.view
    aic = plat.aic
    d.decide("split_units", aic, "balanced split: cube cores (IFATiling::SetCoreNum)")
    tnd = v.input_layout.startswith("TND")
    s2_sizing = _ifa_seq_size(v)
    s_inner, swhy = ifa_s_inner(seq=s2_sizing, g=v.g, antiquant=anti, perf_mode=IFA_PERF_MLA, rope=True,
                                paged=v.paged, block_size=v.block_size, int4=v.kv_dtype == "int4")
    d.s2_base = d.decide("s2_base", s_inner, swhy)
    souter = _BALANCE_SG // v.g if v.g else 0
    d.decide("s1_block", souter, f"S1 blocks of {_BALANCE_SG} // G = {souter} query rows (SplitBalanced)")
    raw_kv = [int(x) for x in (v.actual_kv or (v.s2,))]
    one = v.actual_kv_dims == 1 or len(raw_kv) == 1
    kv = tuple(raw_kv[0] if one else (raw_kv[b] if b < len(raw_kv) else 0) for b in range(v.batch))
    if tnd:
        q = per_batch_lengths(v.batch, v.s1, v.actual_q_given, cumulative=True)
    else:
        q = per_batch_lengths(v.batch, v.s1, None)
    d.q_lens, d.kv_lens = q, kv
    d.m_order = "S1G" if v.s1_major else "GS1"
    d.m_base = souter * v.g
    s1o, s2o = [], []
    for b in range(v.batch):
        if max(kv) <= 0:
            s1o.append(1)
            s2o.append(1)
        else:
            s1o.append(-(-q[b] // souter) if souter else 0)
            s2o.append(-(-kv[b] // s_inner))
    total = sum(s1o[b] * s2o[b] * v.n2 for b in range(v.batch))
    last_valid = max([b for b in range(v.batch) if s1o[b] > 0 and s2o[b] > 0], default=0)
    avg = -(-total // aic) if total > aic else 1
    # the walk: each core's units, as (b, n2, s1 block, first S2 block, end S2 block) runs
    cores: list[list[list[int]]] = [[]]
    count, need_update, max_parts = 0, False, 0
    spans: dict = {}              # (b, n2, s1 block) -> number of cores its S2 blocks span
    for b in range(v.batch):
        for n2 in range(v.n2):
            for i in range(s1o[b]):
                parts = 1
                for j in range(s2o[b]):
                    run = cores[-1]
                    if run and run[-1][:3] == [b, n2, i] and run[-1][4] == j:
                        run[-1][4] = j + 1
                    else:
                        run.append([b, n2, i, j, j + 1])
                    count += 1
                    if count >= (len(cores)) * avg and len(cores) + 1 <= aic:
                        cores.append([])
                        need_update = False
                        if j < s2o[b] - 1:
                            parts += 1
                    else:
                        need_update = True
                max_parts = max(max_parts, parts)
                if parts > 1:
                    spans[(b, n2, i)] = parts
    if not cores[-1]:
        cores.pop()
    nxt = last_valid + 1
    if (not need_update and 0 < nxt < v.batch and s1o[nxt] != 0 and s2o[nxt] == 0):
        cores.append([])          # IsKvZeroBatchSplit: one more core for the empty batches after the last
    used = len(cores)
    fd = bool(spans)
    d.decide("flash_decode", fd, (f"{len(spans)} (b, n2, S1 block) rows span cores: FD" if fd else
                                  "no row spans cores: no FD") + " (IFATiling::SplitBalanced, IsFlashDecode)")
    d.decide("kv_splits", max_parts if fd else 1, "the most cores one row spans (maxKvSplitPart)")
    d.used_cores = d.decide("used_cores", used, f"{total} units, about {avg} per core, over {aic} cube cores "
                                                "(IFATiling::SplitBalanced)")
    _ifa_balanced_tasks(d, cores, spans, souter)
    d.block_dim = d.decide("block_dim", tsch_num_blocks(plat.cv_ratio * used, used, plat.cv_ratio * used),
                           "IFATiling::CalcNumBlocks: MLA launches the used cores, 1:ratio")
    ws = Workspace().add("libapi", LIBAPI_WORKSPACE)
    ifa_staging_workspace(ws, perf_mode=IFA_PERF_MLA, cores=aic, s_inner=s_inner, g=v.g, s1=v.s1,
                          head_dim=v.qk_dim, antiquant=anti, int4=v.kv_dtype == "int4",
                          high_precision=v.inner_precise == 0, rope=True,
                          amla=kv_nz and not anti and not full_quant and v.block_size == 128, tnd=tnd,
                          prefix_batch=v.batch if v.prefix else 0)
    if fd:
        params = aic * 2 * v.n2 * _BALANCE_SG
        ws.add("fd_partial_out", params * ((v.qk_dim + 31) // 32 * 32) * 4)
        ws.add("fd_row_sum", params * 8 * 4).add("fd_row_max", params * 8 * 4)
    if v.paged:
        ws.add("paged_callback", aic * 64 * 2)
    d.workspace = ws
    d.decide("workspace_bytes", ws.total, "libapi + the matmul staging areas of every cube core + FD partials "
                                          "of 2 * N2 * 128 rows per cube core (CalcBalanceFDParamNums)")
    flags = (2 if _ifa_s_max(v) else 0) + (1 if fd else 0)
    _ifa_key(d, mode=2 if v.prefix else 1, perf=IFA_PERF_MLA, flags=flags, antiquant_mode=0,
             kv_layout=_IFA_KV_LAYOUT_DIGIT.get(v.kv_layout, 0), balance=1,
             origin=v.out_dtype if full_quant else v.q_dtype,
             why="IFATiling::GenTilingKey: mode*10^16 + perf*10^15 + digits, the balance digit set")


def _ifa_balanced_tasks(d: Draft, cores: list, spans: dict, souter: int) -> None:
    """The balanced split's runs as RowTasks: each (b, n2, S1 block) run of S2 blocks, its rows the block's
    ``souter`` query positions times G; a row spanning cores is an FD task whose pieces are its runs in order."""
    v = d.view
    fd_index: dict = {}
    tasks, slot, seen = [], 0, {}
    out = []
    for c, runs in enumerate(cores):
        row_tasks = []
        for b, n2, i, j0, j1 in runs:
            rows = min(souter, d.q_lens[b] - i * souter) * v.g
            key = (b, n2, i)
            t, piece = -1, 0
            if key in spans:
                if key not in fd_index:
                    fd_index[key] = len(tasks)
                    tasks.append(FdTask(b, n2, i * souter * v.g, rows, spans[key], slot))
                    slot += spans[key]
                t = fd_index[key]
                piece = seen.get(key, 0)
                seen[key] = piece + 1
            if rows > 0:
                row_tasks.append(RowTask(b, n2, i * souter * v.g, rows, j0, j1, t, piece))
        out.append(CoreWork(c, tuple(row_tasks), sum(r.s2_hi - r.s2_lo for r in row_tasks)))
    d.cores = tuple(out)
    d.fd_tasks = tuple(tasks)
    d.fd_vector_work = tuple(FdVectorWork(i, ((i, 0, t.m_rows),)) for i, t in enumerate(tasks))


def _ifa_split_units(d: Draft, plat: Platform, perf: int) -> int:
    """The cores SplitBN / SplitBNS work over (``SetCoreNum``: cube cores in the cube-view modes, else vector
    cores), or the plan search's ``cores``."""
    cube = perf in (IFA_PERF_CUBE_VIEW, IFA_PERF_MLA, IFA_PERF_DD)
    cores, kind = (plat.aic, "cube") if cube else (plat.aiv, "vector")
    n = forced(d, "cores", hi=cores, rule=f"perf mode {perf} splits over the {cores} {kind} cores")
    if n is not None:
        return d.decide("split_units", n, f"plan search: {n} of the {cores} {kind} cores (IFATiling::SetCoreNum)")
    return d.decide("split_units", cores, f"{kind} cores (IFATiling::SetCoreNum)")


def _ifa_forced_splits(d: Draft, cores: int, *, rope: bool, gqa_mtp: bool) -> int | None:
    """The plan search's ``kv_splits`` (SplitBNS's kvSplitPart; 1 = no flash decode), checked against what the
    FD kernel takes: one core per (b, n2) split, no GQA MTP, rope only with S1 1 and G <= 128."""
    v = d.view
    bn = max(v.batch * v.n2, 1)
    parts = forced(d, "kv_splits", hi=max(cores // bn, 1),
                   rule=f"SplitBNS gives each of the B*N2 = {bn} (b, n2) units kv_splits of the {cores} split cores")
    if parts is not None and parts > 1:
        if gqa_mtp:
            raise ParamError("overrides.kv_splits", parts, "GQA MTP (query length 2-16 without rope) has no flash-decode kernel: "
                                                           "kv_splits must be 1", checker="plan search")
        if rope and (v.s1 > 1 or v.g > 128):
            raise ParamError("overrides.kv_splits", parts, "the rope flash-decode kernel takes S1 1 and G <= 128 "
                                                           "only: kv_splits must be 1", checker="plan search")
    return parts


def _ifa_s_inner(d: Draft, *, seq: int, **kw) -> tuple[int, str]:
    """``CalcInnerSize``'s sInner for a (split) KV length ``seq``, or the plan search's ``s2_base`` (whole paged
    blocks, clipped to ``seq`` as op_host clips its own)."""
    v = d.view
    step = v.block_size if (v.paged and v.block_size) else 16
    s_inner = forced(d, "s2_base", lo=step, multiple=step,
                     rule="whole KV blocks of the paged cache" if v.paged else "whole 16-position columns")
    if s_inner is None:
        return ifa_s_inner(seq=seq, **kw)
    if seq and s_inner > seq:
        return seq, f"plan search: sInner {s_inner} clipped to {seq}"
    return s_inner, f"plan search: sInner {s_inner}"


def ifa_antiquant_mode(v) -> int:
    """IFATiling's ``antiquantMode_`` as its key reads it: the stacked parameters' ``antiquant_mode`` as given;
    with the key's and the value's own parameters (``kvAntiParamSplitFlag_``) 2 (per-channel key, per-token
    value) for key mode 0 with value mode 1, else the key's mode folded to per channel (0, 2) or per token
    (1, 3, 4, 5) by ``CheckKVAntiQuantMode``."""
    if not v.kv_antiquant_split:
        return v.antiquant_mode
    if (v.key_antiquant_mode, v.value_antiquant_mode) == (0, 1):
        return 2
    return 0 if v.key_antiquant_mode in (0, 2) else 1


def _ifa_key(d: Draft, *, mode: int, perf: int, flags: int, antiquant_mode: int, kv_layout: int, why: str,
             origin: str | None = None, balance: int = 0) -> None:
    """``IFATiling::GenTilingKey``: the route's mode and perf digits, then the layout and dtype digits (the origin
    digit is the query's dtype unless ``origin`` names another; with a paged cache and no rope the layout digit
    is the cache's: BSH for a 3-D one, BNSD for a 4-D one)."""
    v = d.view
    layout = _IFA_LAYOUT.get(v.q_layout, 0)
    if v.paged and v.q_layout != "TND" and v.rope_mode == "none" and v.key_cache_rank in (3, 4):
        layout = 1 if v.key_cache_rank == 3 else 0   # ProcessPageAttentionFlag: the cache's rank sets the layout
    fields = {"mode": mode, "perf": perf, "q_layout": layout,
              "q_dtype": DTYPE_CODE.get(v.q_dtype, 0), "kv_dtype": DTYPE_CODE.get(v.kv_dtype, 0),
              "out_dtype": DTYPE_CODE.get(v.out_dtype, 0), "origin_dtype": DTYPE_CODE.get(origin or v.q_dtype, 0),
              "flags": flags, "antiquant_mode": antiquant_mode, "kv_layout": kv_layout,
              "tree": 1 if v.sparse_mode == 9 else 0, "balance_mode": balance}
    key = encode_ifa(fields)
    d.tiling_key = d.decide("tiling_key", key, why)
    d.key_fields = decode_ifa(key)


def _ifa_atb(v) -> bool:
    """The ATB route of the legacy IFA tiling on A2/A3 (``AtbCheckFlag910``): inner_precise 2, paged int8 KV
    and actual_seq_lengths given for the query."""
    return v.inner_precise == 2 and v.paged and v.kv_dtype == "int8" and bool(v.actual_q_given)


def _plan_ifa_atb(d: Draft, plat: Platform) -> None:
    """``IFATiling::AtbTilingProcess`` on A2/A3: the query's token blocks (``seqStepQ`` rows of each batch's
    span of the cumulative query lengths) cut evenly over the launch (``CalcTschNumBlocks(aiv, aic, aiv)``
    blocks); workspace and key of the ATB kernel. Its tasks are not expressible as RowTasks."""
    refuse_overrides(d, "the ATB kernel's query-token tasks are not built from these numbers (no RowTasks)")
    v = d.view
    u32 = 0xFFFFFFFF
    head = v.n1 * v.qk_dim if v.q_layout == "BSH" else v.qk_dim      # GetHeadSize: the query's last dim
    step = min(128, (64 * 1024 // 2 // 2) // max(head, 1) // 16 * 16)  # CalcSeqStepQ: half of L0B in fp16
    d.decide("route_variant", "atb", "inner_precise 2 with paged int8 KV and query lengths: the ATB kernel "
                                     "(IFATiling::AtbCheckFlag910)")
    d.decide("perf_mode", 0, "ATB route: the perf mode is not set (0)")
    tasks, pre = 0, 0
    for cur in v.actual_q_given:                    # cumulative lengths, as uint32 (GetTotalQBlockNum)
        tasks += (((int(cur) - pre + step - 1) & u32) // step) if step else 0
        pre = int(cur) & u32
    tasks &= u32
    d.block_dim = d.decide("block_dim", tsch_num_blocks(plat.aiv, plat.aic, plat.aiv),
                           "ATB route: every AIV:AIC group (CalcTschNumBlocks(aiv, aic, aiv))")
    d.used_cores = d.decide("used_cores", min(tasks, d.block_dim),
                            f"{tasks} query blocks of {step} tokens cut evenly over {d.block_dim} blocks "
                            "(IFATiling::AtbSplitBlock)")
    d.decide("flash_decode", False, "ATB route: no FD")
    d.extras["row_tasks"] = "the ATB kernel's per-block query-token tasks are not expressible as RowTasks"
    staging = (4 * plat.aiv * 256 * head * 2 + 4 * plat.aiv * 65536 * 2) & u32
    d.workspace = Workspace().add("libapi", LIBAPI_WORKSPACE).add("atb_staging", staging)
    d.decide("workspace_bytes", d.workspace.total, "libapi + 4 * aiv * (256 * head * 2 + 65536 * 2) bytes "
                                                   "(IFATiling::GetTotalWorkspaceSize)")
    s_max = v.max_block_num_per_batch * v.block_size
    _ifa_key(d, mode=3, perf=0, flags=2 if s_max else 0, antiquant_mode=0, kv_layout=0,
             why="IFATiling::GenTilingKey with the ATB mode (3) * 10^16")


def _ifa_block_dim(perf: int, fd: bool, used: int, plat: Platform) -> int:
    """The IFA launch (``SetBlockDim``): ``CalcTschNumBlocks(aiv, aic, aiv)`` over the cores the mode
    implies."""
    aiv, aic = plat.aiv, plat.aic
    if perf == IFA_PERF_MLA or not fd:
        if perf == IFA_PERF_C1V1:
            aiv = aic = used
        elif perf in (IFA_PERF_CUBE_VIEW, IFA_PERF_MLA, IFA_PERF_DD):
            aiv, aic = plat.cv_ratio * used, used
        else:
            aiv = used + (used & 1)
            aic = (aiv + 1) // 2
    return tsch_num_blocks(aiv, aic, aiv)


def _ifa_fd_tasks(d: Draft, parts: int, length: int, s_inner: int) -> None:
    """``SplitBNS`` as RowTasks: part p of (b, n2) is the KV positions [p * length, min((p + 1) * length, S2_b)),
    walked in s_inner blocks from its own start, the last one partial (the kernel's ``UpdateInnerLoopCond``: a
    part's loop count and tail from its ``computeSinnerSize``). A part length that is a whole number of blocks
    gives the plain block runs; any other gives position parts (``RowTask.kv_start`` / ``kv_end``)."""
    v = d.view
    aligned = length % s_inner == 0
    cores, tasks = [], []
    slot = 0
    for b in range(v.batch):
        kv = d.kv_lens[b]
        for n2 in range(v.n2):
            spans = [(p * length, min((p + 1) * length, kv)) for p in range(parts)]
            live = [(lo, hi) for lo, hi in spans if hi > lo]
            t = len(tasks) if len(live) > 1 else -1
            if t >= 0:
                tasks.append(FdTask(b, n2, 0, d.m_base, len(live), slot))
                slot += len(live)
            k = 0
            for lo, hi in spans:
                row = ()
                if hi > lo:
                    nblocks = -(-(hi - lo) // s_inner)
                    piece = k if t >= 0 else 0
                    if aligned:
                        row = (RowTask(b, n2, 0, d.m_base, lo // s_inner, lo // s_inner + nblocks, t, piece),)
                    else:
                        row = (RowTask(b, n2, 0, d.m_base, 0, nblocks, t, piece, lo, hi),)
                    k += 1
                cores.append(CoreWork(len(cores), row, len(row) and row[0].s2_hi - row[0].s2_lo))
    d.cores = tuple(cores)
    d.fd_tasks = tuple(tasks)
    d.fd_vector_work = tuple(FdVectorWork(i, ((i, 0, t.m_rows),)) for i, t in enumerate(tasks))
    if not aligned:
        d.decide("kv_parts", length, f"KV part of {length} positions, not a whole number of {s_inner}-position "
                                     "blocks: each part walks its blocks from its own start, the last partial")


def _ifa_row_split(v, *, rope: bool, gqa_mtp: bool, gqa_kv_nz: bool, anti: bool) -> tuple[int, int, bool]:
    """(row blocks per (b, n2), rows of query positions or heads per block, split along S1) of
    ``SplitUnbalanced`` for rope or GQA MTP: at most ``gMax_`` (128; 256 for MTP, 128 with antiquant) rows per
    block, cut along S1 for BSH/BSND (and TND with a GQA NZ cache), else along G (an even head count)."""
    if not (rope or gqa_mtp) or not v.g or not v.s1:
        return 1, 0, True
    g_max = (128 if anti else 256) if gqa_mtp else 128
    if v.q_layout in ("BSH", "BSND") or (gqa_kv_nz and v.input_layout.startswith("TND")):
        split = min(g_max // v.g, v.s1)
        return (-(-v.s1 // split) if split else 1), split, True
    split = g_max // v.s1
    split -= split & 1
    split = min(split, v.g)
    return (-(-v.g // split) if split else 1), split, False


def _ifa_bn_tasks(d: Draft, starts: tuple, units: int, s_inner: int, *, outer: int = 1, split: int = 0,
                  by_s1: bool = True) -> None:
    """``SplitBN``'s contiguous runs of units as RowTasks; a unit is (b, n2, row block): with ``outer`` > 1 the
    block's rows are ``split`` query positions (all heads, S1-major) or ``split`` heads (all positions)."""
    v = d.view
    cores = []
    for c, s in enumerate(starts):
        e = starts[c + 1] if c + 1 < len(starts) else units
        tasks = []
        for u in range(s, min(e, units)):
            bn, o = divmod(u, outer)
            b, n2 = divmod(bn, v.n2)
            nb = (d.kv_lens[b] + s_inner - 1) // s_inner
            m0, rows = 0, d.m_base
            if outer > 1:
                if by_s1:
                    m0, rows = o * split * v.g, min(split, v.s1 - o * split) * v.g
                else:
                    m0, rows = o * split * v.s1, min(split, v.g - o * split) * v.s1
            if rows:   # a unit without KV is visited too: its core writes the empty rows (InitAllZeroOutput)
                tasks.append(RowTask(b, n2, m0, rows, 0, nb))
        cores.append(CoreWork(c, tuple(tasks), 0))
    d.cores = tuple(cores)


def _pfa_blocks(v) -> tuple[int, int, str]:
    if v.s1 <= 16:
        so = 16
        si = 2048 if (not v.mask and v.s2 > 2048) else (512 if v.s2 <= 1024 and v.q_dtype != "int8" else 1024)
        why = "S1<=16: sOuter 16"
    else:
        so = 64 if v.paged else 128
        si = 512 if (v.s2 <= 1024 and v.q_dtype != "int8") else 1024
        why = "PA: sOuter 64" if v.paged else "CV-diff default sOuter 128"
    return so, si, why + f", sInner {si} (PromptFlashAttentionTiling, UB-fit loop not mirrored)"


def _pfa_forced_blocks(d: Draft, m: int, si: int, why: str) -> tuple[int, int, str]:
    """The cube-view M base (2 x sOuter) and sInner, or the plan search's ``m_base`` / ``s2_base``."""
    fm = forced(d, "m_base", lo=32, multiple=32, rule="the cube view's 2 x sOuter, sOuter whole 16-row fractals")
    fs = forced(d, "s2_base", lo=16, multiple=16, rule="whole 16-position columns")
    if fm is None and fs is None:
        return m, si, why
    return fm or m, fs or si, f"plan search: sOuter {(fm or m) // 2}, sInner {fs or si}"


def plan_pfa(d: Draft, plat: Platform) -> None:
    v = d.view
    if v.empty:
        refuse_overrides(d, "an empty tensor only zero-fills the output")
        _plan_pfa_empty(d, plat)
        return
    if pfa_tnd.tnd_like(v):
        refuse_overrides(d, "the TND branch's blocks and split (pfa_tnd) do not read them")
        pfa_tnd.plan_pfa_tnd(d, plat)       # its key and workspace too
        d.decide("flash_decode", False, "PFA prefill: no FD")
        return
    so, si, why = _pfa_blocks(v)
    m, si, why = _pfa_forced_blocks(d, so * 2, si, why)
    d.m_base = d.decide("m_base", m, f"cube view: sOuter {m // 2} x 2; " + why)
    d.s2_base = d.decide("s2_base", si, why)
    d.m_order = "GS1"
    q = per_batch_lengths(v.batch, v.s1, v.actual_q, cumulative=v.accum_q)
    kv = per_batch_lengths(v.batch, v.s2, v.actual_kv, cumulative=v.accum_kv)
    d.q_lens, d.kv_lens = q, kv
    prefix = v.prefix_len if v.prefix else 0
    grid = BlockGrid(GridSpec(v.batch, v.n1, 1, q, tuple(k + prefix for k in kv), m, si, False, v.mask,
                              v.sparse_mode, v.pre_tokens, v.next_tokens))
    rows = []
    total = 0
    pre_loops = (prefix + si - 1) // si
    for h in range(v.n1):
        for b in range(v.batch):
            nxt = kv[b] + prefix - q[b] if v.sparse_mode == 3 else v.next_tokens
            loops = (kv[b] + si - 1) // si + pre_loops
            for k in range(grid.m_blocks[b]):
                w = k + 1 if nxt == 0 else loops
                rows.append((h, b, k, w))
                total += w
    split_cores = forced(d, "cores", hi=plat.aic, rule=f"the platform's {plat.aic} cube cores") or plat.aic
    target = total / split_cores if split_cores else 0.0
    core_rows = [[]]
    acc = 0
    for h, b, k, w in rows:
        dif = int(target * (len(core_rows))) - acc
        if w - dif > dif and core_rows[-1]:
            core_rows.append([])
        core_rows[-1].append((h, b, k))
        acc += w
    cores = []
    for c, lst in enumerate(core_rows):
        tasks = []
        for h, b, k in lst:
            r = grid.row(b, k)
            if r.blocks:
                # head h's rows in the (b, kv head) fold: after the earlier heads' rows of this batch's own S1
                tasks.append(RowTask(b, h // v.g, (h % v.g) * q[b] + k * m, grid.row_rows(b, k), r.s2_start,
                                     r.s2_end))
        cores.append(CoreWork(c, tuple(tasks), 0))
    d.cores = tuple(cores)
    over = f"{plat.aic} cube cores" if split_cores == plat.aic else f"{split_cores} cores (plan search)"
    d.used_cores = d.decide("used_cores", len(core_rows), f"head-major weighted split, total weight {total} over "
                                                          f"{over} (PromptFlashAttentionSplitNSNew)")
    _pfa_unmirrored(d)


def _pfa_unmirrored(d: Draft) -> None:
    """No FD on the PFA prefill route; its key and workspace are not mirrored (said so, ``extras``)."""
    d.decide("flash_decode", False, "PFA prefill: no FD")
    d.decide("tiling_key", 0, "the legacy PFA tiling key is not mirrored by cvtile")
    d.extras["key_mirrored"] = False
    d.decide("workspace_bytes", 0, "the legacy PFA workspace (sized from the softmax API's temporary buffer and "
                                   "the UB-fit block sizes) is not mirrored by cvtile")
    d.extras["workspace_mirrored"] = False


#: The PFA tiling's key for its empty-tensor exit (``EMPTY_KV_TILING_KEY``), plus FIA's offset for the PFA
#: route (``BENCHMARK_TILING_KEY``).
PFA_EMPTY_KEY = 20
FIA_PFA_KEY_BASE = 10 ** 18


def _plan_pfa_empty(d: Draft, plat: Platform) -> None:
    """Empty key, value or output on the PFA route: no attention work; the output is zero-filled in
    slices of ceil(size / AIV cores) elements (even for an int8 output), launched as
    ceil(slices / (AIV / AIC)) blocks (``PromptFlashAttentionInitOutputSplit``, ``CalcTschNumBlocks``)."""
    v = d.view
    total = v.out_numel
    single = -(-total // plat.aiv) if plat.aiv else 0
    if v.out_dtype == "int8":
        single = (single + 1) // 2 * 2
    slices = -(-total // single) if single else plat.aiv
    d.block_dim = d.decide("block_dim", tsch_num_blocks(slices, plat.aic, plat.aiv),
                           f"empty tensor: {slices} zero-fill slices of {single} elements, one block per "
                           f"AIV:AIC group (CalcTschNumBlocks)")
    d.used_cores = d.decide("used_cores", d.block_dim, "empty tensor: every launched block zero-fills a slice")
    d.decide("flash_decode", False, "PFA empty tensor: no FD")
    d.tiling_key = d.decide("tiling_key", FIA_PFA_KEY_BASE + PFA_EMPTY_KEY,
                            "EMPTY_KV_TILING_KEY (20) + the FIA offset for the PFA route (1e18)")
    d.workspace = fixed_workspace(16 * 1024 * 1024)
