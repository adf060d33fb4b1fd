"""Planners of the arch35 (Ascend 950) FIA templates: blocks -> split -> FD -> workspace -> key.

Model
-----
* ``plan_gqa`` — ``FiaTilingNonQuantArch35``: blocks from :func:`~.blocks_arch35.gqa_blocks`,
  ``split_core_v2`` with stream-K and the "is FD worth it" re-plan (tolerance 9);
* ``plan_mla`` — ``FiaTilingNonQuantMlaArch35``: 32/128 (M 64), same splitter;
* ``plan_mx`` — ``FiaTilingFullQuantMxArch35``: 64/512; decode (query scale of rank 5)
  keeps G folded and stream-K on (tolerance 10, at least 2 blocks), prefill splits per
  query head without stream-K;
* ``plan_fullquant_gqa`` — ``FiaTilingFullQuantGqaArch35``: 64/256 per query head,
  no stream-K;
* ``plan_impl`` — ``FusedInferAttentionScoreTilingImpl`` (catch-all): mode flags and
  blocks of :mod:`.blocks_arch35`, the optional S1 outer split, the weighted split of
  :mod:`.nbseq_split`, and up-front FD (:func:`~.flash_decode.impl_flash_decode`).

Plan search (:mod:`.plan_overrides`): ``plan_gqa`` and ``plan_mla`` take ``cores`` (split_core_v2 runs one
greedy pass for that core count instead of its search, then its FD re-plan as usual; the workspace and the
key follow). Their blocks are fixed configs of the templates' kernels (the key's config field selects
them), so they are not searched; the quant templates and the catch-all take no overrides.

Split inputs (``CreateSplitInput`` of the v2 templates): query lengths from
``actual_seq_lengths`` (cumulative for a TND query), KV lengths from
``actual_seq_lengths_kv`` (cumulative for a TND query without paged attention), the
shape's S1 / S2 otherwise. A tiling sink skips the split; the GQA template then has
no block choice and its key takes the fallback config.

The catch-all's FD pieces: op_host only fixes the split count; cvtile cuts each
``(b, n2)``'s S2 blocks into that many near-equal runs (documented, not mirrored).
When G is not merged into S1 the catch-all works per query head; its rows are
expressed in the G-major fold (``m_order`` "GS1") so a head's rows stay contiguous.

Invariants
----------
* The key's FD bit equals ``bool(fd_tasks)`` (except with a system prefix, which clears it).
"""

from __future__ import annotations

from .block_grid import BlockGrid, GridSpec, per_batch_lengths
from .blocks_arch35 import (CV_RATIO, gqa_blocks, gqa_config, impl_antiquant_blocks, impl_blocks, impl_config,
                            impl_flags, impl_s1_outer_split)
from .draft import Draft
from .flash_decode import impl_flash_decode, impl_kv_splits
from .nbseq_split import antiquant_rows, antiquant_target_weight, row_windows, split_nbseq
from .plan_overrides import forced, refuse_overrides
from .platform import Platform, tsch_num_blocks
from .result import CoreWork, FdTask, RowTask
from .split_core_v2 import split_core_v2, split_fd_v2
from .tasks import core_work, vector_work_v2
from .tiling_key import decode_arch35, encode_arch35
from .view import TilingView
from .workspace import (arch35_gqa_workspace, arch35_impl_workspace, arch35_max_gqa_workspace, arch35_mla_workspace)

__all__ = ["plan_gqa", "plan_mla", "plan_mx", "plan_fullquant_gqa", "plan_impl"]

_IO_LAYOUT = {"BNSD": 0, "BSH": 1, "BSND": 1, "TND": 2, "NTD": 4}
QUANT_NONE = 31


def _io(v: TilingView, *, ntd_code: int = 4) -> int:
    return ntd_code if v.q_layout == "NTD" else _IO_LAYOUT.get(v.q_layout, 0)


