"""Planners of the arch22 (Atlas A2/A3) FIA templates: blocks -> core split -> FD plan -> workspace -> key.

Model
-----
One function per template, each filling a :class:`~.draft.Draft`:

* ``plan_gqa`` — ``FiaTilingNonQuant``: block sizes from :mod:`.blocks`, the
  cost-based split of :mod:`.split_core` over all cube cores (FD iff a row was
  split), the combine balance, the workspace, the decimal key;
* ``plan_mla`` — ``FiaTilingNonQuantMla``: the same with the MLA block rules;
* ``plan_empty`` — ``FiaTilingEmptyTensor``: no split, key ``10^17 + 20``.

Plan search (:mod:`.plan_overrides`): ``plan_gqa`` and ``plan_mla`` take ``m_base`` / ``s2_base`` (multiples
of 16) in place of the template's blocks and ``cores`` in place of split_core's search (one greedy pass for
that core count); the grid, the FD plan (it follows the core split), the workspace and the key are then
derived as for op_host's own plan. A tiling sink refuses them.

A "tiling sink" (a length list without values) skips the split: op_host sizes the
largest workspace and launches every cube core; the kernel splits at run time.

Split inputs follow op_host's ``CreateSplitInput``: the per-batch query lengths come
from ``actual_seq_lengths`` when given (1 element broadcasts, TND lists are
cumulative), the KV lengths from ``actual_seq_lengths_kv`` (or a tensor list's
lengths), plus the system prefix; without lists every batch has the shape's S1 / S2
(S2 = 0 is tiled as 1024).

Invariants
----------
* The key's FD bit equals ``bool(fd_tasks)``; its PA bit is set for paged attention.
"""

from __future__ import annotations

from dataclasses import replace

from .block_grid import BlockGrid, GridSpec, per_batch_lengths
from .blocks import arch22_gqa_blocks, arch22_mla_blocks
from .draft import Draft
from .plan_overrides import forced, refuse_overrides
from .platform import Platform
from .split_core import plan_for_cores, search_bounds, split_core, split_fd
from .tasks import core_work, vector_work_v1
from .tiling_key import ARCH22_EMPTY_TENSOR_KEY, DTYPE_CODE, decode_arch22, encode_arch22
from .workspace import arch22_gqa_workspace, arch22_mla_workspace, fixed_workspace

__all__ = ["plan_gqa", "plan_mla", "plan_empty", "split_lengths_arch22"]

_Q_LAYOUT = {"BNSD": 0, "BSH": 1, "BSND": 1, "TND": 3, "NTD": 5}
_KV_LAYOUT = {"BNSD": 0, "BnNBsD": 0, "BSH": 1, "BSND": 1, "BnBsH": 1, "NZ": 2, "TND": 3, "NTD": 5}
_MLA_Q_LAYOUT = {"BNSD": 0, "BSH": 1, "BSND": 1, "TND": 2}
_MLA_KV_LAYOUT = {"BNSD": 0, "BnNBsD": 0, "BSH": 1, "BSND": 1, "BnBsH": 1, "NZ": 2, "TND": 3}


def split_lengths_arch22(d: Draft, s2_default: int, *, with_prefix: bool) -> tuple[tuple, tuple]:
    """Per-batch (S1, S2) as the arch22 ``CreateSplitInput`` hands them to the splitter."""
    v = d.view
    prefix = v.prefix_len if (with_prefix and v.prefix) else 0
    q = per_batch_lengths(v.batch, v.s1, v.actual_q, cumulative=v.accum_q)
    if v.actual_kv is not None:
        kv = per_batch_lengths(v.batch, s2_default, v.actual_kv, cumulative=v.accum_kv, prefix=prefix)
    elif v.tensor_list and v.kv_list_lens:
        kv = per_batch_lengths(v.batch, s2_default, v.kv_list_lens, cumulative=v.accum_kv, prefix=prefix)
    else:
        kv = per_batch_lengths(v.batch, s2_default, None, prefix=prefix)
    return q, kv


def _key_digits(v, q_map, kv_map, flags: int, tail: int) -> dict:
    return {"q_layout": q_map.get(v.q_layout, 0), "q_dtype": DTYPE_CODE.get(v.q_dtype, 0),
            "kv_dtype": DTYPE_CODE.get(v.kv_dtype, 0), "out_dtype": DTYPE_CODE.get(v.out_dtype, 0),
            "origin_dtype": DTYPE_CODE.get(v.q_dtype, 0), "flags": flags, "antiquant_mode": 0,
            "kv_layout": kv_map.get(v.kv_layout, 0), "tail": tail}