def _pse_mode(v: TilingView) -> int:
    return v.pse_type if (v.pse or v.alibi) else 9


def _paged_layout(v: TilingView, *, sink: bool = False) -> int:
    """Refactored templates: contiguous 0, paged BBH 1, BNBD 2, NZ 3 (a tiling sink reads the unset default: BNBD)."""
    if not v.paged:
        return 0
    if sink:
        return 2
    return {3: 1, 4: 2, 5: 3}.get(v.key_cache_rank, 2)


def _v2_lengths(v: TilingView, ntd: bool = False) -> tuple[tuple, tuple, int]:
    """(q lengths, kv lengths, prefix) of the split; ``ntd``: an NTD query's lengths are cumulative too
    (``FiaTilingFullQuantGqaArch35``'s isAccumSeqS1 for TND and NTD)."""
    prefix = v.prefix_len if v.prefix else 0
    tnd = v.q_layout == "TND" or (ntd and v.q_layout == "NTD")
    q = per_batch_lengths(v.batch, v.s1, v.actual_q, cumulative=tnd)
    kv = per_batch_lengths(v.batch, v.s2, v.actual_kv, cumulative=tnd and not v.paged, prefix=prefix)
    return q, kv, prefix


def _set_key(d: Draft, fields: dict, rule: str) -> None:
    key = encode_arch35(fields)
    d.tiling_key = d.decide("tiling_key", key, rule + " (template-argument bit packing, see tiling_key.py)")
    d.key_fields = decode_arch35(key)


def _v2_split(d: Draft, plat: Platform, v: TilingView, *, m_base: int, s2_base: int, n2: int, g: int,
              stream_k: bool, tolerance: int, least: int, name: str, ntd: bool = False) -> None:
    q, kv, _ = _v2_lengths(v, ntd)
    d.q_lens, d.kv_lens = q, kv
    grid = BlockGrid(GridSpec(v.batch, n2, g, q, kv, m_base, s2_base, v.s1_major, v.mask, v.sparse_mode,
                              v.pre_tokens, v.next_tokens))
    forced_cores = forced(d, "cores", hi=plat.aic, rule=f"the platform's {plat.aic} cube cores")
    if forced_cores is not None:
        name += f"; plan search: {forced_cores} cores forced"
    plan, choice = split_core_v2(grid, plat.aic, stream_k=stream_k, fd_tolerance=tolerance, fd_least_blocks=least,
                                 core_count=forced_cores)
    cores, fd_tasks = core_work(grid, plan)
    d.cores, d.fd_tasks = cores, fd_tasks
    d.used_cores = d.decide("used_cores", plan.used_cores,
                            f"split_core_v2 over {grid.total_blocks} blocks (cost {grid.total_cost}), stream-K "
                            f"{'on' if stream_k else 'off'}: slowest core cost {plan.max_cost} ({name})")
    if choice.considered:
        d.decide("fd_replan", choice.kept,
                 f"stream-K split rows: slowest core {choice.fd_cost} with FD vs {choice.no_fd_cost} without; "
                 f"full block cost {choice.full_block_cost}, tolerance {tolerance}, least {least} blocks: "
                 f"{'keep FD' if choice.kept else 'drop FD'} (split_core_v2 CheckChooseWithFd)")
    if fd_tasks:
        entries = split_fd_v2(plan.heads, plan.used_cores, plat.cv_ratio)
        d.fd_vector_work = vector_work_v2(entries)
        d.decide("flash_decode", True, f"{len(fd_tasks)} row block(s) split (up to {max(t.splits for t in fd_tasks)}"
                                       f" KV pieces): FD combine on {len(entries)} vector cores (v2 SplitFD)")
    else:
        d.decide("flash_decode", False, "no row block split across cores: no FD (split_core_v2)")
    d.extras["split_ends"] = [tuple(e) for e in plan.ends]


def _sink(d: Draft, plat: Platform) -> None:
    refuse_overrides(d, "a tiling sink has no host split (the kernel splits at run time)")
    d.used_cores = d.decide("used_cores", plat.aic, "tiling sink (a length list without values): no host split, "
                                                    "every cube core launched, max workspace")
    d.decide("flash_decode", False, "tiling sink: the key's FD bit is off")
    d.extras["tiling_sink"] = True


def _base_fields(v: TilingView, *, config: int, quant: int, rope: bool, kv_layout: int, fd: bool,
                 refactored: bool, s1os: bool = False, pse: int | None = None, io: int | None = None) -> dict:
    return {"inout_layout": _io(v) if io is None else io, "config": config,
            "pse_mode": _pse_mode(v) if pse is None else pse, "quant_mode": quant, "has_mask": v.mask,
            "has_rope": rope, "kv_layout": kv_layout, "fd": fd and not v.prefix, "empty_tensor": False,
            "kv_prefix": v.prefix, "s1_outer_split": s1os, "refactored": refactored}


# -------------------------------------------------------------------------------------------------- GQA
def plan_gqa(d: Draft, plat: Platform) -> None:
    v = d.view
    if v.max_workspace:
        _sink(d, plat)
        cfg, why = gqa_config(v, None)
        d.decide("config", cfg, why)
        d.workspace = arch35_max_gqa_workspace(vector_cores=plat.aiv)
        kvl = _paged_layout(v, sink=True)
        fd = False
    else:
        blocks = gqa_blocks(v)
        d.m_base = d.decide("m_base", blocks.m_base, f"sOuter {blocks.s_outer} x {CV_RATIO} vector cores; "
                                                     + blocks.reason)
        d.s2_base = d.decide("s2_base", blocks.s_inner, blocks.reason)
        cfg, why = gqa_config(v, blocks)
        d.decide("config", cfg, why)
        _v2_split(d, plat, v, m_base=blocks.m_base, s2_base=blocks.s_inner, n2=v.n2, g=v.g, stream_k=True,
                  tolerance=9, least=0, name="FiaTilingNonQuantArch35")
        fd = bool(d.fd_tasks)
        d.workspace = arch35_gqa_workspace(used_cores=d.used_cores, m_base=blocks.m_base, v_dim=v.v_dim, fd=fd)
        kvl = _paged_layout(v)
    d.decide("workspace_bytes", d.workspace.total, "libapi + Dv>128 staging + FD areas "
                                                   "(FiaTilingNonQuantArch35::CalcWorkspaceSize)")
    fields = _base_fields(v, config=cfg, quant=QUANT_NONE, rope=v.mla_mode == "split_d128", kv_layout=kvl, fd=fd,
                          refactored=True)
    _set_key(d, fields, "FiaTilingNonQuantArch35::GenTilingKey")


# -------------------------------------------------------------------------------------------------- MLA
def plan_mla(d: Draft, plat: Platform) -> None:
    v = d.view
    if v.max_workspace:
        _sink(d, plat)
        d.workspace = arch35_mla_workspace(used_cores=plat.aic, fd=True, max_workspace=True, aic=plat.aic)
        fd = False
    else:
        d.m_base = d.decide("m_base", 64, "MLA D512: sOuter 32 x 2 (FiaTilingNonQuantMlaArch35)")
        d.s2_base = d.decide("s2_base", 128, "MLA D512: sInner 128 (FiaTilingNonQuantMlaArch35)")
        _v2_split(d, plat, v, m_base=64, s2_base=128, n2=v.n2, g=v.g, stream_k=True, tolerance=9, least=0,
                  name="FiaTilingNonQuantMlaArch35")
        fd = bool(d.fd_tasks)
        d.workspace = arch35_mla_workspace(used_cores=d.used_cores, fd=fd)
    d.decide("config", 9, "MLA D512: config 9 (M64, S2 128, D576, Dv512)")
    d.decide("workspace_bytes", d.workspace.total, "libapi + FD areas (FiaTilingNonQuantMlaArch35::CalcWorkspaceSize)")
    fields = _base_fields(v, config=9, quant=QUANT_NONE, rope=True, kv_layout=_paged_layout(v), fd=fd,
                          refactored=True, pse=9)
    fields["fd"] = fd
    _set_key(d, fields, "FiaTilingNonQuantMlaArch35::GenTilingKey")