def _split(d: Draft, plat: Platform, grid: BlockGrid, rule: str) -> None:
    forced_cores = forced(d, "cores", hi=plat.aic, rule=f"the platform's {plat.aic} cube cores")
    if forced_cores is not None:
        plan = plan_for_cores(grid, min(forced_cores, grid.total_blocks or 1))
        rule = f"plan search: {plan.used_cores} cores forced"
    else:
        plan = split_core(grid, plat.aic)
    cores, fd_tasks = core_work(grid, plan)
    d.cores, d.fd_tasks = cores, fd_tasks
    lo, hi = search_bounds(grid.total_blocks, plat.aic)
    d.used_cores = d.decide("used_cores", plan.used_cores,
                            f"cost-based split over {grid.total_blocks} blocks (cost {grid.total_cost}), "
                            f"core counts {lo}..{hi} tried: the fewest cores with the smallest slowest-core "
                            f"cost {plan.max_cost} ({rule})")
    if fd_tasks:
        pieces = [(t.m_rows + 7) // 8 for t in fd_tasks]
        ends = split_fd(plan.heads, pieces, plan.used_cores, plat.cv_ratio)
        d.fd_vector_work = vector_work_v1(fd_tasks, ends)
        d.decide("flash_decode", True, f"{len(fd_tasks)} row block(s) split across cores, up to "
                                       f"{max(t.splits for t in fd_tasks)} KV pieces: FD combine on "
                                       f"{len(ends)} vector cores (split_core FD heads + SplitFD)")
    else:
        d.decide("flash_decode", False, "no row block split across cores: no FD (split_core)")
    d.extras["split_ends"] = [tuple(e) for e in plan.ends]
    d.extras["core_costs"] = list(plan.costs)


def plan_gqa(d: Draft, plat: Platform) -> None:
    v = d.view
    blocks = arch22_gqa_blocks(qk_dim=v.qk_dim, rope_dim=v.rope_dim, v_dim=v.v_dim, tnd=v.tnd, s1=v.s1, g=v.g,
                               s2=v.s2, mask=v.mask, sparse_mode=v.sparse_mode, paged=v.paged,
                               block_size=v.block_size, prefix=v.prefix, pse=v.pse,
                               left_padding=v.q_padding or v.kv_padding)
    d.decide("template_id", blocks.template_id, blocks.reasons["template_id"])
    s2_eff = v.s2 if v.s2 != 0 else 1024
    paged_bit = 2 if v.paged else 0
    if v.max_workspace:
        _tiling_sink(d, plat, blocks)
        ws = arch22_gqa_workspace(cores=plat.aic, m_base=512, s2_base_aligned=512,
                                  head_dim_aligned=blocks.head_dim_aligned, gs1=v.g * v.s1, fd=True,
                                  max_workspace=True)
        flags = paged_bit
    else:
        blocks = _overridden(d, blocks)
        d.s2_base = d.decide("s2_base", blocks.s2_base, blocks.reasons["s2_base"])
        d.m_base = d.decide("m_base", blocks.m_base, blocks.reasons["m_base"])
        d.decide("softmax_brcb", blocks.softmax_brcb, blocks.reasons["softmax_brcb"])
        _grid_split(d, plat, blocks, s2_eff, with_prefix=True, rule="FiaTilingNonQuant -> split_core")
        ws = arch22_gqa_workspace(cores=plat.aic, m_base=blocks.m_base, s2_base_aligned=blocks.s2_base_aligned,
                                  head_dim_aligned=blocks.head_dim_aligned, gs1=v.g * v.s1, fd=bool(d.fd_tasks),
                                  kv_bytes=2)
        flags = (4 if blocks.softmax_brcb else 0) + paged_bit + (1 if d.fd_tasks else 0)
    d.workspace = ws
    d.decide("workspace_bytes", ws.total, "libapi 16 MiB + 2 preload x cores x (mm1 fp32 + P fp16 + mm2 fp32 + "
                                          "O fp32)" + (" + FD partials/max/sum" if "fd_partial_out" in ws.layout
                                                       else "") + " (FiaTilingNonQuant::CalcWorkspaceSize)")
    fields = {"mode": 1, "template": blocks.template_id}
    fields.update(_key_digits(v, _Q_LAYOUT, _KV_LAYOUT, flags, 2 if v.sparse_mode == 9 else 0))
    _set_key(d, encode_arch22(fields), "FiaTilingNonQuant::GenTilingKey: 10^17 + template*10^15 + digits "
                                       "(layout, q, kv, out, origin, brcb4+PA2+FD1, antiquant, kv layout, tree)")


def _overridden(d: Draft, blocks):
    """The template's blocks with the plan search's ``m_base`` / ``s2_base`` overrides, if any."""
    s2 = forced(d, "s2_base", lo=16, multiple=16, rule="whole 16-position fractal columns")
    m = forced(d, "m_base", lo=16, multiple=16, rule="whole 16-row fractals")
    if s2 is None and m is None:
        return blocks
    return replace(blocks, s2_base=s2 or blocks.s2_base, s2_base_aligned=s2 or blocks.s2_base_aligned,
                   m_base=m or blocks.m_base,
                   reasons={**blocks.reasons, "s2_base": "plan search override", "m_base": "plan search override"})


def _grid_split(d: Draft, plat: Platform, blocks, s2_eff: int, *, with_prefix: bool, rule: str) -> None:
    """Per-batch lengths, the (batch, head, M block, S2 block) grid at the template's bases, split_core."""
    v = d.view
    q, kv = split_lengths_arch22(d, s2_eff, with_prefix=with_prefix)
    d.q_lens, d.kv_lens = q, kv
    grid = BlockGrid(GridSpec(v.batch, v.n2, v.g, q, kv, blocks.m_base, blocks.s2_base, v.s1_major, v.mask,
                              v.sparse_mode, v.pre_tokens, v.next_tokens))
    _split(d, plat, grid, rule)


def plan_mla(d: Draft, plat: Platform) -> None:
    v = d.view
    blocks = arch22_mla_blocks(qk_dim=v.qk_dim, s2=v.s2, paged=v.paged, block_size=v.block_size, batch=v.batch,
                               n2=v.n2, s1=v.s1, g=v.g, cores=plat.aic, same_seq=v.same_actual_seq)
    d.decide("template_id", blocks.template_id, blocks.reasons["template_id"])
    s2_eff = v.s2 if v.s2 != 0 else 1024
    if v.max_workspace:
        _tiling_sink(d, plat, blocks)
        ws = arch22_mla_workspace(cores=plat.aic, m_base=blocks.m_base, s2_base_aligned=512,
                                  head_dim_aligned=blocks.head_dim_aligned, gs1=v.g * v.s1, n2=v.n2, fd=True,
                                  max_workspace=True)
        fd_bit = 0
    else:
        blocks = _overridden(d, blocks)
        d.s2_base = d.decide("s2_base", blocks.s2_base, blocks.reasons["s2_base"])
        d.m_base = d.decide("m_base", blocks.m_base, blocks.reasons["m_base"])
        _grid_split(d, plat, blocks, s2_eff, with_prefix=False, rule="FiaTilingNonQuantMla -> split_core")
        ws = arch22_mla_workspace(cores=plat.aic, m_base=blocks.m_base, s2_base_aligned=blocks.s2_base_aligned,
                                  head_dim_aligned=blocks.head_dim_aligned, gs1=v.g * v.s1, n2=v.n2,
                                  fd=bool(d.fd_tasks))
        fd_bit = 1 if d.fd_tasks else 0
    d.workspace = ws
    d.decide("workspace_bytes", ws.total, "libapi + 2 preload x cores x (mm1, P, mm2, O, AMLA n-update, sum)"
                                          " (+ FD areas) (FiaTilingNonQuantMla::CalcWorkspaceSize)")
    flags = (2 if v.paged else 0) + fd_bit
    tail = (1 if plat.cv_ratio == 1 else 0) + (2 if v.sparse_mode == 9 else 0)
    fields = {"mode": 2 if v.prefix else 1, "template": blocks.template_id}
    fields.update(_key_digits(v, _MLA_Q_LAYOUT, _MLA_KV_LAYOUT, flags, tail))
    _set_key(d, encode_arch22(fields), "FiaTilingNonQuantMla::GenTilingKey: 10^17 + 5*10^15 + digits "
                                       "(layout TND=2, q, kv, out, origin, PA2+FD1, antiquant, kv layout, CV1:1+tree)")


def plan_empty(d: Draft, plat: Platform) -> None:
    d.decide("template_id", 0, "empty query/output or empty key and value: FiaTilingEmptyTensor (priority 0)")
    d.used_cores = d.decide("used_cores", plat.aic, "the empty-tensor template zero-fills the output on every "
                                                    "cube core (FiaTilingEmptyTensor::InitParams)")
    d.decide("flash_decode", False, "empty tensor: nothing to split")
    d.workspace = fixed_workspace(16 * 1024 * 1024)
    d.decide("workspace_bytes", d.workspace.total, "fixed 16 MiB (FiaTilingEmptyTensor::CalcWorkspaceSize)")
    _set_key(d, ARCH22_EMPTY_TENSOR_KEY, "FiaTilingEmptyTensor: 10^17 + 20")


def _tiling_sink(d: Draft, plat: Platform, blocks) -> None:
    refuse_overrides(d, "a tiling sink has no host split (the kernel splits at run time)")
    d.s2_base = blocks.s2_base
    d.m_base = blocks.m_base
    d.used_cores = d.decide("used_cores", plat.aic, "tiling sink (a length list without values): no split on the "
                                                    "host, every cube core launched, max workspace")
    d.decide("flash_decode", False, "tiling sink: FD is decided by the kernel at run time (key FD bit off)")
    d.extras["tiling_sink"] = True


def _set_key(d: Draft, key: int, rule: str) -> None:
    d.tiling_key = d.decide("tiling_key", key, rule)
    d.key_fields = decode_arch22(key)