# -------------------------------------------------------------------------------------------------- full quant
def plan_mx(d: Draft, plat: Platform) -> None:
    v = d.view
    decode = v.dequant_scale_query_rank == 5
    d.decide("mxfp8_mode", "decode" if decode else "prefill",
             f"query dequant scale of rank {v.dequant_scale_query_rank}: "
             + ("decode, G folded into S1, stream-K on" if decode else "prefill, per query head, no stream-K"))
    dq, dv = (64 if v.qk_dim <= 64 else 128), (64 if v.v_dim <= 64 else 128)
    cfg = 27 if (dq, dv) == (64, 64) else 28
    d.decide("config", cfg, f"MXFP8 64/512 (M128, S2 512), D/Dv buckets {dq}/{dv}: config {cfg}")
    if v.max_workspace:
        _sink(d, plat)
        d.workspace = arch35_max_gqa_workspace(vector_cores=plat.aiv)
        fd = False
    else:
        d.m_base = d.decide("m_base", 128, "MXFP8: sOuter 64 x 2")
        d.s2_base = d.decide("s2_base", 512, "MXFP8: sInner 512")
        if not decode:
            d.m_order = "GS1"
        _v2_split(d, plat, v, m_base=128, s2_base=512, n2=v.n2 if decode else v.n1, g=v.g if decode else 1,
                  stream_k=decode, tolerance=10, least=2, name="FiaTilingFullQuantMxArch35")
        if not decode:
            _expand_heads(d, v)
        fd = bool(d.fd_tasks)
        d.workspace = arch35_gqa_workspace(used_cores=d.used_cores, m_base=128, v_dim=min(v.v_dim, 128), fd=fd)
    d.decide("workspace_bytes", d.workspace.total, "libapi + FD areas (FiaTilingFullQuantMxArch35::CalcWorkspaceSize)")
    fields = _base_fields(v, config=cfg, quant=20 if decode else 19, rope=v.rope_mode == "split",
                          kv_layout=_paged_layout(v, sink=v.max_workspace), fd=fd, refactored=True)
    _set_key(d, fields, "FiaTilingFullQuantMxArch35::GenTilingKey")


def plan_fullquant_gqa(d: Draft, plat: Platform) -> None:
    v = d.view
    d.decide("config", 17, "per-token-head full quant: 64/256, config 17 (M128, S2 256, D128, Dv128)")
    if v.max_workspace:
        _sink(d, plat)
        d.workspace = arch35_max_gqa_workspace(vector_cores=plat.aiv, dv_max=128)
        fd = False
    else:
        d.m_base = d.decide("m_base", 128, "full quant GQA: sOuter 64 x 2, per query head (G not folded)")
        d.s2_base = d.decide("s2_base", 256, "full quant GQA: sInner 256")
        d.m_order = "GS1"
        _v2_split(d, plat, v, m_base=128, s2_base=256, n2=v.n1, g=1, stream_k=False, tolerance=0, least=0,
                  name="FiaTilingFullQuantGqaArch35", ntd=True)
        _expand_heads(d, v)
        fd = bool(d.fd_tasks)
        d.workspace = arch35_gqa_workspace(used_cores=d.used_cores, m_base=128, v_dim=min(v.v_dim, 128), fd=fd)
    d.decide("workspace_bytes", d.workspace.total, "libapi + FD areas (FiaTilingFullQuantGqaArch35)")
    io = 5 if v.q_layout == "NTD" else _IO_LAYOUT.get(v.q_layout, 0)
    fields = _base_fields(v, config=17, quant=21, rope=False, kv_layout=_paged_layout(v, sink=v.max_workspace),
                          fd=fd, refactored=True, pse=9, io=io)
    fields.update(kv_prefix=False, fd=fd)
    _set_key(d, fields, "FiaTilingFullQuantGqaArch35::GenTilingKey")


def _expand_heads(d: Draft, v: TilingView) -> None:
    """Tasks planned per query head (n2 = N1, G = 1): rewrite them in the (b, kv head) G-major fold, head g's
    rows after the g earlier heads' S1 rows of their batch (the batch's own S1: ``d.q_lens``)."""
    g = v.g
    s1 = d.q_lens or tuple(v.s1 for _ in range(v.batch))

    def fix(t: RowTask) -> RowTask:
        return RowTask(t.b, t.n2 // g, (t.n2 % g) * s1[t.b] + t.m_start, t.m_rows, t.s2_lo, t.s2_hi, t.fd_task,
                       t.fd_piece)

    d.cores = tuple(CoreWork(c.core, tuple(fix(t) for t in c.tasks), c.cost) for c in d.cores)
    d.fd_tasks = tuple(FdTask(t.b, t.n2 // g, (t.n2 % g) * s1[t.b] + t.m_start, t.m_rows, t.splits,
                              t.workspace_slot) for t in d.fd_tasks)


# -------------------------------------------------------------------------------------------------- catch-all
def _impl_lengths(v: TilingView, flags) -> tuple[tuple, tuple]:
    gs = v.g * v.s1 if flags.gs_merge else v.s1
    q_cum = v.q_layout in ("TND", "NTD")
    kv_cum = v.kv_layout in ("TND", "NTD")
    if not flags.actual_q_valid:
        q = tuple(gs for _ in range(v.batch))
    elif flags.gs_merge and v.mla_mode == "split_d512" and v.q_layout == "BNSD":
        q = tuple(v.s1 * v.g for _ in range(v.batch))
    else:
        raw = per_batch_lengths(v.batch, v.s1, v.actual_q, cumulative=q_cum)
        q = tuple(x * v.g for x in raw) if flags.gs_merge else raw
    if flags.actual_kv_valid:
        kv = per_batch_lengths(v.batch, v.s2, v.actual_kv, cumulative=kv_cum)
    elif v.tensor_list and v.kv_list_lens:
        kv = per_batch_lengths(v.batch, v.s2, v.kv_list_lens)
    else:
        kv = tuple(v.s2 for _ in range(v.batch))
    return q, kv


def _antiquant_lengths(v: TilingView, flags) -> tuple[tuple, tuple]:
    """Per-batch lengths of the antiquant split (op_host ``GetActualSeqLength``; its quirks kept: a valid query
    list is not multiplied by G even when G is folded into S1)."""
    if v.max_workspace:
        return tuple(v.s1 for _ in range(v.batch)), tuple(v.s2 for _ in range(v.batch))
    if v.q_layout == "TND":
        raw = per_batch_lengths(v.batch, v.s1, v.actual_q, cumulative=True)
        q = tuple(x * v.g for x in raw) if flags.gs_merge else raw
        kv = per_batch_lengths(v.batch, v.s2, v.actual_kv, cumulative=not v.paged)
        return q, kv
    if v.actual_kv is not None and v.actual_kv_dims:
        kv = per_batch_lengths(v.batch, v.s2, v.actual_kv)
    else:
        kv = per_batch_lengths(v.batch, v.s2, v.kv_list_lens or None)
    if flags.actual_q_valid:
        q = per_batch_lengths(v.batch, v.s1, v.actual_q)
    else:
        q = tuple((v.s1 * v.g if flags.gs_merge else v.s1) for _ in range(v.batch))
    return q, kv


def _impl_quant_mode(v: TilingView) -> int:
    if v.quant_mode == "none":
        return QUANT_NONE
    if v.quant_mode == "anti":
        k = v.key_antiquant_mode
        if k == 0:
            return 2 if v.value_antiquant_mode == 1 else 0
        if k == 2:
            return 0
        if k in (1, 3, 4, 5):
            return 6
        return 0
    if v.rope_mode == "split":
        return 18
    if (v.key_antiquant_mode, v.value_antiquant_mode, v.query_quant_mode) == (7, 7, 7):
        return 17
    if (v.key_antiquant_mode, v.value_antiquant_mode, v.query_quant_mode) == (6, 8, 6):
        return 19
    return 30


def plan_impl(d: Draft, plat: Platform) -> None:
    v = d.view
    d.block_dim = d.decide("block_dim", tsch_num_blocks(plat.aiv, plat.aic, plat.aiv),
                           "every AIV:AIC group is launched whatever the work (SetBlockDim: "
                           "CalcTschBlockDim(aivNum, aicNum, aivNum)); the cores without tasks return at once")
    if v.empty:
        d.used_cores = d.decide("used_cores", plat.aic, "empty tensor: the output (and lse) is zero-filled across "
                                                        "all vector cores (FusedInferAttentionScoreTilingImpl::"
                                                        "SetEmptyTensor)")
        d.decide("flash_decode", False, "empty tensor: nothing to split")
        fields = {"quant_mode": 31, "empty_tensor": 1}
        d.tiling_key = d.decide("tiling_key", encode_arch35(fields),
                                "empty tensor: only the empty flag is set, every other field keeps its default "
                                "(quant_mode 31, the rest 0) (UpdateTilingKeyInfo)")
        d.key_fields = decode_arch35(d.tiling_key)
        from .workspace import Workspace, LIBAPI_WORKSPACE
        d.workspace = Workspace().add("libapi", LIBAPI_WORKSPACE)
        return
    flags = impl_flags(v)
    d.decide("impl_modes", {"ifa": flags.ifa, "pfa_merge": flags.pfa_merge, "gs_merge": flags.gs_merge},
             "; ".join(flags.reasons) + f"; IFA {'on' if flags.ifa else 'off'} (S1==1, no alibi, non-transposed "
                                        "layout) (FusedInferAttentionScoreTilingImpl)")
    anti = v.quant_mode == "anti"
    q, kv = _antiquant_lengths(v, flags) if anti else _impl_lengths(v, flags)
    # the split counts rows of the merged (G*S1) space when G is folded into S1; the result keeps the per-batch
    # query length S1, which is what RowTask rows and the kernel's fold are counted in (the antiquant lengths
    # are merged unless op_host's quirks left them unmultiplied: max workspace, a valid query-length list)
    merged_q = not anti or (not v.max_workspace and (v.q_layout == "TND" or not flags.actual_q_valid))
    d.q_lens = tuple(x // v.g for x in q) if (flags.gs_merge and merged_q and v.g > 1) else q
    d.kv_lens = kv
    dn = False
    s1os = False
    if anti:
        blocks, split_inner = impl_antiquant_blocks(v, flags)
        m_rows = blocks.s_outer
    else:
        blocks, dn = impl_blocks(v, flags, q, kv)
        split_inner = blocks.s_inner
        m_rows = blocks.m_base
    d.m_base = d.decide("m_base", m_rows, blocks.reason)
    d.s2_base = d.decide("s2_base", split_inner, blocks.reason)
    if dn:
        d.decide("dn_softmax", True, "no mask/pse/PA/rope/prefix, D and Dv <= 128: transposed softmax (DN)")
    cfg, why = impl_config(v, blocks)
    d.decide("config", cfg, why)
    heads = v.n2 if flags.gs_merge else v.n1
    d.m_order = "S1G" if (flags.gs_merge and v.s1_major) else "GS1"
    if not anti:
        s1os, swhy = impl_s1_outer_split(v, flags, blocks, dn, q, kv, plat.aic, plat.l2)
        d.decide("s1_outer_split", s1os, swhy + " (FusedInferAttentionScoreTilingImpl::CheckS1OutSplit)")
    merged = flags.gs_merge and v.g > 1
    if anti:
        windows = antiquant_rows(batch=v.batch, heads=heads, q_lens=q, kv_lens=kv, s_outer=m_rows,
                                 s_inner=split_inner, mask=v.mask, sparse_mode=v.sparse_mode, pre=v.pre_tokens,
                                 nxt=v.next_tokens, prefix=v.prefix_len if v.prefix else 0, merged_rows=merged)
        target = antiquant_target_weight(batch=v.batch, heads=heads, q_lens=q, kv_lens=kv, s_outer=m_rows,
                                         s_inner=split_inner, s_inner_config=blocks.s_inner, mask=v.mask,
                                         sparse_mode=v.sparse_mode, pre=v.pre_tokens, nxt=v.next_tokens,
                                         prefix=v.prefix_len if v.prefix else 0)
    else:
        windows = row_windows(batch=v.batch, heads=heads, q_lens=q, kv_lens=kv, m=m_rows, s_inner=split_inner,
                              mask=v.mask, sparse_mode=v.sparse_mode, pre=v.pre_tokens, nxt=v.next_tokens,
                              prefix=v.prefix_len if v.prefix else 0, g=v.g, mla_512=v.mla_mode == "split_d512",
                              rope_split_512=v.rope_mode == "split" and v.v_dim == 512,
                              opt_layout=v.q_layout in ("BSH", "BSND", "TND"), merged_rows=merged)
        target = None
    fd = False
    if s1os:
        total = sum(1 for _ in windows)
        used = min(total, plat.aic)
        d.used_cores = d.decide("used_cores", used, f"S1 outer split: {total} (b, head, S1 block) units over "
                                                    f"{plat.aic} cube cores, scheduled by the kernel")
        d.cores = _round_robin(windows, used, v, flags, heads, d.q_lens)
    else:
        plan = split_nbseq(windows, plat.aic, total=target, integer_share=anti)
        d.used_cores = d.decide("used_cores", plan.used_cores,
                                f"weighted (B, N, S1-block) split: total weight {plan.total_weight} blocks, target "
                                f"{plan.total_weight / plat.aic:.2f} per cube core "
                                + ("(antiquant DequantCubeSplitBNSeq)" if anti else "(SplitNBSeq)"))
        d.cores = tuple(CoreWork(c, tuple(_impl_task(w, v, flags, heads, q_lens=d.q_lens) for w in rows
                                          if w.s2_hi > w.s2_lo),
                                 sum(w.weight for w in rows))
                        for c, rows in enumerate(plan.core_rows))
        pfa = flags.pfa
        if not pfa and (anti or (flags.ifa and not flags.pfa_merge)):
            fd, fwhy = impl_flash_decode(ifa=flags.ifa or anti, pfa_merge=flags.pfa_merge and not anti,
                                         antiquant=anti, prefix=v.prefix, s1=v.s1, rope=v.rope_mode != "none",
                                         max_s2=v.max_actual_seq, s_inner=split_inner, s_outer=blocks.s_outer,
                                         batch=v.batch, n2=v.n2, g=v.g, aic=plat.aic,
                                         per_block_quant=v.full_quant_mode == "per_block")
        else:
            fwhy = "not an IFA problem or PFA merge on: no FD"
        d.decide("flash_decode", fd, fwhy + " (FusedInferAttentionScoreTilingImpl::CheckFlashDecode)")
    accum = lse = 0
    if fd:
        parts, kwhy = impl_kv_splits(aic=plat.aic, batch=v.batch, n2=v.n2, g=v.g, s_outer=blocks.s_outer, s2=v.s2,
                                     s_inner=split_inner)
        d.decide("kv_splits", parts, kwhy)
        _impl_fd_tasks(d, v, windows, parts)
        dv_align = (v.v_dim + 31) // 32 * 32
        accum = v.batch * v.n1 * parts * dv_align
        lse = v.batch * v.n1 * parts * 8
    d.workspace = arch35_impl_workspace(vector_cores=plat.aiv, aic=plat.aic, s_outer=blocks.s_outer, v_dim=v.v_dim,
                                        dn=dn, fd=fd, accum_out_elems=accum, lse_elems=lse, paged=v.paged,
                                        max_workspace=v.max_workspace, antiquant=anti, qk_dim=v.qk_dim)
    d.decide("workspace_bytes", d.workspace.total, "FusedInferAttentionScoreTilingImpl::GetWorkspace")
    rope = (v.quant_mode == "none" and v.mla_mode == "split_d128") or (v.quant_mode == "full" and
                                                                       v.rope_mode == "split")
    fields = _base_fields(v, config=cfg, quant=_impl_quant_mode(v), rope=rope, kv_layout=1 if v.paged else 0,
                          fd=fd, refactored=False, s1os=s1os)
    _set_key(d, fields, "FusedInferAttentionScoreTilingImpl::GenTilingKey")


def _impl_task(w, v: TilingView, flags, heads: int, lo: int | None = None, hi: int | None = None, fd_task: int = -1,
               piece: int = 0, q_lens: tuple | None = None) -> RowTask:
    """A split window as a RowTask: per query head windows map into the folded rows of their kv head,
    head g's rows starting at g * S1_b (the batch's own query length, the GS1 fold)."""
    lo = w.s2_lo if lo is None else lo
    hi = w.s2_hi if hi is None else hi
    if flags.gs_merge:
        return RowTask(w.b, w.head, w.row_start, w.rows, lo, hi, fd_task, piece)
    n2, g = divmod(w.head, v.g)
    s1_b = q_lens[w.b] if q_lens is not None else v.s1
    return RowTask(w.b, n2, g * s1_b + w.row_start, w.rows, lo, hi, fd_task, piece)


def _round_robin(windows, used: int, v: TilingView, flags, heads: int, q_lens: tuple) -> tuple:
    lists = [[] for _ in range(used)]
    for i, w in enumerate(windows):
        if w.s2_hi > w.s2_lo:
            lists[i % used].append(_impl_task(w, v, flags, heads, q_lens=q_lens))
    return tuple(CoreWork(c, tuple(t), 0) for c, t in enumerate(lists))


def _impl_fd_tasks(d: Draft, v: TilingView, windows, parts: int) -> None:
    """cvtile's FD work for the catch-all: each row's S2 blocks cut into ``parts`` near-equal runs, one per core."""
    flags = impl_flags(v)
    heads = v.n2 if flags.gs_merge else v.n1
    cores, tasks = [], []
    slot = 0
    for w in windows:
        blocks = w.s2_hi - w.s2_lo
        if blocks <= 0:
            continue
        k = max(1, min(parts, blocks))
        t_index = len(tasks) if k > 1 else -1
        base = _impl_task(w, v, flags, heads, q_lens=d.q_lens)
        if k > 1:
            tasks.append(FdTask(base.b, base.n2, base.m_start, base.m_rows, k, slot))
            slot += k
        per, extra = divmod(blocks, k)
        lo = w.s2_lo
        for p in range(k):
            hi = lo + per + (1 if p < extra else 0)
            cores.append(CoreWork(len(cores), (_impl_task(w, v, flags, heads, lo, hi, t_index, p if k > 1 else 0,
                                                          q_lens=d.q_lens),), hi - lo))
            lo = hi
    d.cores = tuple(cores)
    d.fd_tasks = tuple(tasks)
    d.used_cores = d.decide("used_cores", len(cores), f"FD: {len(windows)} rows x up to {parts} KV pieces, one "
                                                      "piece per core (cvtile's even cut of the S2 blocks)")
    entries = []
    for t, task in enumerate(tasks):
        entries.append((t, 0, task.m_rows))
    d.fd_vector_work = vector_work_v2(entries)
